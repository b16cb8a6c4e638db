#include "server.h"

#include <nng/protocol/pubsub0/pub.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/supplemental/tls/tls.h>
#include <nng/supplemental/util/platform.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenwire/nng_close.h"
#include "tw/log.h"

/* Replies larger than this travel zstd-compressed. */
#define REPLY_COMPRESS_THRESHOLD (64u << 10)
#define REAP_INTERVAL_MS 250

uint64_t twd_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t twd_now_ms(void)
{
    return twd_now_us() / 1000u;
}

/* ------------------------------------------------------------ replies */

static void start_recv(twd_worker *w)
{
    w->state = TWD_W_RECV;
    nng_ctx_recv(w->ctx, w->aio);
}

void twd_worker_reply(twd_worker *w, Tokenwire__V1__Reply *rep)
{
    Tokenwire__V1__Status ok = TOKENWIRE__V1__STATUS__INIT;
    rep->has_version = 1;
    rep->version = TOKENWIRE__V1__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    rep->has_request_id = 1;
    rep->request_id = w->request_id;
    if (!rep->status)
        rep->status = &ok;
    tw_wire_encode_options eo = {REPLY_COMPRESS_THRESHOLD, 0};
    uint8_t *buf = NULL;
    size_t len = 0;
    tw_err err;
    tw_status st = tw_wire_encode_reply(rep, &eo, &buf, &len, &err);
    if (rep->status == &ok)
        rep->status = NULL;
    if (st != TW_OK) {
        tw_error("request %llu: cannot encode the reply: %s", (unsigned long long)w->request_id,
                 err.msg);
        Tokenwire__V1__Status es = TOKENWIRE__V1__STATUS__INIT;
        es.has_code = 1;
        es.code = TOKENWIRE__V1__STATUS_CODE__INTERNAL;
        es.message = "the engine could not encode its reply";
        Tokenwire__V1__Reply r2 = TOKENWIRE__V1__REPLY__INIT;
        r2.has_request_id = 1;
        r2.request_id = w->request_id;
        r2.status = &es;
        if (tw_wire_encode_reply(&r2, NULL, &buf, &len, NULL) != TW_OK)
            buf = NULL;
    }
    nng_msg *m = NULL;
    if (!buf || nng_msg_alloc(&m, len) != 0) {
        /* Out of memory: the context must still move on, or it is lost. */
        free(buf);
        tw_error("request %llu: out of memory replying", (unsigned long long)w->request_id);
        nng_msg_alloc(&m, 0);
        if (!m) {
            start_recv(w);
            return;
        }
    } else {
        memcpy(nng_msg_body(m), buf, len);
        free(buf);
    }
    w->state = TWD_W_SEND;
    nng_aio_set_msg(w->aio, m);
    nng_ctx_send(w->ctx, w->aio);
}

void twd_worker_fail(twd_worker *w, tw_status code, const char *msg)
{
    Tokenwire__V1__Status s = TOKENWIRE__V1__STATUS__INIT;
    s.has_code = 1;
    s.code = (Tokenwire__V1__StatusCode)code;
    s.message = (char *)msg;
    Tokenwire__V1__Reply rep = TOKENWIRE__V1__REPLY__INIT;
    rep.status = &s;
    if (w->srv->cfg->verbose)
        tw_info("request %llu: %s: %s", (unsigned long long)w->request_id,
                tw_status_name(code), msg);
    twd_worker_reply(w, &rep);
}

/* ------------------------------------------------------------ requests */

/* GenerateRequest.user for the log, where it serves abuse tracing: at most
 * 48 bytes, anything but printable ASCII shown as '?', so a caller's bytes
 * cannot forge log lines. */
static void log_user(const char *user, char *out, size_t cap)
{
    char clean[49];
    size_t n = 0;
    for (; user[n] && n < sizeof clean - 1; n++)
        clean[n] = user[n] >= 0x20 && user[n] < 0x7f ? user[n] : '?';
    clean[n] = '\0';
    snprintf(out, cap, " (user \"%s\"%s)", clean, user[n] ? "..." : "");
}

