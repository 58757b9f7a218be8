// cli_text.c: `lily tokenize` and `lily detokenize`, the tokenizer on the command line.
//
//   lily tokenize --model DIR (--text STR | --file PATH) [--no-special]
//       prints the ids as a JSON array: [9707, 11, 1879]
//   lily detokenize --model DIR --ids 1,2,3 [--skip-special]
//       prints the decoded text, exactly (no newline added)
// DIR needs only tokenizer.json (tokenizer_config.json optional). Added and special tokens in the
// text are matched, as HF tokenizers does by default; --no-special treats all text as plain.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "tokenizer.h"

static int fail(void) {
    fprintf(stderr, "lily: %s\n", lily_err_msg());
    return 1;
}

int cli_tokenize(int argc, char **argv) {
    struct cli_opt o[] = {{"--model", 1, NULL}, {"--text", 1, NULL}, {"--file", 1, NULL}, {"--no-special", 0, NULL}};
    int no = 4;
    if (cli_parse(argc, argv, o, no)) return 2;
    const char *dir = cli_get(o, no, "--model"), *text = cli_get(o, no, "--text"), *file = cli_get(o, no, "--file");
    if (!dir) dir = cli_default_model();
    if (!text == !file) {
        fprintf(stderr, "lily tokenize: give exactly one of --text STR or --file PATH\n");
        return 2;
    }
    char *buf = NULL;
    size_t len;
    if (file) {
        if (lily_read_file(file, 0, &buf, &len)) return fail();
        text = buf;
    } else {
        len = strlen(text);
    }
    struct lily_tokenizer *t;
    if (tok_load(dir, &t)) {
        free(buf);
        return fail();
    }
    int *ids, n;
    int rc = tok_encode(t, text, len, !cli_get(o, no, "--no-special"), &ids, &n);
    if (rc && file) { // name the file in the message, not "text"
        char m[512]; // copied: the message buffer is also lily_err_set's destination
        snprintf(m, sizeof m, "%s", lily_err_msg());
        if (!strncmp(m, "text: ", 6)) lily_err_set(rc, "%s: %s", file, m + 6);
    }
    free(buf);
    if (rc) {
        tok_free(t);
        return fail();
    }
    // One buffered write: a 1 MiB input gives ~a million ids.
    size_t cap = (size_t)n * 10 + 4, w = 0;
    char *o_buf = xmalloc(cap);
    o_buf[w++] = '[';
    for (int i = 0; i < n; i++) w += (size_t)snprintf(o_buf + w, cap - w, i ? ", %d" : "%d", ids[i]);
    o_buf[w++] = ']';
    o_buf[w++] = '\n';
    fwrite(o_buf, 1, w, stdout);
    free(o_buf);
    free(ids);
    tok_free(t);
    return fflush(stdout) ? 1 : 0;
}

int cli_detokenize(int argc, char **argv) {
    struct cli_opt o[] = {{"--model", 1, NULL}, {"--ids", 1, NULL}, {"--skip-special", 0, NULL}};
    int no = 3;
    if (cli_parse(argc, argv, o, no)) return 2;
    const char *dir = cli_get(o, no, "--model"), *list = cli_get(o, no, "--ids");
    if (!dir) dir = cli_default_model();
    if (!list) {
        fprintf(stderr, "lily detokenize: --ids 1,2,3 is required\n");
        return 2;
    }
    int *ids, n;
    if (lily_parse_ids(list, 0, &ids, &n)) {
        fprintf(stderr, "lily: --ids: %s\n", lily_err_msg());
        return 1;
    }
    struct lily_tokenizer *t;
    if (tok_load(dir, &t)) {
        free(ids);
        return fail();
    }
    char *text;
    size_t len;
    int rc = tok_decode(t, ids, n, cli_get(o, no, "--skip-special") != NULL, &text, &len);
    free(ids);
    tok_free(t);
    if (rc) return fail();
    fwrite(text, 1, len, stdout);
    free(text);
    return fflush(stdout) ? 1 : 0;
}
