/* Hyperparameters: GGUF <arch>.* metadata <-> Hugging Face config.json, with
 * the key names and defaults llama.cpp uses. */
#include "tw/gguf_arch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp's pooling_type values, 0..4, by name: how an embedding model
 * pools its final hidden states. */
static const char *const pooling_names[] = {"none", "mean", "cls", "last", "rank"};
#define N_POOLING (sizeof pooling_names / sizeof pooling_names[0])

/* ---- GGUF -> HF config ---------------------------------------------- */

typedef struct reader {
    const tw_gguf *g;
    const char *arch;
    tw_err *err;
} reader;

static const char *akey(const reader *r, const char *suffix, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s.%s", r->arch, suffix);
    return buf;
}

/* An optional u32 key: TW_OK with *found false when absent, an error when
 * present with the wrong type. */
static tw_status opt_u32(const reader *r, const char *suffix, uint32_t *out, bool *found)
{
    char k[128];
    akey(r, suffix, k, sizeof k);
    *found = tw_gguf_find_key(r->g, k) >= 0;
    return *found ? tw_gguf_get_u32(r->g, k, out, r->err) : TW_OK;
}

static tw_status req_u32(const reader *r, const char *suffix, uint32_t *out)
{
    char k[128];
    return tw_gguf_get_u32(r->g, akey(r, suffix, k, sizeof k), out, r->err);
}

/* f32 metadata turned into the short decimal HF configs carry (1e-06, not
 * 9.99999997e-07). */
static double clean_f32(float f)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%.7g", (double)f);
    return strtod(buf, NULL);
}

static tw_status opt_f32(const reader *r, const char *suffix, double *out, bool *found)
{
    char k[128];
    akey(r, suffix, k, sizeof k);
    *found = tw_gguf_find_key(r->g, k) >= 0;
    if (!*found)
        return TW_OK;
    float f;
    tw_status st = tw_gguf_get_f32(r->g, k, &f, r->err);
    if (!st)
        *out = clean_f32(f);
    return st;
}

/* Far above any real model (hundreds of layers at most). */
#define GGUF_MAX_BLOCKS 4096u

static int set_new(json_t *o, const char *key, json_t *v) { return json_object_set_new(o, key, v); }

static const struct {
    tw_arch arch;
    const char *model_type;
    const char *hf_class;
    const char *act_key;
    const char *act;
} families[] = {
    {TW_ARCH_LLAMA, "llama", "LlamaForCausalLM", "hidden_act", "silu"},
    {TW_ARCH_QWEN2, "qwen2", "Qwen2ForCausalLM", "hidden_act", "silu"},
    {TW_ARCH_QWEN3, "qwen3", "Qwen3ForCausalLM", "hidden_act", "silu"},
    {TW_ARCH_GEMMA3, "gemma3_text", "Gemma3ForCausalLM", "hidden_activation", "gelu_pytorch_tanh"},
    {TW_ARCH_QWEN35, "qwen3_5_text", "Qwen3_5ForCausalLM", "hidden_act", "silu"},
    {TW_ARCH_QWEN35MOE, "qwen3_5_moe_text", "Qwen3_5MoeForCausalLM", "hidden_act", "silu"},
    {TW_ARCH_BERT, "bert", "BertModel", "hidden_act", "gelu"},
};

static tw_status rope_object(const reader *r, json_t **out)
{
    double theta = 10000.0, factor = 0.0;
    bool found, has_factor;
    tw_status st = opt_f32(r, "rope.freq_base", &theta, &found);
    if (!st)
        st = opt_f32(r, "rope.scaling.factor", &factor, &has_factor);
    if (st)
        return st;
    char k[128];
    const char *type = NULL;
    tw_gguf_get_str(r->g, akey(r, "rope.scaling.type", k, sizeof k), &type, NULL, NULL);
    json_t *o = json_object();
    if (!o)
        return tw_errorf(r->err, TW_RESOURCE_EXHAUSTED, "gguf config: out of memory");
    if (type && (strcmp(type, "linear") == 0 || strcmp(type, "yarn") == 0) && has_factor &&
        factor != 1.0) {
        set_new(o, "rope_type", json_string(type));
        set_new(o, "factor", json_real(factor));
        uint32_t orig;
        bool has_orig;
        if (strcmp(type, "yarn") == 0 &&
            !opt_u32(r, "rope.scaling.original_context_length", &orig, &has_orig) && has_orig)
            set_new(o, "original_max_position_embeddings", json_integer(orig));
    } else {
        set_new(o, "rope_type", json_string("default"));
    }
    set_new(o, "rope_theta", json_real(theta));
    *out = o;
    return TW_OK;
}

