/* The bridge's own counters, and the Prometheus text of /metrics.
 *
 * Counters are atomics updated from any worker thread without locks.
 */
#ifndef TW_BRIDGE_METRICS_H
#define TW_BRIDGE_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenwire.pb-c.h"

/* The routes, as they are labelled in metrics. */
typedef enum tw_bridge_route {
    TW_BRIDGE_ROUTE_CHAT,
    TW_BRIDGE_ROUTE_COMPLETIONS,
    TW_BRIDGE_ROUTE_MODELS,
    TW_BRIDGE_ROUTE_MODEL,
    TW_BRIDGE_ROUTE_PULL,
    TW_BRIDGE_ROUTE_HEALTH,
    TW_BRIDGE_ROUTE_METRICS,
    TW_BRIDGE_ROUTE_TOKENIZE,
    TW_BRIDGE_ROUTE_DETOKENIZE,
    TW_BRIDGE_ROUTE_RESPONSES,
    TW_BRIDGE_ROUTE_RESPONSES_KEPT, /* /v1/responses/{id}... */
    TW_BRIDGE_ROUTE_EMBEDDINGS,
    TW_BRIDGE_ROUTE_OTHER, /* unknown paths */
    TW_BRIDGE_ROUTE_COUNT
} tw_bridge_route;

/* The HTTP statuses counted apart; everything else is "other". */
#define TW_BRIDGE_METRIC_CODES 12

/* The upper bounds of the stream delivery histogram's buckets (metrics.c),
 * past which one more counts the rest. */
#define TW_BRIDGE_DELIVERY_BUCKETS 10

typedef struct tw_bridge_metrics {
    atomic_uint_fast64_t requests[TW_BRIDGE_ROUTE_COUNT][TW_BRIDGE_METRIC_CODES];
    atomic_uint_fast64_t duration_us[TW_BRIDGE_ROUTE_COUNT];
    atomic_uint_fast64_t stream_events;   /* SSE data events written */
    atomic_uint_fast64_t streams_aborted; /* streams whose client went away */
    /* Generates of whole answers cancelled because their client hung up */
    atomic_uint_fast64_t hangups_cancelled;
    atomic_uint_fast64_t rejected_busy;   /* answered 429 for want of a worker */
    atomic_int inflight;
    atomic_int streams_active;
    /* the kept /v1/responses answers, read from the store at each scrape */
    atomic_size_t responses_kept, responses_kept_bytes, responses_journal_errors;
    atomic_size_t responses_journal_syncs;
    /* stream chunks by the time from the engine's hand-over to their
     * arrival here (each in its own bucket; the renderer sums them) */
    atomic_uint_fast64_t delivery[TW_BRIDGE_DELIVERY_BUCKETS + 1];
    atomic_uint_fast64_t delivery_us_sum;
} tw_bridge_metrics;

void tw_bridge_metrics_init(tw_bridge_metrics *m);

/* Counts one answered request. */
void tw_bridge_metrics_request(tw_bridge_metrics *m, tw_bridge_route route, int http_status,
                               uint64_t duration_us);

/* Counts a stream chunk's delivery: now against the time the engine says
 * it handed the chunk over (emitted_unix_us). A chunk without that time,
 * or one read as from the future or from more than an hour ago (another
 * host's clock), is left out. */
void tw_bridge_metrics_delivery(tw_bridge_metrics *m, const Tokenwire__V1__StreamChunk *chunk);

/* The label of a route ("chat_completions", ...). */
const char *tw_bridge_route_name(tw_bridge_route route);

/* Renders the Prometheus text exposition of the bridge counters, whether the
 * engine is up, and the engine's stats when given (NULL: left out). Returns a
 * malloc'd NUL-terminated string, or NULL when memory runs out. */
char *tw_bridge_metrics_render(tw_bridge_metrics *m, bool engine_up,
                               const Tokenwire__V1__StatsReply *stats);

#endif
