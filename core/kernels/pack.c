/* Packing of weight rows for the integer kernels (Q8_0 -> Q8_0_R8, see
 * kernels/blocks.h) and the scalar arithmetic every ISA's packed kernels
 * reproduce. */
#include <math.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/kernels_internal.h"
#include "tw/kernels.h"

tw_type tw_pack_type(tw_type type)
{
    return type == TW_TYPE_Q8_0 ? TW_TYPE_Q8_0_R8 : type;
}

bool tw_pack_rows(tw_type type, const void *src, size_t rows, size_t cols, void *dst)
{
    size_t row_bytes = tw_type_row_bytes(type, cols);
    if (type != TW_TYPE_Q8_0 || row_bytes == 0 || !src || !dst)
        return false;
    const uint8_t *in = src;
    uint8_t *out = dst;
    const size_t nb = cols / TW_QK8_0, groups = rows / TW_R8_ROWS;
    for (size_t g = 0; g < groups; g++) {
        const uint8_t *rows8 = in + g * TW_R8_ROWS * row_bytes;
        uint8_t *o = out + g * TW_R8_ROWS * row_bytes;
        for (size_t i = 0; i < nb; i++, o += TW_R8_BLOCK_BYTES) {
            for (size_t r = 0; r < TW_R8_ROWS; r++) {
                const uint8_t *b = rows8 + r * row_bytes + i * sizeof(tw_block_q8_0);
                memcpy(o + 2 * r, b, 2);
                for (size_t k = 0; k < TW_QK8_0 / 4; k++)
                    memcpy(o + 2 * TW_R8_ROWS + 4 * (k * TW_R8_ROWS + r), b + 2 + 4 * k, 4);
            }
        }
    }
    size_t packed = groups * TW_R8_ROWS;
    memcpy(out + packed * row_bytes, in + packed * row_bytes, (rows - packed) * row_bytes);
    return true;
}

float tw_q8_0_r8_dot(const uint8_t *w, size_t row_bytes, size_t rows, size_t r, size_t b0,
                     size_t b1, const int8_t *qs, const float *d, float acc)
{
    const size_t packed = rows / TW_R8_ROWS * TW_R8_ROWS;
    for (size_t i = b0; i < b1; i++) {
        const int8_t *a = qs + (i - b0) * TW_QK8_0;
        const uint8_t *scale, *q[TW_QK8_0 / 4];
        if (r < packed) {
            const size_t lane = r % TW_R8_ROWS;
            const uint8_t *blk = w + (r - lane) * row_bytes + i * TW_R8_BLOCK_BYTES;
            scale = blk + 2 * lane;
            for (size_t k = 0; k < TW_QK8_0 / 4; k++)
                q[k] = blk + 2 * TW_R8_ROWS + 4 * (k * TW_R8_ROWS + lane);
        } else {
            const uint8_t *blk = w + r * row_bytes + i * sizeof(tw_block_q8_0);
            scale = blk;
            for (size_t k = 0; k < TW_QK8_0 / 4; k++)
                q[k] = blk + 2 + 4 * k;
        }
        int32_t isum = 0;
        for (size_t k = 0; k < TW_QK8_0 / 4; k++)
            for (size_t j = 0; j < 4; j++)
                isum += (int8_t)q[k][j] * a[4 * k + j];
        uint16_t h;
        memcpy(&h, scale, 2);
        const float s = tw_f16_to_f32(h) * d[i - b0];
        acc = fmaf(s, (float)isum, acc);
    }
    return acc;
}

void tw_rows_q8_0_r8_tail(const uint8_t *w, size_t row_bytes, size_t rows, size_t r0, size_t cols,
                          const tw_act *acts, size_t n_act, float *y, size_t y_stride)
{
    for (size_t t = 0; t < n_act; t++)
        for (size_t r = r0; r < rows; r++)
            y[t * y_stride + r] = tw_q8_0_r8_dot(w, row_bytes, rows, r, 0, cols / TW_QK8_0,
                                                 acts[t].qs, acts[t].d, 0.0f);
}
