/* The endpoints besides generation: models, pull, health, metrics,
 * tokenize, detokenize. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge.h"
#include "json_field.h"
#include "messages_map.h"
#include "response_json.h"

/* Sends req and checks that the reply holds the expected result. */
static tw_status call_for(tw_bridge *b, Tokenwire__V1__Request *req, bool quick,
                          Tokenwire__V1__Reply__ResultCase want, Tokenwire__V1__Reply **rep,
                          tw_bridge_apierr *ae)
{
    tw_status st = tw_bridge_engine_call(b->engine, req, quick, rep, ae);
    if (st != TW_OK)
        return st;
    if ((*rep)->result_case != want) {
        tw_wire_free_reply(*rep);
        *rep = NULL;
        return tw_bridge_fail(ae, TW_INTERNAL, NULL, NULL,
                              "The engine answered with an unexpected result.");
    }
    return TW_OK;
}

void tw_bridge_ep_models(tw_bridge *b, const char *model_id, tw_bridge_http_resp *resp)
{
    Tokenwire__V1__Reply *rep = NULL;
    tw_bridge_apierr ae;
    if (tw_bridge_engine_models(b->engine, &rep, &ae) != TW_OK) {
        tw_bridge_resp_error(resp, &ae);
        return;
    }
    const Tokenwire__V1__ListModelsReply *l = rep->list_models;
    if (!model_id) {
        tw_bridge_resp_json(resp, 200, tw_bridge_model_list_json(l));
    } else {
        const Tokenwire__V1__ModelInfo *found =
            *model_id ? tw_bridge_model_named(l, model_id) : NULL;
        if (found) {
            tw_bridge_resp_json(resp, 200, tw_bridge_model_json(found));
        } else {
            tw_bridge_fail(&ae, TW_NOT_FOUND, "model", "model_not_found",
                           "The model '%.200s' does not exist.", model_id);
            tw_bridge_resp_error(resp, &ae);
        }
    }
    tw_wire_free_reply(rep);
}

void tw_bridge_ep_pull(tw_bridge *b, const tw_bridge_http_req *rq, tw_bridge_http_resp *resp)
{
    json_t *root = NULL;
    tw_bridge_apierr ae;
    if (tw_bridge_parse_body(rq, &root, &ae) != TW_OK) {
        tw_bridge_resp_error(resp, &ae);
        return;
    }
    Tokenwire__V1__LoadModelRequest lm = TOKENWIRE__V1__LOAD_MODEL_REQUEST__INIT;
    const char *s = NULL;
    bool flag;
    long long v;
    int got;
    /* "source" is a path or URL; "model" is accepted as its alias. */
    got = tw_bridge_get_string(root, "source", NULL, 4096, &s, NULL, &ae);
    if (got == 0)
        got = tw_bridge_get_string(root, "model", NULL, 4096, &s, NULL, &ae);
    if (got < 0)
        goto bad;
    if (got == 0 || !s[0]) {
        tw_bridge_fail(&ae, TW_INVALID_ARGUMENT, "source", "missing_required_parameter",
                       "Missing required parameter: 'source' (a model path or URL).");
        goto bad;
    }
    lm.source = (char *)s;
    s = NULL;
    if (tw_bridge_get_string(root, "name", NULL, TW_BRIDGE_MAX_MODEL_NAME, &s, NULL, &ae) < 0)
        goto bad;
    lm.name = (char *)s;
    s = NULL;
    if (tw_bridge_get_string(root, "sha256", NULL, 64, &s, NULL, &ae) < 0)
        goto bad;
    lm.sha256 = (char *)s;
    s = NULL;
    if (tw_bridge_get_string(root, "quantize", NULL, 16, &s, NULL, &ae) < 0)
        goto bad;
    lm.quantize = (char *)s;
    s = NULL;
    if (tw_bridge_get_string(root, "draft_source", NULL, 4096, &s, NULL, &ae) < 0)
        goto bad;
    lm.draft_source = (char *)s;
    if ((got = tw_bridge_get_bool(root, "make_default", NULL, &flag, &ae)) < 0)
        goto bad;
    lm.has_make_default = got > 0;
    lm.make_default = got > 0 && flag;
    if ((got = tw_bridge_get_bool(root, "background", NULL, &flag, &ae)) < 0)
        goto bad;
    lm.has_background = got > 0;
    lm.background = got > 0 && flag;
    if ((got = tw_bridge_get_int(root, "max_context", NULL, 0, UINT32_MAX, &v, &ae)) < 0)
        goto bad;
    lm.has_max_context = got > 0;
    lm.max_context = got > 0 ? (uint32_t)v : 0;

    Tokenwire__V1__Request req = TOKENWIRE__V1__REQUEST__INIT;
    req.method_case = TOKENWIRE__V1__REQUEST__METHOD_LOAD_MODEL;
    req.load_model = &lm;
    Tokenwire__V1__Reply *rep = NULL;
    if (call_for(b, &req, false, TOKENWIRE__V1__REPLY__RESULT_LOAD_MODEL, &rep, &ae) != TW_OK)
        goto bad;
    if (rep->load_model->model) {
        tw_bridge_resp_json(resp, 200, tw_bridge_model_json(rep->load_model->model));
    } else {
        tw_bridge_fail(&ae, TW_INTERNAL, NULL, NULL, "The engine loaded no model.");
        tw_bridge_resp_error(resp, &ae);
    }
    tw_wire_free_reply(rep);
    json_decref(root);
    return;
bad:
    tw_bridge_resp_error(resp, &ae);
    json_decref(root);
}

