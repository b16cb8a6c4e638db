/* Numeric bounds in JSON schemas: the matcher's verdict on every short
 * number text against an independent decimal comparison, random walks
 * through long bounded numbers with no dead end, bounds inside documents,
 * and the refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_test.h"
#include "test_support.h"

/* ---------------------------------------------- an independent reading */

/* A decimal as its sign and digits: int without leading zeros, frac
 * without trailing ones, so equal values have equal forms. */
typedef struct dec {
    bool neg;
    char in[40], fr[40];
} dec;

/* Reads -?(0|[1-9][0-9]*)(\.[0-9]+)? as JSON writes a number without an
 * exponent; false for anything else. */
static bool dec_read(const char *p, size_t n, dec *d)
{
    memset(d, 0, sizeof *d);
    size_t i = 0;
    if (i < n && p[i] == '-')
        d->neg = true, i++;
    size_t start = i;
    while (i < n && p[i] >= '0' && p[i] <= '9')
        i++;
    size_t int_len = i - start;
    if (int_len == 0 || int_len >= sizeof d->in || (int_len > 1 && p[start] == '0'))
        return false;
    size_t fr_start = 0, fr_len = 0;
    if (i < n && p[i] == '.') {
        fr_start = ++i;
        while (i < n && p[i] >= '0' && p[i] <= '9')
            i++;
        fr_len = i - fr_start;
        if (fr_len == 0 || fr_len >= sizeof d->fr)
            return false;
    }
    if (i != n)
        return false;
    while (int_len > 1 && p[start] == '0')
        start++, int_len--;
    memcpy(d->in, p + start, int_len);
    if (strcmp(d->in, "0") == 0)
        d->in[0] = '\0';
    while (fr_len && p[fr_start + fr_len - 1] == '0')
        fr_len--;
    memcpy(d->fr, p + fr_start, fr_len);
    if (!d->in[0] && !d->fr[0])
        d->neg = false; /* -0 is 0 */
    return true;
}

static int mag_cmp(const dec *a, const dec *b)
{
    size_t la = strlen(a->in), lb = strlen(b->in);
    if (la != lb)
        return la < lb ? -1 : 1;
    int c = strcmp(a->in, b->in);
    return c ? (c < 0 ? -1 : 1) : (strcmp(a->fr, b->fr) > 0) - (strcmp(a->fr, b->fr) < 0);
}

static int dec_cmp(const dec *a, const dec *b)
{
    if (a->neg != b->neg)
        return a->neg ? -1 : 1;
    return a->neg ? -mag_cmp(a, b) : mag_cmp(a, b);
}

typedef struct bounds_case {
    const char *schema;
    bool integer;
    const char *lo, *hi; /* decimal text; NULL: none */
    bool lo_excl, hi_excl;
    const char *multiple; /* decimal text; NULL: none */
} bounds_case;

/* A decimal of at most 18 integer and 9 fraction digits in billionths. */
static __int128 billionths(const dec *d)
{
    __int128 v = 0;
    for (const char *p = d->in; *p; p++)
        v = v * 10 + (*p - '0');
    size_t nf = strlen(d->fr);
    for (size_t i = 0; i < 9; i++)
        v = v * 10 + (i < nf ? d->fr[i] - '0' : 0);
    return d->neg ? -v : v;
}

/* What the grammar promises: a number of at most 18 integer and 9
 * fraction digits (an integer: no fraction), in the bounds. */
static bool fits(const bounds_case *k, const char *p, size_t n)
{
    dec v, b;
    if (!dec_read(p, n, &v) || strlen(v.in) > 18)
        return false;
    const char *dot = memchr(p, '.', n);
    if (dot && (k->integer || (size_t)(p + n - dot - 1) > 9))
        return false;
    if (n && p[0] == '-' && !v.in[0] && !v.fr[0])
        return false; /* -0 is not written under bounds */
    if (k->lo) {
        assert_true(dec_read(k->lo, strlen(k->lo), &b));
        int c = dec_cmp(&v, &b);
        if (c < 0 || (c == 0 && k->lo_excl))
            return false;
    }
    if (k->hi) {
        assert_true(dec_read(k->hi, strlen(k->hi), &b));
        int c = dec_cmp(&v, &b);
        if (c > 0 || (c == 0 && k->hi_excl))
            return false;
    }
    if (k->multiple) {
        assert_true(dec_read(k->multiple, strlen(k->multiple), &b));
        if (billionths(&v) % billionths(&b) != 0)
            return false;
    }
    return true;
}

