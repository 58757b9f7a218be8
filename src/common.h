// common.h: error codes, the one-line error message, CHECK macros, small helpers.
//
// Two error policies (docs/ARCHITECTURE.md):
//   - Anything fed by the outside world (checkpoint files, tokenizer files, HTTP, JSON, prompts)
//     returns 0 or a negative LILY_E* code and leaves a one-line message in a thread-local buffer
//     (lily_err_set / lily_err_msg). It never aborts.
//   - Programmer invariants and failures of libc/CUDA during setup go through CHECK(), which prints
//     the expression, file and line, then aborts.
#ifndef LILY_COMMON_H
#define LILY_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define LILY_VERSION "0.1.0"

// ---------------------------------------------------------------------------------------------
// Error codes (negative on failure).
enum lily_err {
    LILY_OK = 0,
    LILY_EIO = -1,        // file missing, unreadable, mmap failed
    LILY_EFORMAT = -2,    // malformed file content (JSON, safetensors header, tokenizer.json)
    LILY_ESHAPE = -3,     // tensor shape/dtype disagrees with the config
    LILY_EMISSING = -4,   // a required tensor or key is absent
    LILY_EUNSUPPORTED = -5, // valid but not something Lily runs (dtype, layout, template)
    LILY_ENOMEM = -6,     // allocation failed (host or device)
    LILY_EINVAL = -7,     // bad argument from a caller or user
    LILY_ERANGE = -8,     // a value out of its allowed range (context length, token id)
    LILY_EBACKEND = -9,   // a backend (CUDA) error at run time
    LILY_ECANCELLED = -10 // work cancelled by its owner
};

// Short name of an error code ("format error", ...).
const char *lily_strerror(int code);

// Set the thread-local one-line error message (printf style) and return `code`, so that callers can
// write `return lily_err_set(LILY_EFORMAT, "%s: header length past end of file", path);`.
int lily_err_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// The last message set on this thread ("" if none).
const char *lily_err_msg(void);

// ---------------------------------------------------------------------------------------------
// Invariants: abort with the expression, file and line.
#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "lily: CHECK failed: %s at %s:%d\n", #cond, __FILE__, __LINE__);   \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

// Allocation that aborts on failure: only for sizes that Lily itself chose (not from untrusted input
// without a bound check first). Never NULL: said to the compiler, so that static analysers (gcc
// -fanalyzer, clang's) do not follow a NULL return that cannot happen.
#define LILY_ALLOC __attribute__((returns_nonnull, warn_unused_result))
LILY_ALLOC void *xmalloc(size_t n);
LILY_ALLOC void *xcalloc(size_t n, size_t size);
LILY_ALLOC void *xrealloc(void *p, size_t n);
LILY_ALLOC char *xstrdup(const char *s);
// 64-byte aligned allocation for SIMD buffers; free with free().
LILY_ALLOC void *xmalloc_aligned(size_t n);

// ---------------------------------------------------------------------------------------------
// Logging to stderr; level from LILY_LOG (0 quiet, 1 info (default), 2 debug).
void lily_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define LOG_INFO(...) lily_log(1, __VA_ARGS__)
#define LOG_DEBUG(...) lily_log(2, __VA_ARGS__)

// Monotonic time in seconds.
double lily_time(void);

// Read a whole file into a NUL-terminated malloc'd buffer. Returns 0 or LILY_EIO (with message).
// `max_bytes` bounds the size (0 = no bound beyond memory).
int lily_read_file(const char *path, size_t max_bytes, char **out, size_t *out_len);

// Parse a list of token ids into a malloc'd array (*n >= 1). strict = 1 accepts exactly
// "1,2,3" (the `--ids` contract of lily logits); strict = 0 also accepts white space as a
// separator, repeated separators, "[1, 2, 3]" as `lily tokenize` prints it, and a minus sign (so
// that the caller's range check names a negative id). Ranges against a vocabulary are the
// caller's. Returns 0, or LILY_EINVAL with a message giving the byte offset of the problem.
int lily_parse_ids(const char *s, int strict, int **ids, int *n);

// Join a directory and a file name into a malloc'd path.
char *lily_path_join(const char *dir, const char *name);

// Number of worker threads for CPU compute (LILY_THREADS or the number of online CPUs).
int lily_num_threads(void);

#endif
