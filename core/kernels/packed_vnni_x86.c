/* The packed types' batch kernels for x86 CPUs with AVX512-VNNI: vpdpbusd
 * multiplies a step's unsigned levels by four signed activation values and
 * adds the products into int32 lanes in one instruction. In a batch the
 * 32-column kinds (Q8_0, Q4_0, Q5_0, Q5_1) take two neighbouring groups of
 * eight rows at a time in the sixteen lanes of a zmm, the K types one group
 * in a ymm or two in a zmm. One activation, and a few of the K types, go to
 * the kernels of packed_vnni_one_x86.c (the drivers at the end pick).
 * Every lane repeats tw_r8_dot's operations for its row, so the bits are
 * those of every other ISA (packed_x86.c says how). */
#include "kernels/packed_x86.h"

#ifdef TW_HAVE_X86

/* VNNI: unsigned weights as vpdpbusd's first operand and the activations
 * as the signed second one. Q8_0's weights are biased to unsigned (q + 128,
 * the top bit flipped), Q4_0's and Q5_0's levels are unsigned already; lane_start
 * takes the bias back. A vpdpbusd waits for the one before it on the same
 * accumulator, so the eight steps of a block are spread over NS
 * accumulators per activation (at least 8 chains in flight) and added up
 * after, which integer sums allow exactly. */
TW_AVX512 TW_TILE void r8_group_vnni(const uint8_t *p, size_t nb, const tw_act *acts, float *y,
                                     size_t y_stride, const int TB, size_t pf, const int K)
{
    const int NS = TB >= 5 ? 2 : (8 + TB - 1) / TB;
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    __m256 acc[8] = {0};
    for (size_t i = 0; i < nb; i++, p += R8_BLOCK(K)) {
        R8_PREFETCH(p, pf, K);
        const __m256 dw = r8_scales(p);
        __m256i isum[8][8];
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++) {
            isum[t][0] = lane_start(&acts[t], i, K);
#pragma GCC unroll 8
            for (int c = 1; c < NS; c++)
                isum[t][c] = _mm256_setzero_si256();
        }
#pragma GCC unroll 8
        for (int k = 0; k < R8_STEPS; k++) {
            const __m256i qu =
                K != R8_Q8 ? nib_step(p, k, K)
                           : _mm256_xor_si256(tw_load256(p + R8_HEAD(K) + 32 * k), flip);
#pragma GCC unroll 8
            for (int t = 0; t < TB; t++)
                isum[t][k % NS] = _mm256_dpbusd_epi32(isum[t][k % NS], qu, act4(&acts[t], i, k));
        }
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++)
            acc[t] = r8_scale_into(p, dw, chains_sum(isum[t], NS), &acts[t], i, acc[t], K);
    }
    r8_store(acc, y, y_stride, TB);
}

/* The same with zmm: two neighbouring groups (16 rows, one int32 lane per
 * row, group a's rows in the low half) against the same activations, so a
 * broadcast of four activation values feeds 64 products instead of 32 and
 * a block's conversion and scaling serve 16 rows. Every lane repeats its
 * row's operations of r8_group_vnni, so the bits are the same. */
TW_AVX512 TW_TILE __m512i pair_load(const uint8_t *a, const uint8_t *b)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(tw_load256(a)), tw_load256(b), 1);
}

TW_AVX512 TW_TILE __m512 pair_scales(const uint8_t *a, const uint8_t *b)
{
    const __m128i ha = _mm_loadu_si128((const __m128i *)(const void *)a);
    const __m128i hb = _mm_loadu_si128((const __m128i *)(const void *)b);
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(ha), hb, 1));
}

