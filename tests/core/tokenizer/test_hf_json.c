/* The Hugging Face tokenizer.json path: the reference cases of
 * ../shared/tokenizers/bpe-qwen2-style (special and added tokens included),
 * round trips, and malformed files refused with a message. */
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

static tw_tokenizer *load_qwen_style(const char *shared)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tokenizers/bpe-qwen2-style", shared);
    tw_err err = {{0}};
    tw_tokenizer *tok = NULL;
    tw_status st = tw_tokenizer_load_hf(dir, &tok, &err);
    if (st != TW_OK)
        printf("loading %s: %s\n", dir, err.msg);
    assert_int_equal(st, TW_OK);
    return tok;
}

static void test_reference_cases(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    tw_tokenizer *tok = load_qwen_style(shared);
    char inp[1100], outp[1100];
    snprintf(inp, sizeof inp, "%s/tokenizers/bpe-qwen2-style/tests.inp", shared);
    snprintf(outp, sizeof outp, "%s/tokenizers/bpe-qwen2-style/tests.out", shared);
    tok_cases cases;
    assert_true(tok_cases_load(&cases, inp, outp));
    assert_true(cases.n >= 50);
    size_t failures = 0;
    tw_err err = {{0}};
    for (size_t i = 0; i < cases.n; i++) {
        const tok_case *tc = &cases.v[i];
        uint32_t ids[4096];
        size_t n = 0;
        tw_status st = tw_tokenizer_encode(tok, tc->text, tc->len, TW_ENCODE_PARSE_SPECIAL, ids,
                                           4096, &n, &err);
        if (st != TW_OK) {
            printf("case %zu: encode failed: %s\n", i, err.msg);
            failures++;
            continue;
        }
        if (n != tc->n_ids || memcmp(ids, tc->ids, n * sizeof *ids) != 0) {
            if (failures == 0) {
                printf("case %zu mismatch for \"%s\"\n", i, tc->text);
                tok_print_ids("expected", tc->ids, tc->n_ids);
                tok_print_ids("got     ", ids, n);
            }
            failures++;
            continue;
        }
        /* Byte-level BPE with NFC: lossless for text already in NFC, which
         * all the reference strings are. */
        char text[8192];
        size_t tl;
        assert_int_equal(tw_tokenizer_decode(tok, ids, n, 0, text, sizeof text, &tl, &err), TW_OK);
        if (tl != tc->len || memcmp(text, tc->text, tl) != 0) {
            printf("case %zu: decode gives \"%.*s\"\n", i, (int)tl, text);
            failures++;
        }
    }
    if (failures)
        printf("%zu of %zu cases failed\n", failures, cases.n);
    tok_cases_free(&cases);
    tw_tokenizer_free(tok);
    assert_int_equal(failures, 0);
}

