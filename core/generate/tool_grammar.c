/* The JSON grammar of a tool call: for a forced one, what the model writes
 * after the opening the prompt ends with, so that the answer is a whole
 * call; for one the model opens itself (tool_choice "auto"), what follows
 * the opening it wrote. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "tw/log.h"

/* A tool's parameters as a schema (any object when it has none, or when
 * they are not JSON, which the template already had to cope with). */
static json_t *parameters_of(const tw_tool *t)
{
    json_t *p = t->parameters_json ? json_loads(t->parameters_json, 0, NULL) : NULL;
    return p ? p : json_pack("{s:s}", "type", "object");
}

/* The call's object for "required". per_tool: one alternative per tool,
 * told apart by the name, each with its own arguments; otherwise a name
 * among the tools' (any string past the grammar's enum limit) and any
 * object of arguments. */
static char *call_schema(const tw_chat_input *chat, const char *key, bool per_tool, bool list)
{
    json_t *alts = json_array(), *names = json_array();
    for (size_t i = 0; alts && names && i < chat->n_tools; i++) {
        const tw_tool *t = &chat->tools[i];
        if (!t->name)
            continue;
        json_array_append_new(names, json_string(t->name));
        json_array_append_new(
            alts, json_pack("{s:s, s:{s:{s:s}, s:o}, s:[s,s], s:b}", "type", "object",
                            "properties", "name", "const", t->name, key, parameters_of(t),
                            "required", "name", key, "additionalProperties", 0));
    }
    json_t *schema = NULL;
    if (per_tool) {
        schema = json_pack("{s:O}", "anyOf", alts);
    } else {
        json_t *name = json_array_size(names) <= TW_JSON_MAX_ENUM
                           ? json_pack("{s:O}", "enum", names)
                           : json_pack("{s:s}", "type", "string");
        schema = json_pack("{s:s, s:{s:o, s:{s:s}}, s:[s,s], s:b}", "type", "object",
                           "properties", "name", name, key, "type", "object", "required", "name",
                           key, "additionalProperties", 0);
    }
    if (schema && list)
        schema = json_pack("{s:s, s:o, s:i}", "type", "array", "items", schema, "minItems", 1);
    char *text = schema ? json_dumps(schema, JSON_COMPACT) : NULL;
    json_decref(schema);
    json_decref(alts);
    json_decref(names);
    return text;
}

static tw_status compile_text(char *text, tw_json_grammar **out, tw_err *err)
{
    tw_status st = text ? tw_json_grammar_compile(text, strlen(text), out, err)
                        : tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    free(text);
    return st;
}

/* Sets the bytes that close the call; frees the grammar when it cannot. */
static tw_status with_tail(tw_json_grammar **out, const char *tail, tw_err *err)
{
    tw_status st = tw_json_grammar_set_tail(*out, tail, strlen(tail), err);
    if (st != TW_OK) {
        tw_json_grammar_free(*out);
        *out = NULL;
    }
    return st;
}

/* The grammar of a call's object (list: of a list of calls), one
 * alternative per tool; with a tool whose schema it cannot compile, any
 * object of arguments for every tool, which the log names. */
static tw_status calls_grammar(const tw_chat_input *chat, const char *key, bool list,
                               tw_json_grammar **out, tw_err *err)
{
    tw_err why;
    tw_status st = compile_text(call_schema(chat, key, true, list), out, &why);
    if (st == TW_INVALID_ARGUMENT) {
        tw_info("tool calls: arguments held to any JSON object, not to each tool's schema (%s)",
                why.msg);
        return compile_text(call_schema(chat, key, false, list), out, err);
    }
    if (st != TW_OK)
        *err = why;
    return st;
}

/* Tools' schemas may use keywords the grammar does not understand; the
 * call is then held to less (any object of arguments, which the log
 * names) rather than refused, since the caller asked for a call, not for
 * a checked one. */
tw_status tool_call_grammar(const model_entry *m, const tw_chat_input *chat, const char *name,
                            tw_json_grammar **out, tw_err *err)
{
    const char *key = tw_tool_call_args_key(m->tool_format);
    tw_err why;
    tw_status st;
    if (name) {
        const char *params = NULL;
        for (size_t i = 0; i < chat->n_tools; i++)
            if (chat->tools[i].name && !strcmp(chat->tools[i].name, name))
                params = chat->tools[i].parameters_json;
        st = tw_json_grammar_compile(params, params ? strlen(params) : 0, out, &why);
        if (st == TW_INVALID_ARGUMENT) {
            tw_info("tool %s: arguments held to any JSON object, not to its schema (%s)", name,
                    why.msg);
            st = tw_json_grammar_compile(NULL, 0, out, err);
        } else if (st != TW_OK) {
            *err = why;
        }
    } else {
        st = calls_grammar(chat, key, false, out, err);
    }
    if (st != TW_OK)
        return st;
    return with_tail(out, tw_tool_call_tail(m->tool_format, name != NULL), err);
}

/* A call the model opens by itself: its object, or Mistral's list of
 * calls, from the trigger on. */
tw_status tool_call_grammar_auto(const model_entry *m, const tw_chat_input *chat,
                                 const tw_tool_trigger *trig, tw_json_grammar **out, tw_err *err)
{
    tw_status st = calls_grammar(chat, tw_tool_call_args_key(m->tool_format), trig->list, out, err);
    if (st != TW_OK)
        return st;
    return with_tail(out, trig->list ? "" : tw_tool_call_tail(m->tool_format, false), err);
}
