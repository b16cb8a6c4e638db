/* tool_choice "required" and a named function, on the shipped model with
 * Qwen2.5's chat template (Hermes <tool_call> blocks) in place of its own:
 * the prompt ends with the call's opening and each answer starts with it.
 * Models whose template shows no tool-call format refuse such a choice, as
 * do names that are not among the tools; a replacement template must
 * compile.
 *
 *   test_tool_choice MODEL.gguf   (the template comes from ../shared/chat) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "test_support.h"
#include "tw/engine.h"
#include "tw/json_grammar.h"
#include "tw/tool_format.h"

typedef struct answer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char text[2][8192];
    tw_finish_reason finish[2];
    char reasoning[1024];
    bool final;
    tw_status error;
    tw_usage usage;
} answer;

static const char *g_model;

static void on_chunk(void *user, const tw_gen_chunk *ch)
{
    answer *a = user;
    pthread_mutex_lock(&a->mu);
    if (ch->index < 2) {
        char *t = a->text[ch->index];
        size_t have = strlen(t);
        if (have + ch->text_len < sizeof a->text[0])
            memcpy(t + have, ch->text_delta, ch->text_len), t[have + ch->text_len] = '\0';
        if (ch->finish_reason != TW_FINISH_NONE)
            a->finish[ch->index] = ch->finish_reason;
    }
    strncat(a->reasoning, ch->reasoning_delta, ch->reasoning_len);
    if (ch->final) {
        a->final = true;
        a->error = ch->error;
        a->usage = *ch->usage;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
}

static const tw_chat_message g_msgs[] = {{.role = "user", .content = "Weather in Paris?"}};
static const tw_tool g_tools[] = {
    {.name = "get_weather",
     .description = "Current weather",
     .parameters_json = "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}"},
    {.name = "get_time", .parameters_json = "{\"type\":\"object\"}"},
};

static void chat_request(tw_gen_request *r, const char *choice)
{
    tw_gen_request_init(r);
    r->prompt_kind = TW_PROMPT_CHAT;
    r->chat.messages = g_msgs;
    r->chat.n_messages = 1;
    r->chat.tools = g_tools;
    r->chat.n_tools = 2;
    r->chat.tool_choice = choice;
    r->sampling.temperature = 0.0f;
    r->stop.max_tokens = 4;
    r->n = 2;
    r->thinking.enable_thinking = TW_THINK_OFF;
}

/* Runs a request to the end. */
static void run_request(tw_engine *e, const tw_gen_request *r, answer *a)
{
    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    tw_gen_callbacks cb = {.on_chunk = on_chunk};
    tw_err err;
    uint64_t id;
    if (tw_engine_submit(e, r, &cb, a, &id, &err) != TW_OK)
        fail_msg("submit (tool_choice %s): %s", r->chat.tool_choice, err.msg);
    bool done = tw_test_wait_done(&a->mu, &a->cv, &a->final, 60);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    assert_true(done);
    assert_int_equal(a->error, TW_OK);
}

/* Runs a chat with this tool_choice to the end. */
static void run(tw_engine *e, const char *choice, answer *a)
{
    tw_gen_request r;
    chat_request(&r, choice);
    run_request(e, &r, a);
}

/* Submitting this tool_choice fails with INVALID_ARGUMENT naming why. */
static void refused(tw_engine *e, const char *choice, const char *why)
{
    tw_gen_request r;
    chat_request(&r, choice);
    tw_gen_callbacks cb = {.on_chunk = on_chunk};
    tw_err err;
    uint64_t id;
    answer a;
    assert_int_equal(tw_engine_submit(e, &r, &cb, &a, &id, &err), TW_INVALID_ARGUMENT);
    if (!strstr(err.msg, why))
        fail_msg("tool_choice %s: \"%s\" does not say \"%s\"", choice, err.msg, why);
}

/* How many tokens the chat renders to, plus extra text after it. */
static size_t prompt_tokens(tw_engine *e, const char *extra)
{
    tw_gen_request r;
    chat_request(&r, NULL);
    char *text;
    size_t len, n;
    uint32_t *ids;
    tw_err err;
    assert_int_equal(
        tw_engine_apply_chat_template(e, NULL, &r.chat, TW_THINK_OFF, &text, &len, &err), TW_OK);
    char *all = malloc(len + strlen(extra) + 1);
    assert_non_null(all);
    memcpy(all, text, len);
    strcpy(all + len, extra);
    assert_int_equal(tw_engine_tokenize(e, NULL, all, strlen(all), false, true, &ids, &n, &err),
                     TW_OK);
    free(ids);
    free(all);
    free(text);
    return n;
}

