/* Statements of the evaluator: assignment (with the namespace rule),
 * for-loops and their loop object, if, set blocks, call and filter blocks,
 * macros, and the template body. */
#include "jinja_evaluator.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
        return je_scope_set(r, target, s, target->name, target->name_len, v);
    if (target->kind == JN_GETATTR) {
        jv ns;
        if (!je_lookup(r, s, target, target->a->name, target->a->name_len, &ns)) {
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
    if (!je_eval(r, s, n->b, &seqv))
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
                 je_eval(r, &sc, n->c, &cond);
            if (ok && jv_truthy(cond))
                ok = jlist_push(r, n, jv_list_of(kept), jv_ref(l->items[i]));
            jv_decref(r, cond);
        }
        jv_decref(r, items);
        items = kept;
        je_scope_release(r, &sc);
        sc = (jscope){.parent = s};
        if (!ok) {
            jv_decref(r, items);
            return FLOW_ERROR;
        }
    }
    const jlist *l = jv_list_of(items);
    flow f = FLOW_NORMAL;
    if (l->n == 0) {
        f = je_exec_body(r, &sc, &n->kids2, out);
    } else {
        jv loopv;
        ok = jv_new_loop(r, n, l, &loopv) && je_scope_set(r, n, &sc, "loop", 4, loopv);
        for (size_t i = 0; ok && i < l->n; i++) {
            jv_loop_of(loopv)->index0 = i;
            if (!jr_step(r, n) || !assign(r, &sc, n->a, jv_ref(l->items[i]))) {
                ok = false;
                break;
            }
            f = je_exec_body(r, &sc, &n->kids, out);
            if (f == FLOW_ERROR || f == FLOW_BREAK)
                break;
            f = FLOW_NORMAL;
        }
        if (!ok)
            f = FLOW_ERROR;
        else if (f == FLOW_BREAK)
            f = FLOW_NORMAL;
    }
    je_scope_release(r, &sc);
    jv_decref(r, items);
    return f;
}

static bool capture(jrender *r, jscope *s, const jnode *n, jv *out)
{
    jbuf b = {0};
    flow f = je_exec_body(r, s, &n->kids, &b);
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
    bool ok = je_eval(r, s, n->b, out);
    r->hole = saved;
    r->hole_value = saved_v;
    return ok;
}

static flow exec_stmt(jrender *r, jscope *s, const jnode *n, jbuf *out)
{
    jv v = jv_undef();
    switch (n->kind) {
    case JN_TEXT:
        return je_emit(r, n, out, jv_str_of(n->value)->data, jv_str_of(n->value)->len)
                   ? FLOW_NORMAL
                   : FLOW_ERROR;
    case JN_OUTPUT: {
        if (!je_eval(r, s, n->a, &v))
            return FLOW_ERROR;
        bool ok = je_emit_value(r, n, out, v);
        jv_decref(r, v);
        return ok ? FLOW_NORMAL : FLOW_ERROR;
    }
    case JN_BODY:
        return je_exec_body(r, s, &n->kids, out);
    case JN_IF: {
        if (!je_eval(r, s, n->a, &v))
            return FLOW_ERROR;
        bool t = jv_truthy(v);
        jv_decref(r, v);
        return je_exec_body(r, s, t ? &n->kids : &n->kids2, out);
    }
    case JN_FOR:
        return exec_for(r, s, n, out);
    case JN_SET:
        if (!je_eval(r, s, n->b, &v))
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
        return je_scope_set(r, n, s, n->name, n->name_len, f) ? FLOW_NORMAL : FLOW_ERROR;
    }
    case JN_CALL_BLOCK: {
        const jnode *call = n->a;
        jv fn, caller;
        jargs args;
        if (!je_eval(r, s, call->a, &fn))
            return FLOW_ERROR;
        if (!je_eval_args(r, s, &call->kids, &args)) {
            jv_decref(r, fn);
            return FLOW_ERROR;
        }
        bool ok = jv_new_func(r, n, JF_CALLER, "caller", NULL, jv_undef(), &caller);
        if (ok) {
            jv_func_of(caller)->node = n;
            jv_func_of(caller)->scope = s;
            ok = je_call_value(r, call, fn, args.pos, args.npos, args.kwn, args.kwv, args.nkw,
                            caller, &v);
            jv_func_of(caller)->scope = NULL;
            jv_decref(r, caller);
        }
        je_args_release(r, &args);
        jv_decref(r, fn);
        if (ok)
            ok = je_emit_value(r, n, out, v);
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
            ok = je_emit_value(r, n, out, f);
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

flow je_exec_body(jrender *r, jscope *s, const jnvec *body, jbuf *out)
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
    flow f = je_exec_body(r, &top, &root->kids, out);
    je_scope_release(r, &top);
    r->top = NULL;
    if (f == FLOW_ERROR || !jr_ok(r))
        return false;
    return true;
}
