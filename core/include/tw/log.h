/* Process-wide logging to stderr with a level filter.
 * Safe to call from any thread; each line is written with one write(2). */
#ifndef TW_LOG_H
#define TW_LOG_H

typedef enum tw_log_level {
    TW_LOG_DEBUG = 0,
    TW_LOG_INFO = 1,
    TW_LOG_WARN = 2,
    TW_LOG_ERROR = 3,
} tw_log_level;

void tw_log_set_level(tw_log_level level);
tw_log_level tw_log_get_level(void);

void tw_log(tw_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define tw_debug(...) tw_log(TW_LOG_DEBUG, __VA_ARGS__)
#define tw_info(...) tw_log(TW_LOG_INFO, __VA_ARGS__)
#define tw_warn(...) tw_log(TW_LOG_WARN, __VA_ARGS__)
#define tw_error(...) tw_log(TW_LOG_ERROR, __VA_ARGS__)

#endif
