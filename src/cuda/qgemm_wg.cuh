// qgemm_wg.cuh: what the two wgmma GEMM kernels share (qgemm_wg.cu: a block of warpgroups that
// each copy, dequantise and multiply; qgemm_ws.cu: a producer warp pair feeding two consumer
// warpgroups; gemv.cu uses the copy and mbarrier wrappers): cp.async, bulk-copy, mbarrier and
// proxy-fence wrappers, the shared-memory matrix descriptor, the
// m64n136k16 instruction and its register fences, the 4-bit code -> bf16 unpacking, the row
// mapping of a block, and the pair epilogue. Layout facts both rely on: shared memory holds X and
// the bf16 codes in the canonical no-swizzle K-major layout (8x8 core matrices of 128 contiguous
// bytes); B of one k16 step is 17 column groups (16 of weights + 1 of ones) x 2 core matrices.
#pragma once

#include <cuda.h> // CUtensorMap
#include <cuda_bf16.h>

#include "prefill.cuh"

#define WG_BK 64
#define WG_BN 128
#define WG_BQ_STEP (17 * 256) // bf16 B of one k16 step: 17 column groups (16 + ones) x 2 core matrices
#define WG_BQ_BYTES (4 * WG_BQ_STEP)

// cuTensorMapEncodeTiled (a PFN_cuTensorMapEncodeTiled_v12000) or NULL (qgemm_wg.cu).
void *lily_tmap_encoder(void);
// The tensor map of a call's X as the wgmma kernels load it (qgemm_wg.cu): bf16 rows of K, boxes of 64 k
// x box_rows rows, 128-byte swizzle, L2 promotion 256 B; rows past M read as zeros. False where X does
// not fit a map (gathered rows, no rows, unaligned) or there is no encoder.
bool wg_make_xmap(const qg_args &a, CUtensorMap *m, int box_rows);

__device__ __forceinline__ uint32_t wg_smem(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void wg_cp16(void *dst, const void *src, bool ok) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(wg_smem(dst)), "l"(src), "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void wg_cp4(void *dst, const void *src, bool ok) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(wg_smem(dst)), "l"(src), "r"(ok ? 4 : 0));
}
__device__ __forceinline__ void wg_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void wg_cpwait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
// 16 bytes to / from shared memory by shared-window address: a pointer from the kernels' aligned
// dynamic shared memory (uintptr_t arithmetic) is generic, and the compiler then emits generic
// ST.E.128 / LD.E.128 with 64-bit address arithmetic (ncu, docs/PERF.md, fourteenth session).
__device__ __forceinline__ void wg_sts128(uint32_t a, uint4 v) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ uint4 wg_lds128(uint32_t a) {
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a) : "memory");
    return v;
}
__device__ __forceinline__ uint32_t wg_lds32(uint32_t a) {
    uint32_t v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(a) : "memory");
    return v;
}
// Generic-proxy writes (cp.async, st.shared) become visible to the wgmma's async proxy.
__device__ __forceinline__ void wg_fence_proxy() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// mbarriers (qgemm_ws.cu's ring; gemv.cu's bulk-staged tiles).
__device__ __forceinline__ void mb_init(uint64_t *b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(wg_smem(b)), "r"(count) : "memory");
}
// Release: this thread's earlier shared-memory writes are visible to whoever waits on the phase.
__device__ __forceinline__ void mb_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(wg_smem(b)) : "memory");
}
// Acquire: returns once the phase of this parity has completed.
__device__ __forceinline__ void mb_wait(uint64_t *b, int parity) {
    asm volatile("{\n.reg .pred P1;\nWS_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
                 "@P1 bra WS_DONE;\nbra WS_WAIT;\nWS_DONE:\n}\n" ::"r"(wg_smem(b)),
                 "r"(parity)
                 : "memory");
}
// The next phase of b completes when `bytes` more have arrived by complete_tx (and one arrival).
__device__ __forceinline__ void mb_expect_tx(uint64_t *b, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(wg_smem(b)), "r"(bytes) : "memory");
}
// mbarrier inits become visible to the async proxy (the bulk copies that complete on them).
__device__ __forceinline__ void mb_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
// One bulk copy global -> shared (TMA, no tensor map): dst, src and bytes multiples of 16; completes
// on b as `bytes` of transaction count.
__device__ __forceinline__ void bulk_g2s(void *dst, const void *src, uint32_t bytes, uint64_t *b) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(wg_smem(dst)),
                 "l"(src), "r"(bytes), "r"(wg_smem(b)) : "memory");
}

