/* Portable kernels: activation quantization and row dot products for every
 * weight type. They define the integer arithmetic the SIMD variants must
 * reproduce exactly; only the order of the final float sums may differ. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/kernels_internal.h"

int tw_ktype_index(tw_type type)
{
    switch (type) {
    case TW_TYPE_F32:
        return 0;
    case TW_TYPE_F16:
        return 1;
    case TW_TYPE_BF16:
        return 2;
    case TW_TYPE_Q8_0:
        return 3;
    case TW_TYPE_Q4_0:
        return 4;
    case TW_TYPE_Q4_K:
        return 5;
    case TW_TYPE_Q5_K:
        return 6;
    case TW_TYPE_Q6_K:
        return 7;
    case TW_TYPE_Q5_0:
        return 8;
    case TW_TYPE_Q5_1:
        return 9;
    case TW_TYPE_Q8_0_R8:
        return 10;
    case TW_TYPE_Q4_0_R8:
        return 11;
    case TW_TYPE_Q5_0_R8:
        return 12;
    case TW_TYPE_Q4_K_R8:
        return 13;
    case TW_TYPE_Q6_K_R8:
        return 14;
    case TW_TYPE_Q5_1_R8:
        return 15;
    case TW_TYPE_Q5_K_R8:
        return 16;
    }
    return -1;
}

tw_act_kind tw_act_kind_for(tw_type type)
{
    switch (type) {
    case TW_TYPE_Q8_0:
    case TW_TYPE_Q8_0_R8:
    case TW_TYPE_Q4_0:
    case TW_TYPE_Q4_0_R8:
    case TW_TYPE_Q5_0:
    case TW_TYPE_Q5_0_R8:
    case TW_TYPE_Q5_1:
    case TW_TYPE_Q5_1_R8:
        return TW_ACT_Q8;
    case TW_TYPE_Q4_K:
    case TW_TYPE_Q4_K_R8:
    case TW_TYPE_Q5_K:
    case TW_TYPE_Q5_K_R8:
    case TW_TYPE_Q6_K:
    case TW_TYPE_Q6_K_R8:
        return TW_ACT_Q8K;
    default:
        return TW_ACT_F32;
    }
}

static size_t align64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

size_t tw_act_bytes(tw_act_kind kind, size_t cols)
{
    if (kind == TW_ACT_F32)
        return 0;
    size_t group = kind == TW_ACT_Q8 ? 32 : TW_QK_K;
    return align64(cols) + align64(cols / group * sizeof(float)) +
           align64(cols / 16 * sizeof(int16_t)) +
           (kind == TW_ACT_Q8 ? align64(cols / 4 * sizeof(int32_t)) +
                                    align64(cols / 32 * sizeof(int32_t))
                              : 0);
}

void tw_act_layout(tw_act_kind kind, size_t cols, void *buf, tw_act *act)
{
    if (kind == TW_ACT_F32)
        return;
    size_t group = kind == TW_ACT_Q8 ? 32 : TW_QK_K;
    uint8_t *p = buf;
    act->qs = (int8_t *)p;
    p += align64(cols);
    act->d = (float *)(void *)p;
    p += align64(cols / group * sizeof(float));
    act->bsums = (int16_t *)(void *)p;
    p += align64(cols / 16 * sizeof(int16_t));
    act->off8 = NULL;
    act->bneg = NULL;
    if (kind == TW_ACT_Q8) {
        act->off8 = (int32_t *)(void *)p;
        p += align64(cols / 4 * sizeof(int32_t));
        act->bneg = (int32_t *)(void *)p;
    }
}

/* Round half to even without a float-to-int conversion (defined for NaN). */
static inline int round_even(float f)
{
    float v = f + 12582912.f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static void quant_act_groups(size_t cols, size_t group, tw_act *act)
{
    const float *x = act->x;
    for (size_t g = 0; g < cols / group; g++) {
        const float *xg = x + g * group;
        float amax = 0.0f;
        for (size_t j = 0; j < group; j++) {
            float a = xg[j] < 0 ? -xg[j] : xg[j];
            amax = a > amax ? a : amax;
        }
        float id = amax > 0.0f ? 127.0f / amax : 0.0f;
        act->d[g] = amax / 127.0f;
        int8_t *q = act->qs + g * group;
        for (size_t j = 0; j < group; j++) {
            int v = round_even(xg[j] * id);
            q[j] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
    }
    for (size_t b = 0; b < cols / 16; b++) {
        int s = 0;
        for (int j = 0; j < 16; j++)
            s += act->qs[b * 16 + j];
        act->bsums[b] = (int16_t)s;
    }
    if (group == 32) {
        for (size_t b = 0; b < cols / 4; b++)
            act->off8[b] = 8 * (act->qs[4 * b] + act->qs[4 * b + 1] + act->qs[4 * b + 2] +
                                act->qs[4 * b + 3]);
        for (size_t b = 0; b < cols / 32; b++)
            act->bneg[b] = -128 * (act->bsums[2 * b] + act->bsums[2 * b + 1]);
    }
}

void tw_quant_act_q8_scalar(size_t cols, tw_act *act)
{
    quant_act_groups(cols, 32, act);
}

void tw_quant_act_q8k_scalar(size_t cols, tw_act *act)
{
    quant_act_groups(cols, TW_QK_K, act);
}

static float dot_f32(const float *a, const float *b, size_t n)
{
    float s = 0.0f;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void dot_rows_f32(const float *q, const float *K, size_t n, size_t d, float *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = dot_f32(q, K + i * d, d);
}

static void axpy_rows_f32(const float *p, const float *V, size_t n, size_t d, float *acc)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            acc[j] += p[i] * V[i * d + j];
}

static void dot_rows_multi_f32(const float *q, size_t q_stride, size_t nq, const float *K,
                               size_t n, size_t d, float *out, size_t out_stride)
{
    for (size_t k = 0; k < nq; k++)
        dot_rows_f32(q + k * q_stride, K, n, d, out + k * out_stride);
}

static void axpy_rows_multi_f32(const float *p, size_t p_stride, size_t nq, const float *V,
                                size_t n, size_t d, float *acc, size_t acc_stride)
{
    for (size_t k = 0; k < nq; k++)
        axpy_rows_f32(p + k * p_stride, V, n, d, acc + k * acc_stride);
}

/* The half-precision rows: each value converted exactly, then the f32
 * kernels' operations in their order. */
static void dot_rows_multi_h16(const float *q, size_t q_stride, size_t nq, const uint16_t *K,
                               size_t n, size_t d, float *out, size_t out_stride)
{
    for (size_t k = 0; k < nq; k++)
        for (size_t i = 0; i < n; i++) {
            float s = 0.0f;
            for (size_t j = 0; j < d; j++)
                s += q[k * q_stride + j] * tw_f16_to_f32(K[i * d + j]);
            out[k * out_stride + i] = s;
        }
}

static void axpy_rows_multi_h16(const float *p, size_t p_stride, size_t nq, const uint16_t *V,
                                size_t n, size_t d, float *acc, size_t acc_stride)
{
    for (size_t k = 0; k < nq; k++)
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < d; j++)
                acc[k * acc_stride + j] += p[k * p_stride + i] * tw_f16_to_f32(V[i * d + j]);
}

static float scale_max_f32(float *x, size_t n, float scale)
{
    float mx = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        x[i] *= scale;
        mx = x[i] > mx ? x[i] : mx;
    }
    return mx;
}

