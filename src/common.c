// common.c: error messages, allocation wrappers, logging, timing and file helpers (common.h).
#include "common.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Thread_local char err_buf[1024];

const char *lily_strerror(int code) {
    switch (code) {
    case LILY_OK: return "ok";
    case LILY_EIO: return "I/O error";
    case LILY_EFORMAT: return "format error";
    case LILY_ESHAPE: return "shape error";
    case LILY_EMISSING: return "missing";
    case LILY_EUNSUPPORTED: return "unsupported";
    case LILY_ENOMEM: return "out of memory";
    case LILY_EINVAL: return "invalid argument";
    case LILY_ERANGE: return "out of range";
    case LILY_EBACKEND: return "backend error";
    case LILY_ECANCELLED: return "cancelled";
    default: return "unknown error";
    }
}

int lily_err_set(int code, const char *fmt, ...) {
    // Format into a scratch buffer first: callers may pass lily_err_msg() itself as an argument
    // to add context to the last message ("%s: %s", path, lily_err_msg()).
    char tmp[sizeof err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(err_buf, tmp, sizeof err_buf);
    // Keep the message on one line whatever the input held.
    for (char *p = err_buf; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return code;
}

const char *lily_err_msg(void) { return err_buf; }

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "lily: out of memory allocating %zu bytes\n", n);
        abort();
    }
    return p;
}

void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "lily: out of memory allocating %zu x %zu bytes\n", n, size);
        abort();
    }
    return p;
}

void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "lily: out of memory reallocating %zu bytes\n", n);
        abort();
    }
    return q;
}

char *xstrdup(const char *s) {
    size_t n = strlen(s);
    char *p = xmalloc(n + 1);
    memcpy(p, s, n + 1);
    return p;
}

void *xmalloc_aligned(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? (n + 63) / 64 * 64 : 64) != 0) {
        fprintf(stderr, "lily: out of memory allocating %zu aligned bytes\n", n);
        abort();
    }
    return p;
}

void lily_log(int level, const char *fmt, ...) {
    static int cur = -1;
    if (cur < 0) {
        const char *e = getenv("LILY_LOG");
        cur = e ? atoi(e) : 1;
    }
    if (level > cur) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("lily: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

double lily_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int lily_read_file(const char *path, size_t max_bytes, char **out, size_t *out_len) {
    *out = NULL;
    if (out_len) *out_len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return lily_err_set(LILY_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return lily_err_set(LILY_EIO, "%s: not a regular file", path);
    }
    size_t n = (size_t)st.st_size;
    if (max_bytes && n > max_bytes) {
        fclose(f);
        return lily_err_set(LILY_EFORMAT, "%s: file too large (%zu bytes, limit %zu)", path, n, max_bytes);
    }
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return lily_err_set(LILY_ENOMEM, "%s: cannot allocate %zu bytes", path, n);
    }
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    if (got != n) {
        free(buf);
        return lily_err_set(LILY_EIO, "%s: short read (%zu of %zu bytes)", path, got, n);
    }
    buf[n] = 0;
    *out = buf;
    if (out_len) *out_len = n;
    return 0;
}

int lily_parse_ids(const char *s, int strict, int **ids, int *n) {
    int cap = 16, cnt = 0;
    int *v = xmalloc((size_t)cap * sizeof *v);
    const char *p = s, *sep = strict ? "," : ", \t\r\n";
    if (!strict)
        while (*p && (strchr(sep, *p) || *p == '[')) p++;
    while (*p && (strict || *p != ']')) {
        if (!((*p >= '0' && *p <= '9') || (!strict && *p == '-'))) goto bad;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p) goto bad;
        if (errno || x > INT32_MAX || x < -INT32_MAX) {
            free(v);
            return lily_err_set(LILY_ERANGE, "byte %ld: token id %.24s is out of range", (long)(p - s), p);
        }
        if (cnt == (1 << 24)) {
            free(v);
            return lily_err_set(LILY_ERANGE, "more than %d token ids", 1 << 24);
        }
        if (cnt == cap) v = xrealloc(v, (size_t)(cap *= 2) * sizeof *v);
        v[cnt++] = (int)x;
        p = end;
        if (strict) {
            if (*p == ',' && p[1]) p++;
            else if (*p) goto bad;
        } else {
            if (*p && !strchr(sep, *p) && *p != ']') goto bad;
            while (*p && strchr(sep, *p)) p++;
        }
    }
    if (!strict && *p == ']') {
        p++;
        while (*p && strchr(", \t\r\n", *p)) p++;
        if (*p) goto bad;
    }
    if (cnt == 0) goto bad;
    *ids = v;
    *n = cnt;
    return 0;
bad:
    free(v);
    return lily_err_set(LILY_EINVAL, "byte %ld: expected a token id (%s)", (long)(p - s),
                        strict ? "comma-separated non-negative integers"
                               : "integers separated by commas or white space");
}

char *lily_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = xmalloc(a + b + 2);
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

int lily_num_threads(void) {
    const char *e = getenv("LILY_THREADS");
    if (e && atoi(e) > 0) return atoi(e);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n > 256 ? 256 : n) : 1;
}
