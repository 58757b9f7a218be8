// moe_fused.cu: the routed experts and the shared expert's down projection of a decode step in one
// launch (LILY_CUDA_MOE_FUSED), instead of moe.cu's two (gate/up, then down). Why: in a decode step
// each kernel boundary costs a dependent chain of round trips (wait, read the input, first weight
// bytes, reduce, write), ~5-8 us whatever the bytes (docs/PERF.md, "Where the time goes"); the two
// MoE kernels took ~26 us for 14.8 MB, ~3.4 us of bytes.
//
// Shape: one cluster of MF_CL blocks per selected expert, plus one for the shared expert. Block q of
// a routed cluster:
//   1. redoes the router top-k (as moe_gate_up does) and requests its slice of the expert's gate and
//      up rows (rows q*jb .. +jb, contiguous) into shared memory with two bulk copies (TMA);
//   2. computes silu(gate x) * up x for them on the tensor cores (gemv2's tile, fed from shared
//      memory), and, once its gate rows are consumed, requests its down rows (q*hb .. +hb, all I
//      columns, contiguous) into the same buffer;
//   3. sends its h slice to every block of the cluster (distributed shared memory) and waits at the
//      cluster barrier: then each block holds the expert's whole h;
//   4. multiplies its down rows with h: a partial output, times the routing weight, for rows
//      q*hb .. +hb, written to part[cluster][row].
// The shared expert's cluster has h = silu(sg) * su from the router kernel already: its blocks
// request their down rows before waiting for the previous kernel and do step 4 only.
// The last of the clusters' blocks q to finish (a counter per q) adds the partials of rows
// q*hb .. +hb in cluster order and the residual: the sum's order is fixed, the result deterministic.
// No grid-wide barrier: clusters never wait for each other, so they need not be co-resident.
#include <cooperative_groups.h>

#include "gemv.cuh"
#include "moe.cuh"
#include "qgemm_wg.cuh" // bulk-copy and mbarrier wrappers

namespace cg = cooperative_groups;

LILY_CUDA_MODE_SETTER(moe_fused)
LILY_TRACE_SETTER(moe_fused)

#define MF_CL 8 // blocks per cluster (the portable maximum)
#define MF_MAX_TOPK MAX_TOPK

// The launch's shape, computed on the host: rows per block of the gate/up slice (jb) and of the down
// projection (hb), bytes of the shared buffer that holds gate rows then down rows (r0b) and up rows
// (r1b).
struct mf_shape {
    int jb, hb, ncl;
    int r0b, r1b;
    size_t smem;
};

__device__ __forceinline__ void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_arrive_release() { asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }

// Rows [0, rows) of a matrix whose codes and scale words sit in shared memory at cs / ss (rows of
// cols/32 chunks and cols/group words), times x (split in bsm / xsg): each row's fp32 dot product to
// out[row] * scale. ks warps share a 16-row tile's columns; their sums meet in `part` in a fixed
// order. Called by a group of 8 warps (gi of ng groups: it takes tiles gi, gi + ng, ...); every group
// of the block calls it with the same rows and ng, so the barriers match.
template <int HPG>
__device__ __forceinline__ void mf_rows(int rows, int cols, int group, int ks, const uint4 *cs, const uint32_t *ss,
                                        const uint4 *bsm, const uint4 *zero4, const float *xsg, float (*part)[16],
                                        float *out, float scale, int gi, int ng) {
    const int tid = threadIdx.x % GV_THREADS, lane = tid & 31, warp = tid >> 5;
    gv_seg s = {};
    s.m.rows = rows, s.m.cols = cols, s.m.bits = 4, s.m.group = group, s.m.fmt = DQ_FAST;
    s.ks = ks;
    const int rpt = 16 * (GV_WARPS / ks), nchunk = cols / 32, ng_ = cols / group, nt = (rows + rpt - 1) / rpt;
    for (int i = 0; i * ng < nt; i++) {
        const int t = i * ng + gi;
        if (t < nt) {
            float acc0, acc1;
            gv2_tile<HPG, true>(s, t, bsm, zero4, xsg, lane, warp, acc0, acc1, cs + (long)t * rpt * nchunk,
                                ss + (long)t * rpt * ng_);
            if ((lane & 3) == 0) part[warp][lane >> 2] = acc0, part[warp][(lane >> 2) + 8] = acc1;
        }
        __syncthreads();
        if (t < nt && tid < rpt) {
            const int wr = tid / 16, r = tid % 16, row = t * rpt + tid;
            float v = 0.0f;
            for (int k = 0; k < ks; k++) v += part[wr * ks + k][r];
            if (row < rows) out[row] = v * scale;
        }
        __syncthreads();
    }
}

