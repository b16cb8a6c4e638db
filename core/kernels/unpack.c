/* Rows read back out of the packed layouts of tw_pack_rows: each row's
 * bytes exactly as they were before packing, so a packed matrix still
 * serves as a table of rows. A tied embedding needs that: the forward pass
 * gathers its input rows from the matrix the logits multiply, and without
 * it the file's copy of that matrix stayed in memory beside the packed one
 * (qwen2-0.5b with the gpt-2 vocabulary: 48 MB; with its own 151936-token
 * vocabulary, 145 MB of Q8_0). */
#include <stdalign.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/kernels_internal.h"
#include "tw/kernels.h"

static uint32_t load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void store_u32(uint8_t *p, uint32_t v)
{
    for (int b = 0; b < 4; b++)
        p[b] = (uint8_t)(v >> (8 * b));
}

/* The fifth bits of 32 columns from a packed group's 4-byte word (bit
 * 8j + k for column 4k + j) back in column order (bit c for column c). */
static uint32_t qh_in_column_order(const uint8_t *word)
{
    const uint32_t t = load_u32(word);
    uint32_t qh = 0;
    for (unsigned c = 0; c < 32; c++)
        qh |= (t >> (c % 4 * 8 + c / 4) & 1u) << c;
    return qh;
}

/* Row `lane` of a Q8_0 / Q4_0 / Q5_0 / Q5_1 group's block o into b, the
 * row's block of bb bytes. */
static void unpack_q32(tw_type type, size_t bb, const uint8_t *o, size_t lane, uint8_t *b)
{
    const size_t hb = type == TW_TYPE_Q5_1 ? 4 : 2, runs = (bb - hb) / 4;
    memcpy(b, o + 2 * lane, 2);
    if (hb == 4)
        memcpy(b + 2, o + 2 * TW_R8_ROWS + 2 * lane, 2);
    for (size_t k = 0; k < runs; k++)
        memcpy(b + hb + 4 * k, o + hb * TW_R8_ROWS + 4 * (k * TW_R8_ROWS + lane), 4);
    if (type == TW_TYPE_Q5_0 || type == TW_TYPE_Q5_1)
        store_u32(b + hb, qh_in_column_order(o + hb * TW_R8_ROWS + 4 * lane));
}

/* Sub-block j's six-bit scale and min into a K block's twelve scale bytes
 * q, which start zeroed: what tw_k_scale_min reads back. */
static void k_scale_min_put(int j, unsigned sc, unsigned m, uint8_t *q)
{
    if (j < 4) {
        q[j] |= (uint8_t)sc;
        q[j + 4] |= (uint8_t)m;
    } else {
        q[j + 4] |= (uint8_t)((sc & 15) | (m & 15) << 4);
        q[j - 4] |= (uint8_t)((sc >> 4) << 6);
        q[j] |= (uint8_t)((m >> 4) << 6);
    }
}

/* Row `lane` of a Q4_K_R8 (q5 false) or Q5_K_R8 group's block o into b. */
static void unpack_k45(const uint8_t *o, size_t lane, bool q5, uint8_t *b)
{
    const size_t qs = q5 ? 48 : 16;
    memcpy(b, o + 2 * lane, 2);
    memcpy(b + 2, o + TW_R8K_DMIN + 2 * lane, 2);
    memset(b + 4, 0, 12);
    for (int j = 0; j < 8; j++) {
        const unsigned lo = o[TW_R8K_SC_LO + 8 * j + lane];
        const unsigned top = (unsigned)o[TW_R8K_SC_HI + 4 * j + lane / 2] >> (4 * (lane % 2)) & 15u;
        k_scale_min_put(j, (lo & 15) | (top & 3) << 4, lo >> 4 | (top >> 2) << 4, b + 4);
    }
    for (size_t g = 0; g < 4; g++)
        for (size_t k = 0; k < 8; k++)
            memcpy(b + qs + 32 * g + 4 * k,
                   o + (q5 ? TW_R8K5_G(g) + 64 : TW_R8K_QS + 256 * g) + 32 * k + 4 * lane, 4);
    if (!q5)
        return;
    memset(b + 16, 0, 32);
    for (unsigned j = 0; j < 8; j++) {
        const uint32_t bits = qh_in_column_order(o + TW_R8K5_G(j / 2) + 32 * (j % 2) + 4 * lane);
        for (unsigned c = 0; c < 32; c++)
            b[16 + c] |= (uint8_t)((bits >> c & 1u) << j);
    }
}

