/* AVX2/FMA kernels: activation quantization and row dot products (the f32
 * vector kernels are in vecops_avx2.c). The
 * integer sums per block are exactly those of kernels_scalar.c; the
 * unsigned x signed byte products (_mm256_maddubs_epi16) cannot saturate
 * because activations stay within [-127, 127] and weight levels within
 * [0, 63] (or |w| <= 128 through the sign trick for Q8_0 / Q4_0). */
#include <math.h>
#include <stdalign.h>

#include "kernels/blocks.h"
#include "kernels/kernels_internal.h"
#include "kernels/simd_x86.h"

#ifdef TW_HAVE_X86

/* Tile kernels are always inlined into their drivers, where TB and RB are
 * constants and their loops unroll. */
#define TW_TILE static inline __attribute__((always_inline))

/* F16 / BF16 batch tiles (see TW_H16_DRIVER): 3 rows x 2 activations, 12
 * accumulators, two per output. Measured on a 2-core EPYC against 1 x 4
 * tiles with the groups outermost: 1.8x the GFLOP/s of the batched
 * matmul. */
#define H16_RB 3
#define H16_TB 2
#define H16_GROUP(TILE, RB)                                                                     \
    if (tb == 2)                                                                                \
        TW_H16_TILE(TILE, RB, 2);                                                               \
    else                                                                                        \
        TW_H16_TILE(TILE, RB, 1)

static void rows1_f32(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                     const tw_act *act, float *y)
{
    for (size_t r = 0; r < rows; r++)
        y[r] = tw_dot_f32_avx2((const float *)(const void *)(w + r * row_bytes), act->x, cols);
}

TW_AVX2 static inline __m256 load_f16x8(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

TW_AVX2 static inline __m256 load_bf16x8(const uint16_t *p)
{
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/* One group of 8 columns from i of RB rows into the accumulators s, for
 * TB activations. */
TW_AVX2 TW_TILE void h16_step(const uint16_t *h, size_t row_elems, size_t i, const tw_act *acts,
                              __m256 s[H16_RB][H16_TB], const int RB, const int TB,
                              const int is_bf16)
{
#pragma GCC unroll 4
    for (int r = 0; r < RB; r++) {
        const uint16_t *hr = h + (size_t)r * row_elems;
        const __m256 w = is_bf16 ? load_bf16x8(hr + i) : load_f16x8(hr + i);
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++)
            s[r][t] = _mm256_fmadd_ps(w, _mm256_loadu_ps(acts[t].x + i), s[r][t]);
    }
}

/* F16 / BF16: RB rows against TB activations over columns [i0, i1), each
 * group of 8 weights widened once for all TB. Every output sees the same
 * operations whatever RB, TB and the column ranges are: two accumulators
 * taking alternate groups of 8, one more group of 8 into the first, their
 * sum reduced, then the scalar tail. A range that does not reach cols ends
 * on a multiple of 16 and leaves its accumulators in st for the next. With
 * pf, the same columns pf rows on are fetched ahead (RB for a batch tile,
 * tw_h16_fetch_rows for a decode row): the hardware prefetchers fall
 * behind RB interleaved rows (1.4x on a 2-core EPYC with the weights in
 * memory; past the last row this is a hint that cannot fault). */
TW_AVX2 TW_TILE void tile_h16(const uint16_t *h, size_t row_elems, size_t i0, size_t i1,
                              size_t cols, const tw_act *acts, __m256 *st, float *y,
                              size_t y_stride, size_t pf, const int RB, const int TB,
                              const int is_bf16)
{
    __m256 s0[H16_RB][H16_TB], s1[H16_RB][H16_TB];
    TW_H16_STATE_IN(s0, s1, st, i0, _mm256_setzero_ps());
    size_t i = i0;
    for (; i + 16 <= i1; i += 16) {
        if (pf && (i & 16))
#pragma GCC unroll 4
            for (int r = 0; r < RB; r++)
                _mm_prefetch((const char *)(h + ((size_t)r + pf) * row_elems + i), _MM_HINT_T0);
        h16_step(h, row_elems, i, acts, s0, RB, TB, is_bf16);
        h16_step(h, row_elems, i + 8, acts, s1, RB, TB, is_bf16);
    }
    if (i1 < cols) {
        TW_H16_STATE_OUT(s0, s1, st);
        return;
    }
    for (; i + 8 <= cols; i += 8)
        h16_step(h, row_elems, i, acts, s0, RB, TB, is_bf16);
#pragma GCC unroll 4
    for (int r = 0; r < RB; r++) {
        const uint16_t *hr = h + (size_t)r * row_elems;
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++) {
            float s = tw_hsum256(_mm256_add_ps(s0[r][t], s1[r][t]));
            for (size_t j = i; j < cols; j++)
                s += (is_bf16 ? tw_bf16_to_f32(hr[j]) : tw_h2f(hr[j])) * acts[t].x[j];
            y[(size_t)t * y_stride + r] = s;
        }
    }
}

