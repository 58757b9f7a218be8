// qgemm_wg.cu: the prefill GEMM Y = X . W^T of qgemm.cu on Hopper's warpgroup MMA (wgmma, sm_90a),
// for the shape every 4-bit Qwen3.5/3.6 checkpoint has: 4-bit codes, groups of 64 (or a multiple).
// Same arguments, row mapping (dense, grouped, gather, scatter) and epilogues as qgemm_kernel; the
// tensor-core kernel of qgemm.cu stays for 8-bit weights, group 32, and tiles of 16/32 rows.
//
// Exactness as in qgemm.cu: the MMA multiplies the activations by the integer codes q (exact bf16
// numbers), one 64-k stage at a time, into a partial accumulator; a column of ones in the same MMA
// gives the stage's activation sum; then acc += s*part + b*sum, i.e. x . (s*q + b) with the weights
// never rounded. No weight in any form is written to device memory: the codes are turned into bf16 q
// in shared memory, once per block for all its rows. The engine's default is the other mode (BW
// below, lily_qg_bf16w): the weights rounded once to bf16 as HF's bf16 model holds them, no fold
// (+19 % at 4K, as close to HF fp32 on the trained demo model: docs/PERF.md); the exact mode stays
// for LILY_CUDA_QG_BF16W=0.
//
// Why faster than the mma.sync kernel (docs/PERF.md, ncu of 2026-11-29: register-bound occupancy,
// IPC 2 of 4, ALU the busiest pipe): one wgmma m64n136k16 replaces 34 mma.sync and their fragment
// loads; the codes are dequantised once per block instead of once per warp row; the accumulator
// zeroing is the instruction's scale-d flag; and the wgmma of stage k runs while the threads turn
// stage k+1's codes into bf16. Measured: 158 vs 131 TFLOP/s at 4096 x 8192 x 2048, the MoE block
// at 4096 tokens 2.26 vs 2.90 ms. What holds it back now is the serial chain of a stage within a
// block (issue, dequantise, wait, fold, barrier) with 3 blocks per SM: a producer warpgroup feeding
// two consumer warpgroups through mbarriers is the next form (docs/PERF.md).
//
// Block: WGS warpgroups (BM = 64*WGS rows) x 128 output columns, 64 k per stage, 3-stage cp.async
// pipeline for X rows, code rows and scale words, double-buffered bf16 B. Shared memory holds both
// operands in the canonical no-swizzle K-major layout: 8x8 "core matrices" of 128 contiguous bytes
// (8 rows of 16 bytes); the descriptors give the byte distance between core matrices along K (LBO)
// and along M/N (SBO).
//
// The wide tile (bf16 weights, 128 rows x 256 columns, m64n256k16, one block an SM; the default
// wherever a launch has a wave of blocks, qgemm_wide_takes): each X tile copied from L2 serves twice
// the weight rows. With dense (or in-order grouped) X rows, thread 0 loads each stage's X tile
// (128-byte swizzled) and code rows by tensor-map copies completing on an mbarrier (TMA). The
// bf16-weight path writes its output through shared memory (wg_epilogue_smem). Measured at 4096 x
// 12352 x 2048: 248 (128 columns) -> 296 (wide, cp.async) -> 380 TFLOP/s (wide, TMA); docs/PERF.md.
#include <cuda.h> // CUtensorMap
#include <cudaTypedefs.h> // PFN_cuTensorMapEncodeTiled

#include "qgemm_wg.cuh"

int lily_qg_wgmma = 1;
int lily_qg_wg_desc_swap = 0;
int lily_qg_bf16w = 0;
int lily_qg_wide = 0;
int lily_qg_tma = 1;
int lily_qg_tma128 = 0;
int lily_qg_raster = 0;

enum { WG_DESC_SWAP = 1, WG_EPI_REGS = 2 }; // kernel flags: the descriptor probe; the register epilogue (timing)

