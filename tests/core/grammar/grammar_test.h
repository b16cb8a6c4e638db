/* What the grammar tests share: compiling a schema that must compile, and
 * whether a text is a whole document of a grammar. Include after cmocka. */
#ifndef TW_TESTS_GRAMMAR_TEST_H
#define TW_TESTS_GRAMMAR_TEST_H

#include <string.h>

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

#endif
