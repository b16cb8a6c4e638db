/* The real tokenwired and tokenwire-bridge on free loopback ports, spoken to
 * over HTTP with libcurl: errors in OpenAI's shape, authentication, 503 while
 * the engine is away and recovery when it comes back, and generation through
 * both the plain and the streaming path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "http_client.h"
#include "proc_fixture.h"
#include "test_support.h"

static char bridge_bin[1024], engine_bin[1024];

static bool file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

typedef tw_test_http_result http_result;

static http_result post(int port, const char *path, const char *body, const char *key)
{
    return tw_test_http("POST", port, path, body, strlen(body), key);
}

static http_result get(int port, const char *path, const char *key)
{
    return tw_test_http("GET", port, path, NULL, 0, key);
}

/* Stops a child and checks that it exited cleanly (sanitizers report
 * through a non-zero status). */
static void stop(pid_t pid, const char *log_path)
{
    tw_test_stop(pid, 10000, log_path);
}

/* Checks an OpenAI error body: {"error":{"message","type","param","code"}}. */
static void expect_error(http_result *r, long status, const char *code)
{
    if (r->status != status)
        fail_msg("status %ld, expected %ld: %s", r->status, status, r->body);
    json_t *j = json_loads(r->body, 0, NULL);
    assert_non_null(j);
    json_t *e = json_object_get(j, "error");
    assert_true(json_is_object(e));
    assert_true(json_is_string(json_object_get(e, "message")));
    assert_true(json_is_string(json_object_get(e, "type")));
    assert_non_null(json_object_get(e, "param"));
    json_t *c = json_object_get(e, "code");
    if (code)
        assert_string_equal(json_string_value(c), code);
    json_decref(j);
    free(r->body);
    r->body = NULL;
}

typedef struct health_probe {
    int port;
    long status; /* the status to wait for; 0: any answer at all */
} health_probe;

static bool health_answers(void *user)
{
    const health_probe *h = user;
    http_result r = get(h->port, "/health", NULL);
    free(r.body);
    return h->status ? r.status == h->status : r.status != 0;
}

/* Polls GET /health until it answers `status` (or fails after ~20 s). */
static void wait_health(int port, long status)
{
    health_probe h = {port, status};
    tw_test_wait_ready(0, health_answers, &h, 20000, "/health", NULL);
}

typedef struct procs {
    char *dir;
    char bridge_log[1200], engine_log[1200];
    int http, rpc, pub;
    pid_t bridge, engine;
} procs;

static void start_engine(procs *p, const char *model)
{
    char listen[64], publish[64];
    snprintf(listen, sizeof listen, "tcp://127.0.0.1:%d", p->rpc);
    snprintf(publish, sizeof publish, "tcp://127.0.0.1:%d", p->pub);
    char *argv[] = {engine_bin,       "--listen", listen, "--publish", publish,
                    model ? "--model" : NULL, (char *)model, NULL};
    tw_test_spawn_opts o = {.log_path = p->engine_log};
    p->engine = tw_test_spawn((const char *const *)argv, &o);
}

static void start_bridge(procs *p, const char *key)
{
    char listen[64], engine[64], pub[64];
    snprintf(listen, sizeof listen, "http://127.0.0.1:%d", p->http);
    snprintf(engine, sizeof engine, "tcp://127.0.0.1:%d", p->rpc);
    snprintf(pub, sizeof pub, "tcp://127.0.0.1:%d", p->pub);
    char *argv[] = {bridge_bin, "--listen", listen, "--engine", engine, "--engine-pub", pub,
                    "--max-body-bytes", "4096", "--probe-interval-ms", "100", "--workers",
                    "4", key ? "--api-key" : NULL, (char *)key, NULL};
    tw_test_spawn_opts o = {.log_path = p->bridge_log};
    p->bridge = tw_test_spawn((const char *const *)argv, &o);
    /* The bridge answers at once (503 without an engine). */
    health_probe h = {p->http, 0};
    tw_test_wait_ready(p->bridge, health_answers, &h, 10000, "tokenwire-bridge", p->bridge_log);
}

static void procs_init(procs *p)
{
    memset(p, 0, sizeof *p);
    p->dir = tw_test_mkdtemp();
    snprintf(p->bridge_log, sizeof p->bridge_log, "%s/bridge.log", p->dir);
    snprintf(p->engine_log, sizeof p->engine_log, "%s/engine.log", p->dir);
    p->http = tw_test_free_port();
    p->rpc = tw_test_free_port();
    p->pub = tw_test_free_port();
}

