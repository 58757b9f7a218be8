// main.cu: the GPU test binary (build/lily-gpu-test).
//   lily-gpu-test kernels [seed]     every kernel vs its CPU reference (odd sizes, fresh inputs)
//   lily-gpu-test e2e [seed]         a tiny random model: GPU backend vs the CPU reference decoder,
//                                    graph vs plain launches, snapshots, all-logits prefill
//   lily-gpu-test prefill [seed] [bench|quick|small]  the prefill kernels (test_prefill.cu) vs CPU
//                                    references; `bench` adds timings at the full model's shapes
//   lily-gpu-test full [positions]   the full-size Qwen3.6-35B-A3B shape with random 4-bit weights:
//                                    upload, GPU vs reference logits, long greedy generation, decode
//                                    speed at 256/4K/32K/128K against the measured roofline, a
//                                    per-kernel breakdown and the ablation table
// Exit status 0 only when every check passed.
#include <stdarg.h>
#include <thread>

#include "gpu_test.h"
#include "../../src/cuda/lily_cuda.h"

extern "C" const struct lily_backend lily_backend_cuda;
void run_kernel_tests(uint64_t seed);
void run_prefill_tests(uint64_t seed, bool bench, bool quick, bool small);
void report(bool ok, const char *fmt, ...);
extern int g_fail, g_pass;

static void die(const char *what, int rc) {
    printf("FAIL %s: %d %s\n", what, rc, lily_err_msg());
    exit(1);
}

// Teacher-forced comparison over `n` random tokens: returns worst rel L2 and top-1 agreement.
static void compare_ref(const lily_model *m, void *ctx, int n, uint64_t seed, double *worst, double *mean,
                        int *agree) {
    const lily_backend *be = &lily_backend_cuda;
    const int V = m->cfg.vocab_size;
    void *st;
    int rc = be->state_new(ctx, n + 8, &st);
    if (rc) die("state_new", rc);
    ref_state *rs = ref_new(m, n + 8);
    std::vector<float> lg(V), lr(V);
    rng r(seed);
    *worst = 0, *mean = 0, *agree = 0;
    for (int i = 0; i < n; i++) {
        int tok = (int)(r.next() % (uint64_t)V);
        if ((rc = be->forward(ctx, st, &tok, 1, lg.data(), 0))) die("forward", rc);
        ref_step(rs, tok, lr.data());
        double e = rel_l2(lg.data(), lr.data(), V);
        *worst = e > *worst ? e : *worst;
        *mean += e / n;
        int a = 0, b = 0;
        for (int j = 1; j < V; j++) a = lg[j] > lg[a] ? j : a, b = lr[j] > lr[b] ? j : b;
        *agree += a == b;
    }
    ref_free(rs);
    be->state_free(ctx, st);
}

static int run_e2e(uint64_t seed) {
    const lily_backend *be = &lily_backend_cuda;
    lily_config c = config_tiny();
    test_model *tm = test_model_new(c, seed, 1);
    const lily_model *m = test_model_get(tm);
    void *ctx;
    int rc = be->init(m, &ctx);
    if (rc) die("init", rc);
    const int V = c.vocab_size, N = 40;
    double worst, mean;
    int agree;
    compare_ref(m, ctx, N, seed + 1, &worst, &mean, &agree);
    report(mean < 3e-2 && worst < 1e-1 && agree >= N * 9 / 10, "e2e tiny model, %d teacher-forced positions vs CPU reference: rel_l2 mean %.2e worst %.2e, top-1 agree %d/%d",
           N, mean, worst, agree, N);
    // Plain launches vs graph, prefill with all logits vs token by token, snapshots.
    std::vector<int> toks(24);
    rng r(seed + 2);
    for (int &t : toks) t = (int)(r.next() % (uint64_t)V);
    std::vector<float> a((size_t)24 * V), b((size_t)24 * V), s1(V), s2(V);
    void *st;
    if ((rc = be->state_new(ctx, 64, &st))) die("state_new", rc);
    if ((rc = be->forward(ctx, st, toks.data(), 24, a.data(), 1))) die("forward", rc);
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_GRAPH, 0);
    be->state_reset(ctx, st);
    for (int i = 0; i < 24; i++)
        if ((rc = be->forward(ctx, st, &toks[i], 1, b.data() + (size_t)i * V, 0))) die("forward", rc);
    report(!memcmp(a.data(), b.data(), a.size() * 4), "e2e graph + all-logits prefill == plain launches token by token (bitwise)");
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_GRAPH, 1);
    // Snapshot at 10, run 5, restore, run the same 5: same logits.
    be->state_reset(ctx, st);
    be->forward(ctx, st, toks.data(), 10, NULL, 0);
    std::vector<char> snap(be->state_save_size(ctx, st));
    be->state_save(ctx, st, snap.data());
    be->forward(ctx, st, toks.data() + 10, 5, s1.data(), 0);
    be->forward(ctx, st, toks.data() + 15, 3, NULL, 0);
    rc = be->state_load(ctx, st, snap.data(), snap.size());
    be->forward(ctx, st, toks.data() + 10, 5, s2.data(), 0);
    report(!rc && be->state_pos(ctx, st) == 15 && !memcmp(s1.data(), s2.data(), V * 4), "e2e snapshot save/load restores the state exactly");
    // Split-KV and GQA switches change nothing beyond rounding.
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_ATTN_SPLIT, 1);
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_GQA, 1);
    be->state_reset(ctx, st);
    be->forward(ctx, st, toks.data(), 24, b.data(), 1);
    double e = rel_l2(b.data(), a.data(), b.size());
    report(e < 1e-2, "e2e ablation switches (no split-KV, GQA packing on) vs defaults: rel_l2 %.2e", e);
    // Bad input: out-of-range token and context overflow are errors, state unchanged.
    int bad = V + 5;
    int pos0 = be->state_pos(ctx, st);
    int rc1 = be->forward(ctx, st, &bad, 1, NULL, 0);
    std::vector<int> many(100, 1);
    int rc2 = be->forward(ctx, st, many.data(), 100, NULL, 0);
    report(rc1 == LILY_ERANGE && rc2 == LILY_ERANGE && be->state_pos(ctx, st) == pos0, "e2e bad token id / context overflow rejected");
    // GPU generation loop: greedy from the GPU == greedy from host-driven steps.
    be->state_reset(ctx, st);
    std::vector<int> gen(30);
    int nan = 0;
    rc = lily_cuda_generate(ctx, st, toks[0], 30, 0.0f, 0, gen.data(), &nan);
    be->state_reset(ctx, st);
    int t = toks[0];
    bool same = !rc;
    for (int i = 0; i < 30 && same; i++) {
        be->forward(ctx, st, &t, 1, s1.data(), 0);
        int bst = 0;
        for (int j = 1; j < V; j++) bst = s1[j] > s1[bst] ? j : bst;
        same = bst == gen[i];
        t = bst;
    }
    report(same && !nan, "e2e on-GPU greedy loop (30 steps) == host argmax of returned logits");
    be->state_reset(ctx, st);
    rc = lily_cuda_generate(ctx, st, toks[0], 30, 0.8f, 7, gen.data(), &nan);
    int inrange = 1;
    for (int g : gen) inrange &= g >= 0 && g < V;
    report(!rc && inrange && !nan, "e2e sampled loop (T=0.8) gives valid ids");
    be->state_free(ctx, st);
    be->free(ctx);
    test_model_free(tm);
    return 0;
}

