/* Half-precision K/V (tw_model_opts.kv_type = TW_KV_F16) on the golden
 * checkpoints: close to the f32 cache, still exact between the paths that
 * speculation and batching rely on, half the bytes, and state that moves in
 * and out of a sequence without changing a bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/model.h"
#include "tw/pool.h"
#include "tw/safetensors.h"
#include "tw/seq_state.h"

static const char *const families[] = {"llama",       "qwen2",   "qwen3",
                                       "gemma3_text", "qwen3_5", "qwen3_5_moe"};

typedef struct golden {
    uint32_t *ids;
    size_t n_ids;
} golden;

static bool shared_path(char *out, size_t cap, const char *family, const char *file)
{
    const char *dir = tw_test_shared_dir();
    if (!dir)
        return false;
    snprintf(out, cap, "%s/golden/%s%s%s", dir, family, file ? "/" : "", file ? file : "");
    return true;
}

static tw_model *load(const char *family, tw_kv_type kv)
{
    char path[4096];
    if (!shared_path(path, sizeof path, family, NULL))
        return NULL;
    tw_model_opts o = {.max_context = 512, .max_batch = 16, .max_chunk = 64, .kv_type = kv};
    tw_model *m = NULL;
    tw_err err = {{0}};
    if (tw_model_load(path, &o, &m, &err) != TW_OK)
        fail_msg("load %s: %s", path, err.msg);
    assert_int_equal(tw_model_get_info(m)->kv_type, kv);
    return m;
}

static golden load_ids(const char *family)
{
    char path[4096];
    golden g = {0};
    if (!shared_path(path, sizeof path, family, "golden.safetensors"))
        return g;
    tw_st_file *f;
    tw_err err = {{0}};
    assert_int_equal(tw_st_open(path, &f, &err), TW_OK);
    const tw_st_tensor *t = tw_st_find(f, "long_ids");
    assert_non_null(t);
    g.n_ids = t->n_elems;
    g.ids = malloc(g.n_ids * sizeof *g.ids);
    assert_non_null(g.ids);
    memcpy(g.ids, t->data, g.n_ids * sizeof *g.ids); /* int32, all >= 0 */
    tw_st_close(f);
    return g;
}

/* Every position's logits through a prefill of the golden prompt. */
static float *prefill_all(tw_model *m, tw_pool *pool, const golden *g)
{
    uint32_t V = tw_model_get_info(m)->vocab_size;
    float *lg = malloc(g->n_ids * V * sizeof *lg);
    assert_non_null(lg);
    tw_seq *s;
    tw_err err = {{0}};
    assert_int_equal(tw_seq_create(m, 0, &s, &err), TW_OK);
    assert_int_equal(tw_model_forward(m, pool, s, g->ids, g->n_ids, lg, TW_LOGITS_ALL, &err),
                     TW_OK);
    tw_seq_free(s);
    return lg;
}

/* Rounding K/V to half moves the logits a little and the greedy choice
 * almost never; the cache holds half the bytes. */
static void test_close_to_f32(void **state)
{
    (void)state;
    if (!tw_test_shared_dir()) {
        tw_test_print_skip();
        skip();
    }
    tw_pool *pool;
    tw_err err = {{0}};
    assert_int_equal(tw_pool_create(2, &pool, &err), TW_OK);
    for (size_t k = 0; k < sizeof families / sizeof *families; k++) {
        tw_model *m32 = load(families[k], TW_KV_F32), *m16 = load(families[k], TW_KV_F16);
        golden g = load_ids(families[k]);
        uint32_t V = tw_model_get_info(m32)->vocab_size;
        float *a = prefill_all(m32, pool, &g), *b = prefill_all(m16, pool, &g);
        double worst = 0.0, scale = 0.0;
        size_t same = 0;
        for (size_t i = 0; i < g.n_ids; i++) {
            const float *x = a + i * V, *y = b + i * V;
            for (size_t v = 0; v < V; v++) {
                scale = fmax(scale, fabs(x[v]));
                worst = fmax(worst, fabs((double)x[v] - y[v]));
            }
            same += tw_test_argmax(x, V) == tw_test_argmax(y, V);
        }
        double rel = worst / scale;
        printf("# %s: f16 K/V max logit error %.2e of the largest, top-1 %zu/%zu\n", families[k],
               rel, same, g.n_ids);
        /* the f16 path really ran (the cache rounds), and stayed close */
        assert_true(worst > 0.0);
        assert_true(rel < 5e-3);
        assert_true(same * 100 >= g.n_ids * 97);
        size_t fl = tw_seq_kv_floats_per_token(m16);
        assert_int_equal(tw_seq_kv_bytes_per_token(m16), fl * sizeof(uint16_t));
        assert_int_equal(tw_seq_kv_bytes_per_token(m32), fl * sizeof(float));
        /* state computed through f16 K/V is never taken for f32 state */
        char f32[65], f16[65];
        assert_int_equal(tw_model_fingerprint(m32, f32, &err), TW_OK);
        assert_int_equal(tw_model_fingerprint(m16, f16, &err), TW_OK);
        assert_string_not_equal(f32, f16);
        free(a);
        free(b);
        free(g.ids);
        tw_model_free(m32);
        tw_model_free(m16);
    }
    tw_pool_destroy(pool);
}

