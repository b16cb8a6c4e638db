/* The interpreter's value model: reference-counted strings, lists, dicts
 * and namespaces with Python's equality, ordering and truthiness, plus the
 * accounting that keeps a hostile template inside its budgets. */
#include "jinja.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ------------------------------------------------------------ */

struct jarena_block {
    jarena_block *next;
    size_t used, cap;
    max_align_t data[];
};

void *jarena_alloc(jarena *a, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    jarena_block *b = a->head;
    if (!b || b->cap - b->used < size) {
        size_t cap = size > 16384 ? size : 16384;
        b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += size;
    memset(p, 0, size);
    return p;
}

void jarena_free(jarena *a)
{
    jarena_block *b = a->head;
    while (b) {
        jarena_block *n = b->next;
        free(b);
        b = n;
    }
    a->head = NULL;
}

/* ---- errors and budgets ----------------------------------------------- */

bool jr_fail(jrender *r, const jnode *at, tw_status code, const char *fmt, ...)
{
    if (r->status != TW_OK)
        return false;
    r->status = code;
    if (r->err) {
        char msg[TW_ERR_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (at)
            tw_errorf(r->err, code, "chat template line %d, column %d: %s", at->line, at->col,
                      msg);
        else
            tw_errorf(r->err, code, "chat template: %s", msg);
    }
    return false;
}

bool jr_raise(jrender *r, const char *msg, size_t len)
{
    if (r->status != TW_OK)
        return false;
    r->status = TW_INVALID_ARGUMENT;
    if (r->err)
        tw_errorf(r->err, TW_INVALID_ARGUMENT, "%.*s", (int)(len < 4096 ? len : 4096), msg);
    return false;
}

bool jr_step(jrender *r, const jnode *at)
{
    if (++r->steps > r->lim->max_steps)
        return jr_fail(r, at, TW_RESOURCE_EXHAUSTED,
                       "template exceeds its work limit of %llu steps",
                       (unsigned long long)r->lim->max_steps);
    return true;
}

bool jr_charge(jrender *r, const jnode *at, size_t bytes)
{
    if (bytes > r->lim->max_live_bytes || r->live_bytes > r->lim->max_live_bytes - bytes)
        return jr_fail(r, at, TW_RESOURCE_EXHAUSTED,
                       "template exceeds its memory limit of %zu bytes", r->lim->max_live_bytes);
    r->live_bytes += bytes;
    return true;
}

void jr_uncharge(jrender *r, size_t bytes)
{
    r->live_bytes = bytes > r->live_bytes ? 0 : r->live_bytes - bytes;
}

static bool jr_work(jrender *r, const jnode *at, size_t bytes)
{
    r->work_bytes += bytes;
    if (r->work_bytes > r->lim->max_work_bytes)
        return jr_fail(r, at, TW_RESOURCE_EXHAUSTED,
                       "template exceeds its limit of %llu bytes of string work",
                       (unsigned long long)r->lim->max_work_bytes);
    return true;
}

static void *jr_malloc(jrender *r, const jnode *at, size_t bytes)
{
    if (!jr_charge(r, at, bytes))
        return NULL;
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        jr_uncharge(r, bytes);
        jr_fail(r, at, TW_RESOURCE_EXHAUSTED, "out of memory");
    }
    return p;
}

/* ---- reference counting ----------------------------------------------- */

void jv_incref(jv v)
{
    if (jv_is_obj(v) && v.u.o->refs != JOBJ_IMMORTAL)
        v.u.o->refs++;
}

static void jobj_free(jrender *r, jobj *o, jkind kind)
{
    switch (kind) {
    case JV_STR: {
        jstr *s = (jstr *)o;
        jr_uncharge(r, sizeof *s + s->len + 1);
        break;
    }
    case JV_LIST: {
        jlist *l = (jlist *)o;
        for (size_t i = 0; i < l->n; i++)
            jv_decref(r, l->items[i]);
        jr_uncharge(r, sizeof *l + l->cap * sizeof(jv));
        free(l->items);
        break;
    }
    case JV_DICT:
    case JV_NS: {
        jdict *d = (jdict *)o;
        for (size_t i = 0; i < d->n; i++) {
            jv_decref(r, d->keys[i]);
            jv_decref(r, d->vals[i]);
        }
        jr_uncharge(r, sizeof *d + d->cap * 2 * sizeof(jv));
        free(d->keys);
        free(d->vals);
        break;
    }
    case JV_FUNC: {
        jfunc *f = (jfunc *)o;
        jv_decref(r, f->self);
        jr_uncharge(r, sizeof *f);
        break;
    }
    case JV_LOOP: {
        jloop *l = (jloop *)o;
        jv_decref(r, (jv){.kind = JV_LIST, .u.o = (jobj *)&l->items->h});
        jr_uncharge(r, sizeof *l);
        break;
    }
    default:
        break;
    }
    free(o);
}

void jv_decref(jrender *r, jv v)
{
    if (!jv_is_obj(v) || v.u.o->refs == JOBJ_IMMORTAL)
        return;
    if (--v.u.o->refs == 0)
        jobj_free(r, v.u.o, v.kind);
}

/* ---- constructors ----------------------------------------------------- */

static bool bytes_ascii(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] >= 0x80)
            return false;
    return true;
}

