// main.c: `lily VERB [options]`: dispatch to the verbs of cli.h, and the shared option parser.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "common.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} verbs[] = {
    {"run", cli_run, "run -p TEXT [--model DIR]: one-shot chat completion, streamed"},
    {"chat", cli_chat, "chat [--model DIR]: interactive chat in the terminal"},
    {"serve", cli_serve, "serve [--model DIR] [--host H] [--port P]: OpenAI-compatible server"},
    {"logits", cli_logits, "logits --model DIR --ids 1,2,3 [--step N] [--backend B] --out FILE"},
    {"generate", cli_generate, "generate --model DIR --ids 1,2,3 [-n N]: greedy generation from ids"},
    {"info", cli_info, "info --model DIR: config, tensors, bytes, quantisation"},
    {"tokenize", cli_tokenize, "tokenize --model DIR (--text STR | --file PATH): token ids as JSON"},
    {"detokenize", cli_detokenize, "detokenize --model DIR --ids 1,2,3: text of the ids"},
    {"prompt", cli_prompt, "prompt --model DIR --request FILE: the rendered chat template"},
    {"bench", cli_bench, "bench --model DIR: ceilings, prefill and decode sweeps"},
    {"ppl", cli_ppl, "ppl --model DIR --tokens FILE [--ref-logits FILE]: perplexity, agreement"},
    {"quantize", cli_quantize, "quantize --in DIR --out DIR [--bits 4 --group-size 64]"},
    {"synth", cli_synth, "synth --preset NAME --out DIR [--seed S]: random-weight checkpoint"},
};
#define N_VERBS ((int)(sizeof verbs / sizeof verbs[0]))

static void usage(FILE *f) {
    fprintf(f, "lily %s: an inference engine for the Qwen3.5/3.6 hybrid MoE decoder\n\nusage:\n",
            LILY_VERSION);
    for (int i = 0; i < N_VERBS; i++) fprintf(f, "  lily %s\n", verbs[i].help);
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
        !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("lily %s\n", LILY_VERSION);
        return 0;
    }
    for (int i = 0; i < N_VERBS; i++)
        if (!strcmp(argv[1], verbs[i].name)) return verbs[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "lily: unknown command '%s' (see lily --help)\n", argv[1]);
    return 2;
}
