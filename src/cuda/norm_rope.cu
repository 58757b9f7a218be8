// norm_rope.cu: the small per-token kernels around the big GEMVs: the full-attention prologue
// (q/k RMSNorm, partial NeoX RoPE, KV-cache append, spec §2.3) and the embedding lookup.
#include "cuda_common.cuh"

LILY_CUDA_MODE_SETTER(norm_rope)

// One block per head: blocks [0, hq) are query heads, [hq, hq + hkv) key heads (which also append v).
__global__ void qk_kernel(attn_dims d, const float *qg, const float *k, const float *v,
                          const float *q_norm, const float *k_norm, float *q_out, void *kc,
                          void *vc, const int *posp) {
    extern __shared__ float y[];
    __shared__ float red[32];
    const int hb = blockIdx.x, D = d.d, half = d.rope_dim / 2;
    const bool is_q = hb < d.hq;
    const int h = is_q ? hb : hb - d.hq;
    const float *w = is_q ? q_norm : k_norm;
    // Before the wait, what does not depend on the previous kernel: the position (written by the
    // previous step's token select, long complete when this kernel starts), and for this thread's
    // dims (at most QK_DPT: head_dim <= 256, checked at load) the norm weight and the rotation, whose
    // powf / sincos were on the critical path after the wait.
    constexpr int QK_DPT = 2;
    const int p = *posp;
    float wv[QK_DPT], cv[QK_DPT], sv[QK_DPT];
#pragma unroll
    for (int u = 0; u < QK_DPT; u++) {
        const int i = threadIdx.x + u * blockDim.x;
        wv[u] = i < D ? w[i] : 0.0f, cv[u] = sv[u] = 0.0f;
        if (i < d.rope_dim) rope_factors(d, p, i, cv[u], sv[u]);
    }
    pdl_wait();
    pdl_trigger();
    const float *x = is_q ? qg + (long)h * 2 * D : k + (long)h * D;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < D; i += blockDim.x) ss += x[i] * x[i];
    float r = rsqrtf(block_sum(ss, red) / D + d.eps);
#pragma unroll
    for (int u = 0; u < QK_DPT; u++) {
        const int i = threadIdx.x + u * blockDim.x;
        if (i < D) y[i] = rb(x[i] * r * wv[u]);
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < QK_DPT; u++) {
        const int i = threadIdx.x + u * blockDim.x;
        if (i >= D) break;
        float out = y[i];
        if (i < d.rope_dim) out = rope_rotate(y, i, half, cv[u], sv[u]);
        if (is_q) {
            q_out[(long)h * D + i] = out;
        } else {
            long at = ((long)h * d.max_ctx + p) * D + i;
            if (d.kv_f32) {
                ((float *)kc)[at] = out;
                ((float *)vc)[at] = v[(long)h * D + i];
            } else {
                ((uint16_t *)kc)[at] = lily_f32_to_bf16(out);
                ((uint16_t *)vc)[at] = lily_f32_to_bf16(v[(long)h * D + i]);
            }
        }
    }
}

void qk_norm_rope_append(attn_dims d, const float *qg, const float *k, const float *v,
                         const float *q_norm, const float *k_norm, float *q_out, void *kc,
                         void *vc, const int *pos, cudaStream_t st) {
    launch_k(qk_kernel, d.hq + d.hkv, 128, d.d * sizeof(float), st, d, qg, k, v, q_norm, k_norm, q_out, kc, vc, pos);
}

__global__ void embed_kernel(dq_mat m, const void *dense, int dt, int H, const int *tokp, float *x,
                             unsigned long long *acc, int acc_words) {
    pdl_wait();
    pdl_trigger();
    const int tok = *tokp;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < acc_words; c += gridDim.x * blockDim.x) acc[c] = 0ull;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < H; c += gridDim.x * blockDim.x) {
        if (m.codes) {
            x[c] = dq_get(m, tok, c);
        } else {
            x[c] = lily_load_f32(dense, dt, (long)tok * H + c);
        }
    }
}

void embed_row(const dq_mat &qm, const void *dense, int dense_dt, int hidden, const int *tok,
               float *x, cudaStream_t st, unsigned long long *acc, int acc_words) {
    launch_k(embed_kernel, (hidden + 255) / 256, 256, 0, st, qm, dense, dense_dt, hidden, tok, x, acc, acc ? acc_words : 0);
}
