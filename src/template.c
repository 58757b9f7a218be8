// template.c: the Qwen3.5 / Qwen3.6 chat template, rendered natively (template.h).
//
// tmpl_load reads the template the model ships and recognises it by a hash of its normalised text;
// tmpl_render then follows the official Jinja source statement by statement (the comments quote
// it), so that the output is byte-identical with HF apply_chat_template. The reference is
// tools/render_template_ref.py (jinja2); tests/py/test_template.py and the golden cases under
// tests/fixtures/templates/ compare the two.
//
// Request -> template variables, as an OpenAI server does (and the reference script too):
//   - a message's reasoning is the first non-null of reasoning_content, thinking, reasoning
//     (transformers 5.x aliases them the same way);
//   - a tool call's `arguments` given as a JSON string is parsed into an object.
// Where the template would print Python reprs or vision placeholders (images, non-string text
// parts, a non-array `tools`), Lily refuses the request with a clear message instead.
#include "template.h"

#include <stdint.h>
#include <string.h>

#include "common.h"
#include "template_py.h"

enum tmpl_kind { TMPL_QWEN35, TMPL_QWEN36 };

struct lily_template {
    enum tmpl_kind kind;
    char *path; // where the template was read from, for messages
};

// ---------------------------------------------------------------------------------------------
// Loading and recognition.

// FNV-1a 64 of the template text with CRLF turned into LF and trailing whitespace removed, so that
// a copy saved by an editor or extracted from tokenizer_config.json still matches.
static uint64_t tmpl_hash(const char *s, size_t n) {
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\r' && i + 1 < n && s[i + 1] == '\n') continue;
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    }
    return h;
}

// The templates Lily renders (files in tests/fixtures/templates/, sources in its README).
static const struct {
    uint64_t hash;
    enum tmpl_kind kind;
} known_templates[] = {
    {0xf07c510f47fbaca0ull, TMPL_QWEN35}, // Qwen/Qwen3.5-35B-A3B chat_template.jinja
    {0x54909fd6a78c9ad1ull, TMPL_QWEN36}, // the same with the Qwen3.6 preserve_thinking switch
};

// The template text from DIR/chat_template.jinja, else from tokenizer_config.json's chat_template
// (a string, or a list of {name, template} of which "default" is used, as HF does).
static int tmpl_read(const char *dir, char **text, size_t *len, char **path) {
    char *p = lily_path_join(dir, "chat_template.jinja");
    if (lily_read_file(p, 16u << 20, text, len) == 0) {
        *path = p;
        return 0;
    }
    free(p);
    p = lily_path_join(dir, "tokenizer_config.json");
    char *buf;
    size_t n;
    if (lily_read_file(p, 64u << 20, &buf, &n) != 0) {
        free(p);
        return lily_err_set(LILY_EMISSING, "%s: no chat_template.jinja and no tokenizer_config.json",
                            dir);
    }
    json_error_t je;
    json_t *cfg = json_loadb(buf, n, 0, &je);
    free(buf);
    if (!cfg) {
        lily_err_set(LILY_EFORMAT, "%s: line %d: %s", p, je.line, je.text);
        free(p);
        return LILY_EFORMAT;
    }
    json_t *ct = json_object_get(cfg, "chat_template");
    if (json_is_array(ct)) {
        json_t *pick = NULL;
        for (size_t i = 0; i < json_array_size(ct); i++) {
            json_t *e = json_array_get(ct, i);
            const char *name = json_string_value(json_object_get(e, "name"));
            if (name && !strcmp(name, "default")) pick = json_object_get(e, "template");
        }
        ct = pick;
    }
    if (!json_is_string(ct)) {
        json_decref(cfg);
        lily_err_set(LILY_EMISSING, "%s: no chat_template (and no chat_template.jinja)", p);
        free(p);
        return LILY_EMISSING;
    }
    *len = json_string_length(ct);
    *text = xmalloc(*len + 1);
    memcpy(*text, json_string_value(ct), *len + 1);
    json_decref(cfg);
    *path = p;
    return 0;
}

