// gdn_chunked.cuh: what the chunked GDN's kernels share (gdn_chunked.cu: the conv pass, phase A and
// phase B on mma.sync; gdn_scan_wg.cu: phase B on the warpgroup MMA): the chunk size, the 3xTF32
// split, the A fragments read from a record or from bf16 rows, and the scratch record's layout.
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
