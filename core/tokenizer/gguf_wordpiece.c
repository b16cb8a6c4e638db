/* tokenizer.ggml.model "bert": a WordPiece vocabulary as llama.cpp's
 * converter writes it. Its token list is in "phantom space" form: a piece
 * that starts a word carries a leading U+2581, a "##" continuation has lost
 * its "##", control tokens ([CLS], [SEP], ...) are as they were. Reading
 * undoes that, so the pieces, ids and decoded text are those of the
 * tokenizer.json the file was made from.
 *
 * Nothing else of the tokenizer is stored, because llama.cpp fixes it:
 * BertNormalizer (clean text, CJK spacing; lowercase and strip accents
 * unless tokenizer.ggml.normalizer.lowercase / .strip_accents say
 * otherwise), BertPreTokenizer, WordPiece with "##" and Hugging Face's 100
 * characters a word, the WordPiece decoder, and [CLS] ... [SEP] around a
 * text whatever tokenizer.ggml.add_*_token say.
 *
 * Every count, id and string comes from the file and is checked: a bad one
 * is an error naming its key, never a crash. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "tw/gguf.h"

#define KEY(k) "tokenizer.ggml." k
#define META   "\xe2\x96\x81"

/* llama.cpp's first BERT converter kept every "[...]" token as written
 * whatever its type ([unused0], or [UNK] in a vocabulary without added
 * tokens). No continuation can be such a text in use: BertPreTokenizer
 * makes each bracket a word of its own. */
static bool bracketed(const char *s, size_t len)
{
    return len >= 3 && s[0] == '[' && s[len - 1] == ']';
}

tw_status tok_gguf_wp_text(tw_tokenizer *tok, uint32_t id, const char *s, size_t len, tw_err *err)
{
    if (len == 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, KEY("tokens") "[%u] is empty", id);
    if (tok->vocab.type[id] == TW_TOKEN_CONTROL || bracketed(s, len))
        return tok_vocab_set_text(&tok->vocab, id, s, len, err);
    /* U+2581 alone starts no word of text: it is the continuation "##▁" */
    if (len > 3 && memcmp(s, META, 3) == 0)
        return tok_vocab_set_text(&tok->vocab, id, s + 3, len - 3, err);
    if (len > TOK_MAX_TOKEN_BYTES - 2)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         KEY("tokens") "[%u] is %zu bytes long (limit %u)", id, len,
                         TOK_MAX_TOKEN_BYTES);
    char *buf = malloc(len + 2);
    if (!buf)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    memcpy(buf, "##", 2);
    memcpy(buf + 2, s, len);
    tw_status st = tok_vocab_set_text(&tok->vocab, id, buf, len + 2, err);
    free(buf);
    return st;
}

/* An id key. Absent, or negative (how some converters write "none"), it
 * leaves *found false; present, it must name a token. */
static tw_status id_key(const tw_gguf *g, const char *key, uint32_t n, uint32_t *id, bool *found,
                        tw_err *err)
{
    *found = false;
    const tw_gguf_value *v = tw_gguf_get(g, key);
    if (!v)
        return TW_OK;
    int64_t s;
    uint64_t u = 0;
    if (tw_gguf_value_i64(v, &s)) {
        if (s < 0)
            return TW_OK;
        u = (uint64_t)s;
    } else if (!tw_gguf_value_u64(v, &u)) {
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s is not an integer", key);
    }
    if (u >= n)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "%s = %llu is outside the vocabulary of %u tokens", key,
                         (unsigned long long)u, n);
    *id = (uint32_t)u;
    *found = true;
    return TW_OK;
}

/* The first of keys that is set, else the token with text fallback; an
 * error naming them all when neither exists and required. */
static tw_status special(const tw_tokenizer *tok, const tw_gguf *g, const char *const keys[2],
                         const char *fallback, bool required, uint32_t *out, tw_err *err)
{
    bool found = false;
    for (int i = 0; i < 2 && keys[i] && !found; i++) {
        tw_status st = id_key(g, keys[i], tok->vocab.n, out, &found, err);
        if (st != TW_OK)
            return st;
    }
    if (found || tok_vocab_find(&tok->vocab, fallback, strlen(fallback), out))
        return TW_OK;
    *out = TW_TOKEN_NONE;
    if (!required)
        return TW_OK;
    return tw_errorf(err, TW_INVALID_ARGUMENT, "no %s token: %s%s%s unset and no token \"%s\"",
                     fallback, keys[0], keys[1] ? " and " : "", keys[1] ? keys[1] : "", fallback);
}

