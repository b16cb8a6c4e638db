/* HF <-> GGUF tensor names and value transforms, per family. The tables
 * follow llama.cpp's tensor_mapping.py and the per-family modify_tensors()
 * of its converter. */
#include "tw/gguf_arch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    tw_arch arch;
    const char *gguf;
} arch_names[] = {
    {TW_ARCH_LLAMA, "llama"},   {TW_ARCH_QWEN2, "qwen2"},   {TW_ARCH_QWEN3, "qwen3"},
    {TW_ARCH_GEMMA3, "gemma3"}, {TW_ARCH_QWEN35, "qwen35"}, {TW_ARCH_QWEN35MOE, "qwen35moe"},
    {TW_ARCH_BERT, "bert"},
};

const char *tw_arch_gguf_name(tw_arch arch)
{
    for (size_t i = 0; i < sizeof arch_names / sizeof arch_names[0]; i++)
        if (arch_names[i].arch == arch)
            return arch_names[i].gguf;
    return NULL;
}

tw_arch tw_arch_from_gguf_name(const char *name)
{
    for (size_t i = 0; name && i < sizeof arch_names / sizeof arch_names[0]; i++)
        if (strcmp(arch_names[i].gguf, name) == 0)
            return arch_names[i].arch;
    return TW_ARCH_UNKNOWN;
}

/* ---- HF config ------------------------------------------------------- */

static const struct {
    const char *hf;
    tw_arch arch;
} hf_names[] = {
    {"LlamaForCausalLM", TW_ARCH_LLAMA},
    {"MistralForCausalLM", TW_ARCH_LLAMA},
    {"llama", TW_ARCH_LLAMA},
    {"mistral", TW_ARCH_LLAMA},
    {"Qwen2ForCausalLM", TW_ARCH_QWEN2},
    {"qwen2", TW_ARCH_QWEN2},
    {"Qwen3ForCausalLM", TW_ARCH_QWEN3},
    {"qwen3", TW_ARCH_QWEN3},
    {"Gemma3ForCausalLM", TW_ARCH_GEMMA3},
    {"Gemma3ForConditionalGeneration", TW_ARCH_GEMMA3},
    {"gemma3_text", TW_ARCH_GEMMA3},
    {"gemma3", TW_ARCH_GEMMA3},
    {"Qwen3_5ForCausalLM", TW_ARCH_QWEN35},
    {"Qwen3_5ForConditionalGeneration", TW_ARCH_QWEN35},
    {"qwen3_5", TW_ARCH_QWEN35},
    {"qwen3_5_text", TW_ARCH_QWEN35},
    {"Qwen3_5MoeForCausalLM", TW_ARCH_QWEN35MOE},
    {"Qwen3_5MoeForConditionalGeneration", TW_ARCH_QWEN35MOE},
    {"qwen3_5_moe", TW_ARCH_QWEN35MOE},
    {"qwen3_5_moe_text", TW_ARCH_QWEN35MOE},
    {"BertModel", TW_ARCH_BERT},
    {"bert", TW_ARCH_BERT},
};

static tw_arch arch_from_hf_string(const char *s)
{
    for (size_t i = 0; s && i < sizeof hf_names / sizeof hf_names[0]; i++)
        if (strcmp(hf_names[i].hf, s) == 0)
            return hf_names[i].arch;
    return TW_ARCH_UNKNOWN;
}

/* A key of the config or of its text_config. */
static const json_t *cfg_get(const json_t *c, const char *key)
{
    const json_t *v = json_object_get(c, key);
    if (v && !json_is_null(v))
        return v;
    const json_t *tc = json_object_get(c, "text_config");
    v = json_is_object(tc) ? json_object_get(tc, key) : NULL;
    return v && !json_is_null(v) ? v : NULL;
}

static tw_status cfg_u32(const json_t *c, const char *key, bool required, uint32_t def,
                         uint32_t *out, tw_err *err)
{
    const json_t *v = cfg_get(c, key);
    if (!v) {
        if (required)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "config: missing '%s'", key);
        *out = def;
        return TW_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "config: '%s' is not a valid count", key);
    *out = (uint32_t)json_integer_value(v);
    return TW_OK;
}