static const bounds_case cases[] = {
    {"{\"type\":\"integer\",\"minimum\":0,\"maximum\":100}", true, "0", "100", false, false},
    {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":-2}", true, "-5", "-2", false, false},
    {"{\"type\":\"integer\",\"exclusiveMinimum\":-30,\"exclusiveMaximum\":7}", true, "-30", "7",
     true, true},
    {"{\"type\":\"integer\",\"minimum\":1.5,\"maximum\":303.5}", true, "1.5", "303.5", false,
     false},
    {"{\"type\":\"integer\",\"minimum\":95}", true, "95", NULL, false, false},
    {"{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":1}", false, "0", "1", true, false},
    {"{\"type\":\"number\",\"minimum\":0.1,\"exclusiveMaximum\":0.3}", false, "0.1", "0.3", false,
     true},
    {"{\"type\":\"number\",\"minimum\":-2.25,\"maximum\":-0.5}", false, "-2.25", "-0.5", false,
     false},
    {"{\"type\":\"number\",\"minimum\":3,\"exclusiveMinimum\":true,\"maximum\":9.99,"
     "\"exclusiveMaximum\":false}",
     false, "3", "9.99", true, false},
    {"{\"maximum\":-1.05}", false, NULL, "-1.05", false, false},
    {"{\"type\":\"number\",\"minimum\":-1000,\"maximum\":1000}", false, "-1000", "1000", false,
     false},
    {"{\"type\":\"integer\",\"minimum\":999999999999999990}", true, "999999999999999990", NULL,
     false, false},
    {"{\"type\":\"number\",\"minimum\":123456.789,\"maximum\":123456.7891}", false, "123456.789",
     "123456.7891", false, false},
    {"{\"type\":\"number\",\"exclusiveMinimum\":0.000000001,\"maximum\":0.000000003}", false,
     "0.000000001", "0.000000003", true, false},
    {"{\"type\":\"number\",\"minimum\":-0.0000000005,\"exclusiveMaximum\":0.0000000005}", false,
     "-0.0000000005", "0.0000000005", false, true},
    {"{\"type\":\"integer\",\"multipleOf\":5,\"minimum\":-20,\"maximum\":40}", true, "-20", "40",
     false, false, "5"},
    {"{\"type\":\"integer\",\"multipleOf\":7}", true, NULL, NULL, false, false, "7"},
    {"{\"type\":\"integer\",\"multipleOf\":2.5,\"maximum\":-3}", true, NULL, "-3", false, false,
     "5"},
    {"{\"type\":\"number\",\"multipleOf\":0.25,\"exclusiveMinimum\":-1,\"maximum\":2}", false, "-1",
     "2", true, false, "0.25"},
    {"{\"type\":\"number\",\"multipleOf\":0.01}", false, NULL, NULL, false, false, "0.01"},
    {"{\"type\":\"number\",\"multipleOf\":0.3,\"minimum\":1000.1}", false, "1000.1", NULL, false,
     false, "0.3"},
    /* OpenAPI's sized integers: their ranges, with the schema's own bounds */
    {"{\"type\":\"integer\",\"format\":\"int8\"}", true, "-128", "127", false, false},
    {"{\"format\":\"uint8\"}", true, "0", "255", false, false},
    {"{\"type\":\"integer\",\"format\":\"int32\",\"minimum\":-5}", true, "-5", "2147483647", false,
     false},
    {"{\"type\":\"number\",\"format\":\"int16\",\"exclusiveMaximum\":99}", false, "-32768", "99",
     false, true},
    {"{\"type\":\"integer\",\"format\":\"uint64\"}", true, "0", NULL, false, false},
};

/* Every text of at most 5 bytes over the number alphabet: accepted as a
 * whole number exactly when it fits, and no accepted prefix is a dead end
 * (some byte goes on, or it is whole). */
