/* Front end of the matrix kernels: validates shapes, quantizes activations
 * once into pool scratch, splits rows across pool tasks and, for prefill,
 * feeds dequantized weight tiles to OpenBLAS. */
#include <cblas.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_internal.h"
#include "kernels/matvec_internal.h"
#include "kernels/pool_internal.h"
#include "tw/kernels.h"

/* Columns whose quantized activations fit the on-stack buffer used when
 * there is no pool scratch; wider rows are processed in column chunks. */
#define STACK_COLS 8192
#define STACK_ACT_BYTES                                                                        \
    (STACK_COLS + STACK_COLS / 32 * 4 + STACK_COLS / 16 * 2 + STACK_COLS + STACK_COLS / 32 * 4 + \
     5 * 64)
/* Rows per accumulation group of the chunked path. */
#define CHUNK_ROWS 64
/* Below this many activation rows, matmul uses the integer kernels with
 * each weight chunk reused across the batch; from here on, types for which
 * prefill_tiles() says no switch to dequantized tiles and sgemm. 17, so a
 * full decode batch or speculative verify of 16 rows stays on the integer
 * kernels and bit-identical to single decode on every ISA. */
#define BLAS_MIN_N (TW_MATMUL_EXACT_ROWS + 1)
/* Target bytes of one dequantized f32 weight tile, and the fewest rows a
 * tile may have: sgemm slows down sharply on narrow tiles (896x4864 weights
 * went from 74 to 89 GFLOP/s when tiles grew from 16 to 64 rows). */
#define TILE_BYTES (1024 * 1024)
_Static_assert(TILE_BYTES >= TW_PANELS_SCRATCH_BYTES,
               "the half-precision panels pack into a thread's tile scratch");
#define TILE_MIN_ROWS 64
#define TILE_ROWS 256
/* A batch's activations hold at least this many values before quantizing
 * them is split across the pool. */
#define PARALLEL_PREPARE_VALUES 16384

static size_t min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Bytes into a row where column c starts (c a multiple of the block size). */
static size_t col_offset(tw_type type, size_t c)
{
    return c / tw_type_block_elems(type) * tw_type_block_bytes(type);
}

/* Single-threaded matvec with activations on the stack, for a NULL pool or
 * when scratch cannot be allocated. */
static void matvec_stack(const tw_isa_table *t, tw_type type, const uint8_t *w,
                         size_t row_bytes, size_t rows, size_t cols, const float *x, float *y)
{
    int k = tw_ktype_index(type);
    tw_act_kind kind = tw_act_kind_for(type);
    alignas(64) uint8_t buf[STACK_ACT_BYTES];
    tw_act act = {.x = x};
    if (kind == TW_ACT_F32 || cols <= STACK_COLS) {
        if (kind != TW_ACT_F32) {
            tw_act_layout(kind, cols, buf, &act);
            t->quant_act[kind](cols, &act);
        }
        t->rows[k](w, row_bytes, rows, cols, &act, 1, y, rows);
        return;
    }
    float part[CHUNK_ROWS];
    for (size_t r0 = 0; r0 < rows; r0 += CHUNK_ROWS) {
        size_t nr = min_sz(CHUNK_ROWS, rows - r0);
        for (size_t i = 0; i < nr; i++)
            y[r0 + i] = 0.0f;
        for (size_t c0 = 0; c0 < cols; c0 += STACK_COLS) {
            size_t nc = min_sz(STACK_COLS, cols - c0);
            act.x = x + c0;
            tw_act_layout(kind, nc, buf, &act);
            t->quant_act[kind](nc, &act);
            if (tw_type_packed(type)) {
                /* packed blocks of a chunk are not a row slice: continue
                 * each output's own chain, the pool path's result exactly */
                const size_t be = tw_type_block_elems(type);
                for (size_t i = 0; i < nr; i++)
                    y[r0 + i] = tw_r8_dot(type, w + r0 * row_bytes, row_bytes, nr, i, c0 / be,
                                          (c0 + nc) / be, &act, y[r0 + i]);
                continue;
            }
            t->rows[k](w + r0 * row_bytes + col_offset(type, c0), row_bytes, nr, nc, &act, 1, part,
                       nr);
            for (size_t i = 0; i < nr; i++)
                y[r0 + i] += part[i];
        }
    }
}

