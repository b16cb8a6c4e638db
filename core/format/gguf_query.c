/* GGUF accessors: keys, typed values, arrays and tensors of a header that
 * gguf_read.c has parsed and validated, so each is a plain lookup. */
#include <stdlib.h>
#include <string.h>

#include "format/gguf_internal.h"

/* ---- keys --------------------------------------------------------------- */

int64_t tw_gguf_key_count(const tw_gguf *g) { return g->n_kv; }

int64_t tw_gguf_find_key(const tw_gguf *g, const char *name)
{
    if (!name)
        return -1;
    for (int64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kvs[i].name, name) == 0)
            return i;
    return -1;
}

const char *tw_gguf_key_name(const tw_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_kv ? g->kvs[i].name : NULL;
}

const tw_gguf_value *tw_gguf_key_value(const tw_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_kv ? &g->kvs[i].v : NULL;
}

const tw_gguf_value *tw_gguf_get(const tw_gguf *g, const char *name)
{
    return tw_gguf_key_value(g, tw_gguf_find_key(g, name));
}

/* ---- value conversions ---------------------------------------------- */

static bool is_unsigned(uint32_t t)
{
    return t == TW_GGUF_U8 || t == TW_GGUF_U16 || t == TW_GGUF_U32 || t == TW_GGUF_U64;
}

static bool is_signed(uint32_t t)
{
    return t == TW_GGUF_I8 || t == TW_GGUF_I16 || t == TW_GGUF_I32 || t == TW_GGUF_I64;
}

tw_gguf_vtype tw_gguf_value_type(const tw_gguf_value *v) { return (tw_gguf_vtype)v->type; }

bool tw_gguf_value_u64(const tw_gguf_value *v, uint64_t *out)
{
    if (!v)
        return false;
    if (is_unsigned(v->type)) {
        *out = v->num.u;
        return true;
    }
    if (is_signed(v->type) && v->num.i >= 0) {
        *out = (uint64_t)v->num.i;
        return true;
    }
    return false;
}

bool tw_gguf_value_i64(const tw_gguf_value *v, int64_t *out)
{
    if (!v)
        return false;
    if (is_signed(v->type)) {
        *out = v->num.i;
        return true;
    }
    if (is_unsigned(v->type) && v->num.u <= (uint64_t)INT64_MAX) {
        *out = (int64_t)v->num.u;
        return true;
    }
    return false;
}

bool tw_gguf_value_f64(const tw_gguf_value *v, double *out)
{
    if (!v)
        return false;
    if (v->type == TW_GGUF_F32 || v->type == TW_GGUF_F64)
        *out = v->num.f;
    else if (is_unsigned(v->type))
        *out = (double)v->num.u;
    else if (is_signed(v->type))
        *out = (double)v->num.i;
    else
        return false;
    return true;
}

bool tw_gguf_value_bool(const tw_gguf_value *v, bool *out)
{
    if (!v || v->type != TW_GGUF_BOOL)
        return false;
    *out = v->num.u != 0;
    return true;
}

const char *tw_gguf_value_str(const tw_gguf_value *v, size_t *len)
{
    if (!v || v->type != TW_GGUF_STRING)
        return NULL;
    if (len)
        *len = (size_t)v->n;
    return v->str;
}

/* ---- typed getters ---------------------------------------------------- */

static tw_status lookup_key(const tw_gguf *g, const char *key, const tw_gguf_value **v,
                            tw_err *err)
{
    *v = tw_gguf_get(g, key);
    if (!*v)
        return tw_errorf(err, TW_NOT_FOUND, "gguf: missing key '%s'", key ? key : "(null)");
    return TW_OK;
}

static tw_status mismatch(const char *key, const tw_gguf_value *v, const char *want, tw_err *err)
{
    return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf: key '%s' is %s, not a value that fits %s",
                     key, tw_gguf_vtype_name(v->type), want);
}

/* One lookup-and-range-check for every integer getter; want names the
 * caller's type in the error message. */
static tw_status get_unsigned(const tw_gguf *g, const char *key, uint64_t max, const char *want,
                              uint64_t *out, tw_err *err)
{
    const tw_gguf_value *v;
    tw_status st = lookup_key(g, key, &v, err);
    if (st)
        return st;
    if (!tw_gguf_value_u64(v, out) || *out > max)
        return mismatch(key, v, want, err);
    return TW_OK;
}

