/* tw-mkmodel: writes a GGUF file of a real model shape with random weights
 * and a real vocabulary, for benchmarks that need a model of the size
 * people run without downloading one. The files are standard GGUF:
 * llama.cpp runs them too, which makes like-for-like speed comparisons
 * possible. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mkmodel.h"
#include "tw/gguf.h"
#include "tw/gguf_arch.h"
#include "tw/kernels.h"
#include "tw/tensor.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tw-mkmodel SHAPE OUT.gguf [--type TYPE] [--vocab PATH|none]\n"
            "                  [--vocab-size N] [--seed N] [--layers N] [--tiny]\n"
            "                  [--pure] [--strict] [--quiet]\n"
            "       tw-mkmodel --list\n"
            "Writes a GGUF model of a named shape with deterministic random weights\n"
            "(N(0, 0.02) projections, unit norms) and the tokenizer of a vocabulary GGUF.\n"
            "TYPE: F32 F16 BF16 Q8_0 Q4_0 Q4_K Q5_K Q6_K Q4_K_M Q5_K_M (default F16).\n"
            "Quantized files follow llama-quantize's mix unless --pure: the output\n"
            "matrix (the embedding when tied) is Q6_K (Q8_0 files keep Q8_0), and the\n"
            "_M types keep attn_v and ffn_down at Q6_K in the layers llama.cpp picks.\n"
            "Norms, biases, DeltaNet decay/conv and routers are F32. A row that is not\n"
            "a whole number of blocks falls back per tensor like llama-quantize\n"
            "(Q4_K->Q5_0, Q5_K->Q5_1, Q6_K->Q8_0, else F16; Q8_0 where Q5_0/Q5_1 are\n"
            "not supported); every fallback is printed. --strict refuses instead.\n"
            "--vocab: a GGUF whose tokenizer.* keys are copied. Default: the first of\n"
            "../shared/vocab/ggml-vocab-gpt-2.gguf and models/tokenwire-coder-24m-q8_0.gguf\n"
            "that exists. 'none' writes no tokenizer (--vocab-size N, default 32000).\n"
            "--tiny shrinks the shape to test size; --layers overrides the layer count.\n");
}

/* ---- deterministic values --------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Approximately standard normal: the sum of four 16-bit uniforms
 * (Irwin-Hall), centred and scaled to unit variance. Cheap enough for
 * billions of draws, and its tails are bounded, which keeps activations of
 * a random model tame. */
static float normal(uint64_t *s)
{
    uint64_t r = splitmix(s);
    double u = (double)(r & 0xffff) + (double)((r >> 16) & 0xffff) + (double)((r >> 32) & 0xffff) +
               (double)(r >> 48);
    return (float)((u / 65535.0 - 2.0) * 1.7320508075688772);
}

static float uniform(uint64_t *s) /* [0, 1) */
{
    return (float)((double)(splitmix(s) >> 11) * 0x1p-53);
}

static uint64_t name_seed(const char *name, uint64_t seed)
{
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return h;
}

/* ---- one GGUF tensor -------------------------------------------------- */

typedef struct job {
    char name[64];
    tw_type type;
    uint32_t n_dims;
    uint64_t dims[TW_GGUF_MAX_DIMS];
    uint64_t rows, cols;
    mk_init init;
    uint64_t seed;
} job;

static tw_status fill(void *ctx, void *dst, size_t nbytes, tw_err *err)
{
    const job *j = ctx;
    size_t row_bytes = tw_type_row_bytes(j->type, j->cols);
    if (row_bytes == 0 || row_bytes * j->rows != nbytes)
        return tw_errorf(err, TW_INTERNAL, "%s: size mismatch", j->name);
    float *row = malloc(j->cols * sizeof *row);
    if (!row)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory for %s", j->name);
    uint64_t s = j->seed;
    for (uint64_t r = 0; r < j->rows; r++) {
        for (uint64_t c = 0; c < j->cols; c++) {
            switch (j->init) {
            case MK_INIT_ONES: row[c] = 1.0f; break;
            case MK_INIT_DECAY: row[c] = -(1.0f + 15.0f * uniform(&s)); break;
            case MK_INIT_DT_BIAS: row[c] = uniform(&s) - 0.5f; break;
            case MK_INIT_CONV: row[c] = 0.25f * normal(&s); break;
            default: row[c] = 0.02f * normal(&s); break;
            }
        }
        tw_quant_row(j->type, row, (uint8_t *)dst + r * row_bytes, (size_t)j->cols);
    }
    free(row);
    return TW_OK;
}