static void mv_task(void *ctx, int task, int n_tasks, int thread)
{
    (void)n_tasks;
    (void)thread;
    const tw_mv_job *j = ctx;
    size_t r0 = (size_t)task * j->rows_per_task;
    size_t r1 = min_sz(j->rows, r0 + j->rows_per_task);
    for (size_t c = r0; c < r1; c += j->chunk_rows) {
        size_t nr = min_sz(j->chunk_rows, r1 - c);
        j->fn(j->w + c * j->row_bytes, j->row_bytes, nr, j->cols, j->acts, j->n, j->y + c, j->rows);
    }
}

/* Splits `rows` into tasks: for a batch, two per thread so a thread
 * delayed by the OS does not hold the others back for long, but never so
 * small that task overhead shows. A single activation streams the weights,
 * so it takes one run of rows per thread: every task start is a jump the
 * prefetchers have not seen coming, and a task under
 * TW_DECODE_PREFETCH_MIN_BYTES does not fetch ahead at all. Against four
 * tasks per thread (2 threads, 2-core EPYC, the splits alternated in one
 * process): a single activation decoded qwen2-0.5b Q4_0 4-5% faster (AVX2
 * and AVX-512; 4% with decode prefetch off too) and the 24M default model
 * ~19% faster (its tasks now reach that size; no faster with prefetch
 * off); verifying 4-8 rows of the 24M model took 3-5% less, and 16
 * qwen2-0.5b streams ~1%. Deciding the prefetch by the whole matrix
 * instead of by the task measured no faster. A single activation's runs
 * are then read through tw_decode_split, where a thread done with its own
 * run takes rows from the back of a slower one's. The matrices too small
 * for that split (q/k/v and o of qwen2-0.5b) kept one task per thread
 * too: two or four per thread decoded its Q4_0 file 1.4-4.2% slower (2
 * threads, Zen 5 guest, 30 bursts alternated in one process). */
static int plan_tasks(const tw_pool *pool, size_t rows, size_t row_work, size_t n,
                      size_t *rows_per_task)
{
    int threads = tw_pool_threads(pool);
    size_t min_rows = row_work >= 4096 ? TW_ROW_ALIGN : TW_ROW_ALIGN * 4;
    size_t tasks = threads > 1 ? (size_t)threads * (n == 1 ? 1 : 2) : 1;
    size_t per = (rows + tasks - 1) / tasks;
    if (per < min_rows)
        per = min_rows;
    per = (per + TW_ROW_ALIGN - 1) / TW_ROW_ALIGN * TW_ROW_ALIGN;
    *rows_per_task = per;
    return (int)((rows + per - 1) / per);
}

/* Activation a's slot of the quad panels at panel (tw_quad_bytes each, the
 * batch's rows a quad to a panel): block by block, its qs, d and -8 times
 * its block sums beside its quad's other rows. Slots past a batch's last
 * row are left as they are, as the kernels take only a quad's first rows. */
static void fill_quad_slot(tw_act *act, size_t a, size_t cols, uint8_t *panel)
{
    const size_t nb = cols / 32, s = a % TW_QUAD_ACTS;
    uint8_t *base = panel + a / TW_QUAD_ACTS * tw_quad_bytes(cols);
    for (size_t i = 0; i < nb; i++) {
        uint8_t *blk = base + i * TW_QUAD_BLOCK;
        memcpy(blk + 32 * s, act->qs + 32 * i, 32);
        memcpy(blk + TW_QUAD_D + 4 * s, &act->d[i], 4);
        /* bneg is -128 times the block's sum and the only kernel that
         * reads it here (Q4_0's) wants -8 times it: divided once here,
         * exactly, instead of per block and row group in the kernel */
        const int32_t neg8 = act->bneg[i] / 16;
        memcpy(blk + TW_QUAD_BNEG + 4 * s, &neg8, 4);
    }
    act->quad = base;
}

/* What every row of a batch's activations needs done (prepare_acts). */
typedef struct acts_job {
    const tw_isa_table *t;
    tw_act_kind kind;
    tw_act *acts;
    const float *x;
    size_t cols, n;
    uint8_t *buf;   /* the rows, per bytes apart */
    size_t per;     /* bytes of a row and its batch copy */
    bool copy;      /* a batch copy after each row's own layout */
    uint8_t *panel; /* the quad panels, or NULL */
} acts_job;

static void prepare_row(const acts_job *j, size_t i)
{
    tw_act *a = &j->acts[i];
    *a = (tw_act){.x = j->x + i * j->cols};
    if (j->kind != TW_ACT_F32) {
        tw_act_layout(j->kind, j->cols, j->buf + i * j->per, a);
        j->t->quant_act[j->kind](j->cols, a);
    }
    if (j->copy)
        j->t->batch_copy(j->cols, a, j->buf + i * j->per + tw_act_bytes(j->kind, j->cols));
    if (j->panel)
        fill_quad_slot(a, i, j->cols, j->panel);
}

