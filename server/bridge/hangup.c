#include "hangup.h"

#include <openssl/rand.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

/* On an NNG thread: only wakes the helper, which may block on the engine. */
static void client_gone(void *arg)
{
    tw_bridge_hangup *h = arg;
    pthread_mutex_lock(&h->mu);
    h->gone = true;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

/* How long the helper waits before asking again for a Generate the engine
 * did not know yet. */
#define RETRY_MS 50

/* True when the engine stopped the Generate. */
static bool cancel_one(tw_bridge *b, uint64_t id)
{
    Tokenwire__V1__CancelRequest c = TOKENWIRE__V1__CANCEL_REQUEST__INIT;
    c.has_request_id = 1;
    c.request_id = id;
    Tokenwire__V1__Request req = TOKENWIRE__V1__REQUEST__INIT;
    req.method_case = TOKENWIRE__V1__REQUEST__METHOD_CANCEL;
    req.cancel = &c;
    Tokenwire__V1__Reply *rep = NULL;
    tw_bridge_apierr ae;
    bool stopped = false;
    if (tw_bridge_engine_call(b->engine, &req, true, &rep, &ae) == TW_OK) {
        stopped = rep->result_case == TOKENWIRE__V1__REPLY__RESULT_CANCEL && rep->cancel->cancelled;
        tw_wire_free_reply(rep);
    }
    if (stopped)
        atomic_fetch_add(&b->metrics.hangups_cancelled, 1);
    return stopped;
}

/* Waits for the answer's end; once the client is gone, cancels every
 * Generate tracked, asking again after RETRY_MS for those the engine did
 * not know yet, until the answer is done. */
static void *helper_main(void *arg)
{
    tw_bridge_hangup *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->done && !h->gone)
        pthread_cond_wait(&h->cv, &h->mu);
    while (!h->done) {
        bool all = true;
        for (size_t i = 0; i < h->n_ids && !h->done; i++) {
            if (h->cancelled[i])
                continue;
            uint64_t id = h->ids[i];
            pthread_mutex_unlock(&h->mu);
            bool stopped = cancel_one(h->b, id);
            pthread_mutex_lock(&h->mu);
            h->cancelled[i] = stopped;
            all &= stopped;
        }
        /* no Generate is tracked once the client is gone: when every one
         * is stopped, only the answer's end is left to wait for */
        while (all && !h->done)
            pthread_cond_wait(&h->cv, &h->mu);
        if (h->done)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += RETRY_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&h->cv, &h->mu, &ts);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

void tw_bridge_hangup_begin(tw_bridge_hangup *h, tw_bridge *b, const tw_bridge_sink *sink)
{
    memset(h, 0, sizeof *h);
    h->b = b;
    h->sink = sink;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    if (!sink || !sink->watch)
        return;
    if (pthread_create(&h->helper, NULL, helper_main, h) != 0)
        return;
    if (sink->watch(sink->ctx, client_gone, h) != 0) {
        pthread_mutex_lock(&h->mu);
        h->done = true;
        pthread_cond_signal(&h->cv);
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->helper, NULL);
        return;
    }
    h->watching = true;
}

bool tw_bridge_hangup_track(tw_bridge_hangup *h, Tokenwire__V1__Request *req)
{
    /* random, so other callers' ids (the client library counts up) and
     * other bridges' do not meet it; a counter if the generator fails */
    static atomic_uint_fast64_t fallback = 1ull << 63;
    uint64_t id = 0;
    if (RAND_bytes((unsigned char *)&id, sizeof id) != 1 || id == 0)
        id = atomic_fetch_add(&fallback, 1);
    req->has_request_id = 1;
    req->request_id = id;
    pthread_mutex_lock(&h->mu);
    bool gone = h->gone;
    /* a new slot, else one whose Generate ended (none is reused once the
     * client is gone: the helper owns the slots then) */
    size_t slot = h->n_ids;
    for (size_t i = 0; slot == TW_BRIDGE_MAX_PROMPTS && i < h->n_ids; i++)
        if (h->cancelled[i])
            slot = i;
    if (!gone && slot < TW_BRIDGE_MAX_PROMPTS) {
        h->ids[slot] = id;
        h->cancelled[slot] = false;
        h->n_ids += slot == h->n_ids;
        pthread_cond_signal(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
    return !gone;
}

void tw_bridge_hangup_untrack(tw_bridge_hangup *h, const Tokenwire__V1__Request *req)
{
    pthread_mutex_lock(&h->mu);
    for (size_t i = 0; i < h->n_ids; i++)
        if (h->ids[i] == req->request_id)
            h->cancelled[i] = true;
    pthread_mutex_unlock(&h->mu);
}

void tw_bridge_hangup_end(tw_bridge_hangup *h)
{
    if (h->watching) {
        h->sink->unwatch(h->sink->ctx); /* no client_gone runs after this */
        pthread_mutex_lock(&h->mu);
        h->done = true;
        pthread_cond_signal(&h->cv);
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->helper, NULL);
    }
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
}
