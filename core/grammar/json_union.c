/* Joining a union's alternatives: by the first byte of their values, those
 * that share it when one holds the others' values or all are literals, and
 * objects among them by a tag property (a discriminated union). */
#include <stdlib.h>
#include <string.h>

#include "json_compiler.h"

static const char no_tag[] =
    "json_schema: objects among alternatives need a required property whose const or enum "
    "values tell them apart, or each a required property the others do not name%s (at %s)";

/* Where object o has a required property keyed as key whose value is an
 * enum; its property count when none. */
static uint32_t tag_prop(const tw_json_grammar *g, uint32_t o, const jlit *key)
{
    const jnode *n = &g->nodes[o];
    for (uint32_t i = 0; i < n->n; i++) {
        const jprop *p = &g->props[n->first + i];
        const jlit *k = &g->lits[p->key];
        if (p->required && g->nodes[p->node].kind == JN_ENUM && k->len == key->len &&
            memcmp(k->text, key->text, k->len) == 0)
            return i;
    }
    return n->n;
}

/* The enum node of object o's tag property key. */
static const jnode *tag_values(const tw_json_grammar *g, uint32_t o, const jlit *key)
{
    return &g->nodes[g->props[g->nodes[o].first + tag_prop(g, o, key)].node];
}

/* Whether the tag values of objs (their property key) all differ. */
static bool tags_differ(const tw_json_grammar *g, const uint32_t *objs, size_t n, const jlit *key)
{
    for (size_t a = 0; a < n; a++)
        for (size_t b = a + 1; b < n; b++) {
            const jnode *ea = tag_values(g, objs[a], key), *eb = tag_values(g, objs[b], key);
            for (uint32_t i = 0; i < ea->n; i++)
                for (uint32_t j = 0; j < eb->n; j++) {
                    const jlit *x = &g->lits[ea->first + i], *y = &g->lits[eb->first + j];
                    if (x->len == y->len && memcmp(x->text, y->text, x->len) == 0)
                        return false;
                }
        }
    return true;
}

/* A copy of object o with its property t first, so the matcher reads the
 * tag before anything that depends on it (o itself may be used elsewhere
 * in its own order). */
static uint32_t tag_first(compiler *c, uint32_t o, uint32_t t)
{
    tw_json_grammar *g = c->g;
    const uint32_t n = g->nodes[o].n;
    uint32_t copy = jc_new_node(c, JN_OBJECT);
    if (copy == JN_NONE)
        return JN_NONE;
    if (!jc_grow((void **)&g->props, &g->cap_props, g->n_props + n, sizeof *g->props))
        return jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)", NULL);
    const uint32_t from = g->nodes[o].first, first = g->n_props;
    g->props[g->n_props++] = g->props[from + t];
    uint32_t close_at = 1;
    for (uint32_t i = 0; i < n; i++) {
        if (i == t)
            continue;
        g->props[g->n_props++] = g->props[from + i];
        if (g->props[from + i].required)
            close_at = g->n_props - first;
    }
    g->nodes[copy] = g->nodes[o];
    g->nodes[copy].first = first;
    g->nodes[copy].close_at = close_at;
    return copy;
}

/* Objects among a union's alternatives, told apart by a property that all
 * of them require with different const or enum values (a discriminated
 * union, as tool calls and pydantic write them): the matcher reads that
 * property first and goes on as the object its value picks. */
