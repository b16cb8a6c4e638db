/* The whole service on the shipped default model: the real tokenwired and
 * tokenwire-bridge on free loopback ports, spoken to over HTTP the way an
 * OpenAI client does and through the tokenwire CLI.
 *
 *   test_service MODEL.gguf REFERENCE.json TOKENIZER_CASES.json [--draft DRAFT.gguf]
 *
 * With --draft the engine decodes speculatively with the draft model, which
 * must not change a single token of a greedy answer, so every check is the
 * same (skipped while tokenwired has no --draft option).
 *
 * At temperature 0 the shipped Q8_0 model answers the reference prompts
 * with exactly the tokens transformers produced (tests/e2e/test_greedy.c
 * checks that on the model alone), so the answers through the service are
 * compared with the reference text itself. Answers are kept short so that
 * every test runs in seconds under ASan. */
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

#include "service.h"
#include "test_support.h"

static const char *g_model, *g_reference, *g_cases, *g_draft;
static twt_service g_svc;
static json_t *g_ref;

#define SYSTEM "You are a helpful Python coding assistant."

/* ------------------------------------------------------------- helpers */

/* Reference answer i of the target model. */
static json_t *reference(size_t i)
{
    json_t *a = json_array_get(json_object_get(g_ref, "target"), i);
    assert_non_null(a);
    return a;
}

/* The reference text without its final <|im_end|>. */
static char *reference_answer(size_t i)
{
    const char *t = json_string_value(json_object_get(reference(i), "text"));
    assert_non_null(t);
    const char *end = strstr(t, "<|im_end|>");
    assert_non_null(end);
    return strndup(t, (size_t)(end - t));
}

/* A chat request for reference prompt i; thinking: 0 off, 1 on, -1 the
 * template's default (on). extra is spliced into the JSON object. */
static char *chat_body(size_t i, int thinking, unsigned max_tokens, bool stream, const char *extra)
{
    json_t *b = json_pack("{s:[{s:s,s:s},{s:s,s:O}],s:i,s:i,s:b}", "messages", "role", "system",
                          "content", SYSTEM, "role", "user", "content",
                          json_object_get(reference(i), "prompt"), "max_tokens", (int)max_tokens,
                          "temperature", 0, "stream", stream);
    assert_non_null(b);
    if (thinking >= 0)
        json_object_set_new(b, "chat_template_kwargs",
                            json_pack("{s:b}", "enable_thinking", thinking));
    if (stream)
        json_object_set_new(b, "stream_options", json_pack("{s:b}", "include_usage", 1));
    if (extra) {
        json_t *x = json_loads(extra, 0, NULL);
        assert_non_null(x);
        json_object_update(b, x);
        json_decref(x);
    }
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return s;
}

typedef struct answer {
    char *content, *reasoning; /* never NULL */
    char finish[32];
    json_int_t prompt_tokens, completion_tokens, total_tokens, reasoning_tokens;
} answer;

static void answer_free(answer *a)
{
    free(a->content);
    free(a->reasoning);
}

static json_int_t int_at(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        fail_msg("\"%s\" is not an integer", key);
    return json_integer_value(v);
}

static void read_usage(answer *a, const json_t *usage)
{
    assert_true(json_is_object(usage));
    a->prompt_tokens = int_at(usage, "prompt_tokens");
    a->completion_tokens = int_at(usage, "completion_tokens");
    a->total_tokens = int_at(usage, "total_tokens");
    a->reasoning_tokens = int_at(json_object_get(usage, "completion_tokens_details"),
                                 "reasoning_tokens");
    /* counts that hold whatever the model said */
    assert_int_equal(a->total_tokens, a->prompt_tokens + a->completion_tokens);
    assert_true(a->reasoning_tokens >= 0 && a->reasoning_tokens <= a->completion_tokens);
}

static answer chat(const char *body)
{
    json_t *j = twt_post_json(&g_svc, "/v1/chat/completions", body);
    assert_string_equal(json_string_value(json_object_get(j, "object")), "chat.completion");
    json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
    json_t *msg = json_object_get(ch, "message");
    assert_string_equal(json_string_value(json_object_get(msg, "role")), "assistant");
    answer a = {0};
    const char *c = json_string_value(json_object_get(msg, "content"));
    const char *r = json_string_value(json_object_get(msg, "reasoning_content"));
    a.content = strdup(c ? c : "");
    a.reasoning = strdup(r ? r : "");
    snprintf(a.finish, sizeof a.finish, "%s",
             json_string_value(json_object_get(ch, "finish_reason")));
    read_usage(&a, json_object_get(j, "usage"));
    json_decref(j);
    return a;
}

