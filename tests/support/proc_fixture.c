#include "proc_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_support.h"

extern char **environ;

/* More than any test runs at once; a spawn beyond it fails the test. */
#define MAX_LIVE 16
static pid_t live[MAX_LIVE];
static bool atexit_set;

static void kill_leftovers(void)
{
    for (int i = 0; i < MAX_LIVE; i++) {
        if (live[i] > 0) {
            kill(live[i], SIGKILL);
            waitpid(live[i], NULL, 0);
            live[i] = 0;
        }
    }
}

static void remember(pid_t pid)
{
    if (!atexit_set) {
        atexit(kill_leftovers);
        atexit_set = true;
    }
    for (int i = 0; i < MAX_LIVE; i++) {
        if (live[i] == 0) {
            live[i] = pid;
            return;
        }
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fail_msg("more than %d child processes at once", MAX_LIVE);
}

static void forget(pid_t pid)
{
    for (int i = 0; i < MAX_LIVE; i++)
        if (live[i] == pid)
            live[i] = 0;
}

int tw_test_proc_teardown(void **state)
{
    (void)state;
    kill_leftovers();
    return 0;
}

void tw_test_build_path(char *out, size_t cap, const char *rel)
{
    const char *build = getenv("TW_BUILD_DIR");
    if (!build || !*build)
        fail_msg("TW_BUILD_DIR is not set (run through meson test)");
    snprintf(out, cap, "%s/%s", build, rel);
}

int tw_test_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

void tw_test_hang_up_unix(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    assert_true(strlen(path) < sizeof a.sun_path);
    memcpy(a.sun_path, path, strlen(path));
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    close(fd);
}

struct tw_test_hanger {
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int fd;
    pthread_t thread;
    atomic_bool stop;
    atomic_int hung_up;
};

static void *hanger_main(void *arg)
{
    tw_test_hanger *h = arg;
    while (!atomic_load(&h->stop)) {
        struct pollfd p = {.fd = h->fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int c = accept(h->fd, NULL, NULL);
        if (c >= 0) {
            close(c);
            atomic_fetch_add(&h->hung_up, 1);
        }
    }
    return NULL;
}

tw_test_hanger *tw_test_hanger_start(const char *path)
{
    tw_test_hanger *h = calloc(1, sizeof *h);
    assert_non_null(h);
    assert_true(strlen(path) < sizeof h->path);
    memcpy(h->path, path, strlen(path));
    h->fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(h->fd >= 0);
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, h->path, strlen(h->path));
    assert_int_equal(bind(h->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(h->fd, 16), 0);
    assert_int_equal(pthread_create(&h->thread, NULL, hanger_main, h), 0);
    return h;
}

int tw_test_hanger_stop(tw_test_hanger *h)
{
    atomic_store(&h->stop, true);
    pthread_join(h->thread, NULL);
    close(h->fd);
    unlink(h->path);
    int n = atomic_load(&h->hung_up);
    free(h);
    return n;
}

static bool same_name(const char *entry, const char *change)
{
    size_t n = strcspn(change, "=");
    return strncmp(entry, change, n) == 0 && entry[n] == '=';
}

/* environ with the changes applied; the strings stay borrowed. */
static char **child_env(const char *const *changes)
{
    size_t n_env = 0, n_chg = 0;
    while (environ[n_env])
        n_env++;
    while (changes && changes[n_chg])
        n_chg++;
    char **env = calloc(n_env + n_chg + 1, sizeof *env);
    assert_non_null(env);
    size_t k = 0;
    for (size_t i = 0; i < n_env; i++) {
        bool changed = false;
        for (size_t j = 0; j < n_chg && !changed; j++)
            changed = same_name(environ[i], changes[j]);
        if (!changed)
            env[k++] = environ[i];
    }
    for (size_t j = 0; j < n_chg; j++)
        if (strchr(changes[j], '='))
            env[k++] = (char *)changes[j];
    env[k] = NULL;
    return env;
}

/* posix_spawnp's error number (0: started, *pid set and remembered). */
static int spawn(const char *const *argv, const tw_test_spawn_opts *opts, pid_t *pid)
{
    static const tw_test_spawn_opts none;
    const tw_test_spawn_opts *o = opts ? opts : &none;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (o->stdin_null)
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (o->log_path)
        posix_spawn_file_actions_addopen(&fa, 2, o->log_path, O_WRONLY | O_CREAT | O_APPEND,
                                         0644);
    if (o->out_path)
        posix_spawn_file_actions_addopen(&fa, 1, o->out_path, O_WRONLY | O_CREAT | O_TRUNC,
                                         0644);
    else if (o->log_path)
        posix_spawn_file_actions_adddup2(&fa, 2, 1);
    char **env = child_env(o->env);
    int rc = posix_spawnp(pid, argv[0], &fa, NULL, (char *const *)argv, env);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    if (rc == 0)
        remember(*pid);
    return rc;
}

pid_t tw_test_spawn(const char *const *argv, const tw_test_spawn_opts *opts)
{
    pid_t pid = 0;
    int rc = spawn(argv, opts, &pid);
    if (rc != 0)
        fail_msg("cannot start %s: %s", argv[0], strerror(rc));
    return pid;
}

void tw_test_print_log(const char *path)
{
    if (!path)
        return;
    size_t n;
    char *log = tw_test_read_file(path, &n);
    printf("---- %s\n%s\n----\n", path, log ? log : "(none)");
    fflush(stdout);
    free(log);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void tw_test_wait_ready(pid_t pid, tw_test_probe_fn probe, void *user, unsigned timeout_ms,
                        const char *what, const char *log_path)
{
    uint64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        if (probe(user))
            return;
        int status;
        if (pid > 0 && waitpid(pid, &status, WNOHANG) == pid) {
            forget(pid);
            tw_test_print_log(log_path);
            fail_msg("%s exited before it was ready (wait status %d)", what, status);
        }
        if (now_ms() >= deadline)
            break;
        sleep_ms(50);
    }
    tw_test_print_log(log_path);
    fail_msg("%s was not ready within %u ms", what, timeout_ms);
}

int tw_test_wait_exit(pid_t pid, unsigned timeout_ms, const char *log_path)
{
    int status = 0;
    uint64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            forget(pid);
            return status;
        }
        if (r < 0) {
            forget(pid);
            fail_msg("waitpid(%d): %s", (int)pid, strerror(errno));
        }
        if (now_ms() >= deadline)
            break;
        sleep_ms(20);
    }
    tw_test_kill(pid);
    tw_test_print_log(log_path);
    fail_msg("process %d did not exit within %u ms", (int)pid, timeout_ms);
    return -1;
}

