// test_k_gemv.cu: kernel tests of the GEMV kernels (gemv.cu: the first kernel, gemv2 with both prologues, bulk-staged tiles, the
// MoE's fixed-point sum folded in) and the device's bf16 rounding, against CPU references on fresh random
// inputs of odd sizes (run_kernel_tests in test_kernels.cu calls them).
#include "kernel_tests.cuh"

// ---------------------------------------------------------------------------------------------
// The device's bf16 rounding (one cvt instruction, quant.h) against the host's (integer form) on
// random bit patterns (every exponent, subnormals, infinities, NaNs) and the halfway cases: bitwise
// equal, NaN for NaN.
__global__ void k_to_bf16(const float *x, uint16_t *y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = lily_f32_to_bf16(x[i]);
}
void test_bf16(rng &r) {
    std::vector<float> x;
    for (int i = 0; i < 1 << 20; i++) {
        uint32_t u = (uint32_t)r.next();
        if (i % 4 == 1) u = (u & 0xffff0000u) | 0x8000u;          // exactly halfway
        if (i % 4 == 2) u = (u & 0x807fffffu) | (((i >> 2) & 1) << 23); // subnormal or the smallest normals
        float f;
        memcpy(&f, &u, 4);
        x.push_back(f);
    }
    for (float f : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 3.4028235e38f, -3.4028235e38f, 1e-45f}) x.push_back(f);
    const int n = (int)x.size();
    float *dx = dup(x);
    uint16_t *dy = poisoned<uint16_t>(n);
    k_to_bf16<<<(n + 255) / 256, 256>>>(dx, dy, n);
    CK(cudaGetLastError());
    std::vector<uint16_t> y = back(dy, n);
    int bad = 0, nan = 0;
    for (int i = 0; i < n; i++) {
        const uint16_t h = lily_f32_to_bf16(x[i]);
        const bool hn = (h & 0x7fffu) > 0x7f80u, dn = (y[i] & 0x7fffu) > 0x7f80u;
        if (x[i] != x[i]) nan++, bad += !(hn && dn);
        else bad += h != y[i];
    }
    report(bad == 0, "bf16 rounding, device (cvt.rn.bf16.f32) against host, %d values (%d NaN): %d differ", n, nan, bad);
    CK(cudaFree(dx));
    CK(cudaFree(dy));
}

