/* Every endpoint and every error status of the bridge over real HTTP, on
 * the real engine serving the shipped model, and the clients that misbehave:
 * invalid UTF-8, headers past the limit, bodies that never finish, more
 * clients than workers. (test_integration.c covers 401, 404, 405, 413, bad
 * JSON and the engine going away and coming back.)
 *
 * Arguments: the model to serve. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bridge_fixture.h"

static const char *model_path;
static const char model_name[] = "tokenwire-coder-24m-q8_0";

/* A chat answer's logprobs.content holds the tokens of message.content,
 * not those of the reasoning kept apart in reasoning_content: their texts
 * spell the content exactly. */
static void check_chat_logprobs(twb_service *s)
{
    twb_result r =
        twb_http(s, "POST", "/v1/chat/completions",
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Write add(a, b).\"}],"
                 "\"max_tokens\":6,\"temperature\":0,\"logprobs\":true,\"top_logprobs\":1}",
                 SIZE_MAX);
    json_t *j = twb_ok_json(&r, "chat with logprobs");
    json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
    json_t *msg = json_object_get(ch, "message");
    const char *content = json_string_value(json_object_get(msg, "content"));
    assert_non_null(content);
    /* this model reasons first, so the split is exercised */
    assert_true(json_string_length(json_object_get(msg, "reasoning_content")) > 0);
    json_t *lps = json_object_get(json_object_get(ch, "logprobs"), "content");
    char spelled[1024] = "";
    size_t i;
    json_t *e;
    json_array_foreach(lps, i, e)
    {
        strncat(spelled, json_string_value(json_object_get(e, "token")),
                sizeof spelled - strlen(spelled) - 1);
        /* every token, sampled or forced, has the alternative asked for */
        assert_int_equal(json_array_size(json_object_get(e, "top_logprobs")), 1);
    }
    assert_true(json_array_size(lps) > 0);
    assert_string_equal(spelled, content);
    json_decref(j);
}

/* The text of a completion's first choice (free()). */
static char *completion_text(twb_service *s, const char *body)
{
    twb_result r = twb_http(s, "POST", "/v1/completions", body, SIZE_MAX);
    json_t *j = twb_ok_json(&r, body);
    const char *t = json_string_value(
        json_object_get(json_array_get(json_object_get(j, "choices"), 0), "text"));
    assert_non_null(t);
    char *copy = strdup(t);
    json_decref(j);
    return copy;
}

/* echo: a whole completion starts with its prompt, as text or as the
 * tokenizer reads its ids back, and goes on with the greedy answer that
 * the same request without echo gives. */
