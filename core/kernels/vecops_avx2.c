/* AVX2/FMA f32 vector kernels: dot products, attention's score and value
 * passes, the softmax and SiLU exponentials, and the DeltaNet delta rule. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/kernels_internal.h"
#include "tw/kernels.h"
#include "kernels/simd_x86.h"

#ifdef TW_HAVE_X86

TW_AVX2 float tw_dot_f32_avx2(const float *a, const float *b, size_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = tw_hsum256(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* exp(x) for 8 lanes: x = k ln2 + r with |r| <= ln2/2 (ln2 split in two
 * parts so r stays exact), e^r by its degree-6 Taylor polynomial (error
 * below 2e-7 relative on that interval), 2^k put into the exponent bits.
 * Inputs are clamped to [-87.3, 88.7]: below, the result is flushed to 0
 * as expf's would be denormal or 0; above, expf overflows anyway. */
TW_AVX2 static inline __m256 exp256(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(TW_EXP_LO);
    const __m256 below = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(TW_EXP_HI));
    __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(TW_EXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(TW_EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(TW_EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(TW_EXP_C6);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TW_EXP_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TW_EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TW_EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TW_EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TW_EXP_C1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TW_EXP_C0));
    /* k in [-126, 128]: scale by 2^(k/2) twice so k = 128 cannot overflow
     * the exponent field */
    __m256i ki = _mm256_cvtps_epi32(k);
    __m256i h = _mm256_srai_epi32(ki, 1);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, _mm256_set1_epi32(127)), 23));
    __m256 s2 = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ki, h), _mm256_set1_epi32(127)), 23));
    p = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    return _mm256_andnot_ps(below, p);
}

TW_AVX2 static float exp_shift_f32(float *x, size_t n, float mx)
{
    const __m256 m = _mm256_set1_ps(mx);
    __m256 s = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
        _mm256_storeu_ps(x + i, e);
        s = _mm256_add_ps(s, e);
    }
    float sum = tw_hsum256(s);
    for (; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    return sum;
}

TW_AVX2 static float scale_max_f32(float *x, size_t n, float scale)
{
    const __m256 s = _mm256_set1_ps(scale);
    /* max_ps(p, m) keeps m when p is NaN, as the scalar comparison does */
    __m256 m = _mm256_set1_ps(-INFINITY);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 p = _mm256_mul_ps(_mm256_loadu_ps(x + i), s);
        _mm256_storeu_ps(x + i, p);
        m = _mm256_max_ps(p, m);
    }
    float mx = tw_hmax256(m);
    for (; i < n; i++) {
        x[i] *= scale;
        mx = x[i] > mx ? x[i] : mx;
    }
    return mx;
}

/* Two passes: the NaNs scrubbed (written back only where a block has one)
 * and the maximum found, then the first block holding it searched. A
 * vocabulary's logits (8-152K floats) stay in the caches between the
 * passes. */
TW_AVX2 static size_t argmax_f32(float *x, size_t n)
{
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 m = ninf;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
        if (_mm256_movemask_ps(nan)) {
            v = _mm256_blendv_ps(v, ninf, nan);
            _mm256_storeu_ps(x + i, v);
        }
        m = _mm256_max_ps(v, m);
    }
    float mx = tw_hmax256(m);
    for (size_t j = i; j < n; j++) {
        if (isnan(x[j]))
            x[j] = -INFINITY;
        mx = x[j] > mx ? x[j] : mx;
    }
    if (mx == -INFINITY)
        return 0;
    const __m256 want = _mm256_set1_ps(mx);
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + j), want, _CMP_EQ_OQ));
        if (hit)
            return j + (size_t)__builtin_ctz((unsigned)hit);
    }
    for (; j < n; j++)
        if (x[j] == mx)
            return j;
    return 0;
}

TW_AVX2 static void silu_mul_f32(float *g, const float *u, size_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256 e = exp256(_mm256_xor_ps(x, sign));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)),
                                              _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

TW_AVX2 static void silu_f32(float *x, size_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 e = exp256(_mm256_xor_ps(v, sign));
        _mm256_storeu_ps(x + i, _mm256_div_ps(v, _mm256_add_ps(one, e)));
    }
    for (; i < n; i++)
        x[i] = x[i] / (1.0f + expf(-x[i]));
}

/* The delta rule, 32 state columns at a time (delta_cols with U = 4) with
 * their sums of mem and out held in registers down all dk rows. Each
 * element sees the scalar version's operations in its order (a multiply,
 * then an add: no fmas), so every ISA gives the same bits and the
 * recurrence stays exactly what the reference checkpoints were checked
 * against. The first pass only reads the old state: the second recomputes
 * the decayed rows, to the same bits, instead of reading back a stored
 * copy, so the state is crossed three times instead of four (read, read,
 * write), which is what a decode step that finds it out of cache waits
 * on. */