/* nib_step's levels (Q8_0: the biased levels) of both groups. */
TW_AVX512 TW_TILE __m512i pair_step(const uint8_t *a, const uint8_t *b, int k, const int K)
{
    if (K == R8_Q8)
        return _mm512_xor_si512(pair_load(a + R8_HEAD(K) + 32 * k, b + R8_HEAD(K) + 32 * k),
                                _mm512_set1_epi8((char)0x80));
    const bool q5 = K == R8_Q5 || K == R8_Q51;
    const size_t at = R8_HEAD(K) + (q5 ? 32 : 0) + 32 * (k % 4);
    const __m512i v = pair_load(a + at, b + at);
    const __m512i l = _mm512_and_si512(k < 4 ? v : _mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F));
    if (!q5)
        return l;
    const __m512i h = pair_load(a + R8_HEAD(K), b + R8_HEAD(K));
    const __m512i at4 = k < 4 ? _mm512_slli_epi32(h, 4 - k) : _mm512_srli_epi32(h, k - 4);
    return _mm512_or_si512(l, _mm512_and_si512(at4, _mm512_set1_epi8(0x10)));
}

/* Four bytes at p (four activation values, or two int16 sums) in every
 * lane. */
TW_AVX512 TW_TILE __m512i bcast4(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

TW_AVX512 TW_TILE __m512i chains_sum_z(const __m512i *chain, int n)
{
    __m512i s = chain[0];
#pragma GCC unroll 8
    for (int c = 1; c < n; c++)
        s = _mm512_add_epi32(s, chain[c]);
    return s;
}

/* With pf, a block of both groups first fetches the block pf bytes on. */
TW_AVX512 TW_TILE void pair_prefetch(const uint8_t *a, const uint8_t *b, size_t pf, const int K)
{
    if (pf) {
        r8_prefetch(a + pf, K);
        r8_prefetch(b + pf, K);
    }
}

/* Each activation's accumulator (one lane per row of both groups) into
 * its output row. */
TW_AVX512 TW_TILE void r16_store(const __m512 *acc, float *y, size_t y_stride, const int TB)
{
#pragma GCC unroll 8
    for (int t = 0; t < TB; t++)
        _mm512_storeu_ps(y + (size_t)t * y_stride, acc[t]);
}

TW_AVX512 TW_TILE void r16_group_vnni(const uint8_t *p, size_t nb, const tw_act *acts, float *y,
                                      size_t y_stride, const int TB, size_t pf, const int K,
                                      size_t group_bytes)
{
    const int NS = TB >= 5 ? 2 : (8 + TB - 1) / TB;
    __m512 acc[8] = {0};
    for (size_t i = 0; i < nb; i++, p += R8_BLOCK(K)) {
        const uint8_t *b = p + group_bytes;
        pair_prefetch(p, b, pf, K);
        const __m512 dw = pair_scales(p, b);
        __m512i isum[8][8];
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++) {
            const int32_t bneg = acts[t].bneg[i];
            isum[t][0] = _mm512_set1_epi32(K == R8_Q4   ? bneg / 16
                                           : K == R8_Q5 ? bneg / 8
                                           : K == R8_Q8 ? bneg
                                                        : 0);
#pragma GCC unroll 8
            for (int c = 1; c < NS; c++)
                isum[t][c] = _mm512_setzero_si512();
        }
#pragma GCC unroll 8
        for (int k = 0; k < R8_STEPS; k++) {
            const __m512i qu = pair_step(p, b, k, K);
#pragma GCC unroll 8
            for (int t = 0; t < TB; t++) {
                isum[t][k % NS] = _mm512_dpbusd_epi32(isum[t][k % NS], qu,
                                                      bcast4(acts[t].qs + i * TW_QK8_0 + 4 * k));
            }
        }
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++) {
            const __m512i s = chains_sum_z(isum[t], NS);
            const __m512 da = _mm512_set1_ps(acts[t].d[i]);
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(s), acc[t]);
            if (K == R8_Q51) {
                const __m512 m = pair_scales(p + 2 * TW_R8_ROWS, b + 2 * TW_R8_ROWS);
                const float asum = (float)(acts[t].bsums[2 * i] + acts[t].bsums[2 * i + 1]);
                acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(m, da), _mm512_set1_ps(asum), acc[t]);
            }
        }
    }
    r16_store(acc, y, y_stride, TB);
}

