/* The attention mixer: standard or gated (Qwen3.5), full or sliding window,
 * optional q/k bias and per-head q/k RMSNorm, full or partial RoPE in either
 * pair layout, grouped-query K/V shared across heads.
 *
 * All rows of a step first write their K/V into their sequence's cache;
 * each row then attends over its own sequence's positions [start, pos], so a
 * prefill chunk is causal without a mask and a decode batch mixes sequences
 * freely. */
#include <math.h>
#include <string.h>

#include "tw/kernels.h"

#include "model/model_internal.h"

#define SCORE_BLOCK 128
/* The query heads that share a K/V head attend together, up to this many
 * at a time: each key and value row is then read once for all of them. */
#define HEAD_GROUP 8

typedef struct attn_job {
    const tw_model *m;
    const tw_layer *L;
    const tw_batch *b;
    const float *q; /* [rows][q_stride] */
    size_t q_stride;
    size_t gate_off; /* offset of a head's gate from its query, 0 = no gate */
    float *att;      /* [rows][n_heads * head_dim] */
    bool prepare;    /* each task first runs prepare_group on its (row, head) */
} attn_job;

/* One query's online softmax over blocks of keys, so no score buffer
 * proportional to the context is needed. */
typedef struct attn_state {
    float acc[TW_MAX_HEAD_DIM];
    float mx, sum;
} attn_state;

/* Takes a block of nb raw scores into st: scaled (and soft-capped), the
 * running sums rescaled to a new maximum, the scores turned into softmax
 * numerators. The caller then adds the numerators' share of V to st->acc. */
static void softmax_block(const tw_mconfig *c, float *sc, uint32_t nb, attn_state *st)
{
    const float scale = c->attn_scale, cap = c->attn_softcap;
    float bmx = -INFINITY;
    if (cap > 0.0f) {
        for (uint32_t i = 0; i < nb; i++) {
            float s = cap * tanhf(sc[i] * scale / cap);
            sc[i] = s;
            bmx = s > bmx ? s : bmx;
        }
    } else {
        bmx = tw_scale_max_f32(sc, nb, scale);
    }
    if (bmx > st->mx) {
        float corr = expf(st->mx - bmx); /* exp(-inf) = 0 on the first block */
        for (uint32_t d = 0; d < c->head_dim; d++)
            st->acc[d] *= corr;
        st->sum *= corr;
        st->mx = bmx;
    }
    st->sum += tw_exp_shift_f32(sc, nb, st->mx);
}

/* Scores of nh queries against keys t0 .. t0 + nb - 1 of a K run stored as
 * f32 or half: the half-precision kernels give exactly the f32 kernels'
 * bits on the stored values, so every path reading the cache agrees. */
static void scores(const float *q, size_t hq, uint32_t nh, const unsigned char *K, bool f16,
                   uint32_t t0, uint32_t nb, uint32_t hd, float *sc)
{
    if (f16)
        tw_dot_rows_multi_h16(q, hq, nh, (const uint16_t *)(const void *)K + (size_t)t0 * hd, nb,
                              hd, sc, SCORE_BLOCK);
    else
        tw_dot_rows_multi_f32(q, hq, nh, (const float *)(const void *)K + (size_t)t0 * hd, nb, hd,
                              sc, SCORE_BLOCK);
}

/* The softmax numerators' share of value rows t0 .. t0 + nb - 1 into nh
 * accumulators acc_stride floats apart. */
static void weigh_values(const float *sc, uint32_t nh, const unsigned char *V, bool f16,
                         uint32_t t0, uint32_t nb, uint32_t hd, float *acc, size_t acc_stride)
{
    if (f16)
        tw_axpy_rows_multi_h16(sc, SCORE_BLOCK, nh,
                               (const uint16_t *)(const void *)V + (size_t)t0 * hd, nb, hd, acc,
                               acc_stride);
    else
        tw_axpy_rows_multi_f32(sc, SCORE_BLOCK, nh, (const float *)(const void *)V + (size_t)t0 * hd,
                               nb, hd, acc, acc_stride);
}

