// qgemm.cu: the prefill matrix product Y = X . W^T with W in the backend's quantised layout
// (MLX codes row-major, one scale|bias word per group: cuda_common.cuh), on the tensor cores
// (mma.sync m16n8k16 bf16, fp32 accumulate). Dense (X rows 0..M) or grouped (MoE: each tile of rows
// belongs to one expert, found from a tile map built on the GPU; rows gathered from X and scattered
// to Y through index arrays).
//
// Dequantisation happens in registers, and exactly: the MMA multiplies the activations by the codes
// q themselves (integers 0..255 are exact bf16 numbers), into a per-group partial accumulator, and a
// ones column gives the group's activation sum on the same tensor cores; then acc += s*part + b*sum,
// which is x . (s*q + b) with the weights never rounded (rounding s*q + b to bf16 before the MMA, as
// a bf16 weight copy would, put the 4-bit fixture's prefill logits past twice the error of HF's own
// bf16 run). No weight
// in any form is written to device memory. A dot product does not care in which order k is summed,
// so each thread's 16 consecutive k (the 8 bytes of 4-bit codes it reads with one 64-bit load) are
// assigned to MMA k-slots in the order that falls out of `(word >> 4j) & 0x000F000F`, which puts
// codes j and j+4 of a word into the two halves of a register; ORing in 0x4300 makes each half the
// bf16 number 128 + q exactly and one bf16x2 FMA removes the 128. The activation fragment is
// permuted the same way with two byte-permutes per register from a 16-byte shared-memory load.
// 8-bit codes go through fp32 (q up to 255 is not a 0x43xx mantissa) with the same slot order.
//
// Block tile: BM (16/32/64/128) rows x 128 output columns x 64 k per stage, a 3-stage cp.async
// pipeline for X rows, code rows and scale words. Warps: 4 across N (32 columns
// each), 1 or 2 down M. QG_GLU: the 128 columns are 64 gate rows then the same 64 up rows, combined in
// the epilogue. Thin dense calls of short prompts split K over several blocks (qgemm_splitk below).
#include <algorithm>

#include <cuda_bf16.h>

#include "qgemm_wg.cuh" // cp.async and bf16x2 helpers (wg_cp16, wg_bf2_fma, ...)

#define QG_BK 64
#define QG_BN 128
// Stages in flight. 5 at 16 rows and 4 at 32 measured slower than 3 (prefill 256 tokens 12,075 / 12,054
// -> 11,829 / 11,795 tok/s; docs/PERF.md, seventeenth session), though the 16-row MoE GEMM alone gained
// (gate|up 7.82 -> 7.55 ms at 256 tokens).
#define QG_STAGES 3

__device__ __forceinline__ void mma16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four B registers (k-slot pairs (j, j+4), j = 0..3, of the 8 codes in `u`): the codes q themselves
// as exact bf16 numbers (0..255 all are). Scale and bias are applied per group to the accumulators.
template <int BITS>
__device__ __forceinline__ void codes8(uint32_t u, uint32_t u_hi, uint32_t *r) {
    if (BITS == 4) {
#pragma unroll
        for (int j = 0; j < 4; j++) {
            uint32_t v = ((u >> (4 * j)) & 0x000F000Fu) | 0x43004300u; // bf16 (128 + q_j, 128 + q_j+4)
            r[j] = wg_bf2_fma(v, 0x3F803F80u, 0xC300C300u);               // q exactly
        }
    } else {
        // 8-bit: codes 0..3 in u, 4..7 in u_hi; 0x4B0000qq is the float 2^23 + q.
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float lo = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7440 + j)) - 8388608.0f;
            float hi = __uint_as_float(__byte_perm(u_hi, 0x4B000000u, 0x7440 + j)) - 8388608.0f;
            r[j] = wg_pack(lo, hi);
        }
    }
}

