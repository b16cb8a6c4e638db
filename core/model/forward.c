/* The forward pass: embeddings, the layer stack, logits. Every family runs
 * through this one function; what differs between them is data in the
 * tw_layer table (which mixer, which FFN, which optional norms). */
#include <math.h>
#include <string.h>

#include "tw/kernels.h"

#include "model/model_internal.h"

/* Runs the rows of `b` through the model and advances their sequences.
 * Logits are produced for rows [first_logit, b->n) into `logits`, or with
 * `hidden` their final-normed hidden states (what the logits are made
 * from). */
static void step(tw_model *m, tw_pool *pool, const tw_batch *b, const uint32_t *tokens,
                 size_t first_logit, float *logits, bool hidden)
{
    const tw_mconfig *c = &m->cfg;
    tw_scratch *s = &m->s;
    size_t n = b->n, H = c->hidden;

    /* a sequence's rows are consecutive: its last row reaches furthest */
    for (size_t r = 0; r < n; r++)
        if (r + 1 == n || b->seq[r + 1] != b->seq[r])
            tw_seq_kv_prepare(b->seq[r], (size_t)b->pos[r] + 1);

    for (size_t r = 0; r < n; r++) {
        float *x = s->x + r * H;
        tw_mat_row(&m->embed, tokens[r], x);
        if (m->embed_scale != 1.0f)
            for (size_t d = 0; d < H; d++)
                x[d] *= m->embed_scale;
    }

    for (uint32_t l = 0; l < c->n_layers; l++) {
        const tw_layer *L = &m->layers[l];
        tw_rmsnorm_rows(pool, s->xn, s->x, L->attn_norm, n, H, c->norm_eps);
        if (L->mixer == TW_MIXER_ATTENTION)
            tw_attention_block(m, pool, L, b, s->xn, s->y);
        else
            tw_deltanet_block(m, pool, L, b, s->xn, s->y);
        if (L->post_attn_norm)
            tw_rmsnorm_rows(pool, s->y, s->y, L->post_attn_norm, n, H, c->norm_eps);
        for (size_t i = 0; i < n * H; i++)
            s->x[i] += s->y[i];

        tw_rmsnorm_rows(pool, s->xn, s->x, L->ffn_norm, n, H, c->norm_eps);
        tw_ffn_block(m, pool, L, n, s->xn, s->y);
        if (L->post_ffn_norm)
            tw_rmsnorm_rows(pool, s->y, s->y, L->post_ffn_norm, n, H, c->norm_eps);
        for (size_t i = 0; i < n * H; i++)
            s->x[i] += s->y[i];
    }

    for (size_t r = 0; r < n; r++) {
        tw_seq *seq = b->seq[r];
        seq->stamp[b->pos[r]] = ++seq->clock;
        seq->len = (size_t)b->pos[r] + 1;
    }

    if (first_logit >= n)
        return;
    size_t cnt = n - first_logit;
    if (hidden) {
        tw_rmsnorm_rows(pool, logits, s->x + first_logit * H, m->final_norm, cnt, H, c->norm_eps);
        return;
    }
    tw_rmsnorm_rows(pool, s->xn, s->x + first_logit * H, m->final_norm, cnt, H, c->norm_eps);
    tw_fetch_next(m, pool, n, NULL, TW_FETCH_NEXT_LAYER);
    tw_mat_mul(pool, &m->lm_head, s->xn, cnt, logits);
    if (c->final_softcap > 0.0f) {
        float cap = c->final_softcap;
        for (size_t i = 0; i < cnt * c->vocab; i++)
            logits[i] = cap * tanhf(logits[i] / cap);
    }
}

/* An encoder reads a whole input at once and predicts nothing, so the
 * sequence calls refuse it. */
static tw_status refuse_encoder(const tw_model *m, tw_err *err)
{
    return tw_errorf(err, TW_FAILED_PRECONDITION,
                     "%s is an encoder: it embeds whole inputs (tw_model_encode) and predicts "
                     "no token",
                     m->cfg.model_type);
}

static tw_status check_tokens(const tw_model *m, const uint32_t *tokens, size_t n, tw_err *err)
{
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] >= m->cfg.vocab)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "token id %u at index %zu is outside the vocabulary (%u)",
                             tokens[i], i, m->cfg.vocab);
    }
    return TW_OK;
}

/* How many of the `left` prompt tokens from position `pos` on the next
 * prefill step takes (at most max_chunk).
 *
 * A prompt's output must not depend on where it was cut into calls: a
 * prefix restored from a cache at a multiple of TW_PREFILL_GROUP continues
 * with a call that starts there, where the same prompt read whole has a
 * step running across that position. So a step is either a run of whole
 * groups of TW_PREFILL_GROUP positions (aligned to the sequence's start) or
 * the part of one group that the call holds, never both. Every kernel
 * computes a whole group's rows the same whichever other whole groups share
 * its step (batch-size-independent products, causal attention grouped by
 * TW_PREFILL_GROUP, the DeltaNet chunk form in TW_DN_CHUNK pieces), and a
 * part group goes alone in both readings, so cutting at group boundaries
 * changes no bit. */
