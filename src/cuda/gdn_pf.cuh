// gdn_pf.cuh: per-element arithmetic shared by the two Gated DeltaNet prefill kernels, the
// token-sequential scan (gdn_prefill.cu) and the chunked form (gdn_chunked.cu), so both take the
// same rounding points as the decode step (gdn.cu, spec §2.4).
#pragma once

#include "cuda_common.cuh"

// Causal depthwise conv + SiLU of channel c at token t of the call (position pos + t): raw bf16
// projections qkv (T rows of C at stride ldq) for tokens >= 0, the fp32 ring (K, C) of raw inputs (slot p % K holds
// position p) for the K-1 positions before the call. bf16 rounding after the conv and after SiLU.
// Every conv of the backend (this one, the chunked form's conv pass, the decode step) sums in the
// same order with the same roundings, written out (the first product rounded, each further tap one
// fma) so that no compiler contraction can differ between them: a conv output is rounded to bf16
// next, and one sum rounded differently flips it by a bf16 step (2^-8), which the recurrent state
// of a fast-decaying head carries to the end of a prefill (seen: a 5e-3 state column when the scan
// and the chunked form disagreed on one v value of the second-last token).
__device__ __forceinline__ float gdn_pf_conv(const uint16_t *qkv, int ldq, const float *ring,
                                             const float *conv_w, int C, int K, int pos, int t, int c) {
    float y = __fmul_rn(conv_w[(long)c * K + K - 1], __uint_as_float((uint32_t)qkv[(long)t * ldq + c] << 16));
    for (int dd = 1; dd < K; dd++) {
        int tp = t - dd;
        float u = tp >= 0 ? __uint_as_float((uint32_t)qkv[(long)tp * ldq + c] << 16)
                          : ring[(long)(((pos + tp) % K + K) % K) * C + c];
        y = __fmaf_rn(conv_w[(long)c * K + K - 1 - dd], u, y);
    }
    return rb(silu_f(rb(y)));
}

// beta = rb(sigmoid(b)) from the bf16 logit.
__device__ __forceinline__ float gdn_pf_beta(uint16_t b) {
    return rb(sigmoid_f(__uint_as_float((uint32_t)b << 16)));
}

// Log-decay g = A * softplus(a + dt_bias) (A = -exp(A_log)); the per-step decay is expf(g).
__device__ __forceinline__ float gdn_pf_logdecay(uint16_t a, float dtb, float A) {
    float xa = __uint_as_float((uint32_t)a << 16) + dtb;
    float sp = xa > 20.0f ? xa : log1pf(expf(xa));
    return A * sp;
}
