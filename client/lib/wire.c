#include "tokenwire/wire.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include <zstd_errors.h>

/* Never let a limit reach SIZE_MAX: the decompressor's buffer holds one byte
 * more than the limit to notice an overflow. */
#define LIMIT_CEILING ((size_t)1 << 40)

void tw_wire_limits_default(tw_wire_limits *lim)
{
    lim->max_message_bytes = TW_WIRE_DEFAULT_MAX_MESSAGE_BYTES;
    lim->max_body_bytes = TW_WIRE_DEFAULT_MAX_BODY_BYTES;
    lim->max_decoded_bytes = TW_WIRE_DEFAULT_MAX_DECODED_BYTES;
}

static tw_wire_limits effective_limits(const tw_wire_limits *lim)
{
    tw_wire_limits l;
    tw_wire_limits_default(&l);
    if (lim) {
        if (lim->max_message_bytes)
            l.max_message_bytes = lim->max_message_bytes;
        if (lim->max_body_bytes)
            l.max_body_bytes = lim->max_body_bytes;
        if (lim->max_decoded_bytes)
            l.max_decoded_bytes = lim->max_decoded_bytes;
    }
    if (l.max_message_bytes > LIMIT_CEILING)
        l.max_message_bytes = LIMIT_CEILING;
    if (l.max_body_bytes > LIMIT_CEILING)
        l.max_body_bytes = LIMIT_CEILING;
    if (l.max_decoded_bytes > LIMIT_CEILING)
        l.max_decoded_bytes = LIMIT_CEILING;
    return l;
}

/* ------------------------------------------------------------ bounded unpack */

/* protobuf-c allocates the decoded tree through this allocator, which refuses
 * once the tree would exceed its budget. Blocks come from malloc, so the tree
 * is later freed with protobuf-c's default allocator (free). */
typedef struct budget {
    size_t left;
    int exceeded;
} budget;

/* Rough per-block overhead of malloc, so that many tiny blocks are counted. */
#define ALLOC_OVERHEAD 16

static void *budget_alloc(void *data, size_t size)
{
    budget *b = data;
    if (size > b->left || b->left - size < ALLOC_OVERHEAD) {
        b->exceeded = 1;
        return NULL;
    }
    b->left -= size + ALLOC_OVERHEAD;
    return malloc(size ? size : 1);
}

static void budget_free(void *data, void *ptr)
{
    (void)data;
    free(ptr);
}

static tw_status unpack_bounded(const ProtobufCMessageDescriptor *desc, const uint8_t *buf,
                                size_t len, size_t max_decoded, const char *what,
                                ProtobufCMessage **out, tw_err *err)
{
    budget b = {max_decoded, 0};
    ProtobufCAllocator alloc = {budget_alloc, budget_free, &b};
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, &alloc, len, buf);
    if (!m) {
        if (b.exceeded)
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                             "%s would take more than %zu bytes of memory when decoded", what,
                             max_decoded);
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "%s of %zu bytes is not a valid protobuf encoding (truncated or "
                         "corrupt)",
                         what, len);
    }
    *out = m;
    return TW_OK;
}

/* ------------------------------------------------------------ zstd */

static unsigned window_log_for(size_t max)
{
    unsigned log = 10;
    while (log < 27 && ((size_t)1 << log) < max)
        log++;
    return log;
}

