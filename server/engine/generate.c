/* Generate: hands the request to the engine and turns its chunks into either
 * published StreamChunks (stream = true) or one GenerateReply.
 *
 * The chunk callback runs on the engine's scheduler thread, which every
 * running request waits on; it only copies, encodes and hands bytes to
 * non-blocking sockets. A PUB socket drops for slow subscribers instead of
 * waiting, and the stream store keeps the chunk for Resume either way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

#include <nng/supplemental/util/platform.h>
#include "logprobs.h"
#include "translate.h"

typedef struct text_buf {
    char *p;
    size_t len, cap;
} text_buf;

typedef struct choice_acc {
    uint32_t *ids;
    size_t n_ids, cap_ids;
    twd_kept_logprobs lps;
    text_buf text;
    text_buf reasoning;
    tw_finish_reason finish;
    char *matched_stop;
    bool forced_close;
    bool echoed; /* streaming: prompt_text went out on this choice's first chunk */
    float *embedding; /* an embedding request's vector */
    size_t n_embedding;
} choice_acc;

struct twd_gen {
    twd_server *srv;
    twd_worker *w;      /* non-streaming: the worker that answers */
    twd_stream *stream; /* streaming */
    uint32_t n;
    choice_acc *choices;
    bool out_of_memory;
    char *prompt_text;        /* echo_prompt: the prompt as text (both forms) */
    twd_kept_logprobs prompt; /* prompt_logprobs */
    text_buf scratch_text; /* NUL-terminated copies for the wire */
    text_buf scratch_reasoning;
    char model[TW_MODEL_NAME_MAX];
};

static bool buf_set(text_buf *b, const char *s, size_t n, bool append)
{
    size_t need = (append ? b->len : 0) + n + 1;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < need)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return false;
        b->p = p;
        b->cap = cap;
    }
    if (!append)
        b->len = 0;
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return true;
}

static void gen_free(twd_gen *g)
{
    for (uint32_t i = 0; i < g->n; i++) {
        free(g->choices[i].ids);
        twd_kept_logprobs_free(&g->choices[i].lps);
        free(g->choices[i].text.p);
        free(g->choices[i].reasoning.p);
        free(g->choices[i].matched_stop);
        free(g->choices[i].embedding);
    }
    free(g->choices);
    twd_kept_logprobs_free(&g->prompt);
    free(g->prompt_text);
    free(g->scratch_text.p);
    free(g->scratch_reasoning.p);
    free(g);
}

/* ------------------------------------------------------------ streaming */

