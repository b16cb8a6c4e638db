/* Internal interface between the kernel front end (matvec.c, dispatch.c) and
 * the per-ISA implementations (kernels_scalar.c, kernels_avx2.c,
 * kernels_avx512.c).
 *
 * Quantized weights are multiplied with activations quantized to int8 in one
 * of two layouts, kept as separate arrays so SIMD loads stay aligned:
 *   TW_ACT_Q8  (for Q8_0, Q4_0, Q5_0, Q5_1): one f32 scale per 32 values;
 *   TW_ACT_Q8K (for K types):    one f32 scale per 256 values.
 * Both carry the sum of every 16 quantized values, which the kernels need for
 * the weight offsets (Q5_1's m, Q6_K's -32, the K-type mins).
 * Quantization is symmetric with levels in [-127, 127] so the unsigned x
 * signed byte products of _mm256_maddubs_epi16 cannot saturate.
 */
#ifndef TW_KERNELS_INTERNAL_H
#define TW_KERNELS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/tensor.h"

typedef enum tw_act_kind {
    TW_ACT_F32, /* activations used as f32 (F32/F16/BF16 weights) */
    TW_ACT_Q8,
    TW_ACT_Q8K,
} tw_act_kind;

typedef struct tw_act {
    const float *x; /* f32 activations (always set) */
    int8_t *qs;     /* cols */
    float *d;       /* cols / 32 or cols / 256 */
    int16_t *bsums; /* cols / 16 */
    /* Q8 rows: 8 times the sum of every 4 consecutive qs (cols / 4), one
     * int32 lane of a block dot's worth, so Q4_0 tiles can multiply the
     * unsigned levels 0..15 and take off8 off each lane instead of
     * centring the levels (the same lanes either way); NULL for Q8K rows. */
    int32_t *off8;
    /* Q8 rows: -128 times each 32-value block's sum (cols / 32), what the
     * packed kernels' biased weights add to a block dot; NULL for Q8K. */
    int32_t *bneg;
    /* Batch copies of qs, filled (by the ISA's batch_copy) for batches of
     * at least TW_ACT_QU_MIN_N Q8-layout rows, else NULL:
     * qu: qs[i] + 128 as unsigned bytes (cols), for tiles that feed the
     * activations as the unsigned operand of a u8 x s8 dot product and so
     * expand each weight block once for all of them;
     * qw: qs widened to int16, per 32-value block its 16 even-indexed
     * values then its 16 odd-indexed ones (cols), for tiles that multiply
     * int16 words, each weight block split the same way once for all. */
    uint8_t *qu;
    int16_t *qw;
    /* The quad panel of this row's group of four (rows 4q..4q+3 of a batch
     * of at least two Q8-layout rows), when the ISA's kernels for one of
     * the batch's weight types read it (tw_isa_table.quad_types), else
     * NULL. */
    const uint8_t *quad;
} tw_act;

/* A quad panel holds four Q8-layout activation rows block by block, so
 * that one pointer walks all four: for each 32-value block TW_QUAD_BLOCK
 * bytes, the four rows' 32 qs, then their four d (at TW_QUAD_D) and four
 * bneg (at TW_QUAD_BNEG). Slots past the batch's last row hold nothing:
 * a kernel reads only the rows it is given. Plain numbers: the assembly
 * kernels spell them into their instructions. */
#define TW_QUAD_ACTS  4
#define TW_QUAD_D     128
#define TW_QUAD_BNEG  144
#define TW_QUAD_BLOCK 160

/* Bytes of one quad panel for rows of cols values. */
static inline size_t tw_quad_bytes(size_t cols)
{
    return cols / 32 * TW_QUAD_BLOCK;
}

#define TW_ACT_QU_MIN_N 2

/* Batch tiles of the 32-value types take activations in groups of at most
 * 8, with their scales staged on the stack for rows of up to
 * TW_TILE_MAX_NB blocks (2 x 16 KiB). */
#define TW_TILE_MAX_NB 512


/* Size of the next group for `left` (>= 2) activations: as few groups as
 * there can be, of near-equal size (9 = 5 + 4, not 8 + 1, as a group of
 * one would read all the weights again for a single output row). */
