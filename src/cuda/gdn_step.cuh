// gdn_step.cuh: one Gated DeltaNet decode step for one (v head, column slice), in three pieces, so
// that gdn.cu's kernel (a block per head and split) and gdn_front.cu's (the step after the layer's
// in_proj, in the same launch) run the same arithmetic in the same order: the same bits.
//   gdn_pre_load (before the wait): conv taps, all K ring slots, dt_bias, A and the first batch of
//                the state slice, which only this layer's step of the previous token wrote;
//   gdn_qk       (after it): this token's q, k (its k head) and v (its slice) through the causal conv
//                + SiLU, the ring's slot p % K written, q and k L2-normed, the gates;
//   gdn_update   the delta-rule update of the state slice and the read-out o (bf16-rounded).
// NT: the block's threads (a multiple of 32, at least dk); a block's warps take CPB columns at a time.
#pragma once
#include "cuda_common.cuh"

#define KPL 4  // max dk / 32
#define CPB 4  // columns per warp batch
#define KMAX 8 // conv taps kept in registers (the model has 4)

struct gdn_pre {
    float wq[KMAX], wk[KMAX], wv[KMAX], rq[KMAX], rk[KMAX], rv[KMAX]; // taps reversed; ring slots
    float s0[CPB][KPL];                                               // the warp's first columns of the slice
    float dtb, Ah;
};

// Channels of this thread: q and k of head h's k head (tid < dk), v column j0 + tid of the slice (tid < dvs).
__device__ __forceinline__ void gdn_channels(const gdn_dims &d, int h, int j0, int tid, int &cq, int &ck, int &cv) {
    const int kh = h / (d.hv / d.hk);
    cq = kh * d.dk + tid, ck = d.hk * d.dk + kh * d.dk + tid, cv = 2 * d.hk * d.dk + h * d.dv + j0 + tid;
}

template <int NT>
__device__ __forceinline__ void gdn_pre_load(const gdn_dims &d, int h, int j0, int dvs, const float *conv_w,
                                             const float *ring, const float *state, const float *dt_bias,
                                             const float *A, gdn_pre &P) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int C = 2 * d.hk * d.dk + d.hv * d.dv, K = d.kconv;
    int cq, ck, cv;
    gdn_channels(d, h, j0, tid, cq, ck, cv);
    const bool hasq = tid < d.dk, hasv = tid < dvs;
    const float *S = state + (long)h * d.dv * d.dk;
#pragma unroll
    for (int t = 0; t < KMAX; t++) {
        const bool ok = t < K;
        P.wq[t] = ok && hasq ? conv_w[(long)cq * K + K - 1 - t] : 0.0f;
        P.wk[t] = ok && hasq ? conv_w[(long)ck * K + K - 1 - t] : 0.0f;
        P.wv[t] = ok && hasv ? conv_w[(long)cv * K + K - 1 - t] : 0.0f;
        P.rq[t] = ok && hasq ? ring[(long)t * C + cq] : 0.0f;
        P.rk[t] = ok && hasq ? ring[(long)t * C + ck] : 0.0f;
        P.rv[t] = ok && hasv ? ring[(long)t * C + cv] : 0.0f;
    }
#pragma unroll
    for (int c = 0; c < CPB; c++)
#pragma unroll
        for (int t = 0; t < KPL; t++) {
            const int j = warp * CPB + c, i = lane + 32 * t;
            P.s0[c][t] = (j < dvs && i < d.dk) ? S[(long)(j0 + j) * d.dk + i] : 0.0f;
        }
    P.dtb = dt_bias[h], P.Ah = A[h];
}

// After the wait. CG: qkv, b and a were written by other blocks of this launch (read through L2).
// Ends with a barrier: qs, ks (dk) and vs (dvs) are ready for gdn_update.
template <int NT, bool CG>
__device__ __forceinline__ void gdn_qk(const gdn_dims &d, int h, int split, int j0, int dvs, int p, const float *qkv,
                                       const float *bb, const float *aa, float *ring, const gdn_pre &P, float *qs,
                                       float *ks, float *vs, float *red, float &beta, float &xa) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int C = 2 * d.hk * d.dk + d.hv * d.dv, K = d.kconv, slot = p % K;
    int cq, ck, cv;
    gdn_channels(d, h, j0, tid, cq, ck, cv);
    const bool hasq = tid < d.dk, hasv = tid < dvs;
    const bool qk_writer = (h % (d.hv / d.hk)) == 0 && split == 0;
    // Ring slot of tap t (position p - t), once: (p - t) mod K for 0 < t < K (a modulo by the runtime
    // K costs ~20 instructions, and the three convolutions below would each redo it per tap).
    int sl[KMAX];
