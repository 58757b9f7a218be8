// attn_prefill.cu: the per-chunk kernels of the prefill path that are not GEMMs (spec §2.3): the
// embedding of T tokens, the full-attention prologue for T tokens (q/k RMSNorm, partial NeoX RoPE,
// KV append: the decode kernel's arithmetic with the token taken from the grid), and causal
// attention of T queries over the cache [0, pos0 + t] for query t.
//
// Attention: one block per (query token, KV head), one warp per query head of the GQA group (looping
// when the group has more than 8), each warp walking the positions in order with an fp32 online
// softmax (the decode kernel's arithmetic without the split). K/V rows are read from the bf16 (or
// fp32) cache written just before; the warps of a block read the same rows, so L1 serves all but the
// first. Straightforward, not flash-tiled: fine while the GDN scan dominates (docs/PERF.md).
#include <type_traits>

#include "prefill.cuh"

// Kernels here run only in the bf16-activation mode (forward_cuda.cu falls back to token-by-token
// prefill under LILY_CUDA_F32ACT), so this file's rounding switch stays at its default (round).

__global__ void pf_embed_kernel(dq_mat m, const void *dense, int dt, int H, const int *toks, float *x) {
    const int t = blockIdx.y, tok = toks[t];
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < H; c += gridDim.x * blockDim.x)
        x[(long)t * H + c] = m.codes ? dq_get(m, tok, c) : lily_load_f32(dense, dt, (long)tok * H + c);
}

void pf_embed(const dq_mat &qm, const void *dense, int dense_dt, int hidden, const int *toks, int T,
              float *x, cudaStream_t st) {
    if (T > 0) pf_embed_kernel<<<dim3((hidden + 255) / 256, T), 256, 0, st>>>(qm, dense, dense_dt, hidden, toks, x);
}

// Grid (hq + hkv, T): blocks [0, hq) are query heads, the rest key heads (which also append v).
__global__ void pf_qk_kernel(attn_dims d, int pos0, const float *qg, const float *k, const float *v,
                             const float *q_norm, const float *k_norm, float *q_out, void *kc, void *vc) {
    extern __shared__ float y[];
    __shared__ float red[32];
    const int hb = blockIdx.x, t = blockIdx.y, D = d.d, p = pos0 + t;
    const bool is_q = hb < d.hq;
    const int h = is_q ? hb : hb - d.hq;
    const float *x = is_q ? qg + ((long)t * d.hq + h) * 2 * D : k + ((long)t * d.hkv + h) * D;
    const float *w = is_q ? q_norm : k_norm;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < D; i += blockDim.x) ss += x[i] * x[i];
    float r = rsqrtf(block_sum(ss, red) / D + d.eps);
    for (int i = threadIdx.x; i < D; i += blockDim.x) y[i] = rb(x[i] * r * w[i]);
    __syncthreads();
    const int half = d.rope_dim / 2;
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
        float out = y[i];
        if (i < d.rope_dim) {
            int fi = i < half ? i : i - half;
            float inv = 1.0f / powf(d.theta, (float)(2 * fi) / (float)d.rope_dim);
            float ang = (float)p * inv, c = rb(cosf(ang)), s = rb(sinf(ang));
            out = i < half ? rb(rb(y[i] * c) - rb(y[i + half] * s)) : rb(rb(y[i] * c) + rb(y[i - half] * s));
        }
        if (is_q) {
            q_out[((long)t * d.hq + h) * D + i] = out;
        } else {
            long at = ((long)h * d.max_ctx + p) * D + i;
            float vv = v[((long)t * d.hkv + h) * D + i];
            if (d.kv_f32) {
                ((float *)kc)[at] = out;
                ((float *)vc)[at] = vv;
            } else {
                ((uint16_t *)kc)[at] = lily_f32_to_bf16(out);
                ((uint16_t *)vc)[at] = lily_f32_to_bf16(vv);
            }
        }
    }
}

void pf_qk_norm_rope_append(attn_dims d, int T, int pos0, const float *qg, const float *k,
                            const float *v, const float *q_norm, const float *k_norm, float *q_out,
                            void *kc, void *vc, cudaStream_t st) {
    if (T > 0)
        pf_qk_kernel<<<dim3(d.hq + d.hkv, T), 128, d.d * sizeof(float), st>>>(d, pos0, qg, k, v, q_norm,
                                                                           k_norm, q_out, kc, vc);
}

__device__ __forceinline__ float pf_kv(const uint16_t *p) { return lily_bf16_to_f32(*p); }
__device__ __forceinline__ float pf_kv(const float *p) { return *p; }

