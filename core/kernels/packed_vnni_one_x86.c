/* The packed types' kernels for one to a few activations on x86 CPUs
 * with AVX512-VNNI: what a decode step (one activation) and a small
 * batch of the K types run. A single activation takes Q8_0, Q4_0 and Q5_0
 * one group of eight rows at a time, two steps to a zmm; Q4_K and Q6_K
 * take one to four activations with two 32-column groups to a zmm. Each
 * group streams through once, so a thread reads one run of memory, not
 * two side by side. Every lane repeats tw_r8_dot's operations for its
 * row, so the bits are those of every other ISA (packed_x86.c says how);
 * the batch kernels and the table that picks among them are in
 * packed_vnni_x86.c. */
#include "kernels/packed_x86.h"

#ifdef TW_HAVE_X86

/* A single activation against one group of eight rows, two steps of a
 * block in the sixteen lanes of a zmm: rows 0-7 of step k in the low half
 * and of a second step in the high half. One group is one stream, as the
 * hardware prefetchers like it, and each vpdpbusd still feeds 64
 * products. Q4_0's nibble run k holds step k in its low nibbles and step
 * k + 4 in its high ones: one run loaded into both halves gives both, the
 * low half masked to its low nibbles and the high half to its high ones,
 * left in place, so that half's sums come out 16 times too large and are
 * shifted back, exactly, once a block (a shift a step fewer: 7.9 against
 * 8.6-8.7 us for 896 x 896 in cache, one thread, Zen 5). Q5_0's high half
 * is shifted down instead, as its fifth bit goes above the nibble, and
 * each half gets its step's fifth bits by one rotation per lane: decoding
 * the qwen2-0.5b Q4_K_M file (Q5_0 for most of its matrices) on 2 threads
 * of a Zen 5 guest read 1.024x and 1.028x against the 8-row kernel, faster
 * in 23 and 22 of 30 alternated bursts. Q8_0's steps 2j
 * and 2j + 1 are 64 bytes in a row. The halves are added as integers
 * before the block's scaling, so every row's sum, and with it every bit,
 * is r8_group_vnni's. The permutes stay: the step pairs' activations laid
 * out once per matrix (four zmm a block, fed to vpdpbusd from memory)
 * decoded qwen2-0.5b Q4_0 10-13% slower, as the down projection's 39 KiB
 * of them do not stay in L1 beside the weight stream. A block's four
 * vpdpbusd run as two chains of two, the first starting from the block's
 * bias: four zeroed accumulators, three adds and the bias added apart
 * (with a signed division by 16 in scalar code) took 5-11% longer for
 * 896 x 896 in L2 (one thread, Zen 5: Q4_0 7.6 against 6.9 us, Q5_0 10.2
 * against 9.1, Q8_0 6.6 against 6.3), and decoding qwen2-0.5b Q4_0 on 2
 * threads read 204.6 against 223.8 tok/s, five runs of each alternated. */