template <int MF, int WM, int BITS>
struct qg_cfg {
    static constexpr int BM = 16 * MF * WM;
    static constexpr int THREADS = 32 * 4 * WM;
    static constexpr int A_BYTES = BM * QG_BK * 2;       // bf16, 128 bytes per row
    static constexpr int B_ROW = QG_BK * BITS / 8;        // code bytes per row per stage
    static constexpr int B_BYTES = QG_BN * B_ROW;
    static constexpr int S_BYTES = QG_BN * 2 * 4;         // two scale|bias words per row
    static constexpr int STAGE = A_BYTES + B_BYTES + S_BYTES;
    static constexpr int SMEM = QG_STAGES * STAGE + BM * 4 + 16;
};

template <int MF, int WM, int BITS, int GPS>
__global__ void __launch_bounds__(qg_cfg<MF, WM, BITS>::THREADS) qgemm_kernel(qg_args a) {
    using C = qg_cfg<MF, WM, BITS>;
    constexpr int BM = C::BM, NF = 4;
    extern __shared__ __align__(16) char smem[];
    int *a_row = (int *)(smem + QG_STAGES * C::STAGE);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wn = warp & 3, wm = warp >> 2, g = lane >> 2, t = lane & 3;
    const bool glu = a.epi == QG_GLU;
    const int cols_per_tile = glu ? QG_BN / 2 : QG_BN;
    const int n0 = blockIdx.y * cols_per_tile;

    // Which rows this block owns.
    int m0, rows, grp = 0;
    if (a.tile_off) {
        const int tile = blockIdx.x;
        if (tile >= __ldg(a.tile_off + a.n_groups)) return;
        int lo = 0, hi = a.n_groups; // last group with tile_off[g] <= tile
        while (hi - lo > 1) {
            int mid = (lo + hi) >> 1;
            if (__ldg(a.tile_off + mid) <= tile) lo = mid; else hi = mid;
        }
        grp = lo;
        m0 = __ldg(a.grp_off + grp) + (tile - __ldg(a.tile_off + grp)) * BM;
        rows = min(BM, __ldg(a.grp_end ? a.grp_end + grp : a.grp_off + grp + 1) - m0);
    } else {
        m0 = blockIdx.x * BM;
        rows = min(BM, a.M - m0);
    }
    for (int r = tid; r < BM; r += C::THREADS)
        a_row[r] = r < rows ? (a.x_rows ? __ldg(a.x_rows + m0 + r) : m0 + r) : -1;
    __syncthreads();

    const long wrow0 = (long)grp * a.N; // this group's first weight row
    const int kw = a.w.cols;            // the weight rows' full width (a split-K call reads part of it)
    const long row_bytes = (long)kw * BITS / 8;
    const int ng = kw / a.w.group;
    const int k0 = blockIdx.z * a.K;    // split-K (qgemm_splitk): this block's part of k
    const int KT = min(a.K, kw - k0) / QG_BK;
    const int gshift = __ffs(a.w.group) - 1; // group: 32, 64 or 128

    // Each thread's copies of a stage, found once (a stage's sources are the first stage's moved along
    // k): the stage loop then only adds offsets. Finding them in the loop (a division, the gate/up
    // select and the row lookups per copy) was most of the 16-row tile's instructions a stage, which
    // bound the MoE's small groups (256-token prompts) near 1.1 TB/s.
    constexpr int NX = BM * 8 / C::THREADS, CPR = C::B_ROW / 16, NB = QG_BN * CPR / C::THREADS,
                  NS = QG_BN * 2 / C::THREADS;
    static_assert(BM * 8 % C::THREADS == 0 && QG_BN * CPR % C::THREADS == 0 && QG_BN * 2 % C::THREADS == 0,
                  "copies a thread");
    const char *xsrc[NX], *bsrc[NB];
    const uint32_t *ssrc[NS];
    int xdst[NX], bdst[NB], sdst[NS], sh[NS];
    uint32_t okm = 0; // bit i: copy i reads real data (X: NX bits, then codes: NB, then scales: NS)
#pragma unroll
    for (int u = 0; u < NX; u++) {
        const int i = tid + u * C::THREADS, r = i >> 3, c = i & 7, xr = a_row[r];
        xsrc[u] = (const char *)(a.x + (xr >= 0 ? (long)xr * a.ldx + k0 + c * 8 : 0));
        xdst[u] = r * 128 + ((c ^ (r & 1)) << 4);
        okm |= (uint32_t)(xr >= 0) << u;
    }
#pragma unroll
    for (int u = 0; u < NB; u++) {
        const int i = tid + u * C::THREADS, j = i / CPR, c = i % CPR;
        const bool second = glu && j >= 64;
        const int n = n0 + (glu ? (j & 63) : j);
        const bool ok = n < a.N;
        const char *codes = (const char *)(second ? a.w2.codes : a.w.codes);
        bsrc[u] = codes + (ok ? (wrow0 + n) * row_bytes + (long)k0 * BITS / 8 + c * 16 : 0);
        bdst[u] = C::A_BYTES + j * C::B_ROW + c * 16;
        okm |= (uint32_t)ok << (NX + u);
    }
#pragma unroll
    for (int u = 0; u < NS; u++) {
        const int i = tid + u * C::THREADS, j = i >> 1, h = i & 1;
        const bool second = glu && j >= 64;
        const int n = n0 + (glu ? (j & 63) : j);
        const bool ok = n < a.N;
        ssrc[u] = (second ? a.w2.sb : a.w.sb) + (ok ? (wrow0 + n) * ng : 0);
        sdst[u] = C::A_BYTES + C::B_BYTES + i * 4;
        sh[u] = k0 + 32 * h; // the scale word of k (kt * 64 + sh) is word (k >> gshift) of the row
        okm |= (uint32_t)ok << (NX + NB + u);
    }
    auto load_stage = [&](int st, int kt) {
        char *S0 = smem + st * C::STAGE;
#pragma unroll
        for (int u = 0; u < NX; u++) wg_cp16(S0 + xdst[u], xsrc[u] + ((okm >> u) & 1 ? kt * 128 : 0), (okm >> u) & 1);
#pragma unroll
        for (int u = 0; u < NB; u++) {
            const bool ok = (okm >> (NX + u)) & 1;
            wg_cp16(S0 + bdst[u], bsrc[u] + (ok ? kt * C::B_ROW : 0), ok);
        }
#pragma unroll
        for (int u = 0; u < NS; u++) {
            const bool ok = (okm >> (NX + NB + u)) & 1;
            wg_cp4(S0 + sdst[u], ssrc[u] + (ok ? (kt * QG_BK + sh[u]) >> gshift : 0), ok);
        }
    };

    float acc[MF][NF][4];
#pragma unroll
    for (int i = 0; i < MF; i++)
#pragma unroll
        for (int j = 0; j < NF; j++)
#pragma unroll
            for (int k = 0; k < 4; k++) acc[i][j][k] = 0.0f;

#pragma unroll
    for (int s = 0; s < QG_STAGES - 1; s++) {
        if (s < KT) load_stage(s, s);
        wg_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        wg_cpwait<QG_STAGES - 2>();
        __syncthreads();
        {
            int nk = kt + QG_STAGES - 1;
            if (nk < KT) load_stage(nk % QG_STAGES, nk);
            wg_commit();
        }
        const int st = kt % QG_STAGES;
        const char *As = smem + st * C::STAGE, *Bs = As + C::A_BYTES;
        const uint32_t *Ss = (const uint32_t *)(Bs + C::B_BYTES);
        // B: this thread's 16 codes of each of its NF columns, all 4 k16 steps (2 per half).
        uint32_t bq[NF][2][4];
#pragma unroll
        for (int nf = 0; nf < NF; nf++) {
            const int n = wn * 32 + nf * 8 + g;
            if (BITS == 4) {
                uint2 u = *(const uint2 *)(Bs + n * C::B_ROW + 8 * t);
                codes8<4>(u.x, 0, bq[nf][0]);
                codes8<4>(u.y, 0, bq[nf][1]);
            } else {
                uint4 u = *(const uint4 *)(Bs + n * C::B_ROW + 16 * t);
                codes8<8>(u.x, u.y, bq[nf][0]);
                codes8<8>(u.z, u.w, bq[nf][1]);
            }
        }
        // Per quantisation group in this stage (one; two for group 32, where threads t < 2 hold the
        // first group's codes and t >= 2 the second's, so each pass zeroes the other group's codes):
        // part = x . q and xs = sum(x) on the tensor cores (B = ones), then acc += s*part + b*xs.
#pragma unroll
        for (int gi = 0; gi < GPS; gi++) {
            const bool mine = GPS == 1 || (t >> 1) == gi;
            const uint32_t one = mine ? 0x3F803F80u : 0u;
            float part[MF][NF][4], xs[MF][4];
#pragma unroll
            for (int mf = 0; mf < MF; mf++)
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    xs[mf][k] = 0.0f;
#pragma unroll
                    for (int nf = 0; nf < NF; nf++) part[mf][nf][k] = 0.0f;
                }
#pragma unroll
            for (int h = 0; h < 2; h++) {
#pragma unroll
                for (int mf = 0; mf < MF; mf++) {
                    uint32_t ar[2][4];
#pragma unroll
                    for (int rr = 0; rr < 2; rr++) {
                        const int r = wm * MF * 16 + mf * 16 + g + 8 * rr, c = 2 * t + h;
                        uint4 v = *(const uint4 *)(As + r * 128 + ((c ^ (r & 1)) << 4));
                        ar[rr][0] = __byte_perm(v.x, v.z, 0x5410);
                        ar[rr][1] = __byte_perm(v.x, v.z, 0x7632);
                        ar[rr][2] = __byte_perm(v.y, v.w, 0x5410);
                        ar[rr][3] = __byte_perm(v.y, v.w, 0x7632);
                    }
#pragma unroll
                    for (int s = 0; s < 2; s++) {
                        const uint32_t af[4] = {ar[0][2 * s], ar[1][2 * s], ar[0][2 * s + 1], ar[1][2 * s + 1]};
                        mma16816(xs[mf], af, one, one);
#pragma unroll
                        for (int nf = 0; nf < NF; nf++)
                            mma16816(part[mf][nf], af, mine ? bq[nf][h][2 * s] : 0u,
                                     mine ? bq[nf][h][2 * s + 1] : 0u);
                    }
                }
            }
            // Fold: this thread's accumulator columns are 2t, 2t+1 of each 8-column fragment.
#pragma unroll
            for (int nf = 0; nf < NF; nf++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const uint32_t sb = Ss[(wn * 32 + nf * 8 + 2 * t + e) * 2 + gi];
                    const float sc = __uint_as_float(sb << 16), bi = __uint_as_float(sb & 0xffff0000u);
#pragma unroll
                    for (int mf = 0; mf < MF; mf++)
#pragma unroll
                        for (int hr = 0; hr < 2; hr++) {
                            float &o = acc[mf][nf][2 * hr + e];
                            o = fmaf(sc, part[mf][nf][2 * hr + e], fmaf(bi, xs[mf][2 * hr], o));
                        }
                }
        }
    }
    wg_cpwait<0>();

    // Epilogue. Thread holds (row g / g+8, columns 2t, 2t+1) of each 16x8 fragment.
    if (glu) {
        __syncthreads(); // pipeline buffers are free: reuse them for the up half
        float *U = (float *)smem;
        constexpr int LD = 64 + 4;
        if (wn >= 2)
#pragma unroll
            for (int mf = 0; mf < MF; mf++)
#pragma unroll
                for (int nf = 0; nf < NF; nf++)
#pragma unroll
                    for (int k = 0; k < 4; k++) {
                        int r = wm * MF * 16 + mf * 16 + g + 8 * (k >> 1);
                        int c = (wn - 2) * 32 + nf * 8 + 2 * t + (k & 1);
                        U[r * LD + c] = acc[mf][nf][k];
                    }
        __syncthreads();
        if (wn >= 2) return;
#pragma unroll
        for (int mf = 0; mf < MF; mf++)
#pragma unroll
            for (int nf = 0; nf < NF; nf++)
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    int r = wm * MF * 16 + mf * 16 + g + 8 * hr;
                    int c = wn * 32 + nf * 8 + 2 * t, col = n0 + c;
                    if (r >= rows || col >= a.N) continue;
                    float o[2];
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        o[e] = qg_glu(acc[mf][nf][2 * hr + e], U[r * LD + c + e]);
                    }
                    int p = m0 + r, orow = a.y_rows ? __ldg(a.y_rows + p) : p;
                    *(uint32_t *)((uint16_t *)a.y + (long)orow * a.ldy + col) = wg_pack(o[0], o[1]);
                }
        return;
    }