bool jv_new_str(jrender *r, const jnode *at, const char *s, size_t len, jv *out)
{
    *out = jv_undef();
    if (len > r->lim->max_live_bytes)
        return jr_fail(r, at, TW_RESOURCE_EXHAUSTED, "string of %zu bytes exceeds the limit",
                       len);
    if (!jr_work(r, at, len))
        return false;
    jstr *o = jr_malloc(r, at, sizeof *o + len + 1);
    if (!o)
        return false;
    o->h.refs = 1;
    o->h.kind = JV_STR;
    o->len = len;
    if (len)
        memcpy(o->data, s, len);
    o->data[len] = '\0';
    o->ascii = bytes_ascii(s, len);
    out->kind = JV_STR;
    out->u.o = &o->h;
    return true;
}

jv jv_literal_str(jarena *a, const char *s, size_t len)
{
    jstr *o = jarena_alloc(a, sizeof *o + len + 1);
    if (!o)
        return jv_undef();
    o->h.refs = JOBJ_IMMORTAL;
    o->h.kind = JV_STR;
    o->len = len;
    if (len)
        memcpy(o->data, s, len);
    o->data[len] = '\0';
    o->ascii = bytes_ascii(s, len);
    return (jv){.kind = JV_STR, .u.o = &o->h};
}

bool jv_new_list(jrender *r, const jnode *at, size_t cap, bool tuple, jv *out)
{
    *out = jv_undef();
    if (cap > r->lim->max_live_bytes / sizeof(jv))
        return jr_fail(r, at, TW_RESOURCE_EXHAUSTED, "list of %zu items exceeds the limit", cap);
    jlist *l = jr_malloc(r, at, sizeof *l);
    if (!l)
        return false;
    memset(l, 0, sizeof *l);
    l->h.refs = 1;
    l->h.kind = JV_LIST;
    l->tuple = tuple;
    out->kind = JV_LIST;
    out->u.o = &l->h;
    if (cap) {
        l->items = jr_malloc(r, at, cap * sizeof(jv));
        if (!l->items) {
            jv_decref(r, *out);
            *out = jv_undef();
            return false;
        }
        l->cap = cap;
    }
    return true;
}

static bool new_dict_kind(jrender *r, const jnode *at, jkind kind, jv *out)
{
    *out = jv_undef();
    jdict *d = jr_malloc(r, at, sizeof *d);
    if (!d)
        return false;
    memset(d, 0, sizeof *d);
    d->h.refs = 1;
    d->h.kind = kind;
    out->kind = kind;
    out->u.o = &d->h;
    return true;
}

bool jv_new_dict(jrender *r, const jnode *at, jv *out)
{
    return new_dict_kind(r, at, JV_DICT, out);
}

bool jv_new_ns(jrender *r, const jnode *at, jv *out)
{
    return new_dict_kind(r, at, JV_NS, out);
}