TW_AVX512 TW_TILE void r8_one_vnni(const uint8_t *p, size_t nb, const tw_act *a, float *y,
                                   size_t pf, const int K)
{
    /* per-half nibble masks (Q4_0) and activation dword indices of the
     * four step pairs */
    const __m512i nib =
        _mm512_inserti64x4(_mm512_set1_epi8(0x0F), _mm256_set1_epi8((char)0xF0), 1);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512i idx[4];
    for (int j = 0; j < 4; j++) {
        const int lo = K == R8_Q8 ? 2 * j : j, hi = K == R8_Q8 ? 2 * j + 1 : j + 4;
        idx[j] = _mm512_inserti64x4(_mm512_set1_epi32(lo), _mm256_set1_epi32(hi), 1);
    }
    __m256 acc = _mm256_setzero_ps();
    for (size_t i = 0; i < nb; i++, p += R8_BLOCK(K)) {
        R8_PREFETCH(p, pf, K);
        const __m512i av = _mm512_castsi256_si512(tw_load256(a->qs + i * TW_QK8_0));
        /* lane_start's bias rides in the first chain: Q4_0's in the high
         * half, which is shifted back after, as -128 times the block's sum
         * (16 times the -8 times lane_start takes), so that the shift
         * divides it exactly with the sums; the others' in the low half */
        const int32_t bneg = a->bneg[i];
        const __m512i start =
            K == R8_Q4   ? _mm512_maskz_set1_epi32((__mmask16)0xFF00, bneg)
            : K == R8_Q5 ? _mm512_maskz_srai_epi32((__mmask16)0x00FF, _mm512_set1_epi32(bneg), 3)
                         : _mm512_maskz_set1_epi32((__mmask16)0x00FF, bneg);
        __m512i c[2];
        /* Q5_0: the rows' fifth bits in both halves */
        const __m512i h5 = K == R8_Q5 ? _mm512_broadcast_i64x4(tw_load256(p + R8_HEAD(K)))
                                      : _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            __m512i qu;
            if (K == R8_Q8) {
                qu = _mm512_xor_si512(_mm512_loadu_si512(p + R8_HEAD(K) + 64 * j), flip);
            } else if (K == R8_Q5) {
                /* the high half's nibbles moved down (its fifth bit goes
                 * above them), then each half's fifth bits of its step to
                 * bit 4: fifth_bits' shifts as rotations, whose wrapped
                 * bits never reach a bit 4 */
                const __m512i v = _mm512_broadcast_i64x4(tw_load256(p + R8_HEAD(K) + 32 + 32 * j));
                const __m512i l =
                    _mm512_and_si512(_mm512_mask_srli_epi16(v, (__mmask32)0xFFFF0000u, v, 4),
                                     _mm512_set1_epi8(0x0F));
                const __m512i rot = _mm512_inserti64x4(_mm512_set1_epi32(4 - j),
                                                       _mm256_set1_epi32((32 - j) % 32), 1);
                qu = _mm512_or_si512(
                    l, _mm512_and_si512(_mm512_rolv_epi32(h5, rot), _mm512_set1_epi8(0x10)));
            } else {
                const __m512i v = _mm512_broadcast_i64x4(tw_load256(p + R8_HEAD(K) + 32 * j));
                qu = _mm512_and_si512(v, nib);
            }
            const __m512i act = _mm512_permutexvar_epi32(idx[j], av);
            const __m512i from = j % 2 ? c[j / 2] : j == 0 ? start : _mm512_setzero_si512();
            c[j / 2] = _mm512_dpbusd_epi32(from, qu, act);
        }
        const __m512i cs = _mm512_add_epi32(c[0], c[1]);
        __m256i hi = _mm512_extracti64x4_epi64(cs, 1);
        if (K == R8_Q4)
            hi = _mm256_srai_epi32(hi, 4);
        const __m256i isum = _mm256_add_epi32(_mm512_castsi512_si256(cs), hi);
        acc = r8_scale_into(p, r8_scales(p), isum, a, i, acc, K);
    }
    _mm256_storeu_ps(y, acc);
}

/* The activation dword indices of step k of two 32-column runs in one
 * zmm: dword k of the first run in the low half, of the second (dwords
 * 8..15 of a 64-byte load) in the high one. */
TW_AVX512 TW_TILE void step_pair_idx(__m512i *idx)
{
    for (int k = 0; k < 8; k++)
        idx[k] = _mm512_inserti64x4(_mm512_set1_epi32(k), _mm256_set1_epi32(8 + k), 1);
}

