/* Python methods that templates call on values (str.strip(), dict.get(),
 * ...) and the binding of call arguments to parameter names. The string
 * work behind them (case, strip, replace, splitlines, %-formatting) is in
 * jinja_strings.c. The sandbox's rule is kept: methods that would mutate a
 * list or dict are refused. */
#include "jinja.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

/* ---- argument binding ------------------------------------------------- */

bool jbind(jrender *r, const jnode *at, const char *fname, const char *const *names,
           size_t nnames, const jv *args, size_t nargs, const char *const *kwnames,
           const jv *kwvals, size_t nkw, jv *slots)
{
    for (size_t i = 0; i < nnames; i++)
        slots[i] = jv_undef();
    if (nargs > nnames)
        return jr_fail(r, at, TW_INVALID_ARGUMENT, "%s() takes at most %zu arguments (%zu given)",
                       fname, nnames, nargs);
    for (size_t i = 0; i < nargs; i++)
        slots[i] = args[i];
    for (size_t k = 0; k < nkw; k++) {
        size_t i = 0;
        while (i < nnames && strcmp(names[i], kwnames[k]) != 0)
            i++;
        if (i == nnames)
            return jr_fail(r, at, TW_INVALID_ARGUMENT,
                           "%s() got an unexpected keyword argument '%s'", fname, kwnames[k]);
        if (i < nargs)
            return jr_fail(r, at, TW_INVALID_ARGUMENT, "%s() got multiple values for '%s'",
                           fname, kwnames[k]);
        slots[i] = kwvals[k];
    }
    return true;
}

#define BIND(fname, ...)                                                                     \
    static const char *const names_[] = {__VA_ARGS__};                                     \
    jv a[sizeof names_ / sizeof names_[0]];                                                  \
    (void)a;                                                                                 \
    if (!jbind(r, at, fname, names_, sizeof names_ / sizeof names_[0], args, nargs, kwn, kwv, \
               nkw, a))                                                                      \
        return false

static bool need_str(jrender *r, const jnode *at, jv v, const char *what)
{
    if (v.kind == JV_STR)
        return true;
    return jr_fail(r, at, TW_INVALID_ARGUMENT, "%s must be a string, not %s", what,
                   jv_type_name(v));
}

static bool opt_int(jrender *r, const jnode *at, jv v, int64_t dflt, int64_t *out)
{
    if (v.kind == JV_UNDEF || v.kind == JV_NONE) {
        *out = dflt;
        return true;
    }
    if (v.kind == JV_INT || v.kind == JV_BOOL) {
        *out = v.kind == JV_INT ? v.u.i : v.u.b;
        return true;
    }
    return jr_fail(r, at, TW_INVALID_ARGUMENT, "expected an integer, got %s", jv_type_name(v));
}

/* ---- str methods ------------------------------------------------------ */

static size_t cp_index(const jstr *s, size_t byte_off)
{
    if (s->ascii)
        return byte_off;
    size_t n = 0;
    for (size_t i = 0; i < byte_off;) {
        int32_t cp;
        i += ju_decode(s->data + i, s->len - i, &cp);
        n++;
    }
    return n;
}

