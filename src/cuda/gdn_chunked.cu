// gdn_chunked.cu: the Gated DeltaNet core for a prefill chunk of T tokens in the CHUNKED form (spec
// §4, chunks of 64 tokens, the WY form), the same function as gdn_pf_scan (gdn_prefill.cu): same
// arguments, outputs, ring and state, T decode steps' worth. The scan walks the tokens one by one on
// the CUDA cores; here the work of 64 tokens is a handful of matrix products on the tensor cores.
//
// Three kernels. Everything that does not depend on the state is done for all chunks at once; only
// three products a chunk remain in the serial chain over the chunks.
//
// gdn_conv_all: conv + SiLU of every channel of every token of the call (gdn_pf.cuh's arithmetic),
// into the scratch (T x C after the records) as bf16: the outputs are rounded to bf16 there (the
// reference's storage point), so the 16-bit copy is exact and phase A and B read finished inputs.
//
// Phase A, gdn_chunk_prep, grid (chunks, Hv), 8 warps: per chunk of nc <= 64 live tokens and v head
// (rows past nc are zero: q = k = v = 0, beta = 0, g = 0, so they neither decay nor write the state,
// and a partial last chunk needs no other care):
//   the chunk's q, k (k head h // (Hv/Hk)) and v after the conv (bf16, as they are), beta, log-decay
//   g, Gamma = cumulative g (warp scan), the inverse L2 norms rq, rk of q and k (eps inside the sqrt,
//   rq with Dk^-1/2: the scan's code; 4 lanes a token);
//   MMA on the raw rows, the norms as row factors: A = beta_i rk_i rk_j (k_i.k_j) e^(Gamma_i - Gamma_j)
//   (j < i), M = rq_i rk_j (q_i.k_j) e^(Gamma_i - Gamma_j) (j <= i);
//   X = (I + A)^-1 by blocks of 16 (forward substitution in the diagonal blocks, then products);
//   MMA: W = X (beta e^Gamma K/|k|) = (X diag(beta e^Gamma rk)) K (64 x Dk), U = (X diag(beta)) V
//   (64 x Dv, in passes of 128 columns);
//   and the row factors fq = e^Gamma / |q| Dk^-1/2 and fk = e^(Gamma_C - Gamma) / |k|, e^Gamma_C, all
//   written to the scratch record of (chunk, head) in fp32 (layout at gc_layout: ~82 KB at Dk = Dv = 128).
// Phase B, gdn_chunk_scan, grid (Hv, nsplit) (at Dk 128 and 32 columns a block, the real model's shape,
// gdn_scan_wg.cu's form on the warpgroup MMA runs instead: the same products, the same bits): a block
// owns `ncols` value columns of one v head
// (columns of the state are independent given the record), walks the chunks in order with its state
// slice S (ncols x Dk fp32, the (Hv, Dv, Dk) layout) in shared memory throughout, and per chunk:
//   step 1 (MMA): Delta = U - W S0 (the per-token deltas of the recurrence: R = beta (V - e^Gamma K S0)
//     and Delta = X R = U - W S0), Oacc = fq (Q S0) (kept in registers);
//   step 2 (MMA): O = Oacc + M Delta (bf16 out), S = e^Gamma_C S + (fk Delta)^T K.
// Q and K here are the conv outputs themselves, not normalised: Qg = e^Gamma Q/|q| and Kd =
// e^(Gamma_C - Gamma) K/|k| are those rows times a factor, and a row factor commutes out of the
// product (Qg S0 = fq (Q S0); Delta^T Kd = (fk Delta)^T K). The conv outputs are bf16 values
// (rounded there, as the reference stores them), so phase B reads them as bf16 (half the bytes of an
// fp32 record matrix, none written by phase A) and a bf16 value is its own TF32 big part: those two
// products take two MMAs a k-step instead of three, and no split.
// The next chunk's record is copied in (cp.async) while the current chunk computes: W, Q, U, fq, fk
// during step 2, K and M during the next step 1. Measured and dropped (0.78 ms a layer at 4K tokens
// with these copies): an L2 prefetch of each record a chunk before its copies (0.85 ms: the copies do
// not wait on DRAM), and bulk copies on mbarriers, one a contiguous range and a q or k row each (0.80
// ms). No inverse, conv or norm is left in the serial chain, and the 4 column blocks of a head no
// longer each redo it. The ring is advanced afterwards by gdn_pf_ring, as the scan does.
//
// Scratch: gdn_pf_chunked_scratch(d, T) bytes = chunks x Hv records (64 x (Dk + 64 + Dv + 2) + 8
// floats, ~82 KB at Dk = Dv = 128) + the conv outputs in bf16 (T x C, 16 KB a token at C = 8192):
// 236 MB at the default prefill chunk of 4096 tokens. gdn_conv_all writes every conv output and
// phase A every float phase B reads (padding included), so the scratch needs no clearing.
//
// Precision. Every product of two fp32 operands runs as 3xTF32 (x = big + small, both TF32, and
// big.big + big.small + small.big accumulated in fp32): about fp32 accuracy (~1e-6 relative per
// product), so the chunked and sequential forms agree to ~1e-6 as in fp32 (spec §4) and the scan's
// test tolerances hold. Where one operand is a bf16 conv output its small part is zero, so two
// terms remain; where both are (phase A's QK^T and KK^T of the raw rows), one MMA is exact: a
// product of two bf16 values is exact in fp32, and the row factors (the L2 norms, beta, the decays)
// are applied to the fp32 sums. Why not bf16 (or 1xTF32) inputs elsewhere: the state is fp32 and
// carried over hundreds of chunks, and the products that read or write it (W S0, Q S0, the state
// update) would put a 2^-9 (2^-11) relative error into every delta written; the triangular inverse
// amplifies errors of A. GC_SPLIT=0 at compile time gives 1xTF32 for measuring what the split costs.
// The forward substitution and the exponentials are fp32 on the CUDA cores.
//
// Shared memory (floats unless bf16). Phase A: A and X with row strides 68 (4 mod 8: conflict-free
// fragment loads); the bf16 rows 136 apart (68 words, 4 mod 32: pair loads and ldmatrix rows
// conflict-free). Phase B: every operand in the order its fragments are loaded (gc_lda_f and the
// like), conflict-free by layout.
//   A: q bf16 64 x 136, then v (its passes of 128 columns) in the same rows; k bf16 64 x 136 (+ 32);
//      A, X 64 x 68; 7 x 64 vectors: 72 KB at any Dk <= 128, three blocks an SM.
//   B: S ncols x 2 (Dk8 + 8) ((big, rest) groups); W 64 x Dk8; Q and K bf16 64 x (Dk8 + 8); M 64 x
//      64; U, Delta 64 x ncols; (fk Delta)^T split ncols x 128; fq, fk: 149 KB at Dk 128 and 32
//      columns (the default for Dv 128: 4 blocks a head, 128 blocks, one wave on 132 SMs), 215 KB at
//      64 columns.
// ncols is rounded up to a multiple of 16 (the state update's row tiles), at most 64; so nsplit is
// a request: blocks per head = Dv / ncols rounded up. Takes Dk <= 128 with Dk and C (the conv
// channels) multiples of 8 (16-byte bf16 rows), and any Dv (columns past Dv in the last block are
// zero padding); other shapes go to gdn_pf_scan.
// ptxas (CUDA 13.0, sm_90a, 3xTF32, k-loops unrolled by 4): gdn_chunk_prep 80 registers (capped for
// three blocks an SM; 12 bytes of spill), gdn_chunk_scan 150 registers, no spills, no stack; dynamic
// shared memory 71,488 B (A, any Dk <= 128) and 118,272 / 152,064 / 219,648 B (B at Dk 128 and 16 /
// 32 / 64 columns).
#include "prefill.cuh"
#include "gdn_pf.cuh"
#include "qgemm_wg.cuh" // the cp.async wrappers (wg_cp16, wg_commit, wg_cpwait)
#include "gdn_chunked.cuh"

