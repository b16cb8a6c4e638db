/* The responses the bridge keeps, over real HTTP on the real engine serving
 * the shipped model: a response read back as it was given (whole and
 * streamed); previous_response_id giving the same prompt and answer as the
 * chat completion of the whole conversation; input items listed page by
 * page; delete; each key seeing only its own; a bridge that keeps
 * nothing saying so; and the kept responses carried across a restart.
 *
 * Arguments: the model to serve. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bridge_fixture.h"
#include "test_support.h"

static const char *model_path;

static void start(twb_service *s, const char *const *bridge_flags)
{
    twb_start(s, model_path, NULL, "sk-a", bridge_flags);
}

static json_t *post_ok(twb_service *s, const char *path, const char *body, const char *what)
{
    twb_result r = twb_http(s, "POST", path, body, SIZE_MAX);
    return twb_ok_json(&r, what);
}

static json_t *get_ok(twb_service *s, const char *path, const char *what)
{
    twb_result r = twb_http(s, "GET", path, NULL, 0);
    return twb_ok_json(&r, what);
}

static const char *str(const json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

/* The text of a response's message items. */
static char *output_text(const json_t *response)
{
    size_t cap = 1, n = 0;
    char *out = calloc(1, cap);
    const json_t *item;
    size_t i;
    json_array_foreach(json_object_get(response, "output"), i, item)
    {
        if (strcmp(str(item, "type"), "message") != 0)
            continue;
        const char *t = str(json_array_get(json_object_get(item, "content"), 0), "text");
        cap += strlen(t);
        out = realloc(out, cap);
        memcpy(out + n, t, strlen(t) + 1);
        n += strlen(t);
    }
    return out;
}

static void expect_same(const json_t *got, const json_t *want, const char *what)
{
    if (!json_equal(got, want))
        fail_msg("%s differs:\n got %s\nwant %s", what, json_dumps(got, JSON_COMPACT),
                 json_dumps(want, JSON_COMPACT));
}

static void expect_error(twb_service *s, const char *method, const char *path, const char *body,
                         long status, const char *code, const char *param)
{
    twb_result r = twb_http(s, method, path, body, body ? SIZE_MAX : 0);
    json_t *j = json_loads(r.body ? r.body : "", 0, NULL);
    const json_t *err = json_object_get(j, "error");
    if (r.status != status || strcmp(str(err, "code"), code) != 0 ||
        (param && strcmp(str(err, "param"), param) != 0))
        fail_msg("%s %s: %ld %s; wanted %ld %s (param %s)", method, path, r.status, r.body, status,
                 code, param ? param : "-");
    json_decref(j);
    free(r.body);
}

/* The ids of a response's input items, every page of `limit` in the order
 * asked for, joined with spaces; checks has_more, first_id and last_id. */
static char *all_pages(twb_service *s, const char *id, int limit, const char *order)
{
    char *ids = calloc(1, 1);
    size_t n = 0;
    char after[128] = "";
    for (int page = 0; page < 100; page++) {
        char path[512];
        snprintf(path, sizeof path, "/v1/responses/%s/input_items?limit=%d&order=%s%s%s", id, limit,
                 order, after[0] ? "&after=" : "", after);
        json_t *list = get_ok(s, path, "input_items");
        assert_string_equal(str(list, "object"), "list");
        const json_t *data = json_object_get(list, "data");
        assert_true(json_array_size(data) <= (size_t)limit);
        const json_t *item;
        size_t i;
        json_array_foreach(data, i, item)
        {
            const char *iid = str(item, "id");
            assert_true(iid[0] != '\0');
            ids = realloc(ids, n + strlen(iid) + 2);
            n += (size_t)sprintf(ids + n, "%s%s", n ? " " : "", iid);
        }
        if (json_array_size(data)) {
            assert_string_equal(str(list, "first_id"), str(json_array_get(data, 0), "id"));
            assert_string_equal(str(list, "last_id"),
                                str(json_array_get(data, json_array_size(data) - 1), "id"));
        }
        bool more = json_is_true(json_object_get(list, "has_more"));
        snprintf(after, sizeof after, "%s", str(list, "last_id"));
        json_decref(list);
        if (!more)
            return ids;
    }
    fail_msg("input_items never ended");
    return ids;
}

