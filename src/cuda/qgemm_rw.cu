// qgemm_rw.cu: the dense bf16-weight GEMM with the weights as the warpgroup MMA's register operand, a
// wide tile (256 weight rows x 128 tokens) and a producer that only issues copies. Y^T = W X^T: the
// same products as qgemm_wsw.cu's wide tile (rb(s q + b) weights, one fp32 accumulator over all of K),
// the same tile per block (128 X rows, 256 output columns), the same epilogue; the operands swapped.
//
// Why: qgemm_wsw.cu (the default for these calls) dequantises each 64-k stage into a bf16 B tile in
// shared memory, which both consumer warpgroups read back: under Nsight Compute shared memory is its
// busiest pipe and the consumers wait for the producer's dequantisation (docs/PERF.md, fourteenth
// session; ~410 TFLOP/s). The swapped-operand kernel of the third session (qgemm_rs.cu) needs no bf16
// weights in shared memory, but it copied its activation tile once per 128 weight rows with cp.async
// and was bound by those copies (L2 72 % busy). Here a block covers 256 weight rows, so each X tile
// serves twice the rows (the same L2 traffic per product as qgemm_wsw.cu), and one thread issues every
// copy by tensor map:
//   producer (warpgroup 2; 40 registers by setmaxnreg, 24 with NX 144): stage kt's X tile (64 k x 128
//     rows, 128-byte swizzle: the MMA's B operand) and the 256 code rows (32 bytes a row, 32-byte
//     swizzle) into a ring of RW_LS load slots (mbarrier lfull); every 4th stage the next 4 stages'
//     scale|bias words of the 256 rows (a box of 4 words a row) into a ring of 2 scale slots (sfull).
//   consumers (warpgroups 0, 1; 232 registers, 240 with NX 144): warpgroup w multiplies weight rows
//     128 w .. 128 w + 127 as two m64 tiles, each k16 step one m64n128k16 MMA a tile with A from
//     registers; a lane builds its A fragments from the code rows in shared memory (byte t of each code
//     word: qgemm_rs.cu's build, qgemm_gt.cu's LOP3) while the previous stage's MMAs run; wait_group 1
//     retires the stage before, whose slot is then released (lempty), and whose fragment registers the
//     next build reuses.
// QG_GLU: rows 0 .. 127 of the block are the gate rows of its 128 columns (w), rows 128 .. 255 the up
// rows (w2), so the epilogue's tile has qgemm_wsw.cu's layout (gate half, then up half).
//
// Bank conflicts: a warp reads code rows 16 q + g (g = 0 .. 7, each quad of lanes one row); at 32 bytes
// a row, rows g and g + 4 share banks unless the 16-byte halves are swapped every 4 rows, which is the
// 32-byte swizzle the tensor map writes (a half c of row r at 32 r + 16 (c ^ (r / 4 % 2))).
//
// Grouped calls (the MoE): a.tile_off is the routing's plain map of 128-row tiles over whole groups
// (tile_off_p); a tile's rows, padded to 16, are the MMA's width (one switch a stage over N = 16 .. 128;
// the accumulator layout of wgmma_rs.cuh is a prefix one), the code and scale rows those of its group.
//
// Shapes: X rows by tensor map (contiguous: dense, or the MoE's rows gathered into expert order), 4-bit
// codes in groups of 64, K a multiple of 256 (whole scale boxes); other calls stay on the other kernels.
//
// Measured (docs/PERF.md, twenty-fourth session): qgone 4096 x 8192 x 2048 410 -> 516 TFLOP/s against
// qgemm_wsw.cu; prefill 4K +5.5 % (dense), +3.6 % more with the MoE gate|up here; the down projection
// here (K = 512, 8 stages a block) lost to qgemm_gt.cu. Bitwise the same results as the kernels it replaces.
// The folded map (twenty-fifth session): prefill 4K +1.6 / +2.3 % (two alternating pairs), the same
// logits byte for byte at 4096 tokens: a group of 129..144 rows is one block, not a full one and a
// nearly empty one that costs about as much.
//
// Switch: LILY_CUDA_QG_RW (option LILY_CUDA_OPT_QG_RW, flag qg_rw; lily_qg_rw), a bit mask: 1 dense, 2 the
// MoE gate|up, 4 the MoE down, 16 dense calls below the wide tile's rule, 32 the grouped calls on the
// folded map (NX 144 below); default 35.
#include <cudaTypedefs.h> // PFN_cuTensorMapEncodeTiled_v12000