// The k-loops of the products unrolled by GC_UNROLL: the loads and splits of the next k-steps are
// then issued before the MMAs of this one (one k-step a loop iteration left every fragment load's
// latency and every split's on the chain: "wait" and "short scoreboard" were most of both phases'
// stall samples, with two warps a scheduler to hide them).
#ifndef GC_UNROLL
#define GC_UNROLL 4
#endif
#define GC_PRAGMA(x) _Pragma(#x)
#define GC_KLOOP_(n) GC_PRAGMA(unroll n)
#define GC_KLOOP GC_KLOOP_(GC_UNROLL)
// GC_TRACE=1 (dev builds only): phase B's warps time the sections of each chunk with clock64 and
// gdn_pf_chunked prints their means for the 4096-token, 4-block-a-head calls (the prefill tests'
// timing table). Off, the stamps compile to nothing (the same SASS). What it showed (2026-12-01,
// cycles a warp a chunk, ~12K in all with the stamps): waits for the copies ~1,000, step 1 ~4,700,
// load1 + M Delta ~3,200, the state update ~2,500, barriers ~2,300. dev/mma/mma_rate: mma.sync
// m16n8k8 TF32 takes 24.5 cycles of latency and at best 12 cycles a warp at 2 warps a scheduler
// (317 TFLOP/s on the GPU; bf16 m16n8k16 633), so phase B's ~254 MMAs a warp a chunk need ~3,000
// cycles of the tensor pipe: 3xTF32 on mma.sync costs a quarter of a chunk at best, and the rest is
// latency with 2 warps a scheduler. Units of two row blocks (0 + 3, 1 + 2) to even out M Delta's
// k-steps measured slower (0.727 -> 0.760 ms a layer): the second row block's W split costs more
// than the barrier it saves.
#ifndef GC_TRACE
#define GC_TRACE 0
#endif
#if GC_TRACE
#define GC_NSEC 8
__device__ unsigned long long gc_trace_cyc[GC_NSEC + 1];
#define GC_STAMP(k)                                                                  \
    do {                                                                             \
        const long long now_ = clock64();                                            \
        if ((threadIdx.x & 31) == 0) atomicAdd(&gc_trace_cyc[k], (unsigned long long)(now_ - t_)); \
        t_ = now_;                                                                   \
    } while (0)
#else
#define GC_STAMP(k) do { } while (0)
#endif

static __device__ __forceinline__ void gc_mma(float *c, const uint32_t *a, const uint32_t *b) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// A (16 x 8 at column k0): A(r, k) = a[r * ars + k * aks] in shared memory (lane's g = lane / 4 and
// t = lane % 4 pick its elements, the mma layout).
static __device__ __forceinline__ void gc_lda(gc_fa &f, const float *a, int ars, int aks, int k0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const float x[4] = {a[g * ars + (k0 + t) * aks], a[(g + 8) * ars + (k0 + t) * aks],
                        a[g * ars + (k0 + t + 4) * aks], a[(g + 8) * ars + (k0 + t + 4) * aks]};
#pragma unroll
    for (int i = 0; i < 4; i++) gc_split(x[i], f.b[i], f.s[i]);
}
// B (8 x 8 at row k0): B(k, n) = b[k * bks + n * bns].
static __device__ __forceinline__ void gc_ldb(gc_fb &f, const float *b, int bks, int bns, int k0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const float x[2] = {b[(k0 + t) * bks + g * bns], b[(k0 + t + 4) * bks + g * bns]};
#pragma unroll
    for (int i = 0; i < 2; i++) gc_split(x[i], f.b[i], f.s[i]);
}
// c += big.big, cs += small.big + big.small (a second accumulator: two independent mma chains, and
// the small terms summed among themselves before they meet the large ones).
static __device__ __forceinline__ void gc_mma3(float *c, float *cs, const gc_fa &a, const gc_fb &b) {
#if GC_SPLIT
    gc_mma(cs, a.s, b.b);
    gc_mma(cs, a.b, b.s);
#else
    (void)cs;
#endif
    gc_mma(c, a.b, b.b);
}

