/* Helpers of the WordPiece tests: loading the repository's reference
 * tokenizers, encoding, and decoding whole and streamed at once. */
#ifndef TW_TEST_WP_UTIL_H
#define TW_TEST_WP_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "test_support.h"
#include "tw/safetensors.h"
#include "tw/tokenizer.h"

#ifndef TW_REPO_DATA
#error "TW_REPO_DATA (the repository's tests/data) must be defined"
#endif

#define MAX_IDS 4096

static inline tw_tokenizer *load_repo(const char *rel)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", TW_REPO_DATA, rel);
    tw_err err = {{0}};
    tw_tokenizer *tok = NULL;
    tw_status st = tw_tokenizer_load_hf(dir, &tok, &err);
    if (st != TW_OK)
        printf("loading %s: %s\n", dir, err.msg);
    assert_int_equal(st, TW_OK);
    return tok;
}

static inline size_t encode(const tw_tokenizer *tok, const char *s, size_t len, unsigned flags,
                            uint32_t *ids)
{
    tw_err err = {{0}};
    size_t n = 0;
    tw_status st = tw_tokenizer_encode(tok, s, len, flags, ids, MAX_IDS, &n, &err);
    if (st != TW_OK)
        printf("encode: %s\n", err.msg);
    assert_int_equal(st, TW_OK);
    return n;
}

/* Decodes ids whole and streamed, checks the two agree, returns the text
 * (malloc'd, NUL-terminated). */
static inline char *decode_both(const tw_tokenizer *tok, const uint32_t *ids, size_t n,
                                unsigned flags)
{
    tw_err err = {{0}};
    size_t need = 0;
    tw_status st = tw_tokenizer_decode(tok, ids, n, flags, NULL, 0, &need, &err);
    assert_true(st == TW_OK || st == TW_RESOURCE_EXHAUSTED);
    char *whole = malloc(need + 1);
    size_t got = 0;
    assert_int_equal(tw_tokenizer_decode(tok, ids, n, flags, whole, need + 1, &got, &err), TW_OK);
    assert_int_equal(got, need);
    whole[got] = '\0';

    tw_detok *d = NULL;
    assert_int_equal(tw_detok_new(tok, flags, &d, &err), TW_OK);
    char *streamed = malloc(need + 1);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const char *t;
        size_t tl;
        assert_int_equal(tw_detok_feed(d, ids[i], &t, &tl, &err), TW_OK);
        assert_true(total + tl <= need);
        memcpy(streamed + total, t, tl);
        total += tl;
    }
    const char *t;
    size_t tl;
    tw_detok_flush(d, &t, &tl);
    assert_true(total + tl <= need);
    memcpy(streamed + total, t, tl);
    total += tl;
    tw_detok_free(d);
    if (total != got || memcmp(streamed, whole, got) != 0)
        printf("streamed \"%.*s\" but decode gives \"%s\"\n", (int)total, streamed, whole);
    assert_int_equal(total, got);
    assert_memory_equal(streamed, whole, got);
    free(streamed);
    return whole;
}

/* golden.json's texts, with [CLS] and [SEP], are the ids transformers fed
 * the reference BERT. */
static inline void wp_check_golden_ids(const tw_tokenizer *tok)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/golden/bert_cls/golden.json", TW_REPO_DATA);
    json_t *meta = json_load_file(path, 0, NULL);
    assert_non_null(meta);
    json_t *texts = json_object_get(meta, "texts");
    assert_true(json_array_size(texts) >= 4);
    snprintf(path, sizeof path, "%s/golden/bert_cls/golden.safetensors", TW_REPO_DATA);
    tw_err err = {{0}};
    tw_st_file *st = NULL;
    assert_int_equal(tw_st_open(path, &st, &err), TW_OK);
    uint32_t *ids = malloc(MAX_IDS * sizeof *ids);
    for (size_t i = 0; i < json_array_size(texts); i++) {
        const char *text = json_string_value(json_array_get(texts, i));
        char name[32];
        snprintf(name, sizeof name, "ids_%zu", i);
        const tw_st_tensor *t = tw_st_find(st, name);
        assert_non_null(t);
        assert_int_equal(t->dtype, TW_ST_I64);
        size_t n =
            encode(tok, text, strlen(text), TW_ENCODE_ADD_SPECIAL | TW_ENCODE_PARSE_SPECIAL, ids);
        assert_int_equal(n, t->n_elems);
        for (size_t k = 0; k < n; k++) {
            int64_t want;
            memcpy(&want, (const char *)t->data + k * 8, 8);
            assert_int_equal(ids[k], want);
        }
    }
    free(ids);
    tw_st_close(st);
    json_decref(meta);
}

#endif
