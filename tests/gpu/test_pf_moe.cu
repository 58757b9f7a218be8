// test_pf_moe.cu: the prefill MoE block (routing, grouped GEMMs, gather and scatter) against a CPU reference, on
// the register-operand and tokens-as-N kernels too, and its timing at full size.
#include "prefill_tests.cuh"

// ---------------------------------------------------------------------------------------------
// CPU routing (spec §2.5 with the decode router's arithmetic): ids and bf16 weights per token.
static void ref_route(const float *lg, int E, int K, int norm, int *ids, float *wts) {
    float mx = -INFINITY;
    for (int e = 0; e < E; e++) mx = fmaxf(mx, lg[e]);
    std::vector<double> p(E);
    double sum = 0;
    for (int e = 0; e < E; e++) sum += (p[e] = exp((double)lg[e] - mx));
    std::vector<char> used(E, 0);
    double tot = 0;
    std::vector<double> pk(K);
    for (int t = 0; t < K; t++) {
        int bi = -1;
        for (int e = 0; e < E; e++)
            if (!used[e] && (bi < 0 || p[e] > p[bi])) bi = e;
        used[bi] = 1, ids[t] = bi, pk[t] = p[bi] / sum, tot += pk[t];
    }
    for (int t = 0; t < K; t++) wts[t] = bfr((float)(norm ? pk[t] / tot : pk[t]));
}

// rw: a case for qgemm_rw.cu only (1: run when lily_qg_rw is set; 2: when it has bit 32, the folded map), so
// the other two dozen passes over these cases skip their slow CPU references.
struct moe_case { int T, H, I, E, K, Is, skew, tile, rw = 0; };

