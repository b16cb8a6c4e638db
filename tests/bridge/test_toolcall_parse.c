/* Tool calls written as text by the model (Hermes tags, Llama 3.1 JSON,
 * Mistral arrays), whole and streamed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toolcall_parse.h"

static void parse(const char *text, tw_bridge_tool_calls *out)
{
    tw_err err;
    assert_int_equal(tw_bridge_parse_tool_calls(text, strlen(text), "s", out, &err), TW_OK);
}

static void test_hermes_single_call(void **state)
{
    (void)state;
    tw_bridge_tool_calls c;
    parse("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
          "\"unit\": \"c\"}}\n</tool_call>",
          &c);
    assert_int_equal(c.n, 1);
    assert_string_equal(c.items[0].name, "get_weather");
    assert_string_equal(c.items[0].arguments, "{\"city\":\"Paris\",\"unit\":\"c\"}");
    assert_string_equal(c.items[0].id, "call_s0");
    assert_null(c.content);
    tw_bridge_tool_calls_free(&c);
}

static void test_hermes_prose_and_two_calls(void **state)
{
    (void)state;
    tw_bridge_tool_calls c;
    parse("Let me check.\n<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>\n"
          "<tool_call>{\"name\":\"b\",\"arguments\":{\"x\":[1,2]}}</tool_call>",
          &c);
    assert_int_equal(c.n, 2);
    assert_string_equal(c.items[0].name, "a");
    assert_string_equal(c.items[0].arguments, "{}");
    assert_string_equal(c.items[1].name, "b");
    assert_string_equal(c.items[1].arguments, "{\"x\":[1,2]}");
    assert_string_equal(c.items[1].id, "call_s1");
    assert_string_equal(c.content, "Let me check.");
    tw_bridge_tool_calls_free(&c);
}

static void test_hermes_unclosed_last_block(void **state)
{
    (void)state;
    tw_bridge_tool_calls c;
    parse("<tool_call>{\"name\":\"f\",\"arguments\":{\"q\":\"x\"}}", &c);
    assert_int_equal(c.n, 1);
    assert_string_equal(c.items[0].arguments, "{\"q\":\"x\"}");
    tw_bridge_tool_calls_free(&c);
}

static void test_hermes_arguments_as_json_string(void **state)
{
    (void)state;
    tw_bridge_tool_calls c;
    parse("<tool_call>{\"name\":\"f\",\"arguments\":\"{\\\"a\\\": 1}\"}</tool_call>", &c);
    assert_int_equal(c.n, 1);
    assert_string_equal(c.items[0].arguments, "{\"a\":1}");
    tw_bridge_tool_calls_free(&c);
}

static void test_broken_markup_stays_content(void **state)
{
    (void)state;
    const char *cases[] = {
        "<tool_call>not json</tool_call>",
        "<tool_call>{\"arguments\":{}}</tool_call>",         /* no name */
        "<tool_call>{\"name\":\"\",\"arguments\":{}}</tool_call>", /* empty name */
        "<tool_call>{\"name\":\"f\",\"arguments\":7}</tool_call>",  /* bad arguments */
        "<tool_call>[1,2,3]</tool_call>",
        "I would use <tool_call> tags if I could.",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tw_bridge_tool_calls c;
        parse(cases[i], &c);
        assert_int_equal(c.n, 0);
        assert_string_equal(c.content, cases[i]);
        tw_bridge_tool_calls_free(&c);
    }
}

static void test_llama_json_calls(void **state)
{
    (void)state;
    tw_bridge_tool_calls c;
    parse("  {\"name\": \"search\", \"parameters\": {\"q\": \"tokenwire\"}}\n", &c);
    assert_int_equal(c.n, 1);
    assert_string_equal(c.items[0].name, "search");
    assert_string_equal(c.items[0].arguments, "{\"q\":\"tokenwire\"}");
    assert_null(c.content);
    tw_bridge_tool_calls_free(&c);

    parse("<|python_tag|>{\"name\":\"a\",\"parameters\":{}}; {\"name\":\"b\",\"parameters\":{}}",
          &c);
    assert_int_equal(c.n, 2);
    assert_string_equal(c.items[1].name, "b");
    tw_bridge_tool_calls_free(&c);
}

static void test_llama_json_all_or_nothing(void **state)
{
    (void)state;
    const char *cases[] = {
        "{\"name\":\"a\",\"parameters\":{}} and then some prose",
        "{\"answer\": 42}",
        "{\"name\":\"a\",\"parameters\":{}",
        "The answer is {\"name\":\"a\"}",
        "",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tw_bridge_tool_calls c;
        parse(cases[i], &c);
        assert_int_equal(c.n, 0);
        if (cases[i][0])
            assert_string_equal(c.content, cases[i]);
        else
            assert_null(c.content);
        tw_bridge_tool_calls_free(&c);
    }
}

static void test_deep_nesting_is_refused_not_crashed(void **state)
{
    (void)state;
    size_t depth = 100000;
    char *s = malloc(2 * depth + 32);
    strcpy(s, "<tool_call>");
    size_t o = strlen(s);
    memset(s + o, '[', depth);
    o += depth;
    memset(s + o, ']', depth);
    o += depth;
    s[o] = '\0';
    tw_bridge_tool_calls c;
    parse(s, &c);
    assert_int_equal(c.n, 0);
    assert_non_null(c.content);
    tw_bridge_tool_calls_free(&c);
    free(s);
}

