/* The state store's writer thread: tw_state_store_put_async() hands it a
 * serialised state so compressing and fsyncing never hold up the caller
 * (the scheduler, between prefill chunks). */
#include <stdlib.h>
#include <string.h>

#include "cache/state_store_internal.h"
#include "tw/log.h"

static void job_free(store_job *j)
{
    free(j->tokens);
    free(j->state);
    free(j);
}

static void *writer_main(void *arg)
{
    tw_state_store *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stopping)
            pthread_cond_wait(&s->cv, &s->mu);
        store_job *j = s->head;
        if (!j)
            break; /* stopping with an empty queue */
        s->head = j->next;
        if (!s->head)
            s->tail = NULL;
        s->busy = true;
        pthread_mutex_unlock(&s->mu);
        tw_err err;
        if (store_write_entry(s, j->fingerprint, j->tokens, j->n, j->state, j->len, &err) !=
            TW_OK)
            tw_warn("state store: write of a %zu-token prefix failed: %s", j->n, err.msg);
        pthread_mutex_lock(&s->mu);
        s->queued_bytes -= j->len;
        s->busy = false;
        job_free(j);
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

tw_status tw_state_store_put_async(tw_state_store *s, const char fingerprint[65],
                                   const uint32_t *tokens, size_t n, void *state, size_t len,
                                   tw_err *err)
{
    if (!s || !fingerprint || strlen(fingerprint) != 64 || (!tokens && n)) {
        free(state);
        return tw_errorf(err, TW_INVALID_ARGUMENT, "state store put: bad argument");
    }
    store_job *j = calloc(1, sizeof *j);
    uint32_t *ids = malloc(n ? n * sizeof *ids : 1);
    if (!j || !ids) {
        free(j);
        free(ids);
        free(state);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "state store: out of memory");
    }
    memcpy(j->fingerprint, fingerprint, 65);
    if (n)
        memcpy(ids, tokens, n * sizeof *ids);
    j->tokens = ids;
    j->n = n;
    j->state = state;
    j->len = len;
    pthread_mutex_lock(&s->mu);
    tw_status st = TW_OK;
    if (s->stopping)
        st = tw_errorf(err, TW_FAILED_PRECONDITION, "state store: closing");
    else if (s->queued_bytes + len > s->queue_limit)
        st = tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                       "state store: %llu bytes already wait to be written",
                       (unsigned long long)s->queued_bytes);
    else if (!s->thread_started) {
        if (pthread_create(&s->thread, NULL, writer_main, s) != 0)
            st = tw_errorf(err, TW_INTERNAL, "state store: cannot start the writer thread");
        else
            s->thread_started = true;
    }
    if (st != TW_OK) {
        pthread_mutex_unlock(&s->mu);
        job_free(j);
        return st;
    }
    if (s->tail)
        s->tail->next = j;
    else
        s->head = j;
    s->tail = j;
    s->queued_bytes += len;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return TW_OK;
}

void tw_state_store_flush(tw_state_store *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    while (s->head || s->busy)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

void store_writer_stop(tw_state_store *s)
{
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_broadcast(&s->cv);
    bool started = s->thread_started;
    pthread_mutex_unlock(&s->mu);
    if (started)
        pthread_join(s->thread, NULL);
}