/* ---- type choice ------------------------------------------------------ */

typedef struct plan_opts {
    tw_type base;      /* the requested type */
    bool medium;       /* Q4_K_M / Q5_K_M */
    bool pure;
    bool strict;
    bool quiet;
    uint32_t n_layers;
} plan_opts;

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool is_quant(tw_type t)
{
    return t != TW_TYPE_F32 && t != TW_TYPE_F16 && t != TW_TYPE_BF16;
}

/* Tensors llama.cpp keeps in F32 whatever the file type. */
static bool keep_f32(const job *j)
{
    const char *n = j->name;
    return j->n_dims <= 1 || ends_with(n, "_norm.weight") || ends_with(n, "ffn_gate_inp.weight") ||
           ends_with(n, "ffn_gate_inp_shexp.weight") || ends_with(n, "ssm_conv1d.weight") ||
           !ends_with(n, ".weight");
}

/* llama.cpp's use_more_bits(): the first and last eighth of the layers and
 * every third one between them get more bits in the _M mixes. */
static bool more_bits(uint32_t layer, uint32_t n)
{
    return layer < n / 8 || layer >= 7 * n / 8 || (layer - n / 8) % 3 == 2;
}

static int layer_of(const char *name)
{
    int l;
    return sscanf(name, "blk.%d.", &l) == 1 ? l : -1;
}

static tw_type fallback_of(tw_type t)
{
    switch (t) {
    case TW_TYPE_Q4_K: return tw_type_supported(TW_TYPE_Q5_0) ? TW_TYPE_Q5_0 : TW_TYPE_Q8_0;
    case TW_TYPE_Q5_K: return tw_type_supported(TW_TYPE_Q5_1) ? TW_TYPE_Q5_1 : TW_TYPE_Q8_0;
    case TW_TYPE_Q6_K: return TW_TYPE_Q8_0;
    default: return TW_TYPE_F16;
    }
}

static tw_status choose_type(job *j, bool tied, const plan_opts *o, tw_err *err)
{
    if (keep_f32(j)) {
        j->type = TW_TYPE_F32;
        return TW_OK;
    }
    tw_type want = o->base;
    if (is_quant(want) && !o->pure) {
        bool output = strcmp(j->name, "output.weight") == 0 ||
                      (tied && strcmp(j->name, "token_embd.weight") == 0);
        int l = layer_of(j->name);
        if (output && want != TW_TYPE_Q8_0)
            want = TW_TYPE_Q6_K;
        else if (o->medium && l >= 0 && more_bits((uint32_t)l, o->n_layers) &&
                 (strstr(j->name, ".attn_v.") || strstr(j->name, ".ffn_down")))
            want = TW_TYPE_Q6_K;
    }
    tw_type t = want;
    while (tw_type_row_bytes(t, j->cols) == 0) {
        if (o->strict)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "%s: rows of %llu elements are not whole %s blocks of %zu "
                             "(--strict refuses the per-tensor fallback)",
                             j->name, (unsigned long long)j->cols, tw_type_name(t),
                             tw_type_block_elems(t));
        tw_type next = fallback_of(t);
        if (next == t)
            return tw_errorf(err, TW_INTERNAL, "%s: no fallback type", j->name);
        t = next;
    }
    if (t != want && !o->quiet)
        fprintf(stderr, "tw-mkmodel: %s: rows of %llu are not whole %s blocks; using %s\n",
                j->name, (unsigned long long)j->cols, tw_type_name(want), tw_type_name(t));
    j->type = t;
    return TW_OK;
}

