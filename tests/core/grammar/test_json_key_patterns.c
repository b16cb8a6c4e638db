/* Objects without properties. patternProperties: their keys asked of the
 * patterns as they grow, each value read by the schema of the patterns its
 * key matches (or by additionalProperties), beside properties, the
 * refusals, and random walks
 * whose keys POSIX regex finds matching and whose values have their
 * pattern's type. minProperties and maxProperties: keys counted. */
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

#include "grammar_test.h"

#define CLOSED                                                                                     \
    "{\"type\":\"object\",\"patternProperties\":{\"^[a-z]{1,8}$\":{\"type\":\"integer\"},"         \
    "\"^x_[0-9]+$\":{\"type\":\"string\"}},\"additionalProperties\":false}"

static void test_verdicts(void **state)
{
    (void)state;
    tw_json_grammar *g = compile_ok(CLOSED);
    assert_true(tw_json_grammar_may_strand(g));
    assert_true(accepts(g, "{\"ab\":1,\"cd\":2}"));
    assert_true(accepts(g, "{\"x_12\":\"v\",\"x\":3}"));
    assert_true(accepts(g, "{}"));
    assert_int_equal(taken(g, "{\"ab\":\"x\"}"), 6);     /* a string for a lower-case key */
    assert_int_equal(taken(g, "{\"x_1\":1}"), 7);        /* a number for x_ */
    assert_int_equal(taken(g, "{\"A\":1}"), 2);          /* no pattern takes A */
    assert_int_equal(taken(g, "{\"x_\":1}"), 4);         /* x_ needs a digit */
    assert_int_equal(taken(g, "{\"abcdefghi\":1}"), 10); /* a ninth letter */
    assert_int_equal(taken(g, "{\"ab\":1,\"ab\":2}"), 11);
    assert_int_equal(taken(g, "{\"a\\u0062\":1}"), 3); /* no escapes */
    assert_int_equal(taken(g, "{\"\xc3\xa9\":1}"), 2); /* ASCII patterns: no lead byte */
    tw_json_grammar_free(g);

    /* keys no pattern matches: additionalProperties' */
    g = compile_ok("{\"type\":\"object\",\"patternProperties\":{\"^n_\":{\"type\":\"number\"}},"
                   "\"additionalProperties\":{\"type\":\"boolean\"}}");
    assert_true(accepts(g, "{\"n_a\":1.5,\"other\":true,\"\xc3\xa9\":false}"));
    assert_false(accepts(g, "{\"n_a\":\"x\"}"));
    assert_false(accepts(g, "{\"other\":1}"));
    tw_json_grammar_free(g);

    /* a key two patterns match takes a value only when they name one
     * schema */
    g = compile_ok("{\"type\":\"object\",\"patternProperties\":{\"^a\":{\"type\":\"integer\"},"
                   "\"b$\":{\"type\":\"string\"},\"^c\":{\"type\":\"integer\"},\"d$\":{\"type\":"
                   "\"integer\"}},\"additionalProperties\":false}");
    assert_false(accepts(g, "{\"ab\":1}"));
    assert_false(accepts(g, "{\"ab\":\"s\"}"));
    assert_true(accepts(g, "{\"abc\":1,\"xb\":\"s\"}"));
    assert_false(accepts(g, "{\"cb\":1}")); /* ^c and b$ */
    assert_true(accepts(g, "{\"cd\":1}"));  /* ^c and d$: one schema */
    tw_json_grammar_free(g);
    g = compile_ok("{\"$defs\":{\"n\":{\"type\":\"integer\"}},\"type\":\"object\","
                   "\"patternProperties\":{\"^a\":{\"$ref\":\"#/$defs/n\"},\"b$\":{\"$ref\":"
                   "\"#/$defs/n\"}},\"additionalProperties\":false}");
    assert_true(accepts(g, "{\"ab\":1}"));
    tw_json_grammar_free(g);

    /* pydantic's Dict[constr(pattern=...), int] inside a model */
    g = compile_ok("{\"type\":\"object\",\"properties\":{\"counts\":{\"type\":\"object\","
                   "\"patternProperties\":{\"^[A-Z]{3}$\":{\"type\":\"integer\"}},"
                   "\"additionalProperties\":false}},\"required\":[\"counts\"]}");
    assert_true(accepts(g, "{\"counts\":{\"USD\":3,\"EUR\":4}}"));
    assert_false(accepts(g, "{\"counts\":{\"usd\":3}}"));
    tw_json_grammar_free(g);
}

