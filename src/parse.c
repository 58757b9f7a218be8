// parse.c: model output -> reasoning, content and tool calls, incrementally (parse.h).
//
// Three states: REASON (inside <think>, until </think>), CONTENT, and TOOL (inside <tool_call>,
// until </tool_call>). Input is appended to `pend`; step() emits only what no later input can
// change, so any split of the same text gives the same result:
//   - a tail that might be the start of the tag we are looking for is held back;
//   - reasoning drops its leading and trailing newlines ('<think>\n' + r + '\n</think>' in the
//     template), so trailing newlines are held until more reasoning follows;
//   - content drops the newlines after </think>, and whitespace before a <tool_call> (the
//     template's separator), so trailing whitespace is held until more content follows.
// A complete tool call block is parsed as <function=NAME> followed by <parameter=KEY>\nVALUE\n
// </parameter> items; values are typed by the tool's JSON schema. A block that does not parse, or
// names a function the request did not offer, is passed on as content, verbatim.
#include "parse.h"

#include <ctype.h>
#include <string.h>

#include "common.h"
#include "template_py.h"

enum pstate { P_REASON, P_CONTENT, P_TOOL };

struct pcall {
    char *name, *args;
};

struct lily_parser {
    enum pstate state;
    int parse_tools;
    json_t *tools;        // the request's tools (a reference), or NULL
    struct sbuf pend;     // input not yet decided
    size_t scan;          // TOOL: no tag starts before this offset of pend
    int reason_started;   // a non-newline reasoning byte was emitted
    int content_started;  // past the newlines that open content
    int think_allowed;    // content may still open with <think>
    int finished;
    struct sbuf reasoning, content; // emitted since the last parse_take
    struct pcall *calls;
    int n_calls, cap_calls, n_taken;
};

struct lily_parser *parse_new(int in_reasoning, const json_t *tools, int parse_tools) {
    struct lily_parser *p = xcalloc(1, sizeof *p);
    p->state = in_reasoning ? P_REASON : P_CONTENT;
    p->think_allowed = !in_reasoning;
    p->parse_tools = parse_tools;
    if (json_is_array(tools)) p->tools = json_incref((json_t *)tools);
    return p;
}

void parse_free(struct lily_parser *p) {
    if (!p) return;
    json_decref(p->tools);
    sbuf_free(&p->pend);
    sbuf_free(&p->reasoning);
    sbuf_free(&p->content);
    for (int i = 0; i < p->n_calls; i++) free(p->calls[i].name), free(p->calls[i].args);
    free(p->calls);
    free(p);
}

// ---------------------------------------------------------------------------------------------
// Small helpers.

// Length of the longest proper prefix of `tag` that ends s[0..n).
static size_t partial_tag(const char *s, size_t n, const char *tag) {
    size_t t = strlen(tag);
    for (size_t k = t - 1 < n ? t - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, tag, k)) return k;
    return 0;
}

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static void consume(struct lily_parser *p, size_t k) {
    memmove(p->pend.p, p->pend.p + k, p->pend.n - k);
    p->pend.n -= k;
    p->pend.p[p->pend.n] = 0;
}

static void emit_reasoning(struct lily_parser *p, const char *s, size_t n) {
    if (!p->reason_started)
        while (n && *s == '\n') s++, n--;
    if (!n) return;
    p->reason_started = 1;
    sbuf_put(&p->reasoning, s, n);
}

static void emit_content(struct lily_parser *p, const char *s, size_t n) {
    if (!n) return;
    sbuf_put(&p->content, s, n);
}

// ---------------------------------------------------------------------------------------------
// Tool call blocks.

// The JSON schema of parameter `key` of function `name` in the request's tools; NULL if unknown.
// *known: whether the function itself is among the tools.
static const json_t *param_schema(const struct lily_parser *p, const char *name, const char *key,
                                  int *known) {
    *known = 0;
    for (size_t i = 0; i < json_array_size(p->tools); i++) {
        json_t *t = json_array_get(p->tools, i), *fn = json_object_get(t, "function");
        if (!fn) fn = t; // also {name, parameters} without the wrapper
        const char *fname = json_string_value(json_object_get(fn, "name"));
        if (!fname || strcmp(fname, name)) continue;
        *known = 1;
        if (!key) return NULL;
        json_t *props = json_object_get(json_object_get(fn, "parameters"), "properties");
        return json_object_get(props, key);
    }
    return NULL;
}

static int type_has(const json_t *type, const char *name) {
    if (json_is_string(type)) return !strcmp(json_string_value(type), name);
    for (size_t i = 0; i < json_array_size(type); i++)
        if (json_is_string(json_array_get(type, i)) &&
            !strcmp(json_string_value(json_array_get(type, i)), name))
            return 1;
    return 0;
}

