/* tw-mkmodel: test-sized variants of every shape load with tw_model_load and
 * run a forward pass with finite, input-dependent logits; files are
 * deterministic; the tokenizer of a vocabulary GGUF travels intact; the K
 * types refuse rows that are not whole blocks under --strict and fall back
 * otherwise. */
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
#include "tw/gguf.h"
#include "tw/model.h"
#include "tw/tokenizer.h"

static const char *mkmodel_bin;

static int run_mk(const char *shape, const char *out, const char *extra)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s '%s' --tiny --quiet %s 2>/dev/null", mkmodel_bin, shape,
             out, extra);
    return system(cmd);
}

/* Loads path, checks the shape, runs two different prompts and checks the
 * logits are finite and differ. */
static void load_and_forward(const char *path, uint32_t vocab)
{
    tw_err err = {{0}};
    tw_model *m = NULL;
    tw_model_opts mo = {.max_context = 64};
    if (tw_model_load(path, &mo, &m, &err) != TW_OK)
        fail_msg("%s: %s", path, err.msg);
    const tw_model_info *info = tw_model_get_info(m);
    assert_int_equal(info->vocab_size, vocab);
    assert_int_equal(info->hidden, 256);
    assert_int_equal(info->n_layers, 4);
    float *a = malloc(vocab * sizeof *a), *b = malloc(vocab * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    const uint32_t p1[] = {1, 7, 42, 3, 99}, p2[] = {5, 8, 13, 21, 34};
    float *outs[2] = {a, b};
    const uint32_t *ps[2] = {p1, p2};
    for (int k = 0; k < 2; k++) {
        tw_seq *s = NULL;
        assert_int_equal(tw_seq_create(m, 0, &s, &err), TW_OK);
        if (tw_model_forward(m, NULL, s, ps[k], 5, outs[k], TW_LOGITS_LAST, &err) != TW_OK)
            fail_msg("%s: forward: %s", path, err.msg);
        tw_seq_free(s);
    }
    double diff = 0;
    for (uint32_t i = 0; i < vocab; i++) {
        assert_true(isfinite(a[i]) && isfinite(b[i]));
        diff += fabs((double)a[i] - (double)b[i]);
    }
    assert_true(diff > 0);
    tw_model_free(m);

    /* the weights read into huge-page memory compute the same bits as the
     * weights mapped from the file */
    for (int mode = 0; mode < 2; mode++) {
        tw_model_opts mp = {.max_context = 64,
                            .weight_pages = mode ? TW_WEIGHTS_HUGE : TW_WEIGHTS_MAP};
        if (tw_model_load(path, &mp, &m, &err) != TW_OK)
            fail_msg("%s: %s", path, err.msg);
        assert_int_equal(tw_model_get_info(m)->huge_pages, mode == 1);
        tw_seq *s = NULL;
        assert_int_equal(tw_seq_create(m, 0, &s, &err), TW_OK);
        if (tw_model_forward(m, NULL, s, p1, 5, b, TW_LOGITS_LAST, &err) != TW_OK)
            fail_msg("%s: forward: %s", path, err.msg);
        assert_memory_equal(a, b, vocab * sizeof *a);
        tw_seq_free(s);
        tw_model_free(m);
    }
    free(a);
    free(b);
}

static void test_every_shape_loads(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"qwen2-0.5b", "F16"},          {"qwen2-0.5b", "Q8_0"},
        {"qwen2-0.5b", "Q4_K_M"},       {"qwen2-0.5b", "Q4_0"},
        {"llama-1b", "Q6_K"},           {"qwen3.5-0.8b", "BF16"},
        {"qwen3.5-moe-small", "Q5_K"},
    };
    char *dir = tw_test_mkdtemp();
    assert_non_null(dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[1024], extra[128];
        snprintf(path, sizeof path, "%s/m%zu.gguf", dir, i);
        snprintf(extra, sizeof extra, "--type %s --vocab none --vocab-size 512", cases[i][1]);
        if (run_mk(cases[i][0], path, extra) != 0)
            fail_msg("tw-mkmodel %s %s failed", cases[i][0], cases[i][1]);
        load_and_forward(path, 512);
    }
    tw_test_rmtree(dir);
    free(dir);
}