/* Q4_K_R8 / Q5_K_R8 with VNNI: a sub-block's dots in int32 lanes straight
 * from vpdpbusd, over NS chains per activation as in r8_group_vnni, times
 * the scales; the mins' term by vpdpwssd on the 16-value sums. */
TW_AVX512 TW_TILE void r8k_group_vnni(const uint8_t *p, size_t nb, const tw_act *acts, float *y,
                                      size_t y_stride, const int TB, size_t pf, const int K)
{
    const int NS = TB >= 5 ? 2 : TB == 1 ? 4 : (8 + TB - 1) / TB;
    __m256 acc[8] = {0};
    for (size_t i = 0; i < nb; i++, p += R8_BLOCK(K)) {
        R8_PREFETCH(p, pf, K);
        __m256i s1[8], mp[8];
        uint8_t scb[64];
        r8k_block_scales(p, scb, mp);
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++)
            s1[t] = _mm256_setzero_si256();
        for (int j = 0; j < 8; j++) {
            const __m256i sc = r8k_lanes(scb, j, false), h5 = k5_bits(p, j, K);
            __m256i isum[8][8];
#pragma GCC unroll 8
            for (int t = 0; t < TB; t++)
#pragma GCC unroll 8
                for (int c = 0; c < NS; c++)
                    isum[t][c] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                const __m256i q = nib_k(p, j / 2, j % 2, k, h5, K);
#pragma GCC unroll 8
                for (int t = 0; t < TB; t++)
                    isum[t][k % NS] = _mm256_dpbusd_epi32(isum[t][k % NS], q,
                                                          act4k(&acts[t], i, 32 * j + 4 * k));
            }
#pragma GCC unroll 8
            for (int t = 0; t < TB; t++)
                s1[t] = _mm256_add_epi32(s1[t], _mm256_mullo_epi32(chains_sum(isum[t], NS), sc));
        }
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++) {
            __m256i s2 = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++)
                s2 = _mm256_dpwssd_epi32(s2, mp[j], bsum_pair(&acts[t], i, j));
            acc[t] = r8k_scale_into(p, s1[t], s2, acts[t].d[i], acc[t]);
        }
    }
    r8_store(acc, y, y_stride, TB);
}

/* Q6_K_R8 with VNNI: a sub-block's four steps by vpdpbusd over NS chains
 * per activation, times the scale. A lone activation (decode) takes one
 * chain, as four activations do: the loads, unpacking and scaling between
 * two of its vpdpbusd hide the wait, and three adds a sub-block are saved.
 * Against four chains, one thread, Zen 5, 896 x 4864 and 2048 x 2048 in
 * cache took 99 against 125 us and 83 against 115 us; Q4_K's
 * (r8k_group_vnni and r16k_group_vnni) went from eight chains to four (71
 * against 75 us, 59 against 62; two were slower on 896 x 4864), and
 * decoding a llama-1b-shaped Q4_K_M file on 2 threads read 110.5 against
 * 97.8 tok/s (four runs of each alternated, all four faster). Bits are
 * unchanged: the chains are int32 sums. */
