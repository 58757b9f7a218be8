// dev/persist/persist_gv2.cu: the persistent schedule of persist.cu with the engine's own GEMV: its
// weight format (dq_mat: 4-bit codes, scale|bias words, groups of 64), its prologue (RMS norm into
// shared memory, gemv.cuh's gv_prologue), its tensor-core tile math (gv2_split_x + gv2_tile, fed from
// shared memory) and its epilogue. So each phase must equal gemv_launch on the same input bitwise,
// and the same 200 GEMVs launched as separate kernels (one CUDA graph with PDL, as in a decode step)
// give the time to beat.
//
// One cooperative kernel, one block of 256 threads per SM. Thread 0 keeps a ring of 9 shared-memory
// slots of 18 KB full: a slot holds 16 rows of a K = 2048 matrix or 8 of K = 4096 (codes, then scale
// words: two cp.async.bulk copies completing on the slot's mbarrier). It refills a slot as soon as
// the block has finished with it, running ahead into later phases; for the routed phases (experts
// gate/up and down) it may request weights only once the router phase is complete. Slot chunks of a
// phase go to blocks round-robin. Phases: 40 layers x {in_proj 12352x2048, out_proj 2048x4096,
// router+shared 1280x2048, experts gate/up 8192x2048, experts down 2048x4096}; x of a phase is a
// prefix of an earlier phase's output (in_proj <- down, out_proj <- in_proj, router and gate/up <-
// out_proj, down <- gate/up), RMS-normed with a unit gain, as every decode GEMV block does.
//
// Usage: persist_gv2 [LAYERS [REPS]]. Prints the persistent kernel's time per step with run-ahead and
// without (a phase's weights requested only once the previous phase is complete), the separate
// kernels' time, and the bitwise check of every phase against gemv_launch.
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "cuda/gemv.cuh"
#include "cuda/qgemm_wg.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr int SLOT = 18432; // 16 rows x (1024 + 128) B at K = 2048, 8 rows x (2048 + 256) B at K = 4096
constexpr int NSLOT = 9;
constexpr int KMAX = 4096, HPG = 2; // groups of 64: two per 128-column step

struct Phase {
    dq_mat m;
    const float *x;
    float *y;
    int gate; // phase the weight requests wait for (-1: none)
    int nr;   // rows per slot
};

