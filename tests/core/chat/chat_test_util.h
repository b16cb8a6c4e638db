/* Helpers shared by the chat-template tests. */
#ifndef TW_TEST_CHAT_UTIL_H
#define TW_TEST_CHAT_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tw/chat_template.h"

/* Prints the first byte where got differs from want, with escaped context,
 * so a failing case reads like a diff. */
static inline void chat_print_mismatch(const char *name, const char *want, size_t wlen,
                                       const char *got, size_t glen)
{
    size_t i = 0;
    while (i < wlen && i < glen && want[i] == got[i])
        i++;
    size_t from = i > 40 ? i - 40 : 0;
    printf("%s: first difference at byte %zu (want %zu bytes, got %zu)\n", name, i, wlen, glen);
    const char *labels[2] = {"want", "got "};
    const char *texts[2] = {want, got};
    size_t lens[2] = {wlen, glen};
    for (int k = 0; k < 2; k++) {
        printf("  %s: \"", labels[k]);
        for (size_t j = from; j < lens[k] && j < i + 40; j++) {
            unsigned char c = (unsigned char)texts[k][j];
            if (j == i)
                printf("[>>]");
            if (c == '\n')
                printf("\\n");
            else if (c == '"' || c == '\\')
                printf("\\%c", c);
            else if (c < 0x20)
                printf("\\x%02x", c);
            else
                putchar(c);
        }
        printf("\"\n");
    }
}

/* Compiles src and renders it with vars given as JSON text. Returns the
 * status; *out (malloc'd) on success. */
static inline tw_status chat_render_text(const char *src, const char *vars_json,
                                         const tw_chat_render_opts *opts, char **out,
                                         tw_err *err)
{
    *out = NULL;
    tw_chat_template *t = NULL;
    tw_status st = tw_chat_template_compile(src, strlen(src), &t, err);
    if (st != TW_OK)
        return st;
    json_error_t jerr;
    json_t *vars = json_loads(vars_json ? vars_json : "{}", 0, &jerr);
    if (!vars) {
        tw_chat_template_free(t);
        return tw_errorf(err, TW_INTERNAL, "bad test JSON: %s", jerr.text);
    }
    size_t len;
    st = tw_chat_template_render_ex(t, vars, opts, out, &len, err);
    json_decref(vars);
    tw_chat_template_free(t);
    return st;
}

#endif
