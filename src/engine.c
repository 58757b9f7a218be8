// engine.c: the engine loop (engine.h). One thread pops tasks in arrival order and runs each to the
// end: resume from the best snapshot, prefill the rest in chunks (checking for cancellation and
// saving snapshots at chosen points), then sample and decode token by token, pushing events to the
// task. Tasks are shared with the submitting thread through a reference count and a per-task lock.
#include "engine.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "common.h"
#include "loader.h"
#include "prefix_cache.h"

// Tokens per forward call while prefilling (the cancellation granularity) when the backend names
// none (lily_backend.prefill_piece).
#define PREFILL_CHUNK 256

struct engine_task {
    // Immutable after submit.
    int *prompt;
    int n_prompt;
    struct sampler_params sp;
    struct sampler_bias *bias;
    int max_tokens;
    char **stop;
    int n_stop;
    int top_logprobs;
    double t_submit;
    // Shared, under mu.
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct engine_event *ev;
    int n_ev, cap_ev, head;
    int refs;
    atomic_int cancel;
    struct engine_task *next; // queue link (engine mutex)
};

struct engine {
    struct lily_model model;
    const struct lily_backend *be;
    void *ctx, *state;
    struct lily_tokenizer *tok;
    struct lily_template *tmpl;
    json_t *chat_kw;          // default chat_template_kwargs (an object; may be empty)
    int max_ctx, n_vocab;
    int eos[8], n_eos;
    int im_start;
    int snapshot_every;
    int *script, n_script;    // test_output tokens (engine_opts)
    struct pcache cache;
    float *logits, *work;     // [n_vocab] raw logits of the last forward, and a scratch copy
    pthread_t thread;
    int started;
    // Queue and metrics, under mu.
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct engine_task *qhead, *qtail;
    int qlen, qmax, stopping;
    struct engine_task *running;
    _Atomic long running_gen; // the running task's done.n_gen, published for /metrics (no lock: the
                              // decode loop must not wait for an HTTP thread holding mu)
    struct engine_metrics m;
};

// ---------------------------------------------------------------------------------------------
// Tasks and events

void engine_event_free(struct engine_event *ev) {
    free(ev->text);
    ev->text = NULL;
}

static void task_push(struct engine_task *t, struct engine_event *ev) {
    pthread_mutex_lock(&t->mu);
    if (t->n_ev == t->cap_ev) {
        t->cap_ev = t->cap_ev ? 2 * t->cap_ev : 64;
        t->ev = xrealloc(t->ev, (size_t)t->cap_ev * sizeof *t->ev);
    }
    t->ev[t->n_ev++] = *ev;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

static void task_unref(struct engine_task *t) {
    pthread_mutex_lock(&t->mu);
    int left = --t->refs;
    pthread_mutex_unlock(&t->mu);
    if (left) return;
    for (int i = t->head; i < t->n_ev; i++) engine_event_free(&t->ev[i]);
    free(t->ev);
    free(t->prompt);
    free(t->bias);
    for (int i = 0; i < t->n_stop; i++) free(t->stop[i]);
    free(t->stop);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}

int engine_next(struct engine_task *t, struct engine_event *ev, double timeout_s) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double when = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + timeout_s;
    ts.tv_sec = (time_t)when;
    ts.tv_nsec = (long)((when - (double)ts.tv_sec) * 1e9);
    pthread_mutex_lock(&t->mu);
    while (t->head == t->n_ev)
        if (pthread_cond_timedwait(&t->cv, &t->mu, &ts)) break;
    int got = t->head < t->n_ev;
    if (got) *ev = t->ev[t->head++];
    pthread_mutex_unlock(&t->mu);
    return got;
}

void engine_cancel(struct engine_task *t) { atomic_store(&t->cancel, 1); }

void engine_task_release(struct engine_task *t) {
    if (!t) return;
    engine_cancel(t); // harmless once finished
    task_unref(t);
}

// ---------------------------------------------------------------------------------------------
// Setup

const struct lily_tokenizer *engine_tok(const struct engine *e) { return e->tok; }
const struct lily_template *engine_tmpl(const struct engine *e) { return e->tmpl; }
int engine_max_ctx(const struct engine *e) { return e->max_ctx; }
int engine_n_vocab(const struct engine *e) { return e->n_vocab; }

static void *engine_loop(void *arg);

