/* How the engine uses tw/spec.h: draft models beside their targets, the
 * per-request policy, and the counters that reach Usage and StatsReply. */
#include <stdio.h>
#include <string.h>

#include "engine_internal.h"
#include "tw/spec.h"

tw_status engine_load_draft(model_entry *m, const char *path, const tw_model_opts *mo,
                            tw_err *err)
{
    if (strlen(path) >= sizeof m->draft_path)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "draft path longer than %zu bytes",
                         sizeof m->draft_path - 1);
    tw_status st = tw_model_load(path, mo, &m->draft, err);
    if (st != TW_OK)
        return tw_error_wrap(err, st, "draft model");
    uint32_t dv = tw_model_get_info(m->draft)->vocab_size;
    uint32_t tv = tw_model_get_info(m->model)->vocab_size;
    if (dv != tv) {
        tw_model_free(m->draft);
        m->draft = NULL;
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "draft model %s has %u tokens, the target %u: they must share the "
                         "vocabulary",
                         path, dv, tv);
    }
    snprintf(m->draft_path, sizeof m->draft_path, "%s", path);
    return TW_OK;
}

float engine_spec_speedup(uint64_t spec_tokens, uint64_t spec_us, uint64_t plain_tokens,
                          uint64_t plain_us)
{
    if (!spec_tokens || !spec_us || !plain_tokens || !plain_us)
        return 0.0f;
    double spec = (double)spec_us / (double)spec_tokens;
    double plain = (double)plain_us / (double)plain_tokens;
    return (float)(plain / spec);
}

tw_status engine_spec_for_slot(const request *r, size_t max_tokens, uint64_t seed,
                               struct tw_spec **out, tw_err *err)
{
    *out = NULL;
    const tw_spec_opts *so = &r->speculative;
    model_entry *m = r->m;
    /* JSON answers and tool calls speculate too: verification masks each
     * row it walks after the tokens before it, so a round keeps to the
     * grammar and stays exact (a drafted token the grammar bans is just
     * refused) */
    if (so->mode == TW_SPEC_OFF || r->logprobs.enabled || r->logprobs.top_logprobs)
        return TW_OK;
    /* Auto keeps seeded sampling reproducible: its on/off decisions depend
     * on timing, so it only speculates where that cannot change the
     * output. */
    if (so->mode == TW_SPEC_AUTO && r->sampling.temperature != 0.0f)
        return TW_OK;
    tw_spec_opts_core o = {0};
    bool draft = so->mode == TW_SPEC_DRAFT || (so->mode == TW_SPEC_AUTO && m->draft);
    o.source = draft ? TW_SPEC_SOURCE_DRAFT : TW_SPEC_SOURCE_LOOKUP;
    o.max_draft = so->max_draft_tokens ? so->max_draft_tokens : 8;
    if (o.max_draft > TW_SPEC_MAX_DRAFT)
        o.max_draft = TW_SPEC_MAX_DRAFT;
    o.auto_pause = so->mode == TW_SPEC_AUTO;
    if (o.auto_pause)
        o.start_pause = m->spec_auto_pause[o.source];
    tw_spec *sp;
    tw_status st = tw_spec_create(m->model, draft ? m->draft : NULL, max_tokens, &o,
                                  &r->sampling, seed, &sp, err);
    if (st == TW_OK)
        st = tw_spec_reset(sp, r->prompt, r->n_prompt, err);
    if (st != TW_OK) {
        tw_spec_free(sp);
        return st;
    }
    *out = sp;
    return TW_OK;
}

static uint32_t sat32(uint64_t v) { return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v; }

void engine_spec_usage(const struct tw_spec *sp, tw_usage *u)
{
    if (!sp)
        return;
    tw_spec_counters c;
    tw_spec_get_counters(sp, &c);
    u->drafted_tokens = sat32((uint64_t)u->drafted_tokens + c.drafted);
    u->accepted_tokens = sat32((uint64_t)u->accepted_tokens + c.accepted);
}

void engine_spec_remember(const struct tw_spec *sp, model_entry *m)
{
    tw_spec_source src;
    uint32_t pause;
    if (sp && tw_spec_auto_verdict(sp, &src, &pause))
        m->spec_auto_pause[src] = pause;
}

void engine_spec_stats(const struct tw_spec *sp, model_stats *ms)
{
    if (!sp)
        return;
    tw_spec_counters c;
    tw_spec_get_counters(sp, &c);
    ms->spec_drafted += c.drafted;
    ms->spec_accepted += c.accepted;
    ms->spec_produced += c.produced;
    ms->spec_us += c.spec_us;
    ms->spec_plain_tokens += c.plain_tokens;
    ms->spec_plain_us += c.plain_us;
    ms->spec_rounds += c.rounds;
    ms->spec_snapshot_us += c.snapshot_us + c.rewind_us;
}
