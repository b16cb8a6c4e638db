/* AVX-512 half-precision panels (h16_panels.h): 32 rows, two zmm a column,
 * against 12 activations, 24 accumulators. On a 2-core Emerald Rapids Xeon,
 * one thread, 128 activations: 1.1-1.5x the GFLOP/s of dequantized tiles
 * through sgemm (SkylakeX kernels) over qwen2-0.5b's matrix shapes. */
#include "kernels/h16_panels.h"
#include "kernels/kernels_internal.h"
#include "kernels/simd_x86.h"

#ifdef TW_HAVE_X86

#define PR 32
#define PANEL_KC TW_PANEL_KC
#define PT 12

/* Sixteen vectors of 16 floats turned about their diagonal: lane j of
 * vector i goes to lane i of vector j. */
TW_AVX512 static inline void transpose16(__m512 r[16])
{
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* r[4i + j]: in each 128-bit lane L, column 4L + j of rows 4i..4i+3 */
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
        const __m512 even_a = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
        const __m512 even_b = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
        const __m512 odd_a = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xDD);
        const __m512 odd_b = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xDD);
        t[j] = _mm512_shuffle_f32x4(even_a, even_b, 0x88);
        t[8 + j] = _mm512_shuffle_f32x4(even_a, even_b, 0xDD);
        t[4 + j] = _mm512_shuffle_f32x4(odd_a, odd_b, 0x88);
        t[12 + j] = _mm512_shuffle_f32x4(odd_a, odd_b, 0xDD);
    }
    for (int i = 0; i < 16; i++)
        r[i] = t[i];
}

/* Rows [0, nr) of h's columns [0, kc) widened into wp, column k's 32
 * weights at wp + k * PR, in 16 x 16 blocks. */
TW_AVX512 static inline void pack_panel(const uint16_t *h, size_t re, size_t nr, size_t kc,
                                        float *wp, const int is_bf16)
{
    for (size_t rb = 0; rb < PR; rb += 16) {
        for (size_t kb = 0; kb < kc; kb += 16) {
            const size_t nk = kc - kb < 16 ? kc - kb : 16;
            const __mmask16 m = nk >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nk) - 1u);
            __m512 v[16];
            for (size_t i = 0; i < 16; i++) {
                if (rb + i >= nr) {
                    v[i] = _mm512_setzero_ps();
                    continue;
                }
                const __m256i hv = _mm256_maskz_loadu_epi16(m, h + (rb + i) * re + kb);
                v[i] = is_bf16
                           ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(hv), 16))
                           : _mm512_cvtph_ps(hv);
            }
            transpose16(v);
            for (size_t j = 0; j < nk; j++)
                _mm512_store_ps(wp + (kb + j) * PR + rb, v[j]);
        }
    }
}

/* TB activations (x, rows x_stride apart) against a packed panel over kc
 * columns into y (rows y_stride apart), adding to what y holds unless
 * first; lanes past nr are neither read nor written. */
TW_AVX512 static inline void panel_tile(const float *wp, size_t kc, const float *x, size_t x_stride,
                                        float *y, size_t y_stride, bool first, size_t nr,
                                        const int TB)
{
    const __mmask16 m0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1u);
    const __mmask16 m1 = nr >= 32   ? (__mmask16)0xFFFF
                         : nr <= 16 ? (__mmask16)0
                                    : (__mmask16)((1u << (nr - 16)) - 1u);
    /* all PT set, so the compiler sees no lane of a narrower group unset */
    __m512 a0[PT], a1[PT];
#pragma GCC unroll 12
    for (int t = 0; t < PT; t++)
        a0[t] = a1[t] = _mm512_setzero_ps();
#pragma GCC unroll 12
    for (int t = 0; t < TB; t++) {
        a0[t] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, y + t * y_stride);
        a1[t] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, y + t * y_stride + 16);
    }
    for (size_t k = 0; k < kc; k++) {
        const __m512 w0 = _mm512_load_ps(wp + k * PR);
        const __m512 w1 = _mm512_load_ps(wp + k * PR + 16);
#pragma GCC unroll 12
        for (int t = 0; t < TB; t++) {
            const __m512 b = _mm512_set1_ps(x[t * x_stride + k]);
            a0[t] = _mm512_fmadd_ps(w0, b, a0[t]);
            a1[t] = _mm512_fmadd_ps(w1, b, a1[t]);
        }
    }
#pragma GCC unroll 12
    for (int t = 0; t < TB; t++) {
        _mm512_mask_storeu_ps(y + t * y_stride, m0, a0[t]);
        _mm512_mask_storeu_ps(y + t * y_stride + 16, m1, a1[t]);
    }
}

TW_PANELS_DRIVER(TW_AVX512, f16, pack_panel, panel_tile, PR, PT, PANEL_KC, 0)
TW_PANELS_DRIVER(TW_AVX512, bf16, pack_panel, panel_tile, PR, PT, PANEL_KC, 1)

void tw_isa_fill_panels_avx512(tw_isa_table *t)
{
    t->panels[tw_ktype_index(TW_TYPE_F16)] = panels_f16;
    t->panels[tw_ktype_index(TW_TYPE_BF16)] = panels_bf16;
    t->panel_rows = PR;
}

#else

void tw_isa_fill_panels_avx512(tw_isa_table *t)
{
    (void)t;
}

#endif
