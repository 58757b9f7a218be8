// tok_load.c: read a tokenizer.json of the HF byte-level BPE family (as Qwen ships it) into a
// struct lily_tokenizer, validating everything: the file is untrusted input, so every problem is a
// one-line LILY_E* error naming the file, never a crash. Parsing uses jansson (which also bounds
// nesting depth); regexes are compiled with Oniguruma, the engine HF tokenizers itself uses.
//
// Accepted shape (anything else is LILY_EUNSUPPORTED with a message saying what):
//   model:         BPE with vocab {token: id} and merges ["a b", ...] or [["a","b"], ...];
//                  no dropout, no byte_fallback, empty or null subword prefix/suffix
//   normalizer:    null, NFC/NFD/NFKC/NFKD, or a Sequence of those
//   pre_tokenizer: ByteLevel, or a Sequence of Split (Regex or String, Isolated/Removed, not
//                  inverted) and exactly one final ByteLevel
//   decoder:       ByteLevel (or a Sequence holding only ByteLevel)
//   post_processor: null or ByteLevel (neither adds tokens)
#include <jansson.h>
#include <string.h>
#include <utf8proc.h>

#include "common.h"
#include "tok_internal.h"

// GPT-2's byte-level alphabet: printable Latin-1 bytes stand for themselves, the other 68 bytes
// (controls, space, DEL, NBSP, soft hyphen) take code points 256, 257, ... in byte order.
const uint16_t tok_byte_to_cp[256] = {
    256, 257, 258, 259, 260, 261, 262, 263, 264, 265, 266, 267, 268, 269, 270, 271,
    272, 273, 274, 275, 276, 277, 278, 279, 280, 281, 282, 283, 284, 285, 286, 287,
    288, 33,  34,  35,  36,  37,  38,  39,  40,  41,  42,  43,  44,  45,  46,  47,
    48,  49,  50,  51,  52,  53,  54,  55,  56,  57,  58,  59,  60,  61,  62,  63,
    64,  65,  66,  67,  68,  69,  70,  71,  72,  73,  74,  75,  76,  77,  78,  79,
    80,  81,  82,  83,  84,  85,  86,  87,  88,  89,  90,  91,  92,  93,  94,  95,
    96,  97,  98,  99,  100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111,
    112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 289,
    290, 291, 292, 293, 294, 295, 296, 297, 298, 299, 300, 301, 302, 303, 304, 305,
    306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317, 318, 319, 320, 321,
    322, 161, 162, 163, 164, 165, 166, 167, 168, 169, 170, 171, 172, 323, 174, 175,
    176, 177, 178, 179, 180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191,
    192, 193, 194, 195, 196, 197, 198, 199, 200, 201, 202, 203, 204, 205, 206, 207,
    208, 209, 210, 211, 212, 213, 214, 215, 216, 217, 218, 219, 220, 221, 222, 223,
    224, 225, 226, 227, 228, 229, 230, 231, 232, 233, 234, 235, 236, 237, 238, 239,
    240, 241, 242, 243, 244, 245, 246, 247, 248, 249, 250, 251, 252, 253, 254, 255,
};

int tok_cp_to_byte(uint32_t cp) {
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255))
        return (int)cp;
    // The other bytes in order: 0..32 -> 256..288, 127..160 -> 289..322, 173 -> 323.
    if (cp >= 256 && cp <= 288) return (int)cp - 256;
    if (cp >= 289 && cp <= 322) return (int)cp - 289 + 127;
    if (cp == 323) return 173;
    return -1;
}

uint64_t tok_hash(const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return h ? h : 1;
}

static pthread_once_t onig_once = PTHREAD_ONCE_INIT;
static void onig_setup(void) {
    OnigEncoding enc = ONIG_ENCODING_UTF8;
    onig_initialize(&enc, 1);
}

