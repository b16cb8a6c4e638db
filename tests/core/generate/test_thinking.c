#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "test_support.h"
#include "tw/thinking.h"

enum { OPEN = 1000, CLOSE = 1001 };

static tw_thinking *make(const tw_thinking_opts *o)
{
    tw_thinking *t = NULL;
    tw_err err;
    assert_int_equal(tw_thinking_create(o, OPEN, CLOSE, 1u << 16, &t, &err), TW_OK);
    tw_thinking_reset(t, false);
    return t;
}

static tw_thinking *make_default(void)
{
    tw_thinking_opts o;
    tw_thinking_opts_init(&o);
    return make(&o);
}

static void test_roles_and_counts(void **state)
{
    (void)state;
    tw_thinking *t = make_default();
    assert_int_equal(tw_thinking_step(t, 5, NULL), TW_ROLE_CONTENT);
    assert_int_equal(tw_thinking_step(t, OPEN, NULL), TW_ROLE_THINK_OPEN);
    assert_true(tw_thinking_inside(t));
    assert_int_equal(tw_thinking_step(t, 6, NULL), TW_ROLE_REASONING);
    assert_int_equal(tw_thinking_step(t, 7, NULL), TW_ROLE_REASONING);
    assert_int_equal(tw_thinking_step(t, CLOSE, NULL), TW_ROLE_THINK_CLOSE);
    assert_false(tw_thinking_inside(t));
    assert_int_equal(tw_thinking_step(t, 8, NULL), TW_ROLE_CONTENT);
    /* One block per response: a second tag is just content. */
    assert_int_equal(tw_thinking_step(t, OPEN, NULL), TW_ROLE_CONTENT);
    assert_int_equal(tw_thinking_reasoning_tokens(t), 2);
    assert_int_equal(tw_thinking_forced(t), TW_FORCE_NONE);

    /* A prompt that leaves the block open starts inside it. */
    const uint32_t prompt[] = {3, OPEN, 4};
    assert_true(tw_thinking_prompt_state(prompt, 3, OPEN, CLOSE));
    const uint32_t closed[] = {OPEN, 4, CLOSE, 9};
    assert_false(tw_thinking_prompt_state(closed, 4, OPEN, CLOSE));
    tw_thinking_reset(t, true);
    assert_int_equal(tw_thinking_step(t, 6, NULL), TW_ROLE_REASONING);
    assert_int_equal(tw_thinking_step(t, CLOSE, NULL), TW_ROLE_THINK_CLOSE);
    assert_int_equal(tw_thinking_step(t, 6, NULL), TW_ROLE_CONTENT);
    tw_thinking_destroy(t);
}

static void test_budget_closes_block(void **state)
{
    (void)state;
    tw_thinking_opts o;
    tw_thinking_opts_init(&o);
    o.max_thinking_tokens = 5;
    tw_thinking *t = make(&o);
    tw_thinking_reset(t, true);
    tw_force_close f;
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(tw_thinking_step(t, 10 + i, &f), TW_ROLE_REASONING);
        assert_int_equal(f, TW_FORCE_NONE);
    }
    assert_int_equal(tw_thinking_step(t, 20, &f), TW_ROLE_REASONING);
    assert_int_equal(f, TW_FORCE_BUDGET);
    /* The caller injects </think>: the answer follows as content. */
    assert_int_equal(tw_thinking_step(t, CLOSE, &f), TW_ROLE_THINK_CLOSE);
    assert_int_equal(f, TW_FORCE_NONE);
    assert_int_equal(tw_thinking_step(t, 30, &f), TW_ROLE_CONTENT);
    assert_int_equal(tw_thinking_forced(t), TW_FORCE_BUDGET);
    assert_int_equal(tw_thinking_reasoning_tokens(t), 5);
    tw_thinking_destroy(t);
}

/* Feeds ids[0..n) as reasoning; returns the index of the token that raised a
 * loop close, or -1. */
static long feed_until_loop(tw_thinking *t, const uint32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        tw_force_close f;
        assert_int_equal(tw_thinking_step(t, ids[i], &f), TW_ROLE_REASONING);
        if (f == TW_FORCE_LOOP)
            return (long)i;
        assert_int_equal(f, TW_FORCE_NONE);
    }
    return -1;
}

