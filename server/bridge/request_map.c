#include "request_map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_field.h"
#include "messages_map.h"

/* The arena of one request may hold at most this much beyond the JSON tree. */
#define REQUEST_ARENA_LIMIT ((size_t)256 << 20)

static tw_status unsupported(tw_bridge_apierr *ae, const char *param, const char *what)
{
    return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, param, "unsupported_parameter",
                          "Unsupported parameter: '%s' %s is not supported by this server.",
                          param, what);
}

static void gen_request_init(tw_bridge_gen_request *r, json_t *root, tw_bridge_api_kind kind)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    Tokenwire__V1__GenerateRequest gen = TOKENWIRE__V1__GENERATE_REQUEST__INIT;
    Tokenwire__V1__SamplingParams sampling = TOKENWIRE__V1__SAMPLING_PARAMS__INIT;
    Tokenwire__V1__StopRules stop = TOKENWIRE__V1__STOP_RULES__INIT;
    Tokenwire__V1__ThinkingOptions thinking = TOKENWIRE__V1__THINKING_OPTIONS__INIT;
    Tokenwire__V1__LogprobOptions logprobs = TOKENWIRE__V1__LOGPROB_OPTIONS__INIT;
    Tokenwire__V1__TokenIds ids = TOKENWIRE__V1__TOKEN_IDS__INIT;
    Tokenwire__V1__ChatInput chat = TOKENWIRE__V1__CHAT_INPUT__INIT;
    Tokenwire__V1__OutputFormat format = TOKENWIRE__V1__OUTPUT_FORMAT__INIT;
    r->gen = gen;
    r->sampling = sampling;
    r->stop = stop;
    r->thinking = thinking;
    r->logprobs = logprobs;
    r->token_ids = ids;
    r->chat = chat;
    r->format = format;
    r->gen.sampling = &r->sampling;
    r->gen.stop = &r->stop;
    r->root = json_incref(root);
    tw_bridge_arena_init(&r->arena, REQUEST_ARENA_LIMIT);
}

void tw_bridge_gen_request_fini(tw_bridge_gen_request *r)
{
    tw_bridge_arena_fini(&r->arena);
    json_decref(r->root);
    r->root = NULL;
}

static tw_status set_float(const json_t *root, const char *key, double lo, double hi,
                           protobuf_c_boolean *has, float *dst, tw_bridge_apierr *ae)
{
    double d;
    int r = tw_bridge_get_number(root, key, NULL, lo, hi, &d, ae);
    if (r < 0)
        return TW_INVALID_ARGUMENT;
    if (r > 0) {
        *has = 1;
        *dst = (float)d;
    }
    return TW_OK;
}

static tw_status map_stop(const json_t *root, tw_bridge_gen_request *r, tw_bridge_apierr *ae)
{
    const json_t *stop = json_object_get(root, "stop");
    if (!stop || json_is_null(stop))
        return TW_OK;
    size_t n;
    if (json_is_string(stop))
        n = 1;
    else if (json_is_array(stop))
        n = json_array_size(stop);
    else
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "stop", "invalid_type",
                              "Invalid type for 'stop': expected a string or an array of "
                              "strings, but got %s instead.",
                              tw_bridge_json_type_name(stop));
    if (n > TW_BRIDGE_MAX_STOP)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "stop", "array_above_max_length",
                              "Invalid 'stop': array too long. Expected an array with maximum "
                              "length %d, but got an array with length %zu instead.",
                              TW_BRIDGE_MAX_STOP, n);
    if (n == 0)
        return TW_OK;
    char **strs = tw_bridge_arena_array(&r->arena, n, sizeof *strs);
    if (!strs)
        return tw_bridge_fail_no_memory(ae);
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_is_string(stop) ? stop : json_array_get(stop, i);
        char path[TW_BRIDGE_PARAM_MAX];
        if (json_is_string(stop))
            snprintf(path, sizeof path, "stop");
        else
            tw_bridge_path_index(path, sizeof path, "stop", i, NULL);
        if (!json_is_string(s))
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, path, "invalid_type",
                                  "Invalid type for '%s': expected a string, but got %s "
                                  "instead.",
                                  path, tw_bridge_json_type_name(s));
        size_t len = json_string_length(s);
        if (len == 0 || len > TW_BRIDGE_MAX_STOP_BYTES)
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, path, "invalid_value",
                                  "Invalid '%s': a stop sequence must be 1 to %d bytes long, "
                                  "but got %zu.",
                                  path, TW_BRIDGE_MAX_STOP_BYTES, len);
        strs[i] = (char *)json_string_value(s);
    }
    r->stop.stop_strings = strs;
    r->stop.n_stop_strings = n;
    return TW_OK;
}

