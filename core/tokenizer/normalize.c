/* Normalizers: Unicode normalization forms (utf8proc), lowercase, prepend,
 * replace, strip and BERT's, applied in order to each text segment between added
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

/* The code point at in[*i] into *cp, its length into *l: 1. An invalid
 * byte is copied to out as it is and stepped over: 0; -1 when out cannot
 * grow. */
static int take_cp(const char *in, size_t len, size_t *i, uint32_t *cp, size_t *l, tok_buf *out)
{
    *l = tok_utf8_decode((const uint8_t *)in + *i, len - *i, cp);
    if (*l)
        return 1;
    if (!tok_buf_append(out, in + *i, 1))
        return -1;
    (*i)++;
    return 0;
}

static tw_status lowercase(const char *in, size_t len, tok_buf *out, tw_err *err)
{
    size_t i = 0;
    while (i < len) {
        uint32_t cp;
        size_t l;
        const int got = take_cp(in, len, &i, &cp, &l, out);
        if (got < 0)
            return oom(err);
        if (got == 0)
            continue;
        char u[4];
        size_t n;
        /* Rust's char::to_lowercase, which tokenizers uses, applies the one
         * unconditional many-char lowercase mapping of SpecialCasing.txt;
         * utf8proc's simple mapping would give a bare "i". */
        if (cp == 0x130) {
            if (!tok_buf_append(out, "i\xcc\x87", 3))
                return oom(err);
            i += l;
            continue;
        }
        n = tok_utf8_encode((uint32_t)utf8proc_tolower((utf8proc_int32_t)cp), u);
        if (!tok_buf_append(out, u, n))
            return oom(err);
        i += l;
    }
    return TW_OK;
}

/* ---- BertNormalizer ------------------------------------------------------- */

/* General category C* (tokenizers' is_other): control, format, surrogate,
 * private use and unassigned. */
static bool is_other(uint32_t cp)
{
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
        return true;
    default:
        return false;
    }
}

/* The ideograph blocks BERT surrounds with spaces. The fifth range starts at
 * U+2B920 rather than the block's U+2B820 because tokenizers 0.23 has it so,
 * and matching the ids it gives is the point. */
static bool is_cjk(uint32_t cp)
{
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* clean_text and handle_chinese_chars, in one pass. */
static tw_status bert_clean(const tok_norm *n, const char *in, size_t len, tok_buf *out,
                            tw_err *err)
{
    size_t i = 0;
    while (i < len) {
        uint32_t cp;
        size_t l;
        const int got = take_cp(in, len, &i, &cp, &l, out);
        if (got < 0)
            return oom(err);
        if (got == 0)
            continue;
        bool ok = true;
        if (n->clean &&
            (cp == 0 || cp == 0xFFFD || (is_other(cp) && cp != '\t' && cp != '\n' && cp != '\r'))) {
            /* removed outright, as tokenizers does */
        } else if (n->clean && tok_is_space(cp)) {
            ok = tok_buf_append(out, " ", 1);
        } else if (n->cjk && is_cjk(cp)) {
            ok = tok_buf_append(out, " ", 1) && tok_buf_append(out, in + i, l) &&
                 tok_buf_append(out, " ", 1);
        } else {
            ok = tok_buf_append(out, in + i, l);
        }
        if (!ok)
            return oom(err);
        i += l;
    }
    return TW_OK;
}

/* NFD, then every nonspacing mark (Mn) dropped. */
static tw_status strip_accents(const char *in, size_t len, tok_buf *out, tw_err *err)
{
    static const tok_norm nfd = {.kind = NORM_NFD};
    size_t start = out->len;
    tw_status st = unicode_form(&nfd, in, len, out, err);
    if (st != TW_OK)
        return st;
    size_t r = start, w = start;
    while (r < out->len) {
        uint32_t cp;
        size_t l = tok_utf8_decode((const uint8_t *)out->p + r, out->len - r, &cp);
        if (l == 0)
            l = 1;
        else if (utf8proc_category((utf8proc_int32_t)cp) == UTF8PROC_CATEGORY_MN) {
            r += l;
            continue;
        }
        memmove(out->p + w, out->p + r, l);
        w += l;
        r += l;
    }
    out->len = w;
    return TW_OK;
}

/* tokenizers' order: clean, chinese chars, accents, lowercase. */
static tw_status bert(const tok_norm *n, const char *in, size_t len, tok_buf *out, tw_err *err)
{
    tok_buf t1 = {0}, t2 = {0};
    const char *cur = in;
    size_t cur_len = len;
    tw_status st = TW_OK;
    int pass = 0;
    for (int k = 0; k < 3 && st == TW_OK; k++) {
        bool on = k == 0 ? n->clean || n->cjk : k == 1 ? n->accents : n->lower;
        if (!on)
            continue;
        tok_buf *dst = pass++ % 2 ? &t2 : &t1;
        dst->len = 0;
        if (k == 0)
            st = bert_clean(n, cur, cur_len, dst, err);
        else if (k == 1)
            st = strip_accents(cur, cur_len, dst, err);
        else
            st = lowercase(cur, cur_len, dst, err);
        cur = dst->p;
        cur_len = dst->len;
    }
    if (st == TW_OK && cur_len > 0 && !tok_buf_append(out, cur, cur_len))
        st = oom(err);
    tok_buf_free(&t1);
    tok_buf_free(&t2);
    return st;
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
        case NORM_BERT:
            st = bert(n, cur, cur_len, dst, err);
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
