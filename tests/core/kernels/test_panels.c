/* The half-precision panels (kernels/h16_panels.h): each output is one
 * fmaf chain in column order from zero, so the kernels of every ISA must
 * equal a scalar loop bit for bit, over row counts that leave partial
 * panels, column counts that cross the column blocks with a tail, and every
 * group size; and prompts on the panels path give those bits through
 * tw_matmul, whatever the pool splits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_internal.h"
#include "tw/kernels.h"
#include "tw/pool.h"
#include "tw/tensor.h"

static const char *const isas[] = {"avx2", "avx512"};

typedef struct case_data {
    tw_type type;
    size_t rows, cols, n;
    uint16_t *w;
    float *x, *y, *ref;
} case_data;

static float half_to_f32(tw_type type, uint16_t h)
{
    return type == TW_TYPE_BF16 ? tw_bf16_to_f32(h) : tw_f16_to_f32(h);
}

static void make_case(case_data *c, tw_type type, size_t rows, size_t cols, size_t n, unsigned seed)
{
    *c = (case_data){.type = type, .rows = rows, .cols = cols, .n = n};
    c->w = malloc(sizeof *c->w * rows * cols);
    c->x = malloc(sizeof *c->x * n * cols);
    c->y = malloc(sizeof *c->y * n * rows);
    c->ref = malloc(sizeof *c->ref * n * rows);
    assert_true(c->w && c->x && c->y && c->ref);
    srand(seed);
    for (size_t i = 0; i < rows * cols; i++) {
        float v = (float)(rand() % 2001) / 1000.0f - 1.0f;
        c->w[i] = type == TW_TYPE_BF16 ? tw_f32_to_bf16(v) : tw_f32_to_f16(v);
    }
    for (size_t i = 0; i < n * cols; i++)
        c->x[i] = (float)(rand() % 2001) / 997.0f - 1.0f;
    for (size_t t = 0; t < n; t++)
        for (size_t r = 0; r < rows; r++) {
            float acc = 0.0f;
            for (size_t k = 0; k < cols; k++)
                acc = fmaf(half_to_f32(type, c->w[r * cols + k]), c->x[t * cols + k], acc);
            c->ref[t * rows + r] = acc;
        }
}

static void free_case(case_data *c)
{
    free(c->w);
    free(c->x);
    free(c->y);
    free(c->ref);
}

static void expect_ref(const case_data *c, const char *what)
{
    for (size_t i = 0; i < c->n * c->rows; i++)
        if (memcmp(&c->y[i], &c->ref[i], sizeof(float)) != 0)
            fail_msg("%s %s %zux%zu n=%zu: output %zu (token %zu, row %zu) is %.9g, the fmaf "
                     "chain gives %.9g",
                     what, tw_type_name(c->type), c->rows, c->cols, c->n, i, i / c->rows,
                     i % c->rows, (double)c->y[i], (double)c->ref[i]);
}

/* Each ISA's kernel called directly, y filled with garbage first (the
 * first column block must not read it), and the lanes past the last row
 * left alone: y's rows are padded with a guard value. */
static void test_kernels_match_fmaf_chain(void **state)
{
    (void)state;
    static const size_t rows[] = {1, 15, 33, 70};
    static const size_t cols[] = {7, 16, 300, 530};
    /* 140: a pass of TW_PANEL_NB activations and a short one */
    static const size_t ns[] = {1, 5, 13, 17, 25, 140};
    static const tw_type types[] = {TW_TYPE_F16, TW_TYPE_BF16};
    float *wp = aligned_alloc(64, TW_PANELS_SCRATCH_BYTES);
    assert_non_null(wp);
    unsigned ran = 0;
    for (size_t ii = 0; ii < sizeof isas / sizeof *isas; ii++) {
        if (tw_kernels_force_isa(isas[ii], NULL) != TW_OK)
            continue;
        for (size_t ti = 0; ti < 2; ti++) {
            const tw_panels_fn fn = tw_isa_current()->panels[tw_ktype_index(types[ti])];
            assert_non_null(fn);
            for (size_t a = 0; a < 4; a++)
                for (size_t b = 0; b < 4; b++)
                    for (size_t d = 0; d < sizeof ns / sizeof *ns; d++) {
                        case_data c;
                        make_case(&c, types[ti], rows[a], cols[b], ns[d],
                                  (unsigned)(a * 100 + b * 10 + d));
                        const size_t stride = c.rows + 3;
                        float *y = malloc(sizeof *y * c.n * stride);
                        assert_non_null(y);
                        for (size_t i = 0; i < c.n * stride; i++)
                            y[i] = NAN;
                        for (size_t t = 0; t < c.n; t++)
                            y[t * stride + c.rows] = 12345.0f;
                        fn((const uint8_t *)c.w, c.cols * 2, c.rows, c.cols, c.x, c.n, y, stride,
                           wp);
                        for (size_t t = 0; t < c.n; t++) {
                            memcpy(c.y + t * c.rows, y + t * stride, sizeof *y * c.rows);
                            if (y[t * stride + c.rows] != 12345.0f)
                                fail_msg("%s wrote past row %zu of token %zu", isas[ii], c.rows, t);
                        }
                        expect_ref(&c, isas[ii]);
                        free(y);
                        free_case(&c);
                        ran++;
                    }
        }
    }
    tw_kernels_force_isa(NULL, NULL);
    free(wp);
    if (ran == 0)
        skip();
}

