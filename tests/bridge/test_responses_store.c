/* The kept responses: what goes in comes out equal and as the reader's own
 * copy, only for the key that made it; deletes; the least recently used
 * goes first when the size runs out, and nothing larger than the store is
 * kept; the byte count returns to zero; threads at once; saving, loading
 * and the journal that keeps the file current. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "responses_store.h"

static const unsigned char alice[32] = {1}, bob[32] = {2};

/* A response named id whose text runs to about pad bytes, and its items. */
static json_t *response(const char *id, size_t pad)
{
    char *text = malloc(pad + 1);
    memset(text, 'x', pad);
    text[pad] = '\0';
    json_t *r = json_pack("{s:s, s:s, s:[{s:s, s:s}], s:f}", "id", id, "object", "response",
                          "output", "type", "message", "text", text, "temperature", 0.7);
    free(text);
    return r;
}

static json_t *items_of(const char *id)
{
    return json_pack("[{s:s, s:s, s:s}]", "id", "msg_1", "type", "message", "text", id);
}

static tw_bridge_resp_store *open_store(size_t bytes)
{
    tw_bridge_resp_store *s = NULL;
    tw_err err = {{0}};
    assert_int_equal(tw_bridge_resp_store_open(bytes, &s, &err), TW_OK);
    return s;
}

static bool kept(tw_bridge_resp_store *s, const unsigned char *owner, const char *id)
{
    return tw_bridge_resp_store_get(s, owner, id, NULL, NULL);
}

static void test_round_trip(void **state)
{
    (void)state;
    tw_bridge_resp_store *s = open_store(1 << 20);
    json_t *r = response("resp_a", 10), *it = items_of("resp_a");
    assert_true(tw_bridge_resp_store_put(s, alice, r, it));
    json_t *r2 = NULL, *it2 = NULL;
    assert_true(tw_bridge_resp_store_get(s, alice, "resp_a", &r2, &it2));
    assert_true(json_equal(r, r2));
    assert_true(json_equal(it, it2));
    /* the reader's own copy: changing it changes nothing kept */
    json_object_set_new(r2, "object", json_string("changed"));
    json_decref(r2);
    assert_true(tw_bridge_resp_store_get(s, alice, "resp_a", &r2, NULL));
    assert_true(json_equal(r, r2));
    json_decref(r2);
    json_decref(it2);
    /* another key sees nothing, and cannot delete it */
    assert_false(kept(s, bob, "resp_a"));
    assert_false(tw_bridge_resp_store_delete(s, bob, "resp_a"));
    assert_false(kept(s, alice, "resp_b"));
    assert_false(kept(s, alice, "resp_"));
    /* keeping the id again replaces it */
    json_t *r3 = response("resp_a", 20);
    assert_true(tw_bridge_resp_store_put(s, alice, r3, it));
    size_t n, bytes;
    tw_bridge_resp_store_usage(s, &n, &bytes);
    assert_int_equal(n, 1);
    assert_true(tw_bridge_resp_store_get(s, alice, "resp_a", &r2, NULL));
    assert_true(json_equal(r3, r2));
    json_decref(r2);
    assert_true(tw_bridge_resp_store_delete(s, alice, "resp_a"));
    assert_false(kept(s, alice, "resp_a"));
    assert_false(tw_bridge_resp_store_delete(s, alice, "resp_a"));
    tw_bridge_resp_store_usage(s, &n, &bytes);
    assert_int_equal(n, 0);
    assert_int_equal(bytes, 0);
    /* no id, or one longer than any the bridge makes */
    json_t *anon = json_pack("{s:s}", "object", "response");
    assert_false(tw_bridge_resp_store_put(s, alice, anon, it));
    char long_id[TW_BRIDGE_RESP_ID_MAX + 2];
    memset(long_id, 'a', sizeof long_id - 1);
    long_id[sizeof long_id - 1] = '\0';
    json_t *lr = response(long_id, 1);
    assert_false(tw_bridge_resp_store_put(s, alice, lr, it));
    assert_false(kept(s, alice, long_id));
    json_decref(lr);
    json_decref(anon);
    json_decref(r3);
    json_decref(r);
    json_decref(it);
    tw_bridge_resp_store_close(s);
}