#pragma unroll
    for (int mf = 0; mf < MF; mf++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int r = wm * MF * 16 + mf * 16 + g + 8 * hr;
            if (r >= rows) continue;
            const int p = m0 + r, orow = a.y_rows ? __ldg(a.y_rows + p) : p;
            const float sc = a.epi == QG_SCALE_BF16 ? __ldg(a.scale + orow) : 1.0f;
            const long zoff = (long)blockIdx.z * a.split_off; // split-K: this part's partial sums
#pragma unroll
            for (int nf = 0; nf < NF; nf++) {
                const int col = n0 + wn * 32 + nf * 8 + 2 * t;
                if (col >= a.N) continue;
                qg_store2_at(a, zoff + (long)orow * a.ldy + col, [&] { return sc; }, acc[mf][nf][2 * hr], acc[mf][nf][2 * hr + 1]);
            }
        }
}

template <int MF, int WM, int BITS, int GPS>
static void launch_t(const qg_args &a, int grid_x, int grid_z, cudaStream_t st) {
    using C = qg_cfg<MF, WM, BITS>;
    static bool attr = false;
    if (!attr) {
        cudaFuncSetAttribute(qgemm_kernel<MF, WM, BITS, GPS>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM);
        attr = true;
    }
    int cols_per_tile = a.epi == QG_GLU ? QG_BN / 2 : QG_BN;
    dim3 grid(grid_x, (a.N + cols_per_tile - 1) / cols_per_tile, grid_z);
    qgemm_kernel<MF, WM, BITS, GPS><<<grid, C::THREADS, C::SMEM, st>>>(a);
}

