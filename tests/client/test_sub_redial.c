/* A watcher whose SUB dialer met an engine hanging up mid-handshake (NNG
 * 1.5.2's dialer then stops redialing) still hears the engine's streams
 * once it is back: a real PUB socket takes the place of the one that hung
 * up, and publishes real frames. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <nng/nng.h>
#include <nng/protocol/pubsub0/pub.h>
#include <nng/supplemental/util/platform.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc_fixture.h"
#include "test_support.h"
#include "tokenwire/client.h"
#include "tokenwire/wire.h"

typedef struct watcher {
    tw_client *c;
    tw_status st;
    tw_err err;
    atomic_bool done;
    uint64_t seq;
} watcher;

static int first_chunk(void *user, const Tokenwire__V1__StreamChunk *ch)
{
    watcher *w = user;
    w->seq = ch->seq;
    return 1; /* one is enough */
}

static void *watch_main(void *arg)
{
    watcher *w = arg;
    w->st = tw_client_watch(w->c, first_chunk, w, 20000, &w->err);
    atomic_store(&w->done, true);
    return NULL;
}

static void test_watch_hears_engine_back(void **state)
{
    (void)state;
    char *dir = tw_test_mkdtemp();
    assert_non_null(dir);
    char rpc[600], pub[600];
    snprintf(rpc, sizeof rpc, "ipc://%s/rpc", dir);
    snprintf(pub, sizeof pub, "ipc://%s/pub", dir);

    tw_test_hanger *h = tw_test_hanger_start(pub + strlen("ipc://"));
    tw_client_opts o;
    tw_client_opts_init(&o);
    o.rpc_url = rpc;
    o.pub_url = pub;
    tw_client *c = NULL;
    tw_err err;
    assert_int_equal(tw_client_open(&o, &c, &err), TW_OK);
    static watcher w;
    memset(&w, 0, sizeof w);
    w.c = c;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, watch_main, &w), 0);
    nng_msleep(1500);
    assert_true(tw_test_hanger_stop(h) > 0);

    /* The engine is back: publish one chunk every 100 ms until heard. */
    nng_socket ps;
    assert_int_equal(nng_pub0_open(&ps), 0);
    assert_int_equal(nng_listen(ps, pub, NULL, 0), 0);
    Tokenwire__V1__StreamChunk ch = TOKENWIRE__V1__STREAM_CHUNK__INIT;
    ch.stream_id = "back-1";
    ch.has_seq = 1;
    ch.seq = 7;
    uint8_t *frame = NULL;
    size_t len = 0;
    assert_int_equal(tw_wire_encode_frame(&ch, &frame, &len, &err), TW_OK);
    for (int i = 0; i < 250 && !atomic_load(&w.done); i++) {
        assert_int_equal(nng_send(ps, frame, len, 0), 0);
        nng_msleep(100);
    }
    free(frame);
    pthread_join(t, NULL);
    if (w.st != TW_OK)
        fail_msg("the watcher never heard the engine again: %s", w.err.msg);
    assert_int_equal(w.seq, 7);

    tw_client_close(c);
    nng_close(ps);
    tw_test_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_watch_hears_engine_back),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tw_client_fini();
    return rc;
}
