/* The prompt caches through the engine API on every golden family: greedy
 * output with the caches equals output without them, token for token and
 * every token's log-probability bit for bit, for a repeated prompt, an
 * extended one (the next turn of a conversation), one whose rest after the
 * cached prefix is shorter than the engine's chunk, and after the engine is
 * re-created on the same state directory (a disk hit). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "golden_families.h"
#include "tw/engine.h"
#include "tw/kernels.h"
#include "tw/pool.h"
#include "tw/sampler.h"

#define OUT_MAX 64
#define ANSWER 6

#define PROMPT_MAX 400

typedef struct result {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t ids[OUT_MAX];
    float lp[OUT_MAX]; /* each token's log-probability */
    size_t n;
    /* prompt_logprobs: each prompt token's, and its best alternative */
    uint32_t prompt_ids[PROMPT_MAX], prompt_best[PROMPT_MAX];
    float prompt_lp[PROMPT_MAX];
    size_t n_prompt, prompt_chunks;
    bool final;
    tw_status error;
    tw_usage usage;
} result;

static void on_chunk(void *user, const tw_gen_chunk *ch)
{
    result *r = user;
    pthread_mutex_lock(&r->mu);
    if (ch->prompt_logprobs) {
        r->prompt_chunks++;
        for (size_t i = 0; i < ch->n_prompt_logprobs && i < PROMPT_MAX; i++) {
            const tw_token_logprob *p = &ch->prompt_logprobs[i];
            r->prompt_ids[i] = p->token_id;
            r->prompt_lp[i] = p->logprob;
            r->prompt_best[i] = p->n_top ? p->top[0].token_id : UINT32_MAX;
        }
        r->n_prompt = ch->n_prompt_logprobs;
    }
    for (size_t i = 0; i < ch->n_token_ids && r->n < OUT_MAX; i++) {
        r->lp[r->n] = ch->logprobs ? ch->logprobs[i].logprob : 1.0f;
        r->ids[r->n++] = ch->token_ids[i];
    }
    if (ch->final) {
        r->final = true;
        r->error = ch->error;
        r->usage = *ch->usage;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
}

/* Runs one greedy request to the end, with the prompt's log-probabilities
 * (and one alternative) when prompt_lps. */
static void run_asking(tw_engine *e, const uint32_t *prompt, size_t n, tw_cache_mode mode,
                       bool persist, bool prompt_lps, result *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_init(&out->mu, NULL);
    pthread_cond_init(&out->cv, NULL);
    tw_gen_request r;
    tw_gen_request_init(&r);
    r.prompt_ids = prompt;
    r.n_prompt_ids = n;
    r.sampling.temperature = 0.0f;
    r.stop.max_tokens = ANSWER;
    r.stop.ignore_eos = true;
    r.cache.mode = mode;
    r.cache.persist = persist;
    r.logprobs.enabled = true;
    r.logprobs.prompt_logprobs = prompt_lps;
    r.logprobs.top_logprobs = prompt_lps ? 1 : 0;
    tw_gen_callbacks cb = {.on_chunk = on_chunk};
    tw_err err;
    uint64_t id;
    if (tw_engine_submit(e, &r, &cb, out, &id, &err) != TW_OK)
        fail_msg("submit: %s", err.msg);
    bool done = tw_test_wait_done(&out->mu, &out->cv, &out->final, 60);
    pthread_mutex_destroy(&out->mu);
    pthread_cond_destroy(&out->cv);
    assert_true(done);
    assert_int_equal(out->error, TW_OK);
    assert_int_equal(out->n, ANSWER);
    for (size_t i = 0; i < ANSWER; i++)
        assert_true(out->lp[i] <= 0.0f);
    assert_int_equal(out->prompt_chunks, prompt_lps ? 1 : 0);
}

static void run(tw_engine *e, const uint32_t *prompt, size_t n, tw_cache_mode mode, bool persist,
                result *out)
{
    run_asking(e, prompt, n, mode, persist, false, out);
}

/* The same tokens with the same log-probabilities, to the bit: a cached
 * prefix continues the prompt exactly as reading it whole does. */
static void same_output(const result *a, const result *b)
{
    assert_memory_equal(a->ids, b->ids, sizeof a->ids);
    assert_memory_equal(a->lp, b->lp, sizeof a->lp);
}

static tw_engine *engine_chunk(const char *path, const char *state_dir, tw_kv_type kv,
                               bool prefix_cache_copy, uint32_t prefill_chunk)
{
    tw_engine_opts o;
    tw_engine_opts_init(&o);
    o.kv_type = kv;
    o.prefix_cache_copy = prefix_cache_copy;
    o.threads = 2;
    o.max_batch = 2;
    o.prefill_chunk = prefill_chunk;
    o.max_context = 512;
    o.state_dir = state_dir;
    o.persist_min_tokens = UINT32_MAX;
    tw_engine *e;
    tw_err err;
    if (tw_engine_create(&o, &e, &err) != TW_OK)
        fail_msg("engine: %s", err.msg);
    if (tw_engine_load_model(e, path, NULL, NULL, NULL, &err) != TW_OK)
        fail_msg("load %s: %s", path, err.msg);
    return e;
}

static tw_engine *engine_with(const char *path, const char *state_dir, tw_kv_type kv,
                              bool prefix_cache_copy)
{
    return engine_chunk(path, state_dir, kv, prefix_cache_copy, 128);
}

static tw_engine *engine_on(const char *path, const char *state_dir, tw_kv_type kv)
{
    return engine_with(path, state_dir, kv, false);
}

static void stats(tw_engine *e, tw_engine_stats *st)
{
    tw_err err;
    assert_int_equal(tw_engine_stats_get(e, NULL, st, &err), TW_OK);
}

#define P1 200 /* last whole block ends at 192 */
#define P2 330 /* P1 + an answer and the next question */
/* Read whole, its chunk [128, 212) attends by matrix products; after the
 * 192 cached tokens its rest, 20 rows, takes the per-row kernels unless
 * the prefill steps keep the part group apart either way. */
#define P3 212

/* Returns the prompt tokens restored by mapping the prefix cache's pages:
 * all of those from memory where the model's K/V rows fill pages, else
 * none. */
static uint64_t check_family(const char *path, const char *state_dir, tw_kv_type kv)
{
    tw_test_rng rng = {0xcafe};
    uint32_t prompt[P2];
    tw_engine *e = engine_on(path, state_dir, kv);
    tw_engine_model_info info;
    tw_err err;
    assert_int_equal(tw_engine_get_model(e, NULL, &info, &err), TW_OK);
    random_tokens(&rng, prompt, P2, info.vocab_size);
    result cold1, cold2, cold3, r;
    run(e, prompt, P1, TW_CACHE_BYPASS, false, &cold1);
    run(e, prompt, P2, TW_CACHE_BYPASS, false, &cold2);
    run(e, prompt, P3, TW_CACHE_BYPASS, false, &cold3);
    tw_engine_stats st;
    stats(e, &st);
    assert_int_equal(st.prefix_cache_lookups, 0);

    /* First sight: computed cold, cached; persisted to disk. */
    run(e, prompt, P1, TW_CACHE_USE, true, &r);
    same_output(&r, &cold1);
    assert_int_equal(r.usage.cached_prompt_tokens, 0);
    /* Repeated: 192 tokens from memory. */
    run(e, prompt, P1, TW_CACHE_USE, false, &r);
    same_output(&r, &cold1);
    assert_int_equal(r.usage.cached_prompt_tokens, 192);
    /* Twenty tokens on: restored, the rest goes alone. */
    run(e, prompt, P3, TW_CACHE_READ_ONLY, false, &r);
    same_output(&r, &cold3);
    assert_int_equal(r.usage.cached_prompt_tokens, 192);
    /* Extended: resumes at the end of the first prompt's last block. */
    run(e, prompt, P2, TW_CACHE_USE, false, &r);
    same_output(&r, &cold2);
    assert_int_equal(r.usage.cached_prompt_tokens, 192);
    /* And again: now its own last block (320) is cached. */
    run(e, prompt, P2, TW_CACHE_READ_ONLY, false, &r);
    same_output(&r, &cold2);
    assert_int_equal(r.usage.cached_prompt_tokens, 320);
    /* WRITE_ONLY never restores. */
    run(e, prompt, P2, TW_CACHE_WRITE_ONLY, false, &r);
    same_output(&r, &cold2);
    assert_int_equal(r.usage.cached_prompt_tokens, 0);
    stats(e, &st);
    assert_int_equal(st.prefix_cache_lookups, 5);
    assert_int_equal(st.prefix_cache_hits, 4);
    assert_int_equal(st.cached_tokens_total, 192 + 192 + 192 + 320);
    const uint64_t shared = st.cached_tokens_shared;
    assert_true(shared == 0 || shared == 192 + 192 + 192 + 320);
    assert_true(st.prefix_cache_bytes > 0);
    tw_engine_destroy(e); /* finishes the disk write */

    /* Re-created on the same directory: the first prompt's state comes
     * from disk (K/V saved in the type the sequences store, so exactly). */
    e = engine_on(path, state_dir, kv);
    run(e, prompt, P1, TW_CACHE_USE, false, &r);
    same_output(&r, &cold1);
    assert_int_equal(r.usage.cached_prompt_tokens, 192);
    stats(e, &st);
    assert_int_equal(st.state_store_hits, 1);
    assert_int_equal(st.prefix_cache_hits, 0);
    assert_int_equal(st.state_store_entries, 1);
    assert_true(st.state_store_bytes > 0);
    /* The disk hit went into memory as well. */
    run(e, prompt, P2, TW_CACHE_USE, false, &r);
    same_output(&r, &cold2);
    assert_int_equal(r.usage.cached_prompt_tokens, 192);
    stats(e, &st);
    assert_int_equal(st.prefix_cache_hits, 1);
    tw_engine_destroy(e);
    return shared;
}

static void test_every_family(void **state)
{
    (void)state;
    bool skipped = false;
    uint64_t shared = 0;
    for (size_t i = 0; i < N_FAMILIES; i++) {
        char path[4096];
        if (!family_path(i, path, sizeof path)) {
            skipped = true;
            continue;
        }
        for (int kv = 0; kv < 2; kv++) {
            char *dir = tw_test_mkdtemp();
            shared += check_family(path, dir, kv ? TW_KV_F16 : TW_KV_F32);
            tw_test_rmtree(dir);
            free(dir);
        }
    }
    /* most of these geometries restore by mapping */
    assert_true(shared > 0);
    if (skipped)
        tw_test_print_skip();
}

/* prefix_cache_copy: the same tokens from the cache, copied instead of
 * mapped, on a model whose rows would map. */
static void test_copy_option(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/qwen3_deep", repo_golden_dir);
    uint32_t prompt[P1];
    tw_test_rng rng = {21};
    random_tokens(&rng, prompt, P1, 256);
    for (int copy = 0; copy < 2; copy++) {
        char *dir = tw_test_mkdtemp();
        tw_engine *e = engine_with(path, dir, TW_KV_F16, copy == 1);
        result cold, r;
        run(e, prompt, P1, TW_CACHE_BYPASS, false, &cold);
        run(e, prompt, P1, TW_CACHE_USE, false, &r);
        run(e, prompt, P1, TW_CACHE_USE, false, &r);
        same_output(&r, &cold);
        assert_int_equal(r.usage.cached_prompt_tokens, 192);
        tw_engine_stats st;
        stats(e, &st);
        assert_int_equal(st.cached_tokens_total, 192);
        assert_int_equal(st.cached_tokens_shared, copy ? 0 : 192);
        tw_engine_destroy(e);
        tw_test_rmtree(dir);
        free(dir);
    }
}

/* The engine's prefill chunk does not change a prompt's output: chunks of
 * any size from one prefill group up cut prompts on group boundaries only,
 * where tw_model_forward gives the bits of a whole read (a chunk that is not
 * a multiple of the group is taken down to one). */
static void chunk_check(const char *path, void *ctx)
{
    (void)ctx;
    static const uint32_t chunks[] = {TW_PREFILL_GROUP, 100, 200, 256, 300};
    tw_test_rng rng = {0xc4c4};
    uint32_t prompt[P2];
    result first, r;
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        char *dir = tw_test_mkdtemp();
        tw_engine *e = engine_chunk(path, dir, TW_KV_F16, false, chunks[c]);
        if (c == 0) {
            tw_engine_model_info info;
            tw_err err;
            assert_int_equal(tw_engine_get_model(e, NULL, &info, &err), TW_OK);
            random_tokens(&rng, prompt, P2, info.vocab_size);
        }
        run(e, prompt, P2, TW_CACHE_BYPASS, false, c ? &r : &first);
        if (c)
            same_output(&r, &first);
        tw_engine_destroy(e);
        tw_test_rmtree(dir);
        free(dir);
    }
}

