/* Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K rows packed eight to a
 * group (tw_pack_rows, their _R8 types): packing
 * is refused where it does not apply, and every ISA's packed kernels give
 * the scalar kernel's bits for every batch size, thread count and row
 * count (whole groups and plain tail rows), also on the pool-less path
 * that splits wide rows, and with decode prefetch on; and they compute
 * the same products as the plain rows they were packed from. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/kernels.h"
#include "tw/pool.h"
#include "tw/tensor.h"

#define MAX_N 40

static const char *const isas[] = {"scalar", "avx2", "avx2vnni", "avx512"};

static const tw_type plain_types[] = {TW_TYPE_Q8_0, TW_TYPE_Q4_0, TW_TYPE_Q5_0, TW_TYPE_Q5_1,
                                      TW_TYPE_Q4_K, TW_TYPE_Q5_K, TW_TYPE_Q6_K};
#define N_PLAIN (sizeof plain_types / sizeof plain_types[0])

typedef struct packed_mat {
    tw_type type, packed_type;
    size_t rows, cols, row_bytes;
    uint8_t *plain, *packed;
} packed_mat;

/* Columns for a shape given in 32-column blocks: as many of t's blocks. */
static size_t cols_of(tw_type t, size_t cols32)
{
    return cols32 / 32 * tw_type_block_elems(t);
}

/* The f16 head of a block of type t: its scale d, and m where the type
 * has a second one (Q5_1's offset, Q4_K's and Q5_K's dmin); Q6_K's d comes
 * last. */
static void set_heads(tw_type t, uint8_t *blk, uint16_t d, uint16_t m)
{
    memcpy(blk + (t == TW_TYPE_Q6_K ? 208 : 0), &d, 2);
    if (t == TW_TYPE_Q4_K || t == TW_TYPE_Q5_K || t == TW_TYPE_Q5_1)
        memcpy(blk + 2, &m, 2);
}

/* Random rows of type t: quantized random floats, or (raw) random bytes
 * under random finite scales (and Q5_1 offsets, Q4_K / Q5_K mins), the
 * integer paths' extremes (Q8_0 levels from -128 to 127, Q5_K's from 0 to
 * 31, 6-bit scales and mins up to 63). */
static void make(packed_mat *m, tw_type t, size_t rows, size_t cols, bool raw, tw_test_rng *rng)
{
    m->type = t;
    m->packed_type = tw_pack_type(t);
    m->rows = rows;
    m->cols = cols;
    m->row_bytes = tw_type_row_bytes(t, cols);
    m->plain = malloc(rows * m->row_bytes);
    m->packed = malloc(rows * m->row_bytes);
    float *tmp = malloc(cols * sizeof(float));
    assert_non_null(m->plain);
    assert_non_null(m->packed);
    assert_non_null(tmp);
    const size_t bb = tw_type_block_bytes(t);
    for (size_t r = 0; r < rows; r++) {
        uint8_t *row = m->plain + r * m->row_bytes;
        if (raw) {
            for (size_t i = 0; i < m->row_bytes; i++)
                row[i] = (uint8_t)tw_test_rand_u64(rng);
            for (size_t b = 0; b < cols / tw_type_block_elems(t); b++) {
                const uint16_t d = tw_f32_to_f16(tw_test_rand_f32(rng) * 0.02f);
                const uint16_t h = tw_f32_to_f16(tw_test_rand_f32(rng) * 0.01f);
                set_heads(t, row + b * bb, t == TW_TYPE_Q6_K ? h : d, h);
            }
        } else {
            for (size_t i = 0; i < cols; i++)
                tmp[i] = tw_test_rand_f32(rng) * (1.0f + (float)(i % 5));
            tw_quant_row(t, tmp, row, cols);
        }
    }
    free(tmp);
    assert_true(tw_pack_rows(t, m->plain, rows, cols, m->packed));
}

static void release(packed_mat *m)
{
    free(m->plain);
    free(m->packed);
}

static void fill_x(float *x, size_t n, tw_test_rng *rng)
{
    for (size_t i = 0; i < n; i++)
        x[i] = tw_test_rand_f32(rng) * ((i % 7) == 0 ? 3.0f : 1.0f);
}