template <int BITS, int GPS>
static void launch_tile(const qg_args &a, int tile_m, int grid_x, cudaStream_t st, int grid_z = 1) {
    switch (tile_m) {
    case 16: launch_t<1, 1, BITS, GPS>(a, grid_x, grid_z, st); break;
    case 32: launch_t<2, 1, BITS, GPS>(a, grid_x, grid_z, st); break;
    case 64: launch_t<4, 1, BITS, GPS>(a, grid_x, grid_z, st); break;
    default: launch_t<4, 2, BITS, GPS>(a, grid_x, grid_z, st); break;
    }
}
static void launch_bits(const qg_args &a, int bm, int grid_x, cudaStream_t st, int grid_z = 1) {
    const bool g32 = a.w.group == 32;
    if (a.w.bits == 4) g32 ? launch_tile<4, 2>(a, bm, grid_x, st, grid_z) : launch_tile<4, 1>(a, bm, grid_x, st, grid_z);
    else g32 ? launch_tile<8, 2>(a, bm, grid_x, st, grid_z) : launch_tile<8, 1>(a, bm, grid_x, st, grid_z);
}

// ---- split-K for thin dense calls ----------------------------------------------------------------
// The 8-bit router (256 columns), GDN's b and a (32) and, for short prompts, attention's k and v (512)
// have too few tiles for the SMs: at 4K tokens the router's 128 blocks each walked all 2048 k (~66 us
// a layer, 2.65 ms of a 4K prefill; 72 us a layer at 256 tokens with 8 blocks). Split, each part is a
// block over a range of whole stages that writes its fp32 sums (QG_F32_RAW) to a.part; then
// qg_splitk_sum adds the parts in order (deterministic) and applies the call's epilogue. The parts'
// sums are the unsplit kernel's with the accumulator restarted at each part's first group, so the
// results differ from the unsplit call's by fp32 reassociation only.
int lily_qg_splitk = 0;

