/* OpenAI /v1/chat/completions and /v1/completions request bodies → the
 * engine's GenerateRequest.
 *
 * Every field is type- and range-checked; a bad one fails with a 400 whose
 * `param` names it. Unknown fields are ignored, as OpenAI-compatible servers
 * commonly do, so newer SDKs keep working.
 */
#ifndef TW_BRIDGE_REQUEST_MAP_H
#define TW_BRIDGE_REQUEST_MAP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "api_error.h"
#include "arena.h"
#include "tokenwire.pb-c.h"

/* Bounds of the request fields besides those of messages_map.h. */
#define TW_BRIDGE_MAX_N 128
#define TW_BRIDGE_MAX_STOP 16
#define TW_BRIDGE_MAX_STOP_BYTES 1024
#define TW_BRIDGE_MAX_LOGIT_BIAS 1024
#define TW_BRIDGE_MAX_TOP_LOGPROBS 20
#define TW_BRIDGE_MAX_LEGACY_LOGPROBS 5
#define TW_BRIDGE_MAX_PROMPT_TOKENS (1u << 20)
#define TW_BRIDGE_MAX_MODEL_NAME 256
/* Most prompts in one /v1/completions request (OpenAI's batch form). */
#define TW_BRIDGE_MAX_PROMPTS 64
/* Longest response_format JSON Schema, as compact JSON: the engine's limit. */
#define TW_BRIDGE_MAX_JSON_SCHEMA (256u << 10)
/* guided_choice: the engine's limits on choices. */
#define TW_BRIDGE_MAX_CHOICES      64
#define TW_BRIDGE_MAX_CHOICE_BYTES 4096
/* OpenAI's default max_tokens for /v1/completions. */
#define TW_BRIDGE_COMPLETIONS_DEFAULT_MAX_TOKENS 16

typedef enum tw_bridge_api_kind {
    TW_BRIDGE_API_CHAT,       /* /v1/chat/completions */
    TW_BRIDGE_API_COMPLETION, /* /v1/completions */
} tw_bridge_api_kind;

/* A GenerateRequest and everything it points to, plus the response options
 * that stay in the bridge. All sub-messages are members, variable parts live
 * in the arena, strings point into `root` (held by a reference). */
typedef struct tw_bridge_gen_request {
    tw_bridge_api_kind kind;
    Tokenwire__V1__GenerateRequest gen;
    Tokenwire__V1__SamplingParams sampling;
    Tokenwire__V1__StopRules stop;
    Tokenwire__V1__ThinkingOptions thinking;
    Tokenwire__V1__LogprobOptions logprobs;
    Tokenwire__V1__TokenIds token_ids;
    Tokenwire__V1__ChatInput chat;
    Tokenwire__V1__OutputFormat format; /* gen.format points here for JSON answers */

    bool stream;            /* answer with server-sent events */
    bool include_usage;     /* stream_options.include_usage */
    bool want_logprobs;     /* logprobs requested (chat: true; completions: an int) */
    unsigned top_logprobs;  /* alternatives per position */
    bool parse_tool_calls;  /* tools offered: look for calls in the output */
    bool single_tool_call;  /* parallel_tool_calls false: the first call only */
    bool return_token_ids;  /* extension: add the generated ids to each choice */
    bool echo;              /* completions: the prompt's text before each choice's */

    /* completions with several prompts: each one's text or ids (gen holds
     * the first); n_prompts is 1 for a single prompt */
    size_t n_prompts;
    const char **prompt_texts; /* NULL entry: that prompt is ids */
    Tokenwire__V1__TokenIds *prompt_ids;

    json_t *root; /* the request body; strings of gen point into it */
    tw_bridge_arena arena;
} tw_bridge_gen_request;

/* Validates a chat completion request body and fills out (which the caller
 * releases with tw_bridge_gen_request_fini, also on failure). root is
 * borrowed: out takes its own reference. */
tw_status tw_bridge_map_chat_request(json_t *root, tw_bridge_gen_request *out,
                                     tw_bridge_apierr *ae);

/* As tw_bridge_map_chat_request for a /v1/completions body. The prompt is a
 * string, an array of token ids, or an array of up to TW_BRIDGE_MAX_PROMPTS
 * of either, each answered with n choices. */
tw_status tw_bridge_map_completion_request(json_t *root, tw_bridge_gen_request *out,
                                           tw_bridge_apierr *ae);

/* Points gen (a copy of r->gen) at prompt i of a completions request and
 * ids at its token ids. */
void tw_bridge_gen_request_prompt(const tw_bridge_gen_request *r, size_t i,
                                  Tokenwire__V1__GenerateRequest *gen,
                                  Tokenwire__V1__TokenIds *ids);

/* How many of n tool calls an answer may carry: all, or the first alone
 * when the request set parallel_tool_calls to false. */
size_t tw_bridge_calls_allowed(const tw_bridge_gen_request *r, size_t n);

/* Releases what a map function allocated; safe on a zeroed struct and twice. */
void tw_bridge_gen_request_fini(tw_bridge_gen_request *r);

/* Reads an array of token ids (each 0..UINT32_MAX-1, at most max_count) into
 * an arena array. `path` names the field in errors. */
tw_status tw_bridge_map_token_ids(const json_t *arr, const char *path, size_t max_count,
                                  tw_bridge_arena *arena, uint32_t **ids, size_t *n,
                                  tw_bridge_apierr *ae);

/* The answer's format (format_map.c): response_format, or vLLM's
 * guided_json / guided_choice; r->gen.format points at r->format when one
 * is asked for. 400 for a malformed one, or for more than one. */
tw_status tw_bridge_map_format(const json_t *root, tw_bridge_gen_request *r, tw_bridge_apierr *ae);

#endif