#pragma unroll
    for (int t = 0; t < KMAX; t++) sl[t] = slot - t < 0 ? slot - t + K : slot - t;
    // Causal depthwise conv from registers, then SiLU (bf16 points): tap t reads ring slot (p - t) mod K.
    auto conv_r = [&](float u, const float *w, const float *r) {
        float y = __fmul_rn(w[0], u); // gdn_pf_conv's order and roundings (gdn_pf.cuh)
#pragma unroll
        for (int t = 1; t < KMAX; t++) {
            if (t >= K) break;
            const int s = sl[t];
            float rs = 0.0f;
#pragma unroll
            for (int q = 0; q < KMAX; q++) rs = q == s ? r[q] : rs;
            y = __fmaf_rn(w[t], rs, y);
        }
        return rb(silu_f(rb(y)));
    };
    auto ld = [&](const float *ptr) { return CG ? __ldcg(ptr) : *ptr; };
    const float uq = hasq ? ld(qkv + cq) : 0.0f, uk = hasq ? ld(qkv + ck) : 0.0f, uv = hasv ? ld(qkv + cv) : 0.0f;
    const float bh = ld(bb + h), ah = ld(aa + h);
    float qv = 0.0f, kv = 0.0f;
    if (hasq) {
        qv = conv_r(uq, P.wq, P.rq), kv = conv_r(uk, P.wk, P.rk);
        if (qk_writer) ring[(long)slot * C + cq] = uq, ring[(long)slot * C + ck] = uk;
    }
    if (hasv) vs[tid] = conv_r(uv, P.wv, P.rv), ring[(long)slot * C + cv] = uv;
    // Both L2 norms' sums in one block reduction (each in block_sum's order; warps past dk add zeros).
    float a2 = warp_sum(qv * qv), b2 = warp_sum(kv * kv);
    if (lane == 0) red[warp] = a2, red[32 + warp] = b2;
    __syncthreads();
    constexpr int nw = NT / 32;
    const float sq = warp_sum(lane < nw ? red[lane] : 0.0f), sk = warp_sum(lane < nw ? red[32 + lane] : 0.0f);
    if (hasq) { // L2 norms in fp32, eps inside the sqrt; q also scaled by dk^-1/2
        qs[tid] = qv / sqrtf(sq + 1e-6f) * rsqrtf((float)d.dk);
        ks[tid] = kv / sqrtf(sk + 1e-6f);
    }
    beta = rb(sigmoid_f(bh)), xa = ah + P.dtb;
    __syncthreads();
}

// The delta rule on columns j0 .. j0 + dvs of head h's state, and o for them. S0: the warp's first
// batch of columns is in s0 (gdn_pre_load), not read again.
template <int NT, bool S0>
__device__ __forceinline__ void gdn_update(const gdn_dims &d, int h, int j0, int dvs, float *state, const float *qs,
                                           const float *ks, const float *vs, float beta, float xa, float Ah,
                                           const float (*s0)[KPL], float *o) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    float *S = state + (long)h * d.dv * d.dk;
    float sp = xa > 20.0f ? xa : log1pf(expf(xa));
    const float gamma = expf(Ah * sp);
    float kr[KPL], qr[KPL], kq = 0.0f;
#pragma unroll
    for (int t = 0; t < KPL; t++) {
        int i = lane + 32 * t;
        kr[t] = i < d.dk ? ks[i] : 0.0f;
        qr[t] = i < d.dk ? qs[i] : 0.0f;
        kq = __fmaf_rn(kr[t], qr[t], kq);
    }
    kq = warp_sum(kq);
    for (int jb = warp * CPB; jb < dvs; jb += (NT / 32) * CPB) {
        float s[CPB][KPL];
#pragma unroll
        for (int c = 0; c < CPB; c++)
#pragma unroll
            for (int t = 0; t < KPL; t++) {
                int j = jb + c, i = lane + 32 * t;
                s[c][t] = S0 && jb == warp * CPB ? s0[c][t] : (j < dvs && i < d.dk) ? S[(long)(j0 + j) * d.dk + i] : 0.0f;
            }
#pragma unroll
        for (int c = 0; c < CPB; c++) {
            int j = jb + c;
            float a = 0.0f, b = 0.0f;
#pragma unroll
            for (int t = 0; t < KPL; t++) a = __fmaf_rn(s[c][t], kr[t], a), b = __fmaf_rn(s[c][t], qr[t], b);
            a = warp_sum(a);
            b = warp_sum(b);
            if (j >= dvs) continue;
            // The update's roundings spelled out: the compiler contracted `gamma b + delta kq` one way in
            // gdn_out's instantiation and the other way in the rest, and o differed by a bf16 step in about
            // one run in four of the kernel test (1 value of 4096).
            const float delta = __fmul_rn(beta, __fmaf_rn(-gamma, a, vs[j]));
#pragma unroll
            for (int t = 0; t < KPL; t++) {
                int i = lane + 32 * t;
                if (i < d.dk) S[(long)(j0 + j) * d.dk + i] = __fmaf_rn(kr[t], delta, __fmul_rn(gamma, s[c][t]));
            }
            if (lane == 0) o[h * d.dv + j0 + j] = rb(__fmaf_rn(delta, kq, __fmul_rn(gamma, b)));
        }
    }
}