static void check_echo(twb_service *s, const json_t *tokens)
{
    char *answer =
        completion_text(s, "{\"prompt\":\"def f():\",\"max_tokens\":4,\"temperature\":0}");
    char *echoed = completion_text(
        s, "{\"prompt\":\"def f():\",\"max_tokens\":4,\"temperature\":0,\"echo\":true}");
    char want[512];
    snprintf(want, sizeof want, "def f():%s", answer);
    assert_string_equal(echoed, want);
    free(echoed);
    char *ids = json_dumps(tokens, JSON_COMPACT), body[512];
    snprintf(body, sizeof body, "{\"prompt\":%s,\"max_tokens\":4,\"temperature\":0,\"echo\":true}",
             ids);
    free(ids);
    echoed = completion_text(s, body);
    assert_string_equal(echoed, want);
    free(echoed);
    free(answer);

    /* with logprobs: the prompt's tokens first, the first of them without
     * one, then the answer's, as the same request without echo gives them;
     * the tokens spell the whole text */
    twb_result r = twb_http(
        s, "POST", "/v1/completions",
        "{\"prompt\":\"def f():\",\"max_tokens\":4,\"temperature\":0,\"logprobs\":2}", SIZE_MAX);
    json_t *plain = twb_ok_json(&r, "logprobs");
    r = twb_http(s, "POST", "/v1/completions",
                 "{\"prompt\":\"def f():\",\"max_tokens\":4,\"temperature\":0,\"logprobs\":2,"
                 "\"echo\":true}",
                 SIZE_MAX);
    json_t *ech = twb_ok_json(&r, "echo with logprobs");
    json_t *pc = json_array_get(json_object_get(plain, "choices"), 0);
    json_t *ec = json_array_get(json_object_get(ech, "choices"), 0);
    json_t *plp = json_object_get(pc, "logprobs"), *elp = json_object_get(ec, "logprobs");
    const size_t n_answer = json_array_size(json_object_get(plp, "tokens"));
    const size_t n_prompt =
        json_integer_value(json_object_get(json_object_get(ech, "usage"), "prompt_tokens"));
    json_t *tokens_all = json_object_get(elp, "tokens");
    json_t *values = json_object_get(elp, "token_logprobs");
    json_t *tops = json_object_get(elp, "top_logprobs");
    json_t *offs = json_object_get(elp, "text_offset");
    assert_int_equal(n_answer, 4);
    assert_int_equal(json_array_size(tokens_all), n_prompt + n_answer);
    assert_true(json_is_null(json_array_get(values, 0)));
    assert_true(json_is_null(json_array_get(tops, 0)));
    char spelled[512] = "";
    for (size_t i = 0; i < n_prompt + n_answer; i++) {
        assert_int_equal(json_integer_value(json_array_get(offs, i)), strlen(spelled));
        strncat(spelled, json_string_value(json_array_get(tokens_all, i)),
                sizeof spelled - strlen(spelled) - 1);
        if (i == 0)
            continue;
        assert_true(json_real_value(json_array_get(values, i)) <= 0.0);
        assert_int_equal(json_object_size(json_array_get(tops, i)), 2);
    }
    assert_string_equal(spelled, json_string_value(json_object_get(ec, "text")));
    for (size_t i = 0; i < n_answer; i++)
        assert_true(json_equal(json_array_get(values, n_prompt + i),
                               json_array_get(json_object_get(plp, "token_logprobs"), i)));

    /* max_tokens 0: the prompt scored and nothing generated, its entries
     * those the answering request gave */
    r = twb_http(s, "POST", "/v1/completions",
                 "{\"prompt\":\"def f():\",\"max_tokens\":0,\"logprobs\":2,\"echo\":true}",
                 SIZE_MAX);
    json_t *scored = twb_ok_json(&r, "max_tokens 0");
    json_t *sc = json_array_get(json_object_get(scored, "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(sc, "text")), "def f():");
    assert_string_equal(json_string_value(json_object_get(sc, "finish_reason")), "length");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(scored, "usage"), "completion_tokens")),
        0);
    json_t *slp = json_object_get(sc, "logprobs");
    const char *arrays[] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
    for (size_t k = 0; k < 4; k++) {
        json_t *got = json_object_get(slp, arrays[k]), *all = json_object_get(elp, arrays[k]);
        assert_int_equal(json_array_size(got), n_prompt);
        for (size_t i = 0; i < n_prompt; i++)
            assert_true(json_equal(json_array_get(got, i), json_array_get(all, i)));
    }
    json_decref(scored);
    json_decref(plain);
    json_decref(ech);
}

/* A streamed completion's choices put together: per index the texts
 * joined and the legacy logprobs' four arrays joined, in event order. The
 * first event of each index is kept apart too. */
#define STREAMED_MAX 8

typedef struct streamed {
    char text[STREAMED_MAX][512];
    char first[STREAMED_MAX][512];
    json_t *lps[STREAMED_MAX];
    json_t *usage; /* the last event's, when include_usage */
} streamed;

static void join_event(json_t *ev, void *user)
{
    streamed *out = user;
    if (json_is_object(json_object_get(ev, "usage")) &&
        json_array_size(json_object_get(ev, "choices")) == 0) {
        json_decref(out->usage);
        out->usage = json_incref(json_object_get(ev, "usage"));
    }
    json_t *ch = json_array_get(json_object_get(ev, "choices"), 0);
    if (!ch)
        return;
    size_t idx = (size_t)json_integer_value(json_object_get(ch, "index"));
    assert_true(idx < STREAMED_MAX);
    const char *t = json_string_value(json_object_get(ch, "text"));
    assert_non_null(t);
    if (!*out->text[idx] && *t)
        snprintf(out->first[idx], sizeof out->first[idx], "%s", t);
    strncat(out->text[idx], t, sizeof out->text[idx] - strlen(out->text[idx]) - 1);
    json_t *lp = json_object_get(ch, "logprobs");
    const char *key;
    json_t *arr;
    if (json_is_object(lp))
        json_object_foreach(lp, key, arr)
            json_array_extend(json_object_get(out->lps[idx], key), arr);
}

