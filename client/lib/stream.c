/* Lossless streaming over PUB/SUB + Resume, and stream watching.
 *
 * PUB/SUB drops messages when a subscriber falls behind, and a subscription
 * made just before a Generate may not be connected yet when the first chunks
 * are published. The engine keeps every chunk of a stream until it finishes
 * (plus a grace period), so the reader here only has to know the next
 * sequence number it owes its caller: a chunk from the future means a gap,
 * which one Resume{from_seq = next} fills; a silent subscription is polled
 * with a long-polling Resume. Chunks already delivered are skipped, so each
 * reaches the caller exactly once and in order whichever path brought it.
 */
#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "tokenwire/client.h"

typedef struct stream {
    tw_client *c;
    char id[TW_WIRE_STREAM_ID_MAX + 1];
    uint64_t next; /* the sequence number owed to the caller next */
    tw_client_chunk_fn fn;
    void *user;
    bool done;
    bool cancelled;
    tw_status final_status;
    tw_err *err;
} stream;

static bool wanted(const stream *s, const Tokenwire__V1__StreamChunk *ch)
{
    return !s->done && !s->cancelled && ch->seq == s->next;
}

static void deliver(stream *s, const Tokenwire__V1__StreamChunk *ch)
{
    s->next++;
    if (s->fn(s->user, ch) != 0) {
        s->cancelled = true;
        return;
    }
    if (ch->has_final && ch->final) {
        s->done = true;
        if (ch->error && ch->error->has_code && ch->error->code != TOKENWIRE__V1__STATUS_CODE__OK) {
            tw_status code = (tw_status)ch->error->code;
            s->final_status = tw_errorf(s->err, code, "%s",
                                        ch->error->message && *ch->error->message
                                            ? ch->error->message
                                            : tw_status_name(code));
        }
    }
}

/* Asks the engine for every chunk from s->next on and delivers them. */
static tw_status fill_gap(stream *s, uint32_t wait_ms)
{
    Tokenwire__V1__ResumeRequest rr = TOKENWIRE__V1__RESUME_REQUEST__INIT;
    rr.stream_id = s->id;
    rr.has_from_seq = 1;
    rr.from_seq = s->next;
    rr.has_wait_ms = wait_ms > 0;
    rr.wait_ms = wait_ms;
    Tokenwire__V1__Reply *rep = NULL;
    tw_status st = tw_client_resume(s->c, &rr, &rep, s->err);
    if (st == TW_OK && rep->result_case != TOKENWIRE__V1__REPLY__RESULT_RESUME)
        st = tw_errorf(s->err, TW_INTERNAL, "the engine answered Resume without a result");
    if (st == TW_OK) {
        const Tokenwire__V1__ResumeReply *r = rep->resume;
        for (size_t i = 0; i < r->n_chunks; i++)
            if (wanted(s, r->chunks[i]))
                deliver(s, r->chunks[i]);
        if (!s->done && !s->cancelled && (r->expired || (r->finished && r->n_chunks == 0)))
            st = tw_errorf(s->err, TW_DATA_LOSS,
                           "chunks from %llu of stream %s have expired on the engine",
                           (unsigned long long)s->next, s->id);
    }
    tw_wire_free_reply(rep);
    return st;
}

static void random_stream_id(char *buf, size_t cap)
{
    snprintf(buf, cap, "s-%08x%08x%08x", (unsigned)nng_random(), (unsigned)nng_random(),
             (unsigned)nng_random());
}

static void send_cancel(stream *s)
{
    Tokenwire__V1__CancelRequest cr = TOKENWIRE__V1__CANCEL_REQUEST__INIT;
    cr.stream_id = s->id;
    Tokenwire__V1__Reply *rep = NULL;
    tw_client_cancel(s->c, &cr, &rep, NULL);
    tw_wire_free_reply(rep);
}

