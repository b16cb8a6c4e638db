#include "tw/tool_format.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool has(const char *src, size_t len, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= len; i++)
        if (src[i] == needle[0] && memcmp(src + i, needle, n) == 0)
            return true;
    return false;
}

tw_tool_format tw_tool_format_of_template(const char *src, size_t len)
{
    if (!src)
        return TW_TOOL_FORMAT_NONE;
    if (has(src, len, "<tool_call>"))
        return TW_TOOL_FORMAT_HERMES;
    if (has(src, len, "<|python_tag|>") && has(src, len, "\"parameters\""))
        return TW_TOOL_FORMAT_LLAMA_JSON;
    if (has(src, len, "[TOOL_CALLS]"))
        return TW_TOOL_FORMAT_MISTRAL;
    return TW_TOOL_FORMAT_NONE;
}

const char *tw_tool_format_name(tw_tool_format f)
{
    switch (f) {
    case TW_TOOL_FORMAT_HERMES:
        return "hermes";
    case TW_TOOL_FORMAT_LLAMA_JSON:
        return "llama-json";
    case TW_TOOL_FORMAT_MISTRAL:
        return "mistral";
    default:
        return "none";
    }
}

tw_status tw_tool_call_opener(tw_tool_format f, const char *name, char **out, tw_err *err)
{
    *out = NULL;
    const char *head, *args;
    switch (f) {
    case TW_TOOL_FORMAT_HERMES:
        head = "<tool_call>\n";
        args = "arguments";
        break;
    case TW_TOOL_FORMAT_LLAMA_JSON:
        head = "";
        args = "parameters";
        break;
    case TW_TOOL_FORMAT_MISTRAL:
        head = "[TOOL_CALLS][";
        args = "arguments";
        break;
    default:
        return tw_errorf(err, TW_INVALID_ARGUMENT, "no tool-call format to open a call in");
    }
    if (!name) {
        /* the call's object is left to the grammar of tw_tool_call_tail */
        *out = strdup(head);
        return *out ? TW_OK : tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    }
    json_t *s = json_string(name);
    if (!s)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tool name is not valid UTF-8");
    char *quoted = json_dumps(s, JSON_ENCODE_ANY);
    json_decref(s);
    if (!quoted)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    size_t cap = strlen(head) + strlen(quoted) + 32;
    *out = malloc(cap);
    if (*out)
        snprintf(*out, cap, "%s{\"name\": %s, \"%s\": ", head, quoted, args);
    free(quoted);
    return *out ? TW_OK : tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
}

const char *tw_tool_call_args_key(tw_tool_format f)
{
    return f == TW_TOOL_FORMAT_LLAMA_JSON ? "parameters" : "arguments";
}

const char *tw_tool_call_tail(tw_tool_format f, bool named)
{
    switch (f) {
    case TW_TOOL_FORMAT_HERMES:
        return named ? "}\n</tool_call>" : "\n</tool_call>";
    case TW_TOOL_FORMAT_LLAMA_JSON:
        return named ? "}" : "";
    case TW_TOOL_FORMAT_MISTRAL:
        return named ? "}]" : "]";
    default:
        return "";
    }
}

bool tw_tool_call_trigger(tw_tool_format f, tw_tool_trigger *out)
{
    switch (f) {
    case TW_TOOL_FORMAT_HERMES:
        *out = (tw_tool_trigger){.text = "<tool_call>"};
        return true;
    case TW_TOOL_FORMAT_LLAMA_JSON:
        *out = (tw_tool_trigger){.text = "{", .keep = 1, .at_start = true, .ends_answer = true};
        return true;
    case TW_TOOL_FORMAT_MISTRAL:
        *out = (tw_tool_trigger){.text = "[TOOL_CALLS]", .ends_answer = true, .list = true};
        return true;
    default:
        return false;
    }
}

size_t tw_tool_trigger_step(const char *trigger, size_t at, unsigned char c)
{
    for (size_t k = at + 1; k > 0; k--)
        if ((unsigned char)trigger[k - 1] == c && memcmp(trigger, trigger + at + 1 - k, k - 1) == 0)
            return k;
    return 0;
}
