/* Values that must differ: the keys of an open object and the items of an
 * array with uniqueItems. Each is kept as a record in the matcher state's
 * kbuf (a length byte, then its bytes), and two values are equal as JSON
 * when their records are: strings are compared decoded, numbers by value
 * (1, 1.0 and 10e-1 alike, -0 as 0), and other literals (true, false,
 * null, and enum values that are objects or arrays) by their compact text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_match.h"

bool json_rec_append(tw_json_state *s, const void *p, size_t k)
{
    if (s->kcur + k > JREC_MAX || (size_t)s->klen + 1 + s->kcur + k > TW_JSON_KEY_BYTES)
        return false;
    memcpy(s->kbuf + s->klen + 1 + s->kcur, p, k);
    s->kcur = (uint16_t)(s->kcur + k);
    return true;
}

bool json_rec_seen(const tw_json_state *s, size_t start, const unsigned char *rec, size_t len)
{
    for (size_t o = start; o < s->klen; o += 1u + s->kbuf[o])
        if (s->kbuf[o] == len && memcmp(s->kbuf + o + 1, rec, len) == 0)
            return true;
    return false;
}

bool json_rec_commit(tw_json_state *s)
{
    if ((size_t)s->klen + 1 + s->kcur > TW_JSON_KEY_BYTES)
        return false;
    s->kbuf[s->klen] = (unsigned char)s->kcur;
    s->klen = (uint16_t)(s->klen + 1 + s->kcur);
    s->kcur = 0;
    return true;
}

/* ------------------------------------------------------------ set items */

bool json_set_open(const tw_json_state *s)
{
    if (s->depth < 2)
        return false;
    const tw_json_frame *a = &s->f[s->depth - 2];
    return a->kind == FK_ARRAY && s->g->nodes[a->node].unique && !(a->bits & JSET_UNTRACKED);
}

tw_json_frame *json_set_of(tw_json_state *s)
{
    return json_set_open(s) ? &s->f[s->depth - 2] : NULL;
}

bool json_set_seen(const tw_json_state *s, const tw_json_frame *a)
{
    return json_rec_seen(s, json_set_start(a), s->kbuf + s->klen + 1, s->kcur);
}

void json_set_append(tw_json_state *s, tw_json_frame *a, const void *p, size_t k)
{
    if (!json_rec_append(s, p, k))
        a->bits |= JSET_UNTRACKED;
}

void json_set_commit(tw_json_state *s, tw_json_frame *a)
{
    if (!json_rec_commit(s))
        a->bits |= JSET_UNTRACKED;
    s->kcur = 0;
}

void json_set_item_start(tw_json_state *s, char tag)
{
    tw_json_frame *a = json_set_of(s);
    if (a) {
        s->kcur = 0;
        json_set_append(s, a, &tag, 1);
    }
}

/* ------------------------------------------------------------- numbers */

size_t json_number_canonical(const unsigned char *t, size_t n, unsigned char *out, size_t cap)
{
    /* the value is digits x 10^exp: the integer and fraction digits run
     * together, the exponent less the fraction's length */
    char digits[TW_JSON_MAX_NUMBER + 1];
    size_t nd = 0, i = 0;
    bool neg = false, frac = false;
    int exp = 0;
    if (i < n && t[i] == '-')
        neg = true, i++;
    for (; i < n && t[i] != 'e' && t[i] != 'E'; i++) {
        if (t[i] == '.') {
            frac = true;
            continue;
        }
        if (t[i] < '0' || t[i] > '9' || nd >= TW_JSON_MAX_NUMBER)
            return 0;
        if (nd == 0 && t[i] == '0') { /* a leading zero carries nothing */
            if (frac)
                exp--;
            continue;
        }
        digits[nd++] = (char)t[i];
        if (frac)
            exp--;
    }
    if (i < n) {
        int e = 0, sign = 1;
        i++;
        if (i < n && (t[i] == '+' || t[i] == '-'))
            sign = t[i++] == '-' ? -1 : 1;
        for (; i < n; i++) {
            if (t[i] < '0' || t[i] > '9' || e > 10000)
                return 0;
            e = e * 10 + (t[i] - '0');
        }
        exp += sign * e;
    }
    while (nd > 0 && digits[nd - 1] == '0')
        nd--, exp++;
    int w;
    if (nd == 0)
        w = snprintf((char *)out, cap, "0");
    else
        w = snprintf((char *)out, cap, "%s%.*se%d", neg ? "-" : "", (int)nd, digits, exp);
    return w > 0 && (size_t)w < cap ? (size_t)w : 0;
}

/* ------------------------------------------------------------- literals */

static bool hex4(const char *p, const char *end, uint32_t *v)
{
    *v = 0;
    for (int k = 0; k < 4; k++) {
        const int d = p + k < end ? json_hex_value((unsigned char)p[k]) : -1;
        if (d < 0)
            return false;
        *v = *v << 4 | (uint32_t)d;
    }
    return true;
}

