// test_pf_gemm.cu: the prefill GEMM (qgemm.cu and its tile variants) against an fp64 loop over the exact
// dequantised weights, and its split-K form for thin calls.
#include "prefill_tests.cuh"

// ---------------------------------------------------------------------------------------------
// Every case runs through the mma.sync kernel (lily_qg_wgmma = 0) and, where it takes the shape,
// the wgmma kernel (qgemm_wg.cu); for the latter, a probe with the two descriptor byte offsets
// swapped is printed beside it (it must be far off: it shows the layout is what the result rests on).
void test_qgemm(rng &r) {
    struct cs { int M, N, K, bits, group, tile, epi; } cases[] = {
        {64, 128, 64, 4, 64, 64, QG_F32_RAW},    {1, 136, 128, 4, 64, 64, QG_F32_RAW},
        {190, 392, 1088, 4, 64, 128, QG_F32_RAW}, {97, 258, 640, 4, 128, 64, QG_F32_RAW},
        {300, 200, 512, 4, 64, 64, QG_GLU},     {129, 70, 192, 4, 64, 128, QG_GLU},
        {77, 300, 256, 4, 64, 64, QG_RESID},    {130, 256, 2048, 4, 64, 128, QG_BF16},
        {1, 128, 64, 4, 64, 16, QG_F32_RAW},     {37, 200, 192, 4, 64, 16, QG_F32_RAW},
        {100, 256, 2048, 4, 64, 32, QG_F32_RAW}, {333, 512, 1024, 4, 32, 64, QG_F32_RAW},
        {1000, 1030, 512, 4, 128, 128, QG_F32_RAW}, {77, 256, 2048, 8, 64, 0, QG_F32_RAW},
        {129, 66, 320, 8, 32, 128, QG_F32_RAW},  {150, 96, 320, 4, 64, 64, QG_GLU},
        {17, 130, 128, 4, 64, 16, QG_GLU},       {200, 300, 256, 4, 64, 128, QG_RESID},
        {65, 512, 512, 4, 64, 32, QG_BF16},      {513, 64, 4096, 4, 64, 0, QG_F32},
        {300, 600, 256, 4, 64, 128, QG_GLU},
        // The register-operand wide tile (qgemm_rw.cu, pass 9): K a multiple of 256, ragged rows and columns.
        {257, 520, 768, 4, 64, 128, QG_F32_RAW}, {131, 390, 1280, 4, 64, 128, QG_GLU},
        {70, 262, 2048, 4, 64, 128, QG_RESID},
    };
    int idx = 0;
    const int wg_default = lily_qg_wgmma, ws_default = qgemm_ws_on();
    const char *pass_env = getenv("LILY_GPU_QG_PASS"); // one pass only (the sanitizers' runs of a kernel)
    const int only_pass = pass_env ? atoi(pass_env) : -1;
    for (auto &k : cases)
    for (int wg = 0; wg < 10; wg++) { // mma.sync, wgmma, wgmma warp-specialised (qgemm_ws.cu), wgmma on bf16
                                      // weights, the same with the operands swapped (qgemm_rs.cu), the wide
                                      // tile (256 columns; 128-row tiles only) with tensor-map loads (5)
                                      // and with cp.async (6), the 128-column tile with tensor-map loads
                                      // (7), the wide tile warp-specialised (8, qgemm_wsw.cu), the wide tile
                                      // with the weights as the register operand (9, qgemm_rw.cu)
        if (only_pass >= 0 && wg != only_pass) continue;
        if (g_small && idx++ >= 16) break;
        const int tile_k = k.tile ? k.tile : qgemm_pick_tile(k.M);
        if ((wg == 5 || wg == 6 || wg >= 8) && tile_k != 128) continue; // the wide tile: 128 rows only
        if (wg == 9 && (k.K % 256 || k.group != 64 || k.bits != 4 || k.tile != 128)) continue; // qgemm_rw.cu's shapes
                                                                                               // (a picked tile may fill narrower)
        if (wg == 7 && tile_k != 128 && tile_k != 64) continue;
        lily_qg_tma128 = wg == 7; // 7: the 128-column bf16-weight tile with tensor-map loads (128 and 64 rows)
        lily_qg_wgmma = wg > 0;
        lily_qg_ws = wg == 2;
        lily_qg_bf16w = wg >= 3;
        lily_qg_rs = wg == 4;
        lily_qg_wide = wg == 5 || wg == 6 || wg >= 8 ? 2 : 0;
        lily_qg_tma = wg != 6;
        lily_qg_wsw = wg >= 8;
        lily_qg_rw = wg == 9;
        host_mat hw, hw2;
        make_qmat(hw, k.N, k.K, k.bits, k.group, 1.0f / sqrtf((float)k.K), r);
        make_qmat(hw2, k.N, k.K, k.bits, k.group, 1.0f / sqrtf((float)k.K), r);
        std::vector<uint16_t> xb = rand_bf16((size_t)k.M * k.K, r);
        std::vector<float> x = to_f32(xb), res(k.M * (size_t)k.N);
        for (float &v : res) v = bfr(r.normal());
        qg_args a;
        memset(&a, 0, sizeof a);
        a.x = dup(xb), a.ldx = k.K, a.w = up_mat(hw.m), a.w2 = up_mat(hw2.m), a.M = k.M, a.N = k.N, a.K = k.K;
        a.epi = k.epi, a.ldy = k.N;
        bool f32 = k.epi == QG_F32_RAW || k.epi == QG_F32 || k.epi == QG_RESID;
        size_t n = (size_t)k.M * k.N;
        void *y = f32 ? (void *)poisoned<float>(n) : (void *)poisoned<uint16_t>(n);
        a.y = y;
        if (k.epi == QG_RESID) a.res = dup(res);
        int tile_used = k.tile ? k.tile : qgemm_pick_tile(k.M);
        bool wg_path = wg && qgemm_wg_takes(a, tile_used == 128 ? 128 : tile_used);
        if (wg && !wg_path) { free_all(); continue; } // the mma.sync pass covered it
        std::vector<float> swapped;
        if (wg_path) { // probe: descriptors with LBO and SBO exchanged
            lily_qg_wg_desc_swap = 1;
            qgemm_launch(a, k.tile, 0, 0);
            CK(cudaDeviceSynchronize());
            lily_qg_wg_desc_swap = 0;
            swapped.resize(n);
            if (f32) swapped = back((float *)y, n);
            else swapped = to_f32(back((uint16_t *)y, n));
        }
        const long rw_before = lily_qg_rw_launches;
        int rc = qgemm_launch(a, k.tile, 0, 0);
        CK(cudaGetLastError());
        const bool rw_ran = wg != 9 || lily_qg_rw_launches == rw_before + 1; // pass 9 ran on qgemm_rw.cu
        std::vector<float> got(n);
        if (f32) got = back((float *)y, n);
        else got = to_f32(back((uint16_t *)y, n));
        // The same call again into a fresh output with one switch flipped (set, launch, reset): the
        // same bits as `got`.
        auto same_bits = [&](int &flag, int v) {
            void *y2 = f32 ? (void *)poisoned<float>(n) : (void *)poisoned<uint16_t>(n);
            qg_args a2 = a;
            a2.y = y2;
            const int was = flag;
            flag = v;
            qgemm_launch(a2, k.tile, 0, 0);
            CK(cudaDeviceSynchronize());
            flag = was;
            std::vector<float> got2 = f32 ? back((float *)y2, n) : to_f32(back((uint16_t *)y2, n));
            return !memcmp(got.data(), got2.data(), n * sizeof(float));
        };
        // The wgmma kernels launched rastered (lily_qg_raster); the warp-specialised wide tile against
        // qgemm_wg.cu's (lily_qg_wsw off).
        const bool raster_same = !wg_path || same_bits(lily_qg_raster, 1);
        const bool wsw_same = !(wg_path && wg == 8) || same_bits(lily_qg_wsw, 0);
        // The register-operand tile against qgemm_wsw.cu's (informational: the same products, the
        // operands swapped in the MMA).
        const bool rw_same = wg_path && wg == 9 && same_bits(lily_qg_rw, 0);
        // The reference's weights: exact, or (bf16-weight pass) each rounded once to bf16.
        auto wts = [&](const host_mat &h) {
            std::vector<float> w = deq(h.m);
            if (wg >= 3)
                for (float &v : w) v = bfr(v);
            return w;
        };
        std::vector<float> ex = mm(x, wts(hw), k.M, k.N, k.K), ex2;
        if (k.epi == QG_GLU) ex2 = mm(x, wts(hw2), k.M, k.N, k.K);
        auto fin = [&](std::vector<float> &o, const std::vector<float> &u) {
            for (size_t i = 0; i < n; i++) {
                switch (k.epi) {
                case QG_F32: case QG_BF16: o[i] = bfr(o[i]); break;
                case QG_RESID: o[i] = bfr(res[i] + bfr(o[i])); break;
                case QG_GLU: o[i] = bfr(bfr(silu_h(bfr(o[i]))) * bfr(u[i])); break;
                }
            }
        };
        fin(ex, ex2);
        double dx = rel_l2(got.data(), ex.data(), n);
        double tol = k.epi == QG_F32_RAW ? 1e-5 : 5e-3;
        bool ok = !rc && !count_nonfinite(got.data(), n) && dx < tol && raster_same && wsw_same && rw_ran;
        char probe[160] = "";
        if (wg_path)
            snprintf(probe, sizeof probe, "; rastered %s; swapped descriptors: rel_l2 %.1e%s",
                     raster_same ? "bitwise equal" : "DIFFERENT", rel_l2(swapped.data(), ex.data(), n),
                     wg == 9 ? (!rw_ran ? "; NOT RUN on qgemm_rw.cu" : rw_same ? "; qgemm_wsw.cu's tile: bitwise equal" : "; qgemm_wsw.cu's tile: not bitwise equal")
                     : wg != 8 ? "" : wsw_same ? "; qgemm_wg.cu's wide tile: bitwise equal" : "; qgemm_wg.cu's wide tile: DIFFERENT");
        report(ok, "qgemm%s M=%d N=%d K=%d bits=%d group=%d tile=%d epi=%d: rel_l2 %.1e vs %s weights (tol %.0e)%s",
               wg_path ? (wg == 9 ? " (wgmma, bf16 weights, wide tile, weights as the register operand)" : wg == 8 ? " (wgmma, bf16 weights, wide tile, warp-specialised)" : wg == 7 ? " (wgmma, bf16 weights, tensor-map loads)" : wg == 6 ? " (wgmma, bf16 weights, wide tile, cp.async)" : wg == 5 ? " (wgmma, bf16 weights, wide tile)" : wg == 4 ? " (wgmma, bf16 weights, swapped operands)"
                          : wg == 3 ? " (wgmma, bf16 weights)"
                          : wg == 2 ? " (wgmma, warp-specialised)" : " (wgmma)") : "",
               k.M, k.N, k.K, k.bits, k.group, k.tile, k.epi, dx, wg >= 3 ? "bf16-rounded" : "exact", tol, probe);
        free_all();
    }
    lily_qg_wgmma = wg_default;
    lily_qg_ws = ws_default;
    qg_knobs_reset();
}