/* Row `lane` of a Q6_K_R8 group's block o into b (ql[128], qh[64],
 * scales[16], d). */
static void unpack_q6k(const uint8_t *o, size_t lane, uint8_t *b)
{
    memcpy(b + 208, o + 2 * lane, 2);
    for (size_t p = 0; p < 8; p++)
        memcpy(b + 192 + 2 * p, o + TW_R8Q6_SC + 16 * p + 2 * lane, 2);
    for (size_t h = 0; h < 2; h++)
        for (size_t k = 0; k < 8; k++) {
            const uint8_t *run = o + TW_R8Q6_Q + 768 * h + 96 * k + 4 * lane;
            memcpy(b + 64 * h + 4 * k, run, 4);
            memcpy(b + 64 * h + 32 + 4 * k, run + 32, 4);
            memcpy(b + 128 + 32 * h + 4 * k, run + 64, 4);
        }
}

/* The plain type a packed one was packed from; `packed` itself when it is
 * not a packed type. */
static tw_type plain_type(tw_type packed)
{
    static const tw_type plain[] = {TW_TYPE_Q8_0, TW_TYPE_Q4_0, TW_TYPE_Q5_0, TW_TYPE_Q5_1,
                                    TW_TYPE_Q4_K, TW_TYPE_Q5_K, TW_TYPE_Q6_K};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (tw_pack_type(plain[i]) == packed)
            return plain[i];
    return packed;
}

/* Block i of row r of the packed matrix w (plain type t, row_bytes apart)
 * into b, the row's block as it was before packing. */
static void unpack_block(tw_type t, const uint8_t *w, size_t row_bytes, size_t rows, size_t r,
                         size_t i, uint8_t *b)
{
    const size_t bb = tw_type_block_bytes(t);
    if (r >= rows / TW_R8_ROWS * TW_R8_ROWS) { /* past the last whole group: plain rows */
        memcpy(b, w + r * row_bytes + i * bb, bb);
        return;
    }
    const uint8_t *o = w + r / TW_R8_ROWS * TW_R8_ROWS * row_bytes + i * TW_R8_ROWS * bb;
    const size_t lane = r % TW_R8_ROWS;
    if (t == TW_TYPE_Q4_K || t == TW_TYPE_Q5_K)
        unpack_k45(o, lane, t == TW_TYPE_Q5_K, b);
    else if (t == TW_TYPE_Q6_K)
        unpack_q6k(o, lane, b);
    else
        unpack_q32(t, bb, o, lane, b);
}

/* The plain type of a valid request, or 0 (F32, never packed) when the
 * arguments do not describe a row of a packed matrix. */
static tw_type check(tw_type packed, const void *w, size_t rows, size_t cols, size_t r,
                     const void *dst, size_t *row_bytes)
{
    const tw_type t = plain_type(packed);
    *row_bytes = t == packed ? 0 : tw_type_row_bytes(t, cols);
    if (*row_bytes == 0 || !w || !dst || r >= rows || rows > SIZE_MAX / *row_bytes)
        return TW_TYPE_F32;
    return t;
}

bool tw_unpack_row(tw_type packed, const void *w, size_t rows, size_t cols, size_t r, void *dst)
{
    size_t row_bytes;
    const tw_type t = check(packed, w, rows, cols, r, dst, &row_bytes);
    if (t == TW_TYPE_F32)
        return false;
    const size_t bb = tw_type_block_bytes(t), nb = row_bytes / bb;
    for (size_t i = 0; i < nb; i++)
        unpack_block(t, w, row_bytes, rows, r, i, (uint8_t *)dst + i * bb);
    return true;
}

bool tw_dequant_packed_row(tw_type packed, const void *w, size_t rows, size_t cols, size_t r,
                           float *dst)
{
    size_t row_bytes;
    const tw_type t = check(packed, w, rows, cols, r, dst, &row_bytes);
    if (t == TW_TYPE_F32)
        return false;
    const size_t bb = tw_type_block_bytes(t), be = tw_type_block_elems(t), nb = row_bytes / bb;
    alignas(64) uint8_t block[256]; /* the largest plain block: Q6_K's 210 bytes */
    if (bb > sizeof block)
        return false;
    for (size_t i = 0; i < nb; i++) {
        unpack_block(t, w, row_bytes, rows, r, i, block);
        tw_dequant_row(t, block, dst + i * be, be);
    }
    return true;
}
