/* Evaluator: walks the syntax tree with Jinja2's scoping rules (a for-loop
 * body and a macro get their own scope; if-blocks do not), Python's operator
 * semantics, and the default Undefined of Jinja2 for missing names, keys and
 * attributes (empty when printed, false, iterable as nothing). */
#include "jinja.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EVAL_DEPTH 400
#define MAX_ARGS 32

typedef struct jvar {
    const char *name;
    size_t len;
    jv v;
} jvar;

typedef struct jscope {
    struct jscope *parent;
    jvar *vars;
    size_t n, cap;
} jscope;

typedef enum flow { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE, FLOW_ERROR } flow;

static bool eval(jrender *r, jscope *s, const jnode *n, jv *out);
static flow exec_body(jrender *r, jscope *s, const jnvec *body, jbuf *out);

/* ---- scopes ----------------------------------------------------------- */

static void scope_release(jrender *r, jscope *s)
{
    for (size_t i = 0; i < s->n; i++)
        jv_decref(r, s->vars[i].v);
    jr_uncharge(r, s->cap * sizeof(jvar));
    free(s->vars);
    s->vars = NULL;
    s->n = s->cap = 0;
}

/* Binds name (static lifetime) to v (owned) in s. */
static bool scope_set(jrender *r, const jnode *at, jscope *s, const char *name, size_t len, jv v)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->vars[i].len == len && memcmp(s->vars[i].name, name, len) == 0) {
            jv_decref(r, s->vars[i].v);
            s->vars[i].v = v;
            return true;
        }
    }
    if (s->n == s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 8;
        if (!jr_charge(r, at, (ncap - s->cap) * sizeof(jvar))) {
            jv_decref(r, v);
            return false;
        }
        jvar *nv = realloc(s->vars, ncap * sizeof *nv);
        if (!nv) {
            jr_uncharge(r, (ncap - s->cap) * sizeof(jvar));
            jv_decref(r, v);
            return jr_fail(r, at, TW_RESOURCE_EXHAUSTED, "out of memory");
        }
        s->vars = nv;
        s->cap = ncap;
    }
    s->vars[s->n++] = (jvar){.name = name, .len = len, .v = v};
    return true;
}

static const jv *scope_find(const jscope *s, const char *name, size_t len)
{
    for (; s; s = s->parent)
        for (size_t i = 0; i < s->n; i++)
            if (s->vars[i].len == len && memcmp(s->vars[i].name, name, len) == 0)
                return &s->vars[i].v;
    return NULL;
}

static bool lookup(jrender *r, const jscope *s, const jnode *at, const char *name, size_t len,
                   jv *out)
{
    const jv *v = scope_find(s, name, len);
    if (!v)
        v = jdict_get_str(r->vars, name, len);
    if (v) {
        *out = jv_ref(*v);
        return true;
    }
    bool found = false;
    if (!jglobal_get(r, at, name, out, &found))
        return false;
    if (!found)
        *out = jv_undef();
    return true;
}

/* ---- output ----------------------------------------------------------- */

static bool emit(jrender *r, const jnode *at, jbuf *out, const char *s, size_t n)
{
    if (n > r->lim->max_output || out->len > r->lim->max_output - n)
        return jr_fail(r, at, TW_RESOURCE_EXHAUSTED,
                       "rendered text exceeds the limit of %zu bytes", r->lim->max_output);
    return jbuf_put(r, at, out, s, n);
}

static bool emit_value(jrender *r, const jnode *at, jbuf *out, jv v)
{
    if (v.kind == JV_STR)
        return emit(r, at, out, jv_str_of(v)->data, jv_str_of(v)->len);
    jv s;
    if (!jv_to_string(r, at, v, &s))
        return false;
    bool ok = emit(r, at, out, jv_str_of(s)->data, jv_str_of(s)->len);
    jv_decref(r, s);
    return ok;
}

/* ---- calls ------------------------------------------------------------ */

typedef struct jargs {
    jv pos[MAX_ARGS];
    size_t npos;
    const char *kwn[MAX_ARGS];
    jv kwv[MAX_ARGS];
    size_t nkw;
} jargs;

static void args_release(jrender *r, jargs *a)
{
    for (size_t i = 0; i < a->npos; i++)
        jv_decref(r, a->pos[i]);
    for (size_t i = 0; i < a->nkw; i++)
        jv_decref(r, a->kwv[i]);
    a->npos = a->nkw = 0;
}

