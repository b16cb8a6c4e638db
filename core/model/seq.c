/* Sequences (per-conversation model state) and snapshot pools.
 *
 * A sequence owns K/V for every attention layer, sized for its capacity,
 * and the recurrent state + conv window of every DeltaNet layer. Each
 * position also carries a write stamp from a per-sequence clock, which is
 * how a snapshot knows whether the KV entries it relies on are still the
 * ones that were there when it was taken. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/model_internal.h"

static atomic_uint_least64_t next_seq_id = 1;

static bool mul_ok(size_t a, size_t b, size_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

/* Rows of a K/V run for `cap` positions of `row` bytes: cap rounded up
 * until a run is whole pages, so that every run starts a page and a
 * stretch of rows that fills pages can be mapped from a file
 * (tw_seq_kv_map_file). The rows past cap are never touched, so they cost
 * address space only. 0 on overflow. */
static size_t kv_rows_for(size_t cap, size_t row)
{
    long p = sysconf(_SC_PAGESIZE);
    size_t page = p > 0 ? (size_t)p : 4096, a = row ? row : 1, b = page;
    while (b) {
        size_t t = a % b;
        a = b;
        b = t;
    }
    const size_t step = page / a; /* rows of the smallest whole-page run */
    if (cap > SIZE_MAX - step)
        return 0;
    return cap ? (cap + step - 1) / step * step : step;
}

tw_status tw_seq_create(tw_model *model, size_t max_tokens, tw_seq **out, tw_err *err)
{
    if (!out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "seq: out is NULL");
    *out = NULL;
    if (!model)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "seq: model is NULL");
    size_t cap = max_tokens ? max_tokens : model->info.max_context;
    if (cap > model->info.max_context)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "seq: %zu tokens exceed the model's max_context %zu", cap,
                         model->info.max_context);
    const tw_mconfig *c = &model->cfg;
    size_t kv = 0, per;
    const size_t rows = kv_rows_for(cap, (size_t)c->head_dim * tw_kv_elem(model));
    if (!rows || !mul_ok(rows, c->head_dim, &per) ||
        !mul_ok(per, 2 * (size_t)c->n_kv_heads, &per) || !mul_ok(per, model->n_attn_layers, &kv) ||
        !mul_ok(kv, tw_kv_elem(model), &per))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "seq: KV size overflows");
    size_t st = (size_t)model->n_dn_layers * tw_dn_layer_floats(model);

    tw_seq *s = calloc(1, sizeof *s);
    if (!s)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "seq: out of memory");
    s->model = model;
    s->id = atomic_fetch_add(&next_seq_id, 1);
    s->cap = cap;
    s->kv_rows = rows;
    s->kv = kv ? tw_seq_kv_map(kv * tw_kv_elem(model), &s->kv_bytes) : NULL;
    s->state = st ? calloc(st, sizeof(float)) : NULL;
    s->stamp = calloc(cap ? cap : 1, sizeof(uint64_t));
    if ((kv && !s->kv) || (st && !s->state) || !s->stamp) {
        tw_seq_free(s);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "seq: cannot allocate %zu MiB of state",
                         (kv * tw_kv_elem(model) + st * sizeof(float)) >> 20);
    }
    *out = s;
    return TW_OK;
}

void tw_seq_free(tw_seq *seq)
{
    if (!seq)
        return;
    tw_seq_kv_unmap(seq->kv, seq->kv_bytes);
    tw_seq_kv_drop_shared(seq);
    free(seq->state);
    free(seq->stamp);
    free(seq);
}

size_t tw_seq_len(const tw_seq *seq) { return seq ? seq->len : 0; }

size_t tw_seq_capacity(const tw_seq *seq) { return seq ? seq->cap : 0; }

static size_t state_floats(const tw_model *m)
{
    return (size_t)m->n_dn_layers * tw_dn_layer_floats(m);
}

