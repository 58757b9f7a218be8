// tokenizer.c: encode and decode for the byte-level BPE family (tokenizer.h), byte-exact with HF
// `tokenizers`. Loading lives in tok_load.c, the merge loop and word cache in tok_bpe.c.
//
// Encoding, in HF's order:
//   1. The text must be valid UTF-8 (rejected before any regex runs).
//   2. Added tokens with normalized=false are matched literally in the raw text, leftmost and then
//      longest first, honouring single_word / lstrip / rstrip. The text between them is a piece.
//   3. Each piece is normalized (NFC for Qwen); added tokens with normalized=true are then matched
//      in the normalized piece the same way.
//   4. Pre-tokenizer steps (Split regex, ByteLevel) cut the piece into pre-tokens, recursively, so
//      no list of pre-tokens is ever built.
//   5. Each pre-token's bytes go through BPE (tok_bpe.c).
// Decoding concatenates every token's bytes (added tokens included, as HF's ByteLevel decoder
// does) and replaces invalid UTF-8 the way Rust's from_utf8_lossy does (one U+FFFD per maximal
// invalid subpart).
#include <string.h>
#include <utf8proc.h>

#include "common.h"
#include "tok_internal.h"

// ---------------------------------------------------------------------------------------------
// UTF-8 helpers.

// Length of the valid UTF-8 sequence at s[0..n), 0 if it is invalid, or -(k) if the k bytes left
// are a valid but incomplete prefix. Strict: no overlongs, surrogates or code points past U+10FFFF.
static int utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int need;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) need = 1;
    else if (c >= 0xe0 && c <= 0xef) {
        need = 2;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 3;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
    } else return 0;
    for (int k = 1; k <= need; k++) {
        if ((size_t)k >= n) return -k;
        unsigned b = s[k];
        if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xbf)) return 0;
    }
    return need + 1;
}

// Bytes of the invalid subpart at s (>= 1): the lead byte plus the continuation bytes that were
// still valid, as Rust's from_utf8_lossy replaces it.
static int utf8_bad_len(const unsigned char *s, size_t n) {
    int k = 1;
    while ((size_t)k < n && k < 4) {
        int r = utf8_seq(s, (size_t)k + 1);
        if (r != -(k + 1)) break;
        k++;
    }
    return k;
}

static const char fffd[3] = {(char)0xef, (char)0xbf, (char)0xbd};

// ---------------------------------------------------------------------------------------------
// Encoding.

struct enc {
    const struct lily_tokenizer *t;
    struct tok_ids ids;
    OnigRegion *region;
    const struct tok_span *plain; // spans of the raw text where added tokens are not matched
    int n_plain;
    int rc;
};

static size_t cp_at(const unsigned char *s, size_t n, size_t i, utf8proc_int32_t *cp) {
    utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - i), cp);
    return k > 0 ? (size_t)k : 1;
}

// Code point ending at s[i) (i > 0).
static utf8proc_int32_t cp_before(const unsigned char *s, size_t i) {
    size_t j = i - 1;
    while (j > 0 && (s[j] & 0xc0) == 0x80 && i - j < 4) j--;
    utf8proc_int32_t cp = -1;
    utf8proc_iterate(s + j, (utf8proc_ssize_t)(i - j), &cp);
    return cp;
}

// Rust's char::is_whitespace (the White_Space property).
static int is_ws(utf8proc_int32_t c) {
    return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
           c == 0x3000;
}

// A \w character of Rust's regex (letters, marks, decimal digits, connector punctuation, joiners).
static int is_word(utf8proc_int32_t c) {
    if (c < 0) return 0;
    if (c == 0x200c || c == 0x200d) return 1;
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
        return 1;
    default:
        return 0;
    }
}

static int in_plain(const struct enc *e, size_t off, size_t len) {
    for (int i = 0; i < e->n_plain; i++) {
        const struct tok_span *p = &e->plain[i];
        if (off < p->off + p->len && p->off < off + len) return 1;
    }
    return 0;
}

// Next added token (of the `normalized` kind) at or after s[from), as HF's leftmost-longest
// matcher finds it. Returns the index into t->added or -1; *at gets its offset.
static int added_find(const struct enc *e, const unsigned char *s, size_t n, size_t from, int normalized,
                      int raw_offsets, size_t *at) {
    const struct lily_tokenizer *t = e->t;
    for (size_t i = from; i < n; i++) {
        for (int k = 0; k < t->n_added; k++) {
            const struct tok_added *a = &t->added[k];
            if (a->normalized != normalized || (unsigned char)a->content[0] != s[i] || a->len > n - i) continue;
            if (memcmp(a->content, s + i, a->len)) continue;
            if (raw_offsets && e->n_plain && in_plain(e, i, a->len)) continue;
            *at = i;
            return k;
        }
    }
    return -1;
}

