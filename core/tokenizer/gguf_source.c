/* Tokenizer from GGUF metadata (tokenizer.ggml.*), as llama.cpp's converter
 * writes it: "gpt2" is byte-level BPE with merges and a named
 * pre-tokenizer, "llama" is SentencePiece with scores, "bert" is WordPiece
 * (gguf_wordpiece.c). */
#include <stdlib.h>
#include <string.h>

#include "tw/gguf.h"
#include "tok_internal.h"

#define KEY(k) "tokenizer.ggml." k

static tw_status opt_id(const tw_gguf *g, const char *key, uint32_t *out, tw_err *err)
{
    if (tw_gguf_find_key(g, key) < 0)
        return TW_OK;
    uint32_t v;
    tw_status st = tw_gguf_get_u32(g, key, &v, err);
    if (st != TW_OK) {
        /* Some converters write -1 for "none". */
        int64_t s;
        if (tw_gguf_value_i64(tw_gguf_get(g, key), &s) && s < 0)
            return TW_OK;
        return st;
    }
    *out = v;
    return TW_OK;
}

static tw_status opt_bool(const tw_gguf *g, const char *key, bool *out, tw_err *err)
{
    if (tw_gguf_find_key(g, key) < 0)
        return TW_OK;
    return tw_gguf_get_bool(g, key, out, err);
}

static tw_status load_tokens(tw_tokenizer *tok, const tw_gguf *g, tw_err *err)
{
    const tw_gguf_value *toks, *types = NULL, *scores = NULL;
    tw_status st = tw_gguf_get_arr(g, KEY("tokens"), &toks, err);
    if (st != TW_OK)
        return st;
    if (tw_gguf_array_type(toks) != TW_GGUF_STRING)
        return tw_errorf(err, TW_INVALID_ARGUMENT, KEY("tokens") " is not a string array");
    uint64_t n = tw_gguf_array_len(toks);
    if (n == 0 || n > TOK_MAX_VOCAB)
        return tw_errorf(err, TW_INVALID_ARGUMENT, KEY("tokens") " has %llu entries (1..%u)",
                         (unsigned long long)n, TOK_MAX_VOCAB);
    if (tw_gguf_find_key(g, KEY("token_type")) >= 0) {
        st = tw_gguf_get_arr(g, KEY("token_type"), &types, err);
        if (st != TW_OK)
            return st;
        if (tw_gguf_array_len(types) != n)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             KEY("token_type") " has %llu entries, tokens has %llu",
                             (unsigned long long)tw_gguf_array_len(types), (unsigned long long)n);
    }
    if (tw_gguf_find_key(g, KEY("scores")) >= 0) {
        st = tw_gguf_get_arr(g, KEY("scores"), &scores, err);
        if (st != TW_OK)
            return st;
        if (tw_gguf_array_len(scores) != n)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             KEY("scores") " has %llu entries, tokens has %llu",
                             (unsigned long long)tw_gguf_array_len(scores), (unsigned long long)n);
    }
    st = tok_vocab_alloc(&tok->vocab, (uint32_t)n, scores != NULL, err);
    if (st != TW_OK)
        return st;
    for (uint64_t i = 0; i < n; i++) {
        size_t len;
        const char *s = tw_gguf_array_str(toks, i, &len);
        if (!s)
            return tw_errorf(err, TW_INVALID_ARGUMENT, KEY("tokens") "[%llu] is not a string",
                             (unsigned long long)i);
        int64_t t = TW_TOKEN_NORMAL;
        if (types && !tw_gguf_array_i64(types, i, &t))
            return tw_errorf(err, TW_INVALID_ARGUMENT, KEY("token_type") "[%llu] is not an integer",
                             (unsigned long long)i);
        if (t < 0 || t > TW_TOKEN_BYTE)
            t = TW_TOKEN_UNDEFINED;
        tok->vocab.type[i] = (uint8_t)t;
        /* a "bert" text's spelling depends on its type */
        st = tok->kind == TW_TOKENIZER_WORDPIECE
                 ? tok_gguf_wp_text(tok, (uint32_t)i, s, len, err)
                 : tok_vocab_set_text(&tok->vocab, (uint32_t)i, s, len, err);
        if (st != TW_OK)
            return st;
        if (scores && !tw_gguf_array_f32(scores, i, &tok->vocab.score[i]))
            return tw_errorf(err, TW_INVALID_ARGUMENT, KEY("scores") "[%llu] is not a number",
                             (unsigned long long)i);
    }
    if (!tok_vocab_build_map(&tok->vocab))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    return TW_OK;
}

