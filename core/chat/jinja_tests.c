/* Jinja2's builtin tests ("x is defined", "n is divisibleby 3", ...). */
#include "jinja.h"

#include <string.h>

/* ---- tests ------------------------------------------------------------ */

static const char *const test_names[] = {
    "defined", "undefined", "none", "boolean", "true", "false", "integer", "float", "number",
    "string", "mapping", "iterable", "sequence", "callable", "sameas", "equalto", "eq", "==",
    "ne", "!=", "lt", "<", "lessthan", "le", "<=", "gt", ">", "greaterthan", "ge", ">=", "in",
    "odd", "even", "divisibleby", "lower", "upper", "escaped", "filter", "test", NULL};

bool jtest_exists(const char *name)
{
    for (size_t i = 0; test_names[i]; i++)
        if (!strcmp(test_names[i], name))
            return true;
    return false;
}

static bool want_args(jrender *r, const jnode *at, const char *name, size_t nargs, size_t want)
{
    if (nargs == want)
        return true;
    return jr_fail(r, at, TW_INVALID_ARGUMENT, "test '%s' takes %zu argument%s, got %zu", name,
                   want, want == 1 ? "" : "s", nargs);
}

bool jtest_call(jrender *r, const jnode *at, const char *name, jv v, const jv *args, size_t nargs,
                bool *out)
{
    const char *n = name;
    *out = false;
    if (!jtest_exists(n))
        return jr_fail(r, at, TW_INVALID_ARGUMENT, "no test named '%.60s'", name);
    size_t want = (!strcmp(n, "sameas") || !strcmp(n, "equalto") || !strcmp(n, "eq") ||
                   !strcmp(n, "==") || !strcmp(n, "ne") || !strcmp(n, "!=") || !strcmp(n, "lt") ||
                   !strcmp(n, "<") || !strcmp(n, "lessthan") || !strcmp(n, "le") ||
                   !strcmp(n, "<=") || !strcmp(n, "gt") || !strcmp(n, ">") ||
                   !strcmp(n, "greaterthan") || !strcmp(n, "ge") || !strcmp(n, ">=") ||
                   !strcmp(n, "in") || !strcmp(n, "divisibleby"))
                      ? 1
                      : 0;
    if (!want_args(r, at, n, nargs, want))
        return false;
    if (!strcmp(n, "defined")) *out = v.kind != JV_UNDEF;
    else if (!strcmp(n, "undefined")) *out = v.kind == JV_UNDEF;
    else if (!strcmp(n, "none")) *out = v.kind == JV_NONE;
    else if (!strcmp(n, "boolean")) *out = v.kind == JV_BOOL;
    else if (!strcmp(n, "true")) *out = v.kind == JV_BOOL && v.u.b;
    else if (!strcmp(n, "false")) *out = v.kind == JV_BOOL && !v.u.b;
    else if (!strcmp(n, "integer")) *out = v.kind == JV_INT;
    else if (!strcmp(n, "float")) *out = v.kind == JV_FLOAT;
    else if (!strcmp(n, "number")) *out = jv_is_num(v);
    else if (!strcmp(n, "string")) *out = v.kind == JV_STR;
    else if (!strcmp(n, "mapping")) *out = v.kind == JV_DICT;
    else if (!strcmp(n, "iterable"))
        *out = v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_DICT || v.kind == JV_UNDEF;
    else if (!strcmp(n, "sequence"))
        *out = v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_DICT || v.kind == JV_UNDEF;
    else if (!strcmp(n, "callable")) *out = v.kind == JV_FUNC;
    else if (!strcmp(n, "sameas")) {
        jv o = args[0];
        if (jv_is_obj(v) || jv_is_obj(o))
            *out = v.kind == o.kind && v.u.o == o.u.o;
        else
            *out = v.kind == o.kind && jv_equal(v, o);
    } else if (!strcmp(n, "escaped") || !strcmp(n, "filter") || !strcmp(n, "test")) {
        if (!strcmp(n, "test"))
            *out = v.kind == JV_STR && jtest_exists(jv_str_of(v)->data);
        else if (!strcmp(n, "filter") && v.kind == JV_STR)
            *out = jfilter_exists(jv_str_of(v)->data);
    } else if (!strcmp(n, "odd") || !strcmp(n, "even") || !strcmp(n, "divisibleby")) {
        if (v.kind != JV_INT && v.kind != JV_BOOL)
            return jr_fail(r, at, TW_INVALID_ARGUMENT, "test '%s' needs an integer", n);
        int64_t x = v.kind == JV_INT ? v.u.i : v.u.b;
        if (n[0] == 'd') {
            jv d = args[0];
            if (d.kind != JV_INT || d.u.i == 0)
                return jr_fail(r, at, TW_INVALID_ARGUMENT, "divisibleby needs a non-zero integer");
            *out = d.u.i == -1 || x % d.u.i == 0;
        } else {
            *out = (x % 2 != 0) == (n[0] == 'o');
        }
    } else if (!strcmp(n, "lower") || !strcmp(n, "upper")) {
        if (v.kind == JV_STR) {
            jv conv;
            if (!jstr_case(r, at, jv_str_of(v), n[0] == 'l' ? JCASE_LOWER : JCASE_UPPER, &conv))
                return false;
            *out = jv_equal(conv, v);
            jv_decref(r, conv);
        }
    } else if (!strcmp(n, "in")) {
        jv o = args[0];
        if (o.kind == JV_STR && v.kind == JV_STR)
            *out = memmem(jv_str_of(o)->data, jv_str_of(o)->len, jv_str_of(v)->data,
                          jv_str_of(v)->len) != NULL || jv_str_of(v)->len == 0;
        else if (o.kind == JV_LIST) {
            for (size_t i = 0; i < jv_list_of(o)->n && !*out; i++)
                *out = jv_equal(jv_list_of(o)->items[i], v);
        } else if (o.kind == JV_DICT)
            *out = jdict_get(jv_dict_of(o), v) != NULL;
        else if (o.kind != JV_UNDEF)
            return jr_fail(r, at, TW_INVALID_ARGUMENT, "argument of type '%s' is not iterable",
                           jv_type_name(o));
    } else {
        /* comparisons */
        jv o = args[0];
        if (!strcmp(n, "equalto") || !strcmp(n, "eq") || !strcmp(n, "==")) {
            *out = jv_equal(v, o);
        } else if (!strcmp(n, "ne") || !strcmp(n, "!=")) {
            *out = !jv_equal(v, o);
        } else {
            int cmp;
            if (!jv_compare(r, at, v, o, &cmp))
                return false;
            if (!strcmp(n, "lt") || !strcmp(n, "<") || !strcmp(n, "lessthan")) *out = cmp < 0;
            else if (!strcmp(n, "le") || !strcmp(n, "<=")) *out = cmp <= 0;
            else if (!strcmp(n, "gt") || !strcmp(n, ">") || !strcmp(n, "greaterthan")) *out = cmp > 0;
            else *out = cmp >= 0;
        }
    }
    return true;
}