// Lane holds DPL consecutive dims (D <= 32 * DPL; masked when D is smaller).
template <int DPL, bool KVF>
__global__ void __launch_bounds__(256) pf_attn_kernel(attn_dims d, int pos0, const float *q,
                                                      const void *kc_, const void *vc_,
                                                      const float *qg, uint16_t *o) {
    typedef typename std::conditional<KVF, float, uint16_t>::type kv_t;
    const kv_t *kc = (const kv_t *)kc_, *vc = (const kv_t *)vc_;
    const int t = blockIdx.x, kvh = blockIdx.y, D = d.d, group = d.hq / d.hkv;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int len = pos0 + t + 1;
    const int nd = min(DPL, max(0, D - lane * DPL));
    const float scale = rsqrtf((float)D);
    const kv_t *kb = kc + (long)kvh * d.max_ctx * D + lane * DPL;
    const kv_t *vb = vc + (long)kvh * d.max_ctx * D + lane * DPL;
    for (int hh = warp; hh < group; hh += nw) {
        const int h = kvh * group + hh;
        const float *qr = q + ((long)t * d.hq + h) * D + lane * DPL;
        float qv[DPL], acc[DPL];
#pragma unroll
        for (int j = 0; j < DPL; j++) qv[j] = j < nd ? qr[j] * scale : 0.0f, acc[j] = 0.0f;
        float m = -INFINITY, l = 0.0f;
        for (int p = 0; p < len; p++) {
            float kf[DPL], vf[DPL];
            if (DPL == 8 && !KVF && nd == 8) {
                uint4 kr = *(const uint4 *)(kb + (long)p * D), vr = *(const uint4 *)(vb + (long)p * D);
                uint32_t kw[4] = {kr.x, kr.y, kr.z, kr.w}, vw[4] = {vr.x, vr.y, vr.z, vr.w};
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    kf[2 * j] = __uint_as_float(kw[j] << 16), kf[2 * j + 1] = __uint_as_float(kw[j] & 0xffff0000u);
                    vf[2 * j] = __uint_as_float(vw[j] << 16), vf[2 * j + 1] = __uint_as_float(vw[j] & 0xffff0000u);
                }
            } else {
#pragma unroll
                for (int j = 0; j < DPL; j++) {
                    kf[j] = j < nd ? pf_kv(kb + (long)p * D + j) : 0.0f;
                    vf[j] = j < nd ? pf_kv(vb + (long)p * D + j) : 0.0f;
                }
            }
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < DPL; j++) s += qv[j] * kf[j];
            s = warp_sum(s);
            float mn = fmaxf(m, s);
            float corr = __expf(m - mn), pr = __expf(s - mn);
            l = l * corr + pr;
            m = mn;
#pragma unroll
            for (int j = 0; j < DPL; j++) acc[j] = acc[j] * corr + pr * vf[j];
        }
        const float *gate = qg + ((long)t * d.hq + h) * 2 * D + D + lane * DPL;
        uint16_t *orow = o + ((long)t * d.hq + h) * D + lane * DPL;
#pragma unroll
        for (int j = 0; j < DPL; j++)
            if (j < nd) orow[j] = lily_f32_to_bf16(rb(acc[j] / l) * sigmoid_f(gate[j]));
    }
}

template <int DPL>
static void pf_attn_dpl(attn_dims d, int T, int pos0, const float *q, const void *kc, const void *vc,
                        const float *qg, uint16_t *o, cudaStream_t st) {
    int group = d.hq / d.hkv, warps = group < 8 ? group : 8;
    dim3 grid(T, d.hkv);
    if (d.kv_f32) pf_attn_kernel<DPL, true><<<grid, warps * 32, 0, st>>>(d, pos0, q, kc, vc, qg, o);
    else pf_attn_kernel<DPL, false><<<grid, warps * 32, 0, st>>>(d, pos0, q, kc, vc, qg, o);
}

void pf_attention(attn_dims d, int T, int pos0, const float *q, const void *kc, const void *vc,
                  const float *qg, uint16_t *o, cudaStream_t st) {
    if (T <= 0) return;
    int dpl = (d.d + 31) / 32;
    if (dpl > 4) pf_attn_dpl<8>(d, T, pos0, q, kc, vc, qg, o, st);
    else if (dpl > 2) pf_attn_dpl<4>(d, T, pos0, q, kc, vc, qg, o, st);
    else if (dpl > 1) pf_attn_dpl<2>(d, T, pos0, q, kc, vc, qg, o, st);
    else pf_attn_dpl<1>(d, T, pos0, q, kc, vc, qg, o, st);
}
