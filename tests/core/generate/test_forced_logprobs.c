/* The tokens the thinking controller forces (the </think> that ends a block
 * over its budget and the transition after it) carry log-probabilities like
 * sampled ones: the model's own value for that token and its alternatives.
 * Checked on the shipped model against a second request that reads the
 * whole answer back as its prompt and reports the prompt's
 * log-probabilities.
 *
 *   test_forced_logprobs MODEL.gguf */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/engine.h"

#define MAX_IDS 128
#define TOP 3
#define BUDGET 3
#define ANSWER 5

typedef struct collected {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t n;
    uint32_t ids[MAX_IDS];
    float lp[MAX_IDS];
    uint32_t n_top[MAX_IDS];
    tw_top_logprob top[MAX_IDS][TOP];
    size_t n_prompt;
    float prompt_lp[MAX_IDS];
    tw_top_logprob prompt_top[MAX_IDS][TOP];
    bool final;
    tw_force_close forced_by;
    tw_finish_reason finish;
    tw_status error;
} collected;

static const char *g_model;

static void on_chunk(void *user, const tw_gen_chunk *ch)
{
    collected *c = user;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < ch->n_token_ids && c->n < MAX_IDS; i++, c->n++) {
        const tw_token_logprob *lp = &ch->logprobs[i];
        c->ids[c->n] = ch->token_ids[i];
        c->lp[c->n] = lp->logprob;
        c->n_top[c->n] = lp->n_top;
        memcpy(c->top[c->n], lp->top, (lp->n_top < TOP ? lp->n_top : TOP) * sizeof lp->top[0]);
    }
    if (ch->prompt_logprobs) {
        c->n_prompt = ch->n_prompt_logprobs < MAX_IDS ? ch->n_prompt_logprobs : MAX_IDS;
        for (size_t i = 0; i < c->n_prompt; i++) {
            c->prompt_lp[i] = ch->prompt_logprobs[i].logprob;
            memcpy(c->prompt_top[i], ch->prompt_logprobs[i].top, sizeof c->prompt_top[i]);
        }
    }
    if (ch->finish_reason != TW_FINISH_NONE) {
        c->forced_by = ch->forced_by;
        c->finish = ch->finish_reason;
    }
    if (ch->final) {
        c->final = true;
        c->error = ch->error;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
}

static void run(tw_engine *e, const tw_gen_request *r, collected *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    tw_gen_callbacks cb = {.on_chunk = on_chunk};
    tw_err err;
    uint64_t id;
    if (tw_engine_submit(e, r, &cb, c, &id, &err) != TW_OK)
        fail_msg("submit: %s", err.msg);
    bool done = tw_test_wait_done(&c->mu, &c->cv, &c->final, 60);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    assert_true(done);
    assert_int_equal(c->error, TW_OK);
}

static uint32_t *tokenize(tw_engine *e, const char *text, size_t *n)
{
    uint32_t *ids;
    tw_err err;
    if (tw_engine_tokenize(e, NULL, text, strlen(text), false, true, &ids, n, &err) != TW_OK)
        fail_msg("tokenize: %s", err.msg);
    return ids;
}

/* An engine on the model under test, with room for four choices. */
static tw_engine *engine_on_model(uint32_t max_context)
{
    tw_engine_opts o;
    tw_engine_opts_init(&o);
    o.threads = 2;
    o.max_batch = 4;
    o.max_n = 4;
    o.max_context = max_context;
    tw_engine *e;
    tw_err err;
    assert_int_equal(tw_engine_create(&o, &e, &err), TW_OK);
    if (tw_engine_load_model(e, g_model, NULL, NULL, NULL, &err) != TW_OK)
        fail_msg("load %s: %s", g_model, err.msg);
    return e;
}

/* Decode and a whole read compute a row with different kernels, so the two
 * agree to about a percent of the value, not to the bit. */
static void expect_close(const char *what, size_t i, float got, float want)
{
    if (!(fabsf(got - want) <= 0.02f + 0.02f * fabsf(want)))
        fail_msg("%s of answer token %zu: %.6f, reading it back gives %.6f", what, i,
                 (double)got, (double)want);
}