static inline size_t tw_tile_group(size_t left)
{
    size_t groups = (left + 7) / 8;
    return (left + groups - 1) / groups;
}

/* Scales of TB (2..8) activations, block-major with a stride of 8: block
 * i's at dT[8 * i + t], zeros from t = TB on, so every block's scales are
 * one aligned vector. */
static inline void tw_gather_scales(const tw_act *acts, size_t nb, int TB, float *dT)
{
    for (size_t i = 0; i < nb; i++)
        for (int k = 0; k < 8; k++)
            dT[8 * i + (size_t)k] = k < TB ? acts[k].d[i] : 0.0f;
}

/* Inside a tile driver (with n_act, acts, nb, t and a dT of
 * TW_TILE_MAX_NB * 8 floats in scope): every group of 2..8 activations from
 * acts + t on, their scales gathered into dT, through ROWS(TB, arg), which
 * runs every row against the group of TB at acts + t; t ends past the last
 * group (at most one activation is left). */
#define TW_FOR_TILE_GROUPS(ROWS, arg)                                                          \
    while (n_act - t >= 2) {                                                                   \
        size_t tb = tw_tile_group(n_act - t);                                                  \
        tw_gather_scales(acts + t, nb, (int)tb, dT);                                           \
        switch (tb) {                                                                          \
        case 8: ROWS(8, arg); break;                                                           \
        case 7: ROWS(7, arg); break;                                                           \
        case 6: ROWS(6, arg); break;                                                           \
        case 5: ROWS(5, arg); break;                                                           \
        case 4: ROWS(4, arg); break;                                                           \
        case 3: ROWS(3, arg); break;                                                           \
        default: ROWS(2, arg); break;                                                          \
        }                                                                                      \
        t += tb;                                                                               \
    }

/* F16 / BF16 batch drivers. H16_RB rows at a time go against every group
 * of the batch (near-equal groups of at most H16_TB activations, up to
 * TW_H16_GROUPS groups at once) before the next rows, so each weight comes
 * from memory once per batch, not once per group; and column chunk by
 * column chunk (TW_H16_KC), so the rows' chunk stays in L1 across the
 * groups. TILE(h, row_elems, i0, i1, cols, acts, st, y, y_stride, pf, RB,
 * TB, is_bf16) runs RB rows against TB activations over [i0, i1),
 * carrying its accumulators (VEC vectors) across chunks in st; the
 * including file defines H16_RB, H16_TB and H16_GROUP(TILE, RB), which
 * runs the group of tb activations at acts + t through TW_H16_TILE. A
 * single activation (decode) reads row after row, start to end. */
#define TW_H16_KC 1024
#define TW_H16_GROUPS 16

/* Inside a tile: the RB x TB accumulator pairs s0/s1 start from zero (a
 * first column chunk) or from where the previous chunk left them in st,
 * and go back to st for the next. */
#define TW_H16_STATE_IN(s0, s1, st, i0, zero)                                                   \
    _Pragma("GCC unroll 4") for (int r = 0; r < RB; r++)                                        \
        _Pragma("GCC unroll 4") for (int t = 0; t < TB; t++)                                    \
    {                                                                                           \
        s0[r][t] = i0 ? st[2 * (r * TB + t)] : zero;                                            \
        s1[r][t] = i0 ? st[2 * (r * TB + t) + 1] : zero;                                        \
    }
#define TW_H16_STATE_OUT(s0, s1, st)                                                            \
    _Pragma("GCC unroll 4") for (int r = 0; r < RB; r++)                                        \
        _Pragma("GCC unroll 4") for (int t = 0; t < TB; t++)                                    \
    {                                                                                           \
        st[2 * (r * TB + t)] = s0[r][t];                                                        \
        st[2 * (r * TB + t) + 1] = s1[r][t];                                                    \
    }

#define TW_H16_TILE(TILE, RB, TB)                                                                  \
    TILE(h + r * re, re, i0, i1, cols, acts + t, st + g * 2 * H16_RB * H16_TB,                     \
         y + t * y_stride + r, y_stride, RB > 1 ? (size_t)RB : 0, RB, TB, bf16)