static void test_prefill_chunk_setting(void **state)
{
    (void)state;
    if (each_family(chunk_check, NULL))
        tw_test_print_skip();
}

/* The prompt's log-probabilities: asked for, the prompt is read whole even
 * with its prefix cached, the answer keeps its bits, each prompt token's
 * value is the log-softmax of the model's logits at the position before it
 * (read through the model API in one call), and the prompt is cached for
 * the requests after it. */
static void prompt_logprobs_check(const char *path, void *ctx)
{
    (void)ctx;
    char *dir = tw_test_mkdtemp();
    tw_engine *e = engine_on(path, dir, TW_KV_F16);
    tw_engine_model_info info;
    tw_err err;
    assert_int_equal(tw_engine_get_model(e, NULL, &info, &err), TW_OK);
    tw_test_rng rng = {0x10b};
    uint32_t prompt[P2];
    random_tokens(&rng, prompt, P2, info.vocab_size);
    result cold, r;
    run(e, prompt, P2, TW_CACHE_BYPASS, false, &cold);
    run(e, prompt, P1, TW_CACHE_USE, false, &r); /* caches the first 192 */
    run_asking(e, prompt, P2, TW_CACHE_USE, false, true, &r);
    same_output(&r, &cold);
    assert_int_equal(r.usage.cached_prompt_tokens, 0);
    assert_int_equal(r.n_prompt, P2);
    assert_true(isnan(r.prompt_lp[0]));
    assert_int_equal(r.prompt_best[0], UINT32_MAX);

    tw_model_opts o = {.max_context = 512, .max_batch = 2, .max_chunk = 128, .kv_type = TW_KV_F16};
    tw_model *m;
    if (tw_model_load(path, &o, &m, &err) != TW_OK)
        fail_msg("load %s: %s", path, err.msg);
    const uint32_t V = info.vocab_size;
    float *logits = malloc((size_t)P2 * V * sizeof(float));
    assert_non_null(logits);
    tw_seq *seq;
    tw_pool *pool;
    assert_int_equal(tw_pool_create(2, &pool, &err), TW_OK);
    assert_int_equal(tw_seq_create(m, 0, &seq, &err), TW_OK);
    assert_int_equal(tw_model_forward(m, pool, seq, prompt, P2, logits, TW_LOGITS_ALL, &err),
                     TW_OK);
    tw_pool_destroy(pool);
    for (size_t i = 1; i < P2; i++) {
        float want;
        tw_top_logprob best;
        tw_logprobs_of_row(logits + (i - 1) * V, V, prompt[i], 1, &want, &best);
        assert_int_equal(r.prompt_ids[i], prompt[i]);
        if (memcmp(&r.prompt_lp[i], &want, sizeof want) != 0)
            fail_msg("%s: prompt token %zu: %.9g, the model's logits give %.9g", path, i,
                     (double)r.prompt_lp[i], (double)want);
        assert_int_equal(r.prompt_best[i], best.token_id);
    }
    tw_seq_free(seq);
    tw_model_free(m);
    free(logits);

    /* it went into the cache as it was read */
    run(e, prompt, P2, TW_CACHE_READ_ONLY, false, &r);
    same_output(&r, &cold);
    assert_int_equal(r.usage.cached_prompt_tokens, 320);
    tw_engine_destroy(e);
    tw_test_rmtree(dir);
    free(dir);
}

