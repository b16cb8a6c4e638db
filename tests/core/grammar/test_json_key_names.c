/* propertyNames: the keys of an object without properties held to an enum
 * of names (pydantic's dict keyed by an Enum), a pattern (msgspec's
 * constrained keys), lengths, beside patternProperties and counts; the
 * names of an object with properties checked once; the refusals; random
 * walks whose keys jansson and POSIX regex find admitted and distinct. */
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

/* pydantic 2's schema of a model with a dict[Color, int] field */
#define COLORS                                                                                     \
    "{\"$defs\":{\"Color\":{\"enum\":[\"red\",\"green\",\"blue\"],\"title\":\"Color\","            \
    "\"type\":\"string\"}},\"properties\":{\"m\":{\"additionalProperties\":{\"type\":"             \
    "\"integer\"},\"propertyNames\":{\"$ref\":\"#/$defs/Color\"},\"title\":\"M\",\"type\":"        \
    "\"object\"}},\"required\":[\"m\"],\"title\":\"Model\",\"type\":\"object\"}"

static void test_enum_names(void **state)
{
    (void)state;
    tw_json_grammar *g = compile_ok(COLORS);
    assert_true(accepts(g, "{\"m\":{\"red\":1,\"blue\":2}}"));
    assert_true(accepts(g, "{\"m\":{}}"));
    assert_true(accepts(g, "{\"m\":{\"green\":1,\"red\":2,\"blue\":3}}"));
    assert_int_equal(taken(g, "{\"m\":{\"yellow\":1}}"), 7); /* no name starts with y */
    assert_int_equal(taken(g, "{\"m\":{\"re\":1}}"), 9);     /* re is not a name */
    assert_int_equal(taken(g, "{\"m\":{\"redd\":1}}"), 10);
    /* once each: a name taken starts no key */
    assert_int_equal(taken(g, "{\"m\":{\"red\":1,\"red\":2}}"), 15);
    /* the three names taken, no comma opens a fourth key */
    assert_int_equal(taken(g, "{\"m\":{\"green\":1,\"red\":2,\"blue\":3,"), 32);
    assert_int_equal(taken(g, "{\"m\":{\"r\\u0065d\":1}}"), 8); /* no escapes */
    assert_false(accepts(g, "{\"m\":{\"red\":\"x\"}}"));
    tw_json_grammar_free(g);

    /* a name outside ASCII */
    g = compile_ok("{\"propertyNames\":{\"enum\":[\"caf\xc3\xa9\",\"tea\"]}}");
    assert_true(accepts(g, "{\"caf\xc3\xa9\":1,\"tea\":[]}"));
    assert_false(accepts(g, "{\"caf\xc3\xa8\":1}"));
    tw_json_grammar_free(g);

    /* a const, and an enum's other values, which no key can be */
    g = compile_ok("{\"type\":\"object\",\"propertyNames\":{\"const\":\"only\"}}");
    assert_true(accepts(g, "{\"only\":true}"));
    assert_int_equal(taken(g, "{\"only\":1,"), 9);
    tw_json_grammar_free(g);
    g = compile_ok("{\"propertyNames\":{\"enum\":[\"a\",1,null]},\"minProperties\":1}");
    assert_true(accepts(g, "{\"a\":1}"));
    assert_false(accepts(g, "{}"));
    tw_json_grammar_free(g);
}

