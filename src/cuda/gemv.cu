// gemv.cu: quantised matrix x one activation row, the workhorse of batch-1 decode.
//
// One launch serves up to GV_MAX_SEG matrices that read the same input (q/k/v projections, router +
// shared expert, ...). A block prepares x once in shared memory (plain, RMS-normed, or the GDN gated
// norm, so the norm costs no launch of its own), then walks row tiles grid-stride. Within a tile a
// group of `lpr` lanes owns RPW rows: each lane issues RPW x UNR independent 16-byte code loads before
// using any of them, accumulates in fp32, and the group reduces with shuffles.
#include "cuda_common.cuh"

LILY_CUDA_F32ACT_SETTER(gemv)

#define GV_THREADS 256
#define GV_WARPS (GV_THREADS / 32)
#define RPW 2 // rows per lane group
#define UNR 2 // chunks per lane per batch (4 measured no faster: docs/PERF.md)

static int floor_pow2(int v) {
    int p = 1;
    while (p * 2 <= v) p *= 2;
    return p;
}

// Counter-based hash for sampling noise (no state on the GPU to keep in sync).
__device__ __forceinline__ float hash_uniform(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t h = a * 0x9E3779B1u ^ (b + 0x7F4A7C15u) * 0x85EBCA77u ^ c * 0xC2B2AE3Du;
    h ^= h >> 15; h *= 0x2C1B3C6Du; h ^= h >> 12; h *= 0x297A2D39u; h ^= h >> 15;
    return ((h >> 8) + 0.5f) * (1.0f / 16777216.0f); // (0, 1)
}

template <int BITS>
__device__ __forceinline__ void gv_rows(const gv_seg &s, int tile, const float *xs,
                                        const float *xsum, int lane, int warp, float *acc) {
    const int lpr = s.lpr, gq = lane / lpr, sub = lane % lpr;
    const int groups_per_warp = 32 / lpr;
    const int r0 = (tile * GV_WARPS * groups_per_warp + warp * groups_per_warp + gq) * RPW;
    const int nchunk = s.m.cols * BITS / 128;
    const int cpg = s.m.group * BITS / 128; // chunks per group
    const int ng = s.m.cols / s.m.group;
    constexpr int V = 128 / BITS;
#pragma unroll
    for (int r = 0; r < RPW; r++) acc[r] = 0.0f;
    for (int c0 = sub; c0 < nchunk; c0 += lpr * UNR) {
        uint4 code[RPW][UNR];
        uint32_t sb[RPW][UNR];
#pragma unroll
        for (int r = 0; r < RPW; r++)
#pragma unroll
            for (int u = 0; u < UNR; u++) {
                int c = c0 + u * lpr, row = r0 + r;
                bool ok = c < nchunk && row < s.m.rows;
                code[r][u] = ok ? __ldg(s.m.codes + (long)row * nchunk + c) : make_uint4(0, 0, 0, 0);
                sb[r][u] = ok ? __ldg(s.m.sb + (long)row * ng + c / cpg) : 0u;
            }
#pragma unroll
        for (int u = 0; u < UNR; u++) {
            int c = c0 + u * lpr;
            if (c >= nchunk) break;
            const float *xp = xs + xs_index(c * V);
            float xsm = BITS == 4 ? xsum[2 * c] + xsum[2 * c + 1] : xsum[c];
#pragma unroll
            for (int r = 0; r < RPW; r++)
                acc[r] += chunk_apply(chunk_dot<BITS>(code[r][u], xp), xsm, sb[r][u], BITS);
        }
    }
    for (int o = lpr / 2; o > 0; o >>= 1)
#pragma unroll
        for (int r = 0; r < RPW; r++) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
}

