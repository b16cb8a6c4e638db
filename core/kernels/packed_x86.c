/* x86 kernels for the packed types, Q8_0 / Q4_0 / Q5_0 / Q5_1 / Q4_K /
 * Q5_K / Q6_K rows packed eight to a group (kernels/blocks.h). Eight rows
 * sit in the eight int32 lanes of a vector: each 4-column step multiplies
 * the eight rows' four levels by the same four activation values
 * broadcast to every lane, so after the block's
 * eight steps every lane holds its row's exact block dot, and one
 * conversion and one fused multiply-add scale it for all eight rows. The
 * row-per-vector tiles of kernels_avx2.c / kernels_avx512.c instead spend
 * a conversion and an fma per block and row. Every output is thus exactly
 * tw_r8_dot's: the same int32 per block, the same product of the two
 * scales, the same fma into its own accumulator, block after block,
 * whatever the ISA, the batch or its grouping (the K types add their
 * sub-blocks' scaled dots in int32 first). Measured against those tiles on
 * a 2-core EPYC (Zen 4), one thread, Q8_0 weights in cache: 2.3-2.5x
 * faster with VNNI for 1-16 activations; 1.2-1.9x with AVX2. With AVX2,
 * batches of Q4_0 and Q8_0 rows take the assembly kernels of
 * packed_asm_x86.c. This file holds the AVX2 kernels; the VNNI ones are in
 * packed_vnni_x86.c, the building blocks of both in packed_x86.h. */
#include "kernels/packed_x86.h"

#ifdef TW_HAVE_X86

/* AVX2 Q8_0: the sign trick per step, |q| . sign(a, q), two int16 pair
 * sums widened to int32 by a multiply-add with ones. */
TW_AVX2 TW_TILE void r8_group_avx2(const uint8_t *p, size_t nb, const tw_act *acts, float *y,
                                   size_t y_stride, const int TB, size_t pf, const int K)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[8] = {0};
    for (size_t i = 0; i < nb; i++, p += R8_BLOCK(K)) {
        R8_PREFETCH(p, pf, K);
        const __m256 dw = r8_scales(p);
        __m256i isum[8];
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++)
            isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int k = 0; k < R8_STEPS; k++) {
            const __m256i q = tw_load256(p + R8_HEAD(K) + 32 * k);
            const __m256i qabs = _mm256_sign_epi8(q, q);
#pragma GCC unroll 8
            for (int t = 0; t < TB; t++) {
                const __m256i s = _mm256_sign_epi8(act4(&acts[t], i, k), q);
                isum[t] = _mm256_add_epi32(
                    isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(qabs, s), ones));
            }
        }
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++)
            acc[t] = r8_scale_into(p, dw, isum[t], &acts[t], i, acc[t], K);
    }
    r8_store(acc, y, y_stride, TB);
}

/* AVX2 Q4_0 / Q5_0 / Q5_1: the unsigned levels times a, no sign needed.
 * The block's eight steps of levels are unpacked first, then one
 * activation at a time goes against them and is scaled into its
 * accumulator: its int16 sums end before the next activation's start, so
 * the levels, one sum and the products fit the sixteen registers (going
 * step by step over all activations instead kept eight sums live and
 * spilled most products). Steps k and k + 4 pair up per int16 sum, all
 * four pairs summed before one widening for Q4_0 (8 * 2 * 15 * 127 fits),
 * two for the five-bit types (4 * 2 * 31 * 127 does). With vnni the steps
 * add straight into int32 sums (AVX-VNNI), even and odd steps in two
 * chains: the same integers. */
TW_AVX2 TW_TILE void r8n_group_core(const uint8_t *p, size_t nb, const tw_act *acts, float *y,
                                    size_t y_stride, const int TB, size_t pf, const int K,
                                    const bool vnni)
{
    const __m256i ones = _mm256_set1_epi16(1);
    const int pairs = K == R8_Q4 ? 4 : 2;
    __m256 acc[8] = {0};
    for (size_t i = 0; i < nb; i++, p += R8_BLOCK(K)) {
        R8_PREFETCH(p, pf, K);
        const __m256 dw = r8_scales(p);
        __m256i q[R8_STEPS];
#pragma GCC unroll 8
        for (int k = 0; k < R8_STEPS; k++)
            q[k] = nib_step(p, k, K);
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++) {
            __m256i isum = lane_start(&acts[t], i, K);
            if (vnni) {
                __m256i odd = _mm256_setzero_si256();
#pragma GCC unroll 8
                for (int k = 0; k < R8_STEPS; k++) {
                    __m256i *chain = k % 2 ? &odd : &isum;
                    *chain = dpbusd_vex(*chain, q[k], act4(&acts[t], i, k));
                }
                isum = _mm256_add_epi32(isum, odd);
            } else {
                __m256i s16 = _mm256_setzero_si256();
#pragma GCC unroll 4
                for (int k = 0; k < R8_STEPS / 2; k++) {
                    const __m256i d =
                        _mm256_add_epi16(_mm256_maddubs_epi16(q[k], act4(&acts[t], i, k)),
                                         _mm256_maddubs_epi16(q[k + 4], act4(&acts[t], i, k + 4)));
                    s16 = k % pairs == 0 ? d : _mm256_add_epi16(s16, d);
                    if (k % pairs == pairs - 1)
                        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(s16, ones));
                }
            }
            acc[t] = r8_scale_into(p, dw, isum, &acts[t], i, acc[t], K);
        }
    }
    r8_store(acc, y, y_stride, TB);
}

