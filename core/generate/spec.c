/* One sequence's speculator: proposals (draft model or prompt lookup), the
 * verification pass, the rewind after a partial acceptance, the adaptive
 * draft length and the pause-and-probe policy. The contract is in
 * tw/spec.h. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spec_length.h"
#include "tw/spec.h"

#define EMA_ALPHA 0.25
/* Auto policy: plain steps measured before the first round, rounds measured
 * before a verdict, and the range of pause lengths (in decode steps). */
#define AUTO_WARMUP_STEPS 3
#define AUTO_PROBE_ROUNDS 4
#define AUTO_PAUSE_MIN 16
#define AUTO_PAUSE_MAX 512
/* Auto with a draft model proposes from prompt lookup instead, for free,
 * when an earlier occurrence agrees on at least this many tokens: the
 * output is copying, and a copy is predicted better than a draft model
 * predicts it. */
#define AUTO_LOOKUP_MIN_KEY 4

struct tw_spec {
    tw_model *target, *draft;
    tw_spec_opts_core o;
    uint32_t vocab;
    size_t cap;

    uint32_t *hist; /* tokens in the target sequence, then room for t0 */
    size_t n_hist;

    tw_snapshot_pool *trail; /* target states after each verified row */
    tw_seq *dseq;            /* the draft's sequence */
    tw_snapshot_pool *dsnap; /* draft states after each proposal step */
    tw_sampler *dsampler;
    bool greedy_draft; /* the draft's distributions are one token each */
    float *dlogits; /* [vocab] */
    float *q;       /* [max_draft][vocab] proposal distributions */
    float *p;       /* [vocab] */
    float *rows;    /* [max_draft + 1][vocab] verification logits */

    uint32_t toks[TW_SPEC_MAX_DRAFT + 1]; /* t0, then the proposals */
    size_t k;                             /* proposals this round */
    bool round_lookup;                    /* this round's proposals came from lookup */
    spec_length len;                      /* the adaptive k */
    uint64_t t_round;
    bool in_round;
    tw_rng rng;
    tw_spec_counters c;

    /* policy */
    double plain_us_tok, spec_us_tok; /* EMAs, 0: no sample yet */
    uint32_t plain_samples, probe_rounds;
    uint32_t pause_left, pause_len;
    bool has_verdict;
    uint32_t verdict_pause; /* 0: speculation paid off */
};

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static double ema(double old, double x)
{
    return old > 0.0 ? old + EMA_ALPHA * (x - old) : x;
}

