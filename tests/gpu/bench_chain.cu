// bench_chain.cu: `lily-gpu-test chain` — what one decode kernel costs inside a step. Each kernel
// family is launched back to back at the real model's shapes, N launches captured as one CUDA graph
// (as a decode step is), and the replay time is divided by N. Dense weights rotate through copies
// that together exceed the 50 MB L2 and the routed experts change with every launch, so the bytes
// come from DRAM as in a step. Each chain runs with PDL (the step's default), without it, and with
// the early trigger (LILY_CUDA_PDL_EARLY 1 and 2), next to an empty kernel's chain: the difference
// between a family and the empty kernel is its own latency, and GB/s is against its own bytes.
// A benchmark, not a test: it prints numbers and checks nothing.
#include "gpu_test.h"
#include "../../src/cuda/cuda_common.cuh"

__global__ void chain_fill(uint32_t *p, size_t n, uint32_t seed, uint32_t mask, uint32_t or_) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 0x9E3779B1u ^ seed * 0x85EBCA77u;
        h ^= h >> 15, h *= 0x2C1B3C6Du, h ^= h >> 12;
        p[i] = (h & mask) | or_;
    }
}
__global__ void chain_empty(int *sink) {
    pdl_wait();
    pdl_trigger();
    if (threadIdx.x == 0 && blockIdx.x == 0 && sink) *sink = 0;
}

static uint32_t *chain_alloc(size_t words, uint32_t seed, uint32_t mask = 0xffffffffu, uint32_t or_ = 0) {
    uint32_t *p;
    CK(cudaMalloc(&p, words * 4 + 16));
    chain_fill<<<1024, 256>>>(p, words, seed, mask, or_);
    CK(cudaGetLastError());
    return p;
}
static float *chain_floats(size_t n, uint32_t seed) {
    // bf16 pairs in [0.5, 1): finite, moderate activations (the low half is ignored as fp32 noise).
    return (float *)chain_alloc(n, seed, 0x007f0000u, 0x3f000000u);
}
// A random quantised matrix: any codes; scale|bias words kept small and finite.
static dq_mat chain_mat(int rows, int cols, int bits, int group, uint32_t seed) {
    dq_mat m = {};
    m.rows = rows, m.cols = cols, m.bits = bits, m.group = group, m.fmt = DQ_FAST;
    m.codes = (const uint4 *)chain_alloc((size_t)rows * cols * bits / 32, seed);
    m.sb = chain_alloc((size_t)rows * (cols / group), seed + 1, 0x003f003fu, 0xbc003c00u);
    return m;
}
static double mat_bytes(const dq_mat &m) {
    return (double)m.rows * m.cols * m.bits / 8 + (double)m.rows * (m.cols / m.group) * 4;
}

struct chain_seg { int rows, bits; float *y; };
// C copies of one RMS-normed launch over `cols` inputs with these segments (group 64, fresh random
// weights per copy, seeds from seed0); *bytes = one launch's weight bytes.
static std::vector<gv_args> chain_gemvs(int C, int cols, const float *x, const float *w,
                                        std::initializer_list<chain_seg> segs, uint32_t seed0, double *bytes) {
    std::vector<gv_args> a(C);
    *bytes = 0;
    for (int c = 0; c < C; c++) {
        memset(&a[c], 0, sizeof(gv_args));
        a[c].cols = cols, a[c].x = x, a[c].pro = PRO_RMSNORM, a[c].norm_w = w, a[c].eps = 1e-6f;
        for (const chain_seg &s : segs) {
            gv_seg &g = a[c].seg[a[c].nseg++];
            g.m = chain_mat(s.rows, cols, s.bits, 64, seed0 + 100 * a[c].nseg + c), g.y = s.y;
            if (c == 0) *bytes += mat_bytes(g.m);
        }
    }
    return a;
}

static void set_early(int e) {
    gemv_set_modes(0, e), moe_set_modes(0, e), moe_fused_set_modes(0, e), gdn_set_modes(0, e), gdn_front_set_modes(0, e);
    attn_set_modes(0, e), norm_rope_set_modes(0, e), sample_set_modes(0, e);
    CK(cudaDeviceSynchronize());
}

