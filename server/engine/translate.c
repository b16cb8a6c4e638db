#include "translate.h"

#include <stdlib.h>
#include <string.h>

#include "tw/json_grammar.h"

void twd_gen_scratch_free(twd_gen_scratch *sc)
{
    free(sc->bias);
    free(sc->messages);
    free(sc->tools);
    free(sc->calls);
    memset(sc, 0, sizeof *sc);
}

tw_status twd_chat_from_wire(const Tokenwire__V1__ChatInput *in, tw_chat_input *c,
                             twd_gen_scratch *sc, tw_err *err)
{
    memset(c, 0, sizeof *c);
    c->add_generation_prompt = in->has_add_generation_prompt ? in->add_generation_prompt : true;
    c->tool_choice = in->tool_choice;
    size_t n_calls = 0;
    for (size_t i = 0; i < in->n_messages; i++)
        n_calls += in->messages[i]->n_tool_calls;
    if (in->n_messages) {
        sc->messages = calloc(in->n_messages, sizeof *sc->messages);
        if (!sc->messages)
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    }
    if (n_calls) {
        sc->calls = calloc(n_calls, sizeof *sc->calls);
        if (!sc->calls)
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    }
    if (in->n_tools) {
        sc->tools = calloc(in->n_tools, sizeof *sc->tools);
        if (!sc->tools)
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < in->n_messages; i++) {
        const Tokenwire__V1__ChatMessage *m = in->messages[i];
        tw_chat_message *o = &sc->messages[i];
        o->role = m->role;
        o->content = m->content;
        o->reasoning_content = m->reasoning_content;
        o->tool_call_id = m->tool_call_id;
        o->name = m->name;
        o->tool_calls = m->n_tool_calls ? &sc->calls[k] : NULL;
        o->n_tool_calls = m->n_tool_calls;
        for (size_t j = 0; j < m->n_tool_calls; j++, k++) {
            sc->calls[k].id = m->tool_calls[j]->id;
            sc->calls[k].name = m->tool_calls[j]->name;
            sc->calls[k].arguments_json = m->tool_calls[j]->arguments_json;
        }
    }
    for (size_t i = 0; i < in->n_tools; i++) {
        sc->tools[i].name = in->tools[i]->name;
        sc->tools[i].description = in->tools[i]->description;
        sc->tools[i].parameters_json = in->tools[i]->parameters_json;
    }
    c->messages = sc->messages;
    c->n_messages = in->n_messages;
    c->tools = sc->tools;
    c->n_tools = in->n_tools;
    return TW_OK;
}

static void sampling_from_wire(const Tokenwire__V1__SamplingParams *s, tw_sampling_params *p)
{
    if (s->has_temperature)
        p->temperature = s->temperature;
    if (s->has_top_k)
        p->top_k = s->top_k;
    if (s->has_top_p)
        p->top_p = s->top_p;
    if (s->has_min_p)
        p->min_p = s->min_p;
    if (s->has_repetition_penalty)
        p->repetition_penalty = s->repetition_penalty;
    if (s->has_presence_penalty)
        p->presence_penalty = s->presence_penalty;
    if (s->has_frequency_penalty)
        p->frequency_penalty = s->frequency_penalty;
    if (s->has_penalty_window)
        p->penalty_window = s->penalty_window;
    if (s->has_seed) {
        p->has_seed = true;
        p->seed = s->seed;
    }
}

/* The schema stays in the wire message; the engine compiles it during
 * submit. protobuf-c keeps an enum number it does not know, so the kind is
 * checked here rather than cast blindly. */
static tw_status format_from_wire(const Tokenwire__V1__OutputFormat *f, tw_format_opts *o,
                                  tw_err *err)
{
    switch (f->has_kind ? f->kind : TOKENWIRE__V1__OUTPUT_KIND__OUTPUT_TEXT) {
    case TOKENWIRE__V1__OUTPUT_KIND__OUTPUT_TEXT:
        o->kind = TW_OUTPUT_TEXT;
        break;
    case TOKENWIRE__V1__OUTPUT_KIND__OUTPUT_JSON:
        o->kind = TW_OUTPUT_JSON;
        break;
    case TOKENWIRE__V1__OUTPUT_KIND__OUTPUT_CHOICE:
        o->kind = TW_OUTPUT_CHOICE;
        break;
    default:
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "format.kind %d is not an output kind this engine knows", (int)f->kind);
    }
    size_t len = f->json_schema ? strlen(f->json_schema) : 0;
    if (len && o->kind != TW_OUTPUT_JSON)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "format.json_schema needs format.kind OUTPUT_JSON");
    if (f->n_choices && o->kind != TW_OUTPUT_CHOICE)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "format.choices needs format.kind OUTPUT_CHOICE");
    /* the engine checks each choice; the texts stay in the wire message */
    o->choices = (const char *const *)f->choices;
    o->n_choices = f->n_choices;
    if (len > TW_JSON_SCHEMA_MAX_BYTES)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "format.json_schema is %zu bytes, more than the limit of %u", len,
                         TW_JSON_SCHEMA_MAX_BYTES);
    o->json_schema = len ? f->json_schema : NULL;
    o->json_schema_len = len;
    return TW_OK;
}

