/* Reading an encoder's tensors: Hugging Face's BertModel names, with or
 * without the "bert." of a checkpoint saved from a task head, and the
 * gamma/beta LayerNorm names of checkpoints converted from TensorFlow. */
#include <stdio.h>
#include <string.h>

#include "tw/log.h"

#include "model/encoder.h"
#include "model/loader.h"

static const char *ename(tw_loader *ld, int layer, const char *suffix)
{
    if (layer < 0)
        snprintf(ld->name, sizeof ld->name, "%s%s", ld->prefix, suffix);
    else
        snprintf(ld->name, sizeof ld->name, "%sencoder.layer.%d.%s", ld->prefix, layer, suffix);
    return ld->name;
}

/* A LayerNorm's gain and bias, under either pair of names. */
static tw_status layer_norm(tw_loader *ld, int layer, const char *at, float **w, float **b)
{
    const size_t H = ld->m->cfg.hidden;
    char base[TW_LOAD_NAME_MAX];
    snprintf(base, sizeof base, "%s", ename(ld, layer, at));
    char name[TW_LOAD_NAME_MAX + 16];
    tw_wtensor t;
    bool modern;
    snprintf(name, sizeof name, "%s.weight", base);
    tw_status st = tw_load_find(ld, name, true, &t, &modern);
    if (st)
        return st;
    const char *gain = modern ? "weight" : "gamma", *bias = modern ? "bias" : "beta";
    snprintf(name, sizeof name, "%s.%s", base, gain);
    if ((st = tw_load_vec(ld, name, H, false, false, w)))
        return st;
    snprintf(name, sizeof name, "%s.%s", base, bias);
    return tw_load_vec(ld, name, H, false, false, b);
}

