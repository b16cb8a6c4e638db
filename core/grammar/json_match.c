/* The byte matcher over compiled grammar nodes: a stack of frames, one per
 * value being read. A value's frame replaces the "value expected" frame
 * that its first byte resolved; a finished value pops itself, and a number
 * (which only a following byte ends) pops and hands that byte on. */
#include <string.h>

#include "json_internal.h"

enum frame_kind { FK_VALUE = 0, FK_OBJECT, FK_ARRAY, FK_STRING, FK_NUMBER, FK_LIT };

enum { OP_START = 0, OP_NEXT, OP_KEY, OP_COLON, OP_AFTER };
enum { AP_START = 0, AP_NEXT, AP_AFTER };
/* A pair's second half is read in SP_LOW_* phases: \uDC00-\uDFFF only. */
enum { SP_BODY = 0, SP_ESC, SP_HEX, SP_UTF8, SP_PAIR_BS, SP_PAIR_U, SP_LOW_HEX };

static bool is_ws(unsigned char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

void tw_json_state_init(tw_json_state *s, const tw_json_grammar *g)
{
    s->g = g;
    s->depth = 1;
    s->tail = 0;
    s->ws = 0;
    s->plen = 0;
    s->klen = s->kcur = s->khigh = 0;
    memset(&s->f[0], 0, sizeof s->f[0]);
    s->f[0].kind = FK_VALUE;
    s->f[0].node = g->root;
    if (g->raw) { /* the choice's first byte starts the answer: no whitespace */
        const uint32_t n = g->nodes[g->root].n;
        s->f[0].kind = FK_LIT;
        s->f[0].bits = n >= 64 ? UINT64_MAX : (1ull << n) - 1;
    }
}

void tw_json_state_copy(tw_json_state *dst, const tw_json_state *src)
{
    dst->g = src->g;
    dst->depth = src->depth;
    dst->tail = src->tail;
    dst->ws = src->ws;
    dst->plen = src->plen;
    dst->klen = src->klen;
    dst->kcur = src->kcur;
    dst->khigh = src->khigh;
    memcpy(dst->f, src->f, src->depth * sizeof src->f[0]);
    memcpy(dst->pbuf, src->pbuf, src->plen);
    const size_t keys = (size_t)src->klen + (src->kcur ? 1u + src->kcur : 0u);
    memcpy(dst->kbuf, src->kbuf, keys < sizeof dst->kbuf ? keys : sizeof dst->kbuf);
}

static bool push(tw_json_state *s, uint8_t kind, uint32_t node)
{
    if (s->depth >= TW_JSON_MAX_DEPTH)
        return false;
    tw_json_frame *f = &s->f[s->depth++];
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->node = node;
    return true;
}

static bool take_ws(tw_json_state *s)
{
    if (s->ws >= TW_JSON_MAX_WS)
        return false;
    s->ws++;
    return true;
}

/* ------------------------------------------------------------- strings */

/* Starts one character (ASCII, an escape or a UTF-8 lead byte), within
 * maxLength. */
static bool string_char(const tw_json_grammar *g, tw_json_frame *f)
{
    if (f->count >= g->nodes[f->node].max)
        return false;
    f->count++;
    return true;
}

static bool body_byte(tw_json_state *s, tw_json_frame *f, const jnode *n, unsigned char c);

/* A string held to a pattern: written without escapes, each whole
 * character asked of the pattern with the string so far (json_pattern.c);
 * the character that fills maxLength, or leaves no room in the state's
 * copy of the string for another, must make a match, as the closing quote
 * must. */
static bool pattern_byte(tw_json_state *s, tw_json_frame *f, const jnode *n, unsigned char c)
{
    const jpattern *p = &s->g->patterns[n->extra];
    if (f->phase == SP_BODY) {
        if (c == '"') {
            if (f->count < n->min || json_pattern_test(p, s->pbuf, s->plen, true) != JP_MATCH)
                return false;
            s->plen = 0;
            s->depth--;
            return true;
        }
        if (c == '\\' || (c >= 0x80 && p->ascii))
            return false;
    }
    if (s->plen >= TW_JSON_PATTERN_BYTES || !body_byte(s, f, n, c))
        return false;
    s->pbuf[s->plen++] = c;
    if (f->phase != SP_BODY)
        return true;
    const bool last = f->count >= n->max || s->plen + 4 > TW_JSON_PATTERN_BYTES;
    const int r = json_pattern_test(p, s->pbuf, s->plen, last);
    return r == JP_MATCH || (r == JP_VIABLE && !last);
}

/* An open object's frame flag (in its bits, which only objects with
 * properties use otherwise): its keys no longer fit the state's buffer, so
 * they are not compared. */
#define KEYS_UNTRACKED 1u

/* Appends k decoded bytes to the key being read, or gives up on the
 * object's keys when they do not fit. */
static void key_append(tw_json_state *s, tw_json_frame *obj, const unsigned char *p, size_t k)
{
    if (s->kcur + k > 255 || (size_t)s->klen + 1 + s->kcur + k > TW_JSON_KEY_BYTES) {
        obj->bits |= KEYS_UNTRACKED;
        return;
    }
    memcpy(s->kbuf + s->klen + 1 + s->kcur, p, k);
    s->kcur = (uint16_t)(s->kcur + k);
}

/* Whether the key just read is one of the object's keys before it (they
 * start at obj->count in kbuf, each a length byte and the key). */
static bool key_seen(const tw_json_state *s, const tw_json_frame *obj)
{
    const unsigned char *key = s->kbuf + s->klen + 1;
    for (size_t o = obj->count; o < s->klen; o += 1u + s->kbuf[o])
        if (s->kbuf[o] == s->kcur && memcmp(s->kbuf + o + 1, key, s->kcur) == 0)
            return true;
    return false;
}

/* The UTF-8 form of code point cp into out; its length. */
static size_t utf8_of(uint32_t cp, unsigned char out[4])
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

/* A key of an open object: read as any string is, its text decoded into
 * the state's key buffer (escapes as the characters they stand for), and
 * its closing quote taken only when the object has no such key yet. */
static bool key_byte(tw_json_state *s, tw_json_frame *f, const jnode *n, unsigned char c)
{
    tw_json_frame *obj = &s->f[s->depth - 2];
    const bool tracked = !(obj->bits & KEYS_UNTRACKED);
    const uint8_t phase = f->phase;
    if (phase == SP_BODY && c == '"') {
        if (f->count < n->min || (tracked && key_seen(s, obj)))
            return false;
        if (tracked && (size_t)s->klen + 1 + s->kcur > TW_JSON_KEY_BYTES) {
            obj->bits |= KEYS_UNTRACKED;
        } else if (tracked) {
            s->kbuf[s->klen] = (unsigned char)s->kcur;
            s->klen = (uint16_t)(s->klen + 1 + s->kcur);
        }
        s->kcur = 0;
        s->depth--;
        return true;
    }
    if (!body_byte(s, f, n, c))
        return false;
    if (!tracked)
        return true;
    unsigned char out[4];
    size_t k = 0;
    switch (phase) {
    case SP_BODY:
    case SP_UTF8:
        if (c != '\\')
            out[k++] = c;
        break;
    case SP_ESC:
        if (c != 'u') {
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            out[k++] = (unsigned char)to[strchr(from, c) - from];
        }
        break;
    case SP_HEX:
        if (f->pos == 4 && f->phase == SP_PAIR_BS)
            s->khigh = (uint16_t)f->bits;
        else if (f->pos == 4)
            k = utf8_of((uint32_t)f->bits, out);
        break;
    case SP_LOW_HEX:
        if (f->pos == 4)
            k = utf8_of(0x10000u + ((uint32_t)(s->khigh - 0xD800u) << 10) +
                            ((uint32_t)f->bits - 0xDC00u),
                        out);
        break;
    }
    if (k)
        key_append(s, obj, out, k);
    return true;
}

static bool string_byte(tw_json_state *s, tw_json_frame *f, unsigned char c)
{
    const tw_json_grammar *g = s->g;
    const jnode *n = &g->nodes[f->node];
    if (n->extra != JN_NONE)
        return pattern_byte(s, f, n, c);
    if (f->node == g->key_string)
        return key_byte(s, f, n, c);
    if (n->format != JF_NONE) {
        /* a formatted string is plain ASCII, position by position */
        if (c == '"') {
            if (!json_format_final((jformat)n->format, f->pos))
                return false;
            s->depth--;
            return true;
        }
        uint32_t mem = (uint32_t)f->bits;
        int next = json_format_step((jformat)n->format, f->pos, &mem, c);
        if (next < 0)
            return false;
        f->pos = (uint16_t)next;
        f->bits = mem;
        return true;
    }
    return body_byte(s, f, n, c);
}

/* A byte of a string without a format: the quote, escapes, UTF-8. */
static bool body_byte(tw_json_state *s, tw_json_frame *f, const jnode *n, unsigned char c)
{
    const tw_json_grammar *g = s->g;
    switch (f->phase) {
    case SP_BODY:
        if (c == '"') {
            if (f->count < n->min)
                return false;
            s->depth--;
            return true;
        }
        if (c < 0x20)
            return false;
        if (c == '\\') {
            if (!string_char(g, f))
                return false;
            f->phase = SP_ESC;
            return true;
        }
        if (c < 0x80)
            return string_char(g, f);
        {
            unsigned lo = 0x80, hi = 0xBF, more;
            if (c >= 0xC2 && c <= 0xDF)
                more = 1;
            else if (c >= 0xE0 && c <= 0xEF)
                more = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
            else if (c >= 0xF0 && c <= 0xF4)
                more = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
            else
                return false;
            if (!string_char(g, f))
                return false;
            f->phase = SP_UTF8;
            f->pos = (uint16_t)more;
            f->bits = lo | hi << 8;
            return true;
        }
    case SP_UTF8:
        if (c < (f->bits & 0xFF) || c > (f->bits >> 8 & 0xFF))
            return false;
        f->bits = 0x80 | 0xBF << 8;
        if (--f->pos == 0)
            f->phase = SP_BODY;
        return true;
    case SP_ESC:
        if (c == 'u') {
            f->phase = SP_HEX;
            f->pos = 0;
            f->bits = 0;
            return true;
        }
        if (!strchr("\"\\/bfnrt", c) || c == '\0')
            return false;
        f->phase = SP_BODY;
        return true;
    case SP_HEX:
    case SP_LOW_HEX: {
        int v = hex_value(c);
        if (v < 0)
            return false;
        f->bits = f->bits << 4 | (unsigned)v;
        f->pos++;
        const bool low = f->phase == SP_LOW_HEX;
        if (f->pos == 1 && low && v != 0xD)
            return false;
        if (f->pos == 2) {
            /* a lone low half, or a high half where a low one must be */
            const bool is_low = f->bits >= 0xDC && f->bits <= 0xDF;
            if (low != is_low)
                return false;
        }
        if (f->pos == 4) {
            if (f->bits == 0) /* NUL would cut the string for C readers */
                return false;
            f->phase = !low && f->bits >= 0xD800 && f->bits <= 0xDBFF ? SP_PAIR_BS : SP_BODY;
        }
        return true;
    }
    case SP_PAIR_BS:
        if (c != '\\')
            return false;
        f->phase = SP_PAIR_U;
        return true;
    case SP_PAIR_U:
        if (c != 'u')
            return false;
        f->phase = SP_LOW_HEX;
        f->pos = 0;
        f->bits = 0;
        return true;
    }
    return false;
}

/* ------------------------------------------------------------- numbers */

/* Integers of more digits may not fit a 64-bit integer, which strict
 * parsers refuse; a number may go on past them with a fraction or an
 * exponent (a double). */
#define MAX_INT_DIGITS 18

/* For numbers, bits counts the integer part's digits and count the
 * exponent's. */
static bool number_accepting(const tw_json_grammar *g, const tw_json_frame *f)
{
    const uint32_t b = g->nodes[f->node].extra;
    if (b != JN_NONE)
        return json_bounded_accepting(&g->bounds[b], f);
    return f->phase == NP_ZERO || (f->phase == NP_INT && f->bits <= MAX_INT_DIGITS) ||
           f->phase == NP_FRAC || f->phase == NP_EXP;
}

/* 1: taken; 0: ends the number (the byte goes to the parent); -1: refused. */
static int number_byte(const tw_json_grammar *g, tw_json_frame *f, unsigned char c)
{
    const bool digit = c >= '0' && c <= '9';
    const bool integer = g->nodes[f->node].kind == JN_INTEGER;
    if (g->nodes[f->node].extra != JN_NONE)
        return json_bounded_byte(&g->bounds[g->nodes[f->node].extra], integer, f, c);
    /* a byte that leaves the number unfinished needs room for what must
     * follow: one digit, or a dot and a digit after a long integer part */
    const unsigned room = TW_JSON_MAX_NUMBER - f->pos;
    uint8_t next = 0xFF;
    unsigned need = 2;
    switch (f->phase) {
    case NP_START:
        if (c == '-')
            next = NP_MINUS;
        else if (digit)
            next = c == '0' ? NP_ZERO : NP_INT, need = 1;
        break;
    case NP_MINUS:
        if (digit)
            next = c == '0' ? NP_ZERO : NP_INT, need = 1;
        break;
    case NP_INT:
        if (digit && (f->bits < MAX_INT_DIGITS || !integer)) {
            next = NP_INT;
            need = f->bits < MAX_INT_DIGITS ? 1 : 3;
            break;
        }
        /* fall through */
    case NP_ZERO:
        if (!integer && c == '.')
            next = NP_DOT;
        else if (!integer && (c == 'e' || c == 'E'))
            next = NP_E;
        break;
    case NP_DOT:
        if (digit)
            next = NP_FRAC, need = 1;
        break;
    case NP_FRAC:
        if (digit)
            next = NP_FRAC, need = 1;
        else if (c == 'e' || c == 'E')
            next = NP_E;
        break;
    case NP_E:
        if (c == '+' || c == '-')
            next = NP_ESIGN;
        else if (digit)
            next = NP_EXP, need = 1;
        break;
    case NP_ESIGN:
    case NP_EXP:
        /* two exponent digits keep every number a finite double, which
         * strict parsers insist on */
        if (digit && f->count < 2)
            next = NP_EXP, need = 1;
        break;
    }
    if (next != 0xFF && room >= need) {
        if (next == NP_EXP)
            f->count++;
        if (next == NP_INT || next == NP_ZERO)
            f->bits++;
        f->phase = next;
        f->pos++;
        return 1;
    }
    return number_accepting(g, f) ? 0 : -1;
}

/* ------------------------------------------------------------ literals */

/* A tagged union's tag value is read: its object goes on as the object
 * that value picks, past the tag (its first property). */
static void literal_done(tw_json_state *s, const tw_json_frame *f)
{
    if (s->depth < 2)
        return;
    const tw_json_grammar *g = s->g;
    tw_json_frame *parent = &s->f[s->depth - 2];
    const jnode *pn = &g->nodes[parent->node];
    if (parent->kind != FK_OBJECT || pn->kind != JN_TAGGED)
        return;
    const jnode *en = &g->nodes[f->node];
    for (uint32_t i = 0; i < en->n; i++)
        if ((f->bits >> i & 1) && g->lits[en->first + i].len == f->pos) {
            parent->node = g->tag_alts[pn->first + i];
            parent->prop = 1;
            return;
        }
}

/* 1: taken; 0: a candidate ended before this byte (it goes to the
 * parent); -1: refused. */
static int literal_byte(tw_json_state *s, tw_json_frame *f, unsigned char c)
{
    const jnode *n = &s->g->nodes[f->node];
    const jlit *lits = s->g->lits + n->first;
    uint64_t next = 0;
    bool ended = false, longer = false;
    for (uint32_t i = 0; i < n->n; i++) {
        if (!(f->bits >> i & 1))
            continue;
        if (lits[i].len == f->pos)
            ended = true;
        else if ((unsigned char)lits[i].text[f->pos] == c)
            next |= 1ull << i;
    }
    if (!next)
        return ended ? 0 : -1;
    f->bits = next;
    f->pos++;
    for (uint32_t i = 0; i < n->n; i++)
        if ((next >> i & 1) && lits[i].len > f->pos)
            longer = true;
    if (!longer) {
        literal_done(s, f);
        s->depth--;
    }
    return 1;
}

static bool literal_complete(const tw_json_grammar *g, const tw_json_frame *f)
{
    const jnode *n = &g->nodes[f->node];
    for (uint32_t i = 0; i < n->n; i++)
        if ((f->bits >> i & 1) && g->lits[n->first + i].len == f->pos)
            return true;
    return false;
}

/* ------------------------------------------------------------- objects */

/* An object's properties. A tagged union reads as an object of one
 * property, the tag, until the tag's value picks the object. */
static uint32_t prop_count(const jnode *n)
{
    return n->kind == JN_TAGGED ? 1 : n->n;
}

static const jlit *prop_key(const tw_json_grammar *g, const jnode *n, uint32_t i)
{
    return &g->lits[n->kind == JN_TAGGED ? n->min : g->props[n->first + i].key];
}

static uint32_t prop_value(const tw_json_grammar *g, const jnode *n, uint32_t i)
{
    return n->kind == JN_TAGGED ? n->extra : g->props[n->first + i].node;
}

static bool prop_required(const tw_json_grammar *g, const jnode *n, uint32_t i)
{
    return n->kind == JN_TAGGED || g->props[n->first + i].required;
}

/* Keys that may come next: the properties from prop on, up to and
 * including the first required one. */
static uint64_t next_keys(const tw_json_grammar *g, const jnode *n, uint32_t prop)
{
    uint64_t m = 0;
    for (uint32_t i = prop; i < prop_count(n); i++) {
        m |= 1ull << i;
        if (prop_required(g, n, i))
            break;
    }
    return m;
}

static bool may_close(const jnode *n, const tw_json_frame *f)
{
    return prop_count(n) == 0 || f->prop >= n->close_at;
}

static bool object_byte(tw_json_state *s, tw_json_frame *f, unsigned char c)
{
    const tw_json_grammar *g = s->g;
    const jnode *n = &g->nodes[f->node];
    switch (f->phase) {
    case OP_START:
    case OP_NEXT:
        if (is_ws(c))
            return take_ws(s);
        if (c == '}' && f->phase == OP_START && may_close(n, f)) {
            s->klen = (uint16_t)f->count; /* its keys are done with */
            s->depth--;
            return true;
        }
        if (c != '"')
            return false;
        if (prop_count(n) > 0) {
            f->bits = next_keys(g, n, f->prop);
            f->pos = 1; /* every key's text starts with its quote */
            f->phase = OP_KEY;
            return f->bits != 0;
        }
        if (n->extra == JN_NONE)
            return false;
        f->phase = OP_COLON;
        s->kcur = 0;
        return push(s, FK_STRING, g->key_string);
    case OP_KEY: {
        uint64_t next = 0;
        uint32_t done = UINT32_MAX;
        for (uint32_t i = 0; i < prop_count(n); i++) {
            const jlit *k = prop_key(g, n, i);
            if ((f->bits >> i & 1) && k->len > f->pos && (unsigned char)k->text[f->pos] == c) {
                next |= 1ull << i;
                if (k->len == f->pos + 1u)
                    done = i;
            }
        }
        if (!next)
            return false;
        f->bits = next;
        f->pos++;
        if (done != UINT32_MAX) {
            f->prop = (uint16_t)(done + 1);
            f->phase = OP_COLON;
        }
        return true;
    }
    case OP_COLON:
        if (is_ws(c))
            return take_ws(s);
        if (c != ':')
            return false;
        f->phase = OP_AFTER;
        return push(s, FK_VALUE, prop_count(n) > 0 ? prop_value(g, n, f->prop - 1u) : n->extra);
    case OP_AFTER:
        if (is_ws(c))
            return take_ws(s);
        if (c == ',' && (prop_count(n) == 0 || f->prop < prop_count(n))) {
            f->phase = OP_NEXT;
            return true;
        }
        if (c == '}' && may_close(n, f)) {
            s->klen = (uint16_t)f->count;
            s->depth--;
            return true;
        }
        return false;
    }
    return false;
}

/* -------------------------------------------------------------- values */

/* The node that reads a value starting with c, through unions. */
static uint32_t resolve(const tw_json_grammar *g, uint32_t node, unsigned char c)
{
    for (int hops = 0; node != JN_NONE && g->nodes[node].kind == JN_UNION; hops++) {
        jclass k = json_class_of(c);
        if (k == JC_COUNT || hops > 16)
            return JN_NONE;
        node = g->nodes[node].alt[k];
    }
    return node;
}

bool tw_json_state_feed_byte(tw_json_state *s, unsigned char c)
{
    const tw_json_grammar *g = s->g;
    if (!is_ws(c))
        s->ws = 0;
    for (;;) {
        if (s->depth == 0) {
            if (s->tail >= g->tail_len || (unsigned char)g->tail[s->tail] != c)
                return false;
            s->tail++;
            return true;
        }
        tw_json_frame *f = &s->f[s->depth - 1];
        switch (f->kind) {
        case FK_VALUE: {
            if (is_ws(c))
                return take_ws(s);
            uint32_t node = resolve(g, f->node, c);
            if (node == JN_NONE)
                return false;
            memset(f, 0, sizeof *f);
            f->node = node;
            switch ((jnode_kind)g->nodes[node].kind) {
            case JN_OBJECT:
            case JN_TAGGED:
                f->kind = FK_OBJECT;
                f->count = s->klen; /* where its keys will start */
                return c == '{';
            case JN_ARRAY:
                f->kind = FK_ARRAY;
                return c == '[';
            case JN_STRING:
                f->kind = FK_STRING;
                s->plen = 0;
                return c == '"';
            case JN_NUMBER:
            case JN_INTEGER:
                f->kind = FK_NUMBER;
                continue;
            case JN_ENUM:
                f->kind = FK_LIT;
                f->bits = g->nodes[node].n >= 64 ? UINT64_MAX : (1ull << g->nodes[node].n) - 1;
                continue;
            case JN_UNION:
                return false;
            }
            return false;
        }
        case FK_STRING:
            return string_byte(s, f, c);
        case FK_OBJECT:
            return object_byte(s, f, c);
        case FK_ARRAY: {
            const jnode *n = &g->nodes[f->node];
            if (is_ws(c))
                return take_ws(s);
            if (f->phase == AP_AFTER) {
                if (c == ',' && f->count < n->max) {
                    f->phase = AP_NEXT;
                    return true;
                }
                if (c == ']' && f->count >= n->min) {
                    s->depth--;
                    return true;
                }
                return false;
            }
            if (c == ']' && f->phase == AP_START && n->min == 0) {
                s->depth--;
                return true;
            }
            if (f->count >= n->max)
                return false;
            /* a tuple's element, or one past it */
            const uint32_t item = f->count < n->n ? g->tuple_items[n->first + f->count] : n->extra;
            f->count++;
            f->phase = AP_AFTER;
            if (item == JN_NONE || !push(s, FK_VALUE, item))
                return false;
            continue;
        }
        case FK_NUMBER:
        case FK_LIT: {
            /* 0: the value ended before c, which goes to the parent */
            int r = f->kind == FK_NUMBER ? number_byte(g, f, c) : literal_byte(s, f, c);
            if (r != 0)
                return r > 0;
            if (f->kind == FK_LIT)
                literal_done(s, f);
            s->depth--;
            continue;
        }
        }
        return false;
    }
}

bool tw_json_state_feed(tw_json_state *s, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!tw_json_state_feed_byte(s, (unsigned char)p[i]))
            return false;
    return true;
}

bool tw_json_state_closed(const tw_json_state *s)
{
    return s->depth == 0 && s->tail == s->g->tail_len;
}

bool tw_json_state_complete(const tw_json_state *s)
{
    if (s->depth == 0)
        return s->tail == s->g->tail_len;
    if (s->depth > 1 || s->g->tail_len)
        return false;
    const tw_json_frame *f = &s->f[0];
    if (f->kind == FK_NUMBER)
        return number_accepting(s->g, f);
    return f->kind == FK_LIT && literal_complete(s->g, f);
}

bool tw_json_state_in_plain_string(const tw_json_state *s, uint32_t *room)
{
    if (s->depth == 0)
        return false;
    const tw_json_frame *f = &s->f[s->depth - 1];
    const jnode *n = &s->g->nodes[f->node];
    if (f->kind != FK_STRING || f->phase != SP_BODY || n->format != JF_NONE || n->extra != JN_NONE)
        return false;
    const uint32_t max = s->g->nodes[f->node].max;
    *room = max == UINT32_MAX ? UINT32_MAX : max - f->count;
    return true;
}
