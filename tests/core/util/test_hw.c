#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "tw/hw.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

/* Register values as the deterministic cache leaves lay them out: type in
 * eax 4:0, level in 7:5 (bit 8, self-initialising, as real CPUs set it);
 * ebx ways-1 << 22 | partitions-1 << 12 | line-1; ecx sets-1. */
static uint32_t leaf_eax(unsigned type, unsigned level)
{
    return type | level << 5 | 1u << 8;
}

static uint32_t leaf_ebx(unsigned ways, unsigned partitions, unsigned line)
{
    return (ways - 1) << 22 | (partitions - 1) << 12 | (line - 1);
}

static void test_cpuid_leaf_decodes_level_type_and_size(void **state)
{
    (void)state;
    unsigned level = 9;
    uint64_t bytes = 1;
    /* a 48 KiB 12-way L1d of 64 sets */
    assert_int_equal(tw_hw_cache_from_cpuid(leaf_eax(1, 1), leaf_ebx(12, 1, 64), 63, &level,
                                            &bytes),
                     1);
    assert_int_equal(level, 1);
    assert_int_equal(bytes, 48u << 10);
    /* a 32 MiB 16-way unified L3 of 32768 sets */
    assert_int_equal(tw_hw_cache_from_cpuid(leaf_eax(3, 3), leaf_ebx(16, 1, 64), 32767, &level,
                                            &bytes),
                     3);
    assert_int_equal(level, 3);
    assert_int_equal(bytes, 32u << 20);
    /* partitions multiply in: 8 ways x 2 partitions x 64 B x 1024 sets */
    assert_int_equal(tw_hw_cache_from_cpuid(leaf_eax(3, 2), leaf_ebx(8, 2, 64), 1023, &level,
                                            &bytes),
                     3);
    assert_int_equal(bytes, 1u << 20);
    /* an instruction cache is reported as such, the end of the list and
     * reserved types as none */
    assert_int_equal(tw_hw_cache_from_cpuid(leaf_eax(2, 1), leaf_ebx(8, 1, 64), 63, &level,
                                            &bytes),
                     2);
    assert_int_equal(tw_hw_cache_from_cpuid(0, 0, 0, &level, &bytes), 0);
    assert_int_equal(tw_hw_cache_from_cpuid(leaf_eax(7, 1), leaf_ebx(8, 1, 64), 63, &level,
                                            &bytes),
                     0);
}

static void test_cpuid_fills_only_what_is_missing(void **state)
{
    (void)state;
    tw_hw_info hw;
    memset(&hw, 0, sizeof hw);
    hw.l1d_bytes = 111;
    hw.l2_bytes = 222;
    hw.l3_bytes = 333;
    tw_hw_cpuid_caches(&hw);
    assert_int_equal(hw.l1d_bytes, 111);
    assert_int_equal(hw.l2_bytes, 222);
    assert_int_equal(hw.l3_bytes, 333);
}

/* Every x86-64 CPU describes its L1d and L2 to CPUID, so detection must
 * find them whether or not sysfs lists the caches. */
static void test_detect_finds_the_private_caches(void **state)
{
    (void)state;
#if defined(__x86_64__)
    tw_hw_info hw;
    tw_err err;
    assert_int_equal(tw_hw_detect(&hw, &err), TW_OK);
    assert_true(hw.l1d_bytes >= (8u << 10) && hw.l1d_bytes <= (1u << 20));
    assert_true(hw.l2_bytes >= (64u << 10) && hw.l2_bytes <= (64u << 20));
    assert_true(hw.l3_bytes == 0 || hw.l3_bytes >= hw.l2_bytes);
    tw_hw_info cpu;
    memset(&cpu, 0, sizeof cpu);
    tw_hw_cpuid_caches(&cpu);
    assert_true(cpu.l1d_bytes > 0 && cpu.l2_bytes > 0);
#else
    skip();
#endif
}

/* /proc/cpuinfo names the family of every x86-64 CPU (6 and up: Intel's
 * 6, 15 and 19, AMD's 15 to 26), and its "model" line is not confused with
 * "model name". */
static void test_detect_reads_the_cpu_family(void **state)
{
    (void)state;
#if defined(__x86_64__) && defined(__linux__)
    tw_hw_info hw;
    tw_err err;
    assert_int_equal(tw_hw_detect(&hw, &err), TW_OK);
    assert_true(hw.cpu_family >= 6 && hw.cpu_family <= 255);
    assert_true(hw.cpu_model[0] != '\0');
    /* the kernel derives both from CPUID leaf 1, as here */
    unsigned a = 0, b = 0, c = 0, d = 0;
    assert_true(__get_cpuid(1, &a, &b, &c, &d));
    unsigned family = (a >> 8) & 0xF, model = (a >> 4) & 0xF;
    if (family == 0xF)
        family += (a >> 20) & 0xFF;
    if (family >= 6)
        model |= ((a >> 16) & 0xF) << 4;
    assert_int_equal(hw.cpu_family, family);
    assert_int_equal(hw.cpu_model_number, model);
#else
    skip();
#endif
}