static void append(char **dst, const char *s)
{
    size_t n = strlen(*dst), m = strlen(s);
    char *p = realloc(*dst, n + m + 1);
    assert_non_null(p);
    memcpy(p + n, s, m + 1);
    *dst = p;
}

/* A streamed chat: the deltas concatenated, the finish reason of the last
 * choice chunk and the usage chunk; the stream must end with [DONE]. */
static answer chat_stream(const char *body)
{
    twt_http_result r = twt_post(&g_svc, "/v1/chat/completions", body);
    if (r.status != 200)
        fail_msg("stream: %ld %s", r.status, r.body);
    answer a = {0};
    a.content = calloc(1, 1);
    a.reasoning = calloc(1, 1);
    bool done = false, usage = false;
    const char *p = r.body;
    while ((p = strstr(p, "data: ")) != NULL) {
        p += 6;
        const char *end = strstr(p, "\n\n");
        assert_non_null(end);
        if (strncmp(p, "[DONE]", 6) == 0) {
            done = true;
            assert_string_equal(end + 2, "");
            break;
        }
        json_t *ev = json_loadb(p, (size_t)(end - p), 0, NULL);
        if (!ev)
            fail_msg("bad event: %.*s", (int)(end - p), p);
        assert_string_equal(json_string_value(json_object_get(ev, "object")),
                            "chat.completion.chunk");
        json_t *choices = json_object_get(ev, "choices");
        if (json_array_size(choices) == 0) {
            read_usage(&a, json_object_get(ev, "usage"));
            usage = true;
        } else {
            json_t *ch = json_array_get(choices, 0);
            json_t *d = json_object_get(ch, "delta");
            const char *c = json_string_value(json_object_get(d, "content"));
            const char *rc = json_string_value(json_object_get(d, "reasoning_content"));
            if (c)
                append(&a.content, c);
            if (rc)
                append(&a.reasoning, rc);
            if (json_is_string(json_object_get(ch, "finish_reason")))
                snprintf(a.finish, sizeof a.finish, "%s",
                         json_string_value(json_object_get(ch, "finish_reason")));
        }
        json_decref(ev);
        p = end + 2;
    }
    assert_true(done);
    assert_true(usage);
    free(r.body);
    return a;
}

static void expect_same(const answer *plain, const answer *streamed)
{
    assert_string_equal(streamed->content, plain->content);
    assert_string_equal(streamed->reasoning, plain->reasoning);
    assert_string_equal(streamed->finish, plain->finish);
    assert_int_equal(streamed->prompt_tokens, plain->prompt_tokens);
    assert_int_equal(streamed->completion_tokens, plain->completion_tokens);
    assert_int_equal(streamed->reasoning_tokens, plain->reasoning_tokens);
}

/* --------------------------------------------------------------- tests */

/* Thinking off: the prompt is exactly the reference prompt, so the answer is
 * transformers' answer, plain and streamed alike. */
static void test_chat_without_thinking_is_the_reference_answer(void **state)
{
    (void)state;
    for (size_t i = 0; i < 2; i++) {
        char *want = reference_answer(i);
        size_t n_prompt = json_array_size(json_object_get(reference(i), "prompt_ids"));
        size_t n_greedy = json_array_size(json_object_get(reference(i), "greedy_ids"));
        char *body = chat_body(i, 0, 64, false, NULL);
        answer a = chat(body);
        assert_string_equal(a.content, want);
        assert_true(twt_looks_like_python(a.content));
        assert_string_equal(a.reasoning, "");
        assert_string_equal(a.finish, "stop");
        assert_int_equal(a.prompt_tokens, (json_int_t)n_prompt);
        assert_int_equal(a.reasoning_tokens, 0);
        /* the answer's tokens, with or without the closing <|im_end|> */
        assert_true(a.completion_tokens == (json_int_t)n_greedy ||
                    a.completion_tokens + 1 == (json_int_t)n_greedy);
        free(body);

        body = chat_body(i, 0, 64, true, NULL);
        answer s = chat_stream(body);
        expect_same(&a, &s);
        answer_free(&s);
        answer_free(&a);
        free(body);
        free(want);
    }
}

