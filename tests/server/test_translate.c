/* GenerateRequest → tw_gen_request for the output format: the kind and the
 * schema borrowed from the wire message, and the refusals that name the
 * field (a kind number this engine does not know, which protobuf-c lets
 * through as it is, and a schema over the limit). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "tokenwire/wire.h"
#include "tw/json_grammar.h"
#include "translate.h"

/* A text prompt with the given format (NULL: none). */
static Tokenwire__V1__GenerateRequest text_request(Tokenwire__V1__OutputFormat *f)
{
    Tokenwire__V1__GenerateRequest g = TOKENWIRE__V1__GENERATE_REQUEST__INIT;
    g.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TEXT;
    g.text = "hi";
    g.format = f;
    return g;
}

static tw_status translate(const Tokenwire__V1__GenerateRequest *g, tw_gen_request *r, tw_err *err)
{
    twd_gen_scratch sc;
    tw_status st = twd_gen_from_wire(g, 0, r, &sc, err);
    twd_gen_scratch_free(&sc);
    return st;
}

static void test_format_maps(void **state)
{
    (void)state;
    tw_gen_request r;
    tw_err err;
    Tokenwire__V1__GenerateRequest g = text_request(NULL);
    assert_int_equal(translate(&g, &r, &err), TW_OK);
    assert_int_equal(r.format.kind, TW_OUTPUT_TEXT);
    assert_null(r.format.json_schema);

    Tokenwire__V1__OutputFormat f = TOKENWIRE__V1__OUTPUT_FORMAT__INIT;
    g = text_request(&f);
    assert_int_equal(translate(&g, &r, &err), TW_OK);
    assert_int_equal(r.format.kind, TW_OUTPUT_TEXT);

    f.has_kind = 1;
    f.kind = TOKENWIRE__V1__OUTPUT_KIND__OUTPUT_JSON;
    assert_int_equal(translate(&g, &r, &err), TW_OK);
    assert_int_equal(r.format.kind, TW_OUTPUT_JSON);
    assert_null(r.format.json_schema);
    assert_int_equal(r.format.json_schema_len, 0);

    /* "" is no schema: any JSON object */
    f.json_schema = "";
    assert_int_equal(translate(&g, &r, &err), TW_OK);
    assert_null(r.format.json_schema);

    /* the schema is borrowed from the message, not copied */
    char schema[] = "{\"type\":\"object\"}";
    f.json_schema = schema;
    assert_int_equal(translate(&g, &r, &err), TW_OK);
    assert_ptr_equal(r.format.json_schema, schema);
    assert_int_equal(r.format.json_schema_len, strlen(schema));

    /* choices, borrowed too */
    char *choices[] = {"yes", "no"};
    f.json_schema = NULL;
    f.kind = TOKENWIRE__V1__OUTPUT_KIND__OUTPUT_CHOICE;
    f.choices = choices;
    f.n_choices = 2;
    assert_int_equal(translate(&g, &r, &err), TW_OK);
    assert_int_equal(r.format.kind, TW_OUTPUT_CHOICE);
    assert_int_equal(r.format.n_choices, 2);
    assert_ptr_equal(r.format.choices[1], choices[1]);
}

static void test_format_refusals(void **state)
{
    (void)state;
    tw_gen_request r;
    tw_err err;
    Tokenwire__V1__OutputFormat f = TOKENWIRE__V1__OUTPUT_FORMAT__INIT;
    Tokenwire__V1__GenerateRequest g = text_request(&f);

    /* A kind from a newer protocol arrives as its number: encoded and
     * decoded, it is still 7, and refused by name. */
    f.has_kind = 1;
    f.kind = (Tokenwire__V1__OutputKind)7;
    Tokenwire__V1__Request req = TOKENWIRE__V1__REQUEST__INIT;
    req.method_case = TOKENWIRE__V1__REQUEST__METHOD_GENERATE;
    req.generate = &g;
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(tw_wire_encode_request(&req, NULL, &buf, &len, &err), TW_OK);
    Tokenwire__V1__Request *back = NULL;
    assert_int_equal(tw_wire_decode_request(buf, len, NULL, &back, &err), TW_OK);
    free(buf);
    assert_int_equal(back->generate->format->kind, 7);
    assert_int_equal(translate(back->generate, &r, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "format.kind 7"));
    tw_wire_free_request(back);
    f.kind = (Tokenwire__V1__OutputKind)-1;
    assert_int_equal(translate(&g, &r, &err), TW_INVALID_ARGUMENT);

    /* a schema with a kind that is not JSON would be silently ignored */
    f.kind = TOKENWIRE__V1__OUTPUT_KIND__OUTPUT_TEXT;
    f.json_schema = "{}";
    assert_int_equal(translate(&g, &r, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "format.json_schema"));

    /* choices with a kind that does not take them */
    f.json_schema = NULL;
    char *choices[] = {"a"};
    f.choices = choices;
    f.n_choices = 1;
    f.kind = TOKENWIRE__V1__OUTPUT_KIND__OUTPUT_JSON;
    assert_int_equal(translate(&g, &r, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "format.choices"));
    f.choices = NULL;
    f.n_choices = 0;

    /* the schema's limit, to the byte */
    f.kind = TOKENWIRE__V1__OUTPUT_KIND__OUTPUT_JSON;
    char *big = malloc(TW_JSON_SCHEMA_MAX_BYTES + 2);
    assert_non_null(big);
    memset(big, ' ', TW_JSON_SCHEMA_MAX_BYTES + 1);
    big[TW_JSON_SCHEMA_MAX_BYTES + 1] = '\0';
    f.json_schema = big;
    assert_int_equal(translate(&g, &r, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "format.json_schema"));
    big[TW_JSON_SCHEMA_MAX_BYTES] = '\0';
    assert_int_equal(translate(&g, &r, &err), TW_OK);
    assert_int_equal(r.format.json_schema_len, TW_JSON_SCHEMA_MAX_BYTES);
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_maps),
        cmocka_unit_test(test_format_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
