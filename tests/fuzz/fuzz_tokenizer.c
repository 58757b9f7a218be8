// fuzz_tokenizer.c: libFuzzer target for encoding and decoding arbitrary bytes with the small
// fixture tokenizer: encode (specials on and off, and with a plain span) must either succeed or
// reject invalid UTF-8; decode and the streaming decoder must agree on any id sequence.
//   make fuzz   (tests/fuzz/Makefile.fuzz)
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "tokenizer.h"

static struct lily_tokenizer *tok;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!tok && tok_load("tests/fixtures/tokenizers/small", &tok)) {
        // A relative path: say so rather than abort on every input when run from elsewhere.
        fprintf(stderr, "fuzz_tokenizer: %s (run from the repository root, as make fuzz does)\n",
                lily_err_msg());
        exit(2);
    }
    int *ids, n;
    for (int special = 0; special < 2; special++) {
        int rc = tok_encode(tok, (const char *)data, size, special, &ids, &n);
        if (rc == 0) {
            char *text;
            size_t len;
            if (tok_decode(tok, ids, n, 0, &text, &len)) abort();
            free(text);
            free(ids);
        } else if (rc != LILY_EINVAL) {
            abort();
        }
    }
    struct tok_span span = {size / 3, size / 3};
    if (tok_encode_spans(tok, (const char *)data, size, &span, 1, &ids, &n) == 0) free(ids);
    // The bytes as ids: whole decode vs stream.
    int m = (int)(size / 2);
    int *v = malloc((size_t)(m + 1) * sizeof(int));
    for (int i = 0; i < m; i++) v[i] = (data[2 * i] | data[2 * i + 1] << 8) % (tok_n_vocab(tok) + 2) - 1;
    char *whole;
    size_t wl;
    if (tok_decode(tok, v, m, size & 1, &whole, &wl) == 0) {
        struct tok_stream s;
        tok_stream_init(&s, size & 1);
        char buf[1024];
        size_t got = 0;
        for (int i = 0; i <= m; i++) {
            int k = i < m ? tok_stream_push(tok, &s, v[i], buf, sizeof buf) : tok_stream_flush(&s, buf, sizeof buf);
            if (k < 0 || got + (size_t)k > wl || memcmp(whole + got, buf, (size_t)k)) abort();
            got += (size_t)k;
        }
        if (got != wl) abort();
        free(whole);
    }
    free(v);
    return 0;
}
