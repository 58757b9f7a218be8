// cli_serve.c: the verbs that run the engine: `lily serve` (the OpenAI-compatible server),
// `lily run` (one chat turn, streamed to the terminal) and `lily chat` (interactive). run and chat
// talk to the engine directly, through the same task queue the server uses.
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "common.h"
#include "engine.h"
#include "parse.h"
#include "server/server.h"

// Options every engine verb takes; `extra` are the verb's own.
#define ENGINE_OPTS                                                                            \
    {"--model", 1, NULL}, {"--backend", 1, NULL}, {"--ctx", 1, NULL}, {"--cache-mb", 1, NULL},  \
        {"--snapshot-every", 1, NULL}, {"--queue", 1, NULL}, {"--chat-template-kwargs", 1, NULL}

static int engine_from_opts(const struct cli_opt *opts, int n, struct engine **e) {
    struct engine_opts eo = {0};
    long ctx, cache_mb, snap, queue;
    if (cli_get_int(opts, n, "--ctx", 0, 0, 1 << 24, &ctx) ||
        cli_get_int(opts, n, "--cache-mb", 4096, 0, 1 << 24, &cache_mb) ||
        cli_get_int(opts, n, "--snapshot-every", 0, 16, 1 << 24, &snap) ||
        cli_get_int(opts, n, "--queue", 16, 1, 1 << 20, &queue))
        return 2;
    eo.model_dir = cli_get(opts, n, "--model");
    if (!eo.model_dir) eo.model_dir = cli_default_model();
    eo.backend = cli_get(opts, n, "--backend");
    eo.max_ctx = (int)ctx;
    eo.cache_bytes = (size_t)cache_mb << 20;
    eo.snapshot_every = (int)snap;
    eo.queue_max = (int)queue;
    eo.test_output = getenv("LILY_TEST_OUTPUT");
    eo.chat_template_kwargs = cli_get(opts, n, "--chat-template-kwargs");
    int rc = engine_new(&eo, e);
    if (rc) {
        fprintf(stderr, "lily: %s\n", lily_err_msg());
        return 1;
    }
    return 0;
}

static const char *base_name(const char *dir) {
    static char buf[256];
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/') b--;
    snprintf(buf, sizeof buf, "%.*s", (int)(n - b), dir + b);
    return buf[0] ? buf : "lily";
}

// ---------------------------------------------------------------------------------------------
// serve

// The CPU backend reads the weights straight from the mmapped shards, so a model file truncated
// (or rewritten in place) while serving turns the next read of a dropped page into SIGBUS. There
// is no way to go on without the weights: say why and exit 3 rather than die of the raw signal.
// Replacing a model file by renaming a new one into place is safe (the old inode stays mapped).
static void on_sigbus(int sig) {
    (void)sig;
    static const char msg[] =
        "lily serve: fatal: bus error reading the memory-mapped weights: a model file was "
        "truncated or rewritten in place while serving (update models by renaming new files "
        "into place); exiting\n";
    ssize_t k = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)k;
    _exit(3);
}