tw_status tw_arch_params_from_hf(const json_t *config, tw_arch_params *p, tw_err *err)
{
    memset(p, 0, sizeof *p);
    if (!json_is_object(config))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "config: not a JSON object");
    const json_t *archs = json_object_get(config, "architectures");
    const char *an = json_is_array(archs) ? json_string_value(json_array_get(archs, 0)) : NULL;
    const char *mt = json_string_value(json_object_get(config, "model_type"));
    p->arch = arch_from_hf_string(an);
    if (p->arch == TW_ARCH_UNKNOWN)
        p->arch = arch_from_hf_string(mt);
    if (p->arch == TW_ARCH_UNKNOWN)
        return tw_errorf(err, TW_UNIMPLEMENTED,
                         "config: model family '%s' (model_type '%s') is not supported",
                         an ? an : "?", mt ? mt : "?");
    tw_status st;
    if ((st = cfg_u32(config, "num_hidden_layers", true, 0, &p->n_layers, err)) ||
        (st = cfg_u32(config, "num_attention_heads", true, 0, &p->n_head, err)))
        return st;
    if ((st = cfg_u32(config, "num_key_value_heads", false, p->n_head, &p->n_head_kv, err)))
        return st;
    uint32_t hidden;
    if ((st = cfg_u32(config, "hidden_size", true, 0, &hidden, err)))
        return st;
    if (p->n_head == 0 || p->n_head_kv == 0 || p->n_layers == 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "config: zero layers or heads");
    if ((st = cfg_u32(config, "head_dim", false, hidden / p->n_head, &p->head_dim, err)))
        return st;
    if (p->arch == TW_ARCH_QWEN35 || p->arch == TW_ARCH_QWEN35MOE) {
        if ((st = cfg_u32(config, "linear_num_key_heads", true, 0, &p->lin_k_heads, err)) ||
            (st = cfg_u32(config, "linear_num_value_heads", true, 0, &p->lin_v_heads, err)) ||
            (st = cfg_u32(config, "linear_key_head_dim", true, 0, &p->lin_k_dim, err)) ||
            (st = cfg_u32(config, "linear_value_head_dim", true, 0, &p->lin_v_dim, err)))
            return st;
        if (p->lin_k_heads == 0 || p->lin_v_heads % p->lin_k_heads != 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "config: linear_num_value_heads (%u) is not a multiple of "
                             "linear_num_key_heads (%u)",
                             p->lin_v_heads, p->lin_k_heads);
    }
    if (p->arch == TW_ARCH_QWEN35MOE &&
        (st = cfg_u32(config, "num_experts", true, 0, &p->n_experts, err)))
        return st;
    return TW_OK;
}

/* ---- name tables ------------------------------------------------------ */

enum {
    A_LLAMA = 1 << TW_ARCH_LLAMA,
    A_QWEN2 = 1 << TW_ARCH_QWEN2,
    A_QWEN3 = 1 << TW_ARCH_QWEN3,
    A_GEMMA3 = 1 << TW_ARCH_GEMMA3,
    A_QWEN35 = 1 << TW_ARCH_QWEN35,
    A_QWEN35MOE = 1 << TW_ARCH_QWEN35MOE,
    A_BERT = 1 << TW_ARCH_BERT,
    A_DENSE = A_LLAMA | A_QWEN2 | A_QWEN3,
    A_Q35 = A_QWEN35 | A_QWEN35MOE,
    A_ALL = A_DENSE | A_GEMMA3 | A_Q35,
};

/* How a DeltaNet tensor's value heads are laid out. */
enum { VH_NONE, VH_ROWS_V, VH_ROWS_1, VH_ROWS_QKV, VH_COLS_V };

/* How a llama Q/K tensor is permuted. */
enum { RP_NONE, RP_Q, RP_K };

typedef struct rule {
    unsigned archs;
    const char *gguf; /* without "blk.N." for block tensors */
    const char *hf;   /* without "model.layers.N." for block tensors */
    uint32_t xform;
    uint8_t vh;
    uint8_t rp;
} rule;

