// main.cu: the GPU test binary (build/lily-gpu-test). The reference is always the CPU backend
// (lily_backend_cpu, fp32) or the HF fixtures' logits; no model code lives in the tests.
//   lily-gpu-test kernels [seed]      every kernel vs its CPU reference (odd sizes, fresh inputs)
//   lily-gpu-test e2e [seed]          a tiny random 4-bit model: GPU (fp32 and bf16 activations) vs
//                                     the CPU backend, graph vs plain launches, snapshots, bad input
//   lily-gpu-test fixtures DIR...     HF fixtures (tests/fixtures/models/*): GPU vs ref_logits.f32 in
//                                     five modes (all, step 1, step 3, prefill chunks of 5, token by
//                                     token), fp32 and bf16 activations
//   lily-gpu-test compare DIR [positions] [layers,...]
//                                     a (full-size) checkpoint: CPU vs GPU logits, teacher-forced,
//                                     for the model truncated to each layer count; per-layer RMS dump
//   lily-gpu-test full DIR            decode speed at 256/4K/32K/128K vs the measured roofline,
//                                     per-kernel breakdown, ablations, long greedy generation
//   lily-gpu-test pfprof DIR LEN,...  prefill per-phase breakdown at each prompt length (4K, 64K...)
//   lily-gpu-test chunks DIR N        an N-token prompt in prefill chunks of 16384 vs 4096 (logits agree)
//   lily-gpu-test chain               decode kernels at real shapes launched back to back in a graph:
//                                     time per launch with and without PDL (bench_chain.cu)
// Exit status 0 only when every check passed.
#include <algorithm>
#include <stdarg.h>
#include <string>
#include <thread>

#include "e2e.cuh"
#include "../../src/cuda/lily_cuda.h"

extern "C" {
#include "loader.h"
#include "sampler.h"
}

void run_kernel_tests(uint64_t seed);
void run_prefill_tests(uint64_t seed, bool bench, bool quick, bool small);
void run_qg_once(int M, int N, int K, int tile, int wg);
void run_chain(void);
extern int g_fail, g_pass;

// ---------------------------------------------------------------------------------------------
static bool read_file(const std::string &path, std::string &out) {
    FILE *f = fopen(path.c_str(), "rb");
    if (!f) return false;
    char buf[1 << 16];
    size_t k;
    out.clear();
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, k);
    fclose(f);
    return true;
}