static void test_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *schema, *message;
    } cases[] = {
        {"{\"properties\":{\"a\":{},\"ba\":{}},\"patternProperties\":{\"^b\":{}}}",
         "property \"ba\" is also matched by \"patternProperties\""},
        {"{\"patternProperties\":[]}", "\"patternProperties\" must be an object"},
        {"{\"patternProperties\":{\"(\":{}}}", "(at /patternProperties/()"},
        {"{\"patternProperties\":{\"^a\":{\"type\":\"nope\"}}}", "(at /patternProperties/^a)"},
        {"{\"patternProperties\":{\"(a)\\\\1\":{}}}", "back reference"},
        {"{\"patternProperties\":{\"a\":{},\"b\":{},\"c\":{},\"d\":{},\"e\":{},\"f\":{},\"g\":{},"
         "\"h\":{},\"i\":{},\"j\":{},\"k\":{},\"l\":{},\"m\":{},\"n\":{},\"o\":{},\"p\":{},"
         "\"q\":{}}}",
         "more than 16"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        refused_with(cases[i].schema, cases[i].message);
    /* beside properties whose names none of them matches, patterns change
     * nothing: the object writes no other keys */
    tw_json_grammar *g = compile_ok("{\"properties\":{\"a\":{\"type\":\"integer\"}},"
                                    "\"required\":[\"a\"],\"patternProperties\":{\"^x_\":{"
                                    "\"type\":\"string\"}}}");
    assert_true(accepts(g, "{\"a\":1}"));
    assert_false(accepts(g, "{\"a\":1,\"x_1\":\"s\"}"));
    tw_json_grammar_free(g);
    /* an empty patternProperties is none */
    g = compile_ok("{\"properties\":{\"a\":{}},\"patternProperties\":{}}");
    assert_true(accepts(g, "{\"a\":1}"));
    tw_json_grammar_free(g);
}

/* Random walks: every key matches the pattern (POSIX regex) whose type its
 * value has, or none and then its value is additionalProperties'. */
static void check_walks(const char *schema, bool open_rest)
{
    tw_json_grammar *g = compile_ok(schema);
    regex_t lower, x;
    assert_int_equal(regcomp(&lower, "^[a-z]{1,8}$", REG_EXTENDED | REG_NOSUB), 0);
    assert_int_equal(regcomp(&x, "^x_[0-9]+$", REG_EXTENDED | REG_NOSUB), 0);
    tw_test_rng rng = {0x6b657973 ^ (uint64_t)open_rest};
    char *doc = malloc(1 << 16);
    assert_non_null(doc);
    int finished = 0, keys = 0;
    for (int w = 0; w < 300; w++) {
        const size_t n = grammar_walk(g, &rng, doc, 1 << 16, 20 + (size_t)w % 200);
        if (!n)
            continue;
        finished++;
        json_error_t je;
        json_t *v = json_loadb(doc, n, JSON_REJECT_DUPLICATES, &je);
        if (!json_is_object(v))
            fail_msg("walk %d gave what jansson refuses (%s): %s", w, je.text, doc);
        const char *k;
        json_t *val;
        json_object_foreach(v, k, val)
        {
            keys++;
            const bool is_lower = regexec(&lower, k, 0, NULL, 0) == 0;
            const bool is_x = regexec(&x, k, 0, NULL, 0) == 0;
            const bool fits = is_lower    ? json_is_integer(val)
                              : is_x      ? json_is_string(val)
                              : open_rest ? json_is_null(val)
                                          : false;
            if (!fits)
                fail_msg("walk %d: key \"%s\" and its value do not fit: %s", w, k, doc);
        }
        json_decref(v);
    }
    assert_true(finished > 150);
    assert_true(keys > 150);
    free(doc);
    regfree(&lower);
    regfree(&x);
    tw_json_grammar_free(g);
}

static void test_random_walks(void **state)
{
    (void)state;
    check_walks(CLOSED, false);
    check_walks("{\"type\":\"object\",\"patternProperties\":{\"^[a-z]{1,8}$\":{\"type\":"
                "\"integer\"},\"^x_[0-9]+$\":{\"type\":\"string\"}},\"additionalProperties\":{"
                "\"type\":\"null\"}}",
                true);
}

static void test_property_counts(void **state)
{
    (void)state;
    tw_json_grammar *g = compile_ok("{\"type\":\"object\",\"additionalProperties\":{\"type\":"
                                    "\"integer\"},\"minProperties\":2,\"maxProperties\":3}");
    assert_false(accepts(g, "{}"));
    assert_false(accepts(g, "{\"a\":1}"));
    assert_true(accepts(g, "{\"a\":1,\"b\":2}"));
    assert_true(accepts(g, "{\"a\":1,\"b\":2,\"c\":3}"));
    assert_int_equal(taken(g, "{\"a\":1}"), 6);                          /* too few to close */
    assert_int_equal(taken(g, "{\"a\":1,\"b\":2,\"c\":3,\"d\":4}"), 18); /* a fourth key */
    tw_json_grammar_free(g);
    /* maxProperties 0: only {}; alone, they make an object schema */
    g = compile_ok("{\"maxProperties\":0}");
    assert_true(accepts(g, "{}"));
    assert_int_equal(taken(g, "{\"a\":1}"), 1);
    assert_false(accepts(g, "[]"));
    tw_json_grammar_free(g);
    /* with patterns */
    g = compile_ok("{\"patternProperties\":{\"^[a-z]$\":{\"type\":\"null\"}},"
                   "\"additionalProperties\":false,\"minProperties\":1}");
    assert_false(accepts(g, "{}"));
    assert_true(accepts(g, "{\"q\":null}"));
    tw_json_grammar_free(g);
    /* with properties: taken where every object written fits */
    g = compile_ok("{\"properties\":{\"a\":{},\"b\":{}},\"required\":[\"a\"],"
                   "\"minProperties\":1,\"maxProperties\":2}");
    assert_true(accepts(g, "{\"a\":1}"));
    tw_json_grammar_free(g);
    refused_with("{\"properties\":{\"a\":{},\"b\":{}},\"required\":[\"a\"],\"minProperties\":2}",
                 "minProperties above the required properties");
    refused_with("{\"properties\":{\"a\":{},\"b\":{},\"c\":{}},\"minProperties\":1,"
                 "\"maxProperties\":2}",
                 "maxProperties below all of them");
    refused_with("{\"properties\":{\"a\":{},\"b\":{}},\"maxProperties\":1}",
                 "maxProperties below all of them");
    refused_with("{\"minProperties\":3,\"maxProperties\":2}", "minProperties is above");
    refused_with("{\"minProperties\":-1}", "\"minProperties\" must be a non-negative");

    /* none required and minProperties 1: at least one of them, in their
     * order; with maxProperties 1, exactly one */
    g = compile_ok("{\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"},"
                   "\"c\":{}},\"minProperties\":1}");
    assert_int_equal(taken(g, "{}"), 1);
    assert_true(accepts(g, "{\"a\":1}"));
    assert_true(accepts(g, "{\"b\":\"x\",\"c\":null}"));
    assert_true(accepts(g, "{\"a\":1,\"b\":\"y\",\"c\":[3]}"));
    assert_int_equal(taken(g, "{\"b\":\"x\",\"a\":1}"), 10);
    assert_false(accepts(g, "{\"a\":\"x\"}"));
    tw_json_grammar_free(g);
    g = compile_ok("{\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},"
                   "\"minProperties\":1,\"maxProperties\":1}");
    assert_true(accepts(g, "{\"b\":\"x\"}"));
    assert_int_equal(taken(g, "{\"a\":1,"), 6);
    tw_json_grammar_free(g);
    static const char *const some[] = {
        "{\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"},\"c\":{"
        "\"type\":\"integer\"}},\"minProperties\":1}",
        "{\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"},\"c\":{"
        "\"type\":\"integer\"}},\"minProperties\":1,\"maxProperties\":1}",
    };
    for (int k = 0; k < 2; k++) {
        g = compile_ok(some[k]);
        tw_test_rng r = {0x50e + (uint64_t)k};
        char text[512];
        int done = 0;
        for (int w = 0; w < 200; w++) {
            const size_t n = grammar_walk(g, &r, text, sizeof text, 10 + (size_t)w % 60);
            if (!n)
                continue;
            done++;
            json_t *v = json_loadb(text, n, JSON_REJECT_DUPLICATES, NULL);
            const size_t size = json_object_size(v);
            /* in their order: a before b before c */
            const char *ka = strstr(text, "\"a\""), *kb = strstr(text, "\"b\""),
                       *kc = strstr(text, "\"c\"");
            if (!json_is_object(v) || size < 1 || size > (k ? 1u : 3u) || (ka && kb && ka > kb) ||
                (kb && kc && kb > kc) || (ka && kc && ka > kc))
                fail_msg("walk %d: %.*s", w, (int)n, text);
            json_decref(v);
        }
        assert_true(done > 100);
        tw_json_grammar_free(g);
    }

    /* random walks keep to the counts */
    g = compile_ok("{\"type\":\"object\",\"minProperties\":2,\"maxProperties\":4}");
    tw_test_rng rng = {0xc0117};
    char doc[1 << 14];
    int finished = 0;
    for (int w = 0; w < 200; w++) {
        const size_t n = grammar_walk(g, &rng, doc, sizeof doc, 20 + (size_t)w % 100);
        if (!n)
            continue;
        finished++;
        json_t *v = json_loadb(doc, n, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(v) || json_object_size(v) < 2 || json_object_size(v) > 4)
            fail_msg("walk %d: %.*s", w, (int)n, doc);
        json_decref(v);
    }
    assert_true(finished > 100);
    tw_json_grammar_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verdicts),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_random_walks),
        cmocka_unit_test(test_property_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