// NG: groups of 8 warps. With 2, one group multiplies the gate rows while the other multiplies the up
// rows, and the down rows are split between them.
template <int HPG, int NG>
__global__ void __launch_bounds__(GV_THREADS * NG, 1)
    moe_fused_kernel(moe_w w, const float *logits, const float *x, int *ids_out, float *wts_out, dq_mat sd,
                     const float *sg, const float *su, const float *sh_score, const float *res, float *out,
                     float *part, unsigned *cnt, mf_shape sh) {
    trace_mark(0);
    extern __shared__ __align__(128) unsigned char mf_smem[];
    __shared__ int ids[MF_MAX_TOPK];
    __shared__ float wts[MF_MAX_TOPK + 1];
    __shared__ float tpart[NG][GV_WARPS][16];
    __shared__ __align__(8) uint64_t bar[3];
    __shared__ int last;
    cg::cluster_group cluster = cg::this_cluster();
    const int H = w.hidden, I = w.inter, K = w.topk, Is = sd.rows ? sd.cols : 0, G = w.gate.group;
    const int tid = threadIdx.x, q = (int)cluster.block_rank(), c = blockIdx.x / MF_CL, gi = tid / GV_THREADS;
    constexpr int NT = GV_THREADS * NG;
    const bool shc = c == K; // the shared expert's cluster
    const int ncol = shc ? Is : I, maxc = H > ncol ? H : ncol;
    // Shared memory: buffer 0 (gate rows, then down rows), buffer 1 (up rows), x split, h.
    unsigned char *b0 = mf_smem, *b1 = b0 + sh.r0b;
    uint4 *bsm = (uint4 *)(b1 + sh.r1b), *zero4 = bsm + maxc * 3 / 8;
    float *xsg = (float *)(zero4 + 1), *xs = xsg + maxc / (128 / HPG) * 4, *hg = xs + xs_floats(H);
    float *hu = hg + sh.jb, *hf = hu + sh.jb; // gate and up sums of this block's rows; the whole h
    const int j0 = q * sh.jb, jr = max(0, min(sh.jb, I - j0));    // gate/up rows of this block
    const int r0 = q * sh.hb, hr = max(0, min(sh.hb, H - r0));    // down rows of this block
    cluster_arrive_relaxed(); // matched before the first remote write: every block has started
    if (tid == 0) {
        for (int i = 0; i < 3; i++) mb_init(&bar[i], 1);
        mb_init_fence();
    }
    __syncthreads();
    const dq_mat &dm = shc ? sd : w.down;
    const long drb = (long)ncol / 2, dsw = ncol / G; // down row bytes, scale words per row
    auto request_down = [&](int e) {
        if (tid == 0 && hr > 0) {
            const long row = (long)e * H + r0;
            mb_expect_tx(&bar[2], (uint32_t)(hr * drb + hr * dsw * 4));
            bulk_g2s(b0, (const char *)dm.codes + row * drb, (uint32_t)(hr * drb), &bar[2]);
            bulk_g2s(b0 + hr * drb, dm.sb + row * dsw, (uint32_t)(hr * dsw * 4), &bar[2]);
        }
    };
    if (shc) request_down(0); // the shared expert's weights do not depend on the previous kernel
    pdl_wait();
    trace_mark(1);
    if (!shc) {
        if (tid < 32) router_topk(logits, w.n_experts, K, w.norm_topk, ids, wts, true);
        // x into padded shared memory (each thread 8 columns by two 16-byte loads).
        for (int c8 = tid * 8; c8 < H; c8 += NT * 8) {
            const float4 a = *(const float4 *)(x + c8), b = *(const float4 *)(x + c8 + 4);
            float *d = xs + xs_index(c8);
            *(float4 *)d = a, *(float4 *)(d + 4) = b;
        }
        __syncthreads();
        const int e = ids[c];
        const long grb = (long)H / 2, gsw = H / G;
        if (tid == 0 && jr > 0) {
            const long row = (long)e * I + j0;
            mb_expect_tx(&bar[0], (uint32_t)(jr * (grb + gsw * 4)));
            bulk_g2s(b0, (const char *)w.gate.codes + row * grb, (uint32_t)(jr * grb), &bar[0]);
            bulk_g2s(b0 + jr * grb, w.gate.sb + row * gsw, (uint32_t)(jr * gsw * 4), &bar[0]);
            mb_expect_tx(&bar[1], (uint32_t)(jr * (grb + gsw * 4)));
            bulk_g2s(b1, (const char *)w.up.codes + row * grb, (uint32_t)(jr * grb), &bar[1]);
            bulk_g2s(b1 + jr * grb, w.up.sb + row * gsw, (uint32_t)(jr * gsw * 4), &bar[1]);
        }
        if (gi == 0) gv2_split_x<HPG>(H, xs, bsm, zero4, xsg);
        __syncthreads();
        trace_mark(2);
        if (jr > 0 && NG == 2) { // gate rows by group 0, up rows by group 1, at once
            mb_wait(&bar[gi], 0);
            unsigned char *bb = gi ? b1 : b0;
            mf_rows<HPG>(jr, H, G, 2, (const uint4 *)bb, (const uint32_t *)(bb + jr * grb), bsm, zero4, xsg,
                         tpart[gi], gi ? hu : hg, 1.0f, 0, 1);
            request_down(e); // buffer 0 is free: mf_rows ends with a barrier
        } else if (jr > 0) {
            mb_wait(&bar[0], 0);
            mf_rows<HPG>(jr, H, G, 2, (const uint4 *)b0, (const uint32_t *)(b0 + jr * grb), bsm, zero4, xsg,
                         tpart[0], hg, 1.0f, 0, 1);
            request_down(e); // buffer 0 is free: mf_rows ends with a barrier
            mb_wait(&bar[1], 0);
            mf_rows<HPG>(jr, H, G, 2, (const uint4 *)b1, (const uint32_t *)(b1 + jr * grb), bsm, zero4, xsg,
                         tpart[0], hu, 1.0f, 0, 1);
        } else {
            request_down(e);
        }
        // h = silu(gate x) * up x, rounded where the reference stores it; this block's slice goes to
        // every block of the cluster, into hf (padded like xs). Not into xs: a peer may get here while
        // this block still splits x.
        cluster_wait();
        for (int i = tid; i < jr * MF_CL; i += NT) {
            const int j = i % jr, dst = i / jr;
            const float v = rb(rb(silu_f(rb(hg[j]))) * rb(hu[j]));
            *cluster.map_shared_rank(hf + xs_index(j0 + j), dst) = v;
        }
        cluster_arrive_release();
        cluster_wait();
    } else {
        for (int i = tid; i < Is; i += NT) hf[xs_index(i)] = rb(rb(silu_f(sg[i])) * su[i]);
        cluster_wait();
        cluster_arrive_release(); // the routed clusters' barrier sequence, with nothing to send
        cluster_wait();
    }
    if (tid == 0) wts[K] = Is ? rb(sigmoid_f(*sh_score)) : 0.0f;
    if (gi == 0) gv2_split_x<HPG>(ncol, hf, bsm, zero4, xsg);
    __syncthreads();
    if (hr > 0) {
        mb_wait(&bar[2], 0);
        mf_rows<HPG>(hr, ncol, G, 1, (const uint4 *)b0, (const uint32_t *)(b0 + hr * drb), bsm, zero4, xsg, tpart[gi],
                     part + (long)c * H + r0, shc ? wts[K] : wts[c], gi, NG);
    }
    trace_mark(3);
    pdl_trigger();
    // The last block of rows r0.. to finish adds every cluster's partials in cluster order.
    __threadfence();
    __syncthreads();
    if (tid == 0) {
        const unsigned n = gridDim.x / MF_CL, old = atomicAdd(cnt + q, 1u);
        last = old == n - 1;
        if (last) cnt[q] = 0; // every cluster has counted: ready for the next launch
    }
    __syncthreads();
    if (last) {
        __threadfence();
        const int n = gridDim.x / MF_CL;
        for (int r = tid; r < hr; r += NT) {
            float s = 0.0f;
            for (int k = 0; k < n; k++) s += __ldcg(part + (long)k * H + r0 + r);
            out[r0 + r] = rb(res[r0 + r] + rb(s));
        }
    }
    if (blockIdx.x == 0 && tid < K) ids_out[tid] = ids[tid], wts_out[tid] = wts[tid];
    trace_mark(4);
}