bool jv_new_func(jrender *r, const jnode *at, jfunc_kind kind, const char *name,
                 jbuiltin_fn fn, jv self, jv *out)
{
    *out = jv_undef();
    jfunc *f = jr_malloc(r, at, sizeof *f);
    if (!f)
        return false;
    memset(f, 0, sizeof *f);
    f->h.refs = 1;
    f->h.kind = JV_FUNC;
    f->fkind = kind;
    f->name = name;
    f->fn = fn;
    f->self = jv_ref(self);
    out->kind = JV_FUNC;
    out->u.o = &f->h;
    return true;
}

bool jv_new_loop(jrender *r, const jnode *at, const jlist *items, jv *out)
{
    *out = jv_undef();
    jloop *l = jr_malloc(r, at, sizeof *l);
    if (!l)
        return false;
    memset(l, 0, sizeof *l);
    l->h.refs = 1;
    l->h.kind = JV_LOOP;
    l->items = items;
    jv_incref((jv){.kind = JV_LIST, .u.o = (jobj *)&items->h});
    out->kind = JV_LOOP;
    out->u.o = &l->h;
    return true;
}

bool jlist_push(jrender *r, const jnode *at, jlist *l, jv v)
{
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 4;
        if (ncap > r->lim->max_live_bytes / sizeof(jv)) {
            jv_decref(r, v);
            return jr_fail(r, at, TW_RESOURCE_EXHAUSTED, "list exceeds the memory limit");
        }
        if (!jr_charge(r, at, (ncap - l->cap) * sizeof(jv))) {
            jv_decref(r, v);
            return false;
        }
        jv *n = realloc(l->items, ncap * sizeof(jv));
        if (!n) {
            jr_uncharge(r, (ncap - l->cap) * sizeof(jv));
            jv_decref(r, v);
            return jr_fail(r, at, TW_RESOURCE_EXHAUSTED, "out of memory");
        }
        l->items = n;
        l->cap = ncap;
    }
    l->items[l->n++] = v;
    return true;
}

static bool str_eq(jv a, const char *s, size_t len)
{
    const jstr *x = jv_str_of(a);
    return x->len == len && memcmp(x->data, s, len) == 0;
}

const jv *jdict_get_str(const jdict *d, const char *key, size_t len)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->keys[i].kind == JV_STR && str_eq(d->keys[i], key, len))
            return &d->vals[i];
    return NULL;
}

const jv *jdict_get(const jdict *d, jv key)
{
    if (key.kind == JV_STR) {
        const jstr *k = jv_str_of(key);
        return jdict_get_str(d, k->data, k->len);
    }
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->keys[i], key))
            return &d->vals[i];
    return NULL;
}

/* Appends a key known to be absent (JSON objects arrive with unique keys;
 * checking each again would make conversion quadratic). */
bool jdict_append(jrender *r, const jnode *at, jdict *d, jv key, jv val)
{
    if (d->n == d->cap) {
        size_t ncap = d->cap ? d->cap * 2 : 4;
        size_t grow = (ncap - d->cap) * 2 * sizeof(jv);
        if (ncap > r->lim->max_live_bytes / (2 * sizeof(jv)) || !jr_charge(r, at, grow)) {
            jv_decref(r, val);
            return jr_fail(r, at, TW_RESOURCE_EXHAUSTED, "dict exceeds the memory limit");
        }
        jv *nk = realloc(d->keys, ncap * sizeof(jv));
        if (nk)
            d->keys = nk;
        jv *nv = nk ? realloc(d->vals, ncap * sizeof(jv)) : NULL;
        if (nv)
            d->vals = nv;
        if (!nk || !nv) {
            jr_uncharge(r, grow);
            jv_decref(r, val);
            return jr_fail(r, at, TW_RESOURCE_EXHAUSTED, "out of memory");
        }
        d->cap = ncap;
    }
    d->keys[d->n] = jv_ref(key);
    d->vals[d->n] = val;
    d->n++;
    return true;
}