int qgemm_splitk_parts(const qg_args &a, int *bm_out) {
    // At most 512 columns: wider calls of short prompts (out_proj, o_proj, z) split where their 64-row
    // tiles left SMs idle measured slower, prefill 256 tokens 12,020 -> 11,920 tok/s (z lost more on the
    // mma.sync tiles than out_proj gained; docs/PERF.md, seventeenth session).
    if (!lily_qg_splitk || !a.part || a.tile_off || a.x_rows || a.y_rows || a.N > 512 || a.M <= 0 || a.N <= 0)
        return 1;
    if (a.epi != QG_BF16 && a.epi != QG_F32 && a.epi != QG_F32_RAW && a.epi != QG_RESID) return 1;
    const int KT = a.K / QG_BK;
    const long sms = cuda_sm_count(), nb = (a.N + 127) / 128;
    // The tile height: 64 rows, lowered while the tiles split into parts of 4 stages would still fill
    // fewer than two blocks an SM (more rows a tile share each dequantised code; more tiles fill SMs).
    int bm = 64;
    while (bm > 16 && (a.M + bm - 1) / bm * nb * (KT / 4) < 2 * sms) bm /= 2;
    const long tiles = (a.M + bm - 1) / bm * nb;
    int S;
    if (lily_qg_splitk == 2) { // tests: split whatever qualifies by shape
        S = (int)std::min<long>(std::max<long>(2, (2 * sms + tiles - 1) / tiles), KT);
    } else {
        // Only where 64-row tiles would keep at most a quarter of the SMs busy: chunks of up to ~1K
        // tokens for the router and k/v, ~2K for b and a. At 4K the router's 3 parts gained 0.5 ms and
        // b and a's 5 parts (beside qkv on the side stream) lost more: prefill 4K 42,332 / 42,564 ->
        // 42,064 / 42,116 tok/s split everywhere the SMs were not full (docs/PERF.md, seventeenth session).
        if ((a.M + 63) / 64 * nb * 4 > sms) return 1;
        S = (int)std::min<long>(std::min<long>((2 * sms + tiles - 1) / tiles, KT / 4), 8);
    }
    // Under this rule S * M * N stays within qgemm_splitk_cap() (S * tiles <= 2 x SMs + tiles, tiles <= a
    // quarter of the SMs at 64 rows, so <= SMs at 16), so the scratch never lowers the count and the bits
    // do not depend on the chunk size; the loop is for callers (tests) with less scratch.
    while (S > 1 && (long)S * a.M * a.N > a.part_cap) S--;
    if (S < 2) return 1;
    const int spp = (KT + S - 1) / S; // stages a part; the last part may have fewer
    *bm_out = bm;
    return (KT + spp - 1) / spp;
}