static void test_pack_refusals(void **state)
{
    (void)state;
    uint8_t src[34 * 8] = {0}, dst[34 * 8];
    assert_int_equal(tw_pack_type(TW_TYPE_Q8_0), TW_TYPE_Q8_0_R8);
    assert_int_equal(tw_pack_type(TW_TYPE_Q4_0), TW_TYPE_Q4_0_R8);
    assert_int_equal(tw_pack_type(TW_TYPE_Q5_0), TW_TYPE_Q5_0_R8);
    assert_int_equal(tw_pack_type(TW_TYPE_Q4_K), TW_TYPE_Q4_K_R8);
    assert_int_equal(tw_pack_type(TW_TYPE_Q6_K), TW_TYPE_Q6_K_R8);
    assert_int_equal(tw_pack_type(TW_TYPE_Q5_K), TW_TYPE_Q5_K_R8);
    assert_int_equal(tw_pack_type(TW_TYPE_Q5_1), TW_TYPE_Q5_1_R8);
    assert_false(tw_pack_rows(TW_TYPE_Q4_K, src, 1, 32, dst)); /* not a whole block */
    assert_false(tw_pack_rows(TW_TYPE_Q5_K, src, 8, 64, dst));
    assert_int_equal(tw_pack_type(TW_TYPE_F16), TW_TYPE_F16);
    assert_int_equal(tw_pack_type(TW_TYPE_BF16), TW_TYPE_BF16);
    assert_false(tw_pack_rows(TW_TYPE_F16, src, 8, 32, dst));
    assert_false(tw_pack_rows(TW_TYPE_Q5_1_R8, src, 8, 32, dst));
    assert_false(tw_pack_rows(TW_TYPE_Q8_0_R8, src, 8, 32, dst));
    assert_false(tw_pack_rows(TW_TYPE_Q8_0, src, 8, 33, dst));
    assert_false(tw_pack_rows(TW_TYPE_Q4_0, NULL, 8, 32, dst));
    /* types made at load are never ones a file may name */
    tw_type t;
    assert_false(tw_type_supported(TW_TYPE_Q8_0_R8));
    assert_false(tw_type_supported(TW_TYPE_Q4_0_R8));
    assert_false(tw_type_supported(TW_TYPE_Q5_0_R8));
    assert_false(tw_type_supported(TW_TYPE_Q5_1_R8));
    assert_false(tw_type_supported(TW_TYPE_Q4_K_R8));
    assert_false(tw_type_supported(TW_TYPE_Q5_K_R8));
    assert_int_equal(tw_type_from_name("Q5_K_R8", &t, NULL), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_type_from_name("Q5_1_R8", &t, NULL), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_type_row_bytes(TW_TYPE_Q5_K_R8, 512), 352);
    assert_int_equal(tw_type_row_bytes(TW_TYPE_Q5_1_R8, 64), 48);
    assert_false(tw_type_supported(TW_TYPE_Q6_K_R8));
    assert_int_equal(tw_type_from_name("Q6_K_R8", &t, NULL), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_type_row_bytes(TW_TYPE_Q6_K_R8, 512), 420);
    assert_int_equal(tw_type_from_name("Q4_K_R8", &t, NULL), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_type_row_bytes(TW_TYPE_Q4_K_R8, 512), 288);
    assert_int_equal(tw_type_row_bytes(TW_TYPE_Q4_K_R8, 64), 0);
    assert_int_equal(tw_type_from_name("Q8_0_R8", &t, NULL), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_type_from_name("Q4_0_R8", &t, NULL), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_type_row_bytes(TW_TYPE_Q8_0_R8, 64), 68);
    assert_int_equal(tw_type_row_bytes(TW_TYPE_Q4_0_R8, 64), 36);
}

/* Row r, group lane j: the packed block holds row r's scale (and Q5_1's
 * offset) and its 4-byte runs where blocks.h says (Q5_0's and Q5_1's qh
 * with its bits reordered); rows past the last group stay as they were. */
