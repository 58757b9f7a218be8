// openai.c: request parsing and validation for the OpenAI API (openai.h); the responses are built in
// openai_reply.c. Nothing here touches the engine or the network: bodies in, structs out.
#include "openai.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

void oai_limits_default(struct oai_limits *l, int n_vocab) {
    l->n_vocab = n_vocab;
    l->max_depth = 64;
    l->max_messages = 10000;
    l->max_stop = 16;
    l->max_stop_len = 1024;
}

int oai_fail(struct oai_error *e, int status, const char *param, const char *fmt, ...) {
    e->status = status;
    e->type = status >= 500 ? "server_error" : "invalid_request_error";
    e->code = NULL;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

int oai_json_depth(const char *s, size_t len, int cap) {
    int d = 0, mx = 0, in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '[' || c == '{') {
            if (++d > mx) mx = d;
            if (mx > cap) return mx;
        } else if (c == ']' || c == '}') {
            d--;
        }
    }
    return mx;
}

// ---------------------------------------------------------------------------------------------
// Field readers. A JSON null counts as absent (clients send null for "not set"). Each returns 1 if
// the field is present and valid, 0 if absent, -1 (with e filled) if present but invalid.

static int get_num(const json_t *o, const char *key, double lo, double hi, double *out,
                   struct oai_error *e) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return oai_fail(e, 400, key, "'%s' must be a number", key);
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return oai_fail(e, 400, key, "'%s' must be between %g and %g, got %g", key, lo, hi, x);
    *out = x;
    return 1;
}

static int get_int(const json_t *o, const char *key, long long lo, long long hi, long long *out,
                   struct oai_error *e) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    long long x = 0;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        // 3.0 is accepted as 3; 1.5 or 1e300 are not integers.
        if (d != floor(d) || d < -9.2e18 || d > 9.2e18)
            return oai_fail(e, 400, key, "'%s' must be an integer, got %g", key, d);
        x = (long long)d;
    } else {
        return oai_fail(e, 400, key, "'%s' must be an integer", key);
    }
    if (x < lo || x > hi)
        return oai_fail(e, 400, key, "'%s' must be between %lld and %lld, got %lld", key, lo, hi,
                        x);
    *out = x;
    return 1;
}

static int get_bool(const json_t *o, const char *key, int *out, struct oai_error *e) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return oai_fail(e, 400, key, "'%s' must be a boolean", key);
    *out = json_is_true(v);
    return 1;
}

// ---------------------------------------------------------------------------------------------
// messages

static const char *norm_role(const char *r) {
    if (!strcmp(r, "developer")) return "system";
    if (!strcmp(r, "function")) return "tool";
    if (!strcmp(r, "system") || !strcmp(r, "user") || !strcmp(r, "assistant") ||
        !strcmp(r, "tool"))
        return r;
    return NULL;
}

// content: a string, null (assistant only), or text parts joined into one string (exactly what the
// template would concatenate).
static int check_content(json_t *m, int i, const char *role, struct oai_error *e) {
    json_t *c = json_object_get(m, "content");
    if (!c || json_is_null(c)) {
        if (!strcmp(role, "assistant")) return 0;
        return oai_fail(e, 400, "messages", "messages[%d].content is missing", i);
    }
    if (json_is_string(c)) return 0;
    if (!json_is_array(c))
        return oai_fail(e, 400, "messages",
                        "messages[%d].content must be a string or an array of text parts", i);
    size_t total = 0, k;
    json_t *part;
    json_array_foreach(c, k, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        if (!json_is_object(part) || !type)
            return oai_fail(e, 400, "messages", "messages[%d].content[%zu] needs a 'type'", i, k);
        if (strcmp(type, "text") && strcmp(type, "refusal"))
            return oai_fail(e, 400, "messages",
                            "messages[%d].content[%zu]: part type '%.40s' is not supported (Lily "
                            "serves a text-only model)",
                            i, k, type);
        const json_t *t = json_object_get(part, !strcmp(type, "text") ? "text" : "refusal");
        if (!json_is_string(t))
            return oai_fail(e, 400, "messages", "messages[%d].content[%zu] has no text string", i,
                            k);
        total += json_string_length(t);
    }
    char *buf = xmalloc(total + 1);
    size_t off = 0;
    json_array_foreach(c, k, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        const json_t *t = json_object_get(part, !strcmp(type, "text") ? "text" : "refusal");
        memcpy(buf + off, json_string_value(t), json_string_length(t));
        off += json_string_length(t);
    }
    json_object_set_new(m, "content", json_stringn_nocheck(buf, off));
    free(buf);
    return 0;
}