static bool str_split(jrender *r, const jnode *at, const jstr *s, jv sepv, int64_t maxsplit,
                      bool from_right, jv *out)
{
    if (!jv_new_list(r, at, 0, false, out))
        return false;
    jlist *l = jv_list_of(*out);
    jv piece;
    if (sepv.kind == JV_UNDEF || sepv.kind == JV_NONE) {
        /* Runs of whitespace separate; empty pieces are dropped. */
        size_t pieces_start[2] = {0, 0};
        (void)pieces_start;
        if (!from_right) {
            size_t i = 0;
            int64_t done = 0;
            for (;;) {
                while (i < s->len) {
                    int32_t cp;
                    size_t n = ju_decode(s->data + i, s->len - i, &cp);
                    if (!ju_isspace(cp))
                        break;
                    i += n;
                }
                if (i >= s->len)
                    break;
                if (maxsplit >= 0 && done >= maxsplit) {
                    size_t e = s->len;
                    while (e > i && ju_isspace((unsigned char)s->data[e - 1]))
                        e--;
                    return jv_new_str(r, at, s->data + i, e - i, &piece) &&
                           jlist_push(r, at, l, piece);
                }
                size_t st = i;
                while (i < s->len) {
                    int32_t cp;
                    size_t n = ju_decode(s->data + i, s->len - i, &cp);
                    if (ju_isspace(cp))
                        break;
                    i += n;
                }
                if (!jv_new_str(r, at, s->data + st, i - st, &piece) ||
                    !jlist_push(r, at, l, piece))
                    return false;
                done++;
            }
            return true;
        }
        /* rsplit() without a separator: collect from the right, then reverse. */
        size_t e = s->len;
        int64_t done = 0;
        for (;;) {
            while (e > 0 && ju_isspace((unsigned char)s->data[e - 1]))
                e--;
            if (e == 0)
                break;
            if (maxsplit >= 0 && done >= maxsplit) {
                size_t st = 0;
                while (st < e && ju_isspace((unsigned char)s->data[st]))
                    st++;
                if (!jv_new_str(r, at, s->data + st, e - st, &piece) ||
                    !jlist_push(r, at, l, piece))
                    return false;
                break;
            }
            size_t st = e;
            while (st > 0 && !ju_isspace((unsigned char)s->data[st - 1]))
                st--;
            if (!jv_new_str(r, at, s->data + st, e - st, &piece) || !jlist_push(r, at, l, piece))
                return false;
            e = st;
            done++;
        }
        for (size_t i = 0; i < l->n / 2; i++) {
            jv t = l->items[i];
            l->items[i] = l->items[l->n - 1 - i];
            l->items[l->n - 1 - i] = t;
        }
        return true;
    }
    if (!need_str(r, at, sepv, "separator"))
        return false;
    const jstr *sep = jv_str_of(sepv);
    if (sep->len == 0)
        return jr_fail(r, at, TW_INVALID_ARGUMENT, "empty separator");
    if (!from_right) {
        size_t i = 0;
        int64_t done = 0;
        for (;;) {
            const char *hit = (maxsplit < 0 || done < maxsplit)
                                  ? memmem(s->data + i, s->len - i, sep->data, sep->len)
                                  : NULL;
            size_t e = hit ? (size_t)(hit - s->data) : s->len;
            if (!jr_step(r, at) || !jv_new_str(r, at, s->data + i, e - i, &piece) ||
                !jlist_push(r, at, l, piece))
                return false;
            if (!hit)
                return true;
            i = e + sep->len;
            done++;
        }
    }
    size_t e = s->len;
    int64_t done = 0;
    for (;;) {
        size_t hit = SIZE_MAX;
        if ((maxsplit < 0 || done < maxsplit) && e >= sep->len)
            for (size_t k = e - sep->len + 1; k-- > 0;)
                if (memcmp(s->data + k, sep->data, sep->len) == 0) {
                    hit = k;
                    break;
                }
        size_t st = hit == SIZE_MAX ? 0 : hit + sep->len;
        if (!jr_step(r, at) || !jv_new_str(r, at, s->data + st, e - st, &piece) ||
            !jlist_push(r, at, l, piece))
            return false;
        if (hit == SIZE_MAX)
            break;
        e = hit;
        done++;
    }
    for (size_t i = 0; i < l->n / 2; i++) {
        jv t = l->items[i];
        l->items[i] = l->items[l->n - 1 - i];
        l->items[l->n - 1 - i] = t;
    }
    return true;
}

static bool affix_match(jrender *r, const jnode *at, const jstr *s, jv affix, bool end, bool *out)
{
    *out = false;
    if (affix.kind == JV_LIST && jv_list_of(affix)->tuple) {
        const jlist *l = jv_list_of(affix);
        for (size_t i = 0; i < l->n && !*out; i++)
            if (!affix_match(r, at, s, l->items[i], end, out))
                return false;
        return true;
    }
    if (affix.kind != JV_STR)
        return jr_fail(r, at, TW_INVALID_ARGUMENT,
                       "%s first arg must be str or a tuple of str, not %s",
                       end ? "endswith" : "startswith", jv_type_name(affix));
    const jstr *x = jv_str_of(affix);
    *out = x->len <= s->len &&
           memcmp(end ? s->data + s->len - x->len : s->data, x->data, x->len) == 0;
    return true;
}