static void test_ngram_loop_caught_on_third_repeat(void **state)
{
    (void)state;
    tw_thinking *t = make_default();
    tw_thinking_reset(t, true);
    uint32_t ids[200];
    size_t n = 0;
    for (uint32_t i = 0; i < 100; i++)
        ids[n++] = 2000 + i; /* distinct lead-in */
    for (int r = 0; r < 4; r++)
        for (uint32_t k = 0; k < 6; k++)
            ids[n++] = 50 + k;
    /* The third copy of the 6-gram ends at index 100 + 17. */
    assert_int_equal(feed_until_loop(t, ids, n), 117);
    assert_int_equal(tw_thinking_forced(t), TW_FORCE_LOOP);
    tw_thinking_destroy(t);

    /* A single token repeated is a loop too. */
    t = make_default();
    tw_thinking_reset(t, true);
    for (size_t i = 0; i < 40; i++)
        ids[i] = 77;
    long at = feed_until_loop(t, ids, 40);
    assert_true(at >= 0 && at < 40);
    tw_thinking_destroy(t);
}

static void test_long_block_caught_on_fourth_repeat(void **state)
{
    (void)state;
    tw_thinking *t = make_default();
    tw_thinking_reset(t, true);
    /* A 30-token passage repeated with 40 fresh tokens between copies: too
     * far apart for the n-gram window, so only the block rule can see it. */
    static uint32_t ids[400];
    size_t n = 0;
    uint32_t fresh = 5000;
    long fourth_end = -1;
    for (int copy = 0; copy < 5; copy++) {
        for (uint32_t k = 0; k < 40; k++)
            ids[n++] = fresh++;
        for (uint32_t k = 0; k < 30; k++)
            ids[n++] = 100 + k;
        if (copy == 3)
            fourth_end = (long)n - 1;
    }
    assert_int_equal(feed_until_loop(t, ids, n), fourth_end);
    tw_thinking_destroy(t);
}

static void test_normal_text_not_flagged(void **state)
{
    (void)state;
    tw_thinking_opts o;
    tw_thinking_opts_init(&o);
    o.max_thinking_tokens = 100000;
    tw_thinking *t = make(&o);
    tw_thinking_reset(t, true);
    /* Text-like statistics: a third of the tokens from ten very common
     * words, the rest from a vocabulary of a few thousand. */
    tw_test_rng rng = {424242};
    for (int i = 0; i < 20000; i++) {
        uint64_t r = tw_test_rand_u64(&rng);
        uint32_t id = (r % 3 == 0) ? (uint32_t)(r >> 8) % 10 : 10 + (uint32_t)((r >> 8) % 4000);
        tw_force_close f;
        tw_thinking_step(t, id, &f);
        if (f != TW_FORCE_NONE)
            fail_msg("flagged at token %d", i);
    }
    tw_thinking_destroy(t);
}

static void test_loop_detection_can_be_disabled(void **state)
{
    (void)state;
    tw_thinking_opts o;
    tw_thinking_opts_init(&o);
    o.loop_detection = false;
    o.max_thinking_tokens = 50;
    tw_thinking *t = make(&o);
    tw_thinking_reset(t, true);
    tw_force_close f = TW_FORCE_NONE;
    int i = 0;
    while (f == TW_FORCE_NONE && i < 100) {
        tw_thinking_step(t, 7, &f);
        i++;
    }
    assert_int_equal(f, TW_FORCE_BUDGET);
    assert_int_equal(i, 50);
    tw_thinking_destroy(t);
}

