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

/* The longest key an earlier occurrence is matched on; past this, a match
 * is as good as certain and the scan stops. */
#define LOOKUP_MAX_KEY 16

/* The earlier occurrence of the history's last token whose preceding
 * tokens agree with the history's for longest (the newest among equals):
 * a long agreement predicts a copy, a single token matches almost
 * anywhere. */
size_t tw_spec_lookup(const uint32_t *hist, size_t n_hist, uint32_t *out, size_t max)
{
    size_t key;
    return tw_spec_lookup_key(hist, n_hist, out, max, &key);
}

size_t tw_spec_lookup_key(const uint32_t *hist, size_t n_hist, uint32_t *out, size_t max,
                          size_t *key_len)
{
    *key_len = 0;
    if (max == 0 || n_hist < 2)
        return 0;
    const size_t last = n_hist - 1;
    size_t best_j = 0, best_m = 0;
    for (size_t j = last; j-- > 0;) {
        if (hist[j] != hist[last])
            continue;
        size_t m = 1;
        while (m < LOOKUP_MAX_KEY && m <= j && hist[j - m] == hist[last - m])
            m++;
        if (m > best_m) {
            best_m = m;
            best_j = j;
            if (m == LOOKUP_MAX_KEY)
                break;
        }
    }
    if (best_m == 0)
        return 0;
    size_t from = best_j + 1, avail = n_hist - from;
    size_t cnt = avail < max ? avail : max;
    *key_len = best_m;
    memcpy(out, hist + from, cnt * sizeof *out);
    return cnt;
}