TW_AVX512 TW_TILE void r8q6_group_vnni(const uint8_t *p, size_t nb, const tw_act *acts, float *y,
                                       size_t y_stride, const int TB, size_t pf, const int K)
{
    const int NS = TB == 2 || TB == 3 ? 2 : 1;
    __m256 acc[8] = {0};
    for (size_t i = 0; i < nb; i++, p += TW_R8Q6_BLOCK) {
        R8_PREFETCH(p, pf, K);
        __m256i s[8];
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++)
            s[t] = _mm256_setzero_si256();
#pragma GCC unroll 16
        for (int sb = 0; sb < 16; sb++) {
            const int h = sb / 8, g = sb % 8 / 2, k0 = 4 * (sb % 2);
            const __m256i sc = q6_sub_scale(p, sb);
            const int c0 = 128 * h + 32 * g + 4 * k0;
            __m256i isum[8][4];
#pragma GCC unroll 8
            for (int t = 0; t < TB; t++)
#pragma GCC unroll 4
                for (int c = 0; c < NS; c++)
                    isum[t][c] = _mm256_setzero_si256();
#pragma GCC unroll 4
            for (int kk = 0; kk < 4; kk++) {
                const __m256i q = q6_step(p, h, k0 + kk, g);
#pragma GCC unroll 8
                for (int t = 0; t < TB; t++)
                    isum[t][kk % NS] =
                        _mm256_dpbusd_epi32(isum[t][kk % NS], q, act4k(&acts[t], i, c0 + 4 * kk));
            }
#pragma GCC unroll 8
            for (int t = 0; t < TB; t++)
                s[t] = _mm256_add_epi32(s[t], _mm256_mullo_epi32(chains_sum(isum[t], NS), sc));
        }
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++) {
            __m256i s2 = _mm256_setzero_si256();
            for (int pair = 0; pair < 8; pair++)
                s2 = _mm256_dpwssd_epi32(s2, q6_scale_pair(p, pair), bsum_pair(&acts[t], i, pair));
            acc[t] = q6_scale_into(p, s[t], s2, acts[t].d[i], acc[t]);
        }
    }
    r8_store(acc, y, y_stride, TB);
}

/* Two ymm halves, group a's in the low one. */
TW_AVX512 TW_TILE __m512i pair_of(__m256i a, __m256i b)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}

/* nib_k of both groups. */
TW_AVX512 TW_TILE __m512i pair_nib_k(const uint8_t *a, const uint8_t *b, int g, int h, int k,
                                     __m512i h5, const int K)
{
    const size_t at = (K == R8_Q5K ? TW_R8K5_G(g) + 64 : TW_R8K_QS + 256 * g) + 32 * k;
    const __m512i v = pair_load(a + at, b + at);
    const __m512i l = _mm512_and_si512(h ? _mm512_srli_epi16(v, 4) : v, _mm512_set1_epi8(0x0F));
    if (K != R8_Q5K)
        return l;
    const __m512i at4 = k < 4 ? _mm512_slli_epi32(h5, 4 - k) : _mm512_srli_epi32(h5, k - 4);
    return _mm512_or_si512(l, _mm512_and_si512(at4, _mm512_set1_epi8(0x10)));
}

/* r8k_scale_into for both groups. */
TW_AVX512 TW_TILE __m512 pair_k_scale_into(const uint8_t *a, const uint8_t *b, __m512i s1,
                                           __m512i s2, float da, __m512 acc)
{
    const __m512 d = pair_scales(a, b);
    const __m512 dmin = pair_scales(a + TW_R8K_DMIN, b + TW_R8K_DMIN);
    const __m512 u = _mm512_fmsub_ps(d, _mm512_cvtepi32_ps(s1),
                                     _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(s2)));
    return _mm512_fmadd_ps(_mm512_set1_ps(da), u, acc);
}

/* r8k_group_vnni over two neighbouring groups. */
TW_AVX512 TW_TILE void r16k_group_vnni(const uint8_t *p, size_t nb, const tw_act *acts, float *y,
                                       size_t y_stride, const int TB, size_t pf, const int K,
                                       size_t group_bytes)
{
    const int NS = TB >= 4 ? 2 : TB == 1 ? 4 : (8 + TB - 1) / TB;
    __m512 acc[8] = {0};
    for (size_t i = 0; i < nb; i++, p += R8_BLOCK(K)) {
        const uint8_t *b = p + group_bytes;
        pair_prefetch(p, b, pf, K);
        __m256i mpa[8], mpb[8];
        uint8_t sca[64], scb[64];
        r8k_block_scales(p, sca, mpa);
        r8k_block_scales(b, scb, mpb);
        __m512i s1[8], s2[8];
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++)
            s1[t] = s2[t] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            const __m512i sc = pair_of(r8k_lanes(sca, j, false), r8k_lanes(scb, j, false));
            const __m512i h5 = pair_of(k5_bits(p, j, K), k5_bits(b, j, K));
            const __m512i mp = pair_of(mpa[j], mpb[j]);
            __m512i isum[8][8];
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++)
#pragma GCC unroll 8
                for (int c = 0; c < NS; c++)
                    isum[t][c] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                const __m512i q = pair_nib_k(p, b, j / 2, j % 2, k, h5, K);
