/* uniqueItems: arrays whose items must all differ as JSON values (strings
 * decoded, numbers by value), refused where the matcher cannot tell items
 * apart, and random walks whose arrays an independent comparison finds
 * free of repeats, with no dead end on the way. */
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

#define SET_OF(items) "{\"type\":\"array\",\"uniqueItems\":true,\"items\":" items "}"

static void test_strings(void **state)
{
    (void)state;
    tw_json_grammar *g = compile_ok(SET_OF("{\"type\":\"string\"}"));
    assert_true(accepts(g, "[\"a\", \"b\", \"ab\", \"\"]"));
    assert_false(prefix_ok(g, "[\"a\",\"a\""));
    assert_true(prefix_ok(g, "[\"a\",\"a")); /* may still become "ab" */
    assert_false(prefix_ok(g, "[\"a\",\"\\u0061\""));
    assert_false(prefix_ok(g, "[\"\xc3\xa9\",\"\\u00e9\""));
    assert_false(prefix_ok(g, "[\"\\ud83d\\ude00\",\"\xf0\x9f\x98\x80\""));
    assert_false(prefix_ok(g, "[\"\\n\",\"\\u000a\""));
    assert_false(prefix_ok(g, "[\"\",\"\""));
    assert_true(accepts(g, "[\"a\\n\", \"a\"]"));
    tw_json_grammar_free(g);

    /* the character that fills maxLength may not repeat an item: after
     * it only the quote could come */
    g = compile_ok(SET_OF("{\"type\":\"string\",\"maxLength\":1}"));
    assert_true(accepts(g, "[\"a\",\"b\"]"));
    assert_false(prefix_ok(g, "[\"a\",\"a"));
    assert_false(prefix_ok(g, "[\"a\",\"\\u0061"));
    assert_true(prefix_ok(g, "[\"a\",\"\\u0062"));
    tw_json_grammar_free(g);

    g = compile_ok(SET_OF("{\"type\":\"string\",\"format\":\"uuid\"}"));
    static const char u[] = "\"123e4567-e89b-12d3-a456-42661417400";
    char doc[128];
    snprintf(doc, sizeof doc, "[%s0\",%s1\"]", u, u);
    assert_true(accepts(g, doc));
    snprintf(doc, sizeof doc, "[%s0\",%s0", u, u);
    assert_false(prefix_ok(g, doc));
    tw_json_grammar_free(g);

    g = compile_ok(SET_OF("{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"}"));
    assert_true(accepts(g, "[\"ab\",\"abc\"]"));
    assert_false(prefix_ok(g, "[\"ab\",\"ab\""));
    tw_json_grammar_free(g);

    /* uniqueItems alone makes an array schema */
    g = compile_ok("{\"uniqueItems\":true,\"items\":{\"type\":\"integer\"}}");
    assert_false(accepts(g, "[1,1]"));
    tw_json_grammar_free(g);
    g = compile_ok("{\"uniqueItems\":false}");
    assert_true(accepts(g, "[{},{}]"));
    assert_false(accepts(g, "{}"));
    tw_json_grammar_free(g);

    /* uniqueItems false: repeats as any array takes them */
    g = compile_ok("{\"type\":\"array\",\"uniqueItems\":false,\"items\":{\"type\":\"string\"}}");
    assert_true(accepts(g, "[\"a\",\"a\"]"));
    tw_json_grammar_free(g);
}

static void test_numbers(void **state)
{
    (void)state;
    tw_json_grammar *g = compile_ok(SET_OF("{\"type\":\"number\"}"));
    assert_true(accepts(g, "[1, 10, 100, 0.1, -1, 1e3]"));
    assert_false(accepts(g, "[1, 1.0]"));
    assert_false(accepts(g, "[1, 10e-1]"));
    assert_false(accepts(g, "[100, 1e2]"));
    assert_false(accepts(g, "[0, -0]"));
    assert_false(accepts(g, "[0.0, 0e5]"));
    assert_false(accepts(g, "[1.5, 15E-1]"));
    assert_false(accepts(g, "[0.001, 1e-3]"));
    assert_true(accepts(g, "[1.5, 15E-2]"));
    /* the repeat is refused at the byte that ends it, so it may go on */
    assert_true(prefix_ok(g, "[1, 1"));
    assert_true(accepts(g, "[1, 12]"));
    tw_json_grammar_free(g);

    g = compile_ok(SET_OF("{\"type\":\"integer\"}"));
    assert_true(accepts(g, "[1, -1, 0, 10]"));
    assert_false(accepts(g, "[7, 3, 7]"));
    tw_json_grammar_free(g);

    /* a bounded number that can only end here must not repeat: 5 of 0..9 */
    g = compile_ok(SET_OF("{\"type\":\"integer\",\"minimum\":0,\"maximum\":9}"));
    assert_true(tw_json_grammar_may_strand(g));
    assert_true(accepts(g, "[5, 6]"));
    assert_false(prefix_ok(g, "[5, 5"));
    tw_json_grammar_free(g);

    /* two numbers of different types are different values */
    g = compile_ok(SET_OF("{\"type\":[\"integer\",\"string\",\"null\"]}"));
    assert_true(accepts(g, "[1, \"1\", null]"));
    assert_false(accepts(g, "[null, 2, null]"));
    tw_json_grammar_free(g);
}

static void test_literals(void **state)
{
    (void)state;
    tw_json_grammar *g = compile_ok(SET_OF("{\"enum\":[\"x\",\"y\",1,\"z\"]}"));
    assert_true(accepts(g, "[\"x\",1,\"y\",\"z\"]"));
    /* a value taken is no longer a candidate: refused at its first byte */
    assert_false(prefix_ok(g, "[\"x\",\"x"));
    assert_false(prefix_ok(g, "[1,1"));
    /* all four taken: the array may only close */
    assert_false(prefix_ok(g, "[\"x\",1,\"y\",\"z\","));
    assert_true(accepts(g, "[]"));
    tw_json_grammar_free(g);

    /* values compared as JSON: 1.0 and 1 are one value, "\u0078" is "x" */
    g = compile_ok(SET_OF("{\"anyOf\":[{\"type\":\"number\"},{\"enum\":[\"x\",null]}]}"));
    assert_false(accepts(g, "[1.0, 1]"));
    assert_true(accepts(g, "[1.5, \"x\", null]"));
    assert_false(prefix_ok(g, "[\"x\",\"x"));
    tw_json_grammar_free(g);

    g = compile_ok(SET_OF("{\"enum\":[1.0,\"a\\u0062\"]}"));
    assert_false(tw_json_grammar_may_strand(g));
    assert_true(accepts(g, "[1.0,\"ab\"]"));
    assert_false(prefix_ok(g, "[1.0,1"));
    tw_json_grammar_free(g);

    /* booleans: two values, so a third item cannot start */
    g = compile_ok(SET_OF("{\"type\":\"boolean\"}"));
    assert_true(accepts(g, "[true,false]"));
    assert_false(prefix_ok(g, "[true,false,"));
    assert_false(prefix_ok(g, "[true,t"));
    tw_json_grammar_free(g);
}

/* Each array compares its own items; an enclosing object's keys are kept
 * across it. */
static void test_nesting(void **state)
{
    (void)state;
    tw_json_grammar *g = compile_ok("{\"type\":\"object\",\"properties\":{\"t\":" SET_OF(
        "{\"type\":\"integer\"}") ",\"u\":" SET_OF("{\"type\":\"integer\"}") "}}");
    assert_true(accepts(g, "{\"t\":[1,2],\"u\":[1,2]}"));
    assert_false(accepts(g, "{\"t\":[1,2],\"u\":[2,2]}"));
    tw_json_grammar_free(g);
    g = compile_ok(
        "{\"type\":\"object\",\"additionalProperties\":" SET_OF("{\"type\":\"string\"}") "}");
    assert_true(accepts(g, "{\"a\":[\"a\",\"b\"],\"b\":[\"a\"]}"));
    assert_false(prefix_ok(g, "{\"a\":[\"x\",\"y\"],\"a\""));
    assert_false(prefix_ok(g, "{\"a\":[\"x\",\"y\"],\"b\":[\"y\",\"y\""));
    tw_json_grammar_free(g);
    g = compile_ok("{\"type\":\"array\",\"items\":" SET_OF("{\"type\":\"integer\"}") "}");
    assert_true(accepts(g, "[[1,2],[1,2],[]]"));
    assert_false(accepts(g, "[[1],[3,3]]"));
    /* a closed set gives its room back: after more sets than the state
     * could hold at once, a repeat is still refused */
    char doc[8192] = "[";
    size_t at = 1;
    for (int i = 0; i < TW_JSON_KEY_BYTES / 8; i++)
        at += (size_t)snprintf(doc + at, sizeof doc - at, "[%d,%d],", i, i + 1);
    snprintf(doc + at, sizeof doc - at, "[5,5]]");
    assert_false(accepts(g, doc));
    doc[strlen(doc) - 3] = '6';
    assert_true(accepts(g, doc));
    tw_json_grammar_free(g);
}

/* Items past what the state keeps are no longer compared, rather than
 * reaching a dead end. */
static void test_overflow(void **state)
{
    (void)state;
    tw_json_grammar *g = compile_ok(SET_OF("{\"type\":\"string\"}"));
    tw_json_state s;
    tw_json_state_init(&s, g);
    assert_true(tw_json_state_feed(&s, "[", 1));
    char item[256];
    for (int i = 0; i * 200 < TW_JSON_KEY_BYTES + 400; i++) {
        const int n = snprintf(item, sizeof item, "%s\"%0190d\"", i ? "," : "", i);
        assert_true(tw_json_state_feed(&s, item, (size_t)n));
    }
    const int n = snprintf(item, sizeof item, ",\"%0190d\"]", 0);
    assert_true(tw_json_state_feed(&s, item, (size_t)n));
    assert_true(tw_json_state_closed(&s));
    tw_json_grammar_free(g);
}

static void test_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *schema, *message;
    } cases[] = {
        {"{\"type\":\"array\",\"uniqueItems\":1}", "uniqueItems must be true or false"},
        {SET_OF("{\"type\":\"object\"}"), "may be objects or arrays"},
        {SET_OF("{\"type\":\"array\"}"), "may be objects or arrays"},
        {"{\"type\":\"array\",\"uniqueItems\":true}", "may be objects or arrays"},
        {SET_OF("{\"type\":[\"string\",\"object\"]}"), "may be objects or arrays"},
        {"{\"type\":\"array\",\"uniqueItems\":true,\"prefixItems\":[{\"type\":\"integer\"}]}",
         "uniqueItems on a tuple"},
        {"{\"type\":\"array\",\"uniqueItems\":true,\"minItems\":3,\"items\":{\"type\":"
         "\"boolean\"}}",
         "(3, where the items can take 2 different values)"},
        {"{\"type\":\"array\",\"uniqueItems\":true,\"minItems\":2,\"items\":{\"enum\":[1,1.0]}}",
         "(2, where the items can take 1 different values)"},
        {"{\"properties\":{\"s\":{\"type\":\"array\",\"uniqueItems\":true,\"minItems\":2,"
         "\"items\":{\"type\":\"string\",\"maxLength\":0}}}}",
         "at /properties/s"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        refused_with(cases[i].schema, cases[i].message);
    /* every bool-and-null set fits: three values */
    tw_json_grammar *g = compile_ok("{\"type\":\"array\",\"uniqueItems\":true,\"minItems\":3,"
                                    "\"items\":{\"type\":[\"boolean\",\"null\"]}}");
    assert_true(accepts(g, "[null,false,true]"));
    assert_false(prefix_ok(g, "[null,false,true,"));
    tw_json_grammar_free(g);
}

/* An independent reading of a JSON number: its digits with the decimal
 * point's place as a power of ten, normalized to 0.D1D2... x 10^e (D1 not
 * zero; zero as ""). */
static void number_key(const char *t, char *out, size_t cap)
{
    char mant[128];
    size_t m = 0;
    long point = -1, e = 0;
    int neg = *t == '-';
    if (neg)
        t++;
    for (; *t && *t != 'e' && *t != 'E'; t++) {
        if (*t == '.')
            point = (long)m;
        else if (m + 1 < sizeof mant)
            mant[m++] = *t;
    }
    if (*t)
        e = strtol(t + 1, NULL, 10);
    if (point < 0)
        point = (long)m;
    size_t lead = 0;
    while (lead < m && mant[lead] == '0')
        lead++;
    while (m > lead && mant[m - 1] == '0')
        m--;
    if (lead == m) {
        snprintf(out, cap, "zero");
        return;
    }
    snprintf(out, cap, "%s0.%.*s@%ld", neg ? "-" : "", (int)(m - lead), mant + lead,
             point - (long)lead + e);
}

/* The items of arr (its text at doc) all differ: strings decoded by
 * jansson, numbers by number_key on their own text. */
static void check_distinct(const json_t *arr, const char *doc)
{
    const size_t n = json_array_size(arr);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            const json_t *a = json_array_get(arr, i), *b = json_array_get(arr, j);
            bool same;
            if (json_is_number(a) && json_is_number(b)) {
                char ta[64], tb[64], ka[160], kb[160];
                char *da = json_dumps(a, JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
                char *db = json_dumps(b, JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
                snprintf(ta, sizeof ta, "%s", da ? da : "");
                snprintf(tb, sizeof tb, "%s", db ? db : "");
                free(da);
                free(db);
                number_key(ta, ka, sizeof ka);
                number_key(tb, kb, sizeof kb);
                same = strcmp(ka, kb) == 0;
            } else {
                same = json_equal((json_t *)a, (json_t *)b);
            }
            if (same)
                fail_msg("items %zu and %zu are one value: %s", i, j, doc);
        }
}

/* Finds every array with uniqueItems in v (by the schema's layout used
 * below: the root, or an object's property values) and checks it; how many
 * items they hold. */
static size_t check_sets(const json_t *v, const char *doc)
{
    if (json_is_array(v)) {
        check_distinct(v, doc);
        return json_array_size(v);
    }
    size_t items = 0;
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)v, k, val)
    {
        if (json_is_array(val)) {
            check_distinct(val, doc);
            items += json_array_size(val);
        }
    }
    return items;
}

