/* Turning a caller's tw_gen_request into the engine's own request: every
 * field validated, everything the scheduler needs copied, the prompt
 * tokenized. Runs on the submitting thread so the scheduler never waits for
 * a tokenizer or a template. */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "engine_internal.h"
#include "tw/chat_template.h"
#include "tw/long_context.h"

void tw_gen_request_init(tw_gen_request *r)
{
    memset(r, 0, sizeof *r);
    r->prompt_kind = TW_PROMPT_TOKENS;
    r->add_special_tokens = true;
    r->chat.add_generation_prompt = true;
    tw_sampling_params_init(&r->sampling);
    tw_stop_params_init(&r->stop);
    tw_thinking_opts_init(&r->thinking);
    r->n = 1;
}

void request_free(request *r)
{
    if (!r)
        return;
    free(r->prompt);
    free(r->answer_prefix);
    tw_json_grammar_free(r->json);
    tw_json_grammar_free(r->calls);
    free(r->prompt_lps);
    free(r->bias);
    free(r->stop_ids);
    for (size_t i = 0; r->stop_strings && i < r->stop.n_stop_strings; i++)
        free(r->stop_strings[i]);
    free(r->stop_strings);
    free(r);
}

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

/* Parses caller JSON text (tool arguments, schemas) into a value. */
static tw_status parse_json(const char *text, const char *what, size_t idx, json_t **out,
                            tw_err *err)
{
    json_error_t jerr;
    *out = json_loads(text ? text : "{}", JSON_DECODE_ANY, &jerr);
    if (!*out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "chat: %s[%zu] is not valid JSON: %s", what,
                         idx, jerr.text);
    return TW_OK;
}

/* Builds the variables HF's apply_chat_template passes to a template. */
static tw_status chat_vars(const model_entry *m, const tw_chat_input *chat,
                           tw_think_mode thinking, json_t **out, tw_err *err)
{
    json_t *vars = json_object(), *msgs = json_array();
    tw_status st = vars && msgs ? TW_OK : tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    for (size_t i = 0; st == TW_OK && i < chat->n_messages; i++) {
        const tw_chat_message *in = &chat->messages[i];
        if (!in->role || !*in->role) {
            st = tw_errorf(err, TW_INVALID_ARGUMENT, "chat: message %zu has no role", i);
            break;
        }
        json_t *msg = json_object();
        const char *keys[] = {"role", "content", "reasoning_content", "tool_call_id", "name"};
        const char *vals[] = {in->role, in->content, in->reasoning_content, in->tool_call_id,
                              in->name};
        for (size_t k = 0; k < 5 && st == TW_OK; k++) {
            if (!vals[k] && k != 1)
                continue;
            json_t *v = str_or_null(vals[k]);
            if (!v || json_object_set_new(msg, keys[k], v) != 0)
                st = tw_errorf(err, TW_INVALID_ARGUMENT,
                               "chat: message %zu: %s is not valid UTF-8", i, keys[k]);
        }
        if (st != TW_OK) {
            json_decref(msg);
            break;
        }
        if (in->n_tool_calls) {
            json_t *calls = json_array();
            for (size_t k = 0; st == TW_OK && k < in->n_tool_calls; k++) {
                const tw_tool_call *tc = &in->tool_calls[k];
                json_t *args;
                st = parse_json(tc->arguments_json, "tool call arguments", k, &args, err);
                if (st != TW_OK)
                    break;
                json_t *fn = json_pack("{s:o,s:o}", "name", str_or_null(tc->name), "arguments",
                                       args);
                json_array_append_new(calls, json_pack("{s:o,s:s,s:o}", "id", str_or_null(tc->id),
                                                       "type", "function", "function", fn));
            }
            json_object_set_new(msg, "tool_calls", calls);
        }
        json_array_append_new(msgs, msg);
    }
    if (st == TW_OK && chat->n_tools) {
        json_t *tools = json_array();
        for (size_t k = 0; st == TW_OK && k < chat->n_tools; k++) {
            const tw_tool *t = &chat->tools[k];
            json_t *params;
            st = parse_json(t->parameters_json, "tool parameters", k, &params, err);
            if (st != TW_OK)
                break;
            json_t *fn = json_pack("{s:o,s:o,s:o}", "name", str_or_null(t->name), "description",
                                   str_or_null(t->description), "parameters", params);
            json_array_append_new(tools, json_pack("{s:s,s:o}", "type", "function", "function", fn));
        }
        json_object_set_new(vars, "tools", tools);
    }
    if (st != TW_OK) {
        json_decref(msgs);
        json_decref(vars);
        return st;
    }
    json_object_set_new(vars, "messages", msgs);
    json_object_set_new(vars, "add_generation_prompt", json_boolean(chat->add_generation_prompt));
    if (thinking != TW_THINK_DEFAULT)
        json_object_set_new(vars, "enable_thinking", json_boolean(thinking == TW_THINK_ON));
    json_object_set_new(vars, "bos_token", json_string(tw_tokenizer_bos_text(m->tok)));
    json_object_set_new(vars, "eos_token", json_string(tw_tokenizer_eos_text(m->tok)));
    *out = vars;
    return TW_OK;
}

