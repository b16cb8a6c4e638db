/* The JSON grammar: schemas compiled or refused with their location, the
 * matcher's verdict on whole documents and prefixes, and random walks
 * through the matcher whose every finished document a strict parser reads
 * and the schema (checked here independently) admits, with no dead end on
 * the way. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar_test.h"
#include "test_support.h"

/* An open object takes each key once, keys compared as decoded text;
 * each object has its own. */
static void test_repeated_keys(void **state)
{
    (void)state;
    tw_json_grammar *g = compile_ok(NULL);
    assert_true(accepts(g, "{\"a\":1,\"b\":2,\"ab\":3,\"\":4}"));
    assert_false(prefix_ok(g, "{\"a\":1,\"a\""));
    assert_true(prefix_ok(g, "{\"a\":1,\"a\\n\"")); /* a longer key */
    assert_false(prefix_ok(g, "{\"a\":1,\"\\u0061\""));
    assert_false(prefix_ok(g, "{\"\xc3\xa9\":1,\"\\u00e9\""));
    assert_false(prefix_ok(g, "{\"\\ud83d\\ude00\":1,\"\xf0\x9f\x98\x80\""));
    assert_false(prefix_ok(g, "{\"\\n\":1,\"\\u000a\""));
    assert_false(prefix_ok(g, "{\"\":1,\"\""));
    /* per object, and the outer object's keys come back after an inner one */
    assert_true(accepts(g, "{\"a\":{\"a\":1,\"b\":{\"a\":2}},\"b\":{\"a\":3}}"));
    assert_false(prefix_ok(g, "{\"a\":{\"x\":1},\"a\""));
    assert_false(prefix_ok(g, "{\"k\":[{\"a\":1,\"a\""));
    tw_json_grammar_free(g);

    /* additionalProperties with a schema is an open object too */
    g = compile_ok("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}");
    assert_true(accepts(g, "{\"x\":1,\"y\":2}"));
    assert_false(accepts(g, "{\"x\":1,\"x\":2}"));
    tw_json_grammar_free(g);

    /* keys past what the state keeps are no longer compared, so a long
     * object never meets a dead end */
    g = compile_ok(NULL);
    char doc[8192] = "{";
    char key[300];
    memset(key, 'k', 299);
    key[299] = '\0';
    snprintf(doc + 1, sizeof doc - 1, "\"%s\":1,\"%s\":2}", key, key);
    assert_true(accepts(g, doc)); /* a key longer than 255 bytes */
    size_t at = 1;
    /* more keys of 102 bytes than the state keeps */
    for (int i = 0; i < TW_JSON_KEY_BYTES / 103 + 3; i++)
        at += (size_t)snprintf(doc + at, sizeof doc - at, "\"%.100s%02d\":0,", key, i);
    snprintf(doc + at, sizeof doc - at, "\"%.100s00\":0}", key);
    assert_true(accepts(g, doc));
    tw_json_grammar_free(g);
}

