/* The whole service for the end-to-end tests: the real tokenwired serving a
 * shipped model and the real tokenwire-bridge in front of it, on free
 * loopback ports, plus a small libcurl HTTP client and a way to run the
 * tokenwire CLI and read what it printed. */
#ifndef TWT_E2E_SERVICE_H
#define TWT_E2E_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

#include "http_client.h"

typedef struct twt_service {
    char *dir; /* temporary directory holding the logs */
    char engine_log[1100], bridge_log[1100];
    int http, rpc, pub; /* ports */
    char rpc_url[64], pub_url[64];
    pid_t engine, bridge;
} twt_service;

/* Starts tokenwired with --model model (plus extra arguments, NULL-terminated,
 * may be NULL) and the bridge, and waits until the bridge reports the engine
 * healthy (fails the test after ~30 s). */
void twt_service_start(twt_service *s, const char *model, const char *const *extra);

/* SIGTERM to both; each must exit with status 0 (under ASan: no leaks). */
void twt_service_stop(twt_service *s);

typedef tw_test_http_result twt_http_result;

/* POSTs a JSON body to the bridge. */
twt_http_result twt_post(const twt_service *s, const char *path, const char *body);

/* POSTs, expects 200 and a JSON object; returns it (the caller decrefs). */
json_t *twt_post_json(const twt_service *s, const char *path, const char *body);

/* Runs the tokenwire CLI against the engine with the given arguments
 * (NULL-terminated, after the global --engine/--pub options) and returns
 * what it printed on stdout (malloc'd); *status is its exit status. When
 * err_text is not NULL it receives what it printed on stderr (malloc'd). */
char *twt_run_cli(const twt_service *s, const char *const *args, int *status,
                  char **err_text);

/* Looks like a Python function: "def ", a colon, and "return" or an
 * indented line. */
bool twt_looks_like_python(const char *text);

#endif
