/* tw-bench-kernels: throughput of the decode matvec and prefill matmul
 * kernels per weight type and ISA at the shapes of a Qwen2-0.5B layer
 * (hidden 896, FFN 4864, vocabulary 151936), reported next to the scalar
 * path measured in the same run; and the packed form of each quantized type
 * that has one against its plain rows.
 *
 *   tw-bench-kernels [-t threads] [-n prefill_tokens] [-q] [-c] [-T type]
 *                    [-V isa_a,isa_b]
 *
 * -V compares only the packed types' batch kernels of two ISAs (e.g.
 * avx2,avx2vnni), call by call in alternation over -n activations, and
 * prints the best call and the mean of each: a shared machine's slow
 * minutes then fall on both alike.
 * -c times with process CPU time (use with -t 1 on a busy machine).
 * -q skips the vocabulary-sized shape and shortens every measurement.
 * Shapes whose width is not a whole number of blocks of a type (896 columns
 * for the 256-wide K types) are left out for that type. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "tw/blas.h"
#include "tw/kernels.h"
#include "tw/pool.h"
#include "tw/tensor.h"

static const tw_type types[] = {TW_TYPE_F32,  TW_TYPE_F16,  TW_TYPE_BF16, TW_TYPE_Q8_0,
                                TW_TYPE_Q4_0, TW_TYPE_Q5_0, TW_TYPE_Q5_1, TW_TYPE_Q4_K,
                                TW_TYPE_Q5_K, TW_TYPE_Q6_K};
static const char *const isas[] = {"scalar", "avx2", "avx2vnni", "avx512"};
#define N_ISAS 4

/* -c: process CPU time instead of wall time, which keeps single-thread
 * numbers meaningful on a machine busy with other work. */
static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(bench_clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void cpu_model(char *buf, size_t cap)
{
    snprintf(buf, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *colon = strchr(line, ':');
            if (colon) {
                snprintf(buf, cap, "%s", colon + 2);
                buf[strcspn(buf, "\n")] = '\0';
            }
            break;
        }
    }
    fclose(f);
}

static unsigned long long rng_state = 0x9e3779b97f4a7c15ull;

static float frand(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (float)((rng_state * 2685821657736338717ull) >> 40) / (float)(1 << 23) - 1.0f;
}

/* A rows x cols matrix of `type`: 64 distinct random rows, repeated (the
 * reference quantizers are too slow to fill a vocabulary matrix, and the
 * kernels do not care what the rows hold). NULL when memory is short. */
static void *make_weights(tw_type type, size_t rows, size_t cols, size_t *row_bytes)
{
    size_t rb = tw_type_row_bytes(type, cols);
    if (rb == 0)
        return NULL;
    uint8_t *w = malloc(rows * rb);
    float *tmp = malloc(cols * sizeof *tmp);
    if (!w || !tmp) {
        free(w);
        free(tmp);
        return NULL;
    }
    size_t distinct = rows < 64 ? rows : 64;
    for (size_t r = 0; r < distinct; r++) {
        for (size_t i = 0; i < cols; i++)
            tmp[i] = frand() * 0.05f;
        tw_quant_row(type, tmp, w + r * rb, cols);
    }
    for (size_t r = distinct; r < rows; r++)
        memcpy(w + r * rb, w + (r % distinct) * rb, rb);
    free(tmp);
    *row_bytes = rb;
    return w;
}

/* Seconds per call: repeats until min_time has passed (at least 3 calls). */
static double time_matvec(tw_pool *pool, tw_type type, const void *w, size_t rb, size_t rows,
                          size_t cols, const float *x, float *y, size_t n, double min_time)
{
    if (n == 1)
        tw_matvec(pool, type, w, rb, rows, cols, x, y);
    else
        tw_matmul(pool, type, w, rb, rows, cols, x, n, y);
    int calls = 0;
    double t0 = now_s(), t;
    do {
        if (n == 1)
            tw_matvec(pool, type, w, rb, rows, cols, x, y);
        else
            tw_matmul(pool, type, w, rb, rows, cols, x, n, y);
        calls++;
        t = now_s() - t0;
    } while (t < min_time || calls < 3);
    return t / calls;
}