static void test_forced_tokens_have_logprobs(void **state)
{
    (void)state;
    tw_engine *e = engine_on_model(512);

    size_t n_prompt, n_close;
    uint32_t *prompt = tokenize(e,
                                "<|im_start|>user\nWrite a Python function that reverses a "
                                "string.<|im_end|>\n<|im_start|>assistant\n<think>\n",
                                &n_prompt);
    uint32_t *close = tokenize(e, "</think>", &n_close);
    assert_int_equal(n_close, 1);

    tw_gen_request r;
    tw_gen_request_init(&r);
    r.prompt_ids = prompt;
    r.n_prompt_ids = n_prompt;
    r.sampling.temperature = 0.0f;
    r.thinking.max_thinking_tokens = BUDGET;
    r.stop.max_tokens = ANSWER;
    r.stop.ignore_eos = true;
    r.logprobs.enabled = true;
    r.logprobs.top_logprobs = TOP;
    r.cache.mode = TW_CACHE_BYPASS;
    collected *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    run(e, &r, a);
    assert_int_equal(a->forced_by, TW_FORCE_BUDGET);
    /* the budget's tokens, the forced close, then the answer (the forced
     * transition counts as its first tokens) */
    assert_int_equal(a->n, BUDGET + 1 + ANSWER);
    assert_int_equal(a->ids[BUDGET], close[0]);

    /* the whole answer read back as a prompt */
    size_t n_all = n_prompt + a->n;
    assert_true(n_all <= MAX_IDS);
    uint32_t all[MAX_IDS];
    memcpy(all, prompt, n_prompt * sizeof *all);
    memcpy(all + n_prompt, a->ids, a->n * sizeof *all);
    r.prompt_ids = all;
    r.n_prompt_ids = n_all;
    r.stop.max_tokens = 1;
    r.logprobs.prompt_logprobs = true;
    r.thinking.max_thinking_tokens = 32768;
    run(e, &r, b);
    assert_int_equal(b->n_prompt, n_all);

    for (size_t i = 0; i < a->n; i++) {
        size_t p = n_prompt + i;
        if (a->n_top[i] != TOP)
            fail_msg("answer token %zu (id %u%s): %u alternatives, asked for %d", i, a->ids[i],
                     i == BUDGET ? ", the forced </think>" : "", a->n_top[i], TOP);
        assert_true(a->lp[i] <= 0.0f);
        expect_close("log-probability", i, a->lp[i], b->prompt_lp[p]);
        /* the same alternatives where both lists hold them (the tail of
         * a list may order near-ties differently) */
        for (int k = 0; k < TOP; k++)
            for (int j = 0; j < TOP; j++)
                if (a->top[i][k].token_id == b->prompt_top[p][j].token_id)
                    expect_close("alternative", i, a->top[i][k].logprob,
                                 b->prompt_top[p][j].logprob);
        assert_int_equal(a->top[i][0].token_id, b->prompt_top[p][0].token_id);
        /* greedy: a sampled token is the best; a forced one need not be */
        if (i < BUDGET)
            assert_memory_equal(&a->lp[i], &a->top[i][0].logprob, sizeof(float));
    }
    /* the forced close is not a free token: the model gave it less than 1 */
    assert_true(a->lp[BUDGET] < 0.0f);

    free(a);
    free(b);
    free(prompt);
    free(close);
    tw_engine_destroy(e);
}

/* What each choice's chunks said of the prompt. */
typedef struct per_choice {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t chunks[3];      /* chunks seen, by choice */
    size_t with_prompt[3]; /* of them, carrying prompt log-probabilities */
    size_t first_with[3];  /* the chunk number that first carried them (1: the first) */
    float prompt_lp[3][64];
    size_t n_prompt[3];
    bool final;
    tw_status error;
} per_choice;

