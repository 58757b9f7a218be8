// tok_bpe.c: byte-pair merges for one pre-token, and the word cache in front of them.
//
// A pre-token starts as one symbol per byte (its byte-level character's id). Candidate merges of
// adjacent symbols sit in a min-heap ordered by (rank, position), so a word of n bytes costs
// O(n log n) however long it is (a 1 MiB run of one letter is one pre-token under the Qwen regex).
// Symbols form a linked list; a heap entry that no longer matches the pair at its position is
// dropped when popped. The validity test is HF's (the current pair must still merge into the
// entry's new id), which keeps results identical even for vocabularies where two different pairs
// merge into the same token.
//
// Most words repeat, so results for short words are kept in a direct-mapped cache (one mutex; the
// critical sections are a memcpy).
#include <string.h>

#include "common.h"
#include "tok_internal.h"

struct sym {
    int32_t id;         // current token id; -1 once merged into its left neighbour
    int32_t prev, next; // neighbours in the list, -1 at the ends
};

struct cand {
    int32_t rank, pos, id;
};

static inline int cand_less(const struct cand *a, const struct cand *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(struct cand *h, int *n, struct cand c) {
    int i = (*n)++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!cand_less(&c, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static struct cand heap_pop(struct cand *h, int *n) {
    struct cand top = h[0], last = h[--(*n)];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, m = i;
        if (l >= *n) break;
        m = l;
        if (l + 1 < *n && cand_less(&h[l + 1], &h[l])) m = l + 1;
        if (!cand_less(&h[m], &last)) break;
        h[i] = h[m];
        i = m;
    }
    h[i] = last;
    return top;
}

static inline const struct tok_merge *merge_get(const struct lily_tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    for (uint32_t i = (uint32_t)tok_hash(&key, 8) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        const struct tok_merge *m = &t->merges[i];
        if (m->key == key) return m;
        if (m->key == 0) return NULL;
    }
}

void tok_ids_push(struct tok_ids *a, int id) {
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 256;
        a->v = xrealloc(a->v, a->cap * sizeof(int));
    }
    a->v[a->n++] = id;
}

static void bpe_merge(const struct lily_tokenizer *t, const unsigned char *s, size_t n, struct tok_ids *out) {
    struct sym sym_small[64];
    struct cand heap_small[3 * 64];
    struct sym *sym = n <= 64 ? sym_small : xmalloc(n * sizeof *sym);
    struct cand *heap = n <= 64 ? heap_small : xmalloc(3 * n * sizeof *heap);
    int nh = 0;
    for (size_t i = 0; i < n; i++)
        sym[i] = (struct sym){t->byte_id[s[i]], (int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1};
    for (size_t i = 0; i + 1 < n; i++) {
        const struct tok_merge *m = merge_get(t, sym[i].id, sym[i + 1].id);
        if (m) heap_push(heap, &nh, (struct cand){m->rank, (int32_t)i, m->id});
    }
    while (nh > 0) {
        struct cand c = heap_pop(heap, &nh);
        struct sym *cur = &sym[c.pos];
        if (cur->id < 0 || cur->next < 0) continue;
        struct sym *right = &sym[cur->next];
        const struct tok_merge *m = merge_get(t, cur->id, right->id);
        if (!m || m->id != c.id) continue; // stale entry
        cur->id = c.id;
        right->id = -1;
        cur->next = right->next;
        if (cur->next >= 0) sym[cur->next].prev = c.pos;
        if (cur->prev >= 0 && (m = merge_get(t, sym[cur->prev].id, cur->id)))
            heap_push(heap, &nh, (struct cand){m->rank, cur->prev, m->id});
        if (cur->next >= 0 && (m = merge_get(t, cur->id, sym[cur->next].id)))
            heap_push(heap, &nh, (struct cand){m->rank, c.pos, m->id});
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) tok_ids_push(out, sym[i].id);
    if (sym != sym_small) free(sym);
    if (heap != heap_small) free(heap);
}

// ignore_merges: a pre-token that is itself a vocab entry is emitted whole. The lookup needs the
// byte-level spelling.
static int whole_word_id(const struct lily_tokenizer *t, const unsigned char *s, size_t n) {
    char small[256];
    char *buf = 2 * n <= sizeof small ? small : xmalloc(2 * n);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t cp = tok_byte_to_cp[s[i]];
        if (cp < 0x80) {
            buf[k++] = (char)cp;
        } else {
            buf[k++] = (char)(0xc0 | (cp >> 6));
            buf[k++] = (char)(0x80 | (cp & 0x3f));
        }
    }
    int id = tok_vocab_lookup(t, buf, k);
    if (buf != small) free(buf);
    return id;
}

void tok_bpe_word(const struct lily_tokenizer *t, const unsigned char *s, size_t n, struct tok_ids *out) {
    if (n == 0) return;
    if (n == 1) {
        tok_ids_push(out, t->byte_id[s[0]]);
        return;
    }
    if (t->ignore_merges) {
        int id = whole_word_id(t, s, n);
        if (id >= 0) {
            tok_ids_push(out, id);
            return;
        }
    }
    struct lily_tokenizer *mt = (struct lily_tokenizer *)t; // the cache is the one mutable part
    uint64_t h = 0;
    if (n <= TOK_CACHE_KEY) {
        h = tok_hash(s, n);
        struct tok_cache_slot *slot = &mt->cache[h & (TOK_CACHE_SLOTS - 1)];
        int32_t ids[TOK_CACHE_IDS];
        int hit = 0;
        pthread_mutex_lock(&mt->lock);
        if (slot->hash == h && slot->klen == n && !memcmp(slot->key, s, n)) {
            hit = slot->nids;
            memcpy(ids, slot->ids, (size_t)hit * sizeof(int32_t));
        }
        pthread_mutex_unlock(&mt->lock);
        if (hit) {
            for (int i = 0; i < hit; i++) tok_ids_push(out, ids[i]);
            return;
        }
    }
    size_t first = out->n;
    bpe_merge(t, s, n, out);
    size_t got = out->n - first;
    if (h && got <= TOK_CACHE_IDS) {
        struct tok_cache_slot *slot = &mt->cache[h & (TOK_CACHE_SLOTS - 1)];
        pthread_mutex_lock(&mt->lock);
        slot->hash = h;
        slot->klen = (uint8_t)n;
        slot->nids = (uint8_t)got;
        memcpy(slot->key, s, n);
        for (size_t i = 0; i < got; i++) slot->ids[i] = out->v[first + i];
        pthread_mutex_unlock(&mt->lock);
    }
}
