/* The vocabulary mask against the plain definition: a token is allowed
 * when a copy of the state takes all its bytes (and an end id when the
 * document is whole). Checked at every prefix of documents that pass
 * through strings, escapes, numbers, keys (one held to a pattern),
 * literals, strings held to a pattern and the items of a set, on the
 * shipped model's vocabulary and, with ../shared, on GPT-2's byte-level
 * BPE and Llama's SentencePiece vocabularies.
 *
 *   test_json_mask MODEL.gguf */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/json_mask.h"

static const char *g_model;

static const char *const g_schema =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":6},"
    "\"n\":{\"type\":\"number\"},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":"
    "[\"alpha\",\"beta\",12]}},\"more\":{\"type\":\"object\",\"patternProperties\":{\"^k\":"
    "{}},\"additionalProperties\":false},\"code\":{\"type\":\"string\","
    "\"pattern\":\"^[A-Z]{2}-\\\\d+$\"},\"word\":{\"type\":\"string\",\"pattern\":\"[a-z\xc3\xa9]$"
    "\","
    "\"maxLength\":9},\"set\":{\"type\":\"array\",\"uniqueItems\":true,\"items\":{\"type\":"
    "\"string\",\"maxLength\":2}},\"dict\":{\"type\":\"object\",\"propertyNames\":{"
    "\"maxLength\":4},\"additionalProperties\":{\"type\":\"integer\"}},\"pick\":{"
    "\"propertyNames\":{\"enum\":[\"one\",\"other\"]}}},\"required\":[\"name\"]}";

static const char *const g_docs[] = {
    "{\"name\": \"J\\u00e9 \\\"x\",\n \"n\": -12.5e+3, \"tags\": [\"beta\", 12],"
    " \"more\": {\"k\": [true, null, \"\xf0\x9f\x98\x80\"]}, \"code\": \"AB-12\","
    " \"word\": \"\xe2\x82\xac caf\xc3\xa9\", \"set\": [\"ab\", \"a\", \"b\", \"\\u0062a\"],"
    " \"dict\": {\"ab\": 1, \"abcd\": 2, \"\xc3\xa9\": 3}, \"pick\": {\"other\": 1, \"one\": 2}}",
    "{ \"name\" : \"ab\\ud83d\\ude00\" }",
};

/* The definition, token by token. */
static size_t brute(const tw_tokenizer *tok, const tw_json_state *s, const uint32_t *eos,
                    size_t n_eos, uint8_t *allowed, uint32_t n)
{
    size_t kept = 0;
    tw_json_state t;
    for (uint32_t id = 0; id < n; id++) {
        allowed[id] = 0;
        size_t len;
        const char *b = tw_tokenizer_token_bytes(tok, id, &len);
        if (!tw_json_vocab_has(tok, id, NULL, 0))
            continue;
        tw_json_state_copy(&t, s);
        if (tw_json_state_feed(&t, b, len)) {
            allowed[id] = 1;
            kept++;
        }
    }
    if (tw_json_state_complete(s))
        for (size_t i = 0; i < n_eos; i++)
            if (!allowed[eos[i]]) {
                allowed[eos[i]] = 1;
                kept++;
            }
    return kept;
}

