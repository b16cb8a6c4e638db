/* Tool calls the model opens by itself (tool_choice "auto"): the answer's
 * bytes are watched for the format's opening (tw_tool_call_trigger), from
 * which the call is held to the tools' grammar up to its end. Beside a JSON
 * answer, the answer's first tokens may also open a call instead of the
 * document: tokens that go on with the opening are kept through the JSON
 * mask, and once one is taken only such tokens are, until the opening is
 * whole. Where the call opens as the document does (Llama 3.1's "{"), the
 * answer is read as both, each token kept when either takes it, until one
 * refuses it or one is whole. Under tool_choice "none" the tokens that
 * would complete the opening are banned instead (call_ban.h). */
#include <math.h>
#include <string.h>

#include "sched_internal.h"

static void token_bytes(const slot *sl, uint32_t token, const char **p, size_t *n)
{
    *p = sl->m->tok ? tw_tokenizer_token_bytes(sl->m->tok, token, n) : NULL;
    if (!*p)
        *n = 0;
}

static bool is_space(unsigned char c)
{
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

void sched_json_closed(slot *sl)
{
    const request *r = sl->r;
    if (!sl->in_call || r->trigger.ends_answer) {
        sched_slot_finish(sl, TW_FINISH_STOP);
        return;
    }
    sl->json_on = sl->in_call = false;
    sl->decided = true;
    sl->trig_at = 0;
}

bool sched_json_open(slot *sl, const char *after, size_t n)
{
    const tw_tool_trigger *t = &sl->r->trigger;
    sl->trig_at = 0;
    tw_json_state_init(sl->json, sl->r->calls);
    sl->json_on = tw_json_state_feed(sl->json, t->text + strlen(t->text) - t->keep, t->keep) &&
                  tw_json_state_feed(sl->json, after, n);
    sl->in_call = sl->json_on;
    return sl->json_on;
}

bool sched_calls_choosing(const slot *sl)
{
    return sl->r->calls && sl->r->json && !sl->in_call && !sl->decided;
}

/* Whether p[0..n) goes on with the trigger from trig_at: its bytes are the
 * trigger's next ones, up to the trigger's end, and at most whitespace
 * after it (where the call's JSON may start). */
static bool continues(const slot *sl, const char *p, size_t n)
{
    const char *t = sl->r->trigger.text;
    const size_t left = strlen(t) - sl->trig_at, k = n < left ? n : left;
    if (n == 0 || memcmp(p, t + sl->trig_at, k) != 0)
        return false;
    for (size_t i = k; i < n; i++)
        if (!is_space((unsigned char)p[i]))
            return false;
    return true;
}

/* Watches a free answer's bytes for the opening of a call. A call whose
 * first bytes, written in the opening's token, already break the grammar
 * is left as the model wrote it. */
static void watch(slot *sl, const char *p, size_t n)
{
    const tw_tool_trigger *t = &sl->r->trigger;
    const size_t tl = strlen(t->text);
    for (size_t i = 0; i < n && !sl->trig_off; i++) {
        const unsigned char c = (unsigned char)p[i];
        if (!t->at_start) {
            sl->trig_at = (uint8_t)tw_tool_trigger_step(t->text, sl->trig_at, c);
        } else if (sl->trig_at == 0 && is_space(c)) {
            continue;
        } else if ((unsigned char)t->text[sl->trig_at] == c) {
            sl->trig_at++;
        } else {
            sl->trig_off = true;
        }
        if (sl->trig_at < tl)
            continue;
        sl->trig_off = t->at_start;
        if (sched_json_open(sl, p + i + 1, n - i - 1) && tw_json_state_closed(sl->json))
            sched_json_closed(sl);
        return;
    }
}

size_t sched_either_mask(slot *sl, float *row)
{
    const model_entry *m = sl->m;
    tw_json_mask_allowed(sl->jmask, sl->json, m->eos, m->n_eos, sl->allowed, m->vocab);
    tw_json_mask_allowed(sl->jmask, sl->call, m->eos, m->n_eos, sl->allowed_call, m->vocab);
    size_t kept = 0;
    for (uint32_t t = 0; t < m->vocab; t++) {
        if (sl->allowed[t] | sl->allowed_call[t])
            kept++;
        else
            row[t] = -INFINITY;
    }
    return kept;
}

/* A committed token while the answer is either: fed to both readings; the
 * one that refuses it is left, and the answer is the call once the
 * document refuses it (or both are whole: an answer the call's format
 * reads as a call is one). */
static bool either_take(slot *sl, const char *p, size_t n)
{
    const bool doc = tw_json_state_feed(sl->json, p, n);
    const bool call = tw_json_state_feed(sl->call, p, n);
    if (!doc && !call) {
        sched_slot_fail(sl, TW_INTERNAL, "a token that breaks the JSON answer was committed");
        return true;
    }
    if (doc && call && !tw_json_state_closed(sl->json) && !tw_json_state_closed(sl->call))
        return true;
    sl->decided = true;
    if (call && (!doc || tw_json_state_closed(sl->call))) {
        tw_json_state_copy(sl->json, sl->call);
        sl->in_call = true;
    }
    if (tw_json_state_closed(sl->json))
        sched_json_closed(sl);
    return true;
}

bool sched_calls_take(slot *sl, uint32_t token)
{
    if (!sl->r->calls || sl->in_call)
        return false;
    const char *p;
    size_t n;
    token_bytes(sl, token, &p, &n);
    if (sl->r->either && !sl->decided)
        return either_take(sl, p, n);
    if (!sched_calls_choosing(sl)) {
        if (sl->json_on)
            return false; /* the JSON answer's own token */
        watch(sl, p, n);
        return true;
    }
    if (!continues(sl, p, n))
        return false;
    /* the answer is a call now, not a document */
    const size_t tl = strlen(sl->r->trigger.text), left = tl - sl->trig_at;
    sl->json_on = false;
    if (n < left) {
        sl->trig_at = (uint8_t)(sl->trig_at + n);
        return true;
    }
    if (sched_json_open(sl, p + left, n - left) && tw_json_state_closed(sl->json))
        sched_json_closed(sl);
    return true;
}

size_t sched_calls_save(slot *sl, const float *row)
{
    const model_entry *m = sl->m;
    size_t n = 0;
    for (uint32_t t = 0; t < m->vocab && n < TW_SCHED_MAX_CONT; t++) {
        const char *p;
        size_t len;
        token_bytes(sl, t, &p, &len);
        if (continues(sl, p, len)) {
            sl->cont_ids[n] = t;
            sl->cont_logits[n++] = row[t];
        }
    }
    return n;
}

size_t sched_calls_restore(const slot *sl, float *row, size_t n)
{
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        kept += row[sl->cont_ids[i]] == -INFINITY && sl->cont_logits[i] != -INFINITY;
        row[sl->cont_ids[i]] = sl->cont_logits[i];
    }
    return kept;
}

void sched_calls_ban(const slot *sl, float *row)
{
    const call_ban *b = sl->m->ban;
    if (!sl->r->ban_calls || !b || (sl->think && tw_thinking_inside(sl->think)))
        return;
    for (uint32_t i = b->start[sl->trig_at]; i < b->start[sl->trig_at + 1]; i++)
        row[b->ids[i]] = -INFINITY;
}

void sched_calls_ban_step(slot *sl, uint32_t token)
{
    const char *p;
    size_t n;
    token_bytes(sl, token, &p, &n);
    sl->trig_at = call_ban_step(sl->m->ban, sl->trig_at, p, n);
}