static void add_eos(struct engine *e, int id) {
    if (id < 0 || e->n_eos >= 8) return;
    for (int i = 0; i < e->n_eos; i++)
        if (e->eos[i] == id) return;
    e->eos[e->n_eos++] = id;
}

// Check one set of default chat_template_kwargs (`what` names where they came from) and merge
// it into `into`, its keys winning. The template reads enable_thinking / preserve_thinking as
// booleans; other keys are passed on (and ignored by the renderer), as a request's would be.
static int chat_kw_merge(json_t *into, json_t *kw, const char *what) {
    if (!json_is_object(kw))
        return lily_err_set(LILY_EFORMAT, "%s: chat_template_kwargs must be a JSON object", what);
    const char *bools[] = {"enable_thinking", "preserve_thinking"};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(kw, bools[i]);
        if (v && !json_is_boolean(v))
            return lily_err_set(LILY_EFORMAT, "%s: chat_template_kwargs.%s must be true or false",
                                what, bools[i]);
    }
    json_object_update(into, kw);
    return 0;
}

// The model directory's defaults (tokenizer_config.json "chat_template_kwargs", optional), then
// the caller's (engine_opts.chat_template_kwargs).
static int chat_kw_load(const char *dir, const char *opt, json_t **out) {
    *out = json_object();
    char *p = lily_path_join(dir, "tokenizer_config.json"), *buf;
    size_t n;
    int rc = 0;
    if (lily_read_file(p, 64u << 20, &buf, &n) == 0) {
        json_t *cfg = json_loadb(buf, n, 0, NULL); // its syntax errors are the tokenizer's to report
        free(buf);
        json_t *kw = json_object_get(cfg, "chat_template_kwargs");
        if (kw) rc = chat_kw_merge(*out, kw, p);
        json_decref(cfg);
    }
    free(p);
    if (!rc && opt) {
        json_error_t je;
        json_t *kw = json_loads(opt, 0, &je);
        if (!kw) rc = lily_err_set(LILY_EINVAL, "--chat-template-kwargs: %s", je.text);
        else rc = chat_kw_merge(*out, kw, "--chat-template-kwargs");
        json_decref(kw);
    }
    return rc;
}

static void chat_defaults(const struct engine *e, json_t *request) {
    if (!e->chat_kw || !json_object_size(e->chat_kw) || !json_is_object(request)) return;
    json_t *kw = json_object_get(request, "chat_template_kwargs");
    if (!json_is_object(kw)) {
        kw = json_object();
        json_object_set_new(request, "chat_template_kwargs", kw);
    }
    json_object_update_missing(kw, e->chat_kw);
}

// The prefix cache's release of a snapshot (the backend keeps them: lily_backend.snap_save).
static void engine_snap_free(void *arg, void *blob) {
    struct engine *e = arg;
    e->be->snap_free(e->ctx, blob);
}

int engine_new(const struct engine_opts *o, struct engine **out) {
    *out = NULL;
    struct engine *e = xcalloc(1, sizeof *e);
    int rc;
    e->be = lily_backend_get(o->backend ? o->backend : "cpu");
    if (!e->be) {
        free(e);
        return lily_err_set(LILY_EINVAL, "unknown backend '%s'", o->backend);
    }
    if ((rc = lily_model_load(o->model_dir, &e->model))) goto fail;
    if ((rc = tok_load(o->model_dir, &e->tok))) goto fail;
    if (tmpl_load(o->model_dir, &e->tmpl)) {
        // Completions still work without a chat template; chat requests are refused.
        LOG_INFO("lily: no usable chat template (%s); /v1/chat/completions disabled\n",
                 lily_err_msg());
        e->tmpl = NULL;
    }
    if ((rc = chat_kw_load(o->model_dir, o->chat_template_kwargs, &e->chat_kw))) goto fail;
    const struct lily_config *c = &e->model.cfg;
    e->n_vocab = c->vocab_size;
    e->max_ctx = o->max_ctx > 0 ? o->max_ctx : 32768;
    if (c->max_pos > 0 && e->max_ctx > c->max_pos) e->max_ctx = c->max_pos;
    for (int i = 0; i < c->n_eos; i++) add_eos(e, c->eos_ids[i]);
    add_eos(e, tok_find(e->tok, "<|im_end|>"));
    add_eos(e, tok_find(e->tok, "<|endoftext|>"));
    e->im_start = tok_find(e->tok, "<|im_start|>");
    // By default every 4096 tokens, or every prefill piece where the backend's is longer: a snapshot
    // also ends a piece, and on CUDA pieces of 4096 prefill ~10 % slower than the 16384 it takes at
    // once (docs/PERF.md).
    e->snapshot_every = o->snapshot_every > 0 ? o->snapshot_every
                        : e->be->prefill_piece > 4096 ? e->be->prefill_piece : 4096;
    if (o->test_output &&
        (rc = tok_encode(e->tok, o->test_output, strlen(o->test_output), 1, &e->script,
                         &e->n_script)))
        goto fail;
    if ((rc = e->be->init(&e->model, &e->ctx))) goto fail;
    if ((rc = e->be->state_new(e->ctx, e->max_ctx, &e->state))) goto fail;
    const int snaps = e->be->state_save_size && e->be->snap_save && e->be->snap_load && e->be->snap_free;
    pcache_init(&e->cache, snaps ? o->cache_bytes : 0, e->n_vocab, engine_snap_free, e);
    e->logits = xmalloc((size_t)e->n_vocab * sizeof(float));
    e->work = xmalloc((size_t)e->n_vocab * sizeof(float));
    e->qmax = o->queue_max > 0 ? o->queue_max : 16;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    CHECK(pthread_create(&e->thread, NULL, engine_loop, e) == 0);
    e->started = 1;
    *out = e;
    return 0;
fail:
    engine_free(e);
    return rc;
}

