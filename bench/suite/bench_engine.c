/* tw-bench-engine: speed of one model through the model API (prefill and
 * decode, no scheduler) and the engine API (TTFT, single-stream decode,
 * continuous batching with 1..64 concurrent streams), plus memory per
 * token. One JSON row per result on stdout; progress on stderr. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "tw/engine.h"
#include "tw/gguf.h"
#include "tw/hw.h"
#include "tw/kernels.h"
#include "tw/model.h"
#include "tw/pool.h"
#include "tw/seq_state.h"

typedef struct args {
    const char *model;
    const char *label;
    uint32_t threads;
    uint32_t chunk;
    uint32_t max_batch;
    double bandwidth; /* B/s; 0: measure */
    bool quick;
    bool skip_engine;
    tw_kv_type kv_type;
    const char *prefetch; /* --decode-prefetch */
    const char *f16_prefill; /* --f16-prefill */
} args;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tw-bench-engine --model FILE.gguf [--label NAME] [--threads N|auto]\n"
            "                       [--chunk N] [--max-batch N] [--bandwidth GBPS]\n"
            "                       [--quick] [--no-engine] [--isa scalar|avx2|avx2vnni|avx512]\n"
            "                       [--kv-type f16|f32] [--decode-prefetch auto|on|off]\n"
            "                       [--f16-prefill auto|tiles|panels|blas]\n");
}

/* Weight bytes one decode step reads: every tensor once, except an untied
 * embedding, of which only one row is gathered. */
static uint64_t bytes_per_token(const char *path)
{
    tw_gguf *g;
    tw_err err;
    if (tw_gguf_open(path, &g, &err) != TW_OK)
        return 0;
    bool untied = tw_gguf_find_tensor(g, "output.weight") != NULL;
    uint64_t sum = 0;
    for (int64_t i = 0; i < tw_gguf_tensor_count(g); i++) {
        const tw_gguf_tensor *t = tw_gguf_tensor_at(g, i);
        if (untied && strcmp(t->name, "token_embd.weight") == 0)
            continue;
        sum += t->nbytes;
    }
    tw_gguf_close(g);
    return sum;
}

static void make_prompt(uint32_t *ids, size_t n, uint32_t vocab, uint64_t seed)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    uint32_t lo = vocab > 1000 ? 256 : 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ids[i] = lo + (uint32_t)(s % (vocab - lo));
    }
}

/* The greedy choice as the engine's sampler makes it (tw_argmax_f32). A
 * plain loop here took ~200 us of each ~6 ms qwen2-0.5b step (50257
 * logits, half of them written by the other core), which the decode
 * numbers then carried as if the engine spent it. */
static uint32_t argmax(float *v, uint32_t n)
{
    return (uint32_t)tw_argmax_f32(v, n);
}

/* ---- model API ---------------------------------------------------------- */

/* The prompt before the long-context decode (and the largest prefill's
 * source of tokens). */
#define LONG_PROMPT 3584

static double run_prefill(tw_model *m, tw_pool *pool, tw_seq *seq, const uint32_t *ids, size_t n,
                          float *logits, int reps)
{
    double best = 1e30;
    tw_err err;
    for (int r = 0; r < reps; r++) {
        tw_seq_reset(seq);
        double t0 = bench_now();
        if (tw_model_forward(m, pool, seq, ids, n, logits, TW_LOGITS_LAST, &err) != TW_OK) {
            bench_progress("prefill %zu failed: %s", n, err.msg);
            return 0;
        }
        double dt = bench_now() - t0;
        if (dt < best)
            best = dt;
    }
    return (double)n / best;
}

/* Starts seq afresh on the prompt; *tok gets the first greedy token. */
static bool decode_start(tw_model *m, tw_pool *pool, tw_seq *seq, const uint32_t *prompt,
                         size_t n_prompt, float *logits, uint32_t vocab, uint32_t *tok)
{
    tw_err err;
    tw_seq_reset(seq);
    if (tw_model_forward(m, pool, seq, prompt, n_prompt, logits, TW_LOGITS_LAST, &err) != TW_OK) {
        bench_progress("decode prompt failed: %s", err.msg);
        return false;
    }
    *tok = argmax(logits, vocab);
    return true;
}