tw_status twd_gen_from_wire(const Tokenwire__V1__GenerateRequest *g, uint32_t max_prompt_tokens,
                            tw_gen_request *r, twd_gen_scratch *sc, tw_err *err)
{
    memset(sc, 0, sizeof *sc);
    tw_gen_request_init(r);
    r->model = g->model && *g->model ? g->model : NULL;
    switch (g->prompt_case) {
    case TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TOKEN_IDS:
        if (!g->token_ids || g->token_ids->n_ids == 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "the token-id prompt is empty");
        if (max_prompt_tokens && g->token_ids->n_ids > max_prompt_tokens)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "the prompt has %zu tokens, more than the limit of %u",
                             g->token_ids->n_ids, max_prompt_tokens);
        r->prompt_kind = TW_PROMPT_TOKENS;
        r->prompt_ids = g->token_ids->ids;
        r->n_prompt_ids = g->token_ids->n_ids;
        break;
    case TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TEXT:
        r->prompt_kind = TW_PROMPT_TEXT;
        r->prompt_text = g->text ? g->text : "";
        r->prompt_text_len = strlen(r->prompt_text);
        break;
    case TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_CHAT: {
        r->prompt_kind = TW_PROMPT_CHAT;
        tw_status st = twd_chat_from_wire(g->chat, &r->chat, sc, err);
        if (st != TW_OK)
            return st;
        break;
    }
    default:
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "generate needs a prompt (token_ids, text or chat)");
    }
    if (g->has_add_special_tokens)
        r->add_special_tokens = g->add_special_tokens;

    if (g->sampling) {
        sampling_from_wire(g->sampling, &r->sampling);
        if (g->sampling->n_logit_bias) {
            sc->bias = calloc(g->sampling->n_logit_bias, sizeof *sc->bias);
            if (!sc->bias)
                return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
            for (size_t i = 0; i < g->sampling->n_logit_bias; i++) {
                sc->bias[i].token_id = g->sampling->logit_bias[i]->token_id;
                sc->bias[i].bias = g->sampling->logit_bias[i]->bias;
            }
            r->sampling.logit_bias = sc->bias;
            r->sampling.n_logit_bias = g->sampling->n_logit_bias;
        }
    }
    if (g->stop) {
        const Tokenwire__V1__StopRules *s = g->stop;
        if (s->has_max_tokens)
            r->stop.max_tokens = s->max_tokens;
        if (s->has_max_total_tokens)
            r->stop.max_total_tokens = s->max_total_tokens;
        if (s->has_min_tokens)
            r->stop.min_tokens = s->min_tokens;
        r->stop.stop_token_ids = s->stop_token_ids;
        r->stop.n_stop_token_ids = s->n_stop_token_ids;
        r->stop.stop_strings = (const char *const *)s->stop_strings;
        r->stop.n_stop_strings = s->n_stop_strings;
        if (s->has_ignore_eos)
            r->stop.ignore_eos = s->ignore_eos;
        r->stop.prompt_only = s->has_prompt_only && s->prompt_only;
    }
    if (g->thinking) {
        const Tokenwire__V1__ThinkingOptions *t = g->thinking;
        if (t->has_enable_thinking)
            r->thinking.enable_thinking = t->enable_thinking ? TW_THINK_ON : TW_THINK_OFF;
        if (t->has_max_thinking_tokens)
            r->thinking.max_thinking_tokens = t->max_thinking_tokens;
        if (t->has_loop_detection)
            r->thinking.loop_detection = t->loop_detection;
        if (t->has_separate_reasoning)
            r->thinking.separate_reasoning = t->separate_reasoning;
    }
    if (g->cache) {
        if (g->cache->has_mode)
            r->cache.mode = (tw_cache_mode)g->cache->mode;
        r->cache.session_key = g->cache->session_key;
        if (g->cache->has_persist)
            r->cache.persist = g->cache->persist;
    }
    if (g->speculative) {
        if (g->speculative->has_mode)
            r->speculative.mode = (tw_spec_mode)g->speculative->mode;
        if (g->speculative->has_max_draft_tokens)
            r->speculative.max_draft_tokens = g->speculative->max_draft_tokens;
    }
    if (g->logprobs) {
        r->logprobs.enabled = g->logprobs->enabled;
        if (g->logprobs->top_logprobs > TW_MAX_TOP_LOGPROBS)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "top_logprobs is at most %d",
                             TW_MAX_TOP_LOGPROBS);
        r->logprobs.top_logprobs = g->logprobs->top_logprobs;
        r->logprobs.prompt_logprobs = g->logprobs->prompt_logprobs;
    }
    if (g->format) {
        tw_status st = format_from_wire(g->format, &r->format, err);
        if (st != TW_OK)
            return st;
    }
    if (g->has_n)
        r->n = g->n;
    if (g->embed) {
        if ((unsigned)g->embed->pooling > TOKENWIRE__V1__POOLING__POOLING_CLS)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "embed.pooling %d unknown",
                             (int)g->embed->pooling);
        if (g->has_stream && g->stream && g->embed->pooling)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "embed: an embedding is answered whole, not streamed");
        /* the wire's numbers are the engine's */
        r->embed.pooling = (tw_pooling)g->embed->pooling;
        r->embed.normalize = g->embed->has_normalize ? g->embed->normalize : true;
    }
    return TW_OK;
}

