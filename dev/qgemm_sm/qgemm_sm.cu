// dev/qgemm_sm/qgemm_sm.cu: a prototype of the MoE's grouped GEMM for short prompts (8-32 rows an
// expert), with the tokens on the MMA's n8 side (seventeenth session), and the harness of its
// successor qgemm_tn.cu (this folder, eighteenth session). Measured in docs/PERF.md ("CUDA prefill /
// eighteenth session"): at T = 256 this kernel's gate|up 170 us against qgemm.cu's 190, its down 126
// against 88; more stages in flight slower (U 3-6), fewer token tiles a pass slower (re-read weights).
//
// Why: at 256 tokens each expert holds ~8 rows. The engine's mma.sync kernel (qgemm.cu) puts the rows
// on the MMA's m16 side (16-row tiles, half of them empty) and the weight codes on the n8 side, copied
// through shared memory by cp.async with a block barrier each stage; it streams the MoE's weights at
// ~1.6 TB/s. Here the operands are swapped: D^T (weight rows x tokens) = W . X^T on
// mma.m16n8k16, so
//   - the A operand is 16 weight rows: each lane loads its 8 bytes of codes per row and stage straight
//     from global memory into registers (no shared memory, no barrier for them), several stages
//     ahead, and turns them into exact bf16 integers q (qgemm.cu's codes8: shift, lop3, one bf16x2 FMA
//     per pair of codes);
//   - the B operand is 8 tokens: the group's X rows, staged in shared memory a k-chunk at a time for
//     the block's 8 warps (rows past the group are zero-filled);
//   - the weights stay exact, as in qgemm.cu: the MMA sums x q per group, a second MMA with an A of
//     ones sums x, and acc += s part + b xsum per row and group.
// The k order inside a stage is permuted alike in A and B (lane t holds codes 16t .. 16t+15 of its
// rows: slot pair (2t, 2t+1) of MMA m is codes (16t+m, 16t+m+4), pair (2t+8, 2t+9) is (16t+8+m,
// 16t+12+m)); a dot product does not care.
//
// Shapes: a block of 8 warps takes one expert's group (all of its rows, in passes of 8 NT) and 128
// output columns (a warp 16); for GLU a warp's 16 columns are 16 gate rows and the same 16 up rows,
// combined in registers (h = rb(silu(rb(gate))) * rb(up), bf16). Group 64 only; K % 256 == 0.
//
// Usage: [LILY_SM_TN=1] qgemm_sm [T [REPS]] (T tokens of top-8 of 256 experts; default 256; with
// LILY_SM_TN=1 the CPU checks are of qgemm_tn's outputs, else of this prototype's; then the timings
// of the engine's qgemm_launch, this kernel, qgemm_tn and qgemm_tn's variants). It builds random
// weights in the engine's layout (dq_mat), the gate|up (GLU, H 2048 -> I 512) and down (512 -> 2048)
// problems of one MoE layer, checks each against a CPU reference in double over the exact weights
// (rel. L2, tolerance 5e-3 for bf16 outputs, 1e-5 for fp32), compares with the engine's qgemm_launch
// on the same groups, and times both (weight bytes / time).
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda/gemv.cuh" // gv2_mma
#include "cuda/prefill.cuh"
#include "cuda/qgemm_wg.cuh" // wg_cp16, wg_commit, wg_cpwait, wg_bf2_fma, wg_pack

// qgemm_tn's kernel again, in a namespace of its own, for timing other shapes of it than the engine's
// (token tiles a pass, stages in flight).
namespace tnv {
#include "qgemm_tn.cu"
}

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr int SM_WARPS = 8, SM_KC = 256, SM_NCHUNK = 3; // warps a block; k a staged X chunk; chunks in the ring
constexpr int SM_LD = SM_KC + 8;                         // X row stride in shared memory (bf16 elements)

// Codes j and j + 4 of word u as the exact bf16 pair (q_j, q_j+4).
__device__ __forceinline__ uint32_t sm_pair(uint32_t u, int j) {
    return wg_bf2_fma(((u >> (4 * j)) & 0x000F000Fu) | 0x43004300u, 0x3F803F80u, 0xC300C300u);
}