// One 2-D tensor-map copy (TMA) global -> shared of the box at (c0 inner, c1 outer), completing on b.
__device__ __forceinline__ void tma_g2s_2d(void *dst, const void *tmap, int c0, int c1, uint64_t *b) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 ::"r"(wg_smem(dst)), "l"(tmap), "r"(c0), "r"(c1), "r"(wg_smem(b)) : "memory");
}
// Descriptor of a K-major operand in the 128-byte swizzle a tensor-map copy with
// CU_TENSOR_MAP_SWIZZLE_128B writes: rows of 128 bytes (64 bf16 of k), 8-row atoms of 1024 bytes
// (SBO), the atom 1024-byte aligned; a k16 step adds 32 bytes to the start address.
__device__ __forceinline__ uint64_t wg_desc_sw128(const void *p) {
    return (uint64_t)((wg_smem(p) & 0x3FFFF) >> 4) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

// Shared-memory matrix descriptor, no swizzle: start address, LBO and SBO in 16-byte units.
__device__ __forceinline__ uint64_t wg_desc(const void *p, uint32_t lbo, uint32_t sbo, int swap) {
    if (swap) { uint32_t t = lbo; lbo = sbo; sbo = t; }
    return (uint64_t)((wg_smem(p) & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32);
}

#define WG_F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define WG_D68                                                                                                 \
    WG_F4(0), WG_F4(4), WG_F4(8), WG_F4(12), WG_F4(16), WG_F4(20), WG_F4(24), WG_F4(28), WG_F4(32), WG_F4(36), \
        WG_F4(40), WG_F4(44), WG_F4(48), WG_F4(52), WG_F4(56), WG_F4(60), WG_F4(64)

// d (64 x 136 per warpgroup, fp32) = (acc ? d : 0) + A (64 x 16) . B (16 x 136), both from shared memory.
__device__ __forceinline__ void wg_mma(float *d, uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %70, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n136k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
                 "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, "
                 "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, "
                 "%55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67}, "
                 "%68, %69, p, 1, 1, 0, 0;\n}\n"
                 : WG_D68
                 : "l"(da), "l"(db), "r"(acc));
}
// Pins the accumulator registers around the asynchronous MMA: the compiler may neither read them
// before the wait nor move them while the MMA writes them.
__device__ __forceinline__ void wg_fence(float *d) {
    asm volatile("wgmma.fence.sync.aligned;\n" : WG_D68 ::"memory");
}
__device__ __forceinline__ void wg_commit_mma(float *d) {
    asm volatile("wgmma.commit_group.sync.aligned;\n" : WG_D68 ::"memory");
}
__device__ __forceinline__ void wg_wait_mma(float *d) {
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" : WG_D68 ::"memory");
}
// The same, leaving the most recent group in flight (the previous one is complete).
__device__ __forceinline__ void wg_wait_mma1(float *d) {
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" : WG_D68 ::"memory");
}

// The wide tile (qgemm_wg.cu, BN = 256, bf16 weights only): d (64 x 256 per warpgroup, fp32, 128
// registers a thread) = (acc ? d : 0) + A (64 x 16) . B (16 x 256); no ones columns (nothing to fold).
#define WG_D128 \
    WG_F4(0), WG_F4(4), WG_F4(8), WG_F4(12), WG_F4(16), WG_F4(20), WG_F4(24), WG_F4(28), \
    WG_F4(32), WG_F4(36), WG_F4(40), WG_F4(44), WG_F4(48), WG_F4(52), WG_F4(56), WG_F4(60), \
    WG_F4(64), WG_F4(68), WG_F4(72), WG_F4(76), WG_F4(80), WG_F4(84), WG_F4(88), WG_F4(92), \
    WG_F4(96), WG_F4(100), WG_F4(104), WG_F4(108), WG_F4(112), WG_F4(116), WG_F4(120), WG_F4(124)
// The 128 accumulator registers of an m64n256 instruction as operands %0 .. %127 (with WG_D128).
#define WG_ACC128                                                                                      \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                          \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                 \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                 \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "                 \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "                 \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "                 \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "     \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
__device__ __forceinline__ void wg_mma256(float *d, uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " WG_ACC128 ", "
                 "%128, %129, p, 1, 1, 0, 0;\n}\n"
                 : WG_D128
                 : "l"(da), "l"(db), "r"(acc));
}
// 128 columns without ones columns (qgemm_wsp.cu): d (64 x 128 per warpgroup, fp32, 64 registers a
// thread) = (acc ? d : 0) + A (64 x 16) . B (16 x 128).
#define WG_D64 \
    WG_F4(0), WG_F4(4), WG_F4(8), WG_F4(12), WG_F4(16), WG_F4(20), WG_F4(24), WG_F4(28), \
    WG_F4(32), WG_F4(36), WG_F4(40), WG_F4(44), WG_F4(48), WG_F4(52), WG_F4(56), WG_F4(60)
