/* The engine end to end on a golden model (ids only: golden models have no
 * tokenizer). Skips when the reference data is absent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_support.h"
#include "tw/engine.h"

#define MAX_CHOICES 4
#define MAX_OUT 4096

typedef struct collect {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    tw_engine *e;
    uint64_t id;
    uint32_t ids[MAX_CHOICES][MAX_OUT];
    size_t n[MAX_CHOICES];
    tw_finish_reason finish[MAX_CHOICES];
    size_t finish_chunks;
    bool final;
    int chunks_after_final;
    tw_usage usage;
    tw_status error;
    size_t cancel_after; /* cancel from the callback after this many tokens (0: never) */
    bool want_logprobs;
    bool logprobs_ok;
    long slow_ns; /* sleep in the callback, to keep a request running */
    /* Per choice: the number, among every request's chunks that carried
     * tokens (token_chunks), of its first and second such chunk (0: none
     * yet). */
    size_t first_at[MAX_CHOICES], second_at[MAX_CHOICES];
    float embedding[4096]; /* an embedding request's vector */
    size_t n_embedding;
} collect;

static atomic_size_t token_chunks;

static void collect_init(collect *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->logprobs_ok = true;
}

static void collect_destroy(collect *c)
{
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

static void on_chunk(void *user, const tw_gen_chunk *ch)
{
    collect *c = user;
    pthread_mutex_lock(&c->mu);
    if (c->final)
        c->chunks_after_final++;
    if (ch->index < MAX_CHOICES) {
        if (ch->n_token_ids) {
            const size_t at = atomic_fetch_add(&token_chunks, 1) + 1;
            if (!c->first_at[ch->index])
                c->first_at[ch->index] = at;
            else if (!c->second_at[ch->index])
                c->second_at[ch->index] = at;
        }
        for (size_t i = 0; i < ch->n_token_ids && c->n[ch->index] < MAX_OUT; i++)
            c->ids[ch->index][c->n[ch->index]++] = ch->token_ids[i];
        if (c->want_logprobs && ch->n_token_ids) {
            if (!ch->logprobs)
                c->logprobs_ok = false;
            for (size_t i = 0; ch->logprobs && i < ch->n_token_ids; i++) {
                const tw_token_logprob *lp = &ch->logprobs[i];
                /* Greedy: the chosen token is the best alternative. */
                if (lp->token_id != ch->token_ids[i] || lp->n_top != 5 ||
                    lp->top[0].token_id != lp->token_id || lp->logprob > 0.0f ||
                    lp->top[0].logprob != lp->logprob)
                    c->logprobs_ok = false;
            }
        }
        if (ch->finish_reason != TW_FINISH_NONE) {
            c->finish[ch->index] = ch->finish_reason;
            c->finish_chunks++;
        }
    }
    bool cancel = c->cancel_after && c->n[0] >= c->cancel_after;
    /* Once the final chunk is signalled the waiter may free c: what the
     * rest of the callback needs is read before that. */
    long slow_ns = c->slow_ns;
    tw_engine *e = c->e;
    bool final = ch->final;
    if (ch->embedding && ch->n_embedding <= 4096) {
        memcpy(c->embedding, ch->embedding, ch->n_embedding * sizeof(float));
        c->n_embedding = ch->n_embedding;
    }
    if (final) {
        c->final = true;
        c->usage = *ch->usage;
        c->error = ch->error;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    if (cancel && !final)
        tw_engine_cancel(e, ch->req_id); /* allowed from the callback */
    if (slow_ns && !final)
        nanosleep(&(struct timespec){0, slow_ns}, NULL);
}

static void wait_final(collect *c)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 60;
    pthread_mutex_lock(&c->mu);
    while (!c->final)
        if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) != 0)
            break;
    bool done = c->final;
    pthread_mutex_unlock(&c->mu);
    assert_true(done);
}

typedef struct golden {
    uint32_t input[64];
    size_t n_input;
    uint32_t greedy[64];
    size_t n_greedy;
} golden;

static void read_ids(json_t *arr, uint32_t *out, size_t *n)
{
    assert_true(json_is_array(arr));
    *n = json_array_size(arr);
    assert_true(*n <= 64);
    for (size_t i = 0; i < *n; i++)
        out[i] = (uint32_t)json_integer_value(json_array_get(arr, i));
}

