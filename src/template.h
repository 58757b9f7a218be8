// template.h: the Qwen3.5/3.6 chat template, rendered natively (no general Jinja engine runs model-
// supplied code). tmpl_load reads the template shipped with the model (chat_template.jinja, or the
// chat_template of tokenizer_config.json), recognises it as one Lily renders, and says clearly when
// it is not. Output is byte-identical to HF apply_chat_template with jinja2 (spec §5.4).
#ifndef LILY_TEMPLATE_H
#define LILY_TEMPLATE_H

#include <jansson.h>
#include <stddef.h>

#include "tokenizer.h"

struct lily_template;

int tmpl_load(const char *dir, struct lily_template **out);
void tmpl_free(struct lily_template *t);
// Which template was recognised: "qwen3.5" or "qwen3.6".
const char *tmpl_name(const struct lily_template *t);

// Render an OpenAI chat-completions request body (`messages`, `tools`, `chat_template_kwargs` with
// enable_thinking / preserve_thinking; other keys ignored) with the generation prompt if add_gen.
// *text is malloc'd and NUL-terminated. *plain (malloc'd, may be NULL) lists the byte spans that came
// from request content (message text, reasoning, tool arguments and results, tool definitions): the
// tokenizer must never turn them into control tokens (tok_encode_spans). Errors the template raises
// (system message not first, unknown role, ...) are LILY_EINVAL with the template's message.
int tmpl_render(const struct lily_template *t, const json_t *request, int add_gen, char **text,
                size_t *len, struct tok_span **plain, int *n_plain);

// 1 if the rendered generation prompt leaves the model inside a reasoning block (ends in "<think>\n"),
// so the output parser must start in reasoning state.
int tmpl_starts_in_reasoning(const struct lily_template *t, const json_t *request);

#endif
