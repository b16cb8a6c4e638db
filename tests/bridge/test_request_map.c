/* JSON request bodies → GenerateRequest: field mapping, and 400s naming the
 * field for hostile input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge.h"
#include "request_map.h"

static tw_status map_chat(const char *body, tw_bridge_gen_request *g, tw_bridge_apierr *ae)
{
    json_error_t jerr;
    json_t *root = json_loads(body, 0, &jerr);
    if (!root)
        fail_msg("test body does not parse: %s: %s", jerr.text, body);
    tw_status st = tw_bridge_map_chat_request(root, g, ae);
    json_decref(root);
    return st;
}

static tw_status map_completion(const char *body, tw_bridge_gen_request *g,
                                tw_bridge_apierr *ae)
{
    json_t *root = json_loads(body, 0, NULL);
    assert_non_null(root);
    tw_status st = tw_bridge_map_completion_request(root, g, ae);
    json_decref(root);
    return st;
}

/* The body must be refused with a 400 whose param is `param`. */
static void expect_chat_400(const char *body, const char *param)
{
    tw_bridge_gen_request g;
    tw_bridge_apierr ae;
    memset(&ae, 0, sizeof ae);
    tw_status st = map_chat(body, &g, &ae);
    tw_bridge_gen_request_fini(&g);
    if (st == TW_OK)
        fail_msg("accepted: %s", body);
    assert_int_equal(ae.http_status, 400);
    assert_string_equal(ae.type, "invalid_request_error");
    if (strcmp(ae.param, param) != 0)
        fail_msg("body %s: param '%s' (message: %s), expected '%s'", body, ae.param,
                 ae.err.msg, param);
    assert_true(strlen(ae.err.msg) > 0);
}

static void expect_completion_400(const char *body, const char *param)
{
    tw_bridge_gen_request g;
    tw_bridge_apierr ae;
    memset(&ae, 0, sizeof ae);
    tw_status st = map_completion(body, &g, &ae);
    tw_bridge_gen_request_fini(&g);
    if (st == TW_OK)
        fail_msg("accepted: %s", body);
    assert_int_equal(ae.http_status, 400);
    if (strcmp(ae.param, param) != 0)
        fail_msg("body %s: param '%s' (message: %s), expected '%s'", body, ae.param,
                 ae.err.msg, param);
}

#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

static void test_chat_full_mapping(void **state)
{
    (void)state;
    tw_bridge_gen_request g;
    tw_bridge_apierr ae;
    const char *body =
        "{\"model\":\"qwen\",\"messages\":["
        "{\"role\":\"developer\",\"content\":\"be brief\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
        "{\"type\":\"text\",\"text\":\"b\"}]},"
        "{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"hmm\","
        "\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":"
        "\"f\",\"arguments\":\"{\\\"x\\\":1}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"42\"}],"
        "\"max_completion_tokens\":77,\"max_tokens\":5,\"temperature\":0.5,\"top_p\":0.9,"
        "\"n\":2,\"stop\":[\"END\",\"STOP\"],\"stream\":true,"
        "\"stream_options\":{\"include_usage\":true},\"seed\":-1,\"presence_penalty\":0.5,"
        "\"frequency_penalty\":-0.5,\"logit_bias\":{\"15\":-100,\"7\":2.5},"
        "\"logprobs\":true,\"top_logprobs\":3,\"user\":\"u1\","
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":"
        "\"d\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}}],"
        "\"tool_choice\":\"auto\",\"response_format\":{\"type\":\"text\"},"
        "\"chat_template_kwargs\":{\"enable_thinking\":false},\"max_thinking_tokens\":100,"
        "\"top_k\":40,\"min_p\":0.05,\"repetition_penalty\":1.1,\"unknown_field\":[1]}";
    assert_int_equal(map_chat(body, &g, &ae), TW_OK);
    const Tokenwire__V1__GenerateRequest *r = &g.gen;
    assert_string_equal(r->model, "qwen");
    assert_int_equal(r->prompt_case, TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_CHAT);
    const Tokenwire__V1__ChatInput *c = r->chat;
    assert_int_equal(c->n_messages, 4);
    assert_string_equal(c->messages[0]->role, "system");
    assert_string_equal(c->messages[1]->content, "a\nb");
    assert_string_equal(c->messages[2]->content, "");
    assert_string_equal(c->messages[2]->reasoning_content, "hmm");
    assert_int_equal(c->messages[2]->n_tool_calls, 1);
    assert_string_equal(c->messages[2]->tool_calls[0]->arguments_json, "{\"x\":1}");
    assert_string_equal(c->messages[3]->tool_call_id, "call_1");
    assert_int_equal(c->n_tools, 1);
    assert_string_equal(c->tools[0]->parameters_json,
                        "{\"type\":\"object\",\"properties\":{}}");
    assert_string_equal(c->tool_choice, "auto");
    assert_true(g.parse_tool_calls);
    /* max_completion_tokens caps everything generated, max_tokens the answer */
    assert_true(r->stop->has_max_total_tokens);
    assert_int_equal(r->stop->max_total_tokens, 77);
    assert_true(r->stop->has_max_tokens);
    assert_int_equal(r->stop->max_tokens, 5);
    assert_int_equal(r->stop->n_stop_strings, 2);
    assert_string_equal(r->stop->stop_strings[1], "STOP");
    assert_true(r->sampling->has_temperature);
    assert_float_equal(r->sampling->temperature, 0.5f, 1e-6);
    assert_float_equal(r->sampling->top_p, 0.9f, 1e-6);
    assert_int_equal(r->n, 2);
    assert_true(g.stream);
    assert_true(g.include_usage);
    assert_int_equal(r->sampling->seed, UINT64_MAX);
    assert_float_equal(r->sampling->frequency_penalty, -0.5f, 1e-6);
    assert_int_equal(r->sampling->n_logit_bias, 2);
    assert_int_equal(r->sampling->logit_bias[0]->token_id, 15);
    assert_float_equal(r->sampling->logit_bias[0]->bias, -100.0f, 1e-6);
    assert_true(r->logprobs->enabled);
    assert_int_equal(r->logprobs->top_logprobs, 3);
    assert_string_equal(r->user, "u1");
    assert_true(r->thinking->has_enable_thinking);
    assert_false(r->thinking->enable_thinking);
    assert_int_equal(r->thinking->max_thinking_tokens, 100);
    assert_int_equal(r->sampling->top_k, 40);
    assert_float_equal(r->sampling->min_p, 0.05f, 1e-6);
    assert_float_equal(r->sampling->repetition_penalty, 1.1f, 1e-6);
    assert_null(r->format); /* response_format "text" asks for nothing */

    /* The mapped request encodes: every required pointer is in place. */
    size_t len = protobuf_c_message_get_packed_size(&r->base);
    assert_true(len > 0);
    uint8_t *buf = malloc(len);
    assert_int_equal(protobuf_c_message_pack(&r->base, buf), len);
    free(buf);
    tw_bridge_gen_request_fini(&g);
}