/* Q4_K_R8 / Q5_K_R8 with AVX2: a sub-block's steps of levels times
 * activations summed as int16, Q4_K's eight at once (8 * 2 * 15 * 128
 * fits), Q5_K's four (4 * 2 * 31 * 128 does), then widened and scaled in
 * one multiply-add against the scale in both halves of each lane; the
 * mins' term the same way against the activations' 16-value sums. With
 * vnni, the steps go straight into an int32 sum per row (AVX-VNNI), which
 * one 32-bit multiply scales: the same integers. */
TW_AVX2 TW_TILE void r8k_group_core(const uint8_t *p, size_t nb, const tw_act *acts, float *y,
                                    size_t y_stride, const int TB, size_t pf, const int K,
                                    const bool vnni)
{
    const int widen = K == R8_Q5K ? 4 : 8; /* steps per int16 sum */
    /* a batch of six or more always fetches; fewer only where measured to
     * pay (tw_kernels_set_decode_prefetch_k) */
    if (TB < TW_R8_PREFETCH_MIN_ACTS && !tw_kernels_decode_prefetch_k())
        pf = 0;
    __m256 acc[8] = {0};
    for (size_t i = 0; i < nb; i++, p += R8_BLOCK(K)) {
        __m256i s1[8], mp[8];
        uint8_t scb[64];
        r8k_block_scales(p, scb, mp);
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++)
            s1[t] = _mm256_setzero_si256();
        for (int j = 0; j < 8; j++) {
            if (pf)
                r8_prefetch_part(p + pf, j, 8, K);
            const __m256i scp = r8k_lanes(scb, j, !vnni), h5 = k5_bits(p, j, K);
            __m256i s16[8], odd[8];
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                const __m256i q = nib_k(p, j / 2, j % 2, k, h5, K);
#pragma GCC unroll 8
                for (int t = 0; t < TB; t++) {
                    const __m256i a = act4k(&acts[t], i, 32 * j + 4 * k);
                    if (vnni) {
                        /* two chains, even and odd steps, so that neither waits long on
                         * the multiply-add's latency */
                        __m256i *chain = k % 2 ? &odd[t] : &s16[t];
                        *chain = dpbusd_vex(k < 2 ? _mm256_setzero_si256() : *chain, q, a);
                        if (k == 7)
                            s1[t] = _mm256_add_epi32(
                                s1[t], _mm256_mullo_epi32(_mm256_add_epi32(s16[t], odd[t]), scp));
                        continue;
                    }
                    const __m256i d = _mm256_maddubs_epi16(q, a);
                    s16[t] = k % widen == 0 ? d : _mm256_add_epi16(s16[t], d);
                    if (k % widen == widen - 1)
                        s1[t] = _mm256_add_epi32(s1[t], _mm256_madd_epi16(s16[t], scp));
                }
            }
        }
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++) {
            __m256i s2 = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++)
                s2 = _mm256_add_epi32(
                    s2, _mm256_madd_epi16(mp[j], bsum_pair(&acts[t], i, j)));
            acc[t] = r8k_scale_into(p, s1[t], s2, acts[t].d[i], acc[t]);
        }
    }
    r8_store(acc, y, y_stride, TB);
}

/* Q6_K_R8 with AVX2: a sub-block's four steps of levels (0..63) times
 * activations summed as int16 two steps at a time (2 * 2 * 63 * 127
 * fits), each pair widened and scaled in one multiply-add against the
 * sub-block's scale in both halves of each lane. With vnni, the four steps
 * go into an int32 sum per row, scaled by one 32-bit multiply. */
