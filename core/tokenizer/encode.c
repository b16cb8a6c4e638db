/* Encoding pipeline: added tokens are cut out of the raw text first
 * (leftmost, longest match), every text segment between them is
 * normalized, added tokens marked "normalized" are cut out of the
 * normalized text, the rest is pre-tokenized and each piece goes through
 * the model. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

typedef struct match {
    int32_t added; /* index into tok->added, -1 none */
    size_t end;
} match;

/* Longest added token starting at s[i] that the flags allow. */
static match trie_longest(const tw_tokenizer *tok, const tok_trie *t, const char *s, size_t len,
                          size_t i, bool parse_special)
{
    match m = {-1, 0};
    int32_t node = t->root[(uint8_t)s[i]];
    size_t j = i + 1;
    while (node >= 0) {
        const tok_trie_node *nd = &t->nodes[node];
        if (nd->added >= 0 && (parse_special || !tok->added[nd->added].special)) {
            m.added = nd->added;
            m.end = j;
        }
        if (j >= len)
            break;
        int32_t c = nd->child;
        while (c >= 0 && t->nodes[c].byte != (uint8_t)s[j])
            c = t->nodes[c].sibling;
        node = c;
        j++;
    }
    return m;
}

static bool space_before(const char *s, size_t start, size_t limit, size_t *pos)
{
    /* Steps back over one whitespace character ending at start. */
    if (start <= limit)
        return false;
    size_t b = start - 1;
    while (b > limit && ((unsigned char)s[b] & 0xc0) == 0x80 && start - b < 4)
        b--;
    uint32_t cp;
    size_t l = tok_utf8_decode((const uint8_t *)s + b, start - b, &cp);
    if (l != start - b || !tok_is_space(cp))
        return false;
    *pos = b;
    return true;
}

static bool space_after(const char *s, size_t end, size_t len, size_t *pos)
{
    uint32_t cp;
    size_t l = end < len ? tok_utf8_decode((const uint8_t *)s + end, len - end, &cp) : 0;
    if (l == 0 || !tok_is_space(cp))
        return false;
    *pos = end + l;
    return true;
}

typedef tw_status (*segment_fn)(const tw_tokenizer *tok, tok_scratch *sc, const char *s,
                                size_t len, bool first, bool parse_special, tok_out *out,
                                tw_err *err);

/* Splits s by the added tokens of trie t; text between tokens goes to fn. */
static tw_status split_added(const tw_tokenizer *tok, const tok_trie *t, tok_scratch *sc,
                             const char *s, size_t len, bool first, bool parse_special,
                             segment_fn fn, tok_out *out, tw_err *err)
{
    size_t seg = 0, i = 0;
    while (i < len && !t->empty) {
        if (t->root[(uint8_t)s[i]] < 0) {
            i++;
            continue;
        }
        match m = trie_longest(tok, t, s, len, i, parse_special);
        if (m.added < 0) {
            i++;
            continue;
        }
        const tok_added *a = &tok->added[m.added];
        size_t ms = i, me = m.end, p;
        if (a->single_word) {
            bool before = ms == 0 || space_before(s, ms, 0, &p);
            bool after = me == len || space_after(s, me, len, &p);
            if (!before || !after) {
                i = me;
                continue;
            }
        }
        if (a->lstrip)
            while (space_before(s, ms, seg, &p))
                ms = p;
        if (a->rstrip)
            while (space_after(s, me, len, &p))
                me = p;
        if (ms > seg) {
            tw_status st = fn(tok, sc, s + seg, ms - seg, first && seg == 0, parse_special, out, err);
            if (st != TW_OK)
                return st;
        }
        tok_out_push(out, a->id);
        seg = i = me;
    }
    if (len > seg)
        return fn(tok, sc, s + seg, len - seg, first && seg == 0, parse_special, out, err);
    return TW_OK;
}

