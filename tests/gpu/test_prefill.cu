// test_prefill.cu: `lily-gpu-test prefill [seed]`: the prefill kernels (src/cuda/prefill.cuh) against
// CPU references on fresh random inputs of odd sizes, outputs poisoned with NaN, then timings against
// the ceilings measured in the same run. The families live in test_pf_gemm.cu, test_pf_moe.cu,
// test_pf_gdn.cu and test_pf_attn.cu (their shared helpers in prefill_tests.cuh); this file runs them.
//   qgemm   vs an fp64 loop over the exact dequantised weights (quant.c lily_mat_row): the kernel
//           never rounds a weight, so fp32 output tol 1e-5 (bf16 outputs 5e-3).
//   routing ids equal a CPU softmax/top-k on the same logits; weights within 1e-6; groups, tile map
//           and scatter checked as a permutation. Skewed logits: one expert takes every token, half
//           the experts none.
//   moe     the whole block vs a CPU reference (exact weights, spec §2.5 rounding points): tol 1e-2.
//   gdn     the chunk scan vs a CPU token-by-token recurrence (spec §2.4): state tol 3e-4, output
//           5e-3 (the host sums without FMA and has its own expf, so a few bf16 roundings of conv
//           outputs and of beta flip: the state sits at 4e-8 .. 3e-6 without one and measured
//           3.9e-5 and 1.3e-4 with one carried (2026-11-30); a wrong decay or boundary is > 1e-2); and vs
//           the decode kernel gdn_step run T times (same fp32 arithmetic up to summation order):
//           state 1e-5, output 2e-3, ring bitwise.
//   gdn chunked  gdn_pf_chunked vs the same CPU recurrence (state 3e-4) and vs the scan (1e-4), output 5e-3
//           (reasons at test_gdn_chunked); then scan vs chunked timings at T=1024/4096 (not `small`).
//   attn    pf_attention and pf_attention_flash vs a CPU softmax in double (spec §2.3, gated) and vs
//           each other: rel. L2 1e-2, worst row 2e-2 (reasons at test_attn_pf); then their timings
//           at T=1024 for context 0 and 31K (not with `small`).
#include "prefill_tests.cuh"

// ---------------------------------------------------------------------------------------------
// Speed at the Qwen3.6-35B-A3B shapes with random weights, against the ceilings measured now.
static void bench_prefill(rng &r, bool quick) {
    lily_ceilings ce;
    memset(&ce, 0, sizeof ce);
    lily_ceilings_cuda(NULL, &ce);
    printf("\nceilings: %s; copy %.0f GB/s, bf16 GEMM (cuBLAS) %.0f TFLOP/s\n", ce.device, ce.copy_gbps, ce.gemm_tflops);
    const double peak = ce.gemm_tflops > 0 ? ce.gemm_tflops : 790.0;
    // Dense projections.
    struct dcase { const char *name; int N, K; } dense[] = {
        {"GDN in_proj_qkv 8192x2048", 8192, 2048}, {"GDN/attn out_proj 2048x4096", 2048, 4096}, {"shared expert down 2048x512", 2048, 512}};
    int Ms[] = {256, 4096};
    printf("\n| dense qgemm | M | tile | ms | TFLOP/s | %% of GEMM ceiling |\n|---|---|---|---|---|---|\n");
    for (auto &dc : dense) {
        host_mat hw;
        make_qmat(hw, dc.N, dc.K, 4, 64, 1.0f / sqrtf((float)dc.K), r);
        dq_mat w = up_mat(hw.m);
        for (int M : Ms) {
            std::vector<uint16_t> xb = rand_bf16((size_t)M * dc.K, r);
            qg_args a;
            memset(&a, 0, sizeof a);
            a.x = dup(xb), a.ldx = dc.K, a.w = w, a.M = M, a.N = dc.N, a.K = dc.K, a.epi = QG_BF16;
            a.y = poisoned<uint16_t>((size_t)M * dc.N), a.ldy = dc.N;
            // negative: the same tile on the wgmma kernel; +1000: warp-specialised wgmma
            int tiles[] = {16, 32, 64, 128, -64, -128, -1064, -1128};
            const int ws_was = qgemm_ws_on();
            for (int tv : tiles) {
                const int tm = abs(tv) % 1000;
                if (quick && tm != 64 && tm != 128) continue;
                lily_qg_wgmma = tv < 0;
                lily_qg_ws = tv <= -1000;
                double ms = gpu_time_ms([&] { qgemm_launch(a, tm, 0, 0); }, 10);
                double tf = 2.0 * M * dc.N * dc.K / (ms * 1e-3) / 1e12;
                printf("| %s | %d | %d%s | %.3f | %.1f | %.1f %% |\n", dc.name, M, tm,
                       tv <= -1000 ? " wgmma-ws" : tv < 0 ? " wgmma" : "", ms, tf, 100 * tf / peak);
            }
            lily_qg_wgmma = 1;
            lily_qg_ws = ws_was;
        }
        free_all();
    }
    CK(cudaGetLastError());
    bench_moe(r, quick, peak);
    bench_gdn(r);
}

