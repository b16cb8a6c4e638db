/* AVX-512 kernels for CPUs with AVX512-VNNI. They overlay the AVX2 table
 * only where they win: the 32-value block types, where one vpdpbusd replaces
 * the maddubs + madd pair of every block dot, and the f32 dot product. The
 * tile structure (one accumulator per output, updated once per block in
 * block order) is the AVX2 one, so results stay independent of tile shape;
 * the integer sums are the same as every other ISA's. */
#include "kernels/blocks.h"
#include "kernels/kernels_internal.h"
#include "kernels/simd_x86.h"

#ifdef TW_HAVE_X86

TW_AVX512 static float dot_f32(const float *a, const float *b, size_t n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    if (i + 16 <= n) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        i += 16;
    }
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

TW_AVX512 static inline __m256i load256(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* 32 Q4_0 levels minus 8, in element order, as signed bytes. */
TW_AVX512 static inline __m256i q4_0_levels(const uint8_t *qs)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)qs);
    __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1);
    both = _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
    return _mm256_sub_epi8(both, _mm256_set1_epi8(8));
}

#define TW_TILE static inline __attribute__((always_inline))
#define MAX_TILE 4

TW_AVX512 static inline float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Q8_0 / Q4_0 tile: RB rows x TB activations (see kernels_avx2.c). */
TW_AVX512 TW_TILE void tile_q32(const uint8_t *w, size_t row_bytes, size_t nb,
                                const tw_act *acts, float *y, size_t y_stride, const int RB,
                                const int TB, const int is_q4)
{
    __m256 acc[MAX_TILE][MAX_TILE];
#pragma GCC unroll 4
    for (int r = 0; r < RB; r++)
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++)
            acc[r][t] = _mm256_setzero_ps();
    for (size_t i = 0; i < nb; i++) {
#pragma GCC unroll 4
        for (int r = 0; r < RB; r++) {
            const uint8_t *blk = w + (size_t)r * row_bytes + i * (is_q4 ? 18 : 34);
            uint16_t d16;
            memcpy(&d16, blk, 2);
            const __m256 dw = _mm256_set1_ps(_cvtsh_ss(d16));
            const __m256i q = is_q4 ? q4_0_levels(blk + 2) : load256(blk + 2);
            const __m256i qabs = _mm256_sign_epi8(q, q);
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++) {
                __m256i a = _mm256_sign_epi8(load256(acts[t].qs + i * 32), q);
                __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), qabs, a);
                __m256 scale = _mm256_mul_ps(dw, _mm256_broadcast_ss(&acts[t].d[i]));
                acc[r][t] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(p), acc[r][t]);
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < RB; r++)
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++)
            y[(size_t)t * y_stride + r] = hsum256(acc[r][t]);
}

/* Same tile order as the AVX2 driver: 1 row x 4 activations for batches,
 * one row at a time for decode and the remainder activations. */
#define TILE_DRIVER(name, is_q4)                                                                \
    TW_AVX512 static void rows_##name(const uint8_t *w, size_t row_bytes, size_t rows,           \
                                      size_t cols, const tw_act *acts, size_t n_act, float *y,   \
                                      size_t y_stride)                                           \
    {                                                                                           \
        const size_t nb = cols / 32;                                                            \
        size_t t = 0;                                                                           \
        for (; t + 4 <= n_act; t += 4)                                                          \
            for (size_t r = 0; r < rows; r++)                                                   \
                tile_q32(w + r * row_bytes, row_bytes, nb, acts + t, y + t * y_stride + r,       \
                         y_stride, 1, 4, is_q4);                                                \
        for (; t < n_act; t++)                                                                  \
            for (size_t r = 0; r < rows; r++)                                                   \
                tile_q32(w + r * row_bytes, row_bytes, nb, acts + t, y + t * y_stride + r,       \
                         y_stride, 1, 1, is_q4);                                                \
    }

TILE_DRIVER(q8_0, 0)
TILE_DRIVER(q4_0, 1)

void tw_isa_fill_avx512(tw_isa_table *t)
{
    t->name = "avx512";
    t->rows[tw_ktype_index(TW_TYPE_Q8_0)] = rows_q8_0;
    t->rows[tw_ktype_index(TW_TYPE_Q4_0)] = rows_q4_0;
    t->dot_f32 = dot_f32;
    /* vpdpbusd lifts Q8_0 batches to ~95 GFLOP/s per core against sgemm's
     * 75-90, and Q4_0 to a tie; both then stay bit-identical to decode. */
    t->prefill_int8 |= 1u << tw_ktype_index(TW_TYPE_Q8_0) | 1u << tw_ktype_index(TW_TYPE_Q4_0);
}

#else

void tw_isa_fill_avx512(tw_isa_table *t)
{
    t->name = "avx512";
}

#endif