tw_status engine_render_chat(model_entry *m, const tw_chat_input *chat, tw_think_mode thinking,
                             char **text, size_t *len, tw_err *err)
{
    *text = NULL;
    *len = 0;
    if (!chat || (chat->n_messages && !chat->messages) || (chat->n_tools && !chat->tools))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "chat: messages missing");
    if (chat->n_messages == 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "chat: no messages");
    if (!m->tmpl)
        return tw_errorf(err, TW_FAILED_PRECONDITION, "model \"%s\" has no chat template",
                         m->name);
    json_t *vars;
    tw_status st = chat_vars(m, chat, thinking, &vars, err);
    if (st != TW_OK)
        return st;
    st = tw_chat_template_render(m->tmpl, vars, text, len, err);
    json_decref(vars);
    return st;
}

/* The text the transition kind is guessed from: the last user message of a
 * chat, a text prompt, or the decoded tail of a token prompt. */
static tw_transition_kind classify(const model_entry *m, const tw_gen_request *req,
                                   const uint32_t *ids, size_t n)
{
    if (req->prompt_kind == TW_PROMPT_TEXT)
        return tw_thinking_classify_prompt(req->prompt_text, req->prompt_text_len);
    if (req->prompt_kind == TW_PROMPT_CHAT) {
        for (size_t i = req->chat.n_messages; i > 0; i--) {
            const tw_chat_message *msg = &req->chat.messages[i - 1];
            if (msg->role && strcmp(msg->role, "user") == 0 && msg->content)
                return tw_thinking_classify_prompt(msg->content, strlen(msg->content));
        }
        return TW_TRANSITION_PLAIN;
    }
    if (!m->tok || m->think_open == TW_TOKEN_NONE)
        return TW_TRANSITION_PLAIN;
    size_t tail = n > 512 ? 512 : n;
    char buf[8192];
    size_t len = 0;
    if (tw_tokenizer_decode(m->tok, ids + n - tail, tail, TW_DECODE_SKIP_SPECIAL, buf, sizeof buf,
                            &len, NULL) != TW_OK)
        return TW_TRANSITION_PLAIN;
    return tw_thinking_classify_prompt(buf, len);
}

/* Whether the rendered prompt leaves the answer inside a thinking block
 * (its last <think> not closed). */
static bool ends_in_thinking(const model_entry *m, const char *text, size_t len)
{
    if (m->think_open == TW_TOKEN_NONE)
        return false;
    const char *open = tw_tokenizer_token_text(m->tok, m->think_open);
    const char *close = tw_tokenizer_token_text(m->tok, m->think_close);
    if (!open || !close || !*open || !*close)
        return false;
    size_t no = strlen(open), nc = strlen(close);
    for (size_t i = len; i > 0; i--) {
        if (i >= nc && memcmp(text + i - nc, close, nc) == 0)
            return false;
        if (i >= no && memcmp(text + i - no, open, no) == 0)
            return true;
    }
    return false;
}

/* tool_choice "required" or a named function: the call's opening, which the
 * prompt ends with (after closing a thinking block the template left open)
 * so the model can only go on with the call. Appended to *text (a malloc'd
 * render); r->answer_prefix keeps the opening for the answer's text. */