static size_t argmax_f32(float *x, size_t n)
{
    size_t best = 0;
    float mx = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (isnan(x[i]))
            x[i] = -INFINITY;
        if (x[i] > mx) {
            mx = x[i];
            best = i;
        }
    }
    return best;
}

static float exp_shift_f32(float *x, size_t n, float mx)
{
    float sum = 0.0f;
    for (size_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    return sum;
}

static void silu_mul_f32(float *g, const float *u, size_t n)
{
    for (size_t i = 0; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void silu_f32(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] / (1.0f + expf(-x[i]));
}

static void delta_rule_f32(float *S, const float *src, const float *q, const float *k,
                           const float *v, float decay, float beta, size_t dk, size_t dv,
                           float *mem, float *out)
{
    memset(mem, 0, dv * sizeof *mem);
    for (size_t i = 0; i < dk; i++) {
        float *row = S + i * dv;
        const float *old = src + i * dv;
        for (size_t j = 0; j < dv; j++) {
            row[j] = old[j] * decay;
            mem[j] += row[j] * k[i];
        }
    }
    for (size_t j = 0; j < dv; j++) {
        mem[j] = (v[j] - mem[j]) * beta;
        out[j] = 0.0f;
    }
    for (size_t i = 0; i < dk; i++) {
        float *row = S + i * dv;
        for (size_t j = 0; j < dv; j++) {
            row[j] += k[i] * mem[j];
            out[j] += row[j] * q[i];
        }
    }
}

static void rows1_f32(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                     const tw_act *act, float *y)
{
    for (size_t r = 0; r < rows; r++)
        y[r] = dot_f32((const float *)(const void *)(w + r * row_bytes), act->x, cols);
}

static void rows1_f16(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                     const tw_act *act, float *y)
{
    for (size_t r = 0; r < rows; r++) {
        const uint16_t *h = (const uint16_t *)(const void *)(w + r * row_bytes);
        float s = 0.0f;
        for (size_t i = 0; i < cols; i++)
            s += tw_f16_to_f32(h[i]) * act->x[i];
        y[r] = s;
    }
}

static void rows1_bf16(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                      const tw_act *act, float *y)
{
    for (size_t r = 0; r < rows; r++) {
        const uint16_t *h = (const uint16_t *)(const void *)(w + r * row_bytes);
        float s = 0.0f;
        for (size_t i = 0; i < cols; i++)
            s += tw_bf16_to_f32(h[i]) * act->x[i];
        y[r] = s;
    }
}

static void rows1_q8_0(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                      const tw_act *act, float *y)
{
    size_t nb = cols / TW_QK8_0;
    for (size_t r = 0; r < rows; r++) {
        const tw_block_q8_0 *b = (const tw_block_q8_0 *)(const void *)(w + r * row_bytes);
        float s = 0.0f;
        for (size_t i = 0; i < nb; i++) {
            const int8_t *a = act->qs + i * 32;
            int isum = 0;
            for (int j = 0; j < 32; j++)
                isum += b[i].qs[j] * a[j];
            s += (tw_f16_to_f32(b[i].d) * act->d[i]) * (float)isum;
        }
        y[r] = s;
    }
}

static void rows1_q4_0(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                      const tw_act *act, float *y)
{
    size_t nb = cols / TW_QK4_0;
    for (size_t r = 0; r < rows; r++) {
        const tw_block_q4_0 *b = (const tw_block_q4_0 *)(const void *)(w + r * row_bytes);
        float s = 0.0f;
        for (size_t i = 0; i < nb; i++) {
            const int8_t *a = act->qs + i * 32;
            int isum = 0;
            for (int j = 0; j < 16; j++)
                isum += (b[i].qs[j] & 0xF) * a[j] + (b[i].qs[j] >> 4) * a[j + 16];
            isum -= 8 * (act->bsums[2 * i] + act->bsums[2 * i + 1]);
            s += (tw_f16_to_f32(b[i].d) * act->d[i]) * (float)isum;
        }
        y[r] = s;
    }
}

/* Level j (0..31) of a Q5_0/Q5_1 block, without Q5_0's -16. */
static inline int q5_level(const uint8_t *qs, uint32_t qh, int j)
{
    int nib = j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4;
    return nib | (int)(((qh >> j) & 1u) << 4);
}

static void rows1_q5_0(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                       const tw_act *act, float *y)
{
    size_t nb = cols / 32;
    for (size_t r = 0; r < rows; r++) {
        const tw_block_q5_0 *b = (const tw_block_q5_0 *)(const void *)(w + r * row_bytes);
        float s = 0.0f;
        for (size_t i = 0; i < nb; i++) {
            uint32_t qh;
            memcpy(&qh, b[i].qh, 4);
            const int8_t *a = act->qs + i * 32;
            int isum = 0;
            for (int j = 0; j < 32; j++)
                isum += (q5_level(b[i].qs, qh, j) - 16) * a[j];
            s += (tw_f16_to_f32(b[i].d) * act->d[i]) * (float)isum;
        }
        y[r] = s;
    }
}

static void rows1_q5_1(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                       const tw_act *act, float *y)
{
    size_t nb = cols / 32;
    for (size_t r = 0; r < rows; r++) {
        const tw_block_q5_1 *b = (const tw_block_q5_1 *)(const void *)(w + r * row_bytes);
        float s = 0.0f;
        for (size_t i = 0; i < nb; i++) {
            uint32_t qh;
            memcpy(&qh, b[i].qh, 4);
            const int8_t *a = act->qs + i * 32;
            int isum = 0;
            for (int j = 0; j < 32; j++)
                isum += q5_level(b[i].qs, qh, j) * a[j];
            int asum = act->bsums[2 * i] + act->bsums[2 * i + 1];
            s += (tw_f16_to_f32(b[i].d) * act->d[i]) * (float)isum +
                 (tw_f16_to_f32(b[i].m) * act->d[i]) * (float)asum;
        }
        y[r] = s;
    }
}

/* Sum over the 8 sub-blocks of a Q4_K/Q5_K block of scale * (q . a) and of
 * min * sum(a); the caller applies d and dmin. q holds the 256 levels. */
static void k_block_sums(const uint8_t *q, const uint8_t *scales, const int8_t *a,
                         const int16_t *bsums, int *sumi, int *summ)
{
    int si = 0, sm = 0;
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        tw_k_scale_min(j, scales, &sc, &m);
        int dot = 0;
        for (int l = 0; l < 32; l++)
            dot += q[32 * j + l] * a[32 * j + l];
        si += sc * dot;
        sm += m * (bsums[2 * j] + bsums[2 * j + 1]);
    }
    *sumi = si;
    *summ = sm;
}

/* Q4_K (qh NULL) and Q5_K: the 256 levels of one block in element order,
 * bit 4 from qh for Q5_K (bit 2g of qh[l] for the low half of group g,
 * bit 2g + 1 for the high half). */
static void k45_levels(const uint8_t *qs, const uint8_t *qh, uint8_t q[TW_QK_K])
{
    for (int g = 0; g < 4; g++) {
        for (int l = 0; l < 32; l++) {
            uint8_t lo = qs[32 * g + l] & 0xF, hi = qs[32 * g + l] >> 4;
            if (qh) {
                lo |= (uint8_t)(((qh[l] >> (2 * g)) & 1) << 4);
                hi |= (uint8_t)(((qh[l] >> (2 * g + 1)) & 1) << 4);
            }
            q[64 * g + l] = lo;
            q[64 * g + 32 + l] = hi;
        }
    }
}

static void rows1_k45(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                      const tw_act *act, float *y, bool is_q5)
{
    size_t nb = cols / TW_QK_K;
    uint8_t q[TW_QK_K];
    for (size_t r = 0; r < rows; r++) {
        const tw_block_q4_k *b4 = (const tw_block_q4_k *)(const void *)(w + r * row_bytes);
        const tw_block_q5_k *b5 = (const tw_block_q5_k *)(const void *)(w + r * row_bytes);
        float s = 0.0f;
        for (size_t i = 0; i < nb; i++) {
            uint16_t d = is_q5 ? b5[i].d : b4[i].d, dmin = is_q5 ? b5[i].dmin : b4[i].dmin;
            const uint8_t *scales = is_q5 ? b5[i].scales : b4[i].scales;
            k45_levels(is_q5 ? b5[i].qs : b4[i].qs, is_q5 ? b5[i].qh : NULL, q);
            int sumi, summ;
            k_block_sums(q, scales, act->qs + i * TW_QK_K, act->bsums + i * 16, &sumi, &summ);
            s += (tw_f16_to_f32(d) * act->d[i]) * (float)sumi -
                 (tw_f16_to_f32(dmin) * act->d[i]) * (float)summ;
        }
        y[r] = s;
    }
}

static void rows1_q4_k(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                      const tw_act *act, float *y)
{
    rows1_k45(w, row_bytes, rows, cols, act, y, false);
}

static void rows1_q5_k(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                      const tw_act *act, float *y)
{
    rows1_k45(w, row_bytes, rows, cols, act, y, true);
}

static void rows1_q6_k(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                      const tw_act *act, float *y)
{
    size_t nb = cols / TW_QK_K;
    uint8_t q[TW_QK_K];
    for (size_t r = 0; r < rows; r++) {
        const tw_block_q6_k *b = (const tw_block_q6_k *)(const void *)(w + r * row_bytes);
        float s = 0.0f;
        for (size_t i = 0; i < nb; i++) {
            const uint8_t *ql = b[i].ql;
            const uint8_t *qh = b[i].qh;
            for (int half = 0; half < 2; half++, ql += 64, qh += 32) {
                uint8_t *qq = q + 128 * half;
                for (int l = 0; l < 32; l++) {
                    qq[l] = (uint8_t)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4));
                    qq[l + 32] = (uint8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
                    qq[l + 64] = (uint8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
                    qq[l + 96] = (uint8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
                }
            }
            const int8_t *a = act->qs + i * TW_QK_K;
            const int16_t *bs = act->bsums + i * 16;
            int sumi = 0;
            for (int j = 0; j < 16; j++) {
                int dot = 0;
                for (int l = 0; l < 16; l++)
                    dot += q[16 * j + l] * a[16 * j + l];
                sumi += b[i].scales[j] * (dot - 32 * bs[j]);
            }
            s += (tw_f16_to_f32(b[i].d) * act->d[i]) * (float)sumi;
        }
        y[r] = s;
    }
}

/* The single-activation kernels above, applied to each activation row. */
#define MULTI_ACT(name)                                                                         \
    static void rows_##name(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,        \
                            const tw_act *acts, size_t n_act, float *y, size_t y_stride)         \
    {                                                                                           \
        for (size_t t = 0; t < n_act; t++)                                                      \
            rows1_##name(w, row_bytes, rows, cols, &acts[t], y + t * y_stride);                  \
    }
MULTI_ACT(f32)
MULTI_ACT(f16)
MULTI_ACT(bf16)
MULTI_ACT(q8_0)
MULTI_ACT(q4_0)
MULTI_ACT(q5_0)
MULTI_ACT(q5_1)
MULTI_ACT(q4_k)
MULTI_ACT(q5_k)
MULTI_ACT(q6_k)

/* The packed types' scalar kernels: tw_r8_dot over every row. */
#define R8_SCALAR(name, type)                                                                      \
    static void name(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,                \
                     const tw_act *acts, size_t n_act, float *y, size_t y_stride)                 \
    {                                                                                              \
        tw_rows_r8_tail(type, w, row_bytes, rows, 0, cols, acts, n_act, y, y_stride);             \
    }
R8_SCALAR(rows_q8_0_r8, TW_TYPE_Q8_0_R8)
R8_SCALAR(rows_q4_0_r8, TW_TYPE_Q4_0_R8)
R8_SCALAR(rows_q5_0_r8, TW_TYPE_Q5_0_R8)
R8_SCALAR(rows_q5_1_r8, TW_TYPE_Q5_1_R8)
R8_SCALAR(rows_q4_k_r8, TW_TYPE_Q4_K_R8)
R8_SCALAR(rows_q5_k_r8, TW_TYPE_Q5_K_R8)
R8_SCALAR(rows_q6_k_r8, TW_TYPE_Q6_K_R8)

static void to_f16(const float *src, uint16_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = tw_f32_to_f16(src[i]);
}

void tw_isa_fill_scalar(tw_isa_table *t)
{
    t->name = "scalar";
    t->to_f16 = to_f16;
    t->rows[tw_ktype_index(TW_TYPE_F32)] = rows_f32;
    t->rows[tw_ktype_index(TW_TYPE_F16)] = rows_f16;
    t->rows[tw_ktype_index(TW_TYPE_BF16)] = rows_bf16;
    t->rows[tw_ktype_index(TW_TYPE_Q8_0)] = rows_q8_0;
    t->rows[tw_ktype_index(TW_TYPE_Q4_0)] = rows_q4_0;
    t->rows[tw_ktype_index(TW_TYPE_Q5_0)] = rows_q5_0;
    t->rows[tw_ktype_index(TW_TYPE_Q5_1)] = rows_q5_1;
    t->rows[tw_ktype_index(TW_TYPE_Q4_K)] = rows_q4_k;
    t->rows[tw_ktype_index(TW_TYPE_Q5_K)] = rows_q5_k;
    t->rows[tw_ktype_index(TW_TYPE_Q6_K)] = rows_q6_k;
    t->rows[tw_ktype_index(TW_TYPE_Q8_0_R8)] = rows_q8_0_r8;
    t->rows[tw_ktype_index(TW_TYPE_Q4_0_R8)] = rows_q4_0_r8;
    t->rows[tw_ktype_index(TW_TYPE_Q5_0_R8)] = rows_q5_0_r8;
    t->rows[tw_ktype_index(TW_TYPE_Q5_1_R8)] = rows_q5_1_r8;
    t->rows[tw_ktype_index(TW_TYPE_Q4_K_R8)] = rows_q4_k_r8;
    t->rows[tw_ktype_index(TW_TYPE_Q5_K_R8)] = rows_q5_k_r8;
    t->rows[tw_ktype_index(TW_TYPE_Q6_K_R8)] = rows_q6_k_r8;
    /* packed rows always take the integer kernels (there is no dequantizer
     * for them), each call on whole groups */
    const unsigned packed = 1u << tw_ktype_index(TW_TYPE_Q8_0_R8) |
                            1u << tw_ktype_index(TW_TYPE_Q4_0_R8) |
                            1u << tw_ktype_index(TW_TYPE_Q5_0_R8) |
                            1u << tw_ktype_index(TW_TYPE_Q5_1_R8) |
                            1u << tw_ktype_index(TW_TYPE_Q4_K_R8) |
                            1u << tw_ktype_index(TW_TYPE_Q5_K_R8) |
                            1u << tw_ktype_index(TW_TYPE_Q6_K_R8);
    t->prefill_tiles |= packed;
    t->self_blocked_types |= packed;
    tw_isa_fill_dequant_scalar(t->dequant);
    t->quant_act[TW_ACT_Q8] = tw_quant_act_q8_scalar;
    t->quant_act[TW_ACT_Q8K] = tw_quant_act_q8k_scalar;
    t->dot_f32 = dot_f32;
    t->dot_rows_multi_f32 = dot_rows_multi_f32;
    t->axpy_rows_multi_f32 = axpy_rows_multi_f32;
    t->dot_rows_multi_h16 = dot_rows_multi_h16;
    t->axpy_rows_multi_h16 = axpy_rows_multi_h16;
    t->exp_shift_f32 = exp_shift_f32;
    t->scale_max_f32 = scale_max_f32;
    t->argmax_f32 = argmax_f32;
    t->silu_mul_f32 = silu_mul_f32;
    t->silu_f32 = silu_f32;
    t->delta_rule_f32 = delta_rule_f32;
}
