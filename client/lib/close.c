/* Closing sockets with a bound on the wait.
 *
 * NNG 1.5 (Debian 12's) can strand a socket's receive when the socket
 * closes while a message is arriving: the transport's read callback submits
 * the next read on an I/O handle the close has already stopped, that read
 * never completes, and nng_close waits for it forever (seen about once in
 * 500 CLI runs on a loaded machine, in the protocol's pipe stop, with the
 * pipe's receive still queued on the closed IPC pipe). So sockets close on a
 * thread of their own; a close that takes longer than CLOSE_WAIT_MS is left
 * to it, and tw_client_fini then does not wait on NNG's global state. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "client_internal.h"
#include "tokenwire/nng_close.h"

#define CLOSE_WAIT_MS 2000

typedef struct closer {
    nng_socket socks[2];
    int n;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int refs; /* the waiter and the closing thread; the last one frees */
} closer;

static atomic_int abandoned;

static void closer_release(closer *k)
{
    pthread_mutex_lock(&k->mu);
    int left = --k->refs;
    pthread_mutex_unlock(&k->mu);
    if (left == 0) {
        pthread_cond_destroy(&k->cv);
        pthread_mutex_destroy(&k->mu);
        free(k);
    }
}

static void *close_all(void *arg)
{
    closer *k = arg;
    for (int i = 0; i < k->n; i++)
        nng_close(k->socks[i]);
    pthread_mutex_lock(&k->mu);
    k->done = true;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    closer_release(k);
    return NULL;
}

static bool closer_init(closer *k)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        return false;
    bool ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
              pthread_cond_init(&k->cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (ok && pthread_mutex_init(&k->mu, NULL) != 0) {
        pthread_cond_destroy(&k->cv);
        ok = false;
    }
    return ok;
}

bool tw_nng_close_bounded(const nng_socket *socks, int n)
{
    closer *k = calloc(1, sizeof *k);
    if (!k || n < 1 || n > 2 || !closer_init(k)) {
        free(k);
        for (int i = 0; i < n; i++)
            nng_close(socks[i]);
        return true;
    }
    for (int i = 0; i < n; i++)
        k->socks[i] = socks[i];
    k->n = n;
    k->refs = 2;
    pthread_t t;
    if (pthread_create(&t, NULL, close_all, k) != 0) {
        k->refs = 1;
        close_all(k);
        return true;
    }
    pthread_detach(t);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += CLOSE_WAIT_MS / 1000;
    until.tv_nsec += (long)(CLOSE_WAIT_MS % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&k->mu);
    int rc = 0;
    while (!k->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&k->cv, &k->mu, &until);
    bool done = k->done;
    if (!done)
        atomic_fetch_add(&abandoned, 1);
    pthread_mutex_unlock(&k->mu);
    closer_release(k);
    return done;
}

int tw_client_abandoned_closes(void)
{
    return atomic_load(&abandoned);
}

void tw_client_fini(void)
{
    /* nng_fini would wait on the stuck close's socket as that close does */
    if (atomic_load(&abandoned) == 0)
        nng_fini();
}
