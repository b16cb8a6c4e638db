/* Strings held to a schema's "pattern": the matcher's verdicts on whole
 * documents and prefixes, the refusals, and random walks whose strings
 * glibc's POSIX regex engine (not PCRE2, which the matcher uses) finds
 * matching. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/json_grammar.h"

static tw_json_grammar *compile_ok(const char *schema)
{
    tw_json_grammar *g = NULL;
    tw_err err;
    if (tw_json_grammar_compile(schema, strlen(schema), &g, &err) != TW_OK)
        fail_msg("compile %s: %s", schema, err.msg);
    return g;
}

/* The schema {"type":"string","pattern":p, extra...}. */
static tw_json_grammar *string_schema(const char *pattern, const char *extra)
{
    json_t *s = json_pack("{ss ss}", "type", "string", "pattern", pattern);
    if (extra) {
        json_t *more = json_loads(extra, 0, NULL);
        assert_non_null(more);
        json_object_update(s, more);
        json_decref(more);
    }
    char *text = json_dumps(s, JSON_COMPACT);
    tw_json_grammar *g = compile_ok(text);
    free(text);
    json_decref(s);
    return g;
}

/* How many bytes of text the matcher takes before one is refused. */
static size_t taken(const tw_json_grammar *g, const char *text)
{
    tw_json_state s;
    tw_json_state_init(&s, g);
    size_t i = 0;
    while (text[i] && tw_json_state_feed_byte(&s, (unsigned char)text[i]))
        i++;
    return i;
}

static bool accepts(const tw_json_grammar *g, const char *text)
{
    tw_json_state s;
    tw_json_state_init(&s, g);
    return tw_json_state_feed(&s, text, strlen(text)) && tw_json_state_complete(&s);
}

static void test_verdicts(void **state)
{
    (void)state;
    /* anchored at both ends: each character is asked at once */
    tw_json_grammar *g = string_schema("^[A-Z]{2}-\\d{3}$", NULL);
    assert_true(accepts(g, "\"AB-123\""));
    assert_false(accepts(g, "\"AB-12\""));
    assert_int_equal(taken(g, "\"AB-1234\""), 7); /* the fourth digit */
    assert_int_equal(taken(g, "\"ab-123\""), 1);  /* the lower case a */
    assert_int_equal(taken(g, "\"AB-12\""), 6);   /* all but the quote */
    assert_int_equal(taken(g, "\"AB\\u002d"), 3); /* no escapes */
    uint32_t room;
    tw_json_state s;
    tw_json_state_init(&s, g);
    assert_true(tw_json_state_feed(&s, "\"A", 2));
    assert_false(tw_json_state_in_plain_string(&s, &room)); /* no fast path */
    tw_json_grammar_free(g);

    /* not anchored: any text may still come to hold a match; only the end
     * is asked */
    g = string_schema("ab|cd", NULL);
    assert_true(accepts(g, "\"xxabyy\""));
    assert_true(accepts(g, "\"cd\""));
    assert_int_equal(taken(g, "\"xyz\""), 4); /* all but the quote */
    assert_false(accepts(g, "\"acbd\""));
    tw_json_grammar_free(g);

    /* $ is the end of the text only */
    g = string_schema("z$", NULL);
    assert_true(accepts(g, "\"abz\""));
    assert_false(accepts(g, "\"za\""));
    tw_json_grammar_free(g);

    /* the character that fills maxLength must make a match, so a string
     * that cannot match within it is refused before it is stuck */
    g = string_schema("x", "{\"maxLength\":3,\"minLength\":2}");
    assert_true(accepts(g, "\"abx\""));
    assert_int_equal(taken(g, "\"abc"), 3);
    assert_int_equal(taken(g, "\"x\""), 2); /* minLength still holds */
    assert_true(accepts(g, "\"xy\""));
    tw_json_grammar_free(g);

    /* an ASCII-only pattern refuses a UTF-8 lead byte itself; one that may
     * match other characters asks when the character is whole */
    g = string_schema("^[a-z]+$", NULL);
    assert_int_equal(taken(g, "\"ab\xc3\xa9\""), 3);
    tw_json_grammar_free(g);
    g = string_schema("^caf[e\xc3\xa9]$", NULL);
    assert_true(accepts(g, "\"caf\xc3\xa9\""));
    assert_true(accepts(g, "\"cafe\""));
    assert_int_equal(taken(g, "\"caf\xc3\xa8\""), 5); /* è: its second byte */
    tw_json_grammar_free(g);
    g = string_schema("^.{2}$", NULL);
    assert_true(accepts(g, "\"\xe2\x82\xac\xc3\xa9\""));
    assert_false(accepts(g, "\"abc\""));
    tw_json_grammar_free(g);

    /* inside an object, and where a string is one type among several */
    g = compile_ok("{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\",\"pattern\":"
                   "\"^[0-9]+$\"},\"v\":{\"type\":[\"string\",\"null\"],\"pattern\":\"^q\"}},"
                   "\"required\":[\"id\"]}");
    assert_true(accepts(g, "{\"id\": \"0042\", \"v\": null}"));
    assert_true(accepts(g, "{\"id\": \"7\", \"v\": \"qq\"}"));
    assert_false(accepts(g, "{\"id\": \"7\", \"v\": \"rq\"}"));
    assert_false(accepts(g, "{\"id\": \"\"}"));
    tw_json_grammar_free(g);

    /* enum and const values are checked against the pattern once */
    g = compile_ok("{\"enum\":[\"AB\",\"CD\",3],\"pattern\":\"^[A-Z]+$\"}");
    assert_true(accepts(g, "\"CD\""));
    assert_true(accepts(g, "3"));
    tw_json_grammar_free(g);
}

