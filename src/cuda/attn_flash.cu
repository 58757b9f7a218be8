// attn_flash.cu: causal attention of a prefill chunk, flash-tiled on the tensor cores: the same
// function as pf_attention (attn_prefill.cu) for T queries over the bf16 KV cache [0, pos0 + t],
// with the gate, written for long contexts where the one-warp-per-(token, head) walk is too slow.
//
// GQA packing: the rows of a block tile are (token, query head) pairs of ONE KV head's group, row
// index r = t * group + hh, so every K/V tile loaded into shared memory serves all query heads of
// the group (8 for the 35B model: a 64-row tile is 8 tokens x 8 heads). Grid (row tiles, KV heads),
// the tiles with the most keys first. 4 warps, 16 rows each; key tiles of FA_BN = 32 positions.
//
// Per key tile: S = Q K^T with mma.sync m16n8k16 (bf16 in, fp32 accumulate; Q from shared memory as
// bf16, K via ldmatrix), causal mask only on tiles that cross some row's last position (tiles past
// the block's last row's position are never visited), online softmax in fp32 (exp2 with the
// 1/sqrt(D) scale folded in), P rounded to bf16 and reused from the S accumulators as the A operand
// of O += P V (V via ldmatrix.trans). The row sum l is taken over the bf16-rounded P, so the weights
// that multiply V sum to exactly l. K/V tiles are double-buffered with cp.async; keys past the last
// needed position are zero-filled, never read. Shared rows are padded by 16 bytes (row stride D + 8
// bf16) so ldmatrix's 8 row addresses fall in distinct banks for any D % 16 == 0.
//
// Rounding points (the same as pf_attention): q is the prologue's fp32 holding bf16 values (exact in
// bf16), scores fp32, output bf16(rb(o / l) * sigmoid(gate)). Added: P in bf16 for the MMA (pf_attention
// multiplies V by fp32 p). Shapes not taken (fp32 KV cache, D % 16 != 0, D > 256) go to pf_attention.
#include "attn_flash.cuh"

#define FA_WARPS 4
#define FA_BM (16 * FA_WARPS) // rows (token, head) per block
#define FA_BN 32              // key positions per tile

