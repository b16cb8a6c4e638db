/* Translation between wire messages (protobuf-c structs) and the engine's
 * plain C structs (tw/engine.h). The engine never sees protobuf; the wire
 * never sees engine internals. */
#ifndef TWD_TRANSLATE_H
#define TWD_TRANSLATE_H

#include "tokenwire.pb-c.h"
#include "tw/engine.h"

/* Arrays built while translating a GenerateRequest; the strings inside them
 * still point into the wire message. */
typedef struct twd_gen_scratch {
    tw_logit_bias *bias;
    tw_chat_message *messages;
    tw_tool *tools;
    tw_tool_call *calls;
} twd_gen_scratch;

/* Fills r (after tw_gen_request_init) from g. r borrows strings and arrays
 * from g and from sc (freed with twd_gen_scratch_free once the engine has
 * copied the request). INVALID_ARGUMENT for a missing prompt, a token-id
 * prompt over max_prompt_tokens, a logprob/top count out of range, an output
 * kind this engine does not know, or a JSON Schema over the engine's limit
 * (TW_JSON_SCHEMA_MAX_BYTES, checked here too so that the refusal names the
 * wire field) or given with a kind other than OUTPUT_JSON. */
tw_status twd_gen_from_wire(const Tokenwire__V1__GenerateRequest *g, uint32_t max_prompt_tokens,
                            tw_gen_request *r, twd_gen_scratch *sc, tw_err *err);

/* Fills c from a wire ChatInput, allocating its arrays in sc. */
tw_status twd_chat_from_wire(const Tokenwire__V1__ChatInput *in, tw_chat_input *c,
                             twd_gen_scratch *sc, tw_err *err);

void twd_gen_scratch_free(twd_gen_scratch *sc);

Tokenwire__V1__FinishReason twd_finish_to_wire(tw_finish_reason r);

/* Fills out (after its INIT) from u. */
void twd_usage_to_wire(const tw_usage *u, Tokenwire__V1__Usage *out);

/* Fills out (after its INIT); strings point into info. */
void twd_model_to_wire(const tw_engine_model_info *info, Tokenwire__V1__ModelInfo *out);

/* Fills out (after its INIT) from s; thinking transitions are not set. */
void twd_stats_to_wire(const tw_engine_stats *s, Tokenwire__V1__StatsReply *out);

#endif
