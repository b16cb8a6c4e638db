/* tw-bench-prefix: what restoring a shared prefix costs a sequence when the
 * prefix cache maps its pages (the default) against copying its rows.
 *
 * One prompt of --prefix tokens is prefilled and cached, then --seqs
 * sequences are restored from it, each stepping one token on from there
 * (the step reads every restored row once). Per mode: the restore's time,
 * that first step's time (a mapped page is faulted in when the step first
 * reads it), the median of --steps steps after it, and how much more
 * memory the process holds
 * (proportional set size: a page mapped by eight sequences counts once)
 * than before the restores. Both modes run in alternation, --rounds
 * times, and every sequence's next token must be the one the prefilled
 * sequence gives. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "tw/blas.h"
#include "tw/kernels.h"
#include "tw/pool.h"
#include "tw/prefix_cache.h"
#include "tw/seq_state.h"

#define PROG     "tw-bench-prefix"
#define MAX_SEQS  64
#define MAX_STEPS 64

typedef struct mode_result {
    double restore_ms, first_ms; /* medians over the sequences */
    double pss_per_seq;          /* bytes */
    uint64_t mapped;
    /* kept for the steps after the first */
    tw_prefix_cache *cache;
    tw_seq *seqs[MAX_SEQS];
    uint32_t tok[MAX_SEQS];
} mode_result;

typedef struct ctx {
    tw_model *m;
    tw_pool *pool;
    tw_seq *a; /* the prefilled prompt */
    const uint32_t *prompt;
    size_t prefix;
    size_t n_seqs;
    size_t steps; /* after the first */
    float *logits;
    uint32_t vocab, want;
} ctx;

static bool step(ctx *x, tw_seq *s, uint32_t tok, uint32_t *next, double *ms)
{
    tw_err err;
    double t0 = bench_now();
    if (tw_model_decode_batch(x->m, x->pool, &s, &tok, 1, x->logits, &err) != TW_OK) {
        fprintf(stderr, "%s: decode: %s\n", PROG, err.msg);
        return false;
    }
    *ms = (bench_now() - t0) * 1e3;
    *next = (uint32_t)tw_argmax_f32(x->logits, x->vocab);
    return true;
}

static void mode_free(ctx *x, mode_result *r)
{
    for (size_t i = 0; i < x->n_seqs; i++)
        tw_seq_free(r->seqs[i]);
    tw_prefix_cache_free(r->cache);
    memset(r, 0, sizeof *r);
}

/* Caches the prefix, restores every sequence from it and steps each one
 * token on; the sequences and the cache stay in *out (mode_free). */
static bool run_mode(ctx *x, bool copy, mode_result *out)
{
    memset(out, 0, sizeof *out);
    tw_err err;
    tw_prefix_cache_opts o = {.max_bytes = (uint64_t)8 << 30, .copy_kv = copy};
    if (tw_prefix_cache_create(x->m, &o, &out->cache, &err) != TW_OK) {
        fprintf(stderr, "%s: cache: %s\n", PROG, err.msg);
        return false;
    }
    size_t cached = 0;
    if (tw_prefix_cache_insert(out->cache, x->a, x->prompt, false, &cached, &err) != TW_OK ||
        cached != x->prefix) {
        fprintf(stderr, "%s: insert cached %zu of %zu tokens\n", PROG, cached, x->prefix);
        return false;
    }
    double restore[MAX_SEQS], first[MAX_SEQS];
    const uint64_t pss0 = bench_pss_bytes();
    for (size_t i = 0; i < x->n_seqs; i++) {
        size_t got = 0;
        if (tw_seq_create(x->m, x->prefix + MAX_STEPS + 8, &out->seqs[i], &err) != TW_OK) {
            fprintf(stderr, "%s: sequence: %s\n", PROG, err.msg);
            return false;
        }
        double t0 = bench_now();
        tw_status st = tw_prefix_cache_restore(out->cache, out->seqs[i], x->prompt, x->prefix + 1,
                                               x->prefix, &got, &err);
        restore[i] = (bench_now() - t0) * 1e3;
        if (st != TW_OK || got != x->prefix) {
            fprintf(stderr, "%s: restore got %zu of %zu tokens\n", PROG, got, x->prefix);
            return false;
        }
        if (!step(x, out->seqs[i], x->prompt[x->prefix], &out->tok[i], &first[i]))
            return false;
        if (out->tok[i] != x->want) {
            fprintf(stderr, "%s: sequence %zu gave token %u after the prefix, not %u\n", PROG, i,
                    out->tok[i], x->want);
            return false;
        }
    }
    const uint64_t pss1 = bench_pss_bytes();
    tw_prefix_cache_stats st;
    tw_prefix_cache_get_stats(out->cache, &st);
    out->restore_ms = bench_percentile(restore, x->n_seqs, 50);
    out->first_ms = bench_percentile(first, x->n_seqs, 50);
    out->pss_per_seq = pss1 > pss0 ? (double)(pss1 - pss0) / (double)x->n_seqs : 0;
    out->mapped = st.tokens_mapped;
    return true;
}

