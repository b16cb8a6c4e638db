/* The persistent state store: round trips, longest-prefix lookup, refusal
 * and removal of corrupt, truncated and foreign entries, writes killed in
 * the middle, and the byte / entry budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.h"
#include "tw/state_store.h"

static const char FP_A[65] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char FP_B[65] = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

static uint8_t *make_state(size_t len, unsigned seed)
{
    uint8_t *p = malloc(len);
    tw_test_rng rng = {seed * 2654435761u + 1};
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)(i % 7 == 0 ? tw_test_rand_u64(&rng) : i / 64); /* half compressible */
    return p;
}

static void make_tokens(uint32_t *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        t[i] = (uint32_t)(i * 7919u % 50000u);
}

static tw_state_store *open_store(const char *dir, uint64_t bytes, uint32_t entries)
{
    tw_state_store_opts o = {.dir = dir, .max_bytes = bytes, .max_entries = entries};
    tw_state_store *s;
    tw_err err;
    if (tw_state_store_open(&o, &s, &err) != TW_OK)
        fail_msg("open: %s", err.msg);
    return s;
}

/* Files in dir whose name starts with `prefix` (ends with it when suffix). */
static size_t count_files(const char *dir, const char *pat, bool suffix)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0, pl = strlen(pat);
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l >= pl && strncmp(de->d_name + (suffix ? l - pl : 0), pat, pl) == 0)
            n++;
    }
    closedir(d);
    return n;
}

static tw_status lookup(tw_state_store *s, const char *fp, const uint32_t *t, size_t n,
                        size_t *got, void **blob, size_t *len)
{
    tw_err err;
    return tw_state_store_lookup(s, fp, t, n, 64, 1, blob, len, got, &err);
}

static void test_round_trip_and_longest(void **state)
{
    (void)state;
    char *dir = tw_test_mkdtemp();
    tw_state_store *s = open_store(dir, 0, 0);
    uint32_t t[512];
    make_tokens(t, 512);
    uint8_t *a = make_state(100000, 1), *b = make_state(3000, 2);
    tw_err err;
    assert_int_equal(tw_state_store_put(s, FP_A, t, 128, a, 100000, &err), TW_OK);
    assert_int_equal(tw_state_store_put(s, FP_A, t, 320, b, 3000, &err), TW_OK);
    void *blob;
    size_t len, got;
    /* Longest stored prefix of a longer prompt. */
    assert_int_equal(lookup(s, FP_A, t, 500, &got, &blob, &len), TW_OK);
    assert_int_equal(got, 320);
    assert_int_equal(len, 3000);
    assert_memory_equal(blob, b, 3000);
    free(blob);
    assert_int_equal(lookup(s, FP_A, t, 319, &got, &blob, &len), TW_OK);
    assert_int_equal(got, 128);
    assert_memory_equal(blob, a, 100000);
    free(blob);
    /* Another model's fingerprint names other files: nothing. */
    assert_int_equal(lookup(s, FP_B, t, 500, &got, &blob, &len), TW_NOT_FOUND);
    /* A different prompt: nothing. */
    t[3] ^= 1;
    assert_int_equal(lookup(s, FP_A, t, 500, &got, &blob, &len), TW_NOT_FOUND);
    t[3] ^= 1;
    /* Asynchronous put, then flush. */
    uint8_t *c = make_state(5000, 3);
    uint8_t *c2 = malloc(5000);
    memcpy(c2, c, 5000);
    assert_int_equal(tw_state_store_put_async(s, FP_A, t, 448, c2, 5000, &err), TW_OK);
    tw_state_store_flush(s);
    assert_int_equal(lookup(s, FP_A, t, 500, &got, &blob, &len), TW_OK);
    assert_int_equal(got, 448);
    assert_memory_equal(blob, c, 5000);
    free(blob);
    tw_state_store_stats st;
    tw_state_store_get_stats(s, &st);
    assert_int_equal(st.writes, 3);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.hits, 3);
    assert_int_equal(st.lookups, 5);
    tw_state_store_close(s);
    free(a);
    free(b);
    free(c);
    tw_test_rmtree(dir);
    free(dir);
}

/* Path of the one entry file in dir. */
static void entry_path(const char *dir, const uint32_t *t, size_t n, const char *fp, char *out,
                       size_t cap)
{
    char name[69];
    tw_state_store_entry_name(fp, t, n, name);
    snprintf(out, cap, "%s/%s", dir, name);
}

