// test_tokenizer.c: the tokenizer (tokenizer.h) against golden files made by HF `tokenizers`
// (tools/tokenizer_golden.py; no Python needed here), plus streaming decode, encode with plain
// spans, thread safety, and bad input: invalid UTF-8, malformed or hostile tokenizer.json.
//
// Vocabularies: the small trained one (always, committed), Qwen3 (gunzipped from shared/data when
// that is found), Qwen3.5 (build/tokenizers/qwen3.5, made by tools/fetch_qwen_tokenizer.sh;
// skipped when absent).
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "common.h"
#include "tokenizer.h"

#define SMALL "tests/fixtures/tokenizers/small"

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

// Directory holding the Qwen3 tokenizer.json, gunzipping the shared copy into build/ on first use.
static const char *qwen3_dir(void) {
    static const char *dir = "build/tokenizers/qwen3";
    if (exists("build/tokenizers/qwen3/tokenizer.json")) return dir;
    const char *roots[] = {getenv("LILY_SHARED"), "shared", "../shared", "/work/shared"};
    for (int i = 0; i < 4; i++) {
        if (!roots[i]) continue;
        char gz[512], cmd[1400];
        snprintf(gz, sizeof gz, "%s/data/qwen3-tokenizer.json.gz", roots[i]);
        if (!exists(gz)) continue;
        snprintf(cmd, sizeof cmd,
                 "mkdir -p %s && gzip -dc '%s' > %s/tokenizer.json.tmp && mv %s/tokenizer.json.tmp %s/tokenizer.json",
                 dir, gz, dir, dir, dir);
        if (system(cmd) == 0) return dir;
    }
    return NULL;
}

static const char *qwen35_dir(void) {
    const char *e = getenv("LILY_QWEN35_TOKENIZER");
    if (e && *e) return exists(e) ? e : NULL;
    return exists("build/tokenizers/qwen3.5/tokenizer.json") ? "build/tokenizers/qwen3.5" : NULL;
}