typedef struct fixture {
    tw_engine *e;
    golden g;
} fixture;

static int setup(void **state)
{
    const char *dir = tw_test_shared_dir();
    if (!dir) {
        *state = NULL;
        return 0;
    }
    fixture *f = calloc(1, sizeof *f);
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/qwen2/golden.json", dir);
    json_error_t jerr;
    json_t *j = json_load_file(path, 0, &jerr);
    if (!j) {
        fprintf(stderr, "%s: %s\n", path, jerr.text);
        free(f);
        return -1;
    }
    read_ids(json_object_get(j, "input_ids"), f->g.input, &f->g.n_input);
    read_ids(json_object_get(j, "greedy_ids"), f->g.greedy, &f->g.n_greedy);
    json_decref(j);

    tw_engine_opts o;
    tw_engine_opts_init(&o);
    o.threads = 2;
    o.max_batch = 4;
    o.max_n = 4;
    o.max_queue = 2;
    o.prefill_chunk = 7; /* several chunks per prompt */
    o.max_context = 512;
    tw_err err;
    if (tw_engine_create(&o, &f->e, &err) != TW_OK) {
        fprintf(stderr, "engine: %s\n", err.msg);
        free(f);
        return -1;
    }
    snprintf(path, sizeof path, "%s/golden/qwen2", dir);
    tw_engine_model_info info;
    if (tw_engine_load_model(f->e, path, NULL, NULL, &info, &err) != TW_OK) {
        fprintf(stderr, "load: %s\n", err.msg);
        tw_engine_destroy(f->e);
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f) {
        tw_engine_destroy(f->e);
        free(f);
    }
    return 0;
}

#define REQUIRE_FIXTURE(f)                                                                     \
    fixture *f = *state;                                                                       \
    if (!f) {                                                                                  \
        tw_test_print_skip();                                                                  \
        skip();                                                                                \
        return;                                                                                \
    }

static void greedy_request(tw_gen_request *r, const uint32_t *ids, size_t n, uint32_t max)
{
    tw_gen_request_init(r);
    r->prompt_kind = TW_PROMPT_TOKENS;
    r->prompt_ids = ids;
    r->n_prompt_ids = n;
    r->sampling.temperature = 0.0f;
    r->stop.max_tokens = max;
    r->stop.ignore_eos = true;
}

static void run(fixture *f, const tw_gen_request *r, collect *c)
{
    tw_err err;
    c->e = f->e;
    tw_gen_callbacks cb = {on_chunk};
    tw_status st = tw_engine_submit(f->e, r, &cb, c, &c->id, &err);
    if (st != TW_OK)
        fail_msg("submit: %s", err.msg);
    wait_final(c);
}

/* An embedding of the golden prompt through the engine (7-token prefill
 * chunks), whose vector is checked against the hidden states of the model
 * loaded on its own. */
static void embed(fixture *f, tw_pooling pooling, bool normalize, collect *c)
{
    tw_gen_request r;
    tw_gen_request_init(&r);
    r.prompt_kind = TW_PROMPT_TOKENS;
    r.prompt_ids = f->g.input;
    r.n_prompt_ids = f->g.n_input;
    r.embed.pooling = pooling;
    r.embed.normalize = normalize;
    collect_init(c);
    run(f, &r, c);
    assert_int_equal(c->error, TW_OK);
    assert_int_equal(c->finish[0], TW_FINISH_STOP);
    assert_int_equal(c->n[0], 0);
    assert_int_equal(c->usage.prompt_tokens, f->g.n_input);
    assert_int_equal(c->usage.completion_tokens, 0);
    collect_destroy(c);
}

static void assert_close(const float *got, const double *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (fabs(got[i] - want[i]) > 1e-4 * (1 + fabs(want[i])))
            fail_msg("%s: element %zu is %g, want %g", what, i, got[i], want[i]);
}