static size_t prefill_step_rows(size_t pos, size_t left, size_t max_chunk)
{
    const size_t G = TW_PREFILL_GROUP;
    size_t rows;
    if (pos % G != 0 || left < G) {
        rows = G - pos % G;
        rows = left < rows ? left : rows;
    } else {
        const size_t whole = left / G * G, most = max_chunk / G * G;
        rows = most && most < whole ? most : whole;
    }
    /* a model made with steps shorter than a group keeps its limit (and
     * loses the guarantee) */
    return rows < max_chunk ? rows : max_chunk;
}

tw_status tw_model_forward(tw_model *model, tw_pool *pool, tw_seq *seq, const uint32_t *tokens,
                           size_t n, float *logits, tw_logits_mode mode, tw_err *err)
{
    if (!model || !seq || seq->model != model)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "forward: sequence does not belong to model");
    if (model->enc)
        return refuse_encoder(model, err);
    if (mode < TW_LOGITS_NONE || mode > TW_HIDDEN_ALL)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "forward: bad logits mode %d", (int)mode);
    if (mode != TW_LOGITS_NONE && !logits)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "forward: logits buffer is NULL");
    if (n == 0) {
        if (mode == TW_LOGITS_LAST || mode == TW_HIDDEN_LAST)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "forward: no token to take logits of");
        return TW_OK;
    }
    if (!tokens)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "forward: tokens is NULL");
    tw_status st = check_tokens(model, tokens, n, err);
    if (st)
        return st;
    if (n > seq->cap - seq->len)
        return tw_errorf(err, TW_OUT_OF_RANGE,
                         "context full: %zu tokens + %zu new exceed the sequence's %zu", seq->len,
                         n, seq->cap);

    tw_scratch *s = &model->s;
    const bool hidden = mode == TW_HIDDEN_LAST || mode == TW_HIDDEN_ALL;
    const bool all = mode == TW_LOGITS_ALL || mode == TW_HIDDEN_ALL;
    const bool last = mode == TW_LOGITS_LAST || mode == TW_HIDDEN_LAST;
    size_t V = hidden ? model->cfg.hidden : model->cfg.vocab;
    for (size_t done = 0; done < n;) {
        size_t cnt = prefill_step_rows(seq->len, n - done, model->max_chunk);
        for (size_t i = 0; i < cnt; i++) {
            s->row_seq[i] = seq;
            s->pos[i] = (uint32_t)(seq->len + i);
        }
        tw_batch b = {.n = cnt, .seq = s->row_seq, .pos = s->pos, .one_seq = true};
        size_t first = cnt;
        float *out = NULL;
        if (all) {
            first = 0;
            out = logits + done * V;
        } else if (last && done + cnt == n) {
            first = cnt - 1;
            out = logits;
        }
        step(model, pool, &b, tokens + done, first, out, hidden);
        done += cnt;
    }
    return TW_OK;
}

tw_status tw_model_decode_batch(tw_model *model, tw_pool *pool, tw_seq *const *seqs,
                                const uint32_t *tokens, size_t n_seqs, float *logits,
                                tw_err *err)
{
    if (!model || !seqs || !tokens || !logits)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "decode: NULL argument");
    if (model->enc)
        return refuse_encoder(model, err);
    if (n_seqs == 0 || n_seqs > model->max_batch)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "decode: batch of %zu (allowed 1..%zu)",
                         n_seqs, model->max_batch);
    tw_status st = check_tokens(model, tokens, n_seqs, err);
    if (st)
        return st;
    for (size_t i = 0; i < n_seqs; i++) {
        if (!seqs[i] || seqs[i]->model != model)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "decode: sequence %zu does not belong to model", i);
        for (size_t j = 0; j < i; j++)
            if (seqs[j] == seqs[i])
                return tw_errorf(err, TW_INVALID_ARGUMENT,
                                 "decode: sequence appears twice (%zu, %zu)", j, i);
        if (seqs[i]->len >= seqs[i]->cap)
            return tw_errorf(err, TW_OUT_OF_RANGE, "context full: sequence %zu holds %zu tokens",
                             i, seqs[i]->len);
    }
    tw_scratch *s = &model->s;
    for (size_t i = 0; i < n_seqs; i++) {
        s->row_seq[i] = seqs[i];
        s->pos[i] = (uint32_t)seqs[i]->len;
    }
    tw_batch b = {.n = n_seqs, .seq = s->row_seq, .pos = s->pos, .one_seq = n_seqs == 1};
    step(model, pool, &b, tokens, 0, logits, false);
    return TW_OK;
}