static void test_pack_layout(void **state)
{
    (void)state;
    tw_test_rng rng = {0x9e3779b97f4a7c15ull};
    for (size_t k = 0; k < N_PLAIN; k++) {
        if (tw_type_block_elems(plain_types[k]) == 256)
            continue; /* test_pack_layout_q4_k, test_pack_layout_q6_k */
        packed_mat m;
        make(&m, plain_types[k], 11, 64, true, &rng);
        const bool q51 = m.type == TW_TYPE_Q5_1, q5 = q51 || m.type == TW_TYPE_Q5_0;
        const size_t bb = tw_type_block_bytes(m.type), hb = q51 ? 4 : 2, runs = (bb - hb) / 4;
        for (size_t r = 0; r < 8; r++)
            for (size_t b = 0; b < 2; b++) {
                const uint8_t *src = m.plain + r * m.row_bytes + b * bb;
                const uint8_t *blk = m.packed + b * 8 * bb;
                assert_memory_equal(blk + 2 * r, src, 2);
                if (q51)
                    assert_memory_equal(blk + 16 + 2 * r, src + 2, 2);
                for (size_t j = q5; j < runs; j++)
                    assert_memory_equal(blk + 8 * hb + 32 * j + 4 * r, src + hb + 4 * j, 4);
                for (size_t c = 0; q5 && c < 32; c++) {
                    const uint8_t *qh = blk + 8 * hb + 4 * r;
                    assert_int_equal(qh[c % 4] >> (c / 4) & 1, src[hb + c / 8] >> (c % 8) & 1);
                }
            }
        assert_memory_equal(m.packed + 8 * m.row_bytes, m.plain + 8 * m.row_bytes,
                            3 * m.row_bytes);
        release(&m);
    }
}

/* Q4_K_R8 and Q5_K_R8: row r's d and dmin, its sub-blocks' 6-bit scales
 * and mins split into the low-nibble and top-bits planes, its qs runs and
 * (Q5_K) its fifth bits in Q5_0_R8's order per sub-block, where blocks.h
 * says; rows past the last group stay as they were. */
static void check_layout_k45(tw_type type, uint64_t seed)
{
    tw_test_rng rng = {seed};
    packed_mat m;
    const bool q5 = type == TW_TYPE_Q5_K;
    const size_t bb = q5 ? 176 : 144, qs = q5 ? 48 : 16;
    make(&m, type, 10, 512, true, &rng);
    for (size_t r = 0; r < 8; r++)
        for (size_t b = 0; b < 2; b++) {
            const uint8_t *src = m.plain + r * m.row_bytes + b * bb;
            const uint8_t *blk = m.packed + b * 8 * bb;
            assert_memory_equal(blk + 2 * r, src, 2);
            assert_memory_equal(blk + 16 + 2 * r, src + 2, 2);
            for (int j = 0; j < 8; j++) {
                /* the 6-bit values as Q4_K's scales hold them */
                const uint8_t *q = src + 4;
                unsigned sc =
                    j < 4 ? q[j] & 63u : (q[j + 4] & 15u) | (unsigned)(q[j - 4] >> 6) << 4;
                unsigned mn = j < 4 ? q[j + 4] & 63u
                                    : (unsigned)(q[j + 4] >> 4) | (unsigned)(q[j] >> 6) << 4;
                const uint8_t lo = blk[32 + 8 * j + r];
                const unsigned hi = (unsigned)blk[96 + 4 * j + r / 2] >> (4 * (r % 2)) & 15u;
                assert_int_equal(lo & 15u, sc & 15u);
                assert_int_equal(lo >> 4, mn & 15u);
                assert_int_equal(hi & 3u, sc >> 4);
                assert_int_equal(hi >> 2, mn >> 4);
            }
            for (size_t g = 0; g < 4; g++)
                for (size_t k = 0; k < 8; k++)
                    assert_memory_equal(blk + 128 + (q5 ? 320 * g + 64 : 256 * g) + 32 * k + 4 * r,
                                        src + qs + 32 * g + 4 * k, 4);
            for (size_t j = 0; q5 && j < 8; j++)
                for (size_t c = 0; c < 32; c++) {
                    const uint8_t *word = blk + 128 + 320 * (j / 2) + 32 * (j % 2) + 4 * r;
                    assert_int_equal(word[c % 4] >> (c / 4) & 1, src[16 + c] >> j & 1);
                }
        }
    assert_memory_equal(m.packed + 8 * m.row_bytes, m.plain + 8 * m.row_bytes, 2 * m.row_bytes);
    release(&m);
}

static void test_pack_layout_q4_k(void **state)
{
    (void)state;
    check_layout_k45(TW_TYPE_Q4_K, 0x452821e638d01377ull);
}

static void test_pack_layout_q5_k(void **state)
{
    (void)state;
    check_layout_k45(TW_TYPE_Q5_K, 0xc0ac29b7c97c50ddull);
}

/* Q6_K_R8: row r's d, its scales in pairs, and its ql / ql / qh runs of
 * each half and step where blocks.h says. */