static void on_choice_chunk(void *user, const tw_gen_chunk *ch)
{
    per_choice *p = user;
    pthread_mutex_lock(&p->mu);
    if (ch->index < 3) {
        size_t k = ch->index;
        p->chunks[k]++;
        if (ch->prompt_logprobs) {
            if (!p->with_prompt[k]++)
                p->first_with[k] = p->chunks[k];
            p->n_prompt[k] = ch->n_prompt_logprobs < 64 ? ch->n_prompt_logprobs : 64;
            for (size_t i = 0; i < p->n_prompt[k]; i++)
                p->prompt_lp[k][i] = ch->prompt_logprobs[i].logprob;
        }
    }
    if (ch->final) {
        p->final = true;
        p->error = ch->error;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
}

/* Prompt log-probabilities with several choices come on the first chunk of
 * each, the same values for all: the other choices wait for choice 0 to
 * read the prompt, even a prompt short enough to jump ahead of it. */
static void test_prompt_logprobs_on_every_choice(void **state)
{
    (void)state;
    tw_engine *e = engine_on_model(256);
    tw_err err;
    size_t n_prompt;
    uint32_t *prompt = tokenize(e, "def add(a, b):", &n_prompt);
    tw_gen_request r;
    tw_gen_request_init(&r);
    r.prompt_ids = prompt;
    r.n_prompt_ids = n_prompt;
    r.n = 3;
    r.sampling.temperature = 0.8f;
    r.stop.max_tokens = 3;
    r.stop.ignore_eos = true;
    r.logprobs.enabled = true;
    r.logprobs.prompt_logprobs = true;
    per_choice *p = calloc(1, sizeof *p);
    assert_non_null(p);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    tw_gen_callbacks cb = {.on_chunk = on_choice_chunk};
    uint64_t id;
    assert_int_equal(tw_engine_submit(e, &r, &cb, p, &id, &err), TW_OK);
    assert_true(tw_test_wait_done(&p->mu, &p->cv, &p->final, 60));
    assert_int_equal(p->error, TW_OK);
    for (int k = 0; k < 3; k++) {
        if (p->with_prompt[k] != 1 || p->first_with[k] != 1)
            fail_msg("choice %d: prompt log-probabilities on %zu chunks, first on chunk %zu", k,
                     p->with_prompt[k], p->first_with[k]);
        assert_int_equal(p->n_prompt[k], n_prompt);
        assert_memory_equal(p->prompt_lp[k] + 1, p->prompt_lp[0] + 1,
                            (n_prompt - 1) * sizeof(float));
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
    free(prompt);
    tw_engine_destroy(e);
}

/* prompt_only: nothing generated, each choice ends with LENGTH, and the
 * prompt's log-probabilities are those a generating request reports. */
static void test_prompt_only(void **state)
{
    (void)state;
    tw_engine *e = engine_on_model(256);
    size_t n_prompt;
    uint32_t *prompt = tokenize(e, "import os\nprint(os.getcwd())", &n_prompt);
    tw_gen_request r;
    tw_gen_request_init(&r);
    r.prompt_ids = prompt;
    r.n_prompt_ids = n_prompt;
    r.sampling.temperature = 0.0f;
    r.stop.max_tokens = 2;
    r.logprobs.enabled = true;
    r.logprobs.prompt_logprobs = true;
    r.cache.mode = TW_CACHE_BYPASS;
    collected *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    run(e, &r, a);
    r.stop.prompt_only = true;
    run(e, &r, b);
    assert_int_equal(b->n, 0);
    assert_int_equal(b->finish, TW_FINISH_LENGTH);
    assert_int_equal(b->n_prompt, n_prompt);
    assert_memory_equal(b->prompt_lp + 1, a->prompt_lp + 1, (n_prompt - 1) * sizeof(float));
    free(a);
    free(b);
    free(prompt);
    tw_engine_destroy(e);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 2;
    }
    g_model = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forced_tokens_have_logprobs),
        cmocka_unit_test(test_prompt_logprobs_on_every_choice),
        cmocka_unit_test(test_prompt_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