__device__ __forceinline__ void wg_mma128(float *d, uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "%64, %65, p, 1, 1, 0, 0;\n}\n"
                 : WG_D64
                 : "l"(da), "l"(db), "r"(acc));
}
// Register fences of the accumulator as wg_fence / wg_commit_mma / wg_wait_mma(1), for NR = 68 (the
// m64n136 accumulator), 64 (m64n128) or 128 (m64n256).
template <int NR> __device__ __forceinline__ void wgx_fence(float *d) {
    if constexpr (NR == 128) asm volatile("wgmma.fence.sync.aligned;\n" : WG_D128 ::"memory");
    else if constexpr (NR == 64) asm volatile("wgmma.fence.sync.aligned;\n" : WG_D64 ::"memory");
    else wg_fence(d);
}
template <int NR> __device__ __forceinline__ void wgx_commit(float *d) {
    if constexpr (NR == 128) asm volatile("wgmma.commit_group.sync.aligned;\n" : WG_D128 ::"memory");
    else if constexpr (NR == 64) asm volatile("wgmma.commit_group.sync.aligned;\n" : WG_D64 ::"memory");
    else wg_commit_mma(d);
}
template <int NR, int LEFT> __device__ __forceinline__ void wgx_wait(float *d) {
    if constexpr (NR == 128) asm volatile("wgmma.wait_group.sync.aligned %128;\n" : WG_D128 : "n"(LEFT) : "memory");
    else if constexpr (NR == 64) asm volatile("wgmma.wait_group.sync.aligned %64;\n" : WG_D64 : "n"(LEFT) : "memory");
    else if constexpr (LEFT == 1) wg_wait_mma1(d);
    else wg_wait_mma(d);
}

// One 64-k stage kt of a warpgroup's MMAs: fence, the 4 k16 steps, commit. Step s reads A at byte
// a_off + s a_step from descriptor da0 and B at b_off + s b_step from db0; the accumulator starts from
// zero at step 0 of stage 0. NR picks the instruction: 68 m64n136, 64 m64n128, 128 m64n256. The caller
// waits for the group (wgx_wait).
template <int NR>
__device__ __forceinline__ void wgx_stage(float *d, uint64_t da0, int a_off, int a_step, uint64_t db0, int b_off, int b_step,
                                          int kt) {
    wgx_fence<NR>(d);
#pragma unroll
    for (int s = 0; s < 4; s++) {
        const uint64_t a = da0 + ((a_off + s * a_step) >> 4), b = db0 + ((b_off + s * b_step) >> 4);
        if constexpr (NR == 128) wg_mma256(d, a, b, kt > 0 || s > 0);
        else if constexpr (NR == 64) wg_mma128(d, a, b, kt > 0 || s > 0);
        else wg_mma(d, a, b, kt > 0 || s > 0);
    }
    wgx_commit<NR>(d);
}