// BN: output columns (weight rows) a block multiplies: 128 (+ 8 ones columns for the fold), or the
// wide 256 with bf16 weights (m64n256k16, no ones columns): each activation tile copied from L2 then
// serves twice the weight rows, the traffic the swapped-operand kernel's ablations found to be the
// bound (docs/PERF.md), at one block an SM instead of two. NST: cp.async stages. TMA: X rows and code
// rows by tensor-map copies (wide tile, dense rows; below).
template <int WGS, int BN = WG_BN, int NST = 3, bool TMA = false>
struct wg_cfg {
    static constexpr int BM = 64 * WGS;
    static constexpr int THREADS = 128 * WGS;
    static constexpr int A_BYTES = BM * 128; // bf16 X rows, 64 k
    static constexpr int C_BYTES = BN * 32;  // 4-bit codes, 64 k per column
    static constexpr int S_BYTES = BN * 4;   // one scale|bias word per column
    static constexpr int STAGE = TMA ? (A_BYTES + C_BYTES + S_BYTES + 1023) / 1024 * 1024 : A_BYTES + C_BYTES + S_BYTES;
    static constexpr int BQ_STEP = BN == WG_BN ? WG_BQ_STEP : (BN / 8) * 256; // bf16 B of one k16 step
    static constexpr int BQ_BYTES = 4 * BQ_STEP;
    static constexpr int NR = BN == WG_BN ? 68 : BN / 2; // accumulator registers a thread
    // + TMA: one mbarrier a stage, and slack to align the stages to 1024 bytes (the swizzle atom)
    static constexpr int PIPE = NST * STAGE + 2 * BQ_BYTES + BM * 4 + 2 * BN * 8 + (TMA ? NST * 8 + 1024 : 0);
    // The epilogue's fp32 tile overlays the pipeline; 3 warpgroups' wide tile needs more than it.
    static constexpr int TILE = BM * (BN + 8) * 4 + (TMA ? 1024 : 0);
    static constexpr int SMEM = PIPE > TILE ? PIPE : TILE;
};

