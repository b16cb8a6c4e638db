/* The encoder's forward pass: each input read whole, every token attending
 * to every other token of its input, post-norm blocks. The inputs of a
 * batch share the matrix products, so the weights are read once for all of
 * them; their attention runs per (input, head) by sgemm, side by side on
 * the pool, and the rest over the rows. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "tw/kernels.h"
#include "tw/pool.h"

#include "model/encoder.h"

/* LayerNorm of one row, in double so the mean and variance of wide rows
 * keep their digits. out may be x. */
static void layer_norm(float *out, const float *x, const float *w, const float *b, size_t n,
                       float eps)
{
    double mean = 0, var = 0;
    for (size_t i = 0; i < n; i++)
        mean += x[i];
    mean /= (double)n;
    for (size_t i = 0; i < n; i++) {
        double d = x[i] - mean;
        var += d * d;
    }
    const double inv = 1.0 / sqrt(var / (double)n + eps);
    for (size_t i = 0; i < n; i++)
        out[i] = (float)((x[i] - mean) * inv) * w[i] + b[i];
}

static float gelu_erf(float x)
{
    return 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2));
}

/* What a pass over the rows does to each: the work between the matrix
 * products, spread over the pool by rows. */
typedef enum row_op {
    ROW_EMBED,    /* x = LN(word + position + type 0) */
    ROW_QKV_BIAS, /* q, k, v += their biases */
    ROW_ADD_NORM, /* x = LN(y + bias + x) */
    ROW_BIAS_ACT, /* ff = act(ff + bias) */
} row_op;

typedef struct rows_job {
    const tw_model *m;
    row_op op;
    size_t rows;
    const tw_enc_layer *L;           /* ROW_QKV_BIAS */
    const float *bias, *ln_w, *ln_b; /* ROW_ADD_NORM, ROW_BIAS_ACT */
} rows_job;

static void row_pass(const rows_job *j, size_t r)
{
    const tw_mconfig *c = &j->m->cfg;
    const tw_encoder *e = j->m->enc;
    const size_t H = c->hidden, F = c->ffn_dim;
    float *x = e->x + r * H, *y = e->y + r * H;
    switch (j->op) {
    case ROW_EMBED:
        tw_mat_row(&e->word, e->row_token[r], y);
        tw_mat_row(&e->pos, e->row_pos[r], x);
        for (size_t d = 0; d < H; d++)
            y[d] += x[d] + e->type0[d];
        layer_norm(x, y, e->emb_ln_w, e->emb_ln_b, H, c->norm_eps);
        break;
    case ROW_QKV_BIAS:
        for (size_t d = 0; d < H; d++) {
            e->q[r * H + d] += j->L->bq[d];
            e->k[r * H + d] += j->L->bk[d];
            e->v[r * H + d] += j->L->bv[d];
        }
        break;
    case ROW_ADD_NORM:
        for (size_t d = 0; d < H; d++)
            y[d] = (y[d] + j->bias[d]) + x[d];
        layer_norm(x, y, j->ln_w, j->ln_b, H, c->norm_eps);
        break;
    case ROW_BIAS_ACT: {
        float *f = e->ff + r * F;
        const bool tanh_form = c->enc_act == TW_ACT_GELU_TANH;
        for (size_t d = 0; d < F; d++)
            f[d] = tanh_form ? tw_gelu_tanh(f[d] + j->bias[d]) : gelu_erf(f[d] + j->bias[d]);
        break;
    }
    }
}

static void rows_task(void *ctx, int task, int n_tasks)
{
    const rows_job *j = ctx;
    const size_t per = (j->rows + (size_t)n_tasks - 1) / (size_t)n_tasks;
    const size_t lo = (size_t)task * per, hi = lo + per < j->rows ? lo + per : j->rows;
    for (size_t r = lo; r < hi; r++)
        row_pass(j, r);
}

static void run_rows(tw_pool *pool, rows_job *j)
{
    int tasks = tw_pool_threads(pool);
    if ((size_t)tasks > j->rows)
        tasks = (int)j->rows;
    tw_pool_run(pool, rows_task, j, tasks);
}

