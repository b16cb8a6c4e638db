/* POST /v1/chat/completions and /v1/completions, and the answering of
 * /v1/responses (as a chat completion, rewritten both ways by
 * responses_map.c; endpoint_responses.c takes the request). */
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batch.h"
#include "bridge.h"
#include "hangup.h"
#include "response_json.h"
#include "responses_map.h"
#include "responses_stream.h"
#include "stream_shape.h"

/* prefix ("chatcmpl-", "cmpl-", "resp_") followed by 24 random characters,
 * like OpenAI's. */
static void make_response_id(char *buf, size_t cap, const char *prefix)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char rnd[24];
    if (RAND_bytes(rnd, sizeof rnd) != 1) {
        /* The id only needs to be unique enough for logs; fall back to time. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        for (size_t i = 0; i < sizeof rnd; i++)
            rnd[i] = (unsigned char)((uint64_t)ts.tv_nsec >> (i % 8 * 8)) ^ (unsigned char)i;
    }
    char tail[sizeof rnd + 1];
    for (size_t i = 0; i < sizeof rnd; i++)
        tail[i] = alphabet[rnd[i] % (sizeof alphabet - 1)];
    tail[sizeof rnd] = '\0';
    snprintf(buf, cap, "%s%s", prefix, tail);
}

/* "fp_" + 10 hex digits of the engine's version: it changes when the engine
 * that computes the answers changes, which is what the field promises. */
static void make_fingerprint(tw_bridge *b, char *buf, size_t cap)
{
    char version[64];
    tw_bridge_engine_version(b->engine, version, sizeof version);
    unsigned char d[32];
    SHA256((const unsigned char *)version, strlen(version), d);
    snprintf(buf, cap, "fp_%02x%02x%02x%02x%02x", d[0], d[1], d[2], d[3], d[4]);
}

/* The name of the model that will answer a request naming none: the
 * engine's default (streams carry no model name of their own). */
static void default_model_name(tw_bridge *b, char *buf, size_t cap)
{
    buf[0] = '\0';
    Tokenwire__V1__Reply *rep = NULL;
    tw_bridge_apierr ae;
    if (tw_bridge_engine_models(b->engine, &rep, &ae) != TW_OK)
        return;
    const Tokenwire__V1__ModelInfo *m = tw_bridge_model_named(rep->list_models, NULL);
    if (m)
        snprintf(buf, cap, "%s", m->name);
    tw_wire_free_reply(rep);
}

/* The engine's refusal of a JSON Schema starts with "json_schema:" (an
 * unsupported keyword, and where), the daemon's of a bad format field with
 * "format."; either way the caller sent that part as response_format, so
 * the 400 names it there. */
static void blame_response_format(const tw_bridge_gen_request *g, tw_bridge_apierr *ae)
{
    if (!g->gen.format || ae->http_status != 400 || ae->param[0])
        return;
    const char *msg = ae->err.msg;
    if (strncmp(msg, "json_schema", 11) == 0 || strncmp(msg, "format.", 7) == 0)
        snprintf(ae->param, sizeof ae->param, "response_format");
}

/* One Generate (gen, a form of g's) answered whole, as OpenAI JSON; h
 * cancels it if the client hangs up. */
static tw_status reply_json(tw_bridge *b, const tw_bridge_gen_request *g,
                            Tokenwire__V1__GenerateRequest *gen, tw_bridge_hangup *h,
                            tw_bridge_resp_meta meta, json_t **out, tw_bridge_apierr *ae)
{
    *out = NULL;
    Tokenwire__V1__Request req = TOKENWIRE__V1__REQUEST__INIT;
    req.method_case = TOKENWIRE__V1__REQUEST__METHOD_GENERATE;
    req.generate = gen;
    if (!tw_bridge_hangup_track(h, &req))
        return tw_bridge_fail(ae, TW_CANCELLED, NULL, NULL, "The client went away.");
    Tokenwire__V1__Reply *rep = NULL;
    tw_status st = tw_bridge_engine_call(b->engine, &req, false, &rep, ae);
    if (st != TW_OK) {
        blame_response_format(g, ae);
        return st;
    }
    if (rep->result_case != TOKENWIRE__V1__REPLY__RESULT_GENERATE) {
        tw_wire_free_reply(rep);
        return tw_bridge_fail(ae, TW_INTERNAL, NULL, NULL,
                              "The engine answered Generate with another result.");
    }
    const Tokenwire__V1__GenerateReply *gr = rep->generate;
    if (gr->model && gr->model[0])
        meta.model = gr->model;
    st = g->kind == TW_BRIDGE_API_CHAT ? tw_bridge_chat_completion_json(&meta, g, gr, out, ae)
                                       : tw_bridge_text_completion_json(&meta, g, gr, out, ae);
    tw_wire_free_reply(rep);
    return st;
}

/* ------------------------------------------------- several prompts at once */

typedef struct whole_batch {
    tw_bridge *b;
    const tw_bridge_gen_request *g;
    tw_bridge_hangup *h;
    tw_bridge_resp_meta meta;
    json_t **out;
    tw_bridge_apierr *ae;
    tw_status *st;
} whole_batch;

static void whole_prompt(size_t i, void *user)
{
    whole_batch *w = user;
    Tokenwire__V1__GenerateRequest gen = w->g->gen;
    Tokenwire__V1__TokenIds ids;
    tw_bridge_gen_request_prompt(w->g, i, &gen, &ids);
    w->st[i] = reply_json(w->b, w->g, &gen, w->h, w->meta, &w->out[i], &w->ae[i]);
}

/* /v1/completions with several prompts answered whole: each its own
 * Generate; the first failure (in prompt order) answers for the whole. */
static void generate_batch(tw_bridge *b, tw_bridge_gen_request *g, tw_bridge_hangup *h,
                           tw_bridge_resp_meta *meta, tw_bridge_http_resp *resp)
{
    size_t n = g->n_prompts;
    whole_batch w = {.b = b, .g = g, .h = h, .meta = *meta};
    w.out = calloc(n, sizeof *w.out);
    w.ae = calloc(n, sizeof *w.ae);
    w.st = calloc(n, sizeof *w.st);
    tw_bridge_apierr ae;
    json_t *all = NULL;
    /* out of memory unless a prompt's own failure says otherwise */
    tw_bridge_fail(&ae, TW_RESOURCE_EXHAUSTED, NULL, NULL, "Out of memory.");
    if (w.out && w.ae && w.st) {
        tw_bridge_for_each_prompt(n, whole_prompt, &w);
        if (tw_bridge_first_failure(w.st, w.ae, n, &ae) == TW_OK)
            all = tw_bridge_merge_replies(w.out, n, g->gen.has_n ? g->gen.n : 1);
    }
    if (all)
        tw_bridge_resp_json(resp, 200, all);
    else
        tw_bridge_resp_error(resp, &ae);
    for (size_t i = 0; w.out && i < n; i++)
        json_decref(w.out[i]);
    free(w.out);
    free(w.ae);
    free(w.st);
}

/* echo: a /v1/responses request, whose answer is the response object. */
static void generate_once(tw_bridge *b, tw_bridge_gen_request *g, tw_bridge_resp_meta *meta,
                          const tw_bridge_resp_echo *echo, const tw_bridge_sink *sink,
                          tw_bridge_http_resp *resp)
{
    tw_bridge_hangup h;
    tw_bridge_hangup_begin(&h, b, sink);
    if (g->n_prompts > 1) {
        generate_batch(b, g, &h, meta, resp);
    } else {
        json_t *out;
        tw_bridge_apierr ae;
        tw_status st = reply_json(b, g, &g->gen, &h, *meta, &out, &ae);
        if (st == TW_OK && echo) {
            json_t *r = tw_bridge_response_of_chat(echo, out);
            json_decref(out);
            out = r;
            if (!r)
                st = tw_bridge_fail_no_memory(&ae);
            else if (echo->keep)
                echo->keep(echo->keep_user, r);
        }
        if (st == TW_OK)
            tw_bridge_resp_json(resp, 200, out);
        else
            tw_bridge_resp_error(resp, &ae);
    }
    tw_bridge_hangup_end(&h);
}

/* The state of one streamed answer: the sink, whether the event-stream
 * headers went out, and a reusable line buffer. */
typedef struct stream_ctx {
    tw_bridge *b;
    const tw_bridge_sink *sink;
    tw_bridge_shaper shaper;
    bool begun;
    bool gone; /* the client went away */
    /* several prompts: their streams take turns at the shaper, and their
     * usage is summed for the last event */
    pthread_mutex_t mu;
    Tokenwire__V1__Usage usage;
} stream_ctx;

static int sse_write(stream_ctx *sc, const char *data, size_t len)
{
    if (sc->gone)
        return 1;
    if (!sc->begun) {
        if (sc->sink->begin(sc->sink->ctx)) {
            sc->gone = true;
            return 1;
        }
        sc->begun = true;
        atomic_fetch_add(&sc->b->metrics.streams_active, 1);
    }
    if (sc->sink->write(sc->sink->ctx, data, len)) {
        sc->gone = true;
        return 1;
    }
    return 0;
}

/* One event: "event: type" (when type is given) and its "data:" line. */
static int write_event(stream_ctx *sc, const char *type, const json_t *event)
{
    char *text = json_dumps(event, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    if (!text)
        return 1;
    size_t n = strlen(text), head = type ? strlen(type) + 8 : 0;
    /* One write per event keeps events whole on the wire. */
    char *line = malloc(head + n + 9);
    if (!line) {
        free(text);
        return 1;
    }
    if (type)
        snprintf(line, head + 1, "event: %s\n", type);
    memcpy(line + head, "data: ", 6);
    memcpy(line + head + 6, text, n);
    memcpy(line + head + 6 + n, "\n\n", 3);
    free(text);
    int rc = sse_write(sc, line, head + n + 8);
    free(line);
    if (!rc)
        atomic_fetch_add(&sc->b->metrics.stream_events, 1);
    return rc;
}

static int on_event(void *user, const json_t *event)
{
    return write_event(user, NULL, event);
}

static int on_response_event(void *user, const char *type, const json_t *event)
{
    return write_event(user, type, event);
}

static int on_chunk(void *user, const Tokenwire__V1__StreamChunk *chunk)
{
    stream_ctx *sc = user;
    tw_bridge_metrics_delivery(&sc->b->metrics, chunk);
    return tw_bridge_shaper_chunk(&sc->shaper, chunk);
}

/* One prompt's stream among several: where its choices sit among all. */
typedef struct prompt_stream {
    stream_ctx *sc;
    uint32_t offset;
} prompt_stream;

static int on_prompt_chunk(void *user, const Tokenwire__V1__StreamChunk *chunk)
{
    prompt_stream *p = user;
    stream_ctx *sc = p->sc;
    tw_bridge_metrics_delivery(&sc->b->metrics, chunk);
    Tokenwire__V1__StreamChunk c = *chunk;
    c.index += p->offset;
    pthread_mutex_lock(&sc->mu);
    if (c.usage) {
        sc->usage.prompt_tokens += c.usage->prompt_tokens;
        sc->usage.completion_tokens += c.usage->completion_tokens;
        sc->usage.reasoning_tokens += c.usage->reasoning_tokens;
        sc->usage.cached_prompt_tokens += c.usage->cached_prompt_tokens;
        c.usage = NULL;
    }
    int rc = tw_bridge_shaper_chunk(&sc->shaper, &c);
    pthread_mutex_unlock(&sc->mu);
    return rc;
}

typedef struct stream_batch {
    tw_bridge *b;
    const tw_bridge_gen_request *g;
    stream_ctx *sc;
    tw_bridge_apierr *ae;
    tw_status *st;
} stream_batch;

static void stream_prompt(size_t i, void *user)
{
    stream_batch *s = user;
    Tokenwire__V1__GenerateRequest gen = s->g->gen;
    Tokenwire__V1__TokenIds ids;
    tw_bridge_gen_request_prompt(s->g, i, &gen, &ids);
    prompt_stream p = {.sc = s->sc, .offset = (uint32_t)i * (gen.has_n ? gen.n : 1)};
    s->st[i] = tw_bridge_engine_stream(s->b->engine, &gen, on_prompt_chunk, &p, &s->ae[i]);
}

/* Every prompt's stream, a few at a time, into the one answer. Returns the
 * first failure in prompt order (ae says what) or TW_OK. */
static tw_status stream_prompts(tw_bridge *b, const tw_bridge_gen_request *g, stream_ctx *sc,
                                tw_bridge_apierr *ae)
{
    size_t n = g->n_prompts;
    stream_batch s = {.b = b, .g = g, .sc = sc};
    s.ae = calloc(n, sizeof *s.ae);
    s.st = calloc(n, sizeof *s.st);
    if (!s.ae || !s.st) {
        free(s.ae);
        free(s.st);
        return tw_bridge_fail(ae, TW_RESOURCE_EXHAUSTED, NULL, NULL, "Out of memory.");
    }
    tw_bridge_for_each_prompt(n, stream_prompt, &s);
    tw_status st = tw_bridge_first_failure(s.st, s.ae, n, ae);
    free(s.ae);
    free(s.st);
    if (st == TW_OK) {
        sc->shaper.usage = sc->usage;
        sc->shaper.have_usage = true;
    }
    return st;
}

/* echo: a /v1/responses request, whose chat chunks are rewritten into
 * the Responses events (and which ends without [DONE]). */
static void generate_stream(tw_bridge *b, tw_bridge_gen_request *g, tw_bridge_resp_meta *meta,
                            const tw_bridge_resp_echo *echo, const tw_bridge_sink *sink,
                            tw_bridge_http_resp *resp)
{
    char model[TW_BRIDGE_MAX_MODEL_NAME + 1];
    if (!meta->model || !meta->model[0]) {
        default_model_name(b, model, sizeof model);
        meta->model = model;
    }
    stream_ctx sc = {.b = b, .sink = sink};
    Tokenwire__V1__Usage zero = TOKENWIRE__V1__USAGE__INIT;
    sc.usage = zero;
    pthread_mutex_init(&sc.mu, NULL);
    tw_bridge_apierr ae;
    tw_bridge_resp_stream rs = {0};
    if ((echo && tw_bridge_resp_stream_init(&rs, echo, on_response_event, &sc) != TW_OK) ||
        tw_bridge_shaper_init(&sc.shaper, meta, g, echo ? tw_bridge_resp_stream_chunk : on_event,
                              echo ? (void *)&rs : (void *)&sc) != TW_OK) {
        tw_bridge_resp_stream_fini(&rs);
        pthread_mutex_destroy(&sc.mu);
        tw_bridge_fail(&ae, TW_RESOURCE_EXHAUSTED, NULL, NULL, "Out of memory.");
        tw_bridge_resp_error(resp, &ae);
        return;
    }
    /* the Responses events name the model from the first one on */
    if (echo && meta->model)
        rs.model = strdup(meta->model);
    g->gen.has_stream = 1;
    g->gen.stream = 1;
    tw_status st = g->n_prompts > 1
                       ? stream_prompts(b, g, &sc, &ae)
                       : tw_bridge_engine_stream(b->engine, &g->gen, on_chunk, &sc, &ae);
    if (st != TW_OK && st != TW_CANCELLED)
        blame_response_format(g, &ae);
    if (!sc.begun && !sc.gone && st != TW_OK && st != TW_CANCELLED) {
        /* Nothing was sent yet: answer with a plain HTTP error, as OpenAI
         * does for a stream request it refuses. */
        tw_bridge_resp_error(resp, &ae);
        tw_bridge_shaper_fini(&sc.shaper);
        tw_bridge_resp_stream_fini(&rs);
        pthread_mutex_destroy(&sc.mu);
        return;
    }
    if (st != TW_OK && st != TW_CANCELLED && !sc.shaper.stopped)
        echo ? tw_bridge_resp_stream_error(&rs, &ae) : tw_bridge_shaper_error(&sc.shaper, &ae);
    else if (st == TW_OK)
        tw_bridge_shaper_end(&sc.shaper);
    if (echo && !sc.gone && st != TW_CANCELLED)
        tw_bridge_resp_stream_end(&rs);
    if (!sc.gone && !echo)
        sse_write(&sc, "data: [DONE]\n\n", 14);
    tw_bridge_resp_stream_fini(&rs);
    if (sc.gone)
        atomic_fetch_add(&b->metrics.streams_aborted, 1);
    if (sc.begun)
        atomic_fetch_sub(&b->metrics.streams_active, 1);
    tw_bridge_shaper_fini(&sc.shaper);
    pthread_mutex_destroy(&sc.mu);
    resp->status = 200;
    resp->streamed = true;
}

/* Answers a mapped request, whole or streamed, under id. */
static void run(tw_bridge *b, tw_bridge_gen_request *g, const char *id,
                const tw_bridge_resp_echo *echo, const tw_bridge_sink *sink,
                tw_bridge_http_resp *resp)
{
    char fp[16];
    make_fingerprint(b, fp, sizeof fp);
    tw_bridge_resp_meta meta = {
        .id = id, .created = (long long)time(NULL), .model = g->gen.model, .fingerprint = fp};
    if (g->stream && sink)
        generate_stream(b, g, &meta, echo, sink, resp);
    else
        generate_once(b, g, &meta, echo, sink, resp);
}

void tw_bridge_new_id(char *buf, size_t cap, const char *prefix)
{
    make_response_id(buf, cap, prefix);
}

void tw_bridge_answer_response(tw_bridge *b, tw_bridge_gen_request *g,
                               const tw_bridge_resp_echo *echo, const tw_bridge_sink *sink,
                               tw_bridge_http_resp *resp)
{
    run(b, g, echo->id, echo, sink, resp);
}

void tw_bridge_ep_generate(tw_bridge *b, tw_bridge_api_kind kind, const tw_bridge_http_req *rq,
                           const tw_bridge_sink *sink, tw_bridge_http_resp *resp)
{
    json_t *root = NULL;
    tw_bridge_apierr ae;
    if (tw_bridge_parse_body(rq, &root, &ae) != TW_OK) {
        tw_bridge_resp_error(resp, &ae);
        return;
    }
    tw_bridge_gen_request g;
    tw_status st = kind == TW_BRIDGE_API_COMPLETION
                       ? tw_bridge_map_completion_request(root, &g, &ae)
                       : tw_bridge_map_chat_request(root, &g, &ae);
    json_decref(root);
    if (st != TW_OK) {
        tw_bridge_resp_error(resp, &ae);
        tw_bridge_gen_request_fini(&g);
        return;
    }
    char id[48];
    make_response_id(id, sizeof id, kind == TW_BRIDGE_API_CHAT ? "chatcmpl-" : "cmpl-");
    run(b, &g, id, NULL, sink, resp);
    tw_bridge_gen_request_fini(&g);
}
