/* tokenwired's limits and bookkeeping with the golden qwen2 model: prompt
 * length, concurrent generations, the default deadline, Cancel by stream
 * id and by request id, and the Stats counters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon_fixture.h"

#include "test_support.h"

/* A generation that runs until cancelled (or the context fills, seconds
 * later). */
typedef struct long_gen {
    uint32_t ids[4];
    Tokenwire__V1__TokenIds t;
    Tokenwire__V1__SamplingParams sp;
    Tokenwire__V1__StopRules stop;
    Tokenwire__V1__GenerateRequest g;
} long_gen;

static void long_gen_init(long_gen *lg, bool stream, const char *stream_id)
{
    memset(lg, 0, sizeof *lg);
    lg->ids[0] = 1;
    lg->ids[1] = 2;
    lg->ids[2] = 3;
    lg->ids[3] = 4;
    tokenwire__v1__token_ids__init(&lg->t);
    lg->t.n_ids = 4;
    lg->t.ids = lg->ids;
    tokenwire__v1__sampling_params__init(&lg->sp);
    lg->sp.has_temperature = 1;
    lg->sp.temperature = 0;
    tokenwire__v1__stop_rules__init(&lg->stop);
    lg->stop.has_max_tokens = 1;
    lg->stop.max_tokens = 1000000;
    lg->stop.has_ignore_eos = 1;
    lg->stop.ignore_eos = 1;
    tokenwire__v1__generate_request__init(&lg->g);
    lg->g.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TOKEN_IDS;
    lg->g.token_ids = &lg->t;
    lg->g.sampling = &lg->sp;
    lg->g.stop = &lg->stop;
    lg->g.has_stream = stream;
    lg->g.stream = stream;
    lg->g.stream_id = (char *)stream_id;
}

static void start_with_model(twt_daemon *d, const char *shared, const char *const *more)
{
    char model[1024];
    snprintf(model, sizeof model, "%s/golden/qwen2", shared);
    const char *extra[24] = {"--model", model, "--model-name", "qwen2", "--threads", "1"};
    int n = 6;
    for (; more && *more && n < 23; more++)
        extra[n++] = *more;
    extra[n] = NULL;
    twt_daemon_init(d);
    twt_daemon_start(d, extra);
}

static tw_status start_stream(tw_client *c, long_gen *lg, tw_err *err)
{
    Tokenwire__V1__Request r = TOKENWIRE__V1__REQUEST__INIT;
    r.method_case = TOKENWIRE__V1__REQUEST__METHOD_GENERATE;
    r.generate = &lg->g;
    Tokenwire__V1__Reply *rep = NULL;
    tw_status st = tw_client_call(c, &r, &rep, err);
    tw_wire_free_reply(rep);
    return st;
}

/* Reads a stream to its end with Resume; returns its final chunk's finish
 * reason and counts the chunks. */
static int drain_stream(tw_client *c, const char *id, int *chunks)
{
    uint64_t next = 0;
    *chunks = 0;
    /* Bounded by time, not rounds: an optimised build streams hundreds of
     * chunks before a 300 ms deadline and each Resume may return only a few. */
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > 60)
            break;
        Tokenwire__V1__ResumeRequest rr = TOKENWIRE__V1__RESUME_REQUEST__INIT;
        rr.stream_id = (char *)id;
        rr.has_from_seq = 1;
        rr.from_seq = next;
        rr.has_wait_ms = 1;
        rr.wait_ms = 1000;
        Tokenwire__V1__Reply *rep = NULL;
        tw_err err;
        assert_int_equal(tw_client_resume(c, &rr, &rep, &err), TW_OK);
        int finish = -1;
        for (size_t i = 0; i < rep->resume->n_chunks; i++) {
            const Tokenwire__V1__StreamChunk *ch = rep->resume->chunks[i];
            next = ch->seq + 1;
            (*chunks)++;
            if (ch->final)
                finish = ch->finish_reason;
        }
        tw_wire_free_reply(rep);
        if (finish >= 0)
            return finish;
    }
    fail_msg("stream %s did not finish", id);
    return -1;
}

