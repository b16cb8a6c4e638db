/* The bridge's request handling, independent of the HTTP server it runs in.
 *
 * tw_bridge_handle takes a request already read off the wire (method, path,
 * Authorization header, body) and produces either a whole response or, for
 * streams, writes server-sent events through a sink. The NNG HTTP glue
 * (http_server.c) and the in-process tests both drive it.
 *
 * Thread-safety: tw_bridge_handle may run on many threads at once; it
 * blocks while the engine works.
 */
#ifndef TW_BRIDGE_BRIDGE_H
#define TW_BRIDGE_BRIDGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "api_error.h"
#include "config.h"
#include "engine.h"
#include "metrics.h"
#include "request_map.h"
#include "responses_store.h"

typedef struct tw_bridge {
    const tw_bridge_config *cfg;
    tw_bridge_engine *engine;
    tw_bridge_metrics metrics;
    tw_bridge_resp_store *store; /* kept /v1/responses answers; NULL: none */
} tw_bridge;

typedef struct tw_bridge_http_req {
    const char *method;
    const char *path;          /* without the query string */
    const char *query;         /* what follows '?', "" when nothing */
    const char *authorization; /* the header, or NULL */
    const char *body;          /* NULL when there is none */
    size_t body_len;
    bool body_too_large;       /* Content-Length exceeded the limit; body not read */
} tw_bridge_http_req;

/* Where a stream goes. begin sends the 200 status line and the event-stream
 * headers; write sends bytes. Both return 0 on success and nonzero once the
 * client is gone. */
typedef struct tw_bridge_sink {
    int (*begin)(void *ctx);
    int (*write)(void *ctx, const char *data, size_t len);
    /* While a whole answer is worked on: calls gone(arg) (on another
     * thread, at most once) if the client hangs up; unwatch stops that and
     * returns once no call is left running. watch returns nonzero when it
     * cannot watch. NULL where there is no connection to watch. */
    int (*watch)(void *ctx, void (*gone)(void *arg), void *arg);
    void (*unwatch)(void *ctx);
    void *ctx;
} tw_bridge_sink;

typedef struct tw_bridge_http_resp {
    int status;
    char *body; /* malloc'd; freed by tw_bridge_http_resp_fini */
    size_t body_len;
    const char *content_type;
    const char *allow;    /* for 405: the Allow header */
    int retry_after_s;    /* for 503/429: the Retry-After header (0: none) */
    bool www_authenticate;
    bool streamed;        /* the answer went through the sink; send nothing */
    tw_bridge_route route;
} tw_bridge_http_resp;

/* Prepares b around a configuration and an engine (both borrowed). */
tw_status tw_bridge_init(tw_bridge *b, const tw_bridge_config *cfg, tw_bridge_engine *engine,
                         tw_err *err);

/* Frees what init made (the kept responses). */
void tw_bridge_fini(tw_bridge *b);

/* Answers one request; see the file comment. resp is fully written. */
void tw_bridge_handle(tw_bridge *b, const tw_bridge_http_req *rq, const tw_bridge_sink *sink,
                      tw_bridge_http_resp *resp);

void tw_bridge_http_resp_fini(tw_bridge_http_resp *resp);

/* ---- internal to the bridge's handlers ---- */

/* Sets resp to ae's error JSON with ae's status. */
void tw_bridge_resp_error(tw_bridge_http_resp *resp, const tw_bridge_apierr *ae);

/* A 405 naming the methods path allows. */
void tw_bridge_resp_bad_method(tw_bridge_http_resp *resp, const tw_bridge_http_req *rq,
                               const char *allow);

/* Sets resp to status with body j (stolen) as JSON. */
void tw_bridge_resp_json(tw_bridge_http_resp *resp, int status, json_t *j);

/* The request body as a JSON object, or a 400 in ae naming the problem
 * (invalid JSON, invalid UTF-8, nesting, not an object). */
tw_status tw_bridge_parse_body(const tw_bridge_http_req *rq, json_t **out,
                               tw_bridge_apierr *ae);

/* A new id: prefix ("chatcmpl-", "cmpl-", "resp_") and 24 random
 * characters. */
void tw_bridge_new_id(char *buf, size_t cap, const char *prefix);

/* Answers a /v1/responses request mapped to the chat request g, whole or
 * streamed, as echo (id included) says. */
struct tw_bridge_resp_echo;
void tw_bridge_answer_response(tw_bridge *b, tw_bridge_gen_request *g,
                               const struct tw_bridge_resp_echo *echo, const tw_bridge_sink *sink,
                               tw_bridge_http_resp *resp);

/* The endpoint handlers (endpoint_*.c). */
void tw_bridge_ep_generate(tw_bridge *b, tw_bridge_api_kind kind, const tw_bridge_http_req *rq,
                           const tw_bridge_sink *sink, tw_bridge_http_resp *resp);
void tw_bridge_ep_responses(tw_bridge *b, const tw_bridge_http_req *rq, const tw_bridge_sink *sink,
                            tw_bridge_http_resp *resp);
void tw_bridge_ep_embeddings(tw_bridge *b, const tw_bridge_http_req *rq, const tw_bridge_sink *sink,
                             tw_bridge_http_resp *resp);
void tw_bridge_ep_stored_response(tw_bridge *b, const tw_bridge_http_req *rq,
                                  tw_bridge_http_resp *resp);
void tw_bridge_ep_models(tw_bridge *b, const char *model_id, tw_bridge_http_resp *resp);
void tw_bridge_ep_pull(tw_bridge *b, const tw_bridge_http_req *rq, tw_bridge_http_resp *resp);
void tw_bridge_ep_health(tw_bridge *b, tw_bridge_http_resp *resp);
void tw_bridge_ep_metrics(tw_bridge *b, tw_bridge_http_resp *resp);
void tw_bridge_ep_tokenize(tw_bridge *b, const tw_bridge_http_req *rq,
                           tw_bridge_http_resp *resp);
void tw_bridge_ep_detokenize(tw_bridge *b, const tw_bridge_http_req *rq,
                             tw_bridge_http_resp *resp);

#endif
