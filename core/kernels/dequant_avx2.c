/* AVX2 dequantization for the prefill tiles. Each value is produced by the
 * same float operations as dequant.c (an exact int-to-float conversion, then
 * (d * sc) * q - m as separate multiply and subtract, never fused), so the
 * output is bit-identical to the scalar reference. */
#include "kernels/blocks.h"
#include "kernels/kernels_internal.h"
#include "kernels/simd_x86.h"

#ifdef TW_HAVE_X86

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

TW_AVX2 static void dq_f16(const void *src, float *dst, size_t n)
{
    const uint16_t *h = src;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i,
                         _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(h + i))));
    for (; i < n; i++)
        dst[i] = tw_f16_to_f32(h[i]);
}

TW_AVX2 static void dq_bf16(const void *src, float *dst, size_t n)
{
    const uint16_t *h = src;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(h + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
    for (; i < n; i++)
        dst[i] = tw_bf16_to_f32(h[i]);
}

/* 8 signed bytes at p as floats. */
TW_AVX2 static inline __m256 i8x8_to_f32(const void *p)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

/* Stores d * q for 32 signed byte levels. */
TW_AVX2 static inline void store_scaled32(float *y, __m256i q, __m256 d)
{
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), d));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(
                                _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), d));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), d));
    _mm256_storeu_ps(y + 24, _mm256_mul_ps(
                                 _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), d));
}

/* Stores d * q - m for 32 unsigned byte levels (q < 128). */
TW_AVX2 static inline void store_affine32(float *y, __m256i q, __m256 d, __m256 m)
{
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; k++) {
        __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(parts[k]));
        _mm256_storeu_ps(y + 8 * k, _mm256_sub_ps(_mm256_mul_ps(d, f), m));
    }
}

TW_AVX2 static void dq_q8_0(const void *src, float *y, size_t n)
{
    const tw_block_q8_0 *x = src;
    for (size_t i = 0; i < n / TW_QK8_0; i++, y += TW_QK8_0) {
        const __m256 d = _mm256_set1_ps(tw_h2f(x[i].d));
        for (int j = 0; j < 32; j += 8)
            _mm256_storeu_ps(y + j, _mm256_mul_ps(i8x8_to_f32(x[i].qs + j), d));
    }
}

TW_AVX2 static void dq_q4_0(const void *src, float *y, size_t n)
{
    const tw_block_q4_0 *x = src;
    for (size_t i = 0; i < n / TW_QK4_0; i++, y += TW_QK4_0) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)x[i].qs);
        __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1);
        q = _mm256_sub_epi8(_mm256_and_si256(q, _mm256_set1_epi8(0x0F)), _mm256_set1_epi8(8));
        store_scaled32(y, q, _mm256_set1_ps(tw_h2f(x[i].d)));
    }
}

TW_AVX2 static void dq_q5_0(const void *src, float *y, size_t n)
{
    const tw_block_q5_0 *x = src;
    for (size_t i = 0; i < n / 32; i++, y += 32) {
        __m256i q = _mm256_sub_epi8(tw_q5_levels(x[i].qh, x[i].qs), _mm256_set1_epi8(16));
        store_scaled32(y, q, _mm256_set1_ps(tw_h2f(x[i].d)));
    }
}

/* Stores d * q + m for 32 unsigned byte levels (q < 128). */
TW_AVX2 static inline void store_offset32(float *y, __m256i q, __m256 d, __m256 m)
{
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; k++) {
        __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(parts[k]));
        _mm256_storeu_ps(y + 8 * k, _mm256_add_ps(_mm256_mul_ps(f, d), m));
    }
}

TW_AVX2 static void dq_q5_1(const void *src, float *y, size_t n)
{
    const tw_block_q5_1 *x = src;
    for (size_t i = 0; i < n / 32; i++, y += 32)
        store_offset32(y, tw_q5_levels(x[i].qh, x[i].qs), _mm256_set1_ps(tw_h2f(x[i].d)),
                       _mm256_set1_ps(tw_h2f(x[i].m)));
}

TW_AVX2 static void dq_q4_k(const void *src, float *y, size_t n)
{
    const tw_block_q4_k *x = src;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (size_t i = 0; i < n / TW_QK_K; i++) {
        uint8_t sm[16];
        tw_k_unpack_scales(x[i].scales, sm);
        const float d = tw_h2f(x[i].d), min = tw_h2f(x[i].dmin);
        for (int g = 0; g < 4; g++, y += 64) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(x[i].qs + 32 * g));
            store_affine32(y, _mm256_and_si256(q, m4), _mm256_set1_ps(d * sm[2 * g]),
                           _mm256_set1_ps(min * sm[8 + 2 * g]));
            store_affine32(y + 32, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                           _mm256_set1_ps(d * sm[2 * g + 1]),
                           _mm256_set1_ps(min * sm[8 + 2 * g + 1]));
        }
    }
}

