// attn.cu: decode attention of one query token over the bf16 KV cache (spec §2.3 steps 7-8).
//
// GQA packing: a block serves all query heads that share one KV head, so every K/V row is read once
// for the whole group (gqa_pack = 0: one query head per block, the ablation). Split-KV
// (flash-decoding): nsplit blocks per KV head each take a contiguous range of positions, keep an
// online softmax per warp (warps interleave positions), merge their warps, and write (max, sum,
// unnormalised output) partials; attn_combine merges the splits and applies the sigmoid output gate.
// A lane holds DPL = D/32 (rounded up to 1, 2, 4 or 8) consecutive dims, so at D = 256 a warp reads
// a 512-byte K or V row in one coalesced load; other D are masked per lane (test fixtures). KV
// elements are bf16, or fp32 in LILY_CUDA_F32ACT mode (template KVF).
#include <type_traits>

#include "cuda_common.cuh"

LILY_CUDA_MODE_SETTER(attn)

__device__ __forceinline__ float kv_load(const uint16_t *p) { return lily_bf16_to_f32(*p); }
__device__ __forceinline__ float kv_load(const float *p) { return *p; }

#define AT_THREADS 256
#define AT_WARPS 8
#define AT_U 4 // positions per warp pass on the D = 256 bf16 path (loads in flight)