static void procs_fini(procs *p)
{
    if (p->bridge)
        stop(p->bridge, p->bridge_log);
    if (p->engine)
        stop(p->engine, p->engine_log);
    tw_test_rmtree(p->dir);
    free(p->dir);
}

static void test_errors_auth_and_engine_restart(void **state)
{
    (void)state;
    procs p;
    procs_init(&p);
    start_bridge(&p, "sk-test");

    /* No engine yet: 503 in OpenAI's shape, right away. */
    http_result r = get(p.http, "/health", NULL);
    expect_error(&r, 503, "engine_unavailable");
    r = get(p.http, "/v1/models", "sk-test");
    expect_error(&r, 503, "engine_unavailable");
    /* Authentication comes first on every /v1 route. */
    r = get(p.http, "/v1/models", NULL);
    expect_error(&r, 401, NULL);
    r = get(p.http, "/v1/models", "sk-wrong");
    expect_error(&r, 401, "invalid_api_key");
    r = post(p.http, "/v1/chat/completions", "{}", NULL);
    expect_error(&r, 401, NULL);
    /* Routing errors. */
    r = get(p.http, "/v2/nothing", "sk-test");
    expect_error(&r, 404, "unknown_url");
    /* /v1/responses keeps nothing to retrieve */
    r = get(p.http, "/v1/responses/resp_abc", "sk-test");
    expect_error(&r, 404, "not_found");
    r = get(p.http, "/v1/responses", "sk-test");
    expect_error(&r, 405, "method_not_allowed");
    r = tw_test_http("DELETE", p.http, "/v1/models", NULL, 0, "sk-test");
    expect_error(&r, 405, "method_not_allowed");
    r = get(p.http, "/v1/chat/completions", "sk-test");
    expect_error(&r, 405, "method_not_allowed");
    /* Body limits and validation happen before the engine is asked. */
    char *big = malloc(8192);
    memset(big, ' ', 8191);
    big[0] = '{';
    big[8190] = '}';
    big[8191] = '\0';
    r = post(p.http, "/v1/completions", big, "sk-test");
    expect_error(&r, 413, "request_too_large");
    free(big);
    r = post(p.http, "/v1/chat/completions", "{\"messages\":", "sk-test");
    expect_error(&r, 400, "invalid_json");
    r = post(p.http, "/v1/chat/completions",
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":21,"
             "\"logprobs\":true}",
             "sk-test");
    expect_error(&r, 400, "invalid_value");
    /* A valid request still needs the engine. */
    r = post(p.http, "/v1/completions", "{\"prompt\":[1,2]}", "sk-test");
    expect_error(&r, 503, "engine_unavailable");

    if (!file_exists(engine_bin)) {
        print_message("tokenwired not built: skipping the engine restart part\n");
        procs_fini(&p);
        return;
    }
    /* The engine comes up: the bridge notices by itself. */
    start_engine(&p, NULL);
    wait_health(p.http, 200);
    r = get(p.http, "/v1/models", "sk-test");
    assert_int_equal(r.status, 200);
    json_t *j = json_loads(r.body, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(j, "object")), "list");
    assert_true(json_is_array(json_object_get(j, "data")));
    json_decref(j);
    free(r.body);
    r = get(p.http, "/v1/models/no-such-model", "sk-test");
    expect_error(&r, 404, "model_not_found");
    r = get(p.http, "/metrics", "sk-test");
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "tokenwire_engine_up 1"));
    /* the engine's counters come through the wire, the newest included */
    assert_non_null(strstr(r.body, "\ntokenwire_engine_cached_tokens_shared_total 0\n"));
    assert_non_null(strstr(r.body, "tokenwire_bridge_http_requests_total{route=\"health\""));
    free(r.body);

    /* It goes away: 503 again; it restarts: 200 again. */
    stop(p.engine, p.engine_log);
    p.engine = 0;
    wait_health(p.http, 503);
    r = get(p.http, "/v1/models", "sk-test");
    expect_error(&r, 503, "engine_unavailable");
    start_engine(&p, NULL);
    wait_health(p.http, 200);
    procs_fini(&p);
}

/* Collects the token ids of a streamed completion and checks the event
 * sequence: chunks, a usage chunk, then [DONE]. */
