// attn_flash_wg.cu: the prefill attention of attn_flash.cu for head_dim 256 (every Qwen3.5/3.6
// attention layer) on Hopper's warpgroup MMA (wgmma, sm_90a). Same function, arguments, GQA packing
// (a row is a (token, query head) pair of one KV head's group), causal limits, online softmax and
// rounding points as fa_kernel; only the MMAs and the tiles differ.
//
// Why: fa_kernel's mma.sync reads every K and V fragment from shared memory once per warp of 16
// rows (ldmatrix), so at D = 256 it is bound by shared-memory bandwidth (~145-175 TFLOP/s, 48 % of a
// 64K prompt, docs/PERF.md). A wgmma reads its B operand once per warpgroup of 64 rows.
//
// Block: two warpgroups, 128 rows (16 tokens x 8 heads at GQA 8), key tiles of 64 positions, one
// block an SM (225 KB of shared memory). Per key tile, each warpgroup:
//   S (64 x 64, fp32) = Q K^T: 16 wgmma m64n64k16, Q and K from shared memory;
//   causal mask, online softmax (exp2, 1/sqrt(D) folded in), P rounded to bf16 straight from the S
//   accumulators into the A-operand registers (the accumulator and A-fragment layouts coincide);
//   O (64 x 256, fp32, 128 registers a thread) += P V: 4 wgmma m64n256k16, A from registers.
// Loads: thread 0 requests each key tile's K and V rows by tensor-map copies (TMA, 4 boxes of 64 d x
// 64 keys each, 128-byte swizzle) completing on the tile buffer's mbarrier; K lands in the layout
// the S MMA reads as a K-major B (wg_desc_sw128). V arrives key-major, d contiguous: P V reads it as
// it lies, as an MN-major B (the instruction's transpose flag; fw_desc_mn), the default (lily_fa_wg
// 2). The older form (lily_fa_wg 1) turns each V tile into Vt [d/8][key/8] (canonical no-swizzle
// K-major) by ldmatrix.trans first, 64 ldmatrix.x4 and 256 32-bit stores a tile over the 8 warps:
// 458 against 574 TFLOP/s at 1024 queries over 31K keys. Keys past the block's last needed position
// hold whatever the cache has there (or the next head's rows): their scores are masked to -inf and
// their V rows zeroed (in the staging buffer, or in the transposition). Q goes to shared memory once,
// no-swizzle. Tiles are double-buffered: tile kt+1 is in flight while tile kt computes. Version 1
// (cp.async by every thread) spent ~28 % of its stall samples issuing those copies (ncu,
// docs/PERF.md, 2026-11-30 eighth session).
#include <cuda.h>         // CUtensorMap
#include <cudaTypedefs.h> // PFN_cuTensorMapEncodeTiled

#include "attn_flash.cuh" // the mask, online softmax and output store shared with attn_flash.cu
#include "qgemm_wg.cuh" // TMA, mbarrier, proxy fence and descriptor wrappers

int lily_fa_wg = 0;

#define FW_D 256
#define FW_BM 128 // rows a block: two warpgroups of 64
#define FW_BN 64  // keys a tile
#define FW_THREADS 256

// Shared memory (from a 1024-byte aligned base: the swizzle atom): K [2 buffers][4 boxes][64 keys x
// 128 B], V staging alike, Q (128 rows, no swizzle), Vt, then the two buffers' mbarriers.
constexpr int FW_BOX = FW_BN * 128;       // one box: 64 keys x 64 d (8 KB)
constexpr int FW_KV_BYTES = 4 * FW_BOX;   // a tile of K (or V): 32 KB
constexpr int FW_Q_BYTES = FW_BM * FW_D * 2; // 64 KB
constexpr int FW_OFF_V = 2 * FW_KV_BYTES, FW_OFF_Q = 4 * FW_KV_BYTES, FW_OFF_VT = FW_OFF_Q + FW_Q_BYTES;
constexpr int FW_OFF_BAR = FW_OFF_VT + FW_KV_BYTES;
constexpr int FW_SMEM = FW_OFF_BAR + 16 + 1024; // + slack for the alignment
static_assert(FW_SMEM <= 232448, "one block an SM: 227 KB of dynamic shared memory at most");