static const rule global_rules[] = {
    {A_ALL, "token_embd.weight", "model.embed_tokens.weight", 0, 0, 0},
    {A_DENSE, "output_norm.weight", "model.norm.weight", 0, 0, 0},
    {A_GEMMA3 | A_Q35, "output_norm.weight", "model.norm.weight", TW_XF_PLUS_ONE, 0, 0},
    {A_ALL, "output.weight", "lm_head.weight", 0, 0, 0},
    {A_LLAMA, "rope_freqs.weight", "", 0, 0, 0},
    {A_BERT, "token_embd.weight", "embeddings.word_embeddings.weight", 0, 0, 0},
    {A_BERT, "position_embd.weight", "embeddings.position_embeddings.weight", 0, 0, 0},
    {A_BERT, "token_types.weight", "embeddings.token_type_embeddings.weight", 0, 0, 0},
    {A_BERT, "token_embd_norm.weight", "embeddings.LayerNorm.weight", 0, 0, 0},
    {A_BERT, "token_embd_norm.bias", "embeddings.LayerNorm.bias", 0, 0, 0},
    /* checkpoints converted from TensorFlow name a LayerNorm's gain and bias so */
    {A_BERT, "token_embd_norm.weight", "embeddings.LayerNorm.gamma", 0, 0, 0},
    {A_BERT, "token_embd_norm.bias", "embeddings.LayerNorm.beta", 0, 0, 0},
};

