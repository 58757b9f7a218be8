// qgemm_gt.cu: the MoE's grouped down projection with the tokens on the MMA's N side and each expert
// group's activations resident in shared memory.
//
// Why: qgemm_wg.cu / qgemm_wsp.cu put the tokens on the wgmma's M side, in 64-row blocks. At 4K tokens
// an expert group holds ~128 +- 11 rows, and the 128- and 192-row tiles compute ~19 % more rows than
// there are (docs/PERF.md, nineteenth session). With the weights as the M side (dequantised straight
// into the A registers, as qgemm_rs.cu does) and the tokens as N, a group is padded to 16 rows only.
// The down projection has K = 512: a group's X (N x 512 bf16, 128 KB at N = 128) fits in shared memory,
// so a block loads it once and walks many weight rows over it; nothing but the 4-bit codes streams.
//
// Block: one expert group (blockIdx.x) and one part of the output columns (blockIdx.y, part_rows
// weight rows), WGS warpgroups. A group of more than nmax rows runs as pieces of equal size (each
// padded to a multiple of 16), one after another.
//   X: one thread copies the piece's rows by tensor map (boxes of 64 k x 16 rows, 128-byte swizzle;
//     stage kt = k 64 kt .. 64 kt + 63 at kt * npad * 128 bytes), one mbarrier a stage, so the first
//     tile's MMAs start as soon as their stage has landed. Rows past the group belong to the next one
//     (computed and dropped) or past the matrix (zeros).
//   Warpgroup w takes the part's 64-row weight tiles w, w + WGS, ...; per (tile, 64-k stage) 4 k16 steps
//     of one m64nNk16 MMA, N the piece's width, with A from registers. Each warp streams its 16 code rows
//     (32 bytes a stage) and their scale words by cp.async through a ring of its own (GT_RING stages; no
//     block barrier): the rows are stored so that lane (g, t)'s two rows, weight rows 2g and 2g + 1, sit
//     at positions g and g + 8 of a 48-byte stride (conflict-free 16-byte reads). A fragment register is
//     qgemm_rs.cu's: byte t of a code word, a byte permute, one LOP3 and two bf16x2 FMAs, rb(s q + b).
//   A stage's MMAs stay in flight while the next stage's fragments are built into the other register set
//     (wait_group 1 first, which retires the MMAs that read that set; a tile's last stage waits for all
//     before its epilogue). ptxas keeps that asynchronous only when it can see the branches around the
//     MMAs are warp-uniform: the warpgroup index comes through __shfl_sync, else it serialises every
//     wgmma (C7518). With LILY_QG_GT_ASYNC=0 each stage is retired (wait_group 0) before the next issues,
//     the other warpgroup filling the tensor pipe meanwhile: the kernel 288 -> 272 us a launch at 4K with
//     the overlap, the MoE block 1.011 -> 0.992 ms (docs/PERF.md, twenty-first session).
//   Epilogue per tile: the thread holds output columns 2g, 2g + 1 (weight rows 2g, 2g + 1 of its warp's
//     16) of tokens 8j + 2t + e; they go through a per-warp staging in shared memory, 32 tokens a round,
//     and leave as 16-byte stores of 8 columns of one row (gt_store), the routing weight applied there
//     (QG_SCALE_BF16) and the rows scattered to (token, slot) order through the row map read once a
//     piece.
//
// Measured (docs/PERF.md, twentieth and twenty-first sessions): at 4K tokens the MoE down projection
// 10.30 ms (pfprof) against qgemm_wsp.cu's 11.73 (covering the width by four chunk MMAs, 12.71 at first).
// About half of its time is outside the MMAs (the fragment build, the copies, the epilogue: without
// MMAs it still took ~0.18 of ~0.33 ms a layer), and with two warps a scheduler the two do not overlap
// well: Nsight Compute, the tensor pipe busy 32 % of the kernel's time.
//
// Rounding: the bf16-weight mode's (rb(s q + b), one fp32 accumulator over all of K, qg_store2_at's
// epilogue): the same products as qgemm_wg.cu's, summed in another order.
//
// Switch: LILY_CUDA_QG_GT (option LILY_CUDA_OPT_QG_GT, flag qg_gt; lily_qg_gt): 1 (the engine's default)
// = the MoE down projection here where its groups average at least GT_NARROW_MIN rows: the wide form from
// GT_MIN_ROWS, the narrow form below (pieces of at most 64 tokens, 32 accumulators, 122 registers, two
// blocks an SM: twice the warps to hide the stage loop's latency); 2 = always, the wide form (tests). Dev
// knobs, read once: LILY_QG_GT_PARTS (column parts a group, default 2), LILY_QG_GT_NMAX (rows a piece at
// most, a multiple of 16; 0 = as many as shared memory holds), LILY_QG_GT_DEV (timing knobs, wrong
// results: bit 0 no MMAs, 1 no code copies, 2 no stores), LILY_QG_GT_NARROW=1 (the narrow form always),
// LILY_QG_GT_LO (the narrow form's lower bound).
// Measured (docs/PERF.md, twenty-first session; prefill against the old kernels, LILY_CUDA_QG_GT=0): the
// wide form 2K +5.5 %, 4K +1.5 %, 8K +1.8 %, 32K +2.5 %; the narrow form 256 -5.5 % (groups of 8 rows:
// none), 512 +2.5 %, 1K +4 %, and at 4K -3 % (its pieces of 64 read the codes twice). Three warpgroups
// (the kernel's WGS; removed as a knob) lost with the overlap too: prefill 4K -1.1 % (twenty-second session).
#include "qgemm_wg.cuh"
#include "wgmma_rs.cuh"

