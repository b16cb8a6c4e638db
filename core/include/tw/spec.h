/* Speculative decoding: propose several tokens cheaply, verify them with one
 * forward pass of the target model, keep the agreeing prefix.
 *
 * Proposals come from a small draft model that shares the target's
 * vocabulary, or from prompt lookup (the continuation of the most recent
 * earlier occurrence of the last 3, 2 or 1 tokens in the prompt and output so
 * far). Verification runs through tw_model_verify, which computes every
 * position exactly as plain decoding would and keeps the state after each
 * position, so rejected tokens are undone by a snapshot restore. That is what
 * keeps speculation exact on hybrid models, whose DeltaNet state cannot be
 * cut back by length.
 *
 * Exactness. With greedy sampling the caller samples each verified row as it
 * would have without speculation and keeps going while the sampled token
 * equals the proposal, so the output is identical token for token. With
 * temperature > 0, tw_spec_choose applies rejection sampling (accept the
 * draft token d with probability min(1, p(d)/q(d)), otherwise draw from
 * norm(max(0, p - q))) against the processed distributions of the request's
 * sampler, so every produced token has exactly the target's distribution.
 *
 * One round, for a sequence whose next input token t0 is committed:
 *   k = tw_spec_propose(sp, pool, t0, &drafts)      (0: decode normally)
 *   tw_spec_verify(sp, pool, seq, &rows)            (k + 1 rows of logits)
 *   for i in 0..k: pick the token of row i (tw_spec_choose or the caller's
 *       greedy sampler), commit it, stop at the first disagreement
 *   tw_spec_finish(sp, seq, kept)                   (kept = rows used)
 * A sequence that decodes a token without speculation reports it with
 * tw_spec_push so the history stays complete.
 *
 * Memory: tw_spec_create allocates everything (draft sequence, snapshot
 * slots, history, logits rows); a round allocates nothing. A tw_spec belongs
 * to one sequence and is used by one thread at a time; it must not run a
 * forward pass concurrently with another pass on the same models.
 */
#ifndef TW_SPEC_H
#define TW_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/model.h"
#include "tw/sampler.h"
#include "tw/status.h"

/* Most tokens proposed per round. A round verifies k + 1 <= 13 rows, which
 * keeps the verification inside the matmul regime that is bit-identical to
 * decoding (below 16 rows, tw/kernels.h). */
#define TW_SPEC_MAX_DRAFT 12

typedef enum tw_spec_source {
    TW_SPEC_SOURCE_LOOKUP = 0, /* prompt lookup, no model */
    TW_SPEC_SOURCE_DRAFT = 1,  /* the draft model */
} tw_spec_source;

typedef struct tw_spec tw_spec;

/* Settings of one speculator; zero fields take the defaults in brackets. */
typedef struct tw_spec_opts_core {
    tw_spec_source source;
    uint32_t max_draft;   /* upper bound of k, 1..TW_SPEC_MAX_DRAFT [8] */
    uint32_t start_draft; /* k of the first round [4, capped by max_draft] */
    /* keep k = max_draft instead of adapting it. Adapting picks the k with
     * the most tokens per second from measured round times under greedy
     * sampling, and follows acceptance alone otherwise (where the clock
     * must not steer a seeded output). */
    bool fixed_k;
    /* Adaptive policy (the engine's "auto" mode): speculation pauses while
     * its measured speed-up is below 1 and is probed again later. */
    bool auto_pause;
    /* With auto_pause: plain decode steps before the first round [3]. A
     * pause carried over from an earlier speculator's verdict
     * (tw_spec_auto_verdict), so that short requests do not each pay for
     * probing again what the last one found. */
    uint32_t start_pause;
} tw_spec_opts_core;

/* Running counters of one speculator. */
typedef struct tw_spec_counters {
    uint64_t rounds;
    uint64_t drafted;     /* tokens proposed and verified */
    uint64_t accepted;    /* of drafted */
    uint64_t produced;    /* tokens produced by rounds (accepted + one per round) */
    uint64_t spec_us;     /* time in rounds: propose + verify + rewind */
    uint64_t rewind_us;   /* of spec_us: restoring snapshots */
    uint64_t snapshot_us; /* of spec_us: saving the draft's states */
    uint64_t rewinds;
    uint64_t plain_tokens; /* decoded without speculation (tw_spec_plain_time) */
    uint64_t plain_us;
} tw_spec_counters;

/* Creates a speculator for sequences of `target` holding up to max_tokens
 * tokens. `draft` (required for TW_SPEC_SOURCE_DRAFT, ignored otherwise)
 * must have the target's vocabulary size; it gets its own sequence. The
 * sampling parameters shape the draft's proposal distribution (bias,
 * temperature, truncation; the draft keeps no penalty history). Both models
 * must outlive the speculator. */
tw_status tw_spec_create(tw_model *target, tw_model *draft, size_t max_tokens,
                         const tw_spec_opts_core *opts, const tw_sampling_params *sampling,
                         uint64_t seed, tw_spec **out, tw_err *err);

