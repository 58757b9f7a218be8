// parse.h: model output -> OpenAI message parts, incrementally (one token's text at a time) for
// streaming: <think>...</think> reasoning apart from content, and Qwen3.5 XML tool calls
// (<tool_call><function=NAME><parameter=KEY>VALUE</parameter></function></tool_call>) turned into
// OpenAI tool_calls with arguments as a JSON string, values typed by the tool's JSON schema.
// Malformed output never fails: what cannot be parsed is passed on as content.
#ifndef LILY_PARSE_H
#define LILY_PARSE_H

#include <jansson.h>
#include <stddef.h>

struct lily_parser;

// `in_reasoning`: the prompt already opened <think> (tmpl_starts_in_reasoning). `tools`: the
// request's tools array (for parameter types), may be NULL. `parse_tools`: 0 leaves tool-call text
// in content (tool_choice "none").
struct lily_parser *parse_new(int in_reasoning, const json_t *tools, int parse_tools);
void parse_free(struct lily_parser *p);

// Feed decoded output text (complete UTF-8; any split into pieces gives the same result).
void parse_feed(struct lily_parser *p, const char *text, size_t len);
// End of generation: release text held back (a possible partial tag) and close open blocks.
void parse_finish(struct lily_parser *p);

// What became final since the last call: reasoning and content text (malloc'd, NULL if none) and the
// number of tool calls completed so far. Text that might still turn into a tag is held back until
// it can be decided. Returns 1 if anything is new.
struct parse_delta {
    char *reasoning;
    char *content;
    int n_tool_calls; // total completed tool calls so far
};
int parse_take(struct lily_parser *p, struct parse_delta *d);
void parse_delta_free(struct parse_delta *d);

// 1 while inside <think> (what is fed next would be reasoning): the server counts a token as
// reasoning when this holds before or after feeding its text (so <think> and </think> count).
int parse_in_reasoning(const struct lily_parser *p);

// Completed tool calls, in order: name and arguments (a JSON object text).
int parse_n_tool_calls(const struct lily_parser *p);
const char *parse_tool_name(const struct lily_parser *p, int i);
const char *parse_tool_args(const struct lily_parser *p, int i);

#endif