static tw_status get_signed(const tw_gguf *g, const char *key, int64_t min, int64_t max,
                            const char *want, int64_t *out, tw_err *err)
{
    const tw_gguf_value *v;
    tw_status st = lookup_key(g, key, &v, err);
    if (st)
        return st;
    if (!tw_gguf_value_i64(v, out) || *out < min || *out > max)
        return mismatch(key, v, want, err);
    return TW_OK;
}

tw_status tw_gguf_get_u64(const tw_gguf *g, const char *key, uint64_t *out, tw_err *err)
{
    uint64_t x;
    tw_status st = get_unsigned(g, key, UINT64_MAX, "u64", &x, err);
    if (st == TW_OK)
        *out = x;
    return st;
}

tw_status tw_gguf_get_u32(const tw_gguf *g, const char *key, uint32_t *out, tw_err *err)
{
    uint64_t x;
    tw_status st = get_unsigned(g, key, UINT32_MAX, "u32", &x, err);
    if (st == TW_OK)
        *out = (uint32_t)x;
    return st;
}

tw_status tw_gguf_get_i64(const tw_gguf *g, const char *key, int64_t *out, tw_err *err)
{
    int64_t x;
    tw_status st = get_signed(g, key, INT64_MIN, INT64_MAX, "i64", &x, err);
    if (st == TW_OK)
        *out = x;
    return st;
}

tw_status tw_gguf_get_i32(const tw_gguf *g, const char *key, int32_t *out, tw_err *err)
{
    int64_t x;
    tw_status st = get_signed(g, key, INT32_MIN, INT32_MAX, "i32", &x, err);
    if (st == TW_OK)
        *out = (int32_t)x;
    return st;
}

tw_status tw_gguf_get_f64(const tw_gguf *g, const char *key, double *out, tw_err *err)
{
    const tw_gguf_value *v;
    double x;
    tw_status st = lookup_key(g, key, &v, err);
    if (st)
        return st;
    if (!tw_gguf_value_f64(v, &x))
        return mismatch(key, v, "f64", err);
    *out = x;
    return TW_OK;
}

tw_status tw_gguf_get_f32(const tw_gguf *g, const char *key, float *out, tw_err *err)
{
    double x;
    tw_status st = tw_gguf_get_f64(g, key, &x, err);
    if (st)
        return st;
    *out = (float)x;
    return TW_OK;
}

tw_status tw_gguf_get_bool(const tw_gguf *g, const char *key, bool *out, tw_err *err)
{
    const tw_gguf_value *v;
    bool x;
    tw_status st = lookup_key(g, key, &v, err);
    if (st)
        return st;
    if (!tw_gguf_value_bool(v, &x))
        return mismatch(key, v, "bool", err);
    *out = x;
    return TW_OK;
}

tw_status tw_gguf_get_str(const tw_gguf *g, const char *key, const char **out, size_t *len,
                          tw_err *err)
{
    const tw_gguf_value *v;
    tw_status st = lookup_key(g, key, &v, err);
    if (st)
        return st;
    const char *s = tw_gguf_value_str(v, len);
    if (!s)
        return mismatch(key, v, "string", err);
    *out = s;
    return TW_OK;
}

tw_status tw_gguf_get_arr(const tw_gguf *g, const char *key, const tw_gguf_value **out,
                          tw_err *err)
{
    const tw_gguf_value *v;
    tw_status st = lookup_key(g, key, &v, err);
    if (st)
        return st;
    if (v->type != TW_GGUF_ARRAY)
        return mismatch(key, v, "array", err);
    *out = v;
    return TW_OK;
}

/* ---- arrays ------------------------------------------------------------- */

tw_gguf_vtype tw_gguf_array_type(const tw_gguf_value *v)
{
    return v && v->type == TW_GGUF_ARRAY ? (tw_gguf_vtype)v->elem_type : (tw_gguf_vtype)-1;
}

uint64_t tw_gguf_array_len(const tw_gguf_value *v)
{
    return v && v->type == TW_GGUF_ARRAY ? v->n : 0;
}

/* Element i of a numeric array decoded into a scalar value. */
static bool array_scalar(const tw_gguf_value *v, uint64_t i, tw_gguf_value *out)
{
    if (!v || v->type != TW_GGUF_ARRAY || i >= v->n || !v->raw)
        return false;
    size_t sz = twf_gguf_scalar_size(v->elem_type);
    memset(out, 0, sizeof *out);
    out->type = v->elem_type;
    twf_gguf_decode_scalar(v->elem_type, v->raw + i * sz, out);
    return true;
}

