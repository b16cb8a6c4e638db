#include "call_ban.h"

#include <stdlib.h>
#include <string.h>

uint8_t call_ban_step(const call_ban *b, uint8_t at, const char *p, size_t n)
{
    const size_t len = strlen(b->trigger.text);
    for (size_t i = 0; i < n; i++) {
        at = (uint8_t)tw_tool_trigger_step(b->trigger.text, at, (unsigned char)p[i]);
        /* only a committed forced token gets here whole; it starts over */
        if (at == len)
            at = 0;
    }
    return at;
}

/* Whether bytes p[0..n) complete the opening from state at. */
static int completes(const char *text, size_t len, size_t at, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        at = tw_tool_trigger_step(text, at, (unsigned char)p[i]);
        if (at == len)
            return 1;
    }
    return 0;
}

tw_status call_ban_build(const tw_tokenizer *tok, uint32_t vocab, tw_tool_format f, call_ban **out,
                         tw_err *err)
{
    *out = NULL;
    tw_tool_trigger t;
    if (!tok || !tw_tool_call_trigger(f, &t) || t.at_start)
        return TW_OK;
    const size_t len = strlen(t.text);
    if (len == 0 || len > TW_CALL_BAN_MAX)
        return TW_OK;
    call_ban *b = calloc(1, sizeof *b);
    if (!b)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "tool_choice none: out of memory");
    b->trigger = t;
    /* two passes: count, then fill */
    size_t count[TW_CALL_BAN_MAX] = {0};
    for (int pass = 0; pass < 2; pass++) {
        size_t fill[TW_CALL_BAN_MAX] = {0};
        for (uint32_t id = 0; id < vocab; id++) {
            size_t n = 0;
            const char *p = tw_tokenizer_token_bytes(tok, id, &n);
            if (!p || n == 0)
                continue;
            for (size_t k = 0; k < len; k++) {
                if (!completes(t.text, len, k, p, n))
                    continue;
                if (pass == 0)
                    count[k]++;
                else
                    b->ids[b->start[k] + fill[k]++] = id;
            }
        }
        if (pass == 0) {
            for (size_t k = 0; k < len; k++)
                b->start[k + 1] = b->start[k] + (uint32_t)count[k];
            for (size_t k = len; k < TW_CALL_BAN_MAX; k++)
                b->start[k + 1] = b->start[len];
            b->ids = malloc(((size_t)b->start[len] + 1) * sizeof *b->ids);
            if (!b->ids) {
                free(b);
                return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "tool_choice none: out of memory");
            }
        }
    }
    *out = b;
    return TW_OK;
}

void call_ban_free(call_ban *b)
{
    if (!b)
        return;
    free(b->ids);
    free(b);
}
