#include "daemon_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_support.h"

#define MAX_RUNNING 8
static pid_t running[MAX_RUNNING];

static void track(pid_t pid, bool on)
{
    for (int i = 0; i < MAX_RUNNING; i++) {
        if (on && running[i] == 0) {
            running[i] = pid;
            return;
        }
        if (!on && running[i] == pid) {
            running[i] = 0;
            return;
        }
    }
}

int twt_daemon_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < MAX_RUNNING; i++) {
        if (running[i] > 0) {
            kill(running[i], SIGKILL);
            waitpid(running[i], NULL, 0);
            running[i] = 0;
        }
    }
    return 0;
}

void twt_daemon_init(twt_daemon *d)
{
    memset(d, 0, sizeof *d);
    d->dir = tw_test_mkdtemp();
    assert_non_null(d->dir);
    snprintf(d->rpc, sizeof d->rpc, "ipc://%s/rpc", d->dir);
    snprintf(d->pub, sizeof d->pub, "ipc://%s/pub", d->dir);
}

tw_client *twt_connect(const twt_daemon *d, unsigned timeout_ms)
{
    tw_client_opts o;
    tw_client_opts_init(&o);
    o.rpc_url = d->rpc;
    o.pub_url = d->pub;
    o.tls_ca_file = d->ca;
    o.tls_server_name = d->server_name;
    o.timeout_ms = timeout_ms;
    o.stream_poll_ms = 200;
    tw_client *c = NULL;
    tw_err err;
    assert_int_equal(tw_client_open(&o, &c, &err), TW_OK);
    return c;
}

void twt_daemon_start(twt_daemon *d, const char *const *extra)
{
    const char *build = getenv("TW_BUILD_DIR");
    assert_non_null(build);
    char prog[1024];
    snprintf(prog, sizeof prog, "%s/server/engine/tokenwired", build);
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
    d->pid = fork();
    assert_true(d->pid >= 0);
    if (d->pid == 0) {
        unsetenv("TOKENWIRE_API_KEY");
        execv(prog, (char *const *)argv);
        _exit(127);
    }
    track(d->pid, true);
    tw_client *c = twt_connect(d, 200);
    tw_status st = TW_UNAVAILABLE;
    for (int i = 0; i < 50; i++) {
        Tokenwire__V1__Reply *rep = NULL;
        st = tw_client_health(c, NULL, &rep, NULL);
        tw_wire_free_reply(rep);
        if (st == TW_OK)
            break;
        int status;
        assert_int_equal(waitpid(d->pid, &status, WNOHANG), 0); /* still running */
    }
    tw_client_close(c);
    assert_int_equal(st, TW_OK);
}

void twt_daemon_stop(twt_daemon *d)
{
    track(d->pid, false);
    assert_int_equal(kill(d->pid, SIGTERM), 0);
    int status = 0;
    assert_int_equal(waitpid(d->pid, &status, 0), d->pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    d->pid = 0;
}

void twt_daemon_kill(twt_daemon *d)
{
    track(d->pid, false);
    assert_int_equal(kill(d->pid, SIGKILL), 0);
    int status = 0;
    assert_int_equal(waitpid(d->pid, &status, 0), d->pid);
    d->pid = 0;
}

void twt_daemon_cleanup(twt_daemon *d)
{
    tw_test_rmtree(d->dir);
    free(d->dir);
    d->dir = NULL;
}