struct sm_args {
    const uint16_t *x;  // (R, K) bf16, rows in expert order
    dq_mat w, w2;       // stacked (E * N, K); w2: the up rows (GLU)
    const int *grp_off; // (E + 1)
    int N, K, E;
    int glu;            // 1: y = bf16 h (R, N); 0: y = fp32 (R, N)
    void *y;
};

// One block: expert blockIdx.y, output columns 128 blockIdx.x .. +127. NT: n8 token tiles a pass, U:
// stages of codes a lane has in flight.
template <bool GLU, int NT, int U, int MINB = (NT <= 2 ? 2 : 1)>
__global__ void __launch_bounds__(SM_WARPS * 32, MINB) qgemm_sm_kernel(sm_args a) {
    extern __shared__ __align__(16) uint16_t xs_sm[]; // [SM_NCHUNK][8 NT][SM_LD]
    const int e = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    const int r0 = a.grp_off[e], rows = a.grp_off[e + 1] - r0;
    const int col = blockIdx.x * 128 + warp * 16; // this warp's first output column
    if (rows <= 0) return;
    const int KS = a.K / 64, NCH = a.K / SM_KC, ng = a.K / 64;
    const long rb_ = (long)a.K / 2; // code bytes a row
    const bool live0 = col + g < a.N, live1 = col + g + 8 < a.N;
    const long wr0 = (long)e * a.N + col + g, wr1 = wr0 + 8;
    const char *cg0 = (const char *)a.w.codes + wr0 * rb_ + 8 * t, *cg1 = (const char *)a.w.codes + wr1 * rb_ + 8 * t;
    const char *cu0 = GLU ? (const char *)a.w2.codes + wr0 * rb_ + 8 * t : cg0;
    const char *cu1 = GLU ? (const char *)a.w2.codes + wr1 * rb_ + 8 * t : cg1;
    const uint32_t *sg0 = a.w.sb + wr0 * ng, *sg1 = a.w.sb + wr1 * ng;
    const uint32_t *su0 = GLU ? a.w2.sb + wr0 * ng : sg0, *su1 = GLU ? a.w2.sb + wr1 * ng : sg1;

    for (int p0 = 0; p0 < rows; p0 += 8 * NT) { // passes of 8 NT rows
        const int pr = min(8 * NT, rows - p0);
        // X chunk c of this pass's rows into ring slot c % SM_NCHUNK (rows past pr zero-filled).
        auto load_x = [&](int c) {
            uint16_t *dst = xs_sm + (c % SM_NCHUNK) * (8 * NT * SM_LD);
            for (int i = tid; i < 8 * NT * (SM_KC / 8); i += SM_WARPS * 32) {
                const int r = i / (SM_KC / 8), q = i % (SM_KC / 8);
                const bool ok = r < pr;
                const uint16_t *src = a.x + (ok ? (long)(r0 + p0 + r) * a.K + c * SM_KC + q * 8 : 0);
                wg_cp16(dst + r * SM_LD + q * 8, src, ok);
            }
        };
        __syncthreads(); // the previous pass's readers are done with the ring
#pragma unroll
        for (int c = 0; c < SM_NCHUNK - 1; c++) {
            if (c < NCH) load_x(c);
            wg_commit();
        }
        float acc[NT][4], acc2[NT][4];
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[n][i] = acc2[n][i] = 0.0f;
        // Codes (and scale words) of stages kt .. kt + U - 1 in flight in registers.
        uint2 cw[U][4];
        uint32_t sw[U][4];
        auto load_codes = [&](int slot, int kt) {
            const bool ok = kt < KS;
            const long o = ok ? (long)kt * 32 : 0;
            cw[slot][0] = live0 && ok ? __ldg((const uint2 *)(cg0 + o)) : make_uint2(0, 0);
            cw[slot][1] = live1 && ok ? __ldg((const uint2 *)(cg1 + o)) : make_uint2(0, 0);
            cw[slot][2] = GLU && live0 && ok ? __ldg((const uint2 *)(cu0 + o)) : make_uint2(0, 0);
            cw[slot][3] = GLU && live1 && ok ? __ldg((const uint2 *)(cu1 + o)) : make_uint2(0, 0);
            sw[slot][0] = live0 && ok ? __ldg(sg0 + kt) : 0u;
            sw[slot][1] = live1 && ok ? __ldg(sg1 + kt) : 0u;
            sw[slot][2] = GLU && live0 && ok ? __ldg(su0 + kt) : 0u;
            sw[slot][3] = GLU && live1 && ok ? __ldg(su1 + kt) : 0u;
        };
#pragma unroll
        for (int u = 0; u < U; u++) load_codes(u, u);

        for (int kb = 0; kb < KS; kb += U) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int kt = kb + u;
                if (kt >= KS) break;
                if (kt % (SM_KC / 64) == 0) { // a new X chunk: wait for it, then request chunk + 2
                    const int c = kt / (SM_KC / 64);
                    wg_cpwait<SM_NCHUNK - 2>();
                    __syncthreads();
                    if (c + SM_NCHUNK - 1 < NCH) load_x(c + SM_NCHUNK - 1);
                    wg_commit();
                }
                const uint2 c0 = cw[u][0], c1 = cw[u][1], c2 = cw[u][2], c3 = cw[u][3];
                const uint32_t s0 = sw[u][0], s1 = sw[u][1], s2 = sw[u][2], s3 = sw[u][3];
                load_codes(u, kt + U); // this slot's registers are free now: request stage kt + U
                const uint16_t *xc = xs_sm + ((kt / (SM_KC / 64)) % SM_NCHUNK) * (8 * NT * SM_LD) +
                                     (kt % (SM_KC / 64)) * 64 + 16 * t;
                // B: token g of each tile, its 16 values of the stage (k = 16t .. 16t + 15).
                uint32_t v[NT][8];
#pragma unroll
                for (int n = 0; n < NT; n++) {
                    const uint4 v0 = *(const uint4 *)(xc + (8 * n + g) * SM_LD);
                    const uint4 v1 = *(const uint4 *)(xc + (8 * n + g) * SM_LD + 8);
                    v[n][0] = v0.x, v[n][1] = v0.y, v[n][2] = v0.z, v[n][3] = v0.w;
                    v[n][4] = v1.x, v[n][5] = v1.y, v[n][6] = v1.z, v[n][7] = v1.w;
                }
                float part[NT][4], part2[NT][4], xsum[NT][4];
#pragma unroll
                for (int n = 0; n < NT; n++)
#pragma unroll
                    for (int i = 0; i < 4; i++) part[n][i] = part2[n][i] = xsum[n][i] = 0.0f;
                // MMA m of the stage: A = rows {g, g + 8}, codes (16t+m, 16t+m+4) and (16t+8+m, 16t+12+m).
#pragma unroll
                for (int m = 0; m < 4; m++) {
                    const uint32_t a0 = sm_pair(c0.x, m), a1 = sm_pair(c1.x, m), a2 = sm_pair(c0.y, m),
                                   a3 = sm_pair(c1.y, m);
                    uint32_t u0 = 0, u1 = 0, u2 = 0, u3 = 0;
                    if (GLU) u0 = sm_pair(c2.x, m), u1 = sm_pair(c3.x, m), u2 = sm_pair(c2.y, m), u3 = sm_pair(c3.y, m);
                    const uint32_t sel = (m & 1) ? 0x7632 : 0x5410;
#pragma unroll
                    for (int n = 0; n < NT; n++) {
                        if (8 * n >= pr) break;
                        const uint32_t b0 = __byte_perm(v[n][m >> 1], v[n][(m >> 1) + 2], sel);
                        const uint32_t b1 = __byte_perm(v[n][4 + (m >> 1)], v[n][6 + (m >> 1)], sel);
                        gv2_mma(part[n], a0, a1, a2, a3, b0, b1);
                        if (GLU) gv2_mma(part2[n], u0, u1, u2, u3, b0, b1);
                        gv2_mma(xsum[n], 0x3F803F80u, 0x3F803F80u, 0x3F803F80u, 0x3F803F80u, b0, b1);
                    }
                }
                // Fold the stage's group: acc[i] is (row g: tokens 2t, 2t+1; row g + 8: the same tokens).
#pragma unroll
                for (int n = 0; n < NT; n++)
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const uint32_t sa = i < 2 ? s0 : s1, sb2 = i < 2 ? s2 : s3;
                        acc[n][i] = fmaf(__uint_as_float(sa << 16), part[n][i],
                                         fmaf(__uint_as_float(sa & 0xffff0000u), xsum[n][i & 1], acc[n][i]));
                        if (GLU)
                            acc2[n][i] = fmaf(__uint_as_float(sb2 << 16), part2[n][i],
                                              fmaf(__uint_as_float(sb2 & 0xffff0000u), xsum[n][i & 1], acc2[n][i]));
                    }
            }
        }
        wg_cpwait<0>();
        // Outputs: token 8 n + 2 t + (i & 1), column col + g + 8 (i >> 1).
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int tok = 8 * n + 2 * t + (i & 1), c = col + g + 8 * (i >> 1);
                if (tok >= pr || c >= a.N) continue;
                const long at = (long)(r0 + p0 + tok) * a.N + c;
                if (GLU) ((uint16_t *)a.y)[at] = lily_f32_to_bf16(qg_glu(acc[n][i], acc2[n][i]));
                else ((float *)a.y)[at] = acc[n][i];
            }
    }
}

