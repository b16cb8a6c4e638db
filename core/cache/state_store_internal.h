/* The state store's private structure, shared by state_store.c (entries,
 * directory) and state_writer.c (the writer thread). */
#ifndef TW_CACHE_STATE_STORE_INTERNAL_H
#define TW_CACHE_STATE_STORE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include "tw/state_store.h"

#define TW_STORE_PATH_MAX 4096

typedef struct store_job {
    struct store_job *next;
    char fingerprint[65];
    uint32_t *tokens;
    size_t n;
    void *state;
    size_t len;
} store_job;

struct tw_state_store {
    char dir[TW_STORE_PATH_MAX];
    uint64_t max_bytes;
    uint32_t max_entries;
    int level;

    pthread_mutex_t mu; /* stats and the queue */
    pthread_mutex_t scan_mu; /* one budget scan at a time */
    tw_state_store_stats st;

    /* writer thread (state_writer.c), under mu */
    pthread_cond_t cv;
    pthread_t thread;
    bool thread_started, stopping, busy;
    store_job *head, *tail;
    uint64_t queued_bytes, queue_limit;
};

/* Writes one entry now (tw_state_store_put). */
tw_status store_write_entry(tw_state_store *s, const char fingerprint[65],
                            const uint32_t *tokens, size_t n, const void *state, size_t len,
                            tw_err *err);

/* Scans the directory: drops stale temp files, evicts over the budget and
 * refreshes the byte / entry counts. */
void store_apply_budget(tw_state_store *s);

/* Drains the queue and joins the writer thread, if one was started. */
void store_writer_stop(tw_state_store *s);

#endif