static tw_status opt_flag(const tw_gguf *g, const char *key, bool *out, tw_err *err)
{
    if (tw_gguf_find_key(g, key) < 0)
        return TW_OK;
    return tw_gguf_get_bool(g, key, out, err);
}

/* llama.cpp refuses a vocabulary that names one text twice; here the undone
 * form is what is looked up, so that is the one checked. */
static tw_status check_unique(const tw_tokenizer *tok, tw_err *err)
{
    const tok_vocab *v = &tok->vocab;
    for (uint32_t id = 0; id < v->n; id++) {
        uint32_t first;
        const char *s = v->text.p + v->tspan[id].off;
        if (tok_vocab_find(v, s, v->tspan[id].len, &first) && first != id)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             KEY("tokens") "[%u] and [%u] are both \"%.64s\" without the phantom "
                                           "space",
                             first, id, s);
    }
    return TW_OK;
}

static tw_status bert_pieces(tw_tokenizer *tok, tw_err *err)
{
    tok_vocab *v = &tok->vocab;
    memcpy(tok->wp_prefix, "##", 3);
    tok->wp_prefix_len = 2;
    tok->wp_max_chars = 100;
    /* The filler of ids a tokenizer.json did not name ([PAD123]) is no piece
     * of a word; every other token is, as llama.cpp matches them all. */
    tok->wp_in_model = calloc(v->n / 8 + 1, 1);
    if (!tok->wp_in_model)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    for (uint32_t id = 0; id < v->n; id++) {
        if (v->type[id] == TW_TOKEN_UNUSED)
            continue;
        tok->wp_in_model[id / 8] |= (uint8_t)(1u << (id % 8));
        if (v->tspan[id].len > tok->wp_max_len)
            tok->wp_max_len = v->tspan[id].len;
    }
    return TW_OK;
}

tw_status tok_gguf_wordpiece(tw_tokenizer *tok, const tw_gguf *g, tw_err *err)
{
    tw_status st = check_unique(tok, err);
    if (st == TW_OK)
        st = bert_pieces(tok, err);
    if (st != TW_OK)
        return st;

    static const char *const unk_keys[2] = {KEY("unknown_token_id"), NULL};
    /* cls_token_id is what [CLS] is; BOS is how newer llama.cpp adds it */
    static const char *const cls_keys[2] = {KEY("cls_token_id"), KEY("bos_token_id")};
    static const char *const sep_keys[2] = {KEY("seperator_token_id"), KEY("eos_token_id")};
    static const char *const pad_keys[2] = {KEY("padding_token_id"), NULL};
    static const char *const mask_keys[2] = {KEY("mask_token_id"), NULL};
    uint32_t unk = 0, cls = 0, sep = 0, pad = 0, mask = 0;
    if ((st = special(tok, g, unk_keys, "[UNK]", true, &unk, err)) ||
        (st = special(tok, g, cls_keys, "[CLS]", true, &cls, err)) ||
        (st = special(tok, g, sep_keys, "[SEP]", true, &sep, err)) ||
        (st = special(tok, g, pad_keys, "[PAD]", false, &pad, err)) ||
        (st = special(tok, g, mask_keys, "[MASK]", false, &mask, err)))
        return st;
    tok->wp_unk = tok->unk = unk;
    if (tok->vocab.type[unk] == TW_TOKEN_NORMAL)
        tok->vocab.type[unk] = TW_TOKEN_UNKNOWN;
    tok->bos = cls;
    tok->eos = sep;
    tok->pad = pad;
    tok->add_bos = tok->add_eos = true;

    tok_norm nm = {.kind = NORM_BERT, .clean = true, .cjk = true, .lower = true};
    if ((st = opt_flag(g, KEY("normalizer.lowercase"), &nm.lower, err)) != TW_OK)
        return st;
    nm.accents = nm.lower;
    if ((st = opt_flag(g, KEY("normalizer.strip_accents"), &nm.accents, err)) != TW_OK)
        return st;
    tok->norm[tok->n_norm++] = nm;
    tok->pre[tok->n_pre++] = (tok_pre){.kind = PRE_BERT};

    tok->dec_wordpiece = tok->dec_wp_cleanup = true;
    memcpy(tok->dec_wp_prefix, "##", 3);
    tok->dec_wp_prefix_len = 2;
    return TW_OK;
}
