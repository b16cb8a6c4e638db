/* tw_matvec / tw_matmul for every type and every ISA the CPU has, against an
 * f64 reference computed from the scalar dequantization, on random data with
 * awkward shapes, with and without a pool. */
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

static const tw_type all_types[] = {TW_TYPE_F32,  TW_TYPE_F16,  TW_TYPE_BF16,
                                    TW_TYPE_Q8_0, TW_TYPE_Q4_0, TW_TYPE_Q5_0,
                                    TW_TYPE_Q5_1, TW_TYPE_Q4_K, TW_TYPE_Q5_K,
                                    TW_TYPE_Q6_K};
#define N_TYPES (sizeof all_types / sizeof all_types[0])
static const char *const isas[] = {"scalar", "avx2", "avx512"};

typedef struct mat {
    tw_type type;
    size_t rows, cols, row_bytes;
    uint8_t *w;
    float *wf; /* scalar dequantization, rows x cols */
} mat;

static bool is_quant(tw_type t)
{
    return tw_type_block_elems(t) > 1;
}

/* Weights quantized from random floats; for quantized types every third
 * matrix instead gets raw random bytes (extreme levels and scales included)
 * to exercise the integer paths at their limits. Rows are padded by 6
 * bytes so row_bytes != the packed size, as a strided view would be. */
static void make_mat(mat *m, tw_type t, size_t rows, size_t cols, tw_test_rng *rng, bool raw)
{
    m->type = t;
    m->rows = rows;
    m->cols = cols;
    size_t packed = tw_type_row_bytes(t, cols);
    assert_true(packed > 0);
    m->row_bytes = packed + (t == TW_TYPE_F32 ? 8 : 6);
    m->w = calloc(rows, m->row_bytes);
    m->wf = malloc(rows * cols * sizeof(float));
    float *tmp = malloc(cols * sizeof(float));
    assert_non_null(m->w);
    assert_non_null(m->wf);
    assert_non_null(tmp);
    for (size_t r = 0; r < rows; r++) {
        uint8_t *row = m->w + r * m->row_bytes;
        if (raw && is_quant(t)) {
            for (size_t i = 0; i < packed; i++)
                row[i] = (uint8_t)tw_test_rand_u64(rng);
            size_t bb = tw_type_block_bytes(t);
            size_t off = t == TW_TYPE_Q6_K ? 208 : 0;
            for (size_t b = 0; b < packed / bb; b++) {
                uint16_t h = tw_f32_to_f16(tw_test_rand_f32(rng) * 0.01f);
                memcpy(row + b * bb + off, &h, 2);
                if (t == TW_TYPE_Q4_K || t == TW_TYPE_Q5_K || t == TW_TYPE_Q5_1) {
                    h = tw_f32_to_f16(tw_test_rand_f32(rng) * 0.01f);
                    memcpy(row + b * bb + 2, &h, 2);
                }
            }
        } else {
            for (size_t i = 0; i < cols; i++)
                tmp[i] = tw_test_rand_f32(rng) * (1.0f + (float)(i % 7));
            tw_quant_row(t, tmp, row, cols);
        }
    }
    /* the reference comes from the scalar kernels; the caller's choice of
     * kernels is put back after */
    const char *isa = tw_kernels_isa();
    assert_int_equal(tw_kernels_force_isa("scalar", NULL), TW_OK);
    for (size_t r = 0; r < rows; r++)
        tw_dequant_row(t, m->w + r * m->row_bytes, m->wf + r * cols, cols);
    assert_int_equal(tw_kernels_force_isa(isa, NULL), TW_OK);
    free(tmp);
}

static void free_mat(mat *m)
{
    free(m->w);
    free(m->wf);
}

/* Group size of the activation quantization the kernels use for type t. */
static size_t act_group(tw_type t)
{
    if (t == TW_TYPE_Q8_0 || t == TW_TYPE_Q4_0)
        return 32;
    return is_quant(t) ? 256 : 0;
}

