/* The scheduler's steps: the rules every committed token runs through, and
 * the prefill and decode passes (speculating slots verify inside the
 * decode pass). See scheduler.c for the loop around them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_internal.h"
#include "tw/kernels.h"
#include "tw/log.h"

/* ------------------------------------------------------------ per token */

void sched_slot_finish(slot *sl, tw_finish_reason why)
{
    if (sl->finish == TW_FINISH_NONE)
        sl->finish = why;
    sl->state = SLOT_DONE;
}

void sched_slot_fail(slot *sl, tw_status st, const char *msg)
{
    if (sl->finish == TW_FINISH_NONE) {
        sl->error = st;
        snprintf(sl->error_msg, sizeof sl->error_msg, "%s", msg);
    }
    sched_slot_finish(sl, TW_FINISH_ERROR);
}

/* Answer text goes through the stop-string hold-back. */
static void push_content(slot *sl, const char *p, size_t n)
{
    if (sl->finish != TW_FINISH_NONE)
        return;
    const char *emit;
    size_t len;
    tw_stop_result res = tw_stop_feed(sl->stop, p, n, &emit, &len, &sl->matched);
    if (res == TW_STOP_NOMEM) {
        sched_slot_fail(sl, TW_RESOURCE_EXHAUSTED, "out of memory for answer text");
        return;
    }
    if (!sched_buf_append(&sl->text, emit, len))
        sched_slot_fail(sl, TW_RESOURCE_EXHAUSTED, "out of memory for answer text");
    else if (res == TW_STOP_MATCHED)
        sched_slot_finish(sl, TW_FINISH_STOP_STRING);
}

static void push_text(slot *sl, bool reasoning, const char *p, size_t n)
{
    if (reasoning && sl->r->thinking.separate_reasoning) {
        if (!sched_buf_append(&sl->reasoning, p, n))
            sched_slot_fail(sl, TW_RESOURCE_EXHAUSTED, "out of memory for reasoning text");
    } else {
        push_content(sl, p, n);
    }
}

/* The detokenizer's held bytes belong to the text before a tag. */
static void flush_detok(slot *sl, bool reasoning)
{
    if (!sl->detok)
        return;
    const char *p;
    size_t n;
    tw_detok_flush(sl->detok, &p, &n);
    push_text(sl, reasoning, p, n);
}

/* A token's bytes from the model's tokenizer (they live as long as the
 * model); NULL when it has none. */
static void token_text(const model_entry *m, uint32_t token, const char **text, size_t *len)
{
    *text = m->tok ? tw_tokenizer_token_bytes(m->tok, token, len) : NULL;
    if (!*text)
        *len = 0;
}

/* A JSON answer takes the token's bytes. */
static void json_advance(slot *sl, uint32_t token)
{
    const char *p;
    size_t n;
    token_text(sl->m, token, &p, &n);
    if (!tw_json_state_feed(sl->json, p, n))
        sched_slot_fail(sl, TW_INTERNAL, "a token that breaks the JSON answer was committed");
    else if (tw_json_state_closed(sl->json))
        sched_json_closed(sl);
}

/* Whether the slot's next token is sampled under its JSON grammar: not
 * while the model reasons in a thinking block, nor when the token is
 * forced. */
static bool json_masked(const slot *sl)
{
    return sl->json && (sl->json_on || sched_calls_choosing(sl)) &&
           !(sl->think && tw_thinking_inside(sl->think)) && !sl->close_pending &&
           sl->forced_pos >= sl->n_forced;
}

/* Bans the tokens of row that cannot continue the JSON answer (a model
 * that opens its thinking block itself may still do so before the
 * answer's first token); returns how many are kept. */
