/* The scheduler thread: continuous batching over every loaded model.
 *
 * Each iteration (1) admits queued requests while free slots remain (one
 * slot per choice), (2) ends slots that were cancelled, ran past their
 * deadline or lost their model, (3) prefills, first, younger prompts that
 * can be read to their end within a quarter of prefill_chunk, then the
 * next chunk of the oldest waiting prompt and of as many younger ones as
 * fit beside it within prefill_chunk tokens, (4) runs one decode step per
 * model over all of that model's decoding slots, speculating ones with
 * their proposals in the same pass, and (5) hands each slot's new output
 * to its callback.
 * Prefill is bounded per step, so a long prompt delays running streams by
 * a chunk and a quarter per step rather than by its whole length, short
 * prompts that arrive together start together, and a short prompt does
 * not wait behind a long one.
 *
 * Per token, a slot runs (sched_step.c): EOS / stop-id check, the thinking
 * controller (role of the token, budget and loop closes), the streaming
 * detokenizer, and for answer text the stop-string hold-back; then
 * max_tokens, max_total_tokens and the context limit. None of this
 * allocates except when a chunk's text outgrows its buffer (it grows once
 * and stays).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_internal.h"
#include "tw/kernels.h"
#include "tw/log.h"

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
    s->mask_slots = calloc(s->n_slots, sizeof *s->mask_slots);
    s->mask_rows = calloc(s->n_slots, sizeof *s->mask_rows);
    s->batch_rows = calloc(s->n_slots, sizeof *s->batch_rows);
    s->batch_trails = calloc(s->n_slots, sizeof *s->batch_trails);
    s->cap_ending = e->opts.max_queue;
    s->pending = calloc(s->n_slots, sizeof *s->pending);
    s->starting = calloc(s->n_slots, sizeof *s->starting);
    s->ending = calloc(s->cap_ending, sizeof *s->ending);
    if (!s->slots || !s->batch_seqs || !s->batch_tokens || !s->batch_slots || !s->mask_slots ||
        !s->mask_rows || !s->batch_rows || !s->batch_trails || !s->starting || !s->ending ||
        !s->pending)
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
    free(s->mask_slots);
    free(s->mask_rows);
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

bool sched_buf_append(text_buf *b, const char *p, size_t n)
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

/* An embedding's vector, and with mean pooling what sums it; an encoder
 * takes every row of its prompt at once. */
static tw_status embed_buffers(slot *sl, tw_err *err)
{
    const tw_model_info *in = tw_model_get_info(sl->m->model);
    const size_t H = in->hidden;
    const bool mean = sl->r->embed.pooling == TW_POOLING_MEAN;
    const size_t rows = in->encoder ? sl->r->n_prompt : mean ? (size_t)TW_PREFILL_GROUP : 0;
    sl->embed = malloc(H * sizeof *sl->embed);
    if (sl->embed && rows)
        sl->embed_rows = malloc(rows * H * sizeof *sl->embed_rows);
    if (sl->embed && mean)
        sl->embed_sum = calloc(H, sizeof *sl->embed_sum);
    if (!sl->embed || (rows && !sl->embed_rows) || (mean && !sl->embed_sum))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "embedding: out of memory");
    return TW_OK;
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
    sl->mask_ready = false;
    sl->prompt_lps_sent = false;
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
    if (st == TW_OK && r->prompt_lps && index == 0) {
        sl->prompt_logits = malloc((size_t)TW_PREFILL_GROUP * m->vocab * sizeof(float));
        if (!sl->prompt_logits)
            st = tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                           "prompt log-probabilities: out of memory for %d rows of logits",
                           TW_PREFILL_GROUP);
    }
    if (st == TW_OK && r->embed.pooling != TW_POOLING_NONE)
        st = embed_buffers(sl, err);
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
    if (st == TW_OK && (r->json || r->calls)) {
        sl->json = malloc(sizeof *sl->json);
        st = sl->json ? tw_json_masker_create(m->json_vocab, &sl->jmask, err)
                      : tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory for a JSON answer");
        if (st == TW_OK && r->json)
            tw_json_state_init(sl->json, r->json);
        sl->json_on = r->json != NULL;
        sl->in_call = sl->decided = sl->trig_off = false;
        sl->trig_at = r->trig_start;
        /* the prompt opened a call (a whole one stays behind it) */
        if (st == TW_OK && r->calls && r->trig_start == strlen(r->trigger.text) &&
            sched_json_open(sl, r->trig_after, r->n_trig_after) && tw_json_state_closed(sl->json))
            sl->json_on = sl->in_call = false;
    }
    if (st == TW_OK && r->either) {
        sl->call = malloc(sizeof *sl->call);
        sl->allowed = malloc(m->vocab);
        sl->allowed_call = malloc(m->vocab);
        if (!sl->call || !sl->allowed || !sl->allowed_call)
            st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory for a JSON answer");
        else
            tw_json_state_init(sl->call, r->calls);
    }
    if (r->ban_calls)
        sl->trig_at = r->trig_start;
    return st;
}

