/* Sampling: bias, penalties, temperature, truncation and the draw.
 * The processing order and the meaning of log-probabilities are documented in
 * tw/sampler.h; this file keeps to it step by step. */
#include "tw/sampler.h"
#include "tw/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cand {
    uint32_t id;
    float logit;
} cand;

struct tw_sampler {
    uint32_t vocab;
    tw_sampling_params p;
    tw_logit_bias *bias; /* owned copy of p.logit_bias */
    tw_rng rng;

    /* Penalty history: per-token counts over the window, and the list of
     * tokens with a non-zero count so a step touches only those. */
    uint32_t *seen;    /* occurrences, prompt and generated */
    uint32_t *gen;     /* occurrences, generated only */
    uint32_t *present; /* distinct tokens with seen > 0 */
    uint32_t *where;   /* index in present, or UINT32_MAX */
    uint32_t n_present;
    /* Recent tokens, oldest first from ring_head, when a window is set. The
     * top bit of an entry marks a generated token. */
    uint32_t *ring;
    uint32_t ring_cap, ring_len, ring_head;

    cand *cands; /* vocab entries: the truncation workspace */
    uint32_t n_kept;
};

#define GEN_BIT 0x80000000u

/* ------------------------------------------------------------------ rng */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void tw_rng_seed(tw_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t tw_rng_next(tw_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double tw_rng_uniform(tw_rng *r)
{
    return (double)(tw_rng_next(r) >> 11) * 0x1.0p-53;
}

/* ------------------------------------------------------------- params */

void tw_sampling_params_init(tw_sampling_params *p)
{
    memset(p, 0, sizeof *p);
    p->temperature = 1.0f;
    p->top_p = 1.0f;
    p->repetition_penalty = 1.0f;
}

tw_status tw_sampling_params_validate(const tw_sampling_params *p, uint32_t vocab_size,
                                      tw_err *err)
{
    if (!p)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "sampling parameters missing");
    if (!isfinite(p->temperature) || p->temperature < 0.0f)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "temperature must be finite and >= 0, got %g",
                         (double)p->temperature);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "top_p must be in (0, 1], got %g",
                         (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "min_p must be in [0, 1], got %g",
                         (double)p->min_p);
    if (!isfinite(p->repetition_penalty) || !(p->repetition_penalty > 0.0f))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "repetition_penalty must be > 0, got %g",
                         (double)p->repetition_penalty);
    if (!isfinite(p->presence_penalty) || fabsf(p->presence_penalty) > 1e4f)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "presence_penalty out of range: %g",
                         (double)p->presence_penalty);
    if (!isfinite(p->frequency_penalty) || fabsf(p->frequency_penalty) > 1e4f)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "frequency_penalty out of range: %g",
                         (double)p->frequency_penalty);
    if (p->n_logit_bias && !p->logit_bias)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "logit_bias count without entries");
    if (vocab_size && p->n_logit_bias > vocab_size)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%zu logit biases for a vocabulary of %u",
                         p->n_logit_bias, vocab_size);
    for (size_t i = 0; i < p->n_logit_bias; i++) {
        const tw_logit_bias *b = &p->logit_bias[i];
        if (vocab_size && b->token_id >= vocab_size)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "logit_bias[%zu]: token %u outside the vocabulary (%u)", i,
                             b->token_id, vocab_size);
        if (isnan(b->bias))
            return tw_errorf(err, TW_INVALID_ARGUMENT, "logit_bias[%zu]: bias is NaN", i);
    }
    return TW_OK;
}

/* ------------------------------------------------------------- lifetime */

tw_status tw_sampler_create(uint32_t vocab_size, tw_sampler **out, tw_err *err)
{
    if (!out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "sampler: out is NULL");
    *out = NULL;
    if (vocab_size == 0 || vocab_size >= GEN_BIT)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "sampler: bad vocabulary size %u", vocab_size);
    tw_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "sampler: out of memory");
    s->vocab = vocab_size;
    s->seen = calloc(vocab_size, sizeof *s->seen);
    s->gen = calloc(vocab_size, sizeof *s->gen);
    s->present = calloc(vocab_size, sizeof *s->present);
    s->where = malloc((size_t)vocab_size * sizeof *s->where);
    s->cands = malloc((size_t)vocab_size * sizeof *s->cands);
    if (!s->seen || !s->gen || !s->present || !s->where || !s->cands) {
        tw_sampler_destroy(s);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "sampler: out of memory for %u tokens",
                         vocab_size);
    }
    memset(s->where, 0xff, (size_t)vocab_size * sizeof *s->where);
    tw_sampling_params_init(&s->p);
    tw_rng_seed(&s->rng, 0);
    *out = s;
    return TW_OK;
}

