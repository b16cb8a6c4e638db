/* Internal representation of a loaded model, shared by the files of
 * core/model/. Nothing here is public API.
 *
 * Conventions used throughout:
 *  - A matrix (tw_mat) is a view of weight rows in their stored type; row r
 *    is the r-th output feature, so y = W x is tw_matvec over `rows` rows.
 *  - Every small per-feature vector (norm weights, biases, DeltaNet
 *    constants) is converted to f32 at load and stored as the value the
 *    forward pass multiplies or adds, so the (1 + w) of Gemma / Qwen3.5 norms
 *    and the -exp(A_log) of DeltaNet are folded in once, whatever the source
 *    file stored.
 *  - Activations are row-major [rows x features] f32 buffers; a "row" is one
 *    token of one sequence at one position.
 */
#ifndef TW_MODEL_INTERNAL_H
#define TW_MODEL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/gguf.h"
#include "tw/kernels.h"
#include "tw/model.h"
#include "tw/pool.h"
#include "tw/seq_state.h"

#include "model/config.h"

typedef struct tw_mat {
    const uint8_t *w;
    tw_type type;
    size_t rows;
    size_t cols;
    size_t row_bytes;
} tw_mat;

/* Rotary embedding of one layer kind: cos/sin per (position, pair). */
typedef struct tw_rope_table {
    uint32_t rot_dim;  /* leading dims of a head that rotate (even) */
    bool adjacent;     /* pairs (2i, 2i+1) instead of (i, i + rot_dim/2) */
    size_t n_pos;
    float *cos;        /* [n_pos][rot_dim/2] */
    float *sin;
} tw_rope_table;

typedef struct tw_layer {
    tw_mixer_kind mixer;
    tw_ffn_kind ffn;

    float *attn_norm;      /* before the mixer */
    float *post_attn_norm; /* after the mixer, before the residual (Gemma) */
    float *ffn_norm;       /* before the FFN */
    float *post_ffn_norm;  /* after the FFN, before the residual (Gemma) */

    /* attention */
    tw_mat wq, wk, wv, wo;
    float *bq, *bk, *bv, *bo; /* optional biases */
    float *q_norm, *k_norm;   /* per-head RMSNorm weights, optional */
    bool sliding;
    const tw_rope_table *rope;
    uint32_t attn_index; /* which attention layer: index into a seq's KV */

    /* Gated DeltaNet */
    tw_mat in_qkv, in_z, in_b, in_a, out_proj;
    float *conv_w;  /* [conv_kernel][conv_dim] (transposed at load) */
    float *dn_a;    /* -exp(A_log), [n_v_heads] */
    float *dt_bias; /* [n_v_heads] */
    float *dn_norm; /* gated RMSNorm weight, [v_head_dim] */
    uint32_t dn_index; /* index into a seq's recurrent states */

    /* dense FFN */
    tw_mat gate, up, down;

    /* MoE FFN */
    tw_mat router;
    tw_mat *exp_gate, *exp_up, *exp_down; /* [n_experts] */
    tw_mat sh_gate, sh_up, sh_down;
    tw_mat sh_router; /* 1 x hidden: the shared expert's sigmoid gate */
    bool has_shared;
} tw_layer;

/* Per-model scratch, sized at load for max_rows rows. */
typedef struct tw_scratch {
    size_t max_rows;
    float *x, *xn, *y;          /* [rows][hidden] */
    float *q, *k, *v;           /* projections; q holds the gate too */
    float *att;                 /* [rows][n_heads * head_dim] */
    float *qkv, *qkv_conv, *z, *ba_b, *ba_a, *dn_out; /* qkv: before the conv */
    float *dn_chunk;            /* per value head chunk workspace */
    size_t dn_chunk_floats;
    float *f_gate, *f_up;       /* [rows][max ffn dim] */
    float *router;              /* [rows][n_experts] */
    uint32_t *sel;              /* [rows][top_k] */
    float *sel_w;
    uint32_t *e_rows;           /* rows routed to one expert */
    float *e_x, *e_out;         /* gathered rows */
    float *e_wt;                /* routing weight of each gathered row */
    float *sh_g;                /* [rows] */
    uint32_t *pos;              /* [rows] */
    tw_seq **row_seq;           /* [rows] */
    float **row_trail;          /* [rows] */
    const float **row_base;     /* [rows] */
    uint32_t *group_start;      /* [rows + 1]: runs of rows of one sequence */
} tw_scratch;

