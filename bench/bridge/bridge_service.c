/* Starting and stopping the daemons tw-bench-bridge measures. */
#include "bridge_service.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static service *g_svc; /* for cleanup on a fatal error */

static void stop_child(pid_t *pid)
{
    if (*pid <= 0)
        return;
    kill(*pid, SIGTERM);
    for (int i = 0; i < 500; i++) {
        if (waitpid(*pid, NULL, WNOHANG) == *pid) {
            *pid = 0;
            return;
        }
        usleep(20000);
    }
    kill(*pid, SIGKILL);
    waitpid(*pid, NULL, 0);
    *pid = 0;
}

static void print_log(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    fprintf(stderr, "---- %s\n", path);
    char line[512];
    while (fgets(line, sizeof line, f))
        fputs(line, stderr);
    fprintf(stderr, "----\n");
    fclose(f);
}

static void remove_dir(const char *dir)
{
    const char *names[] = {"engine.log", "bridge.log"};
    char p[320];
    for (size_t i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

void service_shutdown(service *s)
{
    if (g_svc == s)
        g_svc = NULL;
    stop_child(&s->bridge);
    stop_child(&s->engine);
    if (s->dir[0] && !s->keep_logs)
        remove_dir(s->dir);
    else if (s->dir[0])
        fprintf(stderr, "[bench] logs kept in %s\n", s->dir);
    s->dir[0] = '\0';
}

_Noreturn void bench_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tw-bench-bridge: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (g_svc) {
        print_log(g_svc->engine_log);
        print_log(g_svc->bridge_log);
        service_shutdown(g_svc);
    }
    exit(1);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        bench_fatal("socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        bench_fatal("cannot find a free port: %s", strerror(errno));
    close(fd);
    return ntohs(a.sin_port);
}

static pid_t spawn(const char *const *argv, const char *log_path)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 2, 1);
    pid_t pid = 0;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        bench_fatal("cannot start %s: %s", argv[0], strerror(rc));
    return pid;
}

bool bench_is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

void service_start(service *s, const opts *o)
{
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "/tmp/tw-bench-bridge-XXXXXX");
    if (!mkdtemp(s->dir))
        bench_fatal("mkdtemp: %s", strerror(errno));
    g_svc = s;
    s->keep_logs = o->keep_logs;
    snprintf(s->engine_log, sizeof s->engine_log, "%s/engine.log", s->dir);
    snprintf(s->bridge_log, sizeof s->bridge_log, "%s/bridge.log", s->dir);
    snprintf(s->rpc_url, sizeof s->rpc_url, "tcp://127.0.0.1:%d", free_port());
    snprintf(s->pub_url, sizeof s->pub_url, "tcp://127.0.0.1:%d", free_port());
    snprintf(s->http_base, sizeof s->http_base, "http://127.0.0.1:%d", free_port());
    char threads[16];
    snprintf(threads, sizeof threads, "%u", o->threads);
    /* No disk state: a store write per request would add noise to both
     * paths without telling anything about the bridge. */
    const char *eargv[] = {o->engine_bin, "--listen",         s->rpc_url, "--publish",
                           s->pub_url,    "--threads",        threads,    "--model",
                           o->model,      "--no-state-store", NULL};
    s->engine = spawn(eargv, s->engine_log);
    /* The bridge as shipped (default probe interval, workers, ...). */
    const char *bargv[8 + MAX_BRIDGE_ARGS + 1] = {o->bridge_bin, "--listen", s->http_base,
                                                  "--engine",    s->rpc_url, "--engine-pub",
                                                  s->pub_url,    "--quiet"};
    /* With the logs kept, the bridge's access log says how long each
     * request took inside it. */
    unsigned n = o->keep_logs ? 7 : 8;
    for (unsigned i = 0; i < o->n_bridge_args; i++)
        bargv[n++] = o->bridge_args[i];
    bargv[n] = NULL;
    s->bridge = spawn(bargv, s->bridge_log);
}

void service_check_alive(service *s)
{
    if (s->engine > 0 && waitpid(s->engine, NULL, WNOHANG) == s->engine) {
        s->engine = 0;
        bench_fatal("tokenwired exited early");
    }
    if (s->bridge > 0 && waitpid(s->bridge, NULL, WNOHANG) == s->bridge) {
        s->bridge = 0;
        bench_fatal("tokenwire-bridge exited early");
    }
}
