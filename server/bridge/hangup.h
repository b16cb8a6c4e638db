/* A whole (non-streamed) answer whose HTTP client hangs up is cancelled in
 * the engine, so nobody's answer keeps costing compute (an answer made of
 * more Generates than it tracks at once, as embeddings of many inputs are,
 * untracks each as it ends and starts no more once the client is gone). The connection is
 * watched while the Generates run; a helper thread sends Cancel for each of
 * the request's Generates (by request_id) once the client is gone, again
 * every RETRY_MS for one the engine did not know yet (its Generate still on
 * the way), and is joined when the answer is done either way. */
#ifndef TW_BRIDGE_HANGUP_H
#define TW_BRIDGE_HANGUP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "bridge.h"
#include "request_map.h"

typedef struct tw_bridge_hangup {
    tw_bridge *b;
    const tw_bridge_sink *sink;
    bool watching; /* the connection is watched and the helper runs */
    pthread_t helper;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool gone, done;
    uint64_t ids[TW_BRIDGE_MAX_PROMPTS];
    /* the engine said it stopped it, or it ended (nothing to cancel) */
    bool cancelled[TW_BRIDGE_MAX_PROMPTS];
    size_t n_ids;
} tw_bridge_hangup;

/* Starts watching sink's connection (a sink without watch, or one that
 * cannot, leaves the answer unwatched). */
void tw_bridge_hangup_begin(tw_bridge_hangup *h, tw_bridge *b, const tw_bridge_sink *sink);

/* Gives req a fresh request_id and remembers it; false once the client is
 * gone (the Generate need not be sent). Thread-safe. */
bool tw_bridge_hangup_track(tw_bridge_hangup *h, Tokenwire__V1__Request *req);

/* req's Generate (tracked) has its answer: there is nothing left to cancel,
 * and its slot may take another Generate of the same answer. Thread-safe. */
void tw_bridge_hangup_untrack(tw_bridge_hangup *h, const Tokenwire__V1__Request *req);

/* Stops watching and joins the helper. */
void tw_bridge_hangup_end(tw_bridge_hangup *h);

#endif