void tw_spec_free(tw_spec *sp);

/* Forgets everything and starts a new history with the tokens already in the
 * target sequence (usually the prompt). The draft catches up lazily. */
tw_status tw_spec_reset(tw_spec *sp, const uint32_t *tokens, size_t n, tw_err *err);

/* Appends tokens that entered the target sequence without speculation. */
void tw_spec_push(tw_spec *sp, const uint32_t *tokens, size_t n);

/* Reports the time of one plain decode step that produced one token for this
 * sequence: the baseline of the speed-up estimate. */
void tw_spec_plain_time(tw_spec *sp, uint64_t us);

/* Proposes up to k tokens to follow t0 (the committed token that is not yet
 * in the target sequence) and sets *drafts to them (valid until the next
 * call). Returns how many; 0 means "decode this step without speculation"
 * (paused by the policy, no lookup match, or no room left in the context).
 * With a draft model this runs the draft (and any catch-up of its
 * sequence). On error returns 0 and sets *st. */
size_t tw_spec_propose(tw_spec *sp, tw_pool *pool, uint32_t t0, size_t room,
                       const uint32_t **drafts, tw_status *st, tw_err *err);

/* Runs [t0, drafts...] through the target sequence with tw_model_verify and
 * sets *rows to the k + 1 logits rows (vocab floats each; the caller may
 * modify them). */
tw_status tw_spec_verify(tw_spec *sp, tw_pool *pool, tw_seq *seq, float **rows, tw_err *err);

/* The round tw_spec_propose set up, for a caller that verifies it inside a
 * larger pass (tw_model_verify_batch, next to other sequences) instead of
 * tw_spec_verify: t0 and the proposals in *tokens (*n = k + 1 of them) and
 * the snapshot pool their states go to. The caller then walks the rows
 * with tw_spec_choose and ends the round with tw_spec_finish as usual.
 * FAILED_PRECONDITION outside a round. */
tw_status tw_spec_round_rows(tw_spec *sp, const uint32_t **tokens, size_t *n,
                             tw_snapshot_pool **trail, tw_err *err);

/* Picks the token of verified row i (0..k) under rejection sampling, with the
 * request's sampler (whose history must already hold the tokens before
 * row i). For i < k, *accepted says whether the draft token was kept; row k
 * (everything accepted) is a plain draw from p. Greedy samplers reduce to
 * "the arg-max; accepted when it equals the draft". Modifies row. */
uint32_t tw_spec_choose(tw_spec *sp, tw_sampler *target_sampler, size_t i, float *row,
                        bool *accepted);

/* Ends the round: the first `kept` rows (1..k+1) were used, i.e. t0 and
 * kept - 1 draft tokens stay in the sequence. Rewinds the target sequence
 * (and the draft's) to that point, updates the history, the counters, the
 * adaptive k and the policy. */
tw_status tw_spec_finish(tw_spec *sp, tw_seq *seq, size_t kept, tw_err *err);

/* Counters so far. */
void tw_spec_get_counters(const tw_spec *sp, tw_spec_counters *out);

/* The auto policy's last verdict: false when none was reached yet (or the
 * speculator has no auto_pause). Otherwise *pause is 0 when speculation was
 * measured faster than plain decoding, else the pause it imposed (in decode
 * steps), to pass as start_pause to the next speculator of the same source;
 * *source says which source that was. */
bool tw_spec_auto_verdict(const tw_spec *sp, tw_spec_source *source, uint32_t *pause);

/* The rejection-sampling step on explicit distributions, exposed for tests:
 * given the target's p and the proposal's q over vocab tokens and the draft
 * token d (drawn from q), returns d with probability min(1, p[d]/q[d]) and
 * sets *accepted, or otherwise a draw from norm(max(0, p - q)). The
 * returned token is distributed exactly as p. Uses two numbers of rng at
 * most. */
uint32_t tw_spec_accept_step(const float *p, const float *q, uint32_t vocab, uint32_t d,
                             tw_rng *rng, bool *accepted);

/* Draws from a probability vector with rng (helper shared with tests). */
uint32_t tw_spec_draw(const float *p, uint32_t vocab, tw_rng *rng);

/* Prompt lookup on a token history, exposed for tests: among the earlier
 * occurrences of the last token, finds the one whose preceding tokens agree
 * with the history's for longest (up to 16; the newest among equals) and
 * copies up to max tokens that followed it into out. Returns how many (0:
 * the last token did not occur before). */
size_t tw_spec_lookup(const uint32_t *hist, size_t n_hist, uint32_t *out, size_t max);

/* tw_spec_lookup, also telling in *key_len how many tokens the chosen
 * occurrence agrees on (0 when nothing was found). */
size_t tw_spec_lookup_key(const uint32_t *hist, size_t n_hist, uint32_t *out, size_t max,
                          size_t *key_len);

#endif
