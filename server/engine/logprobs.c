#include "logprobs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A record's text and its alternatives' as runs of the store's text. */
typedef struct kept_run {
    size_t off, len;
    bool has;
} kept_run;

struct twd_kept_text {
    kept_run text;
    kept_run top[TW_MAX_TOP_LOGPROBS];
};

static void fill(const tw_token_logprob *src, size_t n, twd_wire_logprobs *w)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const tw_token_logprob *t = &src[i];
        Tokenwire__V1__TokenLogprob *lp = &w->lp[i];
        tokenwire__v1__token_logprob__init(lp);
        lp->has_token_id = 1;
        lp->token_id = t->token_id;
        lp->has_reasoning = t->reasoning;
        lp->reasoning = t->reasoning;
        lp->has_logprob = !isnan(t->logprob);
        lp->logprob = lp->has_logprob ? t->logprob : 0.0f;
        if (t->text) {
            lp->has_token_text = 1;
            lp->token_text.data = (uint8_t *)t->text;
            lp->token_text.len = t->text_len;
        }
        uint32_t nt = t->n_top < TW_MAX_TOP_LOGPROBS ? t->n_top : TW_MAX_TOP_LOGPROBS;
        lp->top = &w->topp[k];
        lp->n_top = nt;
        for (uint32_t j = 0; j < nt; j++, k++) {
            Tokenwire__V1__TopLogprob *top = &w->top[k];
            tokenwire__v1__top_logprob__init(top);
            top->has_token_id = 1;
            top->token_id = t->top[j].token_id;
            top->has_logprob = 1;
            top->logprob = t->top[j].logprob;
            if (t->top[j].text) {
                top->has_token_text = 1;
                top->token_text.data = (uint8_t *)t->top[j].text;
                top->token_text.len = t->top[j].text_len;
            }
            w->topp[k] = top;
        }
        w->lpp[i] = lp;
    }
}

bool twd_wire_logprobs_make(const tw_token_logprob *src, size_t n, twd_wire_logprobs *w)
{
    memset(w, 0, sizeof *w);
    if (n == 0)
        return true;
    const size_t nt = n * TW_MAX_TOP_LOGPROBS;
    w->lp = calloc(n, sizeof *w->lp);
    w->lpp = calloc(n, sizeof *w->lpp);
    w->top = calloc(nt, sizeof *w->top);
    w->topp = calloc(nt, sizeof *w->topp);
    if (!w->lp || !w->lpp || !w->top || !w->topp)
        return false;
    fill(src, n, w);
    return true;
}

void twd_wire_logprobs_free(twd_wire_logprobs *w)
{
    free(w->lp);
    free(w->lpp);
    free(w->top);
    free(w->topp);
    memset(w, 0, sizeof *w);
}

/* A text borrowed for the callback's length, appended to the store's. */
static bool keep_run(twd_kept_logprobs *k, const char *text, size_t len, kept_run *out)
{
    out->has = text != NULL;
    out->off = k->text_len;
    out->len = text ? len : 0;
    if (!text || len == 0)
        return true;
    if (k->text_len + len > k->text_cap) {
        size_t cap = k->text_cap ? k->text_cap : 256;
        while (cap < k->text_len + len)
            cap *= 2;
        char *p = realloc(k->text, cap);
        if (!p)
            return false;
        k->text = p;
        k->text_cap = cap;
    }
    memcpy(k->text + k->text_len, text, len);
    k->text_len += len;
    return true;
}

bool twd_kept_logprobs_add(twd_kept_logprobs *k, const tw_token_logprob *src, size_t n)
{
    if (k->n + n > k->cap) {
        size_t cap = k->cap ? k->cap : 64;
        while (cap < k->n + n)
            cap *= 2;
        tw_token_logprob *p = realloc(k->lps, cap * sizeof *p);
        if (p)
            k->lps = p;
        twd_kept_text *t = p ? realloc(k->texts, cap * sizeof *t) : NULL;
        if (!t)
            return false;
        k->texts = t;
        k->cap = cap;
    }
    for (size_t i = 0; i < n; i++) {
        tw_token_logprob *lp = &k->lps[k->n];
        twd_kept_text *kt = &k->texts[k->n];
        *lp = src[i];
        if (lp->n_top > TW_MAX_TOP_LOGPROBS)
            lp->n_top = TW_MAX_TOP_LOGPROBS;
        bool ok = keep_run(k, src[i].text, src[i].text_len, &kt->text);
        for (uint32_t j = 0; j < lp->n_top; j++)
            ok = ok && keep_run(k, src[i].top[j].text, src[i].top[j].text_len, &kt->top[j]);
        if (!ok)
            return false;
        k->n++;
    }
    return true;
}

bool twd_kept_logprobs_to_wire(twd_kept_logprobs *k, twd_wire_logprobs *w)
{
    /* the text no longer grows: point the records into it */
    const char *base = k->text ? k->text : "";
    for (size_t i = 0; i < k->n; i++) {
        tw_token_logprob *lp = &k->lps[i];
        const twd_kept_text *kt = &k->texts[i];
        lp->text = kt->text.has ? base + kt->text.off : NULL;
        lp->text_len = kt->text.len;
        for (uint32_t j = 0; j < lp->n_top; j++) {
            lp->top[j].text = kt->top[j].has ? base + kt->top[j].off : NULL;
            lp->top[j].text_len = kt->top[j].len;
        }
    }
    return twd_wire_logprobs_make(k->lps, k->n, w);
}

void twd_kept_logprobs_free(twd_kept_logprobs *k)
{
    free(k->lps);
    free(k->texts);
    free(k->text);
    memset(k, 0, sizeof *k);
}