static void test_refusals(void **state)
{
    (void)state;
    char long_pattern[TW_JSON_MAX_PATTERN + 64];
    snprintf(long_pattern, sizeof long_pattern, "{\"type\":\"string\",\"pattern\":\"");
    size_t at = strlen(long_pattern);
    memset(long_pattern + at, 'a', TW_JSON_MAX_PATTERN + 1);
    strcpy(long_pattern + at + TW_JSON_MAX_PATTERN + 1, "\"}");
    const struct {
        const char *schema, *says;
    } cases[] = {
        {"{\"type\":\"string\",\"pattern\":\"(ab\"}",
         "\"pattern\" does not compile: missing closing"},
        {"{\"properties\":{\"p\":{\"pattern\":\"[z-a]\"}}}", "(at /properties/p)"},
        {"{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", "back reference"},
        {"{\"type\":\"string\",\"pattern\":7}", "\"pattern\" must be a string"},
        {"{\"type\":\"string\",\"format\":\"date\",\"pattern\":\"^2\"}",
         "\"pattern\" beside \"format\""},
        {"{\"enum\":[\"AB\",\"c\"],\"pattern\":\"^[A-Z]+$\"}",
         "c, an enum or const value, does not"},
        {"{\"const\":\"x\",\"pattern\":\"y\"}", "does not match its \"pattern\""},
        {long_pattern, "a \"pattern\" of 1025 bytes (at most 1024)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tw_json_grammar *g = NULL;
        tw_err err;
        tw_status st = tw_json_grammar_compile(cases[i].schema, strlen(cases[i].schema), &g, &err);
        if (st != TW_INVALID_ARGUMENT || !strstr(err.msg, cases[i].says))
            fail_msg("case %zu: %d %s (wanted %s)", i, (int)st, st ? err.msg : "", cases[i].says);
        assert_null(g);
    }
}

/* Takes random accepted bytes until the document is whole (the closing
 * quote preferred once allowed past `soft` bytes); fails on a dead end. */
static size_t walk(const tw_json_grammar *g, tw_test_rng *rng, char *out, size_t cap, size_t soft)
{
    tw_json_state s, t;
    tw_json_state_init(&s, g);
    size_t n = 0;
    while (!tw_json_state_closed(&s) && n + 1 < cap) {
        unsigned char ok[256];
        int n_ok = 0;
        bool close = false;
        for (int c = 1; c < 256; c++) {
            tw_json_state_copy(&t, &s);
            if (tw_json_state_feed_byte(&t, (unsigned char)c)) {
                ok[n_ok++] = (unsigned char)c;
                close |= c == '"' && n > 0;
            }
        }
        if (n_ok == 0)
            fail_msg("dead end after %zu bytes: %.*s", n, (int)n, out);
        const unsigned char c = n > soft && close ? '"' : ok[tw_test_rand_u64(rng) % n_ok];
        assert_true(tw_json_state_feed_byte(&s, c));
        out[n++] = (char)c;
    }
    out[n] = '\0';
    return tw_json_state_closed(&s) ? n : 0;
}

static void test_random_walks(void **state)
{
    (void)state;
    /* each in a syntax both PCRE2 and POSIX ERE read the same way */
    static const char *const patterns[] = {
        "^[A-Z]{2}-[0-9]{3}$", "^(ab|cd)+e?$", "^[a-c]*x[0-9]?$", "^q[0-9]", "^(x|y)?[a-f]{1,4}z$",
    };
    tw_test_rng rng = {0x5eed5eedull};
    char doc[1024];
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) {
        tw_json_grammar *g = string_schema(patterns[i], NULL);
        regex_t re;
        assert_int_equal(regcomp(&re, patterns[i], REG_EXTENDED | REG_NOSUB), 0);
        int finished = 0;
        for (int w = 0; w < 200; w++) {
            const size_t n = walk(g, &rng, doc, sizeof doc, 4 + (size_t)w % 24);
            if (!n)
                continue;
            finished++;
            json_error_t je;
            json_t *v = json_loadb(doc, n, JSON_DECODE_ANY, &je);
            if (!v || !json_is_string(v))
                fail_msg("%s: walk %d gave %s (%s)", patterns[i], w, doc, je.text);
            if (regexec(&re, json_string_value(v), 0, NULL, 0) != 0)
                fail_msg("%s: walk %d gave %s, which does not match", patterns[i], w, doc);
            json_decref(v);
        }
        assert_true(finished > 150);
        regfree(&re);
        tw_json_grammar_free(g);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verdicts),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_random_walks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