// Every HF fixture: the GPU against the HF fp32 logits in three step modes, both precisions.
static int run_fixtures(int argc, char **argv) {
    const lily_backend *be = &lily_backend_cuda;
    for (int i = 0; i < argc; i++) {
        std::string dir = argv[i], ids_s, ref_s;
        lily_model m;
        int rc = lily_model_load(dir.c_str(), &m);
        if (rc) die(dir.c_str(), rc);
        if (!read_file(dir + "/ids.txt", ids_s) || !read_file(dir + "/ref_logits.f32", ref_s)) {
            report(false, "%s: ids.txt / ref_logits.f32 missing", dir.c_str());
            continue;
        }
        std::vector<int> ids;
        for (const char *p = ids_s.c_str(); *p;) {
            char *e;
            long v = strtol(p, &e, 10);
            if (e == p) { p++; continue; }
            ids.push_back((int)v), p = e;
        }
        const int V = m.cfg.vocab_size, n = (int)ids.size();
        if (ref_s.size() != (size_t)n * V * 4) {
            report(false, "%s: reference has %zu bytes, expected %d x %d floats", dir.c_str(), ref_s.size(), n, V);
            continue;
        }
        const float *ref = (const float *)ref_s.data();
        // HF's own bf16 forward of this fixture (tests/gpu/hf_bf16/NAME.f32): the precision floor.
        std::string name = dir.substr(dir.find_last_of('/') + 1), h16_s;
        const char *root = getenv("LILY_GPU_HF_BF16");
        bool have16 = read_file(std::string(root ? root : "tests/gpu/hf_bf16") + "/" + name + ".f32", h16_s) &&
                      h16_s.size() == ref_s.size();
        cmp_stats h16 = {};
        if (have16) {
            h16 = compare((const float *)h16_s.data(), ref, n, V, BF16_GAP);
            print_stats("HF bf16 vs HF fp32 (floor)", h16);
        }
        // HF fp32 on the 4-bit matrices rounded once to bf16 (tests/gpu/hf_bf16w/NAME.f32,
        // dev/precision/ref_bf16w.py): the reference of the bf16-weight prefill GEMM (qg_bf16w).
        std::string hw_s;
        const char *rootw = getenv("LILY_GPU_HF_BF16W");
        const bool havew = read_file(std::string(rootw ? rootw : "tests/gpu/hf_bf16w") + "/" + name + ".f32", hw_s) &&
                           hw_s.size() == ref_s.size();
        void *ctx;
        if ((rc = be->init(&m, &ctx))) die("init", rc);
        printf("%s: %d positions, vocab %d\n", dir.c_str(), n, V);
        // "chunk5": one call, prefill chunks of 5 tokens (bf16: the prefill kernels; fp32 activations
        // always run token by token); "tokenwise": one call with the prefill switch off.
        const int steps[5] = {0, 1, 3, 0, 0};
        const char *sname[5] = {"all", "step1", "step3", "chunk5", "tokenwise"};
        // Weight modes of the bf16 rows: exact (the folding GEMM) against the HF fp32 reference, then,
        // for a 4-bit checkpoint, bf16-rounded (the default) against the HF fp32 run on those weights.
        for (int pass = 0; pass < (havew ? 3 : 2); pass++) {
            const int f32 = pass == 0, bw = pass == 2;
            lily_cuda_set_opt(ctx, LILY_CUDA_OPT_F32ACT, f32);
            lily_cuda_set_opt(ctx, LILY_CUDA_OPT_QG_BF16W, bw);
            if (bw) ref = (const float *)hw_s.data();
            const char *mode = f32 ? "fp32-act" : bw ? "bf16-act bf16-weights" : "bf16-act";
            for (int k = 0; k < 5; k++) {
                lily_cuda_set_opt(ctx, LILY_CUDA_OPT_CHUNK, k == 3 ? 5 : 1024);
                lily_cuda_set_opt(ctx, LILY_CUDA_OPT_PREFILL, k != 4);
                std::vector<float> got = run_logits(be, ctx, ids, V, steps[k]);
                // fp32: the fixture test's own tolerance (2e-4 max|ref| + 1e-4, argmax at gaps > 2 tol).
                double tol = 2e-4 * 1.0, gap;
                cmp_stats c = compare(got.data(), ref, n, V, 0.0);
                tol = 2e-4 * c.maxref + 1e-4;
                gap = f32 ? 2 * tol / c.maxref : BF16_GAP;
                c = compare(got.data(), ref, n, V, gap);
                // bf16: no further from HF fp32 than 2x HF's own bf16 run (mean rel. L2), and top-1
                // agreement >= 85 % of positions (HF bf16 itself: 88-97 %).
                bool ok = f32 ? c.maxdiff <= tol && c.dec_agree == c.dec_n
                              : have16 && c.rel_mean <= 2 * h16.rel_mean && c.agree >= 0.85 * n;
                if (!f32 && have16) {
                    cmp_stats x = compare(got.data(), (const float *)h16_s.data(), n, V, BF16_GAP);
                    print_stats("GPU bf16 vs HF bf16", x);
                }
                if (bw) {
                    cmp_stats x = compare(got.data(), (const float *)ref_s.data(), n, V, BF16_GAP);
                    print_stats("GPU bf16w vs HF fp32 exact weights", x);
                }
                report(ok, "fixture %s %s %s: rel_l2 mean %.2e worst %.2e, max|diff| %.3g (fp32 tol %.3g), top-1 %d/%d (decisive %d/%d)",
                       dir.c_str(), mode, sname[k], c.rel_mean, c.rel_worst, c.maxdiff, tol,
                       c.agree, n, c.dec_agree, c.dec_n);
            }
        }
        be->free(ctx);
        lily_model_free(&m);
    }
    return 0;
}