/* A random rows x cols matrix of `type` (make_weights) and its packed
 * form (tw_pack_rows) into *w and *wp; false (nothing to free) when either
 * cannot be made. */
static bool make_packed(tw_type type, size_t rows, size_t cols, size_t *rb, void **w, void **wp)
{
    *w = make_weights(type, rows, cols, rb);
    *wp = *w ? malloc(rows * *rb) : NULL;
    if (*wp && tw_pack_rows(type, *w, rows, cols, *wp))
        return true;
    free(*w);
    free(*wp);
    return false;
}

/* The packed form of each type that has one (tw_pack_rows, as models load
 * them) against its plain rows, for decode and the batch sizes of
 * speculative verification and continuous batching: the two timed in
 * alternation, the better of three rounds each. */
static void packed_vs_plain(tw_pool *pool, const char *only_type, const float *x, float *y,
                            double min_time)
{
    static const tw_type plain[] = {TW_TYPE_Q8_0, TW_TYPE_Q4_0, TW_TYPE_Q5_0, TW_TYPE_Q5_1,
                                    TW_TYPE_Q4_K, TW_TYPE_Q5_K, TW_TYPE_Q6_K};
    static const size_t ns[] = {1, 2, 3, 4, 5, 6, 9, 16};
    /* qwen2-0.5b's, and for the K types (whose rows are whole 256-column blocks)
     * llama-1b's */
    const size_t shapes[][2] = {{896, 896}, {4864, 896}, {896, 4864}};
    const size_t shapes_k[][2] = {{2048, 2048}, {8192, 2048}, {2048, 8192}};
    printf("\npacked vs plain rows (batch of n activations), per call\n");
    printf("%-6s %-14s %-7s %3s %10s %10s %8s\n", "type", "shape", "isa", "n", "plain us",
           "packed us", "x plain");
    for (size_t ti = 0; ti < sizeof plain / sizeof plain[0]; ti++) {
        tw_type t = plain[ti], pt = tw_pack_type(t);
        if (only_type && strcasecmp(only_type, tw_type_name(t)) != 0)
            continue;
        const bool k_type = tw_type_block_elems(t) == 256;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            size_t rows = k_type ? shapes_k[si][0] : shapes[si][0];
            size_t cols = k_type ? shapes_k[si][1] : shapes[si][1], rb;
            void *w, *wp;
            if (!make_packed(t, rows, cols, &rb, &w, &wp))
                continue;
            for (int ii = 1; ii < N_ISAS; ii++) {
                if (tw_kernels_force_isa(isas[ii], NULL) != TW_OK)
                    continue;
                for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
                    double best[2] = {1e30, 1e30};
                    for (int round = 0; round < 3; round++)
                        for (int v = 0; v < 2; v++) {
                            double sec = time_matvec(pool, v ? pt : t, v ? wp : w, rb, rows, cols,
                                                     x, y, ns[k], min_time / 3);
                            best[v] = sec < best[v] ? sec : best[v];
                        }
                    printf("%-6s %6zux%-7zu %-7s %3zu %10.1f %10.1f %8.2f\n", tw_type_name(t),
                           rows, cols, isas[ii], ns[k], best[0] * 1e6, best[1] * 1e6,
                           best[0] / best[1]);
                }
            }
            free(w);
            free(wp);
        }
    }
}

/* The prompt paths for half-precision weights (tw_kernels_set_f16_prefill:
 * the ISA's tiles, its panels, dequantized tiles through sgemm) over the
 * prefill shapes, each ISA's paths timed in alternation, the better of
 * three rounds each, with their speed against sgemm. */