static tw_status force_tool_call(const model_entry *m, const tw_chat_input *chat, request *r,
                                 char **text, size_t *len, tw_err *err)
{
    const char *choice = chat->tool_choice;
    if (!choice || !strcmp(choice, "auto") || !strcmp(choice, "none"))
        return TW_OK;
    if (chat->n_tools == 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tool_choice \"%s\" without tools", choice);
    const char *name = NULL;
    if (strcmp(choice, "required") != 0) {
        for (size_t i = 0; i < chat->n_tools && !name; i++)
            if (chat->tools[i].name && !strcmp(chat->tools[i].name, choice))
                name = choice;
        if (!name)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "tool_choice names \"%s\", which is not one of the tools", choice);
    }
    if (m->tool_format == TW_TOOL_FORMAT_NONE)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "tool_choice \"%s\": the chat template of model %s shows no tool-call "
                         "format this engine knows (Hermes <tool_call>, Llama 3.1 JSON or "
                         "Mistral [TOOL_CALLS]), so a call cannot be required; use \"auto\"",
                         choice, m->name);
    tw_status st = tw_tool_call_opener(m->tool_format, name, &r->answer_prefix, err);
    if (st == TW_OK && m->json_vocab)
        st = tool_call_grammar(m, chat, name, &r->json, err);
    if (st != TW_OK)
        return st;
    const char *close =
        ends_in_thinking(m, *text, *len) ? tw_tokenizer_token_text(m->tok, m->think_close) : NULL;
    size_t nc = close ? strlen(close) + 2 : 0, np = strlen(r->answer_prefix);
    char *grown = realloc(*text, *len + nc + np + 1);
    if (!grown)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    if (close) {
        memcpy(grown + *len, close, nc - 2);
        memcpy(grown + *len + nc - 2, "\n\n", 2);
    }
    memcpy(grown + *len + nc, r->answer_prefix, np + 1);
    *text = grown;
    *len += nc + np;
    return TW_OK;
}

/* Tools under tool_choice "auto" (or none given): the calls the model
 * opens by itself are held to the tools' grammar, as forced ones are.
 * Beside a JSON answer the answer is then a document or calls; where a
 * call opens as the document does (Llama 3.1's "{"), it is read as both
 * until one refuses it. */
static tw_status lazy_tool_grammar(const model_entry *m, const tw_gen_request *req, request *r,
                                   const char *text, size_t len, tw_err *err)
{
    const tw_chat_input *chat = &req->chat;
    const char *choice = chat->tool_choice;
    if (chat->n_tools == 0 || !m->json_vocab || (choice && strcmp(choice, "auto") != 0) ||
        !tw_tool_call_trigger(m->tool_format, &r->trigger))
        return TW_OK;
    tw_status st = tool_call_grammar_auto(m, chat, &r->trigger, &r->calls, err);
    r->either = r->calls && req->format.kind != TW_OUTPUT_TEXT && r->trigger.at_start;
    /* a prompt that ends inside an opening (a template or a caller that
     * starts the call) has the call go on in the answer */
    const size_t tl = strlen(r->trigger.text), after = sizeof r->trig_after;
    for (size_t i = len > tl + after ? len - tl - after : 0;
         r->calls && !r->trigger.at_start && i < len; i++) {
        r->trig_start =
            (uint8_t)tw_tool_trigger_step(r->trigger.text, r->trig_start, (unsigned char)text[i]);
        if (r->trig_start == tl && len - i - 1 <= after) {
            r->n_trig_after = (uint8_t)(len - i - 1);
            memcpy(r->trig_after, text + i + 1, r->n_trig_after);
            break;
        }
        if (r->trig_start == tl)
            r->trig_start = 0;
    }
    return st;
}

/* tool_choice "none" with tools, on a template whose calls open with a
 * tag: the answer may not write the tag (call_ban.h), counting what of it
 * the prompt already ends with. */
static void ban_calls(const model_entry *m, const tw_gen_request *req, request *r, const char *text,
                      size_t len)
{
    const char *choice = req->chat.tool_choice;
    if (!m->ban || req->chat.n_tools == 0 || !choice || strcmp(choice, "none") != 0)
        return;
    r->ban_calls = true;
    r->trigger = m->ban->trigger;
    const size_t tl = strlen(r->trigger.text);
    r->trig_start =
        call_ban_step(m->ban, 0, len > tl ? text + len - tl : text, len > tl ? tl : len);
}

