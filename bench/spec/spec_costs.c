/* The unit costs behind speculative decoding, measured on the model API:
 * one decode step of the target, one verification pass of n rows, one
 * decode step of the draft, and saving / restoring sequence state. They
 * explain the engine-level ratios: a round of k proposals costs about
 * k x draft step + verify(k + 1) + the state work, and pays off when it
 * yields more tokens than that time buys in plain decode steps. */
#include "spec_costs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tw/model.h"
#include "tw/pool.h"

#define CTX 1024
#define PROMPT 256
#define REPS 24

/* With one thread every pass runs on this thread, and its CPU clock leaves
 * out the time other processes held the core. */
static clockid_t clock_id = CLOCK_MONOTONIC;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The median, robust against a neighbour stealing the CPU for a moment. */
static double med(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

typedef struct bench_model {
    tw_model *m;
    tw_seq *seq;
    tw_snapshot_pool *base, *trail;
    float *logits;
    uint32_t vocab;
} bench_model;

static int open_model(const char *path, bench_model *b, tw_pool *pool, const uint32_t *prompt)
{
    tw_err err;
    tw_model_opts mo = {.max_context = CTX, .max_batch = 16, .max_chunk = 256};
    memset(b, 0, sizeof *b);
    if (tw_model_load(path, &mo, &b->m, &err) != TW_OK) {
        fprintf(stderr, "tw-bench-spec: %s: %s\n", path, err.msg);
        return -1;
    }
    b->vocab = tw_model_get_info(b->m)->vocab_size;
    b->logits = malloc((size_t)TW_SPEC_COST_MAX_ROWS * b->vocab * sizeof *b->logits);
    if (!b->logits || tw_seq_create(b->m, 0, &b->seq, &err) != TW_OK ||
        tw_snapshot_pool_create(b->m, 1, &b->base, &err) != TW_OK ||
        tw_snapshot_pool_create(b->m, TW_SPEC_COST_MAX_ROWS, &b->trail, &err) != TW_OK) {
        fprintf(stderr, "tw-bench-spec: %s: setup failed\n", path);
        return -1;
    }
    uint32_t ids[PROMPT];
    for (size_t i = 0; i < PROMPT; i++)
        ids[i] = prompt[i] % b->vocab;
    if (tw_model_forward(b->m, pool, b->seq, ids, PROMPT, b->logits, TW_LOGITS_LAST, &err) !=
            TW_OK ||
        tw_seq_snapshot(b->seq, b->base, 0, &err) != TW_OK) {
        fprintf(stderr, "tw-bench-spec: %s: prefill: %s\n", path, err.msg);
        return -1;
    }
    return 0;
}

static void close_model(bench_model *b)
{
    tw_snapshot_pool_free(b->trail);
    tw_snapshot_pool_free(b->base);
    tw_seq_free(b->seq);
    tw_model_free(b->m);
    free(b->logits);
}

/* One decode step from the prompt's end, rewound after. */
static double decode_once(bench_model *b, tw_pool *pool, int r)
{
    tw_err err;
    uint32_t tok = (uint32_t)(r * 7 + 11) % b->vocab;
    double t0 = now_us();
    tw_model_decode_batch(b->m, pool, &b->seq, &tok, 1, b->logits, &err);
    double t = now_us() - t0;
    tw_seq_restore(b->seq, b->base, 0, &err);
    return t;
}

/* One verification pass of n rows, rewound after. */
static double verify_once(bench_model *b, tw_pool *pool, size_t n, int r)
{
    uint32_t toks[TW_SPEC_COST_MAX_ROWS];
    tw_err err;
    for (size_t i = 0; i < n; i++)
        toks[i] = (uint32_t)(r * 13 + i * 5 + 3) % b->vocab;
    double t0 = now_us();
    tw_model_verify(b->m, pool, b->seq, toks, n, b->logits, b->trail, &err);
    double t = now_us() - t0;
    tw_seq_restore(b->seq, b->base, 0, &err);
    return t;
}

/* The target's decode step and its verification passes of every row
 * count, taken in turn within each repetition: the machine's speed moves
 * between seconds, and measuring one count after another put those moves
 * into the curve (a 5-row pass could read dearer than a 9-row one). */
static void target_costs(bench_model *b, tw_pool *pool, tw_spec_costs *out)
{
    double dec[REPS], ver[TW_SPEC_COST_MAX_ROWS][REPS];
    for (int r = 0; r < REPS; r++) {
        dec[r] = decode_once(b, pool, r);
        for (size_t n = 1; n <= TW_SPEC_COST_MAX_ROWS; n++)
            ver[n - 1][r] = verify_once(b, pool, n, r);
    }
    out->target_decode_us = med(dec, REPS);
    for (size_t n = 1; n <= TW_SPEC_COST_MAX_ROWS; n++)
        out->verify_us[n - 1] = med(ver[n - 1], REPS);
}

/* The draft's decode step on its own (its cost is not compared across n). */
static double decode_us(bench_model *b, tw_pool *pool)
{
    double t[REPS];
    for (int r = 0; r < REPS; r++)
        t[r] = decode_once(b, pool, r);
    return med(t, REPS);
}

static double snapshot_us(bench_model *b)
{
    double t[REPS];
    tw_err err;
    for (int r = 0; r < REPS; r++) {
        double t0 = now_us();
        tw_seq_snapshot(b->seq, b->trail, 0, &err);
        t[r] = now_us() - t0;
    }
    return med(t, REPS);
}

static double restore_us(bench_model *b)
{
    double t[REPS];
    tw_err err;
    for (int r = 0; r < REPS; r++) {
        double t0 = now_us();
        tw_seq_restore(b->seq, b->base, 0, &err);
        t[r] = now_us() - t0;
    }
    return med(t, REPS);
}

int tw_bench_spec_costs(const char *target, const char *draft, uint32_t threads,
                        tw_spec_costs *out)
{
    memset(out, 0, sizeof *out);
    clock_id = threads == 1 ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
    tw_pool *pool = NULL;
    tw_err err;
    if (tw_pool_create((int)threads, &pool, &err) != TW_OK) {
        fprintf(stderr, "tw-bench-spec: pool: %s\n", err.msg);
        return -1;
    }
    uint32_t prompt[PROMPT];
    for (size_t i = 0; i < PROMPT; i++)
        prompt[i] = (uint32_t)(i * 2654435761u % 7919u) + 3;
    bench_model t, d;
    int rc = open_model(target, &t, pool, prompt);
    if (rc == 0)
        rc = open_model(draft, &d, pool, prompt);
    if (rc == 0) {
        target_costs(&t, pool, out);
        out->draft_decode_us = decode_us(&d, pool);
        out->draft_snapshot_us = snapshot_us(&d);
        out->draft_restore_us = restore_us(&d);
        out->target_restore_us = restore_us(&t);
        close_model(&d);
    }
    close_model(&t);
    tw_pool_destroy(pool);
    return rc;
}

void tw_bench_spec_costs_print(const tw_spec_costs *c)
{
    double dec = c->target_decode_us;
    printf("\nunit costs (model API, context %d, median of %d, %s):\n", PROMPT, REPS,
           clock_id == CLOCK_MONOTONIC ? "wall clock" : "thread CPU clock");
    printf("  target decode step:   %8.1f us\n", dec);
    printf("  draft decode step:    %8.1f us  (%.2f of a target step)\n", c->draft_decode_us,
           dec > 0 ? c->draft_decode_us / dec : 0.0);
    printf("  verify of n rows:    ");
    for (size_t n = 1; n <= TW_SPEC_COST_MAX_ROWS; n++)
        if (n == 1 || n == 2 || n == 3 || n == 5 || n == 9 || n == 13)
            printf(" n=%zu %.0f us (%.2fx)", n, c->verify_us[n - 1],
                   dec > 0 ? c->verify_us[n - 1] / dec : 0.0);
    printf("\n  draft snapshot:       %8.1f us per proposal\n", c->draft_snapshot_us);
    printf("  restore:              %8.1f us target, %.1f us draft\n", c->target_restore_us,
           c->draft_restore_us);
}
