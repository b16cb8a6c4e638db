/* The wire codec: round trips, zstd bodies, and hostile inputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "test_support.h"
#include "tokenwire/wire.h"

static uint8_t *encode_req(const Tokenwire__V1__Request *r, size_t threshold, size_t *n)
{
    tw_wire_encode_options o = {threshold, 1};
    uint8_t *buf = NULL;
    tw_err err;
    assert_int_equal(tw_wire_encode_request(r, &o, &buf, n, &err), TW_OK);
    return buf;
}

static char *repeated_text(size_t n)
{
    char *t = malloc(n + 1);
    assert_non_null(t);
    for (size_t i = 0; i < n; i++)
        t[i] = "the quick brown fox "[i % 20];
    t[n] = '\0';
    return t;
}

static void test_request_round_trip_plain(void **state)
{
    (void)state;
    uint32_t ids[] = {1, 2, 300, 70000};
    Tokenwire__V1__TokenIds tids = TOKENWIRE__V1__TOKEN_IDS__INIT;
    tids.n_ids = 4;
    tids.ids = ids;
    Tokenwire__V1__GenerateRequest g = TOKENWIRE__V1__GENERATE_REQUEST__INIT;
    g.model = "m";
    g.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TOKEN_IDS;
    g.token_ids = &tids;
    g.has_stream = 1;
    g.stream = 1;
    Tokenwire__V1__Request r = TOKENWIRE__V1__REQUEST__INIT;
    r.has_request_id = 1;
    r.request_id = 42;
    r.auth_token = "k";
    r.method_case = TOKENWIRE__V1__REQUEST__METHOD_GENERATE;
    r.generate = &g;

    size_t n;
    uint8_t *buf = encode_req(&r, 0, &n);
    Tokenwire__V1__Request *d = NULL;
    tw_err err;
    assert_int_equal(tw_wire_decode_request(buf, n, NULL, &d, &err), TW_OK);
    assert_int_equal(d->request_id, 42);
    assert_string_equal(d->auth_token, "k");
    assert_int_equal(d->method_case, TOKENWIRE__V1__REQUEST__METHOD_GENERATE);
    assert_string_equal(d->generate->model, "m");
    assert_int_equal(d->generate->token_ids->n_ids, 4);
    assert_memory_equal(d->generate->token_ids->ids, ids, sizeof ids);
    assert_true(d->generate->stream);
    tw_wire_free_request(d);
    free(buf);
}

static void test_request_round_trip_zstd(void **state)
{
    (void)state;
    char *text = repeated_text(200000);
    Tokenwire__V1__TokenizeRequest t = TOKENWIRE__V1__TOKENIZE_REQUEST__INIT;
    t.text = text;
    Tokenwire__V1__Request r = TOKENWIRE__V1__REQUEST__INIT;
    r.has_request_id = 1;
    r.request_id = 7;
    r.auth_token = "secret";
    r.method_case = TOKENWIRE__V1__REQUEST__METHOD_TOKENIZE;
    r.tokenize = &t;

    size_t n;
    uint8_t *buf = encode_req(&r, 1024, &n);
    assert_true(n < 20000); /* it really was compressed */

    /* On the wire the method is absent and the envelope says ZSTD. */
    Tokenwire__V1__Request *raw = tokenwire__v1__request__unpack(NULL, n, buf);
    assert_non_null(raw);
    assert_int_equal(raw->compression, TOKENWIRE__V1__COMPRESSION__COMPRESSION_ZSTD);
    assert_int_equal(raw->method_case, TOKENWIRE__V1__REQUEST__METHOD__NOT_SET);
    assert_string_equal(raw->auth_token, "secret");
    tokenwire__v1__request__free_unpacked(raw, NULL);

    Tokenwire__V1__Request *d = NULL;
    tw_err err;
    assert_int_equal(tw_wire_decode_request(buf, n, NULL, &d, &err), TW_OK);
    assert_int_equal(d->request_id, 7);
    assert_int_equal(d->method_case, TOKENWIRE__V1__REQUEST__METHOD_TOKENIZE);
    assert_string_equal(d->tokenize->text, text);
    tw_wire_free_request(d);

    /* The body may not expand beyond the body limit. */
    tw_wire_limits lim = {0, 100000, 0};
    assert_int_equal(tw_wire_decode_request(buf, n, &lim, &d, &err), TW_RESOURCE_EXHAUSTED);
    assert_null(d);
    assert_non_null(strstr(err.msg, "limit"));
    free(buf);
    free(text);
}

