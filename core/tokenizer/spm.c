/* SentencePiece BPE: characters merge into the adjacent pair whose joined
 * text is a piece with the highest score, until no pair is a piece; what
 * is left and not a piece falls back to <0xXX> byte tokens (or the unknown
 * token). Spaces were already turned into U+2581 by the normalizer. */
#include <stdlib.h>

#include "tok_internal.h"

/* Control, unknown, unused and byte pieces never come out of a merge, as in
 * SentencePiece, where they are not part of the piece table. */
static bool mergeable(const tw_tokenizer *tok, uint32_t id)
{
    uint8_t t = tok->vocab.type[id];
    return t == TW_TOKEN_NORMAL || t == TW_TOKEN_USER_DEFINED || t == TW_TOKEN_UNDEFINED;
}

static bool add_sym(tok_scratch *sc, size_t off, size_t len)
{
    if (sc->n_syms == sc->cap_syms) {
        size_t cap = sc->cap_syms ? sc->cap_syms * 2 : 256;
        tok_sym *s = realloc(sc->syms, cap * sizeof *s);
        if (!s)
            return false;
        sc->syms = s;
        sc->cap_syms = cap;
    }
    int32_t i = (int32_t)sc->n_syms++;
    sc->syms[i] = (tok_sym){0, (uint32_t)off, (uint32_t)len, i - 1, -1};
    if (i > 0)
        sc->syms[i - 1].next = i;
    return true;
}

static bool try_pair(const tw_tokenizer *tok, tok_scratch *sc, const char *s, int32_t l, int32_t r)
{
    if (l < 0 || r < 0)
        return true;
    const tok_sym *a = &sc->syms[l], *b = &sc->syms[r];
    uint32_t id;
    if (!tok_vocab_find(&tok->vocab, s + a->off, (size_t)a->len + b->len, &id) ||
        !mergeable(tok, id))
        return true;
    float score = tok->vocab.score ? tok->vocab.score[id] : 0.0f;
    tok_cand c = {-(double)score, l, r, a->len, b->len, id};
    return tok_heap_push(sc, &c);
}

tw_status tok_spm_piece(const tw_tokenizer *tok, tok_scratch *sc, const char *s, size_t len,
                        tok_out *out, tw_err *err)
{
    if (len == 0)
        return TW_OK;
    if (len > UINT32_MAX)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "text segment of %zu bytes is too long", len);
    sc->n_syms = 0;
    sc->n_heap = 0;
    size_t i = 0;
    while (i < len) {
        size_t n = tok_utf8_valid_len((const uint8_t *)s + i, len - i);
        if (n == 0)
            n = 1;
        if (!add_sym(sc, i, n))
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory while tokenizing");
        i += n;
    }
    for (size_t k = 1; k < sc->n_syms; k++)
        if (!try_pair(tok, sc, s, (int32_t)k - 1, (int32_t)k))
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory while tokenizing");

    tok_cand c;
    while (tok_heap_pop(sc, &c)) {
        tok_sym *l = &sc->syms[c.left];
        tok_sym *r = &sc->syms[c.right];
        if (l->len != c.a || r->len != c.b || l->next != c.right)
            continue;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0)
            sc->syms[r->next].prev = c.left;
        if (!try_pair(tok, sc, s, l->prev, c.left) || !try_pair(tok, sc, s, c.left, l->next))
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory while tokenizing");
    }

    for (int32_t k = 0; k >= 0; k = sc->syms[k].next) {
        const tok_sym *sym = &sc->syms[k];
        uint32_t id;
        if (tok_vocab_find(&tok->vocab, s + sym->off, sym->len, &id) && mergeable(tok, id)) {
            tok_out_push(out, id);
            continue;
        }
        for (uint32_t b = 0; b < sym->len; b++) {
            int64_t t = tok->byte_tok[(uint8_t)s[sym->off + b]];
            if (t >= 0) {
                tok_out_push(out, (uint32_t)t);
            } else if (tok->unk != TW_TOKEN_NONE) {
                /* One unknown token for the whole character. */
                tok_out_push(out, tok->unk);
                break;
            } else {
                return tw_errorf(err, TW_INVALID_ARGUMENT,
                                 "text byte 0x%02x has no token and the tokenizer has no unknown "
                                 "token",
                                 (unsigned)(uint8_t)s[sym->off + b]);
            }
        }
    }
    return TW_OK;
}
