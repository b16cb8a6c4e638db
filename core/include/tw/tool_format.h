/* How a chat template asks the model to write a tool call, and the text that
 * opens one, so that tool_choice "required" or a named function can be
 * honoured by starting the answer with it (the model then writes the rest).
 */
#ifndef TW_TOOL_FORMAT_H
#define TW_TOOL_FORMAT_H

#include <stdbool.h>
#include <stddef.h>

#include "tw/status.h"

typedef enum tw_tool_format {
    TW_TOOL_FORMAT_NONE = 0,   /* the template names no format this engine knows */
    TW_TOOL_FORMAT_HERMES,     /* <tool_call>{"name": ..., "arguments": ...}</tool_call> */
    TW_TOOL_FORMAT_LLAMA_JSON, /* {"name": ..., "parameters": ...} (Llama 3.1) */
    TW_TOOL_FORMAT_MISTRAL,    /* [TOOL_CALLS][{"name": ..., "arguments": ...}] */
} tw_tool_format;

/* The format template source src (len bytes) teaches: Hermes when it writes
 * <tool_call>, Llama 3.1 JSON when it writes <|python_tag|> and
 * "parameters", Mistral when it writes [TOOL_CALLS]. Pure function. */
tw_tool_format tw_tool_format_of_template(const char *src, size_t len);

/* "none", "hermes", "llama-json" or "mistral". */
const char *tw_tool_format_name(tw_tool_format f);

/* The text an answer starts with to call some tool (name NULL: tool_choice
 * "required": the format's head only, "<tool_call>\n", "" or
 * "[TOOL_CALLS][", the call's object being the grammar's) or the named one
 * (up to its arguments: head + {"name": "f", "arguments": , the name written
 * as a JSON string, so any name stays inside the quotes). *out (free()) is
 * NUL-terminated.
 * INVALID_ARGUMENT for TW_TOOL_FORMAT_NONE or a name that is not UTF-8,
 * RESOURCE_EXHAUSTED when memory runs out. */
tw_status tw_tool_call_opener(tw_tool_format f, const char *name, char **out, tw_err *err);

/* The key of a call's arguments: "parameters" for Llama 3.1, else
 * "arguments". */
const char *tw_tool_call_args_key(tw_tool_format f);

/* What closes a call after the JSON that follows the opener: for a named
 * function (after its arguments) "}\n</tool_call>", "}" or "}]"; for
 * "required" (after the call's object) "\n</tool_call>", "" or "]". */
const char *tw_tool_call_tail(tw_tool_format f, bool named);

/* How an answer opens a tool call by itself (tool_choice "auto"), so that
 * the call can be held to the tools' grammar from there on. */
typedef struct tw_tool_trigger {
    const char *text; /* the bytes that open a call: "<tool_call>", "{", "[TOOL_CALLS]" */
    size_t keep;      /* how many of its last bytes are already the call's JSON */
    bool at_start;    /* it counts only as the answer's first bytes but whitespace */
    bool ends_answer; /* the call (Mistral: the list of calls) is the whole answer */
    bool list;        /* the JSON is a list of calls, not one call's object */
} tw_tool_trigger;

/* The trigger of format f: Hermes "<tool_call>" anywhere in the answer
 * (each call closes with "\n</tool_call>", and more may follow), Llama 3.1
 * an answer that starts with "{", Mistral "[TOOL_CALLS]" and a list. False
 * for TW_TOOL_FORMAT_NONE. */
bool tw_tool_call_trigger(tw_tool_format f, tw_tool_trigger *out);

/* How much of trigger the text ends with once byte c follows text that
 * ended with its first at bytes: the longest start of trigger that is a
 * suffix (at <= strlen(trigger) - 1 stays below 256). */
size_t tw_tool_trigger_step(const char *trigger, size_t at, unsigned char c);

#endif
