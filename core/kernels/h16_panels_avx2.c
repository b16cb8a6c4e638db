/* AVX2 half-precision panels (h16_panels.h): 24 rows, three ymm a column,
 * against 4 activations, 12 accumulators, which with the three weight
 * vectors and a broadcast fill the 16 ymm registers. Against 16 rows and 6
 * activations (also 12 accumulators) a step takes 4 broadcasts instead of
 * 6 for its 12 multiply-adds; on Zen 3 the broadcasts, not the
 * multiply-adds, set the pace of the 6-activation tile. */
#include "kernels/h16_panels.h"
#include "kernels/kernels_internal.h"
#include "kernels/simd_x86.h"

#ifdef TW_HAVE_X86

#define PR       24
#define PANEL_KC TW_PANEL_KC
#define PT       4

/* Eight vectors of 8 floats turned about their diagonal. */
TW_AVX2 static inline void transpose8(__m256 r[8])
{
    __m256 t[8], s[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* s[4h + j]: in each 128-bit lane L, column 4L + j of rows 4h..4h+3 */
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        s[4 * h] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
        s[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
        s[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
        s[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x20);
        r[4 + j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x31);
    }
}

/* Eight half-precision values from h widened (n < 8: the first n, zeros
 * after them). */
TW_AVX2 static inline __m256 load_h8(const uint16_t *h, size_t n, const int is_bf16)
{
    __m128i v;
    if (n >= 8) {
        v = _mm_loadu_si128((const __m128i *)(const void *)h);
    } else {
        uint16_t part[8] = {0};
        memcpy(part, h, n * sizeof *h);
        v = _mm_loadu_si128((const __m128i *)(const void *)part);
    }
    if (is_bf16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
    return _mm256_cvtph_ps(v);
}

/* y's 8 lanes at p; masked only for a panel's last rows, because AMD cores
 * run vmaskmovps as microcode (a masked store costs tens of cycles on Zen
 * 3, a quarter of a 256-column tile's time when every tile took them). */
TW_AVX2 static inline __m256 y_load(const float *p, __m256i m, bool full)
{
    return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}

TW_AVX2 static inline void y_store(float *p, __m256i m, bool full, __m256 v)
{
    if (full)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, m, v);
}

/* Eight half-precision values widened. */
TW_AVX2 static inline __m256 widen_h8(__m128i v, const int is_bf16)
{
    if (is_bf16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
    return _mm256_cvtph_ps(v);
}

/* Columns [0, 8) of the 8 rows at h (re elements apart) widened and turned
 * into 8 vectors PR floats apart at wp. Unrolled by hand so that the rows
 * stay in registers at every optimisation level (at -O2, gcc kept the
 * generic loop's rows on the stack and packing took five times as long). */
TW_AVX2 static inline __attribute__((always_inline)) void pack_block8(const uint16_t *h, size_t re,
                                                                      float *wp, const int is_bf16)
{
    __m256 v[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        v[i] = widen_h8(_mm_loadu_si128((const __m128i *)(const void *)(h + i * re)), is_bf16);
    transpose8(v);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        _mm256_store_ps(wp + j * PR, v[j]);
}

/* Rows [0, nr) of h's columns [0, kc) widened into wp, column k's PR
 * weights at wp + k * PR, in 8 x 8 blocks; a whole panel's full blocks take
 * the unrolled path, a short panel and the last columns the general one. */
TW_AVX2 static inline void pack_panel(const uint16_t *h, size_t re, size_t nr, size_t kc, float *wp,
                                      const int is_bf16)
{
    size_t kb0 = 0;
    if (nr == PR) {
        for (; kb0 + 8 <= kc; kb0 += 8)
            for (size_t rb = 0; rb < PR; rb += 8)
                pack_block8(h + rb * re + kb0, re, wp + kb0 * PR + rb, is_bf16);
    }
    for (size_t rb = 0; rb < PR && kb0 < kc; rb += 8) {
        for (size_t kb = kb0; kb < kc; kb += 8) {
            const size_t nk = kc - kb < 8 ? kc - kb : 8;
            __m256 v[8];
            for (size_t i = 0; i < 8; i++)
                v[i] = rb + i < nr ? load_h8(h + (rb + i) * re + kb, nk, is_bf16)
                                   : _mm256_setzero_ps();
            transpose8(v);
            for (size_t j = 0; j < nk; j++)
                _mm256_store_ps(wp + (kb + j) * PR + rb, v[j]);
        }
    }
}

/* TB activations (x, rows x_stride apart) against NV vectors of a packed
 * panel over kc columns into y (rows y_stride apart), adding to what y
 * holds unless first; lanes past nr are neither read nor written. */
TW_AVX2 static inline __attribute__((always_inline)) void
panel_tile_nv(const float *wp, size_t kc, const float *x, size_t x_stride, float *y,
              size_t y_stride, bool first, size_t nr, const int TB, const int NV)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)nr), lane);
    const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)nr - 8), lane);
    const __m256i m2 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)nr - 16), lane);
    const bool full = nr == (size_t)NV * 8;
    /* all PT set, so the compiler sees no lane of a narrower group unset */
    __m256 a0[PT], a1[PT], a2[PT];