static void test_reply_round_trip_zstd(void **state)
{
    (void)state;
    char *text = repeated_text(50000);
    Tokenwire__V1__DetokenizeReply dr = TOKENWIRE__V1__DETOKENIZE_REPLY__INIT;
    dr.text = text;
    Tokenwire__V1__Status s = TOKENWIRE__V1__STATUS__INIT;
    Tokenwire__V1__Reply rep = TOKENWIRE__V1__REPLY__INIT;
    rep.has_request_id = 1;
    rep.request_id = 9;
    rep.status = &s;
    rep.result_case = TOKENWIRE__V1__REPLY__RESULT_DETOKENIZE;
    rep.detokenize = &dr;
    tw_wire_encode_options o = {4096, 0};
    uint8_t *buf;
    size_t n;
    tw_err err;
    assert_int_equal(tw_wire_encode_reply(&rep, &o, &buf, &n, &err), TW_OK);
    assert_true(n < 5000);
    Tokenwire__V1__Reply *d = NULL;
    assert_int_equal(tw_wire_decode_reply(buf, n, NULL, &d, &err), TW_OK);
    assert_int_equal(d->request_id, 9);
    assert_int_equal(d->result_case, TOKENWIRE__V1__REPLY__RESULT_DETOKENIZE);
    assert_string_equal(d->detokenize->text, text);
    tw_wire_free_reply(d);
    free(buf);
    free(text);

    /* Small replies stay plain even when compression is asked for. */
    Tokenwire__V1__HealthReply h = TOKENWIRE__V1__HEALTH_REPLY__INIT;
    h.state = "ok";
    rep.result_case = TOKENWIRE__V1__REPLY__RESULT_HEALTH;
    rep.health = &h;
    assert_int_equal(tw_wire_encode_reply(&rep, &o, &buf, &n, &err), TW_OK);
    Tokenwire__V1__Reply *raw = tokenwire__v1__reply__unpack(NULL, n, buf);
    assert_non_null(raw);
    assert_false(raw->has_compression);
    assert_string_equal(raw->health->state, "ok");
    tokenwire__v1__reply__free_unpacked(raw, NULL);
    free(buf);
}

static void test_garbage_and_truncation_rejected(void **state)
{
    (void)state;
    tw_err err;
    Tokenwire__V1__Request *d = (Tokenwire__V1__Request *)1;
    const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    assert_int_equal(tw_wire_decode_request(garbage, sizeof garbage, NULL, &d, &err),
                     TW_INVALID_ARGUMENT);
    assert_null(d);
    assert_non_null(strstr(err.msg, "not a valid protobuf"));

    /* A field whose length runs past the end of the buffer. */
    char *text = repeated_text(1000);
    Tokenwire__V1__TokenizeRequest t = TOKENWIRE__V1__TOKENIZE_REQUEST__INIT;
    t.text = text;
    Tokenwire__V1__Request r = TOKENWIRE__V1__REQUEST__INIT;
    r.method_case = TOKENWIRE__V1__REQUEST__METHOD_TOKENIZE;
    r.tokenize = &t;
    size_t n;
    uint8_t *buf = encode_req(&r, 0, &n);
    for (size_t cut = n - 1; cut > n - 900; cut -= 97)
        assert_int_equal(tw_wire_decode_request(buf, cut, NULL, &d, &err), TW_INVALID_ARGUMENT);
    Tokenwire__V1__Reply *rd = NULL;
    assert_int_equal(tw_wire_decode_reply(buf, n / 2, NULL, &rd, &err), TW_INVALID_ARGUMENT);
    Tokenwire__V1__StreamChunk *cd = NULL;
    assert_int_equal(tw_wire_decode_chunk(garbage, sizeof garbage, NULL, &cd, &err),
                     TW_INVALID_ARGUMENT);
    assert_null(cd);
    free(buf);
    free(text);
}

static void test_oversized_rejected_before_parsing(void **state)
{
    (void)state;
    char *text = repeated_text(5000);
    Tokenwire__V1__TokenizeRequest t = TOKENWIRE__V1__TOKENIZE_REQUEST__INIT;
    t.text = text;
    Tokenwire__V1__Request r = TOKENWIRE__V1__REQUEST__INIT;
    r.method_case = TOKENWIRE__V1__REQUEST__METHOD_TOKENIZE;
    r.tokenize = &t;
    size_t n;
    uint8_t *buf = encode_req(&r, 0, &n);
    tw_wire_limits lim = {4096, 0, 0};
    Tokenwire__V1__Request *d = NULL;
    tw_err err;
    assert_int_equal(tw_wire_decode_request(buf, n, &lim, &d, &err), TW_RESOURCE_EXHAUSTED);
    assert_null(d);
    assert_non_null(strstr(err.msg, "exceeds the limit of 4096"));
    lim.max_message_bytes = n;
    assert_int_equal(tw_wire_decode_request(buf, n, &lim, &d, &err), TW_OK);
    tw_wire_free_request(d);
    free(buf);
    free(text);
}

