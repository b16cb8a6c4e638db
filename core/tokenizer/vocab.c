/* Vocabulary storage: token texts, decoded bytes, types, scores, the
 * text -> id hash map and the merge table. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

bool tok_buf_reserve(tok_buf *b, size_t extra)
{
    if (extra > SIZE_MAX / 2 - b->len)
        return false;
    size_t need = b->len + extra;
    if (need <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return false;
    b->p = p;
    b->cap = cap;
    return true;
}

bool tok_buf_append(tok_buf *b, const void *data, size_t n)
{
    if (!tok_buf_reserve(b, n))
        return false;
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    return true;
}

void tok_buf_free(tok_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* FNV-1a folded with a final mix: short keys (tokens are a few bytes) make
 * anything fancier pointless, and the mix spreads the low bits we mask. */
uint64_t tok_hash(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h;
}

static uint64_t hash_pair(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

static size_t table_size_for(size_t n)
{
    size_t size = 16;
    while (size < n * 2 + 1)
        size *= 2;
    return size;
}

/* ---- vocabulary --------------------------------------------------------- */

tw_status tok_vocab_alloc(tok_vocab *v, uint32_t n, bool with_scores, tw_err *err)
{
    if (n == 0 || n > TOK_MAX_VOCAB)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "vocabulary size %u out of range (1..%u)", n,
                         TOK_MAX_VOCAB);
    v->n = n;
    v->tspan = calloc(n, sizeof *v->tspan);
    v->bspan = calloc(n, sizeof *v->bspan);
    v->type = calloc(n, 1);
    v->score = with_scores ? calloc(n, sizeof *v->score) : NULL;
    if (!v->tspan || !v->bspan || !v->type || (with_scores && !v->score))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory for %u tokens", n);
    /* Offset 0 holds an empty string so that ids never set read as "". */
    if (!tok_buf_append(&v->text, "", 1))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    return TW_OK;
}

tw_status tok_vocab_set_text(tok_vocab *v, uint32_t id, const char *s, size_t len, tw_err *err)
{
    if (id >= v->n)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "token id %u out of range", id);
    if (len > TOK_MAX_TOKEN_BYTES)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "token %u is %zu bytes long (limit %u)", id,
                         len, TOK_MAX_TOKEN_BYTES);
    if (v->text.len > UINT32_MAX - len - 1)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "vocabulary text exceeds 4 GiB");
    uint32_t off = (uint32_t)v->text.len;
    if (!tok_buf_append(&v->text, s, len) || !tok_buf_append(&v->text, "", 1))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    v->tspan[id].off = off;
    v->tspan[id].len = (uint32_t)len;
    return TW_OK;
}

bool tok_vocab_build_map(tok_vocab *v)
{
    size_t size = table_size_for(v->n);
    v->map.slots = calloc(size, sizeof *v->map.slots);
    if (!v->map.slots)
        return false;
    v->map.mask = size - 1;
    for (uint32_t id = 0; id < v->n; id++) {
        tok_span sp = v->tspan[id];
        if (sp.len == 0)
            continue;
        const char *s = v->text.p + sp.off;
        size_t i = tok_hash(s, sp.len) & v->map.mask;
        for (;;) {
            uint32_t slot = v->map.slots[i];
            if (slot == 0) {
                v->map.slots[i] = id + 1;
                break;
            }
            tok_span o = v->tspan[slot - 1];
            /* Duplicate text: the first id keeps it, as llama.cpp and HF do
             * for the lookups that matter (added tokens come later). */
            if (o.len == sp.len && memcmp(v->text.p + o.off, s, sp.len) == 0)
                break;
            i = (i + 1) & v->map.mask;
        }
    }
    return true;
}

bool tok_vocab_find(const tok_vocab *v, const char *s, size_t len, uint32_t *id)
{
    if (!v->map.slots || len == 0)
        return false;
    size_t i = tok_hash(s, len) & v->map.mask;
    for (;;) {
        uint32_t slot = v->map.slots[i];
        if (slot == 0)
            return false;
        tok_span o = v->tspan[slot - 1];
        if (o.len == len && memcmp(v->text.p + o.off, s, len) == 0) {
            *id = slot - 1;
            return true;
        }
        i = (i + 1) & v->map.mask;
    }
}

void tok_vocab_free(tok_vocab *v)
{
    tok_buf_free(&v->text);
    tok_buf_free(&v->bytes);
    free(v->tspan);
    free(v->bspan);
    free(v->type);
    free(v->score);
    free(v->map.slots);
    memset(v, 0, sizeof *v);
}

