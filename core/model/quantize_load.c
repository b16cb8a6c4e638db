/* Quantizing a checkpoint's matrices as it loads: a Hugging Face folder
 * holds f32, f16 or bf16 weights, and a quantized copy of its matrices runs
 * on the integer kernels without a conversion step. The matrices chosen and
 * the rows' bits are those tw-convert writes for the same type, so a
 * checkpoint quantized here computes what its converted GGUF computes. */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tw/log.h"
#include "tw/pool.h"

#include "model/encoder.h"
#include "model/loader.h"

/* Each quantized copy and the matrix it was made for: once the weights are
 * packed, a copy no matrix reads any more is given back. */
typedef struct tw_qcopy {
    uint8_t *buf;
    const tw_mat *mat;
    tw_mat src; /* the stored rows it is made from */
} tw_qcopy;

struct tw_qcopies {
    tw_qcopy *v;
    size_t n, cap;
};

static bool keep_copy(tw_model *m, uint8_t *buf, const tw_mat *mat, const tw_mat *orig)
{
    struct tw_qcopies *q = m->qcopies;
    if (!q && !(q = m->qcopies = calloc(1, sizeof *q)))
        return false;
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 64;
        tw_qcopy *v = realloc(q->v, cap * sizeof *v);
        if (!v)
            return false;
        q->v = v;
        q->cap = cap;
    }
    q->v[q->n++] = (tw_qcopy){buf, mat, *orig};
    return true;
}

void tw_model_quantized_release(tw_model *m, bool all)
{
    struct tw_qcopies *q = m->qcopies;
    for (size_t i = 0; q && i < q->n; i++)
        if (q->v[i].buf && (all || q->v[i].mat->w != q->v[i].buf)) {
            free(q->v[i].buf);
            q->v[i].buf = NULL;
        }
    if (all && q) {
        free(q->v);
        free(q);
        m->qcopies = NULL;
    }
}

/* A matrix to quantize: stored as floats, its rows whole blocks of `to`.
 * The MoE routers stay as they are, as tw-convert keeps them f32. */
static bool wants(const tw_mat *mat, tw_type to)
{
    return mat->w && mat->rows &&
           (mat->type == TW_TYPE_F32 || mat->type == TW_TYPE_F16 || mat->type == TW_TYPE_BF16) &&
           tw_type_row_bytes(to, mat->cols) != 0;
}

/* Points mat at a new copy of `to` rows, recorded with its source; the
 * rows are written later, all matrices' together (quantize_rows). */
static tw_status plan(tw_model *m, tw_mat *mat, tw_type to, tw_err *err)
{
    if (!wants(mat, to))
        return TW_OK;
    const size_t rb = tw_type_row_bytes(to, mat->cols);
    uint8_t *q = malloc(mat->rows * rb);
    if (q && !keep_copy(m, q, mat, mat)) {
        free(q);
        q = NULL;
    }
    if (!q)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                         "quantize: out of memory for a %zu x %zu matrix as %s", mat->rows,
                         mat->cols, tw_type_name(to));
    *mat = (tw_mat){.w = q, .type = to, .rows = mat->rows, .cols = mat->cols, .row_bytes = rb};
    return TW_OK;
}

#define QUANT_CHUNK_ROWS 64
/* a row as wide as the widest FFN of common models on the stack (128 KiB) */
#define QUANT_STACK_FLOATS 32768

typedef struct quant_job {
    const struct tw_qcopies *q;
    const size_t *first; /* copy i's chunks start at first[i]; first[n] is the total */
    tw_type to;
    int failed; /* a task could not have a row's floats */
} quant_job;

/* One chunk of one copy's rows: dequantized from the stored type, then
 * rounded to `to`, the row's bits those of tw-convert's. */
