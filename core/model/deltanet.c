/* The Gated DeltaNet mixer (Qwen3.5 linear-attention layers).
 *
 * Per token: in-projections give a mixed q|k|v row, a gate z and per-head
 * scalars a, b. q|k|v goes through a causal depthwise conv1d (kernel K,
 * state = the last K-1 inputs) and SiLU; q and k are L2-normalised per head
 * and q is scaled by 1/sqrt(dk). Each value head h (reading key head
 * h / (n_v / n_k)) keeps a state S [dk][dv] updated by the delta rule with
 * decay exp(g), g = -exp(A_log) * softplus(a + dt_bias), and rate
 * beta = sigmoid(b):
 *     S = exp(g) S;  S += k (beta (v - S^T k))^T;  o = S^T q
 * The output is RMSNorm(o) * w * SiLU(z), then out_proj.
 *
 * Decode runs that recurrence token by token. Prefill uses the chunked form
 * (64 tokens at a time, as the reference does): within a chunk the updates
 * are condensed into a unit-lower-triangular solve, so the state is read and
 * written once per chunk instead of once per token. Both give the same
 * numbers up to rounding; the tests hold them to each other. */
#include <math.h>
#include <string.h>

#include "tw/kernels.h"

#include "model/model_internal.h"

void tw_deltanet_step(float *S, const float *q, const float *k, const float *v, float g,
                      float beta, uint32_t dk, uint32_t dv, float *out)
{
    tw_deltanet_step_to(S, S, q, k, v, g, beta, dk, dv, out);
}

/* Decode and verification both run through this one function, so a token
 * verified in a speculative batch sees exactly the numbers plain decoding
 * would have produced for it. */
void tw_deltanet_step_to(float *S, const float *src, const float *q, const float *k,
                         const float *v, float g, float beta, uint32_t dk, uint32_t dv,
                         float *out)
{
    float mem[TW_MAX_HEAD_DIM];
    tw_delta_rule_f32(S, src, q, k, v, expf(g), beta, dk, dv, mem, out);
}

size_t tw_deltanet_chunk_floats(uint32_t dk, uint32_t dv)
{
    size_t C = TW_DN_CHUNK;
    return C * C + C * dv + C * dk + C;
}

