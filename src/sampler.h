// sampler.h: logits -> next token. Greedy, temperature, top-k, top-p, min-p, logit bias, the
// OpenAI presence/frequency penalties and the HF repetition penalty, driven by a seeded RNG so that
// the same seed and the same logits give the same tokens on every run and machine.
//
// Order of operations (one step):
//   1. logit bias, then penalties on the raw logits:
//        repetition (HF): l > 0 ? l / r : l * r       for every token seen in prompt or output
//        presence/frequency (OpenAI): l -= presence * (count > 0) + frequency * count
//                                                     for tokens of the output only
//   2. temperature 0 (or top_k 1) -> argmax. Otherwise softmax(l / T), then
//   3. top-k (the k most likely), top-p (the smallest set whose mass reaches p), min-p (drop tokens
//      whose probability is below min_p * the largest), renormalise, draw one.
// Tested in tests/test_sampler.c.
#ifndef LILY_SAMPLER_H
#define LILY_SAMPLER_H

#include <stdint.h>

struct sampler_bias {
    int id;
    float bias;
};

struct sampler_params {
    float temperature;        // 0 = greedy
    float top_p;              // (0, 1]; 1 = off
    int top_k;                // <= 0 = off
    float min_p;              // [0, 1]; 0 = off
    float presence_penalty;   // [-2, 2]
    float frequency_penalty;  // [-2, 2]
    float repetition_penalty; // > 0; 1 = off
    uint64_t seed;            // RNG seed (used when has_seed)
    int has_seed;             // 0: seeded from the clock, so every request differs
    const struct sampler_bias *bias; // logit bias entries (ids checked < n_vocab by the caller)
    int n_bias;
};

// Defaults: temperature 1, top_p 1, everything else off.
void sampler_params_default(struct sampler_params *p);

struct sampler {
    struct sampler_params p;
    int n_vocab;
    uint64_t rng[4];          // xoshiro256** state
    int *count;               // [n_vocab] occurrences in the output (presence/frequency)
    unsigned char *seen;      // [n_vocab] 1 if in prompt or output (repetition penalty)
    int *touched;             // ids with count or seen set, so a reset is O(touched)
    int n_touched;
    float *prob;              // [n_vocab] scratch
    int *idx;                 // [n_vocab] scratch: the candidates' ids
    float *pc;                // [n_vocab] scratch: the candidates' unnormalised probabilities
    double *bsum;             // [n_vocab / 1024 + 1] scratch: the softmax's block sums
    struct sampler_bias *bias; // owned copy of p.bias
};

// Prepare a sampler for a vocabulary of n_vocab ids. The bias array is copied, sorted by id with an
// id's repeated entries in the request's order: each logit gets the same edits in the same order
// (different ids' edits commute), and a repeated id's entries are adjacent for a backend's edit
// kernel (sampler_edits), found once per request instead of once per token.
void sampler_init(struct sampler *s, const struct sampler_params *p, int n_vocab);
void sampler_free(struct sampler *s);

// Record a prompt token (repetition penalty only) or an output token (all penalties).
void sampler_add_prompt(struct sampler *s, int id);
void sampler_accept(struct sampler *s, int id);

// Choose the next token from logits[0..n_vocab). The logits are modified (penalties, scaling).
int sampler_sample(struct sampler *s, float *logits);

// The same choice from the k largest logits alone (k = top_k, or fewer when the vocabulary has
// fewer), as sampler_top_candidates or a backend's step_topk gives them: vals[0..n) descending, ties
// by lower id, and their ids, taken from logits that carry the request's edits (sampler_edits: bias,
// penalties) if it has any. For requests with 1 < top_k < n_vocab, where sampler_sample reads nothing
// else: it then returns the same token and draws the RNG alike.
int sampler_sample_top(struct sampler *s, const float *vals, const int *ids, int n);

// The same choice for a request filtered by top_p and/or min_p without a top-k (top_k <= 0 or >=
// n_vocab), from the n largest (edited) logits (as sampler_sample_top) and total, the
// softmax's mass at the request's temperature relative to the largest logit (sum over the vocabulary
// of exp((l - max) / T); sampler_softmax_total, or a backend's step_topk). Returns the token, drawing
// the RNG as sampler_sample would; or -1, drawing nothing, when the candidates cannot decide (top-p's
// prefix and the min-p set may reach past them): the caller then samples the full logits. With the
// same total as sampler_sample's, the same token.
int sampler_sample_mass(struct sampler *s, const float *vals, const int *ids, int n, double total);
// The candidates sampler_sample itself takes for top-p / min-p before the whole vocabulary: a backend's
// candidates for sampler_sample_mass must be at most these.
#define SAMPLER_MASS_K 64

// sum over logits[0..n) of exp((l - max) / temperature), summed as sampler_sample sums it (0 when every
// logit is -inf or NaN; -1 when out of memory).
double sampler_softmax_total(const float *logits, int n, float temperature);

// The k largest of logits[0..n_vocab) (k <= n_vocab), descending, ties by lower id: their values and
// ids; returns how many (k). NaN never passes a full list's smallest.
int sampler_top_candidates(const float *logits, int n_vocab, int k, float *vals, int *ids);

// One of the edits sampler_sample makes to a logit before it selects, for a backend to apply where the
// logits are (lily_backend.step_topk): flags & SAMPLER_EDIT_REP: l = l > 0 ? l / rep : l * rep (the
// repetition penalty); then flags & SAMPLER_EDIT_ADD: l = l + add (a bias; a presence / frequency
// penalty as its negation, the same float result as sampler_sample's subtraction).
#define SAMPLER_EDIT_REP 1
#define SAMPLER_EDIT_ADD 2
struct sampler_edit {
    int id, flags;
    float rep, add;
};
// sampler_sample's edits for the next token, in its order: the bias entries first (*n_bias_out of
// them, sorted by id; a repeated id's entries adjacent, in the request's order), then one entry per
// penalised id (distinct ids). out needs room for n_bias +
// n_vocab entries. Returns the count (0: the logits are used as they are).
int sampler_edits(const struct sampler *s, struct sampler_edit *out, int *n_bias_out);
// The edits applied in order (sampler_sample's arithmetic).
void sampler_edits_apply(float *logits, const struct sampler_edit *e, int n);
// sampler_sample on logits that carry its edits already (a backend applied them).
int sampler_sample_edited(struct sampler *s, float *logits);

// Log-probabilities of the model distribution (log_softmax of the unmodified logits): the chosen
// token's, and the n_top most likely ids with theirs (in descending order). Call before
// sampler_sample, which changes the logits. Returns the chosen token's log-probability.
float sampler_logprobs(const float *logits, int n_vocab, int token, int n_top, int *top_ids,
                       float *top_lp);

// The RNG on its own (tests): a uniform double in [0, 1).
double sampler_uniform(struct sampler *s);

// The greedy choice: the lowest id of the largest of x[0..n) (0 if all are NaN).
int sampler_argmax(const float *x, int n);

// The sampler's exp(x) for x <= 0 (vectorised in its softmax; relative error < 3e-7; 0 from -87 down and
// for NaN). For tests.
float sampler_exp_neg(float x);

#endif
