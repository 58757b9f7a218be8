// bench.c: `lily bench`. Measures the ceilings first (backend hook, or host memcpy and fp32 matmul
// here), then a prefill sweep and a decode sweep through the backend interface, each point the
// median of timed repetitions after warm-up, and states it against the roofline of the loaded
// model (bytes and FLOPs per token from its config and weight formats, perf-model.md).
// The JSON, plot and --compare live in bench_report.c. Method and results: docs/PERF.md.
//
//   lily bench --model DIR [--backend cuda] [--prefill 256,4K] [--decode 256,4K] [--out PREFIX]
#include "bench.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "backend.h"
#include "common.h"
#include "loader.h"

// ---------------------------------------------------------------------------------------------
// Cost model.

static void add_mat(const struct lily_mat *w, double *bytes, double *params) {
    if (!w || w->rows <= 0 || w->cols <= 0) return;
    *bytes += (double)lily_mat_bytes(w);
    *params += (double)w->rows * w->cols;
}

void bench_cost_init(const struct lily_model *m, struct bench_cost *c) {
    const struct lily_config *cfg = &m->cfg;
    const struct lily_weights *w = &m->w;
    memset(c, 0, sizeof *c);
    double wb = 0, ap = 0;
    for (int l = 0; l < cfg->n_layers; l++) {
        const struct lily_layer *L = &w->layers[l];
        if (L->full) {
            add_mat(&L->q, &wb, &ap);
            add_mat(&L->k, &wb, &ap);
            add_mat(&L->v, &wb, &ap);
            add_mat(&L->o, &wb, &ap);
            c->kv_bytes_ctx += 2.0 * cfg->n_kv_heads * cfg->head_dim * 2; // K and V, bf16
            // QK^T and PV: 2 * D FLOPs each per query head and (query, key) pair.
            c->attn_flops_ctx += 4.0 * cfg->n_heads * cfg->head_dim;
        } else {
            add_mat(&L->qkv, &wb, &ap);
            add_mat(&L->z, &wb, &ap);
            add_mat(&L->b, &wb, &ap);
            add_mat(&L->a, &wb, &ap);
            add_mat(&L->out, &wb, &ap);
            double hs = (double)cfg->lin_v_heads * cfg->lin_k_dim * cfg->lin_v_dim;
            c->state_bytes += 2.0 * hs * 4; // fp32 state read and written
            // Decay, S^T k, rank-1 update and q^T S: about 8 FLOPs per state element.
            c->gdn_flops += 8.0 * hs;
        }
        add_mat(&L->router, &wb, &ap);
        if (L->gate && L->up && L->down && cfg->n_experts > 0) {
            double eb = 0, ep = 0;
            add_mat(&L->gate[0], &eb, &ep);
            add_mat(&L->up[0], &eb, &ep);
            add_mat(&L->down[0], &eb, &ep);
            wb += cfg->n_experts_tok * eb;
            ap += cfg->n_experts_tok * ep;
        }
        if (cfg->shared_inter > 0) {
            add_mat(&L->sh_gate, &wb, &ap);
            add_mat(&L->sh_up, &wb, &ap);
            add_mat(&L->sh_down, &wb, &ap);
            add_mat(&L->sh_score, &wb, &ap);
        }
    }
    if (w->embed.rows > 0) wb += (double)lily_mat_bytes(&w->embed) / w->embed.rows; // one row
    double hp = 0;
    add_mat(&w->lm_head, &wb, &hp);
    c->weight_bytes = wb;
    c->active_params = ap;
    c->head_flops = 2.0 * hp;
}

double bench_decode_bytes(const struct bench_cost *c, double ctx) {
    return c->weight_bytes + c->state_bytes + c->kv_bytes_ctx * ctx;
}

double bench_prefill_flops(const struct bench_cost *c, double len) {
    if (len < 1) len = 1;
    return 2.0 * c->active_params + c->attn_flops_ctx * len / 2 + c->gdn_flops + c->head_flops / len;
}

// ---------------------------------------------------------------------------------------------
// Host ceilings: a memcpy split over the worker threads, and a cache-blocked fp32 matmul split by
// rows. They bound what a CPU backend can reach, measured in the same run as the sweep.

