// qgemm_ws.cu: the wgmma GEMM of qgemm_wg.cu in warp-specialised form. Same products, exactness,
// arguments and epilogues; what changes is who waits for whom.
//
// In qgemm_wg.cu every warpgroup copies, dequantises, multiplies and folds in turn, with two block
// barriers per 64-k stage; ncu (docs/PERF.md) shows that chain: 64 % of cycles with no eligible
// warp. Here a block has CONS consumer warpgroups (64 rows each) and one producer warp pair:
//   producer: issues the cp.async copies of X rows, codes and scale words WS_LOOK stages ahead,
//     waits for a stage's copies, turns its codes into bf16 q and its scale words into floats in
//     the stage's own slot, and signals the slot full (mbarrier);
//   consumers: wait for a full slot, run the four m64n136k16 MMAs of the stage on it, fold, and
//     signal the slot empty (mbarrier), with no block barrier in the loop.
// So dequantisation runs under the MMAs of earlier stages, and one consumer's fold under the
// other's MMA. The ring has WS_STAGES slots, each with its X rows, codes, scales, bf16 B and
// (scale, bias) floats.
//
// Switch: LILY_CUDA_QG_WS=1 (lily_qg_ws; default 0). Written 2026-11-29 after that session's last
// device call: compiled, not yet run on a GPU. lily-gpu-test prefill runs it on every case the
// wgmma kernel takes, against the exact weights.
#include "qgemm_wg.cuh"

#define WS_PROD 64 // producer threads: two warps, after the consumers' warps
#define WS_LOOK 2  // stages the producer's copies run ahead of its dequantisation

int lily_qg_ws = -1;

template <int CONS>
struct ws_cfg {
    static constexpr int BM = 64 * CONS;
    static constexpr int THREADS = 128 * CONS + WS_PROD;
    static constexpr int STAGES = CONS == 1 ? 3 : 4;
    static constexpr int A_BYTES = BM * 128;
    static constexpr int C_OFF = A_BYTES;                 // codes: 32 bytes per column
    static constexpr int S_OFF = C_OFF + WG_BN * 32;      // scale words
    static constexpr int B_OFF = S_OFF + WG_BN * 4;       // bf16 B, 4 k16 steps
    static constexpr int F_OFF = B_OFF + WG_BQ_BYTES;     // (scale, bias) floats per column
    static constexpr int STAGE = F_OFF + WG_BN * 8;       // a multiple of 128
    static constexpr int SMEM = STAGES * STAGE + BM * 4 + 2 * STAGES * 8;
};

// The producer warps' own barrier (id 1; the consumers never use it).
__device__ __forceinline__ void ws_prod_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(WS_PROD) : "memory"); }

