/* Decodes hostile bytes as every message the wire carries: a Request, a
 * Reply (both possibly zstd-compressed), a bare StreamChunk and a PUB frame.
 * The first byte picks the decoder so that the corpus can specialise, and
 * small limits keep the "zip bomb" paths reachable. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "tokenwire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t sel = data[0];
    data++;
    size--;
    tw_wire_limits lim;
    tw_wire_limits_default(&lim);
    if (sel & 0x80) {
        lim.max_message_bytes = 4096;
        lim.max_body_bytes = 8192;
        lim.max_decoded_bytes = 65536;
    }
    tw_err err = {0};
    switch (sel & 3) {
    case 0: {
        Tokenwire__V1__Request *req = NULL;
        if (tw_wire_decode_request(data, size, &lim, &req, &err) == TW_OK) {
            /* A decoded request must re-encode. */
            uint8_t *out = NULL;
            size_t out_len = 0;
            tw_wire_encode_options opts = {.compress_threshold = 64};
            if (tw_wire_encode_request(req, &opts, &out, &out_len, &err) == TW_OK)
                free(out);
            tw_wire_free_request(req);
        }
        break;
    }
    case 1: {
        Tokenwire__V1__Reply *rep = NULL;
        if (tw_wire_decode_reply(data, size, &lim, &rep, &err) == TW_OK) {
            uint8_t *out = NULL;
            size_t out_len = 0;
            tw_wire_encode_options opts = {.compress_threshold = 64};
            if (tw_wire_encode_reply(rep, &opts, &out, &out_len, &err) == TW_OK)
                free(out);
            tw_wire_free_reply(rep);
        }
        break;
    }
    case 2: {
        Tokenwire__V1__StreamChunk *c = NULL;
        if (tw_wire_decode_chunk(data, size, &lim, &c, &err) == TW_OK)
            tw_wire_free_chunk(c);
        break;
    }
    default: {
        Tokenwire__V1__StreamChunk *c = NULL;
        if (tw_wire_parse_frame(data, size, &lim, &c, &err) == TW_OK) {
            uint8_t *out = NULL;
            size_t out_len = 0;
            if (tw_wire_encode_frame(c, &out, &out_len, &err) == TW_OK)
                free(out);
            tw_wire_free_chunk(c);
        }
        break;
    }
    }
    return 0;
}
