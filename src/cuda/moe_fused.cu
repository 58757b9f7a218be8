// moe_fused.cu: the routed experts and the shared expert's down projection of a decode step in one
// launch (LILY_CUDA_MOE_FUSED), instead of moe.cu's two (gate/up, then down). Why: in a decode step
// each kernel boundary costs a dependent chain of round trips (wait, read the input, first weight
// bytes, reduce, write), ~5-8 us whatever the bytes (docs/PERF.md, "Where the time goes"); the two
// MoE kernels took ~26 us for 14.8 MB, ~3.4 us of bytes.
//
// Shape: the intermediate dimension of each selected expert is cut into slices of MF_J = 32; one
// block per (expert, slice), K * I / 32 blocks (128 for the real model: every SM busy). Block b:
//   1. before waiting for the previous kernel, loads into registers its rows of the shared expert's
//      down projection (sb rows, all Is columns);
//   2. redoes the router top-k (as moe_gate_up does); requests its 32 gate and 32 up rows (contiguous)
//      into shared memory with bulk copies (TMA), and its 32-column slice of the expert's down
//      projection (one 16-byte chunk of each of the H rows): by two bulk copies from the slice-major
//      copy built at load (LILY_CUDA_MOE_DSL, moe_dsl_build below), else by tensor-map copies of 256
//      rows (LILY_CUDA_MOE_FUSED_TMA), else by 16-byte loads into registers;
//   3. computes its 32 values of h = silu(gate x) * up x on the tensor cores (gemv2's tile, fed from
//      shared memory): no other block needs them, because
//   4. its slice of the down projection times those 32 values is a partial output for all H rows
//      (split K; from shared memory on the integer MMA, 16 rows an m16n8k32 with h as gv2_tile's
//      four int8 digits: mf_down_tile), times the routing weight, into part[slice][row]; its shared rows times the shared
//      h (silu(sg) * su, from the router kernel), times the shared gate, into part[K * I / 32][row]
//      (done before 3, while the gate and up rows are in flight: it needs neither);
//   5. after a grid barrier (every block is resident: at most one block an SM, checked at launch),
//      block b adds the partials of rows b*rb .. +rb in a fixed order and the residual: the result
//      is deterministic.
//   5'. with acc (LILY_CUDA_MOE_ACC, the default in a step): instead of 4's stores and 5, each partial is
//      added into a fixed-point sum by integer atomics (cuda_common.cuh mf_acc_add) and the launch ends:
//      no grid barrier, no second pass. Integer addition is exact, so the sum is the same whatever order
//      the blocks arrive in. The next layer's in_proj and out_proj (o_proj), or lm_head, fold it into
//      the residual they read (gemv.cuh gv_x, gv_out), out_proj zeroing it for the layer's own MoE.
// Measured (docs/PERF.md): 18.8 us a launch in `lily-gpu-test chain` against 25.8 us for the pair;
// decode 4K 319 -> 346 tok/s. Of its time ~1 us is the wait, ~3.8 us the top-k, ~9.7 us the streaming
// and the math, ~3.4 us the grid barrier and the sums.
#include <cuda.h>         // CUtensorMap
#include <cudaTypedefs.h> // PFN_cuTensorMapEncodeTiled

#include "gemv.cuh"
#include "moe.cuh"
#include "qgemm_wg.cuh" // bulk-copy, tensor-map and mbarrier wrappers

LILY_CUDA_MODE_SETTER(moe_fused)
LILY_TRACE_SETTER(moe_fused)

#define MF_J 32       // h values (gate rows, up rows, down columns) per block
#define MF_NG 2       // groups of 8 warps a block: gate rows by one, up rows by the other
#define MF_THREADS (GV_THREADS * MF_NG)
#define MF_DPT 4      // down rows per thread in registers (H <= MF_THREADS * MF_DPT)
#define MF_SPT 1      // shared-expert down chunks per thread (sb * Is / 32 <= MF_THREADS)

// The launch's shape, computed on the host.
struct mf_shape {
    int nb;   // blocks: K * I / MF_J
    int sb;   // shared-expert down rows per block
    int rb;   // output rows each block adds up after the barrier
    int r0b;  // bytes of the gate (and of the up) rows' buffer
    int cx;   // columns the x buffers hold: H, or the widest front phase's
    int hr;   // TMD: rows of the down slice's buffers (H rounded up to the 256-row boxes)
    int dsm_off; // TMD: their offset in shared memory (16-byte units)
    int dsl;     // TMD: the slice from w.dsl_* (slice-major) by two bulk copies, in place of the tensor maps
    int fixed;   // LILY_CUDA_DEV_MF_FIXED (a diagnostic, wrong logits): 1 slots take experts 0..K-1, 2 also skip the top-k
    size_t smem;
};

// The front: GEMV launches that moe_fused runs before the MoE, in order, each ending at a grid
// barrier (planned by gemv_plan on the host).
struct mf_front {
    gv_args a[MF_MAX_FRONT];
    int n;
};