void tw_sampler_destroy(tw_sampler *s)
{
    if (!s)
        return;
    free(s->bias);
    free(s->seen);
    free(s->gen);
    free(s->present);
    free(s->where);
    free(s->ring);
    free(s->cands);
    free(s);
}

static void clear_history(tw_sampler *s)
{
    for (uint32_t i = 0; i < s->n_present; i++) {
        uint32_t t = s->present[i];
        s->seen[t] = 0;
        s->gen[t] = 0;
        s->where[t] = UINT32_MAX;
    }
    s->n_present = 0;
    s->ring_len = 0;
    s->ring_head = 0;
}

tw_status tw_sampler_configure(tw_sampler *s, const tw_sampling_params *p, uint64_t seed,
                               tw_err *err)
{
    tw_status st = tw_sampling_params_validate(p, s->vocab, err);
    if (st != TW_OK)
        return st;
    clear_history(s);
    /* A window as long as the vocabulary's worth of tokens or more still
     * needs a ring, but never more entries than can be counted. */
    uint32_t window = p->penalty_window;
    if (window != s->ring_cap) {
        free(s->ring);
        s->ring = NULL;
        s->ring_cap = 0;
        if (window) {
            s->ring = malloc((size_t)window * sizeof *s->ring);
            if (!s->ring)
                return tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                                 "sampler: out of memory for a penalty window of %u", window);
            s->ring_cap = window;
        }
    }
    free(s->bias);
    s->bias = NULL;
    if (p->n_logit_bias) {
        s->bias = malloc(p->n_logit_bias * sizeof *s->bias);
        if (!s->bias)
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "sampler: out of memory");
        memcpy(s->bias, p->logit_bias, p->n_logit_bias * sizeof *s->bias);
    }
    s->p = *p;
    s->p.logit_bias = s->bias;
    tw_rng_seed(&s->rng, seed);
    s->n_kept = 0;
    return TW_OK;
}

/* ------------------------------------------------------------- history */

static void count_add(tw_sampler *s, uint32_t t, bool generated)
{
    if (s->seen[t]++ == 0) {
        s->where[t] = s->n_present;
        s->present[s->n_present++] = t;
    }
    if (generated)
        s->gen[t]++;
}

static void count_remove(tw_sampler *s, uint32_t t, bool generated)
{
    if (generated)
        s->gen[t]--;
    if (--s->seen[t] == 0) {
        uint32_t i = s->where[t];
        uint32_t last = s->present[--s->n_present];
        s->present[i] = last;
        s->where[last] = i;
        s->where[t] = UINT32_MAX;
    }
}

void tw_sampler_accept(tw_sampler *s, const uint32_t *tokens, size_t n, bool generated)
{
    if (s->ring_cap && n > s->ring_cap) {
        tokens += n - s->ring_cap; /* only the window's worth can count */
        n = s->ring_cap;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t t = tokens[i];
        if (t >= s->vocab)
            continue;
        if (s->ring_cap) {
            if (s->ring_len == s->ring_cap) {
                uint32_t old = s->ring[s->ring_head];
                count_remove(s, old & ~GEN_BIT, (old & GEN_BIT) != 0);
                s->ring[s->ring_head] = t | (generated ? GEN_BIT : 0);
                s->ring_head = (s->ring_head + 1) % s->ring_cap;
            } else {
                s->ring[(s->ring_head + s->ring_len) % s->ring_cap] = t | (generated ? GEN_BIT : 0);
                s->ring_len++;
            }
        }
        count_add(s, t, generated);
    }
}

/* ------------------------------------------------------------- helpers */

/* Orders candidates best first; ties go to the smaller id so every selection
 * is a deterministic function of the logits. */