static size_t json_mask_row(slot *sl, float *row)
{
    const model_entry *m = sl->m;
    const bool may_think = sl->think && sl->n_answer == 0 && sl->n_reasoning == 0 &&
                           sl->r->thinking.enable_thinking != TW_THINK_OFF && !sl->r->answer_prefix;
    const float open = may_think ? row[m->think_open] : -INFINITY;
    /* beside a JSON answer a call may open instead, and once it began
     * only its opening may go on */
    const bool choosing = sched_calls_choosing(sl);
    const bool either = choosing && sl->r->either;
    const size_t n_cont = choosing && !either ? sched_calls_save(sl, row) : 0;
    size_t kept = 0;
    if (either)
        kept = sched_either_mask(sl, row);
    else if (choosing && !sl->json_on)
        for (uint32_t t = 0; t < m->vocab; t++)
            row[t] = -INFINITY;
    else
        kept = tw_json_mask_logits(sl->jmask, sl->json, m->eos, m->n_eos, row, m->vocab);
    if (may_think)
        row[m->think_open] = open;
    return kept + sched_calls_restore(sl, row, n_cont);
}

typedef struct mask_run {
    slot **slots;
    float **rows;
} mask_run;

static void mask_task(void *ctx, int task, int n_tasks)
{
    (void)n_tasks;
    mask_run *mr = ctx;
    slot *sl = mr->slots[task];
    sl->mask_kept = json_mask_row(sl, mr->rows[task]);
    sl->mask_ready = true;
}

/* A decode step's JSON rows, masked on the pool when there are several:
 * each slot has its own matcher and scratch, and the vocabulary index is
 * read-only. */
static void mask_ahead(sched *s, slot **slots, float **rows, size_t n)
{
    if (n < 2)
        return;
    mask_run mr = {.slots = slots, .rows = rows};
    tw_pool_run(s->pool, mask_task, &mr, (int)n);
}

/* Bans the tokens that cannot continue a JSON answer. False when no token
 * can, which only a vocabulary without some byte the document needs brings
 * about. */
static bool json_mask(slot *sl, float *row)
{
    if (!json_masked(sl))
        return true;
    size_t kept = sl->mask_ready ? sl->mask_kept : json_mask_row(sl, row);
    sl->mask_ready = false;
    if (kept > 0)
        return true;
    sched_slot_fail(sl, TW_FAILED_PRECONDITION,
                    "no token of the model's vocabulary continues the JSON answer");
    return false;
}

/* Adds a committed token (sampled, or forced when !sampled) to the output
 * and runs the rules that follow it; res holds its log-probabilities when
 * the request asked for them. */
