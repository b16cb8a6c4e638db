/* Speculative decoding through the engine: a hybrid target with a draft
 * model beside it, greedy requests with speculation off, by lookup and by
 * draft running in one batch, each equal to the golden greedy continuation;
 * usage and stats count the drafted tokens. */
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

#include "test_support.h"
#include "tw/engine.h"
#include "tw/safetensors.h"

#define N_OUT 32
enum { N_REQ = 4 };

typedef struct result {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t ids[64];
    size_t n;
    bool final;
    tw_usage usage;
    tw_status error;
} result;

static void on_chunk(void *user, const tw_gen_chunk *ch)
{
    result *r = user;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < ch->n_token_ids && r->n < 64; i++)
        r->ids[r->n++] = ch->token_ids[i];
    if (ch->final) {
        r->final = true;
        r->usage = *ch->usage;
        r->error = ch->error;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
}

static void wait_final(result *r)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 60;
    pthread_mutex_lock(&r->mu);
    while (!r->final)
        if (pthread_cond_timedwait(&r->cv, &r->mu, &ts) != 0)
            break;
    pthread_mutex_unlock(&r->mu);
    assert_true(r->final);
}

static size_t read_ids(const char *path, const char *name, uint32_t *out, size_t cap)
{
    tw_err err;
    tw_st_file *g;
    assert_int_equal(tw_st_open(path, &g, &err), TW_OK);
    const tw_st_tensor *t = tw_st_find(g, name);
    assert_non_null(t);
    size_t n = t->n_elems < cap ? t->n_elems : cap;
    memcpy(out, t->data, n * sizeof(uint32_t));
    tw_st_close(g);
    return n;
}

static void test_batched_speculation(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(dir);
    char path[4096], draft[4096];
    uint32_t prompt[64], want[64];
    snprintf(path, sizeof path, "%s/golden/qwen3_5/golden.safetensors", dir);
    size_t n_prompt = read_ids(path, "input_ids", prompt, 64);
    assert_true(read_ids(path, "greedy_ids", want, 64) >= N_OUT);

    tw_engine_opts o;
    tw_engine_opts_init(&o);
    o.threads = 2;
    o.max_batch = 8;
    o.max_context = 256;
    tw_engine *e;
    tw_err err;
    assert_int_equal(tw_engine_create(&o, &e, &err), TW_OK);
    snprintf(path, sizeof path, "%s/golden/qwen3_5", dir);
    snprintf(draft, sizeof draft, "%s/golden/qwen3_5_moe", dir);
    tw_load_opts lo;
    tw_load_opts_init(&lo);
    lo.draft_path = draft;
    if (tw_engine_load_model(e, path, "target", &lo, NULL, &err) != TW_OK)
        fail_msg("load: %s", err.msg);
    /* a model without a draft refuses DRAFT requests at submit */
    assert_int_equal(tw_engine_load_model(e, draft, "plain", NULL, NULL, &err), TW_OK);

    const tw_spec_mode modes[N_REQ] = {TW_SPEC_OFF, TW_SPEC_LOOKUP, TW_SPEC_DRAFT, TW_SPEC_AUTO};
    const uint32_t ks[N_REQ] = {0, 3, 6, 1};
    result res[N_REQ];
    tw_gen_callbacks cb = {on_chunk};
    for (int i = 0; i < N_REQ; i++) {
        memset(&res[i], 0, sizeof res[i]);
        pthread_mutex_init(&res[i].mu, NULL);
        pthread_cond_init(&res[i].cv, NULL);
        tw_gen_request r;
        tw_gen_request_init(&r);
        r.model = "target";
        r.prompt_kind = TW_PROMPT_TOKENS;
        r.prompt_ids = prompt;
        r.n_prompt_ids = n_prompt;
        r.sampling.temperature = 0.0f;
        r.stop.max_tokens = N_OUT;
        r.stop.ignore_eos = true;
        r.speculative.mode = modes[i];
        r.speculative.max_draft_tokens = ks[i];
        uint64_t id;
        if (tw_engine_submit(e, &r, &cb, &res[i], &id, &err) != TW_OK)
            fail_msg("submit %d: %s", i, err.msg);
    }
    for (int i = 0; i < N_REQ; i++) {
        wait_final(&res[i]);
        assert_int_equal(res[i].error, TW_OK);
        assert_int_equal(res[i].n, N_OUT);
        for (size_t t = 0; t < N_OUT; t++)
            if (res[i].ids[t] != want[t])
                fail_msg("request %d (mode %d): token %zu is %u, golden %u", i, (int)modes[i], t,
                         res[i].ids[t], want[t]);
        assert_true(res[i].usage.accepted_tokens <= res[i].usage.drafted_tokens);
    }
    assert_int_equal(res[0].usage.drafted_tokens, 0);
    assert_true(res[2].usage.drafted_tokens > 0);

    /* a sampled request with draft speculation runs to its length */
    result sr;
    memset(&sr, 0, sizeof sr);
    pthread_mutex_init(&sr.mu, NULL);
    pthread_cond_init(&sr.cv, NULL);
    tw_gen_request r;
    tw_gen_request_init(&r);
    r.model = "target";
    r.prompt_kind = TW_PROMPT_TOKENS;
    r.prompt_ids = prompt;
    r.n_prompt_ids = n_prompt;
    r.sampling.temperature = 0.9f;
    r.sampling.top_k = 50;
    r.sampling.has_seed = true;
    r.sampling.seed = 11;
    r.stop.max_tokens = N_OUT;
    r.stop.ignore_eos = true;
    r.speculative.mode = TW_SPEC_DRAFT;
    uint64_t id;
    assert_int_equal(tw_engine_submit(e, &r, &cb, &sr, &id, &err), TW_OK);
    wait_final(&sr);
    assert_int_equal(sr.error, TW_OK);
    assert_int_equal(sr.n, N_OUT);
    assert_true(sr.usage.drafted_tokens > 0);

    r.model = "plain";
    assert_int_equal(tw_engine_submit(e, &r, &cb, &sr, &id, &err), TW_FAILED_PRECONDITION);

    tw_engine_stats st;
    assert_int_equal(tw_engine_stats_get(e, "target", &st, &err), TW_OK);
    assert_true(st.spec_drafted >= (uint64_t)res[2].usage.drafted_tokens);
    assert_true(st.spec_accepted <= st.spec_drafted);
    tw_engine_destroy(e);
    for (int i = 0; i < N_REQ; i++) {
        pthread_mutex_destroy(&res[i].mu);
        pthread_cond_destroy(&res[i].cv);
    }
    pthread_mutex_destroy(&sr.mu);
    pthread_cond_destroy(&sr.cv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batched_speculation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