TW_AVX2 TW_TILE void r8q6_group_core(const uint8_t *p, size_t nb, const tw_act *acts, float *y,
                                     size_t y_stride, const int TB, size_t pf, const int K,
                                     const bool vnni)
{
    __m256 acc[8] = {0};
    for (size_t i = 0; i < nb; i++, p += TW_R8Q6_BLOCK) {
        __m256i s[8];
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++)
            s[t] = _mm256_setzero_si256();
#pragma GCC unroll 16
        for (int sb = 0; sb < 16; sb++) {
            if (pf)
                r8_prefetch_part(p + pf, sb, 16, K);
            /* sub-block sb: half h, quarter g, steps 4 * (sb % 2) .. + 3 */
            const int h = sb / 8, g = sb % 8 / 2, k0 = 4 * (sb % 2);
            const __m256i sc = q6_sub_scale(p, sb);
            const __m256i scp = _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xFFFF)),
                                                _mm256_slli_epi32(sc, 16));
            const int c0 = 128 * h + 32 * g + 4 * k0;
            if (vnni) {
#pragma GCC unroll 8
                for (int t = 0; t < TB; t++) {
                    __m256i s32 = _mm256_setzero_si256();
#pragma GCC unroll 4
                    for (int kk = 0; kk < 4; kk++)
                        s32 = dpbusd_vex(s32, q6_step(p, h, k0 + kk, g),
                                         act4k(&acts[t], i, c0 + 4 * kk));
                    s[t] = _mm256_add_epi32(s[t], _mm256_mullo_epi32(s32, sc));
                }
                continue;
            }
#pragma GCC unroll 2
            for (int kk = 0; kk < 4; kk += 2) {
                const __m256i q0 = q6_step(p, h, k0 + kk, g), q1 = q6_step(p, h, k0 + kk + 1, g);
#pragma GCC unroll 8
                for (int t = 0; t < TB; t++) {
                    const __m256i s16 = _mm256_add_epi16(
                        _mm256_maddubs_epi16(q0, act4k(&acts[t], i, c0 + 4 * kk)),
                        _mm256_maddubs_epi16(q1, act4k(&acts[t], i, c0 + 4 * kk + 4)));
                    s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(s16, scp));
                }
            }
        }
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++) {
            __m256i s2 = _mm256_setzero_si256();
            for (int pair = 0; pair < 8; pair++)
                s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(q6_scale_pair(p, pair),
                                                            bsum_pair(&acts[t], i, pair)));
            acc[t] = q6_scale_into(p, s[t], s2, acts[t].d[i], acc[t]);
        }
    }
    r8_store(acc, y, y_stride, TB);
}

/* The group kernels each ISA level runs. */
#define GROUP_VARIANTS(core, name)                                                                 \
    TW_AVX2 TW_TILE void name##_avx2(const uint8_t *p, size_t nb, const tw_act *acts, float *y,    \
                                     size_t y_stride, const int TB, size_t pf, const int K)        \
    {                                                                                              \
        core(p, nb, acts, y, y_stride, TB, pf, K, false);                                          \
    }                                                                                              \
    TW_AVX2 TW_TILE void name##_avx2vnni(const uint8_t *p, size_t nb, const tw_act *acts,          \
                                         float *y, size_t y_stride, const int TB, size_t pf,       \
                                         const int K)                                              \
    {                                                                                              \
        core(p, nb, acts, y, y_stride, TB, pf, K, true);                                           \
    }
GROUP_VARIANTS(r8n_group_core, r8n_group)
GROUP_VARIANTS(r8k_group_core, r8k_group)
GROUP_VARIANTS(r8q6_group_core, r8q6_group)

