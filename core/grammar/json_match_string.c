/* The matcher's strings: plain ones (escapes and UTF-8 checked), those
 * held to a format or a pattern, the keys of open objects (each kept
 * decoded so that none comes twice) and the string items of sets. */
#include <string.h>

#include "json_match.h"

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

/* Appends k decoded bytes to the key being read, or gives up on the
 * object's keys when they do not fit. */
static void key_append(tw_json_state *s, tw_json_frame *obj, const unsigned char *p, size_t k)
{
    if (!json_rec_append(s, p, k))
        obj->bits |= KEYS_UNTRACKED;
}

/* Whether the key just read is one of the object's keys before it (they
 * start at obj->count in kbuf). */
static bool key_seen(const tw_json_state *s, const tw_json_frame *obj)
{
    return json_rec_seen(s, obj->count, s->kbuf + s->klen + 1, s->kcur);
}

/* The bytes that string byte c (read in phase, f now past it) adds to the
 * string's decoded text, into out; how many. */
static size_t decoded_bytes(tw_json_state *s, const tw_json_frame *f, uint8_t phase,
                            unsigned char c, unsigned char out[4])
{
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
            k = json_utf8_of((uint32_t)f->bits, out);
        break;
    case SP_LOW_HEX:
        if (f->pos == 4)
            k = json_utf8_of(0x10000u + ((uint32_t)(s->khigh - 0xD800u) << 10) +
                                 ((uint32_t)f->bits - 0xDC00u),
                             out);
        break;
    }
    return k;
}

/* Whether key text k (n bytes, whole characters) may still become one
 * that object node o takes: some pattern may match it, or any key may
 * come. */
static bool key_viable(const tw_json_grammar *g, const jnode *o, const unsigned char *k, size_t n)
{
    if (o->extra != JN_NONE)
        return true;
    for (uint32_t i = 0; i < o->kp_n; i++) {
        const jpattern *p = &g->patterns[g->key_pats[o->kp_first + i].pattern];
        if (json_pattern_test(p, k, n, false) != JP_DEAD)
            return true;
    }
    return false;
}

/* Whether nodes a and b read the same values: one node, or two plain ones
 * (a type without bounds, length, format or pattern) made alike. */
static bool same_reader(const tw_json_grammar *g, uint32_t a, uint32_t b)
{
    if (a == b)
        return true;
    const jnode *x = &g->nodes[a], *y = &g->nodes[b];
    if (x->kind != y->kind || x->extra != JN_NONE || y->extra != JN_NONE)
        return false;
    switch ((jnode_kind)x->kind) {
    case JN_INTEGER:
    case JN_NUMBER:
        return true;
    case JN_STRING:
        return x->format == y->format && x->min == y->min && x->max == y->max;
    default:
        return false;
    }
}

/* The key just read, of object node o: 1 + the patternProperties entry
 * that reads its value, 0 for additionalProperties, -1 when none does
 * (no pattern matches and no other key may come, or two that match read
 * different values). */
static int key_reader(const tw_json_state *s, const jnode *o)
{
    int at = 0;
    for (uint32_t i = 0; i < o->kp_n; i++) {
        const jkeypat *kp = &s->g->key_pats[o->kp_first + i];
        if (json_pattern_test(&s->g->patterns[kp->pattern], s->kbuf + s->klen + 1, s->kcur, true) !=
            JP_MATCH)
            continue;
        if (at && !same_reader(s->g, s->g->key_pats[o->kp_first + (uint32_t)at - 1].node, kp->node))
            return -1;
        if (!at)
            at = (int)i + 1;
    }
    return at || o->extra != JN_NONE ? at : -1;
}

/* Whether a key of object node o may hold a character outside ASCII:
 * its names' pattern, if any, and some schema that may read its value
 * take one. */
static bool key_may_be_wide(const tw_json_grammar *g, const jnode *o)
{
    if (o->names != JN_NONE) {
        const jnode *nm = &g->nodes[o->names];
        if (nm->kind == JN_STRING && nm->extra != JN_NONE && g->patterns[nm->extra].ascii)
            return false;
    }
    if (o->extra != JN_NONE)
        return true;
    for (uint32_t i = 0; i < o->kp_n; i++)
        if (!g->patterns[g->key_pats[o->kp_first + i].pattern].ascii)
            return true;
    return false;
}