#pragma GCC unroll 4
                for (int t = 0; t < TB; t++)
                    isum[t][k % NS] = _mm512_dpbusd_epi32(
                        isum[t][k % NS], q, bcast4(acts[t].qs + i * TW_QK_K + 32 * j + 4 * k));
            }
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++) {
                const __m512i sum = chains_sum_z(isum[t], NS);
                s1[t] = _mm512_add_epi32(s1[t], _mm512_mullo_epi32(sum, sc));
                s2[t] = _mm512_dpwssd_epi32(s2[t], mp,
                                            bcast4(acts[t].bsums + i * (TW_QK_K / 16) + 2 * j));
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++)
            acc[t] = pair_k_scale_into(p, b, s1[t], s2[t], acts[t].d[i], acc[t]);
    }
    r16_store(acc, y, y_stride, TB);
}

/* q6_step of both groups. */
TW_AVX512 TW_TILE __m512i pair_q6_step(const uint8_t *a, const uint8_t *b, int h, int k, int g)
{
    const size_t at = TW_R8Q6_Q + 768 * h + 96 * k;
    const __m512i l = pair_load(a + at + 32 * (g % 2), b + at + 32 * (g % 2));
    const __m512i qh = pair_load(a + at + 64, b + at + 64);
    const __m512i nib =
        _mm512_and_si512(g < 2 ? l : _mm512_srli_epi16(l, 4), _mm512_set1_epi8(0x0F));
    const __m512i hi = g == 0   ? _mm512_slli_epi16(qh, 4)
                       : g == 1 ? _mm512_slli_epi16(qh, 2)
                       : g == 2 ? qh
                                : _mm512_srli_epi16(qh, 2);
    return _mm512_or_si512(nib, _mm512_and_si512(hi, _mm512_set1_epi8(0x30)));
}

/* r8q6_group_vnni over two neighbouring groups. */
TW_AVX512 TW_TILE void r16q6_group_vnni(const uint8_t *p, size_t nb, const tw_act *acts, float *y,
                                        size_t y_stride, const int TB, size_t pf, const int K,
                                        size_t group_bytes)
{
    const int NS = TB == 2 || TB == 3 ? 2 : 1;
    __m512 acc[8] = {0};
    for (size_t i = 0; i < nb; i++, p += TW_R8Q6_BLOCK) {
        const uint8_t *b = p + group_bytes;
        pair_prefetch(p, b, pf, K);
        __m512i s[8];
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++)
            s[t] = _mm512_setzero_si512();
#pragma GCC unroll 16
        for (int sb = 0; sb < 16; sb++) {
            const int h = sb / 8, g = sb % 8 / 2, k0 = 4 * (sb % 2);
            const __m512i sc = pair_of(q6_sub_scale(p, sb), q6_sub_scale(b, sb));
            const int c0 = 128 * h + 32 * g + 4 * k0;
            __m512i isum[8][4];
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++)
#pragma GCC unroll 4
                for (int c = 0; c < NS; c++)
                    isum[t][c] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int kk = 0; kk < 4; kk++) {
                const __m512i q = pair_q6_step(p, b, h, k0 + kk, g);
#pragma GCC unroll 4
                for (int t = 0; t < TB; t++)
                    isum[t][kk % NS] = _mm512_dpbusd_epi32(
                        isum[t][kk % NS], q, bcast4(acts[t].qs + i * TW_QK_K + c0 + 4 * kk));
            }
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++) {
                const __m512i sum = chains_sum_z(isum[t], NS);
                s[t] = _mm512_add_epi32(s[t], _mm512_mullo_epi32(sum, sc));
            }
        }
        const __m512 d = pair_scales(p, b);
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++) {
            __m512i s2 = _mm512_setzero_si512();
            for (int pair = 0; pair < 8; pair++)
                s2 = _mm512_dpwssd_epi32(
                    s2, pair_of(q6_scale_pair(p, pair), q6_scale_pair(b, pair)),
                    bcast4(acts[t].bsums + i * (TW_QK_K / 16) + 2 * pair));
            const __m512i v = _mm512_sub_epi32(s[t], _mm512_slli_epi32(s2, 5));
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(acts[t].d[i])),
                                     _mm512_cvtepi32_ps(v), acc[t]);
        }
    }
    r16_store(acc, y, y_stride, TB);
}

