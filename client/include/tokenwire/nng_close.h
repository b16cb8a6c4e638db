/* Closing NNG sockets with a bound on the wait, for the client library and
 * for servers built on NNG (tokenwired uses it for its own sockets).
 *
 * NNG 1.5 (Debian 12's) can leave nng_close waiting forever on a message
 * that was arriving as the close began. tw_nng_close_bounded closes on a
 * thread of its own and waits about two seconds; a close that takes longer
 * is left to finish there and counted by tw_client_abandoned_closes
 * (tokenwire/client.h). */
#ifndef TOKENWIRE_NNG_CLOSE_H
#define TOKENWIRE_NNG_CLOSE_H

#include <nng/nng.h>
#include <stdbool.h>

/* Closes socks[0..n) (n is 1 or 2), in order. True when every close
 * finished; false when they were left to finish on their own, in which case
 * whatever NNG may still touch (the sockets' aios) must not be freed. */
bool tw_nng_close_bounded(const nng_socket *socks, int n);

#endif