static void test_any_object(void **state)
{
    (void)state;
    tw_json_grammar *g = compile_ok(NULL);
    const char *good[] = {
        "{}",
        " {\"a\":1}",
        "{\"a\": [1, 2.5, -3e+2, true, false, null, \"x\"], \"b\": {\"c\": {}}}",
        "{\n  \"k\": \"\\u00e9\\n\\\"\\\\\\/\\ud83d\\ude00\"\n}",
        "{\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\": 0}",
        "{\"a\":-0.0E-0}",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        assert_true(accepts(g, good[i]));
    const char *bad[] = {
        "[]",                           /* not an object */
        "\"a\"",                        /* not an object */
        "{\"a\":1,}",                   /* trailing comma */
        "{\"a\" 1}",                    /* no colon */
        "{a:1}",                        /* bare key */
        "{\"a\":01}",                   /* leading zero */
        "{\"a\":1.}",                   /* bare dot */
        "{\"a\":.5}",                   /* bare fraction */
        "{\"a\":tru}",                  /* cut literal */
        "{\"a\":\"\\x\"}",              /* bad escape */
        "{\"a\":\"\\ude00\"}",          /* lone low surrogate */
        "{\"a\":\"\\ud83d\"}",          /* high surrogate without its pair */
        "{\"a\":\"\\ud83d\\u0041\"}",   /* pair broken */
        "{\"a\":\"\\u0000\"}",          /* NUL */
        "{\"a\":\"\x01\"}",             /* raw control byte */
        "{\"a\":\"\xc0\x80\"}",         /* overlong */
        "{\"a\":\"\xed\xa0\x80\"}",     /* UTF-8 surrogate */
        "{\"a\":\"\xf4\x90\x80\x80\"}", /* above U+10FFFF */
        "{\"a\":\"\xe2\x82\"}",         /* cut sequence */
        "{} ",                          /* nothing after the document */
        "{}{}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (accepts(g, bad[i]))
            fail_msg("accepted %s", bad[i]);
    }
    /* prefixes that can still finish are accepted, so the refusal above is
     * at the byte that breaks the document */
    assert_true(prefix_ok(g, "{\"a\":tru"));
    assert_false(prefix_ok(g, "{\"a\":trux"));
    assert_false(prefix_ok(g, "{\"a\":\"\\udc"));
    assert_true(prefix_ok(g, "{\"a\":\"\\ud8"));
    tw_json_grammar_free(g);
}

static void test_whitespace_and_number_bounds(void **state)
{
    (void)state;
    tw_json_grammar *g = compile_ok(NULL);
    char buf[256];
    snprintf(buf, sizeof buf, "{%*s}", TW_JSON_MAX_WS, "");
    assert_true(accepts(g, buf));
    snprintf(buf, sizeof buf, "{%*s}", TW_JSON_MAX_WS + 1, "");
    assert_false(prefix_ok(g, buf));
    /* a gap's count starts again after a token */
    snprintf(buf, sizeof buf, "{%*s\"a\"%*s:%*s1%*s}", TW_JSON_MAX_WS, "", TW_JSON_MAX_WS, "",
             TW_JSON_MAX_WS, "", TW_JSON_MAX_WS, "");
    assert_true(accepts(g, buf));

    /* numbers stop at TW_JSON_MAX_NUMBER bytes, and never where one more
     * digit is needed */
    char num[64] = "{\"a\":0.";
    size_t at = strlen(num);
    for (int i = 2; i < TW_JSON_MAX_NUMBER; i++)
        num[at++] = '7';
    num[at] = '\0';
    assert_true(prefix_ok(g, num));
    num[at++] = '7';
    num[at] = '\0';
    assert_false(prefix_ok(g, num));
    char tail[64] = "{\"a\":0.";
    memset(tail + 7, '1', TW_JSON_MAX_NUMBER - 3);
    strcpy(tail + 7 + TW_JSON_MAX_NUMBER - 3, "e");
    assert_false(prefix_ok(g, tail)); /* the e would leave no room for its digit */
    strcpy(tail + 7 + TW_JSON_MAX_NUMBER - 4, "e5}");
    assert_true(accepts(g, tail));
    /* integers of more than 18 digits may not fit 64 bits: a number goes on
     * past them only as a fraction or with an exponent */
    assert_true(accepts(g, "{\"a\":-999999999999999999}"));
    assert_false(accepts(g, "{\"a\":9999999999999999999}"));
    assert_true(prefix_ok(g, "{\"a\":9999999999999999999"));
    assert_true(accepts(g, "{\"a\":9999999999999999999.5}"));
    assert_true(accepts(g, "{\"a\":9999999999999999999e-3}"));
    assert_false(accepts(g, "{\"a\":1e100}")); /* two exponent digits */
    tw_json_grammar_free(g);
    g = compile_ok("{\"type\":\"integer\"}");
    assert_true(accepts(g, "123456789012345678"));
    assert_false(prefix_ok(g, "1234567890123456789"));
    assert_false(prefix_ok(g, "1."));
    tw_json_grammar_free(g);
}

static void test_schema_objects(void **state)
{
    (void)state;
    tw_json_grammar *g = compile_ok(
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":3},"
        "\"age\":{\"type\":\"integer\"},\"nick\":{\"type\":[\"string\",\"null\"]},"
        "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",1,12]},\"minItems\":1,"
        "\"maxItems\":2}},\"required\":[\"name\",\"tags\"],\"additionalProperties\":false}");
    assert_true(accepts(g, "{\"name\":\"abc\",\"tags\":[\"a\"]}"));
    assert_true(accepts(g, "{\"name\":\"\\u00e9\",\"age\":-4,\"nick\":null,\"tags\":[12,1]}"));
    assert_true(accepts(g, "{ \"name\" : \"x\" , \"nick\" : \"y\" , \"tags\" : [ 1 ] }"));
    const char *bad[] = {
        "{\"name\":\"abcd\",\"tags\":[\"a\"]}",         /* maxLength */
        "{\"tags\":[\"a\"],\"name\":\"a\"}",            /* order of the schema */
        "{\"name\":\"a\"}",                             /* required tags */
        "{\"name\":\"a\",\"tags\":[]}",                 /* minItems */
        "{\"name\":\"a\",\"tags\":[1,1,1]}",            /* maxItems */
        "{\"name\":\"a\",\"tags\":[\"c\"]}",            /* enum */
        "{\"name\":\"a\",\"tags\":[123]}",              /* enum, number prefix */
        "{\"name\":\"a\",\"age\":1.5,\"tags\":[1]}",    /* integer */
        "{\"name\":\"a\",\"other\":1,\"tags\":[1]}",    /* unknown key */
        "{\"name\":\"a\",\"name\":\"b\",\"tags\":[1]}", /* a key twice */
        "{\"name\":\"a\",\"nick\":1,\"tags\":[1]}",     /* type list */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (accepts(g, bad[i]))
            fail_msg("accepted %s", bad[i]);
    tw_json_grammar_free(g);

    /* a closed object without properties is only {} */
    g = compile_ok("{\"type\":\"object\",\"additionalProperties\":false}");
    assert_true(accepts(g, "{ }"));
    assert_false(accepts(g, "{\"a\":1}"));
    tw_json_grammar_free(g);
    /* values of an open object fit additionalProperties */
    g = compile_ok("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"boolean\"}}");
    assert_true(accepts(g, "{\"a\":true,\"b\":false}"));
    assert_false(accepts(g, "{\"a\":1}"));
    tw_json_grammar_free(g);
    /* a top-level number is complete while it may still grow */
    g = compile_ok("{\"type\":\"number\"}");
    tw_json_state s;
    tw_json_state_init(&s, g);
    assert_true(tw_json_state_feed(&s, "12", 2));
    assert_true(tw_json_state_complete(&s));
    assert_false(tw_json_state_closed(&s));
    assert_true(tw_json_state_feed(&s, "e3", 2));
    tw_json_grammar_free(g);
}

