#include "stream_shape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tw_status tw_bridge_shaper_init(tw_bridge_shaper *sh, const tw_bridge_resp_meta *meta,
                                const tw_bridge_gen_request *rq, tw_bridge_event_fn fn,
                                void *user)
{
    memset(sh, 0, sizeof *sh);
    sh->meta = *meta;
    sh->rq = rq;
    sh->fn = fn;
    sh->user = user;
    sh->n_choices =
        (rq->gen.has_n && rq->gen.n > 0 ? rq->gen.n : 1) * (rq->n_prompts > 1 ? rq->n_prompts : 1);
    sh->choices = calloc(sh->n_choices, sizeof *sh->choices);
    if (!sh->choices)
        return TW_RESOURCE_EXHAUSTED;
    for (size_t i = 0; i < sh->n_choices; i++)
        tw_bridge_tool_stream_init(&sh->choices[i].tools);
    return TW_OK;
}

void tw_bridge_shaper_fini(tw_bridge_shaper *sh)
{
    for (size_t i = 0; sh->choices && i < sh->n_choices; i++)
        tw_bridge_tool_stream_fini(&sh->choices[i].tools);
    free(sh->choices);
    sh->choices = NULL;
}

static bool is_chat(const tw_bridge_shaper *sh)
{
    return sh->rq->kind == TW_BRIDGE_API_CHAT;
}

/* Sends one event built around `choice` (stolen); NULL means memory ran out. */
static int emit_choice(tw_bridge_shaper *sh, json_t *choice)
{
    if (sh->stopped) {
        json_decref(choice);
        return 1;
    }
    json_t *ev = tw_bridge_chunk_envelope(&sh->meta, sh->rq->kind, sh->rq->include_usage);
    if (!ev || !choice || json_array_append_new(json_object_get(ev, "choices"), choice)) {
        if (!ev)
            json_decref(choice);
        json_decref(ev);
        sh->stopped = true;
        return 1;
    }
    if (sh->fn(sh->user, ev))
        sh->stopped = true;
    json_decref(ev);
    return sh->stopped;
}

/* A chat chunk choice {index, delta, logprobs, finish_reason}; delta and
 * logprobs are stolen (NULL logprobs means null). */
static json_t *chat_choice(uint32_t index, json_t *delta, json_t *logprobs, const char *finish)
{
    json_t *ch = json_object();
    if (!ch || !delta) {
        json_decref(ch);
        json_decref(delta);
        json_decref(logprobs);
        return NULL;
    }
    int bad = json_object_set_new(ch, "index", json_integer(index));
    bad |= json_object_set_new(ch, "delta", delta);
    bad |= json_object_set_new(ch, "logprobs", logprobs ? logprobs : json_null());
    bad |= json_object_set_new(ch, "finish_reason", finish ? json_string(finish) : json_null());
    if (bad) {
        json_decref(ch);
        return NULL;
    }
    return ch;
}

static json_t *delta_with(const char *key, json_t *value)
{
    json_t *d = json_object();
    if (!d || !value || json_object_set_new(d, key, value)) {
        if (!d)
            json_decref(value);
        json_decref(d);
        return NULL;
    }
    return d;
}

/* A completions chunk choice {text, index, logprobs, finish_reason}. */
static json_t *text_choice(uint32_t index, json_t *text, json_t *logprobs, const char *finish)
{
    json_t *ch = json_object();
    if (!ch || !text) {
        json_decref(ch);
        json_decref(text);
        json_decref(logprobs);
        return NULL;
    }
    int bad = json_object_set_new(ch, "text", text);
    bad |= json_object_set_new(ch, "index", json_integer(index));
    bad |= json_object_set_new(ch, "logprobs", logprobs ? logprobs : json_null());
    bad |= json_object_set_new(ch, "finish_reason", finish ? json_string(finish) : json_null());
    if (bad) {
        json_decref(ch);
        return NULL;
    }
    return ch;
}

