/* Alternatives that start with the same JSON type: joined when one holds
 * all the others' values (a number beside an integer, a plain string
 * beside a date or enum values it reads) or when all are literals (one
 * enum of them), objects when each requires a key the others lack,
 * refused otherwise; random walks whose every value an independent check
 * finds admitted by some alternative (by exactly one, for the objects). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_test.h"

static void test_covering_alternative(void **state)
{
    (void)state;
    /* pydantic's Union[int, float] */
    tw_json_grammar *g = compile_ok("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}");
    assert_true(accepts(g, "12"));
    assert_true(accepts(g, "-1.5e3"));
    assert_false(accepts(g, "\"1\""));
    tw_json_grammar_free(g);
    /* a date or any string: any string */
    g = compile_ok("{\"anyOf\":[{\"type\":\"string\",\"format\":\"date\"},{\"type\":\"string\"}"
                   ",{\"type\":\"null\"}]}");
    assert_true(accepts(g, "\"2024-02-29\""));
    assert_true(accepts(g, "\"not a date\""));
    assert_true(accepts(g, "null"));
    tw_json_grammar_free(g);
    /* enum values a string node reads, whatever their order */
    g = compile_ok("{\"anyOf\":[{\"enum\":[\"ab\",\"c\",3]},{\"type\":\"string\",\"maxLength\":2}"
                   ",{\"type\":\"integer\",\"minimum\":0}]}");
    assert_true(accepts(g, "\"ab\""));
    assert_true(accepts(g, "\"zz\""));
    assert_false(accepts(g, "\"abc\""));
    assert_true(accepts(g, "3"));
    assert_true(accepts(g, "30"));
    assert_false(accepts(g, "-3"));
    tw_json_grammar_free(g);
    /* a pattern that reads every enum value covers them */
    g = compile_ok("{\"anyOf\":[{\"const\":\"AB-12\"},{\"type\":\"string\",\"pattern\":"
                   "\"^[A-Z]{2}-[0-9]+$\"}]}");
    assert_true(accepts(g, "\"AB-12\""));
    assert_true(accepts(g, "\"XY-9\""));
    assert_false(accepts(g, "\"ab\""));
    tw_json_grammar_free(g);
    /* bounds: an unbounded number holds a bounded one's values */
    g = compile_ok("{\"oneOf\":[{\"type\":\"number\",\"minimum\":0,\"maximum\":1},{\"type\":"
                   "\"number\"}]}");
    assert_true(accepts(g, "7.25"));
    tw_json_grammar_free(g);
}

static void test_literals_joined(void **state)
{
    (void)state;
    /* pydantic's Union[Literal["x"], Literal["y"]] */
    tw_json_grammar *g = compile_ok("{\"anyOf\":[{\"const\":\"x\"},{\"const\":\"y\"},{\"enum\":"
                                    "[\"y\",\"xy\",1,10]},{\"const\":1.5}]}");
    assert_true(accepts(g, "\"x\""));
    assert_true(accepts(g, "\"y\""));
    assert_true(accepts(g, "\"xy\""));
    assert_false(accepts(g, "\"z\""));
    assert_true(accepts(g, "1"));
    assert_true(accepts(g, "10"));
    assert_true(accepts(g, "1.5"));
    assert_false(accepts(g, "2"));
    tw_json_grammar_free(g);
    g = compile_ok("{\"anyOf\":[{\"type\":\"boolean\"},{\"const\":true},{\"type\":\"null\"},"
                   "{\"const\":null}]}");
    assert_true(accepts(g, "true"));
    assert_true(accepts(g, "false"));
    assert_true(accepts(g, "null"));
    tw_json_grammar_free(g);
    /* as an object's property, and through $ref */
    g = compile_ok("{\"$defs\":{\"A\":{\"const\":\"a\"},\"B\":{\"enum\":[\"b\",\"c\"]}},"
                   "\"type\":\"object\",\"properties\":{\"k\":{\"anyOf\":[{\"$ref\":\"#/$defs/A\"},"
                   "{\"$ref\":\"#/$defs/B\"}]}},\"required\":[\"k\"]}");
    assert_true(accepts(g, "{\"k\":\"a\"}"));
    assert_true(accepts(g, "{\"k\":\"c\"}"));
    assert_false(accepts(g, "{\"k\":\"d\"}"));
    tw_json_grammar_free(g);
}

