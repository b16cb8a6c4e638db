#include "responses_map.h"

#include <stdio.h>
#include <string.h>

#include "json_field.h"

#define MAX_INPUT_ITEMS 4096

/* Fields of a chat request that mean the same in a Responses request (the
 * sampling extensions many clients send through extra_body included); the
 * chat mapping checks them. */
static const char *const g_same[] = {"model",
                                     "temperature",
                                     "top_p",
                                     "parallel_tool_calls",
                                     "user",
                                     "seed",
                                     "stop",
                                     "top_k",
                                     "min_p",
                                     "presence_penalty",
                                     "frequency_penalty",
                                     "repetition_penalty",
                                     "logit_bias",
                                     "chat_template_kwargs",
                                     "max_thinking_tokens",
                                     "speculative",
                                     "guided_json",
                                     "guided_choice"};

static tw_status no_memory(tw_bridge_apierr *ae)
{
    return tw_bridge_fail_no_memory(ae);
}

/* The text of a message's content: a string, or text parts joined. */
static tw_status content_text(const json_t *content, const char *path, json_t **out,
                              tw_bridge_apierr *ae)
{
    *out = NULL;
    if (!content || json_is_null(content))
        return tw_bridge_fail_missing(ae, path);
    if (json_is_string(content)) {
        *out = json_copy((json_t *)content);
        return *out ? TW_OK : no_memory(ae);
    }
    if (!json_is_array(content))
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, path, "invalid_type",
                              "Invalid type for '%s': expected a string or an array of content "
                              "parts, but got %s instead.",
                              path, tw_bridge_json_type_name(content));
    size_t cap = 0;
    for (size_t i = 0; i < json_array_size(content); i++)
        cap += json_string_length(json_object_get(json_array_get(content, i), "text"));
    char *joined = malloc(cap + 1);
    if (!joined)
        return no_memory(ae);
    size_t at = 0;
    for (size_t i = 0; i < json_array_size(content); i++) {
        const json_t *part = json_array_get(content, i);
        const char *type = json_string_value(json_object_get(part, "type"));
        const json_t *text = json_object_get(part, "text");
        char p[160];
        tw_bridge_path_index(p, sizeof p, path, i, "type");
        if (!type ||
            (strcmp(type, "input_text") && strcmp(type, "output_text") && strcmp(type, "text")) ||
            !json_is_string(text)) {
            free(joined);
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, p, "unsupported_value",
                                  "Only text content parts (input_text, output_text) are "
                                  "supported; '%s' has type '%s'.",
                                  p, type ? type : "(none)");
        }
        memcpy(joined + at, json_string_value(text), json_string_length(text));
        at += json_string_length(text);
    }
    *out = json_stringn(joined, at);
    free(joined);
    return *out ? TW_OK : no_memory(ae);
}

/* The assistant message that collects function calls: the last message when
 * it is the assistant's (the text a response gave before its calls is the
 * same turn), else a new one. */
static json_t *calls_message(json_t *msgs)
{
    json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
    const char *role = json_string_value(json_object_get(last, "role"));
    if (role && !strcmp(role, "assistant")) {
        if (!json_is_array(json_object_get(last, "tool_calls")) &&
            json_object_set_new(last, "tool_calls", json_array()))
            return NULL;
        return last;
    }
    json_t *m = json_pack("{s:s, s:n, s:[]}", "role", "assistant", "content", "tool_calls");
    if (!m || json_array_append_new(msgs, m))
        return NULL;
    return m;
}

/* A string field of an input item, required. */
static tw_status item_string(const json_t *item, const char *key, size_t i, const char **out,
                             tw_bridge_apierr *ae)
{
    char p[96];
    tw_bridge_path_index(p, sizeof p, "input", i, key);
    int r = tw_bridge_get_string(item, key, p, (size_t)-1 / 4, out, NULL, ae);
    if (r == 0)
        return tw_bridge_fail_missing(ae, p);
    return r < 0 ? TW_INVALID_ARGUMENT : TW_OK;
}