static void test_transition_typing(void **state)
{
    (void)state;
    struct {
        const char *prompt;
        tw_transition_kind kind;
    } cases[] = {
        {"List three fruits. Answer in JSON with a key \"fruits\".", TW_TRANSITION_JSON},
        {"Write Python code that returns JSON for this record", TW_TRANSITION_JSON},
        {"Translate the following sentence: the cat sleeps", TW_TRANSITION_TRANSLATION},
        {"How do you say good morning in French?", TW_TRANSITION_TRANSLATION},
        {"Write a function that reverses a linked list.", TW_TRANSITION_CODE},
        {"Fix this:\n```\nint main() {}\n```", TW_TRANSITION_CODE},
        {"Solve for x: 3x + 5 = 11", TW_TRANSITION_MATH},
        {"What is 17 * 23?", TW_TRANSITION_MATH},
        {"Tell me a story about a lighthouse keeper.", TW_TRANSITION_PLAIN},
        {"", TW_TRANSITION_PLAIN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tw_transition_kind k = tw_thinking_classify_prompt(cases[i].prompt, strlen(cases[i].prompt));
        if (k != cases[i].kind)
            fail_msg("\"%s\": got %s, want %s", cases[i].prompt, tw_transition_kind_name(k),
                     tw_transition_kind_name(cases[i].kind));
    }
    assert_string_equal(tw_transition_text(TW_TRANSITION_JSON),
                        "\n\n**Final JSON:**\n\n```json\n");
    assert_non_null(strstr(tw_transition_text(TW_TRANSITION_CODE), "**Final Code:**"));
    assert_non_null(strstr(tw_transition_text(TW_TRANSITION_TRANSLATION),
                           "**Final Translation:**"));
    assert_non_null(strstr(tw_transition_text(TW_TRANSITION_MATH), "**Final Answer:**"));
    assert_null(strstr(tw_transition_text(TW_TRANSITION_PLAIN), "**"));
    /* Invalid UTF-8 in a prompt is classified, not rejected. */
    assert_int_equal(tw_thinking_classify_prompt("\xff\xfe json", 7), TW_TRANSITION_JSON);
}

static void check_split(const char *text, bool inside, const char *pre, const char *reasoning,
                        const char *post)
{
    tw_think_split s;
    tw_thinking_split_text(text, strlen(text), inside, &s);
    assert_int_equal(s.pre_len, strlen(pre));
    assert_memory_equal(text + s.pre_off, pre, s.pre_len);
    assert_int_equal(s.reasoning_len, strlen(reasoning));
    assert_memory_equal(text + s.reasoning_off, reasoning, s.reasoning_len);
    assert_int_equal(s.post_len, strlen(post));
    assert_memory_equal(text + s.post_off, post, s.post_len);
}

static void test_split_whole_text(void **state)
{
    (void)state;
    check_split("<think>\nhmm\n</think>\n\nAnswer", false, "", "\nhmm\n", "\n\nAnswer");
    check_split("a<think>b</think>c", false, "a", "b", "c");
    check_split("no tags here", false, "no tags here", "", "");
    check_split("reasoning</think>answer", true, "", "reasoning", "answer");
    check_split("<think>never closed", false, "", "never closed", "");
}

static void test_bad_options(void **state)
{
    (void)state;
    tw_thinking_opts o;
    tw_err err;
    tw_thinking_opts_init(&o);
    assert_int_equal(tw_thinking_opts_validate(&o, &err), TW_OK);
    o.max_thinking_tokens = 0;
    assert_int_equal(tw_thinking_opts_validate(&o, &err), TW_INVALID_ARGUMENT);
    tw_thinking_opts_init(&o);
    o.ngram_window = 3;
    assert_int_equal(tw_thinking_opts_validate(&o, &err), TW_INVALID_ARGUMENT);
    tw_thinking_opts_init(&o);
    o.enable_thinking = (tw_think_mode)7;
    assert_int_equal(tw_thinking_opts_validate(&o, &err), TW_INVALID_ARGUMENT);
    tw_thinking_opts_init(&o);
    tw_thinking *t = NULL;
    assert_int_equal(tw_thinking_create(&o, 5, 5, 100, &t, &err), TW_INVALID_ARGUMENT);
    assert_null(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roles_and_counts),
        cmocka_unit_test(test_budget_closes_block),
        cmocka_unit_test(test_ngram_loop_caught_on_third_repeat),
        cmocka_unit_test(test_long_block_caught_on_fourth_repeat),
        cmocka_unit_test(test_normal_text_not_flagged),
        cmocka_unit_test(test_loop_detection_can_be_disabled),
        cmocka_unit_test(test_transition_typing),
        cmocka_unit_test(test_split_whole_text),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
