/* tw-bench-kv: f32 against half-precision K/V on one model file.
 *
 *   tw-bench-kv --model FILE [--threads N|auto] [--prompt N] [--tokens N]
 *               [--prefills N] [--isa scalar|avx2|avx2vnni|avx512]
 *               [--decode-prefetch auto|on|off] [--f16-prefill auto|tiles|panels|blas]
 *
 * The model is loaded twice in one process, once per K/V type. Both copies
 * prefill the same prompt --prefills times (5 by default), the two
 * alternated and taking turns to go first; decode then alternates between
 * them a burst of 16 tokens at a time. Both thus see the same bandwidth
 * phases of a machine whose neighbours change it from minute to minute. The
 * rows report each type's tokens/s (prefill: the median run) with f32 as
 * the baseline, and the K/V bytes one token takes; the prefill rows also
 * carry the median of the rounds' f16 / f32 speed ratios. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "tw/kernels.h"
#include "tw/model.h"
#include "tw/pool.h"
#include "tw/seq_state.h"

#define BURST 16

#define MAX_PREFILLS 64

typedef struct side {
    tw_model *m;
    tw_seq *seq;
    double prefill_s[MAX_PREFILLS], decode_s;
} side;

static const char *kv_name(tw_kv_type t)
{
    return t == TW_KV_F16 ? "f16" : "f32";
}

static int load_side(const char *path, tw_kv_type kv, size_t prompt, size_t tokens, side *s)
{
    tw_err err;
    tw_model_opts mo = {
        .max_context = prompt + tokens + 1, .max_batch = 16, .max_chunk = 512, .kv_type = kv};
    if (tw_model_load(path, &mo, &s->m, &err) != TW_OK ||
        tw_seq_create(s->m, 0, &s->seq, &err) != TW_OK) {
        fprintf(stderr, "tw-bench-kv: %s (%s K/V): %s\n", path, kv_name(kv), err.msg);
        return -1;
    }
    return 0;
}

/* Prefill round r of side s, from an empty sequence. */
static int prefill_side(side *s, size_t r, tw_pool *pool, const uint32_t *ids, size_t prompt,
                        float *logits)
{
    tw_err err;
    tw_seq_reset(s->seq);
    double t0 = bench_now();
    if (tw_model_forward(s->m, pool, s->seq, ids, prompt, logits, TW_LOGITS_LAST, &err) != TW_OK) {
        fprintf(stderr, "tw-bench-kv: prefill: %s\n", err.msg);
        return -1;
    }
    s->prefill_s[r] = bench_now() - t0;
    bench_progress("%s K/V: prefill of %zu tokens %.1f tok/s",
                   kv_name(tw_model_get_info(s->m)->kv_type), prompt,
                   (double)prompt / s->prefill_s[r]);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: tw-bench-kv --model FILE [--threads N|auto] [--prompt N] [--tokens N]\n"
                    "                   [--prefills N] [--isa scalar|avx2|avx2vnni|avx512]\n"
                    "                   [--decode-prefetch auto|on|off]\n"
                    "                   [--f16-prefill auto|tiles|panels|blas]\n");
}

#define PROG "tw-bench-kv"