long qgemm_splitk_cap(void) {
    // Parts x tiles stays under 2 x SMs + tiles (<= 3 x SMs: tiles <= SMs) tiles of at most 64 x 128
    // (qgemm_splitk_parts' rule): 13 MB at 132 SMs, whatever the chunk.
    return 3L * cuda_sm_count() * 64 * 128;
}

// y = epilogue(sum over the S parts in order), two columns a thread (N even).
__global__ void qg_splitk_sum(qg_args a, int S) {
    const long tot = (long)a.M * a.N, i = 2 * ((long)blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= tot) return;
    const int m = (int)(i / a.N), n = (int)(i % a.N);
    float v0 = 0.0f, v1 = 0.0f;
    for (int s = 0; s < S; s++) {
        const float2 p = *(const float2 *)(a.part + s * tot + i);
        v0 += p.x, v1 += p.y;
    }
    qg_store2_at(a, (long)m * a.ldy + n, [] { return 1.0f; }, v0, v1);
}

static void qgemm_splitk(const qg_args &a, int S, int bm, cudaStream_t st) {
    const int KT = a.K / QG_BK, spp = (KT + S - 1) / S;
    qg_args p = a;
    p.K = spp * QG_BK, p.epi = QG_F32_RAW, p.y = a.part, p.ldy = a.N, p.split_off = (long)a.M * a.N, p.res = NULL;
    launch_bits(p, bm, (a.M + bm - 1) / bm, st, S);
    const long pairs = (long)a.M * a.N / 2;
    qg_splitk_sum<<<(unsigned)((pairs + 255) / 256), 256, 0, st>>>(a, S);
}