static int g_moe_first = 0; // test_moe_pf's first case (test_moe_rw's small runs: its own cases)
void test_moe_pf(rng &r) {
    moe_case cases[] = {{37, 256, 128, 16, 4, 128, 1, 0}, {1, 256, 64, 16, 4, 0, 0, 16},
                        {300, 512, 192, 64, 8, 256, 1, 32}, {64, 2048, 512, 64, 8, 512, 0, 64},
                        {257, 320, 128, 32, 8, 192, 1, 128},
                        // ~150 rows an expert on 128-row tiles: most groups end in a tail (moe_pf_tails)
                        {600, 256, 128, 16, 4, 0, 0, 128},
                        // qgemm_rw.cu's grouped shapes (K a multiple of 256 in both GEMMs): groups of ~150 rows,
                        // and of ~200 with a shared expert (a full 128-row tile and a tail each)
                        {600, 256, 256, 16, 4, 0, 0, 128}, {400, 512, 256, 8, 4, 256, 1, 128},
                        // K = 1024 for the gate|up: 16 stages, so qgemm_rw.cu's rings (8 load slots, 2 scale
                        // slots) wrap, as at the model's K = 2048
                        {300, 1024, 256, 16, 4, 0, 0, 128, 1},
                        // groups of ~137 rows: a last 1..16 rows folded into the last full tile (lily_qg_rw 32)
                        {1100, 256, 256, 32, 4, 0, 0, 128, 2},
                        // the same at K = 1024 (folded tiles through the rings' wrap, as at the model's 2048)
                        {1100, 1024, 256, 32, 4, 0, 0, 128, 2}};
    int idx = 0;
    for (auto &k : cases) {
        if (&k - cases < g_moe_first) continue;
        if ((k.rw == 1 && !lily_qg_rw) || (k.rw == 2 && !(lily_qg_rw & 32))) continue;
        if (g_small && idx++ >= 2) break;
        std::vector<host_mat> g(k.E), u(k.E), dn(k.E);
        for (int e = 0; e < k.E; e++) {
            make_qmat(g[e], k.I, k.H, 4, 64, 1.0f / sqrtf((float)k.H), r);
            make_qmat(u[e], k.I, k.H, 4, 64, 1.0f / sqrtf((float)k.H), r);
            make_qmat(dn[e], k.H, k.I, 4, 64, 1.0f / sqrtf((float)k.I), r);
        }
        host_mat rt, sg, su, sd, ss;
        make_qmat(rt, k.E, k.H, 8, 64, 2.0f / sqrtf((float)k.H), r);
        moe_pf_w w = {};
        w.router = up_mat(rt.m), w.gate = up_stack(g), w.up = up_stack(u), w.down = up_stack(dn);
        if (k.Is) {
            make_qmat(sg, k.Is, k.H, 4, 64, 1.0f / sqrtf((float)k.H), r);
            make_qmat(su, k.Is, k.H, 4, 64, 1.0f / sqrtf((float)k.H), r);
            make_qmat(sd, k.H, k.Is, 4, 64, 1.0f / sqrtf((float)k.Is), r);
            make_qmat(ss, 1, k.H, 8, 64, 1.0f / sqrtf((float)k.H), r);
            w.sh_gate = up_mat(sg.m), w.sh_up = up_mat(su.m), w.sh_down = up_mat(sd.m), w.sh_score = up_mat(ss.m);
        }
        w.E = k.E, w.topk = k.K, w.I = k.I, w.H = k.H, w.Is = k.Is, w.norm_topk = 1;
        const int T = k.T, tile = k.tile ? k.tile : moe_pf_tile(w, T);
        std::vector<uint16_t> xb = rand_bf16((size_t)T * k.H, r);
        std::vector<float> x = to_f32(xb), res((size_t)T * k.H);
        for (float &v : res) v = bfr(r.normal());
        void *base;
        CK(cudaMalloc(&base, moe_pf_scratch_bytes(w, T + 5)));
        CK(cudaMemset(base, 0xff, moe_pf_scratch_bytes(w, T + 5)));
        g_allocs.push_back(base);
        moe_pf_scratch s;
        moe_pf_scratch_init(&s, base, w, T + 5);
        uint16_t *dx = dup(xb);
        float *dres = dup(res), *out = poisoned<float>((size_t)T * k.H);
        int rc;
        if (k.skew) {
            // Logits given: expert 1 wins for every token, experts >= E/2 never chosen.
            std::vector<float> lg((size_t)T * k.E);
            for (int t = 0; t < T; t++)
                for (int e = 0; e < k.E; e++)
                    lg[(size_t)t * k.E + e] = bfr(e == 1 ? 9.0f : e >= k.E / 2 ? -40.0f : 2.0f * r.normal());
            CK(cudaMemcpy(s.logits, lg.data(), lg.size() * 4, cudaMemcpyHostToDevice));
            moe_pf_route(w, T, tile, &s, 0);
            rc = moe_pf_experts(w, dx, T, dres, out, &s, tile, 0);
        } else {
            rc = moe_pf_forward(w, dx, T, dres, out, &s, tile, 0);
        }
        CK(cudaGetLastError());
        std::vector<float> lg = back(s.logits, (size_t)T * k.E), gw = back(s.wts, (size_t)T * k.K);
        std::vector<int> gid = back(s.ids, (size_t)T * k.K), go = back(s.grp_off, k.E + 1),
                         gt = back(s.tile_off, k.E + 1), gtb = back(s.tile_off_b, k.E + 1),
                         gtm = back(s.tile_off_m, k.E + 1),
                         gmid = back(s.grp_mid, k.E), stok = back(s.sorted_tok, (size_t)T * k.K),
                         spair = back(s.sorted_pair, (size_t)T * k.K);
        // Router logits (full path only) vs CPU.
        double elg = 0;
        if (!k.skew) {
            std::vector<float> lr((size_t)T * k.E);
            par_for(T, [&](int t) {
                std::vector<float> l = mv(rt.m, &x[(size_t)t * k.H]);
                for (int e = 0; e < k.E; e++) lr[(size_t)t * k.E + e] = bfr(l[e]);
            });
            elg = rel_l2(lg.data(), lr.data(), lg.size());
        }
        // Routing on the GPU's logits.
        bool ids_ok = true;
        double ew = 0;
        std::vector<int> cnt(k.E, 0);
        for (int t = 0; t < T; t++) {
            int ids[16];
            float wt[16];
            ref_route(&lg[(size_t)t * k.E], k.E, k.K, 1, ids, wt);
            for (int j = 0; j < k.K; j++) {
                ids_ok = ids_ok && ids[j] == gid[(size_t)t * k.K + j];
                // float (GPU) vs double (here) may land on either side of a bf16 rounding edge:
                // allow one bf16 step, which is 2^-8..2^-7 of the value (2^-7 just above a power of
                // two: seen at 4.3e-3), count anything larger.
                ew = fmax(ew, fabs(wt[j] - gw[(size_t)t * k.K + j]) / fmax(fabs(wt[j]), 1e-30));
                cnt[ids[j]]++;
            }
        }
        // The block map: with tails, each group's 128-row tiles stop where its tail of 1..64 rows
        // starts (grp_mid), and the tail has one tile in the second launch's map.
        const bool split = moe_pf_tails_on(lily_moe_tails, tile);
        bool map_ok = go[0] == 0 && gt[0] == 0 && (!split || gtb[0] == 0) && gtm[0] == 0;
        int empty = 0, biggest = 0;
        for (int e = 0; e < k.E; e++) {
            const int tail = split ? moe_pf_tail_rows(cnt[e]) : 0; // the rule; the outputs check the math
            map_ok = map_ok && go[e + 1] - go[e] == cnt[e] && gt[e + 1] - gt[e] == (cnt[e] - tail + tile - 1) / tile;
            if (split) map_ok = map_ok && gtb[e + 1] - gtb[e] == (tail > 0) && gmid[e] == go[e + 1] - tail;
            // The merged map: 128-row tiles, the last one 1..192 rows (65..192 after a 128-row one).
            const int nm = gtm[e + 1] - gtm[e], last = cnt[e] - 128 * (nm - 1);
            map_ok = map_ok && (cnt[e] == 0 ? nm == 0 : nm >= 1 && last >= (nm > 1 ? 65 : 1) && last <= 192);
            empty += cnt[e] == 0, biggest = std::max(biggest, cnt[e]);
            for (int p = go[e]; p < go[e + 1] && map_ok; p++)
                map_ok = spair[p] >= 0 && spair[p] < T * k.K && gid[spair[p]] == e && stok[p] == spair[p] / k.K;
        }
        std::vector<int> perm(spair);
        std::sort(perm.begin(), perm.end());
        for (int i = 0; i < T * k.K && map_ok; i++) map_ok = perm[i] == i;
        // Expert math on the GPU's routing, exact weights.
        std::vector<float> ref((size_t)T * k.H);
        par_for(T, [&](int t) {
            const float *xt = &x[(size_t)t * k.H];
            std::vector<double> acc(k.H, 0.0);
            for (int j = 0; j < k.K; j++) {
                int e = gid[(size_t)t * k.K + j];
                float wt = gw[(size_t)t * k.K + j];
                std::vector<float> gg = mv(g[e].m, xt), uu = mv(u[e].m, xt), hh(k.I);
                for (int i = 0; i < k.I; i++) hh[i] = bfr(bfr(silu_h(bfr(gg[i]))) * bfr(uu[i]));
                std::vector<float> d = mv(dn[e].m, hh.data());
                for (int i = 0; i < k.H; i++) acc[i] += bfr(wt * bfr(d[i]));
            }
            if (k.Is) {
                std::vector<float> a1 = mv(sg.m, xt), a2 = mv(su.m, xt), hh(k.Is);
                for (int i = 0; i < k.Is; i++) hh[i] = bfr(bfr(silu_h(bfr(a1[i]))) * bfr(a2[i]));
                std::vector<float> d = mv(sd.m, hh.data());
                float sc = bfr(mv(ss.m, xt)[0]), coef = bfr(1.0f / (1.0f + expf(-sc)));
                for (int i = 0; i < k.H; i++) acc[i] += (double)coef * d[i];
            }
            for (int i = 0; i < k.H; i++) ref[(size_t)t * k.H + i] = bfr(res[(size_t)t * k.H + i] + bfr((float)acc[i]));
        });
        std::vector<float> gout = back(out, (size_t)T * k.H);
        // The shared expert on a side stream (the engine's LILY_CUDA_OPT_PF_SIDE), from non-blocking
        // streams as the engine's: the same bits. What the block writes is poisoned first (the shared
        // expert's buffers, h and the expert outputs), so a combine that did not wait for the side
        // stream reads NaN.
        const char *side_res = "-";
        bool side_ok = true;
        if (k.Is) {
            cudaStream_t ms, ss;
            cudaEvent_t ev[2];
            CK(cudaStreamCreateWithFlags(&ms, cudaStreamNonBlocking));
            CK(cudaStreamCreateWithFlags(&ss, cudaStreamNonBlocking));
            for (cudaEvent_t &e : ev) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
            CK(cudaMemset(s.sh_h, 0xff, (size_t)T * k.Is * 2));
            CK(cudaMemset(s.sh_y, 0xff, (size_t)T * k.H * 4));
            CK(cudaMemset(s.sh_s, 0xff, (size_t)T * 4));
            CK(cudaMemset(s.h, 0xff, (size_t)T * k.K * k.I * 2));
            CK(cudaMemset(s.yk, 0xff, (size_t)T * k.K * k.H * 2));
            float *out2 = poisoned<float>((size_t)T * k.H);
            CK(cudaDeviceSynchronize());
            s.side = ss, s.ev[0] = ev[0], s.ev[1] = ev[1];
            lily_qg_raster = 1; // and the wgmma GEMMs' blocks in rastered order: also the same bits
            const unsigned long runs0 = lily_moe_pf_shared_runs;
            int rc2;
            if (k.skew) { // the logits given above are still in s.logits; the shared expert in line
                moe_pf_route(w, T, tile, &s, ms);
                rc2 = moe_pf_experts(w, dx, T, dres, out2, &s, tile, ms);
            } else {
                rc2 = moe_pf_forward(w, dx, T, dres, out2, &s, tile, ms);
            }
            CK(cudaDeviceSynchronize());
            s.side = NULL;
            lily_qg_raster = 0;
            std::vector<float> o2 = back(out2, (size_t)T * k.H);
            const unsigned long runs = lily_moe_pf_shared_runs - runs0; // once, on the side stream
            side_ok = !rc2 && !memcmp(o2.data(), gout.data(), o2.size() * 4) && runs == 1;
            side_res = runs != 1 ? "the shared expert ran more than once" : side_ok ? "equal" : "DIFFER";
            for (cudaEvent_t e : ev) CK(cudaEventDestroy(e));
            CK(cudaStreamDestroy(ms));
            CK(cudaStreamDestroy(ss));
        }
        // The next layer's input norm fused into the combine (moe_pf_scratch.next_norm), writing over
        // the block's own input as the engine does, with the shared expert on a side stream: out and
        // the normed rows bitwise equal to the combine's out and pf_rmsnorm_rows of it.
        bool nn_ok = true;
        {
            cudaStream_t ms, ss2;
            cudaEvent_t ev[2];
            CK(cudaStreamCreateWithFlags(&ms, cudaStreamNonBlocking));
            CK(cudaStreamCreateWithFlags(&ss2, cudaStreamNonBlocking));
            for (cudaEvent_t &e : ev) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
            std::vector<float> gain(k.H);
            for (float &v : gain) v = 1.0f + 0.5f * r.normal();
            float *dgain = dup(gain), *out3 = poisoned<float>((size_t)T * k.H);
            uint16_t *xn_ref = poisoned<uint16_t>((size_t)T * k.H);
            pf_rmsnorm_rows(T, k.H, out, dgain, 1e-6f, xn_ref, 0);
            CK(cudaDeviceSynchronize());
            if (k.Is) s.side = ss2, s.ev[0] = ev[0], s.ev[1] = ev[1];
            s.next_norm = dgain, s.next_xn = dx, s.next_eps = 1e-6f;
            int rc3;
            if (k.skew) {
                moe_pf_route(w, T, tile, &s, ms);
                rc3 = moe_pf_experts(w, dx, T, dres, out3, &s, tile, ms);
            } else {
                rc3 = moe_pf_forward(w, dx, T, dres, out3, &s, tile, ms);
            }
            CK(cudaDeviceSynchronize());
            s.side = NULL, s.next_norm = NULL, s.next_xn = NULL;
            std::vector<float> o3 = back(out3, (size_t)T * k.H);
            std::vector<uint16_t> xa = back(dx, (size_t)T * k.H), xb2 = back(xn_ref, (size_t)T * k.H);
            nn_ok = !rc3 && !memcmp(o3.data(), gout.data(), o3.size() * 4) && !memcmp(xa.data(), xb2.data(), xa.size() * 2);
            for (cudaEvent_t e : ev) CK(cudaEventDestroy(e));
            CK(cudaStreamDestroy(ms));
            CK(cudaStreamDestroy(ss2));
        }
        // Compare the block's contribution (out - res), not out itself, so the residual cannot hide errors.
        std::vector<float> dg(gout.size()), dr(gout.size());
        for (size_t i = 0; i < gout.size(); i++) dg[i] = gout[i] - res[i], dr[i] = ref[i] - res[i];
        double eo = rel_l2(dg.data(), dr.data(), dg.size());
        // out = bf16(res + moe): its own final rounding may cost up to half a bf16 step of |out|
        // (2^-9 relative), which the difference out - res inherits however small the block's
        // contribution is. Allow that on top of 1e-2 of the contribution (a T=1 case with a small
        // contribution failed a plain 1e-2 relative check at 1.2e-2).
        double num = 0, den = 0, rnd = 0;
        for (size_t i = 0; i < dg.size(); i++) {
            double d = (double)dg[i] - dr[i];
            num += d * d, den += (double)dr[i] * dr[i], rnd += (double)gout[i] * gout[i];
        }
        bool out_ok = sqrt(num) <= 1e-2 * sqrt(den) + sqrt(rnd) / 512.0;
        bool ok = !rc && ids_ok && ew <= 1.0 / 128 && map_ok && !count_nonfinite(gout.data(), gout.size()) && out_ok &&
                  elg < 1e-2 && side_ok && nn_ok;
        report(ok, "moe prefill T=%d H=%d I=%d E=%d top%d Is=%d %s tile=%d: groups empty %d, largest %d rows, %d tails on 64-row tiles; ids %s, wts max rel err %.1e (tol 2^-7), map %s, logits rel_l2 %.1e, out-res rel_l2 %.2e (tol 1e-2 + half a bf16 step of |out|), shared expert on a side stream, GEMM blocks rastered: %s; next input norm fused over the input: %s",
               T, k.H, k.I, k.E, k.K, k.Is, k.skew ? "skewed" : "router", tile, empty, biggest, split ? gtb[k.E] : 0,
               ids_ok ? "equal" : "DIFFER", ew, map_ok ? "ok" : "BAD", elg, eo, side_res, nn_ok ? "equal" : "DIFFER");
        free_all();
    }
}


