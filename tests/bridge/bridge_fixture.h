/* The real tokenwired (serving the shipped model) and tokenwire-bridge on
 * free loopback ports, each started with extra flags of the test's choice,
 * plus the clients the bridge tests speak with: libcurl for whole requests,
 * raw sockets for clients that misbehave, libtokenwire for the engine's own
 * Stats.
 *
 * Everything here fails the current cmocka test on error (after printing
 * the daemons' logs); nothing returns an error. Not thread-safe except
 * twb_http, which any number of threads may call at once. */
#ifndef TWB_BRIDGE_FIXTURE_H
#define TWB_BRIDGE_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct twb_service {
    char *dir; /* temporary directory holding the logs */
    char engine_log[1100], bridge_log[1100];
    int http, rpc, pub; /* ports */
    char rpc_url[64], pub_url[64];
    const char *key; /* the Bearer key the bridge wants, NULL: none */
    pid_t engine, bridge;
} twb_service;

/* Path of a program of the build tree (TW_BUILD_DIR/rel). */
void twb_build_path(char *out, size_t cap, const char *rel);

/* True when TW_BUILD_DIR holds both daemons; prints a SKIPPED line when not. */
bool twb_daemons_built(void);

/* Picks ports and a log directory; starts nothing. */
void twb_init(twb_service *s);

/* Starts tokenwired on model with --threads 2 and the extra flags
 * (NULL-terminated list, may be NULL). Does not wait. */
void twb_start_engine(twb_service *s, const char *model, const char *const *extra);

/* Starts the bridge with --quiet, --probe-interval-ms 100 and the extra
 * flags, and waits until it answers HTTP. key (may be NULL) is passed as
 * --api-key and used by twb_http. */
void twb_start_bridge(twb_service *s, const char *key, const char *const *extra);

/* Waits (~60 s at most) until the bridge lists a ready model. */
void twb_wait_ready(twb_service *s);

/* twb_init, both daemons on model with their extra flags (either may be
 * NULL) and the bridge's key, then twb_wait_ready. */
void twb_start(twb_service *s, const char *model, const char *const *engine_extra, const char *key,
               const char *const *bridge_extra);

/* SIGTERM to whatever runs; each must exit with status 0 (sanitizers report
 * through the status). Removes the log directory. */
void twb_stop(twb_service *s);

/* A cmocka teardown: SIGKILLs whatever a failed test left running. */
int twb_teardown(void **state);

/* Stops only the engine (same checks). */
void twb_stop_engine(twb_service *s);

/* SIGKILLs the engine, as a crash would end it. */
void twb_kill_engine(twb_service *s);

/* SIGKILLs the bridge, as a crash would end it. */
void twb_kill_bridge(twb_service *s);

typedef struct twb_result {
    long status; /* 0 when the request failed at the transport */
    char *body;  /* NUL-terminated, malloc'd; free it */
    size_t len;
} twb_result;

/* One HTTP request to the bridge with the service's key (when set).
 * body may be NULL; body_len (SIZE_MAX: strlen) lets tests send NUL bytes. */
twb_result twb_http(const twb_service *s, const char *method, const char *path,
                    const char *body, size_t body_len);

/* Expects an OpenAI error of `status` (and `code` when not NULL); frees r. */
void twb_expect_error(twb_result *r, long status, const char *code);

/* Calls on_event with each JSON event of a server-sent-events body, in
 * order; returns whether the stream ended with [DONE]. An event that is
 * not JSON fails the test. */
struct json_t;
bool twb_sse_each(const char *body, void (*on_event)(struct json_t *ev, void *user), void *user);

/* A 200 answer's body as a JSON object (fails the test otherwise); the
 * body is freed. json_decref the result. */
struct json_t;
struct json_t *twb_ok_json(twb_result *r, const char *what);

/* A TCP connection to the bridge (blocking, with a 30 s receive timeout). */
int twb_connect(const twb_service *s);

/* Writes all of data to fd; fails the test on error. */
void twb_send_all(int fd, const char *data, size_t len);

/* Reads from fd until the peer closes, len bytes arrived, or timeout_ms
 * passed; returns what came (malloc'd, NUL-terminated). */
char *twb_read_until_close(int fd, unsigned timeout_ms, size_t *len);

typedef struct twb_stats {
    uint64_t requests_total, generated_tokens;
    uint32_t running, queued;
} twb_stats;

/* The engine's Stats, asked directly over its RPC socket. */
twb_stats twb_engine_stats(const twb_service *s);

/* The main of a test of the daemons serving the model named by argv[1]:
 * sets *model, answers 0 (after a SKIPPED line) when the daemons are not
 * built, and otherwise runs the tests (each with twb_teardown) with SIGPIPE
 * ignored and libcurl set up; 2 for a missing argument. */
struct CMUnitTest;
int twb_main(int argc, char **argv, const char **model, const struct CMUnitTest *tests,
             size_t n_tests);

/* Milliseconds on a monotonic clock. */
uint64_t twb_now_ms(void);

#endif