static int check_tool_calls(json_t *m, int i, struct oai_error *e) {
    json_t *tc = json_object_get(m, "tool_calls");
    if (!tc || json_is_null(tc)) {
        json_object_del(m, "tool_calls");
        return 0;
    }
    if (!json_is_array(tc))
        return oai_fail(e, 400, "messages", "messages[%d].tool_calls must be an array", i);
    size_t k;
    json_t *call;
    json_array_foreach(tc, k, call) {
        json_t *fn = json_object_get(call, "function");
        if (!json_is_object(call) || !json_is_object(fn) ||
            !json_is_string(json_object_get(fn, "name")))
            return oai_fail(e, 400, "messages",
                            "messages[%d].tool_calls[%zu] needs function.name (a string)", i, k);
        json_t *args = json_object_get(fn, "arguments");
        if (!args || json_is_null(args)) {
            json_object_set_new(fn, "arguments", json_object());
        } else if (json_is_string(args)) {
            // The API sends arguments as a JSON text; the template iterates over the object.
            json_error_t je;
            json_t *obj = json_loadb(json_string_value(args), json_string_length(args),
                                     JSON_REJECT_DUPLICATES, &je);
            if (!json_is_object(obj)) {
                json_decref(obj);
                return oai_fail(e, 400, "messages",
                                "messages[%d].tool_calls[%zu].function.arguments is not a JSON "
                                "object",
                                i, k);
            }
            json_object_set_new(fn, "arguments", obj);
        } else if (!json_is_object(args)) {
            return oai_fail(e, 400, "messages",
                            "messages[%d].tool_calls[%zu].function.arguments must be a JSON "
                            "object or its text",
                            i, k);
        }
    }
    return 0;
}

static int check_messages(json_t *root, const struct oai_limits *lim, struct oai_error *e) {
    json_t *msgs = json_object_get(root, "messages");
    if (!msgs || json_is_null(msgs))
        return oai_fail(e, 400, "messages", "'messages' is required");
    if (!json_is_array(msgs)) return oai_fail(e, 400, "messages", "'messages' must be an array");
    size_t n = json_array_size(msgs);
    if (n == 0) return oai_fail(e, 400, "messages", "'messages' must not be empty");
    if (n > (size_t)lim->max_messages)
        return oai_fail(e, 400, "messages", "too many messages (%zu, at most %d)", n,
                        lim->max_messages);
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m))
            return oai_fail(e, 400, "messages", "messages[%zu] must be an object", i);
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!role) return oai_fail(e, 400, "messages", "messages[%zu].role is missing", i);
        const char *r = norm_role(role);
        if (!r)
            return oai_fail(e, 400, "messages", "messages[%zu].role '%.40s' is not one of system, "
                            "developer, user, assistant, tool", i, role);
        if (r != role) json_object_set_new(m, "role", json_string(r));
        if (check_content(m, (int)i, r, e)) return -1;
        if (!strcmp(r, "assistant")) {
            json_t *rc = json_object_get(m, "reasoning_content");
            json_t *rs = json_object_get(m, "reasoning");
            if (rc && !json_is_null(rc) && !json_is_string(rc))
                return oai_fail(e, 400, "messages",
                                "messages[%zu].reasoning_content must be a string", i);
            if (rs && !json_is_null(rs) && !json_is_string(rs))
                return oai_fail(e, 400, "messages", "messages[%zu].reasoning must be a string", i);
            if ((!rc || json_is_null(rc)) && json_is_string(rs))
                json_object_set(m, "reasoning_content", rs);
            else if (rc && json_is_null(rc))
                json_object_del(m, "reasoning_content");
            if (check_tool_calls(m, (int)i, e)) return -1;
        }
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// tools, stop, logit_bias, prompt

