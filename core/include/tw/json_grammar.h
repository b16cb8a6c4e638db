/* JSON documents as a byte-level grammar: a JSON Schema (or "any JSON
 * object") compiled into nodes, and a matcher that takes an answer's bytes
 * one at a time and says whether they can still become a document that
 * fits. The matcher is exact on prefixes: a byte is accepted only when some
 * continuation completes the document, so a generator that keeps to accepted
 * bytes can always finish (but for nesting deeper than TW_JSON_MAX_DEPTH,
 * which only a recursive schema can demand, and for the patterns named
 * below).
 *
 * Schemas understood (anything else is refused with its JSON pointer, never
 * ignored, so an answer never silently breaks the caller's schema):
 *   type (a name or a list of names), properties, required,
 *   additionalProperties (false, true or a schema), patternProperties (in
 *   an object without properties), minProperties and maxProperties (in an
 *   object without properties, or where every object written fits them),
 *   items, tuples
 *   (prefixItems, or items as a list with additionalItems), minItems,
 *   maxItems, uniqueItems (not over a tuple, nor items that may be
 *   objects or arrays but as enum values), minLength, maxLength, pattern,
 *   enum, const, anyOf / oneOf whose alternatives start with different
 *   JSON types (or are objects told apart by a property all of them
 *   require, with different const or enum values, or else by a property
 *   each requires and the others do not name: that property is then
 *   written first; or, for one type, where one alternative holds all the
 *   others' values, such as a number beside an integer, a plain string
 *   beside a formatted one, or enum values it reads, or all are enum and
 *   const values, joined into one enum), $ref to
 *   #/$defs/... or #/definitions/..., allOf (beside annotations only) of
 *   one schema or of object schemas, merged (properties in order, one
 *   named twice only with the same schema, the required names of all,
 *   only those an additionalProperties false names), format (date, time,
 *   date-time and uuid strings; ipv4, ipv6, hostname, email, duration and
 *   uri strings, read as patterns; int64, float and double numbers),
 *   nullable (OpenAPI 3.0's, beside a type), minimum, maximum,
 *   exclusiveMinimum and exclusiveMaximum (as numbers, or draft 4's
 *   booleans beside minimum and maximum), multipleOf, and the annotations
 *   title, description, default, examples, $schema, $id, $comment, $defs,
 *   definitions, strict, discriminator, deprecated, readOnly, writeOnly.
 * What is generated is a subset of what the schema allows, chosen so that
 * the matcher stays deterministic:
 *   - an object with properties takes them in the order the schema lists
 *     them, each at most once, optional ones may be left out, and no
 *     others; an object without properties takes any keys (values fitting
 *     additionalProperties), each at most once (compared as decoded text,
 *     within TW_JSON_KEY_BYTES);
 *   - enum and const values are written compactly, byte for byte as
 *     jansson's compact dump of them;
 *   - "integer" is -?digits (no fraction or exponent); numbers have at most
 *     TW_JSON_MAX_NUMBER bytes, exponents at most two digits and integer
 *     parts of more than 18 digits only before a fraction or an exponent,
 *     so every number is a finite double or a 64-bit integer; a bounded
 *     number (or one with multipleOf) has no exponent, at most 18 integer
 *     and 9 fraction digits (bounds finer than 1e-9 are rounded inward,
 *     multipleOf must be a multiple of 1e-9), never reads "-0", and is
 *     compared with its bounds exactly, as decimals;
 *   - a string with a "pattern" (PCRE2's reading of it, with $ at the end
 *     of the text only, as ECMA-262 has it; no back references) is written
 *     without escapes, so it holds no quote, backslash or control
 *     character, and in at most TW_JSON_PATTERN_BYTES bytes; each whole
 *     character is taken only while PCRE2 finds the string a partial
 *     match (for a pattern anchored with ^; one that is not can match
 *     later), and the closing quote, like the character that reaches
 *     maxLength or the last of those bytes, only on a match. A partial
 *     match can still have no completion (a lookahead no character
 *     satisfies, a character that needs an escape, a pattern longer than
 *     what is left of maxLength), and a pattern that may match characters
 *     outside ASCII takes a UTF-8 lead byte before its character is whole,
 *     so for such patterns the matcher can reach a string no byte
 *     continues (the formats read as patterns are written so that it
 *     cannot, but at the end of their room);
 *   - a key of an object with patternProperties is written without
 *     escapes, in at most 255 bytes, each whole character taken while some
 *     pattern may still match it (or any key may come), and its closing
 *     quote only when the schemas of the patterns its text matches read
 *     the same values (additionalProperties' when it matches none); such
 *     an object starts no key once the state has no room for one;
 *   - the items of an array with uniqueItems are compared as JSON values
 *     (strings decoded, numbers by value: 1, 1.0 and 10e-1 are one, -0 is
 *     0; other enum values by their compact text), within
 *     TW_JSON_KEY_BYTES: a repeat is refused at the byte that ends it, at
 *     the character that fills maxLength or ends a format, and an enum
 *     value already taken at its first byte; maxItems is held to how many
 *     different values the items can take, so the array closes once all
 *     are taken. A number that repeats one is refused only where no later
 *     byte could change its value, so a set of numbers can reach digits
 *     all of whose continuations are taken (tw_json_grammar_may_strand);
 *   - whitespace between tokens is at most TW_JSON_MAX_WS bytes per gap, so
 *     a model cannot loop on blank space;
 *   - dates are real calendar days (Gregorian leap years); times and
 *     date-times are RFC 3339 with an offset (fractions of 1-9 digits).
 * Strings are UTF-8 checked (no overlong forms or surrogates) and \u
 * escapes pair surrogates, so every document passes a strict parser. */
