/* The named shapes tw-mkmodel can write: the hyperparameters of real
 * checkpoints (as HF config.json objects) and the tensor list they imply. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mkmodel.h"

typedef enum family {
    FAM_LLAMA,
    FAM_QWEN2,
    FAM_QWEN35,
    FAM_QWEN35MOE,
} family;

/* Sizes of one shape; zero fields do not apply to the family. */
typedef struct shape {
    const char *name;
    const char *desc;
    family fam;
    uint32_t hidden, layers, heads, kv_heads, head_dim, ffn;
    double rope_theta, eps;
    uint32_t max_pos;
    bool tied;
    /* Qwen3.5 DeltaNet */
    uint32_t lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim, conv_k;
    /* MoE */
    uint32_t experts, top_k, moe_ffn, shared_ffn;
} shape;

static const shape shapes[] = {
    {"qwen2-0.5b", "Qwen2/2.5-0.5B: hidden 896, 24 layers, 14/2 heads of 64, FFN 4864, qkv bias, "
                   "tied",
     FAM_QWEN2, 896, 24, 14, 2, 64, 4864, 1e6, 1e-6, 32768, true, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"llama-1b", "Llama-3.2-1B: hidden 2048, 16 layers, 32/8 heads of 64, FFN 8192, tied",
     FAM_LLAMA, 2048, 16, 32, 8, 64, 8192, 5e5, 1e-5, 131072, true, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"qwen3.5-0.8b", "Qwen3.5-0.8B-like hybrid: hidden 1024, 24 layers (every 4th gated full "
                     "attention, 8/2 heads of 256; others Gated DeltaNet 16/16 heads of 128), "
                     "FFN 3584, tied",
     FAM_QWEN35, 1024, 24, 8, 2, 256, 3584, 1e7, 1e-6, 262144, true, 16, 16, 128, 128, 4, 0, 0,
     0, 0},
    {"qwen3.5-moe-small", "small Qwen3.5-MoE hybrid: hidden 1024, 16 layers like qwen3.5-0.8b, "
                          "32 experts (top 4) of FFN 384 + shared expert 512, untied head",
     FAM_QWEN35MOE, 1024, 16, 8, 2, 256, 3584, 1e7, 1e-6, 262144, false, 16, 16, 128, 128, 4,
     32, 4, 384, 512},
};

void mk_shapes_print(void *file)
{
    FILE *f = file;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        fprintf(f, "  %-18s %s\n", shapes[i].name, shapes[i].desc);
}

/* Test-sized variant: dimensions that are still whole K-quant blocks (256)
 * so every weight type is exercised, with the family's layer pattern. */
static void shrink(shape *s)
{
    s->hidden = 256;
    s->layers = 4;
    s->heads = 4;
    s->kv_heads = 2;
    s->head_dim = 64;
    s->ffn = 512;
    s->max_pos = 4096;
    if (s->lin_k_heads) {
        s->lin_k_heads = 2;
        s->lin_v_heads = 4;
        s->lin_k_dim = 64;
        s->lin_v_dim = 64;
    }
    if (s->experts) {
        s->experts = 4;
        s->top_k = 2;
        s->moe_ffn = 256;
        s->shared_ffn = 256;
    }
}

static const char *const arch_names[] = {"LlamaForCausalLM", "Qwen2ForCausalLM",
                                         "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM"};
static const char *const model_types[] = {"llama", "qwen2", "qwen3_5_text", "qwen3_5_moe_text"};

static int set(json_t *o, const char *key, json_t *v)
{
    return v ? json_object_set_new(o, key, v) : -1;
}

