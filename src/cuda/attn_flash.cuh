// attn_flash.cuh: what the two flash prefill attention kernels share (attn_flash.cu on mma.sync,
// attn_flash_wg.cu on wgmma): both hold a key tile's scores and the output in the m16n8 accumulator
// layout (a thread's elements e of n8 block i: row g + 8 (e >> 1) of its warp's 16, column
// 8 i + 2 tq + (e & 1); g = lane / 4, tq = lane % 4), so the causal mask, the online softmax and the
// gated output store are one piece of code for both.
#pragma once

#include "prefill.cuh"

static __device__ __forceinline__ uint32_t fa_smem(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
// Four 8 x 8 bf16 matrices transposed (V fragments: V is stored key-major).
static __device__ __forceinline__ void fa_ldsm4t(uint32_t *r, const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(fa_smem(p)));
}
static __device__ __forceinline__ uint32_t fa_pack(float lo, float hi) {
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}
static __device__ __forceinline__ float fa_lo(uint32_t u) { return __uint_as_float(u << 16); }
static __device__ __forceinline__ float fa_hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }

// One key tile (NB n8 blocks of keys from kbase) of a thread's two rows: the causal mask (only where
// some key of the tile is past some row's last position lim[rr]; keys [0, kfull) are seen by every
// row of the block), the running maxima mrow and the rescale factors corr of the online softmax
// (exp2 with the 1/sqrt(D) scale folded into sl2), P rounded to bf16 as the A fragments of the P V
// product (pa[j]: keys [16j, 16j + 16): {row g, keys 0-7}, {row g+8, 0-7}, {g, 8-15}, {g+8, 8-15}),
// and the thread's partial row sums lrow over the rounded P (its quad holds the rest), so the weights
// that multiply V sum to exactly l. Every row sees key 0 in tile 0, so the maxima are finite from then on.
template <int NB>
static __device__ __forceinline__ void fa_softmax_tile(float (&s)[NB][4], int kbase, int kfull, const int *lim, int tq,
                                                       float sl2, float *mrow, float *lrow, float *corr,
                                                       uint32_t (&pa)[NB / 2][4]) {
    if (kbase + 8 * NB > kfull) {
#pragma unroll
        for (int i = 0; i < NB; i++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                if (kbase + i * 8 + 2 * tq + (e & 1) > lim[e >> 1]) s[i][e] = -INFINITY;
    }
    float mx[2] = {mrow[0], mrow[1]};
#pragma unroll
    for (int i = 0; i < NB; i++) {
        mx[0] = fmaxf(mx[0], fmaxf(s[i][0], s[i][1]));
        mx[1] = fmaxf(mx[1], fmaxf(s[i][2], s[i][3]));
    }
    float ls[2] = {0.0f, 0.0f};
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        mx[rr] = fmaxf(mx[rr], __shfl_xor_sync(0xffffffffu, mx[rr], 1));
        mx[rr] = fmaxf(mx[rr], __shfl_xor_sync(0xffffffffu, mx[rr], 2));
        corr[rr] = exp2f((mrow[rr] - mx[rr]) * sl2);
        mrow[rr] = mx[rr];
    }
#pragma unroll
    for (int i = 0; i < NB; i++) {
        uint32_t lo = fa_pack(exp2f((s[i][0] - mx[0]) * sl2), exp2f((s[i][1] - mx[0]) * sl2));
        uint32_t hi = fa_pack(exp2f((s[i][2] - mx[1]) * sl2), exp2f((s[i][3] - mx[1]) * sl2));
        ls[0] += fa_lo(lo) + fa_hi(lo);
        ls[1] += fa_lo(hi) + fa_hi(hi);
        pa[i >> 1][(i & 1) * 2] = lo;
        pa[i >> 1][(i & 1) * 2 + 1] = hi;
    }
    lrow[0] = lrow[0] * corr[0] + ls[0];
    lrow[1] = lrow[1] * corr[1] + ls[1];
}

// o = bf16(rb(o / l) * sigmoid(gate)) of a thread's two rows (rows rg0 and rg0 + 8 of the block's
// (token, head) rows; those past nrows are not written), D columns (at most 8 NI), two adjacent
// columns a store; l is the quad's sum of the partial row sums.
template <int NI>
static __device__ __forceinline__ void fa_store_rows(const float (*oacc)[4], const float *lrow, int rg0, int nrows,
                                                     int group, int kvh, attn_dims d, int D, int tq, const float *qg,
                                                     uint16_t *o) {
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        float l = lrow[rr];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const int rg = rg0 + 8 * rr;
        if (rg >= nrows) continue;
        const int t = rg / group, h = kvh * group + rg % group;
        const float *gate = qg + ((long)t * d.hq + h) * 2 * D + D;
        uint16_t *orow = o + ((long)t * d.hq + h) * D;
#pragma unroll
        for (int i = 0; i < NI; i++) {
            if (i * 8 >= D) break;
            const int c = i * 8 + 2 * tq;
            float2 gv = *(const float2 *)(gate + c);
            uint32_t lo = lily_f32_to_bf16(rb(oacc[i][2 * rr] / l) * sigmoid_f(gv.x));
            uint32_t hi = lily_f32_to_bf16(rb(oacc[i][2 * rr + 1] / l) * sigmoid_f(gv.y));
            *(uint32_t *)(orow + c) = lo | (hi << 16);
        }
    }
}
