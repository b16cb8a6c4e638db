/* x86 kernels for Q8_0_R8, Q8_0 rows packed eight to a group
 * (kernels/blocks.h). Eight rows sit in the eight int32 lanes of a vector:
 * each 4-column step multiplies the eight rows' four values by the same
 * four activation values broadcast to every lane, so after the block's
 * eight steps every lane holds its row's exact block dot, and one
 * conversion and one fused multiply-add scale it for all eight rows. The
 * row-per-vector tiles of kernels_avx2.c / kernels_avx512.c instead spend
 * a conversion and an fma per block and row. Every output is thus exactly
 * tw_q8_0_r8_dot's: the same int32 per block, the same product of the two
 * scales, the same fma into its own accumulator, block after block,
 * whatever the ISA, the batch or its grouping. Measured against those
 * tiles on a 2-core EPYC (Zen 4), one thread, weights in cache: 2.3-2.5x
 * faster with VNNI for 1-16 activations; 1.2-1.9x with AVX2. */
#include "kernels/blocks.h"
#include "kernels/kernels_internal.h"
#include "kernels/simd_x86.h"

#ifdef TW_HAVE_X86

#define TW_TILE         static inline __attribute__((always_inline))
#define R8_SCALES_BYTES (2 * TW_R8_ROWS)
#define R8_STEPS        (TW_QK8_0 / 4)

/* Four activation values of block i, 4-column step k, in every lane. */
TW_AVX2 TW_TILE __m256i act4(const tw_act *a, size_t i, int k)
{
    int32_t v;
    memcpy(&v, a->qs + i * TW_QK8_0 + 4 * k, 4);
    return _mm256_set1_epi32(v);
}

/* The eight rows' scales times activation t's scale of block i, then the
 * block's dots into t's accumulator. */
#define R8_SCALE_INTO(acc, dw, isum, a, i)                                                         \
    acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps((a)->d[i])), _mm256_cvtepi32_ps(isum),  \
                          acc)

/* AVX2: the sign trick per step, |q| . sign(a, q), two int16 pair sums
 * widened to int32 by a multiply-add with ones. With pf, each block also
 * fetches the block pf bytes on (the next group's). */
TW_AVX2 TW_TILE void r8_group_avx2(const uint8_t *p, size_t nb, const tw_act *acts, float *y,
                                   size_t y_stride, const int TB, size_t pf)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[8];
#pragma GCC unroll 8
    for (int t = 0; t < TB; t++)
        acc[t] = _mm256_setzero_ps();
    for (size_t i = 0; i < nb; i++, p += TW_R8_BLOCK_BYTES) {
        if (pf)
#pragma GCC unroll 5
            for (int l = 0; l < 5; l++)
                _mm_prefetch((const char *)(p + pf + 64 * l), _MM_HINT_T0);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
        __m256i isum[8];
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++)
            isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int k = 0; k < R8_STEPS; k++) {
            const __m256i q = tw_load256(p + R8_SCALES_BYTES + 32 * k);
            const __m256i qabs = _mm256_sign_epi8(q, q);
#pragma GCC unroll 8
            for (int t = 0; t < TB; t++) {
                const __m256i s = _mm256_sign_epi8(act4(&acts[t], i, k), q);
                isum[t] = _mm256_add_epi32(isum[t],
                                           _mm256_madd_epi16(_mm256_maddubs_epi16(qabs, s), ones));
            }
        }
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++)
            R8_SCALE_INTO(acc[t], dw, isum[t], &acts[t], i);
    }
#pragma GCC unroll 8
    for (int t = 0; t < TB; t++)
        _mm256_storeu_ps(y + (size_t)t * y_stride, acc[t]);
}

/* VNNI: the weights biased to unsigned (q + 128, its top bit flipped) as
 * vpdpbusd's first operand and the activations as the signed second one;
 * each lane starts from -128 times the block's activation sum, which the
 * bias adds back, so the lanes end on the same int32 as AVX2's. A vpdpbusd
 * waits for the one before it on the same accumulator, so the eight steps
 * of a block are spread over NS accumulators per activation (at least 8
 * chains in flight) and added up after, which integer sums allow exactly. */
