/* Typed, range-checked reads of request JSON fields.
 *
 * Each getter looks up key in obj and returns 0 when the key is absent or
 * JSON null (OpenAI treats an explicit null as "not given"), 1 when a valid
 * value was stored in *out, and -1 after filling ae with a 400 that names the
 * field: `path` is the field's full name as the caller wants it reported
 * (e.g. "messages[2].content"); NULL reports the key itself.
 */
#ifndef TW_BRIDGE_JSON_FIELD_H
#define TW_BRIDGE_JSON_FIELD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "api_error.h"

/* A JSON value's type as OpenAI names it in messages ("a string", ...). */
const char *tw_bridge_json_type_name(const json_t *v);

/* A number (integer or real) within [lo, hi]. */
int tw_bridge_get_number(const json_t *obj, const char *key, const char *path, double lo,
                         double hi, double *out, tw_bridge_apierr *ae);

/* An integer within [lo, hi]; a real is accepted only when it is integral. */
int tw_bridge_get_int(const json_t *obj, const char *key, const char *path, long long lo,
                      long long hi, long long *out, tw_bridge_apierr *ae);

/* A boolean. */
int tw_bridge_get_bool(const json_t *obj, const char *key, const char *path, bool *out,
                       tw_bridge_apierr *ae);

/* A string of at most max_len bytes (the value stays owned by obj). */
int tw_bridge_get_string(const json_t *obj, const char *key, const char *path,
                         size_t max_len, const char **out, size_t *out_len,
                         tw_bridge_apierr *ae);

/* The value of key when it has the given jansson type (JSON_OBJECT,
 * JSON_ARRAY); *out is a borrowed reference. */
int tw_bridge_get_typed(const json_t *obj, const char *key, const char *path, json_type type,
                        json_t **out, tw_bridge_apierr *ae);

/* Formats "prefix[index]" or "prefix[index].suffix" into buf, for paths of
 * array elements. Returns buf. */
char *tw_bridge_path_index(char *buf, size_t cap, const char *prefix, size_t index,
                           const char *suffix);

#endif