static void join_stream(const char *body, streamed *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < STREAMED_MAX; i++)
        out->lps[i] = json_pack("{s:[],s:[],s:[],s:[]}", "tokens", "token_logprobs", "top_logprobs",
                                "text_offset");
    assert_true(twb_sse_each(body, join_event, out));
}

static void streamed_fini(streamed *s)
{
    for (int i = 0; i < STREAMED_MAX; i++)
        json_decref(s->lps[i]);
    json_decref(s->usage);
}

/* echo on a stream: each choice's first event is the prompt (with its
 * tokens' log-probabilities when asked), and the whole stream joins into the
 * whole answer, offsets and values alike. */
static void check_streamed_echo(twb_service *s)
{
    const char *body = "{\"prompt\":\"def f():\",\"max_tokens\":4,\"temperature\":0,"
                       "\"logprobs\":2,\"echo\":true%s}";
    char req[256];
    snprintf(req, sizeof req, body, "");
    twb_result r = twb_http(s, "POST", "/v1/completions", req, SIZE_MAX);
    json_t *whole = twb_ok_json(&r, "echo with logprobs");
    json_t *wc = json_array_get(json_object_get(whole, "choices"), 0);
    snprintf(req, sizeof req, body, ",\"stream\":true");
    r = twb_http(s, "POST", "/v1/completions", req, SIZE_MAX);
    assert_int_equal(r.status, 200);
    streamed st;
    join_stream(r.body, &st);
    free(r.body);
    assert_string_equal(st.first[0], "def f():");
    assert_string_equal(st.text[0], json_string_value(json_object_get(wc, "text")));
    json_t *wl = json_object_get(wc, "logprobs");
    if (!json_equal(st.lps[0], wl)) {
        char *a = json_dumps(st.lps[0], JSON_COMPACT), *b = json_dumps(wl, JSON_COMPACT);
        fail_msg("streamed echo logprobs\n%s\nwhole\n%s", a, b);
    }
    streamed_fini(&st);

    /* two choices, each echoing */
    r = twb_http(s, "POST", "/v1/completions",
                 "{\"prompt\":\"def f():\",\"max_tokens\":4,\"temperature\":0,\"n\":2,"
                 "\"echo\":true,\"stream\":true}",
                 SIZE_MAX);
    assert_int_equal(r.status, 200);
    join_stream(r.body, &st);
    free(r.body);
    for (int i = 0; i < 2; i++) {
        assert_string_equal(st.first[i], "def f():");
        assert_string_equal(st.text[i], json_string_value(json_object_get(wc, "text")));
    }
    streamed_fini(&st);
    json_decref(whole);

    /* two choices with log-probabilities: each choice's first event has the
     * prompt's, and each joins into the whole answer's choice */
    snprintf(req, sizeof req, body, ",\"n\":2");
    r = twb_http(s, "POST", "/v1/completions", req, SIZE_MAX);
    whole = twb_ok_json(&r, "echo with logprobs, two choices");
    snprintf(req, sizeof req, body, ",\"n\":2,\"stream\":true");
    r = twb_http(s, "POST", "/v1/completions", req, SIZE_MAX);
    assert_int_equal(r.status, 200);
    join_stream(r.body, &st);
    free(r.body);
    for (int i = 0; i < 2; i++) {
        json_t *c = json_array_get(json_object_get(whole, "choices"), (size_t)i);
        assert_string_equal(st.first[i], "def f():");
        assert_string_equal(st.text[i], json_string_value(json_object_get(c, "text")));
        assert_true(json_equal(st.lps[i], json_object_get(c, "logprobs")));
    }
    streamed_fini(&st);
    json_decref(whole);
}

/* Several prompts in one /v1/completions request: prompt i's choice c at
 * index i * n + c, each the answer the prompt gets alone (greedy), and the
 * usage the sum of theirs. */
