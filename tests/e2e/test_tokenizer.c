/* The tokenizer and chat template inside the shipped GGUF against Hugging
 * Face's tokenizer.json of the same model.
 *
 *   test_tokenizer MODEL.gguf REFERENCE.json TOKENIZER_CASES.json
 *
 * REFERENCE.json: the five prompts the training run asked both models, with
 * the ids Hugging Face `tokenizers` gave the ChatML text (system prompt,
 * user turn, an assistant turn opened with an empty <think> block).
 * TOKENIZER_CASES.json: Python and ChatML strings with the ids Hugging Face
 * `tokenizers` 0.23 gave them (data/make_tokenizer_cases.js). Control tokens
 * written in the text count as tokens, as they do in Hugging Face. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "test_support.h"
#include "tw/chat_template.h"
#include "tw/gguf.h"
#include "tw/tokenizer.h"

static const char *g_model, *g_reference, *g_cases;
static tw_tokenizer *g_tok;

static json_t *load(const char *path)
{
    json_error_t jerr;
    json_t *j = json_load_file(path, 0, &jerr);
    if (!j)
        fail_msg("%s: %s", path, jerr.text);
    return j;
}

/* Encodes text and compares with the reference ids, printing both on a
 * mismatch so a failure says where the two tokenizers part. */
static void expect_ids(const char *text, size_t len, const json_t *want)
{
    size_t n = json_array_size(want), got_n = 0;
    uint32_t *got = calloc(n + 64, sizeof *got);
    assert_non_null(got);
    tw_err err;
    tw_status st =
        tw_tokenizer_encode(g_tok, text, len, TW_ENCODE_PARSE_SPECIAL, got, n + 64, &got_n, &err);
    if (st != TW_OK)
        fail_msg("encode \"%s\": %s", text, err.msg);
    bool same = got_n == n;
    for (size_t i = 0; same && i < n; i++)
        same = got[i] == (uint32_t)json_integer_value(json_array_get(want, i));
    if (!same) {
        char *w = json_dumps(want, JSON_COMPACT);
        printf("text: \"%s\"\nwant: %s\ngot:  [", text, w);
        for (size_t i = 0; i < got_n; i++)
            printf("%s%u", i ? "," : "", got[i]);
        printf("]\n");
        free(w);
    }
    free(got);
    assert_true(same);
}

/* decode(ids) must give back the text in Unicode NFC (the tokenizer
 * normalizes its input; everything else is byte-exact). */
