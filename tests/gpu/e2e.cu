// e2e.cu: `lily-gpu-test e2e`, its base group: a tiny random 4-bit model on the GPU (fp32 and bf16 activations)
// against the CPU backend, graph against plain launches, prefill chunks, snapshots, bad input.
#include "e2e.cuh"
extern int lily_qg_tile_force; // src/cuda/qgemm.cu

extern "C" {
#include "loader.h"
#include "sampler.h"
}

// Prefill-then-decode: a chunked prefill of the prompt (chunks of 7) followed by 8 decode steps
// gives the same next-step logits and the same saved state as a token-by-token prefill, to bf16
// rounding (bf16 activations; the two paths sum in different orders).
static void prefill_then_decode(const lily_backend *be, void *ctx, const lily_model *m,
                                const std::vector<int> &toks, int V) {
    const int np = 24, nd = 8;
    std::vector<float> lg[2];
    std::vector<char> snap[2];
    for (int k = 0; k < 2; k++) {
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_PREFILL, k == 0);
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_CHUNK, 7);
        void *st;
        int rc = be->state_new(ctx, 64, &st);
        if (rc) die("state_new", rc);
        if ((rc = be->forward(ctx, st, toks.data(), np, NULL, 0))) die("forward", rc);
        snap[k].resize(be->state_save_size(ctx, st));
        if ((rc = be->state_save(ctx, st, snap[k].data()))) die("save", rc);
        lg[k].resize((size_t)nd * V);
        for (int i = 0; i < nd; i++)
            if ((rc = be->forward(ctx, st, &toks[np + i], 1, lg[k].data() + (size_t)i * V, 0))) die("forward", rc);
        be->state_free(ctx, st);
    }
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_PREFILL, 1);
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_CHUNK, 1024);
    std::vector<float> sa = snapshot_floats(m, snap[0], np), sb = snapshot_floats(m, snap[1], np);
    cmp_stats c = compare(lg[0].data(), lg[1].data(), nd, V, BF16_GAP);
    double es = rel_l2(sa.data(), sb.data(), sa.size());
    report(snap[0].size() == snap[1].size() && c.rel_worst < BF16_REL_MEAN && c.dec_agree == c.dec_n && es < 1e-2,
           "e2e chunked prefill (chunks of 7) then %d decode steps vs token-by-token prefill: next-step logits rel_l2 worst %.2e, top-1 %d/%d (decisive %d/%d); snapshot rel_l2 %.2e",
           nd, c.rel_worst, c.agree, nd, c.dec_agree, c.dec_n, es);
}

