/* safetensors reader: one mapped file, header validated at open. */
#include "tw/safetensors.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "format/arena.h"
#include "format/mapfile.h"
#include "tw/tensor.h"

/* The format caps the JSON header at 100 MB; a larger claim is garbage. */
#define MAX_HEADER_BYTES (100u * 1024u * 1024u)

struct tw_st_file {
    twf_map map;
    twf_arena arena;
    size_t n;
    tw_st_tensor *tensors; /* sorted by data offset */
    size_t *by_name;       /* indices sorted by name */
    json_t *metadata;      /* "__metadata__" object, or NULL */
};

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [TW_ST_BOOL] = {"BOOL", 1},       [TW_ST_U8] = {"U8", 1},
    [TW_ST_I8] = {"I8", 1},           [TW_ST_U16] = {"U16", 2},
    [TW_ST_I16] = {"I16", 2},         [TW_ST_F16] = {"F16", 2},
    [TW_ST_BF16] = {"BF16", 2},       [TW_ST_U32] = {"U32", 4},
    [TW_ST_I32] = {"I32", 4},         [TW_ST_F32] = {"F32", 4},
    [TW_ST_U64] = {"U64", 8},         [TW_ST_I64] = {"I64", 8},
    [TW_ST_F64] = {"F64", 8},         [TW_ST_F8_E4M3] = {"F8_E4M3", 1},
    [TW_ST_F8_E5M2] = {"F8_E5M2", 1},
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

const char *tw_st_dtype_name(tw_st_dtype dtype)
{
    return (size_t)dtype < N_DTYPES ? dtypes[dtype].name : "?";
}

size_t tw_st_dtype_size(tw_st_dtype dtype)
{
    return (size_t)dtype < N_DTYPES ? dtypes[dtype].size : 0;
}

static bool parse_dtype(const char *s, tw_st_dtype *out)
{
    for (size_t i = 0; i < N_DTYPES; i++) {
        if (strcmp(dtypes[i].name, s) == 0) {
            *out = (tw_st_dtype)i;
            return true;
        }
    }
    return false;
}

/* A JSON integer that is a valid non-negative size. */
static bool json_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

static tw_status parse_entry(tw_st_file *f, const char *name, json_t *desc, uint64_t data_size,
                             tw_st_tensor *t, uint64_t *begin, tw_err *err)
{
    if (!json_is_object(desc))
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "safetensors: entry '%s' in the header is not an object", name);
    json_t *dt = json_object_get(desc, "dtype");
    json_t *shape = json_object_get(desc, "shape");
    json_t *offs = json_object_get(desc, "data_offsets");
    if (!json_is_string(dt) || !parse_dtype(json_string_value(dt), &t->dtype))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "safetensors: tensor '%s' has a missing or "
                         "unknown dtype", name);
    if (!json_is_array(shape) || json_array_size(shape) > TW_ST_MAX_DIMS)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "safetensors: tensor '%s' has a missing shape or more than %d dimensions",
                         name, TW_ST_MAX_DIMS);
    t->n_dims = (uint32_t)json_array_size(shape);
    uint64_t n = 1;
    for (uint32_t d = 0; d < TW_ST_MAX_DIMS; d++) {
        t->shape[d] = 1;
        if (d >= t->n_dims)
            continue;
        if (!json_u64(json_array_get(shape, d), &t->shape[d]))
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "safetensors: tensor '%s' has a bad shape entry", name);
        if (__builtin_mul_overflow(n, t->shape[d], &n))
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "safetensors: tensor '%s' shape overflows the element count", name);
    }
    t->n_elems = n;
    uint64_t nbytes;
    if (__builtin_mul_overflow(n, (uint64_t)tw_st_dtype_size(t->dtype), &nbytes))
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "safetensors: tensor '%s' byte size overflows", name);
    uint64_t b, e;
    if (!json_is_array(offs) || json_array_size(offs) != 2 ||
        !json_u64(json_array_get(offs, 0), &b) || !json_u64(json_array_get(offs, 1), &e) || e < b)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "safetensors: tensor '%s' has bad data_offsets", name);
    if (e > data_size)
        return tw_errorf(err, TW_DATA_LOSS,
                         "safetensors: tensor '%s' data [%llu, %llu) runs past the end of the "
                         "data section (%llu bytes)",
                         name, (unsigned long long)b, (unsigned long long)e,
                         (unsigned long long)data_size);
    if (e - b != nbytes)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "safetensors: tensor '%s' has %llu bytes of data but its shape and dtype "
                         "need %llu",
                         name, (unsigned long long)(e - b), (unsigned long long)nbytes);
    size_t len = strlen(name);
    char *copy = twf_arena_alloc(&f->arena, len + 1);
    if (!copy)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "safetensors: out of memory");
    memcpy(copy, name, len + 1);
    t->name = copy;
    t->nbytes = nbytes;
    *begin = b;
    return TW_OK;
}