// One warp: c (a 16 x 8 tile in the mma C layout: c[e] is row g + 8 (e >> 1), column 2 t + (e & 1))
// += A (16 x kn) . B (kn x 8), strides as gc_lda / gc_ldb (plain and transposed operands with one
// routine); kn % 8 == 0.
static __device__ __forceinline__ void gc_tile(float *c, const float *a, int ars, int aks, const float *b,
                                               int bks, int bns, int kn) {
    float cs[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    GC_KLOOP
    for (int k0 = 0; k0 < kn; k0 += 8) {
        gc_fa fa;
        gc_fb fb;
        gc_lda(fa, a, ars, aks, k0);
        gc_ldb(fb, b, bks, bns, k0);
        gc_mma3(c, cs, fa, fb);
    }
#pragma unroll
    for (int e = 0; e < 4; e++) c[e] += cs[e];
}
// The products with a bf16 operand (the conv outputs): a bf16 value is exact in TF32 and is its own
// big part, so the terms with its small part are left out.
// c += a.b, cs += a.s.b (B exact in TF32: a bf16 operand).
static __device__ __forceinline__ void gc_mma2b(float *c, float *cs, const gc_fa &a, const gc_fb &b) {
#if GC_SPLIT
    gc_mma(cs, a.s, b.b);
#else
    (void)cs;
#endif
    gc_mma(c, a.b, b.b);
}
// c += a.b, cs += a.b.s (A exact in TF32).
static __device__ __forceinline__ void gc_mma2a(float *c, float *cs, const uint32_t *a, const gc_fb &b) {
#if GC_SPLIT
    gc_mma(cs, a, b.s);
#else
    (void)cs;
#endif
    gc_mma(c, a, b.b);
}

// Phase B's fragments. Within a k-step of 8 the products may take the k indices in any order as
// long as A and B agree: lane (g, t) takes k = 2t for the fragment slots of k = t and 2t + 1 for
// those of k = t + 4 (a0/a1 and b0 at 2t, a2/a3 and b1 at 2t + 1). Then the two k a lane needs are
// adjacent, and a lane's A fragment of a tile is the 4 values it holds of the same tile as an MMA
// result: so every operand is stored where one vector load puts it straight into the MMA's register
// tuple (a 16-byte load of an A fragment, one of a state B fragment, 8 bytes of a Delta B fragment,
// ldmatrix.trans for K's), without bank conflicts and without register moves.
// A fragment stored split in fragment order: 128 big parts, then 128 small ones.
static __device__ __forceinline__ void gc_lda_fs(gc_fa &f, const float *tile) {
    const int lane = threadIdx.x & 31;
    const float4 b = *(const float4 *)(tile + lane * 4), s = *(const float4 *)(tile + 128 + lane * 4);
    f.b[0] = __float_as_uint(b.x), f.b[1] = __float_as_uint(b.y), f.b[2] = __float_as_uint(b.z), f.b[3] = __float_as_uint(b.w);
    f.s[0] = __float_as_uint(s.x), f.s[1] = __float_as_uint(s.y), f.s[2] = __float_as_uint(s.z), f.s[3] = __float_as_uint(s.w);
}
// The state: row j (a value column) of Dk values as groups of 4 floats (big(2p), big(2p + 1),
// rest(2p), rest(2p + 1)) for the pair p = i / 2 (rest = x - big exactly, so big + rest is the fp32
// state); gc_sidx is the float index of (j, i)'s big part, its rest 2 floats on. One group is a B
// fragment's pair of step 1 and a result pair of the state update alike.
static __device__ __forceinline__ int gc_sidx(int ld, int j, int i) { return j * ld + 2 * (i & ~1) + (i & 1); }
// B fragment (k0.., column n0 + g) of the state: small = rest truncated to TF32.
static __device__ __forceinline__ void gc_ldb_s(gc_fb &f, const float *s, int ld, int n0, int k0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const float4 v = *(const float4 *)(s + gc_sidx(ld, n0 + g, k0 + 2 * t));
    f.b[0] = __float_as_uint(v.x), f.b[1] = __float_as_uint(v.y), f.s[0] = gc_hi(v.z), f.s[1] = gc_hi(v.w);
}
// Delta as B fragments: tile (k-tile kt, n-tile nt) of 64 floats at (kt nct + nt) 64, lane (g, t)
// holding (2t, g), (2t + 1, g); gc_didx is the float index of element (k, n).
static __device__ __forceinline__ int gc_didx(int nct, int k, int n) {
    return (((k >> 3) * nct + (n >> 3)) * 32 + (n & 7) * 4 + ((k & 7) >> 1)) * 2 + (k & 1);
}
static __device__ __forceinline__ void gc_ldb_d(gc_fb &f, const float *tile) {
    const float2 v = *(const float2 *)(tile + (threadIdx.x & 31) * 2);
    const float x[2] = {v.x, v.y};
#pragma unroll
    for (int i = 0; i < 2; i++) gc_split(x[i], f.b[i], f.s[i]);
}
// Four B tiles (k0..k0+7 x n0..n0+31) of bf16 rows b[k ld + n] by one ldmatrix.trans: lane (g, t)
// gets the pair (2t, 2t + 1) of column n0 + 8j + g in r[j].
static __device__ __forceinline__ void gc_ldb_h4(gc_fb *f, const uint16_t *b, int ld, int k0) {
    const int lane = threadIdx.x & 31;
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(b + (k0 + (lane & 7)) * ld + 8 * (lane >> 3));
    uint32_t r[4];
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
#pragma unroll
    for (int j = 0; j < 4; j++) f[j].b[0] = r[j] << 16, f[j].b[1] = r[j] & 0xffff0000u;
}
// Phase A's fragments, in the same k order as phase B's (lane (g, t) takes k = 2t and 2t + 1).
// B (k0.., column n0 + g) with B(k, n) = b[n ld + k], bf16 rows (exact in TF32): one 32-bit load.
static __device__ __forceinline__ void gc_ldb_hp(gc_fb &f, const uint16_t *b, int ld, int n0, int k0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const uint32_t p = *(const uint32_t *)(b + (n0 + g) * ld + k0 + 2 * t);
    f.b[0] = p << 16, f.b[1] = p & 0xffff0000u, f.s[0] = f.s[1] = 0u;
}
// A (16 x 8 at column k0) of fp32 rows a[r ld + k], column k scaled by fv[k], split.
static __device__ __forceinline__ void gc_lda_ps(gc_fa &f, const float *a, int ld, int k0, const float *fv) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const float2 x0 = *(const float2 *)(a + g * ld + k0 + 2 * t), x1 = *(const float2 *)(a + (g + 8) * ld + k0 + 2 * t);
    const float2 c = *(const float2 *)(fv + k0 + 2 * t);
    const float x[4] = {x0.x * c.x, x1.x * c.x, x0.y * c.y, x1.y * c.y};
#pragma unroll
    for (int i = 0; i < 4; i++) gc_split(x[i], f.b[i], f.s[i]);
}
// A (big, rest) pair of one state value.
static __device__ __forceinline__ float2 gc_pair(float x) {
    const float b = __uint_as_float(gc_hi(x));
    return make_float2(b, x - b);
}

// The shapes the chunked form takes (gdn_chunked.cu's header); others go to the scan.
static bool gc_takes(gdn_dims d) {
    const int C = 2 * d.hk * d.dk + d.hv * d.dv;
    return d.dk <= 128 && d.dk % 8 == 0 && C % 8 == 0;
}

// Scratch: the records, then the conv outputs (T x C bf16).
static size_t gc_rec_floats(gdn_dims d, int T) { return (size_t)((T + GC_C - 1) / GC_C) * d.hv * gc_lay(d).rec; }

size_t gdn_pf_chunked_scratch(gdn_dims d, int T) {
    if (T <= 0 || !gc_takes(d)) return 0;
    return gc_rec_floats(d, T) * sizeof(float) + (size_t)T * (2 * d.hk * d.dk + d.hv * d.dv) * sizeof(uint16_t);
}

// Conv + SiLU of every channel of the call, once (phase A read it per element through gdn_pf_conv,
// 4 dependent global loads each, and every k head's q and k once per v head sharing it: half of
// phase A's stall samples). A thread owns one channel over GCV_ROWS tokens and slides the window
// of the K - 1 previous raw inputs in registers; same products in the same order as gdn_pf_conv,
// so the same floats. Conv widths above GCV_KMAX take gdn_pf_conv itself. cv: the outputs' bf16
// bits (rb() rounded them already; the prefill runs in bf16 mode only, see qgemm_sep.cu).
#define GCV_ROWS 32
#define GCV_KMAX 8
static __device__ __forceinline__ uint16_t gc_bits(float bf) { return (uint16_t)(__float_as_uint(bf) >> 16); }
__global__ void __launch_bounds__(256)
    gdn_conv_all(int C, int ldq, int K, int T, int pos, const uint16_t *qkv, const float *ring, const float *conv_w,
                 uint16_t *cv) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x, t0 = blockIdx.y * GCV_ROWS, t1 = min(T, t0 + GCV_ROWS);
    if (c >= C) return;
    if (K > GCV_KMAX) {
        for (int t = t0; t < t1; t++) cv[(long)t * C + c] = gc_bits(gdn_pf_conv(qkv, ldq, ring, conv_w, C, K, pos, t, c));
        return;
    }
    float w[GCV_KMAX], win[GCV_KMAX]; // win[dd]: the raw input dd tokens back
#pragma unroll
    for (int dd = 1; dd < GCV_KMAX; dd++) {
        const int tp = t0 - dd;
        win[dd] = dd >= K ? 0.0f
                  : tp >= 0 ? __uint_as_float((uint32_t)qkv[(long)tp * ldq + c] << 16)
                            : ring[(long)(((pos + tp) % K + K) % K) * C + c];
        w[dd] = dd < K ? conv_w[(long)c * K + K - 1 - dd] : 0.0f;
    }
    w[0] = conv_w[(long)c * K + K - 1];
    // All of the thread's inputs first: one load in flight a thread made this pass latency-bound
    // (~100 us a layer at 4K tokens for ~200 MB).
    float xin[GCV_ROWS];
#pragma unroll
    for (int j = 0; j < GCV_ROWS; j++)
        xin[j] = t0 + j < t1 ? __uint_as_float((uint32_t)qkv[(long)(t0 + j) * ldq + c] << 16) : 0.0f;
