/* Jinja2's builtin filters over strings and numbers (string, trim,
 * replace, indent, escape, truncate, title, int, float, round, abs...),
 * plus Hugging Face's tojson, which unlike Jinja2's neither sorts keys nor
 * escapes HTML and writes non-ASCII text as is. */
#include "jinja_filter.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool jf_tojson(const fctx *c, jv *out)
{
    BIND("ensure_ascii", "indent", "separators", "sort_keys");
    jjson_opts o = {.ensure_ascii = jv_truthy(a[0]), .sort_keys = jv_truthy(a[3])};
    char spaces[64];
    if (a[1].kind == JV_INT) {
        int64_t w = a[1].u.i < 0 ? 0 : a[1].u.i;
        if (w > (int64_t)sizeof spaces)
            return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "tojson indent too large");
        memset(spaces, ' ', (size_t)w);
        o.have_indent = true;
        o.indent = spaces;
        o.indent_len = (size_t)w;
    } else if (a[1].kind == JV_STR) {
        o.have_indent = true;
        o.indent = jv_str_of(a[1])->data;
        o.indent_len = jv_str_of(a[1])->len;
    } else if (a[1].kind != JV_UNDEF && a[1].kind != JV_NONE) {
        return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "tojson indent must be int or str");
    }
    /* Python's defaults: ", " without indent, "," with it (lines end there). */
    o.item_sep = o.have_indent ? "," : ", ";
    o.item_sep_len = o.have_indent ? 1 : 2;
    o.key_sep = ": ";
    o.key_sep_len = 2;
    if (a[2].kind == JV_LIST && jv_list_of(a[2])->n == 2 &&
        jv_list_of(a[2])->items[0].kind == JV_STR && jv_list_of(a[2])->items[1].kind == JV_STR) {
        const jlist *s = jv_list_of(a[2]);
        o.item_sep = jv_str_of(s->items[0])->data;
        o.item_sep_len = jv_str_of(s->items[0])->len;
        o.key_sep = jv_str_of(s->items[1])->data;
        o.key_sep_len = jv_str_of(s->items[1])->len;
    } else if (a[2].kind != JV_UNDEF && a[2].kind != JV_NONE) {
        return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT,
                       "tojson separators must be a pair of strings");
    }
    jbuf b = {0};
    if (!jv_tojson(c->r, c->at, &b, c->in, &o)) {
        jbuf_release(c->r, &b);
        return false;
    }
    return jbuf_to_str(c->r, c->at, &b, out);
}

bool jf_int(const fctx *c, jv *out)
{
    BIND("default", "base");
    int64_t dflt = 0, base = 0;
    if (!jf_arg_int(c, a[0], 0, &dflt) || !jf_arg_int(c, a[1], 10, &base))
        return false;
    jv v = c->in;
    *out = jv_int(dflt);
    if (v.kind == JV_INT || v.kind == JV_BOOL) {
        *out = jv_int(v.kind == JV_INT ? v.u.i : v.u.b);
    } else if (v.kind == JV_FLOAT) {
        if (v.u.f == v.u.f && fabs(v.u.f) < 9.2e18)
            *out = jv_int((int64_t)v.u.f);
    } else if (v.kind == JV_STR) {
        const jstr *s = jv_str_of(v);
        char buf[64];
        size_t n = 0;
        for (size_t i = 0; i < s->len && n + 1 < sizeof buf; i++)
            if (s->data[i] != '_')
                buf[n++] = s->data[i];
        buf[n] = '\0';
        char *end;
        long long x = strtoll(buf, &end, (int)(base >= 2 && base <= 36 ? base : 10));
        while (*end == ' ' || *end == '\t' || *end == '\n')
            end++;
        if (end != buf && *end == '\0' && s->len < sizeof buf) {
            *out = jv_int(x);
        } else {
            double f = strtod(buf, &end);
            while (*end == ' ' || *end == '\t' || *end == '\n')
                end++;
            if (end != buf && *end == '\0' && f == f && fabs(f) < 9.2e18)
                *out = jv_int((int64_t)f);
        }
    }
    return true;
}