static uint32_t tag_objects(compiler *c, const uint32_t *objs, size_t n, uint32_t key_lit)
{
    tw_json_grammar *g = c->g;
    const uint32_t enum_first = g->n_lits, alts_first = g->n_tag_alts;
    for (size_t i = 0; i < n; i++) {
        const uint32_t t = tag_prop(g, objs[i], &g->lits[key_lit]);
        const uint32_t values = g->props[g->nodes[objs[i]].first + t].node;
        const uint32_t alt = tag_first(c, objs[i], t);
        if (alt == JN_NONE)
            return JN_NONE;
        for (uint32_t v = 0; v < g->nodes[values].n; v++) {
            const uint32_t len = g->lits[g->nodes[values].first + v].len;
            char *text = malloc(len);
            if (!text || !jc_grow((void **)&g->tag_alts, &g->cap_tag_alts, g->n_tag_alts + 1,
                                  sizeof *g->tag_alts)) {
                free(text);
                return jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)",
                               NULL);
            }
            /* add_text may move the literals: copy first */
            memcpy(text, g->lits[g->nodes[values].first + v].text, len);
            if (jc_add_text(c, text, len) == JN_NONE)
                return JN_NONE;
            g->tag_alts[g->n_tag_alts++] = alt;
        }
    }
    if (g->n_lits - enum_first > TW_JSON_MAX_ENUM)
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: more than 64 tag values among alternatives%s (at %s)", NULL);
    const uint32_t values = jc_new_node(c, JN_ENUM), tagged = jc_new_node(c, JN_TAGGED);
    if (tagged == JN_NONE)
        return JN_NONE;
    g->nodes[values].first = enum_first;
    g->nodes[values].n = g->n_lits - enum_first;
    g->nodes[tagged].first = alts_first;
    g->nodes[tagged].n = g->n_tag_alts - alts_first;
    g->nodes[tagged].extra = values;
    g->nodes[tagged].min = key_lit;
    g->nodes[tagged].close_at = 1;
    return tagged;
}

/* The key literal of a property all of objs require with an enum value,
 * the values differing between them; JN_NONE when there is none. */
static uint32_t find_tag(const tw_json_grammar *g, const uint32_t *objs, size_t n)
{
    for (uint32_t k = 0; k < g->nodes[objs[0]].n; k++) {
        const uint32_t cand = g->props[g->nodes[objs[0]].first + k].key;
        bool all = true;
        for (size_t i = 0; i < n && all; i++)
            all = tag_prop(g, objs[i], &g->lits[cand]) < g->nodes[objs[i]].n;
        if (all && tags_differ(g, objs, n, &g->lits[cand]))
            return cand;
    }
    return JN_NONE;
}

/* Whether object o names a property keyed as key. */
static bool names_key(const tw_json_grammar *g, uint32_t o, const jlit *key)
{
    const jnode *n = &g->nodes[o];
    for (uint32_t i = 0; i < n->n; i++) {
        const jlit *k = &g->lits[g->props[n->first + i].key];
        if (k->len == key->len && memcmp(k->text, key->text, k->len) == 0)
            return true;
    }
    return false;
}

/* Object i's first required property that no other of objs names; its
 * property count when none. */
static uint32_t own_key(const tw_json_grammar *g, const uint32_t *objs, size_t n, size_t i)
{
    const jnode *o = &g->nodes[objs[i]];
    for (uint32_t p = 0; p < o->n; p++) {
        if (!g->props[o->first + p].required)
            continue;
        const jlit *key = &g->lits[g->props[o->first + p].key];
        bool shared = false;
        for (size_t j = 0; j < n && !shared; j++)
            shared = j != i && names_key(g, objs[j], key);
        if (!shared)
            return p;
    }
    return o->n;
}

/* Objects among a union's alternatives that share no tag but each require
 * a property the others do not name (pydantic's Union of models without a
 * discriminator, when their fields tell them apart): each is written with
 * that property first, so the first key picks the object. An object so
 * written lacks every other's key, so it fits no other alternative, as
 * oneOf needs. */
static uint32_t key_objects(compiler *c, const uint32_t *objs, size_t n)
{
    tw_json_grammar *g = c->g;
    uint32_t keys[TW_JSON_MAX_ENUM];
    for (size_t i = 0; i < n; i++)
        if ((keys[i] = own_key(g, objs, n, i)) == g->nodes[objs[i]].n)
            return jc_fail(c, TW_INVALID_ARGUMENT, no_tag, NULL);
    const uint32_t first = g->n_tag_alts;
    for (size_t i = 0; i < n; i++) {
        const uint32_t alt = tag_first(c, objs[i], keys[i]);
        if (alt == JN_NONE)
            return JN_NONE;
        if (!jc_grow((void **)&g->tag_alts, &g->cap_tag_alts, g->n_tag_alts + 1,
                     sizeof *g->tag_alts))
            return jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)", NULL);
        g->tag_alts[g->n_tag_alts++] = alt;
    }
    const uint32_t keyed = jc_new_node(c, JN_KEYED);
    if (keyed != JN_NONE) {
        g->nodes[keyed].first = first;
        g->nodes[keyed].n = (uint32_t)n;
        g->nodes[keyed].close_at = 1;
    }
    return keyed;
}