typedef struct f32_job {
    const tw_mat *w;
    const float *x;
    float *y;
    size_t n;
} f32_job;

static void f32_task(void *ctx, int task, int n_tasks)
{
    const f32_job *j = ctx;
    const size_t rows = j->w->rows, cols = j->w->cols;
    const size_t per = (rows + (size_t)n_tasks - 1) / (size_t)n_tasks;
    const size_t r0 = (size_t)task * per, nr = r0 + per < rows ? per : rows - r0;
    if (r0 >= rows)
        return;
    const float *w = (const float *)(const void *)(j->w->w + r0 * j->w->row_bytes);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)j->n, (int)nr, (int)cols, 1.0f, j->x,
                (int)cols, w, (int)(j->w->row_bytes / sizeof(float)), 0.0f, j->y + r0, (int)rows);
}

/* y = x W^T over n rows. The decoder's products keep a few rows on kernels
 * whose bits match a single row's, which speculation needs and an encoder
 * does not: f32 weights go to sgemm at every row count, split over the
 * pool by weight rows. */
static void matmul(tw_pool *pool, const tw_mat *w, const float *x, size_t n, float *y)
{
    if (w->type != TW_TYPE_F32 || w->row_bytes % sizeof(float) != 0) {
        tw_mat_mul(pool, w, x, n, y);
        return;
    }
    f32_job j = {.w = w, .x = x, .y = y, .n = n};
    tw_pool_run(pool, f32_task, &j, tw_pool_threads(pool));
}

/* The inputs of a batch: input i is rows [start[i], start[i] + len[i]),
 * its scores at score[i] in each head's share. */
typedef struct batch_plan {
    size_t k;
    size_t start[TW_ENCODE_MAX_INPUTS], len[TW_ENCODE_MAX_INPUTS];
    size_t score[TW_ENCODE_MAX_INPUTS];
} batch_plan;

typedef struct attend_job {
    const tw_encoder *e;
    const batch_plan *plan;
    size_t H, hd, n_heads;
    float scale;
} attend_job;

/* One head of one input: softmax(q k^T * scale) v over its rows, into att. */
static void attend_head(void *ctx, int task, int n_tasks)
{
    (void)n_tasks;
    const attend_job *j = ctx;
    const tw_encoder *e = j->e;
    const size_t in = (size_t)task / j->n_heads, head = (size_t)task % j->n_heads;
    const size_t n = j->plan->len[in], H = j->H, hd = j->hd;
    const size_t off = j->plan->start[in] * H + head * hd;
    float *S = e->scores + head * e->max_len * e->max_rows + j->plan->score[in];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)n, (int)hd, 1.0f, e->q + off,
                (int)H, e->k + off, (int)H, 0.0f, S, (int)n);
    for (size_t r = 0; r < n; r++) {
        float *s = S + r * n;
        const float mx = tw_scale_max_f32(s, n, j->scale);
        const float inv = 1.0f / tw_exp_shift_f32(s, n, mx);
        for (size_t i = 0; i < n; i++)
            s[i] *= inv;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)hd, (int)n, 1.0f, S, (int)n,
                e->v + off, (int)H, 0.0f, e->att + off, (int)H);
}