static int cmp_by_data(const void *a, const void *b)
{
    const tw_st_tensor *x = a, *y = b;
    uintptr_t p = (uintptr_t)x->data, q = (uintptr_t)y->data;
    if (p != q)
        return (p > q) - (p < q);
    return (x->nbytes > y->nbytes) - (x->nbytes < y->nbytes);
}

static int cmp_by_name(const void *a, const void *b, void *ctx)
{
    const tw_st_tensor *t = ctx;
    return strcmp(t[*(const size_t *)a].name, t[*(const size_t *)b].name);
}

static tw_status parse(tw_st_file *f, tw_err *err)
{
    const uint8_t *base = f->map.data;
    uint64_t size = f->map.size;
    uint64_t hlen;
    if (size < 8)
        return tw_errorf(err, TW_DATA_LOSS,
                         "safetensors: file is %llu bytes, too short for the header length",
                         (unsigned long long)size);
    memcpy(&hlen, base, 8);
    if (hlen > size - 8)
        return tw_errorf(err, TW_DATA_LOSS,
                         "safetensors: header claims %llu bytes but the file has only %llu after "
                         "the length",
                         (unsigned long long)hlen, (unsigned long long)(size - 8));
    if (hlen > MAX_HEADER_BYTES)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "safetensors: header of %llu bytes is too large",
                         (unsigned long long)hlen);
    json_error_t je;
    json_t *root = json_loadb((const char *)base + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "safetensors: header is not valid JSON: %s (column %d)", je.text,
                         je.column);
    tw_status st = TW_OK;
    if (!json_is_object(root)) {
        st = tw_errorf(err, TW_INVALID_ARGUMENT, "safetensors: header is not a JSON object");
        goto done;
    }
    size_t n = json_object_size(root);
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    f->by_name = calloc(n ? n : 1, sizeof *f->by_name);
    if (!f->tensors || !f->by_name) {
        st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "safetensors: out of memory");
        goto done;
    }
    const uint8_t *data = base + 8 + hlen;
    uint64_t data_size = size - 8 - hlen;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        if (strcmp(key, "__metadata__") == 0) {
            const char *mk;
            json_t *mv;
            if (!json_is_object(val)) {
                st = tw_errorf(err, TW_INVALID_ARGUMENT,
                               "safetensors: __metadata__ is not an object");
                goto done;
            }
            json_object_foreach(val, mk, mv)
            {
                if (!json_is_string(mv)) {
                    st = tw_errorf(err, TW_INVALID_ARGUMENT,
                                   "safetensors: __metadata__ value '%s' is not a string", mk);
                    goto done;
                }
            }
            f->metadata = json_incref(val);
            continue;
        }
        tw_st_tensor *t = &f->tensors[f->n];
        uint64_t begin = 0;
        if ((st = parse_entry(f, key, val, data_size, t, &begin, err)))
            goto done;
        t->data = data + begin;
        f->n++;
    }
    qsort(f->tensors, f->n, sizeof *f->tensors, cmp_by_data);
    for (size_t i = 0; i + 1 < f->n; i++) {
        const tw_st_tensor *a = &f->tensors[i], *b = &f->tensors[i + 1];
        if (a->nbytes && b->nbytes &&
            (const uint8_t *)a->data + a->nbytes > (const uint8_t *)b->data) {
            st = tw_errorf(err, TW_INVALID_ARGUMENT, "safetensors: tensors '%s' and '%s' overlap",
                           a->name, b->name);
            goto done;
        }
    }
    for (size_t i = 0; i < f->n; i++)
        f->by_name[i] = i;
    qsort_r(f->by_name, f->n, sizeof *f->by_name, cmp_by_name, f->tensors);
