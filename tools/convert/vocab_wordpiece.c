/* A WordPiece tokenizer.json -> a GGUF "bert" vocabulary, as llama.cpp's
 * converter writes one (BertModel.set_vocab with gguf-py's SpecialVocab):
 *
 *  - tokenizer.ggml.model "bert";
 *  - the token list in "phantom space" form: a piece that starts a word
 *    gets a leading U+2581, a "##" continuation loses its "##", control
 *    tokens ([CLS], [SEP], ...) stay as they are. llama.cpp puts U+2581
 *    before every word and matches it against this list;
 *  - the ids of [UNK], [SEP], [PAD], [CLS] and [MASK] under SpecialVocab's
 *    keys, [CLS] also as BOS and [SEP] as EOS, which is what llama.cpp adds
 *    around a text;
 *  - tokenizer.ggml.normalizer.lowercase and .strip_accents, the two
 *    BertNormalizer switches llama.cpp reads (both on when absent), written
 *    always so that a cased model stays cased.
 *
 * Everything else about a "bert" vocabulary is fixed: the text is cleaned,
 * CJK characters are spaced, words split at whitespace and punctuation,
 * "##" continues a word, [CLS] ... [SEP] surround a sequence. A
 * tokenizer.json that does anything else is refused: the file could not say
 * so, and both llama.cpp and tokenwire would tokenize it differently from
 * the model's own tokenizer. */
#include "convert.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define META   "\xe2\x96\x81"
#define KEY(k) "tokenizer.ggml." k

/* What the checks find, to be written. */
typedef struct wp_spec {
    bool lower, accents;
    uint32_t cls, sep;
} wp_spec;

/* The vocabulary as tokenizer.json spells it, padded to the model's size. */
typedef struct wp_table {
    uint64_t n;
    const char **text; /* NULL: no entry names the id */
    int32_t *type;
} wp_table;

static tw_status refuse(tw_err *err, const char *dir, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return tw_errorf(err, TW_UNIMPLEMENTED,
                     "%s/tokenizer.json: %s, which a GGUF \"bert\" vocabulary cannot record "
                     "(llama.cpp reads every one as BERT's own tokenizer)",
                     dir, what);
}

/* Absent or null keeps *out; anything but a boolean is an error. */
static tw_status opt_bool(const char *dir, const json_t *obj, const char *where, const char *key,
                          bool *out, tw_err *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return TW_OK;
    if (!json_is_boolean(v))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s/tokenizer.json: %s.%s must be a boolean",
                         dir, where, key);
    *out = json_is_true(v);
    return TW_OK;
}

static const char *type_of(const json_t *obj)
{
    const char *t = json_string_value(json_object_get(obj, "type"));
    return t ? t : obj && !json_is_null(obj) ? "untyped" : "none";
}

/* A string member that, when present, must be exactly want. */
static bool absent_or(const json_t *obj, const char *key, const char *want)
{
    const json_t *v = json_object_get(obj, key);
    return !v || json_is_null(v) || (json_is_string(v) && strcmp(json_string_value(v), want) == 0);
}

static tw_status check_model(const char *dir, const json_t *model, tw_err *err)
{
    if (!absent_or(model, "continuing_subword_prefix", "##"))
        return refuse(err, dir, "model.continuing_subword_prefix is not \"##\"");
    /* llama.cpp has no such limit; 100 is what every BERT uses and what
     * tokenwire assumes reading the file back. */
    const json_t *mc = json_object_get(model, "max_input_chars_per_word");
    if (mc && !json_is_null(mc) && (!json_is_integer(mc) || json_integer_value(mc) != 100))
        return refuse(err, dir, "model.max_input_chars_per_word is not 100");
    const json_t *unk = json_object_get(model, "unk_token");
    if (unk && !json_is_null(unk) && !json_is_string(unk))
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "%s/tokenizer.json: model.unk_token must be a string", dir);
    return TW_OK;
}

static tw_status check_normalizer(const char *dir, const json_t *n, wp_spec *spec, tw_err *err)
{
    const char *type = type_of(n);
    if (strcmp(type, "BertNormalizer") != 0)
        return refuse(err, dir, "the normalizer is %s, not BertNormalizer", type);
    bool clean = true, cjk = true;
    spec->lower = true;
    tw_status st;
    if ((st = opt_bool(dir, n, "BertNormalizer", "clean_text", &clean, err)) ||
        (st = opt_bool(dir, n, "BertNormalizer", "handle_chinese_chars", &cjk, err)) ||
        (st = opt_bool(dir, n, "BertNormalizer", "lowercase", &spec->lower, err)))
        return st;
    /* null: accents go when case goes, as in Hugging Face and llama.cpp */
    spec->accents = spec->lower;
    if ((st = opt_bool(dir, n, "BertNormalizer", "strip_accents", &spec->accents, err)))
        return st;
    if (!clean)
        return refuse(err, dir, "BertNormalizer.clean_text is false");
    if (!cjk)
        return refuse(err, dir, "BertNormalizer.handle_chinese_chars is false");
    return TW_OK;
}