/* Per-layer types: gemma3 sliding pattern, qwen3.5 full-attention
 * interval, full attention elsewhere. */
static tw_status layer_types(const reader *r, tw_arch arch, uint32_t n_layers, json_t *cfg)
{
    json_t *lt = json_array();
    if (!lt)
        return tw_errorf(r->err, TW_RESOURCE_EXHAUSTED, "gguf config: out of memory");
    set_new(cfg, "layer_types", lt);
    if (arch == TW_ARCH_GEMMA3) {
        char k[128];
        const tw_gguf_value *v = tw_gguf_get(r->g, akey(r, "attention.sliding_window_pattern", k,
                                                        sizeof k));
        uint64_t pattern = 6; /* llama.cpp's default for Gemma 3 */
        bool per_layer = v && tw_gguf_value_type(v) == TW_GGUF_ARRAY;
        if (per_layer && tw_gguf_array_len(v) != n_layers)
            return tw_errorf(r->err, TW_INVALID_ARGUMENT,
                             "gguf config: %s has %llu entries for %u layers", k,
                             (unsigned long long)tw_gguf_array_len(v), n_layers);
        if (v && !per_layer && (!tw_gguf_value_u64(v, &pattern) || pattern == 0))
            return tw_errorf(r->err, TW_INVALID_ARGUMENT, "gguf config: bad %s", k);
        for (uint32_t il = 0; il < n_layers; il++) {
            bool swa;
            if (per_layer) {
                uint64_t b = 0;
                if (tw_gguf_array_type(v) == TW_GGUF_BOOL)
                    b = ((const uint8_t *)tw_gguf_array_data(v))[il];
                else if (!tw_gguf_array_u64(v, il, &b))
                    return tw_errorf(r->err, TW_INVALID_ARGUMENT, "gguf config: bad %s", k);
                swa = b != 0;
            } else {
                swa = il % pattern < pattern - 1;
            }
            json_array_append_new(lt, json_string(swa ? "sliding_attention" : "full_attention"));
        }
        return TW_OK;
    }
    uint32_t interval = 0;
    if (arch == TW_ARCH_QWEN35 || arch == TW_ARCH_QWEN35MOE) {
        bool found;
        tw_status st = opt_u32(r, "full_attention_interval", &interval, &found);
        if (st)
            return st;
        if (!found)
            interval = 4;
        if (interval == 0)
            return tw_errorf(r->err, TW_INVALID_ARGUMENT,
                             "gguf config: full_attention_interval is 0");
        set_new(cfg, "full_attention_interval", json_integer(interval));
    }
    /* A layer's tensors say what it is: DeltaNet layers carry ssm_a. That
     * covers hybrids whose full-attention layers are not on a fixed interval,
     * which full_attention_interval alone cannot describe. */
    bool by_tensors = false;
    if (interval) {
        for (uint32_t il = 0; il < n_layers && !by_tensors; il++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%u.ssm_a", il);
            by_tensors = tw_gguf_find_tensor(r->g, name) != NULL;
        }
    }
    for (uint32_t il = 0; il < n_layers; il++) {
        bool linear = interval && (il + 1) % interval != 0;
        if (by_tensors) {
            char name[64];
            snprintf(name, sizeof name, "blk.%u.ssm_a", il);
            linear = tw_gguf_find_tensor(r->g, name) != NULL;
        }
        json_array_append_new(lt, json_string(linear ? "linear_attention" : "full_attention"));
    }
    return TW_OK;
}

