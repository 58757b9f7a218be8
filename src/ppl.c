// ppl.c: `lily ppl`, teacher-forced evaluation over a token file. Runs the ids through the backend
// in chunks with all logits, and reports the perplexity of each next token. With --ref-logits
// (float32 [n, V], as `lily logits` and tools/hf_ref_logits.py write) it also reports, per
// position and in total, whether the top-1 token agrees with the reference, the absolute logit
// error and the KL divergence from the reference distribution: the check that a fast path did
// not change the model's answers.
//
//   lily ppl --model DIR --tokens ids.txt [--ref-logits ref.f32] [--json out.json]
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"
#include "bench.h"
#include "common.h"
#include "loader.h"

// ---------------------------------------------------------------------------------------------
// Token file.

int ppl_read_ids(const char *path, int vocab, int **ids, int *n) {
    *ids = NULL;
    *n = 0;
    char *text;
    size_t len;
    int rc = lily_read_file(path, (size_t)1 << 30, &text, &len);
    if (rc < 0) return rc;
    int *v, cnt;
    rc = lily_parse_ids(text, 0, &v, &cnt);
    free(text);
    if (rc) return lily_err_set(rc == LILY_ERANGE ? LILY_ERANGE : LILY_EFORMAT, "%s: %s", path,
                                lily_err_msg());
    for (int i = 0; i < cnt; i++)
        if (v[i] < 0 || v[i] >= vocab) {
            rc = lily_err_set(LILY_ERANGE, "%s: token id %d at index %d is outside the vocabulary "
                              "[0, %d)", path, v[i], i, vocab);
            free(v);
            return rc;
        }
    *ids = v;
    *n = cnt;
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Per-row statistics.

struct row_stat {
    int top1, ref_top1;
    double nll;      // -log p(next token); NAN at the last position
    double ref_nll;  // the same under the reference logits
    double max_err, mean_err, kl;
};

static double log_sum_exp(const float *x, int n, int *argmax) {
    int am = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[am]) am = i;
    double mx = x[am], s = 0;
    for (int i = 0; i < n; i++) s += exp((double)x[i] - mx);
    if (argmax) *argmax = am;
    return mx + log(s);
}

static void row_compare(const float *y, const float *ref, int V, double lse, struct row_stat *r) {
    double rlse = log_sum_exp(ref, V, &r->ref_top1);
    double mx = 0, sum = 0, kl = 0;
    for (int i = 0; i < V; i++) {
        double d = fabs((double)y[i] - ref[i]);
        if (d > mx || isnan(d)) mx = d;
        sum += d;
        double lr = ref[i] - rlse, ly = y[i] - lse;
        kl += exp(lr) * (lr - ly);
    }
    r->max_err = mx;
    r->mean_err = sum / V;
    r->kl = kl;
}

// ---------------------------------------------------------------------------------------------
// Output.