#define ASK_ADD  "Write a function add(a, b)."
#define ASK_SUB  "Now write sub(a, b) too."
#define SETTINGS "\"max_output_tokens\":24,\"temperature\":0,\"reasoning\":{\"effort\":\"minimal\"}"

/* A response goes on from the one before: same prompt and answer as the
 * chat completion of the conversation (whose instructions are not carried,
 * as OpenAI's are not); the items listed; delete; keys apart. */
static void test_conversation(void **state)
{
    (void)state;
    twb_service s;
    static const char *const flags[] = {"--api-key", "sk-b", NULL};
    start(&s, flags);

    json_t *r1 =
        post_ok(&s, "/v1/responses",
                "{\"instructions\":\"You write Python.\",\"input\":\"" ASK_ADD "\"," SETTINGS "}",
                "first response");
    assert_true(json_is_true(json_object_get(r1, "store")));
    const char *id1 = str(r1, "id");
    char path[256], body[1024];
    snprintf(path, sizeof path, "/v1/responses/%s", id1);
    json_t *back = get_ok(&s, path, "retrieve");
    expect_same(back, r1, "the kept response");
    json_decref(back);

    snprintf(body, sizeof body,
             "{\"previous_response_id\":\"%s\",\"input\":\"" ASK_SUB "\"," SETTINGS "}", id1);
    json_t *r2 = post_ok(&s, "/v1/responses", body, "second response");
    assert_string_equal(str(r2, "previous_response_id"), id1);
    assert_true(json_is_null(json_object_get(r2, "instructions")));
    /* the chat completion of what the second response saw */
    char *said = output_text(r1);
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", ASK_ADD);
    if (said[0])
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "assistant", "content", said));
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", ASK_SUB));
    json_t *chat_req = json_pack("{s:o, s:i, s:i, s:s}", "messages", msgs, "max_completion_tokens",
                                 24, "temperature", 0, "reasoning_effort", "minimal");
    char *chat_body = json_dumps(chat_req, JSON_COMPACT);
    json_t *chat = post_ok(&s, "/v1/chat/completions", chat_body, "chat of the conversation");
    const json_t *usage = json_object_get(r2, "usage");
    assert_int_equal(
        json_integer_value(json_object_get(usage, "input_tokens")),
        json_integer_value(json_object_get(json_object_get(chat, "usage"), "prompt_tokens")));
    char *said2 = output_text(r2);
    const json_t *cmsg =
        json_object_get(json_array_get(json_object_get(chat, "choices"), 0), "message");
    assert_string_equal(said2, json_string_value(json_object_get(cmsg, "content"))
                                   ? json_string_value(json_object_get(cmsg, "content"))
                                   : "");
    free(said2);
    free(said);
    free(chat_body);
    json_decref(chat_req);
    json_decref(chat);

    /* its input items: the first's input and output, then its own, newest
     * first unless asked otherwise; every page size gives the same list */
    const size_t n_items = 2 + json_array_size(json_object_get(r1, "output"));
    snprintf(path, sizeof path, "/v1/responses/%s/input_items", str(r2, "id"));
    json_t *list = get_ok(&s, path, "input_items");
    const json_t *data = json_object_get(list, "data");
    assert_int_equal(json_array_size(data), n_items);
    assert_false(json_is_true(json_object_get(list, "has_more")));
    const json_t *newest = json_array_get(data, 0), *oldest = json_array_get(data, n_items - 1);
    assert_string_equal(str(newest, "role"), "user");
    assert_string_equal(str(json_array_get(json_object_get(newest, "content"), 0), "text"),
                        ASK_SUB);
    assert_string_equal(str(json_array_get(json_object_get(oldest, "content"), 0), "text"),
                        ASK_ADD);
    expect_same(json_array_get(data, 1), json_array_get(json_object_get(r1, "output"), n_items - 3),
                "the first response's last output item");
    char *asc1 = all_pages(&s, str(r2, "id"), 1, "asc");
    char *asc2 = all_pages(&s, str(r2, "id"), 2, "asc");
    char *desc = all_pages(&s, str(r2, "id"), 100, "desc");
    assert_string_equal(asc1, asc2);
    char *first = strndup(asc1, strcspn(asc1, " "));
    assert_string_equal(str(json_array_get(data, n_items - 1), "id"), first);
    free(first);
    assert_int_equal(strlen(desc), strlen(asc1));
    free(asc1);
    free(asc2);
    free(desc);
    json_decref(list);
    char q[512];
    snprintf(q, sizeof q, "%s?limit=0", path);
    expect_error(&s, "GET", q, NULL, 400, "invalid_value", "limit");
    snprintf(q, sizeof q, "%s?limit=2x", path);
    expect_error(&s, "GET", q, NULL, 400, "invalid_value", "limit");
    snprintf(q, sizeof q, "%s?order=up", path);
    expect_error(&s, "GET", q, NULL, 400, "invalid_value", "order");
    snprintf(q, sizeof q, "%s?after=msg_nothing", path);
    expect_error(&s, "GET", q, NULL, 400, "invalid_value", "after");
    snprintf(q, sizeof q, "%s?after=%%zz", path);
    expect_error(&s, "GET", q, NULL, 400, "invalid_value", "after");

    /* another key sees none of it */
    s.key = "sk-b";
    snprintf(path, sizeof path, "/v1/responses/%s", id1);
    expect_error(&s, "GET", path, NULL, 404, "not_found", NULL);
    expect_error(&s, "DELETE", path, NULL, 404, "not_found", NULL);
    expect_error(&s, "POST", "/v1/responses", body, 404, "previous_response_not_found",
                 "previous_response_id");
    s.key = "sk-a";

    /* the kept responses are counted on /metrics */
    twb_result m = twb_http(&s, "GET", "/metrics", NULL, 0);
    assert_int_equal(m.status, 200);
    assert_non_null(strstr(m.body, "tokenwire_bridge_responses_kept 2\n"));
    free(m.body);

    /* the other routes of a kept response, and a query too long to read */
    char *long_query = malloc(1200 + 64);
    int at = sprintf(long_query, "/v1/responses/%s/input_items?after=", id1);
    memset(long_query + at, 'a', 1100);
    long_query[at + 1100] = '\0';
    expect_error(&s, "GET", long_query, NULL, 414, "uri_too_long", NULL);
    free(long_query);
    snprintf(path, sizeof path, "/v1/responses/%s/cancel", id1);
    expect_error(&s, "POST", path, "{}", 400, "invalid_request", NULL);
    snprintf(path, sizeof path, "/v1/responses/%s/other", id1);
    expect_error(&s, "GET", path, NULL, 404, "unknown_url", NULL);
    snprintf(path, sizeof path, "/v1/responses/%s", id1);
    expect_error(&s, "PUT", path, "{}", 405, "method_not_allowed", NULL);
    expect_error(&s, "POST", "/v1/responses",
                 "{\"previous_response_id\":\"resp_none\",\"input\":\"x\"}", 404,
                 "previous_response_not_found", "previous_response_id");
    expect_error(&s, "POST", "/v1/responses", "{\"previous_response_id\":\"\",\"input\":\"x\"}",
                 400, "invalid_value", "previous_response_id");

    /* deleted: gone, while the response made from it still goes on */
    twb_result d = twb_http(&s, "DELETE", path, NULL, 0);
    json_t *dj = twb_ok_json(&d, "delete");
    assert_string_equal(str(dj, "id"), id1);
    assert_true(json_is_true(json_object_get(dj, "deleted")));
    json_decref(dj);
    expect_error(&s, "GET", path, NULL, 404, "not_found", NULL);
    expect_error(&s, "POST", "/v1/responses", body, 404, "previous_response_not_found",
                 "previous_response_id");
    snprintf(body, sizeof body,
             "{\"previous_response_id\":\"%s\",\"input\":\"And mul.\",\"store\":false," SETTINGS
             "}",
             str(r2, "id"));
    json_t *r3 = post_ok(&s, "/v1/responses", body, "third response");
    assert_true(json_is_false(json_object_get(r3, "store")));
    assert_true(json_integer_value(json_object_get(json_object_get(r3, "usage"), "input_tokens")) >
                json_integer_value(json_object_get(usage, "input_tokens")));
    /* store: false keeps nothing */
    snprintf(path, sizeof path, "/v1/responses/%s", str(r3, "id"));
    expect_error(&s, "GET", path, NULL, 404, "not_found", NULL);
    json_decref(r3);
    json_decref(r2);
    json_decref(r1);
    twb_stop(&s);
}