static void test_least_recent_goes_first(void **state)
{
    (void)state;
    /* room for three responses of ~1300 bytes, not four */
    tw_bridge_resp_store *s = open_store(4200);
    char id[16];
    for (int i = 0; i < 3; i++) {
        snprintf(id, sizeof id, "resp_%d", i);
        json_t *r = response(id, 1000), *it = items_of(id);
        assert_true(tw_bridge_resp_store_put(s, alice, r, it));
        json_decref(r);
        json_decref(it);
    }
    /* reading resp_0 makes resp_1 the least recently used */
    assert_true(kept(s, alice, "resp_0"));
    json_t *r = response("resp_3", 1000), *it = items_of("resp_3");
    assert_true(tw_bridge_resp_store_put(s, alice, r, it));
    assert_true(kept(s, alice, "resp_0"));
    assert_false(kept(s, alice, "resp_1"));
    assert_true(kept(s, alice, "resp_2"));
    assert_true(kept(s, alice, "resp_3"));
    size_t n, bytes;
    tw_bridge_resp_store_usage(s, &n, &bytes);
    assert_int_equal(n, 3);
    assert_true(bytes <= 4200);
    json_decref(r);
    /* larger than the whole store: refused, and nothing is pushed out */
    r = response("resp_big", 4500);
    assert_false(tw_bridge_resp_store_put(s, alice, r, it));
    tw_bridge_resp_store_usage(s, &n, &bytes);
    assert_int_equal(n, 3);
    assert_true(kept(s, alice, "resp_2"));
    json_decref(r);
    json_decref(it);
    tw_bridge_resp_store_close(s);
}

typedef struct worker {
    tw_bridge_resp_store *s;
    int index;
    int checked;
} worker;

/* Each thread keeps, reads back and deletes its own responses, under its
 * own key, while the store pushes out others' to stay in its size. */
static void *churn(void *arg)
{
    worker *w = arg;
    unsigned char owner[32] = {(unsigned char)(10 + w->index)};
    char id[32];
    for (int i = 0; i < 400; i++) {
        snprintf(id, sizeof id, "resp_%d_%d", w->index, i);
        json_t *r = response(id, 200 + (size_t)(i % 7) * 50), *it = items_of(id);
        if (tw_bridge_resp_store_put(w->s, owner, r, it)) {
            json_t *back = NULL, *items = NULL;
            /* it may already be gone to make room for another thread's */
            if (tw_bridge_resp_store_get(w->s, owner, id, &back, &items)) {
                if (!json_equal(back, r) || !json_equal(items, it))
                    w->checked = -1000000;
                w->checked++;
            }
            json_decref(back);
            json_decref(items);
            if (i % 3 == 0)
                tw_bridge_resp_store_delete(w->s, owner, id);
        }
        json_decref(r);
        json_decref(it);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    tw_bridge_resp_store *s = open_store(40000);
    pthread_t t[4];
    worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){.s = s, .index = i};
        assert_int_equal(pthread_create(&t[i], NULL, churn, &w[i]), 0);
    }
    int checked = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_true(w[i].checked >= 0);
        checked += w[i].checked;
    }
    /* most reads find what was just kept */
    assert_true(checked > 800);
    size_t n, bytes;
    tw_bridge_resp_store_usage(s, &n, &bytes);
    assert_true(bytes <= 40000);
    assert_true(n > 0);
    tw_bridge_resp_store_close(s);
}

static void put_n(tw_bridge_resp_store *s, const unsigned char *owner, int from, int to)
{
    char id[16];
    for (int i = from; i < to; i++) {
        snprintf(id, sizeof id, "resp_%d", i);
        json_t *r = response(id, 1000), *it = items_of(id);
        assert_true(tw_bridge_resp_store_put(s, owner, r, it));
        json_decref(r);
        json_decref(it);
    }
}

/* Saved and loaded: the same entries for the same keys in the same order
 * of use; damaged lines skipped and counted; a missing file is empty. */