static void commit(tw_engine *e, slot *sl, uint32_t token, const tw_sample_result *res,
                   bool sampled)
{
    (void)e;
    request *r = sl->r;
    if (sampled && tw_stop_token(sl->stop, token, sl->n_answer, NULL)) {
        sched_slot_finish(sl, TW_FINISH_STOP);
        return;
    }
    tw_force_close force = TW_FORCE_NONE;
    tw_token_role role = sl->think ? tw_thinking_step(sl->think, token, &force) : TW_ROLE_CONTENT;

    size_t k = sl->n_ids++;
    sl->ids[k] = token;
    if (r->logprobs.enabled || r->logprobs.top_logprobs) {
        tw_token_logprob *lp = &sl->lps[k];
        lp->token_id = token;
        lp->reasoning = role != TW_ROLE_CONTENT && r->thinking.separate_reasoning;
        lp->logprob = res ? res->logprob : 0.0f;
        lp->n_top = res ? res->n_top : 0;
        if (res && res->n_top)
            memcpy(lp->top, res->top, res->n_top * sizeof lp->top[0]);
        token_text(sl->m, token, &lp->text, &lp->text_len);
        for (uint32_t i = 0; i < lp->n_top; i++)
            token_text(sl->m, lp->top[i].token_id, &lp->top[i].text, &lp->top[i].text_len);
    }
    sl->n_completion++;
    if (role == TW_ROLE_REASONING)
        sl->n_reasoning++;
    else if (role == TW_ROLE_CONTENT)
        sl->n_answer++;
    tw_sampler_accept(sl->sampler, &token, 1, true);

    if (role == TW_ROLE_THINK_OPEN || role == TW_ROLE_THINK_CLOSE) {
        flush_detok(sl, role == TW_ROLE_THINK_CLOSE);
        if (!r->thinking.separate_reasoning)
            push_content(sl, role == TW_ROLE_THINK_OPEN ? "<think>" : "</think>",
                         role == TW_ROLE_THINK_OPEN ? 7 : 8);
    } else if (sl->detok) {
        const char *p;
        size_t n;
        tw_err err;
        if (tw_detok_feed(sl->detok, token, &p, &n, &err) != TW_OK)
            sched_slot_fail(sl, TW_INTERNAL, err.msg);
        else
            push_text(sl, role == TW_ROLE_REASONING, p, n);
    }
    if (sl->json && role == TW_ROLE_CONTENT && sl->finish == TW_FINISH_NONE &&
        !sched_calls_take(sl, token) && sl->json_on) {
        sl->decided |= !sl->in_call;
        json_advance(sl, token);
    }
    if (r->ban_calls && role == TW_ROLE_CONTENT)
        sched_calls_ban_step(sl, token);
    if (sl->finish != TW_FINISH_NONE)
        return;

    if (force != TW_FORCE_NONE) {
        sl->forced_by = force;
        sl->transition = force == TW_FORCE_LOOP ? r->kind : TW_TRANSITION_PLAIN;
        sl->close_pending = true;
        sl->forced = sl->m->transition[sl->transition];
        /* a transition is prose, which a JSON answer has no room for */
        sl->n_forced = sl->json && sl->json_on ? 0 : sl->m->n_transition[sl->transition];
        sl->forced_pos = 0;
    }
    if ((role == TW_ROLE_CONTENT && r->stop.max_tokens && sl->n_answer >= r->stop.max_tokens) ||
        (r->stop.max_total_tokens && sl->n_completion >= r->stop.max_total_tokens)) {
        sched_slot_finish(sl, TW_FINISH_LENGTH);
        return;
    }
    if (tw_seq_len(sl->seq) + 1 > tw_seq_capacity(sl->seq)) {
        sched_slot_finish(sl, TW_FINISH_CONTEXT_LENGTH);
        return;
    }
    sl->next_token = token;
    sl->state = SLOT_DECODE;
}

/* Picks the next token from a logits row (or the next forced token). */
static void next_token(tw_engine *e, slot *sl, float *row)
{
    if (!sl->got_first) {
        sl->got_first = true;
        sl->ttft_us = tw_now_us() - sl->r->submit_us;
        /* a forced tool call's opening ended the prompt; the answer reads
         * as the whole call */
        if (sl->r->answer_prefix)
            push_content(sl, sl->r->answer_prefix, strlen(sl->r->answer_prefix));
    }
    request *r = sl->r;
    bool want = r->logprobs.enabled || r->logprobs.top_logprobs;
    tw_sample_result res;
    if (sl->close_pending || sl->forced_pos < sl->n_forced) {
        uint32_t token;
        if (sl->close_pending) {
            sl->close_pending = false;
            token = sl->m->think_close;
        } else {
            token = sl->forced[sl->forced_pos++];
        }
        /* a forced token still has the model's view of it, as a sampled
         * one would under the request's settings */
        if (want)
            tw_sampler_score(sl->sampler, row, token, r->logprobs.top_logprobs, &res);
        commit(e, sl, token, want ? &res : NULL, false);
        return;
    }
    /* a whole JSON answer may end however short it is */
    if (tw_stop_suppress_eos(sl->stop, sl->n_answer) &&
        !(sl->json && sl->json_on && tw_json_state_complete(sl->json)))
        for (size_t i = 0; i < sl->m->n_eos; i++)
            row[sl->m->eos[i]] = -INFINITY;
    sched_calls_ban(sl, row);
    if (!json_mask(sl, row))
        return;
    tw_sampler_sample(sl->sampler, row, want, r->logprobs.top_logprobs, &res);
    commit(e, sl, res.token, &res, true);
}

/* ------------------------------------------------------------ steps */

