#include "responses_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tw_status tw_bridge_resp_stream_init(tw_bridge_resp_stream *rs, const tw_bridge_resp_echo *echo,
                                     tw_bridge_resp_write_fn write, void *user)
{
    memset(rs, 0, sizeof *rs);
    rs->echo = *echo;
    rs->write = write;
    rs->user = user;
    rs->output_index = -1;
    rs->calls = json_array();
    rs->logprobs = json_array();
    return rs->calls && rs->logprobs ? TW_OK : TW_RESOURCE_EXHAUSTED;
}

void tw_bridge_resp_stream_fini(tw_bridge_resp_stream *rs)
{
    free(rs->reasoning);
    free(rs->text);
    free(rs->finish);
    free(rs->model);
    json_decref(rs->calls);
    json_decref(rs->logprobs);
    json_decref(rs->usage);
    json_decref(rs->error);
    memset(rs, 0, sizeof *rs);
}

/* Sends ev (a new reference, NULL: out of memory) as type. */
static int emit(tw_bridge_resp_stream *rs, const char *type, json_t *ev)
{
    if (!ev || json_object_set_new(ev, "type", json_string(type)) ||
        json_object_set_new(ev, "sequence_number", json_integer(rs->seq++))) {
        json_decref(ev);
        return 1;
    }
    int rc = rs->write(rs->user, type, ev);
    json_decref(ev);
    return rc;
}

static bool append(char **buf, size_t *len, const char *s, size_t n)
{
    char *p = realloc(*buf, *len + n + 1);
    if (!p)
        return false;
    memcpy(p + *len, s, n);
    *len += n;
    p[*len] = '\0';
    *buf = p;
    return true;
}

static void item_id(const tw_bridge_resp_stream *rs, tw_bridge_resp_open kind, char *id, size_t cap)
{
    const char *suffix = rs->echo.id + 5; /* past "resp_" */
    if (kind == RS_REASONING)
        snprintf(id, cap, "rs_%s", suffix);
    else if (kind == RS_MESSAGE)
        snprintf(id, cap, "msg_%s", suffix);
    else
        snprintf(id, cap, "fc_%zu_%s", json_array_size(rs->calls) - 1, suffix);
}

/* The open item as it stands (status: "in_progress" or "completed"). */
static json_t *open_item(const tw_bridge_resp_stream *rs, const char *status)
{
    char id[96];
    item_id(rs, rs->open, id, sizeof id);
    if (rs->open == RS_MESSAGE)
        return tw_bridge_response_message(id, rs->text ? rs->text : "", status, rs->logprobs);
    if (rs->open == RS_REASONING)
        return json_pack("{s:s, s:s, s:[], s:[{s:s, s:s}]}", "id", id, "type", "reasoning",
                         "summary", "content", "type", "reasoning_text", "text",
                         rs->reasoning ? rs->reasoning : "");
    const json_t *c = json_array_get(rs->calls, json_array_size(rs->calls) - 1);
    return json_pack("{s:s, s:s, s:s, s:O, s:O, s:O}", "id", id, "type", "function_call", "status",
                     status, "call_id", json_object_get(c, "call_id"), "name",
                     json_object_get(c, "name"), "arguments", json_object_get(c, "arguments"));
}

/* The open item's done events. */
static int close_open(tw_bridge_resp_stream *rs)
{
    if (rs->open == RS_NONE)
        return 0;
    char id[96];
    item_id(rs, rs->open, id, sizeof id);
    const int oi = rs->output_index;
    int rc = 0;
    if (rs->open == RS_REASONING) {
        rc = emit(rs, "response.reasoning_text.done",
                  json_pack("{s:s, s:i, s:i, s:s}", "item_id", id, "output_index", oi,
                            "content_index", 0, "text", rs->reasoning ? rs->reasoning : ""));
    } else if (rs->open == RS_MESSAGE) {
        const char *t = rs->text ? rs->text : "";
        rc = emit(rs, "response.output_text.done",
                  json_pack("{s:s, s:i, s:i, s:s, s:O}", "item_id", id, "output_index", oi,
                            "content_index", 0, "text", t, "logprobs", rs->logprobs));
        rc = rc ? rc
                : emit(rs, "response.content_part.done",
                       json_pack("{s:s, s:i, s:i, s:{s:s, s:s, s:[]}}", "item_id", id,
                                 "output_index", oi, "content_index", 0, "part", "type",
                                 "output_text", "text", t, "annotations"));
    } else {
        const json_t *c = json_array_get(rs->calls, json_array_size(rs->calls) - 1);
        rc = emit(rs, "response.function_call_arguments.done",
                  json_pack("{s:s, s:i, s:O, s:O}", "item_id", id, "output_index", oi, "name",
                            json_object_get(c, "name"), "arguments",
                            json_object_get(c, "arguments")));
    }
    rc = rc ? rc
            : emit(rs, "response.output_item.done",
                   json_pack("{s:i, s:o}", "output_index", oi, "item", open_item(rs, "completed")));
    rs->open = RS_NONE;
    return rc;
}

