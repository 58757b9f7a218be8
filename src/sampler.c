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

// A bias entry and its place in the request, for the stable sort below.
struct bias_at {
    struct sampler_bias b;
    int at;
};
static int bias_at_cmp(const void *x, const void *y) {
    const struct bias_at *a = x, *b = y;
    return a->b.id != b->b.id ? (a->b.id < b->b.id ? -1 : 1) : a->at - b->at;
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
    s->pc = xmalloc((size_t)n_vocab * sizeof *s->pc);
    s->bsum = xmalloc(((size_t)n_vocab / 1024 + 1) * sizeof *s->bsum);
    if (p->n_bias > 0) { // sorted by id, an id's entries in the request's order (sampler.h)
        struct bias_at *t = xmalloc((size_t)p->n_bias * sizeof *t);
        for (int i = 0; i < p->n_bias; i++) t[i] = (struct bias_at){p->bias[i], i};
        qsort(t, (size_t)p->n_bias, sizeof *t, bias_at_cmp);
        s->bias = xmalloc((size_t)p->n_bias * sizeof *s->bias);
        for (int i = 0; i < p->n_bias; i++) s->bias[i] = t[i].b;
        free(t);
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
    free(s->pc);
    free(s->bsum);
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

static float max_of(const float *x, int n);

// The first id of the largest value (0 when every value is NaN): the maximum in vector lanes, then a
// scan for it.
int sampler_argmax(const float *x, int n) {
    const float m = max_of(x, n);
    for (int i = 0; i < n; i++)
        if (x[i] == m) return i;
    return 0;
}

// exp(x) for x <= 0, in a form the compiler vectorises (no libm call: libm's expf, one call per id,
// made the 248,320-id softmax ~1.4 ms a token on the development VM, half a decode step of the 35B
// model on an H200). Cody-Waite reduction x = k ln2 + r, |r| <= ln2 / 2, and the degree-6 Taylor
// polynomial of e^r (relative error < 3e-7); 0 from -87 down (e^-87 is near the smallest normal float).
static inline float exp_neg(float x) {
    const float xc = x > -87.0f ? x : -87.0f; // NaN too
    const float k = (xc * 1.44269504f + 12582912.0f) - 12582912.0f; // round(x / ln2): the 1.5 * 2^23 trick
    const float r = (xc - k * 0.693145751953125f) - k * 1.428606765330187e-6f;
    const float e =
        1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    union {
        int32_t i;
        float f;
    } sc = {.i = ((int32_t)k + 127) << 23};
    return e * sc.f * (float)(x > -87.0f); // a mask, not a branch: GCC keeps trapping FP ops out of selects
}

float sampler_exp_neg(float x) { return exp_neg(x); }

// pr[i] = exp((l[i] - mx) / T) over [0, n) in blocks of SM_BLOCK, each block's sum into bsum[]; returns the
// total. Each block sums in 8 lanes (a fixed order), then in double. Written for GCC's vectoriser:
// not inlined (inlined into sampler_sample, GCC 12 left the loops scalar), the exponentials and the sums
// in separate loops.
#define SM_BLOCK 1024
__attribute__((noinline)) static double softmax_blocks(const float *restrict l, int n, float mx, float inv_t,
                                                       float *restrict pr, double *restrict bsum) {
    double total = 0;
    for (int b0 = 0, b = 0; b0 < n; b0 += SM_BLOCK, b++) {
        const int e = b0 + SM_BLOCK < n ? b0 + SM_BLOCK : n;
        for (int i = b0; i < e; i++) pr[i] = exp_neg((l[i] - mx) * inv_t);
        float acc[8] = {0};
        int i = b0;
        for (; i + 8 <= e; i += 8)
            for (int j = 0; j < 8; j++) acc[j] += pr[i + j];
        for (; i < e; i++) acc[0] += pr[i];
        double t = 0;
        for (int j = 0; j < 8; j++) t += acc[j];
        bsum[b] = t;
        total += t;
    }
    return total;
}

__attribute__((noinline)) static float max_of(const float *x, int n) {
    float m8[8];
    for (int j = 0; j < 8; j++) m8[j] = -INFINITY;
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) m8[j] = x[i + j] > m8[j] ? x[i + j] : m8[j];
    float m = -INFINITY;
    for (int j = 0; j < 8; j++) m = m8[j] > m ? m8[j] : m;
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

// Sorting candidates by logit, descending; ties by id so the order is deterministic.
static int cmp_desc(const void *a, const void *b, void *arg) {
    const float *l = arg;
    int i = *(const int *)a, j = *(const int *)b;
    if (l[i] != l[j]) return l[i] < l[j] ? 1 : -1;
    return i - j;
}

// The k largest logits' ids (k <= n), descending, ties by id: one pass with a sorted list of k. For the
// small k samplers use (Qwen's recommended 20), this replaces the softmax over the whole vocabulary;
// sampler_logprobs takes its top alternatives with it too.
static int largest_ids(const float *l, int n, int k, int *ids) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m == k && !(l[i] > l[ids[m - 1]])) continue; // ties keep the lower id
        int j = m < k ? m++ : m - 1;
        while (j > 0 && l[ids[j - 1]] < l[i]) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = i;
    }
    return m;
}