/* Decompresses src into a new malloc'd buffer of at most max bytes. */
static tw_status inflate_bounded(const uint8_t *src, size_t n, size_t max, const char *what,
                                 uint8_t **out, size_t *out_len, tw_err *err)
{
    unsigned long long declared = ZSTD_getFrameContentSize(src, n);
    if (declared == ZSTD_CONTENTSIZE_ERROR)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: compressed body is not a zstd frame",
                         what);
    if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared > max)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                         "%s: compressed body declares %llu bytes, over the limit of %zu", what,
                         declared, max);

    /* Start small and grow by doubling: a few hostile bytes can declare
     * any size up to the limit, and trusting the declaration would let each
     * such message reserve the whole limit. A truthful frame of size s
     * costs at most log2(s / start) reallocations. */
    size_t start = n > SIZE_MAX / 16 ? SIZE_MAX : n * 16;
    if (start < 65536)
        start = 65536;
    size_t cap = max < start ? max + 1 : start;
    if (declared != ZSTD_CONTENTSIZE_UNKNOWN && (size_t)declared < cap)
        cap = (size_t)declared + 1; /* +1 notices a frame that lies about its size */

    ZSTD_DStream *ds = ZSTD_createDStream();
    uint8_t *dst = malloc(cap);
    if (!ds || !dst) {
        ZSTD_freeDStream(ds);
        free(dst);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "%s: out of memory decompressing", what);
    }
    /* A frame may ask for a window far larger than its content; bound the
     * decoder's own memory by the output limit as well. */
    ZSTD_DCtx_setParameter(ds, ZSTD_d_windowLogMax, (int)window_log_for(max));

    ZSTD_inBuffer in = {src, n, 0};
    ZSTD_outBuffer ob = {dst, cap, 0};
    tw_status st = TW_OK;
    for (;;) {
        if (ob.pos == ob.size) {
            if (ob.size > max) {
                st = tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                               "%s: compressed body expands beyond the limit of %zu bytes",
                               what, max);
                break;
            }
            size_t ncap = ob.size * 2 > max + 1 ? max + 1 : ob.size * 2;
            uint8_t *nd = realloc(dst, ncap);
            if (!nd) {
                st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "%s: out of memory decompressing",
                               what);
                break;
            }
            dst = nd;
            ob.dst = nd;
            ob.size = ncap;
        }
        size_t ret = ZSTD_decompressStream(ds, &ob, &in);
        if (ZSTD_isError(ret) &&
            ZSTD_getErrorCode(ret) == ZSTD_error_frameParameter_windowTooLarge) {
            st = tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                           "%s: zstd body needs a window larger than the limit of %zu bytes",
                           what, max);
            break;
        }
        if (ZSTD_isError(ret)) {
            st = tw_errorf(err, TW_INVALID_ARGUMENT, "%s: corrupt zstd body: %s", what,
                           ZSTD_getErrorName(ret));
            break;
        }
        if (ob.pos > max) {
            st = tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                           "%s: compressed body expands beyond the limit of %zu bytes", what,
                           max);
            break;
        }
        if (ret == 0 && in.pos == in.size)
            break;
        if (in.pos == in.size && ob.pos < ob.size) {
            st = tw_errorf(err, TW_INVALID_ARGUMENT, "%s: truncated zstd body", what);
            break;
        }
    }
    ZSTD_freeDStream(ds);
    if (st != TW_OK) {
        free(dst);
        return st;
    }
    *out = dst;
    *out_len = ob.pos;
    return TW_OK;
}

/* ------------------------------------------------------------ envelopes */

/* What the generic envelope code needs to know of a Request or a Reply. */
typedef struct envelope_view {
    int has_compression;
    int compression;
    int has_body;
    ProtobufCBinaryData body;
    int has_payload; /* a method / result is set */
} envelope_view;

typedef struct envelope_kind {
    const ProtobufCMessageDescriptor *desc;
    const char *name;
    envelope_view (*view)(const ProtobufCMessage *m);
} envelope_kind;

static envelope_view view_request(const ProtobufCMessage *m)
{
    const Tokenwire__V1__Request *r = (const Tokenwire__V1__Request *)m;
    envelope_view v = {r->has_compression, (int)r->compression, r->has_compressed_body,
                       r->compressed_body,
                       r->method_case != TOKENWIRE__V1__REQUEST__METHOD__NOT_SET};
    return v;
}

static envelope_view view_reply(const ProtobufCMessage *m)
{
    const Tokenwire__V1__Reply *r = (const Tokenwire__V1__Reply *)m;
    envelope_view v = {r->has_compression, (int)r->compression, r->has_compressed_body,
                       r->compressed_body,
                       r->result_case != TOKENWIRE__V1__REPLY__RESULT__NOT_SET};
    return v;
}

static const envelope_kind request_kind = {&tokenwire__v1__request__descriptor, "request",
                                           view_request};
static const envelope_kind reply_kind = {&tokenwire__v1__reply__descriptor, "reply",
                                         view_reply};

