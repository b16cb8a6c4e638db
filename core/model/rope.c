/* Rotary position embeddings: frequency schedules (default, linear,
 * llama3) precomputed into cos/sin tables for every position. */
#include <math.h>
#include <stdlib.h>

#include "model/model_internal.h"

/* Llama 3 keeps high frequencies, divides low ones by `factor`, and blends
 * the band in between, with wavelengths measured against the original
 * training context. */
static double llama3_freq(const tw_rope_params *p, double f)
{
    const double pi = 3.14159265358979323846;
    double low_wavelen = p->original_max_pos / p->low_freq_factor;
    double high_wavelen = p->original_max_pos / p->high_freq_factor;
    double wavelen = 2.0 * pi / f;
    if (wavelen < high_wavelen)
        return f;
    if (wavelen > low_wavelen)
        return f / p->factor;
    double smooth = (p->original_max_pos / wavelen - p->low_freq_factor) /
                    (p->high_freq_factor - p->low_freq_factor);
    return (1.0 - smooth) * f / p->factor + smooth * f;
}

tw_status tw_rope_build(tw_rope_table *t, const tw_rope_params *p, uint32_t head_dim,
                        size_t n_pos, bool adjacent, const float *freq_div, tw_err *err)
{
    uint32_t rot = (uint32_t)((double)head_dim * p->partial);
    rot &= ~1u;
    if (rot == 0 || rot > head_dim)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "rope: no dimensions to rotate");
    uint32_t half = rot / 2;
    t->rot_dim = rot;
    t->adjacent = adjacent;
    t->n_pos = n_pos;
    t->cos = malloc(n_pos * half * sizeof(float));
    t->sin = malloc(n_pos * half * sizeof(float));
    float *inv = malloc(half * sizeof(float));
    if (!t->cos || !t->sin || !inv) {
        free(inv);
        tw_rope_free(t);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "rope: out of memory");
    }
    for (uint32_t i = 0; i < half; i++) {
        double f = 1.0 / pow(p->theta, (double)(2 * i) / (double)rot);
        if (p->kind == TW_ROPE_LINEAR)
            f /= p->factor;
        else if (p->kind == TW_ROPE_LLAMA3)
            f = llama3_freq(p, f);
        if (freq_div)
            f /= freq_div[i];
        inv[i] = (float)f;
    }
    /* angles are formed in f32 like the reference, so long contexts round
     * the same way */
    for (size_t pos = 0; pos < n_pos; pos++) {
        for (uint32_t i = 0; i < half; i++) {
            float a = (float)pos * inv[i];
            t->cos[pos * half + i] = cosf(a);
            t->sin[pos * half + i] = sinf(a);
        }
    }
    free(inv);
    return TW_OK;
}

void tw_rope_free(tw_rope_table *t)
{
    free(t->cos);
    free(t->sin);
    t->cos = t->sin = NULL;
}

void tw_rope_apply(const tw_rope_table *t, float *h, uint32_t pos)
{
    uint32_t half = t->rot_dim / 2;
    const float *c = t->cos + (size_t)pos * half;
    const float *s = t->sin + (size_t)pos * half;
    if (t->adjacent) {
        for (uint32_t i = 0; i < half; i++) {
            float x0 = h[2 * i], x1 = h[2 * i + 1];
            h[2 * i] = x0 * c[i] - x1 * s[i];
            h[2 * i + 1] = x1 * c[i] + x0 * s[i];
        }
    } else {
        for (uint32_t i = 0; i < half; i++) {
            float x0 = h[i], x1 = h[i + half];
            h[i] = x0 * c[i] - x1 * s[i];
            h[i + half] = x1 * c[i] + x0 * s[i];
        }
    }
}
