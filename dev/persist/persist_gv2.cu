// dev/persist/persist_gv2.cu: the persistent schedule of persist.cu with the engine's own GEMV: its
// weight format (dq_mat: 4-bit codes, scale|bias words, groups of 64), its prologue (RMS norm into
// shared memory, gemv.cuh's gv_prologue), its tensor-core tile math (gv2_split_x + gv2_tile, fed from
// shared memory) and its epilogue. So each phase must equal gemv_launch on the same input bitwise,
// and the same 200 GEMVs launched as separate kernels (one CUDA graph with PDL, as in a decode step)
// give the time to beat.
//
// One cooperative kernel. Thread 0 of each block keeps a shared-memory ring full: a slot of 18 KB
// holds 16 rows of a K = 2048 matrix or 8 of K = 4096, one of 36 KB 16 rows of either (codes, then
// scale words: two cp.async.bulk copies completing on the slot's "full" mbarrier). It refills a slot
// once the block is done with it, running ahead into later phases; for the routed phases (experts
// gate/up and down) it may request weights only once the router phase is complete. A phase's chunks
// go to blocks round-robin. Phases: 40 layers x {in_proj 12352x2048, out_proj 2048x4096,
// router+shared 1280x2048, experts gate/up 8192x2048, experts down 2048x4096}; x of a phase is a
// prefix of an earlier phase's output (in_proj <- down, out_proj <- in_proj, router and gate/up <-
// out_proj, down <- gate/up), RMS-normed with a unit gain, as every decode GEMV block does.
//
// Two kernels, each in the variants of main()'s table: persist_gv2 (blocks of 8 warps, 1 or 2 per
// SM; a barrier per chunk, or per-slot "empty" mbarriers and batched sums) and persist_wide (one
// block of 2-4 groups of 8 warps per SM sharing one x, a chunk per group). Timing-only variants drop
// the weight copies or prepare x once. docs/PERF.md has the results (2026-11-30). After those runs
// the two kernels' shared phase steps moved into helpers (ring_init, phase_enter, phase_leave) and
// the wide kernel's prologue became gemv.cuh's gv_prologue_regs<true>: same operations, not yet re-run.
//
// Usage: [PERSIST_VARIANTS=letters] persist_gv2 [LAYERS [REPS]]. Prints each variant's time per step,
// the bitwise check of every phase against gemv_launch, the per-phase breakdown from clock64 stamps
// (barrier wait, x, rows, arrival), and the separate kernels' time.
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

// Slots of 18432 B hold 16 rows of K = 2048 or 8 of 4096; of 36864 B, 16 of either.
constexpr int NSLOT_MAX = 12, PB = 8; // ring slots at most; chunks whose partial sums wait in a batch
constexpr int KMAX = 4096, HPG = 2;    // groups of 64: two per 128-column step

struct Phase {
    dq_mat m;
    const float *x;
    float *y;
    int gate; // phase the weight requests wait for (-1: none)
    int nr;   // rows per slot
};

// The ring's shape and the consumer's discipline, per launch.
struct RingCfg {
    int nslot, slot; // slots and bytes per slot
    int defer;       // 0: a barrier per chunk (the first version); 1: per-slot "empty" mbarriers, partial
                     // sums kept for up to PB chunks, one barrier per batch
    int nocopy;      // timing only: no weights are copied (the math runs on whatever the slot holds)
    int relaxed;     // poll the grid counter relaxed and acquire once per phase
    int nox;         // timing only (wide kernel): x prepared in the first layer only, then reused
};

