/* The scheduler thread: continuous batching over every loaded model.
 *
 * Each iteration (1) admits queued requests while free slots remain (one
 * slot per choice), (2) ends slots that were cancelled, ran past their
 * deadline or lost their model, (3) prefills one chunk of one waiting
 * prompt, (4) runs one decode step per model over all of that model's
 * decoding slots, speculating ones with their proposals in the same pass,
 * and (5) hands each slot's new output to its callback.
 * Prefill chunks are bounded, so a long prompt delays running streams by one
 * chunk per step rather than by its whole length.
 *
 * Per token, a slot runs: EOS / stop-id check, the thinking controller (role
 * of the token, budget and loop closes), the streaming detokenizer, and for
 * answer text the stop-string hold-back; then max_tokens, max_total_tokens
 * and the context limit. None of this allocates except when a chunk's text outgrows its
 * buffer (it grows once and stays).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "tw/log.h"
#include "tw/kernels.h"
#include "tw/spec.h"

typedef enum slot_state {
    SLOT_FREE = 0,
    SLOT_PREFILL,
    SLOT_DECODE,
    SLOT_DONE, /* finished; its last chunk is still to be sent */
} slot_state;

typedef struct text_buf {
    char *p;
    size_t len, cap;
} text_buf;

typedef struct slot {
    slot_state state;
    request *r;
    uint32_t index;
    model_entry *m;
    tw_seq *seq;
    engine_cache_slot cache; /* what the prefill restores and caches */
    tw_sampler *sampler;
    tw_stop *stop;
    tw_thinking *think; /* NULL: the model has no think tags */
    tw_detok *detok;    /* NULL: no tokenizer */
    tw_spec *spec;      /* NULL: no speculative decoding */
    size_t spec_rows;   /* rows this decode step: 1, or t0 + proposals */
    uint64_t spec_t0;   /* when this step's round began */

    size_t prefilled;
    uint32_t next_token; /* committed, to be fed by the next decode step */
    bool close_pending;  /* a forced </think> comes next */
    const uint32_t *forced; /* then these transition tokens */
    size_t n_forced, forced_pos;

    uint32_t n_answer, n_completion, n_reasoning;
    bool got_first;
    uint64_t prefill_us, decode_us, ttft_us;
    tw_force_close forced_by;
    tw_transition_kind transition;
    tw_finish_reason finish;
    const char *matched;
    tw_status error;
    char error_msg[TW_ERR_MSG_MAX];

    /* What the next chunk carries: up to one speculative round's tokens
     * plus a forced one. */
    uint32_t ids[TW_SPEC_MAX_DRAFT + 2];
    tw_token_logprob lps[TW_SPEC_MAX_DRAFT + 2];
    size_t n_ids;
    text_buf text, reasoning;
} slot;

typedef struct sched {
    tw_pool *pool;
    slot *slots;
    uint32_t n_slots;
    tw_seq **batch_seqs;
    uint32_t *batch_tokens; /* one per row */
    size_t *batch_rows;     /* per sequence */
    tw_snapshot_pool **batch_trails;
    slot **batch_slots;
    slot **pending;
    request **starting, **ending;
    uint32_t n_starting, n_ending, cap_ending;
} sched;

/* ------------------------------------------------------------------ setup */

tw_status sched_create(tw_engine *e, tw_err *err)
{
    sched *s = calloc(1, sizeof *s);
    if (!s)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "scheduler: out of memory");
    e->sched = s;
    s->n_slots = e->opts.max_batch;
    s->slots = calloc(s->n_slots, sizeof *s->slots);
    s->batch_seqs = calloc(s->n_slots, sizeof *s->batch_seqs);
    s->batch_tokens = calloc(s->n_slots, sizeof *s->batch_tokens);
    s->batch_slots = calloc(s->n_slots, sizeof *s->batch_slots);
    s->batch_rows = calloc(s->n_slots, sizeof *s->batch_rows);
    s->batch_trails = calloc(s->n_slots, sizeof *s->batch_trails);
    s->cap_ending = e->opts.max_queue;
    s->pending = calloc(s->n_slots, sizeof *s->pending);
    s->starting = calloc(s->n_slots, sizeof *s->starting);
    s->ending = calloc(s->cap_ending, sizeof *s->ending);
    if (!s->slots || !s->batch_seqs || !s->batch_tokens || !s->batch_slots || !s->batch_rows ||
        !s->batch_trails || !s->starting || !s->ending || !s->pending)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "scheduler: out of memory");
    return tw_pool_create((int)e->opts.threads, &s->pool, err);
}