// ---------------------------------------------------------------------------------------------
// Split-K (qgemm.cu, qgemm_splitk_parts): thin dense calls of odd sizes, every plain epilogue, 4 and 8
// bits, groups 32/64/128, against the same fp64 reference over the exact weights and tolerances as
// test_qgemm (the parts are the mma.sync kernel's sums restarted at a part's first group: fp32
// reassociation only). lily_qg_splitk = 2 splits whatever qualifies by shape; the part count is
// checked to be > 1 (a case that silently ran unsplit would prove nothing), and the partial-sum
// scratch starts as NaN, so a part that fails to write reaches the output. Cases with a scratch too
// small for the first choice of parts check that the count falls to fit; cases under the engine's
// rule (lily_qg_splitk = 1) check which of the router's, b/a's and k/v's shapes split (short chunks)
// and which run unsplit (longer chunks, more columns than 512). The residual case's output aliases
// its residual input, as the engine's out_proj and o_proj calls do.
void test_qgemm_splitk(rng &r) {
    struct cs { int M, N, K, bits, group, epi, mode; long cap; bool expect_split; } cases[] = {
        {77, 256, 2048, 8, 64, QG_F32, 2, 0, true},     {1, 32, 2048, 4, 64, QG_BF16, 2, 0, true},
        {130, 34, 1088, 4, 64, QG_BF16, 2, 0, true},    {37, 510, 640, 4, 128, QG_F32_RAW, 2, 0, true},
        {300, 200, 512, 4, 32, QG_RESID, 2, 0, true},   {65, 66, 320, 8, 32, QG_F32_RAW, 2, 0, true},
        {17, 130, 128, 4, 64, QG_F32_RAW, 2, 0, true},  {200, 96, 2048, 4, 64, QG_F32, 2, 2L * 200 * 96 + 5, true},
        {256, 256, 2048, 8, 64, QG_F32, 1, 0, true},    {1024, 256, 2048, 8, 64, QG_F32, 1, 0, true},
        {2048, 256, 2048, 8, 64, QG_F32, 1, 0, false},  {256, 32, 2048, 4, 64, QG_BF16, 1, 0, true},
        {2048, 32, 2048, 4, 64, QG_BF16, 1, 0, true},   {4096, 32, 2048, 4, 64, QG_BF16, 1, 0, false},
        {256, 512, 2048, 4, 64, QG_F32, 1, 0, true},    {256, 514, 2048, 4, 64, QG_F32, 1, 0, false},
    };
    int idx = 0;
    const int wg_was = lily_qg_wgmma, bw_was = lily_qg_bf16w;
    lily_qg_wgmma = 1, lily_qg_bf16w = 0; // an unsplit call goes where the engine's would (exact weights)
    for (auto &k : cases) {
        if (g_small && idx++ >= 8) break;
        host_mat hw;
        make_qmat(hw, k.N, k.K, k.bits, k.group, 1.0f / sqrtf((float)k.K), r);
        std::vector<uint16_t> xb = rand_bf16((size_t)k.M * k.K, r);
        std::vector<float> x = to_f32(xb), res(k.M * (size_t)k.N);
        for (float &v : res) v = bfr(r.normal());
        const size_t n = (size_t)k.M * k.N;
        const bool f32 = k.epi != QG_BF16;
        qg_args a;
        memset(&a, 0, sizeof a);
        a.x = dup(xb), a.ldx = k.K, a.w = up_mat(hw.m), a.M = k.M, a.N = k.N, a.K = k.K, a.epi = k.epi, a.ldy = k.N;
        a.y = f32 ? (void *)poisoned<float>(n) : (void *)poisoned<uint16_t>(n);
        if (k.epi == QG_RESID) { // aliased: y holds the residual
            CK(cudaMemcpy(a.y, res.data(), n * 4, cudaMemcpyHostToDevice));
            a.res = (const float *)a.y;
        }
        a.part_cap = k.cap ? k.cap : qgemm_splitk_cap();
        a.part = poisoned<float>((size_t)a.part_cap);
        lily_qg_splitk = k.mode;
        int bm = 0;
        const int parts = qgemm_splitk_parts(a, &bm);
        const int rc = qgemm_launch(a, 0, 0, 0);
        CK(cudaDeviceSynchronize());
        lily_qg_splitk = 0;
        std::vector<float> got = f32 ? back((float *)a.y, n) : to_f32(back((uint16_t *)a.y, n));
        std::vector<float> ex = mm(x, deq(hw.m), k.M, k.N, k.K);
        for (size_t i = 0; i < n; i++) {
            if (k.epi == QG_F32 || k.epi == QG_BF16) ex[i] = bfr(ex[i]);
            if (k.epi == QG_RESID) ex[i] = bfr(res[i] + bfr(ex[i]));
        }
        const double dx = rel_l2(got.data(), ex.data(), n), tol = k.epi == QG_F32_RAW ? 1e-5 : 5e-3;
        const bool split_ok = k.expect_split ? parts > 1 && (!k.cap || (long)parts * k.M * k.N <= k.cap) : parts == 1;
        report(!rc && split_ok && !count_nonfinite(got.data(), n) && dx < tol,
               "qgemm split-K (mode %d) M=%d N=%d K=%d bits=%d group=%d epi=%d%s: %d parts of %d-row tiles (%s), "
               "rel_l2 %.1e vs exact weights (tol %.0e)", k.mode, k.M, k.N, k.K, k.bits, k.group, k.epi,
               k.cap ? " (small scratch)" : "", parts, bm, k.expect_split ? "split expected" : "no split expected", dx, tol);
        free_all();
    }
    lily_qg_wgmma = wg_was, lily_qg_bf16w = bw_was;
}
