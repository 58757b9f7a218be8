// dev/qgemm_sm/qgemm_tn.cu: the grouped products of short expert groups (the MoE of prompts of ~256 tokens, ~8
// rows an expert) with the tokens on the MMA's n8 side: Y^T (weight rows x tokens) = W . X^T on
// mma.sync m16n8k16.
//
// Why: at 256 tokens each of the 256 experts holds ~8 rows, and every expert's weights must be read
// (18 GB over the 40 layers, ~4.2 ms at the copy ceiling). qgemm.cu puts the rows on the MMA's m16
// side, half of a 16-row tile empty, and finds each group's activation sum with a second MMA per
// k-step. Here a weight byte costs fewer instructions:
//   - A = 16 weight rows of a warp: lane (g, t) loads 8 bytes (16 codes) of rows g and g + 8 a
//     64-k stage straight from global memory into registers, U stages ahead; each 32-bit word gives
//     four bf16 pairs (128 + q, 128 + q') by one shift and one lop3 each (no FMA): code pairs
//     (j, j + 4) of the word, as qgemm.cu orders them;
//   - B = 8 tokens: their X rows, staged once a pass in shared memory already in fragment order
//     (one 16-byte load gives a lane its four k16 blocks' b0, another their b1);
//   - the weights stay exact: the MMA sums D = x . (128 + q) over the stage, and per row and stage
//     acc += s D + (b - 128 s) X, with X the stage's activation sum of each token, computed once a
//     pass for all rows (x . (s q + b) = s (D - 128 X) + b X).
// A block: one expert's group and all N output columns, as tiles of 128 (a warp 16 of each, one tile
// after another, the loads running ahead across tiles; with QG_GLU the same 16 rows of the up matrix
// too, combined in registers), so X is staged once a group; the group in passes of 16 tokens.
// Results differ from qgemm.cu's by fp32 reassociation only.
//
// Measured (docs/PERF.md, eighteenth session; dev/qgemm_sm at the model's shapes, T = 256): the gate|up
// 161-170 us against qgemm.cu's 16-row tiles' 190-194 (~1.8 against ~1.6 TB/s of weights); the down
// projection 103 against 88-91 us, and at T = 512 both lose to the 32-row tiles. Wired into the engine
// for the gate|up of 16-row tiles (branch qgemm-tn: qgemm_launch, LILY_CUDA_QG_TN, its kernel tests in
// test_prefill.cu, 390/390 with e2e and fixtures), a 256-token prefill was 6 % SLOWER end to end
// (11,190-11,290 against 11,950 tok/s), so it stays a prototype here: the dev harness (qgemm_sm.cu)
// includes this file in a namespace of its own. Open question for the next step: why faster alone and
// slower in the prefill (the shared expert's GEMMs beside it on the side stream; its grid of one
// block an expert, ~1 wave, against qgemm.cu's ~3 waves of small blocks).
//
// The ring form (template R > 0, written after the session's last device call: compiled, NOT RUN) keeps
// the weights in flight in a per-warp shared-memory ring instead of registers (Nsight Compute had the
// 16-row GEMM latency-bound at 18 warps an SM); the harness checks it bitwise against the register
// form. Moving the per-stage math into a lambda for it changed the register form's code (ptxas: 105
// registers for the gate|up at one stage ahead, 126 before), so this file's register form is not the
// one measured; branch qgemm-tn has that one in src/cuda/qgemm_tn.cu.
//
// Takes grouped calls of 4-bit DQ_FAST weights with K % 64 == 0 and a power-of-two group >= 64
// (qgemm_tn_takes), any epilogue, rows gathered and scattered.
#include <cuda_bf16.h>

#include "cuda/prefill.cuh"
#include "cuda/gemv.cuh"      // gv2_mma (mma.sync m16n8k16 bf16, fp32 accumulate)
#include "cuda/qgemm_wg.cuh" // cp.async wrappers

#define TN_WARPS 8
#define TN_COLS (16 * TN_WARPS) // output columns a block

