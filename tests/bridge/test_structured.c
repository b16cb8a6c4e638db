/* response_format over real HTTP, on the real engine serving the shipped
 * model: json_schema and json_object answers whole and streamed, and the
 * 400 for a schema the engine does not understand.
 *
 * Arguments: the model to serve. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge_fixture.h"
#include "test_support.h"

static const char *model_path;

/* The person schema the structured-output tests ask for. */
#define PERSON_SCHEMA                                                                              \
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":20},"        \
    "\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":"             \
    "\"string\"},\"maxItems\":3}},\"required\":[\"name\",\"age\",\"tags\"],"                       \
    "\"additionalProperties\":false}"

/* A chat request for a JSON answer: response_format (JSON text), the seed,
 * and `extra` (",\"stream\":true" or ""). */
static twb_result json_chat(twb_service *s, const char *response_format, unsigned seed,
                            const char *extra)
{
    char body[2048];
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Describe a person as JSON.\"}],"
             "\"response_format\":%s,\"temperature\":1,\"max_tokens\":300,\"seed\":%u%s}",
             response_format, seed, extra);
    return twb_http(s, "POST", "/v1/chat/completions", body, SIZE_MAX);
}

/* Unicode characters of a UTF-8 string, as maxLength counts them. */
static size_t utf8_chars(const char *t)
{
    size_t n = 0;
    for (; *t; t++)
        n += ((unsigned char)*t & 0xc0) != 0x80;
    return n;
}

/* The first choice of a whole chat answer: its content and finish_reason
 * (copies; free()). */
static void whole_choice(twb_result *r, const char *what, char **content, char **finish)
{
    json_t *j = twb_ok_json(r, what);
    json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
    const char *c = json_string_value(json_object_get(json_object_get(ch, "message"), "content"));
    const char *f = json_string_value(json_object_get(ch, "finish_reason"));
    if (!c || !f)
        fail_msg("%s: no content or finish_reason", what);
    *content = strdup(c);
    *finish = strdup(f);
    json_decref(j);
}

typedef struct joined {
    char *text;
    size_t len;
    char *finish;
} joined;

static void join_delta(json_t *ev, void *user)
{
    joined *j = user;
    json_t *ch = json_array_get(json_object_get(ev, "choices"), 0);
    const char *d = json_string_value(json_object_get(json_object_get(ch, "delta"), "content"));
    if (d) {
        size_t n = strlen(d);
        j->text = realloc(j->text, j->len + n + 1);
        assert_non_null(j->text);
        memcpy(j->text + j->len, d, n + 1);
        j->len += n;
    }
    const char *f = json_string_value(json_object_get(ch, "finish_reason"));
    if (f) {
        free(j->finish);
        j->finish = strdup(f);
    }
}

/* The content deltas of a streamed chat answer joined, and its
 * finish_reason (copies; free()). */
static void streamed_choice(twb_result *r, char **content, char **finish)
{
    if (r->status != 200)
        fail_msg("stream: %ld %s", r->status, r->body);
    joined j = {.text = calloc(1, 1)};
    assert_non_null(j.text);
    assert_true(twb_sse_each(r->body, join_delta, &j));
    assert_non_null(j.finish);
    free(r->body);
    r->body = NULL;
    *content = j.text;
    *finish = j.finish;
}

/* An answer that stopped on its own is the whole document: it parses, as
 * an object (json_object) or as the person schema wants it. */
static void check_json_answer(const char *content, bool person)
{
    json_error_t jerr;
    json_t *doc = json_loads(content, JSON_DECODE_ANY, &jerr);
    if (!doc)
        fail_msg("a finished JSON answer does not parse (%s): %s", jerr.text, content);
    if (!json_is_object(doc))
        fail_msg("not a JSON object: %s", content);
    if (person) {
        json_t *name = json_object_get(doc, "name"), *age = json_object_get(doc, "age");
        json_t *tags = json_object_get(doc, "tags");
        if (json_object_size(doc) != 3 || !json_is_string(name) || !json_is_integer(age) ||
            !json_is_array(tags) || json_array_size(tags) > 3 ||
            utf8_chars(json_string_value(name)) > 20)
            fail_msg("the answer does not fit the schema: %s", content);
        size_t i;
        json_t *t;
        json_array_foreach(tags, i, t)
        {
            if (!json_is_string(t))
                fail_msg("a tag is not a string: %s", content);
        }
    }
    json_decref(doc);
}