/* Thinking on (the template's default, and asked for explicitly, which
 * must be the same): the reasoning comes separately, the content is the
 * Python answer without any think markers, and streaming gives the same
 * split. */
static void test_chat_with_thinking_separates_reasoning(void **state)
{
    (void)state;
    char *body = chat_body(1, -1, 64, false, NULL);
    answer a = chat(body);
    free(body);
    assert_true(strlen(a.reasoning) > 0);
    assert_true(a.reasoning_tokens > 0);
    assert_true(a.completion_tokens > a.reasoning_tokens);
    assert_true(twt_looks_like_python(a.content));
    assert_null(strstr(a.content, "<think>"));
    assert_null(strstr(a.content, "</think>"));
    assert_null(strstr(a.reasoning, "think>"));
    assert_null(strstr(a.reasoning, "```"));
    /* the same prompt without the empty think block: 4 tokens fewer */
    size_t n_prompt = json_array_size(json_object_get(reference(1), "prompt_ids"));
    assert_int_equal(a.prompt_tokens, (json_int_t)n_prompt - 4);

    body = chat_body(1, 1, 64, false, NULL);
    answer on = chat(body);
    free(body);
    expect_same(&a, &on);
    answer_free(&on);

    body = chat_body(1, -1, 64, true, NULL);
    answer s = chat_stream(body);
    free(body);
    expect_same(&a, &s);
    answer_free(&s);
    answer_free(&a);
}

/* A stop string ends the answer before it, with finish_reason "stop". */
static void test_stop_string(void **state)
{
    (void)state;
    char *full = reference_answer(1);
    const char *cut = strstr(full, "\"\"\"");
    assert_non_null(cut);
    char *want = strndup(full, (size_t)(cut - full));
    for (int stream = 0; stream <= 1; stream++) {
        char *body = chat_body(1, 0, 64, stream, "{\"stop\":[\"\\\"\\\"\\\"\",\"never\"]}");
        answer a = stream ? chat_stream(body) : chat(body);
        assert_string_equal(a.finish, "stop");
        assert_string_equal(a.content, want);
        assert_null(strstr(a.content, "\"\"\""));
        answer_free(&a);
        free(body);
    }
    free(want);
    free(full);
}

/* max_tokens ends the answer with finish_reason "length" after exactly
 * that many tokens. */
static void test_max_tokens(void **state)
{
    (void)state;
    char *full = reference_answer(0);
    for (int stream = 0; stream <= 1; stream++) {
        char *body = chat_body(0, 0, 5, stream, NULL);
        answer a = stream ? chat_stream(body) : chat(body);
        assert_string_equal(a.finish, "length");
        assert_int_equal(a.completion_tokens, 5);
        assert_true(strlen(a.content) > 0);
        assert_int_equal(strncmp(full, a.content, strlen(a.content)), 0);
        answer_free(&a);
        free(body);
    }
    free(full);
}

/* max_completion_tokens counts reasoning too, as in OpenAI's API: with
 * thinking on, 6 tokens end inside the thinking block with "length" and 6
 * completion tokens, all of them reasoning; max_tokens alone bounds only
 * the answer, so the same request with max_tokens 6 reasons longer. */
static void test_max_completion_tokens_counts_reasoning(void **state)
{
    (void)state;
    for (int stream = 0; stream <= 1; stream++) {
        char *body = chat_body(1, 1, 200, stream, "{\"max_completion_tokens\":6}");
        answer a = stream ? chat_stream(body) : chat(body);
        assert_string_equal(a.finish, "length");
        assert_int_equal(a.completion_tokens, 6);
        assert_int_equal(a.reasoning_tokens, 5); /* the opening tag is not reasoning */
        assert_string_equal(a.content, "");
        answer_free(&a);
        free(body);
    }
    char *body = chat_body(1, 1, 6, false, NULL);
    answer a = chat(body);
    assert_true(a.reasoning_tokens > 6);
    answer_free(&a);
    free(body);
}