static void prepare_task(void *ctx, int task, int n_tasks)
{
    const acts_job *j = ctx;
    const size_t per_task = (j->n + (size_t)n_tasks - 1) / (size_t)n_tasks;
    for (size_t i = (size_t)task * per_task; i < j->n && i < ((size_t)task + 1) * per_task; i++)
        prepare_row(j, i);
}

/* Quantizes n activation rows into the shared scratch; false when the
 * scratch cannot be had. F32-kind types need no scratch. */
static tw_act *prepare_acts(tw_pool *pool, const tw_isa_table *t, tw_act_kind kind,
                            unsigned types, const float *x, size_t cols, size_t n)
{
    /* layout: n tw_act structs (rounded to 64 bytes), then the rows, each
     * followed by its batch copy when the batch is wide enough to use one,
     * then the quad panels when a kernel reads them */
    bool copy = kind == TW_ACT_Q8 && n >= TW_ACT_QU_MIN_N && t->batch_copy &&
                (types & t->batch_copy_types) && cols <= t->batch_copy_max_cols;
    bool quads = kind == TW_ACT_Q8 && n >= 2 && (types & t->quad_types);
    size_t per = tw_act_bytes(kind, cols);
    if (copy) {
        if (cols > SIZE_MAX / 2 / t->batch_copy_bytes)
            return NULL;
        per += (cols * t->batch_copy_bytes + 63) & ~(size_t)63;
    }
    if (n > SIZE_MAX / (per + sizeof(tw_act) + tw_quad_bytes(cols)) - TW_QUAD_ACTS)
        return NULL;
    size_t head = (n * sizeof(tw_act) + 63) & ~(size_t)63;
    size_t panel = quads ? (n + TW_QUAD_ACTS - 1) / TW_QUAD_ACTS * tw_quad_bytes(cols) : 0;
    uint8_t *mem = tw_pool_scratch(pool, TW_POOL_SHARED, head + per * n + panel);
    if (!mem)
        return NULL;
    acts_job j = {.t = t, .kind = kind, .acts = (tw_act *)(void *)mem, .x = x, .cols = cols,
                  .n = n, .buf = mem + head, .per = per, .copy = copy};
    j.panel = quads ? j.buf + per * n : NULL;
    /* Quantizing is a pass over the activations on one thread while the
     * others wait: for a wide batch (a prefill chunk, the FFN's 4864
     * columns from four streams on) it is worth a pool run of its own */
    int threads = tw_pool_threads(pool);
    if (threads > 1 && n >= 2 && n * cols >= PARALLEL_PREPARE_VALUES) {
        int tasks = n < (size_t)threads * 4 ? (int)n : threads * 4;
        tw_pool_run(pool, prepare_task, &j, tasks);
    } else {
        for (size_t i = 0; i < n; i++)
            prepare_row(&j, i);
    }
    return j.acts;
}

/* Rows of W per kernel call in a batch: a chunk within ~16 KiB of L1 while
 * the batch reads it, or for kernels that block for the caches themselves
 * every row of the task. A single activation takes every row at once. */
static size_t batch_chunk_rows(const tw_isa_table *t, tw_type type, size_t n, size_t rows,
                               size_t row_bytes)
{
    if (n == 1 || (t->self_blocked_types >> tw_ktype_index(type)) & 1u)
        return rows;
    return row_bytes >= 16384 ? 1 : 16384 / row_bytes;
}

/* Integer (or f32-direct) path for n activation rows sharing each weight
 * chunk while it is in cache. */
static bool matmul_rows(tw_pool *pool, const tw_isa_table *t, tw_type type, const uint8_t *w,
                        size_t row_bytes, size_t rows, size_t cols, const float *x, size_t n,
                        float *y)
{
    tw_act *acts = prepare_acts(pool, t, tw_act_kind_for(type), 1u << tw_ktype_index(type), x,
                                cols, n);
    if (!acts)
        return false;
    tw_mv_job j = {
        .fn = t->rows[tw_ktype_index(type)],
        .w = w,
        .row_bytes = row_bytes,
        .rows = rows,
        .cols = cols,
        .acts = acts,
        .n = n,
        .y = y,
    };
    j.chunk_rows = batch_chunk_rows(t, type, n, rows, row_bytes);
    int n_tasks = plan_tasks(pool, rows, row_bytes, n, &j.rows_per_task);
    if (n != 1 || !tw_decode_split(pool, &j, 1, false, NULL, NULL))
        tw_pool_run_threads(pool, mv_task, &j, n_tasks);
    return true;
}

