/* /v1/responses: request bodies rewritten as the chat requests they mean
 * (checked against the chat body written out by hand), the refusals with
 * the field they name, the response object of a chat completion, and a
 * chat stream's events rewritten as the Responses events. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "responses_map.h"
#include "responses_stream.h"

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, 0, &je);
    if (!v)
        fail_msg("test JSON does not parse (%s): %s", je.text, text);
    return v;
}

/* in rewrites to exactly want. */
static void rewrites(const char *in, const char *want)
{
    json_t *req = parse(in), *w = parse(want), *chat = NULL;
    tw_bridge_apierr ae;
    if (tw_bridge_responses_to_chat(req, NULL, &chat, &ae) != TW_OK)
        fail_msg("%s refused: %s", in, ae.err.msg);
    if (!json_equal(chat, w)) {
        char *got = json_dumps(chat, JSON_SORT_KEYS | JSON_COMPACT);
        fail_msg("%s\n gave %s\n want %s", in, got, want);
    }
    json_decref(chat);
    json_decref(w);
    json_decref(req);
}

static void refused(const char *in, const char *param)
{
    json_t *req = parse(in), *chat = NULL;
    tw_bridge_apierr ae;
    tw_status st = tw_bridge_responses_to_chat(req, NULL, &chat, &ae);
    if (st != TW_INVALID_ARGUMENT || ae.http_status != 400 || strcmp(ae.param, param) != 0)
        fail_msg("%s: status %d, param \"%s\" (%s); wanted 400 naming %s", in, st, ae.param,
                 ae.err.msg, param);
    assert_null(chat);
    json_decref(req);
}

