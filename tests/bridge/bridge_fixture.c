#include "bridge_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_support.h"
#include "tokenwire/client.h"

extern char **environ;

uint64_t twb_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void twb_build_path(char *out, size_t cap, const char *rel)
{
    const char *build = getenv("TW_BUILD_DIR");
    if (!build || !*build)
        fail_msg("TW_BUILD_DIR is not set (run through meson test)");
    snprintf(out, cap, "%s/%s", build, rel);
}

static bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

bool twb_daemons_built(void)
{
    const char *build = getenv("TW_BUILD_DIR");
    if (!build || !*build) {
        printf("SKIPPED (TW_BUILD_DIR not set)\n");
        return false;
    }
    char a[1100], b[1100];
    snprintf(a, sizeof a, "%s/server/engine/tokenwired", build);
    snprintf(b, sizeof b, "%s/server/bridge/tokenwire-bridge", build);
    if (!is_file(a) || !is_file(b)) {
        printf("SKIPPED (tokenwired or tokenwire-bridge not built)\n");
        return false;
    }
    return true;
}

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

static pid_t spawn(const char *const *argv, const char *log_path)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
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

/* The service of the running test, for the teardown after a failure. */
static twb_service *current;

int twb_teardown(void **state)
{
    (void)state;
    twb_service *s = current;
    current = NULL;
    if (!s)
        return 0;
    pid_t pids[2] = {s->bridge, s->engine};
    for (int i = 0; i < 2; i++) {
        if (pids[i] > 0) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], NULL, 0);
        }
    }
    s->bridge = s->engine = 0;
    if (s->dir) {
        tw_test_rmtree(s->dir);
        free(s->dir);
        s->dir = NULL;
    }
    return 0;
}

void twb_init(twb_service *s)
{
    memset(s, 0, sizeof *s);
    current = s;
    s->dir = tw_test_mkdtemp();
    assert_non_null(s->dir);
    /* Prompt state goes under $XDG_CACHE_HOME: keep it in the test's dir. */
    setenv("XDG_CACHE_HOME", s->dir, 1);
    snprintf(s->engine_log, sizeof s->engine_log, "%s/engine.log", s->dir);
    snprintf(s->bridge_log, sizeof s->bridge_log, "%s/bridge.log", s->dir);
    s->http = free_port();
    s->rpc = free_port();
    s->pub = free_port();
    snprintf(s->rpc_url, sizeof s->rpc_url, "tcp://127.0.0.1:%d", s->rpc);
    snprintf(s->pub_url, sizeof s->pub_url, "tcp://127.0.0.1:%d", s->pub);
}