#include "qgemm_wg.cuh"
#include "wgmma_rs.cuh"

int lily_qg_rw = 0;
long lily_qg_rw_launches = 0; // launches so far (tests check that a pass ran here)

#define RW_BM 128      // X rows (tokens) a block: the MMA's N
#define RW_BN 256      // weight rows (output columns) a block
#define RW_LS 8        // load slots
#define RW_SQ 2        // scale slots (4 stages each)
#define RW_THREADS 384 // 2 consumer warpgroups, 1 producer warpgroup
#define RW_LD 260      // floats a token row of the epilogue's tile: stores of lanes (g, t) hit banks g + 8 t

// NX: the most tokens a block takes (128; 144 for a group's last tile with a tail of up to 16 rows folded in).
template <int NX> struct rw_cfg {
    static constexpr int X_BYTES = NX * 128;                     // bf16 X, 64 k a row, 128-byte swizzle
    static constexpr int C_BYTES = RW_BN * 32;                   // codes, 64 k a row, 32-byte swizzle
    static constexpr int SLOT = X_BYTES + C_BYTES;               // 24,576 (NX 128): a multiple of 1024
    static constexpr int S_BYTES = RW_BN * 16;                   // 4 scale words a row
    static constexpr int S_OFF = RW_LS * SLOT;
    static constexpr int BAR_OFF = S_OFF + RW_SQ * S_BYTES;
    static constexpr int SMEM = BAR_OFF + 2 * (RW_LS + RW_SQ) * 8 + 1024; // + slack to align to 1024
    static constexpr int TILE = NX * RW_LD * 4;                  // the epilogue's fp32 tile
    static_assert(SLOT % 1024 == 0, "load slots keep the swizzle atoms' alignment");
    static_assert(TILE <= S_OFF, "the epilogue's tile overlays the load slots only");
};

// X (box 64 k x 128 rows), the code rows of w and w2 (box 32 bytes x 256 or 128 rows), their scale words
// (box 4 words x 256 or 128 rows).
struct rw_tmaps {
    CUtensorMap x, w, w2, s, s2;
};

// Keeps a stage's 32 fragment registers live up to this point (wg_hold16).
__device__ __forceinline__ void rw_hold(const uint32_t (&f)[32]) { wg_hold16(f), wg_hold16(f + 16); }

// The accumulators' register fences (wgx_fence / wgx_commit / wgx_wait of qgemm_wg.cuh) for NR = 128 or 144.
#define RW_D144 WG_D128, WG_F4(128), WG_F4(132), WG_F4(136), WG_F4(140)
template <int NR> __device__ __forceinline__ void rw_fence(float *d) {
    if constexpr (NR == 144) asm volatile("wgmma.fence.sync.aligned;\n" : RW_D144 ::"memory");
    else wgx_fence<128>(d);
}
template <int NR> __device__ __forceinline__ void rw_commit(float *d) {
    if constexpr (NR == 144) asm volatile("wgmma.commit_group.sync.aligned;\n" : RW_D144 ::"memory");
    else wgx_commit<128>(d);
}
template <int NR, int LEFT> __device__ __forceinline__ void rw_wait(float *d) {
    if constexpr (NR == 144) asm volatile("wgmma.wait_group.sync.aligned %144;\n" : RW_D144 : "n"(LEFT) : "memory");
    else wgx_wait<128, LEFT>(d);
}

