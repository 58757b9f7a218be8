// qgemm_sep.cu: the prefill's dense products with separate dequantisation, the way general engines
// do it, as a measurement path against the fused kernel (qgemm.cu): (1) a kernel writes W (N x K) as
// bf16 to device memory, w = s*q + b rounded to bf16 (an extra rounding the fused kernel does not
// make, so results differ slightly); (2) cuBLAS multiplies X . W^T, bf16 in, fp32 accumulate, into an
// fp32 buffer; (3) an element-wise kernel applies the qgemm epilogue (same rounding points as
// qgemm_generic_kernel). QG_GLU stacks gate and up rows into one (2N x K) weight, so one GEMM gives
// both halves. Only the dense calls come here (prefill.cuh); grouped expert products stay fused.
// Switched on by LILY_CUDA_OPT_SEP_DEQUANT (LILY_CUDA_SEP_DEQUANT=1, `lily bench --ablate fused_dequant`).
// The prefill runs in bf16 mode only, so rb() (this file's c_f32act, never set) always rounds.
#include "cublas_rt.cuh"
#include "prefill.cuh"

// Eight consecutive weights of a 4- or 8-bit row per thread (one scale|bias word: group % 8 == 0),
// stored as one 16-byte write.
template <int BITS>
__global__ void dequant8_kernel(dq_mat m, long n8, uint16_t *out) {
    const long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n8) return;
    const long r = i * 8 / m.cols;
    const int c = (int)(i * 8 - r * m.cols);
    const uint8_t *row = (const uint8_t *)m.codes + r * dq_row_bytes(m);
    const uint32_t sb = m.sb[r * (m.cols / m.group) + c / m.group];
    const float s = __uint_as_float(sb << 16), b = __uint_as_float(sb & 0xffff0000u);
    uint32_t q[8];
    if (BITS == 4) {
        const uint32_t u = *(const uint32_t *)(row + c / 2);
#pragma unroll
        for (int j = 0; j < 8; j++) q[j] = (u >> (4 * j)) & 15u;
    } else {
        const uint2 u = *(const uint2 *)(row + c);
#pragma unroll
        for (int j = 0; j < 4; j++) q[j] = (u.x >> (8 * j)) & 255u, q[4 + j] = (u.y >> (8 * j)) & 255u;
    }
    uint32_t o[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        o[j] = (uint32_t)lily_f32_to_bf16(fmaf(s, (float)q[2 * j], b)) |
               (uint32_t)lily_f32_to_bf16(fmaf(s, (float)q[2 * j + 1], b)) << 16;
    *(uint4 *)(out + i * 8) = make_uint4(o[0], o[1], o[2], o[3]);
}

// Any other format (the test fixtures' dense or odd-width matrices): one element per thread.
__global__ void dequant1_kernel(dq_mat m, long n, uint16_t *out) {
    const long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = lily_f32_to_bf16(dq_get(m, i / m.cols, (int)(i % m.cols)));
}

static void dequant(const dq_mat &m, uint16_t *out, cudaStream_t st) {
    const long n = (long)m.rows * m.cols;
    if (n <= 0) return;
    if (m.fmt != DQ_DENSE && (m.bits == 4 || m.bits == 8) && m.cols % 8 == 0 && m.group % 8 == 0) {
        const long n8 = n / 8;
        if (m.bits == 4) dequant8_kernel<4><<<(unsigned)((n8 + 255) / 256), 256, 0, st>>>(m, n8, out);
        else dequant8_kernel<8><<<(unsigned)((n8 + 255) / 256), 256, 0, st>>>(m, n8, out);
    } else {
        dequant1_kernel<<<(unsigned)((n + 255) / 256), 256, 0, st>>>(m, n, out);
    }
}

// The qgemm epilogue on fp32 products y (row stride ldf; QG_GLU: up at column offset N).
__global__ void sep_epi_kernel(qg_args a, const float *y, int ldf) {
    const long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= (long)a.M * a.N) return;
    const int p = (int)(i / a.N), n = (int)(i % a.N);
    const float acc = y[(long)p * ldf + n];
    qg_store(a, p, n, acc, a.epi == QG_GLU ? y[(long)p * ldf + a.N + n] : 0.0f);
}

