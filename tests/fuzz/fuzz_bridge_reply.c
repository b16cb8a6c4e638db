/* Shapes hostile engine answers into OpenAI responses, as the bridge does:
 * the input's first byte picks one of a few requests (chat or completions,
 * streamed or whole, with logprobs, echo, tools, several choices or
 * prompts); the rest
 * is either one GenerateReply for a whole answer or a run of StreamChunks,
 * each behind a two-byte length, for a stream. Every produced event must be
 * JSON that serialises. */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request_map.h"
#include "response_json.h"
#include "stream_shape.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const bodies[] = {
    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,\"top_logprobs\":3,"
    "\"n\":2,\"return_token_ids\":true%s}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\","
    "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}]%s}",
    "{\"prompt\":\"ab\",\"echo\":true,\"logprobs\":4%s}",
    "{\"prompt\":[1,2,3],\"echo\":true,\"n\":3%s}",
    "{\"prompt\":\"ab\",\"logprobs\":2,\"n\":2,\"return_token_ids\":true%s}",
    "{\"prompt\":[\"ab\",[1,2]],\"echo\":true,\"logprobs\":1%s}",
};

static int drop(void *user, const json_t *ev)
{
    (void)user;
    char *s = json_dumps(ev, JSON_COMPACT);
    if (!s)
        abort();
    free(s);
    return 0;
}

static void whole(const tw_bridge_resp_meta *meta, const tw_bridge_gen_request *rq,
                  const uint8_t *data, size_t size)
{
    Tokenwire__V1__GenerateReply *rep = tokenwire__v1__generate_reply__unpack(NULL, size, data);
    if (!rep)
        return;
    json_t *out = NULL;
    tw_bridge_apierr ae;
    tw_status st = rq->kind == TW_BRIDGE_API_CHAT
                       ? tw_bridge_chat_completion_json(meta, rq, rep, &out, &ae)
                       : tw_bridge_text_completion_json(meta, rq, rep, &out, &ae);
    if (st == TW_OK)
        drop(NULL, out);
    else if (ae.http_status < 400 || ae.http_status > 599)
        abort();
    json_decref(out);
    tokenwire__v1__generate_reply__free_unpacked(rep, NULL);
}

static void streamed(const tw_bridge_resp_meta *meta, const tw_bridge_gen_request *rq,
                     const uint8_t *data, size_t size)
{
    tw_bridge_shaper sh;
    if (tw_bridge_shaper_init(&sh, meta, rq, drop, NULL) != TW_OK)
        return;
    int stop = 0;
    while (!stop && size >= 2) {
        size_t n = (size_t)data[0] | (size_t)data[1] << 8;
        data += 2;
        size -= 2;
        if (n > size)
            n = size;
        Tokenwire__V1__StreamChunk *c = tokenwire__v1__stream_chunk__unpack(NULL, n, data);
        data += n;
        size -= n;
        if (!c)
            continue;
        stop = tw_bridge_shaper_chunk(&sh, c);
        tokenwire__v1__stream_chunk__free_unpacked(c, NULL);
    }
    if (!stop)
        tw_bridge_shaper_end(&sh);
    tw_bridge_shaper_fini(&sh);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t pick = (data[0] >> 1) % (sizeof bodies / sizeof bodies[0]);
    bool stream = data[0] & 1;
    char body[512];
        snprintf(body, sizeof body, bodies[pick],
             stream ? ",\"stream\":true,\"stream_options\":{\"include_usage\":true}" : "");
    json_t *root = json_loads(body, 0, NULL);
    if (!root)
        abort();
    tw_bridge_gen_request rq;
    tw_bridge_apierr ae;
    tw_status st = body[2] == 'm' ? tw_bridge_map_chat_request(root, &rq, &ae)
                                  : tw_bridge_map_completion_request(root, &rq, &ae);
    json_decref(root);
    if (st != TW_OK)
        abort(); /* every body above is a valid request */
    tw_bridge_resp_meta meta = {
        .id = "chatcmpl-fuzz", .created = 1, .model = "m", .fingerprint = "fp_0"};
    if (stream)
        streamed(&meta, &rq, data + 1, size - 1);
    else
        whole(&meta, &rq, data + 1, size - 1);
    tw_bridge_gen_request_fini(&rq);
    return 0;
}
