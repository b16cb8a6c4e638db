/* Jinja2's builtin filters: the helpers they share, the filters over
 * sequences and mappings (length, join, select, map, sort, sum, batch...)
 * and the dispatch by name. Filters over strings and numbers are in
 * jinja_filters_text.c. */
#include "jinja_filter.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool jf_fail_type(const fctx *c, jv v)
{
    return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "filter '%s' cannot take a value of type %s",
                   c->name, jv_type_name(v));
}

/* str(v) of any value, as a string value with its own reference. */
bool jf_to_str(const fctx *c, jv v, jv *out)
{
    return jv_to_string(c->r, c->at, v, out);
}

bool jf_arg_int(const fctx *c, jv v, int64_t dflt, int64_t *out)
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
                goto fail;
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
                goto fail;
            i += n;
        }
        return true;
    }
    default:
        return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "'%s' object is not iterable",
                       jv_type_name(v));
    }
fail:
    /* Callers own *out only on success: a list cut off by a limit is freed here. */
    jv_decref(c->r, *out);
    *out = jv_undef();
    return false;
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
            if (digits) /* a path part too long for an index is looked up as a key */
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
    bool ok = a[0].kind == JV_UNDEF ? true : jf_to_str(c, a[0], &sep);
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
        return jf_fail_type(c, c->in);
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

static bool f_batch(const fctx *c, jv *out)
{
    BIND("linecount", "fill_with");
    int64_t size = 0;
    if (!jf_arg_int(c, a[0], 0, &size))
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
    if (!strcmp(n, "tojson")) return jf_tojson(&c, out);
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
    if (!strcmp(n, "int")) return jf_int(&c, out);
    if (!strcmp(n, "float")) return jf_float(&c, out);
    if (!strcmp(n, "indent")) return jf_indent(&c, out);
    if (!strcmp(n, "escape") || !strcmp(n, "e") || !strcmp(n, "forceescape"))
        return jf_escape(&c, out);
    if (!strcmp(n, "truncate")) return jf_truncate(&c, out);
    if (!strcmp(n, "round")) return jf_round(&c, out);
    if (!strcmp(n, "wordcount")) return jf_wordcount(&c, out);
    if (!strcmp(n, "title")) return jf_title(&c, out);
    if (!strcmp(n, "reverse")) return f_reverse(&c, out);
    if (!strcmp(n, "list")) return f_list(&c, out);
    if (!strcmp(n, "attr")) return f_attr(&c, out);
    if (!strcmp(n, "abs")) return jf_abs(&c, out);
    if (!strcmp(n, "safe")) return jf_safe(&c, out);
    if (!strcmp(n, "batch")) return f_batch(&c, out);
    if (!strcmp(n, "string") || !strcmp(n, "format") || !strcmp(n, "trim") ||
        !strcmp(n, "replace") || !strcmp(n, "center") || !strcmp(n, "upper") ||
        !strcmp(n, "lower") || !strcmp(n, "capitalize"))
        return jf_string_op(&c, out);
    return jr_fail(r, at, TW_INVALID_ARGUMENT, "no filter named '%.60s'", name);
}
