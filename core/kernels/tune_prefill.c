/* Choosing between the ISA's F16 batch tiles and OpenBLAS's sgemm for F16
 * prompts by timing both. Which wins depends on the core and on the kernel
 * set OpenBLAS runs: a tie on a Zen 5 EPYC, sgemm ahead by up to 1.66x on
 * an Emerald Rapids Xeon, so a few products in cache on the machine at hand
 * decide it. */
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
#define PF_MIN_PAIRS 3
#define PF_MAX_PAIRS 32
/* How much faster sgemm must be (tiles time / sgemm time) to be chosen:
 * the tiles keep decode's bits, so a tie goes to them. */
#define PF_MIN_GAIN 1.05

static double product_us(tw_pool *pool, bool blas, const uint16_t *w, const float *x, float *y)
{
    tw_kernels_set_f16_prefill_blas(blas);
    double t0 = tw_tune_now_us();
    tw_matmul(pool, TW_TYPE_F16, w, PF_DIM * sizeof *w, PF_DIM, PF_DIM, x, PF_ACTS, y);
    return tw_tune_now_us() - t0;
}

tw_status tw_kernels_tune_f16_prefill(tw_pool *pool, double seconds, tw_f16_prefill_tune *out,
                                      tw_err *err)
{
    if (out)
        *out = (tw_f16_prefill_tune){.gain = 1.0};
    tw_kernels_set_f16_prefill_blas(false);
    if (!pool || !out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "F16 prefill tuning: NULL pool or out");
    if (!(seconds >= 0.01) || seconds > 10)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "F16 prefill tuning: seconds 0.01..10");
    int k = tw_ktype_index(TW_TYPE_F16);
    if (k < 0 || !((tw_isa_current()->prefill_tiles >> k) & 1u))
        return TW_OK;
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
    /* warms the pool's scratch for both */
    (void)product_us(pool, false, w, x, y);
    (void)product_us(pool, true, w, x, y);
    double tiles[PF_MAX_PAIRS], blas[PF_MAX_PAIRS], ratio[PF_MAX_PAIRS];
    unsigned n = 0;
    const double end = tw_tune_now_us() + seconds * 1e6;
    while (n < PF_MAX_PAIRS && (n < PF_MIN_PAIRS || tw_tune_now_us() < end)) {
        if (n % 2) {
            blas[n] = product_us(pool, true, w, x, y);
            tiles[n] = product_us(pool, false, w, x, y);
        } else {
            tiles[n] = product_us(pool, false, w, x, y);
            blas[n] = product_us(pool, true, w, x, y);
        }
        ratio[n] = blas[n] > 0 ? tiles[n] / blas[n] : 1.0;
        n++;
    }
    out->pairs = n;
    out->gain = tw_tune_median(ratio, n);
    out->us_tiles = tw_tune_median(tiles, n);
    out->us_blas = tw_tune_median(blas, n);
    out->blas = out->gain >= PF_MIN_GAIN;
    tw_kernels_set_f16_prefill_blas(out->blas);
    free(w);
    free(x);
    free(y);
    return TW_OK;
}
