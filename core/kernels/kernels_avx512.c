/* AVX-512 kernels for CPUs with AVX512-VNNI. They overlay the AVX2 table
 * only where they win: the 32-value block types, where one vpdpbusd replaces
 * the maddubs + madd pair of every block dot, the f32 dot product, and
 * attention's value pass (vecops_avx512.c). The
 * tile structure (one accumulator per output, updated once per block in
 * block order) is the AVX2 one, so results stay independent of tile shape;
 * the integer sums are the same as every other ISA's. */
#include <stdalign.h>

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


#define TW_TILE static inline __attribute__((always_inline))
#define MAX_TILE 4

TW_AVX512 static inline float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 16 F16 / BF16 weights widened to floats (n < 16: the first n, zeros
 * after them). */
TW_AVX512 static inline __m512 load_h16x16(const uint16_t *h, size_t n, const int is_bf16)
{
    const __mmask16 m = n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
    const __m256i v = _mm256_maskz_loadu_epi16(m, h);
    if (is_bf16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
    return _mm512_cvtph_ps(v);
}

/* F16 / BF16 batch tiles (see TW_H16_DRIVER): 4 rows x 3 activations, 24
 * accumulators, two per output. Measured on a 2-core EPYC against 1 x 8
 * tiles with the groups outermost: 1.2-2x the GFLOP/s of the batched
 * matmul (the most where weights stream from memory). */
#define H16_RB 4
#define H16_TB 3
#define H16_GROUP(TILE, RB)                                                                     \
    switch (tb) {                                                                               \
    case 3: TW_H16_TILE(TILE, RB, 3); break;                                                    \
    case 2: TW_H16_TILE(TILE, RB, 2); break;                                                    \
    default: TW_H16_TILE(TILE, RB, 1); break;                                                   \
    }

/* One group of 16 columns from i (the first n of them, zeros after) of RB
 * rows into the accumulators s, for TB activations. */
TW_AVX512 TW_TILE void h16x_step(const uint16_t *h, size_t row_elems, size_t i, size_t n,
                                 const tw_act *acts, __m512 s[H16_RB][H16_TB], const int RB,
                                 const int TB, const int is_bf16)
{
    const __mmask16 m = n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
#pragma GCC unroll 4
    for (int r = 0; r < RB; r++) {
        const __m512 w = load_h16x16(h + (size_t)r * row_elems + i, n, is_bf16);
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++)
            s[r][t] = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m, acts[t].x + i), s[r][t]);
    }
}

/* F16 / BF16: RB rows against TB activations over columns [i0, i1), 16
 * weights a vector, each group of 16 widened once for all TB. Per output
 * the same operations whatever RB, TB and the column ranges are: two
 * accumulators taking alternate groups of 16, a last whole group into the
 * first, a partial one (masked) into the second, their sum reduced. A
 * range that does not reach cols ends on a multiple of 32 and leaves its
 * accumulators in st; pf fetches the columns pf rows on ahead (see the
 * AVX2 tiles). */
TW_AVX512 TW_TILE void tile_h16x(const uint16_t *h, size_t row_elems, size_t i0, size_t i1,
                                 size_t cols, const tw_act *acts, __m512 *st, float *y,
                                 size_t y_stride, size_t pf, const int RB, const int TB,
                                 const int is_bf16)
{
    __m512 s0[H16_RB][H16_TB], s1[H16_RB][H16_TB];
    TW_H16_STATE_IN(s0, s1, st, i0, _mm512_setzero_ps());
    size_t i = i0;
    for (; i + 32 <= i1; i += 32) {
        if (pf)
#pragma GCC unroll 4
            for (int r = 0; r < RB; r++)
                _mm_prefetch((const char *)(h + ((size_t)r + pf) * row_elems + i), _MM_HINT_T0);
        h16x_step(h, row_elems, i, 16, acts, s0, RB, TB, is_bf16);
        h16x_step(h, row_elems, i + 16, 16, acts, s1, RB, TB, is_bf16);
    }
    if (i1 < cols) {
        TW_H16_STATE_OUT(s0, s1, st);
        return;
    }
    if (i + 16 <= cols) {
        h16x_step(h, row_elems, i, 16, acts, s0, RB, TB, is_bf16);
        i += 16;
    }
    if (i < cols)
        h16x_step(h, row_elems, i, cols - i, acts, s1, RB, TB, is_bf16);
#pragma GCC unroll 4
    for (int r = 0; r < RB; r++)
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++)
            y[(size_t)t * y_stride + r] = _mm512_reduce_add_ps(_mm512_add_ps(s0[r][t], s1[r][t]));
}

