/* How a chat template asks the model to write a tool call, and the text that
 * opens one, so that tool_choice "required" or a named function can be
 * honoured by starting the answer with it (the model then writes the rest).
 */
#ifndef TW_TOOL_FORMAT_H
#define TW_TOOL_FORMAT_H

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
 * "required") or the named one (its name written as a JSON string, so any
 * name stays inside the quotes). *out (free()) is NUL-terminated.
 * INVALID_ARGUMENT for TW_TOOL_FORMAT_NONE or a name that is not UTF-8,
 * RESOURCE_EXHAUSTED when memory runs out. */
tw_status tw_tool_call_opener(tw_tool_format f, const char *name, char **out, tw_err *err);

#endif