/* Exact (f64) y for row r plus a tolerance: float rounding relative to
 * sum |w x|, and for quantized types the worst case of rounding x to int8
 * levels of its group's amax / 127. */
static void reference(const mat *m, size_t r, const float *x, bool act_quant, double *y,
                      double *tol)
{
    const float *w = m->wf + r * m->cols;
    double s = 0, sabs = 0, qerr = 0;
    size_t g = act_group(m->type);
    for (size_t i = 0; i < m->cols; i++) {
        s += (double)w[i] * x[i];
        sabs += fabs((double)w[i] * x[i]);
    }
    if (act_quant && g) {
        for (size_t g0 = 0; g0 < m->cols; g0 += g) {
            double amax = 0, wsum = 0;
            for (size_t i = g0; i < g0 + g; i++) {
                amax = fmax(amax, fabs(x[i]));
                wsum += fabs(w[i]);
            }
            qerr += wsum * amax / 127.0 * 0.5;
        }
    }
    *y = s;
    *tol = qerr * 1.001 + 2e-5 * sabs + 1e-30;
}

static void check_rows(const mat *m, const float *x, const float *y, bool act_quant,
                       const char *what)
{
    for (size_t r = 0; r < m->rows; r++) {
        double ref, tol;
        reference(m, r, x, act_quant, &ref, &tol);
        if (!(fabs(y[r] - ref) <= tol))
            fail_msg("%s %s [%s] %zux%zu row %zu: got %.9g want %.9g (tol %.3g)",
                     tw_type_name(m->type), what, tw_kernels_isa(), m->rows, m->cols, r,
                     (double)y[r], ref, tol);
    }
}

static void fill_x(float *x, size_t n, tw_test_rng *rng)
{
    for (size_t i = 0; i < n; i++)
        x[i] = tw_test_rand_f32(rng) * ((i % 5) == 0 ? 4.0f : 1.0f);
}

static void test_matvec_all_types_isas(void **state)
{
    (void)state;
    tw_test_rng rng = {42};
    tw_pool *pool3 = NULL;
    assert_int_equal(tw_pool_create(3, &pool3, NULL), TW_OK);
    const size_t shapes[][2] = {{1, 256}, {3, 512}, {67, 768}, {17, 256 * 33}};
    int case_no = 0;
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        tw_type t = all_types[ti];
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++, case_no++) {
            size_t rows = shapes[si][0], cols = shapes[si][1];
            if (!is_quant(t))
                cols += 3; /* any width works for the plain types */
            mat m;
            make_mat(&m, t, rows, cols, &rng, case_no % 3 == 1);
            float *x = malloc(cols * sizeof *x);
            float *y = malloc(rows * sizeof *y);
            float *y_scalar = malloc(rows * sizeof *y);
            float *y_pool = malloc(rows * sizeof *y);
            assert_non_null(x);
            assert_non_null(y);
            assert_non_null(y_scalar);
            assert_non_null(y_pool);
            fill_x(x, cols, &rng);
            for (size_t ii = 0; ii < 3; ii++) {
                if (!tw_kernels_isa_available(isas[ii]))
                    continue;
                assert_int_equal(tw_kernels_force_isa(isas[ii], NULL), TW_OK);
                tw_matvec(NULL, t, m.w, m.row_bytes, rows, cols, x, y);
                check_rows(&m, x, y, true, "matvec");
                tw_matvec(pool3, t, m.w, m.row_bytes, rows, cols, x, y_pool);
                check_rows(&m, x, y_pool, true, "matvec pool");
                if (ii == 0) {
                    memcpy(y_scalar, y_pool, rows * sizeof *y);
                } else {
                    /* same integer algorithm: only float summation order differs */
                    for (size_t r = 0; r < rows; r++) {
                        double ref, tol;
                        reference(&m, r, x, false, &ref, &tol);
                        if (fabs(y_pool[r] - y_scalar[r]) > tol)
                            fail_msg("%s %s vs scalar row %zu: %.9g vs %.9g", tw_type_name(t),
                                     isas[ii], r, (double)y_pool[r], (double)y_scalar[r]);
                    }
                }
            }
            tw_kernels_force_isa(NULL, NULL);
            free(x);
            free(y);
            free(y_scalar);
            free(y_pool);
            free_mat(&m);
        }
    }
    tw_pool_destroy(pool3);
}