// top-k up to this by largest_ids (expected ~k ln(V/k) insertions of O(k) each); larger by the softmax and a
// sort of the candidates.
#define TOPK_LIST 1024

// The filters once the candidates are known: candidate k is token s->idx[k], with unnormalised
// probability s->pc[k], in descending order (ties by id); kept is their mass (n >= 1). Top-p over the
// candidates' distribution, then min-p (both compact the two arrays in place); then a draw from what
// is left, renormalised.
static int sample_draw(struct sampler *s, int n, double kept) {
    const struct sampler_params *p = &s->p;
    float *pc = s->pc;
    int *idx = s->idx;
    if (p->top_p < 1.0f) {
        // The sorted prefix whose mass reaches top_p of the (top-k) candidates' mass.
        double mass = 0, goal = p->top_p * kept;
        int k = 0;
        while (k < n) {
            mass += pc[k++];
            if (mass >= goal) break;
        }
        n = k;
    }
    if (p->min_p > 0.0f && n > 0) {
        float pmax = 0;
        for (int k = 0; k < n; k++) pmax = pc[k] > pmax ? pc[k] : pmax;
        int k = 0;
        for (int j = 0; j < n; j++)
            if (pc[j] >= p->min_p * pmax) pc[k] = pc[j], idx[k++] = idx[j];
        n = k;
    }
    double tot = 0;
    for (int k = 0; k < n; k++) tot += pc[k];
    double r = sampler_uniform(s) * tot, acc = 0;
    for (int k = 0; k < n; k++) {
        acc += pc[k];
        if (r < acc) return idx[k];
    }
    return idx[n - 1];
}

// Candidate k is token s->idx[k] with logit s->pc[k], descending (ties by id); pc becomes their
// unnormalised probabilities (relative to the largest), in place; returns their mass. The top-k and the
// top-p / min-p paths and their backend-candidate forms all come here: the same arithmetic.
static double cand_probs(struct sampler *s, int n) {
    const float inv_t = 1.0f / s->p.temperature, mx = s->pc[0];
    double kept = 0;
    for (int k = 0; k < n; k++) kept += s->pc[k] = exp_neg((s->pc[k] - mx) * inv_t);
    return kept;
}

static int mass_draw(struct sampler *s, int n, double total);

