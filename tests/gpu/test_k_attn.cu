// test_k_attn.cu: kernel tests of the decode attention (attn.cu, attn_tc.cu), the q/k norm + RoPE + append, the token top-k (topk.cu), against CPU references on fresh random
// inputs of odd sizes (run_kernel_tests in test_kernels.cu calls them).
#include "kernel_tests.cuh"

// ---------------------------------------------------------------------------------------------
void test_attn(rng &r) {
    // multi: the D = 256 bf16 path with several positions per warp pass (lily_cuda_attn_multi, the
    // default) or one (the ablation); lengths not a multiple of 8 warps x 4 positions hit the tail.
    // tc: the packed layout on the tensor cores (attn_tc.cu; D 64 / 128 / 256, groups up to 8) or on
    // the CUDA cores; its lengths cross the 64-position stages and the 3-stage ring's wrap (4097 at
    // split 1: 65 stages), leave splits empty (7 positions in 64 splits) and end tiles of 16
    // positions partway.
    struct cs { int hq, hkv, D, len, nsplit, gqa, multi, tc; } cases[] = {
        {6, 2, 64, 1, 1, 1, 1, 1}, {6, 2, 64, 7, 5, 1, 1, 1}, {6, 2, 64, 333, 1, 0, 1, 0}, {6, 2, 64, 1500, 32, 1, 1, 1},
        {16, 2, 256, 4097, 32, 1, 1, 1}, {16, 2, 256, 4097, 1, 0, 1, 0}, {16, 2, 256, 100, 64, 1, 1, 1}, {4, 4, 32, 50, 3, 1, 1, 1},
        {16, 2, 256, 4097, 32, 1, 0, 0}, {16, 2, 256, 4097, 32, 0, 0, 0}, {16, 2, 256, 4097, 32, 0, 1, 0},
        {16, 2, 256, 3, 1, 0, 1, 0}, {8, 1, 256, 45, 5, 1, 1, 1}, {16, 2, 256, 1001, 7, 0, 1, 0},
        {16, 2, 256, 4097, 32, 1, 1, 0}, {16, 2, 256, 4097, 1, 1, 1, 1}, {16, 2, 256, 7, 64, 1, 1, 1},
        {16, 2, 256, 64, 1, 1, 1, 1}, {16, 2, 256, 65, 1, 1, 1, 1}, {16, 2, 256, 12345, 64, 1, 1, 1},
        {8, 2, 128, 777, 9, 1, 1, 1}, {12, 3, 128, 2049, 64, 1, 1, 1}, {16, 4, 64, 191, 3, 1, 1, 1},
        {8, 1, 256, 45, 5, 1, 1, 0}};
    const int tc_default = lily_cuda_attn_tc;
    for (auto &k : cases) {
        lily_cuda_attn_multi = k.multi;
        lily_cuda_attn_tc = k.tc;
        int maxc = k.len + 17;
        attn_dims d = {k.hq, k.hkv, k.D, k.D / 4, maxc, 1e6f, 1e-6f, 0};
        size_t n = (size_t)k.hkv * maxc * k.D;
        std::vector<uint16_t> kc(n), vc(n);
        for (size_t i = 0; i < n; i++) kc[i] = lily_f32_to_bf16(r.normal()), vc[i] = lily_f32_to_bf16(r.normal());
        std::vector<float> q = randv(k.hq * k.D, r, 1.5f), qg = randv(k.hq * 2 * k.D, r);
        for (float &v : q) v = bfr(v); // bf16 values, as qk_norm_rope_append writes them
        int p = k.len - 1;
        float *part = poisoned<float>(attn_part_floats(d, k.nsplit)), *o = poisoned<float>(k.hq * k.D);
        // Both combines (attn_combine_par must give attn_combine's results bitwise).
        float *o_par = poisoned<float>(k.hq * k.D);
        const int comb_default = lily_cuda_attn_comb;
        lily_cuda_attn_comb = 0;
        attn_decode(d, dup(q), dup(kc), dup(vc), dup(qg), part, o, dup(std::vector<int>{p}), k.nsplit, k.gqa, 0);
        lily_cuda_attn_comb = 1;
        attn_decode(d, dup(q), dup(kc), dup(vc), dup(qg), part, o_par, dup(std::vector<int>{p}), k.nsplit, k.gqa, 0);
        float *o_all = poisoned<float>(k.hq * k.D); // combine 2: all of a dim's loads at once (the default)
        lily_cuda_attn_comb = 2;
        attn_decode(d, dup(q), dup(kc), dup(vc), dup(qg), part, o_all, dup(std::vector<int>{p}), k.nsplit, k.gqa, 0);
        lily_cuda_attn_comb = comb_default;
        CK(cudaGetLastError());
        const bool comb_same = back(o_par, k.hq * k.D) == back(o, k.hq * k.D) && back(o_all, k.hq * k.D) == back(o, k.hq * k.D);
        std::vector<float> ref(k.hq * k.D);
        for (int h = 0; h < k.hq; h++) {
            int kvh = h / (k.hq / k.hkv);
            std::vector<double> sc(k.len);
            double mx = -1e300, sum = 0;
            for (int t = 0; t < k.len; t++) {
                double s = 0;
                for (int i = 0; i < k.D; i++) s += (double)q[h * k.D + i] * lily_bf16_to_f32(kc[((size_t)kvh * maxc + t) * k.D + i]);
                sc[t] = s / sqrt((double)k.D);
                mx = fmax(mx, sc[t]);
            }
            for (int t = 0; t < k.len; t++) sum += (sc[t] = exp(sc[t] - mx));
            for (int i = 0; i < k.D; i++) {
                double acc = 0;
                for (int t = 0; t < k.len; t++) acc += sc[t] * lily_bf16_to_f32(vc[((size_t)kvh * maxc + t) * k.D + i]);
                float gt = qg[(size_t)h * 2 * k.D + k.D + i];
                ref[h * k.D + i] = bfr(bfr((float)(acc / sum)) / (1.0f + expf(-gt)));
            }
        }
        std::vector<float> go = back(o, ref.size());
        double e = rel_l2(go.data(), ref.data(), ref.size());
        const bool tc = k.gqa && attn_tc_takes(d);
        report(e < 5e-3 && !count_nonfinite(go.data(), go.size()) && comb_same && tc == (k.tc && k.D >= 64),
               "attn hq=%d hkv=%d D=%d len=%d nsplit=%d gqa=%d multi=%d%s: rel_l2 %.2e; parallel combine %s",
               k.hq, k.hkv, k.D, k.len, k.nsplit, k.gqa, k.multi, tc ? " tensor cores" : "", e,
               comb_same ? "bitwise equal" : "DIFFERS");
    }
    lily_cuda_attn_multi = 1;
    lily_cuda_attn_tc = tc_default;
}

