/* Streaming detokenizer and hostile inputs to the encoder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/tokenizer.h"

static tw_tokenizer *load(const char *shared, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", shared, name);
    tw_err err = {{0}};
    tw_tokenizer *tok = NULL;
    tw_status st = tw_tokenizer_load_gguf(path, &tok, &err);
    if (st != TW_OK)
        printf("%s\n", err.msg);
    assert_int_equal(st, TW_OK);
    return tok;
}

/* Strict UTF-8 validity (no overlongs, surrogates or truncation). */
static bool valid_utf8(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t len;
        unsigned lo = 0x80, hi = 0xbf;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xc2 && c <= 0xdf) len = 2;
        else if (c >= 0xe0 && c <= 0xef) { len = 3; if (c == 0xe0) lo = 0xa0; if (c == 0xed) hi = 0x9f; }
        else if (c >= 0xf0 && c <= 0xf4) { len = 4; if (c == 0xf0) lo = 0x90; if (c == 0xf4) hi = 0x8f; }
        else return false;
        if (i + len > n || s[i + 1] < lo || s[i + 1] > hi)
            return false;
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
        i += len;
    }
    return true;
}

/* Streams ids and checks every delta, then compares with the whole decode. */
static void stream_matches_decode(tw_tokenizer *tok, const uint32_t *ids, size_t n, unsigned flags)
{
    tw_err err = {{0}};
    tw_detok *d;
    assert_int_equal(tw_detok_new(tok, flags, &d, &err), TW_OK);
    char all[16384];
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const char *t;
        size_t l;
        assert_int_equal(tw_detok_feed(d, ids[i], &t, &l, &err), TW_OK);
        assert_true(valid_utf8((const unsigned char *)t, l));
        assert_true(total + l < sizeof all);
        memcpy(all + total, t, l);
        total += l;
    }
    const char *t;
    size_t l;
    tw_detok_flush(d, &t, &l);
    assert_true(valid_utf8((const unsigned char *)t, l));
    memcpy(all + total, t, l);
    total += l;
    assert_int_equal(tw_detok_pending(d), 0);
    tw_detok_free(d);

    char whole[16384];
    size_t wl;
    assert_int_equal(tw_tokenizer_decode(tok, ids, n, flags, whole, sizeof whole, &wl, &err), TW_OK);
    assert_int_equal(wl, total);
    assert_memory_equal(whole, all, total);
}

static const char multibyte[] =
    "emoji \xf0\x9f\x98\x80\xf0\x9f\xa6\x99 CJK \xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8 "
    "\xe1\x9e\x80\xe1\x9e\xb6 \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xe2\x9c\x85";

static void test_stream_multibyte(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    const char *names[] = {"llama-spm", "gpt-2", "deepseek-llm"};
    for (size_t k = 0; k < 3; k++) {
        tw_tokenizer *tok = load(shared, names[k]);
        uint32_t ids[512];
        size_t n;
        tw_err err;
        assert_int_equal(tw_tokenizer_encode(tok, multibyte, strlen(multibyte),
                                             TW_ENCODE_ADD_SPECIAL, ids, 512, &n, &err),
                         TW_OK);
        stream_matches_decode(tok, ids, n, 0);
        stream_matches_decode(tok, ids, n, TW_DECODE_SKIP_SPECIAL);
        /* The text comes back exactly (the SentencePiece dummy space is
         * dropped; BOS is skipped). */
        char text[2048];
        size_t tl;
        assert_int_equal(tw_tokenizer_decode(tok, ids, n, TW_DECODE_SKIP_SPECIAL, text,
                                             sizeof text, &tl, &err),
                         TW_OK);
        assert_int_equal(tl, strlen(multibyte));
        assert_memory_equal(text, multibyte, tl);
        tw_tokenizer_free(tok);
    }
}

