/* Starting and stopping a real tokenwired for the server tests, on top of
 * the process fixture of tests/support. */
#ifndef TWT_DAEMON_FIXTURE_H
#define TWT_DAEMON_FIXTURE_H

#include <stdbool.h>
#include <sys/types.h>

#include "tokenwire/client.h"

typedef struct twt_daemon {
    pid_t pid;
    char *dir; /* private temporary directory, removed by twt_daemon_cleanup */
    char rpc[300];
    char pub[300];
    char log[1100];          /* the daemon's stderr/stdout, inside dir */
    const char *ca;          /* CA file when rpc is tls+tcp:// */
    const char *server_name; /* name its certificate carries */
    /* TOKENWIRE_API_KEY in the daemon's environment (NULL: removed); the
     * readiness probe authenticates with it. */
    const char *api_key_env;
} twt_daemon;

/* Creates d->dir and sets rpc / pub to ipc:// endpoints inside it. */
void twt_daemon_init(twt_daemon *d);

/* Starts TW_BUILD_DIR/server/engine/tokenwired on d->rpc / d->pub with
 * extra arguments (NULL-terminated, may be NULL) and waits until it answers
 * Health (fails the test after ~30 s, or at once when it exits). */
void twt_daemon_start(twt_daemon *d, const char *const *extra);

/* SIGTERM and expect exit status 0 (under ASan: no leaks). */
void twt_daemon_stop(twt_daemon *d);

/* SIGKILL, for restart tests. */
void twt_daemon_kill(twt_daemon *d);

/* Removes d->dir. */
void twt_daemon_cleanup(twt_daemon *d);

/* A cmocka teardown: SIGKILLs every daemon a failed test left running, so
 * that no process outlives the test program. */
int twt_daemon_teardown(void **state);

/* A client of d (TLS with d->ca when set), without an API key. */
tw_client *twt_connect(const twt_daemon *d, unsigned timeout_ms);

/* The same with an API key (may be NULL). */
tw_client *twt_connect_key(const twt_daemon *d, const char *api_key, unsigned timeout_ms);

#endif