/* Speculative verification and batched decode give exactly the logits of
 * successive single decode steps, through the half-precision cache too. */
static void verify_matches_decode(const char *family)
{
    tw_model *m = load(family, TW_KV_F16);
    golden g = load_ids(family);
    uint32_t V = tw_model_get_info(m)->vocab_size;
    tw_pool *pool;
    tw_err err = {{0}};
    assert_int_equal(tw_pool_create(2, &pool, &err), TW_OK);
    enum { PROMPT = 20, N = 8 };
    assert_true(g.n_ids >= PROMPT + N);
    tw_seq *a, *b, *c;
    tw_snapshot_pool *trail;
    assert_int_equal(tw_seq_create(m, 0, &a, &err), TW_OK);
    assert_int_equal(tw_seq_create(m, 0, &b, &err), TW_OK);
    assert_int_equal(tw_seq_create(m, 0, &c, &err), TW_OK);
    assert_int_equal(tw_snapshot_pool_create(m, N, &trail, &err), TW_OK);
    for (tw_seq **s = (tw_seq *[]){a, b, c, NULL}; *s; s++)
        assert_int_equal(tw_model_forward(m, pool, *s, g.ids, PROMPT, NULL, TW_LOGITS_NONE, &err),
                         TW_OK);
    float *one = malloc(N * V * sizeof *one), *ver = malloc(N * V * sizeof *ver);
    float *pair = malloc(2 * V * sizeof *pair);
    for (size_t i = 0; i < N; i++)
        assert_int_equal(
            tw_model_decode_batch(m, pool, &a, &g.ids[PROMPT + i], 1, one + i * V, &err), TW_OK);
    assert_int_equal(tw_model_verify(m, pool, b, g.ids + PROMPT, N, ver, trail, &err), TW_OK);
    assert_memory_equal(one, ver, N * V * sizeof *one);
    /* c decodes next to a rewound copy of a, both in one batch */
    assert_int_equal(tw_seq_restore(b, trail, 0, &err), TW_OK);
    tw_seq *both[2] = {c, b};
    uint32_t toks[2] = {g.ids[PROMPT], g.ids[PROMPT + 1]};
    assert_int_equal(tw_model_decode_batch(m, pool, both, toks, 2, pair, &err), TW_OK);
    assert_memory_equal(pair, one, V * sizeof *one);
    assert_memory_equal(pair + V, one + V, V * sizeof *one);
    free(one);
    free(ver);
    free(pair);
    tw_snapshot_pool_free(trail);
    tw_seq_free(a);
    tw_seq_free(b);
    tw_seq_free(c);
    tw_pool_destroy(pool);
    free(g.ids);
    tw_model_free(m);
}

static void test_verify_matches_decode(void **state)
{
    (void)state;
    if (!tw_test_shared_dir()) {
        tw_test_print_skip();
        skip();
    }
    verify_matches_decode("llama");
    verify_matches_decode("qwen3_5");
}

/* A state blob (f32, f16 and Q8 K/V) taken from a half-precision sequence
 * and loaded into another one continues exactly like the original (f32 and
 * f16 blobs) or closely (Q8). */