static void publish(twd_gen *g, const tw_gen_chunk *c)
{
    twd_server *s = g->srv;
    Tokenwire__V1__StreamChunk sc = TOKENWIRE__V1__STREAM_CHUNK__INIT;
    /* read first, so the delivery time a caller measures includes encoding */
    sc.has_emitted_unix_us = 1;
    sc.emitted_unix_us = twd_now_us();
    sc.stream_id = (char *)twd_stream_id(g->stream);
    sc.has_seq = 1;
    sc.seq = twd_stream_next_seq(s->streams, g->stream);
    sc.has_index = 1;
    sc.index = c->index;
    sc.n_token_ids = c->n_token_ids;
    sc.token_ids = (uint32_t *)c->token_ids;
    if (g->prompt_text && c->index < g->n && !g->choices[c->index].echoed) {
        sc.prompt_text = g->prompt_text;
        g->choices[c->index].echoed = true;
    }
    if (c->text_len && buf_set(&g->scratch_text, c->text_delta, c->text_len, false))
        sc.text_delta = g->scratch_text.p;
    if (c->reasoning_len &&
        buf_set(&g->scratch_reasoning, c->reasoning_delta, c->reasoning_len, false))
        sc.reasoning_delta = g->scratch_reasoning.p;
    if (c->finish_reason != TW_FINISH_NONE) {
        sc.has_finish_reason = 1;
        sc.finish_reason = twd_finish_to_wire(c->finish_reason);
    }
    Tokenwire__V1__Usage usage = TOKENWIRE__V1__USAGE__INIT;
    Tokenwire__V1__Status error = TOKENWIRE__V1__STATUS__INIT;
    if (c->final) {
        sc.has_final = 1;
        sc.final = 1;
        if (c->usage) {
            twd_usage_to_wire(c->usage, &usage);
            sc.usage = &usage;
        }
        if (c->error != TW_OK) {
            error.has_code = 1;
            error.code = (Tokenwire__V1__StatusCode)c->error;
            error.message = (char *)(c->error_msg ? c->error_msg : "");
            sc.error = &error;
        }
    }
    twd_wire_logprobs wl = {0}, wp = {0};
    if (c->logprobs && c->n_token_ids && twd_wire_logprobs_make(c->logprobs, c->n_token_ids, &wl)) {
        sc.n_logprobs = c->n_token_ids;
        sc.logprobs = wl.lpp;
    }
    if (c->prompt_logprobs && c->n_prompt_logprobs &&
        twd_wire_logprobs_make(c->prompt_logprobs, c->n_prompt_logprobs, &wp)) {
        sc.n_prompt_logprobs = c->n_prompt_logprobs;
        sc.prompt_logprobs = wp.lpp;
    }
    uint8_t *frame = NULL;
    size_t len = 0;
    tw_err err;
    tw_status st = tw_wire_encode_frame(&sc, &frame, &len, &err);
    twd_wire_logprobs_free(&wl);
    twd_wire_logprobs_free(&wp);
    if (st != TW_OK) {
        /* The sequence number must still advance and the stream must still
         * finish, or callers would wait for it forever. */
        frame = NULL;
        len = 0;
    }
    size_t topic_len = strlen(TW_WIRE_TOPIC_PREFIX) + strlen(sc.stream_id) + 1;
    if (frame)
        twd_streams_append(s->streams, g->stream, frame + topic_len, len - topic_len, c->final,
                           twd_now_ms(), NULL);
    else
        twd_streams_append(s->streams, g->stream, NULL, 0, c->final, twd_now_ms(), NULL);
    nng_msg *m;
    if (frame && nng_msg_alloc(&m, len) == 0) {
        memcpy(nng_msg_body(m), frame, len);
        if (nng_sendmsg(s->pub, m, NNG_FLAG_NONBLOCK) != 0)
            nng_msg_free(m);
        else
            atomic_fetch_add(&s->chunks_published, 1);
    }
    free(frame);
}

/* ------------------------------------------------------------ non-streaming */

static void accumulate(twd_gen *g, const tw_gen_chunk *c)
{
    if (c->index >= g->n)
        return;
    choice_acc *a = &g->choices[c->index];
    if (c->n_token_ids) {
        if (a->n_ids + c->n_token_ids > a->cap_ids) {
            size_t cap = a->cap_ids ? a->cap_ids : 64;
            while (cap < a->n_ids + c->n_token_ids)
                cap *= 2;
            uint32_t *p = realloc(a->ids, cap * sizeof *p);
            if (!p) {
                g->out_of_memory = true;
                return;
            }
            a->ids = p;
            a->cap_ids = cap;
        }
        memcpy(a->ids + a->n_ids, c->token_ids, c->n_token_ids * sizeof *a->ids);
        a->n_ids += c->n_token_ids;
    }
    if (c->logprobs && c->n_token_ids &&
        !twd_kept_logprobs_add(&a->lps, c->logprobs, c->n_token_ids))
        g->out_of_memory = true;
    /* every choice brings them; the reply holds them once */
    if (c->prompt_logprobs && c->n_prompt_logprobs && g->prompt.n == 0 &&
        !twd_kept_logprobs_add(&g->prompt, c->prompt_logprobs, c->n_prompt_logprobs))
        g->out_of_memory = true;
    if ((c->text_len && !buf_set(&a->text, c->text_delta, c->text_len, true)) ||
        (c->reasoning_len && !buf_set(&a->reasoning, c->reasoning_delta, c->reasoning_len, true)))
        g->out_of_memory = true;
    if (c->embedding && c->n_embedding && !a->embedding) {
        a->embedding = malloc(c->n_embedding * sizeof *a->embedding);
        if (a->embedding) {
            memcpy(a->embedding, c->embedding, c->n_embedding * sizeof *a->embedding);
            a->n_embedding = c->n_embedding;
        } else {
            g->out_of_memory = true;
        }
    }
    if (c->finish_reason != TW_FINISH_NONE) {
        a->finish = c->finish_reason;
        a->forced_close = c->thinking_forced_close;
        if (c->matched_stop && !a->matched_stop)
            a->matched_stop = strdup(c->matched_stop);
    }
}

