/* The bridge under load and under clients that leave: 64 streams at once
 * each arrive whole and equal to the same request answered without
 * streaming, and a client that hangs up mid-stream gets its sequence
 * cancelled in the engine at once.
 *
 * Arguments: the model to serve. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bridge_fixture.h"
#include "tokenwire/client.h"

#define N_STREAMS 64
#define N_PROMPTS 8
#define MAX_TOKENS 8

static const char *model_path;

static const char *const prompts[N_PROMPTS] = {
    "def add(a, b):",         "def is_prime(n):",      "class Stack:",
    "def fib(n):",            "import os\n\ndef main():", "def reverse(s):",
    "for i in range(10):",    "def read_file(path):",
};

/* What one answer consists of, streamed or not. */
typedef struct answer {
    json_t *ids;  /* token ids, in order */
    char text[4096];
    size_t text_len;
    char finish[32];
    long completion_tokens; /* from usage */
    bool done;              /* [DONE] arrived last */
    int events;
} answer;

static char *request_body(int p, bool stream)
{
    json_t *b = json_pack("{s:s, s:i, s:i, s:b, s:b}", "prompt", prompts[p], "max_tokens",
                          MAX_TOKENS, "temperature", 0, "return_token_ids", 1, "stream",
                          stream);
    if (stream)
        json_object_set_new(b, "stream_options", json_pack("{s:b}", "include_usage", 1));
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return s;
}

static void append_text(answer *a, const char *t)
{
    size_t n = strlen(t);
    assert_true(a->text_len + n < sizeof a->text);
    memcpy(a->text + a->text_len, t, n + 1);
    a->text_len += n;
}

/* Reads the whole SSE body of a streamed completion into a. Returns an
 * error message (static) or NULL; no cmocka asserts, so it may run on any
 * thread. */
static const char *parse_sse(const char *body, answer *a)
{
    a->ids = json_array();
    const char *p = body;
    while (*p) {
        if (a->done)
            return "data after [DONE]";
        if (strncmp(p, "data: ", 6) != 0)
            return "a line that is not a data event";
        p += 6;
        const char *end = strstr(p, "\n\n");
        if (!end)
            return "an event without its blank line";
        if ((size_t)(end - p) == 6 && strncmp(p, "[DONE]", 6) == 0) {
            a->done = true;
            p = end + 2;
            continue;
        }
        json_t *ev = json_loadb(p, (size_t)(end - p), 0, NULL);
        if (!ev)
            return "an event that is not JSON";
        a->events++;
        json_t *choices = json_object_get(ev, "choices");
        json_t *usage = json_object_get(ev, "usage");
        if (json_is_object(usage))
            a->completion_tokens =
                (long)json_integer_value(json_object_get(usage, "completion_tokens"));
        json_t *ch = json_array_get(choices, 0);
        if (ch) {
            json_t *t = json_object_get(ch, "text");
            if (json_is_string(t) && a->text_len + json_string_length(t) < sizeof a->text) {
                memcpy(a->text + a->text_len, json_string_value(t), json_string_length(t));
                a->text_len += json_string_length(t);
                a->text[a->text_len] = '\0';
            }
            size_t i;
            json_t *v;
            json_array_foreach(json_object_get(ch, "token_ids"), i, v)
                json_array_append(a->ids, v);
            json_t *f = json_object_get(ch, "finish_reason");
            if (json_is_string(f))
                snprintf(a->finish, sizeof a->finish, "%s", json_string_value(f));
        }
        json_decref(ev);
        p = end + 2;
    }
    return a->done ? NULL : "no [DONE] at the end";
}

typedef struct stream_job {
    const twb_service *s;
    int prompt;
    answer a;
    long status;
    const char *error;
} stream_job;

static void *stream_main(void *arg)
{
    stream_job *j = arg;
    char *body = request_body(j->prompt, true);
    twb_result r = twb_http(j->s, "POST", "/v1/completions", body, SIZE_MAX);
    free(body);
    j->status = r.status;
    if (r.status == 200)
        j->error = parse_sse(r.body, &j->a);
    else
        j->error = "HTTP status not 200";
    free(r.body);
    return NULL;
}

