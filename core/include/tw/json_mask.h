/* Which vocabulary tokens can continue a JSON document: the per-step mask
 * of constrained decoding.
 *
 * tw_json_vocab is built once per tokenizer: the tokens that stand for text
 * (normal, byte and user-defined ones, such as a </tool_call> that a tool
 * call's tail may need; control tokens never are), sorted
 * by their bytes, so tokens that share a prefix are tried from one matcher
 * state and a refused prefix rules out every token that starts with it.
 * Tokens that are plain string characters are marked, so inside a string
 * body they are allowed without being walked. A tw_json_masker holds one
 * sequence's scratch (a matcher state per byte of the longest token); the
 * mask itself allocates nothing. */
#ifndef TW_JSON_MASK_H
#define TW_JSON_MASK_H

#include <stddef.h>
#include <stdint.h>

#include "tw/json_grammar.h"
#include "tw/status.h"
#include "tw/tokenizer.h"

typedef struct tw_json_vocab tw_json_vocab;
typedef struct tw_json_masker tw_json_masker;

/* Indexes tok's vocabulary, leaving out exclude[0..n_exclude) (the think
 * tags, which the engine reads as tags, not text) and tokens longer than
 * TW_JSON_MAX_TOKEN_BYTES: those are never allowed. */
#define TW_JSON_MAX_TOKEN_BYTES 1024
tw_status tw_json_vocab_build(const tw_tokenizer *tok, const uint32_t *exclude, size_t n_exclude,
                              tw_json_vocab **out, tw_err *err);

/* Whether the index holds token id (what the mask may allow). */
bool tw_json_vocab_has(const tw_tokenizer *tok, uint32_t id, const uint32_t *exclude,
                       size_t n_exclude);
void tw_json_vocab_free(tw_json_vocab *v);

tw_status tw_json_masker_create(const tw_json_vocab *v, tw_json_masker **out, tw_err *err);
void tw_json_masker_destroy(tw_json_masker *m);

/* Sets logits[i] to -infinity for every token i in [0, n_logits) that
 * cannot continue s: a token is kept when all its bytes are accepted, and
 * the end ids (eos[0..n_eos)) are kept when s is complete. Returns how many
 * tokens are kept (0: nothing can continue s). */
size_t tw_json_mask_logits(tw_json_masker *m, const tw_json_state *s, const uint32_t *eos,
                           size_t n_eos, float *logits, size_t n_logits);

/* The same decision as a list: allowed[i] (n_allowed bytes) is 1 for a kept
 * token and 0 otherwise. For tests and diagnostics. */
size_t tw_json_mask_allowed(tw_json_masker *m, const tw_json_state *s, const uint32_t *eos,
                            size_t n_eos, uint8_t *allowed, size_t n_allowed);

#endif
