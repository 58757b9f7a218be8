// http_int.h: what the server's two halves share: http.c (the routes, the requests, the responses) and
// http_reply.c (the engine's events turned into OpenAI replies: the whole body, or the SSE stream). The
// server's and a request's state, and the helpers each half calls in the other. Not a public header.
#pragma once
#include <jansson.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common.h"
#include "openai.h"
#include "parse.h"
#include "server.h"

struct server {
    struct engine *eng;
    struct server_opts o;
    struct oai_limits lim;
    long started;
    atomic_int stopping;
    atomic_long n_http, n_4xx, n_5xx, n_busy, n_disconnects;
    atomic_int active; // requests holding an engine task
};

enum route { R_NONE, R_HEALTH, R_MODELS, R_MODEL, R_METRICS, R_CHAT, R_COMPLETIONS };

// Per-request state, freed by the request-completed callback.
struct conn {
    struct server *srv;
    struct MHD_Connection *mc;
    enum route route;
    char *body;
    size_t len, cap;
    int too_big;
    struct oai_request req;
    struct engine_task *task;
    struct lily_parser *parser;
    char id[48];
    long created;
    // accumulated output (non-streaming)
    char *content, *reasoning;
    size_t content_len, content_cap, reasoning_len, reasoning_cap;
    json_t *logprobs;          // array of entries
    size_t text_off;           // streamed completions: text_offset of the next token
    int n_calls_sent;          // tool calls already emitted
    struct oai_tool_call *calls;
    char (*call_ids)[40];
    int n_calls;
    // streaming
    char *sse;
    size_t sse_len, sse_cap, sse_off;
    int stream_done;
    double last_write;
    struct oai_usage usage;
    int n_reasoning;           // generated tokens inside <think> so far (chat)
    const char *finish;
};

// http.c
void http_rand_hex(char *out, int n); // n random hex digits and a NUL
void http_buf_add(char **buf, size_t *len, size_t *cap, const char *s, size_t n);
int http_client_gone(struct MHD_Connection *mc); // 1 if the peer has closed its side
enum MHD_Result http_send_json(struct server *s, struct MHD_Connection *mc, int status, json_t *obj);
enum MHD_Result http_fail(struct server *s, struct MHD_Connection *mc, int status, const char *type, const char *code,
                          const char *fmt, ...) __attribute__((format(printf, 6, 7)));

// http_reply.c
void http_sse_add(struct conn *c, json_t *obj);                      // one SSE event of the stream
void http_consume(struct conn *c, struct engine_event *ev);          // an engine event into the reply
enum MHD_Result http_send_result(struct conn *c);                    // the non-streaming reply
void http_engine_error(struct oai_error *e, const struct engine_event *ev);
ssize_t http_stream_reader(void *cls, uint64_t pos, char *buf, size_t max); // the SSE response's reader
