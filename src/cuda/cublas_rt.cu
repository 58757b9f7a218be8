// cublas_rt.cu: loads cuBLAS at run time (cublas_rt.cuh): the first library name that opens, the
// symbols Lily calls, once per process.
#include <dlfcn.h>

#include "cublas_rt.cuh"

#ifdef LILY_HAVE_CUBLAS_H
struct loaded {
    lily_cublas fn;
    const char *why; // NULL when fn is usable
};

static loaded load(void) {
    loaded r = {};
    const char *libs[] = {"libcublas.so", "libcublas.so.13", "libcublas.so.12"};
    void *h = NULL;
    for (int i = 0; i < 3 && !h; i++) h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        r.why = "cuBLAS not found at run time";
        return r;
    }
    r.fn.create = (decltype(r.fn.create))dlsym(h, "cublasCreate_v2");
    r.fn.destroy = (decltype(r.fn.destroy))dlsym(h, "cublasDestroy_v2");
    r.fn.set_stream = (decltype(r.fn.set_stream))dlsym(h, "cublasSetStream_v2");
    r.fn.gemm = (decltype(r.fn.gemm))dlsym(h, "cublasGemmEx");
    if (!r.fn.create || !r.fn.destroy || !r.fn.set_stream || !r.fn.gemm) r.why = "cuBLAS lacks cublasGemmEx";
    return r;
}

const lily_cublas *lily_cublas_get(const char **why) {
    static const loaded l = load(); // C++ guarantees one thread-safe initialisation
    if (why) *why = l.why;
    return l.why ? NULL : &l.fn;
}
#endif
