/* libtokenwire's client of the tokenwired engine.
 *
 * A tw_client holds one REQ socket dialed to the engine's RPC URL and one SUB
 * socket dialed to its PUB URL (tcp://, ipc:// or tls+tcp://). Both redial
 * on their own when the engine restarts; a call made while the engine is
 * away goes out once it is back (within the call's timeout). A call whose
 * connection drops after its request went out is sent again, within its
 * timeout, when it only reads (Tokenize, Detokenize, ListModels, Health,
 * Stats, Resume); any other fails with UNAVAILABLE ("Connection reset"), as
 * the engine may have acted on it (a Generate is never run twice).
 *
 * Thread-safety: one tw_client may be used by any number of threads at once.
 * Every call opens its own NNG context on the shared sockets, so calls never
 * wait for one another. tw_client_close must not race with calls in flight.
 *
 * Results: a call that got a Reply from the engine returns the Reply's status
 * code (TW_OK on success) and hands the Reply to the caller in *reply (free it
 * with tw_wire_free_reply), with the engine's message in err when the code is
 * not TW_OK. A call that got no Reply returns, with *reply NULL:
 * UNAVAILABLE when no connection to the engine took the request within the
 * timeout (engine down or unreachable), DEADLINE_EXCEEDED when the request
 * was sent but no reply came in time, INVALID_ARGUMENT when the reply does
 * not decode.
 */
#ifndef TOKENWIRE_CLIENT_H
#define TOKENWIRE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "tokenwire/wire.h"

#define TW_CLIENT_DEFAULT_RPC_URL "tcp://127.0.0.1:7470"
#define TW_CLIENT_DEFAULT_PUB_URL "tcp://127.0.0.1:7471"
#define TW_CLIENT_DEFAULT_TIMEOUT_MS 30000u

/* How to reach the engine; start from tw_client_opts_init(). Strings are
 * copied by tw_client_open. */
typedef struct tw_client_opts {
    const char *rpc_url;         /* NULL: TW_CLIENT_DEFAULT_RPC_URL */
    const char *pub_url;         /* NULL: TW_CLIENT_DEFAULT_PUB_URL; "": no streaming */
    const char *api_key;         /* sent as auth_token; NULL: none */
    const char *tls_ca_file;     /* PEM CA bundle, required for tls+tcp:// URLs */
    const char *tls_server_name; /* name the certificate must carry; NULL: the URL's host */
    uint32_t timeout_ms;         /* per call; 0: TW_CLIENT_DEFAULT_TIMEOUT_MS */
    uint32_t stream_poll_ms;     /* a stream silent this long is polled with Resume (0: 500) */
    size_t compress_threshold;   /* zstd-compress requests larger than this; 0: never */
    tw_wire_limits limits;       /* bounds on replies and chunks (zero: defaults) */
} tw_client_opts;

void tw_client_opts_init(tw_client_opts *o);

typedef struct tw_client tw_client;

/* Creates a client and starts dialing. Does not wait for the engine: calls
 * made before it is reachable wait up to their timeout. INVALID_ARGUMENT for
 * an unusable URL or TLS setting. *out is freed with tw_client_close. */
tw_status tw_client_open(const tw_client_opts *o, tw_client **out, tw_err *err);

/* Closes the sockets and frees the client. NULL is allowed. Returns within
 * about two seconds even where NNG's close does not (NNG 1.5 can leave a
 * close waiting forever on a message that was arriving as it began); such a
 * close is left to finish on its own thread, and tw_client_abandoned_closes
 * counts it. */
void tw_client_close(tw_client *c);

/* How many closes this process has left unfinished (see tw_client_close). */
int tw_client_abandoned_closes(void);

/* Releases NNG's global state (nng_fini), waiting for closed sockets to be
 * freed, as a leak check at exit wants; does nothing after a close was left
 * unfinished, which nng_fini would wait on forever. Call at most once, after
 * every client is closed. */
void tw_client_fini(void);

/* Sends req and waits for its Reply (see "Results" above). The client fills
 * in what req leaves unset: version, a fresh request_id, the API key, and for
 * everything but a streaming Generate a deadline of now + timeout. req is
 * not modified. Blocks up to the timeout. */