static tw_status build_config(const reader *r, tw_arch arch, json_t *cfg)
{
    size_t fi = 0;
    while (families[fi].arch != arch)
        fi++;
    set_new(cfg, "model_type", json_string(families[fi].model_type));
    json_t *archs = json_array();
    json_array_append_new(archs, json_string(families[fi].hf_class));
    set_new(cfg, "architectures", archs);
    set_new(cfg, families[fi].act_key, json_string(families[fi].act));

    uint32_t n_embd, n_layers, n_head, n_head_kv, head_dim, n_ff, u;
    bool found;
    tw_status st;
    if ((st = req_u32(r, "embedding_length", &n_embd)) ||
        (st = req_u32(r, "block_count", &n_layers)) ||
        (st = req_u32(r, "attention.head_count", &n_head)))
        return st;
    if (n_head == 0 || n_layers == 0 || n_embd == 0)
        return tw_errorf(r->err, TW_INVALID_ARGUMENT,
                         "gguf config: zero embedding length, block count or head count");
    /* Per-layer work below is linear in block_count, which costs the file
     * four bytes: bound it before a tiny file turns into billions of steps. */
    if (n_layers > GGUF_MAX_BLOCKS)
        return tw_errorf(r->err, TW_INVALID_ARGUMENT,
                         "gguf config: block_count %u is over the limit of %u", n_layers,
                         GGUF_MAX_BLOCKS);
    if ((st = opt_u32(r, "attention.head_count_kv", &n_head_kv, &found)))
        return st;
    if (!found)
        n_head_kv = n_head;
    if ((st = opt_u32(r, "attention.key_length", &head_dim, &found)))
        return st;
    if (!found)
        head_dim = n_embd / n_head;
    set_new(cfg, "hidden_size", json_integer(n_embd));
    set_new(cfg, "num_hidden_layers", json_integer(n_layers));
    set_new(cfg, "num_attention_heads", json_integer(n_head));
    set_new(cfg, "num_key_value_heads", json_integer(n_head_kv));
    set_new(cfg, "head_dim", json_integer(head_dim));
    if ((st = opt_u32(r, "feed_forward_length", &n_ff, &found)))
        return st;
    if (found)
        set_new(cfg, "intermediate_size", json_integer(n_ff));
    if ((st = opt_u32(r, "context_length", &u, &found)))
        return st;
    if (found)
        set_new(cfg, "max_position_embeddings", json_integer(u));
    double eps = arch == TW_ARCH_BERT ? 1e-12 : 1e-6;
    const bool layer_norm = arch == TW_ARCH_BERT;
    if ((st = opt_f32(
             r, layer_norm ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon",
             &eps, &found)))
        return st;
    set_new(cfg, layer_norm ? "layer_norm_eps" : "rms_norm_eps", json_real(eps));
    if (arch == TW_ARCH_BERT) {
        const tw_gguf_tensor *types = tw_gguf_find_tensor(r->g, "token_types.weight");
        if (types && types->n_dims == 2)
            set_new(cfg, "type_vocab_size", json_integer((json_int_t)types->dims[1]));
    }

    /* vocabulary size: explicit key, else the embedding rows, else tokens */
    uint64_t vocab = 0;
    if ((st = opt_u32(r, "vocab_size", &u, &found)))
        return st;
    const tw_gguf_tensor *emb = tw_gguf_find_tensor(r->g, "token_embd.weight");
    if (found)
        vocab = u;
    else if (emb && emb->n_dims >= 2)
        vocab = emb->dims[1];
    else
        vocab = tw_gguf_array_len(tw_gguf_get(r->g, "tokenizer.ggml.tokens"));
    set_new(cfg, "vocab_size", json_integer((json_int_t)vocab));
    set_new(cfg, "tie_word_embeddings", json_boolean(!tw_gguf_find_tensor(r->g, "output.weight")));
    set_new(cfg, "attention_bias",
            json_boolean(arch == TW_ARCH_QWEN2 || tw_gguf_find_tensor(r->g, "blk.0.attn_q.bias")));

    static const struct {
        const char *gguf, *hf;
    } ids[] = {{"tokenizer.ggml.bos_token_id", "bos_token_id"},
               {"tokenizer.ggml.eos_token_id", "eos_token_id"},
               {"tokenizer.ggml.padding_token_id", "pad_token_id"}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        uint32_t id;
        if (tw_gguf_get_u32(r->g, ids[i].gguf, &id, NULL) == TW_OK)
            set_new(cfg, ids[i].hf, json_integer(id));
    }

    /* RoPE */
    json_t *rope = NULL;
    if ((st = rope_object(r, &rope)))
        return st;
    uint32_t rot_dims;
    if ((st = opt_u32(r, "rope.dimension_count", &rot_dims, &found))) {
        json_decref(rope);
        return st;
    }
    if (found && rot_dims > 0 && rot_dims < head_dim) {
        double prf = (double)rot_dims / head_dim;
        set_new(cfg, "partial_rotary_factor", json_real(prf));
        set_new(rope, "partial_rotary_factor", json_real(prf));
    }
    if (arch == TW_ARCH_GEMMA3) {
        double swa_theta = 10000.0;
        opt_f32(r, "rope.freq_base_swa", &swa_theta, &found);
        json_t *sliding = json_object();
        set_new(sliding, "rope_type", json_string("default"));
        set_new(sliding, "rope_theta", json_real(swa_theta));
        json_t *per = json_object();
        set_new(per, "sliding_attention", sliding);
        set_new(per, "full_attention", rope);
        set_new(cfg, "rope_parameters", per);
        if ((st = opt_u32(r, "attention.sliding_window", &u, &found)))
            return st;
        if (found)
            set_new(cfg, "sliding_window", json_integer(u));
        /* attention.scale is written only when Gemma's query_pre_attn_scalar
         * differs from head_dim (llama.cpp derives the same default). */
        double scale;
        if (!opt_f32(r, "attention.scale", &scale, &found) && found && scale > 0.0)
            set_new(cfg, "query_pre_attn_scalar", json_real(1.0 / (scale * scale)));
        else
            set_new(cfg, "query_pre_attn_scalar", json_integer(head_dim));
        double cap;
        if (!opt_f32(r, "final_logit_softcapping", &cap, &found) && found)
            set_new(cfg, "final_logit_softcapping", json_real(cap));
    } else {
        set_new(cfg, "rope_parameters", rope);
    }
    if ((st = layer_types(r, arch, n_layers, cfg)))
        return st;

    if (arch == TW_ARCH_LLAMA) {
        /* llama.cpp's converter permutes Q/K rows for adjacent-pair RoPE. */
        set_new(cfg, "tw_rope_interleaved", json_true());
        if (tw_gguf_find_tensor(r->g, "rope_freqs.weight"))
            set_new(cfg, "tw_rope_freqs", json_string("rope_freqs.weight"));
    }
    if (arch == TW_ARCH_QWEN35 || arch == TW_ARCH_QWEN35MOE) {
        uint32_t conv, dk, nk, nv, inner;
        if ((st = req_u32(r, "ssm.conv_kernel", &conv)) ||
            (st = req_u32(r, "ssm.state_size", &dk)) ||
            (st = req_u32(r, "ssm.group_count", &nk)) ||
            (st = req_u32(r, "ssm.time_step_rank", &nv)) ||
            (st = req_u32(r, "ssm.inner_size", &inner)))
            return st;
        if (nk == 0 || nv == 0 || inner % nv != 0 || nv % nk != 0)
            return tw_errorf(r->err, TW_INVALID_ARGUMENT,
                             "gguf config: inconsistent ssm sizes (groups %u, heads %u, inner "
                             "%u)",
                             nk, nv, inner);
        set_new(cfg, "linear_conv_kernel_dim", json_integer(conv));
        set_new(cfg, "linear_key_head_dim", json_integer(dk));
        set_new(cfg, "linear_value_head_dim", json_integer(inner / nv));
        set_new(cfg, "linear_num_key_heads", json_integer(nk));
        set_new(cfg, "linear_num_value_heads", json_integer(nv));
        if (nk != nv)
            set_new(cfg, "tw_vhead_tiled", json_true());
    }
    if (arch == TW_ARCH_QWEN35MOE) {
        uint32_t ne, nu, ff_exp, ff_sh = 0;
        if ((st = req_u32(r, "expert_count", &ne)) ||
            (st = req_u32(r, "expert_used_count", &nu)) ||
            (st = req_u32(r, "expert_feed_forward_length", &ff_exp)) ||
            (st = opt_u32(r, "expert_shared_feed_forward_length", &ff_sh, &found)))
            return st;
        set_new(cfg, "num_experts", json_integer(ne));
        set_new(cfg, "num_experts_per_tok", json_integer(nu));
        set_new(cfg, "moe_intermediate_size", json_integer(ff_exp));
        if (found)
            set_new(cfg, "shared_expert_intermediate_size", json_integer(ff_sh));
        char k[128];
        bool norm = true;
        tw_gguf_get_bool(r->g, akey(r, "expert_weights_norm", k, sizeof k), &norm, NULL);
        set_new(cfg, "norm_topk_prob", json_boolean(norm));
        set_new(cfg, "decoder_sparse_step", json_integer(1));
        set_new(cfg, "mlp_only_layers", json_array());
    }
    uint32_t pooling;
    if ((st = opt_u32(r, "pooling_type", &pooling, &found)))
        return st;
    if (found && pooling >= N_POOLING)
        return tw_errorf(r->err, TW_INVALID_ARGUMENT,
                         "gguf config: %s.pooling_type %u is none of llama.cpp's (0-%zu)", r->arch,
                         pooling, N_POOLING - 1);
    if (found)
        set_new(cfg, "tw_pooling", json_string(pooling_names[pooling]));
    set_new(cfg, "tw_gguf", json_true());
    return TW_OK;
}

