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
 * reached. Runs too narrow for pieces (SPLIT_MIN_BYTES) are taken whole,
 * by their own thread or, where it has not started on one, another.
 *
 * Each run belongs to a pool thread rather than a task, so that the rows
 * a thread will read are known before the run: tw_decode_fetch_plan hands
 * them to the pool as that thread's fetch plan, which it fetches into its
 * caches while it waits between runs (fetch ahead). */
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
/* Parts whose widest thread's run is under this take their runs whole, as
 * the plain split reads them: there the pieces and the claims cost more
 * than a lag loses. Decoding the 24M default model (runs of up to ~1 MiB a thread)
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
    bool whole; /* runs taken whole, by their home or another thread */
} split_job;

static inline uint64_t pack_ends(uint32_t front, uint32_t back)
{
    return (uint64_t)back << 32 | front;
}

/* Bytes of one row of a run: both matrices' for a pair. */
static size_t run_row_bytes(const tw_mv_job *parts, bool pair, size_t part)
{
    return pair ? parts[0].row_bytes + parts[1].row_bytes : parts[part].row_bytes;
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

/* Rows of the front piece a thread claims of `left` in its own run: at
 * least min_rows, or half of what is left where that is more. */
static uint32_t front_piece(uint32_t left, uint32_t min_rows)
{
    uint32_t want = left / 2 / TW_ROW_ALIGN * TW_ROW_ALIGN;
    return want < min_rows ? min_rows : want;
}

/* Claims the front piece (front_piece) of a run. */
static bool take_front(split_run *r, uint32_t min_rows, uint32_t *r0, uint32_t *r1)
{
    uint64_t v = atomic_load_explicit(&r->ends, memory_order_relaxed);
    for (;;) {
        uint32_t front = (uint32_t)v, back = (uint32_t)(v >> 32);
        if (front >= back)
            return false;
        uint32_t want = front_piece(back - front, min_rows);
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

/* The runs of a split over the first `lanes` parts, and the bytes of the
 * widest; false where a part's rows do not fit the split's bookkeeping. */
static bool measure_runs(const tw_mv_job *parts, size_t lanes, bool pair, size_t *n_runs,
                         size_t *widest)
{
    *n_runs = *widest = 0;
    for (size_t k = 0; k < lanes; k++) {
        if (parts[k].rows > UINT32_MAX / 2 || parts[k].rows_per_task == 0)
            return false;
        *n_runs += (parts[k].rows + parts[k].rows_per_task - 1) / parts[k].rows_per_task;
        const size_t bytes = parts[k].rows_per_task * run_row_bytes(parts, pair, k);
        if (bytes > *widest)
            *widest = bytes;
    }
    return true;
}

static void split_task(void *ctx, int task, int n_tasks, int thread)
{
    (void)task;
    (void)n_tasks;
    const split_job *j = ctx;
    uint32_t r0, r1;
    /* runs are homed on pool threads, not tasks, so that a thread reads
     * the rows its fetch plan brought into its caches */
    for (size_t i = 0; i < j->n_runs; i++) {
        split_run *r = &j->runs[i];
        if (r->home != (uint32_t)thread)
            continue;
        uint32_t min_rows = j->whole
                                ? UINT32_MAX
                                : rows_in(OWN_MIN_BYTES, run_row_bytes(j->parts, j->pair, r->part));
        tw_decode_stream(r->bytes);
        while (take_front(r, min_rows, &r0, &r1))
            do_rows(j, r->part, r0, r1);
    }
    tw_decode_stream(0);
    /* the others' runs, starting past our own so two idle threads do not
     * both queue on the same one */
    for (size_t s = 1; s <= j->n_runs; s++) {
        split_run *r = &j->runs[((size_t)thread + s) % j->n_runs];
        if (r->home == (uint32_t)thread)
            continue;
        uint32_t rows =
            j->whole ? UINT32_MAX : rows_in(STEAL_BYTES, run_row_bytes(j->parts, j->pair, r->part));
        tw_decode_stream(j->whole ? r->bytes : 0);
        while (take_back(r, rows, &r0, &r1))
            do_rows(j, r->part, r0, r1);
    }
    tw_decode_stream(0);
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
    size_t n_runs, widest;
    if (!measure_runs(parts, lanes, pair, &n_runs, &widest))
        return false;
    split_run *runs = tw_pool_scratch(pool, TW_POOL_RUN, n_runs * sizeof *runs);
    if (!runs)
        return false;
    split_job j = {
        .parts = parts, .pair = pair, .done = done, .ctx = ctx, .runs = runs, .n_runs = n_runs};
    j.whole = widest < SPLIT_MIN_BYTES;
    size_t g = 0;
    for (size_t k = 0; k < lanes; k++) {
        const size_t rows = parts[k].rows, per = parts[k].rows_per_task;
        for (size_t r0 = 0; r0 < rows; r0 += per, g++) {
            size_t r1 = rows - r0 < per ? rows : r0 + per;
            runs[g].part = (uint32_t)k;
            runs[g].home = (uint32_t)(g % (size_t)threads);
            runs[g].bytes = (r1 - r0) * run_row_bytes(parts, pair, k);
            atomic_init(&runs[g].ends, pack_ends((uint32_t)r0, (uint32_t)r1));
        }
    }
    int tasks = n_runs < (size_t)threads ? (int)n_runs : threads;
    tw_pool_run_threads(pool, split_task, &j, tasks);
    return true;
}

static _Atomic size_t fetch_bytes = TW_FETCH_AHEAD_DEFAULT;

void tw_kernels_set_fetch_ahead(size_t bytes)
{
    atomic_store_explicit(&fetch_bytes, bytes < TW_FETCH_AHEAD_MAX ? bytes : TW_FETCH_AHEAD_MAX,
                          memory_order_relaxed);
}

size_t tw_kernels_fetch_ahead(void)
{
    return atomic_load_explicit(&fetch_bytes, memory_order_relaxed);
}

/* Appends span [p, p + bytes) to a plan, within what is left of its
 * bytes; false once the plan is full. */
static bool plan_span(tw_fetch_span *spans, int *n, size_t *left, const uint8_t *p, size_t bytes)
{
    if (*n == TW_FETCH_SPANS || *left == 0)
        return false;
    spans[(*n)++] = (tw_fetch_span){p, bytes < *left ? bytes : *left};
    *left -= spans[*n - 1].bytes;
    return true;
}

/* A waiting thread's fetching costs the others little: one thread streams
 * about half of what two can, so the bus has room while one waits, and
 * while the caller works between runs it is idle. Two threads, a packed
 * 2.45 MB Q4_0 matrix after another with 30 us of work on the caller
 * between them: the second took 54.1 against 65.1 us with 512 KiB
 * planned; qwen2-0.5b decode 1.01-1.03x in paired runs (Zen 5 guest). */
void tw_decode_fetch_plan(tw_pool *pool, const tw_mv_job *parts, size_t n_parts, bool pair)
{
    const int threads = tw_pool_threads(pool);
    if (threads < 2)
        return;
    const size_t lanes = pair ? 1 : n_parts;
    size_t n_runs = 0, widest = 0, budget = tw_kernels_fetch_ahead();
    /* where nothing is to be fetched the plans are emptied, so that fetch
     * ahead switched off is off from the next run on */
    if (!tw_kernels_decode_split() || n_parts == 0 || n_parts > TW_MATMUL_MAX_PARTS ||
        (pair && n_parts != 2) || !measure_runs(parts, lanes, pair, &n_runs, &widest))
        budget = 0;
    const bool whole = widest < SPLIT_MIN_BYTES;
    for (int t = 0; t < threads; t++) {
        tw_fetch_span spans[TW_FETCH_SPANS];
        int n = 0;
        size_t left = budget, g = 0;
        bool room = budget > 0;
        /* the thread's own runs in the order tw_decode_split reads them:
         * each run's first piece, both matrices' rows of it for a pair */
        for (size_t k = 0; k < lanes && room; k++) {
            const size_t rows = parts[k].rows, per = parts[k].rows_per_task;
            for (size_t r0 = 0; r0 < rows && room; r0 += per, g++) {
                if (g % (size_t)threads != (size_t)t)
                    continue;
                const size_t run = rows - r0 < per ? rows - r0 : per;
                size_t piece = run;
                if (!whole) {
                    const uint32_t min_rows = rows_in(OWN_MIN_BYTES, run_row_bytes(parts, pair, k));
                    piece = front_piece((uint32_t)run, min_rows);
                    piece = piece < run ? piece : run;
                }
                for (size_t m = 0; m < (pair ? 2 : 1) && room; m++) {
                    const tw_mv_job *p = &parts[pair ? m : k];
                    room =
                        plan_span(spans, &n, &left, p->w + r0 * p->row_bytes, piece * p->row_bytes);
                }
            }
        }
        tw_pool_fetch_plan(pool, t, spans, n);
    }
}
