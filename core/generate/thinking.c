/* The thinking controller: token roles, the reasoning budget and the loop
 * detector (rules in tw/thinking.h). */
#include "tw/thinking.h"

#include <stdlib.h>
#include <string.h>

/* The detector keeps the last HIST reasoning tokens; HIST is a power of two
 * larger than the largest window a caller may configure. */
#define HIST 8192u
#define HASH_MUL 0x100000001b3ull

typedef struct slot {
    uint64_t key; /* 0: empty (keys are forced non-zero) */
    uint32_t count;
} slot;

struct tw_thinking {
    tw_thinking_opts o;
    uint32_t open_id, close_id;

    bool inside;
    bool had_block;   /* one block per response: later tags are plain content */
    bool force_sent;
    tw_force_close forced;
    uint32_t reasoning;

    uint32_t *hist; /* ring of the last HIST reasoning tokens */
    uint32_t n_hist;
    uint64_t hash;      /* rolling hash of the last block_len tokens */
    uint64_t mul_pow;   /* HASH_MUL^(block_len - 1), to drop the oldest token */
    slot *table;
    uint32_t table_mask;
    uint32_t table_used, table_limit;
};

void tw_thinking_opts_init(tw_thinking_opts *o)
{
    memset(o, 0, sizeof *o);
    o->enable_thinking = TW_THINK_DEFAULT;
    o->max_thinking_tokens = TW_THINKING_DEFAULT_BUDGET;
    o->loop_detection = true;
    o->separate_reasoning = true;
    o->ngram_n = 6;
    o->ngram_repeats = 3;
    o->ngram_window = 64;
    o->block_len = 30;
    o->block_repeats = 4;
}

tw_status tw_thinking_opts_validate(const tw_thinking_opts *o, tw_err *err)
{
    if (!o)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "thinking options missing");
    if (o->enable_thinking != TW_THINK_DEFAULT && o->enable_thinking != TW_THINK_ON &&
        o->enable_thinking != TW_THINK_OFF)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "enable_thinking: bad value %d",
                         (int)o->enable_thinking);
    if (o->max_thinking_tokens < 1)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "max_thinking_tokens must be >= 1");
    if (o->ngram_n < 1 || o->ngram_n > 64)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "loop n-gram length %u not in 1..64",
                         o->ngram_n);
    if (o->ngram_repeats < 2 || o->ngram_repeats > 64)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "loop n-gram repeats %u not in 2..64",
                         o->ngram_repeats);
    if (o->ngram_window < o->ngram_n || o->ngram_window > 4096)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "loop n-gram window %u not in %u..4096",
                         o->ngram_window, o->ngram_n);
    if (o->block_len < 2 || o->block_len > 1024)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "loop block length %u not in 2..1024",
                         o->block_len);
    if (o->block_repeats < 2 || o->block_repeats > 64)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "loop block repeats %u not in 2..64",
                         o->block_repeats);
    return TW_OK;
}

const char *tw_transition_kind_name(tw_transition_kind k)
{
    switch (k) {
    case TW_TRANSITION_PLAIN: return "plain";
    case TW_TRANSITION_JSON: return "json";
    case TW_TRANSITION_CODE: return "code";
    case TW_TRANSITION_TRANSLATION: return "translation";
    case TW_TRANSITION_MATH: return "math";
    case TW_TRANSITION_COUNT: break;
    }
    return "?";
}

const char *tw_transition_text(tw_transition_kind k)
{
    switch (k) {
    case TW_TRANSITION_JSON: return "\n\n**Final JSON:**\n\n```json\n";
    case TW_TRANSITION_CODE: return "\n\n**Final Code:**\n\n";
    case TW_TRANSITION_TRANSLATION: return "\n\n**Final Translation:**\n\n";
    case TW_TRANSITION_MATH: return "\n\n**Final Answer:**\n\n";
    case TW_TRANSITION_PLAIN:
    case TW_TRANSITION_COUNT: break;
    }
    return "\n\n";
}

/* ------------------------------------------------------------ controller */

tw_status tw_thinking_create(const tw_thinking_opts *o, uint32_t open_id, uint32_t close_id,
                             uint32_t max_block_tokens, tw_thinking **out, tw_err *err)
{
    if (!out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "thinking: out is NULL");
    *out = NULL;
    tw_status st = tw_thinking_opts_validate(o, err);
    if (st != TW_OK)
        return st;
    if (open_id == close_id)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "thinking: open and close tags are one id");
    tw_thinking *t = calloc(1, sizeof *t);
    if (!t)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "thinking: out of memory");
    t->o = *o;
    t->open_id = open_id;
    t->close_id = close_id;
    if (o->loop_detection) {
        /* Every reasoning token adds at most one key; the budget and the
         * context bound how many there can be, so size for that at half
         * load and stop inserting beyond it rather than grow. */
        uint32_t keys = max_block_tokens < o->max_thinking_tokens ? max_block_tokens
                                                                  : o->max_thinking_tokens;
        if (keys > (1u << 22))
            keys = 1u << 22;
        uint32_t cap = 64;
        while (cap < 2 * keys)
            cap *= 2;
        t->hist = malloc(HIST * sizeof *t->hist);
        t->table = calloc(cap, sizeof *t->table);
        if (!t->hist || !t->table) {
            tw_thinking_destroy(t);
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "thinking: out of memory");
        }
        t->table_mask = cap - 1;
        t->table_limit = cap / 2;
        uint64_t p = 1;
        for (uint32_t i = 1; i < o->block_len; i++)
            p *= HASH_MUL;
        t->mul_pow = p;
    }
    *out = t;
    return TW_OK;
}

