/* Chat templates: turn a conversation into the prompt text a model was
 * trained on by running the model's own Jinja chat template.
 *
 * The interpreter renders what Hugging Face's apply_chat_template renders
 * (Jinja2 sandbox, trim_blocks, lstrip_blocks, loop controls, tojson with
 * ensure_ascii=False and unsorted keys), so a template shipped with a new
 * model works without code changes. Templates and variables are treated as
 * hostile: every failure is a status with a message (naming line and column
 * for template errors), and work, memory, output and nesting are bounded.
 */
#ifndef TW_CHAT_TEMPLATE_H
#define TW_CHAT_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "tw/status.h"

typedef struct tw_chat_template tw_chat_template;

/* Largest template source accepted by tw_chat_template_compile. */
#define TW_CHAT_TEMPLATE_MAX_SOURCE (1u << 20)

/* Parses template text (UTF-8, need not be NUL-terminated) into *out.
 * Fails with TW_INVALID_ARGUMENT and "chat template line L, column C: ..."
 * for syntax errors, TW_RESOURCE_EXHAUSTED for oversized sources. The
 * caller owns *out and frees it with tw_chat_template_free. The result is
 * immutable: any number of threads may render it at once. */
tw_status tw_chat_template_compile(const char *src, size_t len, tw_chat_template **out,
                                   tw_err *err);

/* Limits and the clock of one render; zero fields take the defaults. */
typedef struct tw_chat_render_opts {
    size_t max_output;   /* bytes of prompt text; default 16 MiB */
    size_t max_memory;   /* bytes alive during the render; default 256 MiB */
    uint64_t max_steps;  /* loop iterations, filter items and calls; default 4 Mi */
    time_t now;          /* strftime_now() reads this instant (as UTC) when non-zero,
                            else the local wall clock */
} tw_chat_render_opts;

/* Renders t with the variables in vars, a JSON object such as
 * {"messages": [...], "tools": [...], "add_generation_prompt": true,
 *  "enable_thinking": false, "bos_token": "<s>", "eos_token": "</s>"}
 * (any key becomes a template variable). vars is only read, never kept.
 * On success *out is a malloc'd NUL-terminated string the caller frees and
 * *len its length. When the template refuses the conversation through
 * raise_exception(msg), returns TW_INVALID_ARGUMENT with err holding exactly
 * msg; other template errors carry "chat template line L, column C: ...";
 * exceeded limits return TW_RESOURCE_EXHAUSTED. Thread-safe; blocks only for
 * the CPU time of the render. */
tw_status tw_chat_template_render(const tw_chat_template *t, const json_t *vars, char **out,
                                  size_t *len, tw_err *err);

/* tw_chat_template_render with explicit limits and clock (opts may be NULL). */
tw_status tw_chat_template_render_ex(const tw_chat_template *t, const json_t *vars,
                                     const tw_chat_render_opts *opts, char **out, size_t *len,
                                     tw_err *err);

/* Frees a compiled template (NULL is allowed). No render may be running. */
void tw_chat_template_free(tw_chat_template *t);

/* Template families, recognised from the markers a template emits. */
typedef enum tw_chat_family {
    TW_CHAT_FAMILY_UNKNOWN = 0,
    TW_CHAT_FAMILY_CHATML,  /* <|im_start|> without Qwen specifics */
    TW_CHAT_FAMILY_QWEN25,  /* ChatML + Qwen's default system prompt / tool calls */
    TW_CHAT_FAMILY_QWEN3,   /* ChatML + <think> reasoning blocks */
    TW_CHAT_FAMILY_LLAMA3,  /* <|start_header_id|> */
    TW_CHAT_FAMILY_MISTRAL, /* [INST] */
    TW_CHAT_FAMILY_GEMMA,   /* <start_of_turn> */
} tw_chat_family;

/* Recognises the family of template source src (len bytes). Pure function. */
tw_chat_family tw_chat_template_family(const char *src, size_t len);

/* "chatml", "qwen2.5", "qwen3", "llama3", "mistral", "gemma" or "unknown". */
const char *tw_chat_family_name(tw_chat_family family);

/* Source of the built-in ChatML template, for models that ship no template
 * or one that fails to compile (the caller should log a warning when it falls
 * back). Static storage; compiles with tw_chat_template_compile. It renders
 * string contents and the text parts of list contents, and honours
 * add_generation_prompt. */
const char *tw_chat_template_chatml(void);

#endif
