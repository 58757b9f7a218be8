// gemv.cu: quantised matrix x one activation row, the workhorse of batch-1 decode.
//
// One launch serves up to GV_MAX_SEG matrices that read the same input (q/k/v projections, router +
// shared expert, ...). A block prepares x once in shared memory (plain, RMS-normed, or the GDN gated
// norm, so the norm costs no launch of its own), then walks row tiles grid-stride. Within a tile a
// group of `lpr` lanes owns RPW rows: each lane issues RPW x UNR independent 16-byte code loads before
// using any of them, accumulates in fp32, and the group reduces with shuffles.
//
// gemv2_kernel (LILY_CUDA_GEMV2, on by default; =0 runs the first kernel) moves the 4-bit inner loop onto the
// tensor cores: see the comment above gv2_tile. Segments it does not take run the first kernel's
// per-warp path inside the same launch.
#include "gemv.cuh"
#include "qgemm_wg.cuh" // bulk-copy and mbarrier wrappers

LILY_CUDA_MODE_SETTER(gemv)
LILY_TRACE_SETTER(gemv)

static int floor_pow2(int v) {
    int p = 1;
    while (p * 2 <= v) p *= 2;
    return p;
}

__global__ void __launch_bounds__(GV_THREADS) gemv_kernel(gv_args a) {
    extern __shared__ float smem[];
    __shared__ float red[32];
    __shared__ float2 wbest[GV_WARPS];
    const int cols = a.cols;
    float *xs = smem, *xsum = smem + xs_floats(cols);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int total = gv_prefetch_first(a);
    pdl_wait_early();

    gv_prologue(a, xs, xsum, red, false);

    float best = -INFINITY;
    int best_row = 0x7fffffff;
    for (int t = blockIdx.x; t < total; t += gridDim.x) {
        int si = 0, tile = t;
        while (tile >= a.seg[si].tiles) tile -= a.seg[si++].tiles;
        gv_tile_lanes(a, a.seg[si], tile, xs, xsum, lane, warp, best, best_row);
    }
    pdl_trigger();
    if (a.epi == GV_LOGITS) gv_amax_finish(a, best, best_row, wbest);
}

// LILY_CUDA_GV2_BULK: before the kernel waits for the previous one, one thread requests the block's
// first tiles (their code rows and scale words, each one contiguous range) into shared memory with
// cp.async.bulk, up to GV2_BULK_BYTES; the tile loop reads those tiles from there. The weights do not
// depend on the previous kernel, so their DRAM latency overlaps its tail, the wait and the prologue
// instead of following them (the chain benchmark's trace: 2-6 us from the wait to the staged input,
// then 2-5 us of weight loop). One instruction per range, where the cp.async staging of 2026-11-30
// (the first two steps, 16 bytes per lane) cost every thread its issue time and lost 3 %.
#define GV2_BULK_BYTES (40 * 1024)
#define GV2_BULK_MAX 4 // tiles staged per block at most

// Tile k of this block (t = blockIdx.x + k * gridDim.x) when it is staged: its segment, tile, and
// byte sizes of codes / scale words; false when it is not (past the launch's tiles, a row-per-lane
// segment, a range not 16-byte aligned, or past the byte budget `*room`).
__device__ __forceinline__ bool gv2_bulk_tile(const gv_args &a, int total, int k, int *si, int *tile, int *cb,
                                              int *sbb, int *room) {
    const int t = blockIdx.x + k * gridDim.x;
    if (k >= GV2_BULK_MAX || t >= total) return false;
    int i = 0, tl = t;
    while (tl >= a.seg[i].tiles) tl -= a.seg[i++].tiles;
    const gv_seg &s = a.seg[i];
    if (!s.ks) return false;
    const int rpt = gv_tile_rows(s), r0 = tl * rpt, nr = min(rpt, s.m.rows - r0), ng = s.m.cols / s.m.group;
    const long rb = dq_row_bytes(s.m);
    const char *c = (const char *)s.m.codes + r0 * rb;
    const uint32_t *w = s.m.sb + (long)r0 * ng;
    const int c_bytes = (int)(nr * rb), s_bytes = nr * ng * 4;
    if ((((uintptr_t)c | (uintptr_t)w | c_bytes | s_bytes) & 15) || c_bytes + s_bytes > *room) return false;
    *room -= c_bytes + s_bytes;
    *si = i, *tile = tl, *cb = c_bytes, *sbb = s_bytes;
    return true;
}

#define GV2_MIN_BLOCKS 3 // resident blocks per SM the register budget is sized for (<= 80 registers)

