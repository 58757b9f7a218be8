// test_sampler.c: unit tests for the sampler (sampler.h): empirical distributions against softmax
// computed here in double precision, the candidate sets of top-k / top-p / min-p worked out by hand,
// penalties against their formulas, and seeded determinism.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sampler.h"

// logits whose softmax is exactly probs (log of the probabilities).
static void logits_from_probs(const double *p, int n, float *l) {
    for (int i = 0; i < n; i++) l[i] = p[i] > 0 ? (float)log(p[i]) : -1e30f;
}

// Draw `draws` tokens; counts[i] = how often i came out.
static void histogram(const struct sampler_params *sp, const float *l0, int n, int draws,
                      int *counts) {
    struct sampler s;
    sampler_init(&s, sp, n);
    float *l = malloc(sizeof(float) * (size_t)n);
    memset(counts, 0, sizeof(int) * (size_t)n);
    for (int d = 0; d < draws; d++) {
        memcpy(l, l0, sizeof(float) * (size_t)n);
        int t = sampler_sample(&s, l);
        assert_true(t >= 0 && t < n);
        counts[t]++;
    }
    free(l);
    sampler_free(&s);
}

static void test_greedy(void **st) {
    (void)st;
    struct sampler_params sp;
    sampler_params_default(&sp);
    sp.temperature = 0;
    float l[5] = {0.1f, 3.0f, -2.0f, 2.9f, 0.0f};
    struct sampler s;
    sampler_init(&s, &sp, 5);
    for (int i = 0; i < 10; i++) {
        float c[5];
        memcpy(c, l, sizeof l);
        assert_int_equal(sampler_sample(&s, c), 1);
    }
    sampler_free(&s);
}

// Temperature 1 reproduces the softmax; temperature 0.5 squares the probabilities (renormalised).
static void test_distribution(void **st) {
    (void)st;
    const double p[4] = {0.1, 0.2, 0.3, 0.4};
    float l[4];
    logits_from_probs(p, 4, l);
    int counts[4], draws = 200000;
    struct sampler_params sp;
    sampler_params_default(&sp);
    sp.has_seed = 1;
    sp.seed = 7;
    histogram(&sp, l, 4, draws, counts);
    for (int i = 0; i < 4; i++) {
        double f = (double)counts[i] / draws;
        // 5 standard deviations of a binomial proportion.
        double sd = sqrt(p[i] * (1 - p[i]) / draws);
        assert_true(fabs(f - p[i]) < 5 * sd);
    }
    sp.temperature = 0.5f;
    histogram(&sp, l, 4, draws, counts);
    double z = 0.01 + 0.04 + 0.09 + 0.16;
    for (int i = 0; i < 4; i++) {
        double q = p[i] * p[i] / z, f = (double)counts[i] / draws;
        assert_true(fabs(f - q) < 5 * sqrt(q * (1 - q) / draws));
    }
}

static void test_top_k(void **st) {
    (void)st;
    const double p[5] = {0.05, 0.4, 0.1, 0.3, 0.15};
    float l[5];
    logits_from_probs(p, 5, l);
    int counts[5], draws = 50000;
    struct sampler_params sp;
    sampler_params_default(&sp);
    sp.has_seed = 1;
    sp.top_k = 2;
    histogram(&sp, l, 5, draws, counts);
    assert_int_equal(counts[0] + counts[2] + counts[4], 0);
    // Renormalised 0.4 : 0.3.
    double f = (double)counts[1] / draws, q = 0.4 / 0.7;
    assert_true(fabs(f - q) < 5 * sqrt(q * (1 - q) / draws));
}

// top_p keeps the smallest prefix (by probability) whose mass reaches p.
static void test_top_p(void **st) {
    (void)st;
    const double p[4] = {0.15, 0.5, 0.05, 0.3};
    float l[4];
    logits_from_probs(p, 4, l);
    int counts[4], draws = 20000;
    struct sampler_params sp;
    sampler_params_default(&sp);
    sp.has_seed = 1;
    sp.top_p = 0.75f; // 0.5 < 0.75 <= 0.8: keeps ids 1 and 3
    histogram(&sp, l, 4, draws, counts);
    assert_int_equal(counts[0] + counts[2], 0);
    assert_true(counts[1] > 0 && counts[3] > 0);
    sp.top_p = 0.4f; // the first alone reaches it
    histogram(&sp, l, 4, draws, counts);
    assert_int_equal(counts[1], draws);
    sp.top_p = 0.9f; // 0.5 + 0.3 + 0.15 = 0.95 >= 0.9: drops only id 2
    histogram(&sp, l, 4, draws, counts);
    assert_int_equal(counts[2], 0);
    assert_true(counts[0] > 0);
}