static void test_requests(void **state)
{
    (void)state;
    rewrites("{\"model\":\"m\",\"input\":\"hi\",\"instructions\":\"Be brief.\","
             "\"max_output_tokens\":9,\"temperature\":0.5,\"top_p\":0.9,\"store\":true,"
             "\"metadata\":{\"k\":\"v\"}}",
             "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
             "{\"role\":\"user\",\"content\":\"hi\"}],\"max_completion_tokens\":9,"
             "\"temperature\":0.5,\"top_p\":0.9}");
    /* items: text parts joined, calls gathered into one assistant turn,
     * outputs as tool messages, reasoning left out */
    rewrites("{\"input\":[{\"role\":\"developer\",\"content\":[{\"type\":\"input_text\","
             "\"text\":\"a\"},{\"type\":\"input_text\",\"text\":\"b\"}]},{\"type\":\"message\","
             "\"role\":\"user\",\"content\":\"q\"},{\"type\":\"reasoning\",\"summary\":[]},"
             "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":\"{}\"},"
             "{\"type\":\"function_call\",\"call_id\":\"c2\",\"name\":\"g\",\"arguments\":"
             "\"{\\\"x\\\":1}\"},{\"type\":\"function_call_output\",\"call_id\":\"c1\","
             "\"output\":\"ok\"},{\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\","
             "\"text\":\"done\"}]}],\"stream\":true}",
             "{\"messages\":[{\"role\":\"developer\",\"content\":\"ab\"},{\"role\":\"user\","
             "\"content\":\"q\"},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":"
             "\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}},"
             "{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":"
             "\"{\\\"x\\\":1}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"ok\"},"
             "{\"role\":\"assistant\",\"content\":\"done\"}],\"stream\":true,"
             "\"stream_options\":{\"include_usage\":true}}");
    /* tools, a named choice, a schema, the effort */
    rewrites("{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"description\":"
             "\"d\",\"parameters\":{\"type\":\"object\"},\"strict\":true}],\"tool_choice\":{"
             "\"type\":\"function\",\"name\":\"f\"},\"parallel_tool_calls\":false,\"text\":{"
             "\"format\":{\"type\":\"json_schema\",\"name\":\"n\",\"schema\":{\"type\":"
             "\"object\"},\"strict\":true}},\"reasoning\":{\"effort\":\"low\"},\"seed\":4}",
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":"
             "\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\",\"parameters\":{"
             "\"type\":\"object\"},\"strict\":true}}],\"tool_choice\":{\"type\":\"function\","
             "\"function\":{\"name\":\"f\"}},\"parallel_tool_calls\":false,\"response_format\":{"
             "\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"schema\":{\"type\":"
             "\"object\"},\"strict\":true}},\"reasoning_effort\":\"low\",\"seed\":4}");
    rewrites("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_object\"}},\"tool_choice\":"
             "\"none\"}",
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":"
             "\"json_object\"},\"tool_choice\":\"none\"}");
    rewrites("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"text\"}}}",
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}");
    /* log-probabilities: asked by include or by top_logprobs */
    rewrites("{\"input\":\"x\",\"include\":[\"reasoning.encrypted_content\","
             "\"message.output_text.logprobs\"]}",
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true}");
    rewrites("{\"input\":\"x\",\"top_logprobs\":3}",
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,"
             "\"top_logprobs\":3}");
    rewrites("{\"input\":\"x\",\"top_logprobs\":0,\"include\":[\"reasoning.encrypted_content\"]}",
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":0}");

    refused("{\"model\":\"m\"}", "input");
    refused("{\"input\":[]}", "input");
    refused("{\"input\":7}", "input");
    refused("{\"input\":\"x\",\"store\":\"yes\"}", "store");
    refused("{\"input\":\"x\",\"prompt\":{\"id\":\"p\"}}", "prompt");
    refused("{\"input\":\"x\",\"conversation\":\"c\"}", "conversation");
    refused("{\"input\":\"x\",\"background\":true}", "background");
    refused("{\"input\":\"x\",\"include\":\"message.output_text.logprobs\"}", "include");
    refused("{\"input\":\"x\",\"include\":[7]}", "include[0]");
    refused("{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\","
            "\"image_url\":\"u\"}]}]}",
            "input[0].content[0].type");
    refused("{\"input\":[{\"role\":\"user\",\"content\":{}}]}", "input[0].content");
    refused("{\"input\":[{\"content\":\"x\"}]}", "input[0].role");
    refused("{\"input\":[{\"role\":\"user\"}]}", "input[0].content");
    refused("{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\"}]}",
            "input[0].output");
    refused("{\"input\":[\"x\"]}", "input[0]");
    refused("{\"input\":[{\"type\":\"item_reference\",\"id\":\"i\"}]}", "input[0].type");
    refused("{\"input\":[{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\"}]}",
            "input[0].arguments");
    refused("{\"input\":[{\"type\":\"function_call_output\",\"output\":\"o\"}]}",
            "input[0].call_id");
    refused("{\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"}]}", "tools[0].type");
    refused("{\"input\":\"x\",\"tools\":{}}", "tools");
    refused("{\"input\":\"x\",\"tool_choice\":{\"type\":\"file_search\"}}", "tool_choice");
    refused("{\"input\":\"x\",\"text\":{\"format\":{}}}", "text.format.type");
    refused("{\"input\":\"x\",\"instructions\":5}", "instructions");
}

/* json_t of text, compared with want's; both freed. */
static void same_json(json_t *got, const char *want)
{
    json_t *w = parse(want);
    if (!got || !json_equal(got, w)) {
        char *text = got ? json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
        fail_msg("gave %s\n want %s", text ? text : "NULL", want);
    }
    json_decref(w);
    json_decref(got);
}

static void previous_refused(const char *in)
{
    json_t *req = parse(in);
    const char *id = NULL;
    tw_bridge_apierr ae;
    assert_int_equal(tw_bridge_responses_previous(req, &id, &ae), -1);
    assert_int_equal(ae.http_status, 400);
    assert_string_equal(ae.param, "previous_response_id");
    json_decref(req);
}