// A parameter value as JSON: raw string unless the schema gives a non-string type and the text
// parses as JSON (Python-style True/False count as booleans: that is how the template renders
// booleans in history, so the model writes them).
static json_t *typed_value(const json_t *schema, const char *v, size_t n) {
    const json_t *type = json_object_get(schema, "type");
    if (!type || type_has(type, "string")) return json_stringn(v, n);
    if (type_has(type, "boolean")) {
        if (n == 4 && !strncmp(v, "True", 4)) return json_true();
        if (n == 5 && !strncmp(v, "False", 5)) return json_false();
    }
    json_t *j = json_loadb(v, n, JSON_DECODE_ANY, NULL);
    return j ? j : json_stringn(v, n);
}

static const char *find(const char *s, const char *end, const char *needle) {
    return memmem(s, (size_t)(end - s), needle, strlen(needle));
}

// Parse the text between <tool_call> and </tool_call>; 0 and a new call, or -1 if malformed.
static int parse_block(struct lily_parser *p, const char *s, size_t n) {
    const char *e = s + n, *q = s;
    while (q < e && is_ws(*q)) q++;
    if ((size_t)(e - q) < 10 || memcmp(q, "<function=", 10)) return -1;
    q += 10;
    const char *gt = memchr(q, '>', (size_t)(e - q));
    if (!gt) return -1;
    size_t off, len;
    py_strip(q, (size_t)(gt - q), &off, &len);
    if (!len || memchr(q + off, '\n', len) || memchr(q + off, '<', len)) return -1;
    char *name = xmalloc(len + 1);
    memcpy(name, q + off, len);
    name[len] = 0;
    int known;
    param_schema(p, name, NULL, &known);
    if (json_array_size(p->tools) && !known) return free(name), -1;
    json_t *args = json_object();
    q = gt + 1;
    for (;;) {
        while (q < e && is_ws(*q)) q++;
        if (q == e) break; // a missing </function> is tolerated
        if ((size_t)(e - q) >= 11 && !memcmp(q, "</function>", 11)) {
            q += 11;
            while (q < e && is_ws(*q)) q++;
            if (q != e) goto bad;
            break;
        }
        if ((size_t)(e - q) < 11 || memcmp(q, "<parameter=", 11)) goto bad;
        q += 11;
        gt = memchr(q, '>', (size_t)(e - q));
        if (!gt) goto bad;
        py_strip(q, (size_t)(gt - q), &off, &len);
        if (!len || memchr(q + off, '\n', len)) goto bad;
        char key[256];
        if (len >= sizeof key) goto bad;
        memcpy(key, q + off, len);
        key[len] = 0;
        // The value ends at </parameter>, or (missing close) at the next <parameter= or
        // </function>, or at the end of the block.
        const char *v = gt + 1, *ve = e, *x;
        if ((x = find(v, ve, "</parameter>"))) ve = x;
        if ((x = find(v, ve, "<parameter="))) ve = x;
        if ((x = find(v, ve, "</function>"))) ve = x;
        q = ve;
        if ((size_t)(e - q) >= 12 && !memcmp(q, "</parameter>", 12)) q += 12;
        if (ve > v && *v == '\n') v++; // the format's newline after the tag ...
        if (ve > v && ve[-1] == '\n') ve--; // ... and before the closing tag
        const json_t *schema = param_schema(p, name, key, &known);
        json_object_set_new(args, key, typed_value(schema, v, (size_t)(ve - v)));
    }
    struct sbuf b = {0};
    py_tojson(args, &b);
    json_decref(args);
    if (p->n_calls == p->cap_calls) {
        p->cap_calls = p->cap_calls ? 2 * p->cap_calls : 4;
        p->calls = xrealloc(p->calls, (size_t)p->cap_calls * sizeof *p->calls);
    }
    p->calls[p->n_calls++] = (struct pcall){name, b.p};
    return 0;
bad:
    json_decref(args);
    free(name);
    return -1;
}

// ---------------------------------------------------------------------------------------------
// The state machine. Returns 1 if it made progress (call again), 0 if it needs more input.

