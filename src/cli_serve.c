// cli_serve.c: placeholder verbs, replaced as their subsystems land.
#include <stdio.h>

#include "cli.h"

int cli_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "lily serve: not implemented yet\n");
    return 2;
}

int cli_run(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "lily run: not implemented yet\n");
    return 2;
}

int cli_chat(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "lily chat: not implemented yet\n");
    return 2;
}

