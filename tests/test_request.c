// test_request.c: unit tests for OpenAI request parsing (src/server/openai.c): defaults, the
// normalisations the chat template relies on, range checks with the parameter named, and the
// response builders' shapes.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "server/openai.h"

static struct oai_limits lim;

static int parse(int kind, const char *body, struct oai_request *r, struct oai_error *e) {
    memset(e, 0, sizeof *e);
    return oai_parse(kind, body, strlen(body), &lim, r, e);
}

static void expect_error(int kind, const char *body, const char *param, const char *needle) {
    struct oai_request r;
    struct oai_error e;
    int rc = parse(kind, body, &r, &e);
    if (rc != -1) fail_msg("accepted: %s", body);
    assert_int_equal(e.status, 400);
    assert_string_equal(e.param, param);
    if (needle && !strstr(e.message, needle)) fail_msg("message '%s' lacks '%s'", e.message, needle);
}

static void test_defaults(void **st) {
    (void)st;
    struct oai_request r;
    struct oai_error e;
    assert_int_equal(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r, &e), 0);
    assert_int_equal(r.max_tokens, -1);
    assert_int_equal(r.stream, 0);
    assert_true(r.sp.temperature == 1.0f && r.sp.top_p == 1.0f && r.sp.top_k == 0);
    assert_int_equal(r.sp.has_seed, 0);
    assert_int_equal(r.tool_choice, OAI_TOOLS_NONE);
    assert_null(r.tools);
    assert_string_equal(r.model, "");
    oai_request_free(&r);
    // Completions default to 16 tokens, as the API does.
    assert_int_equal(parse(OAI_COMPLETION, "{\"prompt\":\"x\"}", &r, &e), 0);
    assert_int_equal(r.max_tokens, 16);
    assert_string_equal(r.prompt, "x");
    oai_request_free(&r);
}

static void test_fields(void **st) {
    (void)st;
    struct oai_request r;
    struct oai_error e;
    const char *b =
        "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
        "\"max_tokens\":7,\"max_completion_tokens\":5,\"temperature\":0,\"top_p\":0.5,"
        "\"top_k\":3,\"min_p\":0.1,\"presence_penalty\":-2,\"frequency_penalty\":2,"
        "\"repeat_penalty\":1.1,\"seed\":-5,\"stop\":[\"a\",\"bc\"],\"stream\":true,"
        "\"stream_options\":{\"include_usage\":true},\"logprobs\":true,\"top_logprobs\":20,"
        "\"logit_bias\":{\"7\":-100,\"8\":2.5},\"n\":1,\"user\":\"u\",\"unknown_field\":[1,{}]}";
    assert_int_equal(parse(OAI_CHAT, b, &r, &e), 0);
    assert_int_equal(r.max_tokens, 5); // max_completion_tokens wins
    assert_true(r.sp.temperature == 0.0f && r.sp.top_p == 0.5f && r.sp.top_k == 3);
    assert_true(r.sp.presence_penalty == -2.0f && r.sp.frequency_penalty == 2.0f);
    assert_true(r.sp.repetition_penalty > 1.09f && r.sp.repetition_penalty < 1.11f);
    assert_int_equal(r.sp.has_seed, 1);
    assert_true(r.sp.seed == (uint64_t)(int64_t)-5);
    assert_int_equal(r.n_stop, 2);
    assert_string_equal(r.stop[1], "bc");
    assert_true(r.stream && r.include_usage && r.logprobs);
    assert_int_equal(r.top_logprobs, 20);
    assert_int_equal(r.sp.n_bias, 2);
    assert_string_equal(r.model, "gpt-4o");
    oai_request_free(&r);
    // 3.0 is an integer; a single stop string.
    assert_int_equal(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                                     "\"max_tokens\":3.0,\"stop\":\"END\"}", &r, &e), 0);
    assert_int_equal(r.max_tokens, 3);
    assert_int_equal(r.n_stop, 1);
    oai_request_free(&r);
}

static void test_normalisation(void **st) {
    (void)st;
    struct oai_request r;
    struct oai_error e;
    const char *b =
        "{\"messages\":[{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
        "{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"user\",\"content\":\"q\"},"
        "{\"role\":\"assistant\",\"content\":null,\"reasoning\":\"R\",\"tool_calls\":[{\"id\":"
        "\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":1}\"}}]},"
        "{\"role\":\"function\",\"name\":\"f\",\"content\":\"out\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],\"reasoning_effort\":\"none\"}";
    assert_int_equal(parse(OAI_CHAT, b, &r, &e), 0);
    json_t *m = json_object_get(r.root, "messages");
    assert_string_equal(json_string_value(json_object_get(json_array_get(m, 0), "role")), "system");
    assert_string_equal(json_string_value(json_object_get(json_array_get(m, 0), "content")), "ab");
    json_t *as = json_array_get(m, 2);
    assert_string_equal(json_string_value(json_object_get(as, "reasoning_content")), "R");
    json_t *args = json_object_get(
        json_object_get(json_array_get(json_object_get(as, "tool_calls"), 0), "function"),
        "arguments");
    assert_true(json_is_object(args));
    assert_int_equal(json_integer_value(json_object_get(args, "x")), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(m, 3), "role")), "tool");
    assert_true(json_is_false(json_object_get(json_object_get(r.root, "chat_template_kwargs"),
                                              "enable_thinking")));
    assert_int_equal(r.tool_choice, OAI_TOOLS_AUTO);
    assert_non_null(r.tools);
    oai_request_free(&r);
    // tool_choice none hides the tools from the template.
    assert_int_equal(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                                     "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
                                     "\"tool_choice\":\"none\"}", &r, &e), 0);
    assert_null(json_object_get(r.root, "tools"));
    assert_null(r.tools);
    oai_request_free(&r);
}

