/* Choosing among the ISA's F16 batch tiles, its half-precision panels and
 * OpenBLAS's sgemm for F16 and BF16 prompts by timing them. Which wins
 * depends on the core and on the kernel set OpenBLAS runs: the tiles tied
 * with sgemm on a Zen 5 EPYC, sgemm led them by up to 1.66x on an Emerald
 * Rapids Xeon, and the panels led sgemm there; so a few products in cache
 * on the machine at hand decide it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_internal.h"
#include "tw/kernels.h"

/* A 1024 x 1024 F16 matrix (2 MiB) against a 128-token prompt: the shape of
 * a small model's projections, within a core's L2 on the hosts measured, so
 * the arithmetic is timed rather than memory. */
#define PF_DIM       1024
#define PF_ACTS      128
#define PF_MIN_ROUNDS 3
#define PF_MAX_ROUNDS 32
/* How much faster another path must be than the tiles (tiles time / its
 * time) to be chosen over them: the tiles keep decode's bits, so a tie goes
 * to them. */
#define PF_MIN_GAIN 1.05
#define PF_PATHS    3

static double product_us(tw_pool *pool, tw_f16_prefill path, const uint16_t *w, const float *x,
                         float *y)
{
    tw_kernels_set_f16_prefill(path);
    double t0 = tw_tune_now_us();
    tw_matmul(pool, TW_TYPE_F16, w, PF_DIM * sizeof *w, PF_DIM, PF_DIM, x, PF_ACTS, y);
    return tw_tune_now_us() - t0;
}

/* The path with the least median time in med (0: not timed), the tiles
 * kept unless beaten by PF_MIN_GAIN. */
static tw_f16_prefill fastest(const double med[PF_PATHS])
{
    int best = -1;
    for (int p = 0; p < PF_PATHS; p++)
        if (med[p] > 0 && (best < 0 || med[p] < med[best]))
            best = p;
    if (best < 0)
        return TW_F16_PREFILL_TILES;
    const double tiles = med[TW_F16_PREFILL_TILES];
    if (tiles > 0 && tiles < med[best] * PF_MIN_GAIN)
        return TW_F16_PREFILL_TILES;
    return (tw_f16_prefill)best;
}

tw_status tw_kernels_tune_f16_prefill(tw_pool *pool, double seconds, tw_f16_prefill_tune *out,
                                      tw_err *err)
{
    if (out)
        *out = (tw_f16_prefill_tune){.gain = 1.0};
    tw_kernels_set_f16_prefill(TW_F16_PREFILL_TILES);
    if (!pool || !out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "F16 prefill tuning: NULL pool or out");
    if (!(seconds >= 0.01) || seconds > 10)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "F16 prefill tuning: seconds 0.01..10");
    tw_f16_prefill paths[PF_PATHS];
    int n_paths = 0;
    for (int p = 0; p < PF_PATHS; p++)
        if (tw_kernels_f16_prefill_has((tw_f16_prefill)p))
            paths[n_paths++] = (tw_f16_prefill)p;
    /* the path taken without the tune, which the gain is measured against */
    const tw_f16_prefill base =
        paths[0] == TW_F16_PREFILL_TILES ? TW_F16_PREFILL_TILES : TW_F16_PREFILL_BLAS;
    if (n_paths < 2) {
        out->path = base;
        tw_kernels_set_f16_prefill(base);
        return TW_OK;
    }
    uint16_t *w = malloc((size_t)PF_DIM * PF_DIM * sizeof *w);
    float *x = malloc((size_t)PF_ACTS * PF_DIM * sizeof *x);
    float *y = malloc((size_t)PF_ACTS * PF_DIM * sizeof *y);
    if (!w || !x || !y) {
        free(w);
        free(x);
        free(y);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "F16 prefill tuning: out of memory");
    }
    /* values of a projection's size; the row's floats go through x first */
    for (size_t r = 0; r < PF_DIM; r++) {
        for (size_t c = 0; c < PF_DIM; c++)
            x[c] = (float)((r * 131 + c * 71) % 257) / 2048.0f - 0.0625f;
        tw_quant_row(TW_TYPE_F16, x, w + r * PF_DIM, PF_DIM);
    }
    for (size_t i = 0; i < (size_t)PF_ACTS * PF_DIM; i++)
        x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    /* warms the pool's scratch for every path */
    for (int i = 0; i < n_paths; i++)
        (void)product_us(pool, paths[i], w, x, y);
    double us[PF_PATHS][PF_MAX_ROUNDS] = {{0}};
    unsigned n = 0;
    const double end = tw_tune_now_us() + seconds * 1e6;
    while (n < PF_MAX_ROUNDS && (n < PF_MIN_ROUNDS || tw_tune_now_us() < end)) {
        for (int i = 0; i < n_paths; i++) {
            const tw_f16_prefill p = paths[(i + n) % (unsigned)n_paths];
            us[p][n] = product_us(pool, p, w, x, y);
        }
        n++;
    }
    double med[PF_PATHS] = {0};
    for (int i = 0; i < n_paths; i++) {
        double v[PF_MAX_ROUNDS];
        memcpy(v, us[paths[i]], n * sizeof *v);
        med[paths[i]] = tw_tune_median(v, n);
    }
    out->rounds = n;
    out->us_tiles = med[TW_F16_PREFILL_TILES];
    out->us_panels = med[TW_F16_PREFILL_PANELS];
    out->us_blas = med[TW_F16_PREFILL_BLAS];
    out->path = fastest(med);
    double ratio[PF_MAX_ROUNDS];
    for (unsigned i = 0; i < n; i++)
        ratio[i] = us[out->path][i] > 0 ? us[base][i] / us[out->path][i] : 1.0;
    out->gain = tw_tune_median(ratio, n);
    tw_kernels_set_f16_prefill(out->path);
    free(w);
    free(x);
    free(y);
    return TW_OK;
}