static void test_prompt_and_concurrency_limits(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    twt_daemon d;
    const char *more[] = {"--max-prompt-tokens", "4", "--max-concurrent", "1", NULL};
    start_with_model(&d, shared, more);
    tw_client *c = twt_connect(&d, 20000);
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;

    /* Five prompt tokens against a limit of four. */
    long_gen lg;
    long_gen_init(&lg, false, NULL);
    uint32_t five[] = {1, 2, 3, 4, 5};
    lg.t.ids = five;
    lg.t.n_ids = 5;
    assert_int_equal(tw_client_generate(c, &lg.g, &rep, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "limit of 4"));
    tw_wire_free_reply(rep);

    /* One generation at a time: a second one is refused while the first
     * runs, and Cancel by stream id ends the first. */
    long_gen_init(&lg, true, "lim-1");
    assert_int_equal(start_stream(c, &lg, &err), TW_OK);
    long_gen other;
    long_gen_init(&other, false, NULL);
    other.stop.max_tokens = 2;
    assert_int_equal(tw_client_generate(c, &other.g, &rep, &err), TW_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(err.msg, "max-concurrent"));
    tw_wire_free_reply(rep);

    Tokenwire__V1__CancelRequest cr = TOKENWIRE__V1__CANCEL_REQUEST__INIT;
    cr.stream_id = "lim-1";
    assert_int_equal(tw_client_cancel(c, &cr, &rep, &err), TW_OK);
    assert_true(rep->cancel->cancelled);
    tw_wire_free_reply(rep);
    int chunks = 0;
    assert_int_equal(drain_stream(c, "lim-1", &chunks),
                     TOKENWIRE__V1__FINISH_REASON__FINISH_CANCELLED);
    /* Finished: nothing left to cancel. */
    assert_int_equal(tw_client_cancel(c, &cr, &rep, &err), TW_OK);
    assert_false(rep->cancel->cancelled);
    tw_wire_free_reply(rep);

    /* The slot is free again. */
    usleep(50000);
    assert_int_equal(tw_client_generate(c, &other.g, &rep, &err), TW_OK);
    assert_int_equal(rep->generate->choices[0]->n_token_ids, 2);
    tw_wire_free_reply(rep);

    tw_client_close(c);
    twt_daemon_stop(&d);
    twt_daemon_cleanup(&d);
}

typedef struct gen_thread {
    tw_client *c;
    long_gen lg;
    tw_status st;
    int finish;
} gen_thread;

static void *run_gen(void *arg)
{
    gen_thread *t = arg;
    Tokenwire__V1__Request r = TOKENWIRE__V1__REQUEST__INIT;
    r.method_case = TOKENWIRE__V1__REQUEST__METHOD_GENERATE;
    r.generate = &t->lg.g;
    r.has_request_id = 1;
    r.request_id = 4242;
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    t->st = tw_client_call(t->c, &r, &rep, &err);
    if (t->st == TW_OK)
        t->finish = rep->generate->choices[0]->finish_reason;
    tw_wire_free_reply(rep);
    return NULL;
}

