/* A single activation's rows across the pool, with the slow thread's tail
 * taken by the others.
 *
 * A decode step streams every weight once, and each of its pool runs ends
 * at a barrier. The plain split gives each thread one run of rows per
 * matrix, so a thread that the machine slows holds every run back. On a
 * 2-vCPU EPYC guest one vCPU at a time took a quarter to a half longer over
 * the same bytes for minutes on end, which of the two changing with the
 * neighbours' load: per decoded qwen2-0.5b Q4_0 token the faster thread
 * waited 0.7-1.7 ms of 5.4-6.9 ms at the barriers. Here each thread still
 * reads its own run front to back, in pieces of half what is left (at
 * least OWN_MIN_BYTES) so few calls break its stream, and when done takes
 * STEAL_BYTES pieces from the back of a run another thread has not
 * reached. */
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include "kernels/matvec_internal.h"
#include "kernels/pool_internal.h"

/* The smallest piece a thread takes of its own run: smaller ones cost their
 * calls (64 KiB pieces decoded qwen2-0.5b Q4_0 ~9% slower than whole
 * runs). */
#define OWN_MIN_BYTES ((size_t)128 << 10)
/* A piece taken from another thread's run: small, as the owner may be
 * about to reach it. */
#define STEAL_BYTES ((size_t)64 << 10)
/* Parts whose widest thread's run is under this are read as the plain
 * split reads them: there the pieces and the claims cost more than a lag
 * loses. Decoding the 24M default model (runs of up to ~1 MiB a thread)
 * alternated with the plain split, 100 rounds of 32 tokens: from 256 KiB
 * on, 1.4% slower (faster in 25 rounds); from 512 KiB on, as fast (41);
 * qwen2-0.5b Q4_0 5.5% faster from 512 KiB on (35 of 40 rounds). */
#define SPLIT_MIN_BYTES ((size_t)512 << 10)

/* One thread's run of one part: rows [front, back) are still unclaimed.
 * Both ends live in one word, so a claim from either end is one CAS. */
typedef struct split_run {
    alignas(64) _Atomic uint64_t ends; /* front | back << 32 */
    uint32_t part;
    uint32_t home; /* the task that reads it front to back */
    size_t bytes;  /* of the whole run, for the decode-prefetch decision */
} split_run;

typedef struct split_job {
    const tw_mv_job *parts;
    bool pair;
    tw_rows_done_fn done;
    void *ctx;
    split_run *runs;
    size_t n_runs;
} split_job;

static inline uint64_t pack_ends(uint32_t front, uint32_t back)
{
    return (uint64_t)back << 32 | front;
}

/* Bytes of one row of a run: both matrices' for a pair. */
static size_t run_row_bytes(const split_job *j, uint32_t part)
{
    return j->pair ? j->parts[0].row_bytes + j->parts[1].row_bytes : j->parts[part].row_bytes;
}

/* Rows in about `bytes` (a piece size, at most OWN_MIN_BYTES), a multiple
 * of TW_ROW_ALIGN and at least that. */
static uint32_t rows_in(size_t bytes, size_t row_bytes)
{
    size_t r = bytes / row_bytes / TW_ROW_ALIGN * TW_ROW_ALIGN;
    return r < TW_ROW_ALIGN ? TW_ROW_ALIGN : (uint32_t)r;
}

static void do_rows(const split_job *j, uint32_t part, size_t r0, size_t r1)
{
    for (int k = 0; k < (j->pair ? 2 : 1); k++) {
        const tw_mv_job *p = &j->parts[j->pair ? (uint32_t)k : part];
        p->fn(p->w + r0 * p->row_bytes, p->row_bytes, r1 - r0, p->cols, p->acts, 1, p->y + r0,
              p->rows);
    }
    if (j->pair)
        j->done(j->ctx, r0, r1);
}

/* Claims the front piece of at least min_rows, or half of what is left
 * where that is more. */
static bool take_front(split_run *r, uint32_t min_rows, uint32_t *r0, uint32_t *r1)
{
    uint64_t v = atomic_load_explicit(&r->ends, memory_order_relaxed);
    for (;;) {
        uint32_t front = (uint32_t)v, back = (uint32_t)(v >> 32);
        if (front >= back)
            return false;
        uint32_t want = (back - front) / 2 / TW_ROW_ALIGN * TW_ROW_ALIGN;
        if (want < min_rows)
            want = min_rows;
        uint32_t to = back - front > want ? front + want : back;
        if (atomic_compare_exchange_weak_explicit(&r->ends, &v, pack_ends(to, back),
                                                  memory_order_relaxed, memory_order_relaxed)) {
            *r0 = front;
            *r1 = to;
            return true;
        }
    }
}