#define PO TW_XF_PLUS_ONE
static const rule block_rules[] = {
    {A_DENSE, "attn_norm.weight", "input_layernorm.weight", 0, 0, 0},
    {A_GEMMA3 | A_Q35, "attn_norm.weight", "input_layernorm.weight", PO, 0, 0},
    {A_DENSE, "ffn_norm.weight", "post_attention_layernorm.weight", 0, 0, 0},
    {A_GEMMA3 | A_Q35, "post_attention_norm.weight", "post_attention_layernorm.weight", PO, 0, 0},
    {A_GEMMA3, "ffn_norm.weight", "pre_feedforward_layernorm.weight", PO, 0, 0},
    {A_GEMMA3, "post_ffw_norm.weight", "post_feedforward_layernorm.weight", PO, 0, 0},
    {A_LLAMA, "attn_q.weight", "self_attn.q_proj.weight", TW_XF_ROPE_PERMUTE, 0, RP_Q},
    {A_LLAMA, "attn_q.bias", "self_attn.q_proj.bias", TW_XF_ROPE_PERMUTE, 0, RP_Q},
    {A_LLAMA, "attn_k.weight", "self_attn.k_proj.weight", TW_XF_ROPE_PERMUTE, 0, RP_K},
    {A_LLAMA, "attn_k.bias", "self_attn.k_proj.bias", TW_XF_ROPE_PERMUTE, 0, RP_K},
    {A_ALL & ~A_LLAMA, "attn_q.weight", "self_attn.q_proj.weight", 0, 0, 0},
    {A_ALL & ~A_LLAMA, "attn_q.bias", "self_attn.q_proj.bias", 0, 0, 0},
    {A_ALL & ~A_LLAMA, "attn_k.weight", "self_attn.k_proj.weight", 0, 0, 0},
    {A_ALL & ~A_LLAMA, "attn_k.bias", "self_attn.k_proj.bias", 0, 0, 0},
    {A_ALL, "attn_v.weight", "self_attn.v_proj.weight", 0, 0, 0},
    {A_ALL, "attn_v.bias", "self_attn.v_proj.bias", 0, 0, 0},
    {A_ALL, "attn_output.weight", "self_attn.o_proj.weight", 0, 0, 0},
    {A_ALL, "attn_output.bias", "self_attn.o_proj.bias", 0, 0, 0},
    {A_QWEN3, "attn_q_norm.weight", "self_attn.q_norm.weight", 0, 0, 0},
    {A_QWEN3, "attn_k_norm.weight", "self_attn.k_norm.weight", 0, 0, 0},
    {A_GEMMA3 | A_Q35, "attn_q_norm.weight", "self_attn.q_norm.weight", PO, 0, 0},
    {A_GEMMA3 | A_Q35, "attn_k_norm.weight", "self_attn.k_norm.weight", PO, 0, 0},
    {A_ALL, "ffn_gate.weight", "mlp.gate_proj.weight", 0, 0, 0},
    {A_ALL, "ffn_up.weight", "mlp.up_proj.weight", 0, 0, 0},
    {A_ALL, "ffn_down.weight", "mlp.down_proj.weight", 0, 0, 0},
    {A_LLAMA, "ffn_gate.bias", "mlp.gate_proj.bias", 0, 0, 0},
    {A_LLAMA, "ffn_up.bias", "mlp.up_proj.bias", 0, 0, 0},
    {A_LLAMA, "ffn_down.bias", "mlp.down_proj.bias", 0, 0, 0},
    /* Gated DeltaNet */
    {A_Q35, "attn_qkv.weight", "linear_attn.in_proj_qkv.weight", 0, VH_ROWS_QKV, 0},
    {A_Q35, "attn_gate.weight", "linear_attn.in_proj_z.weight", 0, VH_ROWS_V, 0},
    {A_Q35, "ssm_alpha.weight", "linear_attn.in_proj_a.weight", 0, VH_ROWS_1, 0},
    {A_Q35, "ssm_beta.weight", "linear_attn.in_proj_b.weight", 0, VH_ROWS_1, 0},
    {A_Q35, "ssm_a", "linear_attn.A_log", TW_XF_NEG_EXP, VH_ROWS_1, 0},
    {A_Q35, "ssm_dt.bias", "linear_attn.dt_bias", 0, VH_ROWS_1, 0},
    {A_Q35, "ssm_conv1d.weight", "linear_attn.conv1d.weight", TW_XF_SQUEEZE, VH_ROWS_QKV, 0},
    {A_Q35, "ssm_norm.weight", "linear_attn.norm.weight", 0, 0, 0},
    {A_Q35, "ssm_out.weight", "linear_attn.out_proj.weight", 0, VH_COLS_V, 0},
    /* sparse MoE with a gated shared expert */
    {A_QWEN35MOE, "ffn_gate_inp.weight", "mlp.gate.weight", 0, 0, 0},
    {A_QWEN35MOE, "ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight", 0, 0, 0},
    {A_QWEN35MOE, "ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight", 0, 0, 0},
    {A_QWEN35MOE, "ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight", 0, 0, 0},
    {A_QWEN35MOE, "ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight", 0, 0, 0},
    {A_QWEN35MOE, "ffn_gate_exps.weight", "mlp.experts.gate_up_proj", TW_XF_GATE_HALF, 0, 0},
    {A_QWEN35MOE, "ffn_up_exps.weight", "mlp.experts.gate_up_proj", TW_XF_UP_HALF, 0, 0},
    {A_QWEN35MOE, "ffn_down_exps.weight", "mlp.experts.down_proj", 0, 0, 0},
    /* BERT: post-norm blocks, a bias on every projection */
    {A_BERT, "attn_q.weight", "attention.self.query.weight", 0, 0, 0},
    {A_BERT, "attn_q.bias", "attention.self.query.bias", 0, 0, 0},
    {A_BERT, "attn_k.weight", "attention.self.key.weight", 0, 0, 0},
    {A_BERT, "attn_k.bias", "attention.self.key.bias", 0, 0, 0},
    {A_BERT, "attn_v.weight", "attention.self.value.weight", 0, 0, 0},
    {A_BERT, "attn_v.bias", "attention.self.value.bias", 0, 0, 0},
    {A_BERT, "attn_output.weight", "attention.output.dense.weight", 0, 0, 0},
    {A_BERT, "attn_output.bias", "attention.output.dense.bias", 0, 0, 0},
    {A_BERT, "attn_output_norm.weight", "attention.output.LayerNorm.weight", 0, 0, 0},
    {A_BERT, "attn_output_norm.bias", "attention.output.LayerNorm.bias", 0, 0, 0},
    {A_BERT, "ffn_up.weight", "intermediate.dense.weight", 0, 0, 0},
    {A_BERT, "ffn_up.bias", "intermediate.dense.bias", 0, 0, 0},
    {A_BERT, "ffn_down.weight", "output.dense.weight", 0, 0, 0},
    {A_BERT, "ffn_down.bias", "output.dense.bias", 0, 0, 0},
    {A_BERT, "layer_output_norm.weight", "output.LayerNorm.weight", 0, 0, 0},
    {A_BERT, "layer_output_norm.bias", "output.LayerNorm.bias", 0, 0, 0},
    {A_BERT, "attn_output_norm.weight", "attention.output.LayerNorm.gamma", 0, 0, 0},
    {A_BERT, "attn_output_norm.bias", "attention.output.LayerNorm.beta", 0, 0, 0},
    {A_BERT, "layer_output_norm.weight", "output.LayerNorm.gamma", 0, 0, 0},
    {A_BERT, "layer_output_norm.bias", "output.LayerNorm.beta", 0, 0, 0},
};
#undef PO