void tw_thinking_destroy(tw_thinking *t)
{
    if (!t)
        return;
    free(t->hist);
    free(t->table);
    free(t);
}

void tw_thinking_reset(tw_thinking *t, bool inside)
{
    t->inside = inside;
    t->had_block = inside;
    t->force_sent = false;
    t->forced = TW_FORCE_NONE;
    t->reasoning = 0;
    t->n_hist = 0;
    t->hash = 0;
    if (t->table && t->table_used) {
        memset(t->table, 0, ((size_t)t->table_mask + 1) * sizeof *t->table);
        t->table_used = 0;
    }
}

bool tw_thinking_prompt_state(const uint32_t *ids, size_t n, uint32_t open_id,
                              uint32_t close_id)
{
    for (size_t i = n; i > 0; i--) {
        if (ids[i - 1] == close_id)
            return false;
        if (ids[i - 1] == open_id)
            return true;
    }
    return false;
}

static inline uint32_t hist_at(const tw_thinking *t, uint32_t back)
{
    /* back = 0 is the newest token. */
    return t->hist[(t->n_hist - 1 - back) & (HIST - 1)];
}

static bool ngram_loop(const tw_thinking *t)
{
    uint32_t n = t->o.ngram_n;
    uint32_t window = t->o.ngram_window;
    if (window > t->n_hist)
        window = t->n_hist;
    if (window < n)
        return false;
    uint32_t found = 1;
    /* An earlier occurrence ends `shift` tokens before the newest one and
     * must lie wholly inside the window. */
    for (uint32_t shift = 1; shift + n <= window; shift++) {
        uint32_t k = 0;
        while (k < n && hist_at(t, k) == hist_at(t, shift + k))
            k++;
        if (k == n && ++found >= t->o.ngram_repeats)
            return true;
    }
    return false;
}

static bool block_loop(tw_thinking *t, uint32_t token)
{
    uint32_t len = t->o.block_len;
    if (t->n_hist > len) {
        uint32_t oldest = hist_at(t, len);
        t->hash -= (uint64_t)(oldest + 1) * t->mul_pow;
    }
    t->hash = t->hash * HASH_MUL + (uint64_t)token + 1;
    if (t->n_hist < len)
        return false;
    uint64_t key = t->hash | 1; /* never 0, the empty mark */
    uint32_t i = (uint32_t)(key ^ (key >> 29)) & t->table_mask;
    while (t->table[i].key && t->table[i].key != key)
        i = (i + 1) & t->table_mask;
    if (!t->table[i].key) {
        if (t->table_used >= t->table_limit)
            return false;
        t->table[i].key = key;
        t->table_used++;
    }
    return ++t->table[i].count >= t->o.block_repeats;
}

static bool loop_step(tw_thinking *t, uint32_t token)
{
    t->hist[t->n_hist & (HIST - 1)] = token;
    t->n_hist++;
    bool block = block_loop(t, token);
    return ngram_loop(t) || block;
}

tw_token_role tw_thinking_step(tw_thinking *t, uint32_t token, tw_force_close *force)
{
    if (force)
        *force = TW_FORCE_NONE;
    if (!t->inside) {
        if (token == t->open_id && !t->had_block) {
            t->inside = true;
            t->had_block = true;
            return TW_ROLE_THINK_OPEN;
        }
        return TW_ROLE_CONTENT;
    }
    if (token == t->close_id) {
        t->inside = false;
        return TW_ROLE_THINK_CLOSE;
    }
    t->reasoning++;
    if (t->force_sent)
        return TW_ROLE_REASONING;
    tw_force_close why = TW_FORCE_NONE;
    if (t->hist && loop_step(t, token))
        why = TW_FORCE_LOOP;
    if (why == TW_FORCE_NONE && t->reasoning >= t->o.max_thinking_tokens)
        why = TW_FORCE_BUDGET;
    if (why != TW_FORCE_NONE) {
        t->force_sent = true;
        t->forced = why;
        if (force)
            *force = why;
    }
    return TW_ROLE_REASONING;
}

bool tw_thinking_inside(const tw_thinking *t)
{
    return t->inside;
}

uint32_t tw_thinking_reasoning_tokens(const tw_thinking *t)
{
    return t->reasoning;
}

tw_force_close tw_thinking_forced(const tw_thinking *t)
{
    return t->forced;
}

/* ------------------------------------------------------------ whole text */

void tw_thinking_split_text(const char *text, size_t len, bool starts_inside,
                            tw_think_split *out)
{
    static const char open[] = "<think>", close[] = "</think>";
    memset(out, 0, sizeof *out);
    size_t body = 0;
    if (!starts_inside) {
        const char *o = memmem(text, len, open, sizeof open - 1);
        if (!o) {
            out->pre_len = len;
            out->post_off = len;
            out->reasoning_off = len;
            return;
        }
        out->pre_len = (size_t)(o - text);
        body = out->pre_len + sizeof open - 1;
    }
    out->reasoning_off = body;
    const char *c = memmem(text + body, len - body, close, sizeof close - 1);
    if (!c) {
        out->reasoning_len = len - body;
        out->post_off = len;
        return;
    }
    out->reasoning_len = (size_t)(c - (text + body));
    out->post_off = body + out->reasoning_len + sizeof close - 1;
    out->post_len = len - out->post_off;
}
