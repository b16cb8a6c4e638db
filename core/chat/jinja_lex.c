/* Lexer: template text -> tokens, with Jinja2's whitespace rules as Hugging
 * Face configures them (trim_blocks, lstrip_blocks, no trailing newline).
 *
 * The rules, which decide bytes of every prompt:
 *  - newlines are normalised to "\n" and one trailing newline is dropped;
 *  - "{%-", "{{-", "{#-" strip all whitespace before the tag; "-%}", "-}}",
 *    "-#}" strip all whitespace after it;
 *  - trim_blocks: one "\n" right after "%}" or "#}" is dropped ("+%}" keeps it);
 *  - lstrip_blocks: spaces and tabs between the start of a line and "{%" or
 *    "{#" are dropped ("{%+" keeps them); "{{" is never lstripped.
 */
#include "jinja.h"

#include <stdlib.h>
#include <string.h>

typedef struct lexer {
    const char *src;
    size_t len;
    jarena *a;
    jtoks *out;
    tw_err *err;
    /* line/column cache: offsets only move forward */
    size_t loc_off;
    int loc_line, loc_col;
} lexer;

static void locate(lexer *lx, size_t off, int *line, int *col)
{
    if (off < lx->loc_off) {
        lx->loc_off = 0;
        lx->loc_line = 1;
        lx->loc_col = 1;
    }
    for (; lx->loc_off < off && lx->loc_off < lx->len; lx->loc_off++) {
        unsigned char c = (unsigned char)lx->src[lx->loc_off];
        if (c == '\n') {
            lx->loc_line++;
            lx->loc_col = 1;
        } else if ((c & 0xC0) != 0x80) {
            lx->loc_col++;
        }
    }
    *line = lx->loc_line;
    *col = lx->loc_col;
}

static tw_status lex_error(lexer *lx, size_t off, const char *msg)
{
    int line, col;
    locate(lx, off, &line, &col);
    return tw_errorf(lx->err, TW_INVALID_ARGUMENT, "chat template line %d, column %d: %s", line,
                     col, msg);
}

static tw_status push(lexer *lx, size_t off, jtok t)
{
    if (lx->out->n == lx->out->cap) {
        size_t ncap = lx->out->cap ? lx->out->cap * 2 : 64;
        jtok *v = realloc(lx->out->v, ncap * sizeof *v);
        if (!v)
            return tw_errorf(lx->err, TW_RESOURCE_EXHAUSTED, "chat template: out of memory");
        lx->out->v = v;
        lx->out->cap = ncap;
    }
    locate(lx, off, &t.line, &t.col);
    lx->out->v[lx->out->n++] = t;
    return TW_OK;
}

