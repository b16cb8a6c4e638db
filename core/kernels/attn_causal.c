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
 * floats) and outputs stay in L2 between the two products. The groups are
 * the prefill's (TW_PREFILL_GROUP): each group's products have the same
 * shapes however many groups the chunk holds, so its rows keep their bits
 * when a prompt is read in other chunks. */
#define KEYS 256
#define ROWS TW_PREFILL_GROUP
/* Most query heads of one K/V head a task takes, and most floats of their
 * outputs: each K/V block read (and, for half-precision K/V, converted)
 * once serves all of them, while their outputs stay within the L2 with the
 * block (eight heads of 64 dimensions, two of 256). */
#define TASK_HEADS      8
#define TASK_OUT_FLOATS 65536

typedef struct causal_job {
    const tw_causal_attn *a;
    float **scratch; /* per thread */
    size_t groups;   /* groups of ROWS rows */
    size_t per;      /* query heads per K/V head */
    size_t task_heads;
    size_t chunks; /* tasks per K/V head and group of rows */
} causal_job;

static size_t scratch_floats(size_t hd, size_t heads)
{
    /* converted K and V blocks, scores, then per head its outputs and
     * running max and sum */
    return 2 * (size_t)KEYS * hd + (size_t)ROWS * KEYS + heads * ((size_t)ROWS * hd + 2 * ROWS);
}

/* One query head's outputs and online softmax state over a group of rows. */
typedef struct head_acc {
    float *O, *mx, *sum;
} head_acc;

/* Query head h against key block [k0, k0 + nk) of Kb / Vb, for rows
 * r0 + first .. r0 + m - 1 (the rows before `first` see none of it). */
static void head_block(const tw_causal_attn *a, size_t h, size_t r0, size_t m, size_t first,
                       size_t k0, size_t nk, const float *Kb, const float *Vb, float *S,
                       const head_acc *acc)
{
    const size_t hd = a->head_dim, mr = m - first;
    const float *q = a->q + r0 * a->q_stride + h * a->head_stride;
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
        if (bmx > acc->mx[row]) {
            const float corr = expf(acc->mx[row] - bmx);
            for (size_t d = 0; d < hd; d++)
                acc->O[row * hd + d] *= corr;
            acc->sum[row] *= corr;
            acc->mx[row] = bmx;
        }
        acc->sum[row] += tw_exp_shift_f32(s, vis, acc->mx[row]);
        for (size_t j = vis; j < nk; j++)
            s[j] = 0.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)mr, (int)hd, (int)nk, 1.0f, S, KEYS,
                Vb, (int)hd, 1.0f, acc->O + first * hd, (int)hd);
}

/* Rows r0 .. r0 + m - 1 of query heads h0 .. h0 + nh - 1, which share K/V
 * head g. Each head goes through the same products over the same blocks
 * as it would alone. */
static void causal_rows(const tw_causal_attn *a, size_t g, size_t h0, size_t nh, size_t r0,
                        size_t m, float *scratch)
{
    const size_t hd = a->head_dim;
    float *Kc = scratch, *Vc = Kc + (size_t)KEYS * hd, *S = Vc + (size_t)KEYS * hd;
    head_acc acc[TASK_HEADS];
    float *next = S + (size_t)ROWS * KEYS;
    for (size_t k = 0; k < nh; k++) {
        acc[k] = (head_acc){.O = next, .mx = next + (size_t)ROWS * hd};
        acc[k].sum = acc[k].mx + ROWS;
        next = acc[k].sum + ROWS;
        memset(acc[k].O, 0, m * hd * sizeof(float));
        for (size_t i = 0; i < m; i++) {
            acc[k].mx[i] = -INFINITY;
            acc[k].sum[i] = 0.0f;
        }
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
        const size_t first = k0 > a->p0 + r0 ? k0 - a->p0 - r0 : 0;
        for (size_t k = 0; k < nh; k++)
            head_block(a, h0 + k, r0, m, first, k0, nk, Kb, Vb, S, &acc[k]);
    }
    for (size_t k = 0; k < nh; k++) {
        const float *q = a->q + r0 * a->q_stride + (h0 + k) * a->head_stride;
        for (size_t i = 0; i < m; i++) {
            float *out = a->out + (r0 + i) * a->out_stride + (h0 + k) * hd;
            const float inv = 1.0f / acc[k].sum[i];
            const float *gate = a->gate_off ? q + i * a->q_stride + a->gate_off : NULL;
            for (size_t d = 0; d < hd; d++) {
                float v = acc[k].O[i * hd + d] * inv;
                out[d] = gate ? v * (1.0f / (1.0f + expf(-gate[d]))) : v;
            }
        }
    }
}

/* One (K/V head, chunk of its query heads, group of rows). The last group
 * of rows sees the most keys: tasks are taken in order, so the groups go
 * last first, and the short ones fill the threads' ends. */
static void causal_task(void *ctx, int task, int n_tasks, int thread)
{
    (void)n_tasks;
    const causal_job *j = ctx;
    const tw_causal_attn *a = j->a;
    const size_t t = (size_t)task, rg = j->groups - 1 - t % j->groups;
    const size_t c = t / j->groups % j->chunks;
    const size_t g = t / j->groups / j->chunks, r0 = rg * ROWS;
    const size_t first = c * j->task_heads;
    const size_t nh = j->per - first < j->task_heads ? j->per - first : j->task_heads;
    causal_rows(a, g, g * j->per + first, nh, r0, a->n - r0 < ROWS ? a->n - r0 : ROWS,
                j->scratch[thread]);
}

bool tw_attention_causal(tw_pool *pool, const tw_causal_attn *a)
{
    if (!pool || !a || a->n == 0 || !a->head_dim || !a->n_kv_heads || a->n_heads % a->n_kv_heads)
        return false;
    float *scratch[256]; /* the pool's thread limit */
    const int nt = tw_pool_threads(pool);
    if (nt > 256)
        return false;
    causal_job j = {.a = a, .scratch = scratch, .groups = (a->n + ROWS - 1) / ROWS};
    j.per = a->n_heads / a->n_kv_heads;
    /* as few chunks of heads as keep every thread busy */
    size_t most = TASK_OUT_FLOATS / ((size_t)ROWS * a->head_dim);
    most = most < 1 ? 1 : most > TASK_HEADS ? TASK_HEADS : most;
    size_t chunks = (j.per + most - 1) / most;
    while (chunks < j.per && a->n_kv_heads * chunks * j.groups < (size_t)nt)
        chunks++;
    j.task_heads = (j.per + chunks - 1) / chunks;
    j.chunks = (j.per + j.task_heads - 1) / j.task_heads;
    for (int i = 0; i < nt; i++) {
        scratch[i] =
            tw_pool_scratch(pool, i, scratch_floats(a->head_dim, j.task_heads) * sizeof(float));
        if (!scratch[i])
            return false;
    }
    tw_pool_run_threads(pool, causal_task, &j, (int)(a->n_kv_heads * j.chunks * j.groups));
    return true;
}