TW_AVX512 TW_TILE void r8_group_vnni(const uint8_t *p, size_t nb, const tw_act *acts, float *y,
                                     size_t y_stride, const int TB, size_t pf)
{
    const int NS = TB >= 5 ? 2 : (8 + TB - 1) / TB;
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    __m256 acc[8];
#pragma GCC unroll 8
    for (int t = 0; t < TB; t++)
        acc[t] = _mm256_setzero_ps();
    for (size_t i = 0; i < nb; i++, p += TW_R8_BLOCK_BYTES) {
        if (pf)
#pragma GCC unroll 5
            for (int l = 0; l < 5; l++)
                _mm_prefetch((const char *)(p + pf + 64 * l), _MM_HINT_T0);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
        __m256i isum[8][8];
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++) {
            isum[t][0] = _mm256_set1_epi32(acts[t].bneg[i]);
#pragma GCC unroll 8
            for (int c = 1; c < NS; c++)
                isum[t][c] = _mm256_setzero_si256();
        }
#pragma GCC unroll 8
        for (int k = 0; k < R8_STEPS; k++) {
            const __m256i qu = _mm256_xor_si256(tw_load256(p + R8_SCALES_BYTES + 32 * k), flip);
#pragma GCC unroll 8
            for (int t = 0; t < TB; t++)
                isum[t][k % NS] = _mm256_dpbusd_epi32(isum[t][k % NS], qu, act4(&acts[t], i, k));
        }
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++) {
#pragma GCC unroll 8
            for (int c = 1; c < NS; c++)
                isum[t][0] = _mm256_add_epi32(isum[t][0], isum[t][c]);
            R8_SCALE_INTO(acc[t], dw, isum[t][0], &acts[t], i);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < TB; t++)
        _mm256_storeu_ps(y + (size_t)t * y_stride, acc[t]);
}

/* Each group of eight rows goes against every group of activations (as
 * few groups of at most 8 as there can be, near-equal) while its weights
 * are in L1; the rows past the last whole group take the scalar
 * arithmetic. From R8_PREFETCH_MIN_ACTS activations on, a group consumes
 * its weights too slowly for the hardware prefetchers to run ahead of it,
 * so the first pass over a group fetches the next group's blocks. Measured
 * on a 2-core EPYC (Zen 4), two threads, 20-68 MB of weights (L3 or DRAM):
 * 6-16 activations take 12-35% less time with VNNI and 0-21% less with
 * AVX2; fewer activations lost up to 27% from memory, so they fetch
 * nothing. */
#define R8_PREFETCH_MIN_ACTS 6
#define R8_DRIVER(ATTR, name, GROUP)                                                               \
    ATTR static void name(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,            \
                          const tw_act *acts, size_t n_act, float *y, size_t y_stride)             \
    {                                                                                              \
        const size_t nb = cols / TW_QK8_0, groups = rows / TW_R8_ROWS;                             \
        for (size_t g = 0; g < groups; g++) {                                                      \
            const uint8_t *p = w + g * TW_R8_ROWS * row_bytes;                                     \
            const size_t pf0 =                                                                     \
                n_act >= R8_PREFETCH_MIN_ACTS && g + 1 < groups ? TW_R8_ROWS * row_bytes : 0;      \
            float *yg = y + g * TW_R8_ROWS;                                                        \
            for (size_t t = 0; t < n_act;) {                                                       \
                const size_t tb = n_act - t == 1 ? 1 : tw_tile_group(n_act - t);                   \
                const size_t pf = t == 0 ? pf0 : 0;                                                \
                float *yt = yg + t * y_stride;                                                     \
                switch (tb) {                                                                      \
                case 8:                                                                            \
                    GROUP(p, nb, acts + t, yt, y_stride, 8, pf);                                   \
                    break;                                                                         \
                case 7:                                                                            \
                    GROUP(p, nb, acts + t, yt, y_stride, 7, pf);                                   \
                    break;                                                                         \
                case 6:                                                                            \
                    GROUP(p, nb, acts + t, yt, y_stride, 6, pf);                                   \
                    break;                                                                         \
                case 5:                                                                            \
                    GROUP(p, nb, acts + t, yt, y_stride, 5, pf);                                   \
                    break;                                                                         \
                case 4:                                                                            \
                    GROUP(p, nb, acts + t, yt, y_stride, 4, pf);                                   \
                    break;                                                                         \
                case 3:                                                                            \
                    GROUP(p, nb, acts + t, yt, y_stride, 3, pf);                                   \
                    break;                                                                         \
                case 2:                                                                            \
                    GROUP(p, nb, acts + t, yt, y_stride, 2, pf);                                   \
                    break;                                                                         \
                default:                                                                           \
                    GROUP(p, nb, acts + t, yt, y_stride, 1, pf);                                   \
                    break;                                                                         \
                }                                                                                  \
                t += tb;                                                                           \
            }                                                                                      \
        }                                                                                          \
        tw_rows_q8_0_r8_tail(w, row_bytes, rows, groups *TW_R8_ROWS, cols, acts, n_act, y,         \
                             y_stride);                                                            \
    }

R8_DRIVER(TW_AVX2, rows_r8_avx2, r8_group_avx2)
R8_DRIVER(TW_AVX512, rows_r8_vnni, r8_group_vnni)

void tw_isa_fill_packed_avx2(tw_isa_table *t)
{
    t->rows[tw_ktype_index(TW_TYPE_Q8_0_R8)] = rows_r8_avx2;
}

void tw_isa_fill_packed_avx512(tw_isa_table *t)
{
    t->rows[tw_ktype_index(TW_TYPE_Q8_0_R8)] = rows_r8_vnni;
}

#else

void tw_isa_fill_packed_avx2(tw_isa_table *t)
{
    (void)t;
}

void tw_isa_fill_packed_avx512(tw_isa_table *t)
{
    (void)t;
}

#endif
