// qgemm_wsw.cu: the wide bf16-weight tile of qgemm_wg.cu (128 rows x 256 columns, m64n256k16, X and
// codes by tensor map) in warp-specialised form: a producer warpgroup dequantises while two consumer
// warpgroups only multiply. Same tiles, same products in the same order, same epilogue: the same bits
// as qgemm_wg_kernel<2, 1, true, 256, 3, true> (the kernel tests compare them bitwise).
//
// Why: in qgemm_wg.cu every warp takes each 64-k stage in turn through a serial chain (issue the MMAs,
// wait for the previous stage's, barrier, wait for the copies, barrier, dequantise, proxy fence,
// barrier). A merged 192-row tile, a third more MMAs, cost about what the 128-row one did (twelfth
// session, docs/PERF.md): the loop is not bound by the tensor cores. Here:
//   producer (warpgroup 2, 128 threads): thread 0 requests each stage's X tile and code rows by tensor
//     map into a ring of LS load slots (mbarrier lfull); each thread copies the scale words of its own
//     two columns (cp.async) and turns the stage's codes into bf16 rb(s q + b) in a ring of NB B
//     buffers (mbarrier bfull), then releases the load slot's codes (lempty);
//   consumers (warpgroups 0, 1; 64 rows each): wait for the stage's X (lfull) and B (bfull), issue its
//     4 MMAs, wait for the previous stage's, release that stage's X slot (lempty) and B buffer (bempty).
//     No block barrier in the loop.
// The producer dequantises stage kt, then requests stage kt + LS - 2 into the slot stage kt - 2 held
// (released by the consumers once they have issued stage kt - 1 and stage kt - 2 is complete): copies
// run LS - 2 stages ahead of the dequantisation, which runs up to NB - 1 ahead of the MMAs.
//
// Registers: 384 threads, one block an SM: 168 a thread (the consumers' 128 accumulators). Shared
// memory: 5 load slots of 25 KB (X 16 KB swizzled, codes 8 KB, scale words 1 KB) and 3 B buffers of
// 32 KB, 221 KB; the epilogue's fp32 tile (132 KB) overlays them.
//
// Measured (docs/PERF.md, fourteenth session): qgone 4096 x 8192 x 2048 409 TFLOP/s against qgemm_wg.cu's
// 396; prefill 4K +1.5 %. Under ncu shared memory is the busiest pipe (43 %) and the consumers still wait
// for the producer; its per-lane 4-byte copies of the scale words cost 32 shared wavefronts a warp
// (register-held 16-byte quads instead measured slower: branch wsw-quads). Two producer warpgroups do
// not compile: at 512 threads ptxas allocates 128 registers a thread whatever setmaxnreg asks, and the
// consumers need 154.
//
// Switch: LILY_CUDA_QG_WSW (option LILY_CUDA_OPT_QG_WSW, flag qg_wsw, default 1; lily_qg_wsw).
#include "qgemm_wg.cuh"

int lily_qg_wsw = 0;

#define WSW_BM 128
#define WSW_BN 256
#define WSW_LS 5 // load slots (X, codes, scale words)
#define WSW_NB 3 // bf16 B buffers
#define WSW_THREADS 384
#define WSW_NCONS 256 // consumer threads (warpgroups 0, 1)

struct wsw_cfg {
    static constexpr int A_BYTES = WSW_BM * 128;           // bf16 X rows, 64 k, 128-byte swizzle
    static constexpr int C_BYTES = WSW_BN * 32;            // 4-bit codes, 64 k per column
    static constexpr int S_BYTES = WSW_BN * 4;             // one scale|bias word per column
    static constexpr int LSTAGE = A_BYTES + C_BYTES + S_BYTES; // 25,600: a multiple of 1024
    static constexpr int BQ_STEP = (WSW_BN / 8) * 256;     // bf16 B of one k16 step
    static constexpr int BQ_BYTES = 4 * BQ_STEP;
    static constexpr int B_OFF = WSW_LS * LSTAGE;
    static constexpr int BAR_OFF = B_OFF + WSW_NB * BQ_BYTES;
    static constexpr int SMEM = BAR_OFF + 2 * (WSW_LS + WSW_NB) * 8 + 1024; // + slack to align to 1024
    static constexpr int TILE = WSW_BM * (WSW_BN + 8) * 4; // the epilogue's fp32 tile
};
static_assert(wsw_cfg::LSTAGE % 1024 == 0, "load slots keep the swizzle atom's 1024-byte alignment");
static_assert(wsw_cfg::TILE <= wsw_cfg::BAR_OFF, "the epilogue's tile overlays the rings, not the mbarriers");

