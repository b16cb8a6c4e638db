/* Mapping between Hugging Face checkpoints and GGUF files, following the
 * conventions of llama.cpp's converter (convert_hf_to_gguf.py and
 * gguf-py's tensor_mapping.py), so files move between tokenwire and
 * llama.cpp in both directions.
 *
 * Families and their GGUF architecture names:
 *   llama      LlamaForCausalLM, MistralForCausalLM
 *   qwen2      Qwen2ForCausalLM
 *   qwen3      Qwen3ForCausalLM
 *   gemma3     Gemma3ForCausalLM (text)
 *   qwen35     Qwen3_5ForCausalLM (Gated DeltaNet + gated full attention)
 *   qwen35moe  Qwen3_5MoeForCausalLM (the same with a sparse MoE FFN)
 *
 * Tensor names: HF "model.layers.N.<module>.<param>" <-> GGUF
 * "blk.N.<name>.<param>". Values are not always stored as HF has them; the
 * transform bits below say what llama.cpp's converter did, and therefore
 * what a loader reading a GGUF file must undo or account for:
 *
 *   TW_XF_PLUS_ONE    file = hf + 1. Gemma 3 and Qwen3.5 RMSNorm weights
 *                     (HF computes x * (1 + w); the file holds 1 + w, so
 *                     the file value is the plain multiplier). Loader: use
 *                     the file value as a plain RMSNorm weight, or subtract
 *                     1 to get HF's w (tw_gguf_xform_to_hf does that).
 *   TW_XF_ROPE_PERMUTE  llama q_proj / k_proj (weights and biases): within
 *                     each head of D rows, file row 2j+t = HF row t*D/2+j
 *                     (t in {0,1}), which turns HF's rotate-half RoPE into
 *                     llama.cpp's adjacent-pair ("NORM") RoPE. Loader:
 *                     either rotate adjacent pairs (config key
 *                     "tw_rope_interleaved": true) or un-permute the rows.
 *   TW_XF_NEG_EXP     Qwen3.5 linear_attn.A_log: file ssm_a = -exp(A_log).
 *                     Loader: use -exp(A_log) directly (it is what the
 *                     DeltaNet decay needs) or take log(-a) for HF's value.
 *   TW_XF_SQUEEZE     Qwen3.5 conv1d weight [C, 1, K] stored as [C, K]
 *                     (GGUF dims {K, C}); same bytes, one fewer dimension.
 *   TW_XF_VHEAD_ROWS  Qwen3.5 DeltaNet with fewer key heads than value heads
 *                     (nk < nv, r = nv / nk): HF groups value heads by key
 *                     head (head h = k * r + j); the file tiles them (file
 *                     head j * nk + k). Applies to the rows of in_proj_z,
 *                     in_proj_a, in_proj_b, A_log, dt_bias, and to the value
 *                     part (rows from 2 * nk * dk on) of in_proj_qkv and
 *                     conv1d. Unit is head_v_dim rows (1 for a, b, A_log,
 *                     dt_bias). Absent when nk == nv.
 *   TW_XF_VHEAD_COLS  The same reordering applied to the columns of
 *                     linear_attn.out_proj (its input dimension).
 *   TW_XF_GATE_HALF / TW_XF_UP_HALF  HF's fused MoE experts.gate_up_proj
 *                     [E, 2F, H] is split into blk.N.ffn_gate_exps (rows
 *                     0..F-1 of each expert) and blk.N.ffn_up_exps (rows
 *                     F..2F-1).
 *
 * MoE expert tensors (ffn_gate_exps, ffn_up_exps, ffn_down_exps) are 3-D
 * with GGUF dims {cols, rows, E}: expert e is the 2-D matrix of `rows` rows
 * starting at byte e * rows * row_bytes(type, cols) of the tensor data (HF
 * experts.down_proj [E, H, F] -> {F, H, E}).
 *
 * llama files converted from llama3-scaled RoPE carry a "rope_freqs.weight"
 * tensor (one f32 divisor per rotary frequency) that has no HF counterpart;
 * tw_gguf_to_hf_config() reports it as "tw_rope_freqs".
 *
 * All functions are pure (no I/O) and thread-safe.
 */
#ifndef TW_GGUF_ARCH_H
#define TW_GGUF_ARCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/gguf.h"
#include "tw/status.h"

typedef enum tw_arch {
    TW_ARCH_UNKNOWN = 0,
    TW_ARCH_LLAMA,
    TW_ARCH_QWEN2,
    TW_ARCH_QWEN3,
    TW_ARCH_GEMMA3,
    TW_ARCH_QWEN35,
    TW_ARCH_QWEN35MOE,
    TW_ARCH_BERT, /* an encoder: HF names "embeddings.*" and "encoder.layer.N.*" */
} tw_arch;

/* GGUF general.architecture value ("llama", "qwen35moe", ...); NULL for
 * TW_ARCH_UNKNOWN. */
const char *tw_arch_gguf_name(tw_arch arch);
/* TW_ARCH_UNKNOWN for a name tokenwire does not map. */
tw_arch tw_arch_from_gguf_name(const char *name);

/* Transform bits (see the file comment). */
enum {
    TW_XF_PLUS_ONE = 1u << 0,
    TW_XF_ROPE_PERMUTE = 1u << 1,
    TW_XF_NEG_EXP = 1u << 2,
    TW_XF_SQUEEZE = 1u << 3,
    TW_XF_VHEAD_ROWS = 1u << 4,
    TW_XF_VHEAD_COLS = 1u << 5,
    TW_XF_GATE_HALF = 1u << 6,
    TW_XF_UP_HALF = 1u << 7,
};

