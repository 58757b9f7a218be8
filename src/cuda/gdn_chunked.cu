// gdn_chunked.cu: the Gated DeltaNet core for a prefill chunk of T tokens in the CHUNKED form (spec
// §4, chunk 64), the same function as gdn_pf_scan (gdn_prefill.cu): same arguments, outputs, ring
// and state, T decode steps' worth. The scan walks the tokens one by one on the CUDA cores; here the
// work of 64 tokens is a handful of matrix products on the tensor cores, and only the 64-step
// triangular inverse is sequential.
//
// Grid (Hv, nsplit): a block owns `ncols` value columns of one v head (columns of the state are
// independent given q, k, beta, g), 8 warps, and walks the call's chunks of 64 tokens in order with
// its state slice S (ncols x Dk fp32, the (Hv, Dv, Dk) layout) in shared memory throughout. Per chunk
// (nc <= 64 live tokens; rows past nc are zero: q = k = v = 0, beta = 0, g = 0, so they neither
// decay nor write the state, and a partial last chunk needs no other care):
//   P1 causal conv + SiLU of the chunk's q, k (the k head j // (Hv/Hk)) and this block's v columns
//      (gdn_pf.cuh: the scan's and the decode step's arithmetic), beta, log-decay g;
//   P2 Gamma = cumulative g (warp scan), e^Gamma, e^(Gamma_C - Gamma); L2 norms of q and k (eps inside
//      the sqrt, q scaled by Dk^-1/2: the scan's code);
//   P3 MMA: A = beta_i (k_i.k_j) e^(Gamma_i - Gamma_j) (j < i), M = (q_i.k_j) e^(Gamma_i - Gamma_j)
//      (j <= i), R = beta (v - e^Gamma (K S0)), Oq = e^Gamma (Q S0);
//   P4 X = (I + A)^-1 by forward substitution, 4 lanes per column, no block barrier; K rows scaled
//      by e^(Gamma_C - Gamma_i) in place;
//   P5 MMA: Delta = X R (the per-token deltas of the recurrence, exactly);
//   P6 MMA: O = Oq + M Delta (bf16 out), S = e^Gamma_C S + Delta^T (e^(Gamma_C - Gamma) K).
// The ring is advanced afterwards by gdn_pf_ring, as the scan does.
//
// Precision. Every product runs as 3xTF32 (x = big + small, both TF32, and big.big + big.small +
// small.big accumulated in fp32): about fp32 accuracy (~1e-6 relative per product), so the chunked
// and sequential forms agree to ~1e-6 as in fp32 (spec §4) and the scan's test tolerances hold.
// Why not bf16 (or 1xTF32) inputs: the state is fp32 and carried over hundreds of chunks, and the
// products that read or write it (K S0, Q S0, the state update) would put a 2^-9 (2^-11) relative
// error into every delta written; the triangular inverse amplifies errors of A. QK^T and KK^T with
// L2-normed q and k could take bf16, but they feed A and hence the inverse. The tensor cores have
// ample headroom here (the scan is latency-bound, not FLOP-bound), so the first version buys
// accuracy; GC_SPLIT=0 at compile time gives 1xTF32 for measuring what the split costs. The
// forward substitution and the exponentials are fp32 on the CUDA cores.
//
// Shared memory (floats): Q, K 64 x (Dk8 + 4); A, X, M 64 x 68; R, Oq, Delta 64 x (ncols16 + 8);
// S ncols16 x (Dk8 + 4); 4 x 64 vectors. Row strides = 4 mod 8 for matrices read as A operands or as
// transposed B (conflict-free fragment loads), = 8 mod 16 for row-major B. 168 KB at Dk 128 and 32
// columns (the default for Dv 128: 4 blocks a head), 205 KB at 64 columns. Takes Dk <= 128 and any Dv
// (columns past Dv in the last block are zero padding); Dk > 128 goes to gdn_pf_scan.
#include "prefill.cuh"
#include "gdn_pf.cuh"

#define GC_C 64        // tokens per chunk
#define GC_WARPS 8
#define GC_THREADS (32 * GC_WARPS)
#define GC_LD64 68     // row stride of the 64 x 64 matrices
#define GC_MAXCOLS 64  // value columns per block (shared memory)
#ifndef GC_SPLIT
#define GC_SPLIT 1     // 1 = 3xTF32 products (about fp32), 0 = 1xTF32
#endif

