// gdn_scan_wg.cu: the chunked GDN's phase B (gdn_chunked.cu's gdn_chunk_scan: the chunk-serial
// scan over the records phase A wrote) on Hopper's warpgroup MMA, for Dk = 128 and blocks of 32
// value columns (the real model's shape: 4 blocks a head, 128 blocks). Same arguments, records,
// outputs and state; the same products with the same 3xTF32 splits, summed in the MMA's order.
//
// Why: gdn_chunk_scan runs each chunk's products on mma.sync, 8 warps each walking its 16 x 16
// tiles; ~254 MMAs a warp a chunk with their fragment loads and splits, ~12,000 cycles a chunk where
// the tensor pipe needs ~3,000 (docs/PERF.md: latency-bound at 2 warps a scheduler; 11.3 ms of a 4K
// prefill). Here one instruction multiplies 64 rows x 32 columns x 8 k, issued back to back and
// accumulated by the tensor cores without register round trips, and the state never leaves the
// registers: the state update's result IS the state, held as S^T (Dk x columns) by the two
// warpgroups' accumulators (warpgroup w: rows 64 w .. 64 w + 63 of Dk).
//
// Per chunk (tokens as M = 64, value columns as N = 32):
//   warpgroup 0: D = W S0 (3xTF32: W big / small from the record in fragment order, split in
//     registers, as A; S0 big / small as B), Delta = U - D, then Delta and fk Delta split into
//     shared memory as B operands of step 2;
//   warpgroup 1: Oacc = fq (Q S0) (Q the raw bf16 conv outputs, exact in TF32, as A);
//   both: S^T = e^Gamma_C S^T + K^T (fk Delta) (K^T's fragments by ldmatrix.trans from the raw bf16 K;
//     fk Delta big and small as B); warpgroup 1 also O = Oacc + M Delta (M from the record, split);
//   both: S big / small into shared memory, the next chunk's B operand.
// The record copies overlap the products as in gdn_chunk_scan (W, Q, U, fq, fk after step 1; K, M
// after step 2).
//
// The A fragments from registers follow the record's k order (lane (g, t) holds k = 2t in the slots
// of k = t and 2t + 1 in those of k = t + 4; gdn_chunked.cu, gc_lda_f), so every B operand is stored
// with its k index permuted the same way within each group of 8 (gw_bidx): the products are those
// of the natural order. B operands are K-major in the 128-byte swizzle (gw_bidx, gw_koff).
//
// Measured (docs/PERF.md, twenty-third session): phase B 11.28 -> 9.30 ms of a 4K prefill (+2.5 %),
// bitwise the same logits as gdn_chunk_scan; LILY_CUDA_GDN_WG=0 gives the mma.sync kernel back. What
// bounds it now is the chunk's chain (W S0, the stores of Delta / fk Delta, the state update, the
// stores of S, two block barriers), not the tensor pipe (25 % busy).
#include "gdn_chunked.cuh"
#include "qgemm_wg.cuh" // cp.async, the proxy fence, the shared-memory descriptor

#define GW_DK 128 // the key dim this kernel takes
#define GW_NC 32  // value columns a block

int lily_gdn_wg = 1;

// Float index of element (n, k) of a K-major B operand of 32 rows (n), k permuted as the A fragments.
// The layout is the 128-byte swizzled one: 8-row atoms of 128 bytes (32 k) a row, the 16-byte unit of
// k XORed with the row within the atom; the atoms of one 32-k range side by side along n (SBO 1024
// bytes), those ranges one after another. Why not the plain core-matrix layout: a thread's stores of
// the epilogue and the state (two k 8 apart, n in pairs) met 2-way bank conflicts there; here the XOR
// spreads them over all 32 banks (the chunked GDN at 4096 tokens 0.534 -> 0.513 ms, docs/PERF.md).
static __device__ __forceinline__ int gw_bidx(int n, int k) {
    const int kk = k & 7, ks = (k & ~7) | (kk >> 1) | ((kk & 1) << 2);
    return ((((ks >> 5) * (GW_NC / 8) + (n >> 3)) << 8) | ((n & 7) << 5)) + ((((ks & 31) >> 2) ^ (n & 7)) << 2) + (ks & 3);
}
// Offset of k-step s (8 k) from a B operand's descriptor (wg_desc_sw128 of its base), in 16-byte units.
static __device__ __forceinline__ uint64_t gw_koff(int s) {
    return (uint64_t)(((s >> 2) * (GW_NC / 8) * 1024 + (s & 3) * 32) >> 4);
}

