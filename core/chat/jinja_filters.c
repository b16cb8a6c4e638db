/* Jinja2's builtin filters and tests, plus Hugging Face's tojson (which,
 * unlike Jinja2's, neither sorts keys nor escapes HTML, and writes
 * non-ASCII text as is). */
#include "jinja.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct fctx {
    jrender *r;
    const jnode *at;
    const char *name;
    jv in;
    const jv *args;
    size_t nargs;
    const char *const *kwn;
    const jv *kwv;
    size_t nkw;
} fctx;

#define BIND(...)                                                                            \
    static const char *const names_[] = {__VA_ARGS__};                                     \
    jv a[sizeof names_ / sizeof names_[0]];                                                  \
    (void)a;                                                                                 \
    if (!jbind(c->r, c->at, c->name, names_, sizeof names_ / sizeof names_[0], c->args,       \
               c->nargs, c->kwn, c->kwv, c->nkw, a))                                         \
        return false

static bool fail_type(const fctx *c, jv v)
{
    return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "filter '%s' cannot take a value of type %s",
                   c->name, jv_type_name(v));
}

/* str(v) of any value, as a string value with its own reference. */
static bool to_str(const fctx *c, jv v, jv *out)
{
    return jv_to_string(c->r, c->at, v, out);
}

static bool arg_int(const fctx *c, jv v, int64_t dflt, int64_t *out)
{
    if (v.kind == JV_UNDEF || v.kind == JV_NONE) {
        *out = dflt;
        return true;
    }
    if (v.kind == JV_INT || v.kind == JV_BOOL) {
        *out = v.kind == JV_INT ? v.u.i : v.u.b;
        return true;
    }
    return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "filter '%s' expects an integer argument",
                   c->name);
}

/* A list view of an iterable input (new reference). */
static bool as_list(const fctx *c, jv v, jv *out)
{
    *out = jv_undef();
    switch (v.kind) {
    case JV_LIST:
        *out = jv_ref(v);
        return true;
    case JV_UNDEF:
        return jv_new_list(c->r, c->at, 0, false, out);
    case JV_DICT: {
        const jdict *d = jv_dict_of(v);
        if (!jv_new_list(c->r, c->at, d->n, false, out))
            return false;
        for (size_t i = 0; i < d->n; i++)
            if (!jlist_push(c->r, c->at, jv_list_of(*out), jv_ref(d->keys[i])))
                return false;
        return true;
    }
    case JV_STR: {
        const jstr *s = jv_str_of(v);
        if (!jv_new_list(c->r, c->at, 0, false, out))
            return false;
        for (size_t i = 0; i < s->len;) {
            int32_t cp;
            size_t n = ju_decode(s->data + i, s->len - i, &cp);
            jv ch;
            if (!jv_new_str(c->r, c->at, s->data + i, n, &ch) ||
                !jlist_push(c->r, c->at, jv_list_of(*out), ch))
                return false;
            i += n;
        }
        return true;
    }
    default:
        return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "'%s' object is not iterable",
                       jv_type_name(v));
    }
}

/* item.a.b / item.0 as Jinja2's attribute getters resolve them. */
static bool get_path(const fctx *c, jv item, jv path, jv *out)
{
    *out = jv_undef();
    if (path.kind == JV_INT) {
        return jeval_getitem(c->r, c->at, item, path, out);
    }
    if (path.kind != JV_STR)
        return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "attribute must be a string");
    const jstr *p = jv_str_of(path);
    jv cur = jv_ref(item);
    size_t i = 0;
    for (;;) {
        const char *dot = memchr(p->data + i, '.', p->len - i);
        size_t e = dot ? (size_t)(dot - p->data) : p->len;
        bool digits = e > i;
        int64_t idx = 0;
        for (size_t k = i; k < e && digits; k++) {
            digits = p->data[k] >= '0' && p->data[k] <= '9' && idx < INT64_MAX / 10;
            idx = idx * 10 + (p->data[k] - '0');
        }
        jv next, key;
        bool ok;
        if (digits) {
            ok = jeval_getitem(c->r, c->at, cur, jv_int(idx), &next);
        } else {
            ok = jv_new_str(c->r, c->at, p->data + i, e - i, &key);
            if (ok)
                ok = jeval_getitem(c->r, c->at, cur, key, &next);
            jv_decref(c->r, key);
        }
        jv_decref(c->r, cur);
        if (!ok)
            return false;
        cur = next;
        if (!dot)
            break;
        i = e + 1;
    }
    *out = cur;
    return true;
}

static bool lower_key(const fctx *c, jv v, bool case_sensitive, jv *out)
{
    if (!case_sensitive && v.kind == JV_STR)
        return jstr_case(c->r, c->at, jv_str_of(v), JCASE_LOWER, out);
    *out = jv_ref(v);
    return true;
}

/* Stable merge sort of idx[] by keys[], stopping at the first comparison
 * that Python would refuse. */