// Any format (dense, odd bit widths or row lengths): a warp per RPW rows, lanes stride over columns.
__device__ __forceinline__ void gv_rows_generic(const gv_seg &s, int tile, const float *xs, int lane,
                                                int warp, float *acc) {
    const int r0 = (tile * GV_WARPS + warp) * RPW;
#pragma unroll
    for (int r = 0; r < RPW; r++) {
        acc[r] = 0.0f;
        if (r0 + r >= s.m.rows) continue;
        for (int c = lane; c < s.m.cols; c += 32) acc[r] += dq_get(s.m, r0 + r, c) * xs[xs_index(c)];
    }
#pragma unroll
    for (int r = 0; r < RPW; r++) acc[r] = warp_sum(acc[r]);
}

__global__ void __launch_bounds__(GV_THREADS) gemv_kernel(gv_args a) {
    extern __shared__ float smem[];
    __shared__ float red[32];
    __shared__ float2 wbest[GV_WARPS];
    const int cols = a.cols;
    float *xs = smem, *xsum = smem + xs_floats(cols);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int total = 0;
    for (int s = 0; s < a.nseg; s++) total += a.seg[s].tiles;
    // The weights of this block's first tile do not depend on the previous kernel: start them
    // towards L2 before waiting for it (rows of a tile are contiguous, and so are their scales).
    if (blockIdx.x < total) {
        int si = 0, tile = blockIdx.x;
        while (tile >= a.seg[si].tiles) tile -= a.seg[si++].tiles;
        const gv_seg &s = a.seg[si];
        const int rpt = GV_WARPS * (32 / s.lpr) * RPW, r0 = tile * rpt, nr = min(rpt, s.m.rows - r0);
        const long rb_ = dq_row_bytes(s.m);
        prefetch_block((const char *)s.m.codes + r0 * rb_, nr * rb_);
        if (s.m.sb) prefetch_block(s.m.sb + (long)r0 * (s.m.cols / s.m.group), (long)nr * (s.m.cols / s.m.group) * 4);
    }
    pdl_wait();

    // Prologue: x into shared memory.
    if (a.pro == PRO_RMSNORM) {
        float ss = 0.0f;
        for (int c = tid; c < cols; c += GV_THREADS) ss += a.x[c] * a.x[c];
        float r = rsqrtf(block_sum(ss, red) / cols + a.eps);
        for (int c = tid; c < cols; c += GV_THREADS) xs[xs_index(c)] = rb(a.x[c] * r * a.norm_w[c]);
    } else if (a.pro == PRO_GATED) {
        // Per head of ghd values: rb(rb(w * rb(x * rms)) * silu(z)) (spec §2.1b). One warp per head.
        int nh = cols / a.ghd;
        for (int h = warp; h < nh; h += GV_WARPS) {
            const float *xh = a.x + h * a.ghd;
            float ss = 0.0f;
            for (int d = lane; d < a.ghd; d += 32) ss += xh[d] * xh[d];
            float r = rsqrtf(warp_sum(ss) / a.ghd + a.eps);
            for (int d = lane; d < a.ghd; d += 32) {
                float t = rb(a.norm_w[d] * rb(xh[d] * r));
                xs[xs_index(h * a.ghd + d)] = rb(t * silu_f(a.gz[h * a.ghd + d]));
            }
        }
    } else {
        for (int c = tid; c < cols; c += GV_THREADS) xs[xs_index(c)] = a.x[c];
    }
    __syncthreads();
    for (int i = tid; i < cols / 16; i += GV_THREADS) {
        float t = 0.0f;
#pragma unroll
        for (int j = 0; j < 16; j++) t += xs[xs_index(i * 16 + j)];
        xsum[i] = t;
    }
    if (a.x_out && blockIdx.x == 0)
        for (int c = tid; c < cols; c += GV_THREADS) a.x_out[c] = xs[xs_index(c)];
    __syncthreads();

    float best = -INFINITY;
    int best_row = 0x7fffffff;
    for (int t = blockIdx.x; t < total; t += gridDim.x) {
        int si = 0, tile = t;
        while (tile >= a.seg[si].tiles) tile -= a.seg[si++].tiles;
        const gv_seg &s = a.seg[si];
        float acc[RPW];
        if (s.m.fmt != DQ_FAST)
            gv_rows_generic(s, tile, xs, lane, warp, acc);
        else if (s.m.bits == 4)
            gv_rows<4>(s, tile, xs, xsum, lane, warp, acc);
        else
            gv_rows<8>(s, tile, xs, xsum, lane, warp, acc);
        const int lpr = s.lpr, gq = lane / lpr;
        if (lane % lpr) continue;
        const int r0 = (tile * GV_WARPS * (32 / lpr) + warp * (32 / lpr) + gq) * RPW;
#pragma unroll
        for (int r = 0; r < RPW; r++) {
            int row = r0 + r;
            if (row >= s.m.rows) break;
            if (a.epi == GV_STORE) {
                s.y[row] = rb(acc[r]);
            } else if (a.epi == GV_RESID) {
                s.y[row] = rb(s.res[row] + rb(acc[r]));
            } else {
                float v = acc[r];
                if (s.y) s.y[row] = v;
                if (a.nan_flag && !isfinite(v)) *a.nan_flag = 1;
                if (a.temp > 0.0f) // Gumbel-max: argmax(l/T + G) samples softmax(l/T) exactly
                    v = v / a.temp - __logf(-__logf(hash_uniform(a.seed, (uint32_t)*a.pos, row)));
                if (v > best || (v == best && row < best_row)) best = v, best_row = row;
            }
        }
    }
    pdl_trigger();
    if (a.epi == GV_LOGITS) {
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, best, o);
            int orow = __shfl_xor_sync(0xffffffffu, best_row, o);
            if (ov > best || (ov == best && orow < best_row)) best = ov, best_row = orow;
        }
        if (lane == 0) wbest[warp] = make_float2(best, __int_as_float(best_row));
        __syncthreads();
        if (tid == 0) {
            float2 b = wbest[0];
            for (int w = 1; w < GV_WARPS; w++) {
                float2 o = wbest[w];
                if (o.x > b.x || (o.x == b.x && __float_as_int(o.y) < __float_as_int(b.y))) b = o;
            }
            a.amax[blockIdx.x] = b;
        }
    }
}

