/* Building a tw_model from a weight source: checks every tensor's shape
 * against the config, keeps matrices in their stored type (views into the
 * mapped files), converts small vectors to f32, and sizes the scratch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tw/hw.h"
#include "tw/kernels.h"
#include "tw/log.h"

#include "model/loader.h"

/* Every allocation of a model is recorded here and freed with it. */
typedef struct owned_list {
    size_t n, cap;
    void **p;
} owned_list;

void *tw_model_calloc(tw_model *m, size_t n, size_t size)
{
    owned_list *o = m->owned;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        void **p = realloc(o->p, cap * sizeof *p);
        if (!p)
            return NULL;
        o->p = p;
        o->cap = cap;
    }
    void *v = calloc(n ? n : 1, size);
    if (v)
        o->p[o->n++] = v;
    return v;
}

const char *tw_load_name(tw_loader *ld, int layer, const char *suffix)
{
    if (layer < 0)
        snprintf(ld->name, sizeof ld->name, "%s%s", ld->prefix, suffix);
    else
        snprintf(ld->name, sizeof ld->name, "%slayers.%d.%s", ld->prefix, layer, suffix);
    return ld->name;
}

tw_status tw_load_find(tw_loader *ld, const char *name, bool optional, tw_wtensor *t, bool *found)
{
    tw_status st = tw_wsource_find(ld->m->src, name, t, ld->err);
    if (found)
        *found = st == TW_OK;
    if (st == TW_NOT_FOUND) {
        if (optional)
            return TW_OK;
        return tw_errorf(ld->err, TW_NOT_FOUND, "missing tensor %s", name);
    }
    return st;
}

/* A view of `count` stacked [rows x cols] matrices (count = 1 for a plain
 * Linear weight). */
tw_status tw_load_view(tw_loader *ld, const tw_wtensor *t, size_t count, size_t rows, size_t cols,
                       tw_mat *out)
{
    uint64_t want_dims = count > 1 ? 3 : 2;
    bool shape_ok = t->n_dims == want_dims &&
                    (count > 1 ? t->shape[0] == count && t->shape[1] == rows && t->shape[2] == cols
                               : t->shape[0] == rows && t->shape[1] == cols);
    if (!shape_ok)
        return tw_errorf(ld->err, TW_INVALID_ARGUMENT,
                         "tensor %s: shape [%llu, %llu, %llu] does not match the config "
                         "(%zu x %zu x %zu)",
                         t->name, (unsigned long long)t->shape[0],
                         (unsigned long long)t->shape[1], (unsigned long long)t->shape[2], count,
                         rows, cols);
    size_t rb = tw_type_row_bytes(t->type, cols);
    size_t need;
    if (rb == 0 || __builtin_mul_overflow(rb, rows * count, &need) || need != t->nbytes)
        return tw_errorf(ld->err, TW_INVALID_ARGUMENT,
                         "tensor %s: %s rows of %zu elements do not fit its %llu bytes", t->name,
                         tw_type_name(t->type), cols, (unsigned long long)t->nbytes);
    *out = (tw_mat){.w = t->data, .type = t->type, .rows = rows, .cols = cols, .row_bytes = rb};
    return TW_OK;
}

tw_status tw_load_mat(tw_loader *ld, const char *name, size_t rows, size_t cols, tw_mat *out)
{
    tw_wtensor t;
    tw_status st = tw_load_find(ld, name, false, &t, NULL);
    if (st)
        return st;
    return tw_load_view(ld, &t, 1, rows, cols, out);
}

/* An f32 copy of a small tensor of n elements, with the stored transform
 * undone and `plus_one` folded in, so *out is what the forward pass uses. */