done:
    json_decref(root);
    return st;
}

static tw_status open_mapped(tw_st_file *f, tw_st_file **out, tw_err *err)
{
    twf_arena_init(&f->arena);
    tw_status st = parse(f, err);
    if (st) {
        tw_st_close(f);
        return st;
    }
    *out = f;
    return TW_OK;
}

tw_status tw_st_open(const char *path, tw_st_file **out, tw_err *err)
{
    if (!out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "safetensors: NULL output");
    *out = NULL;
    tw_st_file *f = calloc(1, sizeof *f);
    if (!f)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "safetensors: out of memory");
    tw_status st = twf_map_file(path, "safetensors", &f->map, err);
    if (st) {
        free(f);
        return st;
    }
    st = open_mapped(f, out, err);
    if (st)
        return tw_error_wrap(err, st, "%s", path);
    return TW_OK;
}

tw_status tw_st_open_memory(const void *buf, size_t len, tw_st_file **out, tw_err *err)
{
    if (!out || (!buf && len))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "safetensors: NULL buffer or output");
    *out = NULL;
    tw_st_file *f = calloc(1, sizeof *f);
    if (!f)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "safetensors: out of memory");
    twf_map_borrow(buf, len, &f->map);
    return open_mapped(f, out, err);
}

void tw_st_close(tw_st_file *f)
{
    if (!f)
        return;
    json_decref(f->metadata);
    free(f->tensors);
    free(f->by_name);
    twf_arena_free(&f->arena);
    twf_map_release(&f->map);
    free(f);
}

size_t tw_st_count(const tw_st_file *f) { return f->n; }

const tw_st_tensor *tw_st_tensor_at(const tw_st_file *f, size_t i)
{
    return i < f->n ? &f->tensors[i] : NULL;
}

const tw_st_tensor *tw_st_find(const tw_st_file *f, const char *name)
{
    if (!name)
        return NULL;
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->tensors[f->by_name[mid]].name, name);
        if (c == 0)
            return &f->tensors[f->by_name[mid]];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *tw_st_metadata(const tw_st_file *f, const char *key)
{
    if (!f->metadata || !key)
        return NULL;
    return json_string_value(json_object_get(f->metadata, key));
}

tw_status tw_st_to_f32(const tw_st_tensor *t, float *dst, size_t n, tw_err *err)
{
    if (n != t->n_elems)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "safetensors: tensor '%s' has %llu elements, not %zu", t->name,
                         (unsigned long long)t->n_elems, n);
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case TW_ST_F32:
        memcpy(dst, p, n * 4);
        return TW_OK;
    case TW_ST_F16:
    case TW_ST_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = t->dtype == TW_ST_F16 ? tw_f16_to_f32(h) : tw_bf16_to_f32(h);
        }
        return TW_OK;
    case TW_ST_F64:
        for (size_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, p + 8 * i, 8);
            dst[i] = (float)d;
        }
        return TW_OK;
    default:
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "safetensors: tensor '%s' has dtype %s, not a float type", t->name,
                         tw_st_dtype_name(t->dtype));
    }
}
