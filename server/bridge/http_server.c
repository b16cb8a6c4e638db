#include "http_server.h"

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One request waiting for, or held by, a worker. */
typedef struct http_job {
    struct http_job *next;
    nng_aio *aio; /* the server's handler aio, completed when the answer is ready */
    nng_http_req *req;
    nng_http_conn *conn;
    nng_aio *io;      /* the worker's own reads and writes */
    nng_aio *watch;   /* a read that ends when the client hangs up */
    uint8_t watch_byte;
    pthread_mutex_t watch_mu; /* guards gone, which the read's end calls */
    void (*gone)(void *arg);
    void *gone_arg;
    bool hijacked;    /* the connection now belongs to the job */
    bool body_unread; /* bytes of the request remain on the connection */
    tw_bridge_http *server;
} http_job;

struct tw_bridge_http {
    tw_bridge *b;
    nng_http_server *srv;
    nng_http_handler *handler;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    http_job *head, *tail;
    unsigned queued;
    unsigned busy; /* workers running a job */
    bool stopping;
    pthread_t *threads;
    unsigned n_threads;
};

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Hands a finished response to the server (which frees it after sending). */
static void complete_with(http_job *job, int status, const char *content_type,
                          const char *body, size_t len, const tw_bridge_http_resp *extra)
{
    nng_http_res *res = NULL;
    if (nng_http_res_alloc(&res) != 0) {
        nng_aio_finish(job->aio, NNG_ENOMEM);
        return;
    }
    int rv = nng_http_res_set_status(res, (uint16_t)status);
    /* NNG 1.5 has no reason phrase for some of the statuses used here. */
    const char *reason = status == 411   ? "Length Required"
                         : status == 413 ? "Payload Too Large"
                         : status == 429 ? "Too Many Requests"
                                         : NULL;
    if (!rv && reason)
        rv = nng_http_res_set_reason(res, reason);
    if (!rv && content_type)
        rv = nng_http_res_set_header(res, "Content-Type", content_type);
    if (!rv && extra && extra->allow)
        rv = nng_http_res_set_header(res, "Allow", extra->allow);
    if (!rv && extra && extra->www_authenticate)
        rv = nng_http_res_set_header(res, "WWW-Authenticate", "Bearer");
    if (!rv && extra && extra->retry_after_s > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", extra->retry_after_s);
        rv = nng_http_res_set_header(res, "Retry-After", v);
    }
    /* Unread body bytes would be taken for the next request. */
    if (!rv && job->body_unread)
        rv = nng_http_res_set_header(res, "Connection", "close");
    if (!rv)
        rv = nng_http_res_copy_data(res, body, len);
    if (rv) {
        nng_http_res_free(res);
        nng_aio_finish(job->aio, rv);
        return;
    }
    nng_aio_set_output(job->aio, 0, res);
    nng_aio_finish(job->aio, 0);
}

static int io_write(http_job *job, const void *data, size_t len)
{
    nng_iov iov = {.iov_buf = (void *)data, .iov_len = len};
    if (nng_aio_set_iov(job->io, 1, &iov) != 0)
        return 1;
    nng_http_conn_write_all(job->conn, job->io);
    nng_aio_wait(job->io);
    return nng_aio_result(job->io) != 0;
}

/* Takes the connection from the server, which forgets the request; the
 * answer is then written here and the connection closed after it. */
static void hijack(http_job *job)
{
    if (job->hijacked)
        return;
    nng_http_hijack(job->conn);
    job->hijacked = true;
    nng_aio_finish(job->aio, 0);
}

static int sink_begin(void *ctx)
{
    http_job *job = ctx;
    static const char head[] = "HTTP/1.1 200 OK\r\n"
                               "Content-Type: text/event-stream\r\n"
                               "Cache-Control: no-cache\r\n"
                               "Connection: close\r\n"
                               "X-Accel-Buffering: no\r\n"
                               "\r\n";
    /* From here on the connection and the request are ours; the server's
     * handler completes at once and forgets them. The stream ends by closing
     * the connection, which delimits the body without a Content-Length. */
    hijack(job);
    return io_write(job, head, sizeof head - 1);
}

static int sink_write(void *ctx, const char *data, size_t len)
{
    return io_write(ctx, data, len);
}

/* The watch read ended: an error means the client hung up, or the
 * connection was closed after the answer (gone is cleared by then). A byte
 * means it sent more, which this server does not read: it is closed after
 * the answer anyway. */
static void watch_done(void *arg)
{
    http_job *job = arg;
    pthread_mutex_lock(&job->watch_mu);
    if (nng_aio_result(job->watch) != 0 && job->gone)
        job->gone(job->gone_arg);
    job->gone = NULL;
    pthread_mutex_unlock(&job->watch_mu);
}

