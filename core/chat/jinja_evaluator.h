/* Inside the evaluator: what its two halves share, expressions and calls
 * (jinja_eval.c) and statements (jinja_exec.c). Not a public interface;
 * jeval_template() in jinja.h is the way in.
 *
 * Values passed in are borrowed and values written to *out are new
 * references, as everywhere in the interpreter; a false answer (or
 * FLOW_ERROR) means the error is recorded in the render. Single-threaded,
 * like the render. */
#ifndef TW_CHAT_JINJA_EVALUATOR_H
#define TW_CHAT_JINJA_EVALUATOR_H

#include "jinja.h"

/* Deeper nesting is refused rather than risking the C stack. */
#define MAX_EVAL_DEPTH 400
#define MAX_ARGS 32

typedef struct jvar {
    const char *name;
    size_t len;
    jv v;
} jvar;

/* A for-loop body and a macro call get a scope of their own. */
typedef struct jscope {
    struct jscope *parent;
    jvar *vars;
    size_t n, cap;
} jscope;

/* How a statement ends: on, out of the loop, to its next round, or failed. */
typedef enum flow { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE, FLOW_ERROR } flow;

/* Evaluated call arguments, owned until je_args_release. */
typedef struct jargs {
    jv pos[MAX_ARGS];
    size_t npos;
    const char *kwn[MAX_ARGS];
    jv kwv[MAX_ARGS];
    size_t nkw;
} jargs;

/* Drops every binding of s (not its parent's). */
void je_scope_release(jrender *r, jscope *s);

/* Binds name (static lifetime) to v (owned) in s. */
bool je_scope_set(jrender *r, const jnode *at, jscope *s, const char *name, size_t len, jv v);

/* A name from the scopes, then the render's variables, then the globals;
 * undefined when none has it. */
bool je_lookup(jrender *r, const jscope *s, const jnode *at, const char *name, size_t len,
               jv *out);

/* Appends bytes / str(v) to out, within the render's output limit. */
bool je_emit(jrender *r, const jnode *at, jbuf *out, const char *s, size_t n);
bool je_emit_value(jrender *r, const jnode *at, jbuf *out, jv v);

/* Evaluates call arguments (positional, then name=value) into a. */
bool je_eval_args(jrender *r, jscope *s, const jnvec *v, jargs *a);
void je_args_release(jrender *r, jargs *a);

/* Calls a builtin, a macro or a caller(); caller is what a macro's
 * caller() runs (undefined outside {% call %}). */
bool je_call_value(jrender *r, const jnode *at, jv fn, const jv *args, size_t nargs,
                   const char *const *kwn, const jv *kwv, size_t nkw, jv caller, jv *out);

/* An expression, within MAX_EVAL_DEPTH. */
bool je_eval(jrender *r, jscope *s, const jnode *n, jv *out);

/* Runs the statements of body, appending to out (jinja_exec.c). */
flow je_exec_body(jrender *r, jscope *s, const jnvec *body, jbuf *out);

#endif