void run_prefill_tests(uint64_t seed, bool bench, bool quick, bool small) {
    rng r(seed);
    g_small = small;
    // As the engine: every test after test_qgemm (the MoE prefill cases: grouped, gather and scatter
    // rows) runs the wgmma kernel on bf16-rounded weights unless LILY_CUDA_QG_BF16W=0 (exact weights);
    // their tolerances hold for both. test_qgemm runs each case in both modes.
    const char *bw = getenv("LILY_CUDA_QG_BF16W");
    const int bw_default = bw ? atoi(bw) != 0 : 1;
    printf("prefill kernel tests, seed %llu%s\n", (unsigned long long)seed, bw_default ? ", bf16-weight wgmma GEMM" : "");
    const char *only = getenv("LILY_GPU_PF"); // "gdn": the GDN prefill cases and their timing table only
    if (only && !strcmp(only, "gdn")) {
        test_gdn_pf(r);
        test_gdn_chunked(r);
        return;
    }
    if (only && !strcmp(only, "moe")) { // the MoE block at 4096 tokens with the engine's GEMM defaults
        lily_qg_bf16w = bw_default, lily_qg_wide = 1, lily_moe_gather = 1, lily_moe_tails = 2, lily_qg_tma128 = 1;
        lily_qg_raster = 1, lily_qg_wsw = 1;
        const char *wsp = getenv("LILY_CUDA_QG_WSP");
        lily_qg_wsp = wsp ? atoi(wsp) & 3 : 1;
        const char *gt = getenv("LILY_CUDA_QG_GT");
        lily_qg_gt = gt ? atoi(gt) & 3 : 0;
        const char *rw = getenv("LILY_CUDA_QG_RW");
        lily_qg_rw = rw ? atoi(rw) & 7 : 0;
        bench_moe(r, true, 0);
        return;
    }
    if (only && !strcmp(only, "qgemm")) { // the dense GEMM cases only
        test_qgemm(r);
        return;
    }
    if (only && !strcmp(only, "moerw")) { // the MoE cases on qgemm_rw.cu only
        lily_qg_bf16w = 1, lily_moe_gather = 1, lily_moe_tails = 2;
        test_moe_rw(r);
        return;
    }
    const bool gt_only = only && !strcmp(only, "moegt"); // the MoE cases on qgemm_gt.cu only
    if (!gt_only) {
        test_qgemm(r);
        test_qgemm_splitk(r);
    }
    lily_qg_bf16w = bw_default;
    const char *rs = getenv("LILY_CUDA_QG_RS");
    lily_qg_rs = rs ? atoi(rs) != 0 : 0;
    const char *wide = getenv("LILY_CUDA_QG_WIDE");
    lily_qg_wide = wide ? atoi(wide) : 1; // as the engine
    const char *gat = getenv("LILY_CUDA_MOE_GATHER");
    lily_moe_gather = gat ? atoi(gat) != 0 : 1;
    const char *tl = getenv("LILY_CUDA_MOE_TAILS");
    lily_moe_tails = tl ? atoi(tl) : 2; // as the engine, for every pass below
    if (gt_only) {
        lily_qg_bf16w = 1;
        test_moe_gt(r);
        return;
    }
    test_moe_pf(r); // default kernels: wgmma for tiles of 64/128 (gate|up: 192) rows
    test_moe_rw(r);
    const int tails_env = lily_moe_tails;
    lily_moe_tails = lily_moe_tails == 0 ? 2 : 0;
    printf("(the same MoE cases with the groups' tails %s)\n", lily_moe_tails ? "merged (192-row gate|up tiles)" : "on the 128-row tiles");
    test_moe_pf(r);
    lily_moe_tails = tails_env;
    // The tails on 64-row tiles of their own launch (1), merged (2: gate|up, 3: both GEMMs on 192-row
    // tiles of 3 warpgroups), on the 128-column tile, the wide one with tensor-map loads, and the wide
    // one by cp.async (rows gathered by the GEMM).
    const int tails_saved = lily_moe_tails, wide_was = lily_qg_wide, gather_was = lily_moe_gather;
    for (int mt = 1; mt <= 3; mt++) {
        for (int v = 0; v < 3; v++) {
            lily_moe_tails = mt, lily_qg_wide = v ? 2 : wide_was, lily_moe_gather = v == 2 ? 0 : gather_was;
            printf("(the same MoE cases with the tails %s; %s)\n",
                   mt == 1 ? "on 64-row tiles" : mt == 2 ? "merged into 192-row tiles: gate|up" : "merged into 192-row tiles: gate|up and down",
                   v == 0 ? "the engine's tiles" : v == 1 ? "wide tile everywhere" : "wide tile, rows gathered by the GEMM");
            test_moe_pf(r);
        }
    }
    lily_moe_tails = tails_saved, lily_qg_wide = wide_was, lily_moe_gather = gather_was;
    lily_qg_wgmma = 0;
    printf("(the same MoE cases on the mma.sync kernel)\n");
    test_moe_pf(r);
    lily_qg_wgmma = 1;
    const int ws_default = qgemm_ws_on();
    lily_qg_ws = 1;
    printf("(the same MoE cases on the warp-specialised wgmma kernel where it takes them)\n");
    test_moe_pf(r);
    lily_qg_ws = ws_default;
    const int bw_saved = lily_qg_bf16w, rs_saved = lily_qg_rs;
    lily_qg_bf16w = lily_qg_rs = 1;
    printf("(the same MoE cases on the swapped-operand bf16-weight kernel, qgemm_rs.cu)\n");
    test_moe_pf(r);
    lily_qg_bf16w = bw_saved, lily_qg_rs = rs_saved;
    const int wide_saved = lily_qg_wide;
    lily_qg_bf16w = 1, lily_qg_wide = 2;
    const int gather_saved = lily_moe_gather;
    for (int gth = 0; gth < 2; gth++) {
        lily_moe_gather = gth;
        printf("(the same MoE cases on the wide bf16-weight tile wherever they take 128-row tiles, gate|up rows %s)\n",
               gth ? "gathered into expert order first (tensor-map loads)" : "gathered by the GEMM (cp.async)");
        test_moe_pf(r);
    }
    lily_moe_gather = 1, lily_qg_wsw = 1;
    printf("(the same MoE cases on the wide tile warp-specialised (qgemm_wsw.cu) wherever they take 128-row tiles and tensor-map loads)\n");
    test_moe_pf(r);
    lily_qg_wsw = 0;
    // The persistent kernel (qgemm_wsp.cu) on the merged map (tails mode 2): the down projection, the
    // gate|up, both.
    const int tails_was = lily_moe_tails;
    for (int m : {1, 2, 3}) {
        lily_moe_tails = 2, lily_qg_wsp = m;
        printf("(the same MoE cases with %s on the persistent warp-specialised kernel (qgemm_wsp.cu))\n",
               m == 1 ? "the down projection" : m == 2 ? "the gate|up" : "both grouped GEMMs");
        test_moe_pf(r);
    }
    lily_qg_wsp = 0, lily_moe_tails = tails_was;
    test_moe_gt(r);
    lily_moe_gather = gather_saved;
    lily_qg_wide = 0, lily_qg_tma128 = 1;
    printf("(the same MoE cases on the 128-column bf16-weight tile with tensor-map loads where the rows are in order)\n");
    test_moe_pf(r);
    lily_qg_tma128 = 0;
    lily_qg_bf16w = bw_saved, lily_qg_wide = wide_saved;
    test_gdn_pf(r);
    test_gdn_chunked(r);
    test_pf_qk(r);
    test_attn_pf(r);
    if (bench) bench_prefill(r, quick);
}

