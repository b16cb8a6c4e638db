/* What the matrix front end (matvec.c) shares with the split of a single
 * activation's rows across the pool (decode_split.c). */
#ifndef TW_KERNELS_MATVEC_INTERNAL_H
#define TW_KERNELS_MATVEC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/kernels_internal.h"
#include "tw/kernels.h"

/* Rows per task are rounded to this so tasks start on cache-line-friendly
 * boundaries of y. Every split of a matrix's rows falls on a multiple of it. */
#define TW_ROW_ALIGN 16

/* One matrix of a pool run: its kernel, weights, activations and output. */
typedef struct tw_mv_job {
    tw_rows_fn fn;
    const uint8_t *w;
    size_t row_bytes, rows, cols, rows_per_task;
    const tw_act *acts; /* n activation rows */
    size_t n;
    size_t chunk_rows; /* rows of W reused across the n activations */
    float *y;          /* n x rows */
} tw_mv_job;

/* Runs one activation against parts[0 .. n_parts) in one pool run. Each
 * part's rows are cut at multiples of its rows_per_task into runs, one per
 * thread a part, that a thread reads front to back in few calls; a thread
 * done with its own takes rows from the back ends of the others' in small
 * pieces, so a thread the machine slows (a busy sibling, a neighbour's
 * memory traffic) no longer holds the run back; runs too narrow for that
 * are taken whole. Run k of the whole call belongs to pool thread
 * k % threads. With pair, the parts are
 * two matrices of the same rows taken together, and done(ctx, r0, r1) runs
 * on each piece after both (r0 a multiple of TW_ROW_ALIGN, r1 one too or
 * the last row). False, for the caller to run the plain split, where the
 * split is off (tw_kernels_set_decode_split), the pool has one thread, or
 * it cannot hold the bookkeeping. */
bool tw_decode_split(tw_pool *pool, const tw_mv_job *parts, size_t n_parts, bool pair,
                     tw_rows_done_fn done, void *ctx);

/* Gives each pool thread, as its fetch plan from the next pool run on,
 * the first bytes of the rows tw_decode_split will have it read of these
 * parts (rows_per_task set as for that call), in the order it reads them.
 * Nothing where fetching ahead or the decode split is off. */
void tw_decode_fetch_plan(tw_pool *pool, const tw_mv_job *parts, size_t n_parts, bool pair);

#endif
