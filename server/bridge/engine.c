#include "engine.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static tw_status client_call(void *ctx, const Tokenwire__V1__Request *req,
                             Tokenwire__V1__Reply **reply, tw_err *err)
{
    tw_bridge_engine *e = ctx;
    return tw_client_call(e->client, req, reply, err);
}

static tw_status client_quick_call(void *ctx, const Tokenwire__V1__Request *req,
                                   Tokenwire__V1__Reply **reply, tw_err *err)
{
    tw_bridge_engine *e = ctx;
    return tw_client_call(e->quick, req, reply, err);
}

static tw_status client_stream(void *ctx, const Tokenwire__V1__GenerateRequest *m,
                               tw_client_chunk_fn fn, void *user, tw_err *err)
{
    tw_bridge_engine *e = ctx;
    return tw_client_generate_stream(e->client, m, fn, user, NULL, err);
}

static const tw_bridge_engine_ops client_ops = {
    .call = client_call,
    .quick_call = client_quick_call,
    .stream = client_stream,
};

bool tw_bridge_engine_up(tw_bridge_engine *e)
{
    return atomic_load(&e->up) != 0;
}

void tw_bridge_engine_version(tw_bridge_engine *e, char *buf, size_t cap)
{
    pthread_mutex_lock(&e->mu);
    snprintf(buf, cap, "%s", e->version);
    pthread_mutex_unlock(&e->mu);
}

/* One Health call; updates the flag and the version. */
static void probe_once(tw_bridge_engine *e)
{
    Tokenwire__V1__HealthRequest hr = TOKENWIRE__V1__HEALTH_REQUEST__INIT;
    Tokenwire__V1__Request req = TOKENWIRE__V1__REQUEST__INIT;
    req.method_case = TOKENWIRE__V1__REQUEST__METHOD_HEALTH;
    req.health = &hr;
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    tw_status st = e->ops->quick_call(e->ctx, &req, &rep, &err);
    /* Any answer at all means the engine is there, even one refusing our
     * key: the calls themselves will report that. */
    atomic_store(&e->up, rep != NULL || st == TW_OK);
    if (rep && rep->result_case == TOKENWIRE__V1__REPLY__RESULT_HEALTH && rep->health->version) {
        pthread_mutex_lock(&e->mu);
        snprintf(e->version, sizeof e->version, "%s", rep->health->version);
        pthread_mutex_unlock(&e->mu);
    }
    tw_wire_free_reply(rep);
}

static void *prober_main(void *arg)
{
    tw_bridge_engine *e = arg;
    pthread_mutex_lock(&e->mu);
    while (!e->stopping) {
        pthread_mutex_unlock(&e->mu);
        probe_once(e);
        pthread_mutex_lock(&e->mu);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)e->probe_interval_ms * 1000000u;
        until.tv_sec += (time_t)(ns / 1000000000u);
        until.tv_nsec = (long)(ns % 1000000000u);
        while (!e->stopping) {
            if (pthread_cond_timedwait(&e->cv, &e->mu, &until) == ETIMEDOUT)
                break;
        }
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

static void engine_common_init(tw_bridge_engine *e)
{
    memset(e, 0, sizeof *e);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
}

void tw_bridge_engine_init_ops(tw_bridge_engine *e, const tw_bridge_engine_ops *ops, void *ctx)
{
    engine_common_init(e);
    e->ops = ops;
    e->ctx = ctx;
    atomic_store(&e->up, 1);
}

tw_status tw_bridge_engine_open(tw_bridge_engine *e, const tw_bridge_engine_cfg *cfg,
                                tw_err *err)
{
    engine_common_init(e);
    e->ops = &client_ops;
    e->ctx = e;
    e->probe_interval_ms = cfg->probe_interval_ms ? cfg->probe_interval_ms : 500;
    tw_client_opts o;
    tw_client_opts_init(&o);
    o.rpc_url = cfg->rpc_url;
    o.pub_url = cfg->pub_url;
    o.api_key = cfg->api_key;
    o.timeout_ms = cfg->request_timeout_ms;
    tw_status st = tw_client_open(&o, &e->client, err);
    if (st != TW_OK)
        return tw_error_wrap(err, st, "engine at %s", cfg->rpc_url ? cfg->rpc_url : "default");
    /* The probe client has no streams and a short timeout, so that a dead
     * engine is noticed in about a second. */
    o.pub_url = "";
    o.timeout_ms = cfg->probe_timeout_ms ? cfg->probe_timeout_ms : 1000;
    st = tw_client_open(&o, &e->quick, err);
    if (st != TW_OK) {
        tw_client_close(e->client);
        e->client = NULL;
        return tw_error_wrap(err, st, "engine at %s", cfg->rpc_url ? cfg->rpc_url : "default");
    }
    probe_once(e);
    if (pthread_create(&e->prober, NULL, prober_main, e) != 0) {
        tw_client_close(e->quick);
        tw_client_close(e->client);
        e->quick = e->client = NULL;
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "cannot start the engine probe thread");
    }
    e->prober_running = true;
    return TW_OK;
}

void tw_bridge_engine_close(tw_bridge_engine *e)
{
    if (e->prober_running) {
        pthread_mutex_lock(&e->mu);
        e->stopping = true;
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->prober, NULL);
        e->prober_running = false;
    }
    tw_client_close(e->quick);
    tw_client_close(e->client);
    e->quick = e->client = NULL;
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
}