static void test_split_byte_tokens(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    tw_tokenizer *tok = load(shared, "llama-spm");
    tw_err err;
    uint32_t byte[256];
    for (unsigned b = 0; b < 256; b++) {
        char t[8];
        snprintf(t, sizeof t, "<0x%02X>", b);
        assert_int_equal(tw_tokenizer_lookup(tok, t, 6, &byte[b], &err), TW_OK);
        assert_int_equal(tw_tokenizer_token_type(tok, byte[b]), TW_TOKEN_BYTE);
    }
    tw_detok *d;
    assert_int_equal(tw_detok_new(tok, 0, &d, &err), TW_OK);
    const char *t;
    size_t l;
    /* U+1F600 in four byte tokens: nothing until the last one. */
    const uint8_t smile[4] = {0xf0, 0x9f, 0x98, 0x80};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(tw_detok_feed(d, byte[smile[i]], &t, &l, &err), TW_OK);
        assert_int_equal(l, 0);
        assert_int_equal(tw_detok_pending(d), (size_t)i + 1);
    }
    assert_int_equal(tw_detok_feed(d, byte[smile[3]], &t, &l, &err), TW_OK);
    assert_int_equal(l, 4);
    assert_memory_equal(t, smile, 4);
    /* E2 82 then 'A': the broken prefix becomes one U+FFFD, then A. */
    assert_int_equal(tw_detok_feed(d, byte[0xe2], &t, &l, &err), TW_OK);
    assert_int_equal(tw_detok_feed(d, byte[0x82], &t, &l, &err), TW_OK);
    assert_int_equal(l, 0);
    assert_int_equal(tw_detok_feed(d, byte['A'], &t, &l, &err), TW_OK);
    assert_int_equal(l, 4);
    assert_memory_equal(t, "\xef\xbf\xbd" "A", 4);
    /* A stray continuation byte is replaced at once. */
    assert_int_equal(tw_detok_feed(d, byte[0x80], &t, &l, &err), TW_OK);
    assert_int_equal(l, 3);
    /* A truncated sequence at the end comes out of flush. */
    assert_int_equal(tw_detok_feed(d, byte[0xf0], &t, &l, &err), TW_OK);
    assert_int_equal(l, 0);
    tw_detok_flush(d, &t, &l);
    assert_int_equal(l, 3);
    assert_memory_equal(t, "\xef\xbf\xbd", 3);
    /* Out of range ids are refused and change nothing. */
    assert_int_equal(tw_detok_feed(d, 1u << 30, &t, &l, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(l, 0);
    tw_detok_free(d);

    uint32_t bad[] = {byte[0xe2], byte[0x82], byte['A'], byte[0x80], byte[0xf0]};
    stream_matches_decode(tok, bad, 5, 0);
    tw_tokenizer_free(tok);
}

static void test_spm_leading_space(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    tw_tokenizer *tok = load(shared, "llama-spm");
    tw_err err;
    uint32_t ids[16];
    size_t n;
    assert_int_equal(tw_tokenizer_encode(tok, "Hello world", 11, TW_ENCODE_ADD_SPECIAL, ids, 16,
                                         &n, &err),
                     TW_OK);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], tw_tokenizer_bos(tok));
    char text[64];
    size_t tl;
    assert_int_equal(tw_tokenizer_decode(tok, ids, n, TW_DECODE_SKIP_SPECIAL, text, sizeof text,
                                         &tl, &err), TW_OK);
    assert_int_equal(tl, 11);
    assert_memory_equal(text, "Hello world", 11);
    assert_int_equal(tw_tokenizer_decode(tok, ids + 1, n - 1, TW_DECODE_KEEP_LEADING_SPACE, text,
                                         sizeof text, &tl, &err), TW_OK);
    assert_int_equal(tl, 12);
    assert_memory_equal(text, " Hello world", 12);
    /* BOS rendered: the space after it stays, as in HF. */
    assert_int_equal(tw_tokenizer_decode(tok, ids, n, 0, text, sizeof text, &tl, &err), TW_OK);
    assert_int_equal(tl, 15);
    assert_memory_equal(text, "<s> Hello world", 15);
    tw_tokenizer_free(tok);
}

static void test_invalid_utf8_input(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    const char in[] = "ok \xff\xfe mid \xc3 end \xed\xa0\x80 \xf0\x9f";
    size_t len = sizeof in - 1;
    const char *names[] = {"gpt-2", "llama-spm", "deepseek-llm", "mpt", "phi-3"};
    for (size_t k = 0; k < 5; k++) {
        tw_tokenizer *tok = load(shared, names[k]);
        uint32_t ids[256];
        size_t n;
        tw_err err;
        assert_int_equal(tw_tokenizer_encode(tok, in, len, 0, ids, 256, &n, &err), TW_OK);
        /* mpt's vocabulary lacks some byte symbols: those bytes become its
         * unknown token, as with its own tokenizer. */
        bool has_unk = false;
        for (size_t i = 0; i < n; i++)
            has_unk = has_unk || ids[i] == tw_tokenizer_unk(tok);
        assert_int_equal(has_unk, strcmp(names[k], "mpt") == 0);
        stream_matches_decode(tok, ids, n, 0);
        /* DeepSeek adds the byte-level symbols of 0xF8..0xFF as text
         * tokens ("ÿ"), so those raw bytes come back as the letters. */
        if (has_unk || strcmp(names[k], "deepseek-llm") == 0) {
            tw_tokenizer_free(tok);
            continue;
        }
        /* The raw bytes of the tokens give the input back exactly. */
        char back[512];
        size_t bl = 0;
        for (size_t i = 0; i < n; i++) {
            size_t l;
            const char *b = tw_tokenizer_token_bytes(tok, ids[i], &l);
            assert_non_null(b);
            memcpy(back + bl, b, l);
            bl += l;
        }
        size_t off = (bl == len + 1 && back[0] == ' ') ? 1 : 0; /* SentencePiece prefix */
        assert_int_equal(bl - off, len);
        assert_memory_equal(back + off, in, len);
        stream_matches_decode(tok, ids, n, 0);
        tw_tokenizer_free(tok);
    }
}