int lily_qg_gt = 0;
int lily_qg_gt_parts = 0, lily_qg_gt_nmax = 0, lily_qg_gt_narrow = 0, lily_qg_gt_async = 0; // 0 = the env / the default (tests set them; async 1 on, 2 off)

#define GT_RING 5                    // code stages in flight a warp (6 measured the same)
#define GT_STG_LD 48                 // bytes a token row of the epilogue's staging takes (32 used)
#define GT_STG (32 * GT_STG_LD)      // a warp's epilogue staging: 32 tokens x 16 columns
#define GT_CLD 48                    // bytes a code row takes in a ring slot (32 used)
#define GT_SLOT (16 * GT_CLD + 64)   // a warp's stage: 16 code rows, then their 16 scale words
#define GT_NMAX 176                  // widest piece (tokens; the widest instruction of wgmma_rs.cuh)
#define GT_BOX 16                    // rows a tensor-map box of X
// lily_qg_gt 1: the wide form for groups of at least GT_MIN_ROWS rows on average, the narrow one from
// GT_NARROW_MIN (measurements above).
#define GT_MIN_ROWS 48
#define GT_NARROW_MIN 16

// A piece's token columns as one MMA a k16 step of width npad (16 .. 176, one switch a stage over the 11
// widths; the generated instructions of wgmma_rs.cuh). The accumulator layout is a prefix one (columns
// 0 .. N-1 in d[0 .. N/2) the same way for every N), so one array of GT_NACC registers and one epilogue
// serve all widths. (Instantiating the whole stage loop per width behind a switch took 255 registers and
// spilled; the first form covered the width by up to four MMAs of 64 + 64 + 32 + 16 tokens, 2.82 M HGMMA
// instructions a launch at 4K.)
#define GT_NACC 88

struct gt_piece {
    int dev;                         // timing knobs (LILY_QG_GT_DEV): 2 no code copies, 4 no stores
    int grp, rows, npad, parity;     // expert, real rows, rows padded to 16, the X barriers' phase
    int n_lo, n_hi, ntiles, KT;      // the part's weight rows [n_lo, n_hi), its 64-row tiles, K / 64
};