static void test_min_p(void **st) {
    (void)st;
    const double p[4] = {0.15, 0.5, 0.05, 0.3};
    float l[4];
    logits_from_probs(p, 4, l);
    int counts[4], draws = 20000;
    struct sampler_params sp;
    sampler_params_default(&sp);
    sp.has_seed = 1;
    sp.min_p = 0.4f; // keep p >= 0.2: ids 1 and 3
    histogram(&sp, l, 4, draws, counts);
    assert_int_equal(counts[0] + counts[2], 0);
    assert_true(counts[1] > 0 && counts[3] > 0);
    double f = (double)counts[1] / draws, q = 0.5 / 0.8;
    assert_true(fabs(f - q) < 5 * sqrt(q * (1 - q) / draws));
}

// Penalties, checked through greedy choices that flip exactly where the formulas say.
static void test_penalties(void **st) {
    (void)st;
    struct sampler_params sp;
    sampler_params_default(&sp);
    sp.temperature = 0;
    struct sampler s;

    // frequency: token 0 has logit 2.0, token 1 has 1.0; after 3 uses of token 0 with
    // frequency 0.4 its logit is 0.8 < 1.0.
    sp.frequency_penalty = 0.4f;
    sampler_init(&s, &sp, 3);
    float l[3] = {2.0f, 1.0f, 0.0f};
    for (int k = 0; k < 2; k++) sampler_accept(&s, 0);
    float c[3];
    memcpy(c, l, sizeof l);
    assert_int_equal(sampler_sample(&s, c), 0); // 2 - 0.8 = 1.2 > 1
    assert_true(fabsf(c[0] - 1.2f) < 1e-6f);
    sampler_accept(&s, 0);
    memcpy(c, l, sizeof l);
    assert_int_equal(sampler_sample(&s, c), 1); // 2 - 1.2 = 0.8 < 1
    sampler_free(&s);

    // presence: a flat 1.5 for any use, however many.
    sampler_params_default(&sp);
    sp.temperature = 0;
    sp.presence_penalty = 1.5f;
    sampler_init(&s, &sp, 3);
    sampler_accept(&s, 0);
    memcpy(c, l, sizeof l);
    assert_int_equal(sampler_sample(&s, c), 1);
    assert_true(fabsf(c[0] - 0.5f) < 1e-6f);
    sampler_free(&s);

    // repetition (HF): positive logits divided, negative multiplied; prompt tokens count too, but
    // prompt tokens do not get presence/frequency penalties.
    sampler_params_default(&sp);
    sp.temperature = 0;
    sp.repetition_penalty = 2.0f;
    sp.presence_penalty = 5.0f;
    sampler_init(&s, &sp, 3);
    sampler_add_prompt(&s, 0);
    sampler_add_prompt(&s, 2);
    float m[3] = {3.0f, 1.6f, -1.0f};
    memcpy(c, m, sizeof m);
    assert_int_equal(sampler_sample(&s, c), 1); // 3/2 = 1.5 < 1.6
    assert_true(fabsf(c[0] - 1.5f) < 1e-6f);
    assert_true(fabsf(c[2] + 2.0f) < 1e-6f);
    sampler_free(&s);

    // logit bias
    sampler_params_default(&sp);
    sp.temperature = 0;
    struct sampler_bias b = {2, 100.0f};
    sp.bias = &b;
    sp.n_bias = 1;
    sampler_init(&s, &sp, 3);
    memcpy(c, l, sizeof l);
    assert_int_equal(sampler_sample(&s, c), 2);
    sampler_free(&s);
}