template <int NH, int DPL, bool KVF, bool FULL, bool MULTI>
__global__ void __launch_bounds__(AT_THREADS)
    attn_kernel(attn_dims d, const float *q, const void *kc_, const void *vc_, float *part,
                const int *posp, int nsplit, int nh) {
    typedef typename std::conditional<KVF, float, uint16_t>::type kv_t;
    const kv_t *kc = (const kv_t *)kc_, *vc = (const kv_t *)vc_;
    pdl_wait_early();
    __shared__ float qs[NH][DPL * 32];
    __shared__ float wm[AT_WARPS][NH], wl[AT_WARPS][NH];
    __shared__ float osum[NH][DPL * 32];
    const int D = d.d, group = d.hq / d.hkv;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, split = blockIdx.y;
    const int h0 = blockIdx.x * nh;      // first query head of this block
    const int kvh = h0 / group;
    const int len = *posp + 1;
    const int chunk = (len + nsplit - 1) / nsplit;
    const int t0 = split * chunk, t1 = min(len, t0 + chunk);
    const float scale = rsqrtf((float)D);
    for (int i = threadIdx.x; i < NH * D; i += AT_THREADS) {
        int hh = i / D;
        qs[hh][i % D] = hh < nh ? q[(long)(h0 + hh) * D + i % D] * scale : 0.0f;
        osum[hh][i % D] = 0.0f;
    }
    __syncthreads();
    float m[NH], l[NH], acc[NH][DPL];
#pragma unroll
    for (int hh = 0; hh < NH; hh++) {
        m[hh] = -INFINITY, l[hh] = 0.0f;
#pragma unroll
        for (int j = 0; j < DPL; j++) acc[hh][j] = 0.0f;
    }
    const kv_t *kb = kc + (long)kvh * d.max_ctx * D + lane * DPL;
    const kv_t *vb = vc + (long)kvh * d.max_ctx * D + lane * DPL;
    // Dims this lane holds: DPL when D == 32 * DPL (FULL, every real model), fewer for odd D.
    const int nd = FULL ? DPL : min(DPL, max(0, D - lane * DPL));
    if constexpr (MULTI) { // DPL == 8 && !KVF && FULL (launch_full)
        // The real model's path (D = 256, bf16 cache): each warp takes AT_U positions per pass (stride
        // AT_WARPS, as before), issuing all their 16-byte K and V loads before any arithmetic, so a
        // warp has AT_U KB in flight instead of 1 KB (one position's K and V): the loop was bound by
        // DRAM latency, not bandwidth. The AT_U scores' warp reductions are independent (ILP), and
        // the online softmax takes them in one update (max over the AT_U, then one rescale).
        for (int tb = t0 + warp; tb < t1; tb += AT_WARPS * AT_U) {
            uint4 kr[AT_U], vr[AT_U];
#pragma unroll
            for (int u = 0; u < AT_U; u++) {
                const int t = tb + u * AT_WARPS;
                if (t < t1) {
                    kr[u] = *(const uint4 *)(kb + (long)t * D), vr[u] = *(const uint4 *)(vb + (long)t * D);
                } else {
                    kr[u] = make_uint4(0, 0, 0, 0), vr[u] = make_uint4(0, 0, 0, 0);
                }
            }
#pragma unroll
            for (int hh = 0; hh < NH; hh++) {
                float sc[AT_U];
#pragma unroll
                for (int u = 0; u < AT_U; u++) {
                    const uint32_t kw[4] = {kr[u].x, kr[u].y, kr[u].z, kr[u].w};
                    float a = 0.0f;
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        a += qs[hh][lane * 8 + 2 * j] * bf16_elem(kw[j], 0) +
                             qs[hh][lane * 8 + 2 * j + 1] * bf16_elem(kw[j], 1);
                    sc[u] = a;
                }
#pragma unroll
                for (int u = 0; u < AT_U; u++) sc[u] = warp_sum(sc[u]);
                float mn = m[hh];
#pragma unroll
                for (int u = 0; u < AT_U; u++) {
                    if (tb + u * AT_WARPS >= t1) sc[u] = -INFINITY; // exp -> 0: no weight, no V
                    mn = fmaxf(mn, sc[u]);
                }
                const float corr = __expf(m[hh] - mn);
                float pr[AT_U], ps = 0.0f;
#pragma unroll
                for (int u = 0; u < AT_U; u++) pr[u] = __expf(sc[u] - mn), ps += pr[u];
                l[hh] = l[hh] * corr + ps;
                m[hh] = mn;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    float lo = acc[hh][2 * j] * corr, hi = acc[hh][2 * j + 1] * corr;
#pragma unroll
                    for (int u = 0; u < AT_U; u++) {
                        const uint32_t vw = j == 0 ? vr[u].x : j == 1 ? vr[u].y : j == 2 ? vr[u].z : vr[u].w;
                        lo += pr[u] * bf16_elem(vw, 0), hi += pr[u] * bf16_elem(vw, 1);
                    }
                    acc[hh][2 * j] = lo, acc[hh][2 * j + 1] = hi;
                }
            }
        }
    } else {
        for (int t = t0 + warp; t < t1; t += AT_WARPS) {
            float kf[DPL], vf[DPL];
            // DPL bf16 = DPL*2 bytes per lane: 16-byte loads for DPL = 8.
            if (DPL == 8 && !KVF && nd == 8) {
                uint4 kr = *(const uint4 *)(kb + (long)t * D), vr = *(const uint4 *)(vb + (long)t * D);
                uint32_t kw[4] = {kr.x, kr.y, kr.z, kr.w}, vw[4] = {vr.x, vr.y, vr.z, vr.w};
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    kf[2 * j] = bf16_elem(kw[j], 0), kf[2 * j + 1] = bf16_elem(kw[j], 1);
                    vf[2 * j] = bf16_elem(vw[j], 0), vf[2 * j + 1] = bf16_elem(vw[j], 1);
                }
            } else {
#pragma unroll
                for (int j = 0; j < DPL; j++) {
                    kf[j] = j < nd ? kv_load(kb + (long)t * D + j) : 0.0f;
                    vf[j] = j < nd ? kv_load(vb + (long)t * D + j) : 0.0f;
                }
            }
#pragma unroll
            for (int hh = 0; hh < NH; hh++) {
                float s = 0.0f;
#pragma unroll
                for (int j = 0; j < DPL; j++) s += (j < nd ? qs[hh][lane * DPL + j] : 0.0f) * kf[j];
                s = warp_sum(s);
                float mn = fmaxf(m[hh], s);
                float corr = __expf(m[hh] - mn), pr = __expf(s - mn);
                l[hh] = l[hh] * corr + pr;
                m[hh] = mn;
#pragma unroll
                for (int j = 0; j < DPL; j++) acc[hh][j] = acc[hh][j] * corr + pr * vf[j];
            }
        }
    }
    pdl_trigger();
    // Merge the warps of the block (fixed order: deterministic).
    if (lane == 0)