static tw_engine *engine_with(const char *template, tw_status want, tw_err *err)
{
    tw_engine_opts o;
    tw_engine_opts_init(&o);
    o.threads = 2;
    o.max_context = 1024;
    tw_engine *e;
    assert_int_equal(tw_engine_create(&o, &e, err), TW_OK);
    tw_load_opts lo;
    tw_load_opts_init(&lo);
    lo.chat_template = template;
    assert_int_equal(tw_engine_load_model(e, g_model, NULL, &lo, NULL, err), want);
    return e;
}

static void starts_with(const char *text, const char *prefix)
{
    if (strncmp(text, prefix, strlen(prefix)) != 0)
        fail_msg("the answer \"%s\" does not start with \"%s\"", text, prefix);
}

static void test_forced_calls(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(dir);
    char path[4096];
    tw_test_shared_path(path, sizeof path, "chat/Qwen-Qwen2.5-7B-Instruct.jinja");
    char *qwen = tw_test_read_file(path, NULL);
    assert_non_null(qwen);
    tw_err err;
    tw_engine *e = engine_with(qwen, TW_OK, &err);
    tw_engine_model_info info;
    assert_int_equal(tw_engine_get_model(e, NULL, &info, &err), TW_OK);
    assert_string_equal(info.tool_format, "hermes");

    answer *a = malloc(sizeof *a);
    assert_non_null(a);
    const char *named = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": ";
    run(e, "get_time", a);
    for (int i = 0; i < 2; i++)
        starts_with(a->text[i], named);
    assert_true(strlen(a->text[0]) > strlen(named)); /* the model went on */
    assert_int_equal(a->usage.prompt_tokens, prompt_tokens(e, named));
    run(e, "required", a);
    starts_with(a->text[0], "<tool_call>\n");
    assert_int_equal(a->usage.prompt_tokens, prompt_tokens(e, "<tool_call>\n"));
    /* auto and none leave the prompt as the template renders it */
    run(e, "auto", a);
    assert_int_equal(a->usage.prompt_tokens, prompt_tokens(e, ""));
    run(e, "none", a);
    assert_int_equal(a->usage.prompt_tokens, prompt_tokens(e, ""));
    refused(e, "get_news", "not one of the tools");
    tw_engine_destroy(e);

    /* a template whose answer opens a thinking block: the block is closed
     * before the call, and nothing is reasoning */
    const char *thinks = "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                         "<|im_end|>\n{%- endfor %}<|im_start|>assistant\n<think>\n"
                         "{#- calls go in <tool_call> blocks #}";
    e = engine_with(thinks, TW_OK, &err);
    run(e, "get_weather", a);
    starts_with(a->text[0], "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
    assert_string_equal(a->reasoning, "");
    assert_int_equal(a->usage.prompt_tokens,
                     prompt_tokens(e, "</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
                                      "\"arguments\": "));
    tw_engine_destroy(e);
    free(a);
    free(qwen);
}

/* Tools whose parameters the grammar understands (get_weather) and does
 * not (get_news: the format "uri-template"), for the calls' grammar. */
#define WEATHER_TOOL                                                                               \
    {                                                                                              \
        .name = "get_weather",                                                                     \
        .parameters_json = "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\","   \
                           "\"maxLength\":12},\"days\":{\"type\":\"integer\",\"minimum\":1,"       \
                           "\"maximum\":14}},\"required\":[\"city\",\"days\"],"                    \
                           "\"additionalProperties\":false}"                                       \
    }

static const tw_tool g_strict_tools[] = {
    WEATHER_TOOL,
    {.name = "get_news",
     .parameters_json = "{\"type\":\"object\",\"properties\":{\"day\":{\"type\":\"string\","
                        "\"format\":\"uri-template\"}}}"},
};

/* Tools that all have schemas the grammar understands, so "required"
 * holds each call's arguments to its own tool's. */
static const tw_tool g_bounded_tools[] = {
    WEATHER_TOOL,
    {.name = "get_time",
     .parameters_json = "{\"type\":\"object\",\"properties\":{\"tz\":{\"enum\":[\"utc\","
                        "\"cet\"]}},\"required\":[\"tz\"],\"additionalProperties\":false}"},
};

/* A forced call's answer is the whole call: head, then the call's JSON
 * object, then the close; the object names the function (want, or one of
 * the tools), and when strict its arguments fit that tool's schema. */
static void whole_call(const char *text, const char *head, const char *close, const char *key,
                       const char *want, bool strict)
{
    size_t nh = strlen(head), nc = strlen(close), n = strlen(text);
    if (n < nh + nc || strncmp(text, head, nh) != 0 || strcmp(text + n - nc, close) != 0)
        fail_msg("\"%s\" is not a whole call between \"%s\" and \"%s\"", text, head, close);
    json_error_t je;
    json_t *call = json_loadb(text + nh, n - nh - nc, 0, &je);
    if (!json_is_object(call))
        fail_msg("the call in \"%s\" is not a JSON object: %s", text, je.text);
    const char *name = json_string_value(json_object_get(call, "name"));
    json_t *args = json_object_get(call, key);
    if (!name || !json_is_object(args) || json_object_size(call) != 2)
        fail_msg("not a call: %s", text);
    if (want ? strcmp(name, want) != 0
             : strcmp(name, "get_weather") != 0 && strcmp(name, "get_news") != 0 &&
                   strcmp(name, "get_time") != 0)
        fail_msg("the call names %s: %s", name, text);
    if (strict && strcmp(name, "get_time") == 0) {
        const char *tz = json_string_value(json_object_get(args, "tz"));
        if (!tz || (strcmp(tz, "utc") != 0 && strcmp(tz, "cet") != 0) ||
            json_object_size(args) != 1)
            fail_msg("get_time's arguments do not fit its schema: %s", text);
    }
    if (strict && strcmp(name, "get_weather") == 0) {
        const char *city = json_string_value(json_object_get(args, "city"));
        const json_t *days = json_object_get(args, "days");
        if (!city || strlen(city) > 4 * 12 || !json_is_integer(days) ||
            json_integer_value(days) < 1 || json_integer_value(days) > 14 ||
            json_object_size(args) != 2)
            fail_msg("get_weather's arguments do not fit its schema: %s", text);
    }
    json_decref(call);
}

/* An answer the length limit cut: the head, then the start of a JSON
 * object (the grammar's own matcher reads it). */
static void call_prefix(const char *text, const char *head)
{
    size_t nh = strlen(head);
    if (strncmp(text, head, nh) != 0)
        fail_msg("\"%s\" does not start with \"%s\"", text, head);
    tw_json_grammar *g;
    tw_err err;
    assert_int_equal(tw_json_grammar_compile(NULL, 0, &g, &err), TW_OK);
    tw_json_state s;
    tw_json_state_init(&s, g);
    if (!tw_json_state_feed(&s, text + nh, strlen(text + nh)))
        fail_msg("not the start of a call's object: %s", text);
    tw_json_grammar_free(g);
}

static void test_forced_call_grammar(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(dir);
    const struct {
        const char *file, *head, *named_head, *close, *key;
    } forms[] = {
        {"Qwen-Qwen2.5-7B-Instruct.jinja", "<tool_call>\n", "<tool_call>\n", "\n</tool_call>",
         "arguments"},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", "", "", "", "parameters"},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "[TOOL_CALLS][", "[TOOL_CALLS][", "]",
         "arguments"},
    };
    answer *a = malloc(sizeof *a);
    assert_non_null(a);
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
        char rel[256], path[4096];
        snprintf(rel, sizeof rel, "chat/%s", forms[f].file);
        char *src = tw_test_read_file(tw_test_shared_path(path, sizeof path, rel), NULL);
        assert_non_null(src);
        tw_err err;
        tw_engine *e = engine_with(src, TW_OK, &err);
        /* the last "required" offers tools whose schemas all compile, so
         * every call keeps to its own tool's (and ends: they are bounded);
         * the first one's get_news uses the format "uri-template", so its calls take any
         * object of arguments */
        const char *choices[] = {"get_weather", "required", "get_news", "required"};
        for (size_t c = 0; c < 4; c++) {
            tw_gen_request r;
            chat_request(&r, choices[c]);
            r.chat.tools = c == 3 ? g_bounded_tools : g_strict_tools;
            r.sampling.temperature = 1.0f;
            r.sampling.has_seed = true;
            r.sampling.seed = 5 + f;
            r.stop.max_tokens = 300;
            run_request(e, &r, a);
            for (int i = 0; i < 2; i++) {
                /* get_weather's arguments are bounded, so its calls end; the
                 * others take any object, which a toy model may not close */
                if ((c == 1 || c == 2) && a->finish[i] == TW_FINISH_LENGTH) {
                    call_prefix(a->text[i], forms[f].head);
                    continue;
                }
                if (a->finish[i] != TW_FINISH_STOP)
                    fail_msg("%s, %s: choice %d ended with %d: %s", forms[f].file, choices[c], i,
                             a->finish[i], a->text[i]);
                whole_call(a->text[i], forms[f].head, forms[f].close, forms[f].key,
                           (c == 1 || c == 3) ? NULL : choices[c], c == 0 || c == 3);
            }
        }
        tw_engine_destroy(e);
        free(src);
    }
    free(a);
}

