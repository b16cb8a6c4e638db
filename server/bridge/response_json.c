#include "response_json.h"

#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when the bytes there
 * are not one (overlong forms, surrogates and values past U+10FFFF are
 * invalid, as RFC 3629 says). */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) {
        len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

json_t *tw_bridge_json_text(const char *s, size_t len)
{
    if (!s)
        return json_string("");
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, bad = 0;
    while (i < len) {
        size_t k = utf8_seq_len(u + i, len - i);
        /* NUL is valid UTF-8 but jansson strings end there; treat it as bad. */
        if (k == 0 || u[i] == 0) {
            bad++;
            i++;
        } else {
            i += k;
        }
    }
    if (bad == 0)
        return json_stringn(s, len);
    /* Each bad byte becomes the 3-byte U+FFFD. */
    if (bad > (SIZE_MAX - len) / 2)
        return NULL;
    char *out = malloc(len + 2 * bad + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    i = 0;
    while (i < len) {
        size_t k = utf8_seq_len(u + i, len - i);
        if (k == 0 || u[i] == 0) {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        } else {
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
        }
    }
    json_t *j = json_stringn(out, o);
    free(out);
    return j;
}

static json_t *text_or_empty(const char *s)
{
    return tw_bridge_json_text(s ? s : "", s ? strlen(s) : 0);
}

/* echo: the prompt's text, then the choice's. */
static json_t *echoed_text(const char *prompt, const char *text)
{
    const size_t np = strlen(prompt), nt = text ? strlen(text) : 0;
    char *both = malloc(np + nt + 1);
    if (!both)
        return NULL;
    memcpy(both, prompt, np);
    memcpy(both + np, text ? text : "", nt + 1);
    json_t *j = tw_bridge_json_text(both, np + nt);
    free(both);
    return j;
}

json_t *tw_bridge_token_ids_json(const uint32_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        if (json_array_append_new(a, json_integer(ids[i]))) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

const char *tw_bridge_finish_reason(Tokenwire__V1__FinishReason fr)
{
    switch (fr) {
    case TOKENWIRE__V1__FINISH_REASON__FINISH_LENGTH:
    case TOKENWIRE__V1__FINISH_REASON__FINISH_CONTEXT_LENGTH:
    /* A deadline cuts the answer short, as max_tokens does. */
    case TOKENWIRE__V1__FINISH_REASON__FINISH_DEADLINE:
        return "length";
    case TOKENWIRE__V1__FINISH_REASON__FINISH_TOOL_CALLS:
        return "tool_calls";
    case TOKENWIRE__V1__FINISH_REASON__FINISH_STOP:
    case TOKENWIRE__V1__FINISH_REASON__FINISH_STOP_STRING:
    case TOKENWIRE__V1__FINISH_REASON__FINISH_CANCELLED:
    case TOKENWIRE__V1__FINISH_REASON__FINISH_ERROR:
    case TOKENWIRE__V1__FINISH_REASON__FINISH_REASON_UNSPECIFIED:
    default:
        return "stop";
    }
}

json_t *tw_bridge_usage_json(const Tokenwire__V1__Usage *u)
{
    uint64_t p = u ? u->prompt_tokens : 0, c = u ? u->completion_tokens : 0;
    json_t *o = json_object();
    json_t *pd = json_object();
    json_t *cd = json_object();
    int bad = !o || !pd || !cd;
    if (!bad) {
        bad |= json_object_set_new(o, "prompt_tokens", json_integer((json_int_t)p));
        bad |= json_object_set_new(o, "completion_tokens", json_integer((json_int_t)c));
        bad |= json_object_set_new(o, "total_tokens", json_integer((json_int_t)(p + c)));
        bad |= json_object_set_new(
            pd, "cached_tokens", json_integer(u ? (json_int_t)u->cached_prompt_tokens : 0));
        bad |= json_object_set_new(
            cd, "reasoning_tokens", json_integer(u ? (json_int_t)u->reasoning_tokens : 0));
        bad |= json_object_set(o, "prompt_tokens_details", pd);
        bad |= json_object_set(o, "completion_tokens_details", cd);
    }
    json_decref(pd);
    json_decref(cd);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *bytes_array(const ProtobufCBinaryData *b)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < b->len; i++) {
        if (json_array_append_new(a, json_integer(b->data[i]))) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* What a token is called in the answer: its text, or "token_id:N" when the
 * model has no tokenizer to give one (as vLLM names tokens by id), so that
 * alternatives keep distinct names. */
static json_t *token_name(bool has_text, const ProtobufCBinaryData *text, uint32_t id)
{
    if (has_text)
        return tw_bridge_json_text((const char *)text->data, text->len);
    char name[32];
    snprintf(name, sizeof name, "token_id:%u", id);
    return json_string(name);
}

/* A log-probability as JSON, which has no infinity: a token the request's
 * settings ban (one the thinking controller forced anyway) gets -9999, the
 * floor OpenAI writes for such tokens. */
static json_t *logprob_json(float logprob)
{
    return json_real(isfinite(logprob) ? (double)logprob : -9999.0);
}

static json_t *token_entry(bool has_text, const ProtobufCBinaryData *text, uint32_t id,
                           float logprob)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    int bad = json_object_set_new(o, "token", token_name(has_text, text, id));
    bad |= json_object_set_new(o, "logprob", logprob_json(logprob));
    bad |= json_object_set_new(o, "bytes", has_text ? bytes_array(text) : json_null());
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *tw_bridge_chat_logprobs_json(Tokenwire__V1__TokenLogprob *const *lp, size_t n,
                                     unsigned top)
{
    json_t *content = json_array();
    json_t *o = json_object();
    int bad = !content || !o;
    for (size_t i = 0; !bad && i < n; i++) {
        /* the content's tokens only: reasoning_content has its own text */
        if (lp[i]->reasoning)
            continue;
        json_t *e =
            token_entry(lp[i]->has_token_text, &lp[i]->token_text, lp[i]->token_id, lp[i]->logprob);
        json_t *alts = json_array();
        bad |= !e || !alts;
        size_t nt = lp[i]->n_top < top ? lp[i]->n_top : top;
        for (size_t k = 0; !bad && k < nt; k++)
            bad |= json_array_append_new(
                alts, token_entry(lp[i]->top[k]->has_token_text, &lp[i]->top[k]->token_text,
                                  lp[i]->top[k]->token_id, lp[i]->top[k]->logprob));
        if (!bad) {
            bad |= json_object_set(e, "top_logprobs", alts);
            bad |= json_array_append(content, e);
        }
        json_decref(alts);
        json_decref(e);
    }
    if (!bad) {
        bad |= json_object_set(o, "content", content);
        bad |= json_object_set_new(o, "refusal", json_null());
    }
    json_decref(content);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* n tokens' legacy log-probabilities appended to the four parallel arrays;
 * a token without one (the prompt's first) gets null in token_logprobs and
 * top_logprobs. Non-zero when memory is short. */
static int append_completion_logprobs(json_t *tokens, json_t *lps, json_t *tops, json_t *offs,
                                      Tokenwire__V1__TokenLogprob *const *lp, size_t n,
                                      unsigned top, size_t *text_offset)
{
    int bad = 0;
    for (size_t i = 0; !bad && i < n; i++) {
        const ProtobufCBinaryData *t = &lp[i]->token_text;
        bad |= json_array_append_new(tokens, token_name(lp[i]->has_token_text, t, lp[i]->token_id));
        bad |= json_array_append_new(offs, json_integer((json_int_t)*text_offset));
        *text_offset += t->len;
        if (!lp[i]->has_logprob) {
            bad |= json_array_append_new(lps, json_null());
            bad |= json_array_append_new(tops, json_null());
            continue;
        }
        bad |= json_array_append_new(lps, logprob_json(lp[i]->logprob));
        json_t *alts = json_object();
        size_t nt = lp[i]->n_top < top ? lp[i]->n_top : top;
        for (size_t k = 0; alts && !bad && k < nt; k++) {
            const Tokenwire__V1__TopLogprob *a = lp[i]->top[k];
            json_t *key = token_name(a->has_token_text, &a->token_text, a->token_id);
            bad |= !key || json_object_set_new(alts, json_string_value(key),
                                               logprob_json(lp[i]->top[k]->logprob));
            json_decref(key);
        }
        bad |= json_array_append_new(tops, alts);
    }
    return bad;
}

json_t *tw_bridge_completion_logprobs_json(Tokenwire__V1__TokenLogprob *const *lp, size_t n,
                                           unsigned top, size_t *text_offset)
{
    return tw_bridge_echo_logprobs_json(NULL, 0, lp, n, top, text_offset);
}

json_t *tw_bridge_echo_logprobs_json(Tokenwire__V1__TokenLogprob *const *prompt, size_t n_prompt,
                                     Tokenwire__V1__TokenLogprob *const *lp, size_t n, unsigned top,
                                     size_t *text_offset)
{
    json_t *o = json_object();
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    int bad = !o || !tokens || !lps || !tops || !offs;
    if (!bad)
        bad |=
            append_completion_logprobs(tokens, lps, tops, offs, prompt, n_prompt, top, text_offset);
    if (!bad)
        bad |= append_completion_logprobs(tokens, lps, tops, offs, lp, n, top, text_offset);
    if (!bad) {
        bad |= json_object_set(o, "tokens", tokens);
        bad |= json_object_set(o, "token_logprobs", lps);
        bad |= json_object_set(o, "top_logprobs", tops);
        bad |= json_object_set(o, "text_offset", offs);
    }
    json_decref(tokens);
    json_decref(lps);
    json_decref(tops);
    json_decref(offs);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *one_tool_call(size_t index, bool with_index, const char *id, const char *name,
                             const char *args)
{
    json_t *o = json_object();
    json_t *fn = json_object();
    int bad = !o || !fn;
    if (!bad) {
        if (with_index)
            bad |= json_object_set_new(o, "index", json_integer((json_int_t)index));
        bad |= json_object_set_new(o, "id", text_or_empty(id));
        bad |= json_object_set_new(o, "type", json_string("function"));
        bad |= json_object_set_new(fn, "name", text_or_empty(name));
        bad |= json_object_set_new(fn, "arguments", text_or_empty(args ? args : "{}"));
        bad |= json_object_set(o, "function", fn);
    }
    json_decref(fn);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *tw_bridge_tool_calls_json(const tw_bridge_tool_calls *calls, bool with_index)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < calls->n; i++) {
        const tw_bridge_tool_call *c = &calls->items[i];
        if (json_array_append_new(a, one_tool_call(i, with_index, c->id, c->name,
                                                   c->arguments))) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

json_t *tw_bridge_engine_tool_calls_json(Tokenwire__V1__ToolCall *const *calls, size_t n,
                                         bool with_index)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        if (json_array_append_new(a, one_tool_call(i, with_index, calls[i]->id, calls[i]->name,
                                                   calls[i]->arguments_json))) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *response_envelope(const tw_bridge_resp_meta *meta, const char *object)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    int bad = json_object_set_new(o, "id", json_string(meta->id));
    bad |= json_object_set_new(o, "object", json_string(object));
    bad |= json_object_set_new(o, "created", json_integer(meta->created));
    bad |= json_object_set_new(o, "model", text_or_empty(meta->model));
    bad |= json_object_set_new(o, "system_fingerprint",
                               meta->fingerprint ? json_string(meta->fingerprint) : json_null());
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *tw_bridge_chunk_envelope(const tw_bridge_resp_meta *meta, tw_bridge_api_kind kind,
                                 bool with_usage_null)
{
    json_t *o = response_envelope(
        meta, kind == TW_BRIDGE_API_CHAT ? "chat.completion.chunk" : "text_completion");
    if (!o)
        return NULL;
    int bad = json_object_set_new(o, "choices", json_array());
    if (with_usage_null)
        bad |= json_object_set_new(o, "usage", json_null());
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static tw_status oom(tw_bridge_apierr *ae)
{
    return tw_bridge_fail(ae, TW_RESOURCE_EXHAUSTED, NULL, NULL,
                          "Out of memory while building the response.");
}

static tw_status choice_error(const Tokenwire__V1__Choice *c, tw_bridge_apierr *ae)
{
    return tw_bridge_fail(ae, TW_INTERNAL, NULL, "engine_error",
                          "The engine failed while generating choice %u.", c->index);
}

/* The assistant message of one choice, with tool calls from the engine or
 * parsed from its text. *finish is updated to "tool_calls" when calls are
 * present. */
static tw_status chat_message(const tw_bridge_resp_meta *meta, const tw_bridge_gen_request *rq,
                              const Tokenwire__V1__Choice *c, json_t **out, const char **finish,
                              tw_bridge_apierr *ae)
{
    tw_bridge_tool_calls parsed = {0};
    json_t *calls = NULL;
    const char *content = c->text;
    size_t content_len = c->text ? strlen(c->text) : 0;
    if (c->n_tool_calls > 0) {
        calls = tw_bridge_engine_tool_calls_json(
            c->tool_calls, tw_bridge_calls_allowed(rq, c->n_tool_calls), false);
        if (!calls)
            return oom(ae);
    } else if (rq->parse_tool_calls && content_len > 0) {
        char seed[48];
        snprintf(seed, sizeof seed, "%.24s_%u_", meta->id + (strncmp(meta->id, "chatcmpl-", 9)
                                                                 ? 0
                                                                 : 9),
                 c->index);
        tw_err err;
        if (tw_bridge_parse_tool_calls(content, content_len, seed, &parsed, &err) != TW_OK)
            return oom(ae);
        if (parsed.n > 0) {
            tw_bridge_tool_calls kept = parsed;
            kept.n = tw_bridge_calls_allowed(rq, parsed.n);
            calls = tw_bridge_tool_calls_json(&kept, false);
            content = parsed.content;
            content_len = content ? strlen(content) : 0;
            if (!calls) {
                tw_bridge_tool_calls_free(&parsed);
                return oom(ae);
            }
        }
    }
    json_t *m = json_object();
    int bad = !m;
    if (!bad) {
        bad |= json_object_set_new(m, "role", json_string("assistant"));
        /* OpenAI sends null content for a pure tool-call turn. */
        bad |= json_object_set_new(m, "content",
                                   (calls && content_len == 0)
                                       ? json_null()
                                       : tw_bridge_json_text(content ? content : "",
                                                             content_len));
        if (c->reasoning && c->reasoning[0])
            bad |= json_object_set_new(m, "reasoning_content", text_or_empty(c->reasoning));
        if (calls)
            bad |= json_object_set(m, "tool_calls", calls);
        bad |= json_object_set_new(m, "refusal", json_null());
    }
    json_decref(calls);
    tw_bridge_tool_calls_free(&parsed);
    if (bad) {
        json_decref(m);
        return oom(ae);
    }
    if (json_object_get(m, "tool_calls"))
        *finish = "tool_calls";
    *out = m;
    return TW_OK;
}

static json_t *usage_of(const Tokenwire__V1__GenerateReply *rep)
{
    return tw_bridge_usage_json(rep->usage);
}

tw_status tw_bridge_chat_completion_json(const tw_bridge_resp_meta *meta,
                                         const tw_bridge_gen_request *rq,
                                         const Tokenwire__V1__GenerateReply *rep, json_t **out,
                                         tw_bridge_apierr *ae)
{
    *out = NULL;
    json_t *o = response_envelope(meta, "chat.completion");
    json_t *choices = json_array();
    if (!o || !choices) {
        json_decref(o);
        json_decref(choices);
        return oom(ae);
    }
    tw_status st = TW_OK;
    for (size_t i = 0; i < rep->n_choices && st == TW_OK; i++) {
        const Tokenwire__V1__Choice *c = rep->choices[i];
        if (c->finish_reason == TOKENWIRE__V1__FINISH_REASON__FINISH_ERROR) {
            st = choice_error(c, ae);
            break;
        }
        const char *finish = tw_bridge_finish_reason(c->finish_reason);
        json_t *msg = NULL;
        st = chat_message(meta, rq, c, &msg, &finish, ae);
        if (st != TW_OK)
            break;
        json_t *ch = json_object();
        int bad = !ch;
        if (!bad) {
            bad |= json_object_set_new(ch, "index", json_integer(c->index));
            bad |= json_object_set(ch, "message", msg);
            bad |= json_object_set_new(
                ch, "logprobs",
                rq->want_logprobs
                    ? tw_bridge_chat_logprobs_json(c->logprobs, c->n_logprobs, rq->top_logprobs)
                    : json_null());
            bad |= json_object_set_new(ch, "finish_reason", json_string(finish));
            if (rq->return_token_ids)
                bad |= json_object_set_new(ch, "token_ids",
                                           tw_bridge_token_ids_json(c->token_ids, c->n_token_ids));
            bad |= json_array_append(choices, ch);
        }
        json_decref(ch);
        json_decref(msg);
        if (bad)
            st = oom(ae);
    }
    if (st == TW_OK) {
        int bad = json_object_set(o, "choices", choices);
        bad |= json_object_set_new(o, "usage", usage_of(rep));
        if (bad)
            st = oom(ae);
    }
    json_decref(choices);
    if (st != TW_OK) {
        json_decref(o);
        return st;
    }
    *out = o;
    return TW_OK;
}

tw_status tw_bridge_text_completion_json(const tw_bridge_resp_meta *meta,
                                         const tw_bridge_gen_request *rq,
                                         const Tokenwire__V1__GenerateReply *rep, json_t **out,
                                         tw_bridge_apierr *ae)
{
    *out = NULL;
    json_t *o = response_envelope(meta, "text_completion");
    json_t *choices = json_array();
    if (!o || !choices) {
        json_decref(o);
        json_decref(choices);
        return oom(ae);
    }
    tw_status st = TW_OK;
    for (size_t i = 0; i < rep->n_choices; i++) {
        const Tokenwire__V1__Choice *c = rep->choices[i];
        if (c->finish_reason == TOKENWIRE__V1__FINISH_REASON__FINISH_ERROR) {
            st = choice_error(c, ae);
            break;
        }
        if (rq->echo && !rep->prompt_text) {
            st = tw_bridge_fail(ae, TW_INTERNAL, NULL, NULL,
                                "The engine did not send the prompt back for 'echo'.");
            break;
        }
        json_t *ch = json_object();
        int bad = !ch;
        if (!bad) {
            size_t off = 0;
            bad |= json_object_set_new(ch, "text",
                                       rq->echo ? echoed_text(rep->prompt_text, c->text)
                                                : text_or_empty(c->text));
            bad |= json_object_set_new(ch, "index", json_integer(c->index));
            bad |= json_object_set_new(
                ch, "logprobs",
                rq->want_logprobs ? tw_bridge_echo_logprobs_json(
                                        rep->prompt_logprobs, rq->echo ? rep->n_prompt_logprobs : 0,
                                        c->logprobs, c->n_logprobs, rq->top_logprobs, &off)
                                  : json_null());
            bad |= json_object_set_new(ch, "finish_reason",
                                       json_string(tw_bridge_finish_reason(c->finish_reason)));
            if (rq->return_token_ids)
                bad |= json_object_set_new(ch, "token_ids",
                                           tw_bridge_token_ids_json(c->token_ids, c->n_token_ids));
            bad |= json_array_append(choices, ch);
        }
        json_decref(ch);
        if (bad) {
            st = oom(ae);
            break;
        }
    }
    if (st == TW_OK) {
        int bad = json_object_set(o, "choices", choices);
        bad |= json_object_set_new(o, "usage", usage_of(rep));
        if (bad)
            st = oom(ae);
    }
    json_decref(choices);
    if (st != TW_OK) {
        json_decref(o);
        return st;
    }
    *out = o;
    return TW_OK;
}

json_t *tw_bridge_model_json(const Tokenwire__V1__ModelInfo *m)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    int bad = json_object_set_new(o, "id", text_or_empty(m->name));
    bad |= json_object_set_new(o, "object", json_string("model"));
    bad |= json_object_set_new(o, "created", json_integer((json_int_t)m->loaded_unix_s));
    bad |= json_object_set_new(o, "owned_by", json_string("tokenwire"));
    /* Beyond OpenAI's four fields: what local-model clients commonly read. */
    if (m->max_context)
        bad |= json_object_set_new(o, "max_model_len", json_integer(m->max_context));
    if (m->state)
        bad |= json_object_set_new(o, "state", text_or_empty(m->state));
    if (m->architecture && m->architecture[0])
        bad |= json_object_set_new(o, "architecture", text_or_empty(m->architecture));
    if (m->state && strcmp(m->state, "loading") == 0)
        bad |= json_object_set_new(o, "progress", json_real(m->progress));
    if (m->error && m->error[0])
        bad |= json_object_set_new(o, "error", text_or_empty(m->error));
    /* the embeddings' pooling when the model's files name one */
    if (m->pooling && m->pooling[0] && strcmp(m->pooling, "unsaid") != 0)
        bad |= json_object_set_new(o, "pooling", text_or_empty(m->pooling));
    /* an encoder answers /v1/embeddings only */
    if (m->has_encoder && m->encoder)
        bad |= json_object_set_new(o, "encoder", json_true());
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *tw_bridge_model_list_json(const Tokenwire__V1__ListModelsReply *r)
{
    json_t *o = json_object();
    json_t *data = json_array();
    int bad = !o || !data;
    for (size_t i = 0; !bad && r && i < r->n_models; i++)
        bad |= json_array_append_new(data, tw_bridge_model_json(r->models[i]));
    if (!bad) {
        bad |= json_object_set_new(o, "object", json_string("list"));
        bad |= json_object_set(o, "data", data);
    }
    json_decref(data);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}