tw_status tw_client_generate_stream(tw_client *c, const Tokenwire__V1__GenerateRequest *m,
                                    tw_client_chunk_fn fn, void *user, char *stream_id_out,
                                    tw_err *err)
{
    if (!m || !fn)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "a streaming generate needs a request and a "
                                                   "chunk callback");
    if (!tw_client_has_sub(c))
        return tw_errorf(err, TW_FAILED_PRECONDITION,
                         "streaming needs the engine's PUB URL (pub_url is empty)");
    stream s = {.c = c, .fn = fn, .user = user, .final_status = TW_OK, .err = err};
    if (m->stream_id && *m->stream_id) {
        if (!tw_wire_stream_id_valid(m->stream_id))
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "invalid stream id (1..%d characters of A-Z a-z 0-9 . _ : -)",
                             TW_WIRE_STREAM_ID_MAX);
        snprintf(s.id, sizeof s.id, "%s", m->stream_id);
    } else {
        random_stream_id(s.id, sizeof s.id);
    }

    char topic[sizeof TW_WIRE_TOPIC_PREFIX + TW_WIRE_STREAM_ID_MAX + 1];
    size_t topic_len;
    tw_status st = tw_wire_stream_topic(s.id, topic, sizeof topic, &topic_len, err);
    if (st != TW_OK)
        return st;
    nng_ctx ctx;
    int rv = tw_client_sub_ctx_open(c, topic, topic_len, &ctx);
    if (rv != 0)
        return tw_errorf(err, TW_UNAVAILABLE, "cannot subscribe to %s: %s", topic,
                         nng_strerror(rv));
    nng_aio *aio = NULL;
    if ((rv = nng_aio_alloc(&aio, NULL, NULL)) != 0) {
        nng_ctx_close(ctx);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory: %s", nng_strerror(rv));
    }

    /* Subscribed first, so chunks published from now on queue up for us. */
    Tokenwire__V1__GenerateRequest g = *m;
    g.has_stream = 1;
    g.stream = 1;
    g.stream_id = s.id;
    Tokenwire__V1__Request r = TOKENWIRE__V1__REQUEST__INIT;
    r.method_case = TOKENWIRE__V1__REQUEST__METHOD_GENERATE;
    r.generate = &g;
    Tokenwire__V1__Reply *rep = NULL;
    st = tw_client_call(c, &r, &rep, err);
    tw_wire_free_reply(rep);
    if (st != TW_OK)
        goto out;
    if (stream_id_out)
        memcpy(stream_id_out, s.id, strlen(s.id) + 1);

    const uint32_t poll_ms = tw_client_poll_ms(c);
    const uint32_t timeout_ms = tw_client_timeout_ms(c);
    uint64_t last_contact = tw_client_now_unix_ms();
    while (!s.done && !s.cancelled) {
        tw_status gap = TW_OK;
        nng_aio_set_timeout(aio, (nng_duration)poll_ms);
        nng_ctx_recv(ctx, aio);
        nng_aio_wait(aio);
        rv = nng_aio_result(aio);
        if (rv == 0) {
            nng_msg *msg = nng_aio_get_msg(aio);
            Tokenwire__V1__StreamChunk *ch = NULL;
            tw_status pst = tw_wire_parse_frame(nng_msg_body(msg), nng_msg_len(msg),
                                                tw_client_limits(c), &ch, NULL);
            nng_msg_free(msg);
            if (pst != TW_OK)
                continue; /* a frame we cannot read is a gap like any other */
            last_contact = tw_client_now_unix_ms();
            if (ch->seq > s.next)
                gap = fill_gap(&s, 0);
            if (wanted(&s, ch))
                deliver(&s, ch);
            tw_wire_free_chunk(ch);
        } else if (rv == NNG_ETIMEDOUT) {
            tw_client_sub_check(c);
            gap = fill_gap(&s, poll_ms);
        } else {
            st = tw_errorf(err, TW_UNAVAILABLE, "stream %s: %s", s.id, nng_strerror(rv));
            goto out;
        }
        if (gap == TW_OK) {
            last_contact = tw_client_now_unix_ms();
        } else if (gap == TW_UNAVAILABLE || gap == TW_DEADLINE_EXCEEDED) {
            /* The engine may be restarting; give it the call timeout. */
            if (tw_client_now_unix_ms() - last_contact > timeout_ms) {
                st = gap;
                goto out;
            }
        } else {
            st = gap;
            goto out;
        }
    }
    if (s.cancelled) {
        send_cancel(&s);
        st = tw_errorf(err, TW_CANCELLED, "stream %s cancelled by the caller", s.id);
    } else {
        st = s.final_status;
    }
out:
    nng_aio_free(aio);
    nng_ctx_close(ctx);
    return st;
}

tw_status tw_client_watch(tw_client *c, tw_client_chunk_fn fn, void *user, uint32_t idle_ms,
                          tw_err *err)
{
    if (!fn)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "watch needs a chunk callback");
    if (!tw_client_has_sub(c))
        return tw_errorf(err, TW_FAILED_PRECONDITION,
                         "watching needs the engine's PUB URL (pub_url is empty)");
    nng_ctx ctx;
    int rv = tw_client_sub_ctx_open(c, TW_WIRE_TOPIC_PREFIX, strlen(TW_WIRE_TOPIC_PREFIX), &ctx);
    if (rv != 0)
        return tw_errorf(err, TW_UNAVAILABLE, "cannot subscribe: %s", nng_strerror(rv));
    nng_aio *aio = NULL;
    if ((rv = nng_aio_alloc(&aio, NULL, NULL)) != 0) {
        nng_ctx_close(ctx);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory: %s", nng_strerror(rv));
    }
    tw_status st = TW_OK;
    uint64_t heard = tw_client_now_unix_ms();
    for (;;) {
        /* Silences are cut into seconds so that a dead SUB dialer is
         * noticed (tw_client_sub_check) while nothing arrives. */
        uint64_t wait = 1000;
        if (idle_ms) {
            uint64_t quiet = tw_client_now_unix_ms() - heard;
            uint64_t left = quiet < idle_ms ? idle_ms - quiet : 1;
            wait = left < wait ? left : wait;
        }
        nng_aio_set_timeout(aio, (nng_duration)wait);
        nng_ctx_recv(ctx, aio);
        nng_aio_wait(aio);
        rv = nng_aio_result(aio);
        if (rv == NNG_ETIMEDOUT) {
            if (idle_ms && tw_client_now_unix_ms() - heard >= idle_ms) {
                st = tw_errorf(err, TW_DEADLINE_EXCEEDED, "no stream chunk within %u ms", idle_ms);
                break;
            }
            tw_client_sub_check(c);
            continue;
        }
        if (rv != 0) {
            st = tw_errorf(err, TW_UNAVAILABLE, "watch: %s", nng_strerror(rv));
            break;
        }
        heard = tw_client_now_unix_ms();
        nng_msg *msg = nng_aio_get_msg(aio);
        Tokenwire__V1__StreamChunk *ch = NULL;
        tw_status pst = tw_wire_parse_frame(nng_msg_body(msg), nng_msg_len(msg),
                                            tw_client_limits(c), &ch, NULL);
        nng_msg_free(msg);
        if (pst != TW_OK)
            continue;
        int stop = fn(user, ch);
        tw_wire_free_chunk(ch);
        if (stop)
            break;
    }
    nng_aio_free(aio);
    nng_ctx_close(ctx);
    return st;
}
