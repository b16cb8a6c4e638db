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

/* The 12 packed scale bytes of a Q4_K/Q5_K block as 8 scales followed by
 * 8 mins, one byte each (see tw_k_scale_min for the packing). */
static inline void tw_k_unpack_scales(const uint8_t *packed, uint8_t out[16])
{
    uint32_t u[4];
    memcpy(u, packed, 12);
    const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    u[3] = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4); /* mins 4..7 */
    uint32_t mins_lo = u[1] & m6;                           /* mins 0..3 */
    u[1] = (u[2] & m4) | (((u[0] >> 6) & m2) << 4);        /* scales 4..7 */
    u[2] = mins_lo;
    u[0] &= m6; /* scales 0..3 */
    memcpy(out, u, 16);
}

#endif
#endif