#define TW_H16_ROW_TILE(TILE, RB)                                                               \
    for (size_t i0 = 0; i0 < cols; i0 += TW_H16_KC) {                                           \
        const size_t i1 = cols - i0 > TW_H16_KC ? i0 + TW_H16_KC : cols;                        \
        for (size_t g = 0, t = t0; g < groups; g++) {                                           \
            const size_t tb = g < n_big ? tb_big : tb_big - 1;                                  \
            H16_GROUP(TILE, RB);                                                                \
            t += tb;                                                                            \
        }                                                                                       \
    }

/* Decode prefetch (tw_kernels_decode_prefetch) leaves matrices smaller than
 * this alone: they are likely still in the caches from the step before,
 * where fetching ahead only adds work (with every matrix of the first
 * default draft model's, ~100 KB each, fetched ahead, its rounds ran up to
 * ~10% slower; with these left alone, as fast as without prefetch). */
#define TW_DECODE_PREFETCH_MIN_BYTES ((size_t)256 << 10)

/* Whether one activation's pass over a matrix of `bytes` fetches ahead. */
bool tw_decode_prefetch_for(size_t bytes);

/* Tells the calling thread's kernels that the calls that follow are pieces
 * of one run of `bytes` (0: they are not), so decode prefetch is decided by
 * the run, as it was when one call took it whole. */
void tw_decode_stream(size_t bytes);

/* A decode step (one activation) takes the rows one at a time, fetching
 * each row's columns in the next row ahead where decode prefetch says so. */
/* Rows ahead of the one being read that a decode product over F16 / BF16
 * rows fetches: the next row alone is too close when rows are short. With
 * qwen2-0.5b's 896-column rows (1792 bytes) fetching 4 KiB on decoded its
 * F16 file 1.06-1.08x as fast as fetching the next row, on AVX2 and
 * AVX-512 alike (Zen 5 guest, 2 threads, 30 alternated pairs of 16-token
 * bursts, faster in 28-30 of them); 2 and 8 KiB read the same as 4. */
#define TW_H16_FETCH_BYTES 4096
static inline size_t tw_h16_fetch_rows(size_t row_bytes)
{
    return row_bytes == 0 || row_bytes >= TW_H16_FETCH_BYTES
               ? 1
               : (TW_H16_FETCH_BYTES + row_bytes - 1) / row_bytes;
}
#define TW_H16_DRIVER(ATTR, name, TILE, VEC, is_bf16)                                              \
    ATTR static void rows_##name(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,     \
                                 const tw_act *acts, size_t n_act, float *y, size_t y_stride)      \
    {                                                                                              \
        const uint16_t *h = (const uint16_t *)(const void *)w;                                     \
        const size_t re = row_bytes / 2;                                                           \
        const int bf16 = is_bf16;                                                                  \
        VEC st[TW_H16_GROUPS * 2 * H16_RB * H16_TB];                                               \
        if (n_act == 1) {                                                                          \
            const size_t pf =                                                                      \
                tw_decode_prefetch_for(rows * row_bytes) ? tw_h16_fetch_rows(row_bytes) : 0;       \
            for (size_t r = 0; r < rows; r++)                                                      \
                TILE(h + r * re, re, 0, cols, cols, acts, st, y + r, y_stride, pf, 1, 1, bf16);    \
            return;                                                                                \
        }                                                                                          \
        for (size_t t0 = 0; t0 < n_act;) {                                                         \
            size_t n = n_act - t0;                                                                 \
            if (n > TW_H16_GROUPS * H16_TB)                                                        \
                n = TW_H16_GROUPS * H16_TB;                                                        \
            const size_t groups = (n + H16_TB - 1) / H16_TB;                                       \
            const size_t tb_big = (n + groups - 1) / groups;                                       \
            /* the first n_big groups take tb_big activations, the rest one less */                \
            const size_t n_big = n - groups * (tb_big - 1);                                        \
            size_t r = 0;                                                                          \
            for (; r + H16_RB <= rows; r += H16_RB)                                                \
                TW_H16_ROW_TILE(TILE, H16_RB);                                                     \
            for (; r < rows; r++)                                                                  \
                TW_H16_ROW_TILE(TILE, 1);                                                          \
            t0 += n;                                                                               \
        }                                                                                          \
    }

/* Bytes of quantized-activation scratch for one row of cols values
 * (cols a multiple of 256 for Q8K, 32 for Q8), with each array 64-byte
 * aligned. */
