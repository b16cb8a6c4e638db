/* Admission by memory: what a request's sequences will hold, whether it may
 * start now, and the pool of idle sequences kept for reuse.
 *
 * What is counted. Each choice of a request runs on one sequence, sized for
 * what the request can actually produce: prompt + max_tokens (+ the
 * thinking budget and tags on a model with think tags, + room for one
 * speculative round), rounded up to a size class and capped by the
 * model's context; max_tokens 0 means the whole context. Its bytes are the
 * K/V of every attention layer for that many tokens, the DeltaNet state and
 * conv window, the per-position stamps, the speculative decoder's draft
 * sequence, snapshot slots and logits rows when the request will speculate,
 * and the sampler and thinking controller. A request reserves n times that
 * when it starts and gives each share back as its choice ends. Idle
 * sequences kept for reuse are counted too, and dropped first when a
 * request needs their room.
 *
 * What is not. Weights and the per-model logits buffer are fixed costs of a
 * load, and the prefix cache keeps its own budget (cache_bytes); a budget
 * derived from the machine subtracts all three, an explicit one bounds
 * sequence memory only.
 *
 * Threads: admission_try and the sequence functions run on the scheduler
 * thread; the counters are atomics so stats can read them from anywhere.
 */
#ifndef TW_GENERATE_ADMISSION_H
#define TW_GENERATE_ADMISSION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tw/engine.h"
#include "tw/model.h"

struct tw_engine;
struct request;
struct model_entry;

typedef struct engine_mem {
    /* The explicit budget, or half of MemAvailable at create when derived
     * (the loaded models' fixed costs are then subtracted on the fly). */
    uint64_t base;
    bool derived;
    atomic_uint_least64_t reserved; /* shares of running requests */
    atomic_uint_least64_t pooled;   /* idle sequences, as last counted */
    atomic_uint_least64_t budget;   /* as last computed, for stats */
} engine_mem;

typedef enum admit_verdict {
    ADMIT_GO = 0,   /* reserved; start it */
    ADMIT_WAIT = 1, /* not now: memory frees as running requests end */
    ADMIT_NEVER = 2 /* more than the whole budget; the request's error is set */
} admit_verdict;

/* Sets up e->mem from e->opts.mem_budget_bytes (0: derived) and logs the
 * choice. */
void admission_init(struct tw_engine *e);

/* Logs what sequences of a freshly registered model cost and the budget
 * left for them (derived budgets shrink by the model's fixed costs).
 * Caller holds e->lock. */
void admission_model_loaded(struct tw_engine *e, struct model_entry *m);

/* Tokens one choice's sequence is created for. */
size_t admission_seq_tokens(const struct request *r);

/* Bytes one choice of r reserves. */
uint64_t admission_slot_bytes(const struct request *r);

/* At submit: RESOURCE_EXHAUSTED, with the numbers, for a request that could
 * not run even on an idle engine. Takes e->lock. */
tw_status admission_check(struct tw_engine *e, const struct request *r, tw_err *err);

/* In the scheduler's admission pass, under e->lock: reserves r's memory
 * (dropping idle sequences when that makes room) or says why not. */
admit_verdict admission_try(struct tw_engine *e, struct request *r);

/* A sequence for one choice of r: an idle one of exactly the size wanted,
 * or a new one. */
tw_status admission_seq_take(struct tw_engine *e, struct request *r, tw_seq **out, tw_err *err);

/* A choice of r ended: its share is released and seq (may be NULL) is kept
 * for reuse when that fits the budget, else freed. */
void admission_slot_end(struct tw_engine *e, struct request *r, struct model_entry *m,
                        tw_seq *seq);

/* r ended: whatever it still reserves is released. */
void admission_request_end(struct tw_engine *e, struct request *r);

/* Budget, reserved and idle bytes into stats. */
void admission_stats(struct tw_engine *e, tw_engine_stats *out);

#endif