__device__ __forceinline__ uint32_t ld_acquire(const unsigned *p) {
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// Thread 0's side of the ring: request slot fills in the block's order of (phase, chunk) while a slot
// is free and the phase's gate (if any) is complete.
struct Feeder {
    int p = 0, k = 0, issued = 0;
    __device__ void run(const Phase *ph, int nph, const unsigned *ctr, unsigned base, int consumed, int mode,
                        char *ring, uint64_t *full) {
        const int nb = gridDim.x;
        while (issued - consumed < NSLOT && p < nph) {
            const Phase &f = ph[p];
            const int c = blockIdx.x + k * nb, nchunk = (f.m.rows + f.nr - 1) / f.nr;
            if (c >= nchunk) { p++, k = 0; continue; }
            const int gate = mode == 1 ? p - 1 : f.gate;
            if (gate >= 0 && ld_acquire(ctr) < base + (unsigned)(gate + 1) * nb) return; // later
            const int slot = issued % NSLOT, n = min(f.nr, f.m.rows - c * f.nr), ng = f.m.cols / f.m.group;
            const uint32_t cb = n * f.m.cols / 2, sbb = n * ng * 4;
            char *dst = ring + slot * SLOT;
            wg_fence_proxy(); // the block's reads of this slot (generic proxy) before the copy's writes
            mb_expect_tx(&full[slot], cb + sbb);
            bulk_g2s(dst, (const char *)f.m.codes + (long)c * f.nr * (f.m.cols / 2), cb, &full[slot]);
            bulk_g2s(dst + f.nr * f.m.cols / 2, f.m.sb + (long)c * f.nr * ng, sbb, &full[slot]);
            issued++, k++;
        }
    }
};

__global__ void __launch_bounds__(GV_THREADS, 1) persist_gv2(const Phase *phases, int nph, unsigned *ctr, unsigned base,
                                                          const float *ones, int mode) {
    extern __shared__ __align__(128) char smem[];
    char *ring = smem;
    uint4 *bsm = (uint4 *)(smem + NSLOT * SLOT), *zero4 = bsm + KMAX * 3 / 8;
    float *xs = (float *)(zero4 + 1), *xsum = xs + xs_floats(KMAX), *xsg = xsum + KMAX / 16;
    __shared__ uint64_t full[NSLOT];
    __shared__ float red[32], part[2][GV_WARPS][16];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nb = gridDim.x;
    Feeder fd;
    if (tid == 0) {
        for (int i = 0; i < NSLOT; i++) mb_init(&full[i], 1);
        mb_init_fence();
        fd.run(phases, nph, ctr, base, 0, mode, ring, full);
    }
    __syncthreads();
    int consumed = 0;
    for (int p = 0; p < nph; p++) {
        const Phase &f = phases[p];
        if (tid == 0) {
            if (p) // all blocks done with phase p - 1; keep the ring fed meanwhile
                while (ld_acquire(ctr) < base + (unsigned)p * nb) fd.run(phases, nph, ctr, base, consumed, mode, ring, full);
            // Once more now that phase p's gate is open: a request refused by the last call inside
            // the loop would otherwise never be made, and the block would wait for it forever (the
            // first version hung at the first routed phase).
            fd.run(phases, nph, ctr, base, consumed, mode, ring, full);
        }
        __syncthreads();
        gv_args a;
        memset(&a, 0, sizeof a);
        a.nseg = 1, a.cols = f.m.cols, a.x = f.x, a.pro = PRO_RMSNORM, a.norm_w = ones, a.eps = 1e-6f;
        a.epi = GV_STORE, a.pro_regs = 1;
        gv_seg &s = a.seg[0];
        s.m = f.m, s.y = f.y, s.ks = GV_WARPS, s.tiles = 1;
        const int nchunk = (f.m.rows + f.nr - 1) / f.nr;
        if ((int)blockIdx.x < nchunk) { // blocks without a chunk of this phase skip its x
            gv_prologue(a, xs, xsum, red, true);
            gv2_split_x<HPG>(f.m.cols, xs, bsm, zero4, xsg);
            __syncthreads();
        }
        float best = 0.0f;
        int best_row = 0;
        for (int c = blockIdx.x; c < nchunk; c += nb, consumed++) {
            const int slot = consumed % NSLOT, n = min(f.nr, f.m.rows - c * f.nr);
            const char *src = ring + slot * SLOT;
            mb_wait(&full[slot], (consumed / NSLOT) & 1);
            gv_seg t = s; // this chunk as a matrix of n rows, tile 0
            t.m.rows = n;
            float acc0, acc1;
            gv2_tile<HPG, true>(t, 0, bsm, zero4, xsg, lane, warp, acc0, acc1, (const uint4 *)src,
                                (const uint32_t *)(src + f.nr * f.m.cols / 2));
            float(*pp)[16] = part[consumed & 1];
            if ((lane & 3) == 0) pp[warp][lane >> 2] = acc0, pp[warp][(lane >> 2) + 8] = acc1;
            __syncthreads();
            if (tid < n) { // gemv2's order: the ks = 8 partial sums of the tile's row
                float v = 0.0f;
                for (int k = 0; k < GV_WARPS; k++) v += pp[k][tid];
                gv_out(a, s, c * f.nr + tid, v, best, best_row);
            }
            if (tid == 0) fd.run(phases, nph, ctr, base, consumed + 1, mode, ring, full);
        }
        __syncthreads(); // this block's rows of phase p are written
        if (tid == 0) {
            __threadfence();
            atomicAdd(ctr, 1u);
        }
    }
}

__global__ void fill_weights(uint8_t *codes, long ncode, uint32_t *sb, long nsb, uint32_t seed) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < ncode; i += (long)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 0x9E3779B1u ^ seed * 0x85EBCA77u;
        h ^= h >> 15, h *= 0x2C1B3C6Du, h ^= h >> 12, h *= 0x297A2D39u, h ^= h >> 15;
        codes[i] = (uint8_t)h;
        if (i < nsb) { // scale in [0.01, 0.03), bias = -scale * (7.5 +- 0.5), both bf16
            const float sc = 0.01f + 0.02f * (float)((h >> 8) & 0xffff) / 65536.0f;
            const float bi = -sc * (7.5f + (float)((h >> 3) & 0xff) / 256.0f - 0.5f);
            sb[i] = (uint32_t)lily_f32_to_bf16(sc) | ((uint32_t)lily_f32_to_bf16(bi) << 16);
        }
    }
}

