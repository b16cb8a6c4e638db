/* The stream store: every chunk a streaming generation published, kept so
 * that a caller who missed some (PUB drops under back-pressure, late
 * subscriptions) can ask for them again with Resume.
 *
 * A stream is kept while it runs and for a grace period after its final
 * chunk, then freed by twd_streams_reap. The bytes kept per stream are
 * bounded: past the bound the oldest chunks are dropped and a Resume asking
 * for them is answered "expired". The number of streams is bounded too (a
 * new stream beyond it is refused RESOURCE_EXHAUSTED).
 *
 * Threads: every function may be called from any thread; one mutex guards
 * the store. Only one thread appends to a given stream at a time (the
 * engine's scheduler), which is what makes twd_stream_next_seq meaningful.
 */
#ifndef TWD_STREAMS_H
#define TWD_STREAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/status.h"

typedef struct twd_streams twd_streams;
typedef struct twd_stream twd_stream;

/* A caller parked until a stream has something from a sequence number on.
 * Embedded in its owner; the store links it while it waits. wake is called
 * at most once per twd_streams_wait, without the store's lock held, when a
 * chunk arrives, the stream finishes or is freed. */
typedef struct twd_waiter {
    struct twd_waiter *prev, *next;
    twd_stream *stream;
    uint64_t from_seq;
    void (*wake)(void *arg);
    void *arg;
} twd_waiter;

/* What Resume returns: copies of the stored chunks (encoded StreamChunk
 * bytes, without topic) from from_seq on. Free with twd_resume_data_free. */
typedef struct twd_resume_data {
    uint8_t **chunks;
    size_t *lens;
    size_t n;
    bool finished;
    bool expired;
} twd_resume_data;

void twd_resume_data_free(twd_resume_data *d);

tw_status twd_streams_create(uint32_t max_streams, size_t max_stream_bytes, uint32_t grace_ms,
                             twd_streams **out, tw_err *err);

/* Frees every stream, waking any waiter first. No other call may run. */
void twd_streams_destroy(twd_streams *s);

/* Registers a new, empty stream. ALREADY_EXISTS when the id is taken,
 * RESOURCE_EXHAUSTED when the store is full. */
tw_status twd_streams_open(twd_streams *s, const char *id, twd_stream **out, tw_err *err);

/* Removes a stream whose generation never started (no chunk appended). */
void twd_streams_abandon(twd_streams *s, twd_stream *st);

/* Records the engine's id of the generation feeding the stream (for Cancel).
 * Until this is called the stream is never reaped, so the submitting thread
 * may still hold it when the generation has already finished. */
void twd_stream_set_req(twd_streams *s, twd_stream *st, uint64_t engine_req_id);

/* The sequence number the next chunk of st gets. */
uint64_t twd_stream_next_seq(twd_streams *s, twd_stream *st);

/* The stream's id (valid while the stream lives). */
const char *twd_stream_id(const twd_stream *st);

/* Stores a copy of chunk bytes as sequence number twd_stream_next_seq and
 * advances it; final marks the stream finished (its grace period starts at
 * now_ms). Wakes the stream's waiters. RESOURCE_EXHAUSTED when memory runs
 * out (the chunk is then only lost to Resume, the stream goes on). */
tw_status twd_streams_append(twd_streams *s, twd_stream *st, const uint8_t *chunk, size_t len,
                             bool final, uint64_t now_ms, tw_err *err);

/* Copies what Resume{id, from_seq} returns. NOT_FOUND for an unknown or
 * already freed stream. */
tw_status twd_streams_read(twd_streams *s, const char *id, uint64_t from_seq,
                           twd_resume_data *out, tw_err *err);

/* The engine request id of a stream that has not finished; false when the
 * stream is unknown or finished. */
bool twd_streams_running_req(twd_streams *s, const char *id, uint64_t *engine_req_id);

/* Parks w until stream id has a chunk at or after w->from_seq (set by the
 * caller, with wake and arg). Returns false, without parking, when that is
 * already so, the stream finished, or the stream is unknown: answer at once. */
bool twd_streams_wait(twd_streams *s, const char *id, twd_waiter *w);

/* Unparks w if it is still parked; harmless otherwise. */
void twd_streams_unwait(twd_streams *s, twd_waiter *w);

/* Frees streams whose grace period ended before now_ms; returns how many. */
size_t twd_streams_reap(twd_streams *s, uint64_t now_ms);

/* Number of streams held. */
size_t twd_streams_count(twd_streams *s);

#endif