static bool str_format(jrender *r, const jnode *at, const jstr *f, const jv *args, size_t nargs,
                       const char *const *kwn, const jv *kwv, size_t nkw, jv *out)
{
    jbuf b = {0};
    size_t auto_i = 0;
    bool ok = true;
    for (size_t i = 0; ok && i < f->len; i++) {
        char c = f->data[i];
        if ((c == '{' || c == '}') && i + 1 < f->len && f->data[i + 1] == c) {
            ok = jbuf_put(r, at, &b, &c, 1);
            i++;
            continue;
        }
        if (c == '}') {
            ok = jr_fail(r, at, TW_INVALID_ARGUMENT, "single '}' encountered in format string");
            break;
        }
        if (c != '{') {
            ok = jbuf_put(r, at, &b, &c, 1);
            continue;
        }
        size_t e = i + 1;
        while (e < f->len && f->data[e] != '}')
            e++;
        if (e >= f->len) {
            ok = jr_fail(r, at, TW_INVALID_ARGUMENT, "single '{' encountered in format string");
            break;
        }
        const char *field = f->data + i + 1;
        size_t flen = e - i - 1;
        bool repr = false;
        const char *bang = memchr(field, '!', flen);
        const char *colon = memchr(field, ':', flen);
        if (colon && (size_t)(colon - field) + 1 < flen) {
            ok = jr_fail(r, at, TW_INVALID_ARGUMENT, "format specs are not supported");
            break;
        }
        size_t nlen = bang ? (size_t)(bang - field) : colon ? (size_t)(colon - field) : flen;
        if (bang)
            repr = bang + 1 < field + flen && bang[1] == 'r';
        jv v = jv_undef();
        bool have = false;
        if (nlen == 0) {
            if (auto_i < nargs) {
                v = args[auto_i++];
                have = true;
            }
        } else if (field[0] >= '0' && field[0] <= '9') {
            size_t k = (size_t)strtoul(field, NULL, 10);
            if (k < nargs) {
                v = args[k];
                have = true;
            }
        } else {
            for (size_t k = 0; k < nkw; k++)
                if (strlen(kwn[k]) == nlen && memcmp(kwn[k], field, nlen) == 0) {
                    v = kwv[k];
                    have = true;
                }
        }
        if (!have) {
            ok = jr_fail(r, at, TW_INVALID_ARGUMENT, "format field '%.*s' has no value",
                         (int)(nlen < 40 ? nlen : 40), field);
            break;
        }
        ok = repr ? jv_repr_append(r, at, &b, v) : jv_str_append(r, at, &b, v);
        i = e;
    }
    if (!ok) {
        jbuf_release(r, &b);
        return false;
    }
    return jbuf_to_str(r, at, &b, out);
}

static bool str_pad(jrender *r, const jnode *at, const jstr *s, int64_t width, int where,
                    jv fill, jv *out)
{
    const char *fc = " ";
    size_t fl = 1;
    if (fill.kind == JV_STR) {
        if (ju_count(jv_str_of(fill)) != 1)
            return jr_fail(r, at, TW_INVALID_ARGUMENT, "the fill character must be one character");
        fc = jv_str_of(fill)->data;
        fl = jv_str_of(fill)->len;
    }
    int64_t n = (int64_t)ju_count(s);
    if (width > (int64_t)(r->lim->max_live_bytes / 4))
        return jr_fail(r, at, TW_RESOURCE_EXHAUSTED, "width too large");
    int64_t pad = width > n ? width - n : 0;
    /* CPython's rule for where center() puts an odd leftover space. */
    int64_t left = where < 0 ? 0 : where > 0 ? pad : pad / 2 + (pad & width & 1);
    int64_t right = pad - left;
    jbuf b = {0};
    bool ok = true;
    for (int64_t i = 0; ok && i < left; i++)
        ok = jbuf_put(r, at, &b, fc, fl);
    ok = ok && jbuf_put(r, at, &b, s->data, s->len);
    for (int64_t i = 0; ok && i < right; i++)
        ok = jbuf_put(r, at, &b, fc, fl);
    if (!ok) {
        jbuf_release(r, &b);
        return false;
    }
    return jbuf_to_str(r, at, &b, out);
}

