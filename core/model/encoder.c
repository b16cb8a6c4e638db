/* The encoder's forward pass: one input read whole, every token attending
 * to every other, post-norm blocks. The scores of all heads are formed by
 * sgemm side by side on the pool; the rest runs over the rows. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "tw/pool.h"

#include "model/encoder.h"

/* LayerNorm of each row of x (n values) into out, in double so the mean
 * and variance of wide rows keep their digits. out may be x. */
static void layer_norm_rows(float *out, const float *x, const float *w, const float *b, size_t rows,
                            size_t n, float eps)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *o = out + r * n;
        double mean = 0, var = 0;
        for (size_t i = 0; i < n; i++)
            mean += xr[i];
        mean /= (double)n;
        for (size_t i = 0; i < n; i++) {
            double d = xr[i] - mean;
            var += d * d;
        }
        const double inv = 1.0 / sqrt(var / (double)n + eps);
        for (size_t i = 0; i < n; i++)
            o[i] = (float)((xr[i] - mean) * inv) * w[i] + b[i];
    }
}

static void add_bias_rows(float *y, const float *b, size_t rows, size_t n)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < n; i++)
            y[r * n + i] += b[i];
}

static void linear(tw_pool *pool, const tw_mat *w, const float *b, const float *x, size_t rows,
                   float *y)
{
    tw_mat_mul(pool, w, x, rows, y);
    add_bias_rows(y, b, rows, w->rows);
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
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)n, (int)hd, j->scale,
                e->q + off, (int)H, e->k + off, (int)H, 0.0f, S, (int)n);
    for (size_t r = 0; r < n; r++) {
        float *s = S + r * n, mx = s[0];
        for (size_t i = 1; i < n; i++)
            mx = s[i] > mx ? s[i] : mx;
        double sum = 0;
        for (size_t i = 0; i < n; i++) {
            s[i] = expf(s[i] - mx);
            sum += s[i];
        }
        const float inv = (float)(1.0 / sum);
        for (size_t i = 0; i < n; i++)
            s[i] *= inv;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)hd, (int)n, 1.0f, S, (int)n,
                e->v + off, (int)H, 0.0f, e->att + off, (int)H);
}

static float gelu_erf(float x)
{
    return 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2));
}

static void block(tw_model *m, tw_pool *pool, const tw_enc_layer *L, size_t n)
{
    const tw_mconfig *c = &m->cfg;
    tw_encoder *e = m->enc;
    const size_t H = c->hidden, F = c->ffn_dim;
    linear(pool, &L->wq, L->bq, e->x, n, e->q);
    linear(pool, &L->wk, L->bk, e->x, n, e->k);
    linear(pool, &L->wv, L->bv, e->x, n, e->v);
    attend_job j = {.e = e, .n = n, .H = H, .hd = c->head_dim, .scale = c->attn_scale};
    tw_pool_run(pool, attend_head, &j, (int)c->n_heads);
    linear(pool, &L->wo, L->bo, e->att, n, e->y);
    for (size_t i = 0; i < n * H; i++)
        e->y[i] += e->x[i];
    layer_norm_rows(e->x, e->y, L->attn_ln_w, L->attn_ln_b, n, H, c->norm_eps);

    linear(pool, &L->up, L->b_up, e->x, n, e->ff);
    const bool tanh_form = c->enc_act == TW_ACT_GELU_TANH;
    for (size_t i = 0; i < n * F; i++)
        e->ff[i] = tanh_form ? tw_gelu_tanh(e->ff[i]) : gelu_erf(e->ff[i]);
    linear(pool, &L->down, L->b_down, e->ff, n, e->y);
    for (size_t i = 0; i < n * H; i++)
        e->y[i] += e->x[i];
    layer_norm_rows(e->x, e->y, L->ffn_ln_w, L->ffn_ln_b, n, H, c->norm_eps);
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
    for (size_t r = 0; r < n; r++) {
        float *x = e->y + r * H, *p = e->x + r * H;
        tw_mat_row(&e->word, tokens[r], x);
        tw_mat_row(&e->pos, r, p);
        for (size_t d = 0; d < H; d++)
            x[d] += p[d] + e->type0[d];
    }
    layer_norm_rows(e->x, e->y, e->emb_ln_w, e->emb_ln_b, n, H, c->norm_eps);
    for (uint32_t l = 0; l < c->n_layers; l++)
        block(model, pool, &e->layers[l], n);
    memcpy(hidden, e->x, n * H * sizeof *hidden);
    return TW_OK;
}