/* r16_group_vnni reaches its second group a group's bytes on. */
#define R16_VNNI(p, nb, acts, y, y_stride, TB, pf, K)                                              \
    r16_group_vnni(p, nb, acts, y, y_stride, TB, pf, K, TW_R8_ROWS * row_bytes)
#define R16K_VNNI(p, nb, acts, y, y_stride, TB, pf, K)                                             \
    r16k_group_vnni(p, nb, acts, y, y_stride, TB, pf, K, TW_R8_ROWS * row_bytes)
#define R16Q6_VNNI(p, nb, acts, y, y_stride, TB, pf, K)                                            \
    r16q6_group_vnni(p, nb, acts, y, y_stride, TB, pf, K, TW_R8_ROWS * row_bytes)
/* A batch takes two groups at a time; the K types' 16-row kernels at most
 * four activations at a time, where their sums, products and accumulators
 * fit the 32 registers. A single activation streams its rows one group at
 * a time (r8_one_vnni for Q8_0, Q4_0 and Q5_0, r8k_one_vnni for Q4_K, the
 * 8-row kernel for the rest):
 * two groups' blocks read side by side make two streams per thread, and
 * decode kept a smaller share of a plain read of the same matrices (Zen 5,
 * 2 threads, tw-bench-stream: Q4_0 74-76% against 82-87%, Q6_K 74-75%
 * against 82-91%). */
