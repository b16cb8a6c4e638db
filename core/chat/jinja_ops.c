/* Value access and operators with Python's semantics: attribute and item
 * lookup with Jinja2's fallbacks, slicing by code point, integer arithmetic
 * that refuses to overflow, comparisons and membership. */
#include "jinja.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- attribute and item access ----------------------------------------- */

static bool loop_attr(jrender *r, const jnode *at, jv loopv, const char *name, jv *out,
                      bool *found)
{
    const jloop *l = jv_loop_of(loopv);
    size_t n = l->items->n, i = l->index0;
    *found = true;
    if (!strcmp(name, "index0"))
        *out = jv_int((int64_t)i);
    else if (!strcmp(name, "index"))
        *out = jv_int((int64_t)i + 1);
    else if (!strcmp(name, "revindex"))
        *out = jv_int((int64_t)(n - i));
    else if (!strcmp(name, "revindex0"))
        *out = jv_int((int64_t)(n - i - 1));
    else if (!strcmp(name, "first"))
        *out = jv_bool(i == 0);
    else if (!strcmp(name, "last"))
        *out = jv_bool(i + 1 == n);
    else if (!strcmp(name, "length"))
        *out = jv_int((int64_t)n);
    else if (!strcmp(name, "depth"))
        *out = jv_int(1);
    else if (!strcmp(name, "depth0"))
        *out = jv_int(0);
    else if (!strcmp(name, "previtem"))
        *out = i > 0 ? jv_ref(l->items->items[i - 1]) : jv_undef();
    else if (!strcmp(name, "nextitem"))
        *out = i + 1 < n ? jv_ref(l->items->items[i + 1]) : jv_undef();
    else
        return jmethod_get(r, at, loopv, name, out, found);
    return true;
}

bool jeval_getattr(jrender *r, const jnode *at, jv obj, const char *name, size_t len, jv *out)
{
    *out = jv_undef();
    bool found = false;
    switch (obj.kind) {
    case JV_NS: {
        const jv *v = jdict_get_str(jv_dict_of(obj), name, len);
        if (v)
            *out = jv_ref(*v);
        return true;
    }
    case JV_LOOP:
        return loop_attr(r, at, obj, name, out, &found);
    case JV_DICT: {
        if (!jmethod_get(r, at, obj, name, out, &found))
            return false;
        if (found)
            return true;
        const jv *v = jdict_get_str(jv_dict_of(obj), name, len);
        if (v)
            *out = jv_ref(*v);
        return true;
    }
    case JV_STR:
    case JV_LIST:
        return jmethod_get(r, at, obj, name, out, &found);
    default:
        return true;
    }
}

static bool index_of(jv key, size_t n, size_t *idx)
{
    if (key.kind != JV_INT && key.kind != JV_BOOL)
        return false;
    int64_t i = key.kind == JV_INT ? key.u.i : key.u.b;
    if (i < 0)
        i += (int64_t)n;
    if (i < 0 || (uint64_t)i >= n)
        return false;
    *idx = (size_t)i;
    return true;
}

bool jeval_getitem(jrender *r, const jnode *at, jv obj, jv key, jv *out)
{
    *out = jv_undef();
    size_t idx;
    switch (obj.kind) {
    case JV_DICT: {
        const jv *v = jdict_get(jv_dict_of(obj), key);
        if (v) {
            *out = jv_ref(*v);
            return true;
        }
        break;
    }
    case JV_LIST: {
        const jlist *l = jv_list_of(obj);
        if (index_of(key, l->n, &idx)) {
            *out = jv_ref(l->items[idx]);
            return true;
        }
        break;
    }
    case JV_STR: {
        const jstr *s = jv_str_of(obj);
        size_t n = ju_count(s);
        if (index_of(key, n, &idx)) {
            size_t a = ju_offset(s, idx), b = ju_offset(s, idx + 1);
            return jv_new_str(r, at, s->data + a, b - a, out);
        }
        break;
    }
    default:
        break;
    }
    if (key.kind == JV_STR && obj.kind != JV_UNDEF)
        return jeval_getattr(r, at, obj, jv_str_of(key)->data, jv_str_of(key)->len, out);
    return true;
}

static bool slice_index(jrender *r, const jnode *at, jv v, bool *given, int64_t *out)
{
    *given = false;
    if (v.kind == JV_UNDEF || v.kind == JV_NONE)
        return true;
    if (v.kind != JV_INT && v.kind != JV_BOOL)
        return jr_fail(r, at, TW_INVALID_ARGUMENT,
                       "slice indices must be integers or None, not %s", jv_type_name(v));
    *given = true;
    *out = v.kind == JV_INT ? v.u.i : v.u.b;
    return true;
}

