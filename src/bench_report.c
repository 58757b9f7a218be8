// bench_report.c: what `lily bench` leaves behind: the JSON record of a run (device, clocks,
// commit, flags, ceilings, cost model, every point), the PNG plot drawn by gnuplot,
// `--compare A.json B.json`, the ratio of two runs point by point, and `--merge`.
//
// `--merge OUT A.json B.json...` joins the points of runs that together make one sweep (a long
// sweep split over several calls) into OUT.json and OUT.png.
//
// JSON shape (docs/PERF.md; tests/py/test_bench_ppl.py checks it):
//   {"tool", "version", "date", "commit", "backend", "model", "device": {name, clocks, mem_total},
//    "threads", "flags": {ablate, reps, warmup, decode_steps}, "config": {...},
//    "ceilings": {source, copy_gbps, gemm_tflops}, "cost": {...}, "mem_source",
//    "prefill": [{len, tok_s, ms_per_tok, tflops, roofline_tok_s, roofline_frac, peak_mem, times_s}],
//    "decode":  [{len, tok_s, ms_per_tok, gbps, ...the same}]}
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "common.h"

// ---------------------------------------------------------------------------------------------
// Run identity: commit and date.

// The commit the binary was built from: $LILY_COMMIT, else a -DLILY_COMMIT define, else asking
// git about the repository the binary sits in (build/lily -> ..), with "+dirty" for local edits.
// Best effort: "unknown" when none answers.
static void run_commit(char *out, size_t cap) {
    const char *e = getenv("LILY_COMMIT");
    if (e && *e) {
        snprintf(out, cap, "%s", e);
        return;
    }
#ifdef LILY_COMMIT
    snprintf(out, cap, "%s", LILY_COMMIT);
    return;
#endif
    snprintf(out, cap, "unknown");
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return;
    exe[k] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash || strchr(exe, '\'')) return;
    *slash = 0;
    char cmd[PATH_MAX + 128];
    snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse --short=12 HEAD 2>/dev/null", exe);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    char line[64] = "";
    int ok = fgets(line, sizeof line, p) != NULL;
    pclose(p);
    line[strcspn(line, "\n")] = 0;
    if (!ok || !line[0]) return;
    snprintf(cmd, sizeof cmd,
             "git -C '%s' status --porcelain --untracked-files=no 2>/dev/null | head -1", exe);
    char dirty[8] = "";
    if ((p = popen(cmd, "r"))) {
        if (!fgets(dirty, sizeof dirty, p)) dirty[0] = 0;
        pclose(p);
    }
    snprintf(out, cap, "%s%s", line, dirty[0] ? "+dirty" : "");
}

static void run_date(char *out, size_t cap) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

// ---------------------------------------------------------------------------------------------
// JSON.

// Non-finite numbers are not JSON: write null so a reader sees the failure.
static json_t *jnum(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static json_t *json_points(const struct bench_point *p, int n, const char *rate_key) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        json_t *o = json_object(), *t = json_array();
        json_object_set_new(o, "len", json_integer(p[i].len));
        json_object_set_new(o, "tok_s", jnum(p[i].tok_s));
        json_object_set_new(o, "ms_per_tok", jnum(p[i].ms_per_tok));
        json_object_set_new(o, rate_key, jnum(p[i].rate));
        json_object_set_new(o, "roofline_tok_s", jnum(p[i].roof_tok_s));
        json_object_set_new(o, "roofline_frac", jnum(p[i].roof_frac));
        json_object_set_new(o, "peak_mem", jnum(p[i].peak_mem));
        for (int k = 0; k < p[i].reps; k++) json_array_append_new(t, jnum(p[i].times[k]));
        json_object_set_new(o, "times_s", t);
        json_array_append_new(a, o);
    }
    return a;
}