static void test_refused(void **state)
{
    (void)state;
    static const char *const cases[] = {
        /* neither covers the other */
        "{\"anyOf\":[{\"type\":\"string\",\"maxLength\":3},{\"type\":\"string\",\"format\":"
        "\"uuid\"}]}",
        "{\"anyOf\":[{\"type\":\"integer\",\"minimum\":0},{\"type\":\"integer\",\"maximum\":-5}]}",
        "{\"anyOf\":[{\"enum\":[\"abc\"]},{\"type\":\"string\",\"maxLength\":2}]}",
        /* arrays of different items would need a reader that looks ahead */
        "{\"anyOf\":[{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},{\"type\":\"array\","
        "\"items\":{\"type\":\"string\"}}]}",
        /* an escape the pattern string cannot write */
        "{\"anyOf\":[{\"const\":\"a\\nb\"},{\"type\":\"string\",\"pattern\":\"^a\"}]}",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tw_json_grammar *g = NULL;
        tw_err err;
        assert_int_equal(tw_json_grammar_compile(cases[i], strlen(cases[i]), &g, &err),
                         TW_INVALID_ARGUMENT);
        assert_null(g);
        if (!strstr(err.msg, "start with the same JSON type") || !strstr(err.msg, "(at /anyOf)"))
            fail_msg("%s: %s", cases[i], err.msg);
    }
    /* more than 64 literals among them: three enums of 30 */
    char schema[4096] = "{\"anyOf\":[";
    size_t at = strlen(schema);
    for (int i = 0; i < 90; i++)
        at += (size_t)snprintf(schema + at, sizeof schema - at, "%s\"v%d\"%s",
                               i % 30 ? ","
                               : i    ? "]},{\"enum\":["
                                      : "{\"enum\":[",
                               i, i == 89 ? "]}" : "");
    snprintf(schema + at, sizeof schema - at, "]}");
    tw_json_grammar *g = NULL;
    tw_err err;
    assert_int_equal(tw_json_grammar_compile(schema, strlen(schema), &g, &err),
                     TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "more than 64 values"));
}

/* pydantic's Union of two models without a discriminator: each requires a
 * field the other lacks, which is written first and picks the model. */
#define PETS                                                                                       \
    "{\"$defs\":{\"Cat\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\","      \
    "\"maxLength\":4},\"meows\":{\"type\":\"boolean\"},\"age\":{\"type\":\"integer\"}},"           \
    "\"required\":[\"name\",\"meows\"],\"additionalProperties\":false},\"Dog\":{\"type\":"         \
    "\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":4},\"barks\":{"        \
    "\"type\":"                                                                                    \
    "\"integer\"}},\"required\":[\"barks\",\"name\"],\"additionalProperties\":false}},"            \
    "\"type\":\"array\",\"maxItems\":3,\"items\":{\"anyOf\":[{\"$ref\":\"#/$defs/"                 \
    "Cat\"},{\"$ref\":"                                                                            \
    "\"#/$defs/Dog\"},{\"type\":\"null\"}]}}"

static void test_keyed_objects(void **state)
{
    (void)state;
    tw_json_grammar *g = compile_ok(PETS);
    assert_true(accepts(g, "[{\"meows\":true,\"name\":\"Tom\",\"age\":3},null]"));
    assert_true(accepts(g, "[{\"barks\":2,\"name\":\"Rex\"}]"));
    assert_int_equal(taken(g, "[{\"name\":\"x\"}]"), 3); /* the shared field first */
    assert_int_equal(taken(g, "[{\"meows\":1}]"), 10);   /* a Cat's meows is a boolean */
    assert_int_equal(taken(g, "[{\"barks\":1}]"), 11);   /* a Dog needs its name */
    assert_int_equal(taken(g, "[{}]"), 2);
    assert_int_equal(taken(g, "[{\"barks\":1,\"name\":\"R\",\"age\":1}]"), 22);
    tw_json_grammar_free(g);
    /* no key of its own: refused as before */
    refused_with("{\"anyOf\":[{\"properties\":{\"a\":{}},\"required\":[\"a\"]},{\"properties\":"
                 "{\"a\":{},\"b\":{}},\"required\":[\"a\"]}]}",
                 "or each a required property the others do not name (at /anyOf)");
    refused_with("{\"oneOf\":[{\"properties\":{\"a\":{}},\"required\":[\"a\"]},{\"properties\":"
                 "{\"b\":{}}}]}",
                 "tell them apart");
}

/* Whether v is among the values of the union the walks below read: an
 * integer of at least 0, a number, a string of at most 2 characters, one
 * of the literals "red" and "green", or a date (checked by shape). */
static bool admitted(const json_t *v)
{
    if (json_is_number(v))
        return true;
    if (!json_is_string(v))
        return false;
    const char *t = json_string_value(v);
    size_t chars = 0;
    for (const unsigned char *p = (const unsigned char *)t; *p; p++)
        chars += (*p & 0xC0) != 0x80;
    if (chars <= 2 || !strcmp(t, "red") || !strcmp(t, "green"))
        return true;
    return strlen(t) == 10 && isdigit((unsigned char)t[0]) && t[4] == '-' && t[7] == '-';
}

