/* tw-bench-rpc: what the wire costs. Against a running tokenwired: the
 * Health round trip; each streamed token's delivery time, from the moment
 * the daemon handed its chunk over (the chunk's emitted_unix_us, the same
 * host's clock) to the client's callback, so it is measured inside the one
 * run; a streamed generation's rate beside the daemon's own decode rate of
 * that call and beside the in-process engine API (loaded here from the
 * same file with the same thread count and kernels (--isa, as the daemon
 * was given), run after it while the daemon is idle); concurrent streams
 * end to end. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "tokenwire/client.h"
#include "tw/engine.h"

#define MAX_TIMED 1024

typedef struct gen_result {
    double start, first, end;
    uint32_t tokens, chunks;
    tw_status st;
    /* streamed: per token, the µs from its chunk's hand-over to its arrival */
    double delivery_us[MAX_TIMED];
    uint32_t n_delivery, unstamped;
    uint64_t daemon_decode_us; /* the final chunk's usage */
    uint32_t daemon_tokens;
} gen_result;

static double unix_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int on_chunk(void *user, const Tokenwire__V1__StreamChunk *c)
{
    gen_result *r = user;
    double arrived = unix_us();
    if (c->n_token_ids && r->first == 0)
        r->first = bench_now();
    for (size_t i = 0; i < c->n_token_ids; i++) {
        if (!c->has_emitted_unix_us)
            r->unstamped++;
        else if (r->n_delivery < MAX_TIMED)
            r->delivery_us[r->n_delivery++] = arrived - (double)c->emitted_unix_us;
    }
    r->tokens += (uint32_t)c->n_token_ids;
    r->chunks++;
    if (c->final && c->usage && c->usage->has_decode_us) {
        r->daemon_decode_us = c->usage->decode_us;
        r->daemon_tokens = c->usage->completion_tokens;
    }
    return 0;
}

static void prompt_ids(uint32_t *ids, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        ids[i] = 256 + (uint32_t)((seed * 7919 + i * 104729) % 20000);
}

static void rpc_generate(tw_client *c, uint32_t max_tokens, uint64_t seed, gen_result *r)
{
    uint32_t ids[16];
    prompt_ids(ids, 16, seed);
    Tokenwire__V1__TokenIds tid = TOKENWIRE__V1__TOKEN_IDS__INIT;
    tid.n_ids = 16;
    tid.ids = ids;
    Tokenwire__V1__SamplingParams sp = TOKENWIRE__V1__SAMPLING_PARAMS__INIT;
    sp.has_temperature = 1;
    sp.temperature = 0;
    Tokenwire__V1__StopRules stop = TOKENWIRE__V1__STOP_RULES__INIT;
    stop.has_max_tokens = 1;
    stop.max_tokens = max_tokens;
    stop.has_ignore_eos = 1;
    stop.ignore_eos = 1;
    Tokenwire__V1__GenerateRequest g = TOKENWIRE__V1__GENERATE_REQUEST__INIT;
    g.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TOKEN_IDS;
    g.token_ids = &tid;
    g.sampling = &sp;
    g.stop = &stop;
    g.has_stream = 1;
    g.stream = 1;
    memset(r, 0, sizeof *r);
    tw_err err;
    r->start = bench_now();
    r->st = tw_client_generate_stream(c, &g, on_chunk, r, NULL, &err);
    r->end = bench_now();
    if (r->st != TW_OK)
        bench_progress("stream failed: %s", err.msg);
}

typedef struct eng_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    gen_result r;
} eng_wait;