static bool merge_sort(const fctx *c, const jv *keys, size_t *idx, size_t *tmp, size_t n,
                       bool reverse)
{
    if (n < 2)
        return true;
    size_t h = n / 2;
    if (!merge_sort(c, keys, idx, tmp, h, reverse) ||
        !merge_sort(c, keys, idx + h, tmp, n - h, reverse))
        return false;
    size_t i = 0, j = h, o = 0;
    while (i < h && j < n) {
        int cmp;
        if (!jv_compare(c->r, c->at, keys[idx[j]], keys[idx[i]], &cmp))
            return false;
        bool take_right = reverse ? cmp > 0 : cmp < 0;
        tmp[o++] = take_right ? idx[j++] : idx[i++];
    }
    while (i < h)
        tmp[o++] = idx[i++];
    while (j < n)
        tmp[o++] = idx[j++];
    memcpy(idx, tmp, n * sizeof *idx);
    return true;
}

/* Sorts list l by key (attribute path or the item) into a new list. */
static bool sorted(const fctx *c, const jlist *l, jv attribute, bool case_sensitive, bool reverse,
                   jv *out)
{
    *out = jv_undef();
    size_t n = l->n;
    if (n > c->r->lim->max_live_bytes / (sizeof(jv) + 2 * sizeof(size_t)))
        return jr_fail(c->r, c->at, TW_RESOURCE_EXHAUSTED, "list too long to sort");
    size_t bytes = n * (sizeof(jv) + 2 * sizeof(size_t));
    if (!jr_charge(c->r, c->at, bytes))
        return false;
    jv *keys = calloc(n ? n : 1, sizeof *keys);
    size_t *idx = malloc((n ? n : 1) * sizeof *idx), *tmp = malloc((n ? n : 1) * sizeof *tmp);
    bool ok = keys && idx && tmp;
    if (!ok)
        jr_fail(c->r, c->at, TW_RESOURCE_EXHAUSTED, "out of memory");
    size_t made = 0;
    for (size_t i = 0; ok && i < n; i++, made++) {
        jv k = jv_undef();
        idx[i] = i;
        ok = jr_step(c->r, c->at) && (attribute.kind == JV_UNDEF
                                          ? (k = jv_ref(l->items[i]), true)
                                          : get_path(c, l->items[i], attribute, &k));
        if (ok)
            ok = lower_key(c, k, case_sensitive, &keys[i]);
        jv_decref(c->r, k);
    }
    if (ok)
        ok = merge_sort(c, keys, idx, tmp, n, reverse);
    if (ok && jv_new_list(c->r, c->at, n, l->tuple, out))
        for (size_t i = 0; ok && i < n; i++)
            ok = jlist_push(c->r, c->at, jv_list_of(*out), jv_ref(l->items[idx[i]]));
    for (size_t i = 0; keys && i < made; i++)
        jv_decref(c->r, keys[i]);
    free(keys);
    free(idx);
    free(tmp);
    jr_uncharge(c->r, bytes);
    return ok && jr_ok(c->r);
}

/* ---- individual filters ----------------------------------------------- */

static bool f_tojson(const fctx *c, jv *out)
{
    BIND("ensure_ascii", "indent", "separators", "sort_keys");
    jjson_opts o = {.ensure_ascii = jv_truthy(a[0]), .sort_keys = jv_truthy(a[3])};
    char spaces[64];
    if (a[1].kind == JV_INT) {
        int64_t w = a[1].u.i < 0 ? 0 : a[1].u.i;
        if (w > (int64_t)sizeof spaces)
            return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "tojson indent too large");
        memset(spaces, ' ', (size_t)w);
        o.have_indent = true;
        o.indent = spaces;
        o.indent_len = (size_t)w;
    } else if (a[1].kind == JV_STR) {
        o.have_indent = true;
        o.indent = jv_str_of(a[1])->data;
        o.indent_len = jv_str_of(a[1])->len;
    } else if (a[1].kind != JV_UNDEF && a[1].kind != JV_NONE) {
        return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "tojson indent must be int or str");
    }
    /* Python's defaults: ", " without indent, "," with it (lines end there). */
    o.item_sep = o.have_indent ? "," : ", ";
    o.item_sep_len = o.have_indent ? 1 : 2;
    o.key_sep = ": ";
    o.key_sep_len = 2;
    if (a[2].kind == JV_LIST && jv_list_of(a[2])->n == 2 &&
        jv_list_of(a[2])->items[0].kind == JV_STR && jv_list_of(a[2])->items[1].kind == JV_STR) {
        const jlist *s = jv_list_of(a[2]);
        o.item_sep = jv_str_of(s->items[0])->data;
        o.item_sep_len = jv_str_of(s->items[0])->len;
        o.key_sep = jv_str_of(s->items[1])->data;
        o.key_sep_len = jv_str_of(s->items[1])->len;
    } else if (a[2].kind != JV_UNDEF && a[2].kind != JV_NONE) {
        return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT,
                       "tojson separators must be a pair of strings");
    }
    jbuf b = {0};
    if (!jv_tojson(c->r, c->at, &b, c->in, &o)) {
        jbuf_release(c->r, &b);
        return false;
    }
    return jbuf_to_str(c->r, c->at, &b, out);
}

static bool f_length(const fctx *c, jv *out)
{
    BIND("");
    switch (c->in.kind) {
    case JV_STR: *out = jv_int((int64_t)ju_count(jv_str_of(c->in))); return true;
    case JV_LIST: *out = jv_int((int64_t)jv_list_of(c->in)->n); return true;
    case JV_DICT:
    case JV_NS: *out = jv_int((int64_t)jv_dict_of(c->in)->n); return true;
    case JV_UNDEF: *out = jv_int(0); return true;
    default:
        return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "object of type '%s' has no len()",
                       jv_type_name(c->in));
    }
}

