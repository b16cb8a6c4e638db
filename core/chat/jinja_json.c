/* JSON in and out of the value model: jansson documents become values, and
 * values are written the way Python's json.dumps writes them. */
#include "jinja.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool put_cstr(jrender *r, const jnode *at, jbuf *b, const char *s)
{
    return jbuf_put(r, at, b, s, strlen(s));
}

/* ---- JSON ------------------------------------------------------------- */

static bool json_str(jrender *r, const jnode *at, jbuf *b, const char *s, size_t len,
                     bool ensure_ascii)
{
    if (!put_cstr(r, at, b, "\""))
        return false;
    size_t run = 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        const char *lit = NULL;
        char esc[16];
        size_t n = 1;
        if (c == '"')
            lit = "\\\"";
        else if (c == '\\')
            lit = "\\\\";
        else if (c == '\n')
            lit = "\\n";
        else if (c == '\r')
            lit = "\\r";
        else if (c == '\t')
            lit = "\\t";
        else if (c == '\b')
            lit = "\\b";
        else if (c == '\f')
            lit = "\\f";
        else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            lit = esc;
        } else if (c >= 0x80 && ensure_ascii) {
            int32_t cp;
            n = ju_decode(s + i, len - i, &cp);
            if (cp >= 0x10000) {
                unsigned v = (unsigned)cp - 0x10000;
                snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xD800 + (v >> 10),
                         0xDC00 + (v & 0x3FF));
            } else {
                snprintf(esc, sizeof esc, "\\u%04x", (unsigned)cp);
            }
            lit = esc;
        }
        if (!lit) {
            run++;
            i++;
            continue;
        }
        if (!jbuf_put(r, at, b, s + i - run, run) || !put_cstr(r, at, b, lit))
            return false;
        run = 0;
        i += n;
    }
    if (!jbuf_put(r, at, b, s + len - run, run))
        return false;
    return put_cstr(r, at, b, "\"");
}

static bool json_newline(jrender *r, const jnode *at, jbuf *b, const jjson_opts *o,
                         unsigned level)
{
    if (!o->have_indent)
        return true;
    if (!put_cstr(r, at, b, "\n"))
        return false;
    for (unsigned i = 0; i < level; i++)
        if (!jbuf_put(r, at, b, o->indent, o->indent_len))
            return false;
    return true;
}

static bool json_key(jrender *r, const jnode *at, jbuf *b, jv k, const jjson_opts *o)
{
    char tmp[64];
    switch (k.kind) {
    case JV_STR:
        return json_str(r, at, b, jv_str_of(k)->data, jv_str_of(k)->len, o->ensure_ascii);
    case JV_INT:
        snprintf(tmp, sizeof tmp, "\"%lld\"", (long long)k.u.i);
        return put_cstr(r, at, b, tmp);
    case JV_BOOL:
        return put_cstr(r, at, b, k.u.b ? "\"true\"" : "\"false\"");
    case JV_NONE:
        return put_cstr(r, at, b, "\"null\"");
    case JV_FLOAT: {
        char f[48];
        jv_float_repr(k.u.f, f, sizeof f);
        snprintf(tmp, sizeof tmp, "\"%s\"", f);
        return put_cstr(r, at, b, tmp);
    }
    default:
        return jr_fail(r, at, TW_INVALID_ARGUMENT,
                       "keys must be str, int, float, bool or None, not %s", jv_type_name(k));
    }
}

static int key_cmp(const void *x, const void *y, void *unused);