/* The split of rows across threads never changes a result's bits. */
static void test_matvec_independent_of_threads(void **state)
{
    (void)state;
    tw_test_rng rng = {7};
    tw_pool *p1 = NULL, *p2 = NULL, *p4 = NULL;
    assert_int_equal(tw_pool_create(1, &p1, NULL), TW_OK);
    assert_int_equal(tw_pool_create(2, &p2, NULL), TW_OK);
    assert_int_equal(tw_pool_create(4, &p4, NULL), TW_OK);
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        mat m;
        make_mat(&m, all_types[ti], 301, 512, &rng, false);
        float x[512], y1[301], y2[301], y4[301];
        fill_x(x, 512, &rng);
        tw_matvec(p1, m.type, m.w, m.row_bytes, m.rows, m.cols, x, y1);
        tw_matvec(p2, m.type, m.w, m.row_bytes, m.rows, m.cols, x, y2);
        tw_matvec(p4, m.type, m.w, m.row_bytes, m.rows, m.cols, x, y4);
        assert_memory_equal(y1, y2, sizeof y1);
        assert_memory_equal(y1, y4, sizeof y1);
        free_mat(&m);
    }
    tw_pool_destroy(p1);
    tw_pool_destroy(p2);
    tw_pool_destroy(p4);
}

/* Decode prefetch (fetching ahead in one activation's pass over a matrix of
 * 256 KiB or more) changes no result's bits, for any type on any ISA. */
static void test_matvec_decode_prefetch_same_bits(void **state)
{
    (void)state;
    tw_test_rng rng = {0x5eed};
    const size_t rows = 301, cols = 1024;
    float x[1024], off[301], on[301];
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        mat m;
        make_mat(&m, all_types[ti], rows, cols, &rng, false);
        if (rows * m.row_bytes < ((size_t)256 << 10)) {
            free_mat(&m);
            continue; /* most quantized types: below the bound at this shape */
        }
        fill_x(x, cols, &rng);
        for (size_t ii = 0; ii < 3; ii++) {
            if (!tw_kernels_isa_available(isas[ii]))
                continue;
            assert_int_equal(tw_kernels_force_isa(isas[ii], NULL), TW_OK);
            tw_kernels_set_decode_prefetch(false);
            tw_matvec(NULL, m.type, m.w, m.row_bytes, rows, cols, x, off);
            tw_kernels_set_decode_prefetch(true);
            memset(on, 0xff, sizeof on);
            tw_matvec(NULL, m.type, m.w, m.row_bytes, rows, cols, x, on);
            if (memcmp(on, off, sizeof on) != 0)
                fail_msg("%s %s: decode prefetch changed the result", tw_type_name(m.type),
                         isas[ii]);
            check_rows(&m, x, on, true, "matvec with decode prefetch");
        }
        tw_kernels_set_decode_prefetch(false);
        tw_kernels_force_isa(NULL, NULL);
        free_mat(&m);
    }
}