static tw_status decode_envelope(const envelope_kind *k, const uint8_t *buf, size_t len,
                                 const tw_wire_limits *lim_in, ProtobufCMessage **out,
                                 tw_err *err)
{
    *out = NULL;
    if (!buf && len)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: no buffer", k->name);
    tw_wire_limits lim = effective_limits(lim_in);
    if (len > lim.max_message_bytes)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                         "%s of %zu bytes exceeds the limit of %zu bytes", k->name, len,
                         lim.max_message_bytes);

    ProtobufCMessage *outer = NULL;
    tw_status st = unpack_bounded(k->desc, buf, len, lim.max_decoded_bytes, k->name, &outer, err);
    if (st != TW_OK)
        return st;

    envelope_view v = k->view(outer);
    int compression = v.has_compression ? v.compression : TOKENWIRE__V1__COMPRESSION__COMPRESSION_NONE;
    if (compression == TOKENWIRE__V1__COMPRESSION__COMPRESSION_NONE) {
        if (v.has_body) {
            protobuf_c_message_free_unpacked(outer, NULL);
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "%s carries a compressed_body but says compression NONE", k->name);
        }
        *out = outer;
        return TW_OK;
    }
    if (compression != TOKENWIRE__V1__COMPRESSION__COMPRESSION_ZSTD) {
        protobuf_c_message_free_unpacked(outer, NULL);
        return tw_errorf(err, TW_UNIMPLEMENTED, "%s uses unknown compression %d", k->name,
                         compression);
    }
    if (!v.has_body || v.has_payload) {
        protobuf_c_message_free_unpacked(outer, NULL);
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         v.has_payload ? "%s is compressed but also carries a plain body"
                                       : "%s says compression ZSTD but has no compressed_body",
                         k->name);
    }

    uint8_t *plain = NULL;
    size_t plain_len = 0;
    st = inflate_bounded(v.body.data, v.body.len, lim.max_body_bytes, k->name, &plain,
                         &plain_len, err);
    protobuf_c_message_free_unpacked(outer, NULL);
    if (st != TW_OK)
        return st;

    ProtobufCMessage *inner = NULL;
    st = unpack_bounded(k->desc, plain, plain_len, lim.max_decoded_bytes, k->name, &inner, err);
    free(plain);
    if (st != TW_OK)
        return st;
    envelope_view iv = k->view(inner);
    if ((iv.has_compression && iv.compression != TOKENWIRE__V1__COMPRESSION__COMPRESSION_NONE) ||
        iv.has_body) {
        protobuf_c_message_free_unpacked(inner, NULL);
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "%s: a compressed body may not itself be compressed", k->name);
    }
    *out = inner;
    return TW_OK;
}

tw_status tw_wire_decode_request(const uint8_t *buf, size_t len, const tw_wire_limits *lim,
                                 Tokenwire__V1__Request **out, tw_err *err)
{
    ProtobufCMessage *m = NULL;
    tw_status st = decode_envelope(&request_kind, buf, len, lim, &m, err);
    *out = (Tokenwire__V1__Request *)m;
    return st;
}

tw_status tw_wire_decode_reply(const uint8_t *buf, size_t len, const tw_wire_limits *lim,
                               Tokenwire__V1__Reply **out, tw_err *err)
{
    ProtobufCMessage *m = NULL;
    tw_status st = decode_envelope(&reply_kind, buf, len, lim, &m, err);
    *out = (Tokenwire__V1__Reply *)m;
    return st;
}

tw_status tw_wire_decode_chunk(const uint8_t *buf, size_t len, const tw_wire_limits *lim_in,
                               Tokenwire__V1__StreamChunk **out, tw_err *err)
{
    *out = NULL;
    if (!buf && len)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "stream chunk: no buffer");
    tw_wire_limits lim = effective_limits(lim_in);
    if (len > lim.max_message_bytes)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                         "stream chunk of %zu bytes exceeds the limit of %zu bytes", len,
                         lim.max_message_bytes);
    ProtobufCMessage *m = NULL;
    tw_status st = unpack_bounded(&tokenwire__v1__stream_chunk__descriptor, buf, len,
                                  lim.max_decoded_bytes, "stream chunk", &m, err);
    *out = (Tokenwire__V1__StreamChunk *)m;
    return st;
}

void tw_wire_free_request(Tokenwire__V1__Request *req)
{
    if (req)
        protobuf_c_message_free_unpacked(&req->base, NULL);
}

void tw_wire_free_reply(Tokenwire__V1__Reply *rep)
{
    if (rep)
        protobuf_c_message_free_unpacked(&rep->base, NULL);
}

void tw_wire_free_chunk(Tokenwire__V1__StreamChunk *chunk)
{
    if (chunk)
        protobuf_c_message_free_unpacked(&chunk->base, NULL);
}

/* ------------------------------------------------------------ encoders */

static tw_status pack_alloc(const ProtobufCMessage *m, size_t prefix, uint8_t **out,
                            size_t *out_len, tw_err *err)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    if (n > SIZE_MAX - prefix - 1)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "message too large to encode");
    uint8_t *b = malloc(prefix + n + 1);
    if (!b)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory encoding %zu bytes", n);
    size_t wrote = protobuf_c_message_pack(m, b + prefix);
    if (wrote != n) {
        free(b);
        return tw_errorf(err, TW_INTERNAL, "protobuf encoder wrote %zu of %zu bytes", wrote, n);
    }
    *out = b;
    *out_len = prefix + n;
    return TW_OK;
}