static void keep_final(json_t *ev, void *user)
{
    const char *type = str(ev, "type");
    if (!strcmp(type, "response.completed") || !strcmp(type, "response.incomplete"))
        *(json_t **)user = json_incref(json_object_get(ev, "response"));
}

/* A streamed response is kept as its last event gave it, and is there
 * for the next request by the time that event arrives; a bridge that keeps
 * nothing says so. */
static void test_streamed_and_off(void **state)
{
    (void)state;
    twb_service s;
    start(&s, NULL);
    twb_result st = twb_http(&s, "POST", "/v1/responses",
                             "{\"input\":\"def fib(n):\",\"stream\":true," SETTINGS "}", SIZE_MAX);
    assert_int_equal(st.status, 200);
    json_t *final = NULL;
    twb_sse_each(st.body, keep_final, &final);
    free(st.body);
    assert_non_null(final);
    char path[256];
    snprintf(path, sizeof path, "/v1/responses/%s", str(final, "id"));
    json_t *back = get_ok(&s, path, "retrieve streamed");
    expect_same(back, final, "the kept streamed response");
    json_decref(back);
    snprintf(path, sizeof path, "/v1/responses/%s?stream=true", str(final, "id"));
    expect_error(&s, "GET", path, NULL, 400, "unsupported_parameter", "stream");
    json_decref(final);
    twb_stop(&s);

    static const char *const off[] = {"--responses-store-mb", "0", NULL};
    start(&s, off);
    json_t *r = post_ok(&s, "/v1/responses", "{\"input\":\"x\"," SETTINGS "}", "unkept response");
    assert_true(json_is_false(json_object_get(r, "store")));
    snprintf(path, sizeof path, "/v1/responses/%s", str(r, "id"));
    expect_error(&s, "GET", path, NULL, 404, "not_found", NULL);
    char body[256];
    snprintf(body, sizeof body, "{\"previous_response_id\":\"%s\",\"input\":\"y\"}", str(r, "id"));
    expect_error(&s, "POST", "/v1/responses", body, 400, "unsupported_parameter",
                 "previous_response_id");
    json_decref(r);
    twb_stop(&s);
}