// d (64 x 32 per warpgroup: d[4 j + 2 h + e] is row 16 warp + g + 8 h, column 8 j + 2 t + e) =
// (acc ? d : 0) + A (registers, TF32) . B (descriptor).
static __device__ __forceinline__ void gw_mma(float *d, const uint32_t *a, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, "
                 "%11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}
// Pins 16 accumulator registers between the volatile statements around the asynchronous MMAs: the
// compiler may neither use them before the wait nor write them after the fence.
static __device__ __forceinline__ void gw_pin(float *d) {
    asm volatile(""
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 ::"memory");
}
static __device__ __forceinline__ void gw_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void gw_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void gw_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

// acc (a + 16: the small terms) += A . B in 3xTF32 over the NK k-steps k0 .. k0 + NK - 1: A from the
// record's tiles in fragment order (NK consecutive 16 x 8 tiles from `tile`, split in registers), B
// big / small at descriptors db / ds; one wait at the end (W S0 and M Delta).
template <int NK>
static __device__ __forceinline__ void gw_mma3(float *acc, const float *tile, uint64_t db, uint64_t ds, int k0) {
    gc_fa f[NK];
#pragma unroll
    for (int k = 0; k < NK; k++) gc_lda_f(f[k], tile + k * 128);
    gw_pin(acc), gw_pin(acc + 16);
    gw_fence();
#pragma unroll
    for (int k = 0; k < NK; k++) {
        const uint64_t off = gw_koff(k0 + k);
        gw_mma(acc, f[k].b, db + off, 1);
        gw_mma(acc + 16, f[k].s, db + off, 1);
        gw_mma(acc + 16, f[k].b, ds + off, 1);
    }
    gw_commit();
    gw_wait0();
    gw_pin(acc), gw_pin(acc + 16);
}

// x split into TF32 big and small parts at shared index i of (big, small).
static __device__ __forceinline__ void gw_st_split(float *b, float *s, int i, float x) {
    const uint32_t hb = gc_hi(x);
    b[i] = __uint_as_float(hb), s[i] = __uint_as_float(gc_hi(x - __uint_as_float(hb)));
}

// Shared memory in floats: S big / small (32 x 128 each), Delta big / small and fk Delta big / small
// (32 x 64 each), W (64 x 128), M (64 x 64), U (4 row blocks x 4 column tiles x 128), fq, fk (64
// each), then Q and K in bf16 (64 x 136 each: ldmatrix rows conflict-free).
#define GW_LD8 (GW_DK + 8)
static size_t gw_smem_bytes() {
    return (size_t)(2 * GW_NC * GW_DK + 4 * GW_NC * GC_C + GC_C * GW_DK + GC_C * GC_C + GC_C * GW_NC + 2 * GC_C) * 4 +
           (size_t)2 * GC_C * GW_LD8 * 2;
}

__global__ void __launch_bounds__(GC_THREADS, 1)
    gdn_scan_wg(gdn_dims d, int T, const float *scr, const uint16_t *cv, float *state, uint16_t *o) {
    extern __shared__ __align__(1024) float sm_raw[];
    float *sm = sm_raw + ((1024 - (__cvta_generic_to_shared(sm_raw) & 1023)) & 1023) / 4; // the atoms 1024-aligned
    const int h = blockIdx.x, j0 = blockIdx.y * GW_NC, tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5, wg = warp >> 2, wq = warp & 3, g = lane >> 2, t4 = lane & 3;
    const gc_layout L = gc_lay(d);
    const int Dk = GW_DK, dvp = L.dvp, C = 2 * d.hk * Dk + d.hv * d.dv, kh = h / (d.hv / d.hk);
    const int nch = (T + GC_C - 1) / GC_C, nlive = min(GW_NC, d.dv - j0);
    float *Sb = sm, *Ss = Sb + GW_NC * Dk, *Db = Ss + GW_NC * Dk, *Ds = Db + GW_NC * GC_C, *Fb = Ds + GW_NC * GC_C;
    float *Fs = Fb + GW_NC * GC_C, *Wf = Fs + GW_NC * GC_C, *Mf = Wf + GC_C * Dk, *Uf = Mf + GC_C * GC_C;
    float *fqv = Uf + GC_C * GW_NC, *fkv = fqv + GC_C;
    uint16_t *Qh = (uint16_t *)(fkv + GC_C), *Kh = Qh + GC_C * GW_LD8;
    float *Sg = state + ((long)h * d.dv + j0) * Dk;

    // Copies (gdn_chunk_scan's): W and M whole, U's 4 x 4 tiles of this block's columns (past Dv8
    // zero-filled), q and k rows in 16-byte pieces (piece tid % 16 of rows tid / 16 + 16 i).
    const int hr0 = tid / (Dk / 8), hc = (tid % (Dk / 8)) * 8;
    auto raw = [&](int ch, int r, int sec) { return cv + (long)(ch * GC_C + r) * C + sec * d.hk * Dk + kh * Dk + hc; };
    auto load1 = [&](int ch) {
        const float *rec = scr + ((long)ch * d.hv + h) * L.rec;
        for (int w = tid; w < GC_C * Dk / 4; w += GC_THREADS) wg_cp16(Wf + 4 * w, rec + 4 * w, true);
        for (int r = hr0; r < GC_C; r += GC_THREADS / (Dk / 8)) {
            const bool live = ch * GC_C + r < T;
            wg_cp16(Qh + r * GW_LD8 + hc, live ? (const void *)raw(ch, r, 0) : scr, live);
        }
        for (int w = tid; w < 4 * 4 * 32; w += GC_THREADS) { // (row block, tile, lane's 4 floats)
            const int rb = w / 128, ut = j0 / 8 + (w / 32) % 4;
            const bool ok = ut < dvp / 8;
            wg_cp16(Uf + 4 * w, rec + L.u + ((long)(rb * (dvp / 8) + (ok ? ut : 0)) * 32 + (w & 31)) * 4, ok);
        }
        if (tid < 32) wg_cp16(fqv + 4 * tid, rec + L.fq + 4 * tid, true); // fq then fk: contiguous in both
        wg_commit();
    };
    auto load2 = [&](int ch) {
        const float *rec = scr + ((long)ch * d.hv + h) * L.rec;
        for (int r = hr0; r < GC_C; r += GC_THREADS / (Dk / 8)) {
            const bool live = ch * GC_C + r < T;
            wg_cp16(Kh + r * GW_LD8 + hc, live ? (const void *)raw(ch, r, 1) : scr, live);
        }
        for (int w = tid; w < GC_C * GC_C / 4; w += GC_THREADS) wg_cp16(Mf + 4 * w, rec + L.m + 4 * w, true);
        wg_commit();
    };

    // This thread's part of S^T: rows (Dk) dr + 8 hh, columns 8 j + 2 t4 + e, at s[4 j + 2 hh + e];
    // s[16 ..] takes the small terms of an update.
    const int dr = 64 * wg + 16 * wq + g;
    float s[32];
#pragma unroll
    for (int i = 0; i < 16; i++) {
        const int col = 8 * (i >> 2) + 2 * t4 + (i & 1), dk = dr + 8 * ((i >> 1) & 1);
        s[i] = col < nlive ? Sg[(long)col * Dk + dk] : 0.0f;
        s[16 + i] = 0.0f;
    }
    auto store_s = [&]() {
#pragma unroll
        for (int i = 0; i < 16; i++)
            gw_st_split(Sb, Ss, gw_bidx(8 * (i >> 2) + 2 * t4 + (i & 1), dr + 8 * ((i >> 1) & 1)), s[i]);
        wg_fence_proxy();
    };
    store_s();
    load1(0);
    load2(0);
    const uint64_t dSb = wg_desc_sw128(Sb), dSs = wg_desc_sw128(Ss);
    const uint64_t dDb = wg_desc_sw128(Db), dDs = wg_desc_sw128(Ds);
    const uint64_t dFb = wg_desc_sw128(Fb), dFs = wg_desc_sw128(Fs);
    float oa[32]; // warpgroup 1: O's big terms, then its small terms
#pragma unroll
    for (int i = 0; i < 32; i++) oa[i] = 0.0f;

    for (int ch = 0; ch < nch; ch++) {
        const int c0 = ch * GC_C, nc = min(GC_C, T - c0);
        const float ecc = scr[((long)ch * d.hv + h) * L.rec + L.e]; // e^Gamma_C
        wg_cpwait<1>(); // W, Q, U, fq, fk of this chunk landed
        __syncthreads();
        float a[32];
#pragma unroll
        for (int i = 0; i < 32; i++) a[i] = 0.0f;
        if (wg == 0) {
            // Step 1a: D = W S0 (a: big.big; a + 16: small.big + big.small), in two halves of Dk.
#pragma unroll
            for (int hf = 0; hf < 2; hf++) gw_mma3<8>(a, Wf + (wq * (Dk / 8) + 8 * hf) * 128, dSb, dSs, 8 * hf);
            // Delta = U - D and fk Delta, split, as step 2's B operands (token-major within a column).
#pragma unroll
            for (int jt = 0; jt < 4; jt++) {
                const float4 uv = *(const float4 *)(Uf + ((wq * 4 + jt) * 32 + lane) * 4);
                const float u4[4] = {uv.x, uv.y, uv.z, uv.w};
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int i = 16 * wq + g + 8 * (e >> 1), col = 8 * jt + 2 * t4 + (e & 1), x = gw_bidx(col, i);
                    const float dl = u4[e] - (a[4 * jt + e] + a[16 + 4 * jt + e]);
                    gw_st_split(Db, Ds, x, dl);
                    gw_st_split(Fb, Fs, x, fkv[i] * dl);
                }
            }
            wg_fence_proxy();
        } else {
            // Step 1b: Oacc = fq (Q S0) (Q exact: big.big into a, big.small into a + 16).
#pragma unroll
            for (int hf = 0; hf < 2; hf++) {
                uint32_t fq[8][4];
#pragma unroll
                for (int k = 0; k < 8; k++) gc_lda_hp(fq[k], Qh + wq * 16 * GW_LD8, GW_LD8, (8 * hf + k) * 8);
                gw_pin(a), gw_pin(a + 16);
                gw_fence();
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    const uint64_t off = gw_koff(8 * hf + k);
                    gw_mma(a, fq[k], dSb + off, 1);
                    gw_mma(a + 16, fq[k], dSs + off, 1);
                }
                gw_commit();
                gw_wait0();
                gw_pin(a), gw_pin(a + 16);
            }
#pragma unroll
            for (int i = 0; i < 16; i++) {
                oa[i] = fqv[16 * wq + g + 8 * ((i >> 1) & 1)] * (a[i] + a[16 + i]);
                oa[16 + i] = 0.0f;
            }
        }
        wg_cpwait<0>(); // K, M landed
        __syncthreads();
        if (ch + 1 < nch) load1(ch + 1); // W, Q, U, fq, fk: read only by step 1
        // Step 2: S^T = e^Gamma_C S^T + K^T (fk Delta) (s: big terms, s + 16: small), every warpgroup
        // its 64 rows of Dk; K^T's fragments for 2 k-steps (16 tokens) by one ldmatrix.trans.
        uint32_t fk[8][4];
#pragma unroll
        for (int p = 0; p < 4; p++) {
            const int m = lane >> 3, r = lane & 7;
            const uint32_t ad = (uint32_t)__cvta_generic_to_shared(Kh + (16 * p + 8 * (m >> 1) + r) * GW_LD8 + 64 * wg + 16 * wq + 8 * (m & 1));
            uint32_t q[4];
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                         : "=r"(q[0]), "=r"(q[1]), "=r"(q[2]), "=r"(q[3]) : "r"(ad));
#pragma unroll
            for (int u = 0; u < 2; u++) {
                fk[2 * p + u][0] = q[2 * u] << 16, fk[2 * p + u][1] = q[2 * u + 1] << 16;
                fk[2 * p + u][2] = q[2 * u] & 0xffff0000u, fk[2 * p + u][3] = q[2 * u + 1] & 0xffff0000u;
            }
        }
