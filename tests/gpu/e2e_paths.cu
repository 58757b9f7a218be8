// e2e_paths.cu: the e2e groups of single decode and prefill paths on models shaped for them (attn256, pf_side, qg_rw,
// gdn_front, gdn_inproj, moe), each on and off against the CPU backend.
#include "e2e.cuh"

// The prefill attention at head_dim 256 (the real model's; no HF fixture has it) in whole prefills: a
// tiny model with 8 query heads on 1 KV head and D 256, a 200-token prompt in one call and in chunks
// of 64 (each chunk attends to the earlier chunks' cache), with the wgmma flash kernel
// (LILY_CUDA_OPT_FA_WG) against the CPU backend and against the mma.sync flash kernel.
void run_e2e_attn256(uint64_t seed) {
    lily_config c = config_tiny();
    c.n_heads = 8, c.n_kv_heads = 1, c.head_dim = 256, c.rope_dim = 64;
    const int V = c.vocab_size, N = 200;
    e2e_pair p(c, seed + 11, N);
    lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_PREFILL, 1);
    lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_FA, 1);
    for (int chunk : {1024, 64}) {
        lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_CHUNK, chunk);
        lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_FA_WG, 0);
        std::vector<float> g0 = run_logits(p.be, p.ctx, p.tf, V, 0);
        const cmp_stats s0 = compare(g0.data(), p.ref.data(), N, V, BF16_GAP);
        for (int mode : {1, 2}) { // V transposed in shared memory; V as an MN-major operand (the default)
            lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_FA_WG, mode);
            std::vector<float> g1 = run_logits(p.be, p.ctx, p.tf, V, 0);
            cmp_stats s1 = compare(g1.data(), p.ref.data(), N, V, BF16_GAP);
            const double e = rel_l2(g1.data(), g0.data(), g1.size());
            report(s1.rel_mean < BF16_REL_MEAN && s1.rel_worst < BF16_REL_WORST && s1.dec_agree == s1.dec_n && e < 1e-2,
                   "e2e prefill at head_dim 256 (hq 8, hkv 1, %d tokens, chunk %d), wgmma flash (V %s) vs CPU backend: "
                   "rel_l2 mean %.2e worst %.2e, top-1 %d/%d (decisive %d/%d; mma.sync flash: mean %.2e worst %.2e); "
                   "vs mma.sync flash rel_l2 %.2e",
                   N, chunk, mode == 1 ? "transposed" : "MN-major", s1.rel_mean, s1.rel_worst, s1.agree, N, s1.dec_agree,
                   s1.dec_n, s0.rel_mean, s0.rel_worst, e);
        }
    }
    // The same positions decoded one by one (graph steps): the packed attention on the tensor cores
    // (LILY_CUDA_OPT_ATTN_TC, attn_tc.cu) and on the CUDA cores (packed from position 5 on), each against
    // the CPU backend, and the two against each other.
    lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_ATTN_QK, 0); // the qk launch first (the default is the fused form)
    lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_ATTN_TC, 0);
    lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_GQA, 1);
    std::vector<float> d0 = run_logits(p.be, p.ctx, p.tf, V, 1);
    lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_GQA, -1);
    lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_ATTN_TC, 1);
    std::vector<float> d1 = run_logits(p.be, p.ctx, p.tf, V, 1);
    const cmp_stats s0 = compare(d0.data(), p.ref.data(), N, V, BF16_GAP), s1 = compare(d1.data(), p.ref.data(), N, V, BF16_GAP);
    const double e = rel_l2(d1.data(), d0.data(), d1.size());
    report(s1.rel_mean < BF16_REL_MEAN && s1.rel_worst < BF16_REL_WORST && s1.dec_agree == s1.dec_n && e < 1e-2,
           "e2e decode at head_dim 256 (hq 8, hkv 1, %d steps), attention on the tensor cores vs CPU backend: rel_l2 "
           "mean %.2e worst %.2e, top-1 %d/%d (decisive %d/%d; CUDA cores: mean %.2e worst %.2e); vs CUDA cores "
           "rel_l2 %.2e",
           N, s1.rel_mean, s1.rel_worst, s1.agree, N, s1.dec_agree, s1.dec_n, s0.rel_mean, s0.rel_worst, e);
    // The q/k norm, RoPE and KV append inside the tensor-core kernel (LILY_CUDA_OPT_ATTN_QK): against the CPU
    // backend and the separate qk launch (the sums of squares are added in another order: not bitwise), run twice
    // the same bits, and no qk family left in the step's profile.
    lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_ATTN_QK, 1);
    std::vector<float> d2 = run_logits(p.be, p.ctx, p.tf, V, 1), d2b = run_logits(p.be, p.ctx, p.tf, V, 1);
    int qk_fam = 0, attn_fam = 0;
    for (const std::string &f : step_families(p.be, p.ctx))
        qk_fam += f.find("qk norm") != std::string::npos, attn_fam += f.find("attn decode") != std::string::npos;
    const cudaError_t ce = cudaDeviceSynchronize(); // a fault in the profiled step would show here
    const cmp_stats s2 = compare(d2.data(), p.ref.data(), N, V, BF16_GAP);
    const double e2 = rel_l2(d2.data(), d1.data(), d2.size());
    const bool twice = !memcmp(d2.data(), d2b.data(), d2.size() * 4);
    report(s2.rel_mean < BF16_REL_MEAN && s2.rel_worst < BF16_REL_WORST && s2.dec_agree == s2.dec_n && e2 < 1e-2 && twice &&
               qk_fam == 0 && attn_fam == 1 && ce == cudaSuccess,
           "e2e decode at head_dim 256 with q/k norm, RoPE and append in the attention kernel (attn_qk): vs CPU backend "
           "rel_l2 mean %.2e worst %.2e, top-1 %d/%d (decisive %d/%d); vs the qk launch rel_l2 %.2e; run twice: %s; "
           "profile: qk families %d (want 0), attention families %d (want 1), %s",
           s2.rel_mean, s2.rel_worst, s2.agree, N, s2.dec_agree, s2.dec_n, e2, twice ? "bitwise equal" : "DIFFERS", qk_fam,
           attn_fam, cudaGetErrorString(ce));
}

