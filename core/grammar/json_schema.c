/* JSON Schema to grammar nodes (json_internal.h). Every keyword is either
 * understood, an annotation, or refused with its location: a schema that
 * asks for more than the matcher enforces must not get answers that look
 * right and are not. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_compiler.h"

#define MAX_SCHEMA_DEPTH  64
#define MAX_LITERAL_BYTES (1u << 20)

/* JSON types by bit, as "type" names them. */
enum {
    T_OBJECT = 1u << 0,
    T_ARRAY = 1u << 1,
    T_STRING = 1u << 2,
    T_NUMBER = 1u << 3,
    T_INTEGER = 1u << 4,
    T_BOOLEAN = 1u << 5,
    T_NULL = 1u << 6,
    T_ALL = (1u << 7) - 1,
};

static const char *const type_names[] = {"object",  "array",   "string", "number",
                                         "integer", "boolean", "null"};

uint32_t jc_fail(compiler *c, tw_status code, const char *fmt, const char *what)
{
    if (c->st == TW_OK) {
        c->st =
            tw_errorf(c->err, code, fmt, what ? what : "", c->path_len ? c->path : "the top level");
    }
    return JN_NONE;
}

/* Appends "/seg" (JSON-pointer escaped, cut to fit) and returns the length
 * to restore. */
size_t jc_path_push(compiler *c, const char *seg)
{
    size_t old = c->path_len, at = old;
    const size_t cap = sizeof c->path - 1;
    if (at < cap)
        c->path[at++] = '/';
    for (const char *p = seg; *p && at < cap; p++) {
        if (*p == '~' || *p == '/') {
            if (at + 2 > cap)
                break;
            c->path[at++] = '~';
            c->path[at++] = *p == '~' ? '0' : '1';
        } else {
            c->path[at++] = *p;
        }
    }
    c->path[at] = '\0';
    c->path_len = at;
    return old;
}

void jc_path_pop(compiler *c, size_t len)
{
    c->path_len = len;
    c->path[len] = '\0';
}

bool jc_grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    uint32_t n = *cap ? *cap * 2 : 16;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, (size_t)n * elem);
    if (!q)
        return false;
    *p = q;
    *cap = n;
    return true;
}

uint32_t jc_new_node(compiler *c, jnode_kind kind)
{
    tw_json_grammar *g = c->g;
    if (g->n_nodes >= TW_JSON_MAX_NODES)
        return jc_fail(c, TW_INVALID_ARGUMENT, "json_schema: more than 4096 nodes%s (at %s)", NULL);
    if (!jc_grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes))
        return jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)", NULL);
    jnode *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    for (int i = 0; i < JC_COUNT; i++)
        n->alt[i] = JN_NONE;
    n->extra = JN_NONE;
    n->names = JN_NONE;
    n->max = UINT32_MAX;
    return g->n_nodes++;
}

/* Adds a literal that takes over text (malloc'd, len bytes). */
uint32_t jc_add_text(compiler *c, char *text, size_t len)
{
    tw_json_grammar *g = c->g;
    if (len > TW_JSON_MAX_LITERAL || c->literal_bytes + len > MAX_LITERAL_BYTES) {
        free(text);
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: an enum value or key is longer than 4096 bytes%s (at %s)",
                       NULL);
    }
    if (!jc_grow((void **)&g->lits, &g->cap_lits, g->n_lits + 1, sizeof *g->lits)) {
        free(text);
        return jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)", NULL);
    }
    c->literal_bytes += len;
    g->lits[g->n_lits] = (jlit){.text = text, .len = (uint32_t)len};
    return g->n_lits++;
}

uint32_t jc_add_literal(compiler *c, const json_t *v)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text)
        return jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)", NULL);
    return jc_add_text(c, text, strlen(text));
}

/* "discriminator" (OpenAPI) names the property that tells objects apart,
 * which the compiler finds by itself. */