TW_H16_DRIVER(TW_AVX2, f16, tile_h16, __m256, 0)
TW_H16_DRIVER(TW_AVX2, bf16, tile_h16, __m256, 1)

/* f32 weights: one activation row at a time (batches of 17 and more go
 * through sgemm). */
static void rows_f32(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                     const tw_act *acts, size_t n_act, float *y, size_t y_stride)
{
    for (size_t t = 0; t < n_act; t++)
        rows1_f32(w, row_bytes, rows, cols, &acts[t], y + t * y_stride);
}

/* Sum of signed w times signed a, bytewise, as 8 int32 lanes: abs(w) is the
 * unsigned operand and a takes w's sign. */
TW_AVX2 static inline __m256i dot_i8(__m256i wabs, __m256i w, __m256i a)
{
    __m256i p = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(a, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}


/* One 32-value block dot as 8 int32 lanes, lane l summing values 4l..4l+3:
 * Q8_0 through the sign trick; Q4_0 as the unsigned levels times a, less
 * 8 times a's sums (which is (level - 8) * a, lane by lane). */
/* How the staged-scale tiles (tilew_q32, tilew1_q32) form a block's int32
 * lanes. W_Q8_0_WIDE splits each weight block into its even and odd bytes
 * widened to int16 (two shifts and a shift, once for all TB activations)
 * against tw_act.qw: two word multiply-adds per activation instead of the
 * sign trick's three byte/word operations, and lane l still sums exactly
 * values 4l..4l+3. */
enum { W_Q8_0, W_Q4_0, W_Q8_0_WIDE, W_Q5_0 };

/* Bytes of a block of each staged-scale variant. */
#define W_BLOCK_BYTES(variant) ((variant) == W_Q4_0 ? 18u : (variant) == W_Q5_0 ? 22u : 34u)

TW_AVX2 static inline __m256i dot_q32(const uint8_t *blk, const tw_act *act, size_t i,
                                      __m256i a, const int variant)
{
    if (variant == W_Q4_0 || variant == W_Q5_0) {
        /* the unsigned levels (0..15, 0..31) against the activations, the
         * offset (8, 16) times each lane's activation sum taken off after:
         * the same int32 lanes as the signed levels would give */
        const __m256i q = variant == W_Q4_0 ? tw_q4_0_nibbles(blk + 2) : tw_q5_levels(blk + 2, blk + 6);
        __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), _mm256_set1_epi16(1));
        __m256i off = tw_load256(act->off8 + 8 * i);
        return _mm256_sub_epi32(p, variant == W_Q4_0 ? off : _mm256_slli_epi32(off, 1));
    }
    const __m256i q = tw_load256(blk + 2);
    return dot_i8(_mm256_sign_epi8(q, q), q, a);
}

/* The tile kernels below compute RB rows x TB activations. RB and TB are
 * compile-time constants at every call site, so the loops over them unroll
 * and the accumulators live in registers. Each output has exactly one vector
 * accumulator, updated once per block in block order, which is what makes
 * results independent of the tile shape (decode uses 1 x 1, batches 1 x 4). */
#define MAX_TILE 4

/* The 32-value block types: signed levels with an f16 scale (Q8_0, Q4_0,
 * Q5_0), or Q5_1's unsigned levels with scale and offset. */
enum { V_Q8_0, V_Q4_0, V_Q5_0, V_Q5_1 };