/* The UTF-8 bytes of code point cp into out (4 bytes of room); how many. */
size_t json_utf8_of(uint32_t cp, unsigned char out[4])
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | cp >> 6);
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | cp >> 12);
        out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | cp >> 18);
    out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A JSON string's text (quotes included, as jansson writes it) decoded
 * after out[0]; the record's length, 0 when it does not fit. */
static size_t string_record(const char *p, size_t len, unsigned char *out)
{
    const char *end = p + len - 1; /* the closing quote */
    size_t k = 1;
    for (p++; p < end;) {
        unsigned char u[4];
        size_t m = 1;
        if (*p != '\\') {
            u[0] = (unsigned char)*p++;
        } else if (p + 1 < end && p[1] != 'u') {
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *at = p[1] ? strchr(from, p[1]) : NULL;
            if (!at)
                return 0;
            u[0] = (unsigned char)to[at - from];
            p += 2;
        } else {
            uint32_t cp, lo;
            if (!hex4(p + 2, end, &cp))
                return 0;
            p += 6;
            if (cp >= 0xD800 && cp <= 0xDBFF && p + 1 < end && p[0] == '\\' && p[1] == 'u' &&
                hex4(p + 2, end, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
                cp = 0x10000u + ((cp - 0xD800u) << 10) + (lo - 0xDC00u);
                p += 6;
            }
            m = json_utf8_of(cp, u);
        }
        if (k + m > JREC_MAX)
            return 0;
        memcpy(out + k, u, m);
        k += m;
    }
    return k;
}

size_t json_literal_record(const jlit *l, unsigned char out[JREC_MAX])
{
    const unsigned char c = (unsigned char)l->text[0];
    if (c == '"') {
        out[0] = 's';
        return l->len >= 2 ? string_record(l->text, l->len, out) : 0;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        out[0] = 'n';
        const size_t w =
            json_number_canonical((const unsigned char *)l->text, l->len, out + 1, JREC_MAX - 1);
        return w ? 1 + w : 0;
    }
    if (l->len + 1 > JREC_MAX)
        return 0;
    out[0] = 'l';
    memcpy(out + 1, l->text, l->len);
    return 1 + l->len;
}

/* ------------------------------------------------------------- compiling */

/* Adds node's values to *count (UINT32_MAX: unbounded), its literals'
 * records into seen (n_seen of them so far) so that a value two literals
 * share counts once; false when node can hold an object or an array. */
static bool domain_of(const tw_json_grammar *g, uint32_t node, int hops, uint32_t *count,
                      unsigned char (*seen)[JREC_MAX], size_t *lens, size_t *n_seen, size_t cap,
                      bool *numbers)
{
    if (node == JN_NONE || hops > 16)
        return true;
    const jnode *n = &g->nodes[node];
    switch ((jnode_kind)n->kind) {
    case JN_UNION:
        for (int k = 0; k < JC_COUNT; k++) {
            bool again = false; /* one node may read several classes */
            for (int j = 0; j < k; j++)
                again |= n->alt[j] == n->alt[k];
            if (!again &&
                !domain_of(g, n->alt[k], hops + 1, count, seen, lens, n_seen, cap, numbers))
                return false;
        }
        return true;
    case JN_STRING:
        if (n->max > 0)
            *count = UINT32_MAX;
        else if (*count != UINT32_MAX)
            *count += 1; /* only "" */
        return true;
    case JN_NUMBER:
    case JN_INTEGER:
        *numbers = true;
        *count = UINT32_MAX;
        return true;
    case JN_ENUM:
        for (uint32_t i = 0; i < n->n; i++) {
            unsigned char rec[JREC_MAX];
            const size_t len = json_literal_record(&g->lits[n->first + i], rec);
            bool dup = false;
            for (size_t j = 0; len && j < *n_seen && !dup; j++)
                dup = lens[j] == len && memcmp(seen[j], rec, len) == 0;
            if (dup)
                continue;
            if (len && *n_seen < cap) {
                memcpy(seen[*n_seen], rec, len);
                lens[(*n_seen)++] = len;
            }
            if (*count != UINT32_MAX)
                *count += 1;
        }
        return true;
    case JN_OBJECT:
    case JN_ARRAY:
    case JN_TAGGED:
    case JN_KEYED:
        return false;
    }
    return false;
}

/* Literal records a domain compares at most: the literals of one union's
 * classes. */
#define DOMAIN_LITERALS (JC_COUNT * TW_JSON_MAX_ENUM)

int json_unique_domain(const tw_json_grammar *g, uint32_t node, uint32_t *count, bool *numbers)
{
    unsigned char(*seen)[JREC_MAX] = malloc(DOMAIN_LITERALS * sizeof *seen);
    size_t *lens = malloc(DOMAIN_LITERALS * sizeof *lens), n_seen = 0;
    *count = 0;
    *numbers = false;
    int r = JU_NOMEM;
    if (seen && lens)
        r = domain_of(g, node, 0, count, seen, lens, &n_seen, DOMAIN_LITERALS, numbers)
                ? JU_OK
                : JU_CONTAINERS;
    free(seen);
    free(lens);
    return r;
}