bool jc_is_annotation(const char *k)
{
    static const char *const names[] = {
        "title", "description", "default", "examples",      "$schema",    "$id",      "$comment",
        "$defs", "definitions", "strict",  "discriminator", "deprecated", "readOnly", "writeOnly"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(k, names[i]) == 0)
            return true;
    return false;
}

static bool is_understood(const char *k)
{
    static const char *const names[] = {"type",
                                        "properties",
                                        "required",
                                        "additionalProperties",
                                        "items",
                                        "prefixItems",
                                        "additionalItems",
                                        "minItems",
                                        "maxItems",
                                        "uniqueItems",
                                        "minLength",
                                        "maxLength",
                                        "pattern",
                                        "enum",
                                        "const",
                                        "allOf",
                                        "anyOf",
                                        "oneOf",
                                        "$ref",
                                        "format",
                                        "minimum",
                                        "maximum",
                                        "exclusiveMinimum",
                                        "exclusiveMaximum",
                                        "multipleOf",
                                        "nullable",
                                        "patternProperties",
                                        "minProperties",
                                        "maxProperties",
                                        "propertyNames"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(k, names[i]) == 0)
            return true;
    return jc_is_annotation(k);
}

/* The types a schema object admits: its "type", else what its keywords
 * imply, else all. 0 with c->st set when "type" is malformed. */
static unsigned schema_types(compiler *c, const json_t *s)
{
    const json_t *t = json_object_get(s, "type");
    if (!t) {
        unsigned m = 0;
        if (json_object_get(s, "properties") || json_object_get(s, "required") ||
            json_object_get(s, "additionalProperties") || json_object_get(s, "patternProperties") ||
            json_object_get(s, "minProperties") || json_object_get(s, "maxProperties") ||
            json_object_get(s, "propertyNames"))
            m |= T_OBJECT;
        if (json_object_get(s, "items") || json_object_get(s, "prefixItems") ||
            json_object_get(s, "minItems") || json_object_get(s, "maxItems") ||
            json_object_get(s, "uniqueItems") || json_object_get(s, "additionalItems"))
            m |= T_ARRAY;
        if (json_object_get(s, "minLength") || json_object_get(s, "maxLength") ||
            json_object_get(s, "pattern"))
            m |= T_STRING;
        if (jc_bound_keyword(s))
            m |= T_NUMBER;
        /* a format names the type it is for (format_of refuses the rest) */
        const char *f = json_string_value(json_object_get(s, "format"));
        if (f)
            m |= jc_numeric_format(f) == 2 ? T_INTEGER : jc_numeric_format(f) ? T_NUMBER : T_STRING;
        else if (json_object_get(s, "format"))
            m |= T_STRING;
        return m ? m : T_ALL;
    }
    unsigned m = 0;
    size_t n = json_is_array(t) ? json_array_size(t) : 1;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_is_array(t) ? json_array_get(t, i) : t;
        const char *name = json_string_value(e);
        unsigned bit = 0;
        for (size_t k = 0; name && k < sizeof type_names / sizeof type_names[0]; k++)
            if (strcmp(name, type_names[k]) == 0)
                bit = 1u << k;
        if (!bit) {
            jc_fail(c, TW_INVALID_ARGUMENT, "json_schema: \"type\" must name JSON types%s (at %s)",
                    NULL);
            return 0;
        }
        m |= bit;
    }
    if (!m)
        jc_fail(c, TW_INVALID_ARGUMENT, "json_schema: \"type\" lists no type%s (at %s)", NULL);
    /* OpenAPI 3.0's "nullable": null beside the named type(s); without a
     * "type" it means nothing there */
    const json_t *nullable = json_object_get(s, "nullable");
    if (m && nullable && !json_is_boolean(nullable)) {
        jc_fail(c, TW_INVALID_ARGUMENT, "json_schema: \"nullable\" must be true or false%s (at %s)",
                NULL);
        return 0;
    }
    return m | (json_is_true(nullable) ? T_NULL : 0);
}

