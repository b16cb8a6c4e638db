/* A fixed-size pool of persistent worker threads for data-parallel kernels.
 *
 * One caller drives a pool at a time: tw_pool_run hands out n_tasks task
 * indices to the caller thread and the workers, and returns once every task
 * has run. Workers spin briefly after a run (a decode step issues many small
 * runs back to back) and then sleep on a futex, so an idle pool costs no CPU.
 *
 * Besides threads, a pool owns per-thread scratch memory the kernels use for
 * quantized activations and dequantized weight tiles (tw/kernels.h); that is
 * why the engine should keep one pool per engine thread rather than passing
 * NULL.
 */
#ifndef TW_POOL_H
#define TW_POOL_H

#include <stddef.h>

#include "tw/status.h"

typedef struct tw_pool tw_pool;

/* Creates a pool of n_threads threads, counting the calling thread (so
 * n_threads = 1 starts no worker and runs everything inline). n_threads must
 * be in [1, 256]. Also pins OpenBLAS to one thread, because the kernels call
 * it from inside pool tasks. The pool is owned by the caller and released with
 * tw_pool_destroy. */
tw_status tw_pool_create(int n_threads, tw_pool **out, tw_err *err);

/* Stops and joins the workers and frees the pool and its scratch. NULL is a
 * no-op. Must not be called while a tw_pool_run on the same pool is in flight. */
void tw_pool_destroy(tw_pool *pool);

/* Number of threads (caller included); 1 for NULL. */
int tw_pool_threads(const tw_pool *pool);

/* A unit of work: called once per task index in [0, n_tasks), from any pool
 * thread, possibly concurrently with other tasks of the same run. */
typedef void (*tw_pool_fn)(void *ctx, int task, int n_tasks);

/* Runs fn(ctx, t, n_tasks) for every t in [0, n_tasks) and blocks until all
 * have returned. The calling thread takes part. pool may be NULL: the tasks
 * then run inline, in order. Allocates nothing. Tasks are handed out
 * dynamically, so n_tasks may exceed the thread count. Not reentrant: fn must
 * not call tw_pool_run on the same pool, and only one thread may drive a given
 * pool at a time (use one pool per driving thread). n_tasks <= 0 is a no-op. */
void tw_pool_run(tw_pool *pool, tw_pool_fn fn, void *ctx, int n_tasks);

#endif