// One 64-k stage's MMAs at width N, straight-line (fence, 4 k16 steps, commit): a branch between two
// MMAs makes ptxas fence and scoreboard each one on its own (C7519).
template <int N, int NACC>
__device__ __forceinline__ void gt_stage(float *acc, const uint32_t *f, uint64_t db0, int kt) {
    wgacc<NACC>::fence(acc);
#pragma unroll
    for (int s = 0; s < 4; s++) wgrs<N>::mma(acc, f + 4 * s, db0 + (s * 32 >> 4), kt > 0 || s > 0);
    wgacc<NACC>::commit(acc);
}
// The stage for a piece of c = npad / 16 (1..11) token blocks (NOMMA: none, timing only).
template <bool NOMMA, int NACC>
__device__ __forceinline__ void gt_stage_c(float *acc, const uint32_t *f, uint64_t db, int kt, int c) {
    if (NOMMA) {
        wgacc<NACC>::fence(acc);
        wgacc<NACC>::commit(acc);
        return;
    }
    if constexpr (NACC == 32) { // the narrow form: pieces of at most 64 tokens
        switch (c) {
        case 1: gt_stage<16, NACC>(acc, f, db, kt); break;
        case 2: gt_stage<32, NACC>(acc, f, db, kt); break;
        case 3: gt_stage<48, NACC>(acc, f, db, kt); break;
        default: gt_stage<64, NACC>(acc, f, db, kt); break;
        }
    } else {
        switch (c) {
        case 1: gt_stage<16, NACC>(acc, f, db, kt); break;
        case 2: gt_stage<32, NACC>(acc, f, db, kt); break;
        case 3: gt_stage<48, NACC>(acc, f, db, kt); break;
        case 4: gt_stage<64, NACC>(acc, f, db, kt); break;
        case 5: gt_stage<80, NACC>(acc, f, db, kt); break;
        case 6: gt_stage<96, NACC>(acc, f, db, kt); break;
        case 7: gt_stage<112, NACC>(acc, f, db, kt); break;
        case 8: gt_stage<128, NACC>(acc, f, db, kt); break;
        case 9: gt_stage<144, NACC>(acc, f, db, kt); break;
        case 10: gt_stage<160, NACC>(acc, f, db, kt); break;
        default: gt_stage<176, NACC>(acc, f, db, kt); break;
        }
    }
}
// A finished tile's outputs, through the warp's staging (GT_STG bytes), 32 tokens a round: each thread
// writes its column pair (2g, 2g + 1) of tokens 8 j + 2 t + e as bf16 rb(v); then each lane takes 16
// bytes, 8 columns of one token, applies the token's routing weight (sc * rb(v), rounded: qg_store2_at's
// QG_SCALE_BF16 value) and stores them to the pair's row. A warp's store is then a 16-byte piece a lane
// of 16 output rows (32 contiguous bytes a row); the direct form (a 4-byte store per token and column
// pair, its row offset and scale looked up each time) took 0.12 of the kernel's 0.41 ms at 4K
// (LILY_QG_GT_DEV=4).
template <int NACC>
__device__ __forceinline__ void gt_store(const qg_args &a, const float *acc, const gt_piece &p, const int *s_orow,
                                         const float *s_scale, uint32_t stg, int col0, int lane) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int sub = 0; sub < (NACC / 4 + 3) / 4; sub++) {
        if (32 * sub >= p.npad) break; // uniform over the warp
#pragma unroll
        for (int jj = 0; jj < 4; jj++) {
            const int j = 4 * sub + jj; // acc[4 j ..] holds tokens 8 j ..; past npad they are not read below
            if (j < NACC / 4)
#pragma unroll
                for (int e = 0; e < 2; e++)
                    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(stg + (8 * jj + 2 * t + e) * GT_STG_LD + 4 * g),
                                 "r"(wg_pack(acc[4 * j + e], acc[4 * j + 2 + e]))
                                 : "memory");
        }
        __syncwarp();
#pragma unroll
        for (int q = lane; q < 64; q += 32) {
            const int rl = q >> 1, h = q & 1, r = 32 * sub + rl, col = col0 + 8 * h;
            if (r < p.rows && col < p.n_hi) {
                const uint4 v = wg_lds128(stg + rl * GT_STG_LD + 16 * h);
                const float sc = s_scale[r];
                uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int u = 0; u < 4; u++)
                    w[u] = wg_pack(sc * bf16_elem(w[u], 0), sc * bf16_elem(w[u], 1));
                *(uint4 *)((uint16_t *)a.y + (long)s_orow[r] * a.ldy + col) = make_uint4(w[0], w[1], w[2], w[3]);
            }
        }
        __syncwarp();
    }
}

