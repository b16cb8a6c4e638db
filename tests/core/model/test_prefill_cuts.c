/* A prompt read in pieces that end on prefill-group boundaries gives every
 * logit the bits it gives read whole, on every golden family (dense,
 * sliding-window and soft-capped attention, DeltaNet hybrids, MoE), with
 * f32 and half K/V, and whatever the model's step size. The prefix caches
 * rely on it: a restored prefix ends on such a boundary, and the rest of the
 * prompt must continue exactly as a cold read does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "golden_families.h"
#include "tw/kernels.h"
#include "tw/pool.h"

/* Long enough for several whole groups and a part one at the end. */
#define N_TOKENS (3 * TW_PREFILL_GROUP + 20)

/* Reads prompt[0, n) into a fresh sequence in pieces ending at cuts[] (then
 * n), every row's logits into out (n x V). */
static void read_in_pieces(tw_model *m, tw_pool *pool, const uint32_t *prompt, size_t n,
                           const size_t *cuts, size_t n_cuts, float *out, size_t V)
{
    tw_err err;
    tw_seq *seq;
    assert_int_equal(tw_seq_create(m, 0, &seq, &err), TW_OK);
    size_t at = 0;
    for (size_t k = 0; k <= n_cuts; k++) {
        const size_t end = k < n_cuts ? cuts[k] : n;
        if (tw_model_forward(m, pool, seq, prompt + at, end - at, out + at * V, TW_LOGITS_ALL,
                             &err) != TW_OK)
            fail_msg("forward [%zu, %zu): %s", at, end, err.msg);
        at = end;
    }
    assert_int_equal(tw_seq_len(seq), n);
    tw_seq_free(seq);
}

static tw_model *load(const char *path, tw_kv_type kv, size_t max_chunk)
{
    tw_model_opts o = {.max_context = 512, .max_batch = 16, .max_chunk = max_chunk, .kv_type = kv};
    tw_model *m;
    tw_err err;
    if (tw_model_load(path, &o, &m, &err) != TW_OK)
        fail_msg("load %s: %s", path, err.msg);
    return m;
}

static void check_family(const char *path, tw_pool *pool, tw_kv_type kv)
{
    static const size_t G = TW_PREFILL_GROUP;
    /* where a cache could have restored the prompt, alone and together */
    static const size_t cut_sets[][3] = {{G}, {2 * G}, {3 * G}, {G, 2 * G, 3 * G}};
    static const size_t n_cuts[] = {1, 1, 1, 3};

    tw_model *m = load(path, kv, 256);
    const size_t V = tw_model_get_info(m)->vocab_size;
    tw_test_rng rng = {0x5eed};
    uint32_t prompt[N_TOKENS];
    random_tokens(&rng, prompt, N_TOKENS, (uint32_t)V);
    float *whole = malloc(N_TOKENS * V * sizeof(float));
    float *cut = malloc(N_TOKENS * V * sizeof(float));
    assert_non_null(whole);
    assert_non_null(cut);
    read_in_pieces(m, pool, prompt, N_TOKENS, NULL, 0, whole, V);
    for (size_t s = 0; s < sizeof n_cuts / sizeof n_cuts[0]; s++) {
        read_in_pieces(m, pool, prompt, N_TOKENS, cut_sets[s], n_cuts[s], cut, V);
        assert_memory_equal(cut, whole, N_TOKENS * V * sizeof(float));
    }
    tw_model_free(m);

    /* A step limit that is not a multiple of the group, or one group. */
    static const size_t chunks[] = {100, TW_PREFILL_GROUP};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        m = load(path, kv, chunks[c]);
        read_in_pieces(m, pool, prompt, N_TOKENS, cut_sets[0], n_cuts[0], cut, V);
        assert_memory_equal(cut, whole, N_TOKENS * V * sizeof(float));
        tw_model_free(m);
    }
    free(whole);
    free(cut);
}

static void check_both_kv(const char *path, void *pool)
{
    check_family(path, pool, TW_KV_F32);
    check_family(path, pool, TW_KV_F16);
}

static const char *mkmodel_path;

/* An MoE whose experts' products take sgemm from 17 rows on and the exact
 * per-row kernels below (F16 with AVX2 and the BLAS prefill): an expert
 * takes a number of a step's rows that depends on the step, so without the
 * experts going group by group the cuts would show. */
static void test_moe_experts_by_group(void **state)
{
    (void)state;
    if (!tw_kernels_isa_available("avx2")) {
        print_message("no AVX2 here: the F16 MoE case is skipped\n");
        return;
    }
    char *dir = tw_test_mkdtemp();
    char path[4096], cmd[8192];
    snprintf(path, sizeof path, "%s/moe.gguf", dir);
    snprintf(cmd, sizeof cmd,
             "'%s' qwen3.5-moe-small '%s' --type F16 --vocab none --vocab-size 512 --tiny "
             "--quiet",
             mkmodel_path, path);
    assert_int_equal(system(cmd), 0);
    char isa[32];
    snprintf(isa, sizeof isa, "%s", tw_kernels_isa());
    const tw_f16_prefill f16 = tw_kernels_f16_prefill();
    tw_err err;
    assert_int_equal(tw_kernels_force_isa("avx2", &err), TW_OK);
    tw_kernels_set_f16_prefill(TW_F16_PREFILL_BLAS);
    assert_false(tw_matmul_exact(TW_TYPE_F16));
    tw_pool *pool;
    assert_int_equal(tw_pool_create(2, &pool, &err), TW_OK);
    check_family(path, pool, TW_KV_F32);
    tw_pool_destroy(pool);
    tw_kernels_set_f16_prefill(f16);
    assert_int_equal(tw_kernels_force_isa(isa, &err), TW_OK);
    tw_test_rmtree(dir);
    free(dir);
}

static void test_cuts_on_group_boundaries(void **state)
{
    (void)state;
    tw_err err;
    tw_pool *pool;
    assert_int_equal(tw_pool_create(2, &pool, &err), TW_OK);
    bool skipped = each_family(check_both_kv, pool);
    tw_pool_destroy(pool);
    if (skipped)
        tw_test_print_skip();
}

int main(int argc, char **argv)
{
    repo_golden_dir = argc > 1 ? argv[1] : "tests/data/golden";
    mkmodel_path = argc > 2 ? argv[2] : "build/tools/mkmodel/tw-mkmodel";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuts_on_group_boundaries),
        cmocka_unit_test(test_moe_experts_by_group),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