static void test_matmul_all_types(void **state)
{
    (void)state;
    tw_test_rng rng = {99};
    tw_pool *pool = NULL;
    assert_int_equal(tw_pool_create(2, &pool, NULL), TW_OK);
    const size_t ns[] = {1, 2, 5, 16, 37};
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        tw_type t = all_types[ti];
        size_t rows = 83, cols = 512;
        mat m;
        make_mat(&m, t, rows, cols, &rng, ti % 2 == 1);
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            size_t n = ns[ni];
            float *x = malloc(n * cols * sizeof *x);
            float *y = malloc(n * rows * sizeof *y);
            float *ynull = malloc(n * rows * sizeof *y);
            assert_non_null(x);
            assert_non_null(y);
            assert_non_null(ynull);
            fill_x(x, n * cols, &rng);
            for (size_t ii = 0; ii < 3; ii++) {
                if (!tw_kernels_isa_available(isas[ii]))
                    continue;
                assert_int_equal(tw_kernels_force_isa(isas[ii], NULL), TW_OK);
                tw_matmul(pool, t, m.w, m.row_bytes, rows, cols, x, n, y);
                tw_matmul(NULL, t, m.w, m.row_bytes, rows, cols, x, n, ynull);
                for (size_t i = 0; i < n; i++) {
                    /* the BLAS path is f32 throughout; the small-batch path
                     * quantizes activations like matvec */
                    check_rows(&m, x + i * cols, y + i * rows, true, "matmul");
                    check_rows(&m, x + i * cols, ynull + i * rows, true, "matmul NULL pool");
                }
            }
            tw_kernels_force_isa(NULL, NULL);
            free(x);
            free(y);
            free(ynull);
        }
        free_mat(&m);
    }
    tw_pool_destroy(pool);
}

/* A prefill batch against rows too wide for one dequantized tile: the
 * tiles then take a run of columns at a time (a block boundary, and for
 * the plain types a last run of odd width), summed into the same output. */
static void test_matmul_wide_rows(void **state)
{
    (void)state;
    tw_test_rng rng = {77};
    tw_pool *pool = NULL;
    assert_int_equal(tw_pool_create(2, &pool, NULL), TW_OK);
    enum { ROWS = 300, N = 20 };
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        tw_type t = all_types[ti];
        size_t cols = is_quant(t) ? 4096 : 4099;
        mat m;
        make_mat(&m, t, ROWS, cols, &rng, false);
        float *x = malloc(N * cols * sizeof *x);
        float *y = malloc(N * ROWS * sizeof *y);
        assert_non_null(x);
        assert_non_null(y);
        fill_x(x, N * cols, &rng);
        for (size_t ii = 0; ii < 3; ii++) {
            if (!tw_kernels_isa_available(isas[ii]))
                continue;
            assert_int_equal(tw_kernels_force_isa(isas[ii], NULL), TW_OK);
            for (size_t i = 0; i < N * ROWS; i++)
                y[i] = NAN;
            tw_matmul(pool, t, m.w, m.row_bytes, ROWS, cols, x, N, y);
            for (size_t i = 0; i < N; i++)
                check_rows(&m, x + i * cols, y + i * ROWS, true, "wide matmul");
        }
        tw_kernels_force_isa(NULL, NULL);
        free(x);
        free(y);
        free_mat(&m);
    }
    tw_pool_destroy(pool);
}

/* A prefill batch gives the same bits whatever the number of threads, on
 * every path it can take (each ISA; for half-precision weights tiles,
 * panels and sgemm): the pool's size changes how many rows a dequantized
 * tile holds, and must not change where its column runs are cut. */