// One piece on this warpgroup: its tiles, every stage, the epilogue of each tile.
template <int WGS, bool NOMMA, int NACC, bool ASYNC>
__device__ __forceinline__ void gt_run(const qg_args &a, const char *xs, char *ring_all, const int *s_orow,
                                       const float *s_scale, uint64_t *xbar, const gt_piece &p) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wq = warp & 3;
    // Warp-uniform through lane 0: ptxas takes a branch on threadIdx for a divergent one and serialises
    // the wgmma around it (C7518).
    const int wg = ASYNC ? __shfl_sync(0xffffffffu, warp >> 2, 0) : warp >> 2;
    const int g = lane >> 2, t = lane & 3;
    const int my_tiles = p.ntiles > wg ? (p.ntiles - wg + WGS - 1) / WGS : 0;
    const int items = my_tiles * p.KT;
    if (items == 0) return; // the whole warpgroup
    char *ring = ring_all + warp * (GT_RING * GT_SLOT);
    const uint32_t stg = wg_smem(ring_all + 4 * WGS * (GT_RING * GT_SLOT) + warp * GT_STG); // the epilogue's staging
    const long row_bytes = a.K / 2, wbase = (long)p.grp * a.N;
    const int ng = a.K / a.w.group, gshift = 31 - __clz(a.w.group);
    // Copies: lane -> code row cr = lane / 2 of the warp's 16 (16-byte half lane % 2), stored at position
    // (cr % 2) 8 + cr / 2; lanes 0..15 also copy row lane's scale word, at the same position rule.
    const int cr = lane >> 1, ch = lane & 1, cpos = (cr & 1) * 8 + (cr >> 1);
    const int spos = (lane & 1) * 8 + ((lane & 15) >> 1);
    // This lane's copy sources, found once and advanced by constants (the per-item address arithmetic was
    // a third of the stage loop's instructions): code row n_c of tile i_tt (+ WGS 64 rows a tile, + 32 bytes
    // a stage), scale row n_s; destinations in the ring slot at offset i_off.
    int i_kt = 0, i_n = 0, n_c = p.n_lo + wg * 64 + 16 * wq + cr, n_s = p.n_lo + wg * 64 + 16 * wq + (lane & 15);
    const char *c_row = (const char *)a.w.codes + (wbase + n_c) * row_bytes + ch * 16;
    const uint32_t *s_row = a.w.sb + (wbase + n_s) * ng;
    const uint32_t ring_s = wg_smem(ring), dst_c = ring_s + cpos * GT_CLD + ch * 16, dst_s = ring_s + 16 * GT_CLD + 4 * spos;
    uint32_t i_off = 0;
    auto issue = [&]() {
        if (i_n < items && !(p.dev & 2)) {
            const bool ok = n_c < p.n_hi, oks = n_s < p.n_hi;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst_c + i_off),
                         "l"(ok ? c_row + i_kt * 32 : (const char *)a.w.codes), "r"(ok ? 16 : 0));
            if (lane < 16)
                asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst_s + i_off),
                             "l"(oks ? s_row + ((i_kt * WG_BK) >> gshift) : a.w.sb), "r"(oks ? 4 : 0));
        }
        wg_commit();
        i_n++;
        i_off = i_off == (GT_RING - 1) * GT_SLOT ? 0 : i_off + GT_SLOT;
        if (++i_kt == p.KT) {
            i_kt = 0, n_c += WGS * 64, n_s += WGS * 64;
            c_row += (long)WGS * 64 * row_bytes, s_row += (long)WGS * 64 * ng;
        }
    };
    uint32_t c43;
    asm volatile("mov.b32 %0, 0x43004300;\n" : "=r"(c43));
    // Lane (g, t)'s A fragments of a stage (qgemm_rs.cu's build): rows at positions g and g + 8.
    auto build = [&](int slot, uint32_t (&f)[16]) {
        const uint32_t cs = ring_s + slot * GT_SLOT;
        const uint4 p0 = wg_lds128(cs + g * GT_CLD), p1 = wg_lds128(cs + g * GT_CLD + 16);
        const uint4 q0 = wg_lds128(cs + (g + 8) * GT_CLD), q1 = wg_lds128(cs + (g + 8) * GT_CLD + 16);
        uint32_t s0, b0, s1, b1;
        wg_sb_pairs(wg_lds32(cs + 16 * GT_CLD + 4 * g), s0, b0);
        wg_sb_pairs(wg_lds32(cs + 16 * GT_CLD + 4 * (g + 8)), s1, b1);
        const uint32_t wa[8] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
        const uint32_t wb[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
        for (int s = 0; s < 4; s++) {
            f[4 * s + 0] = wg_bf2_fma(wg_code_pair_c43(wa[2 * s], wa[2 * s] >> 4, t, c43), s0, b0);
            f[4 * s + 1] = wg_bf2_fma(wg_code_pair_c43(wb[2 * s], wb[2 * s] >> 4, t, c43), s1, b1);
            f[4 * s + 2] = wg_bf2_fma(wg_code_pair_c43(wa[2 * s + 1], wa[2 * s + 1] >> 4, t, c43), s0, b0);
            f[4 * s + 3] = wg_bf2_fma(wg_code_pair_c43(wb[2 * s + 1], wb[2 * s + 1] >> 4, t, c43), s1, b1);
        }
    };

    float acc[NACC];
#pragma unroll
    for (int i = 0; i < NACC; i++) acc[i] = 0.0f;
    uint32_t fa[16], fb[16];
    const uint64_t db0 = wg_desc_sw128(xs);
    const int stage_bytes = p.npad * 128, nc = p.npad >> 4;

#pragma unroll 1
    for (int i = 0; i < GT_RING; i++) issue();
    wg_cpwait<GT_RING - 1>();
    __syncwarp();
    build(0, fa);
    int kt = 0, tt = wg, slot = 0, j = 0; // the consume cursor
    auto step = [&](const uint32_t (&f)[16], uint32_t (&fn)[16]) {
        if (tt == wg) mb_wait(&xbar[kt], p.parity); // the first tile: has stage kt of X landed?
        gt_stage_c<NOMMA, NACC>(acc, f, db0 + ((kt * stage_bytes) >> 4), kt, nc);
        if constexpr (ASYNC) {
            // Stage j's MMAs stay in flight while stage j + 1's fragments are built into fn, which stage
            // j - 1's MMAs read: wait_group 1 retires those first. At a tile's end everything is retired
            // for the epilogue, inside its own branch (an epilogue after the branches meet made ptxas wait
            // for every stage, C7517).
            if (kt == p.KT - 1) {
                wgacc<NACC>::wait0(acc);
                wg_hold16(f);
                const int col0 = p.n_lo + tt * 64 + 16 * wq;
                if (!(p.dev & 4)) gt_store<NACC>(a, acc, p, s_orow, s_scale, stg, col0, lane);
                kt = 0, tt += WGS;
            } else {
                wgacc<NACC>::wait1(acc);
                kt++;
            }
            wg_hold16(fn);
            if (j + 1 < items) {
                wg_cpwait<GT_RING - 2>();
                __syncwarp();
                build(slot + 1 == GT_RING ? 0 : slot + 1, fn);
                issue();
            }
            if (++slot == GT_RING) slot = 0;
            j++;
            return;
        }
        if (j + 1 < items) {
            wg_cpwait<GT_RING - 2>(); // item j + 1 has landed (this lane's copies) ...
            __syncwarp();             // ... for every lane; and every lane is past build(j)
            build(slot + 1 == GT_RING ? 0 : slot + 1, fn);
            issue(); // item j + GT_RING into slot `slot`, which build(j) read
        }
        wgacc<NACC>::wait0(acc);
        wg_hold16(f);
        if (kt == p.KT - 1) { // the tile's epilogue
            const int col0 = p.n_lo + tt * 64 + 16 * wq;
            if (!(p.dev & 4)) gt_store<NACC>(a, acc, p, s_orow, s_scale, stg, col0, lane);
            kt = 0, tt += WGS;
        } else {
            kt++;
        }
        if (++slot == GT_RING) slot = 0;
        j++;
    };
#pragma unroll 1
    while (j < items) {
        step(fa, fb);
        if (j < items) step(fb, fa);
    }
    wg_cpwait<0>();
}

