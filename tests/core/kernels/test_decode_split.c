/* A single activation's rows read through tw_decode_split (matrices whose
 * runs reach its threshold, on pools of 2-4 threads, the last more threads
 * than the machine may have cores, so threads fall behind and others take
 * their rows): every ISA gives the bits of the one-thread path, for one
 * matrix, for several sharing one input, and for a gate/up pair, whose
 * epilogue sees every row once, on final outputs, at the split's bounds;
 * and with the split switched off, the plain runs give the same bits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/kernels.h"
#include "tw/pool.h"
#include "tw/tensor.h"

static const char *const isas[] = {"scalar", "avx2", "avx2vnni", "avx512"};
static const int pool_threads[] = {2, 3, 4};
#define N_POOLS (sizeof pool_threads / sizeof pool_threads[0])
/* passes per pool and ISA: who falls behind, and so who takes what, varies */
#define PASSES 3

typedef tw_test_mat mat;

static void fill_x(float *x, size_t n, tw_test_rng *rng)
{
    for (size_t i = 0; i < n; i++)
        x[i] = tw_test_rand_f32(rng);
}

/* Matrices of each kind of kernel the split calls: packed integer (Q8_0,
 * Q4_0, Q6_K; Q4_0 with a tail of four rows past its last group of eight),
 * half and full floats. Rows are no multiple of 16, so a run ends off the
 * split's grid. */
static const struct {
    tw_type type;
    size_t rows, cols;
} shapes[] = {
    {TW_TYPE_Q8_0, 2056, 1024}, {TW_TYPE_Q4_0, 4100, 1024}, {TW_TYPE_Q6_K, 2600, 1024},
    {TW_TYPE_F16, 1288, 1024},  {TW_TYPE_F32, 680, 1024},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

typedef struct fixture {
    tw_pool *pools[N_POOLS];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    for (size_t p = 0; p < N_POOLS; p++)
        assert_int_equal(tw_pool_create(pool_threads[p], &f->pools[p], NULL), TW_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    for (size_t p = 0; p < N_POOLS; p++)
        tw_pool_destroy(f->pools[p]);
    free(f);
    assert_int_equal(tw_kernels_force_isa("auto", NULL), TW_OK);
    tw_kernels_set_decode_prefetch(false);
    tw_kernels_set_decode_split(true);
    return 0;
}

/* One matrix, with decode prefetch off and on. */
static void test_one_matrix(void **state)
{
    fixture *f = *state;
    tw_test_rng rng = {0x9e3779b97f4a7c15ull};
    for (size_t s = 0; s < N_SHAPES; s++) {
        mat m;
        tw_test_mat_make(&m, shapes[s].type, shapes[s].rows, shapes[s].cols, &rng);
        float *x = malloc(m.cols * sizeof(float));
        float *want = malloc(m.rows * sizeof(float)), *got = malloc(m.rows * sizeof(float));
        assert_non_null(x);
        assert_non_null(want);
        assert_non_null(got);
        fill_x(x, m.cols, &rng);
        for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
            if (!tw_kernels_isa_available(isas[i]))
                continue;
            assert_int_equal(tw_kernels_force_isa(isas[i], NULL), TW_OK);
            tw_kernels_set_decode_prefetch(false);
            tw_matvec(NULL, m.type, m.w, m.row_bytes, m.rows, m.cols, x, want);
            for (int pf = 0; pf < 3; pf++) {
                /* the last pass with the split off: the plain runs, the same bits */
                tw_kernels_set_decode_prefetch(pf == 1);
                tw_kernels_set_decode_split(pf < 2);
                assert_true(tw_kernels_decode_split() == (pf < 2));
                for (size_t p = 0; p < N_POOLS * PASSES; p++) {
                    memset(got, 0xff, m.rows * sizeof(float));
                    tw_matvec(f->pools[p % N_POOLS], m.type, m.w, m.row_bytes, m.rows, m.cols, x,
                              got);
                    if (memcmp(got, want, m.rows * sizeof(float)) != 0)
                        fail_msg("%s %zux%zu, %s, %d threads, prefetch %d, split %d: not the "
                                 "one-thread bits",
                                 tw_type_name(m.type), m.rows, m.cols, isas[i],
                                 pool_threads[p % N_POOLS], pf == 1, pf < 2);
                }
            }
            tw_kernels_set_decode_split(true);
        }
        free(x);
        free(want);
        free(got);
        free(m.w);
    }
}

/* Three matrices of different heights sharing one input (a Q/K/V
 * projection): small parts ride along with one wide enough to split. */
static void test_shared_input(void **state)
{
    fixture *f = *state;
    tw_test_rng rng = {0x3c6ef372fe94f82bull};
    static const size_t heights[] = {4100, 520, 40};
    mat m[3];
    float *want[3], *got[3];
    tw_matmul_part parts[3];
    const size_t cols = 1024;
    for (size_t k = 0; k < 3; k++) {
        tw_test_mat_make(&m[k], TW_TYPE_Q4_0, heights[k], cols, &rng);
        want[k] = malloc(heights[k] * sizeof(float));
        got[k] = malloc(heights[k] * sizeof(float));
        assert_non_null(want[k]);
        assert_non_null(got[k]);
        parts[k] = (tw_matmul_part){.type = m[k].type,
                                    .w = m[k].w,
                                    .row_bytes = m[k].row_bytes,
                                    .rows = heights[k],
                                    .y = got[k]};
    }
    float *x = malloc(cols * sizeof(float));
    assert_non_null(x);
    fill_x(x, cols, &rng);
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        if (!tw_kernels_isa_available(isas[i]))
            continue;
        assert_int_equal(tw_kernels_force_isa(isas[i], NULL), TW_OK);
        for (size_t k = 0; k < 3; k++)
            tw_matvec(NULL, m[k].type, m[k].w, m[k].row_bytes, heights[k], cols, x, want[k]);
        for (size_t p = 0; p < N_POOLS * PASSES; p++) {
            for (size_t k = 0; k < 3; k++)
                memset(got[k], 0xff, heights[k] * sizeof(float));
            tw_matmul_multi(f->pools[p % N_POOLS], parts, 3, cols, x, 1);
            for (size_t k = 0; k < 3; k++)
                if (memcmp(got[k], want[k], heights[k] * sizeof(float)) != 0)
                    fail_msg("part %zu (%zu rows), %s, %d threads: not the one-thread bits", k,
                             heights[k], isas[i], pool_threads[p % N_POOLS]);
        }
    }
    for (size_t k = 0; k < 3; k++) {
        free(m[k].w);
        free(want[k]);
        free(got[k]);
    }
    free(x);
}

