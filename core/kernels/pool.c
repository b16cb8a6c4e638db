/* Thread pool with persistent workers.
 *
 * A run is published by bumping `gen`; workers notice it while spinning or
 * are woken from a futex wait on it. Tasks are claimed from `next_task`.
 * Every worker acknowledges every run by decrementing `pending`, and the
 * caller waits for that before returning, so the job fields are never
 * rewritten while a late worker might still read them. Both waits spin first
 * because a decode step issues hundreds of short runs back to back, where a
 * futex round trip would cost more than the work.
 */
#include "tw/pool.h"

#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/pool_internal.h"

#define MAX_THREADS 256
/* How long a waiting thread spins before it sleeps, in time-stamp-counter
 * ticks (about 100 us at the 2-4 GHz such counters run at): long enough to
 * bridge the gap between two kernels of one forward pass, short enough that
 * an idle pool gives its cores back almost at once. */
#define SPIN_TICKS 300000ull
/* Where no cycle counter is at hand, spin this many pause iterations. */
#define SPIN_ITERS 4000

typedef struct scratch {
    void *p;
    size_t cap;
} scratch;

typedef struct worker {
    tw_pool *pool;
    int index;
    pthread_t thread;
} worker;

struct tw_pool {
    int n_threads;
    worker *workers; /* n_threads - 1 */

    _Atomic int gen;     /* futex word: run generation */
    _Atomic int pending; /* futex word: workers yet to finish this run */
    _Atomic int next_task;
    _Atomic int sleepers;        /* workers in (or entering) futex wait on gen */
    _Atomic int caller_sleeping; /* caller in (or entering) futex wait on pending */
    _Atomic bool stop;

    /* job of the current run; written only while no worker reads it */
    tw_pool_fn fn;
    tw_pool_thread_fn thread_fn;
    void *ctx;
    int n_tasks;

    scratch shared, run;
    scratch *per_thread; /* n_threads */
};

static void futex_wait(_Atomic int *addr, int expected)
{
    syscall(SYS_futex, (int *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic int *addr)
{
    syscall(SYS_futex, (int *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* A spin budget: true while the caller may keep spinning. */
typedef struct spin {
    unsigned long long start;
    int iters;
} spin;

static inline unsigned long long ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    return 0;
#endif
}

static inline spin spin_start(void)
{
    return (spin){ticks(), 0};
}

static inline bool spin_more(spin *s)
{
    cpu_relax();
#if defined(__x86_64__) || defined(__i386__)
    /* read the counter only every 16 pauses: rdtsc is not free either */
    if ((++s->iters & 15) != 0)
        return true;
    unsigned long long spent = ticks() - s->start;
    /* Past the first tenth, offer the core to other runnable threads: on an
     * oversubscribed machine the thread we wait for may be queued behind us. */
    if (spent > SPIN_TICKS / 10)
        sched_yield();
    return spent < SPIN_TICKS;
#else
    return ++s->iters < SPIN_ITERS;
#endif
}

static void run_tasks(tw_pool *pool, int thread)
{
    int n = pool->n_tasks;
    for (;;) {
        int t = atomic_fetch_add_explicit(&pool->next_task, 1, memory_order_relaxed);
        if (t >= n)
            break;
        if (pool->thread_fn)
            pool->thread_fn(pool->ctx, t, n, thread);
        else
            pool->fn(pool->ctx, t, n);
    }
}

static void *worker_main(void *arg)
{
    worker *self = arg;
    tw_pool *pool = self->pool;
    int seen = 0;
    for (;;) {
        int g = atomic_load_explicit(&pool->gen, memory_order_acquire);
        for (spin sp = spin_start(); g == seen && spin_more(&sp);)
            g = atomic_load_explicit(&pool->gen, memory_order_acquire);
        if (g == seen) {
            /* Announce the sleep before the final check of gen; the caller
             * bumps gen before reading sleepers, so one of us sees the other. */
            atomic_fetch_add(&pool->sleepers, 1);
            while ((g = atomic_load(&pool->gen)) == seen)
                futex_wait(&pool->gen, seen);
            atomic_fetch_sub(&pool->sleepers, 1);
        }
        seen = g;
        if (atomic_load_explicit(&pool->stop, memory_order_acquire))
            break;
        run_tasks(pool, self->index);
        if (atomic_fetch_sub(&pool->pending, 1) == 1 && atomic_load(&pool->caller_sleeping))
            futex_wake_all(&pool->pending);
    }
    return NULL;
}

static void wait_workers(tw_pool *pool)
{
    for (spin sp = spin_start(); spin_more(&sp);)
        if (atomic_load_explicit(&pool->pending, memory_order_acquire) == 0)
            return;
    atomic_store(&pool->caller_sleeping, 1);
    int p;
    while ((p = atomic_load(&pool->pending)) != 0)
        futex_wait(&pool->pending, p);
    atomic_store(&pool->caller_sleeping, 0);
}

/* Publishes the job in the pool fields and runs it to completion. */
static void run_job(tw_pool *pool)
{
    atomic_store_explicit(&pool->next_task, 0, memory_order_relaxed);
    atomic_store_explicit(&pool->pending, pool->n_threads - 1, memory_order_relaxed);
    atomic_fetch_add(&pool->gen, 1); /* seq_cst: pairs with the sleepers check */
    if (atomic_load(&pool->sleepers) > 0)
        futex_wake_all(&pool->gen);
    run_tasks(pool, 0);
    wait_workers(pool);
}

static void stop_workers(tw_pool *pool, int started)
{
    atomic_store(&pool->stop, true);
    atomic_fetch_add(&pool->gen, 1);
    futex_wake_all(&pool->gen);
    for (int i = 0; i < started; i++)
        pthread_join(pool->workers[i].thread, NULL);
}

tw_status tw_pool_create(int n_threads, tw_pool **out, tw_err *err)
{
    if (!out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "pool: NULL output pointer");
    *out = NULL;
    if (n_threads < 1 || n_threads > MAX_THREADS)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "pool: thread count %d not in [1, %d]",
                         n_threads, MAX_THREADS);
    tw_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "pool: out of memory");
    pool->n_threads = n_threads;
    pool->per_thread = calloc((size_t)n_threads, sizeof *pool->per_thread);
    pool->workers = calloc((size_t)n_threads, sizeof *pool->workers);
    if (!pool->per_thread || !pool->workers) {
        free(pool->per_thread);
        free(pool->workers);
        free(pool);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "pool: out of memory");
    }
    /* Kernels call sgemm from inside tasks; OpenBLAS's own threads would
     * oversubscribe the cores the pool already uses. */
    openblas_set_num_threads(1);

    for (int i = 0; i < n_threads - 1; i++) {
        worker *w = &pool->workers[i];
        w->pool = pool;
        w->index = i + 1;
        int rc = pthread_create(&w->thread, NULL, worker_main, w);
        if (rc != 0) {
            stop_workers(pool, i);
            free(pool->per_thread);
            free(pool->workers);
            free(pool);
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "pool: cannot start thread %d: %s",
                             i + 1, strerror(rc));
        }
    }
    *out = pool;
    return TW_OK;
}