static void test_empty_and_sizing(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    tw_tokenizer *tok = load(shared, "gpt-2");
    tw_err err;
    size_t n = 99;
    assert_int_equal(tw_tokenizer_encode(tok, NULL, 0, 0, NULL, 0, &n, &err), TW_OK);
    assert_int_equal(n, 0);
    assert_int_equal(tw_tokenizer_encode(tok, NULL, 5, 0, NULL, 0, &n, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_tokenizer_encode(tok, "a", 1, 0x80, NULL, 0, &n, &err), TW_INVALID_ARGUMENT);

    /* ~400 KB of text into a 16-id buffer: told the size, never truncated. */
    size_t len = 400000;
    char *big = malloc(len);
    static const char words[] = "Hello world, \xe4\xbd\xa0\xe5\xa5\xbd 123 ";
    for (size_t i = 0; i < len; i++)
        big[i] = words[i % (sizeof words - 1)];
    uint32_t small[16];
    assert_int_equal(tw_tokenizer_encode(tok, big, len, 0, small, 16, &n, &err), TW_RESOURCE_EXHAUSTED);
    assert_true(n > 16);
    size_t need = n;
    uint32_t *ids = malloc(need * sizeof *ids);
    assert_int_equal(tw_tokenizer_encode(tok, big, len, 0, ids, need, &n, &err), TW_OK);
    assert_int_equal(n, need);
    /* Decode sizing works the same way. */
    char tiny[8];
    size_t tl;
    assert_int_equal(tw_tokenizer_decode(tok, ids, n, 0, tiny, sizeof tiny, &tl, &err),
                     TW_RESOURCE_EXHAUSTED);
    assert_int_equal(tl, len);
    char *text = malloc(tl);
    assert_int_equal(tw_tokenizer_decode(tok, ids, n, 0, text, tl, &tl, &err), TW_OK);
    assert_memory_equal(text, big, len);
    free(text);
    free(ids);
    free(big);
    uint32_t bad = 1u << 31;
    assert_int_equal(tw_tokenizer_decode(tok, &bad, 1, 0, tiny, sizeof tiny, &tl, &err),
                     TW_INVALID_ARGUMENT);
    tw_tokenizer_free(tok);
}

typedef struct job {
    const tw_tokenizer *tok;
    const char *text;
    uint32_t ids[512];
    size_t n;
    tw_status st;
} job;

static void *run_job(void *p)
{
    job *j = p;
    tw_err err;
    for (int r = 0; r < 20; r++)
        j->st = tw_tokenizer_encode(j->tok, j->text, strlen(j->text), TW_ENCODE_PARSE_SPECIAL,
                                    j->ids, 512, &j->n, &err);
    return NULL;
}

static void test_concurrent_encode(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    tw_tokenizer *tok = load(shared, "deepseek-llm");
    job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (job){.tok = tok, .text = multibyte};
        assert_int_equal(pthread_create(&th[i], NULL, run_job, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(jobs[i].st, TW_OK);
        assert_int_equal(jobs[i].n, jobs[0].n);
        assert_memory_equal(jobs[i].ids, jobs[0].ids, jobs[0].n * sizeof(uint32_t));
    }
    tw_tokenizer_free(tok);
}

static void test_gguf_errors(void **state)
{
    (void)state;
    tw_err err = {{0}};
    tw_tokenizer *tok = NULL;
    assert_int_not_equal(tw_tokenizer_load_gguf("/nonexistent/x.gguf", &tok, &err), TW_OK);
    assert_null(tok);
    assert_true(strlen(err.msg) > 0);
    assert_int_equal(tw_tokenizer_load_hf("/nonexistent", &tok, &err), TW_NOT_FOUND);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_multibyte),
        cmocka_unit_test(test_split_byte_tokens),
        cmocka_unit_test(test_spm_leading_space),
        cmocka_unit_test(test_invalid_utf8_input),
        cmocka_unit_test(test_empty_and_sizing),
        cmocka_unit_test(test_concurrent_encode),
        cmocka_unit_test(test_gguf_errors),
    };
    return cmocka_run_group_tests_name("core/tokenizer/detok", tests, NULL, NULL);
}