static void test_save_and_load(void **state)
{
    (void)state;
    char dir[] = "/tmp/tw-store-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/kept.jsonl", dir);
    tw_bridge_resp_store *s = open_store(4200);
    put_n(s, alice, 0, 2);
    put_n(s, bob, 2, 3);
    assert_true(kept(s, alice, "resp_0")); /* resp_1 is now the least recent */
    tw_err err = {{0}};
    assert_int_equal(tw_bridge_resp_store_save(s, path, &err), TW_OK);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);

    tw_bridge_resp_store *t = open_store(4200);
    size_t loaded, skipped;
    assert_int_equal(tw_bridge_resp_store_load(t, path, &loaded, &skipped, &err), TW_OK);
    assert_int_equal(loaded, 3);
    assert_int_equal(skipped, 0);
    const char *ids[] = {"resp_0", "resp_1", "resp_2"};
    for (int i = 0; i < 3; i++) {
        const unsigned char *owner = i == 2 ? bob : alice;
        json_t *a, *ai, *b, *bi;
        assert_true(tw_bridge_resp_store_get(s, owner, ids[i], &a, &ai));
        assert_true(tw_bridge_resp_store_get(t, owner, ids[i], &b, &bi));
        assert_true(json_equal(a, b));
        assert_true(json_equal(ai, bi));
        assert_false(kept(t, i == 2 ? alice : bob, ids[i]));
        json_decref(a), json_decref(ai), json_decref(b), json_decref(bi);
    }
    size_t n1, b1, n2, b2;
    tw_bridge_resp_store_usage(s, &n1, &b1);
    tw_bridge_resp_store_usage(t, &n2, &b2);
    assert_int_equal(n1, n2);
    assert_int_equal(b1, b2);
    tw_bridge_resp_store_close(t);

    /* the order of use came back: a fourth pushes out resp_1 */
    t = open_store(4200);
    FILE *f = fopen(path, "a");
    fputs("not json\n{\"owner\":\"zz\",\"response\":{\"id\":\"resp_x\"},\"items\":[]}\n"
          "{\"owner\":\"",
          f);
    for (int i = 0; i < 64; i++)
        fputc('0', f);
    fputs("\",\"response\":{\"object\":\"response\"},\"items\":[]}\n", f);
    fclose(f);
    assert_int_equal(tw_bridge_resp_store_load(t, path, &loaded, &skipped, &err), TW_OK);
    assert_int_equal(loaded, 3);
    assert_int_equal(skipped, 3);
    assert_non_null(strstr(err.msg, ":4:"));
    put_n(t, alice, 3, 4);
    assert_false(kept(t, alice, "resp_1"));
    assert_true(kept(t, alice, "resp_0"));
    assert_true(kept(t, bob, "resp_2"));
    tw_bridge_resp_store_close(t);

    /* a missing file is an empty store; a folder that is not there cannot
     * be written */
    t = open_store(4200);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(tw_bridge_resp_store_load(t, path, &loaded, &skipped, &err), TW_OK);
    assert_int_equal(loaded, 0);
    snprintf(path, sizeof path, "%s/no/such/dir/kept.jsonl", dir);
    assert_int_not_equal(tw_bridge_resp_store_save(t, path, &err), TW_OK);
    assert_non_null(strstr(err.msg, "kept.jsonl.tmp"));
    tw_bridge_resp_store_close(t);
    tw_bridge_resp_store_close(s);
    assert_int_equal(rmdir(dir), 0);
}

/* A file kept.jsonl in a folder of its own under /tmp. */
typedef struct tmp_file {
    char dir[32];
    char path[128];
} tmp_file;