template <int WGS, bool NOMMA, int NACC, bool ASYNC>
__global__ void __launch_bounds__(128 * WGS, NACC <= 32 ? 2 : 1)
    qgemm_gt_kernel(const qg_args a, const __grid_constant__ CUtensorMap tmx, int nmax, int part_rows, int dev) {
    extern __shared__ __align__(1024) char smem[];
    const int KT = a.K / WG_BK, tid = threadIdx.x;
    char *ring = smem + (long)nmax * a.K * 2;
    int *s_orow = (int *)(ring + 4 * WGS * (GT_RING * GT_SLOT + GT_STG));
    float *s_scale = (float *)(s_orow + nmax);
    uint64_t *xbar = (uint64_t *)(s_scale + nmax);
    const int grp = blockIdx.x;
    const int g0 = __ldg(a.grp_off + grp), c = __ldg(a.grp_off + grp + 1) - g0;
    const int n_lo = blockIdx.y * part_rows;
    if (c <= 0 || n_lo >= a.N) return;
    gt_piece p;
    p.dev = dev, p.grp = grp, p.n_lo = n_lo, p.n_hi = min(a.N, n_lo + part_rows), p.KT = KT;
    p.ntiles = (p.n_hi - n_lo + 63) / 64;
    if (tid == 0) {
        for (int k = 0; k < KT; k++) mb_init(&xbar[k], 1);
        mb_init_fence();
    }
    __syncthreads();
    const int np = (c + nmax - 1) / nmax;
    for (int pc = 0; pc < np; pc++) {
        const int r0 = (int)((long)c * pc / np);
        p.rows = (int)((long)c * (pc + 1) / np) - r0;
        p.npad = (p.rows + 15) & ~15;
        p.parity = pc & 1;
        const int m0 = g0 + r0;
        // Lane k of warp 0 requests stage k (KT <= 8): one thread issuing all KT x npad / 16 boxes held
        // the block's barrier below for them (Nsight: 5 % of the kernel's stall samples there).
        if (tid < KT) {
            const int k = tid;
            mb_expect_tx(&xbar[k], p.npad * 128);
            for (int b = 0; b < p.npad / GT_BOX; b++)
                tma_g2s_2d(smem + k * p.npad * 128 + b * GT_BOX * 128, &tmx, k * WG_BK, m0 + b * GT_BOX, &xbar[k]);
        }
        for (int r = tid; r < p.npad; r += 128 * WGS) {
            const int o = r < p.rows ? __ldg(a.y_rows + m0 + r) : 0;
            s_orow[r] = o;
            s_scale[r] = r < p.rows ? __ldg(a.scale + o) : 0.0f;
        }
        __syncthreads();
        gt_run<WGS, NOMMA, NACC, ASYNC>(a, smem, ring, s_orow, s_scale, xbar, p);
        __syncthreads(); // every warpgroup's MMAs on this piece's X are retired before the next copies
    }
}