/* response_format on the shipped model: sampled answers at several seeds
 * are JSON of the asked shape whenever they finish ("length" cuts one
 * short, which a toy model may do; one seed at least must finish); a
 * stream joins into the whole answer of its seed; a schema keyword the
 * engine does not understand is a 400 that names it. */
static void test_structured_outputs(void **state)
{
    (void)state;
    twb_service s;
    twb_start(&s, model_path, NULL, NULL, NULL);

    static const char person[] = "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"person\","
                                 "\"strict\":true,\"schema\":" PERSON_SCHEMA "}}";
    static const char object[] = "{\"type\":\"json_object\"}";
    const struct {
        const char *format;
        bool person;
    } forms[] = {{person, true}, {object, false}};
    for (size_t k = 0; k < 2; k++) {
        int stopped = 0;
        for (unsigned seed = 1; seed <= 4; seed++) {
            twb_result r = json_chat(&s, forms[k].format, seed, "");
            char *content, *finish;
            whole_choice(&r, forms[k].format, &content, &finish);
            if (strcmp(finish, "stop") == 0) {
                check_json_answer(content, forms[k].person);
                stopped++;
            } else if (strcmp(finish, "length") != 0) {
                fail_msg("finish_reason %s: %s", finish, content);
            }
            /* the same seed streamed: the same text, delta by delta */
            if (forms[k].person && seed <= 2) {
                r = json_chat(&s, forms[k].format, seed, ",\"stream\":true");
                char *streamed, *sfinish;
                streamed_choice(&r, &streamed, &sfinish);
                assert_string_equal(streamed, content);
                assert_string_equal(sfinish, finish);
                free(streamed);
                free(sfinish);
            }
            free(content);
            free(finish);
        }
        if (stopped == 0)
            fail_msg("no seed finished a %s answer within 300 tokens", forms[k].format);
    }

    /* a strict schema's pattern holds through the HTTP API; POSIX regex
     * checks what PCRE2 kept to */
    regex_t hex;
    assert_int_equal(regcomp(&hex, "^[a-f0-9]{6}$", REG_EXTENDED | REG_NOSUB), 0);
    for (unsigned seed = 1; seed <= 2; seed++) {
        twb_result r = json_chat(&s,
                                 "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"id\","
                                 "\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":{"
                                 "\"id\":{\"type\":\"string\",\"pattern\":\"^[a-f0-9]{6}$\"}},"
                                 "\"required\":[\"id\"],\"additionalProperties\":false}}}",
                                 seed, "");
        char *content, *finish;
        whole_choice(&r, "pattern", &content, &finish);
        json_t *doc = json_loads(content, 0, NULL);
        const char *id = json_string_value(json_object_get(doc, "id"));
        if (strcmp(finish, "stop") != 0 || !id || regexec(&hex, id, 0, NULL, 0) != 0)
            fail_msg("a pattern answer (%s) does not fit: %s", finish, content);
        json_decref(doc);
        free(content);
        free(finish);
    }
    regfree(&hex);

    /* uniqueItems (pydantic's sets): the items differ, compared by jansson */
    for (unsigned seed = 1; seed <= 2; seed++) {
        twb_result r = json_chat(&s,
                                 "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"tags\","
                                 "\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":{"
                                 "\"tags\":{\"type\":\"array\",\"uniqueItems\":true,\"minItems\":3,"
                                 "\"maxItems\":6,\"items\":{\"type\":\"string\",\"maxLength\":2}}},"
                                 "\"required\":[\"tags\"],\"additionalProperties\":false}}}",
                                 seed, "");
        char *content, *finish;
        whole_choice(&r, "uniqueItems", &content, &finish);
        json_t *doc = json_loads(content, 0, NULL);
        const json_t *tags = json_object_get(doc, "tags");
        const size_t n = json_array_size(tags);
        if (strcmp(finish, "stop") != 0 || n < 3 || n > 6)
            fail_msg("a set answer (%s) does not fit: %s", finish, content);
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++)
                if (json_equal(json_array_get(tags, i), json_array_get(tags, j)))
                    fail_msg("a set answer repeats an item: %s", content);
        json_decref(doc);
        free(content);
        free(finish);
    }

    /* pydantic's Union of two models without a discriminator, and
     * Union[int, float]: each answer is one model, its number a number */
    for (unsigned seed = 1; seed <= 2; seed++) {
        twb_result r = json_chat(
            &s,
            "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"pet\",\"schema\":{"
            "\"$defs\":{\"Cat\":{\"type\":\"object\",\"properties\":{\"meows\":{\"type\":"
            "\"boolean\"},\"w\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}},"
            "\"required\":[\"meows\",\"w\"],\"additionalProperties\":false},\"Dog\":{\"type\":"
            "\"object\",\"properties\":{\"w\":{\"type\":\"integer\"},\"barks\":{\"type\":"
            "\"boolean\"}},\"required\":[\"w\",\"barks\"],\"additionalProperties\":false}},"
            "\"anyOf\":[{\"$ref\":\"#/$defs/Cat\"},{\"$ref\":\"#/$defs/Dog\"}]}}}",
            seed, "");
        char *content, *finish;
        whole_choice(&r, "union", &content, &finish);
        json_t *doc = json_loads(content, 0, NULL);
        const bool cat = json_is_boolean(json_object_get(doc, "meows")) &&
                         json_is_number(json_object_get(doc, "w")) && json_object_size(doc) == 2;
        const bool dog = json_is_boolean(json_object_get(doc, "barks")) &&
                         json_is_integer(json_object_get(doc, "w")) && json_object_size(doc) == 2;
        if (strcmp(finish, "stop") != 0 || cat == dog)
            fail_msg("a union answer (%s) is not one model: %s", finish, content);
        json_decref(doc);
        free(content);
        free(finish);
    }

    /* pydantic's dict[Color, int] (propertyNames naming an enum): every
     * key a color, none twice (jansson refuses duplicates) */
    for (unsigned seed = 1; seed <= 2; seed++) {
        twb_result r = json_chat(
            &s,
            "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"stock\",\"schema\":{"
            "\"$defs\":{\"Color\":{\"enum\":[\"red\",\"green\",\"blue\"],\"type\":\"string\"}},"
            "\"type\":\"object\",\"properties\":{\"counts\":{\"type\":\"object\","
            "\"propertyNames\":{\"$ref\":\"#/$defs/Color\"},\"additionalProperties\":{\"type\":"
            "\"integer\"},\"minProperties\":1}},\"required\":[\"counts\"],"
            "\"additionalProperties\":false}}}",
            seed, "");
        char *content, *finish;
        whole_choice(&r, "propertyNames", &content, &finish);
        json_t *doc = json_loads(content, JSON_REJECT_DUPLICATES, NULL);
        const json_t *counts = json_object_get(doc, "counts");
        bool fits = strcmp(finish, "stop") == 0 && json_object_size(counts) >= 1;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)counts, k, v)
        {
            fits = fits && json_is_integer(v) &&
                   (!strcmp(k, "red") || !strcmp(k, "green") || !strcmp(k, "blue"));
        }
        if (!fits)
            fail_msg("a dict answer keyed by an enum (%s) does not fit: %s", finish, content);
        json_decref(doc);
        free(content);
        free(finish);
    }

    /* vLLM's guided_choice: the answer is one of the texts, raw */
    for (unsigned seed = 1; seed <= 3; seed++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Is this good?\"}],"
                 "\"guided_choice\":[\"positive\",\"negative\",\"neutral\"],"
                 "\"temperature\":1,\"seed\":%u}",
                 seed);
        twb_result r = twb_http(&s, "POST", "/v1/chat/completions", body, SIZE_MAX);
        char *content, *finish;
        whole_choice(&r, "guided_choice", &content, &finish);
        if (strcmp(finish, "stop") != 0 ||
            (strcmp(content, "positive") && strcmp(content, "negative") &&
             strcmp(content, "neutral")))
            fail_msg("guided_choice gave \"%s\" (%s)", content, finish);
        free(content);
        free(finish);
    }

    /* A keyword the engine does not understand is refused, never ignored:
     * 400 with the engine's reason, for whole and streamed answers. */
    for (int streamed = 0; streamed < 2; streamed++) {
        twb_result r = json_chat(&s,
                                 "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\","
                                 "\"schema\":{\"type\":\"object\",\"properties\":{\"x\":{"
                                 "\"type\":\"object\",\"dependentRequired\":{\"a\":[\"b\"]}}}}}}",
                                 1, streamed ? ",\"stream\":true" : "");
        if (r.status != 400)
            fail_msg("a schema with dependentRequired: %ld %s", r.status, r.body);
        json_t *j = json_loads(r.body, 0, NULL);
        json_t *e = json_object_get(j, "error");
        const char *msg = json_string_value(json_object_get(e, "message"));
        if (!msg || !strstr(msg, "dependentRequired"))
            fail_msg("the refusal does not name the keyword: %s", r.body);
        assert_string_equal(json_string_value(json_object_get(e, "type")), "invalid_request_error");
        assert_string_equal(json_string_value(json_object_get(e, "param")), "response_format");
        json_decref(j);
        twb_expect_error(&r, 400, NULL);
    }
    twb_stop(&s);
}