static void test_embeddings(void **state)
{
    REQUIRE_FIXTURE(f);
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/qwen2", tw_test_shared_dir());
    tw_err err;
    tw_model *m;
    tw_model_opts mo = {.max_context = 512, .max_batch = 4, .max_chunk = 256};
    assert_int_equal(tw_model_load(path, &mo, &m, &err), TW_OK);
    const size_t H = tw_model_get_info(m)->hidden, n = f->g.n_input;
    tw_seq *seq;
    assert_int_equal(tw_seq_create(m, 512, &seq, &err), TW_OK);
    float *rows = malloc(n * H * sizeof(float));
    assert_int_equal(tw_model_forward(m, NULL, seq, f->g.input, n, rows, TW_HIDDEN_ALL, &err),
                     TW_OK);
    double *last = calloc(H, sizeof(double)), *mean = calloc(H, sizeof(double));
    double norm = 0;
    for (size_t d = 0; d < H; d++) {
        last[d] = rows[(n - 1) * H + d];
        for (size_t p = 0; p < n; p++)
            mean[d] += rows[p * H + d] / (double)n;
        norm += mean[d] * mean[d];
    }
    collect c;
    embed(f, TW_POOLING_LAST, false, &c);
    assert_int_equal(c.n_embedding, H);
    assert_close(c.embedding, last, H, "last token");
    /* again: the prompt's prefix now comes from the cache, the same bits */
    float first[4096];
    memcpy(first, c.embedding, H * sizeof(float));
    embed(f, TW_POOLING_LAST, false, &c);
    assert_memory_equal(c.embedding, first, H * sizeof(float));
    for (size_t d = 0; d < H; d++)
        mean[d] /= sqrt(norm);
    embed(f, TW_POOLING_MEAN, true, &c);
    assert_int_equal(c.n_embedding, H);
    assert_close(c.embedding, mean, H, "normalized mean");
    double unit = 0;
    for (size_t d = 0; d < H; d++)
        unit += (double)c.embedding[d] * c.embedding[d];
    assert_true(fabs(unit - 1.0) < 1e-5);

    /* what an embedding cannot be */
    tw_gen_request r;
    tw_gen_request_init(&r);
    r.prompt_kind = TW_PROMPT_TOKENS;
    r.prompt_ids = f->g.input;
    r.n_prompt_ids = n;
    r.embed.pooling = TW_POOLING_LAST;
    r.n = 2;
    tw_gen_callbacks cb = {on_chunk};
    uint64_t id;
    assert_int_equal(tw_engine_submit(f->e, &r, &cb, &c, &id, &err), TW_INVALID_ARGUMENT);
    r.n = 1;
    r.embed.pooling = (tw_pooling)7;
    assert_int_equal(tw_engine_submit(f->e, &r, &cb, &c, &id, &err), TW_INVALID_ARGUMENT);
    free(rows);
    free(last);
    free(mean);
    tw_seq_free(seq);
    tw_model_free(m);
}

static void test_model_listed(void **state)
{
    REQUIRE_FIXTURE(f);
    tw_engine_model_info *list;
    size_t n;
    assert_int_equal(tw_engine_list_models(f->e, &list, &n, NULL), TW_OK);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].name, "qwen2");
    assert_true(list[0].is_default);
    assert_int_equal(list[0].vocab_size, 1024);
    assert_int_equal(list[0].max_context, 512);
    assert_false(list[0].has_tokenizer);
    free(list);
}

static void test_greedy_matches_golden(void **state)
{
    REQUIRE_FIXTURE(f);
    tw_gen_request r;
    greedy_request(&r, f->g.input, f->g.n_input, (uint32_t)f->g.n_greedy);
    r.logprobs.enabled = true;
    r.logprobs.top_logprobs = 5;
    collect c;
    collect_init(&c);
    c.want_logprobs = true;
    run(f, &r, &c);
    assert_int_equal(c.error, TW_OK);
    assert_int_equal(c.n[0], f->g.n_greedy);
    assert_memory_equal(c.ids[0], f->g.greedy, f->g.n_greedy * sizeof(uint32_t));
    assert_int_equal(c.finish[0], TW_FINISH_LENGTH);
    assert_true(c.logprobs_ok);
    assert_int_equal(c.usage.prompt_tokens, f->g.n_input);
    assert_int_equal(c.usage.completion_tokens, f->g.n_greedy);
    assert_true(c.usage.prefill_us > 0 && c.usage.decode_us > 0);
    assert_int_equal(c.chunks_after_final, 0);
    collect_destroy(&c);
}

