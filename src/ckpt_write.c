// ckpt_write.c: the sharded, multi-threaded safetensors writer of ckpt_write.h.
#include "ckpt_write.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "quant.h"
#include "safetensors.h"

#define CHUNK_BYTES (8u << 20) // rows per work item: about this many bytes

static uint64_t row_bytes(const struct ckpt_tensor *t) {
    return (uint64_t)t->shape[t->ndim - 1] * (uint64_t)lily_dtype_size(t->dtype);
}

static uint64_t n_rows(const struct ckpt_tensor *t) {
    uint64_t n = 1;
    for (int i = 0; i < t->ndim - 1; i++) n *= (uint64_t)t->shape[i];
    return n;
}

static uint64_t tensor_bytes(const struct ckpt_tensor *t) { return row_bytes(t) * n_rows(t); }

void ckpt_add(struct ckpt_writer *w, const char *name, int dtype, int ndim, const int64_t *shape,
              ckpt_fill_fn fill, const void *ctx) {
    CHECK(ndim >= 1 && ndim <= 4);
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 256;
        w->t = xrealloc(w->t, (size_t)w->cap * sizeof *w->t);
    }
    struct ckpt_tensor *t = &w->t[w->n++];
    memset(t, 0, sizeof *t);
    t->name = xstrdup(name);
    t->dtype = dtype;
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->fill = fill;
    t->ctx = ctx;
}

uint64_t ckpt_bytes(const struct ckpt_writer *w) {
    uint64_t s = 0;
    for (int i = 0; i < w->n; i++) s += tensor_bytes(&w->t[i]);
    return s;
}

void ckpt_free(struct ckpt_writer *w) {
    for (int i = 0; i < w->n; i++) free(w->t[i].name);
    free(w->t);
    memset(w, 0, sizeof *w);
}

// Work item: rows [r0, r0+n) of tensor t, written at file offset `off` of shard file `fd`.
struct item {
    int t;
    long r0, n;
};

struct pool {
    struct ckpt_writer *w;
    struct item *items;
    long n_items;
    atomic_long next;
    int *fds;
    uint64_t *data_start;
    atomic_int err;
};

static void *worker(void *arg) {
    struct pool *p = arg;
    uint8_t *buf = NULL;
    size_t cap = 0;
    for (;;) {
        long i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n_items || atomic_load(&p->err)) break;
        struct item *it = &p->items[i];
        struct ckpt_tensor *t = &p->w->t[it->t];
        size_t rb = (size_t)row_bytes(t), len = rb * (size_t)it->n;
        if (len > cap) {
            free(buf);
            buf = xmalloc(len);
            cap = len;
        }
        t->fill(t->ctx, it->r0, it->n, buf);
        off_t off = (off_t)(p->data_start[t->shard] + t->offset + (uint64_t)it->r0 * rb);
        for (size_t done = 0; done < len;) {
            ssize_t k = pwrite(p->fds[t->shard], buf + done, len - done, off + (off_t)done);
            if (k <= 0) {
                atomic_store(&p->err, errno ? errno : EIO);
                break;
            }
            done += (size_t)k;
        }
    }
    free(buf);
    return NULL;
}

static int cmp_esize(const void *a, const void *b, void *arg) {
    const struct ckpt_tensor *t = arg;
    int x = *(const int *)a, y = *(const int *)b;
    int ex = lily_dtype_size(t[x].dtype), ey = lily_dtype_size(t[y].dtype);
    if (ex != ey) return ey - ex;
    return x - y;
}

// mkdir -p
static int make_dirs(const char *dir) {
    char *p = xstrdup(dir);
    int rc = 0;
    for (char *s = p + 1; *s && !rc; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0777) && errno != EEXIST) rc = -1;
            *s = '/';
        }
    if (!rc && mkdir(p, 0777) && errno != EEXIST) rc = -1;
    free(p);
    return rc;
}