// Tile height for an expected number of rows per group (expert) or a dense M: the smallest tile that
// wastes little of its last tile, capped at 128 (LILY_CUDA_QG_TILE forces one).
int lily_qg_tile_force = -1;
int qgemm_pick_tile(int rows) {
    if (lily_qg_tile_force < 0) {
        const char *e = getenv("LILY_CUDA_QG_TILE");
        lily_qg_tile_force = e ? atoi(e) : 0;
    }
    const int forced = lily_qg_tile_force;
    if (forced == 16 || forced == 32 || forced == 64 || forced == 128) return forced;
    // Measured on the H200 (docs/PERF.md, prefill ablations): 32 beat 16 at 16 rows per expert (512
    // tokens), 64 beat 128 at 128 rows (4K tokens), 128 forced at 32 rows lost 21 %.
    // With the wgmma kernel (64/128-row tiles only) 64 beat 32 at 32 rows per expert (MoE block at
    // T=1024: 0.98 vs 1.06 ms) and lost to 16 at 8 rows (T=256: 0.80 vs 0.60 ms; device run of
    // 2026-11-29 21:0x, docs/PERF.md): 32 stays for the rows in between.
    // With bf16 weights (no fold, lily_qg_bf16w) the 128-row tile is the faster one from 64 rows
    // up: every GEMM on 128-row tiles measured +2.5 % at 4K (128 rows per expert), +1.9 % at 32K
    // (chunks of 4096), +0.3 % at 2K (64 rows) against this rule's 64 (2026-11-30, inv.sh).
    if (rows <= 8) return 16;
    if (rows <= (lily_qg_wgmma ? 20 : 48)) return 32;
    if (rows <= (lily_qg_wgmma && lily_qg_bf16w ? 64 : 384)) return 64;
    return 128;
}

// A dense call's tile height, lowered from the rule's `bm` to 64 while its grid of 128-column blocks
// would keep fewer than half the SMs busy. On 128-row tiles the 8-bit router (256 columns: 64 blocks
// at 4K tokens) ran at 51 TFLOP/s, GDN's b and a (32 columns: 32 blocks) at 17 (ncu, docs/PERF.md).
// With it the router went 3.44 -> 2.64 ms at 4K and short prompts gained 1-1.5 %; b and a did not
// move (each block still walks all of K). Rows are computed alike at any height (same K order).
// lily_qg_fill = 0 keeps the rule's height (ablation).
int lily_qg_fill = 1;
int qgemm_fill_tile(int M, int N, int bm) {
    if (!lily_qg_fill || lily_qg_tile_force > 0) return bm;
    const long sms = cuda_sm_count(), nb = (N + 127) / 128;
    while (bm > 64 && 2 * nb * ((M + bm - 1) / bm) <= sms) bm /= 2;
    return bm;
}

// The slow path for what the tensor-core kernel does not take (dense bf16/f16/f32 weights, odd
// widths or group sizes: the tiny test fixtures): one thread per output element, fp32 weights from
// dq_get, the same row mapping and epilogues. Grouped mode finds a row's group by binary search.
__global__ void qgemm_generic_kernel(qg_args a) {
    const int p = blockIdx.y, n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= a.N) return;
    long wrow = n;
    if (a.grp_off) {
        int lo = 0, hi = a.n_groups - 1; // last group with grp_off[g] <= p
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if (a.grp_off[mid] <= p) lo = mid;
            else hi = mid - 1;
        }
        if (a.grp_end && p >= a.grp_end[lo]) return; // another launch's row (grp_off: this one's starts)
        wrow += (long)lo * a.N;
    }
    const int xr = a.x_rows ? a.x_rows[p] : p;
    const uint16_t *x = a.x + (long)xr * a.ldx;
    float acc = 0.0f, acc2 = 0.0f;
    for (int k = 0; k < a.K; k++) {
        float xv = __uint_as_float((uint32_t)x[k] << 16);
        float w = dq_get(a.w, wrow, k), w2 = a.epi == QG_GLU ? dq_get(a.w2, wrow, k) : 0.0f;
        acc += xv * w;
        acc2 += xv * w2;
    }
    qg_store(a, p, n, acc, acc2);
}

