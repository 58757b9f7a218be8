// test_kernels.cu: every decode kernel against a CPU reference on fresh random inputs of odd sizes,
// outputs poisoned with NaN before each launch. Prints one PASS/FAIL line per case with its metric.
#include <stdarg.h>

#include <algorithm>

#include "gpu_test.h"
#include "../../src/cuda/cuda_common.cuh"
extern "C" {
#include "sampler.h"
}

int g_fail = 0, g_pass = 0;

void report(bool ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "PASS" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    ok ? g_pass++ : g_fail++;
}

template <class T> T *dup(const std::vector<T> &v) {
    T *p;
    CK(cudaMalloc(&p, v.size() * sizeof(T) + 16));
    CK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}
template <class T> T *poisoned(size_t n) {
    T *p;
    CK(cudaMalloc(&p, n * sizeof(T) + 16));
    CK(cudaMemset(p, 0xff, n * sizeof(T) + 16));
    return p;
}
template <class T> std::vector<T> back(const T *p, size_t n) {
    std::vector<T> v(n);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
}
static std::vector<float> randv(int n, rng &r, float scale = 1.0f, float base = 0.0f) {
    std::vector<float> v(n);
    for (float &x : v) x = base + scale * r.normal();
    return v;
}

// Upload a host matrix the way the backend does (codes as is, scale|bias packed per group).
static dq_mat up_mat(const lily_mat &m) {
    dq_mat d = {};
    d.rows = m.rows, d.cols = m.cols, d.bits = m.bits, d.group = m.group;
    size_t cb = (size_t)m.rows * m.cols * m.bits / 8, ng = (size_t)m.rows * (m.cols / m.group);
    std::vector<uint8_t> codes((const uint8_t *)m.w, (const uint8_t *)m.w + cb);
    std::vector<uint32_t> sb(ng);
    for (size_t i = 0; i < ng; i++)
        sb[i] = ((const uint16_t *)m.scales)[i] | ((uint32_t)((const uint16_t *)m.biases)[i] << 16);
    d.codes = (const uint4 *)dup(codes);
    d.sb = dup(sb);
    return d;
}
// Several host matrices stacked into one device matrix.
static dq_mat up_stack(std::vector<host_mat> &ms) {
    host_mat all;
    for (auto &h : ms) {
        all.codes.insert(all.codes.end(), h.codes.begin(), h.codes.end());
        all.sc.insert(all.sc.end(), h.sc.begin(), h.sc.end());
        all.bi.insert(all.bi.end(), h.bi.begin(), h.bi.end());
    }
    lily_mat m = ms[0].m;
    m.rows *= (int)ms.size();
    m.w = all.codes.data(), m.scales = all.sc.data(), m.biases = all.bi.data();
    return up_mat(m);
}
static std::vector<float> ref_mv(const lily_mat &m, const std::vector<float> &x) {
    std::vector<float> y(m.rows);
    lily_mat_vec_ref(&m, x.data(), y.data());
    return y;
}