static bool str_is(const jstr *s, int kind)
{
    if (s->len == 0)
        return false;
    bool any_cased = false;
    for (size_t i = 0; i < s->len;) {
        int32_t cp;
        i += ju_decode(s->data + i, s->len - i, &cp);
        utf8proc_category_t c = utf8proc_category(cp);
        bool alpha = c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO;
        bool digit = c == UTF8PROC_CATEGORY_ND;
        switch (kind) {
        case 'a': if (!alpha) return false; break;
        case 'd': if (!digit) return false; break;
        case 'n': if (!alpha && !digit && c != UTF8PROC_CATEGORY_NL && c != UTF8PROC_CATEGORY_NO) return false; break;
        case 's': if (!ju_isspace(cp)) return false; break;
        case 'l':
            if (c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LT) return false;
            any_cased |= c == UTF8PROC_CATEGORY_LL;
            break;
        case 'u':
            if (c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT) return false;
            any_cased |= c == UTF8PROC_CATEGORY_LU;
            break;
        }
    }
    return (kind == 'l' || kind == 'u') ? any_cased : true;
}

static bool str_method(jrender *r, const jnode *at, const jfunc *f, const jv *args, size_t nargs,
                       const char *const *kwn, const jv *kwv, size_t nkw, jv *out)
{
    const jstr *s = jv_str_of(f->self);
    const char *m = f->name;
    *out = jv_undef();
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
        BIND(m, "chars");
        if (a[0].kind != JV_UNDEF && a[0].kind != JV_NONE && !need_str(r, at, a[0], "chars"))
            return false;
        const jstr *chars = a[0].kind == JV_STR ? jv_str_of(a[0]) : NULL;
        return jstr_strip(r, at, s, chars, m[0] != 'r', m[0] != 'l', out);
    }
    if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
        BIND(m, "sep", "maxsplit");
        int64_t maxsplit = 0;
        return opt_int(r, at, a[1], -1, &maxsplit) &&
               str_split(r, at, s, a[0], maxsplit, m[0] == 'r', out);
    }
    if (!strcmp(m, "splitlines")) {
        BIND(m, "keepends");
        return jstr_splitlines(r, at, s, jv_truthy(a[0]), out);
    }
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        BIND(m, "affix");
        bool res;
        if (!affix_match(r, at, s, a[0], m[0] == 'e', &res))
            return false;
        *out = jv_bool(res);
        return true;
    }
    if (!strcmp(m, "replace")) {
        BIND(m, "old", "new", "count");
        int64_t count = 0;
        return need_str(r, at, a[0], "old") && need_str(r, at, a[1], "new") &&
               opt_int(r, at, a[2], -1, &count) &&
               jstr_replace(r, at, s, jv_str_of(a[0]), jv_str_of(a[1]), count, out);
    }
    if (!strcmp(m, "upper") || !strcmp(m, "lower") || !strcmp(m, "title") ||
        !strcmp(m, "capitalize")) {
        BIND(m, "");
        jcase c = m[0] == 'u' ? JCASE_UPPER : m[0] == 'l' ? JCASE_LOWER : m[0] == 't' ? JCASE_TITLE
                                                                            : JCASE_CAPITALIZE;
        if (c == JCASE_CAPITALIZE) {
            jv low;
            if (!jstr_case(r, at, s, JCASE_LOWER, &low))
                return false;
            /* capitalize: first character title-cased, the rest lower-cased */
            bool ok = jstr_case(r, at, jv_str_of(low), JCASE_CAPITALIZE, out);
            jv_decref(r, low);
            return ok;
        }
        return jstr_case(r, at, s, c, out);
    }
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") ||
        !strcmp(m, "rindex") || !strcmp(m, "count")) {
        BIND(m, "sub");
        if (!need_str(r, at, a[0], "sub"))
            return false;
        const jstr *sub = jv_str_of(a[0]);
        if (m[0] == 'c') {
            int64_t n = 0;
            if (sub->len == 0)
                n = (int64_t)ju_count(s) + 1;
            else
                for (size_t i = 0; i + sub->len <= s->len;) {
                    const char *h = memmem(s->data + i, s->len - i, sub->data, sub->len);
                    if (!h)
                        break;
                    n++;
                    i = (size_t)(h - s->data) + sub->len;
                }
            *out = jv_int(n);
            return true;
        }
        int64_t pos = -1;
        if (m[0] != 'r') {
            const char *h = memmem(s->data, s->len, sub->data, sub->len);
            if (h)
                pos = (int64_t)cp_index(s, (size_t)(h - s->data));
        } else if (sub->len <= s->len) {
            for (size_t k = s->len - sub->len + 1; k-- > 0;)
                if (memcmp(s->data + k, sub->data, sub->len) == 0) {
                    pos = (int64_t)cp_index(s, k);
                    break;
                }
        }
        if (pos < 0 && strstr(m, "index"))
            return jr_fail(r, at, TW_INVALID_ARGUMENT, "substring not found");
        *out = jv_int(pos);
        return true;
    }
    if (!strcmp(m, "join")) {
        BIND(m, "iterable");
        if (a[0].kind != JV_LIST)
            return jfilter_call(r, at, "join", a[0], &f->self, 1, NULL, NULL, 0, out);
        const jlist *l = jv_list_of(a[0]);
        jbuf b = {0};
        for (size_t i = 0; i < l->n; i++) {
            if (l->items[i].kind != JV_STR) {
                jbuf_release(r, &b);
                return jr_fail(r, at, TW_INVALID_ARGUMENT,
                               "sequence item %zu: expected str instance, %s found", i,
                               jv_type_name(l->items[i]));
            }
            if ((i && !jbuf_put(r, at, &b, s->data, s->len)) ||
                !jbuf_put(r, at, &b, jv_str_of(l->items[i])->data, jv_str_of(l->items[i])->len)) {
                jbuf_release(r, &b);
                return false;
            }
        }
        return jbuf_to_str(r, at, &b, out);
    }
    if (!strcmp(m, "format"))
        return str_format(r, at, s, args, nargs, kwn, kwv, nkw, out);
    if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
        BIND(m, "affix");
        if (!need_str(r, at, a[0], "affix"))
            return false;
        const jstr *x = jv_str_of(a[0]);
        bool suffix = m[6] == 's';
        bool hit = x->len <= s->len &&
                   memcmp(suffix ? s->data + s->len - x->len : s->data, x->data, x->len) == 0;
        if (!hit)
            return jv_new_str(r, at, s->data, s->len, out);
        return jv_new_str(r, at, suffix ? s->data : s->data + x->len, s->len - x->len, out);
    }
    if (!strcmp(m, "center") || !strcmp(m, "ljust") || !strcmp(m, "rjust")) {
        BIND(m, "width", "fillchar");
        int64_t w = 0;
        return opt_int(r, at, a[0], 0, &w) &&
               str_pad(r, at, s, w, m[0] == 'c' ? 0 : m[0] == 'l' ? -1 : 1, a[1], out);
    }
    if (!strcmp(m, "isdigit") || !strcmp(m, "isalpha") || !strcmp(m, "isalnum") ||
        !strcmp(m, "isspace") || !strcmp(m, "islower") || !strcmp(m, "isupper")) {
        BIND(m, "");
        int kind = !strcmp(m, "isalnum") ? 'n' : m[2] == 'd' ? 'd' : m[2] == 'a' ? 'a'
                 : m[2] == 's' ? 's' : m[2] == 'l' ? 'l' : 'u';
        *out = jv_bool(str_is(s, kind));
        return true;
    }
    return jr_fail(r, at, TW_INTERNAL, "unknown str method %s", m);
}