/* Several requests in one batch give what each gives alone. */
static void test_batched_equals_sequential(void **state)
{
    REQUIRE_FIXTURE(f);
    enum { N = 3 };
    const size_t lens[N] = {24, 17, 9};
    tw_gen_request r[N];
    collect alone[N], together[N];
    for (int i = 0; i < N; i++) {
        greedy_request(&r[i], f->g.input, lens[i], 20);
        if (i == 2) { /* one sampled request: its seed makes it reproducible */
            r[i].sampling.temperature = 0.8f;
            r[i].sampling.top_k = 40;
            r[i].sampling.has_seed = true;
            r[i].sampling.seed = 1234;
        }
        collect_init(&alone[i]);
        run(f, &r[i], &alone[i]);
        assert_int_equal(alone[i].n[0], 20);
    }
    tw_gen_callbacks cb = {on_chunk};
    for (int i = 0; i < N; i++) {
        collect_init(&together[i]);
        together[i].e = f->e;
        /* The queue holds 2: let the scheduler drain it between submits. */
        tw_status st;
        tw_err err;
        while ((st = tw_engine_submit(f->e, &r[i], &cb, &together[i], &together[i].id, &err)) ==
               TW_RESOURCE_EXHAUSTED)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        assert_int_equal(st, TW_OK);
    }
    for (int i = 0; i < N; i++) {
        wait_final(&together[i]);
        assert_int_equal(together[i].n[0], 20);
        assert_memory_equal(together[i].ids[0], alone[i].ids[0], 20 * sizeof(uint32_t));
        collect_destroy(&alone[i]);
        collect_destroy(&together[i]);
    }
    /* The greedy one also matches the golden continuation. */
}

static void test_n_choices_and_seeds(void **state)
{
    REQUIRE_FIXTURE(f);
    tw_gen_request r;
    greedy_request(&r, f->g.input, f->g.n_input, 12);
    r.sampling.temperature = 1.5f;
    r.sampling.has_seed = true;
    r.sampling.seed = 99;
    r.n = 3;
    collect a, b;
    collect_init(&a);
    collect_init(&b);
    run(f, &r, &a);
    run(f, &r, &b);
    assert_int_equal(a.finish_chunks, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(a.n[i], 12);
        assert_int_equal(a.finish[i], TW_FINISH_LENGTH);
        assert_memory_equal(a.ids[i], b.ids[i], 12 * sizeof(uint32_t));
    }
    /* Choices draw from different streams. */
    assert_memory_not_equal(a.ids[0], a.ids[1], 12 * sizeof(uint32_t));
    assert_int_equal(a.usage.completion_tokens, 36);
    collect_destroy(&a);
    collect_destroy(&b);
}

/* Choices 0..n-1 of one request, whose prompts are prefilled together or
 * not: true when each of the choices in [a, b) had its first tokens before
 * any of them had its second. */
static bool started_together(const collect *c, size_t a, size_t b)
{
    size_t last_first = 0, first_second = SIZE_MAX;
    for (size_t i = a; i < b; i++) {
        assert_true(c->first_at[i] && c->second_at[i]);
        if (c->first_at[i] > last_first)
            last_first = c->first_at[i];
        if (c->second_at[i] < first_second)
            first_second = c->second_at[i];
    }
    return last_first < first_second;
}

/* Prompts that fit one step's prefill_chunk (7 here) together all start in
 * that step, rather than one per step while the others decode; a prompt
 * that would take the step past it waits for the next. */
static void test_short_prompts_start_together(void **state)
{
    REQUIRE_FIXTURE(f);
    tw_gen_request r;
    greedy_request(&r, f->g.input, 1, 4);
    r.n = 4; /* four one-token prompts: 4 of 7 */
    collect c;
    collect_init(&c);
    run(f, &r, &c);
    assert_int_equal(c.finish_chunks, 4);
    assert_true(started_together(&c, 0, 4));
    collect_destroy(&c);

    greedy_request(&r, f->g.input, 2, 4);
    r.n = 4; /* four two-token prompts: the fourth would make 8 of 7 */
    collect_init(&c);
    run(f, &r, &c);
    assert_true(started_together(&c, 0, 3));
    assert_false(started_together(&c, 0, 4));
    for (size_t i = 0; i < 4; i++)
        assert_memory_equal(c.ids[i], c.ids[0], 4 * sizeof(uint32_t));
    collect_destroy(&c);
}