static void test_short_texts(void **state)
{
    (void)state;
    static const char alphabet[] = "-0123456789.e";
    const size_t na = sizeof alphabet - 1;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tw_json_grammar *g = compile_ok(cases[k].schema);
        char text[8];
        size_t idx[5] = {0};
        for (size_t len = 1; len <= 5; len++) {
            size_t total = 1;
            for (size_t i = 0; i < len; i++)
                total *= na;
            for (size_t code = 0; code < total; code++) {
                size_t x = code;
                for (size_t i = 0; i < len; i++, x /= na)
                    idx[i] = x % na, text[i] = alphabet[idx[i]];
                tw_json_state s;
                tw_json_state_init(&s, g);
                const bool fed = tw_json_state_feed(&s, text, len);
                const bool whole = fed && tw_json_state_complete(&s);
                const bool want = fits(&cases[k], text, len);
                if (whole != want)
                    fail_msg("%s: \"%.*s\" %s", cases[k].schema, (int)len, text,
                             want ? "refused" : "accepted");
                if (fed && !whole) {
                    bool on = false;
                    for (int c = 0; c < 256 && !on; c++) {
                        tw_json_state t;
                        tw_json_state_copy(&t, &s);
                        on = tw_json_state_feed_byte(&t, (unsigned char)c);
                    }
                    if (!on)
                        fail_msg("%s: dead end after \"%.*s\"", cases[k].schema, (int)len, text);
                }
            }
        }
        tw_json_grammar_free(g);
    }
}

/* Random bytes among those accepted until the number may end (then a coin
 * decides): no dead end on the way, and every finished number fits. */
static void test_walks(void **state)
{
    (void)state;
    tw_test_rng rng = {0x51ed2701u};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tw_json_grammar *g = compile_ok(cases[k].schema);
        int finished = 0;
        for (int w = 0; w < 3000; w++) {
            tw_json_state s;
            tw_json_state_init(&s, g);
            char text[64];
            size_t n = 0;
            for (;;) {
                unsigned char ok[256];
                int n_ok = 0;
                for (int c = 0; c < 256; c++) {
                    tw_json_state t;
                    tw_json_state_copy(&t, &s);
                    if (tw_json_state_feed_byte(&t, (unsigned char)c) && c != ' ' && c != '\t' &&
                        c != '\n' && c != '\r')
                        ok[n_ok++] = (unsigned char)c;
                }
                const bool whole = tw_json_state_complete(&s);
                if (whole && (n_ok == 0 || tw_test_rand_u64(&rng) % 3 == 0))
                    break;
                if (n_ok == 0)
                    fail_msg("%s: dead end after \"%.*s\"", cases[k].schema, (int)n, text);
                assert_true(n < TW_JSON_MAX_NUMBER);
                const unsigned char c = ok[tw_test_rand_u64(&rng) % (unsigned)n_ok];
                assert_true(tw_json_state_feed_byte(&s, c));
                text[n++] = (char)c;
            }
            if (!fits(&cases[k], text, n))
                fail_msg("%s: walk %d wrote \"%.*s\"", cases[k].schema, w, (int)n, text);
            finished++;
        }
        assert_int_equal(finished, 3000);
        tw_json_grammar_free(g);
    }
}

/* Bounds hold inside documents, beside null, and where "type" is left
 * out; the matcher's edge cases by name. */