/* Same seed, same bytes; another seed, other bytes. */
static void test_deterministic(void **state)
{
    (void)state;
    char *dir = tw_test_mkdtemp();
    char p1[1024], p2[1024], p3[1024];
    snprintf(p1, sizeof p1, "%s/a.gguf", dir);
    snprintf(p2, sizeof p2, "%s/b.gguf", dir);
    snprintf(p3, sizeof p3, "%s/c.gguf", dir);
    const char *x = "--type Q4_0 --vocab none --vocab-size 256";
    assert_int_equal(run_mk("qwen2-0.5b", p1, x), 0);
    assert_int_equal(run_mk("qwen2-0.5b", p2, x), 0);
    assert_int_equal(run_mk("qwen2-0.5b", p3, "--type Q4_0 --vocab none --vocab-size 256 "
                                               "--seed 99"),
                     0);
    size_t n1, n2, n3;
    char *b1 = tw_test_read_file(p1, &n1), *b2 = tw_test_read_file(p2, &n2),
         *b3 = tw_test_read_file(p3, &n3);
    assert_non_null(b1);
    assert_non_null(b2);
    assert_non_null(b3);
    assert_int_equal(n1, n2);
    assert_memory_equal(b1, b2, n1);
    assert_int_equal(n1, n3);
    assert_memory_not_equal(b1, b3, n1);
    free(b1);
    free(b2);
    free(b3);
    tw_test_rmtree(dir);
    free(dir);
}

/* The real qwen2-0.5b rows (896) are not whole K blocks: --strict refuses
 * before writing anything; without it the tensors fall back and say so in
 * the file's types. */
static void test_k_rows_fallback(void **state)
{
    (void)state;
    char *dir = tw_test_mkdtemp();
    char path[1024], cmd[4096];
    snprintf(path, sizeof path, "%s/s.gguf", dir);
    snprintf(cmd, sizeof cmd,
             "'%s' qwen2-0.5b '%s' --type Q4_K --strict --vocab none --vocab-size 256 "
             "--layers 1 2>/dev/null",
             mkmodel_bin, path);
    assert_int_not_equal(system(cmd), 0);
    FILE *f = fopen(path, "rb");
    assert_null(f);
    snprintf(cmd, sizeof cmd,
             "'%s' qwen2-0.5b '%s' --type Q4_K --pure --quiet --vocab none --vocab-size 256 "
             "--layers 1 2>/dev/null",
             mkmodel_bin, path);
    assert_int_equal(system(cmd), 0);
    tw_err err = {{0}};
    tw_gguf *g = NULL;
    assert_int_equal(tw_gguf_open(path, &g, &err), TW_OK);
    const tw_gguf_tensor *q = tw_gguf_find_tensor(g, "blk.0.attn_q.weight");
    const tw_gguf_tensor *down = tw_gguf_find_tensor(g, "blk.0.ffn_down.weight");
    assert_non_null(q);
    assert_non_null(down);
    assert_int_equal(q->dims[0], 896);
    assert_int_not_equal(q->type, TW_TYPE_Q4_K); /* 896 = 3.5 blocks */
    assert_int_equal(down->dims[0], 4864);
    assert_int_equal(down->type, TW_TYPE_Q4_K); /* 4864 = 19 blocks */
    tw_gguf_close(g);
    tw_test_rmtree(dir);
    free(dir);
}

/* The gpt-2 vocabulary travels into the model file unchanged. */
static void test_vocab_copied(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    char vocab[1024], path[1024], extra[1200];
    tw_test_shared_path(vocab, sizeof vocab, "vocab/ggml-vocab-gpt-2.gguf");
    char *dir = tw_test_mkdtemp();
    snprintf(path, sizeof path, "%s/v.gguf", dir);
    snprintf(extra, sizeof extra, "--type Q8_0 --vocab '%s' --layers 1", vocab);
    assert_int_equal(run_mk("llama-1b", path, extra), 0);
    tw_err err = {{0}};
    tw_tokenizer *want = NULL, *got = NULL;
    assert_int_equal(tw_tokenizer_load_gguf(vocab, &want, &err), TW_OK);
    if (tw_tokenizer_load_gguf(path, &got, &err) != TW_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(tw_tokenizer_vocab_size(got), tw_tokenizer_vocab_size(want));
    const char *text = "Hello world, this is tokenwire's benchmark model.";
    uint32_t a[64], b[64];
    size_t na, nb;
    assert_int_equal(tw_tokenizer_encode(want, text, strlen(text), 0, a, 64, &na, &err), TW_OK);
    assert_int_equal(tw_tokenizer_encode(got, text, strlen(text), 0, b, 64, &nb, &err), TW_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof *a);
    tw_tokenizer_free(want);
    tw_tokenizer_free(got);
    tw_model *m = NULL;
    tw_model_opts mo = {.max_context = 16};
    if (tw_model_load(path, &mo, &m, &err) != TW_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(tw_model_get_info(m)->vocab_size, 50257);
    tw_model_free(m);
    tw_test_rmtree(dir);
    free(dir);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_mkmodel PATH-TO-tw-mkmodel\n");
        return 1;
    }
    mkmodel_bin = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_shape_loads),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_k_rows_fallback),
        cmocka_unit_test(test_vocab_copied),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