static void half_paths(tw_pool *pool, const char *only_type, const float *x, float *y, size_t n,
                       double min_time)
{
    static const tw_type half[] = {TW_TYPE_F16, TW_TYPE_BF16};
    static const tw_f16_prefill paths[] = {TW_F16_PREFILL_TILES, TW_F16_PREFILL_PANELS,
                                           TW_F16_PREFILL_BLAS};
    const size_t shapes[][2] = {{896, 896}, {4864, 896}, {896, 4864}};
    const tw_f16_prefill before = tw_kernels_f16_prefill();
    printf("\nhalf-precision prompt paths (%zu tokens), per call\n", n);
    printf("%-6s %-14s %-7s %-7s %10s %9s %8s\n", "type", "shape", "isa", "path", "ms", "GFLOP/s",
           "x blas");
    for (size_t ti = 0; ti < sizeof half / sizeof half[0]; ti++) {
        tw_type t = half[ti];
        if (only_type && strcasecmp(only_type, tw_type_name(t)) != 0)
            continue;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            size_t rows = shapes[si][0], cols = shapes[si][1], rb;
            void *w = make_weights(t, rows, cols, &rb);
            if (!w)
                continue;
            for (int ii = 1; ii < N_ISAS; ii++) {
                if (tw_kernels_force_isa(isas[ii], NULL) != TW_OK)
                    continue;
                double best[3] = {1e30, 1e30, 1e30};
                for (int round = 0; round < 3; round++)
                    for (size_t p = 0; p < 3; p++) {
                        if (!tw_kernels_f16_prefill_has(paths[p]))
                            continue;
                        tw_kernels_set_f16_prefill(paths[p]);
                        double sec = time_matvec(pool, t, w, rb, rows, cols, x, y, n, min_time / 3);
                        best[p] = sec < best[p] ? sec : best[p];
                    }
                for (size_t p = 0; p < 3; p++)
                    if (best[p] < 1e30)
                        printf("%-6s %6zux%-7zu %-7s %-7s %10.3f %9.2f %8.2f\n", tw_type_name(t),
                               rows, cols, isas[ii], tw_kernels_f16_prefill_name(paths[p]),
                               best[p] * 1e3,
                               2.0 * (double)rows * (double)cols * (double)n / best[p] * 1e-9,
                               best[2] / best[p]);
            }
            free(w);
        }
    }
    tw_kernels_set_f16_prefill(before);
}

static void noop_task(void *ctx, int task, int n_tasks)
{
    (void)ctx;
    (void)task;
    (void)n_tasks;
}

/* -V: the packed batch kernels of isa[0] against isa[1], calls alternated,
 * the best call and the mean of each over `calls` pairs. */
static void versus(tw_pool *pool, const char *only_type, const char *const isa[2], const float *x,
                   float *y, size_t n, int calls)
{
    static const tw_type plain[] = {TW_TYPE_Q8_0, TW_TYPE_Q4_0, TW_TYPE_Q5_0, TW_TYPE_Q5_1,
                                    TW_TYPE_Q4_K, TW_TYPE_Q5_K, TW_TYPE_Q6_K};
    const size_t shapes[][2] = {{4864, 896}, {896, 4864}};
    const size_t shapes_k[][2] = {{4864, 1024}, {1024, 4864}};
    printf("\npacked batch kernels, %s against %s, %zu activations, %d calls each alternated\n",
           isa[1], isa[0], n, calls);
    printf("%-6s %-12s %10s %10s %10s %10s %7s %7s\n", "type", "shape", "best a us", "mean a us",
           "best b us", "mean b us", "best x", "mean x");
    for (size_t ti = 0; ti < sizeof plain / sizeof plain[0]; ti++) {
        const tw_type t = plain[ti], pt = tw_pack_type(t);
        if (only_type && strcasecmp(only_type, tw_type_name(t)) != 0)
            continue;
        const bool k_type = tw_type_block_elems(t) == 256;
        for (size_t si = 0; si < 2; si++) {
            const size_t rows = k_type ? shapes_k[si][0] : shapes[si][0];
            const size_t cols = k_type ? shapes_k[si][1] : shapes[si][1];
            size_t rb;
            void *w, *wp;
            if (!make_packed(t, rows, cols, &rb, &w, &wp))
                continue;
            double best[2] = {1e30, 1e30}, sum[2] = {0, 0};
            for (int c = 0; c < calls; c++)
                for (int v = 0; v < 2; v++) {
                    tw_kernels_force_isa(isa[v], NULL);
                    const double t0 = now_s();
                    tw_matmul(pool, pt, wp, rb, rows, cols, x, n, y);
                    const double d = now_s() - t0;
                    best[v] = d < best[v] ? d : best[v];
                    sum[v] += d;
                }
            printf("%-6s %5zux%-6zu %10.1f %10.1f %10.1f %10.1f %6.2fx %6.2fx\n", tw_type_name(t),
                   rows, cols, best[0] * 1e6, sum[0] / calls * 1e6, best[1] * 1e6,
                   sum[1] / calls * 1e6, best[0] / best[1], sum[0] / sum[1]);
            free(w);
            free(wp);
        }
    }
    tw_kernels_force_isa(NULL, NULL);
}