static void test_string_names(void **state)
{
    (void)state;
    /* msgspec's dict[Annotated[str, Meta(pattern="^A")], ...] */
    tw_json_grammar *g = compile_ok(
        "{\"type\":\"object\",\"propertyNames\":{\"pattern\":\"^A\"},\"additionalProperties\":{"
        "\"type\":\"string\",\"pattern\":\"^B$\"},\"minProperties\":1}");
    assert_true(tw_json_grammar_may_strand(g));
    assert_true(accepts(g, "{\"Ax\":\"B\",\"A\":\"B\"}"));
    assert_false(accepts(g, "{}"));
    assert_int_equal(taken(g, "{\"x\":\"B\"}"), 2);
    assert_int_equal(taken(g, "{\"\xc3\xa9\":\"B\"}"), 2); /* an ASCII pattern: no lead byte */
    tw_json_grammar_free(g);

    /* lengths */
    g = compile_ok("{\"propertyNames\":{\"minLength\":2,\"maxLength\":3},"
                   "\"additionalProperties\":{\"type\":\"integer\"}}");
    assert_true(accepts(g, "{\"ab\":1,\"abc\":2,\"\xc3\xa9\xc3\xa9\":3}"));
    assert_int_equal(taken(g, "{\"a\":1}"), 3);    /* too short to close */
    assert_int_equal(taken(g, "{\"abcd\":1}"), 5); /* a fourth character */
    tw_json_grammar_free(g);

    /* a pattern and a maxLength: the character that fills it must make a
     * match, as only the quote can follow */
    g = compile_ok("{\"propertyNames\":{\"pattern\":\"^[a-z]+[0-9]$\",\"maxLength\":3}}");
    assert_true(accepts(g, "{\"ab1\":0,\"a2\":0}"));
    assert_int_equal(taken(g, "{\"abc\":0}"), 4);
    tw_json_grammar_free(g);

    /* a format read as a pattern */
    g = compile_ok("{\"propertyNames\":{\"format\":\"email\"},\"additionalProperties\":{\"type\":"
                   "\"boolean\"}}");
    assert_true(accepts(g, "{\"a@b.co\":true}"));
    assert_false(accepts(g, "{\"ab\":true}"));
    tw_json_grammar_free(g);

    /* beside patternProperties: a key is a name, and a pattern or
     * additionalProperties reads its value */
    g = compile_ok("{\"propertyNames\":{\"maxLength\":2},\"patternProperties\":{\"^n\":{"
                   "\"type\":\"number\"}},\"additionalProperties\":false}");
    assert_true(accepts(g, "{\"n1\":1,\"n\":2}"));
    assert_int_equal(taken(g, "{\"nab\":1}"), 4);
    assert_int_equal(taken(g, "{\"x\":1}"), 2);
    tw_json_grammar_free(g);

    /* alone, it makes an object schema */
    g = compile_ok("{\"propertyNames\":{\"maxLength\":1}}");
    assert_true(accepts(g, "{\"a\":[1]}"));
    assert_false(accepts(g, "[]"));
    tw_json_grammar_free(g);
}

static void test_other_forms(void **state)
{
    (void)state;
    /* names that rule nothing out leave keys as they were, escapes too */
    tw_json_grammar *g = compile_ok("{\"propertyNames\":{\"type\":\"string\"}}");
    assert_true(accepts(g, "{\"a\\u0062\":1}"));
    tw_json_grammar_free(g);
    g = compile_ok("{\"type\":\"object\",\"propertyNames\":true}");
    assert_true(accepts(g, "{\"a\\u0062\":1}"));
    tw_json_grammar_free(g);

    /* false: no key at all */
    g = compile_ok("{\"type\":\"object\",\"propertyNames\":false}");
    assert_true(accepts(g, "{}"));
    assert_int_equal(taken(g, "{\"a\":1}"), 1);
    tw_json_grammar_free(g);

    /* beside properties, whose names it must admit: they are all the
     * object writes */
    g = compile_ok("{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},"
                   "\"user_name\":{}},\"propertyNames\":{\"pattern\":\"^[a-z_]+$\"},"
                   "\"additionalProperties\":{\"type\":\"integer\"}}");
    assert_true(accepts(g, "{\"id\":\"x\",\"user_name\":2}"));
    tw_json_grammar_free(g);
}

