#include "metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const int counted_codes[TW_BRIDGE_METRIC_CODES] = {200, 400, 401, 403, 404, 405,
                                                          413, 429, 500, 503, 504, 0};

static const char *const route_names[TW_BRIDGE_ROUTE_COUNT] = {
    "chat_completions", "completions", "models",   "model",      "models_pull",
    "health",           "metrics",     "tokenize", "detokenize", "responses",
    "responses_kept",   "embeddings",  "other",
};

/* Microseconds: a streamed token's delivery on one host takes tens to
 * hundreds of them, and milliseconds when the cores are busy decoding. */
static const uint64_t delivery_bounds[TW_BRIDGE_DELIVERY_BUCKETS] = {
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 100000, 1000000};

const char *tw_bridge_route_name(tw_bridge_route route)
{
    return (unsigned)route < TW_BRIDGE_ROUTE_COUNT ? route_names[route] : "other";
}

void tw_bridge_metrics_init(tw_bridge_metrics *m)
{
    for (int r = 0; r < TW_BRIDGE_ROUTE_COUNT; r++) {
        for (int c = 0; c < TW_BRIDGE_METRIC_CODES; c++)
            atomic_init(&m->requests[r][c], 0);
        atomic_init(&m->duration_us[r], 0);
    }
    atomic_init(&m->stream_events, 0);
    atomic_init(&m->streams_aborted, 0);
    atomic_init(&m->hangups_cancelled, 0);
    atomic_init(&m->rejected_busy, 0);
    atomic_init(&m->inflight, 0);
    atomic_init(&m->streams_active, 0);
    atomic_init(&m->responses_kept, 0);
    atomic_init(&m->responses_kept_bytes, 0);
    atomic_init(&m->responses_journal_errors, 0);
    atomic_init(&m->responses_journal_syncs, 0);
    for (int i = 0; i <= TW_BRIDGE_DELIVERY_BUCKETS; i++)
        atomic_init(&m->delivery[i], 0);
    atomic_init(&m->delivery_us_sum, 0);
}

void tw_bridge_metrics_delivery(tw_bridge_metrics *m, const Tokenwire__V1__StreamChunk *chunk)
{
    if (!chunk->has_emitted_unix_us)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const uint64_t now = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
    if (chunk->emitted_unix_us > now || now - chunk->emitted_unix_us > 3600000000u)
        return;
    const uint64_t us = now - chunk->emitted_unix_us;
    int b = 0;
    while (b < TW_BRIDGE_DELIVERY_BUCKETS && us > delivery_bounds[b])
        b++;
    atomic_fetch_add(&m->delivery[b], 1);
    atomic_fetch_add(&m->delivery_us_sum, us);
}

void tw_bridge_metrics_request(tw_bridge_metrics *m, tw_bridge_route route, int http_status,
                               uint64_t duration_us)
{
    if ((unsigned)route >= TW_BRIDGE_ROUTE_COUNT)
        route = TW_BRIDGE_ROUTE_OTHER;
    int slot = TW_BRIDGE_METRIC_CODES - 1;
    for (int c = 0; c < TW_BRIDGE_METRIC_CODES - 1; c++) {
        if (counted_codes[c] == http_status) {
            slot = c;
            break;
        }
    }
    atomic_fetch_add(&m->requests[route][slot], 1);
    atomic_fetch_add(&m->duration_us[route], duration_us);
}

/* A growing text buffer; `failed` sticks once memory runs out. */
typedef struct outbuf {
    char *p;
    size_t len, cap;
    bool failed;
} outbuf;

__attribute__((format(printf, 2, 3))) static void out(outbuf *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)n;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