// One 64-k stage's 8 MMAs (2 tiles x 4 k16 steps) at token width N, straight-line between the fence and the
// commit (a branch between two MMAs makes ptxas fence each on its own, C7519). The accumulator layout is a
// prefix one (wgmma_rs.cuh): tile u's columns 0 .. N - 1 are acc[NX / 2 u .. NX / 2 u + N / 2) for every N.
template <int N, int NX>
__device__ __forceinline__ void rw_stage(float *acc, const uint32_t *f, uint64_t db, int kt) {
    rw_fence<NX>(acc);
#pragma unroll
    for (int u = 0; u < 2; u++)
#pragma unroll
        for (int s = 0; s < 4; s++) wgrs<N>::mma(acc + NX / 2 * u, f + 16 * u + 4 * s, db + (s * 32 >> 4), kt > 0 || s > 0);
    rw_commit<NX>(acc);
}

// GRP: grouped (a.tile_off: the plain map of 128-row tiles, or with NX 144 the folded map, a.tile_rest: a
// group's last tile up to 144 rows; a tile's tokens padded to 16 as the MMA's width); else dense (128 tokens).
template <bool GRP, int NX>
__global__ void __launch_bounds__(RW_THREADS, 1) qgemm_rw_kernel(qg_args a, const __grid_constant__ rw_tmaps tm) {
    using C = rw_cfg<NX>;
    extern __shared__ __align__(128) char smem_raw[];
    char *smem = (char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    uint64_t *lfull = (uint64_t *)(smem + C::BAR_OFF), *lempty = lfull + RW_LS;
    uint64_t *sfull = lempty + RW_LS, *sempty = sfull + RW_SQ;
    __shared__ int s_orow[NX];
    __shared__ float s_scale[NX];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const bool glu = a.epi == QG_GLU;
    const int n0 = wg_col_ix(a) * (glu ? RW_BN / 2 : RW_BN);
    int m0, rows, grp;
    if (!wg_block_rows(a, NX, &m0, &rows, &grp)) return;
    if (tid == 0) {
        for (int s = 0; s < RW_LS; s++) mb_init(&lfull[s], 1), mb_init(&lempty[s], 256);
        for (int s = 0; s < RW_SQ; s++) mb_init(&sfull[s], 1), mb_init(&sempty[s], 256);
        mb_init_fence();
    }
    __syncthreads();
    const int KT = a.K / WG_BK;
    // Warp-uniform through lane 0: a branch on threadIdx around the MMAs makes ptxas serialise them (C7518).
    const int wg = __shfl_sync(0xffffffffu, warp >> 2, 0);

    if (wg == 2) {
        // ---- producer: one thread issues every copy ----
        if constexpr (NX == 144) asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n"); // the consumers' 240
        else asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid == 256) {
            const int wr0 = grp * a.N + n0; // the group's weight rows (dense: grp 0)
            for (int kt = 0; kt < KT; kt++) {
                const int ls = kt % RW_LS;
                if ((kt & 3) == 0) {
                    const int q = kt >> 2, sq = q % RW_SQ;
                    if (q >= RW_SQ) mb_wait(&sempty[sq], (q / RW_SQ - 1) & 1);
                    char *S = smem + C::S_OFF + sq * C::S_BYTES;
                    mb_expect_tx(&sfull[sq], C::S_BYTES);
                    tma_g2s_2d(S, &tm.s, 4 * q, wr0, &sfull[sq]);
                    if (glu) tma_g2s_2d(S + C::S_BYTES / 2, &tm.s2, 4 * q, wr0, &sfull[sq]);
                }
                if (kt >= RW_LS) mb_wait(&lempty[ls], (kt / RW_LS - 1) & 1);
                char *X = smem + ls * C::SLOT, *Cs = X + C::X_BYTES;
                mb_expect_tx(&lfull[ls], C::SLOT);
                tma_g2s_2d(X, &tm.x, kt * WG_BK, m0, &lfull[ls]);
                tma_g2s_2d(Cs, &tm.w, kt * 32, wr0, &lfull[ls]);
                if (glu) tma_g2s_2d(Cs + C::C_BYTES / 2, &tm.w2, kt * 32, wr0, &lfull[ls]);
            }
        }
        return;
    }

    // ---- consumers: warpgroup wg multiplies block rows 128 wg .. 128 wg + 127 ----
    if constexpr (NX == 144) asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n"); // 144 accumulators
    else asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int g = lane >> 2, t = lane & 3, wq = warp & 3;
    const uint32_t sm0 = wg_smem(smem);
    // This lane's code rows: tile u's rows R_u = 128 wg + 64 u + 16 wq + g and R_u + 8 (same 32-byte
    // swizzle phase: (R >> 2) & 1 = (g >> 2) & 1), halves at 16 (c ^ sw).
    const int sw = (g >> 2) & 1;
    const int R0 = 128 * wg + 16 * wq + g;
    uint32_t c43;
    asm volatile("mov.b32 %0, 0x43004300;\n" : "=r"(c43));
    auto build = [&](int kt, uint32_t (&f)[32]) {
        const int ls = kt % RW_LS, q = kt >> 2, sq = q % RW_SQ;
        if ((kt & 3) == 0) mb_wait(&sfull[sq], (q / RW_SQ) & 1);
        mb_wait(&lfull[ls], (kt / RW_LS) & 1);
        const uint32_t cs = sm0 + ls * C::SLOT + C::X_BYTES, ss = sm0 + C::S_OFF + sq * C::S_BYTES + 4 * (kt & 3);
        if constexpr (NX == 144) { // a half row (16 bytes: k16 steps 2 c, 2 c + 1) at a time: 8 registers fewer live
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const int r = R0 + 64 * u;
                uint32_t s0, b0, s1, b1;
                wg_sb_pairs(wg_lds32(ss + 16 * r), s0, b0);
                wg_sb_pairs(wg_lds32(ss + 16 * (r + 8)), s1, b1);
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    const uint4 pa = wg_lds128(cs + 32 * r + 16 * (sw ^ c)), pb = wg_lds128(cs + 32 * (r + 8) + 16 * (sw ^ c));
                    const uint32_t wa[4] = {pa.x, pa.y, pa.z, pa.w}, wb[4] = {pb.x, pb.y, pb.z, pb.w};
#pragma unroll
                    for (int s2 = 0; s2 < 2; s2++) {
                        const int s = 2 * c + s2;
                        f[16 * u + 4 * s + 0] = wg_bf2_fma(wg_code_pair_c43(wa[2 * s2], wa[2 * s2] >> 4, t, c43), s0, b0);
                        f[16 * u + 4 * s + 1] = wg_bf2_fma(wg_code_pair_c43(wb[2 * s2], wb[2 * s2] >> 4, t, c43), s1, b1);
                        f[16 * u + 4 * s + 2] = wg_bf2_fma(wg_code_pair_c43(wa[2 * s2 + 1], wa[2 * s2 + 1] >> 4, t, c43), s0, b0);
                        f[16 * u + 4 * s + 3] = wg_bf2_fma(wg_code_pair_c43(wb[2 * s2 + 1], wb[2 * s2 + 1] >> 4, t, c43), s1, b1);
                    }
                }
            }
        } else { // braced: as `else #pragma unroll for`, the NX 144 instance lost the mb_arrive below
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const int r = R0 + 64 * u;
                const uint4 p0 = wg_lds128(cs + 32 * r + 16 * sw), p1 = wg_lds128(cs + 32 * r + 16 * (sw ^ 1));
                const uint4 q0 = wg_lds128(cs + 32 * (r + 8) + 16 * sw), q1 = wg_lds128(cs + 32 * (r + 8) + 16 * (sw ^ 1));
                uint32_t s0, b0, s1, b1;
                wg_sb_pairs(wg_lds32(ss + 16 * r), s0, b0);
                wg_sb_pairs(wg_lds32(ss + 16 * (r + 8)), s1, b1);
                const uint32_t wa[8] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
                const uint32_t wb[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
                for (int s = 0; s < 4; s++) {
                    f[16 * u + 4 * s + 0] = wg_bf2_fma(wg_code_pair_c43(wa[2 * s], wa[2 * s] >> 4, t, c43), s0, b0);
                    f[16 * u + 4 * s + 1] = wg_bf2_fma(wg_code_pair_c43(wb[2 * s], wb[2 * s] >> 4, t, c43), s1, b1);
                    f[16 * u + 4 * s + 2] = wg_bf2_fma(wg_code_pair_c43(wa[2 * s + 1], wa[2 * s + 1] >> 4, t, c43), s0, b0);
                    f[16 * u + 4 * s + 3] = wg_bf2_fma(wg_code_pair_c43(wb[2 * s + 1], wb[2 * s + 1] >> 4, t, c43), s1, b1);
                }
            }
        }
        if ((kt & 3) == 3 || kt == KT - 1) mb_arrive(&sempty[sq]); // this lane's last read of the quad
    };

    // The MMA's token width in 16s (grouped: the tile's rows padded to 16), warp-uniform for ptxas (C7518).
    const int nc = GRP ? __shfl_sync(0xffffffffu, (min(rows, NX) + 15) >> 4, 0) : NX / 16;
    float acc[NX]; // tile u's 64 x NX at acc[NX / 2 u ..]: d[4 j + 2 h + e] = row 16 wq + g + 8 h, token 8 j + 2 t + e
