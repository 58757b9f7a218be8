// quantize.h: `lily quantize`: any checkpoint the loader accepts -> the MLX affine layout.
#ifndef LILY_QUANTIZE_H
#define LILY_QUANTIZE_H

// Quantise the model in `in` to `bits`/`group` (router and shared_expert_gate at 8 bits, group 64)
// and write it to `out`. Returns 0 or LILY_E*.
int quantize_model(const char *in, const char *out, int bits, int group, int threads);

#endif