// The prefill's side stream (LILY_CUDA_OPT_PF_SIDE: the GDN's z, b, a, the attention's k, v and the
// shared expert beside the main chain) in whole prefills: a 300-token prompt in one chunk and in
// chunks of 64 (GDN on the chunked path and, for a last chunk of 44, the scan), every mode bitwise
// equal to all in line, and against the CPU backend.
void run_e2e_pf_side(uint64_t seed) {
    lily_config c = config_tiny();
    const int V = c.vocab_size, N = 300;
    e2e_pair p(c, seed + 17, N);
    lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_PREFILL, 1);
    for (int chunk : {1024, 64}) {
        lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_CHUNK, chunk);
        lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_PF_SIDE, 0);
        std::vector<float> g0 = run_logits(p.be, p.ctx, p.tf, V, 0);
        for (int mode : {1, 2, 1}) {
            lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_PF_SIDE, mode);
            std::vector<float> g1 = run_logits(p.be, p.ctx, p.tf, V, 0);
            const cmp_stats s1 = compare(g1.data(), p.ref.data(), N, V, BF16_GAP);
            const bool same = !memcmp(g1.data(), g0.data(), g1.size() * 4);
            report(same && s1.rel_mean < BF16_REL_MEAN && s1.rel_worst < BF16_REL_WORST && s1.dec_agree == s1.dec_n,
                   "e2e prefill with a side stream (mode %d, %d tokens, chunk %d): %s all in line; vs CPU backend "
                   "rel_l2 mean %.2e worst %.2e, top-1 %d/%d (decisive %d/%d)",
                   mode, N, chunk, same ? "bitwise equal to" : "DIFFERS from", s1.rel_mean, s1.rel_worst, s1.agree, N,
                   s1.dec_agree, s1.dec_n);
        }
    }
}

