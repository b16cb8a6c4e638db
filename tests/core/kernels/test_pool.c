/* Thread pool: every task runs exactly once per run, across many short runs,
 * with more tasks than threads, inline for a NULL pool, and clean teardown. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "test_support.h"
#include "tw/pool.h"

#define MAX_TASKS 257

typedef struct counts {
    _Atomic int hits[MAX_TASKS];
    _Atomic int bad_n;
    int expected_n;
} counts;

static void count_task(void *ctx, int task, int n_tasks)
{
    counts *c = ctx;
    if (n_tasks != c->expected_n || task < 0 || task >= n_tasks)
        atomic_fetch_add(&c->bad_n, 1);
    else
        atomic_fetch_add(&c->hits[task], 1);
}

static void run_and_check(tw_pool *pool, int n_tasks, int rounds)
{
    static counts c;
    memset(&c, 0, sizeof c);
    c.expected_n = n_tasks;
    for (int r = 0; r < rounds; r++)
        tw_pool_run(pool, count_task, &c, n_tasks);
    assert_int_equal(atomic_load(&c.bad_n), 0);
    for (int t = 0; t < n_tasks; t++)
        assert_int_equal(atomic_load(&c.hits[t]), rounds);
}

static void test_many_small_runs(void **state)
{
    (void)state;
    tw_pool *pool = NULL;
    assert_int_equal(tw_pool_create(2, &pool, NULL), TW_OK);
    assert_int_equal(tw_pool_threads(pool), 2);
    run_and_check(pool, 2, 20000);
    tw_pool_destroy(pool);
}

static void test_tasks_exceed_threads(void **state)
{
    (void)state;
    tw_pool *pool = NULL;
    assert_int_equal(tw_pool_create(3, &pool, NULL), TW_OK);
    run_and_check(pool, 1, 100);
    run_and_check(pool, 7, 500);
    run_and_check(pool, MAX_TASKS, 50);
    tw_pool_destroy(pool);
}

static void test_null_and_single_thread_pools(void **state)
{
    (void)state;
    assert_int_equal(tw_pool_threads(NULL), 1);
    run_and_check(NULL, 5, 10);
    tw_pool *pool = NULL;
    assert_int_equal(tw_pool_create(1, &pool, NULL), TW_OK);
    run_and_check(pool, 9, 10);
    tw_pool_destroy(pool);
    tw_pool_destroy(NULL);
    /* nothing runs for an empty run */
    run_and_check(NULL, 0, 3);
}

static void test_bad_thread_counts(void **state)
{
    (void)state;
    tw_pool *pool = (tw_pool *)&pool;
    tw_err err;
    assert_int_equal(tw_pool_create(0, &pool, &err), TW_INVALID_ARGUMENT);
    assert_null(pool);
    assert_int_equal(tw_pool_create(100000, &pool, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "100000"));
    assert_int_equal(tw_pool_create(2, NULL, &err), TW_INVALID_ARGUMENT);
}

/* Workers that went to sleep between runs wake up for the next one. */
static void test_runs_after_idle(void **state)
{
    (void)state;
    tw_pool *pool = NULL;
    assert_int_equal(tw_pool_create(4, &pool, NULL), TW_OK);
    for (int i = 0; i < 3; i++) {
        run_and_check(pool, 8, 3);
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    tw_pool_destroy(pool);
}

static void test_create_destroy_cycles(void **state)
{
    (void)state;
    for (int i = 0; i < 50; i++) {
        tw_pool *pool = NULL;
        assert_int_equal(tw_pool_create(1 + i % 4, &pool, NULL), TW_OK);
        if (i % 2)
            run_and_check(pool, 4, 2);
        tw_pool_destroy(pool);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_small_runs),
        cmocka_unit_test(test_tasks_exceed_threads),
        cmocka_unit_test(test_null_and_single_thread_pools),
        cmocka_unit_test(test_bad_thread_counts),
        cmocka_unit_test(test_runs_after_idle),
        cmocka_unit_test(test_create_destroy_cycles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
