#include "json_field.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *tw_bridge_json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a decimal";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
    default:
        return "null";
    }
}

static const json_t *field_lookup(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return (v && !json_is_null(v)) ? v : NULL;
}

static int type_error(const char *name, const char *want, const json_t *v, tw_bridge_apierr *ae)
{
    tw_bridge_fail(ae, TW_INVALID_ARGUMENT, name, "invalid_type",
                   "Invalid type for '%s': expected %s, but got %s instead.", name, want,
                   tw_bridge_json_type_name(v));
    return -1;
}

int tw_bridge_get_number(const json_t *obj, const char *key, const char *path, double lo,
                         double hi, double *out, tw_bridge_apierr *ae)
{
    const char *name = path ? path : key;
    const json_t *v = field_lookup(obj, key);
    if (!v)
        return 0;
    if (!json_is_number(v))
        return type_error(name, "a number", v, ae);
    double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi) {
        tw_bridge_fail(ae, TW_INVALID_ARGUMENT, name, "invalid_value",
                       "Invalid value for '%s': expected a number between %g and %g, but got "
                       "%g instead.",
                       name, lo, hi, d);
        return -1;
    }
    *out = d;
    return 1;
}

int tw_bridge_get_int(const json_t *obj, const char *key, const char *path, long long lo,
                      long long hi, long long *out, tw_bridge_apierr *ae)
{
    const char *name = path ? path : key;
    const json_t *v = field_lookup(obj, key);
    if (!v)
        return 0;
    long long x;
    if (json_is_integer(v)) {
        x = (long long)json_integer_value(v);
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        /* 9.2e18 is the largest double below 2^63, so the cast is defined. */
        if (!isfinite(d) || d != floor(d) || d < -9.2e18 || d > 9.2e18)
            return type_error(name, "an integer", v, ae);
        x = (long long)d;
    } else {
        return type_error(name, "an integer", v, ae);
    }
    if (x < lo || x > hi) {
        tw_bridge_fail(ae, TW_INVALID_ARGUMENT, name, "invalid_value",
                       "Invalid value for '%s': expected an integer between %lld and %lld, "
                       "but got %lld instead.",
                       name, lo, hi, x);
        return -1;
    }
    *out = x;
    return 1;
}

int tw_bridge_get_bool(const json_t *obj, const char *key, const char *path, bool *out,
                       tw_bridge_apierr *ae)
{
    const char *name = path ? path : key;
    const json_t *v = field_lookup(obj, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return type_error(name, "a boolean", v, ae);
    *out = json_is_true(v);
    return 1;
}

int tw_bridge_get_string(const json_t *obj, const char *key, const char *path,
                         size_t max_len, const char **out, size_t *out_len,
                         tw_bridge_apierr *ae)
{
    const char *name = path ? path : key;
    const json_t *v = field_lookup(obj, key);
    if (!v)
        return 0;
    if (!json_is_string(v))
        return type_error(name, "a string", v, ae);
    size_t len = json_string_length(v);
    if (len > max_len) {
        tw_bridge_fail(ae, TW_INVALID_ARGUMENT, name, "string_above_max_length",
                       "Invalid '%s': string too long. Expected a string with maximum length "
                       "%zu, but got a string with length %zu instead.",
                       name, max_len, len);
        return -1;
    }
    *out = json_string_value(v);
    if (out_len)
        *out_len = len;
    return 1;
}

int tw_bridge_get_typed(const json_t *obj, const char *key, const char *path, json_type type,
                        json_t **out, tw_bridge_apierr *ae)
{
    const char *name = path ? path : key;
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return 0;
    if (json_typeof(v) != type)
        return type_error(name, type == JSON_OBJECT ? "an object" : "an array", v, ae);
    *out = v;
    return 1;
}

char *tw_bridge_path_index(char *buf, size_t cap, const char *prefix, size_t index,
                           const char *suffix)
{
    if (suffix && suffix[0])
        snprintf(buf, cap, "%s[%zu].%s", prefix, index, suffix);
    else
        snprintf(buf, cap, "%s[%zu]", prefix, index);
    return buf;
}
