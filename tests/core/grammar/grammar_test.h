/* What the grammar tests share: compiling a schema that must compile,
 * whether a text is a whole document of a grammar, and random walks through
 * the matcher. Include after cmocka. */
#ifndef TW_TESTS_GRAMMAR_TEST_H
#define TW_TESTS_GRAMMAR_TEST_H

#include <string.h>

#include "test_support.h"
#include "tw/json_grammar.h"

/* schema NULL: any JSON object. */
static inline tw_json_grammar *compile_ok(const char *schema)
{
    tw_json_grammar *g = NULL;
    tw_err err;
    if (tw_json_grammar_compile(schema, schema ? strlen(schema) : 0, &g, &err) != TW_OK)
        fail_msg("compile %s: %s", schema ? schema : "(any object)", err.msg);
    return g;
}

/* The n bytes of text taken and a whole document. */
static inline bool accepts_n(const tw_json_grammar *g, const char *text, size_t n)
{
    tw_json_state s;
    tw_json_state_init(&s, g);
    return tw_json_state_feed(&s, text, n) && tw_json_state_complete(&s);
}

static inline bool accepts(const tw_json_grammar *g, const char *text)
{
    return accepts_n(g, text, strlen(text));
}

/* How many bytes of text the matcher takes before one is refused. */
static inline size_t taken(const tw_json_grammar *g, const char *text)
{
    tw_json_state s;
    tw_json_state_init(&s, g);
    size_t i = 0;
    while (text[i] && tw_json_state_feed_byte(&s, (unsigned char)text[i]))
        i++;
    return i;
}

/* schema is refused as INVALID_ARGUMENT with message in its reason. */
static inline void refused_with(const char *schema, const char *message)
{
    tw_json_grammar *g = NULL;
    tw_err err;
    assert_int_equal(tw_json_grammar_compile(schema, strlen(schema), &g, &err),
                     TW_INVALID_ARGUMENT);
    assert_null(g);
    if (!strstr(err.msg, message))
        fail_msg("%s: %s (wanted %s)", schema, err.msg, message);
}

/* Every prefix accepted (a prefix of a refused document may be accepted). */
static inline bool prefix_ok(const tw_json_grammar *g, const char *text)
{
    tw_json_state s;
    tw_json_state_init(&s, g);
    return tw_json_state_feed(&s, text, strlen(text));
}

/* Takes random accepted bytes until the document is whole; after `soft`
 * bytes, closing bytes are preferred so every walk ends. Returns the
 * length, or 0 when it ran past cap. */
static inline size_t grammar_walk(const tw_json_grammar *g, tw_test_rng *rng, char *out, size_t cap,
                                  size_t soft)
{
    tw_json_state s, t;
    tw_json_state_init(&s, g);
    size_t n = 0;
    while (n + 1 < cap) {
        unsigned char ok[256];
        int n_ok = 0, n_close = 0;
        unsigned char close[8];
        for (int c = 0; c < 256; c++) {
            tw_json_state_copy(&t, &s);
            if (tw_json_state_feed_byte(&t, (unsigned char)c)) {
                ok[n_ok++] = (unsigned char)c;
                if (strchr("\"]}", c) && c && n_close < 8)
                    close[n_close++] = (unsigned char)c;
            }
        }
        if (tw_json_state_complete(&s) && (n_ok == 0 || tw_test_rand_u64(rng) % 4 == 0))
            break;
        if (n_ok == 0)
            fail_msg("dead end after %zu bytes: %.*s", n, (int)n, out);
        unsigned char c = (n > soft && n_close) ? close[tw_test_rand_u64(rng) % n_close]
                                                : ok[tw_test_rand_u64(rng) % n_ok];
        assert_true(tw_json_state_feed_byte(&s, c));
        out[n++] = (char)c;
    }
    out[n] = '\0';
    return tw_json_state_complete(&s) ? n : 0;
}

#endif
