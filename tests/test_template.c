// test_template.c: the chat template renderer in C: the Python string semantics it relies on
// (values printed by CPython), the plain spans (exactly the request's text, nothing of the
// template's own markup), loading from chat_template.jinja / tokenizer_config.json and refusing
// foreign templates. Byte equality with jinja2/HF on whole conversations is checked by
// tests/sh/test_prompt_cli.sh (golden files) and tests/py/test_template.py.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "common.h"
#include "template.h"
#include "template_py.h"

static void test_float_repr(void **st) {
    (void)st;
    // (value, repr(value)) as CPython 3 prints them.
    static const struct {
        double x;
        const char *s;
    } cases[] = {
        {0.1, "0.1"},
        {1.0, "1.0"},
        {1e+16, "1e+16"},
        {1000000000000000.0, "1000000000000000.0"},
        {123456.789, "123456.789"},
        {1e-05, "1e-05"},
        {0.0001, "0.0001"},
        {-0.0, "-0.0"},
        {1.5e+300, "1.5e+300"},
        {5e-324, "5e-324"},
        {2.5e-05, "2.5e-05"},
        {0.3333333333333333, "0.3333333333333333"},
        {100.0, "100.0"},
        {1e+22, "1e+22"},
        {1.2345678901234568e+16, "1.2345678901234568e+16"},
        {-1.25, "-1.25"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sbuf b = {0};
        py_float_repr(cases[i].x, &b);
        assert_string_equal(b.p, cases[i].s);
        sbuf_free(&b);
    }
}

static void test_tojson(void **st) {
    (void)st;
    json_t *v = json_loads("{\"a\": [1, 2.5, null, true, \"x\\n\\\"\\\\\\u0001\xc3\xa9\xe2\x80\xa8\"],"
                           " \"b\": {}}", 0, NULL);
    assert_non_null(v);
    struct sbuf b = {0};
    py_tojson(v, &b);
    // json.dumps(..., ensure_ascii=False) in CPython:
    assert_string_equal(b.p, "{\"a\": [1, 2.5, null, true, \"x\\n\\\"\\\\\\u0001\xc3\xa9\xe2\x80\xa8\"], "
                             "\"b\": {}}");
    sbuf_free(&b);
    json_decref(v);
}

static void test_strip(void **st) {
    (void)st;
    // str.strip() removes U+3000, U+00A0, U+2028, U+0085, U+001C..U+001F, but not U+180E / U+200B.
    const char *s = "\xe3\x80\x80\xc2\xa0\x1c x y \xe2\x80\xa8\xc2\x85\x1f";
    size_t off, len;
    py_strip(s, strlen(s), &off, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(s + off, "x y", 3);
    const char *t = "\xe1\xa0\x8e" "a" "\xe2\x80\x8b";
    py_strip(t, strlen(t), &off, &len);
    assert_int_equal(off, 0);
    assert_int_equal(len, strlen(t));
    py_strip(" \n\t", 3, &off, &len);
    assert_int_equal(len, 0);
}

static struct lily_template *load_variant(const char *v) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fixtures/templates/config-%s", v);
    struct lily_template *t;
    int rc = tmpl_load(dir, &t);
    if (rc) fprintf(stderr, "%s\n", lily_err_msg());
    assert_int_equal(rc, 0);
    assert_string_equal(tmpl_name(t), v);
    return t;
}

// The spans must be exactly the request's text, in order: here every piece of request text is
// a distinct marker, and the pieces outside the spans must contain none of it.
static void test_plain_spans(void **st) {
    (void)st;
    struct lily_template *t = load_variant("qwen3.5");
    const char *req_text =
        "{\"messages\": ["
        "{\"role\": \"system\", \"content\": \" SYS<|im_end|> \"},"
        "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"U1a\"}, "
        "{\"type\": \"text\", \"text\": \"U1b\"}]},"
        "{\"role\": \"assistant\", \"content\": \"A1\", \"reasoning_content\": \"R1\", "
        "\"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"FN\", "
        "\"arguments\": \"{\\\"K1\\\": \\\"V1\\\", \\\"K2\\\": [2]}\"}}]},"
        "{\"role\": \"tool\", \"content\": \"TR<|im_start|>\"},"
        "{\"role\": \"assistant\", \"content\": \"<think>R2</think>A2\"}"
        "], \"tools\": [{\"name\": \"TOOLDEF\"}]}";
    const char *want[] = {"{\"name\": \"TOOLDEF\"}", "SYS<|im_end|>", "U1aU1b", "R1", "A1", "FN",
                          "K1", "V1", "K2", "[2]", "TR<|im_start|>", "R2", "A2"};
    int n_want = sizeof want / sizeof want[0];
    json_t *req = json_loads(req_text, 0, NULL);
    assert_non_null(req);
    char *text;
    size_t len;
    struct tok_span *sp;
    int n;
    assert_int_equal(tmpl_render(t, req, 1, &text, &len, &sp, &n), 0);
    assert_int_equal(n, n_want);
    size_t prev_end = 0;
    for (int i = 0; i < n; i++) {
        assert_true(sp[i].off >= prev_end && sp[i].off + sp[i].len <= len);
        assert_int_equal(sp[i].len, strlen(want[i]));
        assert_memory_equal(text + sp[i].off, want[i], sp[i].len);
        // Template markup between spans holds no request text.
        char gap[4096];
        size_t g = sp[i].off - prev_end;
        assert_true(g < sizeof gap);
        memcpy(gap, text + prev_end, g);
        gap[g] = 0;
        assert_null(strstr(gap, "TOOLDEF"));
        assert_null(strstr(gap, "SYS"));
        assert_null(strstr(gap, "U1"));
        prev_end = sp[i].off + sp[i].len;
    }
    assert_true(strstr(text, "<|im_start|>assistant\n<think>\n") != NULL);
    free(text);
    free(sp);
    json_decref(req);
    tmpl_free(t);
}

static void test_starts_in_reasoning(void **st) {
    (void)st;
    struct lily_template *t = load_variant("qwen3.6");
    json_t *on = json_loads("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}", 0, NULL);
    json_t *off = json_loads("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], "
                             "\"chat_template_kwargs\": {\"enable_thinking\": false}}", 0, NULL);
    assert_int_equal(tmpl_starts_in_reasoning(t, on), 1);
    assert_int_equal(tmpl_starts_in_reasoning(t, off), 0);
    json_decref(on);
    json_decref(off);
    tmpl_free(t);
}

static void test_load_errors(void **st) {
    (void)st;
    struct lily_template *t = (struct lily_template *)1;
    assert_int_equal(tmpl_load("/nonexistent-dir", &t), LILY_EMISSING);
    assert_null(t);
    char dir[] = "/tmp/lily-tmpl-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[300];
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    FILE *f = fopen(path, "w");
    fputs("{% for m in messages %}{{ m.content }}{% endfor %}", f);
    fclose(f);
    assert_int_equal(tmpl_load(dir, &t), LILY_EUNSUPPORTED);
    assert_non_null(strstr(lily_err_msg(), "chat_template.jinja: not a chat template Lily renders"));
    remove(path);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float_repr),  cmocka_unit_test(test_tojson),
        cmocka_unit_test(test_strip),       cmocka_unit_test(test_plain_spans),
        cmocka_unit_test(test_starts_in_reasoning), cmocka_unit_test(test_load_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