// The 32 gate (or up) rows of a block in shared memory at cs / ss, times x (split in bsm / xsg): their
// fp32 dot products into out[0..31]. One group of 8 warps, 4 of them to a 16-row tile's columns; the
// 4 sums meet in `part` in a fixed order. Both groups call it at once (the barriers match).
template <int HPG>
__device__ __forceinline__ void mf_rows32(int cols, int group, const uint4 *cs, const uint32_t *ss, const uint4 *bsm,
                                          const uint4 *zero4, const float *xsg, float (*part)[16], float *out) {
    const int tid = threadIdx.x % GV_THREADS, lane = tid & 31, warp = tid >> 5;
    constexpr int KS = 4;
    gv_seg s = {};
    s.m.rows = MF_J, s.m.cols = cols, s.m.bits = 4, s.m.group = group, s.m.fmt = DQ_FAST;
    s.ks = KS;
    float acc0, acc1;
    gv2_tile<HPG, true>(s, 0, bsm, zero4, xsg, lane, warp, acc0, acc1, cs, ss);
    if ((lane & 3) == 0) part[warp][lane >> 2] = acc0, part[warp][(lane >> 2) + 8] = acc1;
    __syncthreads();
    if (tid < MF_J) {
        const int wr = tid / 16, r = tid % 16;
        float v = 0.0f;
        for (int k = 0; k < KS; k++) v += part[wr * KS + k][r];
        out[tid] = v;
    }
    __syncthreads();
}

// Values [0, n) into padded shared memory (xs layout) with their 16-value sums (n % 16 == 0).
__device__ __forceinline__ void mf_sums16(const float *xs, float *xsum, int n) {
    for (int i = threadIdx.x; i < n / 16; i += MF_THREADS) {
        float t = 0.0f;
        for (int j = 0; j < 16; j++) t += xs[xs_index(i * 16 + j)];
        xsum[i] = t;
    }
}

// The down slice on the integer MMA (TMD: its H code chunks in shared memory at dsc). h's 32 values as
// four int8 digits of one fixed point (gv2_tile's form: N = round(h 2^(30-e)), max |h| < 2^e), which
// warp 0 writes as hd[i] (digit j in byte j) and their scale 2^(e-30) as *hsc; here every warp builds
// its B fragment from them: column n < 4 is digit n, lane (g, p) supplying h[8p + {0,2,4,6}] (b0)
// and h[8p + {1,3,5,7}] (b1), the order in which a word of codes splits into the A registers.
__device__ __forceinline__ uint2 mf_down_b(const uint32_t *hd, int lane) {
    const int g = lane >> 2, p = lane & 3;
    if (g >= 4) return make_uint2(0u, 0u);
    const uint4 lo = *(const uint4 *)(hd + 8 * p), hi = *(const uint4 *)(hd + 8 * p + 4);
    const uint32_t sel = (uint32_t)g | (uint32_t)(g + 4) << 4; // byte g of each of two words
    const uint32_t b0 = __byte_perm(__byte_perm(lo.x, lo.z, sel), __byte_perm(hi.x, hi.z, sel), 0x5410);
    const uint32_t b1 = __byte_perm(__byte_perm(lo.y, lo.w, sel), __byte_perm(hi.y, hi.w, sel), 0x5410);
    return make_uint2(b0, b1);
}

// Rows r0 .. r0 + 15 of the down slice times h's digits: this lane's accumulator columns 2p, 2p + 1
// (digits 2p, 2p + 1; zero for p >= 2) combined exactly in integers (|D0 + 256 D1| < 2^24): for row
// r0 + g (x[0]) and r0 + g + 8 (x[1]), sum(q L) in lanes p = 0 and sum(q H) in lanes p = 1, where
// L = d0 + 256 d1 and H = d2 + 256 d3 split h's N = L + 2^16 H. One MMA of k = 32: A is word p of
// each row's chunk (codes 8p..8p+7: bytes 0,2,4,6 at k = 4p + i, 1,3,5,7 at k = 16 + 4p + i).
__device__ __forceinline__ void mf_down_tile(const uint32_t *dw, int r0, uint2 bf, int lane, int *x) {
    const int g = lane >> 2, p = lane & 3;
    const uint32_t wa = dw[(r0 + g) * 4 + p], wb = dw[(r0 + g + 8) * 4 + p];
    int d[4] = {0, 0, 0, 0};
    gv2_imma(d, wa & 0x0f0f0f0fu, wb & 0x0f0f0f0fu, (wa >> 4) & 0x0f0f0f0fu, (wb >> 4) & 0x0f0f0f0fu, bf.x, bf.y);
    x[0] = d[0] + d[1] * 256, x[1] = d[2] + d[3] * 256;
}

// A down row's partial from its sums (mf_down_tile's, or the same integers by the scalar path): the
// same expression in both paths, so that they give the same bits.
__device__ __forceinline__ float mf_down_val(int i01, int i23, float hsc, uint32_t sw, float hsum, float wk) {
    const float qh = fmaf((float)i23, hsc * 65536.0f, (float)i01 * hsc); // sum(q h), exact up to its one rounding
    return wk * fmaf(__uint_as_float(sw << 16), qh, __uint_as_float(sw & 0xffff0000u) * hsum);
}

