/* Template globals: range, namespace, dict, raise_exception, strftime_now. */
#include "jinja.h"

#include <stdio.h>
#include <string.h>

/* ---- globals ---------------------------------------------------------- */

#define MAX_RANGE 100000 /* the sandbox's limit, kept for identical refusals */

static bool g_range(jrender *r, const jnode *at, const jfunc *f, const jv *args, size_t nargs,
                    const char *const *kwn, const jv *kwv, size_t nkw, jv *out)
{
    (void)f, (void)kwn, (void)kwv;
    *out = jv_undef();
    if (nkw || nargs < 1 || nargs > 3)
        return jr_fail(r, at, TW_INVALID_ARGUMENT, "range() takes 1 to 3 positional arguments");
    int64_t v[3];
    for (size_t i = 0; i < nargs; i++)
        if (args[i].kind != JV_INT && args[i].kind != JV_BOOL)
            return jr_fail(r, at, TW_INVALID_ARGUMENT,
                           "'%s' object cannot be interpreted as an integer",
                           jv_type_name(args[i]));
        else
            v[i] = args[i].kind == JV_INT ? args[i].u.i : args[i].u.b;
    int64_t start = nargs == 1 ? 0 : v[0], stop = nargs == 1 ? v[0] : v[1];
    int64_t step = nargs == 3 ? v[2] : 1;
    if (step == 0)
        return jr_fail(r, at, TW_INVALID_ARGUMENT, "range() arg 3 must not be zero");
    __int128 count = 0;
    if (step > 0 && stop > start)
        count = ((__int128)stop - start + step - 1) / step;
    else if (step < 0 && stop < start)
        count = ((__int128)start - stop - step - 1) / -(__int128)step;
    if (count > MAX_RANGE)
        return jr_fail(r, at, TW_RESOURCE_EXHAUSTED,
                       "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).",
                       MAX_RANGE);
    if (!jv_new_list(r, at, (size_t)count, false, out))
        return false;
    for (int64_t i = 0; i < (int64_t)count; i++)
        if (!jlist_push(r, at, jv_list_of(*out), jv_int(start + i * step)))
            return false;
    return true;
}

static bool fill_dict(jrender *r, const jnode *at, jdict *d, const jv *args, size_t nargs,
                      const char *const *kwn, const jv *kwv, size_t nkw)
{
    if (nargs > 1)
        return jr_fail(r, at, TW_INVALID_ARGUMENT, "expected at most 1 positional argument");
    if (nargs == 1) {
        if (args[0].kind != JV_DICT)
            return jr_fail(r, at, TW_INVALID_ARGUMENT, "expected a dict, got %s",
                           jv_type_name(args[0]));
        const jdict *src = jv_dict_of(args[0]);
        for (size_t i = 0; i < src->n; i++)
            if (!jdict_set(r, at, d, src->keys[i], jv_ref(src->vals[i])))
                return false;
    }
    for (size_t k = 0; k < nkw; k++) {
        jv key;
        if (kwv[k].kind == JV_NS || kwv[k].kind == JV_LOOP)
            return jr_fail(r, at, TW_INVALID_ARGUMENT,
                           "a namespace cannot hold namespaces or loop objects");
        if (!jv_new_str(r, at, kwn[k], strlen(kwn[k]), &key))
            return false;
        bool ok = jdict_set(r, at, d, key, jv_ref(kwv[k]));
        jv_decref(r, key);
        if (!ok)
            return false;
    }
    return true;
}

static bool g_namespace(jrender *r, const jnode *at, const jfunc *f, const jv *args, size_t nargs,
                        const char *const *kwn, const jv *kwv, size_t nkw, jv *out)
{
    (void)f;
    return jv_new_ns(r, at, out) && fill_dict(r, at, jv_dict_of(*out), args, nargs, kwn, kwv, nkw);
}

static bool g_dict(jrender *r, const jnode *at, const jfunc *f, const jv *args, size_t nargs,
                   const char *const *kwn, const jv *kwv, size_t nkw, jv *out)
{
    (void)f;
    return jv_new_dict(r, at, out) &&
           fill_dict(r, at, jv_dict_of(*out), args, nargs, kwn, kwv, nkw);
}

static bool g_raise(jrender *r, const jnode *at, const jfunc *f, const jv *args, size_t nargs,
                    const char *const *kwn, const jv *kwv, size_t nkw, jv *out)
{
    (void)f, (void)kwn, (void)kwv, (void)nkw;
    *out = jv_undef();
    jbuf b = {0};
    if (nargs && !jv_str_append(r, at, &b, args[0])) {
        jbuf_release(r, &b);
        return false;
    }
    jr_raise(r, b.data ? b.data : "", b.len);
    jbuf_release(r, &b);
    return false;
}

static bool g_strftime_now(jrender *r, const jnode *at, const jfunc *f, const jv *args,
                           size_t nargs, const char *const *kwn, const jv *kwv, size_t nkw,
                           jv *out)
{
    (void)f;
    static const char *const names[] = {"format"};
    jv a[1];
    if (!jbind(r, at, "strftime_now", names, 1, args, nargs, kwn, kwv, nkw, a))
        return false;
    if (a[0].kind != JV_STR)
        return jr_fail(r, at, TW_INVALID_ARGUMENT, "strftime_now format must be a string");
    const jstr *fmt = jv_str_of(a[0]);
    if (fmt->len > 200 || memchr(fmt->data, '\0', fmt->len))
        return jr_fail(r, at, TW_INVALID_ARGUMENT, "strftime_now format is too long or invalid");
    time_t now = r->fixed_now ? r->fixed_now : time(NULL);
    struct tm tm;
    if (r->fixed_now || r->now_utc ? !gmtime_r(&now, &tm) : !localtime_r(&now, &tm))
        return jr_fail(r, at, TW_INTERNAL, "cannot read the clock");
    char buf[1024];
    size_t n = fmt->len ? strftime(buf, sizeof buf, fmt->data, &tm) : 0;
    if (fmt->len && n == 0)
        buf[0] = '\0';
    return jv_new_str(r, at, buf, n, out);
}

bool jglobal_get(jrender *r, const jnode *at, const char *name, jv *out, bool *found)
{
    static const struct {
        const char *name;
        jbuiltin_fn fn;
    } globals[] = {
        {"range", g_range},           {"namespace", g_namespace},
        {"dict", g_dict},             {"raise_exception", g_raise},
        {"strftime_now", g_strftime_now},
    };
    *out = jv_undef();
    *found = false;
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++) {
        if (!strcmp(globals[i].name, name)) {
            *found = true;
            return jv_new_func(r, at, JF_BUILTIN, globals[i].name, globals[i].fn, jv_undef(), out);
        }
    }
    return true;
}
