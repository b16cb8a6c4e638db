/* Stop rules and the hold-back matcher for stop strings (see tw/stop.h). */
#include "tw/stop.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

struct tw_stop {
    uint32_t min_tokens;
    bool ignore_eos;
    uint32_t *stop_ids;
    size_t n_stop_ids;
    uint32_t *eos_ids;
    size_t n_eos;
    char **strings;
    size_t *lens;
    size_t n_strings;
    size_t max_len;

    /* Text not yet emitted sits at buf[held_off .. held_off + held_len);
     * buf[0 .. held_off) is what the last call emitted. */
    char *buf;
    size_t cap;
    size_t held_off, held_len;
    const char *matched;
};

const char *tw_finish_reason_name(tw_finish_reason r)
{
    switch (r) {
    case TW_FINISH_NONE: return "none";
    case TW_FINISH_STOP: return "stop";
    case TW_FINISH_STOP_STRING: return "stop_string";
    case TW_FINISH_LENGTH: return "length";
    case TW_FINISH_TOOL_CALLS: return "tool_calls";
    case TW_FINISH_CANCELLED: return "cancelled";
    case TW_FINISH_DEADLINE: return "deadline";
    case TW_FINISH_CONTEXT_LENGTH: return "context_length";
    case TW_FINISH_ERROR: return "error";
    }
    return "?";
}

void tw_stop_params_init(tw_stop_params *p)
{
    memset(p, 0, sizeof *p);
}

static bool valid_utf8(const char *s, size_t len)
{
    const utf8proc_uint8_t *u = (const utf8proc_uint8_t *)s;
    size_t i = 0;
    while (i < len) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t n = utf8proc_iterate(u + i, (utf8proc_ssize_t)(len - i), &cp);
        if (n <= 0 || cp < 0)
            return false;
        i += (size_t)n;
    }
    return true;
}

tw_status tw_stop_params_validate(const tw_stop_params *p, uint32_t vocab_size, tw_err *err)
{
    if (!p)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "stop rules missing");
    if (p->n_stop_token_ids > TW_STOP_MAX_TOKEN_IDS)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%zu stop token ids (at most %d)",
                         p->n_stop_token_ids, TW_STOP_MAX_TOKEN_IDS);
    if (p->n_stop_token_ids && !p->stop_token_ids)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "stop token id count without ids");
    for (size_t i = 0; i < p->n_stop_token_ids; i++)
        if (vocab_size && p->stop_token_ids[i] >= vocab_size)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "stop_token_ids[%zu]: %u outside the vocabulary (%u)", i,
                             p->stop_token_ids[i], vocab_size);
    if (p->n_stop_strings > TW_STOP_MAX_STRINGS)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%zu stop strings (at most %d)",
                         p->n_stop_strings, TW_STOP_MAX_STRINGS);
    if (p->n_stop_strings && !p->stop_strings)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "stop string count without strings");
    for (size_t i = 0; i < p->n_stop_strings; i++) {
        const char *s = p->stop_strings[i];
        if (!s)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "stop_strings[%zu] is NULL", i);
        size_t len = strnlen(s, TW_STOP_MAX_STRING_BYTES + 1);
        if (len == 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "stop_strings[%zu] is empty", i);
        if (len > TW_STOP_MAX_STRING_BYTES)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "stop_strings[%zu] longer than %d bytes",
                             i, TW_STOP_MAX_STRING_BYTES);
        if (!valid_utf8(s, len))
            return tw_errorf(err, TW_INVALID_ARGUMENT, "stop_strings[%zu] is not valid UTF-8", i);
    }
    return TW_OK;
}

static uint32_t *dup_ids(const uint32_t *ids, size_t n)
{
    if (n == 0)
        return NULL;
    uint32_t *c = malloc(n * sizeof *c);
    if (c)
        memcpy(c, ids, n * sizeof *c);
    return c;
}

tw_status tw_stop_create(const tw_stop_params *p, const uint32_t *eos_ids, size_t n_eos,
                         tw_stop **out, tw_err *err)
{
    if (!out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "stop: out is NULL");
    *out = NULL;
    tw_status st = tw_stop_params_validate(p, 0, err);
    if (st != TW_OK)
        return st;
    if (n_eos > TW_STOP_MAX_TOKEN_IDS || (n_eos && !eos_ids))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "stop: bad end-of-sequence id list");
    tw_stop *s = calloc(1, sizeof *s);
    if (!s)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "stop: out of memory");
    s->min_tokens = p->min_tokens;
    s->ignore_eos = p->ignore_eos;
    s->n_stop_ids = p->n_stop_token_ids;
    s->stop_ids = dup_ids(p->stop_token_ids, p->n_stop_token_ids);
    s->n_eos = n_eos;
    s->eos_ids = dup_ids(eos_ids, n_eos);
    s->n_strings = p->n_stop_strings;
    if (s->n_strings) {
        s->strings = calloc(s->n_strings, sizeof *s->strings);
        s->lens = calloc(s->n_strings, sizeof *s->lens);
    }
    bool oom = (s->n_stop_ids && !s->stop_ids) || (n_eos && !s->eos_ids) ||
               (s->n_strings && (!s->strings || !s->lens));
    for (size_t i = 0; !oom && i < s->n_strings; i++) {
        s->lens[i] = strlen(p->stop_strings[i]);
        s->strings[i] = strdup(p->stop_strings[i]);
        oom = !s->strings[i];
        if (s->lens[i] > s->max_len)
            s->max_len = s->lens[i];
    }
    /* Room for the longest hold-back plus a generous delta; longer deltas
     * grow the buffer once. */
    s->cap = 2 * s->max_len + 1024;
    s->buf = oom ? NULL : malloc(s->cap);
    if (oom || !s->buf) {
        tw_stop_destroy(s);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "stop: out of memory");
    }
    *out = s;
    return TW_OK;
}