int bench_write_json(const struct bench_result *r, const char *path) {
    const struct lily_config *c = &r->m->cfg;
    const struct bench_opts *o = r->o;
    char commit[96], date[32];
    run_commit(commit, sizeof commit);
    run_date(date, sizeof date);
    int n_full = 0;
    for (int l = 0; l < c->n_layers; l++) n_full += c->layer_full[l] != 0;

    json_t *root = json_object();
    json_object_set_new(root, "tool", json_string("lily bench"));
    json_object_set_new(root, "version", json_string(LILY_VERSION));
    json_object_set_new(root, "date", json_string(date));
    json_object_set_new(root, "commit", json_string(commit));
    json_object_set_new(root, "backend", json_string(o->backend));
    json_object_set_new(root, "model", json_string(o->model));
    json_t *dev = json_object();
    json_object_set_new(dev, "name", json_string(r->device));
    json_object_set_new(dev, "clocks", json_string(r->clocks));
    json_object_set_new(dev, "mem_total", jnum(r->mem_total));
    json_object_set_new(root, "device", dev);
    json_object_set_new(root, "threads", json_integer(r->threads));

    json_t *flags = json_object(), *abl = json_array();
    if (o->ablate) {
        char *copy = xstrdup(o->ablate), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
            json_array_append_new(abl, json_string(t));
        free(copy);
    }
    json_object_set_new(flags, "ablate", abl);
    json_object_set_new(flags, "reps", json_integer(o->reps));
    json_object_set_new(flags, "warmup", json_integer(o->warmup));
    json_object_set_new(flags, "decode_steps", json_integer(o->steps));
    json_object_set_new(root, "flags", flags);

    json_t *cfg = json_object();
    json_object_set_new(cfg, "vocab_size", json_integer(c->vocab_size));
    json_object_set_new(cfg, "hidden", json_integer(c->hidden));
    json_object_set_new(cfg, "n_layers", json_integer(c->n_layers));
    json_object_set_new(cfg, "n_full_attention", json_integer(n_full));
    json_object_set_new(cfg, "n_experts", json_integer(c->n_experts));
    json_object_set_new(cfg, "n_experts_tok", json_integer(c->n_experts_tok));
    json_object_set_new(cfg, "moe_inter", json_integer(c->moe_inter));
    json_object_set_new(cfg, "weight_bytes", json_integer(r->m->weight_bytes));
    json_object_set_new(root, "config", cfg);

    json_t *ceil = json_object();
    json_object_set_new(ceil, "source", json_string(r->ceil_source));
    json_object_set_new(ceil, "copy_gbps", jnum(r->copy_gbps));
    json_object_set_new(ceil, "gemm_tflops", jnum(r->gemm_tflops));
    json_object_set_new(root, "ceilings", ceil);

    const struct bench_cost *k = &r->cost;
    json_t *cost = json_object();
    json_object_set_new(cost, "decode_weight_bytes", jnum(k->weight_bytes));
    json_object_set_new(cost, "decode_state_bytes", jnum(k->state_bytes));
    json_object_set_new(cost, "kv_bytes_per_ctx", jnum(k->kv_bytes_ctx));
    json_object_set_new(cost, "active_params", jnum(k->active_params));
    json_object_set_new(cost, "lm_head_flops", jnum(k->head_flops));
    json_object_set_new(cost, "attn_flops_per_pair", jnum(k->attn_flops_ctx));
    json_object_set_new(cost, "gdn_flops_per_tok", jnum(k->gdn_flops));
    json_object_set_new(root, "cost", cost);

    json_object_set_new(root, "mem_source", json_string(r->mem_source));
    json_object_set_new(root, "prefill", json_points(r->prefill, r->n_prefill, "tflops"));
    json_object_set_new(root, "decode", json_points(r->decode, r->n_decode, "gbps"));
    int rc = json_dump_file(root, path, JSON_INDENT(1) | JSON_REAL_PRECISION(8));
    json_decref(root);
    if (rc != 0) return lily_err_set(LILY_EIO, "%s: cannot write", path);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Plot: one panel per sweep, tok/s against length (log-log), with the roofline dashed.

static void plot_panel(FILE *g, const char *name, const char *xlabel,
                       const struct bench_point *p, int n) {
    fprintf(g, "$%s << EOD\n", name);
    for (int i = 0; i < n; i++) fprintf(g, "%d %.6g %.6g\n", p[i].len, p[i].tok_s, p[i].roof_tok_s);
    fprintf(g, "EOD\n");
    fprintf(g, "set title '%s'\nset xlabel '%s'\nset ylabel 'tokens/s'\nset xtics (", name, xlabel);
    for (int i = 0; i < n; i++) // short labels (1K, 128K): the plain numbers overlap at 16K-128K
        fprintf(g, p[i].len % 1024 ? "%s'%d' %d" : "%s'%dK' %d", i ? ", " : "",
                p[i].len % 1024 ? p[i].len : p[i].len / 1024, p[i].len);
    fprintf(g, ")\n");
    if (n > 0) fprintf(g, "set xrange [%g:%g]\n", p[0].len / 1.4, p[n - 1].len * 1.4); // end labels inside
    fprintf(g, "plot $%s using 1:2 with linespoints lw 2 pt 7 title 'measured'", name);
    if (n > 0 && p[0].roof_tok_s > 0)
        fprintf(g, ", $%s using 1:3 with lines dt 2 lw 2 title 'roofline (measured ceiling)'", name);
    fprintf(g, "\n");
}

// Draw the panels with gnuplot under `title`; a missing gnuplot is a note, not an error.
static void plot_write(const char *path, const char *title, const struct bench_point *pf, int npf,
                       const struct bench_point *dc, int ndc) {
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        printf("note: gnuplot not found, no plot written (Debian: apt-get install gnuplot-nox)\n");
        return;
    }
    if (strchr(path, '\'') || strchr(title, '\'')) {
        printf("note: quote in the output path or title, no plot written\n");
        return;
    }
    int panels = (npf > 0) + (ndc > 0);
    if (panels == 0) return;
    FILE *g = popen("gnuplot", "w");
    if (!g) {
        printf("note: cannot start gnuplot, no plot written\n");
        return;
    }
    fprintf(g, "set terminal pngcairo size %d,480 noenhanced\nset output '%s'\n",
            panels == 2 ? 1200 : 640, path);
    fprintf(g, "set logscale x 2\nset logscale y\nset grid\nset key bottom left\n");
    fprintf(g, "set multiplot layout 1,%d title '%s'\n", panels, title);
    if (npf) plot_panel(g, "prefill", "prompt length (tokens)", pf, npf);
    if (ndc) plot_panel(g, "decode", "context (tokens)", dc, ndc);
    fprintf(g, "unset multiplot\n");
    if (pclose(g) != 0) printf("note: gnuplot failed, plot %s may be missing\n", path);
    else printf("wrote %s\n", path);
}

