/* Embeddings pooled as the model's files say (TW_POOLING_MODEL): the golden
 * qwen2 checkpoint loaded several times, its config naming mean pooling, cls
 * pooling or none, or a sentence-transformers pooling module beside it
 * naming mean or max pooling. */
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

#include "test_support.h"
#include "tw/engine.h"

#define DIM_MAX 4096

typedef struct answer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool final;
    tw_status error;
    float vec[DIM_MAX];
    size_t n;
} answer;

static void on_chunk(void *user, const tw_gen_chunk *ch)
{
    answer *a = user;
    pthread_mutex_lock(&a->mu);
    if (ch->embedding && ch->n_embedding <= DIM_MAX) {
        memcpy(a->vec, ch->embedding, ch->n_embedding * sizeof(float));
        a->n = ch->n_embedding;
    }
    if (ch->final) {
        a->final = true;
        a->error = ch->error;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
}

typedef struct fixture {
    tw_engine *e;
    char *dir;
    uint32_t prompt[16];
} fixture;

static int setup(void **state)
{
    *state = NULL;
    const char *shared = tw_test_shared_dir();
    if (!shared)
        return 0;
    fixture *f = calloc(1, sizeof *f);
    if (!f || !(f->dir = tw_test_mkdtemp()))
        return -1;
    static const char *const names[] = {"unsaid", "mean", "cls", "st_mean", "st_max"};
    static const char *const poolings[] = {NULL, "mean", "cls", NULL, NULL};
    static const char *const modules[] = {
        NULL, NULL, NULL,
        "{\"word_embedding_dimension\": 64, \"pooling_mode_cls_token\": false,"
        " \"pooling_mode_mean_tokens\": true, \"pooling_mode_lasttoken\": false}",
        "{\"pooling_mode_max_tokens\": true, \"pooling_mode_mean_tokens\": false}"};
    tw_engine_opts o;
    tw_engine_opts_init(&o);
    o.threads = 2;
    o.max_context = 256;
    tw_err err;
    if (tw_engine_create(&o, &f->e, &err) != TW_OK) {
        fprintf(stderr, "engine: %s\n", err.msg);
        return -1;
    }
    for (size_t i = 0; i < 5; i++) {
        if (tw_test_golden_checkpoint(f->dir, names[i], poolings[i], modules[i]) != 0)
            return -1;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", f->dir, names[i]);
        tw_engine_model_info info;
        if (tw_engine_load_model(f->e, path, names[i], NULL, &info, &err) != TW_OK) {
            fprintf(stderr, "load %s: %s\n", names[i], err.msg);
            return -1;
        }
    }
    for (size_t i = 0; i < 16; i++)
        f->prompt[i] = (uint32_t)(17 + 61 * i) % 1000;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f) {
        tw_engine_destroy(f->e);
        tw_test_rmtree(f->dir);
        free(f->dir);
        free(f);
    }
    return 0;
}

/* The prompt's vector from `model` pooled by `pooling`, unnormalized: the
 * submit's status (an error ends the answer before any vector). */
static tw_status embed(fixture *f, const char *model, tw_pooling pooling, answer *a, tw_err *err)
{
    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    tw_gen_request r;
    tw_gen_request_init(&r);
    r.model = model;
    r.prompt_kind = TW_PROMPT_TOKENS;
    r.prompt_ids = f->prompt;
    r.n_prompt_ids = 16;
    r.embed.pooling = pooling;
    r.embed.normalize = false;
    tw_gen_callbacks cb = {on_chunk};
    uint64_t id;
    tw_status st = tw_engine_submit(f->e, &r, &cb, a, &id, err);
    if (st == TW_OK) {
        pthread_mutex_lock(&a->mu);
        while (!a->final)
            pthread_cond_wait(&a->cv, &a->mu);
        pthread_mutex_unlock(&a->mu);
        assert_int_equal(a->error, TW_OK);
        assert_true(a->n > 0);
    }
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    return st;
}

#define REQUIRE_FIXTURE(f)                                                                         \
    fixture *f = *state;                                                                           \
    if (!f) {                                                                                      \
        tw_test_print_skip();                                                                      \
        skip();                                                                                    \
    }

