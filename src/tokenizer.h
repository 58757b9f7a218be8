// tokenizer.h: the HF byte-level BPE tokenizer family as Qwen ships it (tokenizer.json): added and
// special tokens matched literally (longest first), NFC, the Split regex pre-tokenizer, ByteLevel,
// BPE merges by rank, and the ByteLevel decoder. Spec §5; byte-exact with HF `tokenizers`.
//
// Untrusted input (tokenizer.json, text) never crashes: errors are LILY_E* codes with lily_err_msg().
// A loaded tokenizer is immutable except for an internal word cache guarded by a lock, so encode and
// decode may be called from several threads at once.
#ifndef LILY_TOKENIZER_H
#define LILY_TOKENIZER_H

#include <stddef.h>

struct lily_tokenizer;

// Load DIR/tokenizer.json (and DIR/tokenizer_config.json if present, for extra added-token flags).
int tok_load(const char *dir, struct lily_tokenizer **out);
// Load from a tokenizer.json already in memory (fuzzing, tests). `name` is used in messages.
int tok_load_json(const char *json, size_t len, const char *name, struct lily_tokenizer **out);
void tok_free(struct lily_tokenizer *t);

// Number of ids (largest id + 1, base vocab plus added tokens).
int tok_n_vocab(const struct lily_tokenizer *t);
// Id of a token by its exact string (vocab entry in byte-level form, or added token content); -1.
int tok_find(const struct lily_tokenizer *t, const char *token);
// 1 if id is an added token marked special (skipped by decode with skip_special).
int tok_is_special(const struct lily_tokenizer *t, int id);
// 1 if id is an added token (special or not).
int tok_is_added(const struct lily_tokenizer *t, int id);

// Encode UTF-8 text (invalid UTF-8 is LILY_EINVAL). With `special` = 1 added tokens in the text are
// matched (HF's default); with 0 the whole text is ordinary text. *ids is malloc'd.
int tok_encode(const struct lily_tokenizer *t, const char *text, size_t len, int special,
               int **ids, int *n);

// Encode with added-token matching on, except inside the given byte spans (sorted, disjoint): text
// there is always ordinary text. The chat template marks user-supplied content this way, so
// "<|im_end|>" typed in a message stays text while the template's own markers are control tokens.
struct tok_span {
    size_t off, len;
};
int tok_encode_spans(const struct lily_tokenizer *t, const char *text, size_t len,
                     const struct tok_span *plain, int n_plain, int **ids, int *n);

// Decode ids to text (malloc'd, NUL-terminated). Byte sequences that are not valid UTF-8 are
// replaced by U+FFFD as HF does. skip_special drops special added tokens.
int tok_decode(const struct lily_tokenizer *t, const int *ids, int n, int skip_special,
               char **out, size_t *len);

// Streaming detokenizer: feed ids one at a time, get back only complete UTF-8 text (a character can
// span tokens). Special tokens come out as their content unless skip_special.
struct tok_stream {
    unsigned char pend[8]; // bytes of an incomplete UTF-8 sequence held back
    int n_pend;
    int skip_special;
};
void tok_stream_init(struct tok_stream *s, int skip_special);
// Append the text that token `id` completes to out[0..cap); returns the bytes written (the caller
// gives cap >= 64 + the longest token). Returns -1 for an id out of range.
int tok_stream_push(const struct lily_tokenizer *t, struct tok_stream *s, int id, char *out,
                    size_t cap);
// At the end of a stream: held-back bytes as U+FFFD; returns bytes written.
int tok_stream_flush(struct tok_stream *s, char *out, size_t cap);

#endif