template <int CONS>
__global__ void __launch_bounds__(ws_cfg<CONS>::THREADS, CONS == 1 ? 2 : 1) qgemm_ws_kernel(qg_args a, int swap) {
    using C = ws_cfg<CONS>;
    constexpr int BM = C::BM, S = C::STAGES, NCONS = 128 * CONS;
    extern __shared__ __align__(128) char smem[];
    int *a_row = (int *)(smem + S * C::STAGE);
    uint64_t *full = (uint64_t *)(a_row + BM), *empty = full + S;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const bool glu = a.epi == QG_GLU;
    const int n0 = wg_col_ix(a) * (glu ? WG_BN / 2 : WG_BN);
    int m0, rows, grp;
    if (!wg_block_rows(a, BM, &m0, &rows, &grp)) return;
    wg_block_setup<C::THREADS>(a, BM, m0, rows, a_row, smem + C::B_OFF, S, C::STAGE);
    if (tid == 0)
        for (int s = 0; s < S; s++) mb_init(full + s, WS_PROD), mb_init(empty + s, NCONS);
    wg_fence_proxy();
    __syncthreads();
    const int KT = a.K / WG_BK;

    if (tid >= NCONS) {
        // ---- producer ----
        const int pt = tid - NCONS;
        const long wrow0 = (long)grp * a.N, row_bytes = (long)a.K / 2;
        const int ng = a.K / a.w.group, gshift = 31 - __clz(a.w.group);
        // X: chunk items i = pt + 64*it: row it*8 + pt%8, 16-byte column pt/8 (one core matrix per
        // eight consecutive threads). Codes: items pt + 64*it = (column, half). Scales: columns.
        constexpr int AIT = BM * 8 / WS_PROD, CIT = WG_BN * 2 / WS_PROD, SIT = WG_BN / WS_PROD;
        long a_off[AIT];
#pragma unroll
        for (int it = 0; it < AIT; it++) {
            const int xr = a_row[it * 8 + (pt & 7)];
            a_off[it] = xr >= 0 ? (long)xr * a.ldx + (pt >> 3) * 8 : -1;
        }
        const int a_dst = (pt >> 3) * 128 + (pt & 7) * 16; // + it*1024
        const char *c_src[CIT];
        uint32_t c_ok = 0;
#pragma unroll
        for (int it = 0; it < CIT; it++) {
            const int i = pt + WS_PROD * it, j = i >> 1, c = i & 1;
            const dq_mat &m = (glu && j >= 64) ? a.w2 : a.w;
            const int n = n0 + (glu ? (j & 63) : j);
            c_src[it] = (const char *)m.codes + (n < a.N ? (wrow0 + n) * row_bytes + c * 16 : 0);
            c_ok |= (n < a.N) << it;
        }
        const uint32_t *s_src[SIT];
        uint32_t s_ok = 0;
#pragma unroll
        for (int it = 0; it < SIT; it++) {
            const int j = pt + WS_PROD * it;
            const dq_mat &m = (glu && j >= 64) ? a.w2 : a.w;
            const int n = n0 + (glu ? (j & 63) : j);
            s_src[it] = m.sb + (n < a.N ? (wrow0 + n) * ng : 0);
            s_ok |= (n < a.N) << it;
        }
        auto issue = [&](int kt) {
            char *st = smem + (kt % S) * C::STAGE;
#pragma unroll
            for (int it = 0; it < AIT; it++)
                wg_cp16(st + it * 1024 + a_dst, a.x + (a_off[it] >= 0 ? a_off[it] + kt * WG_BK : 0), a_off[it] >= 0);
#pragma unroll
            for (int it = 0; it < CIT; it++)
                wg_cp16(st + C::C_OFF + (pt + WS_PROD * it) * 16, c_src[it] + kt * 32, (c_ok >> it) & 1);
#pragma unroll
            for (int it = 0; it < SIT; it++)
                wg_cp4(st + C::S_OFF + 4 * (pt + WS_PROD * it), s_src[it] + ((kt * WG_BK) >> gshift), (s_ok >> it) & 1);
        };
#pragma unroll
        for (int c = 0; c < WS_LOOK; c++) {
            if (c < KT) issue(c); // the first S uses of every slot need no empty wait
            wg_commit();
        }
        for (int kt = 0; kt < KT; kt++) {
            const int c = kt + WS_LOOK;
            if (c < KT) {
                if (c >= S) mb_wait(empty + c % S, (c / S - 1) & 1); // stage c - S consumed
                issue(c);
            }
            wg_commit();
            wg_cpwait<WS_LOOK>(); // this thread's copies of stage kt have landed
            ws_prod_sync();       // ... and every producer thread's
            char *st = smem + (kt % S) * C::STAGE;
            float2 *sf = (float2 *)(st + C::F_OFF);
#pragma unroll
            for (int it = 0; it < 4; it++) {
                const int i = pt + WS_PROD * it, j = i & (WG_BN - 1), half = i >> 7;
                const uint4 w = *(const uint4 *)(st + C::C_OFF + j * 32 + half * 16);
                const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const int word = 4 * half + q, s = word >> 1, h = word & 1;
                    *(uint4 *)(st + C::B_OFF + s * WG_BQ_STEP + (j >> 3) * 256 + h * 128 + (j & 7) * 16) =
                        wg_codes(ws[q]);
                }
                if (half == 0) {
                    const uint32_t sb = *(const uint32_t *)(st + C::S_OFF + 4 * j);
                    sf[j] = make_float2(__uint_as_float(sb << 16), __uint_as_float(sb & 0xffff0000u));
                }
            }
            wg_fence_proxy();      // the copies and the bf16 B, for the consumers' MMAs
            mb_arrive(full + kt % S);
        }
        wg_cpwait<0>();
        return;
    }

    // ---- consumers: warpgroup cw multiplies rows 64*cw .. 64*cw + 63 ----
    const int cw = warp >> 2, g = lane >> 2, t = lane & 3;
    float acc[64], part[68];
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < 68; i++) part[i] = 0.0f;
    const uint64_t da0 = wg_desc(smem + cw * 8192, 128, 1024, swap), db0 = wg_desc(smem + C::B_OFF, 128, 256, swap);
    for (int kt = 0; kt < KT; kt++) {
        const int slot = kt % S;
        mb_wait(full + slot, (kt / S) & 1);
        wg_fence(part);
#pragma unroll
        for (int s = 0; s < 4; s++)
            wg_mma(part, da0 + ((slot * C::STAGE + s * 256) >> 4), db0 + ((slot * C::STAGE + s * WG_BQ_STEP) >> 4), s);
        wg_commit_mma(part);
        wg_wait_mma(part);
        wg_fold(acc, part, (const float4 *)(smem + slot * C::STAGE + C::F_OFF), t);
        mb_arrive(empty + slot);
    }
    wg_epilogue(a, acc, 16 * warp + g, t, m0, rows, n0);
}

template <int CONS>
static void ws_launch_t(const qg_args &a, int grid_x, cudaStream_t st) {
    using C = ws_cfg<CONS>;
    static bool attr = false;
    if (!attr) {
        cudaFuncSetAttribute(qgemm_ws_kernel<CONS>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM);
        attr = true;
    }
    const int cols = a.epi == QG_GLU ? WG_BN / 2 : WG_BN;
    dim3 grid(grid_x, (a.N + cols - 1) / cols);
    qgemm_ws_kernel<CONS><<<grid, C::THREADS, C::SMEM, st>>>(a, lily_qg_wg_desc_swap);
}

bool qgemm_ws_on(void) {
    if (lily_qg_ws < 0) {
        const char *e = getenv("LILY_CUDA_QG_WS");
        lily_qg_ws = e ? atoi(e) != 0 : 0;
    }
    return lily_qg_ws != 0;
}

void qgemm_ws_launch(const qg_args &a, int bm, int grid_x, cudaStream_t st) {
    if (bm == 128) ws_launch_t<2>(a, grid_x, st);
    else ws_launch_t<1>(a, grid_x, st);
}