static void test_64_concurrent_streams(void **state)
{
    (void)state;
    twb_service s;
    twb_start(&s, model_path, NULL, NULL, NULL);

    /* The reference: each prompt answered once, without streaming. */
    answer ref[N_PROMPTS];
    memset(ref, 0, sizeof ref);
    for (int p = 0; p < N_PROMPTS; p++) {
        char *body = request_body(p, false);
        twb_result r = twb_http(&s, "POST", "/v1/completions", body, SIZE_MAX);
        free(body);
        if (r.status != 200)
            fail_msg("reference %d: %ld %s", p, r.status, r.body);
        json_t *j = json_loads(r.body, 0, NULL);
        assert_non_null(j);
        json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
        ref[p].ids = json_incref(json_object_get(ch, "token_ids"));
        append_text(&ref[p], json_string_value(json_object_get(ch, "text")));
        snprintf(ref[p].finish, sizeof ref[p].finish, "%s",
                 json_string_value(json_object_get(ch, "finish_reason")));
        ref[p].completion_tokens = (long)json_integer_value(
            json_object_get(json_object_get(j, "usage"), "completion_tokens"));
        assert_true(json_array_size(ref[p].ids) > 0);
        assert_int_equal((long)json_array_size(ref[p].ids), ref[p].completion_tokens);
        json_decref(j);
        free(r.body);
    }

    twb_stats before = twb_engine_stats(&s);
    static stream_job jobs[N_STREAMS];
    pthread_t threads[N_STREAMS];
    memset(jobs, 0, sizeof jobs);
    uint64_t t0 = twb_now_ms();
    for (int i = 0; i < N_STREAMS; i++) {
        jobs[i].s = &s;
        jobs[i].prompt = i % N_PROMPTS;
        assert_int_equal(pthread_create(&threads[i], NULL, stream_main, &jobs[i]), 0);
    }
    for (int i = 0; i < N_STREAMS; i++)
        pthread_join(threads[i], NULL);
    uint64_t dt = twb_now_ms() - t0;
    printf("%d streams of %d tokens in %llu ms\n", N_STREAMS, MAX_TOKENS,
           (unsigned long long)dt);

    for (int i = 0; i < N_STREAMS; i++) {
        stream_job *j = &jobs[i];
        const answer *want = &ref[j->prompt];
        if (j->error)
            fail_msg("stream %d: %s (status %ld)", i, j->error, j->status);
        /* No token lost, duplicated or reordered, and the text matches. */
        if (!json_equal(j->a.ids, want->ids)) {
            char *got = json_dumps(j->a.ids, JSON_COMPACT), *exp = json_dumps(want->ids, 0);
            fail_msg("stream %d token ids %s, expected %s", i, got, exp);
        }
        if (strcmp(j->a.text, want->text) != 0)
            fail_msg("stream %d text '%s', expected '%s'", i, j->a.text, want->text);
        assert_string_equal(j->a.finish, want->finish);
        assert_int_equal(j->a.completion_tokens, want->completion_tokens);
        json_decref(j->a.ids);
    }
    for (int p = 0; p < N_PROMPTS; p++)
        json_decref(ref[p].ids);

    /* The engine sends a request's final chunk just before it retires the
     * request, so its books may lag the last stream's end by a moment. */
    twb_stats after = twb_engine_stats(&s);
    for (uint64_t t1 = twb_now_ms(); after.running != 0 && twb_now_ms() - t1 < 5000;) {
        usleep(5000);
        after = twb_engine_stats(&s);
    }
    assert_int_equal(after.requests_total - before.requests_total, N_STREAMS);
    assert_int_equal(after.running, 0);
    twb_result m = twb_http(&s, "GET", "/metrics", NULL, 0);
    assert_int_equal(m.status, 200);
    assert_non_null(strstr(m.body, "tokenwire_bridge_streams_active 0"));
    assert_non_null(strstr(m.body, "tokenwire_bridge_streams_aborted_total 0"));
    free(m.body);
    twb_stop(&s);
}

/* Watches the engine's streams for the final chunk of one that was
 * cancelled. */
typedef struct watch_ctx {
    const twb_service *s;
    volatile bool cancelled_seen;
    volatile bool stop;
} watch_ctx;

static int on_watch(void *user, const Tokenwire__V1__StreamChunk *c)
{
    watch_ctx *w = user;
    if (c->has_finish_reason && c->finish_reason == TOKENWIRE__V1__FINISH_REASON__FINISH_CANCELLED)
        w->cancelled_seen = true;
    return w->cancelled_seen || w->stop;
}

