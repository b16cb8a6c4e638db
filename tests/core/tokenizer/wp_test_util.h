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

#include "test_support.h"
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

#endif