#pragma unroll
    for (int j = 0; j < GCV_ROWS; j++) {
        const int t = t0 + j;
        if (t >= t1) break;
        const float x = xin[j];
        float y = __fmul_rn(w[0], x); // gdn_pf_conv's order and roundings
#pragma unroll
        for (int dd = 1; dd < GCV_KMAX; dd++)
            if (dd < K) y = __fmaf_rn(w[dd], win[dd], y);
        cv[(long)t * C + c] = gc_bits(rb(silu_f(rb(y))));
#pragma unroll
        for (int dd = GCV_KMAX - 1; dd > 1; dd--) win[dd] = win[dd - 1];
        win[1] = x;
    }
}

// The same pass, 8 channels a thread (16-byte loads and stores of bf16 rows; the scalar form moved
// 2 bytes a load, ~1.7 TB/s at 4K tokens) for K taps known at compile time: each output is the same
// products added in the same order as above, so the same bits. The thread's loads of 8 rows go out
// together. Measured 2.40 -> 2.24 ms over a 4K prefill (docs/PERF.md): still ~1.8 TB/s.
template <int K>
__global__ void __launch_bounds__(256)
    gdn_conv_all8(int C, int ldq, int T, int pos, const uint16_t *qkv, const float *ring, const float *conv_w, uint16_t *cv) {
    const int c8 = (blockIdx.x * blockDim.x + threadIdx.x) * 8, t0 = blockIdx.y * GCV_ROWS, t1 = min(T, t0 + GCV_ROWS);
    if (c8 >= C) return;
    float w[8][K], win[8][K]; // win[ch][dd]: the raw input dd tokens back (dd >= 1)
#pragma unroll
    for (int ch = 0; ch < 8; ch++)
#pragma unroll
        for (int dd = 0; dd < K; dd++) w[ch][dd] = conv_w[(long)(c8 + ch) * K + K - 1 - dd];
#pragma unroll
    for (int dd = 1; dd < K; dd++) {
        const int tp = t0 - dd;
        if (tp >= 0) {
            const uint4 v = *(const uint4 *)(qkv + (long)tp * ldq + c8);
            const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int p = 0; p < 4; p++) win[2 * p][dd] = bf16_elem(u[p], 0), win[2 * p + 1][dd] = bf16_elem(u[p], 1);
        } else {
            const float *r = ring + (long)(((pos + tp) % K + K) % K) * C + c8;
#pragma unroll
            for (int ch = 0; ch < 8; ch++) win[ch][dd] = r[ch];
        }
    }
    for (int j0 = 0; j0 < GCV_ROWS; j0 += 8) {
        uint4 xin[8];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int t = t0 + j0 + j;
            xin[j] = t < t1 ? *(const uint4 *)(qkv + (long)t * ldq + c8) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int t = t0 + j0 + j;
            if (t >= t1) break;
            const uint32_t u[4] = {xin[j].x, xin[j].y, xin[j].z, xin[j].w};
            uint32_t o[4];
#pragma unroll
            for (int p = 0; p < 4; p++) {
                uint32_t h[2];
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int ch = 2 * p + e;
                    const float x = bf16_elem(u[p], e);
                    float y = __fmul_rn(w[ch][0], x);
#pragma unroll
                    for (int dd = 1; dd < K; dd++) y = __fmaf_rn(w[ch][dd], win[ch][dd], y);
                    h[e] = gc_bits(rb(silu_f(rb(y))));
#pragma unroll
                    for (int dd = K - 1; dd > 1; dd--) win[ch][dd] = win[ch][dd - 1];
                    if (K > 1) win[ch][1] = x;
                }
                o[p] = h[0] | (h[1] << 16);
            }
            *(uint4 *)(cv + (long)t * C + c8) = make_uint4(o[0], o[1], o[2], o[3]);
        }
    }
}

// Shared memory of phase A in floats: q then v (bf16, 64 x ldh), k (bf16, 64 x ldh + 32 elements: the
// W product's ldmatrix of a last partial group of 4 column tiles reads past the row end), A and X
// (64 x 68 fp32), 7 vectors of 64. ldh = max(Dk8, GC_VT) + 8 bf16: 68 words = 4 mod 32 a row
// (conflict-free pair loads and ldmatrix rows).
static __host__ __device__ __forceinline__ int gc_prep_ldh(int dk) { return (((dk + 7) & ~7) > GC_VT ? ((dk + 7) & ~7) : GC_VT) + 8; }
static size_t gc_prep_smem_floats(int dk) {
    const size_t ldh = gc_prep_ldh(dk);
    return (2 * GC_C * ldh + 32) / 2 + 2 * GC_C * GC_LD64 + 7 * GC_C;
}
// Shared memory of phase B in floats: the state as (big, rest) groups (ncols x 2 ld8, gc_sidx), W
// (64 x Dk8, fragment order), Q and K in bf16 (64 x ld8 each), M (64 x 64, fragment order), U and
// Delta (64 x ncols each, fragment orders), (fk Delta)^T split (ncols x 128), fq and fk (64 each).
// ld8 = Dk8 + 8: 2 ld8 = 16 mod 32 floats and ld8 / 2 = 4 mod 32 words (conflict-free state groups,
// bf16 pairs and ldmatrix rows at Dk 128).
static size_t gc_scan_smem_floats(int dk, int ncols) {
    const size_t dkp = (dk + 7) & ~7, ld8 = dkp + 8;
    return 2 * ncols * ld8 + GC_C * dkp + GC_C * ld8 + GC_C * GC_C + 2 * GC_C * ncols + 128 * ncols + 2 * GC_C;
}

// The record's W and M in the order phase B loads them as A fragments (gc_lda_f): the 16 x 8 tile
// (rb, kt) of a matrix with nkt k-tiles a row block is 128 floats at ((rb nkt + kt) 32 + lane) 4,
// lane (g, t) holding (g, 2t), (g + 8, 2t), (g, 2t + 1), (g + 8, 2t + 1). Those are the elements
// this lane holds of the same tile as an MMA result (c[0], c[2], c[1], c[3]): one 16-byte store,
// the warp's 512 bytes contiguous. U is stored the same way in the result's own order (c[0..3]),
// which is how phase B's step 1 meets it.
static __device__ __forceinline__ void gc_st_afrag(float *m, int nkt, int rb, int kt, const float *c) {
    const int lane = threadIdx.x & 31;
    *(float4 *)(m + ((rb * nkt + kt) * 32 + lane) * 4) = make_float4(c[0], c[2], c[1], c[3]);
}

