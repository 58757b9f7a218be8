// openai_reply.c: response building for the OpenAI API (openai.h): error bodies, chat and completion
// responses and stream chunks, usage, log-probabilities, SSE framing. Structs in, JSON out; nothing here
// touches the engine or the network.
#include "openai.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

// Error messages quote request text (role names, keys, parser excerpts) cut to a byte length, so
// they may hold invalid or truncated UTF-8, which JSON cannot carry: replace such bytes by '?'.
static void utf8_scrub(char *s) {
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 1 : (*p >> 5) == 6 ? 2 : (*p >> 4) == 14 ? 3 : (*p >> 3) == 30 ? 4 : 0;
        int ok = n > 0;
        for (int k = 1; ok && k < n; k++) ok = (p[k] & 0xc0) == 0x80;
        if (ok && n > 1) {
            uint32_t cp = n == 2 ? (p[0] & 0x1fu) : n == 3 ? (p[0] & 0x0fu) : (p[0] & 0x07u);
            for (int k = 1; k < n; k++) cp = cp << 6 | (p[k] & 0x3fu);
            ok = cp >= (n == 2 ? 0x80u : n == 3 ? 0x800u : 0x10000u) && cp <= 0x10ffff &&
                 (cp < 0xd800 || cp > 0xdfff);
        }
        if (!ok) {
            *p++ = '?';
            continue;
        }
        p += n;
    }
}

char *oai_error_body(const struct oai_error *e) {
    char msg[sizeof e->message], param[sizeof e->param];
    memcpy(msg, e->message, sizeof msg);
    memcpy(param, e->param, sizeof param);
    msg[sizeof msg - 1] = param[sizeof param - 1] = 0;
    utf8_scrub(msg);
    utf8_scrub(param);
    json_t *err = json_pack("{s:s, s:s, s:o, s:o}", "message", msg, "type",
                            e->type ? e->type : "invalid_request_error", "param",
                            param[0] ? json_string(param) : json_null(), "code",
                            e->code ? json_string(e->code) : json_null());
    json_t *o = json_pack("{s:o}", "error", err);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

json_t *oai_usage_json(const struct oai_usage *u) {
    return json_pack("{s:i, s:i, s:i, s:{s:i}, s:{s:i}}", "prompt_tokens", u->prompt_tokens,
                     "completion_tokens", u->completion_tokens, "total_tokens",
                     u->prompt_tokens + u->completion_tokens, "prompt_tokens_details",
                     "cached_tokens", u->cached_tokens, "completion_tokens_details",
                     "reasoning_tokens", u->reasoning_tokens);
}

static json_t *tool_calls_json(const struct oai_tool_call *calls, int n, int with_index) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        json_t *c = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", calls[i].id, "type", "function",
                              "function", "name", calls[i].name, "arguments", calls[i].args);
        if (with_index) json_object_set_new(c, "index", json_integer(i));
        json_array_append_new(a, c);
    }
    return a;
}

json_t *oai_chat_response(const char *id, long created, const char *model, const char *content,
                          const char *reasoning, const struct oai_tool_call *calls, int n_calls,
                          const char *finish, const struct oai_usage *u, json_t *logprobs) {
    json_t *msg = json_pack("{s:s, s:o, s:n}", "role", "assistant", "content",
                            content ? json_string(content) : json_null(), "refusal");
    if (reasoning && *reasoning) json_object_set_new(msg, "reasoning_content", json_string(reasoning));
    if (n_calls > 0) json_object_set_new(msg, "tool_calls", tool_calls_json(calls, n_calls, 0));
    json_t *choice = json_pack("{s:i, s:o, s:o, s:s}", "index", 0, "message", msg, "logprobs",
                               logprobs ? logprobs : json_null(), "finish_reason", finish);
    return json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o, s:s}", "id", id, "object",
                     "chat.completion", "created", (json_int_t)created, "model", model, "choices",
                     choice, "usage", oai_usage_json(u), "system_fingerprint", "lily-" LILY_VERSION);
}

json_t *oai_chat_chunk(const char *id, long created, const char *model, json_t *delta,
                       const char *finish, json_t *logprobs, int include_usage) {
    json_t *choice = json_pack("{s:i, s:o, s:o, s:o}", "index", 0, "delta", delta, "logprobs",
                               logprobs ? logprobs : json_null(), "finish_reason",
                               finish ? json_string(finish) : json_null());
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:[o]}", "id", id, "object",
                          "chat.completion.chunk", "created", (json_int_t)created, "model", model,
                          "system_fingerprint", "lily-" LILY_VERSION, "choices", choice);
    if (include_usage) json_object_set_new(o, "usage", json_null());
    return o;
}

json_t *oai_usage_chunk(const char *object, const char *id, long created, const char *model,
                        const struct oai_usage *u) {
    return json_pack("{s:s, s:s, s:I, s:s, s:[], s:o}", "id", id, "object", object, "created",
                     (json_int_t)created, "model", model, "choices", "usage", oai_usage_json(u));
}

json_t *oai_completion_response(const char *id, long created, const char *model, const char *text,
                                const char *finish, const struct oai_usage *u, json_t *logprobs) {
    json_t *choice = json_pack("{s:s, s:i, s:o, s:s}", "text", text, "index", 0, "logprobs",
                               logprobs ? logprobs : json_null(), "finish_reason", finish);
    return json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o}", "id", id, "object", "text_completion",
                     "created", (json_int_t)created, "model", model, "choices", choice, "usage",
                     oai_usage_json(u));
}

json_t *oai_completion_chunk(const char *id, long created, const char *model, const char *text,
                             const char *finish, json_t *logprobs, int include_usage) {
    json_t *choice = json_pack("{s:s, s:i, s:o, s:o}", "text", text, "index", 0, "logprobs",
                               logprobs ? logprobs : json_null(), "finish_reason",
                               finish ? json_string(finish) : json_null());
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", id, "object", "text_completion",
                          "created", (json_int_t)created, "model", model, "choices", choice);
    if (include_usage) json_object_set_new(o, "usage", json_null());
    return o;
}

json_t *oai_logprob_entry(const char *tok, size_t len, float lp) {
    json_t *bytes = json_array();
    for (size_t i = 0; i < len; i++) json_array_append_new(bytes, json_integer((unsigned char)tok[i]));
    // Token text may be a partial UTF-8 character; the bytes carry the exact value.
    json_t *s = json_stringn(tok, len);
    if (!s) s = json_string("");
    if (!(lp > -9999.0f)) lp = -9999.0f; // JSON has no -inf
    return json_pack("{s:o, s:f, s:o}", "token", s, "logprob", (double)lp, "bytes", bytes);
}

char *oai_sse(json_t *obj, size_t *len) {
    char *j = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    size_t n = strlen(j);
    char *s = xmalloc(n + 9);
    memcpy(s, "data: ", 6);
    memcpy(s + 6, j, n);
    memcpy(s + 6 + n, "\n\n", 3);
    free(j);
    *len = n + 8;
    return s;
}
