/* Weight sources: HF checkpoint directories and GGUF files behind one
 * lookup-by-HF-name interface. */
#include "model/wsource.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tw/gguf.h"
#include "tw/gguf_arch.h"
#include "tw/safetensors.h"

struct tw_wsource {
    json_t *config;
    tw_st_set *st;         /* HF checkpoint, or */
    tw_gguf *gguf;         /* a GGUF file with ... */
    tw_arch_params params; /* ... its HF <-> GGUF name mapping */
};

static tw_status st_type(tw_st_dtype d, tw_type *out)
{
    switch (d) {
    case TW_ST_F32: *out = TW_TYPE_F32; return TW_OK;
    case TW_ST_F16: *out = TW_TYPE_F16; return TW_OK;
    case TW_ST_BF16: *out = TW_TYPE_BF16; return TW_OK;
    default: return TW_UNIMPLEMENTED;
    }
}

static tw_status from_st(const tw_st_tensor *t, tw_wtensor *out, tw_err *err)
{
    memset(out, 0, sizeof *out);
    if (st_type(t->dtype, &out->type) != TW_OK)
        return tw_errorf(err, TW_UNIMPLEMENTED, "tensor %s: dtype %s is not supported", t->name,
                         tw_st_dtype_name(t->dtype));
    if (t->n_dims > TW_WT_MAX_DIMS)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tensor %s: %u dimensions", t->name,
                         t->n_dims);
    out->name = t->name;
    out->data = t->data;
    out->n_dims = t->n_dims;
    for (uint32_t i = 0; i < TW_WT_MAX_DIMS; i++)
        out->shape[i] = i < t->n_dims ? t->shape[i] : 1;
    out->n_elems = t->n_elems;
    out->nbytes = t->nbytes;
    out->transform = TW_WT_AS_IS;
    return TW_OK;
}

static tw_status open_hf_dir(const char *dir, tw_wsource *s, tw_err *err)
{
    tw_status st = tw_hf_config_load(dir, &s->config, err);
    if (st)
        return st;
    st = tw_st_set_open_dir(dir, &s->st, err);
    if (st)
        return tw_error_wrap(err, st, "%s", dir);
    return TW_OK;
}

/* GGUF dims are fastest-first; HF shapes slowest-first. */
static tw_status from_gguf(const tw_gguf_tensor *t, uint32_t xform, tw_wtensor *out, tw_err *err)
{
    memset(out, 0, sizeof *out);
    if (!tw_type_supported(t->type) || !t->data)
        return tw_errorf(err, TW_UNIMPLEMENTED, "tensor %s: type %s is not supported", t->name,
                         tw_gguf_type_name(t->type));
    if (t->n_dims > TW_WT_MAX_DIMS)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tensor %s: %u dimensions", t->name,
                         t->n_dims);
    out->name = t->name;
    out->data = t->data;
    out->type = (tw_type)t->type;
    out->n_dims = t->n_dims;
    for (uint32_t i = 0; i < TW_WT_MAX_DIMS; i++)
        out->shape[i] = i < t->n_dims ? t->dims[t->n_dims - 1 - i] : 1;
    out->n_elems = t->n_elems;
    out->nbytes = t->nbytes;
    if (xform & TW_XF_PLUS_ONE)
        out->transform = TW_WT_PLUS_ONE;
    else if (xform & TW_XF_NEG_EXP)
        out->transform = TW_WT_NEG_EXP;
    return TW_OK;
}

static tw_status open_gguf(const char *path, bool huge_pages, tw_wsource *s, tw_err *err)
{
    tw_status st = tw_gguf_open_ex(path, huge_pages ? TW_GGUF_HUGE_PAGES : 0, &s->gguf, err);
    if (!st)
        st = tw_gguf_to_hf_config(s->gguf, &s->config, err);
    if (!st)
        st = tw_arch_params_from_hf(s->config, &s->params, err);
    return st;
}

/* HF "...mlp.experts.gate_proj" / "up_proj" name the halves of the fused
 * gate_up_proj, which GGUF files keep as two tensors. */
