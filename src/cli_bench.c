// cli_bench.c: placeholder verbs, replaced as their subsystems land.
#include <stdio.h>

#include "cli.h"

int cli_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "lily bench: not implemented yet\n");
    return 2;
}

int cli_ppl(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "lily ppl: not implemented yet\n");
    return 2;
}