/* The id of a one-token text. */
static uint32_t token_of(tw_engine *e, const char *text)
{
    uint32_t *ids;
    size_t n;
    tw_err err;
    assert_int_equal(tw_engine_tokenize(e, NULL, text, strlen(text), false, true, &ids, &n, &err),
                     TW_OK);
    assert_int_equal(n, 1);
    uint32_t id = ids[0];
    free(ids);
    return id;
}

/* A chat under tool_choice choice whose sampling favours the token of
 * text far above all others, so the model writes it wherever it may. */
/* As run_favouring, the answer asked for in the given format (JSON: held
 * to schema, or any object when it is NULL). */
static void run_favouring_as(tw_engine *e, const char *choice, const char *text, float temperature,
                             tw_spec_mode spec, tw_output_format format, const char *schema,
                             answer *a)
{
    tw_gen_request r;
    chat_request(&r, choice);
    r.format.kind = format;
    r.format.json_schema = schema;
    r.format.json_schema_len = schema ? strlen(schema) : 0;
    r.chat.tools = g_bounded_tools;
    tw_logit_bias bias = {.token_id = token_of(e, text), .bias = 100.0f};
    r.sampling.logit_bias = &bias;
    r.sampling.n_logit_bias = 1;
    r.sampling.temperature = temperature;
    r.sampling.has_seed = true;
    r.sampling.seed = 11;
    r.speculative.mode = spec;
    r.stop.max_tokens = 500;
    run_request(e, &r, a);
}