static bool valid_shape(tw_type type, size_t row_bytes, size_t rows, size_t cols)
{
    if (tw_ktype_index(type) < 0 || rows == 0)
        return false;
    size_t need = tw_type_row_bytes(type, cols);
    return cols > 0 && need != 0 && row_bytes >= need;
}

/* Several matrices sharing one input: the tasks of every part in one pool
 * run, over activations quantized once. */
typedef struct multi_job {
    size_t n_parts;
    tw_mv_job parts[TW_MATMUL_MAX_PARTS];
    int first_task[TW_MATMUL_MAX_PARTS + 1];
} multi_job;

static void multi_task(void *ctx, int task, int n_tasks, int thread)
{
    const multi_job *j = ctx;
    size_t k = 0;
    while (k + 1 < j->n_parts && task >= j->first_task[k + 1])
        k++;
    mv_task((void *)&j->parts[k], task - j->first_task[k], n_tasks, thread);
}

static bool prefill_tiles(const tw_isa_table *t, tw_type type);

/* The parts' kernel jobs over activations quantized once, for one pool
 * run; false when the parts cannot share one (then each goes through
 * tw_matmul). Leaves each job's rows_per_task to the caller. */
static bool share_acts(tw_pool *pool, const tw_matmul_part *parts, size_t n_parts, size_t cols,
                       const float *x, size_t n, tw_mv_job *jobs)
{
    const tw_isa_table *t = tw_isa_current();
    if (!pool || n_parts > TW_MATMUL_MAX_PARTS)
        return false;
    tw_act_kind kind = tw_act_kind_for(parts[0].type);
    unsigned types = 0;
    for (size_t k = 0; k < n_parts; k++) {
        const tw_matmul_part *p = &parts[k];
        if (!valid_shape(p->type, p->row_bytes, p->rows, cols) || tw_act_kind_for(p->type) != kind)
            return false;
        types |= 1u << tw_ktype_index(p->type);
        if (n >= BLAS_MIN_N && !prefill_tiles(t, p->type))
            return false;
    }
    tw_act *acts = prepare_acts(pool, t, kind, types, x, cols, n);
    if (!acts)
        return false;
    for (size_t k = 0; k < n_parts; k++) {
        const tw_matmul_part *p = &parts[k];
        jobs[k] = (tw_mv_job){
            .fn = t->rows[tw_ktype_index(p->type)],
            .w = p->w,
            .row_bytes = p->row_bytes,
            .rows = p->rows,
            .cols = cols,
            .acts = acts,
            .n = n,
            .y = p->y,
        };
        jobs[k].chunk_rows = batch_chunk_rows(t, p->type, n, p->rows, p->row_bytes);
    }
    return true;
}

/* The fused path of tw_matmul_multi. */
static bool multi_rows(tw_pool *pool, const tw_matmul_part *parts, size_t n_parts, size_t cols,
                       const float *x, size_t n)
{
    multi_job j = {.n_parts = n_parts};
    if (!share_acts(pool, parts, n_parts, cols, x, n, j.parts))
        return false;
    int tasks = 0;
    for (size_t k = 0; k < n_parts; k++) {
        j.first_task[k] = tasks;
        tasks += plan_tasks(pool, parts[k].rows, parts[k].row_bytes, n, &j.parts[k].rows_per_task);
    }
    j.first_task[n_parts] = tasks;
    if (n != 1 || !tw_decode_split(pool, j.parts, n_parts, false, NULL, NULL))
        tw_pool_run_threads(pool, multi_task, &j, tasks);
    return true;
}

/* Two matrices' same rows per task, then the rows' own epilogue. */
typedef struct pair_job {
    tw_mv_job parts[2];
    tw_rows_done_fn done;
    void *ctx;
} pair_job;

static void pair_task(void *ctx, int task, int n_tasks, int thread)
{
    const pair_job *j = ctx;
    mv_task((void *)&j->parts[0], task, n_tasks, thread);
    mv_task((void *)&j->parts[1], task, n_tasks, thread);
    size_t r0 = (size_t)task * j->parts[0].rows_per_task;
    j->done(j->ctx, r0, min_sz(j->parts[0].rows, r0 + j->parts[0].rows_per_task));
}