tw_status tw_client_call(tw_client *c, const Tokenwire__V1__Request *req,
                         Tokenwire__V1__Reply **reply, tw_err *err);

/* One blocking call per method; the argument is borrowed for the call and may
 * be NULL for methods without parameters (defaults). Same results as
 * tw_client_call. tw_client_generate is the non-streaming form: a request
 * with stream = true is refused with INVALID_ARGUMENT (use
 * tw_client_generate_stream). */
tw_status tw_client_generate(tw_client *c, const Tokenwire__V1__GenerateRequest *m,
                             Tokenwire__V1__Reply **reply, tw_err *err);
tw_status tw_client_tokenize(tw_client *c, const Tokenwire__V1__TokenizeRequest *m,
                             Tokenwire__V1__Reply **reply, tw_err *err);
tw_status tw_client_detokenize(tw_client *c, const Tokenwire__V1__DetokenizeRequest *m,
                               Tokenwire__V1__Reply **reply, tw_err *err);
tw_status tw_client_list_models(tw_client *c, const Tokenwire__V1__ListModelsRequest *m,
                                Tokenwire__V1__Reply **reply, tw_err *err);
tw_status tw_client_load_model(tw_client *c, const Tokenwire__V1__LoadModelRequest *m,
                               Tokenwire__V1__Reply **reply, tw_err *err);
tw_status tw_client_unload_model(tw_client *c, const Tokenwire__V1__UnloadModelRequest *m,
                                 Tokenwire__V1__Reply **reply, tw_err *err);
tw_status tw_client_health(tw_client *c, const Tokenwire__V1__HealthRequest *m,
                           Tokenwire__V1__Reply **reply, tw_err *err);
tw_status tw_client_stats(tw_client *c, const Tokenwire__V1__StatsRequest *m,
                          Tokenwire__V1__Reply **reply, tw_err *err);
tw_status tw_client_cancel(tw_client *c, const Tokenwire__V1__CancelRequest *m,
                           Tokenwire__V1__Reply **reply, tw_err *err);
tw_status tw_client_resume(tw_client *c, const Tokenwire__V1__ResumeRequest *m,
                           Tokenwire__V1__Reply **reply, tw_err *err);

/* Receives the chunks of a stream, in order, each exactly once. The chunk is
 * valid only during the call. Return 0 to go on; anything else cancels the
 * generation and makes tw_client_generate_stream return TW_CANCELLED. */
typedef int (*tw_client_chunk_fn)(void *user, const Tokenwire__V1__StreamChunk *chunk);

/* Streams a generation without losing a chunk. It subscribes to the stream's
 * topic before sending Generate{stream = true}, delivers every chunk to fn in
 * sequence order exactly once, fills any gap (a dropped PUB message, a late
 * subscription, a silent stream) with Resume, and returns when the final
 * chunk has been delivered: TW_OK, or the code the final chunk's error
 * carries. m->stream_id, when set, names the stream; otherwise the client
 * picks a random id. The id used is copied to stream_id_out when it is not
 * NULL (room for TW_WIRE_STREAM_ID_MAX + 1 bytes). Blocks until the stream
 * ends; the per-call timeout bounds each RPC and the time the stream may
 * make no progress while the engine is unreachable. DATA_LOSS when chunks
 * the caller needs have expired on the engine; NOT_FOUND when the engine no
 * longer knows the stream (it restarted). Requires a pub_url. */
tw_status tw_client_generate_stream(tw_client *c, const Tokenwire__V1__GenerateRequest *m,
                                    tw_client_chunk_fn fn, void *user, char *stream_id_out,
                                    tw_err *err);

/* Watches every stream the engine publishes (topic prefix "tok/") and calls
 * fn for each chunk as it arrives (no ordering or gap filling across
 * streams: a watcher is an observer). Returns when fn returns nonzero
 * (TW_OK), or after idle_ms without any chunk when idle_ms is not 0
 * (DEADLINE_EXCEEDED). Blocks. */
tw_status tw_client_watch(tw_client *c, tw_client_chunk_fn fn, void *user, uint32_t idle_ms,
                          tw_err *err);

#endif
