/* The RPC and PUB side of tokenwired.
 *
 * One REP socket listens on every configured URL and is served through a
 * fixed set of workers, each owning one nng_ctx and one nng_aio. A worker
 * loops receive -> handle -> send entirely through aio callbacks: a handler
 * either answers at once (twd_worker_reply) or keeps the worker busy and
 * answers later from another thread (the engine's chunk callback for
 * Generate, a timer or a stream wake-up for Resume, a loader thread for
 * LoadModel). A slow call therefore holds one worker, never the others.
 *
 * Every received message leads to exactly one reply on its context.
 */
#ifndef TWD_SERVER_H
#define TWD_SERVER_H

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "auth.h"
#include "config.h"
#include "listeners.h"
#include "loads.h"
#include "streams.h"
#include "tokenwire/wire.h"
#include "tw/engine.h"

typedef struct twd_server twd_server;
typedef struct twd_worker twd_worker;
typedef struct twd_gen twd_gen;

typedef enum twd_worker_state {
    TWD_W_IDLE = 0,
    TWD_W_RECV,
    TWD_W_BUSY, /* a handler owns the request and will reply */
    TWD_W_SEND,
} twd_worker_state;

struct twd_worker {
    twd_server *srv;
    nng_ctx ctx;
    nng_aio *aio;   /* receive and send */
    nng_aio *timer; /* Resume's long poll */
    twd_worker_state state;
    uint64_t request_id;
    /* Resume waiting for chunks. */
    twd_waiter waiter;
    char resume_id[TW_WIRE_STREAM_ID_MAX + 1];
    uint64_t resume_from;
    /* A non-streaming generation answering through this worker, and its
     * engine request id (both guarded by the server's gen_mu). */
    twd_gen *gen;
    uint64_t gen_engine_req;
    /* LoadModel / UnloadModel run on a detached thread of their own. */
    Tokenwire__V1__Request *job_req;
};

struct twd_server {
    const twd_config *cfg;
    tw_engine *engine;
    twd_auth auth;
    twd_streams *streams;
    twd_loads *loads; /* LoadModel jobs not in the engine yet */
    tw_wire_limits limits;
    nng_socket rep;
    nng_socket pub;
    nng_tls_config *tls;
    twd_listeners listeners;
    twd_worker *workers;
    size_t n_workers;
    nng_aio *reaper;
    uint64_t start_ms;
    atomic_bool draining;
    atomic_uint generations; /* running or queued */
    atomic_uint jobs;        /* loader threads running */
    atomic_uint engine_users; /* RPC handlers inside the engine right now */
    /* Model jobs holding one of the job slots: taken before the thread
     * starts, given back just before a job answers (or, for a background
     * load, when it ends), so that a caller who got the answer can start
     * the next job at once even while the thread is still winding down. */
    atomic_uint job_slots;
    atomic_ullong chunks_published;
    atomic_ullong resumes_served;
    pthread_mutex_t gen_mu; /* guards the non-streaming generations' worker links */
};

/* Opens the sockets, listens, and starts every worker. */
tw_status twd_server_start(twd_server *s, const twd_config *cfg, tw_engine *engine, tw_err *err);

/* Refuses every call that would reach the engine from now on (answered
 * UNAVAILABLE) and waits for the model jobs and the handlers already inside
 * the engine. Call before destroying the engine. */
void twd_server_drain(twd_server *s);

/* Closes the sockets and frees everything. The engine must already be
 * destroyed, so that no chunk callback can run. */
void twd_server_stop(twd_server *s);

/* Milliseconds and microseconds since the Unix epoch. */
uint64_t twd_now_ms(void);
uint64_t twd_now_us(void);

/* Sends rep as the answer of w's request (version and request_id filled in)
 * and returns w to receiving. rep stays the caller's. Any thread. */
void twd_worker_reply(twd_worker *w, Tokenwire__V1__Reply *rep);

/* Answers w's request with an error status. */
void twd_worker_fail(twd_worker *w, tw_status code, const char *msg);

/* Method handlers (methods.c, generate.c). Each takes ownership of answering
 * w; req is freed by the caller after the handler returns, so a handler that
 * answers later copies what it needs. */
void twd_handle_health(twd_worker *w, const Tokenwire__V1__Request *req);
void twd_handle_list_models(twd_worker *w, const Tokenwire__V1__Request *req);
void twd_handle_stats(twd_worker *w, const Tokenwire__V1__Request *req);
void twd_handle_tokenize(twd_worker *w, const Tokenwire__V1__Request *req);
void twd_handle_detokenize(twd_worker *w, const Tokenwire__V1__Request *req);
void twd_handle_cancel(twd_worker *w, const Tokenwire__V1__Request *req);
void twd_handle_resume(twd_worker *w, const Tokenwire__V1__Request *req);
void twd_handle_generate(twd_worker *w, const Tokenwire__V1__Request *req);
/* LoadModel / UnloadModel: takes ownership of req (freed by the job). */
void twd_handle_model_job(twd_worker *w, Tokenwire__V1__Request *req);

/* Cancels the non-streaming generation answering request_id, if any. */
bool twd_cancel_request_id(twd_server *s, uint64_t request_id);

/* Resume's timer callback. */
void twd_resume_timer_cb(void *arg);

#endif