static void test_matmul_independent_of_threads(void **state)
{
    (void)state;
    tw_test_rng rng = {31};
    enum { ROWS = 300, N = 20, POOLS = 4 };
    tw_pool *pools[POOLS];
    for (int p = 0; p < POOLS; p++)
        assert_int_equal(tw_pool_create(p + 1, &pools[p], NULL), TW_OK);
    static const tw_f16_prefill paths[] = {TW_F16_PREFILL_TILES, TW_F16_PREFILL_PANELS,
                                           TW_F16_PREFILL_BLAS};
    const tw_f16_prefill before = tw_kernels_f16_prefill();
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        tw_type t = all_types[ti];
        size_t cols = is_quant(t) ? 4096 : 4099;
        mat m;
        make_mat(&m, t, ROWS, cols, &rng, false);
        float *x = malloc(N * cols * sizeof *x);
        float *y1 = malloc(N * ROWS * sizeof *y1), *yp = malloc(N * ROWS * sizeof *yp);
        assert_non_null(x);
        assert_non_null(y1);
        assert_non_null(yp);
        fill_x(x, N * cols, &rng);
        const bool half = t == TW_TYPE_F16 || t == TW_TYPE_BF16;
        for (size_t ii = 0; ii < 3; ii++) {
            if (!tw_kernels_isa_available(isas[ii]))
                continue;
            assert_int_equal(tw_kernels_force_isa(isas[ii], NULL), TW_OK);
            for (size_t pi = 0; pi < (half ? 3 : 1); pi++) {
                if (half) {
                    if (!tw_kernels_f16_prefill_has(paths[pi]))
                        continue;
                    tw_kernels_set_f16_prefill(paths[pi]);
                }
                tw_matmul(pools[0], t, m.w, m.row_bytes, ROWS, cols, x, N, y1);
                for (int p = 1; p < POOLS; p++) {
                    memset(yp, 0xff, N * ROWS * sizeof *yp);
                    tw_matmul(pools[p], t, m.w, m.row_bytes, ROWS, cols, x, N, yp);
                    if (memcmp(y1, yp, N * ROWS * sizeof *yp) != 0)
                        fail_msg("%s %s%s%s: %d threads differ from one", tw_type_name(t), isas[ii],
                                 half ? " " : "",
                                 half ? tw_kernels_f16_prefill_name(paths[pi]) : "", p + 1);
                }
            }
        }
        tw_kernels_set_f16_prefill(before);
        tw_kernels_force_isa(NULL, NULL);
        free(x);
        free(y1);
        free(yp);
        free_mat(&m);
    }
    for (int p = 0; p < POOLS; p++)
        tw_pool_destroy(pools[p]);
}

/* Batched rows give the same bits as one matvec per row on the integer
 * path (small batches, and K types at any size), so batching decode steps
 * does not change a sequence's output. */
static void test_small_batch_matches_matvec(void **state)
{
    (void)state;
    tw_test_rng rng = {5};
    tw_pool *pool = NULL;
    assert_int_equal(tw_pool_create(2, &pool, NULL), TW_OK);
    enum { ROWS = 45, MAXCOLS = 2059, MAXN = 37 };
    static float x[MAXN * MAXCOLS], y[MAXN * ROWS];
    float yv[ROWS];
    /* 416 columns: 13 blocks of 32, not a whole number of the 8-block
     * groups the decode tiles stage scales in; 203: a tail past the last
     * group of 16 and of 8 for the f16 rows; 2059: the f16 tiles' column
     * chunks, then both tails; 1024: 16 rows of it are wide enough that
     * the pool quantizes them (tw_matmul's parallel preparation) */
    static const size_t widths[] = {512, 416, 203, 2059, 1024};
    const size_t n_widths = sizeof widths / sizeof widths[0];
    for (size_t ii = 0; ii < 3; ii++) {
        if (!tw_kernels_isa_available(isas[ii]))
            continue;
        assert_int_equal(tw_kernels_force_isa(isas[ii], NULL), TW_OK);
        for (size_t ti = 0; ti < N_TYPES * n_widths; ti++) {
            tw_type t = all_types[ti % N_TYPES];
            const size_t COLS = widths[ti / N_TYPES];
            if (COLS % tw_type_block_elems(t) != 0)
                continue;
            /* the types whose wide batches stay on the integer kernels:
             * none for the scalar ones */
            bool int8 = ii > 0 && (t == TW_TYPE_Q4_K || t == TW_TYPE_Q5_K || t == TW_TYPE_Q6_K ||
                                   (ii == 2 && (t == TW_TYPE_Q8_0 || t == TW_TYPE_Q4_0)));
            const size_t ns[] = {2, 3, 4, 7, 16, MAXN};
            mat m;
            make_mat(&m, t, ROWS, COLS, &rng, false);
            for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
                size_t n = ns[k];
                if (n > 16 && !int8)
                    continue; /* sgemm path: f32, not bit-identical to matvec */
                fill_x(x, n * COLS, &rng);
                tw_matmul(pool, t, m.w, m.row_bytes, ROWS, COLS, x, n, y);
                for (size_t i = 0; i < n; i++) {
                    tw_matvec(pool, t, m.w, m.row_bytes, ROWS, COLS, x + i * COLS, yv);
                    if (memcmp(yv, y + i * ROWS, sizeof yv) != 0)
                        fail_msg("%s [%s] n=%zu: batch row %zu differs from matvec",
                                 tw_type_name(t), isas[ii], n, i);
                }
            }
            free_mat(&m);
        }
    }
    tw_kernels_force_isa(NULL, NULL);
    tw_pool_destroy(pool);
}