// MINB: blocks per SM the register budget is cut for (3 of 64 rows: 168 registers, a few spilled).
// BW: weights rounded to bf16 (lily_qg_bf16w): the dequantisation writes rb(s q + b) into the B
// buffer (one more bf16x2 FMA per pair, a single rounding of the exact value), and the MMAs of all
// stages accumulate into one accumulator. No fold, so nothing waits for a stage's MMA except the
// refill of the B buffer it read, one stage later.
// WGS 3 (192 rows, the MoE's merged map, qg_args.tile_rest): a warpgroup whose 64 rows are all past
// the tile's rows issues no MMA, and with TMA only the live warpgroups' 64-row boxes of X are loaded;
// so a group's tile of 1..64 rows costs a 64-row tile's MMAs, and a 128-row tile with its tail 1.5x,
// not a second tile that dequantises the expert's weights again.
// TMA (wide tile, X rows in order: no x_rows gather): thread 0 requests each stage's X tile and code rows
// with tensor-map copies completing on the stage's mbarrier, instead of 7 cp.async per thread a
// stage; ncu showed the wide tile's warps waiting a quarter of the time for the load/store unit to
// accept those cp.async. The scale words stay cp.async (4 bytes a column: below a TMA box's 16).
template <int WGS, int MINB, bool BW, int BN = WG_BN, int NST = 3, bool TMA = false>
__global__ void __launch_bounds__(wg_cfg<WGS, BN, NST, TMA>::THREADS, MINB)
    qgemm_wg_kernel(qg_args a, int flags, const __grid_constant__ wg_tmaps tm) {
    static_assert(BN == WG_BN || (BN == 256 && BW), "the wide tile has no ones columns: bf16 weights only");
    static_assert(!TMA || BW, "tensor-map loads: bf16 weights only");
    static_assert(WGS <= 2 || BW, "3 warpgroups: bf16 weights only");
    using C = wg_cfg<WGS, BN, NST, TMA>;
    constexpr int BM = C::BM, WG_STAGES = NST;
    static_assert(BM * (BN + 8) * 4 <= C::SMEM, "the epilogue's fp32 tile overlays the pipeline");
    const int swap = flags & WG_DESC_SWAP;
    extern __shared__ __align__(128) char smem_raw[];
    char *smem = TMA ? (char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023) : smem_raw;
    char *bq = smem + WG_STAGES * C::STAGE; // two bf16 B buffers
    int *a_row = (int *)(bq + 2 * C::BQ_BYTES);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
    const int g = lane >> 2, t = lane & 3;
    const bool glu = a.epi == QG_GLU;
    const int n0 = wg_col_ix(a) * (glu ? BN / 2 : BN);

    int m0, rows, grp;
    if (!wg_block_rows(a, BM, &m0, &rows, &grp)) return;
    wg_block_setup<C::THREADS>(a, BM, m0, rows, a_row, bq, BN == WG_BN ? 2 : 0, C::BQ_BYTES);
    uint64_t *full = (uint64_t *)((char *)(a_row + BM) + 2 * BN * 8); // TMA: [NST] after sf
    if (TMA && tid == 0) {
        for (int s = 0; s < NST; s++) mb_init(&full[s], 1);
        mb_init_fence();
    }
    __syncthreads();

    const long wrow0 = (long)grp * a.N;
    const long row_bytes = (long)a.K / 2;
    const int ng = a.K / a.w.group;
    const int KT = a.K / WG_BK;

    // Each thread's cp.async sources, fixed for the whole k loop (a stage adds its k offset):
    // A: chunks i = tid + it*THREADS (it < AIT); eight consecutive threads fill one core matrix
    // (128 contiguous bytes: no bank conflict). Codes: two 16-byte halves of columns (i >> 1).
    // Scales: one word of column tid (tid < 128).
    constexpr int AIT = BM * 8 / C::THREADS, CIT = (BN * 2 + C::THREADS - 1) / C::THREADS; // CIT: i < BN * 2
    static_assert(AIT * C::THREADS == BM * 8, "X chunks split evenly over the threads");
    const uint16_t *a_src[AIT];
    uint32_t a_ok = 0;
#pragma unroll
    for (int it = 0; it < AIT; it++) {
        const int i = tid + it * C::THREADS, r = (i >> 6) * 8 + (i & 7), c = (i >> 3) & 7, xr = a_row[r];
        a_src[it] = a.x + (xr >= 0 ? (long)xr * a.ldx + c * 8 : 0);
        a_ok |= (xr >= 0) << it;
    }
    const int a_dst = ((tid >> 6) * 1024 + ((tid >> 3) & 7) * 128 + (tid & 7) * 16); // + it * (THREADS/64)*1024
    const char *c_src[CIT];
    uint32_t c_ok = 0;
#pragma unroll
    for (int it = 0; it < CIT; it++) {
        const int i = tid + it * C::THREADS, j = i >> 1, c = i & 1;
        const dq_mat &m = (glu && j >= BN / 2) ? a.w2 : a.w;
        const int n = n0 + (glu ? (j & (BN / 2 - 1)) : j);
        const bool ok = i < BN * 2 && n < a.N;
        c_src[it] = (const char *)m.codes + (ok ? (wrow0 + n) * row_bytes + c * 16 : 0);
        c_ok |= ok << it;
    }
    const uint32_t *s_src = NULL;
    bool s_ok = false;
    if (tid < BN) {
        const dq_mat &m = (glu && tid >= BN / 2) ? a.w2 : a.w;
        const int n = n0 + (glu ? (tid & (BN / 2 - 1)) : tid);
        s_ok = n < a.N;
        s_src = m.sb + (s_ok ? (wrow0 + n) * ng : 0);
    }
    const int gshift = 31 - __clz(a.w.group); // group is a power of two (64, 128, ...)
    // WGS 3: warpgroups with rows of the tile (the others skip their MMAs). Both sides of the test go
    // through a lane-0 shuffle, so ptxas sees a warp-uniform branch: a plain `wg < live` made it
    // serialise every wgmma of the kernel (C7518, "WG.DP in divergent path"; prefill -9 %). Even the
    // uniform branch cost the 2-warpgroup kernels ~1.3 % of a prefill, so they take none (their tiles
    // hold 65..128 rows but for a dense call's last one; docs/PERF.md, twelfth session).
    const int live = __shfl_sync(0xffffffffu, (rows + 63) / 64, 0);
    const bool mma_on = WGS <= 2 || __shfl_sync(0xffffffffu, wg, 0) < live;

    auto load_stage = [&](int st, int kt) {
        char *As = smem + st * C::STAGE, *Cs = As + C::A_BYTES;
        uint32_t *Ss = (uint32_t *)(Cs + C::C_BYTES);
        if constexpr (TMA) {
            if (tid == 0 && WGS == 3) { // the live warpgroups' 64-row boxes
                mb_expect_tx(&full[st], live * 8192 + C::C_BYTES);
                for (int i = 0; i < live; i++) tma_g2s_2d(As + i * 8192, &tm.x, kt * WG_BK, m0 + 64 * i, &full[st]);
                tma_g2s_2d(Cs, &tm.w, kt * 32, (int)(wrow0 + n0), &full[st]);
                if (glu) tma_g2s_2d(Cs + (BN / 2) * 32, &tm.w2, kt * 32, (int)(wrow0 + n0), &full[st]);
            } else if (tid == 0) {
                mb_expect_tx(&full[st], C::A_BYTES + C::C_BYTES);
                tma_g2s_2d(As, &tm.x, kt * WG_BK, m0, &full[st]);
                tma_g2s_2d(Cs, &tm.w, kt * 32, (int)(wrow0 + n0), &full[st]);
                if (glu) tma_g2s_2d(Cs + (BN / 2) * 32, &tm.w2, kt * 32, (int)(wrow0 + n0), &full[st]);
            }
        } else {
#pragma unroll
            for (int it = 0; it < AIT; it++)
                wg_cp16(As + a_dst + it * (C::THREADS / 64) * 1024, a_src[it] + kt * WG_BK, (a_ok >> it) & 1);
#pragma unroll
            for (int it = 0; it < CIT; it++)
                if (CIT * C::THREADS == BN * 2 || tid + it * C::THREADS < BN * 2)
                    wg_cp16(Cs + (tid + it * C::THREADS) * 16, c_src[it] + kt * 32, (c_ok >> it) & 1);
        }
        if (tid < BN) wg_cp4(Ss + tid, s_src + ((kt * WG_BK) >> gshift), s_ok);
    };
    // Codes of stage slot st -> bf16 q in B buffer b (wg_dq_half lays them out, for qgemm_wsw.cu too).
    // Consecutive threads take consecutive columns, so a warp phase's 16-byte stores fill one 128-byte
    // core matrix. The column's scale word becomes (scale, bias) floats for the fold.
    float2 *sf = (float2 *)(a_row + BM); // [2][BN] (scale, bias) per B buffer (exact weights only)
    auto dequant = [&](int st, int b) {
        const char *Cs = smem + st * C::STAGE + C::A_BYTES;
        const uint32_t B = wg_smem(bq + b * C::BQ_BYTES);
        // (Loading every item's words before the first store, as qgemm_wsw.cu's producer does, made
        // this kernel no faster: qgone 396-403 -> 376-384 TFLOP/s at 4096 x 8192 x 2048; PERF.md.)
#pragma unroll
        for (int it = 0; it < CIT; it++) {
            const int i = tid + it * C::THREADS, j = i & (BN - 1), half = i >> (BN == 256 ? 8 : 7);
            if (CIT * C::THREADS != BN * 2 && i >= BN * 2) break;
            wg_dq_half<BW>(B, C::BQ_STEP, j, half, *(const uint4 *)(Cs + j * 32 + half * 16),
                           BW ? *(const uint32_t *)(Cs + C::C_BYTES + 4 * j) : 0u);
            if (!BW && half == 0) {
                const uint32_t sb = *(const uint32_t *)(Cs + C::C_BYTES + 4 * j);
                sf[b * BN + j] = make_float2(__uint_as_float(sb << 16), __uint_as_float(sb & 0xffff0000u));
            }
        }
    };

    constexpr int NR = C::NR;
    float acc[64], part[NR];
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < NR; i++) part[i] = 0.0f;