static tw_status check_decoder(const char *dir, const json_t *d, tw_err *err)
{
    bool cleanup = true;
    if (strcmp(type_of(d), "WordPiece") != 0)
        return refuse(err, dir, "the decoder is %s, not WordPiece", type_of(d));
    tw_status st = opt_bool(dir, d, "decoder", "cleanup", &cleanup, err);
    if (st)
        return st;
    if (!absent_or(d, "prefix", "##") || !cleanup)
        return refuse(err, dir,
                      "the WordPiece decoder has another prefix than \"##\" or no cleanup");
    return TW_OK;
}

/* An id the post-processor adds; it must name a slot of the vocabulary. */
static tw_status post_id(const char *dir, const json_t *v, const char *what, uint64_t n,
                         uint32_t *id, tw_err *err)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) >= n)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "%s/tokenizer.json: post_processor's %s is not an id below the "
                         "vocabulary size %llu",
                         dir, what, (unsigned long long)n);
    *id = (uint32_t)json_integer_value(v);
    return TW_OK;
}

/* TemplateProcessing's single template, [SpecialToken] $A [SpecialToken]:
 * the special token's single id. */
static tw_status template_id(const char *dir, const json_t *pp, const json_t *piece,
                             const char *what, uint64_t n, uint32_t *id, tw_err *err)
{
    const char *name =
        json_string_value(json_object_get(json_object_get(piece, "SpecialToken"), "id"));
    const json_t *ids = json_object_get(
        json_object_get(json_object_get(pp, "special_tokens"), name ? name : ""), "ids");
    if (!name || json_array_size(ids) != 1)
        return refuse(err, dir,
                      "the post-processor's single template does not start and end with one "
                      "special token each");
    return post_id(dir, json_array_get(ids, 0), what, n, id, err);
}

static tw_status check_post(const char *dir, const json_t *pp, uint64_t n, wp_spec *spec,
                            tw_err *err)
{
    const char *type = type_of(pp);
    if (strcmp(type, "BertProcessing") == 0) {
        const json_t *cls = json_object_get(pp, "cls"), *sep = json_object_get(pp, "sep");
        tw_status st = post_id(dir, json_array_get(cls, 1), "cls", n, &spec->cls, err);
        return st ? st : post_id(dir, json_array_get(sep, 1), "sep", n, &spec->sep, err);
    }
    if (strcmp(type, "TemplateProcessing") != 0)
        return refuse(err, dir, "the post-processor is %s, not one adding [CLS] ... [SEP]", type);
    const json_t *single = json_object_get(pp, "single");
    const char *seq = json_string_value(
        json_object_get(json_object_get(json_array_get(single, 1), "Sequence"), "id"));
    if (json_array_size(single) != 3 || !seq || strcmp(seq, "A") != 0)
        return refuse(err, dir, "the post-processor's single template is not [CLS] $A [SEP]");
    tw_status st =
        template_id(dir, pp, json_array_get(single, 0), "first token", n, &spec->cls, err);
    return st ? st
              : template_id(dir, pp, json_array_get(single, 2), "last token", n, &spec->sep, err);
}

/* The table get_vocab_base builds: model.vocab normal, added tokens control
 * (special, or special-looking) or user-defined, unnamed ids unused. */
static tw_status build_table(const char *dir, const json_t *tok, uint64_t n, wp_table *t,
                             tw_err *err)
{
    const json_t *vocab = json_object_get(json_object_get(tok, "model"), "vocab");
    if (!json_is_object(vocab))
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "%s/tokenizer.json: model.vocab must be an object", dir);
    t->n = n;
    t->text = calloc(n ? n : 1, sizeof *t->text);
    t->type = calloc(n ? n : 1, sizeof *t->type);
    if (!t->text || !t->type)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)vocab, k, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            (uint64_t)json_integer_value(v) >= n)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "%s/tokenizer.json: token '%s' has id %lld outside the model's "
                             "vocabulary of %llu",
                             dir, k, (long long)json_integer_value(v), (unsigned long long)n);
        t->text[json_integer_value(v)] = k;
        t->type[json_integer_value(v)] = TWC_TOK_NORMAL;
    }
    size_t i;
    const json_t *a;
    json_array_foreach(json_object_get(tok, "added_tokens"), i, a)
    {
        const json_t *idv = json_object_get(a, "id");
        const char *content = json_string_value(json_object_get(a, "content"));
        if (!json_is_integer(idv) || !content || json_integer_value(idv) < 0 ||
            (uint64_t)json_integer_value(idv) >= n)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "%s/tokenizer.json: added token %zu has a bad id or content", dir, i);
        uint64_t id = (uint64_t)json_integer_value(idv);
        t->text[id] = content;
        t->type[id] = json_is_true(json_object_get(a, "special")) || twc_looks_special(content)
                          ? TWC_TOK_CONTROL
                          : TWC_TOK_USER_DEFINED;
    }
    for (uint64_t id = 0; id < n; id++)
        if (!t->text[id])
            t->type[id] = TWC_TOK_UNUSED;
    return TW_OK;
}