static void test_errors(void **st) {
    (void)st;
#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]"
    expect_error(OAI_CHAT, "{" MSG ",\"n\":2}", "n", "one choice");
    expect_error(OAI_CHAT, "{" MSG ",\"temperature\":2.01}", "temperature", "between");
    expect_error(OAI_CHAT, "{" MSG ",\"max_tokens\":1.5}", "max_tokens", "integer");
    expect_error(OAI_CHAT, "{" MSG ",\"max_tokens\":0}", "max_tokens", NULL);
    expect_error(OAI_CHAT, "{" MSG ",\"seed\":\"1\"}", "seed", NULL);
    expect_error(OAI_CHAT, "{" MSG ",\"top_p\":0}", "top_p", NULL);
    expect_error(OAI_CHAT, "{" MSG ",\"top_logprobs\":3}", "top_logprobs", "logprobs");
    expect_error(OAI_CHAT, "{" MSG ",\"stream_options\":{}}", "stream_options", "stream");
    expect_error(OAI_CHAT, "{" MSG ",\"stop\":[\"\"]}", "stop", "empty");
    expect_error(OAI_CHAT, "{" MSG ",\"logit_bias\":{\"4096\":1}}", "logit_bias", "token id");
    expect_error(OAI_CHAT, "{" MSG ",\"response_format\":{\"type\":\"json_schema\"}}",
                 "response_format", "not supported");
    expect_error(OAI_CHAT, "{" MSG ",\"tool_choice\":\"auto\"}", "tool_choice", "tools");
    expect_error(OAI_CHAT, "{\"messages\":[]}", "messages", "empty");
    expect_error(OAI_CHAT, "{}", "messages", "required");
    expect_error(OAI_CHAT, "{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", "messages",
                 "robot");
    expect_error(OAI_CHAT,
                 "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\"}]}]}",
                 "messages", "text-only");
    expect_error(OAI_CHAT, "{\"messages\":[1,2", "", "invalid JSON");
    expect_error(OAI_CHAT, "[]", "", "object");
    expect_error(OAI_CHAT, "{\"a\":1,\"a\":2}", "", "invalid JSON");
    expect_error(OAI_COMPLETION, "{\"prompt\":[\"a\",\"b\"]}", "prompt", "one prompt");
    expect_error(OAI_COMPLETION, "{\"prompt\":[1,99999]}", "prompt", "token ids");
    expect_error(OAI_COMPLETION, "{\"prompt\":\"x\",\"echo\":true}", "echo", NULL);
    expect_error(OAI_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":true}", "logprobs", NULL);
    // Nesting beyond the limit is refused before jansson sees it.
    char deep[300] = "{\"messages\":";
    for (int i = 0; i < 100; i++) strcat(deep, "[");
    expect_error(OAI_CHAT, deep, "", "nested");
    assert_int_equal(oai_json_depth("{\"a\":\"[[[[\"}", 11, 64), 1);
    // Too many messages.
    size_t n = 10001;
    char *big = malloc(n * 40 + 32), *w = big;
    w += sprintf(w, "{\"messages\":[");
    for (size_t i = 0; i < n; i++) w += sprintf(w, "%s{\"role\":\"user\",\"content\":\"x\"}", i ? "," : "");
    strcpy(w, "]}");
    expect_error(OAI_CHAT, big, "messages", "too many");
    free(big);
#undef MSG
}

static void test_error_body_is_json(void **st) {
    (void)st;
    struct oai_error e;
    oai_fail(&e, 400, "messages", "role '\xff\xfe' cut \xe2\x82");
    char *s = oai_error_body(&e);
    json_t *j = json_loads(s, 0, NULL);
    assert_non_null(j);
    json_t *err = json_object_get(j, "error");
    assert_string_equal(json_string_value(json_object_get(err, "param")), "messages");
    assert_string_equal(json_string_value(json_object_get(err, "type")), "invalid_request_error");
    assert_true(json_is_null(json_object_get(err, "code")));
    json_decref(j);
    free(s);
}

static void test_responses(void **st) {
    (void)st;
    struct oai_usage u = {10, 3, 4, 2};
    struct oai_tool_call c = {"call_1", "f", "{\"a\":1}"};
    json_t *o = oai_chat_response("chatcmpl-1", 5, "m", NULL, "why", &c, 1, "tool_calls", &u, NULL);
    json_t *ch = json_array_get(json_object_get(o, "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(ch, "finish_reason")), "tool_calls");
    json_t *msg = json_object_get(ch, "message");
    assert_true(json_is_null(json_object_get(msg, "content")));
    assert_string_equal(json_string_value(json_object_get(msg, "reasoning_content")), "why");
    json_t *usage = json_object_get(o, "usage");
    assert_int_equal(json_integer_value(json_object_get(usage, "total_tokens")), 13);
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(usage, "prompt_tokens_details"), "cached_tokens")),
                     4);
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(usage, "completion_tokens_details"), "reasoning_tokens")),
                     2);
    json_decref(o);
    size_t n;
    char *sse = oai_sse(oai_usage_chunk("chat.completion.chunk", "id", 1, "m", &u), &n);
    assert_int_equal(strncmp(sse, "data: {", 7), 0);
    assert_int_equal(strcmp(sse + n - 2, "\n\n"), 0);
    assert_non_null(strstr(sse, "\"choices\":[]"));
    free(sse);
}

int main(void) {
    oai_limits_default(&lim, 4096);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),      cmocka_unit_test(test_fields),
        cmocka_unit_test(test_normalisation), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_error_body_is_json), cmocka_unit_test(test_responses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
