/* Fetch ahead: a pool thread fetches the spans of its plan while it waits,
 * each byte once however many runs pass, starting over only for a new
 * plan, and never past TW_FETCH_SPANS spans; tw_matmul_fetch_next gives
 * the threads, between them, every row of narrow matrices, at most the set
 * bytes each, and nothing when switched off; and products read with plans
 * in place keep the one-thread bits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/pool_internal.h"
#include "test_support.h"
#include "tw/kernels.h"
#include "tw/tensor.h"

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* A run in which one side lingers: the workers (slow 1) or the caller
 * (slow 0), so that the other side waits, and fetches, meanwhile. */
static void linger_task(void *ctx, int task, int n_tasks, int thread)
{
    (void)task;
    (void)n_tasks;
    const int *slow = ctx;
    if ((thread != 0) == (*slow != 0))
        sleep_us(300);
}

static size_t fetched_total(const tw_pool *pool, int threads)
{
    size_t sum = 0;
    for (int t = 0; t < threads; t++)
        sum += tw_pool_fetched(pool, t);
    return sum;
}

/* Runs lingering runs until every thread's fetched count reaches want[t]
 * (false after 10 s: a plan was not fetched whole). */
static bool fetch_until(tw_pool *pool, int threads, const size_t *want)
{
    for (int r = 0; r < 20000; r++) {
        bool done = true;
        for (int t = 0; t < threads; t++)
            done = done && tw_pool_fetched(pool, t) >= want[t];
        if (done)
            return true;
        int slow = r % 2;
        tw_pool_run_threads(pool, linger_task, &slow, threads * 2);
    }
    return false;
}

static void test_plan_fetched_once(void **state)
{
    (void)state;
    static const int sizes[] = {2, 3};
    uint8_t *buf = malloc(256 << 10);
    assert_non_null(buf);
    memset(buf, 1, 256 << 10);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int threads = sizes[s];
        tw_pool *pool = NULL;
        assert_int_equal(tw_pool_create(threads, &pool, NULL), TW_OK);
        size_t want[3], plan1[3];
        /* spans of odd lengths at odd offsets, different for each thread */
        for (int t = 0; t < threads; t++) {
            const tw_fetch_span spans[2] = {{buf + 100 + 7 * (size_t)t, 40000 + (size_t)t},
                                            {buf + 70001, 23457 + 1000 * (size_t)t}};
            plan1[t] = spans[0].bytes + spans[1].bytes;
            want[t] = plan1[t];
            tw_pool_fetch_plan(pool, t, spans, 2);
        }
        if (!fetch_until(pool, threads, want))
            fail_msg("%d threads: the plans were not fetched", threads);
        for (int t = 0; t < threads; t++)
            assert_int_equal(tw_pool_fetched(pool, t), want[t]);
        /* runs without a new plan fetch nothing more */
        for (int r = 0; r < 50; r++) {
            int slow = r % 2;
            tw_pool_run_threads(pool, linger_task, &slow, threads * 2);
        }
        for (int t = 0; t < threads; t++)
            assert_int_equal(tw_pool_fetched(pool, t), want[t]);
        /* a new plan starts over; more spans than a plan holds are cut */
        tw_fetch_span many[TW_FETCH_SPANS + 3];
        for (int i = 0; i < TW_FETCH_SPANS + 3; i++)
            many[i] = (tw_fetch_span){buf + 4096 * (size_t)i, 1000};
        for (int t = 0; t < threads; t++) {
            tw_pool_fetch_plan(pool, t, many, TW_FETCH_SPANS + 3);
            want[t] += 1000 * TW_FETCH_SPANS;
        }
        if (!fetch_until(pool, threads, want))
            fail_msg("%d threads: the second plans were not fetched", threads);
        for (int r = 0; r < 50; r++) {
            int slow = r % 2;
            tw_pool_run_threads(pool, linger_task, &slow, threads * 2);
        }
        for (int t = 0; t < threads; t++)
            assert_int_equal(tw_pool_fetched(pool, t), want[t]);
        /* empty plans, and calls that name no thread of the pool */
        for (int t = 0; t < threads; t++)
            tw_pool_fetch_plan(pool, t, NULL, 0);
        tw_pool_fetch_plan(pool, -1, many, 1);
        tw_pool_fetch_plan(pool, threads, many, 1);
        tw_pool_fetch_plan(pool, 0, many, -1);
        tw_pool_fetch_plan(NULL, 0, many, 1);
        for (int r = 0; r < 50; r++) {
            int slow = r % 2;
            tw_pool_run_threads(pool, linger_task, &slow, threads * 2);
        }
        for (int t = 0; t < threads; t++)
            assert_int_equal(tw_pool_fetched(pool, t), want[t]);
        assert_int_equal(tw_pool_fetched(pool, threads), 0);
        assert_int_equal(tw_pool_fetched(NULL, 0), 0);
        tw_pool_destroy(pool);
    }
    free(buf);
}

typedef tw_test_mat mat;

static tw_matmul_part part_of(const mat *m, float *y)
{
    return (tw_matmul_part){
        .type = m->type, .w = m->w, .row_bytes = m->row_bytes, .rows = m->rows, .y = y};
}