static int gt_env(const char *name, int def) {
    const char *e = getenv(name);
    return e ? atoi(e) : def;
}
// lily_qg_gt 1: the narrow form for groups of GT_NARROW_MIN .. GT_MIN_ROWS rows on average (LILY_QG_GT_LO
// overrides the lower bound, dev).
static int gt_narrow_min() {
    static int lo = -1;
    if (lo < 0) lo = gt_env("LILY_QG_GT_LO", GT_NARROW_MIN);
    return lo;
}

bool qgemm_gt_takes(const qg_args &a) {
    if (!lily_qg_gt || !lily_qg_bf16w || !a.grp_off || a.x_rows || a.epi != QG_SCALE_BF16 || !a.y_rows || !a.scale || a.w.fmt == DQ_DENSE ||
        a.w.bits != 4 || a.w.group % WG_BK || (a.w.group & (a.w.group - 1)) || a.K % WG_BK || a.K > 512 ||
        a.K <= 0 || a.N % 16 || a.N <= 0 || a.ldy % 8 || ((uintptr_t)a.y & 15) || a.n_groups <= 0 || ((uintptr_t)a.x & 15) || a.ldx % 8 ||
        a.ldx < a.K || !lily_tmap_encoder())
        return false;
    return lily_qg_gt == 2 || (long)a.M >= (long)gt_narrow_min() * a.n_groups;
}

