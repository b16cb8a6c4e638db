/* Log-probabilities on their way to the wire: the engine's per-token
 * records (tw_token_logprob, valid during a chunk callback only) kept until
 * a whole answer's reply is built, and turned into TokenLogprob messages. */
#ifndef TWD_LOGPROBS_H
#define TWD_LOGPROBS_H

#include <stdbool.h>
#include <stddef.h>

#include "tokenwire.pb-c.h"
#include "tw/engine.h"

/* TokenLogprob messages for n tokens, and the arrays they point into. */
typedef struct twd_wire_logprobs {
    Tokenwire__V1__TokenLogprob *lp, **lpp; /* lpp: the repeated field */
    Tokenwire__V1__TopLogprob *top, **topp;
} twd_wire_logprobs;

/* Fills *w (zeroed first) from n records; their texts are borrowed, so *w
 * lives no longer than they do. A token without a log-probability (NaN: the
 * prompt's first) has none on the wire. false when memory is short (*w is
 * then safe to free). */
bool twd_wire_logprobs_make(const tw_token_logprob *src, size_t n, twd_wire_logprobs *w);
void twd_wire_logprobs_free(twd_wire_logprobs *w);

/* Records copied out of chunk callbacks, with their texts. Zeroed is
 * empty. */
typedef struct twd_kept_text twd_kept_text;
typedef struct twd_kept_logprobs {
    tw_token_logprob *lps; /* texts point into `text` once turned to wire */
    twd_kept_text *texts;
    size_t n, cap;
    char *text;
    size_t text_len, text_cap;
} twd_kept_logprobs;

/* Appends n records (texts copied); false when memory is short. */
bool twd_kept_logprobs_add(twd_kept_logprobs *k, const tw_token_logprob *src, size_t n);

/* The kept records as wire messages (nothing kept: an empty *w); they
 * borrow k's texts, so k must not change or go before *w. false when
 * memory is short. */
bool twd_kept_logprobs_to_wire(twd_kept_logprobs *k, twd_wire_logprobs *w);

void twd_kept_logprobs_free(twd_kept_logprobs *k);

#endif