struct host_job {
    int kind; // 0 copy, 1 matmul
    char *dst;
    const char *src;
    size_t bytes;
    const float *a, *b;
    float *c;
    int n, r0, r1;
};

static void *host_worker(void *arg) {
    struct host_job *j = arg;
    if (j->kind == 0) {
        memcpy(j->dst, j->src, j->bytes);
        return NULL;
    }
    // Four rows of C share each load of a B row; fmaf lets the compiler emit vector FMAs (C11
    // mode does not contract a * b + c by itself). Rows are split in fours by the caller.
    int n = j->n;
    enum { KB = 128 };
    for (int k0 = 0; k0 < n; k0 += KB) {
        int k1 = k0 + KB < n ? k0 + KB : n;
        for (int i = j->r0; i < j->r1; i += 4) {
            float *c0 = j->c + (size_t)i * n, *c1 = c0 + n, *c2 = c1 + n, *c3 = c2 + n;
            for (int k = k0; k < k1; k++) {
                const float *ak = j->a + (size_t)i * n + k;
                float a0 = ak[0], a1 = ak[n], a2 = ak[2 * n], a3 = ak[3 * n];
                const float *bk = j->b + (size_t)k * n;
                for (int x = 0; x < n; x++) {
                    float b = bk[x];
                    c0[x] = fmaf(a0, b, c0[x]);
                    c1[x] = fmaf(a1, b, c1[x]);
                    c2[x] = fmaf(a2, b, c2[x]);
                    c3[x] = fmaf(a3, b, c3[x]);
                }
            }
        }
    }
    return NULL;
}

static double host_parallel(struct host_job *jobs, int nt) {
    pthread_t th[256];
    double t0 = lily_time();
    for (int t = 1; t < nt; t++) CHECK(pthread_create(&th[t], NULL, host_worker, &jobs[t]) == 0);
    host_worker(&jobs[0]);
    for (int t = 1; t < nt; t++) pthread_join(th[t], NULL);
    return lily_time() - t0;
}

void bench_host_ceilings(size_t bytes, int n, double *copy_gbps, double *gemm_tflops) {
    CHECK(n % 4 == 0);
    int nt = lily_num_threads();
    if (nt > 256) nt = 256;
    struct host_job jobs[256];
    char *src = xmalloc(bytes), *dst = xmalloc(bytes);
    memset(src, 1, bytes);
    memset(dst, 0, bytes); // touch the pages so the first copy does not time page faults
    size_t per = bytes / (size_t)nt;
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        for (int t = 0; t < nt; t++)
            jobs[t] = (struct host_job){.kind = 0, .dst = dst + t * per, .src = src + t * per,
                                        .bytes = per};
        double s = host_parallel(jobs, nt);
        if (rep > 0 && s < best) best = s; // first repetition is warm-up
    }
    *copy_gbps = 2.0 * (double)per * nt / best / 1e9;
    free(src);
    free(dst);

    float *a = xmalloc_aligned((size_t)n * n * 4), *b = xmalloc_aligned((size_t)n * n * 4);
    float *c = xmalloc_aligned((size_t)n * n * 4);
    for (long i = 0; i < (long)n * n; i++) {
        a[i] = (float)(i % 7) * 0.25f;
        b[i] = (float)(i % 5) * 0.5f;
    }
    best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        memset(c, 0, (size_t)n * n * 4);
        for (int t = 0; t < nt; t++)
            jobs[t] = (struct host_job){.kind = 1, .a = a, .b = b, .c = c, .n = n,
                                        .r0 = (int)((long)n / 4 * t / nt) * 4,
                                        .r1 = (int)((long)n / 4 * (t + 1) / nt) * 4};
        double s = host_parallel(jobs, nt);
        if (rep > 0 && s < best) best = s;
    }
    *gemm_tflops = 2.0 * n * (double)n * n / best / 1e12;
    free(a);
    free(b);
    free(c);
}

// ---------------------------------------------------------------------------------------------
// Length lists: "256,512,1K,2K" (K = 1024) or "none".

