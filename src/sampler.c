// sampler.c: the token sampler (sampler.h). Plain C over the full vocabulary; one call per generated
// token, so it is kept linear in the vocabulary except for sorting the few survivors of a cutoff.
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

// ---------------------------------------------------------------------------------------------
// RNG: xoshiro256** seeded through splitmix64 (the published algorithms; small and reproducible).

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(uint64_t *s) {
    uint64_t r = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

double sampler_uniform(struct sampler *s) { return (double)(rng_next(s->rng) >> 11) * 0x1.0p-53; }

// ---------------------------------------------------------------------------------------------

void sampler_params_default(struct sampler_params *p) {
    memset(p, 0, sizeof *p);
    p->temperature = 1.0f;
    p->top_p = 1.0f;
    p->repetition_penalty = 1.0f;
}

void sampler_init(struct sampler *s, const struct sampler_params *p, int n_vocab) {
    memset(s, 0, sizeof *s);
    s->p = *p;
    s->n_vocab = n_vocab;
    s->count = xcalloc((size_t)n_vocab, sizeof *s->count);
    s->seen = xcalloc((size_t)n_vocab, 1);
    s->touched = xmalloc((size_t)n_vocab * sizeof *s->touched);
    s->prob = xmalloc((size_t)n_vocab * sizeof *s->prob);
    s->idx = xmalloc((size_t)n_vocab * sizeof *s->idx);
    if (p->n_bias > 0) {
        s->bias = xmalloc((size_t)p->n_bias * sizeof *s->bias);
        memcpy(s->bias, p->bias, (size_t)p->n_bias * sizeof *s->bias);
    }
    s->p.bias = s->bias;
    uint64_t seed = p->has_seed ? p->seed : 0;
    if (!p->has_seed) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)s;
    }
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&seed);
}

void sampler_free(struct sampler *s) {
    free(s->count);
    free(s->seen);
    free(s->touched);
    free(s->prob);
    free(s->idx);
    free(s->bias);
    memset(s, 0, sizeof *s);
}

static void touch(struct sampler *s, int id) {
    if (!s->seen[id] && !s->count[id]) s->touched[s->n_touched++] = id;
}

void sampler_add_prompt(struct sampler *s, int id) {
    if (id < 0 || id >= s->n_vocab) return;
    touch(s, id);
    s->seen[id] = 1;
}

void sampler_accept(struct sampler *s, int id) {
    if (id < 0 || id >= s->n_vocab) return;
    touch(s, id);
    s->seen[id] = 1;
    s->count[id]++;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

// Sorting survivors by probability, descending; ties by id so the order is deterministic.
static int cmp_desc(const void *a, const void *b, void *arg) {
    const float *pr = arg;
    int i = *(const int *)a, j = *(const int *)b;
    if (pr[i] != pr[j]) return pr[i] < pr[j] ? 1 : -1;
    return i - j;
}

int sampler_sample(struct sampler *s, float *l) {
    const struct sampler_params *p = &s->p;
    int V = s->n_vocab;
    for (int i = 0; i < p->n_bias; i++) l[p->bias[i].id] += p->bias[i].bias;
    for (int t = 0; t < s->n_touched; t++) {
        int id = s->touched[t];
        if (p->repetition_penalty != 1.0f && s->seen[id])
            l[id] = l[id] > 0 ? l[id] / p->repetition_penalty : l[id] * p->repetition_penalty;
        if (s->count[id])
            l[id] -= p->presence_penalty + p->frequency_penalty * (float)s->count[id];
    }
    if (p->temperature <= 0.0f || p->top_k == 1) return argmax(l, V);

    // Softmax at temperature T.
    float mx = l[argmax(l, V)];
    float inv_t = 1.0f / p->temperature;
    double sum = 0;
    float *pr = s->prob;
    for (int i = 0; i < V; i++) {
        pr[i] = expf((l[i] - mx) * inv_t);
        sum += pr[i];
    }
    float inv = (float)(1.0 / sum);
    for (int i = 0; i < V; i++) pr[i] *= inv;

    // Candidates. Without top-k, a cutoff that cannot remove anything top-p or min-p would keep
    // shrinks the set before sorting: with n candidates and top_p, any token below (1-p)/(n-1)
    // can be dropped without changing the result (the kept set's mass is reached before it).
    int n = 0;
    float cut = 0.0f;
    if (p->top_k <= 0 && p->top_p < 1.0f) cut = (1.0f - p->top_p) / (float)(V > 1 ? V - 1 : 1);
    if (p->min_p > 0.0f) {
        float pmax = 0;
        for (int i = 0; i < V; i++)
            if (pr[i] > pmax) pmax = pr[i];
        if (p->min_p * pmax > cut) cut = p->min_p * pmax;
    }
    for (int i = 0; i < V; i++)
        if (pr[i] >= cut) s->idx[n++] = i;
    if (n == 0) return argmax(pr, V);
    int need_sort = p->top_k > 0 || p->top_p < 1.0f;
    if (need_sort) {
        qsort_r(s->idx, (size_t)n, sizeof *s->idx, cmp_desc, pr);
    }
    if (p->top_k > 0 && n > p->top_k) n = p->top_k;
    if (p->top_p < 1.0f) {
        double mass = 0;
        int k = 0;
        while (k < n) {
            mass += pr[s->idx[k++]];
            if (mass >= p->top_p) break;
        }
        n = k;
    }
    if (p->min_p > 0.0f && n > 0) {
        float pmax = pr[s->idx[0]];
        if (!need_sort)
            for (int k = 0; k < n; k++)
                if (pr[s->idx[k]] > pmax) pmax = pr[s->idx[k]];
        int k = 0;
        for (int j = 0; j < n; j++)
            if (pr[s->idx[j]] >= p->min_p * pmax) s->idx[k++] = s->idx[j];
        n = k;
    }
    double tot = 0;
    for (int k = 0; k < n; k++) tot += pr[s->idx[k]];
    double r = sampler_uniform(s) * tot, acc = 0;
    for (int k = 0; k < n; k++) {
        acc += pr[s->idx[k]];
        if (r < acc) return s->idx[k];
    }
    return s->idx[n - 1];
}

float sampler_logprobs(const float *l, int V, int token, int n_top, int *top_ids, float *top_lp) {
    float mx = l[argmax(l, V)];
    double sum = 0;
    for (int i = 0; i < V; i++) sum += exp((double)(l[i] - mx));
    float lse = mx + (float)log(sum);
    // Top n by insertion into a small sorted list (n <= 20).
    int k = 0;
    for (int i = 0; i < V && n_top > 0; i++) {
        if (k == n_top && l[i] <= l[top_ids[k - 1]]) continue;
        int j = k < n_top ? k++ : k - 1;
        while (j > 0 && l[top_ids[j - 1]] < l[i]) {
            top_ids[j] = top_ids[j - 1];
            j--;
        }
        top_ids[j] = i;
    }
    for (int j = 0; j < k; j++) top_lp[j] = l[top_ids[j]] - lse;
    return l[token] - lse;
}
