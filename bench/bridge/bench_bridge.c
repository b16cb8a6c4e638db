/* tw-bench-bridge: what the OpenAI bridge adds on top of the engine.
 *
 * Starts the real tokenwired and tokenwire-bridge on free loopback ports and
 * sends the same work down two paths: HTTP/JSON (libcurl) to the bridge, and
 * the binary protocol (libtokenwire) straight to the engine. The two paths
 * alternate call by call (ABBA order), so drift in the machine's load lands
 * on both alike, and the headline numbers are medians of the per-pair
 * differences.
 *
 *   non-streamed: /v1/completions (token-id prompt, max_tokens 1,
 *                 temperature 0) vs Generate; GET /health vs Health
 *   streamed:     T tokens (ignore_eos) as SSE vs tw_client_generate_stream;
 *                 added time per token = (bridge - direct) / T
 *
 * Prints a Markdown table and one JSON line on stdout, progress on stderr.
 * Run from the source root (the default model path is relative to it).
 */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "bridge_service.h"
#include "tokenwire/client.h"
#include "tw/hw.h"

#define TARGET_CALL_MS  1.0
#define TARGET_TOKEN_MS 0.2
#define PROMPT_TEXT     "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"

/* ---- HTTP through libcurl ------------------------------------------------ */

typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

static void buf_reserve(buf *b, size_t need)
{
    if (need <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
        bench_fatal("out of memory");
    b->p = p;
    b->cap = cap;
}

static size_t on_body(char *data, size_t size, size_t n, void *user)
{
    buf *b = user;
    size_t k = size * n;
    buf_reserve(b, b->len + k + 1);
    memcpy(b->p + b->len, data, k);
    b->len += k;
    b->p[b->len] = '\0';
    return k;
}

typedef struct http {
    CURL *curl;
    struct curl_slist *headers;
    char base[64];
    buf body;
} http;

static void http_init(http *h, const char *base)
{
    memset(h, 0, sizeof *h);
    h->curl = curl_easy_init();
    if (!h->curl)
        bench_fatal("curl_easy_init failed");
    snprintf(h->base, sizeof h->base, "%s", base);
    h->headers = curl_slist_append(NULL, "Content-Type: application/json");
    buf_reserve(&h->body, 1 << 16);
}

static void http_fini(http *h)
{
    curl_slist_free_all(h->headers);
    curl_easy_cleanup(h->curl);
    free(h->body.p);
}

/* One request on the reused handle (so keep-alive connections are reused,
 * as an SDK's connection pool would). Returns the HTTP status, 0 on a
 * transport error; the body is in h->body. */
static long http_do(http *h, const char *path, const char *post, curl_write_callback fn, void *user)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", h->base, path);
    CURL *c = h->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h->headers);
    h->body.len = 0;
    h->body.p[0] = '\0';
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, fn ? fn : on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, fn ? user : (void *)&h->body);
    if (post) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, post);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(post));
    }
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

/* ---- what is timed ------------------------------------------------------- */

typedef struct workload {
    uint32_t ids[64];
    size_t n_ids;
    char model[128];
    char completion_body[2048]; /* non-streamed /v1/completions */
    char stream_body[2048];     /* streamed */
    unsigned tokens;
    unsigned prompt_tokens; /* 0: the whole tokenized prompt */
} workload;

static void set_gen(const workload *w, Tokenwire__V1__GenerateRequest *g,
                    Tokenwire__V1__TokenIds *tid, Tokenwire__V1__SamplingParams *sp,
                    Tokenwire__V1__StopRules *stop, Tokenwire__V1__ThinkingOptions *th,
                    uint32_t max_tokens, bool ignore_eos)
{
    tokenwire__v1__token_ids__init(tid);
    tid->n_ids = w->n_ids;
    tid->ids = (uint32_t *)w->ids;
    tokenwire__v1__sampling_params__init(sp);
    sp->has_temperature = 1;
    sp->temperature = 0;
    tokenwire__v1__stop_rules__init(stop);
    stop->has_max_tokens = 1;
    stop->max_tokens = max_tokens;
    if (ignore_eos) {
        stop->has_ignore_eos = 1;
        stop->ignore_eos = 1;
    }
    /* What the bridge sets for a raw completion, so both ask the same. */
    tokenwire__v1__thinking_options__init(th);
    th->has_separate_reasoning = 1;
    th->separate_reasoning = 0;
    tokenwire__v1__generate_request__init(g);
    g->model = (char *)w->model;
    g->prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TOKEN_IDS;
    g->token_ids = tid;
    g->sampling = sp;
    g->stop = stop;
    g->thinking = th;
}

