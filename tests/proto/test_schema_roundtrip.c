/* Every message of proto/tokenwire.proto survives encode -> decode -> encode
 * unchanged with every field (and every oneof member) populated, and byte
 * strings that are not valid encodings are refused by protobuf-c. The fill is
 * driven by the generated descriptors, so new fields are covered without
 * touching this file; the message list is checked against the schema text so
 * a new message cannot be forgotten. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tokenwire.pb-c.h"

#define D(name) &tokenwire__v1__##name##__descriptor
static const ProtobufCMessageDescriptor *const all_messages[] = {
    D(status_detail),
    D(status),
    D(request),
    D(reply),
    D(chat_message),
    D(tool),
    D(tool_call),
    D(chat_input),
    D(token_ids),
    D(sampling_params),
    D(logit_bias),
    D(stop_rules),
    D(thinking_options),
    D(cache_options),
    D(speculative_options),
    D(logprob_options),
    D(output_format),
    D(embed_options),
    D(generate_request),
    D(token_logprob),
    D(top_logprob),
    D(usage),
    D(choice),
    D(generate_reply),
    D(stream_chunk),
    D(tokenize_request),
    D(tokenize_reply),
    D(detokenize_request),
    D(detokenize_reply),
    D(list_models_request),
    D(model_info),
    D(list_models_reply),
    D(load_model_request),
    D(load_model_reply),
    D(unload_model_request),
    D(unload_model_reply),
    D(health_request),
    D(health_reply),
    D(stats_request),
    D(stats_reply),
    D(cancel_request),
    D(cancel_reply),
    D(resume_request),
    D(resume_reply),
};
#undef D
#define N_MESSAGES (sizeof all_messages / sizeof all_messages[0])

enum { MAX_DEPTH = 6, N_REPEATED = 2 };

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    assert_non_null(p);
    return p;
}

static char *make_string(unsigned seed)
{
    /* Non-ASCII on purpose: strings must carry UTF-8 untouched. */
    char *s = xcalloc(48, 1);
    snprintf(s, 48, "v%u-\xc3\xa9\xe2\x82\xac-%u", seed, seed * 7u);
    return s;
}

static ProtobufCMessage *fill_message(const ProtobufCMessageDescriptor *desc, unsigned variant,
                                      unsigned seed, int depth);

/* Writes one value of field f into dst (which points at the storage of one
 * element: the field itself or one slot of a repeated array). */
static void fill_value(const ProtobufCFieldDescriptor *f, void *dst, unsigned variant,
                       unsigned seed, int depth)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        *(int32_t *)dst = -(int32_t)(seed % 1000) - 1;
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        *(uint32_t *)dst = 4000000000u - seed;
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        *(int64_t *)dst = -(int64_t)seed * 1000000007LL;
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        *(uint64_t *)dst = 0xF00000000000000Full + seed;
        break;
    case PROTOBUF_C_TYPE_FLOAT:
        *(float *)dst = 0.25f + (float)seed;
        break;
    case PROTOBUF_C_TYPE_DOUBLE:
        *(double *)dst = 0.125 + seed;
        break;
    case PROTOBUF_C_TYPE_BOOL:
        /* true differs from every proto2 default false we declare; for
         * defaults of true the has_ flag still forces it on the wire. */
        *(protobuf_c_boolean *)dst = 1;
        break;
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumDescriptor *e = f->descriptor;
        *(int *)dst = e->values[e->n_values - 1 - (seed % e->n_values)].value;
        break;
    }
    case PROTOBUF_C_TYPE_STRING:
        *(char **)dst = make_string(seed);
        break;
    case PROTOBUF_C_TYPE_BYTES: {
        ProtobufCBinaryData *b = dst;
        b->len = 5 + seed % 3;
        b->data = xcalloc(b->len, 1);
        for (size_t i = 0; i < b->len; i++)
            b->data[i] = (uint8_t)(0xF0 + i + seed); /* includes 0 bytes and high bytes */
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        *(ProtobufCMessage **)dst = fill_message(f->descriptor, variant, seed + 1, depth + 1);
        break;
    }
}

static size_t value_size(const ProtobufCFieldDescriptor *f)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return 8;
    case PROTOBUF_C_TYPE_DOUBLE:
        return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_ENUM:
        return sizeof(int);
    case PROTOBUF_C_TYPE_STRING:
        return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(ProtobufCMessage *);
    default:
        return 4;
    }
}

