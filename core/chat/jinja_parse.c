/* Parser: tokens -> syntax tree, following Jinja2's grammar and operator
 * precedence (parser.py), so that expressions group exactly as they do in
 * the reference implementation. */
#include "jinja.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 100

typedef struct parser {
    const jtoks *t;
    size_t i;
    jarena *a;
    tw_err *err;
    tw_status st;
    unsigned depth;
    unsigned loops; /* enclosing for-loops, for break/continue */
} parser;

static const jtok *cur(const parser *p) { return &p->t->v[p->i]; }
static const jtok *peek(const parser *p, size_t k)
{
    size_t j = p->i + k;
    return &p->t->v[j < p->t->n ? j : p->t->n - 1];
}
static void advance(parser *p)
{
    if (p->i + 1 < p->t->n)
        p->i++;
}

static const char *tok_desc(const jtok *t, char *buf, size_t cap)
{
    switch (t->kind) {
    case JT_EOF: return "end of template";
    case JT_TEXT: return "template data";
    case JT_VAR_BEGIN: return "'{{'";
    case JT_VAR_END: return "end of print statement";
    case JT_BLOCK_BEGIN: return "'{%'";
    case JT_BLOCK_END: return "end of statement block";
    case JT_STRING: return "string";
    case JT_INT: return "integer";
    case JT_FLOAT: return "float";
    case JT_NAME:
    case JT_OP:
        snprintf(buf, cap, "'%.40s'", t->s);
        return buf;
    }
    return "token";
}

