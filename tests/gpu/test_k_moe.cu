// test_k_moe.cu: kernel tests of the MoE kernels (moe.cu, moe_fused.cu, its front phases), against CPU references on fresh random
// inputs of odd sizes (run_kernel_tests in test_kernels.cu calls them).
#include "kernel_tests.cuh"

void test_moe(rng &r) {
    // The last three take moe_fused too (rows of whole 128-column steps): odd slices per block (384
    // rows of gate/up over 8 blocks), group 32, no shared expert.
    struct cs { int H, I, E, K, Is, norm, grp; } cases[] = {{320, 192, 10, 3, 128, 1, 64}, {2048, 512, 256, 8, 512, 1, 64},
                                                            {256, 64, 7, 2, 0, 0, 64}, {640, 384, 19, 5, 256, 1, 64},
                                                            {512, 256, 33, 4, 128, 1, 32}, {256, 128, 7, 2, 0, 0, 64},
                                                            {256, 64, 300, 4, 0, 1, 64}}; // 300: the 16-slot top-k
    for (auto &k : cases) {
        std::vector<host_mat> g, u, dn;
        moe_w w = make_experts(g, u, dn, k.E, k.K, k.I, k.H, k.norm, k.grp, r);
        host_mat sg, su, sd;
        dq_mat dsd = {};
        // A small residual, so that the outputs (rounded to bf16 after adding it) show the MoE sum's errors.
        std::vector<float> x = randv(k.H, r), lg = randv(k.E, r, 2.0f), res = randv(k.H, r, 0.02f);
        // An exact tie at the top: both taken, the lower id first (the reference's order).
        float lmax = *std::max_element(lg.begin(), lg.end()) + 1.0f;
        lg[2] = lg[k.E - 2] = lmax;
        std::vector<float> sgv = randv(k.Is ? k.Is : 1, r), suv = randv(k.Is ? k.Is : 1, r), ssv = randv(1, r);
        if (k.Is) {
            make_qmat(sd, k.H, k.Is, 4, k.grp, 1.0f / sqrtf((float)k.Is), r);
            dsd = up_mat(sd.m);
        }
        float *h = poisoned<float>(k.K * k.I), *wts = poisoned<float>(k.K), *out = poisoned<float>(k.H);
        int *ids = poisoned<int>(k.K);
        float *dres = dup(res);
        // The latency variant (LILY_CUDA_MOE_LAT) first, then the default: the same bits expected.
        const int lat_default = lily_cuda_moe_lat;
        lily_cuda_moe_lat = 1;
        const float *dlg = dup(lg), *dx = dup(x);
        moe_gate_up(w, dlg, dx, h, ids, wts, 0);
        std::vector<float> h_lat = back(h, k.K * k.I), w_lat = back(wts, k.K);
        std::vector<int> i_lat = back(ids, k.K);
        lily_cuda_moe_lat = 0;
        CK(cudaMemset(h, 0xff, k.K * k.I * sizeof(float)));
        moe_gate_up(w, dlg, dx, h, ids, wts, 0);
        const bool gu_same = i_lat == back(ids, k.K) && !memcmp(h_lat.data(), back(h, k.K * k.I).data(), h_lat.size() * 4) &&
                             !memcmp(w_lat.data(), back(wts, k.K).data(), w_lat.size() * 4);
        // moe_down with each split of a row's chunks over warps (LILY_CUDA_MOE_KS): 1, 2, 4, each
        // also as the latency variant (compared bitwise).
        const int ks_default = lily_cuda_moe_ks;
        const float *dsg = dup(sgv), *dsu = dup(suv), *dss = dup(ssv);
        std::vector<float> go_ks[3];
        bool dn_same[3];
        for (int i = 0; i < 3; i++) {
            lily_cuda_moe_ks = 1 << i;
            std::vector<float> o_lat;
            // Default: into a poisoned output. Latency variant: in place, as the step runs it (its
            // residual is read early, before any block writes).
            lily_cuda_moe_lat = 0;
            CK(cudaMemset(out, 0xff, k.H * sizeof(float)));
            moe_down(w, h, ids, wts, dsd, dsg, dsu, dss, dres, out, 0);
            CK(cudaGetLastError());
            go_ks[i] = back(out, k.H);
            lily_cuda_moe_lat = 1;
            float *inplace = dup(res);
            moe_down(w, h, ids, wts, dsd, dsg, dsu, dss, inplace, inplace, 0);
            CK(cudaGetLastError());
            o_lat = back(inplace, k.H);
            CK(cudaFree(inplace));
            dn_same[i] = !memcmp(o_lat.data(), go_ks[i].data(), o_lat.size() * 4);
        }
        lily_cuda_moe_ks = ks_default, lily_cuda_moe_lat = lat_default;
        // moe_fused, where it takes the shapes: into a poisoned output, then three times in place (the
        // later launches find the grid barrier's counters the first left; the last loads the down slice
        // the other way, LILY_CUDA_MOE_FUSED_TMA), all bitwise equal.
        const bool fused = moe_fused_takes(w, dsd, NULL, 0);
        std::vector<float> fo, fa; // fa: with the fixed-point sum, folded into res on the host
        std::vector<int> fid;
        bool f_same = true, a_same = true, dsl_built = false;
        if (fused) {
            float *part = poisoned<float>(moe_fused_part_floats(w));
            unsigned *bar = nullptr;
            CK(cudaMalloc(&bar, 2 * sizeof(unsigned)));
            CK(cudaMemset(bar, 0, 2 * sizeof(unsigned)));
            CK(cudaMemset(out, 0xff, k.H * sizeof(float)));
            CK(cudaMemset(ids, 0xff, k.K * sizeof(int)));
            moe_fused(w, NULL, 0, dlg, dx, ids, wts, dsd, dsg, dsu, dss, dres, out, part, bar, 0);
            CK(cudaGetLastError());
            fo = back(out, k.H), fid = back(ids, k.K);
            const bool w_same = !memcmp(w_lat.data(), back(wts, k.K).data(), w_lat.size() * 4);
            const int tma_default = lily_cuda_moe_fused_tma;
            // The fourth (and the fixed-point sum's third) from the slice-major copy of down (moe_dsl_build).
            moe_w wd = w;
            void *dsl_mem = nullptr;
            dsl_built = moe_dsl_build(&wd, &dsl_mem, 0, 0);
            for (int rep = 0; rep < 4; rep++) { // the third with the down slice loaded the other way
                lily_cuda_moe_fused_tma = rep == 2 ? !tma_default : tma_default;
                float *inplace = dup(res);
                moe_fused(rep == 3 ? wd : w, NULL, 0, dlg, dx, ids, wts, dsd, dsg, dsu, dss, inplace, inplace, part, bar, 0);
                CK(cudaGetLastError());
                f_same = f_same && !memcmp(back(inplace, k.H).data(), fo.data(), fo.size() * 4);
                CK(cudaFree(inplace));
            }
            lily_cuda_moe_fused_tma = tma_default;
            const std::vector<unsigned> bc = back(bar, 2);
            f_same = f_same && w_same && bc[0] == 0 && bc[1] == 5;
            // With the fixed-point sum (LILY_CUDA_MOE_ACC): twice (the second loading the down slice the
            // other way) into a zeroed acc, the same bits each time; out (poisoned) not written.
            unsigned long long *dacc = dup(std::vector<unsigned long long>(k.H + 1, 0ull));
            float *untouched = poisoned<float>(k.H);
            std::vector<unsigned long long> a1;
            for (int rep = 0; rep < 3; rep++) {
                lily_cuda_moe_fused_tma = rep == 1 ? !tma_default : tma_default;
                CK(cudaMemset(dacc, 0, (k.H + 1) * sizeof(unsigned long long)));
                CK(cudaMemset(ids, 0xff, k.K * sizeof(int)));
                moe_fused(rep == 2 ? wd : w, NULL, 0, dlg, dx, ids, wts, dsd, dsg, dsu, dss, dres, untouched, part, bar, 0, dacc);
                CK(cudaGetLastError());
                const std::vector<unsigned long long> got = back(dacc, k.H + 1);
                if (rep == 0) a1 = got;
                a_same = a_same && got == a1 && got[k.H] == 0 && back(ids, k.K) == fid &&
                         !memcmp(w_lat.data(), back(wts, k.K).data(), w_lat.size() * 4);
            }
            lily_cuda_moe_fused_tma = tma_default;
            const std::vector<float> un = back(untouched, k.H);
            for (float v : un) {
                uint32_t u;
                memcpy(&u, &v, 4);
                a_same = a_same && u == 0xffffffffu;
            }
            fa = acc_fold(res, a1);
            CK(cudaFree(dsl_mem));
            CK(cudaFree(dacc));
            CK(cudaFree(untouched));
            CK(cudaFree(part));
            CK(cudaFree(bar));
        }
        // Reference.
        float mx = -INFINITY;
        for (float v : lg) mx = fmaxf(mx, v);
        std::vector<double> p(k.E);
        double sum = 0;
        for (int e = 0; e < k.E; e++) sum += (p[e] = exp(lg[e] - mx));
        std::vector<int> rid;
        std::vector<char> used(k.E, 0);
        double tot = 0;
        for (int t = 0; t < k.K; t++) {
            int bi = -1;
            for (int e = 0; e < k.E; e++) if (!used[e] && (bi < 0 || p[e] > p[bi])) bi = e;
            used[bi] = 1, rid.push_back(bi), tot += p[bi] / sum;
        }
        std::vector<float> hr(k.K * k.I);
        std::vector<double> acc(k.H, 0.0);
        for (int t = 0; t < k.K; t++) {
            int e = rid[t];
            float wt = bfr((float)(k.norm ? p[e] / sum / tot : p[e] / sum));
            std::vector<float> gg = mv(g[e].m, x.data()), uu = mv(u[e].m, x.data()), hh(k.I);
            for (int i = 0; i < k.I; i++) {
                float gv = bfr(gg[i]);
                hh[i] = hr[t * k.I + i] = bfr(bfr(gv / (1 + expf(-gv))) * bfr(uu[i]));
            }
            std::vector<float> d = mv(dn[e].m, hh.data());
            for (int i = 0; i < k.H; i++) acc[i] += (double)wt * d[i];
        }
        if (k.Is) {
            std::vector<float> hh(k.Is);
            for (int i = 0; i < k.Is; i++) hh[i] = bfr(bfr(sgv[i] / (1 + expf(-sgv[i]))) * suv[i]);
            std::vector<float> d = mv(sd.m, hh.data());
            float wt = bfr(1.0f / (1.0f + expf(-ssv[0])));
            for (int i = 0; i < k.H; i++) acc[i] += (double)wt * d[i];
        }
        std::vector<float> outr(k.H);
        for (int i = 0; i < k.H; i++) outr[i] = bfr(res[i] + bfr((float)acc[i]));
        std::vector<int> gid = back(ids, k.K);
        std::vector<float> gh = back(h, k.K * k.I);
        bool ids_ok = gid == rid;
        double eh = rel_l2(gh.data(), hr.data(), gh.size());
        for (int i = 0; i < 3; i++) {
            const std::vector<float> &go = go_ks[i];
            double eo = rel_l2(go.data(), outr.data(), go.size());
            report(ids_ok && eh < 5e-3 && eo < 5e-3 && !count_nonfinite(go.data(), go.size()) && gu_same && dn_same[i],
                   "moe H=%d I=%d E=%d top%d Is=%d down split %d: ids %s, h rel_l2 %.2e, out rel_l2 %.2e; latency "
                   "variant: gate/up %s, down %s",
                   k.H, k.I, k.E, k.K, k.Is, 1 << i, ids_ok ? "equal" : "DIFFER", eh, eo,
                   gu_same ? "bitwise equal" : "DIFFERS", dn_same[i] ? "bitwise equal" : "DIFFERS");
        }
        if (fused) {
            double eo = rel_l2(fo.data(), outr.data(), fo.size());
            report(fid == rid && eo < 5e-3 && !count_nonfinite(fo.data(), fo.size()) && f_same && dsl_built,
                   "moe fused H=%d I=%d E=%d top%d Is=%d group %d: ids %s, out rel_l2 %.2e; in place, again, weights, "
                   "barrier counters, the down slice from the slice-major copy (%s): %s",
                   k.H, k.I, k.E, k.K, k.Is, k.grp, fid == rid ? "equal" : "DIFFER", eo, dsl_built ? "built" : "NOT BUILT",
                   f_same ? "bitwise equal, as left" : "DIFFER");
            const double ea = rel_l2(fa.data(), outr.data(), fa.size()), ef = rel_l2(fa.data(), fo.data(), fa.size());
            report(ea < 5e-3 && ef < 5e-3 && !count_nonfinite(fa.data(), fa.size()) && a_same,
                   "moe fused H=%d I=%d E=%d top%d Is=%d group %d, fixed-point sum (moe_acc): out rel_l2 %.2e, against "
                   "the fp32 sums %.2e; again, ids, weights, out untouched: %s",
                   k.H, k.I, k.E, k.K, k.Is, k.grp, ea, ef, a_same ? "bitwise equal, as expected" : "DIFFER");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// moe_fused with a front (LILY_CUDA_MOE_FRONT): the layer's out_proj (gated-norm prologue, as GDN
// layers have it, or plain, as attention's o_proj) adding into the residual, then the norm + router
// (8-bit) + shared gate/up (4-bit) + shared score (8-bit), run by the MoE's own launch. Against the
// same work as three launches (gemv_launch, gemv_launch, moe_fused without a front, themselves
// checked against the CPU above): every output bitwise equal (the residual stream, the router
// logits, the shared projections, ids, weights), in place, launched twice (the grid barrier's
// counters as left). The front phases' rows are split over warps as a separate gemv2 launch splits
// them (gemv_plan), so nothing but bits can tell the two apart.
void test_moe_front(rng &r) {
    struct cs { int H, I, E, K, Is, grp, C, ghd, nfront; } cases[] = {
        {2048, 512, 256, 8, 512, 64, 4096, 128, 2}, // the real shapes, a GDN layer
        {2048, 512, 256, 8, 512, 64, 4096, 0, 2},   // an attention layer (o_proj: plain prologue)
        {640, 384, 19, 5, 256, 64, 1024, 64, 2},    // odd: 19 experts, 12 slices an expert, 80 blocks
        {512, 256, 33, 4, 128, 32, 768, 64, 2},     // group 32 (HPG 4), out_proj of 6 steps
        {640, 384, 19, 5, 256, 64, 0, 0, 1}};       // the router phase only
    const int gemv2_default = lily_cuda_gemv2;
    lily_cuda_gemv2 = 1; // the front runs gemv2's tiles; the separate launches must too
    for (auto &k : cases) {
        std::vector<host_mat> g, u, dn;
        moe_w w = make_experts(g, u, dn, k.E, k.K, k.I, k.H, 1, k.grp, r);
        host_mat hro, hrt, hsg, hsu, hss, hsd;
        if (k.C) make_qmat(hro, k.H, k.C, 4, k.grp, 0.5f / sqrtf((float)k.C), r);
        make_qmat(hrt, k.E, k.H, 8, k.grp, 2.0f / sqrtf((float)k.H), r);
        dq_mat dsd = {}, dro = {}, drt = up_mat(hrt.m), dsg = {}, dsu = {}, dssm = {};
        if (k.Is) {
            make_qmat(hsg, k.Is, k.H, 4, k.grp, 1.0f / sqrtf((float)k.H), r);
            make_qmat(hsu, k.Is, k.H, 4, k.grp, 1.0f / sqrtf((float)k.H), r);
            make_qmat(hss, 1, k.H, 8, k.grp, 1.0f / sqrtf((float)k.H), r);
            make_qmat(hsd, k.H, k.Is, 4, k.grp, 1.0f / sqrtf((float)k.Is), r);
            dsd = up_mat(hsd.m), dsg = up_mat(hsg.m), dsu = up_mat(hsu.m), dssm = up_mat(hss.m);
        }
        if (k.C) dro = up_mat(hro.m);
        const std::vector<float> x0 = randv(k.H, r), o = randv(k.C ? k.C : 1, r), z = randv(k.C ? k.C : 1, r);
        const std::vector<float> gn = randv(k.ghd ? k.ghd : 1, r, 0.1f, 1.0f), pn = randv(k.H, r, 0.1f, 1.0f);
        const float *d_o = dup(o), *d_z = dup(z), *d_gn = dup(gn), *d_pn = dup(pn);
        float *part = poisoned<float>(moe_fused_part_floats(w));
        unsigned *bar = nullptr;
        CK(cudaMalloc(&bar, 2 * sizeof(unsigned)));
        CK(cudaMemset(bar, 0, 2 * sizeof(unsigned)));
        // One run's buffers and the two launches' arguments over them.
        struct run { float *x, *xn, *rl, *sg, *su, *ss, *wts; int *ids; gv_args go, gr; };
        auto setup = [&](run &u) {
            u.x = dup(x0), u.xn = poisoned<float>(k.H), u.rl = poisoned<float>(k.E), u.wts = poisoned<float>(k.K);
            u.sg = poisoned<float>(k.Is + 1), u.su = poisoned<float>(k.Is + 1), u.ss = poisoned<float>(1);
            u.ids = poisoned<int>(k.K);
            memset(&u.go, 0, sizeof u.go), memset(&u.gr, 0, sizeof u.gr);
            u.go.nseg = 1, u.go.cols = k.C, u.go.x = d_o, u.go.pro = k.ghd ? PRO_GATED : PRO_PLAIN, u.go.eps = 1e-6f;
            u.go.norm_w = d_gn, u.go.gz = d_z, u.go.ghd = k.ghd, u.go.epi = GV_RESID;
            u.go.seg[0].m = dro, u.go.seg[0].y = u.x, u.go.seg[0].res = u.x;
            u.gr.cols = k.H, u.gr.x = u.x, u.gr.pro = PRO_RMSNORM, u.gr.norm_w = d_pn, u.gr.eps = 1e-6f, u.gr.x_out = u.xn;
            u.gr.seg[0].m = drt, u.gr.seg[0].y = u.rl, u.gr.nseg = 1;
            if (k.Is) {
                u.gr.seg[1].m = dsg, u.gr.seg[1].y = u.sg, u.gr.seg[2].m = dsu, u.gr.seg[2].y = u.su;
                u.gr.seg[3].m = dssm, u.gr.seg[3].y = u.ss, u.gr.nseg = 4;
            }
        };
        auto outputs = [&](run &u) {
            std::vector<float> v = back(u.x, k.H), t = back(u.rl, k.E), w8 = back(u.wts, k.K);
            v.insert(v.end(), t.begin(), t.end()), v.insert(v.end(), w8.begin(), w8.end());
            if (k.Is) {
                t = back(u.sg, k.Is), v.insert(v.end(), t.begin(), t.end());
                t = back(u.su, k.Is), v.insert(v.end(), t.begin(), t.end());
                v.push_back(back(u.ss, 1)[0]);
            }
            std::vector<int> id = back(u.ids, k.K);
            for (int i : id) v.push_back((float)i);
            return v;
        };
        run sep, fus[2];
        setup(sep);
        if (k.C) gemv_launch(sep.go, 0, 0);
        gemv_launch(sep.gr, 0, 0);
        moe_fused(w, NULL, 0, sep.rl, sep.xn, sep.ids, sep.wts, dsd, sep.sg, sep.su, sep.ss, sep.x, sep.x, part, bar, 0);
        CK(cudaGetLastError());
        const std::vector<float> want = outputs(sep);
        bool takes = true, same = true;
        for (int rep = 0; rep < 2; rep++) {
            run &u = fus[rep];
            setup(u);
            gv_args front[2] = {u.go, u.gr};
            const gv_args *f = k.C ? front : front + 1;
            takes = takes && moe_fused_takes(w, dsd, f, k.nfront);
            moe_fused(w, f, k.nfront, u.rl, NULL, u.ids, u.wts, dsd, u.sg, u.su, u.ss, u.x, u.x, part, bar, 0);
            CK(cudaGetLastError());
            const std::vector<float> got = outputs(u);
            same = same && got.size() == want.size() && !memcmp(got.data(), want.data(), got.size() * 4);
        }
        const std::vector<unsigned> bc = back(bar, 2);
        const unsigned gens = 1 + 2 * (k.nfront + 1); // one launch without a front, two with
        int nonfinite = count_nonfinite(want.data(), want.size());
        report(takes && same && bc[0] == 0 && bc[1] == gens && !nonfinite,
               "moe fused with a front of %d (H=%d I=%d E=%d top%d Is=%d group %d, out_proj cols %d %s): %s against "
               "separate launches (residual, router logits, shared projections, ids, weights); barrier %u/%u (want 0/%u)",
               k.nfront, k.H, k.I, k.E, k.K, k.Is, k.grp, k.C, k.ghd ? "gated" : "plain",
               !takes ? "NOT TAKEN" : same ? "bitwise equal" : "DIFFERS", bc[0], bc[1], gens);
        CK(cudaFree(part));
        CK(cudaFree(bar));
    }
    lily_cuda_gemv2 = gemv2_default;
}
