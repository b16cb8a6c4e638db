/* GGUF reader: parses and validates the whole header at open time so that
 * every accessor afterwards is a plain lookup. */
#include "tw/gguf.h"

#include <stdlib.h>
#include <string.h>

#include "format/gguf_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader assumes a little-endian host"
#endif

#define GGUF_MAGIC 0x46554747u /* "GGUF" read as little-endian u32 */
/* Names longer than this are refused: no real key or tensor name comes near,
 * and it keeps messages and copies bounded. */
#define MAX_NAME_LEN 4096

/* ---- cursor over the file bytes ------------------------------------- */

typedef struct cursor {
    const uint8_t *base;
    uint64_t size;
    uint64_t off;
    tw_err *err;
    twf_arena *arena;
} cursor;

static tw_status truncated(cursor *c, const char *what, uint64_t need)
{
    return tw_errorf(c->err, TW_DATA_LOSS,
                     "gguf: truncated file: %s needs %llu bytes at offset %llu, but the file "
                     "is %llu bytes",
                     what, (unsigned long long)need, (unsigned long long)c->off,
                     (unsigned long long)c->size);
}

static uint64_t remaining(const cursor *c) { return c->size - c->off; }

static tw_status rd_bytes(cursor *c, void *dst, uint64_t n, const char *what)
{
    if (n > remaining(c))
        return truncated(c, what, n);
    memcpy(dst, c->base + c->off, n);
    c->off += n;
    return TW_OK;
}

static tw_status rd_u32(cursor *c, uint32_t *v, const char *what)
{
    return rd_bytes(c, v, 4, what);
}

static tw_status rd_u64(cursor *c, uint64_t *v, const char *what)
{
    return rd_bytes(c, v, 8, what);
}

/* Reads a length-prefixed string and copies it, NUL-terminated, into the
 * arena. */
static tw_status rd_str(cursor *c, strref *out, uint64_t max_len, const char *what)
{
    uint64_t len = 0;
    tw_status st = rd_u64(c, &len, what);
    if (st)
        return st;
    if (len > remaining(c))
        return tw_errorf(c->err, TW_DATA_LOSS,
                         "gguf: %s at offset %llu claims %llu bytes but only %llu remain in the "
                         "file",
                         what, (unsigned long long)(c->off - 8), (unsigned long long)len,
                         (unsigned long long)remaining(c));
    if (len > max_len)
        return tw_errorf(c->err, TW_INVALID_ARGUMENT,
                         "gguf: %s at offset %llu is %llu bytes long (limit %llu)", what,
                         (unsigned long long)(c->off - 8), (unsigned long long)len,
                         (unsigned long long)max_len);
    char *s = twf_arena_alloc(c->arena, len + 1);
    if (!s)
        return tw_errorf(c->err, TW_RESOURCE_EXHAUSTED, "gguf: out of memory reading %s", what);
    memcpy(s, c->base + c->off, len);
    s[len] = '\0';
    c->off += len;
    out->s = s;
    out->len = len;
    return TW_OK;
}

/* Key and tensor names must be valid UTF-8 without NUL bytes; values may
 * hold any bytes (vocabularies carry partial UTF-8 sequences). */
static bool valid_name(const strref *s)
{
    const uint8_t *p = (const uint8_t *)s->s;
    uint64_t i = 0;
    if (s->len == 0)
        return false;
    while (i < s->len) {
        uint8_t c = p[i];
        uint32_t n, cp;
        if (c == 0)
            return false;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf)
            n = 1, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef)
            n = 2, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4)
            n = 3, cp = c & 0x07;
        else
            return false;
        if (n > s->len - i - 1)
            return false;
        for (uint32_t k = 1; k <= n; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        if ((n == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (n == 3 && (cp < 0x10000 || cp > 0x10ffff)))
            return false;
        i += n + 1;
    }
    return true;
}

size_t twf_gguf_scalar_size(uint32_t t)
{
    switch (t) {
    case TW_GGUF_U8:
    case TW_GGUF_I8:
    case TW_GGUF_BOOL:
        return 1;
    case TW_GGUF_U16:
    case TW_GGUF_I16:
        return 2;
    case TW_GGUF_U32:
    case TW_GGUF_I32:
    case TW_GGUF_F32:
        return 4;
    case TW_GGUF_U64:
    case TW_GGUF_I64:
    case TW_GGUF_F64:
        return 8;
    default:
        return 0;
    }
}