size_t tw_act_bytes(tw_act_kind kind, size_t cols);

/* Carves the arrays of one activation row out of buf (tw_act_bytes bytes,
 * 64-byte aligned). */
void tw_act_layout(tw_act_kind kind, size_t cols, void *buf, tw_act *act);

/* Which activation layout a weight type's kernels consume. */
tw_act_kind tw_act_kind_for(tw_type type);

/* Number of weight types with kernels, and a dense index for each. */
#define TW_KTYPE_COUNT 17
int tw_ktype_index(tw_type type); /* -1 for unsupported */

/* y[t * y_stride + r] = dot(row r, acts[t]) for r < rows, t < n_act; rows
 * start row_bytes apart. Every output is accumulated block by block in the
 * same order whatever rows and n_act are, so a row's result does not depend
 * on how many rows or activations share the call. */
typedef void (*tw_rows_fn)(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                           const tw_act *acts, size_t n_act, float *y, size_t y_stride);

/* y[t * y_stride + r] = dot(row r, x + t * cols) for r < rows, t < n, over
 * half-precision rows (row_bytes apart) and f32 activations, each output
 * one multiply-add chain in column order (h16_panels.h); wp is scratch of
 * TW_PANELS_SCRATCH_BYTES, 64-byte aligned. */
typedef void (*tw_panels_fn)(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                             const float *x, size_t n, float *y, size_t y_stride, float *wp);
#define TW_PANELS_SCRATCH_BYTES ((size_t)256 * 32 * sizeof(float))

/* The packed types (Q8_0_R8, Q4_0_R8, Q5_0_R8, Q5_1_R8, Q4_K_R8, Q5_K_R8, Q6_K_R8;
 * kernels/blocks.h) in scalar arithmetic, which every ISA's packed kernels
 * reproduce bit for bit: row r of a packed range of `rows` rows (starting
 * on a group), blocks [b0, b1) of the type against the activation a, whose
 * arrays start at block b0, each block's exact int32 dot (for Q4_K_R8 the
 * scaled sub-block dots and the mins' term, two exact int32 sums; for
 * Q6_K_R8 the scaled sub-block dots less 32 times the scaled activation
 * sums, one) scaled into the running acc by fused multiply-adds. */
float tw_r8_dot(tw_type type, const uint8_t *w, size_t row_bytes, size_t rows, size_t r,
                size_t b0, size_t b1, const tw_act *a, float acc);

/* Rows r0..rows-1 of a packed range through tw_r8_dot (all of a range's
 * rows with r0 = 0: the scalar kernel; the rows past the last whole group:
 * the SIMD kernels' tail). Other arguments as tw_rows_fn. */
void tw_rows_r8_tail(tw_type type, const uint8_t *w, size_t row_bytes, size_t rows, size_t r0,
                     size_t cols, const tw_act *acts, size_t n_act, float *y, size_t y_stride);

/* The packed types' batch drivers take a chunk of this many activations
 * at a time against every row before the next chunk: a chunk's
 * activations stay in L2 while the rows stream past, instead of all of
 * them streaming past every group of rows (3-11% less time for 128-512
 * activations, 2 threads). A multiple of TW_QUAD_ACTS. */
#define TW_R8_ACT_CHUNK 64

/* The AVX2 Q4_0_R8 batch kernel over quad panels (packed_asm_x86.c):
 * acts[0].quad must be set, and acts must start a batch, so that every
 * fourth row from acts[0] on starts its quad. Arguments as tw_rows_fn. */
void tw_rows_q4_quads_avx2(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                           const tw_act *acts, size_t n_act, float *y, size_t y_stride);
/* The AVX2 Q8_0_R8 batch kernel over quad panels, the same way. */
void tw_rows_q8_quads_avx2(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                           const tw_act *acts, size_t n_act, float *y, size_t y_stride);
/* The same two with AVX-VNNI's multiply-adds (the same bits). */
void tw_rows_q4_quads_avxvnni(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                              const tw_act *acts, size_t n_act, float *y, size_t y_stride);
void tw_rows_q8_quads_avxvnni(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                              const tw_act *acts, size_t n_act, float *y, size_t y_stride);
/* The AVX512-VNNI kernels for one activation (Q8_0, Q4_0, Q5_0, Q4_K,
 * Q6_K) and for a few (Q4_K, Q6_K: up to four a pass) of
 * packed_vnni_one_x86.c, which the batch drivers of packed_vnni_x86.c hand
 * such calls to. Arguments as tw_rows_fn. */
