// attn_tc.cu: decode attention on the tensor cores, GQA-packed (LILY_CUDA_ATTN_TC): the same function
// as attn.cu's kernel (one query token, its heads over the bf16 KV cache [0, *pos], split-KV partials
// for attn_combine), for the real model's shapes (bf16 cache, D of 64, 128 or 256, a group of at most
// 8 query heads per KV head).
//
// Why: attn.cu's packed kernel reads every K/V row once for the 8 heads of its group, but takes each
// score with CUDA-core FMAs and a warp reduction per (position, head): ~40 shuffles and ~300 FMAs a
// position, so at long contexts it ran at ~1.3 TB/s, bound by issue, not bytes (docs/PERF.md). Here a
// warp takes 16 positions at a time with mma.sync m16n8k16, the 8 heads as the n8 columns:
//   S^T (16 keys x 8 heads) = K (16 x D, ldmatrix) . Q^T (D x 8, bf16 fragments kept in registers);
//   online softmax per head in fp32 (exp2, the 1/sqrt(D) scale folded in); P rounded to bf16 and
//   moved into the B operand's layout by movmatrix (a transpose of two 8x8 blocks in registers);
//   O^T (D x 8) += V^T (D x 16, ldmatrix.trans) . P^T (16 x 8).
// Rounding points as attn_flash.cu's prefill kernel: q in bf16 (the decode q holds bf16 values, so
// exactly), scores fp32, P in bf16 with the row sum l taken over the rounded P.
//
// Block (KV head, split): 4 consumer warps and 1 producer warp. The producer streams the split's rows
// into a ring of NST stages of 64 positions, K and V each as D/64 tensor-map boxes of 64 positions x
// 64 dims (8 KB, 128-byte swizzle, so ldmatrix's 8 row addresses fall in distinct banks), completing on
// the stage's full mbarrier; consumer warp w takes rows 16w..16w+15 of each stage and releases the stage
// on its empty mbarrier (every lane arrives: each lane's reads are released by its own arrive). At the
// end the 4 warps' (max, sum, output) are merged in a fixed order and written as attn.cu's partials, so
// attn_combine / attn_combine_par finish it unchanged. A first version copied each 512-byte row by a
// bulk copy of its own into padded rows: 128 copies a stage held the stream to ~2 TB/s (docs/PERF.md).
//
// Before the wait on the previous kernel (PDL): the producer reads *pos and streams every stage. The
// rows below *pos and the position were written at least two kernels earlier (the position by the
// last step's token select or a host copy, the rows by earlier steps), and a kernel starts only after
// its predecessor triggered, which it does after its own wait, i.e. after the kernel before it
// completed. The row at *pos is appended by the kernel just before: the box that holds it may have
// been read before that write, so the consumer warp whose tile holds it copies it again from memory
// after its wait. Rows past the split in a stage hold other positions or garbage: their scores are
// masked and their V rows zeroed (0 x NaN would not be 0).
#include <cuda.h>         // CUtensorMap
#include <cudaTypedefs.h> // PFN_cuTensorMapEncodeTiled

#include "cuda_common.cuh"
#include "kernels.cuh"
#include "qgemm_wg.cuh" // mbarrier and tensor-map copy wrappers

#define TC_CWARPS 4                      // consumer warps
#define TC_THREADS (32 * (TC_CWARPS + 1)) // + the producer warp
#define TC_ROWS (16 * TC_CWARPS)         // positions a stage
#define TC_NST 3                         // stages in the ring

int lily_cuda_attn_tc = 1;