// LANES: some segment runs the first kernel's lane path (rows of odd shapes or groups); REGS: the prologue
// takes the register path (a.pro_regs && gv_pro_fast(a), decided on the host); BULK: a.bulk. A
// launch's kernel holds only the code it runs: the decode kernels wait on instruction fetch
// (docs/PERF.md), and the kernel with every path was ~8,400 instructions, of which a launch runs a
// fraction.
template <int HPG, bool LANES, bool REGS, bool BULK>
__global__ void __launch_bounds__(GV_THREADS, GV2_MIN_BLOCKS) gemv2_kernel(gv_args a) {
    trace_mark(0);
    constexpr int G = 128 / HPG;
    extern __shared__ uint4 smem4[];
    __shared__ float red[32];
    __shared__ float2 wbest[GV_WARPS];
    __shared__ float part[2][GV_WARPS][16];
    const int cols = a.cols, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    uint4 *bsm = smem4, *zero4 = bsm + gv2_digit_vecs(cols); // gv2_xmem_bytes' layout
    float *xs = (float *)(zero4 + 1), *xsum = xs + xs_floats(cols), *xsg = xsum + cols / 16;
    char *bulk = (char *)(((uintptr_t)(xsg + cols / G * 4) + 127) & ~(uintptr_t)127);
    __shared__ uint64_t bbar[GV2_BULK_MAX];
    const int total = gv_prefetch_first(a);
    // The block's first nstaged tiles come from `bulk`: tile k's codes at bc[k], its scale words at
    // bs[k] (every thread runs the plan; thread 0 issues the copies).
    int nstaged = 0, bc[GV2_BULK_MAX], bs[GV2_BULK_MAX];
    if (BULK) {
        int room = GV2_BULK_BYTES, si, tl, cb, sbb, off = 0;
        while (gv2_bulk_tile(a, total, nstaged, &si, &tl, &cb, &sbb, &room)) {
            bc[nstaged] = off, bs[nstaged] = off + cb;
            if (tid == 0) {
                const gv_seg &s = a.seg[si];
                const int r0 = tl * gv_tile_rows(s);
                mb_init(&bbar[nstaged], 1);
                mb_init_fence();
                mb_expect_tx(&bbar[nstaged], cb + sbb);
                bulk_g2s(bulk + off, (const char *)s.m.codes + r0 * dq_row_bytes(s.m), cb, &bbar[nstaged]);
                bulk_g2s(bulk + off + cb, s.m.sb + (long)r0 * (s.m.cols / s.m.group), sbb, &bbar[nstaged]);
            }
            off += cb + sbb, nstaged++;
        }
    }
    pdl_wait_early();
    trace_mark(1);

    // The register prologue splits x into the digits itself when no lane-path segment needs xs: one barrier and
    // one shared-memory round trip of x less between the wait and the first tile (+3 % decode at 4K, thirty-ninth
    // session). The digits are gv2_split_x's, from the same values: the same bits.
    if (REGS && !LANES) {
        gv_prologue_regs<false, false, HPG>(a, xs, xsum, red, bsm, zero4, xsg);
        trace_mark(5); // TRACE (dev): x prepared and split
    } else {
        if (REGS) gv_prologue_regs(a, xs, xsum, red);
        else gv_prologue(a, xs, xsum, red, false);
        trace_mark(5); // TRACE (dev): x prepared in xs (the chain prints wait -> point 5)
        gv2_split_x<HPG>(cols, xs, bsm, zero4, xsg);
        __syncthreads();
    }

    trace_mark(2);
    float best = -INFINITY;
    int best_row = 0x7fffffff, it = 0, k = 0;
    for (int t = blockIdx.x; t < total; t += gridDim.x, k++) {
        int si = 0, tile = t;
        while (tile >= a.seg[si].tiles) tile -= a.seg[si++].tiles;
        const gv_seg &s = a.seg[si];
        if (!s.ks) {
            if (LANES) gv_tile_lanes(a, s, tile, xs, xsum, lane, warp, best, best_row);
            continue;
        }
        float acc0, acc1;
        if (BULK && k < nstaged) {
            mb_wait(&bbar[k], 0);
            gv2_tile_bits<HPG, true>(s, tile, bsm, zero4, xsg, lane, warp, acc0, acc1, (const uint4 *)(bulk + bc[k]),
                                     (const uint32_t *)(bulk + bs[k]));
        } else {
            gv2_tile_bits<HPG, false>(s, tile, bsm, zero4, xsg, lane, warp, acc0, acc1, NULL, NULL);
        }
        if (!k) trace_mark(8); // TRACE: thread 0's share of the first tile computed
        float(*pp)[16] = part[it++ & 1]; // alternate buffers: one barrier per tile suffices
        if ((lane & 3) == 0) pp[warp][lane >> 2] = acc0, pp[warp][(lane >> 2) + 8] = acc1;
        __syncthreads();
        if (!k) trace_mark(9); // TRACE: the first tile's partial sums met
        gv2_tile_out(a, s, tile, pp, tid, best, best_row);
    }
    trace_mark(3);
    pdl_trigger();
    if (a.epi == GV_LOGITS) gv_amax_finish(a, best, best_row, wbest);
    trace_mark(4);
}

int cuda_sm_count(void) {
    static int n = 0;
    if (!n) {
        int dev = 0;
        cudaGetDevice(&dev);
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) n = 132;
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
    return cuda_sm_count() * bps;
}

int lily_cuda_gemv2 = 0;

static int env_pos(const char *name, int def) {
    const char *e = getenv(name);
    return e && atoi(e) > 0 ? atoi(e) : def;
}