static void parse_stream(const char *body, json_t *ids, json_t *logprobs, char *finish,
                         bool *usage_seen, bool *done)
{
    const char *p = body;
    *done = false;
    *usage_seen = false;
    while ((p = strstr(p, "data: ")) != NULL) {
        p += 6;
        const char *end = strstr(p, "\n\n");
        assert_non_null(end);
        if (strncmp(p, "[DONE]", 6) == 0) {
            *done = true;
            assert_string_equal(end + 2, "");
            break;
        }
        json_error_t jerr;
        json_t *ev = json_loadb(p, (size_t)(end - p), 0, &jerr);
        if (!ev)
            fail_msg("bad event: %.*s", (int)(end - p), p);
        assert_string_equal(json_string_value(json_object_get(ev, "object")), "text_completion");
        json_t *choices = json_object_get(ev, "choices");
        if (json_array_size(choices) == 0) {
            assert_true(json_is_object(json_object_get(ev, "usage")));
            *usage_seen = true;
        } else {
            json_t *ch = json_array_get(choices, 0);
            json_t *t = json_object_get(ch, "token_ids");
            size_t i;
            json_t *v;
            json_array_foreach(t, i, v) json_array_append(ids, v);
            json_t *lp = json_object_get(json_object_get(ch, "logprobs"), "token_logprobs");
            if (logprobs)
                json_array_extend(logprobs, lp);
            if (json_is_string(json_object_get(ch, "finish_reason")))
                snprintf(finish, 32, "%s",
                         json_string_value(json_object_get(ch, "finish_reason")));
        }
        json_decref(ev);
        p = end + 2;
    }
}

/* The greedy answer's log-probabilities, asked with three alternatives,
 * plain and streamed: one per token, the chosen token first among its
 * alternatives (greedy), every alternative named by its text, and the same
 * numbers both ways. */
static void check_logprobs(int port, const char *prompt, const json_t *ids)
{
    const size_t n = json_array_size(ids);
    char body[4096];
    snprintf(body, sizeof body,
             "{\"model\":\"qwen2\",\"prompt\":%s,\"max_tokens\":%zu,\"temperature\":0,"
             "\"logprobs\":3}",
             prompt, n);
    http_result r = post(port, "/v1/completions", body, NULL);
    if (r.status != 200)
        fail_msg("completion with logprobs: %ld %s", r.status, r.body);
    json_t *j = json_loads(r.body, 0, NULL);
    assert_non_null(j);
    json_t *lp = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "logprobs");
    json_t *tokens = json_object_get(lp, "tokens");
    json_t *values = json_object_get(lp, "token_logprobs");
    json_t *tops = json_object_get(lp, "top_logprobs");
    if (json_array_size(tokens) != n || json_array_size(values) != n ||
        json_array_size(tops) != n || json_array_size(json_object_get(lp, "text_offset")) != n)
        fail_msg("logprobs of %zu tokens: %s", n, r.body);
    for (size_t i = 0; i < n; i++) {
        const double v = json_real_value(json_array_get(values, i));
        json_t *alts = json_array_get(tops, i);
        assert_true(isfinite(v) && v <= 0.0);
        if (json_object_size(alts) != 3)
            fail_msg("token %zu: %s", i, r.body);
        const char *tok = json_string_value(json_array_get(tokens, i));
        assert_non_null(tok);
        json_t *own = json_object_get(alts, tok);
        if (!own)
            fail_msg("token %zu (\"%s\") is not among its alternatives: %s", i, tok, r.body);
        assert_true(json_real_value(own) == v);
        const char *key;
        json_t *alt;
        json_object_foreach(alts, key, alt) assert_true(json_real_value(alt) <= v);
    }
    free(r.body);

    snprintf(body, sizeof body,
             "{\"model\":\"qwen2\",\"prompt\":%s,\"max_tokens\":%zu,\"temperature\":0,"
             "\"logprobs\":3,\"stream\":true,\"return_token_ids\":true}",
             prompt, n);
    r = post(port, "/v1/completions", body, NULL);
    assert_int_equal(r.status, 200);
    json_t *sids = json_array(), *svalues = json_array();
    char finish[32] = "";
    bool usage_seen, done;
    parse_stream(r.body, sids, svalues, finish, &usage_seen, &done);
    assert_true(done);
    assert_true(json_equal(sids, ids));
    assert_true(json_equal(svalues, values));
    json_decref(sids);
    json_decref(svalues);
    free(r.body);
    json_decref(j);
}