/* A prompt whose rest fits a quarter of prefill_chunk (7 / 4: one token)
 * and that arrives while a long one is being read starts at once, ahead of
 * the long prompt's remaining chunks, instead of after its last one; both
 * still give what they give alone. */
static void test_short_prompt_overtakes_long(void **state)
{
    REQUIRE_FIXTURE(f);
    enum { LONG = 490 };
    uint32_t lng[LONG];
    for (size_t i = 0; i < LONG; i++)
        lng[i] = f->g.input[i % f->g.n_input];
    tw_gen_request rl, rs;
    greedy_request(&rl, lng, LONG, 2);
    greedy_request(&rs, f->g.input, 1, 2);
    /* every chunk read, none restored from what an earlier run cached */
    rl.cache.mode = rs.cache.mode = TW_CACHE_BYPASS;
    collect alone, alone_long;
    collect_init(&alone);
    collect_init(&alone_long);
    run(f, &rs, &alone);
    run(f, &rl, &alone_long);
    tw_gen_callbacks cb = {on_chunk};
    tw_err err;
    /* The short prompt must come while the long one is still being read
     * (70 steps): a run where the long one had started answering first
     * proves nothing and goes again. */
    for (int attempt = 0;; attempt++) {
        assert_true(attempt < 3);
        collect cl, cs;
        collect_init(&cl);
        collect_init(&cs);
        cl.e = cs.e = f->e;
        assert_int_equal(tw_engine_submit(f->e, &rl, &cb, &cl, &cl.id, &err), TW_OK);
        assert_int_equal(tw_engine_submit(f->e, &rs, &cb, &cs, &cs.id, &err), TW_OK);
        pthread_mutex_lock(&cl.mu);
        bool late = cl.first_at[0] != 0;
        pthread_mutex_unlock(&cl.mu);
        wait_final(&cl);
        wait_final(&cs);
        bool overtook = cs.first_at[0] < cl.first_at[0];
        assert_int_equal(cs.n[0], 2);
        assert_memory_equal(cs.ids[0], alone.ids[0], 2 * sizeof(uint32_t));
        assert_int_equal(cl.n[0], 2);
        assert_memory_equal(cl.ids[0], alone_long.ids[0], 2 * sizeof(uint32_t));
        collect_destroy(&cl);
        collect_destroy(&cs);
        if (late)
            continue;
        assert_true(overtook);
        break;
    }
    collect_destroy(&alone);
    collect_destroy(&alone_long);
}

static void test_stop_token_ends_with_stop(void **state)
{
    REQUIRE_FIXTURE(f);
    /* The first greedy token not seen before index 5 ends the answer there. */
    size_t at = 5;
    for (;; at++) {
        bool earlier = false;
        for (size_t k = 0; k < at; k++)
            earlier |= f->g.greedy[k] == f->g.greedy[at];
        if (!earlier)
            break;
    }
    tw_gen_request r;
    greedy_request(&r, f->g.input, f->g.n_input, 32);
    r.stop.stop_token_ids = &f->g.greedy[at];
    r.stop.n_stop_token_ids = 1;
    collect c;
    collect_init(&c);
    run(f, &r, &c);
    assert_int_equal(c.finish[0], TW_FINISH_STOP);
    assert_int_equal(c.n[0], at);
    assert_memory_equal(c.ids[0], f->g.greedy, at * sizeof(uint32_t));
    collect_destroy(&c);
}

static void test_cancel_from_callback(void **state)
{
    REQUIRE_FIXTURE(f);
    tw_gen_request r;
    greedy_request(&r, f->g.input, f->g.n_input, 0); /* until the context is full */
    collect c;
    collect_init(&c);
    c.cancel_after = 3;
    run(f, &r, &c);
    assert_int_equal(c.finish[0], TW_FINISH_CANCELLED);
    assert_true(c.n[0] >= 3 && c.n[0] < 100);
    assert_false(tw_engine_cancel(f->e, c.id)); /* already finished */
    collect_destroy(&c);
}

