// gemv.cuh: the device building blocks of gemv.cu's kernels, shared with dev/persist (a persistent
// decode-kernel prototype that feeds the same tile math from a shared-memory ring): the prologue
// that prepares x (plain, RMS-normed, gated-normed) in shared memory, the row epilogue, and gemv2's
// tensor-core tile with its x split. The kernels and launch code stay in gemv.cu.
#pragma once

#include "cuda_common.cuh" // includes kernels.cuh (gv_args, gv_seg)

#define GV_THREADS 256
#define GV_WARPS (GV_THREADS / 32)

// Counter-based hash for sampling noise (no state on the GPU to keep in sync).
__device__ __forceinline__ float hash_uniform(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t h = a * 0x9E3779B1u ^ (b + 0x7F4A7C15u) * 0x85EBCA77u ^ c * 0xC2B2AE3Du;
    h ^= h >> 15; h *= 0x2C1B3C6Du; h ^= h >> 12; h *= 0x297A2D39u; h ^= h >> 15;
    return ((h >> 8) + 0.5f) * (1.0f / 16777216.0f); // (0, 1)
}

// Register path of the prologue: thread t owns columns 8 (t + GV_THREADS j) .. +7, j < PRO_NJ. All
// its loads (x, the gain, z) are issued before any arithmetic: one round trip to L2 instead of one
// per pass or per head, which the chain benchmark showed dominating the small GEMVs (docs/PERF.md).
#define PRO_NJ 2
__host__ __device__ __forceinline__ bool gv_pro_fast(const gv_args &a) {
    const int gl = a.ghd / 8; // lanes per gated-norm head
    const uintptr_t al = (uintptr_t)a.x | (uintptr_t)a.norm_w | (uintptr_t)a.gz | (uintptr_t)a.x_out | (uintptr_t)a.acc_x |
                         (uintptr_t)a.x_res_out;
    return a.cols % 16 == 0 && a.cols <= 8 * GV_THREADS * PRO_NJ && (al & 15) == 0 &&
           (a.pro != PRO_GATED || (a.ghd % 8 == 0 && gl <= 32 && (gl & (gl - 1)) == 0 && a.cols % a.ghd == 0));
}
// Columns c0..c0+7 of x (in v) with the fixed-point sum acc folded in, its flag aside: one thread a block
// reads the flags (gv_acc_flag) and makes the block's sum of squares NaN, so the whole normed input is
// NaN. Every thread reading the flag word hit one L2 line ~3,000 times a launch, which cost each fold
// ~3 us (docs/PERF.md, twenty-ninth session).
__device__ __forceinline__ void gv_fold8(float *v, const unsigned long long *acc, int c0) {
    const ulonglong2 *q = (const ulonglong2 *)(acc + c0);
    const ulonglong2 q0 = q[0], q1 = q[1], q2 = q[2], q3 = q[3];
    const unsigned long long qs[8] = {q0.x, q0.y, q1.x, q1.y, q2.x, q2.y, q3.x, q3.y};
#pragma unroll
    for (int k = 0; k < 8; k++) v[k] = mf_fold(v[k], qs[k], 0ull);
}
// The flag of the launch's sum (thread 0 of a block asks; PRO_RMSNORM).
__device__ __forceinline__ bool gv_acc_flag(const gv_args &a) { return a.acc_x && a.acc_x[a.cols]; }
// CG: through L2 only (ld.global.cg), for inputs written earlier in the same launch by other blocks
// (moe_fused's front phases), which this SM's L1 must not serve.
template <bool CG = false> __device__ __forceinline__ void ld8(float *v, const float *p) {
    const float4 u = CG ? __ldcg((const float4 *)p) : *(const float4 *)p;
    const float4 w = CG ? __ldcg((const float4 *)(p + 4)) : *(const float4 *)(p + 4);
    v[0] = u.x, v[1] = u.y, v[2] = u.z, v[3] = u.w, v[4] = w.x, v[5] = w.y, v[6] = w.z, v[7] = w.w;
}
// WIDE: the block is bigger than GV_THREADS (dev/persist's wide kernel); the first GV_THREADS threads
// do the work and the rest only join the barriers, contributing zeros to block_sum, which leaves its
// result bitwise the same. CG: x and z are read with ld8<true> (written by other blocks of this launch).
// SPLIT = HPG (gemv2 without lane-path segments): the thread splits its prepared columns into gemv2's digits
// itself (gv2_split8 on the values gv2_split_x would read back from xs: the same bits), so the split needs no
// pass of its own and no barrier, and xs and xsum stay unwritten (only the lane path reads them).
template <int HPG> __device__ __forceinline__ void gv2_split8(const float *x, int i, bool ok, uint4 *bsm, float *xsg);
template <bool WIDE = false, bool CG = false, int SPLIT = 0>
__device__ __forceinline__ void gv_prologue_regs(const gv_args &a, float *xs, float *xsum, float *red,
                                                 uint4 *bsm = nullptr, uint4 *zero4 = nullptr, float *xsg = nullptr) {
    const int cols = a.cols, tid = threadIdx.x;
    const bool act = !WIDE || tid < GV_THREADS;
    // The flag word of the launch's sum, requested first and tested only at the norm: tested right after its
    // load (a bool), it held thread 0's warp there for an L2 round trip before the warp's x loads were issued,
    // and the block at the norm's barrier with it (SASS, thirty-eighth session).
    unsigned long long fw = 0ull;
    if (tid == 0 && a.pro == PRO_RMSNORM && a.acc_x) fw = a.acc_x[cols];
    if (SPLIT && tid == 0) *zero4 = make_uint4(0, 0, 0, 0);
    float v[PRO_NJ][8], g[PRO_NJ][8], zz[PRO_NJ][8];
#pragma unroll
    for (int j = 0; j < PRO_NJ; j++) {
        const int c0 = 8 * (tid + GV_THREADS * j);
#pragma unroll
        for (int k = 0; k < 8; k++) v[j][k] = g[j][k] = zz[j][k] = 0.0f;
        if (!act || c0 >= cols) continue;
        ld8<CG>(v[j], a.x + c0);
        if (a.pro == PRO_RMSNORM) ld8(g[j], a.norm_w + c0);
        // The fixed-point sum folded in (LILY_CUDA_MOE_ACC, LILY_CUDA_GDN_OUT), then x as folded kept.
        if (a.pro == PRO_RMSNORM && a.acc_x) gv_fold8(v[j], a.acc_x, c0);
        if (a.pro == PRO_RMSNORM && a.x_res_out && blockIdx.x == 0) {
            *(float4 *)(a.x_res_out + c0) = make_float4(v[j][0], v[j][1], v[j][2], v[j][3]);
            *(float4 *)(a.x_res_out + c0 + 4) = make_float4(v[j][4], v[j][5], v[j][6], v[j][7]);
        }
        if (a.pro == PRO_GATED) ld8(g[j], a.norm_w + c0 % a.ghd), ld8<CG>(zz[j], a.gz + c0);
    }
    if (a.pro == PRO_RMSNORM) {
        float ss = 0.0f;
#pragma unroll
        for (int j = 0; j < PRO_NJ; j++)
#pragma unroll
            for (int k = 0; k < 8; k++) ss += v[j][k] * v[j][k];
        if (fw) ss = __int_as_float(0x7fffffff);
        const float r = rsqrtf(block_sum(ss, red) / cols + a.eps);
#pragma unroll
        for (int j = 0; j < PRO_NJ; j++)
#pragma unroll
            for (int k = 0; k < 8; k++) v[j][k] = rb(v[j][k] * r * g[j][k]);
    } else if (a.pro == PRO_GATED) {
        // Per head of ghd values, i.e. ghd / 8 adjacent lanes.
#pragma unroll
        for (int j = 0; j < PRO_NJ; j++) gated_norm8(v[j], g[j], zz[j], a.ghd / 8, a.ghd, a.eps);
    }
#pragma unroll
    for (int j = 0; j < PRO_NJ; j++) {
        const int c0 = 8 * (tid + GV_THREADS * j);
        float s8 = 0.0f;
#pragma unroll
        for (int k = 0; k < 8; k++) s8 += v[j][k];
        const float s16 = s8 + __shfl_xor_sync(0xffffffffu, s8, 1); // columns c0 & ~15 .. +15
        if constexpr (SPLIT != 0)
            if (GV_THREADS * j * 8 < cols) // block-uniform: the group's lanes all split (shuffles)
                gv2_split8<SPLIT>(v[j], tid + GV_THREADS * j, act && c0 < cols, bsm, xsg);
        if (!act || c0 >= cols) continue;
        if (SPLIT == 0) {
            float *d = xs + xs_index(c0); // 8 columns never straddle a padded run of 32
            *(float4 *)d = make_float4(v[j][0], v[j][1], v[j][2], v[j][3]);
            *(float4 *)(d + 4) = make_float4(v[j][4], v[j][5], v[j][6], v[j][7]);
            if ((tid & 1) == 0) xsum[c0 / 16] = s16;
        }
        if (a.x_out && blockIdx.x == 0) {
            *(float4 *)(a.x_out + c0) = make_float4(v[j][0], v[j][1], v[j][2], v[j][3]);
            *(float4 *)(a.x_out + c0 + 4) = make_float4(v[j][4], v[j][5], v[j][6], v[j][7]);
        }
    }
    __syncthreads();
}