/* Makes kind the open item (a call always opens a new one). */
static int open_kind(tw_bridge_resp_stream *rs, tw_bridge_resp_open kind)
{
    if (rs->open == kind && kind != RS_CALL)
        return 0;
    int rc = close_open(rs);
    if (rc)
        return rc;
    rs->open = kind;
    rs->output_index++;
    rc = emit(rs, "response.output_item.added",
              json_pack("{s:i, s:o}", "output_index", rs->output_index, "item",
                        open_item(rs, "in_progress")));
    if (!rc && kind == RS_MESSAGE) {
        char id[96];
        item_id(rs, kind, id, sizeof id);
        rc = emit(rs, "response.content_part.added",
                  json_pack("{s:s, s:i, s:i, s:{s:s, s:s, s:[]}}", "item_id", id, "output_index",
                            rs->output_index, "content_index", 0, "part", "type", "output_text",
                            "text", "", "annotations"));
    }
    return rc;
}

static tw_bridge_resp_parts parts_of(const tw_bridge_resp_stream *rs)
{
    return (tw_bridge_resp_parts){.reasoning = rs->reasoning,
                                  .text = rs->text,
                                  .finish = rs->finish,
                                  .model = rs->model,
                                  .calls = rs->calls,
                                  .usage = rs->usage,
                                  .logprobs = rs->logprobs};
}

static int start(tw_bridge_resp_stream *rs)
{
    rs->started = true;
    tw_bridge_resp_parts p = parts_of(rs);
    json_t *r = tw_bridge_response_object(&rs->echo, &p, "in_progress");
    int rc = emit(rs, "response.created", json_pack("{s:O}", "response", r));
    rc = rc ? rc : emit(rs, "response.in_progress", json_pack("{s:O}", "response", r));
    json_decref(r);
    return rc;
}

/* lps: the chunk's token log-probabilities (chat's logprobs.content), or
 * NULL. */
static int text_delta(tw_bridge_resp_stream *rs, tw_bridge_resp_open kind, const char *d, size_t n,
                      const json_t *lps)
{
    int rc = open_kind(rs, kind);
    bool ok = kind == RS_MESSAGE ? append(&rs->text, &rs->n_text, d, n)
                                 : append(&rs->reasoning, &rs->n_reasoning, d, n);
    if (rc || !ok)
        return 1;
    char id[96];
    item_id(rs, kind, id, sizeof id);
    json_t *ev = json_pack("{s:s, s:i, s:i, s:s%}", "item_id", id, "output_index", rs->output_index,
                           "content_index", 0, "delta", d, n);
    if (kind == RS_REASONING)
        return emit(rs, "response.reasoning_text.delta", ev);
    if (ev && json_object_set_new(ev, "logprobs", lps ? json_deep_copy(lps) : json_array())) {
        json_decref(ev);
        return 1;
    }
    return emit(rs, "response.output_text.delta", ev);
}

static int call_delta(tw_bridge_resp_stream *rs, const json_t *tc)
{
    const json_t *fn = json_object_get(tc, "function");
    const json_int_t index = json_integer_value(json_object_get(tc, "index"));
    if (index >= (json_int_t)json_array_size(rs->calls)) {
        const char *id = json_string_value(json_object_get(tc, "id"));
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (json_array_append_new(rs->calls,
                                  json_pack("{s:s, s:s, s:s}", "call_id", id ? id : "", "name",
                                            name ? name : "", "arguments", "")) ||
            open_kind(rs, RS_CALL))
            return 1;
    }
    const char *d = json_string_value(json_object_get(fn, "arguments"));
    if (!d || !d[0])
        return 0;
    json_t *c = json_array_get(rs->calls, json_array_size(rs->calls) - 1);
    const char *had = json_string_value(json_object_get(c, "arguments"));
    size_t n = strlen(had) + strlen(d);
    char *all = malloc(n + 1);
    if (!all)
        return 1;
    snprintf(all, n + 1, "%s%s", had, d);
    int bad = json_object_set_new(c, "arguments", json_string(all));
    free(all);
    char id[96];
    item_id(rs, RS_CALL, id, sizeof id);
    return bad || emit(rs, "response.function_call_arguments.delta",
                       json_pack("{s:s, s:i, s:s}", "item_id", id, "output_index", rs->output_index,
                                 "delta", d));
}