regex_t *tok_regex_compile(const char *pat, size_t len, int literal, const char *name) {
    pthread_once(&onig_once, onig_setup);
    regex_t *re = NULL;
    OnigErrorInfo einfo;
    int r = onig_new(&re, (const UChar *)pat, (const UChar *)pat + len, ONIG_OPTION_NONE,
                     ONIG_ENCODING_UTF8, literal ? ONIG_SYNTAX_ASIS : ONIG_SYNTAX_RUBY, &einfo);
    if (r != ONIG_NORMAL) {
        UChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
        onig_error_code_to_str(msg, r, &einfo);
        lily_err_set(LILY_EFORMAT, "%s: pre-tokenizer regex does not compile: %s", name, msg);
        return NULL;
    }
    return re;
}

// ---------------------------------------------------------------------------------------------
// Small helpers over jansson values.

static const char *type_of(json_t *o) {
    json_t *t = json_is_object(o) ? json_object_get(o, "type") : NULL;
    return json_is_string(t) ? json_string_value(t) : NULL;
}

static int get_bool(json_t *o, const char *key, int def) {
    json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : def;
}

// Decode a byte-level token spelling to bytes. Returns the byte count, or -1 if a character is not
// in the byte-level alphabet (HF then keeps the token's own UTF-8 bytes when decoding).
static long bytelevel_decode(const char *s, size_t n, char *out) {
    long k = 0;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t m = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (m <= 0) return -1;
        int b = tok_cp_to_byte((uint32_t)cp);
        if (b < 0) return -1;
        out[k++] = (char)b;
        i += (size_t)m;
    }
    return k;
}

int tok_vocab_lookup(const struct lily_tokenizer *t, const char *s, size_t n) {
    if (!t->vocab_tab) return -1;
    for (uint32_t i = (uint32_t)tok_hash(s, n) & t->vocab_mask;; i = (i + 1) & t->vocab_mask) {
        int id = t->vocab_tab[i];
        if (id < 0) return -1;
        if (t->key_len[id] == n && !memcmp(t->key_buf + t->key_off[id], s, n)) return id;
    }
}