void twf_gguf_decode_scalar(uint32_t t, const uint8_t *p, tw_gguf_value *v)
{
    switch (t) {
    case TW_GGUF_U8:
    case TW_GGUF_BOOL:
        v->num.u = p[0];
        break;
    case TW_GGUF_I8:
        v->num.i = (int8_t)p[0];
        break;
    case TW_GGUF_U16: {
        uint16_t x;
        memcpy(&x, p, 2);
        v->num.u = x;
        break;
    }
    case TW_GGUF_I16: {
        int16_t x;
        memcpy(&x, p, 2);
        v->num.i = x;
        break;
    }
    case TW_GGUF_U32: {
        uint32_t x;
        memcpy(&x, p, 4);
        v->num.u = x;
        break;
    }
    case TW_GGUF_I32: {
        int32_t x;
        memcpy(&x, p, 4);
        v->num.i = x;
        break;
    }
    case TW_GGUF_F32: {
        float x;
        memcpy(&x, p, 4);
        v->num.f = x;
        break;
    }
    case TW_GGUF_U64:
        memcpy(&v->num.u, p, 8);
        break;
    case TW_GGUF_I64:
        memcpy(&v->num.i, p, 8);
        break;
    case TW_GGUF_F64:
        memcpy(&v->num.f, p, 8);
        break;
    default:
        break;
    }
}

/* Smallest encoding of one array element of type t; used to refuse counts
 * that cannot possibly fit in the rest of the file before allocating. */
static uint64_t min_elem_bytes(uint32_t t)
{
    if (t == TW_GGUF_STRING)
        return 8;
    if (t == TW_GGUF_ARRAY)
        return 12;
    return twf_gguf_scalar_size(t);
}

static tw_status rd_value(cursor *c, uint32_t type, tw_gguf_value *v, int depth,
                          const char *key);

static tw_status rd_array(cursor *c, tw_gguf_value *v, int depth, const char *key)
{
    if (depth >= TW_GGUF_MAX_DEPTH)
        return tw_errorf(c->err, TW_INVALID_ARGUMENT,
                         "gguf: key '%s': arrays nested deeper than %d levels", key,
                         TW_GGUF_MAX_DEPTH);
    uint32_t et = 0;
    uint64_t n = 0;
    tw_status st = rd_u32(c, &et, "array element type");
    if (!st)
        st = rd_u64(c, &n, "array length");
    if (st)
        return st;
    uint64_t min = min_elem_bytes(et);
    if (min == 0)
        return tw_errorf(c->err, TW_INVALID_ARGUMENT,
                         "gguf: key '%s': array has unknown element type %u", key, et);
    if (n > remaining(c) / min)
        return tw_errorf(c->err, TW_DATA_LOSS,
                         "gguf: key '%s': array of %llu %s elements cannot fit in the %llu bytes "
                         "left in the file",
                         key, (unsigned long long)n, tw_gguf_vtype_name(et),
                         (unsigned long long)remaining(c));
    v->elem_type = et;
    v->n = n;
    if (et == TW_GGUF_STRING) {
        v->strs = twf_arena_alloc(c->arena, n ? n * sizeof *v->strs : 1);
        if (!v->strs)
            return tw_errorf(c->err, TW_RESOURCE_EXHAUSTED, "gguf: out of memory");
        for (uint64_t i = 0; i < n; i++) {
            st = rd_str(c, &v->strs[i], UINT64_MAX, "array string");
            if (st)
                return tw_error_wrap(c->err, st, "key '%s' element %llu", key,
                                     (unsigned long long)i);
        }
        return TW_OK;
    }
    if (et == TW_GGUF_ARRAY) {
        v->sub = twf_arena_alloc(c->arena, n ? n * sizeof *v->sub : 1);
        if (!v->sub)
            return tw_errorf(c->err, TW_RESOURCE_EXHAUSTED, "gguf: out of memory");
        memset(v->sub, 0, n * sizeof *v->sub);
        for (uint64_t i = 0; i < n; i++) {
            st = rd_value(c, TW_GGUF_ARRAY, &v->sub[i], depth + 1, key);
            if (st)
                return st;
        }
        return TW_OK;
    }
    /* n * min cannot overflow: n <= remaining / min. */
    v->raw = c->base + c->off;
    c->off += n * min;
    return TW_OK;
}

