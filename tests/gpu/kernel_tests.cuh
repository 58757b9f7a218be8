// kernel_tests.cuh: what the kernel tests (test_k_*.cu, one family of decode kernels a file) share beyond
// dev_buf.cuh: random vectors, random experts, the MoE's fixed-point sums, and the report line.
#pragma once
#include <stdarg.h>

#include <algorithm>

#include "dev_buf.cuh"
extern "C" {
#include "sampler.h"
}

void report(bool ok, const char *fmt, ...);

inline std::vector<float> randv(int n, rng &r, float scale = 1.0f, float base = 0.0f) {
    std::vector<float> v(n);
    for (float &x : v) x = base + scale * r.normal();
    return v;
}

// ---------------------------------------------------------------------------------------------
// E random 4-bit experts (gate, up: I x H; down: H x I; group grp) on the host (g, u, dn, for the
// reference) and stacked on the device.
inline moe_w make_experts(std::vector<host_mat> &g, std::vector<host_mat> &u, std::vector<host_mat> &dn, int E, int K,
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
inline std::vector<unsigned long long> acc_codes(int n, rng &r, float scale) {
    std::vector<unsigned long long> a(n + 1, 0ull);
    for (int i = 0; i < n; i++) a[i] = (unsigned long long)llrint((double)(scale * r.normal()) * 4294967296.0);
    return a;
}
inline std::vector<float> acc_fold(const std::vector<float> &res, const std::vector<unsigned long long> &a) {
    std::vector<float> f(res.size());
    for (size_t i = 0; i < res.size(); i++)
        f[i] = bfr(res[i] + bfr((float)(long long)a[i] * 2.3283064365386963e-10f));
    return f;
}
