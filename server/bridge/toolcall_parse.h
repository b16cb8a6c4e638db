/* Tool calls written by the model as text.
 *
 * When the engine hands back raw text instead of structured tool calls, the
 * bridge recognises the formats open models use:
 *  - Hermes / Qwen: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`,
 *    one block per call, possibly after some prose;
 *  - Llama 3.1 JSON: the whole answer is `{"name": ..., "parameters": {...}}`
 *    (optionally after `<|python_tag|>`), several calls separated by `;`;
 *  - Mistral: the whole answer is a JSON array of such objects (optionally
 *    after `[TOOL_CALLS]`).
 * Text that does not parse as a call is left as content: a model that merely
 * mentions a tag never loses its answer.
 *
 * Functions are reentrant; a tw_bridge_tool_stream belongs to one stream.
 */
#ifndef TW_BRIDGE_TOOLCALL_PARSE_H
#define TW_BRIDGE_TOOLCALL_PARSE_H

#include <stdbool.h>
#include <stddef.h>

#include "tw/status.h"

/* One parsed call; every string is malloc'd and NUL-terminated. */
typedef struct tw_bridge_tool_call {
    char *id;        /* "call_<seed><index>" */
    char *name;      /* the function's name */
    char *arguments; /* the arguments as compact JSON text ("{}" when absent) */
} tw_bridge_tool_call;

typedef struct tw_bridge_tool_calls {
    tw_bridge_tool_call *items;
    size_t n;
    /* The text that was not part of a call, trimmed; NULL when none. */
    char *content;
} tw_bridge_tool_calls;

/* Most calls taken from one answer; more are left in the content. */
#define TW_BRIDGE_TOOLCALL_MAX 64

/* Parses text[0..len) (need not be NUL-terminated). id_seed prefixes the ids
 * ("call_" + id_seed + index). On TW_OK, out owns its strings (free with
 * tw_bridge_tool_calls_free) and out->n may be 0, in which case
 * out->content is a copy of the whole text (or NULL when the text is empty).
 * Fails only with TW_RESOURCE_EXHAUSTED when memory runs out. */
tw_status tw_bridge_parse_tool_calls(const char *text, size_t len, const char *id_seed,
                                     tw_bridge_tool_calls *out, tw_err *err);

/* Frees what a parse produced; safe on a zeroed struct. */
void tw_bridge_tool_calls_free(tw_bridge_tool_calls *calls);

/* Incremental recognition over a stream of content deltas: text that cannot
 * belong to a call passes through at once, text that may start a call is held
 * back until the stream ends and is then parsed. */
typedef struct tw_bridge_tool_stream {
    int state;      /* see toolcall_parse.c */
    char *pending;  /* text held back (NUL-terminated) */
    size_t len, cap;
    char *out;      /* what the last feed let through */
    size_t out_cap;
} tw_bridge_tool_stream;

void tw_bridge_tool_stream_init(tw_bridge_tool_stream *ts);

/* Feeds a content delta. On TW_OK, *emit (*emit_len bytes) is the text to send on now
 * (valid until the next call; may be empty). TW_RESOURCE_EXHAUSTED when memory
 * runs out. */
tw_status tw_bridge_tool_stream_feed(tw_bridge_tool_stream *ts, const char *delta, size_t len,
                                     const char **emit, size_t *emit_len, tw_err *err);

/* Ends the stream: parses what was held back. out->content is the held-back
 * text that turned out not to be a call (to send as a last content delta). */
tw_status tw_bridge_tool_stream_finish(tw_bridge_tool_stream *ts, const char *id_seed,
                                       tw_bridge_tool_calls *out, tw_err *err);

void tw_bridge_tool_stream_fini(tw_bridge_tool_stream *ts);

#endif