#pragma unroll
        for (int hh = 0; hh < NH; hh++) wm[warp][hh] = m[hh], wl[warp][hh] = l[hh];
    __syncthreads();
    float M[NH];
#pragma unroll
    for (int hh = 0; hh < NH; hh++) {
        M[hh] = -INFINITY;
        for (int w = 0; w < AT_WARPS; w++) M[hh] = fmaxf(M[hh], wm[w][hh]);
    }
    for (int w = 0; w < AT_WARPS; w++) {
        if (warp == w)
#pragma unroll
            for (int hh = 0; hh < NH; hh++) {
                float f = m[hh] == -INFINITY ? 0.0f : __expf(m[hh] - M[hh]);
#pragma unroll
                for (int j = 0; j < DPL; j++) osum[hh][lane * DPL + j] += f * acc[hh][j];
            }
        __syncthreads();
    }
    for (int i = threadIdx.x; i < nh * (D + 2); i += AT_THREADS) {
        int hh = i / (D + 2), j = i % (D + 2);
        float v;
        if (j == 0) {
            v = M[0];
            for (int x = 1; x < NH; x++) if (x == hh) v = M[x];
        } else if (j == 1) {
            float L = 0.0f;
            float Mh = M[0];
            for (int x = 1; x < NH; x++) if (x == hh) Mh = M[x];
            for (int w = 0; w < AT_WARPS; w++)
                if (wm[w][hh] != -INFINITY) L += wl[w][hh] * __expf(wm[w][hh] - Mh);
            v = L;
        } else {
            v = osum[hh][j - 2];
        }
        part[((long)(h0 + hh) * nsplit + split) * (D + 2) + j] = v;
    }
}

__global__ void attn_combine(attn_dims d, const float *part, const float *qg, float *o, int nsplit) {
    const int h = blockIdx.x, D = d.d;
    pdl_wait();
    pdl_trigger();
    const float *ph = part + (long)h * nsplit * (D + 2);
    float M = -INFINITY;
    for (int s = 0; s < nsplit; s++) M = fmaxf(M, ph[s * (D + 2)]);
    float L = 0.0f;
    for (int s = 0; s < nsplit; s++) {
        float ms = ph[s * (D + 2)];
        if (ms != -INFINITY) L += ph[s * (D + 2) + 1] * __expf(ms - M);
    }
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        float acc = 0.0f;
        for (int s = 0; s < nsplit; s++) {
            float ms = ph[s * (D + 2)];
            if (ms != -INFINITY) acc += ph[s * (D + 2) + 2 + j] * __expf(ms - M);
        }
        float gate = qg[(long)h * 2 * D + D + j];
        o[(long)h * D + j] = rb(rb(acc / L) * sigmoid_f(gate));
    }
}