void tw_stop_destroy(tw_stop *s)
{
    if (!s)
        return;
    for (size_t i = 0; s->strings && i < s->n_strings; i++)
        free(s->strings[i]);
    free(s->strings);
    free(s->lens);
    free(s->stop_ids);
    free(s->eos_ids);
    free(s->buf);
    free(s);
}

void tw_stop_reset(tw_stop *s)
{
    s->held_off = s->held_len = 0;
    s->matched = NULL;
}

static bool in_list(const uint32_t *ids, size_t n, uint32_t t)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == t)
            return true;
    return false;
}

bool tw_stop_token(const tw_stop *s, uint32_t token, uint32_t n_answer, bool *is_eos)
{
    if (is_eos)
        *is_eos = false;
    if (in_list(s->stop_ids, s->n_stop_ids, token))
        return true;
    if (!s->ignore_eos && in_list(s->eos_ids, s->n_eos, token) && n_answer >= s->min_tokens) {
        if (is_eos)
            *is_eos = true;
        return true;
    }
    return false;
}

bool tw_stop_suppress_eos(const tw_stop *s, uint32_t n_answer)
{
    return !s->ignore_eos && n_answer < s->min_tokens;
}

const uint32_t *tw_stop_eos_ids(const tw_stop *s, size_t *n)
{
    *n = s->n_eos;
    return s->eos_ids;
}

/* Earliest start of any stop string in text; ties go to the listed first. */
static bool find_match(const tw_stop *s, const char *text, size_t len, size_t *at, size_t *which)
{
    bool found = false;
    for (size_t i = 0; i < s->n_strings; i++) {
        const char *m = memmem(text, len, s->strings[i], s->lens[i]);
        if (m && (!found || (size_t)(m - text) < *at)) {
            found = true;
            *at = (size_t)(m - text);
            *which = i;
        }
    }
    return found;
}

/* Length of the longest tail of text that some stop string starts with
 * (shorter than that stop string, since a whole one would have matched). */
static size_t hold_len(const tw_stop *s, const char *text, size_t len)
{
    size_t most = s->max_len ? s->max_len - 1 : 0;
    if (most > len)
        most = len;
    for (size_t l = most; l > 0; l--)
        for (size_t i = 0; i < s->n_strings; i++)
            if (s->lens[i] > l && memcmp(text + len - l, s->strings[i], l) == 0)
                return l;
    return 0;
}

tw_stop_result tw_stop_feed(tw_stop *s, const char *text, size_t len, const char **emit,
                            size_t *emit_len, const char **matched)
{
    *emit = s->buf;
    *emit_len = 0;
    if (matched)
        *matched = s->matched;
    if (s->matched)
        return TW_STOP_MATCHED;
    if (s->n_strings == 0) {
        /* Nothing to hold back: pass the delta through untouched. */
        *emit = len ? text : s->buf;
        *emit_len = len;
        return TW_STOP_CONTINUE;
    }
    memmove(s->buf, s->buf + s->held_off, s->held_len);
    s->held_off = 0;
    size_t total = s->held_len + len;
    if (total > s->cap) {
        size_t cap = total + s->max_len + 1024;
        char *nb = realloc(s->buf, cap);
        if (!nb)
            return TW_STOP_NOMEM; /* the held text stays held */
        s->buf = nb;
        s->cap = cap;
    }
    if (len)
        memcpy(s->buf + s->held_len, text, len);
    *emit = s->buf;
    size_t at = 0, which = 0;
    if (find_match(s, s->buf, total, &at, &which)) {
        s->matched = s->strings[which];
        if (matched)
            *matched = s->matched;
        *emit_len = at;
        s->held_off = 0;
        s->held_len = 0;
        return TW_STOP_MATCHED;
    }
    size_t keep = hold_len(s, s->buf, total);
    *emit_len = total - keep;
    s->held_off = total - keep;
    s->held_len = keep;
    return TW_STOP_CONTINUE;
}

void tw_stop_flush(tw_stop *s, const char **emit, size_t *emit_len)
{
    *emit = s->buf + s->held_off;
    *emit_len = s->matched ? 0 : s->held_len;
    s->held_off += s->held_len;
    s->held_len = 0;
}

size_t tw_stop_held(const tw_stop *s)
{
    return s->held_len;
}