// The kernel spins on barriers: a scheduling bug shows as a hang, so give up after 20 s.
static void wait_or_die(cudaEvent_t e, const char *what) {
    for (int i = 0; i < 20000; i++) {
        const cudaError_t r = cudaEventQuery(e);
        if (r == cudaSuccess) return;
        if (r != cudaErrorNotReady) { fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(r)); exit(1); }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "FAIL: %s did not finish in 20 s (deadlock)\n", what);
    exit(3);
}

// Median and minimum (us) of `reps` timed launches after one warm-up; prep() runs before each, untimed.
template <class P, class L> static void time_launches(int reps, cudaStream_t st, P prep, L launch, float *med, float *mn) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    std::vector<float> ts;
    for (int it = 0; it <= reps; it++) {
        prep();
        CK(cudaEventRecord(e0, st));
        launch();
        CK(cudaEventRecord(e1, st));
        wait_or_die(e1, "timed launch");
        CK(cudaGetLastError());
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (it) ts.push_back(ms * 1000.0f);
    }
    std::sort(ts.begin(), ts.end());
    *med = ts[ts.size() / 2], *mn = ts[0];
    CK(cudaEventDestroy(e0)); CK(cudaEventDestroy(e1));
}

// The engine's launch of phase f into y (the reference and the separate-kernels chain).
static gv_args phase_args(const Phase &f, float *y, const float *ones) {
    gv_args a;
    memset(&a, 0, sizeof a);
    a.nseg = 1, a.cols = f.m.cols, a.x = f.x, a.pro = PRO_RMSNORM, a.norm_w = ones, a.eps = 1e-6f;
    a.epi = GV_STORE, a.seg[0].m = f.m, a.seg[0].y = y;
    return a;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const int layers = argc > 1 ? atoi(argv[1]) : 40, reps = argc > 2 ? atoi(argv[2]) : 10;
    const int shapes[5][2] = {{12352, 2048}, {2048, 4096}, {1280, 2048}, {8192, 2048}, {2048, 4096}};
    const char *names[5] = {"in_proj", "out_proj", "router+shared", "experts gate/up", "experts down"};
    const int nph = layers * 5;
    setenv("LILY_CUDA_GEMV2_KS", "8", 1); // the reference launches split a tile's columns as here
    lily_cuda_gemv2 = 1, lily_cuda_gv_pro = 1, lily_cuda_gv2_bulk = 0;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const int nb = prop.multiProcessorCount;

    std::vector<Phase> hp(nph);
    long ylen = 0, wbytes = 0;
    std::vector<long> yoff(nph);
    for (int p = 0; p < nph; p++) yoff[p] = ylen, ylen += shapes[p % 5][0];
    float *dy, *dref, *dx, *dones;
    unsigned *dctr;
    CK(cudaMalloc(&dy, ylen * 4)); CK(cudaMalloc(&dref, ylen * 4)); CK(cudaMalloc(&dx, 2048 * 4));
    CK(cudaMalloc(&dones, KMAX * 4)); CK(cudaMalloc(&dctr, 4));
    {
        std::vector<float> h(KMAX, 1.0f), x(2048);
        CK(cudaMemcpy(dones, h.data(), KMAX * 4, cudaMemcpyHostToDevice));
        for (int i = 0; i < 2048; i++) x[i] = (float)((i * 7919) % 2003) / 1001.0f - 1.0f;
        CK(cudaMemcpy(dx, x.data(), 2048 * 4, cudaMemcpyHostToDevice));
    }
    for (int p = 0; p < nph; p++) {
        const int rows = shapes[p % 5][0], K = shapes[p % 5][1], j = p % 5, L = p / 5;
        Phase &f = hp[p];
        memset(&f.m, 0, sizeof f.m);
        f.m.rows = rows, f.m.cols = K, f.m.bits = 4, f.m.group = 64, f.m.fmt = DQ_FAST;
        const long ncode = (long)rows * K / 2, nsb = (long)rows * (K / 64);
        uint8_t *c;
        uint32_t *sb;
        CK(cudaMalloc(&c, ncode)); CK(cudaMalloc(&sb, nsb * 4));
        fill_weights<<<1024, 256>>>(c, ncode, sb, nsb, 1000 + p);
        f.m.codes = (const uint4 *)c, f.m.sb = sb;
        wbytes += ncode + nsb * 4;
        const int src = j == 0 ? (L ? p - 1 : -1) : j == 1 ? p - 1 : j == 2 ? p - 1 : j == 3 ? p - 2 : p - 1;
        f.x = src < 0 ? dx : dy + yoff[src];
        f.y = dy + yoff[p];
        f.gate = (j == 3 || j == 4) ? L * 5 + 2 : -1;
        f.nr = K == 2048 ? 16 : 8;
    }
    CK(cudaDeviceSynchronize());
    Phase *dph;
    CK(cudaMalloc(&dph, nph * sizeof(Phase)));
    CK(cudaMemcpy(dph, hp.data(), nph * sizeof(Phase), cudaMemcpyHostToDevice));
    const int smem = NSLOT * SLOT + (KMAX * 3 / 8 + 1) * 16 + (xs_floats(KMAX) + KMAX / 16 + KMAX / 64 * 4) * 4;
    CK(cudaFuncSetAttribute(persist_gv2, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    printf("persist_gv2: %d SMs, %d layers x 5 phases, %.1f MB of weights per step, %d B of shared memory per block\n", nb,
           layers, wbytes / 1e6, smem);

    for (int mode = 0; mode < 2; mode++) {
        float med, mn;
        unsigned base = 0;
        void *args[] = {(void *)&dph, (void *)&nph, (void *)&dctr, (void *)&base, (void *)&dones, (void *)&mode};
        time_launches(
            reps, 0, [&] { CK(cudaMemset(dy, 0xff, ylen * 4)); CK(cudaMemset(dctr, 0, 4)); },
            [&] { CK(cudaLaunchCooperativeKernel((void *)persist_gv2, nb, GV_THREADS, args, smem, 0)); }, &med, &mn);
        printf("persistent, %-40s median %8.1f us per step (min %8.1f), %6.1f us per layer, %5.0f GB/s\n",
               mode ? "no run-ahead (phase p requested after p-1)" : "run-ahead", med, mn, med / layers, wbytes / (med * 1e3));
        // every phase against gemv_launch on the same input (the persistent kernel's own outputs)
        int bad = 0, worst = -1;
        for (int p = 0; p < nph; p++) gemv_launch(phase_args(hp[p], dref + yoff[p], dones), 0, 0);
        CK(cudaDeviceSynchronize());
        std::vector<float> g(ylen), r(ylen);
        CK(cudaMemcpy(g.data(), dy, ylen * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(r.data(), dref, ylen * 4, cudaMemcpyDeviceToHost));
        double maxrel = 0;
        for (int p = 0; p < nph; p++) {
            if (!memcmp(g.data() + yoff[p], r.data() + yoff[p], shapes[p % 5][0] * 4)) continue;
            bad++, worst = worst < 0 ? p : worst;
            double num = 0, den = 0;
            for (int i = 0; i < shapes[p % 5][0]; i++) {
                const double d = (double)g[yoff[p] + i] - r[yoff[p] + i];
                num += d * d, den += (double)r[yoff[p] + i] * r[yoff[p] + i];
            }
            maxrel = std::max(maxrel, std::sqrt(num / (den + 1e-30)));
        }
        long nonfinite = 0;
        for (float v : g) nonfinite += !std::isfinite(v);
        printf("    %s: %d of %d phases bitwise equal to gemv_launch (first difference: phase %d, worst rel_l2 %.2e), %ld non-finite outputs\n",
               bad || nonfinite ? "FAIL" : "PASS", nph - bad, nph, worst, maxrel, nonfinite);
    }
    // The same GEMVs as separate kernels: one graph of 200 PDL launches, as in a decode step.
    {
        cudaStream_t st;
        CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        for (int p = 0; p < nph; p++) gemv_launch(phase_args(hp[p], dy + yoff[p], dones), 0, st);
        CK(cudaStreamEndCapture(st, &graph));
        CK(cudaGraphInstantiate(&exec, graph, 0));
        float med, mn;
        time_launches(reps, st, [] {}, [&] { CK(cudaGraphLaunch(exec, st)); }, &med, &mn);
        printf("separate kernels (gemv_launch, graph, PDL), median %8.1f us per step (min %8.1f), %6.1f us per layer, %5.0f GB/s\n",
               med, mn, med / layers, wbytes / (med * 1e3));
    }
    printf("phases per layer: ");
    for (int j = 0; j < 5; j++) printf("%s %dx%d%s", names[j], shapes[j][0], shapes[j][1], j < 4 ? ", " : "\n");
    return 0;
}