bool tw_matmul_pair(tw_pool *pool, const tw_matmul_part *parts, size_t cols, const float *x,
                    size_t n, tw_rows_done_fn done, void *ctx)
{
    pair_job j = {.done = done, .ctx = ctx};
    if (!done || parts[0].rows != parts[1].rows || !share_acts(pool, parts, 2, cols, x, n, j.parts))
        return false;
    size_t per;
    int tasks = plan_tasks(pool, parts[0].rows, parts[0].row_bytes + parts[1].row_bytes, n, &per);
    j.parts[0].rows_per_task = j.parts[1].rows_per_task = per;
    if (n != 1 || !tw_decode_split(pool, j.parts, 2, true, done, ctx))
        tw_pool_run_threads(pool, pair_task, &j, tasks);
    return true;
}

void tw_matmul_fetch_next(tw_pool *pool, const tw_matmul_part *parts, size_t n_parts, size_t cols,
                          bool pair)
{
    if (!pool || !parts || n_parts == 0 || n_parts > TW_MATMUL_MAX_PARTS ||
        (pair && (n_parts != 2 || parts[0].rows != parts[1].rows)))
        return;
    tw_mv_job jobs[TW_MATMUL_MAX_PARTS];
    for (size_t k = 0; k < n_parts; k++) {
        const tw_matmul_part *p = &parts[k];
        if (!valid_shape(p->type, p->row_bytes, p->rows, cols))
            return;
        jobs[k] = (tw_mv_job){.w = p->w, .row_bytes = p->row_bytes, .rows = p->rows, .cols = cols};
        size_t work = pair ? parts[0].row_bytes + parts[1].row_bytes : p->row_bytes;
        plan_tasks(pool, p->rows, work, 1, &jobs[k].rows_per_task);
    }
    tw_decode_fetch_plan(pool, jobs, n_parts, pair);
}

void tw_matvec(tw_pool *pool, tw_type type, const void *w, size_t row_bytes, size_t rows,
               size_t cols, const float *x, float *y)
{
    if (!valid_shape(type, row_bytes, rows, cols)) {
        if (cols == 0 && y)
            memset(y, 0, rows * sizeof *y);
        return;
    }
    const tw_isa_table *t = tw_isa_current();
    if (!pool || !matmul_rows(pool, t, type, w, row_bytes, rows, cols, x, 1, y))
        matvec_stack(t, type, w, row_bytes, rows, cols, x, y);
}

typedef struct mm_job {
    const tw_isa_table *t;
    tw_pool *pool;
    tw_type type;
    const uint8_t *w;
    size_t row_bytes, rows, cols, tile_rows;
    const float *x;
    size_t n;
    float *y;
    float **tiles;       /* per thread */
    tw_panels_fn panels; /* instead of dequantized tiles and sgemm; NULL: those */
    size_t panel_rows;   /* rows of one of panels' panels */
    int n_tasks;
} mm_job;

/* Whether a tile may hold a run of a row's columns rather than all of it:
 * any type whose rows are blocks in column order (not the packed ones).
 * A wide matrix then still gets tiles of TILE_ROWS rows, and sgemm packs
 * the activations once per TILE_ROWS rows instead of once per
 * TILE_MIN_ROWS: 896x4864 F16 weights against 128 tokens, two threads on
 * a 2-core EPYC (Zen 2), went from 140-144 to 153-157 GFLOP/s
 * (tw-bench-kernels -t 2 -q -T f16 -n 128, three runs alternated); 512
 * or 1024 rows a tile, or tiles of 512 KiB or 2 MiB, measured no better. */
static bool col_chunks(tw_type type)
{
    return !tw_type_packed(type);
}

/* Columns of one tile pass: all of them, or for col_chunks types as many
 * whole blocks as keep a tile of the shape's most rows (TILE_ROWS) within
 * TILE_BYTES. A tile of fewer rows (the pool's balance, the last one) cuts
 * its columns in the same places: sgemm's runs are summed into the output
 * one after another, so where they end decides a result's bits, and those
 * must not depend on the number of threads. */
static size_t tile_cols(tw_type type, size_t cols)
{
    if (!col_chunks(type) || (size_t)TILE_ROWS * cols * sizeof(float) <= TILE_BYTES)
        return cols;
    size_t be = tw_type_block_elems(type);
    size_t kc = TILE_BYTES / (TILE_ROWS * sizeof(float)) / be * be;
    return kc < be ? be : kc;
}

/* Whether the BLAS library's sgemm gives a product the same bits whatever
 * the call's shape. OpenBLAS 0.3.21's AVX2 kernel sets (Haswell, Zen) do
 * not: a row's sums change with how many activations or weight rows share
 * the call (its Sandybridge and Nehalem sets did, on a Zen 3 EPYC).
 * Probed once, on shapes where the AVX2 sets differ. */
