/* Reference (round-to-nearest) quantizers producing the same bytes as ggml's
 * quantize_row_*_ref, so a tensor quantized here is what llama.cpp would
 * write for the same f32 input. The float expressions keep ggml's evaluation
 * order on purpose: reassociating a sum or fusing a multiply-add changes
 * which level a borderline value rounds to. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/kernels_internal.h"
#include "tw/kernels.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define GROUP_MAX_EPS 1e-15f

static inline int imin(int a, int b)
{
    return a < b ? a : b;
}

static inline int imax(int a, int b)
{
    return a > b ? a : b;
}

/* Round to nearest, ties to even, through the float mantissa: exact for
 * |f| < 2^22 and, unlike a float-to-int cast, defined for every input. */
static inline int nearest_int(float f)
{
    float v = f + 12582912.f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* float -> int8 for values the caller expects in range; NaN and overflow
 * (only from non-finite input) saturate instead of being undefined. */
static inline int8_t sat_i8(float v)
{
    if (v >= 127.f)
        return 127;
    if (v <= -128.f)
        return -128;
    if (!(v == v))
        return 0;
    return (int8_t)v;
}

static void quant_q8_0(const float *x, tw_block_q8_0 *y, size_t nb)
{
    for (size_t i = 0; i < nb; i++, x += TW_QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < TW_QK8_0; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = tw_f32_to_f16(d);
        for (int j = 0; j < TW_QK8_0; j++)
            y[i].qs[j] = sat_i8(roundf(x[j] * id));
    }
}

static void quant_q4_0(const float *x, tw_block_q4_0 *y, size_t nb)
{
    for (size_t i = 0; i < nb; i++, x += TW_QK4_0) {
        /* The scale takes the sign of the largest-magnitude value so that
         * value lands exactly on level -8, the asymmetric end. */
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < TW_QK4_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = tw_f32_to_f16(d);
        for (int j = 0; j < TW_QK4_0 / 2; j++) {
            int q0 = imin(15, sat_i8(x[j] * id + 8.5f));
            int q1 = imin(15, sat_i8(x[j + TW_QK4_0 / 2] * id + 8.5f));
            y[i].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
        }
    }
}

static void quant_q5_0(const float *x, tw_block_q5_0 *y, size_t nb)
{
    for (size_t i = 0; i < nb; i++, x += 32) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = tw_f32_to_f16(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            int q0 = imin(31, sat_i8(x[j] * id + 16.5f));
            int q1 = imin(31, sat_i8(x[j + 16] * id + 16.5f));
            y[i].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)((q0 & 0x10) >> 4) << j;
            qh |= (uint32_t)((q1 & 0x10) >> 4) << (j + 16);
        }
        memcpy(y[i].qh, &qh, 4);
    }
}

static void quant_q5_1(const float *x, tw_block_q5_1 *y, size_t nb)
{
    for (size_t i = 0; i < nb; i++, x += 32) {
        float min = x[0], max = x[0];
        for (int j = 1; j < 32; j++) {
            if (x[j] < min)
                min = x[j];
            if (x[j] > max)
                max = x[j];
        }
        const float d = (max - min) / 31;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = tw_f32_to_f16(d);
        y[i].m = tw_f32_to_f16(min);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            /* (x - min) * id is in [0, 31.5): truncation after +0.5 rounds */
            int q0 = (uint8_t)sat_i8((x[j] - min) * id + 0.5f);
            int q1 = (uint8_t)sat_i8((x[j + 16] - min) * id + 0.5f);
            y[i].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)((q0 & 0x10) >> 4) << j;
            qh |= (uint32_t)((q1 & 0x10) >> 4) << (j + 16);
        }
        memcpy(y[i].qh, &qh, 4);
    }
}

/* Fits x ~ scale * L - min with L in [0, nmax] minimizing the weighted
 * squared error, trying nstep + 1 candidate scales around the plain
 * max-min one; returns scale and stores min (>= 0) in *the_min. */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep)
{
    float min = x[0];
    float max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)imax(0, imin(nmax, l));
        float diff = scale * L[i] + min - x[i];
        best_error += w[i] * (diff * diff);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(0, imin(nmax, nearest_int(iscale * (x[i] - min))));
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                cur_error += w[i] * (diff * diff);
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* Symmetric fit x ~ scale * (L - nmax) for Q6_K sub-blocks, weighting each
 * value by x^2 and trying 18 scales around nmax / max. */
