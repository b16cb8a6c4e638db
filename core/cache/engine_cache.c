/* The engine's use of the prefix cache and the state store
 * (cache/engine_cache.h). Runs on the scheduler thread, except the
 * counters, which stats calls read from any thread. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cache/engine_cache.h"
#include "tw/log.h"
#include "tw/prefix_cache.h"
#include "tw/seq_state.h"

#define B TW_PREFIX_BLOCK

struct engine_cache {
    tw_model *model;
    char fingerprint[65];
    tw_prefix_cache *mem;  /* NULL: off */
    tw_state_store *store; /* NULL: off */
    uint32_t persist_min;
    atomic_uint_least64_t lookups, hits, disk_lookups, disk_hits, tokens_reused;
};

tw_status engine_cache_create(tw_model *model, const char *fingerprint,
                              const engine_cache_config *cfg, engine_cache **out, tw_err *err)
{
    *out = NULL;
    bool disk = cfg->store && fingerprint && strlen(fingerprint) == 64;
    if (cfg->no_prefix_cache && !disk)
        return TW_OK;
    engine_cache *c = calloc(1, sizeof *c);
    if (!c)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "cache: out of memory");
    c->model = model;
    if (disk) {
        memcpy(c->fingerprint, fingerprint, 65);
        c->store = cfg->store;
    }
    c->persist_min = cfg->persist_min_tokens;
    if (!cfg->no_prefix_cache) {
        tw_prefix_cache_opts o = {.max_bytes = cfg->cache_bytes, .copy_kv = cfg->copy_kv};
        tw_status st = tw_prefix_cache_create(model, &o, &c->mem, err);
        if (st != TW_OK) {
            free(c);
            return st;
        }
        const size_t row =
            tw_seq_kv_runs(model) ? tw_seq_kv_bytes_per_token(model) / tw_seq_kv_runs(model) : 0;
        tw_info("prefix cache: %s (K/V rows of %zu bytes)",
                tw_prefix_cache_maps(c->mem)
                    ? "restores map its pages, shared by the sequences restored from them"
                    : "restores copy K/V rows (prefix-cache-pages copy, rows that do not fill "
                      "pages, or no memory file)",
                row);
    }
    *out = c;
    return TW_OK;
}

void engine_cache_free(engine_cache *c)
{
    if (!c)
        return;
    tw_prefix_cache_free(c->mem);
    free(c);
}

static bool may_read(tw_cache_mode m) { return m == TW_CACHE_USE || m == TW_CACHE_READ_ONLY; }
static bool may_write(tw_cache_mode m) { return m == TW_CACHE_USE || m == TW_CACHE_WRITE_ONLY; }

/* Replaces seq's state with a longer prefix from disk when there is one. */
static size_t restore_from_disk(engine_cache *c, tw_seq *seq, const uint32_t *prompt,
                                size_t usable, size_t have)
{
    size_t top = usable / B * B;
    if (top <= have)
        return 0;
    atomic_fetch_add(&c->disk_lookups, 1);
    void *blob = NULL;
    size_t len = 0, n = 0;
    tw_err err;
    tw_status st = tw_state_store_lookup(c->store, c->fingerprint, prompt, top, B, have + B,
                                         &blob, &len, &n, &err);
    if (st != TW_OK) {
        if (st != TW_NOT_FOUND)
            tw_warn("state store lookup: %s", err.msg);
        return 0;
    }
    size_t got = 0;
    st = tw_seq_state_import(seq, blob, len, &got, &err);
    free(blob);
    if (st != TW_OK || got != n) {
        tw_warn("state store: entry of %zu tokens does not restore: %s", n, err.msg);
        return 0;
    }
    atomic_fetch_add(&c->disk_hits, 1);
    return got;
}

/* Hands the state seq holds now to the store's writer thread. */
static void save_to_disk(engine_cache *c, const tw_seq *seq, const uint32_t *prompt)
{
    size_t len = tw_seq_len(seq), bytes;
    tw_err err;
    /* K/V as the sequence stores it: exact, and half the bytes for f16 */
    tw_seq_state_format fmt = tw_model_get_info(c->model)->kv_type == TW_KV_F16
                                  ? TW_SEQ_STATE_F16
                                  : TW_SEQ_STATE_F32;
    if (tw_seq_state_size(c->model, len, fmt, &bytes, &err) != TW_OK)
        return;
    void *blob = malloc(bytes);
    if (!blob) {
        tw_warn("state store: no memory to save a %zu-token prefix", len);
        return;
    }
    if (tw_seq_state_export(seq, len, fmt, blob, bytes, NULL, &err) != TW_OK) {
        free(blob);
        tw_warn("state store: %s", err.msg);
        return;
    }
    if (tw_state_store_put_async(c->store, c->fingerprint, prompt, len, blob, bytes, &err) != TW_OK)
        tw_warn("state store: %s", err.msg);
}