/* A non-negative integer keyword, UINT32_MAX when absent as a maximum. */
bool jc_count_keyword(compiler *c, const json_t *s, const char *key, uint32_t dflt, uint32_t *out)
{
    const json_t *v = json_object_get(s, key);
    *out = dflt;
    if (!v)
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        json_integer_value(v) >= (json_int_t)UINT32_MAX) {
        jc_fail(c, TW_INVALID_ARGUMENT,
                "json_schema: \"%s\" must be a non-negative integer (at %s)", key);
        return false;
    }
    *out = (uint32_t)json_integer_value(v);
    return true;
}

/* "Any JSON value", built once per grammar. */
uint32_t jc_any_node(compiler *c)
{
    if (c->any != JN_NONE)
        return c->any;
    uint32_t u = jc_new_node(c, JN_UNION), obj = jc_new_node(c, JN_OBJECT),
             arr = jc_new_node(c, JN_ARRAY), str = jc_new_node(c, JN_STRING),
             num = jc_new_node(c, JN_NUMBER), bools = jc_new_node(c, JN_ENUM),
             null = jc_new_node(c, JN_ENUM);
    if (c->st != TW_OK)
        return JN_NONE;
    json_t *t = json_true(), *f = json_false(), *z = json_null();
    uint32_t lt = jc_add_literal(c, t), lf = jc_add_literal(c, f), lz = jc_add_literal(c, z);
    if (c->st != TW_OK)
        return JN_NONE;
    jnode *n = c->g->nodes;
    n[obj].extra = u;
    n[arr].extra = u;
    n[bools].first = lt;
    n[bools].n = 2;
    (void)lf;
    n[null].first = lz;
    n[null].n = 1;
    const uint32_t alts[JC_COUNT] = {obj, arr, str, num, bools, bools, null};
    memcpy(n[u].alt, alts, sizeof alts);
    c->any = u;
    return u;
}

/* The first-byte classes of a node, following unions. */
static unsigned node_classes(const tw_json_grammar *g, uint32_t node)
{
    const jnode *n = &g->nodes[node];
    switch ((jnode_kind)n->kind) {
    case JN_UNION: {
        unsigned m = 0;
        for (int i = 0; i < JC_COUNT; i++)
            if (n->alt[i] != JN_NONE)
                m |= 1u << i;
        return m;
    }
    case JN_OBJECT:
    case JN_TAGGED:
    case JN_KEYED:
        return 1u << JC_OBJECT;
    case JN_ARRAY:
        return 1u << JC_ARRAY;
    case JN_STRING:
        return 1u << JC_STRING;
    case JN_NUMBER:
    case JN_INTEGER:
        return 1u << JC_NUMBER;
    case JN_ENUM: {
        unsigned m = 0;
        for (uint32_t i = 0; i < n->n; i++)
            m |= 1u << json_class_of((unsigned char)g->lits[n->first + i].text[0]);
        return m;
    }
    }
    return 0;
}

static uint32_t compile_enum(compiler *c, const json_t *s)
{
    const json_t *e = json_object_get(s, "enum");
    const json_t *k = json_object_get(s, "const");
    if (e && k)
        return jc_fail(c, TW_INVALID_ARGUMENT, "json_schema: both \"enum\" and \"const\"%s (at %s)",
                       NULL);
    if (e && (!json_is_array(e) || json_array_size(e) == 0))
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: \"enum\" must be a non-empty array%s (at %s)", NULL);
    size_t n = e ? json_array_size(e) : 1;
    if (n > TW_JSON_MAX_ENUM)
        return jc_fail(c, TW_INVALID_ARGUMENT, "json_schema: more than 64 enum values%s (at %s)",
                       NULL);
    uint32_t first = c->g->n_lits, kept = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = e ? json_array_get(e, i) : k;
        bool dup = false;
        for (size_t j = 0; j < i && !dup; j++)
            dup = json_equal((json_t *)json_array_get(e, j), (json_t *)v);
        if (dup)
            continue;
        if (jc_add_literal(c, v) == JN_NONE)
            return JN_NONE;
        kept++;
    }
    uint32_t node = jc_new_node(c, JN_ENUM);
    if (node == JN_NONE)
        return JN_NONE;
    c->g->nodes[node].first = first;
    c->g->nodes[node].n = kept;
    return node;
}