static bool f_default(const fctx *c, jv *out)
{
    BIND("default_value", "boolean");
    bool use = c->in.kind == JV_UNDEF || (jv_truthy(a[1]) && !jv_truthy(c->in));
    if (!use) {
        *out = jv_ref(c->in);
        return true;
    }
    if (a[0].kind == JV_UNDEF && c->nargs == 0)
        return jv_new_str(c->r, c->at, "", 0, out);
    *out = jv_ref(a[0]);
    return true;
}

static bool f_join(const fctx *c, jv *out)
{
    BIND("d", "attribute");
    jv list;
    if (!as_list(c, c->in, &list))
        return false;
    jv sep = jv_undef();
    bool ok = a[0].kind == JV_UNDEF ? true : to_str(c, a[0], &sep);
    jbuf b = {0};
    const jlist *l = jv_list_of(list);
    for (size_t i = 0; ok && i < l->n; i++) {
        if (i && sep.kind == JV_STR)
            ok = jbuf_put(c->r, c->at, &b, jv_str_of(sep)->data, jv_str_of(sep)->len);
        if (!ok)
            break;
        if (a[1].kind != JV_UNDEF) {
            jv v;
            ok = get_path(c, l->items[i], a[1], &v) && jv_str_append(c->r, c->at, &b, v);
            jv_decref(c->r, v);
        } else {
            ok = jv_str_append(c->r, c->at, &b, l->items[i]);
        }
    }
    jv_decref(c->r, sep);
    jv_decref(c->r, list);
    if (!ok) {
        jbuf_release(c->r, &b);
        return false;
    }
    return jbuf_to_str(c->r, c->at, &b, out);
}

static bool f_first_last(const fctx *c, bool last, jv *out)
{
    BIND("");
    jv list;
    if (!as_list(c, c->in, &list))
        return false;
    const jlist *l = jv_list_of(list);
    *out = l->n ? jv_ref(l->items[last ? l->n - 1 : 0]) : jv_undef();
    jv_decref(c->r, list);
    return true;
}

static bool f_items(const fctx *c, jv *out)
{
    BIND("");
    if (c->in.kind == JV_UNDEF)
        return jv_new_list(c->r, c->at, 0, false, out);
    if (c->in.kind != JV_DICT && c->in.kind != JV_NS)
        return fail_type(c, c->in);
    const jdict *d = jv_dict_of(c->in);
    if (!jv_new_list(c->r, c->at, d->n, false, out))
        return false;
    for (size_t i = 0; i < d->n; i++) {
        jv t;
        if (!jv_new_list(c->r, c->at, 2, true, &t) ||
            !jlist_push(c->r, c->at, jv_list_of(t), jv_ref(d->keys[i])) ||
            !jlist_push(c->r, c->at, jv_list_of(t), jv_ref(d->vals[i])) ||
            !jlist_push(c->r, c->at, jv_list_of(*out), t))
            return false;
    }
    return true;
}

/* select/reject/selectattr/rejectattr. */
static bool f_select(const fctx *c, bool attr, bool keep, jv *out)
{
    size_t first = attr ? 1 : 0;
    if (c->nkw)
        return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "%s() takes no keyword arguments",
                       c->name);
    if (attr && c->nargs < 1)
        return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "%s() needs an attribute", c->name);
    const char *test = NULL;
    if (c->nargs > first) {
        if (c->args[first].kind != JV_STR)
            return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "%s() test name must be a string",
                           c->name);
        test = jv_str_of(c->args[first])->data;
        if (!jtest_exists(test))
            return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "no test named '%.40s'", test);
    }
    jv list;
    if (!as_list(c, c->in, &list))
        return false;
    const jlist *l = jv_list_of(list);
    bool ok = jv_new_list(c->r, c->at, 0, false, out);
    for (size_t i = 0; ok && i < l->n; i++) {
        jv v = jv_undef();
        bool res;
        ok = jr_step(c->r, c->at) &&
             (attr ? get_path(c, l->items[i], c->args[0], &v) : (v = jv_ref(l->items[i]), true));
        if (ok) {
            if (test)
                ok = jtest_call(c->r, c->at, test, v, c->args + first + 1,
                                c->nargs - first - 1, &res);
            else
                res = jv_truthy(v);
        }
        jv_decref(c->r, v);
        if (ok && res == keep)
            ok = jlist_push(c->r, c->at, jv_list_of(*out), jv_ref(l->items[i]));
    }
    jv_decref(c->r, list);
    return ok;
}