static void encode_pre(struct enc *e, int step, const unsigned char *s, size_t n);

// Run a regex over s and hand the pieces (Isolated: gaps and matches; Removed: gaps only) to
// the next step. Searches start where the last match ended, so the cost is linear in n as long as
// each search is (the Qwen patterns match at every position).
static void split_regex(struct enc *e, int step, regex_t *re, int removed, const unsigned char *s, size_t n) {
    size_t pos = 0, prev = 0;
    while (pos < n && !e->rc) {
        int r = onig_search(re, s, s + n, s + pos, s + n, e->region, ONIG_OPTION_NONE);
        if (r == ONIG_MISMATCH) break;
        if (r < 0) {
            UChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
            onig_error_code_to_str(msg, r);
            e->rc = lily_err_set(LILY_EINVAL, "text: pre-tokenizer regex failed: %s", msg);
            return;
        }
        size_t ms = (size_t)e->region->beg[0], me = (size_t)e->region->end[0];
        if (ms > prev) encode_pre(e, step + 1, s + prev, ms - prev);
        if (me == ms) { // an empty match only cuts the text
            utf8proc_int32_t cp;
            prev = ms;
            pos = ms + cp_at(s, n, ms, &cp);
            continue;
        }
        if (!removed) encode_pre(e, step + 1, s + ms, me - ms);
        prev = pos = me;
    }
    if (prev < n && !e->rc) encode_pre(e, step + 1, s + prev, n - prev);
}

static void encode_pre(struct enc *e, int step, const unsigned char *s, size_t n) {
    const struct lily_tokenizer *t = e->t;
    if (n == 0 || e->rc) return;
    if (step == t->n_pre) {
        tok_bpe_word(t, s, n, &e->ids);
        return;
    }
    const struct tok_pre *p = &t->pre[step];
    if (p->kind == TOK_PRE_SPLIT) {
        split_regex(e, step, p->re, p->behavior == TOK_SPLIT_REMOVED, s, n);
        return;
    }
    // ByteLevel: the byte mapping itself happens in BPE (symbols start as byte ids); here only the
    // optional prefix space and the optional GPT-2 regex.
    unsigned char *tmp = NULL;
    if (p->add_prefix_space && s[0] != ' ') {
        tmp = xmalloc(n + 1);
        tmp[0] = ' ';
        memcpy(tmp + 1, s, n);
        s = tmp;
        n++;
    }
    if (p->re) split_regex(e, step, p->re, 0, s, n);
    else encode_pre(e, step + 1, s, n);
    free(tmp);
}

#include "tok_nfc_mask.h"

static int nfc_masked(utf8proc_int32_t cp) {
    if (cp < 0x7fd) return 0;
    size_t lo = 0, hi = sizeof tok_nfc_mask / sizeof *tok_nfc_mask;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tok_nfc_mask[mid] == (uint32_t)cp) return 1;
        if (tok_nfc_mask[mid] < (uint32_t)cp) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}

// Normalize a piece. Returns s itself when the text cannot change (the common case), else a
// malloc'd buffer in *owned.
static const unsigned char *normalize(const struct lily_tokenizer *t, const unsigned char *s, size_t *n,
                                      unsigned char **owned) {
    *owned = NULL;
    if (t->norm == TOK_NORM_NONE) return s;
    // Below U+0300 every character is its own NFC form and no later character composes with it
    // without a combining mark (>= U+0300) or a conjoining jamo in between, so such text is stable.
    unsigned limit = t->norm == TOK_NORM_NFC ? 0xcc : 0x80; // lead byte of U+0300 is 0xcc
    size_t i = 0;
    while (i < *n && s[i] < limit) i++;
    if (i == *n) return s;
    int opt = UTF8PROC_STABLE | (t->norm == TOK_NORM_NFC || t->norm == TOK_NORM_NFKC ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE) |
              (t->norm >= TOK_NORM_NFKC ? UTF8PROC_COMPAT : 0);
    // Code points HF's tables don't know are copied as they are, and the text between them is
    // normalized separately: as unknown starters they end every reordering run and composition.
    size_t cap = *n * 3 + 16, w = 0, seg = 0;
    unsigned char *out = xmalloc(cap);
    for (size_t j = 0; j <= *n;) {
        utf8proc_int32_t cp = 0;
        size_t m = j < *n ? cp_at(s, *n, j, &cp) : 0;
        if (j < *n && !nfc_masked(cp)) {
            j += m;
            continue;
        }
        if (j > seg) {
            utf8proc_uint8_t *part = NULL;
            utf8proc_ssize_t k = utf8proc_map(s + seg, (utf8proc_ssize_t)(j - seg), &part, (utf8proc_option_t)opt);
            if (k < 0) { // cannot happen on validated UTF-8; keep the text as it is
                if (w + (j - seg) + 4 > cap) out = xrealloc(out, cap = 2 * (w + (j - seg) + 4));
                memcpy(out + w, s + seg, j - seg);
                w += j - seg;
            } else {
                if (w + (size_t)k + 4 > cap) out = xrealloc(out, cap = 2 * (w + (size_t)k + 4));
                memcpy(out + w, part, (size_t)k);
                w += (size_t)k;
            }
            free(part);
        }
        if (j == *n) break;
        if (w + m + 4 > cap) out = xrealloc(out, cap = 2 * (w + m + 4));
        memcpy(out + w, s + j, m); // the unknown code point itself
        w += m;
        j += m;
        seg = j;
    }
    *owned = out;
    *n = w;
    return out;
}