void sched_destroy(tw_engine *e)
{
    sched *s = e->sched;
    if (!s)
        return;
    tw_pool_destroy(s->pool);
    for (uint32_t i = 0; s->slots && i < s->n_slots; i++) {
        free(s->slots[i].text.p);
        free(s->slots[i].reasoning.p);
    }
    free(s->slots);
    free(s->batch_seqs);
    free(s->batch_tokens);
    free(s->batch_slots);
    free(s->batch_rows);
    free(s->batch_trails);
    free(s->starting);
    free(s->ending);
    free(s->pending);
    free(s);
    e->sched = NULL;
}

void sched_release_model(model_entry *m)
{
    for (size_t i = 0; i < m->n_free_seqs; i++)
        tw_seq_free(m->free_seqs[i]);
    free(m->free_seqs);
    m->free_seqs = NULL;
    m->n_free_seqs = 0;
    free(m->logits);
    m->logits = NULL;
}

static bool buf_append(text_buf *b, const char *p, size_t n)
{
    if (n == 0)
        return true;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np)
            return false;
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    return true;
}

static tw_status slot_setup(tw_engine *e, slot *sl, request *r, uint32_t index, tw_err *err)
{
    model_entry *m = r->m;
    sl->r = r;
    sl->index = index;
    sl->m = m;
    sl->state = SLOT_PREFILL;
    sl->prefilled = 0;
    sl->cache.reused = 0;
    sl->close_pending = false;
    sl->forced = NULL;
    sl->n_forced = sl->forced_pos = 0;
    sl->n_answer = sl->n_completion = sl->n_reasoning = 0;
    sl->got_first = false;
    sl->prefill_us = sl->decode_us = sl->ttft_us = 0;
    sl->forced_by = TW_FORCE_NONE;
    sl->transition = TW_TRANSITION_PLAIN;
    sl->finish = TW_FINISH_NONE;
    sl->matched = NULL;
    sl->error = TW_OK;
    sl->error_msg[0] = 0;
    sl->n_ids = 0;
    sl->text.len = sl->reasoning.len = 0;
    (void)e;

    tw_status st = admission_seq_take(e, r, &sl->seq, err); /* sized by the request */
    if (st == TW_OK)
        sl->prefilled = engine_cache_admit(m->cache, &sl->cache, sl->seq, r->prompt, r->n_prompt,
                                           r->cache_mode, r->cache_persist);
    if (st == TW_OK)
        st = tw_sampler_create(m->vocab, &sl->sampler, err);
    if (st == TW_OK)
        st = tw_sampler_configure(sl->sampler, &r->sampling, r->seed + index, err);
    if (st == TW_OK)
        st = tw_stop_create(&r->stop, m->eos, m->n_eos, &sl->stop, err);
    if (st == TW_OK && m->think_open != TW_TOKEN_NONE) {
        uint32_t bound = m->max_context;
        st = tw_thinking_create(&r->thinking, m->think_open, m->think_close, bound, &sl->think,
                                err);
        if (st == TW_OK)
            tw_thinking_reset(sl->think, tw_thinking_prompt_state(r->prompt, r->n_prompt,
                                                                  m->think_open, m->think_close));
    }
    if (st == TW_OK && m->tok)
        st = tw_detok_new(m->tok, 0, &sl->detok, err);
    if (st == TW_OK)
        tw_sampler_accept(sl->sampler, r->prompt, r->n_prompt, false);
    if (st == TW_OK)
        st = engine_spec_for_slot(r, tw_seq_capacity(sl->seq), r->seed + index, &sl->spec, err);
    return st;
}

/* Releases everything a slot holds except its text buffers (kept for the
 * next request). */