static double run_decode(tw_model *m, tw_pool *pool, tw_seq *seq, const uint32_t *prompt,
                         size_t n_prompt, size_t n, float *logits, uint32_t vocab)
{
    tw_err err;
    uint32_t tok;
    if (!decode_start(m, pool, seq, prompt, n_prompt, logits, vocab, &tok))
        return 0;
    double t0 = bench_now();
    for (size_t i = 0; i < n; i++) {
        /* the decode entry point the scheduler uses, with a batch of one */
        if (tw_model_decode_batch(m, pool, &seq, &tok, 1, logits, &err) != TW_OK) {
            bench_progress("decode step failed: %s", err.msg);
            return 0;
        }
        tok = argmax(logits, vocab);
    }
    return (double)n / (bench_now() - t0);
}

/* Decode set against bandwidth read in the same moments: bursts of
 * PAIRED_BURST tokens alternate with short read probes, so each burst and
 * its neighbouring probes see the same phase of a shared machine. Returns
 * the median over the bursts of the weight bytes a burst moved per second
 * over the better of the probes on either side of it (0 on failure);
 * *bw_med gets the median of those probes. */
#define PAIRED_ROUNDS 9
#define PAIRED_BURST 16
#define PAIRED_PROBE_S 0.15

/* Seconds for PAIRED_BURST greedy decode steps from *tok (left at the last
 * token chosen), after one untimed step; negative on failure. The first
 * step after a probe or any pause is slow for reasons outside the engine:
 * qwen2-0.5b Q4_0 on the Zen 5 guest took 0.8-1.7 ms longer on it than on
 * the steps after, with one thread as with two, after a 0.15 s sleep as
 * after a probe, and a decode that runs on pays it once, not every 16
 * tokens. */
static double decode_burst(tw_model *m, tw_pool *pool, tw_seq *seq, uint32_t *tok, float *logits,
                           uint32_t vocab)
{
    tw_err err;
    double t0 = 0;
    for (int i = 0; i <= PAIRED_BURST; i++) {
        if (i == 1)
            t0 = bench_now();
        if (tw_model_decode_batch(m, pool, &seq, tok, 1, logits, &err) != TW_OK)
            return -1;
        *tok = argmax(logits, vocab);
    }
    return bench_now() - t0;
}

static double decode_bandwidth_share(tw_model *m, tw_pool *pool, tw_seq *seq,
                                     const uint32_t *prompt, uint32_t threads, uint64_t bpt,
                                     float *logits, uint32_t vocab, double *bw_med)
{
    uint32_t tok;
    if (!decode_start(m, pool, seq, prompt, 8, logits, vocab, &tok))
        return 0;
    double share[PAIRED_ROUNDS], bws[PAIRED_ROUNDS];
    double before = bench_probe_bandwidth(threads, PAIRED_PROBE_S);
    for (int r = 0; r < PAIRED_ROUNDS; r++) {
        double dt = decode_burst(m, pool, seq, &tok, logits, vocab);
        if (dt < 0)
            return 0;
        double after = bench_probe_bandwidth(threads, PAIRED_PROBE_S);
        double bw = after > before ? after : before;
        if (bw <= 0 || dt <= 0)
            return 0;
        share[r] = (double)PAIRED_BURST * (double)bpt / dt / bw;
        bws[r] = bw;
        before = after;
    }
    *bw_med = bench_percentile(bws, PAIRED_ROUNDS, 50);
    return bench_percentile(share, PAIRED_ROUNDS, 50);
}

/* A decode setting measured by paired_gain: set(on) switches it. */
typedef void (*setting_fn)(bool on);

/* The decode split (tw_kernels_set_decode_split: a thread done with its
 * rows takes the back of a slower thread's). Switched off, fetch ahead is
 * off too, as it fetches what the split will read. */
static void set_split(bool on)
{
    tw_kernels_set_decode_split(on);
}

/* Fetch ahead (tw_kernels_set_fetch_ahead) at the bytes it had. */
static size_t fetch_on_bytes;
static void set_fetch(bool on)
{
    tw_kernels_set_fetch_ahead(on ? fetch_on_bytes : 0);
}

/* Decode with a setting on against off, in alternating bursts of
 * PAIRED_BURST tokens, which of the two goes first alternating too, so both
 * meet the same phases of a shared machine. Returns the median over the
 * pairs of (time off / time on), 0 on failure; the setting is left on. */