tw_status tw_spec_create(tw_model *target, tw_model *draft, size_t max_tokens,
                         const tw_spec_opts_core *opts, const tw_sampling_params *sampling,
                         uint64_t seed, tw_spec **out, tw_err *err)
{
    if (!out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "spec: out is NULL");
    *out = NULL;
    if (!target || !opts || !sampling)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "spec: target, options and sampling needed");
    const tw_model_info *ti = tw_model_get_info(target);
    if (opts->source == TW_SPEC_SOURCE_DRAFT) {
        if (!draft)
            return tw_errorf(err, TW_FAILED_PRECONDITION, "spec: no draft model loaded");
        if (tw_model_get_info(draft)->vocab_size != ti->vocab_size)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "spec: draft vocabulary (%u) differs from the target's (%u)",
                             tw_model_get_info(draft)->vocab_size, ti->vocab_size);
    } else {
        draft = NULL;
    }
    if (opts->max_draft > TW_SPEC_MAX_DRAFT)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "spec: max_draft %u exceeds %d",
                         opts->max_draft, TW_SPEC_MAX_DRAFT);
    size_t cap = max_tokens ? max_tokens : ti->max_context;
    if (cap > ti->max_context)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "spec: %zu tokens exceed max_context %zu",
                         cap, ti->max_context);

    tw_spec *sp = calloc(1, sizeof *sp);
    if (!sp)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "spec: out of memory");
    sp->target = target;
    sp->draft = draft;
    sp->o = *opts;
    uint32_t maxk = opts->max_draft ? opts->max_draft : 8;
    size_t verify_rows = tw_model_max_verify(target);
    if (verify_rows < 2) {
        free(sp);
        return tw_errorf(err, TW_FAILED_PRECONDITION,
                         "spec: the model verifies at most %zu rows per pass", verify_rows);
    }
    if (maxk + 1 > verify_rows)
        maxk = (uint32_t)verify_rows - 1;
    sp->o.max_draft = maxk;
    /* greedy output does not depend on k, so only there may the clock pick it */
    spec_length_init(&sp->len, opts->fixed_k ? maxk : (opts->start_draft ? opts->start_draft : 4),
                     maxk, !opts->fixed_k && sampling->temperature == 0.0f);
    sp->vocab = ti->vocab_size;
    sp->cap = cap;
    size_t V = sp->vocab;
    tw_status st = TW_OK;
    sp->hist = malloc((cap + 1) * sizeof *sp->hist);
    sp->p = malloc(V * sizeof *sp->p);
    sp->rows = malloc((maxk + 1) * V * sizeof *sp->rows);
    if (!sp->hist || !sp->p || !sp->rows) {
        st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "spec: out of memory");
        goto fail;
    }
    st = tw_snapshot_pool_create(target, maxk + 1, &sp->trail, err);
    if (st)
        goto fail;
    if (draft) {
        size_t dcap = tw_model_get_info(draft)->max_context;
        if (dcap > cap)
            dcap = cap;
        sp->dlogits = malloc(V * sizeof *sp->dlogits);
        sp->q = malloc(maxk * V * sizeof *sp->q);
        if (!sp->dlogits || !sp->q) {
            st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "spec: out of memory");
            goto fail;
        }
        st = tw_seq_create(draft, dcap, &sp->dseq, err);
        if (!st)
            st = tw_snapshot_pool_create(draft, maxk, &sp->dsnap, err);
        if (!st)
            st = tw_sampler_create(sp->vocab, &sp->dsampler, err);
        if (!st)
            st = tw_sampler_configure(sp->dsampler, sampling, seed ^ 0x5bd1e995u, err);
        if (st)
            goto fail;
        sp->greedy_draft = sampling->temperature == 0.0f;
    }
    tw_rng_seed(&sp->rng, seed);
    sp->pause_len = AUTO_PAUSE_MIN;
    sp->pause_left = opts->auto_pause ? AUTO_WARMUP_STEPS : 0;
    if (opts->auto_pause && opts->start_pause > AUTO_WARMUP_STEPS) {
        /* resume a losing verdict: the next failed probe pauses longer */
        uint32_t p = opts->start_pause > AUTO_PAUSE_MAX ? AUTO_PAUSE_MAX : opts->start_pause;
        sp->pause_left = p;
        sp->pause_len = p * 2 > AUTO_PAUSE_MAX ? AUTO_PAUSE_MAX : p * 2;
    }
    *out = sp;
    return TW_OK;
fail:
    tw_spec_free(sp);
    return st;
}

void tw_spec_free(tw_spec *sp)
{
    if (!sp)
        return;
    tw_snapshot_pool_free(sp->trail);
    tw_snapshot_pool_free(sp->dsnap);
    tw_seq_free(sp->dseq);
    tw_sampler_destroy(sp->dsampler);
    free(sp->hist);
    free(sp->p);
    free(sp->rows);
    free(sp->dlogits);
    free(sp->q);
    free(sp);
}

tw_status tw_spec_reset(tw_spec *sp, const uint32_t *tokens, size_t n, tw_err *err)
{
    if (n > sp->cap)
        return tw_errorf(err, TW_OUT_OF_RANGE, "spec: %zu tokens exceed %zu", n, sp->cap);
    if (n)
        memcpy(sp->hist, tokens, n * sizeof *tokens);
    sp->n_hist = n;
    if (sp->dseq)
        tw_seq_reset(sp->dseq);
    sp->in_round = false;
    return TW_OK;
}

void tw_spec_push(tw_spec *sp, const uint32_t *tokens, size_t n)
{
    if (n > sp->cap - sp->n_hist)
        n = sp->cap - sp->n_hist;
    memcpy(sp->hist + sp->n_hist, tokens, n * sizeof *tokens);
    sp->n_hist += n;
}

void tw_spec_plain_time(tw_spec *sp, uint64_t us)
{
    sp->c.plain_tokens++;
    sp->c.plain_us += us;
    sp->plain_us_tok = ema(sp->plain_us_tok, (double)us);
    sp->plain_samples++;
}

/* The draft's proposal i into toks[i + 1], its state kept as snapshot i,
 * from the logits of its last step in dlogits. */