static void test_pack_layout_q6_k(void **state)
{
    (void)state;
    tw_test_rng rng = {0xbe5466cf34e90c6cull};
    packed_mat m;
    make(&m, TW_TYPE_Q6_K, 9, 512, true, &rng);
    for (size_t r = 0; r < 8; r++)
        for (size_t b = 0; b < 2; b++) {
            const uint8_t *src = m.plain + r * m.row_bytes + b * 210;
            const uint8_t *blk = m.packed + b * 8 * 210;
            assert_memory_equal(blk + 2 * r, src + 208, 2);
            for (size_t s = 0; s < 16; s++)
                assert_int_equal(blk[16 + 16 * (s / 2) + 2 * r + s % 2], src[192 + s]);
            for (size_t h = 0; h < 2; h++)
                for (size_t k = 0; k < 8; k++) {
                    const uint8_t *run = blk + 144 + 768 * h + 96 * k + 4 * r;
                    assert_memory_equal(run, src + 64 * h + 4 * k, 4);
                    assert_memory_equal(run + 32, src + 64 * h + 32 + 4 * k, 4);
                    assert_memory_equal(run + 64, src + 128 + 32 * h + 4 * k, 4);
                }
        }
    assert_memory_equal(m.packed + 8 * m.row_bytes, m.plain + 8 * m.row_bytes, m.row_bytes);
    release(&m);
}

/* Σ |w_c x_c| of row r of the plain rows: what the rounding of a dot
 * product of those rows scales with. */
static float magnitude(const packed_mat *m, size_t r, const float *x, float *row)
{
    tw_dequant_row(m->type, m->plain + r * m->row_bytes, row, m->cols);
    float s = 0.0f;
    for (size_t c = 0; c < m->cols; c++)
        s += fabsf(row[c] * x[c]);
    return s;
}

/* Every ISA, 1 and 2 threads, every batch size against the scalar kernel
 * one activation at a time, bit for bit; and close to the plain rows. */
static void test_packed_bits_every_isa(void **state)
{
    (void)state;
    static const size_t shapes[][2] = {{8, 32}, {13, 96}, {64, 448}, {130, 160}, {3, 64}, {29, 64}};
    static const size_t ns[] = {1, 2, 3, 5, 8, 9, 16, 17, 33, MAX_N};
    tw_test_rng rng = {0x243f6a8885a308d3ull};
    tw_pool *pools[2];
    assert_int_equal(tw_pool_create(1, &pools[0], NULL), TW_OK);
    assert_int_equal(tw_pool_create(2, &pools[1], NULL), TW_OK);
    for (size_t s = 0; s < N_PLAIN * (sizeof shapes / sizeof shapes[0]); s++) {
        packed_mat m;
        const size_t *shape = shapes[s / N_PLAIN];
        const tw_type pt = plain_types[s % N_PLAIN];
        make(&m, pt, shape[0], cols_of(pt, shape[1]), s / N_PLAIN % 2 == 1, &rng);
        size_t R = m.rows, C = m.cols;
        float *wrow = malloc(C * sizeof(float));
        assert_non_null(wrow);
        float *x = malloc(MAX_N * C * sizeof(float));
        float *want = malloc(MAX_N * R * sizeof(float));
        float *plain = malloc(R * sizeof(float));
        float *got = malloc(MAX_N * R * sizeof(float));
        assert_non_null(x);
        assert_non_null(want);
        assert_non_null(plain);
        assert_non_null(got);
        fill_x(x, MAX_N * C, &rng);
        assert_int_equal(tw_kernels_force_isa("scalar", NULL), TW_OK);
        for (size_t t = 0; t < MAX_N; t++) {
            tw_matvec(NULL, m.packed_type, m.packed, m.row_bytes, R, C, x + t * C, want + t * R);
            /* the same integer block dots, summed in another order */
            tw_matvec(NULL, m.type, m.plain, m.row_bytes, R, C, x + t * C, plain);
            for (size_t r = 0; r < R; r++)
                if (!(fabsf(plain[r] - want[t * R + r]) <=
                      1e-5f * (1.0f + magnitude(&m, r, x + t * C, wrow))))
                    fail_msg("%s %zux%zu act %zu row %zu: packed %.9g, plain %.9g",
                             tw_type_name(m.type), R, C, t, r,
                             (double)want[t * R + r], (double)plain[r]);
        }
        for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
            if (!tw_kernels_isa_available(isas[i]))
                continue;
            assert_int_equal(tw_kernels_force_isa(isas[i], NULL), TW_OK);
            for (size_t p = 0; p < 2; p++)
                for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
                    memset(got, 0xff, MAX_N * R * sizeof(float));
                    tw_matmul(pools[p], m.packed_type, m.packed, m.row_bytes, R, C, x, ns[k], got);
                    if (memcmp(got, want, ns[k] * R * sizeof(float)) != 0)
                        fail_msg("%s %s, %zu thread(s), %zux%zu, batch %zu: not the scalar bits",
                                 tw_type_name(m.packed_type), isas[i], p + 1, R, C, ns[k]);
                }
        }
        free(x);
        free(want);
        free(plain);
        free(got);
        free(wrow);
        release(&m);
    }
    assert_int_equal(tw_kernels_force_isa("auto", NULL), TW_OK);
    tw_pool_destroy(pools[0]);
    tw_pool_destroy(pools[1]);
}