void tw_bridge_ep_health(tw_bridge *b, tw_bridge_http_resp *resp)
{
    Tokenwire__V1__HealthRequest hr = TOKENWIRE__V1__HEALTH_REQUEST__INIT;
    Tokenwire__V1__Request req = TOKENWIRE__V1__REQUEST__INIT;
    req.method_case = TOKENWIRE__V1__REQUEST__METHOD_HEALTH;
    req.health = &hr;
    Tokenwire__V1__Reply *rep = NULL;
    tw_bridge_apierr ae;
    if (call_for(b, &req, true, TOKENWIRE__V1__REPLY__RESULT_HEALTH, &rep, &ae) != TW_OK) {
        tw_bridge_resp_error(resp, &ae);
        return;
    }
    const Tokenwire__V1__HealthReply *h = rep->health;
    json_t *o = json_object();
    json_t *eng = json_object();
    int bad = !o || !eng;
    if (!bad) {
        bad |= json_object_set_new(o, "status", json_string("ok"));
        bad |= json_object_set_new(eng, "state",
                                   tw_bridge_json_text(h->state ? h->state : "",
                                                       h->state ? strlen(h->state) : 0));
        bad |= json_object_set_new(eng, "version",
                                   tw_bridge_json_text(h->version ? h->version : "",
                                                       h->version ? strlen(h->version) : 0));
        bad |= json_object_set_new(eng, "uptime_s", json_integer((json_int_t)h->uptime_s));
        bad |= json_object_set_new(eng, "models_ready", json_integer(h->models_ready));
        bad |= json_object_set(o, "engine", eng);
    }
    json_decref(eng);
    if (bad) {
        json_decref(o);
        o = NULL;
    }
    tw_bridge_resp_json(resp, 200, o);
    tw_wire_free_reply(rep);
}

