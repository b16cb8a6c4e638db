/* allOf of schemas that name no properties, merged keyword by keyword:
 * shared types, the tighter bounds, the common enum values, other keywords
 * said once or alike; the refusals; random walks whose numbers an
 * independent reading finds within every schema. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_test.h"

static void test_merges(void **state)
{
    (void)state;
    /* a string and its length */
    tw_json_grammar *g = compile_ok("{\"allOf\":[{\"type\":\"string\"},{\"maxLength\":3}]}");
    assert_true(accepts(g, "\"abc\""));
    assert_int_equal(taken(g, "\"abcd\""), 4);
    assert_false(accepts(g, "3"));
    tw_json_grammar_free(g);
    /* the higher lower bound, the lower upper bound */
    g = compile_ok("{\"allOf\":[{\"type\":\"integer\",\"minimum\":0,\"maximum\":100},"
                   "{\"minimum\":2,\"exclusiveMaximum\":11}]}");
    assert_true(accepts(g, "2"));
    assert_true(accepts(g, "10"));
    assert_false(accepts(g, "1"));
    assert_false(accepts(g, "11"));
    tw_json_grammar_free(g);
    /* types: the shared ones; a number and an integer share integers;
     * nullable is a type */
    g = compile_ok("{\"allOf\":[{\"type\":[\"number\",\"null\"]},{\"type\":\"integer\"}]}");
    assert_true(accepts(g, "7"));
    assert_false(accepts(g, "1.5"));
    assert_false(accepts(g, "null"));
    tw_json_grammar_free(g);
    g = compile_ok("{\"allOf\":[{\"type\":\"string\",\"nullable\":true},{\"type\":[\"string\","
                   "\"null\"]}]}");
    assert_true(accepts(g, "null"));
    tw_json_grammar_free(g);
    /* enum values: those all take, of the shared types */
    g = compile_ok("{\"allOf\":[{\"enum\":[\"a\",\"b\",\"c\",1]},{\"enum\":[\"b\",\"c\",\"d\",1]},"
                   "{\"type\":\"string\"}]}");
    assert_true(accepts(g, "\"b\""));
    assert_true(accepts(g, "\"c\""));
    assert_false(accepts(g, "\"a\""));
    assert_false(accepts(g, "1"));
    tw_json_grammar_free(g);
    g = compile_ok("{\"allOf\":[{\"const\":2},{\"type\":\"integer\"}]}");
    assert_true(accepts(g, "2"));
    tw_json_grammar_free(g);
    /* through $ref, with a keyword said once or alike */
    g = compile_ok(
        "{\"$defs\":{\"S\":{\"type\":\"string\",\"minLength\":1,\"pattern\":\"^[a-z]+$\"}},"
        "\"allOf\":[{\"$ref\":\"#/$defs/S\",\"description\":\"base\"},{\"maxLength\":2,"
        "\"pattern\":\"^[a-z]+$\"}]}");
    assert_true(accepts(g, "\"ab\""));
    assert_false(accepts(g, "\"\""));
    assert_false(accepts(g, "\"abc\""));
    assert_false(accepts(g, "\"A\""));
    tw_json_grammar_free(g);
    /* open objects, as zod writes an intersection */
    g = compile_ok("{\"allOf\":[{\"type\":\"object\",\"propertyNames\":{\"maxLength\":2}},"
                   "{\"type\":\"object\",\"minProperties\":1,\"additionalProperties\":{\"type\":"
                   "\"integer\"}}]}");
    assert_true(accepts(g, "{\"ab\":1}"));
    assert_false(accepts(g, "{}"));
    assert_false(accepts(g, "{\"abc\":1}"));
    tw_json_grammar_free(g);
    /* sets win over lists */
    g = compile_ok("{\"allOf\":[{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},"
                   "{\"uniqueItems\":true,\"maxItems\":3}]}");
    assert_true(accepts(g, "[1,2,3]"));
    assert_false(accepts(g, "[1,1]"));
    assert_false(accepts(g, "[1,2,3,4]"));
    tw_json_grammar_free(g);
}

static void test_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *schema, *message;
    } cases[] = {
        {"{\"allOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}",
         "no type is among every \"allOf\" schema's (at /allOf/1)"},
        {"{\"allOf\":[{\"enum\":[\"a\"]},{\"enum\":[\"b\"]}]}", "no enum or const value fits"},
        {"{\"allOf\":[{\"enum\":[1,2]},{\"type\":\"string\"}]}", "no enum or const value fits"},
        {"{\"allOf\":[{\"pattern\":\"^a\"},{\"pattern\":\"b$\"}]}",
         "\"pattern\" differs between \"allOf\" schemas (at /allOf/1)"},
        {"{\"allOf\":[{\"type\":\"string\"},{\"anyOf\":[{\"maxLength\":2}]}]}",
         "without $ref, allOf, anyOf or oneOf of their own (at /allOf/1)"},
        {"{\"allOf\":[{\"maxLength\":\"3\"},{\"type\":\"string\"}]}",
         "\"maxLength\" in an \"allOf\" merge must be a number"},
        {"{\"allOf\":[{\"type\":\"string\"},{\"$ref\":\"#/nope\"}]}", "(at /allOf/1)"},
        {"{\"allOf\":[{\"type\":\"string\"},false]}", "(at /allOf/1)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        refused_with(cases[i].schema, cases[i].message);
}

/* Random walks through a merged integer range: each number an integer in
 * every schema's range and a multiple of 5. */
static void test_walks(void **state)
{
    (void)state;
    tw_json_grammar *g = compile_ok(
        "{\"type\":\"array\",\"items\":{\"allOf\":[{\"type\":\"integer\",\"minimum\":-40},"
        "{\"maximum\":60,\"multipleOf\":5},{\"type\":\"number\",\"exclusiveMinimum\":-"
        "21}]}}");
    tw_test_rng rng = {0xa110f};
    char doc[4096];
    int finished = 0, numbers = 0;
    for (int w = 0; w < 200; w++) {
        const size_t n = grammar_walk(g, &rng, doc, sizeof doc, 10 + (size_t)w % 80);
        if (!n)
            continue;
        finished++;
        json_t *v = json_loadb(doc, n, 0, NULL);
        if (!json_is_array(v))
            fail_msg("walk %d: %s", w, doc);
        for (size_t i = 0; i < json_array_size(v); i++) {
            const json_t *x = json_array_get(v, i);
            const json_int_t k = json_integer_value(x);
            if (!json_is_integer(x) || k <= -21 || k > 60 || k % 5 != 0)
                fail_msg("walk %d: %s", w, doc);
            numbers++;
        }
        json_decref(v);
    }
    assert_true(finished > 150);
    assert_true(numbers > 100);
    tw_json_grammar_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merges),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_walks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
