/* tw-bench-prefix: what restoring a shared prefix costs a sequence when the
 * prefix cache maps its pages (the default) against copying its rows.
 *
 * One prompt of --prefix tokens is prefilled and cached, then --seqs
 * sequences are restored from it, each stepping one token on from there
 * (the step reads every restored row once). Per mode: the restore's time,
 * that first step's time (a mapped page is faulted in when the step first
 * reads it), a later step's, and how much more memory the process holds
 * (proportional set size: a page mapped by eight sequences counts once)
 * than before the restores. Both modes run in alternation, --rounds
 * times, and every sequence's next token must be the one the prefilled
 * sequence gives. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "tw/blas.h"
#include "tw/pool.h"
#include "tw/prefix_cache.h"
#include "tw/seq_state.h"

#define PROG     "tw-bench-prefix"
#define MAX_SEQS 64

static uint32_t argmax(const float *v, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

typedef struct mode_result {
    double restore_ms, first_ms, next_ms; /* medians over the sequences */
    double pss_per_seq;                   /* bytes */
    uint64_t mapped;
} mode_result;

typedef struct ctx {
    tw_model *m;
    tw_pool *pool;
    tw_seq *a; /* the prefilled prompt */
    const uint32_t *prompt;
    size_t prefix;
    size_t n_seqs;
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
    *next = argmax(x->logits, x->vocab);
    return true;
}

static bool run_mode(ctx *x, bool copy, mode_result *out)
{
    tw_err err;
    tw_prefix_cache_opts o = {.max_bytes = (uint64_t)8 << 30, .copy_kv = copy};
    tw_prefix_cache *c;
    if (tw_prefix_cache_create(x->m, &o, &c, &err) != TW_OK) {
        fprintf(stderr, "%s: cache: %s\n", PROG, err.msg);
        return false;
    }
    size_t cached = 0;
    if (tw_prefix_cache_insert(c, x->a, x->prompt, false, &cached, &err) != TW_OK ||
        cached != x->prefix) {
        fprintf(stderr, "%s: insert cached %zu of %zu tokens\n", PROG, cached, x->prefix);
        tw_prefix_cache_free(c);
        return false;
    }
    tw_seq *seqs[MAX_SEQS] = {0};
    double restore[MAX_SEQS], first[MAX_SEQS], next[MAX_SEQS];
    bool ok = true;
    const uint64_t pss0 = bench_pss_bytes();
    for (size_t i = 0; i < x->n_seqs && ok; i++) {
        size_t got = 0;
        ok = tw_seq_create(x->m, x->prefix + 8, &seqs[i], &err) == TW_OK;
        double t0 = bench_now();
        ok = ok && tw_prefix_cache_restore(c, seqs[i], x->prompt, x->prefix + 1, x->prefix, &got,
                                           &err) == TW_OK;
        restore[i] = (bench_now() - t0) * 1e3;
        if (!ok || got != x->prefix) {
            fprintf(stderr, "%s: restore got %zu of %zu tokens\n", PROG, got, x->prefix);
            ok = false;
            break;
        }
        uint32_t tok = 0, tok2 = 0;
        ok = step(x, seqs[i], x->prompt[x->prefix], &tok, &first[i]) &&
             step(x, seqs[i], tok, &tok2, &next[i]);
        if (ok && tok != x->want) {
            fprintf(stderr, "%s: sequence %zu gave token %u after the prefix, not %u\n", PROG, i,
                    tok, x->want);
            ok = false;
        }
    }
    const uint64_t pss1 = bench_pss_bytes();
    tw_prefix_cache_stats st;
    tw_prefix_cache_get_stats(c, &st);
    for (size_t i = 0; i < x->n_seqs; i++)
        tw_seq_free(seqs[i]);
    tw_prefix_cache_free(c);
    if (!ok)
        return false;
    out->restore_ms = bench_percentile(restore, x->n_seqs, 50);
    out->first_ms = bench_percentile(first, x->n_seqs, 50);
    out->next_ms = bench_percentile(next, x->n_seqs, 50);
    out->pss_per_seq = pss1 > pss0 ? (double)(pss1 - pss0) / (double)x->n_seqs : 0;
    out->mapped = st.tokens_mapped;
    return true;
}

static void usage(void)
{
    fprintf(stderr, "usage: " PROG " --model FILE.gguf [--prefix N] [--seqs N] [--rounds N]\n"
                    "                        [--threads N]\n");
}

int main(int argc, char **argv)
{
    bench_pick_blas(PROG, argv);
    const char *path = NULL;
    size_t prefix = 4096, n_seqs = 8, rounds = 2, threads = 2;
    for (int i = 1; i < argc; i++) {
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
        i++;
    }
    if (!path) {
        fprintf(stderr, "%s: --model is required\n", PROG);
        usage();
        return 2;
    }
    prefix = prefix / TW_PREFIX_BLOCK * TW_PREFIX_BLOCK;
    tw_err err;
    ctx x = {.prefix = prefix, .n_seqs = n_seqs};
    tw_model_opts mo = {.max_context = (uint32_t)(prefix + 64), .max_batch = 1};
    if (tw_model_load(path, &mo, &x.m, &err) != TW_OK) {
        fprintf(stderr, "%s: %s: %s\n", PROG, path, err.msg);
        return 1;
    }
    int rc = 1;
    uint32_t *prompt = malloc((prefix + 1) * sizeof *prompt);
    x.vocab = tw_model_get_info(x.m)->vocab_size;
    x.logits = malloc(x.vocab * sizeof(float));
    if (!prompt || !x.logits || tw_pool_create((int)threads, &x.pool, &err) != TW_OK ||
        tw_seq_create(x.m, prefix + 8, &x.a, &err) != TW_OK) {
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
    x.want = argmax(x.logits, x.vocab);
    bench_progress("prefill took %.1f s; %zu sequences restored per mode, %zu rounds", bench_now() - t0,
                   n_seqs, rounds);
    const double kv_bytes = (double)prefix * (double)tw_seq_kv_bytes_per_token(x.m);
    for (size_t r = 0; r < rounds; r++) {
        for (int copy = 0; copy < 2; copy++) {
            /* the modes alternate which goes first */
            const bool use_copy = (copy + (int)r) % 2 == 1;
            mode_result mr;
            if (!run_mode(&x, use_copy, &mr))
                goto done;
            const char *name = use_copy ? "copy" : "map";
            bench_progress("round %zu, %s: restore %.2f ms, first step %.2f ms, next step %.2f "
                           "ms, %.1f MiB more a sequence (the prefix's K/V: %.1f MiB), %llu "
                           "tokens mapped",
                           r + 1, name, mr.restore_ms, mr.first_ms, mr.next_ms,
                           mr.pss_per_seq / 1048576.0, kv_bytes / 1048576.0,
                           (unsigned long long)mr.mapped);
            char extra[256];
            snprintf(extra, sizeof extra,
                     "\"mode\":\"%s\",\"round\":%zu,\"prefix\":%zu,\"seqs\":%zu,"
                     "\"first_step_ms\":%.4g,\"next_step_ms\":%.4g,\"tokens_mapped\":%llu",
                     name, r + 1, prefix, n_seqs, mr.first_ms, mr.next_ms,
                     (unsigned long long)mr.mapped);
            bench_row("prefix_share", "restore_ms", path, mr.restore_ms, "ms", 0, NULL, extra);
            bench_row("prefix_share", "memory_per_seq", path, mr.pss_per_seq, "B", kv_bytes,
                      "prefix K/V bytes", extra);
        }
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