// ---------------------------------------------------------------------------------------------
static int run_full(int npos) {
    const lily_backend *be = &lily_backend_cuda;
    lily_config c = config_full();
    int threads = (int)std::thread::hardware_concurrency();
    double t0 = lily_time();
    test_model *tm = test_model_new(c, 42, threads > 1 ? threads : 1);
    const lily_model *m = test_model_get(tm);
    printf("full-size random model generated in %.1f s (%d threads)\n", lily_time() - t0, threads);
    double bw = lily_cuda_copy_bandwidth((size_t)4 << 30);
    printf("measured device-to-device copy bandwidth: %.3f TB/s (read + write)\n", bw / 1e12);
    t0 = lily_time();
    void *ctx;
    int rc = be->init(m, &ctx);
    if (rc) die("init", rc);
    printf("weights on GPU: %.3f GB, init %.1f s\n", lily_cuda_weight_bytes(ctx) / 1e9, lily_time() - t0);
    fflush(stdout);
    if (npos > 0) {
        double worst, mean;
        int agree;
        t0 = lily_time();
        compare_ref(m, ctx, npos, 5, &worst, &mean, &agree);
        report(mean < 3e-2 && worst < 1e-1 && agree >= npos * 9 / 10, "full model, %d teacher-forced positions vs CPU reference: rel_l2 mean %.2e worst %.2e, top-1 agree %d/%d (%.0f s)",
               npos, mean, worst, agree, npos, lily_time() - t0);
    }
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
    const char *names[32];
    double us[32];
    int nf = lily_cuda_profile_step(ctx, st, names, us, 32);
    double tot = 0;
    for (int i = 0; i < nf; i++) tot += us[i];
    printf("\nper-kernel time of one step at 4K (plain launches, event after each; sums over layers):\n| kernel family | us | %% |\n|---|---|---|\n");
    for (int i = 0; i < nf; i++) printf("| %s | %.1f | %.1f %% |\n", names[i], us[i], 100 * us[i] / tot);
    printf("| total | %.1f | |\n", tot);
    // Ablations.
    printf("\n| variant | 4K tok/s | 32K tok/s |\n|---|---|---|\n");
    struct { const char *name; int opt, val; } ab[] = {
        {"all on (default)", -1, 0}, {"no CUDA graph", LILY_CUDA_OPT_GRAPH, 0}, {"no split-KV (1 block per KV head)", LILY_CUDA_OPT_ATTN_SPLIT, 1},
        {"split-KV 8", LILY_CUDA_OPT_ATTN_SPLIT, 8}, {"split-KV 32", LILY_CUDA_OPT_ATTN_SPLIT, 32}, {"split-KV 64", LILY_CUDA_OPT_ATTN_SPLIT, 64},
        {"GQA packing on", LILY_CUDA_OPT_GQA, 1}, {"GQA packing off", LILY_CUDA_OPT_GQA, 0}, {"GDN state not split (1 block per head)", LILY_CUDA_OPT_GDN_SPLIT, 1},
        {"GDN split 4", LILY_CUDA_OPT_GDN_SPLIT, 4}, {"GDN split 8", LILY_CUDA_OPT_GDN_SPLIT, 8}};
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
    test_model_free(tm);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "kernels";
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : (uint64_t)time(NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(mode, "kernels")) run_kernel_tests(seed);
    else if (!strcmp(mode, "e2e")) run_e2e(seed);
    else if (!strcmp(mode, "prefill"))
        run_prefill_tests(seed, argc > 3 && (!strcmp(argv[3], "bench") || !strcmp(argv[3], "quick")),
                          argc > 3 && !strcmp(argv[3], "quick"), argc > 3 && !strcmp(argv[3], "small"));
    else if (!strcmp(mode, "full")) run_full(argc > 2 ? atoi(argv[2]) : 8);
    else {
        fprintf(stderr, "usage: lily-gpu-test kernels|e2e [seed] | prefill [seed] [bench|quick|small] | full [positions]\n");
        return 2;
    }
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