/* Normalized text (already in sc->text at s) -> pieces -> model. */
static tw_status model_segment(const tw_tokenizer *tok, tok_scratch *sc, const char *s, size_t len,
                               bool first, bool parse_special, tok_out *out, tw_err *err)
{
    (void)parse_special;
    size_t off = (size_t)(s - sc->text.p);
    tw_status st = tok_pretokenize(tok, sc, off, len, first, err);
    if (st != TW_OK)
        return st;
    for (size_t i = 0; i < sc->pieces.n; i++) {
        tok_piece pc = sc->pieces.v[i];
        const char *p = sc->text.p + pc.off;
        switch (tok->kind) {
        case TW_TOKENIZER_SPM:
            st = tok_spm_piece(tok, sc, p, pc.len, out, err);
            break;
        case TW_TOKENIZER_WORDPIECE:
            st = tok_wordpiece_piece(tok, sc, p, pc.len, out, err);
            break;
        default:
            st = tok_bpe_piece(tok, sc, p, pc.len, out, err);
            break;
        }
        if (st != TW_OK)
            return st;
    }
    return TW_OK;
}

/* A remainder of normalized text cut by the normalized-token trie. */
static tw_status copied_segment(const tw_tokenizer *tok, tok_scratch *sc, const char *s,
                                size_t len, bool first, bool parse_special, tok_out *out,
                                tw_err *err)
{
    sc->text.len = 0;
    if (!tok_buf_append(&sc->text, s, len))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    return model_segment(tok, sc, sc->text.p, len, first, parse_special, out, err);
}

/* The normalized text lives in sc->text, which pre-tokenization may grow
 * (and move); so pieces of it are passed on by copying them to a private
 * buffer first when a normalized-token trie has to cut them. */
static tw_status raw_segment(const tw_tokenizer *tok, tok_scratch *sc, const char *s, size_t len,
                             bool first, bool parse_special, tok_out *out, tw_err *err)
{
    sc->text.len = 0;
    size_t off, nlen;
    tw_status st = tok_normalize(tok, sc, s, len, &off, &nlen, err);
    if (st != TW_OK)
        return st;
    if (tok->trie_norm.empty)
        return model_segment(tok, sc, sc->text.p + off, nlen, first, parse_special, out, err);

    /* Cut normalized added tokens, then run the model on each remainder. */
    char *copy = malloc(nlen ? nlen : 1);
    if (!copy)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    memcpy(copy, sc->text.p + off, nlen);
    st = split_added(tok, &tok->trie_norm, sc, copy, nlen, first, parse_special,
                     copied_segment, out, err);
    free(copy);
    return st;
}

tw_status tw_tokenizer_encode(const tw_tokenizer *tok, const char *text, size_t len,
                              unsigned flags, uint32_t *out, size_t cap, size_t *n_out,
                              tw_err *err)
{
    if (!tok || !n_out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tw_tokenizer_encode: NULL argument");
    *n_out = 0;
    if (!text && len)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tw_tokenizer_encode: NULL text");
    if (!out && cap)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tw_tokenizer_encode: NULL output buffer");
    if (flags & ~(TW_ENCODE_ADD_SPECIAL | TW_ENCODE_PARSE_SPECIAL))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tw_tokenizer_encode: unknown flags 0x%x", flags);

    tok_out o = {out, cap, 0};
    tok_scratch sc = {0};
    sc.md = pcre2_match_data_create(1, NULL);
    if (!sc.md)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    bool add = flags & TW_ENCODE_ADD_SPECIAL;
    if (add && tok->add_bos && tok->bos != TW_TOKEN_NONE)
        tok_out_push(&o, tok->bos);
    tw_status st = TW_OK;
    if (len > 0)
        st = split_added(tok, &tok->trie_raw, &sc, text, len, true,
                         flags & TW_ENCODE_PARSE_SPECIAL, raw_segment, &o, err);
    if (add && tok->add_eos && tok->eos != TW_TOKEN_NONE)
        tok_out_push(&o, tok->eos);

    pcre2_match_data_free(sc.md);
    tok_buf_free(&sc.text);
    tok_buf_free(&sc.word);
    free(sc.pieces.v);
    free(sc.tmp.v);
    free(sc.syms);
    free(sc.heap);
    if (st != TW_OK)
        return st;
    *n_out = o.n;
    if (o.n > cap)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                         "output holds %zu token ids but %zu are needed", cap, o.n);
    return TW_OK;
}