TW_AVX2 TW_TILE void tile_q32(const uint8_t *w, size_t row_bytes, size_t nb, const tw_act *acts,
                              float *y, size_t y_stride, const int RB, const int TB,
                              const int variant)
{
    static const size_t block_bytes[] = {34, 18, 22, 24};
    const size_t bb = block_bytes[variant];
    float accm[MAX_TILE][MAX_TILE] = {{0}};
    __m256 acc[MAX_TILE][MAX_TILE];
#pragma GCC unroll 4
    for (int r = 0; r < RB; r++)
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++)
            acc[r][t] = _mm256_setzero_ps();
    for (size_t i = 0; i < nb; i++) {
#pragma GCC unroll 4
        for (int r = 0; r < RB; r++) {
            const uint8_t *blk = w + (size_t)r * row_bytes + i * bb;
            uint16_t d16[2];
            memcpy(d16, blk, 4);
            const __m256 dw = _mm256_set1_ps(tw_h2f(d16[0]));
            if (variant == V_Q5_1) {
                /* unsigned levels: maddubs takes them directly; the offset m
                 * meets the 32-value activation sums */
                const __m256i q = tw_q5_levels(blk + 4, blk + 8);
                const float m = tw_h2f(d16[1]);
#pragma GCC unroll 4
                for (int t = 0; t < TB; t++) {
                    __m256i p = _mm256_madd_epi16(
                        _mm256_maddubs_epi16(q, tw_load256(acts[t].qs + i * 32)),
                        _mm256_set1_epi16(1));
                    const float da = acts[t].d[i];
                    __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(da));
                    acc[r][t] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(p), acc[r][t]);
                    accm[r][t] += (m * da) * (float)(acts[t].bsums[2 * i] + acts[t].bsums[2 * i + 1]);
                }
                continue;
            }
            const __m256i q = variant == V_Q8_0   ? tw_load256(blk + 2)
                              : variant == V_Q4_0 ? tw_q4_0_levels(blk + 2)
                                                  : _mm256_sub_epi8(tw_q5_levels(blk + 2, blk + 6),
                                                                    _mm256_set1_epi8(16));
            const __m256i qabs = _mm256_sign_epi8(q, q);
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++) {
                __m256i p = dot_i8(qabs, q, tw_load256(acts[t].qs + i * 32));
                __m256 scale = _mm256_mul_ps(dw, _mm256_broadcast_ss(&acts[t].d[i]));
                acc[r][t] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(p), acc[r][t]);
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < RB; r++)
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++)
            y[(size_t)t * y_stride + r] = tw_hsum256(acc[r][t]) + accm[r][t];
}

/* Shuffle controls broadcasting int16 element j of a 128-bit lane to the
 * whole lane (the same in both lanes). */
static const uint8_t broadcast16_ctl[8][32] = {
#define B16(a) a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1
    {B16(0), B16(0)},   {B16(2), B16(2)},   {B16(4), B16(4)},   {B16(6), B16(6)},
    {B16(8), B16(8)},   {B16(10), B16(10)}, {B16(12), B16(12)}, {B16(14), B16(14)},
#undef B16
};

/* Q4_K (is_q5 = 0) and Q5_K (is_q5 = 1). */
TW_AVX2 TW_TILE void tile_k45(const uint8_t *w, size_t row_bytes, size_t nb, const tw_act *acts,
                              float *y, size_t y_stride, const int RB, const int TB,
                              const int is_q5)
{
    const size_t bb = is_q5 ? sizeof(tw_block_q5_k) : sizeof(tw_block_q4_k);
    const size_t qs_off = is_q5 ? 48 : 16;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i one = _mm256_set1_epi8(1);
    __m256 acc[MAX_TILE][MAX_TILE];
#pragma GCC unroll 4
    for (int r = 0; r < RB; r++)
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++)
            acc[r][t] = _mm256_setzero_ps();
    for (size_t i = 0; i < nb; i++) {
#pragma GCC unroll 4
        for (int r = 0; r < RB; r++) {
            const uint8_t *blk = w + (size_t)r * row_bytes + i * bb;
            uint64_t sc8, mn8;
            tw_k_scales_mins(blk + 4, &sc8, &mn8);
            uint16_t d16[2];
            memcpy(d16, blk, 4);
            const __m256 dw = _mm256_set1_ps(tw_h2f(d16[0]));
            const __m256 dmin = _mm256_set1_ps(tw_h2f(d16[1]));
            /* each min twice, one per 16-value half of its sub-block, to
             * meet the 16-value activation sums */
            __m128i m8 = _mm_cvtsi64_si128((long long)mn8);
            const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
            /* the 8 scales as int16, in both lanes */
            const __m256i sc16 = _mm256_broadcastsi128_si256(
                _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc8)));
            __m256i sumi[MAX_TILE];
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++)
                sumi[t] = _mm256_setzero_si256();
            const __m256i qh = is_q5 ? tw_load256(blk + 16) : _mm256_setzero_si256();
            for (int g = 0; g < 4; g++) {
                __m256i q = tw_load256(blk + qs_off + 32 * g);
                __m256i lo = _mm256_and_si256(q, m4);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                if (is_q5) {
                    /* bit 2g of qh[l] is bit 4 of value l of the low half,
                     * bit 2g + 1 that of the high half */
                    __m256i hb = _mm256_srli_epi16(qh, 2 * g);
                    lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hb, one), 4));
                    hi = _mm256_or_si256(
                        hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 1), one), 4));
                }
                const __m256i sclo = _mm256_shuffle_epi8(sc16, tw_load256(broadcast16_ctl[2 * g]));
                const __m256i schi =
                    _mm256_shuffle_epi8(sc16, tw_load256(broadcast16_ctl[2 * g + 1]));
