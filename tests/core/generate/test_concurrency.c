/* What the scheduler guarantees when many requests run at once, on the
 * golden models (token-id prompts; skipped without the reference data):
 *  - 16 concurrent greedy requests give, token for token, what each gives
 *    alone, and seeded sampled requests reproduce exactly when batched;
 *  - admission by memory: requests that do not fit the budget wait (never
 *    more running than fit), and one that never fits is refused;
 *  - cancelling running requests releases everything they reserved. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_support.h"
#include "tw/engine.h"

#define N_REQ 16
#define MAX_OUT 64
#define GEN_TOKENS 12

typedef struct watch watch;

typedef struct collect {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t ids[MAX_OUT];
    size_t n;
    tw_finish_reason finish;
    bool final;
    tw_status error;
    char error_msg[256];
    long slow_ns; /* sleep in the callback to keep the request running */
    watch *w;     /* engine-wide observations, may be NULL */
} collect;

/* What callbacks see of the engine while requests run. */
struct watch {
    tw_engine *e;
    pthread_mutex_t mu;
    uint32_t max_running;
    uint64_t max_reserved;
};

static void collect_init(collect *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
}

static void collect_destroy(collect *c)
{
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

static void on_chunk(void *user, const tw_gen_chunk *ch)
{
    collect *c = user;
    if (c->w) {
        /* tw_engine_stats_get is allowed from the callback. */
        tw_engine_stats st;
        if (tw_engine_stats_get(c->w->e, NULL, &st, NULL) == TW_OK) {
            pthread_mutex_lock(&c->w->mu);
            if (st.requests_running > c->w->max_running)
                c->w->max_running = st.requests_running;
            if (st.mem_reserved_bytes > c->w->max_reserved)
                c->w->max_reserved = st.mem_reserved_bytes;
            pthread_mutex_unlock(&c->w->mu);
        }
    }
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < ch->n_token_ids && c->n < MAX_OUT; i++)
        c->ids[c->n++] = ch->token_ids[i];
    if (ch->finish_reason != TW_FINISH_NONE)
        c->finish = ch->finish_reason;
    /* once the final chunk is signalled the waiter may free c */
    long slow_ns = ch->final ? 0 : c->slow_ns;
    if (ch->final) {
        c->final = true;
        c->error = ch->error;
        snprintf(c->error_msg, sizeof c->error_msg, "%s", ch->error_msg);
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    if (slow_ns)
        nanosleep(&(struct timespec){0, slow_ns}, NULL);
}

static void wait_final(collect *c)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 120;
    pthread_mutex_lock(&c->mu);
    while (!c->final)
        if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) != 0)
            break;
    bool done = c->final;
    pthread_mutex_unlock(&c->mu);
    assert_true(done);
}

static size_t tokens_of(collect *c)
{
    pthread_mutex_lock(&c->mu);
    size_t n = c->n;
    pthread_mutex_unlock(&c->mu);
    return n;
}

/* The golden prompt of one model family (24 ids). */
static bool golden_input(const char *dir, const char *family, uint32_t *ids, size_t *n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/%s/golden.json", dir, family);
    json_error_t jerr;
    json_t *j = json_load_file(path, 0, &jerr);
    if (!j)
        return false;
    json_t *a = json_object_get(j, "input_ids");
    *n = json_array_size(a);
    for (size_t i = 0; i < *n && i < 64; i++)
        ids[i] = (uint32_t)json_integer_value(json_array_get(a, i));
    json_decref(j);
    return *n > 0 && *n <= 64;
}

static tw_engine *engine_for(const char *dir, const char *family, uint32_t max_batch,
                             uint32_t max_context, uint64_t budget)
{
    tw_engine_opts o;
    tw_engine_opts_init(&o);
    o.threads = 2;
    o.max_batch = max_batch;
    o.max_queue = 64;
    o.prefill_chunk = 16;
    o.max_context = max_context;
    o.mem_budget_bytes = budget;
    o.no_state_store = true;
    tw_engine *e;
    tw_err err;
    if (tw_engine_create(&o, &e, &err) != TW_OK)
        fail_msg("engine: %s", err.msg);
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/%s", dir, family);
    if (tw_engine_load_model(e, path, NULL, NULL, NULL, &err) != TW_OK)
        fail_msg("load %s: %s", family, err.msg);
    return e;
}