static void count_rate(tw_engine *e, uint64_t decoded, uint64_t prefilled)
{
    uint64_t sec = tw_now_us() / 1000000u;
    int i = (int)(sec % 60);
    pthread_mutex_lock(&e->lock);
    if (e->rate_stamp[i] != sec) {
        e->rate_stamp[i] = sec;
        e->decode_tokens[i] = 0;
        e->prefill_tokens[i] = 0;
    }
    e->decode_tokens[i] += decoded;
    e->prefill_tokens[i] += prefilled;
    pthread_mutex_unlock(&e->lock);
}

/* Prompt tokens [from, end) with every position's logits, a prefill group
 * at a time (cut where a whole read's steps are, so the same bits), each
 * row giving the next prompt token's log-probability; the last row's go to
 * the model's logits for the first token. */
static tw_status forward_with_prompt_logprobs(sched *s, slot *sl, size_t from, size_t end,
                                              tw_err *err)
{
    request *r = sl->r;
    const model_entry *m = sl->m;
    const size_t V = m->vocab, G = TW_PREFILL_GROUP;
    const uint32_t n_top = r->logprobs.top_logprobs;
    if (from == 0) {
        tw_token_logprob *first = &r->prompt_lps[0];
        first->token_id = r->prompt[0];
        first->logprob = NAN;
        first->n_top = 0;
        first->reasoning = false;
        token_text(m, first->token_id, &first->text, &first->text_len);
    }
    for (size_t at = from; at < end;) {
        const size_t stop = (at / G + 1) * G < end ? (at / G + 1) * G : end;
        tw_status st = tw_model_forward(m->model, s->pool, sl->seq, r->prompt + at, stop - at,
                                        sl->prompt_logits, TW_LOGITS_ALL, err);
        if (st != TW_OK)
            return st;
        for (size_t p = at; p < stop; p++) {
            const float *row = sl->prompt_logits + (p - at) * V;
            if (p + 1 == r->n_prompt) {
                memcpy(m->logits, row, V * sizeof *row);
                continue;
            }
            tw_token_logprob *lp = &r->prompt_lps[p + 1];
            lp->token_id = r->prompt[p + 1];
            lp->reasoning = false;
            lp->n_top = n_top;
            tw_logprobs_of_row(row, (uint32_t)V, lp->token_id, n_top, &lp->logprob, lp->top);
            token_text(m, lp->token_id, &lp->text, &lp->text_len);
            for (uint32_t i = 0; i < n_top; i++)
                token_text(m, lp->top[i].token_id, &lp->top[i].text, &lp->top[i].text_len);
        }
        at = stop;
    }
    if (end == r->n_prompt)
        r->prompt_lps_ready = true;
    return TW_OK;
}

/* Prompt tokens [from, end) of a mean-pooled embedding, a prefill group
 * at a time (cut where a whole read's steps are), their hidden states
 * added to the sum. */
static tw_status forward_summing(sched *s, slot *sl, size_t from, size_t end, tw_err *err)
{
    const request *r = sl->r;
    const size_t H = tw_model_get_info(sl->m->model)->hidden, G = TW_PREFILL_GROUP;
    for (size_t at = from; at < end;) {
        const size_t stop = (at / G + 1) * G < end ? (at / G + 1) * G : end;
        tw_status st = tw_model_forward(sl->m->model, s->pool, sl->seq, r->prompt + at, stop - at,
                                        sl->embed_rows, TW_HIDDEN_ALL, err);
        if (st != TW_OK)
            return st;
        for (size_t i = 0; i < (stop - at) * H; i++)
            sl->embed_sum[i % H] += sl->embed_rows[i];
        at = stop;
    }
    return TW_OK;
}

/* An encoder's prompt, read: its pooled state goes to the slot's vector,
 * or with mean pooling to the sum finish_embedding divides. */
static void pool_encoded(slot *sl)
{
    const request *r = sl->r;
    const size_t H = tw_model_get_info(sl->m->model)->hidden, n = r->n_prompt;
    if (r->embed.pooling == TW_POOLING_MEAN) {
        for (size_t i = 0; i < n * H; i++)
            sl->embed_sum[i % H] += sl->embed_rows[i];
        return;
    }
    const size_t row = r->embed.pooling == TW_POOLING_CLS ? 0 : n - 1;
    memcpy(sl->embed, sl->embed_rows + row * H, H * sizeof *sl->embed);
}