static json_t *jnum(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static int write_json(const char *path, const struct ppl_opts *o, const int *ids, int n, int V,
                      const struct row_stat *rs, double ppl, double mean_nll, double ref_ppl,
                      int agree, double max_err, double mean_err, double mean_kl) {
    json_t *root = json_object(), *pos = json_array();
    json_object_set_new(root, "model", json_string(o->model));
    json_object_set_new(root, "backend", json_string(o->backend));
    json_object_set_new(root, "tokens", json_integer(n));
    json_object_set_new(root, "vocab_size", json_integer(V));
    json_object_set_new(root, "predictions", json_integer(n - 1));
    json_object_set_new(root, "ppl", jnum(ppl));
    json_object_set_new(root, "mean_nll", jnum(mean_nll));
    if (o->ref_logits) {
        json_t *ref = json_object();
        json_object_set_new(ref, "file", json_string(o->ref_logits));
        json_object_set_new(ref, "ppl", jnum(ref_ppl));
        json_object_set_new(ref, "top1_agree", json_integer(agree));
        json_object_set_new(ref, "top1_agreement", jnum((double)agree / n));
        json_object_set_new(ref, "max_abs_err", jnum(max_err));
        json_object_set_new(ref, "mean_abs_err", jnum(mean_err));
        json_object_set_new(ref, "mean_kl", jnum(mean_kl));
        json_object_set_new(root, "ref", ref);
    }
    for (int i = 0; i < n; i++) {
        json_t *p = json_object();
        json_object_set_new(p, "pos", json_integer(i));
        json_object_set_new(p, "id", json_integer(ids[i]));
        json_object_set_new(p, "nll", jnum(rs[i].nll));
        json_object_set_new(p, "top1", json_integer(rs[i].top1));
        if (o->ref_logits) {
            json_object_set_new(p, "ref_top1", json_integer(rs[i].ref_top1));
            json_object_set_new(p, "agree", json_boolean(rs[i].top1 == rs[i].ref_top1));
            json_object_set_new(p, "max_abs_err", jnum(rs[i].max_err));
            json_object_set_new(p, "mean_abs_err", jnum(rs[i].mean_err));
            json_object_set_new(p, "kl", jnum(rs[i].kl));
        }
        json_array_append_new(pos, p);
    }
    json_object_set_new(root, "positions", pos);
    int rc = json_dump_file(root, path, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
    json_decref(root);
    return rc ? lily_err_set(LILY_EIO, "%s: cannot write", path) : 0;
}

static void print_position(int i, const int *ids, int n, const struct row_stat *r, int ref) {
    char next[16] = "-";
    if (i + 1 < n) snprintf(next, sizeof next, "%d", ids[i + 1]);
    printf("%6d %7d %7s %9.4f %7d", i, ids[i], next, r->nll, r->top1);
    if (ref)
        printf(" %7d %5s %10.3e %10.3e %10.3e", r->ref_top1, r->top1 == r->ref_top1 ? "yes" : "NO",
               r->max_err, r->mean_err, r->kl);
    printf("\n");
}

// ---------------------------------------------------------------------------------------------
// The verb.

int ppl_run(const struct ppl_opts *o) {
    const struct lily_backend *be = lily_backend_get(o->backend);
    if (!be) {
        fprintf(stderr, "lily ppl: unknown backend '%s'\n", o->backend);
        return 2;
    }
    struct lily_model m;
    memset(&m, 0, sizeof m);
    void *ctx = NULL, *st = NULL;
    int *ids = NULL, n = 0, code = 1, rc;
    float *y = NULL, *ref = NULL;
    struct row_stat *rs = NULL;
    FILE *rf = NULL;
    if ((rc = lily_model_load(o->model, &m)) < 0) goto fail;
    const int V = m.cfg.vocab_size;
    if ((rc = ppl_read_ids(o->tokens, V, &ids, &n)) < 0) goto fail;
    if (n < 2) {
        rc = lily_err_set(LILY_EINVAL, "%s: need at least 2 tokens for a next-token perplexity",
                          o->tokens);
        goto fail;
    }
    if (o->ref_logits) {
        struct stat sb;
        if (stat(o->ref_logits, &sb) != 0 || !(rf = fopen(o->ref_logits, "rb"))) {
            rc = lily_err_set(LILY_EIO, "%s: cannot open: %s", o->ref_logits, strerror(errno));
            goto fail;
        }
        long long want = (long long)n * V * 4;
        if ((long long)sb.st_size != want) {
            rc = lily_err_set(LILY_ESHAPE, "%s: %lld bytes, expected %d tokens x %d vocab x 4 = "
                              "%lld (float32 [n, vocab])", o->ref_logits, (long long)sb.st_size,
                              n, V, want);
            goto fail;
        }
    }
    if ((rc = be->init(&m, &ctx)) < 0) {
        ctx = NULL;
        goto fail;
    }
    if ((rc = be->state_new(ctx, n, &st)) < 0) {
        st = NULL;
        goto fail;
    }
    int chunk = o->chunk < n ? o->chunk : n;
    y = xmalloc((size_t)chunk * V * sizeof *y);
    if (rf) ref = xmalloc((size_t)chunk * V * sizeof *ref);
    rs = xcalloc((size_t)n, sizeof *rs);

    double nll_sum = 0, ref_nll_sum = 0, err_sum = 0, max_err = 0, kl_sum = 0;
    int agree = 0;
    for (int i0 = 0; i0 < n; i0 += chunk) {
        int c = n - i0 < chunk ? n - i0 : chunk;
        if ((rc = be->forward(ctx, st, ids + i0, c, y, 1)) < 0) goto fail;
        if (rf && fread(ref, sizeof *ref, (size_t)c * V, rf) != (size_t)c * V) {
            rc = lily_err_set(LILY_EIO, "%s: short read", o->ref_logits);
            goto fail;
        }
        for (int r = 0; r < c; r++) {
            int p = i0 + r;
            const float *yr = y + (size_t)r * V;
            struct row_stat *s = &rs[p];
            double lse = log_sum_exp(yr, V, &s->top1);
            s->nll = p + 1 < n ? lse - yr[ids[p + 1]] : NAN;
            if (p + 1 < n) nll_sum += s->nll;
            if (rf) {
                const float *rr = ref + (size_t)r * V;
                row_compare(yr, rr, V, lse, s);
                if (p + 1 < n) {
                    s->ref_nll = log_sum_exp(rr, V, NULL) - rr[ids[p + 1]];
                    ref_nll_sum += s->ref_nll;
                }
                agree += s->top1 == s->ref_top1;
                if (s->max_err > max_err || isnan(s->max_err)) max_err = s->max_err;
                err_sum += s->mean_err;
                kl_sum += s->kl;
            }
        }
    }
    double mean_nll = nll_sum / (n - 1), ppl = exp(mean_nll);
    double ref_ppl = exp(ref_nll_sum / (n - 1));

    if (o->per_position) {
        printf("%6s %7s %7s %9s %7s", "pos", "id", "next", "nll", "top1");
        if (rf) printf(" %7s %5s %10s %10s %10s", "ref", "agree", "max|err|", "mean|err|", "kl");
        printf("\n");
        for (int i = 0; i < n; i++) print_position(i, ids, n, &rs[i], rf != NULL);
    }
    printf("lily ppl: %d tokens, %s backend, model %s\n", n, be->name, o->model);
    printf("ppl %.6f (mean nll %.6f over %d next-token predictions)\n", ppl, mean_nll, n - 1);
    if (rf)
        printf("reference %s: top-1 agreement %.2f%% (%d/%d), logit error max %.3e mean %.3e, "
               "reference ppl %.6f, mean KL(ref||lily) %.3e\n",
               o->ref_logits, 100.0 * agree / n, agree, n, max_err, err_sum / n, ref_ppl,
               kl_sum / n);
    if (o->json && (rc = write_json(o->json, o, ids, n, V, rs, ppl, mean_nll, ref_ppl, agree,
                                    max_err, err_sum / n, kl_sum / n)) < 0)
        goto fail;
    code = 0;
    goto done;
fail:
    fprintf(stderr, "lily ppl: %s\n", lily_err_msg()[0] ? lily_err_msg() : lily_strerror(rc));
done:
    if (rf) fclose(rf);
    if (st) be->state_free(ctx, st);
    if (ctx) be->free(ctx);
    lily_model_free(&m);
    free(ids);
    free(y);
    free(ref);
    free(rs);
    return code;
}