static tw_status add_item(json_t *msgs, const json_t *item, size_t i, tw_bridge_apierr *ae)
{
    char p[96];
    tw_bridge_path_index(p, sizeof p, "input", i, NULL);
    if (!json_is_object(item))
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, p, "invalid_type",
                              "Invalid type for '%s': expected an object.", p);
    const char *type = json_string_value(json_object_get(item, "type"));
    const char *a, *b;
    tw_status st;
    if (!type || !strcmp(type, "message")) {
        if ((st = item_string(item, "role", i, &a, ae)) != TW_OK)
            return st;
        tw_bridge_path_index(p, sizeof p, "input", i, "content");
        json_t *text;
        if ((st = content_text(json_object_get(item, "content"), p, &text, ae)) != TW_OK)
            return st;
        json_t *m = json_pack("{s:s, s:o}", "role", a, "content", text);
        return m && !json_array_append_new(msgs, m) ? TW_OK : no_memory(ae);
    }
    if (!strcmp(type, "function_call")) {
        const char *name;
        if ((st = item_string(item, "call_id", i, &a, ae)) != TW_OK ||
            (st = item_string(item, "name", i, &name, ae)) != TW_OK ||
            (st = item_string(item, "arguments", i, &b, ae)) != TW_OK)
            return st;
        json_t *m = calls_message(msgs);
        json_t *call = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", a, "type", "function",
                                 "function", "name", name, "arguments", b);
        return m && call && !json_array_append_new(json_object_get(m, "tool_calls"), call)
                   ? TW_OK
                   : no_memory(ae);
    }
    if (!strcmp(type, "function_call_output")) {
        if ((st = item_string(item, "call_id", i, &a, ae)) != TW_OK)
            return st;
        tw_bridge_path_index(p, sizeof p, "input", i, "output");
        json_t *text;
        if ((st = content_text(json_object_get(item, "output"), p, &text, ae)) != TW_OK)
            return st;
        json_t *m =
            json_pack("{s:s, s:s, s:o}", "role", "tool", "tool_call_id", a, "content", text);
        return m && !json_array_append_new(msgs, m) ? TW_OK : no_memory(ae);
    }
    /* the model's earlier reasoning: chat templates drop it from history */
    if (!strcmp(type, "reasoning"))
        return TW_OK;
    tw_bridge_path_index(p, sizeof p, "input", i, "type");
    return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, p, "unsupported_value",
                          "Input items of type '%.64s' are not supported here (message, "
                          "function_call, function_call_output and reasoning are).",
                          type);
}

static tw_status map_input(const json_t *in, const json_t *prior, json_t *chat,
                           tw_bridge_apierr *ae)
{
    json_t *msgs = json_array();
    if (!msgs || json_object_set_new(chat, "messages", msgs))
        return no_memory(ae);
    const char *instructions = NULL;
    if (tw_bridge_get_string(in, "instructions", NULL, (size_t)-1 / 4, &instructions, NULL, ae) < 0)
        return TW_INVALID_ARGUMENT;
    if (instructions && json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "system",
                                                              "content", instructions)))
        return no_memory(ae);
    for (size_t i = 0; i < json_array_size(prior); i++) {
        tw_status st = add_item(msgs, json_array_get(prior, i), i, ae);
        if (st != TW_OK)
            return st;
    }
    const json_t *input = json_object_get(in, "input");
    if (!input || json_is_null(input))
        return tw_bridge_fail_missing(ae, "input");
    if (json_is_string(input)) {
        json_t *m = json_pack("{s:s, s:O}", "role", "user", "content", input);
        return m && !json_array_append_new(msgs, m) ? TW_OK : no_memory(ae);
    }
    if (!json_is_array(input) || json_array_size(input) == 0 ||
        json_array_size(input) > MAX_INPUT_ITEMS)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "input", "invalid_value",
                              "'input' must be a string or an array of 1 to %d items.",
                              MAX_INPUT_ITEMS);
    for (size_t i = 0; i < json_array_size(input); i++) {
        tw_status st = add_item(msgs, json_array_get(input, i), i, ae);
        if (st != TW_OK)
            return st;
    }
    return TW_OK;
}