tw_status tw_load_vec(tw_loader *ld, const char *name, size_t n, bool plus_one, bool optional,
                      float **out)
{
    *out = NULL;
    tw_wtensor t;
    bool found;
    tw_status st = tw_load_find(ld, name, optional, &t, &found);
    if (st || !found)
        return st;
    if (t.n_elems != n)
        return tw_errorf(ld->err, TW_INVALID_ARGUMENT, "tensor %s: %llu elements, expected %zu",
                         t.name, (unsigned long long)t.n_elems, n);
    if (n % tw_type_block_elems(t.type) != 0 || tw_type_row_bytes(t.type, n) != t.nbytes)
        return tw_errorf(ld->err, TW_INVALID_ARGUMENT, "tensor %s: bad size for %s", t.name,
                         tw_type_name(t.type));
    if (t.transform == TW_WT_NEG_EXP)
        return tw_errorf(ld->err, TW_INVALID_ARGUMENT, "tensor %s: unexpected transform", t.name);
    float *v = tw_model_calloc(ld->m, n, sizeof(float));
    if (!v)
        return tw_errorf(ld->err, TW_RESOURCE_EXHAUSTED, "out of memory");
    tw_dequant_row(t.type, t.data, v, n);
    for (size_t i = 0; i < n; i++) {
        if (t.transform == TW_WT_PLUS_ONE && !plus_one)
            v[i] -= 1.0f;
        else if (t.transform != TW_WT_PLUS_ONE && plus_one)
            v[i] += 1.0f;
    }
    *out = v;
    return TW_OK;
}

static tw_status load_attention(tw_loader *ld, int l, tw_layer *L)
{
    tw_model *m = ld->m;
    const tw_mconfig *c = &m->cfg;
    size_t H = c->hidden, hd = c->head_dim;
    size_t q_rows = (size_t)c->n_heads * hd * (c->family->attn_gate ? 2 : 1);
    size_t kv_rows = (size_t)c->n_kv_heads * hd;
    bool p1 = c->family->norm_plus_one;
    tw_status st;
    if ((st = tw_load_mat(ld, tw_load_name(ld, l, "self_attn.q_proj.weight"), q_rows, H, &L->wq)) ||
        (st =
             tw_load_mat(ld, tw_load_name(ld, l, "self_attn.k_proj.weight"), kv_rows, H, &L->wk)) ||
        (st =
             tw_load_mat(ld, tw_load_name(ld, l, "self_attn.v_proj.weight"), kv_rows, H, &L->wv)) ||
        (st = tw_load_mat(ld, tw_load_name(ld, l, "self_attn.o_proj.weight"), H,
                          (size_t)c->n_heads * hd, &L->wo)) ||
        (st = tw_load_vec(ld, tw_load_name(ld, l, "self_attn.q_proj.bias"), q_rows, false, true,
                          &L->bq)) ||
        (st = tw_load_vec(ld, tw_load_name(ld, l, "self_attn.k_proj.bias"), kv_rows, false, true,
                          &L->bk)) ||
        (st = tw_load_vec(ld, tw_load_name(ld, l, "self_attn.v_proj.bias"), kv_rows, false, true,
                          &L->bv)) ||
        (st = tw_load_vec(ld, tw_load_name(ld, l, "self_attn.o_proj.bias"), H, false, true,
                          &L->bo)) ||
        (st = tw_load_vec(ld, tw_load_name(ld, l, "self_attn.q_norm.weight"), hd, p1,
                          !c->family->qk_norm, &L->q_norm)) ||
        (st = tw_load_vec(ld, tw_load_name(ld, l, "self_attn.k_norm.weight"), hd, p1,
                          !c->family->qk_norm, &L->k_norm)))
        return st;
    L->sliding = c->sliding[l];
    L->rope = &m->ropes[L->sliding ? 1 : 0];
    L->attn_index = m->n_attn_layers++;
    return TW_OK;
}