__device__ __forceinline__ uint32_t ld_acquire(const unsigned *p) {
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// Polling without acquire: an acquire at gpu scope invalidates the SM's whole L1 (CCTL.IVALL in the
// SASS), and thread 0 polling with acquire sent every warp's loads to L2, ~2 us per chunk under load
// (measured 2026-11-30: the "rows" stamps of in_proj were 12.4 us with no weights copied at all).
// So poll relaxed, then acquire once.
__device__ __forceinline__ uint32_t ld_relaxed(const unsigned *p) {
    uint32_t v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// Non-blocking: has the phase of this parity completed?
__device__ __forceinline__ bool mb_test(uint64_t *b, int parity) {
    uint32_t ok;
    asm volatile("{\n.reg .pred P1;\nmbarrier.test_wait.parity.shared::cta.b64 P1, [%1], %2;\nselp.u32 %0, 1, 0, P1;\n}\n"
                 : "=r"(ok)
                 : "r"(wg_smem(b)), "r"(parity)
                 : "memory");
    return ok != 0;
}

// Thread 0's side of the ring: request slot fills in the block's order of (phase, chunk) while a slot
// is free and the phase's gate (if any) is complete. A slot is free when the block has finished its
// last use: counted by `consumed` (defer 0, the caller's barrier orders it) or seen on its empty
// mbarrier (defer 1: every warp arrives once it has read the slot).
struct Feeder {
    int p = 0, k = 0, issued = 0;
    __device__ void run(const Phase *ph, int nph, const unsigned *ctr, unsigned base, int consumed, int mode,
                        RingCfg rc, char *ring, uint64_t *full, uint64_t *empty) {
        const int nb = gridDim.x;
        while (p < nph) {
            const Phase &f = ph[p];
            const int c = blockIdx.x + k * nb, nchunk = (f.m.rows + f.nr - 1) / f.nr;
            if (c >= nchunk) { p++, k = 0; continue; } // (before the slot test: `p` tells the wide
                                                          // kernel when a phase is fully requested)
            if (rc.defer) {
                if (issued >= rc.nslot && !mb_test(&empty[issued % rc.nslot], (issued / rc.nslot - 1) & 1)) return;
            } else if (issued - consumed >= rc.nslot) {
                return;
            }
            const int gate = mode == 1 ? p - 1 : f.gate;
            // later; relaxed, as the weights are not written by other blocks (the engine's routed expert
            // ids will be: one acquire per phase then)
            if (gate >= 0 && (rc.relaxed ? ld_relaxed(ctr) : ld_acquire(ctr)) < base + (unsigned)(gate + 1) * nb) return;
            const int slot = issued % rc.nslot, n = min(f.nr, f.m.rows - c * f.nr), ng = f.m.cols / f.m.group;
            const uint32_t cb = n * f.m.cols / 2, sbb = n * ng * 4;
            char *dst = ring + slot * rc.slot;
            issued++, k++;
            if (rc.nocopy) { mb_arrive(&full[slot]); continue; }
            wg_fence_proxy(); // the block's reads of this slot (generic proxy) before the copy's writes
            mb_expect_tx(&full[slot], cb + sbb);
            bulk_g2s(dst, (const char *)f.m.codes + (long)c * f.nr * (f.m.cols / 2), cb, &full[slot]);
            bulk_g2s(dst + f.nr * f.m.cols / 2, f.m.sb + (long)c * f.nr * ng, sbb, &full[slot]);
        }
    }
};

// Phase f as gemv arguments writing y: the engine's launch (the reference and the separate-kernels
// chain) and, with the tile split set by the caller, the persistent kernels' tile math.
__host__ __device__ static gv_args phase_args(const Phase &f, float *y, const float *ones) {
    gv_args a;
    memset(&a, 0, sizeof a);
    a.nseg = 1, a.cols = f.m.cols, a.x = f.x, a.pro = PRO_RMSNORM, a.norm_w = ones, a.eps = 1e-6f;
    a.epi = GV_STORE, a.seg[0].m = f.m, a.seg[0].y = y;
    return a;
}

// What both kernels do around a phase. Thread 0 sets up the ring's mbarriers and makes its first
// requests; at a phase's start it waits until every block is done with the previous phase, feeding
// the ring meanwhile, then feeds once more now that the phase's gate is open (a request refused by
// the last call inside the loop would otherwise never be made: the first version hung at the first
// routed phase). At the end it counts the block's arrival. Stamps (when asked): clock64 per phase
// and block once the barrier is passed (0), x is ready (1), the rows are written (2), the arrival is
// counted (3).
struct PhaseCtx {
    const Phase *phases;
    int nph;
    unsigned *ctr;
    unsigned base;
    int mode;
    RingCfg rc;
    char *ring;
    uint64_t *full, *empty;
    long long *stp;
    long sstride;
};
__device__ __forceinline__ void ring_init(const PhaseCtx &c, Feeder &fd) {
    for (int i = 0; i < c.rc.nslot; i++) mb_init(&c.full[i], 1), mb_init(&c.empty[i], GV_WARPS);
    mb_init_fence();
    fd.run(c.phases, c.nph, c.ctr, c.base, 0, c.mode, c.rc, c.ring, c.full, c.empty);
}
__device__ __forceinline__ void phase_enter(const PhaseCtx &c, Feeder &fd, int p, int consumed) {
    if (p) {
        const unsigned target = c.base + (unsigned)p * gridDim.x;
        while ((c.rc.relaxed ? ld_relaxed(c.ctr) : ld_acquire(c.ctr)) < target)
            fd.run(c.phases, c.nph, c.ctr, c.base, consumed, c.mode, c.rc, c.ring, c.full, c.empty);
        if (c.rc.relaxed) (void)ld_acquire(c.ctr); // once: the other blocks' outputs (x) are visible
    }
    fd.run(c.phases, c.nph, c.ctr, c.base, consumed, c.mode, c.rc, c.ring, c.full, c.empty);
}
// Phase f as the arguments of the block's tile math: a gv2 tile of 16 rows, its columns split over
// the 8 warps, the register prologue.
__device__ __forceinline__ gv_args tile_args(const Phase &f, const float *ones) {
    gv_args a = phase_args(f, f.y, ones);
    a.pro_regs = 1, a.seg[0].ks = GV_WARPS, a.seg[0].tiles = 1;
    return a;
}
// Until a slot is full. With `feed`, warp 0 polls it while thread 0 keeps requesting fills: thread 0
// alone requests them, so it must not sleep on a slot whose fill it has yet to request.
__device__ __forceinline__ void slot_wait(const PhaseCtx &c, Feeder &fd, int slot, int par, int consumed, bool feed) {
    if (feed && threadIdx.x < 32)
        for (;;) {
            int r = 0;
            if (threadIdx.x == 0) {
                r = mb_test(&c.full[slot], par);
                if (!r) fd.run(c.phases, c.nph, c.ctr, c.base, consumed, c.mode, c.rc, c.ring, c.full, c.empty);
            }
            if (__shfl_sync(0xffffffffu, r, 0)) break;
        }
    mb_wait(&c.full[slot], par);
}
__device__ __forceinline__ void phase_stamp(const PhaseCtx &c, int p, int k) {
    if (c.stp) c.stp[p * c.sstride + k] = clock64();
}
__device__ __forceinline__ void phase_leave(const PhaseCtx &c, int p) {
    phase_stamp(c, p, 2);
    __threadfence();
    atomicAdd(c.ctr, 1u);
    phase_stamp(c, p, 3);
}

// MINB: blocks per SM (2 caps the registers at 128 so that two blocks fit).
template <int MINB>
__global__ void __launch_bounds__(GV_THREADS, MINB) persist_gv2(const Phase *phases, int nph, unsigned *ctr, unsigned base,
                                                             const float *ones, int mode, RingCfg rc,
                                                             long long *stamps) {
    extern __shared__ __align__(128) char smem[];
    char *ring = smem;
    uint4 *bsm = (uint4 *)(smem + rc.nslot * rc.slot), *zero4 = bsm + KMAX * 3 / 8;
    float *xs = (float *)(zero4 + 1), *xsum = xs + xs_floats(KMAX), *xsg = xsum + KMAX / 16;
    __shared__ uint64_t full[NSLOT_MAX], empty[NSLOT_MAX];
    __shared__ float red[32], part[PB][GV_WARPS][16];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nb = gridDim.x;
    const PhaseCtx pc = {phases, nph, ctr, base, mode, rc, ring, full, empty,
                         stamps ? stamps + (long)blockIdx.x * 4 : nullptr, (long)gridDim.x * 4};
    Feeder fd;
    if (tid == 0) ring_init(pc, fd);
    __syncthreads();
    int consumed = 0;
    for (int p = 0; p < nph; p++) {
        const Phase f = phases[p]; // a copy in registers: no reload per chunk
        if (tid == 0) phase_enter(pc, fd, p, consumed);
        __syncthreads();
        if (tid == 0) phase_stamp(pc, p, 0);
        gv_args a = tile_args(f, ones);
        const gv_seg &s = a.seg[0];
        const int nchunk = (f.m.rows + f.nr - 1) / f.nr;
        if ((int)blockIdx.x < nchunk) { // blocks without a chunk of this phase skip its x
            gv_prologue(a, xs, xsum, red, true);
            gv2_split_x<HPG>(f.m.cols, xs, bsm, zero4, xsg);
            __syncthreads();
        }
        if (tid == 0) phase_stamp(pc, p, 1);
        float best = 0.0f;
        int best_row = 0, nbatch = 0, c0 = blockIdx.x;
        for (int c = blockIdx.x; c < nchunk; c += nb, consumed++) {
            const int slot = consumed % rc.nslot, n = min(f.nr, f.m.rows - c * f.nr), par = (consumed / rc.nslot) & 1;
            const char *src = ring + slot * rc.slot;
            slot_wait(pc, fd, slot, par, consumed, rc.defer); // (defer 0: thread 0 feeds after each chunk)
            gv_seg t = s; // this chunk as a matrix of n rows, tile 0
            t.m.rows = n;
            float acc0, acc1;
            gv2_tile<HPG, true>(t, 0, bsm, zero4, xsg, lane, warp, acc0, acc1, (const uint4 *)src,
                                (const uint32_t *)(src + f.nr * f.m.cols / 2));
            if (!rc.defer) {
                float(*pp)[16] = part[consumed & 1];
                if ((lane & 3) == 0) pp[warp][lane >> 2] = acc0, pp[warp][(lane >> 2) + 8] = acc1;
                __syncthreads();
                if (tid < n) { // gemv2's order: the ks = 8 partial sums of the tile's row
                    float v = 0.0f;
                    for (int k = 0; k < GV_WARPS; k++) v += pp[k][tid];
                    gv_out(a, s, c * f.nr + tid, v, best, best_row);
                }
                if (tid == 0) fd.run(phases, nph, ctr, base, consumed + 1, mode, rc, ring, full, empty);
                continue;
            }
            __syncwarp();
            if (lane == 0) mb_arrive(&empty[slot]); // this warp has read the slot
            if ((lane & 3) == 0) part[nbatch][warp][lane >> 2] = acc0, part[nbatch][warp][(lane >> 2) + 8] = acc1;
            nbatch++;
            if (tid == 0) fd.run(phases, nph, ctr, base, consumed + 1, mode, rc, ring, full, empty);
            if (nbatch == PB || c + nb >= nchunk) { // the batch's rows, then the buffer is free again
                __syncthreads();
                for (int i = tid; i < nbatch * 16; i += GV_THREADS) {
                    const int j = i >> 4, r = i & 15, cj = c0 + j * nb, nj = min(f.nr, f.m.rows - cj * f.nr);
                    if (r >= nj) continue;
                    float v = 0.0f;
                    for (int k = 0; k < GV_WARPS; k++) v += part[j][k][r];
                    gv_out(a, s, cj * f.nr + r, v, best, best_row);
                }
                __syncthreads();
                nbatch = 0, c0 = c + nb;
            }
        }
        __syncthreads(); // this block's rows of phase p are written
        if (tid == 0) phase_leave(pc, p);
    }
}

// The wide kernel: one block of NG x 8 warps per SM sharing one copy of x. The block's chunks of a
// phase go to the NG warp groups in turn (chunk j to group j % NG), each group running gv2_tile on its
// chunk exactly as a block of the separate kernels does, so NG chunks are in flight per SM instead of
// one: the narrow kernel's 8 warps were issue-bound (~2 us per 18 KB chunk with no copies at all).
// Partial sums wait in shared memory until the batch's barrier; thread 0 (group 0) feeds the ring,
// and has requested every chunk of the phase before it enters that barrier.
template <int NG>
__global__ void __launch_bounds__(GV_THREADS * NG, 1) persist_wide(const Phase *phases, int nph, unsigned *ctr, unsigned base,
                                                                 const float *ones, int mode, RingCfg rc, long long *stamps) {
    extern __shared__ __align__(128) char smem[];
    char *ring = smem;
    uint4 *bsm = (uint4 *)(smem + rc.nslot * rc.slot), *zero4 = bsm + KMAX * 3 / 8;
    float *xs = (float *)(zero4 + 1), *xsum = xs + xs_floats(KMAX), *xsg = xsum + KMAX / 16;
    __shared__ uint64_t full[NSLOT_MAX], empty[NSLOT_MAX];
    __shared__ float red[32], part[PB][GV_WARPS][16];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nb = gridDim.x, gi = warp / GV_WARPS,
              wig = warp % GV_WARPS;
    const PhaseCtx pc = {phases, nph, ctr, base, mode, rc, ring, full, empty,
                         stamps ? stamps + (long)blockIdx.x * 4 : nullptr, (long)gridDim.x * 4};
    Feeder fd;
    if (tid == 0) ring_init(pc, fd);
    __syncthreads();
    int consumed = 0;
    for (int p = 0; p < nph; p++) {
        const Phase f = phases[p];
        if (tid == 0) phase_enter(pc, fd, p, consumed);
        __syncthreads();
        if (tid == 0) phase_stamp(pc, p, 0);
        gv_args a = tile_args(f, ones);
        const gv_seg &s = a.seg[0];
        const int nchunk = (f.m.rows + f.nr - 1) / f.nr, bid = blockIdx.x;
        const int nj = nchunk > bid ? (nchunk - 1 - bid) / nb + 1 : 0;
        if (nj && !(rc.nox && p >= 5)) {
            gv_prologue_regs<true>(a, xs, xsum, red); // the first 8 warps; the rest join its barriers
            if (tid < GV_THREADS) gv2_split_x<HPG>(f.m.cols, xs, bsm, zero4, xsg);
            __syncthreads();
        }
        if (tid == 0) phase_stamp(pc, p, 1);
        float best = 0.0f;
        int best_row = 0;
        for (int j0 = 0; j0 < nj; j0 += PB) {
            const int j1 = min(nj, j0 + PB);
            for (int j = j0 + gi; j < j1; j += NG) {
                const int q = consumed + j, slot = q % rc.nslot, par = (q / rc.nslot) & 1, c = bid + j * nb;
                const int n = min(f.nr, f.m.rows - c * f.nr);
                const char *src = ring + slot * rc.slot;
                slot_wait(pc, fd, slot, par, q, true);
                gv_seg t = s;
                t.m.rows = n;
                float acc0, acc1;
                gv2_tile<HPG, true>(t, 0, bsm, zero4, xsg, lane, wig, acc0, acc1, (const uint4 *)src,
                                    (const uint32_t *)(src + f.nr * f.m.cols / 2));
                __syncwarp();
                if (lane == 0) mb_arrive(&empty[slot]);
                if ((lane & 3) == 0) part[j - j0][wig][lane >> 2] = acc0, part[j - j0][wig][(lane >> 2) + 8] = acc1;
                if (tid == 0) fd.run(phases, nph, ctr, base, q + 1, mode, rc, ring, full, empty);
            }
            if (tid == 0) // every chunk of this phase requested before the barrier (others may wait on one)
                while (fd.p <= p) fd.run(phases, nph, ctr, base, consumed, mode, rc, ring, full, empty);
            __syncthreads();
            for (int i = tid; i < (j1 - j0) * 16; i += blockDim.x) {
                const int j = i >> 4, r = i & 15, cj = bid + (j0 + j) * nb, ncj = min(f.nr, f.m.rows - cj * f.nr);
                if (r >= ncj) continue;
                float v = 0.0f;
                for (int k = 0; k < GV_WARPS; k++) v += part[j][k][r];
                gv_out(a, s, cj * f.nr + r, v, best, best_row);
            }
            __syncthreads();
        }
        consumed += nj;
        __syncthreads();
        if (tid == 0) phase_leave(pc, p);
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
    }
    CK(cudaDeviceSynchronize());
    Phase *dph;
    CK(cudaMalloc(&dph, nph * sizeof(Phase)));
    const int xbytes = (KMAX * 3 / 8 + 1) * 16 + (xs_floats(KMAX) + KMAX / 16 + KMAX / 64 * 4) * 4;
    printf("persist_gv2: %d SMs, %d layers x 5 phases, %.1f MB of weights per step, %d B of x buffers per block\n", nb,
           layers, wbytes / 1e6, xbytes);
    // The variants: blocks per SM, slot size (36 KB: K = 4096 chunks of 16 rows instead of 8, so no
    // tile runs half empty), the consumer's discipline; the ring takes what shared memory is left.
    // PERSIST_VARIANTS=a,b,... picks some (default all).
    // ng: 0 = the narrow kernel (8 warps per block, bps blocks per SM), else the wide kernel (one
    // block of ng x 8 warps per SM).
    struct Variant { int ng, bps, slot, defer, mode, nocopy, relaxed; const char *what; int nox = 0; } vars[] = {
        {0, 1, 18432, 0, 0, 0, 0, "1 block/SM, 18 KB slots, barrier per chunk (first version)"},
        {0, 1, 36864, 1, 0, 0, 1, "1 block/SM, 36 KB slots, empty mbarriers, batched, relaxed"},
        {0, 2, 18432, 1, 0, 0, 1, "2 blocks/SM, 18 KB slots, empty mbarriers, batched, relaxed"},
        {2, 1, 18432, 1, 0, 0, 1, "wide: 2 groups of 8 warps, 18 KB slots"},
        {2, 1, 36864, 1, 0, 0, 1, "wide: 2 groups, 36 KB slots"},
        {3, 1, 18432, 1, 0, 0, 1, "wide: 3 groups, 18 KB slots"},
        {4, 1, 18432, 1, 0, 0, 1, "wide: 4 groups, 18 KB slots"},
        {4, 1, 18432, 1, 0, 1, 1, "(g) without weight copies"},
        {3, 1, 18432, 1, 1, 0, 1, "(f) without run-ahead"},
        {2, 1, 36864, 1, 0, 0, 1, "(e) with x prepared once (timing only)", 1},
        {2, 1, 36864, 1, 0, 1, 1, "(e) with x prepared once, no weight copies", 1},
    };
    const char *pick = getenv("PERSIST_VARIANTS");
    for (int vi = 0; vi < (int)(sizeof vars / sizeof vars[0]); vi++) {
        const Variant &v = vars[vi];
        if (pick && !strchr(pick, 'a' + vi)) continue;
        int smax = 0;
        CK(cudaDeviceGetAttribute(&smax, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0));
        // per block: the SM's shared memory over the blocks, less 1 KB reserved per block and the statics
        const int avail = smax / v.bps - 1024 - 5120, nslot = std::min(NSLOT_MAX, (avail - xbytes) / v.slot);
        const int smem = nslot * v.slot + xbytes;
        void *kern = v.ng == 2 ? (void *)persist_wide<2> : v.ng == 3 ? (void *)persist_wide<3> : v.ng == 4 ? (void *)persist_wide<4>
                     : v.bps == 1 ? (void *)persist_gv2<1> : (void *)persist_gv2<2>;
        const int threads = GV_THREADS * (v.ng ? v.ng : 1);
        CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        int per_sm = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, threads, smem));
        if (nslot < 2 || per_sm < v.bps) {
            printf("(%c) %-58s skipped: %d slots, %d blocks per SM fit\n", 'a' + vi, v.what, nslot, per_sm);
            continue;
        }
        for (int p = 0; p < nph; p++) hp[p].nr = std::min(16, v.slot / (shapes[p % 5][1] / 2 + shapes[p % 5][1] / 64 * 4));
        CK(cudaMemcpy(dph, hp.data(), nph * sizeof(Phase), cudaMemcpyHostToDevice));
        RingCfg rc = {nslot, v.slot, v.defer, v.nocopy, v.relaxed, v.nox};
        float med, mn;
        unsigned base = 0;
        int mode = v.mode, grid = nb * v.bps;
        long long *nostamps = nullptr;
        void *args[] = {(void *)&dph, (void *)&nph, (void *)&dctr, (void *)&base, (void *)&dones, (void *)&mode, (void *)&rc, (void *)&nostamps};
        time_launches(
            reps, 0, [&] { CK(cudaMemset(dy, 0xff, ylen * 4)); CK(cudaMemset(dctr, 0, 4)); },
            [&] { CK(cudaLaunchCooperativeKernel(kern, grid, threads, args, smem, 0)); }, &med, &mn);
        printf("(%c) %-58s %2d slots  median %7.1f us per step (min %7.1f), %5.1f us per layer, %5.0f GB/s\n", 'a' + vi,
               v.what, nslot, med, mn, med / layers, wbytes / (med * 1e3));
        // every phase against gemv_launch on the same input (the persistent kernel's own outputs)
        int bad = 0, worst = -1;
        const bool nocheck = v.nocopy || v.nox;
        if (nocheck) printf("    (no check: timing only)\n");
        for (int p = 0; p < nph && !nocheck; p++) gemv_launch(phase_args(hp[p], dref + yoff[p], dones), 0, 0);
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
        for (float x : g) nonfinite += !std::isfinite(x);
        if (!nocheck) {
            printf("    %s: %d of %d phases bitwise equal to gemv_launch (first difference: phase %d, worst rel_l2 %.2e), "
                   "%ld non-finite outputs\n", bad || nonfinite ? "FAIL" : "PASS", nph - bad, nph, worst, maxrel, nonfinite);
        }
        // One more launch with stamps: where a phase's time goes, per phase kind (layers 1.. averaged)
        {
            long long *dst;
            const long ns = (long)nph * grid * 4;
            CK(cudaMalloc(&dst, ns * 8));
            void *sargs[] = {(void *)&dph, (void *)&nph, (void *)&dctr, (void *)&base, (void *)&dones, (void *)&mode, (void *)&rc, (void *)&dst};
            CK(cudaMemset(dctr, 0, 4));
            CK(cudaLaunchCooperativeKernel(kern, grid, threads, sargs, smem, 0));
            CK(cudaDeviceSynchronize());
            std::vector<long long> h(ns);
            CK(cudaMemcpy(h.data(), dst, ns * 8, cudaMemcpyDeviceToHost));
            CK(cudaFree(dst));
            int khz = 0;
            CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
            const double us = 1e3 / khz; // us per clock
            // barrier wait: from the block's own arrival at p-1 to passing into p; x: prologue + split;
            // rows: the chunks; arrive: fence + atomic. Mean over blocks and layers, and the mean of
            // the slowest block's rows time.
            printf("    us per phase (mean over blocks; rows max = slowest block):     wait    x   rows  (max)  arrive\n");
            for (int j = 0; j < 5; j++) {
                double w = 0, x = 0, r = 0, rmax = 0, ar = 0;
                long n = 0, nl = 0;
                for (int p = 5 + j; p < nph; p += 5, nl++) {
                    double m = 0;
                    for (int b = 0; b < grid; b++, n++) {
                        const long long *q = &h[((long)p * grid + b) * 4], *q0 = &h[((long)(p - 1) * grid + b) * 4];
                        w += (q[0] - q0[3]) * us, x += (q[1] - q[0]) * us, r += (q[2] - q[1]) * us, ar += (q[3] - q[2]) * us;
                        m = std::max(m, (q[2] - q[1]) * us);
                    }
                    rmax += m;
                }
                printf("      %-16s %5.2f %5.2f %5.2f (%5.2f) %5.2f\n", names[j], w / n, x / n, r / n, rmax / nl, ar / n);
            }
        }
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