bool jeval_slice(jrender *r, const jnode *at, jv obj, jv startv, jv stopv, jv stepv, jv *out)
{
    *out = jv_undef();
    if (obj.kind != JV_LIST && obj.kind != JV_STR)
        return obj.kind == JV_UNDEF ? true
                                    : jr_fail(r, at, TW_INVALID_ARGUMENT,
                                              "'%s' object is not subscriptable",
                                              jv_type_name(obj));
    bool gs, ge, gt;
    int64_t start = 0, stop = 0, step = 1;
    if (!slice_index(r, at, startv, &gs, &start) || !slice_index(r, at, stopv, &ge, &stop) ||
        !slice_index(r, at, stepv, &gt, &step))
        return false;
    if (!gt)
        step = 1;
    if (step == 0)
        return jr_fail(r, at, TW_INVALID_ARGUMENT, "slice step cannot be zero");
    if (step == INT64_MIN)
        step = -INT64_MAX;
    const jstr *s = obj.kind == JV_STR ? jv_str_of(obj) : NULL;
    int64_t n = (int64_t)(s ? ju_count(s) : jv_list_of(obj)->n);
    int64_t lower = step < 0 ? -1 : 0, upper = step < 0 ? n - 1 : n;
    if (!gs)
        start = step < 0 ? upper : lower;
    else {
        if (start < 0)
            start = start < -n ? lower : start + n;
        if (start < lower)
            start = lower;
        else if (start > upper)
            start = upper;
    }
    if (!ge)
        stop = step < 0 ? lower : upper;
    else {
        if (stop < 0)
            stop = stop < -n ? lower : stop + n;
        if (stop < lower)
            stop = lower;
        else if (stop > upper)
            stop = upper;
    }
    if (s) {
        /* Code point boundaries, so slices never split a character. */
        size_t *offs = NULL;
        if (!s->ascii) {
            if (!jr_charge(r, at, ((size_t)n + 1) * sizeof *offs))
                return false;
            offs = malloc(((size_t)n + 1) * sizeof *offs);
            if (!offs) {
                jr_uncharge(r, ((size_t)n + 1) * sizeof *offs);
                return jr_fail(r, at, TW_RESOURCE_EXHAUSTED, "out of memory");
            }
            size_t o = 0, k = 0;
            while (o < s->len) {
                offs[k++] = o;
                int32_t cp;
                o += ju_decode(s->data + o, s->len - o, &cp);
            }
            offs[k] = s->len;
        }
        jbuf b = {0};
        bool ok = true;
        for (int64_t i = start; ok && (step > 0 ? i < stop : i > stop); i += step) {
            size_t a = offs ? offs[i] : (size_t)i, e = offs ? offs[i + 1] : (size_t)i + 1;
            ok = jbuf_put(r, at, &b, s->data + a, e - a);
            if (step > 0 ? stop - i <= step : i - stop <= -step)
                break;
        }
        if (offs) {
            free(offs);
            jr_uncharge(r, ((size_t)n + 1) * sizeof *offs);
        }
        if (!ok) {
            jbuf_release(r, &b);
            return false;
        }
        return jbuf_to_str(r, at, &b, out);
    }
    const jlist *l = jv_list_of(obj);
    if (!jv_new_list(r, at, 0, l->tuple, out))
        return false;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (!jlist_push(r, at, jv_list_of(*out), jv_ref(l->items[i])))
            return false;
        if (step > 0 ? stop - i <= step : i - stop <= -step)
            break;
    }
    return true;
}

/* ---- operators -------------------------------------------------------- */