static void run_seq(uint64_t seed, int *out, int n) {
    struct sampler_params sp;
    sampler_params_default(&sp);
    sp.has_seed = 1;
    sp.seed = seed;
    sp.top_k = 50;
    sp.top_p = 0.95f;
    sp.temperature = 0.8f;
    const int V = 1000;
    float *l0 = malloc(sizeof(float) * V), *l = malloc(sizeof(float) * V);
    for (int i = 0; i < V; i++) l0[i] = (float)sin(i * 0.37) * 3.0f;
    struct sampler s;
    sampler_init(&s, &sp, V);
    for (int i = 0; i < n; i++) {
        memcpy(l, l0, sizeof(float) * V);
        out[i] = sampler_sample(&s, l);
    }
    sampler_free(&s);
    free(l0);
    free(l);
}

static void test_seed_determinism(void **st) {
    (void)st;
    int a[64], b[64], c[64];
    run_seq(42, a, 64);
    run_seq(42, b, 64);
    run_seq(43, c, 64);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
}

static void test_logprobs(void **st) {
    (void)st;
    const double p[5] = {0.05, 0.4, 0.1, 0.3, 0.15};
    float l[5];
    for (int i = 0; i < 5; i++) l[i] = (float)log(p[i]) + 7.0f; // shift: log_softmax removes it
    int ids[3];
    float lp[3];
    float x = sampler_logprobs(l, 5, 2, 3, ids, lp);
    assert_true(fabs(x - log(0.1)) < 1e-5);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 3);
    assert_int_equal(ids[2], 4);
    assert_true(fabs(lp[0] - log(0.4)) < 1e-5);
    assert_true(fabs(lp[2] - log(0.15)) < 1e-5);
}

// A vocabulary of the real model's size (248,320 ids: the vectorised softmax's blocks, its tail, the
// top-k list): 12 likely ids spread over it and a long tail, at temperature 0.8. Without filters and with
// top-k 20 (the list path); then top-k 1500 (the sort path) over the first 5,000 ids. Each likely id's
// frequency against the softmax computed here in double over what the filter keeps; the rest's total.
static void test_large_vocabulary(void **st) {
    (void)st;
    int V = 248320;
    const int draws = 8000;
    float *l = malloc(sizeof(float) * V);
    int *counts = malloc(sizeof(int) * V);
    for (int i = 0; i < V; i++) l[i] = (float)sin(i * 0.731) * 2.0f - 6.0f; // the tail
    const int hot[12] = {0, 5, 1023, 1024, 1025, 77777, 131071, 200000, 248000, 248313, 248318, 248319};
    const int hot_small[12] = {0, 5, 1023, 1024, 1025, 2047, 3000, 4095, 4096, 4997, 4998, 4999};
    for (int k = 0; k < 12; k++) l[hot[k]] = 3.0f + 0.25f * (float)k;
    for (int k = 0; k < 12; k++) l[hot_small[k]] = 3.0f + 0.25f * (float)k;
    const float T = 0.8f;
    for (int mode = 0; mode < 3; mode++) {
        const int top_k = mode == 0 ? 0 : mode == 1 ? 20 : 1500;
        if (mode == 2) V = 5000; // a sort of every candidate per draw
        // The kept set: the top_k largest logits (or all), with their softmax.
        int *ord = malloc(sizeof(int) * V);
        for (int i = 0; i < V; i++) ord[i] = i;
        int n = V;
        if (top_k) { // selection by repeated max
            for (int a = 0; a < top_k; a++) {
                int b = a;
                for (int i = a + 1; i < V; i++)
                    if (l[ord[i]] > l[ord[b]] || (l[ord[i]] == l[ord[b]] && ord[i] < ord[b])) b = i;
                int t = ord[a];
                ord[a] = ord[b], ord[b] = t;
            }
            n = top_k;
        }
        double mx = -1e30, z = 0;
        for (int a = 0; a < n; a++) mx = l[ord[a]] > mx ? l[ord[a]] : mx;
        for (int a = 0; a < n; a++) z += exp((l[ord[a]] - mx) / T);
        struct sampler_params sp;
        sampler_params_default(&sp);
        sp.has_seed = 1;
        sp.seed = 11 + mode;
        sp.temperature = T;
        sp.top_k = top_k;
        histogram(&sp, l, V, draws, counts);
        double hot_mass = 0, hot_freq = 0;
        const int *h = mode == 2 ? hot_small : hot;
        for (int k = 0; k < 12; k++) {
            double q = exp((l[h[k]] - mx) / T) / z, f = (double)counts[h[k]] / draws;
            assert_true(fabs(f - q) < 5 * sqrt(q * (1 - q) / draws) + 1e-4);
            hot_mass += q, hot_freq += f;
        }
        double tail = 1 - hot_mass; // the rest of the kept set
        assert_true(fabs((1 - hot_freq) - tail) < 5 * sqrt(tail * (1 - tail) / draws) + 1e-4);
        if (top_k) { // nothing outside the kept set
            long outside = draws;
            for (int a = 0; a < n; a++) outside -= counts[ord[a]];
            assert_int_equal(outside, 0);
        }
        free(ord);
    }
    free(l);
    free(counts);
}

