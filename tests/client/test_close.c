/* tw_client_close returns promptly while a publisher keeps sending: a real
 * PUB socket publishes without pause while clients dial it (and a REP
 * socket), and each client is closed while messages arrive on its SUB
 * socket, the moment at which NNG 1.5's own close can wait forever. Each
 * close must return within the bound tw_client_close promises. The
 * test's own sockets close the same way (tw_nng_close_bounded). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <nng/nng.h>
#include <nng/protocol/pubsub0/pub.h>
#include <nng/protocol/reqrep0/rep.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_internal.h"
#include "test_support.h"
#include "tokenwire/client.h"
#include "tokenwire/nng_close.h"

#define ROUNDS 8

typedef struct publisher {
    nng_socket pub;
    atomic_bool stop;
} publisher;

static void *publish(void *arg)
{
    publisher *p = arg;
    char msg[256];
    memset(msg, 'x', sizeof msg);
    while (!atomic_load(&p->stop))
        (void)nng_send(p->pub, msg, sizeof msg, 0);
    return NULL;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void test_close_while_messages_arrive(void **state)
{
    (void)state;
    char *dir = tw_test_mkdtemp();
    char rpc[4200], pub[4200];
    snprintf(rpc, sizeof rpc, "ipc://%s/rpc", dir);
    snprintf(pub, sizeof pub, "ipc://%s/pub", dir);
    nng_socket rep;
    publisher p = {0};
    assert_int_equal(nng_rep0_open(&rep), 0);
    assert_int_equal(nng_listen(rep, rpc, NULL, 0), 0);
    assert_int_equal(nng_pub0_open(&p.pub), 0);
    assert_int_equal(nng_listen(p.pub, pub, NULL, 0), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, publish, &p), 0);
    double worst = 0;
    for (int i = 0; i < ROUNDS; i++) {
        tw_client_opts o;
        tw_client_opts_init(&o);
        o.rpc_url = rpc;
        o.pub_url = pub;
        tw_client *c;
        assert_int_equal(tw_client_open(&o, &c, NULL), TW_OK);
        /* long enough for the SUB socket to connect and receive */
        struct timespec pause = {0, (long)(5 + i % 7) * 1000000L};
        nanosleep(&pause, NULL);
        double t0 = now_ms();
        tw_client_close(c);
        double took = now_ms() - t0;
        if (took > worst)
            worst = took;
    }
    atomic_store(&p.stop, true);
    pthread_join(t, NULL);
    /* the publisher's side can wait on the same NNG defect */
    nng_socket server[2] = {p.pub, rep};
    tw_nng_close_bounded(server, 2);
    print_message("worst close %.0f ms, %d of %d left to finish on their own\n", worst,
                  tw_client_abandoned_closes(), ROUNDS);
    /* two seconds of waiting, and a margin for a loaded, sanitized run */
    assert_true(worst < 4000);
    tw_test_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_close_while_messages_arrive),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tw_client_fini();
    return rc;
}
