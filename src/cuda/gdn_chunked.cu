// gdn_chunked.cu: the Gated DeltaNet core for a prefill chunk of T tokens in the CHUNKED form (spec
// §4, chunks of 64 tokens, the WY form), the same function as gdn_pf_scan (gdn_prefill.cu): same
// arguments, outputs, ring and state, T decode steps' worth. The scan walks the tokens one by one on
// the CUDA cores; here the work of 64 tokens is a handful of matrix products on the tensor cores.
//
// Three kernels: the conv pass (here), phase A (gdn_chunk_prep.cu) and phase B (gdn_chunk_scan.cu; at
// the real model's shape gdn_scan_wg.cu's form); what they share is in gdn_chunked.cuh. Everything that
// does not depend on the state is done for all chunks at once; only three products a chunk remain in
// the serial chain over the chunks.
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
    gc_scan_trace_report(T, nsplit);
#endif
    gdn_pf_ring(d, T, pos, in.qkv, in.ldq, conv_ring, st);
}