/* tw_matmul_multi gives each part exactly tw_matmul's bits, fused or not:
 * q/k/v-like parts of different heights, mixed types that share an
 * activation layout, a mix that does not (each part on its own then), and
 * batches on both sides of the integer/sgemm switch. */
static void test_matmul_multi_matches_matmul(void **state)
{
    (void)state;
    tw_test_rng rng = {17};
    tw_pool *pool = NULL;
    assert_int_equal(tw_pool_create(2, &pool, NULL), TW_OK);
    enum { COLS = 512, MAXN = 20 };
    static const size_t rows[3] = {64, 16, 33};
    static const tw_type sets[][3] = {
        {TW_TYPE_Q8_0, TW_TYPE_Q8_0, TW_TYPE_Q8_0},
        {TW_TYPE_Q4_K, TW_TYPE_Q6_K, TW_TYPE_Q4_K},
        {TW_TYPE_Q8_0, TW_TYPE_Q4_K, TW_TYPE_F16}, /* three activation layouts */
        {TW_TYPE_F16, TW_TYPE_F16, TW_TYPE_F16},
    };
    static float x[MAXN * COLS], y[3][MAXN * 64], ref[MAXN * 64];
    const size_t ns[] = {1, 3, 16, MAXN};
    for (size_t ii = 0; ii < 3; ii++) {
        if (!tw_kernels_isa_available(isas[ii]))
            continue;
        assert_int_equal(tw_kernels_force_isa(isas[ii], NULL), TW_OK);
        for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++) {
            mat m[3];
            tw_matmul_part parts[3];
            for (int k = 0; k < 3; k++) {
                make_mat(&m[k], sets[si][k], rows[k], COLS, &rng, false);
                parts[k] = (tw_matmul_part){.type = m[k].type, .w = m[k].w,
                                            .row_bytes = m[k].row_bytes, .rows = rows[k],
                                            .y = y[k]};
            }
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                size_t n = ns[ni];
                fill_x(x, n * COLS, &rng);
                tw_matmul_multi(pool, parts, 3, COLS, x, n);
                for (int k = 0; k < 3; k++) {
                    tw_matmul(pool, m[k].type, m[k].w, m[k].row_bytes, rows[k], COLS, x, n, ref);
                    if (memcmp(ref, y[k], n * rows[k] * sizeof(float)) != 0)
                        fail_msg("set %zu part %d [%s] n=%zu: multi differs from matmul", si, k,
                                 isas[ii], n);
                }
            }
            for (int k = 0; k < 3; k++)
                free_mat(&m[k]);
        }
    }
    tw_kernels_force_isa(NULL, NULL);
    tw_pool_destroy(pool);
}

/* What tw_matmul_pair's callback saw: each output row's calls, the ranges'
 * alignment, and both parts' outputs as they stood at the call. */
enum { PAIR_ROWS = 200, PAIR_COLS = 256, PAIR_MAXN = 20 };
typedef struct pair_seen {
    size_t n;
    const float *ya, *yb;
    int calls[PAIR_ROWS];
    bool misaligned;
    float at_call[2][PAIR_MAXN * PAIR_ROWS];
} pair_seen;