#define N_GLOBAL (sizeof global_rules / sizeof global_rules[0])
#define N_BLOCK (sizeof block_rules / sizeof block_rules[0])

/* Parses "<prefix><N>.<rest>"; returns rest or NULL. */
static const char *split_block(const char *name, const char *prefix, uint32_t n_layers,
                               uint32_t *bid)
{
    size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl) != 0)
        return NULL;
    const char *p = name + pl;
    uint64_t v = 0;
    const char *q = p;
    while (*q >= '0' && *q <= '9' && q - p < 10)
        v = v * 10 + (uint64_t)(*q++ - '0');
    if (q == p || *q != '.' || (q - p > 1 && *p == '0') || v >= n_layers)
        return NULL;
    *bid = (uint32_t)v;
    return q + 1;
}

/* Where an HF checkpoint of the family keeps its blocks. */
static const char *hf_block_prefix(const tw_arch_params *p)
{
    return p->arch == TW_ARCH_BERT ? "encoder.layer." : "model.layers.";
}

static void fill_map(const tw_arch_params *p, const rule *r, uint32_t bid, bool block,
                     tw_gguf_name_map *m)
{
    memset(m, 0, sizeof *m);
    if (block) {
        snprintf(m->gguf_name, sizeof m->gguf_name, "blk.%u.%s", bid, r->gguf);
        snprintf(m->hf_name, sizeof m->hf_name, "%s%u.%s", hf_block_prefix(p), bid, r->hf);
    } else {
        snprintf(m->gguf_name, sizeof m->gguf_name, "%s", r->gguf);
        snprintf(m->hf_name, sizeof m->hf_name, "%s", r->hf);
    }
    m->xform = r->xform;
    if (r->rp != RP_NONE)
        m->rope_heads = r->rp == RP_Q ? p->n_head : p->n_head_kv;
    /* llama.cpp reorders value heads only when they are grouped, i.e. when
     * there are fewer key heads than value heads. */
    if (r->vh != VH_NONE && p->lin_k_heads && p->lin_k_heads != p->lin_v_heads) {
        m->xform |= r->vh == VH_COLS_V ? TW_XF_VHEAD_COLS : TW_XF_VHEAD_ROWS;
        m->vhead_unit = r->vh == VH_ROWS_1 ? 1 : p->lin_v_dim;
        m->vhead_start = r->vh == VH_ROWS_QKV ? 2ull * p->lin_k_heads * p->lin_k_dim : 0;
        m->vhead_nk = p->lin_k_heads;
        m->vhead_nv = p->lin_v_heads;
    }
}

static const char *strip_hf_prefix(const char *hf_name, char *buf, size_t cap)
{
    /* Multimodal Qwen3.5 / Gemma 3 checkpoints nest the text model. */
    static const char *const prefixes[] = {"model.language_model.", "language_model.model."};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        size_t pl = strlen(prefixes[i]);
        if (strncmp(hf_name, prefixes[i], pl) == 0) {
            snprintf(buf, cap, "model.%s", hf_name + pl);
            return buf;
        }
    }
    if (strcmp(hf_name, "language_model.lm_head.weight") == 0)
        return "lm_head.weight";
    /* a BERT saved from a task head (BertForMaskedLM, ...) */
    if (strncmp(hf_name, "bert.", 5) == 0)
        return hf_name + 5;
    return hf_name;
}