// The q/k norm, RoPE and append inside the tensor-core attention kernel (attn_decode_qk, LILY_CUDA_ATTN_QK)
// against qk_norm_rope_append + attn_decode on the same inputs: the output and the appended k row within
// bf16 rounding (the sums of squares are added in another order), the v row and every other cache row bitwise.
// Lengths cross stages and leave splits empty; the position's row in a middle and in the last stage.
void test_attn_qk(rng &r) {
    struct cs { int hq, hkv, D, rd, len, nsplit; } cases[] = {
        {16, 2, 256, 64, 4097, 32}, {16, 2, 256, 64, 7, 64}, {16, 2, 256, 64, 1, 1}, {16, 2, 256, 64, 65, 1},
        {8, 1, 256, 128, 45, 5},    {8, 2, 128, 64, 777, 9}, {12, 3, 128, 32, 2049, 64}, {6, 2, 64, 32, 1500, 32},
        {16, 4, 64, 64, 191, 3}};
    for (auto &k : cases) {
        const int maxc = k.len + 17, p = k.len - 1;
        attn_dims d = {k.hq, k.hkv, k.D, k.rd, maxc, 1e7f, 1e-6f, 0};
        if (!attn_qk_takes(d)) {
            report(false, "attn qk fused hq=%d hkv=%d D=%d rope=%d: attn_qk_takes refused the shape", k.hq, k.hkv, k.D, k.rd);
            continue;
        }
        const size_t n = (size_t)k.hkv * maxc * k.D;
        std::vector<uint16_t> kc(n), vc(n);
        for (size_t i = 0; i < n; i++) kc[i] = lily_f32_to_bf16(r.normal()), vc[i] = lily_f32_to_bf16(r.normal());
        std::vector<float> qg = randv(k.hq * 2 * k.D, r, 2.0f), kk = randv(k.hkv * k.D, r, 2.0f), vv = randv(k.hkv * k.D, r);
        std::vector<float> qn = randv(k.D, r, 0.2f, 1.0f), kn = randv(k.D, r, 0.2f, 1.0f);
        float *dqg = dup(qg), *dk = dup(kk), *dv = dup(vv), *dqn = dup(qn), *dkn = dup(kn);
        int *pos = dup(std::vector<int>{p});
        uint16_t *kcA = dup(kc), *vcA = dup(vc), *kcB = dup(kc), *vcB = dup(vc);
        float *qr = poisoned<float>(k.hq * k.D), *part = poisoned<float>(attn_part_floats(d, k.nsplit));
        float *oA = poisoned<float>(k.hq * k.D), *oB = poisoned<float>(k.hq * k.D);
        qk_norm_rope_append(d, dqg, dk, dv, dqn, dkn, qr, kcA, vcA, pos, 0);
        attn_decode(d, qr, kcA, vcA, dqg, part, oA, pos, k.nsplit, 1, 0);
        const attn_qk_in in = {dqg, dk, dv, dqn, dkn};
        const bool took = attn_decode_qk(d, in, kcB, vcB, part, oB, pos, k.nsplit, 0);
        CK(cudaGetLastError());
        const std::vector<float> a = back(oA, k.hq * k.D), b = back(oB, k.hq * k.D);
        const std::vector<uint16_t> ka = back(kcA, n), kb = back(kcB, n), va = back(vcA, n), vb = back(vcB, n);
        std::vector<float> kra, krb;
        bool rest_same = true, v_same = true;
        for (int h = 0; h < k.hkv; h++)
            for (int t = 0; t < maxc; t++)
                for (int i = 0; i < k.D; i++) {
                    const size_t at = ((size_t)h * maxc + t) * k.D + i;
                    if (t == p) {
                        kra.push_back(lily_bf16_to_f32(ka[at])), krb.push_back(lily_bf16_to_f32(kb[at]));
                        v_same = v_same && va[at] == vb[at];
                    } else {
                        rest_same = rest_same && ka[at] == kb[at] && va[at] == vb[at];
                    }
                }
        const double eo = rel_l2(b.data(), a.data(), a.size()), ek = rel_l2(krb.data(), kra.data(), kra.size());
        report(took && eo < 5e-3 && ek < 5e-3 && v_same && rest_same && !count_nonfinite(b.data(), b.size()),
               "attn qk fused hq=%d hkv=%d D=%d rope=%d len=%d nsplit=%d: vs qk launch + attention, out rel_l2 %.2e, k row "
               "%.2e, v row %s, other rows %s", k.hq, k.hkv, k.D, k.rd, k.len, k.nsplit, eo, ek, v_same ? "bitwise" : "DIFFER",
               rest_same ? "untouched" : "CHANGED");
        for (void *q : {(void *)dqg, (void *)dk, (void *)dv, (void *)dqn, (void *)dkn, (void *)pos, (void *)kcA, (void *)vcA,
                        (void *)kcB, (void *)vcB, (void *)qr, (void *)part, (void *)oA, (void *)oB})
            CK(cudaFree(q));
    }
}