#pragma GCC unroll 4
    for (int t = 0; t < PT; t++)
        a0[t] = a1[t] = a2[t] = _mm256_setzero_ps();
    if (!first) {
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++) {
            a0[t] = y_load(y + t * y_stride, m0, full);
            if (NV > 1)
                a1[t] = y_load(y + t * y_stride + 8, m1, full);
            if (NV > 2)
                a2[t] = y_load(y + t * y_stride + 16, m2, full);
        }
    }
    for (size_t k = 0; k < kc; k++) {
        const __m256 w0 = _mm256_load_ps(wp + k * PR);
        const __m256 w1 = NV > 1 ? _mm256_load_ps(wp + k * PR + 8) : w0;
        const __m256 w2 = NV > 2 ? _mm256_load_ps(wp + k * PR + 16) : w0;
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++) {
            const __m256 b = _mm256_broadcast_ss(x + t * x_stride + k);
            a0[t] = _mm256_fmadd_ps(w0, b, a0[t]);
            if (NV > 1)
                a1[t] = _mm256_fmadd_ps(w1, b, a1[t]);
            if (NV > 2)
                a2[t] = _mm256_fmadd_ps(w2, b, a2[t]);
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++) {
        y_store(y + t * y_stride, m0, full, a0[t]);
        if (NV > 1)
            y_store(y + t * y_stride + 8, m1, full, a1[t]);
        if (NV > 2)
            y_store(y + t * y_stride + 16, m2, full, a2[t]);
    }
}

/* A panel's last rows take only the vectors they fill: the matrix's short
 * last panel (896 rows are 37 panels and 8 rows) then costs its rows, not a
 * whole panel's multiply-adds. */
TW_AVX2 static inline void panel_tile(const float *wp, size_t kc, const float *x, size_t x_stride,
                                      float *y, size_t y_stride, bool first, size_t nr,
                                      const int TB)
{
    if (nr > 16)
        panel_tile_nv(wp, kc, x, x_stride, y, y_stride, first, nr, TB, 3);
    else if (nr > 8)
        panel_tile_nv(wp, kc, x, x_stride, y, y_stride, first, nr, TB, 2);
    else
        panel_tile_nv(wp, kc, x, x_stride, y, y_stride, first, nr, TB, 1);
}

TW_PANELS_DRIVER(TW_AVX2, f16, pack_panel, panel_tile, PR, PT, PANEL_KC, 0)
TW_PANELS_DRIVER(TW_AVX2, bf16, pack_panel, panel_tile, PR, PT, PANEL_KC, 1)

void tw_isa_fill_panels_avx2(tw_isa_table *t)
{
    t->panels[tw_ktype_index(TW_TYPE_F16)] = panels_f16;
    t->panels[tw_ktype_index(TW_TYPE_BF16)] = panels_bf16;
    t->panel_rows = PR;
}

#else

void tw_isa_fill_panels_avx2(tw_isa_table *t)
{
    (void)t;
}

#endif
