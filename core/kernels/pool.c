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
#include <stdalign.h>
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

/* Bytes fetched per step of a waiting thread's fetch plan: a step's
 * prefetches go out between two looks at the word it waits on. */
#define FETCH_STEP 4096

/* One thread's fetch plan (tw_pool_fetch_plan); id 0 is the empty one. */
typedef struct fetch_plan {
    unsigned id;
    int n;
    tw_fetch_span span[TW_FETCH_SPANS];
} fetch_plan;

/* How far a thread has fetched its plan: touched by that thread alone. */
typedef struct fetcher {
    alignas(64) unsigned id;
    int i;      /* span */
    size_t off; /* bytes into it */
    _Atomic size_t fetched;
} fetcher;

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

    /* Fetch plans: those set for the next run, and those of the runs
     * published as an even and an odd generation. A thread reads its plan
     * only while it waits after a run (the plan of that run's parity) and
     * the caller writes a parity's plans only when it publishes a run,
     * after every thread has finished the run before, so a plan is never
     * read while it is written. */
    fetch_plan *next, *plans[2]; /* n_threads each */
    fetcher *fetchers;           /* n_threads */
    unsigned plan_ids;
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

/* One step of the plan thread `thread` fetches while it waits after run
 * `gen`: a plan new to the thread starts from its first byte. */
static void fetch_step(tw_pool *pool, int thread, int gen)
{
    const fetch_plan *p = &pool->plans[gen & 1][thread];
    fetcher *f = &pool->fetchers[thread];
    if (f->id != p->id) {
        f->id = p->id;
        f->i = 0;
        f->off = 0;
    }
    if (f->i >= p->n)
        return;
    const tw_fetch_span *s = &p->span[f->i];
    const size_t end = s->bytes - f->off > FETCH_STEP ? f->off + FETCH_STEP : s->bytes;
    for (size_t o = f->off; o < end; o += 64)
        __builtin_prefetch((const char *)s->p + o, 0, 2);
    atomic_store_explicit(&f->fetched,
                          atomic_load_explicit(&f->fetched, memory_order_relaxed) + (end - f->off),
                          memory_order_relaxed);
    f->off = end;
    if (end == s->bytes) {
        f->i++;
        f->off = 0;
    }
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
        for (spin sp = spin_start(); g == seen && spin_more(&sp);) {
            fetch_step(pool, self->index, seen);
            g = atomic_load_explicit(&pool->gen, memory_order_acquire);
        }
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
    const int gen = atomic_load_explicit(&pool->gen, memory_order_relaxed);
    for (spin sp = spin_start(); spin_more(&sp);) {
        if (atomic_load_explicit(&pool->pending, memory_order_acquire) == 0)
            return;
        fetch_step(pool, 0, gen);
    }
    atomic_store(&pool->caller_sleeping, 1);
    int p;
    while ((p = atomic_load(&pool->pending)) != 0)
        futex_wait(&pool->pending, p);
    atomic_store(&pool->caller_sleeping, 0);
}

/* Publishes the job in the pool fields and runs it to completion. */
static void run_job(tw_pool *pool)
{
    const int gen = atomic_load_explicit(&pool->gen, memory_order_relaxed) + 1;
    fetch_plan *now = pool->plans[gen & 1], *before = pool->plans[(gen - 1) & 1];
    for (int t = 0; t < pool->n_threads; t++) {
        if (pool->next[t].id) {
            now[t] = pool->next[t];
            pool->next[t].id = 0;
        } else if (now[t].id != before[t].id) {
            now[t] = before[t];
        }
    }
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

/* The pool's own arrays and the pool. */
static void free_pool(tw_pool *pool)
{
    free(pool->per_thread);
    free(pool->workers);
    free(pool->next);
    free(pool->fetchers);
    free(pool);
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
    pool->next = calloc((size_t)n_threads * 3, sizeof *pool->next);
    pool->fetchers = aligned_alloc(64, (size_t)n_threads * sizeof *pool->fetchers);
    if (!pool->per_thread || !pool->workers || !pool->next || !pool->fetchers) {
        free_pool(pool);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "pool: out of memory");
    }
    for (int t = 0; t < n_threads; t++) {
        pool->fetchers[t].id = 0;
        pool->fetchers[t].i = 0;
        pool->fetchers[t].off = 0;
        atomic_init(&pool->fetchers[t].fetched, 0);
    }
    pool->plans[0] = pool->next + n_threads;
    pool->plans[1] = pool->next + 2 * n_threads;
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
            free_pool(pool);
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
    free_pool(pool);
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

void tw_pool_fetch_plan(tw_pool *pool, int thread, const tw_fetch_span *spans, int n)
{
    if (!pool || thread < 0 || thread >= pool->n_threads || n < 0)
        return;
    fetch_plan *p = &pool->next[thread];
    if (++pool->plan_ids == 0)
        pool->plan_ids = 1;
    p->id = pool->plan_ids;
    p->n = n < TW_FETCH_SPANS ? n : TW_FETCH_SPANS;
    for (int i = 0; i < p->n; i++)
        p->span[i] = spans[i];
}

size_t tw_pool_fetched(const tw_pool *pool, int thread)
{
    if (!pool || thread < 0 || thread >= pool->n_threads)
        return 0;
    return atomic_load_explicit(&pool->fetchers[thread].fetched, memory_order_relaxed);
}
