/* Feed-forward blocks: dense gated MLP (SwiGLU / GeGLU) and sparse MoE
 * (softmax router, top-k experts, optional sigmoid-gated shared expert). */
#include <math.h>
#include <string.h>

#include "tw/kernels.h"

#include "model/model_internal.h"

/* The gate's activation times up, in place on g, over [i0, i1). */
static void gate_times_up(bool gelu, float *g, const float *u, size_t i0, size_t i1)
{
    if (gelu) {
        for (size_t i = i0; i < i1; i++)
            g[i] = tw_gelu_tanh(g[i]) * u[i];
    } else {
        tw_silu_mul_f32(g + i0, u + i0, i1 - i0);
    }
}

/* A batch's gate activations are a pass of exponentials on one thread
 * while the others wait; from this many values on they are split across
 * the pool. */
#define PARALLEL_GATE_VALUES 16384
/* Split points fall on multiples of this, so every value takes the same
 * vector or scalar path it takes in one call over the whole run. */
#define GATE_SPLIT_ALIGN 64

typedef struct gate_job {
    bool gelu;
    float *g;
    const float *u;
    size_t len;
    size_t width, n; /* the values of one row, and the rows (for glu_rows) */
} gate_job;

static void gate_task(void *ctx, int task, int n_tasks)
{
    const gate_job *j = ctx;
    size_t per = (j->len + (size_t)n_tasks - 1) / (size_t)n_tasks;
    per = (per + GATE_SPLIT_ALIGN - 1) / GATE_SPLIT_ALIGN * GATE_SPLIT_ALIGN;
    size_t i0 = (size_t)task * per, i1 = i0 + per < j->len ? i0 + per : j->len;
    if (i0 < i1)
        gate_times_up(j->gelu, j->g, j->u, i0, i1);
}

/* The activation times up of outputs [r0, r1) of every row, inside the
 * gate/up run's task that computed them. r0 is a multiple of 16 and r1 one
 * too or the row's end, so a value takes the vector or the scalar path by
 * its place in its row alone, however the rows were split: a decode step
 * and a verification give a row the same bits. */
static void glu_rows(void *ctx, size_t r0, size_t r1)
{
    const gate_job *j = ctx;
    for (size_t a = 0; a < j->n; a++)
        gate_times_up(j->gelu, j->g + a * j->width, j->u + a * j->width, r0, r1);
}

/* y = down(act(gate x) * up x) for n rows; dims from the matrices. L,
 * where these are a dense layer's own, for fetch ahead. */
static void glu(tw_model *m, tw_pool *pool, const tw_layer *L, const tw_mat *gate, const tw_mat *up,
                const tw_mat *down, size_t n, const float *x, float *y)
{
    tw_scratch *s = &m->s;
    size_t f = gate->rows;
    gate_job j = {.gelu = m->cfg.family->act == TW_ACT_GELU_TANH,
                  .g = s->f_gate,
                  .u = s->f_up,
                  .len = n * f,
                  .width = f,
                  .n = n};
    if (L)
        tw_fetch_next(m, pool, n, L, TW_FETCH_FFN_OUT);
    if (tw_mat_mul_pair(pool, gate, up, s->f_gate, s->f_up, x, n, glu_rows, &j)) {
        if (L)
            tw_fetch_next(m, pool, n, L, TW_FETCH_NEXT_LAYER);
        tw_mat_mul(pool, down, s->f_gate, n, y);
        return;
    }
    const tw_mat *gu[2] = {gate, up};
    float *const out[2] = {s->f_gate, s->f_up};
    tw_mat_mul_multi(pool, gu, out, 2, x, n);
    int threads = tw_pool_threads(pool);
    if (threads > 1 && j.len >= PARALLEL_GATE_VALUES)
        tw_pool_run(pool, gate_task, &j, 2 * threads);
    else
        gate_times_up(j.gelu, j.g, j.u, 0, j.len);
    tw_mat_mul(pool, down, s->f_gate, n, y);
}

/* Softmax over the router logits, then the top_k largest probabilities
 * (renormalised to sum 1 when the config says so). */
