#include "tw/status.h"

#include <stdio.h>
#include <string.h>

tw_status tw_verrorf(tw_err *err, tw_status code, const char *fmt, va_list ap)
{
    if (err)
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    return code;
}

tw_status tw_errorf(tw_err *err, tw_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tw_verrorf(err, code, fmt, ap);
    va_end(ap);
    return code;
}

tw_status tw_error_wrap(tw_err *err, tw_status code, const char *fmt, ...)
{
    if (!err)
        return code;
    char prefix[TW_ERR_MSG_MAX];
    char old[TW_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    old[sizeof old - 1] = '\0';
    snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
    return code;
}

const char *tw_status_name(tw_status code)
{
    static const char *const names[] = {
        "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
        "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
        "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
    };
    if ((unsigned)code < sizeof names / sizeof names[0])
        return names[code];
    return "UNKNOWN";
}