// The softmax's exponential against exp() in double: the relative error over (-87, 0], and 0 from -87 down
// and for NaN.
static void test_exp(void **st) {
    (void)st;
    double worst = 0;
    for (int i = 0; i < 8700000; i++) { // (-87, 0]
        float x = -(float)i * 1e-5f;
        double e = exp((double)x), r = fabs(sampler_exp_neg(x) - e) / e;
        worst = r > worst ? r : worst;
    }
    assert_true(worst < 3e-7);
    assert_true(sampler_exp_neg(0.0f) == 1.0f);
    assert_true(sampler_exp_neg(-87.5f) == 0.0f && sampler_exp_neg(-1e30f) == 0.0f);
    assert_true(sampler_exp_neg(-INFINITY) == 0.0f && sampler_exp_neg(NAN) == 0.0f);
}

// top-k, then top-p over the top-k distribution renormalised (as HF transformers and vLLM do):
// p = .4 .3 .2 .1, top-k 2 leaves .57 / .43, and top-p .5 then keeps the first alone (over the whole
// distribution, .4 < .5 would have kept both).
static void test_top_k_then_top_p(void **st) {
    (void)st;
    const double p[4] = {0.2, 0.4, 0.1, 0.3};
    float l[4];
    logits_from_probs(p, 4, l);
    int counts[4];
    struct sampler_params sp;
    sampler_params_default(&sp);
    sp.has_seed = 1;
    sp.top_k = 2;
    sp.top_p = 0.5f;
    histogram(&sp, l, 4, 5000, counts);
    assert_int_equal(counts[1], 5000);
    sp.top_p = 0.6f; // .57 < .6: both
    histogram(&sp, l, 4, 5000, counts);
    assert_int_equal(counts[0] + counts[2], 0);
    assert_true(counts[1] > 0 && counts[3] > 0);
}

// Logits on `levels` equally spaced values in [-5, 5) from a seeded LCG (ties across ids).
static void fill_levels(float *l, int V, uint64_t x, int levels) {
    for (int i = 0; i < V; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        l[i] = (float)((x >> 40) % (uint64_t)levels) * (10.0f / (float)levels) - 5.0f;
    }
}

// The candidate path (a backend's step_topk, then sampler_sample_top) against sampler_sample on the
// whole vocabulary: the same tokens, draw after draw, for top-k with temperature, top-p and min-p, on
// logits with ties across the k-th place and -inf entries; the first draws also check the candidates
// against a selection by repeated maximum.
static void test_sample_top_matches(void **st) {
    (void)st;
    const int V = 5003;
    float *l0 = malloc(sizeof(float) * V), *l = malloc(sizeof(float) * V), vals[64];
    int ids[64];
    fill_levels(l0, V, 12345, 4000); // many ties
    for (int i = 0; i < V; i += 97) l0[i] = -INFINITY;
    const struct { float t, top_p, min_p; int k; } cases[] = {
        {0.6f, 0.95f, 0.0f, 20}, {1.0f, 1.0f, 0.0f, 2}, {0.3f, 0.5f, 0.05f, 64}, {1.5f, 0.9f, 0.2f, 40},
        {0.7f, 1.0f, 0.0f, 1}, {0.0f, 1.0f, 0.0f, 8},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct sampler_params sp;
        sampler_params_default(&sp);
        sp.has_seed = 1, sp.seed = 77 + c, sp.temperature = cases[c].t, sp.top_p = cases[c].top_p;
        sp.min_p = cases[c].min_p, sp.top_k = cases[c].k;
        struct sampler a, b;
        sampler_init(&a, &sp, V);
        sampler_init(&b, &sp, V);
        for (int d = 0; d < 300; d++) {
            for (int i = 0; i < V; i++) l0[i] = l0[i] == -INFINITY ? l0[i] : l0[i] + (float)((d * 31 + i) % 7) * 1e-3f;
            memcpy(l, l0, sizeof(float) * V);
            const int n = sampler_top_candidates(l0, V, cases[c].k, vals, ids);
            assert_int_equal(n, cases[c].k);
            for (int j = 0; j < n && d < 20; j++) { // the j-th largest, ties by lower id, by repeated maximum
                int best = -1;
                for (int i = 0; i < V; i++) {
                    int taken = 0;
                    for (int q = 0; q < j; q++) taken |= ids[q] == i;
                    if (!taken && (best < 0 || l0[i] > l0[best])) best = i;
                }
                assert_int_equal(ids[j], best);
                assert_true(vals[j] == l0[best]);
            }
            const int ta = sampler_sample(&a, l), tb = sampler_sample_top(&b, vals, ids, n);
            assert_int_equal(ta, tb);
            sampler_accept(&a, ta), sampler_accept(&b, tb);
        }
        assert_true(sampler_uniform(&a) == sampler_uniform(&b)); // the RNG drawn alike
        sampler_free(&a);
        sampler_free(&b);
    }
    free(l0);
    free(l);
}