tw_status tw_gguf_name_from_hf(const tw_arch_params *p, const char *hf_name,
                               tw_gguf_name_map out[2], size_t *n, tw_err *err)
{
    *n = 0;
    if (!hf_name)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf map: NULL tensor name");
    char buf[256];
    const char *name = strip_hf_prefix(hf_name, buf, sizeof buf);
    unsigned mask = 1u << p->arch;
    uint32_t bid;
    const char *rest = split_block(name, hf_block_prefix(p), p->n_layers, &bid);
    const rule *rules = rest ? block_rules : global_rules;
    size_t nr = rest ? N_BLOCK : N_GLOBAL;
    const char *key = rest ? rest : name;
    for (size_t i = 0; i < nr && *n < 2; i++) {
        if (!(rules[i].archs & mask) || !*rules[i].hf || strcmp(rules[i].hf, key) != 0)
            continue;
        fill_map(p, &rules[i], bid, rest != NULL, &out[(*n)++]);
    }
    if (*n == 0)
        return tw_errorf(err, TW_NOT_FOUND, "gguf map: no %s tensor corresponds to '%s'",
                         tw_arch_gguf_name(p->arch) ? tw_arch_gguf_name(p->arch) : "?", hf_name);
    return TW_OK;
}

tw_status tw_gguf_name_to_hf(const tw_arch_params *p, const char *gguf_name,
                             tw_gguf_name_map *out, tw_err *err)
{
    if (!gguf_name)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf map: NULL tensor name");
    unsigned mask = 1u << p->arch;
    uint32_t bid;
    const char *rest = split_block(gguf_name, "blk.", p->n_layers, &bid);
    const rule *rules = rest ? block_rules : global_rules;
    size_t nr = rest ? N_BLOCK : N_GLOBAL;
    const char *key = rest ? rest : gguf_name;
    for (size_t i = 0; i < nr; i++) {
        if ((rules[i].archs & mask) && strcmp(rules[i].gguf, key) == 0) {
            fill_map(p, &rules[i], bid, rest != NULL, out);
            return TW_OK;
        }
    }
    return tw_errorf(err, TW_NOT_FOUND, "gguf map: %s has no tensor named '%s'",
                     tw_arch_gguf_name(p->arch) ? tw_arch_gguf_name(p->arch) : "?", gguf_name);
}

/* ---- value transforms ------------------------------------------------ */

/* Moves row blocks: dst block perm[i] = src block i, each block `unit`
 * rows of `cols` floats, over rows [start, start + nblocks * unit). */
static tw_status permute_rows(float *v, uint64_t cols, uint64_t start, uint64_t unit,
                              uint64_t nblocks, const uint64_t *perm, tw_err *err)
{
    uint64_t block = unit * cols;
    float *tmp = malloc(nblocks * block * sizeof *tmp);
    if (!tmp)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf map: out of memory");
    float *base = v + start * cols;
    memcpy(tmp, base, nblocks * block * sizeof *tmp);
    for (uint64_t i = 0; i < nblocks; i++)
        memcpy(base + perm[i] * block, tmp + i * block, block * sizeof *tmp);
    free(tmp);
    return TW_OK;
}

/* Same on column blocks of every row. */
static tw_status permute_cols(float *v, uint64_t rows, uint64_t cols, uint64_t unit,
                              uint64_t nblocks, const uint64_t *perm, tw_err *err)
{
    float *tmp = malloc(cols * sizeof *tmp);
    if (!tmp)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf map: out of memory");
    for (uint64_t r = 0; r < rows; r++) {
        float *row = v + r * cols;
        memcpy(tmp, row, cols * sizeof *tmp);
        for (uint64_t i = 0; i < nblocks; i++)
            memcpy(row + perm[i] * unit, tmp + i * unit, unit * sizeof *tmp);
    }
    free(tmp);
    return TW_OK;
}

/* Block permutation for one transform, forward (HF -> file) or inverse. */
static uint64_t *make_perm(const tw_gguf_name_map *m, bool rope, uint64_t nblocks, bool forward,
                           tw_err *err)
{
    uint64_t *perm = malloc((nblocks ? nblocks : 1) * sizeof *perm);
    if (!perm) {
        tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf map: out of memory");
        return NULL;
    }
    if (rope) {
        /* blocks are single rows of one head; nblocks = head_dim */
        uint64_t half = nblocks / 2;
        for (uint64_t t = 0; t < 2; t++) {
            for (uint64_t j = 0; j < half; j++) {
                uint64_t hf = t * half + j, file = 2 * j + t;
                if (forward)
                    perm[hf] = file;
                else
                    perm[file] = hf;
            }
        }
    } else {
        uint64_t nk = m->vhead_nk, r = m->vhead_nv / m->vhead_nk;
        for (uint64_t k = 0; k < nk; k++) {
            for (uint64_t j = 0; j < r; j++) {
                uint64_t hf = k * r + j, file = j * nk + k;
                if (forward)
                    perm[hf] = file;
                else
                    perm[file] = hf;
            }
        }
    }
    return perm;
}