// Each case runs through both kernels on the same inputs: the first (lily_cuda_gemv2 = 0) and gemv2
// (its segments of whole 128-column steps and the launch's group on the tensor-core path, the others on
// the first kernel's lane path inside it). Segment 1 of a multi-segment case has the other bit width;
// segment 2 another group, so those launches mix the two paths.
// Cases with GV_T_BENCH set also print (never assert) old vs new time and GB/s of codes + scales. Cases
// with GV_T_WILD set spread x over its blocks of 32 (scales 2^-24 .. 2^16, every fifth block zero, some
// blocks of ~1e-30, one outlier): gemv2 takes x as a fixed point per group (gv2_split_x), and these
// are the groups it must scale apart.
#define GV_T_BENCH 1
#define GV_T_WILD 2
void test_gemv(rng &r) {
    struct cs { int rows, cols, bits, group, pro, epi, nseg, flags; } cases[] = { // flags: GV_T_BENCH, GV_T_WILD
        {1, 64, 4, 64, PRO_PLAIN, GV_LOGITS, 1, 0},     {37, 192, 4, 64, PRO_PLAIN, GV_STORE, 1, 0},
        {1001, 2048, 4, 64, PRO_RMSNORM, GV_STORE, 3, 0}, {255, 2048, 8, 64, PRO_RMSNORM, GV_STORE, 2, 0},
        {300, 4096, 4, 64, PRO_PLAIN, GV_RESID, 1, 0},  {77, 384, 4, 32, PRO_GATED, GV_RESID, 1, 0},
        {513, 512, 4, 128, PRO_PLAIN, GV_STORE, 4, 0},  {33, 96 * 2, 8, 32, PRO_PLAIN, GV_STORE, 2, 0},
        {20011, 2048, 4, 64, PRO_RMSNORM, GV_LOGITS, 1, 0}, {5000, 320, 8, 64, PRO_PLAIN, GV_LOGITS, 1, 0},
        // The model's shapes (hidden 2048; expert-sized 512 x 2048 and 2048 x 512; GDN qkv; lm_head;
        // the 8-bit router), groups 32 / 64 / 128, odd row counts, fp32-output argmax.
        {2048, 512, 4, 64, PRO_PLAIN, GV_RESID, 1, 1},  {512, 2048, 4, 64, PRO_RMSNORM, GV_STORE, 1, 1},
        {8192, 2048, 4, 64, PRO_RMSNORM, GV_STORE, 1, 1}, {256, 2048, 8, 64, PRO_RMSNORM, GV_STORE, 1, 1},
        {248320, 2048, 4, 64, PRO_RMSNORM, GV_LOGITS, 1, 1}, {2048, 4096, 4, 64, PRO_GATED, GV_RESID, 1, 1},
        {8191, 2048, 4, 32, PRO_PLAIN, GV_STORE, 1, 1}, {4097, 2048, 4, 128, PRO_RMSNORM, GV_STORE, 1, 1},
        {511, 2048, 4, 32, PRO_RMSNORM, GV_STORE, 2, 0}, {2047, 512, 4, 128, PRO_PLAIN, GV_RESID, 1, 0},
        {3001, 2048, 4, 64, PRO_PLAIN, GV_LOGITS, 1, 0}, {1999, 1024, 4, 32, PRO_PLAIN, GV_LOGITS, 1, 0},
        // Rows wider than the register prologue takes (the loop path even when it is on).
        {65, 8192, 4, 64, PRO_RMSNORM, GV_STORE, 2, 0}, {40, 8192, 4, 64, PRO_GATED, GV_RESID, 1, 0},
        // x spread wide (gemv2's per-group fixed point).
        {777, 2048, 4, 64, PRO_PLAIN, GV_LOGITS, 1, GV_T_WILD}, {301, 1024, 4, 32, PRO_PLAIN, GV_STORE, 2, GV_T_WILD},
        {129, 512, 4, 128, PRO_RMSNORM, GV_RESID, 1, GV_T_WILD},
    };
    for (auto &k : cases) {
        const int cols = k.cols, ghd = 96 % 32 == 0 && cols % 96 == 0 ? 96 : 64;
        std::vector<host_mat> hm(k.nseg);
        gv_args a;
        memset(&a, 0, sizeof a);
        a.nseg = k.nseg, a.cols = cols, a.pro = k.pro, a.epi = k.epi, a.eps = 1e-6f;
        std::vector<float> x = randv(cols, r, 2.0f), w = randv(cols, r, 0.3f, 1.0f), z = randv(cols, r);
        if (k.flags & GV_T_WILD)
            for (int c = 0; c < cols; c++) {
                const int b = c / 32;
                x[c] = b % 5 == 3 ? 0.0f : b % 7 == 5 ? x[c] * 1e-30f : ldexpf(x[c], (b * 7) % 11 * 4 - 24);
                if (c == 5) x[c] = 1e4f;
            }
        std::vector<float> xr(cols);
        if (k.pro == PRO_PLAIN) xr = x;
        if (k.pro == PRO_RMSNORM) {
            double ss = 0;
            for (float v : x) ss += v * v;
            float rr = 1.0f / sqrtf((float)(ss / cols) + 1e-6f);
            for (int i = 0; i < cols; i++) xr[i] = bfr(x[i] * rr * w[i]);
        }
        if (k.pro == PRO_GATED)
            for (int h = 0; h < cols / ghd; h++) {
                double ss = 0;
                for (int d = 0; d < ghd; d++) ss += x[h * ghd + d] * x[h * ghd + d];
                float rr = 1.0f / sqrtf((float)(ss / ghd) + 1e-6f);
                for (int d = 0; d < ghd; d++) {
                    float t = bfr(w[d] * bfr(x[h * ghd + d] * rr));
                    float zz = z[h * ghd + d];
                    xr[h * ghd + d] = bfr(t * zz / (1.0f + expf(-zz)));
                }
            }
        a.x = dup(x), a.norm_w = dup(w), a.gz = dup(z), a.ghd = ghd;
        float *xo = poisoned<float>(cols);
        a.x_out = xo;
        std::vector<std::vector<float>> refs(k.nseg), res(k.nseg);
        for (int s = 0; s < k.nseg; s++) {
            int rows = k.rows + 13 * s;
            make_qmat(hm[s], rows, cols, s == 1 ? 12 - k.bits : k.bits, s == 2 ? (k.group == 64 ? 32 : 64) : k.group,
                      1.0f / sqrtf((float)cols), r);
            a.seg[s].m = up_mat(hm[s].m);
            a.seg[s].y = poisoned<float>(rows);
            res[s] = randv(rows, r);
            a.seg[s].res = dup(res[s]);
            refs[s] = mv(hm[s].m, xr.data());
            for (int i = 0; i < rows; i++)
                refs[s][i] = k.epi == GV_STORE ? bfr(refs[s][i]) : k.epi == GV_RESID ? bfr(res[s][i] + bfr(refs[s][i])) : refs[s][i];
        }
        float2 *amax = poisoned<float2>(gemv_max_blocks());
        int *tok = poisoned<int>(1), *step = dup(std::vector<int>{0}), *pos = dup(std::vector<int>{5});
        a.amax = amax, a.pos = pos;
        double ms[2] = {0, 0};
        const int pro_default = lily_cuda_gv_pro;
        std::vector<std::vector<float>> y_ref(k.nseg); // gemv2, register prologue: vv = 3 must match it bitwise
        bool pre_same = true;
        // The first kernel; gemv2 with the register and the loop prologue; gemv2 with its first tiles
        // bulk-copied before the wait (LILY_CUDA_GV2_BULK).
        for (int vv = 0; vv < 4; vv++) {
            const int v2 = vv > 0, pro_regs = vv == 1 || vv == 3;
            lily_cuda_gemv2 = v2, lily_cuda_gv_pro = pro_regs, lily_cuda_gv2_bulk = vv == 3;
            for (int s = 0; s < k.nseg; s++) CK(cudaMemset(a.seg[s].y, 0xff, (k.rows + 13 * s) * sizeof(float)));
            CK(cudaMemset(xo, 0xff, cols * sizeof(float)));
            CK(cudaMemcpy(step, std::vector<int>{0}.data(), 4, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(pos, std::vector<int>{5}.data(), 4, cudaMemcpyHostToDevice));
            int nb = gemv_launch(a, 0, 0);
            if (k.epi == GV_LOGITS) sample_finish(amax, nb, tok, NULL, step, pos, 0);
            CK(cudaGetLastError());
            double worst = 0;
            bool ok = true;
            for (int s = 0; s < k.nseg; s++) {
                std::vector<float> y = back(a.seg[s].y, refs[s].size());
                if (vv == 1) y_ref[s] = y;
                if (vv == 3) pre_same = pre_same && y == y_ref[s];
                double e = rel_l2(y.data(), refs[s].data(), y.size());
                if (k.epi == GV_LOGITS && k.pro == PRO_PLAIN) {
                    // fp32 outputs: judge the error against the size of the summed terms, sum_j |w x|,
                    // not against |y|, which cancellation can make arbitrarily small (one row of 64
                    // terms failed a plain relative check on a benign seed).
                    std::vector<float> wrow(cols);
                    double num = 0, den = 0;
                    for (int i = 0; i < (int)y.size(); i++) {
                        lily_mat_row(&hm[s].m, i, wrow.data());
                        double mag = 0;
                        for (int j = 0; j < cols; j++) mag += fabs((double)wrow[j] * xr[j]);
                        double d = (double)y[i] - refs[s][i];
                        num += d * d, den += mag * mag;
                    }
                    e = (num == num) ? sqrt(num / (den > 0 ? den : 1e-30)) : INFINITY;
                }
                worst = e > worst ? e : worst;
                ok = ok && count_nonfinite(y.data(), y.size()) == 0;
                if (k.epi == GV_LOGITS) {
                    int t = back(tok, 1)[0], best = 0;
                    for (int i = 1; i < (int)y.size(); i++) if (y[i] > y[best]) best = i;
                    ok = ok && t == best;
                }
            }
            std::vector<float> xob = back(xo, cols);
            double ex = rel_l2(xob.data(), xr.data(), cols);
            double tol = k.epi == GV_LOGITS ? (k.pro == PRO_PLAIN ? 2e-6 : 2e-3) : 5e-3;
            report(ok && worst < tol && ex < 2e-3 && (vv < 3 || pre_same), "%s (%s prologue%s) rows=%d cols=%d bits=%d group=%d pro=%d epi=%d nseg=%d%s: rel_l2 %.2e (tol %.0e), x_out %.1e",
                   v2 ? "gemv2" : "gemv", pro_regs ? "register" : "loop",
                   vv == 3 ? (pre_same ? ", tiles bulk-staged: bitwise equal" : ", tiles bulk-staged: DIFFERS") : "", k.rows, cols, k.bits, k.group, k.pro, k.epi,
                   k.nseg, (k.flags & GV_T_WILD) ? ", x spread wide" : "", worst, tol, ex);
            if ((k.flags & GV_T_BENCH) && vv < 2) ms[v2] = gpu_time_ms([&] { gemv_launch(a, 0, 0); }, 20, true);
        }
        lily_cuda_gemv2 = 0, lily_cuda_gv_pro = pro_default, lily_cuda_gv2_bulk = 0;
        if (k.flags & GV_T_BENCH) {
            double bytes = 0;
            for (int s = 0; s < k.nseg; s++) {
                const dq_mat &m = a.seg[s].m;
                bytes += (double)m.rows * m.cols * m.bits / 8 + (double)m.rows * (m.cols / m.group) * 4;
            }
            printf("  timing rows=%d cols=%d bits=%d group=%d (%.1f MB, L2 flushed): gemv %.1f us %.0f GB/s, gemv2 %.1f us %.0f GB/s (x%.2f)\n",
                   k.rows, cols, k.bits, k.group, bytes / 1e6, ms[0] * 1e3, bytes / ms[0] / 1e6, ms[1] * 1e3,
                   bytes / ms[1] / 1e6, ms[0] / ms[1]);
        }
    }
}

// gemv with the MoE's sum folded into its input (acc_x, PRO_RMSNORM) or its residual (acc_res, GV_RESID)
// against the same launch on the host-folded input or residual: bitwise equal on every kernel and
// prologue; acc_res's rows zeroed after the launch, its flag kept; with the flag set, NaN outputs.
void test_gemv_acc(rng &r) {
    struct cs { int rows, cols, group, pro, epi, nseg; } cases[] = {
        {1001, 2048, 64, PRO_RMSNORM, GV_STORE, 3}, {2048, 4096, 64, PRO_GATED, GV_RESID, 1},
        {2048, 4096, 64, PRO_PLAIN, GV_RESID, 1},   {77, 384, 32, PRO_RMSNORM, GV_RESID, 1},
        {20011, 2048, 64, PRO_RMSNORM, GV_LOGITS, 1}, {65, 8192, 64, PRO_RMSNORM, GV_STORE, 2},
        {1281, 2048, 64, PRO_RMSNORM, GV_STORE, 4}, {333, 8192, 64, PRO_RMSNORM, GV_STORE, 1},
        {12352, 2048, 64, PRO_RMSNORM, GV_STORE, 1}};
    for (auto &k : cases) {
        // Into the input of an RMS-normed launch (acc of cols), else into the residual (acc of the rows).
        const bool on_x = k.pro == PRO_RMSNORM, on_res = k.epi == GV_RESID && !on_x;
        const int cols = k.cols, H = on_x ? cols : k.rows;
        std::vector<float> x = randv(cols, r, 2.0f), w = randv(cols, r, 0.3f, 1.0f), z = randv(cols, r), res = randv(k.rows, r);
        std::vector<unsigned long long> acc = acc_codes(H, r, 0.5f);
        // The router's form (LILY_CUDA_GDN_OUT): the folded x kept (x_res_out).
        const bool two = k.nseg == 4 || k.rows == 333;
        std::vector<float> xf = on_x ? acc_fold(x, acc) : x, resf = on_res ? acc_fold(res, acc) : res;
        std::vector<host_mat> hm(k.nseg);
        gv_args a, b; // a: acc folded in by the kernel; b: the host-folded inputs
        memset(&a, 0, sizeof a);
        a.nseg = k.nseg, a.cols = cols, a.pro = k.pro, a.epi = k.epi, a.eps = 1e-6f, a.ghd = 128;
        a.norm_w = dup(w), a.gz = dup(z);
        int *pos = dup(std::vector<int>{3});
        a.pos = pos, a.amax = poisoned<float2>(gemv_max_blocks());
        for (int s = 0; s < k.nseg; s++) {
            make_qmat(hm[s], k.rows + 13 * s, cols, 4, k.group, 1.0f / sqrtf((float)cols), r);
            a.seg[s].m = up_mat(hm[s].m);
        }
        b = a;
        a.x = dup(x), b.x = dup(xf);
        unsigned long long *dacc = dup(acc);
        float *xro = poisoned<float>(cols);
        if (two) a.x_res_out = xro;
        if (on_x) a.acc_x = dacc;
        if (on_res) a.acc_res = dacc;
        for (int s = 0; s < k.nseg; s++) {
            a.seg[s].y = poisoned<float>(k.rows + 13 * s), b.seg[s].y = poisoned<float>(k.rows + 13 * s);
            a.seg[s].res = dup(res), b.seg[s].res = dup(resf);
        }
        const int pro_default = lily_cuda_gv_pro;
        bool same = true, zeroed = true, nan_all = true;
        for (int vv = 0; vv < 3; vv++) { // the first kernel; gemv2 with the register / the loop prologue
            lily_cuda_gemv2 = vv > 0, lily_cuda_gv_pro = vv == 1;
            CK(cudaMemcpy(dacc, acc.data(), acc.size() * 8, cudaMemcpyHostToDevice));
            gemv_launch(a, 0, 0);
            gemv_launch(b, 0, 0);
            CK(cudaGetLastError());
            for (int s = 0; s < k.nseg; s++) {
                const std::vector<float> ya = back(a.seg[s].y, k.rows + 13 * s), yb = back(b.seg[s].y, k.rows + 13 * s);
                same = same && !memcmp(ya.data(), yb.data(), ya.size() * 4) && !count_nonfinite(ya.data(), ya.size());
            }
            if (two) same = same && back(xro, cols) == xf;
            const std::vector<unsigned long long> left = back(dacc, H + 1);
            for (int i = 0; i < H && on_res; i++) zeroed = zeroed && left[i] == 0;
            zeroed = zeroed && (on_res || left == acc) && left[H] == 0;
            std::vector<unsigned long long> flagged = acc; // the flag: every output NaN
            flagged[H] = 1;
            CK(cudaMemcpy(dacc, flagged.data(), flagged.size() * 8, cudaMemcpyHostToDevice));
            gemv_launch(a, 0, 0);
            CK(cudaGetLastError());
            for (int s = 0; s < k.nseg && k.epi != GV_LOGITS; s++) {
                const std::vector<float> ya = back(a.seg[s].y, k.rows + 13 * s);
                nan_all = nan_all && (size_t)count_nonfinite(ya.data(), ya.size()) == ya.size();
            }
            if (k.epi == GV_LOGITS) { // logits also go to y (fp32): all NaN
                const std::vector<float> ya = back(a.seg[0].y, k.rows);
                nan_all = nan_all && (size_t)count_nonfinite(ya.data(), ya.size()) == ya.size();
            }
        }
        // The fold's cost: gemv2 with the register prologue, folding in the kernel against the host-folded input.
        double t_fold = 0, t_host = 0;
        if (on_x && cols == 2048) {
            lily_cuda_gemv2 = 1, lily_cuda_gv_pro = 1;
            CK(cudaMemcpy(dacc, acc.data(), acc.size() * 8, cudaMemcpyHostToDevice));
            t_fold = gpu_time_ms([&] { gemv_launch(a, 0, 0); }, 20, true), t_host = gpu_time_ms([&] { gemv_launch(b, 0, 0); }, 20, true);
            printf("  timing rows=%d nseg=%d, L2 flushed: the sum folded in the kernel %.2f us, host-folded %.2f us\n", k.rows,
                   k.nseg, t_fold * 1e3, t_host * 1e3);
        }
        lily_cuda_gemv2 = 0, lily_cuda_gv_pro = pro_default;
        report(same && zeroed && nan_all,
               "gemv with the MoE's fixed-point sum folded into its %s, rows=%d cols=%d group=%d pro=%d epi=%d nseg=%d, 3 "
               "kernels: against the host-folded launch %s; acc after %s; flag set: %s",
               on_x ? (two ? "input, the folded x kept (the router's form)" : "input") : "residual", k.rows, cols, k.group, k.pro, k.epi, k.nseg, same ? "bitwise equal" : "DIFFERS",
               zeroed ? (on_res ? "zeroed, flag kept" : "unchanged") : "WRONG", nan_all ? "all NaN" : "NOT all NaN");
    }
}
