/* Causal attention of a prefill chunk through sgemm: for each query head,
 * the chunk's queries against blocks of keys as one matrix product, an
 * online softmax per row, and the weighted values as a second product.
 * A long prompt's attention is then as fast as the BLAS, where the per-row
 * kernels (tw_dot_rows_multi_f32 ...) run at about half of the FMA peak.
 * Decode and speculative verification keep the per-row kernels, whose bits
 * do not depend on the batch; a prefill's rows may differ from them in the
 * last bits, as its matrix products already do. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels/pool_internal.h"
#include "tw/kernels.h"

/* Keys per block and query rows per group: a group's scores (ROWS x KEYS
 * floats) and outputs stay in L2 between the two products. */
#define KEYS 256
#define ROWS 128

typedef struct causal_job {
    const tw_causal_attn *a;
    float **scratch; /* per thread */
} causal_job;

static size_t scratch_floats(size_t hd)
{
    /* scores, outputs, converted K and V blocks, running max and sum */
    return (size_t)ROWS * KEYS + (size_t)ROWS * hd + 2 * (size_t)KEYS * hd + 2 * (size_t)ROWS;
}

/* Rows r0 .. r0 + m - 1 of query head h. */
static void causal_rows(const tw_causal_attn *a, size_t h, size_t r0, size_t m, float *scratch)
{
    const size_t hd = a->head_dim;
    const size_t g = h / (a->n_heads / a->n_kv_heads);
    float *S = scratch, *O = S + (size_t)ROWS * KEYS, *Kc = O + (size_t)ROWS * hd;
    float *Vc = Kc + (size_t)KEYS * hd, *mx = Vc + (size_t)KEYS * hd, *sum = mx + ROWS;
    const float *q = a->q + r0 * a->q_stride + h * a->head_stride;
    memset(O, 0, m * hd * sizeof(float));
    for (size_t i = 0; i < m; i++) {
        mx[i] = -INFINITY;
        sum[i] = 0.0f;
    }
    /* the last row of the group sees keys 0 .. p0 + r0 + m - 1 */
    const size_t n_keys = a->p0 + r0 + m;
    for (size_t k0 = 0; k0 < n_keys; k0 += KEYS) {
        const size_t nk = n_keys - k0 < KEYS ? n_keys - k0 : KEYS;
        const float *Kb, *Vb;
        if (a->kv_f16) {
            tw_dequant_row(TW_TYPE_F16, (const uint16_t *)a->K[g] + k0 * hd, Kc, nk * hd);
            tw_dequant_row(TW_TYPE_F16, (const uint16_t *)a->V[g] + k0 * hd, Vc, nk * hd);
            Kb = Kc;
            Vb = Vc;
        } else {
            Kb = (const float *)a->K[g] + k0 * hd;
            Vb = (const float *)a->V[g] + k0 * hd;
        }
        /* rows before the block's first key see none of it */
        const size_t first = k0 > a->p0 + r0 ? k0 - a->p0 - r0 : 0;
        const size_t mr = m - first;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)mr, (int)nk, (int)hd, 1.0f,
                    q + first * a->q_stride, (int)a->q_stride, Kb, (int)hd, 0.0f, S, KEYS);
        for (size_t i = 0; i < mr; i++) {
            const size_t row = first + i;
            /* keys up to the row's own position */
            const size_t pos = a->p0 + r0 + row;
            const size_t vis = pos + 1 - k0 < nk ? pos + 1 - k0 : nk;
            float *s = S + i * KEYS;
            /* scaled as the per-row path scales its scores */
            float bmx = tw_scale_max_f32(s, vis, a->scale);
            if (bmx > mx[row]) {
                const float corr = expf(mx[row] - bmx);
                for (size_t d = 0; d < hd; d++)
                    O[row * hd + d] *= corr;
                sum[row] *= corr;
                mx[row] = bmx;
            }
            sum[row] += tw_exp_shift_f32(s, vis, mx[row]);
            for (size_t j = vis; j < nk; j++)
                s[j] = 0.0f;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)mr, (int)hd, (int)nk, 1.0f, S,
                    KEYS, Vb, (int)hd, 1.0f, O + first * hd, (int)hd);
    }
    for (size_t i = 0; i < m; i++) {
        float *out = a->out + (r0 + i) * a->out_stride + h * hd;
        const float inv = 1.0f / sum[i];
        const float *gate = a->gate_off ? q + i * a->q_stride + a->gate_off : NULL;
        for (size_t d = 0; d < hd; d++) {
            float v = O[i * hd + d] * inv;
            out[d] = gate ? v * (1.0f / (1.0f + expf(-gate[d]))) : v;
        }
    }
}

/* One (query head, group of rows). */
static void causal_task(void *ctx, int task, int n_tasks, int thread)
{
    (void)n_tasks;
    const causal_job *j = ctx;
    const tw_causal_attn *a = j->a;
    const size_t groups = (a->n + ROWS - 1) / ROWS;
    const size_t h = (size_t)task / groups, r0 = (size_t)task % groups * ROWS;
    causal_rows(a, h, r0, a->n - r0 < ROWS ? a->n - r0 : ROWS, j->scratch[thread]);
}

bool tw_attention_causal(tw_pool *pool, const tw_causal_attn *a)
{
    if (!pool || !a || a->n == 0 || !a->n_kv_heads || a->n_heads % a->n_kv_heads)
        return false;
    float *scratch[256]; /* the pool's thread limit */
    const int nt = tw_pool_threads(pool);
    if (nt > 256)
        return false;
    for (int i = 0; i < nt; i++) {
        scratch[i] = tw_pool_scratch(pool, i, scratch_floats(a->head_dim) * sizeof(float));
        if (!scratch[i])
            return false;
    }
    causal_job j = {.a = a, .scratch = scratch};
    const size_t groups = (a->n + ROWS - 1) / ROWS;
    tw_pool_run_threads(pool, causal_task, &j, (int)(groups * a->n_heads));
    return true;
}