TW_H16_DRIVER(TW_AVX512, f16, tile_h16x, __m512, 0)
TW_H16_DRIVER(TW_AVX512, bf16, tile_h16x, __m512, 1)

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
            const __m256i q = is_q4 ? tw_q4_0_levels(blk + 2) : tw_load256(blk + 2);
            const __m256i qabs = _mm256_sign_epi8(q, q);
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++) {
                __m256i a = _mm256_sign_epi8(tw_load256(acts[t].qs + i * 32), q);
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

/* Q8_0 / Q4_0, RB rows (1 or 2) x TB activations (TB 2..8; both
 * constants). Each output's chain of fmas waits 4 cycles per block, so a
 * group of few activations is bound by that latency on one row; two rows
 * side by side share the activations' loads and double the chains. Groups
 * of up to TILEU_PAIR_MAX_TB take pairs of rows: measured on a 2-core EPYC
 * (Zen 4), pairs cut 5-17% off cache-resident batches of every size, but
 * cost 2-7% on 4-8 activations against weights streamed from memory, two
 * interleaved row streams that the prefetchers follow less well. tile_q32
 * forms each output's block dot as |q| . sign(a, q), two operations per
 * activation; here the activations come biased to unsigned (a + 128,
 * tw_act.qu) and the signed weights are the second operand:
 * (a + 128) . q - 128 * sum(q) is the same exact int32 in every lane, and
 * the correction depends on the weights alone, so it is formed once per
 * block for all TB activations. The block scales dw * d_t of all TB
 * activations come from one vector multiply over dT (the activations'
 * scales of block i at dT[8 * i + t]). Every output thus sees exactly
 * tile_q32's float operations in its order: the same int32 lanes, the same
 * product dw * d_t, the same fma into its own accumulator, block after
 * block. */
#define PREFETCH_ROWS 2
#ifndef TILEU_PAIR_MAX_TB
#define TILEU_PAIR_MAX_TB 3
#endif

TW_AVX512 TW_TILE void tileu_q32(const uint8_t *w, size_t row_bytes, size_t nb,
                                 const tw_act *acts, const float *dT, float *sc, float *y,
                                 size_t y_stride, const int RB, const int TB, const int is_q4)
{
    const size_t bb = is_q4 ? 18 : 34;
    const __m256i bias = _mm256_set1_epi8((char)0x80);
    /* The scales go through memory in a pass of their own: broadcasting
     * lanes of a vector stored just before stalls on store forwarding. */
#pragma GCC unroll 2
    for (int r = 0; r < RB; r++)
        tw_stage_scales(w + (size_t)r * row_bytes, bb, nb, dT, sc + (size_t)r * nb * 8, TB);
    __m256 acc[2][8];
#pragma GCC unroll 2
    for (int r = 0; r < RB; r++)
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++)
            acc[r][t] = _mm256_setzero_ps();
    for (size_t i = 0; i < nb; i++) {
        __m256i q[2], corr[2];
#pragma GCC unroll 2
        for (int r = 0; r < RB; r++) {
            const uint8_t *blk = w + (size_t)r * row_bytes + i * bb;
            /* Batches of weights streamed from memory ran at 60-70% of
             * their in-cache speed: the prefetchers do not run far enough
             * ahead of rows this slow to consume, so fetch the row RB *
             * PREFETCH_ROWS on (past the last row this is a hint that
             * cannot fault). */
            _mm_prefetch((const char *)(blk + PREFETCH_ROWS * RB * row_bytes), _MM_HINT_T0);
            q[r] = is_q4 ? tw_q4_0_levels(blk + 2) : tw_load256(blk + 2);
            corr[r] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                       _mm256_dpbusd_epi32(_mm256_setzero_si256(), bias, q[r]));
        }
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++) {
            const __m256i a = tw_load256(acts[t].qu + i * 32);
#pragma GCC unroll 2
            for (int r = 0; r < RB; r++) {
                __m256i p = _mm256_dpbusd_epi32(corr[r], a, q[r]);
                acc[r][t] = _mm256_fmadd_ps(
                    _mm256_broadcast_ss(&sc[(size_t)r * nb * 8 + 8 * i + (size_t)t]),
                    _mm256_cvtepi32_ps(p), acc[r][t]);
            }
        }
    }
