/* The tokenwire wire codec: protobuf envelopes with optional zstd bodies,
 * and the PUB frame that carries a StreamChunk under its topic.
 *
 * Every decoder treats its input as hostile. It refuses a message larger than
 * the limit before parsing it (RESOURCE_EXHAUSTED), answers INVALID_ARGUMENT
 * for bytes that are not a valid encoding, decompresses a zstd body only up
 * to the limit (a frame that declares or produces more is refused, so a
 * "zip bomb" costs at most the limit in memory), refuses a compressed body
 * whose content says it is compressed again, and bounds the memory the
 * decoded message may occupy (packed fields and empty sub-messages expand
 * several times when decoded).
 *
 * All functions are reentrant and may be called from any thread; they keep
 * no state besides their arguments.
 */
#ifndef TOKENWIRE_WIRE_H
#define TOKENWIRE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "tokenwire.pb-c.h"
#include "tw/status.h"

/* The topic of a stream is TW_WIRE_TOPIC_PREFIX followed by the stream id. */
#define TW_WIRE_TOPIC_PREFIX "tok/"
/* Longest stream id accepted, in bytes. */
#define TW_WIRE_STREAM_ID_MAX 128

/* Defaults of tw_wire_limits. */
#define TW_WIRE_DEFAULT_MAX_MESSAGE_BYTES ((size_t)16 << 20)
#define TW_WIRE_DEFAULT_MAX_BODY_BYTES ((size_t)64 << 20)
#define TW_WIRE_DEFAULT_MAX_DECODED_BYTES ((size_t)256 << 20)

/* Bounds a decoder enforces. A zero field takes its default. */
typedef struct tw_wire_limits {
    /* Largest encoded message accepted, as received (compressed or not). */
    size_t max_message_bytes;
    /* Largest decompressed body of a zstd-compressed envelope. */
    size_t max_body_bytes;
    /* Largest amount of heap the decoded message tree may occupy. */
    size_t max_decoded_bytes;
} tw_wire_limits;

/* Options of the encoders. */
typedef struct tw_wire_encode_options {
    /* Compress the body with zstd when the plain encoding is larger than this
     * many bytes; 0 never compresses. */
    size_t compress_threshold;
    /* zstd level (0: zstd's default). */
    int compress_level;
} tw_wire_encode_options;

/* Fills lim with the defaults above. */
void tw_wire_limits_default(tw_wire_limits *lim);

/* Decodes a Request from buf[0..len). lim may be NULL (defaults). On TW_OK
 * *out owns a message tree the caller frees with tw_wire_free_request; a
 * compressed envelope is returned as its decompressed content (compression
 * NONE, method set). On failure *out is NULL and err says why:
 * RESOURCE_EXHAUSTED for a message, body or decoded tree over the limits,
 * INVALID_ARGUMENT for anything that does not decode. */
tw_status tw_wire_decode_request(const uint8_t *buf, size_t len, const tw_wire_limits *lim,
                                 Tokenwire__V1__Request **out, tw_err *err);

/* As tw_wire_decode_request, for a Reply (free with tw_wire_free_reply). */
tw_status tw_wire_decode_reply(const uint8_t *buf, size_t len, const tw_wire_limits *lim,
                               Tokenwire__V1__Reply **out, tw_err *err);

/* As tw_wire_decode_request, for a bare StreamChunk (no envelope, never
 * compressed; free with tw_wire_free_chunk). */
tw_status tw_wire_decode_chunk(const uint8_t *buf, size_t len, const tw_wire_limits *lim,
                               Tokenwire__V1__StreamChunk **out, tw_err *err);

/* Free a decoded message; NULL is allowed. Only for trees a decoder made. */
void tw_wire_free_request(Tokenwire__V1__Request *req);
void tw_wire_free_reply(Tokenwire__V1__Reply *rep);
void tw_wire_free_chunk(Tokenwire__V1__StreamChunk *chunk);

/* Encodes req into a new malloc'd buffer (*out, *out_len; the caller frees
 * it with free()). opts may be NULL (no compression). When compression
 * applies, the envelope sent keeps version, request_id, auth_token and
 * deadline outside and carries the whole encoded Request in compressed_body.
 * req is not modified. Fails with RESOURCE_EXHAUSTED when memory runs out
 * and INVALID_ARGUMENT when req already says it is compressed. */
tw_status tw_wire_encode_request(const Tokenwire__V1__Request *req,
                                 const tw_wire_encode_options *opts, uint8_t **out,
                                 size_t *out_len, tw_err *err);

/* As tw_wire_encode_request, for a Reply (version, request_id and status
 * stay outside a compressed body). */
tw_status tw_wire_encode_reply(const Tokenwire__V1__Reply *rep,
                               const tw_wire_encode_options *opts, uint8_t **out,
                               size_t *out_len, tw_err *err);

/* True when id is a usable stream id: 1..TW_WIRE_STREAM_ID_MAX bytes of
 * [A-Za-z0-9._:-]. The restriction keeps topics printable and guarantees
 * that no id contains the NUL byte that ends a topic. */
int tw_wire_stream_id_valid(const char *id);

/* Writes the subscription topic of a stream into buf: "tok/<id>" plus the
 * terminating NUL byte, which is part of the topic so that subscribing to
 * stream "a" does not also receive stream "ab". *topic_len receives the
 * number of bytes to subscribe to (NUL included). INVALID_ARGUMENT for an
 * invalid id, OUT_OF_RANGE when cap is too small. */
tw_status tw_wire_stream_topic(const char *stream_id, char *buf, size_t cap,
                               size_t *topic_len, tw_err *err);

/* Encodes a PUB frame: "tok/" + chunk->stream_id + NUL + encoded chunk, into
 * a new malloc'd buffer the caller frees. INVALID_ARGUMENT when the chunk's
 * stream id is invalid. */
tw_status tw_wire_encode_frame(const Tokenwire__V1__StreamChunk *chunk, uint8_t **out,
                               size_t *out_len, tw_err *err);

/* Parses a PUB frame: checks the topic (prefix, a valid id, the NUL), decodes
 * the chunk and checks that its stream_id equals the topic's. On TW_OK *out
 * is freed with tw_wire_free_chunk. */
tw_status tw_wire_parse_frame(const uint8_t *buf, size_t len, const tw_wire_limits *lim,
                              Tokenwire__V1__StreamChunk **out, tw_err *err);

#endif
