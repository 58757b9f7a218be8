// openai.h: the OpenAI API as plain C. oai_parse turns a request body into a checked struct (a pure
// function: no engine, no I/O, so it is unit-tested in tests/test_request.c and fuzzed in
// tests/fuzz/fuzz_request.c); the oai_*_json builders make response bodies and SSE chunks.
//
// Policy (docs/SERVER.md): unknown fields are ignored; known fields with a wrong type or a value out
// of range, and features Lily does not have (n > 1, images, json response formats), are a 400 with
// an OpenAI error object naming the parameter.
#ifndef LILY_OAI_H
#define LILY_OAI_H

#include <jansson.h>
#include <stddef.h>

#include "sampler.h"

enum oai_kind { OAI_CHAT = 0, OAI_COMPLETION = 1 };
enum oai_tool_choice { OAI_TOOLS_NONE = 0, OAI_TOOLS_AUTO = 1 };

// Limits that depend on the server's configuration.
struct oai_limits {
    int n_vocab;          // token ids (logit_bias keys, completion prompts as ids) must be below
    int max_depth;        // JSON nesting (default 64)
    int max_messages;     // default 10000
    int max_stop;         // stop strings (default 16)
    int max_stop_len;     // bytes per stop string (default 1024)
};
void oai_limits_default(struct oai_limits *l, int n_vocab);

// An OpenAI error: HTTP status and the fields of {"error": {...}}.
struct oai_error {
    int status;
    const char *type;   // "invalid_request_error", "authentication_error", "server_error", ...
    const char *code;   // "context_length_exceeded", ... or NULL
    char param[64];     // "" = null
    char message[512];
};
// Fill `e` and return -1 (so parsers can `return oai_fail(e, 400, "messages", "...", ...)`).
int oai_fail(struct oai_error *e, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

struct oai_request {
    int kind;
    json_t *root;             // the body (owned), normalised for tmpl_render (see oai_parse)
    const char *model;        // as requested ("" if absent); answered under the served id anyway
    // completions: the prompt as text, or as token ids
    const char *prompt;
    size_t prompt_len;
    int *prompt_ids;
    int n_prompt_ids;
    int stream;
    int include_usage;
    long max_tokens;          // -1 = not given (generate to the end of the context)
    struct sampler_params sp; // sp.bias points into `bias`
    struct sampler_bias *bias;
    const char **stop;        // strings owned by root
    int n_stop;
    int logprobs;             // 1 = return logprobs
    int top_logprobs;         // 0..20
    const json_t *tools;      // the tools array (in root) or NULL
    int tool_choice;          // OAI_TOOLS_*
};

// Parse and check a request body. On success returns 0 and fills `r` (free with
// oai_request_free); on failure returns -1 with `e` filled (status 400) and `r` empty.
// Normalisations applied to root so that the chat template sees one shape: content given as text
// parts is joined into one string, "developer" becomes "system", "function" becomes "tool",
// assistant "reasoning" is copied to "reasoning_content", tool-call arguments given as a JSON string
// are parsed into an object, reasoning_effort "none" sets chat_template_kwargs.enable_thinking
// false, and tool_choice "none" removes the tools.
int oai_parse(int kind, const char *body, size_t len, const struct oai_limits *lim,
              struct oai_request *r, struct oai_error *e);
void oai_request_free(struct oai_request *r);

// Deepest nesting of arrays/objects in a JSON text (strings skipped); stops counting past `cap`.
int oai_json_depth(const char *s, size_t len, int cap);

// ---------------------------------------------------------------------------------------------
// Responses. Each builder returns a new jansson object.

struct oai_usage {
    int prompt_tokens;
    int completion_tokens;
    int cached_tokens;
    int reasoning_tokens; // generated tokens inside <think> (chat; 0 for completions)
};

struct oai_tool_call {
    const char *id;   // "call_..."
    const char *name;
    const char *args; // a JSON object text
};

// {"error": {...}} as a malloc'd string.
char *oai_error_body(const struct oai_error *e);

json_t *oai_usage_json(const struct oai_usage *u);

// Non-streaming chat completion. content/reasoning may be NULL; logprobs may be NULL (stolen).
json_t *oai_chat_response(const char *id, long created, const char *model, const char *content,
                          const char *reasoning, const struct oai_tool_call *calls, int n_calls,
                          const char *finish, const struct oai_usage *u, json_t *logprobs);

// One chat.completion.chunk with `delta` (stolen) and finish_reason (NULL = null). With
// include_usage the chunk carries "usage": null, as OpenAI sends before the usage chunk.
json_t *oai_chat_chunk(const char *id, long created, const char *model, json_t *delta,
                       const char *finish, json_t *logprobs, int include_usage);
// The final usage chunk: "choices": [] and "usage".
json_t *oai_usage_chunk(const char *object, const char *id, long created, const char *model,
                        const struct oai_usage *u);

json_t *oai_completion_response(const char *id, long created, const char *model, const char *text,
                                const char *finish, const struct oai_usage *u, json_t *logprobs);
json_t *oai_completion_chunk(const char *id, long created, const char *model, const char *text,
                             const char *finish, json_t *logprobs, int include_usage);

// One logprobs "content" entry for a token of text `tok` (bytes = its UTF-8 bytes).
json_t *oai_logprob_entry(const char *tok, size_t len, float lp);

// "data: <json>\n\n" as a malloc'd string; the object is released.
char *oai_sse(json_t *obj, size_t *len);

#endif