/* A source of weights: the tensors of a safetensors set or a GGUF file,
 * looked up by Hugging Face name (model/wsource.h). */
typedef struct tw_wsource tw_wsource;

struct tw_model {
    tw_mconfig cfg;
    tw_model_info info;
    tw_wsource *src;

    tw_mat embed;
    tw_mat lm_head;
    float *final_norm;
    float embed_scale;

    tw_layer *layers;       /* NULL for an encoder, whose blocks are enc's */
    struct tw_encoder *enc; /* an encoder's weights and scratch (encoder.h), or NULL */
    uint32_t n_attn_layers;
    uint32_t n_dn_layers;
    tw_rope_table ropes[TW_ROPE_KINDS];

    /* per-sequence recurrent state geometry, in floats */
    size_t dn_state_floats; /* n_v_heads * k_dim * v_dim */
    size_t dn_conv_floats;  /* (conv_kernel - 1) * conv_dim */

    size_t max_batch;
    size_t max_chunk;
    tw_scratch s;

    tw_type quantized_to; /* the type matrices were quantized to at load; F32: none */
    struct tw_qcopies *qcopies; /* the copies quantize_load.c made, or NULL */
    bool have_fingerprint;
    char fingerprint[65];

    void *owned; /* allocations to free with the model (arena list) */
    void *packed; /* the packed copies of the Q8_0 / Q4_0 / Q5_0 matrices (pack.c) */
    size_t packed_len;
    /* an embedding table of its own, read from the file's page cache when
     * the weights are a private copy (pack.c); zero otherwise */
    tw_file_view embed_view;
};

/* Points every Q8_0 / Q4_0 / Q5_0 matrix of a built model at a packed copy of it
 * (tw_pack_rows), in one mapping the model owns; the undo frees it. The
 * originals are read again only for the embedding table and the
 * fingerprint, so it takes the fingerprint, then gives their pages back. */
tw_status tw_model_pack_weights(tw_model *m, tw_err *err);
void tw_model_unpack_weights(tw_model *m);

struct tw_seq {
    tw_model *model;
    uint64_t id;
    size_t cap;
    size_t len;
    size_t kv_rows;    /* rows of a K/V run: cap, rounded up so that every run starts a page */
    unsigned char *kv; /* [n_attn][2][n_kv_heads][kv_rows][head_dim] of info.kv_type */
    size_t kv_bytes;   /* of the kv mapping */
    size_t kv_ready;   /* positions whose pages are populated in every K/V run */
    bool kv_lazy;      /* populating ahead is not supported: pages fault in as written */
    size_t kv_mapped_runs; /* runs mapped from a file since the K/V was last fresh (kv_share.c) */
    tw_kv_lease *leases;   /* what those mappings read, given back when they go */
    float *state;      /* [n_dn][dn_state + dn_conv] */
    uint64_t *stamp;   /* [cap]: clock value when the position was written */
    uint64_t clock;
};

/* Bytes of one stored K/V value (info.kv_type). */
static inline size_t tw_kv_elem(const tw_model *m)
{
    return m->info.kv_type == TW_KV_F16 ? sizeof(uint16_t) : sizeof(float);
}

/* K (which = 0) or V (which = 1) of one attention layer / kv head: cap
 * rows of head_dim values of the model's K/V type. */
static inline unsigned char *tw_seq_kv(const tw_seq *s, uint32_t attn_index, int which,
                                       uint32_t head)
{
    const tw_mconfig *c = &s->model->cfg;
    size_t per_head = s->kv_rows * c->head_dim;
    size_t per_layer = 2 * (size_t)c->n_kv_heads * per_head;
    return s->kv + (attn_index * per_layer + (size_t)which * c->n_kv_heads * per_head +
                    head * per_head) *
                       tw_kv_elem(s->model);
}

/* Values [v, v + n) of one K/V run (row r starts at value r * head_dim) as
 * f32; exact for either type (kv_rows.c). */
void tw_seq_kv_load(const tw_seq *s, uint32_t attn_index, int which, uint32_t head, size_t v,
                    size_t n, float *dst);

/* Stores n f32 values at value v of one K/V run, rounded to the model's K/V
 * type (exact for values tw_seq_kv_load() gave). */
void tw_seq_kv_store(tw_seq *s, uint32_t attn_index, int which, uint32_t head, size_t v,
                     size_t n, const float *src);

/* Makes sure the K/V pages of positions [0, end) are populated, and those
 * of the next stretch too, so the steps that write them do not fault page
 * by page. Never fails: where the kernel cannot populate, pages fault in as
 * they are first written, as they would anyway. */
