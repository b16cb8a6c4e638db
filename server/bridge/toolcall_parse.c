#include "toolcall_parse.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char OPEN_TAG[] = "<tool_call>";
static const char CLOSE_TAG[] = "</tool_call>";
static const char PYTHON_TAG[] = "<|python_tag|>";
static const char MISTRAL_TAG[] = "[TOOL_CALLS]";
#define OPEN_LEN (sizeof OPEN_TAG - 1)
#define CLOSE_LEN (sizeof CLOSE_TAG - 1)
#define PYTHON_LEN (sizeof PYTHON_TAG - 1)
#define MISTRAL_LEN (sizeof MISTRAL_TAG - 1)

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static const char *find_bytes(const char *hay, size_t hay_len, const char *needle,
                              size_t needle_len)
{
    if (needle_len == 0 || hay_len < needle_len)
        return NULL;
    return memmem(hay, hay_len, needle, needle_len);
}

/* A growable byte buffer, always NUL-terminated. */
typedef struct textbuf {
    char *p;
    size_t len, cap;
} textbuf;

static bool textbuf_add(textbuf *b, const char *s, size_t n)
{
    if (n > (size_t)-1 / 2 - b->len)
        return false;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return false;
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return true;
}

void tw_bridge_tool_calls_free(tw_bridge_tool_calls *calls)
{
    for (size_t i = 0; i < calls->n; i++) {
        free(calls->items[i].id);
        free(calls->items[i].name);
        free(calls->items[i].arguments);
    }
    free(calls->items);
    free(calls->content);
    memset(calls, 0, sizeof *calls);
}

/* Takes a decoded call object: {"name": s, "arguments"|"parameters": object
 * or JSON string}. Returns 1 when it is a call (stored), 0 when not, -1 when
 * memory runs out. */
static int take_call(const json_t *obj, const char *id_seed, tw_bridge_tool_calls *out)
{
    if (!json_is_object(obj) || out->n >= TW_BRIDGE_TOOLCALL_MAX)
        return 0;
    const json_t *name = json_object_get(obj, "name");
    if (!json_is_string(name) || json_string_length(name) == 0)
        return 0;
    const json_t *args = json_object_get(obj, "arguments");
    if (!args)
        args = json_object_get(obj, "parameters");
    char *arg_text = NULL;
    if (!args || json_is_null(args)) {
        arg_text = strdup("{}");
    } else if (json_is_object(args)) {
        arg_text = json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER);
    } else if (json_is_string(args)) {
        /* Some templates put the arguments as a JSON string; keep it only
         * when it really is a JSON object. */
        json_t *inner = json_loads(json_string_value(args), 0, NULL);
        if (!json_is_object(inner)) {
            json_decref(inner);
            return 0;
        }
        arg_text = json_dumps(inner, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(inner);
    } else {
        return 0;
    }
    if (!arg_text)
        return -1;
    tw_bridge_tool_call *items = realloc(out->items, (out->n + 1) * sizeof *items);
    if (!items) {
        free(arg_text);
        return -1;
    }
    out->items = items;
    tw_bridge_tool_call *c = &items[out->n];
    char idbuf[96];
    snprintf(idbuf, sizeof idbuf, "call_%s%zu", id_seed ? id_seed : "", out->n);
    c->id = strdup(idbuf);
    c->name = strdup(json_string_value(name));
    c->arguments = arg_text;
    out->n++;
    if (!c->id || !c->name)
        return -1;
    return 1;
}

/* Hermes blocks. Text outside the blocks (and blocks that do not parse) goes
 * to `rest`. Returns false when memory runs out. */
static bool parse_hermes(const char *text, size_t len, const char *id_seed,
                         tw_bridge_tool_calls *out, textbuf *rest)
{
    size_t pos = 0;
    while (pos < len) {
        const char *open = find_bytes(text + pos, len - pos, OPEN_TAG, OPEN_LEN);
        if (!open)
            break;
        size_t start = (size_t)(open - text);
        size_t body = start + OPEN_LEN;
        const char *close = find_bytes(text + body, len - body, CLOSE_TAG, CLOSE_LEN);
        /* A model stopped by EOS may leave the last block unclosed. */
        size_t body_end = close ? (size_t)(close - text) : len;
        size_t next = close ? body_end + CLOSE_LEN : len;
        json_error_t jerr;
        json_t *obj = json_loadb(text + body, body_end - body, 0, &jerr);
        int r = take_call(obj, id_seed, out);
        json_decref(obj);
        if (r < 0)
            return false;
        if (!textbuf_add(rest, text + pos, start - pos))
            return false;
        if (r == 0 && !textbuf_add(rest, text + start, next - start))
            return false;
        pos = next;
    }
    return textbuf_add(rest, text + pos, len - pos);
}