static void run_favouring(tw_engine *e, const char *choice, const char *text, float temperature,
                          tw_spec_mode spec, answer *a)
{
    run_favouring_as(e, choice, text, temperature, spec, TW_OUTPUT_TEXT, NULL, a);
}

/* Choice i of a Hermes answer whose call the prompt's "<tool_call" and the
 * model's ">" opened: a whole call that fits, then free text, which the
 * length limit ends. */
static void call_then_text(const answer *a, int i, const char *what)
{
    const char *close = "\n</tool_call>";
    const char *end = strstr(a->text[i], close);
    if (!end || a->finish[i] != TW_FINISH_LENGTH || !end[strlen(close)])
        fail_msg("%s, choice %d (%d) is not a call and free text after it: %s", what, i,
                 a->finish[i], a->text[i]);
    char call[sizeof a->text[0]];
    size_t n = (size_t)(end - a->text[i]) + strlen(close);
    memcpy(call, a->text[i], n);
    call[n] = '\0';
    whole_call(call, ">", close, "arguments", NULL, true);
}

/* tool_choice "auto": a call the model opens by itself is held to the
 * tools' grammar from its opening to its end. With Llama 3.1's template an
 * answer that starts with "{" is a call, which then ends the answer; with
 * a Hermes template the grammar applies between "<tool_call>" (here begun
 * by the prompt, finished by the model) and "</tool_call>", and the answer
 * goes on freely after it. The same favoured token with "none" gives no
 * call at all (on the Hermes template it is banned where it would finish
 * the opening), and greedy answers are the same with and without
 * speculation. */
