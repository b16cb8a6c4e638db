/* tw-convert: a Hugging Face checkpoint directory -> one GGUF file that
 * llama.cpp and tokenwire both load. */
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "convert.h"
#include "tw/gguf.h"
#include "tw/gguf_arch.h"
#include "tw/kernels.h"
#include "tw/safetensors.h"
#include "tw/tensor.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: tw-convert HF_DIR OUT.gguf [--type F32|F16|BF16|Q8_0|Q4_0|Q4_K|Q6_K]\n"
               "                  [--pre NAME] [--name NAME]\n"
               "Converts a Hugging Face checkpoint (config.json + safetensors, optional\n"
               "tokenizer.json) into a GGUF file. Norms, biases, 1-D tensors and rows that\n"
               "are not whole blocks of the chosen type are stored as F32. --pre overrides\n"
               "the guessed tokenizer.ggml.pre name. --name sets general.name (default:\n"
               "the checkpoint directory's name). Default type: BF16.\n");
}

/* One GGUF tensor to produce from one HF tensor. */
typedef struct job {
    const tw_st_tensor *src;
    tw_gguf_name_map map;
    tw_type type;
    uint32_t n_dims;
    uint64_t dims[TW_GGUF_MAX_DIMS];
    uint64_t rows, cols; /* HF row-major view the transforms work on */
} job;

static uint32_t file_type(tw_type t)
{
    switch (t) {
    case TW_TYPE_F32: return 0;
    case TW_TYPE_F16: return 1;
    case TW_TYPE_Q4_0: return 2;
    case TW_TYPE_Q8_0: return 7;
    case TW_TYPE_Q4_K: return 14;
    case TW_TYPE_Q6_K: return 18;
    case TW_TYPE_BF16: return 32;
    default: return 0;
    }
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* What an encoder's checkpoint holds beyond the encoder: BertModel's pooler,
 * a task head's masked-LM or classifier layers, the position-id buffer. */
static bool encoder_extra(const char *name)
{
    if (strncmp(name, "bert.", 5) == 0)
        name += 5;
    return strncmp(name, "pooler.", 7) == 0 || strncmp(name, "cls.", 4) == 0 ||
           strncmp(name, "classifier.", 11) == 0 || strcmp(name, "embeddings.position_ids") == 0;
}

/* Tensors that have no place in a text model GGUF. */
static bool skipped(const char *name, bool tied)
{
    return ends_with(name, ".rotary_emb.inv_freq") || strncmp(name, "mtp.", 4) == 0 ||
           strncmp(name, "model.mtp.", 10) == 0 || strstr(name, "visual.") != NULL ||
           strstr(name, "vision_tower.") != NULL ||
           strstr(name, "multi_modal_projector.") != NULL ||
           (tied && strcmp(name, "lm_head.weight") == 0) || encoder_extra(name);
}

/* Types llama.cpp's converter always keeps in F32. */
static bool keep_f32(const job *j)
{
    const char *n = j->map.gguf_name;
    return j->n_dims <= 1 || ends_with(n, "_norm.weight") || ends_with(n, "ffn_gate_inp.weight") ||
           ends_with(n, "ffn_gate_inp_shexp.weight") || ends_with(n, "ssm_conv1d.weight") ||
           !ends_with(n, ".weight");
}

static tw_status fill(void *ctx, void *dst, size_t nbytes, tw_err *err)
{
    const job *j = ctx;
    uint64_t n = j->src->n_elems;
    float *f = malloc((n ? n : 1) * sizeof *f);
    if (!f)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory for %s", j->src->name);
    tw_status st = tw_st_to_f32(j->src, f, n, err);
    if (st) {
        free(f);
        return st;
    }
    if (j->map.xform & (TW_XF_GATE_HALF | TW_XF_UP_HALF)) {
        /* [E, 2F, H] -> the gate (first F rows) or up half of every expert */
        uint64_t e = j->src->shape[0], two_f = j->src->shape[1], h = j->src->shape[2];
        uint64_t half = two_f / 2 * h, skip = (j->map.xform & TW_XF_UP_HALF) ? half : 0;
        for (uint64_t x = 0; x < e; x++)
            memmove(f + x * half, f + x * two_f * h + skip, half * sizeof *f);
        n /= 2;
    }
    if ((st = tw_gguf_xform_from_hf(&j->map, f, j->rows, j->cols, err))) {
        free(f);
        return st;
    }
    uint64_t row = j->dims[0], nrows = n / row;
    size_t row_bytes = tw_type_row_bytes(j->type, row);
    if (row_bytes * nrows != nbytes) {
        free(f);
        return tw_errorf(err, TW_INTERNAL, "%s: size mismatch", j->map.gguf_name);
    }
    for (uint64_t r = 0; r < nrows; r++)
        tw_quant_row(j->type, f + r * row, (uint8_t *)dst + r * row_bytes, (size_t)row);
    free(f);
    return TW_OK;
}

/* Shapes and type of the GGUF tensor for one mapping. */
static tw_status plan(const tw_st_tensor *t, const tw_gguf_name_map *m, tw_type want, job *j,
                      tw_err *err)
{
    memset(j, 0, sizeof *j);
    j->src = t;
    j->map = *m;
    uint64_t shape[TW_ST_MAX_DIMS];
    uint32_t nd = 0;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if ((m->xform & TW_XF_SQUEEZE) && t->shape[d] == 1)
            continue;
        shape[nd++] = t->shape[d];
    }
    if (m->xform & (TW_XF_GATE_HALF | TW_XF_UP_HALF)) {
        if (nd != 3 || shape[1] % 2 != 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "%s: expected [experts, 2 * ffn, hidden], got %u dimensions", t->name,
                             nd);
        shape[1] /= 2;
    }
    if (nd == 0)
        shape[nd++] = 1;
    if (nd > TW_GGUF_MAX_DIMS)
        return tw_errorf(err, TW_UNIMPLEMENTED, "%s: %u dimensions", t->name, nd);
    j->n_dims = nd;
    for (uint32_t d = 0; d < nd; d++)
        j->dims[d] = shape[nd - 1 - d];
    j->rows = shape[0];
    j->cols = 1;
    for (uint32_t d = 1; d < nd; d++)
        j->cols *= shape[d];
    if (m->xform & (TW_XF_GATE_HALF | TW_XF_UP_HALF)) {
        j->rows = shape[0] * shape[1];
        j->cols = shape[2];
    }
    j->type = want;
    if (keep_f32(j) || tw_type_row_bytes(want, j->dims[0]) == 0)
        j->type = TW_TYPE_F32;
    return TW_OK;
}