// The top-p / min-p candidate path (the 64 largest and the softmax's mass from a backend's step_topk,
// then sampler_sample_mass; the full logits when it cannot decide) against sampler_sample on the whole
// vocabulary: the same tokens and RNG draws, draw after draw, on peaked logits (scaled up: the candidates
// decide) and flat ones (they cannot), with ties and -inf. Both outcomes must occur, and undecided
// calls must not draw the RNG.
static void test_sample_mass_matches(void **st) {
    (void)st;
    const int V = 5003;
    float *l0 = malloc(sizeof(float) * V), *l = malloc(sizeof(float) * V), vals[64];
    int ids[64];
    fill_levels(l0, V, 987, 3000);
    for (int i = 0; i < V; i += 101) l0[i] = -INFINITY;
    const struct { float t, top_p, min_p, scale, spike; } cases[] = {
        {0.6f, 0.95f, 0.0f, 1.0f, 12.0f}, {1.0f, 0.9f, 0.0f, 0.3f, 0.0f}, {0.8f, 1.0f, 0.05f, 1.0f, 9.0f},
        {1.2f, 1.0f, 0.3f, 0.5f, 0.0f},   {0.7f, 0.8f, 0.1f, 1.0f, 6.0f}, {1.0f, 0.5f, 0.0f, 1.5f, 4.0f},
        {1.0f, 1.0f, 0.02f, 0.3f, 6.0f}, // min-p alone, several kept
    };
    int decided = 0, undecided = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct sampler_params sp;
        sampler_params_default(&sp);
        sp.has_seed = 1, sp.seed = 5 + c, sp.temperature = cases[c].t, sp.top_p = cases[c].top_p;
        sp.min_p = cases[c].min_p;
        struct sampler a, b;
        sampler_init(&a, &sp, V);
        sampler_init(&b, &sp, V);
        for (int d = 0; d < 200; d++) {
            // Each draw's logits: the base scaled, a few ids raised by spike (peaked) or none (flat),
            // shifted a little per draw.
            const float sc = cases[c].scale * (1.0f + 0.5f * (float)(d % 5));
            for (int i = 0; i < V; i++)
                l[i] = l0[i] * sc + (i % 499 == 7 ? cases[c].spike : 0.0f) + (float)((d * 13 + i) % 5) * 1e-3f;
            const int n = sampler_top_candidates(l, V, 64, vals, ids);
            const double total = sampler_softmax_total(l, V, sp.temperature);
            int tb = sampler_sample_mass(&b, vals, ids, n, total);
            if (tb < 0) {
                undecided++;
                float *lb = malloc(sizeof(float) * V);
                memcpy(lb, l, sizeof(float) * V);
                tb = sampler_sample(&b, lb);
                free(lb);
            } else {
                decided++;
            }
            const int ta = sampler_sample(&a, l);
            assert_int_equal(ta, tb);
            sampler_accept(&a, ta), sampler_accept(&b, tb);
        }
        assert_true(sampler_uniform(&a) == sampler_uniform(&b)); // the RNG drawn alike
        sampler_free(&a);
        sampler_free(&b);
    }
    assert_true(decided > 100 && undecided > 100);
    // Known masses: three candidates of 0.5, 0.3, 0.15 of the whole (total 2 relative to the largest).
    // top_p .75 keeps two, .85 three, .97 reaches past them (undecided, no draw); min_p (relative to
    // the largest: the last candidate is at .3) decides only above .3: .2 cannot, .4 keeps two.
    {
        const float v[3] = {0.0f, logf(0.6f), logf(0.3f)};
        const int id[3] = {40, 7, 93};
        const struct { float top_p, min_p; int want; } k[] = {
            {0.75f, 0.0f, 2}, {0.85f, 0.0f, 3}, {0.97f, 0.0f, -1}, {1.0f, 0.2f, -1}, {1.0f, 0.4f, 2}};
        for (size_t c = 0; c < sizeof k / sizeof k[0]; c++) {
            struct sampler_params sp;
            sampler_params_default(&sp);
            sp.has_seed = 1, sp.temperature = 1.0f, sp.top_p = k[c].top_p, sp.min_p = k[c].min_p;
            struct sampler s;
            sampler_init(&s, &sp, 100);
            int seen[3] = {0, 0, 0}, und = 0;
            for (int d = 0; d < 2000; d++) {
                const int t = sampler_sample_mass(&s, v, id, 3, 2.0);
                if (t < 0) und++;
                for (int j = 0; j < 3; j++) seen[j] += t == id[j];
            }
            if (k[c].want < 0) {
                assert_int_equal(und, 2000);
            } else {
                assert_int_equal(und, 0);
                assert_true(seen[0] > 0 && seen[1] > 0);
                assert_true(k[c].want == 3 ? seen[2] > 0 : seen[2] == 0);
            }
            sampler_free(&s);
        }
    }
    // Every id a candidate: always decided.
    struct sampler_params sp;
    sampler_params_default(&sp);
    sp.temperature = 1.0f, sp.top_p = 0.5f;
    struct sampler s;
    sampler_init(&s, &sp, 3);
    const float v3[3] = {1.0f, 0.5f, 0.25f};
    const int i3[3] = {2, 0, 1};
    assert_true(sampler_sample_mass(&s, v3, i3, 3, sampler_softmax_total((float[]){0.5f, 0.25f, 1.0f}, 3, 1.0f)) >= 0);
    sampler_free(&s);
    free(l0);
    free(l);
}