static void check_walks(const char *schema, int walks)
{
    tw_json_grammar *g = compile_ok(schema);
    tw_test_rng rng = {0x51e7 ^ strlen(schema)};
    char *doc = malloc(1 << 16);
    assert_non_null(doc);
    int finished = 0;
    size_t items = 0;
    for (int i = 0; i < walks; i++) {
        const size_t n = grammar_walk(g, &rng, doc, 1 << 16, 30 + (size_t)i % 300);
        if (!n)
            continue;
        finished++;
        json_error_t je;
        json_t *v = json_loadb(doc, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
        if (!v)
            fail_msg("walk %d gave what jansson refuses (%s): %s", i, je.text, doc);
        items += check_sets(v, doc);
        json_decref(v);
    }
    assert_true(finished > walks / 2);
    assert_true(items > (size_t)walks); /* the sets were not left empty */
    free(doc);
    tw_json_grammar_free(g);
}

static void test_random_walks(void **state)
{
    (void)state;
    check_walks(SET_OF("{\"type\":\"string\",\"maxLength\":1}"), 300);
    check_walks(SET_OF("{\"type\":\"number\"}"), 300);
    check_walks(SET_OF("{\"type\":[\"integer\",\"string\",\"boolean\",\"null\"],\"maxLength\":2}"),
                300);
    check_walks(SET_OF("{\"enum\":[\"a\",\"b\",1,10,1.0,null,[1],{\"k\":true}]}"), 300);
    check_walks(SET_OF("{\"type\":\"string\",\"format\":\"date\"}"), 100);
    check_walks("{\"type\":\"object\",\"properties\":{\"n\":" SET_OF(
                    "{\"type\":\"integer\"}") ",\"s\":" SET_OF("{\"type\":\"string\","
                                                               "\"maxLength\":1}") "},"
                                                                                   "\"required\":["
                                                                                   "\"n\",\"s\"]}",
                300);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strings),      cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_literals),     cmocka_unit_test(test_nesting),
        cmocka_unit_test(test_overflow),     cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_random_walks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