static float fit_scale_sym(int n, int nmax, const float *x, int8_t *L)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                int l = nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Packs 6-bit scale ls and min lm of sub-block j into the 12-byte field. */
static void pack_scale_min(uint8_t *s, int j, uint8_t ls, uint8_t lm)
{
    if (j < 4) {
        s[j] = ls;
        s[j + 4] = lm;
    } else {
        s[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
        s[j - 4] |= (uint8_t)((ls >> 4) << 6);
        s[j] |= (uint8_t)((lm >> 4) << 6);
    }
}

/* Shared by Q4_K (nmax 15) and Q5_K (nmax 31): per 32-value sub-block fits,
 * 6-bit quantized scales and mins, then levels recomputed against the f16
 * scales actually stored. Writes d, dmin, scales and the levels L. */
static void quant_k_scales(const float *x, int nmax, float rmin, int nstep, uint16_t *d_out,
                           uint16_t *dmin_out, uint8_t *scales_out, uint8_t *L)
{
    float mins[TW_QK_K / 32], scales[TW_QK_K / 32], weights[32];
    uint8_t Laux[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < TW_QK_K / 32; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += xs[l] * xs[l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            weights[l] = av_x + fabsf(xs[l]);
        scales[j] = fit_scale_min(32, nmax, xs, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f,
                                  nstep);
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    memset(scales_out, 0, TW_K_SCALE_SIZE);
    for (int j = 0; j < TW_QK_K / 32; j++) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        pack_scale_min(scales_out, j, ls < 63 ? ls : 63, lm < 63 ? lm : 63);
    }
    *d_out = tw_f32_to_f16(max_scale / 63.f);
    *dmin_out = tw_f32_to_f16(max_min / 63.f);
    for (int j = 0; j < TW_QK_K / 32; j++) {
        uint8_t sc, m;
        tw_k_scale_min(j, scales_out, &sc, &m);
        const float d = tw_f16_to_f32(*d_out) * sc;
        if (d == 0.0f)
            continue;
        const float dm = tw_f16_to_f32(*dmin_out) * m;
        for (int ii = 0; ii < 32; ii++) {
            int l = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)imax(0, imin(nmax, l));
        }
    }
}

static void quant_q4_k(const float *x, tw_block_q4_k *y, size_t nb)
{
    uint8_t L[TW_QK_K];
    for (size_t i = 0; i < nb; i++, x += TW_QK_K) {
        quant_k_scales(x, 15, -1.f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
        uint8_t *q = y[i].qs;
        for (int j = 0; j < TW_QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; l++)
                q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

static void quant_q5_k(const float *x, tw_block_q5_k *y, size_t nb)
{
    uint8_t L[TW_QK_K];
    for (size_t i = 0; i < nb; i++, x += TW_QK_K) {
        quant_k_scales(x, 31, -0.5f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        uint8_t *qh = y[i].qh;
        uint8_t *ql = y[i].qs;
        memset(qh, 0, TW_QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int n = 0; n < TW_QK_K; n += 64, ql += 32) {
            for (int j = 0; j < 32; j++) {
                int l1 = L[n + j];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                int l2 = L[n + j + 32];
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
        }
    }
}

static void quant_q6_k(const float *x, tw_block_q6_k *y, size_t nb)
{
    int8_t L[TW_QK_K];
    float scales[TW_QK_K / 16];
    for (size_t i = 0; i < nb; i++, x += TW_QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < TW_QK_K / 16; ib++) {
            scales[ib] = fit_scale_sym(16, 32, x + 16 * ib, L + 16 * ib);
            if (fabsf(scales[ib]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float iscale = -128.f / max_scale;
        y[i].d = tw_f32_to_f16(1 / iscale);
        for (int ib = 0; ib < TW_QK_K / 16; ib++)
            y[i].scales[ib] = (int8_t)imin(127, nearest_int(iscale * scales[ib]));
        for (int j = 0; j < TW_QK_K / 16; j++) {
            float d = tw_f16_to_f32(y[i].d) * y[i].scales[j];
            if (d == 0.0f)
                continue;
            for (int ii = 0; ii < 16; ii++) {
                int l = nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(imax(-32, imin(31, l)) + 32);
            }
        }
        uint8_t *ql = y[i].ql;
        uint8_t *qh = y[i].qh;
        for (int j = 0; j < TW_QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const uint8_t q1 = L[j + l] & 0xF;
                const uint8_t q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF;
                const uint8_t q4 = L[j + l + 96] & 0xF;
                ql[l] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                  ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
        }
    }
}

void tw_quant_row(tw_type type, const float *src, void *dst, size_t n)
{
    switch (type) {
    case TW_TYPE_F32:
        memmove(dst, src, n * sizeof(float));
        break;
    case TW_TYPE_F16:
        /* the ISA's conversion: the same bits, 15x faster with F16C, which
         * half-precision K/V stores take for every row of a prefill */
        tw_isa_current()->to_f16(src, dst, n);
        break;
    case TW_TYPE_BF16: {
        uint16_t *h = dst;
        for (size_t i = 0; i < n; i++)
            h[i] = tw_f32_to_bf16(src[i]);
        break;
    }
    case TW_TYPE_Q8_0:
        quant_q8_0(src, dst, n / TW_QK8_0);
        break;
    case TW_TYPE_Q4_0:
        quant_q4_0(src, dst, n / TW_QK4_0);
        break;
    case TW_TYPE_Q5_0:
        quant_q5_0(src, dst, n / 32);
        break;
    case TW_TYPE_Q5_1:
        quant_q5_1(src, dst, n / 32);
        break;
    case TW_TYPE_Q4_K:
        quant_q4_k(src, dst, n / TW_QK_K);
        break;
    case TW_TYPE_Q5_K:
        quant_q5_k(src, dst, n / TW_QK_K);
        break;
    case TW_TYPE_Q6_K:
        quant_q6_k(src, dst, n / TW_QK_K);
        break;
    case TW_TYPE_Q8_0_R8:
    case TW_TYPE_Q4_0_R8:
    case TW_TYPE_Q5_0_R8:
    case TW_TYPE_Q5_1_R8:
    case TW_TYPE_Q4_K_R8:
    case TW_TYPE_Q5_K_R8:
    case TW_TYPE_Q6_K_R8:
        break; /* made by tw_pack_rows from plain rows, not from values */
    }
}