static void test_auto_calls(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(dir);
    char path[4096];
    char *llama = tw_test_read_file(
        tw_test_shared_path(path, sizeof path, "chat/meta-llama-Llama-3.1-8B-Instruct.jinja"),
        NULL);
    assert_non_null(llama);
    tw_err err;
    tw_engine *e = engine_with(llama, TW_OK, &err);
    answer *a = malloc(sizeof *a);
    answer *b = malloc(sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    run_favouring(e, "auto", "{", 1.0f, TW_SPEC_OFF, a);
    for (int i = 0; i < 2; i++) {
        if (a->finish[i] != TW_FINISH_STOP)
            fail_msg("auto, choice %d ended with %d: %s", i, a->finish[i], a->text[i]);
        whole_call(a->text[i], "", "", "parameters", NULL, true);
    }
    run_favouring(e, "none", "{", 1.0f, TW_SPEC_OFF, a);
    for (int i = 0; i < 2; i++) {
        json_t *v = json_loads(a->text[i], 0, NULL);
        if (json_is_object(v))
            fail_msg("without the grammar the answer still parsed: %s", a->text[i]);
        json_decref(v);
    }
    run_favouring(e, "auto", "{", 0.0f, TW_SPEC_OFF, a);
    run_favouring(e, "auto", "{", 0.0f, TW_SPEC_LOOKUP, b);
    assert_string_equal(a->text[0], b->text[0]);
    whole_call(b->text[0], "", "", "parameters", NULL, true);
    /* beside a JSON answer the call opens as the document does, so the
     * answer is read as both: with "name" favoured it is a call (the
     * document names no such property), with "an" (of "answer") favoured,
     * or "name" under "none", the document; greedy answers agree with and without
     * speculation */
    static const char doc[] = "{\"type\":\"object\",\"properties\":{\"answer\":{\"type\":"
                              "\"string\",\"maxLength\":40}},\"required\":[\"answer\"],"
                              "\"additionalProperties\":false}";
    for (int round = 0; round < 3; round++) {
        run_favouring_as(e, round == 2 ? "none" : "auto", round == 1 ? "an" : "name", 1.0f,
                         TW_SPEC_OFF, TW_OUTPUT_JSON, doc, a);
        for (int i = 0; i < 2; i++) {
            if (a->finish[i] != TW_FINISH_STOP)
                fail_msg("JSON beside auto, round %d choice %d ended with %d: %s", round, i,
                         a->finish[i], a->text[i]);
            if (round == 0) {
                whole_call(a->text[i], "", "", "parameters", NULL, true);
                continue;
            }
            json_t *v = json_loads(a->text[i], 0, NULL);
            if (!json_is_string(json_object_get(v, "answer")) || json_object_size(v) != 1)
                fail_msg("JSON beside auto, round %d: not the document: %s", round, a->text[i]);
            json_decref(v);
        }
    }
    run_favouring_as(e, "auto", "name", 0.0f, TW_SPEC_OFF, TW_OUTPUT_JSON, doc, a);
    run_favouring_as(e, "auto", "name", 0.0f, TW_SPEC_LOOKUP, TW_OUTPUT_JSON, doc, b);
    assert_string_equal(a->text[0], b->text[0]);
    whole_call(a->text[0], "", "", "parameters", NULL, true);
    tw_engine_destroy(e);

    const char *hermes = "{#- calls go in <tool_call> blocks #}{%- for m in messages %}"
                         "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
                         "<|im_start|>assistant\n<tool_call";
    e = engine_with(hermes, TW_OK, &err);
    const char *close = "\n</tool_call>";
    for (int round = 0; round < 2; round++) {
        run_favouring(e, round ? "none" : "auto", ">", 1.0f, TW_SPEC_OFF, a);
        for (int i = 0; i < 2; i++) {
            char *end = strstr(a->text[i], close);
            if (round == 1) {
                /* the prompt ends in "<tool_call": ">" would open a call */
                if (end || a->text[i][0] == '>' || strstr(a->text[i], "<tool_call>"))
                    fail_msg("with \"none\" a call was opened: %s", a->text[i]);
                continue;
            }
            call_then_text(a, i, "auto");
        }
    }
    /* the same ban holds for greedy answers with prompt lookup, and a
     * whole opening favoured token by token cannot come either */
    run_favouring(e, "none", ">", 0.0f, TW_SPEC_LOOKUP, a);
    if (a->text[0][0] == '>' || strstr(a->text[0], "<tool_call>"))
        fail_msg("with \"none\" and lookup a call was opened: %s", a->text[0]);
    /* beside a JSON answer: the answer opens the call instead of the
     * document (the same call, the same free text after it), and with
     * "none" it is the document, which ">" cannot start */
    for (int round = 0; round < 2; round++) {
        run_favouring_as(e, round ? "none" : "auto", ">", 1.0f, TW_SPEC_OFF, TW_OUTPUT_JSON, NULL,
                         a);
        for (int i = 0; i < 2; i++) {
            char *end = strstr(a->text[i], close);
            if (round == 1) {
                json_t *v = json_loads(a->text[i], 0, NULL);
                if (end || a->text[i][0] == '>' ||
                    (a->finish[i] == TW_FINISH_STOP && !json_is_object(v)))
                    fail_msg("with \"none\" not a JSON answer: %s", a->text[i]);
                json_decref(v);
                continue;
            }
            call_then_text(a, i, "JSON beside auto");
        }
    }
    tw_engine_destroy(e);
    free(a);
    free(b);
    free(llama);
}

static void test_refusals(void **state)
{
    (void)state;
    tw_err err;
    /* the shipped template renders no tools */
    tw_engine *e = engine_with(NULL, TW_OK, &err);
    tw_engine_model_info info;
    assert_int_equal(tw_engine_get_model(e, NULL, &info, &err), TW_OK);
    assert_string_equal(info.tool_format, "none");
    refused(e, "required", "tool-call format");
    refused(e, "get_weather", "tool-call format");
    tw_engine_destroy(e);
    /* a replacement template that does not compile fails the load */
    e = engine_with("{% if %}", TW_INVALID_ARGUMENT, &err);
    assert_non_null(strstr(err.msg, "chat template"));
    tw_engine_destroy(e);
}

static void test_openers(void **state)
{
    (void)state;
    char *o;
    tw_err err;
    assert_int_equal(tw_tool_call_opener(TW_TOOL_FORMAT_LLAMA_JSON, "a\"b\\c", &o, &err), TW_OK);
    assert_string_equal(o, "{\"name\": \"a\\\"b\\\\c\", \"parameters\": ");
    free(o);
    assert_int_equal(tw_tool_call_opener(TW_TOOL_FORMAT_LLAMA_JSON, NULL, &o, &err), TW_OK);
    assert_string_equal(o, "");
    free(o);
    assert_int_equal(tw_tool_call_opener(TW_TOOL_FORMAT_MISTRAL, "f", &o, &err), TW_OK);
    assert_string_equal(o, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": ");
    free(o);
    assert_int_equal(tw_tool_call_opener(TW_TOOL_FORMAT_MISTRAL, NULL, &o, &err), TW_OK);
    assert_string_equal(o, "[TOOL_CALLS][");
    free(o);
    assert_int_equal(tw_tool_call_opener(TW_TOOL_FORMAT_HERMES, NULL, &o, &err), TW_OK);
    assert_string_equal(o, "<tool_call>\n");
    free(o);
    assert_int_equal(tw_tool_call_opener(TW_TOOL_FORMAT_NONE, "f", &o, &err), TW_INVALID_ARGUMENT);
    assert_null(o);
    assert_int_equal(tw_tool_call_opener(TW_TOOL_FORMAT_HERMES, "\xff", &o, &err),
                     TW_INVALID_ARGUMENT);
    assert_string_equal(tw_tool_call_tail(TW_TOOL_FORMAT_HERMES, true), "}\n</tool_call>");
    assert_string_equal(tw_tool_call_tail(TW_TOOL_FORMAT_HERMES, false), "\n</tool_call>");
    assert_string_equal(tw_tool_call_tail(TW_TOOL_FORMAT_MISTRAL, false), "]");
    assert_string_equal(tw_tool_call_args_key(TW_TOOL_FORMAT_LLAMA_JSON), "parameters");
    /* the formats of the reference templates */
    const char *shared = tw_test_shared_dir();
    if (!shared)
        return;
    const struct {
        const char *file;
        tw_tool_format want;
    } t[] = {{"Qwen-Qwen2.5-7B-Instruct.jinja", TW_TOOL_FORMAT_HERMES},
             {"Qwen-Qwen3-0.6B.jinja", TW_TOOL_FORMAT_HERMES},
             {"meta-llama-Llama-3.1-8B-Instruct.jinja", TW_TOOL_FORMAT_LLAMA_JSON},
             {"mistralai-Mistral-Nemo-Instruct-2407.jinja", TW_TOOL_FORMAT_MISTRAL},
             {"google-gemma-2-2b-it.jinja", TW_TOOL_FORMAT_NONE}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char rel[256], path[4096];
        snprintf(rel, sizeof rel, "chat/%s", t[i].file);
        size_t len;
        char *src = tw_test_read_file(tw_test_shared_path(path, sizeof path, rel), &len);
        assert_non_null(src);
        if (tw_tool_format_of_template(src, len) != t[i].want)
            fail_msg("%s: %s, expected %s", t[i].file,
                     tw_tool_format_name(tw_tool_format_of_template(src, len)),
                     tw_tool_format_name(t[i].want));
        free(src);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 2;
    }
    g_model = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openers),      cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_forced_calls), cmocka_unit_test(test_forced_call_grammar),
        cmocka_unit_test(test_auto_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
