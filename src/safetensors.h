// safetensors.h: the safetensors container, parsed as a pure function of a byte buffer so that it
// can be fuzzed on its own (tests/fuzz/fuzz_safetensors.c). The loader mmaps a file and hands the
// whole mapping to st_header_parse; the writer (ckpt_write.h) produces files this parser accepts.
//
// File layout: u64 little-endian header length N, N bytes of JSON (may be padded with spaces),
// then the data buffer. The JSON maps tensor names to {dtype, shape, data_offsets: [begin, end]}
// (offsets relative to the data buffer) plus an optional "__metadata__" object of strings.
#ifndef LILY_SAFETENSORS_H
#define LILY_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER (100u * 1000u * 1000u) // as the reference implementation: 100 MB

struct st_tensor {
    char *name;
    const char *dtype_name;   // the safetensors spelling ("BF16", "U32", ...)
    int dtype;                // LILY_DT_* or -1 for a valid safetensors dtype Lily never reads
    int esize;                // bytes per element
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t numel;
    uint64_t begin, end;      // byte range within the data buffer
};

struct st_header {
    struct st_tensor *t;      // tensors sorted by begin offset
    int n;
    uint64_t data_start;      // file offset of the data buffer (8 + N)
    uint64_t data_size;       // bytes of the data buffer
};

// Parse and validate the header of a safetensors file of `len` bytes at `buf`. Checks the header
// length, that it is UTF-8 JSON starting with '{', every tensor's dtype, shape and offsets, and
// that the tensors tile the data buffer exactly (no overlap, gap or trailing bytes). `path` names
// the file in error messages. On failure returns a negative LILY_E* and leaves `h` empty.
int st_header_parse(const uint8_t *buf, size_t len, const char *path, struct st_header *h);
void st_header_free(struct st_header *h);

// Size in bytes of a safetensors dtype name, with its LILY_DT_* (or -1) in *lily; 0 if unknown.
int st_dtype_size(const char *name, int *lily);
// The safetensors spelling of a plain LILY_DT_* dtype.
const char *st_dtype_name(int lily_dtype);

#endif
