/* F16 prompts on the ISA's tiles, its panels or through sgemm
 * (tw_kernels_tune_f16_prefill, tw_hw_f16_prefill): refusals, a real
 * measurement on every ISA whose choice follows its own numbers and is
 * applied, the modes, and a product that is right every way (on the tiles
 * with decode's bits, the other paths not). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tw/hw.h"
#include "tw/kernels.h"
#include "tw/pool.h"

static void test_refusals(void **state)
{
    (void)state;
    tw_pool *pool;
    assert_int_equal(tw_pool_create(1, &pool, NULL), TW_OK);
    tw_f16_prefill_tune t;
    tw_err err;
    tw_kernels_set_f16_prefill(TW_F16_PREFILL_BLAS);
    assert_int_equal(tw_kernels_tune_f16_prefill(NULL, 0.05, &t, &err), TW_INVALID_ARGUMENT);
    /* a refused call leaves the tiles, the safe choice */
    assert_int_equal(tw_kernels_f16_prefill(), TW_F16_PREFILL_TILES);
    tw_kernels_set_f16_prefill(TW_F16_PREFILL_PANELS);
    assert_int_equal(tw_kernels_tune_f16_prefill(pool, 0.05, NULL, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_kernels_f16_prefill(), TW_F16_PREFILL_TILES);
    assert_int_equal(tw_kernels_tune_f16_prefill(pool, 0.0, &t, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "seconds"));
    assert_int_equal(tw_kernels_tune_f16_prefill(pool, 11.0, &t, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_kernels_tune_f16_prefill(pool, NAN, &t, &err), TW_INVALID_ARGUMENT);
    /* an out-of-range path is the tiles */
    tw_kernels_set_f16_prefill((tw_f16_prefill)7);
    assert_int_equal(tw_kernels_f16_prefill(), TW_F16_PREFILL_TILES);
    tw_pool_destroy(pool);
}

/* The choice follows the medians the tune reports: the least time, but the
 * tiles unless beaten by 5%. */
static void expect_consistent(const tw_f16_prefill_tune *t)
{
    const double med[3] = {t->us_tiles, t->us_panels, t->us_blas};
    double least = 0;
    for (int p = 0; p < 3; p++)
        if (med[p] > 0 && (least == 0 || med[p] < least))
            least = med[p];
    if (t->path == TW_F16_PREFILL_TILES) {
        assert_true(med[0] > 0 && med[0] < least * 1.05);
    } else {
        assert_true(med[t->path] == least);
        assert_true(med[0] == 0 || med[0] >= least * 1.05);
    }
    assert_true(t->gain > 0);
    assert_int_equal(tw_kernels_f16_prefill(), t->path);
}

static void test_measures_and_applies(void **state)
{
    (void)state;
    tw_pool *pool;
    assert_int_equal(tw_pool_create(2, &pool, NULL), TW_OK);
    static const char *const isas[] = {"scalar", "avx2", "avx512"};
    for (size_t i = 0; i < 3; i++) {
        if (tw_kernels_force_isa(isas[i], NULL) != TW_OK)
            continue;
        tw_f16_prefill_tune t;
        tw_kernels_set_f16_prefill(TW_F16_PREFILL_PANELS);
        assert_int_equal(tw_kernels_tune_f16_prefill(pool, 0.05, &t, NULL), TW_OK);
        if (i == 0) {
            /* no tiles or panels for F16 prompts: nothing to choose */
            assert_int_equal(t.rounds, 0);
            assert_int_equal(t.path, TW_F16_PREFILL_BLAS);
            assert_int_equal(tw_kernels_f16_prefill(), TW_F16_PREFILL_BLAS);
            continue;
        }
        assert_true(t.rounds >= 3);
        assert_true(t.us_panels > 0 && t.us_blas > 0);
        /* AVX2 has no F16 tiles for prompts, AVX-512 has */
        assert_int_equal(t.us_tiles > 0, i == 2);
        expect_consistent(&t);
    }
    tw_kernels_force_isa("auto", NULL);
    tw_kernels_set_f16_prefill(TW_F16_PREFILL_TILES);
    tw_pool_destroy(pool);
}

static void test_hw_modes(void **state)
{
    (void)state;
    tw_f16_prefill_tune t;
    tw_err err;
    char text[320];
    assert_int_equal(tw_hw_f16_prefill("blas", 1, &t, &err), TW_OK);
    assert_int_equal(t.path, TW_F16_PREFILL_BLAS);
    assert_int_equal(tw_kernels_f16_prefill(), TW_F16_PREFILL_BLAS);
    tw_hw_f16_prefill_text("blas", &t, text, sizeof text);
    assert_non_null(strstr(text, "sgemm"));
    assert_non_null(strstr(text, "--f16-prefill blas"));
    assert_int_equal(tw_hw_f16_prefill("panels", 1, &t, &err), TW_OK);
    assert_int_equal(tw_kernels_f16_prefill(), TW_F16_PREFILL_PANELS);
    tw_hw_f16_prefill_text("panels", &t, text, sizeof text);
    assert_non_null(
        strstr(text, tw_kernels_f16_prefill_has(TW_F16_PREFILL_PANELS) ? "panels" : "sgemm"));
    assert_int_equal(tw_hw_f16_prefill("tiles", 1, &t, &err), TW_OK);
    assert_int_equal(tw_kernels_f16_prefill(), TW_F16_PREFILL_TILES);
    tw_kernels_set_f16_prefill(TW_F16_PREFILL_BLAS);
    assert_int_equal(tw_hw_f16_prefill("sometimes", 1, &t, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "f16-prefill"));
    assert_int_equal(tw_kernels_f16_prefill(), TW_F16_PREFILL_TILES);
    assert_int_equal(tw_hw_f16_prefill(NULL, 1, &t, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_hw_f16_prefill("auto", 0, &t, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_hw_f16_prefill("auto", 2, &t, &err), TW_OK);
    assert_int_equal(tw_kernels_f16_prefill(), t.path);
    tw_hw_f16_prefill_text("auto", &t, text, sizeof text);
    assert_non_null(strstr(text, "auto"));
    if (t.rounds > 0)
        assert_non_null(strstr(text, "through sgemm, median of"));
    tw_kernels_set_f16_prefill(TW_F16_PREFILL_TILES);
}

/* A 40-token prompt against 200 x 320 F16 weights every way: each row
 * within float rounding of decode's, and on the tiles (AVX-512) equal to
 * it bit for bit. */
static void test_product_either_way(void **state)
{
    (void)state;
    enum { ROWS = 200, COLS = 320, N = 40 };
    tw_pool *pool;
    assert_int_equal(tw_pool_create(2, &pool, NULL), TW_OK);
    uint16_t *w = malloc(sizeof *w * ROWS * COLS);
    float *x = malloc(sizeof *x * N * COLS), *row = malloc(sizeof *row * COLS);
    float *y = malloc(sizeof *y * N * ROWS), *ref = malloc(sizeof *ref * N * ROWS);
    assert_true(w && x && row && y && ref);
    srand(7);
    for (size_t r = 0; r < ROWS; r++) {
        for (size_t c = 0; c < COLS; c++)
            row[c] = (float)(rand() % 1000) / 1000.0f - 0.5f;
        tw_quant_row(TW_TYPE_F16, row, w + r * COLS, COLS);
    }
    for (size_t i = 0; i < (size_t)N * COLS; i++)
        x[i] = (float)(rand() % 2000) / 1000.0f - 1.0f;
    for (size_t i = 0; i < N; i++)
        tw_matvec(pool, TW_TYPE_F16, w, COLS * 2, ROWS, COLS, x + i * COLS, ref + i * ROWS);
    for (int p = TW_F16_PREFILL_TILES; p <= TW_F16_PREFILL_BLAS; p++) {
        const char *name = tw_kernels_f16_prefill_name((tw_f16_prefill)p);
        tw_kernels_set_f16_prefill((tw_f16_prefill)p);
        memset(y, 0, sizeof *y * N * ROWS);
        tw_matmul(pool, TW_TYPE_F16, w, COLS * 2, ROWS, COLS, x, N, y);
        for (size_t i = 0; i < (size_t)N * ROWS; i++)
            if (fabsf(y[i] - ref[i]) > 1e-4f * (1.0f + fabsf(ref[i])))
                fail_msg("%s: output %zu is %g, decode gives %g", name, i, (double)y[i],
                         (double)ref[i]);
        if (!strcmp(tw_kernels_isa(), "avx512")) {
            /* the panels and sgemm sum each output in their own order, so
             * some of 8000 outputs of 320 terms come out in other last
             * bits; all equal would mean the switch did nothing */
            if (p != TW_F16_PREFILL_TILES)
                assert_memory_not_equal(y, ref, sizeof *y * N * ROWS);
            else
                assert_memory_equal(y, ref, sizeof *y * N * ROWS);
        }
    }
    tw_kernels_set_f16_prefill(TW_F16_PREFILL_TILES);
    free(w);
    free(x);
    free(row);
    free(y);
    free(ref);
    tw_pool_destroy(pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_measures_and_applies),
        cmocka_unit_test(test_hw_modes),
        cmocka_unit_test(test_product_either_way),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
