/* "allOf": one schema is that schema (how pydantic and others wrap a $ref
 * to give it a description or a default); several are merged when each is
 * an object schema (directly or through a $ref), as OpenAPI documents
 * compose a type from a base and its own properties: the properties of
 * all, in order, each at most once (a property two of them name must have
 * the same schema in both), the required names of all, and where one says
 * additionalProperties false, only the properties it names. Schemas that
 * name no properties (nor required ones) are merged keyword by keyword
 * (json_all_of_keys.c).
 * Anything else is refused rather than merged loosely. */
#include <stdio.h>
#include <string.h>

#include "json_compiler.h"

/* Keywords an object schema taking part in a merge may hold, beside
 * annotations. */
static bool mergeable(const char *k)
{
    return !strcmp(k, "type") || !strcmp(k, "properties") || !strcmp(k, "required") ||
           !strcmp(k, "additionalProperties");
}

/* Element e (at allOf/i) folded into props and required; *closed set when
 * it says additionalProperties false. false with c->st set. */
static bool merge_one(compiler *c, const json_t *e, json_t *props, json_t *required,
                      const json_t **closed)
{
    if (json_is_object(e) && json_object_get(e, "$ref")) {
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)e, key, v)
        {
            if (strcmp(key, "$ref") != 0 && !jc_is_annotation(key)) {
                jc_fail(c, TW_INVALID_ARGUMENT, "json_schema: \"%.64s\" beside \"$ref\" (at %s)",
                        key);
                return false;
            }
        }
        e = jc_resolve_ref(c, json_object_get(e, "$ref"));
        if (!e)
            return false;
    }
    const json_t *type = json_is_object(e) ? json_object_get(e, "type") : NULL;
    if (!json_is_object(e) ||
        (type && !(json_is_string(type) && !strcmp(json_string_value(type), "object")))) {
        jc_fail(c, TW_INVALID_ARGUMENT,
                "json_schema: \"allOf\" merges object schemas only%s (at %s)", NULL);
        return false;
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)e, key, v)
    {
        if (!mergeable(key) && !jc_is_annotation(key)) {
            jc_fail(c, TW_INVALID_ARGUMENT,
                    "json_schema: \"%.64s\" in a schema \"allOf\" merges (at %s)", key);
            return false;
        }
    }
    json_object_foreach(json_object_get(e, "properties"), key, v)
    {
        const json_t *had = json_object_get(props, key);
        if (had && !json_equal((json_t *)had, v)) {
            jc_fail(c, TW_INVALID_ARGUMENT,
                    "json_schema: property \"%.64s\" has two schemas in \"allOf\" (at %s)", key);
            return false;
        }
        json_object_set(props, key, v);
    }
    const json_t *req = json_object_get(e, "required");
    for (size_t i = 0; i < json_array_size(req); i++) {
        const json_t *name = json_array_get(req, i);
        bool have = false;
        for (size_t k = 0; k < json_array_size(required) && !have; k++)
            have = json_equal(json_array_get(required, k), (json_t *)name);
        if (!have)
            json_array_append(required, (json_t *)name);
    }
    const json_t *addl = json_object_get(e, "additionalProperties");
    if (addl && !json_is_boolean(addl)) {
        jc_fail(c, TW_INVALID_ARGUMENT,
                "json_schema: \"allOf\" merges additionalProperties true or false only%s (at %s)",
                NULL);
        return false;
    }
    if (json_is_false(addl))
        *closed = e;
    return true;
}

/* The merged properties less those a closed element does not name;
 * false (c->st set) when one of those is required. */
static bool keep_to(compiler *c, const json_t *closed, json_t *props, const json_t *required)
{
    const json_t *named = json_object_get(closed, "properties");
    const char *key;
    json_t *v, *tmp;
    json_object_foreach_safe(props, tmp, key, v)
    {
        if (json_object_get(named, key))
            continue;
        for (size_t i = 0; i < json_array_size(required); i++)
            if (!strcmp(json_string_value(json_array_get(required, i)), key)) {
                jc_fail(c, TW_INVALID_ARGUMENT,
                        "json_schema: required property \"%.64s\" is shut out by another "
                        "\"allOf\" schema's additionalProperties false (at %s)",
                        key);
                return false;
            }
        json_object_del(props, key);
    }
    return true;
}

uint32_t jc_all_of(compiler *c, const json_t *s, int depth)
{
    const json_t *all = json_object_get(s, "allOf");
    if (!json_is_array(all) || json_array_size(all) == 0)
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: \"allOf\" must be a non-empty list%s (at %s)", NULL);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v)
    {
        if (strcmp(key, "allOf") != 0 && !jc_is_annotation(key))
            return jc_fail(c, TW_INVALID_ARGUMENT,
                           "json_schema: \"%.64s\" beside \"allOf\" (at %s)", key);
    }
    const size_t back = jc_path_push(c, "allOf");
    uint32_t node = JN_NONE;
    if (json_array_size(all) == 1) {
        const size_t at = jc_path_push(c, "0");
        node = jc_compile(c, json_array_get(all, 0), depth + 1);
        jc_path_pop(c, at);
        jc_path_pop(c, back);
        return node;
    }
    bool objects = false;
    for (size_t i = 0; i < json_array_size(all); i++) {
        const json_t *e = json_array_get(all, i);
        objects |= json_is_object(e) &&
                   (json_object_get(e, "properties") || json_object_get(e, "required"));
    }
    if (!objects) {
        node = jc_all_of_keys(c, all, depth);
        jc_path_pop(c, back);
        return node;
    }
    json_t *props = json_object(), *required = json_array();
    const json_t *closed[64];
    size_t n_closed = 0;
    bool ok = props && required;
    if (!ok)
        jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)", NULL);
    if (ok && json_array_size(all) > 64) {
        jc_fail(c, TW_INVALID_ARGUMENT, "json_schema: \"allOf\" of more than 64 schemas%s (at %s)",
                NULL);
        ok = false;
    }
    for (size_t i = 0; ok && i < json_array_size(all); i++) {
        char index[24];
        snprintf(index, sizeof index, "%zu", i);
        const size_t at = jc_path_push(c, index);
        const json_t *shut = NULL;
        ok = merge_one(c, json_array_get(all, i), props, required, &shut);
        if (shut)
            closed[n_closed++] = shut;
        jc_path_pop(c, at);
    }
    for (size_t i = 0; ok && i < n_closed; i++)
        ok = keep_to(c, closed[i], props, required);
    json_t *merged = ok ? json_pack("{s:s, s:O, s:O, s:b}", "type", "object", "properties", props,
                                    "required", required, "additionalProperties", 0)
                        : NULL;
    if (ok && !merged)
        jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)", NULL);
    if (merged)
        node = jc_compile(c, merged, depth + 1);
    json_decref(merged);
    json_decref(props);
    json_decref(required);
    jc_path_pop(c, back);
    return node;
}
