/* The attention mixer: standard or gated (Qwen3.5), full or sliding window,
 * optional q/k bias and per-head q/k RMSNorm, full or partial RoPE in either
 * pair layout, grouped-query K/V shared across heads.
 *
 * All rows of a step first write their K/V into their sequence's cache;
 * each row then attends over its own sequence's positions [start, pos], so a
 * prefill chunk is causal without a mask and a decode batch mixes sequences
 * freely. */
#include <math.h>
#include <string.h>

#include "tw/kernels.h"

#include "model/model_internal.h"

#define SCORE_BLOCK 128
/* Queries of one sequence at consecutive positions attend together, up to
 * this many: each key and value row is then read once for all of them. */
#define QUERY_GROUP 4

typedef struct attn_job {
    const tw_model *m;
    const tw_layer *L;
    const tw_batch *b;
    const float *q; /* [rows][q_stride] */
    size_t q_stride;
    size_t gate_off; /* offset of a head's gate from its query, 0 = no gate */
    float *att;      /* [rows][n_heads * head_dim] */
} attn_job;

/* One query's online softmax over blocks of keys, so no score buffer
 * proportional to the context is needed. */
typedef struct attn_state {
    float acc[TW_MAX_HEAD_DIM];
    float mx, sum;
} attn_state;

/* Takes a block of nb raw scores into st: scaled (and soft-capped), the
 * running sums rescaled to a new maximum, the scores turned into softmax
 * numerators. The caller then adds the numerators' share of V to st->acc. */
static void softmax_block(const tw_mconfig *c, float *sc, uint32_t nb, attn_state *st)
{
    const float scale = c->attn_scale, cap = c->attn_softcap;
    float bmx = -INFINITY;
    for (uint32_t i = 0; i < nb; i++) {
        float s = sc[i] * scale;
        if (cap > 0.0f)
            s = cap * tanhf(s / cap);
        sc[i] = s;
        bmx = s > bmx ? s : bmx;
    }
    if (bmx > st->mx) {
        float corr = expf(st->mx - bmx); /* exp(-inf) = 0 on the first block */
        for (uint32_t d = 0; d < c->head_dim; d++)
            st->acc[d] *= corr;
        st->sum *= corr;
        st->mx = bmx;
    }
    st->sum += tw_exp_shift_f32(sc, nb, st->mx);
}

/* The query of row r, head h: softmax(q K^T * scale) V over the row's
 * visible positions [start, pos], into the attention output. Rows attending
 * together give each row exactly these bits. */
static void attend_row(const attn_job *j, size_t r, uint32_t h, attn_state *st, uint32_t from)
{
    const tw_mconfig *c = &j->m->cfg;
    uint32_t hd = c->head_dim;
    uint32_t g = h / (c->n_heads / c->n_kv_heads);
    const tw_seq *seq = j->b->seq[r];
    uint32_t pos = j->b->pos[r];
    const float *q = j->q + r * j->q_stride + (size_t)h * hd * (j->gate_off ? 2 : 1);
    const float *K = tw_seq_kv(seq, j->L->attn_index, 0, g);
    const float *V = tw_seq_kv(seq, j->L->attn_index, 1, g);
    float sc[SCORE_BLOCK];
    for (uint32_t t0 = from; t0 <= pos; t0 += SCORE_BLOCK) {
        uint32_t nb = pos + 1 - t0 < SCORE_BLOCK ? pos + 1 - t0 : SCORE_BLOCK;
        tw_dot_rows_f32(q, K + (size_t)t0 * hd, nb, hd, sc);
        softmax_block(c, sc, nb, st);
        tw_axpy_rows_f32(sc, V + (size_t)t0 * hd, nb, hd, st->acc);
    }
    float *out = j->att + r * (size_t)c->n_heads * hd + (size_t)h * hd;
    float inv = 1.0f / st->sum;
    if (j->gate_off) {
        const float *gate = q + j->gate_off;
        for (uint32_t d = 0; d < hd; d++)
            out[d] = st->acc[d] * inv * tw_sigmoid(gate[d]);
    } else {
        for (uint32_t d = 0; d < hd; d++)
            out[d] = st->acc[d] * inv;
    }
}

static void state_init(attn_state *st, uint32_t hd)
{
    memset(st->acc, 0, hd * sizeof(float));
    st->mx = -INFINITY;
    st->sum = 0.0f;
}

/* nq rows from r of one sequence at consecutive positions, head h, from
 * position 0: the key blocks every one of them sees whole go through the
 * multi-query kernels, the rest row by row. */