static void test_corrupt_entries_removed(void **state)
{
    (void)state;
    char *dir = tw_test_mkdtemp();
    tw_state_store *s = open_store(dir, 0, 0);
    uint32_t t[256];
    make_tokens(t, 256);
    uint8_t *a = make_state(20000, 4);
    tw_err err;
    char path[4096];
    entry_path(dir, t, 128, FP_A, path, sizeof path);
    size_t flen;
    void *blob;
    size_t len, got;
    tw_test_rng rng = {99};
    /* Flip one byte anywhere (header or payload): refused and removed. */
    for (int round = 0; round < 12; round++) {
        assert_int_equal(tw_state_store_put(s, FP_A, t, 128, a, 20000, &err), TW_OK);
        char *file = tw_test_read_file(path, &flen);
        assert_non_null(file);
        size_t at = round < 4 ? (size_t)round * 37 % 144 : tw_test_rand_u64(&rng) % flen;
        file[at] ^= (char)(1 + tw_test_rand_u64(&rng) % 255);
        assert_true(tw_test_write_file(path, file, flen));
        free(file);
        assert_int_equal(lookup(s, FP_A, t, 128, &got, &blob, &len), TW_NOT_FOUND);
        assert_int_equal(access(path, F_OK), -1);
    }
    /* Truncated at any length: refused and removed. */
    for (int round = 0; round < 8; round++) {
        assert_int_equal(tw_state_store_put(s, FP_A, t, 128, a, 20000, &err), TW_OK);
        char *file = tw_test_read_file(path, &flen);
        size_t keep = round == 0 ? 0 : tw_test_rand_u64(&rng) % flen;
        assert_true(tw_test_write_file(path, file, keep));
        free(file);
        assert_int_equal(lookup(s, FP_A, t, 128, &got, &blob, &len), TW_NOT_FOUND);
        assert_int_equal(access(path, F_OK), -1);
    }
    /* Another model's entry under this model's name (a foreign file copied
     * in): refused by the fingerprint in its header and removed. */
    assert_int_equal(tw_state_store_put(s, FP_B, t, 128, a, 20000, &err), TW_OK);
    char other[4096];
    entry_path(dir, t, 128, FP_B, other, sizeof other);
    assert_int_equal(rename(other, path), 0);
    assert_int_equal(lookup(s, FP_A, t, 128, &got, &blob, &len), TW_NOT_FOUND);
    assert_int_equal(access(path, F_OK), -1);
    /* An entry under another prefix's name: the ids inside do not match. */
    assert_int_equal(tw_state_store_put(s, FP_A, t + 1, 128, a, 20000, &err), TW_OK);
    entry_path(dir, t + 1, 128, FP_A, other, sizeof other);
    assert_int_equal(rename(other, path), 0);
    assert_int_equal(lookup(s, FP_A, t, 128, &got, &blob, &len), TW_NOT_FOUND);
    assert_int_equal(access(path, F_OK), -1);
    /* A longer entry is damaged: the search falls back to a shorter one. */
    assert_int_equal(tw_state_store_put(s, FP_A, t, 64, a, 100, &err), TW_OK);
    assert_int_equal(tw_state_store_put(s, FP_A, t, 128, a, 20000, &err), TW_OK);
    char *file = tw_test_read_file(path, &flen);
    assert_true(tw_test_write_file(path, file, flen - 1));
    free(file);
    assert_int_equal(lookup(s, FP_A, t, 200, &got, &blob, &len), TW_OK);
    assert_int_equal(got, 64);
    free(blob);
    tw_state_store_stats st;
    tw_state_store_get_stats(s, &st);
    assert_int_equal(st.rejected, 12 + 8 + 2 + 1);
    tw_state_store_close(s);
    free(a);
    tw_test_rmtree(dir);
    free(dir);
}

/* A writer killed at random points leaves nothing that a reader accepts,
 * and its temp file is removed by the next open. */
static void test_killed_writer(void **state)
{
    (void)state;
    char *dir = tw_test_mkdtemp();
    uint32_t t[128];
    make_tokens(t, 128);
    size_t big = 6u << 20;
    uint8_t *a = make_state(big, 5);
    tw_test_rng rng = {1234};
    for (int round = 0; round < 6; round++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            tw_state_store_opts o = {.dir = dir};
            tw_state_store *s;
            tw_err err;
            if (tw_state_store_open(&o, &s, &err) != TW_OK)
                _exit(2);
            for (;;)
                tw_state_store_put(s, FP_A, t, 128, a, big, &err);
        }
        usleep((useconds_t)(tw_test_rand_u64(&rng) % 40000));
        kill(pid, SIGKILL);
        int wst;
        waitpid(pid, &wst, 0);
        assert_true(WIFSIGNALED(wst));
        /* Whatever is there is either absent or a whole entry. */
        tw_state_store *s = open_store(dir, 0, 0);
        void *blob;
        size_t len, got;
        tw_status st = lookup(s, FP_A, t, 128, &got, &blob, &len);
        assert_true(st == TW_OK || st == TW_NOT_FOUND);
        if (st == TW_OK) {
            assert_int_equal(len, big);
            assert_memory_equal(blob, a, big);
            free(blob);
        }
        tw_state_store_stats sst;
        tw_state_store_get_stats(s, &sst);
        assert_int_equal(sst.rejected, 0);
        assert_int_equal(count_files(dir, ".tmp-", false), 0); /* the writer is gone */
        tw_state_store_close(s);
    }
    /* A leftover temp file of a live writer is kept, a dead one's removed;
     * neither is ever read as an entry. */
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s/.tmp-%ld-0000000000000000-deadbeef", dir, (long)getpid());
    assert_true(tw_test_write_file(tmp, "partial", 7));
    snprintf(tmp, sizeof tmp, "%s/.tmp-999999999-0000000000000000-deadbeef", dir);
    assert_true(tw_test_write_file(tmp, "partial", 7));
    tw_state_store *s = open_store(dir, 0, 0);
    assert_int_equal(count_files(dir, ".tmp-", false), 1);
    tw_state_store_close(s);
    free(a);
    tw_test_rmtree(dir);
    free(dir);
}