static int merge_put(struct lily_tokenizer *t, int a, int b, int rank, int id) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    for (uint32_t i = (uint32_t)tok_hash(&key, 8) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        if (t->merges[i].key == 0 || t->merges[i].key == key) {
            // A repeated pair keeps the later rank, as HF's map insertion does.
            t->merges[i] = (struct tok_merge){key, rank, id};
            return 0;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Sections of tokenizer.json.

static int load_vocab(struct lily_tokenizer *t, json_t *vocab, json_t *added, const char *name) {
    if (!json_is_object(vocab)) return lily_err_set(LILY_EFORMAT, "%s: model.vocab is not an object", name);
    size_t nv = json_object_size(vocab);
    if (nv == 0) return lily_err_set(LILY_EFORMAT, "%s: model.vocab is empty", name);
    // Ids: the largest of the vocab and the added tokens sizes every per-id array.
    long max_id = -1;
    size_t key_bytes = 0;
    const char *key;
    json_t *v;
    json_object_foreach(vocab, key, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= TOK_MAX_ID)
            return lily_err_set(LILY_EFORMAT, "%s: vocab id of token '%.40s' is not an integer in [0, %d)",
                                name, key, TOK_MAX_ID);
        if (json_integer_value(v) > max_id) max_id = (long)json_integer_value(v);
        key_bytes += strlen(key);
    }
    size_t i;
    json_array_foreach(added, i, v) {
        json_t *id = json_object_get(v, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= TOK_MAX_ID)
            return lily_err_set(LILY_EFORMAT, "%s: added_tokens[%zu].id is not an integer in [0, %d)",
                                name, i, TOK_MAX_ID);
        if (json_integer_value(id) > max_id) max_id = (long)json_integer_value(id);
    }
    int n = (int)max_id + 1;
    t->n_vocab = n;
    t->dec_off = xmalloc((size_t)n * sizeof(uint32_t));
    t->dec_len = xcalloc((size_t)n, sizeof(uint32_t));
    t->key_off = xmalloc((size_t)n * sizeof(uint32_t));
    t->key_len = xcalloc((size_t)n, sizeof(uint32_t));
    t->kind = xcalloc((size_t)n, 1);
    memset(t->dec_off, 0xff, (size_t)n * sizeof(uint32_t));
    if (key_bytes > UINT32_MAX / 2) return lily_err_set(LILY_EFORMAT, "%s: vocab strings too large", name);
    t->key_buf = xmalloc(key_bytes + 1);
    size_t dec_cap = key_bytes + 1, dec_n = 0, key_n = 0;
    t->dec_buf = xmalloc(dec_cap);
    uint32_t cap = 1;
    while (cap < 2 * nv) cap <<= 1;
    t->vocab_mask = cap - 1;
    t->vocab_tab = xmalloc(cap * sizeof(int32_t));
    memset(t->vocab_tab, 0xff, cap * sizeof(int32_t));
    json_object_foreach(vocab, key, v) {
        int id = (int)json_integer_value(v);
        size_t kl = strlen(key);
        if (t->kind[id]) return lily_err_set(LILY_EFORMAT, "%s: vocab id %d is used twice", name, id);
        t->kind[id] = 1;
        memcpy(t->key_buf + key_n, key, kl);
        t->key_off[id] = (uint32_t)key_n;
        t->key_len[id] = (uint32_t)kl;
        key_n += kl;
        // A byte-level token decodes to at most one byte per character, so key_bytes bounds it.
        long m = bytelevel_decode(key, kl, t->dec_buf + dec_n);
        if (m < 0) { // not byte-level: HF's decoder passes its UTF-8 through unchanged
            memcpy(t->dec_buf + dec_n, key, kl);
            m = (long)kl;
        }
        t->dec_off[id] = (uint32_t)dec_n;
        t->dec_len[id] = (uint32_t)m;
        dec_n += (size_t)m;
        if ((size_t)m > t->max_token_len) t->max_token_len = (size_t)m;
        t->dec_used = dec_n;
        for (uint32_t h = (uint32_t)tok_hash(key, kl) & t->vocab_mask;; h = (h + 1) & t->vocab_mask)
            if (t->vocab_tab[h] < 0) {
                t->vocab_tab[h] = id;
                break;
            }
    }
    // Every byte must have its one-character token, or some text could not be encoded at all.
    for (int b = 0; b < 256; b++) {
        char s[4];
        utf8proc_ssize_t k = utf8proc_encode_char(tok_byte_to_cp[b], (utf8proc_uint8_t *)s);
        t->byte_id[b] = tok_vocab_lookup(t, s, (size_t)k);
        if (t->byte_id[b] < 0)
            return lily_err_set(LILY_EFORMAT, "%s: vocab lacks the byte-level token for byte 0x%02x", name, b);
    }
    return 0;
}

static int load_merges(struct lily_tokenizer *t, json_t *merges, const char *name) {
    if (!json_is_array(merges)) return lily_err_set(LILY_EFORMAT, "%s: model.merges is not an array", name);
    size_t nm = json_array_size(merges);
    uint32_t cap = 16;
    while (cap < 2 * nm + 16) cap <<= 1;
    t->merge_mask = cap - 1;
    t->merges = xcalloc(cap, sizeof(struct tok_merge));
    char *buf = NULL;
    size_t buf_cap = 0;
    size_t r;
    json_t *m;
    json_array_foreach(merges, r, m) {
        const char *a, *b;
        size_t al, bl;
        if (json_is_string(m)) { // "a b": exactly one space, as HF requires
            a = json_string_value(m);
            const char *sp = strchr(a, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                free(buf);
                return lily_err_set(LILY_EFORMAT, "%s: merges[%zu] is not two tokens separated by one space", name, r);
            }
            al = (size_t)(sp - a);
            b = sp + 1;
            bl = strlen(b);
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            al = json_string_length(json_array_get(m, 0));
            bl = json_string_length(json_array_get(m, 1));
        } else {
            free(buf);
            return lily_err_set(LILY_EFORMAT, "%s: merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", name, r);
        }
        int ia = tok_vocab_lookup(t, a, al), ib = tok_vocab_lookup(t, b, bl);
        if (al + bl + 1 > buf_cap) {
            buf_cap = 2 * (al + bl + 1);
            buf = xrealloc(buf, buf_cap);
        }
        memcpy(buf, a, al);
        memcpy(buf + al, b, bl);
        int ic = tok_vocab_lookup(t, buf, al + bl);
        if (ia < 0 || ib < 0 || ic < 0) {
            free(buf);
            return lily_err_set(LILY_EFORMAT, "%s: merges[%zu] names a token not in the vocab ('%.*s' + '%.*s')",
                                name, r, (int)(al > 40 ? 40 : al), a, (int)(bl > 40 ? 40 : bl), b);
        }
        merge_put(t, ia, ib, (int)r, ic);
    }
    free(buf);
    return 0;
}

static int add_added(struct lily_tokenizer *t, json_t *a, int id, const char *name) {
    json_t *c = json_object_get(a, "content");
    if (!json_is_string(c) || json_string_length(c) == 0)
        return lily_err_set(LILY_EFORMAT, "%s: added token %d has no content", name, id);
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].id == id) return lily_err_set(LILY_EFORMAT, "%s: added token id %d is used twice", name, id);
    t->added = xrealloc(t->added, (size_t)(t->n_added + 1) * sizeof *t->added);
    struct tok_added *x = &t->added[t->n_added++];
    memset(x, 0, sizeof *x);
    x->len = json_string_length(c);
    x->content = xmalloc(x->len + 1);
    memcpy(x->content, json_string_value(c), x->len + 1);
    x->id = id;
    x->special = (unsigned char)get_bool(a, "special", 0);
    x->lstrip = (unsigned char)get_bool(a, "lstrip", 0);
    x->rstrip = (unsigned char)get_bool(a, "rstrip", 0);
    x->single_word = (unsigned char)get_bool(a, "single_word", 0);
    x->normalized = (unsigned char)get_bool(a, "normalized", !x->special);
    if (memchr(x->content, 0, x->len))
        return lily_err_set(LILY_EFORMAT, "%s: added token %d contains a NUL character", name, id);
    // An added token's id decodes to its content, whatever the vocab holds for the same id.
    t->kind[id] = x->special ? 3 : 2;
    return 0;
}

