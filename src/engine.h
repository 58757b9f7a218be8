// engine.h: the one thread that owns the model. It holds the backend context, the sequence state,
// the prefix cache of state snapshots and the task queue; HTTP threads and the terminal verbs only
// submit tasks and read their events (STYLE.md item 15).
//
//   struct engine *e;  engine_new(&opts, &e);
//   struct engine_task *t;  engine_submit(e, &req, &t);          // 0, or ENGINE_BUSY when full
//   struct engine_event ev;
//   while (engine_next(t, &ev, 1.0) >= 0 && ev.type != ENGINE_EV_DONE) { use ev.text; ... }
//   engine_task_release(t);                                      // cancels if still running
//
// Prefix reuse: the state at the end of each prompt, at the end of each generation, just before the
// last <|im_start|> of a prompt (where the next turn's history diverges from this turn's generation
// prompt), and every `snapshot_every` tokens inside long prompts is saved into an LRU cache
// (prefix_cache.h). A task resumes from the longest snapshot whose tokens start its prompt.
#ifndef LILY_ENGINE_H
#define LILY_ENGINE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "sampler.h"
#include "template.h"
#include "tokenizer.h"

#define ENGINE_BUSY 1 // engine_submit: queue full, try again later

struct engine_opts {
    const char *model_dir;
    const char *backend;     // "cpu" (default) or "cuda"
    int max_ctx;             // context length per sequence (0 = min(model max, 32768))
    int queue_max;           // queued tasks beyond the running one (0 = 16)
    size_t cache_bytes;      // prefix-cache budget (0 = no cache)
    int snapshot_every;      // periodic snapshot interval inside prompts (0 = 4096, or the
                             // backend's prefill piece if longer: 16384 on CUDA)
    // Testing hook (LILY_TEST_OUTPUT, read by `lily serve`): when set, every generation emits
    // this text's tokens (added tokens matched, then an end token) instead of sampling, while the
    // model still runs, so tests can drive tool calls and reasoning through a random-weight model.
    const char *test_output;
    // Default chat_template_kwargs (a JSON object as text, e.g. {"enable_thinking": false}) for
    // chat requests that do not set them; they override the model directory's own defaults
    // (tokenizer_config.json "chat_template_kwargs"). NULL: the model's defaults only.
    const char *chat_template_kwargs;
};

struct engine;

// Load the model, tokenizer and chat template, start the loop thread. Returns 0 or LILY_E*.
int engine_new(const struct engine_opts *o, struct engine **out);
// Stop the loop (queued and running tasks end with ENGINE_FINISH_CANCELLED) and free everything.
void engine_free(struct engine *e);

const struct lily_tokenizer *engine_tok(const struct engine *e);
const struct lily_template *engine_tmpl(const struct engine *e);
int engine_max_ctx(const struct engine *e);
int engine_n_vocab(const struct engine *e);

// Render a chat request (jansson object as oai_parse normalises it) with the generation prompt and
// tokenize it so that request content can never become control tokens. *ids is malloc'd.
// The default chat_template_kwargs (engine_opts) that `request` does not set itself are filled into
// it first, so the request then says how it was rendered (the server's parser reads it after).
int engine_encode_chat(const struct engine *e, json_t *request, int **ids, int *n);

struct engine_req {
    const int *prompt;        // copied
    int n_prompt;
    struct sampler_params sp; // bias copied
    int max_tokens;           // <= 0: up to the end of the context
    const char *const *stop;  // copied
    int n_stop;
    int top_logprobs;         // -1 = no logprobs; 0..20 = logprobs with that many alternatives
};

enum engine_ev_type { ENGINE_EV_TOKEN = 0, ENGINE_EV_DONE = 1 };
enum engine_finish {
    ENGINE_FINISH_STOP = 0,      // an end token or a stop string
    ENGINE_FINISH_LENGTH = 1,    // max_tokens or the end of the context
    ENGINE_FINISH_CANCELLED = 2, // engine_cancel, or the engine shutting down
    ENGINE_FINISH_ERROR = 3      // backend failure: err_msg says why
};

#define ENGINE_MAX_TOP 20
struct engine_event {
    int type;
    // ENGINE_EV_TOKEN: the text this token releases (may be empty: held back as a possible stop
    // string or incomplete UTF-8), malloc'd, NUL-terminated; the token and its log-probabilities.
    char *text;
    size_t len;
    int token;
    float logprob;
    int n_top;
    int top_ids[ENGINE_MAX_TOP];
    float top_lp[ENGINE_MAX_TOP];
    // ENGINE_EV_DONE (text may carry the last released text)
    int finish;
    int n_prompt, n_cached, n_gen;
    double queue_s, prefill_s, decode_s;
    char err_msg[256];
};
void engine_event_free(struct engine_event *ev);

struct engine_task;

// Queue a task (copies everything it needs). Returns 0, ENGINE_BUSY, or LILY_E* (bad request:
// prompt empty or not shorter than the context, with lily_err_msg()).
int engine_submit(struct engine *e, const struct engine_req *r, struct engine_task **out);
// Wait up to timeout_s for the next event. Returns 1 with *ev filled (free with engine_event_free),
// 0 on timeout. After the DONE event there are no more.
int engine_next(struct engine_task *t, struct engine_event *ev, double timeout_s);
// Ask the engine to stop this task (it ends within a token or one prefill chunk).
void engine_cancel(struct engine_task *t);
// Drop the caller's reference (cancelling first if the task has not finished).
void engine_task_release(struct engine_task *t);

// Counters for /metrics and the terminal verbs.
struct engine_metrics {
    long requests, requests_cancelled, requests_failed;
    long prompt_tokens, cached_tokens, gen_tokens;
    double prefill_s, decode_s;
    long cache_hits, cache_misses, cache_entries;
    size_t cache_bytes;
    int queue_depth;
    int busy;
    long running_gen; // tokens generated so far by the running task (progress; 0 when idle)
};
void engine_get_metrics(struct engine *e, struct engine_metrics *m);

// Text of one token as the model would print it (malloc'd); for logprobs.
char *engine_token_text(const struct engine *e, int id, size_t *len);

#endif
