/* The compiled form of a JSON grammar, shared by the schema compiler
 * (json_schema.c) and the matcher (json_match.c). Internal to core/grammar. */
#ifndef TW_GRAMMAR_JSON_INTERNAL_H
#define TW_GRAMMAR_JSON_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "tw/json_grammar.h"

#define JN_NONE UINT32_MAX

/* A value's first byte decides its JSON type; a union maps each class to
 * the node that reads it. */
typedef enum jclass {
    JC_OBJECT = 0, /* { */
    JC_ARRAY,      /* [ */
    JC_STRING,     /* " */
    JC_NUMBER,     /* - 0-9 */
    JC_TRUE,       /* t */
    JC_FALSE,      /* f */
    JC_NULL,       /* n */
    JC_COUNT,
} jclass;

typedef enum jnode_kind {
    JN_UNION = 0, /* alt[class] */
    JN_OBJECT,    /* props [first, first + n); extra: other keys' values (JN_NONE: none) */
    JN_ARRAY,     /* extra: items (JN_NONE: none past the tuple); min..max items; a tuple's
                     first n elements' nodes: tuple_items[first, first + n) */
    JN_STRING,    /* min..max characters; extra: its pattern (JN_NONE: none) */
    JN_NUMBER,    /* extra: its bounds (JN_NONE: none) */
    JN_INTEGER,   /* the same */
    JN_ENUM,      /* literals [first, first + n), compact JSON texts */
    /* objects told apart by their first property (key: literal min), whose
     * value is one of the literals of the enum node extra; literal i of it
     * picks object tag_alts[first + i] (n of them), where that property
     * comes first */
    JN_TAGGED,
    /* objects told apart by their first key: alternative i is the object
     * tag_alts[first + i] (n of them), whose first property, required in
     * it, no other alternative names */
    JN_KEYED,
} jnode_kind;

/* String formats (json_format.c). */
typedef enum jformat {
    JF_NONE = 0,
    JF_DATE,
    JF_TIME,
    JF_DATE_TIME,
    JF_UUID,
} jformat;

/* The format a schema names; JF_NONE for one the matcher does not know. */
jformat json_format_named(const char *name);

/* Takes character c at position pos of a string of format f (mem: the
 * format's memory, 0 at the start); the next position, or -1 when c cannot
 * come there. */
int json_format_step(jformat f, unsigned pos, uint32_t *mem, unsigned char c);

/* Whether a string of format f may end at pos. */
bool json_format_final(jformat f, unsigned pos);

/* The pattern that stands for format `name` (json_format_patterns.c) and
 * the most characters the format allows (UINT32_MAX: no bound); NULL for
 * a format that is not read as a pattern. */
const char *json_format_pattern(const char *name, uint32_t *max_chars);

/* Whether format `name` names no syntax (password: a hint to hide the
 * text; binary: octets in whatever text the client chose), so any string
 * is one. */
bool json_format_plain(const char *name);

/* A string's "pattern" (json_pattern.c). */
typedef struct jpattern {
    void *code;    /* pcre2_code */
    bool anchored; /* only a match from the start counts */
    bool ascii;    /* every character it matches is ASCII */
    bool jit;      /* JIT code for whole and partial matches */
} jpattern;

/* What json_pattern_test found. */
enum { JP_DEAD = 0, JP_VIABLE, JP_MATCH, JP_FAILED };

/* Whether string s (n bytes, whole UTF-8 characters) matches p (whole) or
 * may still come to match it with more characters (!whole: JP_VIABLE or
 * JP_MATCH); JP_FAILED when the matcher could not tell (taken as a no).
 * Thread-safe; allocates nothing. */
int json_pattern_test(const jpattern *p, const unsigned char *s, size_t n, bool whole);

void json_patterns_free(tw_json_grammar *g);

/* Numeric bounds (json_bounds.c): for numbers written without a minus
 * (side 0) and with it (side 1), the magnitudes allowed, in units of 1e-9,
 * both ends included (multiples of grid); open[side] false when that side
 * has none. grid: what every value is a multiple of (1; a whole number for
 * integers; multipleOf). */
typedef unsigned __int128 jmag;

typedef struct jbounds {
    jmag lo[2], hi[2];
    jmag grid;
    bool open[2];
} jbounds;

/* Where a number stands (tw_json_frame.phase). */
enum { NP_START = 0, NP_MINUS, NP_ZERO, NP_INT, NP_DOT, NP_FRAC, NP_E, NP_ESIGN, NP_EXP };

/* A bounded number's byte: 1 taken, 0 the number ended before c, -1
 * refused. integer: the node takes no fraction. */
int json_bounded_byte(const jbounds *b, bool integer, tw_json_frame *f, unsigned char c);

/* Whether the bounded number so far is whole and in range. */
bool json_bounded_accepting(const jbounds *b, const tw_json_frame *f);

typedef struct jnode {
    uint8_t kind;
    uint8_t format; /* JN_STRING: a jformat */
    bool unique;    /* JN_ARRAY: uniqueItems, its items all different */
    uint32_t alt[JC_COUNT];
    uint32_t first, n;
    uint32_t extra;
    uint32_t min, max;
    /* objects: 1 + the index of the last required property (0: none), so
     * the object may close once prop reaches it */
    uint32_t close_at;
    /* JN_OBJECT without properties: its patternProperties,
     * key_pats[kp_first, kp_first + kp_n) */
    uint32_t kp_first, kp_n;
    /* JN_OBJECT without properties: the JN_STRING or JN_ENUM node its
     * propertyNames read as (JN_NONE: any name) */
    uint32_t names;
} jnode;