static void test_prompt_logprobs(void **state)
{
    (void)state;
    if (each_family(prompt_logprobs_check, NULL))
        tw_test_print_skip();
}

/* Caching turned off entirely: nothing is looked up, output unchanged. */
static void test_caches_off(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/qwen3_5_mix", repo_golden_dir);
    tw_engine_opts o;
    tw_engine_opts_init(&o);
    o.threads = 2;
    o.max_context = 512;
    o.no_prefix_cache = true;
    o.no_state_store = true;
    tw_engine *e;
    tw_err err;
    assert_int_equal(tw_engine_create(&o, &e, &err), TW_OK);
    assert_int_equal(tw_engine_load_model(e, path, NULL, NULL, NULL, &err), TW_OK);
    uint32_t prompt[P1];
    tw_test_rng rng = {7};
    random_tokens(&rng, prompt, P1, 256);
    result a, b;
    run(e, prompt, P1, TW_CACHE_USE, true, &a);
    run(e, prompt, P1, TW_CACHE_USE, true, &b);
    same_output(&a, &b);
    assert_int_equal(b.usage.cached_prompt_tokens, 0);
    tw_engine_stats st;
    stats(e, &st);
    assert_int_equal(st.prefix_cache_lookups + st.state_store_lookups, 0);
    tw_engine_destroy(e);
}

int main(int argc, char **argv)
{
    repo_golden_dir = argc > 1 ? argv[1] : "tests/data/golden";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_family),    cmocka_unit_test(test_caches_off),
        cmocka_unit_test(test_copy_option),     cmocka_unit_test(test_prefill_chunk_setting),
        cmocka_unit_test(test_prompt_logprobs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