#pragma GCC unroll 4
                for (int t = 0; t < TB; t++) {
                    const int8_t *a = acts[t].qs + i * TW_QK_K + 64 * g;
                    __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, tw_load256(a)), sclo);
                    __m256i phi =
                        _mm256_madd_epi16(_mm256_maddubs_epi16(hi, tw_load256(a + 32)), schi);
                    sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(plo, phi));
                }
            }
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++) {
                const __m256 da = _mm256_broadcast_ss(&acts[t].d[i]);
                __m256i summ = _mm256_madd_epi16(mins16, tw_load256(acts[t].bsums + i * 16));
                acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(sumi[t]),
                                            acc[r][t]);
                acc[r][t] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(summ),
                                             acc[r][t]);
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < RB; r++)
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++)
            y[(size_t)t * y_stride + r] = tw_hsum256(acc[r][t]);
}

/* Shuffle controls picking int16 scales 2k (low lane) and 2k + 1 (high
 * lane) out of 8 int16 scales present in both lanes: each quarter of a
 * Q6_K half covers two 16-value sub-blocks, one per 128-bit lane. */
static const uint8_t scale_pair_ctl[4][32] = {
#define PAIR(a, b) a, b, a, b, a, b, a, b, a, b, a, b, a, b, a, b
    {PAIR(0, 1), PAIR(2, 3)},
    {PAIR(4, 5), PAIR(6, 7)},
    {PAIR(8, 9), PAIR(10, 11)},
    {PAIR(12, 13), PAIR(14, 15)},
#undef PAIR
};

TW_AVX2 TW_TILE void tile_q6_k(const uint8_t *w, size_t row_bytes, size_t nb, const tw_act *acts,
                               float *y, size_t y_stride, const int RB, const int TB)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i m2 = _mm256_set1_epi8(0x03);
    __m256 acc[MAX_TILE][MAX_TILE];
#pragma GCC unroll 4
    for (int r = 0; r < RB; r++)
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++)
            acc[r][t] = _mm256_setzero_ps();
    for (size_t i = 0; i < nb; i++) {
#pragma GCC unroll 4
        for (int r = 0; r < RB; r++) {
            const tw_block_q6_k *b =
                (const tw_block_q6_k *)(const void *)(w + (size_t)r * row_bytes) + i;
            const __m256 dw = _mm256_set1_ps(tw_h2f(b->d));
            __m256i sumi[MAX_TILE];
            /* the -32 offset of every level: start from -32 * sum_j sc_j * bsum_j */
            const __m256i sc16 =
                _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)b->scales));
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++) {
                __m256i off = _mm256_madd_epi16(sc16, tw_load256(acts[t].bsums + i * 16));
                sumi[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
            }
            for (int h = 0; h < 2; h++) {
                const __m256i l0 = tw_load256(b->ql + 64 * h);
                const __m256i l1 = tw_load256(b->ql + 64 * h + 32);
                const __m256i hb = tw_load256(b->qh + 32 * h);
                const __m256i sh16 = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(
                    _mm_loadl_epi64((const __m128i *)(const void *)(b->scales + 8 * h))));
                for (int k = 0; k < 4; k++) {
                    /* quarter k: low nibbles of l0 / l1 for k = 0 / 1, high
                     * nibbles for k = 2 / 3; bits 2k, 2k + 1 of hb on top */
                    __m256i l = (k & 1) ? l1 : l0;
                    __m256i lowbits = _mm256_and_si256(k < 2 ? l : _mm256_srli_epi16(l, 4), m4);
                    __m256i highbits =
                        _mm256_and_si256(k == 0 ? hb : _mm256_srli_epi16(hb, 2 * k), m2);
                    __m256i q = _mm256_or_si256(lowbits, _mm256_slli_epi16(highbits, 4));
                    __m256i sp = _mm256_shuffle_epi8(sh16, tw_load256(scale_pair_ctl[k]));
#pragma GCC unroll 4
                    for (int t = 0; t < TB; t++) {
                        const int8_t *a = acts[t].qs + i * TW_QK_K + 128 * h + 32 * k;
                        __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, tw_load256(a)), sp);
                        sumi[t] = _mm256_add_epi32(sumi[t], p);
                    }
                }
            }
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++)
                acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_broadcast_ss(&acts[t].d[i])),
                                            _mm256_cvtepi32_ps(sumi[t]), acc[r][t]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < RB; r++)
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++)
            y[(size_t)t * y_stride + r] = tw_hsum256(acc[r][t]);
}