static int load_normalizer(struct lily_tokenizer *t, json_t *n, const char *name) {
    if (!n || json_is_null(n)) return 0;
    const char *ty = type_of(n);
    if (ty && !strcmp(ty, "Sequence")) {
        json_t *list = json_object_get(n, "normalizers"), *x;
        size_t i;
        if (!json_is_array(list)) return lily_err_set(LILY_EFORMAT, "%s: normalizer Sequence has no list", name);
        json_array_foreach(list, i, x) {
            if (t->norm != TOK_NORM_NONE)
                return lily_err_set(LILY_EUNSUPPORTED, "%s: more than one normalizer in the Sequence", name);
            int rc = load_normalizer(t, x, name);
            if (rc) return rc;
        }
        return 0;
    }
    static const char *names[] = {"NFC", "NFD", "NFKC", "NFKD"};
    for (int k = 0; k < 4; k++)
        if (ty && !strcmp(ty, names[k])) {
            t->norm = TOK_NORM_NFC + k;
            return 0;
        }
    return lily_err_set(LILY_EUNSUPPORTED, "%s: normalizer '%s' is not supported", name, ty ? ty : "?");
}

static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int load_pre_one(struct lily_tokenizer *t, json_t *p, const char *name) {
    const char *ty = type_of(p);
    if (t->n_pre >= TOK_MAX_PRE) return lily_err_set(LILY_EUNSUPPORTED, "%s: too many pre-tokenizers", name);
    if (t->n_pre > 0 && t->pre[t->n_pre - 1].kind == TOK_PRE_BYTELEVEL)
        return lily_err_set(LILY_EUNSUPPORTED, "%s: a pre-tokenizer after ByteLevel is not supported", name);
    struct tok_pre *x = &t->pre[t->n_pre];
    memset(x, 0, sizeof *x);
    if (ty && !strcmp(ty, "ByteLevel")) {
        x->kind = TOK_PRE_BYTELEVEL;
        x->add_prefix_space = get_bool(p, "add_prefix_space", 1);
        if (get_bool(p, "use_regex", 1)) {
            x->re = tok_regex_compile(gpt2_pattern, strlen(gpt2_pattern), 0, name);
            if (!x->re) return LILY_EFORMAT;
        }
    } else if (ty && !strcmp(ty, "Split")) {
        x->kind = TOK_PRE_SPLIT;
        json_t *pat = json_object_get(p, "pattern"), *s;
        const char *beh = json_string_value(json_object_get(p, "behavior"));
        if (get_bool(p, "invert", 0))
            return lily_err_set(LILY_EUNSUPPORTED, "%s: Split with invert=true is not supported", name);
        if (beh && !strcmp(beh, "Isolated")) x->behavior = TOK_SPLIT_ISOLATED;
        else if (beh && !strcmp(beh, "Removed")) x->behavior = TOK_SPLIT_REMOVED;
        else return lily_err_set(LILY_EUNSUPPORTED, "%s: Split behavior '%s' is not supported", name, beh ? beh : "?");
        int literal;
        if ((s = json_object_get(pat, "Regex")) && json_is_string(s)) literal = 0;
        else if ((s = json_object_get(pat, "String")) && json_is_string(s)) literal = 1;
        else return lily_err_set(LILY_EFORMAT, "%s: Split has no Regex or String pattern", name);
        x->re = tok_regex_compile(json_string_value(s), json_string_length(s), literal, name);
        if (!x->re) return LILY_EFORMAT;
    } else {
        return lily_err_set(LILY_EUNSUPPORTED, "%s: pre-tokenizer '%s' is not supported", name, ty ? ty : "?");
    }
    t->n_pre++;
    return 0;
}

