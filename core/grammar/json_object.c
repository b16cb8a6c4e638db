/* Object schemas: "properties" (taken in the schema's order), "required",
 * "additionalProperties", "patternProperties" (json_key_patterns.c),
 * "propertyNames" (json_key_names.c), "minProperties" and
 * "maxProperties". */
#include <string.h>

#include "json_compiler.h"

/* minProperties and maxProperties: an object without properties counts
 * the keys it writes (at most 65535 are counted); one with properties
 * writes its required ones and may leave out the others, so there they
 * are taken where every object so written fits them, and where none is
 * required and minProperties is 1 (*some: at least one of them, or with
 * maxProperties 1 exactly one, as a PATCH body or a "one of these fields"
 * object asks). */
static bool object_counts(compiler *c, const json_t *s, size_t n, const bool *required,
                          uint32_t *lo, uint32_t *hi, bool *some)
{
    *some = false;
    if (!jc_count_keyword(c, s, "minProperties", 0, lo) ||
        !jc_count_keyword(c, s, "maxProperties", UINT32_MAX, hi))
        return false;
    if (*lo > *hi) {
        jc_fail(c, TW_INVALID_ARGUMENT,
                "json_schema: minProperties is above maxProperties%s (at %s)", NULL);
        return false;
    }
    if (*hi > UINT16_MAX)
        *hi = UINT16_MAX;
    if (n == 0)
        return true;
    size_t r = 0;
    for (size_t k = 0; k < n; k++)
        r += required[k];
    *some = *lo == 1 && r == 0 && (*hi >= n || *hi == 1);
    if (!*some && (*lo > r || *hi < n)) {
        jc_fail(c, TW_INVALID_ARGUMENT,
                "json_schema: minProperties above the required properties, or maxProperties "
                "below all of them,%s is not supported (at %s)",
                NULL);
        return false;
    }
    if (!*some)
        *hi = UINT32_MAX;
    *lo = 0;
    return true;
}

/* Object o's properties with at least one of them written (most: 1, or
 * all of them): the first one written picks one of n objects, object i
 * being property i, required, then (unless most is 1) the properties
 * after it as they were; a keyed union of them, told apart by that first
 * key. */
static uint32_t some_of(compiler *c, uint32_t o, uint32_t most)
{
    tw_json_grammar *g = c->g;
    const uint32_t n = g->nodes[o].n, first = g->nodes[o].first, alts = g->n_tag_alts;
    if (!jc_grow((void **)&g->tag_alts, &g->cap_tag_alts, g->n_tag_alts + n, sizeof *g->tag_alts))
        return jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)", NULL);
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t len = most == 1 ? 1 : n - i;
        if (!jc_grow((void **)&g->props, &g->cap_props, g->n_props + len, sizeof *g->props))
            return jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)", NULL);
        const uint32_t at = g->n_props;
        for (uint32_t k = i; k < i + len; k++) {
            jprop p = g->props[first + k];
            p.required = k == i;
            g->props[g->n_props++] = p;
        }
        const uint32_t a = jc_new_node(c, JN_OBJECT);
        if (a == JN_NONE)
            return JN_NONE;
        g->nodes[a].first = at;
        g->nodes[a].n = len;
        g->nodes[a].close_at = 1;
        g->tag_alts[g->n_tag_alts++] = a;
    }
    const uint32_t keyed = jc_new_node(c, JN_KEYED);
    if (keyed != JN_NONE) {
        g->nodes[keyed].first = alts;
        g->nodes[keyed].n = n;
        g->nodes[keyed].close_at = 1;
    }
    return keyed;
}

uint32_t jc_object(compiler *c, const json_t *s, int depth)
{
    const json_t *props = json_object_get(s, "properties");
    const json_t *req = json_object_get(s, "required");
    const json_t *addl = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props))
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: \"properties\" must be an object%s (at %s)", NULL);
    if (req && !json_is_array(req))
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: \"required\" must be an array%s (at %s)", NULL);
    size_t n = props ? json_object_size(props) : 0;
    if (n > TW_JSON_MAX_PROPS)
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: more than 64 properties in one object%s (at %s)", NULL);
    const char *keys[TW_JSON_MAX_PROPS];
    uint32_t nodes[TW_JSON_MAX_PROPS];
    bool required[TW_JSON_MAX_PROPS] = {false};
    size_t i = 0;
    const char *key;
    json_t *sub;
    size_t at = jc_path_push(c, "properties");
    json_object_foreach((json_t *)props, key, sub)
    {
        size_t back = jc_path_push(c, key);
        keys[i] = key;
        nodes[i] = jc_compile(c, sub, depth + 1);
        jc_path_pop(c, back);
        if (nodes[i++] == JN_NONE)
            return JN_NONE;
    }
    jc_path_pop(c, at);
    for (size_t r = 0; req && r < json_array_size(req); r++) {
        const char *name = json_string_value(json_array_get(req, r));
        size_t k = 0;
        while (name && k < n && strcmp(keys[k], name) != 0)
            k++;
        if (!name || k == n)
            return jc_fail(c, TW_INVALID_ARGUMENT,
                           "json_schema: \"required\" names \"%.64s\", which is not among "
                           "\"properties\" (at %s)",
                           name ? name : "(not a string)");
        required[k] = true;
    }
    uint32_t kp_first, kp_n, lo, hi, names;
    bool some;
    if (!jc_key_patterns(c, s, keys, n, depth, &kp_first, &kp_n) ||
        !object_counts(c, s, n, required, &lo, &hi, &some) ||
        !jc_key_names(c, s, keys, n, depth, &names, &hi))
        return JN_NONE;
    if (lo > hi)
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: minProperties above the names \"propertyNames\" "
                       "admits%s (at %s)",
                       NULL);
    uint32_t extra = JN_NONE;
    if (n == 0 && !json_is_false(addl)) {
        size_t back = jc_path_push(c, "additionalProperties");
        extra = (!addl || json_is_true(addl)) ? jc_any_node(c) : jc_compile(c, addl, depth + 1);
        jc_path_pop(c, back);
        if (extra == JN_NONE)
            return JN_NONE;
    }
    uint32_t first = c->g->n_props;
    tw_json_grammar *g = c->g;
    if (!jc_grow((void **)&g->props, &g->cap_props, g->n_props + (uint32_t)n, sizeof *g->props))
        return jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)", NULL);
    uint32_t close_at = 0;
    for (size_t k = 0; k < n; k++) {
        json_t *ks = json_string(keys[k]);
        uint32_t lit = ks ? jc_add_literal(c, ks) : JN_NONE;
        json_decref(ks);
        if (lit == JN_NONE)
            return jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)", NULL);
        g->props[g->n_props++] = (jprop){.key = lit, .node = nodes[k], .required = required[k]};
        if (required[k])
            close_at = (uint32_t)k + 1;
    }
    uint32_t o = jc_new_node(c, JN_OBJECT);
    if (o == JN_NONE)
        return JN_NONE;
    jnode *on = &c->g->nodes[o];
    on->first = first;
    on->n = (uint32_t)n;
    on->extra = extra;
    on->close_at = close_at;
    on->kp_first = kp_first;
    on->kp_n = kp_n;
    on->names = names;
    if (some)
        return some_of(c, o, hi);
    on->min = lo;
    on->max = hi;
    return o;
}