/* Q8_0 / Q4_0, 1 row x TB activations (TB 2..8, a constant): tile_q32's
 * arithmetic per output (the same int32 lanes, the same product dw * d_t,
 * the same fma into its own accumulator, block after block) with the
 * products of all TB activations formed in a pass of their own, one vector
 * multiply per block, instead of one multiply per activation and block.
 * The activations' scales come block-major in dT (block i's at
 * dT[8 * i + t], see tw_gather_scales); sc receives the products. */
#define PREFETCH_ROWS 2
#ifndef DECODE_RB
#define DECODE_RB 2
#endif


TW_AVX2 TW_TILE void tilew_q32(const uint8_t *w, size_t row_bytes, size_t nb, const tw_act *acts,
                               const float *dT, float *sc, float *y, size_t y_stride,
                               const int TB, const int variant)
{
    const int is_q4 = variant == W_Q4_0;
    const size_t bb = is_q4 ? 18 : 34;
    tw_stage_scales(w, bb, nb, dT, sc, TB);
    __m256 acc[8];
#pragma GCC unroll 8
    for (int t = 0; t < TB; t++)
        acc[t] = _mm256_setzero_ps();
    for (size_t i = 0; i < nb; i++) {
        const uint8_t *blk = w + i * bb;
        /* the prefetchers do not run far enough ahead of rows consumed this
         * slowly (see kernels_avx512.c); past the last row this is a hint
         * that cannot fault */
        _mm_prefetch((const char *)(blk + PREFETCH_ROWS * row_bytes), _MM_HINT_T0);
        /* Q4_0: the unsigned levels, with each activation's off8 taken off
         * (see dot_q32); Q8_0: the sign trick */
        const __m256i q = is_q4 ? tw_q4_0_nibbles(blk + 2) : tw_load256(blk + 2);
        if (variant == W_Q8_0_WIDE) {
            const __m256i qe = _mm256_srai_epi16(_mm256_slli_epi16(q, 8), 8);
            const __m256i qo = _mm256_srai_epi16(q, 8);
#pragma GCC unroll 8
            for (int t = 0; t < TB; t++) {
                const int16_t *aw = acts[t].qw + i * 32;
                __m256i p = _mm256_add_epi32(_mm256_madd_epi16(qe, tw_load256(aw)),
                                             _mm256_madd_epi16(qo, tw_load256(aw + 16)));
                acc[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(&sc[8 * i + (size_t)t]),
                                         _mm256_cvtepi32_ps(p), acc[t]);
            }
            continue;
        }
        const __m256i qabs = _mm256_sign_epi8(q, q);
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++) {
            const __m256i a = tw_load256(acts[t].qs + i * 32);
            __m256i p = is_q4 ? _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(q, a),
                                                                   _mm256_set1_epi16(1)),
                                                 tw_load256(acts[t].off8 + 8 * i))
                              : dot_i8(qabs, q, a);
            acc[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(&sc[8 * i + (size_t)t]),
                                     _mm256_cvtepi32_ps(p), acc[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < TB; t++)
        y[(size_t)t * y_stride] = tw_hsum256(acc[t]);
}

/* One activation against RB rows side by side. Decode is bound by the
 * latency of each output's chain of fmas (one per block), not by issue
 * width, so RB independent chains run in the time of one; each output
 * still sees exactly tilew_q32's operations. sc holds RB rows of nb
 * scales. No software prefetch: decode streams rows fast enough for the
 * hardware prefetchers, and fetching ahead measured slower. */
