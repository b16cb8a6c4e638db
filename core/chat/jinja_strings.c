/* Python's str operations behind the template methods and filters: case
 * changes (Unicode-aware through utf8proc), strip, replace, splitlines and
 * %-formatting. Each answers a new string value or records the error in
 * the render. */
#include "jinja.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

static bool put_cp(jrender *r, const jnode *at, jbuf *b, int32_t cp)
{
    char enc[4];
    return jbuf_put(r, at, b, enc, ju_encode(cp, enc));
}

static bool is_cased(int32_t cp)
{
    utf8proc_category_t c = utf8proc_category(cp);
    return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
}

bool jstr_case(jrender *r, const jnode *at, const jstr *s, jcase c, jv *out)
{
    jbuf b = {0};
    bool prev_cased = false, first = true;
    for (size_t i = 0; i < s->len;) {
        int32_t cp;
        size_t n = ju_decode(s->data + i, s->len - i, &cp);
        int32_t m = cp;
        bool valid = n > 1 || cp < 0x80;
        if (valid) {
            switch (c) {
            case JCASE_UPPER: m = utf8proc_toupper(cp); break;
            case JCASE_LOWER: m = utf8proc_tolower(cp); break;
            case JCASE_CAPITALIZE: m = first ? utf8proc_totitle(cp) : utf8proc_tolower(cp); break;
            case JCASE_TITLE:
                m = prev_cased ? utf8proc_tolower(cp) : utf8proc_totitle(cp);
                prev_cased = is_cased(cp);
                break;
            }
        }
        bool ok = valid ? put_cp(r, at, &b, m) : jbuf_put(r, at, &b, s->data + i, n);
        if (!ok) {
            jbuf_release(r, &b);
            return false;
        }
        first = false;
        i += n;
    }
    return jbuf_to_str(r, at, &b, out);
}

static bool in_chars(const jstr *chars, int32_t cp)
{
    if (!chars)
        return ju_isspace(cp);
    for (size_t i = 0; i < chars->len;) {
        int32_t c;
        i += ju_decode(chars->data + i, chars->len - i, &c);
        if (c == cp)
            return true;
    }
    return false;
}

bool jstr_strip(jrender *r, const jnode *at, const jstr *s, const jstr *chars, bool left,
                bool right, jv *out)
{
    size_t a = 0, e = s->len;
    while (left && a < e) {
        int32_t cp;
        size_t n = ju_decode(s->data + a, e - a, &cp);
        if (!in_chars(chars, cp))
            break;
        a += n;
    }
    while (right && e > a) {
        size_t b = e - 1;
        while (b > a && ((unsigned char)s->data[b] & 0xC0) == 0x80 && e - b < 4)
            b--;
        int32_t cp;
        size_t n = ju_decode(s->data + b, e - b, &cp);
        if (n != e - b) { /* a stray continuation byte stands for itself */
            b = e - 1;
            cp = (unsigned char)s->data[b];
        }
        if (!in_chars(chars, cp))
            break;
        e = b;
    }
    return jv_new_str(r, at, s->data + a, e - a, out);
}

bool jstr_replace(jrender *r, const jnode *at, const jstr *s, const jstr *old, const jstr *rep,
                  int64_t count, jv *out)
{
    jbuf b = {0};
    bool ok = true;
    int64_t done = 0;
    if (old->len == 0) {
        /* Python inserts the replacement around every character. */
        size_t i = 0;
        while (ok && (count < 0 || done < count)) {
            ok = jbuf_put(r, at, &b, rep->data, rep->len);
            done++;
            if (i >= s->len)
                break;
            int32_t cp;
            size_t n = ju_decode(s->data + i, s->len - i, &cp);
            ok = ok && jbuf_put(r, at, &b, s->data + i, n);
            i += n;
        }
        if (ok && i < s->len)
            ok = jbuf_put(r, at, &b, s->data + i, s->len - i);
    } else {
        size_t i = 0;
        while (ok) {
            const char *hit = (count < 0 || done < count)
                                  ? memmem(s->data + i, s->len - i, old->data, old->len)
                                  : NULL;
            if (!hit) {
                ok = jbuf_put(r, at, &b, s->data + i, s->len - i);
                break;
            }
            size_t h = (size_t)(hit - s->data);
            ok = jbuf_put(r, at, &b, s->data + i, h - i) &&
                 jbuf_put(r, at, &b, rep->data, rep->len);
            i = h + old->len;
            done++;
        }
    }
    if (!ok) {
        jbuf_release(r, &b);
        return false;
    }
    return jbuf_to_str(r, at, &b, out);
}

