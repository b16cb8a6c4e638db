/* A sequence's state as bytes, and row-level access to it for the prefix
 * cache (tw/seq_state.h).
 *
 * Blob layout, little-endian:
 *   header (HDR_BYTES): magic "TWSQ", version, format, attention layers,
 *     kv heads, head_dim, DeltaNet layers, floats per DeltaNet layer,
 *     token count, body bytes
 *   K/V: per attention layer, K then V, per kv head, rows [0, n) of
 *     head_dim values: f32, IEEE half, or Q8 groups of (f32 scale, 32 int8)
 *   recurrent: every DeltaNet layer's state + conv window, f32
 * The geometry in the header is compared with the importing model's, so a
 * blob never lands in a sequence it does not describe. */
#include <math.h>
#include <string.h>

#include "tw/kernels.h"
#include "tw/seq_state.h"

#include "model/model_internal.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "state blobs are written in host order, which must be little-endian");

#define STATE_MAGIC "TWSQ"
#define STATE_VERSION 1u
#define HDR_BYTES 64u
#define Q8_GROUP 32u
#define Q8_GROUP_BYTES (sizeof(float) + Q8_GROUP)

typedef struct geometry {
    uint32_t n_attn, n_kv, head_dim, n_dn;
    uint64_t dn_floats; /* per DeltaNet layer */
} geometry;

static geometry geometry_of(const tw_model *m)
{
    return (geometry){
        .n_attn = m->n_attn_layers,
        .n_kv = m->n_attn_layers ? m->cfg.n_kv_heads : 0,
        .head_dim = m->n_attn_layers ? m->cfg.head_dim : 0,
        .n_dn = m->n_dn_layers,
        .dn_floats = m->n_dn_layers ? tw_dn_layer_floats(m) : 0,
    };
}

static bool mul_ok(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }
static bool add_ok(size_t a, size_t b, size_t *out) { return !__builtin_add_overflow(a, b, out); }

/* Bytes of one (layer, K|V, head) run of n rows. */
static bool run_bytes(const geometry *g, size_t n, tw_seq_state_format fmt, size_t *out)
{
    size_t vals;
    if (!mul_ok(n, g->head_dim, &vals))
        return false;
    if (fmt == TW_SEQ_STATE_F32)
        return mul_ok(vals, sizeof(float), out);
    if (fmt == TW_SEQ_STATE_F16)
        return mul_ok(vals, sizeof(uint16_t), out);
    return mul_ok((vals + Q8_GROUP - 1) / Q8_GROUP, Q8_GROUP_BYTES, out);
}

static bool body_bytes(const geometry *g, size_t n, tw_seq_state_format fmt, size_t *out)
{
    size_t run, runs, kv, rec;
    if (!run_bytes(g, n, fmt, &run) || !mul_ok((size_t)g->n_attn * 2, g->n_kv, &runs) ||
        !mul_ok(runs, run, &kv) || !mul_ok(g->n_dn, g->dn_floats, &rec) ||
        !mul_ok(rec, sizeof(float), &rec))
        return false;
    return add_ok(kv, rec, out);
}

tw_status tw_seq_state_size(const tw_model *model, size_t n, tw_seq_state_format fmt,
                            size_t *bytes, tw_err *err)
{
    if (!model || !bytes)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "state size: NULL argument");
    if (fmt != TW_SEQ_STATE_F32 && fmt != TW_SEQ_STATE_Q8 && fmt != TW_SEQ_STATE_F16)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "state size: unknown format %d", (int)fmt);
    geometry g = geometry_of(model);
    size_t body;
    if (!body_bytes(&g, n, fmt, &body) || !add_ok(body, HDR_BYTES, bytes))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "state size: %zu tokens overflow", n);
    return TW_OK;
}

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Where one K/V run of a sequence is: its (layer, K|V, head) values,
 * whatever type the sequence stores them in, move through f32 a piece at a
 * time. */
typedef struct kv_run {
    uint32_t layer, head;
    int which;
} kv_run;

#define COPY_CHUNK 1024u