// Codes j and j + 4 of word w as the exact bf16 pair (128 + q_j, 128 + q_j+4).
__device__ __forceinline__ uint32_t tn_pair(uint32_t w, int j) { return ((w >> (4 * j)) & 0x000F000Fu) | 0x43004300u; }

// A lane's weights of one stage: codes of rows g and g + 8 (and of the up matrix's, QG_GLU), and
// their scale words.
template <bool GLU> struct tn_stage {
    uint2 c[GLU ? 4 : 2];
    uint32_t s[GLU ? 4 : 2];
};

// Block (column range blockIdx.x, group blockIdx.y): ct column tiles of 128 (a warp's 16 columns of
// each, one after another), so that a block stages the group's X once for ct tiles. NT: token tiles
// of 8 a pass; U: stages of codes in flight a lane (across tile boundaries). Shared memory: the pass's
// X as B fragments, uint4 [KS][NT][2][32 lanes] (conflict-free: a warp reads 512 contiguous bytes),
// then the stage sums, float [NT][KS][8].
// R > 0 (the ring form): the weights of a warp's stages come by cp.async into a ring of R slots of its
// own in shared memory (a slot: its rows' 32 code bytes and scale word of one stage; rows 32 bytes
// apart, so a lane's 8-byte fragment reads are conflict-free), R - 1 stages ahead, instead of into
// registers: more bytes in flight for no registers, and no block barrier (each warp waits for its own
// copies). The same arithmetic in the same order: the same bits as the register form.
template <bool GLU> struct tn_ring {
    static constexpr int ROWS = GLU ? 32 : 16, SLOT = ROWS * 36; // bytes a slot
};
template <bool GLU, int NT, int U, int R = 0>
__global__ void __launch_bounds__(TN_WARPS * 32, 2) qgemm_tn_kernel(qg_args a, int ct) {
    extern __shared__ __align__(16) uint4 tn_sm[];
    const int e = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    const int r0 = a.grp_off[e], rows = (a.grp_end ? a.grp_end[e] : a.grp_off[e + 1]) - r0;
    if (rows <= 0) return;
    const int K = a.K, KS = K / 64, ng = K / a.w.group, lg = 31 - __clz(a.w.group), nq = ct * KS;
    uint4 *xb = tn_sm;
    float *xsum = (float *)(tn_sm + (size_t)KS * NT * 64);
    unsigned char *ring = (unsigned char *)(xsum + (size_t)KS * NT * 8) + (size_t)warp * R * tn_ring<GLU>::SLOT;
    const int col0 = blockIdx.x * ct * TN_COLS + warp * 16; // this warp's first output column (weight row)
    const long rq = K / 16;                                    // uint2 a code row
    const uint2 *cw = (const uint2 *)a.w.codes, *cw2 = GLU ? (const uint2 *)a.w2.codes : cw;
    const uint32_t *sw = a.w.sb, *sw2 = GLU ? a.w2.sb : sw;
    // The load cursor: stage q = (tile, kt) of the warp's walk, requested in order, one a call.
    struct cursor {
        int kt, tile;
        long row; // weight row of lane group g in this tile (row + 8: the second)
        bool l0, l1;
    } cur;
    auto seek = [&](int tile) {
        const int c = col0 + tile * TN_COLS + g;
        cur.kt = 0, cur.tile = tile, cur.row = (long)e * a.N + c;
        cur.l0 = tile < ct && c < a.N, cur.l1 = tile < ct && c + 8 < a.N;
    };
    auto load = [&](tn_stage<GLU> &L) {
        const int kt = cur.kt, si = (kt * 64) >> lg;
        const long c0 = cur.row * rq + t + 4 * kt, c1 = c0 + 8 * rq, s0 = cur.row * ng + si, s1 = s0 + 8 * ng;
        const bool l0 = cur.l0, l1 = cur.l1;
        L.c[0] = l0 ? __ldg(cw + c0) : make_uint2(0, 0);
        L.c[1] = l1 ? __ldg(cw + c1) : make_uint2(0, 0);
        L.s[0] = l0 ? __ldg(sw + s0) : 0u;
        L.s[1] = l1 ? __ldg(sw + s1) : 0u;
        if (GLU) {
            L.c[2] = l0 ? __ldg(cw2 + c0) : make_uint2(0, 0);
            L.c[3] = l1 ? __ldg(cw2 + c1) : make_uint2(0, 0);
            L.s[2] = l0 ? __ldg(sw2 + s0) : 0u;
            L.s[3] = l1 ? __ldg(sw2 + s1) : 0u;
        }
        if (++cur.kt == KS) seek(cur.tile + 1);
    };
    // Ring form: the cursor's stage into slot `sl` by this lane's share of the copies (two 16-byte
    // code chunks, a scale word), as one commit group (empty past the walk's end, so that every lane
    // counts the same groups).
    auto issue = [&](int sl) {
        if (cur.tile < ct) {
            constexpr int RW = tn_ring<GLU>::ROWS;
            unsigned char *slot = ring + sl * tn_ring<GLU>::SLOT;
            const int kt = cur.kt, si = (kt * 64) >> lg, c0 = col0 + cur.tile * TN_COLS;
            const long rb0 = (long)e * a.N + c0; // weight row of the tile's first column
#pragma unroll
            for (int j = 0; j < RW * 2 / 32; j++) {
                const int c = lane + 32 * j, row = c >> 1, half = c & 1, rr = row & 15;
                const dq_mat &m = GLU && row >= 16 ? a.w2 : a.w;
                const bool live = c0 + rr < a.N;
                wg_cp16(slot + row * 32 + half * 16,
                        (const char *)m.codes + (live ? (rb0 + rr) * (K / 2) + kt * 32 + half * 16 : 0), live);
            }
            if (lane < RW) {
                const int rr = lane & 15;
                const dq_mat &m = GLU && lane >= 16 ? a.w2 : a.w;
                const bool live = c0 + rr < a.N;
                wg_cp4(slot + RW * 32 + lane * 4, m.sb + (live ? (rb0 + rr) * ng + si : 0), live);
            }
            if (++cur.kt == KS) seek(cur.tile + 1);
        }
        wg_commit();
    };
    // Ring form: stage of slot `sl` as a lane's registers (rows g, g + 8; the up matrix's at 16 +).
    auto fetch = [&](int sl) {
        constexpr int RW = tn_ring<GLU>::ROWS;
        const unsigned char *slot = ring + sl * tn_ring<GLU>::SLOT;
        const uint32_t *sc = (const uint32_t *)(slot + RW * 32);
        tn_stage<GLU> c;
#pragma unroll
        for (int r = 0; r < (GLU ? 4 : 2); r++) {
            const int row = g + 8 * r;
            c.c[r] = *(const uint2 *)(slot + row * 32 + 8 * t);
            c.s[r] = sc[row];
        }
        return c;
    };

    for (int p0 = 0; p0 < rows; p0 += 8 * NT) { // passes of 8 NT tokens
        const int pr = min(8 * NT, rows - p0);
        tn_stage<GLU> L[R ? 1 : U];
        seek(0);
        if constexpr (R > 0) {
            __syncwarp(); // the previous pass's reads of the ring are done
            for (int q = 0; q < R - 1; q++) issue(q % R);
        } else {
#pragma unroll
            for (int u = 0; u < U; u++) load(L[u]); // the weights do not wait for X
        }
        __syncthreads(); // the previous pass's readers are done with X
        // X: unit i = (token row, stage kt, lane t4): its 16 values x[64 kt + 16 t4 ..] give b0 (k
        // slots 2t, 2t+1 of the four k16 blocks m: x[m], x[m + 4]) and b1 (x[8 + m], x[12 + m]); the
        // four units of a (row, kt) are adjacent lanes, which add their sums in a fixed order.
        for (int i = tid; i < NT * 8 * KS * 4; i += TN_WARPS * 32) {
            const int t4 = i & 3, kt = (i >> 2) % KS, row = (i >> 2) / KS, n = row >> 3, tok = row & 7;
            uint4 v0 = make_uint4(0, 0, 0, 0), v1 = v0;
            if (row < pr) {
                const long p = r0 + p0 + row, xr = a.x_rows ? a.x_rows[p] : p;
                const uint4 *src = (const uint4 *)(a.x + xr * a.ldx + kt * 64 + 16 * t4);
                v0 = src[0], v1 = src[1];
            }
            uint4 *dst = xb + ((size_t)kt * NT + n) * 64 + tok * 4 + t4;
            dst[0] = make_uint4(__byte_perm(v0.x, v0.z, 0x5410), __byte_perm(v0.x, v0.z, 0x7632),
                                __byte_perm(v0.y, v0.w, 0x5410), __byte_perm(v0.y, v0.w, 0x7632));
            dst[32] = make_uint4(__byte_perm(v1.x, v1.z, 0x5410), __byte_perm(v1.x, v1.z, 0x7632),
                                 __byte_perm(v1.y, v1.w, 0x5410), __byte_perm(v1.y, v1.w, 0x7632));
            const uint32_t w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) s += __uint_as_float(w[j] << 16) + __uint_as_float(w[j] & 0xffff0000u);
            s += __shfl_xor_sync(0xffffffffu, s, 1);
            s += __shfl_xor_sync(0xffffffffu, s, 2);
            if (t4 == 0) xsum[((size_t)n * KS + kt) * 8 + tok] = s;
        }
        __syncthreads();
        float acc[NT][4], acc2[NT][4];
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[n][i] = acc2[n][i] = 0.0f;
        const int ntl = (pr + 7) >> 3; // live token tiles
        int kt = 0, tile = 0;          // the stage being computed
        // One stage: its MMAs and fold; after a tile's last stage, the tile's outputs.
        auto stage = [&](const tn_stage<GLU> &c) {
            uint4 b0[NT], b1[NT];
            float2 xs[NT];
#pragma unroll
            for (int n = 0; n < NT; n++) {
                if (n >= ntl) break;
                const uint4 *bx = xb + ((size_t)kt * NT + n) * 64 + lane;
                b0[n] = bx[0], b1[n] = bx[32];
                xs[n] = *(const float2 *)(xsum + ((size_t)n * KS + kt) * 8 + 2 * t);
            }
#pragma unroll
            for (int mat = 0; mat < (GLU ? 2 : 1); mat++) {
                const uint2 wa = c.c[2 * mat], wb = c.c[2 * mat + 1];
                float d[NT][4];
#pragma unroll
                for (int n = 0; n < NT; n++) d[n][0] = d[n][1] = d[n][2] = d[n][3] = 0.0f;
#pragma unroll
                for (int m = 0; m < 4; m++) {
                    const uint32_t a0 = tn_pair(wa.x, m), a1 = tn_pair(wb.x, m), a2 = tn_pair(wa.y, m),
                                   a3 = tn_pair(wb.y, m);
#pragma unroll
                    for (int n = 0; n < NT; n++) {
                        if (n >= ntl) break;
                        const uint32_t q0 = m == 0 ? b0[n].x : m == 1 ? b0[n].y : m == 2 ? b0[n].z : b0[n].w;
                        const uint32_t q1 = m == 0 ? b1[n].x : m == 1 ? b1[n].y : m == 2 ? b1[n].z : b1[n].w;
                        gv2_mma(d[n], a0, a1, a2, a3, q0, q1);
                    }
                }
                // Row g: s, b - 128 s; row g + 8 the same. acc element i: row g (i < 2) or g + 8,
                // token 2t + (i & 1).
                const uint32_t wsa = c.s[2 * mat], wsb = c.s[2 * mat + 1];
                const float sa = __uint_as_float(wsa << 16), sb = __uint_as_float(wsb << 16);
                const float ca = fmaf(-128.0f, sa, __uint_as_float(wsa & 0xffff0000u));
                const float cb = fmaf(-128.0f, sb, __uint_as_float(wsb & 0xffff0000u));
                float(*A)[4] = mat ? acc2 : acc;
#pragma unroll
                for (int n = 0; n < NT; n++) {
                    if (n >= ntl) break;
                    A[n][0] = fmaf(sa, d[n][0], fmaf(ca, xs[n].x, A[n][0]));
                    A[n][1] = fmaf(sa, d[n][1], fmaf(ca, xs[n].y, A[n][1]));
                    A[n][2] = fmaf(sb, d[n][2], fmaf(cb, xs[n].x, A[n][2]));
                    A[n][3] = fmaf(sb, d[n][3], fmaf(cb, xs[n].y, A[n][3]));
                }
            }
            if (++kt == KS) { // the tile's last stage: its outputs (token 8 n + 2 t + (i & 1) of the
                              // pass, column + g + 8 (i >> 1)), then the next tile from zero
                const int col = col0 + tile * TN_COLS;
#pragma unroll
                for (int n = 0; n < NT; n++)
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const int tok = 8 * n + 2 * t + (i & 1), cn = col + g + 8 * (i >> 1);
                        if (tok < pr && cn < a.N) qg_store(a, r0 + p0 + tok, cn, acc[n][i], acc2[n][i]);
                        acc[n][i] = acc2[n][i] = 0.0f;
                    }
                kt = 0, tile++;
            }
        };
        if constexpr (R > 0) {
            for (int q = 0; q < nq; q++) {
                issue((q + R - 1) % R); // the slot read a stage ago (its readers passed the __syncwarp)
                wg_cpwait<R - 1>();      // this lane's copies of stage q are in
                __syncwarp();            // and every lane's
                const tn_stage<GLU> c = fetch(q % R);
                __syncwarp(); // the slot is read: the next issue may overwrite it
                stage(c);
            }
            wg_cpwait<0>();
        } else {
            for (int qb = 0; qb < nq; qb += U) {
#pragma unroll
                for (int u = 0; u < U; u++) {
                    if (qb + u >= nq) break;
                    const tn_stage<GLU> c = L[u];
                    load(L[u]); // this slot's registers are free: request the stage U ahead
                    stage(c);
                }
            }
        }
    }
}