// Input column c of an RMS-normed launch: x[c], with the MoE's fixed-point sum folded in when acc_x is set.
__device__ __forceinline__ float gv_x(const gv_args &a, int c) { // the flags: gv_acc_flag
    float v = a.x[c];
    if (a.acc_x) v = mf_fold(v, a.acc_x[c], 0ull);
    return v;
}

// Prologue shared by both kernels: x (plain, RMS-normed or gated-normed) into padded shared memory,
// its 16-value sums, and the prepared x to a.x_out from block 0. Ends with a barrier. The loops
// below serve the shapes the register path does not take (wider rows, odd head sizes).
// regs: the caller may take the register path (gemv2 only: the first kernel's sums cancel
// dot - sum(x) in fp32, and a different summation order of sum(x) moved an fp32-activation fixture
// past its tolerance, docs/PERF.md).
__device__ __forceinline__ void gv_prologue(const gv_args &a, float *xs, float *xsum, float *red, bool regs) {
    if (regs && a.pro_regs && gv_pro_fast(a)) return gv_prologue_regs(a, xs, xsum, red);
    const int cols = a.cols, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (a.pro == PRO_RMSNORM) {
        float ss = 0.0f;
        for (int c = tid; c < cols; c += GV_THREADS) {
            const float v = gv_x(a, c);
            ss += v * v;
        }
        if (tid == 0 && gv_acc_flag(a)) ss = __int_as_float(0x7fffffff);
        float r = rsqrtf(block_sum(ss, red) / cols + a.eps);
        for (int c = tid; c < cols; c += GV_THREADS) {
            const float v = gv_x(a, c);
            xs[xs_index(c)] = rb(v * r * a.norm_w[c]);
            if (a.x_res_out && blockIdx.x == 0) a.x_res_out[c] = v;
        }
    } else if (a.pro == PRO_GATED) {
        // Per head of ghd values: rb(rb(w * rb(x * rms)) * silu(z)) (spec §2.1b). One warp per head.
        int nh = cols / a.ghd;
        for (int h = warp; h < nh; h += GV_WARPS) {
            const float *xh = a.x + h * a.ghd;
            float ss = 0.0f;
            for (int d = lane; d < a.ghd; d += 32) ss += xh[d] * xh[d];
            float r = rsqrtf(warp_sum(ss) / a.ghd + a.eps);
            for (int d = lane; d < a.ghd; d += 32) {
                float t = rb(a.norm_w[d] * rb(xh[d] * r));
                xs[xs_index(h * a.ghd + d)] = rb(t * silu_f(a.gz[h * a.ghd + d]));
            }
        }
    } else {
        for (int c = tid; c < cols; c += GV_THREADS) xs[xs_index(c)] = a.x[c];
    }
    __syncthreads();
    for (int i = tid; i < cols / 16; i += GV_THREADS) {
        float t = 0.0f;
#pragma unroll
        for (int j = 0; j < 16; j++) t += xs[xs_index(i * 16 + j)];
        xsum[i] = t;
    }
    if (a.x_out && blockIdx.x == 0)
        for (int c = tid; c < cols; c += GV_THREADS) a.x_out[c] = xs[xs_index(c)];
    __syncthreads();
}