tw_status tw_gguf_to_hf_config(const tw_gguf *g, json_t **config, tw_err *err)
{
    *config = NULL;
    const char *arch_name;
    tw_status st = tw_gguf_get_str(g, "general.architecture", &arch_name, NULL, err);
    if (st)
        return st;
    tw_arch arch = tw_arch_from_gguf_name(arch_name);
    if (arch == TW_ARCH_UNKNOWN)
        return tw_errorf(err, TW_UNIMPLEMENTED, "gguf: architecture '%s' is not supported",
                         arch_name);
    json_t *cfg = json_object();
    if (!cfg)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "gguf config: out of memory");
    reader r = {g, arch_name, err};
    st = build_config(&r, arch, cfg);
    if (st) {
        json_decref(cfg);
        return st;
    }
    *config = cfg;
    return TW_OK;
}

/* ---- HF config -> GGUF metadata ------------------------------------ */

static const json_t *cget(const json_t *c, const char *key)
{
    const json_t *v = json_object_get(c, key);
    if (v && !json_is_null(v))
        return v;
    const json_t *tc = json_object_get(c, "text_config");
    v = json_is_object(tc) ? json_object_get(tc, key) : NULL;
    return v && !json_is_null(v) ? v : NULL;
}

typedef struct hw {
    tw_gguf_writer *w;
    const char *arch;
    tw_err *err;
    tw_status st;
} hw;