tw_status mk_shape_config(const char *name, uint64_t vocab, bool tiny, uint32_t layers,
                          json_t **out, tw_err *err)
{
    const shape *found = NULL;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (strcmp(shapes[i].name, name) == 0)
            found = &shapes[i];
    if (!found)
        return tw_errorf(err, TW_NOT_FOUND, "unknown shape '%s' (--list shows the shapes)", name);
    if (vocab == 0 || vocab > (1u << 24))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "vocabulary size %llu out of range",
                         (unsigned long long)vocab);
    shape s = *found;
    if (tiny)
        shrink(&s);
    if (layers) {
        if (layers > 512)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "--layers %u: at most 512", layers);
        s.layers = layers;
    }
    json_t *c = json_object();
    json_t *types = json_array();
    int bad = !c || !types;
    for (uint32_t l = 0; l < s.layers && !bad; l++) {
        bool full = s.fam != FAM_QWEN35 && s.fam != FAM_QWEN35MOE ? true : (l % 4) == 3;
        bad |= json_array_append_new(types, json_string(full ? "full_attention"
                                                             : "linear_attention"));
    }
    bad |= set(c, "architectures", json_pack("[s]", arch_names[s.fam]));
    bad |= set(c, "model_type", json_string(model_types[s.fam]));
    bad |= set(c, "vocab_size", json_integer((json_int_t)vocab));
    bad |= set(c, "hidden_size", json_integer(s.hidden));
    bad |= set(c, "intermediate_size", json_integer(s.ffn));
    bad |= set(c, "num_hidden_layers", json_integer(s.layers));
    bad |= set(c, "num_attention_heads", json_integer(s.heads));
    bad |= set(c, "num_key_value_heads", json_integer(s.kv_heads));
    bad |= set(c, "head_dim", json_integer(s.head_dim));
    bad |= set(c, "hidden_act", json_string("silu"));
    bad |= set(c, "max_position_embeddings", json_integer(s.max_pos));
    bad |= set(c, "rms_norm_eps", json_real(s.eps));
    bad |= set(c, "tie_word_embeddings", json_boolean(s.tied));
    bad |= set(c, "layer_types", types);
    types = NULL;
    if (s.fam == FAM_QWEN35 || s.fam == FAM_QWEN35MOE) {
        bad |= set(c, "rope_parameters",
                   json_pack("{s:s, s:f, s:f}", "rope_type", "default", "rope_theta",
                             s.rope_theta, "partial_rotary_factor", 0.25));
        bad |= set(c, "partial_rotary_factor", json_real(0.25));
        bad |= set(c, "full_attention_interval", json_integer(4));
        bad |= set(c, "linear_conv_kernel_dim", json_integer(s.conv_k));
        bad |= set(c, "linear_key_head_dim", json_integer(s.lin_k_dim));
        bad |= set(c, "linear_value_head_dim", json_integer(s.lin_v_dim));
        bad |= set(c, "linear_num_key_heads", json_integer(s.lin_k_heads));
        bad |= set(c, "linear_num_value_heads", json_integer(s.lin_v_heads));
        bad |= set(c, "attention_bias", json_false());
    } else {
        bad |= set(c, "rope_parameters", json_pack("{s:s, s:f}", "rope_type", "default",
                                                   "rope_theta", s.rope_theta));
    }
    if (s.fam == FAM_QWEN35MOE) {
        bad |= set(c, "num_experts", json_integer(s.experts));
        bad |= set(c, "num_experts_per_tok", json_integer(s.top_k));
        bad |= set(c, "moe_intermediate_size", json_integer(s.moe_ffn));
        bad |= set(c, "shared_expert_intermediate_size", json_integer(s.shared_ffn));
        bad |= set(c, "norm_topk_prob", json_true());
        bad |= set(c, "decoder_sparse_step", json_integer(1));
        bad |= set(c, "mlp_only_layers", json_array());
    }
    json_decref(types);
    if (bad) {
        json_decref(c);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory building the config");
    }
    *out = c;
    return TW_OK;
}

/* ---- tensor list ------------------------------------------------------ */

typedef struct tlist {
    mk_hf_tensor *v;
    size_t n, cap;
    bool oom;
} tlist;

static void add(tlist *t, mk_init init, uint32_t n_dims, uint64_t d0, uint64_t d1, uint64_t d2,
                const char *fmt, int layer, const char *suffix)
{
    if (t->oom)
        return;
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        mk_hf_tensor *v = realloc(t->v, cap * sizeof *v);
        if (!v) {
            t->oom = true;
            return;
        }
        t->v = v;
        t->cap = cap;
    }
    mk_hf_tensor *x = &t->v[t->n++];
    memset(x, 0, sizeof *x);
    char prefix[96];
    snprintf(prefix, sizeof prefix, fmt, layer);
    snprintf(x->name, sizeof x->name, "%s%s", prefix, suffix);
    x->n_dims = n_dims;
    x->shape[0] = d0;
    x->shape[1] = d1;
    x->shape[2] = d2;
    x->init = init;
}

static uint64_t geti(const json_t *c, const char *key)
{
    json_int_t v = json_integer_value(json_object_get(c, key));
    return v > 0 ? (uint64_t)v : 0;
}