// One front phase: this block's tiles of launch a, on group 0's 8 warps (group 1 joins the
// barriers). a was planned by gemv_plan, so each row's sum is split and added in the order a
// separate gemv2 launch uses: the same bits. x is prepared by the register prologue, reading x and z
// through L2 (an earlier phase of this launch may have written them), into xs / xsum, and split
// into bsm / xsg, where the MoE finds the last phase's.
template <int HPG>
__device__ __forceinline__ void mf_gv_phase(const gv_args &a, uint4 *bsm, uint4 *zero4, float *xsg, float *xs,
                                            float *xsum, float *red, float (*gpart)[16]) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const bool g0 = tid < GV_THREADS;
    gv_prologue_regs<true, true>(a, xs, xsum, red);
    trace_mark(a.pro == PRO_RMSNORM ? 15 : 12); // TRACE (dev): x prepared
    if (g0) gv2_split_x<HPG>(a.cols, xs, bsm, zero4, xsg, tid);
    __syncthreads();
    if (a.pro != PRO_RMSNORM) trace_mark(13); // x split
    int total = 0;
    for (int s = 0; s < a.nseg; s++) total += a.seg[s].tiles;
    float best = -INFINITY;
    int best_row = 0x7fffffff;
    for (int t = blockIdx.x; t < total; t += gridDim.x) {
        int si = 0, tile = t;
        while (tile >= a.seg[si].tiles) tile -= a.seg[si++].tiles;
        const gv_seg &s = a.seg[si];
        if (!s.ks) {
            if (g0) gv_tile_lanes(a, s, tile, xs, xsum, lane, warp, best, best_row);
            continue;
        }
        if (g0) {
            float acc0, acc1;
            gv2_tile_bits<HPG, false>(s, tile, bsm, zero4, xsg, lane, warp, acc0, acc1, NULL, NULL);
            if ((lane & 3) == 0) gpart[warp][lane >> 2] = acc0, gpart[warp][(lane >> 2) + 8] = acc1;
        }
        if (a.pro != PRO_RMSNORM && t == blockIdx.x) trace_mark(14); // thread 0's tile done
        __syncthreads();
        gv2_tile_out(a, s, tile, gpart, tid, best, best_row);
        __syncthreads();
    }
}

