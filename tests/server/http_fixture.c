#include "http_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 16

typedef struct file_entry {
    char path[256];
    const unsigned char *data;
    size_t len;
} file_entry;

struct twt_http {
    int lfd;
    int port;
    pthread_t thread;
    atomic_bool stop;
    pthread_mutex_t mu;
    file_entry files[MAX_FILES];
    size_t n_files;
    bool cut_next;
    bool honour_range;
    unsigned slow_ms;
    char last_range[128];
    int requests;
};

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static bool send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        c += w;
        n -= (size_t)w;
    }
    return true;
}

static void respond(twt_http *h, int fd, const char *req)
{
    char method[16], target[512];
    if (sscanf(req, "%15s %511s", method, target) != 2)
        return;
    char range[128] = "";
    const char *r = strcasestr(req, "\r\nRange:");
    if (r) {
        r += 8;
        while (*r == ' ')
            r++;
        size_t k = strcspn(r, "\r\n");
        if (k >= sizeof range)
            k = sizeof range - 1;
        memcpy(range, r, k);
        range[k] = '\0';
    }
    pthread_mutex_lock(&h->mu);
    h->requests++;
    snprintf(h->last_range, sizeof h->last_range, "%s", range);
    const file_entry *f = NULL;
    for (size_t i = 0; i < h->n_files; i++)
        if (strcmp(h->files[i].path, target) == 0)
            f = &h->files[i];
    bool cut = false, honour = h->honour_range;
    unsigned slow = h->slow_ms;
    if (f && !range[0] && h->cut_next) {
        cut = true;
        h->cut_next = false;
    }
    pthread_mutex_unlock(&h->mu);

    char head[512];
    if (!f) {
        static const char body[] = "not here\n";
        snprintf(head, sizeof head,
                 "HTTP/1.1 404 Not Found\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                 sizeof body - 1);
        if (send_all(fd, head, strlen(head)))
            send_all(fd, body, sizeof body - 1);
        return;
    }
    size_t start = 0;
    unsigned long long rs;
    bool partial = honour && range[0] && sscanf(range, "bytes=%llu-", &rs) == 1;
    if (partial && rs >= f->len) {
        snprintf(head, sizeof head,
                 "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */%zu\r\n"
                 "Content-Length: 0\r\nConnection: close\r\n\r\n",
                 f->len);
        send_all(fd, head, strlen(head));
        return;
    }
    if (partial) {
        start = (size_t)rs;
        snprintf(head, sizeof head,
                 "HTTP/1.1 206 Partial Content\r\nContent-Length: %zu\r\n"
                 "Content-Range: bytes %zu-%zu/%zu\r\nConnection: close\r\n\r\n",
                 f->len - start, start, f->len - 1, f->len);
    } else {
        snprintf(head, sizeof head,
                 "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", f->len);
    }
    if (!send_all(fd, head, strlen(head)) || strcmp(method, "HEAD") == 0)
        return;
    size_t end = cut ? f->len / 2 : f->len;
    size_t piece = (end - start) / 16 + 1;
    for (size_t off = start; off < end;) {
        size_t n = end - off < piece ? end - off : piece;
        if (!send_all(fd, f->data + off, n))
            return;
        off += n;
        if (slow)
            sleep_ms(slow);
    }
}

static void *serve(void *arg)
{
    twt_http *h = arg;
    while (!atomic_load(&h->stop)) {
        struct pollfd p = {h->lfd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(h->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        char req[4096];
        size_t n = 0;
        while (n + 1 < sizeof req) {
            struct pollfd q = {fd, POLLIN, 0};
            if (poll(&q, 1, 2000) <= 0)
                break;
            ssize_t got = recv(fd, req + n, sizeof req - 1 - n, 0);
            if (got <= 0)
                break;
            n += (size_t)got;
            req[n] = '\0';
            if (strstr(req, "\r\n\r\n"))
                break;
        }
        req[n] = '\0';
        if (strstr(req, "\r\n\r\n"))
            respond(h, fd, req);
        shutdown(fd, SHUT_RDWR);
        close(fd);
    }
    return NULL;
}

twt_http *twt_http_start(void)
{
    twt_http *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    pthread_mutex_init(&h->mu, NULL);
    h->honour_range = true;
    h->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (h->lfd < 0 || bind(h->lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(h->lfd, 16) != 0 || getsockname(h->lfd, (struct sockaddr *)&a, &al) != 0) {
        if (h->lfd >= 0)
            close(h->lfd);
        free(h);
        return NULL;
    }
    h->port = ntohs(a.sin_port);
    if (pthread_create(&h->thread, NULL, serve, h) != 0) {
        close(h->lfd);
        free(h);
        return NULL;
    }
    return h;
}

void twt_http_stop(twt_http *h)
{
    if (!h)
        return;
    atomic_store(&h->stop, true);
    pthread_join(h->thread, NULL);
    close(h->lfd);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

int twt_http_port(const twt_http *h)
{
    return h->port;
}

void twt_http_add(twt_http *h, const char *path, const void *data, size_t len)
{
    pthread_mutex_lock(&h->mu);
    if (h->n_files < MAX_FILES) {
        file_entry *f = &h->files[h->n_files++];
        snprintf(f->path, sizeof f->path, "%s", path);
        f->data = data;
        f->len = len;
    }
    pthread_mutex_unlock(&h->mu);
}

void twt_http_cut_next(twt_http *h)
{
    pthread_mutex_lock(&h->mu);
    h->cut_next = true;
    pthread_mutex_unlock(&h->mu);
}

void twt_http_set_slow_ms(twt_http *h, unsigned ms)
{
    pthread_mutex_lock(&h->mu);
    h->slow_ms = ms;
    pthread_mutex_unlock(&h->mu);
}

void twt_http_set_honour_range(twt_http *h, bool on)
{
    pthread_mutex_lock(&h->mu);
    h->honour_range = on;
    pthread_mutex_unlock(&h->mu);
}

void twt_http_last_range(twt_http *h, char *out, size_t cap)
{
    pthread_mutex_lock(&h->mu);
    snprintf(out, cap, "%s", h->last_range);
    pthread_mutex_unlock(&h->mu);
}

int twt_http_requests(twt_http *h)
{
    pthread_mutex_lock(&h->mu);
    int n = h->requests;
    pthread_mutex_unlock(&h->mu);
    return n;
}
