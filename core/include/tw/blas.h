/* Which of OpenBLAS's kernel sets the process runs.
 *
 * OpenBLAS built for many CPUs (DYNAMIC_ARCH, as Debian ships it) picks its
 * kernels from the CPU model when it loads. A model newer than the build
 * falls back to an old set: Debian 12's 0.3.21 on an Emerald Rapids Xeon
 * (family 6, model 207) runs its Prescott (SSE3) kernels, whose sgemm is a
 * quarter of the speed of its SkylakeX ones there. OpenBLAS reads
 * OPENBLAS_CORETYPE only while loading, so the remedy is to set it and start
 * the program again; tw_blas_pick_core does that, and a user's own
 * OPENBLAS_CORETYPE always wins.
 */
#ifndef TW_BLAS_H
#define TW_BLAS_H

#include <stdbool.h>
#include <stddef.h>

#include "tw/status.h"

/* What a CPU can run, as far as OpenBLAS's x86 kernel sets go. */
typedef enum tw_blas_level {
    TW_BLAS_LEVEL_OLD = 0,    /* neither of the below */
    TW_BLAS_LEVEL_AVX2 = 1,   /* AVX2 and FMA: Haswell, Zen */
    TW_BLAS_LEVEL_AVX512 = 2, /* AVX-512 F, CD, BW, DQ and VL: SkylakeX and later */
} tw_blas_level;

/* The kernel set OpenBLAS runs now, as it names it ("Haswell", "SkylakeX",
 * "Prescott", ...). */
const char *tw_blas_core(void);

/* This CPU's level; amd (may be NULL) says whether it is an AMD one. */
tw_blas_level tw_blas_cpu_level(bool *amd);

/* The kernel set to ask OpenBLAS for so that it runs at `target` level
 * when it picked `core` by itself, or NULL when `core` is already at that
 * level, `target` is TW_BLAS_LEVEL_OLD, or `core` is a name this function
 * does not rank (AMD's Bulldozer family, names newer than it), which it
 * leaves alone. AVX-512 gets "SkylakeX", AVX2 "Zen" (amd) or "Haswell". */
const char *tw_blas_core_wanted(const char *core, tw_blas_level target, bool amd);

/* Makes the program run the kernel set of this CPU's level, or of `cap`
 * when that is lower (a benchmark standing in for an AVX2 machine passes
 * TW_BLAS_LEVEL_AVX2; everyone else TW_BLAS_LEVEL_AVX512): when
 * OPENBLAS_CORETYPE is unset and tw_blas_core_wanted names a set, sets it and
 * executes /proc/self/exe again with argv (the environment carries the
 * choice, so the new image does not restart again). Call it first thing in
 * main, before any thread, file or socket exists. Returns TW_OK without
 * restarting when there is nothing to change; on a failed restart returns
 * UNAVAILABLE, leaves the environment as it was, and the program can go on
 * with OpenBLAS's own choice. */
tw_status tw_blas_pick_core(char *const argv[], tw_blas_level cap, tw_err *err);

/* Restarts the program with OPENBLAS_CORETYPE=core, noting `from` as what
 * OpenBLAS had picked (tw_blas_core_text reports it); what tw_blas_pick_core
 * does once it has decided. Returns only on failure (UNAVAILABLE, or
 * INVALID_ARGUMENT for an empty or over-long name). */
tw_status tw_blas_restart_with(const char *core, const char *from, char *const argv[], tw_err *err);

/* One line for logs: the kernel set and who chose it, e.g. "OpenBLAS
 * kernels SkylakeX (chosen by tokenwire: OpenBLAS picked Prescott on this
 * CPU)". */
void tw_blas_core_text(char *buf, size_t cap);

#endif