// attn_combine with its loads issued in parallel (LILY_CUDA_ATTN_COMB=1; 2026-11-30:
// attention + combine at 4K 24.1 -> 18.4 us, decode +1 %). attn_combine walks the splits three
// times with one dependent load after another in each pass (max, then the sum, then per output
// dim), ~3 x nsplit L2 round trips in a row. Here the split maxima and sums come in one round trip
// (thread s loads split s), their weights e^(m_s - M) go to shared memory, and each output dim's
// nsplit loads are issued in batches of 8. The arithmetic, and its order, are attn_combine's: the
// same results bitwise (the kernel test compares both). Takes nsplit <= 256 (the launch falls back
// to attn_combine above that).
//
// ALL (the default, LILY_CUDA_ATTN_COMB=2; nsplit <= AC_ALL, D <= the block's threads; -1.7 us a combine in ncu,
// +0.9 % decode at 4K, +3 % at 32K, thirty-ninth session):
// thread j requests all nsplit partials of its output dim and its gate together with the split maxima and
// sums, one round trip in all. The batches above wait for one another (a batch's sum is ahead of the next
// batch's loads in every thread's instruction stream), and the gate's load follows them: nsplit / 8 + 2
// round trips in a row (SASS, thirty-eighth session). The sum is taken in the same order: the same bits.
#define AC_B 8
#define AC_ALL 32
template <bool ALL = false>
__global__ void attn_combine_par(attn_dims d, const float *part, const float *qg, float *o, int nsplit) {
    const int h = blockIdx.x, D = d.d, tid = threadIdx.x;
    __shared__ float ws[256], ls[256], red[8];
    __shared__ float sL;
    pdl_wait();
    pdl_trigger();
    const float *ph = part + (long)h * nsplit * (D + 2);
    float ms = -INFINITY, l = 0.0f;
    if (tid < nsplit) ms = ph[tid * (D + 2)], l = ph[tid * (D + 2) + 1];
    constexpr int NA = ALL ? AC_ALL : 1; // the partials a thread holds
    float va[NA], gate_a = 0.0f;
    if (ALL) {
#pragma unroll
        for (int u = 0; u < NA; u++) va[u] = tid < D && u < nsplit ? ph[u * (D + 2) + 2 + tid] : 0.0f;
        if (tid < D) gate_a = qg[(long)h * 2 * D + D + tid];
    }
    const float wmax = warp_max(ms);
    if ((tid & 31) == 0) red[tid >> 5] = wmax;
    __syncthreads();
    float M = red[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); w++) M = fmaxf(M, red[w]);
    // -1: an empty split, skipped as attn_combine skips it (a weight is never negative)
    if (tid < nsplit) ws[tid] = ms != -INFINITY ? __expf(ms - M) : -1.0f, ls[tid] = l;
    __syncthreads();
    if (tid == 0) { // attn_combine's order: split by split
        float L = 0.0f;
        for (int s = 0; s < nsplit; s++)
            if (ws[s] != -1.0f) L += ls[s] * ws[s];
        sL = L;
    }
    __syncthreads();
    const float L = sL;
    if (ALL) {
        if (tid < D) {
            float acc = 0.0f;
#pragma unroll
            for (int u = 0; u < NA; u++)
                if (u < nsplit && ws[u] != -1.0f) acc += va[u] * ws[u];
            o[(long)h * D + tid] = rb(rb(acc / L) * sigmoid_f(gate_a));
        }
        return;
    }
    for (int j = tid; j < D; j += blockDim.x) {
        float acc = 0.0f;
        for (int s0 = 0; s0 < nsplit; s0 += AC_B) {
            float v[AC_B];
#pragma unroll
            for (int u = 0; u < AC_B; u++) v[u] = s0 + u < nsplit ? ph[(s0 + u) * (D + 2) + 2 + j] : 0.0f;
#pragma unroll
            for (int u = 0; u < AC_B; u++)
                if (s0 + u < nsplit && ws[s0 + u] != -1.0f) acc += v[u] * ws[s0 + u];
        }
        float gate = qg[(long)h * 2 * D + D + j];
        o[(long)h * D + j] = rb(rb(acc / L) * sigmoid_f(gate));
    }
}

int lily_cuda_attn_multi = 1;
int lily_cuda_attn_comb = 2;

size_t attn_part_floats(attn_dims d, int nsplit) { return (size_t)d.hq * nsplit * (d.d + 2); }