static bool arith_int(jrender *r, const jnode *at, jop op, int64_t a, int64_t b, jv *out)
{
    int64_t v;
    switch (op) {
    case JOP_ADD:
        if (__builtin_add_overflow(a, b, &v))
            goto overflow;
        break;
    case JOP_SUB:
        if (__builtin_sub_overflow(a, b, &v))
            goto overflow;
        break;
    case JOP_MUL:
        if (__builtin_mul_overflow(a, b, &v))
            goto overflow;
        break;
    case JOP_DIV:
        if (b == 0)
            return jr_fail(r, at, TW_INVALID_ARGUMENT, "division by zero");
        *out = jv_float((double)a / (double)b);
        return true;
    case JOP_FLOORDIV:
    case JOP_MOD: {
        if (b == 0)
            return jr_fail(r, at, TW_INVALID_ARGUMENT, "integer division or modulo by zero");
        if (a == INT64_MIN && b == -1) {
            if (op == JOP_MOD) {
                *out = jv_int(0);
                return true;
            }
            goto overflow;
        }
        int64_t q = a / b, m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) {
            q--;
            m += b;
        }
        v = op == JOP_MOD ? m : q;
        break;
    }
    case JOP_POW: {
        if (b < 0) {
            *out = jv_float(pow((double)a, (double)b));
            return true;
        }
        v = 1;
        int64_t base = a;
        for (int64_t e = b; e > 0; e >>= 1) {
            if ((e & 1) && __builtin_mul_overflow(v, base, &v))
                goto overflow;
            if (e > 1 && __builtin_mul_overflow(base, base, &base))
                goto overflow;
        }
        break;
    }
    default:
        return jr_fail(r, at, TW_INTERNAL, "bad arithmetic operator");
    }
    *out = jv_int(v);
    return true;
overflow:
    return jr_fail(r, at, TW_OUT_OF_RANGE, "integer overflow");
}

static double as_f(jv v)
{
    return v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : (double)v.u.b;
}

static const char *op_text(jop op)
{
    static const char *const t[] = {"?", "+", "-", "*", "/", "//", "%", "**", "~"};
    return op <= JOP_CONCAT ? t[op] : "?";
}

static bool repeat(jrender *r, const jnode *at, jv seq, int64_t times, jv *out)
{
    if (times < 0)
        times = 0;
    if (seq.kind == JV_STR) {
        const jstr *s = jv_str_of(seq);
        if (s->len && (uint64_t)times > r->lim->max_live_bytes / s->len)
            return jr_fail(r, at, TW_RESOURCE_EXHAUSTED, "repeated string exceeds the limit");
        jbuf b = {0};
        for (int64_t i = 0; i < times; i++)
            if (!jbuf_put(r, at, &b, s->data, s->len)) {
                jbuf_release(r, &b);
                return false;
            }
        return jbuf_to_str(r, at, &b, out);
    }
    const jlist *l = jv_list_of(seq);
    if (l->n && (uint64_t)times > r->lim->max_live_bytes / sizeof(jv) / l->n)
        return jr_fail(r, at, TW_RESOURCE_EXHAUSTED, "repeated list exceeds the limit");
    if (!jv_new_list(r, at, l->n * (size_t)times, l->tuple, out))
        return false;
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < l->n; k++)
            if (!jr_step(r, at) || !jlist_push(r, at, jv_list_of(*out), jv_ref(l->items[k])))
                return false;
    return true;
}