static double direct_generate(tw_client *c, const workload *w)
{
    Tokenwire__V1__GenerateRequest g;
    Tokenwire__V1__TokenIds tid;
    Tokenwire__V1__SamplingParams sp;
    Tokenwire__V1__StopRules stop;
    Tokenwire__V1__ThinkingOptions th;
    set_gen(w, &g, &tid, &sp, &stop, &th, 1, false);
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err = {{0}};
    double t0 = bench_now();
    tw_status st = tw_client_generate(c, &g, &rep, &err);
    double t1 = bench_now();
    if (st != TW_OK || rep->result_case != TOKENWIRE__V1__REPLY__RESULT_GENERATE ||
        rep->generate->n_choices != 1 || rep->generate->choices[0]->n_token_ids != 1)
        bench_fatal("direct Generate failed: %s", st != TW_OK ? err.msg : "unexpected reply");
    tw_wire_free_reply(rep);
    return t1 - t0;
}

static double direct_health(tw_client *c)
{
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err = {{0}};
    double t0 = bench_now();
    tw_status st = tw_client_health(c, NULL, &rep, &err);
    double t1 = bench_now();
    if (st != TW_OK || rep->result_case != TOKENWIRE__V1__REPLY__RESULT_HEALTH)
        bench_fatal("direct Health failed: %s", st != TW_OK ? err.msg : "unexpected reply");
    tw_wire_free_reply(rep);
    return t1 - t0;
}

static double bridge_generate(http *h, const workload *w)
{
    double t0 = bench_now();
    long status = http_do(h, "/v1/completions", w->completion_body, NULL, NULL);
    double t1 = bench_now();
    if (status != 200 || !strstr(h->body.p, "\"choices\""))
        bench_fatal("bridge /v1/completions: status %ld: %.400s", status, h->body.p);
    return t1 - t0;
}

static double bridge_health(http *h)
{
    double t0 = bench_now();
    long status = http_do(h, "/health", NULL, NULL, NULL);
    double t1 = bench_now();
    if (status != 200 || !strstr(h->body.p, "\"ok\""))
        bench_fatal("bridge /health: status %ld: %.400s", status, h->body.p);
    return t1 - t0;
}

/* One streamed generation: total time, time to the first token, tokens. */
typedef struct stream_run {
    double start, first, end;
    double connect, first_byte; /* bridge only: curl's offsets from start */
    unsigned tokens;
    bool error;
    buf pending; /* SSE bytes not yet split into events */
} stream_run;

static int direct_chunk(void *user, const Tokenwire__V1__StreamChunk *ch)
{
    stream_run *r = user;
    if (ch->n_token_ids && r->first == 0)
        r->first = bench_now();
    r->tokens += (unsigned)ch->n_token_ids;
    return 0;
}

static void direct_stream(tw_client *c, const workload *w, stream_run *r)
{
    Tokenwire__V1__GenerateRequest g;
    Tokenwire__V1__TokenIds tid;
    Tokenwire__V1__SamplingParams sp;
    Tokenwire__V1__StopRules stop;
    Tokenwire__V1__ThinkingOptions th;
    set_gen(w, &g, &tid, &sp, &stop, &th, w->tokens, true);
    r->first = 0;
    r->tokens = 0;
    tw_err err = {{0}};
    r->start = bench_now();
    tw_status st = tw_client_generate_stream(c, &g, direct_chunk, r, NULL, &err);
    r->end = bench_now();
    if (st != TW_OK)
        bench_fatal("direct stream failed: %s", err.msg);
}

