/* The listener watch's probe for tcp:// and tls+tcp:// listeners (see
 * listeners.h): a connection dialed through NNG as the socket's peer
 * protocol, recognised on the socket's side by its address. */
#ifndef TWD_PROBE_TCP_H
#define TWD_PROBE_TCP_H

#include <stdbool.h>
#include <stdint.h>

#include "listeners.h"

/* Whether url is one this probe can dial (tcp, tcp4, tcp6 and their tls+
 * forms). */
bool twd_probe_tcp_handles(const char *url);

/* Where a probe reaches e's open listener from this host, into e->dial
 * ("" where there is no such address). Taken when the listener opens, as
 * a listener that has stopped may no longer tell its address. */
void twd_probe_tcp_address(twd_listener *e);

/* A listener asked for port 0 gets one from the system at its first open;
 * a reopen must take that port again, not another, or its clients lose it.
 * Rewrites e->url's ":0" to the port e's open listener is bound to; false
 * only when that was needed and could not be done (out of memory, or the
 * listener cannot tell its address). */
bool twd_probe_tcp_pin_port(twd_listener *e);

/* Records a TCP pipe the socket took (its remote address), for a probe
 * waiting on its own; other pipes are ignored. Called from the sockets'
 * pipe notifications. */
void twd_probe_tcp_taken(twd_listeners *ls, nng_pipe p);

/* Dials e's listener and waits, until ls's probe timeout, for e's socket
 * to take the connection. False only when the socket did not take it;
 * a probe that cannot be made (no socket, no address) is no judgement and
 * answers true. */
bool twd_probe_tcp(twd_listeners *ls, const twd_listener *e);

#endif