// Top-p over a flat distribution, where the nucleus holds far more than the SAMPLER_MASS_K largest (the
// bucketed nucleus of sample_wide): 3,000 ids on 1,000 levels (three ids a level: ties at the edge), p
// .6. Every draw lies in the nucleus by a sort in double (to its last rank + 2: the float
// probabilities may move the edge by a tie), the draws split between its halves as their masses do,
// and with min_p .5 nothing below half the largest probability is drawn.
static int cmp_rank(const void *a, const void *b, void *arg) {
    const float *l = arg;
    const int i = *(const int *)a, j = *(const int *)b;
    return l[i] != l[j] ? (l[i] < l[j] ? 1 : -1) : i - j;
}
static void test_wide_nucleus(void **st) {
    (void)st;
    const int V = 3000, draws = 20000;
    float *l = malloc(sizeof(float) * V), *w = malloc(sizeof(float) * V);
    int *ord = malloc(sizeof(int) * V), *rank = malloc(sizeof(int) * V);
    for (int i = 0; i < V; i++) l[i] = -(float)(i % 1000) * 0.004f, ord[i] = i;
    qsort_r(ord, V, sizeof *ord, cmp_rank, l);
    double total = 0, acc = 0;
    for (int i = 0; i < V; i++) total += exp(l[i]), rank[ord[i]] = i;
    int edge = 0;
    while ((acc += exp(l[ord[edge]])) < 0.6 * total) edge++;
    double half = 0;
    for (int k = 0; k <= edge / 2; k++) half += exp(l[ord[k]]);
    const double q = half / acc; // the first half's share of the nucleus
    for (int mp = 0; mp < 2; mp++) {
        struct sampler_params sp;
        sampler_params_default(&sp);
        sp.has_seed = 1, sp.temperature = 1.0f, sp.top_p = 0.6f, sp.min_p = mp ? 0.5f : 0.0f;
        struct sampler s;
        sampler_init(&s, &sp, V);
        int first = 0, worst = 0;
        for (int d = 0; d < draws; d++) {
            memcpy(w, l, sizeof(float) * V);
            const int t = sampler_sample(&s, w);
            assert_true(t >= 0 && t < V);
            if (rank[t] > worst) worst = rank[t];
            first += rank[t] <= edge / 2;
            if (mp) assert_true(l[t] >= logf(0.5f) - 1e-6f);
        }
        assert_true(worst <= edge + 2 && worst > SAMPLER_MASS_K);
        if (!mp) assert_true(fabs((double)first / draws - q) < 5 * sqrt(q * (1 - q) / draws));
        sampler_free(&s);
    }
    free(l), free(w), free(ord), free(rank);
}

