/* The scheduler's internals shared by its two files: scheduler.c (setup,
 * output, the loop) and sched_step.c (per-token rules and the prefill and
 * decode steps). Internal to core/generate. */
#ifndef TW_GENERATE_SCHED_INTERNAL_H
#define TW_GENERATE_SCHED_INTERNAL_H

#include "engine_internal.h"
#include "tw/spec.h"

typedef enum slot_state {
    SLOT_FREE = 0,
    SLOT_PREFILL,
    SLOT_DECODE,
    SLOT_DONE, /* finished; its last chunk is still to be sent */
} slot_state;

typedef struct text_buf {
    char *p;
    size_t len, cap;
} text_buf;

/* Most tokens kept as going on with a tool call's opening in one step. */
#define TW_SCHED_MAX_CONT 32

typedef struct slot {
    slot_state state;
    request *r;
    uint32_t index;
    model_entry *m;
    tw_seq *seq;
    engine_cache_slot cache; /* what the prefill restores and caches */
    tw_sampler *sampler;
    tw_stop *stop;
    tw_thinking *think; /* NULL: the model has no think tags */
    tw_detok *detok;    /* NULL: no tokenizer */
    tw_spec *spec;      /* NULL: no speculative decoding */
    tw_json_state *json; /* where a JSON answer stands; NULL: free text */
    tw_json_masker *jmask;
    /* json applies now (to the JSON answer, or to a call from its opening
     * to its end); in_call: it is a call's; decided: the answer's first
     * byte went to its JSON, or a call ended (until then, beside a JSON
     * answer, a call may open instead); trig_at: bytes of the trigger
     * matched so far (while choosing, json_on off means the answer took
     * the opening's first tokens); trig_off: an at_start trigger that can
     * no longer come */
    bool json_on, in_call, decided, trig_off;
    uint8_t trig_at;
    /* request->either: the answer read as a call beside json (the
     * document) until one refuses it, and the tokens each allows */
    tw_json_state *call;
    uint8_t *allowed, *allowed_call;
    /* the tokens that go on with the trigger while the answer is a JSON
     * document or a call, kept through the JSON mask (a step's scratch) */
    uint32_t cont_ids[TW_SCHED_MAX_CONT];
    float cont_logits[TW_SCHED_MAX_CONT];
    /* this step's row was masked ahead (by the decode step, for several
     * slots at once): how many tokens it kept */
    bool mask_ready;
    size_t mask_kept;
    size_t spec_rows;   /* rows this decode step: 1, or t0 + proposals */
    uint64_t spec_t0;   /* when this step's round began */

    size_t prefilled;
    float *prompt_logits; /* prompt_logprobs (choice 0): a prefill group's rows of logits */
    /* an embedding request: its vector (hidden floats); with mean pooling
     * also the running sum and a prefill group's rows of hidden states */
    float *embed, *embed_rows;
    double *embed_sum;
    uint32_t next_token; /* committed, to be fed by the next decode step */
    bool close_pending;  /* a forced </think> comes next */
    const uint32_t *forced; /* then these transition tokens */
    size_t n_forced, forced_pos;

    uint32_t n_answer, n_completion, n_reasoning;
    bool got_first;
    bool prompt_lps_sent; /* this choice's chunks carried prompt_logprobs */
    uint64_t prefill_us, decode_us, ttft_us;
    tw_force_close forced_by;
    tw_transition_kind transition;
    tw_finish_reason finish;
    const char *matched;
    tw_status error;
    char error_msg[TW_ERR_MSG_MAX];

    /* What the next chunk carries: up to one speculative round's tokens
     * plus a forced one. */
    uint32_t ids[TW_SPEC_MAX_DRAFT + 2];
    tw_token_logprob lps[TW_SPEC_MAX_DRAFT + 2];
    size_t n_ids;
    text_buf text, reasoning;
} slot;

typedef struct sched {
    tw_pool *pool;
    slot *slots;
    uint32_t n_slots;
    tw_seq **batch_seqs;
    uint32_t *batch_tokens; /* one per row */
    size_t *batch_rows;     /* per sequence */
    tw_snapshot_pool **batch_trails;
    slot **batch_slots;
    slot **mask_slots; /* a decode step's JSON slots, masked on the pool */
    float **mask_rows;
    slot **pending;
    request **starting, **ending;
    uint32_t n_starting, n_ending, cap_ending;
} sched;

/* Appends n bytes to b, growing it; false when memory is short. */
bool sched_buf_append(text_buf *b, const char *p, size_t n);

/* Ends a slot: with a finish reason, or failed with a status and message. */
void sched_slot_finish(slot *sl, tw_finish_reason why);
void sched_slot_fail(slot *sl, tw_status st, const char *msg);

/* Hands a slot's new output to its callback; a finished slot's last
 * output ends it and frees the slot (scheduler.c). */
void sched_emit(tw_engine *e, slot *sl);

/* Prompt chunks of the waiting prompts, within prefill_chunk tokens. */
void sched_prefill_step(tw_engine *e, sched *s);

/* One decode step per model over all its decoding slots. */
void sched_decode_step(tw_engine *e, sched *s);

/* Tool calls under tool_choice "auto" (sched_calls.c). */

/* A call's opening is whole: the tools' grammar applies from here,
 * starting with the trigger's kept bytes and then after[0..n) (what the
 * opening's token wrote past it). False, and left off, when those break
 * it; the caller sees to a call they already close. */
bool sched_json_open(slot *sl, const char *after, size_t n);

/* The slot's document is whole: the answer ends, but for a Hermes call,
 * after which the answer goes on freely. */
void sched_json_closed(slot *sl);

/* Beside a JSON answer, its first tokens may still open a call instead. */
bool sched_calls_choosing(const slot *sl);

/* A committed answer token, when it is the tools' business (it goes on
 * with or completes a call's opening, or the answer is free text watched
 * for one): true when taken here, false when it belongs to the slot's
 * JSON (the answer's or a call's). */
bool sched_calls_take(slot *sl, uint32_t token);

/* While choosing where the call opens as the document does (request
 * either): bans the tokens neither reading takes; how many are kept. */
size_t sched_either_mask(slot *sl, float *row);

/* While choosing: keeps the logits of the tokens that go on with a call's
 * opening (at most TW_SCHED_MAX_CONT) before the JSON mask, and puts them
 * back after it; restore returns how many it brought back. */
size_t sched_calls_save(slot *sl, const float *row);
size_t sched_calls_restore(const slot *sl, float *row, size_t n);

/* tool_choice "none" (request ban_calls): bans the tokens of row that would
 * complete a call's opening from where the answer stands (not inside a
 * thinking block); step follows a committed answer token. */
void sched_calls_ban(const slot *sl, float *row);
void sched_calls_ban_step(slot *sl, uint32_t token);

#endif