/* Keys and values are taken SUB_BLOCK rows at a time by every head of the
 * group, the next rows fetched ahead meanwhile. A decode step's K/V comes
 * from memory (the weights have streamed through the caches since the last
 * step), and the kernels' first query tile alone, which fetches ahead,
 * does too little arithmetic per row to hide it: the later tiles then ran
 * from cache with the memory idle. Every score and every value chain keeps
 * its operations in order, so the bits do not change. qwen2-0.5b Q4_0, 2
 * threads, a 2-vCPU Zen 5 guest, the two alternated in one process: a
 * layer's attention run took 7.7 us against 8.2 after an 8-token prompt,
 * 15.8 against 16.5 after 128 and 71.4 against 74.3 after 1000; whole
 * decode steps read 0.99-1.03x, inside that machine's noise. */
#define SUB_BLOCK 32

/* Rows of the sub-block at s0 of a block of nb. */
static uint32_t sub_rows(uint32_t s0, uint32_t nb)
{
    return nb - s0 < SUB_BLOCK ? nb - s0 : SUB_BLOCK;
}

/* Rows [r, r + n) of a K or V run into L1. */
static void fetch_rows(const unsigned char *run, uint32_t r, uint32_t n, size_t row_bytes)
{
    const unsigned char *p = run + (size_t)r * row_bytes;
    for (size_t o = 0; o < (size_t)n * row_bytes; o += 64)
        __builtin_prefetch(p + o, 0, 3);
}

/* Row r, query heads h0 .. h0 + nh - 1 (nh <= HEAD_GROUP, one K/V head):
 * softmax(q K^T * scale) V over the row's visible positions [start, pos]
 * for each head. The multi-query kernels give every head the bits it would
 * get alone, so the grouping never changes a result. */
static void attend_heads(const attn_job *j, size_t r, uint32_t h0, uint32_t nh)
{
    const tw_mconfig *c = &j->m->cfg;
    uint32_t hd = c->head_dim;
    uint32_t g = h0 / (c->n_heads / c->n_kv_heads);
    const tw_seq *seq = j->b->seq[r];
    uint32_t pos = j->b->pos[r];
    size_t hq = (size_t)hd * (j->gate_off ? 2 : 1); /* from one head's query to the next */
    const float *q = j->q + r * j->q_stride + h0 * hq;
    const unsigned char *K = tw_seq_kv(seq, j->L->attn_index, 0, g);
    const unsigned char *V = tw_seq_kv(seq, j->L->attn_index, 1, g);
    const bool f16 = j->m->info.kv_type == TW_KV_F16;
    uint32_t start = 0;
    if (j->L->sliding && pos + 1 > c->sliding_window)
        start = pos + 1 - c->sliding_window;

    attn_state st[HEAD_GROUP];
    float sc[HEAD_GROUP][SCORE_BLOCK];
    for (uint32_t k = 0; k < nh; k++) {
        memset(st[k].acc, 0, hd * sizeof(float));
        st[k].mx = -INFINITY;
        st[k].sum = 0.0f;
    }
    const size_t row_bytes = (size_t)hd * (f16 ? sizeof(uint16_t) : sizeof(float));
    const bool fetch = tw_kernels_decode_prefetch();
    for (uint32_t t0 = start; t0 <= pos; t0 += SCORE_BLOCK) {
        uint32_t nb = pos + 1 - t0 < SCORE_BLOCK ? pos + 1 - t0 : SCORE_BLOCK;
        if (fetch && t0 == start)
            fetch_rows(K, t0, sub_rows(0, nb), row_bytes);
        for (uint32_t s0 = 0; s0 < nb; s0 += SUB_BLOCK) {
            uint32_t ns = sub_rows(s0, nb);
            if (fetch && s0 + ns < nb)
                fetch_rows(K, t0 + s0 + ns, sub_rows(s0 + ns, nb), row_bytes);
            else if (fetch)
                fetch_rows(V, t0, sub_rows(0, nb), row_bytes);
            scores(q, hq, nh, K, f16, t0 + s0, ns, hd, sc[0] + s0);
        }
        for (uint32_t k = 0; k < nh; k++)
            softmax_block(c, sc[k], nb, &st[k]);
        for (uint32_t s0 = 0; s0 < nb; s0 += SUB_BLOCK) {
            uint32_t ns = sub_rows(s0, nb);
            if (fetch && s0 + ns < nb)
                fetch_rows(V, t0 + s0 + ns, sub_rows(s0 + ns, nb), row_bytes);
            else if (fetch && t0 + nb <= pos)
                fetch_rows(K, t0 + nb, sub_rows(0, pos + 1 - t0 - nb), row_bytes);
            weigh_values(sc[0] + s0, nh, V, f16, t0 + s0, ns, hd, st[0].acc,
                         sizeof st[0] / sizeof(float));
        }
    }
    for (uint32_t k = 0; k < nh; k++) {
        float *out = j->att + r * (size_t)c->n_heads * hd + (size_t)(h0 + k) * hd;
        float inv = 1.0f / st[k].sum;
        if (j->gate_off) {
            const float *gate = q + k * hq + j->gate_off;
            for (uint32_t d = 0; d < hd; d++)
                out[d] = st[k].acc[d] * inv * tw_sigmoid(gate[d]);
        } else {
            for (uint32_t d = 0; d < hd; d++)
                out[d] = st[k].acc[d] * inv;
        }
    }
}

