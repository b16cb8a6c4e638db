/* tokenwired over TLS, a client living through an engine restart, and
 * both ends living through a peer that hangs up mid-handshake. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon_fixture.h"

#include "proc_fixture.h"
#include "test_support.h"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Runs argv with stdout/stderr to a fresh log (NULL: discarded); returns
 * the exit code. */
static int run(const char *const *argv, const char *log)
{
    if (log)
        unlink(log);
    tw_test_spawn_opts o = {.log_path = log ? log : "/dev/null", .stdin_null = true};
    return tw_test_run(argv, &o, 60000);
}

/* Health calls until one is answered, at most `tries`; the last status. */
static tw_status health_within_tries(tw_client *c, int tries, tw_err *err)
{
    tw_status st = TW_UNAVAILABLE;
    for (int i = 0; i < tries && st != TW_OK; i++) {
        Tokenwire__V1__Reply *rep = NULL;
        st = tw_client_health(c, NULL, &rep, err);
        tw_wire_free_reply(rep);
    }
    return st;
}

static void test_tls(void **state)
{
    (void)state;
    if (!tw_test_have_openssl()) {
        print_message("SKIPPED (no openssl command to make a test certificate)\n");
        skip();
        return;
    }
    twt_daemon d;
    twt_daemon_init(&d);
    tw_test_make_cert(d.dir, "server");
    tw_test_make_cert(d.dir, "other");
    char cert[600], key[600], other[600];
    snprintf(cert, sizeof cert, "%s/server.pem", d.dir);
    snprintf(key, sizeof key, "%s/server.key", d.dir);
    snprintf(other, sizeof other, "%s/other.pem", d.dir);
    snprintf(d.rpc, sizeof d.rpc, "tls+tcp://127.0.0.1:%d", tw_test_free_port());
    d.ca = cert;
    d.server_name = "localhost";
    const char *extra[] = {"--tls-cert", cert, "--tls-key", key, NULL};
    twt_daemon_start(&d, extra);

    /* The right CA: served. */
    tw_client *c = twt_connect(&d, 5000);
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    assert_int_equal(tw_client_health(c, NULL, &rep, &err), TW_OK);
    assert_non_null(rep->health->version);
    tw_wire_free_reply(rep);
    tw_client_close(c);

    /* No CA: refused when the client is made. */
    tw_client_opts o;
    tw_client_opts_init(&o);
    o.rpc_url = d.rpc;
    o.pub_url = "";
    tw_client *bad = NULL;
    assert_int_equal(tw_client_open(&o, &bad, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "CA"));
    assert_null(bad);

    /* Another CA, a wrong server name, or plain TCP: the handshake never
     * completes and the call ends UNAVAILABLE within its timeout. */
    struct {
        const char *url_scheme_tcp;
        const char *ca;
        const char *name;
    } cases[] = {{NULL, other, "localhost"}, {NULL, cert, "not-this-host"}, {"tcp", NULL, NULL}};
    for (size_t i = 0; i < 3; i++) {
        char url[300];
        if (cases[i].url_scheme_tcp)
            snprintf(url, sizeof url, "tcp://%s", d.rpc + strlen("tls+tcp://"));
        else
            snprintf(url, sizeof url, "%s", d.rpc);
        tw_client_opts_init(&o);
        o.rpc_url = url;
        o.pub_url = "";
        o.tls_ca_file = cases[i].ca;
        o.tls_server_name = cases[i].name;
        o.timeout_ms = 600;
        assert_int_equal(tw_client_open(&o, &bad, &err), TW_OK);
        uint64_t t0 = now_ms();
        tw_status st = tw_client_health(bad, NULL, &rep, &err);
        uint64_t spent = now_ms() - t0;
        assert_null(rep);
        assert_true(st == TW_UNAVAILABLE || st == TW_DEADLINE_EXCEEDED);
        assert_true(spent < 3000);
        tw_client_close(bad);
    }

    /* The engine is unharmed by the failed handshakes. They can stop NNG
     * 1.5's TLS listener for good (on a loaded machine, about one round of
     * them in a few dozen); the daemon's watch then listens again within
     * some seconds, so the first call may go unanswered. */
    c = twt_connect(&d, 5000);
    assert_int_equal(health_within_tries(c, 4, &err), TW_OK);
    tw_client_close(c);
    twt_daemon_stop(&d);
    twt_daemon_cleanup(&d);
}

static void test_tls_listen_needs_a_certificate(void **state)
{
    (void)state;
    char *dir = tw_test_mkdtemp();
    assert_non_null(dir);
    char prog[1024], url[64], pub[600], log[600];
    snprintf(prog, sizeof prog, "%s/server/engine/tokenwired", getenv("TW_BUILD_DIR"));
    snprintf(url, sizeof url, "tls+tcp://127.0.0.1:%d", tw_test_free_port());
    snprintf(pub, sizeof pub, "ipc://%s/pub", dir);
    snprintf(log, sizeof log, "%s/log", dir);
    const char *argv[] = {prog, "--listen", url, "--publish", pub, NULL};
    assert_int_equal(run(argv, log), 1);
    char *text = tw_test_read_file(log, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "--tls-cert"));
    free(text);
    /* A certificate file that is not one. */
    const char *argv2[] = {prog, "--listen", url, "--publish", pub, "--tls-cert", log,
                           "--tls-key", log, NULL};
    assert_int_equal(run(argv2, log), 1);
    text = tw_test_read_file(log, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "TLS certificate"));
    free(text);
    tw_test_rmtree(dir);
    free(dir);
}