bool jeval_binop(jrender *r, const jnode *at, jop op, jv a, jv b, jv *out)
{
    *out = jv_undef();
    if (op == JOP_CONCAT) {
        jbuf buf = {0};
        if (!jv_str_append(r, at, &buf, a) || !jv_str_append(r, at, &buf, b)) {
            jbuf_release(r, &buf);
            return false;
        }
        return jbuf_to_str(r, at, &buf, out);
    }
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.kind != JV_FLOAT && b.kind != JV_FLOAT)
            return arith_int(r, at, op, a.kind == JV_INT ? a.u.i : a.u.b,
                             b.kind == JV_INT ? b.u.i : b.u.b, out);
        double x = as_f(a), y = as_f(b), v;
        switch (op) {
        case JOP_ADD: v = x + y; break;
        case JOP_SUB: v = x - y; break;
        case JOP_MUL: v = x * y; break;
        case JOP_DIV:
            if (y == 0)
                return jr_fail(r, at, TW_INVALID_ARGUMENT, "float division by zero");
            v = x / y;
            break;
        case JOP_FLOORDIV:
            if (y == 0)
                return jr_fail(r, at, TW_INVALID_ARGUMENT, "float floor division by zero");
            v = floor(x / y);
            break;
        case JOP_MOD:
            if (y == 0)
                return jr_fail(r, at, TW_INVALID_ARGUMENT, "float modulo by zero");
            v = fmod(x, y);
            if (v != 0 && ((v < 0) != (y < 0)))
                v += y;
            break;
        case JOP_POW: v = pow(x, y); break;
        default: return jr_fail(r, at, TW_INTERNAL, "bad arithmetic operator");
        }
        *out = jv_float(v);
        return true;
    }
    if (op == JOP_ADD && a.kind == JV_STR && b.kind == JV_STR) {
        jbuf buf = {0};
        if (!jbuf_put(r, at, &buf, jv_str_of(a)->data, jv_str_of(a)->len) ||
            !jbuf_put(r, at, &buf, jv_str_of(b)->data, jv_str_of(b)->len)) {
            jbuf_release(r, &buf);
            return false;
        }
        return jbuf_to_str(r, at, &buf, out);
    }
    if (op == JOP_ADD && a.kind == JV_LIST && b.kind == JV_LIST &&
        jv_list_of(a)->tuple == jv_list_of(b)->tuple) {
        const jlist *x = jv_list_of(a), *y = jv_list_of(b);
        if (!jv_new_list(r, at, x->n + y->n, x->tuple, out))
            return false;
        for (size_t i = 0; i < x->n; i++)
            if (!jlist_push(r, at, jv_list_of(*out), jv_ref(x->items[i])))
                return false;
        for (size_t i = 0; i < y->n; i++)
            if (!jlist_push(r, at, jv_list_of(*out), jv_ref(y->items[i])))
                return false;
        return true;
    }
    if (op == JOP_MUL && (a.kind == JV_STR || a.kind == JV_LIST) &&
        (b.kind == JV_INT || b.kind == JV_BOOL))
        return repeat(r, at, a, b.kind == JV_INT ? b.u.i : b.u.b, out);
    if (op == JOP_MUL && (b.kind == JV_STR || b.kind == JV_LIST) &&
        (a.kind == JV_INT || a.kind == JV_BOOL))
        return repeat(r, at, b, a.kind == JV_INT ? a.u.i : a.u.b, out);
    if (op == JOP_MOD && a.kind == JV_STR) {
        /* printf-style formatting: a tuple supplies several arguments. */
        if (b.kind == JV_LIST && jv_list_of(b)->tuple)
            return jfilter_call(r, at, "format", a, jv_list_of(b)->items, jv_list_of(b)->n,
                                NULL, NULL, 0, out);
        return jfilter_call(r, at, "format", a, &b, 1, NULL, NULL, 0, out);
    }
    if (a.kind == JV_UNDEF || b.kind == JV_UNDEF)
        return jr_fail(r, at, TW_INVALID_ARGUMENT, "an undefined value was used with '%s'",
                       op_text(op));
    return jr_fail(r, at, TW_INVALID_ARGUMENT,
                   "unsupported operand type(s) for %s: '%s' and '%s'", op_text(op),
                   jv_type_name(a), jv_type_name(b));
}

static bool contains(jrender *r, const jnode *at, jv item, jv seq, bool *out)
{
    *out = false;
    switch (seq.kind) {
    case JV_UNDEF:
        return true;
    case JV_STR: {
        if (item.kind != JV_STR)
            return jr_fail(r, at, TW_INVALID_ARGUMENT,
                           "'in <string>' requires string as left operand, not %s",
                           jv_type_name(item));
        const jstr *h = jv_str_of(seq), *n = jv_str_of(item);
        *out = n->len == 0 || memmem(h->data, h->len, n->data, n->len) != NULL;
        return true;
    }
    case JV_LIST: {
        const jlist *l = jv_list_of(seq);
        for (size_t i = 0; i < l->n && !*out; i++)
            *out = jv_equal(l->items[i], item);
        return true;
    }
    case JV_DICT:
    case JV_NS:
        *out = jdict_get(jv_dict_of(seq), item) != NULL;
        return true;
    default:
        return jr_fail(r, at, TW_INVALID_ARGUMENT, "argument of type '%s' is not iterable",
                       jv_type_name(seq));
    }
}

bool jeval_compare(jrender *r, const jnode *at, jop op, jv a, jv b, bool *out)
{
    int c;
    switch (op) {
    case JOP_EQ: *out = jv_equal(a, b); return true;
    case JOP_NE: *out = !jv_equal(a, b); return true;
    case JOP_IN: return contains(r, at, a, b, out);
    case JOP_NOTIN:
        if (!contains(r, at, a, b, out))
            return false;
        *out = !*out;
        return true;
    default:
        break;
    }
    if (!jv_compare(r, at, a, b, &c))
        return false;
    *out = op == JOP_LT ? c < 0 : op == JOP_LE ? c <= 0 : op == JOP_GT ? c > 0 : c >= 0;
    return true;
}