TW_AVX2 static inline __attribute__((always_inline)) void
delta_cols(float *S, const float *src, const float *q, const float *k, const float *v,
           __m256 vdecay, __m256 vbeta, size_t dk, size_t dv, size_t c0, float *out, const int U)
{
    __m256 m[4], o[4];
    for (int u = 0; u < U; u++) {
        m[u] = _mm256_setzero_ps();
        o[u] = _mm256_setzero_ps();
    }
    for (size_t i = 0; i < dk; i++) {
        const float *old = src + i * dv + c0;
        const __m256 ki = _mm256_set1_ps(k[i]);
        for (int u = 0; u < U; u++) {
            const __m256 r = _mm256_mul_ps(_mm256_loadu_ps(old + 8 * u), vdecay);
            m[u] = _mm256_add_ps(m[u], _mm256_mul_ps(r, ki));
        }
    }
    for (int u = 0; u < U; u++)
        m[u] = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(v + c0 + 8 * u), m[u]), vbeta);
    for (size_t i = 0; i < dk; i++) {
        const float *old = src + i * dv + c0;
        float *row = S + i * dv + c0;
        const __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]);
        for (int u = 0; u < U; u++) {
            const __m256 r = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(old + 8 * u), vdecay),
                                           _mm256_mul_ps(ki, m[u]));
            _mm256_storeu_ps(row + 8 * u, r);
            o[u] = _mm256_add_ps(o[u], _mm256_mul_ps(r, qi));
        }
    }
    for (int u = 0; u < U; u++)
        _mm256_storeu_ps(out + c0 + 8 * u, o[u]);
}

TW_AVX2 static void delta_rule_f32(float *S, const float *src, const float *q, const float *k,
                                   const float *v, float decay, float beta, size_t dk,
                                   size_t dv, float *mem, float *out)
{
    const __m256 vdecay = _mm256_set1_ps(decay), vbeta = _mm256_set1_ps(beta);
    size_t c0 = 0;
    for (; c0 + 32 <= dv; c0 += 32)
        delta_cols(S, src, q, k, v, vdecay, vbeta, dk, dv, c0, out, 4);
    for (; c0 + 8 <= dv; c0 += 8)
        delta_cols(S, src, q, k, v, vdecay, vbeta, dk, dv, c0, out, 1);
    /* the columns past the last 8-wide chunk */
    if (c0 < dv) {
        for (size_t j = c0; j < dv; j++)
            mem[j] = 0.0f;
        for (size_t i = 0; i < dk; i++)
            for (size_t j = c0; j < dv; j++) {
                S[i * dv + j] = src[i * dv + j] * decay;
                mem[j] += S[i * dv + j] * k[i];
            }
        for (size_t j = c0; j < dv; j++) {
            mem[j] = (v[j] - mem[j]) * beta;
            out[j] = 0.0f;
        }
        for (size_t i = 0; i < dk; i++)
            for (size_t j = c0; j < dv; j++) {
                S[i * dv + j] += k[i] * mem[j];
                out[j] += S[i * dv + j] * q[i];
            }
    }
}

/* Eight values of a row from element i, f32 or IEEE half (H16): the half
 * conversion is exact, so either way the arithmetic after it sees the same
 * f32 values a converted copy would hold. */