// The KV cache's tensor maps (kernel parameter): rows = hkv * max_ctx positions of D bf16, box 64 d x
// 64 positions, 128-byte swizzle.
struct fw_tmaps {
    CUtensorMap k, v;
};

// The 32 accumulator registers of the m64n64 instruction (WG_F4, WG_D128: qgemm_wg.cuh).
#define FW_D32 WG_F4(0), WG_F4(4), WG_F4(8), WG_F4(12), WG_F4(16), WG_F4(20), WG_F4(24), WG_F4(28)
// d (64 x 64 a warpgroup) = (acc ? d : 0) + A (64 x 16) . B (16 x 64), both from shared memory.
static __device__ __forceinline__ void fw_mma_s(float *d, uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "%32, %33, p, 1, 1, 0, 0;\n}\n"
                 : FW_D32
                 : "l"(da), "l"(db), "r"(acc));
}
// d (64 x 256 a warpgroup) += A (64 x 16, bf16 pairs in registers: the m16n8k16 A fragment of each
// warp's 16 rows) . B (16 x 256) from shared memory; TB = 1: B MN-major (imm-trans-b), V read as the
// tensor-map copy laid it out, key rows of 64 d in 128-byte swizzled rows (VM 1); 0: K-major (Vt).
template <int TB> static __device__ __forceinline__ void fw_mma_o(float *d, const uint32_t *a, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " WG_ACC128 ", "
                 "{%128, %129, %130, %131}, %132, p, 1, 1, %134;\n}\n"
                 : WG_D128
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1), "n"(TB));
}
// Descriptor of an MN-major operand in the 128-byte swizzle: atoms of 8 k-rows x 64 mn-elements
// (1024 bytes); LBO = the byte distance between atoms along mn, SBO = between 8-row groups along k.
// (Measured: the other reading, the two swapped, fails every case; docs/PERF.md.)
static __device__ __forceinline__ uint64_t fw_desc_mn(const void *p, uint32_t mn, uint32_t k) {
    return (uint64_t)((wg_smem(p) & 0x3FFFF) >> 4) | ((uint64_t)(mn >> 4) << 16) | ((uint64_t)(k >> 4) << 32) |
           (1ull << 62);
}
// Register fences around the asynchronous MMAs (the compiler may not touch the accumulators
// between issue and wait).
static __device__ __forceinline__ void fw_fence_s(float *d) { asm volatile("wgmma.fence.sync.aligned;\n" : FW_D32 ::"memory"); }
static __device__ __forceinline__ void fw_fence_o(float *d) { asm volatile("wgmma.fence.sync.aligned;\n" : WG_D128 ::"memory"); }
static __device__ __forceinline__ void fw_commit_s(float *d) {
    asm volatile("wgmma.commit_group.sync.aligned;\n" : FW_D32 ::"memory");
}
static __device__ __forceinline__ void fw_wait_s(float *d) {
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" : FW_D32 ::"memory");
}
static __device__ __forceinline__ void fw_done_o(float *d) {
    asm volatile("wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;\n" : WG_D128 ::"memory");
}

