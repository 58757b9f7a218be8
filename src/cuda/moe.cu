// moe.cu: the routed-expert half of a MoE layer at batch 1, in two launches.
//   moe_gate_up: every block redoes the router softmax + top-k from the 256 logits (a few hundred
//     flops, cheaper than a launch), then computes silu(gate x) * up x for its slice of the selected
//     experts' rows; gate and up rows of one output sit in the same lanes, the product never leaves
//     registers.
//   moe_down: each output row sums the 8 experts' down rows (times their routing weights) and the
//     shared expert's down row (times its sigmoid gate) in one fp32 accumulator, adds the residual.
// Only the selected experts' weights are read.
#include "moe.cuh"

LILY_CUDA_MODE_SETTER(moe)
LILY_TRACE_SETTER(moe)

#define MOE_THREADS 256
#define MOE_WARPS 8
#define PPW 2  // output rows per warp
#define MUNR 2 // chunks per lane per batch (4 measured no faster: docs/PERF.md)

// x (cols) into padded shared memory plus its 16-value sums.
__device__ void load_x(const float *x, int cols, float *xs, float *xsum) {
    for (int c = threadIdx.x; c < cols; c += blockDim.x) xs[xs_index(c)] = x[c];
    __syncthreads();
    for (int i = threadIdx.x; i < cols / 16; i += blockDim.x) {
        float t = 0.0f;
        for (int j = 0; j < 16; j++) t += xs[xs_index(i * 16 + j)];
        xsum[i] = t;
    }
}

__device__ __forceinline__ float chunk_contrib(uint4 code, uint32_t sb, const float *xs,
                                               const float *xsum, int c, int bits) {
    if (bits == 4)
        return chunk_apply(chunk_dot<4>(code, xs + xs_index(c * 32)), xsum[2 * c] + xsum[2 * c + 1],
                           sb, 4);
    return chunk_apply(chunk_dot<8>(code, xs + xs_index(c * 16)), xsum[c], sb, 8);
}

