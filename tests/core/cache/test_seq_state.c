/* Sequence state export/import on every golden family: a sequence restored
 * from a blob continues with exactly the logits of the one that never left;
 * damaged and foreign blobs are refused without touching the sequence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "golden_families.h"
#include "tw/pool.h"
#include "tw/seq_state.h"

#define PREFIX 150 /* crosses the 64-token DeltaNet chunk twice */
#define CONT 12

static void check_family(const char *path, void *ctx)
{
    tw_pool *pool = ctx;
    tw_err err = {{0}};
    tw_model *m;
    tw_model_opts opts = {.max_context = 256, .max_batch = 2, .max_chunk = 64};
    if (tw_model_load(path, &opts, &m, &err))
        fail_msg("load %s: %s", path, err.msg);
    const tw_model_info *info = tw_model_get_info(m);
    uint32_t V = info->vocab_size;
    tw_test_rng rng = {0x5eed + V};
    uint32_t toks[PREFIX + CONT];
    random_tokens(&rng, toks, PREFIX + CONT, V);

    tw_seq *a, *b;
    assert_int_equal(tw_seq_create(m, 0, &a, &err), TW_OK);
    assert_int_equal(tw_seq_create(m, 0, &b, &err), TW_OK);
    assert_int_equal(tw_model_forward(m, pool, a, toks, PREFIX, NULL, TW_LOGITS_NONE, &err), TW_OK);
    /* b holds something else first: the import must replace all of it. */
    assert_int_equal(tw_model_forward(m, pool, b, toks + 7, 40, NULL, TW_LOGITS_NONE, &err), TW_OK);

    size_t need;
    assert_int_equal(tw_seq_state_size(m, PREFIX, TW_SEQ_STATE_F32, &need, &err), TW_OK);
    uint8_t *blob = malloc(need);
    size_t wrote;
    assert_int_equal(tw_seq_state_export(a, PREFIX, TW_SEQ_STATE_F32, blob, need, &wrote, &err),
                     TW_OK);
    assert_int_equal(wrote, need);
    size_t n_tok = 0;
    assert_int_equal(tw_seq_state_peek(blob, need, &n_tok, &err), TW_OK);
    assert_int_equal(n_tok, PREFIX);

    /* Damaged blobs: refused, b unchanged. */
    assert_int_equal(tw_seq_state_import(b, blob, need - 1, NULL, &err), TW_DATA_LOSS);
    assert_int_equal(tw_seq_state_import(b, blob, 10, NULL, &err), TW_DATA_LOSS);
    blob[0] ^= 1;
    assert_int_equal(tw_seq_state_import(b, blob, need, NULL, &err), TW_DATA_LOSS);
    blob[0] ^= 1;
    assert_int_equal(tw_seq_len(b), 40);

    assert_int_equal(tw_seq_state_import(b, blob, need, &n_tok, &err), TW_OK);
    assert_int_equal(n_tok, PREFIX);
    assert_int_equal(tw_seq_len(b), PREFIX);

    float *la = malloc((size_t)CONT * V * sizeof(float));
    float *lb = malloc((size_t)CONT * V * sizeof(float));
    assert_int_equal(tw_model_forward(m, pool, a, toks + PREFIX, CONT, la, TW_LOGITS_ALL, &err),
                     TW_OK);
    assert_int_equal(tw_model_forward(m, pool, b, toks + PREFIX, CONT, lb, TW_LOGITS_ALL, &err),
                     TW_OK);
    if (memcmp(la, lb, (size_t)CONT * V * sizeof(float)) != 0)
        fail_msg("%s: logits after import differ", path);
    /* And one decode step each, batched together. */
    tw_seq *both[2] = {a, b};
    uint32_t next[2] = {toks[3], toks[3]};
    assert_int_equal(tw_model_decode_batch(m, pool, both, next, 2, la, &err), TW_OK);
    assert_memory_equal(la, la + V, V * sizeof(float));

    /* A recurrent state exists only at the current length. */
    size_t len = tw_seq_len(a);
    tw_status st = tw_seq_state_export(a, PREFIX, TW_SEQ_STATE_F32, blob, need, NULL, &err);
    assert_int_equal(st, info->recurrent ? TW_FAILED_PRECONDITION : TW_OK);
    assert_int_equal(tw_seq_state_export(a, len + 1, TW_SEQ_STATE_F32, blob, need, NULL, &err),
                     TW_OUT_OF_RANGE);
    /* blob was sized for PREFIX tokens; a holds more now */
    assert_int_equal(tw_seq_state_export(a, len, TW_SEQ_STATE_F32, blob, need, NULL, &err),
                     TW_RESOURCE_EXHAUSTED);

    /* Q8: smaller, restores the length, K/V within half a quantization step. */
    size_t need8;
    assert_int_equal(tw_seq_state_size(m, len, TW_SEQ_STATE_Q8, &need8, &err), TW_OK);
    size_t needf;
    assert_int_equal(tw_seq_state_size(m, len, TW_SEQ_STATE_F32, &needf, &err), TW_OK);
    assert_true(need8 < needf);
    uint8_t *blob8 = malloc(need8);
    assert_int_equal(tw_seq_state_export(a, len, TW_SEQ_STATE_Q8, blob8, need8, NULL, &err), TW_OK);
    tw_seq_reset(b);
    assert_int_equal(tw_seq_state_import(b, blob8, need8, NULL, &err), TW_OK);
    assert_int_equal(tw_seq_len(b), len);
    size_t per = tw_seq_kv_floats_per_token(m);
    float *ka = malloc(per * len * sizeof(float)), *kb = malloc(per * len * sizeof(float));
    assert_int_equal(tw_seq_kv_read(a, 0, len, ka, &err), TW_OK);
    assert_int_equal(tw_seq_kv_read(b, 0, len, kb, &err), TW_OK);
    float amax = 0.0f, dmax = 0.0f;
    for (size_t i = 0; i < per * len; i++) {
        amax = fmaxf(amax, fabsf(ka[i]));
        dmax = fmaxf(dmax, fabsf(ka[i] - kb[i]));
    }
    assert_true(dmax <= amax / 127.0f * 0.51f + 1e-6f);

    /* Row-level access round trip: rebuild a's state in b block by block. */
    tw_seq_reset(b);
    assert_int_equal(tw_seq_kv_write(b, 64, len - 64, ka + 0, &err), TW_OK); /* scratch rows */
    float *tmp = malloc(per * 64 * sizeof(float));
    for (size_t pos = 0; pos < len; pos += 64) {
        size_t n = len - pos < 64 ? len - pos : 64;
        assert_int_equal(tw_seq_kv_read(a, pos, n, tmp, &err), TW_OK);
        assert_int_equal(tw_seq_kv_write(b, pos, n, tmp, &err), TW_OK);
    }
    size_t rf = tw_seq_recurrent_floats(m);
    assert_int_equal(rf != 0, info->recurrent);
    float *rec = rf ? malloc(rf * sizeof(float)) : NULL;
    assert_int_equal(tw_seq_recurrent_read(a, rec, &err), TW_OK);
    if (rf)
        assert_int_equal(tw_seq_set_len(b, len, NULL, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_seq_set_len(b, len, rec, &err), TW_OK);
    assert_int_equal(tw_model_decode_batch(m, pool, both, next, 2, la, &err), TW_OK);
    assert_memory_equal(la, la + V, V * sizeof(float));
    assert_int_equal(tw_seq_kv_read(a, len, 3, tmp, &err), TW_OUT_OF_RANGE);
    assert_int_equal(tw_seq_kv_write(b, 250, 10, tmp, &err), TW_OUT_OF_RANGE);
    assert_int_equal(tw_seq_set_len(b, 257, rec, &err), TW_OUT_OF_RANGE);

    free(rec);
    free(tmp);
    free(ka);
    free(kb);
    free(blob8);
    free(la);
    free(lb);
    free(blob);
    tw_seq_free(a);
    tw_seq_free(b);
    tw_model_free(m);
}

static void test_every_family(void **state)
{
    (void)state;
    tw_pool *pool;
    tw_err err;
    assert_int_equal(tw_pool_create(2, &pool, &err), TW_OK);
    bool skipped = each_family(check_family, pool);
    tw_pool_destroy(pool);
    if (skipped)
        tw_test_print_skip();
}

/* A blob from one model is refused by a sequence of another shape. */
static void test_foreign_model(void **state)
{
    (void)state;
    tw_err err;
    char p1[4096], p2[4096];
    snprintf(p1, sizeof p1, "%s/qwen3_5_mix", repo_golden_dir);
    snprintf(p2, sizeof p2, "%s/qwen3_deep", repo_golden_dir);
    tw_model *m1, *m2;
    tw_model_opts opts = {.max_context = 128, .max_batch = 1, .max_chunk = 64};
    assert_int_equal(tw_model_load(p1, &opts, &m1, &err), TW_OK);
    assert_int_equal(tw_model_load(p2, &opts, &m2, &err), TW_OK);
    tw_seq *s1, *s2;
    assert_int_equal(tw_seq_create(m1, 0, &s1, &err), TW_OK);
    assert_int_equal(tw_seq_create(m2, 0, &s2, &err), TW_OK);
    uint32_t toks[5] = {1, 2, 3, 4, 5};
    assert_int_equal(tw_model_forward(m1, NULL, s1, toks, 5, NULL, TW_LOGITS_NONE, &err), TW_OK);
    size_t need;
    assert_int_equal(tw_seq_state_size(m1, 5, TW_SEQ_STATE_F32, &need, &err), TW_OK);
    void *blob = malloc(need);
    assert_int_equal(tw_seq_state_export(s1, 5, TW_SEQ_STATE_F32, blob, need, NULL, &err), TW_OK);
    assert_int_equal(tw_seq_state_import(s2, blob, need, NULL, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_seq_len(s2), 0);
    /* A sequence too small for the blob. */
    tw_seq *small;
    assert_int_equal(tw_seq_create(m1, 4, &small, &err), TW_OK);
    assert_int_equal(tw_seq_state_import(small, blob, need, NULL, &err), TW_OUT_OF_RANGE);
    assert_int_equal(tw_seq_state_size(m1, 5, (tw_seq_state_format)7, &need, &err),
                     TW_INVALID_ARGUMENT);
    free(blob);
    tw_seq_free(small);
    tw_seq_free(s1);
    tw_seq_free(s2);
    tw_model_free(m1);
    tw_model_free(m2);
}

int main(int argc, char **argv)
{
    repo_golden_dir = argc > 1 ? argv[1] : "tests/data/golden";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_family),
        cmocka_unit_test(test_foreign_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