/* An enum of names: whether the key being read is the start of one the
 * object has not taken yet. */
static bool enum_name_open(const tw_json_state *s, const tw_json_frame *obj, const jnode *nm)
{
    const unsigned char *k = s->kbuf + s->klen + 1;
    for (uint32_t i = 0; i < nm->n; i++) {
        const jlit *l = &s->g->lits[nm->first + i];
        const size_t len = l->len - 2u; /* between its quotes */
        if (l->text[0] != '"' || len < s->kcur || memcmp(l->text + 1, k, s->kcur) != 0)
            continue;
        if (!json_rec_seen(s, obj->count, (const unsigned char *)l->text + 1, len))
            return true;
    }
    return false;
}

/* Whether the key being read (f: its frame, its last character whole) may
 * close now: long enough, a name the propertyNames admit, not yet in the
 * object, and some schema reads its value; that schema's 1 + index (0:
 * additionalProperties), else -1. */
static int key_closes(const tw_json_state *s, const tw_json_frame *f, const jnode *n,
                      const tw_json_frame *obj, const jnode *o)
{
    if (f->count < n->min || key_seen(s, obj))
        return -1;
    if (o->names != JN_NONE && !json_key_name_ok(s->g, &s->g->nodes[o->names],
                                                 s->kbuf + s->klen + 1, s->kcur, f->count, true))
        return -1;
    return key_reader(s, o);
}

/* Whether the key being read, its last character whole, may go on: it
 * may still become a name the object admits and takes, and once it fills
 * the names' maxLength or the record's room, after which only the closing
 * quote can come, it must be able to close. */
static bool key_goes_on(const tw_json_state *s, const tw_json_frame *f, const jnode *n,
                        const tw_json_frame *obj, const jnode *o)
{
    const jnode *nm = o->names == JN_NONE ? NULL : &s->g->nodes[o->names];
    const unsigned char *k = s->kbuf + s->klen + 1;
    if (nm && nm->kind == JN_ENUM) /* its names are known whole, and fit the room */
        return key_viable(s->g, o, k, s->kcur);
    if ((size_t)s->kcur + 4 > JREC_MAX || (nm && f->count >= nm->max))
        return key_closes(s, f, n, obj, o) >= 0;
    if ((nm && !json_key_name_ok(s->g, nm, k, s->kcur, f->count, false)) ||
        !key_viable(s->g, o, k, s->kcur))
        return false;
    /* a key the object has already may end here, after which only a
     * repeat could come: then some character must follow (one outside
     * ASCII is not asked: where one may, it is taken as possible) */
    if (!key_seen(s, obj) || key_may_be_wide(s->g, o))
        return true;
    unsigned char more[JREC_MAX + 1];
    memcpy(more, k, s->kcur);
    for (unsigned b = 0x20; b < 0x7F; b++) {
        more[s->kcur] = (unsigned char)b;
        if (b != '"' && b != '\\' &&
            (!nm || json_key_name_ok(s->g, nm, more, s->kcur + 1u, f->count + 1u, false)) &&
            key_viable(s->g, o, more, s->kcur + 1u))
            return true;
    }
    return false;
}

/* A key of an object with patternProperties or propertyNames: written
 * without escapes, kept whole (a key past the record's room is refused),
 * each whole character taken only while the key may still be a name the
 * object admits and one it takes, and its closing quote only when it is
 * such a name, some schema reads its value (noted in the object's prop)
 * and the object has no such key yet. */
static bool ruled_key_byte(tw_json_state *s, tw_json_frame *f, const jnode *n, tw_json_frame *obj,
                           unsigned char c)
{
    const jnode *o = &s->g->nodes[obj->node];
    if (f->phase == SP_BODY) {
        if (c == '"') {
            const int reader = key_closes(s, f, n, obj, o);
            if (reader < 0 || !json_rec_commit(s))
                return false;
            obj->prop = (uint16_t)reader;
            s->depth--;
            return true;
        }
        if (c == '\\' || (c >= 0x80 && !key_may_be_wide(s->g, o)))
            return false;
    }
    if (!body_byte(s, f, n, c) || !json_rec_append(s, &c, 1))
        return false;
    /* an enum's names are asked byte by byte, so no character starts that
     * none of them goes on with */
    if (o->names != JN_NONE && s->g->nodes[o->names].kind == JN_ENUM &&
        !enum_name_open(s, obj, &s->g->nodes[o->names]))
        return false;
    return f->phase != SP_BODY || key_goes_on(s, f, n, obj, o);
}

