/* Inside the builtin filters: the call a filter receives and the helpers
 * its two files share (jinja_filters.c: sequences, mappings and dispatch;
 * jinja_filters_text.c: strings and numbers). Not a public interface;
 * jfilter_call() in jinja.h is the way in.
 *
 * A filter writes a new reference to *out and answers true, or records the
 * error in the render (jr_fail) and answers false. Single-threaded, like
 * the render. */
#ifndef TW_CHAT_JINJA_FILTER_H
#define TW_CHAT_JINJA_FILTER_H

#include "jinja.h"

/* One filter call: the input and the arguments, borrowed. */
typedef struct fctx {
    jrender *r;
    const jnode *at;
    const char *name;
    jv in;
    const jv *args;
    size_t nargs;
    const char *const *kwn;
    const jv *kwv;
    size_t nkw;
} fctx;

/* Binds the call's positional and keyword arguments to the parameter names
 * given (Python's rules) into a local array `a`; returns false from the
 * filter when they do not fit. */
#define BIND(...)                                                                            \
    static const char *const names_[] = {__VA_ARGS__};                                     \
    jv a[sizeof names_ / sizeof names_[0]];                                                  \
    (void)a;                                                                                 \
    if (!jbind(c->r, c->at, c->name, names_, sizeof names_ / sizeof names_[0], c->args,       \
               c->nargs, c->kwn, c->kwv, c->nkw, a))                                         \
        return false

/* "filter 'x' cannot take a value of type T"; always false. */
bool jf_fail_type(const fctx *c, jv v);

/* str(v) of any value, as a string value with its own reference. */
bool jf_to_str(const fctx *c, jv v, jv *out);

/* An integer argument (booleans count; undefined or none give dflt). */
bool jf_arg_int(const fctx *c, jv v, int64_t dflt, int64_t *out);

/* ---- strings and numbers (jinja_filters_text.c) */
bool jf_tojson(const fctx *c, jv *out);
bool jf_int(const fctx *c, jv *out);
bool jf_float(const fctx *c, jv *out);
bool jf_indent(const fctx *c, jv *out);
bool jf_escape(const fctx *c, jv *out);
bool jf_truncate(const fctx *c, jv *out);
bool jf_round(const fctx *c, jv *out);
bool jf_wordcount(const fctx *c, jv *out);
bool jf_title(const fctx *c, jv *out);
/* string, format, trim, replace, center, upper, lower, capitalize. */
bool jf_string_op(const fctx *c, jv *out);
bool jf_abs(const fctx *c, jv *out);
bool jf_safe(const fctx *c, jv *out);

#endif
