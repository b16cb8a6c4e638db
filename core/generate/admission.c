/* Admission by memory (admission.h). */
#include "admission.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_internal.h"
#include "tw/log.h"
#include "tw/seq_state.h"
#include "tw/spec.h"

#define MIB(x) ((double)(x) / (1024.0 * 1024.0))
#define DEFAULT_CACHE_BYTES ((uint64_t)1 << 30) /* engine_cache's own default */

/* ------------------------------------------------------------ the budget */

/* MemAvailable from /proc/meminfo, else physical memory; 0 when unknown. */
static uint64_t available_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                fclose(f);
                return (uint64_t)kb * 1024u;
            }
        }
        fclose(f);
    }
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}

void admission_init(tw_engine *e)
{
    engine_mem *mem = &e->mem;
    atomic_init(&mem->reserved, 0);
    atomic_init(&mem->pooled, 0);
    if (e->opts.mem_budget_bytes) {
        mem->base = e->opts.mem_budget_bytes;
        mem->derived = false;
        tw_info("memory budget for sequences: %.1f MiB (set by the engine options)",
                MIB(mem->base));
    } else {
        uint64_t avail = available_bytes();
        /* Without a number to go by, a budget that admits nothing would be
         * worse than none: fall back to "no limit". */
        mem->base = avail ? avail / 2 : UINT64_MAX;
        mem->derived = true;
        if (avail)
            tw_info("memory budget for sequences: %.1f MiB (half of MemAvailable %.1f MiB; "
                    "each loaded model's weights, logits and prefix cache come off it)",
                    MIB(mem->base), MIB(avail));
        else
            tw_warn("memory budget: available memory unknown; requests are not limited by "
                    "memory");
    }
    atomic_init(&mem->budget, mem->base);
}

/* What a loaded model holds whatever runs: weights (as their dominant
 * type), the draft model's, the decode logits and the prefix cache budget. */
static uint64_t fixed_bytes(const tw_engine *e, const model_entry *m)
{
    uint64_t b = 0;
    const tw_model *models[2] = {m->model, m->draft};
    for (int i = 0; i < 2; i++) {
        if (!models[i])
            continue;
        const tw_model_info *mi = tw_model_get_info(models[i]);
        size_t elems = tw_type_block_elems(mi->weight_type);
        size_t bytes = tw_type_block_bytes(mi->weight_type);
        if (elems)
            b += mi->n_params / elems * bytes;
    }
    b += (uint64_t)e->opts.max_batch * m->vocab * sizeof(float);
    if (m->cache)
        b += e->opts.cache_bytes ? e->opts.cache_bytes : DEFAULT_CACHE_BYTES;
    return b;
}

/* The budget for sequences now. Caller holds e->lock. */
static uint64_t budget_locked(tw_engine *e)
{
    engine_mem *mem = &e->mem;
    uint64_t b = mem->base;
    if (mem->derived && b != UINT64_MAX) {
        uint64_t fixed = 0;
        for (const model_entry *m = e->models; m; m = m->next)
            fixed += fixed_bytes(e, m);
        /* Models bigger than half the memory still get an eighth of it
         * for sequences rather than none. */
        b = fixed < b - b / 8 ? b - fixed : b / 8;
    }
    atomic_store(&mem->budget, b);
    return b;
}

void admission_model_loaded(tw_engine *e, model_entry *m)
{
    uint64_t b = budget_locked(e);
    size_t kvb = tw_seq_kv_bytes_per_token(m->model);
    size_t rec = tw_seq_recurrent_floats(m->model);
    uint64_t full = (uint64_t)m->max_context * (kvb + sizeof(uint64_t)) + rec * sizeof(float);
    tw_info("model %s: %.3f MiB of %s KV per token, %.3f MiB of recurrent state per sequence, "
            "%.1f MiB for a whole %u-token context; the budget for sequences is %.1f MiB",
            m->name, MIB(kvb),
            tw_model_get_info(m->model)->kv_type == TW_KV_F16 ? "f16" : "f32",
            MIB(rec * sizeof(float)), MIB(full), m->max_context, MIB(b));
}

/* ------------------------------------------------------- what a slot holds */

static uint64_t seq_bytes(const tw_model *model, size_t tokens)
{
    uint64_t per = tw_seq_kv_bytes_per_token(model) + sizeof(uint64_t);
    return (uint64_t)tokens * per + tw_seq_recurrent_floats(model) * sizeof(float) + 256;
}

/* Size classes, so that idle sequences fit later requests: multiples of
 * 256 tokens, coarser as sizes grow (at most 1/16 rounding). */
static size_t size_class(uint64_t n)
{
    uint64_t g = 256;
    while (g * 16 < n)
        g *= 2;
    uint64_t c = (n + g - 1) / g * g;
    return c > SIZE_MAX ? SIZE_MAX : (size_t)c;
}

