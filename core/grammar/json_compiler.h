/* The schema compiler's state and the helpers its files share
 * (json_schema.c: keywords to nodes; json_union.c: joining alternatives).
 * Internal to core/grammar. */
#ifndef TW_GRAMMAR_JSON_COMPILER_H
#define TW_GRAMMAR_JSON_COMPILER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json_internal.h"

typedef struct seen_ref {
    const json_t *schema;
    uint32_t node;
} seen_ref;

typedef struct compiler {
    tw_json_grammar *g;
    const json_t *root;
    seen_ref *seen;
    size_t n_seen, cap_seen;
    uint32_t any; /* JN_NONE until a schema needs it */
    size_t literal_bytes;
    char path[512]; /* JSON pointer of the schema being compiled */
    size_t path_len;
    tw_err *err;
    tw_status st;
} compiler;

/* Records the first failure: fmt takes what (may be NULL) and then the
 * JSON pointer of the schema being compiled. Returns JN_NONE. */
uint32_t jc_fail(compiler *c, tw_status code, const char *fmt, const char *what);

/* Appends "/seg" (JSON-pointer escaped) to the path of the schema being
 * compiled; returns the length jc_path_pop restores. */
size_t jc_path_push(compiler *c, const char *seg);
void jc_path_pop(compiler *c, size_t len);

/* s's non-negative integer keyword key into *out (dflt when absent);
 * false with c->st set when it is not one. */
bool jc_count_keyword(compiler *c, const json_t *s, const char *key, uint32_t dflt, uint32_t *out);

/* The node of schema s (depth: nesting so far); JN_NONE with c->st set
 * when it fails. */
uint32_t jc_compile(compiler *c, const json_t *s, int depth);

/* "Any JSON value", built once per grammar. */
uint32_t jc_any_node(compiler *c);

/* Whether keyword k is an annotation (no effect on what is generated). */
bool jc_is_annotation(const char *k);

/* The schema a "$ref" names (#, #/$defs/..., #/definitions/...); NULL
 * with c->st set when it names none. */
const json_t *jc_resolve_ref(compiler *c, const json_t *ref);

/* A schema with "allOf" (json_all_of.c). */
uint32_t jc_all_of(compiler *c, const json_t *s, int depth);

/* allOf's schemas that name no properties, merged keyword by keyword
 * (json_all_of_keys.c). */
uint32_t jc_all_of_keys(compiler *c, const json_t *all, int depth);

/* An object schema's node (json_object.c). */
uint32_t jc_object(compiler *c, const json_t *s, int depth);

/* Adds a literal: the compact JSON text of v. */
uint32_t jc_add_literal(compiler *c, const json_t *v);

/* An array schema's node (json_array.c). */
uint32_t jc_array(compiler *c, const json_t *s, int depth);

/* Grows *p (elements of elem bytes, *cap of them) to hold need. */
bool jc_grow(void **p, uint32_t *cap, uint32_t need, size_t elem);

/* A new node of kind with nothing in it; JN_NONE past TW_JSON_MAX_NODES. */
uint32_t jc_new_node(compiler *c, jnode_kind kind);

/* Adds a literal that takes over text (malloc'd, len bytes). */
uint32_t jc_add_text(compiler *c, char *text, size_t len);

/* Joins alternatives (their nodes and first-byte classes) into one union. */
uint32_t jc_join(compiler *c, const uint32_t *alts, const unsigned *classes, size_t n);

/* The first bound keyword (minimum, maximum, exclusiveMinimum,
 * exclusiveMaximum) of schema s; NULL when it has none. */
const char *jc_bound_keyword(const json_t *s);

/* A numeric format's name (json_bounds.c): 2 for one of integers
 * (int8 ... uint64, whose ranges bound the number), 1 for float or double,
 * 0 for another name. */
int jc_numeric_format(const char *name);

/* Compiles s's bounds for a number (integer: or an integer) node: the
 * index of its jbounds, or JN_NONE when it has none or they fail (c->st). */
uint32_t jc_number_bounds(compiler *c, const json_t *s, bool integer);

/* Compiles s's "pattern" into the grammar: its index, or JN_NONE when s
 * has none or it fails (c->st). */
uint32_t jc_pattern(compiler *c, const json_t *s);

/* Compiles pattern text src (len bytes) the same way. */
uint32_t jc_pattern_source(compiler *c, const char *src, size_t len);

/* s's "patternProperties" (json_key_patterns.c), for an object whose
 * n_props properties are named keys: their entries into the grammar,
 * *first and *count of them (none when s has none, or has properties,
 * whose names none of them may match); false with c->st set when they
 * fail. */
bool jc_key_patterns(compiler *c, const json_t *s, const char *const *keys, size_t n_props,
                     int depth, uint32_t *first, uint32_t *count);

/* s's "propertyNames" (json_key_names.c), for an object whose n_props
 * properties are named keys: *names, the node that reads the names an
 * object without properties writes (JN_NONE: any), and *max_keys held to
 * how many names there can be; each of keys must be a name it admits.
 * false with c->st set when it fails. */
bool jc_key_names(compiler *c, const json_t *s, const char *const *keys, size_t n_props, int depth,
                  uint32_t *names, uint32_t *max_keys);

/* Whether every string among s's enum or const values matches s's
 * "pattern" (true when it has none); false with c->st set. */
bool jc_pattern_admits_literals(compiler *c, const json_t *s);

#endif
