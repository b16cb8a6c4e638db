/* HF config.json -> tw_mconfig, and the family table.
 *
 * Adding an architecture means adding a row to `families` (and, when its
 * config spells a hyperparameter differently, a line below); the forward
 * pass is shared by all of them. */
#include "model/config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const tw_family families[] = {
    {.model_type = "llama", .architecture = "LlamaForCausalLM", .act = TW_ACT_SILU},
    {.model_type = "mistral", .architecture = "MistralForCausalLM", .act = TW_ACT_SILU},
    {.model_type = "qwen2", .architecture = "Qwen2ForCausalLM", .act = TW_ACT_SILU},
    {.model_type = "qwen3",
     .architecture = "Qwen3ForCausalLM",
     .qk_norm = true,
     .act = TW_ACT_SILU},
    {.model_type = "gemma3_text",
     .architecture = "Gemma3ForCausalLM",
     .norm_plus_one = true,
     .embed_scale = true,
     .qk_norm = true,
     .sandwich_norms = true,
     .scale_from_qpas = true,
     .no_attn_softcap = true,
     .act = TW_ACT_GELU_TANH},
    {.model_type = "qwen3_5_text",
     .architecture = "Qwen3_5ForCausalLM",
     .norm_plus_one = true,
     .qk_norm = true,
     .attn_gate = true,
     .hybrid = true,
     .act = TW_ACT_SILU},
    {.model_type = "qwen3_5_moe_text",
     .architecture = "Qwen3_5MoeForCausalLM",
     .norm_plus_one = true,
     .qk_norm = true,
     .attn_gate = true,
     .hybrid = true,
     .moe = true,
     .act = TW_ACT_SILU},
    {.model_type = "bert", .architecture = "BertModel", .encoder = true, .act = TW_ACT_GELU_ERF},
};

const tw_family *tw_family_find(const char *model_type, const char *architecture)
{
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        if (model_type && strcmp(model_type, families[i].model_type) == 0)
            return &families[i];
    }
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        if (architecture && strcmp(architecture, families[i].architecture) == 0)
            return &families[i];
    }
    return NULL;
}

/* ---- small typed getters; absent and null both mean "use the default" ---- */

static tw_status get_u32(const json_t *o, const char *key, uint32_t def, uint32_t max, bool req,
                         uint32_t *out, tw_err *err)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (req)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "config: missing \"%s\"", key);
        *out = def;
        return TW_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        (uint64_t)json_integer_value(v) > max)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "config: \"%s\" must be an integer in [0, %u]", key, max);
    *out = (uint32_t)json_integer_value(v);
    return TW_OK;
}

static tw_status get_f64(const json_t *o, const char *key, double def, double *out, tw_err *err)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return TW_OK;
    }
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "config: \"%s\" must be a number", key);
    *out = json_number_value(v);
    return TW_OK;
}

static bool get_bool(const json_t *o, const char *key, bool def)
{
    const json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : def;
}

static void copy_str(char *dst, size_t cap, const json_t *v)
{
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    snprintf(dst, cap, "%s", s);
}

/* ---- rope ---- */

/* One rope parameter object: the current `rope_parameters` entry or the
 * legacy `rope_scaling` (whose type key may be "type"). theta_def is the base
 * when the object has none (legacy configs keep it at top level). */
static tw_status parse_rope(const json_t *o, double theta_def, double partial_def,
                            tw_rope_params *p, tw_err *err)
{
    tw_status st;
    memset(p, 0, sizeof *p);
    p->kind = TW_ROPE_DEFAULT;
    const char *type = "default";
    if (o) {
        const json_t *t = json_object_get(o, "rope_type");
        if (!json_is_string(t))
            t = json_object_get(o, "type");
        if (json_is_string(t))
            type = json_string_value(t);
    }
    if ((st = get_f64(o, "rope_theta", theta_def, &p->theta, err)) ||
        (st = get_f64(o, "factor", 1.0, &p->factor, err)) ||
        (st = get_f64(o, "low_freq_factor", 1.0, &p->low_freq_factor, err)) ||
        (st = get_f64(o, "high_freq_factor", 4.0, &p->high_freq_factor, err)) ||
        (st = get_f64(o, "original_max_position_embeddings", 8192.0, &p->original_max_pos,
                      err)) ||
        (st = get_f64(o, "partial_rotary_factor", partial_def, &p->partial, err)))
        return st;
    if (strcmp(type, "default") == 0) {
        p->kind = TW_ROPE_DEFAULT;
    } else if (strcmp(type, "linear") == 0) {
        p->kind = TW_ROPE_LINEAR;
    } else if (strcmp(type, "llama3") == 0) {
        p->kind = TW_ROPE_LLAMA3;
    } else {
        return tw_errorf(err, TW_UNIMPLEMENTED, "config: rope type \"%s\" is not supported",
                         type);
    }
    if (!(p->theta > 1.0) || !(p->factor > 0.0) || !(p->partial > 0.0 && p->partial <= 1.0) ||
        !(p->original_max_pos > 0.0) || !(p->high_freq_factor > p->low_freq_factor) ||
        !(p->low_freq_factor > 0.0))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "config: rope parameters out of range");
    return TW_OK;
}

