/* Array schemas: "items" for every element, or a tuple: "prefixItems"
 * (JSON Schema 2020-12) or "items" as a list (drafts 4 to 7) for the first
 * elements, one schema each, then "items" (2020-12) or "additionalItems"
 * (the older drafts) for the rest: a schema, true, or false (no more);
 * and "uniqueItems". */
#include <stdio.h>

#include "json_compiler.h"

/* Elements a tuple may name. */
#define MAX_TUPLE 64

/* uniqueItems: the items must be values the matcher can tell apart as they
 * are written (strings, numbers, booleans, null, enum values), and no more
 * of them than there are different values (max clamped to that, so that
 * the array closes once every value is taken). */
static bool unique_items(compiler *c, size_t n_prefix, uint32_t items, uint32_t lo, uint32_t *hi)
{
    if (n_prefix) {
        jc_fail(c, TW_INVALID_ARGUMENT, "json_schema: uniqueItems on a tuple%s (at %s)", NULL);
        return false;
    }
    if (items == JN_NONE) /* items: false; no element to compare */
        return true;
    uint32_t count;
    bool numbers;
    const int r = json_unique_domain(c->g, items, &count, &numbers);
    if (r != JU_OK) {
        jc_fail(c, r == JU_NOMEM ? TW_RESOURCE_EXHAUSTED : TW_INVALID_ARGUMENT,
                r == JU_NOMEM ? "json_schema: out of memory%s (at %s)"
                              : "json_schema: uniqueItems over items that may be objects or "
                                "arrays%s (at %s)",
                NULL);
        return false;
    }
    if (lo > count) {
        char what[80];
        snprintf(what, sizeof what, " (%u, where the items can take %u different values)", lo,
                 count);
        jc_fail(c, TW_INVALID_ARGUMENT,
                "json_schema: minItems above what uniqueItems allows%s (at %s)", what);
        return false;
    }
    if (*hi > count)
        *hi = count;
    c->g->unique_numbers |= numbers;
    return true;
}

uint32_t jc_array(compiler *c, const json_t *s, int depth)
{
    const json_t *items = json_object_get(s, "items");
    const json_t *prefix = json_object_get(s, "prefixItems"), *rest = items;
    const char *prefix_key = "prefixItems", *rest_key = "items";
    if (json_is_array(items)) {
        if (prefix)
            return jc_fail(c, TW_INVALID_ARGUMENT,
                           "json_schema: both \"prefixItems\" and \"items\" as a list%s (at %s)",
                           NULL);
        prefix = items;
        prefix_key = "items";
        rest = json_object_get(s, "additionalItems");
        rest_key = "additionalItems";
    }
    if (prefix && !json_is_array(prefix))
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: \"prefixItems\" must be a list%s (at %s)", NULL);
    const size_t n_prefix = prefix ? json_array_size(prefix) : 0;
    if (n_prefix > MAX_TUPLE)
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: a tuple of more than 64 elements%s (at %s)", NULL);
    uint32_t lo, hi;
    if (!jc_count_keyword(c, s, "minItems", 0, &lo) ||
        !jc_count_keyword(c, s, "maxItems", UINT32_MAX, &hi))
        return JN_NONE;
    uint32_t tuple[MAX_TUPLE];
    const size_t at = jc_path_push(c, prefix_key);
    for (size_t i = 0; i < n_prefix; i++) {
        char index[24];
        snprintf(index, sizeof index, "%zu", i);
        const size_t back = jc_path_push(c, index);
        tuple[i] = jc_compile(c, json_array_get(prefix, i), depth + 1);
        jc_path_pop(c, back);
        if (tuple[i] == JN_NONE) {
            jc_path_pop(c, at);
            return JN_NONE;
        }
    }
    jc_path_pop(c, at);
    uint32_t it = JN_NONE;
    if (json_is_false(rest)) {
        hi = hi < n_prefix ? hi : (uint32_t)n_prefix;
    } else {
        const size_t back = jc_path_push(c, rest_key);
        it = rest && !json_is_true(rest) ? jc_compile(c, rest, depth + 1) : jc_any_node(c);
        jc_path_pop(c, back);
        if (it == JN_NONE)
            return JN_NONE;
    }
    if (lo > hi)
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: minItems is above maxItems (or the tuple's length)%s (at %s)",
                       NULL);
    const json_t *uq = json_object_get(s, "uniqueItems");
    if (uq && !json_is_boolean(uq))
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: uniqueItems must be true or false%s (at %s)", NULL);
    const bool unique = json_is_true(uq);
    if (unique && !unique_items(c, n_prefix, it, lo, &hi))
        return JN_NONE;
    tw_json_grammar *g = c->g;
    if (!jc_grow((void **)&g->tuple_items, &g->cap_tuple_items,
                 g->n_tuple_items + (uint32_t)n_prefix, sizeof *g->tuple_items))
        return jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)", NULL);
    const uint32_t a = jc_new_node(c, JN_ARRAY);
    if (a == JN_NONE)
        return JN_NONE;
    jnode *an = &g->nodes[a];
    an->extra = it;
    an->first = g->n_tuple_items;
    an->n = (uint32_t)n_prefix;
    an->min = lo;
    an->max = hi;
    an->unique = unique;
    for (size_t i = 0; i < n_prefix; i++)
        g->tuple_items[g->n_tuple_items++] = tuple[i];
    return a;
}
