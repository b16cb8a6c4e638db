/* tw-bench-rpc: what the wire costs. Against a running tokenwired: the
 * Health round trip, and a streamed generation's time per token compared
 * with the same generation through the in-process engine API (loaded here
 * from the same file with the same thread count and kernels (--isa, as the
 * daemon was given), run while the daemon is idle), plus concurrent
 * streams end to end. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "tokenwire/client.h"
#include "tw/engine.h"

typedef struct gen_result {
    double start, first, end;
    uint32_t tokens, chunks;
    tw_status st;
} gen_result;

static int on_chunk(void *user, const Tokenwire__V1__StreamChunk *c)
{
    gen_result *r = user;
    if (c->n_token_ids && r->first == 0)
        r->first = bench_now();
    r->tokens += (uint32_t)c->n_token_ids;
    r->chunks++;
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

    /* streamed generation vs the engine API */
    uint32_t gen = 128;
    int reps = quick ? 2 : 4;
    gen_result best_rpc = {0}, r;
    rpc_generate(c, 8, 1, &r); /* warm-up */
    double best_rpc_t = 1e30;
    for (int i = 0; i < reps; i++) {
        rpc_generate(c, gen, 2, &r);
        if (r.st == TW_OK && r.end - r.start < best_rpc_t) {
            best_rpc_t = r.end - r.start;
            best_rpc = r;
        }
    }
    double best_eng_t = 1e30;
    gen_result best_eng = {0};
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
    if (best_rpc.tokens) {
        double rpc_tps = best_rpc.tokens / best_rpc_t;
        double eng_tps = best_eng.tokens ? best_eng.tokens / best_eng_t : 0;
        double overhead_us =
            best_eng.tokens ? (best_rpc_t - best_eng_t) * 1e6 / (double)best_rpc.tokens : 0;
        double per_chunk_us =
            best_eng.tokens ? (best_rpc_t - best_eng_t) * 1e6 / (double)best_rpc.chunks : 0;
        snprintf(extra, sizeof extra,
                 "\"tokens\":%u,\"chunks\":%u,\"rpc_s\":%.4f,\"engine_s\":%.4f,"
                 "\"overhead_us_per_token\":%.1f,\"overhead_us_per_chunk\":%.1f,"
                 "\"rpc_ttft_ms\":%.2f,\"engine_ttft_ms\":%.2f",
                 best_rpc.tokens, best_rpc.chunks, best_rpc_t, best_eng_t, overhead_us,
                 per_chunk_us, (best_rpc.first - best_rpc.start) * 1e3,
                 best_eng.tokens ? (best_eng.first - best_eng.start) * 1e3 : 0);
        bench_row("rpc", "stream_128", label, rpc_tps, "tok/s", eng_tps, "engine API", extra);
        bench_row("rpc", "stream_overhead_per_token", label, overhead_us, "us", 0, NULL, extra);
        bench_progress("rpc: streamed 128 tokens %.1f tok/s vs engine API %.1f tok/s: "
                       "%.1f us per token, %.1f us per chunk (%u chunks)",
                       rpc_tps, eng_tps, overhead_us, per_chunk_us, best_rpc.chunks);
    }

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