static void test_refs_and_unions(void **state)
{
    (void)state;
    /* allOf of one schema, as pydantic wraps a $ref to describe it, and
     * the annotations it writes beside fields */
    tw_json_grammar *w = compile_ok(
        "{\"type\":\"object\",\"properties\":{\"a\":{\"allOf\":[{\"$ref\":\"#/$defs/P\"}],"
        "\"description\":\"x\",\"default\":{\"n\":1},\"deprecated\":true},\"s\":{\"type\":"
        "\"string\",\"writeOnly\":true,\"readOnly\":false},\"u\":{\"anyOf\":[{\"allOf\":[{"
        "\"type\":\"string\"}]},{\"type\":\"null\"}]}},\"$defs\":{\"P\":{\"type\":\"object\","
        "\"properties\":{\"n\":{\"type\":\"integer\"}},\"required\":[\"n\"]}}}");
    assert_true(accepts(w, "{\"a\":{\"n\":2},\"s\":\"k\",\"u\":null}"));
    assert_true(accepts(w, "{\"u\":\"t\"}"));
    assert_false(accepts(w, "{\"a\":{\"m\":2}}"));
    assert_false(accepts(w, "{\"u\":3}"));
    tw_json_grammar_free(w);
    /* several object schemas merged, as OpenAPI composes a type */
    w = compile_ok("{\"$defs\":{\"Base\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":"
                   "\"integer\"}},\"required\":[\"id\"]}},\"allOf\":[{\"$ref\":\"#/$defs/Base\"},"
                   "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"id\":{"
                   "\"type\":\"integer\"}},\"required\":[\"name\"]}],\"description\":\"d\"}");
    assert_true(accepts(w, "{\"id\":1,\"name\":\"x\"}"));
    assert_false(accepts(w, "{\"name\":\"x\"}"));
    assert_false(accepts(w, "{\"id\":1}"));
    assert_false(accepts(w, "{\"id\":1,\"name\":\"x\",\"z\":0}"));
    tw_json_grammar_free(w);
    w = compile_ok("{\"allOf\":[{\"properties\":{\"a\":{}},\"additionalProperties\":false},"
                   "{\"properties\":{\"b\":{}}}]}");
    assert_true(accepts(w, "{\"a\":1}"));
    assert_false(accepts(w, "{\"a\":1,\"b\":2}"));
    tw_json_grammar_free(w);
    /* a union around a merge */
    w = compile_ok(
        "{\"anyOf\":[{\"allOf\":[{\"properties\":{\"a\":{}}},{\"properties\":{\"b\":{}}}]},"
        "{\"type\":\"null\"}]}");
    assert_true(accepts(w, "{\"a\":1,\"b\":2}"));
    assert_true(accepts(w, "null"));
    tw_json_grammar_free(w);

    /* OpenAPI 3.0's nullable adds null to the type it stands beside */
    w = compile_ok(
        "{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"nullable\":true},"
        "\"i\":{\"type\":\"integer\",\"nullable\":false}}}");
    assert_true(accepts(w, "{\"s\":null,\"i\":1}"));
    assert_true(accepts(w, "{\"s\":\"x\"}"));
    assert_false(accepts(w, "{\"i\":null}"));
    tw_json_grammar_free(w);
    /* a recursive tree through $defs, nullable through anyOf */
    tw_json_grammar *g = compile_ok(
        "{\"$ref\":\"#/$defs/node\",\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{"
        "\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$"
        "defs/node\"}},\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},"
        "\"required\":[\"v\"]}}}");
    assert_true(accepts(g, "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[]}],\"next\":null}"));
    assert_true(accepts(g, "{\"v\":1,\"next\":{\"v\":2,\"next\":{\"v\":3}}}"));
    assert_false(accepts(g, "{\"v\":1,\"kids\":[{}]}"));
    tw_json_grammar_free(g);
    g = compile_ok("{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"array\",\"items\":"
                   "{\"const\":{\"k\":[1,\"x\"]}}}]}");
    assert_true(accepts(g, "\"s\""));
    assert_true(accepts(g, "[{\"k\":[1,\"x\"]}]"));
    assert_false(accepts(g, "[{\"k\": [1,\"x\"]}]")); /* enum values are compact */
    tw_json_grammar_free(g);
    /* objects told apart by a tag property, wherever the schema lists it:
     * the tag is read first, then the object it picks */
    g = compile_ok("{\"oneOf\":[{\"$ref\":\"#/$defs/cat\"},{\"$ref\":\"#/$defs/dog\"},"
                   "{\"type\":\"null\"}],\"discriminator\":{\"propertyName\":\"pet\"},"
                   "\"$defs\":{\"cat\":{\"type\":\"object\",\"properties\":{\"lives\":{"
                   "\"type\":\"integer\"},\"pet\":{\"const\":\"cat\"}},\"required\":[\"pet\","
                   "\"lives\"],\"additionalProperties\":false},\"dog\":{\"type\":\"object\","
                   "\"properties\":{\"pet\":{\"enum\":[\"dog\",\"puppy\"]},\"good\":{\"type\":"
                   "\"boolean\"}},\"required\":[\"pet\"]}}}");
    assert_true(accepts(g, "{\"pet\": \"cat\", \"lives\": 9}"));
    assert_true(accepts(g, "{\"pet\":\"puppy\",\"good\":true}"));
    assert_true(accepts(g, "{\"pet\":\"dog\"}"));
    assert_true(accepts(g, "null"));
    assert_false(accepts(g, "{\"pet\":\"cat\"}"));               /* lives is required */
    assert_false(accepts(g, "{\"pet\":\"cat\",\"good\":true}")); /* a dog's property */
    assert_false(accepts(g, "{\"lives\":9,\"pet\":\"cat\"}"));   /* the tag comes first */
    assert_false(accepts(g, "{\"pet\":\"cow\"}"));
    assert_false(accepts(g, "{}"));
    tw_json_grammar_free(g);
}

