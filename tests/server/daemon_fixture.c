#include "daemon_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc_fixture.h"
#include "test_support.h"

int twt_daemon_teardown(void **state)
{
    return tw_test_proc_teardown(state);
}

void twt_daemon_init(twt_daemon *d)
{
    memset(d, 0, sizeof *d);
    d->dir = tw_test_mkdtemp();
    assert_non_null(d->dir);
    snprintf(d->rpc, sizeof d->rpc, "ipc://%s/rpc", d->dir);
    snprintf(d->pub, sizeof d->pub, "ipc://%s/pub", d->dir);
    snprintf(d->log, sizeof d->log, "%s/tokenwired.log", d->dir);
}

tw_client *twt_connect_key(const twt_daemon *d, const char *api_key, unsigned timeout_ms)
{
    tw_client_opts o;
    tw_client_opts_init(&o);
    o.rpc_url = d->rpc;
    o.pub_url = d->pub;
    o.api_key = api_key;
    o.tls_ca_file = d->ca;
    o.tls_server_name = d->server_name;
    o.timeout_ms = timeout_ms;
    o.stream_poll_ms = 200;
    tw_client *c = NULL;
    tw_err err;
    assert_int_equal(tw_client_open(&o, &c, &err), TW_OK);
    return c;
}

tw_client *twt_connect(const twt_daemon *d, unsigned timeout_ms)
{
    return twt_connect_key(d, NULL, timeout_ms);
}

static bool answers_health(void *user)
{
    tw_client *c = user;
    Tokenwire__V1__Reply *rep = NULL;
    tw_status st = tw_client_health(c, NULL, &rep, NULL);
    tw_wire_free_reply(rep);
    return st == TW_OK;
}

void twt_daemon_start(twt_daemon *d, const char *const *extra)
{
    char prog[1024];
    tw_test_build_path(prog, sizeof prog, "server/engine/tokenwired");
    const char *argv[48];
    int n = 0;
    argv[n++] = prog;
    argv[n++] = "--listen";
    argv[n++] = d->rpc;
    argv[n++] = "--publish";
    argv[n++] = d->pub;
    argv[n++] = "--rpc-contexts";
    argv[n++] = "16";
    for (; extra && *extra && n < 46; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    char key_env[256];
    if (d->api_key_env)
        snprintf(key_env, sizeof key_env, "TOKENWIRE_API_KEY=%s", d->api_key_env);
    else
        snprintf(key_env, sizeof key_env, "TOKENWIRE_API_KEY");
    const char *env[] = {key_env, NULL};
    tw_test_spawn_opts o = {.log_path = d->log, .env = env};
    d->pid = tw_test_spawn(argv, &o);
    tw_client *c = twt_connect_key(d, d->api_key_env, 200);
    tw_test_wait_ready(d->pid, answers_health, c, 30000, "tokenwired", d->log);
    tw_client_close(c);
}

void twt_daemon_stop(twt_daemon *d)
{
    tw_test_stop(d->pid, 20000, d->log);
    d->pid = 0;
}

void twt_daemon_kill(twt_daemon *d)
{
    tw_test_kill(d->pid);
    d->pid = 0;
}

void twt_daemon_cleanup(twt_daemon *d)
{
    tw_test_rmtree(d->dir);
    free(d->dir);
    d->dir = NULL;
}
