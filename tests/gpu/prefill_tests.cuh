// prefill_tests.cuh: what the prefill kernel tests (test_pf_*.cu, one family a file; test_prefill.cu runs them)
// share beyond dev_buf.cuh (whose free_all they call after each case): random bf16 data, host references of
// the products, a parallel loop.
#pragma once
#include <algorithm>

#include "dev_buf.cuh"
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

inline bool g_small; // `small`: the first cases of each list only (for compute-sanitizer)
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
// The GEMM knobs the tests set (prefill.cuh's lily_qg_*) back to where the tests start them.
inline void qg_knobs_reset() {
    lily_qg_bf16w = 0, lily_qg_rs = 0, lily_qg_wide = 0, lily_qg_tma = 1, lily_qg_tma128 = 0, lily_qg_wsw = 0, lily_qg_rw = 0;
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
