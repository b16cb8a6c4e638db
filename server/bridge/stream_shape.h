/* Engine StreamChunks → OpenAI streaming events.
 *
 * The shaper turns the engine's per-choice chunks into the sequence OpenAI
 * clients expect: for chat, a first chunk per choice whose delta carries the
 * role, then reasoning/content deltas, then tool-call deltas, then a chunk
 * with an empty delta and the finish_reason; with include_usage, every chunk
 * has "usage": null and a last chunk with empty choices carries the usage.
 * For /v1/completions the chunks are text_completion objects; with echo a
 * choice's first one holds the prompt.
 *
 * Events go to a callback as JSON (one `data:` line each); writing them and
 * the closing `[DONE]` is the caller's business. Not thread-safe: one shaper
 * per stream, fed from the thread that receives the chunks.
 */
#ifndef TW_BRIDGE_STREAM_SHAPE_H
#define TW_BRIDGE_STREAM_SHAPE_H

#include <jansson.h>
#include <stdbool.h>

#include "api_error.h"
#include "request_map.h"
#include "response_json.h"
#include "toolcall_parse.h"

/* Receives one event (borrowed); returns 0 to go on, nonzero to stop (the
 * client went away). */
typedef int (*tw_bridge_event_fn)(void *user, const json_t *event);

typedef struct tw_bridge_shaper_choice {
    bool started;  /* the role chunk was sent */
    bool finished; /* the finish chunk was sent */
    bool echoed;   /* completions with echo: the prompt went out */
    tw_bridge_tool_stream tools;
    size_t text_offset; /* legacy logprobs text offsets */
} tw_bridge_shaper_choice;

typedef struct tw_bridge_shaper {
    tw_bridge_resp_meta meta;
    const tw_bridge_gen_request *rq;
    tw_bridge_shaper_choice *choices;
    size_t n_choices;
    tw_bridge_event_fn fn;
    void *user;
    Tokenwire__V1__Usage usage;
    bool have_usage;
    bool stopped; /* fn asked to stop, or memory ran out */
} tw_bridge_shaper;

/* Prepares a shaper for rq's n choices. meta's strings must outlive it.
 * TW_RESOURCE_EXHAUSTED when memory runs out. */
tw_status tw_bridge_shaper_init(tw_bridge_shaper *sh, const tw_bridge_resp_meta *meta,
                                const tw_bridge_gen_request *rq, tw_bridge_event_fn fn,
                                void *user);

/* Shapes one chunk into zero or more events. A chunk carrying an error emits
 * an {"error": {...}} event. Returns nonzero once the stream should stop. */
int tw_bridge_shaper_chunk(tw_bridge_shaper *sh, const Tokenwire__V1__StreamChunk *c);

/* Emits an error event for a stream that failed outside any chunk (engine
 * lost, timeout). */
int tw_bridge_shaper_error(tw_bridge_shaper *sh, const tw_bridge_apierr *ae);

/* Emits the usage chunk when include_usage was asked. Returns nonzero when
 * the event could not be delivered. */
int tw_bridge_shaper_end(tw_bridge_shaper *sh);

void tw_bridge_shaper_fini(tw_bridge_shaper *sh);

#endif