// The MoE cases with the down projection on the tokens-as-N kernel (qgemm_gt.cu; LILY_GPU_PF=moegt: these only).
// The MoE's grouped GEMMs with the weights as the register operand (qgemm_rw.cu, the plain map of 128-row
// tiles, a tile's tokens padded to 16 as the MMA's width): the gate|up (lily_qg_rw 2), then the down
// projection too (6), each also on the folded map (34, 38: a group's last 1..16 rows in its last full tile,
// up to 144 tokens a block); the cases whose K fit it must have launched it.
void test_moe_rw(rng &r) {
    g_moe_first = g_small ? 7 : 0; // the sanitizers' small runs: two of the cases made for it
    for (int v : {2, 34, 6, 38}) {
        lily_qg_rw = v;
        printf("(the same MoE cases with the %s on the register-operand kernel (qgemm_rw.cu)%s)\n",
               v & 4 ? "gate|up and the down projection" : "gate|up", v & 32 ? ", the folded map" : "");
        const long before = lily_qg_rw_launches;
        test_moe_pf(r);
        report(lily_qg_rw_launches > before, "moe prefill with lily_qg_rw %d: %ld launches of qgemm_rw.cu", v,
               lily_qg_rw_launches - before);
    }
    lily_qg_rw = 0, g_moe_first = 0;
}