static void test_deadline(void **state)
{
    REQUIRE_FIXTURE(f);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t now_ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
    tw_gen_request r;
    greedy_request(&r, f->g.input, f->g.n_input, 0);
    r.deadline_unix_ms = now_ms + 100;
    collect c;
    collect_init(&c);
    c.slow_ns = 2000000;
    run(f, &r, &c);
    assert_int_equal(c.finish[0], TW_FINISH_DEADLINE);
    assert_true(c.n[0] < 480);
    collect_destroy(&c);

    /* Already past: ends at once, nothing generated. */
    r.deadline_unix_ms = now_ms - 1000;
    collect_init(&c);
    run(f, &r, &c);
    assert_int_equal(c.finish[0], TW_FINISH_DEADLINE);
    assert_int_equal(c.n[0], 0);
    collect_destroy(&c);
}

static void test_context_length(void **state)
{
    REQUIRE_FIXTURE(f);
    static uint32_t prompt[500];
    for (size_t i = 0; i < 500; i++)
        prompt[i] = f->g.input[i % f->g.n_input];
    tw_gen_request r;
    greedy_request(&r, prompt, 500, 0);
    collect c;
    collect_init(&c);
    run(f, &r, &c);
    assert_int_equal(c.finish[0], TW_FINISH_CONTEXT_LENGTH);
    /* The last token is output though it no longer fits to be fed back. */
    assert_int_equal(c.n[0], 512 - 500 + 1);
    collect_destroy(&c);
}

static void test_submit_errors(void **state)
{
    REQUIRE_FIXTURE(f);
    tw_gen_callbacks cb = {on_chunk};
    collect c;
    collect_init(&c);
    uint64_t id;
    tw_err err;
    tw_gen_request r;
    greedy_request(&r, f->g.input, f->g.n_input, 4);
    r.model = "nope";
    assert_int_equal(tw_engine_submit(f->e, &r, &cb, &c, &id, &err), TW_NOT_FOUND);
    r.model = NULL;
    uint32_t bad[2] = {1, 1024};
    r.prompt_ids = bad;
    r.n_prompt_ids = 2;
    assert_int_equal(tw_engine_submit(f->e, &r, &cb, &c, &id, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "vocabulary"));
    r.n_prompt_ids = 0;
    assert_int_equal(tw_engine_submit(f->e, &r, &cb, &c, &id, &err), TW_INVALID_ARGUMENT);
    greedy_request(&r, f->g.input, f->g.n_input, 4);
    r.prompt_kind = TW_PROMPT_TEXT;
    r.prompt_text = "hello";
    r.prompt_text_len = 5;
    assert_int_equal(tw_engine_submit(f->e, &r, &cb, &c, &id, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "tokenizer"));
    greedy_request(&r, f->g.input, f->g.n_input, 4);
    r.n = 5;
    assert_int_equal(tw_engine_submit(f->e, &r, &cb, &c, &id, &err), TW_INVALID_ARGUMENT);
    greedy_request(&r, f->g.input, f->g.n_input, 4);
    r.sampling.top_p = 2.0f;
    assert_int_equal(tw_engine_submit(f->e, &r, &cb, &c, &id, &err), TW_INVALID_ARGUMENT);
    /* No callback ran for any refused request. */
    assert_false(c.final);
    assert_int_equal(c.n[0], 0);
    collect_destroy(&c);
}