// The dense GEMMs with the weights as the MMA's register operand (LILY_CUDA_OPT_QG_RW, qgemm_rw.cu) in whole
// prefills: a tiny model whose dense shapes and MoE gate|up it takes (K = hidden 256 and the GDN's 4 x 64
// values), the wide tile forced (LILY_CUDA_OPT_QG_WIDE 2, LILY_CUDA_OPT_QG_FILL 0: a tiny call has too few
// blocks for it otherwise), a 300-token prompt
// in one chunk and in chunks of 256, the MoE gate|up on the plain map (3) and on the folded map (35): bitwise
// equal to qgemm_wsw.cu's tile (the same products), with launches on the kernel counted, and against the CPU
// backend.
extern long lily_qg_rw_launches;
void run_e2e_qg_rw(uint64_t seed) {
    lily_config c = config_tiny();
    c.hidden = 256, c.moe_inter = 128, c.shared_inter = 128, c.lin_v_dim = 64;
    const int V = c.vocab_size, N = 300;
    e2e_pair p(c, seed + 23, N);
    lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_PREFILL, 1);
    lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_QG_WIDE, 2);
    lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_QG_FILL, 0); // 128-row tiles whatever the block count
    for (int chunk : {1024, 256}) { // 300 tokens as one chunk, or 256 + 44 (the 44 on 64-row tiles: not here)
        lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_CHUNK, chunk);
        lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_QG_RW, 0);
        std::vector<float> g0 = run_logits(p.be, p.ctx, p.tf, V, 0);
        for (int v : {3, 35}) { // dense and the MoE gate|up; and the gate|up on the folded map (the default)
            lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_QG_RW, v);
            const long before = lily_qg_rw_launches;
            std::vector<float> g1 = run_logits(p.be, p.ctx, p.tf, V, 0);
            const long launches = lily_qg_rw_launches - before;
            const cmp_stats s1 = compare(g1.data(), p.ref.data(), N, V, BF16_GAP);
            const bool same = !memcmp(g1.data(), g0.data(), g1.size() * 4);
            report(same && launches > 0 && s1.rel_mean < BF16_REL_MEAN && s1.rel_worst < BF16_REL_WORST && s1.dec_agree == s1.dec_n,
                   "e2e prefill with the weights as the register operand (qg_rw %d, %d tokens, chunk %d, %ld launches of "
                   "qgemm_rw.cu): %s qgemm_wsw.cu's; vs CPU backend rel_l2 mean %.2e worst %.2e, top-1 %d/%d (decisive %d/%d)",
                   v, N, chunk, launches, same ? "bitwise equal to" : "DIFFERS from", s1.rel_mean, s1.rel_worst, s1.agree, N,
                   s1.dec_agree, s1.dec_n);
        }
    }
}

// A GDN layer's in_proj and step in one launch (LILY_CUDA_OPT_GDN_FRONT, gdn_front.cu) in whole decode steps:
// a tiny model whose in_proj it takes (hidden 1024: gemv2 splits the columns of every 16-row tile over the 8
// warps; R = 2 v heads a k head, Dv 96: column slices of 24), graph-replayed steps with it on and off, each
// against the CPU backend, bitwise equal to each other, with the step's profile showing the fused family on
// every GDN layer (and no separate gdn_step launch) when on, none when off.
void run_e2e_gdn_front(uint64_t seed) {
    lily_config c = config_tiny();
    c.hidden = 1024;
    const int V = c.vocab_size, N = 32;
    e2e_pair p(c, seed + 29, N);
    std::vector<float> g[2];
    for (int on = 0; on < 2; on++) {
        lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_GDN_FRONT, on);
        g[on] = run_logits(p.be, p.ctx, p.tf, V, 1);
        const cmp_stats s = compare(g[on].data(), p.ref.data(), N, V, BF16_GAP);
        int fused = 0, step = 0;
        for (const std::string &f : step_families(p.be, p.ctx))
            fused += f == "gdn in_proj+conv+delta rule", step += f == "gdn conv+delta rule";
        const bool prof_ok = on ? fused == 1 && step == 0 : fused == 0 && step == 1;
        const bool same = !memcmp(g[on].data(), g[0].data(), g[0].size() * 4);
        report(s.rel_mean < BF16_REL_MEAN && s.rel_worst < BF16_REL_WORST && s.dec_agree == s.dec_n && prof_ok && same,
               "e2e decode with in_proj and the GDN step in one launch (gdn_front %s): vs CPU backend rel_l2 mean %.2e "
               "worst %.2e, top-1 %d/%d (decisive %d/%d); vs off: %s; profile: fused family %d, gdn_step family %d",
               on ? "on" : "off", s.rel_mean, s.rel_worst, s.agree, N, s.dec_agree, s.dec_n,
               same ? "bitwise equal" : "DIFFERS", fused, step);
    }
    lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_GDN_FRONT, 1);
}