static void check_vocab(const tw_tokenizer *tok, int stride)
{
    tw_err err;
    tw_json_vocab *v;
    tw_json_masker *mk;
    assert_int_equal(tw_json_vocab_build(tok, NULL, 0, &v, &err), TW_OK);
    assert_int_equal(tw_json_masker_create(v, &mk, &err), TW_OK);
    const uint32_t n = tw_tokenizer_vocab_size(tok);
    uint8_t *want = malloc(n), *got = malloc(n);
    assert_non_null(want);
    assert_non_null(got);
    const uint32_t eos[1] = {tw_tokenizer_eos(tok)};
    tw_json_grammar *g;
    assert_int_equal(tw_json_grammar_compile(g_schema, strlen(g_schema), &g, &err), TW_OK);
    size_t states = 0, in_string = 0;
    for (size_t d = 0; d < sizeof g_docs / sizeof g_docs[0]; d++) {
        tw_json_state s;
        tw_json_state_init(&s, g);
        const size_t len = strlen(g_docs[d]);
        for (size_t at = 0; at <= len; at++) {
            if (at % (size_t)stride == 0 || at == len) {
                size_t kw = brute(tok, &s, eos, 1, want, n);
                size_t kg = tw_json_mask_allowed(mk, &s, eos, 1, got, n);
                uint32_t room;
                in_string += tw_json_state_in_plain_string(&s, &room);
                for (uint32_t id = 0; id < n; id++)
                    if (want[id] != got[id])
                        fail_msg("doc %zu at byte %zu: token %u (%s) is %d, should be %d", d, at,
                                 id, tw_tokenizer_token_text(tok, id), got[id], want[id]);
                assert_int_equal(kw, kg);
                assert_true(kg > 0);
                states++;
            }
            if (at < len)
                assert_true(tw_json_state_feed_byte(&s, (unsigned char)g_docs[d][at]));
        }
        /* the whole document leaves only the end id */
        assert_true(tw_json_state_closed(&s));
        assert_int_equal(tw_json_mask_allowed(mk, &s, eos, 1, got, n), 1);
        assert_int_equal(got[eos[0]], 1);
    }
    assert_true(states > 20);
    assert_true(in_string > 0); /* the fast path was taken */

    /* logits: kept ones untouched, the rest -inf, also past the vocabulary */
    tw_json_state s;
    tw_json_state_init(&s, g);
    assert_true(tw_json_state_feed(&s, "{\"name\": \"", 10));
    float *logits = malloc((n + 3) * sizeof *logits);
    assert_non_null(logits);
    for (uint32_t i = 0; i < n + 3; i++)
        logits[i] = (float)i;
    size_t kept = tw_json_mask_logits(mk, &s, eos, 1, logits, n + 3);
    brute(tok, &s, eos, 1, want, n);
    size_t finite = 0;
    for (uint32_t i = 0; i < n + 3; i++) {
        bool keep = i < n && want[i];
        assert_true(keep ? logits[i] == (float)i : logits[i] < -1e30f);
        finite += keep;
    }
    assert_int_equal(finite, kept);
    free(logits);

    /* an excluded token is never allowed, even where its bytes fit */
    tw_json_state_init(&s, g);
    tw_json_mask_allowed(mk, &s, eos, 1, got, n);
    uint32_t fits = 0;
    while (fits < n && !got[fits])
        fits++;
    assert_true(fits < n);
    tw_json_vocab *v2;
    tw_json_masker *mk2;
    assert_int_equal(tw_json_vocab_build(tok, &fits, 1, &v2, &err), TW_OK);
    assert_int_equal(tw_json_masker_create(v2, &mk2, &err), TW_OK);
    assert_int_equal(tw_json_mask_allowed(mk2, &s, eos, 1, want, n) + 1,
                     tw_json_mask_allowed(mk, &s, eos, 1, got, n));
    assert_int_equal(want[fits], 0);
    assert_false(tw_json_vocab_has(tok, fits, &fits, 1));
    tw_json_masker_destroy(mk2);
    tw_json_vocab_free(v2);
    tw_json_grammar_free(g);
    free(want);
    free(got);
    tw_json_masker_destroy(mk);
    tw_json_vocab_free(v);
}

static void test_model_vocab(void **state)
{
    (void)state;
    tw_tokenizer *tok;
    tw_err err;
    assert_int_equal(tw_tokenizer_load_gguf(g_model, &tok, &err), TW_OK);
    check_vocab(tok, 1);
    tw_tokenizer_free(tok);
}

/* Random token walks through strings read as patterns (the formats and a
 * pattern of the schema's own), a tuple, an open object, two arrays with
 * uniqueItems and an object keyed by an enum of names that share a start,
 * on the shipped model's vocabulary: every walk reaches a
 * whole document with a token allowed at each step on the way (an email's
 * local part once ran to the address's last character with no @ in
 * reach), jansson reads it, and no set repeats an item. */
