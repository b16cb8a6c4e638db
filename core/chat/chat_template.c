/* Public face of the chat-template interpreter: compile, render with
 * budgets, family recognition and the built-in ChatML fallback. */
#include "tw/chat_template.h"

#include <stdlib.h>
#include <string.h>

#include "jinja.h"

struct tw_chat_template {
    jarena arena;
    jnode *root;
};

#define DEFAULT_MAX_OUTPUT ((size_t)16 << 20)
#define DEFAULT_MAX_MEMORY ((size_t)256 << 20)
#define DEFAULT_MAX_STEPS ((uint64_t)4 << 20)
#define MAX_CALL_DEPTH 32

tw_status tw_chat_template_compile(const char *src, size_t len, tw_chat_template **out,
                                   tw_err *err)
{
    if (!out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "chat template: no output pointer");
    *out = NULL;
    if (!src && len)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "chat template: no source");
    if (len > TW_CHAT_TEMPLATE_MAX_SOURCE)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                         "chat template of %zu bytes exceeds the limit of %u bytes", len,
                         TW_CHAT_TEMPLATE_MAX_SOURCE);
    tw_chat_template *t = calloc(1, sizeof *t);
    if (!t)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "chat template: out of memory");
    jtoks toks = {0};
    tw_status st = jlex(src ? src : "", len, &t->arena, &toks, err);
    if (st == TW_OK)
        st = jparse(&toks, &t->arena, &t->root, err);
    free(toks.v);
    if (st != TW_OK) {
        tw_chat_template_free(t);
        return st;
    }
    *out = t;
    return TW_OK;
}

void tw_chat_template_free(tw_chat_template *t)
{
    if (!t)
        return;
    jarena_free(&t->arena);
    free(t);
}

tw_status tw_chat_template_render(const tw_chat_template *t, const json_t *vars, char **out,
                                  size_t *len, tw_err *err)
{
    return tw_chat_template_render_ex(t, vars, NULL, out, len, err);
}

tw_status tw_chat_template_render_ex(const tw_chat_template *t, const json_t *vars,
                                     const tw_chat_render_opts *opts, char **out, size_t *len,
                                     tw_err *err)
{
    if (!out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "chat template: no output pointer");
    *out = NULL;
    if (len)
        *len = 0;
    if (!t || !t->root)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "chat template: no template");
    if (vars && !json_is_object(vars))
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "chat template: variables must be a JSON object");
    jlimits lim = {
        .max_output = opts && opts->max_output ? opts->max_output : DEFAULT_MAX_OUTPUT,
        .max_live_bytes = opts && opts->max_memory ? opts->max_memory : DEFAULT_MAX_MEMORY,
        .max_steps = opts && opts->max_steps ? opts->max_steps : DEFAULT_MAX_STEPS,
        .max_call_depth = MAX_CALL_DEPTH,
    };
    /* String work may copy the live budget a few times over, but not without
     * bound: this caps the CPU time a template can spend building strings. */
    lim.max_work_bytes = (uint64_t)lim.max_live_bytes * 4;
    jrender r = {.lim = &lim, .err = err, .status = TW_OK,
                 .fixed_now = opts ? opts->now : 0};
    jv varsv;
    bool ok;
    if (vars)
        ok = jv_from_json(&r, vars, &varsv, 0);
    else
        ok = jv_new_dict(&r, NULL, &varsv);
    if (!ok) {
        jv_decref(&r, varsv);
        return r.status;
    }
    r.vars = jv_dict_of(varsv);
    jbuf b = {0};
    ok = jeval_template(&r, t->root, &b);
    jv_decref(&r, varsv);
    if (!ok) {
        jbuf_release(&r, &b);
        return r.status != TW_OK ? r.status
                                 : tw_errorf(err, TW_INTERNAL, "chat template: render failed");
    }
    if (!b.data) {
        b.data = malloc(1);
        if (!b.data)
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "chat template: out of memory");
        b.data[0] = '\0';
    }
    *out = b.data;
    if (len)
        *len = b.len;
    return TW_OK;
}

static bool has(const char *src, size_t len, const char *needle)
{
    return memmem(src, len, needle, strlen(needle)) != NULL;
}

tw_chat_family tw_chat_template_family(const char *src, size_t len)
{
    if (!src)
        return TW_CHAT_FAMILY_UNKNOWN;
    if (has(src, len, "<|im_start|>")) {
        if (has(src, len, "<think>") || has(src, len, "enable_thinking") ||
            has(src, len, "reasoning_content"))
            return TW_CHAT_FAMILY_QWEN3;
        if (has(src, len, "You are Qwen") || has(src, len, "<tool_call>"))
            return TW_CHAT_FAMILY_QWEN25;
        return TW_CHAT_FAMILY_CHATML;
    }
    if (has(src, len, "<|start_header_id|>"))
        return TW_CHAT_FAMILY_LLAMA3;
    if (has(src, len, "<start_of_turn>"))
        return TW_CHAT_FAMILY_GEMMA;
    if (has(src, len, "[INST]"))
        return TW_CHAT_FAMILY_MISTRAL;
    return TW_CHAT_FAMILY_UNKNOWN;
}

const char *tw_chat_family_name(tw_chat_family family)
{
    switch (family) {
    case TW_CHAT_FAMILY_CHATML: return "chatml";
    case TW_CHAT_FAMILY_QWEN25: return "qwen2.5";
    case TW_CHAT_FAMILY_QWEN3: return "qwen3";
    case TW_CHAT_FAMILY_LLAMA3: return "llama3";
    case TW_CHAT_FAMILY_MISTRAL: return "mistral";
    case TW_CHAT_FAMILY_GEMMA: return "gemma";
    case TW_CHAT_FAMILY_UNKNOWN: break;
    }
    return "unknown";
}

const char *tw_chat_template_chatml(void)
{
    return "{%- for message in messages -%}\n"
           "{{- '<|im_start|>' ~ message['role'] ~ '\\n' -}}\n"
           "{%- if message['content'] is string -%}\n"
           "{{- message['content'] -}}\n"
           "{%- elif message['content'] is iterable and message['content'] is not mapping -%}\n"
           "{%- for part in message['content'] -%}\n"
           "{%- if part is mapping and part['type'] == 'text' -%}{{- part['text'] -}}{%- endif -%}\n"
           "{%- endfor -%}\n"
           "{%- endif -%}\n"
           "{{- '<|im_end|>\\n' -}}\n"
           "{%- endfor -%}\n"
           "{%- if add_generation_prompt -%}\n"
           "{{- '<|im_start|>assistant\\n' -}}\n"
           "{%- endif -%}\n";
}