int tmpl_load(const char *dir, struct lily_template **out) {
    *out = NULL;
    char *text, *path;
    size_t len;
    int rc = tmpl_read(dir, &text, &len, &path);
    if (rc) return rc;
    uint64_t h = tmpl_hash(text, len);
    int found = -1;
    for (size_t i = 0; i < sizeof known_templates / sizeof known_templates[0]; i++)
        if (known_templates[i].hash == h) found = (int)i;
    if (found < 0) {
        // Say what it looks like, so that a modified Qwen template is told apart from a foreign one.
        const char *what = strstr(text, "<tool_call>\\n<function=") && strstr(text, "<|im_start|>")
                               ? "a modified Qwen3.5/3.6-style template"
                           : strstr(text, "<|im_start|>") ? "a ChatML template of another model"
                                                           : "an unknown template";
        lily_err_set(LILY_EUNSUPPORTED,
                     "%s: not a chat template Lily renders (%s, hash %016llx; Lily renders the "
                     "official Qwen3.5 and Qwen3.6 templates byte for byte)",
                     path, what, (unsigned long long)h);
        free(text);
        free(path);
        return LILY_EUNSUPPORTED;
    }
    free(text);
    struct lily_template *t = xcalloc(1, sizeof *t);
    t->kind = known_templates[found].kind;
    t->path = path;
    *out = t;
    return 0;
}

void tmpl_free(struct lily_template *t) {
    if (!t) return;
    free(t->path);
    free(t);
}

const char *tmpl_name(const struct lily_template *t) {
    return t->kind == TMPL_QWEN36 ? "qwen3.6" : "qwen3.5";
}

// ---------------------------------------------------------------------------------------------
// Output with plain spans.

struct rout {
    struct sbuf s;
    struct tok_span *sp;
    int nsp, capsp;
};

// Append text; `plain` marks it as request content (merged with a plain span that ends here).
static void out_put(struct rout *o, const char *s, size_t n, int plain) {
    if (!n) return;
    if (plain) {
        if (o->nsp && o->sp[o->nsp - 1].off + o->sp[o->nsp - 1].len == o->s.n) {
            o->sp[o->nsp - 1].len += n;
        } else {
            if (o->nsp == o->capsp) {
                o->capsp = o->capsp ? o->capsp * 2 : 32;
                o->sp = xrealloc(o->sp, (size_t)o->capsp * sizeof *o->sp);
            }
            o->sp[o->nsp++] = (struct tok_span){o->s.n, n};
        }
    }
    sbuf_put(&o->s, s, n);
}
static void out_lit(struct rout *o, const char *s) { out_put(o, s, strlen(s), 0); }

// ---------------------------------------------------------------------------------------------
// The template's pieces.

static int tmpl_err(const char *msg) { return lily_err_set(LILY_EINVAL, "%s", msg); }

// macro render_content(content): a string as is; an array of parts concatenated (text parts only:
// Lily is a text model); null or absent is ''. The result is |trim'd into *off/*len of b.
static int render_content(const json_t *c, struct sbuf *b, size_t *off, size_t *len) {
    b->n = 0;
    sbuf_put(b, "", 0);
    if (!c || json_is_null(c)) {
    } else if (json_is_string(c)) {
        sbuf_put(b, json_string_value(c), json_string_length(c));
    } else if (json_is_array(c)) {
        for (size_t i = 0; i < json_array_size(c); i++) {
            json_t *it = json_array_get(c, i);
            if (!json_is_object(it))
                return lily_err_set(LILY_EINVAL, "content part %zu is not an object", i);
            const char *type = json_string_value(json_object_get(it, "type"));
            if (json_object_get(it, "image") || json_object_get(it, "image_url") ||
                (type && !strcmp(type, "image")) || json_object_get(it, "video") ||
                (type && !strcmp(type, "video")))
                return lily_err_set(LILY_EINVAL, "content part %zu: images and videos are not "
                                                 "supported (text-only model)", i);
            json_t *text = json_object_get(it, "text");
            if (!text) return tmpl_err("Unexpected item type in content.");
            if (!json_is_string(text))
                return lily_err_set(LILY_EINVAL, "content part %zu: text is not a string", i);
            sbuf_put(b, json_string_value(text), json_string_length(text));
        }
    } else {
        return tmpl_err("Unexpected content type.");
    }
    py_strip(b->p, b->n, off, len);
    return 0;
}