/* Whether pet v fits exactly one of PETS' models (checked by its keys and
 * their values' types). */
static bool one_pet(const json_t *v)
{
    if (json_is_null(v))
        return true;
    const json_t *name = json_object_get(v, "name");
    size_t chars = 0; /* maxLength counts characters */
    for (const unsigned char *p = (const unsigned char *)json_string_value(name); p && *p; p++)
        chars += (*p & 0xC0) != 0x80;
    const bool named = json_is_string(name) && chars <= 4;
    const bool cat = named && json_is_boolean(json_object_get(v, "meows")) &&
                     json_object_size(v) == 2u + (json_object_get(v, "age") != NULL) &&
                     (!json_object_get(v, "age") || json_is_integer(json_object_get(v, "age")));
    const bool dog =
        named && json_is_integer(json_object_get(v, "barks")) && json_object_size(v) == 2;
    return cat != dog;
}

static void test_random_walks(void **state)
{
    (void)state;
    tw_json_grammar *pets = compile_ok(PETS);
    tw_test_rng prng = {0x9e75};
    char pet_doc[4096];
    int pet_walks = 0;
    for (int w = 0; w < 300; w++) {
        const size_t n = grammar_walk(pets, &prng, pet_doc, sizeof pet_doc, 10 + (size_t)w % 60);
        if (!n)
            continue;
        json_t *v = json_loadb(pet_doc, n, JSON_REJECT_DUPLICATES, NULL);
        assert_true(json_is_array(v));
        for (size_t i = 0; i < json_array_size(v); i++)
            if (!one_pet(json_array_get(v, i)))
                fail_msg("walk %d: item %zu fits no model or both: %.*s", w, i, (int)n, pet_doc);
        pet_walks++;
        json_decref(v);
    }
    assert_true(pet_walks > 150);
    tw_json_grammar_free(pets);

    /* the date and the 2-character string: neither covers the other */
    tw_json_grammar *g2 = NULL;
    tw_err err;
    static const char refused[] =
        "{\"anyOf\":[{\"type\":\"string\",\"maxLength\":2},{\"type\":\"string\",\"format\":"
        "\"date\"}]}";
    assert_int_equal(tw_json_grammar_compile(refused, strlen(refused), &g2, &err),
                     TW_INVALID_ARGUMENT);
    tw_json_grammar *g =
        compile_ok("{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"integer\",\"minimum\":"
                   "0},{\"type\":\"number\"},{\"type\":\"string\",\"maxLength\":2},{\"enum\":"
                   "[\"red\",\"green\",\"re\"]},{\"type\":\"string\"},{\"type\":\"string\","
                   "\"format\":\"date\"}]}}");
    tw_test_rng rng = {0x0f0f1234};
    char *doc = malloc(1 << 16);
    assert_non_null(doc);
    int finished = 0;
    for (int w = 0; w < 300; w++) {
        const size_t n = grammar_walk(g, &rng, doc, 1 << 16, 20 + (size_t)w % 200);
        if (!n)
            continue;
        finished++;
        json_error_t je;
        json_t *v = json_loadb(doc, n, 0, &je);
        if (!json_is_array(v))
            fail_msg("walk %d gave what jansson refuses (%s): %s", w, je.text, doc);
        for (size_t i = 0; i < json_array_size(v); i++)
            if (!admitted(json_array_get(v, i)) && !json_is_string(json_array_get(v, i)))
                fail_msg("walk %d: item %zu is no alternative's: %s", w, i, doc);
        json_decref(v);
    }
    assert_true(finished > 150);
    free(doc);
    tw_json_grammar_free(g);

    /* without the plain string, every string item is short, a literal or a
     * date-shaped one */
    g = compile_ok("{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"number\"},{\"type\":"
                   "\"integer\"},{\"enum\":[\"red\",\"green\"]},{\"const\":\"re\"}]}}");
    doc = malloc(1 << 16);
    assert_non_null(doc);
    for (int w = 0; w < 200; w++) {
        const size_t n = grammar_walk(g, &rng, doc, 1 << 16, 20 + (size_t)w % 100);
        if (!n)
            continue;
        json_t *v = json_loadb(doc, n, 0, NULL);
        assert_true(json_is_array(v));
        for (size_t i = 0; i < json_array_size(v); i++)
            if (!admitted(json_array_get(v, i)))
                fail_msg("walk %d: item %zu is no alternative's: %s", w, i, doc);
        json_decref(v);
    }
    free(doc);
    tw_json_grammar_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_covering_alternative),
        cmocka_unit_test(test_literals_joined),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_keyed_objects),
        cmocka_unit_test(test_random_walks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
