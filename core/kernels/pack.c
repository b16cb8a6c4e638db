/* Packing of weight rows for the integer kernels (Q8_0, Q4_0, Q5_0, Q5_1,
 * Q4_K, Q5_K and Q6_K to their _R8 forms, see kernels/blocks.h) and the
 * scalar arithmetic every ISA's packed kernels reproduce. */
#include <math.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/kernels_internal.h"
#include "tw/kernels.h"

tw_type tw_pack_type(tw_type type)
{
    switch (type) {
    case TW_TYPE_Q8_0:
        return TW_TYPE_Q8_0_R8;
    case TW_TYPE_Q4_0:
        return TW_TYPE_Q4_0_R8;
    case TW_TYPE_Q5_0:
        return TW_TYPE_Q5_0_R8;
    case TW_TYPE_Q5_1:
        return TW_TYPE_Q5_1_R8;
    case TW_TYPE_Q4_K:
        return TW_TYPE_Q4_K_R8;
    case TW_TYPE_Q5_K:
        return TW_TYPE_Q5_K_R8;
    case TW_TYPE_Q6_K:
        return TW_TYPE_Q6_K_R8;
    default:
        return type;
    }
}

static uint32_t load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The fifth bits of 32 columns (bit c of qh for column c) in the packed
 * kernels' order, bit 8j + k for column 4k + j, into run[0..3]. */
static void put_qh_reordered(uint32_t qh, uint8_t *run)
{
    uint32_t t = 0;
    for (unsigned c = 0; c < 32; c++)
        t |= (qh >> c & 1u) << (c % 4 * 8 + c / 4);
    for (unsigned b = 0; b < 4; b++)
        run[b] = (uint8_t)(t >> (8 * b));
}

/* One block of a Q4_K_R8 (q5 false) or Q5_K_R8 group from the eight rows'
 * blocks src[r]. */
static void pack_k45_block(const uint8_t *const *src, uint8_t *o, bool q5)
{
    const size_t qs = q5 ? 48 : 16;
    memset(o + TW_R8K_SC_HI, 0, TW_R8K_QS - TW_R8K_SC_HI);
    for (size_t r = 0; r < TW_R8_ROWS; r++) {
        const uint8_t *b = src[r];
        memcpy(o + 2 * r, b, 2);
        memcpy(o + TW_R8K_DMIN + 2 * r, b + 2, 2);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            tw_k_scale_min(j, b + 4, &sc, &m);
            o[TW_R8K_SC_LO + 8 * j + r] = (uint8_t)((sc & 15) | (m & 15) << 4);
            const unsigned top = (unsigned)(sc >> 4) | (unsigned)(m >> 4) << 2;
            o[TW_R8K_SC_HI + 4 * j + r / 2] |= (uint8_t)(top << (4 * (r % 2)));
        }
        for (size_t g = 0; g < 4; g++)
            for (size_t k = 0; k < 8; k++)
                memcpy(o + (q5 ? TW_R8K5_G(g) + 64 : TW_R8K_QS + 256 * g) + 32 * k + 4 * r,
                       b + qs + 32 * g + 4 * k, 4);
        for (unsigned j = 0; q5 && j < 8; j++) {
            uint32_t bits = 0; /* sub-block j's fifth bits: bit j of qh[c] */
            for (unsigned c = 0; c < 32; c++)
                bits |= (uint32_t)(b[16 + c] >> j & 1u) << c;
            put_qh_reordered(bits, o + TW_R8K5_G(j / 2) + 32 * (j % 2) + 4 * r);
        }
    }
}

/* One block of a Q6_K_R8 group from the eight rows' blocks src[r]. */
static void pack_q6_k_block(const uint8_t *const *src, uint8_t *o)
{
    for (size_t r = 0; r < TW_R8_ROWS; r++) {
        const uint8_t *b = src[r]; /* ql[128], qh[64], scales[16], d */
        memcpy(o + 2 * r, b + 208, 2);
        for (size_t p = 0; p < 8; p++)
            memcpy(o + TW_R8Q6_SC + 16 * p + 2 * r, b + 192 + 2 * p, 2);
        for (size_t h = 0; h < 2; h++)
            for (size_t k = 0; k < 8; k++) {
                uint8_t *run = o + TW_R8Q6_Q + 768 * h + 96 * k + 4 * r;
                memcpy(run, b + 64 * h + 4 * k, 4);
                memcpy(run + 32, b + 64 * h + 32 + 4 * k, 4);
                memcpy(run + 64, b + 128 + 32 * h + 4 * k, 4);
            }
    }
}