// TMD: the down slice (a 16-byte chunk of each of H rows, and its scale word) comes by tensor-map
// copies of 256 rows each (TMA) into shared memory; else by 16-byte loads into registers, which keep
// the load/store unit busy for ~4 us with H scattered rows (docs/PERF.md).
// FRONT: the launch runs fr's phases first (a separate instantiation, so that the kernel without them
// keeps its registers). Registers are capped at MF_REGS: 512 threads x 88 leave an SM room for one
// block of gemv2 (256 x 80), so that the neighbouring kernels' blocks become resident beside this
// one (PDL's overlap). At 115 registers (uncapped, with the front) no block fitted beside it and the
// step lost ~10 % (docs/PERF.md).
#define MF_REGS 88
// ACC (LILY_CUDA_MOE_ACC): the partials go into acc by integer atomics (cuda_common.cuh mf_acc_add) and the
// launch ends there: no grid barrier, no sums; the next readers of the residual fold acc in.
template <int HPG, bool TMD, bool FRONT, bool ACC>
__global__ void __maxnreg__(MF_REGS)
    moe_fused_kernel(moe_w w, const float *logits, const float *x, int *ids_out, float *wts_out, dq_mat sd,
                     const float *sg, const float *su, const float *sh_score, const float *res, float *out,
                     float *part, unsigned *bar, mf_shape sh, const __grid_constant__ mf_front fr,
                     const __grid_constant__ CUtensorMap tmc, const __grid_constant__ CUtensorMap tms,
                     unsigned long long *acc, unsigned long long *z0) {
    trace_mark(0);
    extern __shared__ __align__(128) unsigned char mf_smem[];
    __shared__ int ids[MAX_TOPK];
    __shared__ float wts[MAX_TOPK + 1];
    __shared__ float tpart[MF_NG][GV_WARPS][16];
    __shared__ __align__(16) float hsl[MF_J / 32 * 36 + MF_J / 16]; // this block's h slice (xs layout), its 16-sums
    __shared__ __align__(16) uint32_t hd[MF_J + 1]; // h's digits (mf_down_b), then their scale
    __shared__ __align__(16) int hlh[2][MF_J];       // the same as L = d0 + 256 d1, H = d2 + 256 d3 (the scalar path)
    __shared__ float red[MF_THREADS / 32][32];
    __shared__ __align__(8) uint64_t gbar[3];
    const int H = w.hidden, I = w.inter, K = w.topk, Is = sd.rows ? sd.cols : 0, G = w.gate.group;
    const int tid = threadIdx.x, gi = tid / GV_THREADS, b = blockIdx.x;
    const int ns = I / MF_J, k = b / ns, j0 = (b % ns) * MF_J; // expert slot, first h value
    const int npart = K * ns + (Is ? 1 : 0);
    // Shared memory: gate rows, up rows (codes then scale words), the x split, x and its 16-sums (C
    // columns: H, or the widest front phase's), h, the shared h.
    const int C = sh.cx;
    unsigned char *bg = mf_smem, *bu = bg + sh.r0b;
    uint4 *bsm = (uint4 *)(bu + sh.r0b), *zero4 = bsm + gv2_digit_vecs(C);
    float *xsg = (float *)(zero4 + 1), *xs = xsg + C / G * 4, *xsum = xs + xs_floats(C), *hg = xsum + C / 16;
    float *hu = hg + MF_J, *hs = hu + MF_J, *hssum = hs + xs_floats(Is > 0 ? Is : 32);
    uint4 *dsc = (uint4 *)mf_smem + sh.dsm_off, *dss = dsc + sh.hr; // TMD: codes, scale words (4 a row)
    const long grb = (long)H / 2, gsw = H / G;
    // 1. The shared expert's rows of this block, chunk (row s0 + i / cps, chunk i % cps) for thread i.
    const int cps = Is / 32, s0 = b * sh.sb, sr = Is ? max(0, min(sh.sb, H - s0)) : 0;
    uint4 scode[MF_SPT];
    uint32_t ssb[MF_SPT];
#pragma unroll
    for (int u = 0; u < MF_SPT; u++) {
        const int i = tid + u * MF_THREADS, r = s0 + (cps ? i / cps : 0);
        const bool ok = cps && i < sr * cps;
        scode[u] = ok ? __ldg(sd.codes + (long)r * cps + i % cps) : make_uint4(0, 0, 0, 0);
        ssb[u] = ok ? __ldg(sd.sb + (long)r * (Is / G) + (i % cps) * 32 / G) : 0u;
    }
    // The front phases' first rows towards L2 (weights: before the wait, like a separate launch).
    const int nfront = FRONT ? fr.n : 0;
    for (int p = 0; p < nfront; p++) {
        const gv_args &a = fr.a[p];
        int total = 0;
        for (int s = 0; s < a.nseg; s++) total += a.seg[s].tiles;
        for (int t = b; t < total; t += gridDim.x) {
            int si = 0, tile = t;
            while (tile >= a.seg[si].tiles) tile -= a.seg[si++].tiles;
            gv_prefetch_tile(a.seg[si], tile);
        }
    }
    if (tid == 0) {
        mb_init(&gbar[0], 1), mb_init(&gbar[1], 1), mb_init(&gbar[2], 1);
        mb_init_fence();
    }
    __syncthreads();
    pdl_wait();
    trace_mark(1);
    if (ACC && z0 && b == gridDim.x - 1) // a sum the previous kernels have folded in, zeroed for its next use
        for (int i = tid; i <= H; i += MF_THREADS) z0[i] = 0ull;
    // 1b. The front: each phase's rows, then a grid barrier (the next phase reads all of them).
    for (int p = 0; p < nfront; p++) {
        mf_gv_phase<HPG>(fr.a[p], bsm, zero4, xsg, xs, xsum, red[0], tpart[0]);
        trace_mark(8 + 2 * p); // TRACE builds: phase p's rows written, then its barrier passed
        blocks_sync(bar, gridDim.x);
        trace_mark(9 + 2 * p);
    }
    // 2. Routing, the weights of this block's slice, x, the shared h.
    if (tid < 32 && sh.fixed != 2) router_topk(logits, w.n_experts, K, w.norm_topk, ids, wts, true);
    if (sh.fixed == 2 && tid < K) ids[tid] = tid, wts[tid] = 1.0f / K;
    // The gate, up and down rows of this block's expert are requested by warp 0 right after its top-k, not
    // after the block barrier below, which also waits for the other warps' loads of x and the shared h.
    if (tid < 32) { // the rows' request by the top-k's own warp, as soon as its ids are written
        __syncwarp();
        const int e = sh.fixed ? k : ids[k];
        if (tid == 0) {
            const long row = (long)e * I + j0;
            const uint32_t bytes = (uint32_t)(MF_J * (grb + gsw * 4));
            mb_expect_tx(&gbar[0], bytes);
            bulk_g2s(bg, (const char *)w.gate.codes + row * grb, (uint32_t)(MF_J * grb), &gbar[0]);
            bulk_g2s(bg + MF_J * grb, w.gate.sb + row * gsw, (uint32_t)(MF_J * gsw * 4), &gbar[0]);
            mb_expect_tx(&gbar[1], bytes);
            bulk_g2s(bu, (const char *)w.up.codes + row * grb, (uint32_t)(MF_J * grb), &gbar[1]);
            bulk_g2s(bu + MF_J * grb, w.up.sb + row * gsw, (uint32_t)(MF_J * gsw * 4), &gbar[1]);
            if (TMD && sh.dsl) { // the slice-major copy: H code chunks and H scale words, contiguous
                const long sl = ((long)e * ns + j0 / MF_J) * H;
                mb_expect_tx(&gbar[2], (uint32_t)H * 20);
                bulk_g2s(dsc, w.dsl_codes + sl, (uint32_t)H * 16, &gbar[2]);
                bulk_g2s(dss, w.dsl_sb + sl, (uint32_t)H * 4, &gbar[2]);
            } else if (TMD) {
                mb_expect_tx(&gbar[2], (uint32_t)sh.hr * 32);
                for (int r = 0; r < sh.hr; r += 256) {
                    tma_g2s_2d(dsc + r, &tmc, j0 / 2, e * H + r, &gbar[2]);
                    tma_g2s_2d(dss + r, &tms, (j0 / G) & ~3, e * H + r, &gbar[2]);
                }
            }
        }
    }
    trace_mark(5); // thread 0: its top-k computed and the rows requested (TRACE builds: wait -> this point)
    // x, the shared h and its gate by warps 1.. only: warp 0 is taking the top-k, and its share of these loads
    // (an L2 round trip after the top-k) would stand between the top-k and the barrier below. x from the
    // lowest of those threads, h from the highest, the gate by one in between: at the model's shapes no
    // thread waits on more than two round trips, fewer than the top-k's chain.
    const int st = tid - 32, nst = MF_THREADS - 32, sth = MF_THREADS - 1 - tid;
    constexpr int GATE_TID = MF_THREADS - 7 * 32 + 1; // warp 9: no x at H = 2048 (x ends at thread 287), one h
    if (!nfront && st >= 0) // else the last front phase left x (its prepared input) in xs, split in bsm / xsg
        for (int c8 = st * 8; c8 < H; c8 += nst * 8) {
            const float4 a = *(const float4 *)(x + c8), c = *(const float4 *)(x + c8 + 4);
            float *d = xs + xs_index(c8);
            *(float4 *)d = a, *(float4 *)(d + 4) = c;
        }
    // Through L2: the front may have written them in this launch.
    if (st >= 0)
        for (int i = sth; i < Is; i += nst) hs[xs_index(i)] = rb(rb(silu_f(__ldcg(sg + i))) * __ldcg(su + i));
    if (tid == GATE_TID) wts[K] = Is ? rb(sigmoid_f(__ldcg(sh_score))) : 0.0f;
    __syncthreads();
    trace_mark(2); // routed (the chain's "wait->staged" is the top-k here)
    const int e = sh.fixed ? k : ids[k]; // for the down slice's 16-byte loads (!TMD)
    // The slice of the down projection: chunk j0 / 32 of rows tid, tid + MF_THREADS, ...
    const int ncd = I / 32, dsw = I / G;
    uint4 dcode[MF_DPT];
    uint32_t dsb[MF_DPT];
    // ACC: block b starts its rows at 16 b (mod H), so that the blocks' atomics on a row come at different
    // times, not all blocks on the same few addresses at once (not measured apart from the rest).
    const int rot = ACC ? (16 * b) % H : 0;
    auto drow = [&](int u) {
        const int i = tid + u * MF_THREADS, r = i + rot;
        return i < H && r >= H ? r - H : r;
    };
#pragma unroll
    for (int u = 0; u < MF_DPT; u++) {
        const int r = drow(u);
        const long row = (long)e * H + r;
        if (!TMD) {
            dcode[u] = r < H ? __ldg(w.down.codes + row * ncd + j0 / 32) : make_uint4(0, 0, 0, 0);
            dsb[u] = r < H ? __ldg(w.down.sb + row * dsw + j0 / G) : 0u;
        }
    }
    if (gi == 0 && !nfront) gv2_split_x<HPG>(H, xs, bsm, zero4, xsg);
    mf_sums16(hs, hssum, Is);
    __syncthreads();
    // The shared expert's partial outputs (its rows loaded before the wait, the shared h from the router's
    // launch), while the gate and up rows are on their way: off the critical path. Its partials are summed
    // exactly (ACC) or in a fixed order after the barrier, so this place gives the same bits as any.
    if (Is) {
        // Thread i holds chunk i % cps of row s0 + i / cps; a row's cps chunks are adjacent lanes
        // (cps a power of two <= 32, checked at launch), added by shuffles in a fixed order.
#pragma unroll
        for (int u = 0; u < MF_SPT; u++) {
            const int i = tid + u * MF_THREADS, c = i % cps;
            float v = i < sr * cps ? chunk_apply(chunk_dot<4>(scode[u], hs + xs_index(c * 32)), hssum[2 * c] + hssum[2 * c + 1], ssb[u], 4) : 0.0f;
            for (int o = 1; o < cps; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (c == 0 && i < sr * cps) {
                if (ACC) mf_acc_add(acc, s0 + i / cps, H, wts[K] * v);
                else part[(long)(K * ns) * H + s0 + i / cps] = wts[K] * v;
            }
        }
    }
    // 3. Gate rows by group 0, up rows by group 1, at once.
    mb_wait(&gbar[gi], 0);
    if (!nfront) trace_mark(12); // TRACE: thread 0's gate rows arrived (points 12-15: no front only)
    unsigned char *bb = gi ? bu : bg;
    mf_rows32<HPG>(H, G, (const uint4 *)bb, (const uint32_t *)(bb + MF_J * grb), bsm, zero4, xsg, tpart[gi],
                   gi ? hu : hg);
    if (tid < MF_J) {
        const float hv = rb(rb(silu_f(rb(hg[tid]))) * rb(hu[tid]));
        hsl[xs_index(tid)] = hv;
        // Warp 0 (MF_J = 32): h as the integer N = round(h 2^(30-e)), max |h| < 2^e, for the down slice
        // (gv2_tile's fixed point): its four digits, and L, H with N = L + 2^16 H.
        float mx = fabsf(hv);
        for (int o = 1; o < 32; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        const int be = gv2_fx_b(mx), n = __float2int_rn(hv * gv2_fx_mul(be));
        const int lo = ((n + 0x8080) & 0xffff) - 0x8080;
        hd[tid] = gv2_fx_digits(n);
        hlh[0][tid] = lo, hlh[1][tid] = (n - lo) >> 16;
        if (tid == 0) hd[MF_J] = __float_as_uint(gv2_fx_scale(be));
    }
    __syncthreads();
    if (tid < MF_J / 16) {
        float t = 0.0f;
        for (int j = 0; j < 16; j++) t += hsl[xs_index(tid * 16 + j)];
        hsl[xs_floats(MF_J) + tid] = t;
    }
    if (!nfront) trace_mark(13); // TRACE: h computed
    if (TMD) mb_wait(&gbar[2], 0);
    if (!nfront) trace_mark(14); // TRACE: the down slice arrived
    __syncthreads();
    // 4. Partial outputs: the down slice times h's slice.
    float *pk = part + (long)(k * ns + j0 / MF_J) * H;
    const float wk = wts[k], hsc = __uint_as_float(hd[MF_J]), hsum = hsl[xs_floats(MF_J)] + hsl[xs_floats(MF_J) + 1];
    if (TMD) { // 16-row tiles on the integer MMA, two at a time: warp w takes rows 32w .. 32w + 31, then
               // + 512, ... (from 32 b mod H if ACC), lane l finishing row l of the 32 (its atomic: one
               // instruction covers 32 adjacent rows, as the register path's do; 8 lanes a tile, the first
               // form, issued 4x the atomic instructions and cost moe_fused ~0.9 us, docs/PERF.md)
        const int lane = tid & 31, warp = tid >> 5, T = H / 16, src = 4 * (lane & 7);
        const uint2 bf = mf_down_b(hd, lane);
        for (int t = 2 * warp; t < T; t += 2 * (MF_THREADS / 32)) { // T is even (H % 128 == 0)
            const int r0 = 16 * (ACC ? (t + 2 * b) % T : t);
            int x[2][2];
            mf_down_tile((const uint32_t *)dsc, r0, bf, lane, x[0]);
            mf_down_tile((const uint32_t *)dsc, r0 + 16, bf, lane, x[1]);
            // Row r0 + lane: tile lane >> 4, half (lane >> 3) & 1, row lane & 7 of lanes src (sum(q L)) and src + 1.
            int i01 = 0, i23 = 0;
#pragma unroll
            for (int tt = 0; tt < 2; tt++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int a = __shfl_sync(0xffffffffu, x[tt][h], src), c = __shfl_sync(0xffffffffu, x[tt][h], src + 1);
                    if (lane >> 3 == 2 * tt + h) i01 = a, i23 = c;
                }
            const int r = r0 + lane;
            const uint32_t sw = sh.dsl ? ((const uint32_t *)dss)[r] : ((const uint32_t *)(dss + r))[(j0 / G) & 3];
            const float v = mf_down_val(i01, i23, hsc, sw, hsum, wk);
            if (ACC) mf_acc_add(acc, r, H, v);
            else pk[r] = v;
        }
    } else { // the rows in registers: the same integer sums by scalar multiply-adds (code 8w + j: nibble j of word w)
#pragma unroll
        for (int u = 0; u < MF_DPT; u++) {
            const int r = drow(u);
            if (r < H) {
                const uint32_t cw[4] = {dcode[u].x, dcode[u].y, dcode[u].z, dcode[u].w};
                int i01 = 0, i23 = 0;
#pragma unroll
                for (int c = 0; c < MF_J; c++) {
                    const int q = (cw[c / 8] >> (4 * (c % 8))) & 15;
                    i01 += q * hlh[0][c], i23 += q * hlh[1][c];
                }
                const float v = mf_down_val(i01, i23, hsc, dsb[u], hsum, wk);
                if (ACC) mf_acc_add(acc, r, H, v);
                else pk[r] = v;
            }
        }
    }
    trace_mark(3);
    if (ACC) {
        pdl_trigger();
        if (b == 0 && tid < K) ids_out[tid] = ids[tid], wts_out[tid] = wts[tid];
        trace_mark(4);
        return;
    }
    // 5. Every partial written: block b adds rows b*rb .. +rb.
    blocks_sync(bar, gridDim.x);
    if (!nfront) trace_mark(15); // TRACE: the grid barrier passed
    pdl_trigger();
    const int r0 = b * sh.rb, nr = max(0, min(sh.rb, H - r0));
    if (nr > 0) {
        // Thread (p, r): partials p, p + P, ... of row r (P = MF_THREADS / 32 threads a row, rb <= 32);
        // then one thread a row adds the P sums in order.
        const int r = tid % 32, p0 = tid / 32;
        float s = 0.0f;
        if (r < nr)
            for (int p = p0; p < npart; p += MF_THREADS / 32) s += __ldcg(part + (long)p * H + r0 + r);
        red[p0][r] = s;
        __syncthreads();
        if (tid < nr) {
            float t = 0.0f;
            for (int q = 0; q < MF_THREADS / 32; q++) t += red[q][tid];
            out[r0 + tid] = rb(__ldcg(res + r0 + tid) + rb(t)); // L2: a front phase may have written res
        }
    }
    if (b == 0 && tid < K) ids_out[tid] = ids[tid], wts_out[tid] = wts[tid];
    trace_mark(4);
}

int lily_cuda_moe_fused_tma = 1;
int lily_cuda_dev_mf_fixed = 0;

// A front phase as gemv_plan plans it (into fr), or false when the launch cannot take it: it must
// run on gemv2 with the MoE's group size (one x split layout), take the register prologue (written
// for blocks wider than GV_THREADS) and store or add rows (no logits); the last one prepares the
// MoE's input, H columns.
static bool mf_front_plan(const gv_args &a, int G, int H, bool last, gv_args *fr) {
    *fr = a;
    int total;
    const int g2 = gemv_plan(*fr, &total);
    return g2 == G && fr->pro_regs && gv_pro_fast(*fr) && fr->epi != GV_LOGITS && (!last || fr->cols == H);
}

// The launch's shape (and the front, planned), or false when the fused kernel does not take these
// matrices (moe.cu's pair and separate GEMV launches do).
static bool mf_plan(const moe_w &w, const dq_mat &sd, const gv_args *front, int nfront, mf_shape *s, mf_front *fr) {
    const int H = w.hidden, I = w.inter, G = w.gate.group, Is = sd.rows ? sd.cols : 0, K = w.topk;
    if (nfront < 0 || nfront > MF_MAX_FRONT) return false;
    fr->n = nfront;
    s->cx = H;
    for (int p = 0; p < nfront; p++) {
        if (!mf_front_plan(front[p], G, H, p == nfront - 1, &fr->a[p])) return false;
        s->cx = max(s->cx, front[p].cols);
    }
    const int C = s->cx;
    auto fits = [&](const dq_mat &m) { return m.fmt == DQ_FAST && m.bits == 4 && m.group == G && m.codes && m.sb; };
    if (!fits(w.gate) || !fits(w.up) || !fits(w.down) || (Is && !fits(sd))) return false;
    if ((G != 32 && G != 64 && G != 128) || H % 128 || I % MF_J || Is % 32 || Is > 32 * 32 || (Is & (Is - 1)) ||
        K > MAX_TOPK || K < 1 || w.n_experts > 512 || H > MF_THREADS * MF_DPT)
        return false;
    s->nb = K * (I / MF_J);
    if (s->nb > cuda_sm_count()) return false; // one block an SM, all resident (the grid barrier)
    s->sb = (H + s->nb - 1) / s->nb;
    if (Is && s->sb * (Is / 32) > MF_THREADS * MF_SPT) return false;
    s->rb = (H + s->nb - 1) / s->nb;
    if (s->rb > 32) return false;
    s->r0b = (MF_J * (H / 2 + H / G * 4) + 127) / 128 * 128;
    s->smem = (size_t)2 * s->r0b + gv2_xmem_bytes(C, G) + // x's pieces, in moe_fused's order but the same sizes
              (size_t)(2 * MF_J + xs_floats(Is > 0 ? Is : 32) + (Is > 0 ? Is : 32) / 16) * 4;
    s->hr = (H + 255) / 256 * 256;
    s->dsm_off = (int)((s->smem + 127) / 128 * 8); // 128-byte aligned, in 16-byte units
    if (s->smem > 200 * 1024) return false;
    if (lily_cuda_moe_fused_tma) s->smem = ((size_t)s->dsm_off + 2 * s->hr) * 16;
    s->dsl = w.dsl_codes && w.dsl_sb;
    s->fixed = lily_cuda_dev_mf_fixed;
    return s->smem <= 200 * 1024;
}

bool moe_fused_takes(const moe_w &w, const dq_mat &sh_down, const gv_args *front, int nfront) {
    mf_shape s;
    mf_front fr;
    return mf_plan(w, sh_down, front, nfront, &s, &fr);
}

size_t moe_fused_part_floats(const moe_w &w) {
    return ((size_t)w.topk * (w.inter / MF_J) + 1) * w.hidden;
}

// The down projection's codes (uint8 rows of I/2 bytes) and scale words (uint32 rows of I/G) as 2-D
// tensor maps with boxes of 16 bytes x 256 rows. False when the driver gives no encoder or a map
// does not fit (the kernel then loads the slice into registers).
static bool mf_tmaps(const moe_w &w, CUtensorMap *tc, CUtensorMap *ts) {
    PFN_cuTensorMapEncodeTiled_v12000 enc = (PFN_cuTensorMapEncodeTiled_v12000)lily_tmap_encoder();
    if (!enc) return false;
    const cuuint64_t rows = (cuuint64_t)w.n_experts * w.hidden, rb = (cuuint64_t)w.inter / 2, ng = w.inter / w.down.group;
    const cuuint64_t cd[2] = {rb, rows}, cs[1] = {rb}, sdim[2] = {ng, rows}, ss[1] = {ng * 4};
    const cuuint32_t cb[2] = {16, 256}, sb[2] = {4, 256}, es[2] = {1, 1};
    return ng % 4 == 0 && ((uintptr_t)w.down.codes & 15) == 0 && ((uintptr_t)w.down.sb & 15) == 0 &&
           enc(tc, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)w.down.codes, cd, cs, cb, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS &&
           enc(ts, CU_TENSOR_MAP_DATA_TYPE_UINT32, 2, (void *)w.down.sb, sdim, ss, sb, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <int HPG>
static void mf_launch(mf_shape s, const mf_front &fr, cudaStream_t st, moe_w w, const gv_args *front, int nfront,
                      const float *logits, const float *x, int *ids, float *wts, dq_mat sd, const float *sg,
                      const float *su, const float *ss, const float *res, float *out, float *part, unsigned *bar,
                      unsigned long long *acc, unsigned long long *z0) {
    CUtensorMap tc, ts;
    memset(&tc, 0, sizeof tc), memset(&ts, 0, sizeof ts);
    const bool tmd = lily_cuda_moe_fused_tma && mf_tmaps(w, &tc, &ts);
    if (!tmd && lily_cuda_moe_fused_tma) { // the plan sized shared memory for the tensor-map buffers
        const int t = lily_cuda_moe_fused_tma;
        mf_front scratch;
        lily_cuda_moe_fused_tma = 0;
        mf_plan(w, sd, front, nfront, &s, &scratch);
        lily_cuda_moe_fused_tma = t;
    }
    void (*k)(moe_w, const float *, const float *, int *, float *, dq_mat, const float *, const float *,
              const float *, const float *, float *, float *, unsigned *, mf_shape, const mf_front, const CUtensorMap,
              const CUtensorMap, unsigned long long *, unsigned long long *) =
        fr.n  ? (tmd ? moe_fused_kernel<HPG, true, true, false> : moe_fused_kernel<HPG, false, true, false>)
        : acc ? (tmd ? moe_fused_kernel<HPG, true, false, true> : moe_fused_kernel<HPG, false, false, true>)
              : (tmd ? moe_fused_kernel<HPG, true, false, false> : moe_fused_kernel<HPG, false, false, false>);
    cudaFuncSetAttribute((const void *)k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s.smem);
    launch_k(k, s.nb, MF_THREADS, s.smem, st, w, logits, x, ids, wts, sd, sg, su, ss, res, out, part, bar, s, fr, tc,
             ts, acc, acc ? z0 : nullptr);
}

void moe_fused(const moe_w &w, const gv_args *front, int nfront, const float *router_logits, const float *x, int *ids,
               float *wts, dq_mat sh_down, const float *sg, const float *su, const float *sh_score, const float *res,
               float *out, float *part, unsigned *bar, cudaStream_t st, unsigned long long *acc,
               unsigned long long *zero) {
    mf_shape s;
    mf_front fr;
    if (!mf_plan(w, sh_down, front, nfront, &s, &fr)) return; // callers ask moe_fused_takes first
    if (nfront) acc = nullptr; // the front's instantiation keeps the barrier and the sums
    const int hpg = 128 / w.gate.group;
#define MF_ARGS s, fr, st, w, front, nfront, router_logits, x, ids, wts, sh_down, sg, su, sh_score, res, out, part, bar, acc, zero
    if (hpg == 1) mf_launch<1>(MF_ARGS);
    else if (hpg == 2) mf_launch<2>(MF_ARGS);
    else mf_launch<4>(MF_ARGS);
#undef MF_ARGS
}

// The slice-major copy of the down projection (LILY_CUDA_MOE_DSL). With w.down's rows, block (expert, slice)
// needs one 16-byte chunk of each of H rows 256 bytes apart: tensor-map boxes of 16 bytes x 256 rows, ~4K
// small requests a block, and its 16 bytes of scale words a row of which it uses 4. Measured as one bulk copy
// of the same bytes (timing only, 2026-12-03): decode 4K +2.5 %, moe_fused 794.7 -> 724.7 us a step
// (docs/PERF.md, thirty-first session). Thread i: chunk i of the copy.
__global__ void moe_dsl_kernel(dq_mat down, int E, int H, int I, uint4 *codes, uint32_t *sb) {
    const int ns = I / MF_J, G = down.group;
    const long n = (long)E * ns * H;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        const int r = (int)(i % H);
        const long es = i / H;
        const int e = (int)(es / ns), j = (int)(es % ns);
        const long row = (long)e * H + r;
        codes[i] = down.codes[row * (I / 32) + j];
        sb[i] = down.sb[row * (I / G) + j * MF_J / G];
    }
}

bool moe_dsl_build(moe_w *w, void **mem, size_t keep_free, cudaStream_t st) {
    *mem = nullptr;
    const int E = w->n_experts, H = w->hidden, I = w->inter;
    dq_mat none; // the shapes without a shared expert
    memset(&none, 0, sizeof none);
    if (!moe_fused_takes(*w, none, nullptr, 0)) return false; // H % 128: the bulk copies' 16-byte multiples
    const size_t n = (size_t)E * (I / MF_J) * H;
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    void *p = nullptr;
    if (fr < n * 20 + keep_free || cudaMalloc(&p, n * 20) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    uint4 *codes = (uint4 *)p;
    uint32_t *sb = (uint32_t *)(codes + n);
    moe_dsl_kernel<<<1024, 256, 0, st>>>(w->down, E, H, I, codes, sb);
    if (cudaGetLastError() != cudaSuccess) {
        cudaFree(p);
        return false;
    }
    w->dsl_codes = codes, w->dsl_sb = sb, *mem = p;
    return true;
}