int cli_serve(int argc, char **argv) {
    struct cli_opt opts[] = {ENGINE_OPTS,          {"--host", 1, NULL},      {"--port", 1, NULL},
                             {"--api-key", 1, NULL}, {"--cors", 1, NULL},      {"--model-id", 1, NULL},
                             {"--timeout", 1, NULL}, {"--max-body", 1, NULL},  {"--max-conns", 1, NULL},
                             {"--max-prompt", 1, NULL}, {"--keepalive", 1, NULL}};
    int n = (int)(sizeof opts / sizeof opts[0]);
    if (cli_parse(argc, argv, opts, n)) return 2;
    struct server_opts so;
    server_opts_default(&so);
    long port, timeout, max_body, max_conns, max_prompt, keepalive;
    if (cli_get_int(opts, n, "--port", 8080, 0, 65535, &port) ||
        cli_get_int(opts, n, "--timeout", 60, 1, 86400, &timeout) ||
        cli_get_int(opts, n, "--max-body", 8 << 20, 1024, 1L << 30, &max_body) ||
        cli_get_int(opts, n, "--max-conns", 64, 1, 4096, &max_conns) ||
        cli_get_int(opts, n, "--max-prompt", 0, 0, 1 << 24, &max_prompt) ||
        cli_get_int(opts, n, "--keepalive", 5, 1, 3600, &keepalive))
        return 2;
    if (cli_get(opts, n, "--host")) so.host = cli_get(opts, n, "--host");
    so.port = (int)port;
    so.timeout_s = (int)timeout;
    so.max_body = (size_t)max_body;
    so.max_conns = (int)max_conns;
    so.max_prompt = (int)max_prompt;
    so.keepalive_s = (int)keepalive;
    so.api_key = cli_get(opts, n, "--api-key");
    if (!so.api_key && getenv("LILY_API_KEY") && *getenv("LILY_API_KEY"))
        so.api_key = getenv("LILY_API_KEY");
    so.cors = cli_get(opts, n, "--cors");
    const char *model = cli_get(opts, n, "--model");
    so.model_id = cli_get(opts, n, "--model-id");
    if (!so.model_id) so.model_id = base_name(model ? model : cli_default_model());
    if (so.keepalive_s >= so.timeout_s) so.keepalive_s = so.timeout_s > 1 ? so.timeout_s / 2 : 1;
    // server_run takes SIGINT/SIGTERM with sigwait, which only works if every thread blocks them:
    // a thread that does not (the engine and the CPU pool start in engine_from_opts) would take
    // the signal's default action and kill the process mid-stream. Block them here, before any
    // thread exists; a signal during the model load stays pending and stops the server at once.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    struct engine *e;
    int rc = engine_from_opts(opts, n, &e);
    if (rc) return rc;
    signal(SIGBUS, on_sigbus);
    rc = server_run(e, &so);
    if (rc) fprintf(stderr, "lily serve: %s\n", lily_err_msg());
    engine_free(e);
    return rc ? 1 : 0;
}

// ---------------------------------------------------------------------------------------------
// run and chat

static atomic_int interrupted;
static void on_sigint(int sig) {
    (void)sig;
    atomic_store(&interrupted, 1);
}

struct turn_opts {
    struct sampler_params sp;
    int max_tokens;
    int think; // 1 thinking on, 0 off, -1 the model's default (engine_encode_chat fills it in)
};

static void put_text(const char *s, int reasoning, int tty, int *in_dim) {
    if (!s || !*s) return;
    FILE *f = reasoning && !tty ? stderr : stdout;
    if (tty && reasoning != *in_dim) {
        fputs(reasoning ? "\033[2m" : "\033[0m", stdout);
        *in_dim = reasoning;
    }
    fputs(s, f);
    fflush(f);
}