/* One block of a Q8_0 / Q4_0 / Q5_0 / Q5_1 group (bb bytes per row's
 * block, hb of them its f16 scale and Q5_1's offset) from the eight rows'
 * blocks src[r]. */
static void pack_q32_block(tw_type type, size_t bb, const uint8_t *const *src, uint8_t *o)
{
    const size_t hb = type == TW_TYPE_Q5_1 ? 4 : 2, runs = (bb - hb) / 4;
    for (size_t r = 0; r < TW_R8_ROWS; r++) {
        const uint8_t *b = src[r];
        memcpy(o + 2 * r, b, 2);
        if (hb == 4)
            memcpy(o + 2 * TW_R8_ROWS + 2 * r, b + 2, 2);
        for (size_t k = 0; k < runs; k++)
            memcpy(o + hb * TW_R8_ROWS + 4 * (k * TW_R8_ROWS + r), b + hb + 4 * k, 4);
        if (type == TW_TYPE_Q5_0 || type == TW_TYPE_Q5_1)
            put_qh_reordered(load_u32(b + hb), o + hb * TW_R8_ROWS + 4 * r);
    }
}

bool tw_pack_rows(tw_type type, const void *src, size_t rows, size_t cols, void *dst)
{
    size_t row_bytes = tw_type_row_bytes(type, cols);
    if (tw_pack_type(type) == type || row_bytes == 0 || !src || !dst)
        return false;
    const uint8_t *in = src;
    uint8_t *out = dst;
    const size_t bb = tw_type_block_bytes(type), nb = cols / tw_type_block_elems(type);
    const size_t groups = rows / TW_R8_ROWS;
    for (size_t g = 0; g < groups; g++)
        for (size_t i = 0; i < nb; i++) {
            const uint8_t *blocks[TW_R8_ROWS];
            for (size_t r = 0; r < TW_R8_ROWS; r++)
                blocks[r] = in + (g * TW_R8_ROWS + r) * row_bytes + i * bb;
            uint8_t *o = out + g * TW_R8_ROWS * row_bytes + i * TW_R8_ROWS * bb;
            if (type == TW_TYPE_Q4_K || type == TW_TYPE_Q5_K)
                pack_k45_block(blocks, o, type == TW_TYPE_Q5_K);
            else if (type == TW_TYPE_Q6_K)
                pack_q6_k_block(blocks, o);
            else
                pack_q32_block(type, bb, blocks, o);
        }
    size_t packed = groups * TW_R8_ROWS;
    memcpy(out + packed * row_bytes, in + packed * row_bytes, (rows - packed) * row_bytes);
    return true;
}

/* Weight level of column c (0..31) of a block of `type` whose 4-byte runs
 * start at run[0], run[1], ...: Q8_0's int8 values in column order; Q4_0's
 * run k holding columns 4k..4k+3 in its low nibbles and 16 + 4k.. in its
 * high ones, less 8; Q5_0's and Q5_1's the same after their qh (run 0,
 * with its bits reordered in a packed group), with the fifth bit, less 16
 * for Q5_0. */
static int level(tw_type type, bool packed, const uint8_t *const *run, size_t c)
{
    if (type == TW_TYPE_Q8_0_R8)
        return (int8_t)run[c / 4][c % 4];
    const bool q5 = type == TW_TYPE_Q5_0_R8 || type == TW_TYPE_Q5_1_R8;
    const uint8_t b = run[q5 + c % 16 / 4][c % 4];
    const int nib = c < 16 ? b & 15 : b >> 4;
    if (!q5)
        return nib - 8;
    const uint32_t qh = load_u32(run[0]);
    const unsigned bit = packed ? c % 4 * 8 + c / 4 : c;
    return (nib | (int)(qh >> bit & 1u) << 4) - (type == TW_TYPE_Q5_0_R8 ? 16 : 0);
}

/* Fifth bit of column l of sub-block j of row `lane`'s Q5_K block, packed
 * (blk: the group's block) or plain (blk: the row's). */
