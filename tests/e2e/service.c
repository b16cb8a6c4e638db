#include "service.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.h"

extern char **environ;

void twt_build_path(char *out, size_t cap, const char *rel)
{
    const char *build = getenv("TW_BUILD_DIR");
    if (!build || !*build)
        fail_msg("TW_BUILD_DIR is not set (run through meson test)");
    snprintf(out, cap, "%s/%s", build, rel);
}

/* A port the kernel just gave out; free again once the socket closes. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* Starts argv[0] with stdout and stderr appended to log_path (stdout alone
 * to out_path when that is given, stderr then goes to log_path). */
static pid_t spawn(const char *const *argv, const char *log_path, const char *out_path)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out_path)
        posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    else
        posix_spawn_file_actions_adddup2(&fa, 2, 1);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        fail_msg("cannot start %s: %s", argv[0], strerror(rc));
    return pid;
}

static void print_log(const char *path)
{
    size_t n;
    char *log = tw_test_read_file(path, &n);
    printf("---- %s\n%s\n----\n", path, log ? log : "(none)");
    free(log);
}

/* Waits up to timeout_ms for pid; SIGKILLs it and fails the test after. */
static int wait_exit(pid_t pid, unsigned timeout_ms, const char *log_path)
{
    int status = 0;
    for (unsigned t = 0; t < timeout_ms; t += 20) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return status;
        usleep(20000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    print_log(log_path);
    fail_msg("a child did not exit in %u ms", timeout_ms);
    return -1;
}

static size_t on_data(char *p, size_t size, size_t n, void *user)
{
    twt_http_result *r = user;
    size_t k = size * n;
    char *b = realloc(r->body, r->len + k + 1);
    if (!b)
        return 0;
    memcpy(b + r->len, p, k);
    r->len += k;
    b[r->len] = '\0';
    r->body = b;
    return k;
}

static twt_http_result http(int port, const char *method, const char *path, const char *body)
{
    twt_http_result r = {0, calloc(1, 1), 0};
    assert_non_null(r.body);
    CURL *c = curl_easy_init();
    assert_non_null(c);
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return r;
}

twt_http_result twt_post(const twt_service *s, const char *path, const char *body)
{
    return http(s->http, "POST", path, body);
}

json_t *twt_post_json(const twt_service *s, const char *path, const char *body)
{
    twt_http_result r = twt_post(s, path, body);
    if (r.status != 200)
        fail_msg("POST %s %s: %ld %s", path, body, r.status, r.body);
    json_error_t jerr;
    json_t *j = json_loads(r.body, 0, &jerr);
    if (!json_is_object(j))
        fail_msg("POST %s: not a JSON object: %s", path, r.body);
    free(r.body);
    return j;
}

/* The bridge is up and the engine serves at least one ready model. */
static bool ready(const twt_service *s)
{
    twt_http_result r = http(s->http, "GET", "/v1/models", NULL);
    bool ok = r.status == 200 && strstr(r.body, "\"ready\"") != NULL;
    free(r.body);
    return ok;
}

void twt_service_start(twt_service *s, const char *model, const char *const *extra)
{
    memset(s, 0, sizeof *s);
    s->dir = tw_test_mkdtemp();
    assert_non_null(s->dir);
    /* The engine keeps prompt state under $XDG_CACHE_HOME: not in the home
     * directory of whoever runs the tests. */
    setenv("XDG_CACHE_HOME", s->dir, 1);
    snprintf(s->engine_log, sizeof s->engine_log, "%s/engine.log", s->dir);
    snprintf(s->bridge_log, sizeof s->bridge_log, "%s/bridge.log", s->dir);
    s->http = free_port();
    s->rpc = free_port();
    s->pub = free_port();
    snprintf(s->rpc_url, sizeof s->rpc_url, "tcp://127.0.0.1:%d", s->rpc);
    snprintf(s->pub_url, sizeof s->pub_url, "tcp://127.0.0.1:%d", s->pub);

    char engine[1024], bridge[1024], listen[64];
    twt_build_path(engine, sizeof engine, "server/engine/tokenwired");
    twt_build_path(bridge, sizeof bridge, "server/bridge/tokenwire-bridge");
    const char *eargv[32] = {engine,   "--listen", s->rpc_url, "--publish",
                             s->pub_url, "--threads", "2",       "--model",
                             model};
    int n = 9;
    for (; extra && *extra && n < 30; extra++)
        eargv[n++] = *extra;
    eargv[n] = NULL;
    s->engine = spawn(eargv, s->engine_log, NULL);

    snprintf(listen, sizeof listen, "http://127.0.0.1:%d", s->http);
    const char *bargv[] = {bridge,       "--listen",          listen, "--engine",
                           s->rpc_url,   "--engine-pub",      s->pub_url,
                           "--probe-interval-ms", "100",       NULL};
    s->bridge = spawn(bargv, s->bridge_log, NULL);

    for (int i = 0; i < 600; i++) {
        if (ready(s))
            return;
        int status;
        if (waitpid(s->engine, &status, WNOHANG) == s->engine) {
            s->engine = 0;
            print_log(s->engine_log);
            fail_msg("tokenwired exited early (status %d)", status);
        }
        usleep(50000);
    }
    print_log(s->engine_log);
    print_log(s->bridge_log);
    fail_msg("the service did not become ready");
}

static void stop_one(pid_t pid, const char *log_path)
{
    if (!pid)
        return;
    kill(pid, SIGTERM);
    int status = wait_exit(pid, 20000, log_path);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        print_log(log_path);
        fail_msg("a child exited with status %d", status);
    }
}

void twt_service_stop(twt_service *s)
{
    pid_t bridge = s->bridge, engine = s->engine;
    s->bridge = s->engine = 0;
    stop_one(bridge, s->bridge_log);
    stop_one(engine, s->engine_log);
    tw_test_rmtree(s->dir);
    free(s->dir);
    s->dir = NULL;
}

char *twt_run_cli(const twt_service *s, const char *const *args, int *status)
{
    char cli[1024], out[1200], log[1200];
    twt_build_path(cli, sizeof cli, "client/cli/tokenwire");
    snprintf(out, sizeof out, "%s/cli.out", s->dir);
    snprintf(log, sizeof log, "%s/cli.log", s->dir);
    const char *argv[32] = {cli, "--engine", s->rpc_url, "--pub", s->pub_url};
    int n = 5;
    for (; args && *args && n < 31; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    pid_t pid = spawn(argv, log, out);
    int st = wait_exit(pid, 60000, log);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (*status != 0)
        print_log(log);
    size_t len;
    char *text = tw_test_read_file(out, &len);
    assert_non_null(text);
    return text;
}

bool twt_looks_like_python(const char *text)
{
    return text && strstr(text, "def ") && strchr(text, ':') &&
           (strstr(text, "return") || strstr(text, "\n    "));
}
