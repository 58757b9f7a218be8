// tok_internal.h: the tokenizer's private structures, shared by its three files:
//   tok_load.c   tokenizer.json (+ tokenizer_config.json) -> struct lily_tokenizer, with validation
//   tok_bpe.c    the BPE merge loop and its word cache
//   tokenizer.c  encode (added tokens, NFC, regex split, byte level) and decode / streaming
// Nothing outside these files includes it; the public contract is tokenizer.h.
#ifndef LILY_TOK_INTERNAL_H
#define LILY_TOK_INTERNAL_H

#include <oniguruma.h>
#include <pthread.h>
#include <stdint.h>

#include "tokenizer.h"

// Largest id accepted from a tokenizer.json (far above any real vocabulary, small enough that
// id arrays stay sane on a malicious file).
#define TOK_MAX_ID (1 << 24)
#define TOK_MAX_PRE 8 // pre-tokenizer steps in a Sequence

enum tok_norm { TOK_NORM_NONE, TOK_NORM_NFC, TOK_NORM_NFD, TOK_NORM_NFKC, TOK_NORM_NFKD };
enum tok_pre_kind { TOK_PRE_SPLIT, TOK_PRE_BYTELEVEL };
enum tok_split { TOK_SPLIT_ISOLATED, TOK_SPLIT_REMOVED };

struct tok_pre {
    int kind;              // enum tok_pre_kind
    regex_t *re;           // Split: the pattern; ByteLevel with use_regex: the GPT-2 pattern
    int behavior;          // Split: enum tok_split
    int add_prefix_space;  // ByteLevel
};

struct tok_added {
    char *content; // as written in tokenizer.json (for normalized tokens: its normalized form)
    size_t len;
    int id;
    unsigned char special, lstrip, rstrip, single_word, normalized;
};

// Open-addressing table of (left id, right id) -> (rank, merged id).
struct tok_merge {
    uint64_t key; // (left << 32 | right) + 1; 0 = empty slot
    int32_t rank, id;
};

// The word cache: direct-mapped slots keyed by the pre-token's bytes, guarded by `lock`.
#define TOK_CACHE_SLOTS 16384
#define TOK_CACHE_KEY 48
#define TOK_CACHE_IDS 24
struct tok_cache_slot {
    uint64_t hash; // 0 = empty
    uint8_t klen, nids;
    char key[TOK_CACHE_KEY];
    int32_t ids[TOK_CACHE_IDS];
};

struct lily_tokenizer {
    int n_vocab;            // largest id + 1 (base vocabulary and added tokens)
    // Per id: the bytes it decodes to (byte-level tokens mapped back to bytes; added tokens as
    // written) and what it is. dec_off[id] == UINT32_MAX for an id no token uses.
    uint32_t *dec_off, *dec_len;
    char *dec_buf;
    size_t dec_used;
    uint8_t *kind;          // 0 unused, 1 vocab, 2 added, 3 added + special
    // Vocab strings in their byte-level spelling (as keys in tokenizer.json), for tok_find.
    uint32_t *key_off, *key_len;
    char *key_buf;
    int32_t *vocab_tab;     // open addressing over key strings -> id; -1 empty
    uint32_t vocab_mask;
    struct tok_merge *merges;
    uint32_t merge_mask;
    int32_t byte_id[256];   // id of the one-character token for each byte
    int ignore_merges;
    int norm;               // enum tok_norm
    struct tok_pre pre[TOK_MAX_PRE];
    int n_pre;
    struct tok_added *added; // sorted longest first
    int n_added, any_normalized_added;
    size_t max_token_len;
    pthread_mutex_t lock;
    struct tok_cache_slot *cache;
};

// GPT-2's byte <-> character map: the character (code point) standing for each byte, and the
// byte for a code point (-1 if the code point is not in the map).
extern const uint16_t tok_byte_to_cp[256];
int tok_cp_to_byte(uint32_t cp);

// Id of a vocab entry by its byte-level spelling, or -1.
int tok_vocab_lookup(const struct lily_tokenizer *t, const char *s, size_t n);

// 64-bit hash of a byte string.
uint64_t tok_hash(const void *p, size_t n);

// Encode one pre-token (raw bytes, before the byte-level mapping) to ids, appending to a growing
// array. Uses and fills the word cache.
struct tok_ids {
    int *v;
    size_t n, cap;
};
void tok_ids_push(struct tok_ids *a, int id);
void tok_bpe_word(const struct lily_tokenizer *t, const unsigned char *s, size_t n,
                  struct tok_ids *out);

// Compile a regex the way HF's tokenizers does (Oniguruma, Ruby syntax, UTF-8); `literal` treats
// the pattern as a plain string. Returns NULL and sets the error message on failure.
regex_t *tok_regex_compile(const char *pat, size_t len, int literal, const char *name);

#endif
