// kernel_tests.cuh: what the kernel tests (test_k_*.cu, one family of decode kernels a file) share: device
// buffers (copies, NaN-poisoned outputs, copies back), random vectors, matrices uploaded as the backend
// uploads them, random experts, the MoE's fixed-point sums, and the report line.
#pragma once
#include <stdarg.h>

#include <algorithm>

#include "gpu_test.h"
#include "../../src/cuda/cuda_common.cuh"
extern "C" {
#include "sampler.h"
}

void report(bool ok, const char *fmt, ...);

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
inline std::vector<float> randv(int n, rng &r, float scale = 1.0f, float base = 0.0f) {
    std::vector<float> v(n);
    for (float &x : v) x = base + scale * r.normal();
    return v;
}

// Upload a host matrix the way the backend does (codes as is, scale|bias packed per group).
inline dq_mat up_mat(const lily_mat &m) {
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
inline dq_mat up_stack(std::vector<host_mat> &ms) {
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
inline std::vector<float> ref_mv(const lily_mat &m, const std::vector<float> &x) {
    std::vector<float> y(m.rows);
    lily_mat_vec_ref(&m, x.data(), y.data());
    return y;
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