#define R16_DRIVER(name, GROUP, K, CAP, r8, one)                                                   \
    ROWS_DRIVER(TW_AVX512, name##_pairs, GROUP, K, CAP, 2 * TW_R8_ROWS, R8_REST(r8))               \
    TW_AVX512 static void name(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,       \
                               const tw_act *acts, size_t n_act, float *y, size_t y_stride)        \
    {                                                                                              \
        (n_act == 1 ? one : name##_pairs)(w, row_bytes, rows, cols, acts, n_act, y, y_stride);    \
    }

// clang-format off
R8_DRIVER(TW_AVX512, rows_q8_vnni, r8_group_vnni, R8_Q8, TW_TYPE_Q8_0_R8, 8)
R8_DRIVER(TW_AVX512, rows_q4_vnni, r8_group_vnni, R8_Q4, TW_TYPE_Q4_0_R8, 8)
R8_DRIVER(TW_AVX512, rows_q5_vnni, r8_group_vnni, R8_Q5, TW_TYPE_Q5_0_R8, 8)
R8_DRIVER(TW_AVX512, rows_q51_vnni, r8_group_vnni, R8_Q51, TW_TYPE_Q5_1_R8, 8)
R8_DRIVER(TW_AVX512, rows_q4k_vnni, r8k_group_vnni, R8_Q4K, TW_TYPE_Q4_K_R8, 8)
R8_DRIVER(TW_AVX512, rows_q5k_vnni, r8k_group_vnni, R8_Q5K, TW_TYPE_Q5_K_R8, 8)
R8_DRIVER(TW_AVX512, rows_q6k_vnni, r8q6_group_vnni, R8_Q6K, TW_TYPE_Q6_K_R8, 4)
R16_DRIVER(rows_q8_zmm, R16_VNNI, R8_Q8, 8, rows_q8_vnni, tw_rows_q8_one_avx512)
R16_DRIVER(rows_q4_zmm, R16_VNNI, R8_Q4, 8, rows_q4_vnni, tw_rows_q4_one_avx512)
R16_DRIVER(rows_q5_zmm, R16_VNNI, R8_Q5, 8, rows_q5_vnni, tw_rows_q5_one_avx512)
R16_DRIVER(rows_q51_zmm, R16_VNNI, R8_Q51, 8, rows_q51_vnni, rows_q51_vnni)
/* Q4_K and Q6_K: one activation through the `one` kernels, up to
 * FEW_ACTS through the `few` ones a group of eight rows at a time (four
 * activations to a pass), more through the 16-row kernels. Two threads,
 * Zen 5, 8192 x 2048 matrices from memory (sixteen Q4_K, twelve Q6_K),
 * time against one activation, `few` (16-row kernel):
 *
 *   activations   2             3             4             8             16
 *   Q4_K          1.16x (1.84)  1.42x (1.81)  1.86x (2.05)  3.49x (4.19)  7.91x (6.42)
 *   Q6_K          1.19x (2.21)  1.41x (2.75)  1.83x (2.77)  3.29x (4.24)
 *
 * In cache the Q6_K `few` kernel stays ahead up to eight, and the Q4_K
 * one from three on trails the 16-row kernel (eight: 4.91x against 4.14),
 * but a decode step's weights come from memory. */
#define FEW_ACTS 8
#define FEW_DRIVER(name, pairs, one, few)                                                          \
    TW_AVX512 static void name(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,       \
                               const tw_act *acts, size_t n_act, float *y, size_t y_stride)        \
    {                                                                                              \
        (n_act == 1 ? one : n_act <= FEW_ACTS ? few : pairs)(w, row_bytes, rows, cols, acts,      \
                                                             n_act, y, y_stride);                 \
    }
ROWS_DRIVER(TW_AVX512, rows_q4k_zmm_pairs, R16K_VNNI, R8_Q4K, 4, 2 * TW_R8_ROWS,
            R8_REST(rows_q4k_vnni))
FEW_DRIVER(rows_q4k_zmm, rows_q4k_zmm_pairs, tw_rows_q4k_one_avx512, tw_rows_q4k_few_avx512)
R16_DRIVER(rows_q5k_zmm, R16K_VNNI, R8_Q5K, 4, rows_q5k_vnni, rows_q5k_vnni)
ROWS_DRIVER(TW_AVX512, rows_q6k_zmm_pairs, R16Q6_VNNI, R8_Q6K, 4, 2 * TW_R8_ROWS,
            R8_REST(rows_q6k_vnni))
FEW_DRIVER(rows_q6k_zmm, rows_q6k_zmm_pairs, tw_rows_q6k_one_avx512, tw_rows_q6k_few_avx512)
// clang-format on

void tw_isa_fill_packed_avx512(tw_isa_table *t)
{
    /* the table starts as AVX2's, whose quad panels no VNNI kernel reads */
    t->quad_types = 0;
    t->rows[tw_ktype_index(TW_TYPE_Q8_0_R8)] = rows_q8_zmm;
    t->rows[tw_ktype_index(TW_TYPE_Q4_0_R8)] = rows_q4_zmm;
    t->rows[tw_ktype_index(TW_TYPE_Q5_0_R8)] = rows_q5_zmm;
    t->rows[tw_ktype_index(TW_TYPE_Q5_1_R8)] = rows_q51_zmm;
    t->rows[tw_ktype_index(TW_TYPE_Q4_K_R8)] = rows_q4k_zmm;
    t->rows[tw_ktype_index(TW_TYPE_Q5_K_R8)] = rows_q5k_zmm;
    t->rows[tw_ktype_index(TW_TYPE_Q6_K_R8)] = rows_q6k_zmm;
}

#else

void tw_isa_fill_packed_avx512(tw_isa_table *t)
{
    (void)t;
}

#endif