static tw_status load_deltanet(tw_loader *ld, int l, tw_layer *L)
{
    tw_model *m = ld->m;
    const tw_mconfig *c = &m->cfg;
    size_t H = c->hidden;
    size_t nv = c->dn_v_heads, vdim = nv * c->dn_v_dim;
    size_t conv_dim = tw_dn_conv_dim(c);
    tw_status st;
    if ((st = tw_load_mat(ld, tw_load_name(ld, l, "linear_attn.in_proj_qkv.weight"), conv_dim, H,
                          &L->in_qkv)) ||
        (st = tw_load_mat(ld, tw_load_name(ld, l, "linear_attn.in_proj_z.weight"), vdim, H,
                          &L->in_z)) ||
        (st = tw_load_mat(ld, tw_load_name(ld, l, "linear_attn.in_proj_b.weight"), nv, H,
                          &L->in_b)) ||
        (st = tw_load_mat(ld, tw_load_name(ld, l, "linear_attn.in_proj_a.weight"), nv, H,
                          &L->in_a)) ||
        (st = tw_load_mat(ld, tw_load_name(ld, l, "linear_attn.out_proj.weight"), H, vdim,
                          &L->out_proj)) ||
        (st = tw_load_vec(ld, tw_load_name(ld, l, "linear_attn.conv1d.weight"),
                          conv_dim * c->dn_conv, false, false, &L->conv_w)) ||
        (st = tw_load_vec(ld, tw_load_name(ld, l, "linear_attn.dt_bias"), nv, false, false,
                          &L->dt_bias)) ||
        (st = tw_load_vec(ld, tw_load_name(ld, l, "linear_attn.norm.weight"), c->dn_v_dim, false,
                          false, &L->dn_norm)))
        return st;

    /* A_log, which a GGUF may store already as -exp(A_log) */
    tw_wtensor t;
    if ((st = tw_load_find(ld, tw_load_name(ld, l, "linear_attn.A_log"), false, &t, NULL)))
        return st;
    if (t.n_elems != nv || tw_type_row_bytes(t.type, nv) != t.nbytes)
        return tw_errorf(ld->err, TW_INVALID_ARGUMENT, "tensor %s: expected %zu values", t.name,
                         nv);
    if (!(L->dn_a = tw_model_calloc(m, nv, sizeof(float))))
        return tw_errorf(ld->err, TW_RESOURCE_EXHAUSTED, "out of memory");
    tw_dequant_row(t.type, t.data, L->dn_a, nv);
    if (t.transform != TW_WT_NEG_EXP)
        for (size_t i = 0; i < nv; i++)
            L->dn_a[i] = -expf(L->dn_a[i]);
    /* the conv taps tap-major, so each tap is one pass over the channels */
    size_t K = c->dn_conv;
    float *wt = tw_model_calloc(m, conv_dim * K, sizeof(float));
    if (!wt)
        return tw_errorf(ld->err, TW_RESOURCE_EXHAUSTED, "out of memory");
    for (size_t ch = 0; ch < conv_dim; ch++)
        for (size_t i = 0; i < K; i++)
            wt[i * conv_dim + ch] = L->conv_w[ch * K + i];
    L->conv_w = wt;
    L->dn_index = m->n_dn_layers++;
    return TW_OK;
}

static tw_status load_moe(tw_loader *ld, int l, tw_layer *L)
{
    tw_model *m = ld->m;
    const tw_mconfig *c = &m->cfg;
    size_t H = c->hidden, E = c->n_experts, I = c->moe_ffn_dim;
    tw_status st;
    if ((st = tw_load_mat(ld, tw_load_name(ld, l, "mlp.gate.weight"), E, H, &L->router)))
        return st;
    L->exp_gate = tw_model_calloc(m, E, sizeof(tw_mat));
    L->exp_up = tw_model_calloc(m, E, sizeof(tw_mat));
    L->exp_down = tw_model_calloc(m, E, sizeof(tw_mat));
    if (!L->exp_gate || !L->exp_up || !L->exp_down)
        return tw_errorf(ld->err, TW_RESOURCE_EXHAUSTED, "out of memory");

    tw_wtensor t;
    bool fused;
    tw_mat all;
    if ((st = tw_load_find(ld, tw_load_name(ld, l, "mlp.experts.gate_up_proj"), true, &t, &fused)))
        return st;
    if (fused) {
        /* HF stacks every expert's [gate; up] rows: [E, 2I, H] */
        if ((st = tw_load_view(ld, &t, E, 2 * I, H, &all)))
            return st;
        for (size_t e = 0; e < E; e++) {
            tw_mat g = all;
            g.rows = I;
            g.w = all.w + e * 2 * I * all.row_bytes;
            L->exp_gate[e] = g;
            g.w += I * all.row_bytes;
            L->exp_up[e] = g;
        }
    } else {
        /* separately stacked gate and up, [E, I, H] each */
        const char *names[2] = {"mlp.experts.gate_proj", "mlp.experts.up_proj"};
        tw_mat *dst[2] = {L->exp_gate, L->exp_up};
        for (int w = 0; w < 2; w++) {
            if ((st = tw_load_find(ld, tw_load_name(ld, l, names[w]), false, &t, NULL)) ||
                (st = tw_load_view(ld, &t, E, I, H, &all)))
                return st;
            for (size_t e = 0; e < E; e++) {
                dst[w][e] = all;
                dst[w][e].w = all.w + e * I * all.row_bytes;
            }
        }
    }
    if ((st = tw_load_find(ld, tw_load_name(ld, l, "mlp.experts.down_proj"), false, &t, NULL)) ||
        (st = tw_load_view(ld, &t, E, H, I, &all)))
        return st;
    for (size_t e = 0; e < E; e++) {
        L->exp_down[e] = all;
        L->exp_down[e].w = all.w + e * H * all.row_bytes;
    }

    size_t S = c->shared_ffn_dim;
    L->has_shared = S > 0;
    if (!L->has_shared)
        return TW_OK;
    if ((st = tw_load_mat(ld, tw_load_name(ld, l, "mlp.shared_expert.gate_proj.weight"), S, H,
                          &L->sh_gate)) ||
        (st = tw_load_mat(ld, tw_load_name(ld, l, "mlp.shared_expert.up_proj.weight"), S, H,
                          &L->sh_up)) ||
        (st = tw_load_mat(ld, tw_load_name(ld, l, "mlp.shared_expert.down_proj.weight"), H, S,
                          &L->sh_down)) ||
        (st = tw_load_mat(ld, tw_load_name(ld, l, "mlp.shared_expert_gate.weight"), 1, H,
                          &L->sh_router)))
        return st;
    return TW_OK;
}

