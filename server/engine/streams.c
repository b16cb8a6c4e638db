#include "streams.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct chunk_rec {
    uint8_t *data;
    size_t len;
} chunk_rec;

struct twd_stream {
    struct twd_stream *hnext; /* hash chain */
    char *id;
    uint64_t engine_req;
    /* recs[head..n) hold sequence numbers first_seq .. next_seq-1. */
    chunk_rec *recs;
    size_t head, n, cap;
    uint64_t first_seq;
    uint64_t next_seq;
    size_t bytes;
    bool finished;
    bool attached; /* the generation feeding it has been submitted */
    uint64_t finished_at_ms;
    twd_waiter waiters; /* sentinel of a circular list */
};

struct twd_streams {
    pthread_mutex_t mu;
    twd_stream **buckets;
    size_t n_buckets; /* a power of two */
    size_t count;
    uint32_t max_streams;
    size_t max_stream_bytes;
    uint32_t grace_ms;
};

static uint64_t hash_id(const char *id)
{
    uint64_t h = 1469598103934665603ull;
    for (; *id; id++)
        h = (h ^ (unsigned char)*id) * 1099511628211ull;
    return h;
}

tw_status twd_streams_create(uint32_t max_streams, size_t max_stream_bytes, uint32_t grace_ms,
                             twd_streams **out, tw_err *err)
{
    *out = NULL;
    twd_streams *s = calloc(1, sizeof *s);
    if (!s)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    s->n_buckets = 64;
    while (s->n_buckets < max_streams && s->n_buckets < ((size_t)1 << 20))
        s->n_buckets <<= 1;
    s->buckets = calloc(s->n_buckets, sizeof *s->buckets);
    if (!s->buckets) {
        free(s);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    }
    pthread_mutex_init(&s->mu, NULL);
    s->max_streams = max_streams;
    s->max_stream_bytes = max_stream_bytes;
    s->grace_ms = grace_ms;
    *out = s;
    return TW_OK;
}

static twd_stream **find_slot(twd_streams *s, const char *id)
{
    twd_stream **p = &s->buckets[hash_id(id) & (s->n_buckets - 1)];
    while (*p && strcmp((*p)->id, id) != 0)
        p = &(*p)->hnext;
    return p;
}

/* Unlinks every waiter of st into *woken (a singly linked list through
 * next), to be woken once the lock is dropped. */
static void take_waiters(twd_stream *st, twd_waiter **woken)
{
    twd_waiter *w = st->waiters.next;
    while (w != &st->waiters) {
        twd_waiter *nx = w->next;
        w->prev = NULL;
        w->stream = NULL;
        w->next = *woken;
        *woken = w;
        w = nx;
    }
    st->waiters.next = st->waiters.prev = &st->waiters;
}

static void wake_all(twd_waiter *woken)
{
    while (woken) {
        twd_waiter *nx = woken->next;
        woken->next = NULL;
        woken->wake(woken->arg);
        woken = nx;
    }
}

static void free_stream(twd_stream *st)
{
    for (size_t i = st->head; i < st->n; i++)
        free(st->recs[i].data);
    free(st->recs);
    free(st->id);
    free(st);
}

void twd_streams_destroy(twd_streams *s)
{
    if (!s)
        return;
    twd_waiter *woken = NULL;
    for (size_t b = 0; b < s->n_buckets; b++) {
        twd_stream *st = s->buckets[b];
        while (st) {
            twd_stream *nx = st->hnext;
            take_waiters(st, &woken);
            free_stream(st);
            st = nx;
        }
    }
    wake_all(woken);
    pthread_mutex_destroy(&s->mu);
    free(s->buckets);
    free(s);
}

