// test_loader.c: the checkpoint loader against independent numpy references. The checkpoints come
// from tools/make_test_checkpoints.py (run here with $LILY_PY): every layout (HF multimodal, plain
// HF text, MLX), fused / per-expert / switch_mlp experts, dense bf16/f16/f32 and MLX affine weights
// at every bits x group, sharded and single-file. Each writes expect/manifest.json and the values
// every matrix and vector must read (numpy dequantisation from the integer codes, norms +1 or not).
// The second half mutates copies of those checkpoints into bad input and checks each one-line error.
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "common.h"
#include "loader.h"
#include "quantize.h"
#include "synth.h"

static char tmp[256];

static int sh(const char *fmt, ...) {
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return system(cmd);
}

static int setup(void **st) {
    (void)st;
    snprintf(tmp, sizeof tmp, "/tmp/lily-test-loader-XXXXXX");
    if (!mkdtemp(tmp)) return -1;
    const char *py = getenv("LILY_PY");
    if (!py) py = "python3";
    if (sh("%s tools/make_test_checkpoints.py --out %s", py, tmp)) {
        fprintf(stderr, "test_loader: tools/make_test_checkpoints.py failed (needs numpy; set LILY_PY)\n");
        return -1;
    }
    return 0;
}

static int teardown(void **st) {
    (void)st;
    if (getenv("LILY_KEEP_TMP")) return 0;
    return sh("rm -rf %s", tmp);
}

// ---------------------------------------------------------------------------------------------
// Values against the manifest.

static const struct lily_mat *find_mat(const struct lily_model *m, const char *f) {
    if (!strcmp(f, "embed")) return &m->w.embed;
    if (!strcmp(f, "lm_head")) return &m->w.lm_head;
    int L, e, n;
    char what[32];
    if (sscanf(f, "layers.%d.%31[a-z_].%d%n", &L, what, &e, &n) == 3 && !f[n]) {
        struct lily_layer *l = &m->w.layers[L];
        if (!strcmp(what, "gate")) return &l->gate[e];
        if (!strcmp(what, "up")) return &l->up[e];
        if (!strcmp(what, "down")) return &l->down[e];
        return NULL;
    }
    if (sscanf(f, "layers.%d.%31[a-z_]%n", &L, what, &n) == 2 && !f[n]) {
        struct lily_layer *l = &m->w.layers[L];
        struct { const char *n; struct lily_mat *m; } t[] = {
            {"qkv", &l->qkv}, {"z", &l->z}, {"b", &l->b}, {"a", &l->a}, {"out", &l->out},
            {"q", &l->q}, {"k", &l->k}, {"v", &l->v}, {"o", &l->o}, {"router", &l->router},
            {"sh_gate", &l->sh_gate}, {"sh_up", &l->sh_up}, {"sh_down", &l->sh_down},
            {"sh_score", &l->sh_score}};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
            if (!strcmp(what, t[i].n)) return t[i].m;
    }
    return NULL;
}

static const float *find_vec(const struct lily_model *m, const char *f) {
    if (!strcmp(f, "final_norm")) return m->w.final_norm;
    int L, n;
    char what[32];
    if (sscanf(f, "layers.%d.%31[a-z_A]%n", &L, what, &n) == 2 && !f[n]) {
        struct lily_layer *l = &m->w.layers[L];
        struct { const char *n; const float *v; } t[] = {
            {"in_norm", l->in_norm}, {"post_norm", l->post_norm}, {"conv", l->conv},
            {"dt_bias", l->dt_bias}, {"A", l->A}, {"gnorm", l->gnorm}, {"q_norm", l->q_norm},
            {"k_norm", l->k_norm}};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
            if (!strcmp(what, t[i].n)) return t[i].v;
    }
    return NULL;
}

static float *read_f32(const char *dir, const char *file, size_t n) {
    char *p = lily_path_join(dir, file), *buf;
    size_t len;
    assert_int_equal(lily_read_file(p, 0, &buf, &len), 0);
    free(p);
    assert_int_equal(len, n * sizeof(float));
    return (float *)buf;
}