void bench_plot(const struct bench_result *r, const char *path) {
    char commit[96], title[512];
    run_commit(commit, sizeof commit);
    const char *ab = r->o->ablate && !strchr(r->o->ablate, '\'') ? r->o->ablate : NULL;
    snprintf(title, sizeof title, "lily bench: %s, %s, %s%s%s", r->o->backend,
             strchr(r->device, '\'') ? "?" : r->device, commit, ab ? ", ablate " : "", ab ? ab : "");
    plot_write(path, title, r->prefill, r->n_prefill, r->decode, r->n_decode);
}

// ---------------------------------------------------------------------------------------------
// --compare A.json B.json

static json_t *load_run(const char *path) {
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (!j) {
        fprintf(stderr, "lily bench: %s: %s (line %d)\n", path, err.text, err.line);
        return NULL;
    }
    if (!json_is_object(j)) {
        fprintf(stderr, "lily bench: %s: not a lily bench JSON object\n", path);
        json_decref(j);
        return NULL;
    }
    return j;
}

static const char *jstr(json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "?";
}

static void describe(const char *tag, const char *path, json_t *j) {
    json_t *abl = json_object_get(json_object_get(j, "flags"), "ablate");
    printf("%s: %s  backend %s, commit %s, %s, ablate", tag, path, jstr(j, "backend"),
           jstr(j, "commit"), jstr(j, "date"));
    size_t i;
    json_t *v;
    if (!json_array_size(abl)) printf(" none");
    json_array_foreach(abl, i, v) printf(" %s", json_string_value(v) ? json_string_value(v) : "?");
    printf("\n");
}