#pragma GCC unroll 2
    for (int r = 0; r < RB; r++)
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++)
            y[(size_t)t * y_stride + (size_t)r] = hsum256(acc[r][t]);
}

/* Decode: one activation against RB rows side by side, with the block
 * scales staged per row (tw_stage_scales) and every output's own fma chain
 * (see tilew1_q32 in kernels_avx2.c). Per output these are exactly
 * tileu_q32's operations: the same int32 lanes, the same products
 * dw * d, the same fma, block after block. */
TW_AVX512 TW_TILE void tiled_q32(const uint8_t *w, size_t row_bytes, size_t nb,
                                 const tw_act *act, float *sc, float *y, const int RB,
                                 const int is_q4)
{
    const size_t bb = is_q4 ? 18 : 34;
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
            __m256i p;
            if (is_q4) {
                /* the unsigned levels times a, less 8 times a's sums: the
                 * same lanes as (level - 8) * a */
                p = _mm256_sub_epi32(
                    _mm256_dpbusd_epi32(_mm256_setzero_si256(), tw_q4_0_nibbles(blk + 2), a),
                    tw_load256(act->off8 + 8 * i));
            } else {
                const __m256i q = tw_load256(blk + 2);
                p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(q, q),
                                        _mm256_sign_epi8(a, q));
            }
            acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&sc[(size_t)r * nb + i]),
                                     _mm256_cvtepi32_ps(p), acc[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < RB; r++)
        y[r] = hsum256(acc[r]);
}

/* Every row against one group of TB (2..8) activations, unsigned tiles. */
#define TILEU_ROWS(TB, q4)                                                                      \
    do {                                                                                        \
        size_t r = 0;                                                                           \
        if (TB <= TILEU_PAIR_MAX_TB)                                                            \
            for (; r + 2 <= rows; r += 2)                                                       \
                tileu_q32(w + r * row_bytes, row_bytes, nb, acts + t, dT, sc,                   \
                          y + t * y_stride + r, y_stride, 2, TB, q4);                           \
        for (; r < rows; r++)                                                                   \
            tileu_q32(w + r * row_bytes, row_bytes, nb, acts + t, dT, sc, y + t * y_stride + r,  \
                      y_stride, 1, TB, q4);                                                     \
    } while (0)

/* Batches go in as few groups of at most 8 activations as there can be,
 * of near-equal size (9 = 5 + 4, not 8 + 1: a group of one would read all
 * the weights again for a single output row), over 1 row at a time: each
 * row is read start to end before the next (see kernels_avx2.c on why
 * decode does not interleave rows). Activations without a biased copy
 * (single rows, wide rows) take tile_q32, whose per-output arithmetic is
 * the same. */