static tw_status load_merges(tw_tokenizer *tok, const tw_gguf *g, tw_err *err)
{
    const tw_gguf_value *merges;
    tw_status st = tw_gguf_get_arr(g, KEY("merges"), &merges, err);
    if (st != TW_OK)
        return st;
    if (tw_gguf_array_type(merges) != TW_GGUF_STRING)
        return tw_errorf(err, TW_INVALID_ARGUMENT, KEY("merges") " is not a string array");
    uint64_t n = tw_gguf_array_len(merges);
    if (n > TOK_MAX_VOCAB * 2ull)
        return tw_errorf(err, TW_INVALID_ARGUMENT, KEY("merges") " has %llu entries",
                         (unsigned long long)n);
    if (!tok_merges_init(&tok->merges, n))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    tok_buf joined = {0};
    size_t skipped = 0;
    for (uint64_t i = 0; i < n; i++) {
        size_t len;
        const char *s = tw_gguf_array_str(merges, i, &len);
        /* The separator is the first space after the first byte, so that a
         * left part that is itself a space still parses. */
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp) {
            tok_buf_free(&joined);
            return tw_errorf(err, TW_INVALID_ARGUMENT, KEY("merges") "[%llu] \"%.*s\" has no space",
                             (unsigned long long)i, (int)(len > 40 ? 40 : len), s);
        }
        size_t la = (size_t)(sp - s), lb = len - la - 1;
        uint32_t a, b, r;
        joined.len = 0;
        if (!tok_buf_append(&joined, s, la) || !tok_buf_append(&joined, sp + 1, lb)) {
            tok_buf_free(&joined);
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
        }
        /* llama.cpp tolerates merges outside the vocabulary (they can never
         * produce a token); skipping them gives the same tokens. */
        if (!tok_vocab_find(&tok->vocab, s, la, &a) || !tok_vocab_find(&tok->vocab, sp + 1, lb, &b) ||
            !tok_vocab_find(&tok->vocab, joined.p, joined.len, &r)) {
            skipped++;
            continue;
        }
        if (!tok_merges_add(&tok->merges, a, b, (uint32_t)i, r)) {
            tok_buf_free(&joined);
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
        }
    }
    tok_buf_free(&joined);
    (void)skipped;
    return TW_OK;
}

static tw_status spm_setup(tw_tokenizer *tok, const tw_gguf *g, tw_err *err)
{
    bool prefix = true;
    tw_status st = opt_bool(g, KEY("add_space_prefix"), &prefix, err);
    if (st != TW_OK)
        return st;
    static const char meta[] = "\xe2\x96\x81";
    size_t k = 0;
    if (prefix) {
        tok_norm *n = &tok->norm[k++];
        n->kind = NORM_PREPEND;
        n->str = strdup(meta);
        n->len = 3;
        if (!n->str)
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    }
    tok_norm *r = &tok->norm[k++];
    r->kind = NORM_REPLACE;
    r->str = strdup(" ");
    r->len = 1;
    r->str2 = strdup(meta);
    r->len2 = 3;
    tok->n_norm = k;
    if (!r->str || !r->str2)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    tok->strip_leading_space = prefix;
    tok->dec_metaspace = true;
    tok->byte_fallback = true;
    tok_init_byte_tokens(tok);
    tok->add_bos = true;
    return TW_OK;
}

/* The special ids and add_*_token flags of "gpt2" and "llama" vocabularies. */
static tw_status read_specials(tw_tokenizer *tok, const tw_gguf *g, bool spm, tw_err *err)
{
    if (spm) {
        tok->bos = 1, tok->eos = 2, tok->unk = 0;
    }
    tw_status st = opt_id(g, KEY("bos_token_id"), &tok->bos, err);
    if (st == TW_OK)
        st = opt_id(g, KEY("eos_token_id"), &tok->eos, err);
    if (st == TW_OK)
        st = opt_id(g, KEY("eot_token_id"), &tok->eot, err);
    if (st == TW_OK)
        st = opt_id(g, KEY("eom_token_id"), &tok->eom, err);
    if (st == TW_OK)
        st = opt_id(g, KEY("unknown_token_id"), &tok->unk, err);
    if (st == TW_OK)
        st = opt_id(g, KEY("padding_token_id"), &tok->pad, err);
    if (st == TW_OK)
        st = opt_bool(g, KEY("add_bos_token"), &tok->add_bos, err);
    if (st == TW_OK)
        st = opt_bool(g, KEY("add_eos_token"), &tok->add_eos, err);
    return st;
}