#ifdef LILY_TRACE
// TRACE=1 build: after timing, the graph runs once more with the stamps on; the last launch's
// blocks are summarised (medians over blocks of the time between points, in SM cycles and in µs at
// the device's clock; the span from the first block's entry to the last block's loop end).
static unsigned long long *g_tbuf;
static const int TBLOCKS = 4096;
static void trace_on(unsigned long long *p) { gemv_set_trace(p), moe_set_trace(p), moe_fused_set_trace(p), gdn_set_trace(p); }
static void trace_report(void) {
    std::vector<unsigned long long> t((size_t)TBLOCKS * LILY_TRACE_SLOTS);
    CK(cudaMemcpy(t.data(), g_tbuf, t.size() * 8, cudaMemcpyDeviceToHost));
    int khz = 0;
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
    std::vector<double> d[4], d5, dx[LILY_TRACE_SLOTS - 8];
    unsigned long long g0 = ~0ull, g3 = 0;
    int nb = 0;
    for (int b = 0; b < TBLOCKS; b++) {
        const unsigned long long *r = &t[(size_t)b * LILY_TRACE_SLOTS];
        if (!r[0] || !r[1] || !r[3]) continue;
        nb++;
        for (int p = 0; p < 4; p++)
            if (r[p + 1] && r[p + 1] >= r[p]) d[p].push_back((double)(r[p + 1] - r[p]));
        if (r[5] && r[5] >= r[1]) d5.push_back((double)(r[5] - r[1])); // the extra point 5, from the wait
        for (int p = 8; p < LILY_TRACE_SLOTS; p++)
            if (r[p] && r[p] >= r[1]) dx[p - 8].push_back((double)(r[p] - r[1]));
        g0 = r[6] < g0 ? r[6] : g0, g3 = r[7] > g3 ? r[7] : g3;
    }
    const char *nm[4] = {"entry->wait", "wait->staged", "staged->loop end", "loop end->exit"};
    printf("    trace (%d blocks, clock %.2f GHz): ", nb, khz / 1e6);
    for (int p = 0; p < 4; p++) {
        if (d[p].empty()) continue;
        std::sort(d[p].begin(), d[p].end());
        const double c = d[p][d[p].size() / 2];
        printf("%s %.0f cyc (%.2f us); ", nm[p], c, c / (khz * 1e-3));
    }
    if (!d5.empty()) {
        std::sort(d5.begin(), d5.end());
        printf("wait->point 5 %.0f cyc (%.2f us); ", d5[d5.size() / 2], d5[d5.size() / 2] / (khz * 1e-3));
    }
    for (int p = 8; p < LILY_TRACE_SLOTS; p++)
        if (!dx[p - 8].empty()) {
            std::sort(dx[p - 8].begin(), dx[p - 8].end());
            printf("wait->point %d %.2f us; ", p, dx[p - 8][dx[p - 8].size() / 2] / (khz * 1e-3));
        }
    printf("first entry -> last loop end %.2f us\n", nb ? (g3 - g0) * 1e-3 : 0.0);
}
#endif

// C copies of a GDN out_proj launch (gated norm over heads of 128, H rows of 4096, residual res
// into y), each with its own weights (together past the L2).
static std::vector<gv_args> chain_out_proj(int C, int H, const float *x, const float *w, const float *z, float *y,
                                           const float *res) {
    std::vector<gv_args> a(C);
    for (int c = 0; c < C; c++) {
        memset(&a[c], 0, sizeof(gv_args));
        a[c].nseg = 1, a[c].cols = 4096, a[c].x = x, a[c].pro = PRO_GATED, a[c].norm_w = w, a[c].eps = 1e-6f;
        a[c].gz = z, a[c].ghd = 128, a[c].epi = GV_RESID;
        a[c].seg[0].m = chain_mat(H, 4096, 4, 64, 900 + c), a[c].seg[0].y = y, a[c].seg[0].res = res;
    }
    return a;
}