static bool eval_args(jrender *r, jscope *s, const jnvec *v, jargs *a)
{
    a->npos = a->nkw = 0;
    if (v->n > MAX_ARGS)
        return jr_fail(r, v->v[0], TW_INVALID_ARGUMENT, "more than %d arguments", MAX_ARGS);
    for (size_t i = 0; i < v->n; i++) {
        const jnode *n = v->v[i];
        jv x;
        if (!eval(r, s, n->kind == JN_KWARG ? n->a : n, &x)) {
            args_release(r, a);
            return false;
        }
        if (n->kind == JN_KWARG) {
            a->kwn[a->nkw] = n->name;
            a->kwv[a->nkw++] = x;
        } else {
            a->pos[a->npos++] = x;
        }
    }
    return true;
}

static bool call_macro(jrender *r, const jnode *at, const jnode *m, const jv *args, size_t nargs,
                       const char *const *kwn, const jv *kwv, size_t nkw, jv caller, jv *out)
{
    *out = jv_undef();
    if (r->call_depth >= r->lim->max_call_depth)
        return jr_fail(r, at, TW_RESOURCE_EXHAUSTED, "macro calls nested more than %u deep",
                       r->lim->max_call_depth);
    if (!jr_step(r, at))
        return false;
    jscope sc = {.parent = r->top};
    bool ok = true;
    const jnvec *params = &m->kids2;
    jv varargs, kwargs;
    ok = jv_new_list(r, at, 0, true, &varargs) && jv_new_dict(r, at, &kwargs);
    if (!ok) {
        jv_decref(r, varargs);
        return false;
    }
    for (size_t i = 0; ok && i < nargs; i++) {
        if (i < params->n)
            ok = scope_set(r, at, &sc, params->v[i]->name, params->v[i]->name_len,
                           jv_ref(args[i]));
        else
            ok = jlist_push(r, at, jv_list_of(varargs), jv_ref(args[i]));
    }
    for (size_t k = 0; ok && k < nkw; k++) {
        size_t i = 0;
        while (i < params->n && strcmp(params->v[i]->name, kwn[k]) != 0)
            i++;
        if (i < params->n) {
            if (i < nargs) {
                ok = jr_fail(r, at, TW_INVALID_ARGUMENT,
                             "macro '%s' got multiple values for argument '%s'", m->name, kwn[k]);
                break;
            }
            ok = scope_set(r, at, &sc, params->v[i]->name, params->v[i]->name_len,
                           jv_ref(kwv[k]));
        } else {
            jv key;
            ok = jv_new_str(r, at, kwn[k], strlen(kwn[k]), &key) &&
                 jdict_set(r, at, jv_dict_of(kwargs), key, jv_ref(kwv[k]));
            jv_decref(r, key);
        }
    }
    /* Defaults are evaluated at call time in the macro's scope, in order. */
    for (size_t i = 0; ok && i < params->n; i++) {
        const jnode *p = params->v[i];
        bool given = i < nargs;
        for (size_t k = 0; !given && k < nkw; k++)
            given = strcmp(kwn[k], p->name) == 0;
        if (given)
            continue;
        jv d = jv_undef();
        if (p->a && !eval(r, &sc, p->a, &d)) {
            ok = false;
            break;
        }
        ok = scope_set(r, at, &sc, p->name, p->name_len, d);
    }
    if (ok) {
        ok = scope_set(r, at, &sc, "varargs", 7, varargs);
        if (ok)
            ok = scope_set(r, at, &sc, "kwargs", 6, kwargs);
        else
            jv_decref(r, kwargs);
    } else {
        jv_decref(r, varargs);
        jv_decref(r, kwargs);
    }
    if (ok && caller.kind != JV_UNDEF)
        ok = scope_set(r, at, &sc, "caller", 6, jv_ref(caller));
    jbuf b = {0};
    if (ok) {
        r->call_depth++;
        ok = exec_body(r, &sc, &m->kids, &b) == FLOW_NORMAL;
        r->call_depth--;
    }
    scope_release(r, &sc);
    if (!ok) {
        jbuf_release(r, &b);
        return false;
    }
    return jbuf_to_str(r, at, &b, out);
}