/* Both daemons, the engine with a template of ../shared (rel) in place of
 * the model's own. */
static void start_with_template(twb_service *s, const char *rel)
{
    char tmpl[4096];
    tw_test_shared_path(tmpl, sizeof tmpl, rel);
    const char *const extra[] = {"--chat-template", tmpl, NULL};
    twb_start(s, model_path, extra, NULL, NULL);
}

/* Posts a chat body whose answer must be one whole get_weather call
 * (finish_reason tool_calls) whose arguments fit: a city and a number of
 * days, from 1 to max_days when max_days > 0. */
static void expect_weather_call(twb_service *s, const char *body, unsigned seed, long long max_days)
{
    twb_result r = twb_http(s, "POST", "/v1/chat/completions", body, SIZE_MAX);
    json_t *j = twb_ok_json(&r, "weather call");
    json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
    json_t *call = json_array_get(json_object_get(json_object_get(ch, "message"), "tool_calls"), 0);
    json_t *fn = json_object_get(call, "function");
    const char *finish = json_string_value(json_object_get(ch, "finish_reason"));
    const char *name = json_string_value(json_object_get(fn, "name"));
    const char *args = json_string_value(json_object_get(fn, "arguments"));
    if (!finish || strcmp(finish, "tool_calls") != 0 || !name || strcmp(name, "get_weather") != 0 ||
        !args)
        fail_msg("seed %u: not a whole get_weather call: %s", seed, json_dumps(j, JSON_COMPACT));
    json_t *a = json_loads(args, 0, NULL);
    const json_t *days = json_object_get(a, "days");
    if (!json_is_string(json_object_get(a, "city")) || !json_is_integer(days) ||
        (max_days > 0 && (json_integer_value(days) < 1 || json_integer_value(days) > max_days)) ||
        json_object_size(a) != 2)
        fail_msg("seed %u: the arguments do not fit the parameters: %s", seed, args);
    json_decref(a);
    json_decref(j);
}