static __device__ __forceinline__ uint32_t tc_pack(float lo, float hi) {
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}
static __device__ __forceinline__ void tc_ldsm4(uint32_t *r, const void *p, bool trans) {
    if (trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(wg_smem(p)));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(wg_smem(p)));
}
static __device__ __forceinline__ uint32_t tc_trans(uint32_t x) {
    uint32_t d;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(x));
    return d;
}
static __device__ __forceinline__ void tc_mma(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A stage's K (then V): D / 64 boxes of 64 rows x 128 bytes; + 1 KB to align the ring to the swizzle atom.
static size_t tc_smem(int D) { return (size_t)TC_NST * 2 * TC_ROWS * D * sizeof(uint16_t) + 1024; }

// Byte offset of (row r, dims d..d+7) in a stage's K or V: box d / 64, row r's 128 bytes, its 16-byte
// chunk (d / 8) % 8 at position chunk ^ (r % 8) (CU_TENSOR_MAP_SWIZZLE_128B on a 1024-byte aligned box).
static __device__ __forceinline__ int tc_at(int r, int d) {
    return (d >> 6) * (TC_ROWS * 128) + r * 128 + ((((d >> 3) & 7) ^ (r & 7)) << 4);
}

// QK (LILY_CUDA_ATTN_QK): the q/k RMSNorm, partial RoPE and KV append of norm_rope.cu's qk_kernel done here,
// so the attention layer has one launch fewer. Before the wait, every block puts RoPE's factors of the new
// position (one dim a thread: each is a powf, a sinf and a cosf) and the two norms' gains into shared memory.
// Every consumer warp prepares its block's q heads from q_proj's output (qk.qg, [q | gate] per head) in the
// registers its Q^T fragments are built from: lane (g, t) holds dims 16 k + 2 t, +1, +8, +9 of head g, the 4
// lanes of a head add their squares by two shuffles, and with RoPE's half a multiple of 16 a rotated dim's
// partner (d +- half) sits in the same lane (attn_qk_takes). Meanwhile the producer warp of the block whose
// split holds the new position makes its k row (normed, rotated) and v row, writes both to the cache and
// packed into shared memory, and arrives on `rowbar`; the consumer warp whose tile holds the row waits there
// and puts it into its stage, where the unfused kernel copies the row the qk kernel appended. Same operations
// and roundings as qk_kernel; only the sum of squares is added in another order.
// QKH: RoPE's half / 16 (1, 2 or 4: rope_dim 32, 64 or 128), a template parameter so that a dim's partner is a
// register, not a local-memory index; 0 = without QK.

// ND = D / 16 (k steps of the scores, m tiles of the output).
template <int ND, int QKH>
__global__ void __launch_bounds__(TC_THREADS, 1)
    attn_tc_kernel(attn_dims d, const float *q, const uint16_t *kc, const uint16_t *vc, float *part, const int *posp,
                   int nsplit, const __grid_constant__ CUtensorMap tmk, const __grid_constant__ CUtensorMap tmv, attn_qk_in qk) {
    constexpr int D = ND * 16, SB = TC_ROWS * D * 2; // bytes of a stage's K (or V)
    constexpr bool QK = QKH > 0;
    static_assert(2 * QKH <= ND, "RoPE's dims within the head");
    static_assert(TC_CWARPS * 8 * D * 4 <= TC_NST * 2 * SB, "the merge's outputs overlay the ring");
    extern __shared__ __align__(128) unsigned char tc_raw[];
    unsigned char *ring = (unsigned char *)(((uintptr_t)tc_raw + 1023) & ~(uintptr_t)1023); // [NST][K, V]
    __shared__ __align__(8) uint64_t full[TC_NST], empty[TC_NST];
    __shared__ float wm[TC_CWARPS][8], wl[TC_CWARPS][8];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    const int group = d.hq / d.hkv, kvh = blockIdx.x, split = blockIdx.y, h0 = kvh * group;
    const int len = *posp + 1; // before the wait: see the file's note
    const int chunk = (len + nsplit - 1) / nsplit;
    const int t0 = split * chunk, t1 = min(len, t0 + chunk);
    const int nst = t1 > t0 ? (t1 - t0 + TC_ROWS - 1) / TC_ROWS : 0;
    // QK, before the wait (the position and the weights do not depend on the previous kernel): RoPE's factors
    // of dims i < half (dim i + half shares them) and the q and k norms' gains.
    const int half = d.rope_dim / 2;
    constexpr int QD = QK ? D : 1, QH = QK ? 16 * QKH : 1; // QH: RoPE's half
    __shared__ float rfc[QH], rfs[QH], qn[QD], kn[QD];
    __shared__ float kscr[2][QD];                  // QK: the new position's normed k row, then rotated
    __shared__ __align__(16) uint4 rowst[QK ? D / 4 : 1]; // QK: that k row and its v row, packed bf16 (D / 8 chunks each)
    __shared__ __align__(8) uint64_t rowbar;
    const bool row_here = QK && t0 <= len - 1 && len - 1 < t1; // this block's split holds the new position
    if (QK) {
        for (int i = tid; i < half; i += TC_THREADS) rope_factors(d, len - 1, i, rfc[i], rfs[i]);
        for (int i = tid; i < D; i += TC_THREADS) qn[i] = __ldg(qk.q_norm + i), kn[i] = __ldg(qk.k_norm + i);
    }
    if (tid == 0) {
        for (int s = 0; s < TC_NST; s++) mb_init(&full[s], 1), mb_init(&empty[s], 32 * TC_CWARPS);
        if (QK) mb_init(&rowbar, 32);
        mb_init_fence();
    }
    __syncthreads();
    const float sl2 = rsqrtf((float)D) * 1.4426950408889634f; // exp(x / sqrt(D)) = exp2(x * sl2)
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, o[ND][4];
#pragma unroll
    for (int i = 0; i < ND; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;

    if (warp == TC_CWARPS) { // the producer: one lane requests each stage's 2 x D/64 boxes
        auto issue = [&](int s) {
            const int slot = s % TC_NST, row = kvh * d.max_ctx + t0 + s * TC_ROWS;
            if (s >= TC_NST) mb_wait(&empty[slot], (s / TC_NST - 1) & 1);
            mb_expect_tx(&full[slot], 2 * SB);
            unsigned char *st = ring + slot * 2 * SB;
            for (int b = 0; b < D / 64; b++) {
                tma_g2s_2d(st + b * TC_ROWS * 128, &tmk, 64 * b, row, &full[slot]);
                tma_g2s_2d(st + SB + b * TC_ROWS * 128, &tmv, 64 * b, row, &full[slot]);
            }
        };
        const int nfirst = QK ? min(nst, TC_NST) : nst; // QK: the stages whose slots are free, then the row
        if (lane == 0)
            for (int s = 0; s < nfirst; s++) issue(s);
        if (QK && row_here) { // QK: the new position's k row (qk_kernel's k path) and v row, while the consumers make q
            __syncwarp();
            pdl_wait(); // k and v come from the kernel just before
            const float *kx = qk.k + (long)kvh * D, *vx = qk.v + (long)kvh * D;
            const long at = ((long)kvh * d.max_ctx + len - 1) * D;
            float ss = 0.0f;
            for (int i = lane; i < D; i += 32) ss += kx[i] * kx[i];
            const float rr = rsqrtf(warp_sum(ss) / D + d.eps);
            for (int i = lane; i < D; i += 32) kscr[0][i] = rb(kx[i] * rr * kn[i]);
            __syncwarp();
            for (int i = lane; i < D; i += 32) {
                const int fi = i < half ? i : i - half;
                kscr[1][i] = i < d.rope_dim ? rope_rotate(kscr[0], i, half, rfc[fi], rfs[fi]) : kscr[0][i];
            }
            __syncwarp();
            for (int c = lane; c < 2 * (D / 8); c += 32) {
                const int v = c >= D / 8, dd = 8 * (c - v * (D / 8));
                const float *src = v ? vx + dd : kscr[1] + dd;
                uint4 w;
                w.x = tc_pack(src[0], src[1]), w.y = tc_pack(src[2], src[3]);
                w.z = tc_pack(src[4], src[5]), w.w = tc_pack(src[6], src[7]);
                rowst[c] = w;
                *(uint4 *)((uint16_t *)(v ? vc : kc) + at + dd) = w; // the cache, written here (QK)
            }
            mb_arrive(&rowbar); // every lane: each releases its own stores of rowst
        }
        if (QK) {
            __syncwarp();
            if (lane == 0)
                for (int s = nfirst; s < nst; s++) issue(s);
        }
    } else { // the consumers
        pdl_wait(); // q comes from the kernel just before
        // Q^T's B fragments: head g (zero past the group), dims 16 ks + 2t, +1 and 16 ks + 8 + 2t, +1.
        uint32_t qf[ND][2];
        if (QK) { // from q_proj's output: RMSNorm over the head's D dims (its 4 lanes), then RoPE in registers
            float x[ND][4], ss = 0.0f;
            const float *qh = qk.qg + (long)(h0 + (g < group ? g : 0)) * 2 * D;
#pragma unroll
            for (int k = 0; k < ND; k++) {
                const float2 a = *(const float2 *)(qh + 16 * k + 2 * t), b = *(const float2 *)(qh + 16 * k + 8 + 2 * t);
                x[k][0] = a.x, x[k][1] = a.y, x[k][2] = b.x, x[k][3] = b.y;
            }
#pragma unroll
            for (int k = 0; k < ND; k++)
#pragma unroll
                for (int j = 0; j < 4; j++) ss += x[k][j] * x[k][j];
            ss += __shfl_xor_sync(0xffffffffu, ss, 1);
            ss += __shfl_xor_sync(0xffffffffu, ss, 2);
            const float r = rsqrtf(ss / D + d.eps);
#pragma unroll
            for (int k = 0; k < ND; k++)
#pragma unroll
                for (int j = 0; j < 4; j++) x[k][j] = rb(x[k][j] * r * qn[16 * k + 2 * t + (j & 1) + 8 * (j >> 1)]);
            // rope_rotate: dim i < half: rb(rb(y_i c) - rb(y_{i+half} s)); half <= i < 2 half: rb(rb(y_i c) + rb(y_{i-half} s)).
#pragma unroll
            for (int k = 0; k < (QK ? QKH : 0); k++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int i = 16 * k + 2 * t + (j & 1) + 8 * (j >> 1);
                    const float lo = x[k][j], hi = x[k + QKH][j], c = rfc[i], sn = rfs[i];
                    x[k][j] = rb(rb(lo * c) - rb(hi * sn));
                    x[k + QKH][j] = rb(rb(hi * c) + rb(lo * sn));
                }
#pragma unroll
            for (int k = 0; k < ND; k++) {
                qf[k][0] = g < group ? tc_pack(x[k][0], x[k][1]) : 0u;
                qf[k][1] = g < group ? tc_pack(x[k][2], x[k][3]) : 0u;
            }
        } else {
            const float *qh = q + (long)(h0 + g) * D;
#pragma unroll
            for (int k = 0; k < ND; k++) {
                if (g < group) {
                    const float2 a = *(const float2 *)(qh + 16 * k + 2 * t), b = *(const float2 *)(qh + 16 * k + 8 + 2 * t);
                    qf[k][0] = tc_pack(a.x, a.y), qf[k][1] = tc_pack(b.x, b.y);
                } else {
                    qf[k][0] = qf[k][1] = 0u;
                }
            }
        }
        // ldmatrix row addresses: K (non-transposed A: rows 0-7 / 8-15, dims +0 / +8), V (transposed
        // A: keys 0-7 / 8-15, dims +0 / +8).
        const int krow = (lane & 7) + 8 * ((lane >> 3) & 1), kcol = 8 * (lane >> 4);
        const int vrow = (lane & 7) + 8 * (lane >> 4), vcol = 8 * ((lane >> 3) & 1);
        for (int s = 0; s < nst; s++) {
            const int slot = s % TC_NST, r0 = t0 + s * TC_ROWS, kb0 = r0 + 16 * warp, nv = min(16, t1 - kb0);
            mb_wait(&full[slot], (s / TC_NST) & 1);
            if (nv > 0) {
                unsigned char *ks = ring + slot * 2 * SB, *vs = ks + SB;
                const int w0 = 16 * warp; // the warp's first row in the stage
                if (kb0 <= len - 1 && len - 1 < kb0 + nv) { // the row the previous kernel appended, again
                    const int r = len - 1 - r0;
                    const long at = ((long)kvh * d.max_ctx + len - 1) * D;
                    if (QK) { // QK: the row the producer warp made (rowst)
                        mb_wait(&rowbar, 0);
                        for (int c = lane; c < 2 * (D / 8); c += 32) {
                            const int v = c >= D / 8, dd = 8 * (c - v * (D / 8));
                            *(uint4 *)((v ? vs : ks) + tc_at(r, dd)) = rowst[c];
                        }
                    } else {
                        for (int c = lane; c < 2 * (D / 8); c += 32) {
                            const int v = c >= D / 8, dd = 8 * (c - v * (D / 8));
                            *(uint4 *)((v ? vs : ks) + tc_at(r, dd)) = *(const uint4 *)((v ? vc : kc) + at + dd);
                        }
                    }
                }
                if (nv < 16) // rows past the split: zero V (0 x garbage could be NaN); K's scores are masked
                    for (int i = lane; i < (16 - nv) * (D / 8); i += 32)
                        *(uint4 *)(vs + tc_at(w0 + nv + i / (D / 8), 8 * (i % (D / 8)))) = make_uint4(0, 0, 0, 0);
                __syncwarp();
                float sa[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (int k = 0; k < ND; k++) { // two accumulators: half the dependent chain
                    uint32_t a[4];
                    tc_ldsm4(a, ks + tc_at(w0 + krow, 16 * k + kcol), false);
                    tc_mma(k & 1 ? sb : sa, a, qf[k][0], qf[k][1]);
                }
                float sc[4];
#pragma unroll
                for (int e = 0; e < 4; e++) sc[e] = sa[e] + sb[e];
                if (g >= nv) sc[0] = sc[1] = -INFINITY; // keys g and g + 8 of the tile
                if (g + 8 >= nv) sc[2] = sc[3] = -INFINITY;
                float corr[2];
                uint32_t pk[2]; // P (bf16) of keys g / g + 8, heads 2t, 2t + 1
                float p[4];
#pragma unroll
                for (int e = 0; e < 2; e++) { // head 2t + e: keys g (sc[e]) and g + 8 (sc[2 + e])
                    float mx = fmaxf(sc[e], sc[2 + e]);
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
                    const float mn = fmaxf(m[e], mx), mu = mn == -INFINITY ? 0.0f : mn;
                    corr[e] = exp2f((m[e] - mu) * sl2);
                    m[e] = mn;
                    p[e] = exp2f((sc[e] - mu) * sl2), p[2 + e] = exp2f((sc[2 + e] - mu) * sl2);
                }
                pk[0] = tc_pack(p[0], p[1]), pk[1] = tc_pack(p[2], p[3]);
#pragma unroll
                for (int e = 0; e < 2; e++) l[e] = l[e] * corr[e] + (bf16_elem(pk[0], e) + bf16_elem(pk[1], e));
                const uint32_t b0 = tc_trans(pk[0]), b1 = tc_trans(pk[1]); // P^T (keys x heads) fragments
#pragma unroll
                for (int i = 0; i < ND; i++) {
                    o[i][0] *= corr[0], o[i][1] *= corr[1], o[i][2] *= corr[0], o[i][3] *= corr[1];
                    uint32_t a[4];
                    tc_ldsm4(a, vs + tc_at(w0 + vrow, 16 * i + vcol), true);
                    tc_mma(o[i], a, b0, b1);
                }
            }
            mb_arrive(&empty[slot]);
        }
        // The warp's row sums: its lanes of the same t hold partial sums of the same heads.
#pragma unroll
        for (int e = 0; e < 2; e++) {
            l[e] += __shfl_xor_sync(0xffffffffu, l[e], 4);
            l[e] += __shfl_xor_sync(0xffffffffu, l[e], 8);
            l[e] += __shfl_xor_sync(0xffffffffu, l[e], 16);
        }
        if (g == 0) wm[warp][2 * t] = m[0], wm[warp][2 * t + 1] = m[1], wl[warp][2 * t] = l[0], wl[warp][2 * t + 1] = l[1];
    }
    pdl_trigger();
    __syncthreads(); // every consumer is past its last read of the ring: it now holds the warps' outputs
    float *ob = (float *)ring; // [warp][head][D], each warp's output scaled to the block's maximum
    if (warp < TC_CWARPS) {
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int h = 2 * t + e;
            float M = -INFINITY;
            for (int w = 0; w < TC_CWARPS; w++) M = fmaxf(M, wm[w][h]);
            const float f = m[e] == -INFINITY ? 0.0f : exp2f((m[e] - M) * sl2);
#pragma unroll
            for (int i = 0; i < ND; i++) {
                ob[(warp * 8 + h) * D + 16 * i + g] = f * o[i][e];
                ob[(warp * 8 + h) * D + 16 * i + g + 8] = f * o[i][2 + e];
            }
        }
    }
    __syncthreads();
    // Partials as attn.cu writes them: (max, sum, unnormalised output) per head, the max in the units
    // of the scaled score (attn_combine takes e^(m_s - M)).
    for (int i = tid; i < group * (D + 2); i += TC_THREADS) {
        const int hh = i / (D + 2), j = i % (D + 2);
        float M = -INFINITY;
        for (int w = 0; w < TC_CWARPS; w++) M = fmaxf(M, wm[w][hh]);
        float v;
        if (j == 0) {
            v = M == -INFINITY ? M : M * rsqrtf((float)D);
        } else if (j == 1) {
            v = 0.0f;
            for (int w = 0; w < TC_CWARPS; w++)
                if (wm[w][hh] != -INFINITY) v += wl[w][hh] * exp2f((wm[w][hh] - M) * sl2);
        } else {
            v = 0.0f;
            for (int w = 0; w < TC_CWARPS; w++) v += ob[(w * 8 + hh) * D + j - 2];
        }
        part[((long)(h0 + hh) * nsplit + split) * (D + 2) + j] = v;
    }
}

bool attn_tc_takes(attn_dims d) {
    return lily_cuda_attn_tc && !d.kv_f32 && d.hkv > 0 && d.hq % d.hkv == 0 && d.hq / d.hkv <= 8 &&
           (d.d == 64 || d.d == 128 || d.d == 256) && lily_tmap_encoder();
}

// The fused q/k prologue: RoPE's half a whole number of 16-dim steps (a rotated dim's partner in the same
// lane), 1, 2 or 4 of them (QKH), within the head.
bool attn_qk_takes(attn_dims d) {
    const int h = d.rope_dim / 32;
    return attn_tc_takes(d) && d.rope_dim % 32 == 0 && (h == 1 || h == 2 || h == 4) && d.rope_dim <= d.d;
}

// The cache of one layer as a 2-D tensor (D dims inner, hkv * max_ctx rows) in boxes of 64 x 64, with
// the 128-byte swizzle; rows past the end are zero-filled.
static bool tc_tmap(CUtensorMap *tm, const void *cache, attn_dims d) {
    PFN_cuTensorMapEncodeTiled_v12000 enc = (PFN_cuTensorMapEncodeTiled_v12000)lily_tmap_encoder();
    const cuuint64_t dims[2] = {(cuuint64_t)d.d, (cuuint64_t)d.hkv * d.max_ctx}, strides[1] = {(cuuint64_t)d.d * 2};
    const cuuint32_t box[2] = {64, TC_ROWS}, es[2] = {1, 1};
    return enc && ((uintptr_t)cache & 15) == 0 &&
           enc(tm, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)cache, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <int ND, int QKH>
static void tc_launch(attn_dims d, const float *q, const void *kc, const void *vc, float *part, const int *pos,
                      int nsplit, const CUtensorMap &tk, const CUtensorMap &tv, const attn_qk_in &qk, cudaStream_t st) {
    static bool attr = false;
    if (!attr) {
        cudaFuncSetAttribute(attn_tc_kernel<ND, QKH>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tc_smem(ND * 16));
        attr = true;
    }
    launch_k(attn_tc_kernel<ND, QKH>, dim3(d.hkv, nsplit), TC_THREADS, tc_smem(ND * 16), st, d, q, (const uint16_t *)kc,
             (const uint16_t *)vc, part, pos, nsplit, tk, tv, qk);
}

bool attn_tc_partials(attn_dims d, const float *q, const void *kc, const void *vc, float *part, const int *pos,
                      int nsplit, cudaStream_t st, const attn_qk_in *qk) {
    CUtensorMap tk, tv;
    if ((qk && !attn_qk_takes(d)) || !tc_tmap(&tk, kc, d) || !tc_tmap(&tv, vc, d)) return false;
    attn_qk_in none;
    memset(&none, 0, sizeof none);
    const attn_qk_in &a = qk ? *qk : none;
    const int h = qk ? d.rope_dim / 32 : 0;
#define TC_L(ND) (h == 4 ? tc_launch<ND, ND >= 8 ? 4 : 0>(d, q, kc, vc, part, pos, nsplit, tk, tv, a, st)     \
                  : h == 2 ? tc_launch<ND, 2>(d, q, kc, vc, part, pos, nsplit, tk, tv, a, st)              \
                  : h == 1 ? tc_launch<ND, 1>(d, q, kc, vc, part, pos, nsplit, tk, tv, a, st)              \
                           : tc_launch<ND, 0>(d, q, kc, vc, part, pos, nsplit, tk, tv, a, st))
    if (d.d == 256) TC_L(16);
    else if (d.d == 128) TC_L(8);
    else TC_L(4); // 64 (attn_tc_takes)
#undef TC_L
    return true;
}
