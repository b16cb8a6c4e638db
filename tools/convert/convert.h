/* Internal interface of the tw-convert tool. */
#ifndef TW_TOOLS_CONVERT_H
#define TW_TOOLS_CONVERT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "tw/gguf.h"
#include "tw/status.h"

/* llama.cpp's token types (tokenizer.ggml.token_type). */
enum { TWC_TOK_NORMAL = 1, TWC_TOK_CONTROL = 3, TWC_TOK_USER_DEFINED = 4, TWC_TOK_UNUSED = 5 };

/* Writes tokenizer.ggml.* (and tokenizer.chat_template) from dir's
 * tokenizer.json / tokenizer_config.json when tokenizer.json exists; the
 * token table is padded to vocab_size entries. *written tells whether a
 * vocabulary was found. pre_override replaces the guessed pre-tokenizer
 * name when not NULL. */
tw_status twc_write_vocab(const char *dir, const json_t *config, uint64_t vocab_size,
                          const char *pre_override, tw_gguf_writer *w, bool *written,
                          tw_err *err);

/* A WordPiece tokenizer.json (already parsed, with tokenizer_config.json
 * when dir has one, else NULL) as a "bert" vocabulary: tokens in llama.cpp's
 * phantom-space form and the ids of [CLS], [SEP] and the other specials.
 * A tokenizer a GGUF "bert" vocabulary cannot describe is refused with a
 * message naming what it lacks. */
tw_status twc_write_vocab_wordpiece(const char *dir, const json_t *tok, const json_t *tcfg,
                                    const json_t *config, uint64_t vocab_size,
                                    const char *pre_override, tw_gguf_writer *w, tw_err *err);

/* "<|...|>", "<pad>", "<mask>": control tokens even when an added token is
 * not marked special (llama.cpp's rule). */
bool twc_looks_special(const char *s);

/* Token text of tokenizer_config's bos_token etc. (a string or an
 * AddedToken object); NULL otherwise. */
const char *twc_special_text(const json_t *v);

#endif