static void check_batch_prompts(twb_service *s)
{
    const char *prompts[] = {"\"def add(\"", "[1, 2, 3]", "\"class A\""};
    twb_result r = twb_http(s, "POST", "/v1/completions",
                            "{\"prompt\":[\"def add(\",[1,2,3],\"class A\"],\"max_tokens\":4,"
                            "\"temperature\":0,\"n\":2,\"logprobs\":1,\"echo\":true}",
                            SIZE_MAX);
    json_t *batch = twb_ok_json(&r, "several prompts");
    json_t *choices = json_object_get(batch, "choices");
    assert_int_equal(json_array_size(choices), 6);
    json_int_t prompt_sum = 0, completion_sum = 0;
    for (size_t i = 0; i < 3; i++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"prompt\":%s,\"max_tokens\":4,\"temperature\":0,\"logprobs\":1,"
                 "\"echo\":true}",
                 prompts[i]);
        r = twb_http(s, "POST", "/v1/completions", body, SIZE_MAX);
        json_t *alone = twb_ok_json(&r, body);
        json_t *want = json_array_get(json_object_get(alone, "choices"), 0);
        for (size_t c = 0; c < 2; c++) {
            json_t *got = json_array_get(choices, i * 2 + c);
            assert_int_equal(json_integer_value(json_object_get(got, "index")), i * 2 + c);
            assert_string_equal(json_string_value(json_object_get(got, "text")),
                                json_string_value(json_object_get(want, "text")));
            assert_true(
                json_equal(json_object_get(got, "logprobs"), json_object_get(want, "logprobs")));
        }
        json_t *u = json_object_get(alone, "usage");
        prompt_sum += json_integer_value(json_object_get(u, "prompt_tokens"));
        completion_sum += 2 * json_integer_value(json_object_get(u, "completion_tokens"));
        json_decref(alone);
    }
    json_t *u = json_object_get(batch, "usage");
    assert_int_equal(json_integer_value(json_object_get(u, "prompt_tokens")), prompt_sum);
    assert_int_equal(json_integer_value(json_object_get(u, "completion_tokens")), completion_sum);
    assert_int_equal(json_integer_value(json_object_get(u, "total_tokens")),
                     prompt_sum + completion_sum);

    json_decref(batch);

    /* the same on a stream: every index's events join into its choice */
    const char *body = "{\"prompt\":[\"def add(\",[1,2,3],\"class A\"],\"max_tokens\":4,"
                       "\"temperature\":0,\"logprobs\":1,\"echo\":true%s}";
    char req[512];
    snprintf(req, sizeof req, body, "");
    r = twb_http(s, "POST", "/v1/completions", req, SIZE_MAX);
    batch = twb_ok_json(&r, "several prompts, one choice each");
    choices = json_object_get(batch, "choices");
    snprintf(req, sizeof req, body, ",\"stream\":true,\"stream_options\":{\"include_usage\":true}");
    r = twb_http(s, "POST", "/v1/completions", req, SIZE_MAX);
    assert_int_equal(r.status, 200);
    streamed st;
    join_stream(r.body, &st);
    free(r.body);
    for (size_t k = 0; k < 3; k++) {
        json_t *want = json_array_get(choices, k);
        assert_string_equal(st.text[k], json_string_value(json_object_get(want, "text")));
        assert_true(json_equal(st.lps[k], json_object_get(want, "logprobs")));
    }
    assert_true(json_equal(st.usage, json_object_get(batch, "usage")));
    streamed_fini(&st);
    json_decref(batch);

    /* one bad prompt fails the whole request, with its own reason */
    r = twb_http(s, "POST", "/v1/completions", "{\"prompt\":[\"ok\",[99999999]],\"max_tokens\":2}",
                 SIZE_MAX);
    assert_non_null(strstr(r.body, "vocabulary"));
    twb_expect_error(&r, 400, NULL);
}

/* A client that hangs up on a whole answer stops its generation: the
 * engine ends it long before the 8 x 1500 tokens it asked for, and the
 * bridge counts the cancel. */
/* The streams before counted their chunks' delivery: the buckets grow
 * with their bounds, the last is the count, and some time was spent. */
