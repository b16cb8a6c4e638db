/* "allOf" of schemas that name no properties (a string and its length, a
 * number and its range, an enum narrowed by a type, zod's intersections of
 * open objects), merged keyword by keyword into one schema that admits
 * exactly what all of them admit: the types they share (an integer is a
 * number; OpenAPI's nullable folded into the type), the highest lower
 * bound and the lowest upper bound of each kind, the enum and const values
 * all of them take, and any other keyword where one schema says it or all
 * that say it agree. Anything else (two patterns, a nested allOf, anyOf
 * or oneOf) is refused rather than merged loosely. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json_compiler.h"

static bool named(const char *k, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k, names[i]))
            return true;
    return false;
}

static const char *const lower_keys[] = {"minLength", "minItems", "minProperties", "minimum",
                                         "exclusiveMinimum"};
static const char *const upper_keys[] = {"maxLength", "maxItems", "maxProperties", "maximum",
                                         "exclusiveMaximum"};

/* Whether type list t (a JSON array of names) holds name. */
static bool has_type(const json_t *t, const char *name)
{
    for (size_t i = 0; i < json_array_size(t); i++)
        if (!strcmp(json_string_value(json_array_get(t, i)), name))
            return true;
    return false;
}

/* Element e's types as a list (nullable folded in); NULL when it names
 * none. */
static json_t *types_of(const json_t *e)
{
    const json_t *t = json_object_get(e, "type");
    if (!t)
        return NULL;
    json_t *list = json_is_array(t) ? json_deep_copy(t) : json_pack("[O]", t);
    if (list && json_is_true(json_object_get(e, "nullable")) && !has_type(list, "null"))
        json_array_append_new(list, json_string("null"));
    return list;
}

/* The types both lists hold; a number and an integer share integers. */
static json_t *types_shared(const json_t *a, const json_t *b)
{
    json_t *out = json_array();
    for (size_t i = 0; out && i < json_array_size(a); i++) {
        const char *t = json_string_value(json_array_get(a, i));
        const char *keep = has_type(b, t)                                   ? t
                           : !strcmp(t, "number") && has_type(b, "integer") ? "integer"
                           : !strcmp(t, "integer") && has_type(b, "number") ? "integer"
                                                                            : NULL;
        if (keep && !has_type(out, keep))
            json_array_append_new(out, json_string(keep));
    }
    return out;
}

/* The enum values (const as one) of e that every value list so far holds
 * too; *have keeps the list. false with c->st set when none is left. */
static bool narrow_values(compiler *c, const json_t *e, json_t **have)
{
    const json_t *en = json_object_get(e, "enum"), *k = json_object_get(e, "const");
    if (!en && !k)
        return true;
    json_t *mine = en ? json_deep_copy(en) : json_pack("[O]", k);
    if (!json_is_array(mine)) {
        json_decref(mine);
        jc_fail(c, TW_INVALID_ARGUMENT, "json_schema: \"enum\" must be a non-empty array%s (at %s)",
                NULL);
        return false;
    }
    if (*have) {
        json_t *both = json_array();
        for (size_t i = 0; both && i < json_array_size(mine); i++)
            for (size_t j = 0; j < json_array_size(*have); j++)
                if (json_equal(json_array_get(mine, i), json_array_get(*have, j))) {
                    json_array_append(both, json_array_get(mine, i));
                    break;
                }
        json_decref(mine);
        json_decref(*have);
        mine = both;
    }
    *have = mine;
    if (json_array_size(mine) == 0) {
        jc_fail(c, TW_INVALID_ARGUMENT,
                "json_schema: no enum or const value fits every \"allOf\" schema%s (at %s)", NULL);
        return false;
    }
    return true;
}

/* Whether value v is of one of the types in list t. */
static bool value_typed(const json_t *v, const json_t *t)
{
    const char *name = json_is_object(v)    ? "object"
                       : json_is_array(v)   ? "array"
                       : json_is_string(v)  ? "string"
                       : json_is_boolean(v) ? "boolean"
                       : json_is_null(v)    ? "null"
                                            : NULL;
    if (name)
        return has_type(t, name);
    const double x = json_real_value(v);
    const bool whole = json_is_integer(v) || (isfinite(x) && floor(x) == x);
    return has_type(t, "number") || (whole && has_type(t, "integer"));
}