static int has_prefix(const char *s, size_t n, const char *p) {
    size_t k = strlen(p);
    return n >= k && !memcmp(s, p, k);
}
static int has_suffix(const char *s, size_t n, const char *p) {
    size_t k = strlen(p);
    return n >= k && !memcmp(s + n - k, p, k);
}

static const char *role_of(const json_t *m) {
    const char *r = json_string_value(json_object_get(m, "role"));
    return r ? r : "";
}

static const char TOOLS_HEAD[] =
    "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>";
static const char TOOLS_TAIL[] =
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO "
    "suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\n"
    "value_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second "
    "parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n"
    "<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner "
    "<function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n- You may provide optional reasoning for your "
    "function call in natural language BEFORE the function call, but NOT after\n- If there is no "
    "function call available, answer the question like normal with your current knowledge and do "
    "not tell the user about function calls\n</IMPORTANT>";

// The tool calls of one assistant message: `content` is the (split) content, for the separator.
static int render_tool_calls(struct rout *o, const json_t *calls, const char *content, size_t clen,
                             struct sbuf *tmp) {
    for (size_t k = 0; k < json_array_size(calls); k++) {
        json_t *call = json_array_get(calls, k);
        if (!json_is_object(call))
            return lily_err_set(LILY_EINVAL, "tool_calls[%zu] is not an object", k);
        // {%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}
        json_t *fn = json_object_get(call, "function");
        if (fn) call = fn;
        if (!json_is_object(call))
            return lily_err_set(LILY_EINVAL, "tool_calls[%zu].function is not an object", k);
        json_t *name = json_object_get(call, "name");
        if (!json_is_string(name))
            return lily_err_set(LILY_EINVAL, "tool_calls[%zu] has no function name", k);
        if (k == 0) {
            size_t a, n;
            py_strip(content, clen, &a, &n); // {%- if content|trim %}
            out_lit(o, n ? "\n\n<tool_call>\n<function=" : "<tool_call>\n<function=");
        } else {
            out_lit(o, "\n<tool_call>\n<function=");
        }
        out_put(o, json_string_value(name), json_string_length(name), 1);
        out_lit(o, ">\n");
        json_t *args = json_object_get(call, "arguments"), *parsed = NULL;
        if (json_is_string(args)) { // the OpenAI wire form: a JSON text
            json_error_t je;
            parsed = json_loadb(json_string_value(args), json_string_length(args), 0, &je);
            if (!parsed)
                return lily_err_set(LILY_EINVAL, "tool_calls[%zu]: arguments are not valid JSON "
                                                 "(%s)", k, je.text);
            args = parsed;
        }
        if (args && !json_is_object(args)) {
            json_decref(parsed);
            return lily_err_set(LILY_EINVAL, "tool_calls[%zu]: arguments are not a JSON object", k);
        }
        const char *key;
        json_t *val;
        json_object_foreach(args, key, val) {
            out_lit(o, "<parameter=");
            out_put(o, key, strlen(key), 1);
            out_lit(o, ">\n");
            // mapping or non-string sequence -> tojson, else |string
            tmp->n = 0;
            sbuf_put(tmp, "", 0);
            if (json_is_object(val) || json_is_array(val)) py_tojson(val, tmp);
            else py_str_scalar(val, tmp);
            out_put(o, tmp->p, tmp->n, 1);
            out_lit(o, "\n</parameter>\n");
        }
        json_decref(parsed);
        out_lit(o, "</function>\n</tool_call>");
    }
    return 0;
}