/* Takes every element of a JSON array of call objects; 1 when all were
 * calls, 0 when one was not, -1 when memory runs out. */
static int take_calls(const json_t *v, const char *id_seed, tw_bridge_tool_calls *found)
{
    if (json_is_object(v))
        return take_call(v, id_seed, found);
    if (!json_is_array(v) || json_array_size(v) == 0)
        return 0;
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e)
    {
        int r = take_call(e, id_seed, found);
        if (r <= 0)
            return r;
    }
    return 1;
}

/* JSON calls, the whole (trimmed) text: Llama 3.1's call objects
 * (optionally after <|python_tag|>) separated by ';' or whitespace, or
 * Mistral's array of them (optionally after [TOOL_CALLS], which the
 * detokenizer may have left out as a control token). All or nothing: if
 * anything else is there, the text is an ordinary answer. Returns false
 * when memory runs out. */
static bool parse_llama_json(const char *text, size_t len, const char *id_seed,
                             tw_bridge_tool_calls *out)
{
    size_t pos = 0;
    while (pos < len && is_space(text[pos]))
        pos++;
    if (len - pos >= PYTHON_LEN && memcmp(text + pos, PYTHON_TAG, PYTHON_LEN) == 0)
        pos += PYTHON_LEN;
    else if (len - pos >= MISTRAL_LEN && memcmp(text + pos, MISTRAL_TAG, MISTRAL_LEN) == 0)
        pos += MISTRAL_LEN;
    tw_bridge_tool_calls found = {0};
    bool any = false;
    for (;;) {
        while (pos < len && (is_space(text[pos]) || text[pos] == ';'))
            pos++;
        if (pos >= len)
            break;
        if (text[pos] != '{' && text[pos] != '[')
            goto not_calls;
        json_error_t jerr;
        json_t *obj = json_loadb(text + pos, len - pos, JSON_DISABLE_EOF_CHECK, &jerr);
        if (!obj)
            goto not_calls;
        int r = take_calls(obj, id_seed, &found);
        json_decref(obj);
        if (r < 0) {
            tw_bridge_tool_calls_free(&found);
            return false;
        }
        if (r == 0)
            goto not_calls;
        any = true;
        pos += (size_t)jerr.position;
    }
    if (any) {
        out->items = found.items;
        out->n = found.n;
        return true;
    }
not_calls:
    tw_bridge_tool_calls_free(&found);
    return true;
}

static char *trimmed_copy(const char *s, size_t len)
{
    size_t a = 0, b = len;
    while (a < b && is_space(s[a]))
        a++;
    while (b > a && is_space(s[b - 1]))
        b--;
    if (a == b)
        return NULL;
    return strndup(s + a, b - a);
}

tw_status tw_bridge_parse_tool_calls(const char *text, size_t len, const char *id_seed,
                                     tw_bridge_tool_calls *out, tw_err *err)
{
    memset(out, 0, sizeof *out);
    if (!text || len == 0)
        return TW_OK;
    textbuf rest = {0};
    if (find_bytes(text, len, OPEN_TAG, OPEN_LEN)) {
        if (!parse_hermes(text, len, id_seed, out, &rest))
            goto oom;
    } else if (!parse_llama_json(text, len, id_seed, out)) {
        goto oom;
    }
    if (out->n == 0) {
        /* Nothing recognised: the answer is the text, unchanged. */
        free(rest.p);
        out->content = strndup(text, len);
        if (!out->content)
            goto oom_nofree;
        return TW_OK;
    }
    if (rest.len) {
        out->content = trimmed_copy(rest.p, rest.len);
        if (!out->content) {
            /* trimmed_copy returns NULL for all-space text too; only a
             * non-blank text can have failed. */
            bool blank = true;
            for (size_t i = 0; i < rest.len && blank; i++)
                blank = is_space(rest.p[i]);
            if (!blank)
                goto oom;
        }
    }
    free(rest.p);
    return TW_OK;
oom:
    free(rest.p);
oom_nofree:
    tw_bridge_tool_calls_free(out);
    return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory parsing tool calls");
}

/* ------------------------------------------------------------ streaming */