size_t admission_seq_tokens(const request *r)
{
    const model_entry *m = r->m;
    size_t ctx = m->max_context;
    if (r->embed.pooling != TW_POOLING_NONE) {
        /* an embedding only reads its prompt */
        size_t c = size_class((uint64_t)r->n_prompt + 1);
        return c < ctx ? c : ctx;
    }
    if (!r->stop.max_tokens && !r->stop.max_total_tokens)
        return ctx;
    /* Answer tokens are bounded by max_tokens; a thinking block by its
     * budget, its two tags and the transition forced after a close; all of
     * them together by max_total_tokens; and a speculative round may verify
     * a whole draft before it is cut back. */
    uint64_t need = UINT64_MAX;
    if (r->stop.max_tokens) {
        need = (uint64_t)r->n_prompt + r->stop.max_tokens + TW_SPEC_MAX_DRAFT + 2;
        if (m->think_open != TW_TOKEN_NONE) {
            size_t tr = 0;
            for (int k = 0; k < TW_TRANSITION_COUNT; k++)
                if (m->n_transition[k] > tr)
                    tr = m->n_transition[k];
            need += (uint64_t)r->thinking.max_thinking_tokens + 2 + tr;
        }
    }
    if (r->stop.max_total_tokens) {
        uint64_t total = (uint64_t)r->n_prompt + r->stop.max_total_tokens + TW_SPEC_MAX_DRAFT + 2;
        if (total < need)
            need = total;
    }
    size_t c = size_class(need);
    return c < ctx ? c : ctx;
}

/* Mirrors engine_spec_for_slot's choice: whether a slot of r will run a
 * speculator, and with the draft model. */
static bool speculates(const request *r, bool *draft)
{
    const tw_spec_opts *so = &r->speculative;
    *draft = false;
    if (so->mode == TW_SPEC_OFF || r->logprobs.enabled || r->logprobs.top_logprobs)
        return false;
    if (so->mode == TW_SPEC_AUTO && r->sampling.temperature != 0.0f)
        return false;
    *draft = so->mode == TW_SPEC_DRAFT || (so->mode == TW_SPEC_AUTO && r->m->draft);
    return true;
}

static uint64_t sampler_bytes(uint32_t vocab)
{
    return (uint64_t)vocab * 24 + 4096;
}

/* What tw_spec_create allocates for a sequence of cap tokens. */
static uint64_t spec_bytes(const request *r, size_t cap)
{
    bool draft;
    if (!speculates(r, &draft))
        return 0;
    const model_entry *m = r->m;
    uint64_t V = m->vocab;
    uint64_t k = r->speculative.max_draft_tokens ? r->speculative.max_draft_tokens : 8;
    if (k > TW_SPEC_MAX_DRAFT)
        k = TW_SPEC_MAX_DRAFT;
    size_t verify = tw_model_max_verify(m->model);
    if (verify < 2)
        return 0;
    if (k + 1 > verify)
        k = verify - 1;
    uint64_t b = (k + 1) * tw_seq_recurrent_floats(m->model) * sizeof(float) +
                 (k + 2) * V * sizeof(float) + ((uint64_t)cap + 1) * sizeof(uint32_t);
    if (draft && m->draft) {
        size_t dcap = tw_model_get_info(m->draft)->max_context;
        if (dcap > cap)
            dcap = cap;
        b += seq_bytes(m->draft, dcap) + k * tw_seq_recurrent_floats(m->draft) * sizeof(float) +
             (k + 1) * V * sizeof(float) + sampler_bytes(m->vocab);
    }
    return b;
}

/* The thinking controller's loop-detector tables (thinking.c). */
static uint64_t thinking_bytes(const request *r)
{
    const model_entry *m = r->m;
    if (m->think_open == TW_TOKEN_NONE || !r->thinking.loop_detection)
        return 0;
    uint64_t keys = m->max_context < r->thinking.max_thinking_tokens
                        ? m->max_context
                        : r->thinking.max_thinking_tokens;
    if (keys > (1u << 22))
        keys = 1u << 22;
    uint64_t cap = 64;
    while (cap < 2 * keys)
        cap *= 2;
    return 8192 * sizeof(uint32_t) + cap * 16;
}

uint64_t admission_slot_bytes(const request *r)
{
    size_t cap = admission_seq_tokens(r);
    return seq_bytes(r->m->model, cap) + spec_bytes(r, cap) + sampler_bytes(r->m->vocab) +
           thinking_bytes(r);
}

static uint64_t request_bytes(const request *r)
{
    uint64_t slot = admission_slot_bytes(r);
    return slot > UINT64_MAX / r->n ? UINT64_MAX : slot * r->n;
}

static void too_big(const request *r, uint64_t need, uint64_t budget, char *msg, size_t cap)
{
    snprintf(msg, cap,
             "request needs %" PRIu64 " bytes (%.1f MiB) of sequence memory: %u choice(s) of "
             "%zu tokens (prompt %zu, max_tokens %u) on model %s, more than the whole memory "
             "budget of %" PRIu64 " bytes (%.1f MiB); lower max_tokens or n, or raise the "
             "budget (--kv-budget-bytes)",
             need, MIB(need), r->n, admission_seq_tokens(r), r->n_prompt, r->stop.max_tokens,
             r->m->name, budget, MIB(budget));
}