// The GDN in_proj's qkv, b and a as one GEMM over their stacked weights (LILY_CUDA_OPT_GDN_INPROJ) in
// whole prefills: a 300-token prompt in one chunk and in chunks of 64 (the chunked GDN, then the scan for
// the last 44), on and off, each against the CPU backend, with the layers that took the stacked GEMM
// counted (all GDN layers of every chunk when on, none when off). b and a come from a wider GEMM than on
// their own, so the two need not be the same bits (printed, not asserted). Then a context loaded with
// LILY_CUDA_GDN_INPROJ=0 in the environment (qkv, b, a uploaded apart, as before the stacking): no layer
// stacked even with the option set on, prefill and decode logits against the CPU backend.
extern long lily_pf_inproj_stacked;
void run_e2e_gdn_inproj(uint64_t seed) {
    lily_config c = config_tiny();
    const int V = c.vocab_size, N = 300;
    int n_gdn = 0;
    for (int l = 0; l < c.n_layers; l++) n_gdn += !c.layer_full[l];
    {
        e2e_pair p(c, seed + 29, N);
        lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_PREFILL, 1);
        for (int chunk : {1024, 64}) {
            lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_CHUNK, chunk);
            const int nchunks = (N + chunk - 1) / chunk;
            std::vector<float> g[2];
            for (int on : {0, 1}) {
                lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_GDN_INPROJ, on);
                const long before = lily_pf_inproj_stacked;
                g[on] = run_logits(p.be, p.ctx, p.tf, V, 0);
                const long n = lily_pf_inproj_stacked - before;
                const cmp_stats s1 = compare(g[on].data(), p.ref.data(), N, V, BF16_GAP);
                report(n == (on ? (long)n_gdn * nchunks : 0) && s1.rel_mean < BF16_REL_MEAN &&
                           s1.rel_worst < BF16_REL_WORST && s1.dec_agree == s1.dec_n,
                       "e2e prefill with the GDN in_proj %s (%d tokens, chunk %d, %ld layer-chunks stacked of %d): vs "
                       "CPU backend rel_l2 mean %.2e worst %.2e, top-1 %d/%d (decisive %d/%d)%s",
                       on ? "as one qkv|b|a GEMM" : "as three GEMMs", N, chunk, n, n_gdn * nchunks, s1.rel_mean,
                       s1.rel_worst, s1.agree, N, s1.dec_agree, s1.dec_n,
                       on ? (!memcmp(g[1].data(), g[0].data(), g[1].size() * 4) ? "; bitwise equal to three GEMMs"
                                                                                 : "; not bitwise three GEMMs'")
                          : "");
            }
        }
    }
    const char *old = getenv("LILY_CUDA_GDN_INPROJ");
    const std::string saved = old ? old : "";
    setenv("LILY_CUDA_GDN_INPROJ", "0", 1);
    {
        e2e_pair p(c, seed + 31, N);
        lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_PREFILL, 1);
        lily_cuda_set_opt(p.ctx, LILY_CUDA_OPT_GDN_INPROJ, 1); // no stacked weights: three GEMMs still
        for (int step : {0, 1}) {
            const long before = lily_pf_inproj_stacked;
            std::vector<float> g = run_logits(p.be, p.ctx, p.tf, V, step);
            const long n = lily_pf_inproj_stacked - before;
            const cmp_stats s1 = compare(g.data(), p.ref.data(), N, V, BF16_GAP);
            report(n == 0 && s1.rel_mean < BF16_REL_MEAN && s1.rel_worst < BF16_REL_WORST && s1.dec_agree == s1.dec_n,
                   "e2e %s with qkv, b, a uploaded apart (LILY_CUDA_GDN_INPROJ=0 at load; %d tokens, %ld layer-chunks "
                   "stacked): vs CPU backend rel_l2 mean %.2e worst %.2e, top-1 %d/%d (decisive %d/%d)",
                   step ? "decode" : "prefill", N, n, s1.rel_mean, s1.rel_worst, s1.agree, N, s1.dec_agree, s1.dec_n);
        }
    }
    if (old) setenv("LILY_CUDA_GDN_INPROJ", saved.c_str(), 1);
    else unsetenv("LILY_CUDA_GDN_INPROJ");
}