/* Request i: a rotation of the golden prompt, of its own length; every
 * fourth one is sampled with its own seed. */
static void make_request(tw_gen_request *r, uint32_t prompts[][64], const uint32_t *golden,
                         size_t n_golden, int i, uint32_t max_tokens)
{
    size_t len = 6 + (size_t)i % (n_golden - 6);
    for (size_t k = 0; k < len; k++)
        prompts[i][k] = golden[(k + (size_t)i * 5) % n_golden];
    tw_gen_request_init(r);
    r->prompt_ids = prompts[i];
    r->n_prompt_ids = len;
    r->stop.max_tokens = max_tokens;
    r->stop.ignore_eos = true;
    r->sampling.temperature = 0.0f;
    if (i % 4 == 3) {
        r->sampling.temperature = 0.9f;
        r->sampling.top_k = 50;
        r->sampling.has_seed = true;
        r->sampling.seed = 1000u + (uint64_t)i;
    }
}

static void submit(tw_engine *e, const tw_gen_request *r, collect *c)
{
    tw_gen_callbacks cb = {on_chunk};
    tw_err err;
    uint64_t id;
    if (tw_engine_submit(e, r, &cb, c, &id, &err) != TW_OK)
        fail_msg("submit: %s", err.msg);
}

static void concurrent_equals_alone(const char *family)
{
    TW_REQUIRE_SHARED(dir);
    uint32_t golden[64];
    size_t n_golden;
    assert_true(golden_input(dir, family, golden, &n_golden));
    tw_engine *e = engine_for(dir, family, N_REQ, 256, 0);
    static uint32_t prompts[N_REQ][64];
    tw_gen_request r[N_REQ];
    collect alone[N_REQ], together[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        make_request(&r[i], prompts, golden, n_golden, i, GEN_TOKENS);
        collect_init(&alone[i]);
        submit(e, &r[i], &alone[i]);
        wait_final(&alone[i]);
        assert_int_equal(alone[i].error, TW_OK);
        assert_int_equal(alone[i].n, GEN_TOKENS);
    }
    watch w = {.e = e};
    pthread_mutex_init(&w.mu, NULL);
    for (int i = 0; i < N_REQ; i++) {
        collect_init(&together[i]);
        together[i].w = &w;
        submit(e, &r[i], &together[i]);
    }
    for (int i = 0; i < N_REQ; i++) {
        wait_final(&together[i]);
        assert_int_equal(together[i].error, TW_OK);
        assert_int_equal(together[i].finish, TW_FINISH_LENGTH);
        assert_int_equal(together[i].n, GEN_TOKENS);
        if (memcmp(together[i].ids, alone[i].ids, GEN_TOKENS * sizeof(uint32_t)) != 0)
            fail_msg("%s: request %d (%s) differs when batched", family, i,
                     r[i].sampling.temperature > 0 ? "seeded sampling" : "greedy");
    }
    /* They did run together: more than half of them at once. */
    assert_true(w.max_running > N_REQ / 2);
    for (int i = 0; i < N_REQ; i++) {
        collect_destroy(&alone[i]);
        collect_destroy(&together[i]);
    }
    pthread_mutex_destroy(&w.mu);
    tw_engine_destroy(e);
}

static void test_concurrent_qwen3_5(void **state)
{
    (void)state;
    concurrent_equals_alone("qwen3_5");
}

static void test_concurrent_qwen3_5_moe(void **state)
{
    (void)state;
    concurrent_equals_alone("qwen3_5_moe");
}

static void test_concurrent_llama(void **state)
{
    (void)state;
    concurrent_equals_alone("llama");
}

static void test_concurrent_gemma3(void **state)
{
    (void)state;
    concurrent_equals_alone("gemma3_text");
}

/* The bytes one request of this shape reserves, measured while it runs on
 * an engine configured like the budgeted one (max_batch bounds the
 * speculative draft length, whose snapshot slots are reserved too). */