static bool f_map(const fctx *c, jv *out)
{
    jv list;
    if (!as_list(c, c->in, &list))
        return false;
    const jlist *l = jv_list_of(list);
    jv attribute = jv_undef(), dflt = jv_undef();
    bool by_attr = false;
    for (size_t k = 0; k < c->nkw; k++) {
        if (!strcmp(c->kwn[k], "attribute")) {
            attribute = c->kwv[k];
            by_attr = true;
        } else if (!strcmp(c->kwn[k], "default")) {
            dflt = c->kwv[k];
        } else if (c->nargs == 0) {
            jv_decref(c->r, list);
            return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT,
                           "map() got an unexpected keyword argument '%s'", c->kwn[k]);
        }
    }
    if (!by_attr && (c->nargs == 0 || c->args[0].kind != JV_STR)) {
        jv_decref(c->r, list);
        return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT,
                       "map() needs a filter name or attribute=");
    }
    bool ok = jv_new_list(c->r, c->at, l->n, false, out);
    for (size_t i = 0; ok && i < l->n; i++) {
        jv v = jv_undef();
        ok = jr_step(c->r, c->at);
        if (ok && by_attr) {
            ok = get_path(c, l->items[i], attribute, &v);
            if (ok && v.kind == JV_UNDEF && dflt.kind != JV_UNDEF)
                v = jv_ref(dflt);
        } else if (ok) {
            ok = jfilter_call(c->r, c->at, jv_str_of(c->args[0])->data, l->items[i],
                              c->args + 1, c->nargs - 1, c->kwn, c->kwv, c->nkw, &v);
        }
        if (ok)
            ok = jlist_push(c->r, c->at, jv_list_of(*out), v);
        else
            jv_decref(c->r, v);
    }
    jv_decref(c->r, list);
    return ok;
}

static bool f_unique(const fctx *c, jv *out)
{
    BIND("case_sensitive", "attribute");
    jv list;
    if (!as_list(c, c->in, &list))
        return false;
    const jlist *l = jv_list_of(list);
    jv seen;
    bool ok = jv_new_list(c->r, c->at, 0, false, &seen) &&
              jv_new_list(c->r, c->at, 0, false, out);
    for (size_t i = 0; ok && i < l->n; i++) {
        jv k = jv_undef(), key = jv_undef();
        ok = jr_step(c->r, c->at) &&
             (a[1].kind == JV_UNDEF ? (k = jv_ref(l->items[i]), true)
                                     : get_path(c, l->items[i], a[1], &k)) &&
             lower_key(c, k, jv_truthy(a[0]), &key);
        jv_decref(c->r, k);
        if (!ok)
            break;
        bool dup = false;
        const jlist *s = jv_list_of(seen);
        for (size_t j = 0; j < s->n && !dup; j++)
            dup = jv_equal(s->items[j], key);
        if (dup) {
            jv_decref(c->r, key);
            continue;
        }
        ok = jlist_push(c->r, c->at, jv_list_of(seen), key) &&
             jlist_push(c->r, c->at, jv_list_of(*out), jv_ref(l->items[i]));
    }
    jv_decref(c->r, seen);
    jv_decref(c->r, list);
    return ok;
}

static bool f_sort(const fctx *c, jv *out)
{
    BIND("reverse", "case_sensitive", "attribute");
    jv list;
    if (!as_list(c, c->in, &list))
        return false;
    bool ok = sorted(c, jv_list_of(list), a[2], jv_truthy(a[1]), jv_truthy(a[0]), out);
    jv_decref(c->r, list);
    return ok;
}

static bool f_dictsort(const fctx *c, jv *out)
{
    BIND("case_sensitive", "by", "reverse");
    jv items;
    fctx ic = *c;
    ic.nargs = ic.nkw = 0;
    ic.name = "items";
    if (!f_items(&ic, &items))
        return false;
    bool by_value = a[1].kind == JV_STR && !strcmp(jv_str_of(a[1])->data, "value");
    bool ok = sorted(c, jv_list_of(items), jv_int(by_value ? 1 : 0), jv_truthy(a[0]),
                     jv_truthy(a[2]), out);
    jv_decref(c->r, items);
    return ok;
}

static bool f_minmax(const fctx *c, bool max, jv *out)
{
    BIND("case_sensitive", "attribute");
    jv list, s;
    if (!as_list(c, c->in, &list))
        return false;
    bool ok = sorted(c, jv_list_of(list), a[1], jv_truthy(a[0]), false, &s);
    jv_decref(c->r, list);
    if (!ok)
        return false;
    const jlist *l = jv_list_of(s);
    *out = l->n ? jv_ref(l->items[max ? l->n - 1 : 0]) : jv_undef();
    jv_decref(c->r, s);
    return true;
}

static bool f_sum(const fctx *c, jv *out)
{
    BIND("attribute", "start");
    jv list;
    if (!as_list(c, c->in, &list))
        return false;
    jv acc = a[1].kind == JV_UNDEF ? jv_int(0) : jv_ref(a[1]);
    const jlist *l = jv_list_of(list);
    bool ok = true;
    for (size_t i = 0; ok && i < l->n; i++) {
        jv v = jv_undef();
        ok = a[0].kind == JV_UNDEF ? (v = jv_ref(l->items[i]), true)
                                   : get_path(c, l->items[i], a[0], &v);
        if (ok && (!jv_is_num(v) || !jv_is_num(acc)))
            ok = jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "sum() needs numbers");
        if (ok) {
            if (acc.kind == JV_FLOAT || v.kind == JV_FLOAT) {
                double x = acc.kind == JV_FLOAT ? acc.u.f : acc.kind == JV_INT ? (double)acc.u.i : acc.u.b;
                double y = v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : v.u.b;
                acc = jv_float(x + y);
            } else {
                int64_t x = acc.kind == JV_INT ? acc.u.i : acc.u.b;
                int64_t y = v.kind == JV_INT ? v.u.i : v.u.b, z;
                if (__builtin_add_overflow(x, y, &z))
                    ok = jr_fail(c->r, c->at, TW_OUT_OF_RANGE, "integer overflow");
                acc = jv_int(z);
            }
        }
        jv_decref(c->r, v);
    }
    jv_decref(c->r, list);
    *out = ok ? acc : jv_undef();
    return ok;
}

