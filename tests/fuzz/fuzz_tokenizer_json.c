// fuzz_tokenizer_json.c: libFuzzer target for tok_load_json: any bytes as tokenizer.json must load
// or fail with a message, never crash; a loaded tokenizer must encode and decode a fixed text.
//   make fuzz   (tests/fuzz/Makefile.fuzz); seeds are small valid tokenizer.json files
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct lily_tokenizer *t;
    if (tok_load_json((const char *)data, size, "fuzz.json", &t)) {
        if (!lily_err_msg()[0]) abort();
        return 0;
    }
    static const char text[] = "Hello <|im_end|> wörld 123 \xe4\xb8\xad\r\n  x";
    int *ids, n;
    if (tok_encode(t, text, sizeof text - 1, 1, &ids, &n) == 0) {
        char *out;
        size_t len;
        if (tok_decode(t, ids, n, 1, &out, &len) == 0) free(out);
        free(ids);
    }
    tok_free(t);
    return 0;
}
