/* Inside the chat-template parser: the state shared by its two halves,
 * statements (jinja_parse.c) and expressions (jinja_parse_expr.c). Not a
 * public interface; jparse() in jinja.h is the way in.
 *
 * Every function here records the first error in the parser (p->st and
 * p->err) and answers NULL / false; later errors never overwrite it. Nodes
 * live in the parser's arena. Single-threaded, like the parse itself. */
#ifndef TW_CHAT_JINJA_PARSER_H
#define TW_CHAT_JINJA_PARSER_H

#include "jinja.h"

#include <string.h>

/* Deeper nesting is refused rather than risking the C stack. */
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

/* The token at the cursor; the token stream always ends with JT_EOF. */
static inline const jtok *jp_cur(const parser *p)
{
    return &p->t->v[p->i];
}

/* The token k places ahead, or the final JT_EOF. */
static inline const jtok *jp_peek(const parser *p, size_t k)
{
    size_t j = p->i + k;
    return &p->t->v[j < p->t->n ? j : p->t->n - 1];
}

/* Moves on, but never past the final JT_EOF. */
static inline void jp_advance(parser *p)
{
    if (p->i + 1 < p->t->n)
        p->i++;
}

static inline bool jp_is_op(const jtok *t, const char *op)
{
    return t->kind == JT_OP && strcmp(t->s, op) == 0;
}

static inline bool jp_is_name(const jtok *t, const char *name)
{
    return t->kind == JT_NAME && strcmp(t->s, name) == 0;
}

/* How a token is named in messages; buf holds names and operators. */
const char *jp_tok_desc(const jtok *t, char *buf, size_t cap);

/* Records "chat template line L, column C: ..." (INVALID_ARGUMENT). */
jnode *jp_fail(parser *p, const jtok *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "unexpected X, expected <expected>" at the cursor. */
jnode *jp_unexpected(parser *p, const char *expected);

/* A node of kind at the position of at (NULL when out of memory). */
jnode *jp_node(parser *p, jnkind kind, const jtok *at);

/* Appends n (false, recording nothing new, when n is NULL). */
bool jp_vec_push(parser *p, jnvec *v, jnode *n);

/* Skips the operator / name at the cursor when it is there. */
bool jp_skip_op(parser *p, const char *op);
bool jp_skip_name(parser *p, const char *name);

/* Skips the operator, or records an error. */
bool jp_expect_op(parser *p, const char *op);

/* One nesting level deeper (the caller decrements p->depth on success). */
bool jp_enter(parser *p);

/* ---- expressions (jinja_parse_expr.c) */

/* An expression; with_condexpr admits `a if b else c`. */
jnode *jp_parse_expression(parser *p, bool with_condexpr);

/* A comma-separated tuple or a single expression (Jinja2's parse_tuple):
 * simplified admits only names and literals (assignment targets), extra_end
 * names a keyword that ends it, explicit_parens marks a parenthesised one. */
jnode *jp_parse_tuple(parser *p, bool simplified, bool with_condexpr, const char *extra_end,
                      bool explicit_parens);

/* Call arguments after '(' up to and including ')' into args. */
bool jp_parse_args(parser *p, jnvec *args);

/* Reads the filter or test name at the cursor into n->name. */
bool jp_dotted_name(parser *p, jnode *n);

/* The filters (`| f(...)`) and tests (`is t`) that follow n. */
jnode *jp_parse_filter_expr(parser *p, jnode *n);

#endif
