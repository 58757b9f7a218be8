// cuda_common.cuh: what every CUDA file of the backend shares: error checks, the on-GPU form of a
// quantised matrix, bf16 rounding, warp/block reductions, and the launch wrappers' declarations
// (kernels.cuh). Device code only; nothing here is visible to C callers.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "common.h"
#include "quant.h"
}

// Run-time CUDA failures inside the backend: print where, keep the message for lily_err_msg().
#define CU_TRY(call)                                                                            \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess)                                                                  \
            return lily_err_set(e_ == cudaErrorMemoryAllocation ? LILY_ENOMEM : LILY_EBACKEND,  \
                                "cuda: %s at %s:%d (%s)", cudaGetErrorString(e_), __FILE__,     \
                                __LINE__, #call);                                               \
    } while (0)

// A weight matrix on the GPU. Quantised (fmt DQ_FAST or DQ_GENERIC): codes keep the MLX bit stream
// (rows of cols*bits/8 bytes); scale and bias are repacked at upload into one 32-bit word per group
// (bf16 scale in the low half, bf16 bias in the high half): one load per group. DQ_FAST matrices
// (4 or 8 bits, rows a multiple of 16 bytes) go through the vectorised kernels; DQ_GENERIC (other
// bit widths or odd row lengths) and DQ_DENSE (f32/f16/bf16 elements as stored, dtype dt) through
// plain per-element loops: the tiny test fixtures use those, the real 4-bit model never does.
enum { DQ_FAST = 0, DQ_GENERIC = 1, DQ_DENSE = 2 };
struct dq_mat {
    const uint4 *codes;
    const uint32_t *sb;
    int rows, cols, bits, group;
    int fmt, dt;
};

LILY_HD long dq_row_bytes(const dq_mat &m) {
    return m.fmt == DQ_DENSE ? (long)m.cols * lily_dtype_size(m.dt) : (long)m.cols * m.bits / 8;
}

// Element (r, c) of any format (slow path).
__device__ __forceinline__ float dq_get(const dq_mat &m, long r, int c) {
    if (m.fmt == DQ_DENSE) return lily_load_f32(m.codes, m.dt, r * m.cols + c);
    const uint8_t *row = (const uint8_t *)m.codes + r * dq_row_bytes(m);
    uint32_t sb = m.sb[r * (m.cols / m.group) + c / m.group];
    return __uint_as_float(sb << 16) * (float)lily_q_code(row, c, m.bits) + __uint_as_float(sb & 0xffff0000u);
}

// Precision switch. By default activations are rounded to bf16 where the HF reference stores them
// (spec §7) and the KV cache is bf16. With LILY_CUDA_F32ACT=1 (or lily_cuda_set_opt F32ACT) rb() is
// the identity and the KV cache is fp32, so the GPU computes the CPU backend's all-fp32 function and
// the two can be compared to ~1e-5 (docs/PERF.md). c_pdl_early: pdl_wait_early() below. Constant memory
// is per translation unit, so each .cu file of the decode step defines its own setter with
// LILY_CUDA_MODE_SETTER(file) and forward_cuda.cu calls them all when a mode changes.
static __constant__ int c_f32act;
static __constant__ int c_pdl_early;
#define LILY_CUDA_MODE_SETTER(tu)                                                   \
    void tu##_set_modes(int f32act, int pdl_early) {                                \
        cudaMemcpyToSymbol(c_f32act, &f32act, sizeof f32act);                       \
        cudaMemcpyToSymbol(c_pdl_early, &pdl_early, sizeof pdl_early);              \
    }

// Round to bf16 and back: the storage points of the HF reference (spec §7).
__device__ __forceinline__ float rb(float f) {
    return c_f32act ? f : __uint_as_float(((uint32_t)lily_f32_to_bf16(f)) << 16);
}

// silu's division is __fdividef (a reciprocal and a multiply, ~2 ulp, like __expf itself): the IEEE
// division inlined ~40 instructions with a slow path at every use, ~10 % of gemv2's code (the gated
// prologue calls it 16 times a thread), and the decode kernels wait on instruction fetch (ncu,
// docs/PERF.md). For x < -87 the denominator passes 2^126 and the result is 0 (the limit).
// sigmoid keeps the IEEE division: it is rare (a gate per head), and its bf16-rounded result scales
// a whole head (GDN's beta), so a value moved across a rounding edge shows (the GDN kernel test's
// state tolerance caught one on seed 1796044562).
// Element e (0: the low half, 1: the high half) of a pair of bf16 values packed in 32 bits, as fp32 (exact).
__device__ __forceinline__ float bf16_elem(uint32_t pair, int e) {
    return __uint_as_float(e ? pair & 0xffff0000u : pair << 16);
}
// The decode MoE's output as a fixed-point sum (LILY_CUDA_MOE_ACC, moe_fused.cu): each block adds its
// partial outputs into acc[row] (int64 in units of 2^-32, two's complement in 64-bit words) with integer
// atomics, which no grid barrier has to wait for, and integer addition is exact, so the result does not
// depend on the order the blocks arrive in (the same bits every run). The next kernel that reads the
// residual stream folds it in as moe_fused's reduction did: rb(res + rb(sum)). A partial whose magnitude
// reaches 2^23 (or that is not finite) sets acc[H], the flag, instead: 129 such partials stay inside
// int64, and the folded values become NaN, which the step's NaN check reports.
#define MF_ACC_MAX 8388608.0f // 2^23
__device__ __forceinline__ void mf_acc_add(unsigned long long *acc, int row, int H, float v) {
    if (fabsf(v) < MF_ACC_MAX) atomicAdd(acc + row, (unsigned long long)__float2ll_rn(v * 4294967296.0f));
    else acc[H] = 1ull;
}
// The sum is converted whatever the flag, and the flag only selects: written as a branch, the compiler put the
// sum's load inside it, behind the flag's, so a GV_RESID epilogue waited for two L2 round trips (SASS,
// thirty-eighth session).
__device__ __forceinline__ float mf_fold(float res, unsigned long long sum, unsigned long long flag) {
    const float v = rb(res + rb(__ll2float_rn((long long)sum) * 2.3283064365386963e-10f));
    return flag ? __int_as_float(0x7fffffff) : v;
}