/* The embedding's vector once the whole prompt is read: the mean of the
 * sum (the last token's state is already in place), scaled to unit length
 * when asked. */
static void finish_embedding(slot *sl)
{
    const request *r = sl->r;
    const size_t H = tw_model_get_info(sl->m->model)->hidden;
    if (r->embed.pooling == TW_POOLING_MEAN)
        for (size_t d = 0; d < H; d++)
            sl->embed[d] = (float)(sl->embed_sum[d] / (double)r->n_prompt);
    if (r->embed.normalize) {
        double norm = 0;
        for (size_t d = 0; d < H; d++)
            norm += (double)sl->embed[d] * sl->embed[d];
        norm = sqrt(norm);
        for (size_t d = 0; norm > 0 && d < H; d++)
            sl->embed[d] = (float)(sl->embed[d] / norm);
    }
    sched_slot_finish(sl, TW_FINISH_STOP);
}

/* The prompt chunk [sl->prefilled, end) through the model (with its hidden
 * states, for an embedding); then the cache's bookkeeping, and the first
 * token (or the embedding) after the last chunk. */
static void prefill_chunk(tw_engine *e, sched *s, slot *sl, size_t end)
{
    request *r = sl->r;
    const size_t n = end - sl->prefilled;
    const bool last = end == r->n_prompt;
    tw_err err;
    uint64_t t0 = tw_now_us();
    const tw_pooling pool = r->embed.pooling;
    tw_status st;
    if (sl->prompt_logits)
        st = forward_with_prompt_logprobs(s, sl, sl->prefilled, end, &err);
    else if (pool == TW_POOLING_MEAN)
        st = forward_summing(s, sl, sl->prefilled, end, &err);
    else if (pool == TW_POOLING_LAST)
        st =
            tw_model_forward(sl->m->model, s->pool, sl->seq, r->prompt + sl->prefilled, n,
                             last ? sl->embed : NULL, last ? TW_HIDDEN_LAST : TW_LOGITS_NONE, &err);
    else
        st = tw_model_forward(sl->m->model, s->pool, sl->seq, r->prompt + sl->prefilled, n,
                              last ? sl->m->logits : NULL, last ? TW_LOGITS_LAST : TW_LOGITS_NONE,
                              &err);
    sl->prefill_us += tw_now_us() - t0;
    count_rate(e, 0, n);
    if (st != TW_OK) {
        sched_slot_fail(sl, st, err.msg);
        return;
    }
    sl->prefilled = end;
    engine_cache_after_chunk(sl->m->cache, &sl->cache, sl->seq, r->prompt);
    if (last && pool != TW_POOLING_NONE)
        finish_embedding(sl);
    else if (last && r->stop.prompt_only)
        sched_slot_finish(sl, TW_FINISH_LENGTH);
    else if (last)
        next_token(e, sl, sl->m->logits);
}

/* Slots in age order: request id, then choice. */
static bool older(const slot *a, const slot *b)
{
    return a->r->id < b->r->id || (a->r->id == b->r->id && a->index < b->index);
}

/* Whether sl may read its prompt now: with prompt log-probabilities, the
 * other choices wait for choice 0 to have them (it reads the prompt for
 * them), so that each choice's first chunk can carry them. */
static bool may_prefill(const slot *sl)
{
    const request *r = sl->r;
    return sl->index == 0 || !r->prompt_lps || r->prompt_lps_ready || r->failed;
}

/* The oldest slot still reading its prompt that is younger than `after`
 * (any, when after is NULL). */
static slot *next_prefilling(sched *s, const slot *after)
{
    slot *sl = NULL;
    for (uint32_t i = 0; i < s->n_slots; i++) {
        slot *c = &s->slots[i];
        if (c->state == SLOT_PREFILL && may_prefill(c) && (!after || older(after, c)) &&
            (!sl || older(c, sl)))
            sl = c;
    }
    return sl;
}

/* sl's prompt and those of the younger encoder slots of its model that
 * fit beside it, read in one pass over the weights (an embedding request
 * of many short inputs is many slots); each slot then has its vector. */