void test_qk(rng &r) {
    struct cs { int hq, hkv, D, rd, pos; } cases[] = {{6, 2, 64, 16, 0}, {16, 2, 256, 64, 12345}, {3, 1, 96, 32, 77}};
    for (auto &k : cases) {
        int maxc = k.pos + 3;
        attn_dims d = {k.hq, k.hkv, k.D, k.rd, maxc, 1e7f, 1e-6f, 0};
        std::vector<float> qg = randv(k.hq * 2 * k.D, r), kk = randv(k.hkv * k.D, r), vv = randv(k.hkv * k.D, r);
        std::vector<float> qn = randv(k.D, r, 0.2f, 1.0f), kn = randv(k.D, r, 0.2f, 1.0f);
        size_t n = (size_t)k.hkv * maxc * k.D;
        uint16_t *kc = poisoned<uint16_t>(n), *vc = poisoned<uint16_t>(n);
        float *qo = poisoned<float>(k.hq * k.D);
        qk_norm_rope_append(d, dup(qg), dup(kk), dup(vv), dup(qn), dup(kn), qo, kc, vc, dup(std::vector<int>{k.pos}), 0);
        CK(cudaGetLastError());
        auto normrope = [&](const float *x, const std::vector<float> &w) {
            double ss = 0;
            for (int i = 0; i < k.D; i++) ss += x[i] * x[i];
            float rr = 1.0f / sqrtf((float)(ss / k.D) + 1e-6f);
            std::vector<float> y(k.D), o(k.D);
            for (int i = 0; i < k.D; i++) y[i] = o[i] = bfr(x[i] * rr * w[i]);
            int half = k.rd / 2;
            for (int i = 0; i < half; i++) {
                float inv = 1.0f / powf(1e7f, (float)(2 * i) / k.rd), ang = (float)k.pos * inv;
                float c = bfr(cosf(ang)), s = bfr(sinf(ang));
                o[i] = bfr(bfr(y[i] * c) - bfr(y[i + half] * s));
                o[i + half] = bfr(bfr(y[i + half] * c) + bfr(y[i] * s));
            }
            return o;
        };
        std::vector<float> qr, kr, vr, gq = back(qo, k.hq * k.D), gk, gv;
        std::vector<uint16_t> kb = back(kc, n), vb = back(vc, n);
        for (int h = 0; h < k.hq; h++) {
            auto o = normrope(&qg[(size_t)h * 2 * k.D], qn);
            qr.insert(qr.end(), o.begin(), o.end());
        }
        for (int h = 0; h < k.hkv; h++) {
            auto o = normrope(&kk[(size_t)h * k.D], kn);
            kr.insert(kr.end(), o.begin(), o.end());
            for (int i = 0; i < k.D; i++) {
                gk.push_back(lily_bf16_to_f32(kb[((size_t)h * maxc + k.pos) * k.D + i]));
                gv.push_back(lily_bf16_to_f32(vb[((size_t)h * maxc + k.pos) * k.D + i]));
                vr.push_back(bfr(vv[h * k.D + i]));
            }
        }
        double eq = rel_l2(gq.data(), qr.data(), qr.size()), ek = rel_l2(gk.data(), kr.data(), kr.size()), ev = rel_l2(gv.data(), vr.data(), vr.size());
        report(eq < 5e-3 && ek < 5e-3 && ev == 0.0, "qk norm+rope+append hq=%d hkv=%d D=%d rope=%d pos=%d: q %.1e k %.1e v %.1e",
               k.hq, k.hkv, k.D, k.rd, k.pos, eq, ek, ev);
    }
}