void engine_free(struct engine *e) {
    if (!e) return;
    if (e->started) {
        pthread_mutex_lock(&e->mu);
        e->stopping = 1;
        if (e->running) engine_cancel(e->running);
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->cv);
    }
    pcache_free(&e->cache);
    if (e->state) e->be->state_free(e->ctx, e->state);
    if (e->ctx) e->be->free(e->ctx);
    if (e->tmpl) tmpl_free(e->tmpl);
    json_decref(e->chat_kw);
    if (e->tok) tok_free(e->tok);
    lily_model_free(&e->model);
    free(e->logits);
    free(e->work);
    free(e->script);
    free(e);
}

int engine_encode_chat(const struct engine *e, json_t *request, int **ids, int *n) {
    if (!e->tmpl) return lily_err_set(LILY_EUNSUPPORTED, "the model has no chat template");
    chat_defaults(e, request);
    char *text = NULL;
    size_t len = 0;
    struct tok_span *plain = NULL;
    int n_plain = 0;
    int rc = tmpl_render(e->tmpl, request, 1, &text, &len, &plain, &n_plain);
    if (!rc) rc = tok_encode_spans(e->tok, text, len, plain, n_plain, ids, n);
    free(text);
    free(plain);
    return rc;
}

char *engine_token_text(const struct engine *e, int id, size_t *len) {
    char *s = NULL;
    *len = 0;
    if (id < 0 || id >= tok_n_vocab(e->tok) || tok_decode(e->tok, &id, 1, 0, &s, len)) {
        s = xstrdup("");
        *len = 0;
    }
    return s;
}

int engine_submit(struct engine *e, const struct engine_req *r, struct engine_task **out) {
    *out = NULL;
    if (r->n_prompt <= 0) return lily_err_set(LILY_EINVAL, "the prompt is empty");
    if (r->n_prompt >= e->max_ctx)
        return lily_err_set(LILY_ERANGE,
                            "the prompt has %d tokens but the context holds %d (prompt plus at "
                            "least one generated token)",
                            r->n_prompt, e->max_ctx);
    struct engine_task *t = xcalloc(1, sizeof *t);
    t->prompt = xmalloc((size_t)r->n_prompt * sizeof(int));
    memcpy(t->prompt, r->prompt, (size_t)r->n_prompt * sizeof(int));
    t->n_prompt = r->n_prompt;
    t->sp = r->sp;
    if (r->sp.n_bias > 0) {
        t->bias = xmalloc((size_t)r->sp.n_bias * sizeof *t->bias);
        memcpy(t->bias, r->sp.bias, (size_t)r->sp.n_bias * sizeof *t->bias);
    }
    t->sp.bias = t->bias;
    t->max_tokens = r->max_tokens;
    if (r->n_stop > 0) {
        t->stop = xmalloc((size_t)r->n_stop * sizeof *t->stop);
        for (int i = 0; i < r->n_stop; i++) t->stop[i] = xstrdup(r->stop[i]);
        t->n_stop = r->n_stop;
    }
    t->top_logprobs = r->top_logprobs;
    t->t_submit = lily_time();
    t->refs = 2; // the submitter and the engine
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    pthread_mutex_lock(&e->mu);
    if (e->qlen >= e->qmax || e->stopping) {
        pthread_mutex_unlock(&e->mu);
        t->refs = 1;
        task_unref(t);
        return ENGINE_BUSY;
    }
    if (e->qtail) e->qtail->next = t;
    else e->qhead = t;
    e->qtail = t;
    e->qlen++;
    e->m.requests++;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    *out = t;
    return 0;
}

