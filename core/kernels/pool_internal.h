/* Parts of the thread pool only the kernels use: the index of the thread a
 * task runs on, and scratch buffers owned by the pool. */
#ifndef TW_KERNELS_POOL_INTERNAL_H
#define TW_KERNELS_POOL_INTERNAL_H

#include <stddef.h>

#include "tw/pool.h"

/* Like tw_pool_fn, plus the index in [0, tw_pool_threads) of the thread
 * running the task (0 is the caller), for per-thread scratch. */
typedef void (*tw_pool_thread_fn)(void *ctx, int task, int n_tasks, int thread);

void tw_pool_run_threads(tw_pool *pool, tw_pool_thread_fn fn, void *ctx, int n_tasks);

/* Scratch slot `slot` (TW_POOL_SHARED, TW_POOL_RUN or a thread index)
 * grown to at least bytes, 64-byte aligned; NULL when pool is NULL or
 * allocation fails (the old buffer is then kept). Only the thread driving
 * the pool may call this, and never during a run; the contents do not
 * survive growth. TW_POOL_SHARED holds a run's inputs (quantized
 * activations), TW_POOL_RUN the bookkeeping of how its work is divided. */
#define TW_POOL_SHARED (-1)
#define TW_POOL_RUN    (-2)
void *tw_pool_scratch(tw_pool *pool, int slot, size_t bytes);

/* Bytes a thread will read, in the order it reads them. */
typedef struct tw_fetch_span {
    const void *p;
    size_t bytes;
} tw_fetch_span;

/* The most spans one thread's fetch plan holds. */
#define TW_FETCH_SPANS 8

/* Sets what pool thread `thread` fetches into its caches while it waits,
 * from the next run on: spans[0 .. n) in order, at most TW_FETCH_SPANS,
 * until a later plan replaces it. Each thread's plan is the same until
 * then however many runs pass, and a thread fetches each byte of it once.
 * Fetching never faults, so a plan left over after its weights are freed
 * costs only a few wasted loads. Only the thread driving the pool may call
 * this, and never during a run. */
void tw_pool_fetch_plan(tw_pool *pool, int thread, const tw_fetch_span *spans, int n);

/* Bytes thread `thread` has fetched of its plans since the pool started
 * (0 for a thread the pool does not have). */
size_t tw_pool_fetched(const tw_pool *pool, int thread);

#endif
