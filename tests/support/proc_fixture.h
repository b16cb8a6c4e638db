/* Running the project's programs from the tests: start one with its output
 * in a log file, wait (with a bound) until a probe says it is ready, stop it
 * with SIGTERM and check that it exited with status 0, which is how the
 * sanitizers report leaks and errors in a child.
 *
 * Every process started here is remembered until it is stopped, killed or
 * waited for; tw_test_proc_teardown (a cmocka teardown), and at the latest
 * the exit of the test program, SIGKILL whatever a failed test left running.
 * None of this is thread-safe: call it from the test's main thread. On any
 * failure these helpers fail the current cmocka test (after printing the
 * child's log where there is one); they never return an error. */
#ifndef TW_TEST_PROC_FIXTURE_H
#define TW_TEST_PROC_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct tw_test_spawn_opts {
    /* stderr, and stdout too unless out_path is set, appended to this file;
     * NULL: both inherited from the test. */
    const char *log_path;
    /* stdout alone, truncated, to this file; NULL: as above. */
    const char *out_path;
    /* Changes to the child's environment, NULL-terminated (may be NULL):
     * "NAME=value" sets NAME, a bare "NAME" removes it. */
    const char *const *env;
    /* stdin from /dev/null rather than the test's. */
    bool stdin_null;
} tw_test_spawn_opts;

/* TW_BUILD_DIR/rel into out (a program of the build tree); fails the test
 * when TW_BUILD_DIR is unset. */
void tw_test_build_path(char *out, size_t cap, const char *rel);

/* A loopback TCP port the kernel just handed out, free again once this
 * returns (another process may still take it: good enough for tests). */
int tw_test_free_port(void);

/* Whether the openssl command is there to make test certificates. */
bool tw_test_have_openssl(void);

/* A self-signed P-256 certificate for CN=localhost, one day long, as
 * dir/stem.pem with its key as dir/stem.key (needs the openssl command). */
void tw_test_make_cert(const char *dir, const char *stem);

/* Connects to the Unix socket at path and hangs up at once, before any
 * protocol handshake. */
void tw_test_hang_up_unix(const char *path);

/* A Unix socket at path that accepts every connection and hangs up on it
 * at once, before any handshake, until stopped; stopping removes the path
 * and returns how many it hung up on. */
typedef struct tw_test_hanger tw_test_hanger;
tw_test_hanger *tw_test_hanger_start(const char *path);
int tw_test_hanger_stop(tw_test_hanger *h);

/* Starts argv[0] (looked up in PATH when it has no slash) with argv and the
 * options (NULL: all defaults); returns its pid, remembered for cleanup. */
pid_t tw_test_spawn(const char *const *argv, const tw_test_spawn_opts *opts);

/* Answers whether the service is ready; may block for a bounded time. */
typedef bool (*tw_test_probe_fn)(void *user);

/* Calls probe every ~50 ms until it answers true. Fails the test when pid
 * (0: not watched) exits first or timeout_ms pass; `what` names the service
 * in the message and log_path (may be NULL) is printed. */
void tw_test_wait_ready(pid_t pid, tw_test_probe_fn probe, void *user, unsigned timeout_ms,
                        const char *what, const char *log_path);

/* Waits up to timeout_ms for pid to exit and returns its wait status; after
 * that it SIGKILLs it and fails the test. */
int tw_test_wait_exit(pid_t pid, unsigned timeout_ms, const char *log_path);

/* SIGTERM, then expects exit status 0 within timeout_ms. */
void tw_test_stop(pid_t pid, unsigned timeout_ms, const char *log_path);

/* SIGKILL and reap (restart tests). */
void tw_test_kill(pid_t pid);

/* Runs argv to its end (at most timeout_ms) and returns its exit code,
 * 128 + the signal that ended it, or 127 when it cannot be started. */
int tw_test_run(const char *const *argv, const tw_test_spawn_opts *opts, unsigned timeout_ms);

/* A cmocka teardown: SIGKILLs and reaps every process still remembered. */
int tw_test_proc_teardown(void **state);

/* Prints a log file between markers ("(none)" when it cannot be read). */
void tw_test_print_log(const char *path);

#endif
