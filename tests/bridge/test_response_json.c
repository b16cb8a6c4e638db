/* Engine replies and chunks → OpenAI JSON, compared as whole strings so that
 * the shapes (keys, order, nulls) are pinned. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request_map.h"
#include "response_json.h"
#include "stream_shape.h"

static const tw_bridge_resp_meta META = {
    .id = "chatcmpl-abc", .created = 1700000000, .model = "m", .fingerprint = "fp_1"};

static char *dump(json_t *j)
{
    assert_non_null(j);
    char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY | JSON_REAL_PRECISION(9));
    json_decref(j);
    assert_non_null(s);
    return s;
}

static void expect_json(json_t *j, const char *want)
{
    char *got = dump(j);
    if (strcmp(got, want) != 0)
        fail_msg("\n got: %s\nwant: %s", got, want);
    free(got);
}

static void map_chat_body(const char *body, tw_bridge_gen_request *g)
{
    json_t *root = json_loads(body, 0, NULL);
    assert_non_null(root);
    tw_bridge_apierr ae;
    assert_int_equal(tw_bridge_map_chat_request(root, g, &ae), TW_OK);
    json_decref(root);
}

typedef struct collected {
    char buf[8192];
    size_t len;
} collected;

static int collect(void *user, const json_t *ev)
{
    collected *c = user;
    char *s = json_dumps(ev, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    assert_non_null(s);
    c->len += (size_t)snprintf(c->buf + c->len, sizeof c->buf - c->len, "%s\n", s);
    free(s);
    return 0;
}

static void test_usage_shape(void **state)
{
    (void)state;
    Tokenwire__V1__Usage u = TOKENWIRE__V1__USAGE__INIT;
    u.prompt_tokens = 9;
    u.completion_tokens = 12;
    u.reasoning_tokens = 5;
    u.cached_prompt_tokens = 4;
    expect_json(tw_bridge_usage_json(&u),
                "{\"prompt_tokens\":9,\"completion_tokens\":12,\"total_tokens\":21,"
                "\"prompt_tokens_details\":{\"cached_tokens\":4},"
                "\"completion_tokens_details\":{\"reasoning_tokens\":5}}");
}

static void test_finish_reasons(void **state)
{
    (void)state;
    assert_string_equal(tw_bridge_finish_reason(TOKENWIRE__V1__FINISH_REASON__FINISH_STOP), "stop");
    assert_string_equal(tw_bridge_finish_reason(TOKENWIRE__V1__FINISH_REASON__FINISH_STOP_STRING),
                        "stop");
    assert_string_equal(tw_bridge_finish_reason(TOKENWIRE__V1__FINISH_REASON__FINISH_LENGTH),
                        "length");
    assert_string_equal(
        tw_bridge_finish_reason(TOKENWIRE__V1__FINISH_REASON__FINISH_CONTEXT_LENGTH), "length");
    assert_string_equal(tw_bridge_finish_reason(TOKENWIRE__V1__FINISH_REASON__FINISH_TOOL_CALLS),
                        "tool_calls");
}

static void test_chat_completion_shape(void **state)
{
    (void)state;
    tw_bridge_gen_request g;
    map_chat_body("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &g);
    Tokenwire__V1__Choice c = TOKENWIRE__V1__CHOICE__INIT;
    c.text = "Hello!";
    c.reasoning = "The user greets.";
    c.has_finish_reason = 1;
    c.finish_reason = TOKENWIRE__V1__FINISH_REASON__FINISH_STOP;
    Tokenwire__V1__Choice *cs[] = {&c};
    Tokenwire__V1__Usage u = TOKENWIRE__V1__USAGE__INIT;
    u.prompt_tokens = 3;
    u.completion_tokens = 7;
    u.reasoning_tokens = 4;
    Tokenwire__V1__GenerateReply rep = TOKENWIRE__V1__GENERATE_REPLY__INIT;
    rep.n_choices = 1;
    rep.choices = cs;
    rep.usage = &u;
    json_t *out = NULL;
    tw_bridge_apierr ae;
    assert_int_equal(tw_bridge_chat_completion_json(&META, &g, &rep, &out, &ae), TW_OK);
    expect_json(out,
                "{\"id\":\"chatcmpl-abc\",\"object\":\"chat.completion\",\"created\":1700000000,"
                "\"model\":\"m\",\"system_fingerprint\":\"fp_1\",\"choices\":[{\"index\":0,"
                "\"message\":{\"role\":\"assistant\",\"content\":\"Hello!\","
                "\"reasoning_content\":\"The user greets.\",\"refusal\":null},"
                "\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,"
                "\"completion_tokens\":7,\"total_tokens\":10,\"prompt_tokens_details\":"
                "{\"cached_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":4}}}");
    tw_bridge_gen_request_fini(&g);
}

static void test_chat_tool_calls_from_engine_and_from_text(void **state)
{
    (void)state;
    tw_bridge_gen_request g;
    map_chat_body("{\"messages\":[{\"role\":\"user\",\"content\":\"w?\"}],\"tools\":[{\"type\":"
                  "\"function\",\"function\":{\"name\":\"get_weather\"}}]}",
                  &g);
    /* The engine parsed the call itself. */
    Tokenwire__V1__ToolCall tc = TOKENWIRE__V1__TOOL_CALL__INIT;
    tc.id = "call_e1";
    tc.name = "get_weather";
    tc.arguments_json = "{\"city\":\"Oslo\"}";
    Tokenwire__V1__ToolCall *tcs[] = {&tc};
    Tokenwire__V1__Choice c = TOKENWIRE__V1__CHOICE__INIT;
    c.n_tool_calls = 1;
    c.tool_calls = tcs;
    c.has_finish_reason = 1;
    c.finish_reason = TOKENWIRE__V1__FINISH_REASON__FINISH_TOOL_CALLS;
    Tokenwire__V1__Choice *cs[] = {&c};
    Tokenwire__V1__GenerateReply rep = TOKENWIRE__V1__GENERATE_REPLY__INIT;
    rep.n_choices = 1;
    rep.choices = cs;
    json_t *out = NULL;
    tw_bridge_apierr ae;
    assert_int_equal(tw_bridge_chat_completion_json(&META, &g, &rep, &out, &ae), TW_OK);
    char *s = dump(json_object_get(json_array_get(json_object_get(out, "choices"), 0),
                                   "message") ? json_incref(json_array_get(
                                                    json_object_get(out, "choices"), 0))
                                              : NULL);
    assert_string_equal(
        s, "{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":"
           "[{\"id\":\"call_e1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
           "\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\"}}],\"refusal\":null},\"logprobs\":"
           "null,\"finish_reason\":\"tool_calls\"}");
    free(s);
    json_decref(out);

    /* Raw Hermes text: the bridge parses it, the finish reason follows. */
    Tokenwire__V1__Choice raw = TOKENWIRE__V1__CHOICE__INIT;
    raw.text = "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}</tool_call>";
    raw.has_finish_reason = 1;
    raw.finish_reason = TOKENWIRE__V1__FINISH_REASON__FINISH_STOP;
    cs[0] = &raw;
    assert_int_equal(tw_bridge_chat_completion_json(&META, &g, &rep, &out, &ae), TW_OK);
    json_t *ch = json_array_get(json_object_get(out, "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(ch, "finish_reason")), "tool_calls");
    json_t *msg = json_object_get(ch, "message");
    assert_true(json_is_null(json_object_get(msg, "content")));
    json_t *call = json_array_get(json_object_get(msg, "tool_calls"), 0);
    assert_string_equal(json_string_value(json_object_get(call, "id")), "call_abc_0_0");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(call, "function"), "arguments")),
        "{\"city\":\"Oslo\"}");
    json_decref(out);
    tw_bridge_gen_request_fini(&g);

    /* Two calls: both by default, the first alone with parallel_tool_calls
     * false, parsed from text or sent by the engine, whole or streamed. */
    const char *two = "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>"
                      "<tool_call>{\"name\":\"b\",\"arguments\":{}}</tool_call>";
    Tokenwire__V1__ToolCall tb = tc;
    tb.name = "b";
    Tokenwire__V1__ToolCall *both[] = {&tc, &tb};
    for (int parallel = 0; parallel < 2; parallel++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"w?\"}],\"tools\":[{\"type\":"
                 "\"function\",\"function\":{\"name\":\"a\"}}],\"parallel_tool_calls\":%s}",
                 parallel ? "true" : "false");
        map_chat_body(body, &g);
        for (int from_engine = 0; from_engine < 2; from_engine++) {
            Tokenwire__V1__Choice two_calls = TOKENWIRE__V1__CHOICE__INIT;
            two_calls.text = from_engine ? "" : (char *)two;
            two_calls.n_tool_calls = from_engine ? 2 : 0;
            two_calls.tool_calls = from_engine ? both : NULL;
            two_calls.has_finish_reason = 1;
            two_calls.finish_reason = TOKENWIRE__V1__FINISH_REASON__FINISH_STOP;
            cs[0] = &two_calls;
            assert_int_equal(tw_bridge_chat_completion_json(&META, &g, &rep, &out, &ae), TW_OK);
            ch = json_array_get(json_object_get(out, "choices"), 0);
            json_t *calls = json_object_get(json_object_get(ch, "message"), "tool_calls");
            assert_int_equal(json_array_size(calls), parallel ? 2 : 1);
            json_decref(out);

            collected col = {{0}, 0};
            tw_bridge_shaper sh;
            assert_int_equal(tw_bridge_shaper_init(&sh, &META, &g, collect, &col), TW_OK);
            Tokenwire__V1__StreamChunk sc = TOKENWIRE__V1__STREAM_CHUNK__INIT;
            sc.text_delta = (char *)two_calls.text;
            sc.n_tool_calls = two_calls.n_tool_calls;
            sc.tool_calls = two_calls.tool_calls;
            sc.has_finish_reason = 1;
            sc.finish_reason = TOKENWIRE__V1__FINISH_REASON__FINISH_STOP;
            assert_int_equal(tw_bridge_shaper_chunk(&sh, &sc), 0);
            tw_bridge_shaper_fini(&sh);
            assert_true((strstr(col.buf, "\"name\":\"b\"") != NULL) == (parallel == 1));
        }
        tw_bridge_gen_request_fini(&g);
    }
}

