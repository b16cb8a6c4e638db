/* The bridge's view of the engine: RPCs and streams through libtokenwire,
 * plus a reachability flag kept fresh by a background probe.
 *
 * While the engine is unreachable every call fails at once with 503 (rather
 * than waiting out the request timeout); the probe notices when it is back.
 * The transport sits behind a small table of operations so that tests can
 * put a scripted engine in its place.
 *
 * Thread-safety: all functions may be called from any number of threads
 * after tw_bridge_engine_open / tw_bridge_engine_init_ops returned.
 */
#ifndef TW_BRIDGE_ENGINE_H
#define TW_BRIDGE_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "api_error.h"
#include "tokenwire/client.h"

/* The transport. Each function follows tw_client_call's contract: a Reply
 * (freed with tw_wire_free_reply) whenever the engine answered. */
typedef struct tw_bridge_engine_ops {
    /* An RPC bounded by the request timeout. */
    tw_status (*call)(void *ctx, const Tokenwire__V1__Request *req, Tokenwire__V1__Reply **reply,
                      tw_err *err);
    /* An RPC bounded by the short probe timeout (Health, Stats). */
    tw_status (*quick_call)(void *ctx, const Tokenwire__V1__Request *req,
                            Tokenwire__V1__Reply **reply, tw_err *err);
    /* A streaming Generate, as tw_client_generate_stream. */
    tw_status (*stream)(void *ctx, const Tokenwire__V1__GenerateRequest *m,
                        tw_client_chunk_fn fn, void *user, tw_err *err);
} tw_bridge_engine_ops;

typedef struct tw_bridge_engine_cfg {
    const char *rpc_url;
    const char *pub_url;
    const char *api_key;           /* NULL: none */
    uint32_t request_timeout_ms;   /* bounds generation calls */
    uint32_t probe_timeout_ms;     /* bounds Health/Stats calls */
    uint32_t probe_interval_ms;    /* how often reachability is checked */
} tw_bridge_engine_cfg;

typedef struct tw_bridge_engine {
    const tw_bridge_engine_ops *ops;
    void *ctx;
    atomic_int up;                 /* 1 while the engine answers */
    /* The real transport (NULL with custom ops). */
    tw_client *client, *quick;
    uint32_t probe_interval_ms;
    pthread_t prober;
    bool prober_running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping;
    char version[64];              /* the engine's version string, for fingerprints */
} tw_bridge_engine;

/* Opens the clients, probes the engine once and starts the background probe.
 * Fails only for an unusable configuration (bad URL): an engine that is down
 * is not an error. */
tw_status tw_bridge_engine_open(tw_bridge_engine *e, const tw_bridge_engine_cfg *cfg,
                                tw_err *err);

/* Uses ops/ctx as the transport, with no probe thread; the engine starts
 * "up". For tests. */
void tw_bridge_engine_init_ops(tw_bridge_engine *e, const tw_bridge_engine_ops *ops, void *ctx);

/* Stops the probe and closes the clients. No call may be in flight. */
void tw_bridge_engine_close(tw_bridge_engine *e);

/* True while the engine is believed reachable. */
bool tw_bridge_engine_up(tw_bridge_engine *e);

/* Copies the engine's version (from its last Health answer) into buf. */
void tw_bridge_engine_version(tw_bridge_engine *e, char *buf, size_t cap);

/* Sends req. On TW_OK *reply holds the engine's successful Reply. Otherwise
 * *reply is NULL and ae says what to answer: 503 when the engine is down or
 * stopped answering (it is then marked down), the engine's own status and
 * message when it refused the call. quick selects the short timeout. */
tw_status tw_bridge_engine_call(tw_bridge_engine *e, const Tokenwire__V1__Request *req,
                                bool quick, Tokenwire__V1__Reply **reply,
                                tw_bridge_apierr *ae);

/* ListModels through tw_bridge_engine_call (quick); on TW_OK *reply holds
 * a ListModels result. */
tw_status tw_bridge_engine_models(tw_bridge_engine *e, Tokenwire__V1__Reply **reply,
                                  tw_bridge_apierr *ae);

/* The entry of l a request naming `name` goes to: that name's, or for
 * NULL or "" the engine's default (the only model when it marks none);
 * NULL when there is none. */
const Tokenwire__V1__ModelInfo *tw_bridge_model_named(const Tokenwire__V1__ListModelsReply *l,
                                                      const char *name);

/* Streams m, handing chunks to fn in order. On failure ae is filled as for
 * tw_bridge_engine_call; TW_CANCELLED means fn asked to stop. */
tw_status tw_bridge_engine_stream(tw_bridge_engine *e, const Tokenwire__V1__GenerateRequest *m,
                                  tw_client_chunk_fn fn, void *user, tw_bridge_apierr *ae);

#endif
