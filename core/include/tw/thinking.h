/* The thinking controller of reasoning models (<think> ... </think>).
 *
 * It follows a sequence token by token and says, for each token, whether it
 * is reasoning, answer content, or one of the two tags (which belong to
 * neither text). It enforces a budget of reasoning tokens and watches the
 * thinking block for repetition loops; in both cases it asks the caller to
 * close the block by feeding forced tokens (</think> plus a transition) in
 * place of sampled ones, so the answer still comes.
 *
 * Loop rules, applied to reasoning tokens only:
 *   n-gram: the last ngram_n tokens already occurred, as the same n tokens,
 *           at least ngram_repeats - 1 more times among the last ngram_window
 *           reasoning tokens (occurrences may overlap: a run of one token
 *           repeated is a loop too);
 *   block:  the last block_len tokens occurred block_repeats times in total
 *           anywhere in the thinking block (catches long passages repeated
 *           verbatim with other text between them).
 * The transition injected on a loop depends on what the prompt asks for
 * (tw_thinking_classify_prompt); a budget close injects the plain one.
 *
 * A tw_thinking belongs to one sequence; not thread-safe. tw_thinking_step
 * allocates nothing.
 */
#ifndef TW_THINKING_H
#define TW_THINKING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/status.h"

#define TW_THINKING_DEFAULT_BUDGET 32768u

/* Whether a request lets the model think. */
typedef enum tw_think_mode {
    TW_THINK_DEFAULT = 0, /* the model's (template's) own default */
    TW_THINK_ON = 1,
    TW_THINK_OFF = 2,
} tw_think_mode;

/* Thinking options of a request; start from tw_thinking_opts_init(). */
typedef struct tw_thinking_opts {
    tw_think_mode enable_thinking;
    uint32_t max_thinking_tokens; /* default 32768 */
    bool loop_detection;          /* default true */
    bool separate_reasoning;      /* default true; false keeps the tags in the content */
    /* Loop detector tuning (defaults: 6, 3, 64, 30, 4). */
    uint32_t ngram_n;
    uint32_t ngram_repeats;
    uint32_t ngram_window;
    uint32_t block_len;
    uint32_t block_repeats;
} tw_thinking_opts;

void tw_thinking_opts_init(tw_thinking_opts *o);

/* Ranges: budget >= 1; ngram_n 1..64, ngram_repeats 2..64, ngram_window
 * ngram_n..4096, block_len 2..1024, block_repeats 2..64. */
tw_status tw_thinking_opts_validate(const tw_thinking_opts *o, tw_err *err);

/* What the answer should look like after a forced close. */
typedef enum tw_transition_kind {
    TW_TRANSITION_PLAIN = 0,
    TW_TRANSITION_JSON = 1,
    TW_TRANSITION_CODE = 2,
    TW_TRANSITION_TRANSLATION = 3,
    TW_TRANSITION_MATH = 4,
    TW_TRANSITION_COUNT
} tw_transition_kind;

/* "plain", "json", "code", "translation", "math". */
const char *tw_transition_kind_name(tw_transition_kind k);

/* The text injected right after </think> for kind k, e.g. for JSON
 * "\n\n**Final JSON:**\n\n```json\n". Static storage. */
const char *tw_transition_text(tw_transition_kind k);

/* Guesses the kind from the prompt (the last user message, or the prompt
 * text): JSON output asked for, then translation, code, math; else plain.
 * Case-insensitive keyword rules; thread-safe. */
tw_transition_kind tw_thinking_classify_prompt(const char *text, size_t len);

/* Role of one token in the output. */
typedef enum tw_token_role {
    TW_ROLE_CONTENT = 0,
    TW_ROLE_REASONING = 1,
    TW_ROLE_THINK_OPEN = 2,  /* the <think> tag itself */
    TW_ROLE_THINK_CLOSE = 3, /* the </think> tag itself */
} tw_token_role;

/* Why the controller wants the block closed. */
typedef enum tw_force_close {
    TW_FORCE_NONE = 0,
    TW_FORCE_BUDGET = 1,
    TW_FORCE_LOOP = 2,
} tw_force_close;

typedef struct tw_thinking tw_thinking;

/* A controller for tags open_id / close_id. max_block_tokens bounds the
 * block detector's table (the caller passes min(budget, context)). *out is
 * owned by the caller (tw_thinking_destroy). */
tw_status tw_thinking_create(const tw_thinking_opts *o, uint32_t open_id, uint32_t close_id,
                             uint32_t max_block_tokens, tw_thinking **out, tw_err *err);

void tw_thinking_destroy(tw_thinking *t);

/* Starts a new sequence. inside is true when the prompt leaves a thinking
 * block open (templates that end the generation prompt with "<think>\n");
 * tw_thinking_prompt_state computes it. */
void tw_thinking_reset(tw_thinking *t, bool inside);

/* True when the last <think> in ids[0..n) is not followed by </think>. */
bool tw_thinking_prompt_state(const uint32_t *ids, size_t n, uint32_t open_id,
                              uint32_t close_id);

/* Classifies a generated (or forced) token and updates the counters and the
 * loop detector. Returns the role; *force (may be NULL) is set when the block
 * must be closed before the next sampled token: the caller then feeds
 * close_id and the transition tokens, through this function too. */
tw_token_role tw_thinking_step(tw_thinking *t, uint32_t token, tw_force_close *force);

/* True while inside the thinking block. */
bool tw_thinking_inside(const tw_thinking *t);

/* Reasoning tokens so far (tags excluded). */
uint32_t tw_thinking_reasoning_tokens(const tw_thinking *t);

/* How the block was closed by force, or TW_FORCE_NONE. */
tw_force_close tw_thinking_forced(const tw_thinking *t);

/* Splits a whole response: reasoning is the text between the first "<think>"
 * (or the start, when starts_inside) and the following "</think>"; content is
 * the rest, tags removed; an unclosed block makes everything after the tag
 * reasoning. Offsets point into text; content may be two pieces (before the
 * block and after it), so both ranges are returned. */
typedef struct tw_think_split {
    size_t reasoning_off, reasoning_len;
    size_t pre_off, pre_len;   /* content before <think> */
    size_t post_off, post_len; /* content after </think> */
} tw_think_split;

void tw_thinking_split_text(const char *text, size_t len, bool starts_inside,
                            tw_think_split *out);

#endif