/* Wraps an arbitrary zstd body in a Request envelope. */
static uint8_t *envelope_with_body(const void *z, size_t zn, int with_method, size_t *n)
{
    Tokenwire__V1__HealthRequest h = TOKENWIRE__V1__HEALTH_REQUEST__INIT;
    Tokenwire__V1__Request env = TOKENWIRE__V1__REQUEST__INIT;
    env.has_compression = 1;
    env.compression = TOKENWIRE__V1__COMPRESSION__COMPRESSION_ZSTD;
    env.has_compressed_body = 1;
    env.compressed_body.data = (uint8_t *)z;
    env.compressed_body.len = zn;
    if (with_method) {
        env.method_case = TOKENWIRE__V1__REQUEST__METHOD_HEALTH;
        env.health = &h;
    }
    *n = tokenwire__v1__request__get_packed_size(&env);
    uint8_t *buf = malloc(*n);
    assert_non_null(buf);
    tokenwire__v1__request__pack(&env, buf);
    return buf;
}

static void test_zip_bombs_rejected(void **state)
{
    (void)state;
    const size_t big = 8u << 20;
    uint8_t *zeros = calloc(1, big);
    assert_non_null(zeros);
    size_t cap = ZSTD_compressBound(big);
    uint8_t *z = malloc(cap);
    assert_non_null(z);
    tw_wire_limits lim = {0, 1u << 20, 0};
    tw_err err;
    Tokenwire__V1__Request *d = NULL;

    /* Declared content size over the limit: refused without decompressing. */
    size_t zn = ZSTD_compress(z, cap, zeros, big, 1);
    assert_false(ZSTD_isError(zn));
    size_t n;
    uint8_t *env = envelope_with_body(z, zn, 0, &n);
    assert_true(n < 4096);
    assert_int_equal(tw_wire_decode_request(env, n, &lim, &d, &err), TW_RESOURCE_EXHAUSTED);
    assert_null(d);
    assert_non_null(strstr(err.msg, "declares"));
    free(env);

    /* Unknown content size: refused as soon as the output passes the limit. */
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_windowLog, 17);
    ZSTD_inBuffer in = {zeros, big, 0};
    ZSTD_outBuffer out = {z, cap, 0};
    size_t rem = ZSTD_compressStream2(cc, &out, &in, ZSTD_e_end);
    assert_int_equal(rem, 0);
    ZSTD_freeCCtx(cc);
    assert_int_equal(ZSTD_getFrameContentSize(z, out.pos), ZSTD_CONTENTSIZE_UNKNOWN);
    env = envelope_with_body(z, out.pos, 0, &n);
    assert_int_equal(tw_wire_decode_request(env, n, &lim, &d, &err), TW_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(err.msg, "expands beyond"));
    free(env);

    /* A frame whose window is far larger than the limit. */
    ZSTD_CCtx *wc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(wc, ZSTD_c_windowLog, 24);
    ZSTD_CCtx_setParameter(wc, ZSTD_c_contentSizeFlag, 0);
    zn = ZSTD_compress2(wc, z, cap, zeros, big);
    assert_false(ZSTD_isError(zn));
    ZSTD_freeCCtx(wc);
    env = envelope_with_body(z, zn, 0, &n);
    assert_int_equal(tw_wire_decode_request(env, n, &lim, &d, &err), TW_RESOURCE_EXHAUSTED);
    free(env);

    /* Corrupt and truncated frames. */
    zn = ZSTD_compress(z, cap, zeros, 1000, 1);
    env = envelope_with_body(z, zn / 2, 0, &n);
    assert_int_equal(tw_wire_decode_request(env, n, &lim, &d, &err), TW_INVALID_ARGUMENT);
    free(env);
    env = envelope_with_body("not zstd at all", 15, 0, &n);
    assert_int_equal(tw_wire_decode_request(env, n, &lim, &d, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "zstd"));
    free(env);

    /* A compressed envelope that also carries a method is ambiguous. */
    env = envelope_with_body(z, zn, 1, &n);
    assert_int_equal(tw_wire_decode_request(env, n, &lim, &d, &err), TW_INVALID_ARGUMENT);
    free(env);
    /* ZSTD announced but no body. */
    Tokenwire__V1__Request e2 = TOKENWIRE__V1__REQUEST__INIT;
    e2.has_compression = 1;
    e2.compression = TOKENWIRE__V1__COMPRESSION__COMPRESSION_ZSTD;
    uint8_t small[64];
    n = tokenwire__v1__request__pack(&e2, small);
    assert_int_equal(tw_wire_decode_request(small, n, &lim, &d, &err), TW_INVALID_ARGUMENT);
    /* A compression scheme from the future. */
    e2.compression = (Tokenwire__V1__Compression)9;
    e2.has_compressed_body = 1;
    e2.compressed_body.data = (uint8_t *)"x";
    e2.compressed_body.len = 1;
    n = tokenwire__v1__request__pack(&e2, small);
    assert_int_equal(tw_wire_decode_request(small, n, &lim, &d, &err), TW_UNIMPLEMENTED);

    free(z);
    free(zeros);
}

