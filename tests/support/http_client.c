#include "http_client.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t on_data(char *p, size_t size, size_t n, void *user)
{
    tw_test_http_result *r = user;
    size_t k = size * n;
    char *b = realloc(r->body, r->len + k + 1);
    if (!b)
        return 0; /* curl then fails the transfer */
    memcpy(b + r->len, p, k);
    r->len += k;
    b[r->len] = '\0';
    r->body = b;
    return k;
}

tw_test_http_result tw_test_http(const char *method, int port, const char *path,
                                 const char *body, size_t body_len, const char *api_key)
{
    tw_test_http_result r = {0, calloc(1, 1), 0};
    assert_non_null(r.body);
    CURL *c = curl_easy_init();
    assert_non_null(c);
    size_t cap = strlen(path) + 32;
    char *url = malloc(cap);
    assert_non_null(url);
    snprintf(url, cap, "http://127.0.0.1:%d%s", port, path);
    curl_easy_setopt(c, CURLOPT_URL, url); /* curl keeps its own copy */
    free(url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    /* Generous for a model under the sanitizers; NOSIGNAL lets several
     * threads make requests at once. */
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    char auth[256];
    if (api_key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", api_key);
        h = curl_slist_append(h, auth);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (!strcmp(method, "HEAD"))
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L); /* else curl waits for a body */
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)body_len);
    }
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return r;
}
