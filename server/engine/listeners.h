/* The daemon's listeners, and the watch that keeps them accepting.
 *
 * NNG 1.5.2 (Debian 12's) has an IPC listener that stops accepting for good
 * when a peer closes its connection before the 8-byte SP handshake is done:
 * the handshake ends with NNG_ECLOSED, which the listener's accept loop
 * takes for its own close. One `connect(); close();` on the socket path (a
 * probe, a client killed at the wrong moment, a client giving up on its
 * first call while the daemon is busy) then leaves every later client
 * waiting: calls time out, and subscribers never get a chunk. NNG reports
 * the error just as it reports an ordinary disconnect, so a thread connects
 * to each IPC listener every second, as the socket's peer protocol, and
 * opens a fresh listener on the same address when the socket stops taking
 * those connections.
 *
 * Its TLS listener stops the same way, less often: after clients whose TLS
 * handshakes failed (another CA, another server name, plain TCP), on a
 * loaded machine one in a few dozen such rounds left every later client
 * unserved. TCP and TLS listeners are watched too, by a probe that dials
 * them through NNG (TLS without checking the certificate: the probe asks
 * only whether the socket takes the connection). */
#ifndef TWD_LISTENERS_H
#define TWD_LISTENERS_H

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tw/status.h"

typedef struct twd_listener {
    nng_socket sock;
    char *url;
    nng_listener l;
    bool open;  /* l is listening (false after a failed reopen) */
    int peer;   /* the socket's peer protocol, which a probe speaks */
    int misses; /* probes in a row the socket did not take */
    char dial[128]; /* where a TCP probe reaches it ("" for none) */
} twd_listener;

typedef struct twd_listeners {
    twd_listener *v;
    size_t n, cap;
    nng_tls_config *tls; /* for tls+ addresses; not owned */
    /* The watch's pace (0: the defaults, 1 s and 3 s). */
    unsigned probe_every_ms, probe_timeout_ms;
    atomic_ullong reopened;
    atomic_uint probes_taken; /* the probe's IPC pipes the sockets have taken */
    /* The remote addresses of the last TCP pipes the sockets took, where a
     * TCP probe looks for its own. */
    atomic_ullong tcp_taken[16];
    atomic_uint tcp_next;
    atomic_ullong probe_mine;  /* the TCP probe's own local address */
    nng_tls_config *probe_tls; /* the TLS probe's client side; owned */
    pthread_t watch;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    bool watching;
    atomic_bool stop;
} twd_listeners;

/* Listens on url with sock; a tls+ url needs ls->tls. */
tw_status twd_listeners_add(twd_listeners *ls, nng_socket sock, const char *url, tw_err *err);

/* Starts the watch when an ipc://, tcp:// or tls+tcp:// listener was
 * added; call once, after the last add. */
tw_status twd_listeners_watch(twd_listeners *ls, tw_err *err);

/* Stops the watch and frees the list; the listeners close with their
 * sockets. Call before closing the sockets. */
void twd_listeners_free(twd_listeners *ls);

#endif
