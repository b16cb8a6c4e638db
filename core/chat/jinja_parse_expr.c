/* Expressions of the chat-template parser: Jinja2's precedence climbing
 * (or, and, not, comparisons, + -, ~, * / // %, **, unary, filters and
 * tests, postfix calls and subscripts, literals). */
#include "jinja_parser.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- expressions ------------------------------------------------------ */

static jnode *parse_unary(parser *p, bool with_filter);
static jnode *parse_primary(parser *p);
static jnode *parse_postfix(parser *p, jnode *n);

static jnode *parse_or(parser *p);

static jnode *parse_condexpr(parser *p)
{
    jnode *e1 = parse_or(p);
    while (e1 && jp_is_name(jp_cur(p), "if")) {
        const jtok *at = jp_cur(p);
        jp_advance(p);
        jnode *c = jp_node(p, JN_COND, at);
        if (!c)
            return NULL;
        c->a = parse_or(p); /* the condition */
        c->b = e1;
        if (!c->a)
            return NULL;
        if (jp_skip_name(p, "else")) {
            c->c = parse_condexpr(p);
            if (!c->c)
                return NULL;
        }
        e1 = c;
    }
    return e1;
}

static jnode *parse_and(parser *p);
static jnode *parse_not(parser *p);

static jnode *parse_or(parser *p)
{
    jnode *l = parse_and(p);
    while (l && jp_is_name(jp_cur(p), "or")) {
        jnode *n = jp_node(p, JN_OR, jp_cur(p));
        jp_advance(p);
        if (!n)
            return NULL;
        n->a = l;
        n->b = parse_and(p);
        if (!n->b)
            return NULL;
        l = n;
    }
    return l;
}

static jnode *parse_and(parser *p)
{
    jnode *l = parse_not(p);
    while (l && jp_is_name(jp_cur(p), "and")) {
        jnode *n = jp_node(p, JN_AND, jp_cur(p));
        jp_advance(p);
        if (!n)
            return NULL;
        n->a = l;
        n->b = parse_not(p);
        if (!n->b)
            return NULL;
        l = n;
    }
    return l;
}

static jnode *parse_compare(parser *p);

static jnode *parse_not(parser *p)
{
    if (jp_is_name(jp_cur(p), "not")) {
        if (!jp_enter(p))
            return NULL;
        jnode *n = jp_node(p, JN_NOT, jp_cur(p));
        jp_advance(p);
        if (!n)
            return NULL;
        n->a = parse_not(p);
        p->depth--;
        return n->a ? n : NULL;
    }
    return parse_compare(p);
}

static jnode *parse_math1(parser *p);

static jnode *parse_compare(parser *p)
{
    const jtok *start = jp_cur(p);
    jnode *e = parse_math1(p);
    if (!e)
        return NULL;
    jnode *cmp = NULL;
    for (;;) {
        const jtok *t = jp_cur(p);
        jop op = JOP_NONE;
        if (t->kind == JT_OP) {
            if (!strcmp(t->s, "=="))
                op = JOP_EQ;
            else if (!strcmp(t->s, "!="))
                op = JOP_NE;
            else if (!strcmp(t->s, "<"))
                op = JOP_LT;
            else if (!strcmp(t->s, "<="))
                op = JOP_LE;
            else if (!strcmp(t->s, ">"))
                op = JOP_GT;
            else if (!strcmp(t->s, ">="))
                op = JOP_GE;
        } else if (jp_is_name(t, "in")) {
            op = JOP_IN;
        } else if (jp_is_name(t, "not") && jp_is_name(jp_peek(p, 1), "in")) {
            op = JOP_NOTIN;
            jp_advance(p);
        }
        if (op == JOP_NONE)
            break;
        jp_advance(p);
        if (!cmp) {
            cmp = jp_node(p, JN_COMPARE, start);
            if (!cmp)
                return NULL;
            cmp->a = e;
        }
        jnode *o = jp_node(p, JN_CMPOP, t);
        if (!o)
            return NULL;
        o->op = op;
        o->a = parse_math1(p);
        if (!o->a || !jp_vec_push(p, &cmp->kids, o))
            return NULL;
    }
    return cmp ? cmp : e;
}

static jnode *binop(parser *p, const jtok *at, jop op, jnode *l, jnode *r)
{
    if (!l || !r)
        return NULL;
    jnode *n = jp_node(p, JN_BINOP, at);
    if (!n)
        return NULL;
    n->op = op;
    n->a = l;
    n->b = r;
    return n;
}

static jnode *parse_concat(parser *p);
static jnode *parse_math2(parser *p);
static jnode *parse_pow(parser *p);

