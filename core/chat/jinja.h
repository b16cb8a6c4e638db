/* Internal interface of the Jinja template interpreter behind the chat
 * templates: the value model, the syntax tree, and the passes between them.
 *
 * The interpreter follows Jinja2 as Hugging Face configures it for
 * apply_chat_template (sandboxed, trim_blocks, lstrip_blocks, loop controls,
 * no autoescape), because a prompt that differs by one byte from what the
 * model was trained on is a different prompt.
 *
 * Lifetimes: a compiled template owns an arena holding every node and every
 * literal string; literals are "immortal" values whose reference counts are
 * never touched, which is what makes concurrent renders of one compiled
 * template safe. Everything a render creates is reference counted and dies
 * with the render.
 */
#ifndef TW_CHAT_JINJA_H
#define TW_CHAT_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "tw/status.h"

/* ---- arena ------------------------------------------------------------ */

typedef struct jarena_block jarena_block;
typedef struct jarena {
    jarena_block *head;
} jarena;

void *jarena_alloc(jarena *a, size_t size);
void jarena_free(jarena *a);

/* ---- values ----------------------------------------------------------- */

typedef enum jkind {
    JV_UNDEF = 0,
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST, /* also tuples (jlist.tuple) */
    JV_DICT,
    JV_NS,   /* namespace(): a dict whose attributes may be assigned */
    JV_FUNC, /* builtin function, bound method, macro, caller */
    JV_LOOP, /* the `loop` variable of a for */
} jkind;

#define JOBJ_IMMORTAL UINT32_MAX

typedef struct jobj {
    uint32_t refs; /* JOBJ_IMMORTAL for literals owned by a compiled template */
    uint32_t kind;
} jobj;

typedef struct jv {
    jkind kind;
    union {
        bool b;
        int64_t i;
        double f;
        jobj *o;
    } u;
} jv;

typedef struct jstr {
    jobj h;
    size_t len;
    bool ascii; /* every byte < 0x80, so bytes are code points */
    char data[];
} jstr;

typedef struct jlist {
    jobj h;
    bool tuple;
    size_t n, cap;
    jv *items;
} jlist;

typedef struct jdict {
    jobj h;
    size_t n, cap;
    jv *keys;
    jv *vals;
} jdict;

struct jnode;
struct jrender;
struct jfunc;
/* A builtin function or bound method; f->self is the bound object. */
typedef bool (*jbuiltin_fn)(struct jrender *r, const struct jnode *at, const struct jfunc *f,
                            const jv *args, size_t nargs, const char *const *kwnames,
                            const jv *kwvals, size_t nkw, jv *out);

typedef enum jfunc_kind { JF_BUILTIN, JF_MACRO, JF_CALLER } jfunc_kind;

typedef struct jfunc {
    jobj h;
    jfunc_kind fkind;
    const char *name;
    jbuiltin_fn fn;           /* JF_BUILTIN */
    jv self;                  /* bound object for methods (or undefined) */
    const struct jnode *node; /* JF_MACRO: the macro; JF_CALLER: the call block */
    struct jscope *scope;     /* JF_CALLER: where the call block's body runs;
                                 NULL once the block has ended */
} jfunc;

typedef struct jloop {
    jobj h;
    const jlist *items;
    size_t index0;
    size_t depth;
} jloop;

static inline jv jv_undef(void) { return (jv){.kind = JV_UNDEF}; }
static inline jv jv_none(void) { return (jv){.kind = JV_NONE}; }
static inline jv jv_bool(bool b) { return (jv){.kind = JV_BOOL, .u.b = b}; }
static inline jv jv_int(int64_t i) { return (jv){.kind = JV_INT, .u.i = i}; }
static inline jv jv_float(double f) { return (jv){.kind = JV_FLOAT, .u.f = f}; }
static inline jstr *jv_str_of(jv v) { return (jstr *)v.u.o; }
static inline jlist *jv_list_of(jv v) { return (jlist *)v.u.o; }
static inline jdict *jv_dict_of(jv v) { return (jdict *)v.u.o; }
static inline jfunc *jv_func_of(jv v) { return (jfunc *)v.u.o; }
static inline jloop *jv_loop_of(jv v) { return (jloop *)v.u.o; }
static inline bool jv_is_obj(jv v) { return v.kind >= JV_STR; }
static inline bool jv_is_num(jv v)
{
    return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL;
}

