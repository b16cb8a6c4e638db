/* Engine replies → OpenAI response JSON (chat.completion, text_completion,
 * chunks, usage, logprobs, models).
 *
 * Builders return new jansson references (NULL only when memory runs out)
 * with keys in the order OpenAI sends them, so that dumps with
 * JSON_PRESERVE_ORDER read like OpenAI's own responses. Text from the engine
 * is treated as bytes: invalid UTF-8 becomes U+FFFD rather than failing.
 */
#ifndef TW_BRIDGE_RESPONSE_JSON_H
#define TW_BRIDGE_RESPONSE_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "api_error.h"
#include "request_map.h"
#include "tokenwire.pb-c.h"
#include "toolcall_parse.h"

/* What every object of one response shares. */
typedef struct tw_bridge_resp_meta {
    const char *id;          /* "chatcmpl-..." or "cmpl-..." */
    long long created;       /* Unix seconds */
    const char *model;       /* the model that answered */
    const char *fingerprint; /* system_fingerprint */
} tw_bridge_resp_meta;

/* A JSON string of s[0..len), with invalid UTF-8 replaced by U+FFFD. */
json_t *tw_bridge_json_text(const char *s, size_t len);

/* A JSON array of token ids. */
json_t *tw_bridge_token_ids_json(const uint32_t *ids, size_t n);

/* OpenAI's finish_reason for an engine FinishReason: "stop", "length" or
 * "tool_calls" (FINISH_ERROR has none and maps to "stop"; the caller reports
 * the error). */
const char *tw_bridge_finish_reason(Tokenwire__V1__FinishReason fr);

/* {"prompt_tokens", "completion_tokens", "total_tokens",
 *  "prompt_tokens_details": {"cached_tokens"},
 *  "completion_tokens_details": {"reasoning_tokens"}}; u may be NULL (zeros). */
json_t *tw_bridge_usage_json(const Tokenwire__V1__Usage *u);

/* Chat logprobs {"content": [{token, logprob, bytes, top_logprobs}], "refusal": null}:
 * the answer's tokens; those of the reasoning held apart are left out. */
json_t *tw_bridge_chat_logprobs_json(Tokenwire__V1__TokenLogprob *const *lp, size_t n,
                                     unsigned top);

/* Legacy completions logprobs {tokens, token_logprobs, top_logprobs,
 * text_offset}; offsets start at *text_offset, which is advanced. */
json_t *tw_bridge_completion_logprobs_json(Tokenwire__V1__TokenLogprob *const *lp, size_t n,
                                           unsigned top, size_t *text_offset);

/* The same for echo: the prompt's tokens first (its first token, which has
 * no log-probability, gets null in token_logprobs and top_logprobs), then
 * the answer's. */
json_t *tw_bridge_echo_logprobs_json(Tokenwire__V1__TokenLogprob *const *prompt, size_t n_prompt,
                                     Tokenwire__V1__TokenLogprob *const *lp, size_t n, unsigned top,
                                     size_t *text_offset);

/* [{"index"?, "id", "type": "function", "function": {"name", "arguments"}}];
 * with_index adds the "index" streamed deltas carry. */
json_t *tw_bridge_tool_calls_json(const tw_bridge_tool_calls *calls, bool with_index);

/* As tw_bridge_tool_calls_json for calls the engine parsed itself. */
json_t *tw_bridge_engine_tool_calls_json(Tokenwire__V1__ToolCall *const *calls, size_t n,
                                         bool with_index);

/* A whole chat.completion for a non-streaming reply. When rq asks for tool
 * parsing and a choice has raw text with calls in it, they are parsed here.
 * A choice that ended with FINISH_ERROR fails the response (500). */
tw_status tw_bridge_chat_completion_json(const tw_bridge_resp_meta *meta,
                                         const tw_bridge_gen_request *rq,
                                         const Tokenwire__V1__GenerateReply *rep, json_t **out,
                                         tw_bridge_apierr *ae);

/* A whole text_completion for a non-streaming reply. */
tw_status tw_bridge_text_completion_json(const tw_bridge_resp_meta *meta,
                                         const tw_bridge_gen_request *rq,
                                         const Tokenwire__V1__GenerateReply *rep, json_t **out,
                                         tw_bridge_apierr *ae);

/* The envelope of one streamed chunk: {id, object, created, model,
 * system_fingerprint, choices: []} (+ "usage": null when with_usage_null).
 * The caller appends to "choices". */
json_t *tw_bridge_chunk_envelope(const tw_bridge_resp_meta *meta, tw_bridge_api_kind kind,
                                 bool with_usage_null);

/* {"id", "object": "model", "created", "owned_by", ...} for one model. */
json_t *tw_bridge_model_json(const Tokenwire__V1__ModelInfo *m);

/* {"object": "list", "data": [model...]}. */
json_t *tw_bridge_model_list_json(const Tokenwire__V1__ListModelsReply *r);

#endif