static int load_pre(struct lily_tokenizer *t, json_t *p, const char *name) {
    const char *ty = type_of(p);
    if (ty && !strcmp(ty, "Sequence")) {
        json_t *list = json_object_get(p, "pretokenizers"), *x;
        size_t i;
        if (!json_is_array(list)) return lily_err_set(LILY_EFORMAT, "%s: pre_tokenizer Sequence has no list", name);
        json_array_foreach(list, i, x) {
            int rc = load_pre_one(t, x, name);
            if (rc) return rc;
        }
    } else if (p && !json_is_null(p)) {
        int rc = load_pre_one(t, p, name);
        if (rc) return rc;
    }
    if (t->n_pre == 0 || t->pre[t->n_pre - 1].kind != TOK_PRE_BYTELEVEL)
        return lily_err_set(LILY_EUNSUPPORTED, "%s: pre_tokenizer has no ByteLevel step (not a byte-level BPE)", name);
    return 0;
}

static int check_decoder(json_t *d, const char *name) {
    const char *ty = type_of(d);
    if (ty && !strcmp(ty, "ByteLevel")) return 0;
    if (ty && !strcmp(ty, "Sequence")) {
        json_t *list = json_object_get(d, "decoders");
        if (json_is_array(list) && json_array_size(list) == 1) return check_decoder(json_array_get(list, 0), name);
    }
    return lily_err_set(LILY_EUNSUPPORTED, "%s: decoder '%s' is not supported (ByteLevel only)", name, ty ? ty : "null");
}