bool jf_float(const fctx *c, jv *out)
{
    BIND("default");
    jv v = c->in;
    *out = a[0].kind == JV_UNDEF ? jv_float(0.0) : jv_ref(a[0]);
    if (v.kind == JV_INT || v.kind == JV_BOOL) {
        *out = jv_float(v.kind == JV_INT ? (double)v.u.i : v.u.b);
    } else if (v.kind == JV_FLOAT) {
        *out = v;
    } else if (v.kind == JV_STR) {
        const jstr *s = jv_str_of(v);
        char *end;
        double f = strtod(s->data, &end);
        while (*end == ' ' || *end == '\t' || *end == '\n')
            end++;
        if (end != s->data && (size_t)(end - s->data) == s->len) {
            jv_decref(c->r, *out);
            *out = jv_float(f);
        }
    }
    return true;
}

bool jf_indent(const fctx *c, jv *out)
{
    BIND("width", "first", "blank");
    jv ind = jv_undef(), s = jv_undef(), lines = jv_undef();
    bool ok = true;
    if (a[0].kind == JV_STR) {
        ind = jv_ref(a[0]);
    } else {
        int64_t w = 0;
        ok = jf_arg_int(c, a[0], 4, &w);
        if (ok && (w < 0 || w > 4096))
            w = w < 0 ? 0 : 4096;
        char spaces[4096];
        if (ok) {
            memset(spaces, ' ', (size_t)w);
            ok = jv_new_str(c->r, c->at, spaces, (size_t)w, &ind);
        }
    }
    jbuf text = {0};
    ok = ok && jv_str_append(c->r, c->at, &text, c->in) && jbuf_put(c->r, c->at, &text, "\n", 1) &&
         jbuf_to_str(c->r, c->at, &text, &s) &&
         jstr_splitlines(c->r, c->at, jv_str_of(s), false, &lines);
    if (!ok) {
        jbuf_release(c->r, &text);
        jv_decref(c->r, ind);
        jv_decref(c->r, s);
        return false;
    }
    const jlist *l = jv_list_of(lines);
    const jstr *is = jv_str_of(ind);
    bool blank = jv_truthy(a[2]);
    jbuf b = {0};
    if (jv_truthy(a[1]))
        ok = jbuf_put(c->r, c->at, &b, is->data, is->len);
    for (size_t i = 0; ok && i < l->n; i++) {
        const jstr *line = jv_str_of(l->items[i]);
        if (i) {
            ok = jbuf_put(c->r, c->at, &b, "\n", 1);
            if (ok && (blank || line->len))
                ok = jbuf_put(c->r, c->at, &b, is->data, is->len);
        }
        ok = ok && jbuf_put(c->r, c->at, &b, line->data, line->len);
    }
    jv_decref(c->r, lines);
    jv_decref(c->r, ind);
    jv_decref(c->r, s);
    if (!ok) {
        jbuf_release(c->r, &b);
        return false;
    }
    return jbuf_to_str(c->r, c->at, &b, out);
}

bool jf_escape(const fctx *c, jv *out)
{
    BIND("");
    jv s;
    if (!jf_to_str(c, c->in, &s))
        return false;
    const jstr *x = jv_str_of(s);
    jbuf b = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < x->len; i++) {
        const char *rep = NULL;
        switch (x->data[i]) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&#34;"; break;
        case '\'': rep = "&#39;"; break;
        }
        ok = rep ? jbuf_put(c->r, c->at, &b, rep, strlen(rep))
                 : jbuf_put(c->r, c->at, &b, x->data + i, 1);
    }
    jv_decref(c->r, s);
    if (!ok) {
        jbuf_release(c->r, &b);
        return false;
    }
    return jbuf_to_str(c->r, c->at, &b, out);
}

