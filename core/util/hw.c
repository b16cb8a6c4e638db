/* Hardware detection, the settings derived from it, a memory bandwidth
 * probe and memory locking. */
#include "tw/hw.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tw/kernels.h"
#include "tw/log.h"
#include "tw/pool.h"

/* Reads the first line of a small sysfs/proc file into buf; false when the
 * file is missing or empty. */
static bool read_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    if (ok)
        buf[strcspn(buf, "\n")] = '\0';
    return ok && buf[0] != '\0';
}

static bool read_long(const char *path, long *out)
{
    char buf[64];
    if (!read_line(path, buf, sizeof buf))
        return false;
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (errno || end == buf)
        return false;
    *out = v;
    return true;
}

/* sysfs cache sizes read "32K", "1024K", "32768K" (sometimes "M"). */
static uint64_t parse_size(const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return 0;
    if (*end == 'K' || *end == 'k')
        return v << 10;
    if (*end == 'M' || *end == 'm')
        return v << 20;
    if (*end == 'G' || *end == 'g')
        return v << 30;
    return v;
}

static void detect_caches(tw_hw_info *hw)
{
    for (int i = 0; i < 8; i++) {
        char path[128], type[32], size[32];
        long level;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (!read_long(path, &level))
            break;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if (!read_line(path, type, sizeof type) || strcmp(type, "Instruction") == 0)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!read_line(path, size, sizeof size))
            continue;
        uint64_t bytes = parse_size(size);
        if (level == 1)
            hw->l1d_bytes = bytes;
        else if (level == 2)
            hw->l2_bytes = bytes;
        else if (level == 3)
            hw->l3_bytes = bytes;
    }
}

/* Counts distinct (package, core) pairs over the CPUs in our affinity mask,
 * so a container limited to some CPUs sees only those. */
static void detect_cores(tw_hw_info *hw)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    bool have_mask = sched_getaffinity(0, sizeof set, &set) == 0;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (have_mask)
        hw->cpus_online = (uint32_t)CPU_COUNT(&set);
    else if (online > 0)
        hw->cpus_online = (uint32_t)online;
    enum { MAX_PAIRS = 1024 };
    static const long unset = -1;
    long pkg_of[MAX_PAIRS], core_of[MAX_PAIRS];
    uint32_t n_pairs = 0;
    bool complete = true;
    for (int cpu = 0; cpu < CPU_SETSIZE && cpu < 4096; cpu++) {
        if (have_mask && !CPU_ISSET(cpu, &set))
            continue;
        if (!have_mask && cpu >= online)
            break;
        char path[128];
        long pkg = unset, core = unset;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id",
                 cpu);
        bool ok = read_long(path, &pkg);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        ok = ok && read_long(path, &core);
        if (!ok) {
            complete = false;
            break;
        }
        bool seen = false;
        for (uint32_t i = 0; i < n_pairs && !seen; i++)
            seen = pkg_of[i] == pkg && core_of[i] == core;
        if (!seen) {
            if (n_pairs == MAX_PAIRS) {
                complete = false;
                break;
            }
            pkg_of[n_pairs] = pkg;
            core_of[n_pairs] = core;
            n_pairs++;
        }
    }
    hw->cores_physical = complete && n_pairs > 0 ? n_pairs : hw->cpus_online;
    hw->threads_per_core =
        hw->cores_physical ? (hw->cpus_online + hw->cores_physical - 1) / hw->cores_physical : 0;
}

/* The value after "key<tabs/spaces>:" on a /proc/cpuinfo line, or NULL
 * when the line holds another key. */
static const char *cpuinfo_value(const char *line, const char *key)
{
    size_t n = strlen(key);
    if (strncmp(line, key, n) != 0)
        return NULL;
    const char *colon = line + n;
    while (*colon == ' ' || *colon == '\t')
        colon++;
    if (*colon != ':') /* "model" must not take "model name"'s line */
        return NULL;
    colon++;
    while (*colon == ' ' || *colon == '\t')
        colon++;
    return colon;
}

/* The first CPU's name, family and model number (its block ends at the
 * first blank line). */
