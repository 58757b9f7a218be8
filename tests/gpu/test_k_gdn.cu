// test_k_gdn.cu: kernel tests of the Gated DeltaNet step (gdn.cu, its fused out_proj) and in_proj + step in one launch (gdn_front.cu), against CPU references on fresh random
// inputs of odd sizes (run_kernel_tests in test_kernels.cu calls them).
#include "kernel_tests.cuh"

// ---------------------------------------------------------------------------------------------
static uint32_t bits(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
}
static int count_diff(const std::vector<float> &a, const std::vector<float> &b) {
    int n = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); i++) n += memcmp(&a[i], &b[i], 4) != 0;
    return n;
}
void test_gdn(rng &r) {
    // LILY_GPU_GDN_OUT_LAT=0|1: the fused launch's form (default: the default's, lily_cuda_gdn_lat).
    const char *ol = getenv("LILY_GPU_GDN_OUT_LAT");
    const int out_lat = ol ? atoi(ol) : -1;
    // H, grp: out_proj's rows and group for the gated norm + out_proj in the same launch (LILY_CUDA_GDN_OUT),
    // run where gdn_out_takes (Dv a multiple of 32 up to 128, Dv / 8 a power of two): the model's shape at
    // split 4 and 8; heads of 64 with a group spanning two heads and rows not a multiple of the split.
    struct cs { int hk, hv, dk, dv, K, nsplit, H, grp; } cases[] = {
        {2, 6, 64, 96, 4, 3, 200, 32},      {16, 32, 128, 128, 4, 4, 2048, 64}, {1, 2, 32, 40, 3, 1, 64, 32},
        {16, 32, 128, 128, 4, 8, 2048, 64}, {3, 6, 64, 64, 4, 8, 333, 128},    {2, 4, 32, 32, 4, 2, 130, 32}};
    for (auto &k : cases) {
        gdn_dims d = {k.hk, k.hv, k.dk, k.dv, k.K};
        // The out_proj launch's inputs (o is the step's): z, the gain, W (H x hv*dv), a small residual.
        host_mat wo;
        make_qmat(wo, k.H, k.hv * k.dv, 4, k.grp, 1.0f / sqrtf((float)(k.hv * k.dv)), r);
        gdn_out_args oa;
        memset(&oa, 0, sizeof oa);
        oa.wo = up_mat(wo.m), oa.eps = 1e-6f, oa.H = k.H;
        const bool out = gdn_out_takes(d, k.nsplit, oa.wo, k.H, k.dv);
        std::vector<float> zv = randv(k.hv * k.dv, r), gw = randv(k.dv, r, 0.3f, 1.0f), resv = randv(k.H, r, 0.02f);
        oa.z = dup(zv), oa.gnorm = dup(gw);
        oa.acc = dup(std::vector<unsigned long long>(k.H + 1, 0ull));
        oa.hbar = dup(std::vector<unsigned>(2 * k.hv, 0u));
        // The residual for the router: x with the previous MoE's sum folded in (pend, then zeroed), into x_out.
        const std::vector<float> xres = randv(k.H, r);
        std::vector<unsigned long long> pendv = acc_codes(k.H, r, 0.5f);
        oa.x = dup(xres), oa.x_out = poisoned<float>(k.H);
        unsigned long long *dpend = dup(pendv);
        float *ring3 = dup(std::vector<float>((size_t)k.K * (2 * k.hk * k.dk + k.hv * k.dv), 0.0f));
        float *S3 = dup(std::vector<float>((size_t)k.hv * k.dv * k.dk, 0.0f));
        bool out_same = true;
        char out_why[160] = ""; // the first part that differed, and its step
        auto out_check = [&](bool ok, const char *what, int step) {
            if (!ok && out_same) snprintf(out_why, sizeof out_why, " (first: %s at step %d)", what, step);
            out_same = out_same && ok;
        };
        double worst_y = 0;
        const int C = 2 * k.hk * k.dk + k.hv * k.dv;
        std::vector<float> convw = randv(C * k.K, r, 0.5f), dtb = randv(k.hv, r), A(k.hv);
        for (float &v : A) v = -expf(r.sym());
        float *dconv = dup(convw), *ddt = dup(dtb), *dA = dup(A);
        float *ring = dup(std::vector<float>((size_t)k.K * C, 0.0f));
        float *S = dup(std::vector<float>((size_t)k.hv * k.dv * k.dk, 0.0f));
        // The latency variant (LILY_CUDA_GDN_LAT) on its own ring and state: the same bits expected.
        float *ring2 = dup(std::vector<float>((size_t)k.K * C, 0.0f));
        float *S2 = dup(std::vector<float>((size_t)k.hv * k.dv * k.dk, 0.0f));
        bool lat_same = true;
        int *pos = dup(std::vector<int>{0});
        std::vector<float> hist((size_t)(k.K - 1) * C, 0.0f), Sr((size_t)k.hv * k.dk * k.dv, 0.0f);
        double worst_o = 0, worst_s = 0;
        bool finite = true;
        for (int step = 0; step < 6; step++) {
            std::vector<float> qkv = randv(C, r), b = randv(k.hv, r), a = randv(k.hv, r);
            for (float &v : qkv) v = bfr(v);
            float *o = poisoned<float>(k.hv * k.dv);
            CK(cudaMemcpy(pos, &step, 4, cudaMemcpyHostToDevice));
            const float *dq = dup(qkv), *dbb = dup(b), *daa = dup(a);
            const int lat0 = lily_cuda_gdn_lat;
            lily_cuda_gdn_lat = 0;
            gdn_step(d, dq, dbb, daa, dconv, ddt, dA, ring, S, o, pos, k.nsplit, 0);
            float *o2 = poisoned<float>(k.hv * k.dv);
            lily_cuda_gdn_lat = 1;
            gdn_step(d, dq, dbb, daa, dconv, ddt, dA, ring2, S2, o2, pos, k.nsplit, 0);
            lily_cuda_gdn_lat = lat0;
            CK(cudaGetLastError());
            {
                const size_t ns = (size_t)k.hv * k.dv * k.dk, nr = (size_t)k.K * C;
                lat_same = lat_same && back(o, k.hv * k.dv) == back(o2, k.hv * k.dv) && back(S, ns) == back(S2, ns) &&
                           back(ring, nr) == back(ring2, nr);
            }
            if (out) { // with out_proj in the launch: o, state and ring as without; out_proj's rows in oa.acc
                float *o3 = poisoned<float>(k.hv * k.dv);
                CK(cudaMemset(oa.acc, 0, (k.H + 1) * sizeof(unsigned long long)));
                CK(cudaMemcpy(dpend, pendv.data(), pendv.size() * 8, cudaMemcpyHostToDevice));
                CK(cudaMemset(oa.x_out, 0xff, k.H * sizeof(float)));
                oa.pend = step % 2 ? dpend : NULL; // odd steps with a sum to fold, even ones without
                if (out_lat >= 0) lily_cuda_gdn_lat = out_lat;
                gdn_step(d, dq, dbb, daa, dconv, ddt, dA, ring3, S3, o3, pos, k.nsplit, 0, &oa);
                lily_cuda_gdn_lat = lat0;
                CK(cudaGetLastError());
                out_check(back(oa.x_out, k.H) == (oa.pend ? acc_fold(xres, pendv) : xres), "the router's residual", step);
                if (oa.pend) {
                    const std::vector<unsigned long long> pl = back(dpend, k.H + 1);
                    bool zeroed = true;
                    for (int i = 0; i < k.H; i++) zeroed = zeroed && pl[i] == 0;
                    out_check(zeroed, "pend zeroed", step);
                }
                const size_t ns = (size_t)k.hv * k.dv * k.dk, nr = (size_t)k.K * C;
                const std::vector<float> og = back(o, k.hv * k.dv);
                const std::vector<float> o3v = back(o3, k.hv * k.dv);
                if (o3v != og && out_same) { // where: which heads and splits, and by how much
                    const std::vector<float> o2v = back(o2, k.hv * k.dv);
                    int nd = 0;
                    for (int i = 0; i < k.hv * k.dv; i++) {
                        if (!memcmp(&o3v[i], &og[i], 4)) continue;
                        if (nd++ < 6)
                            printf("  gdn_out o differs: step %d head %d col %d (split %d): %08x against %08x (latency "
                                   "variant %08x)\n", step, i / k.dv, i % k.dv, (i % k.dv) / (k.dv / k.nsplit),
                                   bits(o3v[i]), bits(og[i]), bits(o2v[i]));
                    }
                    printf("  gdn_out o differs in %d of %d values; state differs in %d\n", nd, k.hv * k.dv,
                           count_diff(back(S3, (size_t)k.hv * k.dv * k.dk), back(S, (size_t)k.hv * k.dv * k.dk)));
                }
                out_check(o3v == og, "o", step);
                out_check(back(S3, ns) == back(S, ns), "state", step);
                out_check(back(ring3, nr) == back(ring, nr), "ring", step);
                const std::vector<unsigned> hb = back(oa.hbar, 2 * k.hv);
                bool bars = true;
                for (int h = 0; h < k.hv; h++) bars = bars && hb[2 * h] == 0 && hb[2 * h + 1] == (unsigned)step + 1;
                out_check(bars, "head barriers", step);
                // Reference: the gated norm of the GPU's o (spec §2.1b), W g, rounded and added to res.
                std::vector<float> g(k.hv * k.dv);
                for (int h = 0; h < k.hv; h++) {
                    double ss = 0;
                    for (int j = 0; j < k.dv; j++) ss += (double)og[h * k.dv + j] * og[h * k.dv + j];
                    const float rr = 1.0f / sqrtf((float)(ss / k.dv) + 1e-6f);
                    for (int j = 0; j < k.dv; j++) {
                        const float zz = zv[h * k.dv + j];
                        g[h * k.dv + j] = bfr(bfr(gw[j] * bfr(og[h * k.dv + j] * rr)) * (zz / (1.0f + expf(-zz))));
                    }
                }
                std::vector<float> yr = mv(wo.m, g.data());
                for (int i = 0; i < k.H; i++) yr[i] = bfr(resv[i] + bfr(yr[i]));
                const std::vector<unsigned long long> acc = back(oa.acc, k.H + 1);
                const std::vector<float> yg = acc_fold(resv, acc);
                out_check(acc[k.H] == 0 && !count_nonfinite(yg.data(), yg.size()), "out_proj's sum finite", step);
                const double ey = rel_l2(yg.data(), yr.data(), yg.size());
                worst_y = ey > worst_y ? ey : worst_y;
            }
            // Reference (spec §2.4), state (dk, dv) per head.
            std::vector<float> u(C), orf(k.hv * k.dv);
            for (int c = 0; c < C; c++) {
                float acc = convw[(size_t)c * k.K + k.K - 1] * qkv[c];
                for (int t = 0; t < k.K - 1; t++) acc += convw[(size_t)c * k.K + t] * hist[(size_t)t * C + c];
                u[c] = bfr(bfr(acc) / (1 + expf(-bfr(acc))));
            }
            for (int t = 0; t + 1 < k.K - 1; t++) memcpy(&hist[(size_t)t * C], &hist[(size_t)(t + 1) * C], C * 4);
            memcpy(&hist[(size_t)(k.K - 2) * C], qkv.data(), C * 4);
            for (int h = 0; h < k.hv; h++) {
                std::vector<float> q, kk;
                gdn_ref_qk(u.data(), k.hk, k.hv, k.dk, h, q, kk);
                float beta = bfr(1 / (1 + expf(-b[h]))), xa = a[h] + dtb[h];
                float gamma = expf(A[h] * (xa > 20 ? xa : log1pf(expf(xa))));
                float *Sh = &Sr[(size_t)h * k.dk * k.dv];
                for (int i = 0; i < k.dk * k.dv; i++) Sh[i] *= gamma;
                for (int j = 0; j < k.dv; j++) {
                    float uu = 0, oo = 0, v = u[2 * k.hk * k.dk + h * k.dv + j];
                    for (int i = 0; i < k.dk; i++) uu += Sh[i * k.dv + j] * kk[i];
                    float delta = beta * (v - uu);
                    for (int i = 0; i < k.dk; i++) Sh[i * k.dv + j] += kk[i] * delta, oo += Sh[i * k.dv + j] * q[i];
                    orf[h * k.dv + j] = bfr(oo);
                }
            }
            std::vector<float> go = back(o, k.hv * k.dv), gs = back(S, (size_t)k.hv * k.dv * k.dk), st(gs.size());
            for (int h = 0; h < k.hv; h++)
                for (int j = 0; j < k.dv; j++)
                    for (int i = 0; i < k.dk; i++)
                        st[((size_t)h * k.dk + i) * k.dv + j] = gs[((size_t)h * k.dv + j) * k.dk + i];
            finite = finite && !count_nonfinite(go.data(), go.size());
            double eo = rel_l2(go.data(), orf.data(), go.size()), es = rel_l2(st.data(), Sr.data(), st.size());
            worst_o = eo > worst_o ? eo : worst_o, worst_s = es > worst_s ? es : worst_s;
        }
        // State tolerance: the reference rounds the conv output to bf16 (u), and the GPU's fp32 conv
        // sum may land on the other side of a rounding edge; one flipped element of a head's k moves
        // that head's state by ~2^-8 / sqrt(dk) (seed 1795984978: 1.2e-4 at dk = 64). A wrong index or
        // a missed decay is O(1).
        report(finite && worst_o < 5e-3 && worst_s < 1e-3 && lat_same, "gdn hk=%d hv=%d dk=%d dv=%d K=%d nsplit=%d, 6 steps: o rel_l2 %.2e, state rel_l2 %.2e; latency variant %s",
               k.hk, k.hv, k.dk, k.dv, k.K, k.nsplit, worst_o, worst_s, lat_same ? "bitwise equal" : "DIFFERS");
        const bool model_shape = k.dv == 128 && k.hv == 32; // gdn_out_takes must take the model's shape
        if (out || model_shape)
            report(out && worst_y < 5e-3 && out_same,
                   "gdn + gated norm + out_proj in one launch (gdn_out) hv=%d dv=%d nsplit=%d H=%d group %d, 6 steps: %s; "
                   "residual + out_proj rel_l2 %.2e; o, state, ring against gdn_step alone, head barriers, the router's "
                   "residual (pend folded in, zeroed): %s%s",
                   k.hv, k.dv, k.nsplit, k.H, k.grp, out ? "taken" : "NOT TAKEN", worst_y,
                   out_same ? "bitwise equal, as left" : "DIFFER", out_why);
    }
}