static void test_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *schema, *message;
    } cases[] = {
        {"{\"propertyNames\":{\"type\":\"integer\"}}", "\"propertyNames\" admits no string"},
        /* pydantic's dict[IntEnum, ...] */
        {"{\"$defs\":{\"I\":{\"enum\":[1,2],\"type\":\"integer\"}},\"type\":\"object\","
         "\"propertyNames\":{\"$ref\":\"#/$defs/I\"}}",
         "\"propertyNames\" admits no string"},
        {"{\"propertyNames\":{\"format\":\"uuid\"}}", "\"format\" in \"propertyNames\""},
        {"{\"propertyNames\":{\"enum\":[\"a\\\"b\"]}}", "writes with an escape"},
        {"{\"propertyNames\":{\"enum\":[\"a\",\"b\"]},\"minProperties\":3}",
         "minProperties above the names"},
        {"{\"propertyNames\":{\"pattern\":\"(\"}}", "(at /propertyNames)"},
        {"{\"properties\":{\"ID\":{}},\"propertyNames\":{\"pattern\":\"^[a-z]+$\"}}",
         "property \"ID\" is not a name"},
        {"{\"properties\":{\"a\":{}},\"propertyNames\":false}", "admits none of them"},
        {"{\"allOf\":[{\"type\":\"object\",\"propertyNames\":{\"maxLength\":2}},"
         "{\"properties\":{}}]}",
         "\"propertyNames\" in a schema \"allOf\" merges"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        refused_with(cases[i].schema, cases[i].message);
}

/* Random walks: every key is one the names admit (check), none twice, and
 * the count of keys within [lo, hi]. */
static void check_walks(const char *schema, bool (*check)(const char *key), size_t lo, size_t hi,
                        uint64_t seed)
{
    tw_json_grammar *g = compile_ok(schema);
    tw_test_rng rng = {seed};
    char doc[1 << 14];
    int finished = 0, keys = 0;
    for (int w = 0; w < 200; w++) {
        const size_t n = grammar_walk(g, &rng, doc, sizeof doc, 20 + (size_t)w % 150);
        if (!n)
            continue;
        finished++;
        json_error_t je;
        json_t *v = json_loadb(doc, n, JSON_REJECT_DUPLICATES, &je);
        if (!json_is_object(v) || json_object_size(v) < lo || json_object_size(v) > hi)
            fail_msg("walk %d (%s): %s", w, je.text, doc);
        const char *k;
        json_t *val;
        json_object_foreach(v, k, val)
        {
            keys++;
            if (!check(k) || !json_is_integer(val))
                fail_msg("walk %d: key \"%s\" or its value: %s", w, k, doc);
        }
        json_decref(v);
    }
    assert_true(finished > 100);
    assert_true(keys > 100);
    tw_json_grammar_free(g);
}

static bool is_color(const char *k)
{
    return !strcmp(k, "red") || !strcmp(k, "green") || !strcmp(k, "blue") || !strcmp(k, "re2");
}

static regex_t g_names;

static bool is_pattern_name(const char *k)
{
    return regexec(&g_names, k, 0, NULL, 0) == 0 && strlen(k) <= 4;
}

static void test_random_walks(void **state)
{
    (void)state;
    check_walks("{\"propertyNames\":{\"enum\":[\"red\",\"green\",\"blue\",\"re2\"]},"
                "\"additionalProperties\":{\"type\":\"integer\"},\"minProperties\":1}",
                is_color, 1, 4, 0x6e616d65);
    assert_int_equal(regcomp(&g_names, "^[a-c]+[0-9]?$", REG_EXTENDED | REG_NOSUB), 0);
    check_walks("{\"propertyNames\":{\"pattern\":\"^[a-c]+[0-9]?$\",\"maxLength\":4},"
                "\"additionalProperties\":{\"type\":\"integer\"},\"maxProperties\":5}",
                is_pattern_name, 0, 5, 0x70617474);
    regfree(&g_names);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enum_names),   cmocka_unit_test(test_string_names),
        cmocka_unit_test(test_other_forms),  cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_random_walks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
