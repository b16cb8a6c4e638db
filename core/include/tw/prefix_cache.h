/* The in-memory prefix cache of one model: prompt state that later
 * requests sharing a prefix restore instead of recomputing.
 *
 * Prompts are cut into blocks of TW_PREFIX_BLOCK token ids. A block is a
 * node of a tree whose path from the root is the prefix it ends; its key
 * hashes the parent's key with its own ids, so one key stands for the whole
 * prefix, and a lookup compares the ids too, so a hash collision can never
 * restore the wrong state. A node holds a copy of its block's attention
 * K/V rows, copied out of the sequence that computed them. Where a block's
 * rows fill whole pages of every K/V run (rows a multiple of 64 bytes, as
 * with a head_dim that is a multiple of 32 in f16 or 16 in f32), the copies live in one memory file
 * and a restore maps their pages into the sequence copy-on-write (tw_seq_kv_map_file): sequences
 * restored from one prefix share one copy, and a restore costs a few system calls a K/V run instead
 * of a copy of every row; elsewhere (or with opts.copy_kv) the rows are copied in. A cached node is
 * never written through by a sequence. On a model with DeltaNet layers a node may also hold the
 * recurrent state (DeltaNet state + conv window) at its end: only a node
 * with one can be resumed from, so the caller chooses the boundaries that
 * matter (see tw_prefix_cache_wants_snapshot()).
 *
 * Memory: nodes are evicted least recently used first, leaves only (a node
 * with children is the prefix of something cached), within max_bytes.
 * Nodes a call is working on, and nodes whose pages a sequence has mapped
 * (until that sequence is reset or freed), are pinned by a reference count
 * and never evicted under it. A sequence may outlive the cache it was
 * restored from: what it maps stays until it lets go.
 *
 * Threads: every call takes the cache's mutex, so any thread may call; the
 * sequence passed in must not be in a forward pass meanwhile.
 */
#ifndef TW_PREFIX_CACHE_H
#define TW_PREFIX_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/model.h"
#include "tw/status.h"

/* Tokens per block. Equal to the DeltaNet prefill chunk, so a prefill
 * resumed at a block boundary walks the same chunk grid as one from 0. */
#define TW_PREFIX_BLOCK 64

typedef struct tw_prefix_cache tw_prefix_cache;

typedef struct tw_prefix_cache_opts {
    uint64_t max_bytes;       /* memory budget [1 GiB] */
    uint32_t snapshot_every;  /* recurrent snapshot every this many blocks [32] */
    bool copy_kv;             /* restore by copying K/V rows, never by mapping them [false] */
} tw_prefix_cache_opts;

typedef struct tw_prefix_cache_stats {
    uint64_t lookups;       /* tw_prefix_cache_restore() calls */
    uint64_t hits;          /* ... that restored at least one block */
    uint64_t tokens_reused; /* tokens restored */
    uint64_t tokens_mapped; /* ... of them mapped from the cache's pages, not copied */
    uint64_t bytes;         /* memory held now */
    uint64_t nodes;         /* blocks held now */
    uint64_t snapshots;     /* recurrent snapshots held now */
    uint64_t evictions;     /* nodes evicted so far */
} tw_prefix_cache_stats;

/* An empty cache for sequences of `model` (which must outlive it). opts
 * may be NULL for defaults. */
tw_status tw_prefix_cache_create(tw_model *model, const tw_prefix_cache_opts *opts,
                                 tw_prefix_cache **out, tw_err *err);

/* Frees the cache and every node. NULL is a no-op. */
void tw_prefix_cache_free(tw_prefix_cache *c);

/* Restores into seq (whose previous state is discarded) the longest cached
 * prefix of tokens[0, n) that is at most `limit` tokens and can be resumed
 * from (a block boundary; on a recurrent model one with a snapshot).
 * *restored gets its length (0: nothing cached; seq is then reset). Counts
 * a lookup, and a hit when *restored > 0. Errors only for bad arguments. */
tw_status tw_prefix_cache_restore(tw_prefix_cache *c, tw_seq *seq, const uint32_t *tokens,
                                  size_t n, size_t limit, size_t *restored, tw_err *err);

/* Caches what seq holds: tokens[0, tw_seq_len(seq)) are the ids it was fed.
 * Every complete block not cached yet gets a node with its K/V rows; when
 * `snapshot` is true, the length is a block boundary and the model is
 * recurrent, the node ending there also gets the recurrent state. Stops
 * quietly when the budget cannot make room (everything else pinned or
 * newer); returns the number of tokens now cached along this prefix in
 * *cached (may be NULL). */
tw_status tw_prefix_cache_insert(tw_prefix_cache *c, const tw_seq *seq, const uint32_t *tokens,
                                 bool snapshot, size_t *cached, tw_err *err);

/* Whether a prefill of a prompt of prompt_len tokens should keep a
 * recurrent snapshot at position pos: block boundaries at the end of the
 * prompt's last whole block, at the end of the block holding `mark` (a
 * position the caller expects to be shared, such as the end of a system
 * prompt; 0 for none) and every snapshot_every blocks. Always false on a
 * pure-attention model (its K/V alone resumes anywhere on a block). */
bool tw_prefix_cache_wants_snapshot(const tw_prefix_cache *c, size_t pos, size_t prompt_len,
                                    size_t mark);

/* The first position in (pos, limit] where tw_prefix_cache_wants_snapshot()
 * holds, or limit when there is none: where a prefill step should end. */
size_t tw_prefix_cache_next_stop(const tw_prefix_cache *c, size_t pos, size_t limit,
                                 size_t prompt_len, size_t mark);

/* Drops every node that is not pinned. */
void tw_prefix_cache_clear(tw_prefix_cache *c);

void tw_prefix_cache_get_stats(tw_prefix_cache *c, tw_prefix_cache_stats *out);

/* Whether restores map the cache's pages (true) or copy rows (false: the
 * model's K/V rows do not fill pages, opts.copy_kv, or no memory file could
 * be had). NULL: false. */
bool tw_prefix_cache_maps(const tw_prefix_cache *c);

#endif
