// http.c: libmicrohttpd glue for the OpenAI routes (server.h); the replies are built in http_reply.c.
//
// Threading: MHD runs one thread per connection. The access handler collects the body, checks
// it (openai.c), renders and tokenizes the prompt, and submits a task to the engine. Non-streaming
// requests then wait in the handler; streaming ones return a callback response whose reader waits
// for engine events and writes SSE. Both waits poll the socket, so a client that goes away cancels
// its generation within a fraction of a second, and both send nothing the model did not produce
// except ': keep-alive' comments while a long prefill runs.
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http_int.h"

void server_opts_default(struct server_opts *o) {
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->timeout_s = 60;
    o->max_body = 8u << 20;
    o->max_conns = 64;
    o->keepalive_s = 5;
}

// ---------------------------------------------------------------------------------------------
// Small helpers

void http_rand_hex(char *out, int n) {
    unsigned char b[32];
    if (getrandom(b, (size_t)(n + 1) / 2, 0) < 0) {
        for (int i = 0; i < (n + 1) / 2; i++) b[i] = (unsigned char)(rand() & 0xff);
    }
    static const char *hx = "0123456789abcdef";
    for (int i = 0; i < n; i++) out[i] = hx[(b[i / 2] >> (i % 2 ? 0 : 4)) & 15];
    out[n] = 0;
}

void http_buf_add(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) {
        *cap = (*len + n + 1) * 2;
        *buf = xrealloc(*buf, *cap);
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = 0;
}

// 1 if the peer has closed its side (or the socket failed): a read would see end of file.
int http_client_gone(struct MHD_Connection *mc) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    char b;
    ssize_t k = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (k == 0) return 1;
    return k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

static void add_common_headers(struct server *s, struct MHD_Response *r) {
    if (s->o.cors) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", s->o.cors);
        MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
        MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    }
}

static enum MHD_Result send_body(struct server *s, struct MHD_Connection *mc, int status,
                                 const char *ctype, char *body, size_t len) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", ctype);
    add_common_headers(s, r);
    if (status >= 500 && status != 503) MHD_add_response_header(r, "x-should-retry", "false");
    if (status == 503 || status == 429) MHD_add_response_header(r, "Retry-After", "1");
    if (status == 405) MHD_add_response_header(r, "Allow", "GET, POST");
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result rc = MHD_queue_response(mc, (unsigned)status, r);
    MHD_destroy_response(r);
    atomic_fetch_add(&s->n_http, 1);
    if (status >= 400 && status < 500) atomic_fetch_add(&s->n_4xx, 1);
    if (status >= 500) atomic_fetch_add(&s->n_5xx, 1);
    return rc;
}

enum MHD_Result http_send_json(struct server *s, struct MHD_Connection *mc, int status,
                                 json_t *obj) {
    char *body = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    return send_body(s, mc, status, "application/json", body, strlen(body));
}

static enum MHD_Result send_err(struct server *s, struct MHD_Connection *mc,
                                const struct oai_error *e) {
    char *body = oai_error_body(e);
    return send_body(s, mc, e->status, "application/json", body, strlen(body));
}

enum MHD_Result http_fail(struct server *s, struct MHD_Connection *mc, int status,
                            const char *type, const char *code, const char *fmt, ...) {
    struct oai_error e = {0};
    e.status = status;
    e.type = type;
    e.code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    return send_err(s, mc, &e);
}

// ---------------------------------------------------------------------------------------------
// Simple routes

static enum MHD_Result do_models(struct server *s, struct conn *c) {
    json_t *m = json_pack("{s:s, s:s, s:I, s:s}", "id", s->o.model_id, "object", "model",
                          "created", (json_int_t)s->started, "owned_by", "lily");
    if (c->route == R_MODEL) return http_send_json(s, c->mc, 200, m);
    json_object_set_new(m, "meta", json_pack("{s:i, s:i}", "n_ctx", engine_max_ctx(s->eng),
                                             "n_vocab", engine_n_vocab(s->eng)));
    return http_send_json(s, c->mc, 200, json_pack("{s:s, s:[o]}", "object", "list", "data", m));
}