/* Objects among a union's alternatives: told apart by a tag's values, or
 * else by a key of each's own. */
static uint32_t join_objects(compiler *c, const uint32_t *objs, size_t n)
{
    const tw_json_grammar *g = c->g;
    for (size_t i = 0; i < n; i++)
        if (objs[i] == JN_NONE || g->nodes[objs[i]].kind != JN_OBJECT || g->nodes[objs[i]].n == 0)
            return jc_fail(c, TW_INVALID_ARGUMENT, no_tag, NULL);
    const uint32_t tag = find_tag(g, objs, n);
    return tag != JN_NONE ? tag_objects(c, objs, n, tag) : key_objects(c, objs, n);
}

/* The node that reads class k's values of alternative a (through unions;
 * JN_NONE for a $ref still being compiled). */
static uint32_t class_node(const tw_json_grammar *g, uint32_t a, int k)
{
    for (int hops = 0; a != JN_NONE && g->nodes[a].kind == JN_UNION; hops++)
        a = hops > 16 ? JN_NONE : g->nodes[a].alt[k];
    return a;
}

/* Whether node x reads literal l as a whole value: the matcher itself is
 * asked, so formats, patterns, lengths and bounds all count. */
static bool takes_literal(const tw_json_grammar *g, uint32_t x, const jlit *l)
{
    tw_json_state s;
    tw_json_state_init(&s, g);
    s.f[0].node = x;
    return tw_json_state_feed(&s, l->text, l->len) && tw_json_state_complete(&s);
}

/* Whether x's values include all of y's that start with class k: y's
 * literals that x reads, any number for a number without bounds, any
 * string for a string without length, format or pattern. */
static bool covers(const tw_json_grammar *g, uint32_t x, uint32_t y, int k)
{
    const jnode *nx = &g->nodes[x], *ny = &g->nodes[y];
    if (x == y)
        return true;
    if (ny->kind == JN_ENUM) {
        for (uint32_t i = 0; i < ny->n; i++) {
            const jlit *l = &g->lits[ny->first + i];
            if (json_class_of((unsigned char)l->text[0]) == (jclass)k && !takes_literal(g, x, l))
                return false;
        }
        return true;
    }
    if (nx->kind == JN_NUMBER && nx->extra == JN_NONE)
        return ny->kind == JN_NUMBER || ny->kind == JN_INTEGER;
    if (nx->kind == JN_STRING && nx->format == JF_NONE && nx->extra == JN_NONE && nx->min == 0 &&
        nx->max == UINT32_MAX)
        return ny->kind == JN_STRING;
    return false;
}

/* One enum of the class-k literals of enum nodes e[0..n), each text once. */
static uint32_t merge_literals(compiler *c, int k, const uint32_t *e, size_t n)
{
    tw_json_grammar *g = c->g;
    const uint32_t first = g->n_lits;
    for (size_t j = 0; j < n; j++)
        for (uint32_t i = 0; i < g->nodes[e[j]].n; i++) {
            const jlit *l = &g->lits[g->nodes[e[j]].first + i];
            bool again = json_class_of((unsigned char)l->text[0]) != (jclass)k;
            for (uint32_t m = first; m < g->n_lits && !again; m++)
                again = g->lits[m].len == l->len && memcmp(g->lits[m].text, l->text, l->len) == 0;
            if (again)
                continue;
            if (g->n_lits - first >= TW_JSON_MAX_ENUM)
                return jc_fail(c, TW_INVALID_ARGUMENT,
                               "json_schema: more than 64 values among alternatives that start "
                               "with the same JSON type%s (at %s)",
                               NULL);
            const uint32_t len = l->len;
            char *text = malloc(len);
            if (!text)
                return jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)",
                               NULL);
            /* add_text may move the literals: copy first */
            memcpy(text, l->text, len);
            if (jc_add_text(c, text, len) == JN_NONE)
                return JN_NONE;
        }
    const uint32_t u = jc_new_node(c, JN_ENUM);
    if (u != JN_NONE) {
        g->nodes[u].first = first;
        g->nodes[u].n = g->n_lits - first;
    }
    return u;
}