static void encode_slots(tw_engine *e, sched *s, slot *sl)
{
    slot *batch[TW_ENCODE_MAX_INPUTS];
    const uint32_t *tokens[TW_ENCODE_MAX_INPUTS];
    size_t n[TW_ENCODE_MAX_INPUTS];
    float *hidden[TW_ENCODE_MAX_INPUTS];
    const size_t cap = tw_model_encode_rows(sl->m->model);
    size_t k = 0, rows = 0;
    for (slot *c = sl; c && k < TW_ENCODE_MAX_INPUTS; c = next_prefilling(s, c)) {
        if (c->m != sl->m || c->r->n_prompt > cap - rows)
            continue;
        batch[k] = c;
        tokens[k] = c->r->prompt;
        n[k] = c->r->n_prompt;
        hidden[k] = c->embed_rows;
        rows += n[k++];
    }
    tw_err err;
    const uint64_t t0 = tw_now_us();
    tw_status st = tw_model_encode_batch(sl->m->model, s->pool, k, tokens, n, hidden, &err);
    const uint64_t us = tw_now_us() - t0;
    count_rate(e, 0, rows);
    for (size_t i = 0; i < k; i++) {
        slot *c = batch[i];
        c->prefill_us += us * n[i] / rows; /* each input's share of the pass */
        if (st != TW_OK) {
            sched_slot_fail(c, st, err.msg);
            continue;
        }
        c->prefilled = n[i];
        pool_encoded(c);
        finish_embedding(c);
    }
}

/* A prompt that can be read to its end in at most this share of
 * prefill_chunk goes ahead of older ones (see sched_prefill_step). */
#define QUICK_SHARE 4

/* Where sl's next prompt chunk ends: the same place whether it is read
 * alone or beside other prompts, so the prefix cache sees the same chunks. */
static size_t next_chunk_end(const tw_engine *e, slot *sl)
{
    if (tw_model_get_info(sl->m->model)->encoder)
        return sl->r->n_prompt; /* every token attends to every other */
    return engine_cache_chunk_end(sl->m->cache, &sl->cache, sl->prefilled, sl->r->n_prompt,
                                  e->opts.prefill_chunk);
}

/* Prefills sl's next chunk, [sl->prefilled, end), and hands a first token
 * to its callback now rather than after the step's other prompts and its
 * decode pass; a finished slot's end waits for the step's end, as that
 * frees the slot. */
static void prefill_and_emit(tw_engine *e, sched *s, slot *sl, size_t end)
{
    if (tw_model_get_info(sl->m->model)->encoder) {
        encode_slots(e, s, sl);
        return;
    }
    prefill_chunk(e, s, sl, end);
    if (sl->state == SLOT_DECODE)
        sched_emit(e, sl);
}

/* Prompt chunks, up to prefill_chunk tokens in all plus a quick share.
 * First, younger prompts whose whole rest fits in a quarter of
 * prefill_chunk are read to their end, oldest first, within that quarter:
 * a short question that arrives behind a long document starts at once
 * instead of after the document's last chunk. Then the oldest slot takes
 * its next chunk whatever its size, and a younger one joins while its
 * whole next chunk still fits, so short prompts that arrive together all
 * start in one step, while a step that carries a long prompt holds the
 * decoding slots no longer than one chunk and a quarter. */
void sched_prefill_step(tw_engine *e, sched *s)
{
    const size_t chunk = e->opts.prefill_chunk;
    slot *oldest = next_prefilling(s, NULL);
    size_t quick = chunk / QUICK_SHARE;
    for (slot *sl = oldest ? next_prefilling(s, oldest) : NULL; sl && quick;
         sl = next_prefilling(s, sl)) {
        const size_t end = next_chunk_end(e, sl), n = end - sl->prefilled;
        if (end != sl->r->n_prompt || n > quick)
            continue;
        quick -= n;
        prefill_and_emit(e, s, sl, end);
    }
    size_t budget = chunk;
    for (slot *sl = next_prefilling(s, NULL); sl; sl = next_prefilling(s, sl)) {
        const size_t end = next_chunk_end(e, sl), n = end - sl->prefilled;
        if (budget < chunk && n > budget)
            return;
        budget -= n < budget ? n : budget;
        prefill_and_emit(e, s, sl, end);
        if (budget == 0)
            return;
    }
}