bool jdict_set(jrender *r, const jnode *at, jdict *d, jv key, jv val)
{
    for (size_t i = 0; i < d->n; i++) {
        if (jv_equal(d->keys[i], key)) {
            jv_decref(r, d->vals[i]);
            d->vals[i] = val;
            return true;
        }
    }
    return jdict_append(r, at, d, key, val);
}

/* ---- comparisons ------------------------------------------------------ */

static double num_f(jv v)
{
    return v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : (double)v.u.b;
}

static int64_t num_i(jv v)
{
    return v.kind == JV_INT ? v.u.i : (int64_t)v.u.b;
}

bool jv_truthy(jv v)
{
    switch (v.kind) {
    case JV_UNDEF:
    case JV_NONE:
        return false;
    case JV_BOOL:
        return v.u.b;
    case JV_INT:
        return v.u.i != 0;
    case JV_FLOAT:
        return v.u.f != 0.0;
    case JV_STR:
        return jv_str_of(v)->len != 0;
    case JV_LIST:
        return jv_list_of(v)->n != 0;
    case JV_DICT:
        return jv_dict_of(v)->n != 0;
    default:
        return true;
    }
}

bool jv_equal(jv a, jv b)
{
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.kind == JV_FLOAT || b.kind == JV_FLOAT)
            return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a.kind != b.kind)
        return false;
    switch (a.kind) {
    case JV_UNDEF:
    case JV_NONE:
        return true;
    case JV_STR: {
        const jstr *x = jv_str_of(a);
        return str_eq(b, x->data, x->len);
    }
    case JV_LIST: {
        const jlist *x = jv_list_of(a), *y = jv_list_of(b);
        if (x->n != y->n || x->tuple != y->tuple)
            return false;
        for (size_t i = 0; i < x->n; i++)
            if (!jv_equal(x->items[i], y->items[i]))
                return false;
        return true;
    }
    case JV_DICT: {
        const jdict *x = jv_dict_of(a), *y = jv_dict_of(b);
        if (x->n != y->n)
            return false;
        for (size_t i = 0; i < x->n; i++) {
            const jv *o = jdict_get(y, x->keys[i]);
            if (!o || !jv_equal(x->vals[i], *o))
                return false;
        }
        return true;
    }
    default:
        return a.u.o == b.u.o;
    }
}

const char *jv_type_name(jv v)
{
    switch (v.kind) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return jv_list_of(v)->tuple ? "tuple" : "list";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_FUNC: return "function";
    case JV_LOOP: return "LoopContext";
    }
    return "object";
}

bool jv_compare(jrender *r, const jnode *at, jv a, jv b, int *cmp)
{
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.kind == JV_FLOAT || b.kind == JV_FLOAT) {
            double x = num_f(a), y = num_f(b);
            *cmp = x < y ? -1 : x > y ? 1 : 0;
        } else {
            int64_t x = num_i(a), y = num_i(b);
            *cmp = x < y ? -1 : x > y ? 1 : 0;
        }
        return true;
    }
    if (a.kind == JV_STR && b.kind == JV_STR) {
        /* Byte order of UTF-8 is code point order, which is Python's. */
        const jstr *x = jv_str_of(a), *y = jv_str_of(b);
        size_t n = x->len < y->len ? x->len : y->len;
        int c = memcmp(x->data, y->data, n);
        *cmp = c < 0 ? -1 : c > 0 ? 1 : x->len < y->len ? -1 : x->len > y->len ? 1 : 0;
        return true;
    }
    if (a.kind == JV_LIST && b.kind == JV_LIST &&
        jv_list_of(a)->tuple == jv_list_of(b)->tuple) {
        const jlist *x = jv_list_of(a), *y = jv_list_of(b);
        for (size_t i = 0; i < x->n && i < y->n; i++) {
            if (jv_equal(x->items[i], y->items[i]))
                continue;
            return jv_compare(r, at, x->items[i], y->items[i], cmp);
        }
        *cmp = x->n < y->n ? -1 : x->n > y->n ? 1 : 0;
        return true;
    }
    return jr_fail(r, at, TW_INVALID_ARGUMENT,
                   "'<' not supported between instances of '%s' and '%s'", jv_type_name(a),
                   jv_type_name(b));
}

