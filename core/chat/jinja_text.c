/* UTF-8 helpers for the template interpreter. Python strings index by code
 * point, so lengths, slices and case changes must too; strings that are pure
 * ASCII (the common case) take the byte fast path. */
#include "jinja.h"

size_t ju_decode(const char *s, size_t len, int32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    if (len == 0) {
        *cp = 0;
        return 0;
    }
    unsigned c = u[0];
    size_t need;
    int32_t v;
    if (c < 0x80) {
        *cp = (int32_t)c;
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
        v = (int32_t)(c & 0x1F);
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        v = (int32_t)(c & 0x0F);
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        v = (int32_t)(c & 0x07);
    } else {
        *cp = (int32_t)c;
        return 1;
    }
    if (len < need) {
        *cp = (int32_t)c;
        return 1;
    }
    for (size_t i = 1; i < need; i++) {
        if ((u[i] & 0xC0) != 0x80) {
            *cp = (int32_t)c;
            return 1;
        }
        v = (v << 6) | (int32_t)(u[i] & 0x3F);
    }
    /* Overlong forms, surrogates and values past U+10FFFF are not code points. */
    if ((need == 3 && v < 0x800) || (need == 4 && (v < 0x10000 || v > 0x10FFFF)) ||
        (v >= 0xD800 && v <= 0xDFFF)) {
        *cp = (int32_t)c;
        return 1;
    }
    *cp = v;
    return need;
}

size_t ju_encode(int32_t cp, char out[4])
{
    unsigned u = (unsigned)cp;
    if (u < 0x80) {
        out[0] = (char)u;
        return 1;
    }
    if (u < 0x800) {
        out[0] = (char)(0xC0 | (u >> 6));
        out[1] = (char)(0x80 | (u & 0x3F));
        return 2;
    }
    if (u < 0x10000) {
        out[0] = (char)(0xE0 | (u >> 12));
        out[1] = (char)(0x80 | ((u >> 6) & 0x3F));
        out[2] = (char)(0x80 | (u & 0x3F));
        return 3;
    }
    if (u > 0x10FFFF)
        u = 0xFFFD;
    out[0] = (char)(0xF0 | (u >> 18));
    out[1] = (char)(0x80 | ((u >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((u >> 6) & 0x3F));
    out[3] = (char)(0x80 | (u & 0x3F));
    return 4;
}

/* Python's str.isspace(), which str.strip() and str.split() use. */
bool ju_isspace(int32_t cp)
{
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F))
        return true;
    if (cp < 0x85)
        return false;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

size_t ju_count(const jstr *s)
{
    if (s->ascii)
        return s->len;
    size_t n = 0;
    for (size_t i = 0; i < s->len;) {
        int32_t cp;
        i += ju_decode(s->data + i, s->len - i, &cp);
        n++;
    }
    return n;
}

size_t ju_offset(const jstr *s, size_t idx)
{
    if (s->ascii)
        return idx < s->len ? idx : s->len;
    size_t i = 0;
    for (size_t k = 0; k < idx && i < s->len; k++) {
        int32_t cp;
        i += ju_decode(s->data + i, s->len - i, &cp);
    }
    return i;
}