tw_status twd_streams_open(twd_streams *s, const char *id, twd_stream **out, tw_err *err)
{
    *out = NULL;
    twd_stream *st = calloc(1, sizeof *st);
    char *dup = strdup(id);
    if (!st || !dup) {
        free(st);
        free(dup);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    }
    st->id = dup;
    st->waiters.next = st->waiters.prev = &st->waiters;
    pthread_mutex_lock(&s->mu);
    tw_status rc = TW_OK;
    twd_stream **slot = find_slot(s, id);
    if (*slot)
        rc = tw_errorf(err, TW_ALREADY_EXISTS, "stream id \"%s\" is already in use", id);
    else if (s->count >= s->max_streams)
        rc = tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                       "the engine holds %u streams already; retry later", s->max_streams);
    if (rc == TW_OK) {
        *slot = st;
        s->count++;
    }
    pthread_mutex_unlock(&s->mu);
    if (rc != TW_OK) {
        free_stream(st);
        return rc;
    }
    *out = st;
    return TW_OK;
}

static void remove_locked(twd_streams *s, twd_stream *st, twd_waiter **woken)
{
    twd_stream **slot = find_slot(s, st->id);
    if (*slot == st) {
        *slot = st->hnext;
        s->count--;
    }
    take_waiters(st, woken);
    free_stream(st);
}

void twd_streams_abandon(twd_streams *s, twd_stream *st)
{
    twd_waiter *woken = NULL;
    pthread_mutex_lock(&s->mu);
    remove_locked(s, st, &woken);
    pthread_mutex_unlock(&s->mu);
    wake_all(woken);
}

void twd_stream_set_req(twd_streams *s, twd_stream *st, uint64_t engine_req_id)
{
    pthread_mutex_lock(&s->mu);
    st->engine_req = engine_req_id;
    st->attached = true;
    pthread_mutex_unlock(&s->mu);
}

uint64_t twd_stream_next_seq(twd_streams *s, twd_stream *st)
{
    pthread_mutex_lock(&s->mu);
    uint64_t seq = st->next_seq;
    pthread_mutex_unlock(&s->mu);
    return seq;
}

const char *twd_stream_id(const twd_stream *st)
{
    return st->id;
}

/* Drops the oldest chunks until the stream fits its byte bound. */
static void trim_locked(twd_streams *s, twd_stream *st)
{
    while (st->bytes > s->max_stream_bytes && st->head < st->n) {
        chunk_rec *r = &st->recs[st->head++];
        st->bytes -= r->len;
        free(r->data);
        r->data = NULL;
        st->first_seq++;
    }
    if (st->head > 0 && st->head * 2 >= st->n) {
        memmove(st->recs, st->recs + st->head, (st->n - st->head) * sizeof *st->recs);
        st->n -= st->head;
        st->head = 0;
    }
}

tw_status twd_streams_append(twd_streams *s, twd_stream *st, const uint8_t *chunk, size_t len,
                             bool final, uint64_t now_ms, tw_err *err)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (copy && len)
        memcpy(copy, chunk, len);
    tw_status rc = TW_OK;
    twd_waiter *woken = NULL;
    pthread_mutex_lock(&s->mu);
    if (copy && st->n == st->cap) {
        size_t ncap = st->cap ? st->cap * 2 : 16;
        chunk_rec *nr = realloc(st->recs, ncap * sizeof *nr);
        if (nr) {
            st->recs = nr;
            st->cap = ncap;
        } else {
            free(copy);
            copy = NULL;
        }
    }
    if (copy) {
        st->recs[st->n++] = (chunk_rec){copy, len};
        st->bytes += len;
        trim_locked(s, st);
    } else {
        /* The sequence number is still used up: a Resume for it says
         * expired rather than silently skipping it. */
        for (size_t i = st->head; i < st->n; i++)
            free(st->recs[i].data);
        st->head = st->n = 0;
        st->bytes = 0;
        st->first_seq = st->next_seq + 1;
        rc = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory storing a stream chunk");
    }
    st->next_seq++;
    if (final) {
        st->finished = true;
        st->finished_at_ms = now_ms;
    }
    take_waiters(st, &woken);
    pthread_mutex_unlock(&s->mu);
    wake_all(woken);
    return rc;
}