static void test_chat_defaults_leave_fields_unset(void **state)
{
    (void)state;
    tw_bridge_gen_request g;
    tw_bridge_apierr ae;
    assert_int_equal(map_chat("{" MSG ",\"temperature\":null,\"stop\":\"x\"}", &g, &ae), TW_OK);
    assert_string_equal(g.gen.model, "");
    assert_false(g.sampling.has_temperature);
    assert_false(g.stop.has_max_tokens);
    assert_false(g.stop.has_max_total_tokens);
    assert_false(g.gen.has_n);
    assert_false(g.stream);
    assert_null(g.gen.logprobs);
    assert_null(g.gen.format);
    assert_false(g.parse_tool_calls);
    assert_int_equal(g.stop.n_stop_strings, 1);
    tw_bridge_gen_request_fini(&g);
    /* tool_choice "none" offers tools but asks for no parsing. */
    assert_int_equal(map_chat("{" MSG ",\"tools\":[{\"type\":\"function\",\"function\":{"
                              "\"name\":\"f\"}}],\"tool_choice\":\"none\"}",
                              &g, &ae),
                     TW_OK);
    assert_false(g.parse_tool_calls);
    tw_bridge_gen_request_fini(&g);
    assert_int_equal(map_chat("{" MSG ",\"tools\":[{\"type\":\"function\",\"function\":{"
                              "\"name\":\"f\"}}],\"tool_choice\":{\"type\":\"function\","
                              "\"function\":{\"name\":\"f\"}}}",
                              &g, &ae),
                     TW_OK);
    assert_string_equal(g.chat.tool_choice, "f");
    tw_bridge_gen_request_fini(&g);
}

