/* Token sampling: turns one position's logits into the next token id.
 *
 * The processing order of a step is fixed, and every number a caller sees is
 * defined by it:
 *   1. logit bias (a bias of -100 or less bans the token),
 *   2. repetition penalty over the tokens seen (prompt and generated),
 *      presence and frequency penalties over the tokens generated, both
 *      limited to the last penalty_window tokens when that is not 0,
 *   3. temperature (temperature 0 means greedy: the arg-max of step 2),
 *   4. top-k, top-p and min-p truncation, then a draw from what is left.
 * Log-probabilities (chosen token and alternatives) are the log-softmax of
 * the logits after step 3, before truncation; for greedy decoding step 3 is
 * skipped (temperature 1). So alternatives that truncation removed still have
 * a finite log-probability, and exp() of every token's value sums to 1.
 *
 * A tw_sampler belongs to one sequence. Everything it needs is allocated by
 * tw_sampler_create and tw_sampler_configure; tw_sampler_sample allocates
 * nothing. The random stream is the sampler's own (xoshiro256**), seeded per
 * request, so the same seed, request and logits give the same tokens whatever
 * else runs in the same batch. Not thread-safe: one thread per sampler.
 */
#ifndef TW_SAMPLER_H
#define TW_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/status.h"

/* Largest number of alternatives returned per position. */
#define TW_MAX_TOP_LOGPROBS 20

/* A bias added to one token's logit (first processing step). */
typedef struct tw_logit_bias {
    uint32_t token_id;
    float bias; /* -100 or less bans the token */
} tw_logit_bias;

/* Sampling parameters of one request; start from tw_sampling_params_init(). */
typedef struct tw_sampling_params {
    float temperature;        /* 0: greedy (default 1.0) */
    uint32_t top_k;           /* 0: no limit */
    float top_p;              /* 1.0: off; must be in (0, 1] */
    float min_p;              /* 0: off; must be in [0, 1] */
    float repetition_penalty; /* 1.0: off; must be > 0 */
    float presence_penalty;   /* 0: off */
    float frequency_penalty;  /* 0: off */
    uint32_t penalty_window;  /* recent tokens the penalties look at; 0: all */
    bool has_seed;            /* false: the engine picks a random seed */
    uint64_t seed;
    const tw_logit_bias *logit_bias; /* borrowed; copied by tw_sampler_configure */
    size_t n_logit_bias;
} tw_sampling_params;

/* One alternative at a position. The sampler leaves text NULL; the engine's
 * chunks carry the token's bytes there (tw_token_logprob). */
typedef struct tw_top_logprob {
    uint32_t token_id;
    float logprob;
    const char *text;
    size_t text_len;
} tw_top_logprob;

/* What one sampling step produced. */
typedef struct tw_sample_result {
    uint32_t token;
    float logprob;                          /* of token; see the header comment */
    uint32_t n_top;                         /* alternatives filled (as asked) */
    tw_top_logprob top[TW_MAX_TOP_LOGPROBS]; /* best first */
} tw_sample_result;

typedef struct tw_sampler tw_sampler;

/* Fills p with the defaults listed in the struct. */
void tw_sampling_params_init(tw_sampling_params *p);

/* Checks ranges (temperature >= 0 and finite, top_p in (0,1], min_p in
 * [0,1], repetition_penalty > 0, finite penalties and biases, bias token ids
 * below vocab_size). INVALID_ARGUMENT names the offending field. */
tw_status tw_sampling_params_validate(const tw_sampling_params *p, uint32_t vocab_size,
                                      tw_err *err);

/* A sampler for a vocabulary of vocab_size tokens, with every per-token
 * buffer preallocated. *out is owned by the caller (tw_sampler_destroy). */
tw_status tw_sampler_create(uint32_t vocab_size, tw_sampler **out, tw_err *err);

void tw_sampler_destroy(tw_sampler *s);

/* Prepares the sampler for a new sequence: validates and copies p (the bias
 * list is copied; p may be freed afterwards), forgets the token history and
 * seeds the random stream with seed (p->seed is not consulted here, so the
 * caller decides how a request's seed maps to each of its choices). May
 * allocate (the penalty window). */
tw_status tw_sampler_configure(tw_sampler *s, const tw_sampling_params *p, uint64_t seed,
                               tw_err *err);

/* Records tokens in the history the penalties look at. generated is false for
 * prompt tokens (they count for the repetition penalty only). Ids outside
 * the vocabulary are ignored. No allocation. */
void tw_sampler_accept(tw_sampler *s, const uint32_t *tokens, size_t n, bool generated);

/* Picks the next token from logits[vocab_size]. The logits are modified in
 * place (they are the sequence's scratch row). n_top (0..TW_MAX_TOP_LOGPROBS)
 * alternatives are reported; want_logprob false skips the log-softmax when no
 * log-probability is needed. The chosen token is NOT added to the history:
 * call tw_sampler_accept when it is kept. No allocation. When every token is
 * banned the result is the token with the largest raw logit, so a step
 * always yields a valid id. */
void tw_sampler_sample(tw_sampler *s, float *logits, bool want_logprob, uint32_t n_top,
                       tw_sample_result *out);

/* The log-probability tw_sampler_sample would report for a token chosen
 * elsewhere (one the thinking controller forces), and the n_top
 * alternatives it would list, under the same processing (bias, penalties,
 * temperature; truncation does not apply, as it does not to a sampled
 * token's value). -infinity when the processing bans the token. The logits
 * are modified in place; draws no random number and records no history.
 * No allocation. */
void tw_sampler_score(tw_sampler *s, float *logits, uint32_t token, uint32_t n_top,
                      tw_sample_result *out);

/* The distribution tw_sampler_sample would draw from for these logits, as
 * probabilities: processing steps 1-4 as documented above, then the kept
 * candidates normalised (one-hot for greedy and when everything is banned).
 * Writes vocab_size floats to probs; logits are modified in place. Draws no
 * random number. Speculative decoding uses it to accept or reject draft
 * tokens against the exact distribution of the request's settings. No
 * allocation. */
void tw_sampler_probs(tw_sampler *s, float *logits, float *probs);

/* The ids the last tw_sampler_sample kept after truncation (the set it drew
 * from; one id for greedy), copied into ids up to cap; returns how many
 * there were. For tests and diagnostics. */
size_t tw_sampler_last_kept(const tw_sampler *s, uint32_t *ids, size_t cap);

/* Log-softmax over a whole row (helper shared with prompt log-probabilities):
 * writes log p(token) of row[token] into *logprob and the n_top best into top. */
void tw_logprobs_of_row(const float *row, uint32_t vocab_size, uint32_t token, uint32_t n_top,
                        float *logprob, tw_top_logprob *top);

/* The sampler's pseudo-random generator, exposed for tests and for callers
 * that need a reproducible stream (xoshiro256** seeded through splitmix64). */
typedef struct tw_rng {
    uint64_t s[4];
} tw_rng;

void tw_rng_seed(tw_rng *r, uint64_t seed);
uint64_t tw_rng_next(tw_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double tw_rng_uniform(tw_rng *r);

#endif
