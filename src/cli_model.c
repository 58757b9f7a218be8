// cli_model.c: the model-file verbs: `lily info` (summary of a checkpoint), `lily quantize`
// (bf16 -> MLX affine) and `lily synth` (random-weight checkpoints for tests and speed work).
#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "common.h"
#include "loader.h"
#include "quantize.h"
#include "synth.h"

int cli_info(int argc, char **argv) {
    struct cli_opt o[] = {{"--model", 1, NULL}};
    if (cli_parse(argc, argv, o, 1)) return 2;
    const char *dir = cli_get(o, 1, "--model");
    if (!dir) dir = cli_default_model();
    struct lily_model m;
    double t0 = lily_time();
    if (lily_model_load(dir, &m)) {
        fprintf(stderr, "lily: %s\n", lily_err_msg());
        return 1;
    }
    lily_model_print_info(&m, stdout);
    printf("load time    %.2f s\n", lily_time() - t0);
    lily_model_free(&m);
    return 0;
}

int cli_quantize(int argc, char **argv) {
    struct cli_opt o[] = {{"--in", 1, NULL},
                          {"--out", 1, NULL},
                          {"--bits", 1, NULL},
                          {"--group-size", 1, NULL},
                          {"--threads", 1, NULL}};
    int n = (int)(sizeof o / sizeof o[0]);
    if (cli_parse(argc, argv, o, n)) return 2;
    const char *in = cli_get(o, n, "--in"), *out = cli_get(o, n, "--out");
    long bits, group, threads;
    if (!in || !out) {
        fprintf(stderr, "usage: lily quantize --in DIR --out DIR [--bits 4] [--group-size 64] [--threads T]\n");
        return 2;
    }
    if (cli_get_int(o, n, "--bits", 4, 2, 8, &bits) ||
        cli_get_int(o, n, "--group-size", 64, 32, 128, &group) ||
        cli_get_int(o, n, "--threads", 0, 0, 1024, &threads))
        return 2;
    double t0 = lily_time();
    if (quantize_model(in, out, (int)bits, (int)group, (int)threads)) {
        fprintf(stderr, "lily: %s\n", lily_err_msg());
        return 1;
    }
    fprintf(stderr, "lily quantize: done in %.1f s\n", lily_time() - t0);
    return 0;
}

int cli_synth(int argc, char **argv) {
    struct cli_opt o[] = {{"--preset", 1, NULL}, {"--out", 1, NULL},        {"--seed", 1, NULL},
                          {"--vocab", 1, NULL},  {"--bits", 1, NULL},       {"--group-size", 1, NULL},
                          {"--threads", 1, NULL}};
    int n = (int)(sizeof o / sizeof o[0]);
    if (cli_parse(argc, argv, o, n)) return 2;
    struct synth_opts so = {.preset = cli_get(o, n, "--preset"), .out = cli_get(o, n, "--out")};
    long seed, vocab, bits, group, threads;
    if (!so.preset || !so.out) {
        fprintf(stderr, "usage: lily synth --preset (%s) --out DIR [--seed S] [--vocab N] [--bits B] "
                        "[--group-size G] [--threads T]\n", synth_presets());
        return 2;
    }
    if (cli_get_int(o, n, "--seed", 0, 0, 1L << 62, &seed) ||
        cli_get_int(o, n, "--vocab", 0, 1, 1L << 22, &vocab) ||
        cli_get_int(o, n, "--bits", 4, 2, 8, &bits) ||
        cli_get_int(o, n, "--group-size", 64, 32, 128, &group) ||
        cli_get_int(o, n, "--threads", 0, 0, 1024, &threads))
        return 2;
    so.seed = (uint64_t)seed;
    so.vocab = (int)vocab;
    so.bits = (int)bits;
    so.group = (int)group;
    so.threads = (int)threads;
    if (synth_write(&so)) {
        fprintf(stderr, "lily: %s\n", lily_err_msg());
        return 1;
    }
    return 0;
}