static void test_budget(void **state)
{
    (void)state;
    char *dir = tw_test_mkdtemp();
    uint32_t t[64 * 20];
    make_tokens(t, 64 * 20);
    uint8_t *a = make_state(30000, 6);
    tw_err err;
    /* Entry count. */
    tw_state_store *s = open_store(dir, 0, 5);
    for (size_t i = 1; i <= 12; i++) {
        assert_int_equal(tw_state_store_put(s, FP_A, t, i * 64, a, 30000, &err), TW_OK);
        usleep(12000); /* distinct mtimes */
    }
    tw_state_store_stats st;
    tw_state_store_get_stats(s, &st);
    assert_int_equal(st.entries, 5);
    assert_int_equal(count_files(dir, ".tws", true), 5);
    /* The newest five survived. */
    void *blob;
    size_t len, got;
    assert_int_equal(lookup(s, FP_A, t, 64 * 20, &got, &blob, &len), TW_OK);
    assert_int_equal(got, 12 * 64);
    free(blob);
    assert_int_equal(lookup(s, FP_A, t, 7 * 64, &got, &blob, &len), TW_NOT_FOUND);
    tw_state_store_close(s);

    /* Bytes: reading an entry makes it recent, so it outlives newer ones. */
    tw_test_rmtree(dir);
    free(dir);
    dir = tw_test_mkdtemp();
    uint64_t one = 0;
    s = open_store(dir, 1 << 30, 0);
    assert_int_equal(tw_state_store_put(s, FP_A, t, 64, a, 30000, &err), TW_OK);
    tw_state_store_get_stats(s, &st);
    one = st.bytes;
    tw_state_store_close(s);
    s = open_store(dir, one * 3 + one / 2, 0);
    for (size_t i = 2; i <= 3; i++) {
        usleep(12000);
        assert_int_equal(tw_state_store_put(s, FP_A, t, i * 64, a, 30000, &err), TW_OK);
    }
    usleep(12000);
    assert_int_equal(lookup(s, FP_A, t, 64, &got, &blob, &len), TW_OK); /* touch the oldest */
    free(blob);
    for (size_t i = 4; i <= 5; i++) {
        usleep(12000);
        assert_int_equal(tw_state_store_put(s, FP_A, t, i * 64, a, 30000, &err), TW_OK);
    }
    tw_state_store_get_stats(s, &st);
    assert_true(st.bytes <= one * 3 + one / 2);
    assert_int_equal(st.entries, 3);
    assert_int_equal(lookup(s, FP_A, t, 64, &got, &blob, &len), TW_OK);
    free(blob);
    assert_int_equal(lookup(s, FP_A, t, 2 * 64, &got, &blob, &len), TW_OK);
    assert_int_equal(got, 64); /* 128 was evicted, 64 was not */
    free(blob);
    tw_state_store_close(s);
    free(a);
    tw_test_rmtree(dir);
    free(dir);
}

static void test_default_dir(void **state)
{
    (void)state;
    char buf[4096];
    tw_err err;
    char *old_xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    assert_int_equal(tw_state_store_default_dir(buf, sizeof buf, &err), TW_OK);
    assert_string_equal(buf, "/x/cache/tokenwire/state");
    setenv("XDG_CACHE_HOME", "relative", 1);
    assert_int_equal(tw_state_store_default_dir(buf, sizeof buf, &err), TW_OK);
    assert_non_null(strstr(buf, "/.cache/tokenwire/state"));
    assert_int_equal(tw_state_store_default_dir(buf, 5, &err), TW_RESOURCE_EXHAUSTED);
    if (old_xdg)
        setenv("XDG_CACHE_HOME", old_xdg, 1);
    else
        unsetenv("XDG_CACHE_HOME");
    free(old_xdg);
    /* A path that cannot be a directory. */
    char *dir = tw_test_mkdtemp();
    char file[4096];
    snprintf(file, sizeof file, "%s/f", dir);
    assert_true(tw_test_write_file(file, "x", 1));
    tw_state_store_opts o = {.dir = file};
    tw_state_store *s = NULL;
    assert_int_not_equal(tw_state_store_open(&o, &s, &err), TW_OK);
    assert_null(s);
    tw_test_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_and_longest),
        cmocka_unit_test(test_corrupt_entries_removed),
        cmocka_unit_test(test_killed_writer),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_default_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
