// test_ops_cpu.c: every op of the CPU backend (src/cpu/ops_cpu.h) against its plain `_ref` loop
// and, where the formula is short, against a naive double-precision version written here from the
// spec. Sizes are deliberately odd. Tolerances: products and reductions of n terms differ from the
// sequential fp32 loop by summation order only, bounded by ~n * 2^-24 * sum|terms|; we allow
// 1e-5 * sum|terms| + 1e-6 (checked per element, first mismatch printed).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common.h"
#include "cpu/ops_cpu.h"
#include "quant.h"

static uint32_t rng_state = 2024;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}
static float rndf(void) { return (float)(rnd() >> 8) / 16777216.0f * 2.0f - 1.0f; }
static float *rnd_vec(size_t n, float scale) {
    float *v = xmalloc(n * sizeof(float) + 4);
    for (size_t i = 0; i < n; i++) v[i] = rndf() * scale;
    return v;
}

// |a - b| <= rel * mag + abs for every element, else print the first mismatch and fail.
static void expect_close(const float *a, const float *b, const float *mag, size_t n, double rel,
                         double abs_tol, const char *what) {
    for (size_t i = 0; i < n; i++) {
        double m = mag ? mag[i] : fabs(b[i]);
        if (!(fabs((double)a[i] - b[i]) <= rel * m + abs_tol)) {
            print_error("%s: element %zu: %.9g vs %.9g (tolerance %.3g)\n", what, i, a[i], b[i],
                        rel * m + abs_tol);
            fail();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Matrices of every format: a dense or quantised [rows, cols] matrix with random values.
struct tmat {
    struct lily_mat m;
    void *w, *s, *b;
};

static void tmat_make(struct tmat *t, int rows, int cols, int dtype, int bits, int group) {
    memset(t, 0, sizeof *t);
    t->m.rows = rows;
    t->m.cols = cols;
    t->m.dtype = dtype;
    float *f = rnd_vec((size_t)rows * cols, 1.0f);
    if (dtype == LILY_DT_F32) {
        t->w = f;
        f = NULL;
    } else if (dtype == LILY_DT_BF16 || dtype == LILY_DT_F16) {
        uint16_t *h = xmalloc((size_t)rows * cols * 2);
        for (long i = 0; i < (long)rows * cols; i++)
            h[i] = dtype == LILY_DT_BF16 ? lily_f32_to_bf16(f[i]) : lily_f32_to_f16(f[i]);
        t->w = h;
    } else {
        t->m.bits = bits;
        t->m.group = group;
        t->m.sdtype = LILY_DT_BF16;
        long rb = lily_q_row_bytes(cols, bits), ng = cols / group;
        t->w = xcalloc((size_t)rows * rb + 2, 1);
        t->s = xmalloc((size_t)rows * ng * 2);
        t->b = xmalloc((size_t)rows * ng * 2);
        for (int r = 0; r < rows; r++)
            lily_quantize_row(f + (long)r * cols, cols, bits, group, (uint8_t *)t->w + r * rb,
                              (uint16_t *)t->s + r * ng, (uint16_t *)t->b + r * ng);
        t->m.scales = t->s;
        t->m.biases = t->b;
    }
    t->m.w = t->w;
    free(f);
}

static void tmat_free(struct tmat *t) { free(t->w), free(t->s), free(t->b); }

static void check_matmul(int rows, int cols, int n, int dtype, int bits, int group) {
    struct tmat t;
    tmat_make(&t, rows, cols, dtype, bits, group);
    float *x = rnd_vec((size_t)n * cols, 1.0f);
    float *y = xmalloc((size_t)n * rows * sizeof(float)), *yr = xmalloc((size_t)n * rows * sizeof(float));
    float *mag = xmalloc((size_t)n * rows * sizeof(float));
    float *row = xmalloc((size_t)cols * sizeof(float)), *row2 = xmalloc((size_t)cols * sizeof(float));
    cpu_matmul(&t.m, x, n, y);
    cpu_matmul_ref(&t.m, x, n, yr);
    for (int tt = 0; tt < n; tt++)
        for (int r = 0; r < rows; r++) {
            double s = 0;
            for (int c = 0; c < cols; c++) s += fabs(lily_mat_get(&t.m, r, c) * x[(long)tt * cols + c]);
            mag[(long)tt * rows + r] = (float)s;
        }
    char what[96];
    snprintf(what, sizeof what, "matmul %dx%d n=%d dtype %d bits %d group %d", rows, cols, n, dtype,
             bits, group);
    expect_close(y, yr, mag, (size_t)n * rows, 1e-5, 1e-6, what);
    // The fast row dequantisation is bit-identical to the reference one.
    for (int r = 0; r < rows; r += 7) {
        cpu_mat_row(&t.m, r, row);
        lily_mat_row(&t.m, r, row2);
        assert_memory_equal(row, row2, (size_t)cols * sizeof(float));
    }
    // And so is lily_mat_vec_ref of quant.c, up to summation order.
    float *yv = xmalloc((size_t)rows * sizeof(float));
    lily_mat_vec_ref(&t.m, x, yv);
    expect_close(y, yv, mag, (size_t)rows, 1e-5, 1e-6, "matmul vs lily_mat_vec_ref");
    free(x), free(y), free(yr), free(yv), free(mag), free(row), free(row2);
    tmat_free(&t);
}

static void test_matmul_formats(void **st) {
    (void)st;
    check_matmul(37, 61, 3, LILY_DT_F32, 0, 0);
    check_matmul(29, 75, 1, LILY_DT_BF16, 0, 0);
    check_matmul(23, 33, 4, LILY_DT_F16, 0, 0);
    int widths[] = {2, 3, 4, 5, 6, 8};
    for (int i = 0; i < 6; i++) {
        check_matmul(19, 64, 2, LILY_DT_Q, widths[i], 32);
        check_matmul(13, 192, 1, LILY_DT_Q, widths[i], 64);
        check_matmul(11, 256, 3, LILY_DT_Q, widths[i], 128);
    }
}

static void test_matmul_threaded(void **st) {
    (void)st;
    // Large enough to go through the pool.
    check_matmul(301, 256, 3, LILY_DT_Q, 4, 64);
    check_matmul(257, 129, 5, LILY_DT_BF16, 0, 0);
    check_matmul(133, 320, 2, LILY_DT_Q, 8, 64);
}

// Each output is one dot product whatever n is: running tokens one at a time gives the same bits.
static void test_matmul_chunk_invariant(void **st) {
    (void)st;
    struct tmat t;
    tmat_make(&t, 200, 192, LILY_DT_Q, 4, 64);
    int n = 7;
    float *x = rnd_vec((size_t)n * 192, 1.0f);
    float *y = xmalloc((size_t)n * 200 * sizeof(float)), *y1 = xmalloc(200 * sizeof(float));
    cpu_matmul(&t.m, x, n, y);
    for (int i = 0; i < n; i++) {
        cpu_matmul(&t.m, x + (long)i * 192, 1, y1);
        assert_memory_equal(y1, y + (long)i * 200, 200 * sizeof(float));
    }
    free(x), free(y), free(y1);
    tmat_free(&t);
}

// ---------------------------------------------------------------------------------------------
static void test_rmsnorm(void **st) {
    (void)st;
    int sizes[] = {1, 7, 33, 129, 1000};
    for (int k = 0; k < 5; k++) {
        int n = sizes[k];
        float *x = rnd_vec((size_t)n, 3.0f), *w = rnd_vec((size_t)n, 2.0f);
        float *a = xmalloc((size_t)n * sizeof(float)), *b = xmalloc((size_t)n * sizeof(float));
        float *c = xmalloc((size_t)n * sizeof(float));
        cpu_rmsnorm(a, x, w, n, 1e-6f);
        cpu_rmsnorm_ref(b, x, w, n, 1e-6f);
        double ss = 0;
        for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
        for (int i = 0; i < n; i++) c[i] = (float)(x[i] / sqrt(ss / n + 1e-6) * w[i]);
        expect_close(a, b, NULL, (size_t)n, 1e-5, 1e-6, "rmsnorm fast vs ref");
        expect_close(b, c, NULL, (size_t)n, 1e-5, 1e-6, "rmsnorm ref vs naive");
        cpu_rmsnorm(a, x, NULL, n, 1e-6f); // no gain, in place
        memcpy(b, x, (size_t)n * sizeof(float));
        cpu_rmsnorm(b, b, NULL, n, 1e-6f);
        assert_memory_equal(a, b, (size_t)n * sizeof(float));
        free(x), free(w), free(a), free(b), free(c);
    }
}

// ---------------------------------------------------------------------------------------------
// RoPE against the spec's formula in double: out[i] = x[i] cos - x[i+h] sin, out[i+h] =
// x[i+h] cos + x[i] sin for i < h = rope_dim/2, angle = pos * theta^(-2i/rope_dim); the rest kept.
static void test_rope(void **st) {
    (void)st;
    int cases[][4] = {{3, 48, 12, 0}, {2, 32, 16, 5}, {4, 16, 16, 77}, {1, 256, 64, 1000}};
    float thetas[] = {10000.0f, 1000.0f, 1e7f, 1e7f};
    for (int k = 0; k < 4; k++) {
        int nh = cases[k][0], D = cases[k][1], R = cases[k][2], pos = cases[k][3];
        float *x = rnd_vec((size_t)nh * D, 1.0f);
        float *a = xmalloc((size_t)nh * D * sizeof(float)), *b = xmalloc((size_t)nh * D * sizeof(float));
        float *c = xmalloc((size_t)nh * D * sizeof(float)), inv[64];
        memcpy(a, x, (size_t)nh * D * sizeof(float));
        memcpy(b, x, (size_t)nh * D * sizeof(float));
        cpu_rope_freqs(inv, R, thetas[k]);
        cpu_rope(a, nh, D, R, inv, pos);
        cpu_rope_ref(b, nh, D, R, thetas[k], pos);
        int h = R / 2;
        for (int hd = 0; hd < nh; hd++) {
            const float *v = x + hd * D;
            float *o = c + hd * D;
            for (int i = 0; i < D; i++) o[i] = v[i];
            for (int i = 0; i < h; i++) {
                double ang = pos * pow((double)thetas[k], -2.0 * i / R);
                o[i] = (float)(v[i] * cos(ang) - v[i + h] * sin(ang));
                o[i + h] = (float)(v[i + h] * cos(ang) + v[i] * sin(ang));
            }
        }
        expect_close(a, b, NULL, (size_t)nh * D, 1e-6, 1e-6, "rope fast vs ref");
        // fp32 angles (as HF computes them) drift from the exact angle by ~pos * 2^-24 rad.
        expect_close(a, c, NULL, (size_t)nh * D, 0, 1e-6 + pos * 2e-7, "rope vs spec formula");
        free(x), free(a), free(b), free(c);
    }
}

// ---------------------------------------------------------------------------------------------
static void check_attention(int T, int pos0, int Hq, int Hkv, int D) {
    int ctx = pos0 + T;
    float *q = rnd_vec((size_t)T * Hq * D, 1.5f);
    float *kc = rnd_vec((size_t)ctx * Hkv * D, 1.5f), *vc = rnd_vec((size_t)ctx * Hkv * D, 1.0f);
    float *a = xmalloc((size_t)T * Hq * D * sizeof(float)), *b = xmalloc((size_t)T * Hq * D * sizeof(float));
    float *c = xmalloc((size_t)T * Hq * D * sizeof(float));
    cpu_attention(q, kc, vc, T, pos0, Hq, Hkv, D, a);
    cpu_attention_ref(q, kc, vc, T, pos0, Hq, Hkv, D, b);
    // Naive double version: causal softmax(q k / sqrt(D)) v, head h reading KV head h / (Hq/Hkv).
    double *p = xmalloc((size_t)ctx * sizeof(double));
    for (int t = 0; t < T; t++)
        for (int h = 0; h < Hq; h++) {
            int kvh = h / (Hq / Hkv);
            double mx = -1e300, sum = 0;
            for (int s = 0; s <= pos0 + t; s++) {
                double d = 0;
                for (int i = 0; i < D; i++)
                    d += (double)q[((long)t * Hq + h) * D + i] * kc[((long)s * Hkv + kvh) * D + i];
                p[s] = d / sqrt((double)D);
                if (p[s] > mx) mx = p[s];
            }
            for (int s = 0; s <= pos0 + t; s++) sum += (p[s] = exp(p[s] - mx));
            for (int i = 0; i < D; i++) {
                double o = 0;
                for (int s = 0; s <= pos0 + t; s++) o += p[s] / sum * vc[((long)s * Hkv + kvh) * D + i];
                c[((long)t * Hq + h) * D + i] = (float)o;
            }
        }
    expect_close(a, b, NULL, (size_t)T * Hq * D, 1e-5, 2e-6, "attention fast vs ref");
    expect_close(b, c, NULL, (size_t)T * Hq * D, 1e-5, 2e-6, "attention ref vs naive");
    free(q), free(kc), free(vc), free(a), free(b), free(c), free(p);
}

static void test_attention(void **st) {
    (void)st;
    check_attention(1, 0, 1, 1, 7);
    check_attention(5, 7, 6, 2, 19);
    check_attention(3, 0, 4, 1, 33);
    check_attention(9, 4, 6, 3, 16);
    check_attention(40, 90, 8, 2, 64); // through the pool
}

// ---------------------------------------------------------------------------------------------
// GDN delta rule against the closed form S_t = g (I - b k k^T) S_{t-1} + b k v^T, o = S_t^T q, in
// double, with v head j using k head j / (Hv/Hk).
static void check_delta(int T, int Hk, int Hv, int Dk, int Dv) {
    size_t ns = (size_t)Hv * Dk * Dv;
    float *S0 = rnd_vec(ns, 0.5f);
    float *q = rnd_vec((size_t)T * Hk * Dk, 0.3f), *k = rnd_vec((size_t)T * Hk * Dk, 0.3f);
    float *v = rnd_vec((size_t)T * Hv * Dv, 1.0f);
    float *g = xmalloc((size_t)T * Hv * sizeof(float)), *b = xmalloc((size_t)T * Hv * sizeof(float));
    for (int i = 0; i < T * Hv; i++) {
        g[i] = 0.5f + 0.5f * (rndf() * 0.5f + 0.5f);
        b[i] = 0.5f + 0.5f * rndf();
    }
    float *Sa = xmalloc(ns * sizeof(float)), *Sb = xmalloc(ns * sizeof(float));
    memcpy(Sa, S0, ns * sizeof(float));
    memcpy(Sb, S0, ns * sizeof(float));
    size_t no = (size_t)T * Hv * Dv;
    float *oa = xmalloc(no * sizeof(float)), *ob = xmalloc(no * sizeof(float)), *oc = xmalloc(no * sizeof(float));
    cpu_gdn_delta(Sa, q, k, v, g, b, T, Hk, Hv, Dk, Dv, oa);
    cpu_gdn_delta_ref(Sb, q, k, v, g, b, T, Hk, Hv, Dk, Dv, ob);
    double *S = xmalloc(ns * sizeof(double)), *N = xmalloc((size_t)Dk * Dv * sizeof(double));
    for (size_t i = 0; i < ns; i++) S[i] = S0[i];
    for (int t = 0; t < T; t++)
        for (int h = 0; h < Hv; h++) {
            int kh = h / (Hv / Hk);
            double *Sh = S + (size_t)h * Dk * Dv;
            const float *kt = k + ((size_t)t * Hk + kh) * Dk, *qt = q + ((size_t)t * Hk + kh) * Dk;
            const float *vt = v + ((size_t)t * Hv + h) * Dv;
            double gg = g[t * Hv + h], bb = b[t * Hv + h];
            for (int d = 0; d < Dk; d++)
                for (int e = 0; e < Dv; e++) {
                    double acc = 0; // ((I - b k k^T) S)[d][e]
                    for (int d2 = 0; d2 < Dk; d2++)
                        acc += ((d == d2) - bb * kt[d] * kt[d2]) * Sh[(size_t)d2 * Dv + e];
                    N[(size_t)d * Dv + e] = gg * acc + bb * kt[d] * vt[e];
                }
            memcpy(Sh, N, (size_t)Dk * Dv * sizeof(double));
            for (int e = 0; e < Dv; e++) {
                double o = 0;
                for (int d = 0; d < Dk; d++) o += Sh[(size_t)d * Dv + e] * qt[d];
                oc[((size_t)t * Hv + h) * Dv + e] = (float)o;
            }
        }
    float *Sc = xmalloc(ns * sizeof(float));
    for (size_t i = 0; i < ns; i++) Sc[i] = (float)S[i];
    expect_close(oa, ob, NULL, no, 1e-4, 1e-5, "gdn delta fast vs ref: outputs");
    expect_close(Sa, Sb, NULL, ns, 1e-4, 1e-5, "gdn delta fast vs ref: state");
    expect_close(ob, oc, NULL, no, 1e-4, 1e-5, "gdn delta ref vs closed form: outputs");
    expect_close(Sb, Sc, NULL, ns, 1e-4, 1e-5, "gdn delta ref vs closed form: state");
    free(S0), free(q), free(k), free(v), free(g), free(b), free(Sa), free(Sb), free(Sc);
    free(oa), free(ob), free(oc), free(S), free(N);
}

static void test_gdn_delta(void **st) {
    (void)st;
    check_delta(1, 1, 1, 5, 3);
    check_delta(9, 3, 6, 13, 11);
    check_delta(4, 2, 2, 16, 24);
    check_delta(6, 2, 8, 32, 33); // through the pool
}

// ---------------------------------------------------------------------------------------------
// Conv: y_t[c] = silu(sum_j w[c][j] u_{t-K+1+j}[c]) with u_{<0} = 0, run in uneven pieces with
// the state carried between them, against the whole-sequence formula.
static void check_conv(int T, int C, int K) {
    float *u = rnd_vec((size_t)T * C, 1.0f), *w = rnd_vec((size_t)C * K, 1.0f);
    float *y = xmalloc((size_t)T * C * sizeof(float)), *yc = xmalloc((size_t)T * C * sizeof(float));
    float *state = xcalloc((size_t)(K > 1 ? K - 1 : 1) * C, sizeof(float));
    int pieces[] = {1, 2, 3, 1, 5, 100};
    for (int done = 0, p = 0; done < T; p++) {
        int n = pieces[p % 6] < T - done ? pieces[p % 6] : T - done;
        cpu_gdn_conv(w, state, u + (long)done * C, n, C, K, y + (long)done * C);
        done += n;
    }
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            double acc = 0;
            for (int j = 0; j < K; j++) {
                int s = t - K + 1 + j;
                if (s >= 0) acc += (double)w[c * K + j] * u[(long)s * C + c];
            }
            yc[(long)t * C + c] = (float)(acc / (1.0 + exp(-acc)));
        }
    expect_close(y, yc, NULL, (size_t)T * C, 1e-5, 1e-6, "gdn conv vs formula");
    // The state ends as the last K-1 raw rows.
    for (int i = 0; i < K - 1 && i < T; i++)
        assert_memory_equal(state + (long)(K - 2 - i) * C, u + (long)(T - 1 - i) * C, (size_t)C * sizeof(float));
    free(u), free(w), free(y), free(yc), free(state);
}

static void test_gdn_conv(void **st) {
    (void)st;
    check_conv(12, 37, 4);
    check_conv(7, 5, 3);
    check_conv(2, 9, 4);
    check_conv(6, 3, 1);
}

// ---------------------------------------------------------------------------------------------
// Routing: softmax over all experts, top-k by probability (ties to the lower index), renormalised.
static void test_route(void **st) {
    (void)st;
    for (int it = 0; it < 200; it++) {
        int E = 1 + (int)(rnd() % 40), k = 1 + (int)(rnd() % E);
        float l[40];
        for (int e = 0; e < E; e++) l[e] = rndf() * 4.0f;
        if (E > 3) l[2] = l[1]; // a tie
        int idx[40], ref[40];
        float w[40];
        cpu_route(l, E, k, 1, idx, w);
        // Naive: repeated argmax over the logits (monotone in the probabilities).
        int used[40] = {0};
        double mx = -1e300, z = 0, zk = 0;
        for (int e = 0; e < E; e++) mx = fmax(mx, l[e]);
        for (int e = 0; e < E; e++) z += exp(l[e] - mx);
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++)
                if (!used[e] && (best < 0 || l[e] > l[best])) best = e;
            used[best] = 1;
            ref[j] = best;
            zk += exp(l[best] - mx) / z;
        }
        assert_memory_equal(idx, ref, (size_t)k * sizeof(int));
        for (int j = 0; j < k; j++) {
            double want = exp(l[ref[j]] - mx) / z / zk;
            assert_true(fabs(w[j] - want) <= 1e-6 + 1e-5 * want);
        }
    }
}

// ---------------------------------------------------------------------------------------------
static void mark(void *arg, int lo, int hi) {
    int *seen = arg;
    for (int i = lo; i < hi; i++) __atomic_add_fetch(&seen[i], 1, __ATOMIC_RELAXED);
}

static void test_parallel_for(void **st) {
    (void)st;
    int ns[] = {1, 2, 3, 17, 1000};
    for (int k = 0; k < 5; k++) {
        int *seen = xcalloc((size_t)ns[k], sizeof(int));
        for (int rep = 0; rep < 20; rep++) cpu_parallel_for(ns[k], mark, seen);
        for (int i = 0; i < ns[k]; i++) assert_int_equal(seen[i], 20);
        free(seen);
    }
    assert_true(cpu_pool_threads() >= 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_formats),   cmocka_unit_test(test_matmul_threaded),
        cmocka_unit_test(test_matmul_chunk_invariant), cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_rope),             cmocka_unit_test(test_attention),
        cmocka_unit_test(test_gdn_delta),        cmocka_unit_test(test_gdn_conv),
        cmocka_unit_test(test_route),            cmocka_unit_test(test_parallel_for),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