/* The two halves of a zmm of int32 lanes added: the eight rows' sums. */
TW_AVX512 TW_TILE __m256i halves_sum(__m512i v)
{
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

/* A K block's term of activation a's 16-value sums (block i) against the
 * rows' int16 pairs lanes[j], j = 0..7: Q4_K's mins, Q6_K's scales. */
TW_AVX512 TW_TILE __m256i pairs_term(const __m256i *lanes, const tw_act *a, size_t i)
{
    __m256i s2 = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        s2 = _mm256_dpwssd_epi32(s2, lanes[j], bsum_pair(a, i, j));
    return s2;
}

/* Q4_K_R8 for one to four activations (TB), in zmm registers as r8_one_vnni
 * takes Q4_0: a nibble run k of pair g holds step k of sub-block 2g in its
 * low nibbles and of sub-block 2g + 1 in its high ones, so one run loaded
 * into both halves, each half masked to its nibbles (the high ones left in
 * place, their sums 16 times too large and shifted back exactly), feeds
 * both sub-blocks to one vpdpbusd, and the pair's 64 activation bytes,
 * permuted once a step, give each half its own. A pair's eight steps run as
 * two chains; the four pairs are independent. The sums times the scales (a
 * pair's 16 in one load) are r8k_group_vnni's integers, so every bit is.
 * Against r8k_group_vnni's eight ymm steps a sub-block, one thread, Zen 5:
 * 896 x 4864 took 47.2 against 66.0 us and 2048 x 2048 43.4 against 59.4;
 * decoding a llama-1b-shaped Q4_K_M file on 2 threads read 116.7 against
 * 111.3 tok/s (four runs of each alternated, all four faster). Each masked
 * run serves all TB activations, where the 16-row kernel's per-activation
 * broadcasts and per-sub-block scaling left two activations no cheaper than
 * two single ones (see FEW_ACTS). */
TW_AVX512 TW_TILE void r8k_few_vnni(const uint8_t *p, size_t nb, const tw_act *acts, float *y,
                                    size_t y_stride, const int TB, size_t pf, const int K)
{
    const __m512i nib = _mm512_inserti64x4(_mm512_set1_epi8(0x0F), _mm256_set1_epi8((char)0xF0), 1);
    __m512i idx[8];
    step_pair_idx(idx);
    __m256 acc[4];
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++)
        acc[t] = _mm256_setzero_ps();
    for (size_t i = 0; i < nb; i++, p += R8_BLOCK(K)) {
        R8_PREFETCH(p, pf, K);
        uint8_t sc[64], m[64];
        r8k_scales_mins(p, sc, m);
        __m512i s1[4];
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++)
            s1[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            __m512i c[4][2];
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++)
                c[t][0] = c[t][1] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                const __m512i v = _mm512_and_si512(
                    _mm512_broadcast_i64x4(tw_load256(p + TW_R8K_QS + 256 * g + 32 * k)), nib);
#pragma GCC unroll 4
                for (int t = 0; t < TB; t++) {
                    const __m512i av = _mm512_loadu_si512(acts[t].qs + i * TW_QK_K + 64 * g);
                    c[t][k % 2] =
                        _mm512_dpbusd_epi32(c[t][k % 2], v, _mm512_permutexvar_epi32(idx[k], av));
                }
            }
            const __m512i scg =
                _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(sc + 16 * g)));
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++) {
                __m512i sum = _mm512_add_epi32(c[t][0], c[t][1]);
                sum = _mm512_mask_srai_epi32(sum, (__mmask16)0xFF00, sum, 4);
                s1[t] = _mm512_add_epi32(s1[t], _mm512_mullo_epi32(sum, scg));
            }
        }
        __m256i mins[8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            mins[j] = r8k_lanes(m, j, true);
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++)
            acc[t] = r8k_scale_into(p, halves_sum(s1[t]), pairs_term(mins, &acts[t], i),
                                    acts[t].d[i], acc[t]);
    }
    r8_store(acc, y, y_stride, TB);
}

/* Q6_K_R8 for one to four activations, two 32-column groups a zmm: groups g
 * and g + 2 of a half share their low-bit runs (low nibbles and high ones)
 * and their high-bit runs (bit pairs 2g and 2g + 4), so one load of each
 * into both halves, the high half's nibbles shifted down and each half's
 * bit pair moved to bits 4-5 by one variable shift, gives both groups'
 * levels at one step; the two groups' activations are permuted into the
 * halves as in r8k_few_vnni, the levels formed once for all the
 * activations. A step pair's four steps of one sub-block run as one chain,
 * beside seven independent others. The sums times the scales are
 * r8q6_group_vnni's integers, so every bit is. Against r8q6_group_vnni's
 * sixteen ymm sub-blocks, one thread, Zen 5: 896 x 4864 took 78.5-84.8
 * against 104-105 us and 2048 x 2048 67.5-74.5 against 90-93 (one
 * activation). From memory it matters less: with this kernel and
 * r8k_few_vnni against the 8-row ones, switched in one process, decoding a
 * llama-1b-shaped Q4_K_M file read 1.022x (faster in 13 of 20 bursts) and
 * the qwen2-0.5b one 0.992x (12 of 30). */
TW_AVX512 TW_TILE void r8q6_few_vnni(const uint8_t *p, size_t nb, const tw_act *acts, float *y,
                                     size_t y_stride, const int TB, size_t pf, const int K)
{
    const __m512i up4 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_setzero_si256(), 1);
    __m512i idx[8];
    step_pair_idx(idx);
    __m256 acc[4];
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++)
        acc[t] = _mm256_setzero_ps();
    for (size_t i = 0; i < nb; i++, p += TW_R8Q6_BLOCK) {
        R8_PREFETCH(p, pf, K);
        __m512i s[4];
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++)
            s[t] = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