__device__ __forceinline__ uint32_t wg_bf2_fma(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
__device__ __forceinline__ uint32_t wg_pack(float lo, float hi) {
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}
// Codes 2i and 2i+1 of word w (byte i; w4 = w >> 4) as a bf16 pair of exact q (low half = code 2i).
__device__ __forceinline__ uint32_t wg_code_pair(uint32_t w, uint32_t w4, int i) {
    // byte i of w (low nibble = code 2i) to bits 0-7, byte i of w>>4 (code 2i+1) to bits 16-23
    const uint32_t v = (__byte_perm(w, w4, i | ((4 + i) << 8)) & 0x000F000Fu) | 0x43004300u;
    return wg_bf2_fma(v, 0x3F803F80u, 0xC300C300u); // 128 + q - 128: q exactly
}
// wg_code_pair with the nibble mask and the exponent bits in one LOP3 (the register-operand kernels'
// fragment build, qgemm_gt.cu and qgemm_rw.cu): c43 holds 0x43004300 in a register the compiler cannot
// fold (SASS LOP3 takes one immediate; with both constants immediate it emitted two). Same bits.
__device__ __forceinline__ uint32_t wg_code_pair_c43(uint32_t w, uint32_t w4, int i, uint32_t c43) {
    uint32_t v;
    asm("lop3.b32 %0, %1, 0x000F000F, %2, 0xEA;\n" : "=r"(v) : "r"(__byte_perm(w, w4, i | ((4 + i) << 8))), "r"(c43));
    return wg_bf2_fma(v, 0x3F803F80u, 0xC300C300u); // 128 + q - 128: q exactly
}
// Keeps 16 A-fragment registers of a stage live up to this point (a use, not a definition: a definition
// while an MMA that reads them is in flight makes ptxas serialise the MMAs, C7513). qgemm_rs.cu,
// qgemm_gt.cu, qgemm_rw.cu.
__device__ __forceinline__ void wg_hold16(const uint32_t *f) {
    asm volatile("" ::"r"(f[0]), "r"(f[1]), "r"(f[2]), "r"(f[3]), "r"(f[4]), "r"(f[5]), "r"(f[6]), "r"(f[7]),
                 "r"(f[8]), "r"(f[9]), "r"(f[10]), "r"(f[11]), "r"(f[12]), "r"(f[13]), "r"(f[14]), "r"(f[15])
                 : "memory");
}
// The 8 codes of a word (nibble i = k offset i) as 16 bytes of bf16 q in k order (one core-matrix row).
__device__ __forceinline__ uint4 wg_codes(uint32_t w) {
    const uint32_t w4 = w >> 4;
    uint32_t r[4];
#pragma unroll
    for (int i = 0; i < 4; i++) r[i] = wg_code_pair(w, w4, i);
    return make_uint4(r[0], r[1], r[2], r[3]);
}
// A column's scale|bias word (bf16 scale low, bias high) as (scale, scale) and (bias, bias) pairs.
__device__ __forceinline__ void wg_sb_pairs(uint32_t sb, uint32_t &s2, uint32_t &b2) {
    s2 = (sb & 0xffffu) | (sb << 16), b2 = (sb >> 16) | (sb & 0xffff0000u);
}
// One column's half stage of codes into the bf16 B buffer at shared address B (both wgmma kernels):
// w holds column j's 32 codes of k 32 half .. 32 half + 31, word q = k 8 q .. 8 q + 7 of that half;
// word 4 half + q of the stage is row j % 8 of core matrix (j / 8, q % 2) of k16 step (4 half + q) / 2.
// BW: the weights rounded once, rb(s q + b) from the column's scale|bias word sb; else the exact q.
template <bool BW>
__device__ __forceinline__ void wg_dq_half(uint32_t B, int bq_step, int j, int half, uint4 w, uint32_t sb) {
    const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
    uint32_t s2 = 0, b2 = 0; // BW: (scale, scale) and (bias, bias) as bf16 pairs
    if (BW) wg_sb_pairs(sb, s2, b2);
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const int word = 4 * half + q, s = word >> 1, h = word & 1;
        uint4 v = wg_codes(ws[q]);
        if (BW)
            v = make_uint4(wg_bf2_fma(v.x, s2, b2), wg_bf2_fma(v.y, s2, b2), wg_bf2_fma(v.z, s2, b2), wg_bf2_fma(v.w, s2, b2));
        wg_sts128(B + s * bq_step + (j >> 3) * 256 + h * 128 + (j & 7) * 16, v);
    }
}