tw_status tw_model_verify_batch(tw_model *model, tw_pool *pool, size_t n_seqs,
                                tw_seq *const *seqs, const uint32_t *tokens, const size_t *n_rows,
                                tw_snapshot_pool *const *trails, float *logits, tw_err *err)
{
    if (!model || !seqs || !tokens || !n_rows || !trails || !logits || n_seqs == 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "verify: NULL argument or no sequence");
    if (model->enc)
        return refuse_encoder(model, err);
    size_t total = 0;
    for (size_t i = 0; i < n_seqs; i++) {
        tw_seq *seq = seqs[i];
        if (!seq || seq->model != model)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "verify: sequence %zu does not belong to the model", i);
        for (size_t j = 0; j < i; j++)
            if (seqs[j] == seq)
                return tw_errorf(err, TW_INVALID_ARGUMENT,
                                 "verify: sequence appears twice (%zu, %zu)", j, i);
        if (n_rows[i] == 0 || (!trails[i] && n_rows[i] != 1))
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "verify: sequence %zu has %zu rows (1, or more with a snapshot pool)",
                             i, n_rows[i]);
        if (trails[i] && (tw_snapshot_pool_model(trails[i]) != model ||
                          n_rows[i] > tw_snapshot_pool_slots(trails[i])))
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "verify: sequence %zu: the snapshot pool is another model's or has "
                             "fewer than %zu slots",
                             i, n_rows[i]);
        for (size_t j = 0; j < i && trails[i]; j++)
            if (trails[j] == trails[i])
                return tw_errorf(err, TW_INVALID_ARGUMENT,
                                 "verify: sequences %zu and %zu share a snapshot pool", j, i);
        if (n_rows[i] > seq->cap - seq->len)
            return tw_errorf(err, TW_OUT_OF_RANGE,
                             "context full: %zu tokens + %zu new exceed the sequence's %zu",
                             seq->len, n_rows[i], seq->cap);
        total += n_rows[i];
    }
    if (total > model->max_batch || total > model->max_chunk)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "verify: %zu rows exceed max_batch (%zu) or max_chunk (%zu)", total,
                         model->max_batch, model->max_chunk);
    tw_status st = check_tokens(model, tokens, total, err);
    if (st)
        return st;

    tw_scratch *s = &model->s;
    size_t floats = (size_t)model->n_dn_layers * tw_dn_layer_floats(model);
    bool any_trail = false;
    for (size_t i = 0, r = 0; i < n_seqs; i++) {
        const float *base = trails[i] ? tw_snapshot_begin_replay(trails[i], seqs[i]) : NULL;
        for (size_t k = 0; k < n_rows[i]; k++, r++) {
            s->row_seq[r] = seqs[i];
            s->pos[r] = (uint32_t)(seqs[i]->len + k);
            s->row_trail[r] =
                trails[i] && floats ? tw_snapshot_slot_state(trails[i], k) : NULL;
            s->row_base[r] = k == 0 ? base : NULL;
            any_trail |= s->row_trail[r] != NULL;
        }
    }
    /* Not one_seq: attention and the FFN treat the rows exactly as a decode
     * batch does, and the recurrent layers step token by token. */
    tw_batch b = {.n = total, .seq = s->row_seq, .pos = s->pos, .one_seq = false,
                  .row_trail = any_trail ? s->row_trail : NULL,
                  .row_base = s->row_base};
    step(model, pool, &b, tokens, 0, logits, false);
    for (size_t i = 0; i < n_seqs; i++) {
        if (!trails[i])
            continue;
        tw_seq *seq = seqs[i];
        size_t len0 = seq->len - n_rows[i];
        for (size_t k = 0; k < n_rows[i]; k++)
            tw_snapshot_mark_replay(trails[i], k, seq, len0 + k + 1, seq->stamp[len0 + k]);
    }
    return TW_OK;
}

tw_status tw_model_verify(tw_model *model, tw_pool *pool, tw_seq *seq, const uint32_t *tokens,
                          size_t n, float *logits, tw_snapshot_pool *trail, tw_err *err)
{
    if (!model || !seq || seq->model != model || !trail || tw_snapshot_pool_model(trail) != model)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "verify: sequence and snapshot pool must belong to the model");
    if (!tokens || !logits || n == 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "verify: need tokens and a logits buffer");
    return tw_model_verify_batch(model, pool, 1, &seq, tokens, &n, &trail, logits, err);
}

size_t tw_model_max_verify(const tw_model *model)
{
    if (!model)
        return 0;
    return model->max_batch < model->max_chunk ? model->max_batch : model->max_chunk;
}
