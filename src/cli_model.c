// cli_model.c: placeholder verbs, replaced as their subsystems land.
#include <stdio.h>

#include "cli.h"


int cli_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "lily info: not implemented yet\n");
    return 2;
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

