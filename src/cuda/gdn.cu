// gdn.cu: one decode step of a Gated DeltaNet layer (spec §2.4), fused: causal conv over the ring of
// raw inputs + SiLU, L2 norms of q and k, the gates, the delta-rule update of the fp32 state and the
// read-out. Grid = (v heads, nsplit): the Dv columns of a head are independent given q and k, so a
// head's state is split over nsplit blocks (more SMs streaming the 4 MB of state per layer); each
// block recomputes its k head's q/k (256 channels, cheap). The gated RMSNorm needs whole heads, so
// it runs in the out_proj GEMV's prologue (gemv.cu, PRO_GATED).
//
// State layout (Hv, Dv, Dk): one column (fixed v index) is contiguous over k, so a warp reads it
// coalesced. Conv ring (K, C): slot p % K holds the raw input of position p; the step reads the K-1
// previous slots and writes its own, so no block reads what another writes.
#include "cuda_common.cuh"

LILY_CUDA_MODE_SETTER(gdn)
LILY_TRACE_SETTER(gdn)

#define GDN_THREADS 128
#define KPL 4 // max dk / 32
#define CPB 4 // columns per warp batch

#define KMAX 8 // conv taps the EARLY path keeps in registers (the model has 4)

// EARLY (LILY_CUDA_GDN_LAT, kconv <= KMAX): everything that does not depend on the previous kernel
// is requested before the wait (conv weights, all K ring slots, dt_bias, A, and the first batch of
// this block's state slice, which only this layer's kernel of the previous step wrote); after it,
// the position, this token's projections and the gates in one round trip. The arithmetic and its
// order are those of the default path (bitwise the same; the two norms share one block reduction).
template <bool EARLY>
__global__ void __launch_bounds__(GDN_THREADS)
    gdn_kernel(gdn_dims d, const float *qkv, const float *bb, const float *aa, const float *conv_w,
               const float *dt_bias, const float *A, float *ring, float *state, float *o,
               const int *posp, int nsplit) {
    trace_mark(0);
    __shared__ float qs[128], ks[128], red[64];
    const int h = blockIdx.x, split = blockIdx.y, tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int C = 2 * d.hk * d.dk + d.hv * d.dv, K = d.kconv;
    const int kh = h / (d.hv / d.hk);
    const int dvs = d.dv / nsplit, j0 = split * dvs;
    float *S = state + (long)h * d.dv * d.dk;
    const int cq = kh * d.dk + tid, ck = d.hk * d.dk + kh * d.dk + tid, cv = 2 * d.hk * d.dk + h * d.dv + j0 + tid;
    const bool hasq = tid < d.dk, hasv = tid < dvs;
    float wq[KMAX], wk[KMAX], wv[KMAX], rq[KMAX], rk[KMAX], rv[KMAX]; // taps reversed; ring slots
    float s0[CPB][KPL], dtb = 0.0f, Ah = 0.0f;
    if (EARLY) {
#pragma unroll
        for (int t = 0; t < KMAX; t++) {
            const bool ok = t < K;
            wq[t] = ok && hasq ? conv_w[(long)cq * K + K - 1 - t] : 0.0f;
            wk[t] = ok && hasq ? conv_w[(long)ck * K + K - 1 - t] : 0.0f;
            wv[t] = ok && hasv ? conv_w[(long)cv * K + K - 1 - t] : 0.0f;
            rq[t] = ok && hasq ? ring[(long)t * C + cq] : 0.0f;
            rk[t] = ok && hasq ? ring[(long)t * C + ck] : 0.0f;
            rv[t] = ok && hasv ? ring[(long)t * C + cv] : 0.0f;
        }
#pragma unroll
        for (int c = 0; c < CPB; c++)
#pragma unroll
            for (int t = 0; t < KPL; t++) {
                const int j = warp * CPB + c, i = lane + 32 * t;
                s0[c][t] = (j < dvs && i < d.dk) ? S[(long)(j0 + j) * d.dk + i] : 0.0f;
            }
        dtb = dt_bias[h], Ah = A[h];
    } else {
        // This block's slice of the state was last written by this layer's kernel of the previous
        // step, long complete: stream it towards L2 while the in_proj GEMV finishes.
        prefetch_block(state + ((long)h * d.dv + j0) * d.dk, (long)dvs * d.dk * 4);
    }
    pdl_wait_early();
    trace_mark(1);
    const int p = *posp, slot = p % K;
    const bool qk_writer = (h % (d.hv / d.hk)) == 0 && split == 0;
    // Ring slot of tap t (position p - t), once: (p - t) mod K for 0 < t < K (a modulo by the runtime
    // K costs ~20 instructions, and the three convolutions below would each redo it per tap).
    int sl[KMAX];
#pragma unroll
    for (int t = 0; t < KMAX; t++) sl[t] = slot - t < 0 ? slot - t + K : slot - t;

    // Causal depthwise conv of channel c with the current raw value u, then SiLU (bf16 points).
    auto conv = [&](int c, bool write) {
        float u = qkv[c];
        float y = __fmul_rn(conv_w[(long)c * K + K - 1], u); // gdn_pf_conv's order and roundings (gdn_pf.cuh)
        for (int t = 1; t < K; t++) {
            const int s = t < KMAX ? sl[t] : ((p - t) % K + K) % K;
            y = __fmaf_rn(conv_w[(long)c * K + K - 1 - t], ring[(long)s * C + c], y);
        }
        if (write) ring[(long)slot * C + c] = u;
        return rb(silu_f(rb(y)));
    };
    // The same from registers: tap t reads ring slot (p - t) mod K.
    auto conv_r = [&](float u, const float *w, const float *r) {
        float y = __fmul_rn(w[0], u);
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
    float qv = 0.0f, kv = 0.0f;
    __shared__ float vs[128];
    float beta, xa;
    if (EARLY) {
        const float uq = hasq ? qkv[cq] : 0.0f, uk = hasq ? qkv[ck] : 0.0f, uv = hasv ? qkv[cv] : 0.0f;
        const float bh = bb[h], ah = aa[h];
        if (hasq) {
            qv = conv_r(uq, wq, rq), kv = conv_r(uk, wk, rk);
            if (qk_writer) ring[(long)slot * C + cq] = uq, ring[(long)slot * C + ck] = uk;
        }
        if (hasv) vs[tid] = conv_r(uv, wv, rv), ring[(long)slot * C + cv] = uv;
        // Both L2 norms' sums in one block reduction (each in block_sum's order).
        float a2 = warp_sum(qv * qv), b2 = warp_sum(kv * kv);
        if (lane == 0) red[warp] = a2, red[32 + warp] = b2;
        __syncthreads();
        const int nw = GDN_THREADS / 32;
        const float sq = warp_sum(lane < nw ? red[lane] : 0.0f), sk = warp_sum(lane < nw ? red[32 + lane] : 0.0f);
        if (hasq) {
            qs[tid] = qv / sqrtf(sq + 1e-6f) * rsqrtf((float)d.dk);
            ks[tid] = kv / sqrtf(sk + 1e-6f);
        }
        beta = rb(sigmoid_f(bh)), xa = ah + dtb;
    } else {
        if (hasq) {
            qv = conv(cq, qk_writer);
            kv = conv(ck, qk_writer);
        }
        if (hasv) vs[tid] = conv(cv, true);
        // L2 norms in fp32, eps inside the sqrt; q also scaled by dk^-1/2.
        float sq = block_sum(qv * qv, red);
        float sk = block_sum(kv * kv, red);
        if (hasq) {
            qs[tid] = qv / sqrtf(sq + 1e-6f) * rsqrtf((float)d.dk);
            ks[tid] = kv / sqrtf(sk + 1e-6f);
        }
        beta = rb(sigmoid_f(bb[h])), xa = aa[h] + dt_bias[h], Ah = A[h];
    }
    __syncthreads();
    trace_mark(2);
    float sp = xa > 20.0f ? xa : log1pf(expf(xa));
    const float gamma = expf(Ah * sp);

    float kr[KPL], qr[KPL], kq = 0.0f;
#pragma unroll
    for (int t = 0; t < KPL; t++) {
        int i = lane + 32 * t;
        kr[t] = i < d.dk ? ks[i] : 0.0f;
        qr[t] = i < d.dk ? qs[i] : 0.0f;
        kq += kr[t] * qr[t];
    }
    kq = warp_sum(kq);
    for (int jb = warp * CPB; jb < dvs; jb += 4 * CPB) {
        float s[CPB][KPL];
#pragma unroll
        for (int c = 0; c < CPB; c++)
#pragma unroll
            for (int t = 0; t < KPL; t++) {
                int j = jb + c, i = lane + 32 * t;
                s[c][t] = EARLY && jb == warp * CPB ? s0[c][t]
                          : (j < dvs && i < d.dk) ? S[(long)(j0 + j) * d.dk + i] : 0.0f;
            }
#pragma unroll
        for (int c = 0; c < CPB; c++) {
            int j = jb + c;
            float a = 0.0f, b = 0.0f;
#pragma unroll
            for (int t = 0; t < KPL; t++) a += s[c][t] * kr[t], b += s[c][t] * qr[t];
            a = warp_sum(a);
            b = warp_sum(b);
            if (j >= dvs) continue;
            float delta = beta * (vs[j] - gamma * a);
#pragma unroll
            for (int t = 0; t < KPL; t++) {
                int i = lane + 32 * t;
                if (i < d.dk) S[(long)(j0 + j) * d.dk + i] = gamma * s[c][t] + kr[t] * delta;
            }
            if (lane == 0) o[h * d.dv + j0 + j] = rb(gamma * b + delta * kq);
        }
    }
    trace_mark(3);
    pdl_trigger();
}

int lily_cuda_gdn_lat = 1; // from LILY_CUDA_OPT_GDN_LAT

void gdn_step(gdn_dims d, const float *qkv, const float *b, const float *a, const float *conv_w,
              const float *dt_bias, const float *A, float *conv_ring, float *state, float *o,
              const int *pos, int nsplit, cudaStream_t st) {
    while (nsplit > 1 && d.dv % nsplit) nsplit--;
    if (lily_cuda_gdn_lat && d.kconv <= KMAX)
        launch_k(gdn_kernel<true>, dim3(d.hv, nsplit), GDN_THREADS, 0, st, d, qkv, b, a, conv_w, dt_bias, A,
                 conv_ring, state, o, pos, nsplit);
    else
        launch_k(gdn_kernel<false>, dim3(d.hv, nsplit), GDN_THREADS, 0, st, d, qkv, b, a, conv_w, dt_bias, A,
                 conv_ring, state, o, pos, nsplit);
}