static enum MHD_Result do_metrics(struct server *s, struct conn *c) {
    struct engine_metrics m;
    engine_get_metrics(s->eng, &m);
    char *b = NULL;
    size_t len = 0, cap = 0;
    char line[256];
#define METRIC(name, type, help, fmt, val)                                                     \
    do {                                                                                       \
        int k = snprintf(line, sizeof line, "# HELP lily_" name " " help "\n# TYPE lily_" name \
                                            " " type "\nlily_" name " " fmt "\n",              \
                         val);                                                                 \
        http_buf_add(&b, &len, &cap, line, (size_t)k);                                              \
    } while (0)
    METRIC("http_requests_total", "counter", "HTTP responses sent.", "%ld", atomic_load(&s->n_http));
    METRIC("http_client_errors_total", "counter", "4xx responses.", "%ld", atomic_load(&s->n_4xx));
    METRIC("http_server_errors_total", "counter", "5xx responses.", "%ld", atomic_load(&s->n_5xx));
    METRIC("rejected_busy_total", "counter", "Requests refused with a full queue.", "%ld",
           atomic_load(&s->n_busy));
    METRIC("client_disconnects_total", "counter", "Generations cancelled by the client leaving.",
           "%ld", atomic_load(&s->n_disconnects));
    METRIC("requests_total", "counter", "Generation tasks accepted.", "%ld", m.requests);
    METRIC("requests_cancelled_total", "counter", "Tasks cancelled.", "%ld", m.requests_cancelled);
    METRIC("requests_failed_total", "counter", "Tasks failed in the backend.", "%ld",
           m.requests_failed);
    METRIC("prompt_tokens_total", "counter", "Prompt tokens.", "%ld", m.prompt_tokens);
    METRIC("prompt_tokens_cached_total", "counter", "Prompt tokens restored from snapshots.",
           "%ld", m.cached_tokens);
    METRIC("generated_tokens_total", "counter", "Generated tokens.", "%ld", m.gen_tokens);
    METRIC("prefill_seconds_total", "counter", "Time spent prefilling.", "%.6f", m.prefill_s);
    METRIC("decode_seconds_total", "counter", "Time spent decoding.", "%.6f", m.decode_s);
    METRIC("prefill_tokens_per_second", "gauge", "Prefilled tokens per second, overall.", "%.3f",
           m.prefill_s > 0 ? (double)(m.prompt_tokens - m.cached_tokens) / m.prefill_s : 0.0);
    METRIC("decode_tokens_per_second", "gauge", "Generated tokens per second, overall.", "%.3f",
           m.decode_s > 0 ? (double)m.gen_tokens / m.decode_s : 0.0);
    METRIC("queue_depth", "gauge", "Tasks waiting for the engine.", "%d", m.queue_depth);
    METRIC("busy", "gauge", "1 while the engine runs a task.", "%d", m.busy);
    METRIC("running_generated_tokens", "gauge", "Tokens generated so far by the running task.",
           "%ld", m.running_gen);
    METRIC("prefix_cache_hits_total", "counter", "Prompts resumed from a snapshot.", "%ld",
           m.cache_hits);
    METRIC("prefix_cache_misses_total", "counter", "Prompts prefilled from the start.", "%ld",
           m.cache_misses);
    METRIC("prefix_cache_entries", "gauge", "Snapshots held.", "%ld", m.cache_entries);
    METRIC("prefix_cache_bytes", "gauge", "Bytes of snapshots held.", "%zu", m.cache_bytes);
#undef METRIC
    return send_body(s, c->mc, 200, "text/plain; version=0.0.4", b, len);
}

// ---------------------------------------------------------------------------------------------
// Generation requests