__global__ void __launch_bounds__(MOE_THREADS)
    moe_gate_up_kernel(moe_w w, const float *logits, const float *x, float *h, int *ids_out,
                       float *wts_out, int pf_down, int lat) {
    trace_mark(0);
    extern __shared__ float smem[];
    __shared__ int ids[MAX_TOPK];
    __shared__ float wts[MAX_TOPK];
    const int H = w.hidden, I = w.inter, bits = w.gate.bits;
    float *xs = smem, *xsum = smem + xs_floats(H);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    pdl_wait_early();
    trace_mark(1);
    if (warp == 0) router_topk(logits, w.n_experts, w.topk, w.norm_topk, ids, wts, lat != 0);
    load_x(x, H, xs, xsum);
    __syncthreads();
    trace_mark(2);
    if (blockIdx.x == 0 && threadIdx.x < w.topk) {
        ids_out[threadIdx.x] = ids[threadIdx.x];
        wts_out[threadIdx.x] = wts[threadIdx.x];
    }
    // The selected experts' down matrices are known now, a launch before moe_down needs them: each
    // block starts its share of them towards L2 (LILY_CUDA_MOE_PF).
    if (pf_down) {
        const long per = (long)w.hidden * dq_row_bytes(w.down), tot = (long)w.topk * per;
        const long pers = (long)w.hidden * (w.inter / w.down.group) * 4, tots = (long)w.topk * pers;
        const long c = (tot + gridDim.x - 1) / gridDim.x, o1 = min(tot, (blockIdx.x + 1) * c);
        for (long o = blockIdx.x * c + threadIdx.x * 128; o < o1; o += MOE_THREADS * 128)
            prefetch_l2((const char *)w.down.codes + ids[o / per] * per + o % per);
        const long cs = (tots + gridDim.x - 1) / gridDim.x, s1 = min(tots, (blockIdx.x + 1) * cs);
        for (long o = blockIdx.x * cs + threadIdx.x * 128; o < s1; o += MOE_THREADS * 128)
            prefetch_l2((const char *)w.down.sb + ids[o / pers] * pers + o % pers);
    }
    const int nchunk = H * bits / 128, cpg = w.gate.group * bits / 128, ng = H / w.gate.group;
    const int p0 = (blockIdx.x * MOE_WARPS + warp) * PPW; // first (expert slot, row) pair
    long row[PPW];
    bool live[PPW];
#pragma unroll
    for (int p = 0; p < PPW; p++) {
        int pi = p0 + p;
        live[p] = pi < w.topk * I;
        row[p] = live[p] ? (long)ids[pi / I] * I + pi % I : 0;
    }
    float ag[PPW] = {}, au[PPW] = {};
    for (int c0 = lane; c0 < 2 * nchunk; c0 += 32 * MUNR) {
        uint4 code[PPW][MUNR];
        uint32_t sb[PPW][MUNR];
#pragma unroll
        for (int p = 0; p < PPW; p++)
#pragma unroll
            for (int u = 0; u < MUNR; u++) {
                int c = c0 + 32 * u;
                bool ok = live[p] && c < 2 * nchunk;
                const dq_mat &m = c < nchunk ? w.gate : w.up;
                int cc = c < nchunk ? c : c - nchunk;
                code[p][u] = ok ? __ldg(m.codes + row[p] * nchunk + cc) : make_uint4(0, 0, 0, 0);
                sb[p][u] = ok ? __ldg(m.sb + row[p] * ng + cc / cpg) : 0u;
            }
#pragma unroll
        for (int u = 0; u < MUNR; u++) {
            int c = c0 + 32 * u;
            if (c >= 2 * nchunk) break;
            int cc = c < nchunk ? c : c - nchunk;
#pragma unroll
            for (int p = 0; p < PPW; p++) {
                float t = chunk_contrib(code[p][u], sb[p][u], xs, xsum, cc, bits);
                if (c < nchunk) ag[p] += t; else au[p] += t;
            }
        }
    }
    trace_mark(3);
    pdl_trigger();
#pragma unroll
    for (int p = 0; p < PPW; p++) {
        float g = warp_sum(ag[p]), u = warp_sum(au[p]);
        if (lane == 0 && live[p]) h[p0 + p] = rb(rb(silu_f(rb(g))) * rb(u));
    }
    trace_mark(4);
}

