/* Model hyperparameters, read from a Hugging Face config.json (or the
 * HF-shaped object the GGUF reader derives from GGUF metadata), and the
 * family table that says which blocks each architecture is made of. */
#ifndef TW_MODEL_CONFIG_H
#define TW_MODEL_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "tw/model.h"
#include "tw/status.h"

#define TW_MAX_LAYERS 1024
#define TW_MAX_HEAD_DIM 1024
#define TW_MAX_EXPERTS 1024
#define TW_ROPE_KINDS 2 /* [0] full attention, [1] sliding attention */
#define TW_CFG_MAX_EOS 8

typedef enum tw_mixer_kind { TW_MIXER_ATTENTION = 0, TW_MIXER_DELTANET = 1 } tw_mixer_kind;
typedef enum tw_ffn_kind { TW_FFN_DENSE = 0, TW_FFN_MOE = 1 } tw_ffn_kind;
typedef enum tw_act { TW_ACT_SILU = 0, TW_ACT_GELU_TANH = 1, TW_ACT_GELU_ERF = 2 } tw_act;
typedef enum tw_rope_kind {
    TW_ROPE_DEFAULT = 0,
    TW_ROPE_LINEAR = 1,
    TW_ROPE_LLAMA3 = 2,
} tw_rope_kind;

typedef struct tw_rope_params {
    tw_rope_kind kind;
    double theta;
    double factor;
    double low_freq_factor;
    double high_freq_factor;
    double original_max_pos;
    double partial; /* fraction of head_dim that rotates */
} tw_rope_params;

/* What an architecture is built from; one row of the family table. */
typedef struct tw_family {
    const char *model_type;   /* HF model_type */
    const char *architecture; /* HF class name, also accepted */
    bool norm_plus_one;       /* RMSNorm multiplies by (1 + w) */
    bool embed_scale;         /* embeddings times sqrt(hidden) */
    bool qk_norm;             /* per-head RMSNorm of q and k */
    bool attn_gate;           /* q_proj also yields a sigmoid output gate */
    bool sandwich_norms;      /* extra norms after the mixer and the FFN */
    bool hybrid;              /* layer_types may name linear_attention (DeltaNet) */
    bool moe;                 /* sparse MoE FFN with a shared expert */
    bool scale_from_qpas;     /* attention scale from query_pre_attn_scalar */
    bool no_attn_softcap;     /* the family's attention never soft-caps scores, even
                               * when its config carries attn_logit_softcapping */
    bool encoder;             /* bidirectional attention over a whole input, post-norm
                               * LayerNorm blocks, learned positions: it embeds text
                               * and predicts no token (encoder.c) */
    tw_act act;
} tw_family;

typedef struct tw_mconfig {
    const tw_family *family;
    char architecture[96];
    char model_type[64];

    uint32_t vocab;
    uint32_t hidden;
    uint32_t n_layers;
    uint32_t n_heads;
    uint32_t n_kv_heads;
    uint32_t head_dim;
    uint32_t ffn_dim;
    float norm_eps;
    float attn_scale;
    float attn_softcap;  /* 0 = off */
    float final_softcap; /* 0 = off */
    uint32_t sliding_window; /* 0 = none */
    uint32_t max_pos;
    bool tied;
    bool rope_adjacent; /* GGUF: q/k rows permuted for adjacent-pair rope */
    char rope_freqs[64]; /* GGUF: tensor of per-frequency divisors, or "" */
    tw_rope_params rope[TW_ROPE_KINDS];

    tw_mixer_kind mixer[TW_MAX_LAYERS];
    bool sliding[TW_MAX_LAYERS];
    tw_ffn_kind ffn[TW_MAX_LAYERS];

    /* Gated DeltaNet */
    uint32_t dn_k_heads, dn_v_heads, dn_k_dim, dn_v_dim, dn_conv;
    /* GGUF order of value heads: head j * n_k + k instead of k * r + j, so
     * value head h reads key head h % n_k rather than h / r */
    bool dn_vhead_tiled;

    /* MoE */
    uint32_t n_experts, top_k, moe_ffn_dim, shared_ffn_dim;
    bool norm_topk;

    int64_t bos;
    uint32_t n_eos;
    int64_t eos[TW_CFG_MAX_EOS];

    tw_model_pooling pooling; /* the "tw_pooling" key */
    uint32_t n_token_types;   /* encoder: rows of its token-type table */
    tw_act enc_act;           /* encoder: its FFN's activation (hidden_act) */
} tw_mconfig;

/* Fills cfg from an HF config object (a text_config inside is used when
 * present). Rejects missing/out-of-range values with INVALID_ARGUMENT and an
 * unknown architecture with UNIMPLEMENTED. */
tw_status tw_mconfig_parse(const json_t *root, tw_mconfig *cfg, tw_err *err);

/* The family for an HF model_type or architecture name, or NULL. */
const tw_family *tw_family_find(const char *model_type, const char *architecture);

#endif