/* ---- render context (limits, budgets, errors) --------------------------- */

typedef struct jlimits {
    size_t max_output;      /* bytes of rendered text */
    size_t max_live_bytes;  /* bytes of strings and containers alive at once */
    uint64_t max_work_bytes;/* bytes copied into new strings over the render */
    uint64_t max_steps;     /* loop iterations, filter items, calls */
    unsigned max_call_depth;/* nested macro calls */
} jlimits;

typedef struct jbuf {
    char *data;
    size_t len, cap;
} jbuf;

typedef struct jrender {
    const jlimits *lim;
    tw_err *err;
    tw_status status; /* TW_OK until the first error */
    size_t live_bytes;
    uint64_t work_bytes;
    uint64_t steps;
    unsigned call_depth;
    unsigned depth;       /* C recursion of the evaluator */
    const struct jnode *hole;  /* placeholder of a filter block being applied */
    jv hole_value;
    time_t fixed_now; /* 0: use the real clock */
    bool now_utc;
    const struct jnode *root;
    jdict *vars;          /* the caller's variables */
    struct jscope *top;   /* template-level scope */
} jrender;

/* Records the first error (with the node's position) and returns false. */
bool jr_fail(jrender *r, const struct jnode *at, tw_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* An error carrying exactly the template's own words (raise_exception). */
bool jr_raise(jrender *r, const char *msg, size_t len);
/* Counts one unit of work against max_steps. */
bool jr_step(jrender *r, const struct jnode *at);
static inline bool jr_ok(const jrender *r) { return r->status == TW_OK; }

/* ---- value operations (jinja_value.c) --------------------------------- */

void jv_incref(jv v);
void jv_decref(jrender *r, jv v);
static inline jv jv_ref(jv v)
{
    jv_incref(v);
    return v;
}

/* Constructors return false (error recorded) when a limit or malloc fails. */
bool jv_new_str(jrender *r, const struct jnode *at, const char *s, size_t len, jv *out);
bool jv_new_list(jrender *r, const struct jnode *at, size_t cap, bool tuple, jv *out);
bool jv_new_dict(jrender *r, const struct jnode *at, jv *out);
bool jv_new_ns(jrender *r, const struct jnode *at, jv *out);
bool jv_new_func(jrender *r, const struct jnode *at, jfunc_kind kind, const char *name,
                 jbuiltin_fn fn, jv self, jv *out);
bool jv_new_loop(jrender *r, const struct jnode *at, const jlist *items, jv *out);
/* An immortal string in a compiled template's arena. */
jv jv_literal_str(jarena *a, const char *s, size_t len);

/* Appends, taking ownership of v (also on failure). */
bool jlist_push(jrender *r, const struct jnode *at, jlist *l, jv v);
/* Sets key (borrowed) to val (owned). */
bool jdict_set(jrender *r, const struct jnode *at, jdict *d, jv key, jv val);
/* Appends a key known to be absent (no duplicate check). */
bool jdict_append(jrender *r, const struct jnode *at, jdict *d, jv key, jv val);
/* Borrowed value or NULL. */
const jv *jdict_get(const jdict *d, jv key);
const jv *jdict_get_str(const jdict *d, const char *key, size_t len);

bool jv_truthy(jv v);
bool jv_equal(jv a, jv b);
/* Three-way compare for < <= > >=; false with an error when unordered. */
bool jv_compare(jrender *r, const struct jnode *at, jv a, jv b, int *cmp);
const char *jv_type_name(jv v);

/* Python's repr() of a float ("0.1", "1e+16", "inf"). */
void jv_float_repr(double f, char *out, size_t cap);
/* Python str() and repr() of v, appended to b. */
bool jv_str_append(jrender *r, const struct jnode *at, jbuf *b, jv v);
bool jv_repr_append(jrender *r, const struct jnode *at, jbuf *b, jv v);
/* str(v) as a new string value (a string is returned with a new reference). */
bool jv_to_string(jrender *r, const struct jnode *at, jv v, jv *out);

typedef struct jjson_opts {
    bool ensure_ascii;
    bool sort_keys;
    bool have_indent;
    const char *indent; /* the indent unit when have_indent */
    size_t indent_len;
    const char *item_sep, *key_sep;
    size_t item_sep_len, key_sep_len;
} jjson_opts;
/* Python json.dumps(v) with the given options. */
bool jv_tojson(jrender *r, const struct jnode *at, jbuf *b, jv v, const jjson_opts *o);

/* jansson value -> interpreter value. */
bool jv_from_json(jrender *r, const json_t *j, jv *out, unsigned depth);

/* Growable text buffer; every growth is checked against the live budget. */
bool jbuf_put(jrender *r, const struct jnode *at, jbuf *b, const char *s, size_t n);
void jbuf_release(jrender *r, jbuf *b);
/* Moves the buffer into a new string value. */
bool jbuf_to_str(jrender *r, const struct jnode *at, jbuf *b, jv *out);

/* Budget accounting used by every allocation of the render. */
bool jr_charge(jrender *r, const struct jnode *at, size_t bytes);
void jr_uncharge(jrender *r, size_t bytes);

/* ---- UTF-8 helpers (jinja_text.c) -------------------------------------- */

/* Decodes one code point; malformed bytes decode as themselves (one byte). */
size_t ju_decode(const char *s, size_t len, int32_t *cp);
size_t ju_encode(int32_t cp, char out[4]);
bool ju_isspace(int32_t cp);
size_t ju_count(const jstr *s);
/* Byte offset of code point index i (clamped to len). */
size_t ju_offset(const jstr *s, size_t i);

/* ---- syntax tree ------------------------------------------------------ */

typedef enum jnkind {
    /* statements */
    JN_BODY,
    JN_TEXT,
    JN_OUTPUT,
    JN_IF,
    JN_FOR,
    JN_SET,
    JN_SET_BLOCK,
    JN_MACRO,
    JN_CALL_BLOCK,
    JN_FILTER_BLOCK,
    JN_BREAK,
    JN_CONTINUE,
    /* expressions */
    JN_CONST,
    JN_NAME,
    JN_GETATTR,
    JN_GETITEM,
    JN_SLICE,
    JN_CALL,
    JN_KWARG,
    JN_FILTER,
    JN_TEST,
    JN_BINOP,
    JN_NEG,
    JN_POS,
    JN_NOT,
    JN_AND,
    JN_OR,
    JN_COMPARE,
    JN_CMPOP,
    JN_COND,
    JN_LIST,
    JN_TUPLE,
    JN_DICT,
    JN_PARAM,
} jnkind;

typedef enum jop {
    JOP_NONE = 0,
    JOP_ADD, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW, JOP_CONCAT,
    JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_IN, JOP_NOTIN,
} jop;

typedef struct jnvec {
    struct jnode **v;
    size_t n, cap;
} jnvec;

typedef struct jnode {
    jnkind kind;
    jop op;
    bool flag;       /* JN_TEST: negated; JN_SET_BLOCK/JN_FOR: has filter; ... */
    int line, col;
    const char *name; /* names, attribute/filter/test/kwarg names (NUL-terminated) */
    size_t name_len;
    jv value;         /* JN_CONST, JN_TEXT (immortal) */
    struct jnode *a, *b, *c, *d;
    jnvec kids;       /* bodies, arguments, items */
    jnvec kids2;      /* else bodies, macro parameters, dict values */
} jnode;

/* ---- passes ----------------------------------------------------------- */

typedef enum jtok_kind {
    JT_EOF = 0,
    JT_TEXT,
    JT_VAR_BEGIN,
    JT_VAR_END,
    JT_BLOCK_BEGIN,
    JT_BLOCK_END,
    JT_NAME,
    JT_STRING,
    JT_INT,
    JT_FLOAT,
    JT_OP,
} jtok_kind;

typedef struct jtok {
    jtok_kind kind;
    int line, col;
    const char *s; /* JT_TEXT/JT_NAME/JT_STRING: arena copy, NUL-terminated; JT_OP: operator */
    size_t len;
    int64_t ival;
    double fval;
} jtok;

typedef struct jtoks {
    jtok *v;
    size_t n, cap;
} jtoks;

/* Splits a template into tokens (Jinja2 lexing with trim_blocks and
 * lstrip_blocks). Token text lives in the arena; the vector is malloc'd. */
tw_status jlex(const char *src, size_t len, jarena *a, jtoks *out, tw_err *err);

/* Parses tokens into a JN_BODY tree allocated in the arena. */
tw_status jparse(const jtoks *toks, jarena *a, jnode **root, tw_err *err);

/* Renders the tree with vars (a dict) into out. */
bool jeval_template(jrender *r, const jnode *root, jbuf *out);

/* Calls a filter, test or method by name (jinja_filters.c / jinja_methods.c). */
bool jfilter_call(jrender *r, const jnode *at, const char *name, jv in, const jv *args,
                  size_t nargs, const char *const *kwnames, const jv *kwvals, size_t nkw,
                  jv *out);
bool jtest_call(jrender *r, const jnode *at, const char *name, jv in, const jv *args,
                size_t nargs, bool *out);
bool jtest_exists(const char *name);
bool jfilter_exists(const char *name);
/* Attribute of a builtin value: a bound method or a field; undefined when none. */
bool jmethod_get(jrender *r, const jnode *at, jv obj, const char *name, jv *out, bool *found);
/* Global functions (range, namespace, dict, raise_exception, strftime_now, ...). */
bool jglobal_get(jrender *r, const jnode *at, const char *name, jv *out, bool *found);

/* String helpers shared by filters and methods (jinja_methods.c). */
typedef enum jcase { JCASE_UPPER, JCASE_LOWER, JCASE_TITLE, JCASE_CAPITALIZE } jcase;
bool jstr_case(jrender *r, const struct jnode *at, const jstr *s, jcase c, jv *out);
/* chars NULL: Python whitespace. */
bool jstr_strip(jrender *r, const struct jnode *at, const jstr *s, const jstr *chars, bool left,
                bool right, jv *out);
bool jstr_replace(jrender *r, const struct jnode *at, const jstr *s, const jstr *old,
                  const jstr *rep, int64_t count, jv *out);
bool jstr_splitlines(jrender *r, const struct jnode *at, const jstr *s, bool keepends, jv *out);
/* Python's "fmt % args". */
bool jstr_percent(jrender *r, const struct jnode *at, const jstr *fmt, const jv *args,
                  size_t nargs, jv *out);

/* Binds positional and keyword arguments to the parameter names of a builtin;
 * slots of missing arguments are left undefined (borrowed values). */
bool jbind(jrender *r, const struct jnode *at, const char *fname, const char *const *names,
           size_t nnames, const jv *args, size_t nargs, const char *const *kwnames,
           const jv *kwvals, size_t nkw, jv *slots);

/* Calls any callable value (used by filters such as map). */
bool jeval_call_value(jrender *r, const jnode *at, jv fn, const jv *args, size_t nargs,
                      const char *const *kwnames, const jv *kwvals, size_t nkw, jv *out);
/* obj.name and obj[key] with Jinja2's attribute/item fallback rules. */
bool jeval_getattr(jrender *r, const jnode *at, jv obj, const char *name, size_t len, jv *out);
bool jeval_getitem(jrender *r, const jnode *at, jv obj, jv key, jv *out);
/* Binary arithmetic/concatenation and comparisons (jinja_ops.c). */
bool jeval_binop(jrender *r, const struct jnode *at, jop op, jv a, jv b, jv *out);
bool jeval_compare(jrender *r, const struct jnode *at, jop op, jv a, jv b, bool *out);
/* Python slicing of strings and lists. */
bool jeval_slice(jrender *r, const jnode *at, jv obj, jv start, jv stop, jv step, jv *out);

#endif