// Epilogue of one finished row (fp32 dot product acc).
__device__ __forceinline__ void gv_out(const gv_args &a, const gv_seg &s, int row, float acc, float &best,
                                       int &best_row) {
    if (a.epi == GV_STORE) {
        s.y[row] = rb(acc);
    } else if (a.epi == GV_RESID) {
        float r = s.res[row];
        if (a.acc_res) { // the MoE's fixed-point sum folded in, then zeroed for the layer's MoE
            r = mf_fold(r, a.acc_res[row], a.acc_res[s.m.rows]);
            a.acc_res[row] = 0ull;
        }
        s.y[row] = rb(r + rb(acc));
    } else {
        float v = acc;
        if (s.y) s.y[row] = v;
        if (a.nan_flag && !isfinite(v)) *a.nan_flag = 1;
        if (a.temp > 0.0f) // Gumbel-max: argmax(l/T + G) samples softmax(l/T) exactly
            v = v / a.temp - __logf(-__logf(hash_uniform(a.seed, (uint32_t)*a.pos, row)));
        if (v > best || (v == best && row < best_row)) best = v, best_row = row;
    }
}

// GV_LOGITS: the block's best (value, row) into a.amax[blockIdx.x]. Called by every thread.
__device__ __forceinline__ void gv_amax_finish(const gv_args &a, float best, int best_row, float2 *wbest) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, best, o);
        int orow = __shfl_xor_sync(0xffffffffu, best_row, o);
        if (ov > best || (ov == best && orow < best_row)) best = ov, best_row = orow;
    }
    if (lane == 0) wbest[warp] = make_float2(best, __int_as_float(best_row));
    __syncthreads();
    if (tid == 0) {
        float2 b = wbest[0];
        for (int w = 1; w < GV_WARPS; w++) {
            float2 o = wbest[w];
            if (o.x > b.x || (o.x == b.x && __float_as_int(o.y) < __float_as_int(b.y))) b = o;
        }
        a.amax[blockIdx.x] = b;
    }
}

// ---------------------------------------------------------------------------------------------
// The first kernel's row path (any format; gemv2 runs it for the segments it does not take): a
// group of lpr lanes owns RPW rows, each lane issues RPW x UNR independent 16-byte code loads before
// using any of them, and the group reduces with shuffles.
#define RPW 2 // rows per lane group
#define UNR 2 // chunks per lane per batch (4 measured no faster: docs/PERF.md)