/* Follows "#/$defs/name" or "#/definitions/name" (or "#" itself). */
const json_t *jc_resolve_ref(compiler *c, const json_t *ref)
{
    const char *r = json_string_value(ref);
    if (!r) {
        jc_fail(c, TW_INVALID_ARGUMENT, "json_schema: \"$ref\" must be a string%s (at %s)", NULL);
        return NULL;
    }
    if (strcmp(r, "#") == 0)
        return c->root;
    const char *name = NULL, *box = NULL;
    if (strncmp(r, "#/$defs/", 8) == 0) {
        box = "$defs";
        name = r + 8;
    } else if (strncmp(r, "#/definitions/", 14) == 0) {
        box = "definitions";
        name = r + 14;
    }
    const json_t *t = name && !strchr(name, '/') && !strchr(name, '~')
                          ? json_object_get(json_object_get(c->root, box), name)
                          : NULL;
    if (!t)
        jc_fail(c, TW_INVALID_ARGUMENT,
                "json_schema: \"$ref\" \"%.128s\" does not name an entry of #/$defs or "
                "#/definitions (at %s)",
                r);
    return t;
}

static uint32_t compile_ref(compiler *c, const json_t *s, int depth)
{
    const json_t *t = jc_resolve_ref(c, json_object_get(s, "$ref"));
    if (!t)
        return JN_NONE;
    for (size_t i = 0; i < c->n_seen; i++)
        if (c->seen[i].schema == t)
            return c->seen[i].node;
    /* the node exists before its body, so a schema can refer to itself */
    uint32_t slot = jc_new_node(c, JN_UNION);
    if (slot == JN_NONE)
        return JN_NONE;
    if (c->n_seen == c->cap_seen) {
        size_t cap = c->cap_seen ? c->cap_seen * 2 : 8;
        seen_ref *p = realloc(c->seen, cap * sizeof *p);
        if (!p)
            return jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)", NULL);
        c->seen = p;
        c->cap_seen = cap;
    }
    c->seen[c->n_seen++] = (seen_ref){.schema = t, .node = slot};
    uint32_t body = jc_compile(c, t, depth + 1);
    if (body == JN_NONE)
        return JN_NONE;
    c->g->nodes[slot] = c->g->nodes[body];
    return slot;
}

/* The classes a schema's values start with, from the schema itself, so a
 * union can be joined around a $ref whose node is still being compiled. */
static unsigned schema_classes(compiler *c, const json_t *s, int depth)
{
    if (depth > MAX_SCHEMA_DEPTH || json_is_true(s) || !json_is_object(s))
        return (1u << JC_COUNT) - 1;
    const json_t *all = json_object_get(s, "allOf");
    if (json_is_array(all) && json_array_size(all) == 1)
        return schema_classes(c, json_array_get(all, 0), depth + 1);
    if (json_is_array(all)) /* several: merged objects, or refused */
        return 1u << JC_OBJECT;
    const json_t *ref = json_object_get(s, "$ref");
    if (ref) {
        const json_t *t = jc_resolve_ref(c, ref);
        return t ? schema_classes(c, t, depth + 1) : 0;
    }
    const json_t *alts = json_object_get(s, "anyOf");
    if (!alts)
        alts = json_object_get(s, "oneOf");
    if (json_is_array(alts)) {
        unsigned m = 0;
        for (size_t i = 0; i < json_array_size(alts); i++)
            m |= schema_classes(c, json_array_get(alts, i), depth + 1);
        return m;
    }
    const json_t *e = json_object_get(s, "enum");
    const json_t *k = json_object_get(s, "const");
    if (e || k) {
        unsigned m = 0;
        size_t n = e ? json_array_size(e) : 1;
        for (size_t i = 0; i < n; i++) {
            const json_t *v = e ? json_array_get(e, i) : k;
            m |= json_is_object(v)   ? 1u << JC_OBJECT
                 : json_is_array(v)  ? 1u << JC_ARRAY
                 : json_is_string(v) ? 1u << JC_STRING
                 : json_is_number(v) ? 1u << JC_NUMBER
                 : json_is_true(v)   ? 1u << JC_TRUE
                 : json_is_false(v)  ? 1u << JC_FALSE
                                     : 1u << JC_NULL;
        }
        return m;
    }
    unsigned t = schema_types(c, s), m = 0;
    if (t & T_OBJECT)
        m |= 1u << JC_OBJECT;
    if (t & T_ARRAY)
        m |= 1u << JC_ARRAY;
    if (t & T_STRING)
        m |= 1u << JC_STRING;
    if (t & (T_NUMBER | T_INTEGER))
        m |= 1u << JC_NUMBER;
    if (t & T_BOOLEAN)
        m |= 1u << JC_TRUE | 1u << JC_FALSE;
    if (t & T_NULL)
        m |= 1u << JC_NULL;
    return m;
}