static bool f_int(const fctx *c, jv *out)
{
    BIND("default", "base");
    int64_t dflt = 0, base = 0;
    if (!arg_int(c, a[0], 0, &dflt) || !arg_int(c, a[1], 10, &base))
        return false;
    jv v = c->in;
    *out = jv_int(dflt);
    if (v.kind == JV_INT || v.kind == JV_BOOL) {
        *out = jv_int(v.kind == JV_INT ? v.u.i : v.u.b);
    } else if (v.kind == JV_FLOAT) {
        if (v.u.f == v.u.f && fabs(v.u.f) < 9.2e18)
            *out = jv_int((int64_t)v.u.f);
    } else if (v.kind == JV_STR) {
        const jstr *s = jv_str_of(v);
        char buf[64];
        size_t n = 0;
        for (size_t i = 0; i < s->len && n + 1 < sizeof buf; i++)
            if (s->data[i] != '_')
                buf[n++] = s->data[i];
        buf[n] = '\0';
        char *end;
        long long x = strtoll(buf, &end, (int)(base >= 2 && base <= 36 ? base : 10));
        while (*end == ' ' || *end == '\t' || *end == '\n')
            end++;
        if (end != buf && *end == '\0' && s->len < sizeof buf) {
            *out = jv_int(x);
        } else {
            double f = strtod(buf, &end);
            while (*end == ' ' || *end == '\t' || *end == '\n')
                end++;
            if (end != buf && *end == '\0' && f == f && fabs(f) < 9.2e18)
                *out = jv_int((int64_t)f);
        }
    }
    return true;
}

static bool f_float(const fctx *c, jv *out)
{
    BIND("default");
    jv v = c->in;
    *out = a[0].kind == JV_UNDEF ? jv_float(0.0) : jv_ref(a[0]);
    if (v.kind == JV_INT || v.kind == JV_BOOL) {
        *out = jv_float(v.kind == JV_INT ? (double)v.u.i : v.u.b);
    } else if (v.kind == JV_FLOAT) {
        *out = v;
    } else if (v.kind == JV_STR) {
        const jstr *s = jv_str_of(v);
        char *end;
        double f = strtod(s->data, &end);
        while (*end == ' ' || *end == '\t' || *end == '\n')
            end++;
        if (end != s->data && (size_t)(end - s->data) == s->len) {
            jv_decref(c->r, *out);
            *out = jv_float(f);
        }
    }
    return true;
}

static bool f_indent(const fctx *c, jv *out)
{
    BIND("width", "first", "blank");
    jv ind = jv_undef(), s = jv_undef(), lines = jv_undef();
    bool ok = true;
    if (a[0].kind == JV_STR) {
        ind = jv_ref(a[0]);
    } else {
        int64_t w = 0;
        ok = arg_int(c, a[0], 4, &w);
        if (ok && (w < 0 || w > 4096))
            w = w < 0 ? 0 : 4096;
        char spaces[4096];
        if (ok) {
            memset(spaces, ' ', (size_t)w);
            ok = jv_new_str(c->r, c->at, spaces, (size_t)w, &ind);
        }
    }
    jbuf text = {0};
    ok = ok && jv_str_append(c->r, c->at, &text, c->in) && jbuf_put(c->r, c->at, &text, "\n", 1) &&
         jbuf_to_str(c->r, c->at, &text, &s) &&
         jstr_splitlines(c->r, c->at, jv_str_of(s), false, &lines);
    if (!ok) {
        jbuf_release(c->r, &text);
        jv_decref(c->r, ind);
        jv_decref(c->r, s);
        return false;
    }
    const jlist *l = jv_list_of(lines);
    const jstr *is = jv_str_of(ind);
    bool blank = jv_truthy(a[2]);
    jbuf b = {0};
    if (jv_truthy(a[1]))
        ok = jbuf_put(c->r, c->at, &b, is->data, is->len);
    for (size_t i = 0; ok && i < l->n; i++) {
        const jstr *line = jv_str_of(l->items[i]);
        if (i) {
            ok = jbuf_put(c->r, c->at, &b, "\n", 1);
            if (ok && (blank || line->len))
                ok = jbuf_put(c->r, c->at, &b, is->data, is->len);
        }
        ok = ok && jbuf_put(c->r, c->at, &b, line->data, line->len);
    }
    jv_decref(c->r, lines);
    jv_decref(c->r, ind);
    jv_decref(c->r, s);
    if (!ok) {
        jbuf_release(c->r, &b);
        return false;
    }
    return jbuf_to_str(c->r, c->at, &b, out);
}