static tw_status parse_ropes(const json_t *c, tw_mconfig *cfg, tw_err *err)
{
    tw_status st;
    double partial = 0, theta = 0;
    if ((st = get_f64(c, "partial_rotary_factor", 1.0, &partial, err)) ||
        (st = get_f64(c, "rope_theta", 10000.0, &theta, err)))
        return st;
    const json_t *rp = json_object_get(c, "rope_parameters");
    if (json_is_object(rp)) {
        const json_t *full = json_object_get(rp, "full_attention");
        const json_t *slide = json_object_get(rp, "sliding_attention");
        if (json_is_object(full) || json_is_object(slide)) {
            /* per layer type; a missing kind falls back to the other */
            if (!json_is_object(full))
                full = slide;
            if (!json_is_object(slide))
                slide = full;
            if ((st = parse_rope(full, theta, partial, &cfg->rope[0], err)) ||
                (st = parse_rope(slide, theta, partial, &cfg->rope[1], err)))
                return st;
            return TW_OK;
        }
        if ((st = parse_rope(rp, theta, partial, &cfg->rope[0], err)))
            return st;
        cfg->rope[1] = cfg->rope[0];
        return TW_OK;
    }
    /* legacy keys: rope_theta + rope_scaling (+ Gemma 3's rope_local_base_freq) */
    const json_t *rs = json_object_get(c, "rope_scaling");
    if ((st = parse_rope(json_is_object(rs) ? rs : NULL, theta, partial, &cfg->rope[0], err)))
        return st;
    double local = 0;
    if ((st = get_f64(c, "rope_local_base_freq", 0.0, &local, err)))
        return st;
    if (local > 0.0) {
        if ((st = parse_rope(NULL, local, partial, &cfg->rope[1], err)))
            return st;
    } else {
        cfg->rope[1] = cfg->rope[0];
    }
    return TW_OK;
}

/* ---- layer kinds ---- */

static tw_status parse_layer_types(const json_t *c, tw_mconfig *cfg, tw_err *err)
{
    tw_status st;
    const json_t *lt = json_object_get(c, "layer_types");
    uint32_t n = cfg->n_layers;
    if (json_is_array(lt)) {
        if (json_array_size(lt) != n)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "config: layer_types has %zu entries for %u layers",
                             json_array_size(lt), n);
        for (uint32_t i = 0; i < n; i++) {
            const char *s = json_string_value(json_array_get(lt, i));
            if (!s)
                return tw_errorf(err, TW_INVALID_ARGUMENT, "config: layer_types[%u] not a string",
                                 i);
            if (strcmp(s, "full_attention") == 0) {
                cfg->mixer[i] = TW_MIXER_ATTENTION;
            } else if (strcmp(s, "sliding_attention") == 0) {
                cfg->mixer[i] = TW_MIXER_ATTENTION;
                cfg->sliding[i] = true;
            } else if (strcmp(s, "linear_attention") == 0 && cfg->family->hybrid) {
                cfg->mixer[i] = TW_MIXER_DELTANET;
            } else {
                return tw_errorf(err, TW_UNIMPLEMENTED,
                                 "config: layer type \"%s\" is not supported for %s", s,
                                 cfg->model_type);
            }
        }
    } else if (cfg->family->hybrid) {
        uint32_t every = 0;
        if ((st = get_u32(c, "full_attention_interval", 4, n ? n : 1, false, &every, err)))
            return st;
        if (every == 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "config: full_attention_interval is 0");
        for (uint32_t i = 0; i < n; i++)
            cfg->mixer[i] = (i + 1) % every == 0 ? TW_MIXER_ATTENTION : TW_MIXER_DELTANET;
    } else if (cfg->family->sandwich_norms) {
        /* Gemma 3 configs before layer_types: every pattern-th layer is global */
        uint32_t pattern = 0;
        if ((st = get_u32(c, "sliding_window_pattern", 6, 1u << 20, false, &pattern, err)))
            return st;
        for (uint32_t i = 0; i < n; i++)
            cfg->sliding[i] = pattern > 0 && (i + 1) % pattern != 0;
    } else if (cfg->sliding_window > 0) {
        for (uint32_t i = 0; i < n; i++)
            cfg->sliding[i] = true; /* Mistral: one window for every layer */
    }
    for (uint32_t i = 0; i < n; i++) {
        if (cfg->sliding[i] && cfg->sliding_window == 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "config: sliding layers but no sliding_window");
    }
    return TW_OK;
}

