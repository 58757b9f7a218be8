// cli_model.c: the model-file verbs: `lily info` (summary of a checkpoint), `lily quantize`
// (bf16 -> MLX affine) and `lily synth` (random-weight checkpoints for tests and speed work).
#include <stdio.h>

#include "cli.h"
#include "common.h"
#include "loader.h"

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
    (void)argc;
    (void)argv;
    fprintf(stderr, "lily quantize: not implemented yet\n");
    return 2;
}

int cli_synth(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "lily synth: not implemented yet\n");
    return 2;
}
