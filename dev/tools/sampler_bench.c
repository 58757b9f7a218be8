// sampler_bench.c: the host sampler's time a token at the full vocabulary (248,320 ids) for top-p /
// min-p settings on a flat distribution (logits uniform in [0, 2): the random checkpoint's shape), the
// case that sorted most of the vocabulary before the wide nucleus (docs/PERF.md, "Server overhead /
// twelfth session"). A timing, not a test: `make` builds it; build/dev/sampler_bench.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sampler.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
    const int V = 248320, n = 20;
    float *l0 = malloc(sizeof(float) * V), *l = malloc(sizeof(float) * V);
    srand(1);
    for (int i = 0; i < V; i++) l0[i] = (float)rand() / RAND_MAX * 2.0f;
    const struct { float t, top_p, min_p; const char *name; } c[] = {
        {1.0f, 0.95f, 0.0f, "T 1, top_p .95"}, {0.7f, 0.9f, 0.0f, "T .7, top_p .9"},
        {1.0f, 1.0f, 0.05f, "T 1, min_p .05"}, {0.7f, 0.9f, 0.05f, "T .7, top_p .9, min_p .05"}};
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        struct sampler_params sp;
        sampler_params_default(&sp);
        sp.has_seed = 1, sp.temperature = c[k].t, sp.top_p = c[k].top_p, sp.min_p = c[k].min_p;
        struct sampler s;
        sampler_init(&s, &sp, V);
        const double t0 = now();
        long sum = 0;
        for (int d = 0; d < n; d++) {
            memcpy(l, l0, sizeof(float) * V);
            sum += sampler_sample(&s, l);
        }
        printf("%-28s %6.2f ms a token (ids sum %ld)\n", c[k].name, (now() - t0) / n * 1e3, sum);
        sampler_free(&s);
    }
    free(l0);
    free(l);
    return 0;
}