static void test_special_ids_and_flags(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    tw_tokenizer *tok = load_qwen_style(shared);
    assert_int_equal(tw_tokenizer_vocab_size(tok), 6004);
    assert_int_equal(tw_tokenizer_eot(tok), 2); /* <|im_end|> */
    assert_int_equal(tw_tokenizer_think_open(tok), 6000);
    assert_int_equal(tw_tokenizer_think_close(tok), 6001);
    assert_true(tw_tokenizer_is_eog(tok, 2));
    assert_true(tw_tokenizer_is_eog(tok, 0));
    assert_false(tw_tokenizer_is_eog(tok, 6000));
    assert_int_equal(tw_tokenizer_token_type(tok, 1), TW_TOKEN_CONTROL);
    assert_int_equal(tw_tokenizer_token_type(tok, 6002), TW_TOKEN_USER_DEFINED);
    assert_int_equal(tw_tokenizer_token_type(tok, 100), TW_TOKEN_NORMAL);
    uint32_t id;
    tw_err err;
    assert_int_equal(tw_tokenizer_lookup(tok, "<|im_start|>", 12, &id, &err), TW_OK);
    assert_int_equal(id, 1);
    assert_int_equal(tw_tokenizer_lookup(tok, "<|nope|>", 8, &id, &err), TW_NOT_FOUND);

    /* Without PARSE_SPECIAL the control token is plain text, but the
     * user-defined <think> is still matched. */
    const char *s = "<|im_end|><think>";
    uint32_t ids[64];
    size_t n;
    assert_int_equal(tw_tokenizer_encode(tok, s, strlen(s), 0, ids, 64, &n, &err), TW_OK);
    assert_true(n > 2);
    assert_int_not_equal(ids[0], 2);
    assert_int_equal(ids[n - 1], 6000);
    assert_int_equal(tw_tokenizer_encode(tok, s, strlen(s), TW_ENCODE_PARSE_SPECIAL, ids, 64, &n,
                                         &err),
                     TW_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 2);

    /* Skipping specials drops <|im_end|> but keeps <think>. */
    char text[64];
    size_t tl;
    assert_int_equal(tw_tokenizer_decode(tok, ids, n, TW_DECODE_SKIP_SPECIAL, text, sizeof text,
                                         &tl, &err),
                     TW_OK);
    assert_int_equal(tl, 7);
    assert_memory_equal(text, "<think>", 7);
    tw_tokenizer_free(tok);
}

/* A small valid tokenizer.json to break in the hostile tests. */
static const char *tiny_json(void)
{
    return "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2},"
           " \"merges\": [\"a b\"]},"
           " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false},"
           " \"decoder\": {\"type\": \"ByteLevel\"},"
           " \"added_tokens\": [{\"id\": 3, \"content\": \"<s>\", \"special\": true}]}";
}

static void expect_refused(const char *json, tw_status code, const char *needle)
{
    tw_err err = {{0}};
    tw_tokenizer *tok = (tw_tokenizer *)0x1;
    tw_status st = tw_tokenizer_from_hf_json(json, strlen(json), NULL, 0, &tok, &err);
    if (st != code || !strstr(err.msg, needle))
        printf("got %d \"%s\", wanted %d containing \"%s\"\n", st, err.msg, code, needle);
    assert_int_equal(st, code);
    assert_non_null(strstr(err.msg, needle));
    assert_null(tok);
}

static void test_tiny_works(void **state)
{
    (void)state;
    tw_err err = {{0}};
    tw_tokenizer *tok = NULL;
    const char *j = tiny_json();
    assert_int_equal(tw_tokenizer_from_hf_json(j, strlen(j), NULL, 0, &tok, &err), TW_OK);
    uint32_t ids[8];
    size_t n;
    assert_int_equal(tw_tokenizer_encode(tok, "ab<s>b", 6, TW_ENCODE_PARSE_SPECIAL, ids, 8, &n, &err),
                     TW_OK);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 3);
    assert_int_equal(ids[2], 1);
    tw_tokenizer_free(tok);
}

