// prefix_cache.h: an LRU cache of sequence-state snapshots keyed by the tokens they cover, with a
// memory budget. A Gated DeltaNet state cannot be rewound like a KV cache, so resuming a
// conversation means restoring a snapshot taken at a point the new prompt passes through.
// Used by the engine thread only (no locking).
#ifndef LILY_PREFIX_CACHE_H
#define LILY_PREFIX_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct pcache_entry {
    int *tokens;          // the tokens the state has consumed
    int n;
    void *blob;           // backend snapshot
    size_t blob_bytes;
    float *logits;        // [n_vocab] logits after the last token (so an exact hit needs no forward)
    uint64_t used;        // LRU clock
};

// Releases a blob: free() by default; a backend that keeps its snapshots itself (in device memory)
// passes its own.
typedef void (*pcache_blob_free)(void *arg, void *blob);

struct pcache {
    struct pcache_entry *e;
    int n, cap;
    size_t bytes, budget;
    int n_vocab;
    uint64_t clock;
    pcache_blob_free blob_free; // NULL: free()
    void *blob_arg;
};

void pcache_init(struct pcache *c, size_t budget, int n_vocab, pcache_blob_free blob_free, void *blob_arg);
void pcache_free(struct pcache *c);

// The entry with the most tokens (at most n) that are a prefix of tokens[0..n), or NULL. Marks it
// used.
const struct pcache_entry *pcache_find(struct pcache *c, const int *tokens, int n);

// 1 if an entry for exactly tokens[0..n) exists (then it is marked used).
int pcache_has(struct pcache *c, const int *tokens, int n);

// The bytes an entry of n tokens with a blob of blob_bytes takes from the budget.
size_t pcache_need(const struct pcache *c, int n, size_t blob_bytes, int with_logits);

// Evict least recently used entries until `need` more bytes fit in the budget, before a snapshot is
// taken (so that the old entries' memory is free when the new one is allocated). Returns 0 when
// `need` exceeds the whole budget (nothing is evicted then).
int pcache_make_room(struct pcache *c, size_t need);

// Insert a snapshot; takes ownership of blob (released by blob_free). logits (may be NULL) are copied. Evicts
// least recently used entries to stay within the budget; a snapshot larger than the budget is
// dropped. Returns 1 if stored.
int pcache_insert(struct pcache *c, const int *tokens, int n, void *blob, size_t blob_bytes,
                  const float *logits);

#endif
