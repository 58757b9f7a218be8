// ckpt_write.h: a safetensors checkpoint writer for `lily synth` and `lily quantize`. The caller
// declares every tensor with a fill callback; the writer splits the tensors into shards of about
// `shard_bytes`, writes each header (tensors with larger elements first, so every tensor is aligned
// to its element size, as the loader requires), then fills the data with a pool of threads, each
// producing chunks of whole rows into its own buffer and writing them with pwrite. Writes
// model.safetensors.index.json when there is more than one shard.
#ifndef LILY_CKPT_WRITE_H
#define LILY_CKPT_WRITE_H

#include <stdint.h>

// Fill rows [r0, r0 + n) of a tensor, viewed as [n_rows, row_bytes] (leading dims flattened), into
// dst. Called concurrently from several threads for different row ranges.
typedef void (*ckpt_fill_fn)(const void *ctx, long r0, long n, uint8_t *dst);

struct ckpt_tensor {
    char *name;
    int dtype;                // LILY_DT_F32 / F16 / BF16 / U32
    int ndim;
    int64_t shape[4];
    ckpt_fill_fn fill;
    const void *ctx;
    // set by the writer
    int shard;
    uint64_t offset;
};

struct ckpt_writer {
    struct ckpt_tensor *t;
    int n, cap;
};

// Declare a tensor (name copied; ctx must outlive ckpt_write).
void ckpt_add(struct ckpt_writer *w, const char *name, int dtype, int ndim, const int64_t *shape,
              ckpt_fill_fn fill, const void *ctx);
// Write all tensors into `dir` (created if needed) with `n_threads` threads. Returns 0 or LILY_E*.
int ckpt_write(struct ckpt_writer *w, const char *dir, uint64_t shard_bytes, int n_threads);
void ckpt_free(struct ckpt_writer *w);

// Total bytes of the tensors declared so far.
uint64_t ckpt_bytes(const struct ckpt_writer *w);

#endif