/* A decimal number in [lo, hi], the whole of s. */
static bool whole_number(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

int main(int argc, char **argv)
{
    /* before anything exists: a restart keeps only argv and the environment */
    tw_err blas_err;
    if (tw_blas_pick_core(argv, TW_BLAS_LEVEL_AVX512, &blas_err) != TW_OK)
        fprintf(stderr, "%s: %s; going on with OpenBLAS's own choice\n", "tw-bench-kernels",
                blas_err.msg);
    int threads = 2;
    size_t prefill_n = 128;
    bool quick = false;
    const char *only_type = NULL;
    const char *vs[2] = {NULL, NULL};
    char vs_buf[64];
    int opt;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help"))
            argv[i] = "-h";
    while ((opt = getopt(argc, argv, "t:n:qcT:V:h")) != -1) {
        switch (opt) {
        case 't':
            if (!whole_number(optarg, 1, 256, &threads)) {
                fprintf(stderr, "tw-bench-kernels: -t takes 1 to 256 threads, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'n': {
            int n;
            if (!whole_number(optarg, 2, 4096, &n)) {
                fprintf(stderr, "tw-bench-kernels: -n takes 2 to 4096 tokens, not '%s'\n", optarg);
                return 2;
            }
            prefill_n = (size_t)n;
            break;
        }
        case 'q':
            quick = true;
            break;
        case 'c':
            bench_clock = CLOCK_PROCESS_CPUTIME_ID;
            break;
        case 'T': {
            tw_type t;
            tw_err terr;
            if (tw_type_from_name(optarg, &t, &terr) != TW_OK) {
                fprintf(stderr, "tw-bench-kernels: -T: %s\n", terr.msg);
                return 2;
            }
            only_type = optarg;
            break;
        }
        case 'V': {
            snprintf(vs_buf, sizeof vs_buf, "%s", optarg);
            char *comma = strchr(vs_buf, ',');
            if (comma)
                *comma = '\0';
            vs[0] = vs_buf;
            vs[1] = comma ? comma + 1 : NULL;
            for (int v = 0; v < 2; v++) {
                tw_err verr;
                if (!vs[v] || tw_kernels_force_isa(vs[v], &verr) != TW_OK) {
                    fprintf(stderr,
                            "tw-bench-kernels: -V takes two ISAs this CPU runs, "
                            "e.g. avx2,avx2vnni, not '%s'%s%s\n",
                            optarg, vs[v] ? ": " : "", vs[v] ? verr.msg : "");
                    return 2;
                }
            }
            tw_kernels_force_isa(NULL, NULL);
            break;
        }
        default:
            fprintf(stderr,
                    "usage: %s [-t threads] [-n prefill_tokens] [-q] [-c] [-T type] "
                    "[-V isa_a,isa_b]\n",
                    argv[0]);
            return opt == 'h' ? 0 : 2;
        }
    }
    tw_pool *pool = NULL;
    tw_err err;
    if (tw_pool_create(threads, &pool, &err) != TW_OK) {
        fprintf(stderr, "tw-bench-kernels: %s\n", err.msg);
        return 1;
    }
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    char blas[192];
    tw_blas_core_text(blas, sizeof blas);
    printf("cpu: %s\nthreads: %d\nbest isa: %s\n%s\n", cpu, threads, tw_kernels_isa(), blas);

    const size_t shapes[][2] = {{896, 896}, {4864, 896}, {896, 4864}, {151936, 896}};
    const size_t n_shapes = quick ? 3 : 4;
    const double min_time = quick ? 0.05 : 0.3;
    /* the packed section's K-type shapes reach 8192 columns and batches of
     * 16 activations, whatever -n says */
    size_t max_cols = 8192, max_n = prefill_n > 16 ? prefill_n : 16;
    float *x = malloc(max_n * max_cols * sizeof *x);
    float *y = malloc(max_n * 151936 * sizeof *y);
    if (!x || !y) {
        fprintf(stderr, "tw-bench-kernels: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < max_n * max_cols; i++)
        x[i] = frand();
    if (tw_kernels_reserve(pool, max_cols, max_n, &err) != TW_OK) {
        fprintf(stderr, "tw-bench-kernels: %s\n", err.msg);
        return 1;
    }

    if (vs[0]) {
        versus(pool, only_type, vs, x, y, prefill_n, quick ? 100 : 300);
        free(x);
        free(y);
        tw_pool_destroy(pool);
        return 0;
    }

    {
        /* cost of one pool run with one trivial task per thread */
        const int runs = quick ? 20000 : 200000;
        tw_pool_run(pool, noop_task, NULL, threads);
        double t0 = now_s();
        for (int i = 0; i < runs; i++)
            tw_pool_run(pool, noop_task, NULL, threads);
        printf("pool run overhead: %.2f us per run (%d tasks)\n", (now_s() - t0) / runs * 1e6,
               threads);
    }

    printf("\ndecode matvec (y = W x), per call\n");
    printf("%-6s %-14s %-7s %10s %8s %9s %8s\n", "type", "shape", "isa", "us", "GB/s", "GFLOP/s",
           "x scalar");
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        tw_type t = types[ti];
        if (only_type && strcasecmp(only_type, tw_type_name(t)) != 0)
            continue;
        for (size_t si = 0; si < n_shapes; si++) {
            size_t rows = shapes[si][0], cols = shapes[si][1];
            if (rows > 100000 && t == TW_TYPE_F32)
                continue; /* 545 MB of f32 says nothing the other shapes do not */
            if (tw_type_row_bytes(t, cols) == 0)
                continue; /* e.g. K types need columns in multiples of 256 */
            size_t rb;
            void *w = make_weights(t, rows, cols, &rb);
            if (!w) {
                printf("%-6s %6zux%-7zu skipped (out of memory)\n", tw_type_name(t), rows, cols);
                continue;
            }
            double scalar_s = 0;
            for (int ii = 0; ii < N_ISAS; ii++) {
                if (tw_kernels_force_isa(isas[ii], NULL) != TW_OK)
                    continue;
                double s = time_matvec(pool, t, w, rb, rows, cols, x, y, 1,
                                       ii == 0 && rows > 100000 ? 0 : min_time);
                if (ii == 0)
                    scalar_s = s;
                printf("%-6s %6zux%-7zu %-7s %10.1f %8.2f %9.2f %8.2f\n", tw_type_name(t), rows,
                       cols, isas[ii], s * 1e6, (double)(rows * rb) / s * 1e-9,
                       2.0 * (double)rows * (double)cols / s * 1e-9, scalar_s / s);
            }
            free(w);
        }
    }

    printf("\nprefill matmul (%zu tokens), per call\n", prefill_n);
    printf("%-6s %-14s %-7s %10s %10s %9s %8s\n", "type", "shape", "isa", "ms", "tok/s", "GFLOP/s",
           "x scalar");
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        tw_type t = types[ti];
        if (only_type && strcasecmp(only_type, tw_type_name(t)) != 0)
            continue;
        for (size_t si = 0; si < 3; si++) {
            size_t rows = shapes[si][0], cols = shapes[si][1];
            size_t rb;
            void *w = make_weights(t, rows, cols, &rb);
            if (!w)
                continue;
            double scalar_s = 0;
            for (int ii = 0; ii < N_ISAS; ii++) {
                if (tw_kernels_force_isa(isas[ii], NULL) != TW_OK)
                    continue;
                double s = time_matvec(pool, t, w, rb, rows, cols, x, y, prefill_n, min_time);
                if (ii == 0)
                    scalar_s = s;
                printf("%-6s %6zux%-7zu %-7s %10.2f %10.0f %9.2f %8.2f\n", tw_type_name(t), rows,
                       cols, isas[ii], s * 1e3, (double)prefill_n / s,
                       2.0 * (double)rows * (double)cols * (double)prefill_n / s * 1e-9,
                       scalar_s / s);
            }
            free(w);
        }
    }
    half_paths(pool, only_type, x, y, prefill_n, min_time);
    packed_vs_plain(pool, only_type, x, y, min_time);
    tw_kernels_force_isa(NULL, NULL);
    free(x);
    free(y);
    tw_pool_destroy(pool);
    return 0;
}
