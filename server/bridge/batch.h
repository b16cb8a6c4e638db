/* Several prompts in one /v1/completions request: each is its own Generate,
 * run a few at a time so the engine batches their steps, and the whole
 * answers are merged into one response as OpenAI numbers them. */
#ifndef TW_BRIDGE_BATCH_H
#define TW_BRIDGE_BATCH_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "api_error.h"

/* Prompts in flight at once: few enough that one request cannot take every
 * generation the engine allows. */
#define TW_BRIDGE_BATCH_IN_FLIGHT 4

/* An encoder's embedding inputs in flight at once: its scheduler reads the
 * inputs waiting in a step in one pass over the weights (sixteen short ones
 * together ran 2.2x as fast as one by one), and each is answered in that
 * one step, so a request holds the engine's slots only briefly. */
#define TW_BRIDGE_ENCODER_IN_FLIGHT 16

/* Calls fn(i, user) for i in 0..n-1 on up to TW_BRIDGE_BATCH_IN_FLIGHT
 * threads (the caller's among them) and returns when every call has. fn
 * must be safe to run concurrently with itself. */
void tw_bridge_for_each_prompt(size_t n, void (*fn)(size_t i, void *user), void *user);

/* The same on up to `width` threads (1 to TW_BRIDGE_ENCODER_IN_FLIGHT). */
void tw_bridge_for_each_prompt_at(size_t n, size_t width, void (*fn)(size_t i, void *user),
                                  void *user);

/* The first failure in prompt order among n calls' statuses, its error
 * copied to *ae; TW_OK (ae untouched) when every call succeeded. */
tw_status tw_bridge_first_failure(const tw_status *st, const tw_bridge_apierr *aes, size_t n,
                                  tw_bridge_apierr *ae);

/* One response of n_prompts whole answers (out[i]: prompt i's, taken):
 * prompt i's choice c at index i * n + c and the usage summed. NULL when
 * memory runs out. */
json_t *tw_bridge_merge_replies(json_t **out, size_t n_prompts, uint32_t n);

#endif
