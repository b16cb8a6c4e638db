/* OpenAI's Responses API (/v1/responses) on top of chat completions.
 *
 * A Responses request is rewritten as the chat completion request it
 * means (input items to messages, instructions to a system message,
 * function tools, text.format to response_format, reasoning.effort,
 * max_output_tokens), which then goes through the chat mapping and its
 * checks; the chat answer is rewritten as a response object (output items:
 * reasoning, function calls, the message), and a chat stream as the
 * Responses stream events. Nothing is stored: previous_response_id,
 * conversation and background answers are refused.
 */
#ifndef TW_BRIDGE_RESPONSES_MAP_H
#define TW_BRIDGE_RESPONSES_MAP_H

#include <jansson.h>
#include <stdbool.h>

#include "api_error.h"

/* The chat completion request body of a Responses request body (*out, a new
 * reference). 400 naming the field for what the bridge cannot honour or
 * what is malformed. */
tw_status tw_bridge_responses_to_chat(const json_t *in, json_t **out, tw_bridge_apierr *ae);

/* What a response echoes of its request besides the output. */
typedef struct tw_bridge_resp_echo {
    const json_t *request; /* the Responses request body (borrowed) */
    const char *id;        /* "resp_..." */
    long long created_at;
} tw_bridge_resp_echo;

/* The response object of a whole chat.completion (borrowed); a new
 * reference, NULL when memory runs out. */
json_t *tw_bridge_response_of_chat(const tw_bridge_resp_echo *echo, const json_t *completion);

/* What an answer holds, whole or gathered from a stream. calls: an array
 * of {call_id, name, arguments}; usage: the chat form (NULL: none). */
typedef struct tw_bridge_resp_parts {
    const char *reasoning, *text, *finish, *model;
    const json_t *calls;
    const json_t *usage;
} tw_bridge_resp_parts;

/* The response object: status "in_progress" (no output yet) or "completed"
 * (which a finish of "length" turns into "incomplete", reason
 * max_output_tokens). A new reference; NULL when memory runs out. */
json_t *tw_bridge_response_object(const tw_bridge_resp_echo *echo, const tw_bridge_resp_parts *p,
                                  const char *status);

/* A message output item with one output_text part. */
json_t *tw_bridge_response_message(const char *id, const char *text, const char *status);

#endif