/* Line boundaries of Python's str.splitlines(). */
static size_t line_break_at(const char *s, size_t len, size_t *blen)
{
    int32_t cp;
    size_t n = ju_decode(s, len, &cp);
    *blen = n;
    if (cp == '\r' && len > 1 && s[1] == '\n') {
        *blen = 2;
        return 1;
    }
    return cp == '\n' || cp == '\r' || cp == '\v' || cp == '\f' || cp == 0x1C || cp == 0x1D ||
           cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

bool jstr_splitlines(jrender *r, const jnode *at, const jstr *s, bool keepends, jv *out)
{
    if (!jv_new_list(r, at, 0, false, out))
        return false;
    size_t start = 0;
    for (size_t i = 0; i < s->len;) {
        size_t blen;
        if (line_break_at(s->data + i, s->len - i, &blen)) {
            jv line;
            size_t end = keepends ? i + blen : i;
            if (!jv_new_str(r, at, s->data + start, end - start, &line) ||
                !jlist_push(r, at, jv_list_of(*out), line))
                return false;
            i += blen;
            start = i;
        } else {
            i += blen;
        }
    }
    if (start < s->len) {
        jv line;
        if (!jv_new_str(r, at, s->data + start, s->len - start, &line) ||
            !jlist_push(r, at, jv_list_of(*out), line))
            return false;
    }
    return true;
}

/* Widest field and longest precision a %-format takes: Python allows any,
 * but the C library builds every digit of a precision of millions before a
 * bounded buffer cuts it, at seconds and gigabytes a call that the
 * renderer's step and memory limits never see. */
#define PERCENT_FIELD_MAX 256

/* One %-conversion's flags, width and precision (-1: none). */
typedef struct percent_spec {
    char flags[8];
    int width, prec;
} percent_spec;

/* A run of decimal digits from fmt at *i (none: -1); false past
 * PERCENT_FIELD_MAX. */
static bool percent_number(const jstr *fmt, size_t *i, int *out)
{
    *out = -1;
    while (*i < fmt->len && fmt->data[*i] >= '0' && fmt->data[*i] <= '9') {
        int d = fmt->data[(*i)++] - '0';
        *out = (*out < 0 ? 0 : *out) * 10 + d;
        if (*out > PERCENT_FIELD_MAX)
            return false;
    }
    return true;
}

/* t with a conversion's precision (at most that many characters) and
 * width (padded with spaces to that many, on the left unless the '-'
 * flag), counted in code points as Python counts them. */
static bool percent_pad_str(jrender *r, const jnode *at, jbuf *b, const char *t, size_t len,
                            const percent_spec *ps)
{
    size_t cut = 0, chars = 0;
    while (cut < len && (ps->prec < 0 || chars < (size_t)ps->prec)) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t n =
            utf8proc_iterate((const utf8proc_uint8_t *)t + cut, (utf8proc_ssize_t)(len - cut), &cp);
        cut += n > 0 ? (size_t)n : 1;
        chars++;
    }
    size_t pad = ps->width > 0 && (size_t)ps->width > chars ? (size_t)ps->width - chars : 0;
    const bool left = strchr(ps->flags, '-') != NULL;
    bool ok = true;
    for (size_t k = 0; ok && !left && k < pad; k++)
        ok = jbuf_put(r, at, b, " ", 1);
    ok = ok && jbuf_put(r, at, b, t, cut);
    for (size_t k = 0; ok && left && k < pad; k++)
        ok = jbuf_put(r, at, b, " ", 1);
    return ok;
}

/* A numeric conversion through snprintf: spec's fields, the length
 * modifier mod ("" or "ll") and conv. */
static int percent_c(char *dst, size_t cap, const percent_spec *ps, const char *mod, char conv)
{
    int n = snprintf(dst, cap, "%%%s", ps->flags);
    if (ps->width >= 0)
        n += snprintf(dst + n, cap - (size_t)n, "%d", ps->width);
    if (ps->prec >= 0)
        n += snprintf(dst + n, cap - (size_t)n, ".%d", ps->prec);
    return n + snprintf(dst + n, cap - (size_t)n, "%s%c", mod, conv);
}

