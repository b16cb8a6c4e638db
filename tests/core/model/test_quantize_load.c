/* A Hugging Face checkpoint quantized as it loads computes exactly what the
 * GGUF tw-convert writes from it at that type computes: every logit of a
 * prompt the same bits. Its fingerprint and weight type say it was
 * quantized; a type the loader does not quantize to is refused.
 *
 * Arguments: HF_DIR GGUF TYPE. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/model.h"
#include "tw/pool.h"
#include "tw/tensor.h"

#define N_TOKENS 40

static const char *hf_dir, *gguf_path;
static tw_type type;

/* Floats a prompt gives per token: a decoder's logits, an encoder's states. */
static size_t row_floats(const tw_model *m)
{
    const tw_model_info *in = tw_model_get_info(m);
    return in->encoder ? in->hidden : in->vocab_size;
}

static float *prompt_logits(tw_model *m, tw_pool *pool)
{
    const tw_model_info *in = tw_model_get_info(m);
    uint32_t ids[N_TOKENS];
    for (size_t i = 0; i < N_TOKENS; i++)
        ids[i] = (uint32_t)(3 + 37 * i) % in->vocab_size;
    float *logits = malloc((size_t)N_TOKENS * row_floats(m) * sizeof *logits);
    tw_err err;
    if (in->encoder) {
        if (tw_model_encode(m, pool, ids, N_TOKENS, logits, &err) != TW_OK)
            fail_msg("encode: %s", err.msg);
        return logits;
    }
    tw_seq *seq;
    assert_int_equal(tw_seq_create(m, 64, &seq, &err), TW_OK);
    if (tw_model_forward(m, pool, seq, ids, N_TOKENS, logits, TW_LOGITS_ALL, &err) != TW_OK)
        fail_msg("forward: %s", err.msg);
    tw_seq_free(seq);
    return logits;
}

static tw_model *load(const char *path, tw_type quantize)
{
    tw_model_opts o = {.quantize = quantize};
    tw_model *m = NULL;
    tw_err err;
    if (tw_model_load(path, &o, &m, &err) != TW_OK)
        fail_msg("load %s: %s", path, err.msg);
    return m;
}

static void test_same_as_converted(void **state)
{
    (void)state;
    tw_pool *pool;
    tw_err err;
    assert_int_equal(tw_pool_create(2, &pool, &err), TW_OK);
    tw_model *q = load(hf_dir, type), *g = load(gguf_path, TW_TYPE_F32), *plain = load(hf_dir, 0);
    assert_int_equal(tw_model_get_info(q)->weight_type, type);
    assert_int_equal(tw_model_get_info(g)->weight_type, type);
    const size_t V = row_floats(q);
    float *a = prompt_logits(q, pool), *b = prompt_logits(g, pool), *c = prompt_logits(plain, pool);
    for (size_t i = 0; i < (size_t)N_TOKENS * V; i++)
        if (memcmp(&a[i], &b[i], sizeof *a) != 0)
            fail_msg("logit %zu of %zu: %.9g quantized at load, %.9g from the GGUF", i,
                     (size_t)N_TOKENS * V, a[i], b[i]);
    /* and the rounding shows against the checkpoint as stored */
    assert_memory_not_equal(a, c, (size_t)N_TOKENS * V * sizeof *a);
    char fq[65], fp[65];
    assert_int_equal(tw_model_fingerprint(q, fq, &err), TW_OK);
    assert_int_equal(tw_model_fingerprint(plain, fp, &err), TW_OK);
    assert_string_not_equal(fq, fp);
    /* taken from the stored weights before their pages went: the same at
     * every load, so the caches find their entries again */
    tw_model *again = load(hf_dir, type);
    char fa[65];
    assert_int_equal(tw_model_fingerprint(again, fa, &err), TW_OK);
    assert_string_equal(fq, fa);
    tw_model_free(again);
    free(a);
    free(b);
    free(c);
    tw_model_free(q);
    tw_model_free(g);
    tw_model_free(plain);
    tw_pool_destroy(pool);
}

static void test_refused_types(void **state)
{
    (void)state;
    static const tw_type bad[] = {TW_TYPE_F16, TW_TYPE_BF16, TW_TYPE_Q5_1, TW_TYPE_Q8_0_R8,
                                  (tw_type)77};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tw_model_opts o = {.quantize = bad[i]};
        tw_model *m = NULL;
        tw_err err;
        assert_int_equal(tw_model_load(hf_dir, &o, &m, &err), TW_INVALID_ARGUMENT);
        assert_null(m);
        assert_non_null(strstr(err.msg, "quantize"));
    }
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s HF_DIR GGUF TYPE\n", argv[0]);
        return 2;
    }
    hf_dir = argv[1];
    gguf_path = argv[2];
    tw_err err;
    if (tw_type_from_name(argv[3], &type, &err) != TW_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_converted),
        cmocka_unit_test(test_refused_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