static tw_status rd_value(cursor *c, uint32_t type, tw_gguf_value *v, int depth, const char *key)
{
    v->type = type;
    if (type == TW_GGUF_STRING) {
        strref s;
        tw_status st = rd_str(c, &s, UINT64_MAX, "string value");
        if (st)
            return tw_error_wrap(c->err, st, "key '%s'", key);
        v->str = s.s;
        v->n = s.len;
        return TW_OK;
    }
    if (type == TW_GGUF_ARRAY)
        return rd_array(c, v, depth, key);
    size_t sz = twf_gguf_scalar_size(type);
    if (sz == 0)
        return tw_errorf(c->err, TW_INVALID_ARGUMENT, "gguf: key '%s' has unknown value type %u",
                         key, type);
    if (sz > remaining(c))
        return truncated(c, "scalar value", sz);
    twf_gguf_decode_scalar(type, c->base + c->off, v);
    c->off += sz;
    return TW_OK;
}

/* ---- open ------------------------------------------------------------- */

static int cmp_tensor_name(const void *a, const void *b, void *ctx)
{
    const tw_gguf_tensor *t = ctx;
    return strcmp(t[*(const int64_t *)a].name, t[*(const int64_t *)b].name);
}

static int cmp_tensor_offset(const void *a, const void *b, void *ctx)
{
    const tw_gguf_tensor *t = ctx;
    uint64_t x = t[*(const int64_t *)a].offset, y = t[*(const int64_t *)b].offset;
    return (x > y) - (x < y);
}