static tw_status map_tools(const json_t *in, json_t *chat, tw_bridge_apierr *ae)
{
    json_t *tools = NULL;
    if (tw_bridge_get_typed(in, "tools", NULL, JSON_ARRAY, &tools, ae) < 0)
        return TW_INVALID_ARGUMENT;
    json_t *out = json_array();
    if (!out || (tools && json_object_set(chat, "tools", out))) {
        json_decref(out);
        return no_memory(ae);
    }
    json_decref(out);
    for (size_t i = 0; i < json_array_size(tools); i++) {
        const json_t *t = json_array_get(tools, i);
        const char *type = json_string_value(json_object_get(t, "type"));
        char p[64];
        tw_bridge_path_index(p, sizeof p, "tools", i, "type");
        if (!type || strcmp(type, "function") != 0)
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, p, "unsupported_value",
                                  "Only function tools are supported; '%s' is '%.64s'.", p,
                                  type ? type : "(none)");
        /* the chat form nests the same fields under "function" */
        json_t *fn = json_object();
        const char *keys[] = {"name", "description", "parameters", "strict"};
        for (size_t k = 0; fn && k < sizeof keys / sizeof keys[0]; k++) {
            json_t *v = json_object_get(t, keys[k]);
            if (v && json_object_set(fn, keys[k], v))
                json_decref(fn), fn = NULL;
        }
        if (!fn ||
            json_array_append_new(out, json_pack("{s:s, s:o}", "type", "function", "function", fn)))
            return no_memory(ae);
    }
    const json_t *choice = json_object_get(in, "tool_choice");
    if (json_is_object(choice)) {
        const char *type = json_string_value(json_object_get(choice, "type"));
        const char *name = json_string_value(json_object_get(choice, "name"));
        if (!type || strcmp(type, "function") != 0 || !name)
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "tool_choice", "unsupported_value",
                                  "'tool_choice' must be \"none\", \"auto\", \"required\" or "
                                  "{\"type\": \"function\", \"name\": ...}.");
        return json_object_set_new(
                   chat, "tool_choice",
                   json_pack("{s:s, s:{s:s}}", "type", "function", "function", "name", name))
                   ? no_memory(ae)
                   : TW_OK;
    }
    return choice && json_object_set(chat, "tool_choice", (json_t *)choice) ? no_memory(ae) : TW_OK;
}

/* text.format → response_format; reasoning.effort → reasoning_effort. */
static tw_status map_text_and_reasoning(const json_t *in, json_t *chat, tw_bridge_apierr *ae)
{
    const json_t *format = json_object_get(json_object_get(in, "text"), "format");
    const char *type = json_string_value(json_object_get(format, "type"));
    if (format && !type)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "text.format.type", "invalid_value",
                              "'text.format' needs a 'type' (text, json_object or json_schema).");
    json_t *rf = NULL;
    if (type && !strcmp(type, "json_schema")) {
        json_t *js = json_object();
        const char *keys[] = {"name", "schema", "strict", "description"};
        for (size_t k = 0; js && k < sizeof keys / sizeof keys[0]; k++) {
            json_t *v = json_object_get(format, keys[k]);
            if (v && json_object_set(js, keys[k], v))
                json_decref(js), js = NULL;
        }
        rf = js ? json_pack("{s:s, s:o}", "type", "json_schema", "json_schema", js) : NULL;
    } else if (type && strcmp(type, "text") != 0) {
        /* json_object, or what the chat mapping refuses by name */
        rf = json_pack("{s:s}", "type", type);
    }
    if (type && strcmp(type, "text") != 0 &&
        (!rf || json_object_set_new(chat, "response_format", rf)))
        return no_memory(ae);
    const json_t *effort = json_object_get(json_object_get(in, "reasoning"), "effort");
    if (effort && !json_is_null(effort) &&
        json_object_set(chat, "reasoning_effort", (json_t *)effort))
        return no_memory(ae);
    return TW_OK;
}

/* include "message.output_text.logprobs" or top_logprobs: the chat
 * request's logprobs (top_logprobs checked there). Other include values
 * name output this server never gives (hosted tools, images, encrypted
 * reasoning), so they change nothing. */
static tw_status map_logprobs(const json_t *in, json_t *chat, tw_bridge_apierr *ae)
{
    json_t *include = NULL;
    if (tw_bridge_get_typed(in, "include", NULL, JSON_ARRAY, &include, ae) < 0)
        return TW_INVALID_ARGUMENT;
    bool want = false;
    for (size_t i = 0; i < json_array_size(include); i++) {
        const json_t *v = json_array_get(include, i);
        char p[48];
        if (!json_is_string(v))
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT,
                                  tw_bridge_path_index(p, sizeof p, "include", i, NULL),
                                  "invalid_type", "'%s' must be a string.", p);
        want |= !strcmp(json_string_value(v), "message.output_text.logprobs");
    }
    const json_t *top = json_object_get(in, "top_logprobs");
    want |= json_integer_value(top) > 0 || json_real_value(top) > 0;
    if (top && !json_is_null(top) && json_object_set(chat, "top_logprobs", (json_t *)top))
        return no_memory(ae);
    if (want && json_object_set_new(chat, "logprobs", json_true()))
        return no_memory(ae);
    return TW_OK;
}