static uint64_t reserved_by_one(const char *dir, const uint32_t *prompt, size_t n,
                                uint32_t max_tokens)
{
    tw_engine *e = engine_for(dir, "qwen3_5", 8, 2048, 0); /* as the budgeted engine */
    tw_gen_request r;
    tw_gen_request_init(&r);
    r.prompt_ids = prompt;
    r.n_prompt_ids = n;
    r.stop.max_tokens = max_tokens;
    r.stop.ignore_eos = true;
    r.sampling.temperature = 0.0f;
    collect c;
    collect_init(&c);
    watch w = {.e = e};
    pthread_mutex_init(&w.mu, NULL);
    c.w = &w;
    submit(e, &r, &c);
    wait_final(&c);
    tw_engine_stats st;
    for (int t = 0; t < 5000; t++) { /* see test_cancel_releases_everything */
        assert_int_equal(tw_engine_stats_get(e, NULL, &st, NULL), TW_OK);
        if (st.requests_running == 0)
            break;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    assert_int_equal(st.mem_reserved_bytes, 0); /* released at the end */
    collect_destroy(&c);
    pthread_mutex_destroy(&w.mu);
    tw_engine_destroy(e);
    return w.max_reserved;
}

static void test_memory_budget_admission(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(dir);
    uint32_t golden[64];
    size_t n_golden;
    assert_true(golden_input(dir, "qwen3_5", golden, &n_golden));
    uint64_t one = reserved_by_one(dir, golden, n_golden, 16);
    assert_true(one > 0);
    /* Room for two such requests, not three. */
    uint64_t budget = 2 * one + one / 2;
    tw_engine *e = engine_for(dir, "qwen3_5", 8, 2048, budget);
    watch w = {.e = e};
    pthread_mutex_init(&w.mu, NULL);
    enum { N = 6 };
    collect c[N];
    tw_gen_request r;
    tw_gen_request_init(&r);
    r.prompt_ids = golden;
    r.n_prompt_ids = n_golden;
    r.stop.max_tokens = 16;
    r.stop.ignore_eos = true;
    r.sampling.temperature = 0.0f;
    for (int i = 0; i < N; i++) {
        collect_init(&c[i]);
        c[i].w = &w;
        c[i].slow_ns = 1000000;
        submit(e, &r, &c[i]);
    }
    /* Waiting requests show as queued while two run. */
    tw_engine_stats st;
    assert_int_equal(tw_engine_stats_get(e, NULL, &st, NULL), TW_OK);
    assert_int_equal(st.mem_budget_bytes, budget);
    assert_true(st.requests_running <= 2);

    /* One that could never fit is refused at once, with the numbers. */
    tw_gen_request big = r;
    big.stop.max_tokens = 0; /* the whole 2048-token context */
    collect cb;
    collect_init(&cb);
    tw_gen_callbacks cbs = {on_chunk};
    tw_err err;
    uint64_t id;
    assert_int_equal(tw_engine_submit(e, &big, &cbs, &cb, &id, &err), TW_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(err.msg, "budget"));
    char num[32];
    snprintf(num, sizeof num, "%llu", (unsigned long long)budget);
    assert_non_null(strstr(err.msg, num));
    tw_gen_request three = r;
    three.n = 3;
    assert_int_equal(tw_engine_submit(e, &three, &cbs, &cb, &id, &err), TW_RESOURCE_EXHAUSTED);
    assert_false(cb.final); /* no callback for a refused submit */

    /* A request waiting for memory still ends at its deadline. */
    tw_gen_request late = r;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    late.deadline_unix_ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000 + 20;
    collect cl;
    collect_init(&cl);
    submit(e, &late, &cl);

    for (int i = 0; i < N; i++) {
        wait_final(&c[i]);
        assert_int_equal(c[i].error, TW_OK);
        assert_int_equal(c[i].finish, TW_FINISH_LENGTH);
        assert_int_equal(c[i].n, 16);
        assert_memory_equal(c[i].ids, c[0].ids, 16 * sizeof(uint32_t));
    }
    wait_final(&cl);
    assert_int_equal(cl.finish, TW_FINISH_DEADLINE);
    assert_int_equal(cl.n, 0);
    assert_int_equal(w.max_running, 2);
    assert_true(w.max_reserved <= budget);
    assert_true(w.max_reserved >= 2 * one);
    for (int t = 0; t < 5000; t++) { /* see test_cancel_releases_everything */
        assert_int_equal(tw_engine_stats_get(e, NULL, &st, NULL), TW_OK);
        if (st.requests_running == 0)
            break;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    assert_int_equal(st.requests_running, 0);
    assert_int_equal(st.mem_reserved_bytes, 0);
    assert_true(st.mem_pooled_bytes <= budget);
    for (int i = 0; i < N; i++)
        collect_destroy(&c[i]);
    collect_destroy(&cb);
    collect_destroy(&cl);
    pthread_mutex_destroy(&w.mu);
    tw_engine_destroy(e);
}

/* Cancelling running requests gives back everything they reserved; the
 * idle sequences they leave are reused, not added to. */
static void test_cancel_releases_everything(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(dir);
    uint32_t golden[64];
    size_t n_golden;
    assert_true(golden_input(dir, "qwen3_5_moe", golden, &n_golden));
    tw_engine *e = engine_for(dir, "qwen3_5_moe", 8, 512, 0);
    tw_engine_stats base, st;
    assert_int_equal(tw_engine_stats_get(e, NULL, &base, NULL), TW_OK);
    assert_int_equal(base.mem_reserved_bytes, 0);
    assert_int_equal(base.requests_running, 0);
    enum { N = 6 };
    uint64_t pooled_after[2];
    for (int round = 0; round < 2; round++) {
        collect c[N];
        uint64_t ids[N];
        tw_gen_request r;
        tw_gen_request_init(&r);
        r.prompt_ids = golden;
        r.n_prompt_ids = n_golden;
        r.stop.max_tokens = 0; /* until the context is full: only a cancel ends it */
        r.stop.ignore_eos = true;
        r.sampling.temperature = 0.0f;
        tw_gen_callbacks cb = {on_chunk};
        tw_err err;
        for (int i = 0; i < N; i++) {
            collect_init(&c[i]);
            c[i].slow_ns = 2000000;
            if (i % 2) { /* the speculative path too */
                r.speculative.mode = TW_SPEC_LOOKUP;
            } else {
                r.speculative.mode = TW_SPEC_AUTO;
            }
            assert_int_equal(tw_engine_submit(e, &r, &cb, &c[i], &ids[i], &err), TW_OK);
        }
        /* Wait until every one of them produces tokens. */
        for (int i = 0; i < N; i++)
            for (int t = 0; t < 20000 && tokens_of(&c[i]) < 2; t++)
                nanosleep(&(struct timespec){0, 1000000}, NULL);
        assert_int_equal(tw_engine_stats_get(e, NULL, &st, NULL), TW_OK);
        assert_int_equal(st.requests_running, N);
        assert_true(st.mem_reserved_bytes > 0);
        for (int i = 0; i < N; i++)
            assert_true(tw_engine_cancel(e, ids[i]));
        for (int i = 0; i < N; i++) {
            wait_final(&c[i]);
            assert_int_equal(c[i].finish, TW_FINISH_CANCELLED);
            assert_false(tw_engine_cancel(e, ids[i]));
            collect_destroy(&c[i]);
        }
        /* The final chunk is sent just before the scheduler retires its
         * request, so the books may lag the last callback by a moment. */
        for (int t = 0; t < 5000; t++) {
            assert_int_equal(tw_engine_stats_get(e, NULL, &st, NULL), TW_OK);
            if (st.requests_running == 0)
                break;
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
        assert_int_equal(st.requests_running, 0);
        assert_int_equal(st.requests_queued, 0);
        assert_int_equal(st.mem_reserved_bytes, base.mem_reserved_bytes);
        assert_int_equal(st.kv_bytes, st.mem_pooled_bytes);
        pooled_after[round] = st.mem_pooled_bytes;
    }
    assert_int_equal(pooled_after[0], pooled_after[1]);
    tw_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_qwen3_5),
        cmocka_unit_test(test_concurrent_qwen3_5_moe),
        cmocka_unit_test(test_concurrent_llama),
        cmocka_unit_test(test_concurrent_gemma3),
        cmocka_unit_test(test_memory_budget_admission),
        cmocka_unit_test(test_cancel_releases_everything),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