static void check_delivery_histogram(const char *metrics)
{
    static const char name[] = "tokenwire_bridge_stream_chunk_delivery_seconds";
    unsigned long long prev = 0, count = 0;
    int buckets = 0;
    for (const char *p = strstr(metrics, name); p; p = strstr(p + 1, name)) {
        unsigned long long v;
        double sum;
        if (sscanf(p, "tokenwire_bridge_stream_chunk_delivery_seconds_bucket{le=\"%*[^\"]\"} %llu",
                   &v) == 1) {
            if (v < prev)
                fail_msg("delivery buckets shrink: %s", metrics);
            prev = v;
            buckets++;
        } else if (sscanf(p, "tokenwire_bridge_stream_chunk_delivery_seconds_count %llu", &v) ==
                   1) {
            count = v;
        } else if (sscanf(p, "tokenwire_bridge_stream_chunk_delivery_seconds_sum %lf", &sum) == 1) {
            assert_true(sum > 0);
        }
    }
    assert_int_equal(buckets, 11);
    assert_true(count > 0);
    assert_int_equal(prev, count);
}

static void check_hangup_cancels(twb_service *s)
{
    twb_stats before = twb_engine_stats(s);
    const char *body = "{\"prompt\":\"def f():\",\"max_tokens\":1500,\"n\":8,\"ignore_eos\":true}";
    char head[256];
    snprintf(head, sizeof head,
             "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-edge\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
             strlen(body));
    int fd = twb_connect(s);
    twb_send_all(fd, head, strlen(head));
    twb_send_all(fd, body, strlen(body));
    uint64_t t0 = twb_now_ms();
    while (twb_engine_stats(s).running == 0 && twb_now_ms() - t0 < 10000)
        usleep(10000);
    assert_true(twb_engine_stats(s).running > 0);
    close(fd);
    t0 = twb_now_ms();
    while (twb_engine_stats(s).running > 0 && twb_now_ms() - t0 < 120000)
        usleep(20000);
    twb_stats after = twb_engine_stats(s);
    assert_int_equal(after.running, 0);
    uint64_t made = after.generated_tokens - before.generated_tokens;
    if (made >= 8 * 1500)
        fail_msg("the generation ran to its end (%llu tokens) after the client hung up",
                 (unsigned long long)made);
    twb_result r = twb_http(s, "GET", "/metrics", NULL, 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "tokenwire_bridge_hangups_cancelled_total 1\n"));
    free(r.body);

    /* hanging up at once, maybe before the Generate reaches the engine:
     * it is not sent, or cancelled when the engine has it */
    before = after;
    fd = twb_connect(s);
    twb_send_all(fd, head, strlen(head));
    twb_send_all(fd, body, strlen(body));
    close(fd);
    usleep(300000);
    t0 = twb_now_ms();
    while (twb_engine_stats(s).running > 0 && twb_now_ms() - t0 < 120000)
        usleep(20000);
    after = twb_engine_stats(s);
    made = after.generated_tokens - before.generated_tokens;
    if (made >= 8 * 1500)
        fail_msg("a generation ran to its end (%llu tokens) after an early hang-up",
                 (unsigned long long)made);
}

