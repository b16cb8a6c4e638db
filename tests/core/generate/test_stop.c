#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/stop.h"

static tw_stop *make(const char *const *strings, size_t n)
{
    tw_stop_params p;
    tw_stop_params_init(&p);
    p.stop_strings = strings;
    p.n_stop_strings = n;
    const uint32_t eos[] = {2, 7};
    tw_stop *s = NULL;
    tw_err err;
    assert_int_equal(tw_stop_create(&p, eos, 2, &s, &err), TW_OK);
    return s;
}

/* Feeds pieces one by one, appending what is emitted to out, and checks
 * that everything emitted so far is a prefix of the final expected text
 * (nothing streamed is ever retracted). Returns the result of the last feed. */
static tw_stop_result feed_all(tw_stop *s, const char *const *pieces, size_t n, char *out,
                               const char *expect, const char **matched)
{
    out[0] = 0;
    tw_stop_result r = TW_STOP_CONTINUE;
    for (size_t i = 0; i < n && r == TW_STOP_CONTINUE; i++) {
        const char *e;
        size_t el;
        r = tw_stop_feed(s, pieces[i], strlen(pieces[i]), &e, &el, matched);
        strncat(out, e, el);
        assert_true(strncmp(out, expect, strlen(out)) == 0);
    }
    if (r == TW_STOP_CONTINUE) {
        const char *e;
        size_t el;
        tw_stop_flush(s, &e, &el);
        strncat(out, e, el);
    }
    return r;
}

static void test_stop_string_across_token_boundaries(void **state)
{
    (void)state;
    const char *stops[] = {"###", "END"};
    tw_stop *s = make(stops, 2);
    const char *pieces[] = {"Hello", " wor", "ld #", "#", "# more"};
    char out[128];
    const char *matched = NULL;
    tw_stop_result r = feed_all(s, pieces, 5, out, "Hello world ", &matched);
    assert_int_equal(r, TW_STOP_MATCHED);
    assert_string_equal(out, "Hello world ");
    assert_string_equal(matched, "###");
    /* After the match nothing more comes out. */
    const char *e;
    size_t el;
    assert_int_equal(tw_stop_feed(s, "x", 1, &e, &el, NULL), TW_STOP_MATCHED);
    assert_int_equal(el, 0);
    tw_stop_destroy(s);
}

static void test_hold_back_is_released_when_no_match(void **state)
{
    (void)state;
    const char *stops[] = {"</answer>"};
    tw_stop *s = make(stops, 1);
    const char *e;
    size_t el;
    assert_int_equal(tw_stop_feed(s, "a </ans", 7, &e, &el, NULL), TW_STOP_CONTINUE);
    assert_int_equal(el, 2); /* "a " */
    assert_memory_equal(e, "a ", 2);
    assert_int_equal(tw_stop_held(s), 5);
    /* "</answer" could still become the stop string: it stays held. */
    assert_int_equal(tw_stop_feed(s, "wer", 3, &e, &el, NULL), TW_STOP_CONTINUE);
    assert_int_equal(el, 0);
    assert_int_equal(tw_stop_held(s), 8);
    /* Now it cannot any more, and all of it comes out. */
    assert_int_equal(tw_stop_feed(s, "!x", 2, &e, &el, NULL), TW_STOP_CONTINUE);
    assert_int_equal(el, 10);
    assert_memory_equal(e, "</answer!x", 10);
    assert_int_equal(tw_stop_held(s), 0);
    tw_stop_destroy(s);
}

static void test_prefix_of_stop_string_is_held_not_streamed(void **state)
{
    (void)state;
    const char *stops[] = {"</answer>"};
    tw_stop *s = make(stops, 1);
    const char *pieces[] = {"x </", "answer", "> tail"};
    char out[64];
    const char *matched = NULL;
    assert_int_equal(feed_all(s, pieces, 3, out, "x ", &matched), TW_STOP_MATCHED);
    assert_string_equal(out, "x ");
    tw_stop_reset(s);
    const char *pieces2[] = {"x </", "answer", " no"};
    assert_int_equal(feed_all(s, pieces2, 3, out, "x </answer no", &matched),
                     TW_STOP_CONTINUE);
    assert_string_equal(out, "x </answer no");
    tw_stop_destroy(s);
}

static void test_overlapping_candidates_and_earliest_match(void **state)
{
    (void)state;
    const char *stops[] = {"abcd", "bc"};
    tw_stop *s = make(stops, 2);
    const char *pieces[] = {"xa", "b", "cd"};
    char out[64];
    const char *matched = NULL;
    /* Both complete with the last piece; the text is cut before the one
     * that starts first, exactly as a search of the whole text would. */
    assert_int_equal(feed_all(s, pieces, 3, out, "x", &matched), TW_STOP_MATCHED);
    assert_string_equal(out, "x");
    assert_string_equal(matched, "abcd");
    tw_stop_destroy(s);
}