#pragma unroll
    for (int s = 0; s < WG_STAGES - 1; s++) {
        if (s < KT) load_stage(s, s);
        wg_commit();
    }
    wg_cpwait<WG_STAGES - 2>();
    if (TMA) mb_wait(&full[0], 0);
    __syncthreads();
    dequant(0, 0);
    wg_fence_proxy();
    __syncthreads();

    // Descriptors of stage 0 / buffer 0, step 0; a stage, buffer or step adds its byte offset / 16
    // to the address field (all of shared memory is below 256 KB: no carry out of the field).
    const uint64_t da0 = TMA ? wg_desc_sw128(smem + wg * 8192) : wg_desc(smem + wg * 8192, 128, 1024, swap);
    const uint64_t db0 = wg_desc(bq, 128, 256, swap);
    if constexpr (BW) { // part accumulates all of K (its last 4 columns: the activation sums, unused)
        for (int kt = 0; kt < KT; kt++) {
            const int st = kt % WG_STAGES, b = kt & 1;
            if (mma_on) { // warp-uniform: the whole warpgroup takes the same branch
                wgx_stage<NR>(part, da0, st * C::STAGE, TMA ? 32 : 256, db0, b * C::BQ_BYTES, C::BQ_STEP, kt);
                // Stage kt-1's MMA, the last reader of its A slot and of B buffer b^1, is complete in
                // every warpgroup: then the slot is refilled and the buffer rewritten.
                wgx_wait<NR, 1>(part);
            }
            __syncthreads();
            if (kt + WG_STAGES - 1 < KT) load_stage((kt + WG_STAGES - 1) % WG_STAGES, kt + WG_STAGES - 1);
            wg_commit();
            if (kt + 1 < KT) {
                wg_cpwait<WG_STAGES - 2>();
                if (TMA) mb_wait(&full[(kt + 1) % WG_STAGES], ((kt + 1) / WG_STAGES) & 1);
                __syncthreads(); // stage kt+1's loads have landed for every thread
                dequant((kt + 1) % WG_STAGES, b ^ 1);
                wg_fence_proxy();
                __syncthreads();
            }
        }
        wgx_wait<NR, 0>(part); // (nothing in flight where mma_on is false)
        wg_cpwait<0>();
        // Where the fp32 tile reaches the mbarriers (3 warpgroups), they are retired first (the
        // epilogue's first barrier orders this before the tile's stores).
        if (TMA && C::TILE > C::PIPE - NST * 8 - 1024 && tid == 0)
            for (int s = 0; s < NST; s++) asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(wg_smem(&full[s])) : "memory");
        if (flags & WG_EPI_REGS) wg_epilogue<BN / 8>(a, part, 16 * warp + g, t, m0, rows, n0);
        else wg_epilogue_smem<BN / 8, C::THREADS>(a, part, (float *)smem, 16 * warp + g, t, m0, rows, n0, BM);
    } else {
        for (int kt = 0; kt < KT; kt++) {
            const int st = kt % WG_STAGES, b = kt & 1;
            wg_fence(part);
#pragma unroll
            for (int s = 0; s < 4; s++)
                wg_mma(part, da0 + ((st * C::STAGE + s * 256) >> 4), db0 + ((b * WG_BQ_BYTES + s * WG_BQ_STEP) >> 4), s);
            wg_commit_mma(part);
            // While it runs: refill the slot of stage kt-1 and turn stage kt+1's codes into bf16.
            if (kt + WG_STAGES - 1 < KT) load_stage((kt + WG_STAGES - 1) % WG_STAGES, kt + WG_STAGES - 1);
            wg_commit();
            if (kt + 1 < KT) {
                wg_cpwait<WG_STAGES - 2>();
                __syncthreads();
                dequant((kt + 1) % WG_STAGES, b ^ 1);
            }
            wg_wait_mma(part);
            wg_fold(acc, part, (const float4 *)(sf + b * WG_BN), t);
            wg_fence_proxy();
            __syncthreads();
        }
        wg_cpwait<0>();
        wg_epilogue(a, acc, 16 * warp + g, t, m0, rows, n0);
    }
}