/* Compresses plain into a new buffer; returns TW_OK with *out NULL when
 * compression would not make it smaller. */
static tw_status compress_body(const uint8_t *plain, size_t n, int level, uint8_t **out,
                         size_t *out_len, tw_err *err)
{
    *out = NULL;
    size_t bound = ZSTD_compressBound(n);
    uint8_t *z = malloc(bound);
    if (!z)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory compressing %zu bytes", n);
    size_t zn = ZSTD_compress(z, bound, plain, n, level ? level : ZSTD_CLEVEL_DEFAULT);
    if (ZSTD_isError(zn)) {
        free(z);
        return tw_errorf(err, TW_INTERNAL, "zstd compression failed: %s", ZSTD_getErrorName(zn));
    }
    if (zn >= n) {
        free(z);
        return TW_OK;
    }
    *out = z;
    *out_len = zn;
    return TW_OK;
}

/* Packs the envelope around a compressed body; the original supplies the
 * fields that stay outside. */
typedef tw_status (*wrap_fn)(const ProtobufCMessage *orig, const uint8_t *z, size_t zn,
                             uint8_t **out, size_t *out_len, tw_err *err);

static tw_status encode_envelope(const ProtobufCMessage *m, const tw_wire_encode_options *opts,
                                 wrap_fn wrap, uint8_t **out, size_t *out_len, tw_err *err)
{
    uint8_t *plain;
    size_t n;
    tw_status st = pack_alloc(m, 0, &plain, &n, err);
    if (st != TW_OK)
        return st;
    uint8_t *z = NULL;
    size_t zn = 0;
    if (opts && opts->compress_threshold && n > opts->compress_threshold) {
        st = compress_body(plain, n, opts->compress_level, &z, &zn, err);
        if (st != TW_OK) {
            free(plain);
            return st;
        }
    }
    if (!z) {
        *out = plain;
        *out_len = n;
        return TW_OK;
    }
    free(plain);
    st = wrap(m, z, zn, out, out_len, err);
    free(z);
    return st;
}

static tw_status wrap_request(const ProtobufCMessage *orig, const uint8_t *z, size_t zn,
                              uint8_t **out, size_t *out_len, tw_err *err)
{
    const Tokenwire__V1__Request *req = (const Tokenwire__V1__Request *)orig;
    Tokenwire__V1__Request env = TOKENWIRE__V1__REQUEST__INIT;
    env.has_version = req->has_version;
    env.version = req->version;
    env.has_request_id = req->has_request_id;
    env.request_id = req->request_id;
    env.auth_token = req->auth_token;
    env.has_deadline_unix_ms = req->has_deadline_unix_ms;
    env.deadline_unix_ms = req->deadline_unix_ms;
    env.has_compression = 1;
    env.compression = TOKENWIRE__V1__COMPRESSION__COMPRESSION_ZSTD;
    env.has_compressed_body = 1;
    env.compressed_body.data = (uint8_t *)z;
    env.compressed_body.len = zn;
    return pack_alloc(&env.base, 0, out, out_len, err);
}

static tw_status wrap_reply(const ProtobufCMessage *orig, const uint8_t *z, size_t zn,
                            uint8_t **out, size_t *out_len, tw_err *err)
{
    const Tokenwire__V1__Reply *rep = (const Tokenwire__V1__Reply *)orig;
    Tokenwire__V1__Reply env = TOKENWIRE__V1__REPLY__INIT;
    env.has_version = rep->has_version;
    env.version = rep->version;
    env.has_request_id = rep->has_request_id;
    env.request_id = rep->request_id;
    env.status = rep->status;
    env.has_compression = 1;
    env.compression = TOKENWIRE__V1__COMPRESSION__COMPRESSION_ZSTD;
    env.has_compressed_body = 1;
    env.compressed_body.data = (uint8_t *)z;
    env.compressed_body.len = zn;
    return pack_alloc(&env.base, 0, out, out_len, err);
}

tw_status tw_wire_encode_request(const Tokenwire__V1__Request *req,
                                 const tw_wire_encode_options *opts, uint8_t **out,
                                 size_t *out_len, tw_err *err)
{
    *out = NULL;
    *out_len = 0;
    if ((req->has_compression && req->compression != TOKENWIRE__V1__COMPRESSION__COMPRESSION_NONE) ||
        req->has_compressed_body)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "request to encode already carries a compressed body");
    return encode_envelope(&req->base, opts, wrap_request, out, out_len, err);
}

