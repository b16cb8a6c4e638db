/* GGUF v3 writer: metadata and tensor descriptions are collected in memory,
 * tensor bytes are copied or produced at write time, and the file appears
 * atomically (temp file, fsync, rename). */
#include "tw/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/gguf_internal.h"

#define GGUF_VERSION 3
/* llama.cpp refuses tensor names of GGML_MAX_NAME (64) bytes or more. */
#define MAX_TENSOR_NAME 63
#define MAX_KEY_LEN 65535

struct tw_gguf_warr {
    uint32_t elem_type;
    size_t n, cap;
    uint8_t *num;  /* packed little-endian elements */
    char **strs;   /* string elements */
    size_t *lens;
    tw_gguf_warr **subs; /* nested arrays */
};

typedef struct wkv {
    char *key;
    uint32_t type;
    uint8_t scalar[8];
    char *str;
    size_t len;
    tw_gguf_warr *arr;
} wkv;

typedef struct wtensor {
    char *name;
    uint32_t type;
    uint32_t n_dims;
    uint64_t dims[TW_GGUF_MAX_DIMS];
    uint64_t nbytes;
    uint64_t offset;
    void *copy;
    tw_gguf_fill_fn fill;
    void *ctx;
} wtensor;

struct tw_gguf_writer {
    wkv *kvs;
    size_t n_kv, cap_kv;
    wtensor *tensors;
    size_t n_tensors, cap_tensors;
};

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t nc = *cap ? *cap * 2 : 16;
    while (nc < need)
        nc *= 2;
    if (nc > SIZE_MAX / elem)
        return false;
    void *q = realloc(*p, nc * elem);
    if (!q)
        return false;
    *p = q;
    *cap = nc;
    return true;
}

static char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* ---- arrays ------------------------------------------------------------- */

tw_status tw_gguf_warr_new(tw_gguf_vtype elem_type, tw_gguf_warr **out, tw_err *err)
{
    *out = NULL;
    if (elem_type != TW_GGUF_STRING && elem_type != TW_GGUF_ARRAY && twf_gguf_scalar_size(elem_type) == 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf writer: bad array element type %d",
                         (int)elem_type);
    tw_gguf_warr *a = calloc(1, sizeof *a);
    if (!a)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf writer: out of memory");
    a->elem_type = elem_type;
    *out = a;
    return TW_OK;
}

void tw_gguf_warr_free(tw_gguf_warr *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n; i++) {
        if (a->strs)
            free(a->strs[i]);
        if (a->subs)
            tw_gguf_warr_free(a->subs[i]);
    }
    free(a->num);
    free(a->strs);
    free(a->lens);
    free(a->subs);
    free(a);
}

static void pack_scalar(uint32_t type, const void *value, uint8_t *dst)
{
    if (type == TW_GGUF_BOOL)
        dst[0] = *(const bool *)value ? 1 : 0;
    else
        memcpy(dst, value, twf_gguf_scalar_size(type));
}

tw_status tw_gguf_warr_push_num(tw_gguf_warr *a, const void *value, tw_err *err)
{
    size_t sz = twf_gguf_scalar_size(a->elem_type);
    if (sz == 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "gguf writer: numeric element pushed to a %s array",
                         tw_gguf_vtype_name(a->elem_type));
    size_t cap_bytes = a->cap * sz;
    if (!grow((void **)&a->num, &cap_bytes, (a->n + 1) * sz, 1))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf writer: out of memory");
    a->cap = cap_bytes / sz;
    pack_scalar(a->elem_type, value, a->num + a->n * sz);
    a->n++;
    return TW_OK;
}

tw_status tw_gguf_warr_push_str(tw_gguf_warr *a, const char *s, size_t len, tw_err *err)
{
    if (a->elem_type != TW_GGUF_STRING)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "gguf writer: string pushed to a %s array",
                         tw_gguf_vtype_name(a->elem_type));
    size_t cap = a->cap, cap2 = a->cap;
    if (!grow((void **)&a->strs, &cap, a->n + 1, sizeof *a->strs) ||
        !grow((void **)&a->lens, &cap2, a->n + 1, sizeof *a->lens))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf writer: out of memory");
    a->cap = cap < cap2 ? cap : cap2;
    char *d = dupn(s ? s : "", s ? len : 0);
    if (!d)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf writer: out of memory");
    a->strs[a->n] = d;
    a->lens[a->n] = s ? len : 0;
    a->n++;
    return TW_OK;
}

