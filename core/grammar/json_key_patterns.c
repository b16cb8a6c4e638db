/* "patternProperties" of an object without "properties": each key the
 * model writes is asked of the patterns as it grows (a character is taken
 * while some pattern may still match, or any key may come under
 * additionalProperties), and the key's value is read by the schema of the
 * patterns its whole text matches (several only when they name the same
 * schema), or by additionalProperties when it matches none. An object with
 * properties writes no other keys, so there the patterns change nothing
 * as long as none of them matches a property's name (whose value would
 * then need both schemas). */
#include <stdio.h>
#include <string.h>

#include "json_compiler.h"

/* Patterns one object may name. */
#define MAX_KEY_PATTERNS 16

/* The n patterns pats against the names of properties: refused when one
 * matches a name; else nothing reads them. */
static bool patterns_miss_names(compiler *c, const uint32_t *pats, size_t n,
                                const char *const *keys, size_t n_props)
{
    tw_json_grammar *g = c->g;
    bool ok = true;
    for (size_t p = 0; ok && p < n; p++)
        for (size_t k = 0; ok && k < n_props; k++)
            if (json_pattern_test(&g->patterns[pats[p]], (const unsigned char *)keys[k],
                                  strlen(keys[k]), true) != JP_DEAD) {
                jc_fail(c, TW_INVALID_ARGUMENT,
                        "json_schema: property \"%.64s\" is also matched by \"patternProperties\", "
                        "which is not supported (at %s)",
                        keys[k]);
                ok = false;
            }
    return ok;
}

bool jc_key_patterns(compiler *c, const json_t *s, const char *const *keys, size_t n_props,
                     int depth, uint32_t *first, uint32_t *count)
{
    tw_json_grammar *g = c->g;
    const json_t *pp = json_object_get(s, "patternProperties");
    *first = g->n_key_pats;
    *count = 0;
    if (!pp)
        return true;
    if (!json_is_object(pp)) {
        jc_fail(c, TW_INVALID_ARGUMENT,
                "json_schema: \"patternProperties\" must be an object%s (at %s)", NULL);
        return false;
    }
    const size_t n = json_object_size(pp);
    if (n > MAX_KEY_PATTERNS) {
        jc_fail(c, TW_INVALID_ARGUMENT,
                "json_schema: more than 16 \"patternProperties\" in one object%s (at %s)", NULL);
        return false;
    }
    uint32_t pats[MAX_KEY_PATTERNS], nodes[MAX_KEY_PATTERNS];
    size_t k = 0;
    const char *src;
    json_t *sub;
    const size_t at = jc_path_push(c, "patternProperties");
    json_object_foreach((json_t *)pp, src, sub)
    {
        const size_t back = jc_path_push(c, src);
        const size_t len = strlen(src);
        if (len > TW_JSON_MAX_PATTERN) {
            char what[64];
            snprintf(what, sizeof what, " of %zu bytes (at most %d)", len, TW_JSON_MAX_PATTERN);
            jc_fail(c, TW_INVALID_ARGUMENT, "json_schema: a key pattern%s (at %s)", what);
            return false;
        }
        pats[k] = jc_pattern_source(c, src, len);
        nodes[k] = pats[k] == JN_NONE ? JN_NONE : jc_compile(c, sub, depth + 1);
        jc_path_pop(c, back);
        if (nodes[k++] == JN_NONE)
            return false;
    }
    jc_path_pop(c, at);
    if (n_props)
        return patterns_miss_names(c, pats, n, keys, n_props);
    if (!jc_grow((void **)&g->key_pats, &g->cap_key_pats, g->n_key_pats + (uint32_t)n,
                 sizeof *g->key_pats)) {
        jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)", NULL);
        return false;
    }
    *first = g->n_key_pats;
    for (size_t i = 0; i < n; i++)
        g->key_pats[g->n_key_pats++] = (jkeypat){.pattern = pats[i], .node = nodes[i]};
    *count = (uint32_t)n;
    return true;
}
