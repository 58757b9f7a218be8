// cli_text.c: placeholder verbs, replaced as their subsystems land.
#include <stdio.h>

#include "cli.h"

int cli_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "lily tokenize: not implemented yet\n");
    return 2;
}

int cli_detokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "lily detokenize: not implemented yet\n");
    return 2;
}


