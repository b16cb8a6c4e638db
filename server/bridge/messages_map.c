#include "messages_map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_field.h"

#define PATH_MAX_LEN TW_BRIDGE_PARAM_MAX
/* Longest tool name OpenAI accepts. */
#define TOOL_NAME_MAX 64

static tw_status no_memory(tw_bridge_apierr *ae)
{
    return tw_bridge_fail(ae, TW_RESOURCE_EXHAUSTED, NULL, NULL,
                          "The request is too large to process.");
}

/* Content given as an array of parts: only text parts are understood; the
 * texts are joined with newlines, as OpenAI-compatible servers do. */
static tw_status map_content_parts(const json_t *parts, const char *path,
                                   tw_bridge_arena *arena, char **out, tw_bridge_apierr *ae)
{
    size_t n = json_array_size(parts);
    char ppath[PATH_MAX_LEN];
    if (n > TW_BRIDGE_MAX_CONTENT_PARTS)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, path, "array_above_max_length",
                              "Invalid '%s': array too long. Expected at most %d parts, but "
                              "got %zu.",
                              path, TW_BRIDGE_MAX_CONTENT_PARTS, n);
    size_t total = 0;
    for (size_t j = 0; j < n; j++) {
        const json_t *part = json_array_get(parts, j);
        tw_bridge_path_index(ppath, sizeof ppath, path, j, NULL);
        if (!json_is_object(part))
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, ppath, "invalid_type",
                                  "Invalid type for '%s': expected an object, but got %s "
                                  "instead.",
                                  ppath, tw_bridge_json_type_name(part));
        const char *type = NULL;
        char tpath[PATH_MAX_LEN];
        tw_bridge_path_index(tpath, sizeof tpath, path, j, "type");
        int r = tw_bridge_get_string(part, "type", tpath, 64, &type, NULL, ae);
        if (r < 0)
            return TW_INVALID_ARGUMENT;
        if (r == 0)
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, tpath, "missing_required_parameter",
                                  "Missing required parameter: '%s'.", tpath);
        if (strcmp(type, "text") != 0)
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, tpath, "unsupported_content_type",
                                  "Invalid value for '%s': content parts of type '%s' are not "
                                  "supported; only 'text' is.",
                                  tpath, type);
        const char *text = NULL;
        size_t len = 0;
        tw_bridge_path_index(tpath, sizeof tpath, path, j, "text");
        r = tw_bridge_get_string(part, "text", tpath, (size_t)-1 / 4, &text, &len, ae);
        if (r < 0)
            return TW_INVALID_ARGUMENT;
        if (r == 0)
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, tpath, "missing_required_parameter",
                                  "Missing required parameter: '%s'.", tpath);
        total += len + 1; /* each bounded by the body size, so no overflow */
    }
    char *buf = tw_bridge_arena_alloc(arena, total + 1);
    if (!buf)
        return no_memory(ae);
    size_t off = 0;
    for (size_t j = 0; j < n; j++) {
        const json_t *t = json_object_get(json_array_get(parts, j), "text");
        size_t len = json_string_length(t);
        if (j)
            buf[off++] = '\n';
        memcpy(buf + off, json_string_value(t), len);
        off += len;
    }
    buf[off] = '\0';
    *out = buf;
    return TW_OK;
}

/* Reads `content`; *present tells whether it was given (not absent/null). */
static tw_status map_content(const json_t *msg, const char *path, tw_bridge_arena *arena,
                             char **out, bool *present, tw_bridge_apierr *ae)
{
    const json_t *c = json_object_get(msg, "content");
    *present = false;
    if (!c || json_is_null(c))
        return TW_OK;
    *present = true;
    if (json_is_string(c)) {
        *out = (char *)json_string_value(c);
        return TW_OK;
    }
    if (json_is_array(c))
        return map_content_parts(c, path, arena, out, ae);
    return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, path, "invalid_type",
                          "Invalid type for '%s': expected one of a string or array of "
                          "objects, but got %s instead.",
                          path, tw_bridge_json_type_name(c));
}

static tw_status missing(tw_bridge_apierr *ae, const char *path)
{
    return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, path, "missing_required_parameter",
                          "Missing required parameter: '%s'.", path);
}