template <int WGS, int MINB, bool BW, int BN = WG_BN, int NST = 3, bool TMA = false>
static void wg_launch_t(const qg_args &a, int grid_x, cudaStream_t st, const wg_tmaps *tm = NULL) {
    using C = wg_cfg<WGS, BN, NST, TMA>;
    static bool attr = false;
    if (!attr) {
        cudaFuncSetAttribute(qgemm_wg_kernel<WGS, MINB, BW, BN, NST, TMA>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             C::SMEM);
        attr = true;
    }
    const int cols = a.epi == QG_GLU ? BN / 2 : BN;
    dim3 grid(grid_x, (a.N + cols - 1) / cols);
    qg_args ar = a;
    ar.raster = qg_rastered(a);
    if (ar.raster) grid = dim3(grid.y, grid.x);
    static int epi_regs = -1; // LILY_QG_EPI_REGS=1: the unrolled register epilogue (timing only)
    if (epi_regs < 0) epi_regs = getenv("LILY_QG_EPI_REGS") && atoi(getenv("LILY_QG_EPI_REGS")) == 1;
    const int flags = (lily_qg_wg_desc_swap ? WG_DESC_SWAP : 0) | (epi_regs ? WG_EPI_REGS : 0);
    static wg_tmaps none; // the non-TMA kernels' unused parameter
    qgemm_wg_kernel<WGS, MINB, BW, BN, NST, TMA><<<grid, C::THREADS, C::SMEM, st>>>(ar, flags, tm ? *tm : none);
}