static void test_in_documents(void **state)
{
    (void)state;
    static const struct {
        const char *schema;
        const char *good[5], *bad[6];
    } docs[] = {
        {"{\"type\":\"object\",\"properties\":{\"age\":{\"type\":\"integer\",\"minimum\":0,"
         "\"maximum\":150}},\"required\":[\"age\"]}",
         {"{\"age\":30}", "{\"age\":0}", "{ \"age\" : 150 }", NULL, NULL},
         {"{\"age\":151}", "{\"age\":-1}", "{\"age\":-0}", "{\"age\":1e2}", "{\"age\":30.0}",
          NULL}},
        {"{\"type\":[\"integer\",\"null\"],\"minimum\":1}",
         {"null", "1", "9000", NULL, NULL},
         {"0", "-4", "\"1\"", NULL, NULL, NULL}},
        {"{\"minimum\":10}",
         {"10", "10.5", "123456789012345678.5", NULL, NULL},
         {"9.999", "\"a\"", "1234567890123456789", "1e3", NULL, NULL}},
        {"{\"type\":\"number\",\"minimum\":0,\"format\":\"double\"}",
         {"0", "0.0", "3.25", NULL, NULL},
         {"-0", "-0.0", "-1", "0.0000000001", NULL, NULL}},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"exclusiveMaximum\":-99}}",
         {"[]", "[-100,-1000]", "[-123456789012345678]", NULL, NULL},
         {"[-99]", "[0]", "[-98]", "[-1234567890123456789]", NULL, NULL}},
        {"{\"type\":\"number\",\"minimum\":2.999999999,\"maximum\":3.5}",
         {"2.999999999", "3.5", "3", "3.499999999", NULL},
         {"2.99999999", "3.5000000001", "3.500000001", "2.9999999999", NULL, NULL}},
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        tw_json_grammar *g = compile_ok(docs[i].schema);
        for (int k = 0; k < 5 && docs[i].good[k]; k++)
            if (!accepts_n(g, docs[i].good[k], strlen(docs[i].good[k])))
                fail_msg("%s refused %s", docs[i].schema, docs[i].good[k]);
        for (int k = 0; k < 6 && docs[i].bad[k]; k++)
            if (accepts_n(g, docs[i].bad[k], strlen(docs[i].bad[k])))
                fail_msg("%s accepted %s", docs[i].schema, docs[i].bad[k]);
        tw_json_grammar_free(g);
    }
}

static void test_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *schema, *says;
    } bad[] = {
        {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "no integer fits the bounds"},
        {"{\"type\":\"integer\",\"minimum\":0.2,\"maximum\":0.8}", "no integer fits the bounds"},
        {"{\"type\":\"number\",\"minimum\":1,\"exclusiveMaximum\":1}", "no number fits"},
        {"{\"type\":\"number\",\"minimum\":1e30}", "no number fits"},
        {"{\"properties\":{\"n\":{\"type\":\"integer\",\"maximum\":-1e19}}}",
         "no integer fits the bounds (at most 18 integer digits, 9 fraction digits) (at "
         "/properties/n)"},
        {"{\"type\":\"number\",\"exclusiveMinimum\":true}",
         "\"exclusiveMinimum\" as a boolean needs the bound beside it"},
        {"{\"type\":\"number\",\"minimum\":\"3\"}", "\"minimum\" must be a number"},
        {"{\"type\":\"number\",\"maximum\":null}", "\"maximum\" must be a number"},
        {"{\"enum\":[1,2],\"minimum\":0}", "\"minimum\" beside $ref, anyOf, oneOf, enum or const"},
        {"{\"anyOf\":[{\"type\":\"integer\"}],\"maximum\":3}", "\"maximum\" beside"},
        {"{\"type\":\"integer\",\"multipleOf\":0}", "\"multipleOf\" must be a positive"},
        {"{\"type\":\"number\",\"multipleOf\":-2}", "\"multipleOf\" must be a positive"},
        {"{\"type\":\"number\",\"multipleOf\":1e-10}", "at most 9 fraction digits"},
        {"{\"type\":\"number\",\"multipleOf\":\"2\"}", "\"multipleOf\" must be a positive"},
        {"{\"type\":\"integer\",\"multipleOf\":4,\"minimum\":1,\"maximum\":3}",
         "no integer fits the bounds"},
        {"{\"type\":\"integer\",\"format\":\"int8\",\"minimum\":200}", "no integer fits"},
        {"{\"type\":\"string\",\"format\":\"int32\"}", "unsupported format \"int32\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tw_json_grammar *g = NULL;
        tw_err err = {0};
        tw_status st = tw_json_grammar_compile(bad[i].schema, strlen(bad[i].schema), &g, &err);
        if (st != TW_INVALID_ARGUMENT || !strstr(err.msg, bad[i].says))
            fail_msg("%s: status %d, \"%s\"; wanted \"%s\"", bad[i].schema, st, err.msg,
                     bad[i].says);
        assert_null(g);
    }
    /* bounds do not apply to other types, as JSON Schema reads them */
    tw_json_grammar *g = compile_ok("{\"type\":\"string\",\"minimum\":3}");
    assert_true(accepts_n(g, "\"ab\"", 4));
    tw_json_grammar_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_short_texts),
        cmocka_unit_test(test_walks),
        cmocka_unit_test(test_in_documents),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