int lily_cuda_moe_fused_ng = 2;

static int round16(int v) { return (v + 15) / 16 * 16; }

// The launch's shape, or false when the fused kernel does not take these matrices (moe.cu's pair does).
static bool mf_plan(const moe_w &w, const dq_mat &sd, mf_shape *s) {
    const int H = w.hidden, I = w.inter, G = w.gate.group, Is = sd.rows ? sd.cols : 0;
    auto fits = [&](const dq_mat &m) {
        return m.fmt == DQ_FAST && m.bits == 4 && m.group == G && m.codes && m.sb;
    };
    if (!fits(w.gate) || !fits(w.up) || !fits(w.down) || (Is && !fits(sd))) return false;
    if ((G != 32 && G != 64 && G != 128) || H % 128 || I % 128 || Is % 128 || w.topk > MF_MAX_TOPK ||
        w.topk < 1 || w.n_experts > 512)
        return false;
    s->jb = round16((I + MF_CL - 1) / MF_CL), s->hb = round16((H + MF_CL - 1) / MF_CL);
    s->ncl = w.topk + (Is ? 1 : 0);
    const int ncol = I > Is ? I : Is, maxc = H > ncol ? H : ncol, hpg = 128 / G;
    const long gate = (long)s->jb * (H / 2 + H / G * 4), down = (long)s->hb * (ncol / 2 + ncol / G * 4);
    s->r0b = (int)((gate > down ? gate : down) + 127) / 128 * 128;
    s->r1b = (int)(gate + 127) / 128 * 128;
    s->smem = (size_t)s->r0b + s->r1b + (size_t)maxc * 3 / 8 * 16 + 16 + (size_t)maxc / (128 / hpg) * 16 +
              (size_t)(xs_floats(H) + 2 * s->jb + xs_floats(ncol)) * 4;
    return s->smem <= 200 * 1024;
}

