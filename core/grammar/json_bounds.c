/* Numeric bounds (minimum, maximum, exclusiveMinimum, exclusiveMaximum)
 * and multipleOf.
 *
 * A schema's bounds become two ranges of magnitudes in units of 1e-9: one
 * for numbers written without a minus, one for those written with it. A
 * bounded number has no exponent, at most 18 integer and 9 fraction digits,
 * so it is exactly a whole number of units below 1e27 and every unit in a
 * range can be written within TW_JSON_MAX_NUMBER bytes. The matcher then
 * takes a digit only when some number that starts with the digits so far
 * falls in the range, which keeps it exact on prefixes; the check is
 * integer arithmetic, so a bound such as 0.1 means 0.1, not the double
 * nearest to it. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_compiler.h"

#define UNIT        1000000000u /* units per whole number */
#define INT_DIGITS  18
#define FRAC_DIGITS 9

/* Past anything a bounded number can be, in units (1e28). */
static const __int128 FAR = (__int128)10000000000000000000ull * 1000000000;

static jmag ten_to(unsigned e)
{
    jmag p = 1;
    while (e--)
        p *= 10;
    return p;
}

/* ------------------------------------------------------------- compiling */

/* A bound's value in units, rounded down; *exact when nothing was cut.
 * Integers are taken as they are; a real is taken as the shortest decimal
 * that reads back as the same double, which is the text the schema gave. */
static __int128 bound_units(const json_t *v, bool *exact)
{
    *exact = true;
    if (json_is_integer(v))
        return (__int128)json_integer_value(v) * UNIT;
    const double d = json_real_value(v);
    char text[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(text, sizeof text, "%.*e", prec - 1, d);
        if (strtod(text, NULL) == d)
            break;
    }
    /* text is [-]D.DDDDe[+-]XX */
    const bool neg = text[0] == '-';
    uint64_t m = 0;
    int digits = 0;
    const char *p = text + neg;
    for (; *p && *p != 'e'; p++) {
        if (*p == '.')
            continue;
        m = m * 10 + (uint64_t)(*p - '0');
        digits++;
    }
    const int x = (*p == 'e' ? atoi(p + 1) : 0) - (digits - 1) + 9;
    __int128 units;
    if (m == 0) {
        units = 0;
    } else if (x >= 0) {
        units = x > 20 ? FAR : (__int128)m * (__int128)ten_to((unsigned)x);
    } else {
        const jmag div = -x > 30 ? 0 : ten_to((unsigned)-x);
        const jmag q = div ? m / div : 0, r = div ? m % div : m;
        *exact = r == 0;
        units = (__int128)q;
        if (neg && !*exact)
            units += 1; /* rounded down after the sign is applied below */
    }
    if (units > FAR)
        units = FAR;
    return neg ? -units : units;
}

/* Rounds down (up) to a multiple of step. */
static __int128 floor_to(__int128 v, __int128 step)
{
    __int128 q = v / step;
    if (v % step != 0 && v < 0)
        q--;
    return q * step;
}

static __int128 ceil_to(__int128 v, __int128 step)
{
    __int128 q = v / step;
    if (v % step != 0 && v > 0)
        q++;
    return q * step;
}

static bool is_bound_keyword(const char *k)
{
    return !strcmp(k, "minimum") || !strcmp(k, "maximum") || !strcmp(k, "exclusiveMinimum") ||
           !strcmp(k, "exclusiveMaximum") || !strcmp(k, "multipleOf");
}

const char *jc_bound_keyword(const json_t *s)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)s, k, v)
    {
        if (is_bound_keyword(k))
            return k;
    }
    return NULL;
}

/* Tightens *lo (lower) or *hi by one keyword: a number, or (draft 4) a
 * boolean exclusiveMinimum/exclusiveMaximum that makes minimum/maximum
 * exclusive. */
static bool apply_bound(compiler *c, const json_t *s, const char *key, bool lower, __int128 *lo,
                        __int128 *hi)
{
    const json_t *v = json_object_get(s, key);
    if (!v)
        return true;
    const bool strict = key[0] == 'e';
    const char *plain = lower ? "minimum" : "maximum";
    if (json_is_boolean(v)) {
        if (!strict || !json_object_get(s, plain)) {
            jc_fail(c, TW_INVALID_ARGUMENT,
                    "json_schema: \"%s\" as a boolean needs the bound beside it (at %s)", key);
            return false;
        }
        return true; /* taken with the plain bound */
    }
    if (!json_is_number(v) || (json_is_real(v) && !isfinite(json_real_value(v)))) {
        jc_fail(c, TW_INVALID_ARGUMENT, "json_schema: \"%s\" must be a number (at %s)", key);
        return false;
    }
    bool exclusive = strict;
    if (!strict) {
        const json_t *flag = json_object_get(s, lower ? "exclusiveMinimum" : "exclusiveMaximum");
        exclusive = json_is_true(flag);
    }
    bool exact;
    const __int128 u = bound_units(v, &exact);
    if (lower) {
        /* x >= u when u is the bound itself, x > u when it was cut or is
         * exclusive (one unit is the next number a bounded value can be) */
        const __int128 b = exact && !exclusive ? u : u + 1;
        if (b > *lo)
            *lo = b;
    } else {
        const __int128 b = exact && exclusive ? u - 1 : u;
        if (b < *hi)
            *hi = b;
    }
    return true;
}

