// cli.h: the command-line verbs of `lily` (dispatched from main.c) and a tiny option parser.
// Each verb returns the process exit code. Errors are one line on stderr: "lily: <message>".
#ifndef LILY_CLI_H
#define LILY_CLI_H

// Verbs, one family per file: cli_model.c (info, quantize, synth), cli_logits.c (logits, generate),
// cli_text.c (tokenize, detokenize), cli_prompt.c (prompt), cli_serve.c (serve, run, chat), cli_bench.c (bench, ppl).
int cli_logits(int argc, char **argv);
int cli_info(int argc, char **argv);
int cli_generate(int argc, char **argv);
int cli_quantize(int argc, char **argv);
int cli_synth(int argc, char **argv);
int cli_tokenize(int argc, char **argv);
int cli_detokenize(int argc, char **argv);
int cli_prompt(int argc, char **argv);
int cli_serve(int argc, char **argv);
int cli_run(int argc, char **argv);
int cli_chat(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_ppl(int argc, char **argv);

// Options: fill a table, call cli_parse, read values back.
//   struct cli_opt opts[] = {{"--model", 1}, {"--ids", 1}, {"--verbose", 0}};
//   if (cli_parse(argc, argv, opts, 3)) return 2;
//   const char *model = cli_get(opts, 3, "--model");
struct cli_opt {
    const char *name;
    int has_arg;     // 1 = takes a value ("--model DIR" or "--model=DIR"), 0 = a flag
    const char *val; // value (or "1" for a set flag); NULL if absent
};
// Parses argv[1..argc) (argv[0] is the verb). Unknown options and stray arguments are errors
// (printed, returns 2). The last occurrence of an option wins.
int cli_parse(int argc, char **argv, struct cli_opt *opts, int n);
const char *cli_get(const struct cli_opt *opts, int n, const char *name);
// Integer option with a default and an inclusive range; prints an error and returns -1 on failure.
int cli_get_int(const struct cli_opt *opts, int n, const char *name, long def, long lo, long hi,
                long *out);

// The model directory to use when --model is absent: $LILY_MODEL, else the bundled demo model.
const char *cli_default_model(void);

#endif
