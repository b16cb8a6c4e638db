/* Reading the reference test cases: NAME.inp holds strings separated by
 * lines "__ggml_vocab_test__", NAME.out one line of ids per string. The
 * last string may end with a separator (llama.cpp's files) or not (the
 * files tools/golden writes by joining the strings). */
#ifndef TW_TEST_TOK_CASES_H
#define TW_TEST_TOK_CASES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

typedef struct tok_case {
    const char *text;
    size_t len;
    uint32_t *ids;
    size_t n_ids;
} tok_case;

typedef struct tok_cases {
    char *inp, *outp;
    tok_case *v;
    size_t n;
} tok_cases;

static void tok_cases_free(tok_cases *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->v[i].ids);
    free(c->v);
    free(c->inp);
    free(c->outp);
    memset(c, 0, sizeof *c);
}

/* Returns false when the files cannot be read or do not pair up. */
static bool tok_cases_load(tok_cases *c, const char *inp_path, const char *out_path)
{
    static const char sep[] = "\n__ggml_vocab_test__\n";
    memset(c, 0, sizeof *c);
    size_t ilen, olen;
    c->inp = tw_test_read_file(inp_path, &ilen);
    c->outp = tw_test_read_file(out_path, &olen);
    if (!c->inp || !c->outp)
        return false;
    size_t cap = 16;
    c->v = calloc(cap, sizeof *c->v);
    char *p = c->inp, *end = c->inp + ilen;
    char *line = c->outp;
    while (p < end) {
        /* Not strstr: a string may hold NUL bytes. */
        char *s = p;
        while (s + sizeof sep - 1 <= end && memcmp(s, sep, sizeof sep - 1) != 0)
            s++;
        if (s + sizeof sep - 1 > end)
            s = end; /* the last string, with no separator after it */
        if (c->n == cap) {
            cap *= 2;
            c->v = realloc(c->v, cap * sizeof *c->v);
        }
        tok_case *tc = &c->v[c->n++];
        memset(tc, 0, sizeof *tc);
        tc->text = p;
        tc->len = (size_t)(s - p);
        *s = '\0';
        p = s == end ? end : s + sizeof sep - 1;
        /* the matching line of ids */
        char *nl = strchr(line, '\n');
        if (!nl)
            return false;
        *nl = '\0';
        size_t icap = 8;
        tc->ids = malloc(icap * sizeof *tc->ids);
        char *q = line;
        for (;;) {
            while (*q == ' ')
                q++;
            if (!*q)
                break;
            char *e;
            unsigned long v = strtoul(q, &e, 10);
            if (e == q)
                return false;
            if (tc->n_ids == icap) {
                icap *= 2;
                tc->ids = realloc(tc->ids, icap * sizeof *tc->ids);
            }
            tc->ids[tc->n_ids++] = (uint32_t)v;
            q = e;
        }
        line = nl + 1;
    }
    return c->n > 0;
}

static void tok_print_ids(const char *label, const uint32_t *ids, size_t n)
{
    printf("  %s (%zu):", label, n);
    for (size_t i = 0; i < n; i++)
        printf(" %u", ids[i]);
    printf("\n");
}

#endif