/* llama3 RoPE: per-frequency divisors as llama.cpp stores them. */
static tw_status add_rope_freqs(const json_t *config, const tw_arch_params *p, tw_gguf_writer *w,
                                tw_err *err)
{
    const json_t *rp = json_object_get(config, "rope_parameters");
    if (!rp)
        rp = json_object_get(config, "rope_scaling");
    const char *type = json_string_value(json_object_get(rp, "rope_type"));
    if (!type)
        type = json_string_value(json_object_get(rp, "type"));
    if (!type || strcasecmp(type, "llama3") != 0)
        return TW_OK;
#define NUM(obj, key, def)                                                                     \
    (json_is_number(json_object_get(obj, key)) ? json_number_value(json_object_get(obj, key))  \
                                               : (def))
    double base = NUM(rp, "rope_theta", NUM(config, "rope_theta", 10000.0));
    double factor = NUM(rp, "factor", 8.0);
    double lo = NUM(rp, "low_freq_factor", 1.0), hi = NUM(rp, "high_freq_factor", 4.0);
    double old_ctx = NUM(rp, "original_max_position_embeddings",
                         NUM(config, "original_max_position_embeddings", 8192.0));
#undef NUM
    uint32_t dim = p->head_dim, n = dim / 2;
    float *factors = malloc((n ? n : 1) * sizeof *factors);
    if (!factors)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    double lo_wavelen = old_ctx / lo, hi_wavelen = old_ctx / hi;
    for (uint32_t i = 0; i < n; i++) {
        float freq = 1.0f / powf((float)base, (float)(2 * i) / (float)dim);
        double wavelen = 2 * M_PI / freq;
        if (wavelen < hi_wavelen) {
            factors[i] = 1.0f;
        } else if (wavelen > lo_wavelen) {
            factors[i] = (float)factor;
        } else {
            double smooth = (old_ctx / wavelen - lo) / (hi - lo);
            factors[i] = (float)(1.0 / ((1 - smooth) / factor + smooth));
        }
    }
    uint64_t d[1] = {n};
    tw_status st = tw_gguf_writer_add_tensor(w, "rope_freqs.weight", TW_TYPE_F32, 1, d, factors,
                                             n * sizeof *factors, err);
    free(factors);
    return st;
}

