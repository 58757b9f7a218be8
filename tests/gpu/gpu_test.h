// gpu_test.h: shared helpers of the GPU test binary (tests/gpu/): random numbers, random quantised
// matrices, random in-memory models, comparisons.
#pragma once
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

extern "C" {
#include "backend.h"
#include "common.h"
#include "model.h"
#include "quant.h"
// quant.h hides its host helpers from nvcc; the tests call them from host code.
void lily_mat_row(const struct lily_mat *m, long r, float *out);
void lily_mat_vec_ref(const struct lily_mat *m, const float *x, float *y);
}

struct rng {
    uint64_t s;
    explicit rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
    uint64_t next() { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return s; }
    float uni() { return (float)((next() >> 40) * (1.0 / 16777216.0)); }  // [0,1)
    float sym() { return 2.0f * uni() - 1.0f; }                             // [-1,1)
    float normal() { float u = uni() + 1e-7f, v = uni(); return sqrtf(-2 * logf(u)) * cosf(6.2831853f * v); }
};

// A random quantised matrix in host memory (owns its storage). std ~ sigma.
struct host_mat {
    lily_mat m;
    std::vector<uint8_t> codes;
    std::vector<uint16_t> sc, bi;
};
void make_qmat(host_mat &h, int rows, int cols, int bits, int group, float sigma, rng &r);

// Reference helpers.
float bfr(float f); // round to bf16 and back
double rel_l2(const float *a, const float *ref, size_t n);
int count_nonfinite(const float *a, size_t n);
// The GDN references' q and k of v head h (k head h / (hv / hk)) from the conv outputs u (q of the k heads, then
// k): q / |q| / sqrt(dk) and k / |k|, the squares summed in double, eps 1e-6 inside the roots (spec §2.4).
inline void gdn_ref_qk(const float *u, int hk, int hv, int dk, int h, std::vector<float> &q, std::vector<float> &kk) {
    const int kh = h / (hv / hk);
    q.assign(u + kh * dk, u + kh * dk + dk), kk.assign(u + hk * dk + kh * dk, u + hk * dk + kh * dk + dk);
    double sq = 0, sk = 0;
    for (int i = 0; i < dk; i++) sq += q[i] * q[i], sk += kk[i] * kk[i];
    for (int i = 0; i < dk; i++) q[i] = q[i] / sqrtf((float)sq + 1e-6f) / sqrtf((float)dk), kk[i] /= sqrtf((float)sk + 1e-6f);
}

// Random models (test_model.cu).
struct test_model;
test_model *test_model_new(const lily_config &c, uint64_t seed, int threads);
const lily_model *test_model_get(test_model *t);
void test_model_free(test_model *t);
lily_config config_tiny(void);

// Any CUDA error in a test is fatal: print where and exit.
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); exit(1); } } while (0)

// Median milliseconds of `reps` event-timed runs of fn (after one untimed warm-up). cold: a 256 MB
// memset before each run flushes the 50 MB L2, so GB/s printed from it are DRAM figures.
template <class F> static double gpu_time_ms(F fn, int reps, bool cold = false) {
    static char *flush = NULL;
    const size_t fb = 256u << 20;
    if (cold && !flush) CK(cudaMalloc(&flush, fb));
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    fn();
    std::vector<float> t;
    for (int i = 0; i < reps; i++) {
        if (cold) cudaMemsetAsync(flush, i & 0xff, fb, 0);
        cudaEventRecord(e0);
        fn();
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        t.push_back(ms);
    }
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}