/* Counts the token ids of one SSE event ("data: {...}"), as a client that
 * works in ids would read them. */
static void sse_event(stream_run *r, const char *ev, size_t len)
{
    if (len < 6 || memcmp(ev, "data: ", 6) != 0)
        return;
    ev += 6;
    len -= 6;
    if (len == 6 && memcmp(ev, "[DONE]", 6) == 0)
        return;
    json_t *j = json_loadb(ev, len, 0, NULL);
    if (!j || json_object_get(j, "error")) {
        r->error = true;
        json_decref(j);
        return;
    }
    json_t *choices = json_object_get(j, "choices");
    for (size_t i = 0; i < json_array_size(choices); i++) {
        size_t n = json_array_size(json_object_get(json_array_get(choices, i), "token_ids"));
        if (n && r->first == 0)
            r->first = bench_now();
        r->tokens += (unsigned)n;
    }
    json_decref(j);
}

static size_t on_sse(char *data, size_t size, size_t n, void *user)
{
    stream_run *r = user;
    size_t k = size * n;
    buf *b = &r->pending;
    buf_reserve(b, b->len + k + 1);
    memcpy(b->p + b->len, data, k);
    b->len += k;
    b->p[b->len] = '\0';
    size_t used = 0;
    for (;;) {
        char *end = strstr(b->p + used, "\n\n");
        if (!end)
            break;
        sse_event(r, b->p + used, (size_t)(end - (b->p + used)));
        used = (size_t)(end - b->p) + 2;
    }
    memmove(b->p, b->p + used, b->len - used + 1);
    b->len -= used;
    return k;
}

static void bridge_stream(http *h, const workload *w, stream_run *r)
{
    r->first = 0;
    r->tokens = 0;
    r->error = false;
    r->pending.len = 0;
    r->start = bench_now();
    long status = http_do(h, "/v1/completions", w->stream_body, on_sse, r);
    r->end = bench_now();
    curl_off_t connect_us = 0, first_byte_us = 0;
    curl_easy_getinfo(h->curl, CURLINFO_CONNECT_TIME_T, &connect_us);
    curl_easy_getinfo(h->curl, CURLINFO_STARTTRANSFER_TIME_T, &first_byte_us);
    r->connect = (double)connect_us * 1e-6;
    r->first_byte = (double)first_byte_us * 1e-6;
    if (status != 200 || r->error)
        bench_fatal("bridge stream: status %ld%s", status, r->error ? " (error event)" : "");
}

/* ---- setup --------------------------------------------------------------- */

