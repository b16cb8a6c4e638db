#include "service.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http_client.h"
#include "proc_fixture.h"
#include "test_support.h"

static twt_http_result http(int port, const char *method, const char *path, const char *body)
{
    return tw_test_http(method, port, path, body, body ? strlen(body) : 0, NULL);
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
static bool ready(void *user)
{
    const twt_service *s = user;
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
    s->http = tw_test_free_port();
    s->rpc = tw_test_free_port();
    s->pub = tw_test_free_port();
    snprintf(s->rpc_url, sizeof s->rpc_url, "tcp://127.0.0.1:%d", s->rpc);
    snprintf(s->pub_url, sizeof s->pub_url, "tcp://127.0.0.1:%d", s->pub);

    char engine[1024], bridge[1024], listen[64];
    tw_test_build_path(engine, sizeof engine, "server/engine/tokenwired");
    tw_test_build_path(bridge, sizeof bridge, "server/bridge/tokenwire-bridge");
    const char *eargv[32] = {engine,   "--listen", s->rpc_url, "--publish",
                             s->pub_url, "--threads", "2",       "--model",
                             model};
    int n = 9;
    for (; extra && *extra && n < 30; extra++)
        eargv[n++] = *extra;
    eargv[n] = NULL;
    tw_test_spawn_opts eo = {.log_path = s->engine_log, .stdin_null = true};
    s->engine = tw_test_spawn(eargv, &eo);

    snprintf(listen, sizeof listen, "http://127.0.0.1:%d", s->http);
    const char *bargv[] = {bridge,       "--listen",          listen, "--engine",
                           s->rpc_url,   "--engine-pub",      s->pub_url,
                           "--probe-interval-ms", "100",       NULL};
    tw_test_spawn_opts bo = {.log_path = s->bridge_log, .stdin_null = true};
    s->bridge = tw_test_spawn(bargv, &bo);

    tw_test_wait_ready(s->engine, ready, s, 30000, "the service", s->engine_log);
}

void twt_service_stop(twt_service *s)
{
    pid_t bridge = s->bridge, engine = s->engine;
    s->bridge = s->engine = 0;
    if (bridge)
        tw_test_stop(bridge, 20000, s->bridge_log);
    if (engine)
        tw_test_stop(engine, 20000, s->engine_log);
    tw_test_rmtree(s->dir);
    free(s->dir);
    s->dir = NULL;
}

char *twt_run_cli(const twt_service *s, const char *const *args, int *status,
                  char **err_text)
{
    char cli[1024], out[1200], log[1200];
    tw_test_build_path(cli, sizeof cli, "client/cli/tokenwire");
    snprintf(out, sizeof out, "%s/cli.out", s->dir);
    snprintf(log, sizeof log, "%s/cli.log", s->dir);
    unlink(log); /* the log is appended to: start each run afresh */
    const char *argv[32] = {cli, "--engine", s->rpc_url, "--pub", s->pub_url};
    int n = 5;
    for (; args && *args && n < 31; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    tw_test_spawn_opts o = {.log_path = log, .out_path = out, .stdin_null = true};
    *status = tw_test_run(argv, &o, 60000);
    if (*status != 0)
        tw_test_print_log(log);
    size_t len;
    char *text = tw_test_read_file(out, &len);
    assert_non_null(text);
    if (err_text) {
        *err_text = tw_test_read_file(log, &len);
        assert_non_null(*err_text);
    }
    return text;
}

bool twt_looks_like_python(const char *text)
{
    return text && strstr(text, "def ") && strchr(text, ':') &&
           (strstr(text, "return") || strstr(text, "\n    "));
}