/* Claims a piece of about `rows` from the back, starting on a multiple of
 * TW_ROW_ALIGN. */
static bool take_back(split_run *r, uint32_t rows, uint32_t *r0, uint32_t *r1)
{
    uint64_t v = atomic_load_explicit(&r->ends, memory_order_relaxed);
    for (;;) {
        uint32_t front = (uint32_t)v, back = (uint32_t)(v >> 32);
        if (front >= back)
            return false;
        uint32_t from = back - front > rows ? (back - rows) / TW_ROW_ALIGN * TW_ROW_ALIGN : front;
        if (from < front)
            from = front;
        if (atomic_compare_exchange_weak_explicit(&r->ends, &v, pack_ends(front, from),
                                                  memory_order_relaxed, memory_order_relaxed)) {
            *r0 = from;
            *r1 = back;
            return true;
        }
    }
}

static void split_task(void *ctx, int task, int n_tasks, int thread)
{
    (void)n_tasks;
    (void)thread;
    const split_job *j = ctx;
    uint32_t r0, r1;
    for (size_t i = 0; i < j->n_runs; i++) {
        split_run *r = &j->runs[i];
        if (r->home != (uint32_t)task)
            continue;
        uint32_t min_rows = rows_in(OWN_MIN_BYTES, run_row_bytes(j, r->part));
        tw_decode_stream(r->bytes);
        while (take_front(r, min_rows, &r0, &r1))
            do_rows(j, r->part, r0, r1);
    }
    tw_decode_stream(0);
    /* the others' runs, starting past our own so two idle threads do not
     * both queue on the same one */
    for (size_t s = 1; s <= j->n_runs; s++) {
        split_run *r = &j->runs[((size_t)task + s) % j->n_runs];
        if (r->home == (uint32_t)task)
            continue;
        uint32_t rows = rows_in(STEAL_BYTES, run_row_bytes(j, r->part));
        while (take_back(r, rows, &r0, &r1))
            do_rows(j, r->part, r0, r1);
    }
}

static atomic_bool split_off;

void tw_kernels_set_decode_split(bool on)
{
    atomic_store_explicit(&split_off, !on, memory_order_relaxed);
}

bool tw_kernels_decode_split(void)
{
    return !atomic_load_explicit(&split_off, memory_order_relaxed);
}

bool tw_decode_split(tw_pool *pool, const tw_mv_job *parts, size_t n_parts, bool pair,
                     tw_rows_done_fn done, void *ctx)
{
    const int threads = tw_pool_threads(pool);
    if (threads < 2 || !tw_kernels_decode_split() || n_parts == 0 ||
        (pair && (n_parts != 2 || !done)))
        return false;
    const size_t lanes = pair ? 1 : n_parts;
    size_t n_runs = 0, widest = 0;
    for (size_t k = 0; k < lanes; k++) {
        if (parts[k].rows > UINT32_MAX / 2 || parts[k].rows_per_task == 0)
            return false;
        n_runs += (parts[k].rows + parts[k].rows_per_task - 1) / parts[k].rows_per_task;
        size_t row = pair ? parts[0].row_bytes + parts[1].row_bytes : parts[k].row_bytes;
        if (parts[k].rows_per_task * row > widest)
            widest = parts[k].rows_per_task * row;
    }
    if (widest < SPLIT_MIN_BYTES)
        return false;
    split_run *runs = tw_pool_scratch(pool, TW_POOL_RUN, n_runs * sizeof *runs);
    if (!runs)
        return false;
    split_job j = {
        .parts = parts, .pair = pair, .done = done, .ctx = ctx, .runs = runs, .n_runs = n_runs};
    size_t g = 0;
    for (size_t k = 0; k < lanes; k++) {
        const size_t rows = parts[k].rows, per = parts[k].rows_per_task;
        for (size_t r0 = 0; r0 < rows; r0 += per, g++) {
            size_t r1 = rows - r0 < per ? rows : r0 + per;
            runs[g].part = (uint32_t)k;
            runs[g].home = (uint32_t)(g % (size_t)threads);
            runs[g].bytes = (r1 - r0) * run_row_bytes(&j, (uint32_t)k);
            atomic_init(&runs[g].ends, pack_ends((uint32_t)r0, (uint32_t)r1));
        }
    }
    int tasks = n_runs < (size_t)threads ? (int)n_runs : threads;
    tw_pool_run_threads(pool, split_task, &j, tasks);
    return true;
}