// One assistant message. `full`: render the <think> block (after the last real query, or
// preserve_thinking in Qwen3.6).
static int render_assistant(struct rout *o, const json_t *m, struct sbuf *cbuf, size_t coff,
                            size_t clen, int full, struct sbuf *tmp) {
    const char *content = cbuf->p + coff;
    const char *reasoning = "";
    size_t rlen = 0;
    // The reasoning aliases (see the file comment), then `message.reasoning_content is string`.
    json_t *r = NULL;
    const char *names[] = {"reasoning_content", "thinking", "reasoning"};
    for (int i = 0; i < 3 && !r; i++) {
        json_t *v = json_object_get(m, names[i]);
        if (v && !json_is_null(v)) r = v;
    }
    if (json_is_string(r)) {
        reasoning = json_string_value(r);
        rlen = json_string_length(r);
    } else {
        const char *end = memmem(content, clen, "</think>", 8);
        if (end) {
            // content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
            size_t n = (size_t)(end - content);
            while (n && content[n - 1] == '\n') n--;
            const char *st = mem_rfind(content, n, "<think>", 7);
            const char *a = st ? st + 7 : content;
            n -= (size_t)(a - content);
            while (n && *a == '\n') a++, n--;
            reasoning = a;
            rlen = n;
            // content.split('</think>')[-1].lstrip('\n')
            const char *last = mem_rfind(content, clen, "</think>", 8) + 8;
            clen -= (size_t)(last - content);
            content = last;
            while (clen && *content == '\n') content++, clen--;
        }
    }
    size_t ro, rl;
    py_strip(reasoning, rlen, &ro, &rl); // reasoning_content|trim
    if (full) {
        out_lit(o, "<|im_start|>assistant\n<think>\n");
        out_put(o, reasoning + ro, rl, 1);
        out_lit(o, "\n</think>\n\n");
    } else {
        out_lit(o, "<|im_start|>assistant\n");
    }
    out_put(o, content, clen, 1);
    json_t *calls = json_object_get(m, "tool_calls");
    if (calls && !json_is_null(calls) && !json_is_array(calls))
        return tmpl_err("tool_calls must be an array");
    if (calls) {
        int rc = render_tool_calls(o, calls, content, clen, tmp);
        if (rc) return rc;
    }
    out_lit(o, "<|im_end|>\n");
    return 0;
}