static int close_enough(float a, float b) { return fabsf(a - b) <= 1e-6f + 1e-6f * fabsf(b); }

static void check_checkpoint(const char *name) {
    char dir[512], edir[600];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    snprintf(edir, sizeof edir, "%s/expect", dir);
    struct lily_model m;
    int rc = lily_model_load(dir, &m);
    if (rc) fprintf(stderr, "%s: %s\n", name, lily_err_msg());
    assert_int_equal(rc, 0);
    char *mp = lily_path_join(edir, "manifest.json");
    json_t *man = json_load_file(mp, 0, NULL);
    free(mp);
    assert_non_null(man);
    assert_int_equal(m.layout, json_integer_value(json_object_get(man, "layout")));
    assert_int_equal(m.n_tensors, json_integer_value(json_object_get(man, "n_tensors")));
    assert_int_equal(m.cfg.rope_dim, json_integer_value(json_object_get(man, "rope_dim")));
    assert_true(m.cfg.rope_theta == (float)json_number_value(json_object_get(man, "rope_theta")));
    json_t *eos = json_object_get(man, "eos");
    assert_int_equal(m.cfg.n_eos, json_array_size(eos));
    for (int i = 0; i < m.cfg.n_eos; i++)
        assert_int_equal(m.cfg.eos_ids[i], json_integer_value(json_array_get(eos, (size_t)i)));
    if (json_object_get(man, "tied")) assert_ptr_equal(m.w.lm_head.w, m.w.embed.w);
    size_t k;
    json_t *e;
    long n_vals = 0;
    json_array_foreach(json_object_get(man, "mats"), k, e) {
        const char *f = json_string_value(json_object_get(e, "field"));
        const struct lily_mat *mat = find_mat(&m, f);
        if (!mat) fail_msg("%s: no matrix for field %s", name, f);
        json_t *shp = json_object_get(e, "shape");
        long R = (long)json_integer_value(json_array_get(shp, 0)), C = (long)json_integer_value(json_array_get(shp, 1));
        assert_int_equal(mat->rows, R);
        assert_int_equal(mat->cols, C);
        float *want = read_f32(edir, json_string_value(json_object_get(e, "file")) + 7, (size_t)(R * C));
        float *row = malloc((size_t)C * sizeof(float));
        for (long r = 0; r < R; r++) {
            lily_mat_row(mat, r, row);
            for (long c = 0; c < C; c++) {
                float g = lily_mat_get(mat, r, c), w = want[r * C + c];
                if (!close_enough(g, w) || !close_enough(row[c], w))
                    fail_msg("%s %s[%ld,%ld]: got %g (row %g), want %g (dtype %d bits %d group %d)", name, f,
                             r, c, g, row[c], w, mat->dtype, mat->bits, mat->group);
            }
        }
        n_vals += R * C;
        free(row);
        free(want);
    }
    json_array_foreach(json_object_get(man, "vecs"), k, e) {
        const char *f = json_string_value(json_object_get(e, "field"));
        const float *v = find_vec(&m, f);
        if (!v) fail_msg("%s: no vector for field %s", name, f);
        size_t n = (size_t)json_integer_value(json_array_get(json_object_get(e, "shape"), 0));
        float *want = read_f32(edir, json_string_value(json_object_get(e, "file")) + 7, n);
        for (size_t i = 0; i < n; i++)
            if (!close_enough(v[i], want[i]))
                fail_msg("%s %s[%zu]: got %g, want %g", name, f, i, v[i], want[i]);
        free(want);
    }
    assert_true(n_vals > 1000);
    json_decref(man);
    lily_model_free(&m);
}