// Microseconds per launch of n launches replayed as one graph (median of 5 replays).
template <class F> static double chain_us(F launch, int n, bool trace = false) {
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < n; i++) launch(i, s);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    std::vector<float> t;
    for (int r = 0; r < 5; r++) {
        cudaEventRecord(e0, s);
        cudaGraphLaunch(ge, s);
        cudaEventRecord(e1, s);
        CK(cudaEventSynchronize(e1));
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
#ifdef LILY_TRACE
    if (trace) {
        if (!g_tbuf) CK(cudaMalloc(&g_tbuf, (size_t)TBLOCKS * LILY_TRACE_SLOTS * 8));
        CK(cudaMemset(g_tbuf, 0, (size_t)TBLOCKS * LILY_TRACE_SLOTS * 8));
        trace_on(g_tbuf);
        CK(cudaGraphLaunch(ge, s));
        CK(cudaStreamSynchronize(s));
        trace_on(NULL);
        trace_report();
    }
#else
    (void)trace;
#endif
    cudaGraphExecDestroy(ge), cudaGraphDestroy(g), cudaStreamDestroy(s);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    return t[2] * 1e3 / n;
}

// One family: PDL on, off, early 1, early 2. bytes: weights + state one launch reads (0: none).
template <class F> static void chain_row(const char *name, double bytes, F launch, int n = 240) {
    double us[4];
    const int pdl0 = lily_cuda_pdl;
    for (int v = 0; v < 4; v++) {
        lily_cuda_pdl = v != 1;
        set_early(v >= 2 ? v - 1 : 0);
        us[v] = chain_us(launch, n, v == 0);
    }
    lily_cuda_pdl = pdl0;
    set_early(0);
    printf("| %s | %.2f | %.0f | %.2f | %.2f | %.2f |\n", name, bytes / 1e6, bytes > 0 ? bytes / us[0] / 1e3 : 0.0,
           us[0], us[1], us[2] > us[3] ? us[3] : us[2]);
    printf("  (%s: early 1 %.2f us, early 2 %.2f us)\n", name, us[2], us[3]);
    fflush(stdout);
}

// LILY_CHAIN=word: only the families whose comment line names it (e.g. "experts"); all by default.
static bool chain_want(const char *what) {
    const char *o = getenv("LILY_CHAIN");
    return !o || strstr(what, o);
}

