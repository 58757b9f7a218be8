// gdn_chunk_prep.cu: phase A of the chunked GDN (gdn_chunked.cu's header): per chunk and v head, the
// products, norms, decays and the triangular inverse that do not depend on the state, into the chunk's
// scratch record.
#include "prefill.cuh"
#include "gdn_pf.cuh"
#include "qgemm_wg.cuh" // the cp.async wrappers (wg_cp16, wg_commit, wg_cpwait)
#include "gdn_chunked.cuh"

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