tw_status tw_gguf_warr_push_arr(tw_gguf_warr *a, tw_gguf_warr *inner, tw_err *err)
{
    if (!inner)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf writer: NULL nested array");
    if (a->elem_type != TW_GGUF_ARRAY) {
        tw_gguf_warr_free(inner);
        return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf writer: array pushed to a %s array",
                         tw_gguf_vtype_name(a->elem_type));
    }
    size_t cap = a->cap;
    if (!grow((void **)&a->subs, &cap, a->n + 1, sizeof *a->subs)) {
        tw_gguf_warr_free(inner);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf writer: out of memory");
    }
    a->cap = cap;
    a->subs[a->n++] = inner;
    return TW_OK;
}

/* ---- writer and keys ---------------------------------------------------- */

tw_status tw_gguf_writer_new(tw_gguf_writer **out, tw_err *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf writer: out of memory");
    return TW_OK;
}

static void kv_clear(wkv *kv)
{
    free(kv->str);
    tw_gguf_warr_free(kv->arr);
    kv->str = NULL;
    kv->arr = NULL;
}

void tw_gguf_writer_free(tw_gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        kv_clear(&w->kvs[i]);
        free(w->kvs[i].key);
    }
    for (size_t i = 0; i < w->n_tensors; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].copy);
    }
    free(w->kvs);
    free(w->tensors);
    free(w);
}

/* The slot for key (existing one cleared, or a new one at the end). */
static tw_status kv_slot(tw_gguf_writer *w, const char *key, wkv **out, tw_err *err)
{
    if (!key || !*key || strlen(key) > MAX_KEY_LEN)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf writer: empty or overlong key");
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kvs[i].key, key) == 0) {
            kv_clear(&w->kvs[i]);
            *out = &w->kvs[i];
            return TW_OK;
        }
    }
    if (!grow((void **)&w->kvs, &w->cap_kv, w->n_kv + 1, sizeof *w->kvs))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf writer: out of memory");
    wkv *kv = &w->kvs[w->n_kv];
    memset(kv, 0, sizeof *kv);
    kv->key = dupn(key, strlen(key));
    if (!kv->key)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf writer: out of memory");
    w->n_kv++;
    *out = kv;
    return TW_OK;
}

void tw_gguf_writer_remove(tw_gguf_writer *w, const char *key)
{
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kvs[i].key, key) == 0) {
            kv_clear(&w->kvs[i]);
            free(w->kvs[i].key);
            memmove(&w->kvs[i], &w->kvs[i + 1], (w->n_kv - i - 1) * sizeof *w->kvs);
            w->n_kv--;
            return;
        }
    }
}

static tw_status set_scalar(tw_gguf_writer *w, const char *key, uint32_t type, const void *v,
                            tw_err *err)
{
    wkv *kv;
    tw_status st = kv_slot(w, key, &kv, err);
    if (st)
        return st;
    kv->type = type;
    memset(kv->scalar, 0, sizeof kv->scalar);
    pack_scalar(type, v, kv->scalar);
    return TW_OK;
}

#define SETTER(suffix, ctype, vtype)                                                           \
    tw_status tw_gguf_writer_set_##suffix(tw_gguf_writer *w, const char *key, ctype v,        \
                                          tw_err *err)                                        \
    {                                                                                          \
        return set_scalar(w, key, vtype, &v, err);                                             \
    }

SETTER(u8, uint8_t, TW_GGUF_U8)
SETTER(i8, int8_t, TW_GGUF_I8)
SETTER(u16, uint16_t, TW_GGUF_U16)
SETTER(i16, int16_t, TW_GGUF_I16)
SETTER(u32, uint32_t, TW_GGUF_U32)
SETTER(i32, int32_t, TW_GGUF_I32)
SETTER(u64, uint64_t, TW_GGUF_U64)
SETTER(i64, int64_t, TW_GGUF_I64)
SETTER(f32, float, TW_GGUF_F32)
SETTER(f64, double, TW_GGUF_F64)
SETTER(bool, bool, TW_GGUF_BOOL)