__global__ void __launch_bounds__(WSW_THREADS, 1) qgemm_wsw_kernel(qg_args a, int swap, const __grid_constant__ wg_tmaps tm) {
    using C = wsw_cfg;
    extern __shared__ __align__(128) char smem_raw[];
    char *smem = (char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    uint64_t *lfull = (uint64_t *)(smem + C::BAR_OFF), *lempty = lfull + WSW_LS;
    uint64_t *bfull = lempty + WSW_LS, *bempty = bfull + WSW_NB;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const bool glu = a.epi == QG_GLU;
    const int n0 = wg_col_ix(a) * (glu ? WSW_BN / 2 : WSW_BN);
    int m0, rows, grp;
    if (!wg_block_rows(a, WSW_BM, &m0, &rows, &grp)) return;
    if (tid == 0) {
        for (int s = 0; s < WSW_LS; s++) mb_init(&lfull[s], 1), mb_init(&lempty[s], WSW_THREADS);
        for (int s = 0; s < WSW_NB; s++) mb_init(&bfull[s], WSW_THREADS - WSW_NCONS), mb_init(&bempty[s], WSW_NCONS);
        mb_init_fence();
    }
    __syncthreads();
    const int KT = a.K / WG_BK;
    const long wrow0 = (long)grp * a.N;
    float acc[128]; // the consumers' accumulators (every thread has the registers: one count a kernel)
#pragma unroll
    for (int i = 0; i < 128; i++) acc[i] = 0.0f;

    if (tid >= WSW_NCONS) {
        // ---- producer ----
        const int pt = tid - WSW_NCONS;
        const int ng = a.K / a.w.group, gshift = 31 - __clz(a.w.group);
        // This thread's two columns j = pt, pt + 128: their scale words' sources.
        const uint32_t *s_src[2];
        bool s_ok[2];
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const int j = pt + 128 * u;
            const dq_mat &m = (glu && j >= WSW_BN / 2) ? a.w2 : a.w;
            const int n = n0 + (glu ? (j & (WSW_BN / 2 - 1)) : j);
            s_ok[u] = n < a.N;
            s_src[u] = m.sb + (s_ok[u] ? (wrow0 + n) * ng : 0);
        }
        auto issue = [&](int c) { // stage c's copies into slot c % LS (the slot is free)
            char *As = smem + (c % WSW_LS) * C::LSTAGE, *Cs = As + C::A_BYTES;
            uint32_t *Ss = (uint32_t *)(Cs + C::C_BYTES);
            if (pt == 0) {
                mb_expect_tx(&lfull[c % WSW_LS], C::A_BYTES + C::C_BYTES);
                tma_g2s_2d(As, &tm.x, c * WG_BK, m0, &lfull[c % WSW_LS]);
                tma_g2s_2d(Cs, &tm.w, c * 32, (int)(wrow0 + n0), &lfull[c % WSW_LS]);
                if (glu) tma_g2s_2d(Cs + (WSW_BN / 2) * 32, &tm.w2, c * 32, (int)(wrow0 + n0), &lfull[c % WSW_LS]);
            }
#pragma unroll
            for (int u = 0; u < 2; u++) wg_cp4(Ss + pt + 128 * u, s_src[u] + ((c * WG_BK) >> gshift), s_ok[u]);
        };
#pragma unroll
        for (int c = 0; c < WSW_LS - 2; c++) {
            if (c < KT) issue(c); // the first use of every slot needs no empty wait
            wg_commit();
        }
        const uint32_t sm0 = wg_smem(smem);
        for (int kt = 0; kt < KT; kt++) {
            const int ls = kt % WSW_LS, b = kt % WSW_NB;
            mb_wait(&lfull[ls], (kt / WSW_LS) & 1); // X and codes of stage kt have landed
            wg_cpwait<WSW_LS - 3>();                 // and this thread's scale words
            if (kt >= WSW_NB) mb_wait(&bempty[b], (kt / WSW_NB - 1) & 1); // stage kt - NB's MMAs are done
            const uint32_t Cs = sm0 + ls * C::LSTAGE + C::A_BYTES, B = sm0 + C::B_OFF + b * C::BQ_BYTES;
            // Items (column j, half): j = pt + 128 (it & 1), half = it >> 1; qgemm_wg.cu's dequantisation.
            uint4 wv[4]; // every word first: the shared stores below are compiler barriers
#pragma unroll
            for (int it = 0; it < 4; it++) wv[it] = wg_lds128(Cs + (pt + 128 * (it & 1)) * 32 + (it >> 1) * 16);
            const uint32_t sbw[2] = {wg_lds32(Cs + C::C_BYTES + 4 * pt), wg_lds32(Cs + C::C_BYTES + 4 * (pt + 128))};
#pragma unroll
            for (int it = 0; it < 4; it++) wg_dq_half<true>(B, C::BQ_STEP, pt + 128 * (it & 1), it >> 1, wv[it], sbw[it & 1]);
            wg_fence_proxy(); // the bf16 B, for the consumers' MMAs
            mb_arrive(&bfull[b]);
            mb_arrive(&lempty[ls]); // this thread is done with the slot's codes and scale words
            // Stage kt + LS - 2 into the slot stage kt - 2 held: the consumers released it once they had
            // issued stage kt - 1 (whose B this loop made one pass ago), so this rarely waits; a slot
            // only one stage back made the dequantisation wait for the MMAs of stage kt - 1.
            const int c = kt + WSW_LS - 2;
            if (c < KT) {
                if (c >= WSW_LS) mb_wait(&lempty[c % WSW_LS], (c / WSW_LS - 1) & 1);
                issue(c);
            }
            wg_commit();
        }
        wg_cpwait<0>();
    } else {
        // ---- consumers: warpgroup wg multiplies rows 64 wg .. 64 wg + 63 ----
        const int wg = warp >> 2;
        const uint64_t da0 = wg_desc_sw128(smem + wg * 8192), db0 = wg_desc(smem + C::B_OFF, 128, 256, swap);
        for (int kt = 0; kt < KT; kt++) {
            const int ls = kt % WSW_LS, b = kt % WSW_NB;
            mb_wait(&lfull[ls], (kt / WSW_LS) & 1);
            mb_wait(&bfull[b], (kt / WSW_NB) & 1);
            wgx_stage<128>(acc, da0, ls * C::LSTAGE, 32, db0, b * C::BQ_BYTES, C::BQ_STEP, kt);
            wgx_wait<128, 1>(acc); // stage kt - 1's MMAs are complete: release its X slot and B buffer
            if (kt > 0) mb_arrive(&lempty[(kt - 1) % WSW_LS]), mb_arrive(&bempty[(kt - 1) % WSW_NB]);
        }
        wgx_wait<128, 0>(acc);
    }
    // Every thread is past its last read of the rings (the epilogue's first barrier); the consumers'
    // accumulators go out through the shared-memory tile as in qgemm_wg.cu.
    wg_epilogue_smem<WSW_BN / 8, WSW_THREADS, WSW_NCONS>(a, acc, (float *)smem, 16 * warp + (lane >> 2), lane & 3, m0,
                                                        rows, n0, WSW_BM);
}

void qgemm_wsw_launch(const qg_args &a, int grid_x, cudaStream_t st, const wg_tmaps &tm) {
    static bool attr = false;
    if (!attr) {
        cudaFuncSetAttribute(qgemm_wsw_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, wsw_cfg::SMEM);
        attr = true;
    }
    const int cols = a.epi == QG_GLU ? WSW_BN / 2 : WSW_BN;
    dim3 grid(grid_x, (a.N + cols - 1) / cols);
    qg_args ar = a;
    ar.raster = qg_rastered(a);
    if (ar.raster) grid = dim3(grid.y, grid.x);
    qgemm_wsw_kernel<<<grid, WSW_THREADS, wsw_cfg::SMEM, st>>>(ar, lily_qg_wg_desc_swap, tm);
}