/* An answer needs a position after its prompt; an embedding only reads
 * it, up to the whole context (an encoder's position table). */
static tw_status prompt_fits(const model_entry *m, const tw_gen_request *req, size_t n, tw_err *err)
{
    if (req->embed.pooling != TW_POOLING_NONE && n > m->max_context)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "prompt: %zu tokens exceed the %u the model reads at once", n,
                         m->max_context);
    if (req->embed.pooling == TW_POOLING_NONE && n >= m->max_context)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "prompt: %zu tokens leave no room in a context of %u", n, m->max_context);
    return TW_OK;
}

static tw_status build_prompt(tw_engine *e, model_entry *m, const tw_gen_request *req,
                              request *r, tw_err *err)
{
    switch (req->prompt_kind) {
    case TW_PROMPT_TOKENS:
        if (req->n_prompt_ids == 0 || !req->prompt_ids)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "prompt: no token ids");
        if (prompt_fits(m, req, req->n_prompt_ids, err) != TW_OK)
            return TW_INVALID_ARGUMENT;
        for (size_t i = 0; i < req->n_prompt_ids; i++)
            if (req->prompt_ids[i] >= m->vocab)
                return tw_errorf(err, TW_INVALID_ARGUMENT,
                                 "prompt: token %zu (%u) outside the vocabulary (%u)", i,
                                 req->prompt_ids[i], m->vocab);
        r->prompt = malloc(req->n_prompt_ids * sizeof *r->prompt);
        if (!r->prompt)
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "prompt: out of memory");
        memcpy(r->prompt, req->prompt_ids, req->n_prompt_ids * sizeof *r->prompt);
        r->n_prompt = req->n_prompt_ids;
        return TW_OK;
    case TW_PROMPT_TEXT:
    case TW_PROMPT_CHAT:
        break;
    default:
        return tw_errorf(err, TW_INVALID_ARGUMENT, "prompt: unknown kind %d",
                         (int)req->prompt_kind);
    }
    if (!m->tok)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "prompt: model \"%s\" has no tokenizer; send token ids", m->name);
    char *rendered = NULL;
    const char *text;
    size_t len;
    unsigned flags = TW_ENCODE_PARSE_SPECIAL;
    if (req->prompt_kind == TW_PROMPT_TEXT) {
        if (!req->prompt_text && req->prompt_text_len)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "prompt: text is NULL");
        text = req->prompt_text;
        len = req->prompt_text_len;
        if (req->add_special_tokens)
            flags |= TW_ENCODE_ADD_SPECIAL;
    } else {
        tw_status st = engine_render_chat(m, &req->chat, r->thinking.enable_thinking,
                                          &rendered, &len, err);
        if (st == TW_OK)
            st = force_tool_call(m, &req->chat, r, &rendered, &len, err);
        if (st == TW_OK && !r->answer_prefix)
            st = lazy_tool_grammar(m, req, r, rendered, len, err);
        if (st == TW_OK)
            ban_calls(m, req, r, rendered, len);
        if (st != TW_OK) {
            free(rendered);
            return st;
        }
        text = rendered;
    }
    tw_status st = TW_OK;
    if (len > e->opts.max_prompt_bytes)
        st = tw_errorf(err, TW_INVALID_ARGUMENT, "prompt: %zu bytes (at most %u)", len,
                       e->opts.max_prompt_bytes);
    if (st == TW_OK)
        st = engine_encode(m->tok, text, len, flags, &r->prompt, &r->n_prompt, err);
    free(rendered);
    if (st != TW_OK)
        return st;
    if (r->n_prompt == 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "prompt: empty");
    return prompt_fits(m, req, r->n_prompt, err);
}