int tw_bridge_responses_previous(const json_t *in, const char **id, tw_bridge_apierr *ae)
{
    size_t n = 0;
    int r = tw_bridge_get_string(in, "previous_response_id", NULL, 64, id, &n, ae);
    if (r == 1 && n == 0) {
        tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "previous_response_id", "invalid_value",
                       "'previous_response_id' must not be empty.");
        return -1;
    }
    return r;
}

tw_status tw_bridge_responses_to_chat(const json_t *in, const json_t *prior, json_t **out,
                                      tw_bridge_apierr *ae)
{
    *out = NULL;
    if (!json_is_object(in))
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, NULL, "invalid_type",
                              "The request body must be a JSON object.");
    static const char *const stored[] = {"conversation", "prompt"};
    for (size_t i = 0; i < sizeof stored / sizeof stored[0]; i++) {
        const json_t *v = json_object_get(in, stored[i]);
        if (v && !json_is_null(v))
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, stored[i], "unsupported_parameter",
                                  "'%s' is not supported: this server keeps responses only; "
                                  "go on from one with 'previous_response_id', or send the "
                                  "whole conversation as 'input'.",
                                  stored[i]);
    }
    const json_t *store = json_object_get(in, "store");
    if (store && !json_is_null(store) && !json_is_boolean(store))
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "store", "invalid_type",
                              "Invalid type for 'store': expected a boolean, but got %s "
                              "instead.",
                              tw_bridge_json_type_name(store));
    if (json_is_true(json_object_get(in, "background")))
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "background", "unsupported_parameter",
                              "'background' responses are not supported.");
    json_t *chat = json_object();
    if (!chat)
        return no_memory(ae);
    tw_status st = map_input(in, prior, chat, ae);
    if (st == TW_OK)
        st = map_tools(in, chat, ae);
    if (st == TW_OK)
        st = map_text_and_reasoning(in, chat, ae);
    for (size_t i = 0; st == TW_OK && i < sizeof g_same / sizeof g_same[0]; i++) {
        json_t *v = json_object_get(in, g_same[i]);
        if (v && json_object_set(chat, g_same[i], v))
            st = no_memory(ae);
    }
    if (st == TW_OK)
        st = map_logprobs(in, chat, ae);
    const json_t *max = json_object_get(in, "max_output_tokens");
    if (st == TW_OK && max && json_object_set(chat, "max_completion_tokens", (json_t *)max))
        st = no_memory(ae);
    if (st == TW_OK && json_is_true(json_object_get(in, "stream")) &&
        json_object_set_new(chat, "stream", json_true()) |
            json_object_set_new(chat, "stream_options", json_pack("{s:b}", "include_usage", 1)))
        st = no_memory(ae);
    if (st != TW_OK) {
        json_decref(chat);
        return st;
    }
    *out = chat;
    return TW_OK;
}

/* One input item as it is kept: id and type first, a message's content as
 * parts and its status, then the rest as given. A new reference, or NULL. */