/* An assistant turn's earlier tool calls. `arguments` is a JSON string in
 * OpenAI's schema; an object is accepted too and sent as its JSON text. */
static tw_status map_history_tool_calls(const json_t *calls, const char *mpath,
                                        tw_bridge_arena *arena, Tokenwire__V1__ChatMessage *m,
                                        tw_bridge_apierr *ae)
{
    char path[PATH_MAX_LEN], fpath[PATH_MAX_LEN];
    size_t n = json_array_size(calls);
    snprintf(path, sizeof path, "%s.tool_calls", mpath);
    if (n > TW_BRIDGE_MAX_TOOL_CALLS)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, path, "array_above_max_length",
                              "Invalid '%s': at most %d tool calls are allowed.", path,
                              TW_BRIDGE_MAX_TOOL_CALLS);
    m->tool_calls = tw_bridge_arena_array(arena, n ? n : 1, sizeof *m->tool_calls);
    Tokenwire__V1__ToolCall *tc = tw_bridge_arena_array(arena, n ? n : 1, sizeof *tc);
    if (!m->tool_calls || !tc)
        return no_memory(ae);
    for (size_t k = 0; k < n; k++) {
        const json_t *call = json_array_get(calls, k);
        char cpath[PATH_MAX_LEN];
        tw_bridge_path_index(cpath, sizeof cpath, path, k, NULL);
        if (!json_is_object(call))
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, cpath, "invalid_type",
                                  "Invalid type for '%s': expected an object, but got %s "
                                  "instead.",
                                  cpath, tw_bridge_json_type_name(call));
        Tokenwire__V1__ToolCall init = TOKENWIRE__V1__TOOL_CALL__INIT;
        tc[k] = init;
        const char *s = NULL;
        snprintf(fpath, sizeof fpath, "%s.id", cpath);
        if (tw_bridge_get_string(call, "id", fpath, 256, &s, NULL, ae) < 0)
            return TW_INVALID_ARGUMENT;
        tc[k].id = (char *)s;
        snprintf(fpath, sizeof fpath, "%s.type", cpath);
        s = NULL;
        if (tw_bridge_get_string(call, "type", fpath, 64, &s, NULL, ae) < 0)
            return TW_INVALID_ARGUMENT;
        if (s && strcmp(s, "function") != 0)
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, fpath, "invalid_value",
                                  "Invalid value for '%s': expected 'function'.", fpath);
        json_t *fn = NULL;
        snprintf(fpath, sizeof fpath, "%s.function", cpath);
        int r = tw_bridge_get_typed(call, "function", fpath, JSON_OBJECT, &fn, ae);
        if (r < 0)
            return TW_INVALID_ARGUMENT;
        if (r == 0)
            return missing(ae, fpath);
        char npath[PATH_MAX_LEN];
        snprintf(npath, sizeof npath, "%s.function.name", cpath);
        s = NULL;
        r = tw_bridge_get_string(fn, "name", npath, TOOL_NAME_MAX, &s, NULL, ae);
        if (r < 0)
            return TW_INVALID_ARGUMENT;
        if (r == 0)
            return missing(ae, npath);
        tc[k].name = (char *)s;
        snprintf(npath, sizeof npath, "%s.function.arguments", cpath);
        const json_t *args = json_object_get(fn, "arguments");
        if (!args || json_is_null(args)) {
            tc[k].arguments_json = "{}";
        } else if (json_is_string(args)) {
            tc[k].arguments_json = (char *)json_string_value(args);
        } else if (json_is_object(args)) {
            char *dump = json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER);
            if (!dump)
                return no_memory(ae);
            tc[k].arguments_json = tw_bridge_arena_strndup(arena, dump, strlen(dump));
            free(dump);
            if (!tc[k].arguments_json)
                return no_memory(ae);
        } else {
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, npath, "invalid_type",
                                  "Invalid type for '%s': expected a string, but got %s "
                                  "instead.",
                                  npath, tw_bridge_json_type_name(args));
        }
        m->tool_calls[k] = &tc[k];
    }
    m->n_tool_calls = n;
    return TW_OK;
}