static void pair_done(void *ctx, size_t r0, size_t r1)
{
    pair_seen *ps = ctx;
    if (r0 % 16 != 0 || (r1 % 16 != 0 && r1 != PAIR_ROWS) || r1 > PAIR_ROWS || r0 >= r1) {
        ps->misaligned = true;
        return;
    }
    for (size_t r = r0; r < r1; r++)
        ps->calls[r]++;
    for (size_t a = 0; a < ps->n; a++)
        for (size_t r = r0; r < r1; r++) {
            ps->at_call[0][a * PAIR_ROWS + r] = ps->ya[a * PAIR_ROWS + r];
            ps->at_call[1][a * PAIR_ROWS + r] = ps->yb[a * PAIR_ROWS + r];
        }
}

/* tw_matmul_pair gives both parts tw_matmul's bits, hands every output
 * row to the callback exactly once, in ranges starting on multiples of 16,
 * only once both parts' values for those rows are final; and declines,
 * computing nothing, without a pool, for parts of different heights and
 * for batches that go to sgemm (F16 past 16 rows, but with AVX-512). */
static void test_matmul_pair(void **state)
{
    (void)state;
    tw_test_rng rng = {23};
    tw_pool *pool = NULL;
    assert_int_equal(tw_pool_create(2, &pool, NULL), TW_OK);
    static const tw_type types[] = {TW_TYPE_Q8_0, TW_TYPE_Q4_0, TW_TYPE_Q4_K, TW_TYPE_F16};
    static float x[PAIR_MAXN * PAIR_COLS], y[2][PAIR_MAXN * PAIR_ROWS], ref[PAIR_MAXN * PAIR_ROWS];
    static pair_seen ps;
    const size_t ns[] = {1, 3, 16, PAIR_MAXN};
    for (size_t ii = 0; ii < 3; ii++) {
        if (!tw_kernels_isa_available(isas[ii]))
            continue;
        assert_int_equal(tw_kernels_force_isa(isas[ii], NULL), TW_OK);
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            mat m[2];
            tw_matmul_part parts[2];
            for (int k = 0; k < 2; k++) {
                make_mat(&m[k], types[ti], PAIR_ROWS, PAIR_COLS, &rng, false);
                parts[k] = (tw_matmul_part){.type = m[k].type, .w = m[k].w,
                                            .row_bytes = m[k].row_bytes, .rows = PAIR_ROWS,
                                            .y = y[k]};
            }
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                size_t n = ns[ni];
                fill_x(x, n * PAIR_COLS, &rng);
                memset(&ps, 0, sizeof ps);
                ps.n = n;
                ps.ya = y[0];
                ps.yb = y[1];
                bool ran = tw_matmul_pair(pool, parts, PAIR_COLS, x, n, pair_done, &ps);
                /* past 16 rows a type may go to sgemm (which ones is the ISA's
                 * choice: F16 does but with AVX-512, whose own f16 tiles take
                 * every batch); up to 16 every type stays on its kernels */
                const bool f16_sgemm = strcmp(isas[ii], "avx512") != 0;
                if ((!ran && n <= 16) || (types[ti] == TW_TYPE_F16 && n > 16 && ran == f16_sgemm))
                    fail_msg("type %d [%s] n=%zu: pair ran %d", (int)types[ti], isas[ii], n, ran);
                if (!ran) {
                    for (size_t r = 0; r < PAIR_ROWS; r++)
                        assert_int_equal(ps.calls[r], 0);
                    continue;
                }
                assert_false(ps.misaligned);
                for (size_t r = 0; r < PAIR_ROWS; r++)
                    if (ps.calls[r] != 1)
                        fail_msg("type %d [%s] n=%zu: row %zu done %d times", (int)types[ti],
                                 isas[ii], n, r, ps.calls[r]);
                for (int k = 0; k < 2; k++) {
                    tw_matmul(pool, m[k].type, m[k].w, m[k].row_bytes, PAIR_ROWS, PAIR_COLS, x, n,
                              ref);
                    if (memcmp(ref, y[k], n * PAIR_ROWS * sizeof(float)) != 0 ||
                        memcmp(ref, ps.at_call[k], n * PAIR_ROWS * sizeof(float)) != 0)
                        fail_msg("type %d [%s] n=%zu part %d: differs from matmul at the call",
                                 (int)types[ti], isas[ii], n, k);
                }
            }
            memset(&ps, 0, sizeof ps);
            assert_false(tw_matmul_pair(NULL, parts, PAIR_COLS, x, 1, pair_done, &ps));
            parts[1].rows = PAIR_ROWS - 16;
            assert_false(tw_matmul_pair(pool, parts, PAIR_COLS, x, 1, pair_done, &ps));
            for (size_t r = 0; r < PAIR_ROWS; r++)
                assert_int_equal(ps.calls[r], 0);
            for (int k = 0; k < 2; k++)
                free_mat(&m[k]);
        }
    }
    tw_kernels_force_isa(NULL, NULL);
    tw_pool_destroy(pool);
}

