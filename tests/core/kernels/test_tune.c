/* Decode prefetch chosen by measurement (tw_kernels_tune_decode_prefetch):
 * refused arguments, a real measurement whose choice follows its own
 * numbers and is applied, and no measurement where the ISA has no packed
 * kernels. Also the machine-level helper (tw/hw.h), which sizes the matrix
 * from the L3 and the memory available. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "test_support.h"
#include "tw/hw.h"
#include "tw/kernels.h"
#include "tw/pool.h"

#define MIB ((size_t)1 << 20)

static void test_refusals(void **state)
{
    (void)state;
    tw_pool *pool;
    assert_int_equal(tw_pool_create(1, &pool, NULL), TW_OK);
    tw_prefetch_tune t;
    tw_err err;
    assert_int_equal(tw_kernels_tune_decode_prefetch(NULL, 8 * MIB, 0.01, &t, &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(tw_kernels_tune_decode_prefetch(pool, 8 * MIB, 0.01, NULL, &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(tw_kernels_tune_decode_prefetch(pool, 4 * MIB - 1, 0.01, &t, &err),
                     TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "4 MiB"));
    assert_int_equal(tw_kernels_tune_decode_prefetch(pool, 1025 * MIB, 0.01, &t, &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(tw_kernels_tune_decode_prefetch(pool, 8 * MIB, 0.0, &t, &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(tw_kernels_tune_decode_prefetch(pool, 8 * MIB, 11.0, &t, &err),
                     TW_INVALID_ARGUMENT);
    tw_pool_destroy(pool);
}

/* The choice is the measured gain against the 3% threshold, and it is the
 * setting in force afterwards, whichever it was before. */
static void check_measured(tw_pool *pool, bool before, size_t mib)
{
    tw_kernels_set_decode_prefetch(before);
    tw_prefetch_tune t;
    tw_err err;
    assert_int_equal(tw_kernels_tune_decode_prefetch(pool, mib * MIB, 0.01, &t, &err), TW_OK);
    assert_true(t.pairs >= 7 && t.pairs <= 64);
    assert_true(t.bytes <= mib * MIB && t.bytes > (mib - 1) * MIB);
    assert_true(t.us_off > 0 && t.us_on > 0 && t.gain > 0);
    assert_int_equal(t.on, t.gain >= 1.03);
    assert_int_equal(tw_kernels_decode_prefetch(), t.on);
    /* the AVX2 Q4_K kernel's fetches (avx2 and avx2vnni): measured only where they would run,
     * kept unless going without them was 3% faster */
    if (t.on && !strncmp(tw_kernels_isa(), "avx2", 4)) {
        assert_true(t.k_pairs >= 7 && t.k_pairs <= 64);
        assert_true(t.k_gain > 0);
        assert_int_equal(t.k_on, t.k_gain * 1.03 > 1.0);
    } else {
        assert_int_equal(t.k_pairs, 0);
        assert_true(t.k_on);
    }
    assert_int_equal(tw_kernels_decode_prefetch_k(), t.k_on);
}

static void test_measures_and_applies(void **state)
{
    (void)state;
    if (!tw_kernels_isa_available("avx2"))
        skip();
    tw_pool *pool;
    assert_int_equal(tw_pool_create(2, &pool, NULL), TW_OK);
    check_measured(pool, false, 6);
    check_measured(pool, true, 6);
    /* with the AVX2 kernels dispatched, as an AVX2-only machine has them,
     * over a matrix past most L3s, where fetching ahead may pay */
    assert_int_equal(tw_kernels_force_isa("avx2", NULL), TW_OK);
    tw_kernels_set_decode_prefetch_k(false);
    check_measured(pool, false, 96);
    check_measured(pool, true, 96);
    assert_int_equal(tw_kernels_force_isa("auto", NULL), TW_OK);
    tw_pool_destroy(pool);
    tw_kernels_set_decode_prefetch(false);
    tw_kernels_set_decode_prefetch_k(true);
}