static json_t *chunk_logprobs(tw_bridge_shaper *sh, tw_bridge_shaper_choice *st,
                              const Tokenwire__V1__StreamChunk *c)
{
    if (!sh->rq->want_logprobs || c->n_logprobs == 0)
        return NULL;
    if (is_chat(sh))
        return tw_bridge_chat_logprobs_json(c->logprobs, c->n_logprobs, sh->rq->top_logprobs);
    return tw_bridge_completion_logprobs_json(c->logprobs, c->n_logprobs, sh->rq->top_logprobs,
                                              &st->text_offset);
}

/* Adds the chunk's token ids to a choice (the return_token_ids extension). */
static json_t *with_ids(json_t *choice, const Tokenwire__V1__StreamChunk *c)
{
    if (choice && c &&
        json_object_set_new(choice, "token_ids",
                            tw_bridge_token_ids_json(c->token_ids, c->n_token_ids))) {
        json_decref(choice);
        return NULL;
    }
    return choice;
}

/* A content event; ids_from (may be NULL) supplies token ids to attach. */
static int emit_content(tw_bridge_shaper *sh, uint32_t idx, const char *text, size_t len,
                        json_t *logprobs, const Tokenwire__V1__StreamChunk *ids_from)
{
    json_t *ch;
    if (is_chat(sh))
        ch = chat_choice(idx, delta_with("content", tw_bridge_json_text(text, len)), logprobs,
                         NULL);
    else
        ch = text_choice(idx, tw_bridge_json_text(text, len), logprobs, NULL);
    return emit_choice(sh, with_ids(ch, ids_from));
}

/* echo on a stream: the prompt's text (with logprobs, its tokens' too) as a
 * completion choice's first event, before anything it generated. */
static int emit_echo(tw_bridge_shaper *sh, uint32_t idx, tw_bridge_shaper_choice *st,
                     const Tokenwire__V1__StreamChunk *c)
{
    st->echoed = true;
    bool lps = sh->rq->want_logprobs;
    if (!c->prompt_text || (lps && c->n_prompt_logprobs == 0)) {
        tw_bridge_apierr ae;
        tw_bridge_fail(&ae, TW_INTERNAL, NULL, "engine_error",
                       "The engine did not send the prompt back for 'echo'.");
        tw_bridge_shaper_error(sh, &ae);
        sh->stopped = true;
        return 1;
    }
    json_t *lp = NULL;
    if (lps && !(lp = tw_bridge_echo_logprobs_json(c->prompt_logprobs, c->n_prompt_logprobs, NULL,
                                                   0, sh->rq->top_logprobs, &st->text_offset))) {
        sh->stopped = true;
        return 1;
    }
    json_t *text = tw_bridge_json_text(c->prompt_text, strlen(c->prompt_text));
    return emit_choice(sh, text_choice(idx, text, lp, NULL));
}

/* The end of one chat choice: tool calls (the engine's or parsed from held
 * text), any held-back text, then the finish chunk. */
static int finish_chat_choice(tw_bridge_shaper *sh, uint32_t idx,
                              const Tokenwire__V1__StreamChunk *c)
{
    tw_bridge_shaper_choice *st = &sh->choices[idx];
    const char *finish = tw_bridge_finish_reason(c->finish_reason);
    tw_bridge_tool_calls parsed = {0};
    char seed[48];
    snprintf(seed, sizeof seed, "%.24s_%u_",
             sh->meta.id + (strncmp(sh->meta.id, "chatcmpl-", 9) ? 0 : 9), idx);
    tw_err err;
    if (tw_bridge_tool_stream_finish(&st->tools, seed, &parsed, &err) != TW_OK) {
        sh->stopped = true;
        return 1;
    }
    int rc = 0;
    if (parsed.content)
        rc = emit_content(sh, idx, parsed.content, strlen(parsed.content), NULL, NULL);
    json_t *calls = NULL;
    tw_bridge_tool_calls kept = parsed;
    kept.n = tw_bridge_calls_allowed(sh->rq, parsed.n);
    if (!rc && c->n_tool_calls > 0)
        calls = tw_bridge_engine_tool_calls_json(
            c->tool_calls, tw_bridge_calls_allowed(sh->rq, c->n_tool_calls), true);
    else if (!rc && parsed.n > 0)
        calls = tw_bridge_tool_calls_json(&kept, true);
    if (calls) {
        finish = "tool_calls";
        rc = emit_choice(sh, chat_choice(idx, delta_with("tool_calls", calls), NULL, NULL));
    }
    tw_bridge_tool_calls_free(&parsed);
    if (!rc)
        rc = emit_choice(sh, chat_choice(idx, json_object(), NULL, finish));
    st->finished = true;
    return rc;
}