/* Row r's share of K/V head g once its projections are in: the biases,
 * per-head norms and RoPE of the head's queries and of its key, and the
 * key and value stored in the row's sequence. Each (row, head) is touched
 * by one call alone, so the calls may run on any threads. */
static void prepare_group(const tw_model *m, const tw_layer *L, const tw_batch *b, size_t r,
                          uint32_t g)
{
    const tw_mconfig *c = &m->cfg;
    const tw_scratch *s = &m->s;
    const uint32_t hd = c->head_dim, per = c->n_heads / c->n_kv_heads;
    const size_t hq = (size_t)hd * (c->family->attn_gate ? 2 : 1);
    const size_t q_stride = c->n_heads * hq, kv_stride = (size_t)c->n_kv_heads * hd;
    const uint32_t pos = b->pos[r];
    float *q = s->q + r * q_stride + (size_t)g * per * hq;
    if (L->bq)
        for (size_t i = 0; i < per * hq; i++)
            q[i] += L->bq[(size_t)g * per * hq + i];
    for (uint32_t h = 0; h < per; h++) {
        float *qh = q + h * hq;
        if (L->q_norm)
            tw_rmsnorm(qh, qh, L->q_norm, hd, c->norm_eps);
        tw_rope_apply(L->rope, qh, pos);
    }
    float *kh = s->k + r * kv_stride + (size_t)g * hd;
    float *vh = s->v + r * kv_stride + (size_t)g * hd;
    for (uint32_t d = 0; L->bk && d < hd; d++)
        kh[d] += L->bk[(size_t)g * hd + d];
    for (uint32_t d = 0; L->bv && d < hd; d++)
        vh[d] += L->bv[(size_t)g * hd + d];
    if (L->k_norm)
        tw_rmsnorm(kh, kh, L->k_norm, hd, c->norm_eps);
    tw_rope_apply(L->rope, kh, pos);
    tw_seq_kv_store(b->seq[r], L->attn_index, 0, g, (size_t)pos * hd, hd, kh);
    tw_seq_kv_store(b->seq[r], L->attn_index, 1, g, (size_t)pos * hd, hd, vh);
}

/* One (row, K/V head): the query heads sharing it, HEAD_GROUP at a time. */
static void attend_kv_head(void *ctx, int task, int n_tasks)
{
    (void)n_tasks;
    const attn_job *j = ctx;
    const tw_mconfig *c = &j->m->cfg;
    uint32_t per = c->n_heads / c->n_kv_heads;
    size_t r = (size_t)task / c->n_kv_heads;
    uint32_t g = (uint32_t)((size_t)task % c->n_kv_heads);
    if (j->prepare)
        prepare_group(j->m, j->L, j->b, r, g);
    for (uint32_t h = g * per; h < (g + 1) * per; h += HEAD_GROUP)
        attend_heads(j, r, h, (g + 1) * per - h < HEAD_GROUP ? (g + 1) * per - h : HEAD_GROUP);
}

/* A prefill chunk of at least this many rows attends through matrix
 * products (tw_attention_causal) instead of the per-row kernels. */
#define PRODUCT_MIN_ROWS 32
#define PRODUCT_MAX_KV_HEADS 64

/* The chunk's attention by tw_attention_causal when the layer allows it
 * (one sequence, causal over the whole context, no soft cap); false when
 * the per-row kernels must do it. Decode and verification batches never
 * come here (not one_seq), so their bits stay those of a lone decode step. */