// KS: warps that split one row pair's chunks (1 = a warp per row pair). With KS > 1 a block owns
// MOE_WARPS * PPW / KS rows, so the grid is KS times larger and KS times more loads are in flight
// (2048 rows at KS = 1 are 128 blocks: one per SM, ncu in docs/PERF.md); the KS partial sums of a
// row meet in shared memory and are added in a fixed order.
// EARLY (LILY_CUDA_MOE_LAT): the expert ids are read first and each warp's first batch of weight
// loads goes out before the inputs are staged and summed, and the residual is read then too, so
// those round trips overlap the weights' instead of preceding them. Same arithmetic, same order.
template <int KS, bool EARLY>
__global__ void __launch_bounds__(MOE_THREADS)
    moe_down_kernel(moe_w w, const float *h, const int *ids_in, const float *wts_in, dq_mat sd,
                    const float *sg, const float *su, const float *sh_score, const float *res,
                    float *out) {
    trace_mark(0);
    constexpr int RG = MOE_WARPS / KS; // row groups (of PPW rows) per block
    extern __shared__ float smem[];
    __shared__ int ids[MAX_TOPK];
    __shared__ float wts[MAX_TOPK + 1];
    const int H = w.hidden, I = w.inter, K = w.topk, Is = sd.rows ? sd.cols : 0;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    // Shared memory: K routed inputs of I values, then the shared expert's input of Is values.
    float *xs = smem, *xsum = smem + K * xs_floats(I) + xs_floats(Is);
    // The shared expert's down rows of this block are known before routing: prefetch them.
    if (Is) {
        const int rr0 = blockIdx.x * RG * PPW, nr = min(RG * PPW, H - rr0);
        prefetch_block((const char *)sd.codes + (long)rr0 * dq_row_bytes(sd), (long)nr * dq_row_bytes(sd));
    }
    const int bits = w.down.bits;
    const int ncr = I * bits / 128, ncs = Is * sd.bits / 128 * (Is > 0);
    const int total = K * ncr + ncs;
    const int kpart = warp / RG, r0 = (blockIdx.x * RG + warp % RG) * PPW;
    constexpr int STRIDE = 32 * MUNR * KS;
    // Part kpart takes the 32-chunk units kpart, kpart + KS, ... of every batch of MUNR * KS units.
    uint4 code[PPW][MUNR];
    uint32_t sb[PPW][MUNR];
    auto load = [&](int c0) {
#pragma unroll
        for (int p = 0; p < PPW; p++)
#pragma unroll
            for (int u = 0; u < MUNR; u++) {
                int c = c0 + 32 * KS * u, r = r0 + p;
                bool ok = c < total && r < H;
                code[p][u] = make_uint4(0, 0, 0, 0);
                sb[p][u] = 0u;
                if (!ok) continue;
                if (c < K * ncr) {
                    int k = c / ncr, cc = c % ncr;
                    long row = (long)ids[k] * H + r;
                    code[p][u] = __ldg(w.down.codes + row * ncr + cc);
                    sb[p][u] = __ldg(w.down.sb + row * (I / w.down.group) + cc / (w.down.group * bits / 128));
                } else {
                    int cc = c - K * ncr;
                    code[p][u] = __ldg(sd.codes + (long)r * ncs + cc);
                    sb[p][u] = __ldg(sd.sb + (long)r * (Is / sd.group) + cc / (sd.group * sd.bits / 128));
                }
            }
    };
    pdl_wait_early();
    trace_mark(1);
    if (threadIdx.x < K) ids[threadIdx.x] = ids_in[threadIdx.x], wts[threadIdx.x] = wts_in[threadIdx.x];
    if (threadIdx.x == 0) wts[K] = Is ? rb(sigmoid_f(*sh_score)) : 0.0f;
    int c0 = lane + 32 * kpart;
    float rres = 0.0f; // EARLY: lane p < PPW holds res[r0 + p]
    if (EARLY) {
        __syncthreads(); // ids
        if (c0 < total) load(c0);
        if (lane < PPW && r0 + lane < H) rres = res[r0 + lane];
    }
    for (int k = 0; k < K; k++)
        for (int c = threadIdx.x; c < I; c += blockDim.x) xs[k * xs_floats(I) + xs_index(c)] = h[k * I + c];
    for (int c = threadIdx.x; c < Is; c += blockDim.x)
        xs[K * xs_floats(I) + xs_index(c)] = rb(rb(silu_f(sg[c])) * su[c]);
    __syncthreads();
    for (int i = threadIdx.x; i < (K * I + Is) / 16; i += blockDim.x) {
        int k = i / (I / 16), c = (i % (I / 16)) * 16;
        const float *xp = k < K ? xs + k * xs_floats(I) : xs + K * xs_floats(I);
        if (k >= K) c = (i - K * (I / 16)) * 16;
        float t = 0.0f;
        for (int j = 0; j < 16; j++) t += xp[xs_index(c + j)];
        xsum[i] = t;
    }
    __syncthreads();
    trace_mark(2);
    float acc[PPW] = {};
    auto fold = [&](int c0) {
#pragma unroll
        for (int u = 0; u < MUNR; u++) {
            int c = c0 + 32 * KS * u;
            if (c >= total) break;
            int k, cc, b;
            const float *xp, *sp;
            if (c < K * ncr) {
                k = c / ncr, cc = c % ncr, b = bits;
                xp = xs + k * xs_floats(I), sp = xsum + k * (I / 16);
            } else {
                k = K, cc = c - K * ncr, b = sd.bits;
                xp = xs + K * xs_floats(I), sp = xsum + K * (I / 16);
            }
#pragma unroll
            for (int p = 0; p < PPW; p++) acc[p] += wts[k] * chunk_contrib(code[p][u], sb[p][u], xp, sp, cc, b);
        }
    };
    if (EARLY) // the first batch is in flight already; each batch requests the next one's
        for (; c0 < total; c0 += STRIDE) {
            fold(c0);
            if (c0 + STRIDE < total) load(c0 + STRIDE);
        }
    else
        for (; c0 < total; c0 += STRIDE) {
            load(c0);
            fold(c0);
        }
    trace_mark(3);
    pdl_trigger();
    if constexpr (KS == 1) {
#pragma unroll
        for (int p = 0; p < PPW; p++) {
            float s = warp_sum(acc[p]);
            const float rv = __shfl_sync(0xffffffffu, rres, p);
            int r = r0 + p;
            if (lane == 0 && r < H) out[r] = rb((EARLY ? rv : res[r]) + rb(s));
        }
        trace_mark(4);
    } else { // split K: partial sums meet in shared memory
        __shared__ float part[KS][RG][PPW];
#pragma unroll
        for (int p = 0; p < PPW; p++) {
            float s = warp_sum(acc[p]);
            if (lane == 0) part[kpart][warp % RG][p] = s;
        }
        __syncthreads();
        if (kpart == 0 && lane < PPW) {
            float s = 0.0f;
#pragma unroll
            for (int q = 0; q < KS; q++) s += part[q][warp][lane];
            int r = r0 + lane;
            if (r < H) out[r] = rb((EARLY ? rres : res[r]) + rb(s));
        }
        trace_mark(4);
    }
}