// One output pair at element offset `at` of y (row orow, columns col and col + 1) through the
// epilogue (QG_GLU is handled apart); scale() gives the row's scale, read only for QG_SCALE_BF16
// (qgemm.cu hoists it and orow out of its column loop, wg_store2 reads it here).
template <class S>
__device__ __forceinline__ void qg_store2_at(const qg_args &a, long at, S scale, float v0, float v1) {
    switch (a.epi) {
    case QG_BF16: *(uint32_t *)((uint16_t *)a.y + at) = wg_pack(v0, v1); break;
    case QG_F32: *(float2 *)((float *)a.y + at) = make_float2(rb(v0), rb(v1)); break;
    case QG_F32_RAW: *(float2 *)((float *)a.y + at) = make_float2(v0, v1); break;
    case QG_RESID: {
        float2 rs = *(const float2 *)(a.res + at);
        *(float2 *)((float *)a.y + at) = make_float2(rb(rs.x + rb(v0)), rb(rs.y + rb(v1)));
        break;
    }
    case QG_SCALE_BF16: {
        const float sc = scale();
        *(uint32_t *)((uint16_t *)a.y + at) = wg_pack(sc * rb(v0), sc * rb(v1));
        break;
    }
    }
}

// One output pair (columns col, col+1 of sorted row p) through the epilogue (QG_GLU is handled apart).
__device__ __forceinline__ void wg_store2(const qg_args &a, int p, int col, float v0, float v1) {
    const int orow = a.y_rows ? __ldg(a.y_rows + p) : p;
    qg_store2_at(a, (long)orow * a.ldy + col, [&] { return __ldg(a.scale + orow); }, v0, v1);
}

// A block's row tile and column tile: blockIdx.x and .y, swapped in a rastered launch (qg_args.raster).
__device__ __forceinline__ int wg_tile_ix(const qg_args &a) { return a.raster ? blockIdx.y : blockIdx.x; }
__device__ __forceinline__ int wg_col_ix(const qg_args &a) { return a.raster ? blockIdx.x : blockIdx.y; }

// The rows of X that row tile `tile` multiplies: dense (BM rows from tile * BM) or grouped (a tile of one
// expert's group, found in the tile map). False when there is nothing to do (grouped mode, tiles past
// the real count). wg_block_rows: the block's own row tile (wg_tile_ix); qgemm_wsp.cu's blocks walk several.
__device__ __forceinline__ bool wg_tile_rows(const qg_args &a, int BM, int tile, int *m0, int *rows, int *grp) {
    *grp = 0;
    if (a.tile_off) {
        if (tile >= __ldg(a.tile_off + a.n_groups)) return false;
        int lo = 0, hi = a.n_groups;
        if (a.n_groups <= 1024) {
            // The last group with tile_off[g] <= tile in two rounds of one load a lane (tile_off does
            // not decrease): every S-th entry, then the S after the last one that passed. The binary
            // search's eight dependent loads were ~4 % of the grouped down projection's stall samples.
            const int lane = threadIdx.x & 31, S = (a.n_groups + 31) / 32;
            const unsigned b1 = __ballot_sync(0xffffffffu, lane * S < a.n_groups && __ldg(a.tile_off + lane * S) <= tile);
            const int base = (31 - __clz(b1)) * S; // lane 0 always passes: tile_off[0] = 0
            const unsigned b2 =
                __ballot_sync(0xffffffffu, lane < S && base + lane < a.n_groups && __ldg(a.tile_off + base + lane) <= tile);
            lo = base + 31 - __clz(b2);
        } else {
            while (hi - lo > 1) { // binary search past the ballots' reach
                int mid = (lo + hi) >> 1;
                if (__ldg(a.tile_off + mid) <= tile) lo = mid; else hi = mid;
            }
        }
        *grp = lo;
        const int end = __ldg(a.grp_end ? a.grp_end + lo : a.grp_off + lo + 1);
        if (a.tile_rest) { // tiles every 128 rows, the group's last one to its end (<= BM by the map)
            *m0 = __ldg(a.grp_off + lo) + (tile - __ldg(a.tile_off + lo)) * 128;
            *rows = tile + 1 == __ldg(a.tile_off + lo + 1) ? min(BM, end - *m0) : 128;
        } else {
            *m0 = __ldg(a.grp_off + lo) + (tile - __ldg(a.tile_off + lo)) * BM;
            *rows = min(BM, end - *m0);
        }
    } else {
        *m0 = tile * BM;
        *rows = min(BM, a.M - *m0);
    }
    return true;
}
__device__ __forceinline__ bool wg_block_rows(const qg_args &a, int BM, int *m0, int *rows, int *grp) {
    return wg_tile_rows(a, BM, wg_tile_ix(a), m0, rows, grp);
}