static void expect_decode(const char *text, const json_t *ids)
{
    size_t n = json_array_size(ids);
    uint32_t *v = calloc(n ? n : 1, sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = (uint32_t)json_integer_value(json_array_get(ids, i));
    size_t len = 0;
    tw_err err;
    tw_status st = tw_tokenizer_decode(g_tok, v, n, 0, NULL, 0, &len, &err);
    assert_true(st == TW_OK || st == TW_RESOURCE_EXHAUSTED);
    char *out = malloc(len + 1);
    assert_non_null(out);
    assert_int_equal(tw_tokenizer_decode(g_tok, v, n, 0, out, len, &len, &err), TW_OK);
    out[len] = '\0';
    utf8proc_uint8_t *nfc = utf8proc_NFC((const utf8proc_uint8_t *)text);
    assert_non_null(nfc);
    assert_string_equal(out, (const char *)nfc);
    free(nfc);
    free(out);
    free(v);
}

static void test_special_tokens(void **state)
{
    (void)state;
    assert_int_equal(tw_tokenizer_vocab_size(g_tok), 8194);
    assert_int_equal(tw_tokenizer_kind_of(g_tok), TW_TOKENIZER_BPE);
    assert_int_equal(tw_tokenizer_eos(g_tok), 2); /* <|im_end|> */
    assert_int_equal(tw_tokenizer_pad(g_tok), 0); /* <|endoftext|> */
    assert_int_equal(tw_tokenizer_bos(g_tok), TW_TOKEN_NONE);
    assert_false(tw_tokenizer_adds_bos(g_tok));
    assert_int_equal(tw_tokenizer_think_open(g_tok), 8192);
    assert_int_equal(tw_tokenizer_think_close(g_tok), 8193);
    assert_true(tw_tokenizer_is_eog(g_tok, 2));
    assert_int_equal(tw_tokenizer_token_type(g_tok, 1), TW_TOKEN_CONTROL);
    assert_int_equal(tw_tokenizer_token_type(g_tok, 8192), TW_TOKEN_USER_DEFINED);
    assert_non_null(tw_tokenizer_chat_template(g_tok));
}

/* The converter names the model (tw-convert --name), not after the
 * checkpoint's directory. */
static void test_model_name(void **state)
{
    (void)state;
    tw_gguf *g = NULL;
    tw_err err;
    assert_int_equal(tw_gguf_open(g_model, &g, &err), TW_OK);
    const char *name = NULL;
    size_t len = 0;
    assert_int_equal(tw_gguf_get_str(g, "general.name", &name, &len, &err), TW_OK);
    assert_true(len > 16);
    assert_int_equal(strncmp(name, "tokenwire-coder-", 16), 0);
    tw_gguf_close(g);
}

static void test_report_prompts(void **state)
{
    (void)state;
    json_t *ref = load(g_reference);
    const char *system = json_string_value(json_object_get(ref, "system"));
    assert_non_null(system);
    static const char *const kinds[] = {"target", "draft"};
    for (size_t k = 0; k < 2; k++) {
        size_t i;
        json_t *a;
        json_array_foreach(json_object_get(ref, kinds[k]), i, a)
        {
            const char *prompt = json_string_value(json_object_get(a, "prompt"));
            assert_non_null(prompt);
            /* the exact text train.py's greedy_answers() encodes */
            char text[2048];
            int len = snprintf(text, sizeof text,
                               "<|im_start|>system\n%s<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n"
                               "<|im_start|>assistant\n<think>\n\n</think>\n\n",
                               system, prompt);
            assert_true(len > 0 && (size_t)len < sizeof text);
            expect_ids(text, (size_t)len, json_object_get(a, "prompt_ids"));
        }
    }
    json_decref(ref);
}

/* The GGUF's chat template with enable_thinking=false renders the same
 * prompt text, so a chat request reaches the model as the reference did. */
static void test_chat_template_renders_report_prompts(void **state)
{
    (void)state;
    json_t *ref = load(g_reference);
    const char *src = tw_tokenizer_chat_template(g_tok);
    tw_chat_template *t = NULL;
    tw_err err;
    if (tw_chat_template_compile(src, strlen(src), &t, &err) != TW_OK)
        fail_msg("template: %s", err.msg);
    assert_int_equal(tw_chat_template_family(src, strlen(src)), TW_CHAT_FAMILY_QWEN3);
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(ref, "target"), i, a)
    {
        json_t *vars = json_pack(
            "{s:[{s:s,s:O},{s:s,s:O}],s:b,s:b}", "messages", "role", "system", "content",
            json_object_get(ref, "system"), "role", "user", "content", json_object_get(a, "prompt"),
            "add_generation_prompt", 1, "enable_thinking", 0);
        assert_non_null(vars);
        char *text = NULL;
        size_t len = 0;
        if (tw_chat_template_render(t, vars, &text, &len, &err) != TW_OK)
            fail_msg("render: %s", err.msg);
        expect_ids(text, len, json_object_get(a, "prompt_ids"));
        free(text);
        json_decref(vars);
    }
    tw_chat_template_free(t);
    json_decref(ref);
}

static void test_python_and_chatml_strings(void **state)
{
    (void)state;
    json_t *cases = load(g_cases);
    assert_true(json_array_size(cases) >= 20);
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c)
    {
        const char *text = json_string_value(json_object_get(c, "text"));
        assert_non_null(text);
        json_t *ids = json_object_get(c, "ids");
        assert_true(json_is_array(ids));
        expect_ids(text, strlen(text), ids);
        expect_decode(text, ids);
    }
    json_decref(cases);
}

static int setup(void **state)
{
    (void)state;
    tw_err err;
    if (tw_tokenizer_load_gguf(g_model, &g_tok, &err) != TW_OK) {
        fprintf(stderr, "%s: %s\n", g_model, err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tw_tokenizer_free(g_tok);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: test_tokenizer MODEL.gguf REFERENCE.json TOKENIZER_CASES.json\n");
        return 2;
    }
    g_model = argv[1];
    g_reference = argv[2];
    g_cases = argv[3];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_special_tokens),
        cmocka_unit_test(test_model_name),
        cmocka_unit_test(test_report_prompts),
        cmocka_unit_test(test_chat_template_renders_report_prompts),
        cmocka_unit_test(test_python_and_chatml_strings),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
