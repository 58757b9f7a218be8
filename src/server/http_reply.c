// http_reply.c: the engine's events turned into OpenAI replies (http.c submits the task): the text,
// reasoning, tool calls and log-probabilities of a non-streaming reply, or the chunks of an SSE stream
// written by libmicrohttpd's reader callback.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http_int.h"

static const char *finish_name(struct conn *c, int finish) {
    if (finish == ENGINE_FINISH_LENGTH) return "length";
    if (c->n_calls > 0) return "tool_calls";
    return "stop";
}

void http_sse_add(struct conn *c, json_t *obj) {
    size_t n;
    char *s = oai_sse(obj, &n);
    http_buf_add(&c->sse, &c->sse_len, &c->sse_cap, s, n);
    free(s);
}

static json_t *logprob_json(struct conn *c, const struct engine_event *ev) {
    size_t n;
    char *t = engine_token_text(c->srv->eng, ev->token, &n);
    json_t *en = oai_logprob_entry(t, n, ev->logprob);
    free(t);
    json_t *tops = json_array();
    for (int i = 0; i < ev->n_top; i++) {
        t = engine_token_text(c->srv->eng, ev->top_ids[i], &n);
        json_array_append_new(tops, oai_logprob_entry(t, n, ev->top_lp[i]));
        free(t);
    }
    json_object_set_new(en, "top_logprobs", tops);
    return en;
}

// Tool calls completed since the last call: kept, and returned as stream deltas when streaming.
static json_t *take_tool_calls(struct conn *c, int stream) {
    int n = parse_n_tool_calls(c->parser);
    json_t *a = NULL;
    for (; c->n_calls < n; c->n_calls++) {
        c->calls = xrealloc(c->calls, sizeof *c->calls * (size_t)(c->n_calls + 1));
        c->call_ids = xrealloc(c->call_ids, sizeof *c->call_ids * (size_t)(c->n_calls + 1));
        char hex[25];
        http_rand_hex(hex, 24);
        snprintf(c->call_ids[c->n_calls], sizeof c->call_ids[0], "call_%s", hex);
        c->calls[c->n_calls].name = parse_tool_name(c->parser, c->n_calls);
        c->calls[c->n_calls].args = parse_tool_args(c->parser, c->n_calls);
        if (!stream) continue;
        if (!a) a = json_array();
        json_array_append_new(
            a, json_pack("{s:i, s:s, s:s, s:{s:s, s:s}}", "index", c->n_calls, "id",
                         c->call_ids[c->n_calls], "type", "function", "function", "name",
                         c->calls[c->n_calls].name, "arguments", c->calls[c->n_calls].args));
    }
    for (int i = 0; i < c->n_calls; i++) c->calls[i].id = c->call_ids[i];
    return a;
}

// Logprob entries in the legacy completions shape (parallel arrays); `*off` is the text offset of
// the first entry and advances past the last, so that streamed chunks continue the offsets.
static json_t *legacy_logprobs(const json_t *entries, size_t *off) {
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t i;
    json_t *en;
    json_array_foreach(entries, i, en) {
        json_t *t = json_object_get(en, "token");
        json_array_append(toks, t);
        json_array_append(lps, json_object_get(en, "logprob"));
        json_array_append_new(offs, json_integer((json_int_t)*off));
        *off += json_string_length(t);
        json_t *m = json_object(), *x;
        size_t k;
        json_array_foreach(json_object_get(en, "top_logprobs"), k, x)
            json_object_set(m, json_string_value(json_object_get(x, "token")),
                            json_object_get(x, "logprob"));
        json_array_append_new(tops, m);
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", toks, "token_logprobs", lps,
                     "top_logprobs", tops, "text_offset", offs);
}