/* With every slot busy and the queue full, submit answers RESOURCE_EXHAUSTED. */
static void test_queue_full(void **state)
{
    REQUIRE_FIXTURE(f);
    tw_gen_callbacks cb = {on_chunk};
    tw_gen_request r;
    greedy_request(&r, f->g.input, f->g.n_input, 0);
    r.n = 4; /* fills all four slots */
    collect busy, q1, q2;
    collect_init(&busy);
    collect_init(&q1);
    collect_init(&q2);
    busy.e = q1.e = q2.e = f->e;
    busy.slow_ns = 5000000;
    tw_err err;
    assert_int_equal(tw_engine_submit(f->e, &r, &cb, &busy, &busy.id, &err), TW_OK);
    /* Wait until it runs, so the next two stay queued. */
    for (int i = 0; i < 10000; i++) {
        pthread_mutex_lock(&busy.mu);
        size_t got = busy.n[0];
        pthread_mutex_unlock(&busy.mu);
        if (got)
            break;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    r.n = 1;
    assert_int_equal(tw_engine_submit(f->e, &r, &cb, &q1, &q1.id, &err), TW_OK);
    assert_int_equal(tw_engine_submit(f->e, &r, &cb, &q2, &q2.id, &err), TW_OK);
    collect extra;
    collect_init(&extra);
    uint64_t id;
    assert_int_equal(tw_engine_submit(f->e, &r, &cb, &extra, &id, &err), TW_RESOURCE_EXHAUSTED);
    tw_engine_stats st;
    assert_int_equal(tw_engine_stats_get(f->e, NULL, &st, &err), TW_OK);
    assert_int_equal(st.requests_queued, 2);
    assert_int_equal(st.requests_running, 1);
    /* Cancelling a queued request ends it without running it. */
    assert_true(tw_engine_cancel(f->e, q1.id));
    wait_final(&q1);
    assert_int_equal(q1.finish[0], TW_FINISH_CANCELLED);
    assert_int_equal(q1.n[0], 0);
    assert_true(tw_engine_cancel(f->e, busy.id));
    wait_final(&busy);
    for (int i = 0; i < 4; i++)
        assert_int_equal(busy.finish[i], TW_FINISH_CANCELLED);
    assert_true(tw_engine_cancel(f->e, q2.id));
    wait_final(&q2);
    collect_destroy(&busy);
    collect_destroy(&q1);
    collect_destroy(&q2);
    collect_destroy(&extra);
}

/* Unloading a model ends its running requests; destroy ends the rest. */
static void test_unload_and_destroy_end_requests(void **state)
{
    REQUIRE_FIXTURE(f);
    const char *dir = tw_test_shared_dir();
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/qwen2", dir);
    tw_err err;
    tw_load_opts lo;
    tw_load_opts_init(&lo);
    assert_int_equal(tw_engine_load_model(f->e, path, "second", &lo, NULL, &err), TW_OK);
    assert_int_equal(tw_engine_load_model(f->e, path, "second", &lo, NULL, &err),
                     TW_ALREADY_EXISTS);
    tw_gen_callbacks cb = {on_chunk};
    tw_gen_request r;
    greedy_request(&r, f->g.input, f->g.n_input, 0);
    r.model = "second";
    collect c;
    collect_init(&c);
    c.e = f->e;
    c.slow_ns = 2000000;
    assert_int_equal(tw_engine_submit(f->e, &r, &cb, &c, &c.id, &err), TW_OK);
    assert_int_equal(tw_engine_unload_model(f->e, "second", &err), TW_OK);
    wait_final(&c);
    assert_int_equal(c.finish[0], TW_FINISH_CANCELLED);
    assert_int_equal(tw_engine_unload_model(f->e, "second", &err), TW_NOT_FOUND);
    collect_destroy(&c);

    /* A running request at destroy gets its final chunk before destroy returns. */
    tw_engine_opts o;
    tw_engine_opts_init(&o);
    o.threads = 1;
    o.max_batch = 2;
    o.max_context = 256;
    tw_engine *e2;
    assert_int_equal(tw_engine_create(&o, &e2, &err), TW_OK);
    if (tw_engine_load_model(e2, path, NULL, NULL, NULL, &err) != TW_OK)
        fail_msg("load: %s", err.msg);
    r.model = NULL;
    collect d;
    collect_init(&d);
    d.e = e2;
    assert_int_equal(tw_engine_submit(e2, &r, &cb, &d, &d.id, &err), TW_OK);
    tw_engine_destroy(e2);
    assert_true(d.final);
    assert_int_equal(d.finish[0], TW_FINISH_CANCELLED);
    collect_destroy(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_listed),
        cmocka_unit_test(test_greedy_matches_golden),
        cmocka_unit_test(test_batched_equals_sequential),
        cmocka_unit_test(test_n_choices_and_seeds),
        cmocka_unit_test(test_short_prompts_start_together),
        cmocka_unit_test(test_short_prompt_overtakes_long),
        cmocka_unit_test(test_stop_token_ends_with_stop),
        cmocka_unit_test(test_cancel_from_callback),
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_context_length),
        cmocka_unit_test(test_submit_errors),
        cmocka_unit_test(test_queue_full),
        cmocka_unit_test(test_unload_and_destroy_end_requests),
        cmocka_unit_test(test_embeddings),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