static void test_every_endpoint(void **state)
{
    (void)state;
    twb_service s;
    twb_start(&s, model_path, NULL, "sk-edge", NULL);

    twb_result r = twb_http(&s, "GET", "/health", NULL, 0);
    json_t *j = twb_ok_json(&r, "health");
    assert_string_equal(json_string_value(json_object_get(j, "status")), "ok");
    json_decref(j);

    r = twb_http(&s, "GET", "/v1/models", NULL, 0);
    j = twb_ok_json(&r, "models");
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(j, "data"), 0), "id")),
                        model_name);
    json_decref(j);
    r = twb_http(&s, "GET", "/v1/models/tokenwire-coder-24m-q8_0", NULL, 0);
    j = twb_ok_json(&r, "model");
    assert_string_equal(json_string_value(json_object_get(j, "object")), "model");
    json_decref(j);
    r = twb_http(&s, "HEAD", "/v1/models", NULL, 0);
    assert_int_equal(r.status, 200);
    free(r.body);

    r = twb_http(&s, "POST", "/v1/chat/completions",
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Write add(a, b).\"}],"
                 "\"max_tokens\":4,\"temperature\":0}",
                 SIZE_MAX);
    j = twb_ok_json(&r, "chat");
    assert_string_equal(json_string_value(json_object_get(j, "object")), "chat.completion");
    json_decref(j);
    check_chat_logprobs(&s);
    /* the shipped template writes no tool calls, so none can be required
     * (an answer without the call would break the promise) */
    for (int streamed = 0; streamed < 2; streamed++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],"
                 "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"w\"}}],"
                 "\"tool_choice\":\"required\",\"stream\":%s}",
                 streamed ? "true" : "false");
        r = twb_http(&s, "POST", "/v1/chat/completions", body, SIZE_MAX);
        assert_non_null(strstr(r.body, "tool-call format"));
        twb_expect_error(&r, 400, NULL);
    }
    r = twb_http(&s, "POST", "/v1/chat/completions",
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":3,"
                 "\"stream\":true}",
                 SIZE_MAX);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"object\":\"chat.completion.chunk\""));
    assert_non_null(strstr(r.body, "data: [DONE]\n\n"));
    free(r.body);
    r = twb_http(&s, "POST", "/v1/completions", "{\"prompt\":\"def f():\",\"max_tokens\":3}",
                 SIZE_MAX);
    j = twb_ok_json(&r, "completion");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"),
                                                        "completion_tokens")),
                     3);
    json_decref(j);

    r = twb_http(&s, "POST", "/tokenize", "{\"prompt\":\"def f():\"}", SIZE_MAX);
    j = twb_ok_json(&r, "tokenize");
    json_t *tokens = json_incref(json_object_get(j, "tokens"));
    assert_true(json_array_size(tokens) > 0);
    assert_int_equal(json_integer_value(json_object_get(j, "count")), json_array_size(tokens));
    json_decref(j);
    check_echo(&s, tokens);
    check_streamed_echo(&s);
    check_batch_prompts(&s);
    check_hangup_cancels(&s);
    json_t *dreq = json_pack("{s:o}", "tokens", tokens);
    char *dbody = json_dumps(dreq, JSON_COMPACT);
    json_decref(dreq);
    r = twb_http(&s, "POST", "/detokenize", dbody, SIZE_MAX);
    free(dbody);
    j = twb_ok_json(&r, "detokenize");
    assert_string_equal(json_string_value(json_object_get(j, "prompt")), "def f():");
    json_decref(j);

    r = twb_http(&s, "GET", "/metrics", NULL, 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "tokenwire_engine_up 1"));
    check_delivery_histogram(r.body);
    free(r.body);

    /* 400: fields of the wrong type or value, and bodies that are not
     * usable JSON at all. */
    r = twb_http(&s, "POST", "/v1/chat/completions", "{\"messages\":\"hi\"}", SIZE_MAX);
    twb_expect_error(&r, 400, "invalid_type");
    r = twb_http(&s, "POST", "/v1/chat/completions", "{\"max_tokens\":3}", SIZE_MAX);
    twb_expect_error(&r, 400, "missing_required_parameter");
    r = twb_http(&s, "POST", "/v1/chat/completions",
                 "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", SIZE_MAX);
    twb_expect_error(&r, 400, "invalid_value");
    r = twb_http(&s, "POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":\"5\"}",
                 SIZE_MAX);
    twb_expect_error(&r, 400, "invalid_type");
    r = twb_http(&s, "POST", "/v1/completions", "[1,2]", SIZE_MAX);
    twb_expect_error(&r, 400, "invalid_request_body");
    r = twb_http(&s, "POST", "/v1/completions", "", 0);
    twb_expect_error(&r, 400, "invalid_request_body");
    r = twb_http(&s, "POST", "/tokenize", "{}", SIZE_MAX);
    twb_expect_error(&r, 400, "missing_required_parameter");
    r = twb_http(&s, "POST", "/detokenize", "{\"tokens\":[\"a\"]}", SIZE_MAX);
    twb_expect_error(&r, 400, NULL);
    char deep[300];
    memset(deep, '[', 200);
    memset(deep + 200, ']', 99);
    deep[299] = '\0';
    char deep_body[400];
    snprintf(deep_body, sizeof deep_body, "{\"prompt\":%s}", deep);
    r = twb_http(&s, "POST", "/v1/completions", deep_body, SIZE_MAX);
    twb_expect_error(&r, 400, NULL);

    /* Invalid UTF-8 in every form is refused before it goes anywhere:
     * raw bytes, an overlong encoding, a lone surrogate escape, NUL. */
    static const char *const bad_text[] = {
        "{\"prompt\":\"\xff\xfe\",\"max_tokens\":1}",
        "{\"prompt\":\"\xc0\xaf\",\"max_tokens\":1}",
        "{\"prompt\":\"\xed\xa0\x80\",\"max_tokens\":1}",
        "{\"prompt\":\"\\ud800\",\"max_tokens\":1}",
        "{\"prompt\":\"a\\u0000b\",\"max_tokens\":1}",
    };
    for (size_t i = 0; i < sizeof bad_text / sizeof bad_text[0]; i++) {
        r = twb_http(&s, "POST", "/v1/completions", bad_text[i], SIZE_MAX);
        twb_expect_error(&r, 400, "invalid_json");
    }
    static const char nul_body[] = "{\"prompt\":\"a\0b\",\"max_tokens\":1}";
    r = twb_http(&s, "POST", "/v1/completions", nul_body, sizeof nul_body - 1);
    twb_expect_error(&r, 400, "invalid_json");

    /* 404: an unknown model on every generation route, streamed or not. */
    r = twb_http(&s, "POST", "/v1/chat/completions",
                 "{\"model\":\"nope\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                 SIZE_MAX);
    twb_expect_error(&r, 404, "model_not_found");
    r = twb_http(&s, "POST", "/v1/chat/completions",
                 "{\"model\":\"nope\",\"stream\":true,\"messages\":[{\"role\":\"user\","
                 "\"content\":\"x\"}]}",
                 SIZE_MAX);
    twb_expect_error(&r, 404, "model_not_found");
    r = twb_http(&s, "POST", "/v1/models/pull", "{\"source\":\"/no/such/model.gguf\"}",
                 SIZE_MAX);
    twb_expect_error(&r, 404, NULL);

    /* 411/400 for request framing the server cannot read, on a raw socket. */
    int fd = twb_connect(&s);
    static const char chunked[] =
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-edge\r\n"
        "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n0\r\n\r\n";
    twb_send_all(fd, chunked, sizeof chunked - 1);
    char *out = twb_read_until_close(fd, 10000, NULL);
    close(fd);
    assert_non_null(strstr(out, "HTTP/1.1 411"));
    assert_non_null(strstr(out, "length_required"));
    free(out);
    fd = twb_connect(&s);
    static const char bad_length[] =
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-edge\r\n"
        "Content-Length: 12abc\r\n\r\n{}";
    twb_send_all(fd, bad_length, sizeof bad_length - 1);
    out = twb_read_until_close(fd, 10000, NULL);
    close(fd);
    assert_non_null(strstr(out, "HTTP/1.1 400"));
    assert_non_null(strstr(out, "invalid_content_length"));
    free(out);

    /* 503 once the engine is gone, for plain and streamed requests. It is
     * killed: a clean stop while the bridge's probe calls in is a separate
     * matter (tokenwired's shutdown). */
    twb_kill_engine(&s);
    for (int i = 0; i < 100; i++) {
        r = twb_http(&s, "GET", "/health", NULL, 0);
        free(r.body);
        if (r.status == 503)
            break;
        usleep(50000);
    }
    r = twb_http(&s, "POST", "/v1/chat/completions",
                 "{\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                 SIZE_MAX);
    twb_expect_error(&r, 503, "engine_unavailable");
    r = twb_http(&s, "POST", "/tokenize", "{\"prompt\":\"x\"}", SIZE_MAX);
    twb_expect_error(&r, 503, "engine_unavailable");
    twb_stop(&s);
}

/* The engine wants a key the bridge does not have: the caller's request is
 * fine, so the answer is a server error, not a 401. */
static void test_engine_refuses_bridge(void **state)
{
    (void)state;
    twb_service s;
    twb_init(&s);
    static const char *const engine_flags[] = {"--api-key", "engine-secret", NULL};
    twb_start_engine(&s, model_path, engine_flags);
    twb_start_bridge(&s, NULL, NULL);
    /* The probe counts any answer as "up". */
    twb_result r = {0};
    for (int i = 0; i < 600; i++) {
        r = twb_http(&s, "GET", "/v1/models", NULL, 0);
        if (r.status == 500)
            break;
        free(r.body);
        r.body = NULL;
        usleep(50000);
    }
    twb_expect_error(&r, 500, "engine_auth");
    r = twb_http(&s, "POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":1}",
                 SIZE_MAX);
    twb_expect_error(&r, 500, "engine_auth");
    twb_stop(&s);
}