static int check_tools(json_t *root, struct oai_request *r, struct oai_error *e) {
    json_t *tools = json_object_get(root, "tools");
    if (tools && json_is_null(tools)) {
        json_object_del(root, "tools");
        tools = NULL;
    }
    if (tools) {
        if (!json_is_array(tools)) return oai_fail(e, 400, "tools", "'tools' must be an array");
        if (json_array_size(tools) > 512)
            return oai_fail(e, 400, "tools", "too many tools (at most 512)");
        size_t k;
        json_t *t;
        json_array_foreach(tools, k, t) {
            const char *type = json_string_value(json_object_get(t, "type"));
            json_t *fn = json_object_get(t, "function");
            if (!type || strcmp(type, "function"))
                return oai_fail(e, 400, "tools", "tools[%zu]: only type 'function' is supported",
                                k);
            const char *name = json_string_value(json_object_get(fn, "name"));
            if (!json_is_object(fn) || !name || !*name)
                return oai_fail(e, 400, "tools", "tools[%zu].function.name is missing", k);
            json_t *params = json_object_get(fn, "parameters");
            if (params && !json_is_null(params) && !json_is_object(params))
                return oai_fail(e, 400, "tools", "tools[%zu].function.parameters must be an object",
                                k);
        }
        if (json_array_size(tools) == 0) {
            json_object_del(root, "tools");
            tools = NULL;
        }
    }
    r->tool_choice = tools ? OAI_TOOLS_AUTO : OAI_TOOLS_NONE;
    json_t *tc = json_object_get(root, "tool_choice");
    if (tc && !json_is_null(tc)) {
        if (json_is_string(tc)) {
            const char *s = json_string_value(tc);
            if (!strcmp(s, "none")) r->tool_choice = OAI_TOOLS_NONE;
            else if (!tools)
                return oai_fail(e, 400, "tool_choice", "'tool_choice' needs 'tools'");
            else if (strcmp(s, "auto") && strcmp(s, "required"))
                return oai_fail(e, 400, "tool_choice",
                                "'tool_choice' must be none, auto, required or a function");
        } else if (json_is_object(tc)) {
            const char *type = json_string_value(json_object_get(tc, "type"));
            if (!type || (strcmp(type, "function") && strcmp(type, "allowed_tools")))
                return oai_fail(e, 400, "tool_choice", "'tool_choice' has an unknown type");
            if (!tools) return oai_fail(e, 400, "tool_choice", "'tool_choice' needs 'tools'");
        } else {
            return oai_fail(e, 400, "tool_choice", "'tool_choice' must be a string or an object");
        }
    }
    // With tool_choice "none" the model is not shown the tools at all.
    if (r->tool_choice == OAI_TOOLS_NONE && tools) {
        json_object_del(root, "tools");
        tools = NULL;
    }
    r->tools = tools;
    return 0;
}

static int check_stop(json_t *root, const struct oai_limits *lim, struct oai_request *r,
                      struct oai_error *e) {
    json_t *s = json_object_get(root, "stop");
    if (!s || json_is_null(s)) return 0;
    if (json_is_string(s)) {
        r->stop = xmalloc(sizeof *r->stop);
        r->stop[0] = json_string_value(s);
        r->n_stop = 1;
    } else if (json_is_array(s)) {
        if (json_array_size(s) > (size_t)lim->max_stop)
            return oai_fail(e, 400, "stop", "at most %d stop strings", lim->max_stop);
        r->stop = xmalloc(sizeof *r->stop * (json_array_size(s) + 1));
        size_t k;
        json_t *x;
        json_array_foreach(s, k, x) {
            if (!json_is_string(x))
                return oai_fail(e, 400, "stop", "'stop' must be a string or a list of strings");
            r->stop[r->n_stop++] = json_string_value(x);
        }
    } else {
        return oai_fail(e, 400, "stop", "'stop' must be a string or a list of strings");
    }
    for (int k = 0; k < r->n_stop; k++) {
        size_t n = strlen(r->stop[k]);
        if (n == 0) return oai_fail(e, 400, "stop", "stop strings must not be empty");
        if (n > (size_t)lim->max_stop_len)
            return oai_fail(e, 400, "stop", "stop strings are limited to %d bytes",
                            lim->max_stop_len);
    }
    return 0;
}

