/* Joining a union's alternatives: by the first byte of their values, and
 * objects among them by a tag property (a discriminated union). */
#include <stdlib.h>
#include <string.h>

#include "json_compiler.h"

static const char no_tag[] =
    "json_schema: objects among alternatives need a required property whose const or enum "
    "values tell them apart%s (at %s)";

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
static uint32_t tag_objects(compiler *c, const uint32_t *objs, size_t n)
{
    tw_json_grammar *g = c->g;
    for (size_t i = 0; i < n; i++)
        if (objs[i] == JN_NONE || g->nodes[objs[i]].kind != JN_OBJECT || g->nodes[objs[i]].n == 0)
            return jc_fail(c, TW_INVALID_ARGUMENT, no_tag, NULL);
    uint32_t key_lit = JN_NONE;
    for (uint32_t k = 0; k < g->nodes[objs[0]].n && key_lit == JN_NONE; k++) {
        const uint32_t cand = g->props[g->nodes[objs[0]].first + k].key;
        bool all = true;
        for (size_t i = 0; i < n && all; i++)
            all = tag_prop(g, objs[i], &g->lits[cand]) < g->nodes[objs[i]].n;
        if (all && tags_differ(g, objs, n, &g->lits[cand]))
            key_lit = cand;
    }
    if (key_lit == JN_NONE)
        return jc_fail(c, TW_INVALID_ARGUMENT, no_tag, NULL);
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

/* Joins alternatives into one union; two that can start with the same
 * byte would need a matcher that reads ahead, so they are refused, but
 * for objects told apart by a tag property (tag_objects). A union
 * alternative is merged by its classes; one still being compiled (a
 * recursive $ref) is taken for the classes its schema admits. */
uint32_t jc_join(compiler *c, const uint32_t *alts, const unsigned *classes, size_t n)
{
    uint32_t objs[TW_JSON_MAX_ENUM];
    size_t n_objs = 0;
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
        tagged = tag_objects(c, objs, n_objs);
        if (tagged == JN_NONE)
            return JN_NONE;
    }
    uint32_t u = jc_new_node(c, JN_UNION);
    if (u == JN_NONE)
        return JN_NONE;
    c->g->nodes[u].alt[JC_OBJECT] = tagged;
    for (size_t i = 0; i < n; i++) {
        if (tagged != JN_NONE && (classes[i] & (1u << JC_OBJECT)))
            continue;

        for (int k = 0; k < JC_COUNT; k++) {
            if (!(classes[i] & (1u << k)))
                continue;
            if (c->g->nodes[u].alt[k] != JN_NONE)
                return jc_fail(c, TW_INVALID_ARGUMENT,
                               "json_schema: alternatives that start with the same JSON "
                               "type%s are not supported (at %s)",
                               NULL);
            c->g->nodes[u].alt[k] = alts[i];
        }
    }
    return u;
}
