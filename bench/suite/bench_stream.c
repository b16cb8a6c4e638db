/* tw-bench-stream: how close decode's matrix kernels come to what memory
 * gives a plain read of the same bytes.
 *
 *   tw-bench-stream [--type F16|Q8_0|Q4_0|Q5_0|Q4_K|Q6_K|...] [--threads N|auto]
 *                   [--layers N] [--rounds N] [--isa scalar|avx2|avx2vnni|avx512]
 *                   [--decode-prefetch auto|on|off]
 *
 * It builds one decode step's matrices of a real shape (qwen2-0.5b's for the
 * 32-column block types and F16: q and o 896x896, k and v together 256x896,
 * gate and up 4864x896, down 896x4864; llama-1b's for the K types, whose
 * rows are whole 256-column blocks), as many layers as asked, in the form
 * models load them (packed where the type packs, in memory marked for huge
 * pages), and then alternates, round
 * after round: every matrix through tw_matvec once, and a plain read of the
 * same bytes through the same pool, one run per matrix, split as the
 * kernels split it. The medians give the kernels' share of what a read of
 * those bytes can have at that moment, which a probe reading one large
 * buffer straight (the machine row) overstates: on a machine whose
 * neighbours move its bandwidth from minute to minute, only measurements
 * taken in alternation compare. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench_common.h"
#include "tw/kernels.h"
#include "tw/pool.h"
#include "tw/tensor.h"

#define MAX_LAYERS 64
#define MATS       6

typedef struct mat {
    tw_type type; /* as the kernels take it (packed where the type packs) */
    size_t rows, cols, row_bytes;
    uint8_t *w;
} mat;

typedef struct read_job {
    const uint8_t *p;
    size_t bytes;
    uint64_t sum[256]; /* per task, so the reads cannot be dropped */
} read_job;

/* Task `task` of n reads its share of the bytes, 64 at a time: eight
 * independent 8-byte sums per line, as a streaming kernel would issue the
 * loads. */