static tw_status convert(const char *dir, const char *out, tw_type type, const char *pre,
                         const char *name, tw_err *err)
{
    json_t *config;
    tw_status st = tw_hf_config_load(dir, &config, err);
    if (st)
        return st;
    tw_arch_params p;
    tw_st_set *set = NULL;
    tw_gguf_writer *w = NULL;
    job *jobs = NULL;
    size_t n_jobs = 0;
    if ((st = tw_arch_params_from_hf(config, &p, err)))
        goto done;
    if ((st = tw_st_set_open_dir(dir, &set, err)))
        goto done;
    if ((st = tw_gguf_writer_new(&w, err)) || (st = tw_gguf_hparams_from_hf(config, w, err)))
        goto done;
    char dircopy[PATH_MAX];
    snprintf(dircopy, sizeof dircopy, "%s", dir);
    size_t dl = strlen(dircopy);
    while (dl > 1 && dircopy[dl - 1] == '/')
        dircopy[--dl] = '\0';
    if ((st = tw_gguf_writer_set_str(w, "general.name", name ? name : basename(dircopy), err)) ||
        (st = tw_gguf_writer_set_u32(w, "general.file_type", file_type(type), err)) ||
        (st = tw_gguf_writer_set_u32(w, "general.quantization_version", 2, err)))
        goto done;

    const json_t *tie = json_object_get(config, "tie_word_embeddings");
    bool tied = json_is_true(tie);
    if (p.arch == TW_ARCH_GEMMA3)
        tied = true; /* llama.cpp drops Gemma's lm_head */
    const tw_st_tensor *emb = tw_st_set_find(set, "model.embed_tokens.weight");
    if (!emb)
        emb = tw_st_set_find(set, "model.language_model.embed_tokens.weight");
    if (!emb)
        emb = tw_st_set_find(set, "embeddings.word_embeddings.weight");
    uint64_t vocab = emb && emb->n_dims == 2 ? emb->shape[0] : 0;
    const json_t *vs = json_object_get(config, "vocab_size");
    if (json_is_integer(vs) && json_integer_value(vs) > 0)
        vocab = (uint64_t)json_integer_value(vs);
    bool has_vocab;
    if ((st = twc_write_vocab(dir, config, vocab, pre, w, &has_vocab, err)))
        goto done;
    if ((st = add_rope_freqs(config, &p, w, err)))
        goto done;

    size_t n = tw_st_set_count(set);
    jobs = calloc(2 * n + 1, sizeof *jobs);
    if (!jobs) {
        st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
        goto done;
    }
    size_t heads = 0;
    for (size_t i = 0; i < n; i++) {
        const tw_st_tensor *t = tw_st_set_tensor_at(set, i);
        if (skipped(t->name, tied)) {
            heads += encoder_extra(t->name) &&
                     (strstr(t->name, "cls.") || strstr(t->name, "classifier."));
            continue;
        }
        if (t->dtype != TW_ST_F32 && t->dtype != TW_ST_F16 && t->dtype != TW_ST_BF16 &&
            t->dtype != TW_ST_F64) {
            st = tw_errorf(err, TW_UNIMPLEMENTED, "%s: dtype %s cannot be converted", t->name,
                           tw_st_dtype_name(t->dtype));
            goto done;
        }
        tw_gguf_name_map maps[2];
        size_t nm;
        if ((st = tw_gguf_name_from_hf(&p, t->name, maps, &nm, err)))
            goto done;
        for (size_t k = 0; k < nm; k++) {
            job *j = &jobs[n_jobs];
            if ((st = plan(t, &maps[k], type, j, err)))
                goto done;
            if ((st = tw_gguf_writer_add_tensor_fn(w, j->map.gguf_name, j->type, j->n_dims,
                                                   j->dims, fill, j, err)))
                goto done;
            n_jobs++;
        }
    }
    if ((st = tw_gguf_writer_write(w, out, err)))
        goto done;
    if (heads)
        fprintf(stderr,
                "tw-convert: left out %zu tensors of a task head (masked LM or classifier): the "
                "file holds the encoder, which computes embeddings\n",
                heads);
    fprintf(stderr, "tw-convert: wrote %s: %s, %zu tensors%s\n", out, tw_arch_gguf_name(p.arch),
            n_jobs, has_vocab ? ", with vocabulary" : ", no tokenizer.json (ids only)");
done:
    free(jobs);
    tw_gguf_writer_free(w);
    tw_st_set_close(set);
    json_decref(config);
    return st;
}

int main(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *pre = NULL, *name = NULL, *type_name = "BF16";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--type") == 0 && i + 1 < argc) {
            type_name = argv[++i];
        } else if (strcmp(argv[i], "--pre") == 0 && i + 1 < argc) {
            pre = argv[++i];
        } else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc) {
            name = argv[++i];
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "tw-convert: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!in) {
            in = argv[i];
        } else if (!out) {
            out = argv[i];
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (!in || !out) {
        usage(stderr);
        return 2;
    }
    tw_err err = {{0}};
    tw_type type;
    static const tw_type allowed[] = {TW_TYPE_F32,  TW_TYPE_F16,  TW_TYPE_BF16, TW_TYPE_Q8_0,
                                      TW_TYPE_Q4_0, TW_TYPE_Q4_K, TW_TYPE_Q6_K};
    bool ok = tw_type_from_name(type_name, &type, &err) == TW_OK;
    bool listed = false;
    for (size_t i = 0; ok && i < sizeof allowed / sizeof allowed[0]; i++)
        listed |= allowed[i] == type;
    if (!ok || !listed) {
        fprintf(stderr, "tw-convert: --type must be one of F32 F16 BF16 Q8_0 Q4_0 Q4_K Q6_K\n");
        return 2;
    }
    tw_status st = convert(in, out, type, pre, name, &err);
    if (st) {
        fprintf(stderr, "tw-convert: %s: %s\n", tw_status_name(st), err.msg);
        return 1;
    }
    return 0;
}