void tw_seq_kv_prepare(tw_seq *s, size_t end);

/* An anonymous mapping of at least `bytes` zeroed bytes for a K/V, its
 * length in *mapped; NULL (and 0) when it cannot be had. */
unsigned char *tw_seq_kv_map(size_t bytes, size_t *mapped);
void tw_seq_kv_unmap(unsigned char *kv, size_t mapped);

/* Swaps a K/V that rows were mapped into from a file for fresh anonymous
 * memory and gives the leases back (kv_share.c); called where every row
 * is about to be the sequence's own again (reset, import). Where the swap
 * cannot be had, the mapping and its leases stay as they are. */
void tw_seq_kv_unshare(tw_seq *s);
/* Gives the leases back once the K/V is unmapped (the sequence is freed). */
void tw_seq_kv_drop_shared(tw_seq *s);

/* Floats of a DeltaNet layer's q|k|v row (the conv's channels). */
static inline size_t tw_dn_conv_dim(const tw_mconfig *c)
{
    return 2 * (size_t)c->dn_k_heads * c->dn_k_dim + (size_t)c->dn_v_heads * c->dn_v_dim;
}

/* Floats of one DeltaNet layer's part of a recurrent state (tw_seq.state,
 * a snapshot): its state, then its conv window. */
static inline size_t tw_dn_layer_floats(const tw_model *m)
{
    return m->dn_state_floats + m->dn_conv_floats;
}

static inline float *tw_seq_dn_state(const tw_seq *s, uint32_t dn_index)
{
    return s->state + dn_index * tw_dn_layer_floats(s->model);
}

static inline float *tw_seq_dn_conv(const tw_seq *s, uint32_t dn_index)
{
    return tw_seq_dn_state(s, dn_index) + s->model->dn_state_floats;
}

/* A batch of rows flowing through one forward step. Rows of the same
 * sequence are consecutive and at consecutive positions. */
typedef struct tw_batch {
    size_t n;
    tw_seq **seq; /* [n] */
    uint32_t *pos; /* [n] */
    bool one_seq;  /* all rows belong to seq[0] (a prefill step) */
    /* Verify mode (tw_model_verify_batch): the snapshot slot that receives
     * row r's recurrent inputs (tw_deltanet_replay_floats() per DeltaNet
     * layer), or NULL for a row without one. Every row runs in the
     * token-by-token decode form and updates its sequence in place; a
     * sequence's rows are consecutive. NULL when no row has a slot. */
    float *const *row_trail;
    /* With row_trail: for the first row of a sequence's run, the recurrent
     * state (laid out like tw_seq.state) the run starts from instead of the
     * sequence's own; NULL for every other row. */
    const float *const *row_base;
} tw_batch;

/* ---- snapshot pool internals (model/seq.c), for tw_model_verify ---- */
/* The floats of one slot. */
float *tw_snapshot_slot_state(tw_snapshot_pool *pool, size_t slot);
size_t tw_snapshot_pool_slots(const tw_snapshot_pool *pool);
const tw_model *tw_snapshot_pool_model(const tw_snapshot_pool *pool);
/* Starts a verification pass of seq: its recurrent state becomes the base
 * that the pass's replay slots start from, and the sequence gets a buffer
 * holding only its conv windows, which the pass's first row fills from the
 * base (returned; NULL without recurrent state). */
const float *tw_snapshot_begin_replay(tw_snapshot_pool *pool, tw_seq *seq);
/* Marks slot as holding the inputs of the pass's row that took seq to
 * length len, written at clock. */
void tw_snapshot_mark_replay(tw_snapshot_pool *pool, size_t slot, const tw_seq *seq,
                             size_t len, uint64_t clock);

/* ---- DeltaNet replay (model/deltanet.c), for verification trails ---- */
/* Floats per DeltaNet layer that one verified row's inputs take. */
size_t tw_deltanet_replay_floats(const tw_model *m);
/* Steps every DeltaNet layer of `state` (laid out like tw_seq.state)
 * through one row recorded by a verification pass, exactly as the pass
 * stepped it. */
void tw_deltanet_replay_row(const tw_model *m, float *state, const float *row);

/* ---- shared math (model/mathops.c) ---- */
/* The sum of x[i]^2 in double precision. */
double tw_sum_squares(const float *x, size_t n);
void tw_rmsnorm(float *out, const float *x, const float *w, size_t n, float eps);
void tw_rmsnorm_rows(tw_pool *pool, float *out, const float *x, const float *w, size_t rows,
                     size_t n, float eps);