tw_status tw_wire_encode_reply(const Tokenwire__V1__Reply *rep,
                               const tw_wire_encode_options *opts, uint8_t **out,
                               size_t *out_len, tw_err *err)
{
    *out = NULL;
    *out_len = 0;
    if ((rep->has_compression && rep->compression != TOKENWIRE__V1__COMPRESSION__COMPRESSION_NONE) ||
        rep->has_compressed_body)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "reply to encode already carries a compressed body");
    return encode_envelope(&rep->base, opts, wrap_reply, out, out_len, err);
}

/* ------------------------------------------------------------ PUB frames */

static int stream_id_char_ok(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == ':' || c == '-';
}

static int stream_id_bytes_valid(const char *id, size_t n)
{
    if (n == 0 || n > TW_WIRE_STREAM_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!stream_id_char_ok((unsigned char)id[i]))
            return 0;
    return 1;
}

int tw_wire_stream_id_valid(const char *id)
{
    if (!id)
        return 0;
    size_t n = strnlen(id, TW_WIRE_STREAM_ID_MAX + 1);
    return stream_id_bytes_valid(id, n);
}

tw_status tw_wire_stream_topic(const char *stream_id, char *buf, size_t cap,
                               size_t *topic_len, tw_err *err)
{
    if (!tw_wire_stream_id_valid(stream_id))
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "invalid stream id (1..%d characters of A-Z a-z 0-9 . _ : -)",
                         TW_WIRE_STREAM_ID_MAX);
    size_t n = strlen(TW_WIRE_TOPIC_PREFIX) + strlen(stream_id) + 1;
    if (n > cap)
        return tw_errorf(err, TW_OUT_OF_RANGE, "topic buffer of %zu bytes is too small", cap);
    memcpy(buf, TW_WIRE_TOPIC_PREFIX, strlen(TW_WIRE_TOPIC_PREFIX));
    memcpy(buf + strlen(TW_WIRE_TOPIC_PREFIX), stream_id, strlen(stream_id) + 1);
    *topic_len = n;
    return TW_OK;
}

tw_status tw_wire_encode_frame(const Tokenwire__V1__StreamChunk *chunk, uint8_t **out,
                               size_t *out_len, tw_err *err)
{
    *out = NULL;
    *out_len = 0;
    char topic[sizeof TW_WIRE_TOPIC_PREFIX + TW_WIRE_STREAM_ID_MAX + 1];
    size_t tn;
    tw_status st = tw_wire_stream_topic(chunk->stream_id, topic, sizeof topic, &tn, err);
    if (st != TW_OK)
        return st;
    uint8_t *b;
    size_t n;
    st = pack_alloc(&chunk->base, tn, &b, &n, err);
    if (st != TW_OK)
        return st;
    memcpy(b, topic, tn);
    *out = b;
    *out_len = n;
    return TW_OK;
}

tw_status tw_wire_parse_frame(const uint8_t *buf, size_t len, const tw_wire_limits *lim,
                              Tokenwire__V1__StreamChunk **out, tw_err *err)
{
    *out = NULL;
    size_t plen = strlen(TW_WIRE_TOPIC_PREFIX);
    if (!buf || len < plen || memcmp(buf, TW_WIRE_TOPIC_PREFIX, plen) != 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "stream frame does not start with \"%s\"",
                         TW_WIRE_TOPIC_PREFIX);
    size_t scan = len - plen;
    if (scan > TW_WIRE_STREAM_ID_MAX + 1)
        scan = TW_WIRE_STREAM_ID_MAX + 1;
    const uint8_t *nul = memchr(buf + plen, 0, scan);
    if (!nul)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "stream frame topic is not NUL-terminated within %d bytes",
                         TW_WIRE_STREAM_ID_MAX);
    const char *id = (const char *)buf + plen;
    size_t idlen = (size_t)(nul - (buf + plen));
    if (!stream_id_bytes_valid(id, idlen))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "stream frame has an invalid stream id");
    size_t off = plen + idlen + 1;
    Tokenwire__V1__StreamChunk *c = NULL;
    tw_status st = tw_wire_decode_chunk(buf + off, len - off, lim, &c, err);
    if (st != TW_OK)
        return st;
    if (!c->stream_id || strlen(c->stream_id) != idlen || memcmp(c->stream_id, id, idlen) != 0) {
        tw_wire_free_chunk(c);
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "stream chunk's stream_id does not match its topic");
    }
    *out = c;
    return TW_OK;
}