// cuTensorMapEncodeTiled from the driver (through the runtime: no link to libcuda); NULL when the
// driver does not give it, and the wide tile then loads by cp.async.
static PFN_cuTensorMapEncodeTiled_v12000 wg_encoder(void);
void *lily_tmap_encoder(void) { return (void *)wg_encoder(); }
static PFN_cuTensorMapEncodeTiled_v12000 wg_encoder(void) {
    static PFN_cuTensorMapEncodeTiled_v12000 fn = NULL;
    static bool tried = false;
    if (!tried) {
        tried = true;
        void *p = NULL;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = (PFN_cuTensorMapEncodeTiled_v12000)p;
        cudaGetLastError();
    }
    return fn;
}

// X's map (qgemm_wg.cuh): shared by the wide tile's maps below and qgemm_gt.cu.
bool wg_make_xmap(const qg_args &a, CUtensorMap *m, int box_rows) {
    PFN_cuTensorMapEncodeTiled_v12000 enc = wg_encoder();
    if (!enc || a.x_rows || a.M <= 0 || ((uintptr_t)a.x & 15) || (a.ldx % 8) || a.ldx < a.K) return false;
    const cuuint32_t es[2] = {1, 1};
    const cuuint64_t xd[2] = {(cuuint64_t)a.K, (cuuint64_t)a.M}, xs[1] = {(cuuint64_t)a.ldx * 2};
    const cuuint32_t xb[2] = {WG_BK, (cuuint32_t)box_rows};
    return enc(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)a.x, xd, xs, xb, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The tensor maps of a wide-tile call with contiguous X rows (wg_tmaps): dense, or grouped with the
// groups' rows stored in order (the MoE gate|up after moe_prefill.cu's gather: a tile's rows past
// its group belong to the next group and are computed and dropped, past M they are zeros); the code
// map spans every group's rows. False when the call does not fit them (gathered rows, unaligned X, or no encoder): it then
// takes the cp.async path.
static bool wg_make_tmaps(const qg_args &a, wg_tmaps *tm, int bn, int bm = 128) {
    PFN_cuTensorMapEncodeTiled_v12000 enc = lily_qg_tma ? wg_encoder() : NULL;
    if (!enc || !wg_make_xmap(a, &tm->x, bm)) return false; // a box of the tile's rows
    const cuuint32_t es[2] = {1, 1};
    const bool glu = a.epi == QG_GLU;
    const cuuint64_t wrows = (cuuint64_t)a.N * (a.tile_off ? a.n_groups : 1);
    const cuuint64_t rb = (cuuint64_t)a.K / 2, wd[2] = {rb, wrows}, ws[1] = {rb};
    const cuuint32_t wb[2] = {32, (cuuint32_t)(glu ? bn / 2 : bn)};
    for (int m = 0; m < (glu ? 2 : 1); m++) {
        const dq_mat &w = m ? a.w2 : a.w;
        if (enc(m ? &tm->w2 : &tm->w, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)w.codes, wd, ws, wb, es,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
            return false;
    }
    return true;
}

// Which bf16-weight calls on 128-row tiles take the wide tile: those with a wave of blocks at least,
// except the grouped down projection (measured, docs/PERF.md 2026-11-30 fourth session; qgone TFLOP/s
// 128-column -> wide, both by cp.async: 4096 x 8192 x 2048 242 -> 289, 4096 x 2048 x 4096 228 -> 306,
// 4096 x 12352 x 2048 248 -> 296, 4096 x 2048 x 512 169 -> 183; but 1024 x 1024 x 2048, 32 wide
// blocks for 132 SMs, 78 -> 62; and in a 4K prefill the MoE down GEMM 23.8 -> 28.1 ms while the
// grouped gate|up gained 33.1 -> 27.7). grid_x: the launch's row tiles (grouped: the tile map's bound).
bool qgemm_wide_takes(const qg_args &a, int grid_x) {
    if (!lily_qg_bf16w || !lily_qg_wide) return false;
    if (lily_qg_wide == 2) return true;
    // The grouped down projection stays on 128 columns: wide it lost with cp.async (23.8 -> 28.1 ms
    // at 4K) and with tensor-map loads (23.8 -> 27.2 ms; prefill 4K 28.2K -> 27.6K tok/s).
    if (a.tile_off && a.epi != QG_GLU) return false;
    const int sms = cuda_sm_count();
    const int cols = a.epi == QG_GLU ? 128 : 256;
    return (long)grid_x * ((a.N + cols - 1) / cols) >= sms;
}

bool qgemm_wg_takes(const qg_args &a, int bm) {
    return lily_qg_wgmma && (bm == 64 || bm == 128 || (bm == 192 && lily_qg_bf16w)) && a.w.fmt != DQ_DENSE && a.w.bits == 4 && a.w.group % WG_BK == 0 && !(a.w.group & (a.w.group - 1)) &&
           a.K % WG_BK == 0 && a.N % 2 == 0 &&
           (a.epi != QG_GLU || (a.w2.bits == 4 && a.w2.group == a.w.group && a.w2.fmt == a.w.fmt));
}

void qgemm_wg_launch(const qg_args &a, int bm, int grid_x, cudaStream_t st) {
    // 64-row tiles: registers cut for 3 blocks per SM (measured against 2 blocks with all registers,
    // LILY_CUDA_WG_MINB of 2026-11-29: 158 vs 148 TFLOP/s at 4096 x 8192 x 2048, docs/PERF.md).
    // 128-row tiles with bf16 weights: two blocks an SM (128 registers; the shared-memory epilogue
    // would take 144 and one block). The wide tile: one block an SM (4 stages measured no faster).
    if (bm == 192) { // the merged map (qg_args.tile_rest): 3 warpgroups, bf16 weights only (qgemm_wg_takes)
        wg_tmaps tm;
        if (qgemm_wsp_takes(a) && wg_make_tmaps(a, &tm, 128, 64) && qgemm_wsp_launch(a, grid_x, st, tm))
            return; // persistent, warp-specialised (qgemm_wsp.cu)
        if (qgemm_wide_takes(a, grid_x)) {
            if (wg_make_tmaps(a, &tm, 256, 64)) wg_launch_t<3, 1, true, 256, 3, true>(a, grid_x, st, &tm);
            else wg_launch_t<3, 1, true, 256>(a, grid_x, st);
        } else {
            if (lily_qg_tma128 && wg_make_tmaps(a, &tm, 128, 64)) wg_launch_t<3, 1, true, WG_BN, 3, true>(a, grid_x, st, &tm);
            else wg_launch_t<3, 1, true>(a, grid_x, st);
        }
    } else if (lily_qg_bf16w) {
        wg_tmaps tm;
        if (bm == 128 && qgemm_wide_takes(a, grid_x)) {
            if (qgemm_rw_launch(a, grid_x, st)) {
                // the weights as the register operand (qgemm_rw.cu) where it takes the call
            } else if (wg_make_tmaps(a, &tm, 256)) {
                if (lily_qg_wsw) qgemm_wsw_launch(a, grid_x, st, tm); // warp-specialised (qgemm_wsw.cu)
                else wg_launch_t<2, 1, true, 256, 3, true>(a, grid_x, st, &tm);
            } else wg_launch_t<2, 1, true, 256>(a, grid_x, st);
        } else if (bm == 128 && (lily_qg_rw & 16) && qgemm_rw_launch(a, grid_x, st)) {
            // too few blocks for the wide tile's rule, on qgemm_rw.cu all the same (lily_qg_rw bit 16)
        } else if (bm == 128) {
            // 128 columns with tensor-map loads (LILY_CUDA_QG_TMA128, measured in docs/PERF.md): the grouped
            // down projection (rows in order) and the launches too small for the wide tile.
            if (lily_qg_tma128 && wg_make_tmaps(a, &tm, 128)) wg_launch_t<2, 2, true, WG_BN, 3, true>(a, grid_x, st, &tm);
            else wg_launch_t<2, 2, true>(a, grid_x, st);
        } else if (lily_qg_tma128 == 1 && !a.tile_off && wg_make_tmaps(a, &tm, 128, 64)) {
            // Dense 64-row tiles by tensor-map loads as well (short prompts, the narrow calls: prefill
            // 256-512 +1-2 %, GDN b and a 2.00 -> 1.78 ms at 4K); not the MoE's tails (down 3.09 -> 3.74
            // ms), docs/PERF.md, eleventh session.
            wg_launch_t<1, 3, true, WG_BN, 3, true>(a, grid_x, st, &tm);
        } else {
            wg_launch_t<1, 3, true>(a, grid_x, st);
        }
    } else if (bm == 128) {
        wg_launch_t<2, 1, false>(a, grid_x, st);
    } else {
        wg_launch_t<1, 3, false>(a, grid_x, st);
    }
}