// Phase A: one block per (chunk, v head), independent of the state; writes the chunk's record.
// Every product takes the raw conv outputs (bf16, exact in TF32) and puts the row factors outside
// it, as phase B does: k_i.k_j / (|k_i| |k_j|) for the normed keys, (X diag(f)) K for X (f K), so
// QK^T and KK^T take one MMA a k-step (both operands exact; products exact in fp32) instead of 3xTF32's
// three, and W and U two (X diag(f) split, K and V exact) instead of three.
#ifndef GC_PREP_BLOCKS
#define GC_PREP_BLOCKS 3 // phase A blocks an SM the registers are capped for (2: 112 registers, no spill)
#endif
__global__ void __launch_bounds__(GC_THREADS, GC_PREP_BLOCKS)
    gdn_chunk_prep(gdn_dims d, int T, const uint16_t *cv, const uint16_t *bb, const uint16_t *aa, int ldg,
                   const float *dt_bias, const float *A, float *scr) {
    extern __shared__ __align__(16) float sm[];
    const int ch = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;
    const int Dk = d.dk, Dv = d.dv, C = 2 * d.hk * Dk + d.hv * Dv, kh = h / (d.hv / d.hk);
    const int c0 = ch * GC_C, nc = min(GC_C, T - c0);
    const gc_layout L = gc_lay(d);
    const int dkp = L.dkp, dvp = L.dvp, ldh = gc_prep_ldh(Dk);
    uint16_t *Qh = (uint16_t *)sm, *Vh = Qh, *Kh = Qh + GC_C * ldh; // v takes q's rows once M is made
    float *Am = sm + (2 * GC_C * ldh + 32) / 2, *Xm = Am + GC_C * GC_LD64;
    float *bet = Xm + GC_C * GC_LD64, *gam = bet + GC_C, *eG = gam + GC_C, *eC = eG + GC_C;
    float *iq = eC + GC_C, *ik = iq + GC_C; // 1 / |q| Dk^-1/2 and 1 / |k| per token
    float *fw = ik + GC_C;                  // W's column factors beta e^Gamma / |k|
    float *rec = scr + ((long)ch * d.hv + h) * L.rec;
    float *gW = rec, *gM = rec + L.m, *gU = rec + L.u;

    // q and k after conv + SiLU (gdn_conv_all, bf16; the k head of this v head) as they are, zeros
    // past the live rows and in the padding columns up to Dk8 (Dk is a multiple of 8, gc_takes).
    {
        const int q8 = dkp / 8;
        for (int w = tid; w < GC_C * 2 * q8; w += GC_THREADS) {
            const int tt = w / (2 * q8), ci = w % (2 * q8), sec = ci >= q8, cc = (ci % q8) * 8;
            const bool live = tt < nc && cc < Dk;
            wg_cp16((sec ? Kh : Qh) + tt * ldh + cc, live ? (const void *)(cv + (long)(c0 + tt) * C + (sec ? d.hk * Dk : 0) + kh * Dk + cc) : cv, live);
        }
        wg_commit();
    }
    if (tid < GC_C) {
        const bool live = tid < nc;
        bet[tid] = live ? gdn_pf_beta(bb[(long)(c0 + tid) * ldg + h]) : 0.0f;
        gam[tid] = live ? gdn_pf_logdecay(aa[(long)(c0 + tid) * ldg + h], dt_bias[h], A[h]) : 0.0f;
    }
    wg_cpwait<0>();
    __syncthreads();
    // Gamma (warp 0, two tokens a lane), then the L2 norms (4 lanes a token, 8 tokens a warp).
    if (warp == 0) {
        float g0 = gam[2 * lane], g1 = gam[2 * lane + 1], s = g0 + g1;
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            float u = __shfl_up_sync(0xffffffffu, s, off);
            if (lane >= off) s += u;
        }
        const float G1 = s, G0 = s - g1, GC = __shfl_sync(0xffffffffu, s, 31);
        gam[2 * lane] = G0, gam[2 * lane + 1] = G1;
        eG[2 * lane] = expf(G0), eG[2 * lane + 1] = expf(G1);
        eC[2 * lane] = expf(fminf(GC - G0, 0.0f)), eC[2 * lane + 1] = expf(fminf(GC - G1, 0.0f));
        if (lane < 8) rec[L.e + lane] = lane ? 0.0f : expf(GC);
    }
    {
        const int tt = warp * 8 + (lane >> 2), p = lane & 3; // 8 warps x 8 tokens = GC_C
        const uint16_t *q = Qh + tt * ldh, *k = Kh + tt * ldh;
        float sq = 0.0f, sk = 0.0f;
        for (int i = p; i < Dk; i += 4) {
            const float qv = __uint_as_float((uint32_t)q[i] << 16), kv = __uint_as_float((uint32_t)k[i] << 16);
            sq += qv * qv, sk += kv * kv;
        }
        sq += __shfl_xor_sync(0xffffffffu, sq, 1), sk += __shfl_xor_sync(0xffffffffu, sk, 1);
        sq += __shfl_xor_sync(0xffffffffu, sq, 2), sk += __shfl_xor_sync(0xffffffffu, sk, 2);
        const float rq = 1.0f / sqrtf(sq + 1e-6f) * rsqrtf((float)Dk), rk = 1.0f / sqrtf(sk + 1e-6f);
        if (p == 0) iq[tt] = tt < nc ? rq : 0.0f, ik[tt] = tt < nc ? rk : 0.0f;
    }
    __syncthreads();
    if (tid < 2 * GC_C) // the row factors of phase B's products with the raw q and k
        rec[tid < GC_C ? L.fq + tid : L.fk + tid - GC_C] = tid < GC_C ? eG[tid] * iq[tid] : eC[tid - GC_C] * ik[tid - GC_C];
    if (tid < GC_C) fw[tid] = bet[tid] * eG[tid] * ik[tid];
    // A (into shared) and M (straight to the record), 64 x 64 in 16 x 8 tiles, one warp computing a
    // tile of both (they share the K fragments): the raw products k_i.k_j and q_i.k_j, one MMA a
    // k-step each, then the factors. Tiles t < 20 are the ones that reach the diagonal (row block
    // rb starts at rb (rb + 1)), the 12 after them lie wholly above it and are zero.
    for (int t = warp; t < 32; t += GC_WARPS) {
        int rb, cb;
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, accm[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (t < 20) {
            rb = t < 2 ? 0 : t < 6 ? 1 : t < 12 ? 2 : 3, cb = t - rb * (rb + 1);
            GC_KLOOP
            for (int k0 = 0; k0 < dkp; k0 += 8) {
                uint32_t fk[4], fq[4];
                gc_fb fb;
                gc_lda_hp(fk, Kh + rb * 16 * ldh, ldh, k0);
                gc_lda_hp(fq, Qh + rb * 16 * ldh, ldh, k0);
                gc_ldb_hp(fb, Kh, ldh, cb * 8, k0);
                gc_mma(acc, fk, fb.b);
                gc_mma(accm, fq, fb.b);
            }
        } else {
            const int u = t - 20;
            rb = u < 6 ? 0 : u < 10 ? 1 : 2, cb = 2 * rb + 2 + u - (rb == 0 ? 0 : rb == 1 ? 6 : 10);
        }
        float mv[4];
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int i = rb * 16 + g + (e >> 1) * 8, j = cb * 8 + 2 * t4 + (e & 1);
            // Masked before the exp: exponents are <= 0 (spec §4 item 2).
            Am[i * GC_LD64 + j] = j < i ? bet[i] * (acc[e] * (ik[i] * ik[j])) * expf(gam[i] - gam[j]) : 0.0f;
            mv[e] = j <= i ? (accm[e] * (iq[i] * ik[j])) * expf(gam[i] - gam[j]) : 0.0f;
        }
        gc_st_afrag(gM, 8, rb, cb, mv);
    }
    __syncthreads();
    // v (first pass of GC_VT columns) into q's rows (q is spent) while the inverse runs.
    auto load_v = [&](int v0, int nv) {
        if (!(Dv & 7)) { // 16-byte pieces (the row starts are 16-byte aligned: C % 8 == 0)
            for (int w = tid; w < GC_C * (nv / 8); w += GC_THREADS) {
                const int tt = w / (nv / 8), jj = (w % (nv / 8)) * 8;
                const bool live = tt < nc && v0 + jj < Dv;
                wg_cp16(Vh + tt * ldh + jj, live ? (const void *)(cv + (long)(c0 + tt) * C + 2 * d.hk * Dk + h * Dv + v0 + jj) : cv, live);
            }
            wg_commit();
        } else {
            for (int w = tid; w < GC_C * nv; w += GC_THREADS) {
                const int tt = w / nv, jj = w % nv;
                Vh[tt * ldh + jj] = tt < nc && v0 + jj < Dv ? cv[(long)(c0 + tt) * C + 2 * d.hk * Dk + h * Dv + v0 + jj] : (uint16_t)0;
            }
        }
    };
    load_v(0, min(GC_VT, dvp));
    // X = (I + A)^-1, lower unitriangular, by blocks of 16 (a forward substitution over all 64 rows
    // kept the block waiting on warp 0's columns for a quarter of phase A):
    //   the four diagonal blocks: X_ij = -sum_{m=j}^{i-1} A_im X_mj within the block, 4 lanes of one
    //   warp per column (m split mod 4), 16 rows in order, __syncwarp only;
    //   then the blocks below, one block diagonal at a time: X_IJ = -X_II T_IJ with T_IJ = sum over
    //   K = J..I-1 of A_IK X_KJ (T parked in A's unused upper block (J, I)), both as MMAs, a warp per
    //   16 x 8 tile (the CUDA-core loops were a fifth of phase A's stall samples).
    // Only X's lower blocks are written: the products below read row block rb up to column 16 rb + 15.
    {
        const int j = warp * 8 + (lane >> 2), p = lane & 3, i0 = j & ~15;
        for (int i = i0; i < i0 + 16; i++) {
            float s = 0.0f;
            if (i > j)
                for (int m = j + p; m < i; m += 4) s += Am[i * GC_LD64 + m] * Xm[m * GC_LD64 + j];
            s += __shfl_xor_sync(0xffffffffu, s, 1);
            s += __shfl_xor_sync(0xffffffffu, s, 2);
            if (p == 0) Xm[i * GC_LD64 + j] = i == j ? 1.0f : (i < j ? 0.0f : -s);
            __syncwarp();
        }
    }
    __syncthreads();
    for (int dd = 1; dd < 4; dd++) { // blocks (J + dd, J), J < 4 - dd: warp w takes J = w / 2, columns 8 (w % 2)
        const int J = warp >> 1, I = J + dd, c8 = 8 * (warp & 1);
        const bool mine = warp < 2 * (4 - dd);
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (mine) { // T_IJ = A[I rows, 16 J .. 16 I) X[16 J .. 16 I, J cols], into A's block (J, I)
            gc_tile(acc, Am + 16 * I * GC_LD64 + 16 * J, GC_LD64, 1, Xm + 16 * J * GC_LD64 + 16 * J + c8, GC_LD64, 1, 16 * dd);
#pragma unroll
            for (int e = 0; e < 4; e++) Am[(16 * J + g + (e >> 1) * 8) * GC_LD64 + 16 * I + c8 + 2 * t4 + (e & 1)] = acc[e];
        }
        __syncthreads();
        if (mine) { // X_IJ = -X_II T_IJ (X_II's upper triangle is zero)
            acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
            gc_tile(acc, Xm + 16 * I * GC_LD64 + 16 * I, GC_LD64, 1, Am + 16 * J * GC_LD64 + 16 * I + c8, GC_LD64, 1, 16);
#pragma unroll
            for (int e = 0; e < 4; e++) Xm[(16 * I + g + (e >> 1) * 8) * GC_LD64 + 16 * J + c8 + 2 * t4 + (e & 1)] = -acc[e];
        }
        __syncthreads();
    }
    // out (64 x 8 ncb tiles, fragment order) = (X diag(fv)) B for bf16 rows B (64 x ldh), X lower
    // (row block rb needs columns < 16 (rb + 1)). A unit is a row block and 4 column tiles (one
    // ldmatrix of B, the X fragment shared); warp w takes column group w % 4 of row blocks 0 and 3
    // (w < 4) or 1 and 2, the same number of k-steps. Tiles at or past ncb are computed from B's
    // padding or the next row and not stored.
    auto xprod = [&](const uint16_t *B, const float *fv, int ncb, auto store) {
        for (int cg = warp & 3; cg * 4 < ncb; cg += 4)
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int rb = warp < 4 ? (half ? 3 : 0) : (half ? 2 : 1);
                float acc[4][4] = {}, cs[4][4] = {};
                GC_KLOOP
                for (int k0 = 0; k0 < 16 * (rb + 1); k0 += 8) {
                    gc_fa fa;
                    gc_fb fb[4];
                    gc_lda_ps(fa, Xm + rb * 16 * GC_LD64, GC_LD64, k0, fv);
                    gc_ldb_h4(fb, B + cg * 32, ldh, k0);
#pragma unroll
                    for (int q = 0; q < 4; q++) gc_mma2b(acc[q], cs[q], fa, fb[q]);
                }
#pragma unroll
                for (int q = 0; q < 4; q++)
                    if (cg * 4 + q < ncb) {
#pragma unroll
                        for (int e = 0; e < 4; e++) acc[q][e] += cs[q][e];
                        store(rb, cg * 4 + q, acc[q]);
                    }
            }
    };
    // W = X (beta e^Gamma K/|k|) = (X diag(fw)) K.
    xprod(Kh, fw, dkp / 8, [&](int rb, int cb, const float *c) { gc_st_afrag(gW, dkp / 8, rb, cb, c); });
    // U = X (beta V) = (X diag(beta)) V, GC_VT columns a pass.
    for (int v0 = 0; v0 < dvp; v0 += GC_VT) {
        const int nv = min(GC_VT, dvp - v0);
        if (v0) {
            __syncthreads(); // the last pass's reads of v are done
            load_v(v0, nv);
        }
        wg_cpwait<0>();
        __syncthreads();
        xprod(Vh, bet, nv / 8, [&](int rb, int cb, const float *c) {
            *(float4 *)(gU + ((rb * (dvp / 8) + v0 / 8 + cb) * 32 + lane) * 4) = make_float4(c[0], c[1], c[2], c[3]);
        });
    }
}

