/* The vocabulary side of constrained decoding (tw/json_mask.h). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tw/json_mask.h"

#define NOT_PLAIN UINT32_MAX

struct tw_json_vocab {
    uint32_t n_tokens; /* the tokenizer's vocabulary */
    uint32_t n;        /* indexed tokens, in byte order */
    uint32_t *id;
    const char **bytes;
    uint16_t *len;
    uint16_t *lcp;         /* bytes shared with the token before */
    uint32_t *plain_chars; /* characters of a plain string run; NOT_PLAIN otherwise */
    uint32_t max_len;
};

struct tw_json_masker {
    const tw_json_vocab *v;
    tw_json_state *st; /* st[j]: the state after a token's first j bytes */
    uint8_t *allowed;
};

typedef struct entry {
    const char *bytes;
    uint32_t len, id;
} entry;

static int by_bytes(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->bytes, y->bytes, n);
    if (c)
        return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

/* Characters in p when it is whole UTF-8 with no quote, backslash or
 * control byte (what a string body takes as is), else NOT_PLAIN. */
static uint32_t plain_chars(const unsigned char *p, size_t n)
{
    uint32_t chars = 0;
    for (size_t i = 0; i < n; chars++) {
        unsigned c = p[i], more, lo = 0x80, hi = 0xBF;
        if (c < 0x20 || c == '"' || c == '\\')
            return NOT_PLAIN;
        if (c < 0x80)
            more = 0;
        else if (c >= 0xC2 && c <= 0xDF)
            more = 1;
        else if (c >= 0xE0 && c <= 0xEF)
            more = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4)
            more = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        else
            return NOT_PLAIN;
        if (i + 1 + more > n)
            return NOT_PLAIN;
        for (unsigned k = 1; k <= more; k++) {
            unsigned b = p[i + k];
            if (b < lo || b > hi)
                return NOT_PLAIN;
            lo = 0x80;
            hi = 0xBF;
        }
        i += 1 + more;
    }
    return chars;
}

void tw_json_vocab_free(tw_json_vocab *v)
{
    if (!v)
        return;
    free(v->id);
    free(v->bytes);
    free(v->len);
    free(v->lcp);
    free(v->plain_chars);
    free(v);
}

bool tw_json_vocab_has(const tw_tokenizer *tok, uint32_t id, const uint32_t *exclude,
                       size_t n_exclude)
{
    tw_token_type t = tw_tokenizer_token_type(tok, id);
    if (t != TW_TOKEN_NORMAL && t != TW_TOKEN_BYTE && t != TW_TOKEN_UNDEFINED &&
        t != TW_TOKEN_USER_DEFINED)
        return false;
    for (size_t i = 0; i < n_exclude; i++)
        if (exclude[i] == id)
            return false;
    size_t len;
    const char *b = tw_tokenizer_token_bytes(tok, id, &len);
    return b && len > 0 && len <= TW_JSON_MAX_TOKEN_BYTES;
}

tw_status tw_json_vocab_build(const tw_tokenizer *tok, const uint32_t *exclude, size_t n_exclude,
                              tw_json_vocab **out, tw_err *err)
{
    *out = NULL;
    const uint32_t n_tokens = tw_tokenizer_vocab_size(tok);
    entry *e = malloc((n_tokens ? n_tokens : 1) * sizeof *e);
    tw_json_vocab *v = calloc(1, sizeof *v);
    if (!e || !v) {
        free(e);
        free(v);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory for the JSON token index");
    }
    uint32_t n = 0;
    for (uint32_t id = 0; id < n_tokens; id++) {
        if (!tw_json_vocab_has(tok, id, exclude, n_exclude))
            continue;
        size_t len;
        const char *b = tw_tokenizer_token_bytes(tok, id, &len);
        e[n++] = (entry){.bytes = b, .len = (uint32_t)len, .id = id};
    }
    qsort(e, n, sizeof *e, by_bytes);
    v->n_tokens = n_tokens;
    v->n = n;
    v->id = malloc((n ? n : 1) * sizeof *v->id);
    v->bytes = malloc((n ? n : 1) * sizeof *v->bytes);
    v->len = malloc((n ? n : 1) * sizeof *v->len);
    v->lcp = malloc((n ? n : 1) * sizeof *v->lcp);
    v->plain_chars = malloc((n ? n : 1) * sizeof *v->plain_chars);
    if (!v->id || !v->bytes || !v->len || !v->lcp || !v->plain_chars) {
        free(e);
        tw_json_vocab_free(v);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory for the JSON token index");
    }
    for (uint32_t k = 0; k < n; k++) {
        v->id[k] = e[k].id;
        v->bytes[k] = e[k].bytes;
        v->len[k] = (uint16_t)e[k].len;
        uint32_t l = 0;
        if (k > 0) {
            uint32_t m = e[k].len < e[k - 1].len ? e[k].len : e[k - 1].len;
            while (l < m && e[k].bytes[l] == e[k - 1].bytes[l])
                l++;
        }
        v->lcp[k] = (uint16_t)l;
        v->plain_chars[k] = plain_chars((const unsigned char *)e[k].bytes, e[k].len);
        if (e[k].len > v->max_len)
            v->max_len = e[k].len;
    }
    free(e);
    *out = v;
    return TW_OK;
}

