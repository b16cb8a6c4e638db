/* "propertyNames": the schema every key of an object satisfies. Keys are
 * strings, so only what it says of strings counts: an enum or const of
 * names, or a string's pattern (a format read as one included) and
 * length. An object without properties writes its keys to it, each kept
 * whole and asked of it character by character as patternProperties' keys
 * are (json_match_string.c); an object with properties writes no other
 * keys, so there each property's name must be one it admits. */
#include <string.h>

#include "json_compiler.h"
#include "tw/long_context.h"

/* Whether node nm reads every string: no names are ruled out. */
static bool any_name(const jnode *nm)
{
    return nm->kind == JN_STRING && nm->extra == JN_NONE && nm->format == JF_NONE && nm->min == 0 &&
           nm->max == UINT32_MAX;
}

bool json_key_name_ok(const tw_json_grammar *g, const jnode *nm, const unsigned char *k, size_t n,
                      uint32_t chars, bool whole)
{
    if (nm->kind == JN_ENUM) {
        for (uint32_t i = 0; i < nm->n; i++) {
            const jlit *l = &g->lits[nm->first + i];
            if (l->text[0] != '"')
                continue;
            const size_t len = l->len - 2u; /* between its quotes */
            if ((whole ? len == n : len >= n) && memcmp(l->text + 1, k, n) == 0)
                return true;
        }
        return false;
    }
    if (chars > nm->max || (whole && chars < nm->min))
        return false;
    if (nm->extra == JN_NONE)
        return true;
    const int r = json_pattern_test(&g->patterns[nm->extra], k, n, whole);
    return r == JP_MATCH || (!whole && r == JP_VIABLE);
}

/* The names an enum node admits as keys: its strings, each written
 * without an escape (as ruled keys are) and short enough to be kept;
 * false with c->st set when one is not. */
static bool enum_names(compiler *c, const jnode *nm, uint32_t *count)
{
    *count = 0;
    for (uint32_t i = 0; i < nm->n; i++) {
        const jlit *l = &c->g->lits[nm->first + i];
        if (l->text[0] != '"')
            continue;
        if (memchr(l->text + 1, '\\', l->len - 2u)) {
            jc_fail(c, TW_INVALID_ARGUMENT,
                    "json_schema: a name in \"propertyNames\" that JSON writes with an "
                    "escape%s is not supported (at %s)",
                    NULL);
            return false;
        }
        if (l->len - 2u > JREC_MAX) {
            jc_fail(c, TW_INVALID_ARGUMENT,
                    "json_schema: a name in \"propertyNames\" of more than 255 bytes%s is not "
                    "supported (at %s)",
                    NULL);
            return false;
        }
        (*count)++;
    }
    return true;
}

/* The names schema pn's node, through its alternatives to the one that
 * reads strings; JN_NONE with c->st set when it reads none or reads them
 * in a way keys cannot be. */
static uint32_t names_node(compiler *c, const json_t *pn, int depth, uint32_t *max_keys)
{
    uint32_t node = jc_compile(c, pn, depth + 1);
    const tw_json_grammar *g = c->g;
    for (int hops = 0; node != JN_NONE && g->nodes[node].kind == JN_UNION && hops < 16; hops++)
        node = g->nodes[node].alt[JC_STRING];
    if (c->st != TW_OK)
        return JN_NONE;
    const jnode *nm = node == JN_NONE ? NULL : &g->nodes[node];
    uint32_t count = UINT32_MAX;
    if (nm && nm->kind == JN_ENUM && !enum_names(c, nm, &count))
        return JN_NONE;
    if (!nm || (nm->kind != JN_STRING && nm->kind != JN_ENUM) || count == 0)
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: \"propertyNames\" admits no string%s, and every key is one "
                       "(at %s)",
                       NULL);
    if (nm->format != JF_NONE)
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: a date, time, date-time or uuid \"format\" in "
                       "\"propertyNames\"%s is not supported (at %s)",
                       NULL);
    if (count < *max_keys)
        *max_keys = count;
    return node;
}

bool jc_key_names(compiler *c, const json_t *s, const char *const *keys, size_t n_props, int depth,
                  uint32_t *names, uint32_t *max_keys)
{
    *names = JN_NONE;
    const json_t *pn = json_object_get(s, "propertyNames");
    if (!pn || json_is_true(pn))
        return true;
    const size_t at = jc_path_push(c, "propertyNames");
    if (json_is_false(pn)) {
        jc_path_pop(c, at);
        if (n_props) {
            jc_fail(c, TW_INVALID_ARGUMENT,
                    "json_schema: \"propertyNames\": false beside \"properties\"%s admits none of "
                    "them (at %s)",
                    NULL);
            return false;
        }
        *max_keys = 0;
        return true;
    }
    const uint32_t node = names_node(c, pn, depth, max_keys);
    jc_path_pop(c, at);
    if (node == JN_NONE)
        return false;
    const jnode *nm = &c->g->nodes[node];
    for (size_t i = 0; i < n_props; i++) {
        const size_t len = strlen(keys[i]);
        if (!json_key_name_ok(c->g, nm, (const unsigned char *)keys[i], len,
                              (uint32_t)tw_text_chars(keys[i], len), true)) {
            jc_fail(c, TW_INVALID_ARGUMENT,
                    "json_schema: property \"%.64s\" is not a name its \"propertyNames\" admits "
                    "(at %s)",
                    keys[i]);
            return false;
        }
    }
    *names = n_props || any_name(nm) ? JN_NONE : node;
    return true;
}
