/* Unit costs of speculative decoding measured on the model API (spec_costs.c). */
#ifndef TW_BENCH_SPEC_COSTS_H
#define TW_BENCH_SPEC_COSTS_H

#include <stddef.h>
#include <stdint.h>

/* A round verifies at most TW_SPEC_MAX_DRAFT + 1 rows. */
#define TW_SPEC_COST_MAX_ROWS 13

typedef struct tw_spec_costs {
    double target_decode_us;                  /* one token, one sequence */
    double verify_us[TW_SPEC_COST_MAX_ROWS];  /* [n - 1]: n rows */
    double draft_decode_us;
    double draft_snapshot_us;                 /* saving the draft's state once */
    double draft_restore_us, target_restore_us;
} tw_spec_costs;

/* Loads both models (again; the engine's copies are not reachable) with
 * `threads` threads and measures. Returns 0, or -1 after printing why. */
int tw_bench_spec_costs(const char *target, const char *draft, uint32_t threads,
                        tw_spec_costs *out);

/* Prints the costs as a small table on stdout. */
void tw_bench_spec_costs_print(const tw_spec_costs *c);

#endif