TW_AVX2 TW_TILE void tilew1_q32(const uint8_t *w, size_t row_bytes, size_t nb, const tw_act *act,
                                float *sc, float *y, const int RB, const int variant)
{
    const size_t bb = W_BLOCK_BYTES(variant);
#pragma GCC unroll 4
    for (int r = 0; r < RB; r++)
        tw_stage_scales(w + (size_t)r * row_bytes, bb, nb, act->d, sc + (size_t)r * nb, 1);
    __m256 acc[4];
#pragma GCC unroll 4
    for (int r = 0; r < RB; r++)
        acc[r] = _mm256_setzero_ps();
    for (size_t i = 0; i < nb; i++) {
        const __m256i a = tw_load256(act->qs + i * 32);
#pragma GCC unroll 4
        for (int r = 0; r < RB; r++) {
            const uint8_t *blk = w + (size_t)r * row_bytes + i * bb;
            __m256i p = dot_q32(blk, act, i, a, variant);
            acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&sc[(size_t)r * nb + i]),
                                     _mm256_cvtepi32_ps(p), acc[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < RB; r++)
        y[r] = tw_hsum256(acc[r]);
}

#define TILEW_ROWS(TB, q4)                                                                      \
    for (size_t r = 0; r < rows; r++)                                                           \
        tilew_q32(w + r * row_bytes, row_bytes, nb, acts + t, dT, sc, y + t * y_stride + r,      \
                  y_stride, TB, q4)

/* Q8_0 / Q4_0 batches in near-equal groups of at most 8 activations (see
 * tw_tile_groups), each row read start to end before the next; single
 * activations and rows too wide for the on-stack scales take tile_q32. */
#define TILEW_DRIVER(name, is_q4, call)                                                         \
    TW_AVX2 static void rows_##name(const uint8_t *w, size_t row_bytes, size_t rows,             \
                                    size_t cols, const tw_act *acts, size_t n_act, float *y,     \
                                    size_t y_stride)                                             \
    {                                                                                           \
        const size_t nb = cols / 32;                                                            \
        size_t t = 0;                                                                           \
        if (nb <= TW_TILE_MAX_NB) {                                                             \
            alignas(32) float dT[TW_TILE_MAX_NB * 8], sc[TW_TILE_MAX_NB * 8];                   \
            if (n_act == 1) {                                                                   \
                size_t r = 0;                                                                   \
                for (; r + DECODE_RB <= rows; r += DECODE_RB)                                   \
                    tilew1_q32(w + r * row_bytes, row_bytes, nb, acts, sc, y + r, DECODE_RB,     \
                               is_q4 ? W_Q4_0 : W_Q8_0);                                        \
                for (; r < rows; r++)                                                           \
                    tilew1_q32(w + r * row_bytes, row_bytes, nb, acts, sc, y + r, 1,             \
                               is_q4 ? W_Q4_0 : W_Q8_0);                                        \
                return;                                                                         \
            }                                                                                   \
            if (!is_q4 && acts[0].qw) {                                                         \
                TW_FOR_TILE_GROUPS(TILEW_ROWS, W_Q8_0_WIDE);                                    \
            } else {                                                                            \
                TW_FOR_TILE_GROUPS(TILEW_ROWS, is_q4 ? W_Q4_0 : W_Q8_0);                        \
            }                                                                                   \
        }                                                                                       \
        for (; t + 4 <= n_act; t += 4)                                                          \
            for (size_t r = 0; r < rows; r++)                                                   \
                call(w + r * row_bytes, row_bytes, nb, acts + t, y + t * y_stride + r, y_stride, \
                     1, 4);                                                                     \
        for (; t < n_act; t++)                                                                  \
            for (size_t r = 0; r < rows; r++)                                                   \
                call(w + r * row_bytes, row_bytes, nb, acts + t, y + t * y_stride + r, y_stride, \
                     1, 1);                                                                     \
    }

/* Drives a tile kernel over rows x n_act: 1 row x 4 activations for
 * batches, one row at a time for a single activation (decode). Decode
 * reads each row start to end before the next: a tile of 4 rows read side
 * by side is 4 short interleaved streams, which the hardware prefetchers
 * of the CPUs measured here did not follow (a Q8_0 decode of a 0.5B model
 * took 29 ms per token on one core that way, 23 ms row by row). */