static void test_cancel_by_request_id_and_stats(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    twt_daemon d;
    start_with_model(&d, shared, NULL);
    tw_client *c = twt_connect(&d, 20000);
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;

    gen_thread t;
    memset(&t, 0, sizeof t);
    t.c = c;
    long_gen_init(&t.lg, false, NULL);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, run_gen, &t), 0);
    Tokenwire__V1__CancelRequest cr = TOKENWIRE__V1__CANCEL_REQUEST__INIT;
    cr.has_request_id = 1;
    cr.request_id = 4242;
    bool cancelled = false;
    for (int i = 0; i < 200 && !cancelled; i++) {
        assert_int_equal(tw_client_cancel(c, &cr, &rep, &err), TW_OK);
        cancelled = rep->cancel->cancelled;
        tw_wire_free_reply(rep);
        if (!cancelled)
            usleep(10000);
    }
    assert_true(cancelled);
    pthread_join(th, NULL);
    assert_int_equal(t.st, TW_OK);
    assert_int_equal(t.finish, TOKENWIRE__V1__FINISH_REASON__FINISH_CANCELLED);
    /* Neither id nor stream: refused. */
    Tokenwire__V1__CancelRequest none = TOKENWIRE__V1__CANCEL_REQUEST__INIT;
    assert_int_equal(tw_client_cancel(c, &none, &rep, &err), TW_INVALID_ARGUMENT);
    tw_wire_free_reply(rep);

    /* Stats: memory, chunks published, resumes served. */
    assert_int_equal(tw_client_stats(c, NULL, &rep, &err), TW_OK);
    assert_true(rep->stats->rss_bytes > (1u << 20));
    uint64_t published0 = rep->stats->chunks_published;
    uint64_t resumes0 = rep->stats->resumes_served;
    uint64_t total0 = rep->stats->requests_total;
    assert_true(total0 >= 1);
    tw_wire_free_reply(rep);
    long_gen lg;
    long_gen_init(&lg, true, "stats-1");
    lg.stop.max_tokens = 3;
    assert_int_equal(start_stream(c, &lg, &err), TW_OK);
    int chunks = 0;
    assert_int_equal(drain_stream(c, "stats-1", &chunks),
                     TOKENWIRE__V1__FINISH_REASON__FINISH_LENGTH);
    /* A chunk is stored (and resumable) just before it is published. */
    for (int i = 0; i < 100; i++) {
        assert_int_equal(tw_client_stats(c, NULL, &rep, &err), TW_OK);
        if (rep->stats->chunks_published == published0 + (uint64_t)chunks)
            break;
        tw_wire_free_reply(rep);
        usleep(10000);
    }
    assert_int_equal(rep->stats->chunks_published, published0 + (uint64_t)chunks);
    assert_true(rep->stats->resumes_served >= resumes0 + 1);
    assert_true(rep->stats->requests_total >= total0 + 1);
    assert_true(rep->stats->generated_tokens_total >= 3);
    tw_wire_free_reply(rep);

    tw_client_close(c);
    twt_daemon_stop(&d);
    twt_daemon_cleanup(&d);
}

static void test_default_deadline(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    twt_daemon d;
    const char *more[] = {"--default-deadline-ms", "300", NULL};
    start_with_model(&d, shared, more);
    tw_client *c = twt_connect(&d, 20000);
    tw_err err;
    /* A streaming Generate carries no deadline of its own: the engine's
     * default ends it. */
    long_gen lg;
    long_gen_init(&lg, true, "deadline-1");
    assert_int_equal(start_stream(c, &lg, &err), TW_OK);
    int chunks = 0;
    assert_int_equal(drain_stream(c, "deadline-1", &chunks),
                     TOKENWIRE__V1__FINISH_REASON__FINISH_DEADLINE);
    /* A deadline already past is refused at once. */
    long_gen_init(&lg, false, NULL);
    Tokenwire__V1__Request r = TOKENWIRE__V1__REQUEST__INIT;
    r.method_case = TOKENWIRE__V1__REQUEST__METHOD_GENERATE;
    r.generate = &lg.g;
    r.has_deadline_unix_ms = 1;
    r.deadline_unix_ms = 1000;
    Tokenwire__V1__Reply *rep = NULL;
    assert_int_equal(tw_client_call(c, &r, &rep, &err), TW_DEADLINE_EXCEEDED);
    tw_wire_free_reply(rep);
    tw_client_close(c);
    twt_daemon_stop(&d);
    twt_daemon_cleanup(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_prompt_and_concurrency_limits, twt_daemon_teardown),
        cmocka_unit_test_teardown(test_cancel_by_request_id_and_stats, twt_daemon_teardown),
        cmocka_unit_test_teardown(test_default_deadline, twt_daemon_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tw_client_fini(); /* lets NNG finish freeing closed sockets before the leak check */
    return rc;
}