static tw_status take_proposal(tw_spec *sp, size_t i, tw_err *err)
{
    uint64_t t = now_us();
    tw_status st = tw_seq_snapshot(sp->dseq, sp->dsnap, i, err);
    sp->c.snapshot_us += now_us() - t;
    if (st)
        return st;
    size_t V = sp->vocab;
    tw_sampler_probs(sp->dsampler, sp->dlogits, sp->q + i * V);
    /* a one-token distribution is the token the sampler kept: no scan of
     * the vocabulary to draw it (greedy rounds draw nothing else) */
    uint32_t kept;
    if (sp->greedy_draft && tw_sampler_last_kept(sp->dsampler, &kept, 1) == 1)
        sp->toks[i + 1] = kept;
    else
        sp->toks[i + 1] = tw_spec_draw(sp->q + i * V, sp->vocab, &sp->rng);
    return TW_OK;
}

/* Proposes k tokens after t0 (toks[0]). The draft first takes the history
 * it has not seen: its prompt on the first round, as prefill work outside
 * the round's clock; after a fully kept round, the last proposal, which
 * goes in one pass with t0 (one read of the draft's weights instead of
 * two: the draft's output only proposes, the target decides). */
static size_t propose_draft(tw_spec *sp, tw_pool *pool, size_t k, tw_status *st, tw_err *err)
{
    size_t dlen = tw_seq_len(sp->dseq);
    if (dlen > sp->n_hist || sp->n_hist + k > tw_seq_capacity(sp->dseq))
        return 0;
    size_t i = 0;
    if (sp->n_hist - dlen > 1) {
        *st = tw_model_forward(sp->draft, pool, sp->dseq, sp->hist + dlen, sp->n_hist - dlen,
                               NULL, TW_LOGITS_NONE, err);
        sp->t_round = now_us();
    } else if (sp->n_hist - dlen == 1 && k > 0) {
        sp->hist[sp->n_hist] = sp->toks[0];
        *st = tw_model_forward(sp->draft, pool, sp->dseq, sp->hist + dlen, 2, sp->dlogits,
                               TW_LOGITS_LAST, err);
        if (!*st)
            *st = take_proposal(sp, i++, err);
    }
    for (; i < k && !*st; i++) {
        *st = tw_model_decode_batch(sp->draft, pool, &sp->dseq, &sp->toks[i], 1, sp->dlogits,
                                    err);
        if (!*st)
            *st = take_proposal(sp, i, err);
    }
    return *st ? 0 : k;
}

size_t tw_spec_propose(tw_spec *sp, tw_pool *pool, uint32_t t0, size_t room,
                       const uint32_t **drafts, tw_status *st, tw_err *err)
{
    *st = TW_OK;
    *drafts = sp->toks + 1;
    sp->k = 0;
    sp->in_round = false;
    if (sp->pause_left) {
        sp->pause_left--;
        return 0;
    }
    if (room < 2 || sp->n_hist + 1 > sp->cap)
        return 0;
    size_t k = spec_length_next(&sp->len);
    if (k + 1 > room)
        k = room - 1;
    sp->t_round = now_us();
    sp->toks[0] = t0;
    sp->round_lookup = false;
    if (sp->draft && sp->o.auto_pause) {
        sp->hist[sp->n_hist] = t0;
        size_t key, kl = tw_spec_lookup_key(sp->hist, sp->n_hist + 1, sp->toks + 1, k, &key);
        if (kl && key >= AUTO_LOOKUP_MIN_KEY) {
            sp->round_lookup = true;
            k = kl;
        }
    }
    if (sp->round_lookup) {
        /* proposed above */
    } else if (sp->draft) {
        k = propose_draft(sp, pool, k, st, err);
    } else {
        sp->hist[sp->n_hist] = t0;
        k = tw_spec_lookup(sp->hist, sp->n_hist + 1, sp->toks + 1, k);
    }
    if (k == 0)
        return 0;
    sp->k = k;
    sp->in_round = true;
    return k;
}

tw_status tw_spec_verify(tw_spec *sp, tw_pool *pool, tw_seq *seq, float **rows, tw_err *err)
{
    if (!sp->in_round)
        return tw_errorf(err, TW_FAILED_PRECONDITION, "spec: verify without a proposal");
    *rows = sp->rows;
    return tw_model_verify(sp->target, pool, seq, sp->toks, sp->k + 1, sp->rows, sp->trail,
                           err);
}