// VM: how P V reads V. 0 = transposed into Vt by ldmatrix (K-major B; lily_fa_wg 1); 1 = straight
// from the tensor-map copy as an MN-major B (lily_fa_wg 2, the default).
template <int VM>
__global__ void __launch_bounds__(FW_THREADS, 1)
    fw_kernel(attn_dims d, int T, int pos0, const float *q, const float *qg, uint16_t *o,
              const __grid_constant__ fw_tmaps tm) {
    extern __shared__ __align__(128) char fw_raw[];
    char *sm = (char *)(((uintptr_t)fw_raw + 1023) & ~(uintptr_t)1023);
    char *Ks = sm, *Vs = sm + FW_OFF_V, *Qs = sm + FW_OFF_Q, *Vt = sm + FW_OFF_VT;
    uint64_t *full = (uint64_t *)(sm + FW_OFF_BAR);
    const int group = d.hq / d.hkv, kvh = blockIdx.y, nrows = T * group;
    const int r0 = (gridDim.x - 1 - blockIdx.x) * FW_BM; // most keys first
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2, g = lane >> 2, tq = lane & 3;
    const int t_first = r0 / group, t_last = (min(r0 + FW_BM, nrows) - 1) / group;
    const int kend = pos0 + t_last + 1;   // keys [0, kend) are seen by some row of the block
    const int kfull = pos0 + t_first + 1; // keys [0, kfull) by every row
    const int nkt = (kend + FW_BN - 1) / FW_BN;
    const int row0 = kvh * d.max_ctx; // this KV head's first row in the tensor maps

    // Tile kt's K and V (4 boxes each) into buffer kt & 1, by thread 0.
    auto load_kv = [&](int kt) {
        const int b = kt & 1;
        mb_expect_tx(&full[b], 2 * FW_KV_BYTES);
#pragma unroll
        for (int x = 0; x < 4; x++) {
            tma_g2s_2d(Ks + b * FW_KV_BYTES + x * FW_BOX, &tm.k, x * 64, row0 + kt * FW_BN, &full[b]);
            tma_g2s_2d(Vs + b * FW_KV_BYTES + x * FW_BOX, &tm.v, x * 64, row0 + kt * FW_BN, &full[b]);
        }
    };
    if (tid == 0) {
        mb_init(&full[0], 1), mb_init(&full[1], 1);
        mb_init_fence();
        load_kv(0);
    }
    // Q rows to bf16 (exact: the prologue wrote bf16 values) in core-matrix layout, while tile 0 is
    // in flight.
#pragma unroll 4
    for (int it = 0; it < FW_BM * FW_D / 8 / FW_THREADS; it++) {
        const int i = tid + it * FW_THREADS, rl = i & 7, c = (i >> 3) & 31, r8 = i >> 8, rg = r0 + r8 * 8 + rl;
        float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f), b = a;
        if (rg < nrows) {
            const int t = rg / group, h = kvh * group + rg % group;
            const float *src = q + ((long)t * d.hq + h) * FW_D + c * 8;
            a = *(const float4 *)src, b = *(const float4 *)(src + 4);
        }
        *(uint4 *)(Qs + r8 * 4096 + c * 128 + rl * 16) =
            make_uint4(fa_pack(a.x, a.y), fa_pack(a.z, a.w), fa_pack(b.x, b.y), fa_pack(b.z, b.w));
    }
    wg_fence_proxy(); // Q (st.shared) visible to the MMAs' async proxy, for both warpgroups after:
    __syncthreads();  // (and the mbarriers' init before anyone waits on them)

    // This thread's two rows (g and g + 8 of its warp's 16) and their last visible positions; rows
    // past the chunk's end borrow the last token's limit and are never written.
    const int rw = wg * 64 + (warp & 3) * 16 + g;
    int lim[2];