static bool json_val(jrender *r, const jnode *at, jbuf *b, jv v, const jjson_opts *o,
                     unsigned level)
{
    char tmp[64];
    if (level > 512)
        return jr_fail(r, at, TW_INVALID_ARGUMENT, "value nested too deeply for tojson");
    switch (v.kind) {
    case JV_NONE:
        return put_cstr(r, at, b, "null");
    case JV_BOOL:
        return put_cstr(r, at, b, v.u.b ? "true" : "false");
    case JV_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        return put_cstr(r, at, b, tmp);
    case JV_FLOAT:
        if (v.u.f != v.u.f)
            return put_cstr(r, at, b, "NaN");
        if (v.u.f == 1.0 / 0.0)
            return put_cstr(r, at, b, "Infinity");
        if (v.u.f == -1.0 / 0.0)
            return put_cstr(r, at, b, "-Infinity");
        jv_float_repr(v.u.f, tmp, sizeof tmp);
        return put_cstr(r, at, b, tmp);
    case JV_STR:
        return json_str(r, at, b, jv_str_of(v)->data, jv_str_of(v)->len, o->ensure_ascii);
    case JV_LIST: {
        const jlist *l = jv_list_of(v);
        if (l->n == 0)
            return put_cstr(r, at, b, "[]");
        if (!put_cstr(r, at, b, "["))
            return false;
        for (size_t i = 0; i < l->n; i++) {
            if (i && !jbuf_put(r, at, b, o->item_sep, o->item_sep_len))
                return false;
            if (!json_newline(r, at, b, o, level + 1) ||
                !json_val(r, at, b, l->items[i], o, level + 1))
                return false;
        }
        return json_newline(r, at, b, o, level) && put_cstr(r, at, b, "]");
    }
    case JV_DICT: {
        const jdict *d = jv_dict_of(v);
        if (d->n == 0)
            return put_cstr(r, at, b, "{}");
        size_t *order = NULL;
        if (o->sort_keys) {
            for (size_t i = 0; i < d->n; i++)
                if (d->keys[i].kind != JV_STR)
                    return jr_fail(r, at, TW_INVALID_ARGUMENT,
                                   "tojson(sort_keys=true) needs string keys");
            order = malloc(d->n * sizeof *order);
            if (!order)
                return jr_fail(r, at, TW_RESOURCE_EXHAUSTED, "out of memory");
            for (size_t i = 0; i < d->n; i++)
                order[i] = i;
            qsort_r(order, d->n, sizeof *order, key_cmp, (void *)d);
        }
        bool ok = put_cstr(r, at, b, "{");
        for (size_t k = 0; ok && k < d->n; k++) {
            size_t i = order ? order[k] : k;
            if (k && !jbuf_put(r, at, b, o->item_sep, o->item_sep_len)) {
                ok = false;
                break;
            }
            ok = json_newline(r, at, b, o, level + 1) && json_key(r, at, b, d->keys[i], o) &&
                 jbuf_put(r, at, b, o->key_sep, o->key_sep_len) &&
                 json_val(r, at, b, d->vals[i], o, level + 1);
        }
        free(order);
        return ok && json_newline(r, at, b, o, level) && put_cstr(r, at, b, "}");
    }
    default:
        return jr_fail(r, at, TW_INVALID_ARGUMENT, "Object of type %s is not JSON serializable",
                       jv_type_name(v));
    }
}

static int key_cmp(const void *x, const void *y, void *arg)
{
    const jdict *d = arg;
    const jstr *a = jv_str_of(d->keys[*(const size_t *)x]);
    const jstr *b = jv_str_of(d->keys[*(const size_t *)y]);
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->data, b->data, n);
    return c ? c : a->len < b->len ? -1 : a->len > b->len ? 1 : 0;
}

bool jv_tojson(jrender *r, const jnode *at, jbuf *b, jv v, const jjson_opts *o)
{
    return json_val(r, at, b, v, o, 0);
}

bool jv_from_json(jrender *r, const json_t *j, jv *out, unsigned depth)
{
    *out = jv_undef();
    if (depth > 256)
        return jr_fail(r, NULL, TW_INVALID_ARGUMENT, "variables nested more than 256 deep");
    switch (json_typeof(j)) {
    case JSON_NULL:
        *out = jv_none();
        return true;
    case JSON_TRUE:
        *out = jv_bool(true);
        return true;
    case JSON_FALSE:
        *out = jv_bool(false);
        return true;
    case JSON_INTEGER:
        *out = jv_int((int64_t)json_integer_value(j));
        return true;
    case JSON_REAL:
        *out = jv_float(json_real_value(j));
        return true;
    case JSON_STRING:
        return jv_new_str(r, NULL, json_string_value(j), json_string_length(j), out);
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        if (!jv_new_list(r, NULL, n, false, out))
            return false;
        for (size_t i = 0; i < n; i++) {
            jv item;
            if (!jv_from_json(r, json_array_get(j, i), &item, depth + 1)) {
                jv_decref(r, item);
                return false;
            }
            if (!jlist_push(r, NULL, jv_list_of(*out), item))
                return false;
        }
        return true;
    }
    case JSON_OBJECT: {
        if (!jv_new_dict(r, NULL, out))
            return false;
        const char *key;
        size_t klen;
        json_t *val;
        json_object_keylen_foreach((json_t *)j, key, klen, val) {
            jv k, v;
            if (!jv_new_str(r, NULL, key, klen, &k))
                return false;
            if (!jv_from_json(r, val, &v, depth + 1)) {
                jv_decref(r, v);
                jv_decref(r, k);
                return false;
            }
            bool ok = jdict_append(r, NULL, jv_dict_of(*out), k, v);
            jv_decref(r, k);
            if (!ok)
                return false;
        }
        return true;
    }
    }
    return jr_fail(r, NULL, TW_INVALID_ARGUMENT, "unsupported JSON value");
}