static tw_status copy_stop(const tw_stop_params *in, request *r, tw_err *err)
{
    r->stop = *in;
    r->stop.stop_token_ids = NULL;
    r->stop.stop_strings = NULL;
    if (in->n_stop_token_ids) {
        r->stop_ids = malloc(in->n_stop_token_ids * sizeof *r->stop_ids);
        if (!r->stop_ids)
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
        memcpy(r->stop_ids, in->stop_token_ids, in->n_stop_token_ids * sizeof *r->stop_ids);
        r->stop.stop_token_ids = r->stop_ids;
    }
    if (in->n_stop_strings) {
        r->stop.n_stop_strings = 0; /* counts what request_free must release */
        r->stop_strings = calloc(in->n_stop_strings, sizeof *r->stop_strings);
        if (!r->stop_strings)
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
        for (size_t i = 0; i < in->n_stop_strings; i++) {
            r->stop_strings[i] = strdup(in->stop_strings[i]);
            if (!r->stop_strings[i])
                return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
            r->stop.n_stop_strings++;
        }
        r->stop.stop_strings = (const char *const *)r->stop_strings;
    }
    return TW_OK;
}

/* Whether a chat renders with thinking: the caller's choice, or the
 * long-context rule's when the caller made none. */
static tw_think_mode thinking_mode(const tw_engine *e, const tw_gen_request *req)
{
    if (req->prompt_kind != TW_PROMPT_CHAT)
        return req->thinking.enable_thinking;
    tw_long_context_rule rule;
    tw_long_context_rule_init(&rule);
    rule.enabled = !e->opts.no_long_context_thinking;
    if (e->opts.long_context_chars)
        rule.context_chars = e->opts.long_context_chars;
    if (e->opts.short_question_chars)
        rule.question_chars = e->opts.short_question_chars;
    return tw_long_context_decide_chat(&rule, req->thinking.enable_thinking, req->chat.messages,
                                       req->chat.n_messages);
}

static tw_status validate_options(const tw_engine *e, const model_entry *m,
                                  const tw_gen_request *req, tw_err *err)
{
    tw_status st = tw_sampling_params_validate(&req->sampling, m->vocab, err);
    if (st == TW_OK)
        st = tw_stop_params_validate(&req->stop, m->vocab, err);
    if (st == TW_OK)
        st = tw_thinking_opts_validate(&req->thinking, err);
    if (st != TW_OK)
        return st;
    if (req->stop.n_stop_strings && !m->tok)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "stop strings need a tokenizer; model \"%s\" has none", m->name);
    if (req->n < 1 || req->n > e->opts.max_n)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "n must be 1..%u, got %u", e->opts.max_n,
                         req->n);
    if (req->logprobs.top_logprobs > TW_MAX_TOP_LOGPROBS)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "top_logprobs must be 0..%d, got %u",
                         TW_MAX_TOP_LOGPROBS, req->logprobs.top_logprobs);
    if ((unsigned)req->cache.mode > TW_CACHE_WRITE_ONLY)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "cache mode %d unknown", (int)req->cache.mode);
    if ((unsigned)req->speculative.mode > TW_SPEC_DRAFT)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "speculative mode %d unknown",
                         (int)req->speculative.mode);
    if ((unsigned)req->format.kind > TW_OUTPUT_CHOICE)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "output format %d unknown",
                         (int)req->format.kind);
    if ((unsigned)req->embed.pooling > TW_POOLING_CLS)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "pooling %d unknown", (int)req->embed.pooling);
    const bool encoder = tw_model_get_info(m->model)->encoder;
    if (encoder && req->embed.pooling == TW_POOLING_NONE)
        return tw_errorf(err, TW_FAILED_PRECONDITION,
                         "model \"%s\" is an encoder: it computes embeddings, not answers",
                         m->name);
    if (!encoder && req->embed.pooling == TW_POOLING_CLS)
        return tw_errorf(err, TW_FAILED_PRECONDITION,
                         "model \"%s\" is a decoder, whose first token's state sees that token "
                         "alone: ask for last or mean pooling",
                         m->name);
    if (req->embed.pooling != TW_POOLING_NONE &&
        (req->n != 1 || req->format.kind != TW_OUTPUT_TEXT || req->logprobs.prompt_logprobs ||
         req->prompt_kind == TW_PROMPT_CHAT))
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "an embedding takes a text or token prompt and one choice, with no "
                         "answer format or prompt log-probabilities");
    if (req->format.kind != TW_OUTPUT_TEXT && !m->json_vocab)
        return tw_errorf(err, TW_FAILED_PRECONDITION,
                         "JSON and choice answers need a tokenizer; model \"%s\" has none",
                         m->name);
    return TW_OK;
}