static int step(struct lily_parser *p, int final) {
    char *s = p->pend.p;
    size_t n = p->pend.n;
    if (!n) return 0;
    if (p->state == P_REASON) {
        const char *end = memmem(s, n, "</think>", 8);
        size_t k = end ? (size_t)(end - s) : final ? n : n - partial_tag(s, n, "</think>");
        size_t emit = k;
        while (emit && s[emit - 1] == '\n') emit--; // held: they may precede </think>
        emit_reasoning(p, s, emit);
        if (end) {
            consume(p, k + 8);
            p->state = P_CONTENT;
            p->think_allowed = 0;
            p->content_started = 0;
            return 1;
        }
        consume(p, final ? n : emit);
        return 0;
    }
    if (p->state == P_CONTENT) {
        if (!p->content_started) {
            size_t i = 0;
            while (i < n && s[i] == '\n') i++;
            consume(p, i);
            if (!(n -= i)) return 0;
            p->content_started = 1;
        }
        if (p->think_allowed) {
            if (!final && n < 7 && !memcmp(s, "<think>", n)) return 0; // undecided
            p->think_allowed = 0;
            if (n >= 7 && !memcmp(s, "<think>", 7)) {
                consume(p, 7);
                p->state = P_REASON;
                return 1;
            }
        }
        const char *open = p->parse_tools ? memmem(s, n, "<tool_call>", 11) : NULL;
        if (open) {
            size_t k = (size_t)(open - s);
            while (k && is_ws(s[k - 1])) k--; // the separator before a call
            emit_content(p, s, k);
            consume(p, (size_t)(open - s) + 11);
            p->state = P_TOOL;
            p->scan = 0;
            return 1;
        }
        size_t k = n;
        if (!final) {
            if (p->parse_tools) k -= partial_tag(s, n, "<tool_call>");
            while (k && is_ws(s[k - 1])) k--;
        } else if (p->n_calls) {
            while (k && is_ws(s[k - 1])) k--; // whitespace after the last call
        }
        emit_content(p, s, k);
        consume(p, final ? n : k);
        return 0;
    }
    // P_TOOL: wait for </tool_call>; a new <tool_call> first means this one was never closed.
    const char *close = memmem(s + p->scan, n - p->scan, "</tool_call>", 12);
    const char *reopen = memmem(s + p->scan, (close ? (size_t)(close - s) : n) - p->scan,
                                "<tool_call>", 11);
    if (reopen) {
        emit_content(p, "<tool_call>", 11);
        emit_content(p, s, (size_t)(reopen - s));
        consume(p, (size_t)(reopen - s) + 11);
        p->scan = 0;
        return 1;
    }
    if (close) {
        size_t k = (size_t)(close - s);
        if (parse_block(p, s, k)) {
            emit_content(p, "<tool_call>", 11);
            emit_content(p, s, k + 12);
        }
        consume(p, k + 12);
        p->state = P_CONTENT;
        return 1;
    }
    if (final) { // never closed: pass it on as text
        emit_content(p, "<tool_call>", 11);
        emit_content(p, s, n);
        consume(p, n);
        return 0;
    }
    p->scan = n > 12 ? n - 12 : 0;
    return 0;
}

void parse_feed(struct lily_parser *p, const char *text, size_t len) {
    if (p->finished || !len) return;
    // NUL bytes are dropped: the deltas are C strings (and no OpenAI client wants them).
    for (const char *z; len && (z = memchr(text, 0, len));) {
        sbuf_put(&p->pend, text, (size_t)(z - text));
        len -= (size_t)(z - text) + 1;
        text = z + 1;
    }
    sbuf_put(&p->pend, text, len);
    while (step(p, 0)) {
    }
}

void parse_finish(struct lily_parser *p) {
    if (p->finished) return;
    while (step(p, 1)) {
    }
    p->finished = 1;
}

static char *take_text(struct sbuf *b) {
    if (!b->n) return NULL;
    char *s = b->p;
    *b = (struct sbuf){0};
    return s;
}

int parse_take(struct lily_parser *p, struct parse_delta *d) {
    d->reasoning = take_text(&p->reasoning);
    d->content = take_text(&p->content);
    d->n_tool_calls = p->n_calls;
    int fresh = d->reasoning || d->content || p->n_calls != p->n_taken;
    p->n_taken = p->n_calls;
    return fresh;
}

void parse_delta_free(struct parse_delta *d) {
    free(d->reasoning);
    free(d->content);
    d->reasoning = d->content = NULL;
}

int parse_in_reasoning(const struct lily_parser *p) { return p->state == P_REASON; }

int parse_n_tool_calls(const struct lily_parser *p) { return p->n_calls; }

const char *parse_tool_name(const struct lily_parser *p, int i) {
    return i >= 0 && i < p->n_calls ? p->calls[i].name : NULL;
}

const char *parse_tool_args(const struct lily_parser *p, int i) {
    return i >= 0 && i < p->n_calls ? p->calls[i].args : NULL;
}
