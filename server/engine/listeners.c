#include "listeners.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <nng/supplemental/util/platform.h>

#include "probe_tcp.h"
#include "tw/log.h"

#define IPC_SCHEME "ipc://"
/* How often each listener is probed, how long the socket may take to
 * accept the probe, and how many probes in a row must go untaken before the
 * listener is reopened. Closing a listener also closes the pipes it
 * accepted (their clients reconnect, streams resume), so a false alarm has
 * a price: a daemon busy under a sanitizer on two loaded cores takes a
 * connection within milliseconds, far inside these bounds. */
#define PROBE_EVERY_MS_DEFAULT   1000
#define PROBE_TIMEOUT_MS_DEFAULT 3000
#define PROBE_MISSES             2

static tw_status open_listener(twd_listeners *ls, twd_listener *e, tw_err *err)
{
    nng_listener l;
    int rv = nng_listener_create(&l, e->sock, e->url);
    if (rv != 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "cannot listen on %s: %s", e->url,
                         nng_strerror(rv));
    if (strncmp(e->url, "tls+", 4) == 0) {
        if (!ls->tls) {
            nng_listener_close(l);
            return tw_errorf(err, TW_INVALID_ARGUMENT, "%s needs --tls-cert and --tls-key", e->url);
        }
        rv = nng_listener_set_ptr(l, NNG_OPT_TLS_CONFIG, ls->tls);
        if (rv != 0) {
            nng_listener_close(l);
            return tw_errorf(err, TW_INVALID_ARGUMENT, "TLS on %s: %s", e->url, nng_strerror(rv));
        }
    }
    rv = nng_listener_start(l, 0);
    if (rv != 0) {
        nng_listener_close(l);
        return tw_errorf(err, TW_UNAVAILABLE, "cannot listen on %s: %s", e->url, nng_strerror(rv));
    }
    e->l = l;
    e->open = true;
    e->misses = 0;
    if (!twd_probe_tcp_pin_port(e)) {
        nng_listener_close(l);
        e->open = false;
        return tw_errorf(err, TW_INTERNAL, "listening on %s: cannot learn the port it was given",
                         e->url);
    }
    twd_probe_tcp_address(e);
    return TW_OK;
}

/* Counts the IPC probe's own pipes (this process at the other end) as the
 * socket takes them, and notes the TCP ones for the TCP probe. */
static void pipe_added(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    twd_listeners *ls = arg;
    uint64_t pid;
    if (ev != NNG_PIPE_EV_ADD_POST)
        return;
    if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &pid) == 0) {
        if (pid == (uint64_t)getpid())
            atomic_fetch_add(&ls->probes_taken, 1);
        return;
    }
    twd_probe_tcp_taken(ls, p);
}

tw_status twd_listeners_add(twd_listeners *ls, nng_socket sock, const char *url, tw_err *err)
{
    if (ls->watching)
        return tw_errorf(err, TW_FAILED_PRECONDITION, "listeners are added before the watch");
    if (ls->n == ls->cap) {
        size_t cap = ls->cap ? ls->cap * 2 : 4;
        twd_listener *v = realloc(ls->v, cap * sizeof *v);
        if (!v)
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
        ls->v = v;
        ls->cap = cap;
    }
    twd_listener *e = &ls->v[ls->n];
    memset(e, 0, sizeof *e);
    e->sock = sock;
    if (nng_socket_get_int(sock, NNG_OPT_PEER, &e->peer) != 0 ||
        nng_pipe_notify(sock, NNG_PIPE_EV_ADD_POST, pipe_added, ls) != 0)
        e->peer = -1; /* not watched */
    if (!(e->url = strdup(url)))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    tw_status st = open_listener(ls, e, err);
    if (st != TW_OK) {
        free(e->url);
        return st;
    }
    ls->n++;
    return TW_OK;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until fd is ready for events, the deadline passes or the watch
 * stops (checked every 100 ms, so that stopping is never held up). */
static bool wait_ready(int fd, short events, int64_t deadline, atomic_bool *stop)
{
    for (;;) {
        int64_t left = deadline - mono_ms();
        if (left <= 0 || atomic_load(stop))
            return false;
        struct pollfd p = {.fd = fd, .events = events};
        int rv = poll(&p, 1, left < 100 ? (int)left : 100);
        if (rv > 0)
            return (p.revents & events) != 0;
        if (rv < 0 && errno != EINTR)
            return false;
    }
}

/* Moves all of buf through fd, one way: out (send) or in (recv). */
static bool move_all(int fd, unsigned char *buf, size_t len, bool out, int64_t deadline,
                     atomic_bool *stop)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = out ? send(fd, buf + done, len - done, MSG_NOSIGNAL)
                        : recv(fd, buf + done, len - done, 0);
        if (n > 0)
            done += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else if (n < 0 && errno == EAGAIN && wait_ready(fd, out ? POLLOUT : POLLIN, deadline, stop))
            continue;
        else
            return false;
    }
    return true;
}

/* Sends our 8-byte SP header in full and reads the listener's in full, so
 * that the probe's later hang-up is an ordinary disconnect, never the
 * cut-short handshake that stops the listener. */
static bool handshake(int fd, int peer, int64_t deadline, atomic_bool *stop)
{
    unsigned char hello[8] = {0, 'S', 'P', 0, (unsigned char)(peer >> 8), (unsigned char)peer,
                              0, 0};
    unsigned char got[8];
    return move_all(fd, hello, sizeof hello, true, deadline, stop) &&
           move_all(fd, got, sizeof got, false, deadline, stop) && got[0] == 0 && got[1] == 'S' &&
           got[2] == 'P' && got[3] == 0;
}