// ---------------------------------------------------------------------------------------------
// A GDN layer's in_proj and step in one launch (gdn_front.cu) against the two launches it replaces
// (gemv_launch of the same four segments, then gdn_step at split GF_BLOCKS / R), on fresh random weights,
// input, pending MoE sum, conv ring and state, over several steps: in_proj's rows (qkv, z, b, a), o,
// the ring and the state bitwise equal, the head barriers left as found. The shapes: the model's (R = 2),
// and odd ones the kernel must take: group 32 (four group slots a lane), R = 1 with 8-bit b and a rows
// and K = 3, R = 4 with 10 column steps and b's rows in a partial tile; and one it must refuse (dk 24).
void test_gdn_front(rng &r) {
    struct cs { int hk, hv, dk, dv, K, H, grp, babits; bool take; } cases[] = {
        {16, 32, 128, 128, 4, 2048, 64, 4, true}, {3, 6, 64, 32, 4, 1024, 32, 4, true},
        {4, 4, 64, 64, 3, 1024, 128, 8, true},    {2, 8, 32, 64, 4, 1280, 64, 4, true},
        {2, 4, 24, 32, 4, 1024, 64, 4, false}};
    const int gemv2_0 = lily_cuda_gemv2;
    lily_cuda_gemv2 = 1;
    for (auto &k : cases) {
        const gdn_dims d = {k.hk, k.hv, k.dk, k.dv, k.K};
        const int R = k.hv / k.hk, C = 2 * k.hk * k.dk + k.hv * k.dv, nsplit = 8 / R;
        const int rows[4] = {C, k.hv * k.dv, k.hv, k.hv};
        std::vector<host_mat> hm(4);
        gv_args a, b; // a: gdn_front's outputs; b: the two launches'
        memset(&a, 0, sizeof a);
        a.nseg = 4, a.cols = k.H, a.pro = PRO_RMSNORM, a.epi = GV_STORE, a.eps = 1e-6f;
        a.norm_w = dup(randv(k.H, r, 0.3f, 1.0f));
        for (int s = 0; s < 4; s++) {
            make_qmat(hm[s], rows[s], k.H, s >= 2 ? k.babits : 4, k.grp, 1.0f / sqrtf((float)k.H), r);
            a.seg[s].m = up_mat(hm[s].m);
        }
        b = a;
        for (int s = 0; s < 4; s++) a.seg[s].y = poisoned<float>(rows[s]), b.seg[s].y = poisoned<float>(rows[s]);
        const bool took = gdn_front_takes(a, d);
        if (!k.take) {
            report(!took, "gdn front hk=%d hv=%d dk=%d dv=%d H=%d: refused (dk not whole 16-row tiles): %s", k.hk, k.hv,
                   k.dk, k.dv, k.H, took ? "TAKEN" : "yes");
            continue;
        }
        std::vector<float> convw = randv(C * k.K, r, 0.5f), dtb = randv(k.hv, r), A(k.hv);
        for (float &v : A) v = -expf(r.sym());
        const float *dconv = dup(convw), *ddt = dup(dtb), *dA = dup(A);
        const std::vector<float> ring0 = randv(k.K * C, r), S0 = randv(k.hv * k.dv * k.dk, r, 0.1f);
        float *ringa = dup(ring0), *ringb = dup(ring0), *Sa = dup(S0), *Sb = dup(S0);
        float *oa = poisoned<float>(k.hv * k.dv), *ob = poisoned<float>(k.hv * k.dv);
        unsigned *hbar = dup(std::vector<unsigned>(2 * k.hk, 0u));
        int *pos = dup(std::vector<int>{0});
        const gdn_front_args f = {d, dconv, ddt, dA, ringa, Sa, oa, pos, hbar};
        bool same = took;
        char why[160] = "";
        auto check = [&](bool ok, const char *what, int step) {
            if (!ok && same) snprintf(why, sizeof why, " (first: %s at step %d)", what, step);
            same = same && ok;
        };
        double eo = 0;
        const int steps = 4;
        for (int step = 0; step < steps && took; step++) {
            const int p = 5 + step; // a ring already full
            CK(cudaMemcpy(pos, &p, 4, cudaMemcpyHostToDevice));
            const std::vector<float> x = randv(k.H, r, 2.0f);
            a.x = b.x = dup(x);
            // Odd steps with the previous MoE's sum pending on x.
            a.acc_x = b.acc_x = step % 2 ? dup(acc_codes(k.H, r, 0.5f)) : nullptr;
            gemv_launch(b, 0, 0);
            gdn_step(d, b.seg[0].y, b.seg[2].y, b.seg[3].y, dconv, ddt, dA, ringb, Sb, ob, pos, nsplit, 0);
            gdn_front(a, f, 0);
            CK(cudaGetLastError());
            const char *nm[4] = {"qkv", "z", "b", "a"};
            for (int s = 0; s < 4; s++) check(back(a.seg[s].y, rows[s]) == back(b.seg[s].y, rows[s]), nm[s], step);
            const std::vector<float> ga = back(oa, k.hv * k.dv), gb = back(ob, k.hv * k.dv);
            check(ga == gb, "o", step);
            check(back(ringa, (size_t)k.K * C) == back(ringb, (size_t)k.K * C), "ring", step);
            check(back(Sa, (size_t)k.hv * k.dv * k.dk) == back(Sb, (size_t)k.hv * k.dv * k.dk), "state", step);
            check(!count_nonfinite(ga.data(), ga.size()), "o finite", step);
            const std::vector<unsigned> hb = back(hbar, 2 * k.hk);
            bool bars = true;
            for (int h = 0; h < k.hk; h++) bars = bars && hb[2 * h] == 0 && hb[2 * h + 1] == (unsigned)step + 1;
            check(bars, "head barriers", step);
            eo = std::max(eo, rel_l2(ga.data(), gb.data(), ga.size()));
        }
        report(same, "gdn front hk=%d hv=%d dk=%d dv=%d K=%d H=%d group %d, b/a %d-bit (split %d): in_proj rows, o, ring, "
               "state and head barriers over %d steps: %s%s (o rel_l2 %.1e)",
               k.hk, k.hv, k.dk, k.dv, k.K, k.H, k.grp, k.babits, nsplit, steps,
               !took ? "NOT TAKEN" : same ? "bitwise equal to in_proj + gdn_step" : "DIFFER", why, eo);
    }
    lily_cuda_gemv2 = gemv2_0;
}