#pragma GCC unroll 2
            for (int g = 0; g < 2; g++) {
                __m512i c[4][2];
#pragma GCC unroll 4
                for (int t = 0; t < TB; t++)
                    c[t][0] = c[t][1] = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int k = 0; k < 8; k++) {
                    const uint8_t *step = p + TW_R8Q6_Q + 768 * h + 96 * k;
                    const __m512i l = _mm512_broadcast_i64x4(tw_load256(step + 32 * g));
                    const __m512i qh = _mm512_broadcast_i64x4(tw_load256(step + 64));
                    const __m512i nib =
                        _mm512_and_si512(_mm512_mask_srli_epi16(l, (__mmask32)0xFFFF0000u, l, 4),
                                         _mm512_set1_epi8(0x0F));
                    const __m512i hi = _mm512_sllv_epi16(g ? _mm512_srli_epi16(qh, 2) : qh, up4);
                    const __m512i q =
                        _mm512_or_si512(nib, _mm512_and_si512(hi, _mm512_set1_epi8(0x30)));
#pragma GCC unroll 4
                    for (int t = 0; t < TB; t++) {
                        const int8_t *col = acts[t].qs + i * TW_QK_K + 128 * h + 32 * g;
                        const __m512i av = _mm512_inserti64x4(
                            _mm512_castsi256_si512(tw_load256(col)), tw_load256(col + 64), 1);
                        c[t][k / 4] = _mm512_dpbusd_epi32(c[t][k / 4], q,
                                                          _mm512_permutexvar_epi32(idx[k], av));
                    }
                }
#pragma GCC unroll 2
                for (int e = 0; e < 2; e++) {
                    const int sb = 8 * h + 2 * g + e;
                    const __m512i sc = _mm512_inserti64x4(
                        _mm512_castsi256_si512(q6_sub_scale(p, sb)), q6_sub_scale(p, sb + 4), 1);
#pragma GCC unroll 4
                    for (int t = 0; t < TB; t++)
                        s[t] = _mm512_add_epi32(s[t], _mm512_mullo_epi32(c[t][e], sc));
                }
            }
        }
        __m256i pairs[8];
#pragma GCC unroll 8
        for (int pair = 0; pair < 8; pair++)
            pairs[pair] = q6_scale_pair(p, pair);
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++)
            acc[t] = q6_scale_into(p, halves_sum(s[t]), pairs_term(pairs, &acts[t], i),
                                   acts[t].d[i], acc[t]);
    }
    r8_store(acc, y, y_stride, TB);
}

/* The K types' kernels at one activation, as ONE_DRIVER takes them. */
TW_AVX512 TW_TILE void r8k_one_vnni(const uint8_t *p, size_t nb, const tw_act *a, float *y,
                                    size_t pf, const int K)
{
    r8k_few_vnni(p, nb, a, y, 0, 1, pf, K);
}

TW_AVX512 TW_TILE void r8q6_one_vnni(const uint8_t *p, size_t nb, const tw_act *a, float *y,
                                     size_t pf, const int K)
{
    r8q6_few_vnni(p, nb, a, y, 0, 1, pf, K);
}

/* The single-activation drivers of Q8_0, Q4_0, Q5_0 and Q4_K: `one` group
 * after group, the next group fetched ahead where decode prefetch is on,
 * the rows past the last whole group in scalar arithmetic. */
#define ONE_DRIVER(name, one, K, type)                                                             \
    TW_AVX512 void name(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,       \
                               const tw_act *acts, size_t n_act, float *y, size_t y_stride)        \
    {                                                                                              \
        const size_t nb = cols / R8_COLS(K), groups = rows / TW_R8_ROWS;                           \
        const bool fetch = tw_decode_prefetch_for(rows * row_bytes);                               \
        for (size_t g = 0; g < groups; g++)                                                        \
            one(w + g * TW_R8_ROWS * row_bytes, nb, acts, y + g * TW_R8_ROWS,                      \
                fetch && g + 1 < groups ? TW_R8_ROWS * row_bytes : 0, K);                          \
        const size_t done = groups * TW_R8_ROWS;                                                   \
        SCALAR_TAIL(type);                                                                         \
    }

/* A `few` kernel at each of the activation counts it takes (1-4), so that
 * only those are compiled. */
typedef void (*few_tile_fn)(const uint8_t *p, size_t nb, const tw_act *acts, float *y,
                            size_t y_stride, size_t pf);
