/* A small blocking HTTP client for the tests that speak to the bridge.
 * Any number of threads may make requests at once. */
#ifndef TW_TEST_HTTP_CLIENT_H
#define TW_TEST_HTTP_CLIENT_H

#include <stddef.h>

typedef struct tw_test_http_result {
    long status; /* 0 when the request failed at the transport */
    char *body;  /* NUL-terminated, malloc'd; the caller frees it */
    size_t len;
} tw_test_http_result;

/* Sends method to http://127.0.0.1:port/path with a JSON body of body_len
 * bytes (body may be NULL) and a bearer api_key (may be NULL); waits at
 * most 120 s. Call curl_global_init before the first request. */
tw_test_http_result tw_test_http(const char *method, int port, const char *path,
                                 const char *body, size_t body_len, const char *api_key);

#endif
