/* An encoder model's weights and scratch (BERT and its kin): post-norm
 * blocks with LayerNorm, biases on every projection, learned absolute
 * positions and token types. Internal to core/model/. */
#ifndef TW_MODEL_ENCODER_H
#define TW_MODEL_ENCODER_H

#include "model/model_internal.h"

typedef struct tw_enc_layer {
    tw_mat wq, wk, wv, wo, up, down;
    float *bq, *bk, *bv, *bo, *b_up, *b_down;
    float *attn_ln_w, *attn_ln_b; /* after attention and its residual */
    float *ffn_ln_w, *ffn_ln_b;   /* after the FFN and its residual */
} tw_enc_layer;

typedef struct tw_encoder {
    tw_mat word, pos, types;
    float *type0; /* types' row 0, added to every token */
    float *emb_ln_w, *emb_ln_b;
    tw_enc_layer *layers;

    size_t max_len;  /* one input's tokens at most: info.max_context */
    size_t max_rows; /* the tokens of a batch of inputs at most */
    float *x, *y;    /* [rows][hidden] */
    float *q, *k, *v, *att;
    float *ff;           /* [rows][ffn] */
    float *scores;       /* [n_heads][max_len * max_rows]: each input's n x n in turn */
    uint32_t *row_token; /* [rows]: the batch's tokens, input after input */
    uint32_t *row_pos;   /* [rows]: each token's position in its input */
} tw_encoder;

#endif