/* What the pair's epilogue saw: how often each row was handed to it, the
 * bounds it was given, and both outputs as they were then. */
typedef struct seen {
    size_t rows;
    const float *ya, *yb;
    float *ya_then, *yb_then;
    _Atomic int *calls;
    _Atomic int bad_bounds;
} seen;

static void note_rows(void *ctx, size_t r0, size_t r1)
{
    seen *s = ctx;
    if (r0 % 16 != 0 || (r1 % 16 != 0 && r1 != s->rows) || r0 >= r1 || r1 > s->rows) {
        atomic_fetch_add(&s->bad_bounds, 1);
        return;
    }
    for (size_t r = r0; r < r1; r++) {
        atomic_fetch_add(&s->calls[r], 1);
        s->ya_then[r] = s->ya[r];
        s->yb_then[r] = s->yb[r];
    }
}

static void test_pair_epilogue(void **state)
{
    fixture *f = *state;
    tw_test_rng rng = {0xa54ff53a5f1d36f1ull};
    const size_t rows = 2052, cols = 1024;
    mat a, b;
    tw_test_mat_make(&a, TW_TYPE_Q8_0, rows, cols, &rng);
    tw_test_mat_make(&b, TW_TYPE_Q8_0, rows, cols, &rng);
    float *x = malloc(cols * sizeof(float));
    float *want_a = malloc(rows * sizeof(float)), *want_b = malloc(rows * sizeof(float));
    float *ya = malloc(rows * sizeof(float)), *yb = malloc(rows * sizeof(float));
    seen s = {.rows = rows, .ya = ya, .yb = yb};
    s.ya_then = malloc(rows * sizeof(float));
    s.yb_then = malloc(rows * sizeof(float));
    s.calls = malloc(rows * sizeof *s.calls);
    assert_non_null(x);
    assert_non_null(want_a);
    assert_non_null(want_b);
    assert_non_null(ya);
    assert_non_null(yb);
    assert_non_null(s.ya_then);
    assert_non_null(s.yb_then);
    assert_non_null(s.calls);
    fill_x(x, cols, &rng);
    const tw_matmul_part parts[2] = {
        {.type = a.type, .w = a.w, .row_bytes = a.row_bytes, .rows = rows, .y = ya},
        {.type = b.type, .w = b.w, .row_bytes = b.row_bytes, .rows = rows, .y = yb},
    };
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        if (!tw_kernels_isa_available(isas[i]))
            continue;
        assert_int_equal(tw_kernels_force_isa(isas[i], NULL), TW_OK);
        tw_matvec(NULL, a.type, a.w, a.row_bytes, rows, cols, x, want_a);
        tw_matvec(NULL, b.type, b.w, b.row_bytes, rows, cols, x, want_b);
        for (size_t p = 0; p < N_POOLS * PASSES; p++) {
            for (size_t r = 0; r < rows; r++)
                atomic_init(&s.calls[r], 0);
            atomic_init(&s.bad_bounds, 0);
            memset(ya, 0xff, rows * sizeof(float));
            memset(yb, 0xff, rows * sizeof(float));
            assert_true(tw_matmul_pair(f->pools[p % N_POOLS], parts, cols, x, 1, note_rows, &s));
            assert_int_equal(atomic_load(&s.bad_bounds), 0);
            for (size_t r = 0; r < rows; r++)
                if (atomic_load(&s.calls[r]) != 1)
                    fail_msg("%s, %d threads: row %zu handed to the epilogue %d times", isas[i],
                             pool_threads[p % N_POOLS], r, atomic_load(&s.calls[r]));
            assert_memory_equal(s.ya_then, want_a, rows * sizeof(float));
            assert_memory_equal(s.yb_then, want_b, rows * sizeof(float));
            assert_memory_equal(ya, want_a, rows * sizeof(float));
            assert_memory_equal(yb, want_b, rows * sizeof(float));
        }
    }
    free(x);
    free(want_a);
    free(want_b);
    free(ya);
    free(yb);
    free(s.ya_then);
    free(s.yb_then);
    free(s.calls);
    free(a.w);
    free(b.w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_matrix),
        cmocka_unit_test(test_shared_input),
        cmocka_unit_test(test_pair_epilogue),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