/* Next token of verified row i under rejection sampling (sampled requests;
 * greedy ones go through next_token, exactly as without speculation). */
static void spec_next_token(tw_engine *e, slot *sl, size_t i, float *row)
{
    if (tw_stop_suppress_eos(sl->stop, sl->n_answer))
        for (size_t j = 0; j < sl->m->n_eos; j++)
            row[sl->m->eos[j]] = -INFINITY;
    sched_calls_ban(sl, row);
    if (!json_mask(sl, row))
        return;
    bool accepted;
    tw_sample_result res = {0};
    res.token = tw_spec_choose(sl->spec, sl->sampler, i, row, &accepted);
    commit(e, sl, res.token, &res, true);
}

/* The first half of a speculative round: the proposals, verified later in
 * the step's shared pass. Sets sl->spec_rows to 1 + their number (1: a
 * plain row this step); false when the slot failed. */
static bool spec_propose(sched *s, slot *sl, size_t max_rows)
{
    sl->spec_rows = 1;
    if (sl->close_pending || sl->forced_pos < sl->n_forced)
        return true;
    tw_err err;
    tw_status st;
    const uint32_t *d;
    sl->spec_t0 = tw_now_us();
    size_t room = tw_seq_capacity(sl->seq) - tw_seq_len(sl->seq);
    if (room > max_rows)
        room = max_rows;
    size_t k = tw_spec_propose(sl->spec, s->pool, sl->next_token, room, &d, &st, &err);
    if (st != TW_OK) {
        sched_slot_fail(sl, st, err.msg);
        return false;
    }
    sl->spec_rows = k + 1;
    return true;
}

/* The second half: walks the verified rows, commits the agreeing prefix
 * and the target's own next token, rewinds the rest. */
static void spec_settle(tw_engine *e, slot *sl, float *rows)
{
    const uint32_t *toks;
    size_t n;
    tw_snapshot_pool *trail;
    tw_err err;
    tw_status st = tw_spec_round_rows(sl->spec, &toks, &n, &trail, &err);
    if (st != TW_OK) {
        sched_slot_fail(sl, st, err.msg);
        return;
    }
    bool greedy = sl->r->sampling.temperature == 0.0f;
    size_t k = n - 1, kept = 0;
    for (size_t i = 0; i <= k; i++) {
        float *row = rows + i * (size_t)sl->m->vocab;
        kept = i + 1;
        if (greedy)
            next_token(e, sl, row);
        else
            spec_next_token(e, sl, i, row);
        if (i == k || sl->state != SLOT_DECODE || sl->close_pending ||
            sl->forced_pos < sl->n_forced || sl->next_token != toks[i + 1])
            break;
    }
    st = tw_spec_finish(sl->spec, sl->seq, kept, &err);
    if (st != TW_OK)
        sched_slot_fail(sl, st, err.msg);
    sl->decode_us += tw_now_us() - sl->spec_t0;
    count_rate(e, kept, 0);
}

/* Whether a speculating slot proposes this step. Its rows join the shared
 * pass, but each one still costs the arithmetic of a row; once other slots
 * of the same model decode too, the pass is already wide, so auto mode
 * speculates only for a slot decoding alone; explicit modes always do. */
static bool spec_this_step(const sched *s, const slot *sl)
{
    if (!sl->spec)
        return false;
    if (sl->r->speculative.mode != TW_SPEC_AUTO)
        return true;
    for (uint32_t i = 0; i < s->n_slots; i++) {
        const slot *o = &s->slots[i];
        if (o != sl && o->state == SLOT_DECODE && o->m == sl->m)
            return false;
    }
    return true;
}