static __device__ __forceinline__ uint32_t gc_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}
static __device__ __forceinline__ void gc_mma(float *c, const uint32_t *a, const uint32_t *b) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// One warp: c (a 16 x 8 tile in the mma C layout: c[e] is row g + 8 (e >> 1), column 2 t + (e & 1),
// g = lane / 4, t = lane % 4) += A (16 x kn) . B (kn x 8), with A(r, k) = a[r * ars + k * aks] and
// B(k, n) = b[k * bks + n * bns] in shared memory; kn % 8 == 0. The strides cover plain and
// transposed operands with one routine.
static __device__ __forceinline__ void gc_tile(float *c, const float *a, int ars, int aks, const float *b,
                                               int bks, int bns, int kn) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    for (int k0 = 0; k0 < kn; k0 += 8) {
        const float af[4] = {a[g * ars + (k0 + t) * aks], a[(g + 8) * ars + (k0 + t) * aks],
                             a[g * ars + (k0 + t + 4) * aks], a[(g + 8) * ars + (k0 + t + 4) * aks]};
        const float bf[2] = {b[(k0 + t) * bks + g * bns], b[(k0 + t + 4) * bks + g * bns]};
        uint32_t ab[4], bb[2];
#pragma unroll
        for (int i = 0; i < 4; i++) ab[i] = gc_tf32(af[i]);
#pragma unroll
        for (int i = 0; i < 2; i++) bb[i] = gc_tf32(bf[i]);
#if GC_SPLIT
        uint32_t as[4], bs[2];
#pragma unroll
        for (int i = 0; i < 4; i++) as[i] = gc_tf32(af[i] - __uint_as_float(ab[i]));
#pragma unroll
        for (int i = 0; i < 2; i++) bs[i] = gc_tf32(bf[i] - __uint_as_float(bb[i]));
        gc_mma(c, as, bb); // small terms first
        gc_mma(c, ab, bs);
#endif
        gc_mma(c, ab, bb);
    }
}

// Floats of shared memory for Dk and ncols (the kernel carves the same regions).
static size_t gc_smem_floats(int dk, int ncols) {
    const size_t ldk = ((dk + 7) & ~7) + 4, ncp = (ncols + 15) & ~15, ldn = ncp + 8;
    return 2 * GC_C * ldk + 3 * GC_C * GC_LD64 + 3 * GC_C * ldn + ncp * ldk + 4 * GC_C;
}

