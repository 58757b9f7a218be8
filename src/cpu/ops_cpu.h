// ops_cpu.h: the operations of the CPU reference backend (ops_cpu.c, ops_gdn_cpu.c) and its
// thread pool (pool_cpu.c). Each op exists twice: the fast version the forward pass uses (SIMD,
// threads) and a plain `_ref` loop written straight from the spec, which tests/test_ops_cpu.c
// compares it against on random odd sizes. All activations are fp32 with fp32 accumulation
// (spec §7); weights are read through struct lily_mat in any format of quant.h.
#ifndef LILY_OPS_CPU_H
#define LILY_OPS_CPU_H

#include "quant.h"

// ---------------------------------------------------------------------------------------------
// Thread pool. cpu_parallel_for splits [0, n) into contiguous ranges, one per thread (the caller
// runs one of them), and returns when all are done. fn(arg, lo, hi) handles items lo..hi-1.
// Concurrent callers are serialised. The pool has lily_num_threads() threads, made on first use.
void cpu_parallel_for(int n, void (*fn)(void *arg, int lo, int hi), void *arg);
int cpu_pool_threads(void);

// ---------------------------------------------------------------------------------------------
// Matrix products. Y[n, rows] = X[n, cols] W^T: y[t*rows + r] = sum_c W[r, c] * x[t*cols + c].
// Each output element is one dot product whose value does not depend on n or the thread count,
// so chunked and whole-sequence runs give bit-identical results.
void cpu_matmul(const struct lily_mat *w, const float *x, int n, float *y);
void cpu_matmul_ref(const struct lily_mat *w, const float *x, int n, float *y);
// Row r of W as fp32 (fast dequantisation for 4- and 8-bit codes and bf16).
void cpu_mat_row(const struct lily_mat *w, long r, float *out);
float cpu_dot(const float *a, const float *b, int n);

// ---------------------------------------------------------------------------------------------
// Norms and elementwise ops.
// out = x / sqrt(mean(x^2) + eps) * w (w = NULL: no gain). out may equal x.
void cpu_rmsnorm(float *out, const float *x, const float *w, int n, float eps);
void cpu_rmsnorm_ref(float *out, const float *x, const float *w, int n, float eps);
static inline float cpu_sigmoid(float x) { return 1.0f / (1.0f + __builtin_expf(-x)); }
static inline float cpu_silu(float x) { return x / (1.0f + __builtin_expf(-x)); }
// PyTorch's softplus (threshold 20: linear above it).
static inline float cpu_softplus(float x) { return x > 20.0f ? x : __builtin_log1pf(__builtin_expf(x)); }

// ---------------------------------------------------------------------------------------------
// Rotary embedding, NeoX style over the first rope_dim dims of each of n_heads heads of head_dim:
// pairs (i, i + rope_dim/2) rotate by angle pos * inv_freq[i], inv_freq[i] = theta^(-2i/rope_dim)
// (fp32, as HF computes it). cpu_rope takes the table from cpu_rope_freqs.
void cpu_rope_freqs(float *inv_freq, int rope_dim, float theta);
void cpu_rope(float *x, int n_heads, int head_dim, int rope_dim, const float *inv_freq, int pos);
void cpu_rope_ref(float *x, int n_heads, int head_dim, int rope_dim, float theta, int pos);

// ---------------------------------------------------------------------------------------------
// Causal GQA attention of T queries at positions pos0..pos0+T-1 over a cache holding positions
// 0..pos0+T-1. q [T][Hq][D], kc/vc [ctx][Hkv][D], out [T][Hq][D]; query head h reads KV head
// h / (Hq/Hkv); scores scaled by D^-0.5, fp32 softmax.
void cpu_attention(const float *q, const float *kc, const float *vc, int T, int pos0, int Hq,
                   int Hkv, int D, float *out);
void cpu_attention_ref(const float *q, const float *kc, const float *vc, int T, int pos0, int Hq,
                       int Hkv, int D, float *out);

// ---------------------------------------------------------------------------------------------
// Gated DeltaNet pieces (ops_gdn_cpu.c).
// Causal depthwise conv + SiLU over T tokens: u [T][C] raw in_proj_qkv rows, w [C][K] taps (tap
// K-1 multiplies the current token), state [K-1][C] the previous raw rows, oldest first (zeros at
// sequence start; updated). y [T][C].
void cpu_gdn_conv(const float *w, float *state, const float *u, int T, int C, int K, float *y);
// Delta rule over T tokens for all Hv heads: S [Hv][Dk][Dv] fp32 state (updated), q and k
// [T][Hk][Dk] (already L2-normalised, q scaled by Dk^-0.5), v [T][Hv][Dv], gamma (per-step decay
// exp(g)) and beta [T][Hv]; v head j uses k head j / (Hv/Hk). For each token: S <- gamma S;
// u = S^T k; S <- S + k (beta (v - u))^T; o = S^T q (read after write). o [T][Hv][Dv].
void cpu_gdn_delta(float *S, const float *q, const float *k, const float *v, const float *gamma,
                   const float *beta, int T, int Hk, int Hv, int Dk, int Dv, float *o);
void cpu_gdn_delta_ref(float *S, const float *q, const float *k, const float *v,
                       const float *gamma, const float *beta, int T, int Hk, int Hv, int Dk,
                       int Dv, float *o);

// ---------------------------------------------------------------------------------------------
// MoE routing for one token: softmax over all E logits (fp32), the k largest probabilities
// (descending; ties to the lower index), renormalised to sum 1 when `renorm`.
void cpu_route(const float *logits, int E, int k, int renorm, int *idx, float *w);

#endif