#pragma unroll
    for (int i = 0; i < NX; i++) acc[i] = 0.0f;
    uint32_t fa[32], fb[32];
    const uint64_t db0 = wg_desc_sw128(smem);
    auto step = [&](int kt, const uint32_t (&f)[32], uint32_t (&fn)[32]) {
        const uint64_t db = db0 + ((kt % RW_LS) * C::SLOT >> 4);
        if constexpr (GRP) {
            switch (nc) {
            case 1: rw_stage<16, NX>(acc, f, db, kt); break;
            case 2: rw_stage<32, NX>(acc, f, db, kt); break;
            case 3: rw_stage<48, NX>(acc, f, db, kt); break;
            case 4: rw_stage<64, NX>(acc, f, db, kt); break;
            case 5: rw_stage<80, NX>(acc, f, db, kt); break;
            case 6: rw_stage<96, NX>(acc, f, db, kt); break;
            case 7: rw_stage<112, NX>(acc, f, db, kt); break;
            default:
                if constexpr (NX == 144)
                    if (nc == 9) {
                        rw_stage<144, NX>(acc, f, db, kt);
                        break;
                    }
                rw_stage<128, NX>(acc, f, db, kt);
                break;
            }
        } else {
            rw_stage<128, NX>(acc, f, db, kt);
        }
        rw_wait<NX, 1>(acc); // stage kt - 1's MMAs are complete: its slot and its fragments (fn) are free
        if (kt > 0) mb_arrive(&lempty[(kt - 1) % RW_LS]);
        rw_hold(fn);
        if (kt + 1 < KT) build(kt + 1, fn);
    };
    build(0, fa);