static void test_random_streams_never_retract(void **state)
{
    (void)state;
    const char *stops[] = {"aab", "ba", "abba"};
    tw_test_rng rng = {31337};
    for (int round = 0; round < 500; round++) {
        tw_stop *s = make(stops, 3);
        char full[64];
        int len = 1 + (int)(tw_test_rand_u64(&rng) % 40);
        for (int i = 0; i < len; i++)
            full[i] = "abc"[tw_test_rand_u64(&rng) % 3];
        full[len] = 0;
        /* Expected: full cut before the earliest complete stop string. */
        size_t cut = (size_t)len;
        for (int k = 0; k < 3; k++) {
            const char *m = strstr(full, stops[k]);
            if (m && (size_t)(m - full) < cut)
                cut = (size_t)(m - full);
        }
        char expect[64];
        memcpy(expect, full, cut);
        expect[cut] = 0;
        char out[128] = "";
        int pos = 0;
        tw_stop_result r = TW_STOP_CONTINUE;
        while (pos < len && r == TW_STOP_CONTINUE) {
            int step = 1 + (int)(tw_test_rand_u64(&rng) % 4);
            if (pos + step > len)
                step = len - pos;
            const char *e;
            size_t el;
            r = tw_stop_feed(s, full + pos, (size_t)step, &e, &el, NULL);
            strncat(out, e, el);
            assert_true(strncmp(out, expect, strlen(out)) == 0);
            pos += step;
        }
        if (r == TW_STOP_CONTINUE) {
            const char *e;
            size_t el;
            tw_stop_flush(s, &e, &el);
            strncat(out, e, el);
        }
        assert_string_equal(out, expect);
        assert_int_equal(r == TW_STOP_MATCHED, cut < (size_t)len);
        tw_stop_destroy(s);
    }
}

static void test_long_delta_grows_buffer(void **state)
{
    (void)state;
    const char *stops[] = {"STOP"};
    tw_stop *s = make(stops, 1);
    size_t n = 5000;
    char *big = malloc(n + 5);
    memset(big, 'x', n);
    memcpy(big + n, "STOP", 5);
    const char *e;
    size_t el;
    const char *m = NULL;
    assert_int_equal(tw_stop_feed(s, "ST", 2, &e, &el, NULL), TW_STOP_CONTINUE);
    assert_int_equal(tw_stop_feed(s, big, n + 4, &e, &el, &m), TW_STOP_MATCHED);
    assert_int_equal(el, n + 2);
    assert_memory_equal(e, "ST", 2);
    assert_string_equal(m, "STOP");
    free(big);
    tw_stop_destroy(s);
}

static void test_token_rules_and_min_tokens(void **state)
{
    (void)state;
    tw_stop_params p;
    tw_stop_params_init(&p);
    const uint32_t ids[] = {9};
    p.stop_token_ids = ids;
    p.n_stop_token_ids = 1;
    p.min_tokens = 3;
    const uint32_t eos[] = {2};
    tw_stop *s = NULL;
    assert_int_equal(tw_stop_create(&p, eos, 1, &s, NULL), TW_OK);
    bool is_eos;
    assert_true(tw_stop_token(s, 9, 0, &is_eos)); /* stop ids ignore min_tokens */
    assert_false(is_eos);
    assert_false(tw_stop_token(s, 2, 2, &is_eos));
    assert_true(tw_stop_suppress_eos(s, 2));
    assert_true(tw_stop_token(s, 2, 3, &is_eos));
    assert_true(is_eos);
    assert_false(tw_stop_suppress_eos(s, 3));
    assert_false(tw_stop_token(s, 5, 100, NULL));
    tw_stop_destroy(s);

    p.ignore_eos = true;
    p.min_tokens = 0;
    assert_int_equal(tw_stop_create(&p, eos, 1, &s, NULL), TW_OK);
    assert_false(tw_stop_token(s, 2, 50, NULL));
    assert_true(tw_stop_token(s, 9, 50, NULL));
    tw_stop_destroy(s);
}

static void test_validation(void **state)
{
    (void)state;
    tw_stop_params p;
    tw_err err;
    tw_stop_params_init(&p);
    const char *empty[] = {""};
    p.stop_strings = empty;
    p.n_stop_strings = 1;
    assert_int_equal(tw_stop_params_validate(&p, 0, &err), TW_INVALID_ARGUMENT);
    const char *bad_utf8[] = {"ab\xc3"};
    p.stop_strings = bad_utf8;
    assert_int_equal(tw_stop_params_validate(&p, 0, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "UTF-8"));
    char longs[TW_STOP_MAX_STRING_BYTES + 2];
    memset(longs, 'a', sizeof longs - 1);
    longs[sizeof longs - 1] = 0;
    const char *too_long[] = {longs};
    p.stop_strings = too_long;
    assert_int_equal(tw_stop_params_validate(&p, 0, &err), TW_INVALID_ARGUMENT);
    tw_stop_params_init(&p);
    p.n_stop_strings = TW_STOP_MAX_STRINGS + 1;
    p.stop_strings = empty;
    assert_int_equal(tw_stop_params_validate(&p, 0, &err), TW_INVALID_ARGUMENT);
    tw_stop_params_init(&p);
    const uint32_t ids[] = {1000};
    p.stop_token_ids = ids;
    p.n_stop_token_ids = 1;
    assert_int_equal(tw_stop_params_validate(&p, 1000, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_stop_params_validate(&p, 1001, &err), TW_OK);
    assert_string_equal(tw_finish_reason_name(TW_FINISH_STOP_STRING), "stop_string");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_string_across_token_boundaries),
        cmocka_unit_test(test_hold_back_is_released_when_no_match),
        cmocka_unit_test(test_prefix_of_stop_string_is_held_not_streamed),
        cmocka_unit_test(test_overlapping_candidates_and_earliest_match),
        cmocka_unit_test(test_random_streams_never_retract),
        cmocka_unit_test(test_long_delta_grows_buffer),
        cmocka_unit_test(test_token_rules_and_min_tokens),
        cmocka_unit_test(test_validation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