template <int BITS>
__device__ __forceinline__ void gv_rows(const gv_seg &s, int tile, const float *xs,
                                        const float *xsum, int lane, int warp, float *acc) {
    const int lpr = s.lpr, gq = lane / lpr, sub = lane % lpr;
    const int groups_per_warp = 32 / lpr;
    const int r0 = (tile * GV_WARPS * groups_per_warp + warp * groups_per_warp + gq) * RPW;
    const int nchunk = s.m.cols * BITS / 128;
    const int cpg = s.m.group * BITS / 128; // chunks per group
    const int ng = s.m.cols / s.m.group;
    constexpr int V = 128 / BITS;
#pragma unroll
    for (int r = 0; r < RPW; r++) acc[r] = 0.0f;
    for (int c0 = sub; c0 < nchunk; c0 += lpr * UNR) {
        uint4 code[RPW][UNR];
        uint32_t sb[RPW][UNR];
#pragma unroll
        for (int r = 0; r < RPW; r++)
#pragma unroll
            for (int u = 0; u < UNR; u++) {
                int c = c0 + u * lpr, row = r0 + r;
                bool ok = c < nchunk && row < s.m.rows;
                code[r][u] = ok ? __ldg(s.m.codes + (long)row * nchunk + c) : make_uint4(0, 0, 0, 0);
                sb[r][u] = ok ? __ldg(s.m.sb + (long)row * ng + c / cpg) : 0u;
            }
#pragma unroll
        for (int u = 0; u < UNR; u++) {
            int c = c0 + u * lpr;
            if (c >= nchunk) break;
            const float *xp = xs + xs_index(c * V);
            float xsm = BITS == 4 ? xsum[2 * c] + xsum[2 * c + 1] : xsum[c];
#pragma unroll
            for (int r = 0; r < RPW; r++)
                acc[r] += chunk_apply(chunk_dot<BITS>(code[r][u], xp), xsm, sb[r][u], BITS);
        }
    }
    for (int o = lpr / 2; o > 0; o >>= 1)
#pragma unroll
        for (int r = 0; r < RPW; r++) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
}

// Any format (dense, odd bit widths or row lengths): a warp per RPW rows, lanes stride over columns.
__device__ __forceinline__ void gv_rows_generic(const gv_seg &s, int tile, const float *xs, int lane,
                                                int warp, float *acc) {
    const int r0 = (tile * GV_WARPS + warp) * RPW;
#pragma unroll
    for (int r = 0; r < RPW; r++) {
        acc[r] = 0.0f;
        if (r0 + r >= s.m.rows) continue;
        for (int c = lane; c < s.m.cols; c += 32) acc[r] += dq_get(s.m, r0 + r, c) * xs[xs_index(c)];
    }
#pragma unroll
    for (int r = 0; r < RPW; r++) acc[r] = warp_sum(acc[r]);
}

// Rows of one tile of segment s, and the L2 prefetch of a tile's weights (rows of a tile are
// contiguous, and so are their scales).
__device__ __forceinline__ int gv_tile_rows(const gv_seg &s) {
    return s.ks ? 16 * GV_WARPS / s.ks : GV_WARPS * (32 / s.lpr) * RPW;
}
__device__ __forceinline__ long gv_prefetch_tile(const gv_seg &s, int tile) {
    const int rpt = gv_tile_rows(s), r0 = tile * rpt, nr = min(rpt, s.m.rows - r0);
    const long rb_ = dq_row_bytes(s.m);
    prefetch_block((const char *)s.m.codes + r0 * rb_, nr * rb_);
    if (s.m.sb) prefetch_block(s.m.sb + (long)r0 * (s.m.cols / s.m.group), (long)nr * (s.m.cols / s.m.group) * 4);
    return nr * rb_;
}

// The weights do not depend on the previous kernel: start this block's towards L2 before waiting
// for it (rows of a tile are contiguous, and so are their scales). With the early trigger (mode 1)
// the wait spans the previous kernel's whole run, so all of the block's tiles go, up to GV_PF_BYTES
// (lm_head's 280 MB would only evict each other); otherwise (mode 2 too) the first tile. Returns the
// launch's tile count.
#define GV_PF_BYTES (64 * 1024)
__device__ __forceinline__ int gv_prefetch_first(const gv_args &a) {
    int total = 0;
    for (int s = 0; s < a.nseg; s++) total += a.seg[s].tiles;
    long budget = c_pdl_early == 1 ? GV_PF_BYTES : 1;
    for (int t = blockIdx.x; t < total && budget > 0; t += gridDim.x) {
        int si = 0, tile = t;
        while (tile >= a.seg[si].tiles) tile -= a.seg[si++].tiles;
        budget -= gv_prefetch_tile(a.seg[si], tile);
    }
    return total;
}

// One tile of the first kernel's path: each warp owns its rows, lanes split the columns.
__device__ __forceinline__ void gv_tile_lanes(const gv_args &a, const gv_seg &s, int tile, const float *xs,
                                              const float *xsum, int lane, int warp, float &best,
                                              int &best_row) {
    float acc[RPW];
    if (s.m.fmt != DQ_FAST)
        gv_rows_generic(s, tile, xs, lane, warp, acc);
    else if (s.m.bits == 4)
        gv_rows<4>(s, tile, xs, xsum, lane, warp, acc);
    else
        gv_rows<8>(s, tile, xs, xsum, lane, warp, acc);
    const int lpr = s.lpr, gq = lane / lpr;
    if (lane % lpr) return;
    const int r0 = (tile * GV_WARPS * (32 / lpr) + warp * (32 / lpr) + gq) * RPW;
#pragma unroll
    for (int r = 0; r < RPW; r++) {
        int row = r0 + r;
        if (row >= s.m.rows) break;
        gv_out(a, s, row, acc[r], best, best_row);
    }
}