static tw_status load_layer(tw_loader *ld, int l)
{
    tw_model *m = ld->m;
    const tw_mconfig *c = &m->cfg;
    tw_layer *L = &m->layers[l];
    size_t H = c->hidden;
    bool p1 = c->family->norm_plus_one;
    tw_status st;
    L->mixer = c->mixer[l];
    L->ffn = c->ffn[l];
    if ((st = tw_load_vec(ld, tw_load_name(ld, l, "input_layernorm.weight"), H, p1, false,
                          &L->attn_norm)))
        return st;
    if (c->family->sandwich_norms) {
        if ((st = tw_load_vec(ld, tw_load_name(ld, l, "post_attention_layernorm.weight"), H, p1,
                              false, &L->post_attn_norm)) ||
            (st = tw_load_vec(ld, tw_load_name(ld, l, "pre_feedforward_layernorm.weight"), H, p1,
                              false, &L->ffn_norm)) ||
            (st = tw_load_vec(ld, tw_load_name(ld, l, "post_feedforward_layernorm.weight"), H, p1,
                              false, &L->post_ffn_norm)))
            return st;
    } else if ((st = tw_load_vec(ld, tw_load_name(ld, l, "post_attention_layernorm.weight"), H, p1,
                                 false, &L->ffn_norm))) {
        return st;
    }
    st = L->mixer == TW_MIXER_ATTENTION ? load_attention(ld, l, L) : load_deltanet(ld, l, L);
    if (st)
        return st;
    if (L->ffn == TW_FFN_MOE)
        return load_moe(ld, l, L);
    size_t F = c->ffn_dim;
    if ((st = tw_load_mat(ld, tw_load_name(ld, l, "mlp.gate_proj.weight"), F, H, &L->gate)) ||
        (st = tw_load_mat(ld, tw_load_name(ld, l, "mlp.up_proj.weight"), F, H, &L->up)) ||
        (st = tw_load_mat(ld, tw_load_name(ld, l, "mlp.down_proj.weight"), H, F, &L->down)))
        return st;
    return TW_OK;
}

static size_t max3(size_t a, size_t b, size_t c)
{
    size_t m = a > b ? a : b;
    return m > c ? m : c;
}