void test_moe_gt(rng &r) {
    // The down projection with the tokens as N (qgemm_gt.cu): pieces as wide as shared memory allows in
    // 2 column parts; pieces of at most 16 rows in 1 part; of at most 48 rows (uneven pieces, several
    // chunk shapes) in 3 parts (a part's last tile cut by the next part's first column); the narrow form
    // (pieces of at most 64 rows, two blocks an SM) in 2 parts, and at most 48 rows in 3 parts; and the
    // engine's rule (lily_qg_gt 1: the wide form, the narrow one or none by the groups' average rows).
    // Those keep a stage of MMAs in flight (the default); then the wide form and the narrow one (at most 48
    // rows, 3 parts) retiring each stage before the next (LILY_QG_GT_ASYNC=0).
    static const char *what[8] = {"pieces as wide as shared memory allows", "pieces of at most 16 rows", "pieces of at most 48 rows",
                                  "the narrow form (at most 64 rows, two blocks an SM)", "the narrow form, pieces of at most 48 rows",
                                  "the engine's rule (wide, narrow or none by the groups' average rows)",
                                  "each stage retired before the next, pieces as wide as shared memory allows",
                                  "each stage retired before the next, the narrow form, pieces of at most 48 rows"};
    for (int v = 0; v < 8; v++) {
        lily_qg_gt = v == 5 ? 1 : 2, lily_qg_gt_nmax = v == 1 ? 16 : v == 2 || v == 4 || v == 7 ? 48 : 0;
        lily_qg_gt_parts = v == 1 ? 1 : v == 2 || v == 4 || v == 7 ? 3 : 2, lily_qg_gt_narrow = v == 3 || v == 4 || v == 7;
        lily_qg_gt_async = v >= 6 ? 2 : 1;
        printf("(the same MoE cases with the down projection on the tokens-as-N kernel (qgemm_gt.cu): %s, %d column parts)\n",
               what[v], lily_qg_gt_parts);
        test_moe_pf(r);
    }
    lily_qg_gt = 0, lily_qg_gt_nmax = 0, lily_qg_gt_parts = 0, lily_qg_gt_narrow = 0, lily_qg_gt_async = 0;
}