int qgemm_launch(const qg_args &a, int tile_m, int max_tiles, cudaStream_t st) {
    if (a.tile_off && tile_m != 16 && tile_m != 32 && tile_m != 64 && tile_m != 128 && tile_m != 192)
        return lily_err_set(LILY_EINVAL, "qgemm: grouped mode needs the tile height of its map");
    if (tile_m == 192) { // the merged map (qg_args.tile_rest): only the wgmma kernel's 3 warpgroups take it
        if (!a.tile_off || !qgemm_wg_takes(a, 192))
            return lily_err_set(LILY_EINVAL, "qgemm: 192-row tiles need a grouped map and the wgmma kernel");
        qg_args m = a;
        m.tile_rest = 1;
        if (max_tiles > 0 && a.N > 0) qgemm_wg_launch(m, 192, max_tiles, st);
        return 0;
    }
    if (a.w.cols != a.K || (a.epi == QG_GLU && (a.w2.cols != a.K || a.w2.fmt != a.w.fmt)))
        return lily_err_set(LILY_EINVAL, "qgemm: unsupported shape N=%d K=%d cols=%d", a.N, a.K, a.w.cols);
    // LILY_CUDA_QG_GENERIC (debug bitmask): 1 = dense 4-bit, 2 = 8-bit, 4 = grouped products take the
    // slow path too, to tell a tensor-core kernel fault from one elsewhere.
    static int force = -1;
    if (force < 0) {
        const char *e = getenv("LILY_CUDA_QG_GENERIC");
        force = e ? atoi(e) : 0;
    }
    const bool forced = ((force & 1) && a.w.bits == 4 && !a.tile_off) || ((force & 2) && a.w.bits == 8) ||
                        ((force & 4) && a.tile_off);
    if (forced || a.w.fmt == DQ_DENSE || a.K % QG_BK || a.N % 2 || (a.w.bits != 4 && a.w.bits != 8) ||
        (a.w.group != 32 && a.w.group % QG_BK) || (a.w.group & (a.w.group - 1)) || (a.epi == QG_GLU && (a.w2.bits != a.w.bits || a.w2.group != a.w.group))) {
        if (a.M > 0 && a.N > 0)
            qgemm_generic_kernel<<<dim3((a.N + 127) / 128, a.M), 128, 0, st>>>(a);
        return 0;
    }
    const bool pick = tile_m == 0;
    if (pick) tile_m = qgemm_pick_tile(a.tile_off ? a.M / (a.n_groups > 0 ? a.n_groups : 1) : a.M);
    int bm = tile_m == 16 || tile_m == 32 || tile_m == 64 ? tile_m : 128;
    if (pick && !a.tile_off) bm = qgemm_fill_tile(a.M, a.N, bm);
    int grid_x = a.tile_off ? max_tiles : (a.M + bm - 1) / bm;
    if (grid_x <= 0 || a.N <= 0) return 0;
    if (pick) {
        int bms = 0;
        const int S = qgemm_splitk_parts(a, &bms);
        if (S > 1) {
            qgemm_splitk(a, S, bms, st);
            return 0;
        }
    }
    if (qgemm_wg_takes(a, bm)) {
        if (qgemm_rs_on()) qgemm_rs_launch(a, bm, grid_x, st);
        else if (qgemm_ws_on()) qgemm_ws_launch(a, bm, grid_x, st);
        else qgemm_wg_launch(a, bm, grid_x, st);
        return 0;
    }
    launch_bits(a, bm, grid_x, st);
    return 0;
}
