/* OpenAI chat `messages`, `tools` and `tool_choice` → the engine's ChatInput.
 *
 * Strings in the resulting messages point into the JSON tree (which must
 * outlive the ChatInput) or into the arena; arrays live in the arena.
 */
#ifndef TW_BRIDGE_MESSAGES_MAP_H
#define TW_BRIDGE_MESSAGES_MAP_H

#include <jansson.h>
#include <stdbool.h>

#include "api_error.h"
#include "arena.h"
#include "tokenwire.pb-c.h"

/* Most messages and tools one request may carry. */
#define TW_BRIDGE_MAX_MESSAGES 4096
#define TW_BRIDGE_MAX_TOOLS 128
#define TW_BRIDGE_MAX_TOOL_CALLS 128
#define TW_BRIDGE_MAX_CONTENT_PARTS 1024

/* Fills chat->messages from the `messages` array of a chat request.
 * Roles: system, developer (sent as system), user, assistant, tool.
 * Content: a string, an array of {"type":"text","text":...} parts (joined
 * with "\n"), or null where OpenAI allows it (an assistant turn with tool
 * calls). Returns TW_OK, or TW_INVALID_ARGUMENT / TW_RESOURCE_EXHAUSTED with
 * ae naming the field. */
tw_status tw_bridge_map_messages(const json_t *messages, tw_bridge_arena *arena,
                                 Tokenwire__V1__ChatInput *chat, tw_bridge_apierr *ae);

/* Fills chat->tools and chat->tool_choice from the request's `tools` and
 * `tool_choice` (either may be absent). *parse_calls is set when tool calls
 * may come back (tools given and tool_choice is not "none"). */
tw_status tw_bridge_map_tools(const json_t *root, tw_bridge_arena *arena,
                              Tokenwire__V1__ChatInput *chat, bool *parse_calls,
                              tw_bridge_apierr *ae);

#endif