int ckpt_write(struct ckpt_writer *w, const char *dir, uint64_t shard_bytes, int n_threads) {
    if (make_dirs(dir))
        return lily_err_set(LILY_EIO, "%s: cannot create directory: %s", dir, strerror(errno));
    // Shards in declaration order; a new one when the current one would pass shard_bytes.
    int n_shards = 0;
    uint64_t cur = 0;
    for (int i = 0; i < w->n; i++) {
        uint64_t b = tensor_bytes(&w->t[i]);
        if (n_shards == 0 || (cur > 0 && cur + b > shard_bytes)) n_shards++, cur = 0;
        w->t[i].shard = n_shards - 1;
        cur += b;
    }
    char **names = xcalloc((size_t)n_shards, sizeof *names);
    int *fds = xmalloc((size_t)n_shards * sizeof *fds);
    for (int s = 0; s < n_shards; s++) fds[s] = -1;
    uint64_t *data_start = xcalloc((size_t)n_shards, sizeof *data_start);
    int *order = xmalloc((size_t)w->n * sizeof *order);
    json_t *wmap = json_object();
    int rc = 0;
    for (int s = 0; s < n_shards && !rc; s++) {
        char fn[64];
        if (n_shards == 1) snprintf(fn, sizeof fn, "model.safetensors");
        else snprintf(fn, sizeof fn, "model-%05d-of-%05d.safetensors", s + 1, n_shards);
        names[s] = lily_path_join(dir, fn);
        int n = 0;
        for (int i = 0; i < w->n; i++)
            if (w->t[i].shard == s) order[n++] = i;
        qsort_r(order, (size_t)n, sizeof *order, cmp_esize, w->t);
        json_t *h = json_object();
        json_object_set_new(h, "__metadata__", json_pack("{s:s}", "format", "mlx"));
        uint64_t off = 0;
        for (int k = 0; k < n; k++) {
            struct ckpt_tensor *t = &w->t[order[k]];
            t->offset = off;
            json_t *shape = json_array();
            for (int d = 0; d < t->ndim; d++) json_array_append_new(shape, json_integer(t->shape[d]));
            json_object_set_new(h, t->name,
                                json_pack("{s:s,s:o,s:[I,I]}", "dtype", st_dtype_name(t->dtype), "shape",
                                          shape, "data_offsets", (json_int_t)off,
                                          (json_int_t)(off + tensor_bytes(t))));
            off += tensor_bytes(t);
            json_object_set_new(wmap, t->name, json_string(fn));
        }
        char *txt = json_dumps(h, JSON_COMPACT);
        json_decref(h);
        size_t len = strlen(txt), pad = (8 - len % 8) % 8;
        uint8_t *hb = xmalloc(8 + len + pad);
        for (int i = 0; i < 8; i++) hb[i] = (uint8_t)((uint64_t)(len + pad) >> (8 * i));
        memcpy(hb + 8, txt, len);
        memset(hb + 8 + len, ' ', pad);
        free(txt);
        data_start[s] = 8 + len + pad;
        fds[s] = open(names[s], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fds[s] < 0 || write(fds[s], hb, 8 + len + pad) != (ssize_t)(8 + len + pad) ||
            ftruncate(fds[s], (off_t)(data_start[s] + off)))
            rc = lily_err_set(LILY_EIO, "%s: cannot write: %s", names[s], strerror(errno));
        free(hb);
    }
    if (!rc) {
        struct pool p = {.w = w, .fds = fds, .data_start = data_start};
        long cap = 0;
        for (int i = 0; i < w->n; i++) {
            uint64_t rb = row_bytes(&w->t[i]), nr = n_rows(&w->t[i]);
            long per = (long)(CHUNK_BYTES / (rb ? rb : 1));
            if (per < 1) per = 1;
            for (long r = 0; r < (long)nr; r += per) {
                if (p.n_items == cap) {
                    cap = cap ? 2 * cap : 1024;
                    p.items = xrealloc(p.items, (size_t)cap * sizeof *p.items);
                }
                p.items[p.n_items++] = (struct item){i, r, (long)nr - r < per ? (long)nr - r : per};
            }
        }
        if (n_threads < 1) n_threads = 1;
        pthread_t *th = xmalloc((size_t)n_threads * sizeof *th);
        for (int i = 0; i < n_threads; i++) CHECK(pthread_create(&th[i], NULL, worker, &p) == 0);
        for (int i = 0; i < n_threads; i++) pthread_join(th[i], NULL);
        free(th);
        free(p.items);
        if (atomic_load(&p.err))
            rc = lily_err_set(LILY_EIO, "%s: write failed: %s", dir, strerror(atomic_load(&p.err)));
    }
    for (int s = 0; s < n_shards; s++)
        if (fds[s] >= 0 && close(fds[s]) && !rc)
            rc = lily_err_set(LILY_EIO, "%s: close failed: %s", names[s], strerror(errno));
    if (!rc && n_shards > 1) {
        json_t *idx = json_pack("{s:{s:I},s:o}", "metadata", "total_size", (json_int_t)ckpt_bytes(w),
                                "weight_map", wmap);
        wmap = NULL;
        char *ip = lily_path_join(dir, "model.safetensors.index.json");
        if (json_dump_file(idx, ip, JSON_INDENT(2) | JSON_SORT_KEYS))
            rc = lily_err_set(LILY_EIO, "%s: cannot write", ip);
        free(ip);
        json_decref(idx);
    }
    json_decref(wmap);
    for (int s = 0; s < n_shards; s++) free(names[s]);
    free(names);
    free(fds);
    free(data_start);
    free(order);
    return rc;
}