void tw_test_stop(pid_t pid, unsigned timeout_ms, const char *log_path)
{
    assert_true(pid > 0);
    assert_int_equal(kill(pid, SIGTERM), 0);
    int status = tw_test_wait_exit(pid, timeout_ms, log_path);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        tw_test_print_log(log_path);
        fail_msg("process %d did not exit cleanly on SIGTERM (wait status %d)", (int)pid,
                 status);
    }
}

void tw_test_kill(pid_t pid)
{
    forget(pid);
    assert_int_equal(kill(pid, SIGKILL), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
}

int tw_test_run(const char *const *argv, const tw_test_spawn_opts *opts, unsigned timeout_ms)
{
    pid_t pid = 0;
    if (spawn(argv, opts, &pid) != 0)
        return 127; /* as a shell answers for a program it cannot run */
    int status = tw_test_wait_exit(pid, timeout_ms, opts ? opts->log_path : NULL);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool tw_test_have_openssl(void)
{
    const char *argv[] = {"openssl", "version", NULL};
    tw_test_spawn_opts o = {.log_path = "/dev/null", .stdin_null = true};
    return tw_test_run(argv, &o, 60000) == 0;
}

void tw_test_make_cert(const char *dir, const char *stem)
{
    char key[600], cert[600];
    snprintf(key, sizeof key, "%s/%s.key", dir, stem);
    snprintf(cert, sizeof cert, "%s/%s.pem", dir, stem);
    const char *argv[] = {"openssl",
                          "req",
                          "-x509",
                          "-newkey",
                          "ec",
                          "-pkeyopt",
                          "ec_paramgen_curve:P-256",
                          "-nodes",
                          "-days",
                          "1",
                          "-subj",
                          "/CN=localhost",
                          "-keyout",
                          key,
                          "-out",
                          cert,
                          NULL};
    tw_test_spawn_opts o = {.log_path = "/dev/null", .stdin_null = true};
    assert_int_equal(tw_test_run(argv, &o, 60000), 0);
}
