/* Shared helpers for the x86 SIMD kernel files. Every function carries its
 * own target attribute, so the files build without -m flags and the code
 * only runs after dispatch.c has checked the CPU. */
#ifndef TW_KERNELS_SIMD_X86_H
#define TW_KERNELS_SIMD_X86_H

#if defined(__x86_64__)
#define TW_HAVE_X86 1
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define TW_AVX2 __attribute__((target("avx2,fma,f16c")))
#define TW_AVX512 \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))

/* The vector exponential's constants (exp256 in vecops_avx2.c, exp512 in
 * vecops_avx512.c): one set, so the two widths give every lane the same
 * bits. Inputs are clamped to [TW_EXP_LO, TW_EXP_HI]; x = k ln2 + r with
 * ln2 in two parts (TW_EXP_LN2_HI exact in few bits, so r stays exact);
 * e^r by its degree-6 Taylor polynomial, coefficients TW_EXP_C6 .. C0. */
#define TW_EXP_LO     (-87.3f)
#define TW_EXP_HI     88.7f
#define TW_EXP_LOG2E  1.44269504088896341f
#define TW_EXP_LN2_HI 0.693359375f
#define TW_EXP_LN2_LO (-2.12194440e-4f)
#define TW_EXP_C6     (1.0f / 720.0f)
#define TW_EXP_C5     (1.0f / 120.0f)
#define TW_EXP_C4     (1.0f / 24.0f)
#define TW_EXP_C3     (1.0f / 6.0f)
#define TW_EXP_C2     0.5f
#define TW_EXP_C1     1.0f
#define TW_EXP_C0     1.0f

TW_AVX2 static inline float tw_hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

TW_AVX2 static inline float tw_hmax256(__m256 v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

TW_AVX2 static inline float tw_h2f(uint16_t h)
{
    return _cvtsh_ss(h);
}

/* The block scales of the 32-value tiles, staged before a row's integer
 * work so that work needs one broadcast per block and activation: for one
 * activation (TB = 1) sc[i] = dw_i * dT[i], for a group of TB = 2..8
 * sc[8 * i + t] = dw_i * dT[8 * i + t] (lanes from TB on are not used), over
 * the nb blocks of one row (bb bytes each, the f16 scale first). TB is a
 * constant at every call. */
TW_AVX2 static inline __attribute__((always_inline)) void tw_stage_scales(
    const uint8_t *w, size_t bb, size_t nb, const float *dT, float *sc, const int TB)
{
    size_t i = 0;
    if (TB == 1) {
        /* eight blocks' scales widened by one conversion */
        for (; i + 8 <= nb; i += 8) {
            uint16_t h[8];
            for (size_t k = 0; k < 8; k++)
                memcpy(&h[k], w + (i + k) * bb, 2);
            const __m256 dw8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)h));
            _mm256_storeu_ps(sc + i, _mm256_mul_ps(dw8, _mm256_loadu_ps(dT + i)));
        }
    }
    for (; i < nb; i++) {
        uint16_t d16;
        memcpy(&d16, w + i * bb, 2);
        const float dw = tw_h2f(d16);
        if (TB == 1)
            sc[i] = dw * dT[i];
        else if (TB <= 4)
            _mm_store_ps(sc + 8 * i, _mm_mul_ps(_mm_set1_ps(dw), _mm_load_ps(dT + 8 * i)));
        else
            _mm256_store_ps(sc + 8 * i,
                            _mm256_mul_ps(_mm256_set1_ps(dw), _mm256_load_ps(dT + 8 * i)));
    }
}

TW_AVX2 static inline __m256i tw_load256(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* The 32 Q4_0 levels 0..15 of a block, in element order, as bytes. */
TW_AVX2 static inline __m256i tw_q4_0_nibbles(const uint8_t *qs)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)qs);
    __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

/* 32 Q4_0 levels minus 8, in element order, as signed bytes. */
TW_AVX2 static inline __m256i tw_q4_0_levels(const uint8_t *qs)
{
    return _mm256_sub_epi8(tw_q4_0_nibbles(qs), _mm256_set1_epi8(8));
}

/* Bit 4 of the 32 levels of a Q5_0/Q5_1 block: 0x10 where bit j of qh is
 * set. Byte j takes qh byte j / 8, keeps bit j % 8 and compares. */
TW_AVX2 static inline __m256i tw_q5_high_bits(const uint8_t *qh)
{
    uint32_t bits;
    memcpy(&bits, qh, 4);
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                            2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i select = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, select), select);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* The 32 levels 0..31 of a Q5_0/Q5_1 block from its qh and qs fields:
 * low nibbles as in Q4_0 plus bit 4 from qh. */
TW_AVX2 static inline __m256i tw_q5_levels(const uint8_t *qh, const uint8_t *qs)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)qs);
    __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1);
    both = _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
    return _mm256_or_si256(both, tw_q5_high_bits(qh));
}

/* The 12 packed scale bytes of a Q4_K/Q5_K block as 8 scales and 8 mins,
 * one byte each, scale or min j in byte j of *scales / *mins (see
 * tw_k_scale_min for the packing). They stay in registers: bytes stored
 * one word at a time and read back as a vector wait for the stores on
 * every block. */
static inline void tw_k_scales_mins(const uint8_t *packed, uint64_t *scales, uint64_t *mins)
{
    uint32_t u[3];
    memcpy(u, packed, 12);
    const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    const uint32_t sc_lo = u[0] & m6;
    const uint32_t sc_hi = (u[2] & m4) | (((u[0] >> 6) & m2) << 4);
    const uint32_t mn_lo = u[1] & m6;
    const uint32_t mn_hi = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4);
    *scales = (uint64_t)sc_lo | (uint64_t)sc_hi << 32;
    *mins = (uint64_t)mn_lo | (uint64_t)mn_hi << 32;
}

/* The same as 16 bytes: the 8 scales, then the 8 mins. */
static inline void tw_k_unpack_scales(const uint8_t *packed, uint8_t out[16])
{
    uint64_t sm[2];
    tw_k_scales_mins(packed, &sm[0], &sm[1]);
    memcpy(out, sm, 16);
}

#endif
#endif