static bool f_escape(const fctx *c, jv *out)
{
    BIND("");
    jv s;
    if (!to_str(c, c->in, &s))
        return false;
    const jstr *x = jv_str_of(s);
    jbuf b = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < x->len; i++) {
        const char *rep = NULL;
        switch (x->data[i]) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&#34;"; break;
        case '\'': rep = "&#39;"; break;
        }
        ok = rep ? jbuf_put(c->r, c->at, &b, rep, strlen(rep))
                 : jbuf_put(c->r, c->at, &b, x->data + i, 1);
    }
    jv_decref(c->r, s);
    if (!ok) {
        jbuf_release(c->r, &b);
        return false;
    }
    return jbuf_to_str(c->r, c->at, &b, out);
}

static bool f_truncate(const fctx *c, jv *out)
{
    BIND("length", "killwords", "end", "leeway");
    int64_t length = 0, leeway = 0;
    if (!arg_int(c, a[0], 255, &length) || !arg_int(c, a[3], 5, &leeway))
        return false;
    jv s, end;
    if (!to_str(c, c->in, &s))
        return false;
    if (a[2].kind == JV_STR)
        end = jv_ref(a[2]);
    else if (!jv_new_str(c->r, c->at, "...", 3, &end)) {
        jv_decref(c->r, s);
        return false;
    }
    const jstr *x = jv_str_of(s), *e = jv_str_of(end);
    int64_t n = (int64_t)ju_count(x), el = (int64_t)ju_count(e);
    bool ok = true;
    if (length < el) {
        ok = jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "expected length >= %lld, got %lld",
                     (long long)el, (long long)length);
    } else if (n <= length + leeway) {
        *out = jv_ref(s);
    } else {
        size_t cut = ju_offset(x, (size_t)(length - el));
        if (!jv_truthy(a[1])) {
            /* rsplit(" ", 1)[0]: drop the partial last word */
            for (size_t k = cut; k-- > 0;)
                if (x->data[k] == ' ') {
                    cut = k;
                    break;
                }
        }
        jbuf b = {0};
        ok = jbuf_put(c->r, c->at, &b, x->data, cut) &&
             jbuf_put(c->r, c->at, &b, e->data, e->len) && jbuf_to_str(c->r, c->at, &b, out);
        if (!ok)
            jbuf_release(c->r, &b);
    }
    jv_decref(c->r, s);
    jv_decref(c->r, end);
    return ok;
}

static bool f_round(const fctx *c, jv *out)
{
    BIND("precision", "method");
    int64_t prec = 0;
    if (!arg_int(c, a[0], 0, &prec))
        return false;
    if (!jv_is_num(c->in))
        return fail_type(c, c->in);
    double x = c->in.kind == JV_FLOAT ? c->in.u.f : c->in.kind == JV_INT ? (double)c->in.u.i : c->in.u.b;
    double m = pow(10.0, (double)(prec < -300 ? -300 : prec > 300 ? 300 : prec));
    const char *method = a[1].kind == JV_STR ? jv_str_of(a[1])->data : "common";
    if (c->in.kind != JV_FLOAT && prec >= 0 && !strcmp(method, "common")) {
        /* Python's round() of an int is that int */
        *out = jv_int(c->in.kind == JV_INT ? c->in.u.i : c->in.u.b);
        return true;
    }
    double v;
    if (!strcmp(method, "common"))
        v = nearbyint(x * m) / m;
    else if (!strcmp(method, "floor"))
        v = floor(x * m) / m;
    else if (!strcmp(method, "ceil"))
        v = ceil(x * m) / m;
    else
        return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT,
                       "method must be common, ceil or floor");
    *out = jv_float(v);
    return true;
}

static bool f_wordcount(const fctx *c, jv *out)
{
    BIND("");
    jv s;
    if (!to_str(c, c->in, &s))
        return false;
    const jstr *x = jv_str_of(s);
    int64_t n = 0;
    bool in_word = false;
    for (size_t i = 0; i < x->len; i++) {
        unsigned char ch = (unsigned char)x->data[i];
        bool w = ch >= 0x80 || ch == '_' || (ch >= '0' && ch <= '9') ||
                 ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z');
        if (w && !in_word)
            n++;
        in_word = w;
    }
    jv_decref(c->r, s);
    *out = jv_int(n);
    return true;
}

/* Jinja2's title filter: a capital after spaces, dashes and brackets. */
static bool f_title(const fctx *c, jv *out)
{
    BIND("");
    jv s, low;
    if (!to_str(c, c->in, &s))
        return false;
    bool ok = jstr_case(c->r, c->at, jv_str_of(s), JCASE_LOWER, &low);
    jv_decref(c->r, s);
    if (!ok)
        return false;
    const jstr *x = jv_str_of(low);
    jbuf b = {0};
    bool start = true;
    for (size_t i = 0; ok && i < x->len;) {
        int32_t cp;
        size_t n = ju_decode(x->data + i, x->len - i, &cp);
        bool sep = ju_isspace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
        if (start && !sep) {
            jv one, up = jv_undef();
            ok = jv_new_str(c->r, c->at, x->data + i, n, &one) &&
                 jstr_case(c->r, c->at, jv_str_of(one), JCASE_UPPER, &up);
            jv_decref(c->r, one);
            if (ok)
                ok = jbuf_put(c->r, c->at, &b, jv_str_of(up)->data, jv_str_of(up)->len);
            jv_decref(c->r, up);
        } else {
            ok = jbuf_put(c->r, c->at, &b, x->data + i, n);
        }
        start = sep;
        i += n;
    }
    jv_decref(c->r, low);
    if (!ok) {
        jbuf_release(c->r, &b);
        return false;
    }
    return jbuf_to_str(c->r, c->at, &b, out);
}