static int64_t find_text(const wp_table *t, const char *s)
{
    for (uint64_t id = 0; s && id < t->n; id++)
        if (t->text[id] && strcmp(t->text[id], s) == 0)
            return (int64_t)id;
    return -1;
}

/* The token list in phantom-space form. Two tokens that come out the same
 * would make llama.cpp refuse the file, and an empty one ("##" alone) is
 * renamed by it, so both are refused here; so is a continuation that comes
 * out as a word start ("##▁x" as "▁x", read back as "x"). */
static tw_status phantom_tokens(const char *dir, const wp_table *t, tw_gguf_warr **out, tw_err *err)
{
    size_t longest = 0;
    for (uint64_t id = 0; id < t->n; id++)
        if (t->text[id] && strlen(t->text[id]) > longest)
            longest = strlen(t->text[id]);
    char *buf = malloc(longest + 32);
    json_t *seen = json_object();
    tw_gguf_warr *arr = NULL;
    tw_status st = buf && seen ? tw_gguf_warr_new(TW_GGUF_STRING, &arr, err)
                               : tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    for (uint64_t id = 0; id < t->n && !st; id++) {
        const char *s = t->text[id];
        if (!s) {
            snprintf(buf, longest + 32, "[PAD%llu]", (unsigned long long)id);
            s = buf;
        }
        const char *p = s;
        if (t->type[id] == TWC_TOK_CONTROL) {
            /* never a piece of a word, so never behind U+2581 */
        } else if (strncmp(s, "##", 2) == 0) {
            p = s + 2;
            if (strncmp(p, META, 3) == 0 && p[3] != '\0') {
                st = tw_errorf(err, TW_INVALID_ARGUMENT,
                               "%s/tokenizer.json: token %llu \"%s\" would read as the word start "
                               "\"%s\" in llama.cpp's phantom-space form",
                               dir, (unsigned long long)id, s, p + 3);
                break;
            }
        } else {
            size_t len = strlen(s);
            memmove(buf + 3, s, len + 1);
            memcpy(buf, META, 3);
            p = buf;
        }
        if (*p == '\0') {
            st = tw_errorf(err, TW_INVALID_ARGUMENT,
                           "%s/tokenizer.json: token %llu \"%s\" is empty in llama.cpp's "
                           "phantom-space form",
                           dir, (unsigned long long)id, s);
        } else if (json_object_get(seen, p)) {
            st = tw_errorf(err, TW_INVALID_ARGUMENT,
                           "%s/tokenizer.json: tokens %lld and %llu are both \"%s\" in llama.cpp's "
                           "phantom-space form",
                           dir, (long long)json_integer_value(json_object_get(seen, p)),
                           (unsigned long long)id, p);
        } else if (json_object_set_new(seen, p, json_integer((json_int_t)id)) != 0) {
            st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
        } else {
            st = tw_gguf_warr_push_str(arr, p, strlen(p), err);
        }
    }
    free(buf);
    json_decref(seen);
    if (st) {
        tw_gguf_warr_free(arr);
        return st;
    }
    *out = arr;
    return TW_OK;
}

/* [PAD] and [MASK]: named by tokenizer_config.json, else config.json's
 * pad_token_id, else found by their usual text; -1 when there is none. */
static int64_t special_id(const wp_table *t, const json_t *tcfg, const json_t *config,
                          const char *name, const char *fallback)
{
    char key[32];
    snprintf(key, sizeof key, "%s_token", name);
    int64_t id = find_text(t, twc_special_text(json_object_get(tcfg, key)));
    snprintf(key, sizeof key, "%s_token_id", name);
    const json_t *cid = json_object_get(config, key);
    if (id < 0 && json_is_integer(cid) && json_integer_value(cid) >= 0 &&
        (uint64_t)json_integer_value(cid) < t->n)
        id = json_integer_value(cid);
    return id >= 0 ? id : find_text(t, fallback);
}