int tw_bridge_resp_stream_chunk(void *user, const json_t *chunk)
{
    tw_bridge_resp_stream *rs = user;
    if (!rs->started && start(rs))
        return 1;
    const json_t *err = json_object_get(chunk, "error");
    if (err) {
        rs->failed = true;
        json_decref(rs->error);
        rs->error = json_pack("{s:O?, s:O?}", "code", json_object_get(err, "code"), "message",
                              json_object_get(err, "message"));
        return emit(rs, "error",
                    json_pack("{s:O?, s:O?, s:O?}", "code", json_object_get(err, "code"), "message",
                              json_object_get(err, "message"), "param",
                              json_object_get(err, "param")));
    }
    const char *model = json_string_value(json_object_get(chunk, "model"));
    if (model && !rs->model && !(rs->model = strdup(model)))
        return 1;
    const json_t *usage = json_object_get(chunk, "usage");
    if (json_is_object(usage)) {
        json_decref(rs->usage);
        rs->usage = json_incref((json_t *)usage);
    }
    const json_t *ch = json_array_get(json_object_get(chunk, "choices"), 0);
    const json_t *delta = json_object_get(ch, "delta");
    const json_t *r = json_object_get(delta, "reasoning_content");
    if (json_string_length(r) &&
        text_delta(rs, RS_REASONING, json_string_value(r), json_string_length(r), NULL))
        return 1;
    /* the text's tokens, kept for the message whether or not this chunk
     * brings text (a stop string's lookahead may hold it back) */
    const json_t *lps = json_object_get(json_object_get(ch, "logprobs"), "content");
    if (json_array_size(lps) && json_array_extend(rs->logprobs, (json_t *)lps))
        return 1;
    const json_t *t = json_object_get(delta, "content");
    if (json_string_length(t) &&
        text_delta(rs, RS_MESSAGE, json_string_value(t), json_string_length(t), lps))
        return 1;
    const json_t *calls = json_object_get(delta, "tool_calls");
    for (size_t i = 0; i < json_array_size(calls); i++)
        if (call_delta(rs, json_array_get(calls, i)))
            return 1;
    const char *finish = json_string_value(json_object_get(ch, "finish_reason"));
    if (finish && !rs->finish && !(rs->finish = strdup(finish)))
        return 1;
    return 0;
}

int tw_bridge_resp_stream_error(tw_bridge_resp_stream *rs, const tw_bridge_apierr *ae)
{
    if (!rs->started && start(rs))
        return 1;
    rs->failed = true;
    json_decref(rs->error);
    rs->error = json_pack("{s:s, s:s}", "code", ae->code[0] ? ae->code : "server_error", "message",
                          ae->err.msg);
    return emit(rs, "error",
                json_pack("{s:s, s:s, s:s?}", "code", ae->code[0] ? ae->code : "server_error",
                          "message", ae->err.msg, "param", ae->param[0] ? ae->param : NULL));
}

int tw_bridge_resp_stream_end(tw_bridge_resp_stream *rs)
{
    if (!rs->started && start(rs))
        return 1;
    int rc = close_open(rs);
    /* an answer with neither text nor calls still has its (empty) message */
    if (!rc && !rs->failed && rs->output_index < 0) {
        rc = open_kind(rs, RS_MESSAGE);
        rc = rc ? rc : close_open(rs);
    }
    if (rc)
        return rc;
    tw_bridge_resp_parts p = parts_of(rs);
    json_t *r = tw_bridge_response_object(&rs->echo, &p, "completed");
    if (!r)
        return 1;
    if (rs->failed && (json_object_set_new(r, "status", json_string("failed")) ||
                       json_object_set(r, "error", rs->error ? rs->error : json_null()))) {
        json_decref(r);
        return 1;
    }
    if (!rs->failed && rs->echo.keep)
        rs->echo.keep(rs->echo.keep_user, r);
    const char *status = json_string_value(json_object_get(r, "status"));
    char type[40];
    snprintf(type, sizeof type, "response.%s", status);
    return emit(rs, type, json_pack("{s:o}", "response", r));
}
