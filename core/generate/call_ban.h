/* tool_choice "none" on templates whose calls open with a tag (Hermes
 * "<tool_call>", Mistral "[TOOL_CALLS]"): the tokens that would complete
 * the opening are banned, so the answer never opens a call. The opening is
 * matched byte by byte across tokens (tw_tool_trigger_step), so for each
 * state of the match (how many of the opening's bytes the answer ends
 * with) the banned tokens are those whose bytes finish it from there. */
#ifndef TW_GENERATE_CALL_BAN_H
#define TW_GENERATE_CALL_BAN_H

#include <stddef.h>
#include <stdint.h>

#include "tw/status.h"
#include "tw/tokenizer.h"
#include "tw/tool_format.h"

/* The longest opening the ban follows (states 0 .. len - 1). */
#define TW_CALL_BAN_MAX 32

typedef struct call_ban {
    tw_tool_trigger trigger;
    uint32_t *ids; /* state k's tokens: ids[start[k] .. start[k + 1]) */
    uint32_t start[TW_CALL_BAN_MAX + 1];
} call_ban;

/* The ban of format f over tok's first vocab tokens; *out stays NULL (and
 * TW_OK) for a format without a tag that opens calls anywhere (none, or
 * Llama 3.1's leading "{", which an answer may rightly start with). */
tw_status call_ban_build(const tw_tokenizer *tok, uint32_t vocab, tw_tool_format f, call_ban **out,
                         tw_err *err);

void call_ban_free(call_ban *b);

/* The state after bytes p[0..n) from state at. */
uint8_t call_ban_step(const call_ban *b, uint8_t at, const char *p, size_t n);

#endif