#ifdef LILY_HAVE_CUBLAS_H
int qgemm_sep_reserve(qg_sep *s, size_t w_elems, size_t y_elems, cudaStream_t st) {
    if (!s->blas) {
        const char *why = NULL;
        const lily_cublas *cb = lily_cublas_get(&why);
        if (!cb)
            return lily_err_set(LILY_EBACKEND, "cuda: separate dequantisation (LILY_CUDA_SEP_DEQUANT, "
                                "ablation fused_dequant) needs cuBLAS: %s", why);
        cublasHandle_t h = NULL;
        if (cb->create(&h) != CUBLAS_STATUS_SUCCESS)
            return lily_err_set(LILY_EBACKEND, "cuda: separate dequantisation: cublasCreate failed");
        s->blas = h;
    }
    if (w_elems > s->w_cap || y_elems > s->y_cap) {
        CU_TRY(cudaStreamSynchronize(st)); // the old buffers may still be in use
        if (w_elems > s->w_cap) {
            cudaFree(s->w), s->w = NULL, s->w_cap = 0;
            CU_TRY(cudaMalloc(&s->w, w_elems * 2));
            s->w_cap = w_elems;
        }
        if (y_elems > s->y_cap) {
            cudaFree(s->y), s->y = NULL, s->y_cap = 0;
            CU_TRY(cudaMalloc(&s->y, y_elems * 4));
            s->y_cap = y_elems;
        }
    }
    return 0;
}

int qgemm_sep(qg_sep *s, const qg_args &a, cudaStream_t st) {
    if (a.grp_off || a.x_rows) return qgemm_launch(a, 0, 0, st); // grouped / gathered: fused
    if (a.w.cols != a.K || (a.epi == QG_GLU && (a.w2.cols != a.K || a.w2.rows != a.w.rows)))
        return lily_err_set(LILY_EINVAL, "qgemm_sep: unsupported shape N=%d K=%d cols=%d", a.N, a.K, a.w.cols);
    if (a.M <= 0 || a.N <= 0) return 0;
    const int glu = a.epi == QG_GLU, nw = glu ? 2 * a.N : a.N; // weight rows multiplied
    int rc = qgemm_sep_reserve(s, (size_t)nw * a.K, (size_t)a.M * nw, st);
    if (rc) return rc;
    // Rows of w beyond N (a matrix taller than the output) are not needed: dequantise N rows.
    dq_mat w = a.w;
    w.rows = a.N;
    dequant(w, s->w, st);
    if (glu) {
        dq_mat w2 = a.w2;
        w2.rows = a.N;
        dequant(w2, s->w + (size_t)a.N * a.K, st);
    }
    const lily_cublas *cb = lily_cublas_get(NULL);
    cublasHandle_t h = (cublasHandle_t)s->blas;
    const float alpha = 1.0f, beta = 0.0f;
    // Row-major Y (M x nw) = X (M x K) . W^T is column-major Y^T (nw x M) = W^T' (K x nw)^T . X^T (K x M).
    if (cb->set_stream(h, st) != CUBLAS_STATUS_SUCCESS ||
        cb->gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, nw, a.M, a.K, &alpha, s->w, CUDA_R_16BF, a.K, a.x, CUDA_R_16BF,
                 a.ldx, &beta, s->y, CUDA_R_32F, nw, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
        return lily_err_set(LILY_EBACKEND, "cuda: separate dequantisation: cublasGemmEx failed (M=%d N=%d K=%d)",
                            a.M, nw, a.K);
    const long n = (long)a.M * a.N;
    sep_epi_kernel<<<(unsigned)((n + 255) / 256), 256, 0, st>>>(a, s->y, nw);
    return 0;
}

void qgemm_sep_free(qg_sep *s) {
    if (s->blas) {
        const lily_cublas *cb = lily_cublas_get(NULL);
        if (cb) cb->destroy((cublasHandle_t)s->blas);
    }
    cudaFree(s->w), cudaFree(s->y);
    memset(s, 0, sizeof *s);
}
#else
int qgemm_sep_reserve(qg_sep *s, size_t w_elems, size_t y_elems, cudaStream_t st) {
    (void)s, (void)w_elems, (void)y_elems, (void)st;
    return lily_err_set(LILY_EBACKEND, "cuda: separate dequantisation (LILY_CUDA_SEP_DEQUANT, ablation "
                        "fused_dequant) needs cuBLAS: built without cublas_v2.h");
}
int qgemm_sep(qg_sep *s, const qg_args &a, cudaStream_t st) {
    if (a.grp_off || a.x_rows) return qgemm_launch(a, 0, 0, st);
    return qgemm_sep_reserve(s, 0, 0, st);
}
void qgemm_sep_free(qg_sep *s) {
    cudaFree(s->w), cudaFree(s->y);
    memset(s, 0, sizeof *s);
}
#endif