/* f32 or IEEE half (h16) values, a chunk at a time through f32. */
static void run_export_plain(const tw_seq *seq, const kv_run *r, size_t n, bool h16, uint8_t *out)
{
    float x[COPY_CHUNK];
    const size_t vb = h16 ? sizeof(uint16_t) : sizeof(float);
    for (size_t i = 0; i < n; i += COPY_CHUNK) {
        size_t len = n - i < COPY_CHUNK ? n - i : COPY_CHUNK;
        tw_seq_kv_load(seq, r->layer, r->which, r->head, i, len, x);
        if (h16) {
            uint16_t h[COPY_CHUNK];
            tw_quant_row(TW_TYPE_F16, x, h, len);
            memcpy(out + i * vb, h, len * vb);
        } else {
            memcpy(out + i * vb, x, len * vb);
        }
    }
}

static void run_import_plain(tw_seq *seq, const kv_run *r, size_t n, bool h16, const uint8_t *in)
{
    float x[COPY_CHUNK];
    const size_t vb = h16 ? sizeof(uint16_t) : sizeof(float);
    for (size_t i = 0; i < n; i += COPY_CHUNK) {
        size_t len = n - i < COPY_CHUNK ? n - i : COPY_CHUNK;
        if (h16) {
            uint16_t h[COPY_CHUNK];
            memcpy(h, in + i * vb, len * vb);
            tw_dequant_row(TW_TYPE_F16, h, x, len);
        } else {
            memcpy(x, in + i * vb, len * vb);
        }
        tw_seq_kv_store(seq, r->layer, r->which, r->head, i, len, x);
    }
}

static void run_export_q8(const tw_seq *seq, const kv_run *r, size_t n, uint8_t *out)
{
    float x[Q8_GROUP];
    for (size_t i = 0; i < n; i += Q8_GROUP) {
        size_t len = n - i < Q8_GROUP ? n - i : Q8_GROUP;
        tw_seq_kv_load(seq, r->layer, r->which, r->head, i, len, x);
        float amax = 0.0f;
        for (size_t j = 0; j < len; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        float scale = amax / 127.0f;
        float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
        memcpy(out, &scale, sizeof scale);
        int8_t *q = (int8_t *)(out + sizeof scale);
        for (size_t j = 0; j < Q8_GROUP; j++)
            q[j] = j < len ? (int8_t)lrintf(x[j] * inv) : 0;
        out += Q8_GROUP_BYTES;
    }
}

static void run_import_q8(tw_seq *seq, const kv_run *r, size_t n, const uint8_t *in)
{
    float x[Q8_GROUP];
    for (size_t i = 0; i < n; i += Q8_GROUP) {
        size_t len = n - i < Q8_GROUP ? n - i : Q8_GROUP;
        float scale;
        memcpy(&scale, in, sizeof scale);
        const int8_t *q = (const int8_t *)(in + sizeof scale);
        for (size_t j = 0; j < len; j++)
            x[j] = scale * (float)q[j];
        tw_seq_kv_store(seq, r->layer, r->which, r->head, i, len, x);
        in += Q8_GROUP_BYTES;
    }
}

tw_status tw_seq_state_export(const tw_seq *seq, size_t n, tw_seq_state_format fmt, void *buf,
                              size_t cap, size_t *written, tw_err *err)
{
    if (written)
        *written = 0;
    if (!seq || (!buf && cap))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "state export: NULL argument");
    if (n > seq->len)
        return tw_errorf(err, TW_OUT_OF_RANGE, "state export: %zu tokens but the sequence holds %zu",
                         n, seq->len);
    const tw_model *m = seq->model;
    if (m->n_dn_layers && n != seq->len)
        return tw_errorf(err, TW_FAILED_PRECONDITION,
                         "state export: a recurrent state exists only at the length %zu, not %zu",
                         seq->len, n);
    size_t need;
    tw_status st = tw_seq_state_size(m, n, fmt, &need, err);
    if (st != TW_OK)
        return st;
    if (cap < need)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "state export: needs %zu bytes, have %zu",
                         need, cap);
    geometry g = geometry_of(m);
    uint8_t *p = buf;
    memset(p, 0, HDR_BYTES);
    memcpy(p, STATE_MAGIC, 4);
    put_u32(p + 4, STATE_VERSION);
    put_u32(p + 8, (uint32_t)fmt);
    put_u32(p + 12, g.n_attn);
    put_u32(p + 16, g.n_kv);
    put_u32(p + 20, g.head_dim);
    put_u32(p + 24, g.n_dn);
    put_u64(p + 32, g.dn_floats);
    put_u64(p + 40, n);
    put_u64(p + 48, need - HDR_BYTES);
    p += HDR_BYTES;

    size_t run = 0;
    run_bytes(&g, n, fmt, &run);
    for (uint32_t l = 0; l < g.n_attn; l++)
        for (int which = 0; which < 2; which++)
            for (uint32_t h = 0; h < g.n_kv; h++) {
                const kv_run r = {l, h, which};
                if (fmt == TW_SEQ_STATE_Q8)
                    run_export_q8(seq, &r, n * g.head_dim, p);
                else
                    run_export_plain(seq, &r, n * g.head_dim, fmt == TW_SEQ_STATE_F16, p);
                p += run;
            }
    size_t rec = (size_t)g.n_dn * g.dn_floats * sizeof(float);
    if (rec)
        memcpy(p, seq->state, rec);
    if (written)
        *written = need;
    return TW_OK;
}