static void test_hf_fused(void **st) { (void)st; check_checkpoint("hf_fused"); }
static void test_hf_text_sharded(void **st) { (void)st; check_checkpoint("hf_text"); }
static void test_mlx_overrides(void **st) { (void)st; check_checkpoint("mlx_q"); }
static void test_mlx_inferred_bits(void **st) { (void)st; check_checkpoint("mlx_infer"); }
static void test_tied(void **st) { (void)st; check_checkpoint("tied"); }
static void test_hf_qdims(void **st) { (void)st; check_checkpoint("hf_qdims"); }

// Every element of the quantised matrix lies within its group's quantisation error of the source:
// half a step, plus the bf16 rounding of the scale (over up to 2^bits - 1 steps) and of the bias.
static void check_quantised(const struct lily_mat *src, const struct lily_mat *q, int bits, int group) {
    assert_int_equal(q->dtype, LILY_DT_Q);
    assert_int_equal(q->bits, bits);
    assert_int_equal(q->group, group);
    assert_int_equal(q->rows, src->rows);
    assert_int_equal(q->cols, src->cols);
    for (long r = 0; r < src->rows; r++)
        for (long g = 0; g < src->cols / group; g++) {
            float mn = INFINITY, mx = -INFINITY;
            for (long c = g * group; c < (g + 1) * group; c++) {
                float v = lily_mat_get(src, r, c);
                mn = fminf(mn, v), mx = fmaxf(mx, v);
            }
            float step = (mx - mn) / (float)((1 << bits) - 1);
            float tol = 0.5f * step + (mx - mn) / 256.0f + fabsf(mn) / 256.0f + 1e-6f;
            for (long c = g * group; c < (g + 1) * group; c++) {
                float a = lily_mat_get(src, r, c), b = lily_mat_get(q, r, c);
                if (fabsf(a - b) > tol) fail_msg("[%ld,%ld]: %g vs %g (tol %g)", r, c, a, b, tol);
            }
        }
}

static void test_quantize(void **st) {
    (void)st;
    char in[512], out[512];
    snprintf(in, sizeof in, "%s/hf_qdims", tmp);
    snprintf(out, sizeof out, "%s/quantized", tmp);
    int rc = quantize_model(in, out, 4, 64, 2);
    if (rc) fail_msg("%s", lily_err_msg());
    struct lily_model a, b;
    assert_int_equal(lily_model_load(in, &a), 0);
    rc = lily_model_load(out, &b);
    if (rc) fail_msg("%s", lily_err_msg());
    assert_int_equal(b.layout, LILY_LAYOUT_MLX);
    assert_int_equal(b.n_tensors, 182); // the tensor set of the MLX checkpoint mlx_q (same dims)
    const struct lily_config *c = &a.cfg;
    check_quantised(&a.w.embed, &b.w.embed, 4, 64);
    check_quantised(&a.w.lm_head, &b.w.lm_head, 4, 64);
    for (int i = 0; i < c->n_layers; i++) {
        struct lily_layer *x = &a.w.layers[i], *y = &b.w.layers[i];
        check_quantised(&x->router, &y->router, 8, 64);
        check_quantised(&x->sh_score, &y->sh_score, 8, 64);
        check_quantised(&x->sh_down, &y->sh_down, 4, 64);
        for (int e = 0; e < c->n_experts; e++) {
            check_quantised(&x->gate[e], &y->gate[e], 4, 64);
            check_quantised(&x->up[e], &y->up[e], 4, 64);
            check_quantised(&x->down[e], &y->down[e], 4, 64);
        }
        // Norms: the quantised checkpoint stores 1 + w (conv [C, K, 1]) and loads unshifted.
        for (int h = 0; h < c->hidden; h++) assert_true(x->in_norm[h] == y->in_norm[h]);
        if (!x->full) {
            check_quantised(&x->qkv, &y->qkv, 4, 64);
            check_quantised(&x->out, &y->out, 4, 64);
            for (long k = 0; k < (long)lily_conv_dim(c) * c->conv_kernel; k++)
                assert_true(x->conv[k] == y->conv[k]);
            for (int h = 0; h < c->lin_v_heads; h++)
                assert_true(fabsf(x->A[h] - y->A[h]) <= 1e-6f * fabsf(x->A[h]));
        } else {
            check_quantised(&x->q, &y->q, 4, 64);
            check_quantised(&x->o, &y->o, 4, 64);
            for (int h = 0; h < c->head_dim; h++) assert_true(x->q_norm[h] == y->q_norm[h]);
        }
    }
    lily_model_free(&a);
    lily_model_free(&b);
}