static double paired_gain(tw_model *m, tw_pool *pool, tw_seq *seq, const uint32_t *prompt,
                          float *logits, uint32_t vocab, setting_fn set)
{
    uint32_t tok;
    if (!decode_start(m, pool, seq, prompt, 8, logits, vocab, &tok))
        return 0;
    double ratio[PAIRED_ROUNDS];
    for (int r = 0; r < PAIRED_ROUNDS; r++) {
        double t[2] = {0, 0};
        for (int k = 0; k < 2; k++) {
            const int on = (k == 0) == (r % 2 == 0);
            set(on);
            t[on] = decode_burst(m, pool, seq, &tok, logits, vocab);
            if (t[on] < 0) {
                set(true);
                return 0;
            }
        }
        ratio[r] = t[1] > 0 ? t[0] / t[1] : 0;
    }
    set(true);
    return bench_percentile(ratio, PAIRED_ROUNDS, 50);
}

typedef struct model_results {
    double decode128;
} model_results;

static int bench_model_api(const args *a, double bw, model_results *res)
{
    tw_err err;
    tw_pool *pool = NULL;
    if (tw_pool_create((int)a->threads, &pool, &err) != TW_OK) {
        bench_progress("pool: %s", err.msg);
        return 1;
    }
    uint64_t rss0 = bench_rss_bytes();
    tw_model_opts mo = {.max_context = LONG_PROMPT + 64, .max_batch = a->max_batch,
                        .max_chunk = a->chunk, .kv_type = a->kv_type};
    tw_model *m = NULL;
    double t0 = bench_now();
    if (tw_model_load(a->model, &mo, &m, &err) != TW_OK) {
        bench_progress("load %s: %s", a->model, err.msg);
        tw_pool_destroy(pool);
        return 1;
    }
    double load_s = bench_now() - t0;
    const tw_model_info *info = tw_model_get_info(m);
    uint32_t vocab = info->vocab_size;
    uint64_t bpt = bytes_per_token(a->model);
    bench_progress("%s: %s, %.0fM parameters, %s, %.1f MiB read per token, loaded in %.2f s "
                   "(weights %s)",
                   a->label, info->model_type, (double)info->n_params / 1e6,
                   tw_type_name(info->weight_type), (double)bpt / (1 << 20), load_s,
                   info->huge_pages ? "in huge pages" : "mapped from the file");

    /* memory: bytes per token from two sequence capacities: the heap a
     * sequence takes per position, measured, and its K/V, which lives in
     * a mapping of its own outside the heap */
    uint64_t h0 = bench_heap_bytes();
    tw_seq *s1 = NULL, *s2 = NULL;
    tw_seq_create(m, 256, &s1, &err);
    uint64_t h1 = bench_heap_bytes();
    tw_seq_create(m, 1280, &s2, &err);
    uint64_t h2 = bench_heap_bytes();
    double heap_per_tok =
        s1 && s2 ? ((double)h2 - (double)h1 - ((double)h1 - (double)h0)) / 1024.0 : 0;
    double kv_per_tok = s1 && s2 ? heap_per_tok + (double)tw_seq_kv_bytes_per_token(m) : 0;
    double fixed = s1 ? (double)(h1 - h0) - heap_per_tok * 256 : 0;
    tw_seq_free(s1);
    tw_seq_free(s2);

    tw_seq *seq = NULL;
    if (tw_seq_create(m, 0, &seq, &err) != TW_OK) {
        bench_progress("seq: %s", err.msg);
        tw_model_free(m);
        tw_pool_destroy(pool);
        return 1;
    }
    float *logits = malloc((size_t)vocab * sizeof *logits);
    uint32_t *ids = malloc(LONG_PROMPT * sizeof *ids);
    if (!logits || !ids) {
        free(logits);
        free(ids);
        tw_seq_free(seq);
        tw_model_free(m);
        tw_pool_destroy(pool);
        return 1;
    }
    make_prompt(ids, LONG_PROMPT, vocab, 7);
    char extra[512];
    snprintf(extra, sizeof extra,
             "\"threads\":%u,\"chunk\":%u,\"params\":%llu,\"weight_type\":\"%s\","
             "\"bytes_per_token\":%llu,\"load_s\":%.3f,\"huge_pages\":%s",
             a->threads, a->chunk, (unsigned long long)info->n_params,
             tw_type_name(info->weight_type), (unsigned long long)bpt, load_s,
             info->huge_pages ? "true" : "false");

    /* warm-up: fault the weights in and grow every scratch buffer */
    run_prefill(m, pool, seq, ids, 64, logits, 1);
    run_decode(m, pool, seq, ids, 8, 4, logits, vocab);

    static const size_t prefill_n[] = {128, 512, 2048};
    double pf[3] = {0};
    for (size_t k = 0; k < 3; k++) {
        if (a->quick && prefill_n[k] > 512)
            continue;
        pf[k] = run_prefill(m, pool, seq, ids, prefill_n[k], logits, a->quick ? 1 : 2);
        bench_progress("%s: prefill %zu: %.1f tok/s", a->label, prefill_n[k], pf[k]);
    }
    static const size_t decode_n[] = {128, 512};
    double dec[2] = {0}, bw_near[2] = {0};
    for (size_t k = 0; k < 2; k++) {
        if (a->quick && decode_n[k] > 128)
            continue;
        /* A neighbour's load moves the machine's bandwidth from minute to
         * minute: each decode is set against the better of two probes
         * taken just before and just after it (or --bandwidth). */
        double near = a->bandwidth > 0 ? a->bandwidth : bench_probe_bandwidth(a->threads, 0.3);
        dec[k] = run_decode(m, pool, seq, ids + 1024, 8, decode_n[k], logits, vocab);
        if (a->bandwidth <= 0) {
            double after = bench_probe_bandwidth(a->threads, 0.3);
            near = after > near ? after : near;
        }
        bw_near[k] = near > 0 ? near : bw;
        bench_progress("%s: decode %zu: %.1f tok/s, %.1f GB/s of weights (%.0f%% of the %.1f "
                       "GB/s read around it)",
                       a->label, decode_n[k], dec[k], dec[k] * (double)bpt / 1e9,
                       bw_near[k] > 0 ? 100.0 * dec[k] * (double)bpt / bw_near[k] : 0,
                       bw_near[k] / 1e9);
    }
    double paired_bw = 0, paired = 0;
    if (a->bandwidth <= 0 && bpt) {
        paired = decode_bandwidth_share(m, pool, seq, ids + 2048, a->threads, bpt, logits, vocab,
                                        &paired_bw);
        if (paired > 0)
            bench_progress("%s: decode in %d bursts of %d tokens between read probes: median "
                           "%.0f%% of the bandwidth read beside it (%.1f GB/s)",
                           a->label, PAIRED_ROUNDS, PAIRED_BURST, 100.0 * paired,
                           paired_bw / 1e9);
    }
    /* the probes are done: their buffer is not the model's memory */
    bench_probe_release();
    double split_gain = 0, fetch_gain = 0;
    fetch_on_bytes = tw_kernels_fetch_ahead();
    if (a->threads > 1) {
        split_gain = paired_gain(m, pool, seq, ids + 3072, logits, vocab, set_split);
        if (split_gain > 0)
            bench_progress("%s: decode with the decode split against without, %d alternated "
                           "pairs of %d-token bursts: median %.3fx",
                           a->label, PAIRED_ROUNDS, PAIRED_BURST, split_gain);
        if (fetch_on_bytes)
            fetch_gain = paired_gain(m, pool, seq, ids + 3200, logits, vocab, set_fetch);
        if (fetch_gain > 0)
            bench_progress("%s: decode with fetch ahead (%zu KiB) against without, %d "
                           "alternated pairs of %d-token bursts: median %.3fx",
                           a->label, fetch_on_bytes >> 10, PAIRED_ROUNDS, PAIRED_BURST, fetch_gain);
    }
    /* decode deep into a long context, where attention reads every earlier
     * position's K and V per token next to the weights */
    if (!a->quick) {
        double dec_long = run_decode(m, pool, seq, ids, LONG_PROMPT, 64, logits, vocab);
        bench_progress("%s: decode 64 after a %d-token prompt: %.1f tok/s (%.0f%% of decode "
                       "128 after 8)",
                       a->label, LONG_PROMPT, dec_long, dec[0] > 0 ? 100.0 * dec_long / dec[0] : 0);
        bench_row("model", "decode_64_after_long_prompt", a->label, dec_long, "tok/s", dec[0],
                  "decode_128", extra);
    }
    /* decode rows: against the bandwidth bound (bytes per token / bandwidth) */
    for (size_t k = 0; k < 2; k++) {
        if (dec[k] <= 0)
            continue;
        char name[32], dextra[640];
        snprintf(name, sizeof name, "decode_%zu", decode_n[k]);
        snprintf(dextra, sizeof dextra, "%s,\"bandwidth\":%.4g,\"bandwidth_at_start\":%.4g", extra,
                 bw_near[k], bw);
        double bound = bw_near[k] > 0 && bpt ? bw_near[k] / (double)bpt : 0;
        bench_row("model", name, a->label, dec[k], "tok/s", bound, "bandwidth bound", dextra);
    }
    if (split_gain > 0) {
        char sextra[640];
        snprintf(sextra, sizeof sextra, "%s,\"rounds\":%d,\"burst_tokens\":%d", extra,
                 PAIRED_ROUNDS, PAIRED_BURST);
        bench_row("model", "decode_split_gain", a->label, split_gain, "ratio", 0, NULL, sextra);
    }
    if (fetch_gain > 0) {
        char fextra[640];
        snprintf(fextra, sizeof fextra, "%s,\"rounds\":%d,\"burst_tokens\":%d,\"bytes\":%zu", extra,
                 PAIRED_ROUNDS, PAIRED_BURST, fetch_on_bytes);
        bench_row("model", "fetch_ahead_gain", a->label, fetch_gain, "ratio", 0, NULL, fextra);
    }
    if (paired > 0) {
        char pextra[640];
        snprintf(pextra, sizeof pextra, "%s,\"rounds\":%d,\"burst_tokens\":%d,\"bandwidth\":%.4g",
                 extra, PAIRED_ROUNDS, PAIRED_BURST, paired_bw);
        bench_row("model", "decode_bandwidth_share", a->label, paired, "fraction", 0, NULL,
                  pextra);
    }
    /* prefill rows: against single-token decode (the batching gain) */
    for (size_t k = 0; k < 3; k++) {
        if (pf[k] <= 0)
            continue;
        char name[32];
        snprintf(name, sizeof name, "prefill_%zu", prefill_n[k]);
        bench_row("model", name, a->label, pf[k], "tok/s", dec[0], "decode_128", extra);
    }
    char mem[256];
    snprintf(mem, sizeof mem, "\"rss_before_load\":%llu,\"seq_fixed_bytes\":%.0f",
             (unsigned long long)rss0, fixed);
    bench_row("memory", "rss_after_load", a->label, (double)bench_rss_bytes(), "B",
              (double)bpt, "weight bytes", mem);
    bench_row("memory", "kv_state_bytes_per_token", a->label, kv_per_tok, "B/token", 0, NULL,
              mem);
    bench_row("memory", "seq_fixed_state_bytes", a->label, fixed > 0 ? fixed : 0, "B", 0, NULL,
              mem);
    res->decode128 = dec[0];
    free(logits);
    free(ids);
    tw_seq_free(seq);
    tw_model_free(m);
    tw_pool_destroy(pool);
    return 0;
}