/* The values kept only where they are of the shared types. */
static bool values_typed(compiler *c, json_t *values, const json_t *types)
{
    for (size_t i = json_array_size(values); i-- > 0;)
        if (!value_typed(json_array_get(values, i), types))
            json_array_remove(values, i);
    if (json_array_size(values) > 0)
        return true;
    jc_fail(c, TW_INVALID_ARGUMENT,
            "json_schema: no enum or const value fits every \"allOf\" schema%s (at %s)", NULL);
    return false;
}

/* Folds keyword k = v of an element into merged. */
static bool fold(compiler *c, json_t *merged, const char *k, json_t *v)
{
    const json_t *had = json_object_get(merged, k);
    const bool lower = named(k, lower_keys, sizeof lower_keys / sizeof lower_keys[0]),
               upper = named(k, upper_keys, sizeof upper_keys / sizeof upper_keys[0]);
    if (lower || upper) {
        if (!json_is_number(v)) {
            jc_fail(c, TW_INVALID_ARGUMENT,
                    "json_schema: \"%.64s\" in an \"allOf\" merge must be a number (at %s)", k);
            return false;
        }
        if (!had || (lower ? json_number_value(v) > json_number_value(had)
                           : json_number_value(v) < json_number_value(had)))
            json_object_set(merged, k, v);
        return true;
    }
    if (!strcmp(k, "uniqueItems")) {
        if (!had || json_is_true(v))
            json_object_set(merged, k, v);
        return true;
    }
    if (had && !json_equal((json_t *)had, v)) {
        jc_fail(c, TW_INVALID_ARGUMENT,
                "json_schema: \"%.64s\" differs between \"allOf\" schemas (at %s)", k);
        return false;
    }
    json_object_set(merged, k, v);
    return true;
}

/* Element e (at allOf/i) into merged, *types and *values. */
static bool merge_element(compiler *c, const json_t *e, json_t *merged, json_t **types,
                          json_t **values)
{
    if (json_is_true(e))
        return true;
    const json_t *ref = json_is_object(e) ? json_object_get(e, "$ref") : NULL;
    if (ref) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)e, k, v)
        {
            if (strcmp(k, "$ref") != 0 && !jc_is_annotation(k)) {
                jc_fail(c, TW_INVALID_ARGUMENT, "json_schema: \"%.64s\" beside \"$ref\" (at %s)",
                        k);
                return false;
            }
        }
        e = jc_resolve_ref(c, ref);
        if (!e)
            return false;
    }
    if (!json_is_object(e) || json_object_get(e, "$ref") || json_object_get(e, "allOf") ||
        json_object_get(e, "anyOf") || json_object_get(e, "oneOf")) {
        jc_fail(c, TW_INVALID_ARGUMENT,
                "json_schema: \"allOf\" merges schemas without $ref, allOf, anyOf or oneOf of "
                "their own%s (at %s)",
                NULL);
        return false;
    }
    json_t *mine = types_of(e);
    if (mine) {
        json_t *shared = *types ? types_shared(*types, mine) : json_incref(mine);
        json_decref(mine);
        json_decref(*types);
        *types = shared;
        if (json_array_size(shared) == 0) {
            jc_fail(c, TW_INVALID_ARGUMENT,
                    "json_schema: no type is among every \"allOf\" schema's%s (at %s)", NULL);
            return false;
        }
    }
    if (!narrow_values(c, e, values))
        return false;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)e, k, v)
    {
        if (jc_is_annotation(k) || !strcmp(k, "type") || !strcmp(k, "nullable") ||
            !strcmp(k, "enum") || !strcmp(k, "const"))
            continue;
        if (!fold(c, merged, k, v))
            return false;
    }
    return true;
}

uint32_t jc_all_of_keys(compiler *c, const json_t *all, int depth)
{
    json_t *merged = json_object(), *types = NULL, *values = NULL;
    bool ok = merged != NULL;
    if (!ok)
        jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)", NULL);
    for (size_t i = 0; ok && i < json_array_size(all); i++) {
        char index[24];
        snprintf(index, sizeof index, "%zu", i);
        const size_t at = jc_path_push(c, index);
        ok = merge_element(c, json_array_get(all, i), merged, &types, &values);
        jc_path_pop(c, at);
    }
    if (ok && types && values)
        ok = values_typed(c, values, types);
    /* a type beside an enum adds nothing once the values are its */
    if (ok && types && !values)
        json_object_set(merged, "type", types);
    if (ok && values)
        json_object_set(merged, "enum", values);
    const uint32_t node = ok ? jc_compile(c, merged, depth + 1) : JN_NONE;
    json_decref(types);
    json_decref(values);
    json_decref(merged);
    return node;
}