static tw_status gguf_find(const tw_wsource *s, const char *hf_name, tw_wtensor *out, tw_err *err)
{
    char fused[256];
    uint32_t want_half = 0;
    const char *tail = strstr(hf_name, "mlp.experts.");
    if (tail && (strcmp(tail, "mlp.experts.gate_proj") == 0 ||
                 strcmp(tail, "mlp.experts.up_proj") == 0)) {
        want_half = strcmp(tail, "mlp.experts.gate_proj") == 0 ? TW_XF_GATE_HALF : TW_XF_UP_HALF;
        snprintf(fused, sizeof fused, "%.*smlp.experts.gate_up_proj", (int)(tail - hf_name),
                 hf_name);
        hf_name = fused;
    }
    tw_gguf_name_map map[2];
    size_t n = 0;
    if (tw_gguf_name_from_hf(&s->params, hf_name, map, &n, NULL) != TW_OK || n == 0)
        return TW_NOT_FOUND;
    const tw_gguf_name_map *pick = NULL;
    for (size_t i = 0; i < n; i++) {
        if (want_half ? (map[i].xform & want_half) != 0 : n == 1)
            pick = &map[i];
    }
    if (!pick)
        return TW_NOT_FOUND;
    const tw_gguf_tensor *t = tw_gguf_find_tensor(s->gguf, pick->gguf_name);
    if (!t)
        return TW_NOT_FOUND;
    return from_gguf(t, pick->xform, out, err);
}

tw_status tw_wsource_open(const char *path, bool huge_pages, tw_wsource **out, tw_err *err)
{
    *out = NULL;
    struct stat sb;
    if (!path || stat(path, &sb) != 0)
        return tw_errorf(err, TW_NOT_FOUND, "model not found: %s", path ? path : "(null)");
    tw_wsource *s = calloc(1, sizeof *s);
    if (!s)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    tw_status st;
    if (S_ISDIR(sb.st_mode))
        st = open_hf_dir(path, s, err);
    else
        st = open_gguf(path, huge_pages, s, err);
    if (st) {
        tw_wsource_close(s);
        return st;
    }
    *out = s;
    return TW_OK;
}

void tw_wsource_close(tw_wsource *s)
{
    if (!s)
        return;
    json_decref(s->config);
    tw_st_set_close(s->st);
    tw_gguf_close(s->gguf);
    free(s);
}

const json_t *tw_wsource_config(const tw_wsource *s) { return s->config; }

bool tw_wsource_is_gguf(const tw_wsource *s) { return s->gguf != NULL; }

tw_status tw_wsource_file_view(const tw_wsource *s, const void *p, size_t len, tw_file_view *out,
                               tw_err *err)
{
    if (!s->gguf) {
        if (out)
            memset(out, 0, sizeof *out);
        return tw_errorf(err, TW_FAILED_PRECONDITION, "weights: not a GGUF copy");
    }
    return tw_gguf_file_view(s->gguf, p, len, out, err);
}

tw_status tw_wsource_find(const tw_wsource *s, const char *hf_name, tw_wtensor *out, tw_err *err)
{
    if (s->gguf)
        return gguf_find(s, hf_name, out, err);
    const tw_st_tensor *t = tw_st_set_find(s->st, hf_name);
    if (!t)
        return TW_NOT_FOUND;
    return from_st(t, out, err);
}

tw_status tw_wsource_find_raw(const tw_wsource *s, const char *file_name, tw_wtensor *out,
                              tw_err *err)
{
    if (s->gguf) {
        const tw_gguf_tensor *t = tw_gguf_find_tensor(s->gguf, file_name);
        return t ? from_gguf(t, 0, out, err) : TW_NOT_FOUND;
    }
    const tw_st_tensor *t = tw_st_set_find(s->st, file_name);
    return t ? from_st(t, out, err) : TW_NOT_FOUND;
}

size_t tw_wsource_count(const tw_wsource *s)
{
    return s->gguf ? (size_t)tw_gguf_tensor_count(s->gguf) : tw_st_set_count(s->st);
}

bool tw_wsource_at(const tw_wsource *s, size_t i, tw_wtensor *out)
{
    if (s->gguf) {
        const tw_gguf_tensor *g = tw_gguf_tensor_at(s->gguf, (int64_t)i);
        if (!g)
            return false;
        if (from_gguf(g, 0, out, NULL) != TW_OK) {
            memset(out, 0, sizeof *out);
            out->name = g->name;
            out->type = TW_TYPE_F32;
            out->n_elems = g->n_elems;
            out->nbytes = g->nbytes;
        }
        return true;
    }
    const tw_st_tensor *t = tw_st_set_tensor_at(s->st, i);
    if (!t)
        return false;
    if (from_st(t, out, NULL) != TW_OK) {
        /* still describe it (name, bytes) for fingerprints and counts */
        memset(out, 0, sizeof *out);
        out->name = t->name;
        out->data = t->data;
        out->type = TW_TYPE_F32;
        out->n_elems = t->n_elems;
        out->nbytes = t->nbytes;
        out->n_dims = t->n_dims > TW_WT_MAX_DIMS ? TW_WT_MAX_DIMS : t->n_dims;
        for (uint32_t d = 0; d < TW_WT_MAX_DIMS; d++)
            out->shape[d] = d < out->n_dims ? t->shape[d] : 1;
    }
    return true;
}