void twb_start_engine(twb_service *s, const char *model, const char *const *extra)
{
    char engine[1100];
    twb_build_path(engine, sizeof engine, "server/engine/tokenwired");
    const char *argv[40] = {engine,     "--listen",  s->rpc_url, "--publish", s->pub_url,
                            "--threads", "2",        "--model",  model};
    int n = 9;
    for (; extra && *extra && n < 38; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    s->engine = spawn(argv, s->engine_log);
}

void twb_start_bridge(twb_service *s, const char *key, const char *const *extra)
{
    char bridge[1100], listen[64];
    twb_build_path(bridge, sizeof bridge, "server/bridge/tokenwire-bridge");
    snprintf(listen, sizeof listen, "http://127.0.0.1:%d", s->http);
    const char *argv[40] = {bridge,     "--listen",          listen, "--engine",
                            s->rpc_url, "--engine-pub",      s->pub_url,
                            "--quiet",  "--probe-interval-ms", "100"};
    int n = 10;
    s->key = key;
    if (key) {
        argv[n++] = "--api-key";
        argv[n++] = key;
    }
    for (; extra && *extra && n < 38; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    s->bridge = spawn(argv, s->bridge_log);
    for (int i = 0; i < 400; i++) {
        twb_result r = twb_http(s, "GET", "/health", NULL, 0);
        free(r.body);
        if (r.status != 0)
            return;
        usleep(50000);
    }
    print_log(s->bridge_log);
    fail_msg("the bridge did not start");
}

void twb_wait_ready(twb_service *s)
{
    for (int i = 0; i < 1200; i++) {
        twb_result r = twb_http(s, "GET", "/v1/models", NULL, 0);
        bool ok = r.status == 200 && strstr(r.body, "\"ready\"") != NULL;
        free(r.body);
        if (ok)
            return;
        int status;
        if (s->engine && waitpid(s->engine, &status, WNOHANG) == s->engine) {
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

static void stop_one(pid_t *pid, const char *log_path)
{
    if (!*pid)
        return;
    pid_t p = *pid;
    *pid = 0;
    kill(p, SIGTERM);
    int status = 0;
    for (int t = 0; t < 1000; t++) {
        if (waitpid(p, &status, WNOHANG) == p)
            goto done;
        usleep(20000);
    }
    kill(p, SIGKILL);
    waitpid(p, &status, 0);
    print_log(log_path);
    fail_msg("a child did not stop on SIGTERM in 20 s");
done:
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        print_log(log_path);
        fail_msg("a child exited with status %d", status);
    }
}

void twb_stop_engine(twb_service *s)
{
    stop_one(&s->engine, s->engine_log);
}

void twb_kill_engine(twb_service *s)
{
    if (!s->engine)
        return;
    kill(s->engine, SIGKILL);
    waitpid(s->engine, NULL, 0);
    s->engine = 0;
}

void twb_stop(twb_service *s)
{
    stop_one(&s->bridge, s->bridge_log);
    stop_one(&s->engine, s->engine_log);
    tw_test_rmtree(s->dir);
    free(s->dir);
    s->dir = NULL;
    current = NULL;
}

static size_t on_data(char *p, size_t size, size_t n, void *user)
{
    twb_result *r = user;
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

twb_result twb_http(const twb_service *s, const char *method, const char *path,
                    const char *body, size_t body_len)
{
    twb_result r = {0, calloc(1, 1), 0};
    CURL *c = curl_easy_init();
    if (!c || !r.body) {
        curl_easy_cleanup(c);
        return r;
    }
    char url[256], auth[300];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->http, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (s->key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", s->key);
        h = curl_slist_append(h, auth);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (!strcmp(method, "HEAD"))
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE,
                         (long)(body_len == SIZE_MAX ? strlen(body) : body_len));
    }
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return r;
}

void twb_expect_error(twb_result *r, long status, const char *code)
{
    if (r->status != status)
        fail_msg("status %ld, expected %ld: %s", r->status, status, r->body);
    json_t *j = json_loads(r->body, 0, NULL);
    if (!j)
        fail_msg("error body is not JSON: %s", r->body);
    json_t *e = json_object_get(j, "error");
    assert_true(json_is_object(e));
    assert_true(json_is_string(json_object_get(e, "message")));
    assert_true(json_is_string(json_object_get(e, "type")));
    if (code) {
        const char *got = json_string_value(json_object_get(e, "code"));
        if (!got || strcmp(got, code) != 0)
            fail_msg("error code %s, expected %s: %s", got ? got : "null", code, r->body);
    }
    json_decref(j);
    free(r->body);
    r->body = NULL;
}

int twb_connect(const twb_service *s)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                            .sin_port = htons((uint16_t)s->http)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        fail_msg("connect to the bridge: %s", strerror(errno));
    struct timeval tv = {.tv_sec = 30};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

void twb_send_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            fail_msg("send: %s", strerror(errno));
        data += n;
        len -= (size_t)n;
    }
}

char *twb_read_until_close(int fd, unsigned timeout_ms, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    uint64_t until = twb_now_ms() + timeout_ms;
    for (;;) {
        uint64_t now = twb_now_ms();
        if (now >= until)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = poll(&p, 1, (int)(until - now));
        if (pr <= 0)
            break;
        if (n + 1024 >= cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        ssize_t k = recv(fd, buf + n, cap - n - 1, 0);
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

twb_stats twb_engine_stats(const twb_service *s)
{
    tw_client_opts o;
    tw_client_opts_init(&o);
    o.rpc_url = s->rpc_url;
    o.pub_url = "";
    o.timeout_ms = 10000;
    tw_client *c = NULL;
    tw_err err = {{0}};
    if (tw_client_open(&o, &c, &err) != TW_OK)
        fail_msg("client: %s", err.msg);
    Tokenwire__V1__Reply *rep = NULL;
    tw_status st = tw_client_stats(c, NULL, &rep, &err);
    if (st != TW_OK || !rep || rep->result_case != TOKENWIRE__V1__REPLY__RESULT_STATS)
        fail_msg("Stats: %s", err.msg);
    twb_stats out = {
        .requests_total = rep->stats->requests_total,
        .generated_tokens = rep->stats->generated_tokens_total,
        .running = rep->stats->requests_running,
        .queued = rep->stats->requests_queued,
    };
    tw_wire_free_reply(rep);
    tw_client_close(c);
    return out;
}
