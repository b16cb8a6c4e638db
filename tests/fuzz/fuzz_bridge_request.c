/* Maps hostile JSON request bodies to GenerateRequests, as the bridge does
 * for /v1/chat/completions, /v1/completions and /v1/responses (the first
 * byte picks the endpoint: odd completions, 2 mod 4 responses, which are
 * rewritten as chat first), and packs the result as the engine would
 * receive it. A Responses request's input, as it is kept, must map again
 * as the conversation a later request goes on from. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "request_map.h"
#include "responses_map.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What is kept of an accepted request, with an answer, maps again. */
static void goes_on_from(const json_t *request)
{
    json_t *items = tw_bridge_responses_context(NULL, request, "resp_fuzz");
    json_t *answer = json_pack("{s:[{s:s, s:s, s:s, s:s, s:[{s:s, s:s}]}]}", "output", "id",
                               "msg_fuzz", "type", "message", "status", "completed", "role",
                               "assistant", "content", "type", "output_text", "text", "ok");
    json_t *prior = tw_bridge_responses_conversation(items, answer);
    json_t *next = json_pack("{s:s}", "input", "next");
    json_t *chat = NULL;
    tw_bridge_apierr ae;
    if (!prior || !next || tw_bridge_responses_to_chat(next, prior, &chat, &ae) != TW_OK)
        abort();
    json_decref(chat);
    json_decref(next);
    json_decref(prior);
    json_decref(answer);
    json_decref(items);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    json_error_t jerr;
    json_t *root = json_loadb((const char *)data + 1, size - 1, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return 0;
    tw_bridge_gen_request r = {0};
    tw_bridge_apierr ae = {0};
    tw_status st;
    if (data[0] & 1) {
        st = tw_bridge_map_completion_request(root, &r, &ae);
    } else if (data[0] & 2) {
        json_t *chat = NULL;
        st = tw_bridge_responses_to_chat(root, NULL, &chat, &ae);
        if (st == TW_OK)
            st = tw_bridge_map_chat_request(chat, &r, &ae);
        json_decref(chat);
        if (st == TW_OK)
            goes_on_from(root);
    } else {
        st = tw_bridge_map_chat_request(root, &r, &ae);
    }
    if (st == TW_OK) {
        size_t n = tokenwire__v1__generate_request__get_packed_size(&r.gen);
        uint8_t *buf = malloc(n ? n : 1);
        if (buf) {
            tokenwire__v1__generate_request__pack(&r.gen, buf);
            Tokenwire__V1__GenerateRequest *back =
                tokenwire__v1__generate_request__unpack(NULL, n, buf);
            if (!back)
                abort();
            tokenwire__v1__generate_request__free_unpacked(back, NULL);
            free(buf);
        }
    } else if (ae.http_status < 400 || ae.http_status > 599) {
        abort();
    }
    tw_bridge_gen_request_fini(&r);
    json_decref(root);
    return 0;
}