tw_status admission_check(tw_engine *e, const request *r, tw_err *err)
{
    pthread_mutex_lock(&e->lock);
    uint64_t budget = budget_locked(e);
    pthread_mutex_unlock(&e->lock);
    uint64_t need = request_bytes(r);
    if (need <= budget)
        return TW_OK;
    char msg[TW_ERR_MSG_MAX];
    too_big(r, need, budget, msg, sizeof msg);
    return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "%s", msg);
}

/* ------------------------------------------------------------ idle pool */

static uint64_t pool_bytes(const model_entry *m)
{
    uint64_t b = 0;
    for (size_t i = 0; i < m->n_free_seqs; i++)
        b += seq_bytes(m->model, tw_seq_capacity(m->free_seqs[i]));
    return b;
}

/* Recounts the idle sequences of the registered models (an unloaded
 * model's are freed with it). Scheduler thread, under e->lock. */
static uint64_t recount_pooled(tw_engine *e)
{
    uint64_t b = 0;
    for (const model_entry *m = e->models; m; m = m->next)
        b += pool_bytes(m);
    atomic_store(&e->mem.pooled, b);
    return b;
}

/* Frees idle sequences until `want` more bytes fit, oldest model first. */
static void trim_pools(tw_engine *e, uint64_t reserved, uint64_t want, uint64_t budget)
{
    uint64_t pooled = atomic_load(&e->mem.pooled);
    for (model_entry *m = e->models; m && reserved + pooled + want > budget; m = m->next) {
        while (m->n_free_seqs && reserved + pooled + want > budget) {
            tw_seq *s = m->free_seqs[--m->n_free_seqs];
            pooled -= seq_bytes(m->model, tw_seq_capacity(s));
            tw_seq_free(s);
        }
    }
    atomic_store(&e->mem.pooled, pooled);
}

admit_verdict admission_try(tw_engine *e, request *r)
{
    uint64_t budget = budget_locked(e);
    uint64_t need = request_bytes(r);
    if (need > budget) {
        r->failed = true;
        r->error = TW_RESOURCE_EXHAUSTED;
        too_big(r, need, budget, r->error_msg, sizeof r->error_msg);
        return ADMIT_NEVER;
    }
    uint64_t reserved = atomic_load(&e->mem.reserved);
    uint64_t pooled = recount_pooled(e);
    if (reserved + pooled + need > budget)
        trim_pools(e, reserved, need, budget);
    pooled = atomic_load(&e->mem.pooled);
    if (reserved + pooled + need > budget)
        return ADMIT_WAIT;
    r->mem_slot = admission_slot_bytes(r);
    r->mem_held = need;
    atomic_fetch_add(&e->mem.reserved, need);
    return ADMIT_GO;
}

tw_status admission_seq_take(tw_engine *e, request *r, tw_seq **out, tw_err *err)
{
    model_entry *m = r->m;
    size_t cap = admission_seq_tokens(r);
    for (size_t i = 0; i < m->n_free_seqs; i++) {
        tw_seq *s = m->free_seqs[i];
        if (tw_seq_capacity(s) != cap)
            continue;
        m->free_seqs[i] = m->free_seqs[--m->n_free_seqs];
        atomic_fetch_sub(&e->mem.pooled, seq_bytes(m->model, cap));
        tw_seq_reset(s);
        *out = s;
        return TW_OK;
    }
    return tw_seq_create(m->model, cap, out, err);
}

static void release(tw_engine *e, request *r, uint64_t n)
{
    if (n > r->mem_held)
        n = r->mem_held;
    r->mem_held -= n;
    atomic_fetch_sub(&e->mem.reserved, n);
}

void admission_slot_end(tw_engine *e, request *r, model_entry *m, tw_seq *seq)
{
    if (r)
        release(e, r, r->mem_slot);
    if (!seq)
        return;
    uint32_t keep = e->opts.max_batch;
    uint64_t bytes = seq_bytes(m->model, tw_seq_capacity(seq));
    uint64_t used = atomic_load(&e->mem.reserved) + atomic_load(&e->mem.pooled);
    if (!m->free_seqs)
        m->free_seqs = calloc(keep, sizeof *m->free_seqs);
    if (!m->free_seqs || m->n_free_seqs >= keep || used + bytes > atomic_load(&e->mem.budget)) {
        tw_seq_free(seq);
        return;
    }
    /* parked empty: a sequence restored from the prefix cache's pages
     * gives them back now, not when it is next taken */
    tw_seq_reset(seq);
    m->free_seqs[m->n_free_seqs++] = seq;
    atomic_fetch_add(&e->mem.pooled, bytes);
}

void admission_request_end(tw_engine *e, request *r)
{
    release(e, r, r->mem_held);
}

void admission_stats(tw_engine *e, tw_engine_stats *out)
{
    out->mem_budget_bytes = budget_locked(e);
    out->mem_reserved_bytes = atomic_load(&e->mem.reserved);
    out->mem_pooled_bytes = atomic_load(&e->mem.pooled);
    out->kv_bytes += out->mem_reserved_bytes + out->mem_pooled_bytes;
}