static __device__ __forceinline__ void fa_cp16(void *dst, const void *src, bool ok) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(fa_smem(dst)), "l"(src),
                 "r"(ok ? 16 : 0));
}
static __device__ __forceinline__ void fa_commit() { asm volatile("cp.async.commit_group;\n" ::); }
static __device__ __forceinline__ void fa_wait1() { asm volatile("cp.async.wait_group 1;\n" ::); }
static __device__ __forceinline__ void fa_ldsm4(uint32_t *r, const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(fa_smem(p)));
}
static __device__ __forceinline__ void fa_mma(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

static size_t fa_smem_bytes(int D) { return (size_t)(FA_BM + 4 * FA_BN) * (D + 8) * sizeof(uint16_t); }

// DMAX: compile-time bound of D (sizes the register accumulators); d.d is any multiple of 16 up to it.
template <int DMAX>
__global__ void __launch_bounds__(FA_WARPS * 32, 2)
    fa_kernel(attn_dims d, int T, int pos0, const float *q, const uint16_t *kc, const uint16_t *vc,
              const float *qg, uint16_t *o) {
    extern __shared__ __align__(16) uint16_t fa_sm[];
    const int D = d.d, LD = D + 8, group = d.hq / d.hkv, kvh = blockIdx.y;
    const int nrows = T * group, r0 = (gridDim.x - 1 - blockIdx.x) * FA_BM; // most keys first
    uint16_t *Qs = fa_sm, *Ks = Qs + FA_BM * LD, *Vs = Ks + 2 * FA_BN * LD;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tq = lane & 3;
    const int mi = lane >> 3, mr = lane & 7; // ldmatrix: which 8x8 matrix this lane addresses, its row
    const int t_first = r0 / group, t_last = (min(r0 + FA_BM, nrows) - 1) / group;
    const int kend = pos0 + t_last + 1;  // keys [0, kend) are seen by some row of the block
    const int kfull = pos0 + t_first + 1; // keys [0, kfull) are seen by every row
    const int nkt = (kend + FA_BN - 1) / FA_BN;
    const uint16_t *kb = kc + (long)kvh * d.max_ctx * D, *vb = vc + (long)kvh * d.max_ctx * D;

    auto load_kv = [&](int buf, int kt) {
        const int cpr = D / 8; // 16-byte chunks per row
        uint16_t *kd = Ks + buf * FA_BN * LD, *vd = Vs + buf * FA_BN * LD;
        for (int i = tid; i < FA_BN * cpr; i += FA_WARPS * 32) {
            int r = i / cpr, c = i - r * cpr, p = kt * FA_BN + r;
            bool ok = p < kend;
            long off = ok ? (long)p * D + c * 8 : 0;
            fa_cp16(kd + r * LD + c * 8, kb + off, ok);
            fa_cp16(vd + r * LD + c * 8, vb + off, ok);
        }
    };
    load_kv(0, 0);
    fa_commit();
    // Q rows to bf16 (exact: the prologue wrote bf16 values), while the first K/V tile is in flight.
    for (int i = tid; i < FA_BM * (D / 4); i += FA_WARPS * 32) {
        int r = i / (D / 4), c = (i - r * (D / 4)) * 4, rg = r0 + r;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (rg < nrows) {
            int t = rg / group, h = kvh * group + rg % group;
            v = *(const float4 *)(q + ((long)t * d.hq + h) * D + c);
        }
        *(uint2 *)(Qs + r * LD + c) = make_uint2(fa_pack(v.x, v.y), fa_pack(v.z, v.w));
    }

    // This thread's two rows (g and g + 8 of its warp's 16) and their last visible positions; rows
    // past the chunk's end borrow the last token's limit and are never written.
    int lim[2];
#pragma unroll
    for (int rr = 0; rr < 2; rr++) lim[rr] = pos0 + min((r0 + warp * 16 + g + 8 * rr) / group, T - 1);
    const float sl2 = rsqrtf((float)D) * 1.4426950408889634f; // 1/sqrt(D) * log2(e)
    float oacc[DMAX / 8][4], mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < DMAX / 8; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) oacc[i][e] = 0.0f;
    const uint16_t *qw = Qs + (warp * 16 + (mi & 1) * 8 + mr) * LD + (mi >> 1) * 8;

    for (int kt = 0; kt < nkt; kt++) {
        if (kt + 1 < nkt) load_kv((kt + 1) & 1, kt + 1);
        fa_commit();
        fa_wait1();
        __syncthreads();
        const uint16_t *Kt = Ks + (kt & 1) * FA_BN * LD, *Vt = Vs + (kt & 1) * FA_BN * LD;

        // S (16 rows x FA_BN keys per warp) = Q K^T, raw dot products.
        float s[FA_BN / 8][4];
#pragma unroll
        for (int i = 0; i < FA_BN / 8; i++)
#pragma unroll
            for (int e = 0; e < 4; e++) s[i][e] = 0.0f;
        const uint16_t *kw = Kt + ((mi >> 1) * 8 + mr) * LD + (mi & 1) * 8;
#pragma unroll
        for (int j = 0; j < DMAX / 16; j++) {
            if (j * 16 >= D) break;
            uint32_t a[4];
            fa_ldsm4(a, qw + j * 16);
#pragma unroll
            for (int i = 0; i < FA_BN / 16; i++) {
                uint32_t b[4];
                fa_ldsm4(b, kw + i * 16 * LD + j * 16);
                fa_mma(s[2 * i], a, b[0], b[1]);
                fa_mma(s[2 * i + 1], a, b[2], b[3]);
            }
        }
        // Mask, online softmax, P (attn_flash.cuh).
        float corr[2];
        uint32_t pa[FA_BN / 16][4];
        fa_softmax_tile<FA_BN / 8>(s, kt * FA_BN, kfull, lim, tq, sl2, mrow, lrow, corr, pa);
#pragma unroll
        for (int i = 0; i < DMAX / 8; i++) {
            oacc[i][0] *= corr[0], oacc[i][1] *= corr[0];
            oacc[i][2] *= corr[1], oacc[i][3] *= corr[1];
        }
        // O += P V: V fragments by ldmatrix.trans (V is stored key-major, the MMA wants it k-major).
        const uint16_t *vw = Vt + ((mi & 1) * 8 + mr) * LD + (mi >> 1) * 8;
#pragma unroll
        for (int i = 0; i < DMAX / 16; i++) {
            if (i * 16 >= D) break;
#pragma unroll
            for (int j = 0; j < FA_BN / 16; j++) {
                uint32_t b[4];
                fa_ldsm4t(b, vw + j * 16 * LD + i * 16);
                fa_mma(oacc[2 * i], pa[j], b[0], b[1]);
                fa_mma(oacc[2 * i + 1], pa[j], b[2], b[3]);
            }
        }
        __syncthreads(); // the next iteration's load overwrites this buffer
    }

    fa_store_rows<DMAX / 8>(oacc, lrow, r0 + warp * 16 + g, nrows, group, kvh, d, D, tq, qg, o);
}

template <int DMAX>
static void fa_launch(attn_dims d, int T, int pos0, const float *q, const void *kc, const void *vc,
                      const float *qg, uint16_t *o, cudaStream_t st) {
    static bool attr = false;
    if (!attr) {
        cudaFuncSetAttribute(fa_kernel<DMAX>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fa_smem_bytes(DMAX));
        attr = true;
    }
    const int rows = T * (d.hq / d.hkv);
    dim3 grid((rows + FA_BM - 1) / FA_BM, d.hkv);
    fa_kernel<DMAX><<<grid, FA_WARPS * 32, fa_smem_bytes(d.d), st>>>(d, T, pos0, q, (const uint16_t *)kc,
                                                                      (const uint16_t *)vc, qg, o);
}

void pf_attention_flash(attn_dims d, int T, int pos0, const float *q, const void *kc, const void *vc,
                        const float *qg, uint16_t *o, cudaStream_t st) {
    if (T <= 0) return;
    if (d.kv_f32 || d.d % 16 || d.d > 256 || d.hkv <= 0 || d.hq % d.hkv) {
        pf_attention(d, T, pos0, q, kc, vc, qg, o, st);
        return;
    }
    if (pf_attention_wg_takes(d) && pf_attention_wg(d, T, pos0, q, kc, vc, qg, o, st)) return;
    if (d.d <= 64) fa_launch<64>(d, T, pos0, q, kc, vc, qg, o, st);
    else if (d.d <= 128) fa_launch<128>(d, T, pos0, q, kc, vc, qg, o, st);
    else fa_launch<256>(d, T, pos0, q, kc, vc, qg, o, st);
}
