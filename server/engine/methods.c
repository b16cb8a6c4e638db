/* The quick methods (answered on the receiving callback), Resume, and the
 * model jobs (answered from a thread of their own). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server.h"

#include <nng/supplemental/util/platform.h>
#include "translate.h"
#include "tw/log.h"

#ifndef TWD_VERSION
#define TWD_VERSION "unknown"
#endif

/* At most this many LoadModel / UnloadModel jobs run at once. */
#define MAX_JOBS 2

static void fail_err(twd_worker *w, tw_status st, const tw_err *err)
{
    twd_worker_fail(w, st, err->msg);
}

void twd_handle_health(twd_worker *w, const Tokenwire__V1__Request *req)
{
    (void)req;
    twd_server *s = w->srv;
    tw_engine_stats st;
    tw_err err;
    uint32_t ready = 0;
    if (tw_engine_stats_get(s->engine, NULL, &st, &err) == TW_OK)
        ready = st.models_ready;
    Tokenwire__V1__HealthReply h = TOKENWIRE__V1__HEALTH_REPLY__INIT;
    h.state = atomic_load(&s->draining) ? "draining" : ready ? "ok" : "loading";
    h.version = TWD_VERSION;
    h.has_uptime_s = 1;
    h.uptime_s = (twd_now_ms() - s->start_ms) / 1000u;
    h.has_models_ready = 1;
    h.models_ready = ready;
    Tokenwire__V1__Reply rep = TOKENWIRE__V1__REPLY__INIT;
    rep.result_case = TOKENWIRE__V1__REPLY__RESULT_HEALTH;
    rep.health = &h;
    twd_worker_reply(w, &rep);
}

void twd_handle_list_models(twd_worker *w, const Tokenwire__V1__Request *req)
{
    (void)req;
    tw_engine_model_info *infos = NULL;
    size_t n = 0;
    tw_err err;
    tw_status st = tw_engine_list_models(w->srv->engine, &infos, &n, &err);
    if (st == TW_OK)
        st = twd_loads_merge(w->srv->loads, &infos, &n, &err);
    if (st != TW_OK) {
        free(infos);
        fail_err(w, st, &err);
        return;
    }
    Tokenwire__V1__ModelInfo *mi = n ? calloc(n, sizeof *mi) : NULL;
    Tokenwire__V1__ModelInfo **mp = n ? calloc(n, sizeof *mp) : NULL;
    if (n && (!mi || !mp)) {
        free(mi);
        free(mp);
        free(infos);
        twd_worker_fail(w, TW_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        tokenwire__v1__model_info__init(&mi[i]);
        twd_model_to_wire(&infos[i], &mi[i]);
        mp[i] = &mi[i];
    }
    Tokenwire__V1__ListModelsReply lm = TOKENWIRE__V1__LIST_MODELS_REPLY__INIT;
    lm.n_models = n;
    lm.models = mp;
    Tokenwire__V1__Reply rep = TOKENWIRE__V1__REPLY__INIT;
    rep.result_case = TOKENWIRE__V1__REPLY__RESULT_LIST_MODELS;
    rep.list_models = &lm;
    twd_worker_reply(w, &rep);
    free(mp);
    free(mi);
    free(infos);
}

static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    unsigned long long size = 0, resident = 0;
    int got = fscanf(f, "%llu %llu", &size, &resident);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return got == 2 && page > 0 ? resident * (uint64_t)page : 0;
}