static void detect_cpu_model(tw_hw_info *hw)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    bool family = false, model = false, line_start = true;
    while (fgets(line, sizeof line, f)) {
        /* a line longer than the buffer (flags) arrives in pieces; only a
         * piece that starts a line holds a key */
        const bool starts = line_start;
        line_start = strchr(line, '\n') != NULL;
        if (!starts)
            continue;
        if (line[0] == '\n')
            break;
        const char *v;
        if (!hw->cpu_model[0] && (v = cpuinfo_value(line, "model name"))) {
            snprintf(hw->cpu_model, sizeof hw->cpu_model, "%s", v);
            hw->cpu_model[strcspn(hw->cpu_model, "\n")] = '\0';
        } else if (!family && (v = cpuinfo_value(line, "cpu family"))) {
            hw->cpu_family = (uint32_t)strtoul(v, NULL, 10);
            family = true;
        } else if (!model && (v = cpuinfo_value(line, "model"))) {
            hw->cpu_model_number = (uint32_t)strtoul(v, NULL, 10);
            model = true;
        }
    }
    fclose(f);
}

void tw_hw_meminfo(uint64_t *total, uint64_t *available)
{
    *total = *available = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
            *total = (uint64_t)kb << 10;
        else if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            *available = (uint64_t)kb << 10;
    }
    fclose(f);
}

static void detect_memory(tw_hw_info *hw)
{
    tw_hw_meminfo(&hw->mem_total_bytes, &hw->mem_available_bytes);
    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0)
        hw->memlock_limit_bytes = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
}

void tw_hw_thp_mode(char *out, size_t cap)
{
    if (!out || cap == 0)
        return;
    out[0] = '\0';
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f)
        return;
    /* the mode in effect is the bracketed one: "always [madvise] never" */
    char line[128];
    if (fgets(line, sizeof line, f)) {
        char *open = strchr(line, '['), *close = open ? strchr(open, ']') : NULL;
        if (open && close && (size_t)(close - open - 1) < cap)
            snprintf(out, cap, "%.*s", (int)(close - open - 1), open + 1);
    }
    fclose(f);
}

bool tw_hw_thp_enabled(void)
{
    char mode[16];
    tw_hw_thp_mode(mode, sizeof mode);
    return !strcmp(mode, "always") || !strcmp(mode, "madvise");
}