static json_t *kept_item(const json_t *item, const char *suffix, size_t i)
{
    const char *type = json_string_value(json_object_get(item, "type"));
    type = type ? type : "message";
    const json_t *given_id = json_object_get(item, "id");
    char id[128];
    if (json_is_string(given_id)) {
        snprintf(id, sizeof id, "%s", json_string_value(given_id));
    } else {
        const char *kind = !strcmp(type, "message")                ? "msg"
                           : !strcmp(type, "function_call")        ? "fc"
                           : !strcmp(type, "function_call_output") ? "fco"
                                                                   : "rs";
        snprintf(id, sizeof id, "%s_%s_%zu", kind, suffix, i);
    }
    json_t *o = json_pack("{s:s, s:s}", "id", id, "type", type);
    int bad = !o;
    if (!bad && !strcmp(type, "message")) {
        const char *role = json_string_value(json_object_get(item, "role"));
        const json_t *content = json_object_get(item, "content");
        const char *part = role && !strcmp(role, "assistant") ? "output_text" : "input_text";
        bad |= json_object_set(o, "role", json_object_get(item, "role"));
        bad |= json_object_set_new(o, "content",
                                   json_is_string(content)
                                       ? json_pack("[{s:s, s:O}]", "type", part, "text", content)
                                       : json_deep_copy(content));
        bad |= json_object_set_new(o, "status", json_string("completed"));
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)item, key, v)
    {
        if (!bad && !json_object_get(o, key))
            bad |= json_object_set_new(o, key, json_deep_copy(v));
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *tw_bridge_responses_context(const json_t *prior, const json_t *in, const char *resp_id)
{
    const char *suffix = strncmp(resp_id, "resp_", 5) ? resp_id : resp_id + 5;
    json_t *items = prior ? json_deep_copy(prior) : json_array();
    const json_t *input = json_object_get(in, "input");
    int bad = !items;
    if (json_is_string(input)) {
        json_t *m = json_pack("{s:s, s:O}", "role", "user", "content", input);
        bad |= !m || json_array_append_new(items, kept_item(m, suffix, 0));
        json_decref(m);
    }
    for (size_t i = 0; !bad && i < json_array_size(input); i++)
        bad |= json_array_append_new(items, kept_item(json_array_get(input, i), suffix, i));
    if (bad) {
        json_decref(items);
        return NULL;
    }
    return items;
}

json_t *tw_bridge_responses_conversation(const json_t *items, const json_t *response)
{
    json_t *all = json_deep_copy(items);
    const json_t *output = json_object_get(response, "output");
    int bad = !json_is_array(all);
    for (size_t i = 0; !bad && i < json_array_size(output); i++)
        bad |= json_array_append_new(all, json_deep_copy(json_array_get(output, i)));
    if (bad) {
        json_decref(all);
        return NULL;
    }
    return all;
}

/* ------------------------------------------------------------ answers */

/* A request field echoed in the response, or dflt (a new reference). */
static json_t *echo_field(const json_t *request, const char *key, json_t *dflt)
{
    json_t *v = json_object_get(request, key);
    if (v && !json_is_null(v)) {
        json_decref(dflt);
        return json_incref(v);
    }
    return dflt;
}

json_t *tw_bridge_response_of_chat(const tw_bridge_resp_echo *echo, const json_t *completion)
{
    const json_t *ch = json_array_get(json_object_get(completion, "choices"), 0);
    const json_t *msg = json_object_get(ch, "message");
    tw_bridge_resp_parts parts = {
        .reasoning = json_string_value(json_object_get(msg, "reasoning_content")),
        .text = json_string_value(json_object_get(msg, "content")),
        .finish = json_string_value(json_object_get(ch, "finish_reason")),
        .usage = json_object_get(completion, "usage"),
        .model = json_string_value(json_object_get(completion, "model")),
        .logprobs = json_object_get(json_object_get(ch, "logprobs"), "content"),
    };
    const json_t *calls = json_object_get(msg, "tool_calls");
    json_t *items = json_array();
    for (size_t i = 0; items && i < json_array_size(calls); i++) {
        const json_t *c = json_array_get(calls, i);
        const json_t *fn = json_object_get(c, "function");
        json_t *it =
            json_pack("{s:O?, s:O?, s:O?}", "call_id", json_object_get(c, "id"), "name",
                      json_object_get(fn, "name"), "arguments", json_object_get(fn, "arguments"));
        if (!it || json_array_append_new(items, it))
            json_decref(items), items = NULL;
    }
    parts.calls = items;
    json_t *r = items ? tw_bridge_response_object(echo, &parts, "completed") : NULL;
    json_decref(items);
    return r;
}

/* Output items in OpenAI's order: reasoning, the message, then the calls. */
static json_t *output_items(const tw_bridge_resp_echo *echo, const tw_bridge_resp_parts *p)
{
    const char *suffix = echo->id + 5; /* past "resp_" */
    char id[96];
    json_t *out = json_array();
    int bad = !out;
    const bool reasoned = p->reasoning && p->reasoning[0];
    if (!bad && reasoned) {
        snprintf(id, sizeof id, "rs_%s", suffix);
        bad |= json_array_append_new(
            out, json_pack("{s:s, s:s, s:[], s:[{s:s, s:s}]}", "id", id, "type", "reasoning",
                           "summary", "content", "type", "reasoning_text", "text", p->reasoning));
    }
    if (!bad && ((p->text && p->text[0]) || (json_array_size(p->calls) == 0 && !reasoned))) {
        snprintf(id, sizeof id, "msg_%s", suffix);
        const bool cut = p->finish && !strcmp(p->finish, "length");
        bad |= json_array_append_new(
            out, tw_bridge_response_message(id, p->text ? p->text : "",
                                            cut ? "incomplete" : "completed", p->logprobs));
    }
    for (size_t i = 0; !bad && i < json_array_size(p->calls); i++) {
        const json_t *c = json_array_get(p->calls, i);
        snprintf(id, sizeof id, "fc_%zu_%s", i, suffix);
        bad |= json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:O?, s:O?, s:O?}", "id", id,
                                                    "type", "function_call", "status", "completed",
                                                    "call_id", json_object_get(c, "call_id"),
                                                    "name", json_object_get(c, "name"), "arguments",
                                                    json_object_get(c, "arguments")));
    }
    if (bad) {
        json_decref(out);
        return NULL;
    }
    return out;
}