static int check_logit_bias(json_t *root, const struct oai_limits *lim, struct oai_request *r,
                            struct oai_error *e) {
    json_t *b = json_object_get(root, "logit_bias");
    if (!b || json_is_null(b)) return 0;
    if (!json_is_object(b)) return oai_fail(e, 400, "logit_bias", "'logit_bias' must be an object");
    if (json_object_size(b) > 1024)
        return oai_fail(e, 400, "logit_bias", "'logit_bias' has more than 1024 entries");
    r->bias = xmalloc(sizeof *r->bias * (json_object_size(b) + 1));
    const char *key;
    json_t *v;
    json_object_foreach(b, key, v) {
        char *end;
        long id = strtol(key, &end, 10);
        if (!*key || *end || id < 0 || id >= lim->n_vocab)
            return oai_fail(e, 400, "logit_bias",
                            "logit_bias key '%.32s' is not a token id in [0, %d)", key,
                            lim->n_vocab);
        if (!json_is_number(v) || !(json_number_value(v) >= -100 && json_number_value(v) <= 100))
            return oai_fail(e, 400, "logit_bias", "logit_bias values must be numbers in [-100, 100]");
        r->bias[r->sp.n_bias].id = (int)id;
        r->bias[r->sp.n_bias].bias = (float)json_number_value(v);
        r->sp.n_bias++;
    }
    r->sp.bias = r->bias;
    return 0;
}

static int take_ids(const json_t *a, const struct oai_limits *lim, struct oai_request *r,
                    struct oai_error *e) {
    size_t n = json_array_size(a), k;
    if (n == 0) return oai_fail(e, 400, "prompt", "'prompt' must not be empty");
    r->prompt_ids = xmalloc(sizeof(int) * n);
    json_t *x;
    json_array_foreach(a, k, x) {
        if (!json_is_integer(x) || json_integer_value(x) < 0 ||
            json_integer_value(x) >= lim->n_vocab)
            return oai_fail(e, 400, "prompt", "prompt token ids must be integers in [0, %d)",
                            lim->n_vocab);
        r->prompt_ids[k] = (int)json_integer_value(x);
    }
    r->n_prompt_ids = (int)n;
    return 0;
}

static int check_prompt(json_t *root, const struct oai_limits *lim, struct oai_request *r,
                        struct oai_error *e) {
    json_t *p = json_object_get(root, "prompt");
    if (!p || json_is_null(p)) return oai_fail(e, 400, "prompt", "'prompt' is required");
    if (json_is_array(p) && json_array_size(p) == 1 &&
        (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0))))
        p = json_array_get(p, 0);
    if (json_is_string(p)) {
        r->prompt = json_string_value(p);
        r->prompt_len = json_string_length(p);
        if (r->prompt_len == 0) return oai_fail(e, 400, "prompt", "'prompt' must not be empty");
        return 0;
    }
    if (json_is_array(p) && json_array_size(p) > 0 && json_is_integer(json_array_get(p, 0)))
        return take_ids(p, lim, r, e);
    if (json_is_array(p) && json_array_size(p) > 1)
        return oai_fail(e, 400, "prompt", "one prompt per request (got %zu)", json_array_size(p));
    return oai_fail(e, 400, "prompt", "'prompt' must be a string or a list of token ids");
}