int bench_parse_lengths(const char *s, int *out, int cap) {
    if (!strcmp(s, "none")) return 0;
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) goto bad;
        if (*end == 'K' || *end == 'k') {
            v *= 1024;
            end++;
        }
        if (v < 1 || v > (1L << 24) || n == cap) goto bad;
        out[n++] = (int)v;
        if (*end == ',' && end[1]) end++; // a separator, never a trailing one
        else if (*end) goto bad;
        p = end;
    }
    if (n == 0) goto bad;
    return n;
bad:
    fprintf(stderr, "lily bench: bad length list '%s' (want e.g. 256,512,1K; at most %d, each "
                    "1..16M) or 'none'\n", s, cap);
    return -1;
}

// ---------------------------------------------------------------------------------------------
// Sweeps.

struct sweep {
    const struct lily_backend *be;
    void *ctx, *st;
    const int *tokens;
    float *logits;
    const struct bench_opts *o;
    const char *json; // rewritten after every point, so a run stopped early keeps what it measured
};

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n) {
    double s[16];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

// Reset the process's peak RSS (VmHWM) so the host ceiling buffers do not count. Best effort:
// Linux >= 4.0 understands "5" in clear_refs.
static void reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return;
    fputs("5", f);
    fclose(f);
}

static double peak_mem(const struct sweep *s) {
    if (s->be->peak_mem) return (double)s->be->peak_mem(s->ctx);
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        double kb = -1;
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "VmHWM:", 6)) kb = atof(line + 6);
        fclose(f);
        if (kb >= 0) return kb * 1024.0;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss * 1024.0;
}

// Prefill of `len` tokens from an empty state, last-token logits only. Returns seconds or < 0.
static double time_prefill(struct sweep *s, int len) {
    s->be->state_reset(s->ctx, s->st);
    double t0 = lily_time();
    int rc = s->be->forward(s->ctx, s->st, s->tokens, len, s->logits, 0);
    double t = lily_time() - t0;
    return rc < 0 ? rc : t;
}

// `steps` single-token decode steps from the state's current position. Returns seconds or < 0.
static double time_decode(struct sweep *s, int steps) {
    double t0 = lily_time();
    for (int i = 0; i < steps; i++) {
        int pos = s->be->state_pos(s->ctx, s->st);
        int rc = s->be->forward(s->ctx, s->st, &s->tokens[pos], 1, s->logits, 0);
        if (rc < 0) return rc;
    }
    return lily_time() - t0;
}

// Bring the state to position `ctx` (refilling from empty if it is already past it).
static int fill_to(struct sweep *s, int ctx) {
    int pos = s->be->state_pos(s->ctx, s->st);
    if (pos > ctx) {
        s->be->state_reset(s->ctx, s->st);
        pos = 0;
    }
    if (ctx == pos) return 0;
    return s->be->forward(s->ctx, s->st, &s->tokens[pos], ctx - pos, NULL, 0);
}

static void point_finish(struct bench_point *p, const struct bench_result *r, int decode,
                         double tokens_per_rep, const struct sweep *s) {
    double t = median(p->times, p->reps);
    p->tok_s = tokens_per_rep / t;
    p->ms_per_tok = 1e3 * t / tokens_per_rep;
    if (decode) {
        double bytes = bench_decode_bytes(&r->cost, p->len);
        p->rate = bytes * p->tok_s / 1e9;
        p->roof_tok_s = r->copy_gbps > 0 ? r->copy_gbps * 1e9 / bytes : 0;
    } else {
        double flops = bench_prefill_flops(&r->cost, p->len);
        p->rate = flops * p->tok_s / 1e12;
        p->roof_tok_s = r->gemm_tflops > 0 ? r->gemm_tflops * 1e12 / flops : 0;
    }
    p->roof_frac = p->roof_tok_s > 0 ? p->tok_s / p->roof_tok_s : 0;
    p->peak_mem = peak_mem(s);
}

static void point_print(const char *kind, const struct bench_point *p, int decode) {
    printf("%-8s %7d %11.1f %10.3f %9.3g %-6s %7.1f%% %11.1f %9.0f\n", kind, p->len, p->tok_s,
           p->ms_per_tok, p->rate, decode ? "GB/s" : "TF/s", 100.0 * p->roof_frac, p->roof_tok_s,
           p->peak_mem / (1024.0 * 1024.0));
    fflush(stdout);
}