json_t *tw_bridge_response_message(const char *id, const char *text, const char *status,
                                   const json_t *logprobs)
{
    json_t *lp = logprobs ? json_deep_copy(logprobs) : json_array();
    return json_pack("{s:s, s:s, s:s, s:s, s:[{s:s, s:s, s:[], s:o}]}", "id", id, "type", "message",
                     "status", status, "role", "assistant", "content", "type", "output_text",
                     "text", text, "annotations", "logprobs", lp);
}

/* usage in the Responses form. */
static json_t *usage_of(const json_t *u)
{
    if (!u || json_is_null(u))
        return json_null();
    json_int_t in = json_integer_value(json_object_get(u, "prompt_tokens"));
    json_int_t out = json_integer_value(json_object_get(u, "completion_tokens"));
    json_int_t cached = json_integer_value(
        json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens"));
    json_int_t reasoning = json_integer_value(
        json_object_get(json_object_get(u, "completion_tokens_details"), "reasoning_tokens"));
    return json_pack("{s:I, s:{s:I}, s:I, s:{s:I}, s:I}", "input_tokens", in,
                     "input_tokens_details", "cached_tokens", cached, "output_tokens", out,
                     "output_tokens_details", "reasoning_tokens", reasoning, "total_tokens",
                     in + out);
}

json_t *tw_bridge_response_object(const tw_bridge_resp_echo *echo, const tw_bridge_resp_parts *p,
                                  const char *status)
{
    const json_t *rq = echo->request;
    const bool incomplete =
        !strcmp(status, "completed") && p->finish && !strcmp(p->finish, "length");
    json_t *output = !strcmp(status, "in_progress") ? json_array() : output_items(echo, p);
    const char *model = p->model ? p->model : json_string_value(json_object_get(rq, "model"));
    const bool whole = strcmp(status, "in_progress") != 0;
    const struct {
        const char *key;
        json_t *value;
    } f[] = {
        {"id", json_string(echo->id)},
        {"object", json_string("response")},
        {"created_at", json_integer(echo->created_at)},
        {"status", json_string(incomplete ? "incomplete" : status)},
        {"incomplete_details",
         incomplete ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null()},
        {"error", json_null()},
        {"instructions", echo_field(rq, "instructions", json_null())},
        {"model", model ? json_string(model) : json_null()},
        {"output", output},
        {"max_output_tokens", echo_field(rq, "max_output_tokens", json_null())},
        {"parallel_tool_calls", echo_field(rq, "parallel_tool_calls", json_true())},
        {"temperature", echo_field(rq, "temperature", json_real(1.0))},
        {"top_logprobs", echo_field(rq, "top_logprobs", json_integer(0))},
        {"top_p", echo_field(rq, "top_p", json_real(1.0))},
        {"tool_choice", echo_field(rq, "tool_choice", json_string("auto"))},
        {"tools", echo_field(rq, "tools", json_array())},
        {"text", echo_field(rq, "text", json_pack("{s:{s:s}}", "format", "type", "text"))},
        {"reasoning", echo_field(rq, "reasoning", json_pack("{s:n, s:n}", "effort", "summary"))},
        {"metadata", echo_field(rq, "metadata", json_object())},
        {"store", json_boolean(echo->store)},
        {"truncation", json_string("disabled")},
        {"previous_response_id", echo_field(rq, "previous_response_id", json_null())},
        {"usage", whole ? usage_of(p->usage) : json_null()},
    };
    json_t *o = json_object();
    bool bad = !o;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (bad || !f[i].value) {
            json_decref(f[i].value);
            bad = true;
        } else {
            bad = json_object_set_new(o, f[i].key, f[i].value) != 0;
        }
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}
