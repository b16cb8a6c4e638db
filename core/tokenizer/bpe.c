/* The BPE merge loop shared by the models: symbols in a linked list,
 * candidate pairs in a binary heap ordered by priority then position, stale
 * candidates dropped when popped. Each merge costs O(log n), so a piece of
 * n symbols is O(n log n) instead of a rescan per merge.
 *
 * Byte-level and character BPE rank pairs by merge rank (lowest first);
 * SentencePiece (spm.c) ranks by the merged piece's score. Ties go to the
 * leftmost pair, as in Hugging Face tokenizers, SentencePiece and llama.cpp. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

static bool cand_less(const tok_cand *x, const tok_cand *y)
{
    return x->prio < y->prio || (x->prio == y->prio && x->left < y->left);
}

bool tok_heap_push(tok_scratch *sc, const tok_cand *c)
{
    if (sc->n_heap == sc->cap_heap) {
        size_t cap = sc->cap_heap ? sc->cap_heap * 2 : 256;
        tok_cand *h = realloc(sc->heap, cap * sizeof *h);
        if (!h)
            return false;
        sc->heap = h;
        sc->cap_heap = cap;
    }
    size_t i = sc->n_heap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!cand_less(c, &sc->heap[parent]))
            break;
        sc->heap[i] = sc->heap[parent];
        i = parent;
    }
    sc->heap[i] = *c;
    return true;
}

bool tok_heap_pop(tok_scratch *sc, tok_cand *c)
{
    if (sc->n_heap == 0)
        return false;
    *c = sc->heap[0];
    tok_cand last = sc->heap[--sc->n_heap];
    size_t i = 0, n = sc->n_heap;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= n)
            break;
        size_t m = (l + 1 < n && cand_less(&sc->heap[l + 1], &sc->heap[l])) ? l + 1 : l;
        if (!cand_less(&sc->heap[m], &last))
            break;
        sc->heap[i] = sc->heap[m];
        i = m;
    }
    if (n > 0)
        sc->heap[i] = last;
    return true;
}

static bool push_sym(tok_scratch *sc, uint32_t id, size_t off, size_t len)
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
    sc->syms[i] = (tok_sym){id, (uint32_t)off, (uint32_t)len, i - 1, -1};
    if (i > 0)
        sc->syms[i - 1].next = i;
    return true;
}

static bool try_pair(const tw_tokenizer *tok, tok_scratch *sc, int32_t l, int32_t r)
{
    if (l < 0 || r < 0)
        return true;
    uint32_t rank, result;
    uint32_t a = sc->syms[l].id, b = sc->syms[r].id;
    if (!tok_merges_find(&tok->merges, a, b, &rank, &result))
        return true;
    tok_cand c = {(double)rank, l, r, a, b, result};
    return tok_heap_push(sc, &c);
}

static tw_status oom(tw_err *err)
{
    return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory while tokenizing");
}

/* Byte-level text of a raw piece, for the whole-piece lookup of
 * ignore_merges. */
static bool byte_level_text(const char *s, size_t len, tok_buf *out)
{
    out->len = 0;
    for (size_t i = 0; i < len; i++) {
        char u[4];
        size_t n = tok_utf8_encode(tok_byte_to_cp((uint8_t)s[i]), u);
        if (!tok_buf_append(out, u, n))
            return false;
    }
    return true;
}

/* Initial symbols for one character (or invalid byte) that the vocabulary
 * lacks: byte-fallback tokens, else the unknown token. */
static tw_status missing_char(const tw_tokenizer *tok, tok_scratch *sc, const char *s, size_t off,
                              size_t n, bool *prev_unk, tw_err *err)
{
    if (tok->byte_fallback) {
        bool all = true;
        for (size_t k = 0; k < n; k++)
            all = all && tok->byte_tok[(uint8_t)s[off + k]] >= 0;
        if (all) {
            for (size_t k = 0; k < n; k++)
                if (!push_sym(sc, (uint32_t)tok->byte_tok[(uint8_t)s[off + k]], off + k, 1))
                    return oom(err);
            *prev_unk = false;
            return TW_OK;
        }
    }
    if (tok->unk == TW_TOKEN_NONE)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "text byte 0x%02x is not in the vocabulary and the tokenizer has no "
                         "unknown token",
                         (unsigned)(uint8_t)s[off]);
    if (tok->fuse_unk && *prev_unk) {
        sc->syms[sc->n_syms - 1].len += (uint32_t)n;
        return TW_OK;
    }
    if (!push_sym(sc, tok->unk, off, n))
        return oom(err);
    *prev_unk = true;
    return TW_OK;
}

tw_status tok_bpe_piece(const tw_tokenizer *tok, tok_scratch *sc, const char *s, size_t len,
                        tok_out *out, tw_err *err)
{
    if (len == 0)
        return TW_OK;
    if (len > UINT32_MAX)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "pre-tokenized piece of %zu bytes is too long",
                         len);
    uint32_t id;
    if (tok->ignore_merges) {
        /* Llama 3 style: a piece that is itself a token is not merged up. */
        if (tok->byte_level) {
            if (len <= tok->vocab.max_bytes) {
                if (!byte_level_text(s, len, &sc->word))
                    return oom(err);
                if (tok_vocab_find(&tok->vocab, sc->word.p, sc->word.len, &id)) {
                    tok_out_push(out, id);
                    return TW_OK;
                }
            }
        } else if (tok_vocab_find(&tok->vocab, s, len, &id)) {
            tok_out_push(out, id);
            return TW_OK;
        }
    }

    sc->n_syms = 0;
    sc->n_heap = 0;
    if (tok->byte_level) {
        for (size_t i = 0; i < len; i++) {
            int64_t t = tok->byte_char_tok[(uint8_t)s[i]];
            if (t >= 0) {
                if (!push_sym(sc, (uint32_t)t, i, 1))
                    return oom(err);
            } else {
                bool prev_unk = false;
                tw_status st = missing_char(tok, sc, s, i, 1, &prev_unk, err);
                if (st != TW_OK)
                    return st;
            }
        }
    } else {
        bool prev_unk = false;
        size_t i = 0;
        while (i < len) {
            size_t n = tok_utf8_valid_len((const uint8_t *)s + i, len - i);
            if (n == 0)
                n = 1;
            if (tok_vocab_find(&tok->vocab, s + i, n, &id)) {
                if (!push_sym(sc, id, i, n))
                    return oom(err);
                prev_unk = false;
            } else {
                tw_status st = missing_char(tok, sc, s, i, n, &prev_unk, err);
                if (st != TW_OK)
                    return st;
            }
            i += n;
        }
    }

    for (size_t i = 1; i < sc->n_syms; i++)
        if (!try_pair(tok, sc, (int32_t)i - 1, (int32_t)i))
            return oom(err);

    tok_cand c;
    while (tok_heap_pop(sc, &c)) {
        tok_sym *l = &sc->syms[c.left];
        tok_sym *r = &sc->syms[c.right];
        /* Stale: one side has merged since this pair was queued. */
        if (l->len == 0 || r->len == 0 || l->next != c.right || l->id != c.a || r->id != c.b)
            continue;
        l->id = c.result;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0)
            sc->syms[r->next].prev = c.left;
        if (!try_pair(tok, sc, l->prev, c.left) || !try_pair(tok, sc, c.left, l->next))
            return oom(err);
    }

    for (int32_t i = sc->n_syms ? 0 : -1; i >= 0; i = sc->syms[i].next)
        tok_out_push(out, sc->syms[i].id);
    return TW_OK;
}
