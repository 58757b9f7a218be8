// qgemm_wsp.cu: the MoE's grouped GEMMs on the merged map (192-row tiles: 128-row tiles, a group's last
// one up to 192 rows; qg_args.tile_rest) as a persistent warp-specialised kernel: one block an SM walks
// a list of (row tile, column tile) pairs; an issuing thread and a dequantising warpgroup stream stage
// after stage across the tile boundaries, three consumer warpgroups only multiply and write their
// results from registers.
//
// Why: the expert down projection has K = 512, 8 stages a tile. A block a tile (qgemm_wg.cu) exposes the
// pipeline's fill and the epilogue on every tile: pfprof 4K, down 10.64 ms + tails 3.14 ms for 2.75
// TFLOP, ~200 TFLOP/s against ~415 for the dense GEMMs (docs/PERF.md, sixteenth session). Here the next
// tile's copies and dequantisation run while the consumers finish this one, and the output leaves by
// stores nothing waits for. Measured (pfprof, the down projection): 4K 13.78 -> 11.73 ms, 8K 23.95 ->
// 22.21; a 16K-token chunk 43.82 -> 44.27, so it takes groups of at most 256 rows on average
// (qgemm_wsp_takes).
//
//   one issuing thread (warp 16, lane 0): stage after stage, the codes (tensor map) into a ring of CS
//     code slots and the X boxes of the tile's live warpgroups (64 rows each) into a ring of XS X slots,
//     each as far ahead as its ring allows (mbarriers cfull / xfull);
//   dequantising threads (warpgroup 3, a column each): wait for the stage's codes, turn them into bf16
//     rb(s q + b) in a ring of NB B buffers (bfull; qgemm_wg.cu's wg_dq_half) and release the code slot
//     (cempty); each keeps its column's scale|bias words in a ring of its own, copied SR - 1 stages
//     ahead (cp.async);
//   consumers (warpgroups 0..2, 64 rows each, m64n128k16): wait for the stage's X (xfull) and B
//     (bfull), issue its 4 MMAs, wait for the previous stage's, release that stage's X slot and B
//     buffer (xempty, bempty). A warpgroup whose rows are past the tile's issues no MMA but keeps the
//     barrier protocol. At a tile's end each thread writes its rows (QG_SCALE_BF16: the routing weight
//     applied, scattered to (token, slot) order; QG_GLU: columns 0..63 gate, 64..127 up, SiLU(gate) *
//     up) from registers.
// The block's tiles are found once, at its start (a warp a tile), into a list in shared memory.
// Tiles: block b takes b, b + grid, ...; tile i is row tile i / ncol, column tile i % ncol (a row tile's
// column tiles side by side, so its X rows come from L2).
//
// Rounding as qgemm_wg.cu (bf16 weights, one fp32 accumulator over all of K, the epilogues of
// qg_store2_at / qg_glu); the instruction is m64n128k16 instead of m64n136k16 / m64n256k16. The tests
// compare with the CPU reference; the full-size logits of a prompt on 128-row MoE tiles came out bitwise
// equal to qgemm_wg.cu's (docs/PERF.md).
//
// The first form had one producer warpgroup issue the copies in its dequantisation loop, a shared slot
// of X and codes released by both sides, and each tile's map search in the loop: the dequantisation
// waited for the consumers' releases and the copies ran 3 stages ahead; no faster than qgemm_wg.cu
// (docs/PERF.md, sixteenth session). A 2-warpgroup form (128-row tiles, m64n256k16, 96 dequantising
// threads) for the gate|up and the dense calls was slower still (commit ad78162, reverted).
//
// Registers: 544 threads, one block an SM: at most 120 a thread (the consumers' 64 accumulators).
// Shared memory: XS X slots of 24 KB (3 boxes of 8 KB, 128-byte swizzle), CS code slots of 4 KB, the
// scale-word rings (4 KB), NB B buffers of 16 KB, the tile list (4 KB).
//
// Switch: LILY_CUDA_QG_WSP (option LILY_CUDA_OPT_QG_WSP, flag qg_wsp; lily_qg_wsp): bit 0 the down
// projection (then on the merged map too; the default), bit 1 the gate|up (pfprof 4K 17.29 -> 19.84 ms:
// slower than qgemm_wg.cu's 3-warpgroup wide tile, whose m64n256 reads half the X per product).
#include "qgemm_wg.cuh"

int lily_qg_wsp = 0;

// LILY_WSP_ABL (timing only, wrong results): parts of the kernel left out, to see what bounds it.
enum { WSP_ABL_X = 1, WSP_ABL_DQ = 2, WSP_ABL_MMA = 4 };

