/* AVX-512 forms of the attention kernels where the wider vectors change
 * no bit. The weighted sum of value rows keeps one fused multiply-add
 * chain per output column over the rows in order, whatever the vector
 * width, so sixteen columns to a register give the AVX2 kernel's results
 * exactly; a 64-wide head then takes one pass over its rows per four
 * queries instead of four. qwen2-0.5b Q4_0 decode, 2 threads, a 2-vCPU
 * Zen 5 guest, the two alternated in one process: a layer's attention run
 * took 15.4 us against 18.6 after a 128-token prompt and 64.3 against
 * 83.4 after 1000 (decode 1.07x there, faster in 9 of 10 bursts). The
 * score pass was tried the same way, two keys' 8-wide accumulators to a
 * register with the AVX2 sums after (its bits too), and kept the AVX2
 * kernel: 13.9 against 14.0 us after 128 tokens, 54.2 against 52.8 after
 * 1000, each register's two rows costing a load and an insert. */
#include <math.h>
#include <stdbool.h>

#include "kernels/kernels_internal.h"
#include "kernels/simd_x86.h"
#include "tw/kernels.h"

#ifdef TW_HAVE_X86

/* Rows ahead of the one being read that the first pass fetches into L1,
 * as the AVX2 kernels do. */
#define ROWS_AHEAD 16

/* Up to sixteen values of a row from element i (the lanes of m), f32 or
 * IEEE half (H16), the others zero. */
TW_AVX512 static inline __attribute__((always_inline)) __m512 load16(const void *p, size_t i,
                                                                     __mmask16 m, const int H16)
{
    if (H16)
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i));
    return _mm512_maskz_loadu_ps(m, (const float *)p + i);
}

/* QN accumulators of CW registers each (columns j .. j + 16 * CW, the last
 * register's lanes limited to `last`) over the n rows in order. */
TW_AVX512 static inline __attribute__((always_inline)) void
axpy_tile16(const float *p, size_t p_stride, const void *V, size_t n, size_t d, size_t j,
            float *acc, size_t acc_stride, __mmask16 last, const int QN, const int CW,
            const bool fetch, const int H16)
{
    const size_t row_bytes = d * (H16 ? 2 : 4);
    __m512 a[16];
#pragma GCC unroll 4
    for (int q = 0; q < QN; q++)
#pragma GCC unroll 4
        for (int c = 0; c < CW; c++)
            a[q * CW + c] = _mm512_maskz_loadu_ps(c == CW - 1 ? last : 0xFFFF,
                                                  acc + (size_t)q * acc_stride + j + 16 * c);
    for (size_t i = 0; i < n; i++) {
        if (fetch && i + ROWS_AHEAD < n) {
            const char *r = (const char *)V + (i + ROWS_AHEAD) * row_bytes;
            for (size_t o = 0; o < row_bytes; o += 64)
                _mm_prefetch(r + o, _MM_HINT_T0);
        }
        __m512 v[4];
#pragma GCC unroll 4
        for (int c = 0; c < CW; c++)
            v[c] = load16(V, i * d + j + 16 * (size_t)c, c == CW - 1 ? last : 0xFFFF, H16);
#pragma GCC unroll 4
        for (int q = 0; q < QN; q++) {
            const __m512 pv = _mm512_set1_ps(p[(size_t)q * p_stride + i]);
#pragma GCC unroll 4
            for (int c = 0; c < CW; c++)
                a[q * CW + c] = _mm512_fmadd_ps(pv, v[c], a[q * CW + c]);
        }
    }
#pragma GCC unroll 4
    for (int q = 0; q < QN; q++)
#pragma GCC unroll 4
        for (int c = 0; c < CW; c++)
            _mm512_mask_storeu_ps(acc + (size_t)q * acc_stride + j + 16 * c,
                                  c == CW - 1 ? last : 0xFFFF, a[q * CW + c]);
}

/* QN accumulators over all d columns: 64 at a time, then 16 at a time,
 * the last 1..16 under a mask. The first pass fetches whole rows ahead;
 * the later ones find them in L1. */
TW_AVX512 static inline __attribute__((always_inline)) void
axpy_cols16(const float *p, size_t p_stride, const void *V, size_t n, size_t d, float *acc,
            size_t acc_stride, const int QN, const bool fetch, const int H16)
{
    size_t j = 0;
    for (; j + 64 <= d; j += 64)
        axpy_tile16(p, p_stride, V, n, d, j, acc, acc_stride, 0xFFFF, QN, 4, fetch && j == 0, H16);
    for (; j < d; j += 16) {
        const __mmask16 m = d - j >= 16 ? 0xFFFF : (__mmask16)((1u << (d - j)) - 1u);
        axpy_tile16(p, p_stride, V, n, d, j, acc, acc_stride, m, QN, 1, fetch && j == 0, H16);
    }
}