static void wait_ready(service *svc, http *h, tw_client *c, workload *w)
{
    double until = bench_now() + 120;
    for (;;) {
        service_check_alive(svc);
        long status = http_do(h, "/v1/models", NULL, NULL, NULL);
        if (status == 200 && strstr(h->body.p, "\"ready\""))
            break;
        if (bench_now() > until)
            bench_fatal("the service was not ready within 120 s");
        usleep(100000);
    }
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err = {{0}};
    if (tw_client_list_models(c, NULL, &rep, &err) != TW_OK ||
        rep->result_case != TOKENWIRE__V1__REPLY__RESULT_LIST_MODELS ||
        rep->list_models->n_models < 1 || !rep->list_models->models[0]->name)
        bench_fatal("ListModels: %s", err.msg);
    snprintf(w->model, sizeof w->model, "%s", rep->list_models->models[0]->name);
    tw_wire_free_reply(rep);

    /* A real prompt of the model's own tokens. */
    Tokenwire__V1__TokenizeRequest tr = TOKENWIRE__V1__TOKENIZE_REQUEST__INIT;
    tr.model = w->model;
    tr.text = PROMPT_TEXT;
    if (tw_client_tokenize(c, &tr, &rep, &err) != TW_OK ||
        rep->result_case != TOKENWIRE__V1__REPLY__RESULT_TOKENIZE ||
        rep->tokenize->n_token_ids == 0)
        bench_fatal("Tokenize: %s", err.msg);
    w->n_ids = rep->tokenize->n_token_ids;
    if (w->n_ids > sizeof w->ids / sizeof w->ids[0])
        w->n_ids = sizeof w->ids / sizeof w->ids[0];
    if (w->prompt_tokens && w->n_ids > w->prompt_tokens)
        w->n_ids = w->prompt_tokens;
    memcpy(w->ids, rep->tokenize->token_ids, w->n_ids * sizeof w->ids[0]);
    tw_wire_free_reply(rep);

    json_t *ids = json_array();
    for (size_t i = 0; i < w->n_ids; i++)
        json_array_append_new(ids, json_integer(w->ids[i]));
    json_t *b = json_pack("{s:s, s:O, s:i, s:f}", "model", w->model, "prompt", ids, "max_tokens", 1,
                          "temperature", 0.0);
    char *text = json_dumps(b, JSON_COMPACT);
    snprintf(w->completion_body, sizeof w->completion_body, "%s", text);
    free(text);
    json_decref(b);
    b = json_pack("{s:s, s:O, s:i, s:f, s:b, s:b, s:b}", "model", w->model, "prompt", ids,
                  "max_tokens", (int)w->tokens, "temperature", 0.0, "stream", 1, "ignore_eos", 1,
                  "return_token_ids", 1);
    text = json_dumps(b, JSON_COMPACT);
    snprintf(w->stream_body, sizeof w->stream_body, "%s", text);
    free(text);
    json_decref(b);
    json_decref(ids);
}

/* ---- statistics and report ------------------------------------------------ */

typedef struct summary {
    double med, p90, p99;
} summary;

/* In milliseconds; v (seconds) is left sorted. */
static summary summarize(double *v, size_t n)
{
    summary s = {bench_percentile(v, n, 50) * 1e3, bench_percentile(v, n, 90) * 1e3,
                 bench_percentile(v, n, 99) * 1e3};
    return s;
}

/* A distribution-free 95% confidence interval for the median of v (sorted
 * by bench_percentile before): the order statistics n/2 -+ 1.96 sqrt(n)/2.
 * On a shared machine the engine's own time varies by milliseconds, so the
 * interval says whether a difference is measured or noise. */
static void median_ci(const double *sorted, size_t n, double *lo, double *hi)
{
    double half = 0.98 * sqrt((double)n);
    double a = floor((double)n / 2 - half), b = ceil((double)n / 2 + half);
    size_t i = a < 0 ? 0 : (size_t)a, j = b > (double)(n - 1) ? n - 1 : (size_t)b;
    *lo = sorted[i] * 1e3;
    *hi = sorted[j] * 1e3;
}

typedef struct pair_result {
    const char *name;
    summary direct, bridge;
    double diff_of_medians_ms, median_diff_ms; /* median of the per-pair differences */
    double ci_lo_ms, ci_hi_ms;                 /* its 95% confidence interval */
} pair_result;

typedef double (*direct_fn)(tw_client *, const workload *);
typedef double (*bridge_fn)(http *, const workload *);

static double direct_health_w(tw_client *c, const workload *w)
{
    (void)w;
    return direct_health(c);
}

static double bridge_health_w(http *h, const workload *w)
{
    (void)w;
    return bridge_health(h);
}