/* A tail follows the document exactly, and only then is it closed. */
static void test_tail(void **state)
{
    (void)state;
    tw_json_grammar *g = compile_ok("{\"type\":\"object\"}");
    tw_err err;
    assert_int_equal(tw_json_grammar_set_tail(g, "}\n</tool_call>", 14, &err), TW_OK);
    tw_json_state s;
    tw_json_state_init(&s, g);
    assert_true(tw_json_state_feed(&s, "{\"a\": [1]}", 10));
    assert_false(tw_json_state_complete(&s));
    assert_false(tw_json_state_closed(&s));
    assert_true(tw_json_state_feed(&s, "}\n</tool", 8));
    assert_false(tw_json_state_complete(&s));
    assert_true(tw_json_state_feed(&s, "_call>", 6));
    assert_true(tw_json_state_complete(&s));
    assert_true(tw_json_state_closed(&s));
    assert_false(tw_json_state_feed_byte(&s, '\n'));
    assert_false(prefix_ok(g, "{} }"));    /* no whitespace before the tail */
    assert_false(prefix_ok(g, "{}}\n<x")); /* and byte for byte */
    tw_json_grammar_free(g);
    /* a top-level number ends where the tail starts */
    g = compile_ok("{\"type\":\"integer\"}");
    assert_int_equal(tw_json_grammar_set_tail(g, "]", 1, &err), TW_OK);
    tw_json_state_init(&s, g);
    assert_true(tw_json_state_feed(&s, "12", 2));
    assert_false(tw_json_state_complete(&s));
    assert_true(tw_json_state_feed(&s, "]", 1));
    assert_true(tw_json_state_closed(&s));
    char big[TW_JSON_MAX_TAIL + 1];
    memset(big, 'x', sizeof big);
    assert_int_equal(tw_json_grammar_set_tail(g, big, sizeof big, &err), TW_INVALID_ARGUMENT);
    tw_json_grammar_free(g);
}