static inline bool better(const cand *a, const cand *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static inline void swap_cand(cand *a, cand *b)
{
    cand t = *a;
    *a = *b;
    *b = t;
}

/* Moves the k best of c[0..n) into c[0..k) (in no particular order):
 * iterative quickselect with a median-of-three pivot. */
static void select_top(cand *c, uint32_t n, uint32_t k)
{
    if (k == 0 || k >= n)
        return;
    uint32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (better(&c[mid], &c[lo]))
            swap_cand(&c[mid], &c[lo]);
        if (better(&c[hi], &c[lo]))
            swap_cand(&c[hi], &c[lo]);
        if (better(&c[hi], &c[mid]))
            swap_cand(&c[hi], &c[mid]);
        cand pivot = c[mid];
        swap_cand(&c[mid], &c[hi]);
        uint32_t store = lo;
        for (uint32_t i = lo; i < hi; i++)
            if (better(&c[i], &pivot))
                swap_cand(&c[i], &c[store++]);
        swap_cand(&c[store], &c[hi]);
        if (store == k - 1 || store == k)
            return;
        if (store > k)
            hi = store - 1;
        else
            lo = store + 1;
    }
}

static int cmp_cand(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (better(x, y))
        return -1;
    if (better(y, x))
        return 1;
    return 0;
}

/* Inserts (id, lp) into a best-first list of at most cap entries. */
static void top_insert(tw_top_logprob *top, uint32_t *n, uint32_t cap, uint32_t id, float lp)
{
    if (cap == 0)
        return;
    if (*n == cap && !(lp > top[cap - 1].logprob))
        return;
    uint32_t i = *n < cap ? (*n)++ : cap - 1;
    while (i > 0 && lp > top[i - 1].logprob) {
        top[i] = top[i - 1];
        i--;
    }
    top[i].token_id = id;
    top[i].logprob = lp;
    top[i].text = NULL;
    top[i].text_len = 0;
}

static float row_max(const float *row, uint32_t n)
{
    float m = -INFINITY;
    for (uint32_t i = 0; i < n; i++)
        if (row[i] > m)
            m = row[i];
    return m;
}

/* log(sum(exp(row))) accumulated in double so 150k terms lose nothing. */
static double row_logsumexp(const float *row, uint32_t n, float max)
{
    if (max == -INFINITY)
        return -INFINITY;
    double sum = 0.0;
    for (uint32_t i = 0; i < n; i++)
        sum += exp((double)row[i] - (double)max);
    return (double)max + log(sum);
}

void tw_logprobs_of_row(const float *row, uint32_t vocab_size, uint32_t token, uint32_t n_top,
                        float *logprob, tw_top_logprob *top)
{
    if (n_top > TW_MAX_TOP_LOGPROBS)
        n_top = TW_MAX_TOP_LOGPROBS;
    float max = row_max(row, vocab_size);
    double lse = row_logsumexp(row, vocab_size, max);
    if (logprob)
        *logprob = token < vocab_size ? (float)((double)row[token] - lse) : -INFINITY;
    if (!top || n_top == 0)
        return;
    uint32_t n = 0;
    for (uint32_t i = 0; i < vocab_size; i++)
        top_insert(top, &n, n_top, i, row[i]);
    for (uint32_t i = 0; i < n; i++)
        top[i].logprob = (float)((double)top[i].logprob - lse);
}

/* ------------------------------------------------------------- a step */

/* Steps 1 and 2: sanitise, bias, penalise. Returns the raw arg-max, the
 * fallback when everything ends up banned. */
static uint32_t process_logits(tw_sampler *s, float *logits)
{
    uint32_t raw_best = (uint32_t)tw_argmax_f32(logits, s->vocab);
    for (size_t i = 0; i < s->p.n_logit_bias; i++) {
        const tw_logit_bias *b = &s->bias[i];
        logits[b->token_id] = b->bias <= -100.0f ? -INFINITY : logits[b->token_id] + b->bias;
    }
    float rep = s->p.repetition_penalty;
    float pres = s->p.presence_penalty, freq = s->p.frequency_penalty;
    if (rep != 1.0f || pres != 0.0f || freq != 0.0f) {
        for (uint32_t i = 0; i < s->n_present; i++) {
            uint32_t t = s->present[i];
            float l = logits[t];
            if (rep != 1.0f)
                l = l > 0.0f ? l / rep : l * rep;
            if (s->gen[t])
                l -= pres + (float)s->gen[t] * freq;
            logits[t] = l;
        }
    }
    return raw_best;
}

