/* How the engine uses the prefix cache and the persistent state store: the
 * hooks the scheduler calls at admission and after each prefill step, and
 * the per-model counters behind the engine's stats. Internal to core/.
 *
 * Policy, per request (tw_cache_opts):
 *  - USE: restore the longest usable prefix (memory first, then disk when
 *    the disk has a longer one), store what the prefill computes.
 *  - READ_ONLY: restore only. WRITE_ONLY: store only. BYPASS: neither.
 *  - Disk writes: when the request asks to persist, or automatically when
 *    the prompt has at least persist_min_tokens tokens; the entry is the
 *    state at the prompt's last whole block (a multiple of
 *    TW_PREFIX_BLOCK), written by the store's writer thread.
 *  - At least one prompt token is always computed, for the first logits.
 *  - Prefill steps end on the absolute grid of prefill_chunk (and at the
 *    block boundaries where a snapshot or a disk entry is taken), so a
 *    prefill resumed from the cache runs its DeltaNet chunks exactly where
 *    a cold prefill does.
 * Every hook accepts a NULL cache (caching off for that model) and does
 * nothing then.
 */
#ifndef TW_CACHE_ENGINE_CACHE_H
#define TW_CACHE_ENGINE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/engine.h"
#include "tw/model.h"
#include "tw/state_store.h"

typedef struct engine_cache engine_cache;

typedef struct engine_cache_config {
    uint64_t cache_bytes;        /* prefix cache budget; 0: 1 GiB */
    bool no_prefix_cache;
    bool copy_kv;                /* restores copy rows, never map pages */
    tw_state_store *store;       /* borrowed; NULL: no persistent store */
    uint32_t persist_min_tokens; /* 0: only requests that ask to persist */
} engine_cache_config;

/* What one slot's prefill does with the caches. */
typedef struct engine_cache_slot {
    tw_cache_mode mode;
    size_t prompt_len;
    size_t mark;    /* a prompt position worth a snapshot (0: none) */
    size_t reused;  /* prompt tokens restored at admission */
    size_t disk_at; /* prefix length to write to disk (0: none) */
} engine_cache_slot;

typedef struct engine_cache_counts {
    uint64_t lookups, hits;           /* memory */
    uint64_t disk_lookups, disk_hits; /* persistent store */
    uint64_t tokens_reused;
    uint64_t tokens_mapped; /* restored from memory by mapping the cache's pages */
    uint64_t bytes;         /* memory held */
} engine_cache_counts;

/* The caches of one loaded model. An empty fingerprint disables the disk
 * (entries could not be told apart from another model's). *out is NULL
 * when both caches are off. */
tw_status engine_cache_create(tw_model *model, const char *fingerprint,
                              const engine_cache_config *cfg, engine_cache **out, tw_err *err);
void engine_cache_free(engine_cache *c);

/* Admission: sets up cs for the request and restores into seq (reset
 * first) the longest usable prefix of prompt. Returns the tokens restored,
 * which the prefill then skips. Never fails: a cache problem means a cold
 * prefill. */
size_t engine_cache_admit(engine_cache *c, engine_cache_slot *cs, tw_seq *seq,
                          const uint32_t *prompt, size_t n, tw_cache_mode mode, bool persist);

/* Where the prefill step starting at pos should end. */
size_t engine_cache_chunk_end(const engine_cache *c, const engine_cache_slot *cs, size_t pos,
                              size_t n_prompt, size_t chunk);

/* After a prefill step: caches the new blocks and, at the chosen
 * boundaries, recurrent snapshots and the disk entry. */
void engine_cache_after_chunk(engine_cache *c, engine_cache_slot *cs, const tw_seq *seq,
                              const uint32_t *prompt);

void engine_cache_get_counts(engine_cache *c, engine_cache_counts *out);

/* ---- engine glue: each never fails; a problem is logged and leaves that
 * cache off ---- */

/* The persistent store the engine options ask for (NULL: off or failed). */
tw_state_store *engine_cache_open_store(const tw_engine_opts *o);

/* The caches of a freshly loaded model (NULL: off or failed). */
engine_cache *engine_cache_for_model(tw_model *model, const char *fingerprint,
                                     const tw_engine_opts *o, tw_state_store *store);

/* Adds one model's counters to engine stats. */
void engine_cache_add_stats(engine_cache *c, tw_engine_stats *out);

/* Adds the store's engine-wide numbers to engine stats. */
void engine_cache_store_stats(tw_state_store *store, tw_engine_stats *out);

#endif