/* Whether object node o holds the keys it writes to rules (patterns or
 * names), which the matcher checks on each key kept whole. */
static inline bool json_keys_ruled(const jnode *o)
{
    return o->kp_n || o->names != JN_NONE;
}

/* Whether key text k (n bytes of whole UTF-8 characters, chars of them) is
 * a name that node nm (propertyNames': JN_STRING or JN_ENUM) admits
 * (whole), or may still grow into one (!whole) (json_key_names.c). */
bool json_key_name_ok(const tw_json_grammar *g, const jnode *nm, const unsigned char *k, size_t n,
                      uint32_t chars, bool whole);

/* A patternProperties entry: the pattern keys are asked of, and the node
 * that reads the value of a key it matches. */
typedef struct jkeypat {
    uint32_t pattern, node;
} jkeypat;

typedef struct jprop {
    uint32_t key; /* literal: the key as a JSON string, quotes included */
    uint32_t node;
    bool required;
} jprop;

typedef struct jlit {
    char *text;
    uint32_t len;
} jlit;

struct tw_json_grammar {
    jnode *nodes;
    uint32_t n_nodes, cap_nodes;
    jprop *props;
    uint32_t n_props, cap_props;
    jlit *lits;
    uint32_t n_lits, cap_lits;
    uint32_t root;
    uint32_t *tag_alts; /* JN_TAGGED, JN_KEYED: the object each tag or key picks */
    uint32_t n_tag_alts, cap_tag_alts;
    bool raw;   /* the root is a choice of raw texts, not a JSON value */
    char *tail; /* bytes that must follow the document; NULL: none */
    uint32_t tail_len;
    uint32_t key_string; /* a plain string node for the keys of open objects */
    jbounds *bounds;
    uint32_t n_bounds, cap_bounds;
    uint32_t *tuple_items; /* JN_ARRAY: the nodes of a tuple's elements */
    uint32_t n_tuple_items, cap_tuple_items;
    jpattern *patterns; /* JN_STRING's extra indexes them (JN_NONE: no pattern) */
    uint32_t n_patterns, cap_patterns;
    bool unique_numbers; /* an array with uniqueItems holds numbers */
    jkeypat *key_pats;   /* JN_OBJECT's kp_first indexes them */
    uint32_t n_key_pats, cap_key_pats;
};

/* Values that must differ (json_unique.c): an open object's keys and the
 * items of an array with uniqueItems, kept in the state's kbuf as records
 * of at most JREC_MAX bytes after a length byte. An item's record is a tag
 * and a text: 's' and a string's decoded bytes, 'n' and a number in
 * json_number_canonical's form, 'l' and another literal's compact JSON. */
#define JREC_MAX 255

/* Appends k bytes to the record being read (kcur bytes after kbuf[klen]);
 * false when the record or the buffer would overflow (nothing appended). */
bool json_rec_append(tw_json_state *s, const void *p, size_t k);

/* Whether rec (len bytes) is one of the records from kbuf[start] on. */
bool json_rec_seen(const tw_json_state *s, size_t start, const unsigned char *rec, size_t len);

/* Keeps the record being read; false when its length byte does not fit. */
bool json_rec_commit(tw_json_state *s);

/* The number whose JSON text is t (n bytes) in one form per value: "0", or
 * [-]digits (no leading or trailing zero) "e" exponent; its length in out
 * (cap bytes), 0 when it is not a number or does not fit. */
size_t json_number_canonical(const unsigned char *t, size_t n, unsigned char *out, size_t cap);

/* A literal's record (tag and text) into out; its length, 0 when it does
 * not fit. */
size_t json_literal_record(const jlit *l, unsigned char out[JREC_MAX]);

/* The UTF-8 bytes of code point cp; how many. */
size_t json_utf8_of(uint32_t cp, unsigned char out[4]);

/* How many different values node's values can be (*count, UINT32_MAX: no
 * bound), and whether among them are numbers, for which the matcher may
 * reach digits all of whose continuations are values already taken. */
enum { JU_OK = 0, JU_CONTAINERS, JU_NOMEM };
int json_unique_domain(const tw_json_grammar *g, uint32_t node, uint32_t *count, bool *numbers);

/* A hexadecimal digit's value; -1 for another byte. */
static inline int json_hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A UTF-8 lead byte at 0x80 or above: how many continuation bytes follow
 * it (-1: not a lead byte), and the range the first of them must fall in
 * (no overlong forms, surrogates or code points past U+10FFFF); the later
 * ones take 0x80-0xBF. */
static inline int json_utf8_lead(unsigned c, unsigned *lo, unsigned *hi)
{
    *lo = 0x80;
    *hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        return 1;
    if (c >= 0xE0 && c <= 0xEF) {
        *lo = c == 0xE0 ? 0xA0 : 0x80;
        *hi = c == 0xED ? 0x9F : 0xBF;
        return 2;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        *lo = c == 0xF0 ? 0x90 : 0x80;
        *hi = c == 0xF4 ? 0x8F : 0xBF;
        return 3;
    }
    return -1;
}

/* The class of a value's first byte; JC_COUNT when no value starts so. */
static inline jclass json_class_of(unsigned char c)
{
    switch (c) {
    case '{':
        return JC_OBJECT;
    case '[':
        return JC_ARRAY;
    case '"':
        return JC_STRING;
    case 't':
        return JC_TRUE;
    case 'f':
        return JC_FALSE;
    case 'n':
        return JC_NULL;
    default:
        return (c == '-' || (c >= '0' && c <= '9')) ? JC_NUMBER : JC_COUNT;
    }
}

#endif