#ifndef TW_JSON_GRAMMAR_H
#define TW_JSON_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/status.h"

#define TW_JSON_MAX_DEPTH        48
#define TW_JSON_MAX_WS           20
#define TW_JSON_MAX_NUMBER       32
#define TW_JSON_SCHEMA_MAX_BYTES (256u * 1024u)
/* Bounds on what one schema may compile into. */
#define TW_JSON_MAX_NODES   4096
#define TW_JSON_MAX_PROPS   64   /* per object */
#define TW_JSON_MAX_ENUM    64   /* values per enum */
#define TW_JSON_MAX_LITERAL 4096 /* bytes of one enum value or key, as JSON */
#define TW_JSON_MAX_PATTERN 1024 /* bytes of one "pattern" */
/* Bytes a string held to a "pattern" may take (the pattern is asked about
 * the whole string so far, which the state carries). */
#define TW_JSON_PATTERN_BYTES 512
/* Bytes of the keys of the open objects being read, and of the items of
 * the open arrays with uniqueItems, that the state keeps (each decoded,
 * after a length byte), so that no key comes twice in one object and no
 * value twice in one such array; an object or array whose records do not
 * fit, or that has one of more than 255 bytes, is no longer held to it. */
#define TW_JSON_KEY_BYTES 2048

typedef struct tw_json_grammar tw_json_grammar;

/* Compiles schema (JSON text, len bytes, at most TW_JSON_SCHEMA_MAX_BYTES);
 * schema NULL or len 0 compiles "any JSON object". INVALID_ARGUMENT names
 * what is wrong and where ("json_schema: unsupported keyword \"pattern\" at
 * /properties/id"). *out is freed with tw_json_grammar_free. */
tw_status tw_json_grammar_compile(const char *schema, size_t len, tw_json_grammar **out,
                                  tw_err *err);

void tw_json_grammar_free(tw_json_grammar *g);

/* Whether g holds strings read as patterns ("pattern", or the formats read
 * as one), the one place where the matcher may reach a state no byte
 * continues (see above). */
bool tw_json_grammar_has_patterns(const tw_json_grammar *g);

/* Whether the matcher may reach a state no byte continues: g has patterns,
 * or an array with uniqueItems over numbers (where every value the digits
 * so far can still become may be taken already). */
bool tw_json_grammar_may_strand(const tw_json_grammar *g);

/* A grammar whose documents are exactly one of the n raw texts (1 to
 * TW_JSON_MAX_ENUM, non-empty UTF-8 of at most TW_JSON_MAX_LITERAL bytes),
 * with no whitespace or quoting around them; where one choice is a prefix
 * of another, the shorter is complete and the longer may still follow. */
tw_status tw_json_grammar_choice(const char *const *choices, size_t n, tw_json_grammar **out,
                                 tw_err *err);

/* Bytes that must follow the document, exactly (a tool call's closing
 * "}\n</tool_call>"); at most TW_JSON_MAX_TAIL. The document is closed
 * only after them. */
#define TW_JSON_MAX_TAIL 256
tw_status tw_json_grammar_set_tail(tw_json_grammar *g, const char *tail, size_t len, tw_err *err);

/* One level of the matcher's stack. The fields' meaning depends on kind
 * (json_match.c); callers only copy states. */
typedef struct tw_json_frame {
    uint64_t bits;  /* literal or key candidates; a \u escape's code unit */
    uint32_t node;  /* grammar node */
    uint32_t count; /* string characters or array items so far */
    uint16_t pos;   /* bytes into a literal, key, escape or number */
    uint16_t prop;  /* objects: properties before this one are behind */
    uint8_t kind;
    uint8_t phase;
} tw_json_frame;

/* Where a document stands. Plain data: copy it with tw_json_state_copy
 * (which copies only the frames in use) to try bytes without losing it. */
typedef struct tw_json_state {
    const tw_json_grammar *g;
    uint16_t depth; /* frames in use; 0: the document is whole */
    uint16_t tail;  /* bytes of the grammar's tail taken */
    uint8_t ws;     /* whitespace bytes in the current gap */
    uint16_t plen;  /* bytes of the string being read, when it has a pattern */
    uint16_t klen;  /* bytes of kbuf in use: open objects' keys, open sets' items */
    uint16_t kcur;  /* bytes of the key or item being read, after kbuf[klen] */
    uint16_t khigh; /* a \u escape's high surrogate, in a key or an item */
    tw_json_frame f[TW_JSON_MAX_DEPTH];
    unsigned char pbuf[TW_JSON_PATTERN_BYTES];
    unsigned char kbuf[TW_JSON_KEY_BYTES];
} tw_json_state;

void tw_json_state_init(tw_json_state *s, const tw_json_grammar *g);

void tw_json_state_copy(tw_json_state *dst, const tw_json_state *src);

/* Takes one byte; false when it cannot continue the document (s is then
 * unspecified: feed a copy when the answer matters). No allocation. */
bool tw_json_state_feed_byte(tw_json_state *s, unsigned char c);

/* Takes n bytes, stopping at the first that does not fit (false). */
bool tw_json_state_feed(tw_json_state *s, const char *p, size_t n);

/* The bytes so far are a whole document (a top-level number may still
 * grow, so this can hold while more bytes are accepted). */
bool tw_json_state_complete(const tw_json_state *s);

/* The document (and its tail) is whole and nothing more can follow. */
bool tw_json_state_closed(const tw_json_state *s);

/* A string body is being read with no escape or UTF-8 sequence pending:
 * any run of plain characters (no quote, backslash or control byte; whole
 * UTF-8) of at most *room characters fits (*room UINT32_MAX: no bound).
 * The vocabulary mask's fast path. */
bool tw_json_state_in_plain_string(const tw_json_state *s, uint32_t *room);

#endif