bool jf_truncate(const fctx *c, jv *out)
{
    BIND("length", "killwords", "end", "leeway");
    int64_t length = 0, leeway = 0;
    if (!jf_arg_int(c, a[0], 255, &length) || !jf_arg_int(c, a[3], 5, &leeway))
        return false;
    jv s, end;
    if (!jf_to_str(c, c->in, &s))
        return false;
    if (a[2].kind == JV_STR)
        end = jv_ref(a[2]);
    else if (!jv_new_str(c->r, c->at, "...", 3, &end)) {
        jv_decref(c->r, s);
        return false;
    }
    const jstr *x = jv_str_of(s), *e = jv_str_of(end);
    int64_t n = (int64_t)ju_count(x), el = (int64_t)ju_count(e);
    bool ok = true;
    if (length < el) {
        ok = jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "expected length >= %lld, got %lld",
                     (long long)el, (long long)length);
    } else if (n <= length + leeway) {
        *out = jv_ref(s);
    } else {
        size_t cut = ju_offset(x, (size_t)(length - el));
        if (!jv_truthy(a[1])) {
            /* rsplit(" ", 1)[0]: drop the partial last word */
            for (size_t k = cut; k-- > 0;)
                if (x->data[k] == ' ') {
                    cut = k;
                    break;
                }
        }
        jbuf b = {0};
        ok = jbuf_put(c->r, c->at, &b, x->data, cut) &&
             jbuf_put(c->r, c->at, &b, e->data, e->len) && jbuf_to_str(c->r, c->at, &b, out);
        if (!ok)
            jbuf_release(c->r, &b);
    }
    jv_decref(c->r, s);
    jv_decref(c->r, end);
    return ok;
}

bool jf_round(const fctx *c, jv *out)
{
    BIND("precision", "method");
    int64_t prec = 0;
    if (!jf_arg_int(c, a[0], 0, &prec))
        return false;
    if (!jv_is_num(c->in))
        return jf_fail_type(c, c->in);
    double x = c->in.kind == JV_FLOAT ? c->in.u.f : c->in.kind == JV_INT ? (double)c->in.u.i : c->in.u.b;
    double m = pow(10.0, (double)(prec < -300 ? -300 : prec > 300 ? 300 : prec));
    const char *method = a[1].kind == JV_STR ? jv_str_of(a[1])->data : "common";
    if (c->in.kind != JV_FLOAT && prec >= 0 && !strcmp(method, "common")) {
        /* Python's round() of an int is that int */
        *out = jv_int(c->in.kind == JV_INT ? c->in.u.i : c->in.u.b);
        return true;
    }
    double v;
    if (!strcmp(method, "common"))
        v = nearbyint(x * m) / m;
    else if (!strcmp(method, "floor"))
        v = floor(x * m) / m;
    else if (!strcmp(method, "ceil"))
        v = ceil(x * m) / m;
    else
        return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT,
                       "method must be common, ceil or floor");
    *out = jv_float(v);
    return true;
}

bool jf_wordcount(const fctx *c, jv *out)
{
    BIND("");
    jv s;
    if (!jf_to_str(c, c->in, &s))
        return false;
    const jstr *x = jv_str_of(s);
    int64_t n = 0;
    bool in_word = false;
    for (size_t i = 0; i < x->len; i++) {
        unsigned char ch = (unsigned char)x->data[i];
        bool w = ch >= 0x80 || ch == '_' || (ch >= '0' && ch <= '9') ||
                 ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z');
        if (w && !in_word)
            n++;
        in_word = w;
    }
    jv_decref(c->r, s);
    *out = jv_int(n);
    return true;
}

/* Jinja2's title filter: a capital after spaces, dashes and brackets. */
bool jf_title(const fctx *c, jv *out)
{
    BIND("");
    jv s, low;
    if (!jf_to_str(c, c->in, &s))
        return false;
    bool ok = jstr_case(c->r, c->at, jv_str_of(s), JCASE_LOWER, &low);
    jv_decref(c->r, s);
    if (!ok)
        return false;
    const jstr *x = jv_str_of(low);
    jbuf b = {0};
    bool start = true;
    for (size_t i = 0; ok && i < x->len;) {
        int32_t cp;
        size_t n = ju_decode(x->data + i, x->len - i, &cp);
        bool sep = ju_isspace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
        if (start && !sep) {
            jv one, up = jv_undef();
            ok = jv_new_str(c->r, c->at, x->data + i, n, &one) &&
                 jstr_case(c->r, c->at, jv_str_of(one), JCASE_UPPER, &up);
            jv_decref(c->r, one);
            if (ok)
                ok = jbuf_put(c->r, c->at, &b, jv_str_of(up)->data, jv_str_of(up)->len);
            jv_decref(c->r, up);
        } else {
            ok = jbuf_put(c->r, c->at, &b, x->data + i, n);
        }
        start = sep;
        i += n;
    }
    jv_decref(c->r, low);
    if (!ok) {
        jbuf_release(c->r, &b);
        return false;
    }
    return jbuf_to_str(c->r, c->at, &b, out);
}