static void test_formats(void **state)
{
    (void)state;
    static const struct {
        const char *format, *good[6], *bad[8];
    } cases[] = {
        {"date",
         {"\"2024-02-28\"", "\"1999-12-31\"", "\"2024-04-30\"", "\"0001-01-01\"", "\"2024-02-29\"",
          "\"2000-02-29\""},
         {"\"2023-02-29\"", "\"2024-13-01\"", "\"2024-00-10\"", "\"2024-04-31\"", "\"2024-1-01\"",
          "\"2024-01-1\"", "\"1900-02-29\"", "\"2024-02-30\""}},
        {"time",
         {"\"23:59:59Z\"", "\"00:00:00.123+05:30\"", "\"12:30:00-08:00\"",
          "\"01:02:03.123456789Z\""},
         {"\"24:00:00Z\"", "\"12:60:00Z\"", "\"12:00:00\"", "\"12:00:00.Z\"",
          "\"12:00:00.1234567890Z\"", "\"12:00:00+24:00\""}},
        {"date-time",
         {"\"2024-06-01T12:00:00Z\"", "\"2000-02-01T00:00:00.5+01:00\"", NULL, NULL},
         {"\"2024-06-01 12:00:00Z\"", "\"2024-06-01\"", "\"2024-06-01T25:00:00Z\"", NULL, NULL,
          NULL}},
        {"uuid",
         {"\"123e4567-e89b-12d3-a456-426614174000\"", "\"ABCDEF00-0000-0000-0000-000000000000\"",
          NULL, NULL},
         {"\"123e4567e89b12d3a456426614174000\"", "\"123e4567-e89b-12d3-a456-42661417400\"",
          "\"g23e4567-e89b-12d3-a456-426614174000\"", NULL, NULL, NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char schema[128];
        snprintf(schema, sizeof schema, "{\"type\":\"string\",\"format\":\"%s\"}", cases[i].format);
        tw_json_grammar *g = compile_ok(schema);
        for (int k = 0; k < 6 && cases[i].good[k]; k++)
            if (!accepts(g, cases[i].good[k]))
                fail_msg("%s refused %s", cases[i].format, cases[i].good[k]);
        for (int k = 0; k < 8 && cases[i].bad[k]; k++)
            if (accepts(g, cases[i].bad[k]))
                fail_msg("%s accepted %s", cases[i].format, cases[i].bad[k]);
        /* no fast path: a formatted string is not a plain run */
        tw_json_state s;
        uint32_t room;
        tw_json_state_init(&s, g);
        assert_true(tw_json_state_feed_byte(&s, '"'));
        assert_false(tw_json_state_in_plain_string(&s, &room));
        tw_json_grammar_free(g);
    }
}

/* Raw text choices: exactly one of them, no whitespace or quotes around. */
static void test_choices(void **state)
{
    (void)state;
    const char *choices[] = {"yes", "no", "yes please", "no", "\"quoted\" \xc3\xa9"};
    tw_json_grammar *g;
    tw_err err;
    assert_int_equal(tw_json_grammar_choice(choices, 5, &g, &err), TW_OK);
    assert_true(accepts(g, "no"));
    assert_true(accepts(g, "yes please"));
    assert_true(accepts(g, "\"quoted\" \xc3\xa9"));
    assert_false(accepts(g, " yes"));
    assert_false(accepts(g, "\"yes\""));
    assert_false(accepts(g, "ye"));
    assert_false(accepts(g, "nope"));
    tw_json_state s;
    tw_json_state_init(&s, g);
    assert_true(tw_json_state_feed(&s, "yes", 3));
    assert_true(tw_json_state_complete(&s)); /* may end here... */
    assert_false(tw_json_state_closed(&s));  /* ...or go on to "yes please" */
    assert_false(tw_json_state_feed_byte(&s, '!'));
    tw_json_state_init(&s, g);
    assert_true(tw_json_state_feed(&s, "no", 2));
    assert_true(tw_json_state_closed(&s)); /* nothing longer starts with it */
    tw_json_grammar_free(g);

    const char *empty[] = {"a", ""}, *bad[] = {"\xff"}, *many[65];
    for (int i = 0; i < 65; i++)
        many[i] = "x";
    assert_int_equal(tw_json_grammar_choice(empty, 2, &g, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "choice 1 is empty"));
    assert_int_equal(tw_json_grammar_choice(bad, 1, &g, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "not UTF-8"));
    assert_int_equal(tw_json_grammar_choice(many, 65, &g, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_json_grammar_choice(many, 0, &g, &err), TW_INVALID_ARGUMENT);
}

static void test_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *schema, *says;
    } cases[] = {
        {"{\"type\":\"object\",\"dependentRequired\":{}}",
         "unsupported keyword \"dependentRequired\" (at the top"},
        {"{\"properties\":{\"a\":{\"format\":\"uri-template\"}}}",
         "unsupported format \"uri-template\" (at /properties/a)"},
        {"{\"type\":\"integer\",\"format\":\"int128\"}", "unsupported format \"int128\""},
        {"{\"allOf\":[{\"type\":\"string\"},{\"properties\":{}}]}",
         "\"allOf\" merges object schemas only (at /allOf/0)"},
        {"{\"allOf\":[{\"properties\":{}},{\"maxProperties\":3}]}",
         "\"maxProperties\" in a schema \"allOf\" merges (at /allOf/1)"},
        {"{\"allOf\":[{\"properties\":{\"a\":{\"type\":\"string\"}}},{\"properties\":{\"a\":{"
         "\"type\":\"integer\"}}}]}",
         "property \"a\" has two schemas"},
        {"{\"allOf\":[{\"properties\":{\"a\":{}},\"additionalProperties\":false},{\"properties\":{"
         "\"b\":{}},\"required\":[\"b\"]}]}",
         "required property \"b\" is shut out"},
        {"{\"allOf\":[]}", "\"allOf\" must be a non-empty list"},
        {"{\"type\":\"string\",\"nullable\":1}", "\"nullable\" must be true or false"},
        {"{\"allOf\":[{\"type\":\"string\"}],\"maxLength\":3}", "\"maxLength\" beside \"allOf\""},
        {"{\"properties\":{\"p\":{\"allOf\":[{\"pattern\":\"(\"}]}}}",
         "(at /properties/p/allOf/0)"},
        {"{\"type\":\"string\",\"format\":\"date\",\"maxLength\":4}", "beside \"format\""},
        {"{\"format\":7}", "\"format\" must be a string"},
        {"{\"type\":\"strng\"}", "\"type\" must name JSON types"},
        {"{\"anyOf\":[{\"type\":\"object\"},{\"properties\":{}}]}", "tell them apart"},
        {"{\"anyOf\":[{\"type\":\"string\",\"maxLength\":2},{\"enum\":[\"abc\"]}]}",
         "start with the same JSON type"},
        {"{\"anyOf\":[{\"properties\":{\"k\":{\"const\":1}},\"required\":[\"k\"]},"
         "{\"properties\":{\"k\":{\"enum\":[2,1]}},\"required\":[\"k\"]}]}",
         "tell them apart"},
        {"{\"anyOf\":[{\"properties\":{\"k\":{\"const\":1}}},"
         "{\"properties\":{\"k\":{\"const\":2}},\"required\":[\"k\"]}]}",
         "tell them apart"},
        {"{\"type\":\"object\",\"required\":[\"x\"]}", "\"x\", which is not among"},
        {"{\"$ref\":\"#/components/x\"}", "does not name an entry"},
        {"{\"$ref\":\"#/$defs/nope\"}", "does not name an entry"},
        {"{\"enum\":[]}", "non-empty array"},
        {"{\"type\":\"array\",\"prefixItems\":[{}],\"items\":[{}]}",
         "both \"prefixItems\" and \"items\" as a list"},
        {"{\"prefixItems\":[{},{}],\"items\":false,\"minItems\":3}", "or the tuple's length"},
        {"{\"prefixItems\":[{},{\"pattern\":\"(\"}]}", "(at /prefixItems/1)"},
        {"{\"prefixItems\":{}}", "\"prefixItems\" must be a list"},
        {"{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "minItems is above maxItems"},
        {"{\"type\":\"string\",\"maxLength\":-1}", "\"maxLength\" must be a non-negative"},
        {"false", "admits no value"},
        {"{\"properties\":{\"a\":false}}", "admits no value (at /properties/a)"},
        {"[1]", "must be an object or a boolean"},
        {"{\"a\":", "not JSON"},
        {"{\"type\":\"object\",\"type\":\"array\"}", "not JSON"},
        {"{\"$ref\":\"#/$defs/a\",\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}}}", "admits no value"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tw_json_grammar *g = NULL;
        tw_err err = {0};
        tw_status st = tw_json_grammar_compile(cases[i].schema, strlen(cases[i].schema), &g, &err);
        if (st != TW_INVALID_ARGUMENT || !strstr(err.msg, cases[i].says))
            fail_msg("%s: status %d, \"%s\"; wanted \"%s\"", cases[i].schema, st, err.msg,
                     cases[i].says);
        assert_null(g);
    }
    /* limits: nesting, size */
    char deep[2048] = "";
    for (int i = 0; i < 70; i++)
        strcat(deep, "{\"items\":");
    strcat(deep, "{}");
    for (int i = 0; i < 70; i++)
        strcat(deep, "}");
    tw_json_grammar *g = NULL;
    tw_err err;
    assert_int_equal(tw_json_grammar_compile(deep, strlen(deep), &g, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "deeper than 64"));
    assert_int_equal(tw_json_grammar_compile("{}", TW_JSON_SCHEMA_MAX_BYTES + 1, &g, &err),
                     TW_INVALID_ARGUMENT);
}

/* ------------------------------------------------------- random walks */

/* A calendar date: what mktime keeps as it is. */
static bool real_date(const char *s)
{
    struct tm tm = {0};
    const char *end = strptime(s, "%Y-%m-%d", &tm);
    if (!end || end - s != 10)
        return false;
    struct tm copy = tm;
    copy.tm_isdst = -1;
    copy.tm_hour = 12;
    if (mktime(&copy) == (time_t)-1)
        return false;
    return copy.tm_mday == tm.tm_mday && copy.tm_mon == tm.tm_mon;
}

/* HH:MM:SS[.f{1,9}](Z|+HH:MM|-HH:MM). */
static bool real_time(const char *s)
{
    int h, m, sec, n = 0;
    if (sscanf(s, "%2d:%2d:%2d%n", &h, &m, &sec, &n) != 3 || n != 8 || h > 23 || m > 59 || sec > 59)
        return false;
    s += 8;
    if (*s == '.') {
        size_t digits = strspn(s + 1, "0123456789");
        if (digits < 1 || digits > 9)
            return false;
        s += 1 + digits;
    }
    if (strcmp(s, "Z") == 0)
        return true;
    int oh, om;
    n = 0;
    return (*s == '+' || *s == '-') && sscanf(s + 1, "%2d:%2d%n", &oh, &om, &n) == 2 && n == 5 &&
           s[6] == '\0' && oh <= 23 && om <= 59;
}

static bool format_fits(const char *fmt, const char *s)
{
    if (strcmp(fmt, "date") == 0)
        return strlen(s) == 10 && real_date(s);
    if (strcmp(fmt, "time") == 0)
        return real_time(s);
    if (strcmp(fmt, "date-time") == 0)
        return strlen(s) > 11 && s[10] == 'T' && real_date(s) && real_time(s + 11);
    if (strcmp(fmt, "uuid") != 0 || strlen(s) != 36)
        return false;
    for (int i = 0; i < 36; i++)
        if ((i == 8 || i == 13 || i == 18 || i == 23) ? s[i] != '-'
                                                      : !isxdigit((unsigned char)s[i]))
            return false;
    return true;
}

/* An independent check of the schema subset on a parsed value. */
static bool fits(const json_t *schema, const json_t *root, const json_t *v)
{
    if (json_is_true(schema))
        return true;
    const json_t *ref = json_object_get(schema, "$ref");
    if (ref) {
        const char *r = json_string_value(ref);
        return fits(json_object_get(json_object_get(root, "$defs"), r + strlen("#/$defs/")), root,
                    v);
    }
    const json_t *alts = json_object_get(schema, "anyOf");
    if (!alts)
        alts = json_object_get(schema, "oneOf");
    if (alts) {
        for (size_t i = 0; i < json_array_size(alts); i++)
            if (fits(json_array_get(alts, i), root, v))
                return true;
        return false;
    }
    const json_t *one = json_object_get(schema, "const");
    if (one)
        return json_equal((json_t *)one, (json_t *)v);
    const json_t *e = json_object_get(schema, "enum");
    if (e) {
        for (size_t i = 0; i < json_array_size(e); i++)
            if (json_equal((json_t *)json_array_get(e, i), (json_t *)v))
                return true;
        return false;
    }
    const char *t = json_string_value(json_object_get(schema, "type"));
    if (!t)
        return true;
    if (strcmp(t, "object") == 0) {
        if (!json_is_object(v))
            return false;
        const json_t *props = json_object_get(schema, "properties");
        const json_t *req = json_object_get(schema, "required");
        for (size_t i = 0; i < json_array_size(req); i++)
            if (!json_object_get(v, json_string_value(json_array_get(req, i))))
                return false;
        const char *k;
        json_t *val;
        json_object_foreach((json_t *)v, k, val)
        {
            const json_t *ps = props ? json_object_get(props, k) : json_true();
            if (!ps || !fits(ps, root, val))
                return false;
        }
        return true;
    }
    if (strcmp(t, "array") == 0) {
        if (!json_is_array(v))
            return false;
        json_int_t lo = json_integer_value(json_object_get(schema, "minItems"));
        const json_t *hi = json_object_get(schema, "maxItems");
        if ((json_int_t)json_array_size(v) < lo ||
            (hi && (json_int_t)json_array_size(v) > json_integer_value(hi)))
            return false;
        /* a tuple's elements, then items (or additionalItems after a list) */
        const json_t *items = json_object_get(schema, "items");
        const json_t *prefix = json_object_get(schema, "prefixItems");
        const json_t *rest = items;
        if (json_is_array(items)) {
            prefix = items;
            rest = json_object_get(schema, "additionalItems");
        }
        for (size_t i = 0; i < json_array_size(v); i++) {
            const json_t *sub = i < json_array_size(prefix) ? json_array_get(prefix, i) : rest;
            if (json_is_false(sub) || !fits(sub ? sub : json_true(), root, json_array_get(v, i)))
                return false;
        }
        return true;
    }
    if (strcmp(t, "string") == 0) {
        if (!json_is_string(v))
            return false;
        const char *fmt = json_string_value(json_object_get(schema, "format"));
        if (fmt)
            return format_fits(fmt, json_string_value(v));
        /* characters, not bytes */
        size_t chars = 0;
        const unsigned char *p = (const unsigned char *)json_string_value(v);
        for (size_t i = 0; i < json_string_length(v); i++)
            chars += (p[i] & 0xC0) != 0x80;
        const json_t *hi = json_object_get(schema, "maxLength");
        return (json_int_t)chars >= json_integer_value(json_object_get(schema, "minLength")) &&
               (!hi || (json_int_t)chars <= json_integer_value(hi));
    }
    if (strcmp(t, "integer") == 0)
        return json_is_integer(v);
    if (strcmp(t, "number") == 0)
        return json_is_number(v);
    if (strcmp(t, "boolean") == 0)
        return json_is_boolean(v);
    return json_is_null(v);
}

static void check_walks(const char *schema_text, int walks, bool object_root)
{
    tw_json_grammar *g = compile_ok(schema_text);
    json_t *schema =
        schema_text ? json_loads(schema_text, 0, NULL) : json_pack("{ss}", "type", "object");
    assert_non_null(schema);
    tw_test_rng rng = {0x9e3779b97f4a7c15ull ^ strlen(schema_text ? schema_text : "")};
    char *doc = malloc(1 << 16);
    int finished = 0;
    for (int i = 0; i < walks; i++) {
        size_t n = grammar_walk(g, &rng, doc, 1 << 16, 40 + i % 200);
        if (!n)
            continue;
        finished++;
        json_error_t je;
        json_t *v = json_loadb(doc, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
        if (!v)
            fail_msg("walk %d gave what jansson refuses (%s): %s", i, je.text, doc);
        if (object_root)
            assert_true(json_is_object(v));
        if (!fits(schema, schema, v))
            fail_msg("walk %d does not fit the schema: %s", i, doc);
        json_decref(v);
    }
    assert_true(finished > walks / 2);
    free(doc);
    json_decref(schema);
    tw_json_grammar_free(g);
}

/* Tuples: prefixItems (2020-12) and items as a list (drafts 4 to 7), with
 * the elements after them held to items / additionalItems. */
static void test_tuples(void **state)
{
    (void)state;
    tw_json_grammar *g = compile_ok("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},"
                                    "{\"type\":\"string\"}],\"minItems\":2,\"maxItems\":2}");
    assert_true(accepts(g, "[1, \"a\"]"));
    assert_false(accepts(g, "[\"a\", 1]"));
    assert_false(accepts(g, "[1]"));
    assert_false(accepts(g, "[1, \"a\", 2]"));
    tw_json_grammar_free(g);
    g = compile_ok("{\"prefixItems\":[{\"type\":\"boolean\"}],\"items\":{\"type\":\"null\"}}");
    assert_true(accepts(g, "[true, null, null]"));
    assert_true(accepts(g, "[]"));
    assert_false(accepts(g, "[true, 1]"));
    tw_json_grammar_free(g);
    g = compile_ok("{\"items\":[{\"type\":\"integer\"}],\"additionalItems\":false}");
    assert_true(accepts(g, "[1]"));
    assert_false(accepts(g, "[1, 2]"));
    tw_json_grammar_free(g);
    g = compile_ok("{\"prefixItems\":[{\"const\":\"x\"}],\"items\":false,\"maxItems\":9}");
    assert_true(accepts(g, "[\"x\"]"));
    assert_false(accepts(g, "[\"x\", \"x\"]"));
    tw_json_grammar_free(g);
    /* no tuple: items for every element, as before */
    g = compile_ok("{\"items\":{\"type\":\"integer\"}}");
    assert_true(accepts(g, "[1, 2, 3]"));
    assert_false(accepts(g, "[1, \"2\"]"));
    tw_json_grammar_free(g);
}

static void test_random_walks(void **state)
{
    (void)state;
    check_walks(NULL, 300, true);
    check_walks("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":"
                "2,\"maxLength\":5},\"age\":{\"type\":\"integer\"},\"score\":{\"type\":"
                "\"number\"},\"ok\":{\"type\":\"boolean\"},\"tags\":{\"type\":\"array\","
                "\"items\":{\"enum\":[\"red\",\"green\",7,70,null]},\"minItems\":1,"
                "\"maxItems\":3}},\"required\":[\"name\",\"ok\"]}",
                300, true);
    check_walks("{\"$ref\":\"#/$defs/n\",\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{"
                "\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":"
                "\"#/$defs/n\"},\"maxItems\":2},\"up\":{\"anyOf\":[{\"type\":\"string\"},"
                "{\"type\":\"null\"}]}},\"required\":[\"v\"]}}}",
                300, true);
    check_walks("{\"type\":\"array\",\"items\":{\"type\":[\"number\",\"string\"]}}", 200, false);
    check_walks("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"object\","
                "\"properties\":{\"k\":{\"type\":\"boolean\"}},\"additionalProperties\":false}],"
                "\"items\":{\"type\":\"string\",\"maxLength\":3},\"maxItems\":5}",
                200, false);
    check_walks("{\"type\":\"object\",\"properties\":{\"d\":{\"type\":\"string\",\"format\":"
                "\"date\"},\"t\":{\"type\":\"string\",\"format\":\"date-time\"},\"u\":{\"type\":"
                "\"string\",\"format\":\"uuid\"},\"h\":{\"type\":\"string\",\"format\":\"time\"}},"
                "\"required\":[\"d\",\"t\",\"u\",\"h\"]}",
                300, true);
    check_walks("{\"type\":\"array\",\"maxItems\":4,\"items\":{\"anyOf\":[{\"type\":\"object\","
                "\"properties\":{\"a\":{\"type\":\"string\",\"maxLength\":3},\"t\":{\"const\":1}},"
                "\"required\":[\"t\",\"a\"],\"additionalProperties\":false},{\"type\":\"object\","
                "\"properties\":{\"t\":{\"enum\":[12,\"x\"]},\"b\":{\"type\":\"boolean\"}},"
                "\"required\":[\"t\"],\"additionalProperties\":false},{\"type\":\"string\","
                "\"maxLength\":2}]}}",
                300, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repeated_keys),
        cmocka_unit_test(test_any_object),
        cmocka_unit_test(test_whitespace_and_number_bounds),
        cmocka_unit_test(test_schema_objects),
        cmocka_unit_test(test_refs_and_unions),
        cmocka_unit_test(test_tail),
        cmocka_unit_test(test_formats),
        cmocka_unit_test(test_choices),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_tuples),
        cmocka_unit_test(test_random_walks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