#define WSP_BM 192
#define WSP_BN 128
#define WSP_XS 5 // X slots (released by the consumers)
#define WSP_CS 6 // code slots (released by the dequantising threads)
#define WSP_SR 8 // scale words: a ring a dequantising thread keeps for its own column
#define WSP_NB 4 // bf16 B buffers
#define WSP_NCONS 384 // consumer threads (warpgroups 0..2)
#define WSP_NDQ 128   // dequantising threads (warpgroup 3), then one issuing warp
#define WSP_THREADS (WSP_NCONS + WSP_NDQ + 32)
#define WSP_MAXT 256 // tiles a block's list holds

struct wsp_cfg {
    static constexpr int X_BYTES = WSP_BM * 128; // bf16 X rows, 64 k, 128-byte swizzle (3 boxes of 64 rows)
    static constexpr int C_BYTES = WSP_BN * 32;  // 4-bit codes, 64 k per column
    static constexpr int BQ_STEP = (WSP_BN / 8) * 256; // bf16 B of one k16 step
    static constexpr int BQ_BYTES = 4 * BQ_STEP;
    static constexpr int C_OFF = WSP_XS * X_BYTES;
    static constexpr int S_OFF = C_OFF + WSP_CS * C_BYTES;
    static constexpr int B_OFF = S_OFF + WSP_SR * WSP_BN * 4;
    static constexpr int T_OFF = B_OFF + WSP_NB * BQ_BYTES;
    static constexpr int BAR_OFF = T_OFF + WSP_MAXT * 16;
    static constexpr int SMEM = BAR_OFF + 2 * (WSP_XS + WSP_CS + WSP_NB) * 8 + 1024; // + slack to align to 1024
};
static_assert(wsp_cfg::X_BYTES % 1024 == 0, "X slots keep the swizzle atom's 1024-byte alignment");
static_assert(wsp_cfg::SMEM <= 227 * 1024, "one block an SM");

// Row tile and column tile of tile ti of the launch: false past the map's count.
struct wsp_tile {
    int m0, rows, grp, n0;
};
__device__ __forceinline__ bool wsp_tile_at(const qg_args &a, int ti, int ncol, int cols, wsp_tile *t) {
    const int rt = ti / ncol;
    if (!wg_tile_rows(a, WSP_BM, rt, &t->m0, &t->rows, &t->grp)) return false;
    t->n0 = (ti - rt * ncol) * cols;
    return true;
}