bool jstr_percent(jrender *r, const jnode *at, const jstr *fmt, const jv *args, size_t nargs,
                  jv *out)
{
    jbuf b = {0};
    size_t ai = 0;
    bool ok = true;
    for (size_t i = 0; ok && i < fmt->len; i++) {
        char c = fmt->data[i];
        if (c != '%') {
            ok = jbuf_put(r, at, &b, &c, 1);
            continue;
        }
        percent_spec ps = {.width = -1, .prec = -1};
        size_t fl = 0;
        i++;
        while (i < fmt->len && strchr("-+ 0#", fmt->data[i]) && fl + 1 < sizeof ps.flags)
            ps.flags[fl++] = fmt->data[i++];
        bool fits = percent_number(fmt, &i, &ps.width);
        if (fits && i < fmt->len && fmt->data[i] == '.') {
            i++;
            fits = percent_number(fmt, &i, &ps.prec);
            if (ps.prec < 0)
                ps.prec = 0; /* "%.f": precision 0, as in C and Python */
        }
        if (!fits) {
            ok = jr_fail(r, at, TW_INVALID_ARGUMENT, "format: width or precision over %d",
                         PERCENT_FIELD_MAX);
            break;
        }
        if (i >= fmt->len) {
            ok = jr_fail(r, at, TW_INVALID_ARGUMENT, "incomplete format");
            break;
        }
        char conv = fmt->data[i];
        if (conv == '%') {
            ok = jbuf_put(r, at, &b, "%", 1);
            continue;
        }
        if (ai >= nargs) {
            ok = jr_fail(r, at, TW_INVALID_ARGUMENT, "not enough arguments for format string");
            break;
        }
        jv v = args[ai++];
        /* a number of at most PERCENT_FIELD_MAX digits after the point and
         * 309 before it, or a field that wide */
        char tmp[640], spec[48];
        int n = 0;
        switch (conv) {
        case 's':
        case 'r': {
            jbuf t = {0};
            ok = conv == 's' ? jv_str_append(r, at, &t, v) : jv_repr_append(r, at, &t, v);
            if (ok)
                ok = percent_pad_str(r, at, &b, t.data ? t.data : "", t.len, &ps);
            jbuf_release(r, &t);
            break;
        }
        case 'd':
        case 'i':
        case 'x':
        case 'X':
        case 'o':
            if (v.kind == JV_FLOAT)
                v = jv_int((int64_t)v.u.f);
            if (v.kind != JV_INT && v.kind != JV_BOOL) {
                ok = jr_fail(r, at, TW_INVALID_ARGUMENT, "%%%c format: a number is required",
                             conv);
                break;
            }
            percent_c(spec, sizeof spec, &ps, "ll", conv == 'i' ? 'd' : conv);
            n = snprintf(tmp, sizeof tmp, spec, (long long)(v.kind == JV_INT ? v.u.i : v.u.b));
            ok = n >= 0 && (size_t)n < sizeof tmp
                     ? jbuf_put(r, at, &b, tmp, (size_t)n)
                     : jr_fail(r, at, TW_INTERNAL, "format: %%%c result too long", conv);
            break;
        case 'f':
        case 'F':
        case 'e':
        case 'E':
        case 'g':
        case 'G':
            if (!jv_is_num(v)) {
                ok = jr_fail(r, at, TW_INVALID_ARGUMENT, "%%%c format: a number is required",
                             conv);
                break;
            }
            percent_c(spec, sizeof spec, &ps, "", conv);
            n = snprintf(tmp, sizeof tmp, spec,
                         v.kind == JV_FLOAT ? v.u.f
                         : v.kind == JV_INT ? (double)v.u.i
                                            : (double)v.u.b);
            ok = n >= 0 && (size_t)n < sizeof tmp
                     ? jbuf_put(r, at, &b, tmp, (size_t)n)
                     : jr_fail(r, at, TW_INTERNAL, "format: %%%c result too long", conv);
            break;
        default:
            ok = jr_fail(r, at, TW_INVALID_ARGUMENT, "unsupported format character '%c'", conv);
        }
    }
    if (ok && ai < nargs)
        ok = jr_fail(r, at, TW_INVALID_ARGUMENT,
                     "not all arguments converted during string formatting");
    if (!ok) {
        jbuf_release(r, &b);
        return false;
    }
    return jbuf_to_str(r, at, &b, out);
}