// The one-launch MoE (LILY_CUDA_OPT_MOE_FUSED) in whole decode steps: a tiny model whose MoE shapes it
// takes (rows of whole 128-column steps; config_tiny's hidden 320 does not), graph-replayed steps with
// it on and off against the CPU backend, and the two against each other.
void run_e2e_moe_fused(uint64_t seed) {
    lily_config c = config_tiny();
    // lin_v_dim 64: heads of 8 lanes, which the front's register prologue takes (96 it does not).
    c.hidden = 256, c.moe_inter = 128, c.shared_inter = 128, c.lin_v_dim = 64;
    const int V = c.vocab_size, N = 32;
    e2e_pair p(c, seed + 5, N);
    const lily_backend *be = p.be;
    void *ctx = p.ctx;
    const std::vector<int> &tf = p.tf;
    const std::vector<float> &ref = p.ref;
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_MOE_FUSED, 0);
    std::vector<float> g0 = run_logits(be, ctx, tf, V, 1);
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_MOE_FUSED, 1);
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_MOE_FRONT, 0);
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_MOE_ACC, 0);
    std::vector<float> g1 = run_logits(be, ctx, tf, V, 1), g1b = run_logits(be, ctx, tf, V, 1);
    cmp_stats s0 = compare(g0.data(), ref.data(), N, V, BF16_GAP), s1 = compare(g1.data(), ref.data(), N, V, BF16_GAP);
    const double e = rel_l2(g1.data(), g0.data(), g1.size());
    report(s1.rel_mean < BF16_REL_MEAN && s1.rel_worst < BF16_REL_WORST && s1.dec_agree == s1.dec_n && e < 1e-2 &&
               !memcmp(g1.data(), g1b.data(), g1.size() * 4),
           "e2e decode with the one-launch MoE (H=256, I=128): vs CPU backend rel_l2 mean %.2e worst %.2e, top-1 "
           "%d/%d (decisive %d/%d; two launches: mean %.2e worst %.2e); vs two launches rel_l2 %.2e; run twice: %s",
           s1.rel_mean, s1.rel_worst, s1.agree, N, s1.dec_agree, s1.dec_n, s0.rel_mean, s0.rel_worst, e,
           !memcmp(g1.data(), g1b.data(), g1.size() * 4) ? "bitwise equal" : "DIFFERS");
    // With the fixed-point sum (LILY_CUDA_OPT_MOE_ACC): the MoE's output folded in by the next layer's
    // in_proj and out_proj / o_proj, the last layer's by lm_head. Deterministic: run twice, the same bits.
    // Then also the GDN layers' gated norm + out_proj in gdn_step's launch (LILY_CUDA_OPT_GDN_OUT), whose
    // rows the router folds in: no separate out_proj launch may be left in the step's profile.
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_MOE_ACC, 1);
    for (int go = 0; go < 2; go++) {
        lily_cuda_set_opt(ctx, LILY_CUDA_OPT_GDN_OUT, go);
        std::vector<float> g3 = run_logits(be, ctx, tf, V, 1), g3b = run_logits(be, ctx, tf, V, 1);
        cmp_stats s3 = compare(g3.data(), ref.data(), N, V, BF16_GAP);
        const double e3 = rel_l2(g3.data(), g1.data(), g3.size());
        const bool twice3 = !memcmp(g3.data(), g3b.data(), g3.size() * 4);
        int fam_sep = 0, fam_fused = 0;
        for (const std::string &f : step_families(be, ctx))
            fam_sep += f == "gdn gated norm+out_proj", fam_fused += f.find("delta rule+gated norm+out_proj") != std::string::npos;
        const bool prof_ok = go ? fam_sep == 0 && fam_fused == 1 : fam_sep == 1 && fam_fused == 0;
        report(s3.rel_mean < BF16_REL_MEAN && s3.rel_worst < BF16_REL_WORST && s3.dec_agree == s3.dec_n && e3 < 1e-2 && twice3 &&
                   prof_ok,
               "e2e decode with the MoE's fixed-point sum (moe_acc)%s: vs CPU backend rel_l2 mean %.2e worst %.2e, top-1 "
               "%d/%d (decisive %d/%d); vs the fp32 sums rel_l2 %.2e; run twice: %s; profile: out_proj launches %d, in "
               "gdn_step %d",
               go ? " and out_proj in gdn_step's launch (gdn_out)" : ", gdn_out off", s3.rel_mean, s3.rel_worst, s3.agree, N,
               s3.dec_agree, s3.dec_n, e3, twice3 ? "bitwise equal" : "DIFFERS", fam_sep, fam_fused);
    }
    // With the front (LILY_CUDA_OPT_MOE_FRONT): out_proj / o_proj and the router inside the MoE's
    // launch. Same bits as the separate launches; the step's profile must show no separate out_proj,
    // o_proj or router launch left (every layer taken).
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_MOE_FRONT, 1);
    std::vector<float> g2 = run_logits(be, ctx, tf, V, 1), g2b = run_logits(be, ctx, tf, V, 1);
    int fronted = 0, separate = 0;
    for (const std::string &f : step_families(be, ctx)) {
        fronted += f.find("out_proj+router+experts") != std::string::npos;
        separate += f.find("o_proj") != std::string::npos || f.find("out_proj") != std::string::npos ||
                    f.find("router") != std::string::npos;
    }
    separate -= fronted; // the fused family's name contains both words
    const bool fr_same = !memcmp(g2.data(), g1.data(), g1.size() * 4), fr_twice = !memcmp(g2.data(), g2b.data(), g2.size() * 4);
    report(fr_same && fr_twice && fronted == 1 && separate == 0,
           "e2e decode with the MoE's front (out_proj / o_proj + router in its launch; moe_acc on, which the front "
           "turns off): vs without, fp32 sums, %s; run twice: %s; "
           "profile: fused family %s, separate out_proj/o_proj/router families %d (want 0)",
           fr_same ? "bitwise equal" : "DIFFERS", fr_twice ? "bitwise equal" : "DIFFERS",
           fronted ? "present" : "ABSENT", separate);
    // The down slice from the slice-major copy (LILY_CUDA_OPT_MOE_DSL, built at load for every layer) against
    // the row-major weights: the same graph-replayed steps, bitwise, with the fixed-point sum (the default).
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_MOE_FRONT, 0);
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_GDN_OUT, 0);
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_MOE_DSL, 0);
    std::vector<float> d0 = run_logits(be, ctx, tf, V, 1);
    lily_cuda_set_opt(ctx, LILY_CUDA_OPT_MOE_DSL, 1);
    std::vector<float> d1 = run_logits(be, ctx, tf, V, 1);
    const int built = lily_cuda_dsl_layers(ctx);
    report(built == c.n_layers && !memcmp(d0.data(), d1.data(), d0.size() * 4),
           "e2e decode with the experts' down slice from the slice-major copy (moe_dsl): copies built for %d of %d "
           "layers; vs the row-major weights %s",
           built, c.n_layers, !memcmp(d0.data(), d1.data(), d0.size() * 4) ? "bitwise equal" : "DIFFERS");
}