tw_status tw_spec_round_rows(tw_spec *sp, const uint32_t **tokens, size_t *n,
                             tw_snapshot_pool **trail, tw_err *err)
{
    if (!sp->in_round)
        return tw_errorf(err, TW_FAILED_PRECONDITION, "spec: no round to verify");
    *tokens = sp->toks;
    *n = sp->k + 1;
    *trail = sp->trail;
    return TW_OK;
}

uint32_t tw_spec_choose(tw_spec *sp, tw_sampler *target_sampler, size_t i, float *row,
                        bool *accepted)
{
    *accepted = false;
    tw_sampler_probs(target_sampler, row, sp->p);
    if (i >= sp->k)
        return tw_spec_draw(sp->p, sp->vocab, &sp->rng);
    const float *q = sp->draft && !sp->round_lookup ? sp->q + i * sp->vocab : NULL;
    return tw_spec_accept_step(sp->p, q, sp->vocab, sp->toks[i + 1], &sp->rng, accepted);
}

static void adapt(tw_spec *sp, size_t acc, uint64_t dt)
{
    if (!sp->o.fixed_k)
        spec_length_observe(&sp->len, (uint32_t)sp->k, (uint32_t)acc, dt);
    if (!sp->o.auto_pause)
        return;
    sp->spec_us_tok = ema(sp->spec_us_tok, (double)dt / (double)(acc + 1));
    if (++sp->probe_rounds < AUTO_PROBE_ROUNDS || sp->plain_samples == 0)
        return;
    if (sp->spec_us_tok > sp->plain_us_tok) {
        /* slower than plain decoding: pause, longer after each failed probe */
        sp->pause_left = sp->pause_len;
        sp->has_verdict = true;
        sp->verdict_pause = sp->pause_len;
        sp->pause_len = sp->pause_len * 2 > AUTO_PAUSE_MAX ? AUTO_PAUSE_MAX : sp->pause_len * 2;
        sp->probe_rounds = 0;
        sp->spec_us_tok = 0.0;
        sp->plain_us_tok = 0.0; /* re-measure the baseline during the pause */
        sp->plain_samples = 0;
    } else {
        sp->pause_len = AUTO_PAUSE_MIN;
        sp->has_verdict = true;
        sp->verdict_pause = 0;
    }
}

tw_status tw_spec_finish(tw_spec *sp, tw_seq *seq, size_t kept, tw_err *err)
{
    if (!sp->in_round)
        return tw_errorf(err, TW_FAILED_PRECONDITION, "spec: finish without a round");
    sp->in_round = false;
    if (kept < 1 || kept > sp->k + 1)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "spec: kept %zu of %zu rows", kept, sp->k + 1);
    uint64_t t0 = now_us();
    tw_status st = TW_OK;
    if (kept < sp->k + 1) {
        st = tw_seq_restore(seq, sp->trail, kept - 1, err);
        sp->c.rewinds++;
    }
    /* The draft fed t0 and the first k - 1 proposals; keep what the target
     * kept. A fully accepted round leaves the last proposal to catch up, and
     * a lookup round (the draft fed nothing) all of them. */
    if (!st && sp->dseq && !sp->round_lookup && kept < sp->k)
        st = tw_seq_restore(sp->dseq, sp->dsnap, kept - 1, err);
    uint64_t t1 = now_us();
    sp->c.rewind_us += t1 - t0;
    if (st)
        return st;
    tw_spec_push(sp, sp->toks, kept);
    size_t acc = kept - 1;
    uint64_t dt = t1 - sp->t_round;
    sp->c.rounds++;
    sp->c.drafted += sp->k;
    sp->c.accepted += acc;
    sp->c.produced += kept;
    sp->c.spec_us += dt;
    adapt(sp, acc, dt);
    return TW_OK;
}

void tw_spec_get_counters(const tw_spec *sp, tw_spec_counters *out) { *out = sp->c; }

bool tw_spec_auto_verdict(const tw_spec *sp, tw_spec_source *source, uint32_t *pause)
{
    *source = sp->draft ? TW_SPEC_SOURCE_DRAFT : TW_SPEC_SOURCE_LOOKUP;
    *pause = sp->verdict_pause;
    return sp->o.auto_pause && sp->has_verdict;
}