#define FEW_TILES(kernel, K)                                                                       \
    TW_AVX512 static void kernel##_1(const uint8_t *p, size_t nb, const tw_act *acts, float *y,    \
                                     size_t y_stride, size_t pf)                                   \
    {                                                                                              \
        kernel(p, nb, acts, y, y_stride, 1, pf, K);                                                \
    }                                                                                              \
    TW_AVX512 static void kernel##_2(const uint8_t *p, size_t nb, const tw_act *acts, float *y,    \
                                     size_t y_stride, size_t pf)                                   \
    {                                                                                              \
        kernel(p, nb, acts, y, y_stride, 2, pf, K);                                                \
    }                                                                                              \
    TW_AVX512 static void kernel##_3(const uint8_t *p, size_t nb, const tw_act *acts, float *y,    \
                                     size_t y_stride, size_t pf)                                   \
    {                                                                                              \
        kernel(p, nb, acts, y, y_stride, 3, pf, K);                                                \
    }                                                                                              \
    TW_AVX512 static void kernel##_4(const uint8_t *p, size_t nb, const tw_act *acts, float *y,    \
                                     size_t y_stride, size_t pf)                                   \
    {                                                                                              \
        kernel(p, nb, acts, y, y_stride, 4, pf, K);                                                \
    }                                                                                              \
    static const few_tile_fn kernel##_tiles[4] = {kernel##_1, kernel##_2, kernel##_3, kernel##_4};

FEW_TILES(r8k_few_vnni, R8_Q4K)
FEW_TILES(r8q6_few_vnni, R8_Q6K)

/* ROWS_DRIVER's walk for the `few` kernels: group after group of eight
 * rows, each against the activations in near-equal tiles of at most four,
 * the first tile fetching the next group's blocks where decode prefetch
 * says so; the rows past the last group in scalar arithmetic. */
static void few_rows(const few_tile_fn *tiles, tw_type type, size_t cols_per_block,
                     const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                     const tw_act *acts, size_t n_act, float *y, size_t y_stride)
{
    const size_t nb = cols / cols_per_block, groups = rows / TW_R8_ROWS;
    const size_t pf_min = r8_prefetch_min_acts(rows * row_bytes);
    for (size_t g = 0; g < groups; g++) {
        const uint8_t *p = w + g * TW_R8_ROWS * row_bytes;
        const size_t pf0 = n_act >= pf_min && g + 1 < groups ? TW_R8_ROWS * row_bytes : 0;
        for (size_t t = 0; t < n_act;) {
            const size_t tb = n_act - t == 1 ? 1 : r8_tile_group(n_act - t, 4);
            tiles[tb - 1](p, nb, acts + t, y + t * y_stride + g * TW_R8_ROWS, y_stride,
                          t == 0 ? pf0 : 0);
            t += tb;
        }
    }
    const size_t done = groups * TW_R8_ROWS;
    tw_rows_r8_tail(type, w, row_bytes, rows, done, cols, acts, n_act, y, y_stride);
}

TW_AVX512 void tw_rows_q4k_few_avx512(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                                   const tw_act *acts, size_t n_act, float *y, size_t y_stride)
{
    few_rows(r8k_few_vnni_tiles, TW_TYPE_Q4_K_R8, R8_COLS(R8_Q4K), w, row_bytes, rows, cols, acts,
             n_act, y, y_stride);
}

TW_AVX512 void tw_rows_q6k_few_avx512(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                                   const tw_act *acts, size_t n_act, float *y, size_t y_stride)
{
    few_rows(r8q6_few_vnni_tiles, TW_TYPE_Q6_K_R8, R8_COLS(R8_Q6K), w, row_bytes, rows, cols, acts,
             n_act, y, y_stride);
}

// clang-format off
ONE_DRIVER(tw_rows_q8_one_avx512, r8_one_vnni, R8_Q8, TW_TYPE_Q8_0_R8)
ONE_DRIVER(tw_rows_q4_one_avx512, r8_one_vnni, R8_Q4, TW_TYPE_Q4_0_R8)
ONE_DRIVER(tw_rows_q5_one_avx512, r8_one_vnni, R8_Q5, TW_TYPE_Q5_0_R8)
ONE_DRIVER(tw_rows_q4k_one_avx512, r8k_one_vnni, R8_Q4K, TW_TYPE_Q4_K_R8)
ONE_DRIVER(tw_rows_q6k_one_avx512, r8q6_one_vnni, R8_Q6K, TW_TYPE_Q6_K_R8)
// clang-format on

#endif
