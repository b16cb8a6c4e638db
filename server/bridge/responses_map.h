/* OpenAI's Responses API (/v1/responses) on top of chat completions.
 *
 * A Responses request is rewritten as the chat completion request it
 * means (input items to messages, instructions to a system message,
 * function tools, text.format to response_format, reasoning.effort,
 * max_output_tokens), which then goes through the chat mapping and its
 * checks; the chat answer is rewritten as a response object (output items:
 * reasoning, function calls, the message), and a chat stream as the
 * Responses stream events. The answers kept for previous_response_id
 * are responses_store.c's; conversations, stored prompts and background
 * answers are refused.
 */
#ifndef TW_BRIDGE_RESPONSES_MAP_H
#define TW_BRIDGE_RESPONSES_MAP_H

#include <jansson.h>
#include <stdbool.h>

#include "api_error.h"

/* The chat completion request body of a Responses request body (*out, a new
 * reference). prior (NULL: none) holds the items of the conversation so
 * far, as tw_bridge_responses_context made them: they come after the
 * instructions and before the input. previous_response_id is the caller's
 * to resolve and is not looked at. 400 naming the field for what the
 * bridge cannot honour or what is malformed. */
tw_status tw_bridge_responses_to_chat(const json_t *in, const json_t *prior, json_t **out,
                                      tw_bridge_apierr *ae);

/* previous_response_id of a request: 0 when absent, 1 with *id set, -1
 * (ae: 400) when it is not a string of 1 to 64 bytes. */
int tw_bridge_responses_previous(const json_t *in, const char **id, tw_bridge_apierr *ae);

/* The input items a response was made from, as they are kept and listed:
 * prior's (NULL: none) followed by the request's input, each with an "id"
 * (the request's get "<kind>_<suffix of resp_id>_<index>" where they have
 * none) and messages with their content as parts. A new reference; NULL
 * when memory runs out. The request must have passed
 * tw_bridge_responses_to_chat. */
json_t *tw_bridge_responses_context(const json_t *prior, const json_t *in, const char *resp_id);

/* The items a response's successor goes on from: its input items, then its
 * output. A new reference; NULL when memory runs out. */
json_t *tw_bridge_responses_conversation(const json_t *items, const json_t *response);

/* What a response echoes of its request besides the output. */
typedef struct tw_bridge_resp_echo {
    const json_t *request; /* the Responses request body (borrowed) */
    const char *id;        /* "resp_..." */
    long long created_at;
    bool store; /* kept for later (what the response says) */
    /* Called with the final response object (completed or incomplete)
     * before it goes out, so that it is kept by the time the client has
     * it. NULL: nothing to keep. */
    void (*keep)(void *user, const json_t *response);
    void *keep_user;
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
    const json_t *logprobs; /* the text's tokens, as chat's logprobs.content; NULL: none */
} tw_bridge_resp_parts;

/* The response object: status "in_progress" (no output yet) or "completed"
 * (which a finish of "length" turns into "incomplete", reason
 * max_output_tokens). A new reference; NULL when memory runs out. */
json_t *tw_bridge_response_object(const tw_bridge_resp_echo *echo, const tw_bridge_resp_parts *p,
                                  const char *status);

/* A message output item with one output_text part (logprobs: its tokens',
 * NULL for none). */
json_t *tw_bridge_response_message(const char *id, const char *text, const char *status,
                                   const json_t *logprobs);

#endif
