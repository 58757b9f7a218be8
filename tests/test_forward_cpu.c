// test_forward_cpu.c: the CPU backend through struct lily_backend on the committed fixtures
// (tests/fixtures/models, run from the repository root): snapshots (save after k tokens, continue,
// restore, continue: identical logits), state reset, the context limit and bad token ids (errors
// that leave the state unchanged), and corrupted snapshots rejected.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "backend.h"
#include "common.h"
#include "loader.h"

struct fx {
    struct lily_model m;
    const struct lily_backend *be;
    void *ctx;
    int ids[128], n, V;
};

static void fx_open(struct fx *f, const char *name) {
    memset(f, 0, sizeof *f);
    char dir[256], path[300];
    snprintf(dir, sizeof dir, "tests/fixtures/models/%s", name);
    int rc = lily_model_load(dir, &f->m);
    if (rc < 0) print_error("%s\n", lily_err_msg());
    assert_int_equal(rc, 0);
    f->be = lily_backend_get("cpu");
    assert_non_null(f->be);
    assert_int_equal(f->be->init(&f->m, &f->ctx), 0);
    f->V = f->m.cfg.vocab_size;
    snprintf(path, sizeof path, "%s/ids.txt", dir);
    char *txt;
    size_t len;
    assert_int_equal(lily_read_file(path, 0, &txt, &len), 0);
    for (char *p = txt; *p && f->n < 128;) {
        f->ids[f->n++] = (int)strtol(p, &p, 10);
        if (*p == ',') p++;
        else break;
    }
    free(txt);
}

static void fx_close(struct fx *f) {
    f->be->free(f->ctx);
    lily_model_free(&f->m);
}

static void check_snapshot(const char *name) {
    struct fx f;
    fx_open(&f, name);
    int n = f.n < 60 ? f.n : 60, k = n / 3;
    size_t V = (size_t)f.V;
    void *st, *st2;
    assert_int_equal(f.be->state_new(f.ctx, n, &st), 0);
    assert_int_equal(f.be->state_new(f.ctx, n, &st2), 0);
    float *a = xmalloc((size_t)n * V * sizeof(float)), *b = xmalloc((size_t)n * V * sizeof(float));

    // Save after k tokens, continue to n.
    assert_int_equal(f.be->forward(f.ctx, st, f.ids, k, NULL, 0), 0);
    assert_int_equal(f.be->state_pos(f.ctx, st), k);
    size_t sz = f.be->state_save_size(f.ctx, st);
    char *snap = xmalloc(sz);
    assert_int_equal(f.be->state_save(f.ctx, st, snap), 0);
    assert_int_equal(f.be->forward(f.ctx, st, f.ids + k, n - k, a, 1), 0);

    // Restore into the same state (now at n) and into a fresh one; continue: the same bits.
    assert_int_equal(f.be->state_load(f.ctx, st, snap, sz), 0);
    assert_int_equal(f.be->state_pos(f.ctx, st), k);
    assert_int_equal(f.be->forward(f.ctx, st, f.ids + k, n - k, b, 1), 0);
    assert_memory_equal(a, b, (n - k) * V * sizeof(float));
    assert_int_equal(f.be->state_load(f.ctx, st2, snap, sz), 0);
    for (int i = k; i < n; i++) // and token by token
        assert_int_equal(f.be->forward(f.ctx, st2, f.ids + i, 1, b + (size_t)(i - k) * V, 1), 0);
    assert_memory_equal(a, b, (n - k) * V * sizeof(float));

    // The prefix cache's handles (snap_save / snap_load): the same bits again, and the same size.
    size_t hb = 0;
    assert_int_equal(f.be->state_load(f.ctx, st, snap, sz), 0);
    void *h = f.be->snap_save(f.ctx, st, &hb);
    assert_non_null(h);
    assert_int_equal(hb, sz);
    assert_int_equal(f.be->forward(f.ctx, st, f.ids + k, 2, NULL, 0), 0);
    assert_int_equal(f.be->snap_load(f.ctx, st2, h), 0);
    assert_int_equal(f.be->state_pos(f.ctx, st2), k);
    assert_int_equal(f.be->forward(f.ctx, st2, f.ids + k, n - k, b, 1), 0);
    assert_memory_equal(a, b, (n - k) * V * sizeof(float));
    f.be->snap_free(f.ctx, h);

    // Corrupted or truncated snapshots are refused and leave the state alone.
    assert_int_equal(f.be->state_load(f.ctx, st2, snap, sz - 4), LILY_EFORMAT);
    assert_int_equal(f.be->state_load(f.ctx, st2, snap, 3), LILY_EFORMAT);
    snap[0] ^= 1;
    assert_int_equal(f.be->state_load(f.ctx, st2, snap, sz), LILY_EFORMAT);
    assert_int_equal(f.be->state_pos(f.ctx, st2), n);

    // Reset, then the whole sequence in one call: the last-token logits equal the chunked run's.
    f.be->state_reset(f.ctx, st);
    assert_int_equal(f.be->state_pos(f.ctx, st), 0);
    float *last = xmalloc(V * sizeof(float));
    assert_int_equal(f.be->forward(f.ctx, st, f.ids, n, last, 0), 0);
    assert_memory_equal(last, a + (size_t)(n - k - 1) * V, V * sizeof(float));

    free(a), free(b), free(snap), free(last);
    f.be->state_free(f.ctx, st);
    f.be->state_free(f.ctx, st2);
    fx_close(&f);
}