/* The steps after the first, a mapped sequence's and a copied one's in
 * turn, so that both meet the same minutes of a shared machine: the
 * medians of each, in ms. */
static bool later_steps(ctx *x, mode_result *map, mode_result *copy, double *map_ms,
                        double *copy_ms)
{
    static double tm[MAX_SEQS * MAX_STEPS], tc[MAX_SEQS * MAX_STEPS];
    size_t n = 0;
    for (size_t k = 0; k < x->steps; k++)
        for (size_t i = 0; i < x->n_seqs; i++, n++) {
            if (!step(x, map->seqs[i], map->tok[i], &map->tok[i], &tm[n]) ||
                !step(x, copy->seqs[i], copy->tok[i], &copy->tok[i], &tc[n]))
                return false;
            if (map->tok[i] != copy->tok[i]) {
                fprintf(stderr, "%s: the mapped and the copied sequence %zu part at step %zu\n",
                        PROG, i, k + 2);
                return false;
            }
        }
    *map_ms = bench_percentile(tm, n, 50);
    *copy_ms = bench_percentile(tc, n, 50);
    return true;
}

static void usage(void)
{
    fprintf(stderr, "usage: " PROG " --model FILE.gguf [--prefix N] [--seqs N] [--rounds N]\n"
                    "                        [--steps N] [--threads N]\n");
}