// chat_template_kwargs and reasoning_effort.
static int check_thinking(json_t *root, struct oai_error *e) {
    json_t *kw = json_object_get(root, "chat_template_kwargs");
    if (kw && json_is_null(kw)) {
        json_object_del(root, "chat_template_kwargs");
        kw = NULL;
    }
    if (kw && !json_is_object(kw))
        return oai_fail(e, 400, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
    int b;
    if (kw) {
        if (get_bool(kw, "enable_thinking", &b, e) < 0 ||
            get_bool(kw, "preserve_thinking", &b, e) < 0) {
            snprintf(e->param, sizeof e->param, "chat_template_kwargs");
            return -1;
        }
    }
    json_t *re = json_object_get(root, "reasoning_effort");
    if (re && !json_is_null(re)) {
        if (!json_is_string(re))
            return oai_fail(e, 400, "reasoning_effort", "'reasoning_effort' must be a string");
        if (!strcmp(json_string_value(re), "none") &&
            !(kw && json_object_get(kw, "enable_thinking"))) {
            if (!kw) {
                kw = json_object();
                json_object_set_new(root, "chat_template_kwargs", kw);
            }
            json_object_set_new(kw, "enable_thinking", json_false());
        }
    }
    return 0;
}

static int check_sampling(json_t *root, struct oai_request *r, struct oai_error *e) {
    double d = 0;
    long long x = 0;
    int rc;
    struct sampler_params *sp = &r->sp;
    if ((rc = get_num(root, "temperature", 0, 2, &d, e)) < 0) return -1;
    if (rc) sp->temperature = (float)d;
    if ((rc = get_num(root, "top_p", 0, 1, &d, e)) < 0) return -1;
    if (rc) {
        if (d <= 0) return oai_fail(e, 400, "top_p", "'top_p' must be greater than 0");
        sp->top_p = (float)d;
    }
    if ((rc = get_int(root, "top_k", -1, 1000000, &x, e)) < 0) return -1;
    if (rc) sp->top_k = (int)x;
    if ((rc = get_num(root, "min_p", 0, 1, &d, e)) < 0) return -1;
    if (rc) sp->min_p = (float)d;
    if ((rc = get_num(root, "presence_penalty", -2, 2, &d, e)) < 0) return -1;
    if (rc) sp->presence_penalty = (float)d;
    if ((rc = get_num(root, "frequency_penalty", -2, 2, &d, e)) < 0) return -1;
    if (rc) sp->frequency_penalty = (float)d;
    const char *rk = json_object_get(root, "repetition_penalty") ? "repetition_penalty"
                                                                  : "repeat_penalty";
    if ((rc = get_num(root, rk, 0, 10, &d, e)) < 0) return -1;
    if (rc) {
        if (d <= 0) return oai_fail(e, 400, rk, "'%s' must be greater than 0", rk);
        sp->repetition_penalty = (float)d;
    }
    if ((rc = get_int(root, "seed", INT64_MIN, INT64_MAX, &x, e)) < 0) return -1;
    if (rc) {
        sp->has_seed = 1;
        sp->seed = (uint64_t)x;
    }
    return 0;
}

int oai_parse(int kind, const char *body, size_t len, const struct oai_limits *lim,
              struct oai_request *r, struct oai_error *e) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->max_tokens = -1;
    sampler_params_default(&r->sp);
    if (oai_json_depth(body, len, lim->max_depth) > lim->max_depth)
        return oai_fail(e, 400, NULL, "JSON nested deeper than %d levels", lim->max_depth);
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return oai_fail(e, 400, NULL, "invalid JSON at line %d column %d: %s", je.line, je.column,
                        je.text);
    r->root = root;
    if (!json_is_object(root)) goto fail_obj;

    json_t *model = json_object_get(root, "model");
    if (model && !json_is_null(model) && !json_is_string(model)) {
        oai_fail(e, 400, "model", "'model' must be a string");
        goto fail;
    }
    r->model = json_is_string(model) ? json_string_value(model) : "";

    long long x = 0;
    int rc;
    if ((rc = get_int(root, "n", 1, 1000000, &x, e)) < 0) goto fail;
    if (rc && x != 1) {
        oai_fail(e, 400, "n", "'n' must be 1: Lily returns one choice per request");
        goto fail;
    }
    if (get_bool(root, "stream", &r->stream, e) < 0) goto fail;
    json_t *so = json_object_get(root, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) {
            oai_fail(e, 400, "stream_options", "'stream_options' must be an object");
            goto fail;
        }
        if (!r->stream) {
            oai_fail(e, 400, "stream_options", "'stream_options' is only allowed with stream");
            goto fail;
        }
        if (get_bool(so, "include_usage", &r->include_usage, e) < 0) goto fail;
    }
    // max_completion_tokens wins over the deprecated max_tokens.
    const char *mk = json_object_get(root, "max_completion_tokens") &&
                             !json_is_null(json_object_get(root, "max_completion_tokens"))
                         ? "max_completion_tokens"
                         : "max_tokens";
    if ((rc = get_int(root, mk, 1, 1 << 30, &x, e)) < 0) goto fail;
    if (rc) r->max_tokens = (long)x;
    else if (kind == OAI_COMPLETION) r->max_tokens = 16; // the completions API's default
    if (check_sampling(root, r, e)) goto fail;
    if (kind == OAI_CHAT && get_bool(root, "logprobs", &r->logprobs, e) < 0) goto fail;
    if ((rc = get_int(root, "top_logprobs", 0, 20, &x, e)) < 0) goto fail;
    if (rc) {
        if (!r->logprobs && kind == OAI_CHAT) {
            oai_fail(e, 400, "top_logprobs", "'top_logprobs' requires 'logprobs': true");
            goto fail;
        }
        r->top_logprobs = (int)x;
    }
    if (kind == OAI_COMPLETION) {
        // In the completions API, logprobs is an integer (the number of top entries).
        json_t *lp = json_object_get(root, "logprobs");
        if (lp && !json_is_null(lp) && !json_is_integer(lp)) {
            oai_fail(e, 400, "logprobs", "'logprobs' must be an integer for completions");
            goto fail;
        }
        if (json_is_integer(lp)) {
            if (json_integer_value(lp) < 0 || json_integer_value(lp) > 20) {
                oai_fail(e, 400, "logprobs", "'logprobs' must be between 0 and 20");
                goto fail;
            }
            r->logprobs = 1;
            r->top_logprobs = (int)json_integer_value(lp);
        }
        int b = 0;
        if (get_bool(root, "echo", &b, e) < 0) goto fail;
        if (b) {
            oai_fail(e, 400, "echo", "'echo' is not supported");
            goto fail;
        }
        json_t *sfx = json_object_get(root, "suffix");
        if (sfx && !json_is_null(sfx)) {
            oai_fail(e, 400, "suffix", "'suffix' is not supported");
            goto fail;
        }
        if ((rc = get_int(root, "best_of", 1, 1000000, &x, e)) < 0) goto fail;
        if (rc && x != 1) {
            oai_fail(e, 400, "best_of", "'best_of' must be 1");
            goto fail;
        }
    }
    if (check_stop(root, lim, r, e)) goto fail;
    if (check_logit_bias(root, lim, r, e)) goto fail;
    json_t *rf = json_object_get(root, "response_format");
    if (rf && !json_is_null(rf)) {
        const char *t = json_string_value(json_object_get(rf, "type"));
        if (!t || strcmp(t, "text")) {
            oai_fail(e, 400, "response_format",
                     "'response_format' type '%.40s' is not supported (only 'text')",
                     t ? t : "?");
            goto fail;
        }
    }
    json_t *ptc = json_object_get(root, "parallel_tool_calls");
    if (ptc && !json_is_null(ptc) && !json_is_boolean(ptc)) {
        oai_fail(e, 400, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
        goto fail;
    }
    if (kind == OAI_CHAT) {
        if (check_messages(root, lim, e)) goto fail;
        if (check_tools(root, r, e)) goto fail;
        if (check_thinking(root, e)) goto fail;
    } else {
        if (check_prompt(root, lim, r, e)) goto fail;
    }
    return 0;
fail_obj:
    oai_fail(e, 400, NULL, "the request body must be a JSON object");
fail:
    oai_request_free(r);
    return -1;
}

void oai_request_free(struct oai_request *r) {
    json_decref(r->root);
    free(r->prompt_ids);
    free(r->bias);
    free(r->stop);
    memset(r, 0, sizeof *r);
}