static bool call_caller(jrender *r, const jnode *at, const jfunc *f, const jv *args, size_t nargs,
                        jv *out)
{
    *out = jv_undef();
    if (!f->scope)
        return jr_fail(r, at, TW_INVALID_ARGUMENT, "caller() used after its call block ended");
    if (r->call_depth >= r->lim->max_call_depth)
        return jr_fail(r, at, TW_RESOURCE_EXHAUSTED, "calls nested more than %u deep",
                       r->lim->max_call_depth);
    const jnode *blk = f->node;
    jscope sc = {.parent = f->scope};
    bool ok = true;
    for (size_t i = 0; ok && i < blk->kids2.n; i++) {
        const jnode *p = blk->kids2.v[i];
        jv v = jv_undef();
        if (i < nargs)
            v = jv_ref(args[i]);
        else if (p->a && !eval(r, &sc, p->a, &v))
            ok = false;
        if (ok)
            ok = scope_set(r, at, &sc, p->name, p->name_len, v);
    }
    jbuf b = {0};
    if (ok) {
        r->call_depth++;
        ok = exec_body(r, &sc, &blk->kids, &b) == FLOW_NORMAL;
        r->call_depth--;
    }
    scope_release(r, &sc);
    if (!ok) {
        jbuf_release(r, &b);
        return false;
    }
    return jbuf_to_str(r, at, &b, out);
}

static bool call_value(jrender *r, const jnode *at, jv fn, const jv *args, size_t nargs,
                       const char *const *kwn, const jv *kwv, size_t nkw, jv caller, jv *out)
{
    *out = jv_undef();
    if (fn.kind != JV_FUNC) {
        if (fn.kind == JV_UNDEF)
            return jr_fail(r, at, TW_INVALID_ARGUMENT, "called an undefined value");
        return jr_fail(r, at, TW_INVALID_ARGUMENT, "'%s' object is not callable",
                       jv_type_name(fn));
    }
    const jfunc *f = jv_func_of(fn);
    switch (f->fkind) {
    case JF_BUILTIN:
        return f->fn(r, at, f, args, nargs, kwn, kwv, nkw, out);
    case JF_MACRO:
        return call_macro(r, at, f->node, args, nargs, kwn, kwv, nkw, caller, out);
    case JF_CALLER:
        return call_caller(r, at, f, args, nargs, out);
    }
    return false;
}

bool jeval_call_value(jrender *r, const jnode *at, jv fn, const jv *args, size_t nargs,
                      const char *const *kwnames, const jv *kwvals, size_t nkw, jv *out)
{
    return call_value(r, at, fn, args, nargs, kwnames, kwvals, nkw, jv_undef(), out);
}

/* ---- expressions ------------------------------------------------------ */