static uint32_t compile_union(compiler *c, const json_t *alts, const char *kw, int depth)
{
    if (!json_is_array(alts) || json_array_size(alts) == 0 ||
        json_array_size(alts) > TW_JSON_MAX_ENUM)
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: \"%s\" must list 1 to 64 schemas (at %s)", kw);
    size_t n = json_array_size(alts);
    uint32_t nodes[TW_JSON_MAX_ENUM];
    unsigned classes[TW_JSON_MAX_ENUM];
    size_t at = jc_path_push(c, kw);
    for (size_t i = 0; i < n; i++) {
        char idx[8];
        snprintf(idx, sizeof idx, "%zu", i);
        size_t back = jc_path_push(c, idx);
        nodes[i] = jc_compile(c, json_array_get(alts, i), depth + 1);
        classes[i] = nodes[i] == JN_NONE ? 0 : schema_classes(c, json_array_get(alts, i), 0);
        jc_path_pop(c, back);
        if (nodes[i] == JN_NONE)
            return JN_NONE;
    }
    uint32_t u = jc_join(c, nodes, classes, n);
    jc_path_pop(c, at);
    return u;
}

/* "format": date, time, date-time and uuid strings are generated as such
 * (a length bound beside them is refused: the format fixes the length);
 * ipv4, ipv6, hostname, email, duration, uri and byte strings as the
 * pattern that stands for them (*pattern, with the most characters the
 * format allows); password and binary strings, which name no syntax, as
 * any string; int8 to uint64 numbers within their range (json_bounds.c),
 * float and double numbers as every number here already is; any other
 * format is refused, as is a "pattern" beside a string format. */
static bool format_of(compiler *c, const json_t *s, unsigned types, jformat *out,
                      const char **pattern, uint32_t *pattern_max)
{
    const json_t *v = json_object_get(s, "format");
    *out = JF_NONE;
    *pattern = NULL;
    *pattern_max = UINT32_MAX;
    if (!v)
        return true;
    const char *name = json_string_value(v);
    if (!name) {
        jc_fail(c, TW_INVALID_ARGUMENT, "json_schema: \"format\" must be a string%s (at %s)", NULL);
        return false;
    }
    *out = json_format_named(name);
    if (types & T_STRING)
        *pattern = json_format_pattern(name, pattern_max);
    if ((*out != JF_NONE || *pattern) && (types & T_STRING)) {
        if (json_object_get(s, "pattern")) {
            jc_fail(c, TW_INVALID_ARGUMENT, "json_schema: \"pattern\" beside \"format\"%s (at %s)",
                    NULL);
            return false;
        }
        if (*out != JF_NONE &&
            (json_object_get(s, "minLength") || json_object_get(s, "maxLength"))) {
            jc_fail(c, TW_INVALID_ARGUMENT,
                    "json_schema: minLength or maxLength beside \"format\"%s (at %s)", NULL);
            return false;
        }
        return true;
    }
    if (jc_numeric_format(name) && (types & (T_NUMBER | T_INTEGER)) && !(types & T_STRING))
        return true;
    if (json_format_plain(name) && (types & T_STRING))
        return true;
    jc_fail(c, TW_INVALID_ARGUMENT, "json_schema: unsupported format \"%.64s\" (at %s)", name);
    return false;
}

