/* Every conversation of the reference data renders byte-exact what Hugging
 * Face's apply_chat_template rendered, or is refused with the template's own
 * message when the template refused it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "chat_test_util.h"
#include "test_support.h"

static const char *const models[] = {
    "Qwen-Qwen2.5-7B-Instruct",
    "Qwen-Qwen3-0.6B",
    "meta-llama-Llama-3.1-8B-Instruct",
    "google-gemma-2-2b-it",
    "mistralai-Mistral-Nemo-Instruct-2407",
};

static const tw_chat_family families[] = {
    TW_CHAT_FAMILY_QWEN25, TW_CHAT_FAMILY_QWEN3, TW_CHAT_FAMILY_LLAMA3,
    TW_CHAT_FAMILY_GEMMA,  TW_CHAT_FAMILY_MISTRAL,
};

/* Runs all cases of one model; returns the number of failures. */
static int run_model(const char *model, tw_chat_family family, int *ncases)
{
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "chat/%s.jinja", model);
    tw_test_shared_path(path, sizeof path, rel);
    size_t srclen;
    char *src = tw_test_read_file(path, &srclen);
    if (!src) {
        printf("%s: cannot read %s\n", model, path);
        return 1;
    }
    snprintf(rel, sizeof rel, "chat/%s.cases.json", model);
    tw_test_shared_path(path, sizeof path, rel);
    json_error_t jerr;
    json_t *doc = json_load_file(path, 0, &jerr);
    if (!doc) {
        printf("%s: cannot parse %s: %s\n", model, path, jerr.text);
        free(src);
        return 1;
    }
    int failures = 0;
    if (tw_chat_template_family(src, srclen) != family) {
        printf("%s: family %s, want %s\n", model,
               tw_chat_family_name(tw_chat_template_family(src, srclen)),
               tw_chat_family_name(family));
        failures++;
    }
    tw_err err = {{0}};
    tw_chat_template *t = NULL;
    if (tw_chat_template_compile(src, srclen, &t, &err) != TW_OK) {
        printf("%s: compile failed: %s\n", model, err.msg);
        json_decref(doc);
        free(src);
        return failures + 1;
    }
    json_t *cases = json_object_get(doc, "cases");
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        json_t *vars = json_object_get(c, "vars");
        json_t *want = json_object_get(c, "expected");
        json_t *want_err = json_object_get(c, "error");
        char label[256];
        snprintf(label, sizeof label, "%s/%s", model, name ? name : "?");
        char *out = NULL;
        size_t len = 0;
        tw_status st = tw_chat_template_render(t, vars, &out, &len, &err);
        (*ncases)++;
        if (json_is_string(want_err)) {
            const char *msg = json_string_value(want_err);
            const char *prefix = "TemplateError: ";
            if (strncmp(msg, prefix, strlen(prefix)) == 0)
                msg += strlen(prefix);
            if (st == TW_OK) {
                printf("%s: rendered, want error \"%s\"\n", label, msg);
                failures++;
            } else if (st != TW_INVALID_ARGUMENT || strcmp(err.msg, msg) != 0) {
                printf("%s: error %s \"%s\", want INVALID_ARGUMENT \"%s\"\n", label,
                       tw_status_name(st), err.msg, msg);
                failures++;
            }
        } else if (st != TW_OK) {
            printf("%s: failed: %s\n", label, err.msg);
            failures++;
        } else {
            const char *w = json_string_value(want);
            size_t wlen = json_string_length(want);
            if (!w || wlen != len || memcmp(w, out, len) != 0) {
                chat_print_mismatch(label, w ? w : "", w ? wlen : 0, out, len);
                failures++;
            }
        }
        free(out);
    }
    tw_chat_template_free(t);
    json_decref(doc);
    free(src);
    return failures;
}

static void test_reference_cases(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    (void)shared;
    int failures = 0, ncases = 0;
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++)
        failures += run_model(models[m], families[m], &ncases);
    printf("chat reference cases: %d run, %d failed\n", ncases, failures);
    assert_true(ncases >= 30);
    assert_int_equal(failures, 0);
}

/* Renders from many threads at once: a compiled template is read-only. */
#include <pthread.h>

typedef struct thread_arg {
    const tw_chat_template *t;
    const json_t *vars;
    const char *want;
    int bad;
} thread_arg;

static void *render_many(void *p)
{
    thread_arg *a = p;
    for (int i = 0; i < 50; i++) {
        char *out = NULL;
        size_t len;
        tw_err err;
        if (tw_chat_template_render(a->t, a->vars, &out, &len, &err) != TW_OK ||
            strcmp(out, a->want) != 0)
            a->bad++;
        free(out);
    }
    return NULL;
}

static void test_concurrent_renders(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    (void)shared;
    char path[1024];
    tw_test_shared_path(path, sizeof path, "chat/Qwen-Qwen3-0.6B.jinja");
    size_t len;
    char *src = tw_test_read_file(path, &len);
    assert_non_null(src);
    tw_chat_template *t = NULL;
    tw_err err;
    assert_int_equal(tw_chat_template_compile(src, len, &t, &err), TW_OK);
    json_t *vars = json_pack("{s:[{s:s,s:s},{s:s,s:s},{s:s,s:s}],s:b}", "messages", "role",
                             "user", "content", "hi", "role", "assistant", "content",
                             "<think>x</think>yo", "role", "user", "content", "again",
                             "add_generation_prompt", 1);
    const char *want = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n"
                       "<|im_start|>user\nagain<|im_end|>\n<|im_start|>assistant\n";
    thread_arg args[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (thread_arg){.t = t, .vars = vars, .want = want};
        assert_int_equal(pthread_create(&th[i], NULL, render_many, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(args[i].bad, 0);
    }
    json_decref(vars);
    tw_chat_template_free(t);
    free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_cases),
        cmocka_unit_test(test_concurrent_renders),
    };
    return cmocka_run_group_tests_name("core/chat/cases", tests, NULL, NULL);
}
