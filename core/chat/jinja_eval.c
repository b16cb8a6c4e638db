/* Evaluator: walks the syntax tree with Jinja2's scoping rules (a for-loop
 * body and a macro get their own scope; if-blocks do not), Python's operator
 * semantics, and the default Undefined of Jinja2 for missing names, keys and
 * attributes (empty when printed, false, iterable as nothing). This file
 * holds scopes, output, calls and expressions; statements are executed in
 * jinja_exec.c. */
#include "jinja_evaluator.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- scopes ----------------------------------------------------------- */

void je_scope_release(jrender *r, jscope *s)
{
    for (size_t i = 0; i < s->n; i++)
        jv_decref(r, s->vars[i].v);
    jr_uncharge(r, s->cap * sizeof(jvar));
    free(s->vars);
    s->vars = NULL;
    s->n = s->cap = 0;
}

/* Binds name (static lifetime) to v (owned) in s. */
bool je_scope_set(jrender *r, const jnode *at, jscope *s, const char *name, size_t len, jv v)
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

bool je_lookup(jrender *r, const jscope *s, const jnode *at, const char *name, size_t len,
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

bool je_emit(jrender *r, const jnode *at, jbuf *out, const char *s, size_t n)
{
    if (n > r->lim->max_output || out->len > r->lim->max_output - n)
        return jr_fail(r, at, TW_RESOURCE_EXHAUSTED,
                       "rendered text exceeds the limit of %zu bytes", r->lim->max_output);
    return jbuf_put(r, at, out, s, n);
}

bool je_emit_value(jrender *r, const jnode *at, jbuf *out, jv v)
{
    if (v.kind == JV_STR)
        return je_emit(r, at, out, jv_str_of(v)->data, jv_str_of(v)->len);
    jv s;
    if (!jv_to_string(r, at, v, &s))
        return false;
    bool ok = je_emit(r, at, out, jv_str_of(s)->data, jv_str_of(s)->len);
    jv_decref(r, s);
    return ok;
}

/* ---- calls ------------------------------------------------------------ */

void je_args_release(jrender *r, jargs *a)
{
    for (size_t i = 0; i < a->npos; i++)
        jv_decref(r, a->pos[i]);
    for (size_t i = 0; i < a->nkw; i++)
        jv_decref(r, a->kwv[i]);
    a->npos = a->nkw = 0;
}

bool je_eval_args(jrender *r, jscope *s, const jnvec *v, jargs *a)
{
    a->npos = a->nkw = 0;
    if (v->n > MAX_ARGS)
        return jr_fail(r, v->v[0], TW_INVALID_ARGUMENT, "more than %d arguments", MAX_ARGS);
    for (size_t i = 0; i < v->n; i++) {
        const jnode *n = v->v[i];
        jv x;
        if (!je_eval(r, s, n->kind == JN_KWARG ? n->a : n, &x)) {
            je_args_release(r, a);
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
            ok = je_scope_set(r, at, &sc, params->v[i]->name, params->v[i]->name_len,
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
            ok = je_scope_set(r, at, &sc, params->v[i]->name, params->v[i]->name_len,
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
        if (p->a && !je_eval(r, &sc, p->a, &d)) {
            ok = false;
            break;
        }
        ok = je_scope_set(r, at, &sc, p->name, p->name_len, d);
    }
    if (ok) {
        ok = je_scope_set(r, at, &sc, "varargs", 7, varargs);
        if (ok)
            ok = je_scope_set(r, at, &sc, "kwargs", 6, kwargs);
        else
            jv_decref(r, kwargs);
    } else {
        jv_decref(r, varargs);
        jv_decref(r, kwargs);
    }
    if (ok && caller.kind != JV_UNDEF)
        ok = je_scope_set(r, at, &sc, "caller", 6, jv_ref(caller));
    jbuf b = {0};
    if (ok) {
        r->call_depth++;
        ok = je_exec_body(r, &sc, &m->kids, &b) == FLOW_NORMAL;
        r->call_depth--;
    }
    je_scope_release(r, &sc);
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
        else if (p->a && !je_eval(r, &sc, p->a, &v))
            ok = false;
        if (ok)
            ok = je_scope_set(r, at, &sc, p->name, p->name_len, v);
    }
    jbuf b = {0};
    if (ok) {
        r->call_depth++;
        ok = je_exec_body(r, &sc, &blk->kids, &b) == FLOW_NORMAL;
        r->call_depth--;
    }
    je_scope_release(r, &sc);
    if (!ok) {
        jbuf_release(r, &b);
        return false;
    }
    return jbuf_to_str(r, at, &b, out);
}

bool je_call_value(jrender *r, const jnode *at, jv fn, const jv *args, size_t nargs,
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
    return je_call_value(r, at, fn, args, nargs, kwnames, kwvals, nkw, jv_undef(), out);
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
        return je_lookup(r, s, n, n->name, n->name_len, out);
    case JN_GETATTR:
        if (!je_eval(r, s, n->a, &a))
            return false;
        ok = jeval_getattr(r, n, a, n->name, n->name_len, out);
        break;
    case JN_GETITEM:
        if (!je_eval(r, s, n->a, &a) || !je_eval(r, s, n->b, &b))
            break;
        ok = jeval_getitem(r, n, a, b, out);
        break;
    case JN_SLICE: {
        jv c = jv_undef(), d = jv_undef();
        if (!n->a)
            return jr_fail(r, n, TW_INVALID_ARGUMENT, "a slice is not allowed here");
        ok = je_eval(r, s, n->a, &a) && (!n->b || je_eval(r, s, n->b, &b)) &&
             (!n->c || je_eval(r, s, n->c, &c)) && (!n->d || je_eval(r, s, n->d, &d)) &&
             jeval_slice(r, n, a, b, c, d, out);
        jv_decref(r, c);
        jv_decref(r, d);
        break;
    }
    case JN_CALL: {
        jargs args;
        if (!je_eval(r, s, n->a, &a) || !je_eval_args(r, s, &n->kids, &args))
            break;
        ok = je_call_value(r, n, a, args.pos, args.npos, args.kwn, args.kwv, args.nkw, jv_undef(),
                        out);
        je_args_release(r, &args);
        break;
    }
    case JN_FILTER: {
        jargs args;
        if (!je_eval(r, s, n->a, &a) || !je_eval_args(r, s, &n->kids, &args))
            break;
        ok = jfilter_call(r, n, n->name, a, args.pos, args.npos, args.kwn, args.kwv, args.nkw,
                          out);
        je_args_release(r, &args);
        break;
    }
    case JN_TEST: {
        jargs args;
        bool res = false;
        if (!je_eval(r, s, n->a, &a) || !je_eval_args(r, s, &n->kids, &args))
            break;
        if (args.nkw)
            ok = jr_fail(r, n, TW_INVALID_ARGUMENT, "tests take no keyword arguments");
        else
            ok = jtest_call(r, n, n->name, a, args.pos, args.npos, &res);
        je_args_release(r, &args);
        *out = jv_bool(n->flag ? !res : res);
        break;
    }
    case JN_BINOP:
        if (!je_eval(r, s, n->a, &a) || !je_eval(r, s, n->b, &b))
            break;
        ok = jeval_binop(r, n, n->op, a, b, out);
        break;
    case JN_NEG:
    case JN_POS:
        if (!je_eval(r, s, n->a, &a))
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
        if (!je_eval(r, s, n->a, &a))
            break;
        *out = jv_bool(!jv_truthy(a));
        break;
    case JN_AND:
    case JN_OR:
        if (!je_eval(r, s, n->a, &a))
            break;
        if (jv_truthy(a) == (n->kind == JN_OR)) {
            *out = a;
            return true;
        }
        jv_decref(r, a);
        return je_eval(r, s, n->b, out);
    case JN_COND:
        if (!je_eval(r, s, n->a, &a))
            break;
        if (jv_truthy(a))
            ok = je_eval(r, s, n->b, out);
        else if (n->c)
            ok = je_eval(r, s, n->c, out);
        break;
    case JN_COMPARE: {
        if (!je_eval(r, s, n->a, &a))
            break;
        bool res = true;
        for (size_t i = 0; ok && res && i < n->kids.n; i++) {
            const jnode *o = n->kids.v[i];
            if (!je_eval(r, s, o->a, &b)) {
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
            if (!je_eval(r, s, n->kids.v[i], &x) || !jlist_push(r, n, jv_list_of(*out), x)) {
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
            if (!je_eval(r, s, n->kids.v[i], &k)) {
                ok = false;
                break;
            }
            if (k.kind == JV_DICT || k.kind == JV_LIST || k.kind == JV_NS || k.kind == JV_UNDEF) {
                jv_decref(r, k);
                ok = jr_fail(r, n, TW_INVALID_ARGUMENT, "unhashable dict key");
                break;
            }
            ok = je_eval(r, s, n->kids2.v[i], &v) && jdict_set(r, n, jv_dict_of(*out), k, v);
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

bool je_eval(jrender *r, jscope *s, const jnode *n, jv *out)
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