static tw_status parse_token_ids(const json_t *c, tw_mconfig *cfg, tw_err *err)
{
    const json_t *b = json_object_get(c, "bos_token_id");
    cfg->bos = -1;
    if (json_is_integer(b) && json_integer_value(b) >= 0 &&
        json_integer_value(b) < (json_int_t)cfg->vocab)
        cfg->bos = json_integer_value(b);
    const json_t *e = json_object_get(c, "eos_token_id");
    cfg->n_eos = 0;
    if (json_is_integer(e)) {
        if (json_integer_value(e) >= 0 && json_integer_value(e) < (json_int_t)cfg->vocab)
            cfg->eos[cfg->n_eos++] = json_integer_value(e);
    } else if (json_is_array(e)) {
        size_t i;
        const json_t *v;
        json_array_foreach(e, i, v) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) >= (json_int_t)cfg->vocab)
                return tw_errorf(err, TW_INVALID_ARGUMENT, "config: bad eos_token_id entry");
            if (cfg->n_eos == TW_CFG_MAX_EOS)
                return tw_errorf(err, TW_INVALID_ARGUMENT,
                                 "config: more than %d eos_token_id entries", TW_CFG_MAX_EOS);
            cfg->eos[cfg->n_eos++] = json_integer_value(v);
        }
    }
    return TW_OK;
}

const char *tw_model_pooling_name(tw_model_pooling p)
{
    static const char *const names[] = {"unsaid", "none", "mean", "cls", "last", "rank"};
    return (unsigned)p < sizeof names / sizeof names[0] ? names[p] : "?";
}

/* "tw_pooling": how the files say embeddings pool (a GGUF's pooling_type,
 * see tw_gguf_to_hf_config, or a config.json's own key). */
static tw_status parse_pooling(const json_t *root, tw_mconfig *cfg, tw_err *err)
{
    cfg->pooling = TW_MODEL_POOLING_UNSAID;
    const json_t *v = json_object_get(root, "tw_pooling");
    if (!v)
        return TW_OK;
    for (int p = TW_MODEL_POOLING_NONE; p <= TW_MODEL_POOLING_RANK; p++)
        if (json_is_string(v) &&
            strcmp(json_string_value(v), tw_model_pooling_name((tw_model_pooling)p)) == 0) {
            cfg->pooling = (tw_model_pooling)p;
            return TW_OK;
        }
    return tw_errorf(err, TW_INVALID_ARGUMENT,
                     "config: tw_pooling must be none, mean, cls, last or rank");
}

/* What an encoder's config says beyond a decoder's: its activation (BERT's
 * "gelu" is the exact one), its learned positions and its token types. */
static tw_status parse_encoder(const json_t *c, tw_mconfig *cfg, tw_err *err)
{
    const json_t *act = json_object_get(c, "hidden_act");
    const char *a = json_is_string(act) ? json_string_value(act) : "gelu";
    if (strcmp(a, "gelu") == 0)
        cfg->enc_act = TW_ACT_GELU_ERF;
    else if (strcmp(a, "gelu_new") == 0 || strcmp(a, "gelu_pytorch_tanh") == 0)
        cfg->enc_act = TW_ACT_GELU_TANH;
    else
        return tw_errorf(err, TW_UNIMPLEMENTED, "config: hidden_act \"%s\" is not supported for %s",
                         a, cfg->model_type);
    const json_t *pe = json_object_get(c, "position_embedding_type");
    if (pe && !json_is_null(pe) &&
        (!json_is_string(pe) || strcmp(json_string_value(pe), "absolute") != 0))
        return tw_errorf(err, TW_UNIMPLEMENTED,
                         "config: position_embedding_type must be \"absolute\" for %s",
                         cfg->model_type);
    if (get_bool(c, "is_decoder", false) || get_bool(c, "add_cross_attention", false))
        return tw_errorf(err, TW_UNIMPLEMENTED,
                         "config: %s as a decoder or with cross-attention is not supported",
                         cfg->model_type);
    tw_status st = get_u32(c, "type_vocab_size", 2, 1u << 16, false, &cfg->n_token_types, err);
    if (st)
        return st;
    if (cfg->n_token_types == 0 || cfg->n_kv_heads != cfg->n_heads ||
        (size_t)cfg->n_heads * cfg->head_dim != cfg->hidden)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "config: inconsistent encoder sizes (heads x head_dim must be "
                         "hidden_size, type_vocab_size above 0)");
    return TW_OK;
}