static void test_malformed_json_refused(void **state)
{
    (void)state;
    expect_refused("{\"model\": ", TW_INVALID_ARGUMENT, "tokenizer.json: line");
    expect_refused("[1, 2]", TW_INVALID_ARGUMENT, "must hold an object");
    expect_refused("{}", TW_INVALID_ARGUMENT, "no \"model\"");
    expect_refused("{\"model\": {\"type\": \"BPE\"}}", TW_INVALID_ARGUMENT, "model.vocab");
    expect_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": \"x\"}}}",
                   TW_INVALID_ARGUMENT, "id must be an integer");
    expect_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -4}}}", TW_INVALID_ARGUMENT,
                   "id must be an integer");
    expect_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 99999999999}}}",
                   TW_INVALID_ARGUMENT, "id must be an integer");
    expect_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}}}",
                   TW_INVALID_ARGUMENT, "two tokens");
    expect_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1},"
                   " \"merges\": [\"a c\"]}}",
                   TW_INVALID_ARGUMENT, "\"c\", which is not in the vocabulary");
    expect_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1},"
                   " \"merges\": [\"a b\"]}}",
                   TW_INVALID_ARGUMENT, "\"ab\", which is not in the vocabulary");
    expect_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2},"
                   " \"merges\": [\"ab\"]}}",
                   TW_INVALID_ARGUMENT, "two tokens separated");
    expect_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2},"
                   " \"merges\": [[\"a\", 3]]}}",
                   TW_INVALID_ARGUMENT, "model.merges[0]");
    expect_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": 5}}",
                   TW_INVALID_ARGUMENT, "model.merges must be an array");
    expect_refused("{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}", TW_UNIMPLEMENTED, "Unigram");
    expect_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}},"
                   " \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"},"
                   " \"behavior\": \"Isolated\"}}",
                   TW_INVALID_ARGUMENT, "regex");
    expect_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}},"
                   " \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"},"
                   " \"behavior\": \"Sideways\"}}",
                   TW_INVALID_ARGUMENT, "Sideways");
    expect_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}},"
                   " \"normalizer\": {\"type\": \"Precompiled\"}}",
                   TW_UNIMPLEMENTED, "Precompiled");
    expect_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}},"
                   " \"normalizer\": {\"kind\": \"NFC\"}}",
                   TW_INVALID_ARGUMENT, "normalizer must be an object");
    expect_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}},"
                   " \"added_tokens\": [{\"id\": 1}]}",
                   TW_INVALID_ARGUMENT, "added_tokens[0].content");
    expect_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}},"
                   " \"added_tokens\": [{\"id\": 1, \"content\": \"x\", \"special\": 1}]}",
                   TW_INVALID_ARGUMENT, "special must be a boolean");
    expect_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"unk_token\": \"?\"}}",
                   TW_INVALID_ARGUMENT, "unk_token");
}

static void test_config_refused(void **state)
{
    (void)state;
    const char *j = tiny_json();
    const char *bad[] = {"{\"bos_token\": 3}", "{\"eos_token\": \"<nope>\"}", "[]",
                         "{\"chat_template\": 7}", "{\"add_bos_token\": \"yes\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tw_err err = {{0}};
        tw_tokenizer *tok = NULL;
        tw_status st = tw_tokenizer_from_hf_json(j, strlen(j), bad[i], strlen(bad[i]), &tok, &err);
        assert_int_equal(st, TW_INVALID_ARGUMENT);
        assert_null(tok);
        assert_true(strlen(err.msg) > 10);
    }
    tw_err err = {{0}};
    tw_tokenizer *tok = NULL;
    const char *cfg = "{\"bos_token\": {\"content\": \"<s>\"}, \"add_bos_token\": true,"
                      " \"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"},"
                      " {\"name\": \"default\", \"template\": \"D\"}]}";
    assert_int_equal(tw_tokenizer_from_hf_json(j, strlen(j), cfg, strlen(cfg), &tok, &err), TW_OK);
    assert_int_equal(tw_tokenizer_bos(tok), 3);
    assert_true(tw_tokenizer_adds_bos(tok));
    assert_string_equal(tw_tokenizer_chat_template(tok), "D");
    assert_string_equal(tw_tokenizer_bos_text(tok), "<s>");
    uint32_t ids[4];
    size_t n;
    assert_int_equal(tw_tokenizer_encode(tok, "a", 1, TW_ENCODE_ADD_SPECIAL, ids, 4, &n, &err), TW_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 3);
    tw_tokenizer_free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_cases),
        cmocka_unit_test(test_special_ids_and_flags),
        cmocka_unit_test(test_tiny_works),
        cmocka_unit_test(test_malformed_json_refused),
        cmocka_unit_test(test_config_refused),
    };
    return cmocka_run_group_tests_name("core/tokenizer/hf_json", tests, NULL, NULL);
}
