/* "pattern" on strings: the schema's regular expression through PCRE2,
 * asked after each whole character of the string so far
 * whether the string can still come to match (a partial match) and, at its
 * closing quote, whether it does. JSON Schema's patterns are not anchored:
 * a string matches when some part of it does, so a pattern that is not
 * anchored at its start can always be matched later and only its end is
 * checked. Neither PCRE2's JIT code nor its DFA matcher (where there is no
 * JIT) keeps state between calls or needs the heap for the patterns taken
 * here, so the matcher's states stay plain data. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <ctype.h>
#include <pcre2.h>
#include <stdio.h>
#include <string.h>

#include "json_compiler.h"

/* The DFA matcher's workspace, in ints: room for the parallel states of a
 * pattern of TW_JSON_MAX_PATTERN bytes. */
#define DFA_WORKSPACE 1024
/* Backtracking steps one JIT match may take (PCRE2's own default is ten
 * million): a pattern that needs more on a string of TW_JSON_PATTERN_BYTES
 * is one that backtracks without end. */
#define MATCH_LIMIT 100000

/* Escapes that can match a character outside ASCII: negated classes,
 * horizontal and vertical space (no-break space, line separators),
 * properties, code points, octal and back-reference numbers. */
static bool wide_escape(char e)
{
    return e && strchr("DWSHVhvRXNCpPxuo0123456789", e) != NULL;
}

/* Whether pattern text p can match a character outside ASCII: a dot
 * outside a class, a negated class (or POSIX class), a wide escape, a
 * byte past 0x7F, or caseless matching (which folds k to the Kelvin sign). False means every
 * character it matches is ASCII, which lets the matcher refuse a UTF-8
 * lead byte at once instead of when its character is whole. */
static bool may_match_non_ascii(const char *p, size_t n)
{
    bool in_class = false;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)p[i];
        if (c >= 0x80)
            return true;
        if (c == '\\' && i + 1 < n) {
            if (wide_escape(p[++i]))
                return true;
        } else if (in_class) {
            /* a negated POSIX class, [:^alpha:] */
            if (c == '[' && i + 2 < n && p[i + 1] == ':' && p[i + 2] == '^')
                return true;
            in_class = c != ']';
        } else if (c == '[') {
            if (i + 1 < n && p[i + 1] == '^')
                return true;
            in_class = true;
            if (i + 1 < n && p[i + 1] == ']') /* a ] first is one of the class */
                i++;
        } else if (c == '.') {
            return true;
        } else if (c == '(' && i + 1 < n && p[i + 1] == '?') {
            /* the option letters of (?i), (?si:, (?-i) ... */
            for (size_t k = i + 2; k < n && (isalpha((unsigned char)p[k]) || p[k] == '-'); k++)
                if (p[k] == 'i')
                    return true;
        }
    }
    return false;
}

uint32_t jc_pattern(compiler *c, const json_t *s)
{
    const json_t *v = json_object_get(s, "pattern");
    if (!v)
        return JN_NONE;
    const char *src = json_string_value(v);
    if (!src)
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: \"pattern\" must be a string%s (at %s)", NULL);
    const size_t len = json_string_length(v);
    if (len > TW_JSON_MAX_PATTERN) {
        char what[64];
        snprintf(what, sizeof what, " of %zu bytes (at most %d)", len, TW_JSON_MAX_PATTERN);
        return jc_fail(c, TW_INVALID_ARGUMENT, "json_schema: a \"pattern\"%s (at %s)", what);
    }
    return jc_pattern_source(c, src, len);
}

uint32_t jc_pattern_source(compiler *c, const char *src, size_t len)
{
    tw_json_grammar *g = c->g;
    if (!jc_grow((void **)&g->patterns, &g->cap_patterns, g->n_patterns + 1, sizeof *g->patterns))
        return jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)", NULL);
    int code;
    PCRE2_SIZE at;
    /* ECMA-262's $ is the end of the text only; \C would split a character */
    pcre2_code *re =
        pcre2_compile((PCRE2_SPTR)src, len,
                      PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_NEVER_BACKSLASH_C, &code, &at, NULL);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof msg);
        char what[200];
        snprintf(what, sizeof what, ": %s at offset %zu", (const char *)msg, (size_t)at);
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: \"pattern\" does not compile%s (at %s)", what);
    }
    uint32_t backrefs = 0, options = 0;
    pcre2_pattern_info(re, PCRE2_INFO_BACKREFMAX, &backrefs);
    pcre2_pattern_info(re, PCRE2_INFO_ALLOPTIONS, &options);
    if (backrefs) {
        pcre2_code_free(re);
        return jc_fail(
            c, TW_INVALID_ARGUMENT,
            "json_schema: a \"pattern\" with a back reference%s is not supported (at %s)", NULL);
    }
    jpattern *p = &g->patterns[g->n_patterns];
    p->code = re;
    /* JIT code for both questions where the platform has it: a match and a
     * partial match of a short string then take tens of nanoseconds
     * instead of the DFA matcher's hundreds */
    p->jit = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD) == 0;
    p->anchored = (options & PCRE2_ANCHORED) != 0;
    p->ascii = !may_match_non_ascii(src, len);
    return g->n_patterns++;
}