/* A --responses-store-file in a folder of its own under /tmp, and the
 * bridge flags that name it. */
typedef struct store_file {
    char dir[32];
    char path[128];
    const char *flags[5];
} store_file;

static void store_file_make(store_file *f)
{
    snprintf(f->dir, sizeof f->dir, "/tmp/tw-kept-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/responses.jsonl", f->dir);
    f->flags[0] = "--responses-store-file";
    f->flags[1] = f->path;
    f->flags[2] = NULL;
}

/* The value of a counter on /metrics (-1 when it is not there). */
static long metric(const twb_service *s, const char *name)
{
    twb_result m = twb_http(s, "GET", "/metrics", NULL, 0);
    assert_int_equal(m.status, 200);
    char line[128];
    snprintf(line, sizeof line, "\n%s ", name);
    const char *at = strstr(m.body, line);
    const long v = at ? strtol(at + strlen(line), NULL, 10) : -1;
    free(m.body);
    return v;
}

static void store_file_remove(const store_file *f)
{
    assert_int_equal(unlink(f->path), 0);
    assert_int_equal(rmdir(f->dir), 0);
}

/* With --responses-store-file a stopped bridge writes what it keeps, and
 * the next one reads it: the response comes back the same, and a request
 * goes on from it. */
static void test_restart(void **state)
{
    (void)state;
    store_file sf;
    store_file_make(&sf);
    const char *const *flags = sf.flags;
    /* the journal's lines left to the system's write-back: none synced */
    sf.flags[2] = "--responses-store-sync";
    sf.flags[3] = "false";
    sf.flags[4] = NULL;
    twb_service s;
    start(&s, flags);
    json_t *r = post_ok(&s, "/v1/responses", "{\"input\":\"" ASK_ADD "\"," SETTINGS "}",
                        "response before the restart");
    assert_int_equal(metric(&s, "tokenwire_bridge_responses_journal_syncs_total"), 0);
    twb_stop(&s);
    sf.flags[2] = NULL;
    start(&s, flags);
    char path[256], body[512];
    snprintf(path, sizeof path, "/v1/responses/%s", str(r, "id"));
    json_t *back = get_ok(&s, path, "response after the restart");
    expect_same(back, r, "the response kept across the restart");
    snprintf(body, sizeof body,
             "{\"previous_response_id\":\"%s\",\"input\":\"" ASK_SUB "\"," SETTINGS "}",
             str(r, "id"));
    json_t *next = post_ok(&s, "/v1/responses", body, "going on after the restart");
    assert_true(
        json_integer_value(json_object_get(json_object_get(next, "usage"), "input_tokens")) >
        json_integer_value(json_object_get(json_object_get(r, "usage"), "input_tokens")));
    json_decref(next);
    json_decref(back);
    json_decref(r);
    twb_stop(&s);
    store_file_remove(&sf);
}