/* What is kept of a request and how a later one goes on from it. */
static void test_kept_items(void **state)
{
    (void)state;
    json_t *req = parse("{\"input\":\"x\",\"previous_response_id\":\"resp_1\"}");
    const char *id = NULL;
    tw_bridge_apierr ae;
    assert_int_equal(tw_bridge_responses_previous(req, &id, &ae), 1);
    assert_string_equal(id, "resp_1");
    json_decref(req);
    req = parse("{\"input\":\"x\",\"previous_response_id\":null}");
    assert_int_equal(tw_bridge_responses_previous(req, &id, &ae), 0);
    json_decref(req);
    previous_refused("{\"previous_response_id\":\"\"}");
    previous_refused("{\"previous_response_id\":5}");
    previous_refused("{\"previous_response_id\":\"resp_0123456789012345678901234567890123456789"
                     "01234567890123456789\"}");

    /* text input: one user message with an input_text part and an id */
    req = parse("{\"input\":\"hi\"}");
    same_json(tw_bridge_responses_context(NULL, req, "resp_abc"),
              "[{\"id\":\"msg_abc_0\",\"type\":\"message\",\"role\":\"user\",\"status\":"
              "\"completed\",\"content\":[{\"type\":\"input_text\",\"text\":\"hi\"}]}]");
    json_decref(req);
    /* items: after the prior ones; given ids and parts kept, an assistant's
     * text as output_text, calls and outputs with ids of their kind */
    req = parse("{\"input\":[{\"role\":\"assistant\",\"content\":\"a\"},{\"type\":"
                "\"function_call\",\"call_id\":\"c\",\"name\":\"f\",\"arguments\":\"{}\"},"
                "{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"o\"},"
                "{\"id\":\"mine\",\"type\":\"message\",\"role\":\"user\",\"content\":[{"
                "\"type\":\"input_text\",\"text\":\"q\"}]}]}");
    json_t *prior = parse("[{\"id\":\"msg_old_0\",\"type\":\"message\",\"role\":\"user\","
                          "\"status\":\"completed\",\"content\":[{\"type\":\"input_text\","
                          "\"text\":\"p\"}]}]");
    same_json(tw_bridge_responses_context(prior, req, "resp_k"),
              "[{\"id\":\"msg_old_0\",\"type\":\"message\",\"role\":\"user\",\"status\":"
              "\"completed\",\"content\":[{\"type\":\"input_text\",\"text\":\"p\"}]},"
              "{\"id\":\"msg_k_0\",\"type\":\"message\",\"role\":\"assistant\",\"status\":"
              "\"completed\",\"content\":[{\"type\":\"output_text\",\"text\":\"a\"}]},"
              "{\"id\":\"fc_k_1\",\"type\":\"function_call\",\"call_id\":\"c\",\"name\":"
              "\"f\",\"arguments\":\"{}\"},{\"id\":\"fco_k_2\",\"type\":"
              "\"function_call_output\",\"call_id\":\"c\",\"output\":\"o\"},{\"id\":\"mine\","
              "\"type\":\"message\",\"role\":\"user\",\"status\":\"completed\",\"content\":[{"
              "\"type\":\"input_text\",\"text\":\"q\"}]}]");
    json_decref(req);

    /* a response's successor goes on from its input and its output: the
     * text and the calls it gave are one assistant turn, its reasoning is
     * left out, and the new instructions come first */
    tw_bridge_resp_echo echo = {.request = prior, .id = "resp_r", .created_at = 1};
    json_t *done = parse("{\"choices\":[{\"message\":{\"content\":\"t\",\"reasoning_content\":"
                         "\"r\",\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
                         "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},"
                         "\"finish_reason\":\"tool_calls\"}]}");
    json_t *response = tw_bridge_response_of_chat(&echo, done);
    json_t *conv = tw_bridge_responses_conversation(prior, response);
    assert_int_equal(json_array_size(conv), 4);
    req = parse("{\"instructions\":\"I\",\"input\":[{\"type\":\"function_call_output\","
                "\"call_id\":\"call_1\",\"output\":\"42\"}]}");
    json_t *chat = NULL;
    assert_int_equal(tw_bridge_responses_to_chat(req, conv, &chat, &ae), TW_OK);
    same_json(chat, "{\"messages\":[{\"role\":\"system\",\"content\":\"I\"},{\"role\":"
                    "\"user\",\"content\":\"p\"},{\"role\":\"assistant\",\"content\":\"t\","
                    "\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{"
                    "\"name\":\"f\",\"arguments\":\"{}\"}}]},{\"role\":\"tool\","
                    "\"tool_call_id\":\"call_1\",\"content\":\"42\"}]}");
    /* the context kept for it holds all of that but the instructions */
    json_t *ctx = tw_bridge_responses_context(conv, req, "resp_s");
    assert_int_equal(json_array_size(ctx), 5);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ctx, 4), "id")),
                        "fco_s_0");
    json_decref(ctx);
    json_decref(req);
    json_decref(conv);
    json_decref(response);
    json_decref(done);
    json_decref(prior);
}