#pragma unroll
    for (int rr = 0; rr < 2; rr++) lim[rr] = pos0 + min((r0 + rw + 8 * rr) / group, T - 1);
    const float sl2 = rsqrtf((float)FW_D) * 1.4426950408889634f; // 1/sqrt(D) * log2(e)
    float oacc[128], mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 128; i++) oacc[i] = 0.0f;
    // Descriptors (LBO = the next core matrix along k, SBO = along m / n); a k16 step adds 256 bytes.
    const uint64_t dq0 = wg_desc(Qs + wg * 32768, 128, 4096, 0), dv0 = wg_desc(Vt, 128, 1024, 0);

    for (int kt = 0; kt < nkt; kt++) {
        // Buffer (kt + 1) & 1 held tile kt - 1, whose readers all passed the previous iteration's
        // closing barrier.
        if (tid == 0 && kt + 1 < nkt) load_kv(kt + 1);
        mb_wait(&full[kt & 1], (kt >> 1) & 1);
        // S = Q K^T (raw dot products), issued first: the V transposition below runs while the
        // tensor cores compute it.
        float s[FW_BN / 8][4]; // the m64n64 accumulator: s[i][e] as in attn_flash.cuh
        // K: box j / 4 of the tile, k16 step j % 4 of it (32 bytes into the swizzled rows).
        const uint64_t dk0 = wg_desc_sw128(Ks + (kt & 1) * FW_KV_BYTES);
        fw_fence_s(&s[0][0]);
#pragma unroll
        for (int j = 0; j < FW_D / 16; j++)
            fw_mma_s(&s[0][0], dq0 + ((j * 256) >> 4), dk0 + (((j >> 2) * FW_BOX + (j & 3) * 32) >> 4), j);
        fw_commit_s(&s[0][0]);
        if constexpr (VM == 0) {
        // V tile kt -> Vt (Vt's readers, the last tile's P V, passed the previous iteration's closing
        // barrier): the 8 x 8 block (key block kb8, d block nb) transposed into core matrix
        // (nb, kb8). A block's rows in the staging box: key r at r * 128, its 16-byte piece c at
        // (c ^ (r & 7)) * 16 (the 128-byte swizzle). All 8 loads first, then the stores.
        {
            const char *vs = Vs + (kt & 1) * FW_KV_BYTES;
            uint32_t r[8][4];
#pragma unroll
            for (int u = 0; u < 8; u++) {
                const int qd = warp * 8 + u, kb8 = qd & 7, nb = (qd >> 3) * 4 + (lane >> 3), kr = kb8 * 8 + (lane & 7);
                fa_ldsm4t(r[u], vs + (nb >> 3) * FW_BOX + kr * 128 + (((nb & 7) ^ (kr & 7)) << 4));
            }
            // Keys past kend (the last tile only): zero, whatever the cache holds there.
            if (kt * FW_BN + FW_BN > kend) {
#pragma unroll
                for (int u = 0; u < 8; u++) {
                    const int key = kt * FW_BN + ((warp * 8 + u) & 7) * 8 + 2 * tq;
                    const uint32_t keep = (key < kend ? 0xffffu : 0u) | (key + 1 < kend ? 0xffff0000u : 0u);
#pragma unroll
                    for (int m = 0; m < 4; m++) r[u][m] &= keep;
                }
            }
#pragma unroll
            for (int u = 0; u < 8; u++) {
                const int qd = warp * 8 + u, kb8 = qd & 7, nb0 = (qd >> 3) * 4;
#pragma unroll
                for (int m = 0; m < 4; m++) *(uint32_t *)(Vt + (nb0 + m) * 1024 + kb8 * 128 + lane * 4) = r[u][m];
            }
        }
        } else if (kt * FW_BN + FW_BN > kend) {
            // The last tile: V rows of keys past kend zeroed in the staging buffer (whole 128-byte
            // rows: the swizzle permutes only within a row), whatever the cache holds there.
            const int z0 = kend - kt * FW_BN, nz = (FW_BN - z0) * 8;
            char *vs = Vs + (kt & 1) * FW_KV_BYTES;
            for (int i = tid; i < 4 * nz; i += FW_THREADS)
                *(uint4 *)(vs + (i / nz) * FW_BOX + (z0 + (i % nz) / 8) * 128 + (i % 8) * 16) = make_uint4(0, 0, 0, 0);
        }
        wg_fence_proxy(); // Vt (st.shared) visible to the MMAs' async proxy (used after the next barrier)
        fw_wait_s(&s[0][0]);
        // Mask, online softmax, P (attn_flash.cuh).
        float corr[2];
        uint32_t pa[FW_BN / 16][4];
        fa_softmax_tile<FW_BN / 8>(s, kt * FW_BN, kfull, lim, tq, sl2, mrow, lrow, corr, pa);
        // Rows whose maximum did not move have corr 1: a warp where that holds for all its rows skips
        // the 128 multiplications (by 1: the same bits), most tiles once the maxima have settled.
        if (__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {
#pragma unroll
            for (int i = 0; i < 32; i++) {
                oacc[4 * i] *= corr[0], oacc[4 * i + 1] *= corr[0];
                oacc[4 * i + 2] *= corr[1], oacc[4 * i + 3] *= corr[1];
            }
        }
        // O += P V, once every warp's part of Vt (VM 0) or of the zeroed rows (VM > 0) is written.
        __syncthreads();
        fw_fence_o(oacc);
        if constexpr (VM == 0) {
#pragma unroll
            for (int j = 0; j < FW_BN / 16; j++) fw_mma_o<0>(oacc, pa[j], dv0 + ((j * 256) >> 4));
        } else {
            // k16 step j: keys 16j.. of every box, 2048 bytes down the rows.
            const uint64_t dvt = fw_desc_mn(Vs + (kt & 1) * FW_KV_BYTES, FW_BOX, 1024);
#pragma unroll
            for (int j = 0; j < FW_BN / 16; j++) fw_mma_o<1>(oacc, pa[j], dvt + ((j * 2048) >> 4));
        }
        fw_done_o(oacc);
        __syncthreads(); // both warpgroups are done with buffer kt & 1 and with Vt
    }

    fa_store_rows<32>((const float(*)[4])oacc, lrow, r0 + rw, nrows, group, kvh, d, FW_D, tq, qg, o);
}