/* ---- text buffers ----------------------------------------------------- */

bool jbuf_put(jrender *r, const jnode *at, jbuf *b, const char *s, size_t n)
{
    if (n == 0)
        return true;
    if (n > r->lim->max_live_bytes || b->len > r->lim->max_live_bytes - n)
        return jr_fail(r, at, TW_RESOURCE_EXHAUSTED, "text exceeds the memory limit");
    if (b->len + n + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap : 64;
        while (ncap < b->len + n + 1)
            ncap *= 2;
        if (!jr_charge(r, at, ncap - b->cap))
            return false;
        char *p = realloc(b->data, ncap);
        if (!p) {
            jr_uncharge(r, ncap - b->cap);
            return jr_fail(r, at, TW_RESOURCE_EXHAUSTED, "out of memory");
        }
        b->data = p;
        b->cap = ncap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

void jbuf_release(jrender *r, jbuf *b)
{
    jr_uncharge(r, b->cap);
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

bool jbuf_to_str(jrender *r, const jnode *at, jbuf *b, jv *out)
{
    bool ok = jv_new_str(r, at, b->data ? b->data : "", b->len, out);
    jbuf_release(r, b);
    return ok;
}

/* ---- str() and repr() ------------------------------------------------- */

/* Python's repr(float): the shortest digits that read back to the same
 * double, in fixed notation for exponents -4..15 and scientific otherwise. */
void jv_float_repr(double f, char *out, size_t cap)
{
    if (f != f) {
        snprintf(out, cap, "nan");
        return;
    }
    if (f == 1.0 / 0.0 || f == -1.0 / 0.0) {
        snprintf(out, cap, f > 0 ? "inf" : "-inf");
        return;
    }
    char tmp[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f)
            break;
    }
    /* tmp is [-]d[.ddd]e[+-]xx */
    char digits[24];
    size_t nd = 0;
    const char *p = tmp;
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && nd < sizeof digits - 1)
            digits[nd++] = *p;
    digits[nd] = '\0';
    int exp10 = *p == 'e' ? atoi(p + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0')
        digits[--nd] = '\0';
    int decpt = exp10 + 1;
    size_t o = 0;
#define PUT(c) do { if (o + 1 < cap) out[o++] = (c); } while (0)
    if (neg)
        PUT('-');
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            PUT('0');
            PUT('.');
            for (int i = 0; i < -decpt; i++)
                PUT('0');
            for (size_t i = 0; i < nd; i++)
                PUT(digits[i]);
        } else {
            for (int i = 0; i < decpt; i++)
                PUT((size_t)i < nd ? digits[i] : '0');
            PUT('.');
            if ((size_t)decpt < nd)
                for (size_t i = (size_t)decpt; i < nd; i++)
                    PUT(digits[i]);
            else
                PUT('0');
        }
    } else {
        PUT(digits[0]);
        if (nd > 1) {
            PUT('.');
            for (size_t i = 1; i < nd; i++)
                PUT(digits[i]);
        }
        char e[8];
        snprintf(e, sizeof e, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
        for (const char *q = e; *q; q++)
            PUT(*q);
    }
#undef PUT
    out[o] = '\0';
}

static bool put_cstr(jrender *r, const jnode *at, jbuf *b, const char *s)
{
    return jbuf_put(r, at, b, s, strlen(s));
}

static bool str_repr(jrender *r, const jnode *at, jbuf *b, const jstr *s)
{
    bool has_sq = memchr(s->data, '\'', s->len) != NULL;
    bool has_dq = memchr(s->data, '"', s->len) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    if (!jbuf_put(r, at, b, &q, 1))
        return false;
    for (size_t i = 0; i < s->len;) {
        int32_t cp;
        size_t n = ju_decode(s->data + i, s->len - i, &cp);
        char esc[16];
        const char *lit = NULL;
        if (cp == '\\')
            lit = "\\\\";
        else if (cp == q)
            lit = q == '\'' ? "\\'" : "\\\"";
        else if (cp == '\n')
            lit = "\\n";
        else if (cp == '\r')
            lit = "\\r";
        else if (cp == '\t')
            lit = "\\t";
        else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA1) || cp == 0xAD ||
                 cp == 0x2028 || cp == 0x2029) {
            snprintf(esc, sizeof esc, cp < 0x100 ? "\\x%02x" : "\\u%04x", (unsigned)cp);
            lit = esc;
        }
        bool ok = lit ? put_cstr(r, at, b, lit) : jbuf_put(r, at, b, s->data + i, n);
        if (!ok)
            return false;
        i += n;
    }
    return jbuf_put(r, at, b, &q, 1);
}