/* The plans tw_matmul_fetch_next makes, as fetched over the runs after. */
static void test_matmul_plans(void **state)
{
    (void)state;
    tw_test_rng rng = {0x6a09e667f3bcc908ull};
    const int threads = 2;
    tw_pool *pool = NULL;
    assert_int_equal(tw_pool_create(threads, &pool, NULL), TW_OK);
    /* narrow (a Q/K/V projection's shape): every row read by someone */
    mat q, k, v;
    tw_test_mat_make(&q, TW_TYPE_Q4_0, 200, 256, &rng);
    tw_test_mat_make(&k, TW_TYPE_Q4_0, 40, 256, &rng);
    tw_test_mat_make(&v, TW_TYPE_Q8_0, 40, 256, &rng);
    const tw_matmul_part qkv[3] = {part_of(&q, NULL), part_of(&k, NULL), part_of(&v, NULL)};
    const size_t all = q.rows * q.row_bytes + k.rows * k.row_bytes + v.rows * v.row_bytes;
    const size_t was = tw_kernels_fetch_ahead();

    tw_kernels_set_fetch_ahead(1 << 20);
    size_t base = fetched_total(pool, threads), want[2];
    tw_matmul_fetch_next(pool, qkv, 3, 256, false);
    /* which thread reads what is the split's business; the sum is not */
    want[0] = want[1] = 0;
    for (int r = 0; r < 20000 && fetched_total(pool, threads) - base < all; r++) {
        int slow = r % 2;
        tw_pool_run_threads(pool, linger_task, &slow, threads * 2);
    }
    assert_int_equal(fetched_total(pool, threads) - base, all);

    /* a wide pair with a small budget: each thread fetches exactly it */
    mat gate, up;
    tw_test_mat_make(&gate, TW_TYPE_Q8_0, 1024, 1024, &rng);
    tw_test_mat_make(&up, TW_TYPE_Q8_0, 1024, 1024, &rng);
    const tw_matmul_part pair[2] = {part_of(&gate, NULL), part_of(&up, NULL)};
    tw_kernels_set_fetch_ahead(20000);
    assert_int_equal(tw_kernels_fetch_ahead(), 20000);
    for (int t = 0; t < threads; t++)
        want[t] = tw_pool_fetched(pool, t) + 20000;
    tw_matmul_fetch_next(pool, pair, 2, 1024, true);
    assert_true(fetch_until(pool, threads, want));
    for (int r = 0; r < 50; r++) {
        int slow = r % 2;
        tw_pool_run_threads(pool, linger_task, &slow, threads * 2);
    }
    for (int t = 0; t < threads; t++)
        assert_int_equal(tw_pool_fetched(pool, t), want[t]);

    /* switched off: the plans are emptied, nothing more is fetched */
    tw_kernels_set_fetch_ahead(0);
    assert_int_equal(tw_kernels_fetch_ahead(), 0);
    tw_matmul_fetch_next(pool, pair, 2, 1024, true);
    for (int r = 0; r < 50; r++) {
        int slow = r % 2;
        tw_pool_run_threads(pool, linger_task, &slow, threads * 2);
    }
    for (int t = 0; t < threads; t++)
        assert_int_equal(tw_pool_fetched(pool, t), want[t]);
    /* more than the most is taken as the most */
    tw_kernels_set_fetch_ahead((size_t)1 << 40);
    assert_int_equal(tw_kernels_fetch_ahead(), TW_FETCH_AHEAD_MAX);
    /* hints that cannot be planned are ignored */
    tw_matmul_fetch_next(NULL, pair, 2, 1024, true);
    tw_matmul_fetch_next(pool, NULL, 2, 1024, true);
    tw_matmul_fetch_next(pool, pair, 0, 1024, false);
    tw_matmul_fetch_next(pool, pair, 1, 1024, true);
    tw_matmul_fetch_next(pool, qkv, 3, 100, false); /* columns not the matrices' */
    const tw_matmul_part uneven[2] = {part_of(&q, NULL), part_of(&k, NULL)};
    tw_matmul_fetch_next(pool, uneven, 2, 256, true);

    /* products read right after their own plans keep the one-thread bits */
    tw_kernels_set_fetch_ahead(1 << 20);
    float *want_y = malloc(1024 * sizeof(float)), *got_y = malloc(1024 * sizeof(float));
    float *x = malloc(1024 * sizeof(float));
    assert_non_null(want_y);
    assert_non_null(got_y);
    assert_non_null(x);
    for (size_t i = 0; i < 1024; i++)
        x[i] = tw_test_rand_f32(&rng);
    tw_matvec(NULL, gate.type, gate.w, gate.row_bytes, gate.rows, gate.cols, x, want_y);
    for (int r = 0; r < 20; r++) {
        tw_matmul_fetch_next(pool, r % 2 ? pair : qkv, r % 2 ? 2 : 3, r % 2 ? 1024 : 256,
                             r % 2 == 1);
        memset(got_y, 0xff, 1024 * sizeof(float));
        tw_matvec(pool, gate.type, gate.w, gate.row_bytes, gate.rows, gate.cols, x, got_y);
        assert_memory_equal(got_y, want_y, 1024 * sizeof(float));
    }
    tw_kernels_set_fetch_ahead(was);
    free(want_y);
    free(got_y);
    free(x);
    free(q.w);
    free(k.w);
    free(v.w);
    free(gate.w);
    free(up.w);
    tw_pool_destroy(pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_fetched_once),
        cmocka_unit_test(test_matmul_plans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
