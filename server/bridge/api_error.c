#include "api_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int tw_bridge_http_status(tw_status status)
{
    switch (status) {
    case TW_OK:
        return 200;
    case TW_INVALID_ARGUMENT:
    case TW_FAILED_PRECONDITION:
    case TW_OUT_OF_RANGE:
    /* A missing capability is the caller's request, not a server fault; 501
     * would also make SDKs retry a request that can never succeed. */
    case TW_UNIMPLEMENTED:
        return 400;
    case TW_UNAUTHENTICATED:
        return 401;
    case TW_PERMISSION_DENIED:
        return 403;
    case TW_NOT_FOUND:
        return 404;
    case TW_ALREADY_EXISTS:
    case TW_ABORTED:
        return 409;
    case TW_RESOURCE_EXHAUSTED:
        return 429;
    case TW_UNAVAILABLE:
        return 503;
    case TW_DEADLINE_EXCEEDED:
        return 504;
    case TW_CANCELLED:
    case TW_UNKNOWN:
    case TW_INTERNAL:
    case TW_DATA_LOSS:
    default:
        return 500;
    }
}

const char *tw_bridge_error_type(int http_status)
{
    switch (http_status) {
    case 401:
        return "authentication_error";
    case 403:
        return "permission_error";
    case 404:
        return "not_found_error";
    case 429:
        return "rate_limit_error";
    case 503:
        return "service_unavailable_error";
    case 504:
        return "timeout_error";
    default:
        return http_status >= 500 ? "server_error" : "invalid_request_error";
    }
}

static void apierr_vfill(tw_bridge_apierr *ae, tw_status status, int http_status,
                         const char *type, const char *param, const char *code,
                         const char *fmt, va_list ap)
{
    ae->http_status = http_status;
    ae->type = type ? type : tw_bridge_error_type(http_status);
    snprintf(ae->param, sizeof ae->param, "%s", param ? param : "");
    snprintf(ae->code, sizeof ae->code, "%s", code ? code : "");
    tw_verrorf(&ae->err, status, fmt, ap);
}

tw_status tw_bridge_fail(tw_bridge_apierr *ae, tw_status status, const char *param,
                         const char *code, const char *fmt, ...)
{
    if (ae) {
        va_list ap;
        va_start(ap, fmt);
        apierr_vfill(ae, status, tw_bridge_http_status(status), NULL, param, code, fmt, ap);
        va_end(ap);
    }
    return status;
}

tw_status tw_bridge_fail_http(tw_bridge_apierr *ae, tw_status status, int http_status,
                              const char *type, const char *param, const char *code,
                              const char *fmt, ...)
{
    if (ae) {
        va_list ap;
        va_start(ap, fmt);
        apierr_vfill(ae, status, http_status, type, param, code, fmt, ap);
        va_end(ap);
    }
    return status;
}

json_t *tw_bridge_apierr_json(const tw_bridge_apierr *ae)
{
    json_t *inner = json_object();
    json_t *outer = json_object();
    if (!inner || !outer) {
        json_decref(inner);
        json_decref(outer);
        return NULL;
    }
    /* The message may quote request bytes; json_string refuses invalid
     * UTF-8, so fall back to a fixed text rather than dropping the error. */
    json_t *msg = json_string(ae->err.msg);
    if (!msg)
        msg = json_string("invalid request");
    int bad = json_object_set_new(inner, "message", msg);
    bad |= json_object_set_new(inner, "type",
                               json_string(ae->type ? ae->type
                                                    : tw_bridge_error_type(ae->http_status)));
    json_t *param = ae->param[0] ? json_string(ae->param) : json_null();
    bad |= json_object_set_new(inner, "param", param ? param : json_null());
    json_t *code = ae->code[0] ? json_string(ae->code) : json_null();
    bad |= json_object_set_new(inner, "code", code ? code : json_null());
    bad |= json_object_set_new(outer, "error", inner);
    if (bad) {
        json_decref(outer);
        return NULL;
    }
    return outer;
}

tw_status tw_bridge_fail_missing(tw_bridge_apierr *ae, const char *path)
{
    return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, path, "missing_required_parameter",
                          "Missing required parameter: '%s'.", path);
}

tw_status tw_bridge_fail_no_memory(tw_bridge_apierr *ae)
{
    return tw_bridge_fail(ae, TW_RESOURCE_EXHAUSTED, NULL, NULL,
                          "The request is too large to process.");
}