static jnode *parse_math1(parser *p)
{
    jnode *l = parse_concat(p);
    while (l && (jp_is_op(jp_cur(p), "+") || jp_is_op(jp_cur(p), "-"))) {
        const jtok *t = jp_cur(p);
        jp_advance(p);
        l = binop(p, t, t->s[0] == '+' ? JOP_ADD : JOP_SUB, l, parse_concat(p));
    }
    return l;
}

static jnode *parse_concat(parser *p)
{
    jnode *l = parse_math2(p);
    while (l && jp_is_op(jp_cur(p), "~")) {
        const jtok *t = jp_cur(p);
        jp_advance(p);
        l = binop(p, t, JOP_CONCAT, l, parse_math2(p));
    }
    return l;
}

static jnode *parse_math2(parser *p)
{
    jnode *l = parse_pow(p);
    for (;;) {
        const jtok *t = jp_cur(p);
        jop op = jp_is_op(t, "*") ? JOP_MUL : jp_is_op(t, "/") ? JOP_DIV : jp_is_op(t, "//") ? JOP_FLOORDIV
               : jp_is_op(t, "%") ? JOP_MOD : JOP_NONE;
        if (!l || op == JOP_NONE)
            return l;
        jp_advance(p);
        l = binop(p, t, op, l, parse_pow(p));
    }
}

static jnode *parse_pow(parser *p)
{
    jnode *l = parse_unary(p, true);
    while (l && jp_is_op(jp_cur(p), "**")) {
        const jtok *t = jp_cur(p);
        jp_advance(p);
        l = binop(p, t, JOP_POW, l, parse_unary(p, true));
    }
    return l;
}

static jnode *parse_unary(parser *p, bool with_filter)
{
    if (!jp_enter(p))
        return NULL;
    const jtok *t = jp_cur(p);
    jnode *n;
    if (jp_is_op(t, "-") || jp_is_op(t, "+")) {
        jp_advance(p);
        n = jp_node(p, t->s[0] == '-' ? JN_NEG : JN_POS, t);
        if (n) {
            n->a = parse_unary(p, false);
            if (!n->a)
                n = NULL;
        }
    } else {
        n = parse_primary(p);
    }
    n = parse_postfix(p, n);
    if (with_filter)
        n = jp_parse_filter_expr(p, n);
    p->depth--;
    return n;
}

static jnode *const_node(parser *p, const jtok *at, jv v)
{
    jnode *n = jp_node(p, JN_CONST, at);
    if (n)
        n->value = v;
    return n;
}

static jnode *parse_seq(parser *p, jnkind kind, const char *close, const jtok *at)
{
    jnode *n = jp_node(p, kind, at);
    if (!n)
        return NULL;
    while (!jp_is_op(jp_cur(p), close)) {
        if ((n->kids.n || n->kids2.n) && !jp_expect_op(p, ","))
            return NULL;
        if (jp_is_op(jp_cur(p), close))
            break;
        if (kind == JN_DICT) {
            jnode *k = jp_parse_expression(p, true);
            if (!k || !jp_expect_op(p, ":"))
                return NULL;
            jnode *v = jp_parse_expression(p, true);
            if (!jp_vec_push(p, &n->kids, k) || !jp_vec_push(p, &n->kids2, v))
                return NULL;
        } else if (!jp_vec_push(p, &n->kids, jp_parse_expression(p, true))) {
            return NULL;
        }
    }
    jp_advance(p);
    return n;
}

static jnode *parse_primary(parser *p)
{
    const jtok *t = jp_cur(p);
    switch (t->kind) {
    case JT_NAME:
        jp_advance(p);
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True"))
            return const_node(p, t, jv_bool(true));
        if (!strcmp(t->s, "false") || !strcmp(t->s, "False"))
            return const_node(p, t, jv_bool(false));
        if (!strcmp(t->s, "none") || !strcmp(t->s, "None"))
            return const_node(p, t, jv_none());
        {
            jnode *n = jp_node(p, JN_NAME, t);
            if (n) {
                n->name = t->s;
                n->name_len = t->len;
            }
            return n;
        }
    case JT_STRING: {
        /* Adjacent string literals concatenate, as in Python. */
        size_t total = 0, j = p->i;
        while (p->t->v[j].kind == JT_STRING)
            total += p->t->v[j++].len;
        char *buf = jarena_alloc(p->a, total + 1);
        if (!buf)
            return jp_fail(p, t, "out of memory");
        size_t o = 0;
        while (jp_cur(p)->kind == JT_STRING) {
            memcpy(buf + o, jp_cur(p)->s, jp_cur(p)->len);
            o += jp_cur(p)->len;
            jp_advance(p);
        }
        jv v = jv_literal_str(p->a, buf, total);
        if (v.kind != JV_STR)
            return jp_fail(p, t, "out of memory");
        return const_node(p, t, v);
    }
    case JT_INT:
        jp_advance(p);
        return const_node(p, t, jv_int(t->ival));
    case JT_FLOAT:
        jp_advance(p);
        return const_node(p, t, jv_float(t->fval));
    case JT_OP:
        if (jp_is_op(t, "(")) {
            jp_advance(p);
            jnode *n = jp_parse_tuple(p, false, true, NULL, true);
            if (!n || !jp_expect_op(p, ")"))
                return NULL;
            return n;
        }
        if (jp_is_op(t, "[")) {
            jp_advance(p);
            return parse_seq(p, JN_LIST, "]", t);
        }
        if (jp_is_op(t, "{")) {
            jp_advance(p);
            return parse_seq(p, JN_DICT, "}", t);
        }
        break;
    default:
        break;
    }
    return jp_unexpected(p, "an expression");
}

