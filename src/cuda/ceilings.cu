// ceilings.cu: the CUDA backend's ceilings() hook for `lily bench` (backend.h): what this GPU
// sustains right now, measured in the same run as the sweep (perf-model.md):
//   - copy: cudaMemcpyAsync device to device of 4 GiB, timed with events, counting bytes read plus
//     bytes written; best of 5 after a warm-up;
//   - GEMM: bf16 8192 x 8192 x 8192 with fp32 accumulation through cuBLAS (cublasGemmEx), 10 back to
//     back after warm-up, on non-zero data (zeros draw less power and flatter the clock).
// cuBLAS is opened at run time with dlopen (cublas_rt.cu), so the build needs no -lcublas and a
// machine without it still gets the copy ceiling (the GEMM ceiling is then 0 and bench says so).
//
// Wiring (forward_cuda.cu): declare
//     extern "C" int lily_ceilings_cuda(void *ctx, struct lily_ceilings *out);
// and set `.ceilings = lily_ceilings_cuda` in lily_backend_cuda. It uses the current device and
// ignores ctx; it allocates ~8.4 GiB for its duration (halving the copy size if that fails).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "cublas_rt.cuh"

extern "C" {
#include "backend.h"
#include "common.h"
}

// ---------------------------------------------------------------------------------------------
// Copy bandwidth.

static double measure_copy(size_t *bytes_used) {
    size_t bytes = (size_t)4 << 30;
    void *a = NULL, *b = NULL;
    while (bytes >= ((size_t)256 << 20)) {
        if (cudaMalloc(&a, bytes) == cudaSuccess) {
            if (cudaMalloc(&b, bytes) == cudaSuccess) break;
            cudaFree(a);
            a = NULL;
        }
        cudaGetLastError(); // clear the allocation error before trying smaller
        bytes /= 2;
    }
    if (!a || !b) return 0;
    *bytes_used = bytes;
    cudaMemset(a, 1, bytes);
    cudaMemset(b, 0, bytes);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    float best = 1e30f;
    for (int rep = 0; rep < 6; rep++) {
        cudaEventRecord(e0);
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        if (rep > 0 && ms < best) best = ms; // repetition 0 is the warm-up
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    if (cudaGetLastError() != cudaSuccess) return 0;
    return 2.0 * (double)bytes / (best * 1e-3) / 1e9;
}

// ---------------------------------------------------------------------------------------------
// bf16 GEMM through cuBLAS, loaded at run time.

__global__ void kernel_fill_bf16(__nv_bfloat16 *x, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 13;
        h *= 0x5bd1e995u;
        x[i] = __float2bfloat16(((float)(h & 0xffff) / 65536.0f - 0.5f) * 0.1f);
    }
}

#ifdef LILY_HAVE_CUBLAS_H
static double measure_gemm(char *note, size_t cap) {
    const char *why = NULL;
    const lily_cublas *cb = lily_cublas_get(&why);
    if (!cb) {
        snprintf(note, cap, "%s", why);
        return 0;
    }
    double tflops = 0;
    const int N = 8192, reps = 10;
    const size_t n = (size_t)N * N;
    __nv_bfloat16 *A = NULL, *B = NULL, *C = NULL;
    cublasHandle_t handle = NULL;
    if (cudaMalloc(&A, n * 2) != cudaSuccess || cudaMalloc(&B, n * 2) != cudaSuccess ||
        cudaMalloc(&C, n * 2) != cudaSuccess) {
        snprintf(note, cap, "no memory for the GEMM test");
    } else if (cb->create(&handle) != CUBLAS_STATUS_SUCCESS) {
        snprintf(note, cap, "cublasCreate failed");
    } else {
        kernel_fill_bf16<<<1024, 256>>>(A, n, 1u);
        kernel_fill_bf16<<<1024, 256>>>(B, n, 2u);
        const float alpha = 1.0f, beta = 0.0f;
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        int ok = 1;
        for (int i = 0; i < 3 && ok; i++) // warm-up: heuristics, clocks
            ok = cb->gemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &alpha, A, CUDA_R_16BF, N, B,
                          CUDA_R_16BF, N, &beta, C, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
        cudaEventRecord(e0);
        for (int i = 0; i < reps && ok; i++)
            ok = cb->gemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &alpha, A, CUDA_R_16BF, N, B,
                          CUDA_R_16BF, N, &beta, C, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        if (ok && cudaGetLastError() == cudaSuccess && ms > 0)
            tflops = 2.0 * N * (double)N * N * reps / (ms * 1e-3) / 1e12;
        else
            snprintf(note, cap, "cublasGemmEx failed");
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
    }
    if (handle) cb->destroy(handle);
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    cudaGetLastError();
    return tflops;
}
#else
static double measure_gemm(char *note, size_t cap) {
    snprintf(note, cap, "built without cublas_v2.h");
    return 0;
}
#endif

// ---------------------------------------------------------------------------------------------
// The hook.

extern "C" int lily_ceilings_cuda(void *ctx, struct lily_ceilings *out) {
    (void)ctx;
    memset(out, 0, sizeof *out);
    int dev = 0;
    cudaDeviceProp p;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess)
        return lily_err_set(LILY_EBACKEND, "cuda ceilings: no device");
    snprintf(out->device, sizeof out->device, "%.127s", p.name);
    out->mem_total = p.totalGlobalMem;
    int sm_khz = 0, mem_khz = 0;
    cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, dev);
    cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev);
    size_t copy_bytes = 0;
    out->copy_gbps = measure_copy(&copy_bytes);
    char note[64] = "";
    out->gemm_tflops = measure_gemm(note, sizeof note);
    snprintf(out->clocks, sizeof out->clocks, "sm max %d MHz, mem max %d MHz; copy %zu MiB%s%s",
             sm_khz / 1000, mem_khz / 1000, copy_bytes >> 20, note[0] ? "; gemm: " : "", note);
    cudaGetLastError();
    if (out->copy_gbps <= 0) return lily_err_set(LILY_EBACKEND, "cuda ceilings: copy test failed");
    return 0;
}
