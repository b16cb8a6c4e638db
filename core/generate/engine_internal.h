/* Internal structures shared by the engine's files: the model registry
 * (engine.c), request preparation (request.c) and the scheduler
 * (scheduler.c). Nothing here is part of the public API. */
#ifndef TW_GENERATE_ENGINE_INTERNAL_H
#define TW_GENERATE_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tw/engine.h"
#include "tw/json_mask.h"
#include "tw/model.h"
#include "tw/pool.h"
#include "tw/tokenizer.h"
#include "tw/tool_format.h"

#include "call_ban.h"

#include "admission.h"
#include "cache/engine_cache.h"

#define TW_ENGINE_MAX_EOS 16

/* Counters kept per model and summed for engine-wide stats. Written by the
 * scheduler and submit under e->lock. */
typedef struct model_stats {
    uint64_t requests_total, requests_failed;
    uint64_t prompt_tokens, generated_tokens;
    uint64_t budget_closes, loop_closes;
    uint64_t transitions[TW_TRANSITION_COUNT];
    /* speculative decoding (spec.h counters summed over finished slots) */
    uint64_t spec_drafted, spec_accepted, spec_produced, spec_us;
    uint64_t spec_plain_tokens, spec_plain_us;
    uint64_t spec_rounds, spec_snapshot_us;
} model_stats;

/* A loaded model. The registry holds one reference and every request that
 * uses it holds one; the last release frees it. */
typedef struct model_entry {
    struct model_entry *next; /* registry list, load order */
    char name[TW_MODEL_NAME_MAX];
    char path[TW_MODEL_PATH_MAX];
    tw_model *model;
    tw_model *draft;   /* NULL: no draft model for speculative decoding */
    char draft_path[TW_MODEL_PATH_MAX]; /* where draft came from; "" without one */
    /* Scheduler-owned: the auto speculation policy's last verdict, by
     * tw_spec_source, carried from one request to the next (a pause in
     * decode steps; 0: speculation paid off). */
    uint32_t spec_auto_pause[2];
    engine_cache *cache; /* prefix cache + state store use; NULL: off */
    tw_tokenizer *tok; /* NULL: ids only */
    tw_json_vocab *json_vocab;     /* JSON answers' token index; NULL without tok */
    struct tw_chat_template *tmpl; /* NULL: no chat prompts */
    tw_tool_format tool_format;    /* how tmpl asks for tool calls */
    call_ban *ban;                 /* tool_choice "none": NULL where calls open otherwise */
    uint32_t vocab;
    uint32_t max_context;
    uint32_t eos[TW_ENGINE_MAX_EOS];
    size_t n_eos;
    uint32_t think_open, think_close; /* TW_TOKEN_NONE when absent */
    /* Tokens injected after </think> when the block is closed by force. */
    uint32_t *transition[TW_TRANSITION_COUNT];
    size_t n_transition[TW_TRANSITION_COUNT];
    uint64_t loaded_unix_s;
    char architecture[64];
    char weight_type[16];
    char fingerprint[65];
    uint64_t parameters;

    int refs;          /* under e->lock */
    bool unloaded;     /* removed from the registry; running requests end */
    model_stats stats; /* under e->lock */

    /* Scheduler-owned: sequences kept for reuse, and the logits of one
     * decode batch. */
    tw_seq **free_seqs;
    size_t n_free_seqs;
    float *logits; /* max_batch x vocab */
} model_entry;

/* The grammar of what a forced tool call writes after its opening
 * (tw_tool_call_opener): for a named function (name) its arguments, for
 * "required" (name NULL) the call's object; then the call's closing
 * (tool_grammar.c). */
tw_status tool_call_grammar(const model_entry *m, const tw_chat_input *chat, const char *name,
                            struct tw_json_grammar **out, tw_err *err);

/* The grammar of the calls a model opens by itself under tool_choice
 * "auto", from trig (tw_tool_call_trigger) on: the call's object and its
 * closing, or Mistral's list. */
tw_status tool_call_grammar_auto(const model_entry *m, const tw_chat_input *chat,
                                 const tw_tool_trigger *trig, struct tw_json_grammar **out,
                                 tw_err *err);

