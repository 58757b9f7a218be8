// test_parse.c: the output parser (parse.h) on realistic and broken Qwen3.5 outputs. Each case is
// fed whole, one byte-character at a time and in random chunkings (split at UTF-8 boundaries);
// every way must give the expected reasoning, content and tool calls, and the deltas taken after
// each piece must add up to the same text.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common.h"
#include "parse.h"

static const char *TOOLS =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {"
    "\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": "
    "\"integer\"}, \"ratio\": {\"type\": \"number\"}, \"metric\": {\"type\": \"boolean\"}, "
    "\"opts\": {\"type\": \"object\"}, \"list\": {\"type\": \"array\"}, \"code\": {\"type\": "
    "\"string\"}, \"maybe\": {\"type\": [\"integer\", \"null\"]}}}}},"
    "{\"type\": \"function\", \"function\": {\"name\": \"search\", \"parameters\": {\"type\": "
    "\"object\", \"properties\": {\"query\": {\"type\": \"string\"}}}}}]";

static uint32_t rng = 2463534242u;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

struct result {
    char text[8192];
};

static void cat(struct result *r, const char *s) {
    size_t a = strlen(r->text), b = strlen(s);
    assert_true(a + b < sizeof r->text);
    memcpy(r->text + a, s, b + 1);
}

// Feed `out` in pieces: mode 0 whole, 1 per byte-character, 2+ random chunks of 1..mode bytes.
// Returns "R=<reasoning>|C=<content>|name(args);..." in r.
static void run(const char *out, int in_reasoning, const char *tools_json, int parse_tools,
                int mode, struct result *r) {
    json_t *tools = tools_json ? json_loads(tools_json, 0, NULL) : NULL;
    struct lily_parser *p = parse_new(in_reasoning, tools, parse_tools);
    json_decref(tools); // the parser keeps its own reference
    char reasoning[8192] = "", content[8192] = "";
    size_t n = strlen(out), i = 0;
    int last_calls = 0;
    struct parse_delta d;
    while (i < n) {
        size_t k = mode == 0 ? n : mode == 1 ? 1 : 1 + rnd() % (unsigned)mode;
        if (k > n - i) k = n - i;
        while (i + k < n && ((unsigned char)out[i + k] & 0xc0) == 0x80) k++; // whole characters
        parse_feed(p, out + i, k);
        i += k;
        int fresh = parse_take(p, &d);
        if (d.reasoning) strcat(reasoning, d.reasoning);
        if (d.content) strcat(content, d.content);
        assert_true(d.n_tool_calls >= last_calls);
        assert_int_equal(fresh, d.reasoning || d.content || d.n_tool_calls != last_calls);
        last_calls = d.n_tool_calls;
        parse_delta_free(&d);
    }
    parse_finish(p);
    parse_take(p, &d);
    if (d.reasoning) strcat(reasoning, d.reasoning);
    if (d.content) strcat(content, d.content);
    parse_delta_free(&d);
    r->text[0] = 0;
    cat(r, "R=");
    cat(r, reasoning);
    cat(r, "|C=");
    cat(r, content);
    cat(r, "|");
    for (int c = 0; c < parse_n_tool_calls(p); c++) {
        cat(r, parse_tool_name(p, c));
        cat(r, "(");
        cat(r, parse_tool_args(p, c));
        cat(r, ");");
    }
    parse_free(p);
}

// Every way of feeding must give `want`.
static void check(const char *out, int in_reasoning, const char *tools, int parse_tools,
                  const char *want) {
    struct result r;
    for (int mode = 0; mode < 12; mode++) {
        for (int rep = 0; rep < (mode < 2 ? 1 : 8); rep++) {
            run(out, in_reasoning, tools, parse_tools, mode, &r);
            if (strcmp(r.text, want)) {
                fprintf(stderr, "mode %d: input:\n%s\ngot:  %s\nwant: %s\n", mode, out, r.text,
                        want);
                fail();
            }
        }
    }
}

static void test_reasoning_then_content(void **st) {
    (void)st;
    check("Let me think.\nStep 2.\n</think>\n\nThe answer is 4.", 1, NULL, 1,
          "R=Let me think.\nStep 2.|C=The answer is 4.|");
    check("\n\nthought\n\n</think>\n\n\nanswer\n", 1, NULL, 1, "R=thought|C=answer\n|");
    check("Hello, world!", 0, NULL, 1, "R=|C=Hello, world!|");
    check("", 1, NULL, 1, "R=|C=|");
    check("only thinking, cut off\n", 1, NULL, 1, "R=only thinking, cut off|C=|");
    check("</think>", 1, NULL, 1, "R=|C=|");
    check("日本語 の 思考 😀\n</think>\n\nrésumé ✓", 1, NULL, 1, "R=日本語 の 思考 😀|C=résumé ✓|");
}

static void test_think_tag_in_content(void **st) {
    (void)st;
    check("<think>\nhmm\n</think>\n\nHi", 0, NULL, 1, "R=hmm|C=Hi|");
    check("\n<think>x</think>y", 0, NULL, 1, "R=x|C=y|");
    check("a <think> b </think> c", 0, NULL, 1, "R=|C=a <think> b </think> c|");
    check("<thin", 0, NULL, 1, "R=|C=<thin|");
    check("<think", 0, NULL, 1, "R=|C=<think|");
    // After </think>, a second <think> is just content.
    check("r</think>\n\n<think>again", 1, NULL, 1, "R=r|C=<think>again|");
    check("partial </thi", 1, NULL, 1, "R=partial </thi|C=|");
}

// Tokens counted as reasoning the way the server counts them: inside <think> before or after the
// token's text is fed (so the opening and closing tags count).
static int count_reasoning(const char *const *toks, int n, int in_reasoning) {
    struct lily_parser *p = parse_new(in_reasoning, NULL, 1);
    int k = 0;
    for (int i = 0; i < n; i++) {
        int was = parse_in_reasoning(p);
        parse_feed(p, toks[i], strlen(toks[i]));
        k += was || parse_in_reasoning(p);
    }
    parse_free(p);
    return k;
}

static void test_in_reasoning(void **st) {
    (void)st;
    const char *a[] = {"Let", " me", "\n", "</think>", "\n\n", "Hi", "<tool_call>"};
    assert_int_equal(count_reasoning(a, 7, 1), 4);
    assert_int_equal(count_reasoning(a, 3, 1), 3); // cut off while thinking
    assert_int_equal(count_reasoning(a, 7, 0), 0); // thinking off: </think> is content
    const char *b[] = {"\n", "<think>", "x", "</think>", "y"};
    assert_int_equal(count_reasoning(b, 5, 0), 3);
}

static void test_tool_calls(void **st) {
    (void)st;
    check("The user wants weather.\n</think>\n\n<tool_call>\n<function=get_weather>\n"
          "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
          "</function>\n</tool_call>",
          1, TOOLS, 1, "R=The user wants weather.|C=|get_weather({\"city\": \"Paris\", \"days\": 3});");
    check("I'll check.\n\n<tool_call>\n<function=search>\n<parameter=query>\nlily engine\n"
          "</parameter>\n</function>\n</tool_call>",
          0, TOOLS, 1, "R=|C=I'll check.|search({\"query\": \"lily engine\"});");
    // Parallel calls, newline between them and after.
    check("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
          "</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n<parameter=city>\n"
          "Rome\n</parameter>\n</function>\n</tool_call>\n",
          0, TOOLS, 1,
          "R=|C=|get_weather({\"city\": \"Paris\"});get_weather({\"city\": \"Rome\"});");
    // Without tools in the request any function name is accepted, values stay strings.
    check("<tool_call>\n<function=anything>\n<parameter=n>\n5\n</parameter>\n</function>\n"
          "</tool_call>",
          0, NULL, 1, "R=|C=|anything({\"n\": \"5\"});");
    // tool_choice none: the text stays content.
    check("<tool_call>\n<function=search>\n</function>\n</tool_call>", 0, TOOLS, 0,
          "R=|C=<tool_call>\n<function=search>\n</function>\n</tool_call>|");
    // A call written inside the reasoning stays reasoning.
    check("maybe <tool_call>\n<function=search>\n</function>\n</tool_call>\n</think>\n\nok", 1,
          TOOLS, 1, "R=maybe <tool_call>\n<function=search>\n</function>\n</tool_call>|C=ok|");
    // No arguments.
    check("<tool_call>\n<function=search>\n</function>\n</tool_call>", 0, TOOLS, 1,
          "R=|C=|search({});");
}

static void test_typed_values(void **st) {
    (void)st;
    check("<tool_call>\n<function=get_weather>\n"
          "<parameter=days>\n12\n</parameter>\n"
          "<parameter=ratio>\n0.1\n</parameter>\n"
          "<parameter=metric>\ntrue\n</parameter>\n"
          "<parameter=opts>\n{\"unit\": \"C\", \"n\": [1, 2]}\n</parameter>\n"
          "<parameter=list>\n[\"a\", 1.5e3]\n</parameter>\n"
          "<parameter=code>\n123\n</parameter>\n"
          "<parameter=city>\nline one\nline two\n\n</parameter>\n"
          "<parameter=maybe>\nnull\n</parameter>\n"
          "<parameter=other>\n{\"x\": 1}\n</parameter>\n"
          "</function>\n</tool_call>",
          0, TOOLS, 1,
          "R=|C=|get_weather({\"days\": 12, \"ratio\": 0.1, \"metric\": true, \"opts\": {\"unit\": "
          "\"C\", \"n\": [1, 2]}, \"list\": [\"a\", 1500.0], \"code\": \"123\", \"city\": \"line "
          "one\\nline two\\n\", \"maybe\": null, \"other\": \"{\\\"x\\\": 1}\"});");
    // Invalid JSON for a typed parameter stays a string; Python-style booleans are booleans.
    check("<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n"
          "<parameter=metric>\nFalse\n</parameter>\n<parameter=opts>\n{broken\n</parameter>\n"
          "</function>\n</tool_call>",
          0, TOOLS, 1,
          "R=|C=|get_weather({\"days\": \"three\", \"metric\": false, \"opts\": \"{broken\"});");
}

static void test_malformed(void **st) {
    (void)st;
    // Never closed: passed on as content.
    check("Sure.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nPar", 0, TOOLS, 1,
          "R=|C=Sure.<tool_call>\n<function=get_weather>\n<parameter=city>\nPar|");
    // Garbage inside.
    check("<tool_call>{\"name\": \"search\"}</tool_call> done", 0, TOOLS, 1,
          "R=|C=<tool_call>{\"name\": \"search\"}</tool_call> done|");
    // A function the request did not offer.
    check("<tool_call>\n<function=rm_rf>\n</function>\n</tool_call>", 0, TOOLS, 1,
          "R=|C=<tool_call>\n<function=rm_rf>\n</function>\n</tool_call>|");
    // Text after </function>.
    check("<tool_call>\n<function=search>\n</function>junk\n</tool_call>", 0, TOOLS, 1,
          "R=|C=<tool_call>\n<function=search>\n</function>junk\n</tool_call>|");
    // A call opened twice: the first (unclosed) one is text, the second parses.
    check("<tool_call>\n<function=search>\n<tool_call>\n<function=search>\n<parameter=query>\nx\n"
          "</parameter>\n</function>\n</tool_call>",
          0, TOOLS, 1, "R=|C=<tool_call>\n<function=search>\n|search({\"query\": \"x\"});");
    // Missing </parameter> and </function> are tolerated.
    check("<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n<parameter=days>\n2\n"
          "</tool_call>",
          0, TOOLS, 1, "R=|C=|get_weather({\"city\": \"Oslo\", \"days\": 2});");
    // Partial tags held back then released at the end.
    check("Hello <tool_", 0, TOOLS, 1, "R=|C=Hello <tool_|");
    check("Hello <tool_call", 0, TOOLS, 1, "R=|C=Hello <tool_call|");
    check("x </tool_call> y", 0, TOOLS, 1, "R=|C=x </tool_call> y|");
    check("<tool_call></tool_call>", 0, TOOLS, 1, "R=|C=<tool_call></tool_call>|");
    check("<tool_call>\n<function=>\n</function>\n</tool_call>", 0, NULL, 1,
          "R=|C=<tool_call>\n<function=>\n</function>\n</tool_call>|");
}

// Random bytes and tag soup: no crash, and every chunking gives the same result.
static void test_soup_consistent(void **st) {
    (void)st;
    const char *pieces[] = {"<think>", "</think>", "<tool_call>", "</tool_call>", "<function=",
                            "search>", "get_weather>", "<parameter=", "query>", "</parameter>",
                            "</function>", "\n", " ", "x", "é", "<", ">", "/", "3", "{\"a\":1}"};
    for (int t = 0; t < 300; t++) {
        char buf[2048] = "";
        int np = 1 + (int)(rnd() % 40);
        for (int i = 0; i < np; i++) strcat(buf, pieces[rnd() % 20]);
        int in_r = (int)(rnd() % 2);
        struct result whole, other;
        run(buf, in_r, TOOLS, 1, 0, &whole);
        for (int mode = 1; mode < 8; mode++) {
            run(buf, in_r, TOOLS, 1, mode, &other);
            if (strcmp(whole.text, other.text)) {
                fprintf(stderr, "input:\n%s\nwhole: %s\nmode %d: %s\n", buf, whole.text, mode,
                        other.text);
                fail();
            }
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reasoning_then_content), cmocka_unit_test(test_think_tag_in_content),
        cmocka_unit_test(test_tool_calls),             cmocka_unit_test(test_typed_values),
        cmocka_unit_test(test_malformed),              cmocka_unit_test(test_soup_consistent),
        cmocka_unit_test(test_in_reasoning),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
