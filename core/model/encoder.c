/* The encoder's forward pass: one input read whole, every token attending
 * to every other, post-norm blocks. The scores of all heads are formed by
 * sgemm side by side on the pool; the rest runs over the rows. */
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
    const uint32_t *tokens;          /* ROW_EMBED */
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
        tw_mat_row(&e->word, j->tokens[r], y);
        tw_mat_row(&e->pos, r, x);
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

typedef struct attend_job {
    const tw_encoder *e;
    size_t n, H, hd;
    float scale;
} attend_job;

/* One head: softmax(q k^T * scale) v over all n rows, into att. */
static void attend_head(void *ctx, int task, int n_tasks)
{
    (void)n_tasks;
    const attend_job *j = ctx;
    const tw_encoder *e = j->e;
    const size_t n = j->n, H = j->H, hd = j->hd, off = (size_t)task * hd;
    float *S = e->scores + (size_t)task * e->max_rows * e->max_rows;
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

static void block(tw_model *m, tw_pool *pool, const tw_enc_layer *L, size_t n)
{
    const tw_mconfig *c = &m->cfg;
    tw_encoder *e = m->enc;
    const tw_mat *qkv[3] = {&L->wq, &L->wk, &L->wv};
    float *const outs[3] = {e->q, e->k, e->v};
    tw_mat_mul_multi(pool, qkv, outs, 3, e->x, n);
    rows_job r = {.m = m, .op = ROW_QKV_BIAS, .rows = n, .L = L};
    run_rows(pool, &r);
    attend_job j = {.e = e, .n = n, .H = c->hidden, .hd = c->head_dim, .scale = c->attn_scale};
    tw_pool_run(pool, attend_head, &j, (int)c->n_heads);
    tw_mat_mul(pool, &L->wo, e->att, n, e->y);
    r = (rows_job){.m = m,
                   .op = ROW_ADD_NORM,
                   .rows = n,
                   .bias = L->bo,
                   .ln_w = L->attn_ln_w,
                   .ln_b = L->attn_ln_b};
    run_rows(pool, &r);

    tw_mat_mul(pool, &L->up, e->x, n, e->ff);
    r = (rows_job){.m = m, .op = ROW_BIAS_ACT, .rows = n, .bias = L->b_up};
    run_rows(pool, &r);
    tw_mat_mul(pool, &L->down, e->ff, n, e->y);
    r = (rows_job){.m = m,
                   .op = ROW_ADD_NORM,
                   .rows = n,
                   .bias = L->b_down,
                   .ln_w = L->ffn_ln_w,
                   .ln_b = L->ffn_ln_b};
    run_rows(pool, &r);
}

tw_status tw_model_encode(tw_model *model, tw_pool *pool, const uint32_t *tokens, size_t n,
                          float *hidden, tw_err *err)
{
    if (!model || !tokens || !hidden)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "encode: NULL argument");
    tw_encoder *e = model->enc;
    if (!e)
        return tw_errorf(err, TW_FAILED_PRECONDITION,
                         "encode: %s is not an encoder; embed through tw_model_forward",
                         model->cfg.model_type);
    if (n == 0 || n > e->max_rows)
        return tw_errorf(err, TW_OUT_OF_RANGE,
                         "encode: %zu tokens; the model reads 1 to %zu at once", n, e->max_rows);
    const tw_mconfig *c = &model->cfg;
    const size_t H = c->hidden;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] >= c->vocab)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "token id %u at index %zu is outside the vocabulary (%u)", tokens[i],
                             i, c->vocab);
    rows_job r = {.m = model, .op = ROW_EMBED, .rows = n, .tokens = tokens};
    run_rows(pool, &r);
    for (uint32_t l = 0; l < c->n_layers; l++)
        block(model, pool, &e->layers[l], n);
    memcpy(hidden, e->x, n * H * sizeof *hidden);
    return TW_OK;
}
