#include "probe_tcp.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/protocol/pubsub0/sub.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#include "tokenwire/nng_close.h"

/* NNG's protocol numbers of the peers a probe can speak. */
#define PEER_REQ 0x30
#define PEER_SUB 0x21

static const char *const tcp_schemes[] = {"tcp://",     "tcp4://",     "tcp6://",
                                          "tls+tcp://", "tls+tcp4://", "tls+tcp6://"};

bool twd_probe_tcp_handles(const char *url)
{
    for (size_t i = 0; i < sizeof tcp_schemes / sizeof *tcp_schemes; i++)
        if (strncmp(url, tcp_schemes[i], strlen(tcp_schemes[i])) == 0)
            return true;
    return false;
}

/* An address as one word (family, port and the address's last 32 bits):
 * enough to tell the probe's own connection from the few others that come
 * from this host within a probe's wait. 0 for other families. */
static uint64_t addr_key(const nng_sockaddr *a)
{
    uint32_t host;
    if (a->s_family == NNG_AF_INET) {
        host = a->s_in.sa_addr;
        return (uint64_t)host << 32 | (uint64_t)a->s_in.sa_port << 8 | 4;
    }
    if (a->s_family == NNG_AF_INET6) {
        memcpy(&host, a->s_in6.sa_addr + 12, sizeof host);
        return (uint64_t)host << 32 | (uint64_t)a->s_in6.sa_port << 8 | 6;
    }
    return 0;
}

void twd_probe_tcp_taken(twd_listeners *ls, nng_pipe p)
{
    nng_sockaddr a;
    if (nng_pipe_get_addr(p, NNG_OPT_REMADDR, &a) != 0)
        return;
    uint64_t key = addr_key(&a);
    if (key == 0)
        return;
    unsigned slot =
        atomic_fetch_add(&ls->tcp_next, 1) % (sizeof ls->tcp_taken / sizeof *ls->tcp_taken);
    atomic_store(&ls->tcp_taken[slot], key);
}

static bool was_taken(twd_listeners *ls, uint64_t key)
{
    for (size_t i = 0; i < sizeof ls->tcp_taken / sizeof *ls->tcp_taken; i++)
        if (atomic_load(&ls->tcp_taken[i]) == key)
            return true;
    return false;
}

/* The URL that reaches e's listener from this host: its bound address
 * (the loopback one where it listens on every address) and port, so a
 * listener on port 0 or a host name is reached too. */
static bool dial_url(const twd_listener *e, char *url, size_t size)
{
    if (!twd_probe_tcp_handles(e->url))
        return false;
    nng_sockaddr a;
    if (nng_listener_get_addr(e->l, NNG_OPT_LOCADDR, &a) != 0)
        return false;
    const bool tls = strncmp(e->url, "tls+", 4) == 0;
    char host[INET6_ADDRSTRLEN];
    unsigned port;
    if (a.s_family == NNG_AF_INET) {
        struct in_addr in = {.s_addr = a.s_in.sa_addr};
        if (in.s_addr == htonl(INADDR_ANY))
            in.s_addr = htonl(INADDR_LOOPBACK);
        if (!inet_ntop(AF_INET, &in, host, sizeof host))
            return false;
        port = ntohs(a.s_in.sa_port);
        return snprintf(url, size, "%s://%s:%u", tls ? "tls+tcp" : "tcp", host, port) < (int)size;
    }
    if (a.s_family == NNG_AF_INET6) {
        struct in6_addr in6;
        memcpy(&in6, a.s_in6.sa_addr, sizeof in6);
        if (IN6_IS_ADDR_UNSPECIFIED(&in6))
            in6 = in6addr_loopback;
        if (!inet_ntop(AF_INET6, &in6, host, sizeof host))
            return false;
        port = ntohs(a.s_in6.sa_port);
        return snprintf(url, size, "%s://[%s]:%u", tls ? "tls+tcp" : "tcp", host, port) < (int)size;
    }
    return false;
}

void twd_probe_tcp_address(twd_listener *e)
{
    if (!dial_url(e, e->dial, sizeof e->dial))
        e->dial[0] = 0;
}

bool twd_probe_tcp_pin_port(twd_listener *e)
{
    size_t len = strlen(e->url);
    if (!twd_probe_tcp_handles(e->url) || len < 2 || strcmp(e->url + len - 2, ":0") != 0)
        return true;
    nng_sockaddr a;
    if (nng_listener_get_addr(e->l, NNG_OPT_LOCADDR, &a) != 0)
        return false;
    unsigned port;
    if (a.s_family == NNG_AF_INET)
        port = ntohs(a.s_in.sa_port);
    else if (a.s_family == NNG_AF_INET6)
        port = ntohs(a.s_in6.sa_port);
    else
        return false;
    char *url = malloc(len + 8);
    if (!url)
        return false;
    snprintf(url, len + 8, "%.*s:%u", (int)(len - 2), e->url, port);
    free(e->url);
    e->url = url;
    return true;
}

/* The probe socket's own pipe: its local address, once connected. */
static void probe_pipe(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    atomic_ullong *key = arg;
    nng_sockaddr a;
    if (ev == NNG_PIPE_EV_ADD_POST && nng_pipe_get_addr(p, NNG_OPT_LOCADDR, &a) == 0)
        atomic_store(key, addr_key(&a));
}

/* The client side of the TLS probe, made on first use. */
static nng_tls_config *probe_tls(twd_listeners *ls)
{
    if (ls->probe_tls)
        return ls->probe_tls;
    nng_tls_config *cfg;
    if (nng_tls_config_alloc(&cfg, NNG_TLS_MODE_CLIENT) != 0)
        return NULL;
    if (nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_NONE) != 0) {
        nng_tls_config_free(cfg);
        return NULL;
    }
    ls->probe_tls = cfg;
    return cfg;
}

bool twd_probe_tcp(twd_listeners *ls, const twd_listener *e)
{
    const char *url = e->dial;
    if (!url[0])
        return true;
    nng_socket s;
    int rv = e->peer == PEER_REQ   ? nng_req0_open(&s)
             : e->peer == PEER_SUB ? nng_sub0_open(&s)
                                   : NNG_ENOTSUP;
    if (rv != 0)
        return true;
    atomic_store(&ls->probe_mine, 0);
    nng_dialer d;
    bool judged = nng_pipe_notify(s, NNG_PIPE_EV_ADD_POST, probe_pipe, &ls->probe_mine) == 0 &&
                  nng_dialer_create(&d, s, url) == 0;
    if (judged && strncmp(url, "tls+", 4) == 0) {
        nng_tls_config *cfg = probe_tls(ls);
        judged = cfg && nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg) == 0;
    }
    judged = judged && nng_dialer_start(d, NNG_FLAG_NONBLOCK) == 0;
    bool ok = !judged;
    const nng_time deadline = nng_clock() + ls->probe_timeout_ms;
    while (!ok && !atomic_load(&ls->stop) && nng_clock() < deadline) {
        uint64_t key = atomic_load(&ls->probe_mine);
        ok = key != 0 && was_taken(ls, key);
        if (!ok)
            nng_msleep(2);
    }
    /* A stop cut the wait short: no judgement either. */
    ok = ok || atomic_load(&ls->stop);
    nng_pipe_notify(s, NNG_PIPE_EV_ADD_POST, NULL, NULL);
    (void)tw_nng_close_bounded(&s, 1);
    return ok;
}
