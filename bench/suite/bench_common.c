#include "bench_common.h"

#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tw/blas.h"
#include "tw/kernels.h"

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_percentile(double *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_double);
    double pos = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)pos;
    if (lo + 1 >= n)
        return v[n - 1];
    double frac = pos - (double)lo;
    return v[lo] * (1 - frac) + v[lo + 1] * frac;
}

/* The "key: N kB" line of a /proc file, in bytes; 0 when absent. */
static uint64_t proc_kb_line(const char *path, const char *format)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, format, &kb) == 1)
            break;
    fclose(f);
    return (uint64_t)kb << 10;
}

uint64_t bench_rss_bytes(void)
{
    return proc_kb_line("/proc/self/status", "VmRSS: %llu kB");
}

uint64_t bench_pss_bytes(void)
{
    return proc_kb_line("/proc/self/smaps_rollup", "Pss: %llu kB");
}

uint64_t bench_heap_bytes(void)
{
    struct mallinfo2 mi = mallinfo2();
    return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

void bench_progress(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[bench] ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

/* Names and labels come from this program, never from outside input, but
 * model paths may hold quotes: escape what JSON needs. */
static void json_str(const char *s)
{
    putchar('"');
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

void bench_row(const char *suite, const char *name, const char *model, double value,
               const char *unit, double baseline, const char *baseline_name,
               const char *extra_json)
{
    printf("{\"suite\":");
    json_str(suite);
    printf(",\"name\":");
    json_str(name);
    printf(",\"model\":");
    json_str(model ? model : "");
    printf(",\"value\":%.6g,\"unit\":", value);
    json_str(unit);
    if (baseline > 0) {
        printf(",\"baseline\":%.6g,\"baseline_name\":", baseline);
        json_str(baseline_name ? baseline_name : "");
        printf(",\"ratio\":%.4f", value / baseline);
    }
    printf(",\"extra\":{%s}}\n", extra_json ? extra_json : "");
    fflush(stdout);
}

/* Kept open between the probes of one measurement (tw_bw_probe). */
static tw_bw_probe *held_probe;

double bench_probe_bandwidth(uint32_t threads, double seconds)
{
    tw_err err;
    if (!held_probe) {
        /* a decode row probes between every burst: the machine is detected
         * and the buffer mapped once for all of them */
        tw_hw_info hw;
        tw_hw_detect(&hw, &err);
        if (tw_bw_probe_open(tw_hw_probe_bytes(&hw, threads), &held_probe, &err) != TW_OK) {
            bench_progress("bandwidth probe failed: %s", err.msg);
            return 0;
        }
    }
    double bw = 0;
    if (tw_bw_probe_read(held_probe, threads, seconds, &bw, &err) != TW_OK)
        return 0;
    return bw;
}

void bench_probe_release(void)
{
    tw_bw_probe_close(held_probe);
    held_probe = NULL;
}

double bench_machine_row(uint32_t threads, double seconds)
{
    tw_hw_info hw;
    tw_err err;
    tw_hw_detect(&hw, &err);
    tw_hw_choice ch;
    tw_hw_choose(&hw, &ch);
    size_t bytes = tw_hw_probe_bytes(&hw, threads);
    double bw = 0, bw1 = 0;
    tw_bw_probe *probe = NULL;
    if (tw_bw_probe_open(bytes, &probe, &err) != TW_OK ||
        tw_bw_probe_read(probe, threads, seconds, &bw, &err) != TW_OK)
        bench_progress("bandwidth probe failed: %s", err.msg);
    if (threads > 1 && (!probe || tw_bw_probe_read(probe, 1, seconds, &bw1, &err) != TW_OK))
        bw1 = 0;
    tw_bw_probe_close(probe);
    if (threads == 1)
        bw1 = bw;
    char extra[1200];
    char model[128];
    /* OpenBLAS's names are plain words; anything else is not written into JSON */
    char blas_core[32];
    snprintf(blas_core, sizeof blas_core, "%s", tw_blas_core());
    for (char *c = blas_core; *c; c++)
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
            *c = '_';
    size_t j = 0;
    for (size_t i = 0; hw.cpu_model[i] && j + 1 < sizeof model; i++)
        if (hw.cpu_model[i] != '"' && hw.cpu_model[i] != '\\')
            model[j++] = hw.cpu_model[i];
    model[j] = '\0';
    snprintf(extra, sizeof extra,
             "\"cpu\":\"%s\",\"cpu_family\":%u,\"cpu_model_number\":%u,"
             "\"cpus_online\":%u,\"cores_physical\":%u,\"threads_per_core\":%u,"
             "\"isa\":\"%s\",\"l1d\":%llu,\"l2\":%llu,\"l3\":%llu,\"mem_total\":%llu,"
             "\"mem_available\":%llu,\"bw_threads\":%u,\"bw_1thread\":%.4g,\"bw_bytes\":%zu,"
             "\"auto_threads\":%u,\"auto_max_batch\":%u,\"auto_prefill_chunk\":%u,"
             "\"auto_fetch_ahead\":%llu,\"blas_core\":\"%s\",\"blas_core_set\":%s",
             model, hw.cpu_family, hw.cpu_model_number, hw.cpus_online, hw.cores_physical,
             hw.threads_per_core, hw.isa, (unsigned long long)hw.l1d_bytes,
             (unsigned long long)hw.l2_bytes, (unsigned long long)hw.l3_bytes,
             (unsigned long long)hw.mem_total_bytes, (unsigned long long)hw.mem_available_bytes,
             threads, bw1, bytes, ch.threads, ch.max_batch, ch.prefill_chunk,
             (unsigned long long)ch.fetch_ahead, blas_core,
             getenv("OPENBLAS_CORETYPE") ? "true" : "false");
    /* on a shared machine one probe can lose to a neighbour: the best of
     * the two is the machine's bandwidth */
    if (bw1 > bw)
        bw = bw1;
    bench_row("machine", "read_bandwidth", "", bw, "B/s", bw1 > 0 ? bw1 : 0, "1 thread", extra);
    char l3[32] = "unknown";
    if (hw.l3_bytes)
        snprintf(l3, sizeof l3, "%llu MiB", (unsigned long long)(hw.l3_bytes >> 20));
    bench_progress("machine: %s (family %u, model %u), %u CPUs (%u cores), ISA %s, L3 %s, read "
                   "bandwidth %.1f GB/s (%u threads), %.1f GB/s (1 thread) over %zu MiB",
                   hw.cpu_model, hw.cpu_family, hw.cpu_model_number, hw.cpus_online,
                   hw.cores_physical, hw.isa, l3, bw / 1e9, threads, bw1 / 1e9, bytes >> 20);
    char blas[192];
    tw_blas_core_text(blas, sizeof blas);
    bench_progress("%s", blas);
    return bw;
}

void bench_pick_blas(const char *prog, char **argv)
{
    tw_blas_level cap = TW_BLAS_LEVEL_AVX512;
    for (size_t i = 1; argv[i] && argv[i + 1]; i++)
        if (!strcmp(argv[i], "--isa") && strcmp(argv[i + 1], "avx512") != 0 &&
            strcmp(argv[i + 1], "auto") != 0)
            cap = TW_BLAS_LEVEL_AVX2;
    tw_err err;
    if (tw_blas_pick_core(argv, cap, &err) != TW_OK)
        fprintf(stderr, "%s: %s; going on with OpenBLAS's own choice\n", prog, err.msg);
}

bool bench_force_isa(const char *prog, const char *name)
{
    if (!bench_arg_value(prog, "--isa", name))
        return false;
    tw_err err;
    if (tw_kernels_force_isa(name, &err) == TW_OK)
        return true;
    fprintf(stderr, "%s: %s\n", prog, err.msg);
    return false;
}

int bench_decode_prefetch(const char *mode, uint32_t threads)
{
    tw_hw_info hw;
    tw_err err;
    tw_prefetch_tune t;
    tw_hw_detect(&hw, &err);
    tw_status st = tw_hw_decode_prefetch(mode, &hw, threads, &t, &err);
    if (st == TW_INVALID_ARGUMENT) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    if (st != TW_OK)
        bench_progress("decode prefetch tuning failed (%s); off", err.msg);
    char extra[256], text[256];
    snprintf(extra, sizeof extra,
             "\"mode\":\"%s\",\"pairs\":%u,\"us_on\":%.1f,\"us_off\":%.1f,\"bytes\":%zu", mode,
             t.pairs, t.us_on, t.us_off, t.bytes);
    bench_row("machine", "decode_prefetch", "", t.on ? 1 : 0, "on", t.gain, "measured gain",
              extra);
    tw_hw_decode_prefetch_text(mode, &t, text, sizeof text);
    bench_progress("decode prefetch %s", text);
    return 0;
}

int bench_f16_prefill(const char *mode, uint32_t threads)
{
    tw_err err;
    tw_f16_prefill_tune t;
    tw_status st = tw_hw_f16_prefill(mode, threads, &t, &err);
    if (st == TW_INVALID_ARGUMENT) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    if (st != TW_OK)
        bench_progress("F16 prefill tuning failed (%s); the tiles", err.msg);
    char extra[320], text[320];
    snprintf(extra, sizeof extra,
             "\"mode\":\"%s\",\"path\":\"%s\",\"rounds\":%u,\"us_tiles\":%.1f,"
             "\"us_panels\":%.1f,\"us_blas\":%.1f",
             mode, tw_kernels_f16_prefill_name(t.path), t.rounds, t.us_tiles, t.us_panels,
             t.us_blas);
    bench_row("machine", "f16_prefill_path", "", (double)t.path, "0 tiles, 1 panels, 2 blas",
              t.gain, "measured gain", extra);
    tw_hw_f16_prefill_text(mode, &t, text, sizeof text);
    bench_progress("F16 and BF16 prompts %s", text);
    return 0;
}

bool bench_parse_size(const char *s, size_t lo, size_t hi, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || errno || *s == '-' || v < lo || v > hi)
        return false;
    *out = (size_t)v;
    return true;
}

const char *bench_arg_value(const char *prog, const char *flag, const char *value)
{
    if (!value)
        fprintf(stderr, "%s: %s needs a value\n", prog, flag);
    return value;
}

bool bench_arg_size(const char *prog, const char *flag, const char *value, size_t lo, size_t hi,
                    size_t *out)
{
    if (!bench_arg_value(prog, flag, value))
        return false;
    if (bench_parse_size(value, lo, hi, out))
        return true;
    fprintf(stderr, "%s: %s wants a whole number from %zu to %zu, not '%s'\n", prog, flag, lo, hi,
            value);
    return false;
}

bool bench_arg_positive(const char *prog, const char *flag, const char *value, double hi,
                        double *out)
{
    if (!bench_arg_value(prog, flag, value))
        return false;
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (*value && !*end && !errno && v > 0 && v <= hi) {
        *out = v;
        return true;
    }
    fprintf(stderr, "%s: %s wants a number above 0 and at most %g, not '%s'\n", prog, flag, hi,
            value);
    return false;
}

void bench_arg_unknown(const char *prog, const char *arg)
{
    fprintf(stderr, "%s: unknown option '%s'\n", prog, arg);
}
