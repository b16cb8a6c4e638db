/* Elementwise helpers shared by the blocks of the forward pass. */
#include <math.h>

#include "tw/kernels.h"

#include "model/model_internal.h"

/* Four running sums, so the additions do not wait on each other. */
double tw_sum_squares(const float *x, size_t n)
{
    double s[4] = {0.0, 0.0, 0.0, 0.0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (size_t k = 0; k < 4; k++)
            s[k] += (double)x[i + k] * x[i + k];
    for (; i < n; i++)
        s[0] += (double)x[i] * x[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

void tw_rmsnorm(float *out, const float *x, const float *w, size_t n, float eps)
{
    float r = (float)(1.0 / sqrt(tw_sum_squares(x, n) / (double)n + eps));
    if (w) {
        for (size_t i = 0; i < n; i++)
            out[i] = x[i] * r * w[i];
    } else {
        for (size_t i = 0; i < n; i++)
            out[i] = x[i] * r;
    }
}

void tw_rmsnorm_rows(tw_pool *pool, float *out, const float *x, const float *w, size_t rows,
                     size_t n, float eps)
{
    (void)pool; /* rows * n is small next to any matmul; not worth a pool run */
    for (size_t r = 0; r < rows; r++)
        tw_rmsnorm(out + r * n, x + r * n, w, n, eps);
}

float tw_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

float tw_silu(float x) { return x / (1.0f + expf(-x)); }

float tw_gelu_tanh(float x)
{
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

/* torch's softplus: linear above 20 so exp cannot overflow */
float tw_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

void tw_mat_mul(tw_pool *pool, const tw_mat *m, const float *x, size_t n, float *y)
{
    if (n == 1)
        tw_matvec(pool, m->type, m->w, m->row_bytes, m->rows, m->cols, x, y);
    else
        tw_matmul(pool, m->type, m->w, m->row_bytes, m->rows, m->cols, x, n, y);
}

void tw_mat_row(const tw_mat *m, size_t r, float *out)
{
    if (!tw_dequant_packed_row(m->type, m->w, m->rows, m->cols, r, out))
        tw_dequant_row(m->type, m->w + r * m->row_bytes, out, m->cols);
}

tw_matmul_part tw_mat_part(const tw_mat *m, float *y)
{
    return (tw_matmul_part){
        .type = m->type, .w = m->w, .row_bytes = m->row_bytes, .rows = m->rows, .y = y};
}

void tw_mat_mul_multi(tw_pool *pool, const tw_mat *const *mats, float *const *ys, size_t k,
                      const float *x, size_t n)
{
    tw_matmul_part parts[TW_MATMUL_MAX_PARTS];
    bool fused = k <= TW_MATMUL_MAX_PARTS;
    for (size_t i = 0; fused && i < k; i++) {
        fused = mats[i]->cols == mats[0]->cols;
        parts[i] = tw_mat_part(mats[i], ys[i]);
    }
    if (fused && k > 0) {
        tw_matmul_multi(pool, parts, k, mats[0]->cols, x, n);
        return;
    }
    for (size_t i = 0; i < k; i++)
        tw_mat_mul(pool, mats[i], x, n, ys[i]);
}

bool tw_mat_mul_pair(tw_pool *pool, const tw_mat *a, const tw_mat *b, float *ya, float *yb,
                     const float *x, size_t n, tw_rows_done_fn done, void *ctx)
{
    if (a->cols != b->cols)
        return false;
    const tw_matmul_part parts[2] = {tw_mat_part(a, ya), tw_mat_part(b, yb)};
    return tw_matmul_pair(pool, parts, a->cols, x, n, done, ctx);
}
