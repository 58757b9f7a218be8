// cli_logits.c: `lily logits` and `lily generate`, the testability contract of the forward pass.
//
//   lily logits --model DIR --ids 1,2,3 [--step N] [--backend cpu|cuda] --out FILE
//       runs the ids as one sequence, N tokens per forward call (N=1 is pure decode; default: all
//       at once), and writes float32 little-endian logits [n_ids x vocab_size] to FILE.
//   lily generate --model DIR --ids 1,2,3 [-n N] [--backend B]
//       greedy generation: prints the generated ids, then a hash of all logits computed, so that
//       backends and commits can be compared at a glance.
// Exit status: 0 ok, 1 runtime failure (model, backend, file), 2 bad arguments.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cli.h"
#include "common.h"
#include "loader.h"

#define MAX_IDS 1000000

// Parse "1,2,3" (the contract's strict form) into a malloc'd array. Returns the count, or -1
// after printing an error.
static int parse_ids(const char *s, int **out) {
    int n;
    if (lily_parse_ids(s, 1, out, &n)) {
        fprintf(stderr, "lily: --ids '%.40s': %s\n", s, lily_err_msg());
        return -1;
    }
    return n;
}

// The model, backend, context and a state of max_ctx positions, or an error printed.
struct run {
    struct lily_model m;
    const struct lily_backend *be;
    void *ctx, *st;
};

static int run_open(struct run *r, const char *model, const char *backend, int max_ctx) {
    memset(r, 0, sizeof *r);
    r->be = lily_backend_get(backend);
    if (!r->be) {
        fprintf(stderr, "lily: unknown backend '%s'\n", backend);
        return 2;
    }
    int rc = lily_model_load(model, &r->m);
    if (rc < 0) {
        fprintf(stderr, "lily: %s\n", lily_err_msg());
        return 1;
    }
    if ((rc = r->be->init(&r->m, &r->ctx)) < 0 || (rc = r->be->state_new(r->ctx, max_ctx, &r->st)) < 0) {
        fprintf(stderr, "lily: %s\n", lily_err_msg());
        return 1;
    }
    return 0;
}

static void run_close(struct run *r) {
    if (r->st) r->be->state_free(r->ctx, r->st);
    if (r->ctx) r->be->free(r->ctx);
    lily_model_free(&r->m);
}

static int check_ids(const int *ids, int n, int vocab) {
    for (int i = 0; i < n; i++)
        if (ids[i] >= vocab) {
            fprintf(stderr, "lily: token id %d is not below the vocabulary size %d\n", ids[i], vocab);
            return -1;
        }
    return 0;
}