/* A pending read on the connection notices a hang-up. NNG closes a
 * connection whose read is cancelled, so the read cannot be taken back
 * before the answer: the connection is taken over instead, the answer goes
 * out with "Connection: close", and the read ends when the connection does. */
static int sink_watch(void *ctx, void (*gone)(void *arg), void *arg)
{
    http_job *job = ctx;
    if (job->watch || nng_aio_alloc(&job->watch, watch_done, job) != 0)
        return 1;
    pthread_mutex_init(&job->watch_mu, NULL);
    job->gone = gone;
    job->gone_arg = arg;
    hijack(job);
    nng_iov iov = {.iov_buf = &job->watch_byte, .iov_len = 1};
    nng_aio_set_iov(job->watch, 1, &iov);
    nng_aio_set_timeout(job->watch, NNG_DURATION_INFINITE);
    nng_http_conn_read(job->conn, job->watch);
    return 0;
}

static void sink_unwatch(void *ctx)
{
    http_job *job = ctx;
    if (!job->watch)
        return;
    pthread_mutex_lock(&job->watch_mu);
    job->gone = NULL;
    pthread_mutex_unlock(&job->watch_mu);
}

static const char *reason_phrase(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 404:
        return "Not Found";
    case 408:
        return "Request Timeout";
    case 429:
        return "Too Many Requests";
    case 499:
        return "Client Closed Request";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return status >= 500 ? "Internal Server Error" : "Error";
    }
}

/* An answer on a connection taken over by sink_watch: head and body
 * written here; the caller closes the connection. */
static void write_taken(http_job *job, const tw_bridge_http_resp *resp)
{
    char head[512];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n",
                     resp->status, reason_phrase(resp->status),
                     resp->content_type ? resp->content_type : "application/json", resp->body_len);
    if (resp->retry_after_s > 0 && n > 0 && (size_t)n < sizeof head)
        n +=
            snprintf(head + n, sizeof head - (size_t)n, "Retry-After: %d\r\n", resp->retry_after_s);
    if (n <= 0 || (size_t)n + 2 >= sizeof head)
        return;
    memcpy(head + n, "\r\n", 3);
    if (io_write(job, head, (size_t)n + 2) == 0 && resp->body_len)
        io_write(job, resp->body, resp->body_len);
}

/* Reads the body named by Content-Length. Returns 0 on success, 1 when it
 * is over the limit (left unread), -1 when the connection failed. */
static int read_body(http_job *job, size_t max, char **body, size_t *len, int *bad_request)
{
    *body = NULL;
    *len = 0;
    *bad_request = 0;
    const char *cl = nng_http_req_get_header(job->req, "Content-Length");
    const char *te = nng_http_req_get_header(job->req, "Transfer-Encoding");
    if (te && !cl) {
        /* Chunked request bodies are not supported by NNG's server. */
        job->body_unread = true;
        *bad_request = 411;
        return 0;
    }
    if (!cl)
        return 0;
    char *end = NULL;
    unsigned long long n = strtoull(cl, &end, 10);
    if (!*cl || *cl == '-' || !end || *end != '\0') {
        job->body_unread = true;
        *bad_request = 400;
        return 0;
    }
    if (n == 0)
        return 0;
    if (n > max) {
        job->body_unread = true;
        return 1;
    }
    char *buf = malloc((size_t)n + 1);
    if (!buf) {
        job->body_unread = true;
        return -1;
    }
    nng_iov iov = {.iov_buf = buf, .iov_len = (size_t)n};
    nng_aio_set_iov(job->io, 1, &iov);
    /* A client that stalls mid-body holds a worker: bound it by the read
     * timeout, not by the far longer time generation may take. */
    nng_aio_set_timeout(job->io, (nng_duration)job->server->b->cfg->read_timeout_ms);
    nng_http_conn_read_all(job->conn, job->io);
    nng_aio_wait(job->io);
    nng_aio_set_timeout(job->io, (nng_duration)job->server->b->cfg->request_timeout_ms);
    if (nng_aio_result(job->io) != 0) {
        free(buf);
        job->body_unread = true;
        return -1;
    }
    buf[n] = '\0';
    *body = buf;
    *len = (size_t)n;
    return 0;
}

/* Part of the request URI into buf: its path (what comes before '?' or
 * '#'), or its query (what comes between '?' and '#'). NULL when it does
 * not fit. */
static const char *request_part(nng_http_req *req, bool query, char *buf, size_t cap)
{
    const char *uri = nng_http_req_get_uri(req);
    uri = uri ? uri : "/";
    size_t n = strcspn(uri, "?#");
    if (query) {
        uri = uri[n] == '?' ? uri + n + 1 : "";
        n = strcspn(uri, "#");
    }
    if (n >= cap)
        return NULL;
    memcpy(buf, uri, n);
    buf[n] = '\0';
    return buf;
}