int tw_bridge_shaper_error(tw_bridge_shaper *sh, const tw_bridge_apierr *ae)
{
    if (sh->stopped)
        return 1;
    json_t *ev = tw_bridge_apierr_json(ae);
    if (!ev || sh->fn(sh->user, ev))
        sh->stopped = true;
    json_decref(ev);
    return sh->stopped;
}

int tw_bridge_shaper_chunk(tw_bridge_shaper *sh, const Tokenwire__V1__StreamChunk *c)
{
    if (sh->stopped)
        return 1;
    if (c->usage) {
        sh->usage = *c->usage;
        sh->have_usage = true;
    }
    if (c->error && c->error->code != TOKENWIRE__V1__STATUS_CODE__OK) {
        tw_bridge_apierr ae;
        tw_bridge_fail(&ae, (tw_status)c->error->code, NULL, "engine_error", "%s",
                       c->error->message ? c->error->message : "the engine failed");
        return tw_bridge_shaper_error(sh, &ae);
    }
    /* A hostile or confused engine could name a choice that does not exist. */
    if (c->index >= sh->n_choices)
        return 0;
    uint32_t idx = c->index;
    tw_bridge_shaper_choice *st = &sh->choices[idx];
    if (st->finished)
        return 0;
    bool chat = is_chat(sh);
    if (chat && !st->started) {
        json_t *d = json_object();
        if (d && (json_object_set_new(d, "role", json_string("assistant")) ||
                  json_object_set_new(d, "content", json_string("")))) {
            json_decref(d);
            d = NULL;
        }
        if (emit_choice(sh, chat_choice(idx, d, NULL, NULL)))
            return 1;
    }
    st->started = true;
    if (!chat && sh->rq->echo && !st->echoed && emit_echo(sh, idx, st, c))
        return 1;
    if (chat && c->reasoning_delta && c->reasoning_delta[0]) {
        json_t *d = delta_with("reasoning_content",
                               tw_bridge_json_text(c->reasoning_delta, strlen(c->reasoning_delta)));
        if (emit_choice(sh, chat_choice(idx, d, NULL, NULL)))
            return 1;
    }
    const char *text = c->text_delta ? c->text_delta : "";
    size_t len = strlen(text);
    if (chat && sh->rq->parse_tool_calls && c->n_tool_calls == 0) {
        tw_err err;
        if (tw_bridge_tool_stream_feed(&st->tools, text, len, &text, &len, &err) != TW_OK) {
            sh->stopped = true;
            return 1;
        }
    }
    json_t *lp = chunk_logprobs(sh, st, c);
    bool ids = sh->rq->return_token_ids && c->n_token_ids > 0;
    if (len > 0 || lp || ids) {
        if (emit_content(sh, idx, text, len, lp, ids ? c : NULL))
            return 1;
    }
    bool ends = c->has_finish_reason &&
                c->finish_reason != TOKENWIRE__V1__FINISH_REASON__FINISH_REASON_UNSPECIFIED;
    if (!ends)
        return 0;
    if (chat)
        return finish_chat_choice(sh, idx, c);
    st->finished = true;
    return emit_choice(sh, text_choice(idx, json_string(""), NULL,
                                       tw_bridge_finish_reason(c->finish_reason)));
}

int tw_bridge_shaper_end(tw_bridge_shaper *sh)
{
    if (sh->stopped)
        return 1;
    if (!sh->rq->include_usage)
        return 0;
    json_t *ev = tw_bridge_chunk_envelope(&sh->meta, sh->rq->kind, false);
    if (!ev || json_object_set_new(ev, "usage",
                                   tw_bridge_usage_json(sh->have_usage ? &sh->usage : NULL))) {
        json_decref(ev);
        sh->stopped = true;
        return 1;
    }
    if (sh->fn(sh->user, ev))
        sh->stopped = true;
    json_decref(ev);
    return sh->stopped;
}