static bool g_blas_exact;
static pthread_once_t g_blas_probe = PTHREAD_ONCE_INIT;

static bool same_rows(const float *a, const float *b, size_t rows, size_t cols, size_t stride)
{
    for (size_t r = 0; r < rows; r++)
        if (memcmp(a + r * stride, b + r * stride, cols * sizeof *a) != 0)
            return false;
    return true;
}

static void probe_blas(void)
{
    enum { N = 2 * TW_PREFILL_GROUP, M = 96, K = 320 };
    float *x = malloc(N * K * sizeof *x), *w = malloc(M * K * sizeof *w);
    float *y1 = malloc(N * M * sizeof *y1), *y2 = malloc(N * M * sizeof *y2);
    g_blas_exact = false;
    if (x && w && y1 && y2) {
        uint32_t s = 12345;
        for (size_t i = 0; i < N * K; i++)
            x[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
        for (size_t i = 0; i < M * K; i++)
            w[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, M, K, 1.0f, x, K, w, K, 0.0f, y1,
                    M);
        bool same = true;
        /* fewer activations, then fewer weight rows, in calls of their own */
        const int ns[] = {TW_PREFILL_GROUP, 20}, ms[] = {40, 24};
        for (size_t i = 0; i < 2 && same; i++) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ns[i], M, K, 1.0f, x, K, w, K,
                        0.0f, y2, M);
            same = same_rows(y1, y2, (size_t)ns[i], M, M);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, ms[i], K, 1.0f, x, K, w, K,
                        0.0f, y2, M);
            same = same && same_rows(y1, y2, N, (size_t)ms[i], M);
        }
        g_blas_exact = same;
    }
    free(x);
    free(w);
    free(y1);
    free(y2);
}

static bool blas_exact(void)
{
    pthread_once(&g_blas_probe, probe_blas);
    return g_blas_exact;
}

/* sgemm over n activations; where the library's bits depend on the call's
 * shape (blas_exact), one call per prefill group, so a group's rows are
 * always computed in a call of their own, the same whichever groups share
 * the step (what reading a prompt in pieces relies on). */
static void sgemm_groups(size_t n, size_t nr, size_t nc, const float *x, size_t x_stride,
                         const float *w, size_t w_stride, float beta, float *y, size_t y_stride)
{
    const size_t step = blas_exact() ? n : TW_PREFILL_GROUP;
    for (size_t a0 = 0; a0 < n; a0 += step) {
        size_t na = min_sz(step, n - a0);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)na, (int)nr, (int)nc, 1.0f,
                    x + a0 * x_stride, (int)x_stride, w, (int)w_stride, beta, y + a0 * y_stride,
                    (int)y_stride);
    }
}

static size_t panel_count(size_t rows, size_t panel_rows)
{
    return (rows + panel_rows - 1) / panel_rows;
}

/* Task `task` of n_tasks near-equal shares of `count` items: its first
 * item and how many it takes (the first count % n_tasks take one more). */
static void even_share(size_t count, int n_tasks, int task, size_t *first, size_t *len)
{
    size_t base = count / (size_t)n_tasks, extra = count % (size_t)n_tasks, t = (size_t)task;
    *first = t * base + min_sz(t, extra);
    *len = base + (t < extra ? 1 : 0);
}

/* Tasks of whole panels, at least four a thread and about PANEL_TASK_ROWS
 * rows at most: panels give each output the same bits whatever rows a task
 * holds (h16_panels.h), so unlike sgemm's tiles they need not be cut alike
 * for every pool, and only the matrix's last panel is short. Small tasks
 * even out threads that a busy host slows unevenly; a task still packs each
 * of its panels once, so they cost only the pool's hand-over. */
#define PANEL_TASK_ROWS 96
static int panel_tasks(const tw_pool *pool, size_t rows, size_t panel_rows)
{
    size_t panels = panel_count(rows, panel_rows);
    size_t per_task = PANEL_TASK_ROWS / panel_rows ? PANEL_TASK_ROWS / panel_rows : 1;
    size_t want = (size_t)tw_pool_threads(pool) * 4;
    if (want < (panels + per_task - 1) / per_task)
        want = (panels + per_task - 1) / per_task;
    return (int)(panels < want ? panels : want);
}