// CPU backend vs GPU on a checkpoint (the full-size synth model): teacher-forced random tokens, for
// the model truncated to each layer count in `layers` (both backends read cfg.n_layers), so the
// depth at which the two part is visible; then a per-layer RMS dump of the GPU stream.
static int run_compare(const char *dir, int npos, const char *layers) {
    const lily_backend *be = &lily_backend_cuda, *cpu = &lily_backend_cpu;
    lily_model m;
    double t0 = lily_time();
    int rc = lily_model_load(dir, &m);
    if (rc) die(dir, rc);
    const int V = m.cfg.vocab_size, nl = m.cfg.n_layers;
    printf("%s: %d layers, loaded in %.1f s\n", dir, nl, lily_time() - t0);
    std::vector<int> toks = random_tokens(npos, V, 77);
    std::vector<int> Ls;
    for (const char *p = layers; p && *p;) {
        char *e;
        long v = strtol(p, &e, 10);
        if (e == p) { p++; continue; }
        if (v > 0 && v <= nl) Ls.push_back((int)v);
        p = e;
    }
    if (Ls.empty()) Ls.push_back(nl);
    for (int L : Ls) {
        m.cfg.n_layers = L;
        void *cctx, *ctx;
        t0 = lily_time();
        if ((rc = cpu->init(&m, &cctx))) die("cpu init", rc);
        std::vector<float> ref = run_logits(cpu, cctx, toks, V, 0);
        cpu->free(cctx);
        double tc = lily_time() - t0;
        t0 = lily_time();
        if ((rc = be->init(&m, &ctx))) die("init", rc);
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_F32ACT, 1);
        std::vector<float> g32 = run_logits(be, ctx, toks, V, 1);
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_F32ACT, 0);
        std::vector<float> g16 = run_logits(be, ctx, toks, V, 1);
        be->free(ctx);
        cmp_stats s32 = compare(g32.data(), ref.data(), npos, V, 1e-3);
        cmp_stats s16 = compare(g16.data(), ref.data(), npos, V, BF16_GAP);
        cmp_stats sx = compare(g16.data(), g32.data(), npos, V, BF16_GAP);
        printf("layers %d (cpu %.1f s, gpu %.1f s):\n", L, tc, lily_time() - t0);
        print_stats("gpu fp32-act vs cpu", s32);
        print_stats("gpu bf16-act vs cpu", s16);
        print_stats("gpu bf16-act vs gpu fp32-act", sx);
        if (L == nl) {
            report(s32.rel_worst <= F32_REL_TOL && s32.dec_agree == s32.dec_n,
                   "%s: %d positions, GPU fp32 activations vs CPU backend: rel_l2 worst %.2e (tol %.0e), top-1 %d/%d",
                   dir, npos, s32.rel_worst, F32_REL_TOL, s32.agree, npos);
            report(s16.rel_mean < BF16_REL_MEAN && s16.rel_worst < BF16_REL_WORST && s16.dec_agree == s16.dec_n,
                   "%s: %d positions, GPU bf16 activations vs CPU backend: rel_l2 mean %.2e worst %.2e, top-1 %d/%d (decisive %d/%d)",
                   dir, npos, s16.rel_mean, s16.rel_worst, s16.agree, npos, s16.dec_agree, s16.dec_n);
        }
    }
    m.cfg.n_layers = nl;
    // Residual-stream RMS per layer, 3 tokens, both precisions (stderr, "lily: cuda: layer ...").
    setenv("LILY_CUDA_DUMP", "1", 1);
    void *ctx;
    if ((rc = be->init(&m, &ctx))) die("init", rc);
    for (int f32 = 0; f32 <= 1; f32++) {
        fprintf(stderr, "-- per-layer dump, %s activations, 3 tokens\n", f32 ? "fp32" : "bf16");
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_F32ACT, f32);
        run_logits(be, ctx, std::vector<int>(toks.begin(), toks.begin() + (npos < 3 ? npos : 3)), V, 1);
    }
    be->free(ctx);
    unsetenv("LILY_CUDA_DUMP");
    lily_model_free(&m);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// The per-kernel table of one decode step of st (plain launches, an event after each; sums over layers).
static void print_step_table(void *ctx, void *st) {
    const char *names[32];
    double us[32];
    const int nf = lily_cuda_profile_step(ctx, st, names, us, 32);
    double tot = 0;
    for (int i = 0; i < nf; i++) tot += us[i];
    printf("| kernel family | us | %% |\n|---|---|---|\n");
    for (int i = 0; i < nf; i++) printf("| %s | %.1f | %.1f %% |\n", names[i], us[i], 100 * us[i] / tot);
    printf("| total | %.1f | |\n", tot);
}

// `prof DIR`: the per-kernel table of one 4K step alone (as `full` prints it; the switches from the
// environment), for A/Bs of a decode change without `full`'s minutes.
static int run_prof(const char *dir) {
    const lily_backend *be = &lily_backend_cuda;
    lily_model m;
    int rc = lily_model_load(dir, &m);
    if (rc) die(dir, rc);
    void *ctx, *st;
    if ((rc = be->init(&m, &ctx))) die("init", rc);
    if ((rc = be->state_new(ctx, 4096 + 64, &st))) die("state_new", rc);
    lily_cuda_state_fake_fill(ctx, st, 4096, 12);
    printf("per-kernel time of one step at 4K:\n");
    print_step_table(ctx, st);
    be->state_free(ctx, st);
    return 0;
}

