/* JSON answers on the shipped model: sampled at temperature 1, every choice
 * of a schema-bound request ends by itself with a document that a strict
 * parser reads and that fits the schema, which the same request without
 * the format does not give, and strings keep to their patterns; "any JSON object" gives objects;
 * schemas the grammar does not understand, unknown formats and a JSON answer with a forced tool
 * call are refused at submit; speculation keeps to the grammar.
 *
 *   test_json_answer MODEL.gguf */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/engine.h"

#define CHOICES 4

typedef struct answer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char text[CHOICES][8192];
    char reasoning[8192];
    tw_finish_reason finish[CHOICES];
    bool final;
    tw_status error;
    tw_usage usage;
} answer;

static const char *g_model;
static tw_engine *g_engine;

static const char *const g_schema =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":20},"
    "\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":"
    "\"string\",\"maxLength\":10},\"maxItems\":3}},\"required\":[\"name\",\"age\",\"tags\"],"
    "\"additionalProperties\":false}";

static void on_chunk(void *user, const tw_gen_chunk *ch)
{
    answer *a = user;
    pthread_mutex_lock(&a->mu);
    if (ch->index < CHOICES) {
        char *t = a->text[ch->index];
        size_t have = strlen(t);
        if (have + ch->text_len < sizeof a->text[0])
            memcpy(t + have, ch->text_delta, ch->text_len), t[have + ch->text_len] = '\0';
        if (ch->index == 0 && strlen(a->reasoning) + ch->reasoning_len < sizeof a->reasoning)
            strncat(a->reasoning, ch->reasoning_delta, ch->reasoning_len);
        if (ch->finish_reason != TW_FINISH_NONE)
            a->finish[ch->index] = ch->finish_reason;
    }
    if (ch->final) {
        a->final = true;
        a->error = ch->error;
        a->usage = *ch->usage;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
}

static const tw_chat_message g_msgs[] = {
    {.role = "user", .content = "Write a JSON record for a user named Ada, aged 36."}};

static void chat_request(tw_gen_request *r, tw_output_format kind, const char *schema)
{
    tw_gen_request_init(r);
    r->prompt_kind = TW_PROMPT_CHAT;
    r->chat.messages = g_msgs;
    r->chat.n_messages = 1;
    r->sampling.temperature = 1.0f;
    r->sampling.has_seed = true;
    r->sampling.seed = 11;
    r->stop.max_tokens = 1200;
    r->n = CHOICES;
    r->thinking.enable_thinking = TW_THINK_OFF;
    r->format.kind = kind;
    r->format.json_schema = schema;
    r->format.json_schema_len = schema ? strlen(schema) : 0;
}

static answer *run(const tw_gen_request *r)
{
    answer *a = calloc(1, sizeof *a);
    assert_non_null(a);
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    tw_gen_callbacks cb = {.on_chunk = on_chunk};
    tw_err err;
    uint64_t id;
    if (tw_engine_submit(g_engine, r, &cb, a, &id, &err) != TW_OK)
        fail_msg("submit: %s", err.msg);
    bool done = tw_test_wait_done(&a->mu, &a->cv, &a->final, 120);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    assert_true(done);
    assert_int_equal(a->error, TW_OK);
    return a;
}

/* The answer is an object with exactly the schema's keys, typed and
 * bounded as it says. */
static bool fits(const char *text)
{
    json_t *v = json_loads(text, 0, NULL);
    bool ok = json_is_object(v) && json_object_size(v) == 3;
    const json_t *name = json_object_get(v, "name"), *age = json_object_get(v, "age"),
                 *tags = json_object_get(v, "tags");
    ok = ok && json_is_string(name) && json_is_integer(age) && json_is_array(tags) &&
         json_array_size(tags) <= 3;
    for (size_t i = 0; ok && i < json_array_size(tags); i++)
        ok = json_is_string(json_array_get(tags, i));
    json_decref(v);
    return ok;
}

static void test_schema_answers(void **state)
{
    (void)state;
    tw_gen_request r;
    chat_request(&r, TW_OUTPUT_JSON, g_schema);
    answer *a = run(&r);
    for (int i = 0; i < CHOICES; i++) {
        /* bounded strings, items and numbers: every document ends */
        if (a->finish[i] != TW_FINISH_STOP || !fits(a->text[i]))
            fail_msg("choice %d (finish %d) does not fit: %s", i, a->finish[i], a->text[i]);
    }
    /* sampling still chose: the choices differ */
    assert_true(strcmp(a->text[0], a->text[1]) != 0 || strcmp(a->text[1], a->text[2]) != 0);
    /* the choices' masks were made on the pool, side by side; alone (choice
     * i is seed + i) each gives the same answer, its mask made inline */
    for (uint64_t i = 0; i < CHOICES; i += 3) {
        tw_gen_request one;
        chat_request(&one, TW_OUTPUT_JSON, g_schema);
        one.n = 1;
        one.sampling.seed = r.sampling.seed + i;
        answer *b = run(&one);
        assert_string_equal(b->text[0], a->text[i]);
        free(b);
    }
    free(a);

    /* the same request as free text does not give such documents */
    chat_request(&r, TW_OUTPUT_TEXT, NULL);
    r.stop.max_tokens = 200;
    a = run(&r);
    int fitting = 0;
    for (int i = 0; i < CHOICES; i++)
        fitting += fits(a->text[i]);
    assert_true(fitting < CHOICES);
    free(a);
}

/* Strings held to patterns, sampled at temperature 1: every choice ends
 * with a document whose strings glibc's POSIX regex engine finds
 * matching (the grammar asks PCRE2). */
static void test_pattern_answers(void **state)
{
    (void)state;
    static const char *const schema =
        "{\"type\":\"object\",\"properties\":{\"code\":{\"type\":\"string\",\"pattern\":"
        "\"^[A-Z]{3}-[0-9]{2,4}$\"},\"city\":{\"type\":\"string\",\"pattern\":\"^[A-Z][a-z]+$\","
        "\"maxLength\":12}},\"required\":[\"code\",\"city\"],\"additionalProperties\":false}";
    regex_t code, city;
    assert_int_equal(regcomp(&code, "^[A-Z]{3}-[0-9]{2,4}$", REG_EXTENDED | REG_NOSUB), 0);
    assert_int_equal(regcomp(&city, "^[A-Z][a-z]+$", REG_EXTENDED | REG_NOSUB), 0);
    tw_gen_request r;
    chat_request(&r, TW_OUTPUT_JSON, schema);
    answer *a = run(&r);
    for (int i = 0; i < CHOICES; i++) {
        json_t *v = json_loads(a->text[i], 0, NULL);
        const char *c = json_string_value(json_object_get(v, "code"));
        const char *t = json_string_value(json_object_get(v, "city"));
        if (a->finish[i] != TW_FINISH_STOP || !c || !t || regexec(&code, c, 0, NULL, 0) ||
            regexec(&city, t, 0, NULL, 0) || strlen(t) > 12)
            fail_msg("choice %d (finish %d) does not fit: %s", i, a->finish[i], a->text[i]);
        json_decref(v);
    }
    free(a);
    regfree(&code);
    regfree(&city);
}

static void test_any_object(void **state)
{
    (void)state;
    tw_gen_request r;
    chat_request(&r, TW_OUTPUT_JSON, NULL);
    r.stop.max_tokens = 400;
    r.sampling.temperature = 0.7f;
    answer *a = run(&r);
    int whole = 0;
    for (int i = 0; i < CHOICES; i++) {
        if (a->finish[i] == TW_FINISH_LENGTH)
            continue; /* open objects can go on past the budget */
        assert_int_equal(a->finish[i], TW_FINISH_STOP);
        json_error_t je;
        json_t *v = json_loads(a->text[i], 0, &je);
        if (!json_is_object(v))
            fail_msg("choice %d is not a JSON object (%s): %s", i, je.text, a->text[i]);
        json_decref(v);
        whole++;
    }
    assert_true(whole > 0);
    free(a);

    /* speculation keeps to the grammar: a text prompt that repeats itself,
     * so prompt lookup drafts; greedy answers are the same with and
     * without it, and sampled ones are still documents */
    const char *echo = "{\"name\": \"ab\", \"size\": 3, \"ok\": true}\n{\"name\": \"ab\", "
                       "\"size\": 3, \"ok\": true}\n{\"name\": \"ab\", \"size\": 3, \"ok\": "
                       "true}\n";
    answer *plain = NULL;
    for (int spec = 0; spec < 3; spec++) {
        tw_gen_request_init(&r);
        r.prompt_kind = TW_PROMPT_TEXT;
        r.prompt_text = echo;
        r.prompt_text_len = strlen(echo);
        r.sampling.temperature = spec == 2 ? 1.0f : 0.0f;
        r.sampling.has_seed = true;
        r.sampling.seed = 3;
        r.speculative.mode = spec ? TW_SPEC_LOOKUP : TW_SPEC_OFF;
        r.stop.max_tokens = 96;
        r.format.kind = TW_OUTPUT_JSON;
        r.format.json_schema = g_schema;
        r.format.json_schema_len = strlen(g_schema);
        a = run(&r);
        if (a->finish[0] == TW_FINISH_STOP && !fits(a->text[0]))
            fail_msg("speculating %d: the answer does not fit: %s", spec, a->text[0]);
        if (spec == 0) {
            plain = a;
            assert_int_equal(a->usage.drafted_tokens, 0);
            continue;
        }
        assert_true(a->usage.drafted_tokens > 0);
        if (spec == 1)
            assert_string_equal(a->text[0], plain->text[0]);
        free(a);
    }
    free(plain);
}

/* Reasoning is free text; the answer after the block is the document.
 * The shipped model's template leaves the block for the model to open,
 * which the mask still lets it do before the answer starts; a small budget
 * closes the block by force, and the transition the controller would
 * write after it (prose) is left out of a JSON answer. */
static void test_after_thinking(void **state)
{
    (void)state;
    tw_gen_request r;
    chat_request(&r, TW_OUTPUT_JSON, g_schema);
    r.thinking.enable_thinking = TW_THINK_ON;
    r.thinking.max_thinking_tokens = 24;
    r.n = 2;
    answer *a = run(&r);
    assert_true(strlen(a->reasoning) > 0);
    assert_true(a->usage.reasoning_tokens >= 24);
    for (int i = 0; i < 2; i++)
        if (a->finish[i] != TW_FINISH_STOP || !fits(a->text[i]))
            fail_msg("choice %d after thinking (finish %d): %s", i, a->finish[i], a->text[i]);
    free(a);
}

/* A choice answer is exactly one of the texts, sampled like any other. */
static void test_choice_answers(void **state)
{
    (void)state;
    static const char *const choices[] = {"positive", "negative", "neutral", "neutral-ish"};
    tw_gen_request r;
    chat_request(&r, TW_OUTPUT_CHOICE, NULL);
    r.format.choices = choices;
    r.format.n_choices = 4;
    r.stop.max_tokens = 64;
    answer *a = run(&r);
    for (int i = 0; i < CHOICES; i++) {
        bool one = false;
        for (int k = 0; k < 4; k++)
            one = one || strcmp(a->text[i], choices[k]) == 0;
        if (!one || a->finish[i] != TW_FINISH_STOP)
            fail_msg("choice %d (finish %d): \"%s\" is not one of the texts", i, a->finish[i],
                     a->text[i]);
    }
    free(a);
    /* free text does not give them */
    chat_request(&r, TW_OUTPUT_TEXT, NULL);
    r.stop.max_tokens = 16;
    a = run(&r);
    for (int i = 0; i < CHOICES; i++)
        for (int k = 0; k < 4; k++)
            assert_string_not_equal(a->text[i], choices[k]);
    free(a);
}

static void refused(tw_gen_request *r, tw_status want, const char *says)
{
    tw_gen_callbacks cb = {.on_chunk = on_chunk};
    tw_err err = {0};
    uint64_t id;
    answer a;
    tw_status st = tw_engine_submit(g_engine, r, &cb, &a, &id, &err);
    if (st != want || !strstr(err.msg, says))
        fail_msg("submit gave %d \"%s\"; wanted %d with \"%s\"", st, err.msg, want, says);
}

static void test_refusals(void **state)
{
    (void)state;
    tw_gen_request r;
    chat_request(&r, TW_OUTPUT_JSON, "{\"type\":\"object\",\"dependentRequired\":{}}");
    refused(&r, TW_INVALID_ARGUMENT, "unsupported keyword \"dependentRequired\"");
    chat_request(&r, TW_OUTPUT_JSON, "{\"type\":");
    refused(&r, TW_INVALID_ARGUMENT, "json_schema: not JSON");
    chat_request(&r, TW_OUTPUT_CHOICE, NULL); /* no choices */
    refused(&r, TW_INVALID_ARGUMENT, "choices: 0 given");
    chat_request(&r, (tw_output_format)7, NULL);
    refused(&r, TW_INVALID_ARGUMENT, "output format 7 unknown");

    /* a forced tool call writes its own opening */
    static const tw_tool tools[] = {{.name = "f", .parameters_json = "{\"type\":\"object\"}"}};
    TW_REQUIRE_SHARED(dir);
    char path[4096];
    tw_test_shared_path(path, sizeof path, "chat/Qwen-Qwen2.5-7B-Instruct.jinja");
    char *qwen = tw_test_read_file(path, NULL);
    assert_non_null(qwen);
    tw_engine_opts o;
    tw_engine_opts_init(&o);
    o.threads = 1;
    o.max_context = 512;
    tw_engine *e;
    tw_err err;
    assert_int_equal(tw_engine_create(&o, &e, &err), TW_OK);
    tw_load_opts lo;
    tw_load_opts_init(&lo);
    lo.chat_template = qwen;
    assert_int_equal(tw_engine_load_model(e, g_model, NULL, &lo, NULL, &err), TW_OK);
    chat_request(&r, TW_OUTPUT_JSON, NULL);
    r.chat.tools = tools;
    r.chat.n_tools = 1;
    r.chat.tool_choice = "required";
    tw_engine *keep = g_engine;
    g_engine = e;
    refused(&r, TW_INVALID_ARGUMENT, "cannot be combined with a forced tool call");
    r.chat.tool_choice = "auto";
    r.n = 1;
    r.stop.max_tokens = 8;
    free(run(&r));
    g_engine = keep;
    tw_engine_destroy(e);
    free(qwen);
}

static int setup(void **state)
{
    (void)state;
    tw_engine_opts o;
    tw_engine_opts_init(&o);
    o.threads = 2;
    o.max_context = 2048;
    tw_err err;
    if (tw_engine_create(&o, &g_engine, &err) != TW_OK)
        return -1;
    if (tw_engine_load_model(g_engine, g_model, NULL, NULL, NULL, &err) != TW_OK) {
        fprintf(stderr, "load %s: %s\n", g_model, err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tw_engine_destroy(g_engine);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 2;
    }
    g_model = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schema_answers), cmocka_unit_test(test_pattern_answers),
        cmocka_unit_test(test_any_object),     cmocka_unit_test(test_after_thinking),
        cmocka_unit_test(test_choice_answers), cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