static void mm_task(void *ctx, int task, int n_tasks, int thread)
{
    (void)n_tasks;
    const mm_job *j = ctx;
    size_t r0 = (size_t)task * j->tile_rows;
    size_t nr = min_sz(j->tile_rows, j->rows - r0);
    if (j->type == TW_TYPE_F32 && j->row_bytes % sizeof(float) == 0) {
        sgemm_groups(j->n, nr, j->cols, j->x, j->cols,
                     (const float *)(const void *)(j->w + r0 * j->row_bytes),
                     j->row_bytes / sizeof(float), 0.0f, j->y + r0, j->rows);
        return;
    }
    float *tile = j->tiles[thread];
    if (j->panels) {
        size_t p0, np;
        even_share(panel_count(j->rows, j->panel_rows), j->n_tasks, task, &p0, &np);
        r0 = p0 * j->panel_rows;
        nr = min_sz(np * j->panel_rows, j->rows - r0);
        j->panels(j->w + r0 * j->row_bytes, j->row_bytes, nr, j->cols, j->x, j->n, j->y + r0,
                  j->rows, tile);
        return;
    }
    tw_dequant_fn dq = j->t->dequant[tw_ktype_index(j->type)];
    size_t kc = tile_cols(j->type, j->cols);
    for (size_t c0 = 0; c0 < j->cols; c0 += kc) {
        size_t nc = min_sz(kc, j->cols - c0);
        size_t off = col_offset(j->type, c0);
        for (size_t r = 0; r < nr; r++)
            dq(j->w + (r0 + r) * j->row_bytes + off, tile + r * nc, nc);
        sgemm_groups(j->n, nr, nc, j->x + c0, j->cols, tile, nc, c0 ? 1.0f : 0.0f, j->y + r0,
                     j->rows);
    }
}

static size_t whole_row_tile_rows(size_t cols)
{
    size_t tr = TILE_BYTES / (cols * sizeof(float));
    tr = tr / TW_ROW_ALIGN * TW_ROW_ALIGN;
    return tr < TILE_MIN_ROWS ? TILE_MIN_ROWS : tr > TILE_ROWS ? TILE_ROWS : tr;
}

static size_t tile_rows_for(tw_type type, size_t cols)
{
    return col_chunks(type) ? TILE_ROWS : whole_row_tile_rows(cols);
}

/* Tiles that keep every thread busy, two each. Where the library's bits
 * depend on the call's shape (blas_exact), the tile is one, so tiles are
 * then cut as four threads would cut them whatever the pool: a product
 * must not change with the number of threads. Never more than
 * tile_rows_for, so the scratch sized for that suffices. */
static size_t balanced_tile_rows(const tw_pool *pool, tw_type type, size_t rows, size_t cols)
{
    size_t tr = tile_rows_for(type, cols);
    size_t want = blas_exact() ? (size_t)tw_pool_threads(pool) * 2 : 8;
    size_t fair = (rows + want - 1) / want;
    fair = (fair + TW_ROW_ALIGN - 1) / TW_ROW_ALIGN * TW_ROW_ALIGN;
    return fair < tr ? fair : tr;
}

/* Tile scratch for every thread; false when it cannot be allocated. */
static bool prepare_tiles(tw_pool *pool, tw_type type, size_t cols, float **tiles)
{
    size_t tr = tile_rows_for(type, cols);
    size_t kc = tile_cols(type, cols);
    if (kc > SIZE_MAX / sizeof(float) / tr)
        return false;
    size_t bytes = tr * kc * sizeof(float);
    for (int i = 0; i < tw_pool_threads(pool); i++) {
        tiles[i] = tw_pool_scratch(pool, i, bytes);
        if (!tiles[i])
            return false;
    }
    return true;
}

static bool half_type(tw_type type)
{
    return type == TW_TYPE_F16 || type == TW_TYPE_BF16;
}

/* Whether large batches of this type run on the ISA's own tile kernels
 * rather than dequantized tiles + sgemm; each ISA table says, from
 * tw-bench-kernels measurements, and for F16 and BF16 the chosen prefill
 * path (tw_kernels_set_f16_prefill). */
static bool prefill_tiles(const tw_isa_table *t, tw_type type)
{
    int k = tw_ktype_index(type);
    if (half_type(type) && tw_kernels_f16_prefill() != TW_F16_PREFILL_TILES)
        return false;
    return k >= 0 && (t->prefill_tiles >> k) & 1u;
}

/* The ISA's half-precision panels when prompts of this type take them. */
static tw_panels_fn prefill_panels(const tw_isa_table *t, tw_type type)
{
    if (!half_type(type) || tw_kernels_f16_prefill() != TW_F16_PREFILL_PANELS)
        return NULL;
    return t->panels[tw_ktype_index(type)];
}

