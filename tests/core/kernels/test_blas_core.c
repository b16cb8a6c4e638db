/* OpenBLAS's kernel set (tw/blas.h): which set each CPU level asks for, the
 * refusals, and a real restart of this very program with a set forced
 * through OPENBLAS_CORETYPE, which the restarted image checks OpenBLAS
 * then runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tw/blas.h"

/* what the restart below notes as OpenBLAS's own pick, so the restarted
 * image knows it is one */
#define ORIGIN "test-origin"

static char **prog_argv;

static void test_wanted(void **state)
{
    (void)state;
    /* the fallbacks of a DYNAMIC_ARCH build, on each level */
    assert_string_equal(tw_blas_core_wanted("Prescott", TW_BLAS_LEVEL_AVX512, false), "SkylakeX");
    assert_string_equal(tw_blas_core_wanted("Prescott", TW_BLAS_LEVEL_AVX2, false), "Haswell");
    assert_string_equal(tw_blas_core_wanted("Prescott", TW_BLAS_LEVEL_AVX2, true), "Zen");
    assert_string_equal(tw_blas_core_wanted("Sandybridge", TW_BLAS_LEVEL_AVX512, true), "SkylakeX");
    assert_string_equal(tw_blas_core_wanted("nehalem", TW_BLAS_LEVEL_AVX2, false), "Haswell");
    /* an AVX2 set on an AVX-512 CPU is raised */
    assert_string_equal(tw_blas_core_wanted("Haswell", TW_BLAS_LEVEL_AVX512, false), "SkylakeX");
    assert_string_equal(tw_blas_core_wanted("Zen", TW_BLAS_LEVEL_AVX512, true), "SkylakeX");
    /* a benchmark standing in for an AVX2 machine lowers an AVX-512 set */
    assert_string_equal(tw_blas_core_wanted("SkylakeX", TW_BLAS_LEVEL_AVX2, false), "Haswell");
    assert_string_equal(tw_blas_core_wanted("Cooperlake", TW_BLAS_LEVEL_AVX2, true), "Zen");
    /* already right, in any spelling */
    assert_null(tw_blas_core_wanted("SkylakeX", TW_BLAS_LEVEL_AVX512, false));
    assert_null(tw_blas_core_wanted("cooperlake", TW_BLAS_LEVEL_AVX512, false));
    assert_null(tw_blas_core_wanted("SapphireRapids", TW_BLAS_LEVEL_AVX512, false));
    assert_null(tw_blas_core_wanted("Zen", TW_BLAS_LEVEL_AVX2, true));
    assert_null(tw_blas_core_wanted("HASWELL", TW_BLAS_LEVEL_AVX2, false));
    /* nothing better exists for a CPU without AVX2 */
    assert_null(tw_blas_core_wanted("Prescott", TW_BLAS_LEVEL_OLD, false));
    /* names it does not rank are left alone */
    assert_null(tw_blas_core_wanted("Excavator", TW_BLAS_LEVEL_AVX2, true));
    assert_null(tw_blas_core_wanted("SomeFutureCore", TW_BLAS_LEVEL_AVX512, false));
    assert_null(tw_blas_core_wanted("", TW_BLAS_LEVEL_AVX512, false));
    assert_null(tw_blas_core_wanted(NULL, TW_BLAS_LEVEL_AVX512, false));
}

static void test_refusals(void **state)
{
    (void)state;
    tw_err err;
    char *args[] = {prog_argv[0], NULL};
    char *none[] = {NULL};
    assert_int_equal(tw_blas_restart_with("", ORIGIN, args, &err), TW_INVALID_ARGUMENT);
    char long_name[80];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    assert_int_equal(tw_blas_restart_with(long_name, ORIGIN, args, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_blas_restart_with(NULL, ORIGIN, args, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_blas_restart_with("Prescott", ORIGIN, none, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "argv"));
    assert_int_equal(tw_blas_restart_with("Prescott", ORIGIN, NULL, &err), TW_INVALID_ARGUMENT);
    /* a refusal leaves no trace in the environment */
    const char *marker = getenv("TW_BLAS_CORE_PICKED_FROM");
    assert_true(!marker || !strcmp(marker, ORIGIN));
}

/* The first image restarts itself with OpenBLAS's Prescott set (present in
 * every x86 DYNAMIC_ARCH build) and never comes back here; the restarted
 * one runs every test again and lands in the checks. */
static void test_restart(void **state)
{
    (void)state;
    const char *config = openblas_get_config();
    if (!config || !strstr(config, "DYNAMIC_ARCH")) {
        skip(); /* one kernel set, chosen when OpenBLAS was built */
        return;
    }
    const char *marker = getenv("TW_BLAS_CORE_PICKED_FROM");
    if (!marker || strcmp(marker, ORIGIN) != 0) {
        tw_err err;
        tw_status st = tw_blas_restart_with("Prescott", ORIGIN, prog_argv, &err);
        fail_msg("restart returned %d: %s", (int)st, err.msg);
        return;
    }
    assert_string_equal(getenv("OPENBLAS_CORETYPE"), "Prescott");
    assert_int_equal(strcasecmp(tw_blas_core(), "Prescott"), 0);
    char text[192];
    tw_blas_core_text(text, sizeof text);
    assert_non_null(strstr(text, "Prescott"));
    assert_non_null(strstr(text, "chosen by tokenwire"));
    assert_non_null(strstr(text, ORIGIN));
    /* a set chosen through the environment is kept: no second restart */
    tw_err err;
    assert_int_equal(tw_blas_pick_core(prog_argv, TW_BLAS_LEVEL_AVX512, &err), TW_OK);
    /* a tiny product still runs on the forced set */
    const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    float c[4] = {0};
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
    assert_true(c[0] == 19.0f && c[1] == 22.0f && c[2] == 43.0f && c[3] == 50.0f);
}

static void test_text_names_own_choice(void **state)
{
    (void)state;
    char text[192];
    tw_blas_core_text(text, sizeof text);
    assert_non_null(strstr(text, tw_blas_core()));
    /* a level this machine reports is one of the three */
    bool amd;
    tw_blas_level lv = tw_blas_cpu_level(&amd);
    assert_true(lv == TW_BLAS_LEVEL_OLD || lv == TW_BLAS_LEVEL_AVX2 || lv == TW_BLAS_LEVEL_AVX512);
    tw_blas_core_text(text, 1);
    assert_int_equal(text[0], '\0');
}

int main(int argc, char **argv)
{
    (void)argc;
    prog_argv = argv;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wanted),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_text_names_own_choice),
        cmocka_unit_test(test_restart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