static void test_nested_compression_rejected(void **state)
{
    (void)state;
    /* Inner envelope: itself compressed (its body content does not matter). */
    size_t inner_n;
    uint8_t *inner = envelope_with_body("abc", 3, 0, &inner_n);
    size_t cap = ZSTD_compressBound(inner_n);
    uint8_t *z = malloc(cap);
    assert_non_null(z);
    size_t zn = ZSTD_compress(z, cap, inner, inner_n, 1);
    assert_false(ZSTD_isError(zn));
    size_t n;
    uint8_t *env = envelope_with_body(z, zn, 0, &n);
    Tokenwire__V1__Request *d = NULL;
    tw_err err;
    assert_int_equal(tw_wire_decode_request(env, n, NULL, &d, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "itself be compressed"));
    assert_null(d);
    free(env);
    free(z);
    free(inner);

    /* And a plain envelope may not carry a body. */
    Tokenwire__V1__Request e = TOKENWIRE__V1__REQUEST__INIT;
    e.has_compressed_body = 1;
    e.compressed_body.data = (uint8_t *)"x";
    e.compressed_body.len = 1;
    uint8_t small[32];
    n = tokenwire__v1__request__pack(&e, small);
    assert_int_equal(tw_wire_decode_request(small, n, NULL, &d, &err), TW_INVALID_ARGUMENT);
    /* The encoder refuses it too. */
    uint8_t *out;
    assert_int_equal(tw_wire_encode_request(&e, NULL, &out, &n, &err), TW_INVALID_ARGUMENT);
}

static void test_decoded_memory_bounded(void **state)
{
    (void)state;
    /* 200k packed zero ids: 200 kB on the wire, 800 kB decoded. */
    const size_t count = 200000;
    uint32_t *ids = calloc(count, sizeof *ids);
    assert_non_null(ids);
    Tokenwire__V1__DetokenizeRequest dt = TOKENWIRE__V1__DETOKENIZE_REQUEST__INIT;
    dt.n_token_ids = count;
    dt.token_ids = ids;
    Tokenwire__V1__Request r = TOKENWIRE__V1__REQUEST__INIT;
    r.method_case = TOKENWIRE__V1__REQUEST__METHOD_DETOKENIZE;
    r.detokenize = &dt;
    size_t n;
    uint8_t *buf = encode_req(&r, 0, &n);
    tw_wire_limits lim = {0, 0, 400000};
    Tokenwire__V1__Request *d = NULL;
    tw_err err;
    assert_int_equal(tw_wire_decode_request(buf, n, &lim, &d, &err), TW_RESOURCE_EXHAUSTED);
    assert_null(d);
    assert_non_null(strstr(err.msg, "memory"));
    lim.max_decoded_bytes = 2000000;
    assert_int_equal(tw_wire_decode_request(buf, n, &lim, &d, &err), TW_OK);
    assert_int_equal(d->detokenize->n_token_ids, count);
    tw_wire_free_request(d);
    free(buf);
    free(ids);
}

static void test_unknown_fields_and_methods(void **state)
{
    (void)state;
    Tokenwire__V1__HealthRequest h = TOKENWIRE__V1__HEALTH_REQUEST__INIT;
    Tokenwire__V1__Request r = TOKENWIRE__V1__REQUEST__INIT;
    r.has_version = 1;
    r.version = (Tokenwire__V1__ProtocolVersion)7;
    r.method_case = TOKENWIRE__V1__REQUEST__METHOD_HEALTH;
    r.health = &h;
    uint8_t buf[64];
    size_t n = tokenwire__v1__request__pack(&r, buf);
    /* field 100, varint 5: an unknown field a newer peer might send. */
    buf[n++] = 0xa0;
    buf[n++] = 0x06;
    buf[n++] = 0x05;
    Tokenwire__V1__Request *d = NULL;
    tw_err err;
    assert_int_equal(tw_wire_decode_request(buf, n, NULL, &d, &err), TW_OK);
    assert_int_equal(d->method_case, TOKENWIRE__V1__REQUEST__METHOD_HEALTH);
    assert_int_equal(d->version, 7); /* kept, so the engine can refuse it */
    tw_wire_free_request(d);

    /* A method field this schema does not know (field 40, empty message). */
    uint8_t unk[] = {0xc2, 0x02, 0x00};
    assert_int_equal(tw_wire_decode_request(unk, sizeof unk, NULL, &d, &err), TW_OK);
    assert_int_equal(d->method_case, TOKENWIRE__V1__REQUEST__METHOD__NOT_SET);
    tw_wire_free_request(d);
}