// Split s at added tokens of one kind; text between them goes to `text_fn`. Implements HF's
// match filtering: single_word needs non-word characters (or the ends) on both sides; lstrip /
// rstrip absorb the whitespace before / after the token.
static void split_added(struct enc *e, const unsigned char *s, size_t n, int normalized, int raw_offsets,
                        void (*text_fn)(struct enc *, const unsigned char *, size_t)) {
    const struct lily_tokenizer *t = e->t;
    size_t from = 0, start_off = 0, at;
    int k;
    while (!e->rc && (k = added_find(e, s, n, from, normalized, raw_offsets, &at)) >= 0) {
        const struct tok_added *a = &t->added[k];
        size_t start = at, stop = at + a->len;
        from = stop;
        if (start < start_off) continue; // inside what an rstrip already took
        if (a->single_word) {
            int ok_l = start == 0 || !is_word(cp_before(s, start));
            utf8proc_int32_t cp = -1;
            if (stop < n) cp_at(s, n, stop, &cp);
            int ok_r = stop == n || !is_word(cp);
            if (!ok_l || !ok_r) continue;
        }
        if (a->lstrip) {
            while (start > start_off && is_ws(cp_before(s, start))) {
                size_t j = start - 1;
                while (j > 0 && (s[j] & 0xc0) == 0x80) j--;
                start = j;
            }
        }
        if (a->rstrip) {
            utf8proc_int32_t cp;
            while (stop < n) {
                size_t m = cp_at(s, n, stop, &cp);
                if (!is_ws(cp)) break;
                stop += m;
            }
            from = stop;
        }
        if (start > start_off) text_fn(e, s + start_off, start - start_off);
        tok_ids_push(&e->ids, a->id);
        start_off = stop;
    }
    if (start_off < n && !e->rc) text_fn(e, s + start_off, n - start_off);
}

static void encode_normalized_text(struct enc *e, const unsigned char *s, size_t n) { encode_pre(e, 0, s, n); }

// A piece of raw text between added tokens: normalize, then normalized added tokens, then split.
static void encode_piece(struct enc *e, const unsigned char *s, size_t n, int match_normalized) {
    unsigned char *owned;
    size_t m = n;
    const unsigned char *ns = normalize(e->t, s, &m, &owned);
    if (match_normalized) split_added(e, ns, m, 1, 0, encode_normalized_text);
    else encode_pre(e, 0, ns, m);
    free(owned);
}

static void encode_piece_match(struct enc *e, const unsigned char *s, size_t n) { encode_piece(e, s, n, 1); }
static void encode_piece_plain(struct enc *e, const unsigned char *s, size_t n) { encode_piece(e, s, n, 0); }

static int encode_common(const struct lily_tokenizer *t, const char *text, size_t len, int special,
                         const struct tok_span *plain, int n_plain, int **ids, int *n) {
    *ids = NULL;
    *n = 0;
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        int k = utf8_seq(s + i, len - i);
        if (k <= 0) return lily_err_set(LILY_EINVAL, "text: invalid UTF-8 at byte %zu", i);
        i += (size_t)k;
    }
    for (int i = 0; i < n_plain; i++)
        if (plain[i].off > len || plain[i].len > len - plain[i].off || (i && plain[i].off < plain[i - 1].off + plain[i - 1].len))
            return lily_err_set(LILY_EINVAL, "text: plain span %d out of range or out of order", i);
    struct enc e = {.t = t, .plain = plain, .n_plain = n_plain};
    e.region = onig_region_new();
    // Normalized added tokens inside a piece that touches a plain span are not matched (offsets
    // after normalization no longer line up with the caller's spans). No Qwen token is normalized.
    if (!special) encode_piece_plain(&e, s, len);
    else if (!t->any_normalized_added || n_plain) split_added(&e, s, len, 0, 1, encode_piece_plain);
    else split_added(&e, s, len, 0, 1, encode_piece_match);
    onig_region_free(e.region, 1);
    if (e.rc) {
        free(e.ids.v);
        return e.rc;
    }
    if (e.ids.n > (size_t)INT32_MAX) {
        free(e.ids.v);
        return lily_err_set(LILY_ERANGE, "text: too many tokens");
    }
    *ids = e.ids.v ? e.ids.v : xmalloc(sizeof(int));
    *n = (int)e.ids.n;
    return 0;
}