tw_status tw_bridge_map_token_ids(const json_t *arr, const char *path, size_t max_count,
                                  tw_bridge_arena *arena, uint32_t **ids, size_t *n,
                                  tw_bridge_apierr *ae)
{
    size_t count = json_array_size(arr);
    if (count > max_count)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, path, "array_above_max_length",
                              "Invalid '%s': array too long. Expected at most %zu token ids, "
                              "but got %zu.",
                              path, max_count, count);
    uint32_t *out = tw_bridge_arena_array(arena, count ? count : 1, sizeof *out);
    if (!out)
        return tw_bridge_fail_no_memory(ae);
    for (size_t i = 0; i < count; i++) {
        const json_t *v = json_array_get(arr, i);
        char ipath[TW_BRIDGE_PARAM_MAX];
        tw_bridge_path_index(ipath, sizeof ipath, path, i, NULL);
        if (!json_is_integer(v))
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, ipath, "invalid_type",
                                  "Invalid type for '%s': expected an integer token id, but "
                                  "got %s instead.",
                                  ipath, tw_bridge_json_type_name(v));
        json_int_t x = json_integer_value(v);
        if (x < 0 || x >= (json_int_t)UINT32_MAX)
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, ipath, "invalid_value",
                                  "Invalid value for '%s': token id %lld is out of range.",
                                  ipath, (long long)x);
        out[i] = (uint32_t)x;
    }
    *ids = out;
    *n = count;
    return TW_OK;
}

/* logit_bias: {"<token id>": bias in [-100, 100], ...}. */
static tw_status map_logit_bias(const json_t *root, tw_bridge_gen_request *r,
                                tw_bridge_apierr *ae)
{
    json_t *lb = NULL;
    int got = tw_bridge_get_typed(root, "logit_bias", NULL, JSON_OBJECT, &lb, ae);
    if (got <= 0)
        return got < 0 ? TW_INVALID_ARGUMENT : TW_OK;
    size_t n = json_object_size(lb);
    if (n > TW_BRIDGE_MAX_LOGIT_BIAS)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "logit_bias", "invalid_value",
                              "Invalid 'logit_bias': at most %d entries are allowed, but got "
                              "%zu.",
                              TW_BRIDGE_MAX_LOGIT_BIAS, n);
    if (n == 0)
        return TW_OK;
    Tokenwire__V1__LogitBias **ptrs = tw_bridge_arena_array(&r->arena, n, sizeof *ptrs);
    Tokenwire__V1__LogitBias *items = tw_bridge_arena_array(&r->arena, n, sizeof *items);
    if (!ptrs || !items)
        return tw_bridge_fail_no_memory(ae);
    const char *key;
    json_t *val;
    size_t i = 0;
    json_object_foreach(lb, key, val) {
        char path[TW_BRIDGE_PARAM_MAX];
        snprintf(path, sizeof path, "logit_bias.%.60s", key);
        /* Token ids are decimal strings: digits only, no sign or spaces. */
        size_t klen = strlen(key);
        bool digits = klen > 0 && klen <= 10;
        for (size_t k = 0; digits && k < klen; k++)
            digits = key[k] >= '0' && key[k] <= '9';
        unsigned long long id = digits ? strtoull(key, NULL, 10) : 0;
        if (!digits || id >= UINT32_MAX)
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "logit_bias", "invalid_value",
                                  "Invalid key in 'logit_bias': '%.60s' is not a token id.",
                                  key);
        double bias;
        if (!json_is_number(val))
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, path, "invalid_type",
                                  "Invalid type for '%s': expected a number, but got %s "
                                  "instead.",
                                  path, tw_bridge_json_type_name(val));
        bias = json_number_value(val);
        if (!(bias >= -100.0 && bias <= 100.0))
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, path, "invalid_value",
                                  "Invalid value for '%s': expected a number between -100 and "
                                  "100, but got %g instead.",
                                  path, bias);
        Tokenwire__V1__LogitBias init = TOKENWIRE__V1__LOGIT_BIAS__INIT;
        items[i] = init;
        items[i].has_token_id = 1;
        items[i].token_id = (uint32_t)id;
        items[i].has_bias = 1;
        items[i].bias = (float)bias;
        ptrs[i] = &items[i];
        i++;
    }
    r->sampling.logit_bias = ptrs;
    r->sampling.n_logit_bias = i;
    return TW_OK;
}