static uint32_t compile_typed(compiler *c, const json_t *s, unsigned types, int depth)
{
    uint32_t nodes[JC_COUNT];
    unsigned classes[JC_COUNT];
    size_t n = 0;
    if (types & T_OBJECT) {
        nodes[n] = jc_object(c, s, depth);
        classes[n++] = 1u << JC_OBJECT;
    }
    if (types & T_ARRAY) {
        nodes[n] = jc_array(c, s, depth);
        classes[n++] = 1u << JC_ARRAY;
    }
    jformat format = JF_NONE;
    const char *format_pattern;
    uint32_t format_max;
    if (!format_of(c, s, types, &format, &format_pattern, &format_max))
        return JN_NONE;
    if (types & T_STRING) {
        uint32_t lo, hi, node = JN_NONE;
        if (jc_count_keyword(c, s, "minLength", 0, &lo) &&
            jc_count_keyword(c, s, "maxLength", UINT32_MAX, &hi)) {
            node = lo > hi ? jc_fail(c, TW_INVALID_ARGUMENT,
                                     "json_schema: minLength is above maxLength%s (at %s)", NULL)
                           : jc_new_node(c, JN_STRING);
            const uint32_t pattern =
                node == JN_NONE  ? JN_NONE
                : format_pattern ? jc_pattern_source(c, format_pattern, strlen(format_pattern))
                                 : jc_pattern(c, s);
            if (c->st != TW_OK)
                node = JN_NONE;
            if (node != JN_NONE) {
                c->g->nodes[node].min = lo;
                c->g->nodes[node].max = hi < format_max ? hi : format_max;
                c->g->nodes[node].format = (uint8_t)format;
                c->g->nodes[node].extra = pattern;
            }
        }
        nodes[n] = node;
        classes[n++] = 1u << JC_STRING;
    }
    if (types & (T_NUMBER | T_INTEGER)) {
        const bool integer = !(types & T_NUMBER);
        const uint32_t bounds = jc_number_bounds(c, s, integer);
        nodes[n] = c->st != TW_OK ? JN_NONE : jc_new_node(c, integer ? JN_INTEGER : JN_NUMBER);
        if (nodes[n] != JN_NONE)
            c->g->nodes[nodes[n]].extra = bounds;
        classes[n++] = 1u << JC_NUMBER;
    }
    if (types & (T_BOOLEAN | T_NULL)) {
        json_t *lits = json_array();
        if (types & T_BOOLEAN) {
            json_array_append_new(lits, json_true());
            json_array_append_new(lits, json_false());
        }
        if (types & T_NULL)
            json_array_append_new(lits, json_null());
        json_t *e = json_pack("{sO}", "enum", lits);
        nodes[n] =
            e ? compile_enum(c, e)
              : jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)", NULL);
        classes[n++] = ((types & T_BOOLEAN) ? (1u << JC_TRUE | 1u << JC_FALSE) : 0) |
                       ((types & T_NULL) ? 1u << JC_NULL : 0);
        json_decref(e);
        json_decref(lits);
    }
    for (size_t i = 0; i < n; i++)
        if (nodes[i] == JN_NONE)
            return JN_NONE;
    return n == 1 ? nodes[0] : jc_join(c, nodes, classes, n);
}