/* One decode step per model over all its decoding slots: plain slots add
 * a row each, speculating slots their t0 and proposals, and one pass
 * (tw_model_verify_batch) computes them all, reading each weight once. A
 * pass that carries proposals stays within TW_MATMUL_EXACT_ROWS rows, where
 * every row's logits are bit-identical to decoding it alone; slots that do
 * not fit go in a further pass. */
void sched_decode_step(tw_engine *e, sched *s)
{
    size_t total = 0;
    for (uint32_t i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->state != SLOT_DECODE)
            continue;
        sl->spec_rows = 1;
        size_t exact = tw_model_max_verify(sl->m->model);
        if (exact > TW_MATMUL_EXACT_ROWS)
            exact = TW_MATMUL_EXACT_ROWS;
        if (spec_this_step(s, sl) && !spec_propose(s, sl, exact))
            continue;
        s->pending[total++] = sl;
    }
    for (size_t first = 0; first < total; first++) {
        if (!s->pending[first])
            continue;
        model_entry *m = s->pending[first]->m;
        size_t cap_all = tw_model_max_verify(m->model);
        size_t cap_exact = cap_all < TW_MATMUL_EXACT_ROWS ? cap_all : TW_MATMUL_EXACT_ROWS;
        size_t n = 0, rows = 0;
        bool spec = false;
        for (size_t j = first; j < total; j++) {
            slot *sl = s->pending[j];
            if (!sl || sl->m != m)
                continue;
            size_t r = sl->spec_rows;
            if (rows + r > ((spec || r > 1) ? cap_exact : cap_all))
                continue; /* the next pass takes it */
            s->pending[j] = NULL;
            s->batch_slots[n] = sl;
            s->batch_seqs[n] = sl->seq;
            s->batch_rows[n] = r;
            s->batch_trails[n] = NULL;
            if (r > 1) {
                const uint32_t *toks;
                size_t nr;
                tw_err err;
                if (tw_spec_round_rows(sl->spec, &toks, &nr, &s->batch_trails[n], &err) ||
                    nr != r) {
                    sched_slot_fail(sl, TW_INTERNAL, "speculative round lost its rows");
                    continue;
                }
                memcpy(s->batch_tokens + rows, toks, r * sizeof *toks);
                spec = true;
            } else {
                s->batch_tokens[rows] = sl->next_token;
            }
            rows += r;
            n++;
        }
        if (n == 0)
            continue;
        tw_err err;
        uint64_t t0 = tw_now_us();
        tw_status st = spec ? tw_model_verify_batch(m->model, s->pool, n, s->batch_seqs,
                                                    s->batch_tokens, s->batch_rows,
                                                    s->batch_trails, m->logits, &err)
                            : tw_model_decode_batch(m->model, s->pool, s->batch_seqs,
                                                    s->batch_tokens, n, m->logits, &err);
        uint64_t dt = tw_now_us() - t0;
        size_t row = 0, plain = 0, n_masked = 0;
        for (size_t k = 0; k < n && st == TW_OK; k++) {
            slot *sl = s->batch_slots[k];
            if (s->batch_rows[k] == 1 && json_masked(sl)) {
                s->mask_slots[n_masked] = sl;
                s->mask_rows[n_masked++] = m->logits + row * (size_t)m->vocab;
            }
            row += s->batch_rows[k];
        }
        mask_ahead(s, s->mask_slots, s->mask_rows, n_masked);
        row = 0;
        for (size_t k = 0; k < n; k++) {
            slot *sl = s->batch_slots[k];
            float *base = m->logits + row * (size_t)m->vocab;
            size_t r = s->batch_rows[k];
            row += r;
            if (st != TW_OK) {
                sched_slot_fail(sl, st, err.msg);
                continue;
            }
            if (r > 1) {
                spec_settle(e, sl, base);
                continue;
            }
            plain++;
            sl->decode_us += dt;
            if (sl->spec) {
                uint32_t tok = sl->next_token;
                tw_spec_push(sl->spec, &tok, 1);
                tw_spec_plain_time(sl->spec, dt);
            }
            next_token(e, sl, base);
            sl->mask_ready = false;
        }
        count_rate(e, plain, 0);
    }
}