static pair_result measure_pairs(const char *name, unsigned n, tw_client *c, http *h,
                                 const workload *w, direct_fn dfn, bridge_fn bfn)
{
    double *d = calloc(n, sizeof *d), *b = calloc(n, sizeof *b), *diff = calloc(n, sizeof *diff);
    if (!d || !b || !diff)
        bench_fatal("out of memory");
    for (unsigned i = 0; i < 10; i++) {
        dfn(c, w);
        bfn(h, w);
    }
    for (unsigned i = 0; i < n; i++) {
        if (i % 2 == 0) {
            d[i] = dfn(c, w);
            b[i] = bfn(h, w);
        } else {
            b[i] = bfn(h, w);
            d[i] = dfn(c, w);
        }
        diff[i] = b[i] - d[i];
    }
    pair_result r = {.name = name};
    r.median_diff_ms = bench_percentile(diff, n, 50) * 1e3;
    median_ci(diff, n, &r.ci_lo_ms, &r.ci_hi_ms);
    r.direct = summarize(d, n);
    r.bridge = summarize(b, n);
    r.diff_of_medians_ms = r.bridge.med - r.direct.med;
    free(d);
    free(b);
    free(diff);
    return r;
}

typedef struct stream_result {
    summary direct, bridge;                /* total time */
    double direct_ttft_ms, bridge_ttft_ms; /* medians */
    unsigned tokens;                       /* streamed per generation (T or more) */
    double per_token_ms;                   /* median of (bridge - direct) / tokens */
    double per_token_ci_lo_ms, per_token_ci_hi_ms;
    double ttft_diff_ms;                            /* median of the per-pair TTFT differences */
    double bridge_connect_ms, bridge_first_byte_ms; /* medians, from curl */
} stream_result;

static stream_result measure_streams(unsigned reps, tw_client *c, http *h, const workload *w)
{
    double *d = calloc(reps, sizeof *d), *b = calloc(reps, sizeof *b);
    double *per = calloc(reps, sizeof *per), *dt = calloc(reps, sizeof *dt);
    double *bt = calloc(reps, sizeof *bt), *tdiff = calloc(reps, sizeof *tdiff);
    double *conn = calloc(reps, sizeof *conn), *fb = calloc(reps, sizeof *fb);
    if (!d || !b || !per || !dt || !bt || !tdiff || !conn || !fb)
        bench_fatal("out of memory");
    stream_run rd = {0}, rb = {0};
    unsigned n_tokens = 0;
    buf_reserve(&rb.pending, 1 << 16);
    for (unsigned i = 0; i < 2; i++) {
        direct_stream(c, w, &rd);
        bridge_stream(h, w, &rb);
    }
    for (unsigned i = 0; i < reps; i++) {
        if (i % 2 == 0) {
            direct_stream(c, w, &rd);
            bridge_stream(h, w, &rb);
        } else {
            bridge_stream(h, w, &rb);
            direct_stream(c, w, &rd);
        }
        /* max_tokens bounds answer tokens only: a model that thinks first
         * streams more, the same number on both paths (greedy), which is
         * what the time is divided by. */
        if (rd.tokens != rb.tokens || rd.tokens < w->tokens)
            bench_fatal("streams of %u (direct) and %u (bridge) tokens, wanted %u on both",
                        rd.tokens, rb.tokens, w->tokens);
        n_tokens = rd.tokens;
        d[i] = rd.end - rd.start;
        b[i] = rb.end - rb.start;
        dt[i] = rd.first - rd.start;
        bt[i] = rb.first - rb.start;
        per[i] = (b[i] - d[i]) / n_tokens;
        tdiff[i] = bt[i] - dt[i];
        conn[i] = rb.connect;
        fb[i] = rb.first_byte;
    }
    stream_result r;
    r.tokens = n_tokens;
    r.per_token_ms = bench_percentile(per, reps, 50) * 1e3;
    median_ci(per, reps, &r.per_token_ci_lo_ms, &r.per_token_ci_hi_ms);
    r.ttft_diff_ms = bench_percentile(tdiff, reps, 50) * 1e3;
    r.direct_ttft_ms = bench_percentile(dt, reps, 50) * 1e3;
    r.bridge_ttft_ms = bench_percentile(bt, reps, 50) * 1e3;
    r.bridge_connect_ms = bench_percentile(conn, reps, 50) * 1e3;
    r.bridge_first_byte_ms = bench_percentile(fb, reps, 50) * 1e3;
    r.direct = summarize(d, reps);
    r.bridge = summarize(b, reps);
    free(rb.pending.p);
    free(d);
    free(b);
    free(per);
    free(dt);
    free(bt);
    free(tdiff);
    free(conn);
    free(fb);
    return r;
}