static void test_restart(void **state)
{
    (void)state;
    twt_daemon d;
    twt_daemon_init(&d);
    twt_daemon_start(&d, NULL);
    tw_client *c = twt_connect(&d, 800);
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    assert_int_equal(tw_client_health(c, NULL, &rep, &err), TW_OK);
    tw_wire_free_reply(rep);

    /* Engine gone: UNAVAILABLE once the timeout has passed. A call that
     * meets the dying connection goes out again (Health only reads), and
     * with no connection left waits out the rest of its timeout. */
    twt_daemon_kill(&d);
    uint64_t t0 = now_ms();
    assert_int_equal(tw_client_health(c, NULL, &rep, &err), TW_UNAVAILABLE);
    uint64_t spent = now_ms() - t0;
    assert_null(rep);
    assert_true(spent >= 700 && spent < 2000);
    assert_non_null(strstr(err.msg, "reach"));

    /* Back on the same address: the same client is served again. */
    twt_daemon_start(&d, NULL);
    assert_int_equal(health_within_tries(c, 10, &err), TW_OK);
    assert_int_equal(tw_client_health(c, NULL, &rep, &err), TW_OK);
    assert_true(rep->health->uptime_s < 5); /* the new process */
    tw_wire_free_reply(rep);

    /* A graceful restart too. */
    twt_daemon_stop(&d);
    twt_daemon_start(&d, NULL);
    assert_int_equal(health_within_tries(c, 10, &err), TW_OK);
    tw_client_close(c);
    twt_daemon_stop(&d);
    twt_daemon_cleanup(&d);
}

/* A peer that hangs up in the middle of the handshake stops NNG 1.5's IPC
 * listener; tokenwired notices and listens again (server/engine/listeners.h),
 * and clients are served once more. */
static void test_hang_up_mid_handshake(void **state)
{
    (void)state;
    twt_daemon d;
    twt_daemon_init(&d);
    twt_daemon_start(&d, NULL);
    const char *path = d.rpc + strlen("ipc://");
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    tw_status st = TW_OK;
    for (int tries = 0; tries < 10 && st == TW_OK; tries++) {
        tw_test_hang_up_unix(path);
        tw_client *c = twt_connect(&d, 1000);
        st = tw_client_health(c, NULL, &rep, &err);
        tw_wire_free_reply(rep);
        rep = NULL;
        tw_client_close(c);
    }
    if (st == TW_OK)
        fail_msg("ten hang-ups in a row did not stop the listener");
    /* Calls meet the stopped listener's connection and time out until the
     * listener is closed to be opened again; the one waiting then (a
     * read-only call) goes out again on the new listener instead of failing
     * with the dropped connection, and is served. */
    tw_client *c = twt_connect(&d, 2000);
    uint64_t t0 = now_ms();
    do {
        st = tw_client_health(c, NULL, &rep, &err);
        tw_wire_free_reply(rep);
        rep = NULL;
        if (st != TW_OK && strstr(err.msg, "reset"))
            fail_msg("a Health call failed with its dropped connection: %s", err.msg);
    } while (st != TW_OK && now_ms() - t0 < 20000);
    if (st != TW_OK)
        fail_msg("not served within 20 s: %s", err.msg);
    print_message("served again %llu ms later\n", (unsigned long long)(now_ms() - t0));
    tw_client_close(c);
    char *log = tw_test_read_file(d.log, NULL);
    assert_non_null(log);
    if (!strstr(log, "stopped taking connections; listening again"))
        fail_msg("the log does not say the listener was reopened: %s", log);
    free(log);
    twt_daemon_stop(&d);
    twt_daemon_cleanup(&d);
}

/* A client whose dialer met an engine hanging up mid-handshake (NNG 1.5.2
 * then stops redialing) still reaches the engine once it is back. */
static void test_client_redials_after_hang_up(void **state)
{
    (void)state;
    twt_daemon d;
    twt_daemon_init(&d);
    tw_test_hanger *h = tw_test_hanger_start(d.rpc + strlen("ipc://"));
    tw_client *c = twt_connect(&d, 800);
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    assert_int_equal(tw_client_health(c, NULL, &rep, &err), TW_UNAVAILABLE);
    assert_true(tw_test_hanger_stop(h) > 0);

    twt_daemon_start(&d, NULL);
    tw_status st = health_within_tries(c, 10, &err);
    if (st != TW_OK)
        fail_msg("the client never reached the engine again: %s", err.msg);
    tw_client_close(c);
    twt_daemon_stop(&d);
    twt_daemon_cleanup(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_tls, twt_daemon_teardown),
        cmocka_unit_test_teardown(test_tls_listen_needs_a_certificate, twt_daemon_teardown),
        cmocka_unit_test_teardown(test_restart, twt_daemon_teardown),
        cmocka_unit_test_teardown(test_hang_up_mid_handshake, twt_daemon_teardown),
        cmocka_unit_test_teardown(test_client_redials_after_hang_up, twt_daemon_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tw_client_fini(); /* lets NNG finish freeing closed sockets before the leak check */
    return rc;
}