tw_status tw_tokenizer_from_gguf(const tw_gguf *g, tw_tokenizer **out, tw_err *err)
{
    if (!g || !out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tw_tokenizer_from_gguf: NULL argument");
    *out = NULL;
    const char *model = NULL;
    tw_status st = tw_gguf_get_str(g, KEY("model"), &model, NULL, err);
    if (st != TW_OK)
        return tw_error_wrap(err, st, "GGUF tokenizer");
    bool bpe = strcmp(model, "gpt2") == 0;
    bool spm = strcmp(model, "llama") == 0;
    bool wp = strcmp(model, "bert") == 0;
    if (!bpe && !spm && !wp)
        return tw_errorf(err, TW_UNIMPLEMENTED, "unsupported tokenizer model '%s' in " KEY("model"),
                         model);

    tw_tokenizer *tok = tok_new();
    if (!tok)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    tok->kind = spm ? TW_TOKENIZER_SPM : wp ? TW_TOKENIZER_WORDPIECE : TW_TOKENIZER_BPE;
    st = load_tokens(tok, g, err);
    if (st == TW_OK && bpe) {
        st = load_merges(tok, g, err);
        if (st == TW_OK)
            st = tok_init_byte_level(tok, err);
        const char *pre = "default";
        if (st == TW_OK && tw_gguf_find_key(g, KEY("pre")) >= 0)
            st = tw_gguf_get_str(g, KEY("pre"), &pre, NULL, err);
        if (st == TW_OK)
            st = tok_pre_from_name(tok, pre, err);
        /* Qwen's tokenizer.json normalizes its input to NFC. GGUF has no key
         * for a normalizer, so without this a decomposed "e\u0301" would be
         * split into other tokens than the model was trained on. */
        if (st == TW_OK && (strcmp(pre, "qwen2") == 0 || strcmp(pre, "qwen35") == 0) &&
            tok->n_norm < TOK_MAX_STEPS) {
            memset(&tok->norm[tok->n_norm], 0, sizeof tok->norm[0]);
            tok->norm[tok->n_norm++].kind = NORM_NFC;
        }
        tok->dec_byte_level = true;
        /* llama.cpp's default for BPE models; the add_bos_token key below
         * overrides it, and the Llama 3 family asks for BOS. */
        tok->add_bos = tok->ignore_merges;
    } else if (st == TW_OK && spm) {
        st = spm_setup(tok, g, err);
    } else if (st == TW_OK) {
        st = tok_gguf_wordpiece(tok, g, err);
    }

    if (st == TW_OK && !wp)
        st = read_specials(tok, g, spm, err);
    if (st == TW_OK && tw_gguf_find_key(g, "tokenizer.chat_template") >= 0) {
        const char *tmpl;
        size_t len;
        st = tw_gguf_get_str(g, "tokenizer.chat_template", &tmpl, &len, err);
        if (st == TW_OK && !(tok->chat_template = strndup(tmpl, len)))
            st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    }
    if (st == TW_OK)
        st = tok_added_from_types(tok, err);
    if (st == TW_OK)
        st = tok_build_tries(tok, err);
    if (st == TW_OK)
        st = tok_build_bytes(tok, err);
    if (st == TW_OK)
        st = tok_finish_specials(tok, err);
    if (st != TW_OK) {
        tw_tokenizer_free(tok);
        return tw_error_wrap(err, st, "GGUF tokenizer");
    }
    *out = tok;
    return TW_OK;
}

tw_status tw_tokenizer_load_gguf(const char *path, tw_tokenizer **out, tw_err *err)
{
    if (!path || !out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tw_tokenizer_load_gguf: NULL argument");
    tw_gguf *g;
    tw_status st = tw_gguf_open(path, &g, err);
    if (st != TW_OK)
        return st;
    st = tw_tokenizer_from_gguf(g, out, err);
    tw_gguf_close(g);
    if (st != TW_OK)
        return tw_error_wrap(err, st, "%s", path);
    return TW_OK;
}