// acc += s*part + b*sum for one 64-k stage: part from the m64n136 MMA (columns 128..135 hold the
// activation sums of rows g and g+8), sf the stage's (scale, bias) per column as float4 pairs.
__device__ __forceinline__ void wg_fold(float *acc, const float *part, const float4 *sf, int t) {
    const float xs0 = part[64], xs1 = part[66];
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const float4 f = sf[4 * j + t]; // columns 8j+2t, 8j+2t+1: (scale, bias) each
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const float sc = e ? f.z : f.x, bi = e ? f.w : f.y;
            acc[4 * j + e] = fmaf(sc, part[4 * j + e], fmaf(bi, xs0, acc[4 * j + e]));
            acc[4 * j + 2 + e] = fmaf(sc, part[4 * j + 2 + e], fmaf(bi, xs1, acc[4 * j + 2 + e]));
        }
    }
}

// The block's output: the thread holds rows r0, r0+8 of the tile (r0 = 16*warp + g over the
// multiplying warps) and columns 8j+2t, 8j+2t+1 of each of the NJ column groups (16, or 32 for the
// wide tile; QG_GLU: the first half gate, the second half up).
template <int NJ = 16>
__device__ __forceinline__ void wg_epilogue(const qg_args &a, const float *acc, int r0, int t, int m0,
                                            int rows, int n0) {
    if (a.epi == QG_GLU) {
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int r = r0 + 8 * hr;
            if (r >= rows) continue;
            const int p = m0 + r, orow = a.y_rows ? __ldg(a.y_rows + p) : p;
#pragma unroll
            for (int j = 0; j < NJ / 2; j++) {
                const int col = n0 + 8 * j + 2 * t;
                if (col >= a.N) continue;
                float o[2];
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    o[e] = qg_glu(acc[4 * j + 2 * hr + e], acc[4 * (j + NJ / 2) + 2 * hr + e]);
                }
                *(uint32_t *)((uint16_t *)a.y + (long)orow * a.ldy + col) = wg_pack(o[0], o[1]);
            }
        }
        return;
    }
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        const int r = r0 + 8 * hr;
        if (r >= rows) continue;
#pragma unroll
        for (int j = 0; j < NJ; j++) {
            const int col = n0 + 8 * j + 2 * t;
            if (col < a.N) wg_store2(a, m0 + r, col, acc[4 * j + 2 * hr], acc[4 * j + 2 * hr + 1]);
        }
    }
}