static bool seq_repr(jrender *r, const jnode *at, jbuf *b, const jlist *l)
{
    if (!put_cstr(r, at, b, l->tuple ? "(" : "["))
        return false;
    for (size_t i = 0; i < l->n; i++) {
        if (i && !put_cstr(r, at, b, ", "))
            return false;
        if (!jv_repr_append(r, at, b, l->items[i]))
            return false;
    }
    if (l->tuple && l->n == 1 && !put_cstr(r, at, b, ","))
        return false;
    return put_cstr(r, at, b, l->tuple ? ")" : "]");
}

static bool dict_repr(jrender *r, const jnode *at, jbuf *b, const jdict *d)
{
    if (!put_cstr(r, at, b, "{"))
        return false;
    for (size_t i = 0; i < d->n; i++) {
        if (i && !put_cstr(r, at, b, ", "))
            return false;
        if (!jv_repr_append(r, at, b, d->keys[i]) || !put_cstr(r, at, b, ": ") ||
            !jv_repr_append(r, at, b, d->vals[i]))
            return false;
    }
    return put_cstr(r, at, b, "}");
}

bool jv_repr_append(jrender *r, const jnode *at, jbuf *b, jv v)
{
    if (v.kind == JV_STR)
        return str_repr(r, at, b, jv_str_of(v));
    if (v.kind == JV_UNDEF)
        return put_cstr(r, at, b, "Undefined");
    return jv_str_append(r, at, b, v);
}

bool jv_str_append(jrender *r, const jnode *at, jbuf *b, jv v)
{
    char tmp[64];
    switch (v.kind) {
    case JV_UNDEF:
        return true;
    case JV_NONE:
        return put_cstr(r, at, b, "None");
    case JV_BOOL:
        return put_cstr(r, at, b, v.u.b ? "True" : "False");
    case JV_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        return put_cstr(r, at, b, tmp);
    case JV_FLOAT:
        jv_float_repr(v.u.f, tmp, sizeof tmp);
        return put_cstr(r, at, b, tmp);
    case JV_STR: {
        const jstr *s = jv_str_of(v);
        return jbuf_put(r, at, b, s->data, s->len);
    }
    case JV_LIST:
        return seq_repr(r, at, b, jv_list_of(v));
    case JV_DICT:
        return dict_repr(r, at, b, jv_dict_of(v));
    case JV_NS:
        return put_cstr(r, at, b, "<Namespace ") && dict_repr(r, at, b, jv_dict_of(v)) &&
               put_cstr(r, at, b, ">");
    case JV_FUNC:
        snprintf(tmp, sizeof tmp, "<function %.40s>", jv_func_of(v)->name);
        return put_cstr(r, at, b, tmp);
    case JV_LOOP: {
        const jloop *l = jv_loop_of(v);
        snprintf(tmp, sizeof tmp, "<LoopContext %zu/%zu>", l->index0 + 1, l->items->n);
        return put_cstr(r, at, b, tmp);
    }
    }
    return true;
}

bool jv_to_string(jrender *r, const jnode *at, jv v, jv *out)
{
    if (v.kind == JV_STR) {
        *out = jv_ref(v);
        return true;
    }
    jbuf b = {0};
    if (!jv_str_append(r, at, &b, v)) {
        jbuf_release(r, &b);
        *out = jv_undef();
        return false;
    }
    return jbuf_to_str(r, at, &b, out);
}