static void run_job(tw_bridge_http *h, http_job *job)
{
    tw_bridge *b = h->b;
    uint64_t t0 = now_us();
    atomic_fetch_add(&b->metrics.inflight, 1);
    nng_aio_set_timeout(job->io, (nng_duration)b->cfg->request_timeout_ms);

    /* Method and path are copied: once the answer is handed back, the
     * server reuses the request object for the connection's next request. */
    char path[2048], query[1024], method[32];
    snprintf(method, sizeof method, "%s", nng_http_req_get_method(job->req));
    tw_bridge_http_req rq = {
        .method = method,
        .path = request_part(job->req, false, path, sizeof path),
        .query = request_part(job->req, true, query, sizeof query),
        .authorization = nng_http_req_get_header(job->req, "Authorization"),
    };
    char *body = NULL;
    int bad_request = 0;
    int r = read_body(job, b->cfg->max_body_bytes, &body, &rq.body_len, &bad_request);
    tw_bridge_http_resp resp;
    memset(&resp, 0, sizeof resp);
    if (r < 0) {
        /* The client went away (or sent too slowly); drop the connection. */
        nng_aio_finish(job->aio, NNG_ECONNRESET);
        resp.status = 408;
        resp.route = TW_BRIDGE_ROUTE_OTHER;
    } else if (bad_request) {
        tw_bridge_apierr ae;
        tw_bridge_fail_http(&ae, TW_INVALID_ARGUMENT, bad_request, NULL, NULL,
                            bad_request == 411 ? "length_required" : "invalid_content_length",
                            bad_request == 411
                                ? "Chunked request bodies are not supported; send a "
                                  "Content-Length."
                                : "The Content-Length header is not a number.");
        tw_bridge_resp_error(&resp, &ae);
        complete_with(job, resp.status, resp.content_type, resp.body, resp.body_len, &resp);
    } else if (!rq.path || !rq.query) {
        tw_bridge_apierr ae;
        tw_bridge_fail_http(&ae, TW_INVALID_ARGUMENT, 414, NULL, NULL, "uri_too_long",
                            "The request URI's %s is longer than the %zu bytes this server "
                            "reads.",
                            rq.path ? "query" : "path", (rq.path ? sizeof query : sizeof path) - 1);
        tw_bridge_resp_error(&resp, &ae);
        resp.route = TW_BRIDGE_ROUTE_OTHER;
        complete_with(job, resp.status, resp.content_type, resp.body, resp.body_len, &resp);
        rq.path = rq.path ? rq.path : "(too long)";
    } else {
        rq.body = body;
        rq.body_too_large = r == 1;
        tw_bridge_sink sink = {sink_begin, sink_write, sink_watch, sink_unwatch, job};
        tw_bridge_handle(b, &rq, &sink, &resp);
        if (!resp.streamed && job->hijacked)
            write_taken(job, &resp);
        else if (!resp.streamed)
            complete_with(job, resp.status, resp.content_type, resp.body, resp.body_len,
                          &resp);
    }
    uint64_t dt = now_us() - t0;
    tw_bridge_metrics_request(&b->metrics, resp.route, resp.status, dt);
    atomic_fetch_sub(&b->metrics.inflight, 1);
    if (!b->cfg->quiet)
        fprintf(stderr, "tokenwire-bridge: %s %.200s %d %.1fms\n", rq.method, rq.path,
                resp.status, (double)dt / 1000.0);
    if (job->hijacked) {
        nng_http_conn_close(job->conn);
        nng_http_req_free(job->req);
    }
    tw_bridge_http_resp_fini(&resp);
    free(body);
}

static void *worker_main(void *arg)
{
    tw_bridge_http *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!h->head && !h->stopping)
            pthread_cond_wait(&h->cv, &h->mu);
        http_job *job = h->head;
        if (!job)
            break; /* stopping and nothing left */
        h->head = job->next;
        if (!h->head)
            h->tail = NULL;
        h->queued--;
        h->busy++;
        pthread_mutex_unlock(&h->mu);
        run_job(h, job);
        nng_aio_free(job->io);
        if (job->watch) {
            nng_aio_free(job->watch); /* after the close: waits for watch_done */
            pthread_mutex_destroy(&job->watch_mu);
        }
        free(job);
        pthread_mutex_lock(&h->mu);
        h->busy--;
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static void reject_busy(tw_bridge_http *h, nng_aio *aio)
{
    atomic_fetch_add(&h->b->metrics.rejected_busy, 1);
    tw_bridge_apierr ae;
    tw_bridge_fail_http(&ae, TW_RESOURCE_EXHAUSTED, 429, NULL, NULL, "server_busy",
                        "The server is handling as many requests as it can; retry shortly.");
    tw_bridge_http_resp resp;
    memset(&resp, 0, sizeof resp);
    tw_bridge_resp_error(&resp, &ae);
    resp.retry_after_s = 1;
    http_job tmp = {.aio = aio, .body_unread = true};
    complete_with(&tmp, resp.status, resp.content_type, resp.body, resp.body_len, &resp);
    tw_bridge_http_resp_fini(&resp);
}