static void slot_clear(tw_engine *e, slot *sl)
{
    admission_slot_end(e, sl->r, sl->m, sl->seq); /* its share, and the sequence */
    sl->seq = NULL;
    tw_sampler_destroy(sl->sampler);
    tw_stop_destroy(sl->stop);
    tw_thinking_destroy(sl->think);
    tw_detok_free(sl->detok);
    tw_spec_free(sl->spec);
    sl->spec = NULL;
    sl->sampler = NULL;
    sl->stop = NULL;
    sl->think = NULL;
    sl->detok = NULL;
    sl->r = NULL;
    sl->m = NULL;
    sl->state = SLOT_FREE;
}

/* ------------------------------------------------------------ per token */

static void slot_finish(slot *sl, tw_finish_reason why)
{
    if (sl->finish == TW_FINISH_NONE)
        sl->finish = why;
    sl->state = SLOT_DONE;
}

static void slot_fail(slot *sl, tw_status st, const char *msg)
{
    if (sl->finish == TW_FINISH_NONE) {
        sl->error = st;
        snprintf(sl->error_msg, sizeof sl->error_msg, "%s", msg);
    }
    slot_finish(sl, TW_FINISH_ERROR);
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
        slot_fail(sl, TW_RESOURCE_EXHAUSTED, "out of memory for answer text");
        return;
    }
    if (!buf_append(&sl->text, emit, len))
        slot_fail(sl, TW_RESOURCE_EXHAUSTED, "out of memory for answer text");
    else if (res == TW_STOP_MATCHED)
        slot_finish(sl, TW_FINISH_STOP_STRING);
}