bool qgemm_tn_takes(const qg_args &a) {
    auto fits = [&](const dq_mat &m) {
        return m.fmt == DQ_FAST && m.bits == 4 && m.cols == a.K && m.group >= 64 && !(m.group & (m.group - 1)) &&
               m.codes && m.sb && !((uintptr_t)m.codes & 7);
    };
    return a.grp_off && a.tile_off && a.n_groups > 0 && a.K % 64 == 0 && a.K >= 64 && a.ldx % 8 == 0 &&
           !((uintptr_t)a.x & 15) && fits(a.w) && (a.epi != QG_GLU || (fits(a.w2) && a.w2.group == a.w.group)) &&
           (size_t)a.K / 64 * 2 * (1024 + 32) <= 100 * 1024; // two token tiles' X in shared memory
}

// ct: column tiles of 128 a block (0: all of N, one block a group). R: the ring form's slots (0: none).
template <bool GLU, int NT, int U, int R = 0> static void tn_launch(const qg_args &a, cudaStream_t st, int ct = 0) {
    const int KS = a.K / 64, tiles = (a.N + TN_COLS - 1) / TN_COLS;
    if (ct <= 0 || ct > tiles) ct = tiles;
    const size_t smem = (size_t)KS * NT * 1024 + (size_t)KS * NT * 32 + (size_t)R * TN_WARPS * tn_ring<GLU>::SLOT;
    static size_t attr = 0; // the largest shared memory asked of this instantiation so far (set once a size)
    if (smem > attr) {
        cudaFuncSetAttribute(qgemm_tn_kernel<GLU, NT, U, R>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        attr = smem;
    }
    qgemm_tn_kernel<GLU, NT, U, R><<<dim3((tiles + ct - 1) / ct, a.n_groups), TN_WARPS * 32, smem, st>>>(a, ct);
}

void qgemm_tn_launch(const qg_args &a, cudaStream_t st) {
    if (a.N <= 0 || a.M <= 0) return;
    static int ct = -1; // column tiles a block (LILY_CUDA_QG_TN_CT; 0 = all of N)
    if (ct < 0) {
        const char *e = getenv("LILY_CUDA_QG_TN_CT");
        ct = e ? atoi(e) : 0;
    }
    if (a.epi == QG_GLU) tn_launch<true, 2, 1>(a, st, ct);
    else tn_launch<false, 2, 4>(a, st, ct);
}