static void test_pattern_walks(void **state)
{
    (void)state;
    static const char schema[] =
        "{\"type\":\"object\",\"properties\":{\"u\":{\"type\":\"string\",\"format\":\"uri\"},"
        "\"h\":{\"type\":\"string\",\"format\":\"hostname\"},\"i\":{\"type\":\"string\","
        "\"format\":\"ipv6\"},\"d\":{\"type\":\"string\",\"format\":\"duration\"},\"e\":{"
        "\"type\":\"string\",\"format\":\"email\"},\"k\":{\"type\":\"object\"},\"t\":{"
        "\"prefixItems\":[{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}[0-9]+$\"},{\"type\":"
        "\"integer\"}],\"items\":false,\"minItems\":2},\"s\":{\"type\":\"array\",\"uniqueItems\":"
        "true,\"items\":{\"type\":\"string\",\"maxLength\":1},\"minItems\":3},\"n\":{\"type\":"
        "\"array\",\"uniqueItems\":true,\"items\":{\"enum\":[\"a\",\"b\",\"ab\",1,true]},"
        "\"minItems\":4},\"p\":{\"propertyNames\":{\"enum\":[\"aa\",\"ab\",\"b\"]},"
        "\"additionalProperties\":{\"type\":\"integer\"},\"minProperties\":2}},\"required\":["
        "\"u\",\"h\",\"i\",\"d\",\"e\",\"k\",\"t\",\"s\",\"n\",\"p\"],"
        "\"additionalProperties\":false}";
    tw_tokenizer *tok;
    tw_err err;
    assert_int_equal(tw_tokenizer_load_gguf(g_model, &tok, &err), TW_OK);
    tw_json_vocab *v;
    tw_json_masker *mk;
    tw_json_grammar *g;
    assert_int_equal(tw_json_vocab_build(tok, NULL, 0, &v, &err), TW_OK);
    assert_int_equal(tw_json_masker_create(v, &mk, &err), TW_OK);
    assert_int_equal(tw_json_grammar_compile(schema, strlen(schema), &g, &err), TW_OK);
    const uint32_t n = tw_tokenizer_vocab_size(tok);
    uint8_t *allowed = malloc(n);
    char *doc = malloc(1 << 16);
    assert_non_null(allowed);
    assert_non_null(doc);
    tw_test_rng rng = {0x7a11c0de};
    int finished = 0;
    for (int w = 0; w < 10; w++) {
        tw_json_state s;
        tw_json_state_init(&s, g);
        size_t len = 0;
        for (int step = 0; step < 800 && !tw_json_state_closed(&s); step++) {
            const size_t kept = tw_json_mask_allowed(mk, &s, NULL, 0, allowed, n);
            if (kept == 0)
                fail_msg("walk %d: no token continues %.*s", w, (int)len, doc);
            uint64_t pick = tw_test_rand_u64(&rng) % kept;
            uint32_t id = 0;
            while (!allowed[id] || pick-- > 0)
                id++;
            size_t tl;
            const char *b = tw_tokenizer_token_bytes(tok, id, &tl);
            assert_true(tw_json_state_feed(&s, b, tl));
            assert_true(len + tl < (1 << 16));
            memcpy(doc + len, b, tl);
            len += tl;
        }
        if (!tw_json_state_closed(&s))
            continue;
        finished++;
        json_error_t je;
        json_t *d = json_loadb(doc, len, JSON_REJECT_DUPLICATES, &je);
        if (!json_is_object(d) || json_object_size(d) != 10 ||
            json_object_size(json_object_get(d, "p")) < 2)
            fail_msg("walk %d gave what jansson reads otherwise (%s): %.*s", w, je.text, (int)len,
                     doc);
        for (const char *k = "sn"; *k; k++) {
            const json_t *set = json_object_getn(d, k, 1);
            for (size_t i = 0; i < json_array_size(set); i++)
                for (size_t j = i + 1; j < json_array_size(set); j++)
                    if (json_equal(json_array_get(set, i), json_array_get(set, j)))
                        fail_msg("walk %d repeats an item of %c: %.*s", w, *k, (int)len, doc);
        }
        json_decref(d);
    }
    assert_true(finished >= 5);
    free(doc);
    free(allowed);
    tw_json_grammar_free(g);
    tw_json_masker_destroy(mk);
    tw_json_vocab_free(v);
    tw_tokenizer_free(tok);
}

static void test_shared_vocabs(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(dir);
    const char *files[] = {"vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-llama-spm.gguf"};
    for (size_t i = 0; i < 2; i++) {
        char path[4096];
        tw_test_shared_path(path, sizeof path, files[i]);
        tw_tokenizer *tok;
        tw_err err;
        if (tw_tokenizer_load_gguf(path, &tok, &err) != TW_OK)
            fail_msg("%s: %s", path, err.msg);
        check_vocab(tok, 7);
        tw_tokenizer_free(tok);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 2;
    }
    g_model = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_vocab),
        cmocka_unit_test(test_shared_vocabs),
        cmocka_unit_test(test_pattern_walks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