template <bool GLU, int NT, int U, int MINB = (NT <= 2 ? 2 : 1)> static void sm_launch(const sm_args &a, cudaStream_t st) {
    const int smem = SM_NCHUNK * 8 * NT * SM_LD * 2;
    static bool attr = false;
    if (!attr) {
        CK(cudaFuncSetAttribute(qgemm_sm_kernel<GLU, NT, U, MINB>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        attr = true;
    }
    qgemm_sm_kernel<GLU, NT, U, MINB><<<dim3((a.N + 127) / 128, a.E), SM_WARPS * 32, smem, st>>>(a);
}

// ---- host ---------------------------------------------------------------------------------------
static uint64_t g_rng = 88172645463325252ull;
static uint32_t rnd() { g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17; return (uint32_t)g_rng; }
static float frand() { return (rnd() >> 8) * (1.0f / 16777216.0f); }
static uint16_t f2bf(float f) { return lily_f32_to_bf16(f); } // quant.h's, short names for the loops below
static float bf2f(uint16_t h) { return lily_bf16_to_f32(h); }

// Random 4-bit matrix (rows, K) in the engine's layout, on the device; the host keeps its codes and words.
struct hmat { std::vector<uint8_t> codes; std::vector<uint32_t> sb; dq_mat d; };
static void make_mat(hmat &h, long rows, int K) {
    h.codes.resize(rows * K / 2), h.sb.resize(rows * (K / 64));
    for (auto &c : h.codes) c = (uint8_t)rnd();
    const float sc = 1.0f / (8.0f * sqrtf((float)K));
    for (auto &w : h.sb) w = (uint32_t)f2bf(sc * (0.5f + frand())) | (uint32_t)f2bf(-8.0f * sc * (0.5f + frand())) << 16;
    void *c, *s;
    CK(cudaMalloc(&c, h.codes.size()));
    CK(cudaMalloc(&s, h.sb.size() * 4));
    CK(cudaMemcpy(c, h.codes.data(), h.codes.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(s, h.sb.data(), h.sb.size() * 4, cudaMemcpyHostToDevice));
    h.d = dq_mat{(const uint4 *)c, (const uint32_t *)s, (int)rows, K, 4, 64, DQ_FAST, 0};
}
static double wval(const hmat &h, long r, int k, int K) {
    const int q = (int)lily_q_code(h.codes.data() + r * K / 2, k, 4);
    const uint32_t w = h.sb[r * (K / 64) + k / 64];
    return (double)bf2f((uint16_t)w) * q + bf2f((uint16_t)(w >> 16));
}

int main(int argc, char **argv) {
    const int T = argc > 1 ? atoi(argv[1]) : 256, reps = argc > 2 ? atoi(argv[2]) : 20;
    const int E = 256, topk = 8, H = 2048, I = 512, R = T * topk;
    // Groups: each token's 8 distinct experts at random.
    std::vector<int> cnt(E, 0);
    for (int tk = 0; tk < T; tk++) {
        int sel[8], ns = 0;
        while (ns < topk) {
            const int x = rnd() % E;
            bool dup = false;
            for (int j = 0; j < ns; j++) dup |= sel[j] == x;
            if (!dup) sel[ns++] = x;
        }
        for (int j = 0; j < topk; j++) cnt[sel[j]]++;
    }
    std::vector<int> off(E + 1, 0);
    for (int e = 0; e < E; e++) off[e + 1] = off[e] + cnt[e];
    const int maxc = *std::max_element(cnt.begin(), cnt.end());
    printf("qgemm_sm: T=%d tokens, %d rows over %d experts (largest group %d rows, mean %.1f)\n", T, R, E, maxc, (double)R / E);
    std::vector<uint16_t> xh((size_t)R * H), hh((size_t)R * I);
    for (auto &v : xh) v = f2bf(2.0f * frand() - 1.0f);
    hmat gate, up, down;
    make_mat(gate, (long)E * I, H), make_mat(up, (long)E * I, H), make_mat(down, (long)E * H, I);
    uint16_t *dx, *dh, *dh_ref;
    float *dy, *dy_ref;
    int *doff, *dtile;
    CK(cudaMalloc(&dx, xh.size() * 2));
    CK(cudaMalloc(&dh, hh.size() * 2));
    CK(cudaMalloc(&dh_ref, hh.size() * 2));
    CK(cudaMalloc(&dy, (size_t)R * H * 4));
    CK(cudaMalloc(&dy_ref, (size_t)R * H * 4));
    CK(cudaMalloc(&doff, (E + 1) * 4));
    CK(cudaMalloc(&dtile, (E + 1) * 4));
    CK(cudaMemcpy(dx, xh.data(), xh.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(doff, off.data(), (E + 1) * 4, cudaMemcpyHostToDevice));

    // The engine's path for these groups: qgemm_launch on its tile rule's height (16 at 8 rows).
    const int tile = qgemm_pick_tile(R / E);
    std::vector<int> toff(E + 1, 0);
    for (int e = 0; e < E; e++) toff[e + 1] = toff[e] + (cnt[e] + tile - 1) / tile;
    CK(cudaMemcpy(dtile, toff.data(), (E + 1) * 4, cudaMemcpyHostToDevice));
    auto engine = [&](bool glu) {
        qg_args g;
        memset(&g, 0, sizeof g);
        g.grp_off = doff, g.tile_off = dtile, g.n_groups = E, g.M = R;
        if (glu) g.x = dx, g.ldx = H, g.w = gate.d, g.w2 = up.d, g.N = I, g.K = H, g.epi = QG_GLU, g.y = dh_ref, g.ldy = I;
        else g.x = dh, g.ldx = I, g.w = down.d, g.N = H, g.K = I, g.epi = QG_F32_RAW, g.y = dy_ref, g.ldy = H;
        qgemm_launch(g, tile, toff[E], 0);
    };
    auto tn = [&](bool glu) { // qgemm_tn.cu (this folder) through the engine's arguments
        qg_args g;
        memset(&g, 0, sizeof g);
        g.grp_off = doff, g.tile_off = dtile, g.n_groups = E, g.M = R;
        if (glu) g.x = dx, g.ldx = H, g.w = gate.d, g.w2 = up.d, g.N = I, g.K = H, g.epi = QG_GLU, g.y = dh, g.ldy = I;
        else g.x = dh, g.ldx = I, g.w = down.d, g.N = H, g.K = I, g.epi = QG_F32_RAW, g.y = dy, g.ldy = H;
        if (!tnv::qgemm_tn_takes(g)) { fprintf(stderr, "qgemm_tn does not take the call\n"); exit(1); }
        tnv::qgemm_tn_launch(g, 0);
    };
    sm_args ga = {dx, gate.d, up.d, doff, I, H, E, 1, dh}, da = {dh, down.d, down.d, doff, H, I, E, 0, dy};
    auto mine = [&](bool glu) {
        const sm_args &a = glu ? ga : da;
        // Token tiles a pass from the mean group (a larger group takes more passes).
        // Stages in flight: 2 for GLU (two rows' codes a stage), 4 otherwise, to stay in 128 registers
        // (two blocks an SM) without spilling (ptxas, CUDA 13.0).
        if (R <= 12 * E) glu ? sm_launch<true, 2, 2>(a, 0) : sm_launch<false, 2, 4>(a, 0);
        else glu ? sm_launch<true, 4, 2>(a, 0) : sm_launch<false, 4, 4>(a, 0);
    };
    // Correctness: gate|up then down (the down's input is this kernel's h), each against fp64; the
    // prototype first, then qgemm_tn (LILY_SM_TN=1 checks qgemm_tn's outputs instead).
    const bool chk_tn = getenv("LILY_SM_TN") && atoi(getenv("LILY_SM_TN"));
    if (chk_tn) tn(true); else
    mine(true);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(hh.data(), dh, hh.size() * 2, cudaMemcpyDeviceToHost));
    // The references (every 4th expert: the host's double loops), each expert's rows dequantised once.
    double num = 0, den = 0;
    std::vector<double> wg((size_t)I * H), wu((size_t)I * H), wd((size_t)H * I);
    for (int e = 0; e < E; e += 4) {
        if (!cnt[e]) continue;
        for (int c = 0; c < I; c++)
            for (int k = 0; k < H; k++)
                wg[(size_t)c * H + k] = wval(gate, (long)e * I + c, k, H), wu[(size_t)c * H + k] = wval(up, (long)e * I + c, k, H);
        for (int r = off[e]; r < off[e + 1]; r++)
            for (int c = 0; c < I; c++) {
                double sg = 0, su = 0;
                for (int k = 0; k < H; k++) {
                    const double x = bf2f(xh[(size_t)r * H + k]);
                    sg += x * wg[(size_t)c * H + k], su += x * wu[(size_t)c * H + k];
                }
                const float gb = bf2f(f2bf((float)sg)), ub = bf2f(f2bf((float)su));
                const float hv = bf2f(f2bf(bf2f(f2bf(gb / (1.0f + expf(-gb)))) * ub));
                const double d = bf2f(hh[(size_t)r * I + c]) - hv;
                num += d * d, den += (double)hv * hv;
            }
    }
    const double e_gu = sqrt(num / std::max(den, 1e-30));
    if (chk_tn) tn(false); else
    mine(false);
    CK(cudaDeviceSynchronize());
    std::vector<float> yh((size_t)R * H);
    CK(cudaMemcpy(yh.data(), dy, yh.size() * 4, cudaMemcpyDeviceToHost));
    num = den = 0;
    for (int e = 0; e < E; e += 4) {
        if (!cnt[e]) continue;
        for (int c = 0; c < H; c++)
            for (int k = 0; k < I; k++) wd[(size_t)c * I + k] = wval(down, (long)e * H + c, k, I);
        for (int r = off[e]; r < off[e + 1]; r++)
            for (int c = 0; c < H; c++) {
                double sd = 0;
                for (int k = 0; k < I; k++) sd += (double)bf2f(hh[(size_t)r * I + k]) * wd[(size_t)c * I + k];
                const double d = yh[(size_t)r * H + c] - sd;
                num += d * d, den += sd * sd;
            }
    }
    const double e_dn = sqrt(num / std::max(den, 1e-30));
    printf("%s gate|up (GLU, bf16 h) vs fp64: rel_l2 %.2e (tol 5e-3)\n", e_gu < 5e-3 ? "PASS" : "FAIL", e_gu);
    printf("%s down (fp32) vs fp64: rel_l2 %.2e (tol 1e-5)\n", e_dn < 1e-5 ? "PASS" : "FAIL", e_dn);

    // Timing: each GEMM alone, the engine's and this one, weight bytes of the experts with rows.
    int used = 0;
    for (int e = 0; e < E; e++) used += cnt[e] > 0;
    const double gu_bytes = 2.0 * used * I * H * (0.5 + 4.0 / 64), dn_bytes = (double)used * H * I * (0.5 + 4.0 / 64);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    auto clock_us = [&](auto fn) {
        fn();
        CK(cudaDeviceSynchronize());
        CK(cudaEventRecord(e0));
        for (int i = 0; i < reps; i++) fn();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        return ms * 1e3 / reps;
    };
    const double t_egu = clock_us([&] { engine(true); }), t_mgu = clock_us([&] { mine(true); });
    const double t_edn = clock_us([&] { engine(false); }), t_mdn = clock_us([&] { mine(false); });
    printf("gate|up: engine (%d-row tiles) %.1f us (%.2f TB/s), this %.1f us (%.2f TB/s)\n", tile, t_egu,
           gu_bytes / t_egu / 1e6, t_mgu, gu_bytes / t_mgu / 1e6);
    printf("down:    engine (%d-row tiles) %.1f us (%.2f TB/s), this %.1f us (%.2f TB/s)\n", tile, t_edn,
           dn_bytes / t_edn / 1e6, t_mdn, dn_bytes / t_mdn / 1e6);
    const double t_tgu = clock_us([&] { tn(true); }), t_tdn = clock_us([&] { tn(false); });
    printf("qgemm_tn (dev/qgemm_sm/qgemm_tn.cu): gate|up %.1f us (%.2f TB/s), down %.1f us (%.2f TB/s)\n", t_tgu,
           gu_bytes / t_tgu / 1e6, t_tdn, dn_bytes / t_tdn / 1e6);
    // Variants: name, GLU or not, launcher, column tiles a block, and (ring forms) the register form
    // whose outputs they must equal bit for bit (same arithmetic, same order).
    struct var { const char *name; bool glu; void (*fn)(const qg_args &, cudaStream_t, int); int ct; void (*same)(const qg_args &, cudaStream_t, int); };
    const var vs[] = {
        {"GLU NT2 U1 ct1", true, tnv::tn_launch<true, 2, 1>, 1, NULL},  {"GLU NT2 U2 ct1", true, tnv::tn_launch<true, 2, 2>, 1, NULL},
        {"GLU NT2 U1 all", true, tnv::tn_launch<true, 2, 1>, 0, NULL},  {"GLU NT2 U2 all", true, tnv::tn_launch<true, 2, 2>, 0, NULL},
        {"GLU NT2 R3 all", true, tnv::tn_launch<true, 2, 1, 3>, 0, tnv::tn_launch<true, 2, 1>},
        {"GLU NT2 R4 all", true, tnv::tn_launch<true, 2, 1, 4>, 0, tnv::tn_launch<true, 2, 1>},
        {"GLU NT2 R4 ct1", true, tnv::tn_launch<true, 2, 1, 4>, 1, tnv::tn_launch<true, 2, 1>},
        {"DN NT2 U4 ct4", false, tnv::tn_launch<false, 2, 4>, 4, NULL}, {"DN NT2 U4 all", false, tnv::tn_launch<false, 2, 4>, 0, NULL},
        {"DN NT2 R4 ct4", false, tnv::tn_launch<false, 2, 1, 4>, 4, tnv::tn_launch<false, 2, 4>},
        {"DN NT2 R8 ct4", false, tnv::tn_launch<false, 2, 1, 8>, 4, tnv::tn_launch<false, 2, 4>},
    };
    bool same_all = true;
    for (const var &v : vs) {
        qg_args g;
        memset(&g, 0, sizeof g);
        g.grp_off = doff, g.tile_off = dtile, g.n_groups = E, g.M = R;
        if (v.glu) g.x = dx, g.ldx = H, g.w = gate.d, g.w2 = up.d, g.N = I, g.K = H, g.epi = QG_GLU, g.y = dh, g.ldy = I;
        else g.x = dh, g.ldx = I, g.w = down.d, g.N = H, g.K = I, g.epi = QG_F32_RAW, g.y = dy, g.ldy = H;
        const char *same = "";
        if (v.same) { // outputs of the ring form and of its register form, bitwise (inputs: the h above)
            const size_t bytes = v.glu ? hh.size() * 2 : yh.size() * 4;
            void *o1, *o2;
            CK(cudaMalloc(&o1, bytes));
            CK(cudaMalloc(&o2, bytes));
            CK(cudaMemset(o1, 0xff, bytes));
            CK(cudaMemset(o2, 0xff, bytes));
            qg_args g1 = g, g2 = g;
            g1.y = o1, g2.y = o2;
            if (!v.glu) g1.x = g2.x = dh_ref; // down: fixed inputs (the engine's h), not this loop's outputs
            v.fn(g1, 0, v.ct), v.same(g2, 0, v.ct);
            CK(cudaDeviceSynchronize());
            std::vector<unsigned char> b1(bytes), b2(bytes);
            CK(cudaMemcpy(b1.data(), o1, bytes, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(b2.data(), o2, bytes, cudaMemcpyDeviceToHost));
            const bool eq = !memcmp(b1.data(), b2.data(), bytes);
            same_all = same_all && eq;
            same = eq ? " (bitwise equal to its register form)" : " (DIFFERENT from its register form: FAIL)";
            CK(cudaFree(o1));
            CK(cudaFree(o2));
        }
        const double t = clock_us([&] { v.fn(g, 0, v.ct); });
        printf("variant %-14s %7.1f us (%.2f TB/s)%s\n", v.name, t, (v.glu ? gu_bytes : dn_bytes) / t / 1e6, same);
    }
    return e_gu < 5e-3 && e_dn < 1e-5 && same_all ? 0 : 1;
}