// Set per step by forward_cuda.cu from LILY_CUDA_OPT_MOE_KS (env LILY_CUDA_MOE_KS; default 4: +3.1 %
// decode at 4K, +2.0 % at 32K against 1, docs/PERF.md); the kernel tests set it directly.
int lily_cuda_moe_ks = 4;
int lily_cuda_moe_pf = 0;  // from LILY_CUDA_OPT_MOE_PF
int lily_cuda_moe_lat = 1; // from LILY_CUDA_OPT_MOE_LAT

// Generic forms (dense or odd-shaped experts: the test fixtures), one warp per output row, plain
// per-element loops, the same rounding points as the fast kernels.
__global__ void moe_gate_up_generic(moe_w w, const float *logits, const float *x, float *h, int *ids_out,
                                    float *wts_out) {
    __shared__ int ids[MAX_TOPK];
    __shared__ float wts[MAX_TOPK];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, I = w.inter, H = w.hidden;
    pdl_wait();
    pdl_trigger();
    if (warp == 0) router_topk(logits, w.n_experts, w.topk, w.norm_topk, ids, wts, false);
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x < w.topk) ids_out[threadIdx.x] = ids[threadIdx.x], wts_out[threadIdx.x] = wts[threadIdx.x];
    const int p = blockIdx.x * MOE_WARPS + warp;
    if (p >= w.topk * I) return;
    const long row = (long)ids[p / I] * I + p % I;
    float g = 0.0f, u = 0.0f;
    for (int c = lane; c < H; c += 32) g += dq_get(w.gate, row, c) * x[c], u += dq_get(w.up, row, c) * x[c];
    g = warp_sum(g), u = warp_sum(u);
    if (lane == 0) h[p] = rb(rb(silu_f(rb(g))) * rb(u));
}