// Phase B: grid (Hv, nsplit), a block owns `ncols` (a multiple of 16) value columns of one v head
// and walks the chunks in order with its state slice in shared memory. Copies of the next chunk's
// record overlap the current chunk's products: group 1 (W, Q, U, fq, fk) is read only by step 1,
// group 2 (K, M) only by step 2, so each group is refilled while the other step runs. Every operand
// is stored in the order its fragments are loaded (see gc_lda_f): the state as (big, rest) groups,
// split once by the state update instead of by each of step 1's four row-block warps, with big +
// rest the fp32 state exactly; (fk Delta)^T split once where step 1 makes it.
__global__ void __launch_bounds__(GC_THREADS, 1)
    gdn_chunk_scan(gdn_dims d, int T, const float *scr, const uint16_t *cv, float *state, uint16_t *o, int ncols) {
    extern __shared__ __align__(16) float sm[];
    const int h = blockIdx.x, j0 = blockIdx.y * ncols, tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;
    const gc_layout L = gc_lay(d);
    const int Dk = d.dk, dkp = L.dkp, dvp = L.dvp, ld8 = dkp + 8, lds = 2 * ld8;
    const int C = 2 * d.hk * Dk + d.hv * d.dv, kh = h / (d.hv / d.hk);
    const int nct = ncols / 8, nkt = dkp / 8, nch = (T + GC_C - 1) / GC_C;
    const int nlive = min(ncols, d.dv - j0); // live columns (the last block may have fewer)
    float *S2 = sm, *Wf = S2 + ncols * lds;
    uint16_t *Qh = (uint16_t *)(Wf + GC_C * dkp), *Kh = Qh + GC_C * ld8;
    float *Mf = (float *)(Kh + GC_C * ld8), *Uf = Mf + GC_C * GC_C, *Dn = Uf + GC_C * ncols, *F2 = Dn + GC_C * ncols;
    float *fqv = F2 + 128 * ncols, *fkv = fqv + GC_C;
    float *Sg = state + ((long)h * d.dv + j0) * Dk;

    // Copies: W and M are whole contiguous matrices; U is 4 contiguous runs of nct tiles (one a row
    // block; tiles past Dv8 zero-filled); q and k rows of 16-byte pieces: column piece tid % q8, rows
    // tid / q8 + k (256 / q8), fixed for the whole scan; threads past the last whole row group idle.
    const int q8 = dkp / 8, hr0 = tid < (GC_THREADS / q8) * q8 ? tid / q8 : GC_C, hrs = GC_THREADS / q8, hc = (tid % q8) * 8;
    // q (k) row r of chunk ch: the conv output of token c0 + r, k head kh; rows past T zero-filled.
    auto raw = [&](int ch, int r, int sec) { return cv + (long)(ch * GC_C + r) * C + sec * d.hk * Dk + kh * Dk + hc; };
    auto load1 = [&](int ch) {
        const float *rec = scr + ((long)ch * d.hv + h) * L.rec;
        for (int w = tid; w < GC_C * dkp / 4; w += GC_THREADS) wg_cp16(Wf + 4 * w, rec + 4 * w, true);
        for (int r = hr0; r < GC_C; r += hrs) {
            const bool live = ch * GC_C + r < T;
            wg_cp16(Qh + r * ld8 + hc, live ? (const void *)raw(ch, r, 0) : scr, live);
        }
        for (int w = tid; w < 4 * nct * 32; w += GC_THREADS) { // (row block, tile, lane's 4 floats)
            const int rb = w / (nct * 32), tl = (w / 32) % nct, ut = j0 / 8 + tl;
            const bool ok = ut < dvp / 8;
            wg_cp16(Uf + 4 * w, rec + L.u + ((long)(rb * (dvp / 8) + (ok ? ut : 0)) * 32 + (w & 31)) * 4, ok);
        }
        if (tid < 32) wg_cp16((tid < 16 ? fqv : fkv - 16 * 4) + 4 * tid, rec + (tid < 16 ? L.fq : L.fk - 16 * 4) + 4 * tid, true);
        wg_commit();
    };
    auto load2 = [&](int ch) {
        const float *rec = scr + ((long)ch * d.hv + h) * L.rec;
        for (int r = hr0; r < GC_C; r += hrs) {
            const bool live = ch * GC_C + r < T;
            wg_cp16(Kh + r * ld8 + hc, live ? (const void *)raw(ch, r, 1) : scr, live);
        }
        for (int w = tid; w < GC_C * GC_C / 4; w += GC_THREADS) wg_cp16(Mf + 4 * w, rec + L.m + 4 * w, true);
        wg_commit();
    };

    for (int w = tid; w < ncols * dkp; w += GC_THREADS) {
        const int j = w / dkp, i = w % dkp;
        const float2 p = gc_pair((j < nlive && i < Dk) ? Sg[(long)j * Dk + i] : 0.0f);
        S2[gc_sidx(lds, j, i)] = p.x, S2[gc_sidx(lds, j, i) + 2] = p.y;
    }
    load1(0);
    load2(0);
    // Steps 1 and 2 go by units of 16 rows x 16 columns (a row block, two column tiles): unit u =
    // warp + 8 r, 4 x nct / 2 <= 16 of them. This warp's output tiles stay in registers between them.
    const int npair = nct / 2, nunit = 4 * npair;
    float oacc[GC_MAXCOLS / 32][2][4];
#if GC_TRACE
    long long t_ = clock64();
#endif
    for (int ch = 0; ch < nch; ch++) {
        const int c0 = ch * GC_C, nc = min(GC_C, T - c0);
        const float ecc = scr[((long)ch * d.hv + h) * L.rec + L.e]; // e^Gamma_C, needed in step 2
        wg_cpwait<1>(); // group 1 of this chunk landed (group 2 may still be in flight)
        GC_STAMP(0);
        __syncthreads();
        GC_STAMP(1);
        // Step 1: Oacc = fq (Q S0) (kept in registers) and Delta = U - W S0 (64 x ncols each); a unit
        // does both products for its two column tiles, sharing the S0 fragments.
#pragma unroll
        for (int r = 0; r < GC_MAXCOLS / 32; r++) {
            const int u = warp + GC_WARPS * r;
            if (u < nunit) {
                const int rb = u / npair, cb = 2 * (u % npair);
                float cq[2][4] = {}, cqs[2][4] = {}, cw[2][4] = {}, cws[2][4] = {};
                GC_KLOOP
                for (int k0 = 0; k0 < dkp; k0 += 8) {
                    gc_fb fb[2];
                    gc_fa fw;
                    uint32_t fq[4];
#pragma unroll
                    for (int q = 0; q < 2; q++) gc_ldb_s(fb[q], S2, lds, (cb + q) * 8, k0);
                    gc_lda_f(fw, Wf + (rb * nkt + k0 / 8) * 128);
                    gc_lda_hp(fq, Qh + rb * 16 * ld8, ld8, k0);
#pragma unroll
                    for (int q = 0; q < 2; q++) {
                        gc_mma2a(cq[q], cqs[q], fq, fb[q]);
                        gc_mma3(cw[q], cws[q], fw, fb[q]);
                    }
                }
#pragma unroll
                for (int q = 0; q < 2; q++) {
                    const float4 uv = *(const float4 *)(Uf + ((rb * nct + cb + q) * 32 + lane) * 4);
                    const float u4[4] = {uv.x, uv.y, uv.z, uv.w};
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int i = rb * 16 + g + (e >> 1) * 8, j = (cb + q) * 8 + 2 * t4 + (e & 1);
                        const float dl = u4[e] - (cw[q][e] + cws[q][e]), fd = fkv[i] * dl;
                        const float fdb = __uint_as_float(gc_hi(fd));
                        oacc[r][q][e] = fqv[i] * (cq[q][e] + cqs[q][e]);
                        Dn[gc_didx(nct, i, j)] = dl;
                        // (fk Delta)^T as the state update's A fragments: tile (j / 16, i / 8), lane
                        // ((j % 8), (i % 8) / 2), slot (j % 16) / 8 + 2 (i % 2); big parts, then small.
                        float *f2 = F2 + ((j >> 4) * 8 + (i >> 3)) * 256 + ((j & 7) * 4 + ((i & 7) >> 1)) * 4 + ((j >> 3) & 1) + 2 * (i & 1);
                        f2[0] = fdb, f2[128] = __uint_as_float(gc_hi(fd - fdb));
                    }
                }
            }
        }
        GC_STAMP(2);
        wg_cpwait<0>(); // group 2 (K, M) landed
        GC_STAMP(3);
        __syncthreads();
        GC_STAMP(4);
        if (ch + 1 < nch) load1(ch + 1);
        // Step 2: O = Oacc + M Delta (bf16 out), S = e^Gamma_C S + (fk Delta)^T K.
#pragma unroll
        for (int r = 0; r < GC_MAXCOLS / 32; r++) {
            const int u = warp + GC_WARPS * r;
            if (u < nunit) {
                const int rb = u / npair, cb = 2 * (u % npair);
                float os[2][4] = {};
                GC_KLOOP
                for (int k0 = 0; k0 < 16 * (rb + 1); k0 += 8) {
                    gc_fa fa;
                    gc_fb fb[2];
#pragma unroll
                    for (int q = 0; q < 2; q++) gc_ldb_d(fb[q], Dn + ((k0 / 8) * nct + cb + q) * 64);
                    gc_lda_f(fa, Mf + (rb * 8 + k0 / 8) * 128);
#pragma unroll
                    for (int q = 0; q < 2; q++) gc_mma3(oacc[r][q], os[q], fa, fb[q]);
                }
#pragma unroll
                for (int q = 0; q < 2; q++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int i = rb * 16 + g + (e >> 1) * 8, j = (cb + q) * 8 + 2 * t4 + (e & 1);
                        if (i < nc && j < nlive)
                            o[(long)(c0 + i) * d.hv * d.dv + h * d.dv + j0 + j] = lily_f32_to_bf16(oacc[r][q][e] + os[q][e]);
                    }
            }
        }
        GC_STAMP(5);
        // State tiles four at a time along Dk (one ldmatrix of K and the (fk Delta)^T fragments shared
        // by the four); fewer live in the last group when Dk / 8 is not a multiple of 4 (the
        // ldmatrix then reads past them, inside shared memory, and those values go unused).
        const int nkq = (nkt + 3) / 4;
        for (int u = warp; u < (ncols / 16) * nkq; u += GC_WARPS) {
            const int rb = u / nkq, cb = 4 * (u % nkq), nb = min(4, nkt - cb);
            float acc[4][4], cs[4][4] = {};
#pragma unroll
            for (int q = 0; q < 4; q++)
#pragma unroll
                for (int hh = 0; hh < 2; hh++) {
                    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                    if (q < nb) v = *(const float4 *)(S2 + gc_sidx(lds, rb * 16 + g + 8 * hh, (cb + q) * 8 + 2 * t4));
                    acc[q][2 * hh] = ecc * (v.x + v.z), acc[q][2 * hh + 1] = ecc * (v.y + v.w);
                }
            GC_KLOOP
            for (int k0 = 0; k0 < GC_C; k0 += 8) {
                gc_fa fa;
                gc_fb fb[4];
                gc_lda_fs(fa, F2 + (rb * 8 + k0 / 8) * 256);
                gc_ldb_h4(fb, Kh + cb * 8, ld8, k0);
#pragma unroll
                for (int q = 0; q < 4; q++)
                    if (q < nb) gc_mma2b(acc[q], cs[q], fa, fb[q]);
            }
#pragma unroll
            for (int q = 0; q < 4; q++)
#pragma unroll
                for (int hh = 0; hh < 2; hh++)
                    if (q < nb) {
                        const float2 p0 = gc_pair(acc[q][2 * hh] + cs[q][2 * hh]), p1 = gc_pair(acc[q][2 * hh + 1] + cs[q][2 * hh + 1]);
                        *(float4 *)(S2 + gc_sidx(lds, rb * 16 + g + 8 * hh, (cb + q) * 8 + 2 * t4)) = make_float4(p0.x, p1.x, p0.y, p1.y);
                    }
        }
        GC_STAMP(6);
        __syncthreads();
        if (ch + 1 < nch) load2(ch + 1);
        GC_STAMP(7);
#if GC_TRACE
        if ((threadIdx.x & 31) == 0) atomicAdd(&gc_trace_cyc[GC_NSEC], 1ull);
#endif
    }
    for (int w = tid; w < nlive * Dk; w += GC_THREADS) {
        const int j = w / Dk, i = w % Dk;
        Sg[w] = S2[gc_sidx(lds, j, i)] + S2[gc_sidx(lds, j, i) + 2];
    }
}