static void handle_request(twd_worker *w, nng_msg *msg)
{
    twd_server *s = w->srv;
    Tokenwire__V1__Request *req = NULL;
    tw_err err;
    w->request_id = 0;
    w->state = TWD_W_BUSY;
    tw_status st = tw_wire_decode_request(nng_msg_body(msg), nng_msg_len(msg), &s->limits, &req,
                                          &err);
    nng_msg_free(msg);
    if (st != TW_OK) {
        twd_worker_fail(w, st, err.msg);
        return;
    }
    w->request_id = req->request_id;
    if (req->has_version && req->version > TOKENWIRE__V1__PROTOCOL_VERSION__PROTOCOL_VERSION_1) {
        snprintf(err.msg, sizeof err.msg,
                 "protocol version %d is newer than this engine's (1); upgrade the engine",
                 (int)req->version);
        twd_worker_fail(w, TW_FAILED_PRECONDITION, err.msg);
        tw_wire_free_request(req);
        return;
    }
    st = twd_auth_check(&s->auth, req->auth_token, &err);
    if (st != TW_OK) {
        twd_worker_fail(w, st, err.msg);
        tw_wire_free_request(req);
        return;
    }
    if (s->cfg->verbose) {
        char user[80] = "";
        if (req->method_case == TOKENWIRE__V1__REQUEST__METHOD_GENERATE && req->generate->user &&
            *req->generate->user)
            log_user(req->generate->user, user, sizeof user);
        tw_info("request %llu: method %d%s", (unsigned long long)req->request_id,
                (int)req->method_case, user);
    }
    /* Handlers that call into the engine are counted, so that shutdown can
     * wait for them before it destroys the engine. The count goes up before
     * draining is read: a handler either sees draining or is waited for.
     * Resume only reads the stream store, which outlives the engine. */
    bool gated = req->method_case != TOKENWIRE__V1__REQUEST__METHOD_RESUME;
    if (gated) {
        atomic_fetch_add(&s->engine_users, 1);
        if (atomic_load(&s->draining)) {
            atomic_fetch_sub(&s->engine_users, 1);
            twd_worker_fail(w, TW_UNAVAILABLE, "the engine is shutting down");
            tw_wire_free_request(req);
            return;
        }
    }
    switch (req->method_case) {
    case TOKENWIRE__V1__REQUEST__METHOD_HEALTH:
        twd_handle_health(w, req);
        break;
    case TOKENWIRE__V1__REQUEST__METHOD_LIST_MODELS:
        twd_handle_list_models(w, req);
        break;
    case TOKENWIRE__V1__REQUEST__METHOD_STATS:
        twd_handle_stats(w, req);
        break;
    case TOKENWIRE__V1__REQUEST__METHOD_TOKENIZE:
        twd_handle_tokenize(w, req);
        break;
    case TOKENWIRE__V1__REQUEST__METHOD_DETOKENIZE:
        twd_handle_detokenize(w, req);
        break;
    case TOKENWIRE__V1__REQUEST__METHOD_CANCEL:
        twd_handle_cancel(w, req);
        break;
    case TOKENWIRE__V1__REQUEST__METHOD_RESUME:
        twd_handle_resume(w, req);
        break;
    case TOKENWIRE__V1__REQUEST__METHOD_GENERATE:
        twd_handle_generate(w, req);
        break;
    case TOKENWIRE__V1__REQUEST__METHOD_LOAD_MODEL:
    case TOKENWIRE__V1__REQUEST__METHOD_UNLOAD_MODEL:
        twd_handle_model_job(w, req);
        atomic_fetch_sub(&s->engine_users, 1);
        return; /* the job owns req */
    default:
        twd_worker_fail(w, TW_UNIMPLEMENTED,
                        "the request names no method this engine knows (a newer client?)");
        break;
    }
    if (gated)
        atomic_fetch_sub(&s->engine_users, 1);
    tw_wire_free_request(req);
}