__global__ void moe_down_generic(moe_w w, const float *h, const int *ids, const float *wts, dq_mat sd,
                                 const float *sg, const float *su, const float *sh_score, const float *res,
                                 float *out) {
    const int lane = threadIdx.x & 31, r = blockIdx.x * MOE_WARPS + (threadIdx.x >> 5);
    const int H = w.hidden, I = w.inter, Is = sd.rows ? sd.cols : 0;
    pdl_wait();
    pdl_trigger();
    if (r >= H) return;
    float acc = 0.0f;
    for (int k = 0; k < w.topk; k++) {
        float t = 0.0f;
        for (int c = lane; c < I; c += 32) t += dq_get(w.down, (long)ids[k] * H + r, c) * h[k * I + c];
        acc += wts[k] * t;
    }
    if (Is) {
        float t = 0.0f;
        for (int c = lane; c < Is; c += 32) t += dq_get(sd, r, c) * rb(rb(silu_f(sg[c])) * su[c]);
        acc += rb(sigmoid_f(*sh_score)) * t;
    }
    acc = warp_sum(acc);
    if (lane == 0) out[r] = rb(res[r] + rb(acc));
}

static bool moe_fast(const moe_w &w, const dq_mat &sd) {
    return w.gate.fmt == DQ_FAST && w.up.fmt == DQ_FAST && w.down.fmt == DQ_FAST &&
           (!sd.rows || sd.fmt == DQ_FAST) && w.hidden % 16 == 0 && w.inter % 16 == 0 &&
           (!sd.rows || sd.cols % 16 == 0);
}

static void set_smem(const void *fn, size_t smem) {
    if (smem > 48 * 1024) cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
}

void moe_gate_up(const moe_w &w, const float *router_logits, const float *x, float *h, int *ids,
                 float *wts, cudaStream_t st) {
    if (!moe_fast(w, dq_mat{})) {
        int grid = (w.topk * w.inter + MOE_WARPS - 1) / MOE_WARPS;
        launch_k(moe_gate_up_generic, grid, MOE_THREADS, 0, st, w, router_logits, x, h, ids, wts);
        return;
    }
    size_t smem = (size_t)(xs_floats(w.hidden) + w.hidden / 16) * sizeof(float);
    set_smem((const void *)moe_gate_up_kernel, smem);
    int pairs = w.topk * w.inter, grid = (pairs + MOE_WARPS * PPW - 1) / (MOE_WARPS * PPW);
    launch_k(moe_gate_up_kernel, grid, MOE_THREADS, smem, st, w, router_logits, x, h, ids, wts,
             lily_cuda_moe_pf, lily_cuda_moe_lat);
}

void moe_down(const moe_w &w, const float *h, const int *ids, const float *wts, dq_mat sh_down,
              const float *sg, const float *su, const float *sh_score, const float *res, float *out,
              cudaStream_t st) {
    if (!moe_fast(w, sh_down)) {
        launch_k(moe_down_generic, (w.hidden + MOE_WARPS - 1) / MOE_WARPS, MOE_THREADS, 0, st, w, h, ids,
                 wts, sh_down, sg, su, sh_score, res, out);
        return;
    }
    int Is = sh_down.rows ? sh_down.cols : 0;
    size_t smem = (size_t)(w.topk * xs_floats(w.inter) + xs_floats(Is) + (w.topk * w.inter + Is) / 16) *
                  sizeof(float);
    const int ks = lily_cuda_moe_ks == 2 || lily_cuda_moe_ks == 4 ? lily_cuda_moe_ks : 1;
    const int rows = MOE_WARPS * PPW / ks, grid = (w.hidden + rows - 1) / rows;
    const bool early = lily_cuda_moe_lat != 0;
    void (*k)(moe_w, const float *, const int *, const float *, dq_mat, const float *, const float *,
              const float *, const float *, float *) =
        ks == 4 ? (early ? moe_down_kernel<4, true> : moe_down_kernel<4, false>)
        : ks == 2 ? (early ? moe_down_kernel<2, true> : moe_down_kernel<2, false>)
                  : (early ? moe_down_kernel<1, true> : moe_down_kernel<1, false>);
    set_smem((const void *)k, smem);
    launch_k(k, grid, MOE_THREADS, smem, st, w, h, ids, wts, sh_down, sg, su, sh_score, res, out);
}