static enum MHD_Result do_generate(struct server *s, struct conn *c) {
    struct oai_error e = {0};
    int kind = c->route == R_CHAT ? OAI_CHAT : OAI_COMPLETION;
    if (oai_parse(kind, c->body ? c->body : "", c->len, &s->lim, &c->req, &e))
        return send_err(s, c->mc, &e);
    int *ids = NULL, n = 0, rc;
    if (kind == OAI_CHAT) {
        if (!engine_tmpl(s->eng))
            return http_fail(s, c->mc, 400, "invalid_request_error", NULL,
                        "this model has no chat template; use /v1/completions");
        rc = engine_encode_chat(s->eng, c->req.root, &ids, &n);
    } else if (c->req.prompt_ids) {
        ids = xmalloc(sizeof(int) * (size_t)c->req.n_prompt_ids);
        memcpy(ids, c->req.prompt_ids, sizeof(int) * (size_t)c->req.n_prompt_ids);
        n = c->req.n_prompt_ids;
        rc = 0;
    } else {
        // A raw prompt is the caller's own text, control tokens included (documented).
        rc = tok_encode(engine_tok(s->eng), c->req.prompt, c->req.prompt_len, 1, &ids, &n);
    }
    if (rc) {
        free(ids);
        return http_fail(s, c->mc, 400, "invalid_request_error", NULL, "%s", lily_err_msg());
    }
    int max_prompt = s->o.max_prompt > 0 ? s->o.max_prompt : engine_max_ctx(s->eng) - 1;
    if (n > max_prompt || n >= engine_max_ctx(s->eng)) {
        free(ids);
        return http_fail(s, c->mc, 400, "invalid_request_error", "context_length_exceeded",
                    "This model's maximum context length is %d tokens and at most %d of them "
                    "can be prompt; your prompt has %d tokens.",
                    engine_max_ctx(s->eng), max_prompt, n);
    }
    struct engine_req r = {0};
    r.prompt = ids;
    r.n_prompt = n;
    r.sp = c->req.sp;
    r.max_tokens = c->req.max_tokens > 0 ? (int)c->req.max_tokens : 0;
    r.stop = c->req.stop;
    r.n_stop = c->req.n_stop;
    r.top_logprobs = c->req.logprobs ? c->req.top_logprobs : -1;
    rc = engine_submit(s->eng, &r, &c->task);
    free(ids);
    if (c->task) atomic_fetch_add(&s->active, 1);
    if (rc == ENGINE_BUSY) {
        atomic_fetch_add(&s->n_busy, 1);
        return http_fail(s, c->mc, 503, "server_error", "server_busy",
                    "the server is busy (queue full); retry shortly");
    }
    if (rc) return http_fail(s, c->mc, 400, "invalid_request_error", NULL, "%s", lily_err_msg());

    char hex[25];
    http_rand_hex(hex, 24);
    snprintf(c->id, sizeof c->id, "%s%s", kind == OAI_CHAT ? "chatcmpl-" : "cmpl-", hex);
    c->created = (long)time(NULL);
    c->logprobs = json_array();
    if (kind == OAI_CHAT)
        c->parser = parse_new(tmpl_starts_in_reasoning(engine_tmpl(s->eng), c->req.root),
                              c->req.tools, c->req.tool_choice != OAI_TOOLS_NONE);

    if (c->req.stream) {
        // Streams last as long as generation does: the idle timeout only bounds a stalled
        // reader, since keep-alive comments count as traffic.
        c->last_write = lily_time();
        if (kind == OAI_CHAT)
            http_sse_add(c, oai_chat_chunk(c->id, c->created, s->o.model_id,
                                      json_pack("{s:s, s:s}", "role", "assistant", "content", ""),
                                      NULL, NULL, c->req.include_usage));
        struct MHD_Response *resp =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, http_stream_reader, c, NULL);
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        add_common_headers(s, resp);
        enum MHD_Result q = MHD_queue_response(c->mc, 200, resp);
        MHD_destroy_response(resp);
        atomic_fetch_add(&s->n_http, 1);
        return q;
    }
    // The client is checked every 0.1 s, also while events keep coming: a fast generation never
    // lets engine_next time out, and a client that left must not hold the engine to the end.
    double next_check = lily_time() + 0.1;
    for (;;) {
        struct engine_event ev;
        if (atomic_load(&s->stopping)) engine_cancel(c->task);
        int got = engine_next(c->task, &ev, 0.1);
        if (!got || lily_time() >= next_check) {
            next_check = lily_time() + 0.1;
            if (http_client_gone(c->mc)) {
                if (got) engine_event_free(&ev);
                atomic_fetch_add(&s->n_disconnects, 1);
                engine_cancel(c->task);
                return MHD_NO; // closes the connection
            }
        }
        if (!got) continue;
        int done = ev.type == ENGINE_EV_DONE;
        if (done && (ev.finish == ENGINE_FINISH_ERROR || ev.finish == ENGINE_FINISH_CANCELLED)) {
            http_engine_error(&e, &ev);
            engine_event_free(&ev);
            return send_err(s, c->mc, &e);
        }
        http_consume(c, &ev);
        engine_event_free(&ev);
        if (done) break;
    }
    return http_send_result(c);
}

