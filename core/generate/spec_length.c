/* How many tokens a speculative round proposes. A round of k proposals
 * yields 1 + a + ... + a^k tokens on average, a being the chance that a
 * proposal is kept when the ones before it were, and costs T(k): k draft
 * steps (none for prompt lookup), a verification of k + 1 rows and the
 * rewind. The best k maximises yield / T(k), and T's growth with k is the
 * machine's: on a model that fits in cache, an extra verified row costs
 * about 0.15 of a decode step with VNNI kernels but 0.5 without (a 2-core
 * EPYC, the default pair), so a rule that only looks at acceptance grows k
 * past the point where rounds stop paying. Here T is measured per k, and k
 * moves to whichever of itself and its two neighbours scores best, each
 * neighbour being tried for a round now and then so its cost stays known.
 *
 * Timing makes k depend on the clock. With seeded sampling the number of
 * random draws follows k, and that output must not, so untimed
 * speculators keep the rule that depends on acceptance alone: one more
 * after a fully kept round, one less when under half was kept. */
#include "spec_length.h"

#define COST_EMA 0.25
/* The weight of the past in the acceptance estimate, per round. */
#define ACCEPT_DECAY 0.9
/* Rounds between two probes of a neighbour, and while a neighbour's cost
 * is still unknown. */
#define PROBE_EVERY         8
#define PROBE_EVERY_UNKNOWN 2

static uint32_t clamp_k(uint32_t k, uint32_t lo, uint32_t hi)
{
    return k < lo ? lo : k > hi ? hi : k;
}

void spec_length_init(spec_length *l, uint32_t start, uint32_t max, bool timed)
{
    *l = (spec_length){0};
    l->max = clamp_k(max, 1, TW_SPEC_MAX_DRAFT);
    l->k = clamp_k(start, 1, l->max);
    l->timed = timed;
    l->probe_up = true;
}

double spec_length_yield(double a, uint32_t k)
{
    double y = 1.0, p = 1.0;
    for (uint32_t i = 0; i < k; i++) {
        p *= a;
        y += p;
    }
    return y;
}

static bool known(const spec_length *l, uint32_t k)
{
    return k >= 1 && k <= l->max && l->round_us[k] > 0.0;
}

uint32_t spec_length_next(spec_length *l)
{
    if (!l->timed)
        return l->k;
    bool unknown = (l->k > 1 && !known(l, l->k - 1)) || (l->k < l->max && !known(l, l->k + 1));
    if (++l->since_probe < (unknown ? PROBE_EVERY_UNKNOWN : PROBE_EVERY))
        return l->k;
    l->since_probe = 0;
    for (int tries = 0; tries < 2; tries++) {
        bool up = l->probe_up;
        l->probe_up = !l->probe_up;
        if (up && l->k < l->max)
            return l->k + 1;
        if (!up && l->k > 1)
            return l->k - 1;
    }
    return l->k; /* max == 1: nothing to try */
}

void spec_length_observe(spec_length *l, uint32_t k, uint32_t kept, uint64_t round_us)
{
    if (k == 0 || k > l->max || kept > k)
        return;
    l->hits = ACCEPT_DECAY * l->hits + kept;
    l->tries = ACCEPT_DECAY * l->tries + kept + (kept < k);
    if (!l->timed) {
        if (kept == k && l->k < l->max)
            l->k++;
        else if (2 * kept < k && l->k > 1)
            l->k--;
        return;
    }
    double us = round_us ? (double)round_us : 1.0;
    double *t = &l->round_us[k];
    *t = *t > 0.0 ? *t + COST_EMA * (us - *t) : us;
    /* Laplace's estimate keeps a from 0 or 1 before there is evidence. */
    double a = (l->hits + 1.0) / (l->tries + 2.0);
    uint32_t best = l->k;
    double best_score = known(l, l->k) ? spec_length_yield(a, l->k) / l->round_us[l->k] : 0.0;
    const uint32_t around[2] = {l->k - 1, l->k + 1}; /* 0 when k is 1: never known */
    for (int i = 0; i < 2; i++) {
        uint32_t j = around[i];
        if (!known(l, j))
            continue;
        double s = spec_length_yield(a, j) / l->round_us[j];
        if (s > best_score) {
            best_score = s;
            best = j;
        }
    }
    l->k = best;
}