#pragma unroll 1
    for (int kt = 0; kt < KT; kt += 2) {
        step(kt, fa, fb);
        if (kt + 1 < KT) step(kt + 1, fb, fa);
    }
    rw_wait<NX, 0>(acc);
    rw_hold(fa);
    rw_hold(fb);

    // Epilogue: the accumulators to a token-major fp32 tile over the load slots (every consumer is past
    // its last MMA and code read, and every copy has landed), then qgemm_wsw.cu's store loop.
    const int nr = min(rows, NX);
    wg_out_rows<256>(a, s_orow, s_scale, m0, nr);
    asm volatile("bar.sync 1, 256;\n" ::: "memory");
    float *tile = (float *)smem;
#pragma unroll
    for (int u = 0; u < 2; u++)
#pragma unroll
        for (int j = 0; j < NX / 8; j++)
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int e = 0; e < 2; e++)
                    tile[(8 * j + 2 * t + e) * RW_LD + R0 + 64 * u + 8 * h] = acc[NX / 2 * u + 4 * j + 2 * h + e];
    asm volatile("bar.sync 1, 256;\n" ::: "memory");
    wg_tile_store<RW_BN, 256>(a, tile, RW_LD, s_orow, s_scale, nr, n0);
}

// The maps of a call: X as qgemm_wg.cu's (wg_make_xmap, 128-row boxes), codes with the 32-byte swizzle,
// scale words 4 a row; false when the call does not fit them.
static bool rw_make_tmaps(const qg_args &a, rw_tmaps *tm, int nx) {
    PFN_cuTensorMapEncodeTiled_v12000 enc = (PFN_cuTensorMapEncodeTiled_v12000)lily_tmap_encoder();
    if (!enc || !wg_make_xmap(a, &tm->x, nx)) return false;
    const bool glu = a.epi == QG_GLU;
    const cuuint32_t es[2] = {1, 1}, rows = glu ? RW_BN / 2 : RW_BN;
    for (int m = 0; m < (glu ? 2 : 1); m++) {
        const dq_mat &w = m ? a.w2 : a.w;
        const cuuint64_t wrows = (cuuint64_t)a.N * (a.tile_off ? a.n_groups : 1); // every group's rows
        const cuuint64_t rb = (cuuint64_t)a.K / 2, wd[2] = {rb, wrows}, ws[1] = {rb};
        const cuuint32_t wb[2] = {32, rows};
        if (enc(m ? &tm->w2 : &tm->w, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)w.codes, wd, ws, wb, es,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_32B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
            return false;
        const cuuint64_t ng = (cuuint64_t)a.K / 64, sd[2] = {ng, wrows}, ss[1] = {ng * 4};
        const cuuint32_t sb[2] = {4, rows};
        if (enc(m ? &tm->s2 : &tm->s, CU_TENSOR_MAP_DATA_TYPE_UINT32, 2, (void *)w.sb, sd, ss, sb, es,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
            return false;
    }
    return true;
}

static bool rw_mat_ok(const dq_mat &w, int K) {
    return w.fmt != DQ_DENSE && w.bits == 4 && w.group == 64 && w.cols == K && !((uintptr_t)w.codes & 15) &&
           !((uintptr_t)w.sb & 15);
}

// Whether the call fits the kernel (the switch's bit for its kind set) and the maps could be made.
static bool rw_takes(const qg_args &a, rw_tmaps *tm) {
    const int bit = !a.tile_off ? 1 : a.epi == QG_GLU ? 2 : 4;
    if (!(lily_qg_rw & bit) || !lily_qg_bf16w || a.x_rows || (a.tile_rest && !(lily_qg_rw & 32)) || a.K % 256 || a.K <= 0 || a.N % 2 || a.N <= 0 ||
        !rw_mat_ok(a.w, a.K) || (a.epi == QG_GLU && !rw_mat_ok(a.w2, a.K)) || (a.tile_off && a.n_groups <= 0))
        return false;
    return rw_make_tmaps(a, tm, a.tile_rest ? 144 : RW_BM);
}

template <bool GRP, int NX = RW_BM> static void rw_launch_t(const qg_args &a, int grid_x, cudaStream_t st, const rw_tmaps &tm) {
    static bool attr = false;
    if (!attr) {
        cudaFuncSetAttribute(qgemm_rw_kernel<GRP, NX>, cudaFuncAttributeMaxDynamicSharedMemorySize, rw_cfg<NX>::SMEM);
        attr = true;
    }
    const int cols = a.epi == QG_GLU ? RW_BN / 2 : RW_BN;
    dim3 grid(grid_x, (a.N + cols - 1) / cols);
    qg_args ar = a;
    ar.raster = qg_rastered(a);
    if (ar.raster) grid = dim3(grid.y, grid.x);
    qgemm_rw_kernel<GRP, NX><<<grid, RW_THREADS, rw_cfg<NX>::SMEM, st>>>(ar, tm);
    lily_qg_rw_launches++;
}

bool qgemm_rw_launch(const qg_args &a, int grid_x, cudaStream_t st) {
    rw_tmaps tm;
    if (a.tile_off || !rw_takes(a, &tm)) return false;
    rw_launch_t<false>(a, grid_x, st, tm);
    return true;
}

bool qgemm_rw_grouped_launch(const qg_args &a, int max_tiles, cudaStream_t st) {
    rw_tmaps tm;
    if (!a.tile_off || !rw_takes(a, &tm)) return false;
    if (max_tiles > 0) {
        if (a.tile_rest) rw_launch_t<true, 144>(a, max_tiles, st, tm); // the folded map
        else rw_launch_t<true>(a, max_tiles, st, tm);
    }
    return true;
}