uint32_t jc_compile(compiler *c, const json_t *s, int depth)
{
    if (c->st != TW_OK)
        return JN_NONE;
    if (depth > MAX_SCHEMA_DEPTH)
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: nested deeper than 64 levels%s (at %s)", NULL);
    if (json_is_true(s))
        return jc_any_node(c);
    if (json_is_false(s))
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: the schema false admits no value%s (at %s)", NULL);
    if (!json_is_object(s))
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: a schema must be an object or a boolean%s (at %s)", NULL);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v)
    {
        if (!is_understood(key))
            return jc_fail(c, TW_INVALID_ARGUMENT,
                           "json_schema: unsupported keyword \"%.64s\" (at %s)", key);
    }
    if (json_object_get(s, "allOf"))
        return jc_all_of(c, s, depth);
    const json_t *ref = json_object_get(s, "$ref");
    const json_t *any = json_object_get(s, "anyOf");
    const json_t *one = json_object_get(s, "oneOf");
    const bool lits = json_object_get(s, "enum") || json_object_get(s, "const");
    if ((ref != NULL) + (any != NULL) + (one != NULL) + lits > 1)
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: $ref, anyOf, oneOf, enum and const%s cannot be combined "
                       "(at %s)",
                       NULL);
    const char *bound = jc_bound_keyword(s);
    if ((ref || any || one || lits) && bound)
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: \"%s\" beside $ref, anyOf, oneOf, enum or const (at %s)",
                       bound);
    if (ref)
        return compile_ref(c, s, depth);
    if (any || one)
        return compile_union(c, any ? any : one, any ? "anyOf" : "oneOf", depth);
    if (lits)
        return jc_pattern_admits_literals(c, s) ? compile_enum(c, s) : JN_NONE;
    unsigned types = schema_types(c, s);
    if (!types)
        return JN_NONE;
    if (types == T_ALL && !json_object_get(s, "type"))
        return jc_any_node(c);
    return compile_typed(c, s, types, depth);
}

void tw_json_grammar_free(tw_json_grammar *g)
{
    if (!g)
        return;
    json_patterns_free(g);
    free(g->tuple_items);
    free(g->key_pats);
    free(g->tail);
    free(g->bounds);
    free(g->tag_alts);
    for (uint32_t i = 0; i < g->n_lits; i++)
        free(g->lits[i].text);
    free(g->lits);
    free(g->props);
    free(g->nodes);
    free(g);
}

tw_status tw_json_grammar_set_tail(tw_json_grammar *g, const char *tail, size_t len, tw_err *err)
{
    if (len > TW_JSON_MAX_TAIL)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "a JSON tail of %zu bytes (at most %d)", len,
                         TW_JSON_MAX_TAIL);
    char *copy = malloc(len ? len : 1);
    if (!copy)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory for a JSON tail");
    memcpy(copy, tail, len);
    free(g->tail);
    g->tail = copy;
    g->tail_len = (uint32_t)len;
    return TW_OK;
}

tw_status tw_json_grammar_compile(const char *schema, size_t len, tw_json_grammar **out,
                                  tw_err *err)
{
    *out = NULL;
    if (len > TW_JSON_SCHEMA_MAX_BYTES)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "json_schema: %zu bytes, more than the %u allowed", len,
                         TW_JSON_SCHEMA_MAX_BYTES);
    json_t *root;
    if (!schema || len == 0) {
        root = json_pack("{ss}", "type", "object");
    } else {
        json_error_t je;
        root = json_loadb(schema, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
        if (!root)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "json_schema: not JSON: %s (offset %d)",
                             je.text, je.position);
    }
    tw_json_grammar *g = calloc(1, sizeof *g);
    compiler c = {.g = g, .root = root, .any = JN_NONE, .err = err, .st = TW_OK};
    if (!g || !root) {
        json_decref(root);
        free(g);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory");
    }
    g->key_string = JN_NONE; /* made last: no value node is taken for it meanwhile */
    g->root = jc_compile(&c, root, 0);
    if (c.st == TW_OK && node_classes(g, g->root) == 0)
        jc_fail(&c, TW_INVALID_ARGUMENT, "json_schema: the schema admits no value%s (at %s)", NULL);
    if (c.st == TW_OK)
        g->key_string = jc_new_node(&c, JN_STRING);
    free(c.seen);
    json_decref(root);
    if (c.st != TW_OK) {
        tw_json_grammar_free(g);
        return c.st;
    }
    *out = g;
    return TW_OK;
}