static void put_u32(hw *h, const char *suffix, uint32_t v)
{
    char k[128];
    if (h->st)
        return;
    snprintf(k, sizeof k, "%s.%s", h->arch, suffix);
    h->st = tw_gguf_writer_set_u32(h->w, k, v, h->err);
}

static void put_f32(hw *h, const char *suffix, double v)
{
    char k[128];
    if (h->st)
        return;
    snprintf(k, sizeof k, "%s.%s", h->arch, suffix);
    h->st = tw_gguf_writer_set_f32(h->w, k, (float)v, h->err);
}

/* Copies an integer config key when present. */
static void copy_u32(hw *h, const json_t *c, const char *hf_key, const char *suffix)
{
    const json_t *v = cget(c, hf_key);
    if (h->st || !v)
        return;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX) {
        h->st = tw_errorf(h->err, TW_INVALID_ARGUMENT, "config: '%s' is not a valid count",
                          hf_key);
        return;
    }
    put_u32(h, suffix, (uint32_t)json_integer_value(v));
}

static bool num(const json_t *v, double *out)
{
    if (!json_is_number(v))
        return false;
    *out = json_number_value(v);
    return true;
}

tw_status tw_gguf_hparams_from_hf(const json_t *config, tw_gguf_writer *w, tw_err *err)
{
    tw_arch_params p;
    tw_status st = tw_arch_params_from_hf(config, &p, err);
    if (st)
        return st;
    hw h = {w, tw_arch_gguf_name(p.arch), err, TW_OK};
    if ((st = tw_gguf_writer_set_str(w, "general.architecture", h.arch, err)) ||
        (st = tw_gguf_writer_set_str(w, "general.type", "model", err)))
        return st;
    put_u32(&h, "block_count", p.n_layers);
    copy_u32(&h, config, "max_position_embeddings", "context_length");
    copy_u32(&h, config, "hidden_size", "embedding_length");
    copy_u32(&h, config, "intermediate_size", "feed_forward_length");
    put_u32(&h, "attention.head_count", p.n_head);
    put_u32(&h, "attention.head_count_kv", p.n_head_kv);
    copy_u32(&h, config, "vocab_size", "vocab_size");
    if (cget(config, "head_dim")) {
        put_u32(&h, "attention.key_length", p.head_dim);
        put_u32(&h, "attention.value_length", p.head_dim);
    }
    double d;
    if (num(cget(config, "rms_norm_eps"), &d))
        put_f32(&h, "attention.layer_norm_rms_epsilon", d);
    if (p.arch == TW_ARCH_BERT) {
        put_f32(&h, "attention.layer_norm_epsilon",
                num(cget(config, "layer_norm_eps"), &d) ? d : 1e-12);
        char k[128];
        snprintf(k, sizeof k, "%s.attention.causal", h.arch);
        if (!h.st)
            h.st = tw_gguf_writer_set_bool(w, k, false, err);
    }

    /* RoPE: the full-attention parameters (gemma3 keeps one per layer type) */
    const json_t *rp = cget(config, "rope_parameters");
    if (!rp)
        rp = cget(config, "rope_scaling");
    const json_t *full = json_object_get(rp, "full_attention");
    const json_t *rope = full ? full : rp;
    double theta;
    if (num(json_object_get(rope, "rope_theta"), &theta) || num(cget(config, "rope_theta"), &theta))
        put_f32(&h, "rope.freq_base", theta);
    const json_t *sliding = json_object_get(rp, "sliding_attention");
    if (num(json_object_get(sliding, "rope_theta"), &theta))
        put_f32(&h, "rope.freq_base_swa", theta);
    const char *rtype = json_string_value(json_object_get(rope, "rope_type"));
    if (!rtype)
        rtype = json_string_value(json_object_get(rope, "type"));
    double factor;
    if (rtype && !h.st && num(json_object_get(rope, "factor"), &factor)) {
        char k[128];
        if (strcmp(rtype, "linear") == 0 || strcmp(rtype, "yarn") == 0) {
            snprintf(k, sizeof k, "%s.rope.scaling.type", h.arch);
            h.st = tw_gguf_writer_set_str(w, k, rtype, err);
            put_f32(&h, "rope.scaling.factor", factor);
            if (strcmp(rtype, "yarn") == 0)
                copy_u32(&h, rope, "original_max_position_embeddings",
                         "rope.scaling.original_context_length");
        }
    }

    /* transformers 5 reads the factor from rope_parameters; the top-level key
     * is a legacy default that may disagree with it. */
    double prf = 1.0;
    if (!num(json_object_get(rope, "partial_rotary_factor"), &prf))
        num(cget(config, "partial_rotary_factor"), &prf);
    switch (p.arch) {
    case TW_ARCH_LLAMA:
        put_u32(&h, "rope.dimension_count", p.head_dim);
        break;
    case TW_ARCH_GEMMA3: {
        copy_u32(&h, config, "sliding_window", "attention.sliding_window");
        double qpas;
        if (num(cget(config, "query_pre_attn_scalar"), &qpas) && qpas > 0.0 &&
            qpas != (double)p.head_dim)
            put_f32(&h, "attention.scale", 1.0 / sqrt(qpas));
        if (num(cget(config, "final_logit_softcapping"), &d))
            put_f32(&h, "final_logit_softcapping", d);
        const json_t *lt = cget(config, "layer_types");
        if (!h.st && json_is_array(lt) && json_array_size(lt) == p.n_layers) {
            bool *swa = calloc(p.n_layers, sizeof *swa);
            if (!swa)
                return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
            for (uint32_t i = 0; i < p.n_layers; i++) {
                const char *s = json_string_value(json_array_get(lt, i));
                swa[i] = s && strcmp(s, "sliding_attention") == 0;
            }
            char k[128];
            snprintf(k, sizeof k, "%s.attention.sliding_window_pattern", h.arch);
            h.st = tw_gguf_writer_set_arr_data(w, k, TW_GGUF_BOOL, swa, p.n_layers, err);
            free(swa);
        }
        break;
    }
    case TW_ARCH_QWEN35MOE:
    case TW_ARCH_QWEN35: {
        copy_u32(&h, config, "linear_conv_kernel_dim", "ssm.conv_kernel");
        put_u32(&h, "ssm.state_size", p.lin_k_dim);
        put_u32(&h, "ssm.group_count", p.lin_k_heads);
        put_u32(&h, "ssm.time_step_rank", p.lin_v_heads);
        put_u32(&h, "ssm.inner_size", p.lin_v_dim * p.lin_v_heads);
        const json_t *fai = cget(config, "full_attention_interval");
        put_u32(&h, "full_attention_interval",
                json_is_integer(fai) ? (uint32_t)json_integer_value(fai) : 4);
        put_u32(&h, "rope.dimension_count", (uint32_t)(p.head_dim * prf));
        const json_t *mrope = json_object_get(rope, "mrope_section");
        int32_t sections[4] = {11, 11, 10, 0};
        for (size_t i = 0; json_is_array(mrope) && i < 4 && i < json_array_size(mrope); i++)
            sections[i] = (int32_t)json_integer_value(json_array_get(mrope, i));
        if (!h.st) {
            char k[128];
            snprintf(k, sizeof k, "%s.rope.dimension_sections", h.arch);
            h.st = tw_gguf_writer_set_arr_data(w, k, TW_GGUF_I32, sections, 4, err);
        }
        if (p.arch == TW_ARCH_QWEN35MOE) {
            copy_u32(&h, config, "num_experts", "expert_count");
            copy_u32(&h, config, "num_experts_per_tok", "expert_used_count");
            copy_u32(&h, config, "moe_intermediate_size", "expert_feed_forward_length");
            copy_u32(&h, config, "shared_expert_intermediate_size",
                     "expert_shared_feed_forward_length");
        }
        break;
    }
    default:
        break;
    }
    const json_t *pooling = json_object_get(config, "tw_pooling");
    if (pooling && !h.st) {
        size_t i = 0;
        while (i < N_POOLING && !(json_is_string(pooling) &&
                                  strcmp(json_string_value(pooling), pooling_names[i]) == 0))
            i++;
        if (i == N_POOLING)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "config: tw_pooling must be none, mean, cls, last or rank");
        put_u32(&h, "pooling_type", (uint32_t)i);
    }
    return h.st;
}
