/* Building blocks of the x86 kernels for the packed types (Q8_0 / Q4_0 /
 * Q5_0 / Q5_1 / Q4_K / Q5_K / Q6_K rows packed eight to a group,
 * kernels/blocks.h), shared by the AVX2 kernels (packed_x86.c) and the
 * VNNI ones (packed_vnni_x86.c): the lanes' loads and unpacking, the
 * blocks' scaling, the prefetch of the next group and the drivers that walk
 * a range of rows against a batch. Everything here is inline and carries
 * its own target attribute. */
#ifndef TW_KERNELS_PACKED_X86_H
#define TW_KERNELS_PACKED_X86_H

#include "kernels/blocks.h"
#include "kernels/kernels_internal.h"
#include "kernels/simd_x86.h"
#include "tw/kernels.h"

#ifdef TW_HAVE_X86

#define TW_TILE  static inline __attribute__((always_inline))
#define R8_STEPS (TW_QK8_0 / 4)
/* The kind of a packed type (the K of the kernels below), the bytes of one
 * block of a group of it, and (32-column kinds) of the block's head: the
 * eight rows' f16 scales, and Q5_1's offsets. */
#define R8_Q8       0
#define R8_Q4       1
#define R8_Q5       2
#define R8_Q51      3
#define R8_Q4K      4
#define R8_Q5K      5
#define R8_Q6K      6
#define R8_BLOCK(K)                                                                                \
    ((K) == R8_Q4K   ? TW_R8K_BLOCK                                                                \
     : (K) == R8_Q5K ? TW_R8K5_BLOCK                                                               \
     : (K) == R8_Q6K ? TW_R8Q6_BLOCK                                                               \
                     : TW_R8_ROWS * ((K) == R8_Q8   ? 34                                           \
                                     : (K) == R8_Q4 ? 18                                           \
                                     : (K) == R8_Q5 ? 22                                           \
                                                    : 24))
#define R8_COLS(K) ((K) >= R8_Q4K ? TW_QK_K : TW_QK8_0)
#define R8_HEAD(K) (((K) == R8_Q51 ? 4 : 2) * TW_R8_ROWS)

/* Four activation values of block i, 4-column step k, in every lane. */
TW_AVX2 TW_TILE __m256i act4(const tw_act *a, size_t i, int k)
{
    int32_t v;
    memcpy(&v, a->qs + i * TW_QK8_0 + 4 * k, 4);
    return _mm256_set1_epi32(v);
}

/* The K types: the four activation values from column c of block i. */
TW_AVX2 TW_TILE __m256i act4k(const tw_act *a, size_t i, int c)
{
    int32_t v;
    memcpy(&v, a->qs + i * TW_QK_K + c, 4);
    return _mm256_set1_epi32(v);
}

/* The K types: the activations' 16-value sums 2j and 2j + 1 of block i
 * as an int16 pair in every lane (Q4_K: the two halves of its sub-block j;
 * Q6_K: its sub-blocks 2j and 2j + 1). */
TW_AVX2 TW_TILE __m256i bsum_pair(const tw_act *a, size_t i, int j)
{
    int32_t v;
    memcpy(&v, a->bsums + i * (TW_QK_K / 16) + 2 * j, 4);
    return _mm256_set1_epi32(v);
}

/* Q4_K_R8 / Q5_K_R8: the 6-bit scales (sc) and mins (m) of the block at p,
 * byte 8j + r for sub-block j of row r, all 64 of each at once: the low
 * planes' nibbles, and the top bits with each 32-bit word's eight nibbles
 * spread to bytes (kernels/blocks.h). Unpacking a block's scales together
 * instead of per sub-block takes a quarter of the operations, which is
 * what a single activation feels. */
TW_AVX2 TW_TILE void r8k_scales_mins(const uint8_t *p, uint8_t *sc, uint8_t *m)
{
    const __m256i nib = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(3);
    const __m256i hx = tw_load256(p + TW_R8K_SC_HI);
    const __m256i n0 = _mm256_and_si256(hx, nib);
    const __m256i n1 = _mm256_and_si256(_mm256_srli_epi16(hx, 4), nib);
    /* rows 0..7 of sub-blocks 0, 1 | 4, 5 and of 2, 3 | 6, 7 */
    const __m256i ua = _mm256_unpacklo_epi8(n0, n1), ub = _mm256_unpackhi_epi8(n0, n1);
    for (int half = 0; half < 2; half++) {
        const __m256i lo = tw_load256(p + TW_R8K_SC_LO + 32 * half);
        const __m256i hi = half ? _mm256_permute2x128_si256(ua, ub, 0x31)
                                : _mm256_permute2x128_si256(ua, ub, 0x20);
        const __m256i s = _mm256_or_si256(_mm256_and_si256(lo, nib),
                                          _mm256_slli_epi16(_mm256_and_si256(hi, two), 4));
        const __m256i n = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(lo, 4), nib),
            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hi, 2), two), 4));
        _mm256_storeu_si256((__m256i *)(void *)(sc + 32 * half), s);
        _mm256_storeu_si256((__m256i *)(void *)(m + 32 * half), n);
    }
}

