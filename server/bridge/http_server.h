/* The bridge's HTTP front: NNG's HTTP server, a pool of worker threads, and
 * server-sent events on hijacked connections.
 *
 * NNG calls the request handler on its own I/O threads, which must never
 * block; the handler only queues the request. Workers read the body, run
 * tw_bridge_handle (which may wait minutes on the engine) and complete the
 * request. A stream hijacks its connection: the worker writes the
 * event-stream headers and events itself and closes the connection at the
 * end. When every worker is busy and the queue is full, requests get 429 at
 * once.
 */
#ifndef TW_BRIDGE_HTTP_SERVER_H
#define TW_BRIDGE_HTTP_SERVER_H

#include "bridge.h"

typedef struct tw_bridge_http tw_bridge_http;

/* Starts listening on b->cfg->listen with b->cfg->workers threads. b must
 * outlive the server. INVALID_ARGUMENT for a bad URL, UNAVAILABLE when the
 * address cannot be bound. */
tw_status tw_bridge_http_start(tw_bridge *b, tw_bridge_http **out, tw_err *err);

/* Stops accepting, lets the workers finish what they hold, frees the
 * server. Blocks until then. NULL is allowed. */
void tw_bridge_http_stop(tw_bridge_http *h);

#endif