bool jf_string_op(const fctx *c, jv *out)
{
    const char *n = c->name;
    jv s;
    if (!strcmp(n, "string")) {
        BIND("");
        return jf_to_str(c, c->in, out);
    }
    if (!strcmp(n, "format")) {
        if (c->nkw)
            return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT,
                           "format filter takes positional arguments only");
        if (!jf_to_str(c, c->in, &s))
            return false;
        bool ok = jstr_percent(c->r, c->at, jv_str_of(s), c->args, c->nargs, out);
        jv_decref(c->r, s);
        return ok;
    }
    bool ok = true;
    if (!strcmp(n, "trim")) {
        BIND("chars");
        if (!jf_to_str(c, c->in, &s))
            return false;
        ok = jstr_strip(c->r, c->at, jv_str_of(s),
                        a[0].kind == JV_STR ? jv_str_of(a[0]) : NULL, true, true, out);
    } else if (!strcmp(n, "replace")) {
        BIND("old", "new", "count");
        int64_t count = 0;
        if (a[0].kind != JV_STR || a[1].kind != JV_STR)
            return jr_fail(c->r, c->at, TW_INVALID_ARGUMENT, "replace needs string arguments");
        if (!jf_arg_int(c, a[2], -1, &count) || !jf_to_str(c, c->in, &s))
            return false;
        ok = jstr_replace(c->r, c->at, jv_str_of(s), jv_str_of(a[0]), jv_str_of(a[1]), count,
                          out);
    } else if (!strcmp(n, "center")) {
        BIND("width");
        int64_t w = 0;
        if (!jf_arg_int(c, a[0], 80, &w) || !jf_to_str(c, c->in, &s))
            return false;
        jv fn;
        ok = jmethod_get(c->r, c->at, s, "center", &fn, &(bool){false}) &&
             jeval_call_value(c->r, c->at, fn, (jv[]){jv_int(w)}, 1, NULL, NULL, 0, out);
        jv_decref(c->r, fn);
    } else {
        BIND("");
        jcase k = !strcmp(n, "upper") ? JCASE_UPPER : !strcmp(n, "lower") ? JCASE_LOWER
                                                                          : JCASE_CAPITALIZE;
        if (!jf_to_str(c, c->in, &s))
            return false;
        if (k == JCASE_CAPITALIZE) {
            jv low;
            ok = jstr_case(c->r, c->at, jv_str_of(s), JCASE_LOWER, &low) &&
                 jstr_case(c->r, c->at, jv_str_of(low), JCASE_CAPITALIZE, out);
            if (ok)
                jv_decref(c->r, low);
        } else {
            ok = jstr_case(c->r, c->at, jv_str_of(s), k, out);
        }
    }
    jv_decref(c->r, s);
    return ok;
}

bool jf_abs(const fctx *c, jv *out)
{
    BIND("");
    if (c->in.kind == JV_INT) {
        if (c->in.u.i == INT64_MIN)
            return jr_fail(c->r, c->at, TW_OUT_OF_RANGE, "integer overflow");
        *out = jv_int(c->in.u.i < 0 ? -c->in.u.i : c->in.u.i);
    } else if (c->in.kind == JV_BOOL) {
        *out = jv_int(c->in.u.b);
    } else if (c->in.kind == JV_FLOAT) {
        *out = jv_float(fabs(c->in.u.f));
    } else {
        return jf_fail_type(c, c->in);
    }
    return true;
}

bool jf_safe(const fctx *c, jv *out)
{
    BIND("");
    *out = jv_ref(c->in);
    return true;
}