tw_status tw_mconfig_parse(const json_t *root, tw_mconfig *cfg, tw_err *err)
{
    tw_status st;
    memset(cfg, 0, sizeof *cfg);
    if (!json_is_object(root))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "config: not a JSON object");
    const json_t *arch = json_array_get(json_object_get(root, "architectures"), 0);
    copy_str(cfg->architecture, sizeof cfg->architecture, arch);
    /* multimodal checkpoints keep the language model's settings in text_config */
    const json_t *c = json_object_get(root, "text_config");
    if (!json_is_object(c))
        c = root;
    copy_str(cfg->model_type, sizeof cfg->model_type, json_object_get(c, "model_type"));
    cfg->family = tw_family_find(cfg->model_type, cfg->architecture);
    if (!cfg->family)
        return tw_errorf(err, TW_UNIMPLEMENTED,
                         "config: architecture \"%s\" (model_type \"%s\") is not supported",
                         cfg->architecture, cfg->model_type);
    const tw_family *f = cfg->family;

    if ((st = get_u32(c, "vocab_size", 0, 1u << 24, true, &cfg->vocab, err)) ||
        (st = get_u32(c, "hidden_size", 0, 1u << 16, true, &cfg->hidden, err)) ||
        (st = get_u32(c, "num_hidden_layers", 0, TW_MAX_LAYERS, true, &cfg->n_layers, err)) ||
        (st = get_u32(c, "num_attention_heads", 0, 1024, true, &cfg->n_heads, err)) ||
        (st = get_u32(c, "num_key_value_heads", cfg->n_heads, 1024, false, &cfg->n_kv_heads,
                      err)) ||
        (st = get_u32(c, "intermediate_size", 0, 1u << 20, !f->moe, &cfg->ffn_dim, err)) ||
        (st = get_u32(c, "max_position_embeddings", 4096, 1u << 24, false, &cfg->max_pos, err)) ||
        (st = get_u32(c, "sliding_window", 0, 1u << 24, false, &cfg->sliding_window, err)))
        return st;
    if (cfg->vocab == 0 || cfg->hidden == 0 || cfg->n_layers == 0 || cfg->n_heads == 0 ||
        cfg->n_kv_heads == 0 || cfg->n_heads % cfg->n_kv_heads != 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "config: inconsistent model sizes");
    if (get_bool(c, "use_sliding_window", true) == false)
        cfg->sliding_window = 0; /* Qwen2 ships a window it does not use */
    if ((st = get_u32(c, "head_dim", cfg->hidden / cfg->n_heads, TW_MAX_HEAD_DIM, false,
                      &cfg->head_dim, err)))
        return st;
    if (cfg->head_dim == 0 || cfg->head_dim % 2 != 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "config: head_dim must be even and > 0");

    double eps, qpas, softcap, final_softcap;
    const char *eps_key = json_object_get(c, "rms_norm_eps") ? "rms_norm_eps" : "layer_norm_eps";
    if ((st = get_f64(c, eps_key, 1e-6, &eps, err)) ||
        (st = get_f64(c, "query_pre_attn_scalar", cfg->head_dim, &qpas, err)) ||
        (st = get_f64(c, "attn_logit_softcapping", 0.0, &softcap, err)) ||
        (st = get_f64(c, "final_logit_softcapping", 0.0, &final_softcap, err)))
        return st;
    if (!(eps > 0.0 && eps < 1.0) || !(qpas > 0.0) || softcap < 0.0 || final_softcap < 0.0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "config: norm/attention constants out of range");
    cfg->norm_eps = (float)eps;
    cfg->attn_scale = (float)(1.0 / sqrt(f->scale_from_qpas ? qpas : (double)cfg->head_dim));
    /* Gemma 3 replaced Gemma 2's attention soft-capping with q/k norms; its
     * reference implementation ignores attn_logit_softcapping if a config sets
     * it, and so must we to produce the same logits. */
    cfg->attn_softcap = f->no_attn_softcap ? 0.0f : (float)softcap;
    cfg->final_softcap = (float)final_softcap;
    cfg->tied = get_bool(c, "tie_word_embeddings", get_bool(root, "tie_word_embeddings", false));
    cfg->rope_adjacent = get_bool(root, "tw_rope_interleaved", false);
    cfg->dn_vhead_tiled = get_bool(root, "tw_vhead_tiled", false);
    copy_str(cfg->rope_freqs, sizeof cfg->rope_freqs, json_object_get(root, "tw_rope_freqs"));
    if ((st = parse_pooling(root, cfg, err)))
        return st;

    if ((st = parse_ropes(c, cfg, err)))
        return st;
    if ((st = parse_layer_types(c, cfg, err)))
        return st;

    if (f->hybrid) {
        if ((st = get_u32(c, "linear_num_key_heads", 0, 1024, true, &cfg->dn_k_heads, err)) ||
            (st = get_u32(c, "linear_num_value_heads", 0, 1024, true, &cfg->dn_v_heads, err)) ||
            (st = get_u32(c, "linear_key_head_dim", 0, TW_MAX_HEAD_DIM, true, &cfg->dn_k_dim,
                          err)) ||
            (st = get_u32(c, "linear_value_head_dim", 0, TW_MAX_HEAD_DIM, true, &cfg->dn_v_dim,
                          err)) ||
            (st = get_u32(c, "linear_conv_kernel_dim", 4, 64, false, &cfg->dn_conv, err)))
            return st;
        if (cfg->dn_k_heads == 0 || cfg->dn_v_heads == 0 || cfg->dn_k_dim == 0 ||
            cfg->dn_v_dim == 0 || cfg->dn_conv < 2 || cfg->dn_v_heads % cfg->dn_k_heads != 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "config: inconsistent DeltaNet sizes");
    }
    if (f->moe) {
        uint32_t step = 1;
        if ((st = get_u32(c, "num_experts", 0, TW_MAX_EXPERTS, true, &cfg->n_experts, err)) ||
            (st = get_u32(c, "num_experts_per_tok", 0, TW_MAX_EXPERTS, true, &cfg->top_k, err)) ||
            (st = get_u32(c, "moe_intermediate_size", 0, 1u << 20, true, &cfg->moe_ffn_dim,
                          err)) ||
            (st = get_u32(c, "shared_expert_intermediate_size", 0, 1u << 20, false,
                          &cfg->shared_ffn_dim, err)) ||
            (st = get_u32(c, "decoder_sparse_step", 1, TW_MAX_LAYERS, false, &step, err)))
            return st;
        if (cfg->n_experts == 0 || cfg->top_k == 0 || cfg->top_k > cfg->n_experts ||
            cfg->moe_ffn_dim == 0 || step == 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "config: inconsistent MoE sizes");
        cfg->norm_topk = get_bool(c, "norm_topk_prob", true);
        const json_t *dense_only = json_object_get(c, "mlp_only_layers");
        for (uint32_t i = 0; i < cfg->n_layers; i++)
            cfg->ffn[i] = (i + 1) % step == 0 ? TW_FFN_MOE : TW_FFN_DENSE;
        size_t k;
        const json_t *v;
        json_array_foreach(dense_only, k, v) {
            if (json_is_integer(v) && json_integer_value(v) >= 0 &&
                json_integer_value(v) < (json_int_t)cfg->n_layers)
                cfg->ffn[json_integer_value(v)] = TW_FFN_DENSE;
        }
        for (uint32_t i = 0; i < cfg->n_layers; i++) {
            if (cfg->ffn[i] == TW_FFN_DENSE && cfg->ffn_dim == 0)
                return tw_errorf(err, TW_INVALID_ARGUMENT,
                                 "config: dense layer %u but no intermediate_size", i);
        }
    }
    if (cfg->ffn_dim == 0 && !f->moe)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "config: intermediate_size is 0");
    if (f->encoder && (st = parse_encoder(c, cfg, err)))
        return st;
    return parse_token_ids(c, cfg, err);
}