static int load_model(struct lily_tokenizer *t, json_t *root, const char *name) {
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) return lily_err_set(LILY_EFORMAT, "%s: no \"model\" object", name);
    const char *ty = type_of(model);
    if (ty && strcmp(ty, "BPE"))
        return lily_err_set(LILY_EUNSUPPORTED, "%s: model type '%s' is not supported (BPE only)", name, ty);
    json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout))
        return lily_err_set(LILY_EUNSUPPORTED, "%s: BPE dropout is not supported", name);
    if (get_bool(model, "byte_fallback", 0))
        return lily_err_set(LILY_EUNSUPPORTED, "%s: BPE byte_fallback is not supported", name);
    const char *affix[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int k = 0; k < 2; k++) {
        json_t *s = json_object_get(model, affix[k]);
        if (s && !json_is_null(s) && !(json_is_string(s) && json_string_length(s) == 0))
            return lily_err_set(LILY_EUNSUPPORTED, "%s: BPE %s is not supported", name, affix[k]);
    }
    t->ignore_merges = get_bool(model, "ignore_merges", 0);
    json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_null(added) && !json_is_array(added))
        return lily_err_set(LILY_EFORMAT, "%s: added_tokens is not an array", name);
    if (!json_is_array(added)) added = NULL;
    size_t i;
    json_t *a;
    json_array_foreach(added, i, a) if (!json_is_object(a))
        return lily_err_set(LILY_EFORMAT, "%s: added_tokens[%zu] is not an object", name, i);
    int rc = load_vocab(t, json_object_get(model, "vocab"), added, name);
    if (rc) return rc;
    rc = load_merges(t, json_object_get(model, "merges"), name);
    if (rc) return rc;
    json_array_foreach(added, i, a) {
        rc = add_added(t, a, (int)json_integer_value(json_object_get(a, "id")), name);
        if (rc) return rc;
    }
    return 0;
}

// Extra added tokens from tokenizer_config.json's added_tokens_decoder: only ids that
// tokenizer.json lacks are added (tokenizer.json is what HF tokenizers itself reads).
static int load_config(struct lily_tokenizer *t, const char *dir) {
    char *path = lily_path_join(dir, "tokenizer_config.json");
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    int rc = 0;
    if (!root) { // optional file: absent is fine, unreadable JSON is an error
        FILE *f = fopen(path, "rb");
        if (f) {
            fclose(f);
            rc = lily_err_set(LILY_EFORMAT, "%s: line %d: %s", path, err.line, err.text);
        }
        free(path);
        return rc;
    }
    json_t *dec = json_object_get(root, "added_tokens_decoder"), *v;
    const char *key;
    json_object_foreach(dec, key, v) {
        char *end;
        long id = strtol(key, &end, 10);
        if (*end || id < 0 || id >= t->n_vocab || !json_is_object(v)) continue; // ids beyond the vocab: ignored
        if (t->kind[id] >= 2) continue;
        if ((rc = add_added(t, v, (int)id, path))) break;
    }
    json_decref(root);
    free(path);
    return rc;
}

static int cmp_added(const void *a, const void *b) {
    const struct tok_added *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id - y->id;
}

// Per-id decoded bytes of added tokens, normalized forms of normalized tokens, matching order.
static void finish_added(struct lily_tokenizer *t) {
    size_t extra = 0;
    for (int i = 0; i < t->n_added; i++) extra += t->added[i].len;
    size_t used = t->dec_used;
    t->dec_buf = xrealloc(t->dec_buf, used + extra + 1);
    for (int i = 0; i < t->n_added; i++) {
        struct tok_added *x = &t->added[i];
        // HF runs added tokens through the ByteLevel decoder too: all-alphabet contents map back
        // to bytes, anything else keeps its UTF-8 bytes.
        long m = bytelevel_decode(x->content, x->len, t->dec_buf + used);
        if (m < 0) {
            memcpy(t->dec_buf + used, x->content, x->len);
            m = (long)x->len;
        }
        t->dec_off[x->id] = (uint32_t)used;
        t->dec_len[x->id] = (uint32_t)m;
        used += (size_t)m;
        if ((size_t)m > t->max_token_len) t->max_token_len = (size_t)m;
        if (x->normalized && t->norm != TOK_NORM_NONE) {
            utf8proc_uint8_t *n = NULL;
            int opt = UTF8PROC_STABLE | (t->norm == TOK_NORM_NFC || t->norm == TOK_NORM_NFKC ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE) |
                      (t->norm >= TOK_NORM_NFKC ? UTF8PROC_COMPAT : 0);
            utf8proc_ssize_t k = utf8proc_map((const utf8proc_uint8_t *)x->content, (utf8proc_ssize_t)x->len, &n, opt);
            if (k > 0) {
                free(x->content);
                x->content = (char *)n;
                x->len = (size_t)k;
            } else {
                free(n);
            }
        }
        if (x->normalized) t->any_normalized_added = 1;
    }
    if (t->n_added > 1) qsort(t->added, (size_t)t->n_added, sizeof *t->added, cmp_added);
}

