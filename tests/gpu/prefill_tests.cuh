// prefill_tests.cuh: what the prefill kernel tests (test_pf_*.cu, one family a file; test_prefill.cu runs them)
// share: device buffers freed together after each case, random bf16 data, matrices uploaded as the backend
// uploads them, host references of the products, a parallel loop.
#pragma once
#include <algorithm>

#include "gpu_test.h"
extern "C" {
#include "cpu/ops_cpu.h"
}
#include "../../src/cuda/prefill.cuh"
#include "../../src/cuda/gdn_pf.cuh" // gdn_pf_beta, for the GDN references

void report(bool ok, const char *fmt, ...);
extern "C" int lily_ceilings_cuda(void *ctx, struct lily_ceilings *out);

// The families (test_pf_gemm.cu, test_pf_moe.cu, test_pf_gdn.cu, test_pf_attn.cu) and their timings.
void test_qgemm(rng &r);
void test_qgemm_splitk(rng &r);
void test_moe_pf(rng &r);
void test_moe_rw(rng &r);
void test_moe_gt(rng &r);
void test_gdn_pf(rng &r);
void test_gdn_chunked(rng &r);
void test_pf_qk(rng &r);
void test_attn_pf(rng &r);
void bench_moe(rng &r, bool quick, double peak);
void bench_gdn(rng &r);

inline std::vector<void *> g_allocs;
inline bool g_small; // `small`: the first cases of each list only (for compute-sanitizer)
template <class T> static T *dup(const std::vector<T> &v) {
    T *p;
    CK(cudaMalloc(&p, v.size() * sizeof(T) + 16));
    g_allocs.push_back(p);
    CK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}
template <class T> static T *poisoned(size_t n) {
    T *p;
    CK(cudaMalloc(&p, n * sizeof(T) + 16));
    g_allocs.push_back(p);
    CK(cudaMemset(p, 0xff, n * sizeof(T) + 16));
    return p;
}
template <class T> static std::vector<T> back(const T *p, size_t n) {
    std::vector<T> v(n);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
}
inline void free_all() {
    CK(cudaDeviceSynchronize());
    for (void *p : g_allocs) cudaFree(p);
    g_allocs.clear();
}
inline std::vector<uint16_t> rand_bf16(size_t n, rng &r, float scale = 1.0f) {
    std::vector<uint16_t> v(n);
    for (auto &x : v) x = lily_f32_to_bf16(scale * r.normal());
    return v;
}
inline std::vector<float> to_f32(const std::vector<uint16_t> &v) {
    std::vector<float> f(v.size());
    for (size_t i = 0; i < v.size(); i++) f[i] = lily_bf16_to_f32(v[i]);
    return f;
}
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
// Dequantised rows, exact fp32 (quant.c).
inline std::vector<float> deq(const lily_mat &m) {
    std::vector<float> w((size_t)m.rows * m.cols);
    for (int r = 0; r < m.rows; r++) lily_mat_row(&m, r, &w[(size_t)r * m.cols]);
    return w;
}
// y[M,N] = x[M,K] . w[N,K]^T in double.
inline std::vector<float> mm(const std::vector<float> &x, const std::vector<float> &w, int M, int N, int K) {
    std::vector<float> y((size_t)M * N);
    for (int i = 0; i < M; i++)
        for (int n = 0; n < N; n++) {
            double a = 0;
            const float *xr = &x[(size_t)i * K], *wr = &w[(size_t)n * K];
            for (int k = 0; k < K; k++) a += (double)xr[k] * wr[k];
            y[(size_t)i * N + n] = (float)a;
        }
    return y;
}
inline std::vector<float> mv(const lily_mat &m, const float *x) {
    std::vector<float> y(m.rows);
    lily_mat_vec_ref(&m, x, y.data());
    return y;
}
inline float silu_h(float x) { return x / (1.0f + expf(-x)); }

// fn(i) for i in [0, n) on the CPU backend's thread pool (cpu_parallel_for). The MoE cases' CPU references
// (a matrix-vector product per token and expert, ~5 s a pass on one core) are recomputed in each of ~25
// kernel passes, which made the prefill suite outgrow a device call. fn must only write its own row.
template <class F> static void par_for(int n, const F &fn) {
    cpu_parallel_for(n, [](void *p, int lo, int hi) {
        for (int i = lo; i < hi; i++) (*(const F *)p)(i);
    }, (void *)&fn);
}