// ---------------------------------------------------------------------------------------------
// MHD callbacks

static enum route find_route(const char *url, int *is_v1) {
    *is_v1 = 1;
    if (!strcmp(url, "/health")) return R_HEALTH;
    if (!strcmp(url, "/metrics")) return R_METRICS;
    if (!strncmp(url, "/v1/", 4)) url += 3;
    if (!strcmp(url, "/models")) return R_MODELS;
    if (!strncmp(url, "/models/", 8) && url[8]) return R_MODEL;
    if (!strcmp(url, "/chat/completions")) return R_CHAT;
    if (!strcmp(url, "/completions")) return R_COMPLETIONS;
    return R_NONE;
}

// Constant-time comparison of the bearer token.
static int auth_ok(struct server *s, struct MHD_Connection *mc) {
    if (!s->o.api_key) return 1;
    const char *h = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7)) return 0;
    h += 7;
    size_t n = strlen(h), m = strlen(s->o.api_key);
    unsigned char diff = (unsigned char)(n != m);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(h[i] ^ s->o.api_key[i % (m ? m : 1)]);
    return diff == 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls) {
    (void)version;
    struct server *s = cls;
    struct conn *c = *con_cls;
    if (!c) {
        // First call: headers only. Decide everything that does not need the body now.
        c = xcalloc(1, sizeof *c);
        c->srv = s;
        c->mc = mc;
        *con_cls = c;
        int v1;
        c->route = find_route(url, &v1);
        int is_post = !strcmp(method, "POST"), is_get = !strcmp(method, "GET");
        if (s->o.cors && !strcmp(method, "OPTIONS"))
            return send_body(s, mc, 204, "text/plain", xstrdup(""), 0);
        if (c->route == R_NONE)
            return http_fail(s, mc, 404, "invalid_request_error", "not_found", "no route %.200s %.200s",
                        method, url);
        int want_post = c->route == R_CHAT || c->route == R_COMPLETIONS;
        if ((want_post && !is_post) || (!want_post && !is_get))
            return http_fail(s, mc, 405, "invalid_request_error", "method_not_allowed",
                        "%.16s is not allowed on %.200s", method, url);
        if (c->route != R_HEALTH && !auth_ok(s, mc))
            return http_fail(s, mc, 401, "invalid_request_error", "invalid_api_key",
                        "missing or incorrect API key (send 'Authorization: Bearer KEY')");
        const char *enc = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Content-Encoding");
        if (enc && strcasecmp(enc, "identity"))
            return http_fail(s, mc, 415, "invalid_request_error", NULL,
                        "Content-Encoding is not supported; send the body uncompressed");
        const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->o.max_body)
            return http_fail(s, mc, 413, "invalid_request_error", NULL,
                        "request body too large (at most %zu bytes)", s->o.max_body);
        return MHD_YES;
    }
    if (*upload_size) {
        if (c->len + *upload_size > s->o.max_body) {
            // A chunked body past the cap: answer 413 when it ends, keeping nothing more.
            c->too_big = 1;
            if (c->len + *upload_size > 2 * s->o.max_body) return MHD_NO;
        } else {
            http_buf_add(&c->body, &c->len, &c->cap, upload_data, *upload_size);
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (c->too_big)
        return http_fail(s, mc, 413, "invalid_request_error", NULL,
                    "request body too large (at most %zu bytes)", s->o.max_body);
    switch (c->route) {
    case R_HEALTH:
        return http_send_json(s, mc, 200, json_pack("{s:s}", "status", "ok"));
    case R_MODELS:
    case R_MODEL:
        return do_models(s, c);
    case R_METRICS:
        return do_metrics(s, c);
    default:
        return do_generate(s, c);
    }
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)mc;
    struct conn *c = *con_cls;
    if (!c) return;
    if (c->task && toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && !c->stream_done &&
        c->req.stream)
        atomic_fetch_add(&c->srv->n_disconnects, 1);
    if (c->task) atomic_fetch_sub(&c->srv->active, 1);
    engine_task_release(c->task); // cancels a generation still running
    if (c->parser) parse_free(c->parser);
    oai_request_free(&c->req);
    json_decref(c->logprobs);
    free(c->body);
    free(c->content);
    free(c->reasoning);
    free(c->calls);
    free(c->call_ids);
    free(c->sse);
    free(c);
    *con_cls = NULL;
}