/* Reads and checks a blob's header against `g` (NULL: only the magic, the
 * version and the token count). */
static tw_status parse_header(const void *blob, size_t len, const geometry *g, size_t *n_tokens,
                              tw_seq_state_format *fmt, tw_err *err)
{
    if (!blob || len < HDR_BYTES)
        return tw_errorf(err, TW_DATA_LOSS, "state: %zu bytes is shorter than the header", len);
    const uint8_t *p = blob;
    if (memcmp(p, STATE_MAGIC, 4) != 0)
        return tw_errorf(err, TW_DATA_LOSS, "state: bad magic");
    if (get_u32(p + 4) != STATE_VERSION)
        return tw_errorf(err, TW_DATA_LOSS, "state: format version %u, expected %u",
                         get_u32(p + 4), STATE_VERSION);
    uint64_t n = get_u64(p + 40);
    if (n > SIZE_MAX)
        return tw_errorf(err, TW_DATA_LOSS, "state: token count out of range");
    *n_tokens = (size_t)n;
    if (!g)
        return TW_OK;
    uint32_t f = get_u32(p + 8);
    if (f != TW_SEQ_STATE_F32 && f != TW_SEQ_STATE_Q8 && f != TW_SEQ_STATE_F16)
        return tw_errorf(err, TW_DATA_LOSS, "state: unknown K/V format %u", f);
    *fmt = (tw_seq_state_format)f;
    if (get_u32(p + 12) != g->n_attn || get_u32(p + 16) != g->n_kv ||
        get_u32(p + 20) != g->head_dim || get_u32(p + 24) != g->n_dn ||
        get_u64(p + 32) != g->dn_floats)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "state: saved for another model shape (%u attention layers x %u kv "
                         "heads x %u, %u DeltaNet layers)",
                         get_u32(p + 12), get_u32(p + 16), get_u32(p + 20), get_u32(p + 24));
    size_t body;
    if (!body_bytes(g, (size_t)n, *fmt, &body) || get_u64(p + 48) != body ||
        len - HDR_BYTES != body)
        return tw_errorf(err, TW_DATA_LOSS, "state: %zu body bytes do not match %zu tokens",
                         len - HDR_BYTES, (size_t)n);
    return TW_OK;
}

tw_status tw_seq_state_peek(const void *blob, size_t len, size_t *n_tokens, tw_err *err)
{
    size_t n = 0;
    tw_status st = parse_header(blob, len, NULL, &n, NULL, err);
    if (st == TW_OK && n_tokens)
        *n_tokens = n;
    return st;
}

tw_status tw_seq_state_import(tw_seq *seq, const void *blob, size_t len, size_t *n_tokens,
                              tw_err *err)
{
    if (n_tokens)
        *n_tokens = 0;
    if (!seq)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "state import: seq is NULL");
    geometry g = geometry_of(seq->model);
    size_t n = 0;
    tw_seq_state_format fmt = TW_SEQ_STATE_F32;
    tw_status st = parse_header(blob, len, &g, &n, &fmt, err);
    if (st != TW_OK)
        return st;
    if (n > seq->cap)
        return tw_errorf(err, TW_OUT_OF_RANGE, "state import: %zu tokens exceed the capacity %zu",
                         n, seq->cap);
    const uint8_t *p = (const uint8_t *)blob + HDR_BYTES;
    size_t run = 0;
    run_bytes(&g, n, fmt, &run);
    /* every row below n is written here: none need the file's pages */
    tw_seq_kv_unshare(seq);
    tw_seq_kv_prepare(seq, n);
    for (uint32_t l = 0; l < g.n_attn; l++)
        for (int which = 0; which < 2; which++)
            for (uint32_t h = 0; h < g.n_kv; h++) {
                const kv_run r = {l, h, which};
                if (fmt == TW_SEQ_STATE_Q8)
                    run_import_q8(seq, &r, n * g.head_dim, p);
                else
                    run_import_plain(seq, &r, n * g.head_dim, fmt == TW_SEQ_STATE_F16, p);
                p += run;
            }
    size_t rec = (size_t)g.n_dn * g.dn_floats * sizeof(float);
    if (rec)
        memcpy(seq->state, p, rec);
    for (size_t i = 0; i < n; i++)
        seq->stamp[i] = ++seq->clock;
    seq->len = n;
    if (n_tokens)
        *n_tokens = n;
    return TW_OK;
}