// One assistant turn for `messages`: stream it to the terminal, append the assistant message to
// `messages`. Returns 0, or 1 on error (printed).
static int run_turn(struct engine *e, json_t *messages, const struct turn_opts *to) {
    json_t *req = json_pack("{s:O}", "messages", messages);
    if (to->think >= 0)
        json_object_set_new(req, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", to->think));
    int *ids = NULL, n = 0;
    if (engine_encode_chat(e, req, &ids, &n)) {
        fprintf(stderr, "lily: %s\n", lily_err_msg());
        json_decref(req);
        return 1;
    }
    struct engine_req r = {0};
    r.prompt = ids;
    r.n_prompt = n;
    r.sp = to->sp;
    r.max_tokens = to->max_tokens;
    r.top_logprobs = -1;
    struct engine_task *t;
    int rc = engine_submit(e, &r, &t);
    free(ids);
    if (rc) {
        fprintf(stderr, "lily: %s\n", rc == ENGINE_BUSY ? "engine busy" : lily_err_msg());
        json_decref(req);
        return 1;
    }
    struct lily_parser *p = parse_new(tmpl_starts_in_reasoning(engine_tmpl(e), req), NULL, 1);
    int tty = isatty(1), in_dim = 0;
    char *content = NULL, *reasoning = NULL;
    size_t cl = 0, rl = 0;
    struct engine_event ev;
    int failed = 0;
    for (;;) {
        if (!engine_next(t, &ev, 0.1)) {
            if (atomic_load(&interrupted)) engine_cancel(t);
            continue;
        }
        parse_feed(p, ev.text, ev.len);
        if (ev.type == ENGINE_EV_DONE) parse_finish(p);
        struct parse_delta d = {0};
        parse_take(p, &d);
        put_text(d.reasoning, 1, tty, &in_dim);
        put_text(d.content, 0, tty, &in_dim);
        if (d.content) {
            content = xrealloc(content, cl + strlen(d.content) + 1);
            strcpy(content + cl, d.content);
            cl += strlen(d.content);
        }
        if (d.reasoning) {
            reasoning = xrealloc(reasoning, rl + strlen(d.reasoning) + 1);
            strcpy(reasoning + rl, d.reasoning);
            rl += strlen(d.reasoning);
        }
        parse_delta_free(&d);
        if (ev.type == ENGINE_EV_DONE) {
            if (tty && in_dim) fputs("\033[0m", stdout);
            printf("\n");
            for (int i = 0; i < parse_n_tool_calls(p); i++)
                printf("[tool call] %s %s\n", parse_tool_name(p, i), parse_tool_args(p, i));
            fflush(stdout); // the answer's line ends before the stats on stderr, also in a pipe
            int fresh = ev.n_prompt - ev.n_cached;
            fprintf(stderr,
                    "[%d prompt tokens (%d cached), prefill %.1f tok/s, %d generated, decode %.1f "
                    "tok/s%s]\n",
                    ev.n_prompt, ev.n_cached, ev.prefill_s > 0 ? fresh / ev.prefill_s : 0.0,
                    ev.n_gen, ev.decode_s > 0 ? ev.n_gen / ev.decode_s : 0.0,
                    ev.finish == ENGINE_FINISH_LENGTH      ? ", length limit"
                    : ev.finish == ENGINE_FINISH_CANCELLED ? ", interrupted"
                                                           : "");
            if (ev.finish == ENGINE_FINISH_ERROR) {
                fprintf(stderr, "lily: %s\n", ev.err_msg);
                failed = 1;
            }
            engine_event_free(&ev);
            break;
        }
        engine_event_free(&ev);
    }
    json_t *msg = json_pack("{s:s, s:s}", "role", "assistant", "content", content ? content : "");
    if (reasoning) json_object_set_new(msg, "reasoning_content", json_string(reasoning));
    json_array_append_new(messages, msg);
    free(content);
    free(reasoning);
    parse_free(p);
    engine_task_release(t);
    json_decref(req);
    return failed;
}

#define TURN_OPTS                                                                              \
    {"--max-tokens", 1, NULL}, {"--temperature", 1, NULL}, {"--top-p", 1, NULL},               \
        {"--top-k", 1, NULL}, {"--min-p", 1, NULL}, {"--seed", 1, NULL}, {"--no-think", 0, NULL}, \
        {"--think", 0, NULL}, {"--system", 1, NULL}

static int turn_from_opts(const struct cli_opt *opts, int n, struct turn_opts *to) {
    sampler_params_default(&to->sp);
    to->sp.temperature = 0.7f; // Qwen's suggested defaults for chat
    to->sp.top_p = 0.8f;
    to->sp.top_k = 20;
    long mt, topk, seed;
    if (cli_get_int(opts, n, "--max-tokens", 0, 0, 1 << 24, &mt) ||
        cli_get_int(opts, n, "--top-k", 20, -1, 1 << 20, &topk) ||
        cli_get_int(opts, n, "--seed", -1, -1, 0x7fffffffffffffffL, &seed))
        return 2;
    to->max_tokens = (int)mt;
    to->sp.top_k = (int)topk;
    if (seed >= 0) {
        to->sp.has_seed = 1;
        to->sp.seed = (uint64_t)seed;
    }
    const char *names[] = {"--temperature", "--top-p", "--min-p"};
    float *dst[] = {&to->sp.temperature, &to->sp.top_p, &to->sp.min_p};
    const float hi[] = {2.0f, 1.0f, 1.0f};
    for (int i = 0; i < 3; i++) {
        const char *v = cli_get(opts, n, names[i]);
        if (!v) continue;
        char *end;
        float x = strtof(v, &end);
        if (*end || end == v || !(x >= 0 && x <= hi[i])) {
            fprintf(stderr, "lily: %s must be a number in [0, %g]\n", names[i], hi[i]);
            return 2;
        }
        *dst[i] = x;
    }
    if (to->sp.top_p <= 0) to->sp.top_p = 1.0f;
    to->think = cli_get(opts, n, "--no-think") ? 0 : cli_get(opts, n, "--think") ? 1 : -1;
    return 0;
}

static json_t *new_messages(const char *system) {
    json_t *m = json_array();
    if (system) json_array_append_new(m, json_pack("{s:s, s:s}", "role", "system", "content", system));
    return m;
}

int cli_run(int argc, char **argv) {
    struct cli_opt opts[] = {ENGINE_OPTS, TURN_OPTS, {"-p", 1, NULL}};
    int n = (int)(sizeof opts / sizeof opts[0]);
    if (cli_parse(argc, argv, opts, n)) return 2;
    const char *prompt = cli_get(opts, n, "-p");
    if (!prompt) {
        fprintf(stderr, "lily run: -p TEXT is required\n");
        return 2;
    }
    struct turn_opts to;
    if (turn_from_opts(opts, n, &to)) return 2;
    struct engine *e;
    int rc = engine_from_opts(opts, n, &e);
    if (rc) return rc;
    signal(SIGINT, on_sigint);
    json_t *msgs = new_messages(cli_get(opts, n, "--system"));
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", prompt));
    rc = run_turn(e, msgs, &to);
    json_decref(msgs);
    engine_free(e);
    return rc;
}

int cli_chat(int argc, char **argv) {
    struct cli_opt opts[] = {ENGINE_OPTS, TURN_OPTS};
    int n = (int)(sizeof opts / sizeof opts[0]);
    if (cli_parse(argc, argv, opts, n)) return 2;
    struct turn_opts to;
    if (turn_from_opts(opts, n, &to)) return 2;
    struct engine *e;
    int rc = engine_from_opts(opts, n, &e);
    if (rc) return rc;
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    const char *system = cli_get(opts, n, "--system");
    json_t *msgs = new_messages(system);
    int tty = isatty(0);
    if (tty)
        fprintf(stderr, "lily chat: type a message; /reset starts over, /quit (or Ctrl-D) leaves; "
                        "Ctrl-C stops an answer\n");
    size_t cap = 1 << 16;
    char *line = xmalloc(cap);
    for (;;) {
        if (tty) fputs("> ", stdout), fflush(stdout);
        atomic_store(&interrupted, 0);
        if (!fgets(line, (int)cap, stdin)) break;
        size_t k = strlen(line);
        while (k && (line[k - 1] == '\n' || line[k - 1] == '\r')) line[--k] = 0;
        if (!k) continue;
        if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) break;
        if (!strcmp(line, "/reset")) {
            json_decref(msgs);
            msgs = new_messages(system);
            fprintf(stderr, "[conversation reset]\n");
            continue;
        }
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", line));
        if (run_turn(e, msgs, &to)) {
            // Drop the failed user turn so the conversation stays usable.
            json_array_remove(msgs, json_array_size(msgs) - 1);
            json_array_remove(msgs, json_array_size(msgs) - 1);
        }
    }
    free(line);
    json_decref(msgs);
    engine_free(e);
    return 0;
}