static void answer(twd_gen *g, twd_worker *w, const tw_gen_chunk *c)
{
    if (c->error != TW_OK) {
        twd_worker_fail(w, c->error, c->error_msg && *c->error_msg ? c->error_msg
                                                                   : tw_status_name(c->error));
        return;
    }
    if (g->out_of_memory) {
        twd_worker_fail(w, TW_RESOURCE_EXHAUSTED, "out of memory collecting the output");
        return;
    }
    Tokenwire__V1__Choice *ch = calloc(g->n, sizeof *ch);
    Tokenwire__V1__Choice **chp = calloc(g->n, sizeof *chp);
    twd_wire_logprobs *wl = calloc(g->n, sizeof *wl);
    bool ok = ch && chp && wl;
    for (uint32_t i = 0; ok && i < g->n; i++)
        ok = twd_kept_logprobs_to_wire(&g->choices[i].lps, &wl[i]);
    twd_wire_logprobs wp = {0};
    if (ok)
        ok = twd_kept_logprobs_to_wire(&g->prompt, &wp);
    if (!ok) {
        twd_wire_logprobs_free(&wp);
        for (uint32_t i = 0; wl && i < g->n; i++)
            twd_wire_logprobs_free(&wl[i]);
        free(ch);
        free(chp);
        free(wl);
        twd_worker_fail(w, TW_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    for (uint32_t i = 0; i < g->n; i++) {
        choice_acc *a = &g->choices[i];
        tokenwire__v1__choice__init(&ch[i]);
        ch[i].n_logprobs = a->lps.n;
        ch[i].logprobs = wl[i].lpp;
        ch[i].has_index = 1;
        ch[i].index = i;
        ch[i].n_token_ids = a->n_ids;
        ch[i].token_ids = a->ids;
        ch[i].text = a->text.p ? a->text.p : "";
        ch[i].reasoning = a->reasoning.p;
        ch[i].has_finish_reason = 1;
        ch[i].finish_reason = twd_finish_to_wire(a->finish);
        ch[i].matched_stop = a->matched_stop;
        ch[i].has_thinking_forced_close = a->forced_close;
        ch[i].thinking_forced_close = a->forced_close;
        ch[i].n_embedding = a->n_embedding;
        ch[i].embedding = a->embedding;
        chp[i] = &ch[i];
    }
    Tokenwire__V1__Usage usage = TOKENWIRE__V1__USAGE__INIT;
    Tokenwire__V1__GenerateReply gr = TOKENWIRE__V1__GENERATE_REPLY__INIT;
    gr.model = g->model;
    gr.prompt_text = g->prompt_text;
    gr.n_prompt_logprobs = g->prompt.n;
    gr.prompt_logprobs = wp.lpp;
    gr.n_choices = g->n;
    gr.choices = chp;
    if (c->usage) {
        twd_usage_to_wire(c->usage, &usage);
        gr.usage = &usage;
    }
    Tokenwire__V1__Reply rep = TOKENWIRE__V1__REPLY__INIT;
    rep.result_case = TOKENWIRE__V1__REPLY__RESULT_GENERATE;
    rep.generate = &gr;
    twd_worker_reply(w, &rep);
    twd_wire_logprobs_free(&wp);
    for (uint32_t i = 0; i < g->n; i++)
        twd_wire_logprobs_free(&wl[i]);
    free(ch);
    free(chp);
    free(wl);
}

/* ------------------------------------------------------------ engine side */

static void on_chunk(void *user, const tw_gen_chunk *c)
{
    twd_gen *g = user;
    twd_server *s = g->srv;
    if (g->stream) {
        publish(g, c);
        if (c->final) {
            atomic_fetch_sub(&s->generations, 1);
            gen_free(g);
        }
        return;
    }
    accumulate(g, c);
    if (!c->final)
        return;
    twd_worker *w = g->w;
    /* Submit holds gen_mu until it has recorded the engine's id; taking it
     * here keeps the worker from being reused under its feet. */
    pthread_mutex_lock(&s->gen_mu);
    w->gen = NULL;
    w->gen_engine_req = 0;
    pthread_mutex_unlock(&s->gen_mu);
    answer(g, w, c);
    atomic_fetch_sub(&s->generations, 1);
    gen_free(g);
}

/* echo_prompt: a text prompt as sent, token ids as the model's tokenizer
 * reads them back (special tokens included), a conversation rendered by the
 * model's chat template as the engine renders it. *out (free()) is
 * NUL-terminated. */
static tw_status echo_text(tw_engine *e, const tw_gen_request *r, char **out, tw_err *err)
{
    size_t len;
    switch (r->prompt_kind) {
    case TW_PROMPT_TEXT:
        *out = strdup(r->prompt_text);
        return *out ? TW_OK : tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    case TW_PROMPT_TOKENS:
        return tw_engine_detokenize(e, r->model, r->prompt_ids, r->n_prompt_ids, false, out, &len,
                                    err);
    default:
        return tw_engine_apply_chat_template(e, r->model, &r->chat, r->thinking.enable_thinking,
                                             out, &len, err);
    }
}

bool twd_cancel_request_id(twd_server *s, uint64_t request_id)
{
    uint64_t engine_req = 0;
    pthread_mutex_lock(&s->gen_mu);
    for (size_t i = 0; i < s->n_workers && !engine_req; i++)
        if (s->workers[i].gen && s->workers[i].request_id == request_id)
            engine_req = s->workers[i].gen_engine_req;
    pthread_mutex_unlock(&s->gen_mu);
    return engine_req && tw_engine_cancel(s->engine, engine_req);
}

static void random_stream_id(char *buf, size_t cap)
{
    snprintf(buf, cap, "e-%08x%08x%08x", (unsigned)nng_random(), (unsigned)nng_random(),
             (unsigned)nng_random());
}

void twd_handle_generate(twd_worker *w, const Tokenwire__V1__Request *req)
{
    twd_server *s = w->srv;
    const Tokenwire__V1__GenerateRequest *gw = req->generate;
    bool streaming = gw->has_stream && gw->stream;
    tw_err err;
    if (atomic_load(&s->draining)) {
        twd_worker_fail(w, TW_UNAVAILABLE, "the engine is shutting down");
        return;
    }
    if (streaming && gw->stream_id && *gw->stream_id && !tw_wire_stream_id_valid(gw->stream_id)) {
        twd_worker_fail(w, TW_INVALID_ARGUMENT,
                        "invalid stream_id (1..128 characters of A-Z a-z 0-9 . _ : -)");
        return;
    }
    uint64_t now = twd_now_ms();
    uint64_t deadline = req->has_deadline_unix_ms ? req->deadline_unix_ms : 0;
    if (!deadline && s->cfg->default_deadline_ms)
        deadline = now + s->cfg->default_deadline_ms;
    if (deadline && deadline <= now) {
        twd_worker_fail(w, TW_DEADLINE_EXCEEDED, "the request's deadline has already passed");
        return;
    }
    if (atomic_fetch_add(&s->generations, 1) >= s->cfg->max_concurrent) {
        atomic_fetch_sub(&s->generations, 1);
        snprintf(err.msg, sizeof err.msg,
                 "the engine already runs %u generations (max-concurrent); retry later",
                 s->cfg->max_concurrent);
        twd_worker_fail(w, TW_RESOURCE_EXHAUSTED, err.msg);
        return;
    }

    tw_gen_request r;
    twd_gen_scratch sc;
    twd_gen *g = NULL;
    tw_status st = twd_gen_from_wire(gw, s->cfg->max_prompt_tokens, &r, &sc, &err);
    if (st == TW_OK) {
        r.deadline_unix_ms = deadline;
        g = calloc(1, sizeof *g);
        uint32_t n = r.n ? r.n : 1;
        if (g)
            g->choices = calloc(n, sizeof *g->choices);
        if (!g || !g->choices) {
            free(g);
            g = NULL;
            st = tw_errorf(&err, TW_RESOURCE_EXHAUSTED, "out of memory");
        } else {
            g->srv = s;
            g->n = n;
        }
    }
    if (st == TW_OK) {
        tw_engine_model_info info;
        if (tw_engine_get_model(s->engine, r.model, &info, NULL) == TW_OK)
            snprintf(g->model, sizeof g->model, "%s", info.name);
        else if (r.model)
            snprintf(g->model, sizeof g->model, "%s", r.model);
    }
    if (st == TW_OK && streaming) {
        char id[TW_WIRE_STREAM_ID_MAX + 1];
        if (gw->stream_id && *gw->stream_id)
            snprintf(id, sizeof id, "%s", gw->stream_id);
        else
            random_stream_id(id, sizeof id);
        st = twd_streams_open(s->streams, id, &g->stream, &err);
    }
    if (st != TW_OK) {
        twd_gen_scratch_free(&sc);
        if (g)
            gen_free(g);
        atomic_fetch_sub(&s->generations, 1);
        twd_worker_fail(w, st, err.msg);
        return;
    }

    char *echo = NULL;
    if (gw->has_echo_prompt && gw->echo_prompt &&
        (st = echo_text(s->engine, &r, &echo, &err)) != TW_OK) {
        twd_gen_scratch_free(&sc);
        gen_free(g);
        atomic_fetch_sub(&s->generations, 1);
        twd_worker_fail(w, st, err.msg);
        return;
    }

    tw_gen_callbacks cb = {on_chunk};
    uint64_t engine_req = 0;
    if (streaming) {
        twd_stream *stream = g->stream;
        /* the chunks carry the echo too, so a caller that resumes or only
         * watches the stream has it; g may be gone before the reply */
        if (echo && !(g->prompt_text = strdup(echo))) {
            twd_gen_scratch_free(&sc);
            twd_streams_abandon(s->streams, stream);
            gen_free(g);
            free(echo);
            atomic_fetch_sub(&s->generations, 1);
            twd_worker_fail(w, TW_RESOURCE_EXHAUSTED, "out of memory");
            return;
        }
        char model[TW_MODEL_NAME_MAX];
        snprintf(model, sizeof model, "%s", g->model);
        st = tw_engine_submit(s->engine, &r, &cb, g, &engine_req, &err);
        twd_gen_scratch_free(&sc);
        if (st != TW_OK) {
            twd_streams_abandon(s->streams, stream);
            gen_free(g);
            free(echo);
            atomic_fetch_sub(&s->generations, 1);
            twd_worker_fail(w, st, err.msg);
            return;
        }
        /* g may be gone already (a short generation); the stream is not:
         * it is only reaped once attached here. */
        Tokenwire__V1__GenerateReply gr = TOKENWIRE__V1__GENERATE_REPLY__INIT;
        char id[TW_WIRE_STREAM_ID_MAX + 1];
        snprintf(id, sizeof id, "%s", twd_stream_id(stream));
        twd_stream_set_req(s->streams, stream, engine_req);
        gr.model = model;
        gr.stream_id = id;
        gr.prompt_text = echo;
        Tokenwire__V1__Reply rep = TOKENWIRE__V1__REPLY__INIT;
        rep.result_case = TOKENWIRE__V1__REPLY__RESULT_GENERATE;
        rep.generate = &gr;
        twd_worker_reply(w, &rep);
        free(echo);
        return;
    }

    g->w = w;
    g->prompt_text = echo;
    pthread_mutex_lock(&s->gen_mu);
    w->gen = g;
    st = tw_engine_submit(s->engine, &r, &cb, g, &engine_req, &err);
    if (st == TW_OK)
        w->gen_engine_req = engine_req;
    else
        w->gen = NULL;
    pthread_mutex_unlock(&s->gen_mu);
    twd_gen_scratch_free(&sc);
    if (st != TW_OK) {
        gen_free(g);
        atomic_fetch_sub(&s->generations, 1);
        twd_worker_fail(w, st, err.msg);
    }
}