/* ---- row-level access ---------------------------------------------------- */

size_t tw_seq_kv_floats_per_token(const tw_model *model)
{
    if (!model || !model->n_attn_layers)
        return 0;
    return (size_t)model->n_attn_layers * 2 * model->cfg.n_kv_heads * model->cfg.head_dim;
}

size_t tw_seq_kv_bytes_per_token(const tw_model *model)
{
    return model ? tw_seq_kv_floats_per_token(model) * tw_kv_elem(model) : 0;
}

size_t tw_seq_recurrent_floats(const tw_model *model)
{
    if (!model)
        return 0;
    return (size_t)model->n_dn_layers * tw_dn_layer_floats(model);
}

tw_status tw_seq_kv_read(const tw_seq *seq, size_t pos, size_t n, void *dst, tw_err *err)
{
    if (!seq || (!dst && n))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "kv read: NULL argument");
    if (pos > seq->len || n > seq->len - pos)
        return tw_errorf(err, TW_OUT_OF_RANGE, "kv read: [%zu, +%zu) beyond the length %zu", pos,
                         n, seq->len);
    const tw_model *m = seq->model;
    size_t row = (size_t)m->cfg.head_dim * tw_kv_elem(m);
    unsigned char *out = dst;
    for (uint32_t l = 0; l < m->n_attn_layers; l++)
        for (int which = 0; which < 2; which++)
            for (uint32_t h = 0; h < m->cfg.n_kv_heads; h++) {
                memcpy(out, tw_seq_kv(seq, l, which, h) + pos * row, n * row);
                out += n * row;
            }
    return TW_OK;
}

tw_status tw_seq_kv_write(tw_seq *seq, size_t pos, size_t n, const void *src, tw_err *err)
{
    if (!seq || (!src && n))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "kv write: NULL argument");
    if (pos > seq->cap || n > seq->cap - pos)
        return tw_errorf(err, TW_OUT_OF_RANGE, "kv write: [%zu, +%zu) beyond the capacity %zu",
                         pos, n, seq->cap);
    const tw_model *m = seq->model;
    size_t row = (size_t)m->cfg.head_dim * tw_kv_elem(m);
    const unsigned char *in = src;
    tw_seq_kv_prepare(seq, pos + n);
    for (uint32_t l = 0; l < m->n_attn_layers; l++)
        for (int which = 0; which < 2; which++)
            for (uint32_t h = 0; h < m->cfg.n_kv_heads; h++) {
                memcpy(tw_seq_kv(seq, l, which, h) + pos * row, in, n * row);
                in += n * row;
            }
    /* Snapshots taken before this rely on the old rows; the stamps tell
     * tw_seq_restore() they are gone. */
    for (size_t i = 0; i < n; i++)
        seq->stamp[pos + i] = ++seq->clock;
    return TW_OK;
}

tw_status tw_seq_recurrent_read(const tw_seq *seq, float *dst, tw_err *err)
{
    if (!seq)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "recurrent read: seq is NULL");
    size_t f = tw_seq_recurrent_floats(seq->model);
    if (f && !dst)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "recurrent read: dst is NULL");
    if (f)
        memcpy(dst, seq->state, f * sizeof(float));
    return TW_OK;
}

tw_status tw_seq_set_len(tw_seq *seq, size_t n, const float *recurrent, tw_err *err)
{
    if (!seq)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "set len: seq is NULL");
    if (n > seq->cap)
        return tw_errorf(err, TW_OUT_OF_RANGE, "set len: %zu beyond the capacity %zu", n,
                         seq->cap);
    size_t f = tw_seq_recurrent_floats(seq->model);
    if (f) {
        if (!recurrent)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "set len: a recurrent model needs the state at %zu tokens", n);
        memcpy(seq->state, recurrent, f * sizeof(float));
    }
    seq->len = n;
    return TW_OK;
}
