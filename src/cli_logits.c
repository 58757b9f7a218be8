// cli_logits.c: placeholder, replaced when the CPU backend lands.
#include <stdio.h>

#include "cli.h"

int cli_logits(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "lily logits: not implemented yet\n");
    return 2;
}

int cli_generate(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "lily generate: not implemented yet\n");
    return 2;
}