// Top-p (then min-p) over the whole vocabulary when the nucleus reaches past the SAMPLER_MASS_K largest
// (a flat distribution: at 248K ids it can hold most of them, and sorting it took ~40 ms a token). The
// probabilities s->prob (of sampler_sample) go into buckets by their float bits (monotone in the
// logit), each bucket's mass summed; the bucket where the mass from the top reaches top_p of the
// total is sorted as the full sort would (logit descending, ties by id) and summed on to the goal.
// The nucleus is every id above that point; min-p then keeps those at least min_p times the largest;
// the draw runs over them in id order (the same distribution as in sorted order).
#define WIDE_BUCKETS 1024 // float bits >> 20 of a probability in (0, 1]: 1.0 is bucket 1016
static int wide_bucket(float p) {
    uint32_t u;
    memcpy(&u, &p, 4);
    return (int)(u >> 20);
}
static int sample_wide(struct sampler *s, const float *l, double total) {
    const struct sampler_params *p = &s->p;
    const float *pr = s->prob;
    const int V = s->n_vocab;
    int *idx = s->idx;
    double bm[WIDE_BUCKETS] = {0};
    for (int i = 0; i < V; i++) bm[wide_bucket(pr[i])] += pr[i];
    // The threshold: bucket tb, and in it the members sorted down to (tl, ti) inclusive; with no
    // top-p (or a goal rounding never reaches) every id with a probability is in.
    int tb = 0;
    float tl = -INFINITY;
    int ti = V;
    if (p->top_p < 1.0f) {
        const double goal = p->top_p * total;
        double acc = 0;
        int b = WIDE_BUCKETS - 1;
        while (b > 0 && acc + bm[b] < goal) acc += bm[b--];
        if (b > 0) {
            int m = 0;
            for (int i = 0; i < V; i++)
                if (wide_bucket(pr[i]) == b) idx[m++] = i;
            qsort_r(idx, (size_t)m, sizeof *idx, cmp_desc, (void *)l);
            int j = 0;
            while (j < m && (acc += pr[idx[j]]) < goal) j++;
            if (j == m) j = m - 1; // rounding: the whole bucket
            tb = b, tl = l[idx[j]], ti = idx[j];
        }
    }
    const float pmin = p->min_p > 0.0f ? p->min_p : 0.0f; // times the largest probability, 1
    double tot = 0;
    int n = 0;
    for (int i = 0; i < V; i++) {
        const int b = wide_bucket(pr[i]);
        const int in = pr[i] > 0 && pr[i] >= pmin && (b > tb || (b == tb && (l[i] > tl || (l[i] == tl && i <= ti))));
        if (in) tot += pr[i], idx[n++] = i;
    }
    if (n == 0) return sampler_argmax(l, V);
    double r = sampler_uniform(s) * tot, acc = 0;
    for (int k = 0; k < n; k++)
        if (r < (acc += pr[idx[k]])) return idx[k];
    return idx[n - 1];
}

// The logit edits (bias, penalties), one definition for sampler_sample and for the list a backend
// applies (sampler_edits): the penalties' subtraction is the addition of its negation, the same float.
static void edit_apply(float *l, const struct sampler_edit *e) {
    float v = l[e->id];
    if (e->flags & SAMPLER_EDIT_REP) v = v > 0 ? v / e->rep : v * e->rep;
    if (e->flags & SAMPLER_EDIT_ADD) v = v + e->add;
    l[e->id] = v;
}
// Touched id's penalty edit (flags 0: none).
static struct sampler_edit penalty_edit(const struct sampler *s, int id) {
    const struct sampler_params *p = &s->p;
    struct sampler_edit e = {.id = id, .rep = p->repetition_penalty};
    if (p->repetition_penalty != 1.0f && s->seen[id]) e.flags |= SAMPLER_EDIT_REP;
    if (s->count[id])
        e.flags |= SAMPLER_EDIT_ADD, e.add = -(p->presence_penalty + p->frequency_penalty * (float)s->count[id]);
    return e;
}
static struct sampler_edit bias_edit(const struct sampler_bias *b) {
    return (struct sampler_edit){.id = b->id, .flags = SAMPLER_EDIT_ADD, .add = b->bias};
}