// sampler_edits: the list a backend applies where the logits are (bias, then penalties) gives, applied
// in order by sampler_edits_apply, the logits sampler_sample edits in place, bitwise; and
// sampler_sample_edited on them draws what sampler_sample draws (a repeated bias id, an id with both
// a bias and penalties, negative and positive logits under the repetition penalty).
static void test_edits_match(void **st) {
    (void)st;
    const int V = 700;
    const struct sampler_bias bias[] = {{5, 2.5f}, {9, -1.25f}, {5, 0.5f}, {33, 7.0f}};
    struct sampler_params sp;
    sampler_params_default(&sp);
    sp.has_seed = 1, sp.temperature = 0.9f, sp.top_k = 0, sp.top_p = 0.95f;
    sp.bias = bias, sp.n_bias = 4, sp.repetition_penalty = 1.3f, sp.presence_penalty = 0.7f, sp.frequency_penalty = 0.35f;
    struct sampler a, b;
    sampler_init(&a, &sp, V);
    sampler_init(&b, &sp, V);
    for (int i = 0; i < 40; i += 3) sampler_add_prompt(&a, i), sampler_add_prompt(&b, i);
    float *la = malloc(sizeof(float) * V), *lb = malloc(sizeof(float) * V);
    struct sampler_edit *ed = malloc(sizeof *ed * (size_t)(V + 4));
    for (int d = 0; d < 60; d++) {
        for (int i = 0; i < V; i++) la[i] = lb[i] = (float)sin(i * 0.71 + d) * 2.0f;
        int nb = -1;
        const int n = sampler_edits(&b, ed, &nb);
        assert_int_equal(nb, 4);
        // The bias sorted by id, id 5's two entries adjacent in the request's order (sampler_init):
        // what a backend's edit kernel relies on to give each id its edits in order.
        const int want_id[4] = {5, 5, 9, 33};
        const float want_add[4] = {2.5f, 0.5f, -1.25f, 7.0f};
        for (int i = 0; i < 4; i++) assert_int_equal(ed[i].id, want_id[i]), assert_true(ed[i].add == want_add[i]);
        sampler_edits_apply(lb, ed, n);
        float *lc = malloc(sizeof(float) * V);
        memcpy(lc, lb, sizeof(float) * V);
        const int ta = sampler_sample(&a, la), tb = sampler_sample_edited(&b, lc);
        assert_memory_equal(la, lb, sizeof(float) * V); // sampler_sample left its edited logits in la
        assert_int_equal(ta, tb);
        free(lc);
        const int acc = d % 4 == 0 ? 5 : ta; // id 5 accepted often: bias and penalties on one id
        sampler_accept(&a, acc), sampler_accept(&b, acc);
    }
    free(la), free(lb), free(ed);
    sampler_free(&a), sampler_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy),          cmocka_unit_test(test_distribution),
        cmocka_unit_test(test_top_k),           cmocka_unit_test(test_top_p),
        cmocka_unit_test(test_min_p),           cmocka_unit_test(test_penalties),
        cmocka_unit_test(test_seed_determinism), cmocka_unit_test(test_logprobs),
        cmocka_unit_test(test_large_vocabulary), cmocka_unit_test(test_top_k_then_top_p),
        cmocka_unit_test(test_exp),             cmocka_unit_test(test_sample_top_matches),
        cmocka_unit_test(test_sample_mass_matches), cmocka_unit_test(test_wide_nucleus),
        cmocka_unit_test(test_edits_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