/* The answer's grammar; a forced tool call writes its own opening, which
 * no JSON document starts with. */
static tw_status compile_format(const tw_gen_request *req, request *r, tw_err *err)
{
    if (req->format.kind == TW_OUTPUT_TEXT)
        return TW_OK;
    if (r->answer_prefix)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "a JSON answer cannot be combined with a forced tool call");
    if (req->format.kind == TW_OUTPUT_CHOICE)
        return tw_json_grammar_choice(req->format.choices, req->format.n_choices, &r->json, err);
    const char *schema = req->format.json_schema;
    size_t len = schema ? req->format.json_schema_len : 0;
    return tw_json_grammar_compile(schema, len, &r->json, err);
}

/* TW_POOLING_MODEL: the pooling m's files name; when they name none, the
 * last token's for a decoder (what decoder embedding models are trained
 * for) and the mean for an encoder (what sentence-transformers gives a
 * plain BERT). */
static tw_status model_pooling(const model_entry *m, tw_pooling *out, tw_err *err)
{
    const tw_model_info *in = tw_model_get_info(m->model);
    const tw_model_pooling p = in->pooling;
    if (p == TW_MODEL_POOLING_UNSAID)
        *out = in->encoder ? TW_POOLING_MEAN : TW_POOLING_LAST;
    else if (p == TW_MODEL_POOLING_LAST)
        *out = TW_POOLING_LAST;
    else if (p == TW_MODEL_POOLING_MEAN)
        *out = TW_POOLING_MEAN;
    else if (p == TW_MODEL_POOLING_CLS && in->encoder)
        *out = TW_POOLING_CLS;
    else
        return tw_errorf(err, TW_FAILED_PRECONDITION,
                         "model \"%s\" says its embeddings pool by %s, which this engine does "
                         "not compute for it; ask for last or mean pooling",
                         m->name, tw_model_pooling_name(p));
    return TW_OK;
}

tw_status request_prepare(tw_engine *e, model_entry *m, const tw_gen_request *req,
                          request **out, tw_err *err)
{
    *out = NULL;
    tw_status st = validate_options(e, m, req, err);
    if (st != TW_OK)
        return st;
    tw_pooling pooling = req->embed.pooling;
    if (pooling == TW_POOLING_MODEL && (st = model_pooling(m, &pooling, err)) != TW_OK)
        return st;
    request *r = calloc(1, sizeof *r);
    if (!r)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "submit: out of memory");
    r->m = m;
    r->n = req->n;
    r->deadline_unix_ms = req->deadline_unix_ms;
    r->logprobs = req->logprobs;
    r->embed = req->embed;
    r->embed.pooling = pooling;
    r->thinking = req->thinking;
    r->thinking.enable_thinking = thinking_mode(e, req);
    r->sampling = req->sampling;
    r->sampling.logit_bias = NULL;
    atomic_init(&r->cancel, false);
    if (req->sampling.n_logit_bias) {
        r->bias = malloc(req->sampling.n_logit_bias * sizeof *r->bias);
        if (!r->bias) {
            request_free(r);
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "submit: out of memory");
        }
        memcpy(r->bias, req->sampling.logit_bias, req->sampling.n_logit_bias * sizeof *r->bias);
        r->sampling.logit_bias = r->bias;
    }
    if (req->sampling.has_seed) {
        r->seed = req->sampling.seed;
    } else if (getrandom(&r->seed, sizeof r->seed, GRND_NONBLOCK) != (ssize_t)sizeof r->seed) {
        r->seed = tw_now_us() ^ (uint64_t)(uintptr_t)r;
    }
    st = copy_stop(&req->stop, r, err);
    if (st == TW_OK)
        st = build_prompt(e, m, req, r, err);
    if (st == TW_OK)
        st = compile_format(req, r, err);
    if (st != TW_OK) {
        request_free(r);
        return st;
    }
    if (req->logprobs.prompt_logprobs) {
        r->prompt_lps = calloc(r->n_prompt, sizeof *r->prompt_lps);
        if (!r->prompt_lps) {
            request_free(r);
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                             "prompt log-probabilities of %zu tokens: out of memory", r->n_prompt);
        }
    }
    r->kind = classify(m, req, r->prompt, r->n_prompt);
    *out = r;
    return TW_OK;
}