static int load_root(struct lily_tokenizer *t, json_t *root, const char *name) {
    if (!json_is_object(root)) return lily_err_set(LILY_EFORMAT, "%s: not a JSON object", name);
    int rc = load_model(t, root, name);
    if (!rc) rc = load_normalizer(t, json_object_get(root, "normalizer"), name);
    if (!rc) rc = load_pre(t, json_object_get(root, "pre_tokenizer"), name);
    if (!rc) rc = check_decoder(json_object_get(root, "decoder"), name);
    if (!rc) {
        json_t *pp = json_object_get(root, "post_processor");
        const char *ty = type_of(pp);
        if (pp && !json_is_null(pp) && !(ty && !strcmp(ty, "ByteLevel")))
            rc = lily_err_set(LILY_EUNSUPPORTED, "%s: post_processor '%s' is not supported", name, ty ? ty : "?");
    }
    return rc;
}

static struct lily_tokenizer *tok_new(void) {
    struct lily_tokenizer *t = xcalloc(1, sizeof *t);
    pthread_mutex_init(&t->lock, NULL);
    t->cache = xcalloc(TOK_CACHE_SLOTS, sizeof *t->cache);
    return t;
}

static int tok_parse(const char *json, size_t len, const char *name, const char *dir, struct lily_tokenizer **out) {
    *out = NULL;
    json_error_t err;
    json_t *root = json_loadb(json, len, 0, &err);
    if (!root) return lily_err_set(LILY_EFORMAT, "%s: line %d: %s", name, err.line, err.text);
    struct lily_tokenizer *t = tok_new();
    int rc = load_root(t, root, name);
    json_decref(root);
    if (!rc && dir) rc = load_config(t, dir);
    if (rc) {
        tok_free(t);
        return rc;
    }
    finish_added(t);
    *out = t;
    return 0;
}

int tok_load_json(const char *json, size_t len, const char *name, struct lily_tokenizer **out) {
    return tok_parse(json, len, name, NULL, out);
}

int tok_load(const char *dir, struct lily_tokenizer **out) {
    *out = NULL;
    char *path = lily_path_join(dir, "tokenizer.json");
    char *buf;
    size_t len;
    int rc = lily_read_file(path, (size_t)1 << 30, &buf, &len);
    if (!rc) {
        rc = tok_parse(buf, len, path, dir, out);
        free(buf);
    }
    free(path);
    return rc;
}

void tok_free(struct lily_tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_pre; i++)
        if (t->pre[i].re) onig_free(t->pre[i].re);
    for (int i = 0; i < t->n_added; i++) free(t->added[i].content);
    free(t->added);
    free(t->dec_off);
    free(t->dec_len);
    free(t->dec_buf);
    free(t->kind);
    free(t->key_off);
    free(t->key_len);
    free(t->key_buf);
    free(t->vocab_tab);
    free(t->merges);
    free(t->cache);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

int tok_n_vocab(const struct lily_tokenizer *t) { return t->n_vocab; }

int tok_find(const struct lily_tokenizer *t, const char *token) {
    size_t n = strlen(token);
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].len == n && !memcmp(t->added[i].content, token, n)) return t->added[i].id;
    return tok_vocab_lookup(t, token, n);
}

int tok_is_special(const struct lily_tokenizer *t, int id) { return id >= 0 && id < t->n_vocab && t->kind[id] == 3; }
int tok_is_added(const struct lily_tokenizer *t, int id) { return id >= 0 && id < t->n_vocab && t->kind[id] >= 2; }
