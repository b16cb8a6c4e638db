#include "tokenwire/client.h"

#include <nng/nng.h>
#include <nng/protocol/pubsub0/sub.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>
#include <nng/supplemental/util/platform.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_internal.h"
#include "tokenwire/nng_close.h"

struct tw_client {
    nng_socket req;
    nng_socket sub;
    bool has_sub;
    nng_dialer req_dialer;
    nng_dialer sub_dialer;
    char *pub_url;
    pthread_mutex_t redial_mu;  /* guards the dialers while one is replaced */
    uint64_t sub_checked_ms;    /* when the SUB dialer was last looked at */
    uint64_t sub_bare_since_ms; /* since when it has had no pipe (0: it has one) */
    nng_tls_config *tls;
    char *rpc_url;
    char *api_key;
    uint32_t timeout_ms;
    uint32_t poll_ms;
    size_t compress_threshold;
    tw_wire_limits lim;
    _Atomic uint64_t next_request_id;
};

void tw_client_opts_init(tw_client_opts *o)
{
    memset(o, 0, sizeof *o);
    o->timeout_ms = TW_CLIENT_DEFAULT_TIMEOUT_MS;
    o->stream_poll_ms = 500;
    tw_wire_limits_default(&o->limits);
}

uint64_t tw_client_now_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static bool is_tls_url(const char *url)
{
    return strncmp(url, "tls+", 4) == 0;
}

static tw_status make_tls_config(const tw_client_opts *o, nng_tls_config **out, tw_err *err)
{
    if (!o->tls_ca_file || !*o->tls_ca_file)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "a tls+tcp:// engine URL needs a CA file to verify the engine");
    nng_tls_config *cfg;
    int rv = nng_tls_config_alloc(&cfg, NNG_TLS_MODE_CLIENT);
    if (rv != 0)
        return tw_errorf(err, TW_UNAVAILABLE, "TLS is not available: %s", nng_strerror(rv));
    rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_REQUIRED);
    if (rv == 0)
        rv = nng_tls_config_ca_file(cfg, o->tls_ca_file);
    if (rv != 0) {
        nng_tls_config_free(cfg);
        return tw_errorf(err, TW_INVALID_ARGUMENT, "TLS CA file %s: %s", o->tls_ca_file,
                         nng_strerror(rv));
    }
    if (o->tls_server_name && *o->tls_server_name) {
        rv = nng_tls_config_server_name(cfg, o->tls_server_name);
        if (rv != 0) {
            nng_tls_config_free(cfg);
            return tw_errorf(err, TW_INVALID_ARGUMENT, "TLS server name: %s", nng_strerror(rv));
        }
    }
    *out = cfg;
    return TW_OK;
}

/* Starts dialing url without waiting for it to answer; NNG redials (with
 * backoff) for as long as the socket lives, except after one case: see
 * redial. */
static tw_status dial(nng_socket s, const char *url, nng_tls_config *tls, nng_dialer *out,
                      tw_err *err)
{
    nng_dialer d;
    int rv = nng_dialer_create(&d, s, url);
    if (rv != 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "cannot use engine URL %s: %s", url,
                         nng_strerror(rv));
    if (is_tls_url(url)) {
        rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, tls);
        if (rv != 0) {
            nng_dialer_close(d);
            return tw_errorf(err, TW_INVALID_ARGUMENT, "TLS for %s: %s", url, nng_strerror(rv));
        }
    }
    nng_dialer_set_ms(d, NNG_OPT_RECONNMINT, 50);
    nng_dialer_set_ms(d, NNG_OPT_RECONNMAXT, 1000);
    rv = nng_dialer_start(d, NNG_FLAG_NONBLOCK);
    if (rv != 0) {
        nng_dialer_close(d);
        return tw_errorf(err, TW_INVALID_ARGUMENT, "cannot dial %s: %s", url, nng_strerror(rv));
    }
    if (out)
        *out = d;
    return TW_OK;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