#pragma unroll
        for (int i = 0; i < 16; i++) s[i] *= ecc, s[16 + i] = 0.0f;
        gw_pin(s), gw_pin(s + 16);
        gw_fence();
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const uint64_t off = gw_koff(k);
            gw_mma(s, fk[k], dFb + off, 1);
            gw_mma(s + 16, fk[k], dFs + off, 1);
        }
        gw_commit();
        if (wg == 1) {
            // O = Oacc + M Delta (oa: big.big; oa + 16: small.big + big.small), two halves of the tokens.
#pragma unroll
            for (int hf = 0; hf < 2; hf++) gw_mma3<4>(oa, Mf + (wq * 8 + 4 * hf) * 128, dDb, dDs, 4 * hf);
#pragma unroll
            for (int i = 0; i < 16; i++) {
                const int r = 16 * wq + g + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * t4 + (i & 1);
                if (r < nc && col < nlive)
                    o[(long)(c0 + r) * d.hv * d.dv + h * d.dv + j0 + col] = lily_f32_to_bf16(oa[i] + oa[16 + i]);
            }
        }
        gw_wait0();
        gw_pin(s), gw_pin(s + 16);
#pragma unroll
        for (int i = 0; i < 16; i++) s[i] += s[16 + i];
        store_s();
        __syncthreads();
        if (ch + 1 < nch) load2(ch + 1); // K, M: read only by step 2
    }
#pragma unroll
    for (int i = 0; i < 16; i++) {
        const int col = 8 * (i >> 2) + 2 * t4 + (i & 1), dk = dr + 8 * ((i >> 1) & 1);
        if (col < nlive) Sg[(long)col * Dk + dk] = s[i];
    }
}

bool gdn_scan_wg_takes(gdn_dims d, int ncols) { return lily_gdn_wg && d.dk == GW_DK && ncols == GW_NC; }

void gdn_scan_wg_launch(gdn_dims d, int T, const float *scr, const uint16_t *cv, float *state, uint16_t *o, int nsplit,
                        cudaStream_t st) {
    const size_t smem = gw_smem_bytes() + 1024; // + the alignment of the B operands' atoms
    cudaFuncSetAttribute(gdn_scan_wg, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    gdn_scan_wg<<<dim3(d.hv, nsplit), GC_THREADS, smem, st>>>(d, T, scr, cv, state, o);
}