static tw_status map_one_message(const json_t *msg, size_t i, tw_bridge_arena *arena,
                                 Tokenwire__V1__ChatMessage *m, tw_bridge_apierr *ae)
{
    char mpath[PATH_MAX_LEN], path[PATH_MAX_LEN];
    tw_bridge_path_index(mpath, sizeof mpath, "messages", i, NULL);
    if (!json_is_object(msg))
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, mpath, "invalid_type",
                              "Invalid type for '%s': expected an object, but got %s instead.",
                              mpath, tw_bridge_json_type_name(msg));
    const char *role = NULL;
    tw_bridge_path_index(path, sizeof path, "messages", i, "role");
    int r = tw_bridge_get_string(msg, "role", path, 32, &role, NULL, ae);
    if (r < 0)
        return TW_INVALID_ARGUMENT;
    if (r == 0)
        return missing(ae, path);
    bool is_assistant = strcmp(role, "assistant") == 0;
    bool is_tool = strcmp(role, "tool") == 0;
    if (strcmp(role, "developer") == 0) {
        m->role = "system";
    } else if (strcmp(role, "system") == 0 || strcmp(role, "user") == 0 || is_assistant ||
               is_tool) {
        m->role = (char *)role;
    } else {
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, path, "invalid_value",
                              "Invalid value: '%s'. Supported values are: 'system', "
                              "'developer', 'user', 'assistant', and 'tool'.",
                              role);
    }

    tw_bridge_path_index(path, sizeof path, "messages", i, "content");
    bool has_content = false;
    tw_status st = map_content(msg, path, arena, &m->content, &has_content, ae);
    if (st != TW_OK)
        return st;

    const char *s = NULL;
    tw_bridge_path_index(path, sizeof path, "messages", i, "name");
    if (tw_bridge_get_string(msg, "name", path, 256, &s, NULL, ae) < 0)
        return TW_INVALID_ARGUMENT;
    m->name = (char *)s;

    s = NULL;
    tw_bridge_path_index(path, sizeof path, "messages", i, "reasoning_content");
    if (tw_bridge_get_string(msg, "reasoning_content", path, (size_t)-1 / 4, &s, NULL, ae) < 0)
        return TW_INVALID_ARGUMENT;
    m->reasoning_content = (char *)s;

    json_t *calls = NULL;
    tw_bridge_path_index(path, sizeof path, "messages", i, "tool_calls");
    r = tw_bridge_get_typed(msg, "tool_calls", path, JSON_ARRAY, &calls, ae);
    if (r < 0)
        return TW_INVALID_ARGUMENT;
    if (r > 0) {
        if (!is_assistant)
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, path, "invalid_value",
                                  "Invalid parameter: '%s' is only allowed on messages with "
                                  "role 'assistant'.",
                                  path);
        st = map_history_tool_calls(calls, mpath, arena, m, ae);
        if (st != TW_OK)
            return st;
    }

    s = NULL;
    tw_bridge_path_index(path, sizeof path, "messages", i, "tool_call_id");
    r = tw_bridge_get_string(msg, "tool_call_id", path, 256, &s, NULL, ae);
    if (r < 0)
        return TW_INVALID_ARGUMENT;
    if (is_tool && r == 0)
        return missing(ae, path);
    m->tool_call_id = (char *)s;

    /* Only an assistant turn may leave content out, and only when it says
     * something else (tool calls or reasoning). */
    if (!has_content &&
        !(is_assistant && (m->n_tool_calls > 0 || m->reasoning_content))) {
        tw_bridge_path_index(path, sizeof path, "messages", i, "content");
        return missing(ae, path);
    }
    /* SDKs send `content: null` beside tool calls; chat templates test the
     * content as a string, so it goes on as an empty one. */
    if (!has_content)
        m->content = (char *)"";
    return TW_OK;
}