// clang-format off
R8_DRIVER(TW_AVX2, rows_q8_intrin_avx2, r8_group_avx2, R8_Q8, TW_TYPE_Q8_0_R8, 8)
R8_DRIVER(TW_AVX2, rows_q4_intrin_avx2, r8n_group_avx2, R8_Q4, TW_TYPE_Q4_0_R8, 8)
R8_DRIVER(TW_AVX2, rows_q5_avx2, r8n_group_avx2, R8_Q5, TW_TYPE_Q5_0_R8, 8)
R8_DRIVER(TW_AVX2, rows_q51_avx2, r8n_group_avx2, R8_Q51, TW_TYPE_Q5_1_R8, 8)
R8_DRIVER(TW_AVX2, rows_q4k_avx2, r8k_group_avx2, R8_Q4K, TW_TYPE_Q4_K_R8, 6)
R8_DRIVER(TW_AVX2, rows_q5k_avx2, r8k_group_avx2, R8_Q5K, TW_TYPE_Q5_K_R8, 8)
R8_DRIVER(TW_AVX2, rows_q6k_avx2, r8q6_group_avx2, R8_Q6K, TW_TYPE_Q6_K_R8, 4)
R8_DRIVER(TW_AVX2, rows_q4_intrin_avx2vnni, r8n_group_avx2vnni, R8_Q4, TW_TYPE_Q4_0_R8, 8)
R8_DRIVER(TW_AVX2, rows_q5_avx2vnni, r8n_group_avx2vnni, R8_Q5, TW_TYPE_Q5_0_R8, 8)
R8_DRIVER(TW_AVX2, rows_q51_avx2vnni, r8n_group_avx2vnni, R8_Q51, TW_TYPE_Q5_1_R8, 8)
R8_DRIVER(TW_AVX2, rows_q4k_avx2vnni, r8k_group_avx2vnni, R8_Q4K, TW_TYPE_Q4_K_R8, 6)
R8_DRIVER(TW_AVX2, rows_q5k_avx2vnni, r8k_group_avx2vnni, R8_Q5K, TW_TYPE_Q5_K_R8, 8)
R8_DRIVER(TW_AVX2, rows_q6k_avx2vnni, r8q6_group_avx2vnni, R8_Q6K, TW_TYPE_Q6_K_R8, 4)
// clang-format on

/* A batch with quad panels goes to the kernels written in assembly. */
#define QUAD_OR_INTRIN(name, quads, intrin)                                                        \
    TW_AVX2 static void name(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,         \
                             const tw_act *acts, size_t n_act, float *y, size_t y_stride)          \
    {                                                                                              \
        if (n_act > 1 && acts[0].quad)                                                             \
            quads(w, row_bytes, rows, cols, acts, n_act, y, y_stride);                             \
        else                                                                                       \
            intrin(w, row_bytes, rows, cols, acts, n_act, y, y_stride);                            \
    }
QUAD_OR_INTRIN(rows_q8_avx2, tw_rows_q8_quads_avx2, rows_q8_intrin_avx2)
QUAD_OR_INTRIN(rows_q4_avx2, tw_rows_q4_quads_avx2, rows_q4_intrin_avx2)
QUAD_OR_INTRIN(rows_q8_avx2vnni, tw_rows_q8_quads_avxvnni, rows_q8_intrin_avx2)
QUAD_OR_INTRIN(rows_q4_avx2vnni, tw_rows_q4_quads_avxvnni, rows_q4_intrin_avx2vnni)

void tw_isa_fill_packed_avx2(tw_isa_table *t)
{
    t->quad_types |= 1u << tw_ktype_index(TW_TYPE_Q4_0_R8) | 1u << tw_ktype_index(TW_TYPE_Q8_0_R8);
    t->rows[tw_ktype_index(TW_TYPE_Q8_0_R8)] = rows_q8_avx2;
    t->rows[tw_ktype_index(TW_TYPE_Q4_0_R8)] = rows_q4_avx2;
    t->rows[tw_ktype_index(TW_TYPE_Q5_0_R8)] = rows_q5_avx2;
    t->rows[tw_ktype_index(TW_TYPE_Q5_1_R8)] = rows_q51_avx2;
    t->rows[tw_ktype_index(TW_TYPE_Q4_K_R8)] = rows_q4k_avx2;
    t->rows[tw_ktype_index(TW_TYPE_Q5_K_R8)] = rows_q5k_avx2;
    t->rows[tw_ktype_index(TW_TYPE_Q6_K_R8)] = rows_q6k_avx2;
}

void tw_isa_fill_avx2vnni(tw_isa_table *t)
{
    t->name = "avx2vnni";
    t->rows[tw_ktype_index(TW_TYPE_Q8_0_R8)] = rows_q8_avx2vnni;
    t->rows[tw_ktype_index(TW_TYPE_Q4_0_R8)] = rows_q4_avx2vnni;
    t->rows[tw_ktype_index(TW_TYPE_Q5_0_R8)] = rows_q5_avx2vnni;
    t->rows[tw_ktype_index(TW_TYPE_Q5_1_R8)] = rows_q51_avx2vnni;
    t->rows[tw_ktype_index(TW_TYPE_Q4_K_R8)] = rows_q4k_avx2vnni;
    t->rows[tw_ktype_index(TW_TYPE_Q5_K_R8)] = rows_q5k_avx2vnni;
    t->rows[tw_ktype_index(TW_TYPE_Q6_K_R8)] = rows_q6k_avx2vnni;
}

#else

void tw_isa_fill_packed_avx2(tw_isa_table *t)
{
    (void)t;
}

void tw_isa_fill_avx2vnni(tw_isa_table *t)
{
    (void)t;
}

#endif
