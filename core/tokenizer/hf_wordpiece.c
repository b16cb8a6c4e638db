/* The BERT family's parts of a Hugging Face tokenizer.json: the WordPiece
 * model, BertNormalizer, the WordPiece decoder and the BERT / RoBERTa
 * post-processors. Defaults are tokenizers' own, so a field that a file
 * leaves out means what it means to Hugging Face; a field present with
 * the wrong type or an unusable value is refused with its name. */
#include <stdlib.h>
#include <string.h>

#include "hf_internal.h"

/* A continuing-subword prefix into dst (TOK_WP_MAX_PREFIX + 1 bytes);
 * absent or null keeps dst. */
static tw_status opt_prefix(json_t *obj, const char *key, const char *where, char *dst, size_t *len,
                            tw_err *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return TW_OK;
    if (!json_is_string(v))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s.%s must be a string", where, key);
    size_t n = json_string_length(v);
    if (n > TOK_WP_MAX_PREFIX)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s.%s is %zu bytes long (at most %d)", where,
                         key, n, TOK_WP_MAX_PREFIX);
    memcpy(dst, json_string_value(v), n);
    dst[n] = '\0';
    *len = n;
    return TW_OK;
}

static bool in_model(const tw_tokenizer *tok, uint32_t id)
{
    return (tok->wp_in_model[id / 8] >> (id % 8)) & 1;
}

tw_status tok_hf_wordpiece_model(tw_tokenizer *tok, json_t *model, tw_err *err)
{
    tok->kind = TW_TOKENIZER_WORDPIECE;
    memcpy(tok->wp_prefix, "##", 3);
    tok->wp_prefix_len = 2;
    tok->wp_max_chars = 100;
    tw_status st = opt_prefix(model, "continuing_subword_prefix", "model", tok->wp_prefix,
                              &tok->wp_prefix_len, err);
    if (st != TW_OK)
        return st;
    json_t *mc = json_object_get(model, "max_input_chars_per_word");
    if (mc && !json_is_null(mc)) {
        if (!json_is_integer(mc) || json_integer_value(mc) < 1 ||
            json_integer_value(mc) > (json_int_t)TOK_WP_MAX_CHARS)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "model.max_input_chars_per_word must be an integer in 1..%u",
                             TOK_WP_MAX_CHARS);
        tok->wp_max_chars = (size_t)json_integer_value(mc);
    }

    /* parse_vocab has checked every id, so they index the vocabulary. */
    tok->wp_in_model = calloc(tok->vocab.n / 8 + 1, 1);
    if (!tok->wp_in_model)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    json_t *vocab = json_object_get(model, "vocab");
    for (void *it = json_object_iter(vocab); it; it = json_object_iter_next(vocab, it)) {
        uint32_t id = (uint32_t)json_integer_value(json_object_iter_value(it));
        tok->wp_in_model[id / 8] |= (uint8_t)(1u << (id % 8));
        size_t len = strlen(json_object_iter_key(it));
        if (len > tok->wp_max_len)
            tok->wp_max_len = len;
    }

    json_t *unk = json_object_get(model, "unk_token");
    const char *name = "[UNK]";
    size_t name_len = 5;
    if (unk && !json_is_null(unk)) {
        if (!json_is_string(unk))
            return tw_errorf(err, TW_INVALID_ARGUMENT, "model.unk_token must be a string");
        name = json_string_value(unk);
        name_len = json_string_length(unk);
    }
    /* Hugging Face looks the unk up when a word first needs it and fails
     * the encode then; refusing the file up front fails no request. */
    uint32_t id;
    if (!tok_vocab_find(&tok->vocab, name, name_len, &id) || !in_model(tok, id))
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "model.unk_token \"%.64s\" is not in model.vocab", name);
    tok->wp_unk = tok->unk = id;
    if (tok->vocab.type[id] == TW_TOKEN_NORMAL)
        tok->vocab.type[id] = TW_TOKEN_UNKNOWN;
    return TW_OK;
}

tw_status tok_hf_bert_normalizer(tw_tokenizer *tok, json_t *n, tw_err *err)
{
    if (tok->n_norm >= TOK_MAX_STEPS)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "more than %d normalizer steps", TOK_MAX_STEPS);
    tok_norm nm = {.kind = NORM_BERT, .clean = true, .cjk = true, .lower = true};
    tw_status st;
    if ((st = tok_hf_bool(n, "clean_text", &nm.clean, "BertNormalizer", err)) != TW_OK ||
        (st = tok_hf_bool(n, "handle_chinese_chars", &nm.cjk, "BertNormalizer", err)) != TW_OK ||
        (st = tok_hf_bool(n, "lowercase", &nm.lower, "BertNormalizer", err)) != TW_OK)
        return st;
    /* null: accents go exactly when case goes, as in BERT's uncased models */
    nm.accents = nm.lower;
    if ((st = tok_hf_bool(n, "strip_accents", &nm.accents, "BertNormalizer", err)) != TW_OK)
        return st;
    tok->norm[tok->n_norm++] = nm;
    return TW_OK;
}

tw_status tok_hf_wordpiece_decoder(tw_tokenizer *tok, json_t *n, tw_err *err)
{
    if (tok->dec_wordpiece)
        return tw_errorf(err, TW_UNIMPLEMENTED, "decoder WordPiece given twice");
    memcpy(tok->dec_wp_prefix, "##", 3);
    tok->dec_wp_prefix_len = 2;
    tok->dec_wp_cleanup = true;
    tw_status st = opt_prefix(n, "prefix", "decoder WordPiece", tok->dec_wp_prefix,
                              &tok->dec_wp_prefix_len, err);
    if (st == TW_OK)
        st = tok_hf_bool(n, "cleanup", &tok->dec_wp_cleanup, "decoder WordPiece", err);
    if (st == TW_OK)
        tok->dec_wordpiece = true;
    return st;
}

/* [token, id]: Hugging Face adds the id as written, so that is what counts;
 * it must at least name a slot of the vocabulary. */
static tw_status special_pair(const tw_tokenizer *tok, json_t *pp, const char *type,
                              const char *key, uint32_t *id, tw_err *err)
{
    json_t *v = json_object_get(pp, key);
    json_t *num = json_array_get(v, 1);
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_string(json_array_get(v, 0)) ||
        !json_is_integer(num))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "post_processor %s.%s must be [token, id]", type,
                         key);
    if (json_integer_value(num) < 0 || json_integer_value(num) >= (json_int_t)tok->vocab.n)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "post_processor %s.%s id %lld is outside the vocabulary (%u tokens)", type,
                         key, (long long)json_integer_value(num), tok->vocab.n);
    *id = (uint32_t)json_integer_value(num);
    return TW_OK;
}

tw_status tok_hf_bert_post(tw_tokenizer *tok, json_t *pp, const char *type, tw_err *err)
{
    uint32_t cls = 0, sep = 0;
    tw_status st = special_pair(tok, pp, type, "cls", &cls, err);
    if (st == TW_OK)
        st = special_pair(tok, pp, type, "sep", &sep, err);
    if (st != TW_OK)
        return st;
    tok->bos = cls;
    tok->add_bos = true;
    if (tok->eos == TW_TOKEN_NONE)
        tok->eos = sep;
    tok->add_eos = true;
    return TW_OK;
}