static void block(tw_model *m, tw_pool *pool, const tw_enc_layer *L, const batch_plan *plan,
                  size_t n)
{
    const tw_mconfig *c = &m->cfg;
    tw_encoder *e = m->enc;
    if (L->wq.type == TW_TYPE_F32) {
        matmul(pool, &L->wq, e->x, n, e->q);
        matmul(pool, &L->wk, e->x, n, e->k);
        matmul(pool, &L->wv, e->x, n, e->v);
    } else {
        const tw_mat *qkv[3] = {&L->wq, &L->wk, &L->wv};
        float *const outs[3] = {e->q, e->k, e->v};
        tw_mat_mul_multi(pool, qkv, outs, 3, e->x, n);
    }
    rows_job r = {.m = m, .op = ROW_QKV_BIAS, .rows = n, .L = L};
    run_rows(pool, &r);
    attend_job j = {.e = e,
                    .plan = plan,
                    .H = c->hidden,
                    .hd = c->head_dim,
                    .n_heads = c->n_heads,
                    .scale = c->attn_scale};
    tw_pool_run(pool, attend_head, &j, (int)(plan->k * c->n_heads));
    matmul(pool, &L->wo, e->att, n, e->y);
    r = (rows_job){.m = m,
                   .op = ROW_ADD_NORM,
                   .rows = n,
                   .bias = L->bo,
                   .ln_w = L->attn_ln_w,
                   .ln_b = L->attn_ln_b};
    run_rows(pool, &r);

    matmul(pool, &L->up, e->x, n, e->ff);
    r = (rows_job){.m = m, .op = ROW_BIAS_ACT, .rows = n, .bias = L->b_up};
    run_rows(pool, &r);
    matmul(pool, &L->down, e->ff, n, e->y);
    r = (rows_job){.m = m,
                   .op = ROW_ADD_NORM,
                   .rows = n,
                   .bias = L->b_down,
                   .ln_w = L->ffn_ln_w,
                   .ln_b = L->ffn_ln_b};
    run_rows(pool, &r);
}

tw_status tw_model_encode_batch(tw_model *model, tw_pool *pool, size_t k,
                                const uint32_t *const *tokens, const size_t *n,
                                float *const *hidden, tw_err *err)
{
    if (!model || !tokens || !n || !hidden)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "encode: NULL argument");
    tw_encoder *e = model->enc;
    if (!e)
        return tw_errorf(err, TW_FAILED_PRECONDITION,
                         "encode: %s is not an encoder; embed through tw_model_forward",
                         model->cfg.model_type);
    if (k == 0 || k > TW_ENCODE_MAX_INPUTS)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "encode: %zu inputs (1 to %d at once)", k,
                         TW_ENCODE_MAX_INPUTS);
    const tw_mconfig *c = &model->cfg;
    const size_t H = c->hidden;
    batch_plan plan = {.k = k};
    size_t rows = 0, score = 0;
    for (size_t i = 0; i < k; i++) {
        if (!tokens[i] || !hidden[i])
            return tw_errorf(err, TW_INVALID_ARGUMENT, "encode: input %zu is NULL", i);
        if (n[i] == 0 || n[i] > e->max_len)
            return tw_errorf(err, TW_OUT_OF_RANGE,
                             "encode: %zu tokens; the model reads 1 to %zu at once", n[i],
                             e->max_len);
        if (n[i] > e->max_rows - rows)
            return tw_errorf(err, TW_OUT_OF_RANGE,
                             "encode: the inputs hold more than the %zu tokens of one pass",
                             e->max_rows);
        for (size_t t = 0; t < n[i]; t++) {
            if (tokens[i][t] >= c->vocab)
                return tw_errorf(err, TW_INVALID_ARGUMENT,
                                 "token id %u at index %zu is outside the vocabulary (%u)",
                                 tokens[i][t], t, c->vocab);
            e->row_token[rows + t] = tokens[i][t];
            e->row_pos[rows + t] = (uint32_t)t;
        }
        plan.start[i] = rows;
        plan.len[i] = n[i];
        plan.score[i] = score;
        rows += n[i];
        score += n[i] * n[i];
    }
    rows_job r = {.m = model, .op = ROW_EMBED, .rows = rows};
    run_rows(pool, &r);
    for (uint32_t l = 0; l < c->n_layers; l++)
        block(model, pool, &e->layers[l], &plan, rows);
    for (size_t i = 0; i < k; i++)
        memcpy(hidden[i], e->x + plan.start[i] * H, n[i] * H * sizeof *hidden[i]);
    return TW_OK;
}

tw_status tw_model_encode(tw_model *model, tw_pool *pool, const uint32_t *tokens, size_t n,
                          float *hidden, tw_err *err)
{
    return tw_model_encode_batch(model, pool, 1, &tokens, &n, &hidden, err);
}

size_t tw_model_encode_rows(const tw_model *model)
{
    return model && model->enc ? model->enc->max_rows : 0;
}