tw_status tw_bridge_map_messages(const json_t *messages, tw_bridge_arena *arena,
                                 Tokenwire__V1__ChatInput *chat, tw_bridge_apierr *ae)
{
    if (!messages || json_is_null(messages))
        return missing(ae, "messages");
    if (!json_is_array(messages))
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "messages", "invalid_type",
                              "Invalid type for 'messages': expected an array, but got %s "
                              "instead.",
                              tw_bridge_json_type_name(messages));
    size_t n = json_array_size(messages);
    if (n == 0)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "messages", "empty_array",
                              "Invalid 'messages': empty array. Expected an array with "
                              "minimum length 1, but got an empty array instead.");
    if (n > TW_BRIDGE_MAX_MESSAGES)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "messages", "array_above_max_length",
                              "Invalid 'messages': array too long. Expected an array with "
                              "maximum length %d, but got an array with length %zu instead.",
                              TW_BRIDGE_MAX_MESSAGES, n);
    Tokenwire__V1__ChatMessage **ptrs = tw_bridge_arena_array(arena, n, sizeof *ptrs);
    Tokenwire__V1__ChatMessage *msgs = tw_bridge_arena_array(arena, n, sizeof *msgs);
    if (!ptrs || !msgs)
        return no_memory(ae);
    for (size_t i = 0; i < n; i++) {
        Tokenwire__V1__ChatMessage init = TOKENWIRE__V1__CHAT_MESSAGE__INIT;
        msgs[i] = init;
        tw_status st = map_one_message(json_array_get(messages, i), i, arena, &msgs[i], ae);
        if (st != TW_OK)
            return st;
        ptrs[i] = &msgs[i];
    }
    chat->messages = ptrs;
    chat->n_messages = n;
    return TW_OK;
}

static bool tool_name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > TOOL_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

static tw_status map_one_tool(const json_t *tool, size_t i, tw_bridge_arena *arena,
                              Tokenwire__V1__Tool *t, tw_bridge_apierr *ae)
{
    char tpath[PATH_MAX_LEN], path[PATH_MAX_LEN];
    tw_bridge_path_index(tpath, sizeof tpath, "tools", i, NULL);
    if (!json_is_object(tool))
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, tpath, "invalid_type",
                              "Invalid type for '%s': expected an object, but got %s instead.",
                              tpath, tw_bridge_json_type_name(tool));
    const char *type = NULL;
    tw_bridge_path_index(path, sizeof path, "tools", i, "type");
    int r = tw_bridge_get_string(tool, "type", path, 64, &type, NULL, ae);
    if (r < 0)
        return TW_INVALID_ARGUMENT;
    if (r == 0)
        return missing(ae, path);
    if (strcmp(type, "function") != 0)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, path, "invalid_value",
                              "Invalid value for '%s': only tools of type 'function' are "
                              "supported.",
                              path);
    json_t *fn = NULL;
    tw_bridge_path_index(path, sizeof path, "tools", i, "function");
    r = tw_bridge_get_typed(tool, "function", path, JSON_OBJECT, &fn, ae);
    if (r < 0)
        return TW_INVALID_ARGUMENT;
    if (r == 0)
        return missing(ae, path);
    const char *s = NULL;
    tw_bridge_path_index(path, sizeof path, "tools", i, "function.name");
    r = tw_bridge_get_string(fn, "name", path, TOOL_NAME_MAX, &s, NULL, ae);
    if (r < 0)
        return TW_INVALID_ARGUMENT;
    if (r == 0)
        return missing(ae, path);
    if (!tool_name_valid(s))
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, path, "invalid_value",
                              "Invalid '%s': '%s' does not match '^[a-zA-Z0-9_.-]{1,64}$'.",
                              path, s);
    t->name = (char *)s;
    s = NULL;
    tw_bridge_path_index(path, sizeof path, "tools", i, "function.description");
    if (tw_bridge_get_string(fn, "description", path, (size_t)-1 / 4, &s, NULL, ae) < 0)
        return TW_INVALID_ARGUMENT;
    t->description = (char *)s;
    json_t *params = NULL;
    tw_bridge_path_index(path, sizeof path, "tools", i, "function.parameters");
    r = tw_bridge_get_typed(fn, "parameters", path, JSON_OBJECT, &params, ae);
    if (r < 0)
        return TW_INVALID_ARGUMENT;
    if (r > 0) {
        char *dump = json_dumps(params, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!dump)
            return no_memory(ae);
        t->parameters_json = tw_bridge_arena_strndup(arena, dump, strlen(dump));
        free(dump);
        if (!t->parameters_json)
            return no_memory(ae);
    }
    return TW_OK;
}