// One engine event into the response: accumulate (non-streaming) or append SSE (streaming).
void http_consume(struct conn *c, struct engine_event *ev) {
    struct server *s = c->srv;
    int stream = c->req.stream;
    json_t *lp = NULL;
    if (ev->type == ENGINE_EV_TOKEN && c->req.logprobs) lp = logprob_json(c, ev);
    if (ev->type == ENGINE_EV_DONE) {
        c->usage.prompt_tokens = ev->n_prompt;
        c->usage.completion_tokens = ev->n_gen;
        c->usage.cached_tokens = ev->n_cached;
        c->usage.reasoning_tokens = c->n_reasoning;
    }
    if (c->req.kind == OAI_COMPLETION) {
        if (!stream) {
            http_buf_add(&c->content, &c->content_len, &c->content_cap, ev->text, ev->len);
            if (lp) json_array_append_new(c->logprobs, lp);
        } else {
            // A token whose text is held back (a possible stop string, partial UTF-8) still gets
            // its chunk when logprobs are asked for, with empty text.
            json_t *lpo = NULL;
            if (lp) {
                json_t *one = json_pack("[o]", lp);
                lpo = legacy_logprobs(one, &c->text_off);
                json_decref(one);
            }
            if (ev->len || lpo)
                http_sse_add(c, oai_completion_chunk(c->id, c->created, s->o.model_id,
                                                ev->text ? ev->text : "", NULL, lpo,
                                                c->req.include_usage));
        }
        if (ev->type == ENGINE_EV_DONE) c->finish = finish_name(c, ev->finish);
        if (ev->type == ENGINE_EV_DONE && stream) {
            http_sse_add(c, oai_completion_chunk(c->id, c->created, s->o.model_id, "", c->finish, NULL,
                                            c->req.include_usage));
            if (c->req.include_usage)
                http_sse_add(c, oai_usage_chunk("text_completion", c->id, c->created, s->o.model_id,
                                           &c->usage));
        }
        return;
    }
    // The parser decides what is reasoning: a token counts if it is fed inside <think> or opens it.
    int was_reasoning = parse_in_reasoning(c->parser);
    parse_feed(c->parser, ev->text, ev->len);
    if (ev->type == ENGINE_EV_TOKEN && (was_reasoning || parse_in_reasoning(c->parser)))
        c->n_reasoning++;
    if (ev->type == ENGINE_EV_DONE) parse_finish(c->parser);
    struct parse_delta d = {0};
    parse_take(c->parser, &d);
    json_t *calls = take_tool_calls(c, stream);
    if (ev->type == ENGINE_EV_DONE) c->finish = finish_name(c, ev->finish);
    if (!stream) {
        if (d.content) http_buf_add(&c->content, &c->content_len, &c->content_cap, d.content, strlen(d.content));
        if (d.reasoning)
            http_buf_add(&c->reasoning, &c->reasoning_len, &c->reasoning_cap, d.reasoning,
                    strlen(d.reasoning));
        if (lp) json_array_append_new(c->logprobs, lp);
    } else {
        json_t *delta = json_object();
        if (d.reasoning && *d.reasoning)
            json_object_set_new(delta, "reasoning_content", json_string(d.reasoning));
        if (d.content && *d.content) json_object_set_new(delta, "content", json_string(d.content));
        if (calls) json_object_set_new(delta, "tool_calls", calls);
        json_t *lpo = lp ? json_pack("{s:[o], s:n}", "content", lp, "refusal") : NULL;
        if (json_object_size(delta) || lpo)
            http_sse_add(c, oai_chat_chunk(c->id, c->created, s->o.model_id, delta, NULL, lpo,
                                      c->req.include_usage));
        else
            json_decref(delta);
        if (ev->type == ENGINE_EV_DONE) {
            http_sse_add(c, oai_chat_chunk(c->id, c->created, s->o.model_id, json_object(), c->finish,
                                      NULL, c->req.include_usage));
            if (c->req.include_usage)
                http_sse_add(c, oai_usage_chunk("chat.completion.chunk", c->id, c->created,
                                           s->o.model_id, &c->usage));
        }
    }
    parse_delta_free(&d);
}

