// cli_prompt.c: placeholder, replaced when the chat template lands.
#include <stdio.h>

#include "cli.h"

int cli_prompt(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "lily prompt: not implemented yet\n");
    return 2;
}