static bool prefill_by_products(tw_model *m, tw_pool *pool, const tw_layer *L, const tw_batch *b,
                                size_t q_stride)
{
    const tw_mconfig *c = &m->cfg;
    if (!b->one_seq || b->n < PRODUCT_MIN_ROWS || L->sliding || c->attn_softcap > 0.0f ||
        c->n_kv_heads > PRODUCT_MAX_KV_HEADS)
        return false;
    const tw_seq *seq = b->seq[0];
    const void *K[PRODUCT_MAX_KV_HEADS], *V[PRODUCT_MAX_KV_HEADS];
    for (uint32_t g = 0; g < c->n_kv_heads; g++) {
        K[g] = tw_seq_kv(seq, L->attn_index, 0, g);
        V[g] = tw_seq_kv(seq, L->attn_index, 1, g);
    }
    const bool gated = c->family->attn_gate;
    const tw_causal_attn a = {
        .q = m->s.q,
        .q_stride = q_stride,
        .head_stride = (size_t)c->head_dim * (gated ? 2 : 1),
        .gate_off = gated ? c->head_dim : 0,
        .n_heads = c->n_heads,
        .n_kv_heads = c->n_kv_heads,
        .head_dim = c->head_dim,
        .n = b->n,
        .p0 = b->pos[0],
        .K = K,
        .V = V,
        .kv_f16 = m->info.kv_type == TW_KV_F16,
        .scale = c->attn_scale,
        .out = m->s.att,
        .out_stride = (size_t)c->n_heads * c->head_dim,
    };
    return tw_attention_causal(pool, &a);
}

static void add_bias(float *x, const float *bias, size_t rows, size_t n)
{
    if (!bias)
        return;
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < n; i++)
            x[r * n + i] += bias[i];
}

/* Whether no two rows share a sequence (a sequence's rows are
 * consecutive): then no row attends to a position another row of the step
 * stores, and each (row, K/V head) can be prepared inside its own
 * attention task. */
static bool rows_apart(const tw_batch *b)
{
    for (size_t r = 1; r < b->n; r++)
        if (b->seq[r] == b->seq[r - 1])
            return false;
    return true;
}

void tw_attention_block(tw_model *m, tw_pool *pool, const tw_layer *L, const tw_batch *b,
                        const float *xn, float *y)
{
    const tw_mconfig *c = &m->cfg;
    tw_scratch *s = &m->s;
    size_t n = b->n;
    uint32_t hd = c->head_dim;
    bool gated = c->family->attn_gate;
    size_t q_stride = (size_t)c->n_heads * hd * (gated ? 2 : 1);

    /* Projections in one pool run, then attention in another. A lone row's
     * projections and its attention were tried as one run, a task per K/V
     * head computing that head's q/k/v rows and then attending (no barrier
     * between, no q/k/v handed across threads): per layer 36.7 us against
     * 41.1 for the steps apart, but its two fixed tasks waited ~4.7 us on
     * each other, and decoding qwen2-0.5b Q4_0 on 2 threads (Zen 5 guest,
     * 30 bursts of 32 tokens alternated in one process, three times) was
     * 0.97-1.00x as fast. Fetching the layer's K/V, or the o projection's
     * rows, ahead inside those tasks read 0.98-0.99x. */
    const tw_mat *qkv[3] = {&L->wq, &L->wk, &L->wv};
    float *const out[3] = {s->q, s->k, s->v};
    tw_fetch_next(m, pool, n, L, TW_FETCH_MIXER_OUT);
    tw_mat_mul_multi(pool, qkv, out, 3, xn, n);

    attn_job j = {.m = m,
                  .L = L,
                  .b = b,
                  .q = s->q,
                  .q_stride = q_stride,
                  .gate_off = gated ? hd : 0,
                  .att = s->att};
    /* A decode step's biases, RoPE and K/V stores run inside the attention
     * tasks, split across the pool instead of on the caller while the
     * others wait: the stores alone took 2.4-3.4 us a layer on a 2-vCPU
     * guest (a page walk each). qwen2-0.5b Q4_0 decoded 0.5-1.0% faster
     * on 2 threads (three runs of 40 alternated pairs of 32-token bursts,
     * faster in 22-26 of 40). */
    j.prepare = rows_apart(b);
    if (!j.prepare)
        for (size_t r = 0; r < n; r++)
            for (uint32_t g = 0; g < c->n_kv_heads; g++)
                prepare_group(m, L, b, r, g);
    if (!prefill_by_products(m, pool, L, b, q_stride))
        tw_pool_run(pool, attend_kv_head, &j, (int)(n * c->n_kv_heads));

    tw_fetch_next(m, pool, n, L, TW_FETCH_FFN_IN);
    tw_mat_mul(pool, &L->wo, s->att, n, y);
    add_bias(y, L->bo, n, c->hidden);
}
