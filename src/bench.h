// bench.h: `lily bench` and `lily ppl`. The cost model (bytes and FLOPs per token, computed from the
// loaded model's config and weight formats), the host ceilings, the prefill/decode sweeps with their
// JSON and plot, and teacher-forced evaluation against reference logits. Method: docs/PERF.md;
// the numbers it is checked against: ../shared/spec/perf-model.md.
#ifndef LILY_BENCH_H
#define LILY_BENCH_H

#include <stddef.h>

#include "model.h"

// ---------------------------------------------------------------------------------------------
// Cost model of one batch-1 token. Every field comes from the model's config and the bytes of its
// weight matrices (lily_mat_bytes), so the roofline is right for any model of the family.
struct bench_cost {
    double weight_bytes;   // weights read per decode token: GDN/attention projections, router,
                           // top-k experts, shared expert, one embedding row, lm_head
    double state_bytes;    // GDN recurrent state (fp32), read and written once per token
    double kv_bytes_ctx;   // KV cache (bf16) read per decode token, per token of context
    double active_params;  // weights touched per token except lm_head (embedding row included)
    double head_flops;     // 2 * V * H: lm_head, once per forward call (last position)
    double attn_flops_ctx; // causal attention FLOPs per (query, key) pair, over all full layers
    double gdn_flops;      // gated delta rule FLOPs per token (state update and readout)
};

void bench_cost_init(const struct lily_model *m, struct bench_cost *c);
// Bytes one decode step reads at context `ctx`.
double bench_decode_bytes(const struct bench_cost *c, double ctx);
// FLOPs per token of a prefill of `len` tokens from an empty state (last-token logits only).
double bench_prefill_flops(const struct bench_cost *c, double len);

// ---------------------------------------------------------------------------------------------
// Sweeps. Lengths are parsed from "256,512,1K,2K" (K = 1024) or "none".
#define BENCH_MAX_POINTS 32

struct bench_opts {
    const char *model;         // model directory
    const char *backend;       // "cpu" / "cuda"
    int prefill[BENCH_MAX_POINTS], n_prefill;
    int decode[BENCH_MAX_POINTS], n_decode;
    int reps, warmup, steps;   // timed repetitions, warm-up repetitions, decode steps per repetition
    const char *ablate;        // comma-separated optimisation names switched off, or NULL
    const char *out;           // output prefix: OUT.json and OUT.png
    int no_plot;
    int no_ceilings;           // skip the ceiling measurement (roofline fractions then 0)
};

// Parse a length list into out[] (at most `cap`); returns the count or -1 with a message printed.
int bench_parse_lengths(const char *s, int *out, int cap);
// Run `lily bench`; returns the process exit code.
int bench_run(const struct bench_opts *o);
// `lily bench --compare A.json B.json`: ratio B/A of tok/s per point; returns the exit code.
int bench_compare(const char *a, const char *b);
// `lily bench --merge OUT A.json [B.json ...]`: the points of runs that make one sweep (a later
// file's point of the same length wins) into OUT.json and OUT.png; returns the exit code.
int bench_merge(const char *out, char **in, int n_in);

// Host ceilings (used when the backend has no ceilings hook): multi-threaded memcpy bandwidth
// (bytes read + written) and a blocked fp32 n x n matmul (n a multiple of 4).
void bench_host_ceilings(size_t bytes, int n, double *copy_gbps, double *gemm_tflops);

// One measured point and a whole run, shared by bench.c (measures) and bench_report.c (writes
// the JSON and the plot).
struct bench_point {
    int len;               // prompt length (prefill) or context (decode)
    double tok_s;          // median over repetitions
    double ms_per_tok;
    double rate;           // achieved TFLOP/s (prefill) or GB/s (decode)
    double roof_tok_s;     // roofline tok/s from the measured ceiling (0 if not measured)
    double roof_frac;      // tok_s / roof_tok_s
    double peak_mem;       // bytes: device peak (backend hook) or process peak RSS
    double times[16];      // seconds per repetition
    int reps;
};

struct bench_result {
    const struct bench_opts *o;
    const struct lily_model *m;
    struct bench_cost cost;
    double copy_gbps, gemm_tflops;
    const char *ceil_source;  // "backend", "host" or "none"
    const char *mem_source;   // "device" or "rss"
    char device[128], clocks[128];
    double mem_total;
    int threads;
    struct bench_point prefill[BENCH_MAX_POINTS], decode[BENCH_MAX_POINTS];
    int n_prefill, n_decode;
};

// Write OUT.json; returns 0 or a negative LILY_E* code with a message.
int bench_write_json(const struct bench_result *r, const char *path);
// Plot tok/s against length to a PNG with gnuplot; a missing gnuplot is a note, not an error.
void bench_plot(const struct bench_result *r, const char *path);

// ---------------------------------------------------------------------------------------------
// Perplexity and agreement with reference logits (ppl.c).
struct ppl_opts {
    const char *model, *backend;
    const char *tokens;        // token id file: decimal ids separated by commas or white space
    const char *ref_logits;    // float32 [n, V] (as `lily logits` writes), or NULL
    const char *json;          // write the result as JSON here, or NULL
    int chunk;                 // tokens per forward call
    int per_position;          // print one line per position
};

// Read token ids from `path`; each must lie in [0, vocab). Returns 0 or a negative LILY_E* code
// with lily_err_msg() set. *ids is malloc'd.
int ppl_read_ids(const char *path, int vocab, int **ids, int *n);
int ppl_run(const struct ppl_opts *o);

#endif