/* GGUF shape of the tensor(s) an HF tensor becomes; mirrors tw-convert. */
static tw_status plan_dims(const mk_hf_tensor *t, const tw_gguf_name_map *m, job *j, tw_err *err)
{
    uint64_t shape[3];
    uint32_t nd = 0;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if ((m->xform & TW_XF_SQUEEZE) && t->shape[d] == 1)
            continue;
        shape[nd++] = t->shape[d];
    }
    if (m->xform & (TW_XF_GATE_HALF | TW_XF_UP_HALF)) {
        if (nd != 3 || shape[1] % 2 != 0)
            return tw_errorf(err, TW_INTERNAL, "%s: bad fused expert shape", t->name);
        shape[1] /= 2;
    }
    j->n_dims = nd;
    for (uint32_t d = 0; d < nd; d++)
        j->dims[d] = shape[nd - 1 - d];
    j->cols = j->dims[0];
    j->rows = 1;
    for (uint32_t d = 1; d < nd; d++)
        j->rows *= j->dims[d];
    return TW_OK;
}

/* ---- vocabulary ------------------------------------------------------- */

static tw_status copy_array(tw_gguf_writer *w, const char *key, const tw_gguf_value *v,
                            tw_gguf_warr **nested, tw_err *err);

/* Builds a writer array from a reader array (any element type, nested too). */
static tw_status to_warr(const tw_gguf_value *v, tw_gguf_warr **out, tw_err *err)
{
    return copy_array(NULL, NULL, v, out, err);
}

static tw_status push_elem(tw_gguf_warr *a, tw_gguf_vtype et, const tw_gguf_value *v, uint64_t i,
                           tw_err *err)
{
    uint64_t u;
    int64_t s;
    double d;
    switch (et) {
    case TW_GGUF_U8: { uint8_t x = tw_gguf_array_u64(v, i, &u) ? (uint8_t)u : 0; return tw_gguf_warr_push_num(a, &x, err); }
    case TW_GGUF_U16: { uint16_t x = tw_gguf_array_u64(v, i, &u) ? (uint16_t)u : 0; return tw_gguf_warr_push_num(a, &x, err); }
    case TW_GGUF_U32: { uint32_t x = tw_gguf_array_u64(v, i, &u) ? (uint32_t)u : 0; return tw_gguf_warr_push_num(a, &x, err); }
    case TW_GGUF_U64: { uint64_t x = tw_gguf_array_u64(v, i, &u) ? u : 0; return tw_gguf_warr_push_num(a, &x, err); }
    case TW_GGUF_I8: { int8_t x = tw_gguf_array_i64(v, i, &s) ? (int8_t)s : 0; return tw_gguf_warr_push_num(a, &x, err); }
    case TW_GGUF_I16: { int16_t x = tw_gguf_array_i64(v, i, &s) ? (int16_t)s : 0; return tw_gguf_warr_push_num(a, &x, err); }
    case TW_GGUF_I32: { int32_t x = tw_gguf_array_i64(v, i, &s) ? (int32_t)s : 0; return tw_gguf_warr_push_num(a, &x, err); }
    case TW_GGUF_I64: { int64_t x = tw_gguf_array_i64(v, i, &s) ? s : 0; return tw_gguf_warr_push_num(a, &x, err); }
    case TW_GGUF_F32: { float x = tw_gguf_array_f64(v, i, &d) ? (float)d : 0; return tw_gguf_warr_push_num(a, &x, err); }
    case TW_GGUF_F64: { double x = tw_gguf_array_f64(v, i, &d) ? d : 0; return tw_gguf_warr_push_num(a, &x, err); }
    case TW_GGUF_BOOL: { bool x = tw_gguf_array_u64(v, i, &u) && u; return tw_gguf_warr_push_num(a, &x, err); }
    case TW_GGUF_STRING: {
        size_t len = 0;
        const char *str = tw_gguf_array_str(v, i, &len);
        return tw_gguf_warr_push_str(a, str ? str : "", str ? len : 0, err);
    }
    case TW_GGUF_ARRAY: {
        tw_gguf_warr *inner;
        tw_status st = to_warr(tw_gguf_array_elem(v, i), &inner, err);
        return st ? st : tw_gguf_warr_push_arr(a, inner, err);
    }
    }
    return tw_errorf(err, TW_INVALID_ARGUMENT, "array element type %u", (unsigned)et);
}

