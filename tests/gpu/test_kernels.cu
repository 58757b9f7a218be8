// test_kernels.cu: `lily-gpu-test kernels`: every decode kernel against a CPU reference on fresh random
// inputs of odd sizes, outputs poisoned with NaN before each launch, one family a file (test_k_gemv.cu,
// test_k_moe.cu, test_k_gdn.cu, test_k_attn.cu; their shared helpers in kernel_tests.cuh). Prints one
// PASS/FAIL line per case with its metric.
#include <stdarg.h>

#include "gpu_test.h"

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

// Defined one family a file (test_k_*.cu).
void test_bf16(rng &r);
void test_gemv(rng &r);
void test_gemv_acc(rng &r);
void test_moe(rng &r);
void test_moe_front(rng &r);
void test_gdn(rng &r);
void test_gdn_front(rng &r);
void test_attn(rng &r);
void test_attn_qk(rng &r);
void test_qk(rng &r);
void test_topk(rng &r);

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
