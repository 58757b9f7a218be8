// dev/persist/persist.cu: a prototype that answers one question before a persistent decode kernel is
// built: if every SM streams its share of the *next* GEMVs' 4-bit weights into a shared-memory ring
// (cp.async.bulk, mbarriers) while its other warps wait on grid-wide barriers for the activations,
// how close does a chain of dependent GEMVs get to the copy bandwidth? Today each decode kernel
// fetches its weights only after the previous kernel has finished (chain benchmark: 7-14 us per
// GEMV launch against 0.4-3.3 us of bytes).
//
// One cooperative kernel, one block per SM: warps 0..7 compute, warp 8 is the producer. The phases of
// one "step" are 40 layers x 5 dependent GEMVs at the shapes of a GDN layer's weight streams:
//   A in_proj 12352 x 2048, B out_proj 2048 x 4096, C router + shared gate/up 1280 x 2048,
//   D experts gate/up 8192 x 2048, E experts down + shared 2048 x 4096.
// Phase p's input is phase p-1's output (index modulo its length), RMS-normalised by every block, so
// each phase needs all blocks' previous results: a grid barrier (a monotone counter). D and E read
// routed experts, so their weights may only be requested once C is complete (the producer waits for C).
// The GDN/attention state work and the real formats (mma dequant, 8-bit router) are left out: this
// measures the schedule, not the kernels. Weights are row records [K/2 B codes][K/64 x u32 scale|bias]
// (bf16 pair, w = s*q + b, groups of 64), so one block's rows are one contiguous range.
//
// Modes: 0 full; 1 no run-ahead (the producer requests phase p only after p-1 is complete, as
// separate kernels do); 2 no math (barriers + streaming only); 3 the ring alone (no barriers, no
// math); 4 the same without the per-phase x preparation; 5 plain 16-byte loads, no ring (ceiling).
// Usage: persist LAYERS REPS [RUN...], RUN = 100 * X + mode * 10 + bulk copies per ring slot (1, 2, 4,
// 8); X: 0 = x by loads, 1 = by one bulk copy per CTA, 2 = by one multicast per cluster of PERSIST_CS
// CTAs (default 2), whose rank 0 alone waits at the grid barrier (the data's arrival releases the rest).
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fopenmp -o persist persist.cu
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr int NCW = 8;             // compute warps
constexpr int NT = (NCW + 1) * 32; // + the producer warp
constexpr int SLOT = 18432;        // ring slot: 16 rows of K = 2048 (1152 B) or 8 of K = 4096
constexpr int NSLOT = 9;           // 162 KB of ring per SM (room for two x buffers of the multicast mode)
constexpr int KMAX = 4096;

struct Phase {
    const uint8_t *w; // rows x rowbytes
    const float *xsrc; // previous output (or the step input)
    float *y;
    int rows, K, xlen, gate; // gate: the phase whose completion the producer waits for (-1: none)
};