__device__ __forceinline__ float silu_f(float x) { return __fdividef(x, 1.0f + __expf(-x)); }
__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + __expf(-x)); }

// The gated RMSNorm (spec §2.1b) of one head of hd values held 8 to a lane by gl = hd / 8 adjacent lanes
// (a power of two, aligned): v = rb(rb(g * rb(v * rms)) * silu(z)). One definition for gemv's register
// prologue (PRO_GATED) and gdn_step's out_proj (LILY_CUDA_GDN_OUT), which must give the same bits. Every
// lane of the warp calls it (the shuffles); lanes past a head pass zeros.
__device__ __forceinline__ void gated_norm8(float *v, const float *g, const float *z, int gl, int hd, float eps) {
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; k++) ss += v[k] * v[k];
    for (int o = 1; o < gl; o <<= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float r = rsqrtf(ss / hd + eps);
#pragma unroll
    for (int k = 0; k < 8; k++) v[k] = rb(rb(g[k] * rb(v[k] * r)) * silu_f(z[k]));
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024). `red` is 32 floats of
// shared memory; every thread gets the total. Safe to call repeatedly (barrier before reuse).
__device__ __forceinline__ float block_sum(float v, float *red) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    float t = lane < nw ? red[lane] : 0.0f;
    return warp_sum(t);
}

// A barrier of n blocks, all resident (the caller checks occupancy on the host). bar: count, generation.
// gen is read before arriving, so it cannot have moved on; the last block to arrive resets the count and
// then advances gen, so the count is zero again afterwards, ready for the next launch. Every thread's
// earlier global writes are visible to the other blocks' threads after it (the block barrier, then
// thread 0's fences). moe_fused's grid barrier (n = the grid), gdn_step's head barrier (n = its splits).
__device__ __forceinline__ void blocks_sync(unsigned *bar, unsigned n) {
    __syncthreads();
    if (threadIdx.x == 0) {
        volatile unsigned *gen = bar + 1;
        const unsigned g = *gen;
        __threadfence();
        if (atomicAdd(bar, 1u) == n - 1) {
            bar[0] = 0;
            __threadfence();
            atomicAdd(bar + 1, 1u);
        } else {
            while (*gen == g) __nanosleep(32);
        }
        __threadfence();
    }
    __syncthreads();
}

// Activation vectors in shared memory: every run of 32 values is followed by 4 floats of padding,
// so lanes reading 16-byte pieces of consecutive 32- or 16-value chunks hit distinct banks.
__device__ __forceinline__ int xs_index(int c) { return (c >> 5) * 36 + (c & 31); }
LILY_HD int xs_floats(int cols) { return (cols + 31) / 32 * 36; }

// Dot of one 16-byte code chunk with its activations. The chunk holds V = 128/bits codes of one group.
// Each code q is turned into the float 1 + q/2^bits by placing its bits in the mantissa of 1.0 (two
// integer ops, no conversion), so dot = sum(x) + sum(q x)/2^bits; the caller recovers sum(q x).
template <int BITS>
__device__ __forceinline__ float chunk_dot(uint4 c, const float *x) {
    const uint32_t w[4] = {c.x, c.y, c.z, c.w};
    float acc = 0.0f;
    constexpr int PER = 32 / BITS;               // codes per word
    constexpr int SH = 23 - BITS;                // where the code must land
    constexpr uint32_t MASK = ((1u << BITS) - 1u) << SH;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const float4 *xv = (const float4 *)(x + k * PER);
        float xf[PER];
#pragma unroll
        for (int j = 0; j < PER / 4; j++) {
            float4 t = xv[j];
            xf[4 * j] = t.x; xf[4 * j + 1] = t.y; xf[4 * j + 2] = t.z; xf[4 * j + 3] = t.w;
        }
#pragma unroll
        for (int i = 0; i < PER; i++) {
            constexpr int dummy = 0; (void)dummy;
            int s = SH - BITS * i;
            uint32_t b = s >= 0 ? (w[k] << s) : (w[k] >> (-s));
            acc = fmaf(__uint_as_float((b & MASK) | 0x3F800000u), xf[i], acc);
        }
    }
    return acc;
}