/* The eight rows' values v[8j + r] (from r8k_scales_mins), one int32 lane
 * per row: in both int16 halves of it (pair) or in the low one. */
TW_AVX2 TW_TILE __m256i r8k_lanes(const uint8_t *v, int j, bool pair)
{
    const int8_t z = -1; /* vpshufb: a zero byte */
    const __m256i ctl = pair ? _mm256_setr_epi8(0, z, 0, z, 1, z, 1, z, 2, z, 2, z, 3, z, 3, z, 4,
                                                z, 4, z, 5, z, 5, z, 6, z, 6, z, 7, z, 7, z)
                             : _mm256_setr_epi8(0, z, z, z, 1, z, z, z, 2, z, z, z, 3, z, z, z, 4,
                                                z, z, z, 5, z, z, z, 6, z, z, z, 7, z, z, z);
    int64_t w;
    memcpy(&w, v + 8 * j, 8);
    return _mm256_shuffle_epi8(_mm256_set1_epi64x(w), ctl);
}

/* A K block's scales, byte 8j + r, into sc, and its mins as int16 pairs,
 * one vector per sub-block j, into mp: shuffled once for all activations. */
TW_AVX2 TW_TILE void r8k_block_scales(const uint8_t *p, uint8_t *sc, __m256i *mp)
{
    uint8_t m[64];
    r8k_scales_mins(p, sc, m);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        mp[j] = r8k_lanes(m, j, true);
}

/* acc plus, per int32 lane, the four products of u's unsigned bytes and
 * s's signed ones: AVX-VNNI's vpdpbusd (VEX form), written out because
 * the AVX2 functions' target does not let the compiler emit it. Exact. */
TW_AVX2 TW_TILE __m256i dpbusd_vex(__m256i acc, __m256i u, __m256i s)
{
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));
    return acc;
}

/* The sum of a VNNI kernel's n dot-product chains of one activation. */
TW_AVX2 TW_TILE __m256i chains_sum(const __m256i *chain, int n)
{
    __m256i s = chain[0];
#pragma GCC unroll 8
    for (int c = 1; c < n; c++)
        s = _mm256_add_epi32(s, chain[c]);
    return s;
}

/* The fifth bits of 4-column step k (0..7) of the eight rows at bit 4 of
 * their bytes, from their 32 bits in the packed order (bit 8c + k for
 * column 4k + c) in each lane of h. */
TW_AVX2 TW_TILE __m256i fifth_bits(__m256i h, int k)
{
    const __m256i at4 = k < 4 ? _mm256_slli_epi32(h, 4 - k) : _mm256_srli_epi32(h, k - 4);
    return _mm256_and_si256(at4, _mm256_set1_epi8(0x10));
}

/* Q4_K_R8 / Q5_K_R8: the levels of sub-block 2g + h at 4-column step k;
 * Q5_K's with the fifth bits of the sub-block in h5. */
TW_AVX2 TW_TILE __m256i nib_k(const uint8_t *p, int g, int h, int k, __m256i h5, const int K)
{
    const __m256i v =
        tw_load256(p + (K == R8_Q5K ? TW_R8K5_G(g) + 64 : TW_R8K_QS + 256 * g) + 32 * k);
    const __m256i l = _mm256_and_si256(h ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(0x0F));
    return K == R8_Q5K ? _mm256_or_si256(l, fifth_bits(h5, k)) : l;
}

/* Q5_K_R8: the fifth bits of sub-block j of the block at p; zero for Q4_K. */
TW_AVX2 TW_TILE __m256i k5_bits(const uint8_t *p, int j, const int K)
{
    return K == R8_Q5K ? tw_load256(p + TW_R8K5_G(j / 2) + 32 * (j % 2)) : _mm256_setzero_si256();
}

/* Q6_K_R8: the 0..63 levels of columns 128h + 32g + 4k.. + 3 of the eight
 * rows, from the step's ql run (g even: low nibbles, odd: the next run's;
 * g >= 2: high nibbles) and its qh run's bit pair g at bits 4-5. */