static void read_task(void *ctx, int task, int n_tasks)
{
    read_job *j = ctx;
    size_t lines = j->bytes / 64, per = (lines + (size_t)n_tasks - 1) / (size_t)n_tasks;
    size_t l0 = (size_t)task * per, l1 = l0 + per < lines ? l0 + per : lines;
    uint64_t a[8] = {0};
    for (size_t l = l0; l < l1; l++) {
        const uint64_t *q = (const uint64_t *)(const void *)(j->p + 64 * l);
        for (int k = 0; k < 8; k++)
            a[k] += q[k];
    }
    j->sum[task % 256] += a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

/* Fills the matrix at dst (rows * tw_type_row_bytes(type, cols) bytes)
 * with quantized values, packed where the type packs, as a model load
 * leaves it. */
static int make_mat(tw_type type, size_t rows, size_t cols, uint8_t *dst, mat *m)
{
    size_t rb = tw_type_row_bytes(type, cols);
    float *row = malloc(cols * sizeof *row);
    uint8_t *plain = malloc(rows * rb);
    if (!rb || !row || !plain) {
        free(row);
        free(plain);
        return -1;
    }
    /* 64 distinct rows repeated: the kernels' speed does not depend on the
     * values, and quantizing every row would take longer than the bench */
    uint32_t s = 12345;
    size_t distinct = rows < 64 ? rows : 64;
    for (size_t r = 0; r < distinct; r++) {
        for (size_t i = 0; i < cols; i++) {
            s = s * 1664525u + 1013904223u;
            row[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 0.1f;
        }
        tw_quant_row(type, row, plain + r * rb, cols);
    }
    for (size_t r = distinct; r < rows; r++)
        memcpy(plain + r * rb, plain + (r % distinct) * rb, rb);
    free(row);
    tw_type packed = tw_pack_type(type);
    m->type = type;
    bool ok = true;
    if (packed != type) {
        ok = tw_pack_rows(type, plain, rows, cols, dst);
        m->type = packed;
    } else {
        memcpy(dst, plain, rows * rb);
    }
    free(plain);
    m->rows = rows;
    m->cols = cols;
    m->row_bytes = rb;
    m->w = dst;
    return ok ? 0 : -1;
}

/* Bytes of a matrix's place in the arena: whole cache lines. */
static size_t mat_span(tw_type type, size_t rows, size_t cols)
{
    return (rows * tw_type_row_bytes(type, cols) + 63) / 64 * 64;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: tw-bench-stream [--type TYPE] [--threads N|auto] [--layers N] [--rounds N]\n"
            "                       [--isa scalar|avx2|avx2vnni|avx512] [--decode-prefetch "
            "auto|on|off]\n");
}

#define PROG "tw-bench-stream"

int main(int argc, char **argv)
{
    bench_pick_blas("tw-bench-stream", argv);
    tw_hw_info hw;
    tw_hw_choice ch;
    tw_err err;
    tw_hw_detect(&hw, &err);
    tw_hw_choose(&hw, &ch);
    size_t threads = ch.threads, layers = 0, rounds = 15;
    tw_type type = TW_TYPE_Q4_0;
    const char *prefetch = "auto";
    for (int i = 1; i < argc; i++) {
        /* every option takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[++i] : NULL;
        bool ok = true;
        if (!strcmp(a, "--type")) {
            ok = bench_arg_value(PROG, a, v) != NULL;
            if (ok && tw_type_from_name(v, &type, &err) != TW_OK) {
                fprintf(stderr, PROG ": %s\n", err.msg);
                ok = false;
            }
        } else if (!strcmp(a, "--threads") && v && !strcmp(v, "auto")) {
            threads = ch.threads;
        } else if (!strcmp(a, "--threads")) {
            ok = bench_arg_size(PROG, a, v, 1, 256, &threads);
        } else if (!strcmp(a, "--layers")) {
            ok = bench_arg_size(PROG, a, v, 1, MAX_LAYERS, &layers);
        } else if (!strcmp(a, "--rounds")) {
            ok = bench_arg_size(PROG, a, v, 3, 1000, &rounds);
        } else if (!strcmp(a, "--decode-prefetch")) {
            ok = (prefetch = bench_arg_value(PROG, a, v)) != NULL;
        } else if (!strcmp(a, "--isa")) {
            ok = bench_force_isa(PROG, v);
        } else {
            bench_arg_unknown(PROG, a);
            ok = false;
        }
        if (!ok) {
            usage();
            return 2;
        }
    }
    const size_t block = tw_type_block_elems(type);
    const bool k_type = block == 256;
    /* hidden, kv rows (k and v together), ffn */
    const size_t hid = k_type ? 2048 : 896, kv = k_type ? 1024 : 256, ffn = k_type ? 8192 : 4864;
    if (!layers)
        layers = k_type ? 8 : 24;
    if (block == 0 || hid % block || ffn % block || tw_type_row_bytes(type, hid) == 0) {
        fprintf(stderr, "tw-bench-stream: %s has no matrix kernels for these shapes\n",
                tw_type_name(type));
        return 2;
    }
    if (bench_decode_prefetch(prefetch, (uint32_t)threads) != 0) {
        usage();
        return 2;
    }
    bench_machine_row((uint32_t)threads, 1.0);
    const size_t shapes[MATS][2] = {{hid, hid}, {kv, hid},  {hid, hid},
                                    {ffn, hid}, {ffn, hid}, {hid, ffn}};
    static mat mats[MAX_LAYERS][MATS];
    /* One mapping marked for huge pages, as a model's weights are held
     * (TW_WEIGHTS_AUTO): on 4 KiB pages the plain read alone lost a fifth
     * of its speed to TLB misses the engine does not have (41 against 53
     * GB/s beside the machine probe, 2-vCPU Zen 5 guest). */
    size_t arena_bytes = 0;
    for (int k = 0; k < MATS; k++)
        arena_bytes += mat_span(type, shapes[k][0], shapes[k][1]);
    arena_bytes *= layers;
    uint8_t *arena =
        mmap(NULL, arena_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (arena == MAP_FAILED) {
        fprintf(stderr, "tw-bench-stream: cannot map %.1f MiB for the matrices\n",
                (double)arena_bytes / 1048576.0);
        return 1;
    }
    (void)madvise(arena, arena_bytes, MADV_HUGEPAGE);
    double bytes = 0;
    int rc = 0;
    uint8_t *next = arena;
    for (size_t l = 0; rc == 0 && l < layers; l++)
        for (int k = 0; rc == 0 && k < MATS; k++) {
            if (make_mat(type, shapes[k][0], shapes[k][1], next, &mats[l][k]) != 0) {
                fprintf(stderr, "tw-bench-stream: out of memory making the matrices\n");
                rc = 1;
                break;
            }
            next += mat_span(type, shapes[k][0], shapes[k][1]);
            bytes += (double)mats[l][k].rows * (double)mats[l][k].row_bytes;
        }
    tw_pool *pool = NULL;
    float *x = malloc((hid > ffn ? hid : ffn) * sizeof *x);
    float *y = malloc((hid > ffn ? hid : ffn) * sizeof *y);
    double *t_kern = malloc(rounds * sizeof *t_kern), *t_read = malloc(rounds * sizeof *t_read);
    read_job *job = calloc(1, sizeof *job);
    if (rc == 0 && (!x || !y || !t_kern || !t_read || !job)) {
        fprintf(stderr, "tw-bench-stream: out of memory\n");
        rc = 1;
    }
    if (rc == 0 && (tw_pool_create((int)threads, &pool, &err) != TW_OK ||
                    tw_kernels_reserve(pool, ffn, 1, &err) != TW_OK)) {
        fprintf(stderr, "tw-bench-stream: %s\n", err.msg);
        rc = 1;
    }
    if (rc == 0) {
        for (size_t i = 0; i < ffn; i++)
            x[i] = (float)((int)(i % 13) - 6) * 0.05f;
        bench_progress("%s: %zu layers, %.1f MiB of weights per pass, %zu threads, %zu rounds",
                       tw_type_name(type), layers, bytes / 1048576.0, threads, rounds);
        /* one untimed pass of each: pages, pool, kernel scratch */
        for (size_t r = 0; r <= rounds; r++) {
            double t0 = bench_now();
            for (size_t l = 0; l < layers; l++)
                for (int k = 0; k < MATS; k++) {
                    const mat *m = &mats[l][k];
                    tw_matvec(pool, m->type, m->w, m->row_bytes, m->rows, m->cols, x, y);
                }
            double t1 = bench_now();
            for (size_t l = 0; l < layers; l++)
                for (int k = 0; k < MATS; k++) {
                    job->p = mats[l][k].w;
                    job->bytes = mats[l][k].rows * mats[l][k].row_bytes;
                    tw_pool_run(pool, read_task, job, (int)threads);
                }
            double t2 = bench_now();
            if (r > 0) {
                t_kern[r - 1] = t1 - t0;
                t_read[r - 1] = t2 - t1;
            }
        }
        qsort(t_kern, rounds, sizeof *t_kern, cmp_double);
        qsort(t_read, rounds, sizeof *t_read, cmp_double);
        double kern = bytes / t_kern[rounds / 2], read = bytes / t_read[rounds / 2];
        char extra[256];
        snprintf(extra, sizeof extra,
                 "\"threads\":%zu,\"layers\":%zu,\"rounds\":%zu,\"bytes\":%.0f,"
                 "\"kernel_ms_median\":%.3f,\"read_ms_median\":%.3f",
                 threads, layers, rounds, bytes, t_kern[rounds / 2] * 1e3,
                 t_read[rounds / 2] * 1e3);
        bench_row("stream", "decode_kernels", tw_type_name(type), kern, "B/s", read,
                  "plain read of the same matrices", extra);
        bench_progress("%s: decode kernels %.1f GB/s, a plain read of the same bytes %.1f GB/s "
                       "(medians of %zu alternated rounds): %.0f%%",
                       tw_type_name(type), kern / 1e9, read / 1e9, rounds, 100.0 * kern / read);
    }
    uint64_t sink = 0;
    for (int i = 0; job && i < 256; i++)
        sink += job->sum[i];
    if (sink == 42)
        bench_progress("checksum %llu", (unsigned long long)sink);
    tw_pool_destroy(pool);
    munmap(arena, arena_bytes);
    free(x);
    free(y);
    free(t_kern);
    free(t_read);
    free(job);
    return rc;
}