#define TW_ROWS_FN_DECL(name)                                                                      \
    void name(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols, const tw_act *acts,    \
              size_t n_act, float *y, size_t y_stride)
TW_ROWS_FN_DECL(tw_rows_q8_one_avx512);
TW_ROWS_FN_DECL(tw_rows_q4_one_avx512);
TW_ROWS_FN_DECL(tw_rows_q5_one_avx512);
TW_ROWS_FN_DECL(tw_rows_q4k_one_avx512);
TW_ROWS_FN_DECL(tw_rows_q6k_one_avx512);
TW_ROWS_FN_DECL(tw_rows_q4k_few_avx512);
TW_ROWS_FN_DECL(tw_rows_q6k_few_avx512);

static inline bool tw_type_packed(tw_type type)
{
    return type == TW_TYPE_Q8_0_R8 || type == TW_TYPE_Q4_0_R8 || type == TW_TYPE_Q5_0_R8 ||
           type == TW_TYPE_Q5_1_R8 || type == TW_TYPE_Q4_K_R8 || type == TW_TYPE_Q5_K_R8 ||
           type == TW_TYPE_Q6_K_R8;
}

/* Fills act->qs/d/bsums from act->x (cols values). */
typedef void (*tw_actq_fn)(size_t cols, tw_act *act);

typedef void (*tw_dequant_fn)(const void *src, float *dst, size_t n);

typedef float (*tw_dot_fn)(const float *a, const float *b, size_t n);

/* Attention scores and weighted sums of values for nq queries at once
 * (see tw_dot_rows_multi_f32 and tw_axpy_rows_multi_f32). A score is
 * computed by the same operations whatever the key and query grouping,
 * and each output adds the value rows in order, so nq = 1 is the
 * single-query case (tw_dot_rows_f32, tw_axpy_rows_f32) bit for bit. */
typedef void (*tw_dot_rows_multi_fn)(const float *q, size_t q_stride, size_t nq, const float *K,
                                     size_t n, size_t d, float *out, size_t out_stride);
typedef void (*tw_axpy_rows_multi_fn)(const float *p, size_t p_stride, size_t nq, const float *V,
                                      size_t n, size_t d, float *acc, size_t acc_stride);
/* The same over IEEE-half keys / values, bit for bit the f32 kernels on
 * the rows converted to f32 (tw_dot_rows_multi_h16). */
typedef void (*tw_dot_rows_h16_fn)(const float *q, size_t q_stride, size_t nq, const uint16_t *K,
                                   size_t n, size_t d, float *out, size_t out_stride);
typedef void (*tw_axpy_rows_h16_fn)(const float *p, size_t p_stride, size_t nq,
                                    const uint16_t *V, size_t n, size_t d, float *acc,
                                    size_t acc_stride);