// The synthetic checkpoint loads, and its weights have mean ~0 and std ~1/sqrt(fan_in) (0.1/sqrt(fan_in)
// for the projections into the residual stream: out_proj, o_proj, down_proj; src/synth.c).
static double row_std(const struct lily_mat *m, double *mean) {
    double s = 0, s2 = 0;
    long n = 0;
    for (long r = 0; r < m->rows; r++)
        for (long c = 0; c < m->cols; c++, n++) {
            double v = lily_mat_get(m, r, c);
            s += v, s2 += v * v;
        }
    *mean = s / n;
    return sqrt(s2 / n - *mean * *mean);
}

static void test_synth_tiny(void **st) {
    (void)st;
    char out[512];
    snprintf(out, sizeof out, "%s/synth", tmp);
    struct synth_opts o = {.preset = "tiny", .out = out, .seed = 7, .vocab = 300, .threads = 2};
    assert_int_equal(synth_write(&o), 0);
    struct lily_model m;
    int rc = lily_model_load(out, &m);
    if (rc) fail_msg("%s", lily_err_msg());
    assert_int_equal(m.layout, LILY_LAYOUT_MLX);
    assert_int_equal(m.cfg.vocab_size, 300);
    assert_int_equal(m.w.layers[0].router.bits, 8);
    assert_int_equal(m.w.layers[0].qkv.bits, 4);
    const struct lily_mat *ms[] = {&m.w.layers[0].qkv, &m.w.layers[0].out, &m.w.layers[3].q,
                                   &m.w.layers[1].down[3], &m.w.layers[2].router, &m.w.lm_head};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
        double resid = i == 1 || i == 3 ? 0.1 : 1.0; // out_proj, an expert's down_proj
        double mean, sd = row_std(ms[i], &mean), want = resid / sqrt(ms[i]->cols);
        if (fabs(mean) > 0.2 * want || sd < 0.7 * want || sd > 1.3 * want)
            fail_msg("matrix %zu: mean %g std %g, want ~0 and %g", i, mean, sd, want);
    }
    for (int h = 0; h < m.cfg.lin_v_heads; h++) // decays exp(A * softplus(.)) in (0, 1)
        assert_true(m.w.layers[0].A[h] < 0 && m.w.layers[0].A[h] > -2.5f);
    lily_model_free(&m);
}

// ---------------------------------------------------------------------------------------------
// Bad input: each case works on a fresh copy of a good checkpoint.

static char bad[600];

static void copy_of(const char *name) {
    snprintf(bad, sizeof bad, "%s/bad", tmp);
    assert_int_equal(sh("rm -rf %s && cp -r %s/%s %s && rm -rf %s/expect", bad, tmp, name, bad, bad), 0);
}

static char *slurp(const char *file, size_t *len) {
    char *p = lily_path_join(bad, file), *buf;
    assert_int_equal(lily_read_file(p, 0, &buf, len), 0);
    free(p);
    return buf;
}

static void spit(const char *file, const char *buf, size_t len) {
    char *p = lily_path_join(bad, file);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    fclose(f);
    free(p);
}

