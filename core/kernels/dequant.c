/* Scalar dequantization: the reference every SIMD variant must reproduce
 * bit for bit. Products are evaluated in ggml's order ((d * sc) * q - m) and
 * never fused, so the output matches ggml's dequantize_row_* too. */
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/kernels_internal.h"
#include "tw/kernels.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

static void dq_f32(const void *src, float *dst, size_t n)
{
    memmove(dst, src, n * sizeof(float));
}

static void dq_f16(const void *src, float *dst, size_t n)
{
    const uint16_t *h = src;
    for (size_t i = 0; i < n; i++)
        dst[i] = tw_f16_to_f32(h[i]);
}

static void dq_bf16(const void *src, float *dst, size_t n)
{
    const uint16_t *h = src;
    for (size_t i = 0; i < n; i++)
        dst[i] = tw_bf16_to_f32(h[i]);
}

static void dq_q8_0(const void *src, float *y, size_t n)
{
    const tw_block_q8_0 *x = src;
    for (size_t i = 0; i < n / TW_QK8_0; i++, y += TW_QK8_0) {
        const float d = tw_f16_to_f32(x[i].d);
        for (int j = 0; j < TW_QK8_0; j++)
            y[j] = x[i].qs[j] * d;
    }
}

static void dq_q4_0(const void *src, float *y, size_t n)
{
    const tw_block_q4_0 *x = src;
    for (size_t i = 0; i < n / TW_QK4_0; i++, y += TW_QK4_0) {
        const float d = tw_f16_to_f32(x[i].d);
        for (int j = 0; j < TW_QK4_0 / 2; j++) {
            y[j] = ((x[i].qs[j] & 0xF) - 8) * d;
            y[j + TW_QK4_0 / 2] = ((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static void dq_q5_0(const void *src, float *y, size_t n)
{
    const tw_block_q5_0 *x = src;
    for (size_t i = 0; i < n / 32; i++, y += 32) {
        const float d = tw_f16_to_f32(x[i].d);
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        for (int j = 0; j < 16; j++) {
            int q0 = (x[i].qs[j] & 0xF) | (int)(((qh >> j) & 1u) << 4);
            int q1 = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            y[j] = (q0 - 16) * d;
            y[j + 16] = (q1 - 16) * d;
        }
    }
}

static void dq_q5_1(const void *src, float *y, size_t n)
{
    const tw_block_q5_1 *x = src;
    for (size_t i = 0; i < n / 32; i++, y += 32) {
        const float d = tw_f16_to_f32(x[i].d);
        const float m = tw_f16_to_f32(x[i].m);
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        for (int j = 0; j < 16; j++) {
            int q0 = (x[i].qs[j] & 0xF) | (int)(((qh >> j) & 1u) << 4);
            int q1 = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            y[j] = q0 * d + m;
            y[j + 16] = q1 * d + m;
        }
    }
}

static void dq_q4_k(const void *src, float *y, size_t n)
{
    const tw_block_q4_k *x = src;
    for (size_t i = 0; i < n / TW_QK_K; i++) {
        const uint8_t *q = x[i].qs;
        const float d = tw_f16_to_f32(x[i].d);
        const float min = tw_f16_to_f32(x[i].dmin);
        for (int j = 0; j < TW_QK_K / 64; j++, q += 32) {
            uint8_t sc, m;
            tw_k_scale_min(2 * j, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            tw_k_scale_min(2 * j + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

static void dq_q5_k(const void *src, float *y, size_t n)
{
    const tw_block_q5_k *x = src;
    for (size_t i = 0; i < n / TW_QK_K; i++) {
        const uint8_t *ql = x[i].qs;
        const uint8_t *qh = x[i].qh;
        const float d = tw_f16_to_f32(x[i].d);
        const float min = tw_f16_to_f32(x[i].dmin);
        for (int j = 0; j < TW_QK_K / 64; j++, ql += 32) {
            uint8_t sc, m;
            tw_k_scale_min(2 * j, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            tw_k_scale_min(2 * j + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            const int u1 = 1 << (2 * j), u2 = 2 << (2 * j);
            for (int l = 0; l < 32; l++)
                *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

static void dq_q6_k(const void *src, float *y, size_t n)
{
    const tw_block_q6_k *x = src;
    for (size_t i = 0; i < n / TW_QK_K; i++) {
        const float d = tw_f16_to_f32(x[i].d);
        const uint8_t *ql = x[i].ql;
        const uint8_t *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int half = 0; half < 2; half++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * sc[is] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

void tw_isa_fill_dequant_scalar(tw_dequant_fn *dq)
{
    dq[tw_ktype_index(TW_TYPE_F32)] = dq_f32;
    dq[tw_ktype_index(TW_TYPE_F16)] = dq_f16;
    dq[tw_ktype_index(TW_TYPE_BF16)] = dq_bf16;
    dq[tw_ktype_index(TW_TYPE_Q8_0)] = dq_q8_0;
    dq[tw_ktype_index(TW_TYPE_Q4_0)] = dq_q4_0;
    dq[tw_ktype_index(TW_TYPE_Q5_0)] = dq_q5_0;
    dq[tw_ktype_index(TW_TYPE_Q5_1)] = dq_q5_1;
    dq[tw_ktype_index(TW_TYPE_Q4_K)] = dq_q4_k;
    dq[tw_ktype_index(TW_TYPE_Q5_K)] = dq_q5_k;
    dq[tw_ktype_index(TW_TYPE_Q6_K)] = dq_q6_k;
}

void tw_dequant_row(tw_type type, const void *src, float *dst, size_t n)
{
    int k = tw_ktype_index(type);
    if (k < 0 || n == 0)
        return;
    tw_dequant_fn dq = tw_isa_current()->dequant[k];
    if (dq) /* none for packed types: their rows are not addressable */
        dq(src, dst, n);
}