static float dot(const float *a, const float *b, uint32_t n)
{
    float s = 0.0f;
    for (uint32_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

void tw_deltanet_chunk(float *S, const float *q, const float *k, size_t qk_stride,
                       const float *v, size_t v_stride, const float *g, const float *beta,
                       size_t gb_stride, size_t L, uint32_t dk, uint32_t dv, float *out,
                       size_t out_stride, float *work)
{
    const size_t C = TW_DN_CHUNK;
    float *T = work;          /* [C][C] strictly lower part of the UT system */
    float *U = T + C * C;     /* [C][dv] new values, then v_new */
    float *W = U + C * dv;    /* [C][dk] decayed keys read against the old state */
    float *cum = W + C * dk;  /* [C] cumulative log decay */

    float acc = 0.0f;
    for (size_t t = 0; t < L; t++) {
        acc += g[t * gb_stride];
        cum[t] = acc;
    }
    /* (I + T) U = beta v and (I + T) W = beta k exp(cum), by forward
     * substitution; T[i][j] = beta_i (k_i . k_j) exp(cum_i - cum_j), j < i */
    for (size_t i = 0; i < L; i++) {
        const float *ki = k + i * qk_stride;
        float bi = beta[i * gb_stride];
        for (size_t j = 0; j < i; j++)
            T[i * C + j] = bi * dot(ki, k + j * qk_stride, dk) * expf(cum[i] - cum[j]);
        float *u = U + i * dv, *w = W + i * dk;
        const float *vi = v + i * v_stride;
        float e = expf(cum[i]);
        for (uint32_t d = 0; d < dv; d++)
            u[d] = vi[d] * bi;
        for (uint32_t d = 0; d < dk; d++)
            w[d] = ki[d] * bi * e;
        for (size_t j = 0; j < i; j++) {
            float t = T[i * C + j];
            const float *uj = U + j * dv, *wj = W + j * dk;
            for (uint32_t d = 0; d < dv; d++)
                u[d] -= t * uj[d];
            for (uint32_t d = 0; d < dk; d++)
                w[d] -= t * wj[d];
        }
    }
    /* v_new = U - W S: what the old state does not already predict */
    for (size_t i = 0; i < L; i++) {
        float *u = U + i * dv;
        const float *w = W + i * dk;
        for (uint32_t a = 0; a < dk; a++) {
            float wa = w[a];
            const float *row = S + (size_t)a * dv;
            for (uint32_t d = 0; d < dv; d++)
                u[d] -= wa * row[d];
        }
    }
    /* out_i = (q_i exp(cum_i)) S + sum_{j<=i} (q_i . k_j) exp(cum_i - cum_j) v_new_j */
    for (size_t i = 0; i < L; i++) {
        const float *qi = q + i * qk_stride;
        float *o = out + i * out_stride;
        float e = expf(cum[i]);
        memset(o, 0, dv * sizeof(float));
        for (uint32_t a = 0; a < dk; a++) {
            float qa = qi[a] * e;
            const float *row = S + (size_t)a * dv;
            for (uint32_t d = 0; d < dv; d++)
                o[d] += qa * row[d];
        }
        for (size_t j = 0; j <= i; j++) {
            float t = dot(qi, k + j * qk_stride, dk) * expf(cum[i] - cum[j]);
            const float *uj = U + j * dv;
            for (uint32_t d = 0; d < dv; d++)
                o[d] += t * uj[d];
        }
    }
    /* S = exp(cum_last) S + sum_i (k_i exp(cum_last - cum_i)) v_new_i^T */
    float last = cum[L - 1];
    float el = expf(last);
    for (uint32_t a = 0; a < dk; a++) {
        float *row = S + (size_t)a * dv;
        for (uint32_t d = 0; d < dv; d++)
            row[d] *= el;
    }
    for (size_t i = 0; i < L; i++) {
        const float *ki = k + i * qk_stride;
        const float *uj = U + i * dv;
        float e = expf(last - cum[i]);
        for (uint32_t a = 0; a < dk; a++) {
            float ka = ki[a] * e;
            float *row = S + (size_t)a * dv;
            for (uint32_t d = 0; d < dv; d++)
                row[d] += ka * uj[d];
        }
    }
}

static uint32_t key_head(const tw_mconfig *c, uint32_t h)
{
    return c->dn_vhead_tiled ? h % c->dn_k_heads : h / (c->dn_v_heads / c->dn_k_heads);
}

typedef struct dn_job {
    const tw_model *m;
    const tw_layer *L;
    const tw_batch *b;
    size_t n;
} dn_job;

/* Decode: one task per (row, value head), each row its own sequence. */
static void dn_step_task(void *ctx, int task, int n_tasks)
{
    (void)n_tasks;
    const dn_job *j = ctx;
    const tw_mconfig *c = &j->m->cfg;
    const tw_scratch *s = &j->m->s;
    uint32_t nv = c->dn_v_heads, dk = c->dn_k_dim, dv = c->dn_v_dim;
    size_t conv_dim = tw_dn_conv_dim(c);
    size_t r = (size_t)task / nv;
    uint32_t h = (uint32_t)((size_t)task % nv);
    uint32_t kh = key_head(c, h);
    const float *row = s->qkv + r * conv_dim;
    const float *q = row + (size_t)kh * dk;
    const float *k = row + (size_t)c->dn_k_heads * dk + (size_t)kh * dk;
    const float *v = row + 2 * (size_t)c->dn_k_heads * dk + (size_t)h * dv;
    float *S = tw_seq_dn_state(j->b->seq[r], j->L->dn_index) + (size_t)h * dk * dv;
    tw_deltanet_step_to(S, S, q, k, v, s->ba_a[r * nv + h], s->ba_b[r * nv + h], dk, dv,
                        s->dn_out + r * (size_t)nv * dv + (size_t)h * dv);
}

/* Verification: one task per (run of rows of one sequence, value head),
 * walking the run in order with the decode recurrence: the first row reads
 * the run's base state where it has one (tw_batch.row_base) and every row
 * writes the sequence's, as decode steps in place. The rows' inputs went to
 * their trail slots, and a rewind replays them from the base
 * (tw_deltanet_replay_row). */
static void dn_run_task(void *ctx, int task, int n_tasks)
{
    (void)n_tasks;
    const dn_job *j = ctx;
    const tw_model *m = j->m;
    const tw_mconfig *c = &m->cfg;
    const tw_scratch *s = &m->s;
    uint32_t nv = c->dn_v_heads, dk = c->dn_k_dim, dv = c->dn_v_dim;
    size_t conv_dim = tw_dn_conv_dim(c);
    size_t g = (size_t)task / nv;
    uint32_t h = (uint32_t)((size_t)task % nv);
    uint32_t kh = key_head(c, h);
    size_t r0 = s->group_start[g], r1 = s->group_start[g + 1];
    size_t head_off = (size_t)j->L->dn_index * tw_dn_layer_floats(m) + (size_t)h * dk * dv;
    float *S = j->b->seq[r0]->state + head_off;
    const float *src = j->b->row_base[r0] ? j->b->row_base[r0] + head_off : S;
    for (size_t r = r0; r < r1; r++, src = S) {
        const float *row = s->qkv + r * conv_dim;
        tw_deltanet_step_to(S, src, row + (size_t)kh * dk,
                            row + (size_t)c->dn_k_heads * dk + (size_t)kh * dk,
                            row + 2 * (size_t)c->dn_k_heads * dk + (size_t)h * dv,
                            s->ba_a[r * nv + h], s->ba_b[r * nv + h], dk, dv,
                            s->dn_out + r * (size_t)nv * dv + (size_t)h * dv);
    }
}

/* A replay record per DeltaNet layer: the row's q|k|v after conv, SiLU and
 * normalisation, its input before the conv (the conv window's next entry),
 * then g and beta of every value head. */
size_t tw_deltanet_replay_floats(const tw_model *m)
{
    return 2 * tw_dn_conv_dim(&m->cfg) + 2 * (size_t)m->cfg.dn_v_heads;
}

void tw_deltanet_replay_row(const tw_model *m, float *state, const float *row)
{
    const tw_mconfig *c = &m->cfg;
    uint32_t nv = c->dn_v_heads, dk = c->dn_k_dim, dv = c->dn_v_dim;
    size_t conv_dim = tw_dn_conv_dim(c), K = c->dn_conv, rec_floats = tw_deltanet_replay_floats(m);
    float out[TW_MAX_HEAD_DIM];
    for (uint32_t l = 0; l < m->n_dn_layers; l++) {
        const float *rec = row + (size_t)l * rec_floats;
        const float *qkv = rec, *pre = rec + conv_dim, *g = pre + conv_dim, *beta = g + nv;
        float *S = state + (size_t)l * tw_dn_layer_floats(m);
        for (uint32_t h = 0; h < nv; h++) {
            uint32_t kh = key_head(c, h);
            float *Sh = S + (size_t)h * dk * dv;
            tw_deltanet_step_to(Sh, Sh, qkv + (size_t)kh * dk,
                                qkv + (size_t)c->dn_k_heads * dk + (size_t)kh * dk,
                                qkv + 2 * (size_t)c->dn_k_heads * dk + (size_t)h * dv, g[h],
                                beta[h], dk, dv, out);
        }
        if (K > 1) {
            float *win = S + m->dn_state_floats;
            memmove(win, win + conv_dim, (K - 2) * conv_dim * sizeof(float));
            memcpy(win + (K - 2) * conv_dim, pre, conv_dim * sizeof(float));
        }
    }
}

/* Prefill: one task per value head, walking the rows in chunks. */
static void dn_chunk_task(void *ctx, int task, int n_tasks)
{
    (void)n_tasks;
    const dn_job *j = ctx;
    const tw_mconfig *c = &j->m->cfg;
    const tw_scratch *s = &j->m->s;
    uint32_t nv = c->dn_v_heads, dk = c->dn_k_dim, dv = c->dn_v_dim;
    size_t conv_dim = tw_dn_conv_dim(c);
    uint32_t h = (uint32_t)task;
    uint32_t kh = key_head(c, h);
    float *S = tw_seq_dn_state(j->b->seq[0], j->L->dn_index) + (size_t)h * dk * dv;
    float *work = s->dn_chunk + (size_t)h * s->dn_chunk_floats;
    for (size_t t0 = 0; t0 < j->n; t0 += TW_DN_CHUNK) {
        size_t len = j->n - t0 < TW_DN_CHUNK ? j->n - t0 : TW_DN_CHUNK;
        const float *row = s->qkv + t0 * conv_dim;
        tw_deltanet_chunk(S, row + (size_t)kh * dk,
                          row + (size_t)c->dn_k_heads * dk + (size_t)kh * dk, conv_dim,
                          row + 2 * (size_t)c->dn_k_heads * dk + (size_t)h * dv, conv_dim,
                          s->ba_a + t0 * nv + h, s->ba_b + t0 * nv + h, nv, len, dk, dv,
                          s->dn_out + t0 * (size_t)nv * dv + (size_t)h * dv, (size_t)nv * dv,
                          work);
    }
}

/* Causal depthwise conv1d + SiLU over rows [r0, r1) of one sequence, in
 * place on s->qkv, carrying the sequence's window of the last K-1 inputs. */
static void conv_run(tw_model *m, const tw_layer *L, tw_seq *seq, size_t r0, size_t r1)
{
    const tw_mconfig *c = &m->cfg;
    tw_scratch *s = &m->s;
    size_t K = c->dn_conv;
    size_t conv_dim = tw_dn_conv_dim(c);
    size_t len = r1 - r0;
    float *win = tw_seq_dn_conv(seq, L->dn_index);
    float *in = s->conv_in;
    memcpy(in, win, (K - 1) * conv_dim * sizeof(float));
    memcpy(in + (K - 1) * conv_dim, s->qkv + r0 * conv_dim, len * conv_dim * sizeof(float));
    for (size_t t = 0; t < len; t++) {
        float *o = s->qkv + (r0 + t) * conv_dim;
        /* per channel 0 + w_0 x_0 + w_1 x_1 + ..., in tap order */
        for (size_t ch = 0; ch < conv_dim; ch++)
            o[ch] = 0.0f + L->conv_w[ch] * in[t * conv_dim + ch];
        for (size_t i = 1; i < K; i++) {
            const float *w = L->conv_w + i * conv_dim, *x = in + (t + i) * conv_dim;
            for (size_t ch = 0; ch < conv_dim; ch++)
                o[ch] += w[ch] * x[ch];
        }
        tw_silu_f32(o, conv_dim);
    }
    memcpy(win, in + len * conv_dim, (K - 1) * conv_dim * sizeof(float));
}

static void l2norm(float *x, uint32_t n, float scale)
{
    float r = (float)(1.0 / sqrt(tw_sum_squares(x, n) + 1e-6)) * scale;
    for (uint32_t i = 0; i < n; i++)
        x[i] *= r;
}

void tw_deltanet_block(tw_model *m, tw_pool *pool, const tw_layer *L, const tw_batch *b,
                       const float *xn, float *y)
{
    const tw_mconfig *c = &m->cfg;
    tw_scratch *s = &m->s;
    size_t n = b->n;
    uint32_t nk = c->dn_k_heads, nv = c->dn_v_heads, dk = c->dn_k_dim, dv = c->dn_v_dim;
    size_t conv_dim = tw_dn_conv_dim(c);

    const tw_mat *in[4] = {&L->in_qkv, &L->in_z, &L->in_b, &L->in_a};
    float *const out[4] = {s->qkv, s->z, s->ba_b, s->ba_a};
    tw_mat_mul_multi(pool, in, out, 4, xn, n);

    size_t n_groups = 0;
    for (size_t r0 = 0; r0 < n;) {
        size_t r1 = r0 + 1;
        while (r1 < n && b->seq[r1] == b->seq[r0])
            r1++;
        conv_run(m, L, b->seq[r0], r0, r1);
        s->group_start[n_groups++] = (uint32_t)r0;
        if (b->row_trail) {
            /* each row's input before the conv (conv_in holds this run's
             * until the next run's conv_run) */
            size_t K = c->dn_conv;
            size_t off = (size_t)L->dn_index * tw_deltanet_replay_floats(m) + conv_dim;
            for (size_t r = r0; r < r1; r++)
                if (b->row_trail[r])
                    memcpy(b->row_trail[r] + off, s->conv_in + (K - 1 + r - r0) * conv_dim,
                           conv_dim * sizeof(float));
        }
        r0 = r1;
    }
    s->group_start[n_groups] = (uint32_t)n;

    float qscale = 1.0f / sqrtf((float)dk);
    for (size_t r = 0; r < n; r++) {
        float *row = s->qkv + r * conv_dim;
        for (uint32_t h = 0; h < nk; h++) {
            l2norm(row + (size_t)h * dk, dk, qscale);
            l2norm(row + (size_t)(nk + h) * dk, dk, 1.0f);
        }
        for (uint32_t h = 0; h < nv; h++) {
            float *bb = s->ba_b + r * nv + h, *aa = s->ba_a + r * nv + h;
            *bb = tw_sigmoid(*bb);
            *aa = L->dn_a[h] * tw_softplus(*aa + L->dt_bias[h]);
        }
    }

    if (b->row_trail) {
        size_t off = (size_t)L->dn_index * tw_deltanet_replay_floats(m);
        for (size_t r = 0; r < n; r++) {
            float *rec = b->row_trail[r];
            if (!rec)
                continue;
            memcpy(rec + off, s->qkv + r * conv_dim, conv_dim * sizeof(float));
            memcpy(rec + off + 2 * conv_dim, s->ba_a + r * nv, nv * sizeof(float));
            memcpy(rec + off + 2 * conv_dim + nv, s->ba_b + r * nv, nv * sizeof(float));
        }
    }
    dn_job j = {.m = m, .L = L, .b = b, .n = n};
    if (b->row_trail)
        tw_pool_run(pool, dn_run_task, &j, (int)(n_groups * nv));
    else if (b->one_seq && n > 1)
        tw_pool_run(pool, dn_chunk_task, &j, (int)nv);
    else
        tw_pool_run(pool, dn_step_task, &j, (int)(n * nv));

    /* RMSNorm(o) * SiLU(z), left in z for the out-projection */
    for (size_t r = 0; r < n; r++) {
        float *o = s->dn_out + r * (size_t)nv * dv;
        for (uint32_t h = 0; h < nv; h++)
            tw_rmsnorm(o + (size_t)h * dv, o + (size_t)h * dv, L->dn_norm, dv, c->norm_eps);
        tw_silu_mul_f32(s->z + r * (size_t)nv * dv, o, (size_t)nv * dv);
    }
    tw_mat_mul(pool, &L->out_proj, s->z, n, y);
}