void run_chain(void) {
    const int H = 2048, E = 256, K = 8, I = 512, V = 248320;
    printf("| kernel (real shapes, weights from DRAM) | MB | GB/s (PDL) | us/launch PDL | no PDL | early trigger (best) |\n|---|---|---|---|---|---|\n");
    int *sink;
    CK(cudaMalloc(&sink, 64));
    for (int grid : {132, 396, 1056})
        if (chain_want("empty kernel"))
        chain_row(grid == 132 ? "empty kernel, 132 blocks" : grid == 396 ? "empty kernel, 396 blocks" : "empty kernel, 1056 blocks",
                  0, [&](int, cudaStream_t s) { launch_k(chain_empty, grid, 256, 0, s, sink); });

    float *x = chain_floats(8192, 1), *w = chain_floats(8192, 2), *z = chain_floats(8192, 3);
    float *y0 = chain_floats(16384, 4), *y1 = chain_floats(16384, 5), *y2 = chain_floats(16384, 6),
          *y3 = chain_floats(16384, 7), *y4 = chain_floats(16384, 8);
    lily_cuda_gemv2 = 1;
    // Router + shared expert gate/up + shared gate score (8-bit router/score, 4-bit shared).
    if (chain_want("router")) {
        const int C = 40;
        double bytes;
        std::vector<gv_args> a = chain_gemvs(C, H, x, w, {{E, 8, y0}, {I, 4, y1}, {I, 4, y2}, {1, 8, y3}}, 0, &bytes);
        for (auto &g : a) g.x_out = y4;
        chain_row("norm + router + shared gate/up (gemv2)", bytes, [&](int i, cudaStream_t s) { gemv_launch(a[i % C], 0, s); });
        lily_cuda_gv2_bulk = 1;
        chain_row("  the same, first tiles bulk-copied before the wait (LILY_CUDA_GV2_BULK)", bytes,
                  [&](int i, cudaStream_t s) { gemv_launch(a[i % C], 0, s); });
        lily_cuda_gv2_bulk = 0;
        lily_cuda_gv_pro = 0;
        chain_row("  the same with the loop prologue", bytes, [&](int i, cudaStream_t s) { gemv_launch(a[i % C], 0, s); });
        lily_cuda_gv_pro = 1;
        for (auto &g : a) g.pro = PRO_PLAIN, g.x_out = NULL;
        chain_row("  the same without the norm prologue", bytes, [&](int i, cudaStream_t s) { gemv_launch(a[i % C], 0, s); });
        lily_cuda_gemv2 = 0;
        chain_row("  the same on the first GEMV kernel", bytes, [&](int i, cudaStream_t s) { gemv_launch(a[i % C], 0, s); });
        lily_cuda_gemv2 = 1;
    }
    // GDN in_proj: qkv 8192 + z 4096 + b 32 + a 32 rows of 2048.
    if (chain_want("GDN in_proj")) {
        const int C = 8;
        double bytes;
        std::vector<gv_args> a = chain_gemvs(C, H, x, w, {{8192, 4, y0}, {4096, 4, y1}, {32, 4, y2}, {32, 4, y3}}, 400, &bytes);
        chain_row("GDN in_proj (norm + qkv/z/b/a, gemv2)", bytes, [&](int i, cudaStream_t s) { gemv_launch(a[i % C], 0, s); });
        lily_cuda_gv2_bulk = 1;
        chain_row("  the same, first tiles bulk-copied before the wait", bytes, [&](int i, cudaStream_t s) { gemv_launch(a[i % C], 0, s); });
        lily_cuda_gv2_bulk = 0;
        lily_cuda_gemv2 = 0;
        chain_row("  the same on the first GEMV kernel", bytes, [&](int i, cudaStream_t s) { gemv_launch(a[i % C], 0, s); });
        lily_cuda_gemv2 = 1;
    }
    // GDN out_proj: gated norm over heads of 128, 2048 rows of 4096, residual epilogue.
    if (chain_want("GDN out_proj")) {
        const int C = 24;
        std::vector<gv_args> a = chain_out_proj(C, H, x, w, z, y0, y1);
        chain_row("GDN out_proj (gated norm + 2048x4096 + residual, gemv2)", mat_bytes(a[0].seg[0].m),
                  [&](int i, cudaStream_t s) { gemv_launch(a[i % C], 0, s); });
        lily_cuda_gv2_bulk = 1;
        chain_row("  the same, first tiles bulk-copied before the wait", mat_bytes(a[0].seg[0].m),
                  [&](int i, cudaStream_t s) { gemv_launch(a[i % C], 0, s); });
        lily_cuda_gv2_bulk = 0;
        lily_cuda_gv_pro = 0;
        chain_row("  the same with the loop prologue", mat_bytes(a[0].seg[0].m),
                  [&](int i, cudaStream_t s) { gemv_launch(a[i % C], 0, s); });
        lily_cuda_gv_pro = 1;
        lily_cuda_gemv2 = 0;
        chain_row("  the same on the first GEMV kernel", mat_bytes(a[0].seg[0].m),
                  [&](int i, cudaStream_t s) { gemv_launch(a[i % C], 0, s); });
        lily_cuda_gemv2 = 1;
    }
    // Routed experts: a different top-8 every launch (64 logit vectors).
    if (chain_want("Routed experts") || chain_want("layer tail")) {
        moe_w mw = {chain_mat(E * I, H, 4, 64, 1000), chain_mat(E * I, H, 4, 64, 1001), chain_mat(E * H, I, 4, 64, 1002), E, K, I, H, 1, nullptr, nullptr};
        const int NL = 64;
        float *lg = chain_floats((size_t)NL * E, 1003);
        int *ids;
        float *wts, *h = chain_floats(K * I, 1004);
        CK(cudaMalloc(&ids, NL * K * 4));
        CK(cudaMalloc(&wts, NL * K * 4));
        std::vector<int> hid(NL * K);
        rng r(5);
        for (int l = 0; l < NL; l++)
            for (int k = 0; k < K; k++) hid[l * K + k] = (int)(r.next() % E);
        CK(cudaMemcpy(ids, hid.data(), NL * K * 4, cudaMemcpyHostToDevice));
        CK(cudaMemset(wts, 0, NL * K * 4));
        const double gu = 2.0 * K * I * ((double)H / 2 + H / 64 * 4), dn = K * H * ((double)I / 2 + I / 64 * 4);
        for (int lat : {0, 1}) {
            lily_cuda_moe_lat = lat;
            chain_row(lat ? "  the same, latency variant (LILY_CUDA_MOE_LAT)" : "experts gate/up (top-k + silu*up, 8 x 1024 rows)", gu,
                      [&](int i, cudaStream_t s) { moe_gate_up(mw, lg + (i % NL) * E, x, h, ids + (i % NL) * K, wts + (i % NL) * K, s); });
        }
        lily_cuda_moe_lat = 0;
        std::vector<dq_mat> sd(40);
        for (int c = 0; c < 40; c++) sd[c] = chain_mat(H, I, 4, 64, 1100 + c);
        const double sdb = mat_bytes(sd[0]);
        for (int v : {0, 1, 2}) { // split 4, split 4 latency variant, split 1
            lily_cuda_moe_ks = v == 2 ? 1 : 4, lily_cuda_moe_lat = v == 1;
            chain_row(v == 0 ? "experts down + shared down (split 4)" : v == 1 ? "  the same, latency variant" : "  the same, split 1",
                      dn + sdb, [&](int i, cudaStream_t s) {
                          moe_down(mw, h, ids + (i % NL) * K, wts + (i % NL) * K, sd[i % 40], y1, y2, y3, y0, y4, s);
                      });
        }
        lily_cuda_moe_ks = 4, lily_cuda_moe_lat = 0;
        // Both in one launch (moe_fused.cu), the shared expert's down rows rotating as above (the down
        // slice as LILY_CUDA_MOE_FUSED_TMA says, default 1).
        const char *tma = getenv("LILY_CUDA_MOE_FUSED_TMA"), *dsl = getenv("LILY_CUDA_MOE_DSL");
        if (tma) lily_cuda_moe_fused_tma = atoi(tma) != 0;
        // The down slice from the slice-major copy, as a decode step takes it (LILY_CUDA_MOE_DSL, default 1).
        void *dsl_mem = nullptr;
        if (!dsl || atoi(dsl)) moe_dsl_build(&mw, &dsl_mem, 0, 0);
        float *part;
        unsigned *bar;
        CK(cudaMalloc(&part, moe_fused_part_floats(mw) * 4));
        CK(cudaMalloc(&bar, 8));
        CK(cudaMemset(bar, 0, 8));
        chain_row("experts gate/up + down + shared down in one launch (moe_fused)", gu + dn + sdb, [&](int i, cudaStream_t s) {
            moe_fused(mw, NULL, 0, lg + (i % NL) * E, x, ids + (i % NL) * K, wts + (i % NL) * K, sd[i % 40], y1, y2, y3, y0, y0,
                      part, bar, s);
        });
        // The same adding into the fixed-point sum (LILY_CUDA_MOE_ACC: no grid barrier, no sums; nothing reads
        // acc here, and 240 launches' sums stay far inside its range).
        unsigned long long *acc;
        CK(cudaMalloc(&acc, (H + 1) * sizeof(unsigned long long)));
        CK(cudaMemset(acc, 0, (H + 1) * sizeof(unsigned long long)));
        chain_row("  the same, into the fixed-point sum (moe_acc)", gu + dn + sdb, [&](int i, cudaStream_t s) {
            moe_fused(mw, NULL, 0, lg + (i % NL) * E, x, ids + (i % NL) * K, wts + (i % NL) * K, sd[i % 40], y1, y2, y3, y0, y0,
                      part, bar, s, acc);
        });
        // A GDN layer's tail: gated norm + out_proj + residual, norm + router + shared gate/up, the
        // experts; as three launches, then with the first two as moe_fused's front (LILY_CUDA_MOE_FRONT).
        // Nothing accumulates from launch to launch (out_proj adds to a fixed residual), so the
        // routing stays finite.
        if (chain_want("layer tail")) {
            const int CO = 24, CR = 40;
            float *rl = chain_floats((size_t)NL * E, 1200), *xn = chain_floats(H, 1201), *y5 = chain_floats(16384, 1202);
            std::vector<gv_args> go = chain_out_proj(CO, H, x, w, z, y0, y4);
            double rbytes;
            std::vector<gv_args> gr = chain_gemvs(CR, H, y0, w, {{E, 8, rl}, {I, 4, y1}, {I, 4, y2}, {1, 8, y3}}, 0, &rbytes);
            for (auto &g : gr) g.x_out = xn;
            const double tb = gu + dn + sdb + rbytes + mat_bytes(go[0].seg[0].m);
            chain_row("layer tail: out_proj, router, experts as 3 launches", tb, [&](int i, cudaStream_t s) {
                gemv_launch(go[i % CO], 0, s);
                gemv_launch(gr[i % CR], 0, s);
                moe_fused(mw, NULL, 0, rl, xn, ids + (i % NL) * K, wts + (i % NL) * K, sd[i % 40], y1, y2, y3, y0, y5,
                          part, bar, s);
            }, 120);
            chain_row("  the same in one launch (moe_fused with its front)", tb, [&](int i, cudaStream_t s) {
                const gv_args f[2] = {go[i % CO], gr[i % CR]};
                moe_fused(mw, f, 2, rl, NULL, ids + (i % NL) * K, wts + (i % NL) * K, sd[i % 40], y1, y2, y3, y0, y5, part,
                          bar, s);
            }, 120);
            chain_row("  the same, router in moe_fused's front, out_proj its own launch", tb, [&](int i, cudaStream_t s) {
                gemv_launch(go[i % CO], 0, s);
                moe_fused(mw, &gr[i % CR], 1, rl, NULL, ids + (i % NL) * K, wts + (i % NL) * K, sd[i % 40], y1, y2, y3, y0,
                          y5, part, bar, s);
            }, 120);
        }
        CK(cudaFree(dsl_mem)); // (nullptr when not built)
    }
    // GDN conv + delta rule: 32 v heads of 128, 16 k heads, fp32 state 2 MB per layer (30 layers).
    if (chain_want("GDN conv")) {
        gdn_dims d = {16, 32, 128, 128, 4};
        const int L = 30, C = 2 * 16 * 128 + 32 * 128;
        std::vector<float *> S(L), ring(L);
        for (int l = 0; l < L; l++) {
            S[l] = chain_floats((size_t)32 * 128 * 128, 2000 + l);
            ring[l] = chain_floats((size_t)4 * C, 3000 + l);
        }
        float *cw = chain_floats((size_t)C * 4, 4000), *dtb = chain_floats(32, 4001), *A = chain_floats(32, 4002);
        int *pos;
        CK(cudaMalloc(&pos, 4));
        CK(cudaMemset(pos, 0, 4));
        for (int v : {0, 1, 2, 3}) { // split 8 / 16, each without and with the latency variant
            const int ns = v < 2 ? 8 : 16;
            lily_cuda_gdn_lat = v & 1;
            char name[96];
            snprintf(name, sizeof name, "%sGDN conv + delta rule (split %d%s)", v ? "  " : "", ns, v & 1 ? ", latency variant" : "");
            chain_row(name, 2.0 * 32 * 128 * 128 * 4,
                      [&](int i, cudaStream_t s) { gdn_step(d, y0, y1, y2, cw, dtb, A, ring[i % L], S[i % L], y3, pos, ns, s); });
        }
        lily_cuda_gdn_lat = 0;
    }
    // Decode attention + split-KV combine (16 q heads, 2 KV heads of 256, bf16 cache) at 4K, 32K and
    // 128K context: the KV of a layer is 8 MB at 4K (10 layers rotate, 84 MB, past the L2), 67 MB at
    // 32K, 268 MB at 128K. Unpacked at split 32 with the plain and the parallel combine
    // (LILY_CUDA_ATTN_COMB); packed at split 64 on the CUDA cores (attn.cu) and on the tensor cores
    // (attn_tc.cu, LILY_CUDA_ATTN_TC), with the parallel combine.
    for (int ctx : {4096, 32768, 131072}) {
        if (!chain_want("Decode attention")) break;
        const int L = ctx == 4096 ? 10 : 2, hq = 16, hkv = 2, D = 256, ns = 32, nsp = 64;
        attn_dims d = {hq, hkv, D, 64, ctx, 1e7f, 1e-6f, 0};
        std::vector<uint16_t *> kc(L), vc(L);
        for (int l = 0; l < L; l++) { // bf16 noise; the values do not matter for the time
            CK(cudaMalloc(&kc[l], (size_t)hkv * ctx * D * 2));
            CK(cudaMalloc(&vc[l], (size_t)hkv * ctx * D * 2));
            CK(cudaMemset(kc[l], 0x3c, (size_t)hkv * ctx * D * 2));
            CK(cudaMemset(vc[l], 0x3c, (size_t)hkv * ctx * D * 2));
        }
        float *q = chain_floats((size_t)hq * D, 6000), *qg = chain_floats((size_t)hq * 2 * D, 6001), *part, *o;
        CK(cudaMalloc(&part, attn_part_floats(d, nsp) * sizeof(float)));
        CK(cudaMalloc(&o, (size_t)hq * D * sizeof(float)));
        int *pos;
        CK(cudaMalloc(&pos, 4));
        const int p = ctx - 1;
        CK(cudaMemcpy(pos, &p, 4, cudaMemcpyHostToDevice));
        for (int comb : {0, 1}) {
            lily_cuda_attn_comb = comb;
            char name[128];
            snprintf(name, sizeof name, "%sattention decode + combine, %dK context (split %d%s)", comb ? "  " : "",
                     ctx / 1024, ns, comb ? ", parallel combine" : "");
            chain_row(name, 2.0 * hkv * ctx * D * 2, [&](int i, cudaStream_t s) {
                attn_decode(d, q, kc[i % L], vc[i % L], qg, part, o, pos, ns, 0, s);
            });
        }
        const int tc_default = lily_cuda_attn_tc;
        for (int tc : {0, 1}) {
            lily_cuda_attn_tc = tc;
            char name[128];
            snprintf(name, sizeof name, "  packed, split %d, %s", nsp, tc ? "tensor cores" : "CUDA cores");
            chain_row(name, 2.0 * hkv * ctx * D * 2, [&](int i, cudaStream_t s) {
                attn_decode(d, q, kc[i % L], vc[i % L], qg, part, o, pos, nsp, 1, s);
            });
        }
        lily_cuda_attn_tc = tc_default;
        lily_cuda_attn_comb = 0;
    }
    // lm_head with the argmax epilogue (286 MB: 20 launches).
    if (chain_want("lm_head")) {
        gv_args a;
        memset(&a, 0, sizeof a);
        a.nseg = 1, a.cols = H, a.x = x, a.pro = PRO_RMSNORM, a.norm_w = w, a.eps = 1e-6f, a.epi = GV_LOGITS;
        a.seg[0].m = chain_mat(V, H, 4, 64, 5000);
        float2 *amax;
        CK(cudaMalloc(&amax, gemv_max_blocks() * sizeof(float2)));
        int *pos;
        CK(cudaMalloc(&pos, 4));
        CK(cudaMemset(pos, 0, 4));
        a.amax = amax, a.pos = pos;
        chain_row("lm_head (norm + 248320x2048 + argmax)", mat_bytes(a.seg[0].m), [&](int, cudaStream_t s) { gemv_launch(a, 0, s); }, 20);
    }
    lily_cuda_gemv2 = 0;
}
