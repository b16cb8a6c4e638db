/* The STREAM-like read probe behind the bandwidth the benchmarks and the
 * start-up tuning measure against. Its buffer is large (eight L3s a
 * thread, at least 1 GiB), and mapping one is not free: the kernel clears
 * every page and the probe then writes every word, ~1 s for 4 GiB on a
 * 2-vCPU guest, longer than the timed passes themselves. So a caller that
 * probes again and again (a benchmark between every burst of a decode)
 * keeps one buffer open across its probes. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "tw/hw.h"
#include "tw/log.h"

struct tw_bw_probe {
    uint64_t *buf;
    size_t words;
};

typedef struct probe {
    const uint64_t *p;
    size_t n;
    size_t ahead; /* words fetched ahead in software; 0: none */
    uint64_t sum; /* kept so the reads are not optimised away */
} probe;

/* Every other pass of the probe fetches this far ahead in software: some
 * machines stream faster that way (a 2-core EPYC read 42-44 GB/s with it
 * and 36-39 without), and the kernels do it where it pays, so the best
 * pass of either kind is what memory can give. */
#define PROBE_AHEAD_WORDS 4096

static void *probe_run(void *arg)
{
    probe *pr = arg;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    size_t i = 0;
    /* eight independent chains keep enough loads in flight to saturate a
     * memory channel; the compiler vectorises them where it can */
    for (; i + 8 <= pr->n; i += 8) {
        if (pr->ahead && i + pr->ahead < pr->n)
            __builtin_prefetch(pr->p + i + pr->ahead);
        a0 += pr->p[i];
        a1 += pr->p[i + 1];
        a2 += pr->p[i + 2];
        a3 += pr->p[i + 3];
        a4 += pr->p[i + 4];
        a5 += pr->p[i + 5];
        a6 += pr->p[i + 6];
        a7 += pr->p[i + 7];
    }
    for (; i < pr->n; i++)
        a0 += pr->p[i];
    pr->sum = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

tw_status tw_bw_probe_open(size_t bytes, tw_bw_probe **out, tw_err *err)
{
    if (!out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "bandwidth probe: NULL out");
    *out = NULL;
    if (bytes < (4u << 20))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "bandwidth probe: bytes >= 4 MiB");
    tw_bw_probe *p = calloc(1, sizeof *p);
    if (!p)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "bandwidth probe: out of memory");
    p->words = bytes / sizeof(uint64_t);
    /* huge pages where the machine gives them, as the loaded weights get:
     * the probe should not lose to TLB misses the decode does not have */
    void *map = mmap(NULL, p->words * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        free(p);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "bandwidth probe: cannot map %zu bytes",
                         bytes);
    }
    (void)madvise(map, p->words * sizeof(uint64_t), MADV_HUGEPAGE);
    p->buf = map;
    /* touch every page (and give it distinct content) before any timing */
    for (size_t i = 0; i < p->words; i++)
        p->buf[i] = i * 0x9e3779b97f4a7c15ull;
    *out = p;
    return TW_OK;
}

size_t tw_bw_probe_bytes(const tw_bw_probe *p)
{
    return p ? p->words * sizeof(uint64_t) : 0;
}

tw_status tw_bw_probe_read(tw_bw_probe *p, uint32_t threads, double seconds, double *out,
                           tw_err *err)
{
    if (!p || !out || threads < 1 || threads > 64 || !(seconds >= 0.05) || seconds > 30)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "bandwidth probe: an open probe, threads 1..64, seconds 0.05..30");
    const size_t n = p->words;
    probe pr[64];
    pthread_t tid[64];
    size_t per = n / threads;
    double best = 0, start = now_s();
    uint64_t sink = 0;
    for (int pass = 0; pass < 1000; pass++) {
        for (uint32_t t = 0; t < threads; t++) {
            pr[t].p = p->buf + t * per;
            pr[t].n = t + 1 == threads ? n - t * per : per;
            pr[t].ahead = pass % 2 ? PROBE_AHEAD_WORDS : 0;
        }
        double t0 = now_s();
        uint32_t started = 1;
        for (uint32_t t = 1; t < threads; t++, started++)
            if (pthread_create(&tid[t], NULL, probe_run, &pr[t]) != 0)
                break;
        probe_run(&pr[0]);
        for (uint32_t t = 1; t < started; t++)
            pthread_join(tid[t], NULL);
        double dt = now_s() - t0;
        size_t done = 0;
        for (uint32_t t = 0; t < started; t++) {
            sink += pr[t].sum;
            done += pr[t].n;
        }
        if (dt > 0 && (double)done * sizeof(uint64_t) / dt > best)
            best = (double)done * sizeof(uint64_t) / dt;
        if (now_s() - start >= seconds && pass >= 3)
            break;
    }
    /* sink depends on every read; comparing it keeps the loops alive */
    if (sink == 0x5a5a5a5a5a5a5a5aull)
        tw_debug("bandwidth probe checksum %llu", (unsigned long long)sink);
    *out = best;
    return TW_OK;
}

void tw_bw_probe_close(tw_bw_probe *p)
{
    if (!p)
        return;
    munmap(p->buf, p->words * sizeof(uint64_t));
    free(p);
}

tw_status tw_hw_read_bandwidth(size_t bytes, uint32_t threads, double seconds, double *out,
                               tw_err *err)
{
    if (!out || threads < 1 || threads > 64 || bytes < (4u << 20) || !(seconds >= 0.05) ||
        seconds > 30)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "bandwidth probe: bytes >= 4 MiB, threads 1..64, seconds 0.05..30");
    tw_bw_probe *p;
    tw_status st = tw_bw_probe_open(bytes, &p, err);
    if (st != TW_OK)
        return st;
    st = tw_bw_probe_read(p, threads, seconds, out, err);
    tw_bw_probe_close(p);
    return st;
}

/* A 2-vCPU Zen 5 EPYC (two 32 MiB L3s, L3 unknown to the guest) read 73-75
 * GB/s at 256 MiB in most passes and 51-58 from 384 MiB to 1 GiB, with 4 KiB
 * pages; the same sweep in huge pages gave 57-68 at 256 MiB and 56-60 from
 * 384 MiB on: the small buffer was partly read from the L3s. */
#define PROBE_MIN_BYTES (1ull << 30)

size_t tw_hw_probe_bytes(const tw_hw_info *hw, uint32_t threads)
{
    const uint64_t floor = 64ull << 20;
    uint64_t want = PROBE_MIN_BYTES;
    if (hw && hw->l3_bytes && threads > 0 && hw->l3_bytes <= (UINT64_MAX / 8) / threads &&
        8 * hw->l3_bytes * threads > want)
        want = 8 * hw->l3_bytes * threads;
    if (hw && hw->mem_available_bytes && want > hw->mem_available_bytes / 4)
        want = hw->mem_available_bytes / 4;
    if (want < floor)
        want = floor;
    return want > SIZE_MAX ? SIZE_MAX : (size_t)want;
}