int bench_compare(const char *pa, const char *pb) {
    json_t *a = load_run(pa), *b = a ? load_run(pb) : NULL;
    if (!a || !b) {
        json_decref(a);
        return 1;
    }
    describe("A", pa, a);
    describe("B", pb, b);
    printf("%-8s %7s %11s %11s %8s\n", "", "len", "A tok/s", "B tok/s", "B/A");
    const char *kinds[2] = {"prefill", "decode"};
    int matched = 0;
    for (int k = 0; k < 2; k++) {
        json_t *pa_ = json_object_get(a, kinds[k]), *pb_ = json_object_get(b, kinds[k]);
        size_t i, j;
        json_t *x, *y;
        json_array_foreach(pa_, i, x) {
            json_int_t len = json_integer_value(json_object_get(x, "len"));
            json_array_foreach(pb_, j, y) {
                if (json_integer_value(json_object_get(y, "len")) != len) continue;
                double ta = json_number_value(json_object_get(x, "tok_s"));
                double tb = json_number_value(json_object_get(y, "tok_s"));
                printf("%-8s %7lld %11.1f %11.1f %8.3f\n", kinds[k], (long long)len, ta, tb,
                       ta > 0 ? tb / ta : NAN);
                matched++;
                break;
            }
        }
    }
    if (!matched) printf("no points in common\n");
    json_decref(a);
    json_decref(b);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// --merge OUT A.json B.json ...: the first run's record with every run's points, by length (a
// later file's point replaces an earlier one of the same length), sorted; "merged_from" lists the
// inputs with their commits and dates. Then OUT.png from the merged points.

static int merge_points(json_t *dst, json_t *src) {
    size_t i, j;
    json_t *x, *y;
    json_array_foreach(src, i, x) {
        json_t *len = json_object_get(x, "len");
        if (!json_is_integer(len) || !json_is_number(json_object_get(x, "tok_s"))) return -1;
        size_t at = json_array_size(dst);
        json_array_foreach(dst, j, y) if (json_integer_value(json_object_get(y, "len")) >= json_integer_value(len)) {
            at = j;
            break;
        }
        if (at < json_array_size(dst) &&
            json_integer_value(json_object_get(json_array_get(dst, at), "len")) == json_integer_value(len))
            json_array_set(dst, at, x);
        else
            json_array_insert(dst, at, x);
    }
    return 0;
}

static int points_from_json(json_t *arr, const char *rate_key, struct bench_point *p, int cap) {
    size_t i;
    json_t *x;
    int n = 0;
    json_array_foreach(arr, i, x) {
        if (n == cap) break;
        memset(&p[n], 0, sizeof p[n]);
        p[n].len = (int)json_integer_value(json_object_get(x, "len"));
        p[n].tok_s = json_number_value(json_object_get(x, "tok_s"));
        p[n].rate = json_number_value(json_object_get(x, rate_key));
        p[n].roof_tok_s = json_number_value(json_object_get(x, "roofline_tok_s"));
        n++;
    }
    return n;
}

int bench_merge(const char *out, char **in, int n_in) {
    if (n_in < 1) {
        fprintf(stderr, "lily bench: --merge OUT A.json [B.json ...]\n");
        return 2;
    }
    json_t *root = NULL, *from = json_array();
    const char *kinds[2] = {"prefill", "decode"};
    for (int f = 0; f < n_in; f++) {
        json_t *j = load_run(in[f]);
        if (!j) {
            json_decref(root), json_decref(from);
            return 1;
        }
        json_array_append_new(from, json_pack("{s:s, s:s, s:s}", "file", in[f], "commit", jstr(j, "commit"),
                                              "date", jstr(j, "date")));
        if (!root) {
            root = json_deep_copy(j);
            for (int k = 0; k < 2; k++) json_object_set_new(root, kinds[k], json_array());
        } else if (strcmp(jstr(j, "backend"), jstr(root, "backend"))) {
            fprintf(stderr, "lily bench: %s: backend %s, the first file's is %s: not one sweep\n", in[f],
                    jstr(j, "backend"), jstr(root, "backend"));
            json_decref(j), json_decref(root), json_decref(from);
            return 1;
        }
        for (int k = 0; k < 2; k++) {
            json_t *src = json_object_get(j, kinds[k]);
            if ((src && !json_is_array(src)) || (src && merge_points(json_object_get(root, kinds[k]), src))) {
                fprintf(stderr, "lily bench: %s: bad %s points (each needs an integer len and tok_s)\n", in[f],
                        kinds[k]);
                json_decref(j), json_decref(root), json_decref(from);
                return 1;
            }
        }
        json_decref(j);
    }
    json_object_set_new(root, "merged_from", from);
    char path[4096];
    snprintf(path, sizeof path, "%s.json", out);
    if (json_dump_file(root, path, JSON_INDENT(1) | JSON_REAL_PRECISION(8))) {
        fprintf(stderr, "lily bench: %s: cannot write\n", path);
        json_decref(root);
        return 1;
    }
    printf("wrote %s\n", path);
    static struct bench_point pf[BENCH_MAX_POINTS], dc[BENCH_MAX_POINTS];
    int npf = points_from_json(json_object_get(root, "prefill"), "tflops", pf, BENCH_MAX_POINTS);
    int ndc = points_from_json(json_object_get(root, "decode"), "gbps", dc, BENCH_MAX_POINTS);
    char title[512];
    json_t *dev = json_object_get(root, "device");
    snprintf(title, sizeof title, "lily bench: %s, %s, %s (merged from %d runs)", jstr(root, "backend"),
             json_is_object(dev) ? jstr(dev, "name") : "?", jstr(root, "commit"), n_in);
    for (char *c = title; *c; c++)
        if (*c == '\'') *c = '?';
    snprintf(path, sizeof path, "%s.png", out);
    plot_write(path, title, pf, npf, dc, ndc);
    json_decref(root);
    return 0;
}
