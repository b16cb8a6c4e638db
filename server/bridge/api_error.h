/* OpenAI-shaped API errors.
 *
 * Every failure the bridge answers is {"error":{"message","type","param",
 * "code"}} with an HTTP status, as OpenAI's API does, so SDKs raise their
 * usual exception classes (BadRequestError, AuthenticationError, ...).
 * A tw_bridge_apierr carries that answer from whichever layer found the
 * problem (request validation, the engine's status, the HTTP layer) to the
 * one that writes the response.
 */
#ifndef TW_BRIDGE_API_ERROR_H
#define TW_BRIDGE_API_ERROR_H

#include <jansson.h>

#include "tw/status.h"

#define TW_BRIDGE_PARAM_MAX 160
#define TW_BRIDGE_CODE_MAX 48

typedef struct tw_bridge_apierr {
    int http_status;                  /* 400, 401, 404, ... */
    const char *type;                 /* "invalid_request_error", "server_error", ... */
    char param[TW_BRIDGE_PARAM_MAX];  /* the offending field; "" renders as null */
    char code[TW_BRIDGE_CODE_MAX];    /* a machine-readable code; "" renders as null */
    tw_err err;                       /* the human-readable message */
} tw_bridge_apierr;

/* Fills ae (which may be NULL) and returns status, so that validation code
 * reads `return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "n", NULL, "...")`.
 * The HTTP status and type follow from status (tw_bridge_http_status); param
 * and code may be NULL. */
tw_status tw_bridge_fail(tw_bridge_apierr *ae, tw_status status, const char *param,
                         const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* As tw_bridge_fail with an explicit HTTP status and type, for answers that
 * do not come from a tw_status (401, 404 route, 405, 413). Returns status. */
tw_status tw_bridge_fail_http(tw_bridge_apierr *ae, tw_status status, int http_status,
                              const char *type, const char *param, const char *code,
                              const char *fmt, ...) __attribute__((format(printf, 7, 8)));

/* The HTTP status that answers a tw_status (an engine status or a bridge
 * failure): INVALID_ARGUMENT 400, NOT_FOUND 404, UNAVAILABLE 503, ... */
/* 400 missing_required_parameter naming path. */
tw_status tw_bridge_fail_missing(tw_bridge_apierr *ae, const char *path);

/* A request too large for the memory it may use (RESOURCE_EXHAUSTED). */
tw_status tw_bridge_fail_no_memory(tw_bridge_apierr *ae);

int tw_bridge_http_status(tw_status status);

/* OpenAI's error type for an HTTP status ("invalid_request_error" for 4xx,
 * "server_error" for 5xx, with the specific ones SDKs know). */
const char *tw_bridge_error_type(int http_status);

/* The error object {"error":{...}} of ae, as a new reference; NULL only when
 * memory runs out. */
json_t *tw_bridge_apierr_json(const tw_bridge_apierr *ae);

#endif