static void eng_chunk(void *user, const tw_gen_chunk *c)
{
    eng_wait *w = user;
    if (c->n_token_ids && w->r.first == 0)
        w->r.first = bench_now();
    w->r.tokens += (uint32_t)c->n_token_ids;
    w->r.chunks++;
    if (c->final) {
        w->r.end = bench_now();
        pthread_mutex_lock(&w->mu);
        w->done = true;
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
}

static int engine_generate(tw_engine *e, uint32_t max_tokens, uint64_t seed, gen_result *out)
{
    uint32_t ids[16];
    prompt_ids(ids, 16, seed);
    tw_gen_request r;
    tw_gen_request_init(&r);
    r.prompt_kind = TW_PROMPT_TOKENS;
    r.prompt_ids = ids;
    r.n_prompt_ids = 16;
    r.sampling.temperature = 0;
    r.stop.max_tokens = max_tokens;
    r.stop.ignore_eos = true;
    eng_wait w = {.done = false};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    tw_gen_callbacks cb = {eng_chunk};
    uint64_t id;
    tw_err err;
    w.r.start = bench_now();
    if (tw_engine_submit(e, &r, &cb, &w, &id, &err) != TW_OK) {
        bench_progress("engine submit: %s", err.msg);
        return 1;
    }
    pthread_mutex_lock(&w.mu);
    while (!w.done)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    *out = w.r;
    return 0;
}

typedef struct conc_arg {
    tw_client *c;
    uint32_t max_tokens;
    uint64_t seed;
    gen_result r;
} conc_arg;

static void *conc_run(void *p)
{
    conc_arg *a = p;
    rpc_generate(a->c, a->max_tokens, a->seed, &a->r);
    return NULL;
}

#define PROG "tw-bench-rpc"

int main(int argc, char **argv)
{
    const char *rpc = TW_CLIENT_DEFAULT_RPC_URL, *pub = TW_CLIENT_DEFAULT_PUB_URL;
    bench_pick_blas("tw-bench-rpc", argv);
    const char *model = NULL, *label = "model";
    size_t threads = 0;
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--quick")) {
            quick = true;
            continue;
        }
        /* the others take a value */
        const char *v = i + 1 < argc ? argv[++i] : NULL;
        bool ok = true;
        if (!strcmp(a, "--rpc"))
            ok = (rpc = bench_arg_value(PROG, a, v)) != NULL;
        else if (!strcmp(a, "--pub"))
            ok = (pub = bench_arg_value(PROG, a, v)) != NULL;
        else if (!strcmp(a, "--model"))
            ok = (model = bench_arg_value(PROG, a, v)) != NULL;
        else if (!strcmp(a, "--label"))
            ok = (label = bench_arg_value(PROG, a, v)) != NULL;
        else if (!strcmp(a, "--threads") && v && !strcmp(v, "auto"))
            threads = 0;
        else if (!strcmp(a, "--threads"))
            ok = bench_arg_size(PROG, a, v, 1, 1024, &threads);
        else if (!strcmp(a, "--isa"))
            ok = bench_force_isa(PROG, v);
        else {
            bench_arg_unknown(PROG, a);
            ok = false;
        }
        if (!ok) {
            fprintf(stderr, "usage: tw-bench-rpc [--model FILE] [--rpc URL] [--pub URL] "
                            "[--label NAME] [--threads N|auto]\n"
                            "                    [--isa scalar|avx2|avx2vnni|avx512] [--quick]\n");
            return 2;
        }
    }
    tw_client_opts o;
    tw_client_opts_init(&o);
    o.rpc_url = rpc;
    o.pub_url = pub;
    tw_client *c = NULL;
    tw_err err;
    /* a daemon that is not there is said at once, not after a long call's wait */
    o.timeout_ms = 10000;
    Tokenwire__V1__Reply *hello = NULL;
    tw_status reach = tw_client_open(&o, &c, &err);
    if (reach == TW_OK)
        reach = tw_client_health(c, NULL, &hello, &err);
    tw_wire_free_reply(hello);
    tw_client_close(c);
    c = NULL;
    if (reach != TW_OK) {
        fprintf(stderr, "tw-bench-rpc: tokenwired at %s: %s\n", rpc, err.msg);
        return 1;
    }
    o.timeout_ms = 120000;
    if (tw_client_open(&o, &c, &err) != TW_OK) {
        fprintf(stderr, "tw-bench-rpc: %s\n", err.msg);
        return 1;
    }
    /* Health round trips */
    size_t n_health = quick ? 200 : 1000;
    double *rt = malloc(n_health * sizeof *rt);
    if (!rt)
        return 1;
    for (size_t i = 0; i < n_health + 20; i++) {
        Tokenwire__V1__Reply *rep = NULL;
        double t0 = bench_now();
        tw_status st = tw_client_health(c, NULL, &rep, &err);
        double dt = bench_now() - t0;
        tw_wire_free_reply(rep);
        if (st != TW_OK) {
            fprintf(stderr, "tw-bench-rpc: Health: %s\n", err.msg);
            return 1;
        }
        if (i >= 20) /* the first calls also set up connections */
            rt[i - 20] = dt * 1e6;
    }
    char extra[512];
    double p50 = bench_percentile(rt, n_health, 50), p99 = bench_percentile(rt, n_health, 99);
    snprintf(extra, sizeof extra, "\"calls\":%zu,\"p50_us\":%.1f,\"p99_us\":%.1f", n_health, p50,
             p99);
    bench_row("rpc", "health_roundtrip", label, p50, "us", 0, NULL, extra);
    bench_progress("rpc: Health round trip p50 %.1f us, p99 %.1f us", p50, p99);
    free(rt);

    /* streamed generation: delivery in the run, rate beside the engine's */
    uint32_t gen = 128;
    int reps = quick ? 2 : 4;
    static gen_result best_rpc, r;
    rpc_generate(c, 8, 1, &r); /* warm-up */
    double best_rpc_t = 1e30;
    /* every run's tokens count towards the delivery percentiles */
    size_t n_all = 0;
    double *all = malloc((size_t)reps * MAX_TIMED * sizeof *all);
    uint32_t unstamped = 0;
    if (!all)
        return 1;
    for (int i = 0; i < reps; i++) {
        rpc_generate(c, gen, 2, &r);
        if (r.st != TW_OK)
            continue;
        memcpy(all + n_all, r.delivery_us, r.n_delivery * sizeof *all);
        n_all += r.n_delivery;
        unstamped += r.unstamped;
        if (r.end - r.start < best_rpc_t) {
            best_rpc_t = r.end - r.start;
            best_rpc = r;
        }
    }
    double best_eng_t = 1e30;
    static gen_result best_eng;
    if (model) {
        tw_engine_opts eo;
        tw_engine_opts_init(&eo);
        eo.threads = (uint32_t)threads;
        tw_engine *e = NULL;
        tw_load_opts lo;
        tw_load_opts_init(&lo);
        lo.max_context = 512;
        if (tw_engine_create(&eo, &e, &err) == TW_OK &&
            tw_engine_load_model(e, model, "bench", &lo, NULL, &err) == TW_OK) {
            engine_generate(e, 8, 1, &r);
            for (int i = 0; i < reps; i++) {
                if (engine_generate(e, gen, 2, &r) == 0 && r.end - r.start < best_eng_t) {
                    best_eng_t = r.end - r.start;
                    best_eng = r;
                }
            }
        } else {
            bench_progress("in-process engine: %s", err.msg);
        }
        tw_engine_destroy(e);
    }
    if (unstamped)
        bench_progress("rpc: %u streamed tokens came without emitted_unix_us (an older "
                       "tokenwired?); they are left out of the delivery time",
                       unstamped);
    if (best_rpc.tokens) {
        double rpc_tps = best_rpc.tokens / best_rpc_t;
        double eng_tps = best_eng.tokens ? best_eng.tokens / best_eng_t : 0;
        double daemon_tps = best_rpc.daemon_decode_us
                                ? best_rpc.daemon_tokens * 1e6 / (double)best_rpc.daemon_decode_us
                                : 0;
        snprintf(extra, sizeof extra,
                 "\"tokens\":%u,\"chunks\":%u,\"rpc_s\":%.4f,\"engine_s\":%.4f,"
                 "\"daemon_decode_tps\":%.2f,\"rpc_ttft_ms\":%.2f,\"engine_ttft_ms\":%.2f",
                 best_rpc.tokens, best_rpc.chunks, best_rpc_t, best_eng_t, daemon_tps,
                 (best_rpc.first - best_rpc.start) * 1e3,
                 best_eng.tokens ? (best_eng.first - best_eng.start) * 1e3 : 0);
        bench_row("rpc", "stream_128", label, rpc_tps, "tok/s", eng_tps, "engine API", extra);
        bench_progress("rpc: streamed 128 tokens %.1f tok/s; the daemon decoded them at "
                       "%.1f tok/s; the engine API alone %.1f tok/s (%u chunks)",
                       rpc_tps, daemon_tps, eng_tps, best_rpc.chunks);
    }
    if (n_all) {
        double d50 = bench_percentile(all, n_all, 50), d99 = bench_percentile(all, n_all, 99);
        double dmax = bench_percentile(all, n_all, 100);
        snprintf(extra, sizeof extra,
                 "\"tokens\":%zu,\"runs\":%d,\"p50_us\":%.1f,\"p99_us\":%.1f,"
                 "\"max_us\":%.1f,\"clock\":\"emitted_unix_us against this host's "
                 "CLOCK_REALTIME\"",
                 n_all, reps, d50, d99, dmax);
        bench_row("rpc", "stream_overhead_per_token", label, d50, "us", 0, NULL, extra);
        bench_progress("rpc: a streamed token's delivery, hand-over to callback: p50 %.1f us, "
                       "p99 %.1f us, max %.1f us (%zu tokens)",
                       d50, d99, dmax, n_all);
    }
    free(all);

    /* concurrent streams end to end */
    static const size_t conc[] = {1, 16};
    double agg1 = 0;
    for (size_t k = 0; k < 2; k++) {
        size_t n = conc[k];
        conc_arg args[16];
        pthread_t tid[16];
        double t0 = bench_now();
        for (size_t i = 0; i < n; i++) {
            args[i] = (conc_arg){.c = c, .max_tokens = quick ? 32 : 128, .seed = 100 + i};
            pthread_create(&tid[i], NULL, conc_run, &args[i]);
        }
        uint64_t total = 0;
        double lat[16];
        for (size_t i = 0; i < n; i++) {
            pthread_join(tid[i], NULL);
            total += args[i].r.tokens;
            lat[i] = (args[i].r.end - args[i].r.start) * 1e3;
        }
        double agg = (double)total / (bench_now() - t0);
        if (n == 1)
            agg1 = agg;
        snprintf(extra, sizeof extra, "\"streams\":%zu,\"latency_ms_p50\":%.1f,"
                                      "\"latency_ms_p99\":%.1f",
                 n, bench_percentile(lat, n, 50), bench_percentile(lat, n, 99));
        char name[32];
        snprintf(name, sizeof name, "rpc_concurrent_%zu", n);
        bench_row("rpc", name, label, agg, "tok/s", n > 1 ? agg1 : 0, "1 stream", extra);
        bench_progress("rpc: %zu concurrent streams: %.1f tok/s aggregate", n, agg);
    }
    tw_client_close(c);
    return 0;
}
