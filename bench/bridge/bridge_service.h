/* The service tw-bench-bridge measures: the real tokenwired and
 * tokenwire-bridge on free loopback ports, their logs in a temporary
 * directory, and the fatal-error path that stops them before the program
 * exits. Single-threaded: call everything from main's thread. */
#ifndef TW_BENCH_BRIDGE_SERVICE_H
#define TW_BENCH_BRIDGE_SERVICE_H

#include <stdbool.h>
#include <sys/types.h>

#define MAX_BRIDGE_ARGS 16

/* The command line. */
typedef struct opts {
    const char *model;
    const char *engine_bin, *bridge_bin;
    const char *bridge_args[MAX_BRIDGE_ARGS]; /* passed on to the bridge */
    unsigned n_bridge_args;
    bool keep_logs; /* keep the logs, and run the bridge with its access log */
    unsigned calls, reps, tokens, threads, prompt_tokens;
} opts;

typedef struct service {
    char dir[256];
    char engine_log[320], bridge_log[320];
    char rpc_url[64], pub_url[64], http_base[64];
    pid_t engine, bridge;
    bool keep_logs;
} service;

/* Starts both daemons (without waiting for them to be ready) and remembers
 * s for bench_fatal; s must stay alive until service_shutdown. */
void service_start(service *s, const opts *o);

/* SIGTERM to both (SIGKILL after 10 s), then removes the log directory
 * unless the logs are to be kept. */
void service_shutdown(service *s);

/* Calls bench_fatal when either daemon has exited. */
void service_check_alive(service *s);

/* Prints the message and the daemons' logs, stops them, exits with 1. */
_Noreturn void bench_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* True for an existing regular file. */
bool bench_is_file(const char *path);

#endif