static void test_choice_error_fails_the_response(void **state)
{
    (void)state;
    tw_bridge_gen_request g;
    map_chat_body("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &g);
    Tokenwire__V1__Choice c = TOKENWIRE__V1__CHOICE__INIT;
    c.has_finish_reason = 1;
    c.finish_reason = TOKENWIRE__V1__FINISH_REASON__FINISH_ERROR;
    Tokenwire__V1__Choice *cs[] = {&c};
    Tokenwire__V1__GenerateReply rep = TOKENWIRE__V1__GENERATE_REPLY__INIT;
    rep.n_choices = 1;
    rep.choices = cs;
    json_t *out = NULL;
    tw_bridge_apierr ae;
    assert_int_not_equal(tw_bridge_chat_completion_json(&META, &g, &rep, &out, &ae), TW_OK);
    assert_null(out);
    assert_int_equal(ae.http_status, 500);
    tw_bridge_gen_request_fini(&g);
}

static void test_logprobs_shapes_and_bad_utf8(void **state)
{
    (void)state;
    Tokenwire__V1__TopLogprob t0 = TOKENWIRE__V1__TOP_LOGPROB__INIT;
    t0.has_token_text = 1;
    t0.token_text.data = (uint8_t *)"Hi";
    t0.token_text.len = 2;
    t0.has_logprob = 1;
    t0.logprob = -0.25f;
    Tokenwire__V1__TopLogprob t1 = TOKENWIRE__V1__TOP_LOGPROB__INIT;
    t1.has_token_text = 1;
    t1.token_text.data = (uint8_t *)"\xe4";
    t1.token_text.len = 1;
    t1.has_logprob = 1;
    t1.logprob = -2.5f;
    Tokenwire__V1__TopLogprob *tops[] = {&t0, &t1};
    Tokenwire__V1__TokenLogprob lp = TOKENWIRE__V1__TOKEN_LOGPROB__INIT;
    lp.has_token_text = 1;
    lp.token_text.data = (uint8_t *)"Hi";
    lp.token_text.len = 2;
    lp.has_logprob = 1;
    lp.logprob = -0.25f;
    lp.n_top = 2;
    lp.top = tops;
    Tokenwire__V1__TokenLogprob *lps[] = {&lp};
    expect_json(tw_bridge_chat_logprobs_json(lps, 1, 2),
                "{\"content\":[{\"token\":\"Hi\",\"logprob\":-0.25,\"bytes\":[72,105],"
                "\"top_logprobs\":[{\"token\":\"Hi\",\"logprob\":-0.25,\"bytes\":[72,105]},"
                "{\"token\":\"\xef\xbf\xbd\",\"logprob\":-2.5,\"bytes\":[228]}]}],"
                "\"refusal\":null}");
    /* top limits the alternatives even when the engine sent more. */
    expect_json(tw_bridge_chat_logprobs_json(lps, 1, 0),
                "{\"content\":[{\"token\":\"Hi\",\"logprob\":-0.25,\"bytes\":[72,105],"
                "\"top_logprobs\":[]}],\"refusal\":null}");
    size_t off = 10;
    expect_json(tw_bridge_completion_logprobs_json(lps, 1, 1, &off),
                "{\"tokens\":[\"Hi\"],\"token_logprobs\":[-0.25],\"top_logprobs\":[{\"Hi\":-0.25}],"
                "\"text_offset\":[10]}");
    assert_int_equal(off, 12);

    /* A model without a tokenizer sends no texts: tokens are named by id,
     * so two alternatives stay two keys. */
    Tokenwire__V1__TopLogprob u0 = TOKENWIRE__V1__TOP_LOGPROB__INIT, u1 = u0;
    u0.token_id = 7;
    u0.logprob = -0.5f;
    u1.token_id = 9;
    u1.logprob = -1.5f;
    Tokenwire__V1__TopLogprob *utops[] = {&u0, &u1};
    Tokenwire__V1__TokenLogprob ul = TOKENWIRE__V1__TOKEN_LOGPROB__INIT;
    ul.token_id = 7;
    ul.has_logprob = 1;
    ul.logprob = -0.5f;
    ul.n_top = 2;
    ul.top = utops;
    Tokenwire__V1__TokenLogprob *ulps[] = {&ul};
    off = 0;
    expect_json(tw_bridge_completion_logprobs_json(ulps, 1, 2, &off),
                "{\"tokens\":[\"token_id:7\"],\"token_logprobs\":[-0.5],\"top_logprobs\":"
                "[{\"token_id:7\":-0.5,\"token_id:9\":-1.5}],\"text_offset\":[0]}");
    /* A reasoning token (kept apart in reasoning_content) is not one of
     * the content's, while a raw completion lists every token. */
    Tokenwire__V1__TokenLogprob rl = ul;
    rl.has_reasoning = rl.reasoning = 1;
    rl.token_id = 8;
    Tokenwire__V1__TokenLogprob *rlps[] = {&rl, &ul};
    expect_json(tw_bridge_chat_logprobs_json(rlps, 2, 0),
                "{\"content\":[{\"token\":\"token_id:7\",\"logprob\":-0.5,\"bytes\":null,"
                "\"top_logprobs\":[]}],\"refusal\":null}");
    off = 0;
    expect_json(tw_bridge_completion_logprobs_json(rlps, 2, 0, &off),
                "{\"tokens\":[\"token_id:8\",\"token_id:7\"],\"token_logprobs\":[-0.5,-0.5],"
                "\"top_logprobs\":[{},{}],\"text_offset\":[0,0]}");

    /* echo: the prompt's first token has no log-probability */
    Tokenwire__V1__TokenLogprob p0 = TOKENWIRE__V1__TOKEN_LOGPROB__INIT;
    p0.has_token_text = 1;
    p0.token_text.data = (uint8_t *)"ab";
    p0.token_text.len = 2;
    Tokenwire__V1__TokenLogprob *plps[] = {&p0, &ul};
    off = 0;
    expect_json(tw_bridge_echo_logprobs_json(plps, 2, ulps, 1, 1, &off),
                "{\"tokens\":[\"ab\",\"token_id:7\",\"token_id:7\"],\"token_logprobs\":[null,-0.5,"
                "-0.5],\"top_logprobs\":[null,{\"token_id:7\":-0.5},{\"token_id:7\":-0.5}],"
                "\"text_offset\":[0,2,2]}");
    expect_json(tw_bridge_chat_logprobs_json(ulps, 1, 1),
                "{\"content\":[{\"token\":\"token_id:7\",\"logprob\":-0.5,\"bytes\":null,"
                "\"top_logprobs\":[{\"token\":\"token_id:7\",\"logprob\":-0.5,\"bytes\":null}]}],"
                "\"refusal\":null}");

    /* A token the request banned and the thinking controller forced has no
     * probability: JSON has no infinity, so it reads -9999 in both forms. */
    Tokenwire__V1__TopLogprob b0 = u0;
    b0.logprob = -INFINITY;
    Tokenwire__V1__TopLogprob *btops[] = {&b0};
    Tokenwire__V1__TokenLogprob bl = ul;
    bl.logprob = -INFINITY;
    bl.n_top = 1;
    bl.top = btops;
    Tokenwire__V1__TokenLogprob *blps[] = {&bl};
    expect_json(tw_bridge_chat_logprobs_json(blps, 1, 1),
                "{\"content\":[{\"token\":\"token_id:7\",\"logprob\":-9999.0,\"bytes\":null,"
                "\"top_logprobs\":[{\"token\":\"token_id:7\",\"logprob\":-9999.0,"
                "\"bytes\":null}]}],\"refusal\":null}");
    off = 0;
    expect_json(tw_bridge_completion_logprobs_json(blps, 1, 1, &off),
                "{\"tokens\":[\"token_id:7\"],\"token_logprobs\":[-9999.0],\"top_logprobs\":"
                "[{\"token_id:7\":-9999.0}],\"text_offset\":[0]}");
}

static void test_text_completion_and_models(void **state)
{
    (void)state;
    json_t *root = json_loads("{\"prompt\":[1,2]}", 0, NULL);
    tw_bridge_gen_request g;
    tw_bridge_apierr ae;
    assert_int_equal(tw_bridge_map_completion_request(root, &g, &ae), TW_OK);
    json_decref(root);
    Tokenwire__V1__Choice c = TOKENWIRE__V1__CHOICE__INIT;
    c.text = "abc";
    c.has_finish_reason = 1;
    c.finish_reason = TOKENWIRE__V1__FINISH_REASON__FINISH_LENGTH;
    Tokenwire__V1__Choice *cs[] = {&c};
    Tokenwire__V1__GenerateReply rep = TOKENWIRE__V1__GENERATE_REPLY__INIT;
    rep.n_choices = 1;
    rep.choices = cs;
    tw_bridge_resp_meta meta = META;
    meta.id = "cmpl-xyz";
    json_t *out = NULL;
    assert_int_equal(tw_bridge_text_completion_json(&meta, &g, &rep, &out, &ae), TW_OK);
    expect_json(out, "{\"id\":\"cmpl-xyz\",\"object\":\"text_completion\",\"created\":1700000000,"
                     "\"model\":\"m\",\"system_fingerprint\":\"fp_1\",\"choices\":[{\"text\":"
                     "\"abc\",\"index\":0,\"logprobs\":null,\"finish_reason\":\"length\"}],"
                     "\"usage\":{\"prompt_tokens\":0,\"completion_tokens\":0,\"total_tokens\":0,"
                     "\"prompt_tokens_details\":{\"cached_tokens\":0},"
                     "\"completion_tokens_details\":{\"reasoning_tokens\":0}}}");
    tw_bridge_gen_request_fini(&g);

    Tokenwire__V1__ModelInfo m = TOKENWIRE__V1__MODEL_INFO__INIT;
    m.name = "qwen2";
    m.loaded_unix_s = 1700000001;
    m.max_context = 4096;
    m.state = "ready";
    Tokenwire__V1__ModelInfo *ms[] = {&m};
    Tokenwire__V1__ListModelsReply l = TOKENWIRE__V1__LIST_MODELS_REPLY__INIT;
    l.n_models = 1;
    l.models = ms;
    expect_json(tw_bridge_model_list_json(&l),
                "{\"object\":\"list\",\"data\":[{\"id\":\"qwen2\",\"object\":\"model\","
                "\"created\":1700000001,\"owned_by\":\"tokenwire\",\"max_model_len\":4096,"
                "\"state\":\"ready\"}]}");
}

/* Collects streamed events as "data: ..." lines. */
#define ENV "\"id\":\"chatcmpl-abc\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"m\",\"system_fingerprint\":\"fp_1\""

static void test_stream_chat_sequence(void **state)
{
    (void)state;
    tw_bridge_gen_request g;
    map_chat_body("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true,"
                  "\"stream_options\":{\"include_usage\":true}}",
                  &g);
    collected col = {{0}, 0};
    tw_bridge_shaper sh;
    assert_int_equal(tw_bridge_shaper_init(&sh, &META, &g, collect, &col), TW_OK);
    Tokenwire__V1__StreamChunk c1 = TOKENWIRE__V1__STREAM_CHUNK__INIT;
    c1.reasoning_delta = "think";
    Tokenwire__V1__StreamChunk c2 = TOKENWIRE__V1__STREAM_CHUNK__INIT;
    c2.text_delta = "Hel";
    Tokenwire__V1__StreamChunk c3 = TOKENWIRE__V1__STREAM_CHUNK__INIT;
    c3.text_delta = "lo";
    c3.has_finish_reason = 1;
    c3.finish_reason = TOKENWIRE__V1__FINISH_REASON__FINISH_LENGTH;
    Tokenwire__V1__Usage u = TOKENWIRE__V1__USAGE__INIT;
    u.prompt_tokens = 2;
    u.completion_tokens = 3;
    c3.usage = &u;
    c3.has_final = 1;
    c3.final = 1;
    assert_int_equal(tw_bridge_shaper_chunk(&sh, &c1), 0);
    assert_int_equal(tw_bridge_shaper_chunk(&sh, &c2), 0);
    assert_int_equal(tw_bridge_shaper_chunk(&sh, &c3), 0);
    assert_int_equal(tw_bridge_shaper_end(&sh), 0);
    tw_bridge_shaper_fini(&sh);
    const char *want =
        "{" ENV ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
        "\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n"
        "{" ENV ",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"think\"},"
        "\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n"
        "{" ENV ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},"
        "\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n"
        "{" ENV ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},"
        "\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n"
        "{" ENV ",\"choices\":[{\"index\":0,\"delta\":{},"
        "\"logprobs\":null,\"finish_reason\":\"length\"}],\"usage\":null}\n"
        "{" ENV ",\"choices\":[],\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":3,"
        "\"total_tokens\":5,\"prompt_tokens_details\":{\"cached_tokens\":0},"
        "\"completion_tokens_details\":{\"reasoning_tokens\":0}}}\n";
    if (strcmp(col.buf, want) != 0)
        fail_msg("\n got: %s\nwant: %s", col.buf, want);
    tw_bridge_gen_request_fini(&g);
}

