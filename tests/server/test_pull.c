/* LoadModel from http:// URLs: the real tokenwired downloading from a local
 * HTTP server that the test controls (http_fixture.c). The model served is
 * the repository's small qwen2_mqa checkpoint, converted to GGUF by
 * tw-convert when the test starts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon_fixture.h"
#include "http_fixture.h"

#include "proc_fixture.h"
#include "test_support.h"

#define DOWNLOAD_LIMIT "1048576"

typedef struct fixture {
    twt_daemon d;
    twt_http *http;
    tw_client *c;
    char *gguf;
    size_t gguf_len;
    char sha[65];
    unsigned char *big; /* larger than DOWNLOAD_LIMIT */
    size_t big_len;
    char models[400];
} fixture;

static fixture F;

static void sha256_hex(const void *p, size_t n, char out[65])
{
    unsigned char d[32];
    unsigned int dl = 0;
    EVP_Digest(p, n, d, &dl, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static int run_convert(const char *out)
{
    char prog[1024], src[1024];
    tw_test_build_path(prog, sizeof prog, "tools/convert/tw-convert");
    /* The build folder may live anywhere; the data is in the source tree. */
    const char *srcdir = getenv("TW_SOURCE_DIR");
    snprintf(src, sizeof src, "%s/tests/data/golden/qwen2_mqa", srcdir ? srcdir : "..");
    const char *argv[] = {prog, src, out, NULL};
    tw_test_spawn_opts o = {.out_path = "/dev/null"};
    return tw_test_run(argv, &o, 60000);
}

static int group_setup(void **state)
{
    (void)state;
    twt_daemon_init(&F.d);
    char path[600];
    snprintf(path, sizeof path, "%s/src.gguf", F.d.dir);
    if (run_convert(path) != 0)
        return -1;
    F.gguf = tw_test_read_file(path, &F.gguf_len);
    if (!F.gguf)
        return -1;
    sha256_hex(F.gguf, F.gguf_len, F.sha);
    F.big_len = (1u << 20) + (1u << 19);
    F.big = calloc(1, F.big_len);
    F.http = twt_http_start();
    if (!F.big || !F.http)
        return -1;
    const char *names[] = {"/m.gguf", "/bad.gguf", "/resume.gguf", "/range-ignored.gguf",
                           "/bg.gguf", "/up.gguf", "/sub/..%2F..%2Fescape.gguf"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        twt_http_add(F.http, names[i], F.gguf, F.gguf_len);
    twt_http_add(F.http, "/big.bin", F.big, F.big_len);
    snprintf(F.models, sizeof F.models, "%s/store/models", F.d.dir);
    const char *extra[] = {"--models-dir", F.models, "--max-download-bytes", DOWNLOAD_LIMIT,
                           "--threads", "1", NULL};
    twt_daemon_start(&F.d, extra);
    F.c = twt_connect(&F.d, 20000);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tw_client_close(F.c);
    if (F.d.pid)
        twt_daemon_stop(&F.d);
    twt_daemon_cleanup(&F.d);
    twt_http_stop(F.http);
    free(F.gguf);
    free(F.big);
    return 0;
}

static void url_of(char *out, size_t cap, const char *path)
{
    snprintf(out, cap, "http://127.0.0.1:%d%s", twt_http_port(F.http), path);
}

static bool exists_in_models(const char *file)
{
    char p[700];
    snprintf(p, sizeof p, "%s/%s", F.models, file);
    return access(p, F_OK) == 0;
}

static tw_status load(const char *url, const char *name, const char *sha, bool background,
                      Tokenwire__V1__Reply **rep, tw_err *err)
{
    Tokenwire__V1__LoadModelRequest lm = TOKENWIRE__V1__LOAD_MODEL_REQUEST__INIT;
    lm.source = (char *)url;
    lm.name = (char *)name;
    lm.sha256 = (char *)sha;
    lm.has_background = background;
    lm.background = background;
    return tw_client_load_model(F.c, &lm, rep, err);
}

/* The ListModels entry of name, copied; false when absent. */
static bool model_state(const char *name, char *state, size_t cap, float *progress, char *error,
                        size_t ecap)
{
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    assert_int_equal(tw_client_list_models(F.c, NULL, &rep, &err), TW_OK);
    bool found = false;
    for (size_t i = 0; i < rep->list_models->n_models; i++) {
        const Tokenwire__V1__ModelInfo *m = rep->list_models->models[i];
        if (strcmp(m->name, name) != 0)
            continue;
        found = true;
        snprintf(state, cap, "%s", m->state);
        *progress = m->progress;
        if (error)
            snprintf(error, ecap, "%s", m->error ? m->error : "");
    }
    tw_wire_free_reply(rep);
    return found;
}

/* LoadModel's chat_template reaches the load: this model has no tokenizer,
 * so a template for it is refused with that reason, and no model stays. */
static void test_chat_template_needs_tokenizer(void **state)
{
    (void)state;
    char url[300];
    url_of(url, sizeof url, "/m.gguf");
    Tokenwire__V1__LoadModelRequest lm = TOKENWIRE__V1__LOAD_MODEL_REQUEST__INIT;
    lm.source = url;
    lm.name = "templated";
    lm.chat_template = "{{ messages[0].content }}";
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    assert_int_equal(tw_client_load_model(F.c, &lm, &rep, &err), TW_INVALID_ARGUMENT);
    tw_wire_free_reply(rep);
    if (!strstr(err.msg, "no tokenizer"))
        fail_msg("LoadModel with a chat template: %s", err.msg);
    char st[32];
    float progress;
    assert_false(model_state("templated", st, sizeof st, &progress, NULL, 0));
}

static void test_download_and_load(void **state)
{
    (void)state;
    char url[300];
    url_of(url, sizeof url, "/m.gguf");
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    /* Upper-case hex is accepted. */
    char upper[65];
    for (int i = 0; i < 65; i++)
        upper[i] = (char)(F.sha[i] >= 'a' && F.sha[i] <= 'f' ? F.sha[i] - 32 : F.sha[i]);
    tw_status st = load(url, NULL, upper, false, &rep, &err);
    assert_int_equal(st, TW_OK);
    assert_string_equal(rep->load_model->model->name, "m");
    assert_string_equal(rep->load_model->model->state, "ready");
    assert_string_equal(rep->load_model->model->architecture, "qwen2");
    tw_wire_free_reply(rep);
    assert_true(exists_in_models("m.gguf"));
    assert_false(exists_in_models("m.gguf.part"));
    char p[700];
    snprintf(p, sizeof p, "%s/m.gguf", F.models);
    size_t n = 0;
    char *got = tw_test_read_file(p, &n);
    assert_non_null(got);
    assert_int_equal(n, F.gguf_len);
    assert_memory_equal(got, F.gguf, n);
    free(got);

    /* Generation works on the downloaded model. */
    uint32_t ids[] = {1, 2, 3};
    Tokenwire__V1__TokenIds t = TOKENWIRE__V1__TOKEN_IDS__INIT;
    t.n_ids = 3;
    t.ids = ids;
    Tokenwire__V1__StopRules stop = TOKENWIRE__V1__STOP_RULES__INIT;
    stop.has_max_tokens = 1;
    stop.max_tokens = 2;
    Tokenwire__V1__GenerateRequest g = TOKENWIRE__V1__GENERATE_REQUEST__INIT;
    g.model = "m";
    g.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TOKEN_IDS;
    g.token_ids = &t;
    g.stop = &stop;
    assert_int_equal(tw_client_generate(F.c, &g, &rep, &err), TW_OK);
    assert_int_equal(rep->generate->choices[0]->n_token_ids, 2);
    tw_wire_free_reply(rep);

    /* The same name again: refused before any transfer. */
    int before = twt_http_requests(F.http);
    assert_int_equal(load(url, NULL, NULL, false, &rep, &err), TW_ALREADY_EXISTS);
    tw_wire_free_reply(rep);
    assert_int_equal(twt_http_requests(F.http), before);
}

static void test_wrong_sha256(void **state)
{
    (void)state;
    char url[300];
    url_of(url, sizeof url, "/bad.gguf");
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    char wrong[65];
    memcpy(wrong, F.sha, 65);
    wrong[0] = wrong[0] == '0' ? '1' : '0';
    assert_int_equal(load(url, NULL, wrong, false, &rep, &err), TW_DATA_LOSS);
    assert_non_null(strstr(err.msg, "SHA-256 mismatch"));
    assert_non_null(strstr(err.msg, F.sha)); /* names what arrived */
    tw_wire_free_reply(rep);
    assert_false(exists_in_models("bad.gguf"));
    assert_false(exists_in_models("bad.gguf.part"));
    char st[32];
    float pr;
    assert_false(model_state("bad", st, sizeof st, &pr, NULL, 0));
    /* Not a digest at all. */
    assert_int_equal(load(url, NULL, "abc", false, &rep, &err), TW_INVALID_ARGUMENT);
    tw_wire_free_reply(rep);
}

static void test_interrupted_download_resumes(void **state)
{
    (void)state;
    char url[300];
    url_of(url, sizeof url, "/resume.gguf");
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    twt_http_cut_next(F.http);
    tw_status st0 = load(url, NULL, F.sha, false, &rep, &err);
    if (st0 != TW_UNAVAILABLE)
        print_message("load: %s\n", err.msg);
    assert_int_equal(st0, TW_UNAVAILABLE);
    assert_non_null(strstr(err.msg, "interrupted"));
    tw_wire_free_reply(rep);
    char part[700];
    snprintf(part, sizeof part, "%s/resume.gguf.part", F.models);
    struct stat sb;
    assert_int_equal(stat(part, &sb), 0);
    assert_int_equal((size_t)sb.st_size, F.gguf_len / 2);
    assert_false(exists_in_models("resume.gguf"));

    assert_int_equal(load(url, NULL, F.sha, false, &rep, &err), TW_OK);
    tw_wire_free_reply(rep);
    char range[128], want[64];
    twt_http_last_range(F.http, range, sizeof range);
    snprintf(want, sizeof want, "bytes=%zu-", F.gguf_len / 2);
    assert_string_equal(range, want);
    assert_true(exists_in_models("resume.gguf"));
    assert_false(exists_in_models("resume.gguf.part"));
}

static void test_server_ignoring_range_restarts(void **state)
{
    (void)state;
    char url[300];
    url_of(url, sizeof url, "/range-ignored.gguf");
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    twt_http_cut_next(F.http);
    assert_int_equal(load(url, NULL, NULL, false, &rep, &err), TW_UNAVAILABLE);
    tw_wire_free_reply(rep);
    /* The server answers the Range request with the whole file (200): the
     * engine must start over, not append the whole file to the half. */
    twt_http_set_honour_range(F.http, false);
    assert_int_equal(load(url, NULL, F.sha, false, &rep, &err), TW_OK);
    tw_wire_free_reply(rep);
    twt_http_set_honour_range(F.http, true);
    char range[128];
    twt_http_last_range(F.http, range, sizeof range);
    assert_true(strncmp(range, "bytes=", 6) == 0);
}

static void test_not_found_and_bad_sources(void **state)
{
    (void)state;
    char url[300];
    url_of(url, sizeof url, "/missing.gguf");
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    assert_int_equal(load(url, NULL, NULL, false, &rep, &err), TW_NOT_FOUND);
    assert_non_null(strstr(err.msg, "HTTP 404"));
    tw_wire_free_reply(rep);
    assert_false(exists_in_models("missing.gguf.part"));
    assert_false(exists_in_models("missing.gguf"));

    const char *bad[] = {"ftp://127.0.0.1/m.gguf", "file:///etc/passwd", "gopher://x/y"};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(load(bad[i], NULL, NULL, false, &rep, &err), TW_INVALID_ARGUMENT);
        tw_wire_free_reply(rep);
    }
    /* A URL whose path names no file. */
    url_of(url, sizeof url, "/");
    assert_int_equal(load(url, "x", NULL, false, &rep, &err), TW_INVALID_ARGUMENT);
    tw_wire_free_reply(rep);
    /* Nothing listening. */
    assert_int_equal(load("http://127.0.0.1:1/m.gguf", "nobody", NULL, false, &rep, &err),
                     TW_UNAVAILABLE);
    tw_wire_free_reply(rep);
}

static void test_path_traversal(void **state)
{
    (void)state;
    char url[300];
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    /* Dot segments (resolved by the URL parser) and encoded slashes (%2F)
     * both end inside the models directory. */
    url_of(url, sizeof url, "/a/../../up.gguf");
    tw_status st = load(url, NULL, NULL, false, &rep, &err);
    if (st != TW_OK)
        print_message("load: %s\n", err.msg);
    assert_int_equal(st, TW_OK);
    assert_string_equal(rep->load_model->model->name, "up");
    tw_wire_free_reply(rep);
    url_of(url, sizeof url, "/sub/..%2F..%2Fescape.gguf");
    assert_int_equal(load(url, NULL, NULL, false, &rep, &err), TW_OK);
    assert_string_equal(rep->load_model->model->name, "escape");
    tw_wire_free_reply(rep);
    assert_true(exists_in_models("up.gguf"));
    assert_true(exists_in_models("escape.gguf"));
    char p[700];
    const char *outside[] = {"store/up.gguf", "up.gguf", "store/escape.gguf", "escape.gguf"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", F.d.dir, outside[i]);
        assert_int_not_equal(access(p, F_OK), 0);
    }
}

static void test_too_large(void **state)
{
    (void)state;
    char url[300];
    url_of(url, sizeof url, "/big.bin");
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    assert_int_equal(load(url, NULL, NULL, false, &rep, &err), TW_RESOURCE_EXHAUSTED);
    print_message("too large: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "max-download-bytes"));
    tw_wire_free_reply(rep);
    assert_false(exists_in_models("big.bin"));
    assert_false(exists_in_models("big.bin.part"));
}

static void test_background_progress(void **state)
{
    (void)state;
    char url[300];
    url_of(url, sizeof url, "/bg.gguf");
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    twt_http_set_slow_ms(F.http, 60); /* about one second for the body */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(load(url, "bg", F.sha, true, &rep, &err), TW_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* Answered before the download could have finished. */
    assert_true((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 700);
    assert_string_equal(rep->load_model->model->state, "loading");
    assert_string_equal(rep->load_model->model->name, "bg");
    tw_wire_free_reply(rep);
    /* The RPC side stays responsive meanwhile. */
    assert_int_equal(tw_client_health(F.c, NULL, &rep, &err), TW_OK);
    tw_wire_free_reply(rep);

    char st[32] = "";
    float pr = 0;
    bool saw_partial = false;
    for (int i = 0; i < 400; i++) {
        assert_true(model_state("bg", st, sizeof st, &pr, NULL, 0));
        if (strcmp(st, "loading") != 0)
            break;
        if (pr > 0.0f && pr < 0.9f)
            saw_partial = true;
        usleep(20000);
    }
    twt_http_set_slow_ms(F.http, 0);
    assert_string_equal(st, "ready");
    assert_true(saw_partial);

    /* A background failure stays visible with its reason. */
    url_of(url, sizeof url, "/gone.gguf");
    assert_int_equal(load(url, NULL, NULL, true, &rep, &err), TW_OK);
    tw_wire_free_reply(rep);
    char why[512] = "";
    for (int i = 0; i < 200; i++) {
        assert_true(model_state("gone", st, sizeof st, &pr, why, sizeof why));
        if (strcmp(st, "loading") != 0)
            break;
        usleep(20000);
    }
    assert_string_equal(st, "failed");
    assert_non_null(strstr(why, "HTTP 404"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_download_and_load),
        cmocka_unit_test(test_chat_template_needs_tokenizer),
        cmocka_unit_test(test_wrong_sha256),
        cmocka_unit_test(test_interrupted_download_resumes),
        cmocka_unit_test(test_server_ignoring_range_restarts),
        cmocka_unit_test(test_not_found_and_bad_sources),
        cmocka_unit_test(test_path_traversal),
        cmocka_unit_test(test_too_large),
        cmocka_unit_test(test_background_progress),
    };
    int rc = cmocka_run_group_tests(tests, group_setup, group_teardown);
    tw_client_fini(); /* lets NNG finish freeing closed sockets before the leak check */
    return rc;
}