Tokenwire__V1__FinishReason twd_finish_to_wire(tw_finish_reason r)
{
    /* The engine's enum uses the wire's numbers on purpose. */
    if ((int)r < 0 || r > TW_FINISH_ERROR)
        return TOKENWIRE__V1__FINISH_REASON__FINISH_ERROR;
    return (Tokenwire__V1__FinishReason)r;
}

void twd_usage_to_wire(const tw_usage *u, Tokenwire__V1__Usage *o)
{
    o->has_prompt_tokens = 1;
    o->prompt_tokens = u->prompt_tokens;
    o->has_completion_tokens = 1;
    o->completion_tokens = u->completion_tokens;
    o->has_reasoning_tokens = 1;
    o->reasoning_tokens = u->reasoning_tokens;
    o->has_cached_prompt_tokens = 1;
    o->cached_prompt_tokens = u->cached_prompt_tokens;
    o->has_time_to_first_token_us = 1;
    o->time_to_first_token_us = u->time_to_first_token_us;
    o->has_prefill_us = 1;
    o->prefill_us = u->prefill_us;
    o->has_decode_us = 1;
    o->decode_us = u->decode_us;
    o->has_drafted_tokens = 1;
    o->drafted_tokens = u->drafted_tokens;
    o->has_accepted_tokens = 1;
    o->accepted_tokens = u->accepted_tokens;
}

void twd_model_to_wire(const tw_engine_model_info *i, Tokenwire__V1__ModelInfo *o)
{
    o->name = (char *)i->name;
    o->path = (char *)i->path;
    o->architecture = (char *)i->architecture;
    o->has_parameters = 1;
    o->parameters = i->parameters;
    o->weight_type = (char *)i->weight_type;
    o->has_max_context = 1;
    o->max_context = i->max_context;
    o->has_vocab_size = 1;
    o->vocab_size = i->vocab_size;
    o->has_loaded_unix_s = 1;
    o->loaded_unix_s = i->loaded_unix_s;
    o->state = (char *)tw_model_state_name(i->state);
    if (i->fingerprint[0])
        o->fingerprint = (char *)i->fingerprint;
    if (i->draft_path[0])
        o->draft_model = (char *)i->draft_path;
    o->has_is_default = 1;
    o->is_default = i->is_default;
    o->has_progress = 1;
    o->progress = i->progress;
    if (i->state == TW_MODEL_FAILED)
        o->error = (char *)i->error;
    if (i->pooling)
        o->pooling = (char *)i->pooling;
    o->has_encoder = 1;
    o->encoder = i->encoder;
}

void twd_stats_to_wire(const tw_engine_stats *s, Tokenwire__V1__StatsReply *o)
{
#define SET(f)         \
    o->has_##f = 1;    \
    o->f = s->f
    SET(requests_total);
    SET(requests_failed);
    SET(requests_running);
    SET(requests_queued);
    SET(prompt_tokens_total);
    SET(generated_tokens_total);
    SET(cached_tokens_total);
    SET(cached_tokens_shared);
    SET(prefix_cache_hits);
    SET(prefix_cache_lookups);
    SET(state_store_hits);
    SET(state_store_lookups);
    SET(spec_drafted);
    SET(spec_accepted);
    SET(spec_speedup);
    SET(thinking_budget_closes);
    SET(thinking_loop_closes);
    SET(decode_tokens_per_s);
    SET(prefill_tokens_per_s);
    SET(kv_bytes);
    SET(state_bytes);
#undef SET
}