static void test_chat_hostile_fields_name_the_field(void **state)
{
    (void)state;
    static const struct {
        const char *body;
        const char *param;
    } cases[] = {
        {"{}", "messages"},
        {"{\"messages\":null}", "messages"},
        {"{\"messages\":[]}", "messages"},
        {"{\"messages\":{}}", "messages"},
        {"{\"messages\":\"hi\"}", "messages"},
        {"{\"messages\":[1]}", "messages[0]"},
        {"{\"messages\":[{\"content\":\"x\"}]}", "messages[0].role"},
        {"{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", "messages[0].role"},
        {"{\"messages\":[{\"role\":7,\"content\":\"x\"}]}", "messages[0].role"},
        {"{\"messages\":[{\"role\":\"user\"}]}", "messages[0].content"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages[0].content"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
         "messages[0].content[0].type"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}",
         "messages[0].content[0].text"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[\"x\"]}]}", "messages[0].content[0]"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"tool\","
         "\"content\":\"r\"}]}",
         "messages[1].tool_call_id"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"tool_calls\":[]}]}",
         "messages[0].tool_calls"},
        {"{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"function\"}]}]}",
         "messages[0].tool_calls[0].function"},
        {"{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":"
         "\"f\",\"arguments\":5}}]}]}",
         "messages[0].tool_calls[0].function.arguments"},
        {"{" MSG ",\"n\":0}", "n"},
        {"{" MSG ",\"n\":-3}", "n"},
        {"{" MSG ",\"n\":1.5}", "n"},
        {"{" MSG ",\"n\":\"2\"}", "n"},
        {"{" MSG ",\"n\":129}", "n"},
        {"{" MSG ",\"n\":99999999999999999}", "n"},
        {"{" MSG ",\"n\":1e300}", "n"},
        {"{" MSG ",\"max_tokens\":0}", "max_tokens"},
        {"{" MSG ",\"max_tokens\":4294967296}", "max_tokens"},
        {"{" MSG ",\"max_completion_tokens\":true}", "max_completion_tokens"},
        {"{" MSG ",\"temperature\":2.5}", "temperature"},
        {"{" MSG ",\"temperature\":-0.1}", "temperature"},
        {"{" MSG ",\"temperature\":\"hot\"}", "temperature"},
        {"{" MSG ",\"top_p\":1.01}", "top_p"},
        {"{" MSG ",\"presence_penalty\":3}", "presence_penalty"},
        {"{" MSG ",\"frequency_penalty\":[]}", "frequency_penalty"},
        {"{" MSG ",\"top_logprobs\":21,\"logprobs\":true}", "top_logprobs"},
        {"{" MSG ",\"top_logprobs\":2}", "top_logprobs"},
        {"{" MSG ",\"logprobs\":1}", "logprobs"},
        {"{" MSG ",\"stop\":5}", "stop"},
        {"{" MSG ",\"stop\":[\"a\",7]}", "stop[1]"},
        {"{" MSG ",\"stop\":[\"\"]}", "stop[0]"},
        {"{" MSG ",\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\","
         "\"11\",\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}",
         "stop"},
        {"{" MSG ",\"stream\":\"yes\"}", "stream"},
        {"{" MSG ",\"stream_options\":{\"include_usage\":true}}", "stream_options"},
        {"{" MSG ",\"stream\":true,\"stream_options\":{\"include_usage\":1}}",
         "stream_options.include_usage"},
        {"{" MSG ",\"logit_bias\":{\"abc\":1}}", "logit_bias"},
        {"{" MSG ",\"logit_bias\":{\"-1\":1}}", "logit_bias"},
        {"{" MSG ",\"logit_bias\":{\"99999999999\":1}}", "logit_bias"},
        {"{" MSG ",\"logit_bias\":{\"5\":101}}", "logit_bias.5"},
        {"{" MSG ",\"logit_bias\":{\"5\":\"x\"}}", "logit_bias.5"},
        {"{" MSG ",\"logit_bias\":[1]}", "logit_bias"},
        {"{" MSG ",\"seed\":1.25}", "seed"},
        {"{" MSG ",\"user\":5}", "user"},
        {"{" MSG ",\"model\":[]}", "model"},
        {"{" MSG ",\"tools\":{}}", "tools"},
        {"{" MSG ",\"tools\":[{\"type\":\"retrieval\"}]}", "tools[0].type"},
        {"{" MSG ",\"tools\":[{\"type\":\"function\",\"function\":{}}]}", "tools[0].function.name"},
        {"{" MSG ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"bad name\"}}]}",
         "tools[0].function.name"},
        {"{" MSG ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
         "\"parameters\":\"{}\"}}]}",
         "tools[0].function.parameters"},
        {"{" MSG ",\"tool_choice\":\"auto\"}", "tool_choice"},
        {"{" MSG ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
         "\"tool_choice\":\"sometimes\"}",
         "tool_choice"},
        {"{" MSG ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
         "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}}",
         "tool_choice.function.name"},
        {"{" MSG ",\"response_format\":{\"type\":\"yaml\"}}", "response_format.type"},
        {"{" MSG ",\"response_format\":\"json\"}", "response_format"},
        {"{" MSG ",\"chat_template_kwargs\":{\"enable_thinking\":\"no\"}}",
         "chat_template_kwargs.enable_thinking"},
        {"{" MSG ",\"max_thinking_tokens\":-1}", "max_thinking_tokens"},
        {"{" MSG ",\"reasoning_effort\":\"extreme\"}", "reasoning_effort"},
        {"{" MSG ",\"reasoning_effort\":3}", "reasoning_effort"},
        {"{" MSG ",\"top_k\":-2}", "top_k"},
        {"{" MSG ",\"min_p\":2}", "min_p"},
        {"{" MSG ",\"repetition_penalty\":0}", "repetition_penalty"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_chat_400(cases[i].body, cases[i].param);
}

/* reasoning_effort turns thinking on with a budget, or off; what the caller
 * set itself wins. */
static void test_reasoning_effort(void **state)
{
    (void)state;
    const struct {
        const char *extra;
        bool think;
        uint32_t budget; /* 0: left unset */
    } cases[] = {
        {",\"reasoning_effort\":\"low\"", true, 1024},
        {",\"reasoning_effort\":\"medium\"", true, 8192},
        {",\"reasoning_effort\":\"high\"", true, 32768},
        {",\"reasoning_effort\":\"minimal\"", false, 0},
        {",\"reasoning_effort\":\"none\"", false, 0},
        {",\"reasoning_effort\":\"low\",\"max_thinking_tokens\":77", true, 77},
        {",\"reasoning_effort\":\"high\",\"chat_template_kwargs\":{\"enable_thinking\":false}",
         false, 32768},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[256];
        snprintf(body, sizeof body, "{" MSG "%s}", cases[i].extra);
        tw_bridge_gen_request g;
        tw_bridge_apierr ae;
        assert_int_equal(map_chat(body, &g, &ae), TW_OK);
        const Tokenwire__V1__ThinkingOptions *t = g.gen.thinking;
        assert_non_null(t);
        assert_true(t->has_enable_thinking);
        assert_int_equal(t->enable_thinking, cases[i].think);
        assert_int_equal(t->has_max_thinking_tokens, cases[i].budget != 0);
        if (cases[i].budget)
            assert_int_equal(t->max_thinking_tokens, cases[i].budget);
        tw_bridge_gen_request_fini(&g);
    }
}

#define RF(x) "{" MSG ",\"response_format\":" x "}"

/* The Generate of a chat body with this response_format must ask for a JSON
 * answer with exactly this schema text (NULL: none, any JSON object). */
static void expect_json_format(const char *body, const char *schema)
{
    tw_bridge_gen_request g;
    tw_bridge_apierr ae;
    if (map_chat(body, &g, &ae) != TW_OK)
        fail_msg("refused (%s: %s): %s", ae.param, ae.err.msg, body);
    const Tokenwire__V1__OutputFormat *f = g.gen.format;
    assert_non_null(f);
    assert_true(f->has_kind);
    assert_int_equal(f->kind, TOKENWIRE__V1__OUTPUT_KIND__OUTPUT_JSON);
    if (schema)
        assert_string_equal(f->json_schema, schema);
    else
        assert_null(f->json_schema);
    /* the request encodes, and the schema survives the wire */
    size_t len = protobuf_c_message_get_packed_size(&g.gen.base);
    uint8_t *buf = malloc(len);
    assert_non_null(buf);
    assert_int_equal(protobuf_c_message_pack(&g.gen.base, buf), len);
    Tokenwire__V1__GenerateRequest *back = tokenwire__v1__generate_request__unpack(NULL, len, buf);
    assert_non_null(back);
    assert_non_null(back->format);
    assert_int_equal(back->format->kind, TOKENWIRE__V1__OUTPUT_KIND__OUTPUT_JSON);
    if (schema)
        assert_string_equal(back->format->json_schema, schema);
    tokenwire__v1__generate_request__free_unpacked(back, NULL);
    free(buf);
    tw_bridge_gen_request_fini(&g);
}

/* json_object and json_schema become OutputFormat JSON, the schema as
 * compact JSON text in the order the caller wrote it; text asks for
 * nothing. */
static void test_response_format_maps(void **state)
{
    (void)state;
    expect_json_format(RF("{\"type\":\"json_object\"}"), NULL);
    expect_json_format(RF("{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"person\","
                          "\"strict\":true,\"description\":\"who\",\"schema\": {\"type\" : "
                          "\"object\",\n \"properties\":{\"name\":{\"type\":\"string\","
                          "\"maxLength\":20},\"age\":{\"type\":\"integer\"}},"
                          "\"required\":[\"name\", \"age\"],\"additionalProperties\":false}}}"),
                       "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\","
                       "\"maxLength\":20},\"age\":{\"type\":\"integer\"}},\"required\":[\"name\","
                       "\"age\"],\"additionalProperties\":false}");
    /* the schema's text is passed on as written: keywords the engine
     * refuses are its to name */
    expect_json_format(RF("{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\","
                          "\"schema\":{\"type\":\"string\",\"pattern\":\"^a\"}}}"),
                       "{\"type\":\"string\",\"pattern\":\"^a\"}");
    /* no schema (or null): any JSON object; strict false is accepted */
    expect_json_format(RF("{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"A-b_9\"}}"), NULL);
    expect_json_format(RF("{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\","
                          "\"schema\":null,\"strict\":false}}"),
                       NULL);
    char name64[200];
    snprintf(name64, sizeof name64,
             RF("{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"%064d\"}}"), 0);
    expect_json_format(name64, NULL);

    tw_bridge_gen_request g;
    tw_bridge_apierr ae;
    assert_int_equal(map_chat(RF("{\"type\":\"text\"}"), &g, &ae), TW_OK);
    assert_null(g.gen.format);
    tw_bridge_gen_request_fini(&g);
    assert_int_equal(map_chat(RF("null"), &g, &ae), TW_OK);
    assert_null(g.gen.format);
    tw_bridge_gen_request_fini(&g);

    /* /v1/completions takes it too */
    assert_int_equal(map_completion("{\"prompt\":\"x\",\"response_format\":{\"type\":"
                                    "\"json_schema\",\"json_schema\":{\"name\":\"n\","
                                    "\"schema\":{\"type\":\"object\"}}}}",
                                    &g, &ae),
                     TW_OK);
    assert_int_equal(g.gen.format->kind, TOKENWIRE__V1__OUTPUT_KIND__OUTPUT_JSON);
    assert_string_equal(g.gen.format->json_schema, "{\"type\":\"object\"}");
    tw_bridge_gen_request_fini(&g);
}

/* Every malformed response_format is a 400 naming the field at fault. */
/* vLLM's guided_json (an object or its text) and guided_choice. */
static void test_guided(void **state)
{
    (void)state;
    tw_bridge_gen_request g;
    tw_bridge_apierr ae;
    assert_int_equal(map_chat("{" MSG ",\"guided_choice\":[\"yes\",\"no\",\"\u00e9\"]}", &g, &ae),
                     TW_OK);
    assert_non_null(g.gen.format);
    assert_int_equal(g.gen.format->kind, TOKENWIRE__V1__OUTPUT_KIND__OUTPUT_CHOICE);
    assert_int_equal(g.gen.format->n_choices, 3);
    assert_string_equal(g.gen.format->choices[1], "no");
    assert_string_equal(g.gen.format->choices[2], "\xc3\xa9");
    tw_bridge_gen_request_fini(&g);
    assert_int_equal(
        map_chat("{" MSG ",\"guided_json\":{\"type\":\"object\",\"required\":[]}}", &g, &ae),
        TW_OK);
    assert_int_equal(g.gen.format->kind, TOKENWIRE__V1__OUTPUT_KIND__OUTPUT_JSON);
    assert_string_equal(g.gen.format->json_schema, "{\"type\":\"object\",\"required\":[]}");
    tw_bridge_gen_request_fini(&g);
    assert_int_equal(
        map_chat("{" MSG ",\"guided_json\":\"{\\\"type\\\":\\\"string\\\"}\"}", &g, &ae), TW_OK);
    assert_string_equal(g.gen.format->json_schema, "{\"type\":\"string\"}");
    tw_bridge_gen_request_fini(&g);
    assert_int_equal(map_chat("{" MSG ",\"guided_choice\":null}", &g, &ae), TW_OK);
    assert_null(g.gen.format);
    tw_bridge_gen_request_fini(&g);

    static const struct {
        const char *body, *param;
    } bad[] = {
        {"{" MSG ",\"guided_choice\":[]}", "guided_choice"},
        {"{" MSG ",\"guided_choice\":\"yes\"}", "guided_choice"},
        {"{" MSG ",\"guided_choice\":[\"\"]}", "guided_choice"},
        {"{" MSG ",\"guided_choice\":[\"a\",3]}", "guided_choice"},
        {"{" MSG ",\"guided_json\":3}", "guided_json"},
        {"{" MSG ",\"guided_json\":{},\"guided_choice\":[\"a\"]}", "guided_choice"},
        {"{" MSG ",\"guided_json\":{},\"response_format\":{\"type\":\"json_object\"}}",
         "guided_json"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (map_chat(bad[i].body, &g, &ae) != TW_INVALID_ARGUMENT)
            fail_msg("accepted: %s", bad[i].body);
        assert_string_equal(ae.param, bad[i].param);
        tw_bridge_gen_request_fini(&g);
    }
    /* 65 choices */
    char body[1024];
    int at = snprintf(body, sizeof body, "{" MSG ",\"guided_choice\":[");
    for (int i = 0; i < 65; i++)
        at += snprintf(body + at, sizeof body - (size_t)at, "%s\"c\"", i ? "," : "");
    snprintf(body + at, sizeof body - (size_t)at, "]}");
    assert_int_equal(map_chat(body, &g, &ae), TW_INVALID_ARGUMENT);
    tw_bridge_gen_request_fini(&g);
}

static void test_response_format_hostile(void **state)
{
    (void)state;
    static const struct {
        const char *body;
        const char *param;
    } cases[] = {
        {RF("{}"), "response_format.type"},
        {RF("{\"type\":5}"), "response_format.type"},
        {RF("{\"type\":\"JSON_OBJECT\"}"), "response_format.type"},
        {RF("[\"json_object\"]"), "response_format"},
        {RF("{\"type\":\"json_schema\"}"), "response_format.json_schema"},
        {RF("{\"type\":\"json_schema\",\"json_schema\":null}"), "response_format.json_schema"},
        {RF("{\"type\":\"json_schema\",\"json_schema\":\"{}\"}"), "response_format.json_schema"},
        {RF("{\"type\":\"json_schema\",\"json_schema\":[]}"), "response_format.json_schema"},
        {RF("{\"type\":\"json_schema\",\"json_schema\":{}}"), "response_format.json_schema.name"},
        {RF("{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{}}}"),
         "response_format.json_schema.name"},
        {RF("{\"type\":\"json_schema\",\"json_schema\":{\"name\":5}}"),
         "response_format.json_schema.name"},
        {RF("{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"\"}}"),
         "response_format.json_schema.name"},
        {RF("{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"has space\"}}"),
         "response_format.json_schema.name"},
        {RF("{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a.b\"}}"),
         "response_format.json_schema.name"},
        {RF("{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"\\u00e9\"}}"),
         "response_format.json_schema.name"},
        {RF("{\"type\":\"json_schema\",\"json_schema\":{\"name\":"
            "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}}"),
         "response_format.json_schema.name"},
        {RF("{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"schema\":\"{}\"}}"),
         "response_format.json_schema.schema"},
        {RF("{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"schema\":true}}"),
         "response_format.json_schema.schema"},
        {RF("{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"schema\":[{}]}}"),
         "response_format.json_schema.schema"},
        {RF("{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"strict\":\"yes\"}}"),
         "response_format.json_schema.strict"},
        {RF("{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"strict\":1}}"),
         "response_format.json_schema.strict"},
        {RF("{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"description\":7}}"),
         "response_format.json_schema.description"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_chat_400(cases[i].body, cases[i].param);
    expect_completion_400("{\"prompt\":\"x\",\"response_format\":{\"type\":\"json_schema\","
                          "\"json_schema\":{\"name\":\"n\",\"schema\":1}}}",
                          "response_format.json_schema.schema");

    /* a schema past the engine's limit is refused here, before it travels */
    size_t big = TW_BRIDGE_MAX_JSON_SCHEMA;
    const char *head = "{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
                       "{\"name\":\"n\",\"schema\":{\"description\":\"";
    const char *tail = "\"}}}}";
    char *body = malloc(strlen(head) + big + strlen(tail) + 1);
    assert_non_null(body);
    strcpy(body, head);
    memset(body + strlen(head), 'x', big);
    strcpy(body + strlen(head) + big, tail);
    expect_chat_400(body, "response_format.json_schema.schema");
    /* and one just within it passes */
    size_t fits = big - strlen("{\"description\":\"\"}");
    strcpy(body + strlen(head) + fits, tail);
    tw_bridge_gen_request g;
    tw_bridge_apierr ae;
    assert_int_equal(map_chat(body, &g, &ae), TW_OK);
    assert_int_equal(strlen(g.gen.format->json_schema), big);
    tw_bridge_gen_request_fini(&g);
    free(body);
}

static void test_completion_prompts(void **state)
{
    (void)state;
    tw_bridge_gen_request g;
    tw_bridge_apierr ae;
    assert_int_equal(map_completion("{\"prompt\":[1,2,3]}", &g, &ae), TW_OK);
    assert_int_equal(g.gen.prompt_case, TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TOKEN_IDS);
    assert_int_equal(g.gen.token_ids->n_ids, 3);
    assert_int_equal(g.gen.token_ids->ids[2], 3);
    /* OpenAI's default max_tokens for completions. */
    assert_int_equal(g.gen.stop->max_tokens, 16);
    /* Think tags stay in the text of a raw completion. */
    assert_true(g.gen.thinking->has_separate_reasoning);
    assert_false(g.gen.thinking->separate_reasoning);
    tw_bridge_gen_request_fini(&g);

    assert_int_equal(map_completion("{\"prompt\":[[4,5]],\"max_tokens\":3,\"logprobs\":2}", &g,
                                    &ae),
                     TW_OK);
    assert_int_equal(g.gen.token_ids->n_ids, 2);
    assert_int_equal(g.gen.stop->max_tokens, 3);
    assert_true(g.want_logprobs);
    assert_int_equal(g.gen.logprobs->top_logprobs, 2);
    tw_bridge_gen_request_fini(&g);

    assert_int_equal(map_completion("{\"prompt\":[\"hello\"],\"echo\":false}", &g, &ae), TW_OK);
    assert_int_equal(g.gen.prompt_case, TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TEXT);
    assert_string_equal(g.gen.text, "hello");
    assert_false(g.echo);
    assert_false(g.gen.has_echo_prompt);
    tw_bridge_gen_request_fini(&g);

    /* echo asks the engine for the prompt's text */
    assert_int_equal(map_completion("{\"prompt\":\"hello\",\"echo\":true}", &g, &ae), TW_OK);
    assert_true(g.echo);
    assert_true(g.gen.has_echo_prompt && g.gen.echo_prompt);
    assert_null(g.gen.logprobs);
    tw_bridge_gen_request_fini(&g);
    /* with logprobs, the prompt's too */
    assert_int_equal(map_completion("{\"prompt\":\"hello\",\"echo\":true,\"logprobs\":2}", &g, &ae),
                     TW_OK);
    assert_true(g.gen.logprobs->prompt_logprobs);
    assert_int_equal(g.gen.logprobs->top_logprobs, 2);
    assert_false(g.stop.has_prompt_only);
    tw_bridge_gen_request_fini(&g);
    /* max_tokens 0 with echo: the prompt scored, nothing generated */
    assert_int_equal(
        map_completion("{\"prompt\":\"hello\",\"echo\":true,\"logprobs\":1,\"max_tokens\":0}", &g,
                       &ae),
        TW_OK);
    assert_true(g.stop.has_prompt_only && g.stop.prompt_only);
    assert_false(g.stop.has_max_tokens);
    tw_bridge_gen_request_fini(&g);
    /* several prompts, text and ids mixed: gen takes the first, each can
     * be put in a request of its own */
    assert_int_equal(map_completion("{\"prompt\":[\"a\",[5,6],\"c\"],\"n\":2}", &g, &ae), TW_OK);
    assert_int_equal(g.n_prompts, 3);
    assert_string_equal(g.gen.text, "a");
    Tokenwire__V1__GenerateRequest one = g.gen;
    Tokenwire__V1__TokenIds ids;
    tw_bridge_gen_request_prompt(&g, 1, &one, &ids);
    assert_int_equal(one.prompt_case, TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TOKEN_IDS);
    assert_int_equal(one.token_ids->n_ids, 2);
    assert_int_equal(one.token_ids->ids[1], 6);
    tw_bridge_gen_request_prompt(&g, 2, &one, &ids);
    assert_int_equal(one.prompt_case, TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TEXT);
    assert_string_equal(one.text, "c");
    tw_bridge_gen_request_fini(&g);
    assert_int_equal(map_completion("{\"prompt\":[\"a\",\"b\"],\"stream\":true}", &g, &ae), TW_OK);
    assert_true(g.stream);
    assert_int_equal(g.n_prompts, 2);
    tw_bridge_gen_request_fini(&g);
    char many[1024] = "{\"prompt\":[";
    for (int i = 0; i <= TW_BRIDGE_MAX_PROMPTS; i++)
        strcat(many, i ? ",\"p\"" : "\"p\"");
    strcat(many, "]}");
    assert_int_equal(map_completion(many, &g, &ae), TW_INVALID_ARGUMENT);
    assert_string_equal(ae.param, "prompt");
    tw_bridge_gen_request_fini(&g);

    /* and on a stream, of one choice with logprobs or of several without */
    assert_int_equal(map_completion("{\"prompt\":\"hello\",\"echo\":true,\"logprobs\":2,"
                                    "\"stream\":true}",
                                    &g, &ae),
                     TW_OK);
    assert_true(g.stream && g.echo && g.gen.logprobs->prompt_logprobs);
    tw_bridge_gen_request_fini(&g);
    assert_int_equal(
        map_completion("{\"prompt\":\"hello\",\"echo\":true,\"n\":3,\"stream\":true}", &g, &ae),
        TW_OK);
    assert_true(g.stream && g.echo && g.gen.echo_prompt);
    tw_bridge_gen_request_fini(&g);
}

static void test_completion_hostile(void **state)
{
    (void)state;
    static const struct {
        const char *body;
        const char *param;
    } cases[] = {
        {"{}", "prompt"},
        {"{\"prompt\":5}", "prompt"},
        {"{\"prompt\":[]}", "prompt"},
        {"{\"prompt\":[1,-2]}", "prompt[1]"},
        {"{\"prompt\":[1,4294967295]}", "prompt[1]"},
        {"{\"prompt\":[1,2.5]}", "prompt[1]"},
        {"{\"prompt\":[1,\"a\"]}", "prompt[1]"},
        {"{\"prompt\":[[1],[2]],\"n\":65}", "n"},
        {"{\"prompt\":[[]]}", "prompt[0]"},
        {"{\"prompt\":[\"a\",[1,-1]]}", "prompt[1][1]"},
        {"{\"prompt\":[\"a\",3]}", "prompt[1]"},
        {"{\"prompt\":\"x\",\"echo\":1}", "echo"},
        {"{\"prompt\":\"x\",\"suffix\":\"tail\"}", "suffix"},
        {"{\"prompt\":\"x\",\"best_of\":3}", "best_of"},
        {"{\"prompt\":\"x\",\"logprobs\":6}", "logprobs"},
        {"{\"prompt\":\"x\",\"logprobs\":true}", "logprobs"},
        {"{\"prompt\":\"x\",\"n\":0}", "n"},
        {"{\"prompt\":\"x\",\"max_tokens\":0}", "max_tokens"},
        {"{\"prompt\":\"x\",\"max_tokens\":0,\"echo\":false}", "max_tokens"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_completion_400(cases[i].body, cases[i].param);
}

/* Raw bodies through the same parser the HTTP path uses. */
static void expect_body_400(const char *body, size_t len)
{
    tw_bridge_http_req rq = {.method = "POST", .path = "/v1/chat/completions", .body = body,
                             .body_len = len};
    json_t *j = NULL;
    tw_bridge_apierr ae;
    assert_int_not_equal(tw_bridge_parse_body(&rq, &j, &ae), TW_OK);
    assert_null(j);
    assert_int_equal(ae.http_status, 400);
}

static void test_hostile_bodies(void **state)
{
    (void)state;
    expect_body_400("", 0);
    expect_body_400("not json", 8);
    expect_body_400("[1,2]", 5);
    expect_body_400("{\"a\":NaN}", 9);
    expect_body_400("{\"a\":Infinity}", 14);
    expect_body_400("{\"a\":1e999}", 11);
    expect_body_400("{\"a\":123456789012345678901234567890}", 36);
    expect_body_400("{\"a\":\"\xff\xfe\"}", 10);          /* invalid UTF-8 */
    expect_body_400("{\"a\":\"\xed\xa0\x80\"}", 11);      /* a surrogate */
    expect_body_400("{\"a\":\"x\\u0000y\"}", 16);         /* NUL inside a string */
    expect_body_400("{\"a\":1,\"a\":2}", 13);             /* duplicate key */
    const char with_nul[] = "{\"a\":1}\0{}";
    expect_body_400(with_nul, sizeof with_nul - 1);
    /* Deep nesting: within jansson's limit but past the bridge's. */
    size_t depth = 1000;
    char *deep = malloc(2 * depth + 16);
    size_t o = 0;
    o += (size_t)sprintf(deep, "{\"a\":");
    memset(deep + o, '[', depth);
    o += depth;
    memset(deep + o, ']', depth);
    o += depth;
    deep[o++] = '}';
    expect_body_400(deep, o);
    /* And far past jansson's own limit. */
    depth = 100000;
    deep = realloc(deep, 2 * depth + 16);
    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    expect_body_400(deep, 2 * depth);
    free(deep);
}

static void test_huge_arrays_are_bounded(void **state)
{
    (void)state;
    /* 5000 messages: past the limit, refused without building them. */
    size_t n = 5000;
    const char *one = "{\"role\":\"user\",\"content\":\"x\"},";
    size_t cap = n * strlen(one) + 64;
    char *body = malloc(cap);
    size_t o = (size_t)sprintf(body, "{\"messages\":[");
    for (size_t i = 0; i < n; i++)
        o += (size_t)sprintf(body + o, "%s", one);
    body[o - 1] = ']';
    body[o++] = '}';
    body[o] = '\0';
    expect_chat_400(body, "messages");
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_full_mapping),
        cmocka_unit_test(test_chat_defaults_leave_fields_unset),
        cmocka_unit_test(test_chat_hostile_fields_name_the_field),
        cmocka_unit_test(test_reasoning_effort),
        cmocka_unit_test(test_response_format_maps),
        cmocka_unit_test(test_response_format_hostile),
        cmocka_unit_test(test_guided),
        cmocka_unit_test(test_completion_prompts),
        cmocka_unit_test(test_completion_hostile),
        cmocka_unit_test(test_hostile_bodies),
        cmocka_unit_test(test_huge_arrays_are_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