/* Decode prefetch on (matrices from 256 KiB take it for every batch size)
 * changes only what is fetched early: every ISA still gives the scalar
 * bits for batches of 1-5 on a matrix large enough to take it. */
static void test_packed_decode_prefetch(void **state)
{
    (void)state;
    static const size_t ns[] = {1, 2, 3, 5};
    tw_test_rng rng = {0x13198a2e03707344ull};
    tw_pool *pool;
    assert_int_equal(tw_pool_create(2, &pool, NULL), TW_OK);
    for (size_t ti = 0; ti < N_PLAIN; ti++) {
        packed_mat m;
        const tw_type pt = plain_types[ti];
        make(&m, pt, 1032, cols_of(pt, 512), true, &rng);
        const size_t R = m.rows, C = m.cols, N = 5;
        assert_true(R * m.row_bytes >= (size_t)256 << 10);
        float *x = malloc(N * C * sizeof(float)), *want = malloc(N * R * sizeof(float));
        float *got = malloc(N * R * sizeof(float));
        assert_non_null(x);
        assert_non_null(want);
        assert_non_null(got);
        fill_x(x, N * C, &rng);
        assert_int_equal(tw_kernels_force_isa("scalar", NULL), TW_OK);
        for (size_t t = 0; t < N; t++)
            tw_matvec(NULL, m.packed_type, m.packed, m.row_bytes, R, C, x + t * C, want + t * R);
        tw_kernels_set_decode_prefetch(true);
        for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
            if (!tw_kernels_isa_available(isas[i]))
                continue;
            assert_int_equal(tw_kernels_force_isa(isas[i], NULL), TW_OK);
            for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
                memset(got, 0xff, N * R * sizeof(float));
                tw_matmul(pool, m.packed_type, m.packed, m.row_bytes, R, C, x, ns[k], got);
                if (memcmp(got, want, ns[k] * R * sizeof(float)) != 0)
                    fail_msg("%s %s, batch %zu, decode prefetch on: not the scalar bits",
                             tw_type_name(m.packed_type), isas[i], ns[k]);
            }
        }
        tw_kernels_set_decode_prefetch(false);
        free(x);
        free(want);
        free(got);
        release(&m);
    }
    assert_int_equal(tw_kernels_force_isa("auto", NULL), TW_OK);
    tw_pool_destroy(pool);
}

/* Every weight byte one value (0xFF: the highest levels, 6-bit scales and
 * mins; 0x80: Q8_0's -128) against activations all of one sign, which
 * quantize to +-127 or -128: the integer sums' widest values, where an
 * int16 partial sum would wrap. Every ISA gives the scalar bits, which
 * agree with the plain rows, with and without a pool (batches through a
 * pool take the kernels that read quad panels). */
