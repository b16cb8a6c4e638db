/* Parser: tokens -> syntax tree, following Jinja2's grammar and operator
 * precedence (parser.py), so that expressions group exactly as they do in
 * the reference implementation. This file holds the token helpers and the
 * statements ({% for %}, {% if %}, {% set %}, macros, the template body);
 * expressions are in jinja_parse_expr.c. */
#include "jinja_parser.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *jp_tok_desc(const jtok *t, char *buf, size_t cap)
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

jnode *jp_fail(parser *p, const jtok *at, const char *fmt, ...)
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

jnode *jp_unexpected(parser *p, const char *expected)
{
    char buf[64];
    return jp_fail(p, jp_cur(p), "unexpected %s, expected %s", jp_tok_desc(jp_cur(p), buf, sizeof buf),
                expected);
}

jnode *jp_node(parser *p, jnkind kind, const jtok *at)
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

bool jp_vec_push(parser *p, jnvec *v, jnode *n)
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

bool jp_skip_op(parser *p, const char *op)
{
    if (!jp_is_op(jp_cur(p), op))
        return false;
    jp_advance(p);
    return true;
}

bool jp_skip_name(parser *p, const char *name)
{
    if (!jp_is_name(jp_cur(p), name))
        return false;
    jp_advance(p);
    return true;
}

bool jp_expect_op(parser *p, const char *op)
{
    if (jp_skip_op(p, op))
        return true;
    char want[16];
    snprintf(want, sizeof want, "'%s'", op);
    jp_unexpected(p, want);
    return false;
}

bool jp_enter(parser *p)
{
    if (++p->depth > MAX_DEPTH) {
        jp_fail(p, jp_cur(p), "template nested more than %d levels deep", MAX_DEPTH);
        return false;
    }
    return true;
}

/* ---- statements ------------------------------------------------------- */

static jnode *parse_body(parser *p, const char *const *ends, const char **which);

static bool expect_block_end(parser *p)
{
    if (jp_cur(p)->kind == JT_BLOCK_END) {
        jp_advance(p);
        return true;
    }
    jp_unexpected(p, "end of statement block");
    return false;
}

/* Assignment target: a name, a tuple of names, or (for set) ns.attr. */
static jnode *parse_target(parser *p, bool with_namespace, const char *extra_end)
{
    const jtok *t = jp_cur(p);
    if (with_namespace && t->kind == JT_NAME && jp_is_op(jp_peek(p, 1), ".") &&
        jp_peek(p, 2)->kind == JT_NAME) {
        jnode *g = jp_node(p, JN_GETATTR, t);
        jnode *base = jp_node(p, JN_NAME, t);
        if (!g || !base)
            return NULL;
        base->name = t->s;
        base->name_len = t->len;
        g->a = base;
        g->name = jp_peek(p, 2)->s;
        g->name_len = jp_peek(p, 2)->len;
        jp_advance(p);
        jp_advance(p);
        jp_advance(p);
        return g;
    }
    jnode *n = jp_parse_tuple(p, true, true, extra_end, false);
    if (!n)
        return NULL;
    if (n->kind == JN_NAME)
        return n;
    if (n->kind == JN_TUPLE) {
        for (size_t k = 0; k < n->kids.n; k++)
            if (n->kids.v[k]->kind != JN_NAME)
                return jp_fail(p, t, "can only assign to names");
        return n;
    }
    return jp_fail(p, t, "can't assign to this expression");
}

