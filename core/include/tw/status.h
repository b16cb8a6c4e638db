/* Status codes and error messages shared by every tokenwire layer.
 *
 * A fallible function returns a tw_status and, when it fails, writes a
 * human-readable reason into the tw_err the caller passed (which may be NULL
 * when the caller only wants the code). The codes are the gRPC codes so that
 * the engine's answer travels unchanged into a wire Reply and an HTTP status.
 */
#ifndef TW_STATUS_H
#define TW_STATUS_H

#include <stdarg.h>
#include <stddef.h>

typedef enum tw_status {
    TW_OK = 0,
    TW_CANCELLED = 1,
    TW_UNKNOWN = 2,
    TW_INVALID_ARGUMENT = 3,
    TW_DEADLINE_EXCEEDED = 4,
    TW_NOT_FOUND = 5,
    TW_ALREADY_EXISTS = 6,
    TW_PERMISSION_DENIED = 7,
    TW_RESOURCE_EXHAUSTED = 8,
    TW_FAILED_PRECONDITION = 9,
    TW_ABORTED = 10,
    TW_OUT_OF_RANGE = 11,
    TW_UNIMPLEMENTED = 12,
    TW_INTERNAL = 13,
    TW_UNAVAILABLE = 14,
    TW_DATA_LOSS = 15,
    TW_UNAUTHENTICATED = 16,
} tw_status;

#define TW_ERR_MSG_MAX 512

/* The message that goes with a failing tw_status. */
typedef struct tw_err {
    char msg[TW_ERR_MSG_MAX];
} tw_err;

/* Writes a printf-formatted message into err (when err is not NULL) and
 * returns code, so a failure reads `return tw_errorf(err, TW_..., "...")`. */
tw_status tw_errorf(tw_err *err, tw_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

tw_status tw_verrorf(tw_err *err, tw_status code, const char *fmt, va_list ap);

/* Prefixes an existing message with context ("loading x: <old message>"). */
tw_status tw_error_wrap(tw_err *err, tw_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The canonical upper-case name of a code, e.g. "INVALID_ARGUMENT". */
const char *tw_status_name(tw_status code);

#endif