static void test_whole_answer(void **state)
{
    (void)state;
    json_t *req = parse("{\"model\":\"m\",\"input\":\"x\",\"max_output_tokens\":5,\"tools\":[]}");
    json_t *done = parse(
        "{\"model\":\"m1\",\"choices\":[{\"message\":{\"content\":\"hi\",\"reasoning_content\":"
        "\"hmm\",\"tool_calls\":[{\"id\":\"call_9\",\"type\":\"function\",\"function\":{"
        "\"name\":\"f\",\"arguments\":\"{}\"}}]},\"logprobs\":{\"content\":[{\"token\":"
        "\"hi\",\"logprob\":-0.5,\"bytes\":[104,105],\"top_logprobs\":[]}]},"
        "\"finish_reason\":\"length\"}],\"usage\":{"
        "\"prompt_tokens\":7,\"completion_tokens\":5,\"prompt_tokens_details\":{"
        "\"cached_tokens\":2},\"completion_tokens_details\":{\"reasoning_tokens\":3}}}");
    tw_bridge_resp_echo echo = {.request = req, .id = "resp_abc", .created_at = 42};
    json_t *r = tw_bridge_response_of_chat(&echo, done);
    json_t *want = parse(
        "{\"id\":\"resp_abc\",\"object\":\"response\",\"created_at\":42,\"status\":"
        "\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"error\":null,"
        "\"instructions\":null,\"model\":\"m1\",\"output\":[{\"id\":\"rs_abc\",\"type\":"
        "\"reasoning\",\"summary\":[],\"content\":[{\"type\":\"reasoning_text\",\"text\":"
        "\"hmm\"}]},{\"id\":\"msg_abc\",\"type\":\"message\",\"status\":\"incomplete\",\"role\":"
        "\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"hi\",\"annotations\":[],"
        "\"logprobs\":[{\"token\":\"hi\",\"logprob\":-0.5,\"bytes\":[104,105],"
        "\"top_logprobs\":[]}]}]},{\"id\":\"fc_0_abc\",\"type\":\"function_call\",\"status\":"
        "\"completed\",\"call_id\":\"call_9\",\"name\":\"f\",\"arguments\":\"{}\"}],"
        "\"max_output_tokens\":5,\"parallel_tool_calls\":true,\"temperature\":1.0,"
        "\"top_logprobs\":0,\"top_p\":1.0,"
        "\"tool_choice\":\"auto\",\"tools\":[],\"text\":{\"format\":{\"type\":\"text\"}},"
        "\"reasoning\":{\"effort\":null,\"summary\":null},\"metadata\":{},\"store\":false,"
        "\"truncation\":\"disabled\",\"previous_response_id\":null,\"usage\":{\"input_tokens\":7,"
        "\"input_tokens_details\":{\"cached_tokens\":2},\"output_tokens\":5,"
        "\"output_tokens_details\":{\"reasoning_tokens\":3},\"total_tokens\":12}}");
    if (!json_equal(r, want))
        fail_msg("got %s", json_dumps(r, JSON_COMPACT));
    json_decref(r);
    json_decref(want);
    json_decref(done);
    json_decref(req);
}

typedef struct seen {
    char types[64][48];
    json_t *events[64];
    int n;
} seen;

static int keep(void *user, const char *type, const json_t *ev)
{
    seen *s = user;
    assert_true(s->n < 64);
    snprintf(s->types[s->n], sizeof s->types[0], "%s", type);
    assert_string_equal(type, json_string_value(json_object_get(ev, "type")));
    assert_int_equal(json_integer_value(json_object_get(ev, "sequence_number")), s->n);
    s->events[s->n++] = json_incref((json_t *)ev);
    return 0;
}