// ---------------------------------------------------------------------------------------------
// The device's bf16 rounding (one cvt instruction, quant.h) against the host's (integer form) on
// random bit patterns (every exponent, subnormals, infinities, NaNs) and the halfway cases: bitwise
// equal, NaN for NaN.
__global__ void k_to_bf16(const float *x, uint16_t *y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = lily_f32_to_bf16(x[i]);
}
static void test_bf16(rng &r) {
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
static void test_gemv(rng &r) {
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
            refs[s] = ref_mv(hm[s].m, xr);
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

// ---------------------------------------------------------------------------------------------
// E random 4-bit experts (gate, up: I x H; down: H x I; group grp) on the host (g, u, dn, for the
// reference) and stacked on the device.
static moe_w make_experts(std::vector<host_mat> &g, std::vector<host_mat> &u, std::vector<host_mat> &dn, int E, int K,
                          int I, int H, int norm, int grp, rng &r) {
    g.resize(E), u.resize(E), dn.resize(E);
    for (int e = 0; e < E; e++) {
        make_qmat(g[e], I, H, 4, grp, 1.0f / sqrtf((float)H), r);
        make_qmat(u[e], I, H, 4, grp, 1.0f / sqrtf((float)H), r);
        make_qmat(dn[e], H, I, 4, grp, 1.0f / sqrtf((float)I), r);
    }
    return moe_w{up_stack(g), up_stack(u), up_stack(dn), E, K, I, H, norm, nullptr, nullptr};
}

// The MoE's fixed-point sum (LILY_CUDA_MOE_ACC, cuda_common.cuh): codes of random sums, their fold as the
// host computes it (int64 to float rounding to nearest, the exact 2^-32 scale, two bf16 roundings).
static std::vector<unsigned long long> acc_codes(int n, rng &r, float scale) {
    std::vector<unsigned long long> a(n + 1, 0ull);
    for (int i = 0; i < n; i++) a[i] = (unsigned long long)llrint((double)(scale * r.normal()) * 4294967296.0);
    return a;
}
static std::vector<float> acc_fold(const std::vector<float> &res, const std::vector<unsigned long long> &a) {
    std::vector<float> f(res.size());
    for (size_t i = 0; i < res.size(); i++)
        f[i] = bfr(res[i] + bfr((float)(long long)a[i] * 2.3283064365386963e-10f));
    return f;
}

// gemv with the MoE's sum folded into its input (acc_x, PRO_RMSNORM) or its residual (acc_res, GV_RESID)
// against the same launch on the host-folded input or residual: bitwise equal on every kernel and
// prologue; acc_res's rows zeroed after the launch, its flag kept; with the flag set, NaN outputs.
static void test_gemv_acc(rng &r) {
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

static void test_moe(rng &r) {
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
            std::vector<float> gg = ref_mv(g[e].m, x), uu = ref_mv(u[e].m, x), hh(k.I);
            for (int i = 0; i < k.I; i++) {
                float gv = bfr(gg[i]);
                hh[i] = hr[t * k.I + i] = bfr(bfr(gv / (1 + expf(-gv))) * bfr(uu[i]));
            }
            std::vector<float> d = ref_mv(dn[e].m, hh);
            for (int i = 0; i < k.H; i++) acc[i] += (double)wt * d[i];
        }
        if (k.Is) {
            std::vector<float> hh(k.Is);
            for (int i = 0; i < k.Is; i++) hh[i] = bfr(bfr(sgv[i] / (1 + expf(-sgv[i]))) * suv[i]);
            std::vector<float> d = ref_mv(sd.m, hh);
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
static void test_moe_front(rng &r) {
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
static void test_gdn(rng &r) {
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
                std::vector<float> yr = ref_mv(wo.m, g);
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
                int kh = h / (k.hv / k.hk);
                std::vector<float> q(&u[kh * k.dk], &u[kh * k.dk] + k.dk), kk(&u[k.hk * k.dk + kh * k.dk], &u[k.hk * k.dk + kh * k.dk] + k.dk);
                double sq = 0, sk = 0;
                for (int i = 0; i < k.dk; i++) sq += q[i] * q[i], sk += kk[i] * kk[i];
                for (int i = 0; i < k.dk; i++) q[i] = q[i] / sqrtf((float)sq + 1e-6f) / sqrtf((float)k.dk), kk[i] /= sqrtf((float)sk + 1e-6f);
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
static void test_gdn_front(rng &r) {
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

// ---------------------------------------------------------------------------------------------
static void test_attn(rng &r) {
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
        lily_cuda_attn_comb = comb_default;
        CK(cudaGetLastError());
        const bool comb_same = back(o_par, k.hq * k.D) == back(o, k.hq * k.D);
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
static void test_attn_qk(rng &r) {
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

static void test_qk(rng &r) {
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
static void test_topk(rng &r) {
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

// LILY_GPU_KERNELS=family (gemv, moe, gdn, attn, qk, topk): that family only (a sanitizer run of one).
void run_kernel_tests(uint64_t seed) {
    rng r(seed);
    printf("kernel tests, seed %llu\n", (unsigned long long)seed);
    const char *only = getenv("LILY_GPU_KERNELS");
    const struct { const char *name; void (*fn)(rng &); } fam[] = {
        {"gemv", test_bf16}, {"gemv", test_gemv}, {"gemv", test_gemv_acc}, {"moe", test_moe}, {"moe", test_moe_front}, {"gdn", test_gdn}, {"gdn", test_gdn_front}, {"attn", test_attn}, {"attn", test_attn_qk}, {"qk", test_qk}, {"topk", test_topk}};
    for (auto &f : fam)
        if (!only || !strcmp(only, f.name)) f.fn(r);
}
