/* The persistent state store: serialised prompt states (tw/seq_state.h
 * blobs) kept on disk across restarts, one zstd-compressed file per entry.
 *
 * An entry is named by SHA-256 over the model fingerprint (64 hex digits)
 * followed by the prefix's token ids as little-endian u32, and holds a
 * header (magic, format version, fingerprint, token count, payload
 * lengths, SHA-256 over the header fields and the compressed payload) and
 * the compressed token ids + state. Loading checks all of it, and the ids
 * themselves: a corrupt, truncated or foreign entry is refused with a log
 * line and removed.
 *
 * Writes go to a temp file unique to the process and call, are fsynced,
 * renamed over the entry name and the directory is fsynced, so a reader
 * (this process or another sharing the directory) sees a whole entry or
 * none. A killed writer leaves at most a temp file, which is never read
 * and is removed by the next open once its writer is gone.
 *
 * Eviction is least recently used by file mtime (a hit touches the file),
 * within a byte budget and an entry count, checked after every write.
 *
 * Threads: every function may be called from any thread. Writes queued
 * with tw_state_store_put_async() run on the store's writer thread.
 */
#ifndef TW_STATE_STORE_H
#define TW_STATE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/status.h"

typedef struct tw_state_store tw_state_store;

typedef struct tw_state_store_opts {
    const char *dir;      /* NULL or "": tw_state_store_default_dir() */
    uint64_t max_bytes;   /* total size of the entries [4 GiB] */
    uint32_t max_entries; /* [1024] */
    int level;            /* zstd level [1] */
} tw_state_store_opts;

typedef struct tw_state_store_stats {
    uint64_t lookups;  /* tw_state_store_lookup() calls */
    uint64_t hits;     /* ... that returned an entry */
    uint64_t writes;   /* entries written */
    uint64_t rejected; /* entries refused as corrupt / foreign and removed */
    uint64_t evicted;  /* entries removed by the budget */
    uint64_t bytes;    /* on disk after the last scan */
    uint64_t entries;  /* on disk after the last scan */
} tw_state_store_stats;

/* $XDG_CACHE_HOME/tokenwire/state, or ~/.cache/tokenwire/state when
 * XDG_CACHE_HOME is unset or not absolute. FAILED_PRECONDITION when neither
 * variable gives a path; RESOURCE_EXHAUSTED when cap is too small. */
tw_status tw_state_store_default_dir(char *buf, size_t cap, tw_err *err);

/* Opens (creating directories as needed) the store. Removes temp files
 * left by writers that are gone and applies the budget. Blocking (scans
 * the directory). *out is freed with tw_state_store_close(). */
tw_status tw_state_store_open(const tw_state_store_opts *opts, tw_state_store **out,
                              tw_err *err);

/* Finishes the queued writes, stops the writer thread and frees the store.
 * NULL is a no-op. */
void tw_state_store_close(tw_state_store *s);

/* The entry file name (64 hex digits + ".tws" + NUL) for a prefix. */
void tw_state_store_entry_name(const char fingerprint[65], const uint32_t *tokens, size_t n,
                               char out[69]);

/* Writes the entry for tokens[0, n) of the model `fingerprint` holding
 * `state` (len bytes, borrowed). Blocking: compresses, writes, fsyncs,
 * renames, then applies the budget. An entry of the same prefix is
 * replaced. */
tw_status tw_state_store_put(tw_state_store *s, const char fingerprint[65],
                             const uint32_t *tokens, size_t n, const void *state, size_t len,
                             tw_err *err);

/* The same on the writer thread: takes ownership of `state` (malloc'd;
 * freed by the store in every case) and copies tokens. RESOURCE_EXHAUSTED
 * (and nothing written) when more than the queue limit (max_bytes / 4,
 * at most 2 GiB) is already waiting. */
tw_status tw_state_store_put_async(tw_state_store *s, const char fingerprint[65],
                                   const uint32_t *tokens, size_t n, void *state, size_t len,
                                   tw_err *err);

/* Blocks until every queued write has finished. */
void tw_state_store_flush(tw_state_store *s);

/* Finds the longest stored prefix of tokens[0, n) among the lengths
 * n, then the multiples of `step` below n, down to min_len (>= 1), and
 * loads it: *state (malloc'd, the caller's to free) gets the state blob of
 * *state_len bytes and *n_tokens its prefix length. Entries that fail a
 * check are removed and the search goes on. NOT_FOUND when none fits. */
tw_status tw_state_store_lookup(tw_state_store *s, const char fingerprint[65],
                                const uint32_t *tokens, size_t n, size_t step, size_t min_len,
                                void **state, size_t *state_len, size_t *n_tokens, tw_err *err);

void tw_state_store_get_stats(tw_state_store *s, tw_state_store_stats *out);

/* The directory the store uses (valid while it is open). */
const char *tw_state_store_dir(const tw_state_store *s);

#endif