/* Chat chunks (reasoning, text, a call, the finish, the usage) become the
 * Responses events in order, and the last one holds the whole response. */
static void test_stream(void **state)
{
    (void)state;
    json_t *req = parse("{\"model\":\"m\",\"input\":\"x\"}");
    tw_bridge_resp_echo echo = {.request = req, .id = "resp_z", .created_at = 1};
    tw_bridge_resp_stream rs;
    seen s = {0};
    assert_int_equal(tw_bridge_resp_stream_init(&rs, &echo, keep, &s), TW_OK);
    const char *chunks[] = {
        "{\"model\":\"m\",\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}",
        "{\"choices\":[{\"delta\":{\"reasoning_content\":\"th\"}}]}",
        "{\"choices\":[{\"delta\":{\"reasoning_content\":\"ink\"}}]}",
        "{\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}",
        "{\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":"
        "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\"\"}}]}}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":"
        "\":1}\"}}]}}]}",
        "{\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}",
        "{\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}",
    };
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        json_t *c = parse(chunks[i]);
        assert_int_equal(tw_bridge_resp_stream_chunk(&rs, c), 0);
        json_decref(c);
    }
    assert_int_equal(tw_bridge_resp_stream_end(&rs), 0);
    const char *want[] = {"response.created",
                          "response.in_progress",
                          "response.output_item.added",
                          "response.reasoning_text.delta",
                          "response.reasoning_text.delta",
                          "response.reasoning_text.done",
                          "response.output_item.done",
                          "response.output_item.added",
                          "response.content_part.added",
                          "response.output_text.delta",
                          "response.output_text.delta",
                          "response.output_text.done",
                          "response.content_part.done",
                          "response.output_item.done",
                          "response.output_item.added",
                          "response.function_call_arguments.delta",
                          "response.function_call_arguments.delta",
                          "response.function_call_arguments.done",
                          "response.output_item.done",
                          "response.completed"};
    const int n = (int)(sizeof want / sizeof want[0]);
    if (s.n != n)
        fail_msg("%d events, wanted %d (last %s)", s.n, n, s.types[s.n - 1]);
    for (int i = 0; i < n; i++)
        assert_string_equal(s.types[i], want[i]);
    assert_string_equal(json_string_value(json_object_get(s.events[11], "text")), "Hello");
    assert_string_equal(json_string_value(json_object_get(s.events[17], "arguments")), "{\"a\":1}");
    const json_t *final = json_object_get(s.events[n - 1], "response");
    assert_string_equal(json_string_value(json_object_get(final, "status")), "completed");
    assert_int_equal(json_array_size(json_object_get(final, "output")), 3);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(final, "usage"), "total_tokens")), 7);
    for (int i = 0; i < s.n; i++)
        json_decref(s.events[i]);
    tw_bridge_resp_stream_fini(&rs);

    /* a failed stream: the error event, then response.failed */
    seen f = {0};
    assert_int_equal(tw_bridge_resp_stream_init(&rs, &echo, keep, &f), TW_OK);
    json_t *e = parse("{\"error\":{\"message\":\"boom\",\"code\":\"server_error\"}}");
    assert_int_equal(tw_bridge_resp_stream_chunk(&rs, e), 0);
    assert_int_equal(tw_bridge_resp_stream_end(&rs), 0);
    assert_int_equal(f.n, 4);
    assert_string_equal(f.types[2], "error");
    assert_string_equal(f.types[3], "response.failed");
    const json_t *failed = json_object_get(f.events[3], "response");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(failed, "error"), "message")), "boom");
    for (int i = 0; i < f.n; i++)
        json_decref(f.events[i]);
    json_decref(e);
    tw_bridge_resp_stream_fini(&rs);
    json_decref(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests),
        cmocka_unit_test(test_kept_items),
        cmocka_unit_test(test_whole_answer),
        cmocka_unit_test(test_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
