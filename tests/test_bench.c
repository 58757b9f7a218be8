// test_bench.c: unit tests for the bench cost model and input parsing (bench.h). The cost model of
// a model shaped like Qwen3.6-35B-A3B in MLX 4-bit (router and shared gate 8-bit) must reproduce
// the independent hand count in ../shared/spec/perf-model.md: 2.437 B params and 4.87 GFLOP of
// matmuls per token, 1.657 GB + ~0.01 GB of weights, 0.126 GB of GDN state and 20 KiB of KV per
// context token per decode step, 5.33 GFLOP per prompt token at 4K. No weight data is needed:
// the cost model reads only shapes and formats.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bench.h"
#include "common.h"

static struct lily_mat qmat(int rows, int cols, int bits) {
    return (struct lily_mat){.rows = rows, .cols = cols, .dtype = LILY_DT_Q, .bits = bits,
                             .group = 64, .sdtype = LILY_DT_BF16};
}

// 35B-A3B shapes (spec §1.2, §3.3).
static void make_35b(struct lily_model *m) {
    memset(m, 0, sizeof *m);
    struct lily_config *c = &m->cfg;
    c->vocab_size = 248320;
    c->hidden = 2048;
    c->n_layers = 40;
    c->n_heads = 16;
    c->n_kv_heads = 2;
    c->head_dim = 256;
    c->lin_k_heads = 16;
    c->lin_v_heads = 32;
    c->lin_k_dim = 128;
    c->lin_v_dim = 128;
    c->conv_kernel = 4;
    c->n_experts = 256;
    c->n_experts_tok = 8;
    c->moe_inter = 512;
    c->shared_inter = 512;
    const int H = 2048, E = 256, I = 512;
    struct lily_layer *L = xcalloc(40, sizeof *L);
    for (int l = 0; l < 40; l++) {
        L[l].full = c->layer_full[l] = (l + 1) % 4 == 0;
        if (L[l].full) {
            L[l].q = qmat(8192, H, 4);
            L[l].k = qmat(512, H, 4);
            L[l].v = qmat(512, H, 4);
            L[l].o = qmat(H, 4096, 4);
        } else {
            L[l].qkv = qmat(8192, H, 4);
            L[l].z = qmat(4096, H, 4);
            L[l].b = qmat(32, H, 4);
            L[l].a = qmat(32, H, 4);
            L[l].out = qmat(H, 4096, 4);
        }
        L[l].router = qmat(E, H, 8);
        L[l].gate = xcalloc(E, sizeof(struct lily_mat));
        L[l].up = xcalloc(E, sizeof(struct lily_mat));
        L[l].down = xcalloc(E, sizeof(struct lily_mat));
        for (int e = 0; e < E; e++) {
            L[l].gate[e] = qmat(I, H, 4);
            L[l].up[e] = qmat(I, H, 4);
            L[l].down[e] = qmat(H, I, 4);
        }
        L[l].sh_gate = qmat(512, H, 4);
        L[l].sh_up = qmat(512, H, 4);
        L[l].sh_down = qmat(H, 512, 4);
        L[l].sh_score = qmat(1, H, 8);
    }
    m->w.layers = L;
    m->w.embed = qmat(248320, H, 4);
    m->w.lm_head = qmat(248320, H, 4);
}

static void free_35b(struct lily_model *m) {
    for (int l = 0; l < 40; l++) {
        free(m->w.layers[l].gate);
        free(m->w.layers[l].up);
        free(m->w.layers[l].down);
    }
    free(m->w.layers);
}

static void near(double got, double want, double rel) {
    if (fabs(got - want) > rel * fabs(want)) {
        fprintf(stderr, "got %.6g, want %.6g (+- %.2g%%)\n", got, want, 100 * rel);
        fail();
    }
}

static void test_cost_35b_matches_perf_model(void **st) {
    (void)st;
    struct lily_model m;
    make_35b(&m);
    struct bench_cost c;
    bench_cost_init(&m, &c);
    near(c.active_params, 2.437e9, 0.001);
    near(2 * c.active_params, 4.87e9, 0.002);
    near(c.weight_bytes, 1.657e9 + 0.01e9, 0.005);
    near(c.state_bytes, 0.126e9, 0.002);
    near(c.kv_bytes_ctx, 20480, 0);
    near(c.attn_flops_ctx / 2, 81920, 0);
    // perf-model.md decode table: GB per token at 256, 4K, 128K context (its weights exclude the
    // 8-bit router's extra 0.01 GB).
    near(bench_decode_bytes(&c, 256) - 0.01e9, 1.79e9, 0.005);
    near(bench_decode_bytes(&c, 4096) - 0.01e9, 1.87e9, 0.005);
    near(bench_decode_bytes(&c, 131072) - 0.01e9, 4.47e9, 0.005);
    // Prefill table: GFLOP per token at 256, 4K, 32K, 128K.
    near(bench_prefill_flops(&c, 256), 5.02e9, 0.005);
    near(bench_prefill_flops(&c, 4096), 5.33e9, 0.005);
    near(bench_prefill_flops(&c, 32768), 7.68e9, 0.005);
    near(bench_prefill_flops(&c, 131072), 15.74e9, 0.005);
    free_35b(&m);
}

static void test_parse_lengths(void **st) {
    (void)st;
    int v[BENCH_MAX_POINTS];
    assert_int_equal(bench_parse_lengths("256,512,1K,128k", v, BENCH_MAX_POINTS), 4);
    assert_int_equal(v[0], 256);
    assert_int_equal(v[2], 1024);
    assert_int_equal(v[3], 131072);
    assert_int_equal(bench_parse_lengths("none", v, BENCH_MAX_POINTS), 0);
    assert_int_equal(bench_parse_lengths("12", v, BENCH_MAX_POINTS), 1);
    const char *bad[] = {"", "0", "-4", "1,,2", "1K2", "abc", "1,2,", "99999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(bench_parse_lengths(bad[i], v, BENCH_MAX_POINTS), -1);
    assert_int_equal(bench_parse_lengths("1,2,3", v, 2), -1);
}

static int read_ids_text(const char *text, int vocab, int **ids, int *n) {
    char path[] = "/tmp/lily_test_ids_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    int rc = ppl_read_ids(path, vocab, ids, n);
    remove(path);
    return rc;
}

static void test_read_ids(void **st) {
    (void)st;
    int *ids, n;
    assert_int_equal(read_ids_text("1, 2,3\n 4\t5 ,\r\n", 10, &ids, &n), 0);
    assert_int_equal(n, 5);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[4], 5);
    free(ids);
    assert_int_equal(read_ids_text("1 2 10", 10, &ids, &n), LILY_ERANGE);
    assert_non_null(strstr(lily_err_msg(), "outside the vocabulary"));
    assert_int_equal(read_ids_text("1 -2", 10, &ids, &n), LILY_ERANGE);
    assert_int_equal(read_ids_text("1 2x", 10, &ids, &n), LILY_EFORMAT);
    assert_int_equal(read_ids_text("1;2", 10, &ids, &n), LILY_EFORMAT);
    assert_int_equal(read_ids_text(" \n", 10, &ids, &n), LILY_EFORMAT);
    assert_int_equal(read_ids_text("99999999999999999999", 10, &ids, &n), LILY_ERANGE);
    assert_int_equal(ppl_read_ids("/nonexistent/ids.txt", 10, &ids, &n), LILY_EIO);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cost_35b_matches_perf_model),
        cmocka_unit_test(test_parse_lengths),
        cmocka_unit_test(test_read_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
