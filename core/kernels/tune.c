/* Choosing kernel settings by measuring them on the machine at hand. Decode
 * prefetch helped one EPYC by up to 31% and cost another up to 27%, so no rule
 * from the CPU's name can be trusted; a few milliseconds of single-activation
 * products over a matrix larger than the L3 answer it for this machine. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "kernels/blocks.h"
#include "kernels/kernels_internal.h"
#include "tw/kernels.h"

/* Columns of the synthetic matrix: a row of 128 Q4_0 blocks, like the
 * wider projections of a small model. */
#define TUNE_COLS 4096
/* At least this many pairs, whatever `seconds` says: where the L3 is large
 * the matrix is too (256 MiB on an Emerald Rapids guest, ~13 ms a sweep),
 * 0.1 s held three pairs, and a start there chose prefetch on from a median
 * ratio of 1.15 with the median sweep 23.1 ms with it and 16.1 ms without. */
#define TUNE_MIN_PAIRS 7
#define TUNE_MAX_PAIRS 64
/* How much faster (time without / time with) prefetching must be to be
 * turned on: less than that is within what neighbours on a shared machine
 * move a pair of sweeps by. */
#define TUNE_MIN_GAIN 1.03

double tw_tune_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double tw_tune_median(double *v, unsigned n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A packed Q4_0 (or, k, Q4_K) matrix of pseudo-random levels under modest
 * scales: what the kernels read is what matters, not what it means. The
 * pages are asked for as huge pages, as the loaded weights are. */
static uint8_t *make_matrix(size_t bytes, bool k)
{
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    (void)madvise(m, bytes, MADV_HUGEPAGE);
    uint8_t *w = m;
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        memcpy(w + i, &s, 8);
    }
    /* each block of a group starts with its eight rows' f16 scales (and a
     * K block's then with their f16 mins) */
    const size_t block = k ? TW_R8K_BLOCK : TW_R8_ROWS * sizeof(tw_block_q4_0);
    const uint16_t d = tw_f32_to_f16(1.0f / 64);
    for (size_t b = 0; b + block <= bytes; b += block)
        for (int r = 0; r < (k ? 2 : 1) * TW_R8_ROWS; r++)
            memcpy(w + b + 2 * (size_t)r, &d, 2);
    return w;
}

/* One sweep of the matrix with decode prefetch (k: the Q4_K kernel's
 * fetches) set to on. */
static double sweep_us(tw_pool *pool, bool k, bool on, const uint8_t *w, size_t row_bytes,
                       size_t rows, const float *x, float *y)
{
    if (k)
        tw_kernels_set_decode_prefetch_k(on);
    else
        tw_kernels_set_decode_prefetch(on);
    double t0 = tw_tune_now_us();
    tw_matvec(pool, k ? TW_TYPE_Q4_K_R8 : TW_TYPE_Q4_0_R8, w, row_bytes, rows, TUNE_COLS, x, y);
    return tw_tune_now_us() - t0;
}

typedef struct pairs_result {
    size_t bytes;
    unsigned n;
    double us_off, us_on, gain;
} pairs_result;

/* Sweeps of a fresh matrix of about `bytes` timed in pairs without and
 * with, alternating which goes first, for about `seconds`. */
static tw_status time_pairs(tw_pool *pool, bool k, size_t bytes, double seconds, pairs_result *out,
                            tw_err *err)
{
    const size_t row_bytes = tw_type_row_bytes(k ? TW_TYPE_Q4_K : TW_TYPE_Q4_0, TUNE_COLS);
    const size_t rows = bytes / row_bytes / TW_R8_ROWS * TW_R8_ROWS;
    const size_t w_bytes = rows * row_bytes;
    uint8_t *w = make_matrix(w_bytes, k);
    float *x = malloc(TUNE_COLS * sizeof *x), *y = malloc(rows * sizeof *y);
    if (!w || !x || !y) {
        if (w)
            munmap(w, w_bytes);
        free(x);
        free(y);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                         "decode prefetch tuning: cannot allocate a %zu-byte matrix", w_bytes);
    }
    for (size_t i = 0; i < TUNE_COLS; i++)
        x[i] = (float)((i * 37) % 64) / 32.0f - 1.0f;
    /* first sweeps fault nothing in, but warm the pool and its scratch */
    (void)sweep_us(pool, k, false, w, row_bytes, rows, x, y);
    (void)sweep_us(pool, k, true, w, row_bytes, rows, x, y);
    double off[TUNE_MAX_PAIRS], on[TUNE_MAX_PAIRS], ratio[TUNE_MAX_PAIRS];
    unsigned n = 0;
    const double end = tw_tune_now_us() + seconds * 1e6;
    while (n < TUNE_MAX_PAIRS && (n < TUNE_MIN_PAIRS || tw_tune_now_us() < end)) {
        /* alternate which goes first, so neither always follows the other */
        if (n % 2) {
            on[n] = sweep_us(pool, k, true, w, row_bytes, rows, x, y);
            off[n] = sweep_us(pool, k, false, w, row_bytes, rows, x, y);
        } else {
            off[n] = sweep_us(pool, k, false, w, row_bytes, rows, x, y);
            on[n] = sweep_us(pool, k, true, w, row_bytes, rows, x, y);
        }
        ratio[n] = on[n] > 0 ? off[n] / on[n] : 1.0;
        n++;
    }
    out->bytes = w_bytes;
    out->n = n;
    out->gain = tw_tune_median(ratio, n);
    out->us_off = tw_tune_median(off, n);
    out->us_on = tw_tune_median(on, n);
    munmap(w, w_bytes);
    free(x);
    free(y);
    return TW_OK;
}

tw_status tw_kernels_tune_decode_prefetch(tw_pool *pool, size_t bytes, double seconds,
                                          tw_prefetch_tune *out, tw_err *err)
{
    if (!pool || !out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "decode prefetch tuning: NULL pool or out");
    if (bytes < ((size_t)4 << 20) || bytes > ((size_t)1 << 30) || !(seconds >= 0.01) ||
        seconds > 10)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "decode prefetch tuning: bytes 4 MiB..1 GiB, seconds 0.01..10");
    memset(out, 0, sizeof *out);
    out->gain = 1.0;
    out->k_gain = 1.0;
    out->k_on = true;
    tw_kernels_set_decode_prefetch_k(true);
    if (!strcmp(tw_kernels_isa(), "scalar")) {
        tw_kernels_set_decode_prefetch(false);
        return TW_OK;
    }
    pairs_result r;
    tw_status st = time_pairs(pool, false, bytes, seconds, &r, err);
    if (st)
        return st;
    out->bytes = r.bytes;
    out->pairs = r.n;
    out->gain = r.gain;
    out->us_off = r.us_off;
    out->us_on = r.us_on;
    out->on = out->gain >= TUNE_MIN_GAIN;
    tw_kernels_set_decode_prefetch(out->on);
    /* the AVX2 Q4_K kernel's own fetches, where they would run */
    if (out->on && !strncmp(tw_kernels_isa(), "avx2", 4) &&
        time_pairs(pool, true, bytes, seconds, &r, NULL) == TW_OK) {
        out->k_pairs = r.n;
        out->k_gain = r.gain;
        out->k_on = out->k_gain * TUNE_MIN_GAIN > 1.0;
        tw_kernels_set_decode_prefetch_k(out->k_on);
    }
    return TW_OK;
}
