/* Rows read back out of packed matrices (tw_unpack_row,
 * tw_dequant_packed_row): every row of every packed type, in whole groups
 * and in the plain tail rows, comes back in exactly the bytes it had before
 * packing, and as exactly the floats tw_dequant_row gives on those; calls
 * that do not describe a packed row are refused and write nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/kernels.h"
#include "tw/tensor.h"

static const tw_type plain_types[] = {TW_TYPE_Q8_0, TW_TYPE_Q4_0, TW_TYPE_Q5_0, TW_TYPE_Q5_1,
                                      TW_TYPE_Q4_K, TW_TYPE_Q5_K, TW_TYPE_Q6_K};
#define N_PLAIN (sizeof plain_types / sizeof plain_types[0])

/* Two whole groups and five plain tail rows; two 256-column blocks. */
#define ROWS 21
#define COLS 512

typedef struct fixture {
    tw_type type;
    size_t row_bytes;
    uint8_t *plain, *packed, *row;
    float *want, *got;
} fixture;

/* Random bytes, every bit of every field, not only the values a
 * quantizer writes: the layouts must carry all of them. The f16 scales
 * then include NaNs and infinities, which is fine: both sides dequantize
 * the same bytes and are compared bit for bit. */
static void make(fixture *f, tw_type type, unsigned long long seed)
{
    f->type = type;
    f->row_bytes = tw_type_row_bytes(type, COLS);
    assert_true(f->row_bytes > 0);
    f->plain = malloc(ROWS * f->row_bytes);
    f->packed = malloc(ROWS * f->row_bytes);
    f->row = malloc(f->row_bytes);
    f->want = malloc(COLS * sizeof(float));
    f->got = malloc(COLS * sizeof(float));
    assert_non_null(f->plain);
    assert_non_null(f->packed);
    assert_non_null(f->row);
    assert_non_null(f->want);
    assert_non_null(f->got);
    tw_test_rng rng = {seed};
    for (size_t i = 0; i < ROWS * f->row_bytes; i++)
        f->plain[i] = (uint8_t)tw_test_rand_u64(&rng);
    assert_true(tw_pack_rows(type, f->plain, ROWS, COLS, f->packed));
}

static void release(fixture *f)
{
    free(f->plain);
    free(f->packed);
    free(f->row);
    free(f->want);
    free(f->got);
}

static void test_rows_come_back(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_PLAIN; k++) {
        for (unsigned long long seed = 1; seed <= 3; seed++) {
            fixture f;
            make(&f, plain_types[k], seed * 7919 + k);
            const tw_type packed = tw_pack_type(f.type);
            for (size_t r = 0; r < ROWS; r++) {
                const uint8_t *src = f.plain + r * f.row_bytes;
                memset(f.row, 0xa5, f.row_bytes);
                assert_true(tw_unpack_row(packed, f.packed, ROWS, COLS, r, f.row));
                if (memcmp(f.row, src, f.row_bytes) != 0)
                    fail_msg("%s row %zu: unpacked bytes differ from the row before packing",
                             tw_type_name(f.type), r);
                tw_dequant_row(f.type, src, f.want, COLS);
                memset(f.got, 0, COLS * sizeof(float));
                assert_true(tw_dequant_packed_row(packed, f.packed, ROWS, COLS, r, f.got));
                if (memcmp(f.got, f.want, COLS * sizeof(float)) != 0)
                    fail_msg("%s row %zu: dequantized packed row differs from tw_dequant_row",
                             tw_type_name(f.type), r);
            }
            release(&f);
        }
    }
}

/* A packed matrix from quantized values, as a model holds one: the same
 * floats come back as from the rows before packing. */
static void test_quantized_rows(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_PLAIN; k++) {
        const tw_type t = plain_types[k];
        const size_t rows = 19, cols = 768, rb = tw_type_row_bytes(t, cols);
        float *x = malloc(rows * cols * sizeof(float)), *want = malloc(cols * sizeof(float)),
              *got = malloc(cols * sizeof(float));
        uint8_t *plain = malloc(rows * rb), *packed = malloc(rows * rb);
        assert_true(x && want && got && plain && packed);
        tw_test_rng rng = {99 + k};
        for (size_t i = 0; i < rows * cols; i++)
            x[i] = tw_test_rand_f32(&rng) * (float)(1 + i % 7);
        for (size_t r = 0; r < rows; r++)
            tw_quant_row(t, x + r * cols, plain + r * rb, cols);
        assert_true(tw_pack_rows(t, plain, rows, cols, packed));
        for (size_t r = 0; r < rows; r++) {
            tw_dequant_row(t, plain + r * rb, want, cols);
            assert_true(tw_dequant_packed_row(tw_pack_type(t), packed, rows, cols, r, got));
            assert_memory_equal(got, want, cols * sizeof(float));
        }
        free(x);
        free(want);
        free(got);
        free(plain);
        free(packed);
    }
}

static void test_refusals_write_nothing(void **state)
{
    (void)state;
    fixture f;
    make(&f, TW_TYPE_Q4_K, 5);
    const tw_type packed = tw_pack_type(f.type);
    memset(f.row, 0x5a, f.row_bytes);
    for (size_t i = 0; i < COLS; i++)
        f.got[i] = 42.0f;
    /* not a packed type: the plain one, and types with no packed form */
    const tw_type not_packed[] = {TW_TYPE_Q4_K, TW_TYPE_F16, TW_TYPE_F32, TW_TYPE_BF16,
                                  (tw_type)12345};
    for (size_t i = 0; i < sizeof not_packed / sizeof not_packed[0]; i++) {
        assert_false(tw_unpack_row(not_packed[i], f.packed, ROWS, COLS, 0, f.row));
        assert_false(tw_dequant_packed_row(not_packed[i], f.packed, ROWS, COLS, 0, f.got));
    }
    /* a row past the matrix, columns the type's blocks do not fit, none */
    assert_false(tw_unpack_row(packed, f.packed, ROWS, COLS, ROWS, f.row));
    assert_false(tw_dequant_packed_row(packed, f.packed, ROWS, COLS, SIZE_MAX, f.got));
    assert_false(tw_unpack_row(packed, f.packed, ROWS, COLS - 32, 0, f.row));
    assert_false(tw_dequant_packed_row(packed, f.packed, ROWS, 0, 0, f.got));
    /* rows whose bytes cannot be addressed */
    assert_false(tw_unpack_row(packed, f.packed, SIZE_MAX, COLS, 0, f.row));
    assert_false(tw_unpack_row(packed, NULL, ROWS, COLS, 0, f.row));
    assert_false(tw_unpack_row(packed, f.packed, ROWS, COLS, 0, NULL));
    assert_false(tw_dequant_packed_row(packed, NULL, ROWS, COLS, 0, f.got));
    assert_false(tw_dequant_packed_row(packed, f.packed, ROWS, COLS, 0, NULL));
    for (size_t i = 0; i < f.row_bytes; i++)
        assert_int_equal(f.row[i], 0x5a);
    for (size_t i = 0; i < COLS; i++)
        assert_true(f.got[i] == 42.0f);
    release(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_come_back),
        cmocka_unit_test(test_quantized_rows),
        cmocka_unit_test(test_refusals_write_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