static bool eval_inner(jrender *r, jscope *s, const jnode *n, jv *out)
{
    jv a = jv_undef(), b = jv_undef();
    bool ok = true;
    *out = jv_undef();
    switch (n->kind) {
    case JN_CONST:
        *out = n == r->hole ? jv_ref(r->hole_value) : n->value;
        return true;
    case JN_NAME:
        return lookup(r, s, n, n->name, n->name_len, out);
    case JN_GETATTR:
        if (!eval(r, s, n->a, &a))
            return false;
        ok = jeval_getattr(r, n, a, n->name, n->name_len, out);
        break;
    case JN_GETITEM:
        if (!eval(r, s, n->a, &a) || !eval(r, s, n->b, &b))
            break;
        ok = jeval_getitem(r, n, a, b, out);
        break;
    case JN_SLICE: {
        jv c = jv_undef(), d = jv_undef();
        if (!n->a)
            return jr_fail(r, n, TW_INVALID_ARGUMENT, "a slice is not allowed here");
        ok = eval(r, s, n->a, &a) && (!n->b || eval(r, s, n->b, &b)) &&
             (!n->c || eval(r, s, n->c, &c)) && (!n->d || eval(r, s, n->d, &d)) &&
             jeval_slice(r, n, a, b, c, d, out);
        jv_decref(r, c);
        jv_decref(r, d);
        break;
    }
    case JN_CALL: {
        jargs args;
        if (!eval(r, s, n->a, &a) || !eval_args(r, s, &n->kids, &args))
            break;
        ok = call_value(r, n, a, args.pos, args.npos, args.kwn, args.kwv, args.nkw, jv_undef(),
                        out);
        args_release(r, &args);
        break;
    }
    case JN_FILTER: {
        jargs args;
        if (!eval(r, s, n->a, &a) || !eval_args(r, s, &n->kids, &args))
            break;
        ok = jfilter_call(r, n, n->name, a, args.pos, args.npos, args.kwn, args.kwv, args.nkw,
                          out);
        args_release(r, &args);
        break;
    }
    case JN_TEST: {
        jargs args;
        bool res = false;
        if (!eval(r, s, n->a, &a) || !eval_args(r, s, &n->kids, &args))
            break;
        if (args.nkw)
            ok = jr_fail(r, n, TW_INVALID_ARGUMENT, "tests take no keyword arguments");
        else
            ok = jtest_call(r, n, n->name, a, args.pos, args.npos, &res);
        args_release(r, &args);
        *out = jv_bool(n->flag ? !res : res);
        break;
    }
    case JN_BINOP:
        if (!eval(r, s, n->a, &a) || !eval(r, s, n->b, &b))
            break;
        ok = jeval_binop(r, n, n->op, a, b, out);
        break;
    case JN_NEG:
    case JN_POS:
        if (!eval(r, s, n->a, &a))
            break;
        if (a.kind == JV_INT || a.kind == JV_BOOL) {
            int64_t v = a.kind == JV_INT ? a.u.i : a.u.b;
            if (n->kind == JN_NEG && v == INT64_MIN)
                ok = jr_fail(r, n, TW_OUT_OF_RANGE, "integer overflow");
            else
                *out = jv_int(n->kind == JN_NEG ? -v : v);
        } else if (a.kind == JV_FLOAT) {
            *out = jv_float(n->kind == JN_NEG ? -a.u.f : a.u.f);
        } else {
            ok = jr_fail(r, n, TW_INVALID_ARGUMENT, "bad operand type for unary %s: '%s'",
                         n->kind == JN_NEG ? "-" : "+", jv_type_name(a));
        }
        break;
    case JN_NOT:
        if (!eval(r, s, n->a, &a))
            break;
        *out = jv_bool(!jv_truthy(a));
        break;
    case JN_AND:
    case JN_OR:
        if (!eval(r, s, n->a, &a))
            break;
        if (jv_truthy(a) == (n->kind == JN_OR)) {
            *out = a;
            return true;
        }
        jv_decref(r, a);
        return eval(r, s, n->b, out);
    case JN_COND:
        if (!eval(r, s, n->a, &a))
            break;
        if (jv_truthy(a))
            ok = eval(r, s, n->b, out);
        else if (n->c)
            ok = eval(r, s, n->c, out);
        break;
    case JN_COMPARE: {
        if (!eval(r, s, n->a, &a))
            break;
        bool res = true;
        for (size_t i = 0; ok && res && i < n->kids.n; i++) {
            const jnode *o = n->kids.v[i];
            if (!eval(r, s, o->a, &b)) {
                ok = false;
                break;
            }
            ok = jeval_compare(r, o, o->op, a, b, &res);
            jv_decref(r, a);
            a = b;
            b = jv_undef();
        }
        *out = jv_bool(res);
        break;
    }
    case JN_LIST:
    case JN_TUPLE: {
        if (!jv_new_list(r, n, n->kids.n, n->kind == JN_TUPLE, out))
            return false;
        for (size_t i = 0; i < n->kids.n; i++) {
            jv x;
            if (!eval(r, s, n->kids.v[i], &x) || !jlist_push(r, n, jv_list_of(*out), x)) {
                ok = false;
                break;
            }
        }
        break;
    }
    case JN_DICT: {
        if (!jv_new_dict(r, n, out))
            return false;
        for (size_t i = 0; ok && i < n->kids.n; i++) {
            jv k, v;
            if (!eval(r, s, n->kids.v[i], &k)) {
                ok = false;
                break;
            }
            if (k.kind == JV_DICT || k.kind == JV_LIST || k.kind == JV_NS || k.kind == JV_UNDEF) {
                jv_decref(r, k);
                ok = jr_fail(r, n, TW_INVALID_ARGUMENT, "unhashable dict key");
                break;
            }
            ok = eval(r, s, n->kids2.v[i], &v) && jdict_set(r, n, jv_dict_of(*out), k, v);
            jv_decref(r, k);
        }
        break;
    }
    default:
        return jr_fail(r, n, TW_INTERNAL, "unexpected node in an expression");
    }
    jv_decref(r, a);
    jv_decref(r, b);
    if (!ok || !jr_ok(r)) {
        jv_decref(r, *out);
        *out = jv_undef();
        return false;
    }
    return true;
}