void tw_seq_reset(tw_seq *seq)
{
    if (!seq)
        return;
    seq->len = 0;
    tw_seq_kv_unshare(seq);
    if (seq->state)
        memset(seq->state, 0, state_floats(seq->model) * sizeof(float));
}

tw_status tw_seq_truncate(tw_seq *seq, size_t n, tw_err *err)
{
    if (!seq)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "truncate: seq is NULL");
    if (n > seq->len)
        return tw_errorf(err, TW_OUT_OF_RANGE, "truncate: %zu is beyond the length %zu", n,
                         seq->len);
    if (n == seq->len)
        return TW_OK;
    if (n == 0) {
        tw_seq_reset(seq);
        return TW_OK;
    }
    if (seq->model->n_dn_layers > 0)
        return tw_errorf(err, TW_FAILED_PRECONDITION,
                         "truncate: a recurrent state cannot be rewound to %zu tokens; restore a "
                         "snapshot instead",
                         n);
    seq->len = n;
    return TW_OK;
}

/* A slot holds either a whole recurrent state (tw_seq_snapshot) or, after
 * a verification pass, the recurrent inputs of one verified row (replay):
 * the state after row k is then the pool's base (the state before the
 * pass) stepped through rows 0..k, which writes a few KiB per row where a
 * whole state per row would write the full state size each time. */
typedef struct snap_slot {
    bool used;
    bool replay;
    uint64_t seq_id;
    size_t len;
    uint64_t clock;
    uint64_t gen; /* replay: the pass that wrote it (base_gen) */
} snap_slot;

struct tw_snapshot_pool {
    tw_model *model;
    size_t n_slots;
    size_t floats; /* per slot */
    snap_slot *slots;
    float *data;
    float *base;      /* the state before the last verification pass */
    uint64_t base_gen;
    uint64_t base_seq;
};

tw_status tw_snapshot_pool_create(tw_model *model, size_t n_slots, tw_snapshot_pool **out,
                                  tw_err *err)
{
    if (!out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "snapshot pool: out is NULL");
    *out = NULL;
    if (!model || n_slots == 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "snapshot pool: need a model and >= 1 slot");
    size_t floats = state_floats(model), total;
    size_t replay = (size_t)model->n_dn_layers * tw_deltanet_replay_floats(model);
    if (floats && replay > floats)
        floats = replay;
    if (!mul_ok(floats, n_slots + 1, &total) || !mul_ok(total, sizeof(float), &total))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "snapshot pool: size overflows");
    tw_snapshot_pool *p = calloc(1, sizeof *p);
    if (!p)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "snapshot pool: out of memory");
    p->model = model;
    p->n_slots = n_slots;
    p->floats = floats;
    p->slots = calloc(n_slots, sizeof *p->slots);
    p->data = floats ? calloc(floats * n_slots, sizeof(float)) : NULL;
    p->base = floats ? calloc(state_floats(model), sizeof(float)) : NULL;
    if (!p->slots || (floats && (!p->data || !p->base))) {
        tw_snapshot_pool_free(p);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "snapshot pool: out of memory");
    }
    *out = p;
    return TW_OK;
}

void tw_snapshot_pool_free(tw_snapshot_pool *pool)
{
    if (!pool)
        return;
    free(pool->slots);
    free(pool->data);
    free(pool->base);
    free(pool);
}

tw_status tw_seq_snapshot(const tw_seq *seq, tw_snapshot_pool *pool, size_t slot, tw_err *err)
{
    if (!seq || !pool || seq->model != pool->model)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "snapshot: sequence and pool differ in model");
    if (slot >= pool->n_slots)
        return tw_errorf(err, TW_OUT_OF_RANGE, "snapshot: slot %zu of %zu", slot, pool->n_slots);
    if (pool->floats)
        memcpy(pool->data + slot * pool->floats, seq->state,
               state_floats(seq->model) * sizeof(float));
    pool->slots[slot] = (snap_slot){.used = true, .seq_id = seq->id, .len = seq->len,
                                    .clock = seq->clock};
    return TW_OK;
}

