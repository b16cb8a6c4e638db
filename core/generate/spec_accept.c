/* The two small algorithms of speculative decoding that need no model:
 * the rejection-sampling step that keeps sampled output exact, and prompt
 * lookup. */
#include <string.h>

#include "tw/spec.h"

uint32_t tw_spec_draw(const float *p, uint32_t vocab, tw_rng *rng)
{
    double sum = 0.0;
    uint32_t last = 0;
    for (uint32_t i = 0; i < vocab; i++) {
        if (p[i] > 0.0f) {
            sum += p[i];
            last = i;
        }
    }
    double r = tw_rng_uniform(rng) * sum, acc = 0.0;
    for (uint32_t i = 0; i < vocab; i++) {
        if (p[i] <= 0.0f)
            continue;
        acc += p[i];
        if (r < acc)
            return i;
    }
    return last; /* r landed on the rounding edge */
}

/* The residual max(0, p - q) is drawn without a buffer: its mass first,
 * then a scan. q == NULL stands for the one-hot proposal of token d. */
static uint32_t draw_residual(const float *p, const float *q, uint32_t vocab, uint32_t d,
                              tw_rng *rng)
{
    double sum = 0.0;
    for (uint32_t i = 0; i < vocab; i++) {
        double r = (double)p[i] - (q ? (double)q[i] : (i == d ? 1.0 : 0.0));
        if (r > 0.0)
            sum += r;
    }
    if (!(sum > 0.0)) /* p == q up to rounding: the residual is p itself */
        return tw_spec_draw(p, vocab, rng);
    double u = tw_rng_uniform(rng) * sum, acc = 0.0;
    uint32_t last = 0;
    for (uint32_t i = 0; i < vocab; i++) {
        double r = (double)p[i] - (q ? (double)q[i] : (i == d ? 1.0 : 0.0));
        if (r <= 0.0)
            continue;
        last = i;
        acc += r;
        if (u < acc)
            return i;
    }
    return last;
}

uint32_t tw_spec_accept_step(const float *p, const float *q, uint32_t vocab, uint32_t d,
                             tw_rng *rng, bool *accepted)
{
    *accepted = false;
    if (d >= vocab)
        return tw_spec_draw(p, vocab, rng);
    double pd = p[d], qd = q ? q[d] : 1.0;
    if (pd > 0.0 && (pd >= qd || tw_rng_uniform(rng) * qd < pd)) {
        *accepted = true;
        return d;
    }
    return draw_residual(p, q, vocab, d, rng);
}

/* Longest useful key first: a 3-token match predicts better than a single
 * token, which matches almost anywhere. */
size_t tw_spec_lookup(const uint32_t *hist, size_t n_hist, uint32_t *out, size_t max)
{
    if (max == 0)
        return 0;
    for (size_t n = 3; n >= 1; n--) {
        if (n_hist < n + 1)
            continue;
        const uint32_t *key = hist + n_hist - n;
        /* start j of an earlier occurrence: j + n <= n_hist - 1, newest first */
        for (size_t j = n_hist - n; j-- > 0;) {
            if (hist[j] != key[0] || memcmp(hist + j, key, n * sizeof *key) != 0)
                continue;
            size_t from = j + n, avail = n_hist - from;
            size_t cnt = avail < max ? avail : max;
            memcpy(out, hist + from, cnt * sizeof *out);
            return cnt;
        }
    }
    return 0;
}