/* /tokenize gives Hugging Face's ids for Python source, /detokenize gives
 * the source back. */
static void test_tokenize_detokenize(void **state)
{
    (void)state;
    json_t *cases = json_load_file(g_cases, 0, NULL);
    assert_non_null(cases);
    size_t checked = 0, i;
    json_t *c;
    json_array_foreach(cases, i, c)
    {
        const char *text = json_string_value(json_object_get(c, "text"));
        /* Python source only: the tokenize endpoint reads control tokens as text */
        if (!text || !strstr(text, "def ") || strchr(text, '<'))
            continue;
        json_t *req = json_pack("{s:s}", "prompt", text);
        char *body = json_dumps(req, JSON_COMPACT);
        json_t *tok = twt_post_json(&g_svc, "/tokenize", body);
        json_t *ids = json_object_get(tok, "tokens");
        assert_true(json_equal(ids, json_object_get(c, "ids")));
        assert_int_equal(int_at(tok, "count"), (json_int_t)json_array_size(ids));
        free(body);
        json_decref(req);

        req = json_pack("{s:O}", "tokens", ids);
        body = json_dumps(req, JSON_COMPACT);
        json_t *det = twt_post_json(&g_svc, "/detokenize", body);
        assert_string_equal(json_string_value(json_object_get(det, "prompt")), text);
        json_decref(det);
        free(body);
        json_decref(req);
        json_decref(tok);
        checked++;
    }
    assert_true(checked >= 3);
    json_decref(cases);
}

static void expect_no_think_markers(const char *what, const char *out)
{
    if (strstr(out, "<think>") || strstr(out, "</think>"))
        fail_msg("%s printed think markers on stdout:\n%s", what, out);
}

/* The CLI asked for a Python function answers with Python. */
static void test_cli_chat_and_generate(void **state)
{
    (void)state;
    int status;
    const char *prompt = json_string_value(json_object_get(reference(1), "prompt"));
    const char *chat_args[] = {"chat",   "--system",      SYSTEM, "--max-tokens",
                               "80",     "--temperature", "0",    prompt,
                               NULL};
    char *out = twt_run_cli(&g_svc, chat_args, &status, NULL);
    assert_int_equal(status, 0);
    if (!twt_looks_like_python(out))
        fail_msg("tokenwire chat printed:\n%s", out);
    expect_no_think_markers("tokenwire chat", out);
    free(out);

    const char *stream_args[] = {"chat", "--stream", "--max-tokens", "64", "--temperature",
                                 "0",    prompt,     NULL};
    out = twt_run_cli(&g_svc, stream_args, &status, NULL);
    assert_int_equal(status, 0);
    if (!twt_looks_like_python(out))
        fail_msg("tokenwire chat --stream printed:\n%s", out);
    expect_no_think_markers("tokenwire chat --stream", out);
    /* Without speculation </think> comes in a chunk of its own, with an id
     * and no text: its id must not be printed into the answer. */
    if (strstr(out, "8193"))
        fail_msg("tokenwire chat --stream printed the id of </think>:\n%s", out);
    free(out);

    const char *gen_args[] = {"generate", "--max-tokens", "40", "--temperature", "0",
                              "def fibonacci(n):\n", NULL};
    out = twt_run_cli(&g_svc, gen_args, &status, NULL);
    assert_int_equal(status, 0);
    if (!strstr(out, "return") && !strstr(out, "    "))
        fail_msg("tokenwire generate printed:\n%s", out);
    free(out);
}

/* Asked without a system prompt the model reasons first. The CLI keeps the
 * reasoning off stdout (on stderr, without markers) and prints the same
 * thing whether it streams or not; --hide-reasoning drops it. */