/* The hyperparameters the name mapping and transforms depend on. */
typedef struct tw_arch_params {
    tw_arch arch;
    uint32_t n_layers;
    uint32_t n_head;
    uint32_t n_head_kv;
    uint32_t head_dim;
    /* Qwen3.5 DeltaNet (0 otherwise). */
    uint32_t lin_k_heads;
    uint32_t lin_v_heads;
    uint32_t lin_k_dim;
    uint32_t lin_v_dim;
    uint32_t n_experts;
} tw_arch_params;

/* Reads the family and the parameters above from an HF config.json object
 * (or from the object tw_gguf_to_hf_config() builds). Text configs nested
 * under "text_config" are looked at too. TW_UNIMPLEMENTED for a family not
 * listed above. */
tw_status tw_arch_params_from_hf(const json_t *config, tw_arch_params *p, tw_err *err);

/* One GGUF tensor and how its values relate to the HF tensor. */
typedef struct tw_gguf_name_map {
    char gguf_name[64];
    char hf_name[160];
    uint32_t xform;     /* TW_XF_* bits */
    /* TW_XF_VHEAD_*: rows (or columns) of one value head, the first HF row
     * the reordering applies to (in_proj_qkv, conv1d: 2 * nk * dk), and the
     * key / value head counts. */
    uint32_t vhead_unit;
    uint64_t vhead_start;
    uint32_t vhead_nk;
    uint32_t vhead_nv;
    /* TW_XF_ROPE_PERMUTE: number of heads the rows are split into. */
    uint32_t rope_heads;
} tw_gguf_name_map;

/* Maps an HF tensor name to its GGUF tensor(s). Most names give one; HF's
 * fused experts.gate_up_proj gives two (gate half, up half). Writes up to 2
 * entries into out and their count into *n. TW_NOT_FOUND (with the name in
 * the message) for a name the family does not have. */
tw_status tw_gguf_name_from_hf(const tw_arch_params *p, const char *hf_name,
                               tw_gguf_name_map out[2], size_t *n, tw_err *err);

/* Maps a GGUF tensor name to the HF tensor it came from. For
 * ffn_gate_exps / ffn_up_exps the HF name is the fused
 * "model.layers.N.mlp.experts.gate_up_proj" with TW_XF_GATE_HALF /
 * TW_XF_UP_HALF set. "rope_freqs.weight" maps to an empty hf_name.
 * TW_NOT_FOUND for a name the family does not have. */
tw_status tw_gguf_name_to_hf(const tw_arch_params *p, const char *gguf_name,
                             tw_gguf_name_map *out, tw_err *err);

/* Applies the transforms of m to HF values, giving the values llama.cpp's
 * converter stores: values is the HF tensor as row-major f32 [rows][cols]
 * (a 1-D tensor is rows = n, cols = 1; conv1d [C,1,K] is rows = C,
 * cols = K). TW_XF_GATE_HALF / TW_XF_UP_HALF are not applied here (they
 * select rows; see tw_gguf_name_map). Scratch memory is allocated when a
 * permutation is needed. */
tw_status tw_gguf_xform_from_hf(const tw_gguf_name_map *m, float *values, uint64_t rows,
                                uint64_t cols, tw_err *err);

/* The inverse: turns file values (dequantized to f32, same layout) back into
 * HF values. Meant for norms and vectors, but works on any size. */
tw_status tw_gguf_xform_to_hf(const tw_gguf_name_map *m, float *values, uint64_t rows,
                              uint64_t cols, tw_err *err);

/* Builds from GGUF metadata a JSON object equivalent to the HF config.json
 * of the model (model_type, architectures, hidden_size, num_hidden_layers,
 * num_attention_heads, num_key_value_heads, head_dim, intermediate_size,
 * rms_norm_eps, vocab_size, max_position_embeddings, tie_word_embeddings,
 * rope_parameters (per layer type for gemma3), layer_types, sliding_window,
 * partial_rotary_factor, linear_* DeltaNet sizes, MoE sizes, bos/eos ids,
 * ...), plus private keys for the loader:
 *   "tw_gguf": true            tensors come from a GGUF file (names and
 *                              values per tw_gguf_name_to_hf)
 *   "tw_rope_interleaved": true  Q/K rows are permuted (llama); rotate
 *                              adjacent pairs
 *   "tw_rope_freqs": "rope_freqs.weight"  per-frequency divisors to apply
 *   "tw_vhead_tiled": true     DeltaNet value heads are in tiled order
 *   "tw_pooling": "mean"       how the file says embeddings pool the final
 *                              hidden states (<arch>.pooling_type: none,
 *                              mean, cls, last or rank); absent when unsaid
 * The caller owns *config (json_decref). */
tw_status tw_gguf_to_hf_config(const tw_gguf *g, json_t **config, tw_err *err);

/* Reads dir/config.json, a Hugging Face checkpoint's config (INVALID_ARGUMENT
 * when it is not a JSON object). Unless it has a "tw_pooling" key of its
 * own, a sentence-transformers pooling module beside it
 * (dir/1_Pooling/config.json) that turns on mean, cls or last-token pooling
 * gives one, as a GGUF's pooling_type does; other modes are logged and
 * left out. The caller owns *out (json_decref). */
tw_status tw_hf_config_load(const char *dir, json_t **out, tw_err *err);

/* The reverse, for writing files: sets general.architecture and the
 * <arch>.* hyperparameter keys llama.cpp reads, from an HF config.json
 * object ("tw_pooling" gives <arch>.pooling_type). Does not touch tokenizer
 * keys or tensors. */
typedef struct tw_gguf_writer tw_gguf_writer;
tw_status tw_gguf_hparams_from_hf(const json_t *config, tw_gguf_writer *w, tw_err *err);

#endif