static void test_reserve_and_bad_shapes(void **state)
{
    (void)state;
    tw_pool *pool = NULL;
    tw_err err;
    assert_int_equal(tw_pool_create(2, &pool, &err), TW_OK);
    assert_int_equal(tw_kernels_reserve(pool, 4864, 64, &err), TW_OK);
    assert_int_equal(tw_kernels_reserve(NULL, 4864, 64, &err), TW_OK);
    float x[32] = {0}, y[4] = {1, 2, 3, 4};
    uint8_t w[4 * 34] = {0};
    /* cols not a whole number of blocks, or rows too short: no access, y untouched */
    tw_matvec(pool, TW_TYPE_Q8_0, w, 34, 4, 31, x, y);
    tw_matvec(pool, TW_TYPE_Q8_0, w, 20, 4, 32, x, y);
    tw_matvec(pool, (tw_type)3, w, 34, 4, 32, x, y);
    assert_true(y[0] == 1 && y[3] == 4);
    /* zero columns: an empty dot product is 0 */
    tw_matvec(pool, TW_TYPE_F32, w, 0, 4, 0, x, y);
    assert_true(y[0] == 0 && y[3] == 0);
    tw_pool_destroy(pool);
}

static void test_dot_f32(void **state)
{
    (void)state;
    tw_test_rng rng = {11};
    float a[1003], b[1003];
    fill_x(a, 1003, &rng);
    fill_x(b, 1003, &rng);
    const size_t ns[] = {0, 1, 7, 8, 15, 16, 33, 1003};
    for (size_t ii = 0; ii < 3; ii++) {
        if (!tw_kernels_isa_available(isas[ii]))
            continue;
        tw_kernels_force_isa(isas[ii], NULL);
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            double ref = 0, sabs = 0;
            for (size_t i = 0; i < ns[k]; i++) {
                ref += (double)a[i] * b[i];
                sabs += fabs((double)a[i] * b[i]);
            }
            assert_true(fabs(tw_dot_f32(a, b, ns[k]) - ref) <= 1e-5 * sabs + 1e-30);
        }
    }
    tw_kernels_force_isa(NULL, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matvec_all_types_isas),
        cmocka_unit_test(test_matvec_independent_of_threads),
        cmocka_unit_test(test_matvec_decode_prefetch_same_bits),
        cmocka_unit_test(test_matmul_all_types),
        cmocka_unit_test(test_matmul_wide_rows),
        cmocka_unit_test(test_matmul_independent_of_threads),
        cmocka_unit_test(test_small_batch_matches_matvec),
        cmocka_unit_test(test_matmul_multi_matches_matmul),
        cmocka_unit_test(test_matmul_pair),
        cmocka_unit_test(test_reserve_and_bad_shapes),
        cmocka_unit_test(test_dot_f32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