// ---------------------------------------------------------------------------------------------
// gemv2: 4-bit rows on the tensor cores (LILY_CUDA_GEMV2=1). The first kernel spends ~3 issue slots
// per code (shift, mask|exponent, FMA) plus shared-memory loads of x: ~100 per 16-byte chunk, which
// caps it near 1.6 TB/s. Here a warp owns 16 rows and multiplies them with x by the integer MMA
// mma.m16n8k32 (s8 in, s32 accumulate). A code q goes in as it is (0..15, one byte): a word of 8
// codes is two A registers by one and, one shift and one and. (The bf16 form this replaced, q as the
// bf16 1 + q/16 and x in three bf16 parts, spent a shift and a lop3 a pair of codes, 2/3 of the
// loop's instructions, for twice the MMAs.)
//
// x goes in as integers: per group of G columns, with m = max |x| < 2^e, every x = N 2^(e-30) with N
// = round(x 2^(30-e)) an integer |N| <= 2^30, written in four balanced base-256 digits N = sum_j d_j
// 256^j, d_j in [-128, 127]: four int8 parts. The products and their sums over a group are exact
// integers (|sum| <= 128 * 15 * 128 < 2^24, so exact in fp32 too); per group
//   sum(x (s q + b)) = s sum_j 2^(e-30+8j) D_j + b sum(x),  D_j = sum(d_j q),
// where the only roundings are N's (2^-31 of the group's largest |x|, finer than fp32 carries x's
// own products) and the fp32 sums of the four terms and the groups. Tiny groups (m < 2^-63) are
// scaled as if m were 2^-63 (absolute error < 2^-93). A non-finite x does not reach the integers
// (its group's sum(x) carries it into the result).
//
// Layout of one warp step (128 columns): lane l = 4 g + p loads the 16-byte chunk p of rows g and
// g + 8 (codes of columns 32p..32p+31). Word v of a chunk (codes 8v..8v+7, code 8v+j in bits 4j..)
// gives A of one MMA: bytes {0,2,4,6} (w & 0x0f0f0f0f: k = 4p + i) and {1,3,5,7} ((w >> 4) &
// 0x0f0f0f0f: k = 16 + 4p + i). The MMA sums over k, i.e. over the four chunks of the quad, which
// may lie in different groups: so the B operand's 8 columns n = part * HPG + slot hold digit `part`
// of x only in the rows (k) of chunks whose group within the step is `slot`, zero elsewhere (HPG =
// 128 / group groups per step; for group 32 the 16 columns take two MMAs, for group 128 four of the
// 8 are used). Each accumulator column then is one (part, group) sum.
// Shared memory holds the digits in exactly the B fragment order: uint4 (step t, word pair vh, part
// j, chunk p) = {b0, b1} of word 2vh, then of word 2vh + 1, where b0 is digit j of columns 128t +
// 32p + 8v + {0,2,4,6} and b1 of + {1,3,5,7}; per group, xsg[4 group] = 2^(e-30) (part 0's weight)
// and xsg[4 group + 3] = sum(x).
// The 8 warps of a block split the columns of one 16-row tile into ks parts (ks = 8 for small
// matrices, 1 for lm_head) and add their partial sums through shared memory in a fixed order.
//
// d += A B on bf16, fp32 sums (the replaced form's MMA; dev/qgemm_sm's prototypes use it).
__device__ __forceinline__ void gv2_mma(float *d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                        uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// d += A B, A 16 x 32 of uint8 (codes: 4-bit ones or 8-bit ones) and B 32 x 8 of int8, exact s32 sums.
__device__ __forceinline__ void gv2_imma(int *d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// A weight load: from shared memory (a staged tile) or read-only from global memory.
template <typename T> __device__ __forceinline__ T gv2_ld(const T *p, bool sm) { return sm ? *p : __ldg(p); }

// SM: the tile's codes and scale words are in shared memory at cs / ss (from its first row).
// BITS = 8: 8-bit codes (the router). A lane's 32 columns of a step are then two 16-byte chunks, and
// words 2v, 2v + 1 (codes 8v..8v+7, one a byte) give the same A registers by two byte permutes:
// bytes {0,2} of each (columns 8v + {0,2,4,6}) and {1,3} (8v + {1,3,5,7}); the codes go in as uint8,
// a group's sums stay below 64 * 255 * 128 < 2^24. One step's loads in flight, not two (registers).
template <int HPG, bool SM, int BITS = 4>
__device__ __forceinline__ void gv2_tile(const gv_seg &s, int tile, const uint4 *bsm, const uint4 *zero4,
                                         const float *xsg, int lane, int warp, float &acc0, float &acc1,
                                         const uint4 *cs, const uint32_t *ss) {
    constexpr int NM = HPG == 4 ? 2 : 1; // MMAs per word (B columns needed: 4 parts x HPG slots)
    constexpr int CPL = BITS / 4, U = BITS == 4 ? 2 : 1; // chunks a lane's row step, steps loaded at once
    const int ks = s.ks, wr = warp / ks, kw = warp % ks;
    const int g = lane >> 2, p = lane & 3;
    const int rA = (tile * (GV_WARPS / ks) + wr) * 16 + g, rB = rA + 8;
    const bool okA = rA < s.m.rows, okB = rB < s.m.rows;
    const int steps = s.m.cols >> 7, nchunk = s.m.cols * BITS >> 7, ng = s.m.cols / (128 / HPG);
    const int h0 = HPG == 4 ? 2 * (p & 1) : 0; // first group slot of this lane's accumulator columns
    // 32-bit element offsets (rows * chunks < 2^31 for any real matrix): fewer registers than pointers.
    const uint4 *codes = SM ? cs : s.m.codes;
    const uint32_t *sbp = SM ? ss : s.m.sb;
    const int rl = SM ? rA - tile * (GV_WARPS / ks) * 16 : rA; // row in the array read
    const int cA = rl * nchunk + CPL * p, cB = cA + 8 * nchunk, sA = rl * ng + h0, sB = sA + 8 * ng;
    // B operand: this lane supplies column n = g + 8m, i.e. digit n / HPG of x where its chunk p lies
    // in group slot n % HPG, else zeros (a fixed zero vector, stride 0).
    const uint4 *bp[NM];
    int bst[NM];
#pragma unroll
    for (int m = 0; m < NM; m++) {
        const int n = g + 8 * m;
        const bool live = n / HPG < 4 && n % HPG == p * HPG / 4;
        bp[m] = live ? bsm + (n / HPG) * 4 + p : zero4;
        bst[m] = live ? 16 : 0;
    }
    // The weight 256^part of accumulator element e of MMA m (column n = 8m + 2p + e, part n / HPG).
    float pw[NM][2];
#pragma unroll
    for (int m = 0; m < NM; m++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int part = (8 * m + 2 * p + e) / HPG;
            pw[m][e] = __uint_as_float((uint32_t)(127 + 8 * (part & 3)) << 23);
        }
    acc0 = acc1 = 0.0f;
    const uint4 z4 = make_uint4(0, 0, 0, 0);
    for (int t0 = kw; t0 < steps; t0 += U * ks) {
        uint4 ca[U][CPL], cb[U][CPL];
        uint32_t sa[U][2], sbw[U][2];
#pragma unroll
        for (int u = 0; u < U; u++) { // all loads of U steps before any use: 4 x 16 B per lane
            const int t = t0 + u * ks;
            const bool ok = t < steps, la = ok && okA, lb = ok && okB;
#pragma unroll
            for (int c = 0; c < CPL; c++) {
                ca[u][c] = la ? gv2_ld(codes + cA + 4 * CPL * t + c, SM) : z4;
                cb[u][c] = lb ? gv2_ld(codes + cB + 4 * CPL * t + c, SM) : z4;
            }
            if (HPG == 1) {
                sa[u][0] = sa[u][1] = la ? gv2_ld(sbp + sA + t, SM) : 0u;
                sbw[u][0] = sbw[u][1] = lb ? gv2_ld(sbp + sB + t, SM) : 0u;
            } else {
                uint2 wa = la ? gv2_ld((const uint2 *)(sbp + sA + t * HPG), SM) : make_uint2(0, 0);
                uint2 wb = lb ? gv2_ld((const uint2 *)(sbp + sB + t * HPG), SM) : make_uint2(0, 0);
                sa[u][0] = wa.x, sa[u][1] = wa.y, sbw[u][0] = wb.x, sbw[u][1] = wb.y;
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int t = t0 + u * ks;
            if (t >= steps) break;
            int d[NM][4];
#pragma unroll
            for (int m = 0; m < NM; m++) d[m][0] = d[m][1] = d[m][2] = d[m][3] = 0;
            uint32_t wa[4 * CPL], wb[4 * CPL];
#pragma unroll
            for (int c = 0; c < CPL; c++) {
                wa[4 * c] = ca[u][c].x, wa[4 * c + 1] = ca[u][c].y, wa[4 * c + 2] = ca[u][c].z, wa[4 * c + 3] = ca[u][c].w;
                wb[4 * c] = cb[u][c].x, wb[4 * c + 1] = cb[u][c].y, wb[4 * c + 2] = cb[u][c].z, wb[4 * c + 3] = cb[u][c].w;
            }
#pragma unroll
            for (int vh = 0; vh < 2; vh++) {
                uint4 bx[NM];
#pragma unroll
                for (int m = 0; m < NM; m++) bx[m] = bp[m][(t * 2 + vh) * bst[m]];
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    const int v = 2 * vh + j;
                    uint32_t a0, a1, a2, a3;
                    if (BITS == 4) {
                        a0 = wa[v] & 0x0f0f0f0fu, a2 = (wa[v] >> 4) & 0x0f0f0f0fu;
                        a1 = wb[v] & 0x0f0f0f0fu, a3 = (wb[v] >> 4) & 0x0f0f0f0fu;
                    } else {
                        a0 = __byte_perm(wa[2 * v], wa[2 * v + 1], 0x6420), a2 = __byte_perm(wa[2 * v], wa[2 * v + 1], 0x7531);
                        a1 = __byte_perm(wb[2 * v], wb[2 * v + 1], 0x6420), a3 = __byte_perm(wb[2 * v], wb[2 * v + 1], 0x7531);
                    }
#pragma unroll
                    for (int m = 0; m < NM; m++)
                        gv2_imma(d[m], a0, a1, a2, a3, j ? bx[m].z : bx[m].x, j ? bx[m].w : bx[m].y);
                }
            }
            // Accumulator element e of MMA m is column n = 8m + 2p + e: part n / HPG, slot n % HPG;
            // elements 0,1 belong to row g, 2,3 to row g + 8. The bias term once per (row, group),
            // by the part-0 column.
#pragma unroll
            for (int m = 0; m < NM; m++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int n = 8 * m + 2 * p + e, part = n / HPG, ei = HPG == 1 ? 0 : e;
                    if (part >= 4) continue;
                    const float *xg = xsg + (t * HPG + (HPG == 1 ? 0 : h0 + e)) * 4;
                    const float w = xg[0] * pw[m][e];
                    acc0 = fmaf(__uint_as_float(sa[u][ei] << 16), w * (float)d[m][e], acc0);
                    acc1 = fmaf(__uint_as_float(sbw[u][ei] << 16), w * (float)d[m][2 + e], acc1);
                    if (part == 0) {
                        const float xf = xg[3];
                        acc0 = fmaf(__uint_as_float(sa[u][ei] & 0xffff0000u), xf, acc0);
                        acc1 = fmaf(__uint_as_float(sbw[u][ei] & 0xffff0000u), xf, acc1);
                    }
                }
        }
    }
    acc0 += __shfl_xor_sync(0xffffffffu, acc0, 1);
    acc0 += __shfl_xor_sync(0xffffffffu, acc0, 2);
    acc1 += __shfl_xor_sync(0xffffffffu, acc1, 1);
    acc1 += __shfl_xor_sync(0xffffffffu, acc1, 2);
}

// Row i of a gemv2 tile: its ks warps' partial sums (gv2_tile's acc0 / acc1 of warp w at part[w][0..15]), in order.
__device__ __forceinline__ float gv2_part_sum(const float (*part)[16], int ks, int i) {
    const int wr = i / 16, r = i % 16;
    float v = 0.0f;
    for (int k = 0; k < ks; k++) v += part[wr * ks + k][r];
    return v;
}

// gv2_tile with the row width of its segment (4- or 8-bit codes).
template <int HPG, bool SM>
__device__ __forceinline__ void gv2_tile_bits(const gv_seg &s, int tile, const uint4 *bsm, const uint4 *zero4,
                                              const float *xsg, int lane, int warp, float &acc0, float &acc1,
                                              const uint4 *cs, const uint32_t *ss) {
    if (s.m.bits == 8) gv2_tile<HPG, SM, 8>(s, tile, bsm, zero4, xsg, lane, warp, acc0, acc1, cs, ss);
    else gv2_tile<HPG, SM>(s, tile, bsm, zero4, xsg, lane, warp, acc0, acc1, cs, ss);
}

// The rows of one gemv2 tile from its warps' partial sums (gv2_tile's acc0 / acc1 of warp w at
// part[w][0..15], written before a barrier): thread r < the tile's rows adds its row's ks partials in
// order, then the epilogue. tid: the thread's index among the GV_THREADS that ran the tile.
__device__ __forceinline__ void gv2_tile_out(const gv_args &a, const gv_seg &s, int tile, const float (*part)[16],
                                             int tid, float &best, int &best_row) {
    const int ks = s.ks, nr = 16 * (GV_WARPS / ks);
    if (tid < nr) {
        const int row = tile * nr + tid;
        if (row < s.m.rows) gv_out(a, s, row, gv2_part_sum(part, ks, tid), best, best_row);
    }
}

// The fixed point of gv2_tile's B operand (and moe_fused's down slice): for values whose largest |x| has the
// biased exponent b (at least 64), x = N 2^(b-156) with N = round(x 2^(156-b)) = round(x 2^(30-e)), |N| <= 2^30,
// e = b - 126; N in four balanced base-256 digits, digit j in byte j.
__device__ __forceinline__ int gv2_fx_b(float mx) { return max((int)(__float_as_uint(mx) >> 23), 64); }
__device__ __forceinline__ float gv2_fx_mul(int b) { return __uint_as_float((uint32_t)(283 - b) << 23); } // 2^(156-b)
__device__ __forceinline__ float gv2_fx_scale(int b) { return __uint_as_float((uint32_t)(b - 29) << 23); } // 2^(b-156)
// N + 0x80808080 in [2^30, 3 * 2^30] has the bytes d_j + 128: its bytes xor 0x80 are the balanced digits.
__device__ __forceinline__ uint32_t gv2_fx_digits(int n) { return ((uint32_t)n + 0x80808080u) ^ 0x80808080u; }

// gemv2's x in shared memory, in this order (gemv2_kernel, gdn_front_kernel; moe_fused lays out the same pieces
// in its own): gv2_split_x's digits (bsm, gv2_digit_vecs uint4s), a zero vector (zero4), x as prepared (xs,
// padded runs: xs_index), its 16-value sums (xsum), and per group of columns its scale and sum (xsg, 4 floats a
// group); gv2_xmem_bytes is their size. The digits take 4 bytes a column (cols / 4 uint4s); the room is still
// the 6 bytes a column of the bf16 form the integer MMA replaced. Shrinking it reschedules every gemv2 and
// moe_fused kernel for nothing: no block's residency is limited by shared memory (docs/PERF.md, thirty-eighth
// session).
__host__ __device__ __forceinline__ int gv2_digit_vecs(int cols) { return cols * 3 / 8; }
__host__ __device__ __forceinline__ size_t gv2_xmem_bytes(int cols, int group) {
    return (size_t)(gv2_digit_vecs(cols) + 1) * sizeof(uint4) +
           (size_t)(xs_floats(cols) + cols / 16 + cols / group * 4) * sizeof(float);
}

// Columns 8i..8i+7 of x (in x[]) as their four int8 digits in B-fragment order at bsm, and, by the first thread
// of each group of G = 128 / HPG columns, the group's scale 2^(e-30) and sum(x) at xsg (see gv2_tile). The
// G/8 threads of a group are adjacent lanes and all call it (the shuffles), with ok = false and zeros past
// the row.
template <int HPG>
__device__ __forceinline__ void gv2_split8(const float *x, int i, bool ok, uint4 *bsm, float *xsg) {
    constexpr int G = 128 / HPG;
    float pf = 0.0f, mx = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; k++) pf += x[k], mx = fmaxf(mx, fabsf(x[k]));
#pragma unroll
    for (int o = 1; o < G / 8; o <<= 1) {
        pf += __shfl_xor_sync(0xffffffffu, pf, o);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    }
    const int b = gv2_fx_b(mx);
    const float mul = gv2_fx_mul(b);
    if (ok) {
        uint32_t dw[8];
#pragma unroll
        for (int k = 0; k < 8; k++) dw[k] = gv2_fx_digits(__float2int_rn(x[k] * mul));
        // Byte transposes: digit j of values {0,2,4,6} (b0) and {1,3,5,7} (b1).
        uint32_t b0[4], b1[4];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            uint32_t *o = h ? b1 : b0;
            const uint32_t pl = __byte_perm(dw[h], dw[h + 2], 0x5140), ph = __byte_perm(dw[h], dw[h + 2], 0x7362);
            const uint32_t ql = __byte_perm(dw[h + 4], dw[h + 6], 0x5140), qh = __byte_perm(dw[h + 4], dw[h + 6], 0x7362);
            o[0] = __byte_perm(pl, ql, 0x5410), o[1] = __byte_perm(pl, ql, 0x7632);
            o[2] = __byte_perm(ph, qh, 0x5410), o[3] = __byte_perm(ph, qh, 0x7632);
        }
        const int t = i >> 4, p = (i >> 2) & 3, v = i & 3;
        uint2 *dst = (uint2 *)(bsm + (t * 2 + (v >> 1)) * 16 + p) + (v & 1);
#pragma unroll
        for (int j = 0; j < 4; j++) dst[8 * j] = make_uint2(b0[j], b1[j]);
        if (i % (G / 8) == 0) {
            float *o = xsg + i / (G / 8) * 4;
            o[0] = gv2_fx_scale(b), o[3] = pf;
        }
    }
}