/* The greedy token after steps 1 and 2: the raw arg-max process_logits
 * found, unless a bias or a penalty moved the logits since. */
static uint32_t greedy_best(const tw_sampler *s, float *logits, uint32_t raw_best)
{
    bool moved = s->p.n_logit_bias || s->p.repetition_penalty != 1.0f ||
                 s->p.presence_penalty != 0.0f || s->p.frequency_penalty != 0.0f;
    return moved ? (uint32_t)tw_argmax_f32(logits, s->vocab) : raw_best;
}

/* Step 4: fills s->cands[0..n_kept) with what top-k, top-p and min-p keep. */
static void truncate_candidates(tw_sampler *s, const float *logits, float max)
{
    cand *c = s->cands;
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->vocab; i++) {
        if (logits[i] == -INFINITY)
            continue;
        c[n].id = i;
        c[n].logit = logits[i];
        n++;
    }
    bool sorted = false;
    if (s->p.top_k && s->p.top_k < n) {
        select_top(c, n, s->p.top_k);
        n = s->p.top_k;
    }
    if (s->p.top_p < 1.0f && n > 1) {
        /* Avoid sorting the whole vocabulary: the nucleus is nearly always
         * among the best few dozen tokens, so select a growing head until
         * it carries top_p of the mass, then sort only that head. */
        double sum = 0.0;
        for (uint32_t i = 0; i < n; i++)
            sum += exp((double)c[i].logit - (double)max);
        double norm = (double)max + log(sum);
        uint32_t head = n;
        for (uint32_t k = 64; k < n; k *= 2) {
            select_top(c, n, k);
            double mass = 0.0;
            for (uint32_t i = 0; i < k; i++)
                mass += exp((double)c[i].logit - norm);
            if (mass >= (double)s->p.top_p) {
                head = k;
                break;
            }
        }
        qsort(c, head, sizeof *c, cmp_cand);
        sorted = true;
        double cum = 0.0;
        uint32_t keep = head;
        for (uint32_t i = 0; i < head; i++) {
            cum += exp((double)c[i].logit - norm);
            if (cum >= (double)s->p.top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    if (s->p.min_p > 0.0f && n > 1) {
        /* Relative to the best surviving token, which is the global best. */
        float best = sorted ? c[0].logit : -INFINITY;
        if (!sorted)
            for (uint32_t i = 0; i < n; i++)
                if (c[i].logit > best)
                    best = c[i].logit;
        float cut = best + logf(s->p.min_p);
        uint32_t m = 0;
        for (uint32_t i = 0; i < n; i++)
            if (c[i].logit >= cut)
                c[m++] = c[i];
        n = m;
    }
    s->n_kept = n;
}

static uint32_t draw(tw_sampler *s, float max)
{
    const cand *c = s->cands;
    double sum = 0.0;
    for (uint32_t i = 0; i < s->n_kept; i++)
        sum += exp((double)c[i].logit - (double)max);
    double r = tw_rng_uniform(&s->rng) * sum;
    double acc = 0.0;
    for (uint32_t i = 0; i < s->n_kept; i++) {
        acc += exp((double)c[i].logit - (double)max);
        if (r < acc)
            return c[i].id;
    }
    return c[s->n_kept - 1].id; /* r landed on the rounding edge */
}

/* Step 3's scaling (greedy reads the logits unscaled). */
static void apply_temperature(const tw_sampler *s, float *logits)
{
    if (s->p.temperature == 0.0f || s->p.temperature == 1.0f)
        return;
    float inv = 1.0f / s->p.temperature;
    for (uint32_t i = 0; i < s->vocab; i++)
        logits[i] *= inv;
}

/* The n_top best of the processed logits as log-probabilities. */
static uint32_t best_alternatives(const tw_sampler *s, const float *logits, double lse,
                                  uint32_t n_top, tw_top_logprob *top)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->vocab; i++)
        top_insert(top, &n, n_top, i, logits[i]);
    for (uint32_t i = 0; i < n; i++)
        top[i].logprob = (float)((double)top[i].logprob - lse);
    return n;
}