/* ---- engine API ---------------------------------------------------------- */

typedef struct stream {
    double submit, first, end;
    uint32_t tokens;
    tw_status error;
} stream;

typedef struct run_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t done;
    stream *streams;
} run_state;

typedef struct cb_ctx {
    run_state *rs;
    size_t index;
} cb_ctx;

static void on_chunk(void *user, const tw_gen_chunk *c)
{
    cb_ctx *cx = user;
    stream *s = &cx->rs->streams[cx->index];
    double now = bench_now();
    if (c->n_token_ids && s->first == 0)
        s->first = now;
    s->tokens += (uint32_t)c->n_token_ids;
    if (c->final) {
        s->end = now;
        s->error = c->error;
        pthread_mutex_lock(&cx->rs->mu);
        cx->rs->done++;
        pthread_cond_signal(&cx->rs->cv);
        pthread_mutex_unlock(&cx->rs->mu);
    }
}

/* Submits n_streams requests at once (distinct prompts of n_prompt tokens,
 * greedy, max_tokens each) and waits for all. */
static int engine_run(tw_engine *e, uint32_t vocab, size_t n_streams, size_t n_prompt,
                      uint32_t max_tokens, stream *out)
{
    run_state rs = {.streams = out};
    pthread_mutex_init(&rs.mu, NULL);
    pthread_cond_init(&rs.cv, NULL);
    cb_ctx *cx = calloc(n_streams, sizeof *cx);
    uint32_t *ids = malloc(n_prompt * sizeof *ids);
    if (!cx || !ids) {
        free(cx);
        free(ids);
        return 1;
    }
    memset(out, 0, n_streams * sizeof *out);
    size_t submitted = 0;
    for (size_t i = 0; i < n_streams; i++) {
        make_prompt(ids, n_prompt, vocab, 1000 + i);
        tw_gen_request r;
        tw_gen_request_init(&r);
        r.prompt_kind = TW_PROMPT_TOKENS;
        r.prompt_ids = ids;
        r.n_prompt_ids = n_prompt;
        r.sampling.temperature = 0;
        r.stop.max_tokens = max_tokens;
        r.stop.ignore_eos = true;
        /* plain decoding: the engine's default (auto) would speculate for a
         * request running alone but not in company, and a random model's
         * looping output is easy to look up, which would fold speculation
         * into the one-stream baseline of the batching ratios */
        r.speculative.mode = TW_SPEC_OFF;
        cx[i].rs = &rs;
        cx[i].index = i;
        tw_gen_callbacks cb = {on_chunk};
        uint64_t id;
        tw_err err;
        out[i].submit = bench_now();
        if (tw_engine_submit(e, &r, &cb, &cx[i], &id, &err) != TW_OK) {
            bench_progress("submit: %s", err.msg);
            break;
        }
        submitted++;
    }
    pthread_mutex_lock(&rs.mu);
    while (rs.done < submitted)
        pthread_cond_wait(&rs.cv, &rs.mu);
    pthread_mutex_unlock(&rs.mu);
    pthread_mutex_destroy(&rs.mu);
    pthread_cond_destroy(&rs.cv);
    free(cx);
    free(ids);
    return submitted == n_streams ? 0 : 1;
}