/* Feeds text in pieces of `step` bytes; returns what passed through. */
static char *stream_through(const char *text, size_t step, tw_bridge_tool_calls *out)
{
    tw_bridge_tool_stream ts;
    tw_bridge_tool_stream_init(&ts);
    size_t n = strlen(text), cap = n + 1, len = 0;
    char *passed = calloc(1, cap);
    tw_err err;
    for (size_t i = 0; i < n; i += step) {
        size_t k = n - i < step ? n - i : step;
        const char *emit;
        size_t elen;
        assert_int_equal(tw_bridge_tool_stream_feed(&ts, text + i, k, &emit, &elen, &err), TW_OK);
        memcpy(passed + len, emit, elen);
        len += elen;
    }
    assert_int_equal(tw_bridge_tool_stream_finish(&ts, "s", out, &err), TW_OK);
    tw_bridge_tool_stream_fini(&ts);
    return passed;
}

static void test_stream_plain_text_passes_through(void **state)
{
    (void)state;
    for (size_t step = 1; step < 8; step++) {
        tw_bridge_tool_calls c;
        char *passed = stream_through("Hello <b>world</b>, no calls <tool here.", step, &c);
        /* Everything but a held-back possible tag start has gone through. */
        char whole[128];
        snprintf(whole, sizeof whole, "%s%s", passed, c.content ? c.content : "");
        assert_string_equal(whole, "Hello <b>world</b>, no calls <tool here.");
        assert_int_equal(c.n, 0);
        free(passed);
        tw_bridge_tool_calls_free(&c);
    }
}

static void test_stream_holds_calls_back(void **state)
{
    (void)state;
    for (size_t step = 1; step < 13; step++) {
        tw_bridge_tool_calls c;
        char *passed = stream_through(
            "Checking.<tool_call>{\"name\":\"f\",\"arguments\":{\"a\":1}}</tool_call>", step, &c);
        assert_string_equal(passed, "Checking.");
        assert_int_equal(c.n, 1);
        assert_string_equal(c.items[0].name, "f");
        assert_null(c.content);
        free(passed);
        tw_bridge_tool_calls_free(&c);
    }
}

static void test_stream_llama_json_and_false_alarm(void **state)
{
    (void)state;
    tw_bridge_tool_calls c;
    char *passed = stream_through(" {\"name\":\"f\",\"parameters\":{}}", 3, &c);
    assert_string_equal(passed, "");
    assert_int_equal(c.n, 1);
    free(passed);
    tw_bridge_tool_calls_free(&c);

    /* JSON that is not a call comes out whole at the end. */
    passed = stream_through("{\"answer\": 42}", 4, &c);
    assert_string_equal(passed, "");
    assert_int_equal(c.n, 0);
    assert_string_equal(c.content, "{\"answer\": 42}");
    free(passed);
    tw_bridge_tool_calls_free(&c);
}

/* Mistral's array of calls, after [TOOL_CALLS] or bare (a detokenizer
 * that skips control tokens leaves the tag out); whole and streamed; an
 * array that holds anything but calls is an answer. */
static void test_mistral_calls(void **state)
{
    (void)state;
    const char *forms[] = {
        "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}, \"id\": \"abcdefghi\"}, "
        "{\"name\": \"b\", \"arguments\": {}}]",
        " [{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\": \"b\", \"arguments\": {}}]"};
    for (size_t i = 0; i < 2; i++) {
        tw_bridge_tool_calls c;
        parse(forms[i], &c);
        assert_int_equal(c.n, 2);
        assert_string_equal(c.items[0].name, "a");
        assert_string_equal(c.items[0].arguments, "{\"x\":1}");
        assert_string_equal(c.items[1].name, "b");
        assert_null(c.content);
        tw_bridge_tool_calls_free(&c);
        char *passed = stream_through(forms[i], 5, &c);
        assert_string_equal(passed, "");
        assert_int_equal(c.n, 2);
        free(passed);
        tw_bridge_tool_calls_free(&c);
    }
    tw_bridge_tool_calls c;
    parse("[{\"name\": \"a\", \"arguments\": {}}, 3]", &c);
    assert_int_equal(c.n, 0);
    assert_string_equal(c.content, "[{\"name\": \"a\", \"arguments\": {}}, 3]");
    tw_bridge_tool_calls_free(&c);
    parse("[1, 2, 3]", &c);
    assert_int_equal(c.n, 0);
    assert_string_equal(c.content, "[1, 2, 3]");
    tw_bridge_tool_calls_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hermes_single_call),
        cmocka_unit_test(test_hermes_prose_and_two_calls),
        cmocka_unit_test(test_hermes_unclosed_last_block),
        cmocka_unit_test(test_hermes_arguments_as_json_string),
        cmocka_unit_test(test_broken_markup_stays_content),
        cmocka_unit_test(test_llama_json_calls),
        cmocka_unit_test(test_llama_json_all_or_nothing),
        cmocka_unit_test(test_deep_nesting_is_refused_not_crashed),
        cmocka_unit_test(test_stream_plain_text_passes_through),
        cmocka_unit_test(test_stream_holds_calls_back),
        cmocka_unit_test(test_stream_llama_json_and_false_alarm),
        cmocka_unit_test(test_mistral_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