static int run_sweeps(struct sweep *s, struct bench_result *r) {
    const struct bench_opts *o = s->o;
    printf("\n%-8s %7s %11s %10s %16s %8s %11s %9s\n", "", "len", "tok/s", "ms/tok", "achieved",
           "roofline", "roof tok/s", "peak MiB");
    for (int i = 0; i < o->n_prefill; i++) {
        struct bench_point *p = &r->prefill[r->n_prefill++];
        p->len = o->prefill[i];
        for (int k = 0; k < o->warmup + o->reps; k++) {
            double t = time_prefill(s, p->len);
            if (t < 0) return (int)t;
            if (k >= o->warmup) p->times[p->reps++] = t;
        }
        point_finish(p, r, 0, p->len, s);
        point_print("prefill", p, 0);
        bench_write_json(r, s->json);
    }
    s->be->state_reset(s->ctx, s->st);
    for (int i = 0; i < o->n_decode; i++) {
        struct bench_point *p = &r->decode[r->n_decode++];
        p->len = o->decode[i];
        int rc = fill_to(s, p->len);
        if (rc < 0) return rc;
        for (int k = 0; k < o->warmup + o->reps; k++) {
            double t = time_decode(s, o->steps);
            if (t < 0) return (int)t;
            if (k >= o->warmup) p->times[p->reps++] = t;
        }
        point_finish(p, r, 1, o->steps, s);
        point_print("decode", p, 1);
        bench_write_json(r, s->json);
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// The verb.

static void print_cost(const struct bench_result *r) {
    const struct bench_cost *c = &r->cost;
    printf("cost model (this model): decode %.4g GB weights + %.4g GB GDN state per token + %.0f B "
           "per context token; prefill %.4g GFLOP/token matmul + %.0f FLOP x len attention + %.4g "
           "GFLOP GDN + lm_head %.4g GFLOP per call\n",
           c->weight_bytes / 1e9, c->state_bytes / 1e9, c->kv_bytes_ctx, 2 * c->active_params / 1e9,
           c->attn_flops_ctx / 2, c->gdn_flops / 1e9, c->head_flops / 1e9);
    printf("perf-model.md (35B-A3B, 4-bit g64): decode 1.657 GB weights (+~0.01 GB 8-bit router) + "
           "0.126 GB GDN state + 20480 B per context token; prefill 4.87 GFLOP/token matmul + "
           "81920 FLOP x len attention + ~0.13 GFLOP GDN\n");
}

static int ablate_all(const struct lily_backend *be, void *ctx, const char *list) {
    if (!be->set_flag)
        return lily_err_set(LILY_EUNSUPPORTED, "backend %s has no switchable optimisations "
                            "(--ablate)", be->name);
    char *copy = xstrdup(list), *save = NULL;
    int rc = 0;
    for (char *t = strtok_r(copy, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save))
        rc = be->set_flag(ctx, t, 0);
    free(copy);
    return rc;
}

static void host_device(struct bench_result *r) {
    snprintf(r->device, sizeof r->device, "host CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    int got_name = 0, got_mhz = 0;
    while (fgets(line, sizeof line, f) && !(got_name && got_mhz)) {
        char *colon = strchr(line, ':');
        if (!colon) continue;
        char *v = colon + 1 + (colon[1] == ' ');
        v[strcspn(v, "\n")] = 0;
        if (!got_name && !strncmp(line, "model name", 10)) {
            snprintf(r->device, sizeof r->device, "%s", v);
            got_name = 1;
        } else if (!got_mhz && !strncmp(line, "cpu MHz", 7)) {
            snprintf(r->clocks, sizeof r->clocks, "cpu %s MHz (first core, at start)", v);
            got_mhz = 1;
        }
    }
    fclose(f);
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0) r->mem_total = (double)pages * psz;
}

static int measure_ceilings(const struct lily_backend *be, void *ctx, struct bench_result *r) {
    r->ceil_source = "none";
    if (be->ceilings) {
        struct lily_ceilings c;
        memset(&c, 0, sizeof c);
        int rc = be->ceilings(ctx, &c);
        if (rc < 0) return rc;
        snprintf(r->device, sizeof r->device, "%s", c.device);
        snprintf(r->clocks, sizeof r->clocks, "%s", c.clocks);
        r->mem_total = (double)c.mem_total;
        if (!r->o->no_ceilings) {
            r->copy_gbps = c.copy_gbps;
            r->gemm_tflops = c.gemm_tflops;
            r->ceil_source = "backend";
        }
        return 0;
    }
    host_device(r);
    if (!r->o->no_ceilings) {
        // 256 MiB copies and a 1024^2 fp32 matmul: a second or two on a small machine.
        bench_host_ceilings((size_t)256 << 20, 1024, &r->copy_gbps, &r->gemm_tflops);
        r->ceil_source = "host";
        reset_peak_rss();
    }
    return 0;
}

int bench_run(const struct bench_opts *o) {
    struct lily_model m;
    memset(&m, 0, sizeof m);
    const struct lily_backend *be = lily_backend_get(o->backend);
    if (!be) {
        fprintf(stderr, "lily bench: unknown backend '%s'\n", o->backend);
        return 2;
    }
    struct bench_result *r = xcalloc(1, sizeof *r);
    r->o = o;
    r->m = &m;
    r->threads = lily_num_threads();
    r->mem_source = be->peak_mem ? "device" : "rss";
    void *ctx = NULL, *st = NULL;
    int *tokens = NULL;
    float *logits = NULL;
    int code = 1, rc;
    if ((rc = lily_model_load(o->model, &m)) < 0) goto fail;
    if ((rc = be->init(&m, &ctx)) < 0) {
        ctx = NULL;
        goto fail;
    }
    if (o->ablate && (rc = ablate_all(be, ctx, o->ablate)) < 0) goto fail;
    bench_cost_init(&m, &r->cost);
    if ((rc = measure_ceilings(be, ctx, r)) < 0) goto fail;
    printf("lily bench: %s backend, %s, model %s\n", be->name, r->device, o->model);
    printf("ceilings (%s): copy %.4g GB/s (read + write), matmul %.4g TFLOP/s\n", r->ceil_source,
           r->copy_gbps, r->gemm_tflops);
    print_cost(r);

    // One state large enough for the longest prompt and the last decode point with its steps.
    int need = 1;
    for (int i = 0; i < o->n_prefill; i++) need = o->prefill[i] > need ? o->prefill[i] : need;
    for (int i = 0; i < o->n_decode; i++) {
        int d = o->decode[i] + (o->warmup + o->reps) * o->steps;
        need = d > need ? d : need;
    }
    if ((rc = be->state_new(ctx, need, &st)) < 0) {
        st = NULL;
        goto fail;
    }
    tokens = xmalloc((size_t)need * sizeof *tokens);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < need; i++) { // fixed pseudo-random ids: the same run to run
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        tokens[i] = (int)((x >> 33) % (uint64_t)m.cfg.vocab_size);
    }
    logits = xmalloc((size_t)m.cfg.vocab_size * sizeof *logits);
    char *json = xmalloc(strlen(o->out) + 8), *png = xmalloc(strlen(o->out) + 8);
    sprintf(json, "%s.json", o->out);
    sprintf(png, "%s.png", o->out);
    struct sweep s = {.be = be, .ctx = ctx, .st = st, .tokens = tokens, .logits = logits, .o = o,
                      .json = json};
    if ((rc = run_sweeps(&s, r)) < 0) {
        free(json);
        free(png);
        goto fail;
    }
    rc = bench_write_json(r, json);
    if (rc == 0) {
        printf("wrote %s\n", json);
        if (!o->no_plot) bench_plot(r, png);
        code = 0;
    }
    free(json);
    free(png);
    if (rc < 0) goto fail;
    goto done;
fail:
    fprintf(stderr, "lily bench: %s\n", lily_err_msg()[0] ? lily_err_msg() : lily_strerror(rc));
done:
    if (st) be->state_free(ctx, st);
    if (ctx) be->free(ctx);
    lily_model_free(&m);
    free(tokens);
    free(logits);
    free(r);
    return code;
}