static unsigned k5_bit(const uint8_t *blk, bool packed, size_t lane, size_t j, size_t l)
{
    if (!packed)
        return blk[16 + l] >> j & 1u;
    return load_u32(blk + TW_R8K5_G(j / 2) + 32 * (j % 2) + 4 * lane) >> (l % 4 * 8 + l / 4) &
           1u;
}

/* Row r's block i of a Q4_K_R8 / Q5_K_R8 range (a plain Q4_K / Q5_K block
 * past the last group): S1 = the sub-blocks' dots times their scales,
 * S2 = the mins times the activation sums they multiply, both exact, then
 * acc + da * (d * S1 - dmin * S2) in three roundings. */
static float r8k_block(bool q5, const uint8_t *w, size_t row_bytes, size_t rows, size_t r,
                       size_t i, const int8_t *a, const int16_t *bsums, float da, float acc)
{
    const size_t packed = rows / TW_R8_ROWS * TW_R8_ROWS, lane = r % TW_R8_ROWS;
    const size_t qs = q5 ? 48 : 16;
    const uint8_t *blk = r < packed
                             ? w + (r - lane) * row_bytes + i * (q5 ? TW_R8K5_BLOCK : TW_R8K_BLOCK)
                             : w + r * row_bytes + i * (q5 ? 176 : 144);
    uint16_t hd, hm;
    memcpy(&hd, r < packed ? blk + 2 * lane : blk, 2);
    memcpy(&hm, r < packed ? blk + TW_R8K_DMIN + 2 * lane : blk + 2, 2);
    int32_t s1 = 0, s2 = 0;
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        if (r < packed) {
            const uint8_t lo = blk[TW_R8K_SC_LO + 8 * j + lane];
            const unsigned hi = load_u32(blk + TW_R8K_SC_HI + 4 * j) >> (4 * lane) & 15u;
            sc = (uint8_t)((lo & 15) | (hi & 3) << 4);
            m = (uint8_t)((lo >> 4) | (hi >> 2) << 4);
        } else {
            tw_k_scale_min(j, blk + 4, &sc, &m);
        }
        int32_t isum = 0;
        const size_t g = (size_t)j / 2, shift = 4 * ((size_t)j % 2);
        for (size_t l = 0; l < 32; l++) {
            const size_t run = q5 ? TW_R8K5_G(g) + 64 : TW_R8K_QS + 256 * g;
            const uint8_t q = r < packed ? blk[run + 32 * (l / 4) + 4 * lane + l % 4]
                                         : blk[qs + 32 * g + l];
            int level = q >> shift & 15;
            if (q5)
                level |= (int)k5_bit(blk, r < packed, lane, (size_t)j, l) << 4;
            isum += level * a[32 * j + l];
        }
        s1 += sc * isum;
        s2 += m * (bsums[2 * j] + bsums[2 * j + 1]);
    }
    const float t = tw_f16_to_f32(hm) * (float)s2;
    return fmaf(da, fmaf(tw_f16_to_f32(hd), (float)s1, -t), acc);
}

/* Row r's block i of a Q6_K_R8 range (a plain Q6_K block past the last
 * group): S = sum over sub-blocks s of sc_s * (the dot of the 0..63 levels
 * less 32 times the activations' sum), exact, then acc + (d * da) * S. */
static float r8q6_block(const uint8_t *w, size_t row_bytes, size_t rows, size_t r, size_t i,
                        const int8_t *a, const int16_t *bsums, float da, float acc)
{
    const size_t packed = rows / TW_R8_ROWS * TW_R8_ROWS, lane = r % TW_R8_ROWS;
    const bool pk = r < packed;
    const uint8_t *blk =
        pk ? w + (r - lane) * row_bytes + i * TW_R8Q6_BLOCK : w + r * row_bytes + i * 210;
    uint16_t hd;
    memcpy(&hd, pk ? blk + 2 * lane : blk + 208, 2);
    int32_t s = 0;
    for (size_t sb = 0; sb < 16; sb++) {
        const int sc = (int8_t)(pk ? blk[TW_R8Q6_SC + 16 * (sb / 2) + 2 * lane + sb % 2]
                                   : blk[192 + sb]);
        int32_t isum = 0;
        for (size_t c = 16 * sb; c < 16 * sb + 16; c++) {
            /* column c: half h, quarter g (which run, nibble and qh bits), byte l */
            const size_t h = c / 128, g = c % 128 / 32, l = c % 32;
            const uint8_t *ql, *qh;
            if (pk) {
                const uint8_t *step = blk + TW_R8Q6_Q + 768 * h + 96 * (l / 4) + 4 * lane + l % 4;
                ql = step + 32 * (g % 2);
                qh = step + 64;
            } else {
                ql = blk + 64 * h + 32 * (g % 2) + l;
                qh = blk + 128 + 32 * h + l;
            }
            const int q = (g < 2 ? *ql & 15 : *ql >> 4) | (*qh >> (2 * g) & 3) << 4;
            isum += q * a[c];
        }
        s += sc * (isum - 32 * bsums[sb]);
    }
    return fmaf(tw_f16_to_f32(hd) * da, (float)s, acc);
}