static tw_status alloc_scratch(tw_model *m, tw_err *err)
{
    const tw_mconfig *c = &m->cfg;
    tw_scratch *s = &m->s;
    size_t R = m->max_batch > m->max_chunk ? m->max_batch : m->max_chunk;
    size_t H = c->hidden, hd = c->head_dim;
    s->max_rows = R;
#define ALLOC(field, count)                                                                        \
    do {                                                                                           \
        if (!(s->field = tw_model_calloc(m, (count), sizeof *s->field)))                           \
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory for scratch");             \
    } while (0)
    ALLOC(x, R * H);
    ALLOC(xn, R * H);
    ALLOC(y, R * H);
    ALLOC(pos, R);
    ALLOC(row_seq, R);
    ALLOC(row_trail, R);
    ALLOC(row_base, R);
    ALLOC(group_start, R + 1);
    if (m->n_attn_layers) {
        ALLOC(q, R * c->n_heads * hd * (c->family->attn_gate ? 2 : 1));
        ALLOC(k, R * c->n_kv_heads * hd);
        ALLOC(v, R * c->n_kv_heads * hd);
        ALLOC(att, R * c->n_heads * hd);
    }
    if (m->n_dn_layers) {
        size_t vdim = (size_t)c->dn_v_heads * c->dn_v_dim;
        size_t conv_dim = tw_dn_conv_dim(c);
        ALLOC(qkv, R * conv_dim);
        ALLOC(qkv_conv, R * conv_dim);
        ALLOC(z, R * vdim);
        ALLOC(ba_b, R * c->dn_v_heads);
        ALLOC(ba_a, R * c->dn_v_heads);
        ALLOC(dn_out, R * vdim);
        s->dn_chunk_floats = tw_deltanet_chunk_floats(c->dn_k_dim, c->dn_v_dim);
        ALLOC(dn_chunk, s->dn_chunk_floats * c->dn_v_heads);
    }
    size_t F = max3(c->ffn_dim, c->moe_ffn_dim, c->shared_ffn_dim);
    ALLOC(f_gate, R * F);
    ALLOC(f_up, R * F);
    if (c->family->moe) {
        ALLOC(router, R * c->n_experts);
        ALLOC(sel, R * c->top_k);
        ALLOC(sel_w, R * c->top_k);
        ALLOC(e_rows, R);
        ALLOC(e_wt, R);
        ALLOC(e_x, R * H);
        ALLOC(e_out, R * H);
        ALLOC(sh_g, R);
    }
#undef ALLOC
    return TW_OK;
}

static void fill_info(tw_model *m)
{
    const tw_mconfig *c = &m->cfg;
    tw_model_info *in = &m->info;
    in->architecture = c->architecture;
    in->model_type = c->model_type;
    in->vocab_size = c->vocab;
    in->hidden = c->hidden;
    in->n_layers = c->n_layers;
    in->bos_id = c->bos;
    in->n_eos = c->n_eos;
    for (uint32_t i = 0; i < c->n_eos && i < TW_MODEL_MAX_EOS; i++)
        in->eos_ids[i] = c->eos[i];
    in->recurrent = m->n_dn_layers > 0;
    in->encoder = m->enc != NULL;
    in->pooling = c->pooling;
    uint64_t per_type[64] = {0};
    tw_wtensor t;
    for (size_t i = 0; tw_wsource_at(m->src, i, &t); i++) {
        in->n_params += t.n_elems;
        if ((unsigned)t.type < 64)
            per_type[t.type] += t.n_elems;
    }
    in->weight_type = TW_TYPE_F32;
    for (unsigned ty = 0; ty < 64; ty++)
        if (per_type[ty] > per_type[in->weight_type])
            in->weight_type = (tw_type)ty;
    if (m->quantized_to != TW_TYPE_F32)
        in->weight_type = m->quantized_to;
}

static tw_status build(tw_model *m, const tw_model_opts *opts, tw_err *err)
{
    tw_mconfig *c = &m->cfg;
    tw_status st;
    if ((st = tw_mconfig_parse(tw_wsource_config(m->src), c, err)))
        return st;
    if (c->head_dim > TW_MAX_HEAD_DIM || c->dn_v_dim > TW_MAX_HEAD_DIM)
        return tw_errorf(err, TW_UNIMPLEMENTED, "head dimension above %d", TW_MAX_HEAD_DIM);

    size_t max_ctx = opts && opts->max_context ? opts->max_context
                                               : (c->max_pos < 8192 ? c->max_pos : 8192);
    /* an encoder's positions are a learned table with nothing past its end:
     * a larger context asked of every model is this one's table */
    if (c->family->encoder && max_ctx > c->max_pos)
        max_ctx = c->max_pos;
    if (max_ctx > c->max_pos || max_ctx > UINT32_MAX)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "max_context %zu exceeds the model's max_position_embeddings %u",
                         max_ctx, c->max_pos);
    m->info.max_context = max_ctx;
    m->max_batch = opts && opts->max_batch ? opts->max_batch : 16;
    m->max_chunk = opts && opts->max_chunk ? opts->max_chunk : 256;
    if (m->max_batch > 4096 || m->max_chunk > 65536)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "max_batch / max_chunk too large");
    tw_kv_type kv_type = opts ? opts->kv_type : TW_KV_F32;
    if (kv_type != TW_KV_F32 && kv_type != TW_KV_F16)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "unknown K/V type %d", (int)kv_type);
    m->info.kv_type = kv_type;

    tw_loader ld = {.m = m, .prefix = "model.", .err = err};
    if (c->family->encoder) {
        if ((st = tw_encoder_build(&ld, max_ctx)))
            return st;
        if (opts && opts->quantize != TW_TYPE_F32 &&
            (st = tw_model_quantize_at_load(m, opts->quantize, err)))
            return st;
        fill_info(m);
        return TW_OK;
    }
    static const char *prefixes[] = {"model.", "model.language_model.", "language_model.model."};
    tw_wtensor t;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        ld.prefix = prefixes[i];
        if (tw_wsource_find(m->src, tw_load_name(&ld, -1, "embed_tokens.weight"), &t, NULL) !=
            TW_NOT_FOUND)
            break;
    }
    size_t H = c->hidden;
    if ((st = tw_load_mat(&ld, tw_load_name(&ld, -1, "embed_tokens.weight"), c->vocab, H,
                          &m->embed)) ||
        (st = tw_load_vec(&ld, tw_load_name(&ld, -1, "norm.weight"), H, c->family->norm_plus_one,
                          false, &m->final_norm)))
        return st;
    bool have_head;
    if ((st = tw_load_find(&ld, "lm_head.weight", true, &t, &have_head)))
        return st;
    if (have_head) {
        if ((st = tw_load_view(&ld, &t, 1, c->vocab, H, &m->lm_head)))
            return st;
    } else if (c->tied || tw_wsource_is_gguf(m->src)) {
        m->lm_head = m->embed;
    } else {
        return tw_errorf(err, TW_NOT_FOUND, "missing tensor lm_head.weight");
    }
    m->embed_scale = c->family->embed_scale ? (float)sqrt((double)H) : 1.0f;

    bool uses[TW_ROPE_KINDS] = {false, false};
    for (uint32_t l = 0; l < c->n_layers; l++)
        if (c->mixer[l] == TW_MIXER_ATTENTION)
            uses[c->sliding[l] ? 1 : 0] = true;
    float *freq_div = NULL;
    if (c->rope_freqs[0]) {
        size_t half = (size_t)((double)c->head_dim * c->rope[0].partial) / 2;
        if ((st = tw_wsource_find_raw(m->src, c->rope_freqs, &t, err)))
            return st == TW_NOT_FOUND ? tw_errorf(err, st, "missing tensor %s", c->rope_freqs)
                                      : st;
        if (t.n_elems != half || tw_type_row_bytes(t.type, half) != t.nbytes ||
            !(freq_div = tw_model_calloc(m, half, sizeof(float))))
            return tw_errorf(err, TW_INVALID_ARGUMENT, "tensor %s: expected %zu values", t.name,
                             half);
        tw_dequant_row(t.type, t.data, freq_div, half);
        for (size_t i = 0; i < half; i++)
            if (!(freq_div[i] > 0.0f))
                return tw_errorf(err, TW_INVALID_ARGUMENT, "tensor %s: non-positive divisor",
                                 t.name);
    }
    for (int k = 0; k < TW_ROPE_KINDS; k++) {
        if (uses[k] && (st = tw_rope_build(&m->ropes[k], &c->rope[k], c->head_dim, max_ctx,
                                           c->rope_adjacent, freq_div, err)))
            return st;
    }

    if (!(m->layers = tw_model_calloc(m, c->n_layers, sizeof *m->layers)))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    for (uint32_t l = 0; l < c->n_layers; l++) {
        if ((st = load_layer(&ld, (int)l)))
            return st;
    }
    if (m->n_dn_layers) {
        size_t conv_dim = tw_dn_conv_dim(c);
        m->dn_state_floats = (size_t)c->dn_v_heads * c->dn_k_dim * c->dn_v_dim;
        m->dn_conv_floats = (size_t)(c->dn_conv - 1) * conv_dim;
    }
    if (opts && opts->quantize != TW_TYPE_F32 &&
        (st = tw_model_quantize_at_load(m, opts->quantize, err)))
        return st;
    if ((st = alloc_scratch(m, err)) || (st = tw_model_pack_weights(m, err)))
        return st;
    tw_model_quantized_release(m, false);
    fill_info(m);
    return TW_OK;
}

