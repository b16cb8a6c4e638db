/* Helpers shared by the benchmark suite programs: clocks, percentiles, the
 * machine description and result rows (one JSON object per line on stdout,
 * progress on stderr). */
#ifndef TW_BENCH_COMMON_H
#define TW_BENCH_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/hw.h"

/* CLOCK_MONOTONIC seconds. */
double bench_now(void);

/* The p-th percentile (0..100) of n values; sorts v in place. 0 for n 0. */
double bench_percentile(double *v, size_t n, double p);

/* Resident set size of this process in bytes (VmRSS), 0 when unknown. */
uint64_t bench_rss_bytes(void);

/* Proportional set size of this process in bytes (smaps_rollup: a page
 * mapped N times counts 1/N each time), 0 when unknown. */
uint64_t bench_pss_bytes(void);

/* Bytes currently allocated through malloc (heap + mmapped blocks). */
uint64_t bench_heap_bytes(void);

/* A decimal count in [lo, hi] from a command-line argument, whole or
 * nothing: false (and *out untouched) for anything else. */
bool bench_parse_size(const char *s, size_t lo, size_t hi, size_t *out);

/* The value of the option `flag` (NULL when the command line ended before
 * it), or NULL after "prog: flag needs a value" on stderr. */
const char *bench_arg_value(const char *prog, const char *flag, const char *value);

/* bench_parse_size() for the value of `flag`; anything else is said on
 * stderr ("prog: flag wants a whole number from lo to hi, not 'x'") and
 * gives false. */
bool bench_arg_size(const char *prog, const char *flag, const char *value, size_t lo, size_t hi,
                    size_t *out);

/* A decimal number in (0, hi] for `flag`, said on stderr like
 * bench_arg_size() when it is anything else. */
bool bench_arg_positive(const char *prog, const char *flag, const char *value, double hi,
                        double *out);

/* Says "prog: unknown option 'arg'" on stderr. */
void bench_arg_unknown(const char *prog, const char *arg);

/* Prints a progress line to stderr ("[bench] ..."). */
void bench_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Writes one result row as a JSON line to stdout:
 * {"suite":..,"name":..,"model":..,"value":..,"unit":..,
 *  "baseline":..,"baseline_name":..,"ratio":..,"extra":{...}}.
 * baseline <= 0 leaves baseline and ratio out. extra_json is an object's
 * members without braces (may be NULL or ""). */
void bench_row(const char *suite, const char *name, const char *model, double value,
               const char *unit, double baseline, const char *baseline_name,
               const char *extra_json);

/* Writes the machine row: tw_hw_detect() plus the bandwidth measured with
 * `threads` threads over a buffer 4x the L3 (at least 256 MiB). Returns the
 * bandwidth in bytes per second (0 when the probe failed). */
double bench_machine_row(uint32_t threads, double seconds);

/* Runs OpenBLAS's kernel set for this CPU (tw_blas_pick_core), restarting
 * the program when that changes it; with "--isa avx2" or "--isa scalar" in
 * argv, the AVX2 set, as on a machine without AVX-512. Call first thing in
 * main. */
void bench_pick_blas(const char *prog, char **argv);

/* Forces the kernels' ISA (tw_kernels_force_isa) to `name` for --isa;
 * false, with "prog: why" on stderr, when this machine or build lacks it
 * or name is NULL (the command line ended before the value). */
bool bench_force_isa(const char *prog, const char *name);

/* Applies decode prefetch (tw/kernels.h) as `mode` says: "on", "off", or
 * "auto" (measured on `threads` threads, as tokenwired does at start), and
 * writes it as a machine row. Call after forcing the ISA. Returns -1 for an
 * unknown mode. */
int bench_decode_prefetch(const char *mode, uint32_t threads);

/* Applies F16 prefill (tw_hw_f16_prefill) as `mode` says: "tiles",
 * "panels", "blas" or "auto" (measured, as tokenwired does at start), and writes it as a
 * machine row. Call after forcing the ISA. Returns -1 for an unknown mode. */
int bench_f16_prefill(const char *mode, uint32_t threads);

/* The read bandwidth (bytes/s) of `threads` threads now, from a probe of
 * about `seconds` over a buffer of tw_hw_probe_bytes (mapped at the first
 * call and kept); 0 when it fails. For
 * setting a measurement beside the bandwidth of its own moment on a machine
 * whose neighbours change it. */
double bench_probe_bandwidth(uint32_t threads, double seconds);
/* Unmaps the buffer bench_probe_bandwidth keeps between its probes (before
 * a memory reading, and when done probing); the next probe maps it anew. */
void bench_probe_release(void);

#endif