/* Through tw_matmul on a pool, the panels path splits rows across tasks
 * and still gives the chain's bits; decode's are within rounding of them,
 * and the tiles path (decode's bits where the ISA has tiles) is a
 * different product, so a switch that did nothing would show. */
static void test_prompts_take_the_panels(void **state)
{
    (void)state;
    tw_pool *pool;
    assert_int_equal(tw_pool_create(2, &pool, NULL), TW_OK);
    unsigned ran = 0;
    for (size_t ii = 0; ii < sizeof isas / sizeof *isas; ii++) {
        if (tw_kernels_force_isa(isas[ii], NULL) != TW_OK)
            continue;
        assert_true(tw_kernels_f16_prefill_has(TW_F16_PREFILL_PANELS));
        for (int bf = 0; bf < 2; bf++) {
            case_data c;
            make_case(&c, bf ? TW_TYPE_BF16 : TW_TYPE_F16, 200, 600, 40, 11u + (unsigned)bf);
            tw_kernels_set_f16_prefill(TW_F16_PREFILL_PANELS);
            tw_matmul(pool, c.type, c.w, c.cols * 2, c.rows, c.cols, c.x, c.n, c.y);
            expect_ref(&c, isas[ii]);
            for (size_t t = 0; t < c.n; t++) {
                float dec[200];
                tw_matvec(pool, c.type, c.w, c.cols * 2, c.rows, c.cols, c.x + t * c.cols, dec);
                for (size_t r = 0; r < c.rows; r++)
                    if (fabsf(dec[r] - c.y[t * c.rows + r]) > 1e-4f * (1.0f + fabsf(dec[r])))
                        fail_msg("token %zu row %zu: decode %g, panels %g", t, r, (double)dec[r],
                                 (double)c.y[t * c.rows + r]);
            }
            if (tw_kernels_f16_prefill_has(TW_F16_PREFILL_TILES)) {
                tw_kernels_set_f16_prefill(TW_F16_PREFILL_TILES);
                tw_matmul(pool, c.type, c.w, c.cols * 2, c.rows, c.cols, c.x, c.n, c.y);
                assert_memory_not_equal(c.y, c.ref, sizeof *c.y * c.n * c.rows);
            }
            free_case(&c);
            ran++;
        }
    }
    tw_kernels_set_f16_prefill(TW_F16_PREFILL_TILES);
    tw_kernels_force_isa(NULL, NULL);
    tw_pool_destroy(pool);
    if (ran == 0)
        skip();
}

/* The scalar kernels have no panels: the path falls back to sgemm there,
 * still within rounding. */
static void test_scalar_falls_back(void **state)
{
    (void)state;
    tw_pool *pool;
    assert_int_equal(tw_pool_create(2, &pool, NULL), TW_OK);
    assert_int_equal(tw_kernels_force_isa("scalar", NULL), TW_OK);
    assert_false(tw_kernels_f16_prefill_has(TW_F16_PREFILL_PANELS));
    tw_kernels_set_f16_prefill(TW_F16_PREFILL_PANELS);
    case_data c;
    make_case(&c, TW_TYPE_F16, 50, 100, 20, 3);
    tw_matmul(pool, c.type, c.w, c.cols * 2, c.rows, c.cols, c.x, c.n, c.y);
    for (size_t i = 0; i < c.n * c.rows; i++)
        if (fabsf(c.y[i] - c.ref[i]) > 1e-4f * (1.0f + fabsf(c.ref[i])))
            fail_msg("output %zu: %g against %g", i, (double)c.y[i], (double)c.ref[i]);
    free_case(&c);
    tw_kernels_set_f16_prefill(TW_F16_PREFILL_TILES);
    tw_kernels_force_isa(NULL, NULL);
    tw_pool_destroy(pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels_match_fmaf_chain),
        cmocka_unit_test(test_prompts_take_the_panels),
        cmocka_unit_test(test_scalar_falls_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