static void read_loadavg(char *out, size_t cap)
{
    double a = 0, b = 0, c = 0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f || fscanf(f, "%lf %lf %lf", &a, &b, &c) != 3)
        a = b = c = -1;
    if (f)
        fclose(f);
    snprintf(out, cap, "[%.2f,%.2f,%.2f]", a, b, c);
}

static void json_escaped(FILE *f, const char *s)
{
    json_t *j = json_string(s);
    char *t = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    fputs(t ? t : "\"\"", f);
    free(t);
    json_decref(j);
}

static void print_pair_row(const pair_result *r)
{
    printf("| %s | %.3f / %.3f / %.3f | %.3f / %.3f / %.3f | %+.3f [%+.3f, %+.3f] | %+.3f | %s "
           "|\n",
           r->name, r->direct.med, r->direct.p90, r->direct.p99, r->bridge.med, r->bridge.p90,
           r->bridge.p99, r->median_diff_ms, r->ci_lo_ms, r->ci_hi_ms, r->diff_of_medians_ms,
           r->median_diff_ms <= TARGET_CALL_MS ? "met (<= 1 ms)" : "MISSED (> 1 ms)");
}

static void json_pair(const pair_result *r)
{
    printf("\"%s\":{\"direct_ms\":{\"median\":%.4f,\"p90\":%.4f,\"p99\":%.4f},"
           "\"bridge_ms\":{\"median\":%.4f,\"p90\":%.4f,\"p99\":%.4f},"
           "\"median_diff_ms\":%.4f,\"median_diff_ci95_ms\":[%.4f,%.4f],"
           "\"diff_of_medians_ms\":%.4f,\"target_met\":%s}",
           r->name, r->direct.med, r->direct.p90, r->direct.p99, r->bridge.med, r->bridge.p90,
           r->bridge.p99, r->median_diff_ms, r->ci_lo_ms, r->ci_hi_ms, r->diff_of_medians_ms,
           r->median_diff_ms <= TARGET_CALL_MS ? "true" : "false");
}

/* ---- main ---------------------------------------------------------------- */

static void usage(void)
{
    fputs("usage: tw-bench-bridge [options]   (run from the source root)\n"
          "  --model PATH     model to serve (models/tokenwire-coder-24m-q8_0.gguf)\n"
          "  --calls N        non-streamed calls per path and kind (200)\n"
          "  --reps N         streamed generations per path (20)\n"
          "  --tokens T       tokens per streamed generation (64)\n"
          "  --threads N      engine compute threads (1)\n"
          "  --prompt-tokens N  cut the prompt to its first N tokens (all: ~25)\n"
          "  --engine-bin P   tokenwired (default: beside this build)\n"
          "  --bridge-bin P   tokenwire-bridge (default: beside this build)\n"
          "  --bridge-arg A   pass A on to the bridge (repeatable), e.g. --bridge-arg --workers\n"
          "  --keep-logs      keep the daemons' logs, the bridge's access log included\n",
          stderr);
}

static unsigned parse_count(const char *flag, const char *v, unsigned lo, unsigned hi)
{
    char *end = NULL;
    errno = 0;
    unsigned long x = v ? strtoul(v, &end, 10) : 0;
    if (!v || errno || !end || *end || x < lo || x > hi) {
        fprintf(stderr, "tw-bench-bridge: %s wants a number in %u..%u\n", flag, lo, hi);
        exit(2);
    }
    return (unsigned)x;
}

/* The daemons of the build tree this program belongs to:
 * <build>/bench/bridge/tw-bench-bridge -> <build>/server/... */
static void default_bin(char *out, size_t cap, const char *rel)
{
    char self[1024];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        snprintf(out, cap, "%s", rel);
        return;
    }
    self[n] = '\0';
    char *dir = dirname(self); /* <build>/bench/bridge */
    snprintf(out, cap, "%s/../../%s", dir, rel);
}