static char *arena_copy(jarena *a, const char *s, size_t n)
{
    char *p = jarena_alloc(a, n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

/* Length of the Python-whitespace character at s, or 0. */
static size_t space_at(const char *s, size_t len)
{
    int32_t cp;
    size_t n = ju_decode(s, len, &cp);
    return n && ju_isspace(cp) ? n : 0;
}

static size_t skip_space(const lexer *lx, size_t p)
{
    size_t n;
    while (p < lx->len && (n = space_at(lx->src + p, lx->len - p)) != 0)
        p += n;
    return p;
}

/* End of text once trailing Python whitespace is removed. */
static size_t rstrip_end(const char *s, size_t start, size_t end)
{
    size_t e = end;
    while (e > start) {
        size_t b = e - 1;
        while (b > start && ((unsigned char)s[b] & 0xC0) == 0x80 && e - b < 4)
            b--;
        if (!space_at(s + b, e - b) || space_at(s + b, e - b) != e - b)
            break;
        e = b;
    }
    return e;
}

static tw_status emit_text(lexer *lx, size_t start, size_t end)
{
    if (end <= start)
        return TW_OK;
    char *s = arena_copy(lx->a, lx->src + start, end - start);
    if (!s)
        return tw_errorf(lx->err, TW_RESOURCE_EXHAUSTED, "chat template: out of memory");
    return push(lx, start, (jtok){.kind = JT_TEXT, .s = s, .len = end - start});
}

/* The text before a tag, after the tag's whitespace control is applied. */
static size_t text_end(const lexer *lx, size_t start, size_t end, char sign, bool lstrip,
                       bool line_starting)
{
    if (sign == '-')
        return rstrip_end(lx->src, start, end);
    if (sign == '+' || !lstrip)
        return end;
    size_t l_pos = start;
    for (size_t i = end; i > start; i--) {
        if (lx->src[i - 1] == '\n') {
            l_pos = i;
            break;
        }
    }
    if (l_pos == start && !line_starting)
        return end;
    for (size_t i = l_pos; i < end; i++)
        if (lx->src[i] != ' ' && lx->src[i] != '\t')
            return end;
    return l_pos;
}

static bool word_at(const lexer *lx, size_t p, const char *w)
{
    size_t n = strlen(w);
    if (p + n > lx->len || memcmp(lx->src + p, w, n) != 0)
        return false;
    char c = p + n < lx->len ? lx->src[p + n] : ' ';
    return !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '_');
}

/* Matches "{%[-+]? WORD [-+]?%}" at p; returns the offset after it or 0, and
 * the signs used. */
static size_t match_word_tag(const lexer *lx, size_t p, const char *word, char *lsign,
                             char *rsign)
{
    if (p + 2 > lx->len || lx->src[p] != '{' || lx->src[p + 1] != '%')
        return 0;
    size_t q = p + 2;
    *lsign = 0;
    if (q < lx->len && (lx->src[q] == '-' || lx->src[q] == '+'))
        *lsign = lx->src[q++];
    q = skip_space(lx, q);
    if (!word_at(lx, q, word))
        return 0;
    q = skip_space(lx, q + strlen(word));
    *rsign = 0;
    if (q < lx->len && (lx->src[q] == '-' || lx->src[q] == '+'))
        *rsign = lx->src[q++];
    if (q + 2 > lx->len || lx->src[q] != '%' || lx->src[q + 1] != '}')
        return 0;
    return q + 2;
}

/* Applies an end tag's control to what follows it: returns the new offset. */
static size_t after_end(const lexer *lx, size_t p, char sign, bool trim)
{
    if (sign == '-')
        return skip_space(lx, p);
    if (sign != '+' && trim && p < lx->len && lx->src[p] == '\n')
        return p + 1;
    return p;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Python string-literal escapes, as Jinja2 applies them. */
static tw_status lex_string(lexer *lx, size_t *pp)
{
    size_t start = *pp;
    char q = lx->src[start];
    size_t p = start + 1;
    while (p < lx->len && lx->src[p] != q) {
        if (lx->src[p] == '\\')
            p++;
        p++;
    }
    if (p >= lx->len)
        return lex_error(lx, start, "unterminated string literal");
    size_t end = p;
    char *buf = jarena_alloc(lx->a, end - start + 1);
    if (!buf)
        return tw_errorf(lx->err, TW_RESOURCE_EXHAUSTED, "chat template: out of memory");
    size_t o = 0;
    for (size_t i = start + 1; i < end;) {
        char c = lx->src[i];
        if (c != '\\') {
            buf[o++] = c;
            i++;
            continue;
        }
        char e = lx->src[i + 1];
        i += 2;
        int32_t cp = -1;
        switch (e) {
        case '\n': continue;
        case '\\': buf[o++] = '\\'; continue;
        case '\'': buf[o++] = '\''; continue;
        case '"': buf[o++] = '"'; continue;
        case 'a': buf[o++] = '\a'; continue;
        case 'b': buf[o++] = '\b'; continue;
        case 'f': buf[o++] = '\f'; continue;
        case 'n': buf[o++] = '\n'; continue;
        case 'r': buf[o++] = '\r'; continue;
        case 't': buf[o++] = '\t'; continue;
        case 'v': buf[o++] = '\v'; continue;
        case 'x':
        case 'u':
        case 'U': {
            int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            int32_t v = 0;
            for (int k = 0; k < digits; k++) {
                int h = i + (size_t)k < end ? hexval(lx->src[i + (size_t)k]) : -1;
                if (h < 0)
                    return lex_error(lx, i - 2, "truncated \\x, \\u or \\U escape in string");
                v = v * 16 + h;
                if (v > 0x10FFFF)
                    return lex_error(lx, i - 2, "escape names a code point past U+10FFFF");
            }
            i += (size_t)digits;
            cp = v;
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                int32_t v = e - '0';
                for (int k = 0; k < 2 && i < end && lx->src[i] >= '0' && lx->src[i] <= '7'; k++)
                    v = v * 8 + (lx->src[i++] - '0');
                cp = v;
            } else {
                buf[o++] = '\\';
                i--; /* the character after the backslash is kept as is */
                continue;
            }
        }
        if (cp >= 0xD800 && cp <= 0xDFFF)
            cp = 0xFFFD;
        char enc[4];
        size_t n = ju_encode(cp, enc);
        memcpy(buf + o, enc, n); /* an escape is at least as long as its encoding */
        o += n;
    }
    buf[o] = '\0';
    *pp = end + 1;
    return push(lx, start, (jtok){.kind = JT_STRING, .s = buf, .len = o});
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static tw_status lex_number(lexer *lx, size_t *pp)
{
    size_t start = *pp, p = start;
    const char *s = lx->src;
    char digits[128];
    size_t nd = 0;
    int base = 10;
    if (s[p] == '0' && p + 1 < lx->len && strchr("xXoObB", s[p + 1])) {
        base = (s[p + 1] == 'x' || s[p + 1] == 'X') ? 16 : (s[p + 1] == 'o' || s[p + 1] == 'O') ? 8 : 2;
        p += 2;
        while (p < lx->len && (hexval(s[p]) >= 0 || s[p] == '_')) {
            if (s[p] != '_') {
                if (hexval(s[p]) >= base)
                    return lex_error(lx, start, "invalid digit in integer literal");
                if (nd + 1 >= sizeof digits)
                    return lex_error(lx, start, "integer literal too long");
                digits[nd++] = s[p];
            }
            p++;
        }
    } else {
        bool is_float = false;
        bool after_dot = start > 0 && s[start - 1] == '.';
        while (p < lx->len && (is_digit(s[p]) || s[p] == '_')) {
            if (s[p] != '_' && nd + 1 < sizeof digits)
                digits[nd++] = s[p];
            p++;
        }
        if (!after_dot && p + 1 < lx->len && s[p] == '.' && is_digit(s[p + 1])) {
            is_float = true;
            digits[nd++] = '.';
            p++;
            while (p < lx->len && (is_digit(s[p]) || s[p] == '_')) {
                if (s[p] != '_' && nd + 1 < sizeof digits)
                    digits[nd++] = s[p];
                p++;
            }
        }
        if (!after_dot && p < lx->len && (s[p] == 'e' || s[p] == 'E')) {
            size_t q = p + 1;
            if (q < lx->len && (s[q] == '+' || s[q] == '-'))
                q++;
            if (q < lx->len && is_digit(s[q])) {
                is_float = true;
                if (nd + 2 < sizeof digits)
                    digits[nd++] = 'e';
                for (size_t k = p + 1; k < q; k++)
                    if (nd + 1 < sizeof digits)
                        digits[nd++] = s[k];
                p = q;
                while (p < lx->len && (is_digit(s[p]) || s[p] == '_')) {
                    if (s[p] != '_' && nd + 1 < sizeof digits)
                        digits[nd++] = s[p];
                    p++;
                }
            }
        }
        if (nd + 1 >= sizeof digits)
            return lex_error(lx, start, "number literal too long");
        digits[nd] = '\0';
        if (is_float) {
            *pp = p;
            return push(lx, start, (jtok){.kind = JT_FLOAT, .fval = strtod(digits, NULL)});
        }
    }
    if (nd == 0)
        return lex_error(lx, start, "invalid integer literal");
    uint64_t v = 0;
    for (size_t k = 0; k < nd; k++) {
        unsigned d = (unsigned)hexval(digits[k]);
        if (v > (UINT64_C(0x7FFFFFFFFFFFFFFF) - d) / (unsigned)base)
            return lex_error(lx, start, "integer literal out of range");
        v = v * (unsigned)base + d;
    }
    *pp = p;
    return push(lx, start, (jtok){.kind = JT_INT, .ival = (int64_t)v});
}

static const char *const ops2[] = {"//", "**", "==", "!=", "<=", ">="};
static const char ops1[] = "+-/*%~[](){}<>=.:|,;";

/* The tokens inside {{ }} or {% %}; returns the offset after the end tag. */
static tw_status lex_tag(lexer *lx, size_t p, bool block, size_t *after, bool *line_starting)
{
    char stack[256];
    size_t depth = 0;
    size_t tag_start = p;
    for (;;) {
        p = skip_space(lx, p);
        if (p >= lx->len)
            return lex_error(lx, tag_start,
                             block ? "unexpected end of template inside a {% %} tag"
                                   : "unexpected end of template inside a {{ }} tag");
        const char *s = lx->src + p;
        size_t rest = lx->len - p;
        if (depth == 0) {
            char sign = 0;
            size_t n = 0;
            char c1 = block ? '%' : '}';
            if (rest >= 3 && (s[0] == '-' || (block && s[0] == '+')) && s[1] == c1 && s[2] == '}') {
                sign = s[0];
                n = 3;
            } else if (rest >= 2 && s[0] == c1 && s[1] == '}') {
                n = 2;
            }
            if (n) {
                tw_status st = push(lx, p, (jtok){.kind = block ? JT_BLOCK_END : JT_VAR_END});
                if (st)
                    return st;
                size_t q = after_end(lx, p + n, sign, block);
                *line_starting = q > p + n ? lx->src[q - 1] == '\n' : false;
                *after = q;
                return TW_OK;
            }
        }
        char c = s[0];
        tw_status st;
        if (c == '\'' || c == '"') {
            st = lex_string(lx, &p);
        } else if (is_digit(c)) {
            st = lex_number(lx, &p);
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
            size_t q = p;
            while (q < lx->len && ((lx->src[q] >= 'a' && lx->src[q] <= 'z') ||
                                   (lx->src[q] >= 'A' && lx->src[q] <= 'Z') ||
                                   is_digit(lx->src[q]) || lx->src[q] == '_'))
                q++;
            char *name = arena_copy(lx->a, s, q - p);
            if (!name)
                return tw_errorf(lx->err, TW_RESOURCE_EXHAUSTED, "chat template: out of memory");
            st = push(lx, p, (jtok){.kind = JT_NAME, .s = name, .len = q - p});
            p = q;
        } else {
            const char *op = NULL;
            size_t n = 0;
            for (size_t k = 0; k < sizeof ops2 / sizeof ops2[0]; k++)
                if (rest >= 2 && s[0] == ops2[k][0] && s[1] == ops2[k][1]) {
                    op = ops2[k];
                    n = 2;
                }
            if (!op && c && strchr(ops1, c)) {
                static const char *const singles[] = {"+", "-", "/", "*", "%", "~", "[", "]",
                                                      "(", ")", "{", "}", "<", ">", "=", ".",
                                                      ":", "|", ",", ";"};
                op = singles[strchr(ops1, c) - ops1];
                n = 1;
            }
            if (!op) {
                char msg[64];
                if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7F)
                    snprintf(msg, sizeof msg, "unexpected character '%c'", c);
                else
                    snprintf(msg, sizeof msg, "unexpected byte 0x%02x", (unsigned char)c);
                return lex_error(lx, p, msg);
            }
            if (c == '(' || c == '[' || c == '{') {
                if (depth == sizeof stack)
                    return lex_error(lx, p, "brackets nested too deeply");
                stack[depth++] = c == '(' ? ')' : c == '[' ? ']' : '}';
            } else if (c == ')' || c == ']' || c == '}') {
                if (depth == 0 || stack[depth - 1] != c) {
                    char msg[64];
                    if (depth)
                        snprintf(msg, sizeof msg, "unexpected '%c', expected '%c'", c,
                                 stack[depth - 1]);
                    else
                        snprintf(msg, sizeof msg, "unexpected '%c'", c);
                    return lex_error(lx, p, msg);
                }
                depth--;
            }
            st = push(lx, p, (jtok){.kind = JT_OP, .s = op, .len = n});
            p += n;
        }
        if (st)
            return st;
    }
}

tw_status jlex(const char *src, size_t len, jarena *a, jtoks *out, tw_err *err)
{
    /* Normalise newlines and drop one trailing newline, as Jinja2 does. */
    char *norm = jarena_alloc(a, len + 1);
    if (!norm)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "chat template: out of memory");
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            norm[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            norm[n++] = src[i];
        }
    }
    if (n && norm[n - 1] == '\n')
        n--;
    norm[n] = '\0';

    lexer lx = {.src = norm, .len = n, .a = a, .out = out, .err = err, .loc_line = 1,
                .loc_col = 1};
    size_t pos = 0;
    bool line_starting = true;
    tw_status st;
    while (pos < n) {
        size_t tag = pos;
        while (tag + 1 < n && !(norm[tag] == '{' &&
                                (norm[tag + 1] == '{' || norm[tag + 1] == '%' || norm[tag + 1] == '#')))
            tag++;
        if (tag + 1 >= n) {
            if ((st = emit_text(&lx, pos, n)))
                return st;
            break;
        }
        char kind = norm[tag + 1];
        size_t body = tag + 2;
        char sign = 0;
        if (body < n && (norm[body] == '-' || norm[body] == '+'))
            sign = norm[body++];
        char ls, rs;
        size_t raw_end = kind == '%' ? match_word_tag(&lx, tag, "raw", &ls, &rs) : 0;
        size_t tend = text_end(&lx, pos, tag, sign, kind != '{', line_starting);
        if ((st = emit_text(&lx, pos, tend)))
            return st;

        if (kind == '#') {
            size_t e = body;
            while (e + 1 < n && !(norm[e] == '#' && norm[e + 1] == '}'))
                e++;
            if (e + 1 >= n)
                return lex_error(&lx, tag, "unterminated comment (missing '#}')");
            char esign = (e > body && (norm[e - 1] == '-' || norm[e - 1] == '+')) ? norm[e - 1] : 0;
            size_t q = after_end(&lx, e + 2, esign, true);
            line_starting = q > e + 2 ? norm[q - 1] == '\n' : false;
            pos = q;
            continue;
        }
        if (raw_end) {
            size_t q = rs == '-' ? skip_space(&lx, raw_end) : raw_end;
            size_t e = q, close = 0;
            char els = 0, ers = 0;
            for (; e + 1 < n; e++)
                if (norm[e] == '{' && norm[e + 1] == '%' &&
                    (close = match_word_tag(&lx, e, "endraw", &els, &ers)) != 0)
                    break;
            if (!close)
                return lex_error(&lx, tag, "missing {% endraw %} for this {% raw %}");
            bool ls_start = q > raw_end ? norm[q - 1] == '\n' : false;
            if ((st = emit_text(&lx, q, text_end(&lx, q, e, els, true, ls_start))))
                return st;
            size_t after = after_end(&lx, close, ers, true);
            line_starting = after > close ? norm[after - 1] == '\n' : false;
            pos = after;
            continue;
        }
        if ((st = push(&lx, tag, (jtok){.kind = kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN})))
            return st;
        if ((st = lex_tag(&lx, body, kind == '%', &pos, &line_starting)))
            return st;
    }
    return push(&lx, n, (jtok){.kind = JT_EOF});
}
