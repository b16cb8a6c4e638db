#include "tw/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static _Atomic int log_level = TW_LOG_INFO;

void tw_log_set_level(tw_log_level level) { atomic_store(&log_level, (int)level); }

tw_log_level tw_log_get_level(void) { return (tw_log_level)atomic_load(&log_level); }

void tw_log(tw_log_level level, const char *fmt, ...)
{
    if ((int)level < atomic_load(&log_level))
        return;
    static const char *const tags[] = {"debug", "info", "warn", "error"};
    char line[2048];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, tags[level & 3]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    /* One write keeps lines from different threads whole. */
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}