// Contribution of one chunk: s * sum(q x) + b * sum(x), with sum(q x) = 2^bits (dot - sum(x)).
__device__ __forceinline__ float chunk_apply(float dot, float xsum, uint32_t sb, int bits) {
    float s = __uint_as_float(sb << 16), b = __uint_as_float(sb & 0xffff0000u);
    float qx = (dot - xsum) * (float)(1 << bits);
    return fmaf(s, qx, b * xsum);
}

// Programmatic dependent launch (Hopper). Every kernel of a step is launched with
// launch_k(), which (when lily_cuda_pdl is set, the default; ablation "pdl") lets it start while
// the previous kernel is still running. Each kernel may touch only weights (read-only, never
// written during a step) before pdl_wait(); after pdl_wait() the previous kernel has completed and
// its writes are visible, and by induction so have all earlier ones. pdl_trigger() (after a
// block's main loop) lets the next kernel's blocks be scheduled; both are no-ops when the kernel was
// launched without the attribute. The weights a kernel will read first are prefetched into L2
// before pdl_wait(), so their DRAM latency overlaps the previous kernel's tail.
extern int lily_cuda_pdl;
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
// Early trigger (LILY_CUDA_PDL_EARLY=1 or 2): a decode kernel lets the next one launch as soon as
// its own wait is over, instead of after its main loop. The next kernel's blocks then prefetch their
// weights during the whole of this kernel's run rather than its tail; their pdl_wait() still waits
// for this kernel's completion, so only the overlap changes. Called right after pdl_wait(): a
// trigger before it let a chain of kernels launch ahead, each prefetching (measured 12 % slower,
// docs/PERF.md); after it, at most one kernel runs ahead. No deadlock: dependents launch only once
// every block of this grid has started.
__device__ __forceinline__ void pdl_wait_early() {
    pdl_wait();
    if (c_pdl_early) pdl_trigger();
}
__device__ __forceinline__ void prefetch_l2(const void *p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }
// Prefetch bytes [0, n) of p into L2 with the block's threads, one 128-byte line each.
__device__ __forceinline__ void prefetch_block(const void *p, long n) {
    for (long off = (long)threadIdx.x * 128; off < n; off += (long)blockDim.x * 128) prefetch_l2((const char *)p + off);
}

template <typename... KArgs, typename... Args>
static void launch_k(void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t st, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at, cfg.numAttrs = lily_cuda_pdl ? 1 : 0;
    cudaLaunchKernelEx(&cfg, k, ((KArgs)args)...);
}

// Stamps for `lily-gpu-test chain` in a TRACE=1 build (dev only; compiled out otherwise): thread 0 of
// each block writes its SM's clock64 at point p (0..4; 5: an extra point a kernel may mark between 1
// and 2; 8..15: more such points, reported from the wait) to g_trace[block * LILY_TRACE_SLOTS + p],
// and %globaltimer at points 0 and 3 to slots 6 and 7 (for spans across blocks), while g_trace is set (per
// translation unit, like the modes: tu##_set_trace).
#define LILY_TRACE_SLOTS 16
#ifdef LILY_TRACE
static __device__ unsigned long long *g_trace;
__device__ __forceinline__ void trace_mark(int point) {
    if (g_trace && threadIdx.x == 0) {
        unsigned long long *t = g_trace + (blockIdx.x + (long)gridDim.x * blockIdx.y) * LILY_TRACE_SLOTS;
        t[point] = clock64();
        if (point == 0 || point == 3) {
            unsigned long long g;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
            t[point == 0 ? 6 : 7] = g;
        }
    }
}
#define LILY_TRACE_SETTER(tu) \
    void tu##_set_trace(unsigned long long *p) { cudaMemcpyToSymbol(g_trace, &p, sizeof p); }
#else
__device__ __forceinline__ void trace_mark(int) {}
#define LILY_TRACE_SETTER(tu)
#endif

#include "kernels.cuh"

// Partial NeoX RoPE (spec §2.3), shared by the decode and prefill q/k kernels so both give the same
// bits: dim i < rope_dim at position p rotates with factors rounded to bf16 as the reference stores
// them, and the rotated element reads its partner from the normed head y (half = rope_dim / 2).
__device__ __forceinline__ void rope_factors(const attn_dims &d, int p, int i, float &c, float &s) {
    const int half = d.rope_dim / 2, fi = i < half ? i : i - half;
    const float inv = 1.0f / powf(d.theta, (float)(2 * fi) / (float)d.rope_dim), ang = (float)p * inv;
    c = rb(cosf(ang)), s = rb(sinf(ang));
}
__device__ __forceinline__ float rope_rotate(const float *y, int i, int half, float c, float s) {
    return i < half ? rb(rb(y[i] * c) - rb(y[i + half] * s)) : rb(rb(y[i] * c) + rb(y[i - half] * s));
}