// FNV-1a over the bytes of the logits (a fingerprint, not a checksum of anything else).
static uint32_t hash_logits(uint32_t h, const float *x, size_t n) {
    const unsigned char *p = (const unsigned char *)x;
    for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

// ---------------------------------------------------------------------------------------------
int cli_logits(int argc, char **argv) {
    struct cli_opt o[] = {{"--model", 1, NULL}, {"--ids", 1, NULL}, {"--step", 1, NULL},
                          {"--backend", 1, NULL}, {"--out", 1, NULL}};
    int no = (int)(sizeof o / sizeof o[0]);
    if (cli_parse(argc, argv, o, no)) return 2;
    const char *model = cli_get(o, no, "--model"), *ids_s = cli_get(o, no, "--ids");
    const char *out = cli_get(o, no, "--out"), *backend = cli_get(o, no, "--backend");
    if (!model) model = cli_default_model();
    if (!ids_s || !out) {
        fprintf(stderr, "lily logits: --ids and --out are required\n");
        return 2;
    }
    int *ids;
    int n = parse_ids(ids_s, &ids);
    if (n < 0) return 2;
    long step;
    if (cli_get_int(o, no, "--step", n, 1, MAX_IDS, &step) < 0) {
        free(ids);
        return 2;
    }

    struct run r;
    int rc = run_open(&r, model, backend ? backend : "cpu", n);
    if (rc == 0 && check_ids(ids, n, r.m.cfg.vocab_size) < 0) rc = 2;
    float *logits = NULL;
    if (rc == 0) {
        size_t V = (size_t)r.m.cfg.vocab_size;
        logits = malloc((size_t)n * V * sizeof(float));
        if (!logits) {
            fprintf(stderr, "lily: no memory for %d x %zu logits\n", n, V);
            rc = 1;
        }
        double t0 = lily_time();
        for (int i = 0; rc == 0 && i < n; i += (int)step) {
            int k = n - i < step ? n - i : (int)step;
            if (r.be->forward(r.ctx, r.st, ids + i, k, logits + (size_t)i * V, 1) < 0) {
                fprintf(stderr, "lily: %s\n", lily_err_msg());
                rc = 1;
            }
        }
        if (rc == 0) {
            LOG_INFO("logits: %d tokens in %.3f s (step %ld, %s), hash #%08x", n,
                     lily_time() - t0, step, r.be->name, hash_logits(2166136261u, logits, n * V));
            FILE *f = fopen(out, "wb");
            // The file format is little-endian float32; x86-64 and aarch64 hosts are little-endian.
            if (!f || fwrite(logits, sizeof(float), n * V, f) != n * V) {
                fprintf(stderr, "lily: cannot write %s\n", out);
                rc = 1;
            }
            if (f && fclose(f) != 0 && rc == 0) {
                fprintf(stderr, "lily: cannot write %s\n", out);
                rc = 1;
            }
        }
    }
    free(logits);
    free(ids);
    run_close(&r);
    return rc;
}

// ---------------------------------------------------------------------------------------------
int cli_generate(int argc, char **argv) {
    struct cli_opt o[] = {{"--model", 1, NULL}, {"--ids", 1, NULL}, {"-n", 1, NULL},
                          {"--backend", 1, NULL}};
    int no = (int)(sizeof o / sizeof o[0]);
    if (cli_parse(argc, argv, o, no)) return 2;
    const char *model = cli_get(o, no, "--model"), *ids_s = cli_get(o, no, "--ids");
    const char *backend = cli_get(o, no, "--backend");
    if (!model) model = cli_default_model();
    if (!ids_s) {
        fprintf(stderr, "lily generate: --ids is required\n");
        return 2;
    }
    int *ids;
    int n = parse_ids(ids_s, &ids);
    if (n < 0) return 2;
    long gen;
    if (cli_get_int(o, no, "-n", 16, 0, MAX_IDS, &gen) < 0) {
        free(ids);
        return 2;
    }

    struct run r;
    int rc = run_open(&r, model, backend ? backend : "cpu", n + (int)gen);
    if (rc == 0 && check_ids(ids, n, r.m.cfg.vocab_size) < 0) rc = 2;
    if (rc == 0) {
        int V = r.m.cfg.vocab_size;
        float *logits = xmalloc((size_t)V * sizeof(float));
        uint32_t h = 2166136261u;
        int tok = -1, made = 0;
        double t0 = lily_time(), t1 = t0;
        // Prefill the prompt, then feed back the argmax one token at a time.
        for (long i = 0; i < gen; i++) {
            if (r.be->forward(r.ctx, r.st, i == 0 ? ids : &tok, i == 0 ? n : 1, logits, 0) < 0) {
                fprintf(stderr, "lily: %s\n", lily_err_msg());
                rc = 1;
                break;
            }
            if (i == 0) t1 = lily_time();
            h = hash_logits(h, logits, (size_t)V);
            tok = 0;
            for (int v = 1; v < V; v++)
                if (logits[v] > logits[tok]) tok = v;
            printf("%s%d", i ? "," : "", tok);
            made++;
            fflush(stdout);
            int stop = 0;
            for (int e = 0; e < r.m.cfg.n_eos; e++) stop |= tok == r.m.cfg.eos_ids[e];
            if (stop) break;
        }
        if (rc == 0) {
            printf("\n");
            double t2 = lily_time();
            LOG_INFO("generate: prefill %d tokens %.3f s, decode %.1f tok/s, logits hash #%08x", n,
                     t1 - t0, made > 1 ? (made - 1) / (t2 - t1 + 1e-9) : 0.0, h);
        }
        free(logits);
    }
    free(ids);
    run_close(&r);
    return rc;
}