/* A request after submit: a deep copy of everything the scheduler needs. */
typedef struct request {
    struct request *next; /* queue or running list */
    uint64_t id;
    model_entry *m; /* referenced */
    tw_gen_callbacks cb;
    void *user;

    uint32_t *prompt;
    size_t n_prompt;
    /* tool_choice "required" or a named function: the call's opening,
     * which ends the prompt and starts each choice's answer text */
    char *answer_prefix;
    tw_json_grammar *json;   /* the answer's JSON grammar; NULL: free text */
    /* tool_choice "auto": the tools' calls, held to calls from where the
     * answer opens one (trigger) to its end; NULL: no tools or no format */
    tw_json_grammar *calls;
    /* tool_choice "none" with a ban (m->ban): the answer may not open a
     * call; trig_start is then how much of the opening the prompt ends
     * with */
    bool ban_calls;
    /* beside a JSON answer, calls that open as the document does (Llama
     * 3.1's "{"): the answer is read as both until one of them refuses it */
    bool either;
    tw_tool_trigger trigger;
    /* how much of the trigger the prompt ends with; when all of it, the
     * bytes after it (the call's start) */
    uint8_t trig_start, n_trig_after;
    char trig_after[32];
    tw_transition_kind kind; /* typed transition for a loop close */

    tw_sampling_params sampling;
    tw_logit_bias *bias; /* sampling.logit_bias points here */
    tw_stop_params stop;
    uint32_t *stop_ids;
    char **stop_strings;
    tw_thinking_opts thinking;
    tw_logprob_opts logprobs;
    /* prompt_logprobs: one per prompt token (the first has none: NaN),
     * filled by choice 0's prefill, which the other choices' prefills wait
     * for; sent with each choice's first chunk */
    tw_token_logprob *prompt_lps;
    bool prompt_lps_ready;
    tw_spec_opts speculative;
    tw_embed_opts embed; /* pooling set: the prompt's vector is the answer */
    tw_cache_mode cache_mode;
    bool cache_persist;
    uint64_t seed;
    uint32_t n;
    uint64_t deadline_unix_ms;

    uint64_t submit_us; /* monotonic */
    atomic_bool cancel;
    uint32_t running_choices; /* scheduler-only */
    uint64_t mem_slot, mem_held; /* admission.h: one choice's share, what is still reserved */
    bool failed;
    tw_status error;
    char error_msg[TW_ERR_MSG_MAX];
    tw_usage usage;
} request;

struct tw_engine {
    tw_engine_opts opts;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    bool thread_started;
    bool shutdown;           /* under lock */
    uint64_t next_id;        /* under lock */
    uint64_t start_us;

    model_entry *models;     /* registry, load order */
    model_entry *default_model;

    request *queue_head, *queue_tail; /* waiting, FIFO */
    uint32_t n_queued;
    request *running;        /* admitted, under lock (list membership only) */
    uint32_t n_running;

    /* Throughput over the last minute: per-second token counts. */
    uint64_t rate_stamp[60];
    uint64_t decode_tokens[60];
    uint64_t prefill_tokens[60];

    void *sched; /* scheduler-private state (scheduler.c) */
    tw_state_store *store; /* persistent state store; NULL: off */
    engine_mem mem;        /* admission by memory (admission.h) */
};

/* Monotonic and wall clocks in microseconds / milliseconds. */
uint64_t tw_now_us(void);
uint64_t tw_now_unix_ms(void);

/* Registry references (take e->lock inside). */
void engine_model_ref(tw_engine *e, model_entry *m);
void engine_model_unref(tw_engine *e, model_entry *m);
/* Looks a model up and takes a reference; NOT_FOUND with a message. */
tw_status engine_model_get(tw_engine *e, const char *name, model_entry **out, tw_err *err);

/* Tokenizes into a malloc'd array (engine.c). */
tw_status engine_encode(const tw_tokenizer *tok, const char *text, size_t len, unsigned flags,
                        uint32_t **ids, size_t *n, tw_err *err);

/* Builds a request from the caller's (request.c). */
tw_status request_prepare(tw_engine *e, model_entry *m, const tw_gen_request *req,
                          request **out, tw_err *err);
void request_free(request *r);

/* Renders a chat with the model's template (request.c). */
tw_status engine_render_chat(model_entry *m, const tw_chat_input *chat, tw_think_mode thinking,
                             char **text, size_t *len, tw_err *err);

/* Speculative decoding glue (spec_engine.c). */
struct tw_spec;
/* Loads the draft model of m from path with the target's options; checks
 * the vocabularies match. */
tw_status engine_load_draft(model_entry *m, const char *path, const tw_model_opts *mo,
                            tw_err *err);
/* Plain-time / speculative-time ratio per token; 0 when either is unknown. */
float engine_spec_speedup(uint64_t spec_tokens, uint64_t spec_us, uint64_t plain_tokens,
                          uint64_t plain_us);
/* The speculator a slot of request r runs with (*out NULL: none), with the
 * tokens of the prefilled prompt as its history. */
tw_status engine_spec_for_slot(const request *r, size_t max_tokens, uint64_t seed,
                               struct tw_spec **out, tw_err *err);
/* Adds a finished slot's speculation counters to its request's usage and
 * its model's stats (caller holds e->lock for the stats). */
void engine_spec_usage(const struct tw_spec *sp, tw_usage *u);
void engine_spec_stats(const struct tw_spec *sp, model_stats *ms);
/* Keeps a finished speculator's auto verdict for the model's next request
 * (scheduler thread only). */
void engine_spec_remember(const struct tw_spec *sp, model_entry *m);

/* Scheduler thread (scheduler.c). */
tw_status sched_create(tw_engine *e, tw_err *err);
void sched_destroy(tw_engine *e);
void *sched_main(void *arg);
/* Frees the scheduler's per-model resources; scheduler thread only, or when
 * it is stopped. */
void sched_release_model(model_entry *m);

#endif
