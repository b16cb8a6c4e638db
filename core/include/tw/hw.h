/* The machine tokenwire runs on, and the settings chosen from it.
 *
 * tw_hw_detect() reads what Linux exposes (sysfs topology and caches,
 * /proc/cpuinfo, /proc/meminfo, getrlimit), the caches CPUID describes where
 * sysfs does not, and the ISA the kernels dispatch to. tw_hw_choose() turns
 * that into thread, batch and prefill-chunk settings; a caller applies its
 * own overrides on top and logs the result with tw_hw_log_choices().
 * Nothing here is on a hot path.
 *
 * Thread-safety: every function is safe to call from any thread; none keeps
 * state between calls.
 */
#ifndef TW_HW_H
#define TW_HW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/kernels.h"
#include "tw/status.h"

/* What tw_hw_detect() found. A field it could not read is 0 (strings: ""). */
typedef struct tw_hw_info {
    char cpu_model[128];
    uint32_t cpu_family;       /* /proc/cpuinfo's "cpu family" and "model" (x86: */
    uint32_t cpu_model_number; /* 23/49 is a Zen 2 EPYC, 26/2 a Zen 5 one) */
    uint32_t cpus_online;      /* logical CPUs this process may run on */
    uint32_t cores_physical;   /* distinct (package, core) pairs among them */
    uint32_t threads_per_core; /* SMT width: cpus_online / cores_physical */
    char isa[16];              /* tw_kernels_isa(): "avx512", "avx2vnni", "avx2", "scalar" */
    uint64_t l1d_bytes;        /* one instance of each cache level, as cpu0 sees it */
    uint64_t l2_bytes;
    uint64_t l3_bytes;
    uint64_t mem_total_bytes;
    uint64_t mem_available_bytes;
    uint64_t memlock_limit_bytes; /* RLIMIT_MEMLOCK soft limit; UINT64_MAX: unlimited */
    char thp[16]; /* transparent huge pages: "always", "madvise", "never", "" unknown */
} tw_hw_info;

/* Fills *out. Never fails on a machine that hides some of the files (those
 * fields stay 0); returns INVALID_ARGUMENT only for a NULL out. Cache sizes
 * that sysfs does not give come from CPUID where the CPU has it
 * (tw_hw_cpuid_caches). */
tw_status tw_hw_detect(tw_hw_info *out, tw_err *err);

/* Fills the cache sizes of hw that are still 0 from CPUID on x86 (nothing
 * elsewhere): the deterministic cache leaf (4, or 0x8000001D on AMD), one
 * instance per level; on AMD then L1d and L2 from leaves 0x80000005/6. An
 * L3 that only AMD's older leaf describes stays 0: that leaf gives the L3s
 * of every core complex of the part together. */
void tw_hw_cpuid_caches(tw_hw_info *hw);

/* Decodes one subleaf of a deterministic cache leaf (the layout leaves 4
 * and 0x8000001D share): the cache's level into *level and its size into
 * *bytes. Returns its type: 1 data, 2 instruction, 3 unified, 0 none (the
 * end of the list, or a reserved type). Pure function. */
int tw_hw_cache_from_cpuid(uint32_t eax, uint32_t ebx, uint32_t ecx, unsigned *level,
                           uint64_t *bytes);

/* Engine settings derived from the hardware. */
typedef struct tw_hw_choice {
    uint32_t threads;       /* compute threads, the calling thread included */
    uint32_t max_batch;     /* sequences decoded together */
    uint32_t prefill_chunk; /* prompt tokens per prefill step */
    uint64_t fetch_ahead;   /* bytes (tw_kernels_set_fetch_ahead); 0: off */
} tw_hw_choice;

/* Chooses settings for hw. Threads: one per physical core (SMT siblings
 * share the load/store units that bound a matvec, so they add contention,
 * not speed), capped at 256. Prefill chunk: large enough to amortise reading
 * the weights once per chunk, smaller on machines with little memory.
 * Batch: enough sequences to turn decode from bandwidth- into compute-bound.
 * Fetch ahead: half the L2 (64 KiB..1 MiB; TW_FETCH_AHEAD_DEFAULT when the
 * L2 is unknown). Pure function. */
void tw_hw_choose(const tw_hw_info *hw, tw_hw_choice *out);

/* Which settings of a tw_hw_choice the user set rather than the hardware. */
typedef struct tw_hw_overrides {
    bool threads, max_batch, prefill_chunk, fetch_ahead;
} tw_hw_overrides;

/* Writes one INFO log line describing hw and one per setting in c, saying
 * for each whether it was chosen automatically or set by the user. */
void tw_hw_log_choices(const tw_hw_info *hw, const tw_hw_choice *c, const tw_hw_overrides *set);

/* Measures sequential read bandwidth in bytes per second with a STREAM-like
 * probe: `threads` threads (1..64) each sum their slice of a `bytes` buffer
 * (at least 4 MiB; tw_hw_probe_bytes says how large to measure DRAM),
 * repeated for about `seconds` (0.05..30), every other pass also fetching
 * ahead in software, and the best pass is reported in *out. The buffer is
 * asked for in huge pages, as the loaded weights are.
 * Maps and unmaps the buffer; blocks for the duration. */