int tok_encode(const struct lily_tokenizer *t, const char *text, size_t len, int special, int **ids, int *n) {
    return encode_common(t, text, len, special, NULL, 0, ids, n);
}

int tok_encode_spans(const struct lily_tokenizer *t, const char *text, size_t len, const struct tok_span *plain,
                     int n_plain, int **ids, int *n) {
    return encode_common(t, text, len, 1, plain, n_plain, ids, n);
}

// ---------------------------------------------------------------------------------------------
// Decoding.

// Append s[0..n) to out as valid UTF-8, replacing invalid subparts by U+FFFD. With `hold`, a
// valid but incomplete sequence at the very end is not written; its length is returned.
static size_t lossy(const unsigned char *s, size_t n, int hold, char *out, size_t *w) {
    size_t i = 0;
    while (i < n) {
        int k = utf8_seq(s + i, n - i);
        if (k > 0) {
            memcpy(out + *w, s + i, (size_t)k);
            *w += (size_t)k;
            i += (size_t)k;
        } else if (k < 0 && hold) {
            return n - i;
        } else {
            memcpy(out + *w, fffd, 3);
            *w += 3;
            i += k < 0 ? n - i : (size_t)utf8_bad_len(s + i, n - i);
        }
    }
    return 0;
}

int tok_decode(const struct lily_tokenizer *t, const int *ids, int n, int skip_special, char **out, size_t *len) {
    *out = NULL;
    if (len) *len = 0;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return lily_err_set(LILY_ERANGE, "ids: id %d out of range [0, %d)", ids[i], t->n_vocab);
        if (t->kind[ids[i]] && !(skip_special && t->kind[ids[i]] == 3)) total += t->dec_len[ids[i]];
    }
    unsigned char *bytes = xmalloc(total + 1);
    size_t b = 0;
    for (int i = 0; i < n; i++) {
        int id = ids[i];
        if (!t->kind[id] || (skip_special && t->kind[id] == 3)) continue;
        memcpy(bytes + b, t->dec_buf + t->dec_off[id], t->dec_len[id]);
        b += t->dec_len[id];
    }
    char *o = xmalloc(3 * total + 1);
    size_t w = 0;
    lossy(bytes, total, 0, o, &w);
    o[w] = 0;
    free(bytes);
    *out = o;
    if (len) *len = w;
    return 0;
}

void tok_stream_init(struct tok_stream *s, int skip_special) {
    memset(s, 0, sizeof *s);
    s->skip_special = skip_special;
}

int tok_stream_push(const struct lily_tokenizer *t, struct tok_stream *s, int id, char *out, size_t cap) {
    if (id < 0 || id >= t->n_vocab) {
        lily_err_set(LILY_ERANGE, "id %d out of range [0, %d)", id, t->n_vocab);
        return -1;
    }
    if (!t->kind[id] || (s->skip_special && t->kind[id] == 3)) return 0;
    size_t n = (size_t)s->n_pend + t->dec_len[id];
    unsigned char small[256];
    unsigned char *buf = n <= sizeof small ? small : xmalloc(n);
    memcpy(buf, s->pend, (size_t)s->n_pend);
    memcpy(buf + s->n_pend, t->dec_buf + t->dec_off[id], t->dec_len[id]);
    // Worst case every byte becomes U+FFFD (3 bytes); write through a scratch buffer when the
    // caller's might not hold that.
    char *dst = 3 * n <= cap ? out : xmalloc(3 * n);
    size_t w = 0;
    size_t held = lossy(buf, n, 1, dst, &w);
    int rc = (int)w;
    if (dst != out) {
        if (w <= cap) memcpy(out, dst, w);
        else rc = -1;
        free(dst);
    }
    if (rc < 0) {
        lily_err_set(LILY_EINVAL, "tok_stream_push: output buffer of %zu bytes too small", cap);
    } else {
        memcpy(s->pend, buf + n - held, held);
        s->n_pend = (int)held;
    }
    if (buf != small) free(buf);
    return rc;
}

int tok_stream_flush(struct tok_stream *s, char *out, size_t cap) {
    if (s->n_pend == 0 || cap < 3) return 0;
    s->n_pend = 0; // the held bytes are one incomplete sequence: one replacement character
    memcpy(out, fffd, 3);
    return 3;
}