static int render_body(const struct lily_template *t, const json_t *req, int add_gen,
                       struct rout *o) {
    if (!json_is_object(req)) return tmpl_err("request is not a JSON object");
    const json_t *msgs = json_object_get(req, "messages");
    if (!msgs || json_is_null(msgs) || (json_is_array(msgs) && !json_array_size(msgs)))
        return tmpl_err("No messages provided.");
    if (!json_is_array(msgs)) return tmpl_err("messages must be an array");
    size_t n = json_array_size(msgs);
    for (size_t i = 0; i < n; i++)
        if (!json_is_object(json_array_get(msgs, i)))
            return lily_err_set(LILY_EINVAL, "messages[%zu] is not an object", i);
    const json_t *kw = json_object_get(req, "chat_template_kwargs");
    if (kw && !json_is_null(kw) && !json_is_object(kw))
        return tmpl_err("chat_template_kwargs must be an object");
    // `enable_thinking is false` and `preserve_thinking is true` test identity with the booleans.
    int no_think = json_is_false(json_object_get(kw, "enable_thinking"));
    int preserve = t->kind == TMPL_QWEN36 && json_is_true(json_object_get(kw, "preserve_thinking"));
    const json_t *tools = json_object_get(req, "tools");
    if (tools && !json_is_null(tools) && !json_is_array(tools))
        return tmpl_err("tools must be an array");

    struct sbuf cb = {0}, tmp = {0};
    size_t co, cl;
    int rc = 0;
    long err_at = 0; // the message an error is about (-1: none in particular)
    const json_t *m0 = json_array_get(msgs, 0);
    int sys0 = !strcmp(role_of(m0), "system");
    if (json_array_size(tools)) {
        out_lit(o, TOOLS_HEAD);
        for (size_t i = 0; i < json_array_size(tools); i++) {
            out_lit(o, "\n");
            tmp.n = 0;
            py_tojson(json_array_get(tools, i), &tmp);
            out_put(o, tmp.p, tmp.n, 1);
        }
        out_lit(o, TOOLS_TAIL);
        if (sys0) {
            if ((rc = render_content(json_object_get(m0, "content"), &cb, &co, &cl))) goto done;
            if (cl) {
                out_lit(o, "\n\n");
                out_put(o, cb.p + co, cl, 1);
            }
        }
        out_lit(o, "<|im_end|>\n");
    } else if (sys0) {
        if ((rc = render_content(json_object_get(m0, "content"), &cb, &co, &cl))) goto done;
        out_lit(o, "<|im_start|>system\n");
        out_put(o, cb.p + co, cl, 1);
        out_lit(o, "<|im_end|>\n");
    }

    // The last "real" user query: the latest user message that is not only a tool response.
    long last_query = -1;
    for (size_t j = n; j-- > 0;) {
        const json_t *m = json_array_get(msgs, j);
        err_at = (long)j;
        if (strcmp(role_of(m), "user")) continue;
        if ((rc = render_content(json_object_get(m, "content"), &cb, &co, &cl))) goto done;
        if (!(has_prefix(cb.p + co, cl, "<tool_response>") &&
              has_suffix(cb.p + co, cl, "</tool_response>"))) {
            last_query = (long)j;
            break;
        }
    }
    if (last_query < 0) {
        err_at = -1;
        rc = tmpl_err("No user query found in messages.");
        goto done;
    }

    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(msgs, i);
        const char *role = role_of(m);
        err_at = (long)i;
        if ((rc = render_content(json_object_get(m, "content"), &cb, &co, &cl))) goto done;
        if (!strcmp(role, "system")) {
            if (i != 0) {
                rc = tmpl_err("System message must be at the beginning.");
                goto done;
            }
        } else if (!strcmp(role, "user")) {
            out_lit(o, "<|im_start|>user\n");
            out_put(o, cb.p + co, cl, 1);
            out_lit(o, "<|im_end|>\n");
        } else if (!strcmp(role, "assistant")) {
            int full = preserve || (long)i > last_query;
            if ((rc = render_assistant(o, m, &cb, co, cl, full, &tmp))) goto done;
        } else if (!strcmp(role, "tool")) {
            // Consecutive tool results share one user turn. (loop.previtem is undefined for the
            // first message, so a leading tool message opens no turn, as in the template.)
            if (i > 0 && strcmp(role_of(json_array_get(msgs, i - 1)), "tool"))
                out_lit(o, "<|im_start|>user");
            out_lit(o, "\n<tool_response>\n");
            out_put(o, cb.p + co, cl, 1);
            out_lit(o, "\n</tool_response>");
            if (i + 1 == n || strcmp(role_of(json_array_get(msgs, i + 1)), "tool"))
                out_lit(o, "<|im_end|>\n");
        } else {
            rc = tmpl_err("Unexpected message role.");
            goto done;
        }
    }
    if (add_gen) {
        out_lit(o, "<|im_start|>assistant\n");
        out_lit(o, no_think ? "<think>\n\n</think>\n\n" : "<think>\n");
    }
done:
    if (rc && err_at >= 0) { // say which message
        char msg[512];
        snprintf(msg, sizeof msg, "%s", lily_err_msg());
        lily_err_set(rc, "messages[%ld]: %s", err_at, msg);
    }
    sbuf_free(&cb);
    sbuf_free(&tmp);
    return rc;
}

int tmpl_render(const struct lily_template *t, const json_t *request, int add_gen, char **text,
                size_t *len, struct tok_span **plain, int *n_plain) {
    struct rout o = {0};
    *text = NULL;
    *len = 0;
    if (plain) *plain = NULL;
    if (n_plain) *n_plain = 0;
    sbuf_put(&o.s, "", 0);
    int rc = render_body(t, request, add_gen, &o);
    if (rc) {
        sbuf_free(&o.s);
        free(o.sp);
        return rc;
    }
    *text = o.s.p;
    *len = o.s.n;
    if (plain && n_plain) {
        *plain = o.sp;
        *n_plain = o.nsp;
    } else {
        free(o.sp);
    }
    return 0;
}

int tmpl_starts_in_reasoning(const struct lily_template *t, const json_t *request) {
    (void)t;
    const json_t *kw = json_object_get(request, "chat_template_kwargs");
    return !json_is_false(json_object_get(kw, "enable_thinking"));
}