int main(int argc, char **argv)
{
    bench_pick_blas(PROG, argv);
    const char *path = NULL;
    size_t prefix = 4096, n_seqs = 8, rounds = 2, threads = 2, steps = 4;
    /* every option takes a value */
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--model")) {
            if (!(path = bench_arg_value(PROG, a, v)))
                return 2;
        } else if (!strcmp(a, "--prefix")) {
            if (!bench_arg_size(PROG, a, v, TW_PREFIX_BLOCK, (size_t)1 << 20, &prefix))
                return 2;
        } else if (!strcmp(a, "--seqs")) {
            if (!bench_arg_size(PROG, a, v, 1, MAX_SEQS, &n_seqs))
                return 2;
        } else if (!strcmp(a, "--steps")) {
            if (!bench_arg_size(PROG, a, v, 1, MAX_STEPS, &steps))
                return 2;
        } else if (!strcmp(a, "--rounds")) {
            if (!bench_arg_size(PROG, a, v, 1, 100, &rounds))
                return 2;
        } else if (!strcmp(a, "--threads")) {
            if (!bench_arg_size(PROG, a, v, 1, 256, &threads))
                return 2;
        } else {
            bench_arg_unknown(PROG, a);
            usage();
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "%s: --model is required\n", PROG);
        usage();
        return 2;
    }
    prefix = prefix / TW_PREFIX_BLOCK * TW_PREFIX_BLOCK;
    tw_err err;
    ctx x = {.prefix = prefix, .n_seqs = n_seqs, .steps = steps};
    tw_model_opts mo = {.max_context = (uint32_t)(prefix + MAX_STEPS + 8), .max_batch = 1};
    if (tw_model_load(path, &mo, &x.m, &err) != TW_OK) {
        fprintf(stderr, "%s: %s: %s\n", PROG, path, err.msg);
        return 1;
    }
    int rc = 1;
    uint32_t *prompt = malloc((prefix + 1) * sizeof *prompt);
    x.vocab = tw_model_get_info(x.m)->vocab_size;
    x.logits = malloc(x.vocab * sizeof(float));
    if (!prompt || !x.logits || tw_pool_create((int)threads, &x.pool, &err) != TW_OK ||
        tw_seq_create(x.m, prefix + MAX_STEPS + 8, &x.a, &err) != TW_OK) {
        fprintf(stderr, "%s: setting up: %s\n", PROG, err.msg);
        goto done;
    }
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i <= prefix; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        prompt[i] = (uint32_t)((s >> 33) % x.vocab);
    }
    x.prompt = prompt;
    bench_progress("%s: prefill of the %zu-token prefix", path, prefix);
    double t0 = bench_now();
    if (tw_model_forward(x.m, x.pool, x.a, prompt, prefix, NULL, TW_LOGITS_NONE, &err) != TW_OK ||
        tw_model_forward(x.m, x.pool, x.a, prompt + prefix, 1, x.logits, TW_LOGITS_LAST, &err) !=
            TW_OK) {
        fprintf(stderr, "%s: prefill: %s\n", PROG, err.msg);
        goto done;
    }
    (void)tw_seq_truncate(x.a, prefix, &err);
    x.want = (uint32_t)tw_argmax_f32(x.logits, x.vocab);
    bench_progress("prefill took %.1f s; %zu sequences restored per mode, %zu rounds", bench_now() - t0,
                   n_seqs, rounds);
    const double kv_bytes = (double)prefix * (double)tw_seq_kv_bytes_per_token(x.m);
    for (size_t r = 0; r < rounds; r++) {
        mode_result res[2]; /* [0] mapped, [1] copied */
        memset(res, 0, sizeof res);
        bool ok = true;
        for (int k = 0; k < 2 && ok; k++) {
            /* the modes alternate which goes first */
            const int mode = (k + (int)r) % 2;
            ok = run_mode(&x, mode == 1, &res[mode]);
        }
        double map_ms = 0, copy_ms = 0;
        ok = ok && later_steps(&x, &res[0], &res[1], &map_ms, &copy_ms);
        for (int mode = 0; mode < 2 && ok; mode++) {
            const mode_result *mr = &res[mode];
            const char *name = mode ? "copy" : "map";
            const double later = mode ? copy_ms : map_ms;
            bench_progress("round %zu, %s: restore %.2f ms, first step %.2f ms, later steps "
                           "%.2f ms, %.1f MiB more a sequence (the prefix's K/V: %.1f MiB), %llu "
                           "tokens mapped",
                           r + 1, name, mr->restore_ms, mr->first_ms, later,
                           mr->pss_per_seq / 1048576.0, kv_bytes / 1048576.0,
                           (unsigned long long)mr->mapped);
            char extra[256];
            snprintf(extra, sizeof extra,
                     "\"mode\":\"%s\",\"round\":%zu,\"prefix\":%zu,\"seqs\":%zu,"
                     "\"first_step_ms\":%.4g,\"later_step_ms\":%.4g,\"tokens_mapped\":%llu",
                     name, r + 1, prefix, n_seqs, mr->first_ms, later,
                     (unsigned long long)mr->mapped);
            bench_row("prefix_share", "restore_ms", path, mr->restore_ms, "ms", 0, NULL, extra);
            bench_row("prefix_share", "memory_per_seq", path, mr->pss_per_seq, "B", kv_bytes,
                      "prefix K/V bytes", extra);
        }
        if (ok)
            bench_progress("round %zu: later steps, mapped against copied: %.3fx the time", r + 1,
                           copy_ms > 0 ? map_ms / copy_ms : 0);
        mode_free(&x, &res[0]);
        mode_free(&x, &res[1]);
        if (!ok)
            goto done;
    }
    rc = 0;
done:
    tw_seq_free(x.a);
    tw_pool_destroy(x.pool);
    free(x.logits);
    free(prompt);
    tw_model_free(x.m);
    return rc;
}