static tw_status parse_header(tw_gguf *g, tw_err *err)
{
    cursor c = {g->map.data, g->map.size, 0, err, &g->arena};
    uint32_t magic, version = 0;
    tw_status st;
    if (c.size < 4)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "gguf: not a GGUF file (%llu bytes, too short for the magic)",
                         (unsigned long long)c.size);
    rd_u32(&c, &magic, "magic");
    if (magic != GGUF_MAGIC)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "gguf: not a GGUF file (bad magic %02x %02x %02x %02x)", c.base[0],
                         c.base[1], c.base[2], c.base[3]);
    if ((st = rd_u32(&c, &version, "version")))
        return st;
    if (version == 1)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "gguf: version 1 files are not supported (only versions 2 and 3)");
    if (version != 2 && version != 3) {
        if ((version & 0xffff) == 0 && (__builtin_bswap32(version) == 2 ||
                                        __builtin_bswap32(version) == 3))
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "gguf: big-endian GGUF files are not supported");
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "gguf: unsupported version %u (only versions 2 and 3)", version);
    }
    g->version = version;

    uint64_t n_tensors = 0, n_kv = 0;
    if ((st = rd_u64(&c, &n_tensors, "tensor count")) || (st = rd_u64(&c, &n_kv, "key count")))
        return st;
    /* A key needs at least 8 (name length) + 4 (type) + 1 (value) bytes, a
     * tensor description at least 8 + 4 + 4 + 8 bytes. */
    if (n_kv > remaining(&c) / 13)
        return tw_errorf(err, TW_DATA_LOSS,
                         "gguf: key count %llu cannot fit in a %llu-byte file",
                         (unsigned long long)n_kv, (unsigned long long)c.size);
    if (n_tensors > remaining(&c) / 24)
        return tw_errorf(err, TW_DATA_LOSS,
                         "gguf: tensor count %llu cannot fit in a %llu-byte file",
                         (unsigned long long)n_tensors, (unsigned long long)c.size);

    g->kvs = calloc(n_kv ? n_kv : 1, sizeof *g->kvs);
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    g->by_name = calloc(n_tensors ? n_tensors : 1, sizeof *g->by_name);
    if (!g->kvs || !g->tensors || !g->by_name)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf: out of memory");

    for (uint64_t i = 0; i < n_kv; i++) {
        strref name;
        uint32_t type = 0;
        if ((st = rd_str(&c, &name, MAX_NAME_LEN, "key name")))
            return tw_error_wrap(err, st, "key %llu", (unsigned long long)i);
        if (!valid_name(&name))
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "gguf: key %llu has an empty name or one that is not UTF-8 text",
                             (unsigned long long)i);
        for (uint64_t j = 0; j < i; j++)
            if (strcmp(g->kvs[j].name, name.s) == 0)
                return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf: duplicate key '%s'", name.s);
        if ((st = rd_u32(&c, &type, "value type")))
            return tw_error_wrap(err, st, "key '%s'", name.s);
        g->kvs[i].name = name.s;
        if ((st = rd_value(&c, type, &g->kvs[i].v, 0, name.s)))
            return st;
        g->n_kv = (int64_t)i + 1;
    }

    g->alignment = TW_GGUF_DEFAULT_ALIGNMENT;
    const tw_gguf_value *al = tw_gguf_get(g, "general.alignment");
    if (al) {
        if (al->type != TW_GGUF_U32 || al->num.u == 0 || (al->num.u & (al->num.u - 1)) != 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "gguf: general.alignment must be a u32 power of two");
        g->alignment = (uint32_t)al->num.u;
    }

    for (uint64_t i = 0; i < n_tensors; i++) {
        tw_gguf_tensor *t = &g->tensors[i];
        strref name;
        if ((st = rd_str(&c, &name, MAX_NAME_LEN, "tensor name")))
            return tw_error_wrap(err, st, "tensor %llu", (unsigned long long)i);
        if (!valid_name(&name))
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "gguf: tensor %llu has an empty name or one that is not UTF-8 text",
                             (unsigned long long)i);
        t->name = name.s;
        if ((st = rd_u32(&c, &t->n_dims, "tensor dimension count")))
            return tw_error_wrap(err, st, "tensor '%s'", t->name);
        if (t->n_dims > TW_GGUF_MAX_DIMS)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf: tensor '%s' has %u dimensions (max %d)",
                             t->name, t->n_dims, TW_GGUF_MAX_DIMS);
        uint64_t n_elems = 1;
        for (uint32_t d = 0; d < TW_GGUF_MAX_DIMS; d++) {
            t->dims[d] = 1;
            if (d >= t->n_dims)
                continue;
            if ((st = rd_u64(&c, &t->dims[d], "tensor dimension")))
                return tw_error_wrap(err, st, "tensor '%s'", t->name);
            if (t->dims[d] > (uint64_t)INT64_MAX ||
                __builtin_mul_overflow(n_elems, t->dims[d], &n_elems) ||
                n_elems > (uint64_t)INT64_MAX)
                return tw_errorf(err, TW_INVALID_ARGUMENT,
                                 "gguf: tensor '%s' dimensions overflow the element count",
                                 t->name);
        }
        t->n_elems = n_elems;
        if ((st = rd_u32(&c, &t->type, "tensor type")) ||
            (st = rd_u64(&c, &t->offset, "tensor offset")))
            return tw_error_wrap(err, st, "tensor '%s'", t->name);
        if (strcmp(tw_gguf_type_name(t->type), "?") == 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf: tensor '%s' has unknown type %u",
                             t->name, t->type);
        if (!tw_gguf_type_nbytes(t->type, t->dims[0], &t->nbytes) ||
            !tw_gguf_type_nbytes(t->type, n_elems, &t->nbytes))
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "gguf: tensor '%s': row length %llu is not a whole number of %s "
                             "blocks, or its size overflows",
                             t->name, (unsigned long long)t->dims[0], tw_gguf_type_name(t->type));
        if (t->offset % g->alignment != 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "gguf: tensor '%s' offset %llu is not a multiple of the alignment %u",
                             t->name, (unsigned long long)t->offset, g->alignment);
        g->by_name[i] = (int64_t)i;
        g->n_tensors = (int64_t)i + 1;
    }

    uint64_t data_off = c.off;
    uint64_t pad = (g->alignment - data_off % g->alignment) % g->alignment;
    data_off += pad;
    if (n_tensors > 0 && data_off > c.size)
        return tw_errorf(err, TW_DATA_LOSS,
                         "gguf: tensor data section starts at %llu, past the end of the file "
                         "(%llu bytes)",
                         (unsigned long long)data_off, (unsigned long long)c.size);
    g->data_off = data_off < c.size ? data_off : c.size;

    /* Every tensor inside the file, no two overlapping, names unique. */
    for (int64_t i = 0; i < g->n_tensors; i++) {
        tw_gguf_tensor *t = &g->tensors[i];
        uint64_t abs, end;
        if (__builtin_add_overflow(t->offset, g->data_off, &abs) ||
            __builtin_add_overflow(abs, t->nbytes, &end) || end > c.size)
            return tw_errorf(err, TW_DATA_LOSS,
                             "gguf: tensor '%s' data [offset %llu, %llu bytes] runs past end of "
                             "file (%llu bytes)",
                             t->name, (unsigned long long)t->offset + g->data_off,
                             (unsigned long long)t->nbytes, (unsigned long long)c.size);
        t->offset = abs;
        t->data = tw_type_supported(t->type) ? g->map.data + abs : NULL;
    }
    if (g->n_tensors > 1) {
        int64_t *order = malloc((size_t)g->n_tensors * sizeof *order);
        if (!order)
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf: out of memory");
        for (int64_t i = 0; i < g->n_tensors; i++)
            order[i] = i;
        qsort_r(order, (size_t)g->n_tensors, sizeof *order, cmp_tensor_offset, g->tensors);
        for (int64_t i = 0; i + 1 < g->n_tensors; i++) {
            const tw_gguf_tensor *a = &g->tensors[order[i]], *b = &g->tensors[order[i + 1]];
            if (a->nbytes > 0 && b->nbytes > 0 && a->offset + a->nbytes > b->offset) {
                st = tw_errorf(err, TW_DATA_LOSS,
                               "gguf: tensors '%s' [offset %llu, %llu bytes] and '%s' [offset "
                               "%llu] overlap",
                               a->name, (unsigned long long)a->offset,
                               (unsigned long long)a->nbytes, b->name,
                               (unsigned long long)b->offset);
                free(order);
                return st;
            }
        }
        free(order);
        qsort_r(g->by_name, (size_t)g->n_tensors, sizeof *g->by_name, cmp_tensor_name,
                g->tensors);
        for (int64_t i = 0; i + 1 < g->n_tensors; i++)
            if (strcmp(g->tensors[g->by_name[i]].name, g->tensors[g->by_name[i + 1]].name) == 0)
                return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf: duplicate tensor name '%s'",
                                 g->tensors[g->by_name[i]].name);
    }
    return TW_OK;
}

