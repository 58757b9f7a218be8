// cli_prompt.c: `lily prompt --model DIR --request FILE`: print exactly the text the chat template
// renders for an OpenAI chat-completions request body (with the generation prompt), nothing added.
// DIR needs only the template (chat_template.jinja or tokenizer_config.json). Errors: one line on
// stderr, exit 1 (2 for bad usage).
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "common.h"
#include "template.h"

int cli_prompt(int argc, char **argv) {
    struct cli_opt opts[] = {{"--model", 1, NULL}, {"--request", 1, NULL},
                             {"--no-generation-prompt", 0, NULL}};
    int nopt = 3;
    if (cli_parse(argc, argv, opts, nopt)) return 2;
    const char *model = cli_get(opts, nopt, "--model");
    const char *req_path = cli_get(opts, nopt, "--request");
    if (!model) model = cli_default_model();
    if (!req_path) {
        fprintf(stderr, "lily prompt: --request FILE is required (an OpenAI chat request body)\n");
        return 2;
    }
    char *body;
    size_t n;
    if (lily_read_file(req_path, 256u << 20, &body, &n)) {
        fprintf(stderr, "lily: %s\n", lily_err_msg());
        return 1;
    }
    json_error_t je;
    json_t *req = json_loadb(body, n, 0, &je);
    free(body);
    if (!req) {
        fprintf(stderr, "lily: %s: line %d column %d: %s\n", req_path, je.line, je.column, je.text);
        return 1;
    }
    struct lily_template *t;
    int rc = tmpl_load(model, &t);
    if (rc) {
        json_decref(req);
        fprintf(stderr, "lily: %s\n", lily_err_msg());
        return 1;
    }
    char *text;
    size_t len;
    rc = tmpl_render(t, req, !cli_get(opts, nopt, "--no-generation-prompt"), &text, &len, NULL,
                     NULL);
    json_decref(req);
    tmpl_free(t);
    if (rc) {
        fprintf(stderr, "lily: %s: %s\n", req_path, lily_err_msg());
        return 1;
    }
    int ok = fwrite(text, 1, len, stdout) == len && fflush(stdout) == 0;
    free(text);
    if (!ok) {
        fprintf(stderr, "lily: prompt: write error\n");
        return 1;
    }
    return 0;
}