/* The function_call item of a response object; fails when there is none. */
static const json_t *call_item(const json_t *response)
{
    const json_t *out = json_object_get(response, "output");
    for (size_t i = 0; i < json_array_size(out); i++) {
        const json_t *it = json_array_get(out, i);
        if (!strcmp(json_string_value(json_object_get(it, "type")), "function_call"))
            return it;
    }
    fail_msg("no function_call item in %s", json_dumps(response, JSON_COMPACT));
    return NULL;
}

static void keep_final(json_t *ev, void *user)
{
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (type && !strcmp(type, "response.completed"))
        *(json_t **)user = json_incref(json_object_get(ev, "response"));
}

/* The same forced call through /v1/responses, whole and streamed with the
 * same seed: a function_call item whose arguments fit, the same in both. */
static void responses_forced_call(twb_service *s)
{
    static const char body[] =
        "{\"input\":\"Weather in Oslo?\",\"tools\":[{\"type\":\"function\",\"name\":"
        "\"get_weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{"
        "\"type\":\"string\",\"maxLength\":12},\"days\":{\"type\":\"integer\",\"minimum\":1,"
        "\"maximum\":5}},\"required\":[\"city\",\"days\"],\"additionalProperties\":false}}],"
        "\"tool_choice\":{\"type\":\"function\",\"name\":\"get_weather\"},\"temperature\":1,"
        "\"seed\":2,\"max_output_tokens\":300%s}";
    char text[2048];
    snprintf(text, sizeof text, body, "");
    twb_result r = twb_http(s, "POST", "/v1/responses", text, SIZE_MAX);
    json_t *whole = twb_ok_json(&r, "responses call");
    const json_t *call = call_item(whole);
    json_t *a = json_loads(json_string_value(json_object_get(call, "arguments")), 0, NULL);
    const json_t *days = json_object_get(a, "days");
    if (strcmp(json_string_value(json_object_get(call, "name")), "get_weather") != 0 ||
        !json_is_string(json_object_get(a, "city")) || json_integer_value(days) < 1 ||
        json_integer_value(days) > 5)
        fail_msg("not a fitting get_weather call: %s", json_dumps(whole, JSON_COMPACT));
    json_decref(a);
    snprintf(text, sizeof text, body, ",\"stream\":true");
    twb_result st = twb_http(s, "POST", "/v1/responses", text, SIZE_MAX);
    assert_int_equal(st.status, 200);
    json_t *final = NULL;
    /* a Responses stream ends with response.completed, not [DONE] */
    assert_false(twb_sse_each(st.body, keep_final, &final));
    free(st.body);
    assert_non_null(final);
    assert_string_equal(json_string_value(json_object_get(call_item(final), "arguments")),
                        json_string_value(json_object_get(call, "arguments")));
    json_decref(final);
    json_decref(whole);
}

