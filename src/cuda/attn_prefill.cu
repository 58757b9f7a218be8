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

// One block a token: PQ_G groups of 128 threads, group g taking heads g, g + PQ_G, ... of the hq query
// heads then the hkv key heads (which also append v). Each head's arithmetic is the decode kernel's
// with 128 threads (a thread's elements i and i + 128; block_sum's order over the group's 4 warps), so
// the bits are those of the block-a-head form, which ran 73,728 short blocks at 4K tokens (~120 us a
// layer). The loads of PQ_BATCH heads go out together; the RoPE factors of a thread's elements are the
// same for every head of the token and are computed once.
#define PQ_G 2
#define PQ_BATCH 8
__global__ void __launch_bounds__(128 * PQ_G)
    pf_qk_kernel(attn_dims d, int pos0, const float *qg, const float *k, const float *v, const float *q_norm,
                 const float *k_norm, float *q_out, void *kc, void *vc) {
    __shared__ float y[PQ_G][256];
    __shared__ float red[PQ_G][4];
    const int t = blockIdx.x, D = d.d, p = pos0 + t, g = threadIdx.x >> 7, tid = threadIdx.x & 127;
    const int lane = tid & 31, wq = tid >> 5, nh = d.hq + d.hkv, nit = (nh + PQ_G - 1) / PQ_G, half = d.rope_dim / 2;
    float cs[2] = {0.0f, 0.0f}, sn[2] = {0.0f, 0.0f};
#pragma unroll
    for (int e = 0; e < 2; e++) {
        const int i = tid + 128 * e;
        if (i < d.rope_dim) rope_factors(d, p, i, cs[e], sn[e]);
    }
    auto head_x = [&](int hb) {
        return hb < d.hq ? qg + ((long)t * d.hq + hb) * 2 * D : k + ((long)t * d.hkv + hb - d.hq) * D;
    };
    for (int it0 = 0; it0 < nit; it0 += PQ_BATCH) {
        float xv[PQ_BATCH][2];
#pragma unroll
        for (int b = 0; b < PQ_BATCH; b++) {
            const int hb = (it0 + b) * PQ_G + g;
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int i = tid + 128 * e;
                xv[b][e] = it0 + b < nit && hb < nh && i < D ? head_x(hb)[i] : 0.0f;
            }
        }
#pragma unroll
        for (int b = 0; b < PQ_BATCH; b++) {
            if (it0 + b >= nit) break; // the same for the whole block: the barriers below match
            const int hb = (it0 + b) * PQ_G + g;
            const bool live = hb < nh, is_q = hb < d.hq;
            const float *w = is_q ? q_norm : k_norm;
            float ss = 0.0f;
#pragma unroll
            for (int e = 0; e < 2; e++)
                if (tid + 128 * e < D) ss += xv[b][e] * xv[b][e];
            ss = warp_sum(ss); // block_sum over the group's 4 warps
            __syncthreads();
            if (lane == 0) red[g][wq] = ss;
            __syncthreads();
            const float r = rsqrtf(warp_sum(lane < 4 ? red[g][lane] : 0.0f) / D + d.eps);
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int i = tid + 128 * e;
                if (i < D && live) y[g][i] = rb(xv[b][e] * r * w[i]);
            }
            __syncthreads();
            if (!live) continue;
            const int h = is_q ? hb : hb - d.hq;
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int i = tid + 128 * e;
                if (i >= D) continue;
                float out = y[g][i];
                if (i < d.rope_dim) out = rope_rotate(y[g], i, half, cs[e], sn[e]);
                if (is_q) {
                    q_out[((long)t * d.hq + h) * D + i] = out;
                } else {
                    const long at = ((long)h * d.max_ctx + p) * D + i;
                    const float vv = v[((long)t * d.hkv + h) * D + i];
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
    }
}

void pf_qk_norm_rope_append(attn_dims d, int T, int pos0, const float *qg, const float *k,
                            const float *v, const float *q_norm, const float *k_norm, float *q_out,
                            void *kc, void *vc, cudaStream_t st) {
    if (T > 0) pf_qk_kernel<<<T, 128 * PQ_G, 0, st>>>(d, pos0, qg, k, v, q_norm, k_norm, q_out, kc, vc);
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
                    kf[2 * j] = bf16_elem(kw[j], 0), kf[2 * j + 1] = bf16_elem(kw[j], 1);
                    vf[2 * j] = bf16_elem(vw[j], 0), vf[2 * j + 1] = bf16_elem(vw[j], 1);
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