tw_status tw_gguf_writer_set_strn(tw_gguf_writer *w, const char *key, const char *v, size_t len,
                                  tw_err *err)
{
    if (!v)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf writer: NULL string for key '%s'",
                         key ? key : "");
    char *d = dupn(v, len);
    if (!d)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf writer: out of memory");
    wkv *kv;
    tw_status st = kv_slot(w, key, &kv, err);
    if (st) {
        free(d);
        return st;
    }
    kv->type = TW_GGUF_STRING;
    kv->str = d;
    kv->len = len;
    return TW_OK;
}

tw_status tw_gguf_writer_set_str(tw_gguf_writer *w, const char *key, const char *v, tw_err *err)
{
    return tw_gguf_writer_set_strn(w, key, v, v ? strlen(v) : 0, err);
}

tw_status tw_gguf_writer_set_arr(tw_gguf_writer *w, const char *key, tw_gguf_warr *arr,
                                 tw_err *err)
{
    if (!arr)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf writer: NULL array for key '%s'",
                         key ? key : "");
    wkv *kv;
    tw_status st = kv_slot(w, key, &kv, err);
    if (st) {
        tw_gguf_warr_free(arr);
        return st;
    }
    kv->type = TW_GGUF_ARRAY;
    kv->arr = arr;
    return TW_OK;
}

tw_status tw_gguf_writer_set_arr_data(tw_gguf_writer *w, const char *key, tw_gguf_vtype elem_type,
                                      const void *data, size_t n, tw_err *err)
{
    size_t sz = twf_gguf_scalar_size(elem_type);
    if (sz == 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "gguf writer: key '%s': element type %s is not numeric", key,
                         tw_gguf_vtype_name(elem_type));
    if (n && !data)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf writer: key '%s': NULL data", key);
    if (n > SIZE_MAX / sz)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf writer: key '%s': array too large",
                         key);
    tw_gguf_warr *a;
    tw_status st = tw_gguf_warr_new(elem_type, &a, err);
    if (st)
        return st;
    a->num = malloc(n ? n * sz : 1);
    if (!a->num) {
        tw_gguf_warr_free(a);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf writer: out of memory");
    }
    if (elem_type == TW_GGUF_BOOL) {
        for (size_t i = 0; i < n; i++)
            a->num[i] = ((const bool *)data)[i] ? 1 : 0;
    } else if (n) {
        memcpy(a->num, data, n * sz);
    }
    a->n = a->cap = n;
    return tw_gguf_writer_set_arr(w, key, a, err);
}

tw_status tw_gguf_writer_set_arr_strs(tw_gguf_writer *w, const char *key,
                                      const char *const *strs, size_t n, tw_err *err)
{
    tw_gguf_warr *a;
    tw_status st = tw_gguf_warr_new(TW_GGUF_STRING, &a, err);
    for (size_t i = 0; !st && i < n; i++)
        st = tw_gguf_warr_push_str(a, strs[i], strs[i] ? strlen(strs[i]) : 0, err);
    if (st) {
        tw_gguf_warr_free(a);
        return st;
    }
    return tw_gguf_writer_set_arr(w, key, a, err);
}

/* ---- tensors -------------------------------------------------------- */

static tw_status add_tensor(tw_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                            const uint64_t *dims, wtensor **out, tw_err *err)
{
    if (!name || !*name || strlen(name) > MAX_TENSOR_NAME)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "gguf writer: tensor name '%s' is empty or longer than %d bytes",
                         name ? name : "", MAX_TENSOR_NAME);
    if (n_dims == 0 || n_dims > TW_GGUF_MAX_DIMS || !dims)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "gguf writer: tensor '%s' needs 1..%d dimensions", name,
                         TW_GGUF_MAX_DIMS);
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return tw_errorf(err, TW_ALREADY_EXISTS, "gguf writer: duplicate tensor '%s'", name);
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++)
        if (dims[d] == 0 || __builtin_mul_overflow(n, dims[d], &n) || n > (uint64_t)INT64_MAX)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "gguf writer: tensor '%s' has a zero or overflowing dimension",
                             name);
    uint64_t nbytes;
    if (!tw_gguf_type_nbytes(type, dims[0], &nbytes) || !tw_gguf_type_nbytes(type, n, &nbytes))
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "gguf writer: tensor '%s': row length %llu does not fit type %s", name,
                         (unsigned long long)dims[0], tw_gguf_type_name(type));
    if (!grow((void **)&w->tensors, &w->cap_tensors, w->n_tensors + 1, sizeof *w->tensors))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf writer: out of memory");
    wtensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    t->name = dupn(name, strlen(name));
    if (!t->name)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf writer: out of memory");
    t->type = type;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < TW_GGUF_MAX_DIMS; d++)
        t->dims[d] = d < n_dims ? dims[d] : 1;
    t->nbytes = nbytes;
    w->n_tensors++;
    *out = t;
    return TW_OK;
}