static int run_full(const char *dir) {
    const lily_backend *be = &lily_backend_cuda;
    lily_model m;
    double t0 = lily_time();
    int rc = lily_model_load(dir, &m);
    if (rc) die(dir, rc);
    const lily_config &c = m.cfg;
    printf("%s loaded in %.1f s\n", dir, lily_time() - t0);
    double bw = lily_cuda_copy_bandwidth((size_t)4 << 30);
    printf("measured device-to-device copy bandwidth: %.3f TB/s (read + write)\n", bw / 1e12);
    t0 = lily_time();
    void *ctx;
    if ((rc = be->init(&m, &ctx))) die("init", rc);
    printf("weights on GPU: %.3f GB, init %.1f s\n", lily_cuda_weight_bytes(ctx) / 1e9, lily_time() - t0);
    // Long greedy generation, NaN watch.
    void *st;
    const int maxc = 131072 + 4096 + 64;
    if ((rc = be->state_new(ctx, maxc, &st))) die("state_new", rc);
    {
        const int n = 3000;
        std::vector<int> ids(n);
        int nan = 0;
        t0 = lily_time();
        rc = lily_cuda_generate(ctx, st, 1234, n, 0.0f, 0, ids.data(), &nan);
        double dt = lily_time() - t0;
        int distinct = 0;
        std::vector<char> seen(c.vocab_size, 0);
        for (int i : ids) distinct += !seen[i], seen[i] = 1;
        report(!rc && !nan, "full model greedy generation %d tokens: no NaN/inf logits, %d distinct ids, %.1f tok/s wall (incl. graph capture)",
               n, distinct, n / dt);
    }
    // Decode speed against the roofline.
    const double wbytes = 1.657e9, sbytes = 0.126e9, kvb = 20480.0;
    int ctxs[] = {256, 4096, 32768, 131072};
    printf("\n| context | ms/token | tok/s | GB/token | roofline tok/s | %% of roofline |\n|---|---|---|---|---|---|\n");
    for (int cx : ctxs) {
        lily_cuda_state_fake_fill(ctx, st, cx, 11);
        double s = lily_cuda_time_steps(ctx, st, 64, 5);
        double bytes = wbytes + sbytes + kvb * cx, roof = bw / bytes;
        printf("| %d | %.3f | %.1f | %.2f | %.0f | %.1f %% |\n", cx, s * 1e3, 1 / s, bytes / 1e9, roof, 100 / s / roof);
    }
    // Per-kernel breakdown at 4K.
    lily_cuda_state_fake_fill(ctx, st, 4096, 12);
    printf("\nper-kernel time of one step at 4K (plain launches, event after each; sums over layers):\n");
    print_step_table(ctx, st);
    // Ablations.
    printf("\n| variant | 4K tok/s | 32K tok/s |\n|---|---|---|\n");
    struct { const char *name; int opt, val; } ab[] = {
        {"all on (default)", -1, 0}, {"no CUDA graph", LILY_CUDA_OPT_GRAPH, 0}, {"no split-KV (1 block per KV head)", LILY_CUDA_OPT_ATTN_SPLIT, 1},
        {"split-KV 8", LILY_CUDA_OPT_ATTN_SPLIT, 8}, {"split-KV 32", LILY_CUDA_OPT_ATTN_SPLIT, 32}, {"split-KV 64", LILY_CUDA_OPT_ATTN_SPLIT, 64},
        {"GQA packing on", LILY_CUDA_OPT_GQA, 1}, {"GQA packing off", LILY_CUDA_OPT_GQA, 0}, {"GDN state not split (1 block per head)", LILY_CUDA_OPT_GDN_SPLIT, 1},
        {"GDN split 4", LILY_CUDA_OPT_GDN_SPLIT, 4}, {"GDN split 8", LILY_CUDA_OPT_GDN_SPLIT, 8},
        {"no PDL / L2 prefetch", LILY_CUDA_OPT_PDL, 0},
        {"attention: 1 position per warp pass", LILY_CUDA_OPT_ATTN_MULTI, 0},
        {"gemv2 off (the first GEMV kernel everywhere)", LILY_CUDA_OPT_GEMV2, 0},
        {"gemv2 prologue by loops (register prologue off)", LILY_CUDA_OPT_GV_PRO, 0},
        {"MoE latency variants off", LILY_CUDA_OPT_MOE_LAT, 0}, {"GDN latency variant off", LILY_CUDA_OPT_GDN_LAT, 0},
        {"expert down, 1 warp per row (split 4 off)", LILY_CUDA_OPT_MOE_KS, 1},
        {"split-KV combine, serial loads (parallel combine off)", LILY_CUDA_OPT_ATTN_COMB, 0},
        {"attention on the CUDA cores (tensor-core kernel off)", LILY_CUDA_OPT_ATTN_TC, 0},
        {"MoE in two launches (moe_fused off)", LILY_CUDA_OPT_MOE_FUSED, 0},
        {"moe_fused's grid barrier and sums, no fixed-point sum (moe_acc off)", LILY_CUDA_OPT_MOE_ACC, 0},
        {"GDN out_proj in gdn_step's launch (gdn_out on)", LILY_CUDA_OPT_GDN_OUT, 1},
        {"q/k norm, RoPE and append a launch of their own (attn_qk off)", LILY_CUDA_OPT_ATTN_QK, 0},
        {"MoE down slice from the row-major weights (moe_dsl off)", LILY_CUDA_OPT_MOE_DSL, 0},
        {"out_proj / o_proj and router inside moe_fused's launch (moe_front on)", LILY_CUDA_OPT_MOE_FRONT, 1}};
    for (auto &a : ab) {
        int old = a.opt >= 0 ? lily_cuda_get_opt(ctx, a.opt) : 0;
        if (a.opt >= 0) lily_cuda_set_opt(ctx, a.opt, a.val);
        double r[2];
        int cs[2] = {4096, 32768};
        for (int i = 0; i < 2; i++) {
            lily_cuda_state_fake_fill(ctx, st, cs[i], 13);
            r[i] = 1 / lily_cuda_time_steps(ctx, st, 32, 3);
        }
        printf("| %s | %.1f | %.1f |\n", a.name, r[0], r[1]);
        if (a.opt >= 0) lily_cuda_set_opt(ctx, a.opt, old);
    }
    be->state_free(ctx, st);
    be->free(ctx);
    lily_model_free(&m);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Prefill per-phase breakdown (docs/PERF.md): for each prompt length, one plain pass (its wall time)
// then one with an event after each phase, summed per phase over chunks and layers.
static int run_pfprof(const char *dir, const char *lens) {
    const lily_backend *be = &lily_backend_cuda;
    lily_model m;
    int rc = lily_model_load(dir, &m);
    if (rc) die(dir, rc);
    void *ctx;
    if ((rc = be->init(&m, &ctx))) die("init", rc);
    std::vector<int> ls;
    for (const char *p = lens; *p;) {
        char *e;
        long v = strtol(p, &e, 10);
        if (*e == 'K' || *e == 'k') v *= 1024, e++;
        ls.push_back((int)v);
        p = *e == ',' ? e + 1 : e;
        if (e == p && *p) break;
    }
    int maxl = 0;
    for (int l : ls) maxl = l > maxl ? l : maxl;
    void *st;
    if ((rc = be->state_new(ctx, maxl + 8, &st))) die("state_new", rc);
    rng r(4242);
    for (int n : ls) {
        std::vector<int> toks(n);
        for (int &t : toks) t = (int)(r.next() % (uint64_t)m.cfg.vocab_size);
        const char *names[48];
        double us[48], total_ms = 0;
        int nf = lily_cuda_profile_prefill(ctx, st, toks.data(), n, names, us, 48, &total_ms);
        if (nf < 0) die("profile_prefill", nf);
        double sum = 0;
        for (int i = 0; i < nf; i++) sum += us[i];
        printf("\nprefill of %d tokens: %.1f ms plain (%.0f tok/s); with an event after each phase %.1f ms\n"
               "| phase | ms | %% |\n|---|---|---|\n", n, total_ms, n / total_ms * 1e3, sum / 1e3);
        std::vector<int> ord(nf);
        for (int i = 0; i < nf; i++) ord[i] = i;
        std::sort(ord.begin(), ord.end(), [&](int a, int b) { return us[a] > us[b]; });
        for (int i : ord) printf("| %s | %.2f | %.1f %% |\n", names[i], us[i] / 1e3, 100 * us[i] / sum);
    }
    be->state_free(ctx, st);
    be->free(ctx);
    lily_model_free(&m);
    return 0;
}

// A long prompt on a real-size checkpoint in prefill chunks of 4096 and of 16384 tokens (the default),
// then 3 decode steps: the last prompt position's logits and the steps' must agree to bf16 rounding
// (the chunk only moves where the passes split the prompt) with the same top-1. Checks that the
// larger chunk's scratch and index arithmetic hold at the real shapes, which the tiny models' tests
// cannot reach.
static int run_chunks(const char *dir, int n) {
    const lily_backend *be = &lily_backend_cuda;
    lily_model m;
    int rc = lily_model_load(dir, &m);
    if (rc) die(dir, rc);
    void *ctx;
    if ((rc = be->init(&m, &ctx))) die("init", rc);
    const int V = m.cfg.vocab_size, nd = 3;
    void *st;
    if ((rc = be->state_new(ctx, n + nd + 8, &st))) die("state_new", rc);
    rng r(777);
    std::vector<int> toks(n + nd);
    for (int &t : toks) t = (int)(r.next() % (uint64_t)V);
    const int chunks[2] = {4096, 16384};
    std::vector<float> lg[2];
    for (int k = 0; k < 2; k++) {
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_CHUNK, chunks[k]);
        be->state_reset(ctx, st);
        lg[k].resize((size_t)(nd + 1) * V);
        if ((rc = be->forward(ctx, st, toks.data(), n, lg[k].data(), 0))) die("forward", rc);
        for (int i = 0; i < nd; i++)
            if ((rc = be->forward(ctx, st, &toks[n + i], 1, lg[k].data() + (size_t)(i + 1) * V, 0))) die("forward", rc);
    }
    cmp_stats c = compare(lg[1].data(), lg[0].data(), nd + 1, V, BF16_GAP);
    report(c.rel_worst < BF16_REL_MEAN && c.agree == nd + 1 && !count_nonfinite(lg[1].data(), lg[1].size()),
           "%d-token prompt in chunks of 16384 vs 4096, then %d decode steps: rel_l2 worst %.2e, top-1 %d/%d", n, nd,
           c.rel_worst, c.agree, nd + 1);
    be->state_free(ctx, st);
    be->free(ctx);
    lily_model_free(&m);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "kernels";
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : (uint64_t)time(NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(mode, "kernels")) run_kernel_tests(seed);
    else if (!strcmp(mode, "e2e")) { // LILY_GPU_E2E=NAME: that group alone (base, select, sample, moe, attn256, pf_side, qg_rw, gdn_inproj, gdn_front)
        const char *only = getenv("LILY_GPU_E2E");
        auto want = [&](const char *n) { return !only || !strcmp(only, n); };
        if (want("base")) run_e2e(seed);
        if (want("select")) run_e2e_select(seed);
        if (want("sample")) run_e2e_sample(seed);
        if (want("moe")) run_e2e_moe_fused(seed);
        if (want("attn256")) run_e2e_attn256(seed);
        if (want("pf_side")) run_e2e_pf_side(seed);
        if (want("qg_rw")) run_e2e_qg_rw(seed);
        if (want("gdn_inproj")) run_e2e_gdn_inproj(seed);
        if (want("gdn_front")) run_e2e_gdn_front(seed);
    }
    else if (!strcmp(mode, "fixtures")) run_fixtures(argc - 2, argv + 2);
    else if (!strcmp(mode, "compare") && argc > 2) run_compare(argv[2], argc > 3 ? atoi(argv[3]) : 16, argc > 4 ? argv[4] : NULL);
    else if (!strcmp(mode, "full") && argc > 2) run_full(argv[2]);
    else if (!strcmp(mode, "prof") && argc > 2) run_prof(argv[2]);
    else if (!strcmp(mode, "pfprof") && argc > 3) run_pfprof(argv[2], argv[3]);
    else if (!strcmp(mode, "chunks") && argc > 3) run_chunks(argv[2], atoi(argv[3]));
    else if (!strcmp(mode, "chain")) run_chain();
    else if (!strcmp(mode, "qgone") && argc > 6)
        run_qg_once(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
    else if (!strcmp(mode, "prefill"))
        run_prefill_tests(seed, argc > 3 && (!strcmp(argv[3], "bench") || !strcmp(argv[3], "quick")),
                          argc > 3 && !strcmp(argv[3], "quick"), argc > 3 && !strcmp(argv[3], "small"));
    else {
        fprintf(stderr, "usage: lily-gpu-test kernels|e2e [seed] | prefill [seed] [bench|quick|small] | qgone M N K TILE WG | fixtures DIR... | compare DIR [positions] [layers,...] | full DIR | pfprof DIR LEN[,LEN...] | chunks DIR N\n");
        return 2;
    }
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