tw_status tw_hw_read_bandwidth(size_t bytes, uint32_t threads, double seconds, double *out,
                               tw_err *err);

/* The same probe over a buffer kept open between reads, for a caller that
 * probes again and again (the buffer's mapping and first touch cost more
 * than a read of it). open maps and writes `bytes` (at least 4 MiB); read
 * measures as tw_hw_read_bandwidth does (threads 1..64, seconds
 * 0.05..30); close unmaps (NULL is a no-op). One read at a time per probe. */
typedef struct tw_bw_probe tw_bw_probe;
tw_status tw_bw_probe_open(size_t bytes, tw_bw_probe **out, tw_err *err);
tw_status tw_bw_probe_read(tw_bw_probe *p, uint32_t threads, double seconds, double *out,
                           tw_err *err);
/* The buffer's size in bytes; 0 for NULL. */
size_t tw_bw_probe_bytes(const tw_bw_probe *p);
void tw_bw_probe_close(tw_bw_probe *p);

/* How large a buffer tw_hw_read_bandwidth needs on `threads` threads to
 * read memory rather than cache: eight times hw's L3 per thread (each
 * thread may sit beside an L3 of its own) and at least 1 GiB, since a
 * sweep of a few L3s is still partly served from them; at most a quarter
 * of the available memory, and never under 64 MiB. */
size_t tw_hw_probe_bytes(const tw_hw_info *hw, uint32_t threads);

/* Chooses decode prefetch (tw_kernels_set_decode_prefetch) for this
 * machine: tw_kernels_tune_decode_prefetch on `threads` threads (1..256)
 * over a matrix of twice hw's L3 (32..256 MiB, and at most an eighth of
 * the available memory; 64 MiB when the L3 is unknown), for about 0.1 s.
 * Fills *out (zeroed, gain 1, when nothing was measured). Errors as
 * tw_kernels_tune_decode_prefetch's, plus INTERNAL when no thread pool can
 * be made; decode prefetch is then left off. */
tw_status tw_hw_tune_decode_prefetch(const tw_hw_info *hw, uint32_t threads,
                                     tw_prefetch_tune *out, tw_err *err);

/* Applies a --decode-prefetch mode: "on" or "off" as said, or "auto",
 * tw_hw_tune_decode_prefetch with hw and threads. *out (zeroed, gain 1,
 * when nothing was measured) holds the setting in force in out->on.
 * INVALID_ARGUMENT for another mode; a failed measurement's error, with
 * prefetch left off. */
tw_status tw_hw_decode_prefetch(const char *mode, const tw_hw_info *hw, uint32_t threads,
                                tw_prefetch_tune *out, tw_err *err);

/* Chooses F16 and BF16 prefill (tw_kernels_set_f16_prefill) as `mode`
 * says: "tiles", "panels", "blas", or "auto" (tw_kernels_tune_f16_prefill
 * on a pool of `threads` threads, 1..256, for about 0.1 s). *out says what
 * was chosen and measured. INVALID_ARGUMENT for another mode, NULL
 * arguments or threads out of range; INTERNAL when no pool can be made;
 * otherwise as tw_kernels_tune_f16_prefill. The tiles are set on any
 * error. */
tw_status tw_hw_f16_prefill(const char *mode, uint32_t threads, tw_f16_prefill_tune *out,
                            tw_err *err);

/* One line saying what tw_hw_f16_prefill chose and why, for logs. */
void tw_hw_f16_prefill_text(const char *mode, const tw_f16_prefill_tune *t, char *buf, size_t cap);

/* One line saying what tw_hw_decode_prefetch chose and why, for logs and
 * reports: "on (auto: a 63 MiB matrix swept in ...)", "off (set by
 * --decode-prefetch)". */
void tw_hw_decode_prefetch_text(const char *mode, const tw_prefetch_tune *t, char *buf,
                                size_t cap);

/* Total and available memory in bytes from /proc/meminfo (0 when it does
 * not say). Cheap: one small file read. */
void tw_hw_meminfo(uint64_t *total, uint64_t *available);

/* The kernel's transparent-huge-page mode into out ("always", "madvise",
 * "never"; "" when /sys does not say, e.g. a kernel without THP). */
void tw_hw_thp_mode(char *out, size_t cap);

/* True when memory marked with MADV_HUGEPAGE gets huge pages (mode "always"
 * or "madvise"). */
bool tw_hw_thp_enabled(void);

/* Locks every page the process maps now and later (weights included) into
 * RAM with mlockall(), so the kernel never pages weights out under memory
 * pressure. FAILED_PRECONDITION with RLIMIT_MEMLOCK in the message when the
 * limit refuses it; the process keeps running unlocked in that case. */
tw_status tw_hw_lock_memory(tw_err *err);

#endif
