/* Writes seed inputs for fuzz_wire into the folder named by argv[1]: plain
 * and zstd-compressed Requests and Replies, a chunk and a PUB frame, each
 * behind the selector byte the harness reads first. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenwire/wire.h"

static int put(const char *dir, const char *name, uint8_t sel, const uint8_t *buf, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return 1;
    fputc(sel, f);
    fwrite(buf, 1, n, f);
    return fclose(f) != 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    int bad = 0;
    tw_err err;
    uint8_t *buf;
    size_t n;

    uint32_t ids[] = {1, 2, 300, 70000};
    Tokenwire__V1__TokenIds tids = TOKENWIRE__V1__TOKEN_IDS__INIT;
    tids.n_ids = 4;
    tids.ids = ids;
    Tokenwire__V1__GenerateRequest g = TOKENWIRE__V1__GENERATE_REQUEST__INIT;
    g.model = "m";
    g.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TOKEN_IDS;
    g.token_ids = &tids;
    Tokenwire__V1__Request r = TOKENWIRE__V1__REQUEST__INIT;
    r.has_request_id = 1;
    r.request_id = 42;
    r.auth_token = "k";
    r.method_case = TOKENWIRE__V1__REQUEST__METHOD_GENERATE;
    r.generate = &g;
    tw_wire_encode_options zopt = {.compress_threshold = 1};
    for (int z = 0; z < 2; z++) {
        if (tw_wire_encode_request(&r, z ? &zopt : NULL, &buf, &n, &err) != TW_OK)
            return 1;
        bad |= put(dir, z ? "req_zstd" : "req_plain", 0, buf, n);
        bad |= put(dir, z ? "req_zstd_small" : "req_plain_small", 0x80, buf, n);
        free(buf);
    }

    Tokenwire__V1__TokenizeRequest t = TOKENWIRE__V1__TOKENIZE_REQUEST__INIT;
    t.text = "hello hello hello hello hello hello hello hello";
    r.method_case = TOKENWIRE__V1__REQUEST__METHOD_TOKENIZE;
    r.tokenize = &t;
    if (tw_wire_encode_request(&r, &zopt, &buf, &n, &err) != TW_OK)
        return 1;
    bad |= put(dir, "req_tokenize_zstd", 0, buf, n);
    free(buf);

    Tokenwire__V1__DetokenizeReply dr = TOKENWIRE__V1__DETOKENIZE_REPLY__INIT;
    dr.text = "some text some text some text";
    Tokenwire__V1__Status s = TOKENWIRE__V1__STATUS__INIT;
    Tokenwire__V1__Reply rep = TOKENWIRE__V1__REPLY__INIT;
    rep.has_request_id = 1;
    rep.request_id = 9;
    rep.status = &s;
    rep.result_case = TOKENWIRE__V1__REPLY__RESULT_DETOKENIZE;
    rep.detokenize = &dr;
    for (int z = 0; z < 2; z++) {
        if (tw_wire_encode_reply(&rep, z ? &zopt : NULL, &buf, &n, &err) != TW_OK)
            return 1;
        bad |= put(dir, z ? "rep_zstd" : "rep_plain", 1, buf, n);
        free(buf);
    }

    Tokenwire__V1__StreamChunk c = TOKENWIRE__V1__STREAM_CHUNK__INIT;
    c.stream_id = "abc-1";
    c.has_seq = 1;
    c.seq = 3;
    c.text_delta = "delta";
    size_t cn = tokenwire__v1__stream_chunk__get_packed_size(&c);
    buf = malloc(cn);
    tokenwire__v1__stream_chunk__pack(&c, buf);
    bad |= put(dir, "chunk", 2, buf, cn);
    free(buf);
    if (tw_wire_encode_frame(&c, &buf, &n, &err) != TW_OK)
        return 1;
    bad |= put(dir, "frame", 3, buf, n);
    free(buf);
    return bad;
}