tw_status tw_hw_detect(tw_hw_info *out, tw_err *err)
{
    if (!out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tw_hw_detect: out is NULL");
    memset(out, 0, sizeof *out);
    detect_cpu_model(out);
    detect_cores(out);
    detect_caches(out);
    tw_hw_cpuid_caches(out);
    detect_memory(out);
    tw_hw_thp_mode(out->thp, sizeof out->thp);
    snprintf(out->isa, sizeof out->isa, "%s", tw_kernels_isa());
    return TW_OK;
}

void tw_hw_choose(const tw_hw_info *hw, tw_hw_choice *out)
{
    uint32_t cores = hw->cores_physical ? hw->cores_physical : hw->cpus_online;
    if (cores == 0)
        cores = 1;
    out->threads = cores > 256 ? 256 : cores;
    /* A decode step reads every weight once whatever the batch; a wider batch
     * costs compute per sequence, so more cores can carry more sequences
     * before the step turns compute-bound. */
    out->max_batch = cores >= 16 ? 64 : cores >= 8 ? 32 : 16;
    /* Each prefill step reads the weights once; bigger steps amortise that,
     * but the activations (chunk x hidden floats, several buffers) must stay
     * small next to memory and ideally near the L3. */
    uint64_t avail = hw->mem_available_bytes ? hw->mem_available_bytes : hw->mem_total_bytes;
    if (avail && avail < (2ull << 30))
        out->prefill_chunk = 128;
    else if (hw->l3_bytes >= (32ull << 20) && cores >= 4)
        out->prefill_chunk = 512;
    else
        out->prefill_chunk = 256;
    /* What a waiting thread fetches of the next matrix must still be in its
     * L2 when it gets there, beside the rows it streams meanwhile. */
    const uint64_t fa = hw->l2_bytes / 2;
    out->fetch_ahead = !hw->l2_bytes   ? TW_FETCH_AHEAD_DEFAULT
                       : fa < 64 << 10 ? 64 << 10
                       : fa > 1 << 20  ? 1 << 20
                                       : fa;
}

static void fmt_bytes(uint64_t b, char *buf, size_t cap)
{
    if (b == 0)
        snprintf(buf, cap, "unknown");
    else if (b >= (1ull << 30))
        snprintf(buf, cap, "%.1f GiB", (double)b / (double)(1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(buf, cap, "%llu MiB", (unsigned long long)(b >> 20));
    else
        snprintf(buf, cap, "%llu KiB", (unsigned long long)(b >> 10));
}

void tw_hw_log_choices(const tw_hw_info *hw, const tw_hw_choice *c, const tw_hw_overrides *set)
{
    static const tw_hw_overrides none;
    if (!set)
        set = &none;
    char l1[32], l2[32], l3[32], mt[32], ma[32];
    fmt_bytes(hw->l1d_bytes, l1, sizeof l1);
    fmt_bytes(hw->l2_bytes, l2, sizeof l2);
    fmt_bytes(hw->l3_bytes, l3, sizeof l3);
    fmt_bytes(hw->mem_total_bytes, mt, sizeof mt);
    fmt_bytes(hw->mem_available_bytes, ma, sizeof ma);
    tw_info("hardware: %s (family %u, model %u), %u CPUs online, %u physical cores (%u per "
            "core), ISA %s, L1d %s L2 %s L3 %s, memory %s (%s available), transparent huge "
            "pages %s",
            hw->cpu_model[0] ? hw->cpu_model : "unknown CPU", hw->cpu_family,
            hw->cpu_model_number, hw->cpus_online,
            hw->cores_physical, hw->threads_per_core, hw->isa, l1, l2, l3, mt, ma,
            hw->thp[0] ? hw->thp : "unavailable");
    tw_info("threads %u (%s)", c->threads,
            set->threads ? "set by --threads" : "auto: one per physical core");
    tw_info("max batch %u (%s)", c->max_batch,
            set->max_batch ? "set by --max-batch" : "auto: from the core count");
    tw_info("prefill chunk %u (%s)", c->prefill_chunk,
            set->prefill_chunk ? "set by --prefill-chunk" : "auto: from cores, L3 and memory");
    char fa[32];
    fmt_bytes(c->fetch_ahead, fa, sizeof fa);
    tw_info("fetch ahead %s (%s)", c->fetch_ahead ? fa : "off",
            set->fetch_ahead ? "set by --fetch-ahead-bytes" : "auto: half the L2");
}

tw_status tw_hw_tune_decode_prefetch(const tw_hw_info *hw, uint32_t threads,
                                     tw_prefetch_tune *out, tw_err *err)
{
    tw_kernels_set_decode_prefetch(false);
    if (out)
        *out = (tw_prefetch_tune){.gain = 1.0};
    if (!hw || !out || threads < 1 || threads > 256)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "decode prefetch tuning: NULL hw or out, or threads not 1..256");
    const uint64_t lo = 32ull << 20, hi = 256ull << 20;
    uint64_t bytes = hw->l3_bytes ? 2 * hw->l3_bytes : 64ull << 20;
    bytes = bytes < lo ? lo : bytes > hi ? hi : bytes;
    if (hw->mem_available_bytes && bytes > hw->mem_available_bytes / 8)
        bytes = hw->mem_available_bytes / 8;
    if (bytes < (4ull << 20))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                         "decode prefetch tuning: too little memory available to measure");
    tw_pool *pool = NULL;
    tw_err perr;
    if (tw_pool_create((int)threads, &pool, &perr) != TW_OK)
        return tw_errorf(err, TW_INTERNAL, "decode prefetch tuning: no thread pool: %s",
                         perr.msg);
    tw_status st = tw_kernels_tune_decode_prefetch(pool, (size_t)bytes, 0.1, out, err);
    tw_pool_destroy(pool);
    return st;
}

tw_status tw_hw_decode_prefetch(const char *mode, const tw_hw_info *hw, uint32_t threads,
                                tw_prefetch_tune *out, tw_err *err)
{
    if (!mode || !out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "decode prefetch: NULL mode or out");
    if (!strcmp(mode, "auto"))
        return tw_hw_tune_decode_prefetch(hw, threads, out, err);
    if (strcmp(mode, "on") != 0 && strcmp(mode, "off") != 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "decode-prefetch must be auto, on or off");
    memset(out, 0, sizeof *out);
    out->gain = 1.0;
    out->on = !strcmp(mode, "on");
    tw_kernels_set_decode_prefetch(out->on);
    return TW_OK;
}

void tw_hw_decode_prefetch_text(const char *mode, const tw_prefetch_tune *t, char *buf,
                                size_t cap)
{
    const char *state = t->on ? "on" : "off";
    if (strcmp(mode, "auto") != 0)
        snprintf(buf, cap, "%s (set by --decode-prefetch)", state);
    else if (t->pairs == 0)
        snprintf(buf, cap, "%s (auto: nothing measured; the %s kernels have no packed rows to "
                           "fetch, or the measurement failed)",
                 state, tw_kernels_isa());
    else if (t->k_pairs == 0)
        snprintf(buf, cap,
                 "%s (auto: a %zu MiB matrix swept in %.0f us with it and %.0f without, "
                 "median of %u pairs %.2fx)",
                 state, t->bytes >> 20, t->us_on, t->us_off, t->pairs, t->gain);
    else
        snprintf(buf, cap,
                 "%s (auto: a %zu MiB matrix swept in %.0f us with it and %.0f without, "
                 "median of %u pairs %.2fx), the Q4_K kernel's fetches %s (median of %u "
                 "pairs %.2fx)",
                 state, t->bytes >> 20, t->us_on, t->us_off, t->pairs, t->gain,
                 t->k_on ? "on" : "off", t->k_pairs, t->k_gain);
}

tw_status tw_hw_f16_prefill(const char *mode, uint32_t threads, tw_f16_prefill_tune *out,
                            tw_err *err)
{
    tw_kernels_set_f16_prefill(TW_F16_PREFILL_TILES);
    if (!mode || !out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "F16 prefill: NULL mode or out");
    *out = (tw_f16_prefill_tune){.gain = 1.0};
    if (strcmp(mode, "auto") != 0) {
        static const tw_f16_prefill paths[] = {TW_F16_PREFILL_TILES, TW_F16_PREFILL_PANELS,
                                               TW_F16_PREFILL_BLAS};
        for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
            if (!strcmp(mode, tw_kernels_f16_prefill_name(paths[i]))) {
                out->path = paths[i];
                tw_kernels_set_f16_prefill(out->path);
                return TW_OK;
            }
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "f16-prefill must be auto, tiles, panels or blas");
    }
    if (threads < 1 || threads > 256)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "F16 prefill tuning: threads not 1..256");
    tw_pool *pool = NULL;
    tw_err perr;
    if (tw_pool_create((int)threads, &pool, &perr) != TW_OK)
        return tw_errorf(err, TW_INTERNAL, "F16 prefill tuning: no thread pool: %s", perr.msg);
    tw_status st = tw_kernels_tune_f16_prefill(pool, 0.1, out, err);
    tw_pool_destroy(pool);
    return st;
}