/* A stopped listener still completes handshakes (its transport keeps
 * accepting) but never hands the pipes to the socket, so the probe holds
 * its connection open until the socket has taken it. */
static bool serving(twd_listeners *ls, const twd_listener *e, const char *path)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof a.sun_path)
        return true; /* NNG could not have listened there either */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return true; /* out of descriptors: no judgement */
    memcpy(a.sun_path, path, len);
    const unsigned before = atomic_load(&ls->probes_taken);
    const int64_t deadline = mono_ms() + ls->probe_timeout_ms;
    bool ok = connect(fd, (const struct sockaddr *)&a, sizeof a) == 0 &&
              handshake(fd, e->peer, deadline, &ls->stop);
    if (ok) {
        ok = false;
        while (!ok && !atomic_load(&ls->stop) && mono_ms() < deadline) {
            ok = atomic_load(&ls->probes_taken) != before;
            if (!ok)
                nng_msleep(2);
        }
    }
    close(fd);
    return ok;
}

/* A listener the probe could not reach: opened again on its address. */
static void reopen(twd_listeners *ls, twd_listener *e)
{
    bool was_open = e->open;
    if (e->open) {
        tw_warn("the listener on %s stopped taking connections; listening again", e->url);
        nng_listener_close(e->l);
        e->open = false;
    }
    tw_err err;
    if (open_listener(ls, e, &err) == TW_OK)
        atomic_fetch_add(&ls->reopened, 1);
    else if (was_open)
        tw_warn("%s (trying again every %u ms)", err.msg, ls->probe_every_ms);
}

static bool is_ipc(const twd_listener *e)
{
    return strncmp(e->url, IPC_SCHEME, strlen(IPC_SCHEME)) == 0;
}

static bool watched(const twd_listener *e)
{
    return e->peer >= 0 && (is_ipc(e) || twd_probe_tcp_handles(e->url));
}

static void *watch_main(void *arg)
{
    twd_listeners *ls = arg;
    pthread_mutex_lock(&ls->mu);
    while (!atomic_load(&ls->stop)) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += ls->probe_every_ms / 1000;
        until.tv_nsec += (long)(ls->probe_every_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (!atomic_load(&ls->stop) && pthread_cond_timedwait(&ls->wake, &ls->mu, &until) == 0)
            ;
        if (atomic_load(&ls->stop))
            break;
        pthread_mutex_unlock(&ls->mu);
        for (size_t i = 0; i < ls->n; i++) {
            twd_listener *e = &ls->v[i];
            if (!watched(e) || atomic_load(&ls->stop))
                continue;
            if (e->open &&
                (is_ipc(e) ? serving(ls, e, e->url + strlen(IPC_SCHEME)) : twd_probe_tcp(ls, e)))
                e->misses = 0;
            else if (!atomic_load(&ls->stop) && (!e->open || ++e->misses >= PROBE_MISSES))
                reopen(ls, e);
        }
        pthread_mutex_lock(&ls->mu);
    }
    pthread_mutex_unlock(&ls->mu);
    return NULL;
}

tw_status twd_listeners_watch(twd_listeners *ls, tw_err *err)
{
    bool any = false;
    for (size_t i = 0; i < ls->n; i++)
        any = any || watched(&ls->v[i]);
    if (!any || ls->watching)
        return TW_OK;
    if (!ls->probe_every_ms)
        ls->probe_every_ms = PROBE_EVERY_MS_DEFAULT;
    if (!ls->probe_timeout_ms)
        ls->probe_timeout_ms = PROBE_TIMEOUT_MS_DEFAULT;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&ls->mu, NULL);
    pthread_cond_init(&ls->wake, &ca);
    pthread_condattr_destroy(&ca);
    atomic_store(&ls->stop, false);
    int rv = pthread_create(&ls->watch, NULL, watch_main, ls);
    if (rv != 0) {
        pthread_cond_destroy(&ls->wake);
        pthread_mutex_destroy(&ls->mu);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "cannot start the listener watch: %s",
                         strerror(rv));
    }
    ls->watching = true;
    return TW_OK;
}

void twd_listeners_free(twd_listeners *ls)
{
    if (ls->watching) {
        pthread_mutex_lock(&ls->mu);
        atomic_store(&ls->stop, true);
        pthread_cond_signal(&ls->wake);
        pthread_mutex_unlock(&ls->mu);
        /* The watch wakes every 100 ms at most; only a listener close that
         * NNG never finishes (as its socket closes can strand, see
         * tokenwire/nng_close.h) would hold it. Then it is left, with the
         * list it reads, to the exit that follows. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 5;
        if (pthread_timedjoin_np(ls->watch, NULL, &until) != 0) {
            tw_warn("the listener watch did not stop within 5 s; left to the exit");
            pthread_detach(ls->watch);
            return;
        }
        pthread_cond_destroy(&ls->wake);
        pthread_mutex_destroy(&ls->mu);
    }
    if (ls->probe_tls)
        nng_tls_config_free(ls->probe_tls);
    for (size_t i = 0; i < ls->n; i++) {
        if (ls->v[i].peer >= 0)
            nng_pipe_notify(ls->v[i].sock, NNG_PIPE_EV_ADD_POST, NULL, NULL);
        free(ls->v[i].url);
    }
    free(ls->v);
    memset(ls, 0, sizeof *ls);
}