/* With w: sets key to a copy of v. Without: returns the copy in *nested. */
static tw_status copy_array(tw_gguf_writer *w, const char *key, const tw_gguf_value *v,
                            tw_gguf_warr **nested, tw_err *err)
{
    tw_gguf_vtype et = tw_gguf_array_type(v);
    uint64_t n = tw_gguf_array_len(v);
    const void *raw = tw_gguf_array_data(v);
    if (w && raw && et != TW_GGUF_BOOL) /* numeric: the bytes are already GGUF's */
        return tw_gguf_writer_set_arr_data(w, key, et, raw, (size_t)n, err);
    tw_gguf_warr *a;
    tw_status st = tw_gguf_warr_new(et, &a, err);
    for (uint64_t i = 0; !st && i < n; i++)
        st = push_elem(a, et, v, i, err);
    if (st) {
        tw_gguf_warr_free(a);
        return st;
    }
    if (w)
        return tw_gguf_writer_set_arr(w, key, a, err);
    *nested = a;
    return TW_OK;
}

static tw_status copy_key(tw_gguf_writer *w, const char *key, const tw_gguf_value *v, tw_err *err)
{
    uint64_t u = 0;
    int64_t s = 0;
    double d = 0;
    bool b = false;
    switch (tw_gguf_value_type(v)) {
    case TW_GGUF_U8: tw_gguf_value_u64(v, &u); return tw_gguf_writer_set_u8(w, key, (uint8_t)u, err);
    case TW_GGUF_U16: tw_gguf_value_u64(v, &u); return tw_gguf_writer_set_u16(w, key, (uint16_t)u, err);
    case TW_GGUF_U32: tw_gguf_value_u64(v, &u); return tw_gguf_writer_set_u32(w, key, (uint32_t)u, err);
    case TW_GGUF_U64: tw_gguf_value_u64(v, &u); return tw_gguf_writer_set_u64(w, key, u, err);
    case TW_GGUF_I8: tw_gguf_value_i64(v, &s); return tw_gguf_writer_set_i8(w, key, (int8_t)s, err);
    case TW_GGUF_I16: tw_gguf_value_i64(v, &s); return tw_gguf_writer_set_i16(w, key, (int16_t)s, err);
    case TW_GGUF_I32: tw_gguf_value_i64(v, &s); return tw_gguf_writer_set_i32(w, key, (int32_t)s, err);
    case TW_GGUF_I64: tw_gguf_value_i64(v, &s); return tw_gguf_writer_set_i64(w, key, s, err);
    case TW_GGUF_F32: tw_gguf_value_f64(v, &d); return tw_gguf_writer_set_f32(w, key, (float)d, err);
    case TW_GGUF_F64: tw_gguf_value_f64(v, &d); return tw_gguf_writer_set_f64(w, key, d, err);
    case TW_GGUF_BOOL: tw_gguf_value_bool(v, &b); return tw_gguf_writer_set_bool(w, key, b, err);
    case TW_GGUF_STRING: {
        size_t len = 0;
        const char *str = tw_gguf_value_str(v, &len);
        return tw_gguf_writer_set_strn(w, key, str ? str : "", str ? len : 0, err);
    }
    case TW_GGUF_ARRAY: return copy_array(w, key, v, NULL, err);
    }
    return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: unknown value type", key);
}

/* Copies every tokenizer.* key of the vocabulary file; *vocab gets the
 * number of tokens. */
static tw_status copy_vocab(const char *path, tw_gguf_writer *w, uint64_t *vocab, tw_err *err)
{
    tw_gguf *g;
    tw_status st = tw_gguf_open(path, &g, err);
    if (st)
        return st;
    const tw_gguf_value *tokens = NULL;
    if ((st = tw_gguf_get_arr(g, "tokenizer.ggml.tokens", &tokens, err)) == TW_OK &&
        tw_gguf_array_len(tokens) == 0)
        st = tw_errorf(err, TW_INVALID_ARGUMENT, "%s: empty tokenizer.ggml.tokens", path);
    if (!st)
        *vocab = tw_gguf_array_len(tokens);
    for (int64_t i = 0; !st && i < tw_gguf_key_count(g); i++) {
        const char *k = tw_gguf_key_name(g, i);
        if (strncmp(k, "tokenizer.", 10) == 0)
            st = copy_key(w, k, tw_gguf_key_value(g, i), err);
    }
    tw_gguf_close(g);
    return st;
}