// `lily-gpu-test qgone M N K TILE WG`: one dense 4-bit GEMM (random weights, group 64), launched twice
// (the second is the one to profile: `ncu -k regex:qgemm --launch-skip 1 --launch-count 1`). WG 3 =
// the wgmma kernel on bf16-rounded weights (lily_qg_bf16w).
void run_qg_once(int M, int N, int K, int tile, int wg) {
    rng r(3);
    host_mat hw;
    make_qmat(hw, N, K, 4, 64, 1.0f / sqrtf((float)K), r);
    std::vector<uint16_t> xb = rand_bf16((size_t)M * K, r);
    qg_args a;
    memset(&a, 0, sizeof a);
    a.x = dup(xb), a.ldx = K, a.w = up_mat(hw.m), a.M = M, a.N = N, a.K = K, a.epi = QG_BF16;
    a.y = poisoned<uint16_t>((size_t)M * N), a.ldy = N;
    lily_qg_wgmma = wg > 0;
    lily_qg_ws = wg == 2; // WG: 0 mma.sync, 1 wgmma, 2 warp-specialised wgmma, 3 wgmma on bf16 weights,
    lily_qg_bf16w = wg >= 3; // 4 the same with the operands swapped (qgemm_rs.cu), 5 the wide tile
    lily_qg_rs = wg == 4; // 6 the wide tile with cp.async instead of tensor-map loads
    lily_qg_wide = wg == 5 || wg == 6 ? 2 : 0; // 7 the 128-column tile with tensor-map loads
    lily_qg_tma = wg != 6;
    lily_qg_tma128 = wg == 7;
    lily_qg_wsw = wg >= 8; // 8 the wide tile warp-specialised (qgemm_wsw.cu)
    lily_qg_rw = wg == 9;  // 9 the wide tile with the weights as the register operand (qgemm_rw.cu)
    if (wg >= 8) lily_qg_wide = 2;
    const long rw0 = lily_qg_rw_launches;
    for (int i = 0; i < 2; i++) qgemm_launch(a, tile, 0, 0);
    CK(cudaDeviceSynchronize());
    if (wg == 9 && lily_qg_rw_launches != rw0 + 2) printf("qgone: NOT on qgemm_rw.cu (it does not take the call)\n");
    double ms = gpu_time_ms([&] { qgemm_launch(a, tile, 0, 0); }, 10);
    printf("qgone M=%d N=%d K=%d tile=%d %s: %.3f ms, %.1f TFLOP/s\n", M, N, K, tile,
           wg == 9 ? "wgmma-wide-rw" : wg == 8 ? "wgmma-wide-wsw" : wg == 7 ? "wgmma-tma128" : wg == 6 ? "wgmma-wide-cpasync" : wg == 5 ? "wgmma-wide" : wg == 4 ? "wgmma-rs" : wg == 3 ? "wgmma-bf16w" : wg == 2 ? "wgmma-ws" : wg ? "wgmma" : "mma.sync", ms,
           2.0 * M * N * K / (ms * 1e-3) / 1e12);
    qg_knobs_reset();
    free_all();
}
