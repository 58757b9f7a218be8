// ops_cpu.c: matrix products, norms, RoPE, attention and MoE routing of the CPU backend (ops_cpu.h),
// each beside its plain `_ref` loop. The fast versions vectorise with AVX2/FMA when the compiler
// targets it (the Makefile's default -march=x86-64-v3) and thread over independent outputs; they
// never split a reduction across threads, so results do not depend on the thread count.
// Tested by tests/test_ops_cpu.c.
#include <math.h>
#include <string.h>

#include "common.h"
#include "cpu/ops_cpu.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define CPU_AVX2 1
#endif

// ---------------------------------------------------------------------------------------------
// Dot product with four independent 8-lane accumulators (or 8 scalar ones without AVX2).
float cpu_dot(const float *a, const float *b, int n) {
    int i = 0;
#ifdef CPU_AVX2
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    float acc = _mm_cvtss_f32(h);
#else
    float p[8] = {0};
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) p[j] += a[i + j] * b[i + j];
    float acc = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
#endif
    for (; i < n; i++) acc += a[i] * b[i];
    return acc;
}

// ---------------------------------------------------------------------------------------------
// Row dequantisation. w = s * q + b in fp32 per group, exactly as lily_mat_row computes it; the
// 4- and 8-bit cases read whole bytes instead of walking the bit stream.
void cpu_mat_row(const struct lily_mat *m, long r, float *out) {
    long cols = m->cols;
    if (m->dtype == LILY_DT_BF16) {
        const uint16_t *p = (const uint16_t *)m->w + r * cols;
        for (long c = 0; c < cols; c++) {
            uint32_t u = (uint32_t)p[c] << 16;
            memcpy(&out[c], &u, 4);
        }
        return;
    }
    if (m->dtype != LILY_DT_Q || (m->bits != 4 && m->bits != 8)) {
        lily_mat_row(m, r, out);
        return;
    }
    long ng = cols / m->group;
    const uint8_t *row = (const uint8_t *)m->w + r * lily_q_row_bytes(cols, m->bits);
    for (long g = 0; g < ng; g++) {
        float s = lily_load_f32(m->scales, m->sdtype, r * ng + g);
        float b = lily_load_f32(m->biases, m->sdtype, r * ng + g);
        float *o = out + g * m->group;
        if (m->bits == 4) {
            const uint8_t *p = row + g * m->group / 2;
            for (int j = 0; j < m->group / 2; j++) {
                o[2 * j] = s * (float)(p[j] & 15) + b;
                o[2 * j + 1] = s * (float)(p[j] >> 4) + b;
            }
        } else {
            const uint8_t *p = row + g * m->group;
            for (int j = 0; j < m->group; j++) o[j] = s * (float)p[j] + b;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Y = X W^T, threaded over blocks of rows: each row is dequantised once into a per-thread buffer
// and dotted with all n inputs.
struct matmul_job {
    const struct lily_mat *w;
    const float *x;
    int n;
    float *y;
};

#define MATMUL_ROWS_PER_ITEM 16

static void matmul_range(void *p, int lo, int hi) {
    struct matmul_job *j = p;
    const struct lily_mat *w = j->w;
    int cols = w->cols, rows = w->rows;
    float *buf = w->dtype == LILY_DT_F32 ? NULL : xmalloc_aligned((size_t)cols * sizeof(float));
    int r_end = hi * MATMUL_ROWS_PER_ITEM < rows ? hi * MATMUL_ROWS_PER_ITEM : rows;
    for (int r = lo * MATMUL_ROWS_PER_ITEM; r < r_end; r++) {
        const float *row;
        if (buf) {
            cpu_mat_row(w, r, buf);
            row = buf;
        } else {
            row = (const float *)w->w + (long)r * cols;
        }
        for (int t = 0; t < j->n; t++)
            j->y[(long)t * rows + r] = cpu_dot(row, j->x + (long)t * cols, cols);
    }
    free(buf);
}

void cpu_matmul(const struct lily_mat *w, const float *x, int n, float *y) {
    struct matmul_job j = {w, x, n, y};
    int items = (w->rows + MATMUL_ROWS_PER_ITEM - 1) / MATMUL_ROWS_PER_ITEM;
    // Small products are not worth waking the pool for.
    if ((long)w->rows * w->cols * n < 32768)
        matmul_range(&j, 0, items);
    else
        cpu_parallel_for(items, matmul_range, &j);
}

void cpu_matmul_ref(const struct lily_mat *w, const float *x, int n, float *y) {
    for (int t = 0; t < n; t++)
        for (int r = 0; r < w->rows; r++) {
            float acc = 0.0f;
            for (int c = 0; c < w->cols; c++) acc += lily_mat_get(w, r, c) * x[(long)t * w->cols + c];
            y[(long)t * w->rows + r] = acc;
        }
}

// ---------------------------------------------------------------------------------------------
// RMSNorm.
void cpu_rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    float ss = cpu_dot(x, x, n);
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    if (w)
        for (int i = 0; i < n; i++) out[i] = x[i] * inv * w[i];
    else
        for (int i = 0; i < n; i++) out[i] = x[i] * inv;
}

void cpu_rmsnorm_ref(float *out, const float *x, const float *w, int n, float eps) {
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * inv * (w ? w[i] : 1.0f);
}

// ---------------------------------------------------------------------------------------------
// RoPE. HF builds inv_freq = 1 / theta^(2i/rope_dim) in fp32 and the angle pos * inv_freq in fp32.
void cpu_rope_freqs(float *inv_freq, int rope_dim, float theta) {
    for (int i = 0; i < rope_dim / 2; i++)
        inv_freq[i] = 1.0f / powf(theta, (float)(2 * i) / (float)rope_dim);
}

void cpu_rope(float *x, int n_heads, int head_dim, int rope_dim, const float *inv_freq, int pos) {
    int half = rope_dim / 2;
    float cs[512], sn[512]; // rope_dim/2 <= 512 is checked by the backend at init
    for (int i = 0; i < half; i++) {
        float a = (float)pos * inv_freq[i];
        cs[i] = cosf(a);
        sn[i] = sinf(a);
    }
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (long)h * head_dim;
        for (int i = 0; i < half; i++) {
            float x0 = v[i], x1 = v[i + half];
            v[i] = x0 * cs[i] - x1 * sn[i];
            v[i + half] = x1 * cs[i] + x0 * sn[i];
        }
    }
}

void cpu_rope_ref(float *x, int n_heads, int head_dim, int rope_dim, float theta, int pos) {
    int half = rope_dim / 2;
    for (int h = 0; h < n_heads; h++)
        for (int i = 0; i < half; i++) {
            float f = 1.0f / powf(theta, (float)(2 * i) / (float)rope_dim);
            float a = (float)pos * f;
            float *v = x + (long)h * head_dim;
            float x0 = v[i], x1 = v[i + half];
            v[i] = x0 * cosf(a) - x1 * sinf(a);
            v[i + half] = x1 * cosf(a) + x0 * sinf(a);
        }
}

// ---------------------------------------------------------------------------------------------
// Attention, threaded over (token, head) pairs.
struct attn_job {
    const float *q, *kc, *vc;
    int T, pos0, Hq, Hkv, D;
    float *out;
};

static void attn_range(void *p, int lo, int hi) {
    struct attn_job *j = p;
    int D = j->D, group = j->Hq / j->Hkv;
    float scale = 1.0f / sqrtf((float)D);
    float *sc = xmalloc((size_t)(j->pos0 + j->T) * sizeof(float));
    for (int it = lo; it < hi; it++) {
        int t = it / j->Hq, h = it % j->Hq, kvh = h / group;
        int n_keys = j->pos0 + t + 1;
        const float *q = j->q + ((long)t * j->Hq + h) * D;
        float mx = -INFINITY;
        for (int s = 0; s < n_keys; s++) {
            sc[s] = cpu_dot(q, j->kc + ((long)s * j->Hkv + kvh) * D, D) * scale;
            if (sc[s] > mx) mx = sc[s];
        }
        float sum = 0.0f;
        for (int s = 0; s < n_keys; s++) {
            sc[s] = expf(sc[s] - mx);
            sum += sc[s];
        }
        float inv = 1.0f / sum;
        float *o = j->out + ((long)t * j->Hq + h) * D;
        memset(o, 0, (size_t)D * sizeof(float));
        for (int s = 0; s < n_keys; s++) {
            const float *v = j->vc + ((long)s * j->Hkv + kvh) * D;
            float p_s = sc[s] * inv;
            for (int d = 0; d < D; d++) o[d] += p_s * v[d];
        }
    }
    free(sc);
}

void cpu_attention(const float *q, const float *kc, const float *vc, int T, int pos0, int Hq,
                   int Hkv, int D, float *out) {
    struct attn_job j = {q, kc, vc, T, pos0, Hq, Hkv, D, out};
    if ((long)T * Hq * (pos0 + T) * D < 32768)
        attn_range(&j, 0, T * Hq);
    else
        cpu_parallel_for(T * Hq, attn_range, &j);
}

void cpu_attention_ref(const float *q, const float *kc, const float *vc, int T, int pos0, int Hq,
                       int Hkv, int D, float *out) {
    float *p = xmalloc((size_t)(pos0 + T) * sizeof(float));
    for (int t = 0; t < T; t++)
        for (int h = 0; h < Hq; h++) {
            int kvh = h / (Hq / Hkv), n_keys = pos0 + t + 1;
            const float *qv = q + ((long)t * Hq + h) * D;
            float mx = -INFINITY, sum = 0.0f;
            for (int s = 0; s < n_keys; s++) {
                float acc = 0.0f;
                for (int d = 0; d < D; d++) acc += qv[d] * kc[((long)s * Hkv + kvh) * D + d];
                p[s] = acc / sqrtf((float)D);
                mx = fmaxf(mx, p[s]);
            }
            for (int s = 0; s < n_keys; s++) sum += (p[s] = expf(p[s] - mx));
            for (int d = 0; d < D; d++) {
                float acc = 0.0f;
                for (int s = 0; s < n_keys; s++) acc += p[s] / sum * vc[((long)s * Hkv + kvh) * D + d];
                out[((long)t * Hq + h) * D + d] = acc;
            }
        }
    free(p);
}

// ---------------------------------------------------------------------------------------------
// MoE routing: softmax over all experts, then top-k by probability, then renormalise (HF order).
void cpu_route(const float *logits, int E, int k, int renorm, int *idx, float *w) {
    float mx = -INFINITY, sum = 0.0f;
    for (int e = 0; e < E; e++) mx = fmaxf(mx, logits[e]);
    for (int e = 0; e < E; e++) sum += expf(logits[e] - mx);
    // Selection by insertion into a sorted list of k: strict '>' keeps the lower index on ties.
    int n = 0;
    for (int e = 0; e < E; e++) {
        float p = expf(logits[e] - mx) / sum;
        int at = n < k ? n : k;
        while (at > 0 && p > w[at - 1]) at--;
        if (at >= k) continue;
        int last = n < k ? n : k - 1;
        for (int i = last; i > at; i--) {
            w[i] = w[i - 1];
            idx[i] = idx[i - 1];
        }
        w[at] = p;
        idx[at] = e;
        if (n < k) n++;
    }
    if (renorm) {
        float s = 0.0f;
        for (int i = 0; i < n; i++) s += w[i];
        for (int i = 0; i < n; i++) w[i] /= s;
    }
}
