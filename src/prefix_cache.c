// prefix_cache.c: snapshot LRU with a byte budget (prefix_cache.h). Linear scans: the cache holds
// tens of entries (each one a whole model state), so a scan is noise next to one forward pass.
#include "prefix_cache.h"

#include <stdlib.h>
#include <string.h>

#include "common.h"

void pcache_init(struct pcache *c, size_t budget, int n_vocab, pcache_blob_free blob_free, void *blob_arg) {
    memset(c, 0, sizeof *c);
    c->budget = budget;
    c->n_vocab = n_vocab;
    c->blob_free = blob_free;
    c->blob_arg = blob_arg;
}

size_t pcache_need(const struct pcache *c, int n, size_t blob_bytes, int with_logits) {
    return blob_bytes + (size_t)n * sizeof(int) + (with_logits ? (size_t)c->n_vocab * 4 : 0);
}

static size_t entry_bytes(const struct pcache *c, const struct pcache_entry *e) {
    return pcache_need(c, e->n, e->blob_bytes, e->logits != NULL);
}

static void blob_release(struct pcache *c, void *blob) {
    if (!blob) return;
    if (c->blob_free)
        c->blob_free(c->blob_arg, blob);
    else
        free(blob);
}

static void entry_drop(struct pcache *c, int i) {
    struct pcache_entry *e = &c->e[i];
    c->bytes -= entry_bytes(c, e);
    free(e->tokens);
    blob_release(c, e->blob);
    free(e->logits);
    c->e[i] = c->e[--c->n];
}

void pcache_free(struct pcache *c) {
    while (c->n) entry_drop(c, c->n - 1);
    free(c->e);
    memset(c, 0, sizeof *c);
}

const struct pcache_entry *pcache_find(struct pcache *c, const int *tokens, int n) {
    struct pcache_entry *best = NULL;
    for (int i = 0; i < c->n; i++) {
        struct pcache_entry *e = &c->e[i];
        if (e->n > n || (best && e->n <= best->n)) continue;
        if (memcmp(e->tokens, tokens, (size_t)e->n * sizeof(int))) continue;
        best = e;
    }
    if (best) best->used = ++c->clock;
    return best;
}

int pcache_has(struct pcache *c, const int *tokens, int n) {
    for (int i = 0; i < c->n; i++)
        if (c->e[i].n == n && !memcmp(c->e[i].tokens, tokens, (size_t)n * sizeof(int))) {
            c->e[i].used = ++c->clock;
            return 1;
        }
    return 0;
}

int pcache_make_room(struct pcache *c, size_t need) {
    if (need > c->budget) return 0;
    while (c->n && c->bytes + need > c->budget) {
        int lru = 0;
        for (int i = 1; i < c->n; i++)
            if (c->e[i].used < c->e[lru].used) lru = i;
        entry_drop(c, lru);
    }
    return 1;
}

int pcache_insert(struct pcache *c, const int *tokens, int n, void *blob, size_t blob_bytes,
                  const float *logits) {
    struct pcache_entry ne = {0};
    ne.n = n;
    ne.blob = blob;
    ne.blob_bytes = blob_bytes;
    size_t need = pcache_need(c, n, blob_bytes, logits != NULL);
    if (pcache_has(c, tokens, n) || !pcache_make_room(c, need)) {
        blob_release(c, blob);
        return 0;
    }
    ne.tokens = xmalloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    memcpy(ne.tokens, tokens, (size_t)n * sizeof(int));
    if (logits) {
        ne.logits = xmalloc((size_t)c->n_vocab * 4);
        memcpy(ne.logits, logits, (size_t)c->n_vocab * 4);
    }
    ne.used = ++c->clock;
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 16;
        c->e = xrealloc(c->e, (size_t)c->cap * sizeof *c->e);
    }
    c->e[c->n++] = ne;
    c->bytes += need;
    return 1;
}