static void test_snapshot_gdn_first(void **s) { (void)s; check_snapshot("hf-sharded"); }
static void test_snapshot_attention_first(void **s) { (void)s; check_snapshot("hf-text"); }
static void test_snapshot_quantised(void **s) { (void)s; check_snapshot("mlx-4bit"); }

// Errors leave the state as it was: a call past the context and a bad id change nothing.
static void test_errors_leave_state(void **s) {
    (void)s;
    struct fx f;
    fx_open(&f, "hf-gqa");
    size_t V = (size_t)f.V;
    void *st, *ref;
    assert_int_equal(f.be->state_new(f.ctx, 8, &st), 0);
    assert_int_equal(f.be->state_new(f.ctx, 8, &ref), 0);
    float *a = xmalloc(V * sizeof(float)), *b = xmalloc(V * sizeof(float));
    assert_int_equal(f.be->forward(f.ctx, st, f.ids, 5, NULL, 0), 0);
    assert_int_equal(f.be->forward(f.ctx, st, f.ids, 4, a, 0), LILY_ERANGE); // 5 + 4 > 8
    int bad[2] = {1, f.V};
    assert_int_equal(f.be->forward(f.ctx, st, bad, 2, a, 0), LILY_ERANGE);
    bad[1] = -1;
    assert_int_equal(f.be->forward(f.ctx, st, bad, 2, a, 0), LILY_ERANGE);
    assert_int_equal(f.be->state_pos(f.ctx, st), 5);
    assert_int_equal(f.be->forward(f.ctx, st, f.ids + 5, 3, a, 0), 0);
    assert_int_equal(f.be->forward(f.ctx, ref, f.ids, 8, b, 0), 0);
    assert_memory_equal(a, b, V * sizeof(float));
    assert_int_equal(f.be->forward(f.ctx, st, f.ids, 1, a, 0), LILY_ERANGE); // full
    assert_int_equal(f.be->forward(f.ctx, st, f.ids, 0, a, 0), 0);          // nothing to do
    void *big;
    assert_int_equal(f.be->state_new(f.ctx, 0, &big), LILY_EINVAL);
    // A snapshot longer than the target's context is refused.
    size_t sz = f.be->state_save_size(f.ctx, st);
    char *snap = xmalloc(sz);
    assert_int_equal(f.be->state_save(f.ctx, st, snap), 0);
    void *small;
    assert_int_equal(f.be->state_new(f.ctx, 4, &small), 0);
    assert_int_equal(f.be->state_load(f.ctx, small, snap, sz), LILY_ERANGE);
    free(a), free(b), free(snap);
    f.be->state_free(f.ctx, st);
    f.be->state_free(f.ctx, ref);
    f.be->state_free(f.ctx, small);
    fx_close(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshot_gdn_first),
        cmocka_unit_test(test_snapshot_attention_first),
        cmocka_unit_test(test_snapshot_quantised),
        cmocka_unit_test(test_errors_leave_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
