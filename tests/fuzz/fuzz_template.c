// fuzz_template.c: libFuzzer target: arbitrary bytes as an OpenAI request body -> JSON parse ->
// chat template render (both templates). Must never crash; a successful render must give sorted,
// disjoint spans inside the text. Built by tests/fuzz/Makefile.fuzz (make fuzz); seeds in
// tests/fuzz/corpus/fuzz_template/.
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "template.h"

static struct lily_template *tmpl[2];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!tmpl[0]) {
        // Relative paths: a run started outside the repository root cannot find them, which must
        // read as that, not as a crash of every input (as a fork-mode run once reported).
        if (tmpl_load("tests/fixtures/templates/config-qwen3.5", &tmpl[0]) ||
            tmpl_load("tests/fixtures/templates/config-qwen3.6", &tmpl[1])) {
            fprintf(stderr, "fuzz_template: %s (run from the repository root, as make fuzz does)\n",
                    lily_err_msg());
            exit(2);
        }
    }
    json_t *req = json_loadb((const char *)data, size, 0, NULL);
    if (!req) return 0;
    for (int v = 0; v < 2; v++) {
        char *text;
        size_t len;
        struct tok_span *sp;
        int n;
        if (tmpl_render(tmpl[v], req, v, &text, &len, &sp, &n) == 0) {
            size_t end = 0;
            for (int i = 0; i < n; i++) {
                CHECK(sp[i].off >= end && sp[i].len > 0 && sp[i].off + sp[i].len <= len);
                end = sp[i].off + sp[i].len;
            }
            free(text);
            free(sp);
        }
        (void)tmpl_starts_in_reasoning(tmpl[v], req);
    }
    json_decref(req);
    return 0;
}