/* ---- merges ------------------------------------------------------------- */

bool tok_merges_init(tok_merges *m, size_t expected)
{
    size_t size = table_size_for(expected ? expected : 1);
    m->keys = malloc(size * sizeof *m->keys);
    m->rank = malloc(size * sizeof *m->rank);
    m->result = malloc(size * sizeof *m->result);
    if (!m->keys || !m->rank || !m->result)
        return false;
    memset(m->keys, 0xff, size * sizeof *m->keys);
    m->mask = size - 1;
    m->count = 0;
    return true;
}

static bool merges_grow(tok_merges *m)
{
    tok_merges bigger = {0};
    if (!tok_merges_init(&bigger, (m->mask + 1)))
        return false;
    for (size_t i = 0; i <= m->mask; i++)
        if (m->keys[i] != UINT64_MAX)
            tok_merges_add(&bigger, (uint32_t)(m->keys[i] >> 32), (uint32_t)m->keys[i], m->rank[i],
                           m->result[i]);
    tok_merges_free(m);
    *m = bigger;
    return true;
}

bool tok_merges_add(tok_merges *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t result)
{
    if ((m->count + 1) * 2 > m->mask + 1 && !merges_grow(m))
        return false;
    uint64_t key = ((uint64_t)a << 32) | b;
    size_t i = hash_pair(key) & m->mask;
    while (m->keys[i] != UINT64_MAX) {
        if (m->keys[i] == key)
            return true;
        i = (i + 1) & m->mask;
    }
    m->keys[i] = key;
    m->rank[i] = rank;
    m->result[i] = result;
    m->count++;
    return true;
}

bool tok_merges_find(const tok_merges *m, uint32_t a, uint32_t b, uint32_t *rank,
                     uint32_t *result)
{
    if (!m->keys)
        return false;
    uint64_t key = ((uint64_t)a << 32) | b;
    size_t i = hash_pair(key) & m->mask;
    while (m->keys[i] != UINT64_MAX) {
        if (m->keys[i] == key) {
            *rank = m->rank[i];
            *result = m->result[i];
            return true;
        }
        i = (i + 1) & m->mask;
    }
    return false;
}

void tok_merges_free(tok_merges *m)
{
    free(m->keys);
    free(m->rank);
    free(m->result);
    memset(m, 0, sizeof *m);
}

/* ---- byte-level symbols --------------------------------------------------- */

/* GPT-2 maps each byte to a printable code point: the printable Latin-1
 * bytes keep their value, the other 68 bytes are numbered upward from
 * U+0100 in byte order. */
static bool byte_is_kept(unsigned b)
{
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
}

uint32_t tok_byte_to_cp(uint8_t b)
{
    if (byte_is_kept(b))
        return b;
    uint32_t n = 0;
    for (unsigned i = 0; i < b; i++)
        if (!byte_is_kept(i))
            n++;
    return 0x100 + n;
}

int tok_cp_to_byte(uint32_t cp)
{
    if (cp < 0x100)
        return byte_is_kept(cp) ? (int)cp : -1;
    if (cp >= 0x100 + 68)
        return -1;
    uint32_t n = 0;
    for (unsigned i = 0; i < 256; i++) {
        if (byte_is_kept(i))
            continue;
        if (0x100 + n == cp)
            return (int)i;
        n++;
    }
    return -1;
}

/* ---- UTF-8 ------------------------------------------------------------------ */

size_t tok_utf8_valid_len(const uint8_t *s, size_t n)
{
    if (n == 0)
        return 0;
    uint8_t c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    uint8_t lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return len;
}

size_t tok_utf8_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

size_t tok_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp)
{
    size_t len = tok_utf8_valid_len(s, n);
    if (len == 1)
        *cp = s[0];
    else if (len == 2)
        *cp = ((uint32_t)(s[0] & 0x1f) << 6) | (s[1] & 0x3f);
    else if (len == 3)
        *cp = ((uint32_t)(s[0] & 0x0f) << 12) | ((uint32_t)(s[1] & 0x3f) << 6) | (s[2] & 0x3f);
    else if (len == 4)
        *cp = ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3f) << 12) |
              ((uint32_t)(s[2] & 0x3f) << 6) | (s[3] & 0x3f);
    return len;
}

bool tok_is_space(uint32_t cp)
{
    return (cp >= 9 && cp <= 13) || cp == 32 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
           cp == 0x205f || cp == 0x3000;
}