static tw_status engine_down(tw_bridge_apierr *ae)
{
    return tw_bridge_fail(ae, TW_UNAVAILABLE, NULL, "engine_unavailable",
                          "The inference engine is not reachable; retry shortly.");
}

/* The engine's refusal, as an API error. NOT_FOUND from Generate is nearly
 * always an unknown model, which OpenAI reports with its own code. */
static tw_status engine_refused(tw_status st, const char *msg, tw_bridge_apierr *ae)
{
    const char *code = NULL;
    if (st == TW_NOT_FOUND)
        code = "model_not_found";
    else if (st == TW_RESOURCE_EXHAUSTED)
        code = "rate_limit_exceeded";
    else if (st == TW_OUT_OF_RANGE)
        code = "context_length_exceeded";
    else if (st == TW_UNAUTHENTICATED || st == TW_PERMISSION_DENIED) {
        /* The bridge's own engine key is wrong: a server fault, not the
         * caller's, so it must not read as a bad API key to the caller. */
        return tw_bridge_fail_http(ae, TW_INTERNAL, 500, NULL, NULL, "engine_auth",
                                   "The engine refused the bridge's credentials: %s", msg);
    }
    return tw_bridge_fail(ae, st, NULL, code, "%s", msg && msg[0] ? msg : tw_status_name(st));
}

tw_status tw_bridge_engine_call(tw_bridge_engine *e, const Tokenwire__V1__Request *req,
                                bool quick, Tokenwire__V1__Reply **reply,
                                tw_bridge_apierr *ae)
{
    *reply = NULL;
    if (!tw_bridge_engine_up(e))
        return engine_down(ae);
    tw_err err = {{0}};
    Tokenwire__V1__Reply *rep = NULL;
    tw_status st = (quick ? e->ops->quick_call : e->ops->call)(e->ctx, req, &rep, &err);
    if (!rep) {
        if (st == TW_OK)
            return tw_bridge_fail(ae, TW_INTERNAL, NULL, NULL, "The engine sent no reply.");
        if (st == TW_UNAVAILABLE) {
            atomic_store(&e->up, 0);
            return engine_down(ae);
        }
        if (st == TW_DEADLINE_EXCEEDED)
            return tw_bridge_fail(ae, st, NULL, "timeout",
                                  "The engine did not answer in time: %s", err.msg);
        return tw_bridge_fail(ae, TW_INTERNAL, NULL, NULL, "Engine call failed: %s", err.msg);
    }
    if (st != TW_OK) {
        tw_bridge_apierr tmp;
        engine_refused(st, err.msg, &tmp);
        if (ae)
            *ae = tmp;
        tw_wire_free_reply(rep);
        return st;
    }
    *reply = rep;
    return TW_OK;
}

tw_status tw_bridge_engine_stream(tw_bridge_engine *e, const Tokenwire__V1__GenerateRequest *m,
                                  tw_client_chunk_fn fn, void *user, tw_bridge_apierr *ae)
{
    if (!tw_bridge_engine_up(e))
        return engine_down(ae);
    tw_err err = {{0}};
    tw_status st = e->ops->stream(e->ctx, m, fn, user, &err);
    if (st == TW_OK || st == TW_CANCELLED)
        return st;
    if (st == TW_UNAVAILABLE) {
        atomic_store(&e->up, 0);
        engine_down(ae);
        return st;
    }
    if (st == TW_DEADLINE_EXCEEDED) {
        tw_bridge_fail(ae, st, NULL, "timeout", "The engine did not answer in time: %s",
                       err.msg);
        return st;
    }
    engine_refused(st, err.msg, ae);
    return st;
}

tw_status tw_bridge_engine_models(tw_bridge_engine *e, Tokenwire__V1__Reply **reply,
                                  tw_bridge_apierr *ae)
{
    Tokenwire__V1__ListModelsRequest lm = TOKENWIRE__V1__LIST_MODELS_REQUEST__INIT;
    Tokenwire__V1__Request req = TOKENWIRE__V1__REQUEST__INIT;
    req.method_case = TOKENWIRE__V1__REQUEST__METHOD_LIST_MODELS;
    req.list_models = &lm;
    tw_status st = tw_bridge_engine_call(e, &req, true, reply, ae);
    if (st != TW_OK)
        return st;
    if ((*reply)->result_case != TOKENWIRE__V1__REPLY__RESULT_LIST_MODELS) {
        tw_wire_free_reply(*reply);
        *reply = NULL;
        return tw_bridge_fail(ae, TW_INTERNAL, NULL, NULL,
                              "The engine answered with an unexpected result.");
    }
    return TW_OK;
}

const Tokenwire__V1__ModelInfo *tw_bridge_model_named(const Tokenwire__V1__ListModelsReply *l,
                                                      const char *name)
{
    for (size_t i = 0; i < l->n_models; i++) {
        const Tokenwire__V1__ModelInfo *m = l->models[i];
        if (name && *name ? m->name && strcmp(m->name, name) == 0
                          : m->name && (m->is_default || l->n_models == 1))
            return m;
    }
    return NULL;
}