// The response for a finished non-streaming request.
enum MHD_Result http_send_result(struct conn *c) {
    struct server *s = c->srv;
    json_t *lp = NULL;
    if (c->req.logprobs && c->req.kind == OAI_CHAT) {
        lp = json_pack("{s:O, s:n}", "content", c->logprobs, "refusal");
    } else if (c->req.logprobs) {
        size_t off = 0;
        lp = legacy_logprobs(c->logprobs, &off);
    }
    json_t *o;
    if (c->req.kind == OAI_COMPLETION)
        o = oai_completion_response(c->id, c->created, s->o.model_id,
                                    c->content ? c->content : "", c->finish, &c->usage, lp);
    else
        o = oai_chat_response(c->id, c->created, s->o.model_id,
                              c->content ? c->content : (c->n_calls ? NULL : ""), c->reasoning,
                              c->calls, c->n_calls, c->finish, &c->usage, lp);
    if (!o) return http_fail(s, c->mc, 500, "server_error", NULL, "could not encode the response");
    return http_send_json(s, c->mc, 200, o);
}

void http_engine_error(struct oai_error *e, const struct engine_event *ev) {
    memset(e, 0, sizeof *e);
    if (ev->finish == ENGINE_FINISH_CANCELLED) {
        e->status = 503;
        e->type = "server_error";
        snprintf(e->message, sizeof e->message, "the server is shutting down");
    } else {
        e->status = 500;
        e->type = "server_error";
        snprintf(e->message, sizeof e->message, "generation failed: %s", ev->err_msg);
    }
}

// ---------------------------------------------------------------------------------------------
// Streaming: the content reader waits for events and hands MHD the SSE bytes.

ssize_t http_stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    struct conn *c = cls;
    struct server *s = c->srv;
    while (c->sse_off == c->sse_len) {
        if (c->stream_done) return MHD_CONTENT_READER_END_OF_STREAM;
        c->sse_len = c->sse_off = 0;
        struct engine_event ev;
        if (atomic_load(&s->stopping)) engine_cancel(c->task);
        if (!engine_next(c->task, &ev, 0.1)) {
            if (http_client_gone(c->mc)) {
                atomic_fetch_add(&s->n_disconnects, 1);
                engine_cancel(c->task);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            if (lily_time() - c->last_write >= s->o.keepalive_s) {
                static const char ka[] = ": keep-alive\n\n";
                http_buf_add(&c->sse, &c->sse_len, &c->sse_cap, ka, sizeof ka - 1);
            }
            continue;
        }
        if (ev.type == ENGINE_EV_DONE &&
            (ev.finish == ENGINE_FINISH_ERROR || ev.finish == ENGINE_FINISH_CANCELLED)) {
            // The 200 header went out long ago: report the error as a data event.
            struct oai_error e;
            http_engine_error(&e, &ev);
            char *body = oai_error_body(&e);
            http_buf_add(&c->sse, &c->sse_len, &c->sse_cap, "data: ", 6);
            http_buf_add(&c->sse, &c->sse_len, &c->sse_cap, body, strlen(body));
            http_buf_add(&c->sse, &c->sse_len, &c->sse_cap, "\n\n", 2);
            free(body);
            c->stream_done = 1;
        } else {
            http_consume(c, &ev);
            if (ev.type == ENGINE_EV_DONE) {
                static const char end[] = "data: [DONE]\n\n";
                http_buf_add(&c->sse, &c->sse_len, &c->sse_cap, end, sizeof end - 1);
                c->stream_done = 1;
            }
        }
        engine_event_free(&ev);
    }
    size_t n = c->sse_len - c->sse_off;
    if (n > max) n = max;
    memcpy(buf, c->sse + c->sse_off, n);
    c->sse_off += n;
    c->last_write = lily_time();
    return (ssize_t)n;
}
