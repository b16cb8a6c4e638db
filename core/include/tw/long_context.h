/* The long-context thinking rule.
 *
 * A request that brings a long context (a system prompt, a document, an
 * earlier conversation) and then asks a short question tends to get a
 * better answer when the model reasons first: the answer has to be found
 * and put together from far-away parts of the context. So when the caller
 * left thinking unset (TW_THINK_DEFAULT), such a request renders its chat
 * template with thinking on. A caller that chose on or off keeps its choice.
 *
 * Lengths are counted in Unicode code points (approximately for invalid
 * UTF-8), so the thresholds mean the same in every script.
 *
 * Question-like: after trimming white space, the question ends with a
 * question mark (ASCII '?', full-width U+FF1F, Arabic U+061F, Greek U+037E),
 * starts with an inverted one (U+00BF), or starts with a question word or
 * an auxiliary verb that opens a question, in English, French, German,
 * Spanish, Italian, Portuguese, Dutch, Russian, Chinese, Japanese or Korean
 * (case-insensitive).
 *
 * Everything here is a pure function of its arguments and thread-safe.
 */
#ifndef TW_LONG_CONTEXT_H
#define TW_LONG_CONTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/engine.h"
#include "tw/thinking.h"

#define TW_LONG_CONTEXT_DEFAULT_CHARS 3000u
#define TW_SHORT_QUESTION_DEFAULT_CHARS 200u

/* The rule's settings; start from tw_long_context_rule_init(). */
typedef struct tw_long_context_rule {
    bool enabled;            /* default true */
    uint32_t context_chars;  /* the context is long above this (default 3000) */
    uint32_t question_chars; /* the question is short below this (default 200) */
} tw_long_context_rule;

void tw_long_context_rule_init(tw_long_context_rule *r);

/* Unicode code points in text[0, len): the bytes that do not continue a
 * UTF-8 sequence. */
size_t tw_text_chars(const char *text, size_t len);

/* True when text[0, len) reads as a question (the rules above). */
bool tw_text_is_question(const char *text, size_t len);

/* The thinking mode a request runs with: `requested` unless it is
 * TW_THINK_DEFAULT, the rule is enabled, context_chars is above the
 * threshold and the question is shorter than its threshold and
 * question-like, in which case TW_THINK_ON. rule NULL: the defaults. */
tw_think_mode tw_long_context_decide(const tw_long_context_rule *rule, tw_think_mode requested,
                                     size_t context_chars, const char *question,
                                     size_t question_len);

/* Splits a user message into context and question: the question is its
 * last paragraph (after the last blank line that has text after it) and
 * everything before is context; a single paragraph is all question. Sets
 * *question_off (where the question starts in text) and returns the
 * context's code points. */
size_t tw_long_context_split(const char *text, size_t len, size_t *question_off);

/* The rule applied to a conversation: the question is the last paragraph
 * of the last user message, the context everything before it (every other
 * message's content and reasoning, and the earlier paragraphs of that
 * message). A conversation without a user message keeps `requested`. */
tw_think_mode tw_long_context_decide_chat(const tw_long_context_rule *rule,
                                          tw_think_mode requested,
                                          const tw_chat_message *messages, size_t n_messages);

#endif