void tw_bridge_ep_metrics(tw_bridge *b, tw_bridge_http_resp *resp)
{
    Tokenwire__V1__StatsRequest sr = TOKENWIRE__V1__STATS_REQUEST__INIT;
    Tokenwire__V1__Request req = TOKENWIRE__V1__REQUEST__INIT;
    req.method_case = TOKENWIRE__V1__REQUEST__METHOD_STATS;
    req.stats = &sr;
    Tokenwire__V1__Reply *rep = NULL;
    tw_bridge_apierr ae;
    /* The bridge's own counters are worth scraping even with no engine. */
    bool have = call_for(b, &req, true, TOKENWIRE__V1__REPLY__RESULT_STATS, &rep, &ae) == TW_OK;
    if (b->store) {
        size_t kept, bytes;
        tw_bridge_resp_store_usage(b->store, &kept, &bytes);
        atomic_store(&b->metrics.responses_kept, kept);
        atomic_store(&b->metrics.responses_kept_bytes, bytes);
        atomic_store(&b->metrics.responses_journal_errors,
                     (size_t)tw_bridge_resp_store_journal_errors(b->store));
        atomic_store(&b->metrics.responses_journal_syncs,
                     (size_t)tw_bridge_resp_store_journal_syncs(b->store));
    }
    char *text = tw_bridge_metrics_render(&b->metrics, tw_bridge_engine_up(b->engine),
                                          have ? rep->stats : NULL);
    tw_wire_free_reply(rep);
    if (!text) {
        tw_bridge_fail(&ae, TW_RESOURCE_EXHAUSTED, NULL, NULL, "Out of memory.");
        tw_bridge_resp_error(resp, &ae);
        return;
    }
    free(resp->body);
    resp->status = 200;
    resp->body = text;
    resp->body_len = strlen(text);
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
}

/* Ends a tokenize/detokenize call: the JSON answer o (NULL: an error
 * response from ae instead), then frees what the endpoint held. */
static void tok_finish(tw_bridge_http_resp *resp, json_t *o, const tw_bridge_apierr *ae,
                       Tokenwire__V1__Reply *rep, json_t *root, tw_bridge_arena *arena)
{
    if (ae)
        tw_bridge_resp_error(resp, ae);
    else
        tw_bridge_resp_json(resp, 200, o);
    tw_wire_free_reply(rep);
    json_decref(root);
    tw_bridge_arena_fini(arena);
}

void tw_bridge_ep_tokenize(tw_bridge *b, const tw_bridge_http_req *rq,
                           tw_bridge_http_resp *resp)
{
    json_t *root = NULL;
    tw_bridge_apierr ae;
    tw_bridge_arena arena;
    tw_bridge_arena_init(&arena, (size_t)64 << 20);
    if (tw_bridge_parse_body(rq, &root, &ae) != TW_OK)
        goto bad;
    Tokenwire__V1__TokenizeRequest tr = TOKENWIRE__V1__TOKENIZE_REQUEST__INIT;
    Tokenwire__V1__ChatInput chat = TOKENWIRE__V1__CHAT_INPUT__INIT;
    const char *s = NULL;
    bool flag;
    int got;
    if (tw_bridge_get_string(root, "model", NULL, TW_BRIDGE_MAX_MODEL_NAME, &s, NULL, &ae) < 0)
        goto bad;
    tr.model = (char *)s;
    s = NULL;
    if ((got = tw_bridge_get_string(root, "prompt", NULL, (size_t)-1 / 4, &s, NULL, &ae)) < 0)
        goto bad;
    if (got > 0) {
        tr.text = (char *)s;
    } else if (json_object_get(root, "messages")) {
        if (tw_bridge_map_messages(json_object_get(root, "messages"), &arena, &chat, &ae) !=
            TW_OK)
            goto bad;
        if ((got = tw_bridge_get_bool(root, "add_generation_prompt", NULL, &flag, &ae)) < 0)
            goto bad;
        if (got > 0) {
            chat.has_add_generation_prompt = 1;
            chat.add_generation_prompt = flag;
        }
        tr.chat = &chat;
    } else {
        tw_bridge_fail(&ae, TW_INVALID_ARGUMENT, "prompt", "missing_required_parameter",
                       "Missing required parameter: 'prompt' (or 'messages').");
        goto bad;
    }
    if ((got = tw_bridge_get_bool(root, "add_special_tokens", NULL, &flag, &ae)) < 0)
        goto bad;
    if (got > 0) {
        tr.has_add_special_tokens = 1;
        tr.add_special_tokens = flag;
    }
    bool want_strs = false;
    if (tw_bridge_get_bool(root, "return_token_strs", NULL, &want_strs, &ae) < 0)
        goto bad;
    tr.has_return_pieces = 1;
    tr.return_pieces = want_strs;

    Tokenwire__V1__Request req = TOKENWIRE__V1__REQUEST__INIT;
    req.method_case = TOKENWIRE__V1__REQUEST__METHOD_TOKENIZE;
    req.tokenize = &tr;
    Tokenwire__V1__Reply *rep = NULL;
    if (call_for(b, &req, false, TOKENWIRE__V1__REPLY__RESULT_TOKENIZE, &rep, &ae) != TW_OK)
        goto bad;
    const Tokenwire__V1__TokenizeReply *t = rep->tokenize;
    json_t *o = json_object();
    json_t *ids = json_array();
    json_t *strs = want_strs ? json_array() : json_null();
    int bad = !o || !ids || !strs;
    for (size_t i = 0; !bad && i < t->n_token_ids; i++)
        bad |= json_array_append_new(ids, json_integer(t->token_ids[i]));
    for (size_t i = 0; !bad && want_strs && i < t->n_pieces; i++)
        bad |= json_array_append_new(
            strs, tw_bridge_json_text((const char *)t->pieces[i].data, t->pieces[i].len));
    if (!bad) {
        bad |= json_object_set_new(o, "count", json_integer((json_int_t)t->n_token_ids));
        bad |= json_object_set_new(o, "max_model_len", json_integer(t->max_context));
        bad |= json_object_set(o, "tokens", ids);
        bad |= json_object_set(o, "token_strs", strs);
    }
    json_decref(ids);
    json_decref(strs);
    if (bad) {
        json_decref(o);
        o = NULL;
    }
    tok_finish(resp, o, NULL, rep, root, &arena);
    return;
bad:
    tok_finish(resp, NULL, &ae, NULL, root, &arena);
}