static jnode *parse_for(parser *p, const jtok *at)
{
    jnode *n = jp_node(p, JN_FOR, at);
    if (!n)
        return NULL;
    n->a = parse_target(p, false, "in");
    if (!n->a)
        return NULL;
    if (!jp_skip_name(p, "in"))
        return jp_unexpected(p, "'in'");
    n->b = jp_parse_tuple(p, false, false, "recursive", false);
    if (!n->b)
        return NULL;
    if (jp_skip_name(p, "if")) {
        n->c = jp_parse_expression(p, true);
        if (!n->c)
            return NULL;
    }
    if (jp_is_name(jp_cur(p), "recursive"))
        return jp_fail(p, jp_cur(p), "recursive for-loops are not supported");
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
    jnode *n = jp_node(p, JN_IF, at);
    if (!n)
        return NULL;
    n->a = jp_parse_tuple(p, false, false, NULL, false);
    if (!n->a || !expect_block_end(p))
        return NULL;
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    const char *which = NULL;
    jnode *body = parse_body(p, ends, &which);
    if (!body)
        return NULL;
    n->kids = body->kids;
    if (!strcmp(which, "elif")) {
        jnode *elif = parse_if(p, jp_cur(p));
        if (!elif)
            return NULL;
        return jp_vec_push(p, &n->kids2, elif) ? n : NULL;
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
    if (jp_skip_op(p, "=")) {
        jnode *n = jp_node(p, JN_SET, at);
        if (!n)
            return NULL;
        n->a = target;
        n->b = jp_parse_tuple(p, false, true, NULL, false);
        if (!n->b || !expect_block_end(p))
            return NULL;
        return n;
    }
    jnode *n = jp_node(p, JN_SET_BLOCK, at);
    if (!n)
        return NULL;
    n->a = target;
    /* {% set x | filter %}: the filters apply to the captured body. */
    if (jp_is_op(jp_cur(p), "|")) {
        jnode *ph = jp_node(p, JN_CONST, jp_cur(p));
        if (!ph)
            return NULL;
        ph->value = jv_undef();
        n->b = jp_parse_filter_expr(p, ph);
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
    if (!jp_expect_op(p, "("))
        return false;
    while (!jp_is_op(jp_cur(p), ")")) {
        if (params->n && !jp_expect_op(p, ","))
            return false;
        if (jp_cur(p)->kind != JT_NAME) {
            jp_unexpected(p, "a parameter name");
            return false;
        }
        jnode *prm = jp_node(p, JN_PARAM, jp_cur(p));
        if (!prm)
            return false;
        prm->name = jp_cur(p)->s;
        prm->name_len = jp_cur(p)->len;
        jp_advance(p);
        if (jp_skip_op(p, "=")) {
            prm->a = jp_parse_expression(p, true);
            if (!prm->a)
                return false;
        } else if (params->n && params->v[params->n - 1]->a) {
            jp_fail(p, jp_cur(p), "parameter without a default follows one with a default");
            return false;
        }
        if (!jp_vec_push(p, params, prm))
            return false;
    }
    jp_advance(p);
    return true;
}

static jnode *parse_macro(parser *p, const jtok *at)
{
    jnode *n = jp_node(p, JN_MACRO, at);
    if (!n)
        return NULL;
    if (jp_cur(p)->kind != JT_NAME)
        return jp_unexpected(p, "a macro name");
    n->name = jp_cur(p)->s;
    n->name_len = jp_cur(p)->len;
    jp_advance(p);
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
    jnode *n = jp_node(p, JN_CALL_BLOCK, at);
    if (!n)
        return NULL;
    if (jp_is_op(jp_cur(p), "(") && !parse_params(p, &n->kids2))
        return NULL;
    n->a = jp_parse_expression(p, true);
    if (!n->a)
        return NULL;
    if (n->a->kind != JN_CALL)
        return jp_fail(p, at, "expected a call after {%% call %%}");
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
    jnode *n = jp_node(p, JN_FILTER_BLOCK, at);
    jnode *ph = jp_node(p, JN_CONST, at);
    if (!n || !ph)
        return NULL;
    ph->value = jv_undef();
    /* Reuse the filter-expression grammar by pretending a "|" precedes. */
    jnode *f = jp_node(p, JN_FILTER, jp_cur(p));
    const jtok *fname = jp_cur(p);
    if (!f || !jp_dotted_name(p, f))
        return NULL;
    if (!jfilter_exists(f->name))
        return jp_fail(p, fname, "no filter named '%.40s'", f->name);
    f->a = ph;
    if (jp_is_op(jp_cur(p), "(") && !jp_parse_args(p, &f->kids))
        return NULL;
    n->b = jp_parse_filter_expr(p, f);
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
    const jtok *at = jp_cur(p); /* the tag name */
    if (at->kind != JT_NAME)
        return jp_unexpected(p, "a statement name");
    jp_advance(p);
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
            return jp_fail(p, at, "'%s' outside of a loop", w);
        jnode *n = jp_node(p, w[0] == 'b' ? JN_BREAK : JN_CONTINUE, at);
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
        return jp_fail(p, at, "'%s' is not available: chat templates are self-contained", w);
    return jp_fail(p, at, "encountered unknown tag '%.40s'", w);
}

static jnode *parse_body(parser *p, const char *const *ends, const char **which)
{
    const jtok *start = jp_cur(p);
    if (!jp_enter(p))
        return NULL;
    jnode *body = jp_node(p, JN_BODY, start);
    if (!body)
        return NULL;
    for (;;) {
        const jtok *t = jp_cur(p);
        if (t->kind == JT_EOF) {
            if (ends) {
                char want[96];
                size_t o = 0;
                for (size_t k = 0; ends[k] && o < sizeof want; k++)
                    o += (size_t)snprintf(want + o, sizeof want - o, "%s'%s'", k ? " or " : "",
                                          ends[k]);
                return jp_fail(p, t, "unexpected end of template, expected %s", want);
            }
            break;
        }
        if (t->kind == JT_TEXT) {
            jnode *n = jp_node(p, JN_TEXT, t);
            if (!n)
                return NULL;
            n->value = jv_literal_str(p->a, t->s, t->len);
            if (n->value.kind != JV_STR)
                return jp_fail(p, t, "out of memory");
            jp_advance(p);
            if (!jp_vec_push(p, &body->kids, n))
                return NULL;
        } else if (t->kind == JT_VAR_BEGIN) {
            jp_advance(p);
            jnode *n = jp_node(p, JN_OUTPUT, t);
            if (!n)
                return NULL;
            n->a = jp_parse_tuple(p, false, true, NULL, false);
            if (!n->a)
                return NULL;
            if (jp_cur(p)->kind != JT_VAR_END)
                return jp_unexpected(p, "end of print statement");
            jp_advance(p);
            if (!jp_vec_push(p, &body->kids, n))
                return NULL;
        } else if (t->kind == JT_BLOCK_BEGIN) {
            jp_advance(p);
            const jtok *name = jp_cur(p);
            if (ends && name->kind == JT_NAME) {
                for (size_t k = 0; ends[k]; k++) {
                    if (!strcmp(name->s, ends[k])) {
                        *which = ends[k];
                        jp_advance(p);
                        p->depth--;
                        return body;
                    }
                }
            }
            if (name->kind == JT_NAME &&
                (!strncmp(name->s, "end", 3) || !strcmp(name->s, "else") ||
                 !strcmp(name->s, "elif")))
                return jp_fail(p, name, "unexpected '%.40s' here", name->s);
            if (!jp_vec_push(p, &body->kids, parse_statement(p)))
                return NULL;
        } else {
            char buf[64];
            return jp_fail(p, t, "unexpected %s", jp_tok_desc(t, buf, sizeof buf));
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