// Each of a tile's nr rows' output row (the scatter, a.y_rows) and scale (QG_SCALE_BF16) into shared memory,
// THREADS threads (the first of the block) a row each in turn: wg_epilogue_smem's and qgemm_rw.cu's.
template <int THREADS>
__device__ __forceinline__ void wg_out_rows(const qg_args &a, int *s_orow, float *s_scale, int m0, int nr) {
    for (int r = threadIdx.x; r < nr; r += THREADS) {
        const int o = a.y_rows ? __ldg(a.y_rows + m0 + r) : m0 + r;
        s_orow[r] = o;
        if (a.epi == QG_SCALE_BF16) s_scale[r] = __ldg(a.scale + o);
    }
}
// wg_epilogue_smem's store loop: rows 0 .. nr - 1 of the fp32 tile (LD floats a row, BN columns: QG_GLU
// the gate half then the up half) leave from column n0 through the epilogue, THREADS threads (the first
// of the block) each taking 4 consecutive columns of a row at a time; s_orow / s_scale hold each row's
// output row and scale. Also qgemm_rw.cu's, whose tile is staged with another stride.
template <int BN, int THREADS>
__device__ __forceinline__ void wg_tile_store(const qg_args &a, const float *tile, int LD, const int *s_orow,
                                              const float *s_scale, int nr, int n0) {
    const bool glu = a.epi == QG_GLU;
    const int C4 = glu ? BN / 8 : BN / 4; // 4-column pieces a row writes (QG_GLU: the gate half)
    for (int i = threadIdx.x; i < nr * C4; i += THREADS) {
        const int r = i / C4, c = 4 * (i - r * C4), col = n0 + c;
        if (col >= a.N) continue;
        const long at = (long)s_orow[r] * a.ldy + col;
        const bool full = col + 4 <= a.N; // else N - col = 2 (N even): one pair
        const float4 v = *(const float4 *)(tile + r * LD + c);
        uint16_t *yb = (uint16_t *)a.y + at;
        float *yf = (float *)a.y + at;
        if (glu) {
            const float4 u = *(const float4 *)(tile + r * LD + BN / 2 + c);
            const uint32_t p0 = wg_pack(qg_glu(v.x, u.x), qg_glu(v.y, u.y));
            const uint32_t p1 = wg_pack(qg_glu(v.z, u.z), qg_glu(v.w, u.w));
            if (full && !((uintptr_t)yb & 7)) *(uint2 *)yb = make_uint2(p0, p1);
            else {
                *(uint32_t *)yb = p0;
                if (full) *(uint32_t *)(yb + 2) = p1;
            }
            continue;
        }
        if (full && a.epi == QG_BF16 && !((uintptr_t)yb & 7)) {
            *(uint2 *)yb = make_uint2(wg_pack(v.x, v.y), wg_pack(v.z, v.w));
        } else if (full && a.epi == QG_F32_RAW && !((uintptr_t)yf & 15)) {
            *(float4 *)yf = v;
        } else if (full && a.epi == QG_SCALE_BF16 && !((uintptr_t)yb & 7)) { // qg_store2_at's values, one store
            const float sc = s_scale[r];
            *(uint2 *)yb = make_uint2(wg_pack(sc * rb(v.x), sc * rb(v.y)), wg_pack(sc * rb(v.z), sc * rb(v.w)));
        } else {
            auto scale = [&] { return s_scale[r]; };
            qg_store2_at(a, at, scale, v.x, v.y);
            if (full) qg_store2_at(a, at + 2, scale, v.z, v.w);
        }
    }
}

// The same output through shared memory (qgemm_wg.cu's bf16-weight path): the accumulators go to a
// row-major fp32 tile (stride NJ*8 + 8 floats: each half-warp's float2 stores hit 32 distinct banks),
// then each thread takes 4 consecutive columns of a row at a time, so a warp writes 512 (fp32) or
// 256 (bf16) contiguous bytes of one row and every store is a full 16- or 8-byte piece, with one
// epilogue switch per piece in a loop that is not unrolled. The unrolled register epilogue above
// (NJ x 2 scattered 4-byte stores, each behind its own switch) was a fifth of the wide tile's stall
// samples, most of them instruction-cache misses (ncu, docs/PERF.md). Arithmetic and rounding per
// element are qg_store2_at's, so the outputs are bitwise the same. The caller has retired every
// MMA and cp.async of the block; `tile` may overlay the pipeline's shared memory.
// ACC: the threads that hold accumulators, the first ACC of the block (qgemm_wsw.cu's producer warpgroup,
// after them, only joins the barriers and the stores).
template <int NJ, int THREADS, int ACC = THREADS>
__device__ __forceinline__ void wg_epilogue_smem(const qg_args &a, const float *acc, float *tile, int r0, int t,
                                                 int m0, int rows, int n0, int BM) {
    constexpr int BN = NJ * 8, LD = BN + 8;
    // Each row's output row (scatter) and scale (QG_SCALE_BF16) once, requested before the tile is
    // staged: read per 4-column piece they were two dependent global loads in the loop, ~a fifth
    // of the grouped down projection's stall samples (ncu, docs/PERF.md). THREADS / 2 = BM rows.
    __shared__ int s_orow[THREADS / 2];
    __shared__ float s_scale[THREADS / 2];
    const int nr = min(rows, BM);
    wg_out_rows<THREADS>(a, s_orow, s_scale, m0, nr);
    __syncthreads(); // every warp is past its last read of the pipeline's shared memory
    if (ACC == THREADS || threadIdx.x < ACC)
#pragma unroll
        for (int hr = 0; hr < 2; hr++)
#pragma unroll
            for (int j = 0; j < NJ; j++)
                *(float2 *)(tile + (r0 + 8 * hr) * LD + 8 * j + 2 * t) = make_float2(acc[4 * j + 2 * hr], acc[4 * j + 2 * hr + 1]);
    __syncthreads();
    wg_tile_store<BN, THREADS>(a, tile, LD, s_orow, s_scale, nr, n0);
}