tw_status mk_hf_tensors(const json_t *c, mk_hf_tensor **out, size_t *n, tw_err *err)
{
    const char *mt = json_string_value(json_object_get(c, "model_type"));
    if (!mt)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "config has no model_type");
    bool qwen2 = strcmp(mt, "qwen2") == 0;
    bool hybrid = strncmp(mt, "qwen3_5", 7) == 0;
    bool moe = strcmp(mt, "qwen3_5_moe_text") == 0;
    uint64_t V = geti(c, "vocab_size"), H = geti(c, "hidden_size"), F = geti(c, "intermediate_size");
    uint64_t L = geti(c, "num_hidden_layers"), nh = geti(c, "num_attention_heads");
    uint64_t nkv = geti(c, "num_key_value_heads"), hd = geti(c, "head_dim");
    uint64_t lkh = geti(c, "linear_num_key_heads"), lvh = geti(c, "linear_num_value_heads");
    uint64_t lkd = geti(c, "linear_key_head_dim"), lvd = geti(c, "linear_value_head_dim");
    uint64_t ck = geti(c, "linear_conv_kernel_dim"), E = geti(c, "num_experts");
    uint64_t mf = geti(c, "moe_intermediate_size"), sf = geti(c, "shared_expert_intermediate_size");
    bool tied = json_is_true(json_object_get(c, "tie_word_embeddings"));
    const json_t *types = json_object_get(c, "layer_types");

    tlist t = {0};
    const char *lp = "model.layers.%d.";
    add(&t, MK_INIT_NORMAL, 2, V, H, 0, "model.embed_tokens.weight", 0, "");
    for (uint64_t l = 0; l < L; l++) {
        int li = (int)l;
        const char *lt = json_string_value(json_array_get(types, l));
        bool linear = hybrid && lt && strcmp(lt, "linear_attention") == 0;
        add(&t, MK_INIT_ONES, 1, H, 0, 0, lp, li, "input_layernorm.weight");
        if (linear) {
            uint64_t conv = 2 * lkh * lkd + lvh * lvd;
            add(&t, MK_INIT_NORMAL, 2, conv, H, 0, lp, li, "linear_attn.in_proj_qkv.weight");
            add(&t, MK_INIT_NORMAL, 2, lvh * lvd, H, 0, lp, li, "linear_attn.in_proj_z.weight");
            add(&t, MK_INIT_NORMAL, 2, lvh, H, 0, lp, li, "linear_attn.in_proj_a.weight");
            add(&t, MK_INIT_NORMAL, 2, lvh, H, 0, lp, li, "linear_attn.in_proj_b.weight");
            add(&t, MK_INIT_DECAY, 1, lvh, 0, 0, lp, li, "linear_attn.A_log");
            add(&t, MK_INIT_DT_BIAS, 1, lvh, 0, 0, lp, li, "linear_attn.dt_bias");
            add(&t, MK_INIT_CONV, 3, conv, 1, ck, lp, li, "linear_attn.conv1d.weight");
            add(&t, MK_INIT_ONES, 1, lvd, 0, 0, lp, li, "linear_attn.norm.weight");
            add(&t, MK_INIT_NORMAL, 2, H, lvh * lvd, 0, lp, li, "linear_attn.out_proj.weight");
        } else {
            /* Qwen3.5's gated attention projects a gate next to each query */
            uint64_t q_rows = nh * hd * (hybrid ? 2 : 1);
            add(&t, MK_INIT_NORMAL, 2, q_rows, H, 0, lp, li, "self_attn.q_proj.weight");
            add(&t, MK_INIT_NORMAL, 2, nkv * hd, H, 0, lp, li, "self_attn.k_proj.weight");
            add(&t, MK_INIT_NORMAL, 2, nkv * hd, H, 0, lp, li, "self_attn.v_proj.weight");
            add(&t, MK_INIT_NORMAL, 2, H, nh * hd, 0, lp, li, "self_attn.o_proj.weight");
            if (qwen2) {
                add(&t, MK_INIT_NORMAL, 1, nh * hd, 0, 0, lp, li, "self_attn.q_proj.bias");
                add(&t, MK_INIT_NORMAL, 1, nkv * hd, 0, 0, lp, li, "self_attn.k_proj.bias");
                add(&t, MK_INIT_NORMAL, 1, nkv * hd, 0, 0, lp, li, "self_attn.v_proj.bias");
            }
            if (hybrid) {
                add(&t, MK_INIT_ONES, 1, hd, 0, 0, lp, li, "self_attn.q_norm.weight");
                add(&t, MK_INIT_ONES, 1, hd, 0, 0, lp, li, "self_attn.k_norm.weight");
            }
        }
        add(&t, MK_INIT_ONES, 1, H, 0, 0, lp, li, "post_attention_layernorm.weight");
        if (moe) {
            add(&t, MK_INIT_NORMAL, 2, E, H, 0, lp, li, "mlp.gate.weight");
            add(&t, MK_INIT_NORMAL, 3, E, 2 * mf, H, lp, li, "mlp.experts.gate_up_proj");
            add(&t, MK_INIT_NORMAL, 3, E, H, mf, lp, li, "mlp.experts.down_proj");
            add(&t, MK_INIT_NORMAL, 2, sf, H, 0, lp, li, "mlp.shared_expert.gate_proj.weight");
            add(&t, MK_INIT_NORMAL, 2, sf, H, 0, lp, li, "mlp.shared_expert.up_proj.weight");
            add(&t, MK_INIT_NORMAL, 2, H, sf, 0, lp, li, "mlp.shared_expert.down_proj.weight");
            add(&t, MK_INIT_NORMAL, 2, 1, H, 0, lp, li, "mlp.shared_expert_gate.weight");
        } else {
            add(&t, MK_INIT_NORMAL, 2, F, H, 0, lp, li, "mlp.gate_proj.weight");
            add(&t, MK_INIT_NORMAL, 2, F, H, 0, lp, li, "mlp.up_proj.weight");
            add(&t, MK_INIT_NORMAL, 2, H, F, 0, lp, li, "mlp.down_proj.weight");
        }
    }
    add(&t, MK_INIT_ONES, 1, H, 0, 0, "model.norm.weight", 0, "");
    if (!tied)
        add(&t, MK_INIT_NORMAL, 2, V, H, 0, "lm_head.weight", 0, "");
    if (t.oom) {
        free(t.v);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory listing tensors");
    }
    *out = t.v;
    *n = t.n;
    return TW_OK;
}
