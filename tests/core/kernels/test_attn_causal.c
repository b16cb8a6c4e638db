/* tw_attention_causal against attention computed directly in double
 * precision: chunks that start at position 0 and deep into a context (rows
 * that see only part of a block of keys), group sizes that do not divide
 * the row count, grouped-query heads, gated heads, half-precision K/V. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/kernels.h"
#include "tw/pool.h"

typedef struct attn_case {
    size_t n, p0, heads, kv_heads, hd;
    bool gated, f16;
} attn_case;

/* Row r, head h by definition: softmax over keys 0 .. p0 + r of
 * scale * q.k, times V, times sigmoid(gate). */
static void reference(const attn_case *c, const float *q, size_t q_stride, size_t head_stride,
                      const float *const *Kf, const float *const *Vf, float scale, double *out)
{
    size_t per = c->heads / c->kv_heads;
    double *w = malloc((c->p0 + c->n) * sizeof *w);
    for (size_t r = 0; r < c->n; r++)
        for (size_t h = 0; h < c->heads; h++) {
            const float *qh = q + r * q_stride + h * head_stride;
            const float *K = Kf[h / per], *V = Vf[h / per];
            size_t keys = c->p0 + r + 1;
            double mx = -INFINITY, sum = 0;
            for (size_t k = 0; k < keys; k++) {
                double s = 0;
                for (size_t d = 0; d < c->hd; d++)
                    s += (double)qh[d] * K[k * c->hd + d];
                w[k] = s * scale;
                mx = fmax(mx, w[k]);
            }
            for (size_t k = 0; k < keys; k++)
                sum += w[k] = exp(w[k] - mx);
            for (size_t d = 0; d < c->hd; d++) {
                double v = 0;
                for (size_t k = 0; k < keys; k++)
                    v += w[k] * V[k * c->hd + d];
                v /= sum;
                if (c->gated)
                    v /= 1.0 + exp(-(double)qh[c->hd + d]);
                out[(r * c->heads + h) * c->hd + d] = v;
            }
        }
    free(w);
}

static void run_case(tw_pool *pool, const attn_case *c, tw_test_rng *rng)
{
    size_t head_stride = c->hd * (c->gated ? 2 : 1), q_stride = c->heads * head_stride;
    size_t keys = c->p0 + c->n;
    float *q = malloc(c->n * q_stride * sizeof *q);
    for (size_t i = 0; i < c->n * q_stride; i++)
        q[i] = tw_test_rand_f32(rng);
    float *Kf[4], *Vf[4];
    uint16_t *Kh[4], *Vh[4];
    const void *K[4], *V[4];
    for (size_t g = 0; g < c->kv_heads; g++) {
        Kf[g] = malloc(keys * c->hd * sizeof(float));
        Vf[g] = malloc(keys * c->hd * sizeof(float));
        Kh[g] = malloc(keys * c->hd * sizeof(uint16_t));
        Vh[g] = malloc(keys * c->hd * sizeof(uint16_t));
        for (size_t i = 0; i < keys * c->hd; i++) {
            Kf[g][i] = tw_test_rand_f32(rng);
            Vf[g][i] = tw_test_rand_f32(rng);
        }
        if (c->f16) {
            /* the reference sees the values the half rows hold */
            tw_quant_row(TW_TYPE_F16, Kf[g], Kh[g], keys * c->hd);
            tw_quant_row(TW_TYPE_F16, Vf[g], Vh[g], keys * c->hd);
            tw_dequant_row(TW_TYPE_F16, Kh[g], Kf[g], keys * c->hd);
            tw_dequant_row(TW_TYPE_F16, Vh[g], Vf[g], keys * c->hd);
        }
        K[g] = c->f16 ? (const void *)Kh[g] : Kf[g];
        V[g] = c->f16 ? (const void *)Vh[g] : Vf[g];
    }
    float scale = 1.0f / sqrtf((float)c->hd);
    float *out = malloc(c->n * c->heads * c->hd * sizeof *out);
    double *want = malloc(c->n * c->heads * c->hd * sizeof *want);
    const tw_causal_attn a = {.q = q,
                              .q_stride = q_stride,
                              .head_stride = head_stride,
                              .gate_off = c->gated ? c->hd : 0,
                              .n_heads = c->heads,
                              .n_kv_heads = c->kv_heads,
                              .head_dim = c->hd,
                              .n = c->n,
                              .p0 = c->p0,
                              .K = K,
                              .V = V,
                              .kv_f16 = c->f16,
                              .scale = scale,
                              .out = out,
                              .out_stride = c->heads * c->hd};
    assert_true(tw_attention_causal(pool, &a));
    reference(c, q, q_stride, head_stride, (const float *const *)Kf, (const float *const *)Vf,
              scale, want);
    double worst = 0;
    for (size_t i = 0; i < c->n * c->heads * c->hd; i++)
        worst = fmax(worst, fabs(out[i] - want[i]));
    if (worst > 2e-5)
        fail_msg("n=%zu p0=%zu heads=%zu/%zu hd=%zu gated=%d f16=%d: error %g", c->n, c->p0,
                 c->heads, c->kv_heads, c->hd, c->gated, c->f16, worst);
    for (size_t g = 0; g < c->kv_heads; g++) {
        free(Kf[g]);
        free(Vf[g]);
        free(Kh[g]);
        free(Vh[g]);
    }
    free(q);
    free(out);
    free(want);
}

static void test_against_reference(void **state)
{
    (void)state;
    tw_pool *pool;
    tw_err err;
    assert_int_equal(tw_pool_create(2, &pool, &err), TW_OK);
    tw_test_rng rng = {21};
    static const attn_case cases[] = {
        {.n = 200, .p0 = 0, .heads = 4, .kv_heads = 2, .hd = 64},
        {.n = 70, .p0 = 300, .heads = 6, .kv_heads = 2, .hd = 48},
        {.n = 33, .p0 = 600, .heads = 2, .kv_heads = 1, .hd = 64, .gated = true},
        {.n = 129, .p0 = 255, .heads = 4, .kv_heads = 4, .hd = 40, .f16 = true},
        /* a group of rows straddling a block of keys most of them cannot see */
        {.n = 128, .p0 = 200, .heads = 2, .kv_heads = 2, .hd = 32},
        {.n = 1, .p0 = 0, .heads = 3, .kv_heads = 1, .hd = 8},
        /* more query heads per K/V head than one task takes, split evenly
         * and unevenly, over several groups of rows */
        {.n = 150, .p0 = 40, .heads = 20, .kv_heads = 2, .hd = 32, .f16 = true},
        {.n = 300, .p0 = 0, .heads = 9, .kv_heads = 1, .hd = 16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(pool, &cases[i], &rng);
    /* no pool: the caller keeps its own path */
    tw_causal_attn none = {.n = 1, .n_heads = 1, .n_kv_heads = 1, .head_dim = 8};
    assert_false(tw_attention_causal(NULL, &none));
    tw_pool_destroy(pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