// Replace the first occurrence of `from` by `to` in a file (the lengths may differ: only for
// JSON files; safetensors headers get same-length edits).
static void edit(const char *file, const char *from, const char *to) {
    size_t len;
    char *buf = slurp(file, &len);
    char *hit = memmem(buf, len, from, strlen(from));
    if (!hit) fail_msg("edit: '%s' not in %s", from, file);
    size_t a = (size_t)(hit - buf), fl = strlen(from), tl = strlen(to);
    char *out = malloc(len - fl + tl);
    memcpy(out, buf, a);
    memcpy(out + a, to, tl);
    memcpy(out + a + tl, hit + fl, len - a - fl);
    spit(file, out, len - fl + tl);
    free(out);
    free(buf);
}

static void expect_fail(int code, const char *s1, const char *s2) {
    struct lily_model m;
    int rc = lily_model_load(bad, &m);
    const char *msg = lily_err_msg();
    if (rc != code || !strstr(msg, s1) || (s2 && !strstr(msg, s2)))
        fail_msg("want %d with '%s' / '%s'; got %d: %s", code, s1, s2 ? s2 : "", rc, msg);
    assert_null(strchr(msg, '\n'));
    assert_null(m.priv);
    lily_model_free(&m); // safe on an empty model
}

static void test_bad_dirs(void **st) {
    (void)st;
    snprintf(bad, sizeof bad, "%s/nonexistent", tmp);
    expect_fail(LILY_EIO, "nonexistent", "not a model directory");
    snprintf(bad, sizeof bad, "%s/empty", tmp);
    assert_int_equal(sh("mkdir -p %s", bad), 0);
    expect_fail(LILY_EMISSING, "empty", "no config.json");
    copy_of("hf_fused");
    assert_int_equal(sh("rm %s/model.safetensors", bad), 0);
    expect_fail(LILY_EMISSING, "bad", "no model here");
}

static void test_bad_config(void **st) {
    (void)st;
    copy_of("hf_fused");
    edit("config.json", "{", "{{");
    expect_fail(LILY_EFORMAT, "config.json", "not valid JSON");
    copy_of("hf_fused");
    edit("config.json", "\"hidden_size\": 45", "\"hidden_size\": \"45\"");
    expect_fail(LILY_EFORMAT, "config.json", "hidden_size");
    copy_of("hf_fused");
    edit("config.json", "\"hidden_size\": 45", "\"hidden_size\": -45");
    expect_fail(LILY_ERANGE, "config.json", "hidden_size");
    copy_of("hf_fused"); // a config that disagrees with the tensors
    edit("config.json", "\"hidden_size\": 45", "\"hidden_size\": 46");
    expect_fail(LILY_ESHAPE, "model.safetensors", "embed_tokens");
    copy_of("hf_fused");
    edit("config.json", "\"num_experts\": 5", "\"num_experts\": 6");
    expect_fail(LILY_ESHAPE, "model.safetensors", "gate");
    copy_of("hf_fused");
    edit("config.json", "\"linear_attention\"", "\"sliding\"");
    expect_fail(LILY_EFORMAT, "config.json", "layer_types");
    copy_of("hf_fused"); // layer pattern that asks for attention weights a GDN layer lacks
    edit("config.json", "\"linear_attention\"", "\"full_attention\"");
    expect_fail(LILY_EMISSING, "bad", "q_proj"); // message names the directory
    copy_of("mlx_q"); // quantization block that disagrees with the packed shapes
    edit("config.json", "\"bits\": 4", "\"bits\": 3");
    expect_fail(LILY_ESHAPE, "safetensors", "disagree");
    copy_of("mlx_q");
    edit("config.json", "\"mode\": \"affine\"", "\"mode\": \"mxfp4\"");
    expect_fail(LILY_EUNSUPPORTED, "bad", "affine");
}