void tw_sampler_sample(tw_sampler *s, float *logits, bool want_logprob, uint32_t n_top,
                       tw_sample_result *out)
{
    if (n_top > TW_MAX_TOP_LOGPROBS)
        n_top = TW_MAX_TOP_LOGPROBS;
    out->n_top = 0;
    out->logprob = 0.0f;
    uint32_t raw_best = process_logits(s, logits);

    bool greedy = s->p.temperature == 0.0f;
    apply_temperature(s, logits);
    /* Greedy needs only the arg-max, and it finds the maximum too. */
    uint32_t best = greedy ? greedy_best(s, logits, raw_best) : 0;
    float max = greedy ? logits[best] : row_max(logits, s->vocab);
    if (max == -INFINITY || !isfinite(max)) {
        /* Everything banned (or an overflowing bias): fall back to the raw
         * arg-max so a step always yields a valid id. */
        out->token = raw_best;
        s->cands[0].id = raw_best;
        s->cands[0].logit = 0.0f;
        s->n_kept = 1;
        return;
    }
    bool need_lse = want_logprob || n_top;
    double lse = need_lse ? row_logsumexp(logits, s->vocab, max) : 0.0;

    if (greedy) {
        out->token = best;
        s->cands[0].id = out->token;
        s->cands[0].logit = logits[out->token];
        s->n_kept = 1;
    } else {
        truncate_candidates(s, logits, max);
        out->token = draw(s, max);
    }
    if (want_logprob)
        out->logprob = (float)((double)logits[out->token] - lse);
    if (n_top)
        out->n_top = best_alternatives(s, logits, lse, n_top, out->top);
}

void tw_sampler_score(tw_sampler *s, float *logits, uint32_t token, uint32_t n_top,
                      tw_sample_result *out)
{
    if (n_top > TW_MAX_TOP_LOGPROBS)
        n_top = TW_MAX_TOP_LOGPROBS;
    out->token = token;
    out->n_top = 0;
    out->logprob = -INFINITY;
    process_logits(s, logits);
    apply_temperature(s, logits);
    float max = row_max(logits, s->vocab);
    if (!isfinite(max))
        return; /* everything banned: no distribution to place the token in */
    double lse = row_logsumexp(logits, s->vocab, max);
    if (token < s->vocab)
        out->logprob = (float)((double)logits[token] - lse);
    if (n_top)
        out->n_top = best_alternatives(s, logits, lse, n_top, out->top);
}

size_t tw_sampler_last_kept(const tw_sampler *s, uint32_t *ids, size_t cap)
{
    size_t n = s->n_kept < cap ? s->n_kept : cap;
    for (size_t i = 0; i < n; i++)
        ids[i] = s->cands[i].id;
    return s->n_kept;
}

void tw_sampler_probs(tw_sampler *s, float *logits, float *probs)
{
    uint32_t raw_best = process_logits(s, logits);
    bool greedy = s->p.temperature == 0.0f;
    if (!greedy && s->p.temperature != 1.0f) {
        float inv = 1.0f / s->p.temperature;
        for (uint32_t i = 0; i < s->vocab; i++)
            logits[i] *= inv;
    }
    memset(probs, 0, (size_t)s->vocab * sizeof *probs);
    uint32_t best = greedy ? greedy_best(s, logits, raw_best) : 0;
    float max = greedy ? logits[best] : row_max(logits, s->vocab);
    if (max == -INFINITY || !isfinite(max)) {
        probs[raw_best] = 1.0f;
        s->cands[0].id = raw_best;
        s->n_kept = 1;
        return;
    }
    if (greedy) {
        uint32_t t = best;
        probs[t] = 1.0f;
        s->cands[0].id = t;
        s->n_kept = 1;
        return;
    }
    truncate_candidates(s, logits, max);
    double sum = 0.0;
    for (uint32_t i = 0; i < s->n_kept; i++)
        sum += exp((double)s->cands[i].logit - (double)max);
    for (uint32_t i = 0; i < s->n_kept; i++)
        probs[s->cands[i].id] = (float)(exp((double)s->cands[i].logit - (double)max) / sum);
}
