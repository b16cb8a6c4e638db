/* Normalizers: Unicode normalization forms (utf8proc), lowercase, prepend,
 * replace and strip, applied in order to each text segment between added
 * tokens. Invalid UTF-8 passes through untouched: only the valid runs are
 * normalized. */
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "tok_internal.h"

static tw_status oom(tw_err *err)
{
    return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory while normalizing");
}

static tw_status unicode_form(const tok_norm *n, const char *in, size_t len, tok_buf *out,
                              tw_err *err)
{
    int opts = UTF8PROC_STABLE;
    switch (n->kind) {
    case NORM_NFC: opts |= UTF8PROC_COMPOSE; break;
    case NORM_NFD: opts |= UTF8PROC_DECOMPOSE; break;
    case NORM_NFKC: opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    default: opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    size_t i = 0;
    while (i < len) {
        /* The longest valid run starting at i. */
        size_t j = i;
        while (j < len) {
            size_t l = tok_utf8_valid_len((const uint8_t *)in + j, len - j);
            if (l == 0)
                break;
            j += l;
        }
        if (j > i) {
            /* ASCII is its own normal form in all four; skip utf8proc. */
            bool ascii = true;
            for (size_t k = i; k < j && ascii; k++)
                ascii = (unsigned char)in[k] < 0x80;
            if (ascii) {
                if (!tok_buf_append(out, in + i, j - i))
                    return oom(err);
            } else {
                utf8proc_uint8_t *res = NULL;
                utf8proc_ssize_t rl = utf8proc_map((const utf8proc_uint8_t *)in + i,
                                                   (utf8proc_ssize_t)(j - i), &res,
                                                   (utf8proc_option_t)opts);
                if (rl < 0) {
                    free(res);
                    return tw_errorf(err, TW_INTERNAL, "unicode normalization failed: %s",
                                     utf8proc_errmsg(rl));
                }
                bool ok = tok_buf_append(out, res, (size_t)rl);
                free(res);
                if (!ok)
                    return oom(err);
            }
            i = j;
        } else {
            if (!tok_buf_append(out, in + i, 1))
                return oom(err);
            i++;
        }
    }
    return TW_OK;
}

static tw_status lowercase(const char *in, size_t len, tok_buf *out, tw_err *err)
{
    size_t i = 0;
    while (i < len) {
        uint32_t cp;
        size_t l = tok_utf8_decode((const uint8_t *)in + i, len - i, &cp);
        if (l == 0) {
            if (!tok_buf_append(out, in + i, 1))
                return oom(err);
            i++;
            continue;
        }
        char u[4];
        size_t n = tok_utf8_encode((uint32_t)utf8proc_tolower((utf8proc_int32_t)cp), u);
        if (!tok_buf_append(out, u, n))
            return oom(err);
        i += l;
    }
    return TW_OK;
}

static tw_status replace(const tok_norm *n, tok_scratch *sc, const char *in, size_t len,
                         tok_buf *out, tw_err *err)
{
    size_t i = 0;
    if (n->re) {
        while (i <= len) {
            int rc = pcre2_match(n->re, (PCRE2_SPTR)in, len, i, 0, sc->md, NULL);
            if (rc == PCRE2_ERROR_NOMATCH)
                break;
            if (rc < 0)
                return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "normalizer regex failed (%d)", rc);
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(sc->md);
            if (!tok_buf_append(out, in + i, ov[0] - i) || !tok_buf_append(out, n->str2, n->len2))
                return oom(err);
            if (ov[1] == ov[0]) {
                if (ov[0] < len && !tok_buf_append(out, in + ov[0], 1))
                    return oom(err);
                i = ov[0] + 1;
            } else {
                i = ov[1];
            }
        }
        if (i < len && !tok_buf_append(out, in + i, len - i))
            return oom(err);
        return TW_OK;
    }
    while (i < len) {
        if (n->len > 0 && len - i >= n->len && memcmp(in + i, n->str, n->len) == 0) {
            if (!tok_buf_append(out, n->str2, n->len2))
                return oom(err);
            i += n->len;
        } else {
            if (!tok_buf_append(out, in + i, 1))
                return oom(err);
            i++;
        }
    }
    return TW_OK;
}

static tw_status strip(const tok_norm *n, const char *in, size_t len, tok_buf *out, tw_err *err)
{
    size_t s = 0, e = len;
    if (n->left) {
        uint32_t cp;
        size_t l;
        while (s < e && (l = tok_utf8_decode((const uint8_t *)in + s, e - s, &cp)) &&
               tok_is_space(cp))
            s += l;
    }
    if (n->right) {
        while (e > s) {
            size_t b = e - 1;
            while (b > s && ((unsigned char)in[b] & 0xc0) == 0x80)
                b--;
            uint32_t cp;
            size_t l = tok_utf8_decode((const uint8_t *)in + b, e - b, &cp);
            if (l != e - b || !tok_is_space(cp))
                break;
            e = b;
        }
    }
    if (!tok_buf_append(out, in + s, e - s))
        return oom(err);
    return TW_OK;
}

tw_status tok_normalize(const tw_tokenizer *tok, tok_scratch *sc, const char *in, size_t len,
                        size_t *off, size_t *out_len, tw_err *err)
{
    tok_buf a = {0}, b = {0};
    const char *cur = in;
    size_t cur_len = len;
    tw_status st = TW_OK;
    for (size_t k = 0; k < tok->n_norm && st == TW_OK; k++) {
        const tok_norm *n = &tok->norm[k];
        tok_buf *dst = (cur == a.p && a.p) ? &b : &a;
        dst->len = 0;
        switch (n->kind) {
        case NORM_NFC:
        case NORM_NFD:
        case NORM_NFKC:
        case NORM_NFKD:
            st = unicode_form(n, cur, cur_len, dst, err);
            break;
        case NORM_LOWERCASE:
            st = lowercase(cur, cur_len, dst, err);
            break;
        case NORM_PREPEND:
            if (cur_len > 0 && !tok_buf_append(dst, n->str, n->len))
                st = oom(err);
            if (st == TW_OK && !tok_buf_append(dst, cur, cur_len))
                st = oom(err);
            break;
        case NORM_REPLACE:
            st = replace(n, sc, cur, cur_len, dst, err);
            break;
        case NORM_STRIP:
            st = strip(n, cur, cur_len, dst, err);
            break;
        }
        /* An empty result still needs a non-NULL pointer to read from. */
        if (st == TW_OK && !tok_buf_reserve(dst, 1))
            st = oom(err);
        cur = dst->p;
        cur_len = dst->len;
    }
    if (st == TW_OK) {
        *off = sc->text.len;
        *out_len = cur_len;
        if (!tok_buf_append(&sc->text, cur, cur_len))
            st = oom(err);
    }
    tok_buf_free(&a);
    tok_buf_free(&b);
    return st;
}
