// backend.h: the one small interface every compute backend implements (CPU reference in src/cpu/,
// CUDA in src/cuda/). The engine, CLI and tests only talk to a model through this struct.
//
// A backend context is made once per model (weights uploaded/repacked there). A state is one
// sequence: its position, KV cache, conv and recurrent state. States are cheap to reset; snapshots
// (state_save/load to host memory; snap_* kept by the backend) let the engine resume a conversation prefix.
#ifndef LILY_BACKEND_H
#define LILY_BACKEND_H

#include <stddef.h>

#include "model.h"
#include "sampler.h" // struct sampler_edit

// What ceilings() measured (all fields zero/empty when unknown).
struct lily_ceilings {
    double copy_gbps;      // device-to-device copy, (bytes read + bytes written) / s / 1e9
    double gemm_tflops;    // dense bf16 GEMM (fp32 matmul on the CPU), FLOP / s / 1e12
    char device[128];      // device name as the driver reports it
    char clocks[128];      // SM and memory clocks, free text ("sm 1980 MHz, mem 2619 MHz")
    size_t mem_total;      // device memory, bytes
};

struct lily_backend {
    const char *name; // "cpu", "cuda"
    // Tokens the engine hands forward() at once while prefilling a prompt: big enough for the
    // backend's prefill to run at speed, small enough that a cancelled request stops within about
    // half a second on the hardware it is for (the engine checks for cancellation between calls).
    // 0: the engine's default (256).
    int prefill_piece;

    // Prepare the backend for model `m` (which must outlive the context): upload or repack weights.
    // Returns 0 or a negative LILY_E* code with lily_err_msg() set.
    int (*init)(const struct lily_model *m, void **ctx);
    void (*free)(void *ctx);

    // A sequence state able to hold `max_ctx` positions. Starts empty (pos 0).
    int (*state_new)(void *ctx, int max_ctx, void **state);
    void (*state_free)(void *ctx, void *state);
    void (*state_reset)(void *ctx, void *state);
    int (*state_pos)(void *ctx, void *state); // tokens processed so far

    // Run tokens[0..n) at positions pos..pos+n-1 and advance the state by n. The backend chooses
    // how to chunk internally; memory stays bounded for any n. If `logits` is not NULL it receives
    // float32 logits: for all n tokens ([n, V]) when all_logits != 0, else for the last token only
    // ([V]). Fails with LILY_ERANGE if pos+n > max_ctx, leaving the state unchanged.
    int (*forward)(void *ctx, void *state, const int *tokens, int n, float *logits, int all_logits);

    // Snapshots. state_save_size() is the bytes a snapshot of the state at its current position
    // needs; state_save() writes it to host memory `dst`; state_load() restores a state from such a
    // snapshot (taken by the same backend and model). Optional: may be NULL.
    size_t (*state_save_size)(void *ctx, void *state);
    int (*state_save)(void *ctx, void *state, void *dst);
    int (*state_load)(void *ctx, void *state, const void *src, size_t n);

    // Measurement hooks for `lily bench` (src/bench.c). Optional: NULL on backends that lack them;
    // bench then measures host ceilings itself and reports the process's peak RSS.
    //
    // ceilings(): measure the device's limits now, on this device: a large device-to-device copy
    // (GB/s counting bytes read plus bytes written) and a large dense bf16 GEMM (TFLOP/s), and
    // describe the device. Returns 0 or a negative LILY_E* code with lily_err_msg() set.
    int (*ceilings)(void *ctx, struct lily_ceilings *out);
    // peak_mem(): the most device memory this context has held at once so far, in bytes.
    size_t (*peak_mem)(void *ctx);
    // set_flag(): switch one named optimisation on (1) or off (0) for matched comparisons
    // (`lily bench --ablate NAME`). Unknown names give LILY_EINVAL with a message listing the
    // known ones. Flags apply to forward calls made after the change.
    int (*set_flag)(void *ctx, const char *name, int on);

    // Snapshots the backend keeps itself, for the engine's prefix cache (optional: without them the
    // engine caches nothing). Why not state_save into host memory: a GPU backend keeps a snapshot in
    // device memory, where saving and restoring are device-to-device copies.
    // snap_save() copies the state into memory of its own choosing and returns a handle, with the
    // bytes it holds in *bytes (the state_save_size() of the state), or NULL with lily_err_msg() set
    // when it cannot; snap_load() restores a state from a handle this context made (LILY_ERANGE if
    // it does not fit the state, which is then unchanged); snap_free() releases a handle.
    void *(*snap_save)(void *ctx, void *state, size_t *bytes);
    int (*snap_load)(void *ctx, void *state, void *snap);
    void (*snap_free)(void *ctx, void *snap);

    // One decode step of `token` (optional): the state advances by one and *next receives the greedy
    // choice from its logits (the lowest id of the largest), which stay on the device. The engine
    // uses it for plain greedy requests (no bias, penalties or logprobs): on CUDA it saves copying
    // the 248,320 logits to the host and scanning them there every token. Same errors as forward().
    int (*step_greedy)(void *ctx, void *state, int token, int *next);
    // One decode step of `token` (optional): the state advances by one, and the k largest of its
    // logits (1 <= k <= LILY_TOPK_MAX) come back in descending order, ties by lower id (as
    // sampler_top_candidates gives them): vals[0..*n), ids[0..*n), *n = k (fewer only when fewer
    // logits are not NaN). The engine uses it for requests without logprobs that are sampled with a
    // top_k it covers, top_p or min_p, or greedy with a bias or penalties (sampler_sample_top /
    // sampler_sample_mass then draw from them): on CUDA it saves copying the 248,320 logits to the
    // host every token. With mass (else NULL), *mass receives the
    // softmax's mass at temperature (> 0) relative to the largest logit, sum over the vocabulary of
    // exp((l - max) / temperature), for top-p and min-p requests (sampler_sample_mass). edits[0..
    // n_edits) (sampler_edits: a request's bias and penalties; its first n_bias are sorted by id, a
    // repeated id's entries adjacent; the rest are distinct ids) are applied to the step's logits first, in order, where they are: the candidates,
    // the mass and logits_last then see the edited logits. Same errors as forward().
    int (*step_topk)(void *ctx, void *state, int token, int k, float temperature, const struct sampler_edit *edits,
                     int n_edits, int n_bias, float *vals, int *ids, int *n, double *mass);
    // The logits of the step step_topk just took, all vocab_size of them, into logits (optional; the
    // engine's way back to the full distribution when the candidates do not decide a top-p / min-p
    // draw).
    int (*logits_last)(void *ctx, void *state, float *logits);
    // One decode step of `token` (optional): the state advances by one and *next receives a draw from
    // softmax(logits / temperature), temperature > 0, made where the logits are (on CUDA by Gumbel-max
    // with noise hashed from seed, the position and the id): no logits to the host. The same seed
    // gives the same draws; they are not the host sampler's. The engine uses it for requests sampled
    // at a temperature with no other filter, bias, penalty or logprobs. Same errors as forward().
    int (*step_sample)(void *ctx, void *state, int token, float temperature, unsigned seed, int *next);
};

// The most candidates step_topk gives.
#define LILY_TOPK_MAX 64

// The backend of that name ("cpu", or "cuda" when built with CUDA), or NULL.
const struct lily_backend *lily_backend_get(const char *name);

#endif