int sampler_edits(const struct sampler *s, struct sampler_edit *out, int *n_bias_out) {
    int n = 0;
    for (int i = 0; i < s->p.n_bias; i++) out[n++] = bias_edit(&s->p.bias[i]);
    *n_bias_out = n;
    for (int t = 0; t < s->n_touched; t++) {
        const struct sampler_edit e = penalty_edit(s, s->touched[t]);
        if (e.flags) out[n++] = e;
    }
    return n;
}

void sampler_edits_apply(float *l, const struct sampler_edit *e, int n) {
    for (int i = 0; i < n; i++) edit_apply(l, &e[i]);
}

int sampler_sample(struct sampler *s, float *l) {
    for (int i = 0; i < s->p.n_bias; i++) {
        const struct sampler_edit e = bias_edit(&s->p.bias[i]);
        edit_apply(l, &e);
    }
    for (int t = 0; t < s->n_touched; t++) {
        const struct sampler_edit e = penalty_edit(s, s->touched[t]);
        if (e.flags) edit_apply(l, &e);
    }
    return sampler_sample_edited(s, l);
}

// Sampling at temperature T. The filters apply in the order HF transformers and vLLM apply them:
// top-k, then top-p over the top-k distribution renormalised, then min-p (relative to the most likely
// token, so normalisation does not matter); then a draw from what is left, renormalised.
int sampler_sample_edited(struct sampler *s, float *l) {
    const struct sampler_params *p = &s->p;
    int V = s->n_vocab;
    if (p->temperature <= 0.0f || p->top_k == 1) return sampler_argmax(l, V);
    const float inv_t = 1.0f / p->temperature;
    float *pr = s->prob;
    int *idx = s->idx, n;
    double kept; // the candidates' mass, unnormalised

    if (p->top_k > 0 && p->top_k <= TOPK_LIST && p->top_k < V) {
        // Top-k first: only k exponentials.
        n = largest_ids(l, V, p->top_k, idx);
        for (int k = 0; k < n; k++) s->pc[k] = l[idx[k]];
        return sample_draw(s, n, cand_probs(s, n));
    } else {
        const float mx = max_of(l, V);
        if (!(mx > -INFINITY)) return sampler_argmax(l, V); // every logit -inf or NaN
        double *bsum = s->bsum;
        const double total = softmax_blocks(l, V, mx, inv_t, pr, bsum);
        if (p->top_k <= 0 && p->top_p >= 1.0f && p->min_p <= 0.0f) {
            // No filter: draw from the whole distribution, finding the block by its sum first.
            double r = sampler_uniform(s) * total;
            int b = 0;
            const int nb = (V + SM_BLOCK - 1) / SM_BLOCK;
            while (b < nb - 1 && r >= bsum[b]) r -= bsum[b++];
            const int e = (b + 1) * SM_BLOCK < V ? (b + 1) * SM_BLOCK : V;
            double acc = 0;
            for (int i = b * SM_BLOCK; i < e; i++)
                if (r < (acc += pr[i])) return i;
            for (int i = e - 1; i >= b * SM_BLOCK; i--) // rounding left r at the block's end
                if (pr[i] > 0) return i;
            return sampler_argmax(l, V);
        }
        if (p->top_k <= 0 || p->top_k >= V) {
            // Top-p and/or min-p alone. The SAMPLER_MASS_K largest decide whenever top-p's prefix or
            // the min-p set ends among them (sampler_sample_mass's arithmetic: a backend's candidates
            // give the same token); otherwise the nucleus reaches past them.
            n = largest_ids(l, V, SAMPLER_MASS_K < V ? SAMPLER_MASS_K : V, idx);
            for (int k = 0; k < n; k++) s->pc[k] = pr[idx[k]];
            const int t = n > 0 ? mass_draw(s, n, total) : sampler_argmax(l, V);
            return t >= 0 ? t : sample_wide(s, l, total);
        }
        // A top-k past TOPK_LIST: min-p's cut first, then a sort of what is left.
        n = 0;
        for (int i = 0; i < V; i++)
            if (pr[i] >= p->min_p && pr[i] > 0) idx[n++] = i;
        if (n == 0) return sampler_argmax(l, V);
        qsort_r(idx, (size_t)n, sizeof *idx, cmp_desc, l);
        if (n > p->top_k) n = p->top_k;
        kept = 0;
        for (int k = 0; k < n; k++) kept += s->pc[k] = pr[idx[k]];
    }
    return sample_draw(s, n, kept);
}