/* Tokens per second over a whole run: every stream's tokens over the time
 * from the first submit to the last end. */
static double batch_aggregate(const stream *st, size_t n)
{
    double last_end = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (st[i].end > last_end)
            last_end = st[i].end;
        total += st[i].tokens;
    }
    return last_end > st[0].submit ? (double)total / (last_end - st[0].submit) : 0;
}

static int bench_engine_api(const args *a, const model_results *mr)
{
    tw_err err;
    tw_engine_opts eo;
    tw_engine_opts_init(&eo);
    eo.threads = a->threads;
    eo.max_batch = a->max_batch;
    eo.prefill_chunk = a->chunk;
    eo.max_queue = 256;
    eo.kv_type = a->kv_type;
    tw_engine *e = NULL;
    if (tw_engine_create(&eo, &e, &err) != TW_OK) {
        bench_progress("engine: %s", err.msg);
        return 1;
    }
    tw_load_opts lo;
    tw_load_opts_init(&lo);
    lo.max_context = 512;
    tw_engine_model_info info;
    if (tw_engine_load_model(e, a->model, "bench", &lo, &info, &err) != TW_OK) {
        bench_progress("engine load: %s", err.msg);
        tw_engine_destroy(e);
        return 1;
    }
    uint32_t vocab = info.vocab_size;
    stream *st = calloc(3 * 64, sizeof *st);
    if (!st) {
        tw_engine_destroy(e);
        return 1;
    }
    char extra[512];
    /* warm-up */
    engine_run(e, vocab, 1, 16, 4, st);

    /* TTFT for a 128-token prompt, against the model API's prefill time */
    double ttft[5];
    int n_ttft = a->quick ? 3 : 5;
    for (int i = 0; i < n_ttft; i++) {
        engine_run(e, vocab, 1, 128, 1, st);
        ttft[i] = st[0].first - st[0].submit;
    }
    double ttft_med = bench_percentile(ttft, (size_t)n_ttft, 50);
    snprintf(extra, sizeof extra, "\"prompt_tokens\":128,\"runs\":%d", n_ttft);
    bench_row("engine", "ttft_128", a->label, ttft_med * 1e3, "ms", 0, NULL, extra);
    bench_progress("%s: engine TTFT (128-token prompt): %.1f ms", a->label, ttft_med * 1e3);

    /* single-stream decode through the scheduler, against the model API */
    engine_run(e, vocab, 1, 8, 128, st);
    double one = st[0].tokens > 1 ? (st[0].tokens - 1) / (st[0].end - st[0].first) : 0;
    bench_row("engine", "decode_128", a->label, one, "tok/s", mr->decode128, "model API decode",
              "\"streams\":1");
    bench_progress("%s: engine decode 128: %.1f tok/s (model API %.1f)", a->label, one,
                   mr->decode128);

    /* continuous batching */
    static const size_t conc[] = {1, 4, 16, 64};
    uint32_t gen = a->quick ? 32 : 128;
    double agg1 = 0;
    stream one_st[1];
    for (size_t k = 0; k < 4; k++) {
        size_t n = conc[k];
        /* A neighbour on a shared machine moves the memory-bound one-stream
         * rate by 20% and more between minutes, and the ratios hinge on it:
         * every run of n > 1 streams is paired with a one-stream run just
         * before it, and the row reports the pair with the median ratio.
         * Runs up to 16 streams go three times. */
        size_t reps = n <= 16 ? 3 : 1, ok = 0;
        double aggs[3], base[3] = {0}, key[3];
        for (size_t r = 0; r < reps; r++) {
            if (n > 1) {
                if (engine_run(e, vocab, 1, 16, gen, one_st) != 0)
                    break;
                base[r] = batch_aggregate(one_st, 1);
            }
            if (engine_run(e, vocab, n, 16, gen, st + 64 * r) != 0)
                break;
            aggs[r] = batch_aggregate(st + 64 * r, n);
            key[r] = n > 1 && base[r] > 0 ? aggs[r] / base[r] : aggs[r];
            ok++;
        }
        if (ok < reps)
            continue;
        size_t med = 0;
        if (reps == 3)
            med = (key[0] <= key[1]) == (key[1] <= key[2])   ? 1
                  : (key[1] <= key[0]) == (key[0] <= key[2]) ? 0
                                                             : 2;
        const stream *sm = st + 64 * med;
        double agg = aggs[med];
        double lat[64], ttf[64], itl[64];
        for (size_t i = 0; i < n; i++) {
            const stream *si = &sm[i];
            lat[i] = (si->end - si->submit) * 1e3;
            ttf[i] = (si->first - si->submit) * 1e3;
            itl[i] = si->tokens > 1 ? (si->end - si->first) * 1e3 / (si->tokens - 1) : 0;
        }
        if (n == 1)
            agg1 = agg;
        const double pair1 = n > 1 ? base[med] : 0;
        char pairs[96] = "";
        for (size_t r = 0; n > 1 && r < reps; r++)
            snprintf(pairs + strlen(pairs), sizeof pairs - strlen(pairs), "%s%.3f", r ? "," : "",
                     key[r]);
        snprintf(extra, sizeof extra,
                 "\"streams\":%zu,\"tokens_per_stream\":%u,\"max_batch\":%u,"
                 "\"pair_ratios\":[%s],\"median_one_stream\":%.3f,"
                 "\"latency_ms_p50\":%.2f,\"latency_ms_p90\":%.2f,\"latency_ms_p99\":%.2f,"
                 "\"ttft_ms_p50\":%.2f,\"ttft_ms_p99\":%.2f,\"itl_ms_p50\":%.3f,"
                 "\"itl_ms_p99\":%.3f",
                 n, gen, a->max_batch, pairs, agg1, bench_percentile(lat, n, 50),
                 bench_percentile(lat, n, 90),
                 bench_percentile(lat, n, 99), bench_percentile(ttf, n, 50),
                 bench_percentile(ttf, n, 99), bench_percentile(itl, n, 50),
                 bench_percentile(itl, n, 99));
        char name[32];
        snprintf(name, sizeof name, "concurrent_%zu", n);
        bench_row("batching", name, a->label, agg, "tok/s", pair1, "1 stream just before", extra);
        char vs[80];
        if (n == 1)
            snprintf(vs, sizeof vs, "the median of 3 runs");
        else
            snprintf(vs, sizeof vs, "%.2fx the one stream run just before it, %s",
                     pair1 > 0 ? agg / pair1 : 0, reps > 1 ? "median of 3 pairs" : "one pair");
        bench_progress("%s: %zu streams x %u tokens: %.1f tok/s aggregate (%s), latency p50 %.0f "
                       "ms p99 %.0f ms",
                       a->label, n, gen, agg, vs, bench_percentile(lat, n, 50),
                       bench_percentile(lat, n, 99));
    }
    free(st);
    tw_engine_destroy(e);
    return 0;
}