void engine_get_metrics(struct engine *e, struct engine_metrics *m) {
    pthread_mutex_lock(&e->mu);
    *m = e->m;
    m->queue_depth = e->qlen;
    m->busy = e->running != NULL;
    m->running_gen = e->running ? atomic_load_explicit(&e->running_gen, memory_order_relaxed) : 0;
    pthread_mutex_unlock(&e->mu);
}

// ---------------------------------------------------------------------------------------------
// Running one task

static int is_eos(const struct engine *e, int id) {
    for (int i = 0; i < e->n_eos; i++)
        if (e->eos[i] == id) return 1;
    return 0;
}

// Save the state (covering tokens[0..n)), with the logits of its last token when they are current
// (with_logits), unless already cached. Room is made in the cache before the snapshot is taken, so
// that evicted entries' memory (device memory on CUDA) is free for it.
static void snapshot(struct engine *e, const int *tokens, int n, int with_logits) {
    if (!e->cache.budget || n <= 0 || pcache_has(&e->cache, tokens, n)) return;
    size_t bytes = e->be->state_save_size(e->ctx, e->state);
    if (bytes == 0 || !pcache_make_room(&e->cache, pcache_need(&e->cache, n, bytes, with_logits))) return;
    void *blob = e->be->snap_save(e->ctx, e->state, &bytes);
    if (!blob) return; // best effort: a snapshot we cannot afford is simply not kept
    pcache_insert(&e->cache, tokens, n, blob, bytes, with_logits ? e->logits : NULL);
}

// Restore the longest cached prefix of the prompt; returns how many tokens it covers (0 = start
// from an empty state). With a full hit the logits of the last prompt token come from the cache.
static int resume(struct engine *e, const int *prompt, int n) {
    e->be->state_reset(e->ctx, e->state);
    if (!e->cache.budget) return 0;
    // An entry for the whole prompt without logits would need its last token again: look for
    // the longest one covering at most n - 1 tokens instead.
    const struct pcache_entry *hit = pcache_find(&e->cache, prompt, n);
    if (hit && hit->n == n && !hit->logits) hit = pcache_find(&e->cache, prompt, n - 1);
    if (!hit || hit->n == 0) return 0;
    if (e->be->snap_load(e->ctx, e->state, hit->blob)) {
        e->be->state_reset(e->ctx, e->state);
        return 0;
    }
    if (hit->n == n) memcpy(e->logits, hit->logits, (size_t)e->n_vocab * sizeof(float));
    return hit->n;
}

// Where the prefill should stop to save a snapshot after `pos`: the next multiple of the interval,
// the boundary before the last <|im_start|>, or the end.
static int next_stop(const struct engine *e, int pos, int n, int boundary) {
    int nx = (pos / e->snapshot_every + 1) * e->snapshot_every;
    if (boundary > pos && boundary < nx) nx = boundary;
    return nx < n ? nx : n;
}

// Longest suffix of s[from..n) that is a proper prefix of one of the stop strings.
static size_t stop_holdback(char *const *stop, int n_stop, const char *s, size_t from, size_t n) {
    size_t best = 0;
    for (int k = 0; k < n_stop; k++) {
        size_t L = strlen(stop[k]);
        for (size_t h = L - 1 < n - from ? L - 1 : n - from; h > best; h--)
            if (!memcmp(s + n - h, stop[k], h)) {
                best = h;
                break;
            }
    }
    return best;
}

struct gen {
    char *txt;
    size_t len, cap, emitted;
};

static void gen_append(struct gen *g, const char *s, size_t n) {
    if (g->len + n + 1 > g->cap) {
        g->cap = (g->len + n + 1) * 2;
        g->txt = xrealloc(g->txt, g->cap);
    }
    memcpy(g->txt + g->len, s, n);
    g->len += n;
    g->txt[g->len] = 0;
}

