// synth.h: random-weight checkpoints in the MLX affine layout (`lily synth`): the full-size
// Qwen3.6-35B-A3B shapes for speed work, and small presets for tests.
#ifndef LILY_SYNTH_H
#define LILY_SYNTH_H

#include <stdint.h>

struct synth_opts {
    const char *preset;   // "qwen3.6-35b-a3b", "small", "tiny"
    const char *out;
    uint64_t seed;
    int vocab;            // 0 = the preset's
    int bits, group;      // bulk quantisation (router and shared gate: 8 bits)
    int threads;
};

// Write the checkpoint; prints progress to stderr. Returns 0 or LILY_E*.
int synth_write(const struct synth_opts *o);
// Names of the presets, space separated (for usage text).
const char *synth_presets(void);

#endif