static void tmp_file_make(tmp_file *t)
{
    snprintf(t->dir, sizeof t->dir, "/tmp/tw-store-XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    snprintf(t->path, sizeof t->path, "%s/kept.jsonl", t->dir);
}

static void tmp_file_remove(const tmp_file *t)
{
    assert_int_equal(unlink(t->path), 0);
    assert_int_equal(rmdir(t->dir), 0);
}

/* An empty store of 1 MiB journalled to a new tmp_file. */
static tw_bridge_resp_store *journalled(tmp_file *tf)
{
    tmp_file_make(tf);
    tw_err err = {{0}};
    tw_bridge_resp_store *s = open_store(1 << 20);
    assert_int_equal(tw_bridge_resp_store_journal(s, tf->path, &err), TW_OK);
    return s;
}

static off_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

/* With a journal, a store closed without a save (as a killed bridge ends)
 * leaves a file that loads to what it held: later puts, replaced ids and
 * deletes included, and an entry cut short by the kill is skipped. Each
 * line is synced to the disk as it is written, unless that is turned off. */
static void test_journal(void **state)
{
    (void)state;
    tmp_file tf;
    tmp_file_make(&tf);
    const char *path = tf.path;
    tw_err err = {{0}};
    tw_bridge_resp_store *s = open_store(1 << 20);
    put_n(s, alice, 0, 2); /* before the journal: written by its first rewrite */
    assert_int_equal(tw_bridge_resp_store_journal(s, path, &err), TW_OK);
    assert_int_equal(file_size(path) > 0, 1);
    put_n(s, bob, 2, 4);
    json_t *r = response("resp_2", 50), *it = items_of("resp_2 again");
    assert_true(tw_bridge_resp_store_put(s, bob, r, it)); /* replaces bob's resp_2 */
    assert_true(tw_bridge_resp_store_delete(s, alice, "resp_0"));
    assert_false(tw_bridge_resp_store_delete(s, alice, "resp_3")); /* bob's: not deleted */
    assert_int_equal(tw_bridge_resp_store_journal_errors(s), 0);
    /* each line written (three puts and a delete) synced as it was */
    assert_int_equal(tw_bridge_resp_store_journal_syncs(s), 4);
    tw_bridge_resp_store_journal_sync(s, false);
    put_n(s, alice, 7, 8);
    assert_int_equal(tw_bridge_resp_store_journal_syncs(s), 4);
    tw_bridge_resp_store_close(s);
    FILE *f = fopen(path, "a");
    fputs("{\"owner\":\"", f); /* a line the kill cut */
    fclose(f);

    tw_bridge_resp_store *t = open_store(1 << 20);
    size_t loaded, skipped;
    assert_int_equal(tw_bridge_resp_store_load(t, path, &loaded, &skipped, &err), TW_OK);
    assert_int_equal(skipped, 1);
    assert_false(kept(t, alice, "resp_0"));
    assert_true(kept(t, alice, "resp_1"));
    assert_true(kept(t, bob, "resp_3"));
    assert_true(kept(t, alice, "resp_7")); /* not synced, but written */
    json_t *r2 = NULL, *it2 = NULL;
    assert_true(tw_bridge_resp_store_get(t, bob, "resp_2", &r2, &it2));
    assert_true(json_equal(r, r2));
    assert_true(json_equal(it, it2));
    size_t n, bytes;
    tw_bridge_resp_store_usage(t, &n, &bytes);
    assert_int_equal(n, 4);
    json_decref(r), json_decref(it), json_decref(r2), json_decref(it2);
    tw_bridge_resp_store_close(t);
    tmp_file_remove(&tf);
}

/* The journal is rewritten when it outgrows what the store holds: 3000
 * keeps of one id (about 3 MB of lines) leave a file of one entry plus at
 * most the 1 MiB of slack, which loads to the last of them. */
static void test_journal_rewrites(void **state)
{
    (void)state;
    tmp_file tf;
    tw_bridge_resp_store *s = journalled(&tf);
    const char *path = tf.path;
    tw_err err = {{0}};
    char tag[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(tag, sizeof tag, "version %d", i);
        json_t *r = response("resp_same", 1000), *it = items_of(tag);
        assert_true(tw_bridge_resp_store_put(s, alice, r, it));
        json_decref(r);
        json_decref(it);
    }
    assert_true(file_size(path) < (1 << 20) + 8 * 1024);
    assert_int_equal(tw_bridge_resp_store_journal_errors(s), 0);
    tw_bridge_resp_store_close(s);
    tw_bridge_resp_store *t = open_store(1 << 20);
    size_t loaded, skipped;
    assert_int_equal(tw_bridge_resp_store_load(t, path, &loaded, &skipped, &err), TW_OK);
    assert_int_equal(skipped, 0);
    json_t *it = NULL;
    assert_true(tw_bridge_resp_store_get(t, alice, "resp_same", NULL, &it));
    assert_string_equal(json_string_value(json_object_get(json_array_get(it, 0), "text")),
                        "version 2999");
    json_decref(it);
    tw_bridge_resp_store_close(t);

    /* a journal in a folder that is not there fails at once */
    t = open_store(1 << 20);
    char missing[160];
    snprintf(missing, sizeof missing, "%s/no/such/kept.jsonl", tf.dir);
    assert_int_not_equal(tw_bridge_resp_store_journal(t, missing, &err), TW_OK);
    tw_bridge_resp_store_close(t);
    tmp_file_remove(&tf);
}

/* A line the file system refuses part-way (here the file size limit) is
 * taken back: the answer stays kept in memory, the failure is counted, and
 * the next line is whole, so loading skips nothing. */
static void test_journal_write_fails(void **state)
{
    (void)state;
    tmp_file tf;
    tw_bridge_resp_store *s = journalled(&tf);
    const char *path = tf.path;
    tw_err err = {{0}};
    put_n(s, alice, 0, 1);
    const off_t before = file_size(path);
    struct rlimit old;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = old;
    lim.rlim_cur = (rlim_t)before + 4000; /* part of a 20000-byte line */
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    json_t *big = response("resp_big", 20000), *it = items_of("resp_big");
    assert_true(tw_bridge_resp_store_put(s, alice, big, it));
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, old_handler);
    assert_int_equal(tw_bridge_resp_store_journal_errors(s), 1);
    assert_int_equal(file_size(path), before);
    assert_true(kept(s, alice, "resp_big"));
    put_n(s, bob, 1, 2);
    tw_bridge_resp_store_close(s);

    tw_bridge_resp_store *t = open_store(1 << 20);
    size_t loaded, skipped;
    assert_int_equal(tw_bridge_resp_store_load(t, path, &loaded, &skipped, &err), TW_OK);
    assert_int_equal(skipped, 0);
    assert_int_equal(loaded, 2);
    assert_true(kept(t, alice, "resp_0"));
    assert_true(kept(t, bob, "resp_1"));
    json_decref(big);
    json_decref(it);
    tw_bridge_resp_store_close(t);
    tmp_file_remove(&tf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_least_recent_goes_first),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_save_and_load),
        cmocka_unit_test(test_journal),
        cmocka_unit_test(test_journal_rewrites),
        cmocka_unit_test(test_journal_write_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