// x (prepared in xs by gv_prologue) as the four int8 digits of each value in B-fragment order at
// bsm, and per group of G = 128 / HPG columns its scale 2^(e-30) and sum(x) at xsg (see gv2_tile).
// Thread i takes columns 8i..8i+7 (step i/16, chunk (i/4)%4, word i%4); the G/8 threads of a group
// are adjacent lanes. The caller puts a barrier between this and the first gv2_tile. tid: the
// thread's index among the GV_THREADS that run it.
template <int HPG>
__device__ __forceinline__ void gv2_split_x(int cols, const float *xs, uint4 *bsm, uint4 *zero4, float *xsg, int tid) {
    if (tid == 0) *zero4 = make_uint4(0, 0, 0, 0);
    for (int i0 = 0; i0 < cols / 8; i0 += GV_THREADS) { // same trip count in every lane (shuffles)
        const int i = i0 + tid;
        const bool ok = i < cols / 8;
        float x[8];
#pragma unroll
        for (int k = 0; k < 8; k++) x[k] = ok ? xs[xs_index(8 * i + k)] : 0.0f;
        gv2_split8<HPG>(x, i, ok, bsm, xsg);
    }
}
// The same by a block's threads 0 .. GV_THREADS-1 (tid = threadIdx.x).
template <int HPG>
__device__ __forceinline__ void gv2_split_x(int cols, const float *xs, uint4 *bsm, uint4 *zero4, float *xsg) {
    gv2_split_x<HPG>(cols, xs, bsm, zero4, xsg, (int)threadIdx.x);
}