// The MoE block at full size (quick: the auto tile only) against the GEMM ceiling peak (TFLOP/s). peak
// 0 (LILY_GPU_PF=moe): only the engine's tile at 4096 tokens, two calls before the timed ones (for a
// profiler: the second call is the one to look at).
void bench_moe(rng &r, bool quick, double peak) {
    const bool only4k = peak <= 0;
    const int H = 2048, I = 512, E = 256, K = 8, Is = 512;
    std::vector<host_mat> g(E), u(E), dn(E);
    for (int e = 0; e < E; e++) {
        make_qmat(g[e], I, H, 4, 64, 1.0f / sqrtf((float)H), r);
        make_qmat(u[e], I, H, 4, 64, 1.0f / sqrtf((float)H), r);
        make_qmat(dn[e], H, I, 4, 64, 1.0f / sqrtf((float)I), r);
    }
    host_mat rt, sg, su, sd, ss;
    make_qmat(rt, E, H, 8, 64, 2.0f / sqrtf((float)H), r);
    make_qmat(sg, Is, H, 4, 64, 1.0f / sqrtf((float)H), r);
    make_qmat(su, Is, H, 4, 64, 1.0f / sqrtf((float)H), r);
    make_qmat(sd, H, Is, 4, 64, 1.0f / sqrtf((float)Is), r);
    make_qmat(ss, 1, H, 8, 64, 1.0f / sqrtf((float)H), r);
    moe_pf_w w = {};
    w.router = up_mat(rt.m), w.gate = up_stack(g), w.up = up_stack(u), w.down = up_stack(dn);
    w.sh_gate = up_mat(sg.m), w.sh_up = up_mat(su.m), w.sh_down = up_mat(sd.m), w.sh_score = up_mat(ss.m);
    w.E = E, w.topk = K, w.I = I, w.H = H, w.Is = Is, w.norm_topk = 1;
    const int Tmax = 4096;
    void *base;
    CK(cudaMalloc(&base, moe_pf_scratch_bytes(w, Tmax)));
    moe_pf_scratch s;
    moe_pf_scratch_init(&s, base, w, Tmax);
    std::vector<uint16_t> xb = rand_bf16((size_t)Tmax * H, r);
    uint16_t *dx = dup(xb);
    float *res = poisoned<float>((size_t)Tmax * H);
    CK(cudaMemset(res, 0, (size_t)Tmax * H * 4));
    float *out = poisoned<float>((size_t)Tmax * H);
    printf("\n| MoE block (router+routing+experts+shared+combine) | T | tile | ms | tok/s | TFLOP/s | %% of GEMM ceiling |\n|---|---|---|---|---|---|---|\n");
    if (only4k) {
        for (int i = 0; i < 2; i++) moe_pf_forward(w, dx, Tmax, res, out, &s, 0, 0);
        CK(cudaDeviceSynchronize());
        double ms = gpu_time_ms([&] { moe_pf_forward(w, dx, Tmax, res, out, &s, 0, 0); }, 5);
        printf("| MoE | %d | %d (auto) | %.3f | %.0f | | |\n", Tmax, moe_pf_tile(w, Tmax), ms, Tmax / (ms * 1e-3));
    } else for (int T : {256, 1024, 4096}) {
        double flop = 2.0 * T * ((double)K * 3 * I * H + 3.0 * Is * H + (double)E * H);
        // negative: 64/128 on the mma.sync kernel; +1000: on the warp-specialised wgmma kernel
        int tiles[] = {0, 16, 32, 64, 128, -64, -128, 1064, 1128};
        const int ws_was = qgemm_ws_on();
        for (int tv : tiles) {
            const int tm = abs(tv) % 1000;
            if (quick && tv != 0) continue;
            lily_qg_wgmma = tv >= 0;
            lily_qg_ws = tv >= 1000;
            int used = tm ? tm : moe_pf_tile(w, T);
            double ms = gpu_time_ms([&] { moe_pf_forward(w, dx, T, res, out, &s, tm, 0); }, 5);
            double tf = flop / (ms * 1e-3) / 1e12;
            printf("| MoE | %d | %d%s%s | %.3f | %.0f | %.1f | %.1f %% |\n", T, used, tm ? "" : " (auto)",
                   tv < 0 ? " mma.sync" : tv >= 1000 ? " wgmma-ws" : "", ms, T / (ms * 1e-3), tf, 100 * tf / peak);
        }
        lily_qg_wgmma = 1;
        lily_qg_ws = ws_was;
    }
    CK(cudaGetLastError());
    std::vector<float> o = back(out, (size_t)Tmax * H);
    report(!count_nonfinite(o.data(), o.size()), "MoE block at full size, T=%d: finite outputs", Tmax);
    cudaFree(base);
    free_all();
}