#define PROG "tw-bench-engine"

int main(int argc, char **argv)
{
    bench_pick_blas("tw-bench-engine", argv);
    tw_hw_info hw;
    tw_err err;
    tw_hw_detect(&hw, &err);
    tw_hw_choice ch;
    tw_hw_choose(&hw, &ch);
    /* K/V as tokenwired stores it by default */
    args a = {.threads = ch.threads,
              .chunk = 512,
              .max_batch = 64,
              .prefetch = "auto",
              .f16_prefill = "auto",
              .kv_type = TW_KV_F16};
    tw_kernels_set_fetch_ahead((size_t)ch.fetch_ahead);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "--quick") || !strcmp(s, "--no-engine")) {
            a.quick |= !strcmp(s, "--quick");
            a.skip_engine |= !strcmp(s, "--no-engine");
            continue;
        }
        /* the others take a value */
        const char *v = i + 1 < argc ? argv[++i] : NULL;
        bool ok = true;
        size_t n = 0;
        if (!strcmp(s, "--model")) {
            ok = (a.model = bench_arg_value(PROG, s, v)) != NULL;
        } else if (!strcmp(s, "--label")) {
            ok = (a.label = bench_arg_value(PROG, s, v)) != NULL;
        } else if (!strcmp(s, "--threads") && v && !strcmp(v, "auto")) {
            a.threads = ch.threads;
        } else if (!strcmp(s, "--threads")) {
            ok = bench_arg_size(PROG, s, v, 1, 4096, &n);
            a.threads = ok ? (uint32_t)n : a.threads;
        } else if (!strcmp(s, "--chunk")) {
            ok = bench_arg_size(PROG, s, v, 1, 4096, &n);
            a.chunk = ok ? (uint32_t)n : a.chunk;
        } else if (!strcmp(s, "--max-batch")) {
            ok = bench_arg_size(PROG, s, v, 1, 4096, &n);
            a.max_batch = ok ? (uint32_t)n : a.max_batch;
        } else if (!strcmp(s, "--bandwidth")) {
            double gbps = 0;
            ok = bench_arg_positive(PROG, s, v, 1e5, &gbps);
            a.bandwidth = gbps * 1e9;
        } else if (!strcmp(s, "--kv-type")) {
            ok = bench_arg_value(PROG, s, v) && (!strcmp(v, "f32") || !strcmp(v, "f16"));
            if (ok)
                a.kv_type = !strcmp(v, "f32") ? TW_KV_F32 : TW_KV_F16;
            else if (v)
                fprintf(stderr, PROG ": --kv-type must be f16 or f32, not '%s'\n", v);
        } else if (!strcmp(s, "--decode-prefetch")) {
            ok = (a.prefetch = bench_arg_value(PROG, s, v)) != NULL;
        } else if (!strcmp(s, "--f16-prefill")) {
            ok = (a.f16_prefill = bench_arg_value(PROG, s, v)) != NULL;
        } else if (!strcmp(s, "--isa")) {
            /* Measure a lower kernel level than the CPU offers, e.g. the AVX2
             * paths that machines without AVX-512 run. */
            ok = bench_force_isa(PROG, v);
        } else {
            bench_arg_unknown(PROG, s);
            ok = false;
        }
        if (!ok) {
            usage(stderr);
            return 2;
        }
    }
    if (!a.model) {
        fprintf(stderr, PROG ": --model is required\n");
        usage(stderr);
        return 2;
    }
    if (!a.label)
        a.label = a.model;
    if (bench_decode_prefetch(a.prefetch, a.threads) != 0 ||
        bench_f16_prefill(a.f16_prefill, a.threads) != 0) {
        usage(stderr);
        return 2;
    }
    double bw = a.bandwidth > 0 ? a.bandwidth : bench_machine_row(a.threads, a.quick ? 1.0 : 2.0);
    model_results mr = {0};
    if (bench_model_api(&a, bw, &mr) != 0)
        return 1;
    if (!a.skip_engine && bench_engine_api(&a, &mr) != 0)
        return 1;
    return 0;
}