TW_AVX2 TW_TILE __m256i q6_step(const uint8_t *p, int h, int k, int g)
{
    const uint8_t *step = p + TW_R8Q6_Q + 768 * h + 96 * k;
    const __m256i l = tw_load256(step + 32 * (g % 2)), qh = tw_load256(step + 64);
    const __m256i nib =
        _mm256_and_si256(g < 2 ? l : _mm256_srli_epi16(l, 4), _mm256_set1_epi8(0x0F));
    const __m256i hi = g == 0   ? _mm256_slli_epi16(qh, 4)
                       : g == 1 ? _mm256_slli_epi16(qh, 2)
                       : g == 2 ? qh
                                : _mm256_srli_epi16(qh, 2);
    return _mm256_or_si256(nib, _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
}

/* Q6_K_R8: the scales of sub-blocks 2p and 2p + 1 of the eight rows, as an
 * int16 pair in each row's lane. */
TW_AVX2 TW_TILE __m256i q6_scale_pair(const uint8_t *p, int pair)
{
    return _mm256_cvtepi8_epi16(
        _mm_loadu_si128((const __m128i *)(const void *)(p + TW_R8Q6_SC + 16 * pair)));
}

/* Q6_K_R8: the scale of sub-block sb of the eight rows, one int32 lane
 * per row. */
TW_AVX2 TW_TILE __m256i q6_sub_scale(const uint8_t *p, int sb)
{
    const __m256i pr = q6_scale_pair(p, sb / 2);
    return sb % 2 ? _mm256_srai_epi32(pr, 16) : _mm256_srai_epi32(_mm256_slli_epi32(pr, 16), 16);
}

/* Q6_K_R8: acc + (d * da) * S for the eight rows, S = s - 32 * s2 (s2:
 * the scales times the activations' 16-value sums), tw_r8_dot's
 * roundings. */
TW_AVX2 TW_TILE __m256 q6_scale_into(const uint8_t *p, __m256i s, __m256i s2, float da,
                                    __m256 acc)
{
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
    const __m256i v = _mm256_sub_epi32(s, _mm256_slli_epi32(s2, 5));
    return _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(da)), _mm256_cvtepi32_ps(v), acc);
}

/* Q4_K_R8: acc + da * (d * S1 - dmin * S2) for the eight rows, the
 * rounding steps of tw_r8_dot. */
TW_AVX2 TW_TILE __m256 r8k_scale_into(const uint8_t *p, __m256i s1, __m256i s2, float da,
                                     __m256 acc)
{
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
    const __m256 dmin =
        _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + TW_R8K_DMIN)));
    const __m256 u = _mm256_fmsub_ps(d, _mm256_cvtepi32_ps(s1),
                                     _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(s2)));
    return _mm256_fmadd_ps(_mm256_set1_ps(da), u, acc);
}

/* Q4_0 / Q5_0 / Q5_1 unsigned levels (0..15 / 0..31) of step k (columns
 * 4k..4k+3) of the eight rows: nibble run k % 4, low nibbles for the first
 * 16 columns, high ones after; the fifth bits come from the reordered qh,
 * shifted to bit 4 of each byte. */