static jmag gcd(jmag a, jmag b)
{
    while (b) {
        jmag t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The grid every value is a multiple of, in units: one unit, a whole
 * number for integers, and multipleOf (a positive decimal of at most 9
 * fraction digits) besides. 0 after a failure. */
static __int128 grid_of(compiler *c, const json_t *s, bool integer)
{
    jmag grid = integer ? UNIT : 1;
    const json_t *v = json_object_get(s, "multipleOf");
    if (!v)
        return (__int128)grid;
    bool exact = false;
    const __int128 m = json_is_number(v) && (!json_is_real(v) || isfinite(json_real_value(v)))
                           ? bound_units(v, &exact)
                           : 0;
    if (m <= 0 || m >= FAR || !exact) {
        jc_fail(c, TW_INVALID_ARGUMENT,
                "json_schema: \"multipleOf\" must be a positive number with at most 9 fraction "
                "digits%s (at %s)",
                NULL);
        return 0;
    }
    /* the least common multiple, which stays below 1e28 units or past
     * every bounded number (then only 0 is left) */
    const jmag g = gcd(grid, (jmag)m), l = grid / g * (jmag)m;
    return l > (jmag)FAR ? FAR : (__int128)l;
}

/* The numeric formats OpenAPI and its kin name: the range of each sized
 * integer; int64 and uint64 bound no number with at most 18 digits but
 * for uint64's minus, and float and double bound none here. */
typedef struct numeric_format {
    const char *name;
    long long lo, hi;
    bool integer;
} numeric_format;

static const numeric_format numeric_formats[] = {
    {"int8", -128, 127, true},
    {"uint8", 0, 255, true},
    {"int16", -32768, 32767, true},
    {"uint16", 0, 65535, true},
    {"int32", -2147483648ll, 2147483647ll, true},
    {"uint32", 0, 4294967295ll, true},
    {"int64", LLONG_MIN, LLONG_MAX, true},
    {"uint64", 0, LLONG_MAX, true},
    {"float", LLONG_MIN, LLONG_MAX, false},
    {"double", LLONG_MIN, LLONG_MAX, false},
};

static const numeric_format *numeric_format_of(const json_t *s)
{
    const char *name = json_string_value(json_object_get(s, "format"));
    for (size_t i = 0; name && i < sizeof numeric_formats / sizeof numeric_formats[0]; i++)
        if (!strcmp(name, numeric_formats[i].name))
            return &numeric_formats[i];
    return NULL;
}

int jc_numeric_format(const char *name)
{
    for (size_t i = 0; i < sizeof numeric_formats / sizeof numeric_formats[0]; i++)
        if (!strcmp(name, numeric_formats[i].name))
            return numeric_formats[i].integer ? 2 : 1;
    return 0;
}

/* Whether numeric format f bounds the numbers it is on. */
static bool format_bounded(const numeric_format *f)
{
    return f && (f->lo != LLONG_MIN || f->hi != LLONG_MAX);
}

uint32_t jc_number_bounds(compiler *c, const json_t *s, bool integer)
{
    const numeric_format *nf = numeric_format_of(s);
    if (!jc_bound_keyword(s) && !format_bounded(nf))
        return JN_NONE;
    __int128 lo = -FAR, hi = FAR;
    if (format_bounded(nf)) {
        if (nf->lo != LLONG_MIN)
            lo = (__int128)nf->lo * UNIT;
        if (nf->hi != LLONG_MAX)
            hi = (__int128)nf->hi * UNIT;
    }
    if (!apply_bound(c, s, "minimum", true, &lo, &hi) ||
        !apply_bound(c, s, "exclusiveMinimum", true, &lo, &hi) ||
        !apply_bound(c, s, "maximum", false, &lo, &hi) ||
        !apply_bound(c, s, "exclusiveMaximum", false, &lo, &hi))
        return JN_NONE;
    const __int128 step = grid_of(c, s, integer);
    if (step == 0)
        return JN_NONE;
    lo = ceil_to(lo, step);
    hi = floor_to(hi, step);
    const __int128 top = integer ? ((__int128)ten_to(INT_DIGITS) - 1) * UNIT
                                 : (__int128)ten_to(INT_DIGITS) * UNIT - 1;
    jbounds b = {.grid = (jmag)step};
    /* a minus needs a magnitude of at least one step, so "-0" is never a
     * bounded number */
    const __int128 side_lo[2] = {lo > 0 ? lo : 0, -hi > step ? -hi : step};
    const __int128 side_hi[2] = {hi < top ? hi : top, -lo < top ? -lo : top};
    for (int i = 0; i < 2; i++) {
        b.open[i] = side_lo[i] <= side_hi[i];
        b.lo[i] = b.open[i] ? (jmag)side_lo[i] : 0;
        b.hi[i] = b.open[i] ? (jmag)side_hi[i] : 0;
    }
    if (!b.open[0] && !b.open[1])
        return jc_fail(c, TW_INVALID_ARGUMENT,
                       "json_schema: no %s fits the bounds (at most 18 integer digits, 9 "
                       "fraction digits) (at %s)",
                       integer ? "integer" : "number");
    tw_json_grammar *g = c->g;
    if (!jc_grow((void **)&g->bounds, &g->cap_bounds, g->n_bounds + 1, sizeof *g->bounds))
        return jc_fail(c, TW_RESOURCE_EXHAUSTED, "json_schema: out of memory%s (at %s)", NULL);
    g->bounds[g->n_bounds] = b;
    return g->n_bounds++;
}

/* ------------------------------------------------------------- matching */

/* The frame of a bounded number: bits holds the integer part's value,
 * count the fraction's digits as an integer, prop the integer part's digit
 * count (bits 0-4), the fraction's (5-8) and the minus (9). */
#define K_OF(p)   ((unsigned)(p)&31u)
#define FD_OF(p)  ((unsigned)(p) >> 5 & 15u)
#define NEG_OF(p) ((unsigned)(p) >> 9 & 1u)

static jmag value_of(const tw_json_frame *f)
{
    return (jmag)f->bits * UNIT + (jmag)f->count * ten_to(FRAC_DIGITS - FD_OF(f->prop));
}

bool json_bounded_accepting(const jbounds *b, const tw_json_frame *f)
{
    if (f->phase != NP_ZERO && f->phase != NP_INT && f->phase != NP_FRAC)
        return false;
    const unsigned side = NEG_OF(f->prop);
    const jmag v = value_of(f);
    return b->open[side] && v >= b->lo[side] && v <= b->hi[side] && v % b->grid == 0;
}

/* Whether [first, last] holds a value of side's range on the grid (whose
 * ends are on it). */
static bool meets(const jbounds *b, unsigned side, jmag first, jmag last)
{
    const jmag a = first > b->lo[side] ? first : b->lo[side];
    const jmag z = last < b->hi[side] ? last : b->hi[side];
    return a <= z && (a + b->grid - 1) / b->grid * b->grid <= z;
}

/* Whether a number that starts as f does (in phase) can still fall in its
 * side's range: the integer part may grow by up to 18 - k digits (none
 * after a leading zero), the fraction by up to 9 - fd. */
static bool reachable(const jbounds *b, const tw_json_frame *f)
{
    const unsigned side = NEG_OF(f->prop);
    if (!b->open[side])
        return false;
    if (f->phase == NP_DOT || f->phase == NP_FRAC) {
        const jmag span = ten_to(FRAC_DIGITS - FD_OF(f->prop));
        const jmag first = value_of(f);
        return meets(b, side, first, first + span - 1);
    }
    const unsigned grow = f->phase == NP_INT ? INT_DIGITS - K_OF(f->prop) : 0;
    jmag scale = 1;
    for (unsigned l = 0; l <= grow; l++, scale *= 10) {
        /* integer parts [v * 10^l, (v + 1) * 10^l - 1] and any fraction
         * after them (an integer node's grid is whole, so the same test
         * holds for it) */
        const jmag first = (jmag)f->bits * scale * UNIT;
        if (first > b->hi[side])
            return false;
        if (meets(b, side, first, ((jmag)f->bits + 1) * scale * UNIT - 1))
            return true;
    }
    return false;
}

int json_bounded_byte(const jbounds *b, bool integer, tw_json_frame *f, unsigned char c)
{
    const bool digit = c >= '0' && c <= '9';
    const unsigned d = digit ? (unsigned)(c - '0') : 0;
    tw_json_frame t = *f;
    switch (f->phase) {
    case NP_START:
        if (c == '-') {
            t.phase = NP_MINUS;
            t.prop |= 1u << 9;
            break;
        }
        /* fall through */
    case NP_MINUS:
        if (!digit)
            return -1;
        t.bits = d;
        t.prop = (uint16_t)(t.prop | 1u);
        t.phase = d == 0 ? NP_ZERO : NP_INT;
        break;
    case NP_INT:
        if (digit && K_OF(f->prop) < INT_DIGITS) {
            t.bits = f->bits * 10 + d;
            t.prop = (uint16_t)(t.prop + 1u);
            break;
        }
        /* fall through */
    case NP_ZERO:
        if (c == '.' && !integer) {
            t.phase = NP_DOT;
            break;
        }
        return json_bounded_accepting(b, f) ? 0 : -1;
    case NP_DOT:
    case NP_FRAC:
        if (digit && FD_OF(f->prop) < FRAC_DIGITS) {
            t.count = f->count * 10 + d;
            t.prop = (uint16_t)(t.prop + (1u << 5));
            t.phase = NP_FRAC;
            break;
        }
        return json_bounded_accepting(b, f) ? 0 : -1;
    default:
        return -1;
    }
    if (t.phase == NP_MINUS ? !b->open[1] : !reachable(b, &t))
        return json_bounded_accepting(b, f) ? 0 : -1;
    t.pos++;
    *f = t;
    return 1;
}