void twd_resume_data_free(twd_resume_data *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->chunks[i]);
    free(d->chunks);
    free(d->lens);
    memset(d, 0, sizeof *d);
}

tw_status twd_streams_read(twd_streams *s, const char *id, uint64_t from_seq,
                           twd_resume_data *out, tw_err *err)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    twd_stream *st = *find_slot(s, id);
    if (!st) {
        pthread_mutex_unlock(&s->mu);
        return tw_errorf(err, TW_NOT_FOUND,
                         "no stream \"%s\" (unknown, or expired after its grace period)", id);
    }
    out->finished = st->finished;
    out->expired = from_seq < st->first_seq;
    uint64_t start = from_seq < st->first_seq ? st->first_seq : from_seq;
    size_t count = start < st->next_seq ? (size_t)(st->next_seq - start) : 0;
    tw_status rc = TW_OK;
    if (count) {
        out->chunks = calloc(count, sizeof *out->chunks);
        out->lens = calloc(count, sizeof *out->lens);
        if (!out->chunks || !out->lens)
            rc = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
        size_t base = st->head + (size_t)(start - st->first_seq);
        for (size_t i = 0; rc == TW_OK && i < count; i++) {
            const chunk_rec *r = &st->recs[base + i];
            out->chunks[i] = malloc(r->len ? r->len : 1);
            if (!out->chunks[i]) {
                rc = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
                break;
            }
            if (r->len)
                memcpy(out->chunks[i], r->data, r->len);
            out->lens[i] = r->len;
            out->n++;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (rc != TW_OK)
        twd_resume_data_free(out);
    return rc;
}

bool twd_streams_running_req(twd_streams *s, const char *id, uint64_t *engine_req_id)
{
    pthread_mutex_lock(&s->mu);
    twd_stream *st = *find_slot(s, id);
    bool running = st && !st->finished && st->engine_req != 0;
    if (running)
        *engine_req_id = st->engine_req;
    pthread_mutex_unlock(&s->mu);
    return running;
}

bool twd_streams_wait(twd_streams *s, const char *id, twd_waiter *w)
{
    pthread_mutex_lock(&s->mu);
    twd_stream *st = *find_slot(s, id);
    bool parked = st && !st->finished && w->from_seq >= st->next_seq;
    if (parked) {
        w->stream = st;
        w->next = &st->waiters;
        w->prev = st->waiters.prev;
        st->waiters.prev->next = w;
        st->waiters.prev = w;
    }
    pthread_mutex_unlock(&s->mu);
    return parked;
}

void twd_streams_unwait(twd_streams *s, twd_waiter *w)
{
    pthread_mutex_lock(&s->mu);
    if (w->stream && w->prev) {
        w->prev->next = w->next;
        w->next->prev = w->prev;
        w->prev = w->next = NULL;
        w->stream = NULL;
    }
    pthread_mutex_unlock(&s->mu);
}

size_t twd_streams_reap(twd_streams *s, uint64_t now_ms)
{
    size_t freed = 0;
    twd_waiter *woken = NULL;
    pthread_mutex_lock(&s->mu);
    for (size_t b = 0; b < s->n_buckets; b++) {
        twd_stream **p = &s->buckets[b];
        while (*p) {
            twd_stream *st = *p;
            if (st->finished && st->attached && now_ms >= st->finished_at_ms + s->grace_ms) {
                *p = st->hnext;
                s->count--;
                take_waiters(st, &woken);
                free_stream(st);
                freed++;
            } else {
                p = &st->hnext;
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
    wake_all(woken);
    return freed;
}

size_t twd_streams_count(twd_streams *s)
{
    pthread_mutex_lock(&s->mu);
    size_t n = s->count;
    pthread_mutex_unlock(&s->mu);
    return n;
}