// The conv pass alone: cv (T x C bf16 bits) = conv + SiLU of every channel of the call (the ring is
// read, not advanced). gdn_pf_chunked's first step; the tests' GDN references read its outputs.
void gdn_pf_conv_out(gdn_dims d, int T, int pos, gdn_in in, const float *conv_w, const float *conv_ring, uint16_t *cv,
                     cudaStream_t st) {
    const int C = 2 * d.hk * d.dk + d.hv * d.dv;
    if (T <= 0) return;
    if (d.kconv == 4 && !(C & 7) && !(in.ldq & 7) && !((uintptr_t)in.qkv & 15)) // the model's: 8 channels a thread
        gdn_conv_all8<4><<<dim3((C / 8 + 255) / 256, (T + GCV_ROWS - 1) / GCV_ROWS), 256, 0, st>>>(C, in.ldq, T, pos, in.qkv,
                                                                                                conv_ring, conv_w, cv);
    else
        gdn_conv_all<<<dim3((C + 255) / 256, (T + GCV_ROWS - 1) / GCV_ROWS), 256, 0, st>>>(C, in.ldq, d.kconv, T, pos, in.qkv,
                                                                                        conv_ring, conv_w, cv);
}

void gdn_pf_chunked(gdn_dims d, int T, int pos, gdn_in in, const float *conv_w, const float *dt_bias, const float *A,
                    float *conv_ring, float *state, uint16_t *o, float *scratch, int nsplit, cudaStream_t st) {
    if (T <= 0) return;
    if (!gc_takes(d)) {
        gdn_pf_scan(d, T, pos, in, conv_w, dt_bias, A, conv_ring, state, o, 0, st);
        return;
    }
    if (nsplit <= 0) nsplit = (d.dv + 31) / 32;
    int ncols = (d.dv + nsplit - 1) / nsplit;
    ncols = (ncols + 15) & ~15;
    if (ncols > GC_MAXCOLS) ncols = GC_MAXCOLS;
    nsplit = (d.dv + ncols - 1) / ncols;
    const int nch = (T + GC_C - 1) / GC_C;
    uint16_t *cv = (uint16_t *)(scratch + gc_rec_floats(d, T));
    gdn_pf_conv_out(d, T, pos, in, conv_w, conv_ring, cv, st);
    PF_MARK("gdn conv + silu (all channels)");
    const size_t smem_a = gc_prep_smem_floats(d.dk) * sizeof(float);
    const size_t smem_b = gc_scan_smem_floats(d.dk, ncols) * sizeof(float);
    cudaFuncSetAttribute(gdn_chunk_prep, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_a);
    cudaFuncSetAttribute(gdn_chunk_scan, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_b);
    gdn_chunk_prep<<<dim3(nch, d.hv), GC_THREADS, smem_a, st>>>(d, T, cv, in.b, in.a, in.ldg, dt_bias, A, scratch);
    PF_MARK("gdn chunked phase A (norms, WY, inverse)"); // the two phases apart in pfprof
    if (gdn_scan_wg_takes(d, ncols)) // the same products on the warpgroup MMA (gdn_scan_wg.cu)
        gdn_scan_wg_launch(d, T, scratch, cv, state, o, nsplit, st);
    else
        gdn_chunk_scan<<<dim3(d.hv, nsplit), GC_THREADS, smem_b, st>>>(d, T, scratch, cv, state, o, ncols);
    PF_MARK("gdn chunked phase B (chunk-serial scan)");
#if GC_TRACE
    if (T == 4096 && nsplit == 4) {
        unsigned long long c[GC_NSEC + 1];
        cudaMemcpyFromSymbol(c, gc_trace_cyc, sizeof c);
        static const char *nm[GC_NSEC] = {"wait group 1", "barrier", "step 1", "wait group 2", "barrier", "load1 + O",
                                          "state update", "barrier + load2"};
        printf("phase B sections, cycles a warp a chunk (%llu warp-chunks):", c[GC_NSEC]);
        for (int k = 0; k < GC_NSEC; k++) printf(" %s %.0f;", nm[k], (double)c[k] / (double)(c[GC_NSEC] ? c[GC_NSEC] : 1));
        printf("\n");
        void *sym;
        cudaGetSymbolAddress(&sym, gc_trace_cyc);
        cudaMemset(sym, 0, sizeof c);
    }
#endif
    gdn_pf_ring(d, T, pos, in.qkv, in.ldq, conv_ring, st);
}