static void route(const tw_mconfig *c, float *logits, uint32_t *sel, float *w)
{
    uint32_t E = c->n_experts;
    float mx = logits[0];
    for (uint32_t e = 1; e < E; e++)
        mx = logits[e] > mx ? logits[e] : mx;
    float sum = 0.0f;
    for (uint32_t e = 0; e < E; e++) {
        logits[e] = expf(logits[e] - mx);
        sum += logits[e];
    }
    float picked = 0.0f;
    for (uint32_t k = 0; k < c->top_k; k++) {
        uint32_t best = UINT32_MAX;
        for (uint32_t e = 0; e < E; e++) {
            if (logits[e] >= 0.0f && (best == UINT32_MAX || logits[e] > logits[best]))
                best = e;
        }
        sel[k] = best;
        w[k] = logits[best] / sum;
        picked += w[k];
        logits[best] = -1.0f; /* taken */
    }
    if (c->norm_topk)
        for (uint32_t k = 0; k < c->top_k; k++)
            w[k] /= picked;
}

static void moe(tw_model *m, tw_pool *pool, const tw_layer *L, size_t n, const float *xn,
                float *y)
{
    const tw_mconfig *c = &m->cfg;
    tw_scratch *s = &m->s;
    size_t H = c->hidden;
    uint32_t K = c->top_k;

    tw_mat_mul(pool, &L->router, xn, n, s->router);
    for (size_t r = 0; r < n; r++)
        route(c, s->router + r * c->n_experts, s->sel + r * K, s->sel_w + r * K);

    memset(y, 0, n * H * sizeof(float));
    for (uint32_t e = 0; e < c->n_experts; e++) {
        size_t cnt = 0;
        for (size_t r = 0; r < n; r++) {
            for (uint32_t k = 0; k < K; k++) {
                if (s->sel[r * K + k] != e)
                    continue;
                s->e_rows[cnt] = (uint32_t)r;
                s->e_wt[cnt] = s->sel_w[r * K + k];
                memcpy(s->e_x + cnt * H, xn + r * H, H * sizeof(float));
                cnt++;
            }
        }
        if (cnt == 0)
            continue;
        glu(m, pool, NULL, &L->exp_gate[e], &L->exp_up[e], &L->exp_down[e], cnt, s->e_x, s->e_out);
        for (size_t i = 0; i < cnt; i++) {
            float *yr = y + (size_t)s->e_rows[i] * H;
            const float *o = s->e_out + i * H;
            float w = s->e_wt[i];
            for (size_t d = 0; d < H; d++)
                yr[d] += w * o[d];
        }
    }
    if (!L->has_shared)
        return;
    glu(m, pool, NULL, &L->sh_gate, &L->sh_up, &L->sh_down, n, xn, s->e_out);
    tw_mat_mul(pool, &L->sh_router, xn, n, s->sh_g);
    for (size_t r = 0; r < n; r++) {
        float g = tw_sigmoid(s->sh_g[r]);
        float *yr = y + r * H;
        const float *o = s->e_out + r * H;
        for (size_t d = 0; d < H; d++)
            yr[d] += g * o[d];
    }
}

/* Whether an expert's products keep a row's bits however many rows the
 * expert takes (tw_matmul_exact for its three matrices). */
static bool experts_exact(const tw_layer *L)
{
    return tw_matmul_exact(L->exp_gate[0].type) && tw_matmul_exact(L->exp_up[0].type) &&
           tw_matmul_exact(L->exp_down[0].type);
}

void tw_ffn_block(tw_model *m, tw_pool *pool, const tw_layer *L, size_t n, const float *xn,
                  float *y)
{
    if (L->ffn != TW_FFN_MOE) {
        glu(m, pool, L, &L->gate, &L->up, &L->down, n, xn, y);
        return;
    }
    /* An expert takes the rows routed to it: from a step of several prefill
     * groups, a number that depends on the step, and with it the path (and
     * bits) of its products unless they are exact. Then group by group, so
     * each expert sees the same rows however the prompt was cut into steps. */
    const size_t per = n > TW_PREFILL_GROUP && !experts_exact(L) ? TW_PREFILL_GROUP : n;
    const size_t H = m->cfg.hidden;
    for (size_t r = 0; r < n; r += per)
        moe(m, pool, L, n - r < per ? n - r : per, xn + r * H, y + r * H);
}
