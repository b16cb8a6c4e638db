#include "bridge_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "http_client.h"
#include "proc_fixture.h"
#include "test_support.h"
#include "tokenwire/client.h"

/* How long a daemon gets to start, to load the model, and to stop. */
#define BRIDGE_START_MS 20000u
#define READY_MS 60000u
#define STOP_MS 20000u

uint64_t twb_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void twb_build_path(char *out, size_t cap, const char *rel)
{
    tw_test_build_path(out, cap, rel);
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

/* Both daemons write stdout and stderr to their log and read nothing. */
static pid_t spawn(const char *const *argv, const char *log_path)
{
    tw_test_spawn_opts o = {.log_path = log_path, .stdin_null = true};
    return tw_test_spawn(argv, &o);
}

/* The log directory of the running test, for the teardown after a failure.
 * Not the service itself: it lives in the failed test's frame, which is gone
 * by the time the teardown runs. */
static char *current_dir;

int twb_teardown(void **state)
{
    /* The process fixture remembers both daemons until they are reaped. */
    tw_test_proc_teardown(state);
    if (current_dir) {
        tw_test_rmtree(current_dir);
        free(current_dir);
        current_dir = NULL;
    }
    return 0;
}

void twb_init(twb_service *s)
{
    memset(s, 0, sizeof *s);
    s->dir = tw_test_mkdtemp();
    assert_non_null(s->dir);
    current_dir = s->dir;
    /* Prompt state goes under $XDG_CACHE_HOME: keep it in the test's dir. */
    setenv("XDG_CACHE_HOME", s->dir, 1);
    snprintf(s->engine_log, sizeof s->engine_log, "%s/engine.log", s->dir);
    snprintf(s->bridge_log, sizeof s->bridge_log, "%s/bridge.log", s->dir);
    s->http = tw_test_free_port();
    s->rpc = tw_test_free_port();
    s->pub = tw_test_free_port();
    snprintf(s->rpc_url, sizeof s->rpc_url, "tcp://127.0.0.1:%d", s->rpc);
    snprintf(s->pub_url, sizeof s->pub_url, "tcp://127.0.0.1:%d", s->pub);
}

void twb_start_engine(twb_service *s, const char *model, const char *const *extra)
{
    char engine[1100];
    tw_test_build_path(engine, sizeof engine, "server/engine/tokenwired");
    const char *argv[40] = {engine,     "--listen",  s->rpc_url, "--publish", s->pub_url,
                            "--threads", "2",        "--model",  model};
    int n = 9;
    for (; extra && *extra && n < 38; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    s->engine = spawn(argv, s->engine_log);
}

/* Any HTTP answer at all: the bridge listens. */
static bool bridge_answers(void *user)
{
    twb_result r = twb_http(user, "GET", "/health", NULL, 0);
    free(r.body);
    return r.status != 0;
}

void twb_start_bridge(twb_service *s, const char *key, const char *const *extra)
{
    char bridge[1100], listen[64];
    tw_test_build_path(bridge, sizeof bridge, "server/bridge/tokenwire-bridge");
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
    tw_test_wait_ready(s->bridge, bridge_answers, s, BRIDGE_START_MS, "tokenwire-bridge",
                       s->bridge_log);
}

static bool model_listed_ready(void *user)
{
    twb_result r = twb_http(user, "GET", "/v1/models", NULL, 0);
    bool ok = r.status == 200 && strstr(r.body, "\"ready\"") != NULL;
    free(r.body);
    return ok;
}

void twb_wait_ready(twb_service *s)
{
    /* The engine is watched (it is the one that loads the model); a bridge
     * that cannot reach it only shows in the engine's log. */
    tw_test_wait_ready(s->engine, model_listed_ready, s, READY_MS, "tokenwired",
                       s->engine_log);
}

static void stop_one(pid_t *pid, const char *log_path)
{
    if (!*pid)
        return;
    pid_t p = *pid;
    *pid = 0;
    tw_test_stop(p, STOP_MS, log_path);
}

void twb_stop_engine(twb_service *s)
{
    stop_one(&s->engine, s->engine_log);
}

static void kill_one(pid_t *pid)
{
    if (!*pid)
        return;
    pid_t p = *pid;
    *pid = 0;
    tw_test_kill(p);
}

void twb_kill_engine(twb_service *s)
{
    kill_one(&s->engine);
}

void twb_kill_bridge(twb_service *s)
{
    kill_one(&s->bridge);
}

void twb_stop(twb_service *s)
{
    stop_one(&s->bridge, s->bridge_log);
    stop_one(&s->engine, s->engine_log);
    tw_test_rmtree(s->dir);
    free(s->dir);
    s->dir = NULL;
    current_dir = NULL;
}

twb_result twb_http(const twb_service *s, const char *method, const char *path,
                    const char *body, size_t body_len)
{
    if (body && body_len == SIZE_MAX)
        body_len = strlen(body);
    tw_test_http_result h = tw_test_http(method, s->http, path, body, body_len, s->key);
    return (twb_result){h.status, h.body, h.len};
}

bool twb_sse_each(const char *body, void (*on_event)(json_t *ev, void *user), void *user)
{
    for (const char *p = body; (p = strstr(p, "data: ")) != NULL;) {
        p += 6;
        const char *end = strstr(p, "\n\n");
        assert_non_null(end);
        if (strncmp(p, "[DONE]", 6) == 0)
            return true;
        json_t *ev = json_loadb(p, (size_t)(end - p), 0, NULL);
        if (!ev)
            fail_msg("bad event: %.*s", (int)(end - p), p);
        on_event(ev, user);
        json_decref(ev);
        p = end + 2;
    }
    return false;
}

json_t *twb_ok_json(twb_result *r, const char *what)
{
    if (r->status != 200)
        fail_msg("%s: %ld %s", what, r->status, r->body);
    json_t *j = json_loads(r->body, 0, NULL);
    if (!json_is_object(j))
        fail_msg("%s: not a JSON object: %s", what, r->body);
    free(r->body);
    r->body = NULL;
    return j;
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

int twb_main(int argc, char **argv, const char **model, const struct CMUnitTest *tests,
             size_t n_tests)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL\n", argv[0]);
        return 2;
    }
    *model = argv[1];
    if (!twb_daemons_built())
        return 0;
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = _cmocka_run_group_tests("tests", tests, n_tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}

void twb_start(twb_service *s, const char *model, const char *const *engine_extra, const char *key,
               const char *const *bridge_extra)
{
    twb_init(s);
    twb_start_engine(s, model, engine_extra);
    twb_start_bridge(s, key, bridge_extra);
    twb_wait_ready(s);
}