// Segments gemv2 takes: 4- or 8-bit vectorisable rows of whole 128-column steps, group 32, 64 or 128,
// all of one launch with the same group (x's per-group sums are laid out for one group size).
static bool gv2_takes(const dq_mat &m, int cols) {
    return m.fmt == DQ_FAST && (m.bits == 4 || m.bits == 8) && m.cols == cols && cols % 128 == 0 &&
           (m.group == 32 || m.group == 64 || m.group == 128);
}

// Warps sharing one 16-row tile: the fewest that still give every resident block a tile
// (LILY_CUDA_GEMV2_KS = 1, 2, 4 or 8 forces it).
static int gv2_ks(int rows, int steps, int slots) {
    static int force = -1;
    if (force < 0) {
        force = env_pos("LILY_CUDA_GEMV2_KS", 0);
        if (force != 1 && force != 2 && force != 4 && force != 8) force = 0;
    }
    if (force) return force;
    int ks = 1, r16 = (rows + 15) / 16;
    while (ks < GV_WARPS && ks < steps && (r16 * ks + GV_WARPS - 1) / GV_WARPS < slots) ks *= 2;
    return ks;
}

template <int HPG, bool LANES, bool REGS, bool BULK>
static void gv2_launch_k(const gv_args &a, int grid, size_t smem, cudaStream_t st) {
    static size_t smem_set = 0;
    if (smem > 48 * 1024 && smem > smem_set) {
        cudaFuncSetAttribute(gemv2_kernel<HPG, LANES, REGS, BULK>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        smem_set = smem;
    }
    launch_k(gemv2_kernel<HPG, LANES, REGS, BULK>, grid, GV_THREADS, smem, st, a);
}
template <int HPG, bool LANES, bool REGS> static void gv2_launch_b(const gv_args &a, int grid, size_t smem, cudaStream_t st) {
    if (a.bulk) gv2_launch_k<HPG, LANES, REGS, true>(a, grid, smem, st);
    else gv2_launch_k<HPG, LANES, REGS, false>(a, grid, smem, st);
}
template <int HPG> static void gv2_launch(const gv_args &a, int grid, size_t smem, cudaStream_t st) {
    bool lanes = false;
    for (int s = 0; s < a.nseg; s++) lanes = lanes || !a.seg[s].ks;
    const bool regs = a.pro_regs && gv_pro_fast(a);
    if (lanes) regs ? gv2_launch_b<HPG, true, true>(a, grid, smem, st) : gv2_launch_b<HPG, true, false>(a, grid, smem, st);
    else regs ? gv2_launch_b<HPG, false, true>(a, grid, smem, st) : gv2_launch_b<HPG, false, false>(a, grid, smem, st);
}

int lily_cuda_gv_pro = 1;
int lily_cuda_gv2_bulk = 0;

static int gv2_bps(void) {
    static int bps2 = 0;
    if (!bps2) bps2 = env_pos("LILY_CUDA_GEMV2_BPS", GV2_MIN_BLOCKS);
    return bps2;
}

int gemv_plan(gv_args &a, int *total_tiles) {
    a.pro_regs = lily_cuda_gv_pro;
    a.bulk = lily_cuda_gv2_bulk;
    int group2 = 0; // gemv2's group size, 0 = the first kernel
    for (int s = 0; s < a.nseg && lily_cuda_gemv2 && !group2; s++)
        if (gv2_takes(a.seg[s].m, a.cols)) group2 = a.seg[s].m.group;
    const int bps2 = gv2_bps();
    int total = 0;
    for (int s = 0; s < a.nseg; s++) {
        gv_seg &g = a.seg[s];
        int nchunk = g.m.cols * g.m.bits / 128;
        g.lpr = g.m.fmt != DQ_FAST ? 32 : floor_pow2(nchunk < 32 ? nchunk : 32);
        g.ks = group2 && gv2_takes(g.m, a.cols) && g.m.group == group2 ? gv2_ks(g.m.rows, a.cols / 128, cuda_sm_count() * bps2) : 0;
        int rows_per_tile = g.ks ? 16 * GV_WARPS / g.ks : GV_WARPS * (32 / g.lpr) * RPW;
        g.tiles = (g.m.rows + rows_per_tile - 1) / rows_per_tile;
        total += g.tiles;
    }
    *total_tiles = total;
    return group2;
}

int gemv_launch(gv_args a, int max_blocks, cudaStream_t st) {
    int total;
    const int group2 = gemv_plan(a, &total), bps2 = gv2_bps();
    if (max_blocks <= 0) max_blocks = gemv_max_blocks();
    if (group2) {
        if (max_blocks > cuda_sm_count() * bps2) max_blocks = cuda_sm_count() * bps2;
        int grid = total < max_blocks ? total : max_blocks;
        if (grid < 1) grid = 1;
        size_t smem = gv2_xmem_bytes(a.cols, group2);
        if (a.bulk) smem += 128 + GV2_BULK_BYTES;
        if (group2 == 32) gv2_launch<4>(a, grid, smem, st);
        else if (group2 == 64) gv2_launch<2>(a, grid, smem, st);
        else gv2_launch<1>(a, grid, smem, st);
        return grid;
    }
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
