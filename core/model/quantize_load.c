/* Quantizing a checkpoint's matrices as it loads: a Hugging Face folder
 * holds f32, f16 or bf16 weights, and a quantized copy of its matrices runs
 * on the integer kernels without a conversion step. The matrices chosen and
 * the rows' bits are those tw-convert writes for the same type, so a
 * checkpoint quantized here computes what its converted GGUF computes. */
#include "model/loader.h"

/* A matrix to quantize: stored as floats, its rows whole blocks of `to`.
 * The MoE routers stay as they are, as tw-convert keeps them f32. */
static bool wants(const tw_mat *mat, tw_type to)
{
    return mat->w && mat->rows &&
           (mat->type == TW_TYPE_F32 || mat->type == TW_TYPE_F16 || mat->type == TW_TYPE_BF16) &&
           tw_type_row_bytes(to, mat->cols) != 0;
}

static tw_status quantize(tw_model *m, tw_mat *mat, tw_type to, float **row, size_t *cap,
                          tw_err *err)
{
    if (!wants(mat, to))
        return TW_OK;
    if (mat->cols > *cap) {
        float *r = tw_model_calloc(m, mat->cols, sizeof *r);
        if (!r)
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "quantize: out of memory");
        *row = r;
        *cap = mat->cols;
    }
    const size_t rb = tw_type_row_bytes(to, mat->cols);
    uint8_t *q = tw_model_calloc(m, mat->rows, rb);
    if (!q)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                         "quantize: out of memory for a %zu x %zu matrix as %s", mat->rows,
                         mat->cols, tw_type_name(to));
    for (size_t r = 0; r < mat->rows; r++) {
        tw_mat_row(mat, r, *row);
        tw_quant_row(to, *row, q + r * rb, mat->cols);
    }
    *mat = (tw_mat){.w = q, .type = to, .rows = mat->rows, .cols = mat->cols, .row_bytes = rb};
    return TW_OK;
}

bool tw_quantize_load_type(tw_type t)
{
    return t == TW_TYPE_Q8_0 || t == TW_TYPE_Q4_0 || t == TW_TYPE_Q4_K || t == TW_TYPE_Q6_K;
}

tw_status tw_model_quantize_at_load(tw_model *m, tw_type to, tw_err *err)
{
    if (!tw_quantize_load_type(to))
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "quantize: %s is not a type to quantize to at load (Q8_0, Q4_0, Q4_K, "
                         "Q6_K)",
                         tw_type_name(to));
    float *row = NULL;
    size_t cap = 0;
    const bool tied = m->lm_head.w == m->embed.w && m->lm_head.type == m->embed.type;
    tw_status st = quantize(m, &m->embed, to, &row, &cap, err);
    if (!st && tied)
        m->lm_head = m->embed;
    else if (!st)
        st = quantize(m, &m->lm_head, to, &row, &cap, err);
    for (uint32_t l = 0; !st && l < m->cfg.n_layers; l++) {
        tw_layer *L = &m->layers[l];
        tw_mat *mats[] = {&L->wq,   &L->wk,   &L->wv,      &L->wo,       &L->in_qkv,
                          &L->in_z, &L->in_b, &L->in_a,    &L->out_proj, &L->gate,
                          &L->up,   &L->down, &L->sh_gate, &L->sh_up,    &L->sh_down};
        for (size_t i = 0; !st && i < sizeof mats / sizeof mats[0]; i++)
            st = quantize(m, mats[i], to, &row, &cap, err);
        for (uint32_t e = 0; !st && L->exp_gate && e < m->cfg.n_experts; e++) {
            st = quantize(m, &L->exp_gate[e], to, &row, &cap, err);
            if (!st)
                st = quantize(m, &L->exp_up[e], to, &row, &cap, err);
            if (!st)
                st = quantize(m, &L->exp_down[e], to, &row, &cap, err);
        }
    }
    if (!st)
        m->quantized_to = to;
    return st;
}