#define TILE_DRIVER(name, call)                                                                \
    TW_AVX2 static void rows_##name(const uint8_t *w, size_t row_bytes, size_t rows,             \
                                    size_t cols, const tw_act *acts, size_t n_act, float *y,     \
                                    size_t y_stride)                                             \
    {                                                                                           \
        const size_t nb = cols / tw_type_block_elems(name##_type);                             \
        size_t t = 0;                                                                           \
        for (; t + 4 <= n_act; t += 4)                                                          \
            for (size_t r = 0; r < rows; r++)                                                   \
                call(w + r * row_bytes, row_bytes, nb, acts + t, y + t * y_stride + r, y_stride, \
                     1, 4);                                                                     \
        for (; t < n_act; t++) {                                                                \
            for (size_t r = 0; r < rows; r++)                                                   \
                call(w + r * row_bytes, row_bytes, nb, acts + t, y + t * y_stride + r, y_stride, \
                     1, 1);                                                                     \
        }                                                                                       \
    }

#define CALL_Q8_0(w, rb, nb, a, y, ys, RB, TB) tile_q32(w, rb, nb, a, y, ys, RB, TB, V_Q8_0)
#define CALL_Q4_0(w, rb, nb, a, y, ys, RB, TB) tile_q32(w, rb, nb, a, y, ys, RB, TB, V_Q4_0)
#define CALL_Q5_0(w, rb, nb, a, y, ys, RB, TB) tile_q32(w, rb, nb, a, y, ys, RB, TB, V_Q5_0)
#define CALL_Q5_1(w, rb, nb, a, y, ys, RB, TB) tile_q32(w, rb, nb, a, y, ys, RB, TB, V_Q5_1)
#define CALL_Q4_K(w, rb, nb, a, y, ys, RB, TB) tile_k45(w, rb, nb, a, y, ys, RB, TB, 0)
#define CALL_Q5_K(w, rb, nb, a, y, ys, RB, TB) tile_k45(w, rb, nb, a, y, ys, RB, TB, 1)
#define CALL_Q6_K(w, rb, nb, a, y, ys, RB, TB) tile_q6_k(w, rb, nb, a, y, ys, RB, TB)

static const tw_type q5_0_tiles_type = TW_TYPE_Q5_0,
                     q5_1_type = TW_TYPE_Q5_1, q4_k_type = TW_TYPE_Q4_K,
                     q5_k_type = TW_TYPE_Q5_K, q6_k_type = TW_TYPE_Q6_K;

TILEW_DRIVER(q8_0, 0, CALL_Q8_0)
TILEW_DRIVER(q4_0, 1, CALL_Q4_0)
TILE_DRIVER(q5_0_tiles, CALL_Q5_0)

/* Q5_0: decode on the staged-scale tiles two rows at a time (unsigned
 * levels, as Q4_0), batches on tile_q32; both form the same int32 lanes and
 * the same products of scales, so their bits agree. */
TW_AVX2 static void rows_q5_0(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                              const tw_act *acts, size_t n_act, float *y, size_t y_stride)
{
    const size_t nb = cols / 32;
    if (n_act != 1 || nb > TW_TILE_MAX_NB) {
        rows_q5_0_tiles(w, row_bytes, rows, cols, acts, n_act, y, y_stride);
        return;
    }
    alignas(32) float sc[DECODE_RB * TW_TILE_MAX_NB];
    size_t r = 0;
    for (; r + DECODE_RB <= rows; r += DECODE_RB)
        tilew1_q32(w + r * row_bytes, row_bytes, nb, acts, sc, y + r, DECODE_RB, W_Q5_0);
    for (; r < rows; r++)
        tilew1_q32(w + r * row_bytes, row_bytes, nb, acts, sc, y + r, 1, W_Q5_0);
}
TILE_DRIVER(q5_1, CALL_Q5_1)
TILE_DRIVER(q4_k, CALL_Q4_K)
TILE_DRIVER(q5_k, CALL_Q5_K)
TILE_DRIVER(q6_k, CALL_Q6_K)

/* Quantizes groups of `group` floats (a multiple of 32) to int8 with the
 * same arithmetic as the scalar version: d = amax / 127, levels rounded to
 * nearest even of x * (127 / amax). */
TW_AVX2 static void quant_act(size_t cols, size_t group, tw_act *act)
{
    const float *x = act->x;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i lo_lim = _mm256_set1_epi32(-127), hi_lim = _mm256_set1_epi32(127);
    for (size_t g = 0; g < cols / group; g++) {
        const float *xg = x + g * group;
        __m256 mx = _mm256_setzero_ps();
        for (size_t j = 0; j < group; j += 8)
            mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, _mm256_loadu_ps(xg + j)));
        float amax = tw_hmax256(mx);
        float id = amax > 0.0f ? 127.0f / amax : 0.0f;
        act->d[g] = amax / 127.0f;
        const __m256 vid = _mm256_set1_ps(id);
        int8_t *q = act->qs + g * group;
        for (size_t j = 0; j < group; j += 32) {
            __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xg + j), vid));
            __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xg + j + 8), vid));
            __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xg + j + 16), vid));
            __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xg + j + 24), vid));
            i0 = _mm256_min_epi32(_mm256_max_epi32(i0, lo_lim), hi_lim);
            i1 = _mm256_min_epi32(_mm256_max_epi32(i1, lo_lim), hi_lim);
            i2 = _mm256_min_epi32(_mm256_max_epi32(i2, lo_lim), hi_lim);
            i3 = _mm256_min_epi32(_mm256_max_epi32(i3, lo_lim), hi_lim);
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
            _mm256_storeu_si256((__m256i *)(void *)(q + j), _mm256_permutevar8x32_epi32(p, perm));
        }
    }
    /* 16-value sums: bytes widened to int16 pairs, then pairs summed */
    const __m256i ones8 = _mm256_set1_epi8(1);
    const __m256i ones16 = _mm256_set1_epi16(1);
    for (size_t j = 0; j < cols; j += 32) {
        __m256i v = tw_load256(act->qs + j);
        /* |v| <= 127 so sign(ones, v) * |v| sums are exact in int16 */
        __m256i s16 = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(ones8, v));
        __m256i s32 = _mm256_madd_epi16(s16, ones16); /* 8 sums of 4 */
        /* lanes 0..3 are values 0..15, lanes 4..7 values 16..31 */
        __m256i t = _mm256_hadd_epi32(s32, s32);
        t = _mm256_hadd_epi32(t, t);
        act->bsums[j / 16] = (int16_t)_mm256_extract_epi32(t, 0);
        act->bsums[j / 16 + 1] = (int16_t)_mm256_extract_epi32(t, 4);
        if (group == 32) {
            _mm256_storeu_si256((__m256i *)(void *)(act->off8 + j / 4), _mm256_slli_epi32(s32, 3));
            act->bneg[j / 32] = -128 * (act->bsums[j / 16] + act->bsums[j / 16 + 1]);
        }
    }
}

