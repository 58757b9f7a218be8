// gdn_chunked.cuh: what the chunked GDN's kernels share (gdn_chunked.cu: the conv pass and the launches;
// gdn_chunk_prep.cu: phase A; gdn_chunk_scan.cu: phase B on mma.sync; gdn_scan_wg.cu: phase B on the warpgroup
// MMA): the chunk size, the 3xTF32 split, the fragments, the scratch record's layout, the phases' shared memory.
#pragma once
#include "prefill.cuh"
#include "gdn_pf.cuh"

#define GC_C 64        // tokens per chunk
#define GC_WARPS 8
#define GC_THREADS (32 * GC_WARPS)
#define GC_LD64 68     // shared row stride of the 64 x 64 matrices
#define GC_MAXCOLS 64  // value columns per phase-B block (shared memory)
#define GC_VT 128      // value columns per phase-A pass (U is built in passes of this many)
#ifndef GC_SPLIT
#define GC_SPLIT 1     // 1 = 3xTF32 products (about fp32), 0 = 1xTF32
#endif

#if !GC_SPLIT
static __device__ __forceinline__ uint32_t gc_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}
#endif

// The 3xTF32 split of x: big = x with its low 13 mantissa bits cleared (a valid TF32 value), small =
// the rest (x - big, exact in fp32), cleared the same way. Truncation instead of cvt.rna: one LOP3
// each instead of a ~4-instruction conversion sequence (the scan's issue slots were a quarter
// conversions); |x - big - small| < 2^-20 |x|, against 2^-22 with rounding, still about fp32.
static __device__ __forceinline__ uint32_t gc_hi(float x) { return __float_as_uint(x) & 0xffffe000u; }
// x as the big and small TF32 parts of a 3xTF32 operand (GC_SPLIT=0: x rounded to TF32, no small part).
static __device__ __forceinline__ void gc_split(float x, uint32_t &b, uint32_t &s) {
#if GC_SPLIT
    b = gc_hi(x), s = gc_hi(x - __uint_as_float(b));
#else
    b = gc_tf32(x), s = 0u;
#endif
}

// mma fragments of one k-step of 8, as TF32 big parts (b) and, with GC_SPLIT, the TF32 remainders (s).
struct gc_fa {
    uint32_t b[4], s[4];
};
struct gc_fb {
    uint32_t b[2], s[2];
};
// A fragment of a tile stored in fragment order (gc_st_afrag), split at load.
static __device__ __forceinline__ void gc_lda_f(gc_fa &f, const float *tile) {
    const float4 v = *(const float4 *)(tile + (threadIdx.x & 31) * 4);
    const float x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) gc_split(x[i], f.b[i], f.s[i]);
}
// A fragment from bf16 rows a[r ld + k] (exact in TF32: no small part).
static __device__ __forceinline__ void gc_lda_hp(uint32_t *f, const uint16_t *a, int ld, int k0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const uint32_t p0 = *(const uint32_t *)(a + g * ld + k0 + 2 * t), p1 = *(const uint32_t *)(a + (g + 8) * ld + k0 + 2 * t);
    f[0] = p0 << 16, f[1] = p1 << 16, f[2] = p0 & 0xffff0000u, f[3] = p1 & 0xffff0000u;
}

// The scratch record of one (chunk, v head), in floats: W (64 x dkp), M (64 x 64) and U (64 x dvp)
// as 16 x 8 tiles in fragment order (gc_st_afrag), e^Gamma_C (padded to 8), fq and fk (64 each). U's
// columns past Dv are zeros; every piece is a multiple of 8 floats, so phase B copies whole 16-byte
// pieces and every record stays 32-byte aligned.
struct gc_layout {
    int dkp, dvp;
    long m, u, e, fq, fk, rec;
};
static __host__ __device__ __forceinline__ gc_layout gc_lay(gdn_dims d) {
    gc_layout L;
    L.dkp = (d.dk + 7) & ~7, L.dvp = (d.dv + 7) & ~7;
    L.m = (long)GC_C * L.dkp, L.u = L.m + GC_C * GC_C, L.e = L.u + (long)GC_C * L.dvp;
    L.fq = L.e + 8, L.fk = L.fq + GC_C, L.rec = L.fk + GC_C;
    return L;
}

// Phase B on the warpgroup MMA (gdn_scan_wg.cu): whether it takes a call of these dims with `ncols`
// value columns a block (lily_gdn_wg on, Dk 128, 32 columns), and its launch (gdn_chunk_scan's
// arguments).
bool gdn_scan_wg_takes(gdn_dims d, int ncols);
void gdn_scan_wg_launch(gdn_dims d, int T, const float *scr, const uint16_t *cv, float *state, uint16_t *o, int nsplit,
                        cudaStream_t st);

// ---------------------------------------------------------------------------------------------
// The pieces phase A (gdn_chunk_prep.cu) and phase B (gdn_chunk_scan.cu) share, their shared memory,
// and the two kernels, which gdn_chunked.cu's gdn_pf_chunked launches.

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

#ifndef GC_TRACE
#define GC_TRACE 0
#endif

static __device__ __forceinline__ void gc_mma(float *c, const uint32_t *a, const uint32_t *b) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
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

// Shared memory of phase A in floats: q then v (bf16, 64 x ldh), k (bf16, 64 x ldh + 32 elements: the
// W product's ldmatrix of a last partial group of 4 column tiles reads past the row end), A and X
// (64 x 68 fp32), 7 vectors of 64. ldh = max(Dk8, GC_VT) + 8 bf16: 68 words = 4 mod 32 a row
// (conflict-free pair loads and ldmatrix rows).
static __host__ __device__ __forceinline__ int gc_prep_ldh(int dk) { return (((dk + 7) & ~7) > GC_VT ? ((dk + 7) & ~7) : GC_VT) + 8; }
static inline size_t gc_prep_smem_floats(int dk) {
    const size_t ldh = gc_prep_ldh(dk);
    return (2 * GC_C * ldh + 32) / 2 + 2 * GC_C * GC_LD64 + 7 * GC_C;
}

// Shared memory of phase B in floats: the state as (big, rest) groups (ncols x 2 ld8, gc_sidx), W
// (64 x Dk8, fragment order), Q and K in bf16 (64 x ld8 each), M (64 x 64, fragment order), U and
// Delta (64 x ncols each, fragment orders), (fk Delta)^T split (ncols x 128), fq and fk (64 each).
// ld8 = Dk8 + 8: 2 ld8 = 16 mod 32 floats and ld8 / 2 = 4 mod 32 words (conflict-free state groups,
// bf16 pairs and ldmatrix rows at Dk 128).
static inline size_t gc_scan_smem_floats(int dk, int ncols) {
    const size_t dkp = (dk + 7) & ~7, ld8 = dkp + 8;
    return 2 * ncols * ld8 + GC_C * dkp + GC_C * ld8 + GC_C * GC_C + 2 * GC_C * ncols + 128 * ncols + 2 * GC_C;
}

__global__ void gdn_chunk_prep(gdn_dims d, int T, const uint16_t *cv, const uint16_t *bb, const uint16_t *aa, int ldg,
                   const float *dt_bias, const float *A, float *scr);
__global__ void gdn_chunk_scan(gdn_dims d, int T, const float *scr, const uint16_t *cv, float *state, uint16_t *o, int ncols);
// GC_TRACE=1 builds: print and clear phase B's section times (gdn_chunk_scan.cu).
void gc_scan_trace_report(int T, int nsplit);