void twd_handle_stats(twd_worker *w, const Tokenwire__V1__Request *req)
{
    twd_server *s = w->srv;
    const char *model = req->stats->model && *req->stats->model ? req->stats->model : NULL;
    tw_engine_stats es;
    tw_err err;
    tw_status st = tw_engine_stats_get(s->engine, model, &es, &err);
    if (st != TW_OK) {
        fail_err(w, st, &err);
        return;
    }
    Tokenwire__V1__StatsReply sr = TOKENWIRE__V1__STATS_REPLY__INIT;
    twd_stats_to_wire(&es, &sr);
    /* StatsReply has no field for it yet; the log keeps it visible. */
    if (es.spec_drafted)
        tw_debug("stats: speculation saves and restores state in %.1f us per verify",
                 (double)es.spec_snapshot_us_per_verify);
    sr.has_rss_bytes = 1;
    sr.rss_bytes = rss_bytes();
    sr.has_chunks_published = 1;
    sr.chunks_published = atomic_load(&s->chunks_published);
    sr.has_resumes_served = 1;
    sr.resumes_served = atomic_load(&s->resumes_served);
    Tokenwire__V1__StatusDetail det[TW_TRANSITION_COUNT];
    Tokenwire__V1__StatusDetail *detp[TW_TRANSITION_COUNT];
    char vals[TW_TRANSITION_COUNT][24];
    for (int k = 0; k < TW_TRANSITION_COUNT; k++) {
        tokenwire__v1__status_detail__init(&det[k]);
        det[k].key = (char *)tw_transition_kind_name((tw_transition_kind)k);
        snprintf(vals[k], sizeof vals[k], "%" PRIu64, es.thinking_transitions[k]);
        det[k].value = vals[k];
        detp[k] = &det[k];
    }
    sr.n_thinking_transitions = TW_TRANSITION_COUNT;
    sr.thinking_transitions = detp;
    Tokenwire__V1__Reply rep = TOKENWIRE__V1__REPLY__INIT;
    rep.result_case = TOKENWIRE__V1__REPLY__RESULT_STATS;
    rep.stats = &sr;
    twd_worker_reply(w, &rep);
}

void twd_handle_tokenize(twd_worker *w, const Tokenwire__V1__Request *req)
{
    twd_server *s = w->srv;
    const Tokenwire__V1__TokenizeRequest *t = req->tokenize;
    const char *model = t->model && *t->model ? t->model : NULL;
    bool add_special = t->has_add_special_tokens ? t->add_special_tokens : true;
    bool parse_special = t->has_parse_special ? t->parse_special : true;
    tw_err err;
    tw_status st;
    char *rendered = NULL;
    size_t rendered_len = 0;
    const char *text = t->text ? t->text : "";
    size_t text_len = strlen(text);
    if (t->chat) {
        tw_chat_input chat;
        twd_gen_scratch sc;
        memset(&sc, 0, sizeof sc);
        st = twd_chat_from_wire(t->chat, &chat, &sc, &err);
        if (st == TW_OK)
            st = tw_engine_apply_chat_template(s->engine, model, &chat, TW_THINK_DEFAULT,
                                               &rendered, &rendered_len, &err);
        twd_gen_scratch_free(&sc);
        if (st != TW_OK) {
            fail_err(w, st, &err);
            return;
        }
        text = rendered;
        text_len = rendered_len;
        add_special = false; /* the template writes its own BOS */
    }
    uint32_t *ids = NULL;
    size_t n = 0;
    st = tw_engine_tokenize(s->engine, model, text, text_len, add_special, parse_special, &ids,
                            &n, &err);
    free(rendered);
    if (st != TW_OK) {
        fail_err(w, st, &err);
        return;
    }
    Tokenwire__V1__TokenizeReply tr = TOKENWIRE__V1__TOKENIZE_REPLY__INIT;
    tr.n_token_ids = n;
    tr.token_ids = ids;
    ProtobufCBinaryData *pieces = NULL;
    char *piece_buf = NULL;
    if (t->return_pieces && n) {
        /* Pieces are short; 256 bytes each is ample, longer ones are cut
         * and flagged by their full length being larger. */
        pieces = calloc(n, sizeof *pieces);
        piece_buf = n <= SIZE_MAX / 256 ? malloc(n * 256) : NULL;
        if (!pieces || !piece_buf) {
            free(pieces);
            free(piece_buf);
            free(ids);
            twd_worker_fail(w, TW_RESOURCE_EXHAUSTED, "out of memory");
            return;
        }
        for (size_t i = 0; i < n; i++) {
            size_t len = 0;
            char *b = piece_buf + i * 256;
            if (tw_engine_token_piece(s->engine, model, ids[i], b, 256, &len, NULL) != TW_OK)
                len = 0;
            pieces[i].data = (uint8_t *)b;
            pieces[i].len = len < 256 ? len : 256;
        }
        tr.n_pieces = n;
        tr.pieces = pieces;
    }
    tw_engine_model_info info;
    if (tw_engine_get_model(s->engine, model, &info, NULL) == TW_OK) {
        tr.has_max_context = 1;
        tr.max_context = info.max_context;
    }
    Tokenwire__V1__Reply rep = TOKENWIRE__V1__REPLY__INIT;
    rep.result_case = TOKENWIRE__V1__REPLY__RESULT_TOKENIZE;
    rep.tokenize = &tr;
    twd_worker_reply(w, &rep);
    free(pieces);
    free(piece_buf);
    free(ids);
}