static const char *const str_methods[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith",
    "replace", "upper", "lower", "title", "capitalize", "find", "rfind", "index", "rindex",
    "count", "join", "format", "removeprefix", "removesuffix", "center", "ljust", "rjust",
    "isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper", NULL};

/* ---- dict, list and loop methods -------------------------------------- */

static bool dict_method(jrender *r, const jnode *at, const jfunc *f, const jv *args, size_t nargs,
                        const char *const *kwn, const jv *kwv, size_t nkw, jv *out)
{
    const jdict *d = jv_dict_of(f->self);
    const char *m = f->name;
    *out = jv_undef();
    if (!strcmp(m, "get")) {
        BIND(m, "key", "default");
        const jv *v = jdict_get(d, a[0]);
        *out = jv_ref(v ? *v : a[1].kind == JV_UNDEF ? jv_none() : a[1]);
        return true;
    }
    BIND(m, "");
    if (!jv_new_list(r, at, d->n, false, out))
        return false;
    for (size_t i = 0; i < d->n; i++) {
        jv item;
        if (m[0] == 'k') {
            item = jv_ref(d->keys[i]);
        } else if (m[0] == 'v') {
            item = jv_ref(d->vals[i]);
        } else {
            if (!jv_new_list(r, at, 2, true, &item) ||
                !jlist_push(r, at, jv_list_of(item), jv_ref(d->keys[i])) ||
                !jlist_push(r, at, jv_list_of(item), jv_ref(d->vals[i]))) {
                jv_decref(r, item);
                return false;
            }
        }
        if (!jlist_push(r, at, jv_list_of(*out), item))
            return false;
    }
    return true;
}