tw_status tw_json_masker_create(const tw_json_vocab *v, tw_json_masker **out, tw_err *err)
{
    *out = NULL;
    tw_json_masker *m = calloc(1, sizeof *m);
    if (m) {
        m->v = v;
        m->st = malloc(((size_t)v->max_len + 1) * sizeof *m->st);
        m->allowed = malloc(v->n_tokens ? v->n_tokens : 1);
    }
    if (!m || !m->st || !m->allowed) {
        tw_json_masker_destroy(m);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory for a JSON mask");
    }
    *out = m;
    return TW_OK;
}

void tw_json_masker_destroy(tw_json_masker *m)
{
    if (!m)
        return;
    free(m->st);
    free(m->allowed);
    free(m);
}

/* Marks m->allowed. Tokens are taken in byte order; the states of the
 * last token walked are kept per byte, so the next token starts from the
 * bytes it shares with it, and a token that shares a refused byte is
 * refused without a walk. */
static size_t walk(tw_json_masker *m, const tw_json_state *s, const uint32_t *eos, size_t n_eos)
{
    const tw_json_vocab *v = m->v;
    memset(m->allowed, 0, v->n_tokens);
    uint32_t room = 0;
    const bool fast = tw_json_state_in_plain_string(s, &room);
    tw_json_state_copy(&m->st[0], s);
    size_t kept = 0, walked = 0, shared = SIZE_MAX;
    bool refused = false;
    for (uint32_t k = 0; k < v->n; k++) {
        if (k > 0 && v->lcp[k] < shared)
            shared = v->lcp[k];
        if (fast && v->plain_chars[k] != NOT_PLAIN && v->plain_chars[k] <= room) {
            m->allowed[v->id[k]] = 1;
            kept++;
            continue;
        }
        if (refused && shared > walked)
            continue;
        size_t j = shared < walked ? shared : walked;
        const unsigned char *b = (const unsigned char *)v->bytes[k];
        refused = false;
        for (; j < v->len[k]; j++) {
            tw_json_state_copy(&m->st[j + 1], &m->st[j]);
            if (!tw_json_state_feed_byte(&m->st[j + 1], b[j])) {
                refused = true;
                break;
            }
        }
        walked = j;
        shared = SIZE_MAX;
        if (!refused) {
            m->allowed[v->id[k]] = 1;
            kept++;
        }
    }
    if (tw_json_state_complete(s))
        for (size_t i = 0; i < n_eos; i++)
            if (eos[i] < v->n_tokens && !m->allowed[eos[i]]) {
                m->allowed[eos[i]] = 1;
                kept++;
            }
    return kept;
}

size_t tw_json_mask_logits(tw_json_masker *m, const tw_json_state *s, const uint32_t *eos,
                           size_t n_eos, float *logits, size_t n_logits)
{
    size_t kept = walk(m, s, eos, n_eos);
    const uint32_t n_tokens = m->v->n_tokens;
    for (size_t i = 0; i < n_logits; i++)
        if (i >= n_tokens || !m->allowed[i])
            logits[i] = -INFINITY;
    return kept;
}

size_t tw_json_mask_allowed(tw_json_masker *m, const tw_json_state *s, const uint32_t *eos,
                            size_t n_eos, uint8_t *allowed, size_t n_allowed)
{
    size_t kept = walk(m, s, eos, n_eos);
    for (size_t i = 0; i < n_allowed; i++)
        allowed[i] = i < m->v->n_tokens && m->allowed[i];
    return kept;
}
