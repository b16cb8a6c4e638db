/* A grammar of raw text choices: the answer is exactly one of the given
 * strings (or, where one is a prefix of another, may go on to the longer),
 * with nothing around it. Classification prompts ask for this. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "json_compiler.h"

tw_status tw_json_grammar_choice(const char *const *choices, size_t n, tw_json_grammar **out,
                                 tw_err *err)
{
    *out = NULL;
    if (n == 0 || n > TW_JSON_MAX_ENUM)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "choices: %zu given, 1 to %d allowed", n,
                         TW_JSON_MAX_ENUM);
    for (size_t i = 0; i < n; i++) {
        size_t len = choices[i] ? strlen(choices[i]) : 0;
        if (len == 0 || len > TW_JSON_MAX_LITERAL)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "choices: choice %zu is empty or longer than %d bytes", i,
                             TW_JSON_MAX_LITERAL);
        json_t *probe = json_string(choices[i]);
        if (!probe)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "choices: choice %zu is not UTF-8", i);
        json_decref(probe);
    }
    tw_json_grammar *g = calloc(1, sizeof *g);
    if (!g)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "choices: out of memory");
    compiler c = {.g = g, .any = JN_NONE, .err = err, .st = TW_OK};
    const uint32_t first = g->n_lits;
    for (size_t i = 0; i < n && c.st == TW_OK; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(choices[i], choices[j]) == 0;
        if (seen)
            continue;
        char *text = strdup(choices[i]);
        if (!text)
            jc_fail(&c, TW_RESOURCE_EXHAUSTED, "choices: out of memory%s (at %s)", NULL);
        else
            jc_add_text(&c, text, strlen(text));
    }
    uint32_t root = c.st == TW_OK ? jc_new_node(&c, JN_ENUM) : JN_NONE;
    if (root != JN_NONE) {
        g->nodes[root].first = first;
        g->nodes[root].n = g->n_lits - first;
        g->root = root;
        g->raw = true;
        g->key_string = jc_new_node(&c, JN_STRING);
    }
    if (c.st != TW_OK) {
        tw_json_grammar_free(g);
        return c.st;
    }
    *out = g;
    return TW_OK;
}