void twd_handle_detokenize(twd_worker *w, const Tokenwire__V1__Request *req)
{
    const Tokenwire__V1__DetokenizeRequest *d = req->detokenize;
    const char *model = d->model && *d->model ? d->model : NULL;
    char *text = NULL;
    size_t len = 0;
    tw_err err;
    tw_status st = tw_engine_detokenize(w->srv->engine, model, d->token_ids, d->n_token_ids,
                                        d->skip_special_tokens, &text, &len, &err);
    if (st != TW_OK) {
        fail_err(w, st, &err);
        return;
    }
    Tokenwire__V1__DetokenizeReply dr = TOKENWIRE__V1__DETOKENIZE_REPLY__INIT;
    dr.text = text;
    Tokenwire__V1__Reply rep = TOKENWIRE__V1__REPLY__INIT;
    rep.result_case = TOKENWIRE__V1__REPLY__RESULT_DETOKENIZE;
    rep.detokenize = &dr;
    twd_worker_reply(w, &rep);
    free(text);
}

void twd_handle_cancel(twd_worker *w, const Tokenwire__V1__Request *req)
{
    twd_server *s = w->srv;
    const Tokenwire__V1__CancelRequest *c = req->cancel;
    bool cancelled = false;
    if (c->stream_id && *c->stream_id) {
        uint64_t engine_req;
        if (twd_streams_running_req(s->streams, c->stream_id, &engine_req))
            cancelled = tw_engine_cancel(s->engine, engine_req);
    } else if (c->has_request_id) {
        cancelled = twd_cancel_request_id(s, c->request_id);
    } else {
        twd_worker_fail(w, TW_INVALID_ARGUMENT, "cancel needs a stream_id or a request_id");
        return;
    }
    Tokenwire__V1__CancelReply cr = TOKENWIRE__V1__CANCEL_REPLY__INIT;
    cr.has_cancelled = 1;
    cr.cancelled = cancelled;
    Tokenwire__V1__Reply rep = TOKENWIRE__V1__REPLY__INIT;
    rep.result_case = TOKENWIRE__V1__REPLY__RESULT_CANCEL;
    rep.cancel = &cr;
    twd_worker_reply(w, &rep);
}

/* ------------------------------------------------------------ Resume */