static int n_sms(void) {
    static int n = 0;
    if (!n) {
        int dev = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
        if (n <= 0) n = 132;
    }
    return n;
}

// Blocks per SM for the grid-stride GEMV (LILY_CUDA_GEMV_BPS, default 8: 64 registers allow it).
int gemv_max_blocks(void) {
    static int bps = 0;
    if (!bps) {
        const char *e = getenv("LILY_CUDA_GEMV_BPS");
        bps = e && atoi(e) > 0 ? atoi(e) : 8;
    }
    return n_sms() * bps;
}

int gemv_launch(gv_args a, int max_blocks, cudaStream_t st) {
    int total = 0;
    for (int s = 0; s < a.nseg; s++) {
        gv_seg &g = a.seg[s];
        int nchunk = g.m.cols * g.m.bits / 128;
        g.lpr = g.m.fmt != DQ_FAST ? 32 : floor_pow2(nchunk < 32 ? nchunk : 32);
        int rows_per_tile = GV_WARPS * (32 / g.lpr) * RPW;
        g.tiles = (g.m.rows + rows_per_tile - 1) / rows_per_tile;
        total += g.tiles;
    }
    if (max_blocks <= 0) max_blocks = gemv_max_blocks();
    int grid = total < max_blocks ? total : max_blocks;
    if (grid < 1) grid = 1;
    size_t smem = (size_t)(xs_floats(a.cols) + a.cols / 16) * sizeof(float);
    static size_t smem_set = 0;
    if (smem > 48 * 1024 && smem > smem_set) {
        cudaFuncSetAttribute(gemv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        smem_set = smem;
    }
    launch_k(gemv_kernel, grid, GV_THREADS, smem, st, a);
    return grid;
}
