/* Internal interface of the tw-convert tool. */
#ifndef TW_TOOLS_CONVERT_H
#define TW_TOOLS_CONVERT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "tw/gguf.h"
#include "tw/status.h"

/* Writes tokenizer.ggml.* (and tokenizer.chat_template) from dir's
 * tokenizer.json / tokenizer_config.json when tokenizer.json exists; the
 * token table is padded to vocab_size entries. *written tells whether a
 * vocabulary was found. pre_override replaces the guessed pre-tokenizer
 * name when not NULL. */
tw_status twc_write_vocab(const char *dir, const json_t *config, uint64_t vocab_size,
                          const char *pre_override, tw_gguf_writer *w, bool *written,
                          tw_err *err);

#endif