static tw_status apply_perms(const tw_gguf_name_map *m, float *v, uint64_t rows, uint64_t cols,
                             bool forward, tw_err *err)
{
    tw_status st = TW_OK;
    if (m->xform & TW_XF_ROPE_PERMUTE) {
        uint64_t heads = m->rope_heads;
        if (heads == 0 || rows % heads != 0 || (rows / heads) % 2 != 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "gguf map: '%s' has %llu rows, not %llu heads of even size",
                             m->hf_name, (unsigned long long)rows, (unsigned long long)heads);
        uint64_t d = rows / heads;
        uint64_t *perm = make_perm(m, true, d, forward, err);
        if (!perm)
            return TW_RESOURCE_EXHAUSTED;
        for (uint64_t h = 0; h < heads && !st; h++)
            st = permute_rows(v, cols, h * d, 1, d, perm, err);
        free(perm);
        if (st)
            return st;
    }
    if (m->xform & (TW_XF_VHEAD_ROWS | TW_XF_VHEAD_COLS)) {
        uint64_t nv = m->vhead_nv, unit = m->vhead_unit;
        if (m->vhead_nk == 0 || nv % m->vhead_nk != 0 || unit == 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf map: bad value-head layout for '%s'",
                             m->hf_name);
        bool by_rows = m->xform & TW_XF_VHEAD_ROWS;
        uint64_t span = by_rows ? rows - (m->vhead_start < rows ? m->vhead_start : rows) : cols;
        if ((by_rows && m->vhead_start > rows) || span != nv * unit)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "gguf map: '%s' has %llu %s for %llu value heads of %llu",
                             m->hf_name, (unsigned long long)span, by_rows ? "rows" : "columns",
                             (unsigned long long)nv, (unsigned long long)unit);
        uint64_t *perm = make_perm(m, false, nv, forward, err);
        if (!perm)
            return TW_RESOURCE_EXHAUSTED;
        st = by_rows ? permute_rows(v, cols, m->vhead_start, unit, nv, perm, err)
                     : permute_cols(v, rows, cols, unit, nv, perm, err);
        free(perm);
    }
    return st;
}

static tw_status check_shape(const tw_gguf_name_map *m, const float *v, uint64_t rows,
                             uint64_t cols, tw_err *err)
{
    uint64_t n;
    if ((!v && rows && cols) || __builtin_mul_overflow(rows, cols, &n) || n > SIZE_MAX / 4)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "gguf map: bad buffer for '%s'", m->hf_name);
    return TW_OK;
}

tw_status tw_gguf_xform_from_hf(const tw_gguf_name_map *m, float *values, uint64_t rows,
                                uint64_t cols, tw_err *err)
{
    tw_status st = check_shape(m, values, rows, cols, err);
    if (st)
        return st;
    uint64_t n = rows * cols;
    if (m->xform & TW_XF_PLUS_ONE)
        for (uint64_t i = 0; i < n; i++)
            values[i] += 1.0f;
    if (m->xform & TW_XF_NEG_EXP)
        for (uint64_t i = 0; i < n; i++)
            values[i] = -expf(values[i]);
    return apply_perms(m, values, rows, cols, true, err);
}

tw_status tw_gguf_xform_to_hf(const tw_gguf_name_map *m, float *values, uint64_t rows,
                              uint64_t cols, tw_err *err)
{
    tw_status st = check_shape(m, values, rows, cols, err);
    if (st)
        return st;
    if ((st = apply_perms(m, values, rows, cols, false, err)))
        return st;
    uint64_t n = rows * cols;
    if (m->xform & TW_XF_PLUS_ONE)
        for (uint64_t i = 0; i < n; i++)
            values[i] -= 1.0f;
    if (m->xform & TW_XF_NEG_EXP)
        for (uint64_t i = 0; i < n; i++)
            values[i] = logf(-values[i]);
    return TW_OK;
}
