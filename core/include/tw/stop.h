/* Stop rules: when a sequence's generation ends, and the hold-back of text
 * that might still turn into a stop string.
 *
 * Token rules (end-of-turn / EOS ids, caller stop ids) look at the sampled id
 * before it is decoded; a token that stops is not part of the output. Stop
 * strings are matched on the answer text (not the reasoning) across token
 * boundaries: text is fed in deltas, and the longest tail that is a prefix of
 * some stop string is held back until it either completes a stop string (and
 * is dropped with everything after it) or can no longer do so (and is
 * released). Streamed text is therefore never retracted.
 *
 * A tw_stop belongs to one sequence; not thread-safe.
 */
#ifndef TW_STOP_H
#define TW_STOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/status.h"

/* Limits on caller input (hostile input must not size our buffers). */
#define TW_STOP_MAX_STRINGS 16
#define TW_STOP_MAX_STRING_BYTES 256
#define TW_STOP_MAX_TOKEN_IDS 64

/* Why generation ended; the numbers are the wire's FinishReason values. */
typedef enum tw_finish_reason {
    TW_FINISH_NONE = 0,           /* still running */
    TW_FINISH_STOP = 1,           /* EOS / end-of-turn token or a stop token id */
    TW_FINISH_STOP_STRING = 2,    /* a stop string matched */
    TW_FINISH_LENGTH = 3,         /* max_tokens or max_total_tokens reached */
    TW_FINISH_TOOL_CALLS = 4,     /* the model called a tool */
    TW_FINISH_CANCELLED = 5,      /* tw_engine_cancel or shutdown */
    TW_FINISH_DEADLINE = 6,       /* the deadline passed */
    TW_FINISH_CONTEXT_LENGTH = 7, /* the context window is full */
    TW_FINISH_ERROR = 8,          /* an engine error; see the chunk's error */
} tw_finish_reason;

/* "stop", "stop_string", "length", ... ; "none" for TW_FINISH_NONE. */
const char *tw_finish_reason_name(tw_finish_reason r);

/* A request's stop rules; start from tw_stop_params_init(). Pointers are
 * borrowed; tw_stop_create copies what it keeps. */
typedef struct tw_stop_params {
    uint32_t max_tokens;              /* answer tokens; 0: until the context is full */
    /* Every generated token counted, reasoning and think tags included
     * (OpenAI's max_completion_tokens); 0: no such cap. */
    uint32_t max_total_tokens;
    uint32_t min_tokens;              /* EOS / stop ids cannot end the answer before this */
    const uint32_t *stop_token_ids;   /* end generation; not part of the output */
    size_t n_stop_token_ids;
    const char *const *stop_strings;  /* NUL-terminated UTF-8, non-empty */
    size_t n_stop_strings;
    bool ignore_eos;                  /* do not stop at the model's EOS / end-of-turn ids */
    /* generate nothing: the prompt is read (for its log-probabilities, or
     * the caches) and each choice ends with TW_FINISH_LENGTH */
    bool prompt_only;
} tw_stop_params;

void tw_stop_params_init(tw_stop_params *p);

/* Checks counts and lengths against the TW_STOP_MAX_* limits, that stop
 * strings are non-empty valid UTF-8 and that stop ids are below vocab_size
 * (0: not checked). INVALID_ARGUMENT says which entry is wrong. */
tw_status tw_stop_params_validate(const tw_stop_params *p, uint32_t vocab_size, tw_err *err);

typedef struct tw_stop tw_stop;

/* A matcher for one sequence. eos_ids are the model's end ids (EOS, EOT,
 * <|im_end|>, ...), copied. *out is owned by the caller (tw_stop_destroy). */
tw_status tw_stop_create(const tw_stop_params *p, const uint32_t *eos_ids, size_t n_eos,
                         tw_stop **out, tw_err *err);

void tw_stop_destroy(tw_stop *s);

/* Forgets held text and any match, for a new sequence with the same rules. */
void tw_stop_reset(tw_stop *s);

/* True when token must end generation here: a caller stop id always does;
 * an EOS id does unless ignore_eos, and only once n_answer (answer tokens so
 * far, this one excluded) has reached min_tokens. *is_eos tells which (may be
 * NULL). */
bool tw_stop_token(const tw_stop *s, uint32_t token, uint32_t n_answer, bool *is_eos);

/* True when the model's EOS ids are to be masked out of the logits because
 * min_tokens is not reached yet (n_answer answer tokens so far). */
bool tw_stop_suppress_eos(const tw_stop *s, uint32_t n_answer);

/* The model's EOS ids as given at create. */
const uint32_t *tw_stop_eos_ids(const tw_stop *s, size_t *n);

typedef enum tw_stop_result {
    TW_STOP_CONTINUE = 0, /* no stop string (yet) */
    TW_STOP_MATCHED = 1,  /* a stop string completed: generation ends */
    TW_STOP_NOMEM = 2,    /* the buffer could not grow; nothing was consumed */
} tw_stop_result;

/* Feeds an answer-text delta. The text that is safe to emit now comes back in
 * *emit / *emit_len (pointing into the matcher or into text; valid until the
 * next call on s). When a stop string completes, the emitted text ends right
 * before it, the result is TW_STOP_MATCHED and *matched (may be NULL) names
 * the stop string (owned by s); later calls emit nothing and answer
 * TW_STOP_MATCHED again. Allocates only when a delta is longer than the
 * buffer made at create (about 1 KiB beyond twice the longest stop string);
 * if that fails the answer is TW_STOP_NOMEM. */
tw_stop_result tw_stop_feed(tw_stop *s, const char *text, size_t len, const char **emit,
                            size_t *emit_len, const char **matched);

/* Releases the held-back text when generation ends for any other reason. */
void tw_stop_flush(tw_stop *s, const char **emit, size_t *emit_len);

/* Bytes currently held back (for tests and diagnostics). */
size_t tw_stop_held(const tw_stop *s);

#endif