static tw_status map_tool_choice(const json_t *root, Tokenwire__V1__ChatInput *chat,
                                 tw_bridge_apierr *ae)
{
    const json_t *tc = json_object_get(root, "tool_choice");
    if (!tc || json_is_null(tc))
        return TW_OK;
    if (chat->n_tools == 0)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "tool_choice", "invalid_value",
                              "Invalid value for 'tool_choice': 'tool_choice' is only allowed "
                              "when 'tools' are specified.");
    if (json_is_string(tc)) {
        const char *s = json_string_value(tc);
        if (strcmp(s, "none") && strcmp(s, "auto") && strcmp(s, "required"))
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "tool_choice", "invalid_value",
                                  "Invalid value for 'tool_choice': expected 'none', 'auto', "
                                  "'required' or a function object.");
        chat->tool_choice = (char *)s;
        return TW_OK;
    }
    if (!json_is_object(tc))
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "tool_choice", "invalid_type",
                              "Invalid type for 'tool_choice': expected a string or an "
                              "object, but got %s instead.",
                              tw_bridge_json_type_name(tc));
    json_t *fn = NULL;
    int r = tw_bridge_get_typed(tc, "function", "tool_choice.function", JSON_OBJECT, &fn, ae);
    if (r < 0)
        return TW_INVALID_ARGUMENT;
    if (r == 0)
        return missing(ae, "tool_choice.function");
    const char *name = NULL;
    r = tw_bridge_get_string(fn, "name", "tool_choice.function.name", TOOL_NAME_MAX, &name,
                             NULL, ae);
    if (r < 0)
        return TW_INVALID_ARGUMENT;
    if (r == 0)
        return missing(ae, "tool_choice.function.name");
    for (size_t i = 0; i < chat->n_tools; i++) {
        if (strcmp(chat->tools[i]->name, name) == 0) {
            chat->tool_choice = (char *)name;
            return TW_OK;
        }
    }
    return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "tool_choice.function.name",
                          "invalid_value",
                          "Invalid value for 'tool_choice': no function named '%s' was "
                          "specified in 'tools'.",
                          name);
}

tw_status tw_bridge_map_tools(const json_t *root, tw_bridge_arena *arena,
                              Tokenwire__V1__ChatInput *chat, bool *parse_calls,
                              tw_bridge_apierr *ae)
{
    *parse_calls = false;
    json_t *tools = NULL;
    int r = tw_bridge_get_typed(root, "tools", NULL, JSON_ARRAY, &tools, ae);
    if (r < 0)
        return TW_INVALID_ARGUMENT;
    size_t n = r > 0 ? json_array_size(tools) : 0;
    if (n > TW_BRIDGE_MAX_TOOLS)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "tools", "array_above_max_length",
                              "Invalid 'tools': array too long. Expected an array with "
                              "maximum length %d, but got an array with length %zu instead.",
                              TW_BRIDGE_MAX_TOOLS, n);
    if (n > 0) {
        Tokenwire__V1__Tool **ptrs = tw_bridge_arena_array(arena, n, sizeof *ptrs);
        Tokenwire__V1__Tool *t = tw_bridge_arena_array(arena, n, sizeof *t);
        if (!ptrs || !t)
            return no_memory(ae);
        for (size_t i = 0; i < n; i++) {
            Tokenwire__V1__Tool init = TOKENWIRE__V1__TOOL__INIT;
            t[i] = init;
            tw_status st = map_one_tool(json_array_get(tools, i), i, arena, &t[i], ae);
            if (st != TW_OK)
                return st;
            ptrs[i] = &t[i];
        }
        chat->tools = ptrs;
        chat->n_tools = n;
    }
    tw_status st = map_tool_choice(root, chat, ae);
    if (st != TW_OK)
        return st;
    *parse_calls = chat->n_tools > 0 &&
                   !(chat->tool_choice && strcmp(chat->tool_choice, "none") == 0);
    return TW_OK;
}