int run_e2e(uint64_t seed) {
    const lily_backend *be = &lily_backend_cuda, *cpu = &lily_backend_cpu;
    lily_config c = config_tiny();
    test_model *tm = test_model_new(c, seed, 1);
    const lily_model *m = test_model_get(tm);
    void *ctx, *cctx;
    int rc = be->init(m, &ctx);
    if (rc) die("init", rc);
    if ((rc = cpu->init(m, &cctx))) die("cpu init", rc);
    const int V = c.vocab_size, N = 40;
    std::vector<int> tf = random_tokens(N, V, seed + 1);
    std::vector<float> ref = run_logits(cpu, cctx, tf, V, 0);
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_F32ACT, 1);
    std::vector<float> g32 = run_logits(be, ctx, tf, V, 1);
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_F32ACT, 0);
    std::vector<float> g16 = run_logits(be, ctx, tf, V, 1);
    cmp_stats s32 = compare(g32.data(), ref.data(), N, V, 1e-3), s16 = compare(g16.data(), ref.data(), N, V, BF16_GAP);
    report(s32.rel_worst <= F32_REL_TOL && s32.dec_agree == s32.dec_n,
           "e2e tiny model, %d positions, GPU fp32 activations vs CPU backend: rel_l2 mean %.2e worst %.2e, top-1 %d/%d",
           N, s32.rel_mean, s32.rel_worst, s32.agree, N);
    report(s16.rel_mean < BF16_REL_MEAN && s16.rel_worst < BF16_REL_WORST && s16.dec_agree == s16.dec_n,
           "e2e tiny model, %d positions, GPU bf16 activations vs CPU backend (fp32): rel_l2 mean %.2e worst %.2e, top-1 %d/%d (decisive %d/%d)",
           N, s16.rel_mean, s16.rel_worst, s16.agree, N, s16.dec_agree, s16.dec_n);
    // Chunked prefill (prefill kernels, bf16): the whole prompt in one call with the default chunk and
    // with chunks of 7, and calls of 3 tokens: the same tolerance against the CPU backend as token by
    // token, and close to token by token.
    {
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_PREFILL, 1);
        struct { const char *name; int chunk, step; } pm[3] = {{"one call", 1024, 0}, {"one call, chunks of 7", 7, 0}, {"calls of 3", 1024, 3}};
        for (auto &q : pm) {
            lily_cuda_set_opt(ctx, LILY_CUDA_OPT_CHUNK, q.chunk);
            std::vector<float> g = run_logits(be, ctx, tf, V, q.step);
            cmp_stats sp = compare(g.data(), ref.data(), N, V, BF16_GAP);
            double e = rel_l2(g.data(), g16.data(), g.size());
            report(sp.rel_mean < BF16_REL_MEAN && sp.rel_worst < BF16_REL_WORST && sp.dec_agree == sp.dec_n && e < BF16_REL_MEAN,
                   "e2e chunked prefill (%s) vs CPU backend: rel_l2 mean %.2e worst %.2e, top-1 %d/%d (decisive %d/%d); vs token by token rel_l2 %.2e",
                   q.name, sp.rel_mean, sp.rel_worst, sp.agree, N, sp.dec_agree, sp.dec_n, e);
        }
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_CHUNK, 1024);
        // Out of GPU memory for the prefill scratch (fault injection: a cap on its size). A cap that
        // 1024-token chunks exceed but 64-token ones fit: the chunk shrinks to 64 and the prompt (40
        // tokens, one chunk either way) gives the same logits bit for bit. A cap nothing fits: the
        // prompt runs token by token, bit for bit the decode path's logits.
        std::vector<float> one = run_logits(be, ctx, tf, V, 0);
        const size_t b64 = lily_cuda_prefill_scratch_bytes(ctx, 64), b1024 = lily_cuda_prefill_scratch_bytes(ctx, 1024);
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_PF_CAP_KB, (int)(b64 >> 10) + 1);
        std::vector<float> g64 = run_logits(be, ctx, tf, V, 0);
        const int c64 = lily_cuda_prefill_chunk(ctx);
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_PF_CAP_KB, 1);
        std::vector<float> gtok = run_logits(be, ctx, tf, V, 0);
        const int c0 = lily_cuda_prefill_chunk(ctx);
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_PF_CAP_KB, 0);
        report(b1024 > b64 && c64 == 64 && !memcmp(g64.data(), one.data(), one.size() * 4) && c0 == 0 &&
                   !memcmp(gtok.data(), g16.data(), g16.size() * 4),
               "e2e prefill scratch out of memory (injected): chunk 1024 (%.1f MB) -> %d (%.1f MB), same logits; "
               "nothing fits -> token by token, same logits as the decode path (chunk %d)",
               b1024 / 1e6, c64, b64 / 1e6, c0);
        // Ablation "gpu_route" off (set through the bench flag table): MoE routing on the host. Same
        // kernels, same routing arithmetic in the same order, so the logits should equal the GPU
        // routing's bit for bit; the one thing not reproduced exactly is expf (the device's is not the
        // host's, last-bit differences), which can move a bf16 routing weight across a rounding
        // boundary or swap two near-equal experts. So: bitwise, or else within the chunked-prefill
        // tolerance and close to GPU routing (the line says which). Chunks of 7 reuse the staging.
        int frc = be->set_flag(ctx, "gpu_route", 0);
        const int host_on = lily_cuda_get_opt(ctx, LILY_CUDA_OPT_HOST_ROUTE);
        std::vector<float> hr = run_logits(be, ctx, tf, V, 0);
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_CHUNK, 7);
        std::vector<float> hr7 = run_logits(be, ctx, tf, V, 0);
        be->set_flag(ctx, "gpu_route", 1);
        std::vector<float> gr7 = run_logits(be, ctx, tf, V, 0);
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_CHUNK, 1024);
        const bool bit = !memcmp(hr.data(), one.data(), one.size() * 4) && !memcmp(hr7.data(), gr7.data(), gr7.size() * 4);
        cmp_stats sh = compare(hr.data(), ref.data(), N, V, BF16_GAP);
        const double eh = std::max(rel_l2(hr.data(), one.data(), one.size()), rel_l2(hr7.data(), gr7.data(), gr7.size()));
        report(!frc && host_on == 1 && lily_cuda_get_opt(ctx, LILY_CUDA_OPT_HOST_ROUTE) == 0 &&
                   (bit || (sh.rel_mean < BF16_REL_MEAN && sh.rel_worst < BF16_REL_WORST && sh.dec_agree == sh.dec_n &&
                            eh < BF16_REL_MEAN)),
               "e2e prefill with host routing (ablation gpu_route off) == GPU routing: %s (rel_l2 %.2e; vs CPU "
               "backend mean %.2e worst %.2e, decisive %d/%d)", bit ? "bitwise" : "NOT bitwise, within tolerance",
               eh, sh.rel_mean, sh.rel_worst, sh.dec_agree, sh.dec_n);
        // Ablation "fused_dequant" off: the dense GEMMs dequantise W to bf16, then cuBLAS, then the
        // epilogue. One more rounding (the weights), so not bitwise: the chunked-prefill tolerance.
        frc = be->set_flag(ctx, "fused_dequant", 0);
        const int sep_on = lily_cuda_get_opt(ctx, LILY_CUDA_OPT_SEP_DEQUANT);
        std::vector<float> sd = run_logits(be, ctx, tf, V, 0);
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_CHUNK, 7);
        std::vector<float> sd7 = run_logits(be, ctx, tf, V, 0);
        be->set_flag(ctx, "fused_dequant", 1);
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_CHUNK, 1024);
        for (auto *g : {&sd, &sd7}) {
            cmp_stats ss = compare(g->data(), ref.data(), N, V, BF16_GAP);
            double es = rel_l2(g->data(), one.data(), one.size());
            report(!frc && sep_on == 1 && lily_cuda_get_opt(ctx, LILY_CUDA_OPT_SEP_DEQUANT) == 0 &&
                       ss.rel_mean < BF16_REL_MEAN && ss.rel_worst < BF16_REL_WORST && ss.dec_agree == ss.dec_n &&
                       es < BF16_REL_MEAN,
                   "e2e prefill with separate dequantisation + cuBLAS (ablation fused_dequant off, %s) vs CPU backend: "
                   "rel_l2 mean %.2e worst %.2e, top-1 %d/%d (decisive %d/%d); vs fused rel_l2 %.2e",
                   g == &sd ? "one call" : "chunks of 7", ss.rel_mean, ss.rel_worst, ss.agree, N, ss.dec_agree,
                   ss.dec_n, es);
        }
    }
    // The wgmma GEMM kernel (flag wgmma) against the mma.sync one: this prompt is too short for
    // the tile heights it takes, so force tiles of 64 rows for every GEMM. Both must meet the
    // chunked-prefill tolerance; they compute the same exact-weight products (flag qg_bf16w off for
    // this case), in a different summation order, so they differ by float rounding only.
    {
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_PREFILL, 1);
        const int saved = lily_qg_tile_force, bw_saved = lily_cuda_get_opt(ctx, LILY_CUDA_OPT_QG_BF16W);
        lily_qg_tile_force = 64;
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_QG_BF16W, 0);
        std::vector<float> w1 = run_logits(be, ctx, tf, V, 0);
        int frc = be->set_flag(ctx, "wgmma", 0);
        std::vector<float> w0 = run_logits(be, ctx, tf, V, 0);
        be->set_flag(ctx, "wgmma", 1);
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_CHUNK, 7);
        std::vector<float> w17 = run_logits(be, ctx, tf, V, 0);
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_CHUNK, 1024);
        lily_qg_tile_force = saved;
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_QG_BF16W, bw_saved);
        cmp_stats a1 = compare(w1.data(), ref.data(), N, V, BF16_GAP), a0 = compare(w0.data(), ref.data(), N, V, BF16_GAP);
        cmp_stats a7 = compare(w17.data(), ref.data(), N, V, BF16_GAP);
        const double e10 = rel_l2(w1.data(), w0.data(), w0.size());
        report(!frc && a1.rel_mean < BF16_REL_MEAN && a1.rel_worst < BF16_REL_WORST && a1.dec_agree == a1.dec_n &&
                   a0.rel_mean < BF16_REL_MEAN && a0.rel_worst < BF16_REL_WORST && a0.dec_agree == a0.dec_n &&
                   a7.rel_mean < BF16_REL_MEAN && a7.rel_worst < BF16_REL_WORST && a7.dec_agree == a7.dec_n &&
                   e10 < BF16_REL_MEAN,
               "e2e prefill, every GEMM on 64-row tiles: wgmma kernel vs CPU backend rel_l2 mean %.2e worst %.2e "
               "(chunks of 7: %.2e, %.2e), decisive %d/%d; mma.sync kernel mean %.2e worst %.2e; wgmma vs mma.sync "
               "rel_l2 %.2e", a1.rel_mean, a1.rel_worst, a7.rel_mean, a7.rel_worst, a1.dec_agree, a1.dec_n,
               a0.rel_mean, a0.rel_worst, e10);
    }
    // The wgmma GEMM on bf16-rounded weights (flag qg_bf16w, the default): one more rounding than
    // the exact path (each weight, once, as HF's bf16 model holds it), so not bitwise: the
    // chunked-prefill tolerance against the CPU backend, with every GEMM on 64-row tiles (the wgmma
    // kernel takes them all), one call and chunks of 7; and it must differ from the exact path (the
    // switch acts).
    {
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_PREFILL, 1);
        const int saved = lily_qg_tile_force, bw_default = lily_cuda_get_opt(ctx, LILY_CUDA_OPT_QG_BF16W);
        lily_qg_tile_force = 64;
        be->set_flag(ctx, "qg_bf16w", 0);
        std::vector<float> ex = run_logits(be, ctx, tf, V, 0);
        const int frc = be->set_flag(ctx, "qg_bf16w", 1), on = lily_cuda_get_opt(ctx, LILY_CUDA_OPT_QG_BF16W);
        std::vector<float> bw = run_logits(be, ctx, tf, V, 0);
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_CHUNK, 7);
        std::vector<float> bw7 = run_logits(be, ctx, tf, V, 0);
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_CHUNK, 1024);
        be->set_flag(ctx, "qg_bf16w", 0);
        const int off = lily_cuda_get_opt(ctx, LILY_CUDA_OPT_QG_BF16W);
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_QG_BF16W, bw_default);
        lily_qg_tile_force = saved;
        cmp_stats b1 = compare(bw.data(), ref.data(), N, V, BF16_GAP), b7 = compare(bw7.data(), ref.data(), N, V, BF16_GAP);
        const double eb = rel_l2(bw.data(), ex.data(), ex.size());
        report(!frc && on == 1 && off == 0 && b1.rel_mean < BF16_REL_MEAN &&
                   b1.rel_worst < BF16_REL_WORST && b1.dec_agree == b1.dec_n && b7.rel_mean < BF16_REL_MEAN &&
                   b7.rel_worst < BF16_REL_WORST && b7.dec_agree == b7.dec_n && eb > 0.0 && eb < BF16_REL_MEAN,
               "e2e prefill, wgmma GEMM on bf16-rounded weights (flag qg_bf16w), 64-row tiles: vs CPU backend "
               "rel_l2 mean %.2e worst %.2e (chunks of 7: %.2e, %.2e), decisive %d/%d; vs exact weights rel_l2 %.2e",
               b1.rel_mean, b1.rel_worst, b7.rel_mean, b7.rel_worst, b1.dec_agree, b1.dec_n, eb);
    }
    prefill_then_decode(be, ctx, m, tf, V);
    cpu->free(cctx);
    // Plain launches vs graph, prefill with all logits vs token by token, snapshots (token-by-token
    // prefill: the chunked path rounds differently by design).
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_PREFILL, 0);
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
    // The early PDL trigger changes only when kernels start, never what they compute: the same
    // graph-replayed decode steps, bitwise (a kernel reading before its wait would show here).
    const int early0 = lily_cuda_get_opt(ctx, LILY_CUDA_OPT_PDL_EARLY);
    for (int early = 0; early < 3; early++) {
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_PDL_EARLY, early);
        be->state_reset(ctx, st);
        if ((rc = be->forward(ctx, st, toks.data(), 24, b.data(), 1))) die("forward", rc);
        report(!memcmp(a.data(), b.data(), a.size() * 4), "e2e graph decode with the early PDL trigger at %d == "
               "the same with the option at %d (bitwise)", early, early0);
    }
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_PDL_EARLY, early0);
    // So do the switches that change only when or in what order loads are issued: each flipped
    // alone, the same graph-replayed decode steps, bitwise.
    const struct { const char *name; int opt; } bitwise_sw[] = {
        {"the expert down prefetch", LILY_CUDA_OPT_MOE_PF}, {"the MoE latency variants", LILY_CUDA_OPT_MOE_LAT},
        {"the GDN latency variant", LILY_CUDA_OPT_GDN_LAT}, {"gemv2's bulk-staged tiles", LILY_CUDA_OPT_GV2_BULK},
        {"the parallel split-KV combine", LILY_CUDA_OPT_ATTN_COMB}};
    for (auto &sw : bitwise_sw) {
        const int v0 = lily_cuda_get_opt(ctx, sw.opt);
        lily_cuda_set_opt(ctx, sw.opt, !v0);
        be->state_reset(ctx, st);
        if ((rc = be->forward(ctx, st, toks.data(), 24, b.data(), 1))) die("forward", rc);
        report(!memcmp(a.data(), b.data(), a.size() * 4), "e2e graph decode with %s %s == %s (bitwise)", sw.name,
               v0 ? "off" : "on", v0 ? "on" : "off");
        lily_cuda_set_opt(ctx, sw.opt, v0);
    }
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_PREFILL, 1);
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
    // The prefix cache's snapshots (snap_save), in device memory and in host memory: restored into the
    // state that made them after it moved on, and into a second state, the same logits bitwise; a
    // state too short for one refuses it and stays as it was.
    void *st2, *st3;
    if ((rc = be->state_new(ctx, 64, &st2)) || (rc = be->state_new(ctx, 12, &st3))) die("state_new", rc);
    const int snap_dev0 = lily_cuda_get_opt(ctx, LILY_CUDA_OPT_SNAP_DEV);
    for (int dev = 1; dev >= 0; dev--) {
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_SNAP_DEV, dev);
        be->state_reset(ctx, st);
        be->forward(ctx, st, toks.data(), 10, NULL, 0);
        size_t sb = 0;
        void *h = be->snap_save(ctx, st, &sb);
        be->forward(ctx, st, toks.data() + 10, 3, NULL, 0); // moves on before the copy could be read
        be->forward(ctx, st, toks.data() + 13, 6, NULL, 0);
        be->state_reset(ctx, st2);
        be->forward(ctx, st2, toks.data(), 4, NULL, 0);
        int rl = h ? be->snap_load(ctx, st, h) : -1;
        be->forward(ctx, st, toks.data() + 10, 5, b.data(), 0);
        int rl2 = h ? be->snap_load(ctx, st2, h) : -1;
        be->forward(ctx, st2, toks.data() + 10, 5, b.data() + V, 0);
        be->state_reset(ctx, st3);
        be->forward(ctx, st3, toks.data(), 12, NULL, 0);
        int rl3 = h ? be->snap_load(ctx, st3, h) : -1; // fits: 10 <= 12
        be->forward(ctx, st, toks.data() + 15, 3, NULL, 0);
        void *h18 = be->snap_save(ctx, st, &sb);        // position 18 > 12
        int rl4 = h18 ? be->snap_load(ctx, st3, h18) : -1;
        report(h && h18 && sb == be->state_save_size(ctx, st) && !rl && !rl2 && !rl3 && rl4 == LILY_ERANGE &&
                   be->state_pos(ctx, st3) == 10 && !memcmp(s1.data(), b.data(), V * 4) &&
                   !memcmp(s1.data(), b.data() + V, V * 4),
               "e2e prefix-cache snapshots in %s memory: restored into the same and another state == "
               "save/load (bitwise); a 12-position state refuses an 18-position one", dev ? "device" : "host");
        be->snap_free(ctx, h);
        be->snap_free(ctx, h18);
    }
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_SNAP_DEV, snap_dev0);
    be->state_free(ctx, st2);
    be->state_free(ctx, st3);
    // Split-KV and GQA switches change nothing beyond rounding (decode kernels: token by token).
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_PREFILL, 0);
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_ATTN_SPLIT, 1);
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_GQA, 1);
    be->state_reset(ctx, st);
    be->forward(ctx, st, toks.data(), 24, b.data(), 1);
    double e = rel_l2(b.data(), a.data(), b.size());
    report(e < 1e-2, "e2e ablation switches (no split-KV, GQA packing on) vs defaults: rel_l2 %.2e", e);
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_PREFILL, 1);
    // Bad input: out-of-range token and context overflow are errors, state unchanged.
    int bad = V + 5;
    int pos0 = be->state_pos(ctx, st);
    int rc1 = be->forward(ctx, st, &bad, 1, NULL, 0);
    std::vector<int> many(100, 1);
    int rc2 = be->forward(ctx, st, many.data(), 100, NULL, 0);
    report(rc1 == LILY_ERANGE && rc2 == LILY_ERANGE && be->state_pos(ctx, st) == pos0, "e2e bad token id / context overflow rejected");
    be->state_free(ctx, st);
    be->free(ctx);
    test_model_free(tm);
    return 0;
}