static void test_state_roundtrip(void **state)
{
    (void)state;
    if (!tw_test_shared_dir()) {
        tw_test_print_skip();
        skip();
    }
    tw_model *m = load("qwen3_5", TW_KV_F16);
    golden g = load_ids("qwen3_5");
    uint32_t V = tw_model_get_info(m)->vocab_size;
    tw_pool *pool;
    tw_err err = {{0}};
    assert_int_equal(tw_pool_create(2, &pool, &err), TW_OK);
    tw_seq *src;
    assert_int_equal(tw_seq_create(m, 0, &src, &err), TW_OK);
    assert_int_equal(tw_model_forward(m, pool, src, g.ids, 24, NULL, TW_LOGITS_NONE, &err), TW_OK);
    float *want = malloc(V * sizeof *want), *got = malloc(V * sizeof *got);
    const tw_seq_state_format fmts[] = {TW_SEQ_STATE_F32, TW_SEQ_STATE_Q8, TW_SEQ_STATE_F16};
    size_t f32_bytes = 0;
    for (size_t k = 0; k < 3; k++) {
        size_t bytes = 0, written = 0;
        assert_int_equal(tw_seq_state_size(m, 24, fmts[k], &bytes, &err), TW_OK);
        if (fmts[k] == TW_SEQ_STATE_F32)
            f32_bytes = bytes;
        /* the f16 format holds each K/V value in two bytes instead of four */
        if (fmts[k] == TW_SEQ_STATE_F16)
            assert_int_equal(f32_bytes - bytes, 24 * tw_seq_kv_floats_per_token(m) * 2);
        void *blob = malloc(bytes);
        assert_int_equal(tw_seq_state_export(src, 24, fmts[k], blob, bytes, &written, &err), TW_OK);
        tw_seq *dst;
        size_t n = 0;
        assert_int_equal(tw_seq_create(m, 0, &dst, &err), TW_OK);
        assert_int_equal(tw_seq_state_import(dst, blob, written, &n, &err), TW_OK);
        assert_int_equal(n, 24);
        tw_seq *fork;
        assert_int_equal(tw_seq_create(m, 0, &fork, &err), TW_OK);
        assert_int_equal(tw_model_forward(m, pool, fork, g.ids, 24, NULL, TW_LOGITS_NONE, &err),
                         TW_OK);
        assert_int_equal(tw_model_forward(m, pool, fork, &g.ids[24], 1, want, TW_LOGITS_LAST, &err),
                         TW_OK);
        assert_int_equal(tw_model_forward(m, pool, dst, &g.ids[24], 1, got, TW_LOGITS_LAST, &err),
                         TW_OK);
        if (fmts[k] != TW_SEQ_STATE_Q8) {
            assert_memory_equal(want, got, V * sizeof *want);
        } else {
            assert_int_equal(tw_test_argmax(want, V), tw_test_argmax(got, V));
        }
        /* row access (the prefix cache's) moves the stored halves as they
         * are: the imported sequence holds exactly the source's rows */
        size_t row_bytes = 24 * tw_seq_kv_bytes_per_token(m);
        unsigned char *rows = malloc(row_bytes), *want_rows = malloc(row_bytes);
        assert_int_equal(tw_seq_kv_read(dst, 0, 24, rows, &err), TW_OK);
        assert_int_equal(tw_seq_kv_read(src, 0, 24, want_rows, &err), TW_OK);
        if (fmts[k] != TW_SEQ_STATE_Q8)
            assert_memory_equal(rows, want_rows, row_bytes);
        assert_int_equal(tw_seq_kv_write(dst, 0, 24, want_rows, &err), TW_OK);
        assert_int_equal(tw_seq_kv_read(dst, 0, 24, rows, &err), TW_OK);
        assert_memory_equal(rows, want_rows, row_bytes);
        free(rows);
        free(want_rows);
        free(blob);
        tw_seq_free(dst);
        tw_seq_free(fork);
    }
    free(want);
    free(got);
    tw_seq_free(src);
    tw_pool_destroy(pool);
    free(g.ids);
    tw_model_free(m);
}

static void test_unknown_kv_type(void **state)
{
    (void)state;
    char path[4096];
    if (!shared_path(path, sizeof path, "llama", NULL)) {
        tw_test_print_skip();
        skip();
    }
    tw_model_opts o = {.max_context = 64, .kv_type = (tw_kv_type)7};
    tw_model *m = NULL;
    tw_err err = {{0}};
    assert_int_equal(tw_model_load(path, &o, &m, &err), TW_INVALID_ARGUMENT);
    assert_null(m);
    assert_non_null(strstr(err.msg, "K/V type"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_close_to_f32),
        cmocka_unit_test(test_verify_matches_decode),
        cmocka_unit_test(test_state_roundtrip),
        cmocka_unit_test(test_unknown_kv_type),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