TW_AVX2 static inline __attribute__((always_inline)) __m256 load8(const void *p, size_t i,
                                                                  const int H16)
{
    if (H16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
    return _mm256_loadu_ps((const float *)p + i);
}

static inline float load1(const void *p, size_t i, const int H16)
{
    return H16 ? tw_f16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

/* QN queries against KN keys from row r0 of K: one accumulator per score,
 * s[a * KN + b], over the 8-wide chunks of d; returns where they end. */
TW_AVX2 static inline __attribute__((always_inline)) size_t
dot_chunks(const float *q, size_t q_stride, const void *K, size_t r0, size_t d, __m256 *s,
           const int QN, const int KN, const int H16)
{
#pragma GCC unroll 8
    for (int i = 0; i < QN * KN; i++)
        s[i] = _mm256_setzero_ps();
    size_t j = 0;
    for (; j + 8 <= d; j += 8) {
        __m256 kv[8];
#pragma GCC unroll 8
        for (int b = 0; b < KN; b++)
            kv[b] = load8(K, (r0 + (size_t)b) * d + j, H16);
#pragma GCC unroll 4
        for (int a = 0; a < QN; a++) {
            const __m256 qv = _mm256_loadu_ps(q + (size_t)a * q_stride + j);
#pragma GCC unroll 8
            for (int b = 0; b < KN; b++)
                s[a * KN + b] = _mm256_fmadd_ps(qv, kv[b], s[a * KN + b]);
        }
    }
    return j;
}

/* QN queries (1..4) against KN keys (1..2), rows r0.. of K: each score one
 * accumulator over 8-wide chunks, then the scalar tail, the same steps for
 * every key and query whatever the grouping (see tw_dot_rows_multi_fn). */
TW_AVX2 static inline __attribute__((always_inline)) void
dot_tile(const float *q, size_t q_stride, const void *K, size_t r0, size_t d, float *out,
         size_t out_stride, const int QN, const int KN, const int H16)
{
    __m256 s[8];
    const size_t j = dot_chunks(q, q_stride, K, r0, d, s, QN, KN, H16);
#pragma GCC unroll 4
    for (int a = 0; a < QN; a++)
#pragma GCC unroll 4
        for (int b = 0; b < KN; b++) {
            const float *qa = q + (size_t)a * q_stride;
            const size_t kb = (r0 + (size_t)b) * d;
            float r = tw_hsum256(s[a * KN + b]);
            for (size_t t = j; t < d; t++)
                r += qa[t] * load1(K, kb + t, H16);
            out[(size_t)a * out_stride + (size_t)b] = r;
        }
}

/* Rows ahead of the one being read that the score and value kernels fetch
 * into L1: a decode step's keys and values come from memory, and the
 * kernels' arithmetic on one row is too short for the hardware prefetcher
 * alone to keep the next ones coming. */
#define ROWS_AHEAD 16

/* Fetches rows [r, r + count) of a row-major matrix of d values (f32 or
 * IEEE half) into L1. */
TW_AVX2 static inline __attribute__((always_inline)) void fetch_rows(const void *M, size_t r,
                                                                     size_t count, size_t d,
                                                                     const int H16)
{
    const size_t es = H16 ? 2 : 4;
    const char *p = (const char *)M + r * d * es;
    for (size_t o = 0; o < count * d * es; o += 64)
        _mm_prefetch(p + o, _MM_HINT_T0);
}

/* Eight accumulators' sums, in order, each with exactly tw_hsum256's
 * additions ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)): the halves
 * of two accumulators at a time, then the pairs of four, then the last
 * pairs of eight, by lane shuffles that serve eight sums where
 * tw_hsum256 would take six operations for each. */
TW_AVX2 static inline __m256 sum8(const __m256 s[8])
{
    __m256 t[4];
    for (int i = 0; i < 4; i++)
        t[i] = _mm256_add_ps(_mm256_permute2f128_ps(s[2 * i], s[2 * i + 1], 0x20),
                             _mm256_permute2f128_ps(s[2 * i], s[2 * i + 1], 0x31));
    /* t[i]: accumulator 2i's four half sums, then 2i + 1's */
    __m256 u[2];
    for (int i = 0; i < 2; i++)
        u[i] = _mm256_add_ps(_mm256_shuffle_ps(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    /* u[0]: pairs of accumulators 0, 2 | 1, 3; u[1]: of 4, 6 | 5, 7 */
    const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
    /* r: sums 0, 2, 4, 6 | 1, 3, 5, 7 */
    return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* QN queries (1, 2 or 4) against 8 / QN keys, rows r0.. of K, d a multiple
 * of 8: dot_tile's accumulators, summed together by sum8. */
TW_AVX2 static inline __attribute__((always_inline)) void
dot_tile8(const float *q, size_t q_stride, const void *K, size_t r0, size_t d, float *out,
          size_t out_stride, const int QN, const int H16)
{
    __m256 s[8];
    dot_chunks(q, q_stride, K, r0, d, s, QN, 8 / QN, H16);
    const __m256 r = sum8(s);
    if (QN == 1) {
        _mm256_storeu_ps(out, r);
    } else if (QN == 2) {
        _mm_storeu_ps(out, _mm256_castps256_ps128(r));
        _mm_storeu_ps(out + out_stride, _mm256_extractf128_ps(r, 1));
    } else {
        const __m128 lo = _mm256_castps256_ps128(r), hi = _mm256_extractf128_ps(r, 1);
        _mm_storel_pi((__m64 *)(void *)out, lo);
        _mm_storeh_pi((__m64 *)(void *)(out + out_stride), lo);
        _mm_storel_pi((__m64 *)(void *)(out + 2 * out_stride), hi);
        _mm_storeh_pi((__m64 *)(void *)(out + 3 * out_stride), hi);
    }
}

/* QN queries (1, 2 or 4) against n keys: when d is a multiple of 8, eight
 * scores at a time; the keys left over, and other widths, two keys at a
 * time. */
TW_AVX2 static inline __attribute__((always_inline)) void
dot_keys(const float *q, size_t q_stride, const void *K, size_t n, size_t d, float *out,
         size_t out_stride, const int QN, const bool fetch, const int H16)
{
    size_t i = 0;
    if (d % 8 == 0) {
        const size_t kn = (size_t)(8 / QN);
        for (; i + kn <= n; i += kn) {
            if (fetch && i + ROWS_AHEAD + kn <= n)
                fetch_rows(K, i + ROWS_AHEAD, kn, d, H16);
            dot_tile8(q, q_stride, K, i, d, out + i, out_stride, QN, H16);
        }
    }
    for (; i + 2 <= n; i += 2)
        dot_tile(q, q_stride, K, i, d, out + i, out_stride, QN, 2, H16);
    if (i < n)
        dot_tile(q, q_stride, K, i, d, out + i, out_stride, QN, 1, H16);
}

TW_AVX2 static inline __attribute__((always_inline)) void
dot_rows_multi(const float *q, size_t q_stride, size_t nq, const void *K, size_t n, size_t d,
               float *out, size_t out_stride, const int H16)
{
    /* Queries in fours, then a pair and a single: the shapes dot_tile8
     * takes. The first group's pass fetches ahead (with decode prefetch
     * on); the later ones find K in L1. */
    const bool fetch = tw_kernels_decode_prefetch();
    size_t k = 0;
    for (; k + 4 <= nq; k += 4)
        dot_keys(q + k * q_stride, q_stride, K, n, d, out + k * out_stride, out_stride, 4,
                 fetch && k == 0, H16);
    if (k + 2 <= nq) {
        dot_keys(q + k * q_stride, q_stride, K, n, d, out + k * out_stride, out_stride, 2,
                 fetch && k == 0, H16);
        k += 2;
    }
    if (k < nq)
        dot_keys(q + k * q_stride, q_stride, K, n, d, out + k * out_stride, out_stride, 1,
                 fetch && k == 0, H16);
}

TW_AVX2 static void dot_rows_multi_f32(const float *q, size_t q_stride, size_t nq,
                                       const float *K, size_t n, size_t d, float *out,
                                       size_t out_stride)
{
    dot_rows_multi(q, q_stride, nq, K, n, d, out, out_stride, 0);
}

TW_AVX2 static void dot_rows_multi_h16(const float *q, size_t q_stride, size_t nq,
                                       const uint16_t *K, size_t n, size_t d, float *out,
                                       size_t out_stride)
{
    dot_rows_multi(q, q_stride, nq, K, n, d, out, out_stride, 1);
}

/* QN accumulators (QN * CW <= 8) over 8 * CW columns from j: per output
 * one fma chain over the rows in order, whatever the grouping. */
TW_AVX2 static inline __attribute__((always_inline)) void
axpy_tile(const float *p, size_t p_stride, const void *V, size_t n, size_t d, size_t j,
          float *acc, size_t acc_stride, const int QN, const int CW, const bool fetch,
          const int H16)
{
    __m256 a[8];
#pragma GCC unroll 8
    for (int q = 0; q < QN; q++)
#pragma GCC unroll 8
        for (int c = 0; c < CW; c++)
            a[q * CW + c] = _mm256_loadu_ps(acc + (size_t)q * acc_stride + j + 8 * (size_t)c);
    for (size_t i = 0; i < n; i++) {
        if (fetch && i + ROWS_AHEAD < n)
            fetch_rows(V, i + ROWS_AHEAD, 1, d, H16);
        __m256 v[8];
#pragma GCC unroll 8
        for (int c = 0; c < CW; c++)
            v[c] = load8(V, i * d + j + 8 * (size_t)c, H16);
#pragma GCC unroll 8
        for (int q = 0; q < QN; q++) {
            const __m256 pv = _mm256_broadcast_ss(p + (size_t)q * p_stride + i);
#pragma GCC unroll 8
            for (int c = 0; c < CW; c++)
                a[q * CW + c] = _mm256_fmadd_ps(pv, v[c], a[q * CW + c]);
        }
    }
#pragma GCC unroll 8
    for (int q = 0; q < QN; q++)
#pragma GCC unroll 8
        for (int c = 0; c < CW; c++)
            _mm256_storeu_ps(acc + (size_t)q * acc_stride + j + 8 * (size_t)c, a[q * CW + c]);
}

/* QN accumulators over all d columns: a lone query 64 at a time, then 16
 * at a time, then 8, then one by one with the same fused multiply-adds. */
TW_AVX2 static inline __attribute__((always_inline)) void
axpy_cols(const float *p, size_t p_stride, const void *V, size_t n, size_t d, float *acc,
          size_t acc_stride, const int QN, const bool fetch, const int H16)
{
    /* the first column pass fetches whole rows ahead: the later ones, and
     * the later query tiles, find them in L1 */
    size_t j = 0;
    if (QN == 1)
        /* a lone query's eight accumulators span 64 columns: with 16, its
         * two fma chains would wait on each other's latency */
        for (; j + 64 <= d; j += 64)
            axpy_tile(p, p_stride, V, n, d, j, acc, acc_stride, 1, 8, fetch && j == 0, H16);
    for (; j + 16 <= d; j += 16)
        axpy_tile(p, p_stride, V, n, d, j, acc, acc_stride, QN, 2, fetch && j == 0, H16);
    if (j + 8 <= d) {
        axpy_tile(p, p_stride, V, n, d, j, acc, acc_stride, QN, 1, fetch && j == 0, H16);
        j += 8;
    }
    for (int q = 0; q < QN; q++)
        for (size_t t = j; t < d; t++) {
            float s = acc[(size_t)q * acc_stride + t];
            for (size_t i = 0; i < n; i++)
                s = fmaf(p[(size_t)q * p_stride + i], load1(V, i * d + t, H16), s);
            acc[(size_t)q * acc_stride + t] = s;
        }
}

/* Runs TILE(k, QN) over the queries in tiles of four from k = 0, the last
 * tile taking the 1..4 left. */
#define BY_FOURS(nq, TILE)                                                                      \
    for (size_t k = 0; k < (nq); k += 4)                                                        \
        switch ((nq) - k) {                                                                     \
        case 1: TILE(k, 1); break;                                                              \
        case 2: TILE(k, 2); break;                                                              \
        case 3: TILE(k, 3); break;                                                              \
        default: TILE(k, 4); break;                                                             \
        }

TW_AVX2 static inline __attribute__((always_inline)) void
axpy_rows_multi(const float *p, size_t p_stride, size_t nq, const void *V, size_t n, size_t d,
                float *acc, size_t acc_stride, const int H16)
{
    const bool fetch = tw_kernels_decode_prefetch();
#define AXPY_TILE(k, QN) axpy_cols(p + (k) * p_stride, p_stride, V, n, d, acc + (k) * acc_stride, \
                                   acc_stride, QN, fetch && (k) == 0, H16)
    BY_FOURS(nq, AXPY_TILE);
#undef AXPY_TILE
}

TW_AVX2 static void axpy_rows_multi_f32(const float *p, size_t p_stride, size_t nq,
                                        const float *V, size_t n, size_t d, float *acc,
                                        size_t acc_stride)
{
    axpy_rows_multi(p, p_stride, nq, V, n, d, acc, acc_stride, 0);
}

TW_AVX2 static void axpy_rows_multi_h16(const float *p, size_t p_stride, size_t nq,
                                        const uint16_t *V, size_t n, size_t d, float *acc,
                                        size_t acc_stride)
{
    axpy_rows_multi(p, p_stride, nq, V, n, d, acc, acc_stride, 1);
}

/* F16C's conversion rounds to nearest even, keeps a NaN's sign and top
 * payload bits with the quiet bit set, and gives infinity from 65520 on:
 * tw_f32_to_f16's bits for every input. */
TW_AVX2 static void to_f16(const float *src, uint16_t *dst, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        dst[i] = tw_f32_to_f16(src[i]);
}

void tw_isa_fill_vecops_avx2(tw_isa_table *t)
{
    t->to_f16 = to_f16;
    t->dot_f32 = tw_dot_f32_avx2;
    t->dot_rows_multi_f32 = dot_rows_multi_f32;
    t->axpy_rows_multi_f32 = axpy_rows_multi_f32;
    t->dot_rows_multi_h16 = dot_rows_multi_h16;
    t->axpy_rows_multi_h16 = axpy_rows_multi_h16;
    t->exp_shift_f32 = exp_shift_f32;
    t->scale_max_f32 = scale_max_f32;
    t->argmax_f32 = argmax_f32;
    t->silu_mul_f32 = silu_mul_f32;
    t->silu_f32 = silu_f32;
    t->delta_rule_f32 = delta_rule_f32;
}

#else

void tw_isa_fill_vecops_avx2(tw_isa_table *t)
{
    (void)t;
}

#endif
