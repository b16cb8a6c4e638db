/* Decoding: token ids -> bytes -> UTF-8 text, whole or streamed.
 *
 * One byte-level state machine serves both: it passes complete UTF-8
 * characters through, holds an incomplete sequence back, and replaces each
 * maximal invalid subpart with U+FFFD (the policy of Rust's
 * String::from_utf8_lossy, which Hugging Face's decode uses). Because the
 * whole-sequence decode is this same machine run to the end, a stream's
 * concatenated deltas equal the whole decode by construction. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

typedef struct sink {
    char *buf;
    size_t cap, n;
} sink;

static void sink_put(sink *s, const void *p, size_t n)
{
    if (s->n < s->cap) {
        size_t room = s->cap - s->n;
        memcpy(s->buf + s->n, p, n < room ? n : room);
    }
    s->n += n;
}

typedef struct utf8_state {
    uint8_t pend[4];
    uint8_t npend, need, lo, hi;
    bool started; /* some token produced bytes (for the leading-space rule) */
} utf8_state;

static void put_fffd(sink *s)
{
    sink_put(s, "\xef\xbf\xbd", 3);
}

static void feed_bytes(utf8_state *u, sink *s, const uint8_t *p, size_t n)
{
    size_t run = 0; /* ASCII bytes waiting to be copied in one go */
    for (size_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (u->npend == 0 && c < 0x80) {
            run++;
            continue;
        }
        if (run) {
            sink_put(s, p + i - run, run);
            run = 0;
        }
    again:
        if (u->npend == 0) {
            if (c < 0x80) {
                sink_put(s, &c, 1);
                continue;
            }
            u->lo = 0x80;
            u->hi = 0xbf;
            if (c >= 0xc2 && c <= 0xdf) {
                u->need = 2;
            } else if (c >= 0xe0 && c <= 0xef) {
                u->need = 3;
                if (c == 0xe0)
                    u->lo = 0xa0;
                if (c == 0xed)
                    u->hi = 0x9f;
            } else if (c >= 0xf0 && c <= 0xf4) {
                u->need = 4;
                if (c == 0xf0)
                    u->lo = 0x90;
                if (c == 0xf4)
                    u->hi = 0x8f;
            } else {
                put_fffd(s);
                continue;
            }
            u->pend[u->npend++] = c;
            continue;
        }
        if (c >= u->lo && c <= u->hi) {
            u->pend[u->npend++] = c;
            u->lo = 0x80;
            u->hi = 0xbf;
            if (u->npend == u->need) {
                sink_put(s, u->pend, u->npend);
                u->npend = 0;
            }
            continue;
        }
        /* The held bytes can no longer complete: they are one invalid
         * subpart, and c starts afresh. */
        put_fffd(s);
        u->npend = 0;
        goto again;
    }
    if (run)
        sink_put(s, p + n - run, run);
}

static void finish(utf8_state *u, sink *s)
{
    if (u->npend)
        put_fffd(s);
    memset(u, 0, sizeof *u);
}

static tw_status feed_token(const tw_tokenizer *tok, unsigned flags, utf8_state *u, sink *s,
                            uint32_t id, tw_err *err)
{
    if (id >= tok->vocab.n)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "token id %u outside the vocabulary (%u)", id,
                         tok->vocab.n);
    uint8_t type = tok->vocab.type[id];
    if ((flags & TW_DECODE_SKIP_SPECIAL) && (type == TW_TOKEN_CONTROL || type == TW_TOKEN_UNKNOWN))
        return TW_OK;
    tok_span sp = tok->vocab.bspan[id];
    if (tok->wp_first) {
        /* WordPiece: the first token keeps its prefix and gets no space,
         * whatever bytes it has; an id without a token is not one. */
        if (type == TW_TOKEN_UNUSED)
            return TW_OK;
        if (!u->started)
            sp = tok->wp_first[id];
        u->started = true;
    }
    size_t n = sp.len;
    if (n == 0) /* a vocabulary of empty tokens has no byte store at all (NULL) */
        return TW_OK;
    const uint8_t *p = (const uint8_t *)tok->vocab.bytes.p + sp.off;
    /* SentencePiece's dummy prefix: the space it put before the first
     * word is not part of the text. */
    if (!u->started && tok->strip_leading_space && !(flags & TW_DECODE_KEEP_LEADING_SPACE) &&
        p[0] == ' ') {
        p++;
        n--;
    }
    u->started = true;
    feed_bytes(u, s, p, n);
    return TW_OK;
}

tw_status tw_tokenizer_decode(const tw_tokenizer *tok, const uint32_t *ids, size_t n,
                              unsigned flags, char *out, size_t cap, size_t *n_out, tw_err *err)
{
    if (!tok || !n_out || (!ids && n) || (!out && cap))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tw_tokenizer_decode: NULL argument");
    *n_out = 0;
    utf8_state u = {0};
    sink s = {out, cap, 0};
    for (size_t i = 0; i < n; i++) {
        tw_status st = feed_token(tok, flags, &u, &s, ids[i], err);
        if (st != TW_OK)
            return tw_error_wrap(err, st, "position %zu", i);
    }
    finish(&u, &s);
    *n_out = s.n;
    if (s.n > cap)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                         "decoded text needs %zu bytes, the buffer holds %zu", s.n, cap);
    return TW_OK;
}

/* ---- streaming ------------------------------------------------------------- */

struct tw_detok {
    const tw_tokenizer *tok;
    unsigned flags;
    utf8_state u;
    char *buf;
    size_t cap;
};

tw_status tw_detok_new(const tw_tokenizer *tok, unsigned flags, tw_detok **out, tw_err *err)
{
    if (!tok || !out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tw_detok_new: NULL argument");
    if (flags & ~(TW_DECODE_SKIP_SPECIAL | TW_DECODE_KEEP_LEADING_SPACE))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tw_detok_new: unknown flags 0x%x", flags);
    tw_detok *d = calloc(1, sizeof *d);
    if (!d)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    /* Worst case per token: the held bytes become one U+FFFD, then every
     * byte of the token is invalid and becomes three bytes, and a held
     * sequence completes (four bytes). */
    d->cap = 3 * tok->vocab.max_bytes + 16;
    d->buf = malloc(d->cap);
    if (!d->buf) {
        free(d);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    }
    d->tok = tok;
    d->flags = flags;
    *out = d;
    return TW_OK;
}

void tw_detok_free(tw_detok *d)
{
    if (!d)
        return;
    free(d->buf);
    free(d);
}

void tw_detok_reset(tw_detok *d)
{
    memset(&d->u, 0, sizeof d->u);
}

tw_status tw_detok_feed(tw_detok *d, uint32_t id, const char **text, size_t *len, tw_err *err)
{
    *text = d->buf;
    *len = 0;
    sink s = {d->buf, d->cap, 0};
    tw_status st = feed_token(d->tok, d->flags, &d->u, &s, id, err);
    if (st != TW_OK)
        return st;
    if (s.n > d->cap)
        return tw_errorf(err, TW_INTERNAL, "detokenizer delta overflow (%zu > %zu)", s.n, d->cap);
    *len = s.n;
    return TW_OK;
}

void tw_detok_flush(tw_detok *d, const char **text, size_t *len)
{
    sink s = {d->buf, d->cap, 0};
    finish(&d->u, &s);
    *text = d->buf;
    *len = s.n;
}

size_t tw_detok_pending(const tw_detok *d)
{
    return d->u.npend;
}