tw_status tw_weights_placement(tw_weight_pages mode, bool thp, uint64_t file_bytes,
                               uint64_t mem_available, bool *huge, tw_err *err)
{
    *huge = false;
    if (mode == TW_WEIGHTS_MAP)
        return TW_OK;
    if (mode == TW_WEIGHTS_HUGE) {
        /* a private copy cannot be paged back to the file: refuse one that
         * does not fit rather than let the kernel kill the process */
        if (mem_available && file_bytes > mem_available)
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                             "weight-pages huge: the %.1f MiB file does not fit in the %.1f "
                             "MiB of available memory (use map)",
                             (double)file_bytes / 1048576.0, (double)mem_available / 1048576.0);
        *huge = true;
        return TW_OK;
    }
    /* auto: only with huge pages on offer, and only while the copy leaves
     * room; a model near the size of memory is better served by the
     * mapping, which the kernel can page */
    *huge = thp && (!mem_available || file_bytes <= mem_available / 2);
    return TW_OK;
}

/* Where the weights of the GGUF file at path go (HF directories always map). */
static tw_status weights_in_huge_pages(const char *path, tw_weight_pages mode, bool *huge,
                                       tw_err *err)
{
    *huge = false;
    struct stat sb;
    if (!path || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return TW_OK; /* a directory, or an error tw_wsource_open reports */
    uint64_t total, avail;
    tw_hw_meminfo(&total, &avail);
    bool thp = mode == TW_WEIGHTS_AUTO && tw_hw_thp_enabled();
    tw_status st = tw_weights_placement(mode, thp, (uint64_t)sb.st_size, avail, huge, err);
    if (!st && thp && !*huge)
        tw_info("weights of %s stay mapped from the file: %.1f MiB against %.1f MiB of "
                "available memory",
                path, (double)sb.st_size / 1048576.0, (double)avail / 1048576.0);
    return st;
}

tw_status tw_model_load(const char *path, const tw_model_opts *opts, tw_model **out,
                        tw_err *err)
{
    if (!out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "model load: out is NULL");
    *out = NULL;
    tw_model *m = calloc(1, sizeof *m);
    owned_list *o = calloc(1, sizeof *o);
    if (!m || !o) {
        free(m);
        free(o);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    }
    m->owned = o;
    bool huge = false;
    tw_status st = weights_in_huge_pages(path, opts ? opts->weight_pages : TW_WEIGHTS_AUTO,
                                         &huge, err);
    if (!st)
        st = tw_wsource_open(path, huge, &m->src, err);
    if (!st) {
        m->info.huge_pages = huge && tw_wsource_is_gguf(m->src);
        st = build(m, opts, err);
    }
    if (st) {
        tw_model_free(m);
        return path ? tw_error_wrap(err, st, "loading %s", path) : st;
    }
    *out = m;
    return TW_OK;
}

void tw_model_free(tw_model *m)
{
    if (!m)
        return;
    owned_list *o = m->owned;
    for (size_t i = 0; o && i < o->n; i++)
        free(o->p[i]);
    if (o)
        free(o->p);
    free(o);
    for (int k = 0; k < TW_ROPE_KINDS; k++)
        tw_rope_free(&m->ropes[k]);
    tw_model_unpack_weights(m);
    tw_model_quantized_release(m, true);
    tw_wsource_close(m->src);
    free(m);
}

const tw_model_info *tw_model_get_info(const tw_model *model)
{
    return model ? &model->info : NULL;
}