template <int WGS, bool NOMMA, int NACC = GT_NACC, bool ASYNC = false>
static int gt_launch_t(const qg_args &a, const CUtensorMap &tm, int parts, int nmax_want, int dev, cudaStream_t st) {
    static int optin = 0;
    static bool attr = false;
    if (!optin) cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
    const int KT = a.K / WG_BK;
    const long fixed = 4L * WGS * (GT_RING * GT_SLOT + GT_STG) + 8L * KT;
    int nmax = (int)((optin - fixed) / ((long)a.K * 2 + 8)) & ~15;
    if (nmax > 2 * NACC) nmax = 2 * NACC;
    if (NACC <= 32) { // two blocks an SM: each within half the SM's shared memory (less the reserved 1 KB a block)
        int sm_total = 0;
        cudaDeviceGetAttribute(&sm_total, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0);
        const int fit = (int)((sm_total / 2 - 1024 - fixed) / ((long)a.K * 2 + 8)) & ~15;
        if (fit < nmax) nmax = fit;
    }
    if (nmax_want > 0 && nmax_want < nmax) nmax = nmax_want & ~15;
    if (nmax < 16) return lily_err_set(LILY_EINVAL, "qgemm_gt: K=%d leaves no room for X", a.K);
    const size_t smem = (size_t)nmax * a.K * 2 + fixed + 8L * nmax;
    if (!attr) {
        cudaFuncSetAttribute(qgemm_gt_kernel<WGS, NOMMA, NACC, ASYNC>, cudaFuncAttributeMaxDynamicSharedMemorySize, optin);
        attr = true;
    }
    const int part_rows = ((a.N + parts - 1) / parts + 63) & ~63;
    dim3 grid(a.n_groups, (a.N + part_rows - 1) / part_rows);
    qgemm_gt_kernel<WGS, NOMMA, NACC, ASYNC><<<grid, 128 * WGS, smem, st>>>(a, tm, nmax, part_rows, dev);
    return 0;
}

int qgemm_gt_launch(const qg_args &a, cudaStream_t st) {
    static int env_parts = -1, env_nmax = 0, env_dev = 0, env_narrow = 0, env_async = 0;
    if (env_parts < 0) {
        env_parts = gt_env("LILY_QG_GT_PARTS", 2);
        env_nmax = gt_env("LILY_QG_GT_NMAX", 0);
        env_dev = gt_env("LILY_QG_GT_DEV", 0);
        env_narrow = gt_env("LILY_QG_GT_NARROW", 0);
        env_async = gt_env("LILY_QG_GT_ASYNC", 1);
    }
    const int parts = lily_qg_gt_parts > 0 ? lily_qg_gt_parts : env_parts > 0 ? env_parts : 1;
    const int nmax = lily_qg_gt_nmax > 0 ? lily_qg_gt_nmax : env_nmax;
    if (a.M <= 0) return 0;
    CUtensorMap tm;
    if (!wg_make_xmap(a, &tm, GT_BOX)) return lily_err_set(LILY_EBACKEND, "qgemm_gt: cannot make the tensor map of X");
    if (env_dev & 1) return gt_launch_t<2, true>(a, tm, parts, nmax, env_dev, st);
    const bool narrow = lily_qg_gt_narrow > 0 || env_narrow || (lily_qg_gt == 1 && (long)a.M < (long)GT_MIN_ROWS * a.n_groups);
    if (lily_qg_gt_async == 1 || (lily_qg_gt_async == 0 && env_async)) {
        if (narrow) return gt_launch_t<2, false, 32, true>(a, tm, parts, nmax, env_dev, st);
        return gt_launch_t<2, false, GT_NACC, true>(a, tm, parts, nmax, env_dev, st);
    }
    if (narrow) return gt_launch_t<2, false, 32>(a, tm, parts, nmax, env_dev, st);
    return gt_launch_t<2, false>(a, tm, parts, nmax, env_dev, st);
}