static bool eval(jrender *r, jscope *s, const jnode *n, jv *out)
{
    if (r->depth >= MAX_EVAL_DEPTH) {
        *out = jv_undef();
        return jr_fail(r, n, TW_RESOURCE_EXHAUSTED, "template evaluation nested too deeply");
    }
    r->depth++;
    bool ok = eval_inner(r, s, n, out);
    r->depth--;
    return ok;
}

/* ---- statements ------------------------------------------------------- */

/* Namespaces are the only mutable values; keeping them out of each other
 * rules out reference cycles (and with them leaks and endless printing). */
static bool holds_namespace(jv v, unsigned depth)
{
    if (v.kind == JV_NS || depth > 600)
        return true;
    if (v.kind == JV_LIST) {
        const jlist *l = jv_list_of(v);
        for (size_t i = 0; i < l->n; i++)
            if (holds_namespace(l->items[i], depth + 1))
                return true;
    } else if (v.kind == JV_DICT) {
        const jdict *d = jv_dict_of(v);
        for (size_t i = 0; i < d->n; i++)
            if (holds_namespace(d->vals[i], depth + 1))
                return true;
    } else if (v.kind == JV_FUNC) {
        return holds_namespace(jv_func_of(v)->self, depth + 1);
    } else if (v.kind == JV_LOOP) {
        return true;
    }
    return false;
}

static bool assign(jrender *r, jscope *s, const jnode *target, jv v)
{
    if (target->kind == JN_NAME)
        return scope_set(r, target, s, target->name, target->name_len, v);
    if (target->kind == JN_GETATTR) {
        jv ns;
        if (!lookup(r, s, target, target->a->name, target->a->name_len, &ns)) {
            jv_decref(r, v);
            return false;
        }
        bool ok;
        if (ns.kind != JV_NS) {
            ok = jr_fail(r, target, TW_INVALID_ARGUMENT,
                         "cannot assign attribute on non-namespace object");
        } else if (holds_namespace(v, 0)) {
            ok = jr_fail(r, target, TW_INVALID_ARGUMENT,
                         "a namespace cannot hold namespaces or loop objects");
        } else {
            jv key;
            ok = jv_new_str(r, target, target->name, target->name_len, &key);
            if (ok) {
                ok = jdict_set(r, target, jv_dict_of(ns), key, v);
                v = jv_undef();
            }
            jv_decref(r, key);
        }
        jv_decref(r, v);
        jv_decref(r, ns);
        return ok;
    }
    /* tuple unpacking */
    if (v.kind != JV_LIST) {
        jv_decref(r, v);
        return jr_fail(r, target, TW_INVALID_ARGUMENT, "cannot unpack non-sequence %s",
                       jv_type_name(v));
    }
    const jlist *l = jv_list_of(v);
    if (l->n != target->kids.n) {
        size_t have = l->n;
        jv_decref(r, v);
        return jr_fail(r, target, TW_INVALID_ARGUMENT, "%s values to unpack (expected %zu)",
                       have < target->kids.n ? "not enough" : "too many", target->kids.n);
    }
    bool ok = true;
    for (size_t i = 0; ok && i < l->n; i++)
        ok = assign(r, s, target->kids.v[i], jv_ref(l->items[i]));
    jv_decref(r, v);
    return ok;
}

/* The sequence a for-loop walks, as a list (dicts iterate over their keys,
 * strings over their characters). */
static bool iterable_list(jrender *r, const jnode *at, jv v, jv *out)
{
    *out = jv_undef();
    switch (v.kind) {
    case JV_LIST:
        *out = jv_ref(v);
        return true;
    case JV_UNDEF:
        return jv_new_list(r, at, 0, false, out);
    case JV_DICT: {
        const jdict *d = jv_dict_of(v);
        if (!jv_new_list(r, at, d->n, false, out))
            return false;
        for (size_t i = 0; i < d->n; i++)
            if (!jlist_push(r, at, jv_list_of(*out), jv_ref(d->keys[i])))
                return false;
        return true;
    }
    case JV_STR: {
        const jstr *s = jv_str_of(v);
        if (!jv_new_list(r, at, 0, false, out))
            return false;
        for (size_t i = 0; i < s->len;) {
            int32_t cp;
            size_t n = ju_decode(s->data + i, s->len - i, &cp);
            jv c;
            if (!jv_new_str(r, at, s->data + i, n, &c) || !jlist_push(r, at, jv_list_of(*out), c))
                return false;
            i += n;
        }
        return true;
    }
    default:
        return jr_fail(r, at, TW_INVALID_ARGUMENT, "'%s' object is not iterable",
                       jv_type_name(v));
    }
}

