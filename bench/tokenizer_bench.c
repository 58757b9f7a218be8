// tokenizer_bench.c: encode one large text file with Lily's tokenizer and print MB/s (best of
// `reps` runs; the word cache is cleared between runs by reloading). Not a test: numbers go to
// docs/PERF.md. Built and run by bench/tokenizer_bench.sh, next to HF tokenizers on the same text.
//   cc -O2 -Isrc bench/tokenizer_bench.c build/liblily.a $(pkg-config --libs ...) -o build/tokenizer_bench
//   build/tokenizer_bench DIR FILE [reps]
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "tokenizer.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s TOKENIZER_DIR FILE [reps]\n", argv[0]);
        return 2;
    }
    int reps = argc > 3 ? atoi(argv[3]) : 3;
    char *text;
    size_t len;
    if (lily_read_file(argv[2], 0, &text, &len)) {
        fprintf(stderr, "lily: %s\n", lily_err_msg());
        return 1;
    }
    double best = 1e30;
    int n = 0;
    for (int r = 0; r < reps; r++) {
        struct lily_tokenizer *t;
        if (tok_load(argv[1], &t)) {
            fprintf(stderr, "lily: %s\n", lily_err_msg());
            return 1;
        }
        int *ids;
        double t0 = lily_time();
        if (tok_encode(t, text, len, 1, &ids, &n)) {
            fprintf(stderr, "lily: %s\n", lily_err_msg());
            return 1;
        }
        double dt = lily_time() - t0;
        if (dt < best) best = dt;
        free(ids);
        tok_free(t);
    }
    printf("lily  %8.2f MB/s  (%zu bytes -> %d tokens in %.3f s)\n", len / best / 1e6, len, n, best);
    free(text);
    return 0;
}