static void send_resume(twd_worker *w, const char *id, uint64_t from_seq)
{
    twd_server *s = w->srv;
    twd_resume_data d;
    tw_err err;
    tw_status st = twd_streams_read(s->streams, id, from_seq, &d, &err);
    if (st != TW_OK) {
        fail_err(w, st, &err);
        return;
    }
    Tokenwire__V1__StreamChunk **chunks = d.n ? calloc(d.n, sizeof *chunks) : NULL;
    if (d.n && !chunks) {
        twd_resume_data_free(&d);
        twd_worker_fail(w, TW_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < d.n; i++) {
        /* The store holds what the engine itself encoded; a failure here is
         * memory, and the caller can Resume again. */
        chunks[n] = tokenwire__v1__stream_chunk__unpack(NULL, d.lens[i], d.chunks[i]);
        if (!chunks[n])
            break;
        n++;
    }
    Tokenwire__V1__ResumeReply rr = TOKENWIRE__V1__RESUME_REPLY__INIT;
    rr.n_chunks = n;
    rr.chunks = chunks;
    rr.has_finished = 1;
    rr.finished = d.finished && n == d.n;
    rr.has_expired = 1;
    rr.expired = d.expired;
    Tokenwire__V1__Reply rep = TOKENWIRE__V1__REPLY__INIT;
    rep.result_case = TOKENWIRE__V1__REPLY__RESULT_RESUME;
    rep.resume = &rr;
    /* counted before the reply goes out, so a caller that has its chunks
     * never reads a Stats from before them */
    atomic_fetch_add(&s->resumes_served, 1);
    twd_worker_reply(w, &rep);
    for (size_t i = 0; i < n; i++)
        tokenwire__v1__stream_chunk__free_unpacked(chunks[i], NULL);
    free(chunks);
    twd_resume_data_free(&d);
}

static void resume_wake(void *arg)
{
    twd_worker *w = arg;
    nng_aio_cancel(w->timer);
}

void twd_resume_timer_cb(void *arg)
{
    twd_worker *w = arg;
    twd_streams_unwait(w->srv->streams, &w->waiter);
    send_resume(w, w->resume_id, w->resume_from);
}

void twd_handle_resume(twd_worker *w, const Tokenwire__V1__Request *req)
{
    twd_server *s = w->srv;
    const Tokenwire__V1__ResumeRequest *r = req->resume;
    if (!tw_wire_stream_id_valid(r->stream_id)) {
        twd_worker_fail(w, TW_INVALID_ARGUMENT, "resume needs a valid stream_id");
        return;
    }
    uint32_t wait = r->wait_ms;
    if (wait > s->cfg->max_resume_wait_ms)
        wait = s->cfg->max_resume_wait_ms;
    if (wait == 0 || atomic_load(&s->draining)) {
        send_resume(w, r->stream_id, r->from_seq);
        return;
    }
    /* Long poll: the timer answers, either when it expires or when the
     * stream wakes it early by cancelling it. */
    snprintf(w->resume_id, sizeof w->resume_id, "%s", r->stream_id);
    w->resume_from = r->from_seq;
    memset(&w->waiter, 0, sizeof w->waiter);
    w->waiter.from_seq = r->from_seq;
    w->waiter.wake = resume_wake;
    w->waiter.arg = w;
    nng_sleep_aio((nng_duration)wait, w->timer);
    if (!twd_streams_wait(s->streams, w->resume_id, &w->waiter))
        nng_aio_cancel(w->timer);
}

/* ------------------------------------------------------------ model jobs */

static void *model_job(void *arg)
{
    twd_worker *w = arg;
    twd_server *s = w->srv;
    Tokenwire__V1__Request *req = w->job_req;
    w->job_req = NULL;
    tw_err err;
    Tokenwire__V1__Reply rep = TOKENWIRE__V1__REPLY__INIT;
    if (req->method_case == TOKENWIRE__V1__REQUEST__METHOD_LOAD_MODEL) {
        twd_run_load(w, req->load_model);
    } else {
        tw_status st = tw_engine_unload_model(s->engine, req->unload_model->name, &err);
        atomic_fetch_sub(&s->job_slots, 1);
        if (st != TW_OK) {
            twd_worker_fail(w, st, err.msg);
        } else {
            Tokenwire__V1__UnloadModelReply ur = TOKENWIRE__V1__UNLOAD_MODEL_REPLY__INIT;
            ur.has_unloaded = 1;
            ur.unloaded = 1;
            rep.result_case = TOKENWIRE__V1__REPLY__RESULT_UNLOAD_MODEL;
            rep.unload_model = &ur;
            twd_worker_reply(w, &rep);
        }
    }
    tw_wire_free_request(req);
    atomic_fetch_sub(&s->jobs, 1);
    return NULL;
}

void twd_handle_model_job(twd_worker *w, Tokenwire__V1__Request *req)
{
    twd_server *s = w->srv;
    const char *refusal = NULL;
    tw_status code = TW_OK;
    if (req->method_case == TOKENWIRE__V1__REQUEST__METHOD_LOAD_MODEL) {
        const Tokenwire__V1__LoadModelRequest *l = req->load_model;
        if (!l->source || !*l->source) {
            code = TW_INVALID_ARGUMENT;
            refusal = "load_model needs a source (a local path or an http(s) URL)";
        }
    } else if (!req->unload_model->name || !*req->unload_model->name) {
        code = TW_INVALID_ARGUMENT;
        refusal = "unload_model needs a model name";
    }
    if (!refusal && atomic_load(&s->draining)) {
        code = TW_UNAVAILABLE;
        refusal = "the engine is shutting down";
    }
    if (!refusal && atomic_fetch_add(&s->job_slots, 1) >= MAX_JOBS) {
        atomic_fetch_sub(&s->job_slots, 1);
        code = TW_RESOURCE_EXHAUSTED;
        refusal = "other model loads are running; retry later";
    }
    if (refusal) {
        twd_worker_fail(w, code, refusal);
        tw_wire_free_request(req);
        return;
    }
    /* Detached: twd_server_drain waits for the job count to reach zero. */
    atomic_fetch_add(&s->jobs, 1);
    w->job_req = req;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, model_job, w);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        w->job_req = NULL;
        atomic_fetch_sub(&s->jobs, 1);
        atomic_fetch_sub(&s->job_slots, 1);
        twd_worker_fail(w, TW_RESOURCE_EXHAUSTED, "cannot start a loader thread");
        tw_wire_free_request(req);
    }
}
