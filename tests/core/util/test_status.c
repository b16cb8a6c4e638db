#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "tw/status.h"

static tw_status fail_with_count(tw_err *err, int n)
{
    return tw_errorf(err, TW_OUT_OF_RANGE, "count %d exceeds limit", n);
}

static void test_errorf_formats_and_returns_code(void **state)
{
    (void)state;
    tw_err err = {{0}};
    assert_int_equal(fail_with_count(&err, 7), TW_OUT_OF_RANGE);
    assert_string_equal(err.msg, "count 7 exceeds limit");
    /* A NULL message buffer is allowed: only the code matters then. */
    assert_int_equal(fail_with_count(NULL, 7), TW_OUT_OF_RANGE);
}

static void test_wrap_prefixes_context(void **state)
{
    (void)state;
    tw_err err = {{0}};
    fail_with_count(&err, 3);
    assert_int_equal(tw_error_wrap(&err, TW_INVALID_ARGUMENT, "reading %s", "x.gguf"),
                     TW_INVALID_ARGUMENT);
    assert_string_equal(err.msg, "reading x.gguf: count 3 exceeds limit");
}

static void test_long_messages_are_cut_not_overflowed(void **state)
{
    (void)state;
    tw_err err;
    char big[2 * TW_ERR_MSG_MAX];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    tw_errorf(&err, TW_INTERNAL, "%s", big);
    assert_int_equal(strlen(err.msg), TW_ERR_MSG_MAX - 1);
    tw_error_wrap(&err, TW_INTERNAL, "ctx");
    assert_int_equal(strlen(err.msg), TW_ERR_MSG_MAX - 1);
    assert_memory_equal(err.msg, "ctx: ", 5);
}

static void test_status_names(void **state)
{
    (void)state;
    assert_string_equal(tw_status_name(TW_OK), "OK");
    assert_string_equal(tw_status_name(TW_UNAUTHENTICATED), "UNAUTHENTICATED");
    assert_string_equal(tw_status_name((tw_status)99), "UNKNOWN");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errorf_formats_and_returns_code),
        cmocka_unit_test(test_wrap_prefixes_context),
        cmocka_unit_test(test_long_messages_are_cut_not_overflowed),
        cmocka_unit_test(test_status_names),
    };
    return cmocka_run_group_tests_name("core/util/status", tests, NULL, NULL);
}