static flow exec_for(jrender *r, jscope *s, const jnode *n, jbuf *out)
{
    jv seqv, items;
    if (!eval(r, s, n->b, &seqv))
        return FLOW_ERROR;
    bool ok = iterable_list(r, n->b, seqv, &items);
    jv_decref(r, seqv);
    if (!ok)
        return FLOW_ERROR;
    jscope sc = {.parent = s};
    if (n->c) {
        /* `for x in xs if cond`: the filter runs first, so loop.length and
         * loop.last describe the filtered sequence. */
        jv kept;
        ok = jv_new_list(r, n, 0, false, &kept);
        const jlist *l = jv_list_of(items);
        for (size_t i = 0; ok && i < l->n; i++) {
            jv cond = jv_undef();
            ok = jr_step(r, n) && assign(r, &sc, n->a, jv_ref(l->items[i])) &&
                 eval(r, &sc, n->c, &cond);
            if (ok && jv_truthy(cond))
                ok = jlist_push(r, n, jv_list_of(kept), jv_ref(l->items[i]));
            jv_decref(r, cond);
        }
        jv_decref(r, items);
        items = kept;
        scope_release(r, &sc);
        sc = (jscope){.parent = s};
        if (!ok) {
            jv_decref(r, items);
            return FLOW_ERROR;
        }
    }
    const jlist *l = jv_list_of(items);
    flow f = FLOW_NORMAL;
    if (l->n == 0) {
        f = exec_body(r, &sc, &n->kids2, out);
    } else {
        jv loopv;
        ok = jv_new_loop(r, n, l, &loopv) && scope_set(r, n, &sc, "loop", 4, loopv);
        for (size_t i = 0; ok && i < l->n; i++) {
            jv_loop_of(loopv)->index0 = i;
            if (!jr_step(r, n) || !assign(r, &sc, n->a, jv_ref(l->items[i]))) {
                ok = false;
                break;
            }
            f = exec_body(r, &sc, &n->kids, out);
            if (f == FLOW_ERROR || f == FLOW_BREAK)
                break;
            f = FLOW_NORMAL;
        }
        if (!ok)
            f = FLOW_ERROR;
        else if (f == FLOW_BREAK)
            f = FLOW_NORMAL;
    }
    scope_release(r, &sc);
    jv_decref(r, items);
    return f;
}

static bool capture(jrender *r, jscope *s, const jnode *n, jv *out)
{
    jbuf b = {0};
    flow f = exec_body(r, s, &n->kids, &b);
    if (f != FLOW_NORMAL) {
        jbuf_release(r, &b);
        *out = jv_undef();
        return f == FLOW_ERROR ? false
                               : jr_fail(r, n, TW_INVALID_ARGUMENT,
                                         "break or continue cannot leave this block");
    }
    return jbuf_to_str(r, n, &b, out);
}

/* Applies the filter chain n->b (whose input placeholder is n->c) to v. */
static bool apply_hole(jrender *r, jscope *s, const jnode *n, jv v, jv *out)
{
    const jnode *saved = r->hole;
    jv saved_v = r->hole_value;
    r->hole = n->c;
    r->hole_value = v;
    bool ok = eval(r, s, n->b, out);
    r->hole = saved;
    r->hole_value = saved_v;
    return ok;
}