/* Index of field f among the members of its oneof, and the member count. */
static void oneof_position(const ProtobufCMessageDescriptor *desc, unsigned fi, unsigned *pos,
                           unsigned *count)
{
    const ProtobufCFieldDescriptor *f = &desc->fields[fi];
    *pos = 0;
    *count = 0;
    for (unsigned i = 0; i < desc->n_fields; i++) {
        const ProtobufCFieldDescriptor *g = &desc->fields[i];
        if ((g->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            g->quantifier_offset == f->quantifier_offset) {
            if (i < fi)
                (*pos)++;
            (*count)++;
        }
    }
}

static ProtobufCMessage *fill_message(const ProtobufCMessageDescriptor *desc, unsigned variant,
                                      unsigned seed, int depth)
{
    ProtobufCMessage *m = xcalloc(1, desc->sizeof_message);
    desc->message_init(m);
    if (depth >= MAX_DEPTH)
        return m;
    for (unsigned i = 0; i < desc->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        char *base = (char *)m;
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            unsigned pos, count;
            oneof_position(desc, i, &pos, &count);
            if (pos != variant % count)
                continue;
            *(uint32_t *)(base + f->quantifier_offset) = f->id;
            fill_value(f, base + f->offset, variant, seed + i, depth);
            continue;
        }
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t sz = value_size(f);
            char *arr = xcalloc(N_REPEATED, sz);
            for (unsigned k = 0; k < N_REPEATED; k++)
                fill_value(f, arr + k * sz, variant, seed + i + k, depth);
            *(size_t *)(base + f->quantifier_offset) = N_REPEATED;
            *(void **)(base + f->offset) = arr;
            continue;
        }
        fill_value(f, base + f->offset, variant, seed + i, depth);
        if (f->quantifier_offset && f->type != PROTOBUF_C_TYPE_STRING &&
            f->type != PROTOBUF_C_TYPE_MESSAGE)
            *(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
    }
    return m;
}