bool jc_pattern_admits_literals(compiler *c, const json_t *s)
{
    const uint32_t i = jc_pattern(c, s);
    if (i == JN_NONE)
        return c->st == TW_OK;
    const json_t *one = json_object_get(s, "const"), *all = json_object_get(s, "enum");
    const size_t n = all && json_is_array(all) ? json_array_size(all) : 0;
    bool ok = true;
    for (size_t k = 0; ok && k < n + (one != NULL); k++) {
        const json_t *v = k < n ? json_array_get(all, k) : one;
        ok = !json_is_string(v) ||
             json_pattern_test(&c->g->patterns[i], (const unsigned char *)json_string_value(v),
                               json_string_length(v), true) == JP_MATCH;
        if (!ok)
            jc_fail(c, TW_INVALID_ARGUMENT,
                    "json_schema: %.64s, an enum or const value, does not match its \"pattern\" "
                    "(at %s)",
                    json_string_value(v));
    }
    /* the literals are written as they are: no string node reads the
     * pattern, so it is not kept (the last one compiled) */
    pcre2_code_free((pcre2_code *)c->g->patterns[i].code);
    c->g->n_patterns--;
    return ok;
}

bool tw_json_grammar_has_patterns(const tw_json_grammar *g)
{
    return g && g->n_patterns > 0;
}

bool tw_json_grammar_may_strand(const tw_json_grammar *g)
{
    return g && (g->n_patterns > 0 || g->unique_numbers);
}

void json_patterns_free(tw_json_grammar *g)
{
    for (uint32_t i = 0; i < g->n_patterns; i++)
        pcre2_code_free((pcre2_code *)g->patterns[i].code);
    free(g->patterns);
}

/* PCRE2's allocations for one match, from a buffer on the stack: the
 * contexts and match data are a few hundred bytes and live for one call. */
typedef struct bump {
    unsigned char *p;
    size_t used, cap;
} bump;

static void *bump_malloc(size_t n, void *data)
{
    bump *b = data;
    n = (n + 15) & ~(size_t)15;
    if (n > b->cap - b->used)
        return NULL;
    void *r = b->p + b->used;
    b->used += n;
    return r;
}

static void bump_free(void *ptr, void *data)
{
    (void)ptr;
    (void)data;
}

int json_pattern_test(const jpattern *p, const unsigned char *s, size_t n, bool whole)
{
    if (!whole && p->anchored && n == 0)
        return JP_VIABLE;
    if (!whole && !p->anchored)
        return JP_VIABLE;
    _Alignas(16) unsigned char mem[2048];
    bump b = {mem, 0, sizeof mem};
    pcre2_general_context *gc = pcre2_general_context_create(bump_malloc, bump_free, &b);
    pcre2_match_context *mc = gc ? pcre2_match_context_create(gc) : NULL;
    pcre2_match_data *md = mc ? pcre2_match_data_create(1, gc) : NULL;
    if (!md)
        return JP_FAILED;
    const uint32_t opts = whole ? 0 : PCRE2_PARTIAL_HARD;
    int rc;
    if (p->jit) {
        /* a pattern that backtracks without end is cut off, and refused */
        pcre2_set_match_limit(mc, MATCH_LIMIT);
        rc = pcre2_jit_match((const pcre2_code *)p->code, s, n, 0, opts, md, mc);
    } else {
        int ws[DFA_WORKSPACE];
        rc = pcre2_dfa_match((const pcre2_code *)p->code, s, n, 0, opts, md, mc, ws, DFA_WORKSPACE);
    }
    if (rc >= 0)
        return JP_MATCH;
    if (rc == PCRE2_ERROR_PARTIAL)
        return JP_VIABLE;
    return rc == PCRE2_ERROR_NOMATCH ? JP_DEAD : JP_FAILED;
}
