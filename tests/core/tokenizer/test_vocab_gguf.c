/* Every reference string of the five GGUF vocabularies in ../shared/vocab
 * must tokenize to exactly the ids the model's own tokenizer produced, and
 * decode back to itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_cases.h"
#include "tw/tokenizer.h"

static void check_vocab(const char *name, bool lossless)
{
    TW_REQUIRE_SHARED(shared);
    char path[1024], inp[1100], outp[1100];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", shared, name);
    snprintf(inp, sizeof inp, "%s.inp", path);
    snprintf(outp, sizeof outp, "%s.out", path);

    tw_err err = {{0}};
    tw_tokenizer *tok = NULL;
    tw_status st = tw_tokenizer_load_gguf(path, &tok, &err);
    if (st != TW_OK)
        printf("loading %s: %s\n", name, err.msg);
    assert_int_equal(st, TW_OK);

    tok_cases cases;
    assert_true(tok_cases_load(&cases, inp, outp));
    size_t failures = 0;
    for (size_t i = 0; i < cases.n; i++) {
        const tok_case *tc = &cases.v[i];
        uint32_t ids[4096];
        size_t n = 0;
        st = tw_tokenizer_encode(tok, tc->text, tc->len, 0, ids, 4096, &n, &err);
        if (st != TW_OK) {
            printf("%s case %zu: encode failed: %s\n", name, i, err.msg);
            failures++;
            continue;
        }
        if (n != tc->n_ids || memcmp(ids, tc->ids, n * sizeof *ids) != 0) {
            if (failures == 0) {
                printf("%s case %zu mismatch for \"%s\"\n", name, i, tc->text);
                tok_print_ids("expected", tc->ids, tc->n_ids);
                tok_print_ids("got     ", ids, n);
            }
            failures++;
            continue;
        }
        if (lossless) {
            char text[8192];
            size_t tl;
            st = tw_tokenizer_decode(tok, ids, n, 0, text, sizeof text, &tl, &err);
            assert_int_equal(st, TW_OK);
            if (tl != tc->len || memcmp(text, tc->text, tl) != 0) {
                printf("%s case %zu: decode gives \"%.*s\" for \"%s\"\n", name, i, (int)tl, text,
                       tc->text);
                failures++;
            }
        }
    }
    if (failures)
        printf("%s: %zu of %zu cases failed\n", name, failures, cases.n);
    tok_cases_free(&cases);
    tw_tokenizer_free(tok);
    assert_int_equal(failures, 0);
}

static void test_gpt2(void **state) { (void)state; check_vocab("gpt-2", true); }
static void test_llama_spm(void **state) { (void)state; check_vocab("llama-spm", true); }
static void test_phi3(void **state) { (void)state; check_vocab("phi-3", true); }
static void test_deepseek_llm(void **state) { (void)state; check_vocab("deepseek-llm", true); }
static void test_mpt(void **state) { (void)state; check_vocab("mpt", true); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_llama_spm),
        cmocka_unit_test(test_phi3),
        cmocka_unit_test(test_deepseek_llm),
        cmocka_unit_test(test_mpt),
    };
    return cmocka_run_group_tests_name("core/tokenizer/vocab_gguf", tests, NULL, NULL);
}