TW_AVX2 static void dq_q5_k(const void *src, float *y, size_t n)
{
    const tw_block_q5_k *x = src;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i one = _mm256_set1_epi8(1);
    for (size_t i = 0; i < n / TW_QK_K; i++) {
        uint8_t sm[16];
        tw_k_unpack_scales(x[i].scales, sm);
        const float d = tw_h2f(x[i].d), min = tw_h2f(x[i].dmin);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(const void *)x[i].qh);
        for (int g = 0; g < 4; g++, y += 64) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(x[i].qs + 32 * g));
            __m256i hlo = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), one), 4);
            __m256i hhi =
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * g + 1), one), 4);
            store_affine32(y, _mm256_or_si256(_mm256_and_si256(q, m4), hlo),
                           _mm256_set1_ps(d * sm[2 * g]), _mm256_set1_ps(min * sm[8 + 2 * g]));
            store_affine32(y + 32,
                           _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), hhi),
                           _mm256_set1_ps(d * sm[2 * g + 1]),
                           _mm256_set1_ps(min * sm[8 + 2 * g + 1]));
        }
    }
}

/* Stores (d * s0) * q for the first 16 levels and (d * s1) * q for the next. */
TW_AVX2 static inline void store_q6_32(float *y, __m256i q, float d, int s0, int s1)
{
    q = _mm256_sub_epi8(q, _mm256_set1_epi8(32));
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    const __m256 d0 = _mm256_set1_ps(d * (float)s0), d1 = _mm256_set1_ps(d * (float)s1);
    _mm256_storeu_ps(y, _mm256_mul_ps(d0, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo))));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(d0, _mm256_cvtepi32_ps(
                                                  _mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)))));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(d1, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))));
    _mm256_storeu_ps(y + 24, _mm256_mul_ps(d1, _mm256_cvtepi32_ps(
                                                   _mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))));
}

TW_AVX2 static void dq_q6_k(const void *src, float *y, size_t n)
{
    const tw_block_q6_k *x = src;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i m2 = _mm256_set1_epi8(0x03);
    for (size_t i = 0; i < n / TW_QK_K; i++) {
        const float d = tw_h2f(x[i].d);
        for (int h = 0; h < 2; h++, y += 128) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(const void *)(x[i].ql + 64 * h));
            const __m256i l1 =
                _mm256_loadu_si256((const __m256i *)(const void *)(x[i].ql + 64 * h + 32));
            const __m256i hb = _mm256_loadu_si256((const __m256i *)(const void *)(x[i].qh + 32 * h));
            const int8_t *sc = x[i].scales + 8 * h;
            __m256i q1 = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                         _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4));
            __m256i q2 = _mm256_or_si256(
                _mm256_and_si256(l1, m4),
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m2), 4));
            __m256i q3 = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m2), 4));
            __m256i q4 = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m2), 4));
            store_q6_32(y, q1, d, sc[0], sc[1]);
            store_q6_32(y + 32, q2, d, sc[2], sc[3]);
            store_q6_32(y + 64, q3, d, sc[4], sc[5]);
            store_q6_32(y + 96, q4, d, sc[6], sc[7]);
        }
    }
}

void tw_isa_fill_dequant_avx2(tw_dequant_fn *dq)
{
    dq[tw_ktype_index(TW_TYPE_F16)] = dq_f16;
    dq[tw_ktype_index(TW_TYPE_BF16)] = dq_bf16;
    dq[tw_ktype_index(TW_TYPE_Q8_0)] = dq_q8_0;
    dq[tw_ktype_index(TW_TYPE_Q4_0)] = dq_q4_0;
    dq[tw_ktype_index(TW_TYPE_Q5_0)] = dq_q5_0;
    dq[tw_ktype_index(TW_TYPE_Q5_1)] = dq_q5_1;
    dq[tw_ktype_index(TW_TYPE_Q4_K)] = dq_q4_k;
    dq[tw_ktype_index(TW_TYPE_Q5_K)] = dq_q5_k;
    dq[tw_ktype_index(TW_TYPE_Q6_K)] = dq_q6_k;
}

#endif