static void test_bad_safetensors(void **st) {
    (void)st;
    size_t len;
    copy_of("hf_fused"); // truncated: the last tensor runs past the end
    char *buf = slurp("model.safetensors", &len);
    spit("model.safetensors", buf, len - 10);
    expect_fail(LILY_EFORMAT, "model.safetensors", "past the data");
    spit("model.safetensors", buf, 5);
    expect_fail(LILY_EFORMAT, "model.safetensors", "too short");
    char *c = malloc(len);
    memcpy(c, buf, len);
    c[5] = 0x7f; // header length far past the end of the file
    spit("model.safetensors", c, len);
    expect_fail(LILY_EFORMAT, "model.safetensors", "exceeds 100 MB");
    memcpy(c, buf, len);
    uint64_t n = len; // just past the end
    for (int i = 0; i < 8; i++) c[i] = (char)(n >> (8 * i));
    spit("model.safetensors", c, len);
    expect_fail(LILY_EFORMAT, "model.safetensors", "past end of file");
    memcpy(c, buf, len);
    c[8] = '[';
    spit("model.safetensors", c, len);
    expect_fail(LILY_EFORMAT, "model.safetensors", "'{'");
    memcpy(c, buf, len);
    c[20] = (char)0xff;
    spit("model.safetensors", c, len);
    expect_fail(LILY_EFORMAT, "model.safetensors", "UTF-8");
    free(c);
    free(buf);
    copy_of("hf_fused"); // a tensor renamed: the model misses it
    edit("model.safetensors", "layers.1.input_layernorm", "layers.1.input_layernorX");
    expect_fail(LILY_EMISSING, "bad", "layers.1.input_layernorm.weight");
    copy_of("hf_fused"); // a tensor under two names (duplicate JSON key)
    edit("model.safetensors", "layers.1.input_layernorm", "layers.2.input_layernorm");
    expect_fail(LILY_EFORMAT, "model.safetensors", "JSON");
    copy_of("hf_fused"); // same element size, wrong kind of dtype
    edit("model.safetensors", "\"F32\"", "\"I32\"");
    expect_fail(LILY_ESHAPE, "model.safetensors", "dtype I32");
    copy_of("hf_fused"); // unknown dtype
    edit("model.safetensors", "\"BF16\"", "\"XF16\"");
    expect_fail(LILY_EFORMAT, "model.safetensors", "unknown dtype");
    copy_of("mlx_q");
    edit("model-00001-of-00002.safetensors", "\"U32\"", "\"I32\"");
    expect_fail(LILY_ESHAPE, "model-00001-of-00002.safetensors", "expected U32");
}

static void test_bad_index(void **st) {
    (void)st;
    copy_of("hf_text");
    edit("model.safetensors.index.json", "\"model-00002-of-00003.safetensors\"", "\"../model-00002-of-00003.safetensors\"");
    expect_fail(LILY_EFORMAT, "index.json", "bad shard path");
    copy_of("hf_text");
    edit("model.safetensors.index.json", "\"model-00002-of-00003.safetensors\"", "\"/etc/passwd\"");
    expect_fail(LILY_EFORMAT, "index.json", "bad shard path");
    copy_of("hf_text");
    assert_int_equal(sh("rm %s/model-00003-of-00003.safetensors", bad), 0);
    expect_fail(LILY_EIO, "model-00003-of-00003.safetensors", "cannot open");
    copy_of("hf_text"); // a tensor listed in the wrong shard
    edit("model.safetensors.index.json", "\"model-00003-of-00003.safetensors\"", "\"model-00001-of-00003.safetensors\"");
    expect_fail(LILY_EMISSING, "index.json", "is not in");
    copy_of("hf_text");
    edit("model.safetensors.index.json", "weight_map", "weight_mop");
    expect_fail(LILY_EFORMAT, "index.json", "weight_map");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hf_fused),       cmocka_unit_test(test_hf_text_sharded),
        cmocka_unit_test(test_mlx_overrides),  cmocka_unit_test(test_mlx_inferred_bits),
        cmocka_unit_test(test_tied),           cmocka_unit_test(test_hf_qdims),
        cmocka_unit_test(test_quantize),       cmocka_unit_test(test_synth_tiny),
        cmocka_unit_test(test_bad_dirs),
        cmocka_unit_test(test_bad_config),     cmocka_unit_test(test_bad_safetensors),
        cmocka_unit_test(test_bad_index),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