static jnode *fail(parser *p, const jtok *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static jnode *fail(parser *p, const jtok *at, const char *fmt, ...)
{
    if (p->st == TW_OK) {
        char msg[TW_ERR_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        p->st = tw_errorf(p->err, TW_INVALID_ARGUMENT, "chat template line %d, column %d: %s",
                          at->line, at->col, msg);
    }
    return NULL;
}

static jnode *unexpected(parser *p, const char *expected)
{
    char buf[64];
    return fail(p, cur(p), "unexpected %s, expected %s", tok_desc(cur(p), buf, sizeof buf),
                expected);
}

static jnode *node(parser *p, jnkind kind, const jtok *at)
{
    jnode *n = jarena_alloc(p->a, sizeof *n);
    if (!n) {
        if (p->st == TW_OK)
            p->st = tw_errorf(p->err, TW_RESOURCE_EXHAUSTED, "chat template: out of memory");
        return NULL;
    }
    n->kind = kind;
    n->line = at->line;
    n->col = at->col;
    return n;
}

static bool vec_push(parser *p, jnvec *v, jnode *n)
{
    if (!n)
        return false;
    if (v->n == v->cap) {
        size_t ncap = v->cap ? v->cap * 2 : 4;
        jnode **nv = jarena_alloc(p->a, ncap * sizeof *nv);
        if (!nv) {
            if (p->st == TW_OK)
                p->st = tw_errorf(p->err, TW_RESOURCE_EXHAUSTED, "chat template: out of memory");
            return false;
        }
        if (v->n)
            memcpy(nv, v->v, v->n * sizeof *nv);
        v->v = nv;
        v->cap = ncap;
    }
    v->v[v->n++] = n;
    return true;
}

static bool is_op(const jtok *t, const char *op)
{
    return t->kind == JT_OP && strcmp(t->s, op) == 0;
}

static bool is_name(const jtok *t, const char *name)
{
    return t->kind == JT_NAME && strcmp(t->s, name) == 0;
}

static bool skip_op(parser *p, const char *op)
{
    if (!is_op(cur(p), op))
        return false;
    advance(p);
    return true;
}

static bool skip_name(parser *p, const char *name)
{
    if (!is_name(cur(p), name))
        return false;
    advance(p);
    return true;
}

static bool expect_op(parser *p, const char *op)
{
    if (skip_op(p, op))
        return true;
    char want[16];
    snprintf(want, sizeof want, "'%s'", op);
    unexpected(p, want);
    return false;
}

static bool enter(parser *p)
{
    if (++p->depth > MAX_DEPTH) {
        fail(p, cur(p), "template nested more than %d levels deep", MAX_DEPTH);
        return false;
    }
    return true;
}

/* ---- expressions ------------------------------------------------------ */

static jnode *parse_expression(parser *p, bool with_condexpr);
static jnode *parse_tuple(parser *p, bool simplified, bool with_condexpr, const char *extra_end,
                          bool explicit_parens);
static jnode *parse_unary(parser *p, bool with_filter);
static jnode *parse_primary(parser *p);
static jnode *parse_postfix(parser *p, jnode *n);
static jnode *parse_filter_expr(parser *p, jnode *n);

static jnode *parse_or(parser *p);

static jnode *parse_condexpr(parser *p)
{
    jnode *e1 = parse_or(p);
    while (e1 && is_name(cur(p), "if")) {
        const jtok *at = cur(p);
        advance(p);
        jnode *c = node(p, JN_COND, at);
        if (!c)
            return NULL;
        c->a = parse_or(p); /* the condition */
        c->b = e1;
        if (!c->a)
            return NULL;
        if (skip_name(p, "else")) {
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
    while (l && is_name(cur(p), "or")) {
        jnode *n = node(p, JN_OR, cur(p));
        advance(p);
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
    while (l && is_name(cur(p), "and")) {
        jnode *n = node(p, JN_AND, cur(p));
        advance(p);
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
    if (is_name(cur(p), "not")) {
        if (!enter(p))
            return NULL;
        jnode *n = node(p, JN_NOT, cur(p));
        advance(p);
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
    const jtok *start = cur(p);
    jnode *e = parse_math1(p);
    if (!e)
        return NULL;
    jnode *cmp = NULL;
    for (;;) {
        const jtok *t = cur(p);
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
        } else if (is_name(t, "in")) {
            op = JOP_IN;
        } else if (is_name(t, "not") && is_name(peek(p, 1), "in")) {
            op = JOP_NOTIN;
            advance(p);
        }
        if (op == JOP_NONE)
            break;
        advance(p);
        if (!cmp) {
            cmp = node(p, JN_COMPARE, start);
            if (!cmp)
                return NULL;
            cmp->a = e;
        }
        jnode *o = node(p, JN_CMPOP, t);
        if (!o)
            return NULL;
        o->op = op;
        o->a = parse_math1(p);
        if (!o->a || !vec_push(p, &cmp->kids, o))
            return NULL;
    }
    return cmp ? cmp : e;
}

static jnode *binop(parser *p, const jtok *at, jop op, jnode *l, jnode *r)
{
    if (!l || !r)
        return NULL;
    jnode *n = node(p, JN_BINOP, at);
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
    while (l && (is_op(cur(p), "+") || is_op(cur(p), "-"))) {
        const jtok *t = cur(p);
        advance(p);
        l = binop(p, t, t->s[0] == '+' ? JOP_ADD : JOP_SUB, l, parse_concat(p));
    }
    return l;
}

static jnode *parse_concat(parser *p)
{
    jnode *l = parse_math2(p);
    while (l && is_op(cur(p), "~")) {
        const jtok *t = cur(p);
        advance(p);
        l = binop(p, t, JOP_CONCAT, l, parse_math2(p));
    }
    return l;
}

static jnode *parse_math2(parser *p)
{
    jnode *l = parse_pow(p);
    for (;;) {
        const jtok *t = cur(p);
        jop op = is_op(t, "*") ? JOP_MUL : is_op(t, "/") ? JOP_DIV : is_op(t, "//") ? JOP_FLOORDIV
               : is_op(t, "%") ? JOP_MOD : JOP_NONE;
        if (!l || op == JOP_NONE)
            return l;
        advance(p);
        l = binop(p, t, op, l, parse_pow(p));
    }
}

static jnode *parse_pow(parser *p)
{
    jnode *l = parse_unary(p, true);
    while (l && is_op(cur(p), "**")) {
        const jtok *t = cur(p);
        advance(p);
        l = binop(p, t, JOP_POW, l, parse_unary(p, true));
    }
    return l;
}

static jnode *parse_unary(parser *p, bool with_filter)
{
    if (!enter(p))
        return NULL;
    const jtok *t = cur(p);
    jnode *n;
    if (is_op(t, "-") || is_op(t, "+")) {
        advance(p);
        n = node(p, t->s[0] == '-' ? JN_NEG : JN_POS, t);
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
        n = parse_filter_expr(p, n);
    p->depth--;
    return n;
}

static jnode *const_node(parser *p, const jtok *at, jv v)
{
    jnode *n = node(p, JN_CONST, at);
    if (n)
        n->value = v;
    return n;
}

static jnode *parse_seq(parser *p, jnkind kind, const char *close, const jtok *at)
{
    jnode *n = node(p, kind, at);
    if (!n)
        return NULL;
    while (!is_op(cur(p), close)) {
        if ((n->kids.n || n->kids2.n) && !expect_op(p, ","))
            return NULL;
        if (is_op(cur(p), close))
            break;
        if (kind == JN_DICT) {
            jnode *k = parse_expression(p, true);
            if (!k || !expect_op(p, ":"))
                return NULL;
            jnode *v = parse_expression(p, true);
            if (!vec_push(p, &n->kids, k) || !vec_push(p, &n->kids2, v))
                return NULL;
        } else if (!vec_push(p, &n->kids, parse_expression(p, true))) {
            return NULL;
        }
    }
    advance(p);
    return n;
}

static jnode *parse_primary(parser *p)
{
    const jtok *t = cur(p);
    switch (t->kind) {
    case JT_NAME:
        advance(p);
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True"))
            return const_node(p, t, jv_bool(true));
        if (!strcmp(t->s, "false") || !strcmp(t->s, "False"))
            return const_node(p, t, jv_bool(false));
        if (!strcmp(t->s, "none") || !strcmp(t->s, "None"))
            return const_node(p, t, jv_none());
        {
            jnode *n = node(p, JN_NAME, t);
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
            return fail(p, t, "out of memory");
        size_t o = 0;
        while (cur(p)->kind == JT_STRING) {
            memcpy(buf + o, cur(p)->s, cur(p)->len);
            o += cur(p)->len;
            advance(p);
        }
        jv v = jv_literal_str(p->a, buf, total);
        if (v.kind != JV_STR)
            return fail(p, t, "out of memory");
        return const_node(p, t, v);
    }
    case JT_INT:
        advance(p);
        return const_node(p, t, jv_int(t->ival));
    case JT_FLOAT:
        advance(p);
        return const_node(p, t, jv_float(t->fval));
    case JT_OP:
        if (is_op(t, "(")) {
            advance(p);
            jnode *n = parse_tuple(p, false, true, NULL, true);
            if (!n || !expect_op(p, ")"))
                return NULL;
            return n;
        }
        if (is_op(t, "[")) {
            advance(p);
            return parse_seq(p, JN_LIST, "]", t);
        }
        if (is_op(t, "{")) {
            advance(p);
            return parse_seq(p, JN_DICT, "}", t);
        }
        break;
    default:
        break;
    }
    return unexpected(p, "an expression");
}

static bool tuple_end(const parser *p, const char *extra_end)
{
    const jtok *t = cur(p);
    if (t->kind == JT_VAR_END || t->kind == JT_BLOCK_END || is_op(t, ")"))
        return true;
    return extra_end && is_name(t, extra_end);
}

static jnode *parse_tuple(parser *p, bool simplified, bool with_condexpr, const char *extra_end,
                          bool explicit_parens)
{
    const jtok *start = cur(p);
    jnode *tup = node(p, JN_TUPLE, start);
    if (!tup)
        return NULL;
    bool is_tuple = false;
    for (;;) {
        if (tup->kids.n && !expect_op(p, ","))
            return NULL;
        if (tuple_end(p, extra_end))
            break;
        jnode *e = simplified ? parse_primary(p) : parse_expression(p, with_condexpr);
        if (!vec_push(p, &tup->kids, e))
            return NULL;
        if (is_op(cur(p), ","))
            is_tuple = true;
        else
            break;
    }
    if (!is_tuple) {
        if (tup->kids.n)
            return tup->kids.v[0];
        if (!explicit_parens)
            return unexpected(p, "an expression");
    }
    return tup;
}

static jnode *parse_expression(parser *p, bool with_condexpr)
{
    if (!enter(p))
        return NULL;
    jnode *n = with_condexpr ? parse_condexpr(p) : parse_or(p);
    p->depth--;
    return n;
}

/* Arguments of a call, filter or test: positional then name=value. */
static bool parse_args(parser *p, jnvec *args)
{
    if (!expect_op(p, "("))
        return false;
    while (!is_op(cur(p), ")")) {
        if (args->n && !expect_op(p, ","))
            return false;
        if (is_op(cur(p), ")"))
            break;
        if (is_op(cur(p), "*") || is_op(cur(p), "**")) {
            fail(p, cur(p), "*args and **kwargs in calls are not supported");
            return false;
        }
        if (cur(p)->kind == JT_NAME && is_op(peek(p, 1), "=")) {
            jnode *kw = node(p, JN_KWARG, cur(p));
            if (!kw)
                return false;
            kw->name = cur(p)->s;
            kw->name_len = cur(p)->len;
            advance(p);
            advance(p);
            kw->a = parse_expression(p, true);
            if (!kw->a || !vec_push(p, args, kw))
                return false;
        } else {
            for (size_t k = 0; k < args->n; k++)
                if (args->v[k]->kind == JN_KWARG) {
                    fail(p, cur(p), "positional argument follows keyword argument");
                    return false;
                }
            if (!vec_push(p, args, parse_expression(p, true)))
                return false;
        }
    }
    advance(p);
    return true;
}

static jnode *parse_subscribed(parser *p)
{
    const jtok *at = cur(p);
    jnode *start = NULL;
    if (!is_op(cur(p), ":")) {
        start = parse_expression(p, true);
        if (!start || !is_op(cur(p), ":"))
            return start;
    }
    advance(p); /* ':' */
    jnode *s = node(p, JN_SLICE, at);
    if (!s)
        return NULL;
    s->b = start;
    if (!is_op(cur(p), "]") && !is_op(cur(p), ",") && !is_op(cur(p), ":")) {
        s->c = parse_expression(p, true);
        if (!s->c)
            return NULL;
    }
    if (skip_op(p, ":") && !is_op(cur(p), "]") && !is_op(cur(p), ",")) {
        s->d = parse_expression(p, true);
        if (!s->d)
            return NULL;
    }
    return s;
}

static jnode *parse_postfix(parser *p, jnode *n)
{
    while (n) {
        const jtok *t = cur(p);
        if (is_op(t, ".")) {
            advance(p);
            const jtok *a = cur(p);
            if (a->kind == JT_NAME) {
                jnode *g = node(p, JN_GETATTR, t);
                if (!g)
                    return NULL;
                g->a = n;
                g->name = a->s;
                g->name_len = a->len;
                advance(p);
                n = g;
            } else if (a->kind == JT_INT) {
                jnode *g = node(p, JN_GETITEM, t);
                if (!g)
                    return NULL;
                g->a = n;
                g->b = const_node(p, a, jv_int(a->ival));
                advance(p);
                n = g->b ? g : NULL;
            } else {
                return unexpected(p, "an attribute name");
            }
        } else if (is_op(t, "[")) {
            advance(p);
            jnode *g = node(p, JN_GETITEM, t);
            if (!g)
                return NULL;
            g->a = n;
            jnode *tup = NULL;
            while (!is_op(cur(p), "]")) {
                jnode *s = parse_subscribed(p);
                if (!s)
                    return NULL;
                if (!g->b) {
                    g->b = s;
                } else {
                    if (!tup) {
                        tup = node(p, JN_TUPLE, t);
                        if (!tup || !vec_push(p, &tup->kids, g->b))
                            return NULL;
                    }
                    if (!vec_push(p, &tup->kids, s))
                        return NULL;
                }
                if (!skip_op(p, ","))
                    break;
            }
            if (!expect_op(p, "]"))
                return NULL;
            if (tup)
                g->b = tup;
            if (!g->b)
                return fail(p, t, "empty subscript");
            if (g->b->kind == JN_SLICE) {
                g->b->a = n;
                n = g->b;
            } else {
                n = g;
            }
        } else if (is_op(t, "(")) {
            jnode *c = node(p, JN_CALL, t);
            if (!c)
                return NULL;
            c->a = n;
            if (!parse_args(p, &c->kids))
                return NULL;
            n = c;
        } else {
            break;
        }
    }
    return n;
}

/* A dotted filter or test name such as "tojson" (dots are kept). */
static bool dotted_name(parser *p, jnode *n)
{
    if (cur(p)->kind != JT_NAME) {
        unexpected(p, "a name");
        return false;
    }
    n->name = cur(p)->s;
    n->name_len = cur(p)->len;
    advance(p);
    return true;
}

static jnode *parse_filter_expr(parser *p, jnode *n)
{
    while (n) {
        const jtok *t = cur(p);
        if (is_op(t, "|")) {
            advance(p);
            const jtok *fname = cur(p);
            jnode *f = node(p, JN_FILTER, fname);
            if (!f || !dotted_name(p, f))
                return NULL;
            if (!jfilter_exists(f->name))
                return fail(p, fname, "no filter named '%.40s'", f->name);
            f->a = n;
            if (is_op(cur(p), "(") && !parse_args(p, &f->kids))
                return NULL;
            n = f;
        } else if (is_name(t, "is")) {
            advance(p);
            jnode *f = node(p, JN_TEST, cur(p));
            if (!f)
                return NULL;
            f->flag = skip_name(p, "not");
            const jtok *tname = cur(p);
            if (!dotted_name(p, f))
                return NULL;
            if (!jtest_exists(f->name))
                return fail(p, tname, "no test named '%.40s'", f->name);
            f->a = n;
            const jtok *u = cur(p);
            if (is_op(u, "(")) {
                if (!parse_args(p, &f->kids))
                    return NULL;
            } else if ((u->kind == JT_NAME || u->kind == JT_STRING || u->kind == JT_INT ||
                        u->kind == JT_FLOAT || is_op(u, "[") || is_op(u, "{")) &&
                       !is_name(u, "else") && !is_name(u, "or") && !is_name(u, "and") &&
                       !is_name(u, "if") && !is_name(u, "is") && !is_name(u, "in") &&
                       !is_name(u, "not") && !is_name(u, "recursive")) {
                jnode *arg = parse_postfix(p, parse_primary(p));
                if (!vec_push(p, &f->kids, arg))
                    return NULL;
            }
            n = f;
        } else if (is_op(t, "(")) {
            jnode *c = node(p, JN_CALL, t);
            if (!c)
                return NULL;
            c->a = n;
            if (!parse_args(p, &c->kids))
                return NULL;
            n = c;
        } else {
            break;
        }
    }
    return n;
}

/* ---- statements ------------------------------------------------------- */

static jnode *parse_body(parser *p, const char *const *ends, const char **which);

static bool expect_block_end(parser *p)
{
    if (cur(p)->kind == JT_BLOCK_END) {
        advance(p);
        return true;
    }
    unexpected(p, "end of statement block");
    return false;
}

/* Assignment target: a name, a tuple of names, or (for set) ns.attr. */
static jnode *parse_target(parser *p, bool with_namespace, const char *extra_end)
{
    const jtok *t = cur(p);
    if (with_namespace && t->kind == JT_NAME && is_op(peek(p, 1), ".") &&
        peek(p, 2)->kind == JT_NAME) {
        jnode *g = node(p, JN_GETATTR, t);
        jnode *base = node(p, JN_NAME, t);
        if (!g || !base)
            return NULL;
        base->name = t->s;
        base->name_len = t->len;
        g->a = base;
        g->name = peek(p, 2)->s;
        g->name_len = peek(p, 2)->len;
        advance(p);
        advance(p);
        advance(p);
        return g;
    }
    jnode *n = parse_tuple(p, true, true, extra_end, false);
    if (!n)
        return NULL;
    if (n->kind == JN_NAME)
        return n;
    if (n->kind == JN_TUPLE) {
        for (size_t k = 0; k < n->kids.n; k++)
            if (n->kids.v[k]->kind != JN_NAME)
                return fail(p, t, "can only assign to names");
        return n;
    }
    return fail(p, t, "can't assign to this expression");
}

static jnode *parse_for(parser *p, const jtok *at)
{
    jnode *n = node(p, JN_FOR, at);
    if (!n)
        return NULL;
    n->a = parse_target(p, false, "in");
    if (!n->a)
        return NULL;
    if (!skip_name(p, "in"))
        return unexpected(p, "'in'");
    n->b = parse_tuple(p, false, false, "recursive", false);
    if (!n->b)
        return NULL;
    if (skip_name(p, "if")) {
        n->c = parse_expression(p, true);
        if (!n->c)
            return NULL;
    }
    if (is_name(cur(p), "recursive"))
        return fail(p, cur(p), "recursive for-loops are not supported");
    if (!expect_block_end(p))
        return NULL;
    static const char *const ends[] = {"endfor", "else", NULL};
    const char *which = NULL;
    p->loops++;
    jnode *body = parse_body(p, ends, &which);
    p->loops--;
    if (!body)
        return NULL;
    n->kids = body->kids;
    if (!strcmp(which, "else")) {
        if (!expect_block_end(p))
            return NULL;
        static const char *const ends2[] = {"endfor", NULL};
        jnode *eb = parse_body(p, ends2, &which);
        if (!eb)
            return NULL;
        n->kids2 = eb->kids;
    }
    return expect_block_end(p) ? n : NULL;
}

static jnode *parse_if(parser *p, const jtok *at)
{
    jnode *n = node(p, JN_IF, at);
    if (!n)
        return NULL;
    n->a = parse_tuple(p, false, false, NULL, false);
    if (!n->a || !expect_block_end(p))
        return NULL;
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    const char *which = NULL;
    jnode *body = parse_body(p, ends, &which);
    if (!body)
        return NULL;
    n->kids = body->kids;
    if (!strcmp(which, "elif")) {
        jnode *elif = parse_if(p, cur(p));
        if (!elif)
            return NULL;
        return vec_push(p, &n->kids2, elif) ? n : NULL;
    }
    if (!strcmp(which, "else")) {
        if (!expect_block_end(p))
            return NULL;
        static const char *const ends2[] = {"endif", NULL};
        jnode *eb = parse_body(p, ends2, &which);
        if (!eb)
            return NULL;
        n->kids2 = eb->kids;
    }
    return expect_block_end(p) ? n : NULL;
}

static jnode *parse_set(parser *p, const jtok *at)
{
    jnode *target = parse_target(p, true, NULL);
    if (!target)
        return NULL;
    if (skip_op(p, "=")) {
        jnode *n = node(p, JN_SET, at);
        if (!n)
            return NULL;
        n->a = target;
        n->b = parse_tuple(p, false, true, NULL, false);
        if (!n->b || !expect_block_end(p))
            return NULL;
        return n;
    }
    jnode *n = node(p, JN_SET_BLOCK, at);
    if (!n)
        return NULL;
    n->a = target;
    /* {% set x | filter %}: the filters apply to the captured body. */
    if (is_op(cur(p), "|")) {
        jnode *ph = node(p, JN_CONST, cur(p));
        if (!ph)
            return NULL;
        ph->value = jv_undef();
        n->b = parse_filter_expr(p, ph);
        if (!n->b)
            return NULL;
        n->c = ph;
    }
    if (!expect_block_end(p))
        return NULL;
    static const char *const ends[] = {"endset", NULL};
    const char *which = NULL;
    jnode *body = parse_body(p, ends, &which);
    if (!body)
        return NULL;
    n->kids = body->kids;
    return expect_block_end(p) ? n : NULL;
}

static bool parse_params(parser *p, jnvec *params)
{
    if (!expect_op(p, "("))
        return false;
    while (!is_op(cur(p), ")")) {
        if (params->n && !expect_op(p, ","))
            return false;
        if (cur(p)->kind != JT_NAME) {
            unexpected(p, "a parameter name");
            return false;
        }
        jnode *prm = node(p, JN_PARAM, cur(p));
        if (!prm)
            return false;
        prm->name = cur(p)->s;
        prm->name_len = cur(p)->len;
        advance(p);
        if (skip_op(p, "=")) {
            prm->a = parse_expression(p, true);
            if (!prm->a)
                return false;
        } else if (params->n && params->v[params->n - 1]->a) {
            fail(p, cur(p), "parameter without a default follows one with a default");
            return false;
        }
        if (!vec_push(p, params, prm))
            return false;
    }
    advance(p);
    return true;
}

static jnode *parse_macro(parser *p, const jtok *at)
{
    jnode *n = node(p, JN_MACRO, at);
    if (!n)
        return NULL;
    if (cur(p)->kind != JT_NAME)
        return unexpected(p, "a macro name");
    n->name = cur(p)->s;
    n->name_len = cur(p)->len;
    advance(p);
    if (!parse_params(p, &n->kids2) || !expect_block_end(p))
        return NULL;
    static const char *const ends[] = {"endmacro", NULL};
    const char *which = NULL;
    unsigned loops = p->loops;
    p->loops = 0;
    jnode *body = parse_body(p, ends, &which);
    p->loops = loops;
    if (!body)
        return NULL;
    n->kids = body->kids;
    return expect_block_end(p) ? n : NULL;
}

static jnode *parse_call_block(parser *p, const jtok *at)
{
    jnode *n = node(p, JN_CALL_BLOCK, at);
    if (!n)
        return NULL;
    if (is_op(cur(p), "(") && !parse_params(p, &n->kids2))
        return NULL;
    n->a = parse_expression(p, true);
    if (!n->a)
        return NULL;
    if (n->a->kind != JN_CALL)
        return fail(p, at, "expected a call after {%% call %%}");
    if (!expect_block_end(p))
        return NULL;
    static const char *const ends[] = {"endcall", NULL};
    const char *which = NULL;
    jnode *body = parse_body(p, ends, &which);
    if (!body)
        return NULL;
    n->kids = body->kids;
    return expect_block_end(p) ? n : NULL;
}

static jnode *parse_filter_block(parser *p, const jtok *at)
{
    jnode *n = node(p, JN_FILTER_BLOCK, at);
    jnode *ph = node(p, JN_CONST, at);
    if (!n || !ph)
        return NULL;
    ph->value = jv_undef();
    /* Reuse the filter-expression grammar by pretending a "|" precedes. */
    jnode *f = node(p, JN_FILTER, cur(p));
    const jtok *fname = cur(p);
    if (!f || !dotted_name(p, f))
        return NULL;
    if (!jfilter_exists(f->name))
        return fail(p, fname, "no filter named '%.40s'", f->name);
    f->a = ph;
    if (is_op(cur(p), "(") && !parse_args(p, &f->kids))
        return NULL;
    n->b = parse_filter_expr(p, f);
    n->c = ph;
    if (!n->b || !expect_block_end(p))
        return NULL;
    static const char *const ends[] = {"endfilter", NULL};
    const char *which = NULL;
    jnode *body = parse_body(p, ends, &which);
    if (!body)
        return NULL;
    n->kids = body->kids;
    return expect_block_end(p) ? n : NULL;
}

static jnode *parse_statement(parser *p)
{
    const jtok *at = cur(p); /* the tag name */
    if (at->kind != JT_NAME)
        return unexpected(p, "a statement name");
    advance(p);
    const char *w = at->s;
    if (!strcmp(w, "for"))
        return parse_for(p, at);
    if (!strcmp(w, "if"))
        return parse_if(p, at);
    if (!strcmp(w, "set"))
        return parse_set(p, at);
    if (!strcmp(w, "macro"))
        return parse_macro(p, at);
    if (!strcmp(w, "call"))
        return parse_call_block(p, at);
    if (!strcmp(w, "filter"))
        return parse_filter_block(p, at);
    if (!strcmp(w, "break") || !strcmp(w, "continue")) {
        if (!p->loops)
            return fail(p, at, "'%s' outside of a loop", w);
        jnode *n = node(p, w[0] == 'b' ? JN_BREAK : JN_CONTINUE, at);
        return n && expect_block_end(p) ? n : NULL;
    }
    if (!strcmp(w, "generation")) {
        /* Hugging Face's marker for assistant spans; it renders its body. */
        if (!expect_block_end(p))
            return NULL;
        static const char *const ends[] = {"endgeneration", NULL};
        const char *which = NULL;
        jnode *body = parse_body(p, ends, &which);
        return body && expect_block_end(p) ? body : NULL;
    }
    if (!strcmp(w, "include") || !strcmp(w, "import") || !strcmp(w, "from") ||
        !strcmp(w, "extends") || !strcmp(w, "block"))
        return fail(p, at, "'%s' is not available: chat templates are self-contained", w);
    return fail(p, at, "encountered unknown tag '%.40s'", w);
}

static jnode *parse_body(parser *p, const char *const *ends, const char **which)
{
    const jtok *start = cur(p);
    if (!enter(p))
        return NULL;
    jnode *body = node(p, JN_BODY, start);
    if (!body)
        return NULL;
    for (;;) {
        const jtok *t = cur(p);
        if (t->kind == JT_EOF) {
            if (ends) {
                char want[96];
                size_t o = 0;
                for (size_t k = 0; ends[k] && o < sizeof want; k++)
                    o += (size_t)snprintf(want + o, sizeof want - o, "%s'%s'", k ? " or " : "",
                                          ends[k]);
                return fail(p, t, "unexpected end of template, expected %s", want);
            }
            break;
        }
        if (t->kind == JT_TEXT) {
            jnode *n = node(p, JN_TEXT, t);
            if (!n)
                return NULL;
            n->value = jv_literal_str(p->a, t->s, t->len);
            if (n->value.kind != JV_STR)
                return fail(p, t, "out of memory");
            advance(p);
            if (!vec_push(p, &body->kids, n))
                return NULL;
        } else if (t->kind == JT_VAR_BEGIN) {
            advance(p);
            jnode *n = node(p, JN_OUTPUT, t);
            if (!n)
                return NULL;
            n->a = parse_tuple(p, false, true, NULL, false);
            if (!n->a)
                return NULL;
            if (cur(p)->kind != JT_VAR_END)
                return unexpected(p, "end of print statement");
            advance(p);
            if (!vec_push(p, &body->kids, n))
                return NULL;
        } else if (t->kind == JT_BLOCK_BEGIN) {
            advance(p);
            const jtok *name = cur(p);
            if (ends && name->kind == JT_NAME) {
                for (size_t k = 0; ends[k]; k++) {
                    if (!strcmp(name->s, ends[k])) {
                        *which = ends[k];
                        advance(p);
                        p->depth--;
                        return body;
                    }
                }
            }
            if (name->kind == JT_NAME &&
                (!strncmp(name->s, "end", 3) || !strcmp(name->s, "else") ||
                 !strcmp(name->s, "elif")))
                return fail(p, name, "unexpected '%.40s' here", name->s);
            if (!vec_push(p, &body->kids, parse_statement(p)))
                return NULL;
        } else {
            char buf[64];
            return fail(p, t, "unexpected %s", tok_desc(t, buf, sizeof buf));
        }
    }
    p->depth--;
    return body;
}

tw_status jparse(const jtoks *toks, jarena *a, jnode **root, tw_err *err)
{
    parser p = {.t = toks, .a = a, .err = err};
    *root = NULL;
    if (toks->n == 0)
        return tw_errorf(err, TW_INTERNAL, "chat template: no tokens");
    jnode *body = parse_body(&p, NULL, NULL);
    if (!body)
        return p.st ? p.st : tw_errorf(err, TW_INVALID_ARGUMENT, "chat template: parse error");
    *root = body;
    return TW_OK;
}
