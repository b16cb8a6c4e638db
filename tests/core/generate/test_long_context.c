/* The long-context thinking rule through its interface, with scripted
 * prompts: which conversations turn thinking on, and which keep the
 * caller's choice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/long_context.h"

/* A context of n characters: sentences of a made-up report. */
static char *filler(size_t n)
{
    static const char s[] = "The quarterly report lists revenue by region and product line. ";
    char *p = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        p[i] = s[i % (sizeof s - 1)];
    p[n] = 0;
    return p;
}

static tw_think_mode chat2(const tw_long_context_rule *rule, tw_think_mode req,
                           const char *system, const char *user)
{
    tw_chat_message m[2] = {{.role = "system", .content = system},
                            {.role = "user", .content = user}};
    return tw_long_context_decide_chat(rule, req, m, 2);
}

static void test_question_detection(void **state)
{
    (void)state;
    const char *yes[] = {
        "What was the revenue in Q3?",
        "  which region grew fastest  ",      /* question word, no mark */
        "Summarise the table for me?",        /* question mark */
        "Is the total above ten million",
        "Pourquoi le chiffre a-t-il baissé ?",
        "Warum ist der Umsatz gesunken",
        "¿Cuál fue el ingreso total",
        "Qual foi a receita total",
        "Почему выручка упала",
        "收入是多少？",
        "为什么收入下降了",
        "收入下降了吗",
        "なぜ売上が減ったのですか",
        "売上は減りましたか。",
        "왜 매출이 줄었나요",
        "Wat was de omzet",
    };
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        if (!tw_text_is_question(yes[i], strlen(yes[i])))
            fail_msg("not taken for a question: \"%s\"", yes[i]);
    const char *no[] = {
        "Summarise the table.",
        "Translate the report into French.",
        "Write a haiku about revenue",
        "Whatever happens, keep it short.", /* "what" only as part of a word */
        "",
        "   \n  ",
        "Fasse den Bericht zusammen.",
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        if (tw_text_is_question(no[i], strlen(no[i])))
            fail_msg("taken for a question: \"%s\"", no[i]);
    assert_false(tw_text_is_question(NULL, 0));
    /* Invalid UTF-8 is not a crash, and a trailing '?' still counts. */
    const char bad[] = "\xff\xfe\xc3 ok?";
    assert_true(tw_text_is_question(bad, sizeof bad - 1));
}

static void test_char_counting(void **state)
{
    (void)state;
    assert_int_equal(tw_text_chars("abc", 3), 3);
    assert_int_equal(tw_text_chars("é中?", strlen("é中?")), 3);
    assert_int_equal(tw_text_chars(NULL, 5), 0);
}

static void test_long_context_short_question_turns_thinking_on(void **state)
{
    (void)state;
    char *ctx = filler(3500);
    assert_int_equal(chat2(NULL, TW_THINK_DEFAULT, ctx, "What was the revenue in Q3?"),
                     TW_THINK_ON);
    /* The caller's explicit choice always stands. */
    assert_int_equal(chat2(NULL, TW_THINK_OFF, ctx, "What was the revenue in Q3?"),
                     TW_THINK_OFF);
    assert_int_equal(chat2(NULL, TW_THINK_ON, ctx, "Summarise."), TW_THINK_ON);
    /* Not a question, or not short: the default stays. */
    assert_int_equal(chat2(NULL, TW_THINK_DEFAULT, ctx, "Summarise the report."),
                     TW_THINK_DEFAULT);
    char *long_q = filler(260);
    long_q[259] = '?';
    assert_int_equal(chat2(NULL, TW_THINK_DEFAULT, ctx, long_q), TW_THINK_DEFAULT);
    free(long_q);
    free(ctx);
}

static void test_thresholds_are_strict_and_in_characters(void **state)
{
    (void)state;
    /* Exactly 3000 characters is not "more than 3000". */
    char *ctx = filler(3000);
    assert_int_equal(chat2(NULL, TW_THINK_DEFAULT, ctx, "Why?"), TW_THINK_DEFAULT);
    free(ctx);
    ctx = filler(3001);
    assert_int_equal(chat2(NULL, TW_THINK_DEFAULT, ctx, "Why?"), TW_THINK_ON);
    free(ctx);
    /* 1200 three-byte characters are 3600 bytes but only 1200 characters. */
    size_t n = 1200;
    char *cjk = malloc(3 * n + 1);
    for (size_t i = 0; i < n; i++)
        memcpy(cjk + 3 * i, "\xe4\xb8\xad", 3); /* U+4E2D */
    cjk[3 * n] = 0;
    assert_int_equal(chat2(NULL, TW_THINK_DEFAULT, cjk, "为什么？"), TW_THINK_DEFAULT);
    free(cjk);
    /* A question of 199 characters is short, 200 is not. */
    ctx = filler(4000);
    char q[256];
    memset(q, 'a', sizeof q);
    memcpy(q, "Why ", 4);
    q[198] = '?';
    q[199] = 0;
    assert_int_equal(chat2(NULL, TW_THINK_DEFAULT, ctx, q), TW_THINK_ON);
    q[199] = '?';
    q[200] = 0;
    assert_int_equal(chat2(NULL, TW_THINK_DEFAULT, ctx, q), TW_THINK_DEFAULT);
    free(ctx);
}

static void test_configurable_and_off_switch(void **state)
{
    (void)state;
    char *ctx = filler(600);
    tw_long_context_rule rule;
    tw_long_context_rule_init(&rule);
    assert_true(rule.enabled);
    assert_int_equal(rule.context_chars, 3000);
    assert_int_equal(rule.question_chars, 200);
    assert_int_equal(chat2(&rule, TW_THINK_DEFAULT, ctx, "Who?"), TW_THINK_DEFAULT);
    rule.context_chars = 500;
    assert_int_equal(chat2(&rule, TW_THINK_DEFAULT, ctx, "Who?"), TW_THINK_ON);
    rule.question_chars = 4; /* "Who?" has 4: no longer short */
    assert_int_equal(chat2(&rule, TW_THINK_DEFAULT, ctx, "Who?"), TW_THINK_DEFAULT);
    rule.question_chars = 200;
    rule.enabled = false;
    assert_int_equal(chat2(&rule, TW_THINK_DEFAULT, ctx, "Who?"), TW_THINK_DEFAULT);
    free(ctx);
    /* The scalar form gives the same verdicts. */
    tw_long_context_rule_init(&rule);
    assert_int_equal(tw_long_context_decide(&rule, TW_THINK_DEFAULT, 3001, "Who?", 4),
                     TW_THINK_ON);
    assert_int_equal(tw_long_context_decide(&rule, TW_THINK_DEFAULT, 3000, "Who?", 4),
                     TW_THINK_DEFAULT);
    assert_int_equal(tw_long_context_decide(&rule, TW_THINK_DEFAULT, 5000, "", 0),
                     TW_THINK_DEFAULT);
}

static void test_document_and_question_in_one_message(void **state)
{
    (void)state;
    char *doc = filler(3200);
    size_t n = strlen(doc);
    const char *tail = "\n\n  \nWhat does the report say about Europe?\n";
    char *msg = malloc(n + strlen(tail) + 1);
    memcpy(msg, doc, n);
    strcpy(msg + n, tail);
    size_t off;
    size_t ctx = tw_long_context_split(msg, strlen(msg), &off);
    assert_true(ctx >= 3200);
    assert_string_equal(msg + off, "What does the report say about Europe?\n");
    /* No system message at all: the document in the user turn is the context. */
    tw_chat_message one = {.role = "user", .content = msg};
    assert_int_equal(tw_long_context_decide_chat(NULL, TW_THINK_DEFAULT, &one, 1), TW_THINK_ON);
    /* One paragraph is all question (and far too long to be a short one). */
    assert_int_equal(tw_long_context_split(doc, n, &off), 0);
    assert_int_equal(off, 0);
    one.content = doc;
    assert_int_equal(tw_long_context_decide_chat(NULL, TW_THINK_DEFAULT, &one, 1),
                     TW_THINK_DEFAULT);
    free(msg);
    free(doc);
}

static void test_conversation_shapes(void **state)
{
    (void)state;
    char *ctx = filler(2000);
    /* Earlier turns count as context; the question is the last user turn. */
    tw_chat_message m[4] = {
        {.role = "system", .content = ctx},
        {.role = "user", .content = ctx},
        {.role = "assistant", .content = "Noted.", .reasoning_content = "ok"},
        {.role = "user", .content = "And in Asia?"},
    };
    assert_int_equal(tw_long_context_decide_chat(NULL, TW_THINK_DEFAULT, m, 4), TW_THINK_ON);
    /* Only the system prompt: too short alone. */
    assert_int_equal(tw_long_context_decide_chat(NULL, TW_THINK_DEFAULT, m + 2, 2),
                     TW_THINK_DEFAULT);
    /* No user message, or none at all: unchanged. */
    assert_int_equal(tw_long_context_decide_chat(NULL, TW_THINK_DEFAULT, m, 1),
                     TW_THINK_DEFAULT);
    assert_int_equal(tw_long_context_decide_chat(NULL, TW_THINK_DEFAULT, NULL, 3),
                     TW_THINK_DEFAULT);
    /* A user message without content is skipped for the one before it. */
    tw_chat_message k[3] = {{.role = "system", .content = ctx},
                            {.role = "user", .content = "Where is it sold?"},
                            {.role = "user", .content = NULL}};
    assert_int_equal(tw_long_context_decide_chat(NULL, TW_THINK_DEFAULT, k, 3),
                     TW_THINK_DEFAULT); /* 2000 < 3000 */
    char *big = filler(3100);
    k[0].content = big;
    assert_int_equal(tw_long_context_decide_chat(NULL, TW_THINK_DEFAULT, k, 3), TW_THINK_ON);
    free(big);
    free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_question_detection),
        cmocka_unit_test(test_char_counting),
        cmocka_unit_test(test_long_context_short_question_turns_thinking_on),
        cmocka_unit_test(test_thresholds_are_strict_and_in_characters),
        cmocka_unit_test(test_configurable_and_off_switch),
        cmocka_unit_test(test_document_and_question_in_one_message),
        cmocka_unit_test(test_conversation_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