tw_status tw_gguf_writer_add_tensor(tw_gguf_writer *w, const char *name, uint32_t type,
                                    uint32_t n_dims, const uint64_t *dims, const void *data,
                                    size_t nbytes, tw_err *err)
{
    wtensor *t = NULL;
    tw_status st = add_tensor(w, name, type, n_dims, dims, &t, err);
    if (st)
        return st;
    if (t->nbytes != nbytes || (nbytes && !data)) {
        st = tw_errorf(err, TW_INVALID_ARGUMENT,
                       "gguf writer: tensor '%s' needs %llu bytes of data, got %zu", name,
                       (unsigned long long)t->nbytes, nbytes);
        free(t->name);
        w->n_tensors--;
        return st;
    }
    t->copy = malloc(nbytes ? nbytes : 1);
    if (!t->copy) {
        free(t->name);
        w->n_tensors--;
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf writer: out of memory");
    }
    if (nbytes)
        memcpy(t->copy, data, nbytes);
    return TW_OK;
}

tw_status tw_gguf_writer_add_tensor_fn(tw_gguf_writer *w, const char *name, uint32_t type,
                                       uint32_t n_dims, const uint64_t *dims,
                                       tw_gguf_fill_fn fill, void *ctx, tw_err *err)
{
    if (!fill)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf writer: tensor '%s' has no fill function",
                         name ? name : "");
    wtensor *t = NULL;
    tw_status st = add_tensor(w, name, type, n_dims, dims, &t, err);
    if (st)
        return st;
    t->fill = fill;
    t->ctx = ctx;
    return TW_OK;
}

/* ---- serialization ------------------------------------------------------ */

typedef struct out {
    FILE *f;
    bool failed;
} out;

static void put(out *o, const void *p, size_t n)
{
    if (!o->failed && n && fwrite(p, 1, n, o->f) != n)
        o->failed = true;
}

static void put_u32(out *o, uint32_t v) { put(o, &v, 4); }
static void put_u64(out *o, uint64_t v) { put(o, &v, 8); }

static void put_str(out *o, const char *s, size_t len)
{
    put_u64(o, len);
    put(o, s, len);
}

static void put_arr(out *o, const tw_gguf_warr *a)
{
    put_u32(o, a->elem_type);
    put_u64(o, a->n);
    if (a->elem_type == TW_GGUF_STRING) {
        for (size_t i = 0; i < a->n; i++)
            put_str(o, a->strs[i], a->lens[i]);
    } else if (a->elem_type == TW_GGUF_ARRAY) {
        for (size_t i = 0; i < a->n; i++)
            put_arr(o, a->subs[i]);
    } else {
        put(o, a->num, a->n * twf_gguf_scalar_size(a->elem_type));
    }
}

static void put_pad(out *o, uint64_t pos, uint32_t align)
{
    static const uint8_t zeros[64];
    uint64_t pad = (align - pos % align) % align;
    while (pad > 0) {
        size_t n = pad > sizeof zeros ? sizeof zeros : (size_t)pad;
        put(o, zeros, n);
        pad -= n;
    }
}

static uint32_t writer_alignment(const tw_gguf_writer *w)
{
    for (size_t i = 0; i < w->n_kv; i++) {
        const wkv *kv = &w->kvs[i];
        if (strcmp(kv->key, "general.alignment") == 0 && kv->type == TW_GGUF_U32) {
            uint32_t a;
            memcpy(&a, kv->scalar, 4);
            if (a && (a & (a - 1)) == 0)
                return a;
        }
    }
    return TW_GGUF_DEFAULT_ALIGNMENT;
}