template <int EPI>
__global__ void __launch_bounds__(WSP_THREADS, 1) qgemm_wsp_kernel(qg_args a, int swap, int abl, const __grid_constant__ wg_tmaps tm) {
    using C = wsp_cfg;
    constexpr bool glu = EPI == QG_GLU;
    constexpr int cols = glu ? WSP_BN / 2 : WSP_BN; // output columns a tile
    extern __shared__ __align__(128) char smem_raw[];
    char *smem = (char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    uint64_t *xfull = (uint64_t *)(smem + C::BAR_OFF), *xempty = xfull + WSP_XS;
    uint64_t *cfull = xempty + WSP_XS, *cempty = cfull + WSP_CS;
    uint64_t *bfull = cempty + WSP_CS, *bempty = bfull + WSP_NB;
    wsp_tile *tiles = (wsp_tile *)(smem + C::T_OFF);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (tid == 0) {
        for (int s = 0; s < WSP_XS; s++) mb_init(&xfull[s], 1), mb_init(&xempty[s], WSP_NCONS);
        for (int s = 0; s < WSP_CS; s++) mb_init(&cfull[s], 1), mb_init(&cempty[s], WSP_NDQ);
        for (int s = 0; s < WSP_NB; s++) mb_init(&bfull[s], WSP_NDQ), mb_init(&bempty[s], WSP_NCONS);
        mb_init_fence();
    }
    const int KT = a.K / WG_BK, ncol = (a.N + cols - 1) / cols;
    const int ntiles = __ldg(a.tile_off + a.n_groups) * ncol, G = gridDim.x;
    const int mine = (int)blockIdx.x < ntiles ? min((ntiles - 1 - (int)blockIdx.x) / G + 1, WSP_MAXT) : 0;
    const int S = mine * KT; // this block's stages
    // The block's tile list, found once (a warp a tile: the map search takes a warp).
    for (int i = warp; i < mine; i += WSP_THREADS / 32) {
        wsp_tile t;
        wsp_tile_at(a, (int)blockIdx.x + i * G, ncol, cols, &t);
        if (lane == 0) tiles[i] = t;
    }
    __syncthreads();

    if (tid >= WSP_NCONS + WSP_NDQ) {
        // ---- the issuing thread: codes and X of stage after stage, as far ahead as their rings allow ----
        if (lane != 0) return;
        for (int c = 0, i = 0, ck = 0; c < S; c++) {
            const wsp_tile t = tiles[i];
            const int cs = c % WSP_CS, xs = c % WSP_XS;
            if (c >= WSP_CS) mb_wait(&cempty[cs], (c / WSP_CS - 1) & 1);
            char *Cs = smem + C::C_OFF + cs * C::C_BYTES;
            const int wr = (int)((long)t.grp * a.N + t.n0);
            mb_expect_tx(&cfull[cs], C::C_BYTES);
            tma_g2s_2d(Cs, &tm.w, ck * 32, wr, &cfull[cs]);
            if (glu) tma_g2s_2d(Cs + (WSP_BN / 2) * 32, &tm.w2, ck * 32, wr, &cfull[cs]);
            if (c >= WSP_XS) mb_wait(&xempty[xs], (c / WSP_XS - 1) & 1);
            char *Xs = smem + xs * C::X_BYTES;
            const int nx = (abl & WSP_ABL_X) ? 0 : (t.rows + 63) / 64; // the live warpgroups' boxes
            mb_expect_tx(&xfull[xs], nx * 8192);
            for (int j = 0; j < nx; j++) tma_g2s_2d(Xs + j * 8192, &tm.x, ck * WG_BK, t.m0 + 64 * j, &xfull[xs]);
            if (++ck == KT) ck = 0, i++;
        }
        return;
    }
    if (tid >= WSP_NCONS) {
        // ---- dequantising threads: column pt of every tile ----
        const int pt = tid - WSP_NCONS;
        const int ng = a.K / a.w.group, gshift = 31 - __clz(a.w.group);
        const uint32_t sm0 = wg_smem(smem);
        const uint32_t Sw = sm0 + C::S_OFF + 4 * pt; // this thread's scale words, WSP_BN * 4 bytes a stage apart
        auto scale_copy = [&](int c) { // stage c's scale|bias word of this thread's column into ring slot c % SR
            const int i = c / KT, ck = c - i * KT;
            const wsp_tile &t = tiles[i];
            const dq_mat &m = (glu && pt >= WSP_BN / 2) ? a.w2 : a.w;
            const int n = t.n0 + (glu ? (pt & (WSP_BN / 2 - 1)) : pt);
            const bool ok = n < a.N;
            const uint32_t *src = m.sb + (ok ? ((long)t.grp * a.N + n) * ng + ((ck * WG_BK) >> gshift) : 0);
            asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(Sw + (c % WSP_SR) * WSP_BN * 4), "l"(src),
                         "r"(ok ? 4 : 0));
        };
#pragma unroll 1
        for (int c = 0; c < WSP_SR - 1; c++) {
            if (c < S) scale_copy(c);
            wg_commit();
        }
        for (int g = 0; g < S; g++) {
            const int cs = g % WSP_CS, b = g % WSP_NB;
            mb_wait(&cfull[cs], (g / WSP_CS) & 1); // the codes of stage g have landed
            wg_cpwait<WSP_SR - 2>();                // and this thread's scale word
            if (g >= WSP_NB) mb_wait(&bempty[b], (g / WSP_NB - 1) & 1); // stage g - NB's MMAs are done
            const uint32_t Cs = sm0 + C::C_OFF + cs * C::C_BYTES, B = sm0 + C::B_OFF + b * C::BQ_BYTES;
            const uint4 w0 = wg_lds128(Cs + pt * 32), w1 = wg_lds128(Cs + pt * 32 + 16);
            const uint32_t sbw = wg_lds32(Sw + (g % WSP_SR) * WSP_BN * 4);
            if (!(abl & WSP_ABL_DQ)) {
                wg_dq_half<true>(B, C::BQ_STEP, pt, 0, w0, sbw);
                wg_dq_half<true>(B, C::BQ_STEP, pt, 1, w1, sbw);
            }
            wg_fence_proxy(); // the bf16 B, for the consumers' MMAs
            mb_arrive(&bfull[b]);
            mb_arrive(&cempty[cs]); // this thread is done with the slot's codes
            // Stage g + SR - 1's word into the ring slot stage g - 1 held (this thread read it last pass).
            if (g + WSP_SR - 1 < S) scale_copy(g + WSP_SR - 1);
            wg_commit();
        }
        wg_cpwait<0>();
        return;
    }
    // ---- consumers: warpgroup wg multiplies rows 64 wg .. 64 wg + 63 of each tile ----
    const int wg = warp >> 2, g8 = lane >> 2, t = lane & 3;
    const int r0 = 64 * wg + 16 * (warp & 3) + g8; // this thread's rows r0, r0 + 8 of a tile
    const uint64_t da0 = wg_desc_sw128(smem + wg * 8192), db0 = wg_desc(smem + C::B_OFF, 128, 256, swap);
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = 0.0f;
    int g = 0; // the block's stage
    for (int i = 0; i < mine; i++) {
        const wsp_tile tl = tiles[i];
        const int live = (abl & WSP_ABL_MMA) ? 0 : (tl.rows + 63) / 64;
        // Warp-uniform through lane 0 (a divergent-looking branch around wgmma serialises them all, C7518).
        const bool on = __shfl_sync(0xffffffffu, wg, 0) < __shfl_sync(0xffffffffu, live, 0);
        // The epilogue's rows: output row and routing weight, requested now, used after the k loop.
        int orow[2] = {-1, -1};
        float sc[2] = {0.0f, 0.0f};
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = r0 + 8 * h;
            if (r < tl.rows) {
                const int p = tl.m0 + r;
                orow[h] = a.y_rows ? __ldg(a.y_rows + p) : p;
                if (EPI == QG_SCALE_BF16) sc[h] = __ldg(a.scale + orow[h]);
            }
        }
        for (int kt = 0; kt < KT; kt++, g++) {
            const int xs = g % WSP_XS, b = g % WSP_NB;
            mb_wait(&xfull[xs], (g / WSP_XS) & 1);
            mb_wait(&bfull[b], (g / WSP_NB) & 1);
            if (on) wgx_stage<64>(acc, da0, xs * C::X_BYTES, 32, db0, b * C::BQ_BYTES, C::BQ_STEP, kt);
            wgx_wait<64, 1>(acc); // stage g - 1's MMAs are complete: release its X slot and B buffer
            if (kt > 0) mb_arrive(&xempty[(g - 1) % WSP_XS]), mb_arrive(&bempty[(g - 1) % WSP_NB]);
        }
        wgx_wait<64, 0>(acc); // the tile's last stage: release it now, before the stores
        mb_arrive(&xempty[(g - 1) % WSP_XS]), mb_arrive(&bempty[(g - 1) % WSP_NB]);
        if (!on) continue;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            if (orow[h] < 0) continue;
            uint16_t *yr = (uint16_t *)a.y + (long)orow[h] * a.ldy;
            if (EPI == QG_GLU) {
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const int col = tl.n0 + 8 * j + 2 * t;
                    if (col < a.N)
                        *(uint32_t *)(yr + col) = wg_pack(qg_glu(acc[4 * j + 2 * h], acc[4 * (j + 8) + 2 * h]),
                                                          qg_glu(acc[4 * j + 2 * h + 1], acc[4 * (j + 8) + 2 * h + 1]));
                }
            } else {
#pragma unroll
                for (int j = 0; j < 16; j++) {
                    const int col = tl.n0 + 8 * j + 2 * t;
                    if (col < a.N)
                        *(uint32_t *)(yr + col) = wg_pack(sc[h] * rb(acc[4 * j + 2 * h]), sc[h] * rb(acc[4 * j + 2 * h + 1]));
                }
            }
        }
    }
}