static char *take_text(struct gen *g, size_t upto, size_t *len) {
    *len = upto - g->emitted;
    char *s = xmalloc(*len + 1);
    if (*len) memcpy(s, g->txt + g->emitted, *len); // txt is NULL until the first released byte
    s[*len] = 0;
    g->emitted = upto;
    return s;
}

static void run_task(struct engine *e, struct engine_task *t) {
    struct engine_event done = {.type = ENGINE_EV_DONE, .finish = ENGINE_FINISH_LENGTH};
    double t0 = lily_time();
    done.queue_s = t0 - t->t_submit;
    done.n_prompt = t->n_prompt;
    int n = t->n_prompt, rc = 0;
    int *all = xmalloc((size_t)e->max_ctx * sizeof(int)); // prompt then output, as forwarded
    memcpy(all, t->prompt, (size_t)n * sizeof(int));
    struct gen g = {0};
    struct sampler smp;
    sampler_init(&smp, &t->sp, e->n_vocab);
    struct sampler_edit *ed = NULL; // the sampler's logit edits for the top-k step (decode, below)
    size_t piece_cap = 1 << 16;
    char *piece = xmalloc(piece_cap);

    // Prefill.
    int pos = resume(e, t->prompt, n);
    done.n_cached = pos;
    int boundary = 0;
    for (int i = n - 1; i > 0 && e->im_start >= 0; i--)
        if (t->prompt[i] == e->im_start) {
            boundary = i;
            break;
        }
    while (pos < n) {
        if (atomic_load(&t->cancel)) {
            done.finish = ENGINE_FINISH_CANCELLED;
            goto out;
        }
        int stop_at = next_stop(e, pos, n, boundary);
        const int piece = e->be->prefill_piece > 0 ? e->be->prefill_piece : PREFILL_CHUNK;
        int end = pos + piece < stop_at ? pos + piece : stop_at;
        rc = e->be->forward(e->ctx, e->state, t->prompt + pos, end - pos, e->logits, 0);
        if (rc) goto fail;
        pos = end;
        if (pos == stop_at) snapshot(e, t->prompt, pos, 1);
    }
    for (int i = 0; i < n; i++) sampler_add_prompt(&smp, t->prompt[i]);
    double t1 = lily_time();
    done.prefill_s = t1 - t0;

    // Decode.
    struct tok_stream ts;
    tok_stream_init(&ts, 0);
    int room = e->max_ctx - n;
    int max_new = t->max_tokens > 0 && t->max_tokens < room ? t->max_tokens : room;
    size_t max_stop = 0;
    for (int k = 0; k < t->n_stop; k++)
        if (strlen(t->stop[k]) > max_stop) max_stop = strlen(t->stop[k]);
    int eos_hit = -1;
    // Requests whose token depends on nothing but the step's logits (no bias, penalties, logprobs or
    // script) can take one of the backend's steps that leave the logits where they are (-1 below:
    // no token pending):
    // - greedy: the next token comes back alone (sampler_sample would take the same argmax);
    // - a top_k the top-k step covers: the sampler draws from its candidates (sampler_sample_top: the
    //   same tokens as on the full logits);
    // - a temperature alone: the sampling step draws where the logits are, seeded from the sampler
    //   (so a request's seed still decides the tokens);
    // - top-p and/or min-p without a top-k: the top-k step's 64 largest with the softmax's mass
    //   (sampler_sample_mass), which decide the draw whenever top-p's prefix or the min-p set ends
    //   among them (a peaked distribution); otherwise the step's logits come over (logits_last) and
    //   the sampler takes them whole.
    // A logit bias or penalties (the sampler's edits, sampler_edits) go with the top-k step, which
    // applies them where the logits are; greedy then takes the top-k step's largest alone.
    const struct sampler_params *sp = &t->sp;
    const int edited = sp->n_bias > 0 || sp->presence_penalty != 0.0f || sp->frequency_penalty != 0.0f ||
                       sp->repetition_penalty != 1.0f;
    const int sel = !e->script && t->top_logprobs < 0; // the token depends on the (edited) logits alone
    const int plain = sel && !edited, is_greedy = sp->temperature <= 0.0f || sp->top_k == 1;
    const int greedy = plain && e->be->step_greedy && is_greedy;
    const int greedy1 = sel && edited && e->be->step_topk && is_greedy; // the top-k step with k = 1
    const int sampled = sel && !is_greedy;
    const int topk = sampled && e->be->step_topk && sp->top_k > 1 && sp->top_k <= LILY_TOPK_MAX && sp->top_k < e->n_vocab;
    const int gsample =
        sampled && plain && e->be->step_sample && sp->top_k <= 0 && sp->top_p >= 1.0f && sp->min_p <= 0.0f;
    const int topp = sampled && !topk && e->be->step_topk && e->be->logits_last &&
                     (sp->top_k <= 0 || sp->top_k >= e->n_vocab) && (sp->top_p < 1.0f || sp->min_p > 0.0f);
    const int cand_k = greedy1 ? 1 : topk ? sp->top_k : LILY_TOPK_MAX;
    if (edited && (greedy1 || topk || topp)) ed = xmalloc(((size_t)sp->n_bias + (size_t)e->n_vocab) * sizeof *ed);
    int n_ed = 0, n_ed_bias = 0, edited_logits = 0; // edited_logits: e->logits carry the edits
    double mass = 0;
    const unsigned gseed = (unsigned)(smp.rng[0] ^ smp.rng[0] >> 32);
    float cand_v[LILY_TOPK_MAX];
    int cand_i[LILY_TOPK_MAX], n_cand = -1; // -1: none yet (the prompt's logits are on the host)
    int next = -1;
    for (int i = 0; i < max_new; i++) {
        if (atomic_load(&t->cancel)) {
            done.finish = ENGINE_FINISH_CANCELLED;
            break;
        }
        struct engine_event ev = {.type = ENGINE_EV_TOKEN};
        int tok = next;
        if (tok < 0) {
            // The sampler edits the logits (bias, penalties, temperature): on a copy when the
            // unedited ones are still needed for logprobs. (A snapshot's logits are taken before
            // this or after the end token's forward.)
            float *l = e->logits;
            if (t->top_logprobs >= 0) l = memcpy(e->work, e->logits, (size_t)e->n_vocab * sizeof(float));
            if (n_cand >= 0 && topp && (tok = sampler_sample_mass(&smp, cand_v, cand_i, n_cand, mass)) < 0) {
                if ((rc = e->be->logits_last(e->ctx, e->state, e->logits))) goto fail;
                n_cand = -1, edited_logits = n_ed > 0; // undecided: the whole distribution (edited)
            }
            if (tok < 0)
                tok = n_cand >= 0    ? sampler_sample_top(&smp, cand_v, cand_i, n_cand)
                      : edited_logits ? sampler_sample_edited(&smp, l)
                                      : sampler_sample(&smp, l);
            edited_logits = 0;
        }
        if (e->script) tok = i < e->n_script ? e->script[i] : (e->n_eos ? e->eos[0] : tok);
        done.n_gen++;
        // Published per token so that a client (and the fault tests) can see decoding under way.
        atomic_store_explicit(&e->running_gen, done.n_gen, memory_order_relaxed);
        if (t->top_logprobs >= 0) {
            ev.n_top = t->top_logprobs;
            ev.logprob = sampler_logprobs(e->logits, e->n_vocab, tok, ev.n_top, ev.top_ids,
                                          ev.top_lp);
        }
        if (is_eos(e, tok)) {
            eos_hit = tok;
            done.finish = ENGINE_FINISH_STOP;
            break;
        }
        sampler_accept(&smp, tok);
        all[n + i] = tok;
        int k = tok_stream_push(e->tok, &ts, tok, piece, piece_cap);
        size_t old = g.len;
        if (k > 0) gen_append(&g, piece, (size_t)k);
        // A stop string may end in the new bytes: search from where such a match could begin.
        size_t from = old > max_stop ? old - max_stop : 0, cut = (size_t)-1;
        if (from < g.emitted) from = g.emitted;
        for (int s = 0; s < t->n_stop; s++) {
            char *hit = memmem(g.txt ? g.txt + from : "", g.len - from, t->stop[s],
                               strlen(t->stop[s]));
            if (hit && (size_t)(hit - g.txt) < cut) cut = (size_t)(hit - g.txt);
        }
        ev.token = tok;
        if (cut != (size_t)-1) {
            ev.text = take_text(&g, cut, &ev.len);
            task_push(t, &ev);
            done.finish = ENGINE_FINISH_STOP;
            pos = n + i; // the stop token was not forwarded
            goto decoded;
        }
        size_t hold = stop_holdback(t->stop, t->n_stop, g.txt, g.emitted, g.len);
        ev.text = take_text(&g, g.len - hold, &ev.len);
        task_push(t, &ev);
        if (i == max_new - 1) {
            pos = n + i;
            goto decoded;
        }
        rc = greedy    ? e->be->step_greedy(e->ctx, e->state, tok, &next)
             : gsample ? e->be->step_sample(e->ctx, e->state, tok, sp->temperature, gseed, &next)
             : (greedy1 || topk || topp)
                 ? e->be->step_topk(e->ctx, e->state, tok, cand_k, topp ? sp->temperature : 0.0f, ed,
                                    ed ? (n_ed = sampler_edits(&smp, ed, &n_ed_bias)) : 0, n_ed_bias, cand_v,
                                    cand_i, &n_cand, topp ? &mass : NULL)
                 : e->be->forward(e->ctx, e->state, &tok, 1, e->logits, 0);
        if (rc) goto fail;
        pos = n + i + 1;
    }
    // Ended by an end token (or cancelled): feed the end token too, so that the snapshot covers
    // the whole turn as the next request's history will render it.
    if (eos_hit >= 0 && pos < e->max_ctx) {
        rc = e->be->forward(e->ctx, e->state, &eos_hit, 1, e->logits, 0);
        if (rc) goto fail;
        all[pos++] = eos_hit;
    }
decoded:
    // The bookkeeping the prefix cache rests on: the state covers exactly all[0..pos).
    CHECK(e->be->state_pos(e->ctx, e->state) == pos);
    done.decode_s = lily_time() - t1;
    if (done.finish != ENGINE_FINISH_CANCELLED) {
        if (done.finish != ENGINE_FINISH_STOP || eos_hit >= 0) {
            // Not cut by a stop string: release what was held back as a possible stop prefix.
            int k = tok_stream_flush(&ts, piece, piece_cap);
            if (k > 0) gen_append(&g, piece, (size_t)k);
            done.text = take_text(&g, g.len, &done.len);
        }
        // The state covers all[0..pos): keep it for the next turn. Its logits are current only
        // when the last step was a forward (the end token's).
        snapshot(e, all, pos, eos_hit >= 0);
    }
    goto out;
fail:
    done.finish = ENGINE_FINISH_ERROR;
    snprintf(done.err_msg, sizeof done.err_msg, "%s", lily_err_msg());
    e->be->state_reset(e->ctx, e->state);
out:
    if (!done.text) done.text = xstrdup("");
    pthread_mutex_lock(&e->mu);
    e->m.prompt_tokens += done.n_prompt;
    e->m.cached_tokens += done.n_cached;
    e->m.gen_tokens += done.n_gen;
    e->m.prefill_s += done.prefill_s;
    e->m.decode_s += done.decode_s;
    if (done.finish == ENGINE_FINISH_CANCELLED) e->m.requests_cancelled++;
    if (done.finish == ENGINE_FINISH_ERROR) e->m.requests_failed++;
    if (done.n_cached > 0) e->m.cache_hits++;
    else e->m.cache_misses++;
    e->m.cache_entries = e->cache.n;
    e->m.cache_bytes = e->cache.bytes;
    pthread_mutex_unlock(&e->mu);
    task_push(t, &done);
    sampler_free(&smp);
    free(ed);
    free(piece);
    free(g.txt);
    free(all);
}

static void *engine_loop(void *arg) {
    struct engine *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (!e->stopping && !e->qhead) pthread_cond_wait(&e->cv, &e->mu);
        if (e->stopping) {
            // Finish everything still queued as cancelled.
            while (e->qhead) {
                struct engine_task *t = e->qhead;
                e->qhead = t->next;
                struct engine_event done = {.type = ENGINE_EV_DONE,
                                            .finish = ENGINE_FINISH_CANCELLED};
                done.text = xstrdup("");
                done.n_prompt = t->n_prompt;
                task_push(t, &done);
                task_unref(t);
            }
            e->qtail = NULL;
            e->qlen = 0;
            pthread_mutex_unlock(&e->mu);
            return NULL;
        }
        struct engine_task *t = e->qhead;
        e->qhead = t->next;
        if (!e->qhead) e->qtail = NULL;
        e->qlen--;
        e->running = t;
        atomic_store_explicit(&e->running_gen, 0, memory_order_relaxed);
        pthread_mutex_unlock(&e->mu);
        run_task(e, t);
        pthread_mutex_lock(&e->mu);
        e->running = NULL;
        pthread_mutex_unlock(&e->mu);
        task_unref(t);
    }
}