/* What a path does for F16 and BF16 prompts on the dispatched kernels. */
static const char *f16_prefill_how(tw_f16_prefill path)
{
    if (!tw_kernels_f16_prefill_has(path))
        return "through OpenBLAS's sgemm (the kernels have none of their own for it)";
    if (path == TW_F16_PREFILL_PANELS)
        return "on the kernels' half-precision panels";
    if (path == TW_F16_PREFILL_BLAS)
        return "through OpenBLAS's sgemm";
    return "on the kernels' own tiles";
}

void tw_hw_f16_prefill_text(const char *mode, const tw_f16_prefill_tune *t, char *buf, size_t cap)
{
    const char *how = f16_prefill_how(t->path);
    if (strcmp(mode, "auto") != 0) {
        snprintf(buf, cap, "%s (set by --f16-prefill %s)", how,
                 tw_kernels_f16_prefill_name(t->path));
        return;
    }
    if (t->rounds == 0) {
        snprintf(buf, cap,
                 "%s (auto: the %s kernels have one path only, or the measurement failed)", how,
                 tw_kernels_isa());
        return;
    }
    char tiles[48] = "", panels[48] = "";
    if (t->us_tiles > 0)
        snprintf(tiles, sizeof tiles, "%.0f us on the tiles, ", t->us_tiles);
    if (t->us_panels > 0)
        snprintf(panels, sizeof panels, "%.0f us on the panels, ", t->us_panels);
    snprintf(buf, cap,
             "%s (auto: a 128-token product took %s%s%.0f us through sgemm, median of %u rounds; "
             "%.2fx over %s)",
             how, tiles, panels, t->us_blas, t->rounds, t->gain,
             t->us_tiles > 0 ? "the tiles" : "sgemm");
}

tw_status tw_hw_lock_memory(tw_err *err)
{
    if (mlockall(MCL_CURRENT | MCL_FUTURE) == 0)
        return TW_OK;
    int e = errno;
    struct rlimit rl;
    char lim[64] = "unknown";
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
        if (rl.rlim_cur == RLIM_INFINITY)
            snprintf(lim, sizeof lim, "unlimited");
        else
            snprintf(lim, sizeof lim, "%llu KiB", (unsigned long long)rl.rlim_cur >> 10);
    }
    return tw_errorf(err, TW_FAILED_PRECONDITION,
                     "mlockall refused (%s); RLIMIT_MEMLOCK is %s: raise it (ulimit -l, "
                     "LimitMEMLOCK= in systemd, or CAP_IPC_LOCK) to lock weights in memory",
                     strerror(e), lim);
}