/* A Linear layer's weight [rows x cols] and bias [rows] under `at`. */
static tw_status linear(tw_loader *ld, int layer, const char *at, size_t rows, size_t cols,
                        tw_mat *w, float **b)
{
    char base[TW_LOAD_NAME_MAX];
    snprintf(base, sizeof base, "%s", ename(ld, layer, at));
    char name[TW_LOAD_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s.weight", base);
    tw_status st = tw_load_mat(ld, name, rows, cols, w);
    if (st)
        return st;
    snprintf(name, sizeof name, "%s.bias", base);
    return tw_load_vec(ld, name, rows, false, false, b);
}

static tw_status load_layer(tw_loader *ld, int l, tw_enc_layer *L)
{
    const tw_mconfig *c = &ld->m->cfg;
    const size_t H = c->hidden, F = c->ffn_dim;
    tw_status st;
    if ((st = linear(ld, l, "attention.self.query", H, H, &L->wq, &L->bq)) ||
        (st = linear(ld, l, "attention.self.key", H, H, &L->wk, &L->bk)) ||
        (st = linear(ld, l, "attention.self.value", H, H, &L->wv, &L->bv)) ||
        (st = linear(ld, l, "attention.output.dense", H, H, &L->wo, &L->bo)) ||
        (st = layer_norm(ld, l, "attention.output.LayerNorm", &L->attn_ln_w, &L->attn_ln_b)) ||
        (st = linear(ld, l, "intermediate.dense", F, H, &L->up, &L->b_up)) ||
        (st = linear(ld, l, "output.dense", H, F, &L->down, &L->b_down)) ||
        (st = layer_norm(ld, l, "output.LayerNorm", &L->ffn_ln_w, &L->ffn_ln_b)))
        return st;
    return TW_OK;
}

/* The scratch for inputs of up to P tokens, batches of up to R: the
 * attention scores of every head are kept at once, so the heads (and the
 * inputs) run side by side. An input's n x n scores sit after the earlier
 * inputs', and n is at most P, so a head's share is P x R. */
static tw_status alloc_scratch(tw_loader *ld, tw_encoder *e, size_t P, size_t R)
{
    tw_model *m = ld->m;
    const tw_mconfig *c = &m->cfg;
    const size_t H = c->hidden;
    size_t score_floats;
    if (__builtin_mul_overflow(P * R, (size_t)c->n_heads, &score_floats) ||
        score_floats > ((size_t)1 << 28))
        return tw_errorf(ld->err, TW_INVALID_ARGUMENT,
                         "an encoder reading %zu tokens at once needs %zu heads x %zu x %zu "
                         "attention scores, above 1 GiB: lower max_context",
                         R, (size_t)c->n_heads, P, R);
    e->max_len = P;
    e->max_rows = R;
    float **bufs[] = {&e->x, &e->y, &e->q, &e->k, &e->v, &e->att};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (!(*bufs[i] = tw_model_calloc(m, R * H, sizeof(float))))
            return tw_errorf(ld->err, TW_RESOURCE_EXHAUSTED, "out of memory for scratch");
    if (!(e->ff = tw_model_calloc(m, R * c->ffn_dim, sizeof(float))) ||
        !(e->scores = tw_model_calloc(m, score_floats, sizeof(float))) ||
        !(e->row_token = tw_model_calloc(m, R, sizeof(uint32_t))) ||
        !(e->row_pos = tw_model_calloc(m, R, sizeof(uint32_t))))
        return tw_errorf(ld->err, TW_RESOURCE_EXHAUSTED, "out of memory for scratch");
    return TW_OK;
}

tw_status tw_encoder_build(tw_loader *ld, size_t max_context)
{
    tw_model *m = ld->m;
    const tw_mconfig *c = &m->cfg;
    const size_t H = c->hidden;
    static const char *prefixes[] = {"", "bert.", "model."};
    tw_wtensor t;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        ld->prefix = prefixes[i];
        if (tw_wsource_find(m->src, ename(ld, -1, "embeddings.word_embeddings.weight"), &t, NULL) !=
            TW_NOT_FOUND)
            break;
    }
    tw_encoder *e = tw_model_calloc(m, 1, sizeof *e);
    if (!e || !(e->layers = tw_model_calloc(m, c->n_layers, sizeof *e->layers)))
        return tw_errorf(ld->err, TW_RESOURCE_EXHAUSTED, "out of memory");
    tw_status st;
    if ((st = tw_load_mat(ld, ename(ld, -1, "embeddings.word_embeddings.weight"), c->vocab, H,
                          &e->word)) ||
        (st = tw_load_mat(ld, ename(ld, -1, "embeddings.position_embeddings.weight"), c->max_pos, H,
                          &e->pos)) ||
        (st = tw_load_mat(ld, ename(ld, -1, "embeddings.token_type_embeddings.weight"),
                          c->n_token_types, H, &e->types)) ||
        (st = layer_norm(ld, -1, "embeddings.LayerNorm", &e->emb_ln_w, &e->emb_ln_b)))
        return st;
    if (!(e->type0 = tw_model_calloc(m, H, sizeof(float))))
        return tw_errorf(ld->err, TW_RESOURCE_EXHAUSTED, "out of memory");
    tw_mat_row(&e->types, 0, e->type0);
    for (uint32_t l = 0; l < c->n_layers; l++)
        if ((st = load_layer(ld, (int)l, &e->layers[l])))
            return st;
    /* short inputs batch up to TW_ENCODE_BATCH_ROWS tokens: one read of the
     * weights serves them all */
    const size_t rows = max_context > TW_ENCODE_BATCH_ROWS ? max_context : TW_ENCODE_BATCH_ROWS;
    if ((st = alloc_scratch(ld, e, max_context, rows)))
        return st;
    m->enc = e;
    /* a task head (masked LM, a classifier: a cross-encoder's score) is not
     * computed, so a checkpoint saved with one serves its encoder's states */
    if (c->architecture[0] && strcmp(c->architecture, "BertModel") != 0)
        tw_warn("%s: its task head is not computed; the model serves its encoder's embeddings",
                c->architecture);
    return TW_OK;
}