static tw_status write_all(tw_gguf_writer *w, FILE *f, const char *path, tw_err *err)
{
    out o = {f, false};
    uint32_t align = writer_alignment(w);
    put_u32(&o, 0x46554747u);
    put_u32(&o, GGUF_VERSION);
    put_u64(&o, w->n_tensors);
    put_u64(&o, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        const wkv *kv = &w->kvs[i];
        put_str(&o, kv->key, strlen(kv->key));
        put_u32(&o, kv->type);
        if (kv->type == TW_GGUF_STRING)
            put_str(&o, kv->str, kv->len);
        else if (kv->type == TW_GGUF_ARRAY)
            put_arr(&o, kv->arr);
        else
            put(&o, kv->scalar, twf_gguf_scalar_size(kv->type));
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        wtensor *t = &w->tensors[i];
        t->offset = off;
        put_str(&o, t->name, strlen(t->name));
        put_u32(&o, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            put_u64(&o, t->dims[d]);
        put_u32(&o, t->type);
        put_u64(&o, t->offset);
        off += t->nbytes;
        off += (align - off % align) % align;
    }
    if (o.failed)
        return tw_errorf(err, TW_UNAVAILABLE, "gguf writer: writing '%s' failed: %s", path,
                         strerror(errno));
    long pos = ftell(f);
    if (pos < 0)
        return tw_errorf(err, TW_UNAVAILABLE, "gguf writer: ftell on '%s' failed", path);
    put_pad(&o, (uint64_t)pos, align);
    for (size_t i = 0; i < w->n_tensors && !o.failed; i++) {
        wtensor *t = &w->tensors[i];
        if (t->copy) {
            put(&o, t->copy, t->nbytes);
        } else {
            if (t->nbytes > SIZE_MAX)
                return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf writer: tensor '%s' too large",
                                 t->name);
            void *buf = malloc(t->nbytes ? t->nbytes : 1);
            if (!buf)
                return tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                                 "gguf writer: out of memory for tensor '%s' (%llu bytes)",
                                 t->name, (unsigned long long)t->nbytes);
            tw_status st = t->fill(t->ctx, buf, t->nbytes, err);
            if (st) {
                free(buf);
                return tw_error_wrap(err, st, "gguf writer: tensor '%s'", t->name);
            }
            put(&o, buf, t->nbytes);
            free(buf);
        }
        put_pad(&o, t->nbytes, align);
    }
    if (o.failed || fflush(f) != 0)
        return tw_errorf(err, TW_UNAVAILABLE, "gguf writer: writing '%s' failed: %s", path,
                         strerror(errno));
    if (fsync(fileno(f)) != 0)
        return tw_errorf(err, TW_UNAVAILABLE, "gguf writer: fsync of '%s' failed: %s", path,
                         strerror(errno));
    return TW_OK;
}

static void fsync_parent(const char *path)
{
    char *copy = dupn(path, strlen(path));
    if (!copy)
        return;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(copy);
}

tw_status tw_gguf_writer_write(tw_gguf_writer *w, const char *path, tw_err *err)
{
    if (!path || !*path)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf writer: empty output path");
    size_t n = strlen(path) + 16;
    char *tmp = malloc(n);
    if (!tmp)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf writer: out of memory");
    snprintf(tmp, n, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return tw_errorf(err, e == ENOENT ? TW_NOT_FOUND
                              : e == EACCES ? TW_PERMISSION_DENIED
                                            : TW_UNAVAILABLE,
                         "gguf writer: cannot create a file next to '%s': %s", path, strerror(e));
    }
    fchmod(fd, 0644);
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        unlink(tmp);
        free(tmp);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf writer: fdopen failed");
    }
    tw_status st = write_all(w, f, path, err);
    if (fclose(f) != 0 && !st)
        st = tw_errorf(err, TW_UNAVAILABLE, "gguf writer: closing '%s' failed: %s", path,
                       strerror(errno));
    if (!st && rename(tmp, path) != 0)
        st = tw_errorf(err, TW_UNAVAILABLE, "gguf writer: renaming onto '%s' failed: %s", path,
                       strerror(errno));
    if (st)
        unlink(tmp);
    else
        fsync_parent(path);
    free(tmp);
    return st;
}