__device__ __forceinline__ uint32_t sm_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mb_init(uint64_t *b, int n) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sm_addr(b)), "r"(n) : "memory");
}
__device__ __forceinline__ void mb_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sm_addr(b)) : "memory");
}
__device__ __forceinline__ void mb_expect(uint64_t *b, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sm_addr(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mb_wait(uint64_t *b, uint32_t parity) {
    asm volatile("{\n.reg .pred P;\nW: mbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1;\n@!P bra W;\n}" ::"r"(sm_addr(b)),
                 "r"(parity) : "memory");
}
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(sm_addr(dst)),
                 "l"(src), "r"(bytes), "r"(sm_addr(bar)) : "memory");
}
// The same copy into the same shared-memory offset of every CTA of the cluster in `mask`, each
// completing on its own mbarrier at `bar`'s offset (x read once per cluster instead of once per SM).
__device__ __forceinline__ void bulk_multicast(void *dst, const void *src, uint32_t bytes, uint64_t *bar, uint16_t mask) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;" ::"r"(sm_addr(dst)),
                 "l"(src), "r"(bytes), "r"(sm_addr(bar)), "h"(mask) : "memory");
}
__device__ __forceinline__ uint32_t ld_acquire(const unsigned *p) {
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void cw_sync() { asm volatile("bar.sync 1, %0;" ::"n"(NCW * 32) : "memory"); }
__device__ __forceinline__ float wsum(float v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ void spin_until(const unsigned *ctr, unsigned target) {
    while (ld_acquire(ctr) < target) __nanosleep(32);
}

// One lane's share of a row: its 64-weight group g of the record (codes, then scale|bias words).
__device__ __forceinline__ float group_dot(const uint8_t *rec, int g, int K, const float *xr, float xsum) {
    const uint4 c0 = *(const uint4 *)(rec + g * 32), c1 = *(const uint4 *)(rec + g * 32 + 16);
    const uint32_t sbw = *(const uint32_t *)(rec + K / 2 + g * 4);
    const uint32_t cw[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
    float a4[4] = {0.0f, 0.0f, 0.0f, 0.0f}; // four chains, so the FMA latency is not serialised
#pragma unroll
    for (int u = 0; u < 8; u++)
#pragma unroll
        for (int j = 0; j < 8; j++) // q exact as (2^23 + q) - 2^23
            a4[j & 3] = fmaf(xr[u * 8 + j], __uint_as_float(((cw[u] >> (4 * j)) & 15u) | 0x4B000000u) - 8388608.0f, a4[j & 3]);
    const float acc = (a4[0] + a4[1]) + (a4[2] + a4[3]);
    return __uint_as_float(sbw << 16) * acc + __uint_as_float(sbw & 0xffff0000u) * xsum;
}

// rows of phase ph owned by block b
__host__ __device__ inline void block_rows(int rows, int b, int nb, int *r0, int *r1) {
    *r0 = (int)((long)rows * b / nb), *r1 = (int)((long)rows * (b + 1) / nb);
}

__global__ void __launch_bounds__(NT, 1) persist_kernel(const Phase *phases, int nph, unsigned *ctr, unsigned base,
                                                      int mode, int csplit, int xtma, unsigned long long *stamps) {
    extern __shared__ __align__(128) uint8_t smem[];
    uint8_t *ring = smem;
    float *xs = (float *)(smem + NSLOT * SLOT), *xraw = xs + KMAX; // xraw: two buffers of KMAX
    __shared__ uint64_t full[NSLOT], empty[NSLOT], xbar[2];
    __shared__ float red[NCW];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, nb = gridDim.x, b = blockIdx.x;
    if (tid == 0) {
        for (int i = 0; i < NSLOT; i++) mb_init(&full[i], 1), mb_init(&empty[i], NCW);
        mb_init(&xbar[0], 1), mb_init(&xbar[1], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    uint32_t crank = 0, cn = 1;
    if (xtma == 2) { // every CTA's mbarriers exist before any multicast can land on them
        asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
        asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(crank));
        asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(cn));
    }
    const bool grid = mode < 3, math = mode < 2, prep = mode < 4;
    if (mode == 5) { // plain loads by the compute warps, no ring: the streaming ceiling
        if (warp == NCW) return;
        uint32_t acc = 0;
        for (int p = 0; p < nph; p++) {
            const Phase ph = phases[p];
            const int rb = ph.K / 2 + ph.K / 16;
            int r0, r1;
            block_rows(ph.rows, b, nb, &r0, &r1);
            const uint4 *src = (const uint4 *)(ph.w + (long)r0 * rb);
            const int n16 = (r1 - r0) * rb / 16;
            int i = tid;
            for (; i + 7 * NCW * 32 < n16; i += 8 * NCW * 32) {
                uint4 v[8];
#pragma unroll
                for (int u = 0; u < 8; u++) v[u] = __ldcs(src + i + u * NCW * 32);
#pragma unroll
                for (int u = 0; u < 8; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
            }
            for (; i < n16; i += NCW * 32) { const uint4 v = __ldcs(src + i); acc ^= v.x ^ v.y ^ v.z ^ v.w; }
        }
        if (acc == 0x12345678u) ctr[1] = acc; // keeps the loads
        return;
    }

    if (warp == NCW) { // producer: stream this block's rows of every phase, as far ahead as the ring allows
        if (lane) return;
        int slot = 0, round = 0;
        for (int p = 0; p < nph; p++) {
            const Phase ph = phases[p];
            const int gate = mode == 1 ? p - 1 : ph.gate;
            if (grid && gate >= 0) spin_until(ctr, base + (unsigned)(gate + 1) * nb);
            const int rb = ph.K / 2 + ph.K / 16, rpc = SLOT / rb;
            int r0, r1;
            block_rows(ph.rows, b, nb, &r0, &r1);
            for (int r = r0; r < r1; r += rpc) {
                const int n = min(rpc, r1 - r);
                if (round) mb_wait(&empty[slot], (round - 1) & 1);
                mb_expect(&full[slot], n * rb);
                const int part = n * rb / csplit; // a multiple of 16: rb is 1152 or 2304, csplit <= 8
                for (int k = 0; k < csplit; k++)
                    bulk_copy(ring + slot * SLOT + k * part, ph.w + (long)r * rb + k * part, part, &full[slot]);
                if (++slot == NSLOT) slot = 0, round++;
            }
        }
        return;
    }

    // compute warps
    int slot = 0, round = 0;
    for (int p = 0; p < nph; p++) {
        const Phase ph = phases[p];
        const int K = ph.K, nseg = K / 2048, rb = K / 2 + K / 16, rpc = SLOT / rb;
        const int xl = min(K, ph.xlen); // x[c] = xsrc[c mod xlen] needs the first xl values
        // x buffer and its mbarrier: one (parity p & 1) for the per-CTA copy, two alternating
        // (parity (p >> 1) & 1) for the multicast, whose next copy may land while this one is read.
        const int xbf = xtma == 2 ? (p & 1) : 0;
        float *xin = xraw + xbf * KMAX;
        uint64_t *xb = &xbar[xbf];
        const uint32_t xpar = xtma == 2 ? ((p >> 1) & 1) : (p & 1);
        if (xtma == 2 && prep) { // cluster multicast: rank 0 alone waits at the barrier and reads x
            if (tid == 0) mb_expect(xb, xl * 4); // this CTA's own expectation (before or after the data)
            if (tid == 0 && crank == 0) {
                if (grid && p) spin_until(ctr, base + (unsigned)p * nb);
                asm volatile("fence.proxy.async.global;" ::: "memory");
                bulk_multicast(xin, ph.xsrc, xl * 4, xb, (uint16_t)((1u << cn) - 1));
            }
        } else {
            if (grid && p && tid == 0) spin_until(ctr, base + (unsigned)p * nb);
            if (xtma && prep && tid == 0) { // x by one bulk copy instead of 256 threads' loads
                asm volatile("fence.proxy.async.global;" ::: "memory");
                mb_expect(xb, xl * 4);
                bulk_copy(xin, ph.xsrc, xl * 4, xb);
            }
        }
        if (grid && p) cw_sync();
        if (b == 0 && tid == 0 && stamps) {
            unsigned long long t;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
            stamps[p] = t;
        }
        // x = rmsnorm(xsrc[i mod xlen]); every block computes it (as every decode GEMV block does)
        float xv[KMAX / (NCW * 32)], ss = 0.0f;
        const int per = prep ? K / (NCW * 32) : 0;
        if (xtma && prep) mb_wait(xb, xpar); // for the multicast this is also the grid barrier
        constexpr int PMAX = KMAX / (NCW * 32);
        if (xtma) {
#pragma unroll
            for (int i = 0; i < PMAX; i++) xv[i] = i < per ? xin[(tid + i * NCW * 32) % xl] : 0.0f;
        } else { // all loads issued before any use (one round trip)
#pragma unroll
            for (int i = 0; i < PMAX; i++) xv[i] = i < per ? __ldcg(ph.xsrc + (tid + i * NCW * 32) % ph.xlen) : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < PMAX; i++) ss += xv[i] * xv[i];
        if (prep) {
            ss = wsum(ss);
            if (lane == 0) red[warp] = ss;
            cw_sync();
            ss = 0.0f;
            for (int i = 0; i < NCW; i++) ss += red[i];
            const float sc = rsqrtf(ss / K + 1e-6f);
#pragma unroll
            for (int i = 0; i < PMAX; i++)
                if (i < per) xs[tid + i * NCW * 32] = xv[i] * sc;
            cw_sync();
        }
        // this lane's group of each 2048-column segment (columns 64 * lane.. of segment 0, and of segment 1
        // when K = 4096), in registers for the whole phase
        float xr[128], xsum0 = 0.0f, xsum1 = 0.0f;
        if (math) {
#pragma unroll
            for (int j = 0; j < 64; j += 4) {
                const float4 v = *(const float4 *)(xs + lane * 64 + j);
                xr[j] = v.x, xr[j + 1] = v.y, xr[j + 2] = v.z, xr[j + 3] = v.w;
                xsum0 += v.x + v.y + v.z + v.w;
            }
            if (nseg == 2)
#pragma unroll
                for (int j = 0; j < 64; j += 4) {
                    const float4 v = *(const float4 *)(xs + 2048 + lane * 64 + j);
                    xr[64 + j] = v.x, xr[64 + j + 1] = v.y, xr[64 + j + 2] = v.z, xr[64 + j + 3] = v.w;
                    xsum1 += v.x + v.y + v.z + v.w;
                }
        }
        int r0, r1;
        block_rows(ph.rows, b, nb, &r0, &r1);
        // each warp takes whole rows of a slot and releases the slot itself: no block barrier per slot
        for (int r = r0; r < r1; r += rpc) {
            const int n = min(rpc, r1 - r);
            mb_wait(&full[slot], round & 1);
            if (math)
                for (int rr = warp; rr < n; rr += NCW) {
                    const uint8_t *rec = ring + slot * SLOT + rr * rb;
                    float v = group_dot(rec, lane, K, xr, xsum0);
                    if (nseg == 2) v += group_dot(rec, 32 + lane, K, xr + 64, xsum1);
                    v = wsum(v);
                    if (lane == 0) ph.y[r + rr] = v;
                }
            __syncwarp();
            if (lane == 0) mb_arrive(&empty[slot]);
            if (++slot == NSLOT) slot = 0, round++;
        }
        cw_sync(); // this block's rows of phase p are written
        if (grid && tid == 0) {
            __threadfence();
            atomicAdd(ctr, 1u);
        }
    }
}

// ---- host ----
static uint64_t sm64(uint64_t &s) {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint32_t bf16_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return (u + 0x7FFF + ((u >> 16) & 1)) >> 16; }
static float bf16_f(uint32_t h) { uint32_t u = h << 16; float f; memcpy(&f, &u, 4); return f; }

int main(int argc, char **argv) {
    const int layers = argc > 1 ? atoi(argv[1]) : 40, reps = argc > 2 ? atoi(argv[2]) : 10;
    const int shapes[5][3] = {{12352, 2048, -1}, {2048, 4096, -1}, {1280, 2048, -1}, {8192, 2048, 2}, {2048, 4096, 2}};
    const char *names[5] = {"A in_proj 12352x2048", "B out_proj 2048x4096", "C router+shared 1280x2048",
                            "D experts gate/up 8192x2048", "E experts down 2048x4096"};
    const int nph = layers * 5;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const int nb = prop.multiProcessorCount;
    // weights (host copy kept for the reference)
    std::vector<long> woff(nph), yoff(nph);
    long wbytes = 0, ylen = 0;
    for (int p = 0; p < nph; p++) {
        const int *s = shapes[p % 5];
        woff[p] = wbytes, yoff[p] = ylen;
        wbytes += (long)s[0] * (s[1] / 2 + s[1] / 16), ylen += s[0];
    }
    std::vector<uint8_t> hw(wbytes);
    {
        uint64_t st = 12345;
        for (long i = 0; i + 8 <= wbytes; i += 8) { uint64_t v = sm64(st); memcpy(&hw[i], &v, 8); }
        for (int p = 0; p < nph; p++) { // scale|bias words: s in [0.01, 0.03), b = -s * (7.5 + noise)
            const int rows = shapes[p % 5][0], K = shapes[p % 5][1], rb = K / 2 + K / 16;
            for (long r = 0; r < rows; r++)
                for (int gq = 0; gq < K / 64; gq++) {
                    const uint64_t v = sm64(st);
                    const float s = 0.01f + 0.02f * (float)(v & 0xffff) / 65536.0f;
                    const float bb = -s * (7.5f + ((float)((v >> 16) & 0xffff) / 65536.0f - 0.5f));
                    const uint32_t wd = bf16_bits(s) | (bf16_bits(bb) << 16);
                    memcpy(&hw[woff[p] + r * rb + K / 2 + gq * 4], &wd, 4);
                }
        }
    }
    std::vector<float> hx(2048);
    { uint64_t st = 7; for (auto &v : hx) v = (float)((sm64(st) >> 40) / 16777216.0) * 2.0f - 1.0f; }
    uint8_t *dw; float *dy, *dx; unsigned *dctr; Phase *dph; unsigned long long *dst;
    CK(cudaMalloc(&dw, wbytes)); CK(cudaMalloc(&dy, ylen * 4)); CK(cudaMalloc(&dx, 2048 * 4));
    CK(cudaMalloc(&dctr, 8)); CK(cudaMalloc(&dph, nph * sizeof(Phase))); CK(cudaMalloc(&dst, nph * 8));
    CK(cudaMemcpy(dw, hw.data(), wbytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dx, hx.data(), 2048 * 4, cudaMemcpyHostToDevice));
    std::vector<Phase> hp(nph);
    for (int p = 0; p < nph; p++) {
        const int *s = shapes[p % 5];
        hp[p].w = dw + woff[p], hp[p].y = dy + yoff[p], hp[p].rows = s[0], hp[p].K = s[1];
        hp[p].xsrc = p ? dy + yoff[p - 1] : dx, hp[p].xlen = p ? shapes[(p - 1) % 5][0] : 2048;
        hp[p].gate = s[2] < 0 ? -1 : (p / 5) * 5 + s[2];
    }
    CK(cudaMemcpy(dph, hp.data(), nph * sizeof(Phase), cudaMemcpyHostToDevice));
    const int smem = NSLOT * SLOT + 3 * KMAX * 4;
    CK(cudaFuncSetAttribute(persist_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    // The multicast runs (x by cluster multicast): clusters of PERSIST_CS CTAs (default 2), as many
    // as can be resident at once (clusters live within a GPC, so possibly fewer than 132 CTAs).
    const int cs = getenv("PERSIST_CS") ? atoi(getenv("PERSIST_CS")) : 2;
    int nbc = nb / cs * cs;
    {
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = cs, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
        cfg.gridDim = dim3(nbc), cfg.blockDim = dim3(NT), cfg.dynamicSmemBytes = smem, cfg.attrs = at, cfg.numAttrs = 1;
        int ncl = 0;
        if (cudaOccupancyMaxActiveClusters(&ncl, persist_kernel, &cfg) == cudaSuccess && ncl > 0)
            nbc = std::min(nb / cs, ncl) * cs;
        cudaGetLastError();
        printf("multicast runs: clusters of %d, %d CTAs (%d clusters resident at most)\n", cs, nbc, ncl);
    }
    printf("persist: %d SMs, %d layers x 5 phases, %.1f MB of weights per step, ring %d KB per SM\n", nb, layers,
           wbytes / 1e6, NSLOT * SLOT / 1024);

    // CPU reference of the whole chain (double accumulation)
    std::vector<float> ref(ylen);
    {
        std::vector<float> x(KMAX);
        for (int p = 0; p < nph; p++) {
            const int rows = shapes[p % 5][0], K = shapes[p % 5][1], rb = K / 2 + K / 16;
            const float *src = p ? ref.data() + yoff[p - 1] : hx.data();
            const int xlen = p ? shapes[(p - 1) % 5][0] : 2048;
            double ss = 0;
            for (int c = 0; c < K; c++) ss += (double)src[c % xlen] * src[c % xlen];
            const float sc = (float)(1.0 / sqrt(ss / K + 1e-6));
            for (int c = 0; c < K; c++) x[c] = src[c % xlen] * sc;
#pragma omp parallel for
            for (int r = 0; r < rows; r++) {
                const uint8_t *rec = hw.data() + woff[p] + (long)r * rb;
                double y = 0;
                for (int gq = 0; gq < K / 64; gq++) {
                    uint32_t wd;
                    memcpy(&wd, rec + K / 2 + gq * 4, 4);
                    const float s = bf16_f(wd & 0xffff), bb = bf16_f(wd >> 16);
                    for (int j = 0; j < 64; j++) {
                        const int c = gq * 64 + j, q = (rec[c / 2] >> (4 * (c & 1))) & 15;
                        y += (double)x[c] * (s * q + bb);
                    }
                }
                ref[yoff[p] + r] = (float)y;
            }
        }
    }

    const char *mname[6] = {"full (run-ahead streaming)", "no run-ahead (phase p requested after p-1)",
                            "no math (barriers + streaming)", "ring only (no barriers, no math)",
                            "ring only, no x preparation", "plain loads, no ring (ceiling)"};
    // runs: mode * 10 + copies per chunk, from argv[3...] (default: all modes, 1 copy per chunk)
    std::vector<int> runs;
    for (int i = 3; i < argc; i++) runs.push_back(atoi(argv[i]));
    if (runs.empty()) runs = {1, 11, 21, 31, 41, 51};
    unsigned launches = 0;
    std::vector<float> gy(ylen);
    for (int run : runs) {
        int mode = run % 100 / 10, csplit = run % 10, xtma = run / 100;
        if (mode > 5 || csplit < 1 || csplit > 8 || (csplit & (csplit - 1))) { fprintf(stderr, "bad run %d\n", run); return 2; }
        std::vector<float> ts;
        std::vector<unsigned long long> st(nph);
        std::vector<double> ph_us(5, 0.0);
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
        for (int it = 0; it < reps + 1; it++) {
            CK(cudaMemset(dy, 0, ylen * 4));
            unsigned base = 0;
            CK(cudaMemset(dctr, 0, 4));
            unsigned long long *sp = dst;
            void *args[] = {(void *)&dph, (void *)&nph, (void *)&dctr, (void *)&base, (void *)&mode, (void *)&csplit, (void *)&xtma, (void *)&sp};
            CK(cudaEventRecord(e0));
            if (xtma == 2) { // clusters of `cs` CTAs, still cooperative (all resident)
                cudaLaunchConfig_t cfg = {};
                cudaLaunchAttribute at[2];
                at[0].id = cudaLaunchAttributeClusterDimension;
                at[0].val.clusterDim.x = cs, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
                at[1].id = cudaLaunchAttributeCooperative;
                at[1].val.cooperative = 1;
                cfg.gridDim = dim3(nbc), cfg.blockDim = dim3(NT), cfg.dynamicSmemBytes = smem, cfg.attrs = at, cfg.numAttrs = 2;
                CK(cudaLaunchKernelEx(&cfg, persist_kernel, (const Phase *)dph, nph, dctr, base, mode, csplit, xtma, sp));
            } else {
                CK(cudaLaunchCooperativeKernel((void *)persist_kernel, nb, NT, args, smem, 0));
            }
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            CK(cudaGetLastError());
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            launches++;
            if (it == 0) continue; // warm-up
            ts.push_back(ms * 1000.0f);
            CK(cudaMemcpy(st.data(), dst, nph * 8, cudaMemcpyDeviceToHost));
            for (int p = 1; p < nph; p++) ph_us[(p - 1) % 5] += (st[p] - st[p - 1]) / 1000.0 / (layers * reps);
        }
        std::sort(ts.begin(), ts.end());
        const float med = ts[ts.size() / 2];
        printf("mode %d, %d copies per chunk, x by %s: %-36s median %8.1f us per step (min %8.1f), %7.1f us per layer, %6.0f GB/s\n", mode, csplit, xtma ? "bulk copy" : "loads", mname[mode], med,
               ts[0], med / layers, wbytes / (med * 1e3));
        if (mode < 3) {
            printf("    block 0, barrier to barrier, us per phase:");
            for (int k = 0; k < 5; k++) printf(" %s %.2f;", names[k], ph_us[k]);
            printf("\n");
        }
        if (mode < 2) { // results against the reference
            CK(cudaMemcpy(gy.data(), dy, ylen * 4, cudaMemcpyDeviceToHost));
            double worst = 0;
            int wp = 0;
            for (int p = 0; p < nph; p++) {
                double num = 0, den = 0;
                for (int r = 0; r < shapes[p % 5][0]; r++) {
                    const double d = gy[yoff[p] + r] - ref[yoff[p] + r];
                    num += d * d, den += (double)ref[yoff[p] + r] * ref[yoff[p] + r];
                }
                const double rel = sqrt(num / (den + 1e-30));
                if (std::isnan(rel) || rel > worst) { worst = rel, wp = p; if (std::isnan(rel)) break; }
            }
            printf("    %s: worst phase rel_l2 %.2e (phase %d)\n", worst < 1e-4 ? "PASS" : "FAIL", worst, wp);
        }
    }
    // the bytes of each phase type at the copy ceiling, for the table
    printf("bytes per phase (MB):");
    for (int k = 0; k < 5; k++) printf(" %.2f", (double)shapes[k][0] * (shapes[k][1] / 2 + shapes[k][1] / 16) / 1e6);
    printf("\n");
    return 0;
}