tw_status tw_seq_restore(tw_seq *seq, const tw_snapshot_pool *pool, size_t slot, tw_err *err)
{
    if (!seq || !pool || seq->model != pool->model)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "restore: sequence and pool differ in model");
    if (slot >= pool->n_slots)
        return tw_errorf(err, TW_OUT_OF_RANGE, "restore: slot %zu of %zu", slot, pool->n_slots);
    const snap_slot *sl = &pool->slots[slot];
    if (!sl->used)
        return tw_errorf(err, TW_FAILED_PRECONDITION, "restore: slot %zu is empty", slot);
    if (sl->seq_id != seq->id)
        return tw_errorf(err, TW_FAILED_PRECONDITION,
                         "restore: slot %zu holds a snapshot of another sequence", slot);
    if (sl->replay) {
        /* rows 0..slot of the same pass, whose base is still there */
        if (pool->base_seq != seq->id)
            return tw_errorf(err, TW_FAILED_PRECONDITION,
                             "restore: slot %zu belongs to a verification pass of another "
                             "sequence",
                             slot);
        for (size_t k = 0; k <= slot; k++)
            if (!pool->slots[k].replay || pool->slots[k].gen != pool->base_gen ||
                pool->slots[k].seq_id != seq->id)
                return tw_errorf(err, TW_FAILED_PRECONDITION,
                                 "restore: slot %zu was overwritten after the verification "
                                 "pass that slot %zu belongs to",
                                 k, slot);
    }
    for (size_t p = 0; p < sl->len; p++) {
        if (seq->stamp[p] > sl->clock)
            return tw_errorf(err, TW_FAILED_PRECONDITION,
                             "restore: position %zu was rewritten after the snapshot", p);
    }
    size_t floats = state_floats(seq->model);
    if (floats && sl->replay) {
        memcpy(seq->state, pool->base, floats * sizeof(float));
        for (size_t k = 0; k <= slot; k++)
            tw_deltanet_replay_row(seq->model, seq->state, pool->data + k * pool->floats);
    } else if (floats) {
        memcpy(seq->state, pool->data + slot * pool->floats, floats * sizeof(float));
    }
    seq->len = sl->len;
    return TW_OK;
}

float *tw_snapshot_slot_state(tw_snapshot_pool *pool, size_t slot)
{
    return pool->data ? pool->data + slot * pool->floats : NULL;
}

const float *tw_snapshot_begin_replay(tw_snapshot_pool *pool, tw_seq *seq)
{
    pool->base_gen++;
    pool->base_seq = seq->id;
    if (!pool->base)
        return NULL;
    /* The buffers trade places instead of copying the state: the pass's
     * first row reads the old one and writes the new, and only the conv
     * windows, which the conv reads from the sequence, are carried over. */
    float *old = seq->state;
    seq->state = pool->base;
    pool->base = old;
    const tw_model *m = seq->model;
    for (uint32_t l = 0; l < m->n_dn_layers; l++)
        memcpy(tw_seq_dn_conv(seq, l),
               old + (size_t)l * tw_dn_layer_floats(m) + m->dn_state_floats,
               m->dn_conv_floats * sizeof(float));
    return old;
}

void tw_snapshot_mark_replay(tw_snapshot_pool *pool, size_t slot, const tw_seq *seq,
                             size_t len, uint64_t clock)
{
    pool->slots[slot] = (snap_slot){.used = true, .replay = true, .seq_id = seq->id, .len = len,
                                    .clock = clock, .gen = pool->base_gen};
}

size_t tw_snapshot_pool_slots(const tw_snapshot_pool *pool) { return pool->n_slots; }

const tw_model *tw_snapshot_pool_model(const tw_snapshot_pool *pool) { return pool->model; }