TW_AVX512 static inline __attribute__((always_inline)) void
axpy_rows_multi16(const float *p, size_t p_stride, size_t nq, const void *V, size_t n, size_t d,
                  float *acc, size_t acc_stride, const int H16)
{
    const bool fetch = tw_kernels_decode_prefetch();
    for (size_t k = 0; k < nq; k += 4) {
        const float *pk = p + k * p_stride;
        float *ak = acc + k * acc_stride;
        switch (nq - k) {
        case 1:
            axpy_cols16(pk, p_stride, V, n, d, ak, acc_stride, 1, fetch && k == 0, H16);
            break;
        case 2:
            axpy_cols16(pk, p_stride, V, n, d, ak, acc_stride, 2, fetch && k == 0, H16);
            break;
        case 3:
            axpy_cols16(pk, p_stride, V, n, d, ak, acc_stride, 3, fetch && k == 0, H16);
            break;
        default:
            axpy_cols16(pk, p_stride, V, n, d, ak, acc_stride, 4, fetch && k == 0, H16);
            break;
        }
    }
}

TW_AVX512 static void axpy_rows_multi_f32(const float *p, size_t p_stride, size_t nq,
                                          const float *V, size_t n, size_t d, float *acc,
                                          size_t acc_stride)
{
    axpy_rows_multi16(p, p_stride, nq, V, n, d, acc, acc_stride, 0);
}

TW_AVX512 static void axpy_rows_multi_h16(const float *p, size_t p_stride, size_t nq,
                                          const uint16_t *V, size_t n, size_t d, float *acc,
                                          size_t acc_stride)
{
    axpy_rows_multi16(p, p_stride, nq, V, n, d, acc, acc_stride, 1);
}

/* exp(x) for 16 lanes by the AVX2 kernels' exp256, operation for
 * operation and with its constants (TW_EXP_*), so each lane gets the bits
 * an 8-lane call gives it. */
TW_AVX512 static inline __m512 exp512(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(TW_EXP_LO);
    const __mmask16 below = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_set1_ps(TW_EXP_HI));
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(TW_EXP_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(TW_EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(TW_EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(TW_EXP_C6);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TW_EXP_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TW_EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TW_EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TW_EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TW_EXP_C1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TW_EXP_C0));
    const __m512i ki = _mm512_cvtps_epi32(k);
    const __m512i h = _mm512_srai_epi32(ki, 1);
    const __m512 s1 =
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(h, _mm512_set1_epi32(127)), 23));
    const __m512 s2 = _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_sub_epi32(ki, h), _mm512_set1_epi32(127)), 23));
    p = _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
    return _mm512_maskz_mov_ps((__mmask16)~below, p);
}

/* The lanes of 16 (or, under mask 0xFF, 8) values from x: silu, times u
 * when u is given. */
TW_AVX512 static inline void silu_lanes(float *x, const float *u, __mmask16 m)
{
    const __m512 v = _mm512_maskz_loadu_ps(m, x);
    const __m512 e = exp512(_mm512_xor_ps(v, _mm512_set1_ps(-0.0f)));
    __m512 y = _mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    if (u)
        y = _mm512_mul_ps(y, _mm512_maskz_loadu_ps(m, u));
    _mm512_mask_storeu_ps(x, m, y);
}

/* silu (times u) as the AVX2 kernel computes it: whole 8-value chunks in
 * vector arithmetic, 16 at a time, the values past the last chunk in
 * scalar, so every value gets the AVX2 bits. */
TW_AVX512 static void silu_rows(float *x, const float *u, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        silu_lanes(x + i, u ? u + i : NULL, 0xFFFF);
    if (i + 8 <= n) {
        silu_lanes(x + i, u ? u + i : NULL, 0x00FF);
        i += 8;
    }
    for (; i < n; i++)
        x[i] = u ? x[i] / (1.0f + expf(-x[i])) * u[i] : x[i] / (1.0f + expf(-x[i]));
}

TW_AVX512 static void silu_mul_f32(float *g, const float *u, size_t n)
{
    silu_rows(g, u, n);
}

TW_AVX512 static void silu_f32(float *x, size_t n)
{
    silu_rows(x, NULL, n);
}

/* The AVX2 kernel's sum kept: its 8-lane accumulator takes the chunks of
 * 8 in order, two per 16-lane exponential. */
TW_AVX512 static float exp_shift_f32(float *x, size_t n, float mx)
{
    const __m512 m = _mm512_set1_ps(mx);
    __m256 s = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
        _mm512_storeu_ps(x + i, e);
        s = _mm256_add_ps(s, _mm512_castps512_ps256(e));
        s = _mm256_add_ps(s, _mm512_extractf32x8_ps(e, 1));
    }
    if (i + 8 <= n) {
        const __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(0x00FF, x + i), m));
        _mm512_mask_storeu_ps(x + i, 0x00FF, e);
        s = _mm256_add_ps(s, _mm512_castps512_ps256(e));
        i += 8;
    }
    float sum = tw_hsum256(s);
    for (; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    return sum;
}

void tw_isa_fill_vecops_avx512(tw_isa_table *t)
{
    t->axpy_rows_multi_f32 = axpy_rows_multi_f32;
    t->axpy_rows_multi_h16 = axpy_rows_multi_h16;
    t->exp_shift_f32 = exp_shift_f32;
    t->silu_mul_f32 = silu_mul_f32;
    t->silu_f32 = silu_f32;
}

#else

void tw_isa_fill_vecops_avx512(tw_isa_table *t)
{
    (void)t;
}

#endif