static const char *default_vocab(void)
{
    static const char *const candidates[] = {"../shared/vocab/ggml-vocab-gpt-2.gguf",
                                             "models/tokenwire-coder-24m-q8_0.gguf"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        FILE *f = fopen(candidates[i], "rb");
        if (f) {
            fclose(f);
            return candidates[i];
        }
    }
    return NULL;
}

/* ---- the whole file --------------------------------------------------- */

static uint32_t file_type(tw_type t, bool medium)
{
    switch (t) {
    case TW_TYPE_F32: return 0;
    case TW_TYPE_F16: return 1;
    case TW_TYPE_Q4_0: return 2;
    case TW_TYPE_Q8_0: return 7;
    case TW_TYPE_Q4_K: return medium ? 15 : 14;
    case TW_TYPE_Q5_K: return medium ? 17 : 16;
    case TW_TYPE_Q6_K: return 18;
    case TW_TYPE_BF16: return 32;
    default: return 0;
    }
}

typedef struct mk_args {
    const char *shape, *out, *vocab;
    uint64_t vocab_size, seed;
    uint32_t layers;
    bool tiny;
    plan_opts po;
} mk_args;

static tw_status make(const mk_args *a, tw_err *err)
{
    tw_gguf_writer *w = NULL;
    json_t *config = NULL;
    mk_hf_tensor *hf = NULL;
    job *jobs = NULL;
    size_t n_hf = 0, n_jobs = 0;
    uint64_t vocab = a->vocab_size;
    tw_status st = tw_gguf_writer_new(&w, err);
    if (st)
        return st;
    if (a->vocab && (st = copy_vocab(a->vocab, w, &vocab, err)))
        goto done;
    if ((st = mk_shape_config(a->shape, vocab, a->tiny, a->layers, &config, err)))
        goto done;
    tw_arch_params p;
    if ((st = tw_arch_params_from_hf(config, &p, err)) ||
        (st = tw_gguf_hparams_from_hf(config, w, err)))
        goto done;
    char gname[96];
    snprintf(gname, sizeof gname, "%s%s (random weights)", a->shape, a->tiny ? " tiny" : "");
    if ((st = tw_gguf_writer_set_str(w, "general.name", gname, err)) ||
        (st = tw_gguf_writer_set_u32(w, "general.file_type", file_type(a->po.base, a->po.medium),
                                     err)) ||
        (st = tw_gguf_writer_set_u32(w, "general.quantization_version", 2, err)))
        goto done;
    if ((st = mk_hf_tensors(config, &hf, &n_hf, err)))
        goto done;
    jobs = calloc(2 * n_hf + 1, sizeof *jobs);
    if (!jobs) {
        st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
        goto done;
    }
    plan_opts po = a->po;
    po.n_layers = p.n_layers;
    bool tied = json_is_true(json_object_get(config, "tie_word_embeddings"));
    uint64_t params = 0, bytes = 0;
    for (size_t i = 0; i < n_hf; i++) {
        tw_gguf_name_map maps[2];
        size_t nm;
        if ((st = tw_gguf_name_from_hf(&p, hf[i].name, maps, &nm, err)))
            goto done;
        for (size_t k = 0; k < nm; k++) {
            job *j = &jobs[n_jobs];
            snprintf(j->name, sizeof j->name, "%s", maps[k].gguf_name);
            j->init = hf[i].init;
            j->seed = name_seed(j->name, a->seed);
            if ((st = plan_dims(&hf[i], &maps[k], j, err)) ||
                (st = choose_type(j, tied, &po, err)))
                goto done;
            if ((st = tw_gguf_writer_add_tensor_fn(w, j->name, j->type, j->n_dims, j->dims, fill,
                                                   j, err)))
                goto done;
            params += j->rows * j->cols;
            bytes += tw_type_row_bytes(j->type, j->cols) * j->rows;
            n_jobs++;
        }
    }
    if ((st = tw_gguf_writer_write(w, a->out, err)))
        goto done;
    if (!a->po.quiet)
        fprintf(stderr, "tw-mkmodel: wrote %s: %s %s, %zu tensors, %.1fM parameters, %.1f MiB of "
                        "weights, vocabulary %llu%s\n",
                a->out, a->shape, tw_arch_gguf_name(p.arch), n_jobs, (double)params / 1e6,
                (double)bytes / (1024.0 * 1024.0), (unsigned long long)vocab,
                a->vocab ? "" : " (no tokenizer)");
done:
    free(jobs);
    free(hf);
    json_decref(config);
    tw_gguf_writer_free(w);
    return st;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || s[0] == '-')
        return false;
    *out = v;
    return true;
}