static void metric_head(outbuf *b, const char *name, const char *type, const char *help)
{
    out(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void engine_stats(outbuf *b, const Tokenwire__V1__StatsReply *s)
{
#define TW_COUNTER(name, help, v)                                                          \
    do {                                                                                   \
        metric_head(b, "tokenwire_engine_" name, "counter", help);                         \
        out(b, "tokenwire_engine_" name " %llu\n", (unsigned long long)(v));               \
    } while (0)
#define TW_GAUGE(name, help, fmt, v)                                                       \
    do {                                                                                   \
        metric_head(b, "tokenwire_engine_" name, "gauge", help);                           \
        out(b, "tokenwire_engine_" name " " fmt "\n", v);                                  \
    } while (0)
    TW_COUNTER("requests_total", "Requests accepted by the engine.", s->requests_total);
    TW_COUNTER("requests_failed_total", "Requests that failed in the engine.",
               s->requests_failed);
    TW_GAUGE("requests_running", "Requests running now.", "%u", s->requests_running);
    TW_GAUGE("requests_queued", "Requests waiting to be scheduled.", "%u", s->requests_queued);
    TW_COUNTER("prompt_tokens_total", "Prompt tokens processed.", s->prompt_tokens_total);
    TW_COUNTER("generated_tokens_total", "Tokens generated.", s->generated_tokens_total);
    TW_COUNTER("cached_tokens_total", "Prompt tokens served from caches.",
               s->cached_tokens_total);
    TW_COUNTER("cached_tokens_shared_total",
               "Prompt tokens served from the prefix cache's shared pages (mapped, not copied).",
               s->cached_tokens_shared);
    TW_COUNTER("prefix_cache_hits_total", "Prefix cache hits.", s->prefix_cache_hits);
    TW_COUNTER("prefix_cache_lookups_total", "Prefix cache lookups.", s->prefix_cache_lookups);
    TW_COUNTER("state_store_hits_total", "Persistent state store hits.", s->state_store_hits);
    TW_COUNTER("state_store_lookups_total", "Persistent state store lookups.",
               s->state_store_lookups);
    TW_COUNTER("spec_drafted_tokens_total", "Tokens drafted by speculative decoding.",
               s->spec_drafted);
    TW_COUNTER("spec_accepted_tokens_total", "Drafted tokens accepted.", s->spec_accepted);
    TW_GAUGE("spec_speedup", "Measured speculative decoding speed-up.", "%g",
             (double)s->spec_speedup);
    TW_COUNTER("thinking_budget_closes_total", "Thinking blocks closed by the budget.",
               s->thinking_budget_closes);
    TW_COUNTER("thinking_loop_closes_total", "Thinking blocks closed by loop detection.",
               s->thinking_loop_closes);
    TW_GAUGE("decode_tokens_per_second", "Decode throughput over the last minute.", "%g",
             (double)s->decode_tokens_per_s);
    TW_GAUGE("prefill_tokens_per_second", "Prefill throughput over the last minute.", "%g",
             (double)s->prefill_tokens_per_s);
    TW_GAUGE("resident_memory_bytes", "Resident memory of the engine.", "%llu",
             (unsigned long long)s->rss_bytes);
    TW_GAUGE("kv_bytes", "Bytes held by KV pages.", "%llu", (unsigned long long)s->kv_bytes);
    TW_GAUGE("state_bytes", "Bytes held by recurrent states.", "%llu",
             (unsigned long long)s->state_bytes);
    TW_COUNTER("chunks_published_total", "Stream chunks published.", s->chunks_published);
    TW_COUNTER("resumes_served_total", "Stream resumes served.", s->resumes_served);
#undef TW_COUNTER
#undef TW_GAUGE
}

char *tw_bridge_metrics_render(tw_bridge_metrics *m, bool engine_up,
                               const Tokenwire__V1__StatsReply *stats)
{
    outbuf b = {malloc(4096), 0, 4096, false};
    if (!b.p)
        return NULL;
    b.p[0] = '\0';
    metric_head(&b, "tokenwire_bridge_http_requests_total", "counter",
                "HTTP requests answered by the bridge, by route and status.");
    for (int r = 0; r < TW_BRIDGE_ROUTE_COUNT; r++) {
        for (int c = 0; c < TW_BRIDGE_METRIC_CODES; c++) {
            uint64_t v = atomic_load(&m->requests[r][c]);
            if (v == 0)
                continue;
            if (counted_codes[c])
                out(&b, "tokenwire_bridge_http_requests_total{route=\"%s\",code=\"%d\"} %llu\n",
                    route_names[r], counted_codes[c], (unsigned long long)v);
            else
                out(&b,
                    "tokenwire_bridge_http_requests_total{route=\"%s\",code=\"other\"} %llu\n",
                    route_names[r], (unsigned long long)v);
        }
    }
    metric_head(&b, "tokenwire_bridge_http_request_seconds_total", "counter",
                "Time spent answering requests, by route.");
    for (int r = 0; r < TW_BRIDGE_ROUTE_COUNT; r++)
        out(&b, "tokenwire_bridge_http_request_seconds_total{route=\"%s\"} %.6f\n",
            route_names[r], (double)atomic_load(&m->duration_us[r]) / 1e6);
    metric_head(&b, "tokenwire_bridge_requests_in_flight", "gauge",
                "Requests being answered now.");
    out(&b, "tokenwire_bridge_requests_in_flight %d\n", atomic_load(&m->inflight));
    metric_head(&b, "tokenwire_bridge_streams_active", "gauge", "Event streams open now.");
    out(&b, "tokenwire_bridge_streams_active %d\n", atomic_load(&m->streams_active));
    metric_head(&b, "tokenwire_bridge_stream_events_total", "counter",
                "Server-sent events written.");
    out(&b, "tokenwire_bridge_stream_events_total %llu\n",
        (unsigned long long)atomic_load(&m->stream_events));
    metric_head(&b, "tokenwire_bridge_stream_chunk_delivery_seconds", "histogram",
                "Time from the engine's hand-over of a stream chunk to its arrival here.");
    uint64_t below = 0;
    for (int i = 0; i <= TW_BRIDGE_DELIVERY_BUCKETS; i++) {
        below += atomic_load(&m->delivery[i]);
        if (i < TW_BRIDGE_DELIVERY_BUCKETS)
            out(&b, "tokenwire_bridge_stream_chunk_delivery_seconds_bucket{le=\"%g\"} %llu\n",
                (double)delivery_bounds[i] / 1e6, (unsigned long long)below);
        else
            out(&b, "tokenwire_bridge_stream_chunk_delivery_seconds_bucket{le=\"+Inf\"} %llu\n",
                (unsigned long long)below);
    }
    out(&b, "tokenwire_bridge_stream_chunk_delivery_seconds_sum %.6f\n",
        (double)atomic_load(&m->delivery_us_sum) / 1e6);
    out(&b, "tokenwire_bridge_stream_chunk_delivery_seconds_count %llu\n",
        (unsigned long long)below);
    metric_head(&b, "tokenwire_bridge_streams_aborted_total", "counter",
                "Streams cut short because the client went away.");
    out(&b, "tokenwire_bridge_streams_aborted_total %llu\n",
        (unsigned long long)atomic_load(&m->streams_aborted));
    metric_head(&b, "tokenwire_bridge_hangups_cancelled_total", "counter",
                "Generates of whole answers cancelled because the client hung up.");
    out(&b, "tokenwire_bridge_hangups_cancelled_total %llu\n",
        (unsigned long long)atomic_load(&m->hangups_cancelled));
    metric_head(&b, "tokenwire_bridge_rejected_busy_total", "counter",
                "Requests refused because every worker was busy.");
    out(&b, "tokenwire_bridge_rejected_busy_total %llu\n",
        (unsigned long long)atomic_load(&m->rejected_busy));
    metric_head(&b, "tokenwire_bridge_responses_kept", "gauge",
                "Responses kept for previous_response_id and retrieval.");
    out(&b, "tokenwire_bridge_responses_kept %zu\n", atomic_load(&m->responses_kept));
    metric_head(&b, "tokenwire_bridge_responses_kept_bytes", "gauge",
                "Bytes the kept responses take (limit: --responses-store-mb).");
    out(&b, "tokenwire_bridge_responses_kept_bytes %zu\n", atomic_load(&m->responses_kept_bytes));
    metric_head(&b, "tokenwire_bridge_responses_journal_errors_total", "counter",
                "Kept or deleted responses the --responses-store-file journal could not record.");
    out(&b, "tokenwire_bridge_responses_journal_errors_total %zu\n",
        atomic_load(&m->responses_journal_errors));
    metric_head(&b, "tokenwire_bridge_responses_journal_syncs_total", "counter",
                "Journal lines synced to the disk (--responses-store-sync).");
    out(&b, "tokenwire_bridge_responses_journal_syncs_total %zu\n",
        atomic_load(&m->responses_journal_syncs));
    metric_head(&b, "tokenwire_engine_up", "gauge", "1 when the engine answers.");
    out(&b, "tokenwire_engine_up %d\n", engine_up ? 1 : 0);
    if (stats)
        engine_stats(&b, stats);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