static void test_packed_extremes(void **state)
{
    (void)state;
    static const uint8_t fills[] = {0xFF, 0x80, 0x77};
    static const size_t ns[] = {1, 4, 5, 8};
    tw_pool *pool;
    assert_int_equal(tw_pool_create(1, &pool, NULL), TW_OK);
    for (size_t k = 0; k < N_PLAIN; k++)
        for (size_t f = 0; f < sizeof fills; f++)
            for (int sign = -1; sign <= 1; sign += 2) {
                const tw_type t = plain_types[k];
                packed_mat m = {.type = t, .packed_type = tw_pack_type(t), .rows = 16};
                m.cols = cols_of(t, 256);
                m.row_bytes = tw_type_row_bytes(t, m.cols);
                m.plain = malloc(m.rows * m.row_bytes);
                m.packed = malloc(m.rows * m.row_bytes);
                assert_non_null(m.plain);
                assert_non_null(m.packed);
                memset(m.plain, fills[f], m.rows * m.row_bytes);
                const size_t bb = tw_type_block_bytes(t);
                const uint16_t d = tw_f32_to_f16(0.01f), dm = tw_f32_to_f16(0.005f);
                for (size_t b = 0; b < m.rows * m.row_bytes / bb; b++)
                    set_heads(t, m.plain + b * bb, d, dm);
                assert_true(tw_pack_rows(t, m.plain, m.rows, m.cols, m.packed));
                float x[8 * 2048], want[8 * 16], got[8 * 16], plain[16], wrow[2048];
                for (size_t i = 0; i < 8 * m.cols; i++)
                    x[i] = (float)sign * (1.0f + (float)(i % 3) * 1e-3f);
                assert_int_equal(tw_kernels_force_isa("scalar", NULL), TW_OK);
                tw_matmul(NULL, m.packed_type, m.packed, m.row_bytes, m.rows, m.cols, x, 8, want);
                tw_matvec(NULL, t, m.plain, m.row_bytes, m.rows, m.cols, x, plain);
                for (size_t r = 0; r < m.rows; r++)
                    if (!(fabsf(plain[r] - want[r]) <= 1e-5f * (1.0f + magnitude(&m, r, x, wrow))))
                        fail_msg("%s fill %#x sign %d row %zu: packed %.9g, plain %.9g",
                                 tw_type_name(t), fills[f], sign, r, (double)want[r],
                                 (double)plain[r]);
                for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
                    if (!tw_kernels_isa_available(isas[i]))
                        continue;
                    assert_int_equal(tw_kernels_force_isa(isas[i], NULL), TW_OK);
                    for (size_t n = 0; n < 2 * sizeof ns / sizeof ns[0]; n++) {
                        tw_pool *via = n % 2 ? pool : NULL;
                        tw_matmul(via, m.packed_type, m.packed, m.row_bytes, m.rows, m.cols, x,
                                  ns[n / 2], got);
                        if (memcmp(got, want, ns[n / 2] * m.rows * sizeof(float)) != 0)
                            fail_msg("%s %s fill %#x sign %d batch %zu%s: not the scalar bits",
                                     tw_type_name(m.packed_type), isas[i], fills[f], sign,
                                     ns[n / 2], via ? " (pool)" : "");
                    }
                }
                release(&m);
            }
    assert_int_equal(tw_kernels_force_isa("auto", NULL), TW_OK);
    tw_pool_destroy(pool);
}

/* Rows wider than the pool-less path's on-stack activations go through it
 * in column chunks; each output's chain continues across them, so the bits
 * are the pool's. */
static void test_packed_wide_without_pool(void **state)
{
    (void)state;
    tw_test_rng rng = {0x13198a2e03707344ull};
    tw_pool *pool;
    assert_int_equal(tw_pool_create(2, &pool, NULL), TW_OK);
    for (size_t k = 0; k < N_PLAIN; k++) {
        packed_mat m;
        make(&m, plain_types[k], 19, 8192 + cols_of(plain_types[k], 320), false, &rng);
        float *x = malloc(m.cols * sizeof(float));
        float a[19], b[19];
        assert_non_null(x);
        fill_x(x, m.cols, &rng);
        tw_matvec(pool, m.packed_type, m.packed, m.row_bytes, m.rows, m.cols, x, a);
        tw_matvec(NULL, m.packed_type, m.packed, m.row_bytes, m.rows, m.cols, x, b);
        assert_memory_equal(a, b, sizeof a);
        free(x);
        release(&m);
    }
    tw_pool_destroy(pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_refusals),
        cmocka_unit_test(test_pack_layout),
        cmocka_unit_test(test_pack_layout_q4_k),
        cmocka_unit_test(test_pack_layout_q5_k),
        cmocka_unit_test(test_pack_layout_q6_k),
        cmocka_unit_test(test_packed_bits_every_isa),
        cmocka_unit_test(test_packed_decode_prefetch),
        cmocka_unit_test(test_packed_extremes),
        cmocka_unit_test(test_packed_wide_without_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
