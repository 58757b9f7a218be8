// dev_buf.cuh: device buffers and matrices for the GPU tests (kernel_tests.cuh, prefill_tests.cuh): copies to the
// device, NaN-poisoned outputs, copies back, host matrices uploaded as the backend uploads them, and the CPU
// reference of a matrix times a vector. dup and poisoned record what they allocate in g_allocs, and free_all
// frees it: the prefill tests call it after each case; the kernel tests free their own buffers or keep them,
// and never call it.
#pragma once
#include <vector>

#include "gpu_test.h"
#include "../../src/cuda/cuda_common.cuh"

inline std::vector<void *> g_allocs;
template <class T> T *dup(const std::vector<T> &v) {
    T *p;
    CK(cudaMalloc(&p, v.size() * sizeof(T) + 16));
    g_allocs.push_back(p);
    CK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}
template <class T> T *poisoned(size_t n) {
    T *p;
    CK(cudaMalloc(&p, n * sizeof(T) + 16));
    g_allocs.push_back(p);
    CK(cudaMemset(p, 0xff, n * sizeof(T) + 16));
    return p;
}
template <class T> std::vector<T> back(const T *p, size_t n) {
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
// m x on the CPU (quant.c's reference).
inline std::vector<float> mv(const lily_mat &m, const float *x) {
    std::vector<float> y(m.rows);
    lily_mat_vec_ref(&m, x, y.data());
    return y;
}