static bool tuple_end(const parser *p, const char *extra_end)
{
    const jtok *t = jp_cur(p);
    if (t->kind == JT_VAR_END || t->kind == JT_BLOCK_END || jp_is_op(t, ")"))
        return true;
    return extra_end && jp_is_name(t, extra_end);
}

jnode *jp_parse_tuple(parser *p, bool simplified, bool with_condexpr, const char *extra_end,
                      bool explicit_parens)
{
    const jtok *start = jp_cur(p);
    jnode *tup = jp_node(p, JN_TUPLE, start);
    if (!tup)
        return NULL;
    bool is_tuple = false;
    for (;;) {
        if (tup->kids.n && !jp_expect_op(p, ","))
            return NULL;
        if (tuple_end(p, extra_end))
            break;
        jnode *e = simplified ? parse_primary(p) : jp_parse_expression(p, with_condexpr);
        if (!jp_vec_push(p, &tup->kids, e))
            return NULL;
        if (jp_is_op(jp_cur(p), ","))
            is_tuple = true;
        else
            break;
    }
    if (!is_tuple) {
        if (tup->kids.n)
            return tup->kids.v[0];
        if (!explicit_parens)
            return jp_unexpected(p, "an expression");
    }
    return tup;
}

jnode *jp_parse_expression(parser *p, bool with_condexpr)
{
    if (!jp_enter(p))
        return NULL;
    jnode *n = with_condexpr ? parse_condexpr(p) : parse_or(p);
    p->depth--;
    return n;
}

/* Arguments of a call, filter or test: positional then name=value. */
bool jp_parse_args(parser *p, jnvec *args)
{
    if (!jp_expect_op(p, "("))
        return false;
    while (!jp_is_op(jp_cur(p), ")")) {
        if (args->n && !jp_expect_op(p, ","))
            return false;
        if (jp_is_op(jp_cur(p), ")"))
            break;
        if (jp_is_op(jp_cur(p), "*") || jp_is_op(jp_cur(p), "**")) {
            jp_fail(p, jp_cur(p), "*args and **kwargs in calls are not supported");
            return false;
        }
        if (jp_cur(p)->kind == JT_NAME && jp_is_op(jp_peek(p, 1), "=")) {
            jnode *kw = jp_node(p, JN_KWARG, jp_cur(p));
            if (!kw)
                return false;
            kw->name = jp_cur(p)->s;
            kw->name_len = jp_cur(p)->len;
            jp_advance(p);
            jp_advance(p);
            kw->a = jp_parse_expression(p, true);
            if (!kw->a || !jp_vec_push(p, args, kw))
                return false;
        } else {
            for (size_t k = 0; k < args->n; k++)
                if (args->v[k]->kind == JN_KWARG) {
                    jp_fail(p, jp_cur(p), "positional argument follows keyword argument");
                    return false;
                }
            if (!jp_vec_push(p, args, jp_parse_expression(p, true)))
                return false;
        }
    }
    jp_advance(p);
    return true;
}

static jnode *parse_subscribed(parser *p)
{
    const jtok *at = jp_cur(p);
    jnode *start = NULL;
    if (!jp_is_op(jp_cur(p), ":")) {
        start = jp_parse_expression(p, true);
        if (!start || !jp_is_op(jp_cur(p), ":"))
            return start;
    }
    jp_advance(p); /* ':' */
    jnode *s = jp_node(p, JN_SLICE, at);
    if (!s)
        return NULL;
    s->b = start;
    if (!jp_is_op(jp_cur(p), "]") && !jp_is_op(jp_cur(p), ",") && !jp_is_op(jp_cur(p), ":")) {
        s->c = jp_parse_expression(p, true);
        if (!s->c)
            return NULL;
    }
    if (jp_skip_op(p, ":") && !jp_is_op(jp_cur(p), "]") && !jp_is_op(jp_cur(p), ",")) {
        s->d = jp_parse_expression(p, true);
        if (!s->d)
            return NULL;
    }
    return s;
}

