/* A chat completion stream (the shaper's events) as a Responses stream:
 * response.created and response.in_progress first; then for each output
 * item output_item.added, its deltas (reasoning_text, output_text after a
 * content_part.added, function_call_arguments) and, once the next item
 * starts or the answer ends, its done events; last response.completed (or
 * response.incomplete) with the whole response, or an error event and
 * response.failed. Every event carries its type and a sequence_number. */
#ifndef TW_BRIDGE_RESPONSES_STREAM_H
#define TW_BRIDGE_RESPONSES_STREAM_H

#include <jansson.h>
#include <stdbool.h>

#include "api_error.h"
#include "responses_map.h"

/* Writes one event (borrowed): type is its "type". Nonzero to stop. */
typedef int (*tw_bridge_resp_write_fn)(void *user, const char *type, const json_t *event);

typedef enum { RS_NONE = 0, RS_REASONING, RS_MESSAGE, RS_CALL } tw_bridge_resp_open;

typedef struct tw_bridge_resp_stream {
    tw_bridge_resp_echo echo;
    tw_bridge_resp_write_fn write;
    void *user;
    long long seq;
    bool started, failed;
    tw_bridge_resp_open open; /* the item now being written */
    int output_index;         /* its index among the output items */
    char *reasoning, *text;   /* gathered (malloc'd, NUL-terminated) */
    size_t n_reasoning, n_text;
    json_t *calls; /* [{call_id, name, arguments}] */
    json_t *logprobs; /* the text's tokens so far (chat's logprobs.content) */
    char *finish, *model;
    json_t *usage;
    json_t *error; /* {code, message} once the stream failed */
} tw_bridge_resp_stream;

/* Prepares a stream; echo's strings and request must outlive it. */
tw_status tw_bridge_resp_stream_init(tw_bridge_resp_stream *rs, const tw_bridge_resp_echo *echo,
                                     tw_bridge_resp_write_fn write, void *user);

/* Takes one chat chunk event (a tw_bridge_event_fn for the shaper). */
int tw_bridge_resp_stream_chunk(void *user, const json_t *chunk);

/* Ends the stream: the open item's done events and the final response
 * (or, after an error, response.failed). */
int tw_bridge_resp_stream_end(tw_bridge_resp_stream *rs);

/* A failure outside any chunk: an error event; end then sends response.failed. */
int tw_bridge_resp_stream_error(tw_bridge_resp_stream *rs, const tw_bridge_apierr *ae);

void tw_bridge_resp_stream_fini(tw_bridge_resp_stream *rs);

#endif