int main(int argc, char **argv)
{
    static char engine_bin[1200], bridge_bin[1200];
    opts o = {.model = "models/tokenwire-coder-24m-q8_0.gguf",
              .calls = 200,
              .reps = 20,
              .tokens = 64,
              .threads = 1};
    default_bin(engine_bin, sizeof engine_bin, "server/engine/tokenwired");
    default_bin(bridge_bin, sizeof bridge_bin, "server/bridge/tokenwire-bridge");
    o.engine_bin = engine_bin;
    o.bridge_bin = bridge_bin;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--model") && v)
            o.model = argv[++i];
        else if (!strcmp(a, "--engine-bin") && v)
            o.engine_bin = argv[++i];
        else if (!strcmp(a, "--bridge-bin") && v)
            o.bridge_bin = argv[++i];
        else if (!strcmp(a, "--calls"))
            o.calls = parse_count(a, argv[++i < argc ? i : 0], 1, 1000000);
        else if (!strcmp(a, "--reps"))
            o.reps = parse_count(a, argv[++i < argc ? i : 0], 1, 100000);
        else if (!strcmp(a, "--tokens"))
            o.tokens = parse_count(a, argv[++i < argc ? i : 0], 1, 4096);
        else if (!strcmp(a, "--bridge-arg") && v) {
            if (o.n_bridge_args == MAX_BRIDGE_ARGS) {
                fprintf(stderr, "tw-bench-bridge: at most %d --bridge-arg\n", MAX_BRIDGE_ARGS);
                return 2;
            }
            o.bridge_args[o.n_bridge_args++] = argv[++i];
        } else if (!strcmp(a, "--keep-logs"))
            o.keep_logs = true;
        else if (!strcmp(a, "--prompt-tokens"))
            o.prompt_tokens = parse_count(a, argv[++i < argc ? i : 0], 1, 64);
        else if (!strcmp(a, "--threads"))
            o.threads = parse_count(a, argv[++i < argc ? i : 0], 1, 256);
        else {
            usage();
            return strcmp(a, "--help") ? 2 : 0;
        }
    }
    if (!bench_is_file(o.model)) {
        fprintf(stderr,
                "tw-bench-bridge: model %s not found (run from the source root or "
                "pass --model)\n",
                o.model);
        return 2;
    }
    if (!bench_is_file(o.engine_bin) || !bench_is_file(o.bridge_bin)) {
        fprintf(stderr, "tw-bench-bridge: %s or %s not built\n", o.engine_bin, o.bridge_bin);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);

    char cmd[2048] = "";
    for (int i = 0; i < argc; i++) {
        size_t used = strlen(cmd);
        snprintf(cmd + used, sizeof cmd - used, "%s%s", i ? " " : "", argv[i]);
    }
    tw_hw_info hw;
    tw_err err = {{0}};
    tw_hw_detect(&hw, &err);
    char load_before[64], load_after[64];
    read_loadavg(load_before, sizeof load_before);

    service svc;
    service_start(&svc, &o);
    http h;
    http_init(&h, svc.http_base);
    tw_client_opts co;
    tw_client_opts_init(&co);
    co.rpc_url = svc.rpc_url;
    co.pub_url = svc.pub_url;
    co.timeout_ms = 60000;
    tw_client *c = NULL;
    if (tw_client_open(&co, &c, &err) != TW_OK)
        bench_fatal("client: %s", err.msg);
    workload w = {.tokens = o.tokens, .prompt_tokens = o.prompt_tokens};
    bench_progress("waiting for the engine and the bridge");
    wait_ready(&svc, &h, c, &w);

    bench_progress("non-streamed completion: %u calls per path", o.calls);
    pair_result gen =
        measure_pairs("completion", o.calls, c, &h, &w, direct_generate, bridge_generate);
    bench_progress("health: %u calls per path", o.calls);
    pair_result health =
        measure_pairs("health", o.calls, c, &h, &w, direct_health_w, bridge_health_w);
    bench_progress("streamed: %u generations of %u tokens per path", o.reps, o.tokens);
    stream_result sr = measure_streams(o.reps, c, &h, &w);
    read_loadavg(load_after, sizeof load_after);

    tw_client_close(c);
    http_fini(&h);
    service_shutdown(&svc);
    curl_global_cleanup();

    bool stream_ok = sr.per_token_ms <= TARGET_TOKEN_MS;
    printf("\n## tokenwire-bridge overhead (%s, %u CPUs / %u cores; load %s -> %s)\n\n",
           hw.cpu_model, hw.cpus_online, hw.cores_physical, load_before, load_after);
    printf("`%s` — model %s, engine --threads %u\n\n", cmd, o.model, o.threads);
    printf("| non-streamed (N=%u) | direct ms med / p90 / p99 | bridge ms med / p90 / p99 "
           "| added ms: median of pairs [95%% CI] | added ms: diff of medians | target |\n",
           o.calls);
    printf("|---|---|---|---|---|---|\n");
    print_pair_row(&gen);
    print_pair_row(&health);
    printf("\n| streamed (max_tokens %u: %u tokens, %u reps) | direct total ms med / p90 / p99 | "
           "bridge total "
           "ms med / p90 / p99 | TTFT ms direct / bridge | added ms per token: median [95%% CI] "
           "| target |\n",
           o.tokens, sr.tokens, o.reps);
    printf("|---|---|---|---|---|---|\n");
    printf("| SSE vs tw_client_generate_stream | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | "
           "%.2f / %.2f | %+.4f [%+.4f, %+.4f] | %s |\n\n",
           sr.direct.med, sr.direct.p90, sr.direct.p99, sr.bridge.med, sr.bridge.p90, sr.bridge.p99,
           sr.direct_ttft_ms, sr.bridge_ttft_ms, sr.per_token_ms, sr.per_token_ci_lo_ms,
           sr.per_token_ci_hi_ms, stream_ok ? "met (<= 0.2 ms)" : "MISSED (> 0.2 ms)");

    printf("{\"bench\":\"bridge\",\"machine\":{\"cpu\":");
    json_escaped(stdout, hw.cpu_model);
    printf(",\"cpus_online\":%u,\"cores_physical\":%u,\"loadavg_before\":%s,"
           "\"loadavg_after\":%s},\"command\":",
           hw.cpus_online, hw.cores_physical, load_before, load_after);
    json_escaped(stdout, cmd);
    printf(",\"model\":");
    json_escaped(stdout, o.model);
    printf(",\"engine_threads\":%u,\"calls\":%u,", o.threads, o.calls);
    json_pair(&gen);
    putchar(',');
    json_pair(&health);
    printf(",\"stream\":{\"max_tokens\":%u,\"tokens\":%u,\"reps\":%u,"
           "\"direct_total_ms\":{\"median\":%.3f,\"p90\":%.3f,\"p99\":%.3f},"
           "\"bridge_total_ms\":{\"median\":%.3f,\"p90\":%.3f,\"p99\":%.3f},"
           "\"direct_ttft_ms\":%.3f,\"bridge_ttft_ms\":%.3f,\"ttft_diff_ms\":%.3f,"
           "\"bridge_connect_ms\":%.3f,\"bridge_first_byte_ms\":%.3f,"
           "\"added_ms_per_token\":%.4f,\"added_ms_per_token_ci95\":[%.4f,%.4f],"
           "\"target_met\":%s}}\n",
           o.tokens, sr.tokens, o.reps, sr.direct.med, sr.direct.p90, sr.direct.p99, sr.bridge.med,
           sr.bridge.p90, sr.bridge.p99, sr.direct_ttft_ms, sr.bridge_ttft_ms, sr.ttft_diff_ms,
           sr.bridge_connect_ms, sr.bridge_first_byte_ms, sr.per_token_ms, sr.per_token_ci_lo_ms,
           sr.per_token_ci_hi_ms, stream_ok ? "true" : "false");
    return 0;
}