bool tw_gguf_array_u64(const tw_gguf_value *v, uint64_t i, uint64_t *out)
{
    tw_gguf_value e;
    return array_scalar(v, i, &e) && tw_gguf_value_u64(&e, out);
}

bool tw_gguf_array_i64(const tw_gguf_value *v, uint64_t i, int64_t *out)
{
    tw_gguf_value e;
    return array_scalar(v, i, &e) && tw_gguf_value_i64(&e, out);
}

bool tw_gguf_array_f64(const tw_gguf_value *v, uint64_t i, double *out)
{
    tw_gguf_value e;
    return array_scalar(v, i, &e) && tw_gguf_value_f64(&e, out);
}

bool tw_gguf_array_f32(const tw_gguf_value *v, uint64_t i, float *out)
{
    if (v && v->type == TW_GGUF_ARRAY && v->elem_type == TW_GGUF_F32 && i < v->n && v->raw) {
        memcpy(out, v->raw + i * 4, 4);
        return true;
    }
    double d;
    if (!tw_gguf_array_f64(v, i, &d))
        return false;
    *out = (float)d;
    return true;
}

const char *tw_gguf_array_str(const tw_gguf_value *v, uint64_t i, size_t *len)
{
    if (!v || v->type != TW_GGUF_ARRAY || v->elem_type != TW_GGUF_STRING || i >= v->n)
        return NULL;
    if (len)
        *len = (size_t)v->strs[i].len;
    return v->strs[i].s;
}

const tw_gguf_value *tw_gguf_array_elem(const tw_gguf_value *v, uint64_t i)
{
    if (!v || v->type != TW_GGUF_ARRAY || v->elem_type != TW_GGUF_ARRAY || i >= v->n)
        return NULL;
    return &v->sub[i];
}

const void *tw_gguf_array_data(const tw_gguf_value *v)
{
    if (!v || v->type != TW_GGUF_ARRAY)
        return NULL;
    return v->raw;
}

/* ---- tensors ------------------------------------------------------------ */

int64_t tw_gguf_tensor_count(const tw_gguf *g) { return g->n_tensors; }

const tw_gguf_tensor *tw_gguf_tensor_at(const tw_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const tw_gguf_tensor *tw_gguf_find_tensor(const tw_gguf *g, const char *name)
{
    if (!name)
        return NULL;
    int64_t lo = 0, hi = g->n_tensors;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(g->tensors[g->by_name[mid]].name, name);
        if (c == 0)
            return &g->tensors[g->by_name[mid]];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

tw_status tw_gguf_get_tensor(const tw_gguf *g, const char *name,
                             const tw_gguf_tensor **out, tw_err *err)
{
    const tw_gguf_tensor *t = tw_gguf_find_tensor(g, name);
    if (!t)
        return tw_errorf(err, TW_NOT_FOUND, "gguf: missing tensor '%s'", name ? name : "(null)");
    if (!t->data)
        return tw_errorf(err, TW_UNIMPLEMENTED, "gguf: tensor '%s' has type %s, which is not supported",
                         t->name, tw_gguf_type_name(t->type));
    *out = t;
    return TW_OK;
}

/* ---- views of the file behind a copy ------------------------------------- */

tw_status tw_gguf_file_view(const tw_gguf *g, const void *p, size_t len, tw_file_view *out,
                            tw_err *err)
{
    if (!out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf: NULL view");
    memset(out, 0, sizeof *out);
    if (!g || !p)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf: NULL file or range");
    const uint8_t *b = p;
    if (b < g->map.data || (uint64_t)(b - g->map.data) > g->map.size)
        return tw_errorf(err, TW_OUT_OF_RANGE, "gguf: the range does not start in the file");
    twf_view v;
    tw_status st = twf_map_view(&g->map, (uint64_t)(b - g->map.data), len, "gguf", &v, err);
    if (st)
        return st;
    out->data = v.data;
    out->map = v.addr;
    out->map_len = v.map_len;
    return TW_OK;
}

void tw_file_view_release(tw_file_view *v)
{
    if (!v)
        return;
    twf_view view = {.data = v->data, .addr = v->map, .map_len = v->map_len};
    twf_view_release(&view);
    memset(v, 0, sizeof *v);
}
