/* Parses hostile model output for tool calls, whole and as a stream of
 * deltas whose sizes come from the input, and checks that every call the
 * parser returns carries valid JSON arguments. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "toolcall_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const tw_bridge_tool_calls *c)
{
    if (c->n > TW_BRIDGE_TOOLCALL_MAX)
        abort();
    for (size_t i = 0; i < c->n; i++) {
        if (!c->items[i].id || !c->items[i].name || !c->items[i].arguments)
            abort();
        json_t *j = json_loads(c->items[i].arguments, JSON_DECODE_ANY, NULL);
        if (!j)
            abort();
        json_decref(j);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t step = data[0];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    char *copy = malloc(len ? len : 1);
    if (!copy)
        return 0;
    memcpy(copy, text, len);
    tw_err err = {0};
    tw_bridge_tool_calls c = {0};
    if (tw_bridge_parse_tool_calls(copy, len, "s", &c, &err) == TW_OK)
        check(&c);
    tw_bridge_tool_calls_free(&c);

    tw_bridge_tool_stream ts;
    tw_bridge_tool_stream_init(&ts);
    size_t chunk = (step % 17) + 1;
    tw_status st = TW_OK;
    for (size_t off = 0; off < len && st == TW_OK; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        const char *emit;
        size_t emit_len;
        st = tw_bridge_tool_stream_feed(&ts, copy + off, n, &emit, &emit_len, &err);
    }
    tw_bridge_tool_calls s = {0};
    if (st == TW_OK && tw_bridge_tool_stream_finish(&ts, "s", &s, &err) == TW_OK)
        check(&s);
    tw_bridge_tool_calls_free(&s);
    tw_bridge_tool_stream_fini(&ts);
    free(copy);
    return 0;
}
