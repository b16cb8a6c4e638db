/* The tokenizer.json components parsed outside hf_source.c, which
 * dispatches to them by "type". */
#ifndef TW_HF_INTERNAL_H
#define TW_HF_INTERNAL_H

#include <jansson.h>

#include "tok_internal.h"

/* An optional boolean member of obj: absent or null keeps *out; another
 * type is an error naming where.key. */
tw_status tok_hf_bool(json_t *obj, const char *key, bool *out, const char *where, tw_err *err);

/* model.type "WordPiece", after the vocabulary and added tokens are in:
 * unk_token, continuing_subword_prefix, max_input_chars_per_word. */
tw_status tok_hf_wordpiece_model(tw_tokenizer *tok, json_t *model, tw_err *err);
/* normalizer "BertNormalizer". */
tw_status tok_hf_bert_normalizer(tw_tokenizer *tok, json_t *n, tw_err *err);
/* decoder "WordPiece". */
tw_status tok_hf_wordpiece_decoder(tw_tokenizer *tok, json_t *n, tw_err *err);
/* post_processor "BertProcessing" or "RobertaProcessing" (type names
 * which): cls becomes the BOS and sep the EOS to add. */
tw_status tok_hf_bert_post(tw_tokenizer *tok, json_t *pp, const char *type, tw_err *err);

#endif