float tw_r8_dot(tw_type type, const uint8_t *w, size_t row_bytes, size_t rows, size_t r, size_t b0,
                size_t b1, const tw_act *act, float acc)
{
    if (tw_type_block_elems(type) == TW_QK_K) {
        for (size_t i = b0; i < b1; i++) {
            const int8_t *a = act->qs + (i - b0) * TW_QK_K;
            const int16_t *bsums = act->bsums + (i - b0) * (TW_QK_K / 16);
            acc = type == TW_TYPE_Q6_K_R8
                      ? r8q6_block(w, row_bytes, rows, r, i, a, bsums, act->d[i - b0], acc)
                      : r8k_block(type == TW_TYPE_Q5_K_R8, w, row_bytes, rows, r, i, a, bsums,
                                  act->d[i - b0], acc);
        }
        return acc;
    }
    const int8_t *qs = act->qs;
    const float *d = act->d;
    /* hb: bytes of a row block's head, its f16 scale and Q5_1's f16 offset */
    const size_t bb = tw_type_block_bytes(type), hb = type == TW_TYPE_Q5_1_R8 ? 4 : 2;
    const size_t runs = (bb - hb) / 4, packed = rows / TW_R8_ROWS * TW_R8_ROWS;
    for (size_t i = b0; i < b1; i++) {
        const int8_t *a = qs + (i - b0) * TW_QK8_0;
        const uint8_t *scale, *offset, *run[TW_QK8_0 / 4];
        if (r < packed) {
            const size_t lane = r % TW_R8_ROWS;
            const uint8_t *blk = w + (r - lane) * row_bytes + i * TW_R8_ROWS * bb;
            scale = blk + 2 * lane;
            offset = blk + 2 * TW_R8_ROWS + 2 * lane;
            for (size_t k = 0; k < runs; k++)
                run[k] = blk + hb * TW_R8_ROWS + 4 * (k * TW_R8_ROWS + lane);
        } else {
            const uint8_t *blk = w + r * row_bytes + i * bb;
            scale = blk;
            offset = blk + 2;
            for (size_t k = 0; k < runs; k++)
                run[k] = blk + hb + 4 * k;
        }
        int32_t isum = 0;
        for (size_t c = 0; c < TW_QK8_0; c++)
            isum += level(type, r < packed, run, c) * a[c];
        uint16_t h;
        memcpy(&h, scale, 2);
        const float da = d[i - b0];
        acc = fmaf(tw_f16_to_f32(h) * da, (float)isum, acc);
        if (hb == 4) { /* Q5_1: m times the activations' block sum */
            memcpy(&h, offset, 2);
            const int asum = act->bsums[2 * (i - b0)] + act->bsums[2 * (i - b0) + 1];
            acc = fmaf(tw_f16_to_f32(h) * da, (float)asum, acc);
        }
    }
    return acc;
}

void tw_rows_r8_tail(tw_type type, const uint8_t *w, size_t row_bytes, size_t rows, size_t r0,
                     size_t cols, const tw_act *acts, size_t n_act, float *y, size_t y_stride)
{
    for (size_t t = 0; t < n_act; t++)
        for (size_t r = r0; r < rows; r++)
            y[t * y_stride + r] = tw_r8_dot(type, w, row_bytes, rows, r, 0,
                                            cols / tw_type_block_elems(type), &acts[t], 0.0f);
}