static void test_model_pooling(void **state)
{
    REQUIRE_FIXTURE(f);
    tw_err err;
    static answer a, b, c;
    /* a config naming mean pooling: the model's pooling is the mean's bits */
    assert_int_equal(embed(f, "mean", TW_POOLING_MODEL, &a, &err), TW_OK);
    assert_int_equal(embed(f, "mean", TW_POOLING_MEAN, &b, &err), TW_OK);
    assert_int_equal(embed(f, "mean", TW_POOLING_LAST, &c, &err), TW_OK);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.vec, b.vec, a.n * sizeof(float));
    assert_memory_not_equal(a.vec, c.vec, a.n * sizeof(float));

    /* naming none: the last token's */
    assert_int_equal(embed(f, "unsaid", TW_POOLING_MODEL, &a, &err), TW_OK);
    assert_memory_equal(a.vec, c.vec, a.n * sizeof(float));

    /* naming one the engine does not compute: refused at submit, saying
     * which; asked for by name, the model still embeds */
    assert_int_equal(embed(f, "cls", TW_POOLING_MODEL, &a, &err), TW_FAILED_PRECONDITION);
    assert_non_null(strstr(err.msg, "cls"));
    assert_int_equal(embed(f, "cls", TW_POOLING_LAST, &a, &err), TW_OK);
    assert_memory_equal(a.vec, c.vec, a.n * sizeof(float));
    assert_int_equal(embed(f, "cls", (tw_pooling)(TW_POOLING_CLS + 1), &a, &err),
                     TW_INVALID_ARGUMENT);
    /* a decoder's first state sees its first token alone: CLS is refused */
    assert_int_equal(embed(f, "unsaid", TW_POOLING_CLS, &a, &err), TW_FAILED_PRECONDITION);
    assert_non_null(strstr(err.msg, "decoder"));

    /* a sentence-transformers module naming the mean says what the config
     * does not; one naming max pooling (which a GGUF cannot say either)
     * leaves the model's pooling unsaid */
    assert_int_equal(embed(f, "st_mean", TW_POOLING_MODEL, &a, &err), TW_OK);
    assert_memory_equal(a.vec, b.vec, a.n * sizeof(float));
    assert_int_equal(embed(f, "st_max", TW_POOLING_MODEL, &a, &err), TW_OK);
    assert_memory_equal(a.vec, c.vec, a.n * sizeof(float));
}

/* The engine's model list says what each model's files name. */
static void test_listed(void **state)
{
    REQUIRE_FIXTURE(f);
    tw_engine_model_info *list;
    size_t n;
    assert_int_equal(tw_engine_list_models(f->e, &list, &n, NULL), TW_OK);
    static const char *const want[][2] = {{"unsaid", "unsaid"},
                                          {"mean", "mean"},
                                          {"cls", "cls"},
                                          {"st_mean", "mean"},
                                          {"st_max", "unsaid"}};
    size_t seen = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < 5; k++)
            if (strcmp(list[i].name, want[k][0]) == 0) {
                assert_non_null(list[i].pooling);
                assert_string_equal(list[i].pooling, want[k][1]);
                seen++;
            }
    assert_int_equal(seen, 5);
    free(list);
}

/* A pooling module that is not a JSON object stops the load, naming it. */
static void test_bad_module(void **state)
{
    REQUIRE_FIXTURE(f);
    assert_int_equal(tw_test_golden_checkpoint(f->dir, "st_bad", NULL, "[true]"), 0);
    char path[4096];
    snprintf(path, sizeof path, "%s/st_bad", f->dir);
    tw_engine_model_info info;
    tw_err err;
    assert_int_equal(tw_engine_load_model(f->e, path, "st_bad", NULL, &info, &err),
                     TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "1_Pooling/config.json"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_pooling),
        cmocka_unit_test(test_listed),
        cmocka_unit_test(test_bad_module),
    };
    return cmocka_run_group_tests_name("core/generate/embed_pooling", tests, setup, teardown);
}