bool qgemm_wsp_launch(const qg_args &a, int max_tiles, cudaStream_t st, const wg_tmaps &tm) {
    if ((a.epi != QG_SCALE_BF16 && a.epi != QG_GLU) || !a.tile_off || !a.tile_rest) return false;
    static bool attr = false;
    if (!attr) {
        cudaFuncSetAttribute(qgemm_wsp_kernel<QG_SCALE_BF16>, cudaFuncAttributeMaxDynamicSharedMemorySize, wsp_cfg::SMEM);
        cudaFuncSetAttribute(qgemm_wsp_kernel<QG_GLU>, cudaFuncAttributeMaxDynamicSharedMemorySize, wsp_cfg::SMEM);
        attr = true;
    }
    const int cols = a.epi == QG_GLU ? WSP_BN / 2 : WSP_BN;
    const long most = (long)max_tiles * ((a.N + cols - 1) / cols);
    const int grid = (int)(most < cuda_sm_count() ? most : cuda_sm_count());
    if (grid <= 0) return true;
    if ((most + grid - 1) / grid > WSP_MAXT) return false; // more tiles a block than its list holds
    static int abl = -1;
    if (abl < 0) abl = getenv("LILY_WSP_ABL") ? atoi(getenv("LILY_WSP_ABL")) : 0;
    if (a.epi == QG_GLU) qgemm_wsp_kernel<QG_GLU><<<grid, WSP_THREADS, wsp_cfg::SMEM, st>>>(a, lily_qg_wg_desc_swap, abl, tm);
    else qgemm_wsp_kernel<QG_SCALE_BF16><<<grid, WSP_THREADS, wsp_cfg::SMEM, st>>>(a, lily_qg_wg_desc_swap, abl, tm);
    return true;
}