// A backend's candidates into the sampler's arrays as probabilities (cand_probs); returns their
// count, or -1 with *tok set where no draw is needed (no candidate: sampler_argmax's answer 0; greedy).
static int cand_load(struct sampler *s, const float *vals, const int *ids, int n, int *tok) {
    const struct sampler_params *p = &s->p;
    if (n <= 0 || p->temperature <= 0.0f || p->top_k == 1) {
        *tok = n <= 0 ? 0 : ids[0];
        return -1;
    }
    if (p->top_k > 0 && n > p->top_k) n = p->top_k;
    memcpy(s->idx, ids, (size_t)n * sizeof *ids);
    memcpy(s->pc, vals, (size_t)n * sizeof *vals);
    return n;
}

int sampler_sample_top(struct sampler *s, const float *vals, const int *ids, int n) {
    int tok;
    if ((n = cand_load(s, vals, ids, n, &tok)) < 0) return tok;
    return sample_draw(s, n, cand_probs(s, n));
}

int sampler_sample_mass(struct sampler *s, const float *vals, const int *ids, int n, double total) {
    int tok;
    if ((n = cand_load(s, vals, ids, n, &tok)) < 0) return tok;
    cand_probs(s, n);
    return mass_draw(s, n, total);
}

// sampler_sample_mass's draw once s->idx / s->pc hold the n largest (descending, ties by id) and
// their unnormalised probabilities: -1 when they cannot decide.
static int mass_draw(struct sampler *s, int n, double total) {
    const struct sampler_params *p = &s->p;
    float *pc = s->pc;
    // Decided when every id is a candidate, when top-p's prefix ends among the candidates (the sum in
    // sample_draw's order), or when the last candidate is below min-p (everything past it is too).
    int decided = n >= s->n_vocab;
    if (!decided && p->top_p < 1.0f) {
        double mass = 0, goal = p->top_p * total;
        for (int k = 0; k < n && !decided; k++) decided = (mass += pc[k]) >= goal;
    }
    if (!decided && p->min_p > 0.0f && pc[n - 1] < p->min_p) decided = 1;
    return decided ? sample_draw(s, n, total) : -1;
}

double sampler_softmax_total(const float *l, int n, float temperature) {
    const float mx = max_of(l, n);
    if (!(mx > -INFINITY) || !(temperature > 0.0f)) return 0;
    float *pr = malloc((size_t)n * sizeof *pr);
    double *bsum = malloc((size_t)((n + SM_BLOCK - 1) / SM_BLOCK) * sizeof *bsum);
    double total = pr && bsum ? softmax_blocks(l, n, mx, 1.0f / temperature, pr, bsum) : -1;
    free(pr);
    free(bsum);
    return total;
}

int sampler_top_candidates(const float *l, int n_vocab, int k, float *vals, int *ids) {
    const int n = largest_ids(l, n_vocab, k < n_vocab ? k : n_vocab, ids);
    for (int j = 0; j < n; j++) vals[j] = l[ids[j]];
    return n;
}

float sampler_logprobs(const float *l, int V, int token, int n_top, int *top_ids, float *top_lp) {
    const float mx = max_of(l, V);
    double sum = 0;
    for (int i = 0; i < V; i++) sum += exp((double)(l[i] - mx));
    float lse = mx + (float)log(sum);
    const int k = n_top > 0 ? largest_ids(l, V, n_top < V ? n_top : V, top_ids) : 0; // n_top <= 20
    for (int j = 0; j < k; j++) top_lp[j] = l[top_ids[j]] - lse;
    return l[token] - lse;
}