TW_AVX2 TW_TILE __m256i nib_step(const uint8_t *p, int k, const int K)
{
    const bool q5 = K == R8_Q5 || K == R8_Q51;
    const __m256i v = tw_load256(p + R8_HEAD(K) + (q5 ? 32 : 0) + 32 * (k % 4));
    const __m256i l =
        _mm256_and_si256(k < 4 ? v : _mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
    return q5 ? _mm256_or_si256(l, fifth_bits(tw_load256(p + R8_HEAD(K)), k)) : l;
}

/* What a block's lanes start from: Q4_0's levels carry +8 and Q5_0's +16,
 * so -8 or -16 times the activations' block sum (bneg is -128 times it);
 * VNNI's Q8_0 weights carry +128, so bneg itself (AVX2's Q8_0 kernel uses
 * the sign trick and starts from zero); Q5_1's unsigned levels nothing,
 * its offset being a separate term. */
TW_AVX2 TW_TILE __m256i lane_start(const tw_act *a, size_t i, const int K)
{
    if (K == R8_Q4 || K == R8_Q5)
        return _mm256_set1_epi32(a->bneg[i] / (K == R8_Q4 ? 16 : 8));
    return K == R8_Q8 ? _mm256_set1_epi32(a->bneg[i]) : _mm256_setzero_si256();
}

/* The eight rows' scales of the block at p. */
TW_AVX2 TW_TILE __m256 r8_scales(const uint8_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* Each activation's accumulator (one lane per row) into its output row. */
TW_AVX2 TW_TILE void r8_store(const __m256 *acc, float *y, size_t y_stride, const int TB)
{
#pragma GCC unroll 8
    for (int t = 0; t < TB; t++)
        _mm256_storeu_ps(y + (size_t)t * y_stride, acc[t]);
}

/* The eight rows' scales times activation t's scale of block i, then the
 * block's dots into t's accumulator; Q5_1's offsets times that scale, then
 * the activations' block sum into it too. */
TW_AVX2 TW_TILE __m256 r8_scale_into(const uint8_t *p, __m256 dw, __m256i isum, const tw_act *a,
                                    size_t i, __m256 acc, const int K)
{
    const __m256 da = _mm256_set1_ps(a->d[i]);
    acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(isum), acc);
    if (K == R8_Q51) {
        const __m256 m = r8_scales(p + 2 * TW_R8_ROWS);
        const float asum = (float)(a->bsums[2 * i] + a->bsums[2 * i + 1]);
        acc = _mm256_fmadd_ps(_mm256_mul_ps(m, da), _mm256_set1_ps(asum), acc);
    }
    return acc;
}

/* With pf, a block first fetches the block pf bytes on (the next
 * group's): 5 lines for a 32-column block (4-5 of them hold it, by its
 * alignment), every line of a K-type one (18 for Q4_K, 22 for Q5_K, 27 for
 * Q6_K). The 32-column kinds fetch into L2 (T1), not L1: the group's
 * weights are read once, a block after they arrive, and fetching them
 * into L1 decoded slower on a 2-core Zen 5 EPYC (qwen2-0.5b, two threads,
 * pairs alternated, average tok/s with T1 against T0: Q4_0 179 / 173,
 * T1 ahead in 10 of 10, Q8_0 96 / 95, 7 of 10; with the AVX2 kernels
 * Q8_0 104 / 98, 8 of 10, and Q4_0 171 / 164, 8 of 8). Q4_K's VNNI
 * kernel read the same either way (144 / 146, T1 ahead in 4 of 10) and
 * keeps T0. */
TW_AVX2 TW_TILE void r8_prefetch(const uint8_t *next, const int K)
{
    const int lines = K >= R8_Q4K ? (R8_BLOCK(K) + 63) / 64 : 5;
#pragma GCC unroll 27
    for (int l = 0; l < lines; l++) {
        if (K >= R8_Q4K)
            _mm_prefetch((const char *)(next + 64 * l), _MM_HINT_T0);
        else
            _mm_prefetch((const char *)(next + 64 * l), _MM_HINT_T1);
    }
}
#define R8_PREFETCH(p, pf, K)                                                                      \
    if (pf)                                                                                        \
    r8_prefetch((p) + (pf), K)

/* The K types' AVX2 kernels fetch the next group's block a share per
 * sub-block instead, lines [part * L / parts, (part + 1) * L / parts) of
 * its L: all 18-27 lines at once at the block's start outnumber the misses
 * a Zen 2 core keeps in flight, and its loads then wait on memory. */
TW_AVX2 TW_TILE void r8_prefetch_part(const uint8_t *next, int part, int parts, const int K)
{
    const int lines = (R8_BLOCK(K) + 63) / 64;
    for (int l = part * lines / parts; l < (part + 1) * lines / parts; l++)
        _mm_prefetch((const char *)(next + 64 * l), _MM_HINT_T0);
}

/* From this many activations in a chunk on, a group of rows consumes its
 * weights too slowly for the hardware prefetchers to run ahead of it, so
 * the first pass over a group fetches the next group's blocks. Measured
 * on a 2-core EPYC (Zen 4), two threads, 20-68 MB of weights (L3 or
 * DRAM): 6-16 activations take 12-35% less time with VNNI and 0-21% less
 * with AVX2; fewer activations lost up to 27% from memory there, so they
 * fetch only where tw_kernels_decode_prefetch() says (a newer EPYC's decode
 * gained up to 31% from it). */
#define TW_R8_PREFETCH_MIN_ACTS 6

static inline size_t r8_prefetch_min_acts(size_t bytes)
{
    return tw_decode_prefetch_for(bytes) ? 1 : TW_R8_PREFETCH_MIN_ACTS;
}

/* Size of the next group for `left` (>= 2) activations, at most cap: as
 * few groups as there can be, of near-equal size. Q6_K's stop at 4: its
 * unrolled sub-block loop spills registers with more. AVX2 Q4_K's stop at
 * 6, where its int16 and int32 sums still fit the registers (16
 * activations against 2048x8192, one thread: 2220-2300 us as 6 + 5 + 5
 * against 2510-2580 as 8 + 8; Q5_K, which widens every four steps, and
 * the VNNI kernels keep 8, which measured no better lower). */
static inline size_t r8_tile_group(size_t left, size_t cap)
{
    size_t groups = (left + cap - 1) / cap;
    return (left + groups - 1) / groups;
}
/* Each group of GR rows (eight, or two neighbouring groups of eight)
 * goes against every group of activations of a chunk (TW_R8_ACT_CHUNK; as
 * few groups of at most CAP as there can be, near-equal) while its weights
 * are in L1; TAIL takes the rows past the last whole group. From
 * r8_prefetch_min_acts() activations on, the first pass over a group
 * fetches the next group's blocks. */
#define R8_GROUP(GROUP, TB, K) GROUP(p, nb, acts + t, yt, y_stride, TB, pf, K)
#define ROWS_DRIVER(ATTR, name, GROUP, K, CAP, GR, TAIL)                                           \
    ATTR static void name(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,            \
                          const tw_act *acts, size_t n_act, float *y, size_t y_stride)             \
    {                                                                                              \
        const size_t nb = cols / R8_COLS(K), groups = rows / (GR);                                 \
        const size_t pf_min = r8_prefetch_min_acts(rows * row_bytes);                              \
        for (size_t t0 = 0; t0 < n_act; t0 += TW_R8_ACT_CHUNK) {                                   \
            const size_t t1 = n_act - t0 < TW_R8_ACT_CHUNK ? n_act : t0 + TW_R8_ACT_CHUNK;         \
            for (size_t g = 0; g < groups; g++) {                                                  \
                const uint8_t *p = w + g * (GR)*row_bytes;                                         \
                const size_t pf0 = t1 - t0 >= pf_min && g + 1 < groups                             \
                                       ? (GR)*row_bytes                                            \
                                       : 0;                                                        \
                float *yg = y + g * (GR);                                                          \
                for (size_t t = t0; t < t1;) {                                                     \
                    const size_t tb = t1 - t == 1 ? 1 : r8_tile_group(t1 - t, CAP);                \
                    const size_t pf = t == t0 ? pf0 : 0;                                           \
                    float *yt = yg + t * y_stride;                                                 \
                    switch (tb) {                                                                  \
                    case 8:                                                                        \
                        R8_GROUP(GROUP, 8, K);                                                     \
                        break;                                                                     \
                    case 7:                                                                        \
                        R8_GROUP(GROUP, 7, K);                                                     \
                        break;                                                                     \
                    case 6:                                                                        \
                        R8_GROUP(GROUP, 6, K);                                                     \
                        break;                                                                     \
                    case 5:                                                                        \
                        R8_GROUP(GROUP, 5, K);                                                     \
                        break;                                                                     \
                    case 4:                                                                        \
                        R8_GROUP(GROUP, 4, K);                                                     \
                        break;                                                                     \
                    case 3:                                                                        \
                        R8_GROUP(GROUP, 3, K);                                                     \
                        break;                                                                     \
                    case 2:                                                                        \
                        R8_GROUP(GROUP, 2, K);                                                     \
                        break;                                                                     \
                    default:                                                                       \
                        R8_GROUP(GROUP, 1, K);                                                     \
                        break;                                                                     \
                    }                                                                              \
                    t += tb;                                                                       \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        const size_t done = groups * (GR);                                                         \
        TAIL;                                                                                      \
    }
/* What a driver leaves: the rows past the last whole group of eight, in
 * scalar arithmetic; or, for the 16-row drivers, the last group of eight
 * and those rows through an 8-row driver. */
#define SCALAR_TAIL(type)                                                                          \
    tw_rows_r8_tail(type, w, row_bytes, rows, done, cols, acts, n_act, y, y_stride)
#define R8_REST(r8)                                                                                \
    if (done < rows)                                                                               \
    r8(w + done * row_bytes, row_bytes, rows - done, cols, acts, n_act, y + done, y_stride)
#define R8_DRIVER(ATTR, name, GROUP, K, type, CAP)                                                 \
    ROWS_DRIVER(ATTR, name, GROUP, K, CAP, TW_R8_ROWS, SCALAR_TAIL(type))

#endif

#endif