bool pf_attention_wg_takes(attn_dims d) {
    return lily_fa_wg && !d.kv_f32 && d.d == FW_D && d.hkv > 0 && d.hq % d.hkv == 0 && lily_tmap_encoder();
}

// The tensor map of a cache (K or V) of hkv x max_ctx rows of D bf16.
static bool fw_tmap(CUtensorMap *m, const void *cache, attn_dims d) {
    PFN_cuTensorMapEncodeTiled_v12000 enc = (PFN_cuTensorMapEncodeTiled_v12000)lily_tmap_encoder();
    if (!enc || ((uintptr_t)cache & 15)) return false;
    const cuuint64_t dims[2] = {(cuuint64_t)FW_D, (cuuint64_t)d.hkv * d.max_ctx}, strides[1] = {FW_D * 2};
    const cuuint32_t box[2] = {64, FW_BN}, es[2] = {1, 1};
    return enc(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)cache, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

bool pf_attention_wg(attn_dims d, int T, int pos0, const float *q, const void *kc, const void *vc, const float *qg,
                     uint16_t *o, cudaStream_t st) {
    fw_tmaps tm;
    if (!fw_tmap(&tm.k, kc, d) || !fw_tmap(&tm.v, vc, d)) return false;
    static bool attr = false;
    if (!attr) {
        cudaFuncSetAttribute(fw_kernel<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, FW_SMEM);
        cudaFuncSetAttribute(fw_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, FW_SMEM);
        attr = true;
    }
    const int rows = T * (d.hq / d.hkv);
    dim3 grid((rows + FW_BM - 1) / FW_BM, d.hkv);
    if (lily_fa_wg == 1) fw_kernel<0><<<grid, FW_THREADS, FW_SMEM, st>>>(d, T, pos0, q, qg, o, tm);
    else fw_kernel<1><<<grid, FW_THREADS, FW_SMEM, st>>>(d, T, pos0, q, qg, o, tm);
    return true;
}