static void worker_cb(void *arg)
{
    twd_worker *w = arg;
    int rv = nng_aio_result(w->aio);
    switch (w->state) {
    case TWD_W_RECV:
        if (rv != 0) {
            if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
                w->state = TWD_W_IDLE;
                return;
            }
            start_recv(w);
            return;
        }
        handle_request(w, nng_aio_get_msg(w->aio));
        return;
    case TWD_W_SEND:
        if (rv != 0) {
            nng_msg_free(nng_aio_get_msg(w->aio));
            if (rv == NNG_ECLOSED) {
                w->state = TWD_W_IDLE;
                return;
            }
        }
        start_recv(w);
        return;
    default:
        return;
    }
}

static void reaper_cb(void *arg)
{
    twd_server *s = arg;
    if (nng_aio_result(s->reaper) != 0)
        return; /* stopped */
    twd_streams_reap(s->streams, twd_now_ms());
    nng_sleep_aio(REAP_INTERVAL_MS, s->reaper);
}

/* ------------------------------------------------------------ sockets */

static char *read_text_file(const char *path, tw_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        tw_errorf(err, TW_INVALID_ARGUMENT, "cannot open %s", path);
        return NULL;
    }
    char *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        n = ftell(f);
    if (n < 0 || n > (1 << 20) || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        tw_errorf(err, TW_INVALID_ARGUMENT, "%s is not a readable PEM file under 1 MiB", path);
        return NULL;
    }
    buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (!buf) {
        tw_errorf(err, TW_INVALID_ARGUMENT, "cannot read %s", path);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

static tw_status make_tls(twd_server *s, tw_err *err)
{
    const twd_config *c = s->cfg;
    char *cert = read_text_file(c->tls_cert, err);
    if (!cert)
        return TW_INVALID_ARGUMENT;
    char *key = read_text_file(c->tls_key, err);
    if (!key) {
        free(cert);
        return TW_INVALID_ARGUMENT;
    }
    int rv = nng_tls_config_alloc(&s->tls, NNG_TLS_MODE_SERVER);
    if (rv == 0)
        rv = nng_tls_config_own_cert(s->tls, cert, key, NULL);
    explicit_bzero(key, strlen(key));
    free(key);
    free(cert);
    if (rv != 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "TLS certificate %s / key %s: %s",
                         c->tls_cert, c->tls_key, nng_strerror(rv));
    return TW_OK;
}

tw_status twd_server_start(twd_server *s, const twd_config *cfg, tw_engine *engine, tw_err *err)
{
    memset(s, 0, sizeof *s);
    s->cfg = cfg;
    s->engine = engine;
    s->start_ms = twd_now_ms();
    pthread_mutex_init(&s->gen_mu, NULL);
    tw_wire_limits_default(&s->limits);
    s->limits.max_message_bytes = cfg->max_message_bytes;
    if (s->limits.max_body_bytes < cfg->max_message_bytes)
        s->limits.max_body_bytes = cfg->max_message_bytes;

    tw_status st = twd_auth_init(&s->auth, cfg->api_keys, cfg->n_api_keys, err);
    if (st != TW_OK)
        return st;
    st = twd_streams_create(cfg->max_streams, cfg->max_stream_bytes, cfg->stream_grace_ms,
                            &s->streams, err);
    if (st != TW_OK)
        return st;
    if ((st = twd_loads_create(&s->loads, err)) != TW_OK)
        return st;
    if (cfg->tls_cert && (st = make_tls(s, err)) != TW_OK)
        return st;

    int rv = nng_rep0_open(&s->rep);
    if (rv == 0)
        rv = nng_pub0_open(&s->pub);
    if (rv != 0)
        return tw_errorf(err, TW_INTERNAL, "cannot open sockets: %s", nng_strerror(rv));
    /* NNG drops the connection of a peer that sends more than RECVMAXSZ, so
     * the socket admits somewhat more than the limit and the decoder answers
     * an oversized request with RESOURCE_EXHAUSTED instead. */
    size_t hard = cfg->max_message_bytes > SIZE_MAX / 4 ? SIZE_MAX / 2
                                                        : cfg->max_message_bytes * 2 + 65536;
    nng_socket_set_size(s->rep, NNG_OPT_RECVMAXSZ, hard);
    s->listeners.tls = s->tls;
    for (size_t i = 0; i < cfg->n_listen; i++)
        if ((st = twd_listeners_add(&s->listeners, s->rep, cfg->listen[i], err)) != TW_OK)
            return st;
    if ((st = twd_listeners_add(&s->listeners, s->pub, cfg->publish, err)) != TW_OK)
        return st;
    if ((st = twd_listeners_watch(&s->listeners, err)) != TW_OK)
        return st;

    s->n_workers = cfg->rpc_contexts;
    s->workers = calloc(s->n_workers, sizeof *s->workers);
    if (!s->workers)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    for (size_t i = 0; i < s->n_workers; i++) {
        twd_worker *w = &s->workers[i];
        w->srv = s;
        if ((rv = nng_ctx_open(&w->ctx, s->rep)) != 0 ||
            (rv = nng_aio_alloc(&w->aio, worker_cb, w)) != 0 ||
            (rv = nng_aio_alloc(&w->timer, twd_resume_timer_cb, w)) != 0)
            return tw_errorf(err, TW_INTERNAL, "cannot create RPC context: %s", nng_strerror(rv));
    }
    if ((rv = nng_aio_alloc(&s->reaper, reaper_cb, s)) != 0)
        return tw_errorf(err, TW_INTERNAL, "cannot create timer: %s", nng_strerror(rv));
    for (size_t i = 0; i < s->n_workers; i++)
        start_recv(&s->workers[i]);
    nng_sleep_aio(REAP_INTERVAL_MS, s->reaper);
    return TW_OK;
}

void twd_server_drain(twd_server *s)
{
    atomic_store(&s->draining, true);
    while (atomic_load(&s->jobs) > 0 || atomic_load(&s->engine_users) > 0)
        nng_msleep(10);
}

void twd_server_stop(twd_server *s)
{
    twd_server_drain(s);
    twd_listeners_free(&s->listeners);
    if (s->reaper)
        nng_aio_stop(s->reaper);
    for (size_t i = 0; i < s->n_workers; i++)
        if (s->workers[i].timer)
            nng_aio_stop(s->workers[i].timer);
    /* NNG 1.5 can strand a close (tokenwire/nng_close.h): a stranded one
     * may still touch the workers' aios, so those are then left allocated
     * for the process's exit to take back. */
    bool closed = true;
    if (nng_socket_id(s->rep) > 0)
        closed = tw_nng_close_bounded(&s->rep, 1);
    for (size_t i = 0; i < s->n_workers; i++) {
        twd_worker *w = &s->workers[i];
        if (w->aio)
            nng_aio_stop(w->aio);
        if (s->streams)
            twd_streams_unwait(s->streams, &w->waiter);
    }
    if (nng_socket_id(s->pub) > 0)
        closed = tw_nng_close_bounded(&s->pub, 1) && closed;
    if (!closed)
        tw_warn("a socket close did not finish within its bound; left to NNG");
    for (size_t i = 0; closed && i < s->n_workers; i++) {
        nng_aio_free(s->workers[i].aio);
        nng_aio_free(s->workers[i].timer);
    }
    free(s->workers);
    nng_aio_free(s->reaper);
    twd_streams_destroy(s->streams);
    twd_loads_destroy(s->loads);
    if (s->tls)
        nng_tls_config_free(s->tls);
    pthread_mutex_destroy(&s->gen_mu);
    memset(s, 0, sizeof *s);
}