/* The probe's buffer: 1 GiB at least, eight L3s a thread where that is
 * more, a quarter of the available memory at most, and never under 64
 * MiB. */
static void test_probe_bytes_outgrow_the_caches(void **state)
{
    (void)state;
    tw_hw_info hw = {0};
    const uint64_t gib = 1ull << 30, mib = 1ull << 20;
    hw.mem_available_bytes = 64 * gib;
    /* unknown L3: the 1 GiB floor */
    assert_int_equal(tw_hw_probe_bytes(&hw, 2), gib);
    hw.l3_bytes = 32 * mib;
    assert_int_equal(tw_hw_probe_bytes(&hw, 2), gib);
    /* 16 threads beside 32 MiB L3s: 4 GiB */
    assert_int_equal(tw_hw_probe_bytes(&hw, 16), 4 * gib);
    /* a small machine keeps three quarters of its memory */
    hw.mem_available_bytes = 2 * gib;
    assert_int_equal(tw_hw_probe_bytes(&hw, 16), gib / 2);
    hw.mem_available_bytes = 100 * mib;
    assert_int_equal(tw_hw_probe_bytes(&hw, 2), 64 * mib);
    /* an absurd L3 does not overflow into a small buffer */
    hw.mem_available_bytes = 0;
    hw.l3_bytes = UINT64_MAX / 4;
    assert_true(tw_hw_probe_bytes(&hw, 64) >= gib);
    assert_int_equal(tw_hw_probe_bytes(NULL, 2), gib);
}

/* The probe reads a real buffer and says how fast; nonsense is refused. */
static void test_read_bandwidth_measures_and_checks_arguments(void **state)
{
    (void)state;
    tw_err err;
    double bw = -1;
    assert_int_equal(tw_hw_read_bandwidth(8u << 20, 2, 0.05, &bw, &err), TW_OK);
    /* any machine this runs on reads 8 MiB faster than 100 MB/s and slower
     * than 100 TB/s */
    assert_true(bw > 1e8 && bw < 1e14);
    assert_int_equal(tw_hw_read_bandwidth(1u << 20, 1, 0.05, &bw, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_hw_read_bandwidth(8u << 20, 0, 0.05, &bw, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_hw_read_bandwidth(8u << 20, 1, 0.0, &bw, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_hw_read_bandwidth(8u << 20, 1, 0.05, NULL, &err), TW_INVALID_ARGUMENT);
}

/* A probe kept open reads its buffer again and again at a sane rate, and
 * the handle refuses what the one-shot probe refuses. */
static void test_open_probe_reads_repeatedly(void **state)
{
    (void)state;
    tw_err err;
    tw_bw_probe *p = NULL;
    assert_int_equal(tw_bw_probe_open(1u << 20, &p, &err), TW_INVALID_ARGUMENT);
    assert_null(p);
    assert_int_equal(tw_bw_probe_open(8u << 20, NULL, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_bw_probe_open(8u << 20, &p, &err), TW_OK);
    assert_non_null(p);
    assert_int_equal(tw_bw_probe_bytes(p), 8u << 20);
    for (uint32_t threads = 1; threads <= 2; threads++) {
        double bw = -1;
        assert_int_equal(tw_bw_probe_read(p, threads, 0.05, &bw, &err), TW_OK);
        assert_true(bw > 1e8 && bw < 1e14);
    }
    double bw = -1;
    assert_int_equal(tw_bw_probe_read(p, 0, 0.05, &bw, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_bw_probe_read(p, 65, 0.05, &bw, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_bw_probe_read(p, 1, 31.0, &bw, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_bw_probe_read(p, 1, 0.05, NULL, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_bw_probe_read(NULL, 1, 0.05, &bw, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_bw_probe_bytes(NULL), 0);
    tw_bw_probe_close(p);
    tw_bw_probe_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpuid_leaf_decodes_level_type_and_size),
        cmocka_unit_test(test_cpuid_fills_only_what_is_missing),
        cmocka_unit_test(test_detect_finds_the_private_caches),
        cmocka_unit_test(test_detect_reads_the_cpu_family),
        cmocka_unit_test(test_probe_bytes_outgrow_the_caches),
        cmocka_unit_test(test_read_bandwidth_measures_and_checks_arguments),
        cmocka_unit_test(test_open_probe_reads_repeatedly),
    };
    return cmocka_run_group_tests_name("core/util/hw", tests, NULL, NULL);
}