static jnode *parse_postfix(parser *p, jnode *n)
{
    while (n) {
        const jtok *t = jp_cur(p);
        if (jp_is_op(t, ".")) {
            jp_advance(p);
            const jtok *a = jp_cur(p);
            if (a->kind == JT_NAME) {
                jnode *g = jp_node(p, JN_GETATTR, t);
                if (!g)
                    return NULL;
                g->a = n;
                g->name = a->s;
                g->name_len = a->len;
                jp_advance(p);
                n = g;
            } else if (a->kind == JT_INT) {
                jnode *g = jp_node(p, JN_GETITEM, t);
                if (!g)
                    return NULL;
                g->a = n;
                g->b = const_node(p, a, jv_int(a->ival));
                jp_advance(p);
                n = g->b ? g : NULL;
            } else {
                return jp_unexpected(p, "an attribute name");
            }
        } else if (jp_is_op(t, "[")) {
            jp_advance(p);
            jnode *g = jp_node(p, JN_GETITEM, t);
            if (!g)
                return NULL;
            g->a = n;
            jnode *tup = NULL;
            while (!jp_is_op(jp_cur(p), "]")) {
                jnode *s = parse_subscribed(p);
                if (!s)
                    return NULL;
                if (!g->b) {
                    g->b = s;
                } else {
                    if (!tup) {
                        tup = jp_node(p, JN_TUPLE, t);
                        if (!tup || !jp_vec_push(p, &tup->kids, g->b))
                            return NULL;
                    }
                    if (!jp_vec_push(p, &tup->kids, s))
                        return NULL;
                }
                if (!jp_skip_op(p, ","))
                    break;
            }
            if (!jp_expect_op(p, "]"))
                return NULL;
            if (tup)
                g->b = tup;
            if (!g->b)
                return jp_fail(p, t, "empty subscript");
            if (g->b->kind == JN_SLICE) {
                g->b->a = n;
                n = g->b;
            } else {
                n = g;
            }
        } else if (jp_is_op(t, "(")) {
            jnode *c = jp_node(p, JN_CALL, t);
            if (!c)
                return NULL;
            c->a = n;
            if (!jp_parse_args(p, &c->kids))
                return NULL;
            n = c;
        } else {
            break;
        }
    }
    return n;
}

/* A dotted filter or test name such as "tojson" (dots are kept). */
bool jp_dotted_name(parser *p, jnode *n)
{
    if (jp_cur(p)->kind != JT_NAME) {
        jp_unexpected(p, "a name");
        return false;
    }
    n->name = jp_cur(p)->s;
    n->name_len = jp_cur(p)->len;
    jp_advance(p);
    return true;
}

jnode *jp_parse_filter_expr(parser *p, jnode *n)
{
    while (n) {
        const jtok *t = jp_cur(p);
        if (jp_is_op(t, "|")) {
            jp_advance(p);
            const jtok *fname = jp_cur(p);
            jnode *f = jp_node(p, JN_FILTER, fname);
            if (!f || !jp_dotted_name(p, f))
                return NULL;
            if (!jfilter_exists(f->name))
                return jp_fail(p, fname, "no filter named '%.40s'", f->name);
            f->a = n;
            if (jp_is_op(jp_cur(p), "(") && !jp_parse_args(p, &f->kids))
                return NULL;
            n = f;
        } else if (jp_is_name(t, "is")) {
            jp_advance(p);
            jnode *f = jp_node(p, JN_TEST, jp_cur(p));
            if (!f)
                return NULL;
            f->flag = jp_skip_name(p, "not");
            const jtok *tname = jp_cur(p);
            if (!jp_dotted_name(p, f))
                return NULL;
            if (!jtest_exists(f->name))
                return jp_fail(p, tname, "no test named '%.40s'", f->name);
            f->a = n;
            const jtok *u = jp_cur(p);
            if (jp_is_op(u, "(")) {
                if (!jp_parse_args(p, &f->kids))
                    return NULL;
            } else if ((u->kind == JT_NAME || u->kind == JT_STRING || u->kind == JT_INT ||
                        u->kind == JT_FLOAT || jp_is_op(u, "[") || jp_is_op(u, "{")) &&
                       !jp_is_name(u, "else") && !jp_is_name(u, "or") && !jp_is_name(u, "and") &&
                       !jp_is_name(u, "if") && !jp_is_name(u, "is") && !jp_is_name(u, "in") &&
                       !jp_is_name(u, "not") && !jp_is_name(u, "recursive")) {
                jnode *arg = parse_postfix(p, parse_primary(p));
                if (!jp_vec_push(p, &f->kids, arg))
                    return NULL;
            }
            n = f;
        } else if (jp_is_op(t, "(")) {
            jnode *c = jp_node(p, JN_CALL, t);
            if (!c)
                return NULL;
            c->a = n;
            if (!jp_parse_args(p, &c->kids))
                return NULL;
            n = c;
        } else {
            break;
        }
    }
    return n;
}
