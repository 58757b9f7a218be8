// cli_bench.c: the `lily bench` and `lily ppl` verbs: option parsing only; the work is in bench.c,
// bench_report.c and ppl.c. These flags are a stable interface (docs/PERF.md, CI scripts).
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

static const char *bench_usage =
    "usage: lily bench [--model DIR] [--backend cpu|cuda] [--prefill LIST] [--decode LIST]\n"
    "                  [--lengths LIST] [--reps N] [--warmup N] [--steps N] [--ablate NAME[,NAME]]\n"
    "                  [--out PREFIX] [--no-plot] [--no-ceilings]\n"
    "       lily bench --compare A.json B.json\n"
    "       lily bench --merge OUT A.json [B.json ...]   (one sweep run in parts: OUT.json, OUT.png)\n"
    "  LIST: lengths such as 256,512,1K (K = 1024) or 'none'; default 256,512,1K,...,128K.\n"
    "  --lengths sets both sweeps. Each point: median of --reps timed repetitions (default 3,\n"
    "  at most 16) after --warmup (default 1); a decode repetition is --steps steps (default 16).\n"
    "  Writes PREFIX.json and PREFIX.png (default prefix bench-BACKEND).\n";

int cli_bench(int argc, char **argv) {
    // --compare takes two values, which the shared parser does not do: handle it first.
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--compare")) continue;
        if (argc != 4 || i != 1) {
            fprintf(stderr, "lily bench: use --compare A.json B.json on its own\n");
            return 2;
        }
        return bench_compare(argv[2], argv[3]);
    }
    if (argc >= 2 && !strcmp(argv[1], "--merge")) {
        if (argc < 4) {
            fprintf(stderr, "lily bench: use --merge OUT A.json [B.json ...]\n");
            return 2;
        }
        return bench_merge(argv[2], argv + 3, argc - 3);
    }
    struct cli_opt opts[] = {
        {"--model", 1, NULL},   {"--backend", 1, NULL}, {"--prefill", 1, NULL},
        {"--decode", 1, NULL},  {"--lengths", 1, NULL}, {"--reps", 1, NULL},
        {"--warmup", 1, NULL},  {"--steps", 1, NULL},   {"--ablate", 1, NULL},
        {"--out", 1, NULL},     {"--no-plot", 0, NULL}, {"--no-ceilings", 0, NULL},
        {"--help", 0, NULL},
    };
    const int n = (int)(sizeof opts / sizeof opts[0]);
    if (cli_parse(argc, argv, opts, n)) {
        fputs(bench_usage, stderr);
        return 2;
    }
    if (cli_get(opts, n, "--help")) {
        fputs(bench_usage, stdout);
        return 0;
    }
    struct bench_opts o;
    memset(&o, 0, sizeof o);
    o.model = cli_get(opts, n, "--model");
    if (!o.model) o.model = cli_default_model();
    o.backend = cli_get(opts, n, "--backend");
    if (!o.backend) o.backend = "cpu";
    const char *def = "256,512,1K,2K,4K,8K,16K,32K,64K,128K";
    const char *both = cli_get(opts, n, "--lengths");
    const char *pf = cli_get(opts, n, "--prefill"), *dc = cli_get(opts, n, "--decode");
    o.n_prefill = bench_parse_lengths(pf ? pf : both ? both : def, o.prefill, BENCH_MAX_POINTS);
    o.n_decode = bench_parse_lengths(dc ? dc : both ? both : def, o.decode, BENCH_MAX_POINTS);
    if (o.n_prefill < 0 || o.n_decode < 0) return 2;
    long reps, warmup, steps;
    if (cli_get_int(opts, n, "--reps", 3, 1, 16, &reps) ||
        cli_get_int(opts, n, "--warmup", 1, 0, 100, &warmup) ||
        cli_get_int(opts, n, "--steps", 16, 1, 100000, &steps))
        return 2;
    o.reps = (int)reps;
    o.warmup = (int)warmup;
    o.steps = (int)steps;
    o.ablate = cli_get(opts, n, "--ablate");
    o.no_plot = cli_get(opts, n, "--no-plot") != NULL;
    o.no_ceilings = cli_get(opts, n, "--no-ceilings") != NULL;
    char prefix[256];
    snprintf(prefix, sizeof prefix, "bench-%s", o.backend);
    o.out = cli_get(opts, n, "--out");
    if (!o.out) o.out = prefix;
    return bench_run(&o);
}

static const char *ppl_usage =
    "usage: lily ppl [--model DIR] --tokens FILE [--ref-logits FILE] [--backend cpu|cuda]\n"
    "                [--json FILE] [--chunk N] [--per-position]\n"
    "  FILE of token ids separated by commas or white space; --ref-logits: float32 [n, vocab]\n"
    "  as `lily logits` writes. Prints the perplexity and, against the reference, the top-1\n"
    "  agreement, the logit error and the KL divergence, in total (and per position).\n";

int cli_ppl(int argc, char **argv) {
    struct cli_opt opts[] = {
        {"--model", 1, NULL},      {"--tokens", 1, NULL}, {"--ref-logits", 1, NULL},
        {"--backend", 1, NULL},    {"--json", 1, NULL},   {"--chunk", 1, NULL},
        {"--per-position", 0, NULL}, {"--help", 0, NULL},
    };
    const int n = (int)(sizeof opts / sizeof opts[0]);
    if (cli_parse(argc, argv, opts, n)) {
        fputs(ppl_usage, stderr);
        return 2;
    }
    if (cli_get(opts, n, "--help")) {
        fputs(ppl_usage, stdout);
        return 0;
    }
    struct ppl_opts o;
    memset(&o, 0, sizeof o);
    o.model = cli_get(opts, n, "--model");
    if (!o.model) o.model = cli_default_model();
    o.tokens = cli_get(opts, n, "--tokens");
    if (!o.tokens) {
        fprintf(stderr, "lily ppl: --tokens FILE is required\n%s", ppl_usage);
        return 2;
    }
    o.backend = cli_get(opts, n, "--backend");
    if (!o.backend) o.backend = "cpu";
    o.ref_logits = cli_get(opts, n, "--ref-logits");
    o.json = cli_get(opts, n, "--json");
    o.per_position = cli_get(opts, n, "--per-position") != NULL;
    long chunk;
    if (cli_get_int(opts, n, "--chunk", 128, 1, 1 << 20, &chunk)) return 2;
    o.chunk = (int)chunk;
    return ppl_run(&o);
}