/* The node for class k of alternatives that all start with it: one whose
 * values cover the others' (an unbounded number beside an integer, a plain
 * string beside a date, a string beside enum values it reads), or one enum
 * of all their literals; anything else would need a matcher that reads
 * ahead, and is refused. */
static uint32_t join_class(compiler *c, int k, const uint32_t *alts, size_t n)
{
    const tw_json_grammar *g = c->g;
    uint32_t nodes[2 * TW_JSON_MAX_ENUM];
    bool literals = true;
    for (size_t j = 0; j < n; j++) {
        nodes[j] = class_node(g, alts[j], k);
        if (nodes[j] == JN_NONE)
            literals = false;
        else
            literals &= g->nodes[nodes[j]].kind == JN_ENUM;
    }
    for (size_t j = 0; j < n && nodes[j] != JN_NONE; j++) {
        bool all = true;
        for (size_t i = 0; i < n && all; i++)
            all = nodes[i] != JN_NONE && covers(g, nodes[j], nodes[i], k);
        if (all)
            return nodes[j];
    }
    if (literals)
        return merge_literals(c, k, nodes, n);
    return jc_fail(c, TW_INVALID_ARGUMENT,
                   "json_schema: alternatives that start with the same JSON type%s are not "
                   "supported unless one holds all the others' values or all are enum or const "
                   "values (at %s)",
                   NULL);
}

/* Joins alternatives into one union, class by class (the first byte of a
 * value): alternatives that share a class are joined by join_class, and
 * objects by a tag property (tag_objects). A union alternative is merged
 * by its classes; one still being compiled (a recursive $ref) is taken for
 * the classes its schema admits. */
uint32_t jc_join(compiler *c, const uint32_t *alts, const unsigned *classes, size_t n)
{
    uint32_t objs[TW_JSON_MAX_ENUM];
    size_t n_objs = 0;
    if (n > 2 * TW_JSON_MAX_ENUM)
        return jc_fail(c, TW_INVALID_ARGUMENT, "json_schema: more than 128 alternatives%s (at %s)",
                       NULL);
    for (size_t i = 0; i < n; i++)
        if (classes[i] & (1u << JC_OBJECT)) {
            uint32_t a = alts[i];
            if (c->g->nodes[a].kind == JN_UNION)
                a = c->g->nodes[a].alt[JC_OBJECT];
            objs[n_objs++] = a;
        }
    uint32_t tagged = JN_NONE;
    if (n_objs > 1) {
        for (size_t i = 0; i < n; i++)
            if ((classes[i] & (1u << JC_OBJECT)) && classes[i] != (1u << JC_OBJECT))
                return jc_fail(c, TW_INVALID_ARGUMENT, no_tag, NULL);
        tagged = join_objects(c, objs, n_objs);
        if (tagged == JN_NONE)
            return JN_NONE;
    }
    uint32_t joined[JC_COUNT];
    for (int k = 0; k < JC_COUNT; k++) {
        uint32_t in[2 * TW_JSON_MAX_ENUM];
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (classes[i] & (1u << k))
                in[m++] = alts[i];
        joined[k] = k == JC_OBJECT && tagged != JN_NONE ? tagged
                    : m == 0                            ? JN_NONE
                    : m == 1                            ? in[0]
                                                        : join_class(c, k, in, m);
        if (m > 1 && joined[k] == JN_NONE)
            return JN_NONE;
    }
    uint32_t u = jc_new_node(c, JN_UNION);
    if (u == JN_NONE)
        return JN_NONE;
    memcpy(c->g->nodes[u].alt, joined, sizeof joined);
    return u;
}