static void push_text(slot *sl, bool reasoning, const char *p, size_t n)
{
    if (reasoning && sl->r->thinking.separate_reasoning) {
        if (!buf_append(&sl->reasoning, p, n))
            slot_fail(sl, TW_RESOURCE_EXHAUSTED, "out of memory for reasoning text");
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

/* Adds a committed token (sampled or forced) to the output and runs the
 * rules that follow it. */
static void commit(tw_engine *e, slot *sl, uint32_t token, const tw_sample_result *res)
{
    (void)e;
    request *r = sl->r;
    if (res && tw_stop_token(sl->stop, token, sl->n_answer, NULL)) {
        slot_finish(sl, TW_FINISH_STOP);
        return;
    }
    tw_force_close force = TW_FORCE_NONE;
    tw_token_role role = sl->think ? tw_thinking_step(sl->think, token, &force) : TW_ROLE_CONTENT;

    size_t k = sl->n_ids++;
    sl->ids[k] = token;
    if (r->logprobs.enabled || r->logprobs.top_logprobs) {
        tw_token_logprob *lp = &sl->lps[k];
        lp->token_id = token;
        lp->logprob = res ? res->logprob : 0.0f;
        lp->n_top = res ? res->n_top : 0;
        if (res && res->n_top)
            memcpy(lp->top, res->top, res->n_top * sizeof lp->top[0]);
        lp->text = sl->m->tok ? tw_tokenizer_token_bytes(sl->m->tok, token, &lp->text_len) : NULL;
        if (!lp->text)
            lp->text_len = 0;
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
            slot_fail(sl, TW_INTERNAL, err.msg);
        else
            push_text(sl, role == TW_ROLE_REASONING, p, n);
    }
    if (sl->finish != TW_FINISH_NONE)
        return;

    if (force != TW_FORCE_NONE) {
        sl->forced_by = force;
        sl->transition = force == TW_FORCE_LOOP ? r->kind : TW_TRANSITION_PLAIN;
        sl->close_pending = true;
        sl->forced = sl->m->transition[sl->transition];
        sl->n_forced = sl->m->n_transition[sl->transition];
        sl->forced_pos = 0;
    }
    if ((role == TW_ROLE_CONTENT && r->stop.max_tokens && sl->n_answer >= r->stop.max_tokens) ||
        (r->stop.max_total_tokens && sl->n_completion >= r->stop.max_total_tokens)) {
        slot_finish(sl, TW_FINISH_LENGTH);
        return;
    }
    if (tw_seq_len(sl->seq) + 1 > tw_seq_capacity(sl->seq)) {
        slot_finish(sl, TW_FINISH_CONTEXT_LENGTH);
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
    }
    if (sl->close_pending) {
        sl->close_pending = false;
        commit(e, sl, sl->m->think_close, NULL);
        return;
    }
    if (sl->forced_pos < sl->n_forced) {
        commit(e, sl, sl->forced[sl->forced_pos++], NULL);
        return;
    }
    if (tw_stop_suppress_eos(sl->stop, sl->n_answer))
        for (size_t i = 0; i < sl->m->n_eos; i++)
            row[sl->m->eos[i]] = -INFINITY;
    request *r = sl->r;
    tw_sample_result res;
    bool want = r->logprobs.enabled || r->logprobs.top_logprobs;
    tw_sampler_sample(sl->sampler, row, want, r->logprobs.top_logprobs, &res);
    commit(e, sl, res.token, &res);
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

/* One prefill chunk for the oldest slot still reading its prompt. */
static void prefill_step(tw_engine *e, sched *s)
{
    slot *sl = NULL;
    for (uint32_t i = 0; i < s->n_slots; i++) {
        slot *c = &s->slots[i];
        if (c->state == SLOT_PREFILL &&
            (!sl || c->r->id < sl->r->id || (c->r->id == sl->r->id && c->index < sl->index)))
            sl = c;
    }
    if (!sl)
        return;
    request *r = sl->r;
    size_t n = engine_cache_chunk_end(sl->m->cache, &sl->cache, sl->prefilled, r->n_prompt,
                                      e->opts.prefill_chunk) -
               sl->prefilled;
    bool last = sl->prefilled + n == r->n_prompt;
    tw_err err;
    uint64_t t0 = tw_now_us();
    tw_status st = tw_model_forward(sl->m->model, s->pool, sl->seq, r->prompt + sl->prefilled, n,
                                    last ? sl->m->logits : NULL,
                                    last ? TW_LOGITS_LAST : TW_LOGITS_NONE, &err);
    sl->prefill_us += tw_now_us() - t0;
    count_rate(e, 0, n);
    if (st != TW_OK) {
        slot_fail(sl, st, err.msg);
        return;
    }
    sl->prefilled += n;
    engine_cache_after_chunk(sl->m->cache, &sl->cache, sl->seq, r->prompt);
    if (last)
        next_token(e, sl, sl->m->logits);
}

/* Next token of verified row i under rejection sampling (sampled requests;
 * greedy ones go through next_token, exactly as without speculation). */
static void spec_next_token(tw_engine *e, slot *sl, size_t i, float *row)
{
    if (tw_stop_suppress_eos(sl->stop, sl->n_answer))
        for (size_t j = 0; j < sl->m->n_eos; j++)
            row[sl->m->eos[j]] = -INFINITY;
    bool accepted;
    tw_sample_result res = {0};
    res.token = tw_spec_choose(sl->spec, sl->sampler, i, row, &accepted);
    commit(e, sl, res.token, &res);
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
        slot_fail(sl, st, err.msg);
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
        slot_fail(sl, st, err.msg);
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
        slot_fail(sl, st, err.msg);
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
static void decode_step(tw_engine *e, sched *s)
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
                    slot_fail(sl, TW_INTERNAL, "speculative round lost its rows");
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
        size_t row = 0, plain = 0;
        for (size_t k = 0; k < n; k++) {
            slot *sl = s->batch_slots[k];
            float *base = m->logits + row * (size_t)m->vocab;
            size_t r = s->batch_rows[k];
            row += r;
            if (st != TW_OK) {
                slot_fail(sl, st, err.msg);
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
        }
        count_rate(e, plain, 0);
    }
}

/* ------------------------------------------------------------ output */

static void add_usage(request *r, const slot *sl)
{
    tw_usage *u = &r->usage;
    u->prompt_tokens = (uint32_t)r->n_prompt;
    if (sl->cache.reused > u->cached_prompt_tokens)
        u->cached_prompt_tokens = (uint32_t)sl->cache.reused;
    u->completion_tokens += sl->n_completion;
    u->reasoning_tokens += sl->n_reasoning;
    if (sl->got_first && (u->time_to_first_token_us == 0 || sl->ttft_us < u->time_to_first_token_us))
        u->time_to_first_token_us = sl->ttft_us;
    u->prefill_us += sl->prefill_us;
    u->decode_us += sl->decode_us;
}

/* Removes a request whose every choice has ended from the running list and
 * records its counters. */
static void retire(tw_engine *e, request *r, const model_stats *delta)
{
    admission_request_end(e, r);
    pthread_mutex_lock(&e->lock);
    request **pp = &e->running;
    while (*pp && *pp != r)
        pp = &(*pp)->next;
    if (*pp) {
        *pp = r->next;
        e->n_running--;
    }
    model_stats *ms = &r->m->stats;
    ms->generated_tokens += r->usage.completion_tokens;
    if (r->failed)
        ms->requests_failed++;
    ms->budget_closes += delta->budget_closes;
    ms->loop_closes += delta->loop_closes;
    for (int k = 0; k < TW_TRANSITION_COUNT; k++)
        ms->transitions[k] += delta->transitions[k];
    pthread_mutex_unlock(&e->lock);
}

/* Releases the text still held (partial UTF-8 in the detokenizer, a
 * possible stop-string prefix) once nothing can follow it. A stop string
 * completed by the flushed bytes still cuts the text. */
static void final_flush(slot *sl)
{
    const char *p, *out;
    size_t n, len;
    if (sl->detok) {
        tw_detok_flush(sl->detok, &p, &n);
        if (sl->think && tw_thinking_inside(sl->think) && sl->r->thinking.separate_reasoning) {
            buf_append(&sl->reasoning, p, n);
        } else if (tw_stop_feed(sl->stop, p, n, &out, &len, &sl->matched) == TW_STOP_MATCHED) {
            buf_append(&sl->text, out, len);
            return;
        } else {
            buf_append(&sl->text, out, len);
        }
    }
    tw_stop_flush(sl->stop, &p, &n);
    buf_append(&sl->text, p, n);
}

/* Sends what a slot produced this step; a finished slot also sends its end
 * (and the request's end when it is the last choice) and is released. */
static void emit(tw_engine *e, slot *sl)
{
    bool done = sl->state == SLOT_DONE;
    if (done && sl->finish != TW_FINISH_STOP_STRING && sl->finish != TW_FINISH_ERROR)
        final_flush(sl);
    if (!done && sl->n_ids == 0 && sl->text.len == 0 && sl->reasoning.len == 0)
        return;
    request *r = sl->r;
    tw_gen_chunk c = {0};
    c.req_id = r->id;
    c.index = sl->index;
    c.token_ids = sl->ids;
    c.n_token_ids = sl->n_ids;
    c.logprobs = (r->logprobs.enabled || r->logprobs.top_logprobs) && sl->n_ids ? sl->lps : NULL;
    c.text_delta = sl->text.len ? sl->text.p : "";
    c.text_len = sl->text.len;
    c.reasoning_delta = sl->reasoning.len ? sl->reasoning.p : "";
    c.reasoning_len = sl->reasoning.len;
    c.error = TW_OK;
    c.error_msg = "";
    model_stats delta = {0};
    if (done) {
        c.finish_reason = sl->finish;
        c.matched_stop = sl->finish == TW_FINISH_STOP_STRING ? sl->matched : NULL;
        c.forced_by = sl->forced_by;
        c.thinking_forced_close = sl->forced_by != TW_FORCE_NONE;
        c.transition = sl->transition;
        if (sl->forced_by == TW_FORCE_BUDGET)
            delta.budget_closes++;
        if (sl->forced_by == TW_FORCE_LOOP)
            delta.loop_closes++;
        if (sl->forced_by != TW_FORCE_NONE)
            delta.transitions[sl->transition]++;
        if (sl->error != TW_OK && !r->failed) {
            r->failed = true;
            r->error = sl->error;
            snprintf(r->error_msg, sizeof r->error_msg, "%s", sl->error_msg);
        }
        add_usage(r, sl);
        if (sl->spec) {
            engine_spec_usage(sl->spec, &r->usage);
            engine_spec_remember(sl->spec, sl->m);
            pthread_mutex_lock(&e->lock);
            engine_spec_stats(sl->spec, &sl->m->stats);
            pthread_mutex_unlock(&e->lock);
        }
        r->running_choices--;
        if (r->running_choices == 0) {
            c.final = true;
            c.usage = &r->usage;
            c.error = r->failed ? r->error : TW_OK;
            c.error_msg = r->failed ? r->error_msg : "";
        }
    }
    r->cb.on_chunk(r->user, &c);
    sl->n_ids = 0;
    sl->text.len = 0;
    sl->reasoning.len = 0;
    if (!done)
        return;
    bool last = c.final;
    model_entry *m = sl->m;
    slot_clear(e, sl);
    if (last) {
        retire(e, r, &delta);
        request_free(r);
        engine_model_unref(e, m);
    } else if (delta.budget_closes || delta.loop_closes) {
        pthread_mutex_lock(&e->lock);
        m->stats.budget_closes += delta.budget_closes;
        m->stats.loop_closes += delta.loop_closes;
        for (int k = 0; k < TW_TRANSITION_COUNT; k++)
            m->stats.transitions[k] += delta.transitions[k];
        pthread_mutex_unlock(&e->lock);
    }
}

/* A request that never got slots: one ending chunk per choice. */
static void end_unstarted(tw_engine *e, request *r, tw_finish_reason why, tw_status st,
                          const char *msg)
{
    r->usage.prompt_tokens = (uint32_t)r->n_prompt;
    for (uint32_t i = 0; i < r->n; i++) {
        tw_gen_chunk c = {0};
        c.req_id = r->id;
        c.index = i;
        c.text_delta = "";
        c.reasoning_delta = "";
        c.finish_reason = why;
        c.error = TW_OK;
        c.error_msg = "";
        if (i + 1 == r->n) {
            c.final = true;
            c.usage = &r->usage;
            c.error = st;
            c.error_msg = msg ? msg : "";
        }
        r->cb.on_chunk(r->user, &c);
    }
    r->failed = st != TW_OK;
    model_stats none = {0};
    model_entry *m = r->m;
    retire(e, r, &none);
    request_free(r);
    engine_model_unref(e, m);
}

/* ------------------------------------------------------------ the loop */

static uint32_t free_slots(const sched *s)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n_slots; i++)
        n += s->slots[i].state == SLOT_FREE;
    return n;
}

static bool any_active(const sched *s)
{
    for (uint32_t i = 0; i < s->n_slots; i++)
        if (s->slots[i].state != SLOT_FREE)
            return true;
    return false;
}

static tw_finish_reason ended_why(const request *r, uint64_t now_ms)
{
    if (atomic_load(&r->cancel) || r->m->unloaded)
        return TW_FINISH_CANCELLED;
    if (r->deadline_unix_ms && now_ms >= r->deadline_unix_ms)
        return TW_FINISH_DEADLINE;
    return TW_FINISH_NONE;
}

/* Takes what can start from the queue, and what ended while waiting, into
 * s->starting / s->ending. Both move to the running list, so tw_engine_cancel
 * still finds them until their last chunk. Caller holds e->lock. */
static void take_from_queue(tw_engine *e, sched *s)
{
    uint32_t avail = free_slots(s);
    uint64_t now_ms = tw_now_unix_ms();
    s->n_starting = s->n_ending = 0;
    request **pp = &e->queue_head;
    request *prev = NULL;
    bool blocked = false; /* FIFO: nothing overtakes a request that does not fit */
    while (*pp) {
        request *r = *pp;
        bool end = ended_why(r, now_ms) != TW_FINISH_NONE;
        bool go = !end && !blocked && r->n <= avail;
        if (go) { /* and memory for its sequences (admission.h) */
            admit_verdict v = admission_try(e, r);
            go = v == ADMIT_GO;
            end = v == ADMIT_NEVER;
        }
        if ((!end && !go) || (end && s->n_ending == s->cap_ending)) {
            blocked = true;
            prev = r;
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        if (e->queue_tail == r)
            e->queue_tail = prev;
        e->n_queued--;
        r->next = e->running;
        e->running = r;
        e->n_running++;
        if (go) {
            avail -= r->n;
            r->running_choices = r->n;
            s->starting[s->n_starting++] = r;
        } else {
            s->ending[s->n_ending++] = r;
        }
    }
}

static void start_request(tw_engine *e, sched *s, request *r)
{
    uint32_t placed = 0;
    tw_err err;
    tw_status st = TW_OK;
    for (uint32_t i = 0; i < s->n_slots && placed < r->n; i++) {
        slot *sl = &s->slots[i];
        if (sl->state != SLOT_FREE)
            continue;
        st = slot_setup(e, sl, r, placed++, &err);
        if (st != TW_OK) {
            slot_fail(sl, st, err.msg);
            break;
        }
    }
    /* Choices that could not be set up end at once; the emit pass sends
     * their chunks with the others. */
    for (uint32_t i = 0; i < s->n_slots; i++)
        if (s->slots[i].r == r && st != TW_OK)
            slot_fail(&s->slots[i], st, err.msg);
    r->running_choices = placed;
}

/* Ends slots whose request was cancelled, timed out or lost its model. */
static void check_ends(sched *s)
{
    uint64_t now_ms = tw_now_unix_ms();
    for (uint32_t i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->state != SLOT_PREFILL && sl->state != SLOT_DECODE)
            continue;
        tw_finish_reason why = ended_why(sl->r, now_ms);
        if (why != TW_FINISH_NONE)
            slot_finish(sl, why);
    }
}

static void emit_all(tw_engine *e, sched *s)
{
    for (uint32_t i = 0; i < s->n_slots; i++)
        if (s->slots[i].state != SLOT_FREE)
            emit(e, &s->slots[i]);
}

void *sched_main(void *arg)
{
    tw_engine *e = arg;
    sched *s = e->sched;
    for (;;) {
        pthread_mutex_lock(&e->lock);
        while (!e->shutdown && !any_active(s) && !e->queue_head)
            pthread_cond_wait(&e->wake, &e->lock);
        bool stop = e->shutdown;
        if (!stop)
            take_from_queue(e, s);
        pthread_mutex_unlock(&e->lock);
        if (stop)
            break;
        for (uint32_t i = 0; i < s->n_ending; i++) {
            request *r = s->ending[i];
            tw_finish_reason why = ended_why(r, tw_now_unix_ms());
            if (why == TW_FINISH_NONE && r->failed) /* refused by admission */
                end_unstarted(e, r, TW_FINISH_ERROR, r->error, r->error_msg);
            else
                end_unstarted(e, r, why == TW_FINISH_NONE ? TW_FINISH_CANCELLED : why, TW_OK,
                              NULL);
        }
        for (uint32_t i = 0; i < s->n_starting; i++)
            start_request(e, s, s->starting[i]);
        check_ends(s);
        prefill_step(e, s);
        decode_step(e, s);
        emit_all(e, s);
        /* An idle engine sleeps in the wait at the top: a queued request
         * always fits once every slot is free (n <= max_n <= max_batch). */
    }
    /* Shutdown: every request still here ends as cancelled. */
    for (uint32_t i = 0; i < s->n_slots; i++)
        if (s->slots[i].state == SLOT_PREFILL || s->slots[i].state == SLOT_DECODE)
            slot_finish(&s->slots[i], TW_FINISH_CANCELLED);
    emit_all(e, s);
    for (;;) {
        pthread_mutex_lock(&e->lock);
        request *r = e->queue_head;
        if (r) {
            e->queue_head = r->next;
            if (!e->queue_head)
                e->queue_tail = NULL;
            e->n_queued--;
            r->next = e->running;
            e->running = r;
            e->n_running++;
        }
        pthread_mutex_unlock(&e->lock);
        if (!r)
            break;
        end_unstarted(e, r, TW_FINISH_CANCELLED, TW_OK, NULL);
    }
    return NULL;
}