static void log_mhd(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    if (getenv("LILY_LOG") && atoi(getenv("LILY_LOG")) >= 2) vfprintf(stderr, fmt, ap);
}

int server_run(struct engine *e, const struct server_opts *o) {
    struct server s;
    memset(&s, 0, sizeof s);
    s.eng = e;
    s.o = *o;
    s.started = (long)time(NULL);
    oai_limits_default(&s.lim, engine_n_vocab(e));

    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t sl;
    const char *host = !strcmp(o->host, "localhost") ? "127.0.0.1" : o->host;
    unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                         MHD_USE_ERROR_LOG;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)o->port);
        sl = sizeof *a4;
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)o->port);
        sl = sizeof *a6;
        flags |= MHD_USE_IPv6;
    } else {
        return lily_err_set(LILY_EINVAL, "--host must be a numeric IPv4 or IPv6 address, got '%s'",
                            o->host);
    }
    (void)sl;

    // Signals: SIGINT/SIGTERM are taken by sigwait below, so block them before any thread starts
    // (the caller must have blocked them before starting the engine's threads, as cli_serve does);
    // SIGPIPE from a client that left must not kill the server.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    // No MHD_OPTION_LISTENING_ADDRESS_REUSE: it sets SO_REUSEPORT, which let a second server bind
    // the same port and silently take half the connections. MHD's default SO_REUSEADDR still
    // allows a restart while old connections linger in TIME_WAIT.
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, &s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)o->timeout_s, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned int)o->max_conns, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_EXTERNAL_LOGGER, log_mhd,
        NULL, MHD_OPTION_END);
    if (!d)
        return lily_err_set(LILY_EIO, "cannot listen on %s:%d (is the port in use?)", o->host,
                            o->port);
    int port = o->port;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_LISTEN_FD);
    struct sockaddr_storage bound;
    socklen_t bl = sizeof bound;
    if (di && !getsockname(di->listen_fd, (struct sockaddr *)&bound, &bl))
        port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                 : ((struct sockaddr_in *)&bound)->sin_port);
    fprintf(stderr, "lily: serving %s on http://%s:%d%s\n", o->model_id, o->host, port,
            o->api_key ? " (API key required)" : "");
    const char *pf = getenv("LILY_PORT_FILE");
    if (pf) {
        FILE *f = fopen(pf, "w");
        if (f) {
            fprintf(f, "%d\n", port);
            fclose(f);
        }
    }
    int sig;
    sigwait(&set, &sig);
    fprintf(stderr, "lily: shutting down\n");
    // Stop accepting, let running requests end (their generations are cancelled and streams get
    // an error event), then close what is left.
    atomic_store(&s.stopping, 1);
    MHD_quiesce_daemon(d);
    // Up to 10 s: a loaded machine may need a while to deliver the last events.
    for (int i = 0; i < 500 && atomic_load(&s.active) > 0; i++) usleep(20000);
    MHD_stop_daemon(d);
    return 0;
}