static void *watch_main(void *arg)
{
    watch_ctx *w = arg;
    tw_client_opts o;
    tw_client_opts_init(&o);
    o.rpc_url = w->s->rpc_url;
    o.pub_url = w->s->pub_url;
    tw_client *c = NULL;
    tw_err err = {{0}};
    if (tw_client_open(&o, &c, &err) != TW_OK)
        return NULL;
    while (!w->cancelled_seen && !w->stop)
        tw_client_watch(c, on_watch, w, 200, &err);
    tw_client_close(c);
    return NULL;
}

static void test_disconnect_cancels(void **state)
{
    (void)state;
    twb_service s;
    twb_start(&s, model_path, NULL, NULL, NULL);

    watch_ctx w = {.s = &s};
    pthread_t watcher;
    assert_int_equal(pthread_create(&watcher, NULL, watch_main, &w), 0);
    usleep(300000); /* let the watcher's subscription reach the engine */

    /* A long answer (EOS ignored) that the client abandons after a few
     * events. */
    const int max_tokens = 3000;
    char body[512], head[256];
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Write a long Python module.\"}],"
             "\"max_tokens\":%d,\"ignore_eos\":true,\"stream\":true}",
             max_tokens);
    snprintf(head, sizeof head,
             "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
             "application/json\r\nContent-Length: %zu\r\n\r\n",
             strlen(body));
    int fd = twb_connect(&s);
    twb_send_all(fd, head, strlen(head));
    twb_send_all(fd, body, strlen(body));
    char buf[8192];
    size_t got = 0;
    int events = 0;
    while (events < 4 && got < sizeof buf - 1) {
        ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (n <= 0)
            fail_msg("the stream ended before a few events arrived");
        got += (size_t)n;
        buf[got] = '\0';
        events = 0;
        for (const char *p = buf; (p = strstr(p, "data: ")) != NULL; p += 6)
            events++;
    }
    assert_non_null(strstr(buf, "HTTP/1.1 200"));
    assert_non_null(strstr(buf, "text/event-stream"));
    twb_stats mid = twb_engine_stats(&s);
    assert_int_equal(mid.running, 1);
    uint64_t t0 = twb_now_ms();
    close(fd);

    /* The engine lets the sequence go within a bound, far before the
     * answer could have finished on its own. */
    twb_stats st = mid;
    while (st.running != 0 && twb_now_ms() - t0 < 5000) {
        usleep(20000);
        st = twb_engine_stats(&s);
    }
    uint64_t dt = twb_now_ms() - t0;
    if (st.running != 0)
        fail_msg("the engine still runs the abandoned request after %llu ms",
                 (unsigned long long)dt);
    printf("abandoned stream freed in %llu ms after %llu generated tokens\n",
           (unsigned long long)dt, (unsigned long long)st.generated_tokens);
    assert_true(st.generated_tokens < (uint64_t)max_tokens);

    /* The watcher saw the stream end as cancelled. */
    for (int i = 0; i < 250 && !w.cancelled_seen; i++)
        usleep(20000);
    w.stop = true;
    pthread_join(watcher, NULL);
    assert_true(w.cancelled_seen);

    twb_result m = twb_http(&s, "GET", "/metrics", NULL, 0);
    assert_int_equal(m.status, 200);
    assert_non_null(strstr(m.body, "tokenwire_bridge_streams_aborted_total 1"));
    assert_non_null(strstr(m.body, "tokenwire_bridge_streams_active 0"));
    assert_non_null(strstr(m.body, "tokenwire_engine_requests_running 0"));
    free(m.body);

    /* And the bridge goes on serving. */
    twb_result r = twb_http(&s, "POST", "/v1/completions",
                            "{\"prompt\":\"def f():\",\"max_tokens\":2}", SIZE_MAX);
    assert_int_equal(r.status, 200);
    free(r.body);
    twb_stop(&s);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_64_concurrent_streams, twb_teardown),
        cmocka_unit_test_teardown(test_disconnect_cancels, twb_teardown),
    };
    return twb_main(argc, argv, &model_path, tests, sizeof tests / sizeof tests[0]);
}