// Whether a wgmma GEMM launch runs rastered (qg_args.raster: a row tile's column tiles side by side), by
// lily_qg_raster: 1 every call, 2 grouped calls, 3 dense calls.
static inline bool qg_rastered(const qg_args &a) {
    return lily_qg_raster == 1 || (lily_qg_raster == 2 && a.tile_off) || (lily_qg_raster == 3 && !a.tile_off);
}
// The tensor maps of a TMA launch (kernel parameters, __grid_constant__): X (bf16, box 64 k x 128
// rows, 128-byte swizzle) and the code rows of w and w2 (bytes, box 32 x BN or BN/2 rows, row-major
// as the cp.async path lays them out). Made by qgemm_wg.cu's wg_make_tmaps.
struct wg_tmaps {
    CUtensorMap x, w, w2;
};
// qgemm_wsw.cu: the wide tile's call (128 rows, bf16 weights, tensor maps made) in warp-specialised form.
void qgemm_wsw_launch(const qg_args &a, int grid_x, cudaStream_t st, const wg_tmaps &tm);
// qgemm_rw.cu: a wide-tile dense call (128 rows, bf16 weights) with the weights as the MMA's register
// operand, where lily_qg_rw is set and the call fits (X by tensor map, 4-bit codes in groups of 64, K a
// multiple of 256); false (nothing launched) otherwise.
bool qgemm_rw_launch(const qg_args &a, int grid_x, cudaStream_t st);
// qgemm_wsp.cu: a merged-map call (192-row tiles, qg_args.tile_rest; bf16 weights; tensor maps made with
// 64-row X boxes and 128-column code boxes) on the persistent warp-specialised kernel; false when its
// epilogue is not one the kernel has (QG_SCALE_BF16, QG_GLU). max_tiles: the map's bound on row tiles.
bool qgemm_wsp_launch(const qg_args &a, int max_tiles, cudaStream_t st, const wg_tmaps &tm);

// Block set-up after wg_block_rows: a_row[r] = the X row of tile row r (-1 past the tile's rows),
// and the ones columns (128..135) of all 4 k16 steps of nbuf bf16 B buffers `stride` bytes apart
// (written once: nothing else writes them). NT: the block's thread count.
template <int NT>
__device__ __forceinline__ void wg_block_setup(const qg_args &a, int BM, int m0, int rows, int *a_row, char *b0,
                                               int nbuf, int stride) {
    for (int r = threadIdx.x; r < BM; r += NT)
        a_row[r] = r < rows ? (a.x_rows ? __ldg(a.x_rows + m0 + r) : m0 + r) : -1;
    for (int i = threadIdx.x; i < nbuf * 4 * 16; i += NT) {
        const int buf = i >> 6, step = (i >> 4) & 3, part = i & 15; // 16 x 16 bytes = 2 core matrices
        *(uint4 *)(b0 + buf * stride + step * WG_BQ_STEP + 16 * 256 + part * 16) =
            make_uint4(0x3F803F80u, 0x3F803F80u, 0x3F803F80u, 0x3F803F80u);
    }
}