/* Status of GET path. */
static long get_status(const twb_service *s, const char *path)
{
    twb_result r = twb_http(s, "GET", path, NULL, 0);
    free(r.body);
    return r.status;
}

/* A bridge killed with SIGKILL writes nothing at stop, so what the next
 * one reads back is the journal: the responses kept before the kill, and
 * not the one deleted. */
static void test_killed(void **state)
{
    (void)state;
    store_file sf;
    store_file_make(&sf);
    const char *const *flags = sf.flags;
    const char *file = sf.path;
    twb_service s;
    start(&s, flags);
    json_t *kept = post_ok(&s, "/v1/responses", "{\"input\":\"" ASK_ADD "\"," SETTINGS "}",
                           "the response to keep");
    json_t *gone = post_ok(&s, "/v1/responses", "{\"input\":\"" ASK_SUB "\"," SETTINGS "}",
                           "the response to delete");
    char kept_path[256], gone_path[256];
    snprintf(kept_path, sizeof kept_path, "/v1/responses/%s", str(kept, "id"));
    snprintf(gone_path, sizeof gone_path, "/v1/responses/%s", str(gone, "id"));
    twb_result d = twb_http(&s, "DELETE", gone_path, NULL, 0);
    assert_int_equal(d.status, 200);
    free(d.body);
    /* two answers kept and one deleted, each line on the disk before the
     * call that wrote it returned */
    assert_int_equal(metric(&s, "tokenwire_bridge_responses_journal_syncs_total"), 3);
    twb_kill_bridge(&s);
    twb_stop(&s);
    struct stat st;
    assert_int_equal(stat(file, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    start(&s, flags);
    json_t *back = get_ok(&s, kept_path, "the kept response after the kill");
    expect_same(back, kept, "the response kept across the kill");
    assert_int_equal(get_status(&s, gone_path), 404);
    json_decref(back);
    json_decref(gone);
    json_decref(kept);
    twb_stop(&s);
    store_file_remove(&sf);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_conversation, twb_teardown),
        cmocka_unit_test_teardown(test_streamed_and_off, twb_teardown),
        cmocka_unit_test_teardown(test_restart, twb_teardown),
        cmocka_unit_test_teardown(test_killed, twb_teardown),
    };
    return twb_main(argc, argv, &model_path, tests, sizeof tests / sizeof tests[0]);
}