/* Starts a request whose body never finishes; returns the socket. */
static int stall_body(const twb_service *s)
{
    int fd = twb_connect(s);
    static const char half[] = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                               "Content-Type: application/json\r\nContent-Length: 200\r\n\r\n"
                               "{\"prompt\":\"def";
    twb_send_all(fd, half, sizeof half - 1);
    return fd;
}

static void test_slow_clients_and_overload(void **state)
{
    (void)state;
    twb_service s;
    twb_init(&s);
    static const char *const engine_flags[] = {"--max-concurrent", "1", NULL};
    twb_start_engine(&s, model_path, engine_flags);
    static const char *const flags[] = {"--workers", "2", "--queue", "0",
                                        "--read-timeout-ms", "1500", NULL};
    twb_start_bridge(&s, NULL, flags);
    twb_wait_ready(&s);

    /* One stalled body holds one worker; the other keeps serving. */
    uint64_t t0 = twb_now_ms();
    int slow = stall_body(&s);
    usleep(200000);
    twb_result r = twb_http(&s, "POST", "/v1/completions",
                            "{\"prompt\":\"def f():\",\"max_tokens\":2}", SIZE_MAX);
    assert_int_equal(r.status, 200);
    free(r.body);
    /* The stalled client is dropped after the read timeout. */
    char *out = twb_read_until_close(slow, 10000, NULL);
    uint64_t dt = twb_now_ms() - t0;
    close(slow);
    free(out);
    printf("stalled body dropped after %llu ms\n", (unsigned long long)dt);
    assert_true(dt >= 1300 && dt < 6000);

    /* The engine full (--max-concurrent 1, one long stream running): the
     * next generation gets 429 with the engine's reason. */
    static const char long_body[] =
        "{\"prompt\":\"def f():\",\"max_tokens\":3000,\"ignore_eos\":true,\"stream\":true}";
    char head[256];
    snprintf(head, sizeof head,
             "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n",
             sizeof long_body - 1);
    int busy = twb_connect(&s);
    twb_send_all(busy, head, strlen(head));
    twb_send_all(busy, long_body, sizeof long_body - 1);
    char first[64];
    assert_true(recv(busy, first, sizeof first, 0) > 0);
    r = twb_http(&s, "POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":1}",
                 SIZE_MAX);
    twb_expect_error(&r, 429, "rate_limit_exceeded");
    close(busy);

    /* Headers past the server's limit never reach a handler: the
     * connection is refused (431, 400 or closed), and serving goes on. */
    size_t big = 64 * 1024;
    char *huge = malloc(big + 128);
    assert_non_null(huge);
    int n = snprintf(huge, 128, "GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: ");
    memset(huge + n, 'a', big);
    memcpy(huge + n + big, "\r\n\r\n", 4);
    int fd = twb_connect(&s);
    twb_send_all(fd, huge, (size_t)n + big + 4);
    out = twb_read_until_close(fd, 10000, NULL);
    close(fd);
    free(huge);
    assert_true(out[0] == '\0' || strstr(out, "HTTP/1.1 431") || strstr(out, "HTTP/1.1 400"));
    assert_null(strstr(out, "HTTP/1.1 200"));
    free(out);
    /* The cancelled stream above may still hold the engine's only slot or a
     * bridge worker for a moment (429); serving must resume, not at once. */
    for (int i = 0;; i++) {
        r = twb_http(&s, "GET", "/health", NULL, 0);
        if (r.status == 200 || i == 100)
            break;
        free(r.body);
        usleep(100 * 1000);
    }
    assert_int_equal(r.status, 200);
    free(r.body);

    twb_stop(&s);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_every_endpoint, twb_teardown),
        cmocka_unit_test_teardown(test_engine_refuses_bridge, twb_teardown),
        cmocka_unit_test_teardown(test_slow_clients_and_overload, twb_teardown),
    };
    return twb_main(argc, argv, &model_path, tests, sizeof tests / sizeof tests[0]);
}