static bool list_method(jrender *r, const jnode *at, const jfunc *f, const jv *args, size_t nargs,
                        const char *const *kwn, const jv *kwv, size_t nkw, jv *out)
{
    const jlist *l = jv_list_of(f->self);
    BIND(f->name, "value");
    int64_t n = 0, pos = -1;
    for (size_t i = 0; i < l->n; i++)
        if (jv_equal(l->items[i], a[0])) {
            n++;
            if (pos < 0)
                pos = (int64_t)i;
        }
    if (!strcmp(f->name, "count")) {
        *out = jv_int(n);
        return true;
    }
    if (pos < 0)
        return jr_fail(r, at, TW_INVALID_ARGUMENT, "value is not in list");
    *out = jv_int(pos);
    return true;
}

static bool unsafe_method(jrender *r, const jnode *at, const jfunc *f, const jv *args,
                          size_t nargs, const char *const *kwn, const jv *kwv, size_t nkw,
                          jv *out)
{
    (void)args, (void)nargs, (void)kwn, (void)kwv, (void)nkw;
    *out = jv_undef();
    return jr_fail(r, at, TW_PERMISSION_DENIED,
                   "access to attribute '%s' of '%s' object is unsafe.", f->name,
                   jv_type_name(f->self));
}

static bool loop_cycle(jrender *r, const jnode *at, const jfunc *f, const jv *args, size_t nargs,
                       const char *const *kwn, const jv *kwv, size_t nkw, jv *out)
{
    (void)kwn, (void)kwv;
    if (nkw || nargs == 0)
        return jr_fail(r, at, TW_INVALID_ARGUMENT, "loop.cycle() needs positional arguments");
    *out = jv_ref(args[jv_loop_of(f->self)->index0 % nargs]);
    return true;
}

static const char *find_name(const char *const *list, const char *name)
{
    for (size_t i = 0; list[i]; i++)
        if (!strcmp(list[i], name))
            return list[i];
    return NULL;
}

bool jmethod_get(jrender *r, const jnode *at, jv obj, const char *name, jv *out, bool *found)
{
    static const char *const dict_m[] = {"get", "items", "keys", "values", NULL};
    static const char *const dict_unsafe[] = {"pop", "popitem", "setdefault", "update", "clear",
                                              NULL};
    static const char *const list_m[] = {"index", "count", NULL};
    static const char *const list_unsafe[] = {"append", "extend", "insert", "pop", "remove",
                                              "reverse", "sort", "clear", NULL};
    static const char *const loop_m[] = {"cycle", NULL};
    const char *m = NULL;
    jbuiltin_fn fn = NULL;
    *out = jv_undef();
    *found = false;
    switch (obj.kind) {
    case JV_STR:
        if ((m = find_name(str_methods, name)))
            fn = str_method;
        break;
    case JV_DICT:
        if ((m = find_name(dict_m, name)))
            fn = dict_method;
        else if ((m = find_name(dict_unsafe, name)))
            fn = unsafe_method;
        break;
    case JV_LIST:
        if ((m = find_name(list_m, name)))
            fn = list_method;
        else if ((m = find_name(list_unsafe, name)))
            fn = unsafe_method;
        break;
    case JV_LOOP:
        if ((m = find_name(loop_m, name)))
            fn = loop_cycle;
        break;
    default:
        break;
    }
    if (!fn)
        return true;
    *found = true;
    return jv_new_func(r, at, JF_BUILTIN, m, fn, obj, out);
}