void tw_pool_destroy(tw_pool *pool)
{
    if (!pool)
        return;
    stop_workers(pool, pool->n_threads - 1);
    for (int i = 0; i < pool->n_threads; i++)
        free(pool->per_thread[i].p);
    free(pool->shared.p);
    free(pool->run.p);
    free(pool->per_thread);
    free(pool->workers);
    free(pool);
}

int tw_pool_threads(const tw_pool *pool)
{
    return pool ? pool->n_threads : 1;
}

void tw_pool_run(tw_pool *pool, tw_pool_fn fn, void *ctx, int n_tasks)
{
    if (n_tasks <= 0 || !fn)
        return;
    if (!pool || pool->n_threads == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++)
            fn(ctx, t, n_tasks);
        return;
    }
    pool->fn = fn;
    pool->thread_fn = NULL;
    pool->ctx = ctx;
    pool->n_tasks = n_tasks;
    run_job(pool);
}

void tw_pool_run_threads(tw_pool *pool, tw_pool_thread_fn fn, void *ctx, int n_tasks)
{
    if (n_tasks <= 0 || !fn)
        return;
    if (!pool || pool->n_threads == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++)
            fn(ctx, t, n_tasks, 0);
        return;
    }
    pool->fn = NULL;
    pool->thread_fn = fn;
    pool->ctx = ctx;
    pool->n_tasks = n_tasks;
    run_job(pool);
}

void *tw_pool_scratch(tw_pool *pool, int slot, size_t bytes)
{
    if (!pool || slot < TW_POOL_RUN || slot >= pool->n_threads)
        return NULL;
    scratch *s = slot == TW_POOL_SHARED ? &pool->shared
                 : slot == TW_POOL_RUN  ? &pool->run
                                        : &pool->per_thread[slot];
    if (bytes <= s->cap)
        return s->p;
    /* Round up so a slowly growing shape does not reallocate every call. */
    size_t cap = bytes < 4096 ? 4096 : bytes;
    if (cap > SIZE_MAX - 63)
        return NULL;
    cap = (cap + 63) & ~(size_t)63;
    void *p = NULL;
    if (posix_memalign(&p, 64, cap) != 0)
        return NULL;
    free(s->p);
    s->p = p;
    s->cap = cap;
    return p;
}