/* NNG's handler: runs on an NNG thread, so it only queues. */
static void on_request(nng_aio *aio)
{
    nng_http_req *req = nng_aio_get_input(aio, 0);
    nng_http_handler *hd = nng_aio_get_input(aio, 1);
    nng_http_conn *conn = nng_aio_get_input(aio, 2);
    tw_bridge_http *h = nng_http_handler_get_data(hd);
    http_job *job = calloc(1, sizeof *job);
    if (!job || nng_aio_alloc(&job->io, NULL, NULL) != 0) {
        free(job);
        nng_aio_finish(aio, NNG_ENOMEM);
        return;
    }
    job->aio = aio;
    job->req = req;
    job->conn = conn;
    job->server = h;
    pthread_mutex_lock(&h->mu);
    /* Admitted while a worker is free or the queue has room. */
    bool full = h->stopping || h->queued + h->busy >= h->b->cfg->queue + h->n_threads;
    if (!full) {
        if (h->tail)
            h->tail->next = job;
        else
            h->head = job;
        h->tail = job;
        h->queued++;
        pthread_cond_signal(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
    if (full) {
        nng_aio_free(job->io);
        free(job);
        reject_busy(h, aio);
    }
}

static void stop_workers(tw_bridge_http *h)
{
    pthread_mutex_lock(&h->mu);
    h->stopping = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    for (unsigned i = 0; i < h->n_threads; i++)
        pthread_join(h->threads[i], NULL);
    h->n_threads = 0;
}

tw_status tw_bridge_http_start(tw_bridge *b, tw_bridge_http **out, tw_err *err)
{
    *out = NULL;
    tw_bridge_http *h = calloc(1, sizeof *h);
    if (!h)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    h->b = b;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    tw_status st = TW_OK;
    nng_url *url = NULL;
    int rv = nng_url_parse(&url, b->cfg->listen);
    if (rv != 0 || strcmp(url->u_scheme, "http") != 0) {
        st = tw_errorf(err, TW_INVALID_ARGUMENT, "listen address '%s': not an http:// URL",
                       b->cfg->listen);
        goto fail;
    }
    if ((rv = nng_http_server_hold(&h->srv, url)) != 0) {
        st = tw_errorf(err, TW_UNAVAILABLE, "listen address '%s': %s", b->cfg->listen,
                       nng_strerror(rv));
        goto fail;
    }
    /* One handler for the whole tree, every method, body read by the worker:
     * routing, 404/405 and 413 are then answered in OpenAI's error shape
     * instead of NNG's HTML pages. */
    if ((rv = nng_http_handler_alloc(&h->handler, "/", on_request)) != 0 ||
        (rv = nng_http_handler_set_tree(h->handler)) != 0 ||
        (rv = nng_http_handler_set_method(h->handler, NULL)) != 0 ||
        (rv = nng_http_handler_collect_body(h->handler, false, 0)) != 0 ||
        (rv = nng_http_handler_set_data(h->handler, h, NULL)) != 0 ||
        (rv = nng_http_server_add_handler(h->srv, h->handler)) != 0) {
        if (h->handler)
            nng_http_handler_free(h->handler);
        h->handler = NULL;
        st = tw_errorf(err, TW_INTERNAL, "http handler: %s", nng_strerror(rv));
        goto fail;
    }
    h->threads = calloc(b->cfg->workers, sizeof *h->threads);
    if (!h->threads) {
        st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
        goto fail;
    }
    for (unsigned i = 0; i < b->cfg->workers; i++) {
        if (pthread_create(&h->threads[i], NULL, worker_main, h) != 0) {
            st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "cannot start worker threads");
            goto fail;
        }
        h->n_threads++;
    }
    if ((rv = nng_http_server_start(h->srv)) != 0) {
        st = tw_errorf(err, TW_UNAVAILABLE, "listen on '%s': %s", b->cfg->listen,
                       nng_strerror(rv));
        goto fail;
    }
    nng_url_free(url);
    *out = h;
    return TW_OK;
fail:
    stop_workers(h);
    if (h->srv)
        nng_http_server_release(h->srv);
    if (url)
        nng_url_free(url);
    free(h->threads);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
    return st;
}

void tw_bridge_http_stop(tw_bridge_http *h)
{
    if (!h)
        return;
    nng_http_server_stop(h->srv);
    stop_workers(h);
    nng_http_server_release(h->srv);
    free(h->threads);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