tw_status tw_client_open(const tw_client_opts *o_in, tw_client **out, tw_err *err)
{
    *out = NULL;
    tw_client_opts o;
    if (o_in)
        o = *o_in;
    else
        tw_client_opts_init(&o);
    const char *rpc_url = o.rpc_url && *o.rpc_url ? o.rpc_url : TW_CLIENT_DEFAULT_RPC_URL;
    const char *pub_url = o.pub_url ? o.pub_url : TW_CLIENT_DEFAULT_PUB_URL;

    tw_client *c = calloc(1, sizeof *c);
    if (!c)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    pthread_mutex_init(&c->redial_mu, NULL);
    c->timeout_ms = o.timeout_ms ? o.timeout_ms : TW_CLIENT_DEFAULT_TIMEOUT_MS;
    c->poll_ms = o.stream_poll_ms ? o.stream_poll_ms : 500;
    c->compress_threshold = o.compress_threshold;
    c->lim = o.limits;
    atomic_init(&c->next_request_id, ((uint64_t)nng_random() << 16) | 1u);
    c->rpc_url = strdup(rpc_url);
    c->pub_url = strdup(pub_url);
    c->api_key = dup_or_null(o.api_key && *o.api_key ? o.api_key : NULL);
    tw_status st = TW_OK;
    if (!c->rpc_url || !c->pub_url || (o.api_key && *o.api_key && !c->api_key)) {
        st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
        goto fail;
    }
    if (is_tls_url(rpc_url) || (*pub_url && is_tls_url(pub_url))) {
        st = make_tls_config(&o, &c->tls, err);
        if (st != TW_OK)
            goto fail;
    }

    int rv = nng_req0_open(&c->req);
    if (rv != 0) {
        st = tw_errorf(err, TW_INTERNAL, "cannot open REQ socket: %s", nng_strerror(rv));
        goto fail;
    }
    /* Never sent again on a timer: a long Generate must not run twice. With
     * no resend time NNG also fails a request whose connection drops after
     * it went out (NNG_ECONNRESET) instead of sending it again;
     * tw_client_call sends the read-only ones again itself. */
    nng_socket_set_ms(c->req, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    nng_socket_set_size(c->req, NNG_OPT_RECVMAXSZ, 0);
    st = dial(c->req, rpc_url, c->tls, &c->req_dialer, err);
    if (st != TW_OK)
        goto fail;

    if (*pub_url) {
        rv = nng_sub0_open(&c->sub);
        if (rv != 0) {
            st = tw_errorf(err, TW_INTERNAL, "cannot open SUB socket: %s", nng_strerror(rv));
            goto fail;
        }
        c->has_sub = true;
        /* Each stream's context queues this many chunks while its reader is
         * busy; beyond that NNG drops and Resume fills the gap. */
        nng_socket_set_int(c->sub, NNG_OPT_RECVBUF, 1024);
        nng_socket_set_size(c->sub, NNG_OPT_RECVMAXSZ, 0);
        st = dial(c->sub, pub_url, c->tls, &c->sub_dialer, err);
        if (st != TW_OK)
            goto fail;
    }
    *out = c;
    return TW_OK;
fail:
    tw_client_close(c);
    return st;
}

void tw_client_close(tw_client *c)
{
    if (!c)
        return;
    nng_socket socks[2];
    int n = 0;
    if (nng_socket_id(c->req) > 0)
        socks[n++] = c->req;
    if (c->has_sub)
        socks[n++] = c->sub;
    if (n)
        tw_nng_close_bounded(socks, n);
    if (c->tls)
        nng_tls_config_free(c->tls);
    free(c->rpc_url);
    free(c->pub_url);
    free(c->api_key);
    pthread_mutex_destroy(&c->redial_mu);
    free(c);
}

/* ------------------------------------------------------------ calls */

/* NNG 1.5.2's dialer stops for good when the engine hangs up in the middle
 * of the SP handshake (an engine stopping or restarting at that moment):
 * the handshake ends with NNG_ECLOSED, which the dialer takes for its own
 * close. A call that finds no connection within its timeout therefore
 * replaces the RPC dialer, so the next call reaches an engine that is back.
 * A dialer still retrying on its own loses nothing by the swap: it has no
 * pipe, or the call would have found it. */
static void redial_locked(tw_client *c, nng_socket s, const char *url, nng_dialer *d)
{
    nng_dialer fresh;
    if (dial(s, url, c->tls, &fresh, NULL) == TW_OK) {
        nng_dialer_close(*d);
        *d = fresh;
    }
}

static void redial(tw_client *c)
{
    pthread_mutex_lock(&c->redial_mu);
    redial_locked(c, c->req, c->rpc_url, &c->req_dialer);
    pthread_mutex_unlock(&c->redial_mu);
}

/* The number of pipes d has open; -1 when the statistics do not say. */
static int64_t dialer_pipes(nng_dialer d)
{
    nng_stat *all = NULL;
    if (nng_stats_get(&all) != 0)
        return -1;
    nng_stat *ds = nng_stat_find_dialer(all, d);
    nng_stat *p = ds ? nng_stat_find(ds, "pipes") : NULL;
    int64_t n = p ? (int64_t)nng_stat_value(p) : -1;
    nng_stats_free(all);
    return n;
}

/* The SUB side has no call to time out, so readers that hear nothing look
 * here (at most once a second): a SUB dialer without a pipe for two
 * seconds is replaced, as redial replaces the RPC one. */
#define SUB_CHECK_EVERY_MS 1000
#define SUB_BARE_LIMIT_MS  2000

void tw_client_sub_check(tw_client *c)
{
    if (!c->has_sub)
        return;
    pthread_mutex_lock(&c->redial_mu);
    uint64_t now = tw_client_now_unix_ms();
    if (now - c->sub_checked_ms >= SUB_CHECK_EVERY_MS) {
        c->sub_checked_ms = now;
        int64_t pipes = dialer_pipes(c->sub_dialer);
        if (pipes != 0) {
            c->sub_bare_since_ms = 0;
        } else if (!c->sub_bare_since_ms) {
            c->sub_bare_since_ms = now;
        } else if (now - c->sub_bare_since_ms >= SUB_BARE_LIMIT_MS) {
            redial_locked(c, c->sub, c->pub_url, &c->sub_dialer);
            c->sub_bare_since_ms = 0;
        }
    }
    pthread_mutex_unlock(&c->redial_mu);
}

/* Sends bytes on a fresh context and waits for the answer, within
 * timeout_ms overall. *reset says whether the request went out and its
 * connection then dropped before an answer came. */
static tw_status rpc(tw_client *c, const uint8_t *buf, size_t len, uint32_t timeout_ms,
                     nng_msg **out, bool *reset, tw_err *err)
{
    *out = NULL;
    *reset = false;
    nng_ctx ctx;
    nng_aio *aio = NULL;
    nng_msg *msg = NULL;
    int rv = nng_ctx_open(&ctx, c->req);
    if (rv != 0)
        return tw_errorf(err, TW_UNAVAILABLE, "cannot open a request context: %s",
                         nng_strerror(rv));
    tw_status st = TW_OK;
    if ((rv = nng_aio_alloc(&aio, NULL, NULL)) != 0 || (rv = nng_msg_alloc(&msg, len)) != 0) {
        st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory: %s", nng_strerror(rv));
        goto done;
    }
    if (len)
        memcpy(nng_msg_body(msg), buf, len);
    nng_time start = nng_clock();
    nng_aio_set_msg(aio, msg);
    nng_aio_set_timeout(aio, (nng_duration)timeout_ms);
    nng_ctx_send(ctx, aio);
    nng_aio_wait(aio);
    rv = nng_aio_result(aio);
    if (rv != 0) {
        nng_msg_free(msg); /* not consumed by a failed send */
        /* REQ holds a request until a connection takes it: a send that
         * times out means the engine was never reached. */
        if (rv == NNG_ETIMEDOUT) {
            st = tw_errorf(err, TW_UNAVAILABLE,
                           "cannot reach the engine at %s (no connection within %u ms)",
                           c->rpc_url, timeout_ms);
            redial(c);
        } else
            st = tw_errorf(err, TW_UNAVAILABLE, "engine at %s: %s", c->rpc_url,
                           nng_strerror(rv));
        goto done;
    }
    uint64_t spent = nng_clock() - start;
    nng_duration left = spent >= timeout_ms ? 1 : (nng_duration)(timeout_ms - spent);
    nng_aio_set_timeout(aio, left);
    nng_ctx_recv(ctx, aio);
    nng_aio_wait(aio);
    rv = nng_aio_result(aio);
    if (rv == 0) {
        *out = nng_aio_get_msg(aio);
        goto done;
    }
    *reset = rv == NNG_ECONNRESET;
    if (rv == NNG_ETIMEDOUT)
        st = tw_errorf(err, TW_DEADLINE_EXCEEDED, "no reply from the engine at %s within %u ms",
                       c->rpc_url, timeout_ms);
    else
        st = tw_errorf(err, TW_UNAVAILABLE, "engine at %s: %s", c->rpc_url, nng_strerror(rv));
done:
    nng_aio_free(aio);
    nng_ctx_close(ctx);
    return st;
}

/* Whether a method only reads what the engine holds, so that a request
 * whose connection dropped after it went out may go out again: the engine
 * acting on it twice changes nothing. Generate, model loads and unloads and
 * Cancel act, and are not sent twice. */
static bool read_only(Tokenwire__V1__Request__MethodCase m)
{
    switch (m) {
    case TOKENWIRE__V1__REQUEST__METHOD_TOKENIZE:
    case TOKENWIRE__V1__REQUEST__METHOD_DETOKENIZE:
    case TOKENWIRE__V1__REQUEST__METHOD_LIST_MODELS:
    case TOKENWIRE__V1__REQUEST__METHOD_HEALTH:
    case TOKENWIRE__V1__REQUEST__METHOD_STATS:
    case TOKENWIRE__V1__REQUEST__METHOD_RESUME:
        return true;
    default:
        return false;
    }
}

tw_status tw_client_call(tw_client *c, const Tokenwire__V1__Request *req,
                         Tokenwire__V1__Reply **reply, tw_err *err)
{
    *reply = NULL;
    Tokenwire__V1__Request r = *req;
    if (!r.has_version) {
        r.has_version = 1;
        r.version = TOKENWIRE__V1__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    }
    if (!r.has_request_id) {
        r.has_request_id = 1;
        r.request_id = atomic_fetch_add(&c->next_request_id, 1);
    }
    if (!r.auth_token && c->api_key)
        r.auth_token = c->api_key;
    bool streaming = r.method_case == TOKENWIRE__V1__REQUEST__METHOD_GENERATE && r.generate &&
                     r.generate->has_stream && r.generate->stream;
    uint32_t timeout = c->timeout_ms;
    if (r.method_case == TOKENWIRE__V1__REQUEST__METHOD_RESUME && r.resume &&
        r.resume->has_wait_ms)
        timeout += r.resume->wait_ms;
    if (!r.has_deadline_unix_ms && !streaming) {
        r.has_deadline_unix_ms = 1;
        r.deadline_unix_ms = tw_client_now_unix_ms() + timeout;
    }

    tw_wire_encode_options eo = {c->compress_threshold, 0};
    uint8_t *buf;
    size_t len;
    tw_status st = tw_wire_encode_request(&r, &eo, &buf, &len, err);
    if (st != TW_OK)
        return st;
    nng_msg *msg;
    bool reset;
    const nng_time start = nng_clock();
    st = rpc(c, buf, len, timeout, &msg, &reset, err);
    /* a read-only call goes out again while its time lasts (the engine
     * restarted, or closed the connection to listen again) */
    while (st != TW_OK && reset && read_only(r.method_case)) {
        const nng_time spent = nng_clock() - start;
        if (spent >= timeout)
            break;
        st = rpc(c, buf, len, (uint32_t)(timeout - spent), &msg, &reset, err);
    }
    free(buf);
    if (st != TW_OK)
        return st;
    Tokenwire__V1__Reply *rep = NULL;
    st = tw_wire_decode_reply(nng_msg_body(msg), nng_msg_len(msg), &c->lim, &rep, err);
    nng_msg_free(msg);
    if (st != TW_OK)
        return tw_error_wrap(err, st, "engine reply");
    tw_status code = TW_OK;
    if (rep->status && rep->status->has_code &&
        rep->status->code != TOKENWIRE__V1__STATUS_CODE__OK) {
        code = (tw_status)rep->status->code;
        tw_errorf(err, code, "%s", rep->status->message && *rep->status->message
                                       ? rep->status->message
                                       : tw_status_name(code));
    }
    *reply = rep;
    return code;
}

#define CLIENT_METHOD(fn, Type, INIT, field, CASE)                                             \
    tw_status fn(tw_client *c, const Type *m, Tokenwire__V1__Reply **reply, tw_err *err)      \
    {                                                                                          \
        Type dflt = INIT;                                                                      \
        Tokenwire__V1__Request r = TOKENWIRE__V1__REQUEST__INIT;                               \
        r.method_case = CASE;                                                                  \
        r.field = m ? (Type *)m : &dflt;                                                       \
        return tw_client_call(c, &r, reply, err);                                              \
    }

CLIENT_METHOD(tw_client_tokenize, Tokenwire__V1__TokenizeRequest,
              TOKENWIRE__V1__TOKENIZE_REQUEST__INIT, tokenize,
              TOKENWIRE__V1__REQUEST__METHOD_TOKENIZE)
CLIENT_METHOD(tw_client_detokenize, Tokenwire__V1__DetokenizeRequest,
              TOKENWIRE__V1__DETOKENIZE_REQUEST__INIT, detokenize,
              TOKENWIRE__V1__REQUEST__METHOD_DETOKENIZE)
CLIENT_METHOD(tw_client_list_models, Tokenwire__V1__ListModelsRequest,
              TOKENWIRE__V1__LIST_MODELS_REQUEST__INIT, list_models,
              TOKENWIRE__V1__REQUEST__METHOD_LIST_MODELS)
CLIENT_METHOD(tw_client_load_model, Tokenwire__V1__LoadModelRequest,
              TOKENWIRE__V1__LOAD_MODEL_REQUEST__INIT, load_model,
              TOKENWIRE__V1__REQUEST__METHOD_LOAD_MODEL)
CLIENT_METHOD(tw_client_unload_model, Tokenwire__V1__UnloadModelRequest,
              TOKENWIRE__V1__UNLOAD_MODEL_REQUEST__INIT, unload_model,
              TOKENWIRE__V1__REQUEST__METHOD_UNLOAD_MODEL)
CLIENT_METHOD(tw_client_health, Tokenwire__V1__HealthRequest,
              TOKENWIRE__V1__HEALTH_REQUEST__INIT, health,
              TOKENWIRE__V1__REQUEST__METHOD_HEALTH)
CLIENT_METHOD(tw_client_stats, Tokenwire__V1__StatsRequest, TOKENWIRE__V1__STATS_REQUEST__INIT,
              stats, TOKENWIRE__V1__REQUEST__METHOD_STATS)
CLIENT_METHOD(tw_client_cancel, Tokenwire__V1__CancelRequest,
              TOKENWIRE__V1__CANCEL_REQUEST__INIT, cancel,
              TOKENWIRE__V1__REQUEST__METHOD_CANCEL)
CLIENT_METHOD(tw_client_resume, Tokenwire__V1__ResumeRequest,
              TOKENWIRE__V1__RESUME_REQUEST__INIT, resume,
              TOKENWIRE__V1__REQUEST__METHOD_RESUME)

tw_status tw_client_generate(tw_client *c, const Tokenwire__V1__GenerateRequest *m,
                             Tokenwire__V1__Reply **reply, tw_err *err)
{
    *reply = NULL;
    if (!m)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "generate needs a request");
    if (m->has_stream && m->stream)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "streaming generation goes through tw_client_generate_stream");
    Tokenwire__V1__Request r = TOKENWIRE__V1__REQUEST__INIT;
    r.method_case = TOKENWIRE__V1__REQUEST__METHOD_GENERATE;
    r.generate = (Tokenwire__V1__GenerateRequest *)m;
    return tw_client_call(c, &r, reply, err);
}

/* ------------------------------------------------------------ internal access */

bool tw_client_has_sub(const tw_client *c)
{
    return c->has_sub;
}

int tw_client_sub_ctx_open(tw_client *c, const void *topic, size_t topic_len, nng_ctx *out)
{
    int rv = nng_ctx_open(out, c->sub);
    if (rv != 0)
        return rv;
    rv = nng_ctx_set(*out, NNG_OPT_SUB_SUBSCRIBE, topic, topic_len);
    if (rv != 0)
        nng_ctx_close(*out);
    return rv;
}

uint32_t tw_client_timeout_ms(const tw_client *c)
{
    return c->timeout_ms;
}

uint32_t tw_client_poll_ms(const tw_client *c)
{
    return c->poll_ms;
}

const tw_wire_limits *tw_client_limits(const tw_client *c)
{
    return &c->lim;
}
