// fuzz_parse.c: libFuzzer target for the output parser: the first bytes choose the parser flags
// and a chunking seed, the rest is model output fed whole and in random chunks (cut at UTF-8
// boundaries). Must never crash, and both feedings must give the same reasoning, content and tool
// calls. Built by tests/fuzz/Makefile.fuzz; seeds in tests/fuzz/corpus/fuzz_parse/.
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "parse.h"
#include "template_py.h"

static const char *TOOLS =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
    "{\"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}, "
    "\"opts\": {\"type\": [\"object\", \"null\"]}}}}}, {\"name\": \"search\"}]";

// Everything the parser produced, as one string.
static char *run(const uint8_t *d, size_t n, int flags, uint32_t seed, const json_t *tools) {
    struct lily_parser *p = parse_new(flags & 1, (flags & 2) ? tools : NULL, !(flags & 4));
    struct sbuf r = {0}, c = {0}, all = {0};
    struct parse_delta dl;
    size_t i = 0;
    while (i < n) {
        size_t k = n - i;
        if (seed) {
            seed ^= seed << 13, seed ^= seed >> 17, seed ^= seed << 5;
            k = 1 + seed % 7;
            if (k > n - i) k = n - i;
            while (i + k < n && (d[i + k] & 0xc0) == 0x80) k++;
        }
        parse_feed(p, (const char *)d + i, k);
        i += k;
        parse_take(p, &dl);
        if (dl.reasoning) sbuf_puts(&r, dl.reasoning);
        if (dl.content) sbuf_puts(&c, dl.content);
        parse_delta_free(&dl);
    }
    parse_finish(p);
    parse_take(p, &dl);
    if (dl.reasoning) sbuf_puts(&r, dl.reasoning);
    if (dl.content) sbuf_puts(&c, dl.content);
    parse_delta_free(&dl);
    sbuf_puts(&all, "R=");
    if (r.p) sbuf_puts(&all, r.p);
    sbuf_puts(&all, "|C=");
    if (c.p) sbuf_puts(&all, c.p);
    for (int t = 0; t < parse_n_tool_calls(p); t++) {
        sbuf_puts(&all, "|");
        sbuf_puts(&all, parse_tool_name(p, t));
        sbuf_puts(&all, parse_tool_args(p, t));
        json_t *a = json_loads(parse_tool_args(p, t), 0, NULL);
        CHECK(json_is_object(a)); // arguments are always a JSON object
        json_decref(a);
    }
    sbuf_free(&r);
    sbuf_free(&c);
    parse_free(p);
    return all.p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    static json_t *tools;
    if (!tools) tools = json_loads(TOOLS, 0, NULL);
    int flags = data[0];
    uint32_t seed = 1u + data[1];
    data += 2, size -= 2;
    // The parser is fed complete UTF-8 (the detokenizer guarantees it); embedded NULs are fine.
    char *a = run(data, size, flags, 0, tools), *b = run(data, size, flags, seed, tools);
    CHECK(!strcmp(a, b));
    free(a);
    free(b);
    return 0;
}
