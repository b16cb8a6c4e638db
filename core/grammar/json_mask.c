/* The vocabulary side of constrained decoding (tw/json_mask.h). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "json_internal.h"
#include "tw/json_mask.h"

#define NOT_PLAIN UINT32_MAX

/* Tokens in byte order. */
typedef struct token_list {
    uint32_t n;
    uint32_t *id;
    const char **bytes;
    uint16_t *len;
    uint16_t *lcp;   /* bytes shared with the token before */
    uint32_t *group; /* the first token after this one whose first byte differs */
    uint32_t *chars; /* plain list: characters of the run */
} token_list;

/* Plain tokens (whole UTF-8 with no quote, backslash or control byte: what
 * a string body takes as is) apart from the rest, so inside a string body
 * only the rest is walked; plain_ids marks them by id, for a string body
 * without a length bound. */
struct tw_json_vocab {
    uint32_t n_tokens; /* the tokenizer's vocabulary */
    token_list plain, other;
    uint8_t *plain_ids;
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
        const unsigned c = p[i];
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x20 || c == '"' || c == '\\')
            return NOT_PLAIN;
        const int more = c < 0x80 ? 0 : json_utf8_lead(c, &lo, &hi);
        if (more < 0 || i + 1 + (size_t)more > n)
            return NOT_PLAIN;
        for (int k = 1; k <= more; k++) {
            unsigned b = p[i + k];
            if (b < lo || b > hi)
                return NOT_PLAIN;
            lo = 0x80;
            hi = 0xBF;
        }
        i += 1 + (size_t)more;
    }
    return chars;
}

static void list_free(token_list *l)
{
    free(l->id);
    free(l->bytes);
    free(l->len);
    free(l->lcp);
    free(l->group);
    free(l->chars);
}

void tw_json_vocab_free(tw_json_vocab *v)
{
    if (!v)
        return;
    list_free(&v->plain);
    list_free(&v->other);
    free(v->plain_ids);
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

/* Fills l from sorted entries e[0..n). */
static bool list_fill(token_list *l, const entry *e, uint32_t n, bool plain)
{
    const size_t cap = n ? n : 1;
    l->n = n;
    l->id = malloc(cap * sizeof *l->id);
    l->bytes = malloc(cap * sizeof *l->bytes);
    l->len = malloc(cap * sizeof *l->len);
    l->lcp = malloc(cap * sizeof *l->lcp);
    l->group = malloc(cap * sizeof *l->group);
    l->chars = plain ? malloc(cap * sizeof *l->chars) : NULL;
    if (!l->id || !l->bytes || !l->len || !l->lcp || !l->group || (plain && !l->chars))
        return false;
    for (uint32_t k = 0; k < n; k++) {
        l->id[k] = e[k].id;
        l->bytes[k] = e[k].bytes;
        l->len[k] = (uint16_t)e[k].len;
        uint32_t shared = 0;
        if (k > 0) {
            uint32_t m = e[k].len < e[k - 1].len ? e[k].len : e[k - 1].len;
            while (shared < m && e[k].bytes[shared] == e[k - 1].bytes[shared])
                shared++;
        }
        l->lcp[k] = (uint16_t)shared;
        if (plain)
            l->chars[k] = plain_chars((const unsigned char *)e[k].bytes, e[k].len);
    }
    for (uint32_t k = n; k-- > 0;)
        l->group[k] = (k + 1 < n && l->lcp[k + 1] > 0) ? l->group[k + 1] : k + 1;
    return true;
}

tw_status tw_json_vocab_build(const tw_tokenizer *tok, const uint32_t *exclude, size_t n_exclude,
                              tw_json_vocab **out, tw_err *err)
{
    *out = NULL;
    const uint32_t n_tokens = tw_tokenizer_vocab_size(tok);
    entry *e = malloc((n_tokens ? n_tokens : 1) * sizeof *e);
    tw_json_vocab *v = calloc(1, sizeof *v);
    if (v)
        v->plain_ids = calloc(n_tokens ? n_tokens : 1, 1);
    if (!e || !v || !v->plain_ids) {
        free(e);
        tw_json_vocab_free(v);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory for the JSON token index");
    }
    /* plain tokens first, then the rest, each run sorted by bytes */
    uint32_t n_plain = 0, n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t id = 0; id < n_tokens; id++) {
            if (!tw_json_vocab_has(tok, id, exclude, n_exclude))
                continue;
            size_t len;
            const char *b = tw_tokenizer_token_bytes(tok, id, &len);
            bool plain = plain_chars((const unsigned char *)b, len) != NOT_PLAIN;
            if (plain != (pass == 0))
                continue;
            e[n++] = (entry){.bytes = b, .len = (uint32_t)len, .id = id};
            v->plain_ids[id] = plain;
            n_plain += plain;
            if (len > v->max_len)
                v->max_len = (uint32_t)len;
        }
    qsort(e, n_plain, sizeof *e, by_bytes);
    qsort(e + n_plain, n - n_plain, sizeof *e, by_bytes);
    v->n_tokens = n_tokens;
    bool ok = list_fill(&v->plain, e, n_plain, true) &&
              list_fill(&v->other, e + n_plain, n - n_plain, false);
    free(e);
    if (!ok) {
        tw_json_vocab_free(v);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory for the JSON token index");
    }
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

/* Marks the tokens of l that s takes in m->allowed; returns how many.
 * The states of the last token walked are kept per byte, so the next
 * token starts from the bytes it shares with it; a token that shares a
 * refused byte is refused without a walk, and a refused first byte skips
 * its whole group. */
static size_t walk_list(tw_json_masker *m, const token_list *l)
{
    size_t kept = 0, walked = 0, shared = SIZE_MAX;
    bool refused = false;
    for (uint32_t k = 0; k < l->n; k++) {
        if (k > 0 && l->lcp[k] < shared)
            shared = l->lcp[k];
        if (refused && shared > walked)
            continue;
        size_t j = shared < walked ? shared : walked;
        const unsigned char *b = (const unsigned char *)l->bytes[k];
        refused = false;
        for (; j < l->len[k]; j++) {
            tw_json_state_copy(&m->st[j + 1], &m->st[j]);
            if (!tw_json_state_feed_byte(&m->st[j + 1], b[j])) {
                refused = true;
                break;
            }
        }
        walked = j;
        shared = SIZE_MAX;
        if (!refused) {
            m->allowed[l->id[k]] = 1;
            kept++;
        } else if (j == 0) {
            k = l->group[k] - 1; /* the loop's k++ lands on the next group */
            shared = 0;
        }
    }
    return kept;
}

/* Marks m->allowed. */
static size_t walk(tw_json_masker *m, const tw_json_state *s, const uint32_t *eos, size_t n_eos)
{
    const tw_json_vocab *v = m->v;
    uint32_t room = 0;
    size_t kept = 0;
    tw_json_state_copy(&m->st[0], s);
    if (!tw_json_state_in_plain_string(s, &room)) {
        memset(m->allowed, 0, v->n_tokens);
        kept = walk_list(m, &v->plain);
    } else if (room == UINT32_MAX) {
        memcpy(m->allowed, v->plain_ids, v->n_tokens);
        kept = v->plain.n;
    } else {
        memset(m->allowed, 0, v->n_tokens);
        for (uint32_t k = 0; k < v->plain.n; k++)
            if (v->plain.chars[k] <= room) {
                m->allowed[v->plain.id[k]] = 1;
                kept++;
            }
    }
    kept += walk_list(m, &v->other);
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