static void test_generation_plain_and_streamed(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    if (!file_exists(engine_bin)) {
        print_message("SKIPPED (tokenwired not built)\n");
        skip();
        return;
    }
    char model[1100], golden[1100];
    snprintf(model, sizeof model, "%s/golden/qwen2", shared);
    snprintf(golden, sizeof golden, "%s/golden/qwen2/golden.json", shared);
    json_t *g = json_load_file(golden, 0, NULL);
    assert_non_null(g);
    procs p;
    procs_init(&p);
    start_engine(&p, model);
    start_bridge(&p, NULL);
    wait_health(p.http, 200);

    /* The golden prompt, greedy: the answer must be the reference ids. */
    char *prompt = json_dumps(json_object_get(g, "input_ids"), JSON_COMPACT);
    char body[4096];
    const int n = 8;
    snprintf(body, sizeof body,
             "{\"model\":\"qwen2\",\"prompt\":%s,\"max_tokens\":%d,\"temperature\":0,"
             "\"return_token_ids\":true}",
             prompt, n);
    http_result r = post(p.http, "/v1/completions", body, NULL);
    if (r.status != 200)
        fail_msg("completion: %ld %s", r.status, r.body);
    json_t *j = json_loads(r.body, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "object")), "text_completion");
    assert_int_equal(strncmp(json_string_value(json_object_get(j, "id")), "cmpl-", 5), 0);
    assert_string_equal(json_string_value(json_object_get(j, "model")), "qwen2");
    json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(ch, "finish_reason")), "length");
    json_t *ids = json_object_get(ch, "token_ids");
    assert_int_equal(json_array_size(ids), n);
    json_t *greedy = json_object_get(g, "greedy_ids");
    for (int i = 0; i < n; i++)
        assert_int_equal(json_integer_value(json_array_get(ids, (size_t)i)),
                         json_integer_value(json_array_get(greedy, (size_t)i)));
    json_t *usage = json_object_get(j, "usage");
    assert_int_equal(json_integer_value(json_object_get(usage, "completion_tokens")), n);
    assert_int_equal(json_integer_value(json_object_get(usage, "prompt_tokens")),
                     json_array_size(json_object_get(g, "input_ids")));
    free(r.body);

    /* The same request streamed gives the same tokens, in order. */
    snprintf(body, sizeof body,
             "{\"model\":\"qwen2\",\"prompt\":%s,\"max_tokens\":%d,\"temperature\":0,"
             "\"return_token_ids\":true,\"stream\":true,\"stream_options\":{\"include_usage\":"
             "true}}",
             prompt, n);
    r = post(p.http, "/v1/completions", body, NULL);
    assert_int_equal(r.status, 200);
    json_t *sids = json_array();
    char finish[32] = "";
    bool usage_seen, done;
    parse_stream(r.body, sids, NULL, finish, &usage_seen, &done);
    assert_true(done);
    assert_true(usage_seen);
    assert_string_equal(finish, "length");
    assert_true(json_equal(sids, ids));
    json_decref(sids);
    free(r.body);
    check_logprobs(p.http, prompt, ids);
    json_decref(j);

    /* Engine-side refusals come back in OpenAI's shape. */
    r = post(p.http, "/v1/completions", "{\"model\":\"nope\",\"prompt\":[1,2]}", NULL);
    expect_error(&r, 404, "model_not_found");
    r = post(p.http, "/v1/completions", "{\"model\":\"nope\",\"prompt\":[1,2],\"stream\":true}",
             NULL);
    expect_error(&r, 404, "model_not_found");
    free(prompt);
    json_decref(g);
    procs_fini(&p);
}

int main(void)
{
    const char *build = getenv("TW_BUILD_DIR");
    if (!build) {
        printf("SKIPPED (TW_BUILD_DIR not set)\n");
        return 0;
    }
    snprintf(bridge_bin, sizeof bridge_bin, "%s/server/bridge/tokenwire-bridge", build);
    snprintf(engine_bin, sizeof engine_bin, "%s/server/engine/tokenwired", build);
    if (!file_exists(bridge_bin)) {
        printf("SKIPPED (tokenwire-bridge not built)\n");
        return 0;
    }
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_errors_auth_and_engine_restart, tw_test_proc_teardown),
        cmocka_unit_test_teardown(test_generation_plain_and_streamed, tw_test_proc_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
