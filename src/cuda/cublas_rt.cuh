// cublas_rt.cuh: cuBLAS opened at run time (dlopen), so the build needs no -lcublas and a machine
// without the library still runs everything that does not need it. Users: the bench GEMM ceiling
// (ceilings.cu) and the separate-dequantisation ablation of the prefill (qgemm_sep.cu).
#pragma once

#include <cuda_runtime.h>

#if __has_include(<cublas_v2.h>)
#include <cublas_v2.h>
#define LILY_HAVE_CUBLAS_H 1

// The few entry points Lily uses.
struct lily_cublas {
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*gemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                           const void *, const void *, cudaDataType, int, const void *, cudaDataType,
                           int, const void *, void *, cudaDataType, int, cublasComputeType_t,
                           cublasGemmAlgo_t);
};
#endif

// The library, opened once per process and never closed (handles may outlive any one user). NULL
// when it cannot be had, with *why (if not NULL) set to a static message saying why.
#ifdef LILY_HAVE_CUBLAS_H
const lily_cublas *lily_cublas_get(const char **why);
#endif