static void test_cli_chat_reasoning_apart(void **state)
{
    (void)state;
    int status;
    const char *prompt = json_string_value(json_object_get(reference(1), "prompt"));
    const char *plain[] = {"chat", "--max-tokens", "48", "--temperature", "0", prompt, NULL};
    const char *streamed[] = {"chat",          "--stream", "--max-tokens", "48",
                              "--temperature", "0",        prompt,         NULL};
    const char *hidden[] = {"chat", "--hide-reasoning", "--max-tokens", "48",
                            "--temperature", "0", prompt, NULL};
    char *err_plain, *err_streamed, *err_hidden;
    char *out_plain = twt_run_cli(&g_svc, plain, &status, &err_plain);
    assert_int_equal(status, 0);
    char *out_streamed = twt_run_cli(&g_svc, streamed, &status, &err_streamed);
    assert_int_equal(status, 0);
    char *out_hidden = twt_run_cli(&g_svc, hidden, &status, &err_hidden);
    assert_int_equal(status, 0);

    expect_no_think_markers("tokenwire chat", out_plain);
    expect_no_think_markers("tokenwire chat --stream", out_streamed);
    expect_no_think_markers("tokenwire chat --hide-reasoning", out_hidden);
    if (!*err_plain || strstr(err_plain, "<think>") || strstr(err_plain, "</think>"))
        fail_msg("tokenwire chat: reasoning on stderr:\n%s", err_plain);
    assert_string_equal(out_streamed, out_plain);
    assert_string_equal(err_streamed, err_plain);
    assert_string_equal(out_hidden, out_plain);
    assert_string_equal(err_hidden, "");
    /* --max-total-tokens counts the reasoning: 4 tokens end inside it, so
     * there is no answer and the reasoning printed is where the full one
     * begins */
    const char *capped[] = {"chat", "--max-total-tokens", "4", "--temperature", "0", prompt,
                            NULL};
    char *err_capped;
    char *out_capped = twt_run_cli(&g_svc, capped, &status, &err_capped);
    assert_int_equal(status, 0);
    if (strspn(out_capped, "\n") != strlen(out_capped))
        fail_msg("--max-total-tokens 4 printed an answer: '%s'", out_capped);
    size_t n_capped = strcspn(err_capped, "\n");
    if (n_capped == 0 || strncmp(err_capped, err_plain, n_capped) != 0)
        fail_msg("--max-total-tokens 4: reasoning '%s' does not start '%s'", err_capped,
                 err_plain);
    free(out_capped);
    free(err_capped);
    free(out_plain);
    free(out_streamed);
    free(out_hidden);
    free(err_plain);
    free(err_streamed);
    free(err_hidden);
}

static int setup(void **state)
{
    (void)state;
    g_ref = json_load_file(g_reference, 0, NULL);
    if (!g_ref)
        return -1;
    const char *extra[] = {"--draft", g_draft, NULL};
    twt_service_start(&g_svc, g_model, g_draft ? extra : NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    twt_service_stop(&g_svc);
    json_decref(g_ref);
    return 0;
}

/* Whether this tokenwired lists "--draft PATH" in its help. */
static bool engine_has_draft_option(void)
{
    char prog[1024], cmd[1100], line[512];
    const char *build = getenv("TW_BUILD_DIR");
    if (!build)
        return false;
    snprintf(prog, sizeof prog, "%s/server/engine/tokenwired", build);
    snprintf(cmd, sizeof cmd, "'%s' --help 2>&1", prog);
    FILE *p = popen(cmd, "r");
    if (!p)
        return false;
    bool found = false;
    while (fgets(line, sizeof line, p))
        found |= strstr(line, "  --draft ") != NULL;
    pclose(p);
    return found;
}

int main(int argc, char **argv)
{
    if (argc == 6 && !strcmp(argv[4], "--draft")) {
        g_draft = argv[5];
    } else if (argc != 4) {
        fprintf(stderr, "usage: test_service MODEL.gguf REFERENCE.json TOKENIZER_CASES.json "
                        "[--draft DRAFT.gguf]\n");
        return 2;
    }
    g_model = argv[1];
    g_reference = argv[2];
    g_cases = argv[3];
    if (g_draft && !engine_has_draft_option()) {
        printf("SKIPPED (tokenwired has no --draft option yet)\n");
        return 0;
    }
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_without_thinking_is_the_reference_answer),
        cmocka_unit_test(test_chat_with_thinking_separates_reasoning),
        cmocka_unit_test(test_stop_string),
        cmocka_unit_test(test_max_tokens),
        cmocka_unit_test(test_max_completion_tokens_counts_reasoning),
        cmocka_unit_test(test_tokenize_detokenize),
        cmocka_unit_test(test_cli_chat_and_generate),
        cmocka_unit_test(test_cli_chat_reasoning_apart),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