size_t engine_cache_admit(engine_cache *c, engine_cache_slot *cs, tw_seq *seq,
                          const uint32_t *prompt, size_t n, tw_cache_mode mode, bool persist)
{
    memset(cs, 0, sizeof *cs);
    cs->mode = mode;
    cs->prompt_len = n;
    tw_seq_reset(seq);
    if (!c || n < 2)
        return 0;
    size_t usable = n - 1; /* the last prompt token is always computed */
    size_t got = 0, disk = 0;
    tw_err err;
    if (may_read(mode)) {
        if (c->mem) {
            atomic_fetch_add(&c->lookups, 1);
            if (tw_prefix_cache_restore(c->mem, seq, prompt, n, usable, &got, &err) != TW_OK)
                got = 0;
            if (got)
                atomic_fetch_add(&c->hits, 1);
        }
        if (c->store) {
            disk = restore_from_disk(c, seq, prompt, usable, got);
            if (disk) {
                got = disk;
                /* Keep it in memory too: the next request hits there. */
                if (c->mem && may_write(mode))
                    tw_prefix_cache_insert(c->mem, seq, prompt, true, NULL, &err);
            }
        }
        if (!got)
            tw_seq_reset(seq);
    }
    cs->reused = got;
    atomic_fetch_add(&c->tokens_reused, got);
    bool to_disk = persist || (c->persist_min && n >= c->persist_min);
    if (c->store && may_write(mode) && to_disk && n / B * B > got)
        cs->disk_at = n / B * B;
    else if (c->store && may_write(mode) && to_disk && got && got == n / B * B && !disk)
        save_to_disk(c, seq, prompt); /* memory had all of it; the disk may not */
    return got;
}

size_t engine_cache_chunk_end(const engine_cache *c, const engine_cache_slot *cs, size_t pos,
                              size_t n_prompt, size_t chunk)
{
    size_t end = (pos / chunk + 1) * chunk;
    if (end > n_prompt)
        end = n_prompt;
    if (!c || !may_write(cs->mode))
        return end;
    if (c->mem)
        end = tw_prefix_cache_next_stop(c->mem, pos, end, n_prompt, cs->mark);
    if (cs->disk_at > pos && cs->disk_at < end)
        end = cs->disk_at;
    return end;
}

void engine_cache_after_chunk(engine_cache *c, engine_cache_slot *cs, const tw_seq *seq,
                              const uint32_t *prompt)
{
    if (!c || !may_write(cs->mode))
        return;
    size_t len = tw_seq_len(seq);
    tw_err err;
    if (c->mem) {
        bool snap = tw_prefix_cache_wants_snapshot(c->mem, len, cs->prompt_len, cs->mark);
        if (tw_prefix_cache_insert(c->mem, seq, prompt, snap, NULL, &err) != TW_OK)
            tw_warn("prefix cache: %s", err.msg);
    }
    if (cs->disk_at && len == cs->disk_at) {
        cs->disk_at = 0;
        save_to_disk(c, seq, prompt);
    }
}

void engine_cache_get_counts(engine_cache *c, engine_cache_counts *out)
{
    memset(out, 0, sizeof *out);
    if (!c)
        return;
    out->lookups = atomic_load(&c->lookups);
    out->hits = atomic_load(&c->hits);
    out->disk_lookups = atomic_load(&c->disk_lookups);
    out->disk_hits = atomic_load(&c->disk_hits);
    out->tokens_reused = atomic_load(&c->tokens_reused);
    if (c->mem) {
        tw_prefix_cache_stats st;
        tw_prefix_cache_get_stats(c->mem, &st);
        out->bytes = st.bytes;
        out->tokens_mapped = st.tokens_mapped;
    }
}

tw_state_store *engine_cache_open_store(const tw_engine_opts *o)
{
    if (o->no_state_store)
        return NULL;
    tw_state_store_opts so = {.dir = o->state_dir, .max_bytes = o->state_bytes,
                              .max_entries = o->state_entries};
    tw_state_store *s = NULL;
    tw_err err;
    if (tw_state_store_open(&so, &s, &err) != TW_OK) {
        tw_warn("persistent state store off: %s", err.msg);
        return NULL;
    }
    tw_info("persistent state store in %s", tw_state_store_dir(s));
    return s;
}

engine_cache *engine_cache_for_model(tw_model *model, const char *fingerprint,
                                     const tw_engine_opts *o, tw_state_store *store)
{
    engine_cache_config cfg = {
        .cache_bytes = o->cache_bytes,
        .no_prefix_cache = o->no_prefix_cache,
        .copy_kv = o->prefix_cache_copy,
        .store = store,
        .persist_min_tokens = o->persist_min_tokens == UINT32_MAX ? 0
                              : o->persist_min_tokens             ? o->persist_min_tokens
                                                                  : 4096,
    };
    engine_cache *c = NULL;
    tw_err err;
    if (engine_cache_create(model, fingerprint, &cfg, &c, &err) != TW_OK) {
        tw_warn("prompt caches off for this model: %s", err.msg);
        return NULL;
    }
    return c;
}

void engine_cache_add_stats(engine_cache *c, tw_engine_stats *out)
{
    engine_cache_counts k;
    engine_cache_get_counts(c, &k);
    out->prefix_cache_lookups += k.lookups;
    out->prefix_cache_hits += k.hits;
    out->state_store_lookups += k.disk_lookups;
    out->state_store_hits += k.disk_hits;
    out->cached_tokens_total += k.tokens_reused;
    out->cached_tokens_shared += k.tokens_mapped;
    out->prefix_cache_bytes += k.bytes;
    out->state_bytes += k.bytes; /* the cache holds K/V and recurrent states */
}

void engine_cache_store_stats(tw_state_store *store, tw_engine_stats *out)
{
    if (!store)
        return;
    tw_state_store_stats st;
    tw_state_store_get_stats(store, &st);
    out->state_store_bytes = st.bytes;
    out->state_store_entries = st.entries;
}
