// test_pf_attn.cu: the prefill q/k norm + RoPE and the attention (pf_attention, the flash kernels) against a
// CPU softmax in double and each other.
#include "prefill_tests.cuh"

// ---------------------------------------------------------------------------------------------
// Causal prefill attention: pf_attention (one warp per (token, head), fp32 throughout) and
// pf_attention_flash (attn_flash.cu, tensor cores) against a CPU reference in double written from
// the spec formula o = bf16(rb(softmax(q k^T / sqrt(D)) v) * sigmoid(gate)) over cache [0, pos0 + t],
// and against each other. The cache holds random data up to pos0 + T, so a mask that lets in one
// position too many reads a real key (q has std 2, scores std 2: peaked enough that such a key
// dominates some row), and NaN past it (the last token's one too many). Tolerance: rel. L2 1e-2 over
// all outputs, 2e-2 for the worst (token, head) row. The output is rounded to bf16 twice (2^-9 relative each, a flip at an edge
// costs one bf16 step, 2^-8) and the flash kernel also rounds P to bf16 before P.V (2^-9 relative
// per weight, unbiased, with l summed over the rounded weights, so it does not grow with the length):
// a few 1e-3 expected; a wrong mask, a lost tile or a bad rescale is > 1e-1 on the rows it touches.
// The prefill's q/k norm + RoPE + KV append (pf_qk_norm_rope_append: a block a token, its heads in
// two 128-thread groups) against the decode kernel (qk_norm_rope_append, tested against the CPU in
// test_kernels), run token by token at positions pos0 + t: q, the K and V cache rows bitwise equal (the
// same arithmetic per head), in bf16 and fp32 caches; the cache rows outside the chunk untouched. Odd
// head counts (a group idle in the last round), D below 128 and above, more heads than one batch.
void test_pf_qk(rng &r) {
    struct cs { int hq, hkv, D, T, pos0, f32; } cases[] = {
        {16, 2, 256, 37, 5, 0}, {6, 2, 64, 9, 0, 0}, {5, 2, 96, 20, 100, 1}, {7, 1, 40, 3, 7, 0},
        {24, 8, 128, 11, 64, 0}, {16, 2, 256, 1, 1000, 1}};
    int idx = 0;
    for (auto &k : cases) {
        if (g_small && idx++ >= 2) break;
        const int D = k.D, T = k.T, maxc = k.pos0 + T + 5;
        attn_dims d = {k.hq, k.hkv, D, D / 4, maxc, 1e6f, 1e-6f, k.f32};
        std::vector<float> qg((size_t)T * k.hq * 2 * D), kk((size_t)T * k.hkv * D), vv((size_t)T * k.hkv * D);
        std::vector<float> qn(D), kn(D);
        for (float &v : qg) v = bfr(2.0f * r.normal());
        for (float &v : kk) v = bfr(2.0f * r.normal());
        for (float &v : vv) v = bfr(r.normal());
        for (float &v : qn) v = 1.0f + 0.3f * r.normal();
        for (float &v : kn) v = 1.0f + 0.3f * r.normal();
        const size_t es = k.f32 ? 4 : 2, nkv = (size_t)k.hkv * maxc * D;
        float *dqg = dup(qg), *dk = dup(kk), *dv = dup(vv), *dqn = dup(qn), *dkn = dup(kn);
        float *qo1 = poisoned<float>((size_t)T * k.hq * D), *qo2 = poisoned<float>((size_t)T * k.hq * D);
        void *kc1, *vc1, *kc2, *vc2;
        for (void **c : {&kc1, &vc1, &kc2, &vc2}) {
            CK(cudaMalloc(c, nkv * es));
            CK(cudaMemset(*c, 0x5a, nkv * es));
            g_allocs.push_back(*c);
        }
        pf_qk_norm_rope_append(d, T, k.pos0, dqg, dk, dv, dqn, dkn, qo1, kc1, vc1, 0);
        int *dpos;
        CK(cudaMalloc(&dpos, sizeof(int)));
        g_allocs.push_back(dpos);
        for (int t = 0; t < T; t++) {
            const int p = k.pos0 + t;
            CK(cudaMemcpy(dpos, &p, sizeof p, cudaMemcpyHostToDevice));
            qk_norm_rope_append(d, dqg + (size_t)t * k.hq * 2 * D, dk + (size_t)t * k.hkv * D, dv + (size_t)t * k.hkv * D,
                                dqn, dkn, qo2 + (size_t)t * k.hq * D, kc2, vc2, dpos, 0);
            CK(cudaDeviceSynchronize());
        }
        CK(cudaGetLastError());
        std::vector<float> a = back(qo1, (size_t)T * k.hq * D), b = back(qo2, (size_t)T * k.hq * D);
        std::vector<uint8_t> k1(nkv * es), k2(nkv * es), v1(nkv * es), v2(nkv * es);
        CK(cudaMemcpy(k1.data(), kc1, nkv * es, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(k2.data(), kc2, nkv * es, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(v1.data(), vc1, nkv * es, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(v2.data(), vc2, nkv * es, cudaMemcpyDeviceToHost));
        const bool qeq = !memcmp(a.data(), b.data(), a.size() * 4), keq = k1 == k2, veq = v1 == v2;
        report(qeq && keq && veq && !count_nonfinite(a.data(), a.size()),
               "attn prefill q/k norm + rope + append hq=%d hkv=%d D=%d T=%d pos0=%d %s cache: vs the decode kernel token by "
               "token: q %s, K %s, V %s", k.hq, k.hkv, D, T, k.pos0, k.f32 ? "fp32" : "bf16", qeq ? "equal" : "DIFFER",
               keq ? "equal" : "DIFFER", veq ? "equal" : "DIFFER");
        free_all();
    }
}

void test_attn_pf(rng &r) {
    struct cs { int hq, hkv, D, T, pos0; } cases[] = {
        {16, 2, 256, 37, 0},  {6, 2, 64, 1, 0},     {16, 2, 256, 1, 0},   {16, 2, 256, 300, 1000},
        {6, 2, 64, 37, 0},    {6, 2, 64, 300, 1000}, {16, 2, 256, 37, 5},  {4, 4, 32, 37, 3},
        {8, 1, 96, 100, 200}, {16, 1, 128, 65, 64}, {6, 2, 48, 37, 10},   {6, 3, 80, 129, 31},
        {4, 2, 40, 37, 0}, // D % 16 != 0: pf_attention_flash falls back to pf_attention
        // D 256 on the wgmma kernel too (attn_flash_wg.cu: 128-row blocks, 64-key tiles): a block's
        // rows across tokens and heads, partial key tiles, a chunk after earlier ones.
        {16, 2, 256, 129, 0}, {8, 1, 256, 77, 130}, {16, 4, 256, 200, 63}, {16, 2, 256, 16, 48},
    };
    int idx = 0;
    for (auto &k : cases) {
        if (g_small && idx++ >= 3) break;
        const int maxc = k.pos0 + k.T + 19, D = k.D, T = k.T, group = k.hq / k.hkv;
        attn_dims d = {k.hq, k.hkv, D, D / 4, maxc, 1e6f, 1e-6f, 0};
        size_t nkv = (size_t)k.hkv * maxc * D, nq = (size_t)T * k.hq * D;
        std::vector<uint16_t> kc = rand_bf16(nkv, r), vc = rand_bf16(nkv, r);
        // Positions past the chunk's last are never attended to: NaN there, so a kernel whose key
        // tiles reach past it must mask the scores and zero the V rows it loads (0 * NaN is NaN).
        for (int h = 0; h < k.hkv; h++)
            for (size_t i = ((size_t)h * maxc + k.pos0 + T) * D; i < (size_t)(h + 1) * maxc * D; i++) kc[i] = vc[i] = 0x7fc0;
        std::vector<float> q = to_f32(rand_bf16(nq, r, 2.0f)), qg((size_t)T * k.hq * 2 * D);
        for (float &v : qg) v = bfr(r.normal());
        uint16_t *dkc = dup(kc), *dvc = dup(vc), *o_old = poisoned<uint16_t>(nq), *o_fa = poisoned<uint16_t>(nq);
        uint16_t *o_wg[2] = {poisoned<uint16_t>(nq), poisoned<uint16_t>(nq)};
        float *dq = dup(q), *dqg = dup(qg);
        pf_attention(d, T, k.pos0, dq, dkc, dvc, dqg, o_old, 0);
        pf_attention_flash(d, T, k.pos0, dq, dkc, dvc, dqg, o_fa, 0);
        // The wgmma kernel where it takes the shape (D 256; else the same as o_fa), in both V modes
        // (lily_fa_wg 1: V transposed in shared memory; 2: V as an MN-major operand).
        lily_fa_wg = 1;
        const bool wg = pf_attention_wg_takes(d);
        for (int v = 0; v < 2; v++) lily_fa_wg = 1 + v, pf_attention_flash(d, T, k.pos0, dq, dkc, dvc, dqg, o_wg[v], 0);
        lily_fa_wg = 0;
        CK(cudaGetLastError());
        std::vector<float> go = to_f32(back(o_old, nq)), gf = to_f32(back(o_fa, nq)), ref(nq);
        for (int t = 0; t < T; t++)
            for (int h = 0; h < k.hq; h++) {
                const int kvh = h / group, len = k.pos0 + t + 1;
                const float *qr = &q[((size_t)t * k.hq + h) * D];
                std::vector<double> sc(len);
                double mx = -1e300, sum = 0;
                for (int p = 0; p < len; p++) {
                    const uint16_t *kr = &kc[((size_t)kvh * maxc + p) * D];
                    double s = 0;
                    for (int i = 0; i < D; i++) s += (double)qr[i] * lily_bf16_to_f32(kr[i]);
                    sc[p] = s / sqrt((double)D), mx = fmax(mx, sc[p]);
                }
                for (int p = 0; p < len; p++) sum += (sc[p] = exp(sc[p] - mx));
                std::vector<double> acc(D, 0.0);
                for (int p = 0; p < len; p++) {
                    const uint16_t *vr = &vc[((size_t)kvh * maxc + p) * D];
                    for (int i = 0; i < D; i++) acc[i] += sc[p] * lily_bf16_to_f32(vr[i]);
                }
                for (int i = 0; i < D; i++) {
                    float gt = qg[((size_t)t * k.hq + h) * 2 * D + D + i];
                    ref[((size_t)t * k.hq + h) * D + i] = bfr(bfr((float)(acc[i] / sum)) / (1.0f + expf(-gt)));
                }
            }
        auto worst_row = [&](const std::vector<float> &a, const std::vector<float> &b) {
            double w = 0;
            for (size_t row = 0; row < (size_t)T * k.hq; row++) w = fmax(w, rel_l2(&a[row * D], &b[row * D], D));
            return w;
        };
        double e_old = rel_l2(go.data(), ref.data(), nq), e_fa = rel_l2(gf.data(), ref.data(), nq);
        double w_old = worst_row(go, ref), w_fa = worst_row(gf, ref), e_x = rel_l2(gf.data(), go.data(), nq);
        bool fin = !count_nonfinite(go.data(), nq) && !count_nonfinite(gf.data(), nq);
        for (int v = 0; wg && v < 2; v++) {
            std::vector<float> gw = to_f32(back(o_wg[v], nq));
            const double e_wg = rel_l2(gw.data(), ref.data(), nq), w_wg = worst_row(gw, ref);
            const double e_wx = rel_l2(gw.data(), gf.data(), nq);
            report(!count_nonfinite(gw.data(), nq) && e_wg < 1e-2 && w_wg < 2e-2 && e_wx < 1e-2,
                   "attn prefill (flash, wgmma, V %s) hq=%d hkv=%d D=%d T=%d pos0=%d: vs CPU rel_l2 %.2e, worst "
                   "row %.2e; vs the mma.sync flash %.2e (tol 1e-2, 2e-2)",
                   v ? "MN-major" : "transposed", k.hq, k.hkv, D, T, k.pos0, e_wg, w_wg, e_wx);
        }
        report(fin && e_old < 1e-2 && w_old < 2e-2,
               "attn prefill (pf_attention) hq=%d hkv=%d D=%d T=%d pos0=%d: vs CPU rel_l2 %.2e, worst row %.2e (tol 1e-2, 2e-2)",
               k.hq, k.hkv, D, T, k.pos0, e_old, w_old);
        report(fin && e_fa < 1e-2 && w_fa < 2e-2 && e_x < 1e-2,
               "attn prefill (flash%s) hq=%d hkv=%d D=%d T=%d pos0=%d: vs CPU rel_l2 %.2e, worst row %.2e; vs pf_attention %.2e (tol 1e-2, 2e-2)",
               D % 16 ? ", falls back" : "", k.hq, k.hkv, D, T, k.pos0, e_fa, w_fa, e_x);
        free_all();
    }
    if (g_small) return;
    // Speed at the 35B-A3B shapes (16 q heads, 2 KV heads, D 256), one 1024-token chunk at the start
    // and at 31K of context. Printed only.
    const int hq = 16, hkv = 2, D = 256, T = 1024, maxc = 32768;
    attn_dims d = {hq, hkv, D, 64, maxc, 1e7f, 1e-6f, 0};
    uint16_t *kc = poisoned<uint16_t>((size_t)hkv * maxc * D), *vc = poisoned<uint16_t>((size_t)hkv * maxc * D);
    CK(cudaMemset(kc, 0x3c, (size_t)hkv * maxc * D * 2));
    CK(cudaMemset(vc, 0x3c, (size_t)hkv * maxc * D * 2));
    float *q = dup(to_f32(rand_bf16((size_t)T * hq * D, r))), *qg = dup(to_f32(rand_bf16((size_t)T * hq * 2 * D, r)));
    uint16_t *o = poisoned<uint16_t>((size_t)T * hq * D);
    printf("\n| prefill attention (hq 16, hkv 2, D 256) | T | pos0 | pf_attention ms | flash ms | speed-up |\n|---|---|---|---|---|---|\n");
    for (int pos0 : {0, maxc - T}) {
        double ms_old = gpu_time_ms([&] { pf_attention(d, T, pos0, q, kc, vc, qg, o, 0); }, 3);
        double ms_fa = gpu_time_ms([&] { pf_attention_flash(d, T, pos0, q, kc, vc, qg, o, 0); }, 5);
        double ms_wg[2];
        for (int v = 0; v < 2; v++)
            lily_fa_wg = 1 + v, ms_wg[v] = gpu_time_ms([&] { pf_attention_flash(d, T, pos0, q, kc, vc, qg, o, 0); }, 5);
        lily_fa_wg = 0;
        double flop = 4.0 * hq * D * ((double)T * pos0 + (double)T * (T + 1) / 2);
        printf("| attention | %d | %d | %.3f | %.3f (%.0f TFLOP/s); wgmma, V transposed / MN-major %.0f / %.0f TFLOP/s | %.1fx |\n",
               T, pos0, ms_old, ms_fa, flop / (ms_fa * 1e-3) / 1e12, flop / (ms_wg[0] * 1e-3) / 1e12,
               flop / (ms_wg[1] * 1e-3) / 1e12, ms_old / ms_wg[1]);
    }
    CK(cudaGetLastError());
    free_all();
}