static void test_frames(void **state)
{
    (void)state;
    uint32_t ids[] = {5, 6};
    Tokenwire__V1__StreamChunk c = TOKENWIRE__V1__STREAM_CHUNK__INIT;
    c.stream_id = "s-1.a:b_c";
    c.has_seq = 1;
    c.seq = 3;
    c.n_token_ids = 2;
    c.token_ids = ids;
    c.text_delta = "hi";
    uint8_t *f;
    size_t n;
    tw_err err;
    assert_int_equal(tw_wire_encode_frame(&c, &f, &n, &err), TW_OK);
    assert_memory_equal(f, "tok/s-1.a:b_c\0", 14);
    Tokenwire__V1__StreamChunk *d = NULL;
    assert_int_equal(tw_wire_parse_frame(f, n, NULL, &d, &err), TW_OK);
    assert_string_equal(d->stream_id, "s-1.a:b_c");
    assert_int_equal(d->seq, 3);
    assert_int_equal(d->n_token_ids, 2);
    assert_string_equal(d->text_delta, "hi");
    tw_wire_free_chunk(d);

    /* Topic and chunk disagree. */
    f[4] = 'x';
    assert_int_equal(tw_wire_parse_frame(f, n, NULL, &d, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "does not match"));
    /* Invalid character in the topic. */
    f[4] = '/';
    assert_int_equal(tw_wire_parse_frame(f, n, NULL, &d, &err), TW_INVALID_ARGUMENT);
    /* Wrong prefix, no NUL, too short. */
    f[4] = 's';
    f[0] = 'T';
    assert_int_equal(tw_wire_parse_frame(f, n, NULL, &d, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_wire_parse_frame((const uint8_t *)"tok/abc", 7, NULL, &d, &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(tw_wire_parse_frame((const uint8_t *)"to", 2, NULL, &d, &err),
                     TW_INVALID_ARGUMENT);
    /* Garbage after a good topic. */
    assert_int_equal(tw_wire_parse_frame((const uint8_t *)"tok/a\0\xff\xff\xff", 9, NULL, &d, &err),
                     TW_INVALID_ARGUMENT);
    free(f);

    c.stream_id = "bad id";
    assert_int_equal(tw_wire_encode_frame(&c, &f, &n, &err), TW_INVALID_ARGUMENT);
    c.stream_id = NULL;
    assert_int_equal(tw_wire_encode_frame(&c, &f, &n, &err), TW_INVALID_ARGUMENT);

    char topic[16];
    size_t tn;
    assert_int_equal(tw_wire_stream_topic("ab", topic, sizeof topic, &tn, &err), TW_OK);
    assert_int_equal(tn, 7);
    assert_memory_equal(topic, "tok/ab\0", 7);
    assert_int_equal(tw_wire_stream_topic("abcdefghijklmnop", topic, sizeof topic, &tn, &err),
                     TW_OUT_OF_RANGE);
    char longid[TW_WIRE_STREAM_ID_MAX + 2];
    memset(longid, 'a', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    assert_false(tw_wire_stream_id_valid(longid));
    longid[TW_WIRE_STREAM_ID_MAX] = '\0';
    assert_true(tw_wire_stream_id_valid(longid));
    assert_false(tw_wire_stream_id_valid(""));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_round_trip_plain),
        cmocka_unit_test(test_request_round_trip_zstd),
        cmocka_unit_test(test_reply_round_trip_zstd),
        cmocka_unit_test(test_garbage_and_truncation_rejected),
        cmocka_unit_test(test_oversized_rejected_before_parsing),
        cmocka_unit_test(test_zip_bombs_rejected),
        cmocka_unit_test(test_nested_compression_rejected),
        cmocka_unit_test(test_decoded_memory_bounded),
        cmocka_unit_test(test_unknown_fields_and_methods),
        cmocka_unit_test(test_frames),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