static bool blas_dims_ok(size_t rows, size_t cols, size_t n, size_t row_bytes)
{
    const size_t lim = (size_t)2147483647;
    return rows <= lim && cols <= lim && n <= lim && row_bytes / sizeof(float) <= lim;
}

bool tw_matmul_exact(tw_type type)
{
    const tw_isa_table *t = tw_isa_current();
    const int k = tw_ktype_index(type);
    return k >= 0 && (prefill_tiles(t, type) || !t->dequant[k]);
}

void tw_matmul(tw_pool *pool, tw_type type, const void *w, size_t row_bytes, size_t rows,
               size_t cols, const float *x, size_t n, float *y)
{
    if (n == 0)
        return;
    if (!valid_shape(type, row_bytes, rows, cols)) {
        if (cols == 0 && y)
            memset(y, 0, n * rows * sizeof *y);
        return;
    }
    const tw_isa_table *t = tw_isa_current();
    bool own_tiles = prefill_tiles(t, type);
    if (pool && (n < BLAS_MIN_N || own_tiles) &&
        matmul_rows(pool, t, type, w, row_bytes, rows, cols, x, n, y))
        return;
    float *tiles[256];
    if (pool && n >= BLAS_MIN_N && t->dequant[tw_ktype_index(type)] &&
        blas_dims_ok(rows, cols, n, row_bytes) &&
        prepare_tiles(pool, type, cols, tiles)) {
        mm_job j = {
            .t = t,
            .pool = pool,
            .type = type,
            .w = w,
            .row_bytes = row_bytes,
            .rows = rows,
            .cols = cols,
            .tile_rows = balanced_tile_rows(pool, type, rows, cols),
            .x = x,
            .n = n,
            .y = y,
            .tiles = tiles,
            .panels = prefill_panels(t, type),
        };
        j.panel_rows = t->panel_rows;
        j.n_tasks = j.panels ? panel_tasks(pool, rows, j.panel_rows)
                             : (int)((rows + j.tile_rows - 1) / j.tile_rows);
        tw_pool_run_threads(pool, mm_task, &j, j.n_tasks);
        return;
    }
    for (size_t i = 0; i < n; i++)
        matvec_stack(t, type, w, row_bytes, rows, cols, x + i * cols, y + i * rows);
}

void tw_matmul_multi(tw_pool *pool, const tw_matmul_part *parts, size_t n_parts, size_t cols,
                     const float *x, size_t n)
{
    if (n == 0 || n_parts == 0 || !parts)
        return;
    if (multi_rows(pool, parts, n_parts, cols, x, n))
        return;
    for (size_t k = 0; k < n_parts; k++)
        tw_matmul(pool, parts[k].type, parts[k].w, parts[k].row_bytes, parts[k].rows, cols, x, n,
                  parts[k].y);
}

tw_status tw_kernels_reserve(tw_pool *pool, size_t max_cols, size_t max_n, tw_err *err)
{
    if (!pool)
        return TW_OK;
    if (max_cols == 0 || max_n == 0)
        return TW_OK;
    size_t wide = (max_cols + 255) / 256 * 256;
    /* a row, its batch copy, its struct and its share of the quad panels,
     * with a quad's worth more for the last one's empty slots */
    size_t per = tw_act_bytes(TW_ACT_Q8, wide) + wide + sizeof(tw_act) + tw_quad_bytes(wide);
    if (max_n > SIZE_MAX / per - TW_QUAD_ACTS - 1)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "kernel scratch: %zu rows too many", max_n);
    size_t shared = per * (max_n + TW_QUAD_ACTS) + 64;
    if (!tw_pool_scratch(pool, TW_POOL_SHARED, shared))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "kernel scratch: out of memory (%zu bytes)",
                         shared);
    if (max_n >= BLAS_MIN_N) {
        /* Narrow rows get tiles of up to TILE_BYTES, wide ones TILE_MIN_ROWS
         * rows; cover both so no later shape has to grow the tiles. */
        size_t tr = whole_row_tile_rows(max_cols);
        if (max_cols > SIZE_MAX / sizeof(float) / tr)
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "kernel scratch: %zu columns too wide",
                             max_cols);
        size_t bytes = tr * max_cols * sizeof(float);
        if (bytes < TILE_BYTES)
            bytes = TILE_BYTES;
        for (int i = 0; i < tw_pool_threads(pool); i++)
            if (!tw_pool_scratch(pool, i, bytes))
                return tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                                 "kernel scratch: out of memory (%zu bytes per thread)", bytes);
    }
    return TW_OK;
}