static uint64_t fnv_ids(const int *ids, int n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++) {
        uint32_t v = (uint32_t)ids[i];
        for (int b = 0; b < 4; b++) h = (h ^ ((v >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    }
    return h;
}

static int ids_equal(const int *got, int n, json_t *want, const char *what, int line) {
    int ok = (size_t)n == json_array_size(want);
    for (int i = 0; ok && i < n; i++) ok = got[i] == json_integer_value(json_array_get(want, (size_t)i));
    if (!ok) {
        fprintf(stderr, "golden line %d (%s): got %d ids [", line, what, n);
        for (int i = 0; i < n && i < 24; i++) fprintf(stderr, "%s%d", i ? ", " : "", got[i]);
        char *w = json_dumps(want, JSON_COMPACT);
        fprintf(stderr, "], want %.300s\n", w);
        free(w);
    }
    return ok;
}

// Concatenated stream output for ids (one push at a time) plus the flush; checks each push gave
// complete UTF-8 only.
static char *stream_all(const struct lily_tokenizer *t, const int *ids, int n, int skip, size_t *len) {
    struct tok_stream s;
    tok_stream_init(&s, skip);
    size_t cap = 1024, w = 0, total = 64;
    char *all = xmalloc(total);
    char *buf = xmalloc(cap);
    for (int i = 0; i <= n; i++) {
        int k = i < n ? tok_stream_push(t, &s, ids[i], buf, cap) : tok_stream_flush(&s, buf, cap);
        assert_true(k >= 0);
        // Every piece must stand alone as UTF-8: no sequence split across pushes.
        for (int j = 0; j < k;) {
            unsigned c = (unsigned char)buf[j];
            int m = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
            assert_true(j + m <= k);
            j += m;
        }
        while (w + (size_t)k + 1 > total) all = xrealloc(all, total *= 2);
        memcpy(all + w, buf, (size_t)k);
        w += (size_t)k;
    }
    all[w] = 0;
    free(buf);
    *len = w;
    return all;
}

static void check_golden(const char *dir, const char *golden) {
    struct lily_tokenizer *t;
    int rc = tok_load(dir, &t);
    if (rc) fprintf(stderr, "%s\n", lily_err_msg());
    assert_int_equal(rc, 0);
    FILE *f = fopen(golden, "rb");
    assert_non_null(f);
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int lineno = 0, bad = 0, cases = 0;
    while ((got = getline(&line, &cap, f)) > 0) {
        lineno++;
        json_error_t err;
        json_t *c = json_loadb(line, (size_t)got, JSON_ALLOW_NUL, &err);
        assert_non_null(c);
        int *ids, n;
        json_t *text = json_object_get(c, "text");
        if (text) {
            const char *s = json_string_value(text);
            size_t len = json_string_length(text);
            assert_int_equal(tok_encode(t, s, len, 1, &ids, &n), 0);
            bad += !ids_equal(ids, n, json_object_get(c, "ids"), "encode", lineno);
            int *pids, pn;
            assert_int_equal(tok_encode(t, s, len, 0, &pids, &pn), 0);
            json_t *plain = json_object_get(c, "plain");
            bad += !ids_equal(pids, pn, plain ? plain : json_object_get(c, "ids"), "plain", lineno);
            free(pids);
            // Decoding: HF's text (the NFC form) and the same through the streaming decoder.
            json_t *dj = json_object_get(c, "decoded");
            const char *want = dj ? json_string_value(dj) : s;
            size_t want_len = dj ? json_string_length(dj) : len;
            char *dec, *st;
            size_t dl, sl;
            assert_int_equal(tok_decode(t, ids, n, 0, &dec, &dl), 0);
            if (dl != want_len || memcmp(dec, want, dl)) {
                fprintf(stderr, "golden line %d: decode gave '%.80s'\n", lineno, dec);
                bad++;
            }
            st = stream_all(t, ids, n, 0, &sl);
            if (sl != dl || memcmp(st, dec, dl)) {
                fprintf(stderr, "golden line %d: stream decode differs\n", lineno);
                bad++;
            }
            free(dec);
            free(st);
            free(ids);
        } else {
            const char *unit = json_string_value(json_object_get(c, "repeat"));
            size_t ul = strlen(unit), count = (size_t)json_integer_value(json_object_get(c, "count"));
            char *s = xmalloc(ul * count + 1);
            for (size_t i = 0; i < count; i++) memcpy(s + i * ul, unit, ul);
            assert_int_equal(tok_encode(t, s, ul * count, 1, &ids, &n), 0);
            char want[32];
            snprintf(want, sizeof want, "%016llx", (unsigned long long)fnv_ids(ids, n));
            json_t *head = json_object_get(c, "head");
            int nh = n < (int)json_array_size(head) ? n : (int)json_array_size(head);
            if (n != json_integer_value(json_object_get(c, "n_ids")) ||
                strcmp(want, json_string_value(json_object_get(c, "ids_fnv"))) ||
                !ids_equal(ids, nh, head, "long head", lineno)) {
                fprintf(stderr, "golden line %d: '%s' x %zu: %d ids, fnv %s\n", lineno, unit, count, n, want);
                bad++;
            }
            free(ids);
            free(s);
        }
        cases++;
        json_decref(c);
    }
    free(line);
    fclose(f);
    tok_free(t);
    fprintf(stderr, "%s: %d cases, %d mismatches\n", golden, cases, bad);
    assert_true(cases > 100);
    assert_int_equal(bad, 0);
}

static void test_golden_small(void **st) {
    (void)st;
    check_golden(SMALL, SMALL "/golden.jsonl");
}

static void test_golden_qwen3(void **st) {
    (void)st;
    const char *d = qwen3_dir();
    if (!d) skip();
    check_golden(d, "tests/fixtures/tokenizers/qwen3/golden.jsonl");
}

static void test_golden_qwen35(void **st) {
    (void)st;
    const char *d = qwen35_dir();
    if (!d) {
        fprintf(stderr, "note: no Qwen3.5 tokenizer (run tools/fetch_qwen_tokenizer.sh); skipped\n");
        skip();
    }
    check_golden(d, "tests/fixtures/tokenizers/qwen3.5/golden.jsonl");
}

// ---------------------------------------------------------------------------------------------

static struct lily_tokenizer *small(void) {
    struct lily_tokenizer *t;
    assert_int_equal(tok_load(SMALL, &t), 0);
    return t;
}

static void test_api(void **st) {
    (void)st;
    struct lily_tokenizer *t = small();
    assert_int_equal(tok_n_vocab(t), 4096);
    int eot = tok_find(t, "<|endoftext|>"), im_end = tok_find(t, "<|im_end|>"), think = tok_find(t, "<think>");
    assert_int_equal(eot, 4087); // the special tokens close the vocabulary, in Qwen order
    assert_int_equal(im_end, 4089);
    assert_true(tok_is_special(t, eot) && tok_is_added(t, eot));
    assert_true(!tok_is_special(t, think) && tok_is_added(t, think));
    assert_true(!tok_is_added(t, 100) && !tok_is_special(t, -1) && !tok_is_special(t, 4096));
    assert_int_equal(tok_find(t, "Ġ"), tok_find(t, "\xc4\xa0"));
    assert_int_equal(tok_find(t, "no such token here"), -1);
    tok_free(t);
}

static void test_stream(void **st) {
    (void)st;
    struct lily_tokenizer *t = small();
    int a = tok_find(t, "a"), e4 = tok_find(t, "\xc3\xa4"), b8 = tok_find(t, "\xc2\xb8"), ad = tok_find(t, "\xc5\x83");
    int im_end = tok_find(t, "<|im_end|>"), think = tok_find(t, "<think>");
    assert_true(a >= 0 && e4 >= 0 && b8 >= 0 && ad >= 0); // byte tokens for E4, B8, AD ("中"): ä ¸ Ń
    char out[1024];
    struct tok_stream s;
    // A character split over three tokens comes out whole, at the last one.
    tok_stream_init(&s, 0);
    assert_int_equal(tok_stream_push(t, &s, e4, out, sizeof out), 0);
    assert_int_equal(tok_stream_push(t, &s, b8, out, sizeof out), 0);
    assert_int_equal(tok_stream_push(t, &s, ad, out, sizeof out), 3);
    assert_memory_equal(out, "\xe4\xb8\xad", 3);
    // Special tokens: their content, or nothing with skip_special (which also keeps a character
    // split around them whole, as HF's decode with skip_special_tokens does).
    assert_int_equal(tok_stream_push(t, &s, im_end, out, sizeof out), 10);
    assert_memory_equal(out, "<|im_end|>", 10);
    tok_stream_init(&s, 1);
    assert_int_equal(tok_stream_push(t, &s, e4, out, sizeof out), 0);
    assert_int_equal(tok_stream_push(t, &s, im_end, out, sizeof out), 0);
    assert_int_equal(tok_stream_push(t, &s, b8, out, sizeof out), 0);
    assert_int_equal(tok_stream_push(t, &s, think, out, sizeof out), 3 + 7); // not special: kept
    assert_memory_equal(out, "\xef\xbf\xbd<think>", 10);
    // An incomplete character at the end of the stream becomes U+FFFD at flush.
    tok_stream_init(&s, 0);
    assert_int_equal(tok_stream_push(t, &s, e4, out, sizeof out), 0);
    assert_int_equal(tok_stream_flush(&s, out, sizeof out), 3);
    assert_memory_equal(out, "\xef\xbf\xbd", 3);
    assert_int_equal(tok_stream_flush(&s, out, sizeof out), 0);
    // Invalid bytes are replaced as soon as they are known to be invalid.
    tok_stream_init(&s, 0);
    assert_int_equal(tok_stream_push(t, &s, e4, out, sizeof out), 0);
    assert_int_equal(tok_stream_push(t, &s, a, out, sizeof out), 4);
    assert_memory_equal(out, "\xef\xbf\xbd" "a", 4);
    assert_int_equal(tok_stream_push(t, &s, -1, out, sizeof out), -1);
    assert_int_equal(tok_stream_push(t, &s, 4096, out, sizeof out), -1);
    // The whole-sequence decoder agrees, with skip_special too.
    int ids[] = {e4, im_end, b8, ad, a};
    char *dec;
    size_t dl;
    assert_int_equal(tok_decode(t, ids, 5, 1, &dec, &dl), 0);
    assert_string_equal(dec, "\xe4\xb8\xad" "a");
    free(dec);
    assert_int_equal(tok_decode(t, ids, 5, 0, &dec, &dl), 0);
    assert_string_equal(dec, "\xef\xbf\xbd<|im_end|>\xef\xbf\xbd\xef\xbf\xbd" "a"); // lone B8, AD: one each
    free(dec);
    tok_free(t);
}

static void test_decode_range(void **st) {
    (void)st;
    struct lily_tokenizer *t = small();
    int bad[][2] = {{1, -1}, {1, 4096}, {1, 1 << 30}};
    for (int i = 0; i < 3; i++) {
        char *out = (char *)1;
        size_t len;
        assert_int_equal(tok_decode(t, bad[i], 2, 0, &out, &len), LILY_ERANGE);
        assert_null(out);
        assert_non_null(strstr(lily_err_msg(), "out of range"));
    }
    char *out;
    size_t len;
    assert_int_equal(tok_decode(t, NULL, 0, 0, &out, &len), 0);
    assert_int_equal(len, 0);
    assert_string_equal(out, "");
    free(out);
    tok_free(t);
}

static void test_invalid_utf8(void **st) {
    (void)st;
    struct lily_tokenizer *t = small();
    const char *bad[] = {"\xff", "abc\x80", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                         "\xf5\x80\x80\x80", "\xe4\xb8", "x\xe4\xb8y", "\xf0\x9f\x98", "<|im_end|>\xfe"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int *ids = (int *)1, n = 7;
        assert_int_equal(tok_encode(t, bad[i], strlen(bad[i]), 1, &ids, &n), LILY_EINVAL);
        assert_null(ids);
        assert_int_equal(n, 0);
        assert_non_null(strstr(lily_err_msg(), "invalid UTF-8"));
    }
    int *ids, n;
    assert_int_equal(tok_encode(t, "", 0, 1, &ids, &n), 0);
    assert_int_equal(n, 0);
    free(ids);
    tok_free(t);
}

// Plain spans: added-token text inside them is ordinary text; outside, it is matched.
static void test_spans(void **st) {
    (void)st;
    struct lily_tokenizer *t = small();
    const char *text = "<|im_start|>user\nhi <|im_end|> <think>x<|im_end|>\n";
    size_t off = strlen("<|im_start|>user\n"), len = strlen("hi <|im_end|> <think>x");
    struct tok_span span = {off, len};
    int *ids, n, *plain, pn;
    assert_int_equal(tok_encode_spans(t, text, strlen(text), &span, 1, &ids, &n), 0);
    // Reference: the control token, then "user\n" + content as one plain piece, then the marker.
    char mid[128];
    snprintf(mid, sizeof mid, "user\n%.*s", (int)len, text + off);
    assert_int_equal(tok_encode(t, mid, strlen(mid), 0, &plain, &pn), 0);
    assert_int_equal(n, pn + 3);
    assert_int_equal(ids[0], tok_find(t, "<|im_start|>"));
    assert_memory_equal(ids + 1, plain, (size_t)pn * sizeof(int));
    assert_int_equal(ids[n - 2], tok_find(t, "<|im_end|>"));
    assert_int_equal(ids[n - 1], tok_find(t, "\xc4\x8a")); // "\n"
    free(ids);
    free(plain);
    // No spans: the same as tok_encode with special on.
    int *a, na, *b, nb;
    assert_int_equal(tok_encode_spans(t, text, strlen(text), NULL, 0, &a, &na), 0);
    assert_int_equal(tok_encode(t, text, strlen(text), 1, &b, &nb), 0);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, (size_t)na * sizeof(int));
    free(a);
    free(b);
    // Spans out of range or out of order are refused.
    struct tok_span bad[2] = {{10, 5}, {2, 1}};
    assert_int_equal(tok_encode_spans(t, text, strlen(text), bad, 2, &a, &na), LILY_EINVAL);
    struct tok_span past = {5, 1000};
    assert_int_equal(tok_encode_spans(t, text, strlen(text), &past, 1, &a, &na), LILY_EINVAL);
    tok_free(t);
}

// ---------------------------------------------------------------------------------------------
// Threads: concurrent encodes (sharing the word cache) give the single-threaded results.

struct job {
    const struct lily_tokenizer *t;
    const char **texts;
    int n;
    int *ok;
};

static void *encode_job(void *p) {
    struct job *j = p;
    for (int r = 0; r < 20; r++)
        for (int i = 0; i < j->n; i++) {
            int *a, na;
            if (tok_encode(j->t, j->texts[i], strlen(j->texts[i]), 1, &a, &na)) {
                *j->ok = 0;
                continue;
            }
            char *d;
            size_t dl;
            if (tok_decode(j->t, a, na, 0, &d, &dl) || strcmp(d, j->texts[i])) *j->ok = 0;
            free(d);
            free(a);
        }
    return NULL;
}

static void test_threads(void **st) {
    (void)st;
    struct lily_tokenizer *t = small();
    const char *texts[] = {"The quick brown fox jumps over the lazy dog. ", "hello hello hello world world",
                           "def f(x):\n    return x\n", "naïve café résumé 中文 😀", "<|im_start|>user\nhi<|im_end|>",
                           "numbers 1234567 and more numbers 89", "The the THE tHe"};
    int ok[4] = {1, 1, 1, 1};
    pthread_t th[4];
    struct job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (struct job){t, texts, 7, &ok[i]};
        pthread_create(&th[i], NULL, encode_job, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) assert_true(ok[i]);
    tok_free(t);
}

// ---------------------------------------------------------------------------------------------
// Hostile tokenizer.json: each variant of the small file must fail cleanly with a message.

static char *small_json;
static size_t small_len;

static int group_setup(void **st) {
    (void)st;
    return lily_read_file(SMALL "/tokenizer.json", 0, &small_json, &small_len);
}

static int group_teardown(void **st) {
    (void)st;
    free(small_json);
    return 0;
}

// Load the small tokenizer.json, apply `edit`, serialise and try to load that.
static int load_edited(void (*edit)(json_t *root), const char *want_in_msg) {
    json_t *root = json_loadb(small_json, small_len, 0, NULL);
    assert_non_null(root);
    edit(root);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    struct lily_tokenizer *t = NULL;
    int rc = tok_load_json(s, strlen(s), "edited.json", &t);
    free(s);
    if (rc == 0) {
        tok_free(t);
        return 0;
    }
    assert_null(t);
    const char *m = lily_err_msg();
    if (strncmp(m, "edited.json: ", 13) || (want_in_msg && !strstr(m, want_in_msg)))
        fprintf(stderr, "unexpected message: %s (wanted '%s')\n", m, want_in_msg ? want_in_msg : "");
    assert_int_equal(strncmp(m, "edited.json: ", 13), 0);
    if (want_in_msg) assert_non_null(strstr(m, want_in_msg));
    return rc;
}

static json_t *model(json_t *r) { return json_object_get(r, "model"); }
static void ed_unigram(json_t *r) { json_object_set_new(model(r), "type", json_string("Unigram")); }
static void ed_wordpiece(json_t *r) { json_object_set_new(model(r), "type", json_string("WordPiece")); }
static void ed_neg_id(json_t *r) { json_object_set_new(json_object_get(model(r), "vocab"), "a", json_integer(-3)); }
static void ed_big_id(json_t *r) { json_object_set_new(json_object_get(model(r), "vocab"), "a", json_integer(1LL << 40)); }
static void ed_str_id(json_t *r) { json_object_set_new(json_object_get(model(r), "vocab"), "a", json_string("7")); }
static void ed_dup_id(json_t *r) {
    json_object_set_new(json_object_get(model(r), "vocab"), "a",
                        json_copy(json_object_get(json_object_get(model(r), "vocab"), "b")));
}
static void ed_no_vocab(json_t *r) { json_object_del(model(r), "vocab"); }
static void ed_no_model(json_t *r) { json_object_del(r, "model"); }
static void ed_merge_unknown(json_t *r) {
    json_array_append_new(json_object_get(model(r), "merges"), json_pack("[ss]", "zzzqqq", "a"));
}
static void ed_merge_result_unknown(json_t *r) {
    json_array_append_new(json_object_get(model(r), "merges"), json_pack("[ss]", "Ġ", "Ġ"));
    json_array_append_new(json_object_get(model(r), "merges"), json_string("q z"));
}
static void ed_merge_form(json_t *r) { json_array_append_new(json_object_get(model(r), "merges"), json_string("a b c")); }
static void ed_merge_type(json_t *r) { json_array_append_new(json_object_get(model(r), "merges"), json_integer(5)); }
static void ed_regex(json_t *r) {
    json_t *split = json_array_get(json_object_get(json_object_get(r, "pre_tokenizer"), "pretokenizers"), 0);
    json_object_set_new(split, "pattern", json_pack("{ss}", "Regex", "(?<=a+)[unclosed"));
}
static void ed_alphabet(json_t *r) { json_object_del(json_object_get(model(r), "vocab"), "Ā"); } // byte 0x00
static void ed_norm(json_t *r) { json_object_set_new(r, "normalizer", json_pack("{ss}", "type", "Lowercase")); }
static void ed_pre(json_t *r) { json_object_set_new(r, "pre_tokenizer", json_pack("{ss}", "type", "Whitespace")); }
static void ed_no_bytelevel(json_t *r) {
    json_array_remove(json_object_get(json_object_get(r, "pre_tokenizer"), "pretokenizers"), 1);
}
static void ed_decoder(json_t *r) { json_object_set_new(r, "decoder", json_pack("{ss}", "type", "WordPiece")); }
static void ed_dropout(json_t *r) { json_object_set_new(model(r), "dropout", json_real(0.1)); }
static void ed_added_neg(json_t *r) {
    json_object_set_new(json_array_get(json_object_get(r, "added_tokens"), 0), "id", json_integer(-1));
}
static void ed_added_dup(json_t *r) {
    json_object_set_new(json_array_get(json_object_get(r, "added_tokens"), 1), "id", json_integer(4087));
}
static void ed_added_empty(json_t *r) {
    json_object_set_new(json_array_get(json_object_get(r, "added_tokens"), 0), "content", json_string(""));
}
static void ed_added_beyond(json_t *r) { // allowed (HF allows it): the vocabulary just grows
    json_array_append_new(json_object_get(r, "added_tokens"),
                          json_pack("{si,ss,sb}", "id", 9000, "content", "<extra>", "special", 1));
}

static void test_bad_json(void **st) {
    (void)st;
    assert_int_equal(load_edited(ed_unigram, "Unigram"), LILY_EUNSUPPORTED);
    assert_int_equal(load_edited(ed_wordpiece, "WordPiece"), LILY_EUNSUPPORTED);
    assert_int_equal(load_edited(ed_neg_id, "vocab id"), LILY_EFORMAT);
    assert_int_equal(load_edited(ed_big_id, "vocab id"), LILY_EFORMAT);
    assert_int_equal(load_edited(ed_str_id, "vocab id"), LILY_EFORMAT);
    assert_int_equal(load_edited(ed_dup_id, "used twice"), LILY_EFORMAT);
    assert_int_equal(load_edited(ed_no_vocab, "vocab"), LILY_EFORMAT);
    assert_int_equal(load_edited(ed_no_model, "model"), LILY_EFORMAT);
    assert_int_equal(load_edited(ed_merge_unknown, "not in the vocab"), LILY_EFORMAT);
    assert_int_equal(load_edited(ed_merge_result_unknown, "not in the vocab"), LILY_EFORMAT);
    assert_int_equal(load_edited(ed_merge_form, "merges["), LILY_EFORMAT);
    assert_int_equal(load_edited(ed_merge_type, "merges["), LILY_EFORMAT);
    assert_int_equal(load_edited(ed_regex, "regex"), LILY_EFORMAT);
    assert_int_equal(load_edited(ed_alphabet, "byte 0x00"), LILY_EFORMAT);
    assert_int_equal(load_edited(ed_norm, "Lowercase"), LILY_EUNSUPPORTED);
    assert_int_equal(load_edited(ed_pre, "Whitespace"), LILY_EUNSUPPORTED);
    assert_int_equal(load_edited(ed_no_bytelevel, "ByteLevel"), LILY_EUNSUPPORTED);
    assert_int_equal(load_edited(ed_decoder, "decoder"), LILY_EUNSUPPORTED);
    assert_int_equal(load_edited(ed_dropout, "dropout"), LILY_EUNSUPPORTED);
    assert_int_equal(load_edited(ed_added_neg, "added_tokens[0]"), LILY_EFORMAT);
    assert_int_equal(load_edited(ed_added_dup, "used twice"), LILY_EFORMAT);
    assert_int_equal(load_edited(ed_added_empty, "no content"), LILY_EFORMAT);
    assert_int_equal(load_edited(ed_added_beyond, NULL), 0);
}

static void test_truncated_and_deep(void **st) {
    (void)st;
    struct lily_tokenizer *t = NULL;
    // Truncated at many points, including inside strings and numbers.
    for (size_t cut = 0; cut < small_len; cut += small_len / 61 + 1) {
        assert_int_equal(tok_load_json(small_json, cut, "cut.json", &t), LILY_EFORMAT);
        assert_null(t);
        assert_int_equal(strncmp(lily_err_msg(), "cut.json: ", 10), 0);
    }
    // Not JSON, not an object, deeply nested.
    const char *junk[] = {"", "null", "[]", "42", "\"x\"", "{\"model\": 5}", "\xff\xfe{}", "{\"model\": {\"vocab\": {}}}"};
    for (size_t i = 0; i < sizeof junk / sizeof *junk; i++) {
        assert_true(tok_load_json(junk[i], strlen(junk[i]), "junk.json", &t) < 0);
        assert_null(t);
    }
    size_t depth = 200000;
    char *deep = xmalloc(2 * depth + 16);
    size_t k = 0;
    k += (size_t)sprintf(deep, "{\"model\":");
    for (size_t i = 0; i < depth; i++) deep[k++] = '[';
    for (size_t i = 0; i < depth; i++) deep[k++] = ']';
    deep[k++] = '}';
    assert_int_equal(tok_load_json(deep, k, "deep.json", &t), LILY_EFORMAT);
    free(deep);
    // Missing directory and file.
    assert_int_equal(tok_load("/nonexistent/dir", &t), LILY_EIO);
    assert_non_null(strstr(lily_err_msg(), "/nonexistent/dir/tokenizer.json"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api),
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_decode_range),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_spans),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_bad_json),
        cmocka_unit_test(test_truncated_and_deep),
        cmocka_unit_test(test_golden_small),
        cmocka_unit_test(test_golden_qwen3),
        cmocka_unit_test(test_golden_qwen35),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
