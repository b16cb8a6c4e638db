#include "tw/blas.h"

#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Set beside OPENBLAS_CORETYPE when tw_blas_restart_with chose it, so the
 * restarted program can say what OpenBLAS had picked by itself. */
#define PICKED_FROM_ENV "TW_BLAS_CORE_PICKED_FROM"
#define CORE_ENV        "OPENBLAS_CORETYPE"
#define CORE_NAME_MAX   64

const char *tw_blas_core(void)
{
    const char *name = openblas_get_corename();
    return name ? name : "unknown";
}

tw_blas_level tw_blas_cpu_level(bool *amd)
{
    if (amd)
        *amd = false;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (amd)
        *amd = __builtin_cpu_is("amd");
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return TW_BLAS_LEVEL_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return TW_BLAS_LEVEL_AVX2;
#endif
    return TW_BLAS_LEVEL_OLD;
}

static bool named(const char *core, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcasecmp(core, names[i]))
            return true;
    return false;
}

/* Level of a kernel set OpenBLAS names; -1 for one left alone (AMD's
 * Bulldozer family has sets of its own, and a name newer than this list
 * is assumed to know its CPU). */
static int core_level(const char *core)
{
    static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    static const char *const avx2[] = {"Haswell", "Zen"};
    /* the sets a DYNAMIC_ARCH build falls back to, and those of CPUs older
     * than AVX2 */
    static const char *const old[] = {
        "Unknown", "Katmai",       "Coppermine", "Northwood",  "Prescott",    "Banias",
        "Atom",    "Core2",        "Penryn",     "Dunnington", "Nehalem",     "Athlon",
        "Opteron", "Opteron_SSE3", "Barcelona",  "Nano",       "Sandybridge", "Bobcat",
    };
    if (named(core, avx512, sizeof avx512 / sizeof *avx512))
        return TW_BLAS_LEVEL_AVX512;
    if (named(core, avx2, sizeof avx2 / sizeof *avx2))
        return TW_BLAS_LEVEL_AVX2;
    if (named(core, old, sizeof old / sizeof *old))
        return TW_BLAS_LEVEL_OLD;
    return -1;
}

const char *tw_blas_core_wanted(const char *core, tw_blas_level target, bool amd)
{
    if (!core)
        return NULL;
    int have = core_level(core);
    if (have < 0 || have == (int)target)
        return NULL;
    switch (target) {
    case TW_BLAS_LEVEL_AVX512:
        return "SkylakeX";
    case TW_BLAS_LEVEL_AVX2:
        return amd ? "Zen" : "Haswell";
    case TW_BLAS_LEVEL_OLD:
        break;
    }
    return NULL;
}

tw_status tw_blas_restart_with(const char *core, const char *from, char *const argv[], tw_err *err)
{
    if (!core || !core[0] || strlen(core) >= CORE_NAME_MAX)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "OpenBLAS kernel set name: empty or too long");
    if (!argv || !argv[0])
        return tw_errorf(err, TW_INVALID_ARGUMENT, "restart with OpenBLAS %s: no argv", core);
    if (setenv(CORE_ENV, core, 1) != 0 ||
        setenv(PICKED_FROM_ENV, from && from[0] ? from : "unknown", 1) != 0) {
        int e = errno;
        unsetenv(CORE_ENV);
        unsetenv(PICKED_FROM_ENV);
        return tw_errorf(err, TW_UNAVAILABLE, "restart with OpenBLAS %s: setenv: %s", core,
                         strerror(e));
    }
    fflush(NULL);
    execv("/proc/self/exe", argv);
    int e = errno;
    unsetenv(CORE_ENV);
    unsetenv(PICKED_FROM_ENV);
    return tw_errorf(err, TW_UNAVAILABLE, "restart with OpenBLAS %s: exec /proc/self/exe: %s", core,
                     strerror(e));
}

tw_status tw_blas_pick_core(char *const argv[], tw_blas_level cap, tw_err *err)
{
    if (getenv(CORE_ENV))
        return TW_OK;
    bool amd = false;
    tw_blas_level target = tw_blas_cpu_level(&amd);
    if (cap < target)
        target = cap;
    const char *from = tw_blas_core();
    const char *want = tw_blas_core_wanted(from, target, amd);
    if (!want)
        return TW_OK;
    char picked[CORE_NAME_MAX];
    snprintf(picked, sizeof picked, "%s", from);
    return tw_blas_restart_with(want, picked, argv, err);
}

void tw_blas_core_text(char *buf, size_t cap)
{
    if (!buf || cap == 0)
        return;
    const char *core = tw_blas_core();
    const char *set = getenv(CORE_ENV);
    const char *from = getenv(PICKED_FROM_ENV);
    if (set && from && !strcasecmp(set, core))
        snprintf(buf, cap,
                 "OpenBLAS kernels %s (chosen by tokenwire: OpenBLAS picked %.64s on "
                 "this CPU)",
                 core, from);
    else if (set)
        snprintf(buf, cap, "OpenBLAS kernels %s (%s=%.64s)", core, CORE_ENV, set);
    else
        snprintf(buf, cap, "OpenBLAS kernels %s (OpenBLAS's own choice)", core);
}