int main(int argc, char **argv)
{
    mk_args a = {.vocab_size = 32000, .seed = 1234};
    const char *type_name = "F16";
    bool vocab_none = false;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        bool has = i + 1 < argc;
        uint64_t v;
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(s, "--list")) {
            mk_shapes_print(stdout);
            return 0;
        } else if (!strcmp(s, "--type") && has) {
            type_name = argv[++i];
        } else if (!strcmp(s, "--vocab") && has) {
            a.vocab = argv[++i];
            vocab_none = !strcmp(a.vocab, "none");
        } else if (!strcmp(s, "--vocab-size") && has && parse_u64(argv[i + 1], &v) && v > 0 &&
                   v <= (1u << 24)) {
            a.vocab_size = v;
            i++;
        } else if (!strcmp(s, "--seed") && has && parse_u64(argv[i + 1], &v)) {
            a.seed = v;
            i++;
        } else if (!strcmp(s, "--layers") && has && parse_u64(argv[i + 1], &v) && v > 0 &&
                   v <= 512) {
            a.layers = (uint32_t)v;
            i++;
        } else if (!strcmp(s, "--tiny")) {
            a.tiny = true;
        } else if (!strcmp(s, "--pure")) {
            a.po.pure = true;
        } else if (!strcmp(s, "--strict")) {
            a.po.strict = true;
        } else if (!strcmp(s, "--quiet")) {
            a.po.quiet = true;
        } else if (s[0] == '-') {
            fprintf(stderr, "tw-mkmodel: bad option or value: '%s'\n", s);
            usage(stderr);
            return 2;
        } else if (!a.shape) {
            a.shape = s;
        } else if (!a.out) {
            a.out = s;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (!a.shape || !a.out) {
        usage(stderr);
        return 2;
    }
    char base[16];
    snprintf(base, sizeof base, "%s", type_name);
    size_t bl = strlen(base);
    if (bl > 2 && strcasecmp(base + bl - 2, "_M") == 0) {
        base[bl - 2] = '\0';
        a.po.medium = true;
    }
    tw_err err = {{0}};
    static const tw_type allowed[] = {TW_TYPE_F32,  TW_TYPE_F16,  TW_TYPE_BF16, TW_TYPE_Q8_0,
                                      TW_TYPE_Q4_0, TW_TYPE_Q4_K, TW_TYPE_Q5_K, TW_TYPE_Q6_K};
    bool ok = tw_type_from_name(base, &a.po.base, &err) == TW_OK, listed = false;
    for (size_t i = 0; ok && i < sizeof allowed / sizeof allowed[0]; i++)
        listed |= allowed[i] == a.po.base;
    if (!ok || !listed ||
        (a.po.medium && a.po.base != TW_TYPE_Q4_K && a.po.base != TW_TYPE_Q5_K)) {
        fprintf(stderr, "tw-mkmodel: --type must be one of F32 F16 BF16 Q8_0 Q4_0 Q4_K Q5_K "
                        "Q6_K Q4_K_M Q5_K_M\n");
        return 2;
    }
    if (vocab_none) {
        a.vocab = NULL;
    } else if (!a.vocab && !(a.vocab = default_vocab())) {
        fprintf(stderr, "tw-mkmodel: no vocabulary found (../shared/vocab/ggml-vocab-gpt-2.gguf "
                        "or models/tokenwire-coder-24m-q8_0.gguf); pass --vocab PATH or "
                        "--vocab none\n");
        return 2;
    }
    tw_status st = make(&a, &err);
    if (st) {
        fprintf(stderr, "tw-mkmodel: %s: %s\n", tw_status_name(st), err.msg);
        return 1;
    }
    return 0;
}
