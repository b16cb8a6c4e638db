/* The byte matcher over compiled grammar nodes: a stack of frames, one per
 * value being read. A value's frame replaces the "value expected" frame
 * that its first byte resolved; a finished value pops itself, and a number
 * (which only a following byte ends) pops and hands that byte on. */
#include <string.h>

#include "json_match.h"

enum { OP_START = 0, OP_NEXT, OP_KEY, OP_COLON, OP_AFTER };
enum { AP_START = 0, AP_NEXT, AP_AFTER };

static bool is_ws(unsigned char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
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

/* Whether a byte can still lengthen the number f reads. */
static bool number_goes_on(const tw_json_grammar *g, const tw_json_frame *f)
{
    static const char next[] = "0123456789.eE+-";
    for (const char *b = next; *b; b++) {
        tw_json_frame t = *f;
        if (number_byte(g, &t, (unsigned char)*b) == 1)
            return true;
    }
    return false;
}

/* The record of the number item being read (its text after the tag in
 * kbuf) in canonical form, into rec; its length, 0 when it has none. */
static size_t number_record(const tw_json_state *s, unsigned char rec[JREC_MAX])
{
    rec[0] = 'n';
    const size_t w = json_number_canonical(s->kbuf + s->klen + 2, s->kcur > 0 ? s->kcur - 1u : 0,
                                           rec + 1, JREC_MAX - 1);
    return w ? 1 + w : 0;
}

/* A number item's byte c, taken: into its text; refused when the array
 * holds the number's value already and no byte after c could change it
 * (the number can only end here, or it is a zero taking an exponent). */
static bool item_number_byte(tw_json_state *s, const tw_json_frame *f, tw_json_frame *a,
                             unsigned char c)
{
    unsigned char rec[JREC_MAX];
    if (c == 'e' || c == 'E') {
        const size_t len = number_record(s, rec);
        if (len == 2 && rec[1] == '0' && json_rec_seen(s, json_set_start(a), rec, len))
            return false;
    }
    json_set_append(s, a, &c, 1);
    if ((a->bits & JSET_UNTRACKED) || !number_accepting(s->g, f) || number_goes_on(s->g, f))
        return true;
    const size_t len = number_record(s, rec);
    return !len || !json_rec_seen(s, json_set_start(a), rec, len);
}

/* A number item ended: refused when the array holds its value already,
 * else kept in canonical form. */
static bool item_number_end(tw_json_state *s, tw_json_frame *a)
{
    unsigned char rec[JREC_MAX];
    const size_t len = number_record(s, rec);
    if (len && json_rec_seen(s, json_set_start(a), rec, len))
        return false;
    s->kcur = 0;
    if (!len || !json_rec_append(s, rec, len))
        a->bits |= JSET_UNTRACKED;
    else
        json_set_commit(s, a);
    return true;
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

/* A literal item ended (the candidate as long as what was read): its
 * record kept. */
static void literal_item(tw_json_state *s, const tw_json_frame *f)
{
    tw_json_frame *a = json_set_of(s);
    if (!a)
        return;
    const jnode *n = &s->g->nodes[f->node];
    for (uint32_t i = 0; i < n->n; i++) {
        const jlit *l = &s->g->lits[n->first + i];
        if (!(f->bits >> i & 1) || l->len != f->pos)
            continue;
        unsigned char rec[JREC_MAX];
        const size_t len = json_literal_record(l, rec);
        s->kcur = 0;
        if (!len || !json_rec_append(s, rec, len))
            a->bits |= JSET_UNTRACKED;
        else
            json_set_commit(s, a);
        return;
    }
}

/* Leaves out of a literal item's candidates the values its array holds;
 * false when none is left. */
static bool drop_taken_literals(const tw_json_state *s, tw_json_frame *f, const tw_json_frame *a)
{
    const jnode *n = &s->g->nodes[f->node];
    for (uint32_t i = 0; i < n->n; i++) {
        unsigned char rec[JREC_MAX];
        const size_t len =
            f->bits >> i & 1 ? json_literal_record(&s->g->lits[n->first + i], rec) : 0;
        if (len && json_rec_seen(s, json_set_start(a), rec, len))
            f->bits &= ~(1ull << i);
    }
    return f->bits != 0;
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
        literal_item(s, f);
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
 * property, the tag, until the tag's value picks the object; a keyed one
 * as an object of its alternatives' first keys, until a key picks one. */
static uint32_t prop_count(const jnode *n)
{
    return n->kind == JN_TAGGED ? 1 : n->n;
}

static const jlit *prop_key(const tw_json_grammar *g, const jnode *n, uint32_t i)
{
    if (n->kind == JN_KEYED)
        return &g->lits[g->props[g->nodes[g->tag_alts[n->first + i]].first].key];
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
 * including the first required one (any alternative's key of a keyed
 * union). */
static uint64_t next_keys(const tw_json_grammar *g, const jnode *n, uint32_t prop)
{
    if (n->kind == JN_KEYED)
        return n->n >= 64 ? UINT64_MAX : (1ull << n->n) - 1;
    uint64_t m = 0;
    for (uint32_t i = prop; i < prop_count(n); i++) {
        m |= 1ull << i;
        if (prop_required(g, n, i))
            break;
    }
    return m;
}

/* An object without properties counts its keys in pos (minProperties and
 * maxProperties are its min and max). */
static bool may_close(const jnode *n, const tw_json_frame *f)
{
    return prop_count(n) == 0 ? f->pos >= n->min : f->prop >= n->close_at;
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
        if ((n->extra == JN_NONE && n->kp_n == 0) || f->pos >= n->max)
            return false;
        /* a key held to patterns or names is kept whole, so it needs a
         * record's room */
        if (json_keys_ruled(n) &&
            ((f->bits & KEYS_UNTRACKED) || (size_t)s->klen + 1 + JREC_MAX > TW_JSON_KEY_BYTES))
            return false;
        f->phase = OP_COLON;
        f->pos++;
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
            /* a keyed union's key picks its object, that key first in it */
            if (n->kind == JN_KEYED)
                f->node = g->tag_alts[n->first + done];
            f->prop = n->kind == JN_KEYED ? 1 : (uint16_t)(done + 1);
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
        return push(s, FK_VALUE,
                    prop_count(n) > 0 ? prop_value(g, n, f->prop - 1u)
                    : f->prop         ? g->key_pats[n->kp_first + f->prop - 1u].node
                                      : n->extra);
    case OP_AFTER:
        if (is_ws(c))
            return take_ws(s);
        if (c == ',' && (prop_count(n) == 0 ? f->pos < n->max : f->prop < prop_count(n))) {
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

/* An array closes; its items' records are done with. */
static void array_close(tw_json_state *s, const tw_json_frame *f)
{
    if (s->g->nodes[f->node].unique)
        s->klen = (uint16_t)json_set_start(f);
    s->depth--;
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
            case JN_KEYED:
                f->kind = FK_OBJECT;
                f->count = s->klen; /* where its keys will start */
                return c == '{';
            case JN_ARRAY:
                f->kind = FK_ARRAY;
                f->bits = g->nodes[node].unique ? s->klen : 0; /* where its items will start */
                return c == '[';
            case JN_STRING:
                f->kind = FK_STRING;
                s->plen = 0;
                json_set_item_start(s, 's');
                return c == '"';
            case JN_NUMBER:
            case JN_INTEGER:
                f->kind = FK_NUMBER;
                json_set_item_start(s, 'n');
                continue;
            case JN_ENUM: {
                f->kind = FK_LIT;
                f->bits = g->nodes[node].n >= 64 ? UINT64_MAX : (1ull << g->nodes[node].n) - 1;
                const tw_json_frame *a = json_set_of(s);
                if (a && !drop_taken_literals(s, f, a))
                    return false;
                continue;
            }
            case JN_UNION:
                return false;
            }
            return false;
        }
        case FK_STRING:
            return json_string_byte(s, f, c);
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
                    array_close(s, f);
                    return true;
                }
                return false;
            }
            if (c == ']' && f->phase == AP_START && n->min == 0) {
                array_close(s, f);
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
            tw_json_frame *a = f->kind == FK_NUMBER ? json_set_of(s) : NULL;
            if (r != 0)
                return r > 0 && (!a || item_number_byte(s, f, a, c));
            if (a && !item_number_end(s, a))
                return false;
            if (f->kind == FK_LIT) {
                literal_done(s, f);
                literal_item(s, f);
            }
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
    /* a key held to patterns or names is asked of them character by
     * character */
    if (f->node == s->g->key_string && json_keys_ruled(&s->g->nodes[s->f[s->depth - 2].node]))
        return false;
    const uint32_t max = s->g->nodes[f->node].max;
    /* an item that fills maxLength must differ from its array's others,
     * which only the byte-by-byte walk checks */
    if (max != UINT32_MAX && json_set_open(s))
        return false;
    *room = max == UINT32_MAX ? UINT32_MAX : max - f->count;
    return true;
}