float tw_silu(float x);
float tw_gelu_tanh(float x);
float tw_sigmoid(float x);
float tw_softplus(float x);
void tw_mat_mul(tw_pool *pool, const tw_mat *m, const float *x, size_t n, float *y);
/* Row r (below m->rows) of m as m->cols floats, packed or not. */
void tw_mat_row(const tw_mat *m, size_t r, float *out);
/* m as a part of a tw_matmul_multi / tw_matmul_pair call, into y. */
tw_matmul_part tw_mat_part(const tw_mat *m, float *y);
/* tw_mat_mul of k (at most TW_MATMUL_MAX_PARTS) matrices with the same
 * number of columns over the same x, y[i] receiving mats[i]'s product: one
 * pool run and one activation quantization where the kernels allow. */
void tw_mat_mul_multi(tw_pool *pool, const tw_mat *const *mats, float *const *ys, size_t k,
                      const float *x, size_t n);
/* tw_matmul_pair of a and b (into ya and yb); false when they cannot be
 * (the caller then goes through tw_mat_mul_multi). */
bool tw_mat_mul_pair(tw_pool *pool, const tw_mat *a, const tw_mat *b, float *ya, float *yb,
                     const float *x, size_t n, tw_rows_done_fn done, void *ctx);

/* ---- fetch ahead (model/fetch_next.c) ----
 * A decode step (n 1) names the matrices it reads after its next pool run:
 * stage's group after layer L's, or with L NULL the first layer's. */
typedef enum tw_fetch_stage {
    TW_FETCH_MIXER_OUT,  /* the mixer's output projection */
    TW_FETCH_FFN_IN,     /* the FFN's first run */
    TW_FETCH_FFN_OUT,    /* the dense FFN's down projection */
    TW_FETCH_NEXT_LAYER, /* the next layer's mixer input, or the logits */
} tw_fetch_stage;
void tw_fetch_next(const tw_model *m, tw_pool *pool, size_t n, const tw_layer *L,
                   tw_fetch_stage stage);

/* ---- blocks ---- */
void tw_attention_block(tw_model *m, tw_pool *pool, const tw_layer *L, const tw_batch *b,
                        const float *xn, float *y);
void tw_deltanet_block(tw_model *m, tw_pool *pool, const tw_layer *L, const tw_batch *b,
                       const float *xn, float *y);
void tw_ffn_block(tw_model *m, tw_pool *pool, const tw_layer *L, size_t n, const float *xn,
                  float *y);

/* ---- rope (model/rope.c) ----
 * freq_div, when not NULL, holds rot_dim/2 divisors of the frequencies
 * (llama.cpp's rope_freqs tensor, its encoding of llama3 scaling). */
tw_status tw_rope_build(tw_rope_table *t, const tw_rope_params *p, uint32_t head_dim,
                        size_t n_pos, bool adjacent, const float *freq_div, tw_err *err);
void tw_rope_free(tw_rope_table *t);
void tw_rope_apply(const tw_rope_table *t, float *head, uint32_t pos);

/* ---- DeltaNet cores, exposed for the chunked-vs-recurrent test ---- */
/* One token for one value head: state [dk][dv] updated in place. q already
 * l2-normalised and scaled, k l2-normalised. */
void tw_deltanet_step(float *state, const float *q, const float *k, const float *v, float g,
                      float beta, uint32_t dk, uint32_t dv, float *out);
/* The same update reading the state from src and writing it to dst (which
 * may equal src); bit-identical to tw_deltanet_step. */
void tw_deltanet_step_to(float *dst, const float *src, const float *q, const float *k,
                         const float *v, float g, float beta, uint32_t dk, uint32_t dv,
                         float *out);
/* L tokens (L <= TW_DN_CHUNK) for one value head in the chunked form.
 * q/k rows have stride qk_stride floats, v rows v_stride, g/beta gb_stride,
 * out rows out_stride; work holds
 * tw_deltanet_chunk_floats(dk, dv) floats. */
#define TW_DN_CHUNK 64
size_t tw_deltanet_chunk_floats(uint32_t dk, uint32_t dv);
void tw_deltanet_chunk(float *state, const float *q, const float *k, size_t qk_stride,
                       const float *v, size_t v_stride, const float *g, const float *beta,
                       size_t gb_stride, size_t L, uint32_t dk, uint32_t dv, float *out,
                       size_t out_stride, float *work);

#endif
