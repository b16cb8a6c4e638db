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

/* A prefill step of whole groups starts its chunks on group boundaries, so
 * they fall where they fall when the prompt is read in other steps. */
_Static_assert(TW_PREFILL_GROUP % TW_DN_CHUNK == 0, "prefill groups of whole DeltaNet chunks");

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

/* Value head i of the ones that read key head kh (the inverse of key_head). */
static uint32_t value_head(const tw_mconfig *c, uint32_t kh, uint32_t i)
{
    return c->dn_vhead_tiled ? kh + i * c->dn_k_heads
                             : kh * (c->dn_v_heads / c->dn_k_heads) + i;
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

/* One pool run does a layer's whole mixer between its projections: a task
 * per (run of rows of one sequence, key head) takes the conv, the
 * normalisations and the gates of that key head's channels and of the
 * value heads that read it, then their recurrences, then their output
 * norms and gates. Done on the caller, that work had left the other
 * threads waiting (with two threads, verifying six rows of the default
 * model spent ~15% of its time outside any pool run). Every value is
 * computed by the same operations in the same order as when the whole row
 * went at once; the vectorised passes (SiLU, the output gate) now run over
 * one head's values at a time, which keeps their bits wherever a head's
 * width is a multiple of the vector width (16 floats). */
typedef struct dn_job {
    const tw_model *m;
    const tw_layer *L;
    const tw_batch *b;
} dn_job;

/* The causal depthwise conv1d and SiLU of channels [ch0, ch0 + nch) over
 * rows [r0, r1) of one sequence, from s->qkv into s->qkv_conv, carrying
 * the sequence's window of the last K - 1 inputs of those channels. Input
 * p of the run is window row p for p < K - 1, else row r0 + p - (K - 1). */
static void conv_slice(const dn_job *j, size_t r0, size_t r1, size_t ch0, size_t nch)
{
    const tw_mconfig *c = &j->m->cfg;
    const tw_scratch *s = &j->m->s;
    const float *cw = j->L->conv_w;
    const size_t K = c->dn_conv, conv_dim = tw_dn_conv_dim(c), len = r1 - r0;
    float *win = tw_seq_dn_conv(j->b->seq[r0], j->L->dn_index);
    for (size_t t = 0; t < len; t++) {
        float *o = s->qkv_conv + (r0 + t) * conv_dim + ch0;
        for (size_t i = 0; i < K; i++) {
            size_t p = t + i;
            const float *x = p < K - 1 ? win + p * conv_dim + ch0
                                       : s->qkv + (r0 + p - (K - 1)) * conv_dim + ch0;
            const float *w = cw + i * conv_dim + ch0;
            /* per channel 0 + w_0 x_0 + w_1 x_1 + ..., in tap order */
            if (i == 0)
                for (size_t ch = 0; ch < nch; ch++)
                    o[ch] = 0.0f + w[ch] * x[ch];
            else
                for (size_t ch = 0; ch < nch; ch++)
                    o[ch] += w[ch] * x[ch];
        }
        tw_silu_f32(o, nch);
    }
    /* the window moves on by len inputs; ascending, each row is read
     * before anything overwrites it */
    for (size_t i = 0; i + 1 < K; i++) {
        size_t p = len + i;
        const float *x = p < K - 1 ? win + p * conv_dim + ch0
                                   : s->qkv + (r0 + p - (K - 1)) * conv_dim + ch0;
        memmove(win + i * conv_dim + ch0, x, nch * sizeof(float));
    }
    if (j->b->row_trail) {
        /* each row's input before the conv, for a replay */
        size_t off = (size_t)j->L->dn_index * tw_deltanet_replay_floats(j->m) + conv_dim + ch0;
        for (size_t r = r0; r < r1; r++)
            if (j->b->row_trail[r])
                memcpy(j->b->row_trail[r] + off, s->qkv + r * conv_dim + ch0,
                       nch * sizeof(float));
    }
}

static void l2norm(float *x, uint32_t n, float scale)
{
    float r = (float)(1.0 / sqrt(tw_sum_squares(x, n) + 1e-6)) * scale;
    for (uint32_t i = 0; i < n; i++)
        x[i] *= r;
}

/* Key head kh's channels and its value heads' gates over rows [r0, r1):
 * conv and SiLU, q and k L2-normalised, beta = sigmoid(b) and
 * g = A * softplus(a + dt_bias), each row's record for a replay. */
static void prep_key_head(const dn_job *j, size_t r0, size_t r1, uint32_t kh)
{
    const tw_mconfig *c = &j->m->cfg;
    const tw_scratch *s = &j->m->s;
    const tw_layer *L = j->L;
    const uint32_t nk = c->dn_k_heads, nv = c->dn_v_heads, dk = c->dn_k_dim, dv = c->dn_v_dim;
    const uint32_t ratio = nv / nk;
    const size_t conv_dim = tw_dn_conv_dim(c);
    const size_t q0 = (size_t)kh * dk, k0 = (size_t)(nk + kh) * dk, v_base = 2 * (size_t)nk * dk;
    conv_slice(j, r0, r1, q0, dk);
    conv_slice(j, r0, r1, k0, dk);
    for (uint32_t i = 0; i < ratio; i++)
        conv_slice(j, r0, r1, v_base + (size_t)value_head(c, kh, i) * dv, dv);
    const float qscale = 1.0f / sqrtf((float)dk);
    const size_t off = (size_t)L->dn_index * tw_deltanet_replay_floats(j->m);
    for (size_t r = r0; r < r1; r++) {
        float *row = s->qkv_conv + r * conv_dim;
        l2norm(row + q0, dk, qscale);
        l2norm(row + k0, dk, 1.0f);
        float *rec = j->b->row_trail ? j->b->row_trail[r] : NULL;
        if (rec) {
            memcpy(rec + off + q0, row + q0, dk * sizeof(float));
            memcpy(rec + off + k0, row + k0, dk * sizeof(float));
        }
        for (uint32_t i = 0; i < ratio; i++) {
            uint32_t h = value_head(c, kh, i);
            float *bb = s->ba_b + r * nv + h, *aa = s->ba_a + r * nv + h;
            *bb = tw_sigmoid(*bb);
            *aa = L->dn_a[h] * tw_softplus(*aa + L->dt_bias[h]);
            if (rec) {
                size_t v0 = v_base + (size_t)h * dv;
                memcpy(rec + off + v0, row + v0, dv * sizeof(float));
                rec[off + 2 * conv_dim + h] = *aa;
                rec[off + 2 * conv_dim + nv + h] = *bb;
            }
        }
    }
}

/* Value head h's recurrence over rows [r0, r1) of one sequence: a prefill
 * step in the chunked form; otherwise row by row with the decode step,
 * the first row reading the run's base state where a verification gives
 * one (tw_batch.row_base; the rows' inputs went to their trail slots, and
 * a rewind replays them from the base, tw_deltanet_replay_row), every row
 * writing the sequence's state in place. */
static void recur_value_head(const dn_job *j, size_t r0, size_t r1, uint32_t h)
{
    const tw_model *m = j->m;
    const tw_mconfig *c = &m->cfg;
    const tw_scratch *s = &m->s;
    const uint32_t nk = c->dn_k_heads, nv = c->dn_v_heads, dk = c->dn_k_dim, dv = c->dn_v_dim;
    const size_t conv_dim = tw_dn_conv_dim(c);
    const uint32_t kh = key_head(c, h);
    const size_t q0 = (size_t)kh * dk, k0 = (size_t)(nk + kh) * dk;
    const size_t v0 = 2 * (size_t)nk * dk + (size_t)h * dv;
    const size_t head_off = (size_t)j->L->dn_index * tw_dn_layer_floats(m) + (size_t)h * dk * dv;
    float *S = j->b->seq[r0]->state + head_off;
    if (!j->b->row_trail && j->b->one_seq && r1 - r0 > 1) {
        float *work = s->dn_chunk + (size_t)h * s->dn_chunk_floats;
        for (size_t t0 = r0; t0 < r1; t0 += TW_DN_CHUNK) {
            size_t len = r1 - t0 < TW_DN_CHUNK ? r1 - t0 : TW_DN_CHUNK;
            const float *row = s->qkv_conv + t0 * conv_dim;
            tw_deltanet_chunk(S, row + q0, row + k0, conv_dim, row + v0, conv_dim,
                              s->ba_a + t0 * nv + h, s->ba_b + t0 * nv + h, nv, len, dk, dv,
                              s->dn_out + t0 * (size_t)nv * dv + (size_t)h * dv,
                              (size_t)nv * dv, work);
        }
        return;
    }
    const float *src = j->b->row_trail && j->b->row_base[r0] ? j->b->row_base[r0] + head_off : S;
    for (size_t r = r0; r < r1; r++, src = S) {
        const float *row = s->qkv_conv + r * conv_dim;
        tw_deltanet_step_to(S, src, row + q0, row + k0, row + v0, s->ba_a[r * nv + h],
                            s->ba_b[r * nv + h], dk, dv,
                            s->dn_out + r * (size_t)nv * dv + (size_t)h * dv);
    }
}

/* RMSNorm(o) * SiLU(z) of value head h over rows [r0, r1), left in z for
 * the out-projection. */
static void post_value_head(const dn_job *j, size_t r0, size_t r1, uint32_t h)
{
    const tw_mconfig *c = &j->m->cfg;
    const tw_scratch *s = &j->m->s;
    const size_t dv = c->dn_v_dim, width = (size_t)c->dn_v_heads * dv;
    for (size_t r = r0; r < r1; r++) {
        float *o = s->dn_out + r * width + h * dv;
        tw_rmsnorm(o, o, j->L->dn_norm, dv, c->norm_eps);
        tw_silu_mul_f32(s->z + r * width + h * dv, o, dv);
    }
}

static void dn_task(void *ctx, int task, int n_tasks)
{
    (void)n_tasks;
    const dn_job *j = ctx;
    const tw_mconfig *c = &j->m->cfg;
    const uint32_t nk = c->dn_k_heads, ratio = c->dn_v_heads / nk;
    const size_t g = (size_t)task / nk;
    const uint32_t kh = (uint32_t)((size_t)task % nk);
    const size_t r0 = j->m->s.group_start[g], r1 = j->m->s.group_start[g + 1];
    prep_key_head(j, r0, r1, kh);
    for (uint32_t i = 0; i < ratio; i++) {
        uint32_t h = value_head(c, kh, i);
        recur_value_head(j, r0, r1, h);
        post_value_head(j, r0, r1, h);
    }
}

void tw_deltanet_block(tw_model *m, tw_pool *pool, const tw_layer *L, const tw_batch *b,
                       const float *xn, float *y)
{
    tw_scratch *s = &m->s;
    size_t n = b->n;

    const tw_mat *in[4] = {&L->in_qkv, &L->in_z, &L->in_b, &L->in_a};
    float *const out[4] = {s->qkv, s->z, s->ba_b, s->ba_a};
    tw_fetch_next(m, pool, n, L, TW_FETCH_MIXER_OUT);
    tw_mat_mul_multi(pool, in, out, 4, xn, n);

    size_t n_groups = 0;
    for (size_t r0 = 0; r0 < n;) {
        size_t r1 = r0 + 1;
        while (r1 < n && b->seq[r1] == b->seq[r0])
            r1++;
        s->group_start[n_groups++] = (uint32_t)r0;
        r0 = r1;
    }
    s->group_start[n_groups] = (uint32_t)n;

    dn_job j = {.m = m, .L = L, .b = b};
    tw_pool_run(pool, dn_task, &j, (int)(n_groups * m->cfg.dn_k_heads));
    tw_fetch_next(m, pool, n, L, TW_FETCH_FFN_IN);
    tw_mat_mul(pool, &L->out_proj, s->z, n, y);
}