static void test_scalar_measures_nothing(void **state)
{
    (void)state;
    tw_pool *pool;
    assert_int_equal(tw_pool_create(1, &pool, NULL), TW_OK);
    assert_int_equal(tw_kernels_force_isa("scalar", NULL), TW_OK);
    tw_kernels_set_decode_prefetch(true);
    tw_prefetch_tune t;
    assert_int_equal(tw_kernels_tune_decode_prefetch(pool, 8 * MIB, 0.01, &t, NULL), TW_OK);
    assert_int_equal(t.pairs, 0);
    assert_false(t.on);
    assert_false(tw_kernels_decode_prefetch());
    assert_int_equal(tw_kernels_force_isa("auto", NULL), TW_OK);
    tw_pool_destroy(pool);
}

/* The helper sizes the matrix from the L3 (twice it, 32..256 MiB) but
 * never past an eighth of the available memory, refuses to measure in
 * less than 4 MiB, and leaves prefetch off when it cannot measure. */
static void test_hw_sizes_from_machine(void **state)
{
    (void)state;
    tw_hw_info hw;
    memset(&hw, 0, sizeof hw);
    tw_prefetch_tune t;
    tw_err err;
    assert_int_equal(tw_hw_tune_decode_prefetch(&hw, 0, &t, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_hw_tune_decode_prefetch(NULL, 1, &t, &err), TW_INVALID_ARGUMENT);
    hw.mem_available_bytes = 16 * MIB;
    tw_kernels_set_decode_prefetch(true);
    assert_int_equal(tw_hw_tune_decode_prefetch(&hw, 1, &t, &err), TW_RESOURCE_EXHAUSTED);
    assert_false(tw_kernels_decode_prefetch());
    if (!tw_kernels_isa_available("avx2"))
        return;
    hw.l3_bytes = 2 * MIB;
    hw.mem_available_bytes = 64 * MIB;
    assert_int_equal(tw_hw_tune_decode_prefetch(&hw, 2, &t, &err), TW_OK);
    assert_true(t.bytes <= 8 * MIB && t.bytes > 7 * MIB);
    assert_int_equal(tw_kernels_decode_prefetch(), t.on);
    tw_kernels_set_decode_prefetch(false);
}

/* A mode from the command line: on and off are applied as said and
 * measure nothing, anything else is refused with the option named, and the
 * text says which it was. */
static void test_hw_modes(void **state)
{
    (void)state;
    tw_hw_info hw;
    memset(&hw, 0, sizeof hw);
    tw_prefetch_tune t;
    tw_err err;
    char text[256];
    assert_int_equal(tw_hw_decode_prefetch("on", &hw, 1, &t, &err), TW_OK);
    assert_true(t.on && t.pairs == 0 && tw_kernels_decode_prefetch());
    tw_hw_decode_prefetch_text("on", &t, text, sizeof text);
    assert_string_equal(text, "on (set by --decode-prefetch)");
    assert_int_equal(tw_hw_decode_prefetch("off", &hw, 1, &t, &err), TW_OK);
    assert_true(!t.on && t.pairs == 0 && !tw_kernels_decode_prefetch());
    assert_int_equal(tw_hw_decode_prefetch("sometimes", &hw, 1, &t, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "decode-prefetch"));
    assert_int_equal(tw_hw_decode_prefetch(NULL, &hw, 1, &t, &err), TW_INVALID_ARGUMENT);
    /* auto that cannot measure: off, and the text says nothing was measured */
    hw.mem_available_bytes = 16 * MIB;
    tw_kernels_set_decode_prefetch(true);
    assert_int_equal(tw_hw_decode_prefetch("auto", &hw, 1, &t, &err), TW_RESOURCE_EXHAUSTED);
    assert_false(t.on || tw_kernels_decode_prefetch());
    tw_hw_decode_prefetch_text("auto", &t, text, sizeof text);
    assert_non_null(strstr(text, "off (auto: nothing measured"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_measures_and_applies),
        cmocka_unit_test(test_scalar_measures_nothing),
        cmocka_unit_test(test_hw_sizes_from_machine),
        cmocka_unit_test(test_hw_modes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