static void quant_act_q8(size_t cols, tw_act *act)
{
    quant_act(cols, 32, act);
}

static void quant_act_q8k(size_t cols, tw_act *act)
{
    quant_act(cols, TW_QK_K, act);
}

/* tw_act.qw for the W_Q8_0_WIDE tiles. */
TW_AVX2 static void batch_copy_qw(size_t cols, tw_act *act, void *buf)
{
    int16_t *qw = buf;
    for (size_t c = 0; c + 32 <= cols; c += 32) {
        const __m256i a = tw_load256(act->qs + c);
        _mm256_storeu_si256((__m256i *)(void *)(qw + c),
                            _mm256_srai_epi16(_mm256_slli_epi16(a, 8), 8));
        _mm256_storeu_si256((__m256i *)(void *)(qw + c + 16), _mm256_srai_epi16(a, 8));
    }
    act->qw = qw;
}

void tw_isa_fill_avx2(tw_isa_table *t)
{
    t->name = "avx2";
    t->rows[tw_ktype_index(TW_TYPE_F32)] = rows_f32;
    t->rows[tw_ktype_index(TW_TYPE_F16)] = rows_f16;
    t->rows[tw_ktype_index(TW_TYPE_BF16)] = rows_bf16;
    t->rows[tw_ktype_index(TW_TYPE_Q8_0)] = rows_q8_0;
    t->rows[tw_ktype_index(TW_TYPE_Q4_0)] = rows_q4_0;
    t->rows[tw_ktype_index(TW_TYPE_Q5_0)] = rows_q5_0;
    t->rows[tw_ktype_index(TW_TYPE_Q5_1)] = rows_q5_1;
    t->rows[tw_ktype_index(TW_TYPE_Q4_K)] = rows_q4_k;
    t->rows[tw_ktype_index(TW_TYPE_Q5_K)] = rows_q5_k;
    t->rows[tw_ktype_index(TW_TYPE_Q6_K)] = rows_q6_k;
    t->quant_act[TW_ACT_Q8] = quant_act_q8;
    t->quant_act[TW_ACT_Q8K] = quant_act_q8k;
    t->self_blocked_types |= 1u << tw_ktype_index(TW_TYPE_F16) | 1u << tw_ktype_index(TW_TYPE_BF16);
    t->batch_copy = batch_copy_qw;
    t->batch_copy_bytes = 2;
    t->batch_copy_types = 1u << tw_ktype_index(TW_TYPE_Q8_0);
    /* A group of 8 activations' words past 32 KiB comes from L2 on every
     * row, and the wide tiles then trailed the sign trick (896 columns: 9%
     * faster per core; 4864: 6% slower). */
    t->batch_copy_max_cols = 2048;
    tw_isa_fill_vecops_avx2(t);
    tw_isa_fill_dequant_avx2(t->dequant);
    tw_isa_fill_packed_avx2(t);
    tw_isa_fill_panels_avx2(t);
    /* 128-token prefill, one thread: the K types gain 1.3-1.7x over sgemm
     * from skipping dequantization and amortizing their float work over
     * 256-value blocks; the 32-value types need a float multiply-add per
     * block and activation and only tie with (or trail) sgemm, which is
     * then preferred for being exact in f32. */
    t->prefill_tiles |= 1u << tw_ktype_index(TW_TYPE_Q4_K) | 1u << tw_ktype_index(TW_TYPE_Q5_K) |
                      1u << tw_ktype_index(TW_TYPE_Q6_K);
}

#else

void tw_isa_fill_avx2(tw_isa_table *t)
{
    t->name = "avx2";
}

#endif