typedef struct tw_isa_table {
    const char *name;
    tw_rows_fn rows[TW_KTYPE_COUNT];
    tw_dequant_fn dequant[TW_KTYPE_COUNT];
    /* Half-precision batch panels (F16, BF16; NULL elsewhere), one of the
     * paths tw_kernels_set_f16_prefill chooses for prompts. */
    tw_panels_fn panels[TW_KTYPE_COUNT];
    size_t panel_rows;       /* rows of one of those panels */
    tw_actq_fn quant_act[3]; /* indexed by tw_act_kind; [TW_ACT_F32] unused */
    tw_dot_fn dot_f32;
    tw_dot_rows_multi_fn dot_rows_multi_f32;
    tw_axpy_rows_multi_fn axpy_rows_multi_f32;
    tw_dot_rows_h16_fn dot_rows_multi_h16;
    tw_axpy_rows_h16_fn axpy_rows_multi_h16;
    /* x[i] = exp(x[i] - mx), returning the sum (tw_exp_shift_f32) */
    float (*exp_shift_f32)(float *x, size_t n, float mx);
    /* x[i] *= scale, returning the largest (tw_scale_max_f32) */
    float (*scale_max_f32)(float *x, size_t n, float scale);
    /* NaN to -INFINITY, returning the first largest's index (tw_argmax_f32) */
    size_t (*argmax_f32)(float *x, size_t n);
    /* g[i] = silu(g[i]) * u[i] (tw_silu_mul_f32) */
    void (*silu_mul_f32)(float *g, const float *u, size_t n);
    /* x[i] = silu(x[i]) (tw_silu_f32) */
    void (*silu_f32)(float *x, size_t n);
    /* f32 to IEEE half with tw_f32_to_f16's bits (tw_quant_row's F16) */
    void (*to_f16)(const float *src, uint16_t *dst, size_t n);
    /* one delta-rule step of a DeltaNet head (tw_delta_rule_f32) */
    void (*delta_rule_f32)(float *S, const float *src, const float *q, const float *k,
                           const float *v, float decay, float beta, size_t dk, size_t dv,
                           float *mem, float *out);
    /* Bit tw_ktype_index(type) set: large batches of this type run faster on
     * the ISA's own batch kernels than on dequantized tiles + sgemm. */
    unsigned prefill_tiles;
    /* Fills a Q8 row's batch copy (tw_act.qu or .qw) into buf, which holds
     * batch_copy_bytes per column; NULL when the ISA's tiles use none.
     * Bit tw_ktype_index(type) of batch_copy_types set: that type's batch
     * tiles read the copy when there is one. */
    void (*batch_copy)(size_t cols, tw_act *act, void *buf);
    size_t batch_copy_bytes;
    unsigned batch_copy_types;
    size_t batch_copy_max_cols; /* wider rows go without */
    /* Bit tw_ktype_index(type) set: that type's batch kernel blocks rows
     * and columns for the caches itself (TW_H16_DRIVER) and takes every
     * row of a task in one call. */
    unsigned self_blocked_types;
    /* Bit tw_ktype_index(type) set: that type's batch kernels read the
     * quad panels (tw_act.quad) when a batch has them. */
    unsigned quad_types;
} tw_isa_table;

/* Fills t with the functions of one ISA; entries an ISA lacks are left as
 * they were, so callers start from the scalar table and overlay. */
void tw_isa_fill_scalar(tw_isa_table *t);
void tw_isa_fill_avx2(tw_isa_table *t);
void tw_isa_fill_avx512(tw_isa_table *t);
/* The packed kernels of packed_x86.c into t. */
void tw_isa_fill_packed_avx2(tw_isa_table *t);
/* Over a filled AVX2 table: the batch kernels AVX-VNNI speeds up. */
void tw_isa_fill_avx2vnni(tw_isa_table *t);
void tw_isa_fill_packed_avx512(tw_isa_table *t);

/* The half-precision panels (h16_panels_avx2.c, h16_panels_avx512.c). */
void tw_isa_fill_panels_avx2(tw_isa_table *t);
void tw_isa_fill_panels_avx512(tw_isa_table *t);

/* The scalar (reference) dequantizers, in tw_ktype_index order. */
void tw_isa_fill_dequant_scalar(tw_dequant_fn *dq);
void tw_isa_fill_dequant_avx2(tw_dequant_fn *dq);
/* The AVX2 f32 vector kernels (vecops_avx2.c) into t. */
void tw_isa_fill_vecops_avx2(tw_isa_table *t);
/* The AVX-512 vector kernels that differ from those (vecops_avx512.c). */
void tw_isa_fill_vecops_avx512(tw_isa_table *t);
/* The AVX2 f32 dot product, for the f32-weight rows. */
float tw_dot_f32_avx2(const float *a, const float *b, size_t n);

/* The table kernels dispatch through now. */
const tw_isa_table *tw_isa_current(void);

/* For the measurements that choose kernel settings (tune.c,
 * tune_prefill.c): a monotonic clock in microseconds, and the median of n
 * values (sorts v). */
double tw_tune_now_us(void);
double tw_tune_median(double *v, unsigned n);

/* Scalar activation quantizers, exposed so SIMD files can finish a tail. */
void tw_quant_act_q8_scalar(size_t cols, tw_act *act);
void tw_quant_act_q8k_scalar(size_t cols, tw_act *act);

#endif