static void attend_run(const attn_job *j, size_t r, size_t nq, uint32_t h)
{
    const tw_mconfig *c = &j->m->cfg;
    uint32_t hd = c->head_dim;
    uint32_t g = h / (c->n_heads / c->n_kv_heads);
    const tw_seq *seq = j->b->seq[r];
    uint32_t pos0 = j->b->pos[r];
    const float *q = j->q + r * j->q_stride + (size_t)h * hd * (j->gate_off ? 2 : 1);
    const float *K = tw_seq_kv(seq, j->L->attn_index, 0, g);
    const float *V = tw_seq_kv(seq, j->L->attn_index, 1, g);
    attn_state st[QUERY_GROUP];
    float sc[QUERY_GROUP][SCORE_BLOCK];
    for (size_t k = 0; k < nq; k++)
        state_init(&st[k], hd);
    uint32_t t0 = 0;
    for (; t0 + SCORE_BLOCK <= pos0 + 1; t0 += SCORE_BLOCK) {
        tw_dot_rows_multi_f32(q, j->q_stride, nq, K + (size_t)t0 * hd, SCORE_BLOCK, hd, sc[0],
                              SCORE_BLOCK);
        for (size_t k = 0; k < nq; k++)
            softmax_block(c, sc[k], SCORE_BLOCK, &st[k]);
        tw_axpy_rows_multi_f32(sc[0], SCORE_BLOCK, nq, V + (size_t)t0 * hd, SCORE_BLOCK, hd,
                               st[0].acc, sizeof st[0] / sizeof(float));
    }
    for (size_t k = 0; k < nq; k++)
        attend_row(j, r + k, h, &st[k], t0);
}

/* Whether row r + 1 continues row r's sequence at the next position. */
static bool continues(const tw_batch *b, size_t r)
{
    return b->seq[r + 1] == b->seq[r] && b->pos[r + 1] == b->pos[r] + 1;
}

/* One group of up to QUERY_GROUP rows and one head: runs of rows that
 * continue each other attend together, other rows alone. */
static void attend_group(void *ctx, int task, int n_tasks)
{
    (void)n_tasks;
    const attn_job *j = ctx;
    const tw_mconfig *c = &j->m->cfg;
    size_t r0 = (size_t)task / c->n_heads * QUERY_GROUP;
    uint32_t h = (uint32_t)((size_t)task % c->n_heads);
    size_t r1 = r0 + QUERY_GROUP < j->b->n ? r0 + QUERY_GROUP : j->b->n;
    for (size_t r = r0; r < r1;) {
        size_t e = r + 1;
        while (e < r1 && continues(j->b, e - 1))
            e++;
        /* a sliding window starts each row somewhere else */
        if (e - r > 1 && !j->L->sliding) {
            attend_run(j, r, e - r, h);
        } else {
            for (size_t k = r; k < e; k++) {
                attn_state st;
                state_init(&st, c->head_dim);
                uint32_t start = 0, pos = j->b->pos[k];
                if (j->L->sliding && pos + 1 > c->sliding_window)
                    start = pos + 1 - c->sliding_window;
                attend_row(j, k, h, &st, start);
            }
        }
        r = e;
    }
}

static void add_bias(float *x, const float *bias, size_t rows, size_t n)
{
    if (!bias)
        return;
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < n; i++)
            x[r * n + i] += bias[i];
}

void tw_attention_block(tw_model *m, tw_pool *pool, const tw_layer *L, const tw_batch *b,
                        const float *xn, float *y)
{
    const tw_mconfig *c = &m->cfg;
    tw_scratch *s = &m->s;
    size_t n = b->n;
    uint32_t hd = c->head_dim;
    bool gated = c->family->attn_gate;
    size_t q_stride = (size_t)c->n_heads * hd * (gated ? 2 : 1);
    size_t kv_stride = (size_t)c->n_kv_heads * hd;

    const tw_mat *qkv[3] = {&L->wq, &L->wk, &L->wv};
    float *const out[3] = {s->q, s->k, s->v};
    tw_mat_mul_multi(pool, qkv, out, 3, xn, n);
    add_bias(s->q, L->bq, n, q_stride);
    add_bias(s->k, L->bk, n, kv_stride);
    add_bias(s->v, L->bv, n, kv_stride);

    for (size_t r = 0; r < n; r++) {
        uint32_t pos = b->pos[r];
        tw_seq *seq = b->seq[r];
        for (uint32_t h = 0; h < c->n_heads; h++) {
            float *qh = s->q + r * q_stride + (size_t)h * hd * (gated ? 2 : 1);
            if (L->q_norm)
                tw_rmsnorm(qh, qh, L->q_norm, hd, c->norm_eps);
            tw_rope_apply(L->rope, qh, pos);
        }
        for (uint32_t g = 0; g < c->n_kv_heads; g++) {
            float *kh = s->k + r * kv_stride + (size_t)g * hd;
            if (L->k_norm)
                tw_rmsnorm(kh, kh, L->k_norm, hd, c->norm_eps);
            tw_rope_apply(L->rope, kh, pos);
            memcpy(tw_seq_kv(seq, L->attn_index, 0, g) + (size_t)pos * hd, kh,
                   hd * sizeof(float));
            memcpy(tw_seq_kv(seq, L->attn_index, 1, g) + (size_t)pos * hd,
                   s->v + r * kv_stride + (size_t)g * hd, hd * sizeof(float));
        }
    }

    attn_job j = {.m = m, .L = L, .b = b, .q = s->q, .q_stride = q_stride,
                  .gate_off = gated ? hd : 0, .att = s->att};
    size_t groups = (n + QUERY_GROUP - 1) / QUERY_GROUP;
    tw_pool_run(pool, attend_group, &j, (int)(groups * c->n_heads));

    tw_mat_mul(pool, &L->wo, s->att, n, y);
    add_bias(y, L->bo, n, c->hidden);
}
