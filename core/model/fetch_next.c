/* The order a decode step reads a model's matrices in, told to the pool
 * one run ahead (tw_matmul_fetch_next), so that its threads spend the
 * waits of a step (on the slowest thread, on the caller's norms, attention
 * and sampling) bringing the next matrices' first rows into cache. */
#include "model/model_internal.h"

/* The matrices of one run of a step and how that run shares them out. */
typedef struct mat_group {
    const tw_mat *mats[4];
    size_t n;
    bool pair;
} mat_group;

/* The run that opens layer l's mixer, or the logits past the last. */
static mat_group mixer_in(const tw_model *m, uint32_t l)
{
    if (l >= m->cfg.n_layers)
        return (mat_group){{&m->lm_head}, 1, false};
    const tw_layer *L = &m->layers[l];
    if (L->mixer == TW_MIXER_ATTENTION)
        return (mat_group){{&L->wq, &L->wk, &L->wv}, 3, false};
    return (mat_group){{&L->in_qkv, &L->in_z, &L->in_b, &L->in_a}, 4, false};
}

static mat_group after(const tw_model *m, const tw_layer *L, tw_fetch_stage stage)
{
    switch (stage) {
    case TW_FETCH_MIXER_OUT:
        return (mat_group){{L->mixer == TW_MIXER_ATTENTION ? &L->wo : &L->out_proj}, 1, false};
    case TW_FETCH_FFN_IN:
        if (L->ffn == TW_FFN_MOE)
            return (mat_group){{&L->router}, 1, false};
        return (mat_group){{&L->gate, &L->up}, 2, L->gate.rows == L->up.rows};
    case TW_FETCH_FFN_OUT:
        return (mat_group){{&L->down}, 1, false};
    case TW_FETCH_NEXT_LAYER:
        return mixer_in(m, (uint32_t)(L - m->layers) + 1);
    }
    return (mat_group){{NULL}, 0, false};
}

void tw_fetch_next(const tw_model *m, tw_pool *pool, size_t n, const tw_layer *L,
                   tw_fetch_stage stage)
{
    if (n != 1 || tw_pool_threads(pool) < 2)
        return;
    const mat_group g = L ? after(m, L, stage) : mixer_in(m, 0);
    tw_matmul_part parts[4];
    for (size_t k = 0; k < g.n; k++) {
        if (g.mats[k]->cols != g.mats[0]->cols)
            return;
        parts[k] = tw_mat_part(g.mats[k], NULL);
    }
    if (g.n)
        tw_matmul_fetch_next(pool, parts, g.n, g.mats[0]->cols, g.pair);
}