int main(int argc, char **argv)
{
    bench_pick_blas("tw-bench-kv", argv);
    const char *path = NULL;
    tw_hw_info hw;
    tw_hw_choice ch;
    tw_err herr;
    tw_hw_detect(&hw, &herr);
    tw_hw_choose(&hw, &ch);
    size_t threads = ch.threads, prompt = 3584, tokens = 128, prefills = 5;
    const char *prefetch = "auto", *f16_prefill = "auto";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[++i] : NULL;
        bool ok = true;
        if (!strcmp(a, "--model"))
            ok = (path = bench_arg_value(PROG, a, v)) != NULL;
        else if (!strcmp(a, "--threads") && v && !strcmp(v, "auto"))
            threads = ch.threads;
        else if (!strcmp(a, "--threads"))
            ok = bench_arg_size(PROG, a, v, 1, 1024, &threads);
        else if (!strcmp(a, "--prompt"))
            ok = bench_arg_size(PROG, a, v, 1, 1 << 20, &prompt);
        else if (!strcmp(a, "--tokens"))
            ok = bench_arg_size(PROG, a, v, BURST, 1 << 16, &tokens);
        else if (!strcmp(a, "--prefills"))
            ok = bench_arg_size(PROG, a, v, 1, MAX_PREFILLS, &prefills);
        else if (!strcmp(a, "--decode-prefetch"))
            ok = (prefetch = bench_arg_value(PROG, a, v)) != NULL;
        else if (!strcmp(a, "--f16-prefill"))
            ok = (f16_prefill = bench_arg_value(PROG, a, v)) != NULL;
        else if (!strcmp(a, "--isa"))
            ok = bench_force_isa(PROG, v);
        else {
            bench_arg_unknown(PROG, a);
            ok = false;
        }
        if (!ok) {
            usage();
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, PROG ": --model is required\n");
        usage();
        return 2;
    }
    tokens -= tokens % BURST;
    /* as tokenwired decides it: the attention kernels fetch K/V rows ahead
     * only with decode prefetch on */
    if (bench_decode_prefetch(prefetch, (uint32_t)threads) != 0 ||
        bench_f16_prefill(f16_prefill, (uint32_t)threads) != 0) {
        usage();
        return 2;
    }
    bench_machine_row((uint32_t)threads, 1.0);
    tw_err err;
    tw_pool *pool = NULL;
    if (tw_pool_create((int)threads, &pool, &err) != TW_OK) {
        fprintf(stderr, "tw-bench-kv: pool: %s\n", err.msg);
        return 1;
    }
    uint32_t *ids = malloc(prompt * sizeof *ids);
    float *logits = NULL;
    side sd[2] = {{0}};
    int rc = ids ? 0 : 1;
    for (size_t i = 0; rc == 0 && i < prompt; i++)
        ids[i] = (uint32_t)(i * 2654435761u % 7919u) + 3;
    for (int k = 0; rc == 0 && k < 2; k++)
        rc = load_side(path, k ? TW_KV_F16 : TW_KV_F32, prompt, tokens, &sd[k]) ? 1 : 0;
    if (rc == 0) {
        logits = malloc(tw_model_get_info(sd[0].m)->vocab_size * sizeof *logits);
        rc = logits ? 0 : 1;
    }
    for (size_t r = 0; rc == 0 && r < prefills; r++)
        for (int kk = 0; rc == 0 && kk < 2; kk++) {
            const int k = r % 2 ? 1 - kk : kk;
            rc = prefill_side(&sd[k], r, pool, ids, prompt, logits) ? 1 : 0;
        }
    /* the sides' last prefills leave both sequences holding the prompt */
    uint32_t vocab = rc == 0 ? tw_model_get_info(sd[0].m)->vocab_size : 1;
    uint32_t tok = 5;
    for (size_t done = 0; rc == 0 && done < tokens; done += BURST)
        for (int k = 0; rc == 0 && k < 2; k++) {
            double t0 = bench_now();
            for (int r = 0; r < BURST; r++) {
                if (tw_model_decode_batch(sd[k].m, pool, &sd[k].seq, &tok, 1, logits, &err) !=
                    TW_OK) {
                    fprintf(stderr, "tw-bench-kv: decode: %s\n", err.msg);
                    rc = 1;
                    break;
                }
                tok = (tok * 31 + 7) % vocab;
            }
            sd[k].decode_s += bench_now() - t0;
        }
    if (rc == 0) {
        double dec[2], pf[2], ratio[MAX_PREFILLS];
        for (size_t r = 0; r < prefills; r++)
            ratio[r] = sd[0].prefill_s[r] / sd[1].prefill_s[r];
        const double pf_ratio = bench_percentile(ratio, prefills, 50.0);
        for (int k = 0; k < 2; k++) {
            dec[k] = (double)tokens / sd[k].decode_s;
            pf[k] = (double)prompt / bench_percentile(sd[k].prefill_s, prefills, 50.0);
        }
        char extra[320];
        snprintf(extra, sizeof extra,
                 "\"prompt\":%zu,\"tokens\":%zu,\"prefills\":%zu,"
                 "\"prefill_paired_ratio\":%.4f,\"threads\":%zu,\"isa\":\"%s\"",
                 prompt, tokens, prefills, pf_ratio, threads, tw_kernels_isa());
        for (int k = 0; k < 2; k++) {
            char name[64];
            snprintf(name, sizeof name, "decode_after_prompt_%s",
                     kv_name(k ? TW_KV_F16 : TW_KV_F32));
            bench_row("kv", name, path, dec[k], "tok/s", k ? dec[0] : 0, "f32 K/V", extra);
            snprintf(name, sizeof name, "prefill_%s", kv_name(k ? TW_KV_F16 : TW_KV_F32));
            bench_row("kv", name, path, pf[k], "tok/s", k ? pf[0] : 0, "f32 K/V", extra);
            snprintf(name, sizeof name, "kv_bytes_per_token_%s",
                     kv_name(k ? TW_KV_F16 : TW_KV_F32));
            bench_row("kv", name, path, (double)tw_seq_kv_bytes_per_token(sd[k].m), "B/token",
                      k ? (double)tw_seq_kv_bytes_per_token(sd[0].m) : 0, "f32 K/V", extra);
        }
        bench_progress("prefill of %zu tokens, median of %zu alternated runs: f32 K/V %.1f "
                       "tok/s, f16 K/V %.1f tok/s (%.3fx paired)",
                       prompt, prefills, pf[0], pf[1], pf_ratio);
        bench_progress("decode of %zu tokens after a %zu-token prompt: f32 K/V %.1f tok/s, "
                       "f16 K/V %.1f tok/s (%.2fx)",
                       tokens, prompt, dec[0], dec[1], dec[1] / dec[0]);
    }
    for (int k = 0; k < 2; k++) {
        tw_seq_free(sd[k].seq);
        tw_model_free(sd[k].m);
    }
    free(logits);
    free(ids);
    tw_pool_destroy(pool);
    return rc;
}