__global__ void __launch_bounds__(GC_THREADS, 1)
    gdn_chunked_kernel(gdn_dims d, int T, int pos, const uint16_t *qkv, const uint16_t *bb,
                       const uint16_t *aa, const float *conv_w, const float *dt_bias, const float *A,
                       const float *ring, float *state, uint16_t *o, int ncols) {
    extern __shared__ float sm[];
    __shared__ float s_ecc; // e^Gamma_C of the current chunk
    const int h = blockIdx.x, j0 = blockIdx.y * ncols, tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;
    const int Dk = d.dk, C = 2 * d.hk * Dk + d.hv * d.dv, K = d.kconv, kh = h / (d.hv / d.hk);
    const int nlive = min(ncols, d.dv - j0); // live columns (the last block may have fewer)
    const int dkp = (Dk + 7) & ~7, ldk = dkp + 4, ncp = (ncols + 15) & ~15, ldn = ncp + 8;
    const int nct = ncp / 8; // 8-wide column tiles of the value side
    float *Qs = sm, *Ks = Qs + GC_C * ldk;
    float *Am = Ks + GC_C * ldk, *Xm = Am + GC_C * GC_LD64, *Mm = Xm + GC_C * GC_LD64;
    float *Rv = Mm + GC_C * GC_LD64, *Oq = Rv + GC_C * ldn, *Dl = Oq + GC_C * ldn;
    float *Ss = Dl + GC_C * ldn;
    float *bet = Ss + ncp * ldk, *gam = bet + GC_C, *eG = gam + GC_C, *eC = eG + GC_C;
    const float a_h = A[h], dtb = dt_bias[h];
    float *Sg = state + ((long)h * d.dv + j0) * Dk;

    for (int w = tid; w < ncp * dkp; w += GC_THREADS) {
        int j = w / dkp, i = w % dkp;
        Ss[j * ldk + i] = (j < nlive && i < Dk) ? Sg[(long)j * Dk + i] : 0.0f;
    }
    for (int c0 = 0; c0 < T; c0 += GC_C) {
        const int nc = min(GC_C, T - c0);
        // P1: conv + SiLU into Q, K, V (= R's buffer); zeros past the live rows and columns.
        const int nin = 2 * dkp + ncp;
        for (int w = tid; w < GC_C * nin; w += GC_THREADS) {
            int tt = w / nin, ci = w % nin;
            float y = 0.0f;
            if (ci < 2 * dkp) {
                bool isk = ci >= dkp;
                int i = isk ? ci - dkp : ci;
                if (tt < nc && i < Dk)
                    y = gdn_pf_conv(qkv, ring, conv_w, C, K, pos, c0 + tt, (isk ? d.hk * Dk : 0) + kh * Dk + i);
                (isk ? Ks : Qs)[tt * ldk + i] = y;
            } else {
                int jj = ci - 2 * dkp;
                if (tt < nc && jj < nlive)
                    y = gdn_pf_conv(qkv, ring, conv_w, C, K, pos, c0 + tt, 2 * d.hk * Dk + h * d.dv + j0 + jj);
                Rv[tt * ldn + jj] = y;
            }
        }
        if (tid < GC_C) {
            bool live = tid < nc;
            bet[tid] = live ? gdn_pf_beta(bb[(long)(c0 + tid) * d.hv + h]) : 0.0f;
            gam[tid] = live ? gdn_pf_logdecay(aa[(long)(c0 + tid) * d.hv + h], dtb, a_h) : 0.0f;
        }
        __syncthreads();
        // P2: Gamma (warp 0, two tokens a lane), then the L2 norms (a warp per token).
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
            if (lane == 0) s_ecc = expf(GC);
        }
        for (int tt = warp; tt < nc; tt += GC_WARPS) {
            float *q = Qs + tt * ldk, *k = Ks + tt * ldk;
            float sq = 0.0f, sk = 0.0f;
            for (int i = lane; i < Dk; i += 32) sq += q[i] * q[i], sk += k[i] * k[i];
            sq = warp_sum(sq), sk = warp_sum(sk);
            for (int i = lane; i < Dk; i += 32) {
                q[i] = q[i] / sqrtf(sq + 1e-6f) * rsqrtf((float)Dk);
                k[i] = k[i] / sqrtf(sk + 1e-6f);
            }
        }
        __syncthreads();
        // P3: A and M (64 x 64, lower tiles only; tiles wholly above the diagonal are zeroed), then
        // R and Oq (64 x ncols) from the state at the chunk's start.
        const int nA = 2 * 4 * 8, nR = 2 * 4 * nct;
        for (int tile = warp; tile < nA + nR; tile += GC_WARPS) {
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            if (tile < nA) {
                const int which = tile / 32, rb = (tile % 32) / 8, cb = tile % 8;
                if (cb <= 2 * rb + 1)
                    gc_tile(acc, (which ? Qs : Ks) + rb * 16 * ldk, ldk, 1, Ks + cb * 8 * ldk, 1, ldk, dkp);
                float *dst = which ? Mm : Am;
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int i = rb * 16 + g + (e >> 1) * 8, j = cb * 8 + 2 * t4 + (e & 1);
                    float v = 0.0f;
                    // Masked before the exp: exponents are <= 0 (spec §4 item 2).
                    if (which == 0 && j < i) v = bet[i] * acc[e] * expf(gam[i] - gam[j]);
                    if (which == 1 && j <= i) v = acc[e] * expf(gam[i] - gam[j]);
                    dst[i * GC_LD64 + j] = v;
                }
            } else {
                const int u = tile - nA, which = u / (4 * nct), rb = (u % (4 * nct)) / nct, cb = u % nct;
                gc_tile(acc, (which ? Qs : Ks) + rb * 16 * ldk, ldk, 1, Ss + cb * 8 * ldk, 1, ldk, dkp);
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int i = rb * 16 + g + (e >> 1) * 8, j = cb * 8 + 2 * t4 + (e & 1);
                    if (which == 0) Rv[i * ldn + j] = bet[i] * (Rv[i * ldn + j] - eG[i] * acc[e]);
                    else Oq[i * ldn + j] = eG[i] * acc[e];
                }
            }
        }
        __syncthreads();
        // P4: X = (I + A)^-1, lower unitriangular: X_ij = -sum_{m=j}^{i-1} A_im X_mj. Columns are
        // independent: 4 lanes of one warp per column (m split mod 4), rows in order, __syncwarp only.
        {
            const int j = warp * 8 + (lane >> 2), p = lane & 3;
            for (int i = 0; i < GC_C; i++) {
                float s = 0.0f;
                if (i > j)
                    for (int m = j + p; m < i; m += 4) s += Am[i * GC_LD64 + m] * Xm[m * GC_LD64 + j];
                s += __shfl_xor_sync(0xffffffffu, s, 1);
                s += __shfl_xor_sync(0xffffffffu, s, 2);
                if (p == 0) Xm[i * GC_LD64 + j] = i == j ? 1.0f : (i < j ? 0.0f : -s);
                __syncwarp();
            }
        }
        for (int w = tid; w < GC_C * dkp; w += GC_THREADS) Ks[(w / dkp) * ldk + w % dkp] *= eC[w / dkp];
        __syncthreads();
        // P5: Delta = X R (X lower: row block rb needs columns < 16 (rb + 1)).
        for (int tile = warp; tile < 4 * nct; tile += GC_WARPS) {
            const int rb = tile / nct, cb = tile % nct;
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            gc_tile(acc, Xm + rb * 16 * GC_LD64, GC_LD64, 1, Rv + cb * 8, ldn, 1, 16 * (rb + 1));
#pragma unroll
            for (int e = 0; e < 4; e++)
                Dl[(rb * 16 + g + (e >> 1) * 8) * ldn + cb * 8 + 2 * t4 + (e & 1)] = acc[e];
        }
        __syncthreads();
        // P6: outputs O = Oq + M Delta, and the state S (rows = value columns j, columns = k) =
        // e^Gamma_C S + Delta^T Kd (each tile read and written by one warp).
        const int nO = 4 * nct, nS = (ncp / 16) * (dkp / 8);
        for (int tile = warp; tile < nO + nS; tile += GC_WARPS) {
            float acc[4];
            if (tile < nO) {
                const int rb = tile / nct, cb = tile % nct;
#pragma unroll
                for (int e = 0; e < 4; e++)
                    acc[e] = Oq[(rb * 16 + g + (e >> 1) * 8) * ldn + cb * 8 + 2 * t4 + (e & 1)];
                gc_tile(acc, Mm + rb * 16 * GC_LD64, GC_LD64, 1, Dl + cb * 8, ldn, 1, 16 * (rb + 1));
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int i = rb * 16 + g + (e >> 1) * 8, j = cb * 8 + 2 * t4 + (e & 1);
                    if (i < nc && j < nlive)
                        o[(long)(c0 + i) * d.hv * d.dv + h * d.dv + j0 + j] = lily_f32_to_bf16(acc[e]);
                }
            } else {
                const int u = tile - nO, rb = u / (dkp / 8), cb = u % (dkp / 8);
                const float ecc = s_ecc;
#pragma unroll
                for (int e = 0; e < 4; e++)
                    acc[e] = ecc * Ss[(rb * 16 + g + (e >> 1) * 8) * ldk + cb * 8 + 2 * t4 + (e & 1)];
                gc_tile(acc, Dl + rb * 16, 1, ldn, Ks + cb * 8, ldk, 1, GC_C);
#pragma unroll
                for (int e = 0; e < 4; e++)
                    Ss[(rb * 16 + g + (e >> 1) * 8) * ldk + cb * 8 + 2 * t4 + (e & 1)] = acc[e];
            }
        }
        __syncthreads();
    }
    for (int w = tid; w < nlive * Dk; w += GC_THREADS) Sg[w] = Ss[(w / Dk) * ldk + w % Dk];
}

void gdn_pf_chunked(gdn_dims d, int T, int pos, const uint16_t *qkv, const uint16_t *b,
                    const uint16_t *a, const float *conv_w, const float *dt_bias, const float *A,
                    float *conv_ring, float *state, uint16_t *o, int nsplit, cudaStream_t st) {
    if (T <= 0) return;
    if (d.dk > 128) {
        gdn_pf_scan(d, T, pos, qkv, b, a, conv_w, dt_bias, A, conv_ring, state, o, 0, st);
        return;
    }
    if (nsplit <= 0) nsplit = (d.dv + 31) / 32;
    int ncols = (d.dv + nsplit - 1) / nsplit;
    if (ncols > GC_MAXCOLS) ncols = GC_MAXCOLS;
    nsplit = (d.dv + ncols - 1) / ncols;
    const size_t smem = gc_smem_floats(d.dk, ncols) * sizeof(float);
    cudaFuncSetAttribute(gdn_chunked_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    gdn_chunked_kernel<<<dim3(d.hv, nsplit), GC_THREADS, smem, st>>>(d, T, pos, qkv, b, a, conv_w, dt_bias,
                                                                      A, conv_ring, state, o, ncols);
    gdn_pf_ring(d, T, pos, qkv, conv_ring, st);
}