static void quant_task(void *ctx, int task, int n_tasks)
{
    (void)n_tasks;
    const quant_job *j = ctx;
    size_t lo = 0, hi = j->q->n;
    while (hi - lo > 1) { /* the copy whose chunks hold this task */
        const size_t mid = (lo + hi) / 2;
        if (j->first[mid] <= (size_t)task)
            lo = mid;
        else
            hi = mid;
    }
    const tw_qcopy *c = &j->q->v[lo];
    const size_t r0 = ((size_t)task - j->first[lo]) * QUANT_CHUNK_ROWS;
    const size_t r1 = r0 + QUANT_CHUNK_ROWS < c->src.rows ? r0 + QUANT_CHUNK_ROWS : c->src.rows;
    const size_t rb = tw_type_row_bytes(j->to, c->src.cols);
    float stack[QUANT_STACK_FLOATS];
    float *row = c->src.cols <= QUANT_STACK_FLOATS ? stack : malloc(c->src.cols * sizeof *row);
    if (!row) {
        __atomic_store_n(&((quant_job *)ctx)->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (size_t r = r0; r < r1; r++) {
        tw_mat_row(&c->src, r, row);
        tw_quant_row(j->to, row, c->buf + r * rb, c->src.cols);
    }
    if (row != stack)
        free(row);
}

/* Every planned copy's rows, in chunks spread over a pool of this
 * machine's cores (loading holds no pool of its own). */
static tw_status quantize_rows(tw_model *m, tw_type to, tw_err *err)
{
    const struct tw_qcopies *q = m->qcopies;
    if (!q || !q->n)
        return TW_OK;
    size_t *first = malloc((q->n + 1) * sizeof *first);
    if (!first)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "quantize: out of memory");
    first[0] = 0;
    for (size_t i = 0; i < q->n; i++)
        first[i + 1] = first[i] + (q->v[i].src.rows + QUANT_CHUNK_ROWS - 1) / QUANT_CHUNK_ROWS;
    const size_t chunks = first[q->n];
    if (chunks > INT32_MAX) {
        free(first);
        return tw_errorf(err, TW_INVALID_ARGUMENT, "quantize: %zu row chunks are too many", chunks);
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
    tw_pool *pool = NULL;
    if (tw_pool_create(threads, &pool, err) != TW_OK)
        pool = NULL; /* the chunks then run on this thread */
    quant_job j = {.q = q, .first = first, .to = to};
    tw_pool_run(pool, quant_task, &j, (int)chunks);
    tw_pool_destroy(pool);
    free(first);
    if (__atomic_load_n(&j.failed, __ATOMIC_RELAXED))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "quantize: out of memory for a row");
    return TW_OK;
}

/* The stored rows every copy was made from, once all are made (two
 * matrices may read the same rows): whole pages only, so a neighbour's
 * bytes stay. A file mapping drops them (a later read faults them in
 * again); a private copy frees them. */
static void give_back_originals(tw_model *m)
{
    const struct tw_qcopies *q = m->qcopies;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    size_t freed = 0;
    for (size_t i = 0; q && i < q->n; i++) {
        const tw_mat *o = &q->v[i].src;
        const uintptr_t lo = ((uintptr_t)o->w + page - 1) & ~(page - 1);
        const uintptr_t hi = ((uintptr_t)o->w + o->rows * o->row_bytes) & ~(page - 1);
        if (hi > lo && madvise((void *)lo, hi - lo, MADV_DONTNEED) == 0)
            freed += hi - lo;
    }
    tw_info("quantized %zu matrices to %s at load; %.1f MiB of their stored rows given back",
            q ? q->n : 0, tw_type_name(m->quantized_to), (double)freed / 1048576.0);
}

/* An encoder's matrices: its three tables as well, as tw-convert writes
 * them, and the token-type row the passes add read again from its copy. */
static tw_status quantize_encoder(tw_model *m, tw_type to, tw_err *err)
{
    tw_encoder *e = m->enc;
    tw_status st = TW_OK;
    tw_mat *tables[] = {&e->word, &e->pos, &e->types};
    for (size_t i = 0; !st && i < sizeof tables / sizeof tables[0]; i++)
        st = plan(m, tables[i], to, err);
    for (uint32_t l = 0; !st && l < m->cfg.n_layers; l++) {
        tw_enc_layer *L = &e->layers[l];
        tw_mat *mats[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->up, &L->down};
        for (size_t i = 0; !st && i < sizeof mats / sizeof mats[0]; i++)
            st = plan(m, mats[i], to, err);
    }
    if (!st)
        st = quantize_rows(m, to, err);
    if (st)
        return st;
    tw_mat_row(&e->types, 0, e->type0);
    give_back_originals(m);
    return TW_OK;
}

bool tw_quantize_load_type(tw_type t)
{
    return t == TW_TYPE_Q8_0 || t == TW_TYPE_Q4_0 || t == TW_TYPE_Q4_K || t == TW_TYPE_Q6_K;
}

tw_status tw_model_quantize_at_load(tw_model *m, tw_type to, tw_err *err)
{
    if (!tw_quantize_load_type(to))
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "quantize: %s is not a type to quantize to at load (Q8_0, Q4_0, Q4_K, "
                         "Q6_K)",
                         tw_type_name(to));
    /* the fingerprint samples the stored weights, whose pages go below */
    m->quantized_to = to;
    char fp[65];
    tw_status fs = tw_model_fingerprint(m, fp, err);
    if (fs)
        return fs;
    if (m->enc)
        return quantize_encoder(m, to, err);
    const bool tied = m->lm_head.w == m->embed.w && m->lm_head.type == m->embed.type;
    tw_status st = plan(m, &m->embed, to, err);
    if (!st && tied)
        m->lm_head = m->embed;
    else if (!st)
        st = plan(m, &m->lm_head, to, err);
    for (uint32_t l = 0; !st && l < m->cfg.n_layers; l++) {
        tw_layer *L = &m->layers[l];
        tw_mat *mats[] = {&L->wq,   &L->wk,   &L->wv,      &L->wo,       &L->in_qkv,
                          &L->in_z, &L->in_b, &L->in_a,    &L->out_proj, &L->gate,
                          &L->up,   &L->down, &L->sh_gate, &L->sh_up,    &L->sh_down};
        for (size_t i = 0; !st && i < sizeof mats / sizeof mats[0]; i++)
            st = plan(m, mats[i], to, err);
        for (uint32_t e = 0; !st && L->exp_gate && e < m->cfg.n_experts; e++) {
            st = plan(m, &L->exp_gate[e], to, err);
            if (!st)
                st = plan(m, &L->exp_up[e], to, err);
            if (!st)
                st = plan(m, &L->exp_down[e], to, err);
        }
    }
    if (!st)
        st = quantize_rows(m, to, err);
    if (!st)
        give_back_originals(m);
    return st;
}
