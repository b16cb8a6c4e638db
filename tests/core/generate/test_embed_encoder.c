/* Embeddings from an encoder (the shipped random-weight BERT,
 * tests/data/golden/bert_cls) through the engine: each pooling against what
 * transformers computed, the model's own pooling (its sentence-transformers
 * module says CLS), several inputs at once, an input that fills the
 * position table, and what an encoder refuses. */
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
#include "tw/safetensors.h"

#define H       96
#define N_TEXTS 5
#define MAX_IDS 128

typedef struct answer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool final;
    tw_status error;
    char msg[256];
    float vec[H];
    size_t n;
} answer;

static void on_chunk(void *user, const tw_gen_chunk *ch)
{
    answer *a = user;
    pthread_mutex_lock(&a->mu);
    if (ch->embedding && ch->n_embedding == H) {
        memcpy(a->vec, ch->embedding, H * sizeof(float));
        a->n = ch->n_embedding;
    }
    if (ch->final) {
        a->final = true;
        a->error = ch->error;
        snprintf(a->msg, sizeof a->msg, "%s", ch->error_msg ? ch->error_msg : "");
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
}

typedef struct text {
    uint32_t ids[MAX_IDS];
    size_t n;
    float cls[H], mean[H];
} text;

typedef struct fixture {
    tw_engine *e;
    text t[N_TEXTS];
} fixture;

static void read_floats(tw_st_file *g, const char *name, float *out, size_t n)
{
    const tw_st_tensor *t = tw_st_find(g, name);
    tw_err err;
    if (!t || t->n_elems != n || tw_st_to_f32(t, out, n, &err) != TW_OK)
        fail_msg("reference %s", name);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    tw_err err;
    tw_st_file *g;
    if (tw_st_open(TW_BERT_DIR "/golden.safetensors", &g, &err) != TW_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    for (int i = 0; i < N_TEXTS; i++) {
        char name[32];
        snprintf(name, sizeof name, "ids_%d", i);
        const tw_st_tensor *t = tw_st_find(g, name);
        if (!t || t->n_elems > MAX_IDS)
            return -1;
        f->t[i].n = t->n_elems;
        for (size_t k = 0; k < t->n_elems; k++) {
            int64_t v;
            memcpy(&v, (const char *)t->data + k * sizeof v, sizeof v);
            f->t[i].ids[k] = (uint32_t)v;
        }
        snprintf(name, sizeof name, "cls_%d", i);
        read_floats(g, name, f->t[i].cls, H);
        snprintf(name, sizeof name, "mean_%d", i);
        read_floats(g, name, f->t[i].mean, H);
    }
    tw_st_close(g);
    tw_engine_opts o;
    tw_engine_opts_init(&o);
    o.threads = 2;
    /* a context asked of every model: the encoder keeps its 128 positions */
    o.max_context = 4096;
    if (tw_engine_create(&o, &f->e, &err) != TW_OK) {
        fprintf(stderr, "engine: %s\n", err.msg);
        return -1;
    }
    tw_engine_model_info info;
    if (tw_engine_load_model(f->e, TW_BERT_DIR, "bert", NULL, &info, &err) != TW_OK) {
        fprintf(stderr, "load: %s\n", err.msg);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    tw_engine_destroy(f->e);
    free(f);
    return 0;
}

static tw_status submit(fixture *f, const uint32_t *ids, size_t n, tw_pooling pooling,
                        bool normalize, answer *a, tw_err *err)
{
    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    tw_gen_request r;
    tw_gen_request_init(&r);
    r.model = "bert";
    r.prompt_kind = TW_PROMPT_TOKENS;
    r.prompt_ids = ids;
    r.n_prompt_ids = n;
    r.embed.pooling = pooling;
    r.embed.normalize = normalize;
    tw_gen_callbacks cb = {on_chunk};
    uint64_t id;
    return tw_engine_submit(f->e, &r, &cb, a, &id, err);
}

static void wait_answer(answer *a)
{
    pthread_mutex_lock(&a->mu);
    while (!a->final)
        pthread_cond_wait(&a->cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
}

static void embed(fixture *f, const text *t, tw_pooling pooling, bool normalize, answer *a)
{
    tw_err err;
    if (submit(f, t->ids, t->n, pooling, normalize, a, &err) != TW_OK)
        fail_msg("submit: %s", err.msg);
    wait_answer(a);
    if (a->error != TW_OK || a->n != H)
        fail_msg("embedding: status %d, %s", (int)a->error, a->msg);
}

static void assert_close(const float *got, const float *want)
{
    for (size_t d = 0; d < H; d++)
        if (fabsf(got[d] - want[d]) > 1e-4f)
            fail_msg("dimension %zu: %g against %g", d, got[d], want[d]);
}

/* Each pooling of each text as transformers computed it; the model's own
 * pooling is CLS; normalized, the same direction at unit length. */
static void test_poolings(void **state)
{
    fixture *f = *state;
    static answer a;
    for (int i = 0; i < N_TEXTS; i++) {
        const text *t = &f->t[i];
        embed(f, t, TW_POOLING_CLS, false, &a);
        assert_close(a.vec, t->cls);
        embed(f, t, TW_POOLING_MODEL, false, &a);
        assert_close(a.vec, t->cls);
        embed(f, t, TW_POOLING_MEAN, false, &a);
        assert_close(a.vec, t->mean);
        embed(f, t, TW_POOLING_MODEL, true, &a);
        double norm = 0, dot = 0, ref = 0;
        for (size_t d = 0; d < H; d++) {
            norm += (double)a.vec[d] * a.vec[d];
            dot += (double)a.vec[d] * t->cls[d];
            ref += (double)t->cls[d] * t->cls[d];
        }
        assert_true(fabs(norm - 1.0) < 1e-5);
        assert_true(fabs(dot / sqrt(ref) - 1.0) < 1e-5);
    }
}

/* Every text submitted at once, each with two poolings: every answer is
 * its own text's, whatever reads beside it. */
static void test_together(void **state)
{
    fixture *f = *state;
    static answer a[2 * N_TEXTS];
    tw_err err;
    for (int i = 0; i < 2 * N_TEXTS; i++)
        if (submit(f, f->t[i % N_TEXTS].ids, f->t[i % N_TEXTS].n,
                   i < N_TEXTS ? TW_POOLING_CLS : TW_POOLING_MEAN, false, &a[i], &err) != TW_OK)
            fail_msg("submit %d: %s", i, err.msg);
    for (int i = 0; i < 2 * N_TEXTS; i++) {
        wait_answer(&a[i]);
        assert_int_equal(a[i].error, TW_OK);
        const text *t = &f->t[i % N_TEXTS];
        assert_close(a[i].vec, i < N_TEXTS ? t->cls : t->mean);
    }
}

/* An input as long as the position table is read; one token more, or an
 * answer instead of an embedding, is refused with the reason. */
static void test_limits(void **state)
{
    fixture *f = *state;
    static answer a;
    uint32_t ids[MAX_IDS + 1];
    for (size_t i = 0; i <= MAX_IDS; i++)
        ids[i] = (uint32_t)(5 + 7 * i) % 1200;
    tw_err err;
    assert_int_equal(submit(f, ids, MAX_IDS, TW_POOLING_MEAN, true, &a, &err), TW_OK);
    wait_answer(&a);
    assert_int_equal(a.error, TW_OK);
    assert_int_equal(a.n, H);
    assert_int_equal(submit(f, ids, MAX_IDS + 1, TW_POOLING_MEAN, true, &a, &err),
                     TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "128"));
    assert_int_equal(submit(f, ids, 4, TW_POOLING_NONE, true, &a, &err), TW_FAILED_PRECONDITION);
    assert_non_null(strstr(err.msg, "encoder"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_poolings),
        cmocka_unit_test(test_together),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