static bool f_reverse(const fctx *c, jv *out)
{
    BIND("");
    if (c->in.kind == JV_STR)
        return jeval_slice(c->r, c->at, c->in, jv_none(), jv_none(), jv_int(-1), out);
    jv list;
    if (!as_list(c, c->in, &list))
        return false;
    const jlist *l = jv_list_of(list);
    bool ok = jv_new_list(c->r, c->at, l->n, false, out);
    for (size_t i = l->n; ok && i-- > 0;)
        ok = jlist_push(c->r, c->at, jv_list_of(*out), jv_ref(l->items[i]));
    jv_decref(c->r, list);
    return ok;
}

static bool f_string_op(const fctx *c, jv *out)
{
    const char *n = c->name;
    jv s;
    if (!strcmp(n, "string")) {
        BIND("");
        return to_str(c, c->in, out);
    }
    if (!strcmp(n, "format")) {
        if (c->nkw)
            return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT,
                           "format filter takes positional arguments only");
        if (!to_str(c, c->in, &s))
            return false;
        bool ok = jstr_percent(c->r, c->at, jv_str_of(s), c->args, c->nargs, out);
        jv_decref(c->r, s);
        return ok;
    }
    bool ok = true;
    if (!strcmp(n, "trim")) {
        BIND("chars");
        if (!to_str(c, c->in, &s))
            return false;
        ok = jstr_strip(c->r, c->at, jv_str_of(s),
                        a[0].kind == JV_STR ? jv_str_of(a[0]) : NULL, true, true, out);
    } else if (!strcmp(n, "replace")) {
        BIND("old", "new", "count");
        int64_t count = 0;
        if (a[0].kind != JV_STR || a[1].kind != JV_STR)
            return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "replace needs string arguments");
        if (!arg_int(c, a[2], -1, &count) || !to_str(c, c->in, &s))
            return false;
        ok = jstr_replace(c->r, c->at, jv_str_of(s), jv_str_of(a[0]), jv_str_of(a[1]), count,
                          out);
    } else if (!strcmp(n, "center")) {
        BIND("width");
        int64_t w = 0;
        if (!arg_int(c, a[0], 80, &w) || !to_str(c, c->in, &s))
            return false;
        jv fn;
        ok = jmethod_get(c->r, c->at, s, "center", &fn, &(bool){false}) &&
             jeval_call_value(c->r, c->at, fn, (jv[]){jv_int(w)}, 1, NULL, NULL, 0, out);
        jv_decref(c->r, fn);
    } else {
        BIND("");
        jcase k = !strcmp(n, "upper") ? JCASE_UPPER : !strcmp(n, "lower") ? JCASE_LOWER
                                                                          : JCASE_CAPITALIZE;
        if (!to_str(c, c->in, &s))
            return false;
        if (k == JCASE_CAPITALIZE) {
            jv low;
            ok = jstr_case(c->r, c->at, jv_str_of(s), JCASE_LOWER, &low) &&
                 jstr_case(c->r, c->at, jv_str_of(low), JCASE_CAPITALIZE, out);
            if (ok)
                jv_decref(c->r, low);
        } else {
            ok = jstr_case(c->r, c->at, jv_str_of(s), k, out);
        }
    }
    jv_decref(c->r, s);
    return ok;
}

static bool f_list(const fctx *c, jv *out)
{
    BIND("");
    jv l;
    if (!as_list(c, c->in, &l))
        return false;
    const jlist *x = jv_list_of(l);
    if (!x->tuple && l.u.o != c->in.u.o) {
        *out = l;
        return true;
    }
    bool ok = jv_new_list(c->r, c->at, x->n, false, out);
    for (size_t i = 0; ok && i < x->n; i++)
        ok = jlist_push(c->r, c->at, jv_list_of(*out), jv_ref(x->items[i]));
    jv_decref(c->r, l);
    return ok;
}

static bool f_attr(const fctx *c, jv *out)
{
    BIND("name");
    if (a[0].kind != JV_STR)
        return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "attr() needs a string name");
    return jeval_getattr(c->r, c->at, c->in, jv_str_of(a[0])->data, jv_str_of(a[0])->len, out);
}

static bool f_abs(const fctx *c, jv *out)
{
    BIND("");
    if (c->in.kind == JV_INT) {
        if (c->in.u.i == INT64_MIN)
            return jr_fail(c->r, c->at, TW_OUT_OF_RANGE, "integer overflow");
        *out = jv_int(c->in.u.i < 0 ? -c->in.u.i : c->in.u.i);
    } else if (c->in.kind == JV_BOOL) {
        *out = jv_int(c->in.u.b);
    } else if (c->in.kind == JV_FLOAT) {
        *out = jv_float(fabs(c->in.u.f));
    } else {
        return fail_type(c, c->in);
    }
    return true;
}