void tw_bridge_ep_detokenize(tw_bridge *b, const tw_bridge_http_req *rq,
                             tw_bridge_http_resp *resp)
{
    json_t *root = NULL;
    tw_bridge_apierr ae;
    tw_bridge_arena arena;
    tw_bridge_arena_init(&arena, (size_t)64 << 20);
    if (tw_bridge_parse_body(rq, &root, &ae) != TW_OK)
        goto bad;
    Tokenwire__V1__DetokenizeRequest dr = TOKENWIRE__V1__DETOKENIZE_REQUEST__INIT;
    const char *s = NULL;
    if (tw_bridge_get_string(root, "model", NULL, TW_BRIDGE_MAX_MODEL_NAME, &s, NULL, &ae) < 0)
        goto bad;
    dr.model = (char *)s;
    json_t *tokens = NULL;
    int got = tw_bridge_get_typed(root, "tokens", NULL, JSON_ARRAY, &tokens, &ae);
    if (got < 0)
        goto bad;
    if (got == 0) {
        tw_bridge_fail(&ae, TW_INVALID_ARGUMENT, "tokens", "missing_required_parameter",
                       "Missing required parameter: 'tokens'.");
        goto bad;
    }
    if (tw_bridge_map_token_ids(tokens, "tokens", TW_BRIDGE_MAX_PROMPT_TOKENS, &arena,
                                &dr.token_ids, &dr.n_token_ids, &ae) != TW_OK)
        goto bad;
    bool flag;
    if ((got = tw_bridge_get_bool(root, "skip_special_tokens", NULL, &flag, &ae)) < 0)
        goto bad;
    dr.has_skip_special_tokens = got > 0;
    dr.skip_special_tokens = got > 0 && flag;
    Tokenwire__V1__Request req = TOKENWIRE__V1__REQUEST__INIT;
    req.method_case = TOKENWIRE__V1__REQUEST__METHOD_DETOKENIZE;
    req.detokenize = &dr;
    Tokenwire__V1__Reply *rep = NULL;
    if (call_for(b, &req, false, TOKENWIRE__V1__REPLY__RESULT_DETOKENIZE, &rep, &ae) != TW_OK)
        goto bad;
    const char *text = rep->detokenize->text ? rep->detokenize->text : "";
    json_t *o = json_object();
    if (o && json_object_set_new(o, "prompt", tw_bridge_json_text(text, strlen(text)))) {
        json_decref(o);
        o = NULL;
    }
    tok_finish(resp, o, NULL, rep, root, &arena);
    return;
bad:
    tok_finish(resp, NULL, &ae, NULL, root, &arena);
}