bool moe_fused_takes(const moe_w &w, const dq_mat &sh_down) {
    mf_shape s;
    return mf_plan(w, sh_down, &s);
}

template <int HPG, int NG>
static void mf_launch(const mf_shape &s, cudaStream_t st, moe_w w, const float *logits, const float *x, int *ids,
                      float *wts, dq_mat sd, const float *sg, const float *su, const float *ss, const float *res,
                      float *out, float *part, unsigned *cnt) {
    void (*k)(moe_w, const float *, const float *, int *, float *, dq_mat, const float *, const float *,
              const float *, const float *, float *, float *, unsigned *, mf_shape) = moe_fused_kernel<HPG, NG>;
    cudaFuncSetAttribute((const void *)k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s.smem);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(s.ncl * MF_CL), cfg.blockDim = dim3(GV_THREADS * NG), cfg.dynamicSmemBytes = s.smem;
    cfg.stream = st;
    cudaLaunchAttribute at[2];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = MF_CL, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
    at[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at, cfg.numAttrs = lily_cuda_pdl ? 2 : 1;
    cudaLaunchKernelEx(&cfg, k, w, logits, x, ids, wts, sd, sg, su, ss, res, out, part, cnt, s);
}

void moe_fused(const moe_w &w, const float *router_logits, const float *x, int *ids, float *wts, dq_mat sh_down,
               const float *sg, const float *su, const float *sh_score, const float *res, float *out,
               float *part, unsigned *cnt, cudaStream_t st) {
    mf_shape s;
    if (!mf_plan(w, sh_down, &s)) return; // callers ask moe_fused_takes first
    const int hpg = 128 / w.gate.group;
#define MF_ARGS s, st, w, router_logits, x, ids, wts, sh_down, sg, su, sh_score, res, out, part, cnt
    if (lily_cuda_moe_fused_ng == 2) {
        if (hpg == 1) mf_launch<1, 2>(MF_ARGS);
        else if (hpg == 2) mf_launch<2, 2>(MF_ARGS);
        else mf_launch<4, 2>(MF_ARGS);
    } else {
        if (hpg == 1) mf_launch<1, 1>(MF_ARGS);
        else if (hpg == 2) mf_launch<2, 1>(MF_ARGS);
        else mf_launch<4, 1>(MF_ARGS);
    }
#undef MF_ARGS
}