static tw_status open_mapped(tw_gguf *g, tw_gguf **out, tw_err *err)
{
    twf_arena_init(&g->arena);
    tw_status st = parse_header(g, err);
    if (st) {
        tw_gguf_close(g);
        return st;
    }
    *out = g;
    return TW_OK;
}

tw_status tw_gguf_open(const char *path, tw_gguf **out, tw_err *err)
{
    return tw_gguf_open_ex(path, 0, out, err);
}

tw_status tw_gguf_open_ex(const char *path, unsigned flags, tw_gguf **out, tw_err *err)
{
    if (!out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf: NULL output");
    *out = NULL;
    if (flags & ~(unsigned)TW_GGUF_HUGE_PAGES)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf: unknown open flags 0x%x", flags);
    tw_gguf *g = calloc(1, sizeof *g);
    if (!g)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf: out of memory");
    tw_status st = flags & TW_GGUF_HUGE_PAGES ? twf_map_file_huge(path, "gguf", &g->map, err)
                                              : twf_map_file(path, "gguf", &g->map, err);
    if (st) {
        free(g);
        return st;
    }
    st = open_mapped(g, out, err);
    if (st)
        return tw_error_wrap(err, st, "%s", path);
    return TW_OK;
}

tw_status tw_gguf_open_memory(const void *buf, size_t len, tw_gguf **out, tw_err *err)
{
    if (!out || (!buf && len))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf: NULL buffer or output");
    *out = NULL;
    tw_gguf *g = calloc(1, sizeof *g);
    if (!g)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf: out of memory");
    twf_map_borrow(buf, len, &g->map);
    return open_mapped(g, out, err);
}

void tw_gguf_close(tw_gguf *g)
{
    if (!g)
        return;
    free(g->kvs);
    free(g->tensors);
    free(g->by_name);
    twf_arena_free(&g->arena);
    twf_map_release(&g->map);
    free(g);
}

uint32_t tw_gguf_version(const tw_gguf *g) { return g->version; }
uint32_t tw_gguf_alignment(const tw_gguf *g) { return g->alignment; }
uint64_t tw_gguf_data_offset(const tw_gguf *g) { return g->data_off; }
uint64_t tw_gguf_file_size(const tw_gguf *g) { return g->map.size; }