/* A named tool_choice on a template that writes Hermes calls: the call's
 * arguments are held to the function's parameters, so every seed gives a
 * whole call (finish_reason tool_calls) whose arguments fit; streamed, the
 * argument deltas join into the same arguments. */
static void test_forced_tool_call(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(dir);
    twb_service s;
    start_with_template(&s, "chat/Qwen-Qwen2.5-7B-Instruct.jinja");
    for (unsigned seed = 1; seed <= 3; seed++) {
        char body[2048];
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Oslo?\"}],"
                 "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                 "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":"
                 "\"string\",\"maxLength\":12},\"days\":{\"type\":\"integer\"}},\"required\":"
                 "[\"city\",\"days\"],\"additionalProperties\":false}}}],\"tool_choice\":{"
                 "\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}},"
                 "\"temperature\":1,\"max_tokens\":300,\"seed\":%u}",
                 seed);
        expect_weather_call(&s, body, seed, 0);
    }
    responses_forced_call(&s);
    twb_stop(&s);
}

/* tool_choice "auto" on Llama 3.1's template, whose calls are answers that
 * start with "{": the bias below makes every answer start so, and the
 * call that follows is held to the tools' grammar, so each seed gives a
 * whole call (finish_reason tool_calls) whose arguments fit its tool. */
static void test_auto_tool_call(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(dir);
    twb_service s;
    start_with_template(&s, "chat/meta-llama-Llama-3.1-8B-Instruct.jinja");
    twb_result t = twb_http(&s, "POST", "/tokenize",
                            "{\"prompt\":\"{\",\"add_special_tokens\":false}", SIZE_MAX);
    json_t *tj = twb_ok_json(&t, "tokenize");
    json_t *ids = json_object_get(tj, "tokens");
    assert_int_equal(json_array_size(ids), 1);
    const json_int_t brace = json_integer_value(json_array_get(ids, 0));
    json_decref(tj);
    for (unsigned seed = 1; seed <= 3; seed++) {
        char body[2048];
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Oslo?\"}],"
                 "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                 "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":"
                 "\"string\",\"maxLength\":12},\"days\":{\"type\":\"integer\",\"minimum\":1,"
                 "\"maximum\":7}},\"required\":[\"city\",\"days\"],"
                 "\"additionalProperties\":false}}}],\"tool_choice\":\"auto\","
                 "\"logit_bias\":{\"%lld\":100},\"temperature\":1,\"max_tokens\":300,"
                 "\"seed\":%u}",
                 (long long)brace, seed);
        expect_weather_call(&s, body, seed, 7);
    }
    twb_stop(&s);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_structured_outputs, twb_teardown),
        cmocka_unit_test_teardown(test_forced_tool_call, twb_teardown),
        cmocka_unit_test_teardown(test_auto_tool_call, twb_teardown),
    };
    return twb_main(argc, argv, &model_path, tests, sizeof tests / sizeof tests[0]);
}