// ---------------------------------------------------------------------------------------------
// The decode step's top-k (topk.cu) against a CPU selection: the k largest non-NaN logits, descending,
// ties by lower id, compared bitwise (values and ids); where no logit is NaN, also against the
// sampler's own selection (sampler_top_candidates), which the engine's exactness rests on. Logits
// drawn from few levels (ties across slices and across the k-th place), with +-0, -inf and NaN. Every
// other case also asks for the softmax's mass at a temperature: the same candidates bitwise, and the
// mass against a double sum on the CPU and the sampler's own (sampler_softmax_total), to 1e-5.
void test_topk(rng &r) {
    const struct { int V, k, levels; bool nan; } cases[] = {
        {1, 1, 0, false},        {5, 3, 2, false},       {64, 64, 0, false},      {1000, 20, 7, true},
        {4097, 64, 0, false},    {4097, 2, 3, false},    {12289, 40, 50, true},   {248320, 20, 0, false},
        {248320, 64, 900, false}, {248320, 1, 2, true},  {250001, 33, 0, true},   {100, 64, 1, true},
    };
    for (auto &c : cases) {
        std::vector<float> l(c.V);
        for (int i = 0; i < c.V; i++) {
            float v = c.levels ? (float)(r.next() % c.levels) * 0.25f - 3.0f : r.normal() * 3.0f;
            const uint64_t u = r.next() % 1000;
            if (u == 0) v = -INFINITY;
            else if (u == 1) v = 0.0f;
            else if (u == 2) v = -0.0f;
            else if (u == 3 && c.nan) v = NAN;
            l[i] = v;
        }
        if (c.nan && c.V == 100) // all NaN but 5: fewer candidates than k
            for (int i = 0; i < c.V; i++) l[i] = i % 20 == 7 ? (float)i : NAN;
        std::vector<int> ord;
        for (int i = 0; i < c.V; i++)
            if (l[i] == l[i]) ord.push_back(i);
        std::stable_sort(ord.begin(), ord.end(), [&](int a, int b) { return l[a] > l[b]; });
        const int m = std::min<int>(c.k, (int)ord.size());
        const size_t ci = &c - cases;
        const float temp = ci % 2 ? (ci % 4 == 1 ? 0.7f : 1.3f) : 0.0f; // 0: no mass
        float *dl = dup(l);
        char *scratch = poisoned<char>(topk_scratch_bytes(c.V)), *out = poisoned<char>(8 * c.k + 16);
        const int rc = topk_launch(dl, c.V, c.k, scratch, out, 0, temp);
        std::vector<char> h = back(out, 8 * c.k + 16);
        const float *gv = (const float *)h.data();
        const int *gi = (const int *)(gv + c.k), gn = gi[c.k];
        bool ok = !rc && gn == m;
        char ms[96] = "";
        if (temp > 0.0f) {
            double gm, cm = 0;
            memcpy(&gm, h.data() + 8 * c.k + 8, 8);
            const float mx = ord.empty() ? -INFINITY : l[ord[0]];
            for (int i = 0; i < c.V; i++)
                if (l[i] == l[i] && l[i] > -INFINITY) cm += exp(((double)l[i] - mx) / temp);
            const double sm = sampler_softmax_total(l.data(), c.V, temp);
            const double e1 = fabs(gm - cm) / fmax(cm, 1e-300), e2 = fabs(gm - sm) / fmax(sm, 1e-300);
            ok = ok && e1 < 1e-5 && e2 < 1e-5;
            snprintf(ms, sizeof ms, "; mass at T %.1f %.6g (rel. %.1e CPU, %.1e sampler)", temp, gm, e1, e2);
        }
        for (int j = 0; ok && j < m; j++) ok = gi[j] == ord[j] && !memcmp(&gv[j], &l[ord[j]], 4);
        const char *vs = "-";
        if (!c.nan) {
            std::vector<float> sv(c.k);
            std::vector<int> si(c.k);
            const int sn = sampler_top_candidates(l.data(), c.V, c.k, sv.data(), si.data());
            bool same = sn == gn;
            for (int j = 0; same && j < sn; j++) same = si[j] == gi[j] && !memcmp(&sv[j], &gv[j], 4);
            vs = same ? "equal" : "DIFFER";
            ok = ok && same;
        }
        report(ok, "top-k V=%d k=%d (%s%s): %d candidates, ids and values %s the CPU selection; the sampler's: %s%s",
               c.V, c.k, c.levels ? "few levels" : "normal", c.nan ? ", NaN" : "", gn, ok ? "equal to" : "NOT equal to", vs, ms);
        CK(cudaFree(dl));
        CK(cudaFree(scratch));
        CK(cudaFree(out));
    }
}