#define TILE_DRIVER(name, is_q4)                                                                \
    TW_AVX512 static void rows_##name(const uint8_t *w, size_t row_bytes, size_t rows,           \
                                      size_t cols, const tw_act *acts, size_t n_act, float *y,   \
                                      size_t y_stride)                                           \
    {                                                                                           \
        const size_t nb = cols / 32;                                                            \
        size_t t = 0;                                                                           \
        alignas(32) float dT[TW_TILE_MAX_NB * 8], sc[TW_TILE_MAX_NB * 16];                      \
        if (nb <= TW_TILE_MAX_NB && n_act == 1) {                                               \
            size_t r = 0;                                                                       \
            for (; r + 2 <= rows; r += 2)                                                       \
                tiled_q32(w + r * row_bytes, row_bytes, nb, acts, sc, y + r, 2, is_q4);          \
            for (; r < rows; r++)                                                               \
                tiled_q32(w + r * row_bytes, row_bytes, nb, acts, sc, y + r, 1, is_q4);          \
            return;                                                                             \
        }                                                                                       \
        if (nb <= TW_TILE_MAX_NB && n_act >= 2 && acts[0].qu) {                                 \
            TW_FOR_TILE_GROUPS(TILEU_ROWS, is_q4);                                          \
        }                                                                                       \
        for (; t + 4 <= n_act; t += 4)                                                          \
            for (size_t r = 0; r < rows; r++)                                                   \
                tile_q32(w + r * row_bytes, row_bytes, nb, acts + t, y + t * y_stride + r,       \
                         y_stride, 1, 4, is_q4);                                                \
        for (; t < n_act; t++) {                                                                \
            /* two rows side by side: decode is bound by each output's fma                      \
             * chain, and two chains run in the time of one */                                  \
            size_t r = 0;                                                                       \
            for (; r + 2 <= rows; r += 2)                                                       \
                tile_q32(w + r * row_bytes, row_bytes, nb, acts + t, y + t * y_stride + r,       \
                         y_stride, 2, 1, is_q4);                                                \
            for (; r < rows; r++)                                                               \
                tile_q32(w + r * row_bytes, row_bytes, nb, acts + t, y + t * y_stride + r,       \
                         y_stride, 1, 1, is_q4);                                                \
        }                                                                                       \
    }

TILE_DRIVER(q8_0, 0)
TILE_DRIVER(q4_0, 1)

/* tw_act.qu for tileu_q32: a + 128 is a with its top bit flipped. */
TW_AVX512 static void batch_copy_qu(size_t cols, tw_act *act, void *buf)
{
    uint8_t *qu = buf;
    size_t c = 0;
    const __m256i top = _mm256_set1_epi8((char)0x80);
    for (; c + 32 <= cols; c += 32)
        _mm256_storeu_si256((__m256i *)(void *)(qu + c),
                            _mm256_xor_si256(tw_load256(act->qs + c), top));
    for (; c < cols; c++)
        qu[c] = (uint8_t)(act->qs[c] + 128);
    act->qu = qu;
}

void tw_isa_fill_avx512(tw_isa_table *t)
{
    t->name = "avx512";
    tw_isa_fill_packed_avx512(t);
    t->rows[tw_ktype_index(TW_TYPE_Q8_0)] = rows_q8_0;
    t->rows[tw_ktype_index(TW_TYPE_Q4_0)] = rows_q4_0;
    t->rows[tw_ktype_index(TW_TYPE_F16)] = rows_f16;
    t->rows[tw_ktype_index(TW_TYPE_BF16)] = rows_bf16;
    t->dot_f32 = dot_f32;
    /* vpdpbusd lifts Q8_0 batches to ~95 GFLOP/s per core on tile_q32 and
     * 100-135 on the unsigned tiles, against sgemm's 75-90, and Q4_0 to at
     * least a tie; both then stay bit-identical to decode. */
    t->prefill_tiles |= 1u << tw_ktype_index(TW_TYPE_Q8_0) | 1u << tw_ktype_index(TW_TYPE_Q4_0);
    /* The f16 and bf16 batch tiles (4 rows against 3 activations in zmm)
     * ran 128-512-token prompts' products at 207-258 GFLOP/s on a 2-core
     * Zen 5, against 153-170 for the dequantized tiles through OpenBLAS's
     * AVX2 (Haswell) sgemm and 225-251 through its AVX-512 (SkylakeX) one;
     * and a prompt then keeps decode's bits. */
    t->prefill_tiles |= 1u << tw_ktype_index(TW_TYPE_F16) | 1u << tw_ktype_index(TW_TYPE_BF16);
    t->self_blocked_types |= 1u << tw_ktype_index(TW_TYPE_F16) | 1u << tw_ktype_index(TW_TYPE_BF16);
    t->batch_copy = batch_copy_qu;
    t->batch_copy_bytes = 1;
    t->batch_copy_max_cols = SIZE_MAX;
    t->batch_copy_types = 1u << tw_ktype_index(TW_TYPE_Q8_0) | 1u << tw_ktype_index(TW_TYPE_Q4_0);
    tw_isa_fill_vecops_avx512(t);
    tw_isa_fill_panels_avx512(t);
}

#else

void tw_isa_fill_avx512(tw_isa_table *t)
{
    t->name = "avx512";
}

#endif