/* Fields shared by both endpoints: model, sampling, stop rules, streaming,
 * the response format and the tokenwire extensions. */
static tw_status map_common(const json_t *root, tw_bridge_gen_request *r, tw_bridge_apierr *ae)
{
    const char *model = NULL;
    if (tw_bridge_get_string(root, "model", NULL, TW_BRIDGE_MAX_MODEL_NAME, &model, NULL, ae) <
        0)
        return TW_INVALID_ARGUMENT;
    r->gen.model = (char *)(model ? model : "");

    long long v;
    int got;
    /* As in OpenAI's API: max_completion_tokens bounds every generated
     * token, reasoning included; the older max_tokens bounds the answer
     * (the thinking budget bounds the reasoning). Both may be given. */
    got = tw_bridge_get_int(root, "max_completion_tokens", NULL, 1, UINT32_MAX, &v, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    if (got > 0) {
        r->stop.has_max_total_tokens = 1;
        r->stop.max_total_tokens = (uint32_t)v;
    }
    int got_total = got;
    /* completions take 0 with echo: the prompt scored, nothing generated */
    got = tw_bridge_get_int(root, "max_tokens", NULL, r->kind == TW_BRIDGE_API_COMPLETION ? 0 : 1,
                            UINT32_MAX, &v, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    if (got > 0 && v == 0) {
        r->stop.has_prompt_only = 1;
        r->stop.prompt_only = 1;
    } else if (got > 0) {
        r->stop.has_max_tokens = 1;
        r->stop.max_tokens = (uint32_t)v;
    } else if (r->kind == TW_BRIDGE_API_COMPLETION && got_total == 0) {
        r->stop.has_max_tokens = 1;
        r->stop.max_tokens = TW_BRIDGE_COMPLETIONS_DEFAULT_MAX_TOKENS;
    }

    tw_status st;
    if ((st = set_float(root, "temperature", 0.0, 2.0, &r->sampling.has_temperature,
                        &r->sampling.temperature, ae)) != TW_OK ||
        (st = set_float(root, "top_p", 0.0, 1.0, &r->sampling.has_top_p, &r->sampling.top_p,
                        ae)) != TW_OK ||
        (st = set_float(root, "presence_penalty", -2.0, 2.0, &r->sampling.has_presence_penalty,
                        &r->sampling.presence_penalty, ae)) != TW_OK ||
        (st = set_float(root, "frequency_penalty", -2.0, 2.0,
                        &r->sampling.has_frequency_penalty, &r->sampling.frequency_penalty,
                        ae)) != TW_OK ||
        (st = set_float(root, "min_p", 0.0, 1.0, &r->sampling.has_min_p, &r->sampling.min_p,
                        ae)) != TW_OK ||
        (st = set_float(root, "repetition_penalty", 0.01, 100.0,
                        &r->sampling.has_repetition_penalty, &r->sampling.repetition_penalty,
                        ae)) != TW_OK)
        return st;

    /* top_k: -1 is the common spelling of "no limit". */
    got = tw_bridge_get_int(root, "top_k", NULL, -1, UINT32_MAX, &v, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    if (got > 0) {
        r->sampling.has_top_k = 1;
        r->sampling.top_k = v < 0 ? 0 : (uint32_t)v;
    }
    got = tw_bridge_get_int(root, "seed", NULL, INT64_MIN, INT64_MAX, &v, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    if (got > 0) {
        r->sampling.has_seed = 1;
        r->sampling.seed = (uint64_t)v;
    }
    got = tw_bridge_get_int(root, "n", NULL, 1, TW_BRIDGE_MAX_N, &v, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    if (got > 0) {
        r->gen.has_n = 1;
        r->gen.n = (uint32_t)v;
    }
    got = tw_bridge_get_int(root, "min_tokens", NULL, 0, UINT32_MAX, &v, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    if (got > 0) {
        r->stop.has_min_tokens = 1;
        r->stop.min_tokens = (uint32_t)v;
    }
    bool b;
    got = tw_bridge_get_bool(root, "ignore_eos", NULL, &b, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    if (got > 0) {
        r->stop.has_ignore_eos = 1;
        r->stop.ignore_eos = b;
    }
    json_t *stop_ids = NULL;
    got = tw_bridge_get_typed(root, "stop_token_ids", NULL, JSON_ARRAY, &stop_ids, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    if (got > 0 && (st = tw_bridge_map_token_ids(stop_ids, "stop_token_ids", 1024, &r->arena,
                                                 &r->stop.stop_token_ids,
                                                 &r->stop.n_stop_token_ids, ae)) != TW_OK)
        return st;

    if ((st = map_stop(root, r, ae)) != TW_OK || (st = map_logit_bias(root, r, ae)) != TW_OK)
        return st;

    got = tw_bridge_get_bool(root, "stream", NULL, &b, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    r->stream = got > 0 && b;
    json_t *so = NULL;
    got = tw_bridge_get_typed(root, "stream_options", NULL, JSON_OBJECT, &so, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    if (got > 0) {
        if (!r->stream)
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "stream_options", "invalid_value",
                                  "The 'stream_options' parameter is only allowed when "
                                  "'stream' is enabled.");
        got = tw_bridge_get_bool(so, "include_usage", "stream_options.include_usage", &b, ae);
        if (got < 0)
            return TW_INVALID_ARGUMENT;
        r->include_usage = got > 0 && b;
    }

    /* Extension (as vLLM spells it): the generated token ids in each choice,
     * for callers that work in ids, such as models without a tokenizer. */
    got = tw_bridge_get_bool(root, "return_token_ids", NULL, &b, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    r->return_token_ids = got > 0 && b;

    const char *user = NULL;
    if (tw_bridge_get_string(root, "user", NULL, 512, &user, NULL, ae) < 0)
        return TW_INVALID_ARGUMENT;
    r->gen.user = (char *)user;

    got = tw_bridge_get_int(root, "max_thinking_tokens", NULL, 0, UINT32_MAX, &v, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    if (got > 0) {
        r->thinking.has_max_thinking_tokens = 1;
        r->thinking.max_thinking_tokens = (uint32_t)v;
        r->gen.thinking = &r->thinking;
    }
    return tw_bridge_map_format(root, r, ae);
}

static tw_status map_chat_logprobs(const json_t *root, tw_bridge_gen_request *r,
                                   tw_bridge_apierr *ae)
{
    bool b = false;
    long long v;
    int got = tw_bridge_get_bool(root, "logprobs", NULL, &b, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    r->want_logprobs = got > 0 && b;
    got = tw_bridge_get_int(root, "top_logprobs", NULL, 0, TW_BRIDGE_MAX_TOP_LOGPROBS, &v, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    if (got > 0) {
        if (!r->want_logprobs)
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "top_logprobs", "invalid_value",
                                  "Invalid value for 'top_logprobs': 'logprobs' must be set "
                                  "to true when 'top_logprobs' is used.");
        r->top_logprobs = (unsigned)v;
    }
    if (r->want_logprobs) {
        r->logprobs.has_enabled = 1;
        r->logprobs.enabled = 1;
        r->logprobs.has_top_logprobs = 1;
        r->logprobs.top_logprobs = r->top_logprobs;
        r->gen.logprobs = &r->logprobs;
    }
    return TW_OK;
}

static tw_status map_thinking_kwargs(const json_t *root, tw_bridge_gen_request *r,
                                     tw_bridge_apierr *ae)
{
    json_t *kw = NULL;
    int got = tw_bridge_get_typed(root, "chat_template_kwargs", NULL, JSON_OBJECT, &kw, ae);
    if (got <= 0)
        return got < 0 ? TW_INVALID_ARGUMENT : TW_OK;
    bool b;
    got = tw_bridge_get_bool(kw, "enable_thinking", "chat_template_kwargs.enable_thinking", &b,
                             ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    if (got > 0) {
        r->thinking.has_enable_thinking = 1;
        r->thinking.enable_thinking = b;
        r->gen.thinking = &r->thinking;
    }
    return TW_OK;
}

/* reasoning_effort, as OpenAI's reasoning models take it: "none" and
 * "minimal" turn thinking off, "low", "medium" and "high" turn it on with a
 * thinking budget of 1024, 8192 and 32768 tokens. What the caller set
 * itself (chat_template_kwargs.enable_thinking, max_thinking_tokens) wins. */
static tw_status map_reasoning_effort(const json_t *root, tw_bridge_gen_request *r,
                                      tw_bridge_apierr *ae)
{
    const char *effort = NULL;
    int got = tw_bridge_get_string(root, "reasoning_effort", NULL, 16, &effort, NULL, ae);
    if (got <= 0)
        return got < 0 ? TW_INVALID_ARGUMENT : TW_OK;
    static const struct {
        const char *name;
        bool think;
        uint32_t budget;
    } levels[] = {{"none", false, 0},
                  {"minimal", false, 0},
                  {"low", true, 1024},
                  {"medium", true, 8192},
                  {"high", true, 32768}};
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        if (strcmp(effort, levels[i].name) != 0)
            continue;
        if (!r->thinking.has_enable_thinking) {
            r->thinking.has_enable_thinking = 1;
            r->thinking.enable_thinking = levels[i].think;
        }
        if (levels[i].budget && !r->thinking.has_max_thinking_tokens) {
            r->thinking.has_max_thinking_tokens = 1;
            r->thinking.max_thinking_tokens = levels[i].budget;
        }
        r->gen.thinking = &r->thinking;
        return TW_OK;
    }
    return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "reasoning_effort", "invalid_value",
                          "Invalid value for 'reasoning_effort': expected 'none', 'minimal', "
                          "'low', 'medium' or 'high'.");
}

/* parallel_tool_calls: false asks for one call at most. Nothing here can
 * stop the model writing more, so the answer keeps the first. */
static tw_status map_parallel_calls(const json_t *root, tw_bridge_gen_request *r,
                                    tw_bridge_apierr *ae)
{
    bool b = true;
    int got = tw_bridge_get_bool(root, "parallel_tool_calls", NULL, &b, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    r->single_tool_call = got > 0 && !b;
    return TW_OK;
}

size_t tw_bridge_calls_allowed(const tw_bridge_gen_request *r, size_t n)
{
    return r->single_tool_call && n > 1 ? 1 : n;
}

static tw_status check_root(const json_t *root, tw_bridge_apierr *ae)
{
    if (!json_is_object(root))
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, NULL, "invalid_type",
                              "The request body must be a JSON object, but got %s.",
                              root ? tw_bridge_json_type_name(root) : "nothing");
    return TW_OK;
}

tw_status tw_bridge_map_chat_request(json_t *root, tw_bridge_gen_request *out,
                                     tw_bridge_apierr *ae)
{
    gen_request_init(out, root, TW_BRIDGE_API_CHAT);
    tw_status st;
    if ((st = check_root(root, ae)) != TW_OK)
        return st;
    if ((st = tw_bridge_map_messages(json_object_get(root, "messages"), &out->arena, &out->chat,
                                     ae)) != TW_OK ||
        (st = tw_bridge_map_tools(root, &out->arena, &out->chat, &out->parse_tool_calls, ae)) !=
            TW_OK ||
        (st = map_common(root, out, ae)) != TW_OK ||
        (st = map_chat_logprobs(root, out, ae)) != TW_OK ||
        (st = map_thinking_kwargs(root, out, ae)) != TW_OK ||
        (st = map_reasoning_effort(root, out, ae)) != TW_OK ||
        (st = map_parallel_calls(root, out, ae)) != TW_OK)
        return st;
    out->gen.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_CHAT;
    out->gen.chat = &out->chat;
    return TW_OK;
}

/* One prompt: a string or a non-empty array of token ids. */
static tw_status map_prompt_value(const json_t *p, const char *path, tw_bridge_gen_request *r,
                                  tw_bridge_apierr *ae)
{
    if (json_is_string(p)) {
        r->gen.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TEXT;
        r->gen.text = (char *)json_string_value(p);
        return TW_OK;
    }
    if (!json_is_array(p))
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, path, "invalid_type",
                              "Invalid type for '%s': expected a string or an array of "
                              "token ids, but got %s instead.",
                              path, tw_bridge_json_type_name(p));
    if (json_array_size(p) == 0)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, path, "empty_array",
                              "Invalid '%s': the prompt must not be empty.", path);
    tw_status st = tw_bridge_map_token_ids(p, path, TW_BRIDGE_MAX_PROMPT_TOKENS, &r->arena,
                                           &r->token_ids.ids, &r->token_ids.n_ids, ae);
    if (st != TW_OK)
        return st;
    r->gen.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TOKEN_IDS;
    r->gen.token_ids = &r->token_ids;
    return TW_OK;
}

/* The completions prompt: "text", [ids...], or an array of either
 * (OpenAI's batch form). Every prompt is checked here; gen takes the first. */
static tw_status map_prompt(const json_t *root, tw_bridge_gen_request *r, tw_bridge_apierr *ae)
{
    const json_t *p = json_object_get(root, "prompt");
    if (!p || json_is_null(p))
        return tw_bridge_fail_missing(ae, "prompt");
    r->n_prompts = 1;
    if (!json_is_array(p) || json_array_size(p) == 0)
        return map_prompt_value(p, "prompt", r, ae);
    const json_t *first = json_array_get(p, 0);
    if (!json_is_string(first) && !json_is_array(first))
        return map_prompt_value(p, "prompt", r, ae);
    size_t n = json_array_size(p);
    if (n > TW_BRIDGE_MAX_PROMPTS)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "prompt", "array_above_max_length",
                              "Invalid 'prompt': at most %d prompts in one request, but got %zu.",
                              TW_BRIDGE_MAX_PROMPTS, n);
    r->prompt_texts = tw_bridge_arena_array(&r->arena, n, sizeof *r->prompt_texts);
    r->prompt_ids = tw_bridge_arena_array(&r->arena, n, sizeof *r->prompt_ids);
    if (!r->prompt_texts || !r->prompt_ids)
        return tw_bridge_fail_no_memory(ae);
    for (size_t i = 0; i < n; i++) {
        char path[32];
        snprintf(path, sizeof path, "prompt[%zu]", i);
        tw_status st = map_prompt_value(json_array_get(p, i), path, r, ae);
        if (st != TW_OK)
            return st;
        bool text = r->gen.prompt_case == TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TEXT;
        r->prompt_texts[i] = text ? r->gen.text : NULL;
        r->prompt_ids[i] = r->token_ids;
    }
    r->n_prompts = n;
    tw_bridge_gen_request_prompt(r, 0, &r->gen, &r->token_ids);
    return TW_OK;
}

void tw_bridge_gen_request_prompt(const tw_bridge_gen_request *r, size_t i,
                                  Tokenwire__V1__GenerateRequest *gen, Tokenwire__V1__TokenIds *ids)
{
    if (!r->prompt_texts)
        return; /* one prompt: gen has it */
    if (r->prompt_texts[i]) {
        gen->prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TEXT;
        gen->text = (char *)r->prompt_texts[i];
    } else {
        *ids = r->prompt_ids[i];
        gen->prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TOKEN_IDS;
        gen->token_ids = ids;
    }
}

/* The legacy completions options this server cannot honour are refused
 * rather than ignored, so a caller never gets a silently different answer. */
static tw_status map_completion_extras(const json_t *root, tw_bridge_gen_request *r,
                                       tw_bridge_apierr *ae)
{
    bool echo = false;
    long long v;
    int got = tw_bridge_get_bool(root, "echo", NULL, &echo, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    const char *suffix = NULL;
    size_t len = 0;
    got = tw_bridge_get_string(root, "suffix", NULL, (size_t)-1 / 4, &suffix, &len, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    if (got > 0 && len > 0)
        return unsupported(ae, "suffix", "with a value");
    got = tw_bridge_get_int(root, "best_of", NULL, 1, TW_BRIDGE_MAX_N, &v, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    uint32_t n = r->gen.has_n ? r->gen.n : 1;
    if (got > 0 && (uint32_t)v != n)
        return unsupported(ae, "best_of", "different from 'n'");
    if (r->n_prompts * n > TW_BRIDGE_MAX_N)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "n", "invalid_value",
                              "Invalid value for 'n': %zu prompts with %u choices each make more "
                              "than %d choices.",
                              r->n_prompts, n, TW_BRIDGE_MAX_N);
    /* Legacy logprobs is an integer: how many alternatives per position. */
    got = tw_bridge_get_int(root, "logprobs", NULL, 0, TW_BRIDGE_MAX_LEGACY_LOGPROBS, &v, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    if (got > 0) {
        r->want_logprobs = true;
        r->top_logprobs = (unsigned)v;
        r->logprobs.has_enabled = 1;
        r->logprobs.enabled = 1;
        r->logprobs.has_top_logprobs = 1;
        r->logprobs.top_logprobs = (uint32_t)v;
        r->gen.logprobs = &r->logprobs;
    }
    /* The prompt's text (and its log-probabilities) come back with a whole
     * answer and on each streamed choice's first chunk. */
    if (r->stop.prompt_only && !echo)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "max_tokens", "invalid_value",
                              "Invalid value for 'max_tokens': 0 needs 'echo', or there is "
                              "nothing to answer with.");
    if (echo) {
        r->echo = true;
        r->gen.has_echo_prompt = 1;
        r->gen.echo_prompt = 1;
        if (r->want_logprobs) {
            r->logprobs.has_prompt_logprobs = 1;
            r->logprobs.prompt_logprobs = 1;
        }
    }
    return TW_OK;
}

tw_status tw_bridge_map_completion_request(json_t *root, tw_bridge_gen_request *out,
                                           tw_bridge_apierr *ae)
{
    gen_request_init(out, root, TW_BRIDGE_API_COMPLETION);
    tw_status st;
    if ((st = check_root(root, ae)) != TW_OK || (st = map_prompt(root, out, ae)) != TW_OK ||
        (st = map_common(root, out, ae)) != TW_OK ||
        (st = map_completion_extras(root, out, ae)) != TW_OK)
        return st;
    /* A raw completion has no reasoning field: think tags stay in the text. */
    out->thinking.has_separate_reasoning = 1;
    out->thinking.separate_reasoning = 0;
    out->gen.thinking = &out->thinking;
    return TW_OK;
}