static tw_status write_keys(const char *dir, const json_t *tok, const json_t *tcfg,
                            const json_t *config, const wp_table *t, const wp_spec *spec,
                            const char *pre, tw_gguf_writer *w, tw_err *err)
{
    const json_t *unk_name = json_object_get(json_object_get(tok, "model"), "unk_token");
    int64_t unk = find_text(t, json_is_string(unk_name) ? json_string_value(unk_name) : "[UNK]");
    if (unk < 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "%s/tokenizer.json: model.unk_token \"%s\" is not in the vocabulary", dir,
                         json_is_string(unk_name) ? json_string_value(unk_name) : "[UNK]");
    int64_t pad = special_id(t, tcfg, config, "pad", "[PAD]");
    int64_t mask = special_id(t, tcfg, config, "mask", "[MASK]");
    const json_t *tv = json_object_get(config, "type_vocab_size");
    uint32_t type_count = json_is_integer(tv) && json_integer_value(tv) >= 1 &&
                                  json_integer_value(tv) <= (json_int_t)UINT32_MAX
                              ? (uint32_t)json_integer_value(tv)
                              : 1;

    tw_gguf_warr *tokens = NULL;
    tw_status st = phantom_tokens(dir, t, &tokens, err);
    if (st)
        return st;
    if ((st = tw_gguf_writer_set_u32(w, KEY("token_type_count"), type_count, err)) ||
        (st = tw_gguf_writer_set_str(w, KEY("model"), "bert", err)) ||
        /* llama.cpp names no pre-tokenizer for "bert" vocabularies */
        (st = tw_gguf_writer_set_str(w, KEY("pre"), pre ? pre : "default", err)) ||
        (st = tw_gguf_writer_set_arr(w, KEY("tokens"), tokens, err)) ||
        (st = tw_gguf_writer_set_arr_data(w, KEY("token_type"), TW_GGUF_I32, t->type, t->n, err)))
        return st;
    if ((st = tw_gguf_writer_set_u32(w, KEY("unknown_token_id"), (uint32_t)unk, err)) ||
        (st = tw_gguf_writer_set_u32(w, KEY("seperator_token_id"), spec->sep, err)) ||
        (st = tw_gguf_writer_set_u32(w, KEY("cls_token_id"), spec->cls, err)) ||
        /* llama.cpp adds BOS and the separator around a text; older builds
         * read cls_token_id instead of BOS */
        (st = tw_gguf_writer_set_u32(w, KEY("bos_token_id"), spec->cls, err)) ||
        (st = tw_gguf_writer_set_u32(w, KEY("eos_token_id"), spec->sep, err)))
        return st;
    if (pad >= 0 && (st = tw_gguf_writer_set_u32(w, KEY("padding_token_id"), (uint32_t)pad, err)))
        return st;
    if (mask >= 0 && (st = tw_gguf_writer_set_u32(w, KEY("mask_token_id"), (uint32_t)mask, err)))
        return st;
    /* SpecialVocab's reading of [CLS] $A [SEP] / [CLS] $A [SEP] $B [SEP]:
     * BOS and EOS added, no extra separator between a pair's texts. */
    if ((st = tw_gguf_writer_set_bool(w, KEY("add_bos_token"), true, err)) ||
        (st = tw_gguf_writer_set_bool(w, KEY("add_eos_token"), true, err)) ||
        (st = tw_gguf_writer_set_bool(w, KEY("add_sep_token"), false, err)))
        return st;
    if ((st = tw_gguf_writer_set_bool(w, KEY("normalizer.lowercase"), spec->lower, err)) ||
        (st = tw_gguf_writer_set_bool(w, KEY("normalizer.strip_accents"), spec->accents, err)))
        return st;
    return TW_OK;
}

tw_status twc_write_vocab_wordpiece(const char *dir, const json_t *tok, const json_t *tcfg,
                                    const json_t *config, uint64_t vocab_size,
                                    const char *pre_override, tw_gguf_writer *w, tw_err *err)
{
    wp_spec spec = {0};
    wp_table t = {0};
    tw_status st;
    if ((st = check_model(dir, json_object_get(tok, "model"), err)) ||
        (st = check_normalizer(dir, json_object_get(tok, "normalizer"), &spec, err)))
        return st;
    const char *pre = type_of(json_object_get(tok, "pre_tokenizer"));
    if (strcmp(pre, "BertPreTokenizer") != 0)
        return refuse(err, dir, "the pre-tokenizer is %s, not BertPreTokenizer", pre);
    if ((st = check_decoder(dir, json_object_get(tok, "decoder"), err)) ||
        (st = check_post(dir, json_object_get(tok, "post_processor"), vocab_size, &spec, err)))
        return st;
    if ((st = build_table(dir, tok, vocab_size, &t, err)) == TW_OK)
        st = write_keys(dir, tok, tcfg, config, &t, &spec, pre_override, w, err);
    free(t.text);
    free(t.type);
    return st;
}