static void test_stream_tool_calls_and_errors(void **state)
{
    (void)state;
    tw_bridge_gen_request g;
    map_chat_body("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true,"
                  "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}",
                  &g);
    collected col = {{0}, 0};
    tw_bridge_shaper sh;
    assert_int_equal(tw_bridge_shaper_init(&sh, &META, &g, collect, &col), TW_OK);
    Tokenwire__V1__StreamChunk c1 = TOKENWIRE__V1__STREAM_CHUNK__INIT;
    c1.text_delta = "<tool_call>{\"name\":\"f\",";
    Tokenwire__V1__StreamChunk c2 = TOKENWIRE__V1__STREAM_CHUNK__INIT;
    c2.text_delta = "\"arguments\":{}}</tool_call>";
    c2.has_finish_reason = 1;
    c2.finish_reason = TOKENWIRE__V1__FINISH_REASON__FINISH_STOP;
    /* A chunk naming a choice that does not exist is ignored. */
    Tokenwire__V1__StreamChunk bogus = TOKENWIRE__V1__STREAM_CHUNK__INIT;
    bogus.index = 7;
    bogus.text_delta = "ghost";
    assert_int_equal(tw_bridge_shaper_chunk(&sh, &c1), 0);
    assert_int_equal(tw_bridge_shaper_chunk(&sh, &bogus), 0);
    assert_int_equal(tw_bridge_shaper_chunk(&sh, &c2), 0);
    assert_int_equal(tw_bridge_shaper_end(&sh), 0);
    tw_bridge_shaper_fini(&sh);
    const char *want =
        "{" ENV ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
        "\"logprobs\":null,\"finish_reason\":null}]}\n"
        "{" ENV ",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":"
        "\"call_abc_0_0\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":"
        "\"{}\"}}]},\"logprobs\":null,\"finish_reason\":null}]}\n"
        "{" ENV ",\"choices\":[{\"index\":0,\"delta\":{},"
        "\"logprobs\":null,\"finish_reason\":\"tool_calls\"}]}\n";
    if (strcmp(col.buf, want) != 0)
        fail_msg("\n got: %s\nwant: %s", col.buf, want);

    /* An error chunk becomes an error event. */
    collected col2 = {{0}, 0};
    assert_int_equal(tw_bridge_shaper_init(&sh, &META, &g, collect, &col2), TW_OK);
    Tokenwire__V1__Status err = TOKENWIRE__V1__STATUS__INIT;
    err.has_code = 1;
    err.code = TOKENWIRE__V1__STATUS_CODE__RESOURCE_EXHAUSTED;
    err.message = "KV cache full";
    Tokenwire__V1__StreamChunk ec = TOKENWIRE__V1__STREAM_CHUNK__INIT;
    ec.error = &err;
    tw_bridge_shaper_chunk(&sh, &ec);
    tw_bridge_shaper_fini(&sh);
    assert_string_equal(col2.buf, "{\"error\":{\"message\":\"KV cache full\",\"type\":"
                                  "\"rate_limit_error\",\"param\":null,\"code\":"
                                  "\"engine_error\"}}\n");
    tw_bridge_gen_request_fini(&g);
}