static bool f_batch(const fctx *c, jv *out)
{
    BIND("linecount", "fill_with");
    int64_t size = 0;
    if (!arg_int(c, a[0], 0, &size))
        return false;
    if (size <= 0)
        return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "batch size must be positive");
    jv list, row = jv_undef();
    if (!as_list(c, c->in, &list))
        return false;
    const jlist *l = jv_list_of(list);
    bool ok = jv_new_list(c->r, c->at, 0, false, out);
    for (size_t i = 0; ok && i < l->n; i++) {
        if (row.kind == JV_UNDEF)
            ok = jv_new_list(c->r, c->at, (size_t)size < l->n ? (size_t)size : l->n, false, &row);
        ok = ok && jlist_push(c->r, c->at, jv_list_of(row), jv_ref(l->items[i]));
        if (ok && jv_list_of(row)->n == (size_t)size) {
            ok = jlist_push(c->r, c->at, jv_list_of(*out), row);
            row = jv_undef();
        }
    }
    if (ok && row.kind != JV_UNDEF) {
        while (ok && a[1].kind != JV_UNDEF && jv_list_of(row)->n < (size_t)size)
            ok = jlist_push(c->r, c->at, jv_list_of(row), jv_ref(a[1]));
        ok = ok && jlist_push(c->r, c->at, jv_list_of(*out), row);
        row = jv_undef();
    }
    jv_decref(c->r, row);
    jv_decref(c->r, list);
    return ok;
}

static bool f_safe(const fctx *c, jv *out)
{
    BIND("");
    *out = jv_ref(c->in);
    return true;
}

/* ---- dispatch --------------------------------------------------------- */

static const char *const filter_names[] = {
    "tojson", "length", "count", "default", "d", "join", "first", "last", "items", "select",
    "reject", "selectattr", "rejectattr", "map", "unique", "sort", "dictsort", "min", "max",
    "sum", "int", "float", "indent", "escape", "e", "forceescape", "truncate", "round",
    "wordcount", "title", "reverse", "list", "attr", "abs", "safe", "string", "format", "trim",
    "replace", "center", "upper", "lower", "capitalize", "batch", NULL};

bool jfilter_exists(const char *name)
{
    for (size_t i = 0; filter_names[i]; i++)
        if (!strcmp(filter_names[i], name))
            return true;
    return false;
}

bool jfilter_call(jrender *r, const jnode *at, const char *name, jv in, const jv *args,
                  size_t nargs, const char *const *kwnames, const jv *kwvals, size_t nkw,
                  jv *out)
{
    fctx c = {r, at, name, in, args, nargs, kwnames, kwvals, nkw};
    *out = jv_undef();
    if (!jr_step(r, at))
        return false;
    const char *n = name;
    if (!strcmp(n, "tojson")) return f_tojson(&c, out);
    if (!strcmp(n, "length") || !strcmp(n, "count")) return f_length(&c, out);
    if (!strcmp(n, "default") || !strcmp(n, "d")) return f_default(&c, out);
    if (!strcmp(n, "join")) return f_join(&c, out);
    if (!strcmp(n, "first")) return f_first_last(&c, false, out);
    if (!strcmp(n, "last")) return f_first_last(&c, true, out);
    if (!strcmp(n, "items")) return f_items(&c, out);
    if (!strcmp(n, "select")) return f_select(&c, false, true, out);
    if (!strcmp(n, "reject")) return f_select(&c, false, false, out);
    if (!strcmp(n, "selectattr")) return f_select(&c, true, true, out);
    if (!strcmp(n, "rejectattr")) return f_select(&c, true, false, out);
    if (!strcmp(n, "map")) return f_map(&c, out);
    if (!strcmp(n, "unique")) return f_unique(&c, out);
    if (!strcmp(n, "sort")) return f_sort(&c, out);
    if (!strcmp(n, "dictsort")) return f_dictsort(&c, out);
    if (!strcmp(n, "min")) return f_minmax(&c, false, out);
    if (!strcmp(n, "max")) return f_minmax(&c, true, out);
    if (!strcmp(n, "sum")) return f_sum(&c, out);
    if (!strcmp(n, "int")) return f_int(&c, out);
    if (!strcmp(n, "float")) return f_float(&c, out);
    if (!strcmp(n, "indent")) return f_indent(&c, out);
    if (!strcmp(n, "escape") || !strcmp(n, "e") || !strcmp(n, "forceescape"))
        return f_escape(&c, out);
    if (!strcmp(n, "truncate")) return f_truncate(&c, out);
    if (!strcmp(n, "round")) return f_round(&c, out);
    if (!strcmp(n, "wordcount")) return f_wordcount(&c, out);
    if (!strcmp(n, "title")) return f_title(&c, out);
    if (!strcmp(n, "reverse")) return f_reverse(&c, out);
    if (!strcmp(n, "list")) return f_list(&c, out);
    if (!strcmp(n, "attr")) return f_attr(&c, out);
    if (!strcmp(n, "abs")) return f_abs(&c, out);
    if (!strcmp(n, "safe")) return f_safe(&c, out);
    if (!strcmp(n, "batch")) return f_batch(&c, out);
    if (!strcmp(n, "string") || !strcmp(n, "format") || !strcmp(n, "trim") ||
        !strcmp(n, "replace") || !strcmp(n, "center") || !strcmp(n, "upper") ||
        !strcmp(n, "lower") || !strcmp(n, "capitalize"))
        return f_string_op(&c, out);
    return jr_fail(r, at, TW_INVALID_ARGUMENT, "no filter named '%.60s'", name);
}
