// gdn_chunk_scan.cu: phase B of the chunked GDN on mma.sync (gdn_chunked.cu's header): a block walks the
// chunks of one v head in order with its slice of the state in shared memory (gdn_scan_wg.cu does the same
// products on the warpgroup MMA at the real model's shape).
#include "prefill.cuh"
#include "gdn_pf.cuh"
#include "qgemm_wg.cuh" // the cp.async wrappers (wg_cp16, wg_commit, wg_cpwait)
#include "gdn_chunked.cuh"

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

// A (big, rest) pair of one state value.
static __device__ __forceinline__ float2 gc_pair(float x) {
    const float b = __uint_as_float(gc_hi(x));
    return make_float2(b, x - b);
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

#if GC_TRACE
void gc_scan_trace_report(int T, int nsplit) {
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
}
#endif