enum {
    TS_UNDECIDED, /* only blanks, or a possible start of a tag, seen so far */
    TS_PASS,      /* ordinary text; watching for an opening tag */
    TS_CAPTURE,   /* inside (possible) calls: hold everything until the end */
};

void tw_bridge_tool_stream_init(tw_bridge_tool_stream *ts)
{
    memset(ts, 0, sizeof *ts);
    ts->state = TS_UNDECIDED;
}

void tw_bridge_tool_stream_fini(tw_bridge_tool_stream *ts)
{
    free(ts->pending);
    free(ts->out);
    memset(ts, 0, sizeof *ts);
}

static bool ts_append(tw_bridge_tool_stream *ts, const char *s, size_t n)
{
    textbuf b = {ts->pending, ts->len, ts->cap};
    bool ok = textbuf_add(&b, s, n);
    ts->pending = b.p;
    ts->len = b.len;
    ts->cap = b.cap;
    return ok;
}

/* Moves pending[0..n) to the output buffer. */
static bool ts_release(tw_bridge_tool_stream *ts, size_t n)
{
    if (n + 1 > ts->out_cap) {
        char *p = realloc(ts->out, n + 1);
        if (!p)
            return false;
        ts->out = p;
        ts->out_cap = n + 1;
    }
    memcpy(ts->out, ts->pending, n);
    ts->out[n] = '\0';
    memmove(ts->pending, ts->pending + n, ts->len - n + 1);
    ts->len -= n;
    return true;
}

/* Length of the longest suffix of s[0..len) that is a proper prefix of tag. */
static size_t partial_tag_suffix(const char *s, size_t len, const char *tag, size_t tag_len)
{
    size_t max = len < tag_len - 1 ? len : tag_len - 1;
    for (size_t k = max; k > 0; k--)
        if (memcmp(s + len - k, tag, k) == 0)
            return k;
    return 0;
}

/* True when s[0..n) is a prefix of tag (n may exceed neither). */
static bool is_prefix_of(const char *s, size_t n, const char *tag, size_t tag_len)
{
    return n <= tag_len && memcmp(s, tag, n) == 0;
}

tw_status tw_bridge_tool_stream_feed(tw_bridge_tool_stream *ts, const char *delta, size_t len,
                                     const char **emit, size_t *emit_len, tw_err *err)
{
    *emit = "";
    *emit_len = 0;
    if (!ts_append(ts, delta, len))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory holding stream text");
    if (ts->state == TS_CAPTURE)
        return TW_OK;
    if (ts->state == TS_UNDECIDED) {
        size_t a = 0;
        while (a < ts->len && is_space(ts->pending[a]))
            a++;
        if (a == ts->len)
            return TW_OK;
        const char *s = ts->pending + a;
        size_t n = ts->len - a;
        if (s[0] == '{' || s[0] == '[' ||
            (n >= PYTHON_LEN && memcmp(s, PYTHON_TAG, PYTHON_LEN) == 0) ||
            (n >= OPEN_LEN && memcmp(s, OPEN_TAG, OPEN_LEN) == 0)) {
            ts->state = TS_CAPTURE;
            return TW_OK;
        }
        if (is_prefix_of(s, n, PYTHON_TAG, PYTHON_LEN) || is_prefix_of(s, n, OPEN_TAG, OPEN_LEN))
            return TW_OK;
        ts->state = TS_PASS;
    }
    size_t keep;
    const char *open = find_bytes(ts->pending, ts->len, OPEN_TAG, OPEN_LEN);
    if (open) {
        keep = ts->len - (size_t)(open - ts->pending);
        ts->state = TS_CAPTURE;
    } else {
        keep = partial_tag_suffix(ts->pending, ts->len, OPEN_TAG, OPEN_LEN);
    }
    if (!ts_release(ts, ts->len - keep))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory holding stream text");
    *emit = ts->out;
    *emit_len = strlen(ts->out);
    return TW_OK;
}

tw_status tw_bridge_tool_stream_finish(tw_bridge_tool_stream *ts, const char *id_seed,
                                       tw_bridge_tool_calls *out, tw_err *err)
{
    memset(out, 0, sizeof *out);
    if (ts->len == 0)
        return TW_OK;
    if (ts->state == TS_CAPTURE)
        return tw_bridge_parse_tool_calls(ts->pending, ts->len, id_seed, out, err);
    out->content = strndup(ts->pending, ts->len);
    if (!out->content)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    return TW_OK;
}