/* Releases everything a slot holds except its text buffers (kept for the
 * next request). */
static void slot_clear(tw_engine *e, slot *sl)
{
    admission_slot_end(e, sl->r, sl->m, sl->seq); /* its share, and the sequence */
    sl->seq = NULL;
    free(sl->prompt_logits);
    sl->prompt_logits = NULL;
    free(sl->embed);
    free(sl->embed_rows);
    free(sl->embed_sum);
    sl->embed = sl->embed_rows = NULL;
    sl->embed_sum = NULL;
    tw_sampler_destroy(sl->sampler);
    tw_stop_destroy(sl->stop);
    tw_thinking_destroy(sl->think);
    tw_detok_free(sl->detok);
    tw_spec_free(sl->spec);
    sl->spec = NULL;
    free(sl->json);
    sl->json = NULL;
    free(sl->call);
    free(sl->allowed);
    free(sl->allowed_call);
    sl->call = NULL;
    sl->allowed = sl->allowed_call = NULL;
    tw_json_masker_destroy(sl->jmask);
    sl->jmask = NULL;
    sl->sampler = NULL;
    sl->stop = NULL;
    sl->think = NULL;
    sl->detok = NULL;
    sl->r = NULL;
    sl->m = NULL;
    sl->state = SLOT_FREE;
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

/* Records the counters of a request whose every choice has ended; before
 * its final chunk goes out, so stats asked after that chunk include it. */
static void record_end(tw_engine *e, const request *r, const model_stats *delta)
{
    pthread_mutex_lock(&e->lock);
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

/* Removes a request whose every choice has ended from the running list. */
static void retire(tw_engine *e, request *r)
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
            sched_buf_append(&sl->reasoning, p, n);
        } else if (tw_stop_feed(sl->stop, p, n, &out, &len, &sl->matched) == TW_STOP_MATCHED) {
            sched_buf_append(&sl->text, out, len);
            return;
        } else {
            sched_buf_append(&sl->text, out, len);
        }
    }
    tw_stop_flush(sl->stop, &p, &n);
    sched_buf_append(&sl->text, p, n);
}

/* Sends what a slot produced this step; a finished slot also sends its end
 * (and the request's end when it is the last choice) and is released. */
void sched_emit(tw_engine *e, slot *sl)
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
    /* every choice's first chunk: a caller that shapes each choice on its
     * own (echo on a stream) finds them there */
    if (r->prompt_lps_ready && !sl->prompt_lps_sent) {
        c.prompt_logprobs = r->prompt_lps;
        c.n_prompt_logprobs = r->n_prompt;
        sl->prompt_lps_sent = true;
    }
    c.text_delta = sl->text.len ? sl->text.p : "";
    c.text_len = sl->text.len;
    c.reasoning_delta = sl->reasoning.len ? sl->reasoning.p : "";
    c.reasoning_len = sl->reasoning.len;
    c.error = TW_OK;
    c.error_msg = "";
    model_stats delta = {0};
    if (done && sl->embed && sl->finish == TW_FINISH_STOP) {
        c.embedding = sl->embed;
        c.n_embedding = tw_model_get_info(sl->m->model)->hidden;
    }
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
            record_end(e, r, &delta);
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
        retire(e, r);
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
            r->failed = st != TW_OK;
            model_stats none = {0};
            record_end(e, r, &none);
        }
        r->cb.on_chunk(r->user, &c);
    }
    model_entry *m = r->m;
    retire(e, r);
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
            sched_slot_fail(sl, st, err.msg);
            break;
        }
    }
    /* Choices that could not be set up end at once; the emit pass sends
     * their chunks with the others. */
    for (uint32_t i = 0; i < s->n_slots; i++)
        if (s->slots[i].r == r && st != TW_OK)
            sched_slot_fail(&s->slots[i], st, err.msg);
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
            sched_slot_finish(sl, why);
    }
}

static void emit_all(tw_engine *e, sched *s)
{
    for (uint32_t i = 0; i < s->n_slots; i++)
        if (s->slots[i].state != SLOT_FREE)
            sched_emit(e, &s->slots[i]);
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
        sched_prefill_step(e, s);
        sched_decode_step(e, s);
        emit_all(e, s);
        /* An idle engine sleeps in the wait at the top: a queued request
         * always fits once every slot is free (n <= max_n <= max_batch). */
    }
    /* Shutdown: every request still here ends as cancelled. */
    for (uint32_t i = 0; i < s->n_slots; i++)
        if (s->slots[i].state == SLOT_PREFILL || s->slots[i].state == SLOT_DECODE)
            sched_slot_finish(&s->slots[i], TW_FINISH_CANCELLED);
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