/* A key of an open object: read as any string is, its text decoded into
 * the state's key buffer (escapes as the characters they stand for), and
 * its closing quote taken only when the object has no such key yet. */
static bool key_byte(tw_json_state *s, tw_json_frame *f, const jnode *n, unsigned char c)
{
    tw_json_frame *obj = &s->f[s->depth - 2];
    if (json_keys_ruled(&s->g->nodes[obj->node]))
        return ruled_key_byte(s, f, n, obj, c);
    const bool tracked = !(obj->bits & KEYS_UNTRACKED);
    const uint8_t phase = f->phase;
    if (phase == SP_BODY && c == '"') {
        if (f->count < n->min || (tracked && key_seen(s, obj)))
            return false;
        if (tracked && !json_rec_commit(s))
            obj->bits |= KEYS_UNTRACKED;
        s->kcur = 0;
        s->depth--;
        return true;
    }
    if (!body_byte(s, f, n, c))
        return false;
    if (!tracked)
        return true;
    unsigned char out[4];
    const size_t k = decoded_bytes(s, f, phase, c, out);
    if (k)
        key_append(s, obj, out, k);
    return true;
}

/* A string value's byte, by its kind: pattern, format or plain. */
static bool value_string_byte(tw_json_state *s, tw_json_frame *f, const jnode *n, unsigned char c)
{
    if (n->extra != JN_NONE)
        return pattern_byte(s, f, n, c);
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

/* Whether some printable ASCII byte continues a formatted string at pos. */
static bool format_goes_on(jformat fmt, uint16_t pos, uint32_t mem)
{
    for (unsigned char b = 0x20; b < 0x7F; b++) {
        uint32_t m = mem;
        if (json_format_step(fmt, pos, &m, b) >= 0)
            return true;
    }
    return false;
}

/* Whether a string item, its last character whole, can only close now: a
 * repeated item must then not be written to its end. */
static bool string_must_close(const tw_json_state *s, const tw_json_frame *f, const jnode *n)
{
    if (f->phase != SP_BODY)
        return false;
    if (n->extra != JN_NONE)
        return f->count >= n->max || s->plen + 4 > TW_JSON_PATTERN_BYTES;
    if (n->format != JF_NONE)
        return json_format_final((jformat)n->format, f->pos) &&
               !format_goes_on((jformat)n->format, f->pos, (uint32_t)f->bits);
    return f->count >= n->max;
}

/* A string item of an array with uniqueItems: its decoded text is its
 * record, and neither its closing quote nor the character after which only
 * the quote can come is taken when the array holds the string already. */
static bool item_string_byte(tw_json_state *s, tw_json_frame *f, const jnode *n, tw_json_frame *a,
                             unsigned char c)
{
    const uint8_t phase = f->phase;
    if (phase == SP_BODY && c == '"') {
        if (json_set_seen(s, a) || !value_string_byte(s, f, n, c))
            return false;
        json_set_commit(s, a);
        return true;
    }
    if (!value_string_byte(s, f, n, c))
        return false;
    unsigned char out[4];
    const size_t k = decoded_bytes(s, f, phase, c, out);
    if (k)
        json_set_append(s, a, out, k);
    return (a->bits & JSET_UNTRACKED) || !string_must_close(s, f, n) || !json_set_seen(s, a);
}

bool json_string_byte(tw_json_state *s, tw_json_frame *f, unsigned char c)
{
    const tw_json_grammar *g = s->g;
    const jnode *n = &g->nodes[f->node];
    if (f->node == g->key_string)
        return key_byte(s, f, n, c);
    tw_json_frame *a = json_set_of(s);
    return a ? item_string_byte(s, f, n, a, c) : value_string_byte(s, f, n, c);
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
            unsigned lo, hi;
            const int more = json_utf8_lead(c, &lo, &hi);
            if (more < 0 || !string_char(g, f))
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
        int v = json_hex_value(c);
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