template <int NH, int DPL, bool KVF>
static void launch_full(attn_dims d, dim3 grid, const float *q, const void *kc, const void *vc, float *part,
                        const int *pos, int nsplit, int nh, cudaStream_t st) {
    if (d.d == 32 * DPL && DPL == 8 && !KVF && lily_cuda_attn_multi)
        launch_k(attn_kernel<NH, DPL, KVF, true, DPL == 8 && !KVF>, grid, AT_THREADS, 0, st, d, q, kc, vc, part, pos,
                 nsplit, nh);
    else if (d.d == 32 * DPL)
        launch_k(attn_kernel<NH, DPL, KVF, true, false>, grid, AT_THREADS, 0, st, d, q, kc, vc, part, pos, nsplit, nh);
    else
        launch_k(attn_kernel<NH, DPL, KVF, false, false>, grid, AT_THREADS, 0, st, d, q, kc, vc, part, pos, nsplit, nh);
}

template <int NH, bool KVF>
static void launch_nh(attn_dims d, const float *q, const void *kc, const void *vc, float *part,
                      const int *pos, int nsplit, int nh, cudaStream_t st) {
    dim3 grid(d.hq / nh, nsplit);
    int dpl = (d.d + 31) / 32;
    if (dpl > 4) launch_full<NH, 8, KVF>(d, grid, q, kc, vc, part, pos, nsplit, nh, st);
    else if (dpl > 2) launch_full<NH, 4, KVF>(d, grid, q, kc, vc, part, pos, nsplit, nh, st);
    else if (dpl > 1) launch_full<NH, 2, KVF>(d, grid, q, kc, vc, part, pos, nsplit, nh, st);
    else launch_full<NH, 1, KVF>(d, grid, q, kc, vc, part, pos, nsplit, nh, st);
}

template <int NH>
static void launch_kv(attn_dims d, const float *q, const void *kc, const void *vc, float *part,
                      const int *pos, int nsplit, int nh, cudaStream_t st) {
    if (d.kv_f32) launch_nh<NH, true>(d, q, kc, vc, part, pos, nsplit, nh, st);
    else launch_nh<NH, false>(d, q, kc, vc, part, pos, nsplit, nh, st);
}

// The split-KV combine of the partials (parallel loads where it takes nsplit).
static void attn_combine_launch(attn_dims d, const float *part, const float *qg, float *o, int nsplit, cudaStream_t st) {
    if (lily_cuda_attn_comb == 2 && nsplit <= AC_ALL && d.d <= 256)
        launch_k(attn_combine_par<true>, d.hq, 256, 0, st, d, part, qg, o, nsplit);
    else if (lily_cuda_attn_comb && nsplit <= 256) launch_k(attn_combine_par<false>, d.hq, 256, 0, st, d, part, qg, o, nsplit);
    else launch_k(attn_combine, d.hq, 256, 0, st, d, part, qg, o, nsplit);
}

void attn_decode(attn_dims d, const float *q, const void *kc, const void *vc,
                 const float *qg, float *part, float *o, const int *pos, int nsplit, int gqa_pack,
                 cudaStream_t st) {
    int group = d.hq / d.hkv;
    if (gqa_pack && attn_tc_takes(d) && attn_tc_partials(d, q, kc, vc, part, pos, nsplit, st)) {
        // the partials came from the tensor cores (attn_tc.cu)
    } else if (!gqa_pack || group > 8)
        launch_kv<1>(d, q, kc, vc, part, pos, nsplit, 1, st);
    else if (group <= 4)
        launch_kv<4>(d, q, kc, vc, part, pos, nsplit, group, st);
    else
        launch_kv<8>(d, q, kc, vc, part, pos, nsplit, group, st);
    attn_combine_launch(d, part, qg, o, nsplit, st);
}

bool attn_decode_qk(attn_dims d, const attn_qk_in &qk, void *kc, void *vc, float *part, float *o, const int *pos,
                    int nsplit, cudaStream_t st) {
    if (!attn_tc_partials(d, nullptr, kc, vc, part, pos, nsplit, st, &qk)) return false;
    attn_combine_launch(d, part, qk.qg, o, nsplit, st);
    return true;
}