/* A streamed echo the engine did not send the prompt for fails the stream
 * with an error event instead of answering without the prompt. */
static void test_stream_echo_needs_the_prompt(void **state)
{
    (void)state;
    json_t *root = json_loads("{\"prompt\":\"ab\",\"echo\":true,\"stream\":true}", 0, NULL);
    tw_bridge_gen_request g;
    tw_bridge_apierr ae;
    assert_int_equal(tw_bridge_map_completion_request(root, &g, &ae), TW_OK);
    json_decref(root);
    collected col = {{0}, 0};
    tw_bridge_shaper sh;
    assert_int_equal(tw_bridge_shaper_init(&sh, &META, &g, collect, &col), TW_OK);
    Tokenwire__V1__StreamChunk c = TOKENWIRE__V1__STREAM_CHUNK__INIT;
    c.text_delta = "cd";
    assert_int_not_equal(tw_bridge_shaper_chunk(&sh, &c), 0);
    tw_bridge_shaper_fini(&sh);
    assert_non_null(strstr(col.buf, "\"error\""));
    assert_null(strstr(col.buf, "cd"));

    /* with it, the prompt is the choice's first event */
    collected ok = {{0}, 0};
    assert_int_equal(tw_bridge_shaper_init(&sh, &META, &g, collect, &ok), TW_OK);
    c.prompt_text = "ab";
    assert_int_equal(tw_bridge_shaper_chunk(&sh, &c), 0);
    tw_bridge_shaper_fini(&sh);
    const char *first = strstr(ok.buf, "\"text\":\"ab\"");
    const char *then = strstr(ok.buf, "\"text\":\"cd\"");
    assert_non_null(first);
    assert_non_null(then);
    assert_true(first < then);
    tw_bridge_gen_request_fini(&g);
}

static void test_json_text_replaces_invalid_utf8(void **state)
{
    (void)state;
    expect_json(tw_bridge_json_text("a\xff" "b\xc0\x80" "c\xed\xa0\x80", 9),
                "\"a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
    expect_json(tw_bridge_json_text("x\0y", 3), "\"x\xef\xbf\xbdy\"");
    expect_json(tw_bridge_json_text("\xf0\x9f\x98\x80", 4), "\"\xf0\x9f\x98\x80\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_shape),
        cmocka_unit_test(test_finish_reasons),
        cmocka_unit_test(test_chat_completion_shape),
        cmocka_unit_test(test_chat_tool_calls_from_engine_and_from_text),
        cmocka_unit_test(test_choice_error_fails_the_response),
        cmocka_unit_test(test_logprobs_shapes_and_bad_utf8),
        cmocka_unit_test(test_text_completion_and_models),
        cmocka_unit_test(test_stream_chat_sequence),
        cmocka_unit_test(test_stream_tool_calls_and_errors),
        cmocka_unit_test(test_stream_echo_needs_the_prompt),
        cmocka_unit_test(test_json_text_replaces_invalid_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