static unsigned max_oneof_members(const ProtobufCMessageDescriptor *desc)
{
    unsigned best = 1;
    for (unsigned i = 0; i < desc->n_fields; i++) {
        if (!(desc->fields[i].flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
            continue;
        unsigned pos, count;
        oneof_position(desc, i, &pos, &count);
        if (count > best)
            best = count;
    }
    return best;
}

static uint8_t *pack(const ProtobufCMessage *m, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = xcalloc(*len, 1);
    assert_int_equal(protobuf_c_message_pack(m, buf), *len);
    return buf;
}

static void test_every_message_round_trips(void **state)
{
    (void)state;
    for (size_t mi = 0; mi < N_MESSAGES; mi++) {
        const ProtobufCMessageDescriptor *desc = all_messages[mi];
        unsigned variants = max_oneof_members(desc);
        for (unsigned v = 0; v < variants; v++) {
            ProtobufCMessage *m = fill_message(desc, v, (unsigned)mi * 31 + v, 0);
            size_t len1;
            uint8_t *bytes1 = pack(m, &len1);
            if (desc->n_fields > 0 && len1 == 0)
                fail_msg("%s encoded to nothing", desc->name);
            ProtobufCMessage *back = protobuf_c_message_unpack(desc, NULL, len1, bytes1);
            if (!back)
                fail_msg("%s (variant %u) did not decode", desc->name, v);
            size_t len2;
            uint8_t *bytes2 = pack(back, &len2);
            if (len1 != len2 || memcmp(bytes1, bytes2, len1) != 0)
                fail_msg("%s (variant %u) changed in a round trip", desc->name, v);
            protobuf_c_message_free_unpacked(back, NULL);
            protobuf_c_message_free_unpacked(m, NULL);
            free(bytes1);
            free(bytes2);
        }
    }
}

/* Spot checks that the reflection fill above really reaches the fields the
 * engine cares about, so the round trip cannot pass on empty messages. */
static void test_request_fields_survive(void **state)
{
    (void)state;
    Tokenwire__V1__Request req = TOKENWIRE__V1__REQUEST__INIT;
    Tokenwire__V1__GenerateRequest gen = TOKENWIRE__V1__GENERATE_REQUEST__INIT;
    Tokenwire__V1__SamplingParams sp = TOKENWIRE__V1__SAMPLING_PARAMS__INIT;
    char text[] = "Write a haiku about sockets.";
    char token[] = "secret-key";
    req.request_id = 42;
    req.has_request_id = 1;
    req.auth_token = token;
    req.method_case = TOKENWIRE__V1__REQUEST__METHOD_GENERATE;
    req.generate = &gen;
    gen.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TEXT;
    gen.text = text;
    gen.sampling = &sp;
    sp.has_temperature = 1;
    sp.temperature = 0.0f; /* greedy must be distinguishable from "unset" */
    size_t len;
    uint8_t *buf = pack(&req.base, &len);
    Tokenwire__V1__Request *back = tokenwire__v1__request__unpack(NULL, len, buf);
    assert_non_null(back);
    assert_int_equal(back->request_id, 42);
    assert_string_equal(back->auth_token, "secret-key");
    assert_int_equal(back->method_case, TOKENWIRE__V1__REQUEST__METHOD_GENERATE);
    assert_string_equal(back->generate->text, text);
    assert_true(back->generate->sampling->has_temperature);
    assert_true(back->generate->sampling->temperature == 0.0f);
    assert_false(back->generate->sampling->has_top_p);
    /* Defaults declared in the schema apply when a field is absent. */
    assert_int_equal(back->generate->n, 1);
    assert_true(back->generate->add_special_tokens);
    tokenwire__v1__request__free_unpacked(back, NULL);
    free(buf);
}

/* A message from a newer peer carries fields and methods this build does not
 * know: they must be skipped, not refused. */
static void test_unknown_fields_and_methods_are_ignored(void **state)
{
    (void)state;
    Tokenwire__V1__HealthRequest h = TOKENWIRE__V1__HEALTH_REQUEST__INIT;
    Tokenwire__V1__Request req = TOKENWIRE__V1__REQUEST__INIT;
    req.method_case = TOKENWIRE__V1__REQUEST__METHOD_HEALTH;
    req.health = &h;
    req.request_id = 7;
    req.has_request_id = 1;
    size_t len;
    uint8_t *known = pack(&req.base, &len);
    /* field 900 (varint 5) and field 901 (a length-delimited "method" body) */
    const uint8_t extra[] = {0xa0, 0x38, 0x05, 0xaa, 0x38, 0x02, 0x08, 0x01};
    uint8_t *buf = xcalloc(len + sizeof extra, 1);
    memcpy(buf, known, len);
    memcpy(buf + len, extra, sizeof extra);
    Tokenwire__V1__Request *back = tokenwire__v1__request__unpack(NULL, len + sizeof extra, buf);
    assert_non_null(back);
    assert_int_equal(back->request_id, 7);
    assert_int_equal(back->method_case, TOKENWIRE__V1__REQUEST__METHOD_HEALTH);
    tokenwire__v1__request__free_unpacked(back, NULL);

    /* Only an unknown method: decodes with no method set (the engine then
     * answers UNIMPLEMENTED). */
    const uint8_t only_new_method[] = {0x10, 0x09, 0xaa, 0x38, 0x00};
    back = tokenwire__v1__request__unpack(NULL, sizeof only_new_method, only_new_method);
    assert_non_null(back);
    assert_int_equal(back->request_id, 9);
    assert_int_equal(back->method_case, TOKENWIRE__V1__REQUEST__METHOD__NOT_SET);
    tokenwire__v1__request__free_unpacked(back, NULL);
    free(buf);
    free(known);
}

/* Every prefix of a valid encoding that cuts a field in half, and random
 * garbage, is refused without leaking (ASan checks the leak part). */
static void test_truncated_and_garbage_bytes_are_refused(void **state)
{
    (void)state;
    ProtobufCMessage *m = fill_message(&tokenwire__v1__request__descriptor, 0, 3, 0);
    size_t len;
    uint8_t *buf = pack(m, &len);
    size_t refused = 0;
    for (size_t cut = 0; cut < len; cut++) {
        ProtobufCMessage *back =
            protobuf_c_message_unpack(&tokenwire__v1__request__descriptor, NULL, cut, buf);
        if (back)
            protobuf_c_message_free_unpacked(back, NULL);
        else
            refused++;
    }
    /* Cuts that land exactly between top-level fields are valid shorter
     * messages; everything else must be refused. */
    assert_true(refused > len / 2);

    tw_test_rng rng = {12345};
    uint8_t junk[512];
    for (int round = 0; round < 2000; round++) {
        size_t n = 1 + tw_test_rand_u64(&rng) % sizeof junk;
        for (size_t i = 0; i < n; i++)
            junk[i] = (uint8_t)tw_test_rand_u64(&rng);
        ProtobufCMessage *back =
            protobuf_c_message_unpack(&tokenwire__v1__request__descriptor, NULL, n, junk);
        if (back)
            protobuf_c_message_free_unpacked(back, NULL);
    }
    protobuf_c_message_free_unpacked(m, NULL);
    free(buf);
}

static void test_every_schema_message_is_listed(void **state)
{
    (void)state;
    const char *src = getenv("TW_PROTO_FILE");
    assert_non_null(src);
    size_t len;
    char *text = tw_test_read_file(src, &len);
    assert_non_null(text);
    size_t declared = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        if (strncmp(line, "message ", 8) == 0)
            declared++;
    free(text);
    if (declared != N_MESSAGES)
        fail_msg("schema declares %zu messages, this test covers %zu", declared, N_MESSAGES);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_message_round_trips),
        cmocka_unit_test(test_request_fields_survive),
        cmocka_unit_test(test_unknown_fields_and_methods_are_ignored),
        cmocka_unit_test(test_truncated_and_garbage_bytes_are_refused),
        cmocka_unit_test(test_every_schema_message_is_listed),
    };
    return cmocka_run_group_tests_name("proto/schema", tests, NULL, NULL);
}