static flow exec_stmt(jrender *r, jscope *s, const jnode *n, jbuf *out)
{
    jv v = jv_undef();
    switch (n->kind) {
    case JN_TEXT:
        return emit(r, n, out, jv_str_of(n->value)->data, jv_str_of(n->value)->len)
                   ? FLOW_NORMAL
                   : FLOW_ERROR;
    case JN_OUTPUT: {
        if (!eval(r, s, n->a, &v))
            return FLOW_ERROR;
        bool ok = emit_value(r, n, out, v);
        jv_decref(r, v);
        return ok ? FLOW_NORMAL : FLOW_ERROR;
    }
    case JN_BODY:
        return exec_body(r, s, &n->kids, out);
    case JN_IF: {
        if (!eval(r, s, n->a, &v))
            return FLOW_ERROR;
        bool t = jv_truthy(v);
        jv_decref(r, v);
        return exec_body(r, s, t ? &n->kids : &n->kids2, out);
    }
    case JN_FOR:
        return exec_for(r, s, n, out);
    case JN_SET:
        if (!eval(r, s, n->b, &v))
            return FLOW_ERROR;
        return assign(r, s, n->a, v) ? FLOW_NORMAL : FLOW_ERROR;
    case JN_SET_BLOCK: {
        if (!capture(r, s, n, &v))
            return FLOW_ERROR;
        if (n->b) {
            jv f;
            bool ok = apply_hole(r, s, n, v, &f);
            jv_decref(r, v);
            if (!ok)
                return FLOW_ERROR;
            v = f;
        }
        return assign(r, s, n->a, v) ? FLOW_NORMAL : FLOW_ERROR;
    }
    case JN_MACRO: {
        jv f;
        if (!jv_new_func(r, n, JF_MACRO, n->name, NULL, jv_undef(), &f))
            return FLOW_ERROR;
        jv_func_of(f)->node = n;
        return scope_set(r, n, s, n->name, n->name_len, f) ? FLOW_NORMAL : FLOW_ERROR;
    }
    case JN_CALL_BLOCK: {
        const jnode *call = n->a;
        jv fn, caller;
        jargs args;
        if (!eval(r, s, call->a, &fn))
            return FLOW_ERROR;
        if (!eval_args(r, s, &call->kids, &args)) {
            jv_decref(r, fn);
            return FLOW_ERROR;
        }
        bool ok = jv_new_func(r, n, JF_CALLER, "caller", NULL, jv_undef(), &caller);
        if (ok) {
            jv_func_of(caller)->node = n;
            jv_func_of(caller)->scope = s;
            ok = call_value(r, call, fn, args.pos, args.npos, args.kwn, args.kwv, args.nkw,
                            caller, &v);
            jv_func_of(caller)->scope = NULL;
            jv_decref(r, caller);
        }
        args_release(r, &args);
        jv_decref(r, fn);
        if (ok)
            ok = emit_value(r, n, out, v);
        jv_decref(r, v);
        return ok ? FLOW_NORMAL : FLOW_ERROR;
    }
    case JN_FILTER_BLOCK: {
        jv body, f;
        if (!capture(r, s, n, &body))
            return FLOW_ERROR;
        bool ok = apply_hole(r, s, n, body, &f);
        jv_decref(r, body);
        if (ok)
            ok = emit_value(r, n, out, f);
        jv_decref(r, f);
        return ok ? FLOW_NORMAL : FLOW_ERROR;
    }
    case JN_BREAK:
        return FLOW_BREAK;
    case JN_CONTINUE:
        return FLOW_CONTINUE;
    default:
        jr_fail(r, n, TW_INTERNAL, "unexpected node in a statement");
        return FLOW_ERROR;
    }
}

static flow exec_body(jrender *r, jscope *s, const jnvec *body, jbuf *out)
{
    if (r->depth >= MAX_EVAL_DEPTH) {
        jr_fail(r, body->n ? body->v[0] : NULL, TW_RESOURCE_EXHAUSTED,
                "template evaluation nested too deeply");
        return FLOW_ERROR;
    }
    r->depth++;
    flow f = FLOW_NORMAL;
    for (size_t i = 0; i < body->n; i++) {
        f = exec_stmt(r, s, body->v[i], out);
        if (f != FLOW_NORMAL)
            break;
    }
    r->depth--;
    if (f != FLOW_ERROR && !jr_ok(r))
        f = FLOW_ERROR;
    return f;
}

bool jeval_template(jrender *r, const jnode *root, jbuf *out)
{
    jscope top = {0};
    r->top = &top;
    r->root = root;
    flow f = exec_body(r, &top, &root->kids, out);
    scope_release(r, &top);
    r->top = NULL;
    if (f == FLOW_ERROR || !jr_ok(r))
        return false;
    return true;
}
