/* The engine: loaded models, a request queue and one scheduler thread that
 * runs every request with continuous batching.
 *
 * This is the API the daemon (and anything else embedding tokenwire) uses. It
 * mirrors proto/tokenwire.proto in plain C structs so the core does not depend
 * on protobuf; the server translates field by field.
 *
 * Threads. Every function here may be called from any thread, concurrently,
 * except tw_engine_destroy (no other call may be running or start). Requests
 * are run by the engine's scheduler thread; tokenize/detokenize/template
 * helpers, model loading and stats run on the calling thread.
 *
 * Ownership. Input structs are borrowed for the duration of the call only:
 * tw_engine_submit deep-copies the request (strings, arrays, messages), so the
 * caller may free it as soon as submit returns. Memory returned through an out
 * pointer (char **, uint32_t **, arrays) is the caller's to free() unless the
 * function says otherwise. Chunk contents passed to the callback are valid
 * only during the callback.
 *
 * Lifetime of a request. A successful tw_engine_submit leads to exactly one
 * chunk with final = true for that request, whatever happens (stop, cancel,
 * deadline, error, model unload, engine destroy); after that chunk the engine
 * never touches the request's user pointer again. A failed submit leads to no
 * callback at all.
 */
#ifndef TW_ENGINE_H
#define TW_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/model.h"
#include "tw/sampler.h"
#include "tw/status.h"
#include "tw/stop.h"
#include "tw/thinking.h"

typedef struct tw_engine tw_engine;

/* ------------------------------------------------------------------ engine */

/* Engine-wide settings and limits; start from tw_engine_opts_init(). A zero
 * field means "the default" shown here. */
typedef struct tw_engine_opts {
    uint32_t threads;          /* compute threads (default: online CPUs) */
    uint32_t max_batch;        /* sequences decoded together (default 16) */
    uint32_t max_context;      /* cap on any model's context window (default: the model's own) */
    uint32_t max_queue;        /* requests waiting to start; more: RESOURCE_EXHAUSTED (default 256) */
    uint32_t prefill_chunk;    /* prompt tokens prefilled per scheduler step, all prompts
                                  together, plus a quarter more for short prompts read to
                                  their end (default 256); above TW_PREFILL_GROUP, taken
                                  down to a multiple of it, so that outputs do not depend
                                  on it */
    uint32_t max_n;            /* choices per request, <= max_batch (default min(8, max_batch)) */
    uint32_t max_prompt_bytes; /* text / chat prompt size (default 8 MiB) */
    tw_weight_pages weight_pages; /* where GGUF weights live (default TW_WEIGHTS_AUTO) */
    tw_kv_type kv_type;           /* how sequences store K/V (default TW_KV_F32) */
    tw_type quantize;             /* tw_model_opts.quantize for every model loaded
                                     (default TW_TYPE_F32: as stored) */

    /* Caches of prompt state (tw/prefix_cache.h, tw/state_store.h). */
    uint64_t cache_bytes;        /* in-memory prefix cache per model (default 1 GiB) */
    bool no_prefix_cache;        /* no in-memory prefix cache */
    /* restores from the prefix cache copy K/V rows instead of mapping the
     * cache's pages (which sequences restored from one prefix share) */
    bool prefix_cache_copy;
    const char *state_dir;       /* persistent store (default $XDG_CACHE_HOME/tokenwire/state);
                                    copied at create */
    uint64_t state_bytes;        /* persistent store budget (default 4 GiB) */
    uint32_t state_entries;      /* persistent store entry limit (default 1024) */
    bool no_state_store;         /* no persistent store */
    /* Prompts of at least this many tokens are saved to the persistent store
     * without CacheOptions.persist (default 4096; UINT32_MAX: only on request). */
    uint32_t persist_min_tokens;

    /* Memory for sequence state (K/V, recurrent state, conv windows,
     * speculative draft sequences and snapshot slots): requests that do not
     * fit wait in the queue until running ones end; a request that could
     * not fit even alone is refused with RESOURCE_EXHAUSTED. Sequences are
     * sized by what a request can produce (prompt + max_tokens, plus the
     * thinking budget on models with think tags), capped by the context.
     * 0: half of MemAvailable at create, minus each loaded model's weights,
     * logits and prefix cache budget (logged). */
    uint64_t mem_budget_bytes;

    /* The long-context thinking rule (tw/long_context.h): a chat whose
     * context is longer than long_context_chars (default 3000) and whose
     * last user message ends in a question shorter than
     * short_question_chars (default 200) renders with thinking on when the
     * request left enable_thinking unset. */
    bool no_long_context_thinking; /* the rule off */
    uint32_t long_context_chars;
    uint32_t short_question_chars;
} tw_engine_opts;

void tw_engine_opts_init(tw_engine_opts *o);

/* Creates an engine with no model loaded and starts its scheduler thread.
 * opts may be NULL (all defaults). *out is owned by the caller. */
tw_status tw_engine_create(const tw_engine_opts *opts, tw_engine **out, tw_err *err);

/* Cancels every request (each gets its final chunk with TW_FINISH_CANCELLED,
 * from the scheduler thread, before this returns), stops the scheduler and
 * frees every model. Blocks. NULL is allowed. */
void tw_engine_destroy(tw_engine *e);

/* ------------------------------------------------------------------ models */

#define TW_MODEL_NAME_MAX 128
#define TW_MODEL_PATH_MAX 1024

typedef enum tw_model_state {
    TW_MODEL_LOADING = 0,
    TW_MODEL_READY = 1,
    TW_MODEL_FAILED = 2,
} tw_model_state;

/* "loading", "ready", "failed". */
const char *tw_model_state_name(tw_model_state s);

/* A snapshot of what the engine knows about one model (ModelInfo). */
typedef struct tw_engine_model_info {
    char name[TW_MODEL_NAME_MAX];
    char path[TW_MODEL_PATH_MAX];
    char architecture[64];  /* e.g. "qwen3_5" */
    char weight_type[16];   /* dominant type, e.g. "Q8_0" */
    char fingerprint[65];   /* hex SHA-256, empty when unknown */
    char draft_path[TW_MODEL_PATH_MAX]; /* the draft model beside it; empty: none */
    uint64_t parameters;
    uint32_t max_context;   /* as allocated for this engine */
    uint32_t vocab_size;
    uint64_t loaded_unix_s;
    tw_model_state state;
    bool is_default;
    bool has_tokenizer;     /* false: token-id prompts only */
    bool has_chat_template;
    const char *tool_format; /* how its template writes tool calls (tw_tool_format_name);
                                NULL for a load still in progress */
    bool has_thinking;      /* the vocabulary has <think> / </think> */
    const char *pooling;    /* how its files say embeddings pool (tw_model_pooling_name;
                               "unsaid": they name none); NULL for a load still in progress */
    bool encoder;           /* tw_model_info.encoder: embeddings only */
    float progress;         /* 0..1 while loading */
    char error[TW_ERR_MSG_MAX]; /* why loading failed */
} tw_engine_model_info;

/* Options of tw_engine_load_model (LoadModelRequest); start from init. */
typedef struct tw_load_opts {
    const char *quantize;  /* "Q8_0", ... ; NULL or "": keep the file's types */
    uint32_t max_context;  /* 0: the model's own, capped by the engine's limit */
    bool make_default;     /* also the first model loaded becomes the default */
    /* A small model with the same vocabulary that drafts tokens for
     * speculative decoding (GGUF file or HF directory); NULL or "": none. */
    const char *draft_path;
    /* Jinja source that replaces the model's own chat template (which it
     * must compile, and which needs the model's tokenizer); NULL or "":
     * the model's. */
    const char *chat_template;
} tw_load_opts;

void tw_load_opts_init(tw_load_opts *o);

/* Loads a GGUF file or a Hugging Face directory at path and serves it as name
 * (NULL or "": derived from the path's last component). Blocks the calling
 * thread for the whole load; requests keep running meanwhile. ALREADY_EXISTS
 * when the name is taken. On success *info (may be NULL) describes it. */
tw_status tw_engine_load_model(tw_engine *e, const char *path, const char *name,
                               const tw_load_opts *opts, tw_engine_model_info *info, tw_err *err);

/* Removes the model from the name table at once (new requests naming it get
 * NOT_FOUND); requests already running on it end with TW_FINISH_CANCELLED and
 * its memory is freed once they have. NOT_FOUND when no model has the name.
 * When the default model is unloaded there is no default until another load
 * or tw_engine_set_default_model. */
tw_status tw_engine_unload_model(tw_engine *e, const char *name, tw_err *err);

/* Every model the engine knows, in load order, in a malloc'd array *out of *n
 * entries (free() it; NULL when n is 0). */
tw_status tw_engine_list_models(tw_engine *e, tw_engine_model_info **out, size_t *n, tw_err *err);

/* One model (NULL or "": the default). NOT_FOUND when absent. */
tw_status tw_engine_get_model(tw_engine *e, const char *name, tw_engine_model_info *out,
                               tw_err *err);

tw_status tw_engine_set_default_model(tw_engine *e, const char *name, tw_err *err);

/* ---------------------------------------------------------------- requests */

/* One tool call (ToolCall). */
typedef struct tw_tool_call {
    const char *id;
    const char *name;
    const char *arguments_json; /* JSON text */
} tw_tool_call;

/* One message of a conversation (ChatMessage); NULL strings are absent. */
typedef struct tw_chat_message {
    const char *role; /* "system", "user", "assistant", "tool" */
    const char *content;
    const char *reasoning_content;
    const tw_tool_call *tool_calls;
    size_t n_tool_calls;
    const char *tool_call_id;
    const char *name;
} tw_chat_message;

/* A tool the model may call (Tool). */
typedef struct tw_tool {
    const char *name;
    const char *description;
    const char *parameters_json; /* JSON Schema text; must parse */
} tw_tool;

/* A conversation to render with the model's chat template (ChatInput). */
typedef struct tw_chat_input {
    const tw_chat_message *messages;
    size_t n_messages;
    const tw_tool *tools;
    size_t n_tools;
    bool add_generation_prompt; /* default true */
    const char *tool_choice;    /* "auto", "none", "required" or a name; NULL: auto */
} tw_chat_input;

typedef enum tw_prompt_kind {
    TW_PROMPT_TOKENS = 0,
    TW_PROMPT_TEXT = 1,
    TW_PROMPT_CHAT = 2,
} tw_prompt_kind;

typedef enum tw_cache_mode {
    TW_CACHE_USE = 0,
    TW_CACHE_READ_ONLY = 1,
    TW_CACHE_BYPASS = 2,
    TW_CACHE_WRITE_ONLY = 3,
} tw_cache_mode;

/* How a request uses the prompt caches. USE restores the longest cached
 * prefix of the prompt (memory, then the persistent store) and caches what
 * its prefill computes; READ_ONLY only restores, WRITE_ONLY only caches,
 * BYPASS does neither. persist also saves the prompt's state (up to its
 * last whole 64-token block) to the persistent store. session_key is
 * accepted and not used yet. Output is the same in every mode. */
typedef struct tw_cache_opts {
    tw_cache_mode mode;
    const char *session_key;
    bool persist;
} tw_cache_opts;

typedef enum tw_spec_mode {
    TW_SPEC_AUTO = 0,
    TW_SPEC_OFF = 1,
    TW_SPEC_LOOKUP = 2,
    TW_SPEC_DRAFT = 3,
} tw_spec_mode;

/* Speculative decoding of a request (tw/spec.h). OFF never speculates.
 * LOOKUP proposes from the prompt and output so far; DRAFT uses the model's
 * draft model (FAILED_PRECONDITION at submit when it has none). AUTO (the
 * default) speculates only for greedy requests, whose output speculation
 * cannot change, with the draft model when there is one and prompt lookup
 * otherwise, and pauses while the measured speed-up is below 1. Requests
 * asking for log-probabilities decode without speculation.
 * max_draft_tokens bounds the adaptive draft length (0: 8; at most
 * TW_SPEC_MAX_DRAFT). */
typedef struct tw_spec_opts {
    tw_spec_mode mode;
    uint32_t max_draft_tokens;
} tw_spec_opts;

typedef struct tw_logprob_opts {
    bool enabled;          /* a log-probability per generated token */
    uint32_t top_logprobs; /* 0..TW_MAX_TOP_LOGPROBS alternatives per position */
    bool prompt_logprobs;  /* also each prompt token's, given the tokens before it (with
                              top_logprobs alternatives); the prompt is then read whole,
                              not restored from the caches, by choice 0 holding
                              TW_PREFILL_GROUP rows of logits (64 x vocab floats) */
} tw_logprob_opts;

/* What shape the answer must take (OutputFormat). JSON answers are
 * constrained token by token: each step the tokens that cannot continue a
 * valid document are banned before sampling, and the end-of-turn tokens are
 * allowed only once the document is whole (tw/json_grammar.h says which
 * schemas are understood). Reasoning inside a thinking block is not
 * constrained; the answer after it is. Speculation keeps to the grammar
 * (each verified row is masked). With tools under tool_choice "auto" and a
 * template whose calls open with a tag (Hermes <tool_call>, Mistral
 * [TOOL_CALLS]), the answer may open a call instead of the document. */
typedef enum tw_output_format {
    TW_OUTPUT_TEXT = 0,   /* no constraint (default) */
    TW_OUTPUT_JSON = 1,   /* a JSON document: any object, or one that fits json_schema */
    TW_OUTPUT_CHOICE = 2, /* exactly one of choices, as raw text */
} tw_output_format;

typedef struct tw_format_opts {
    tw_output_format kind;
    const char *json_schema; /* UTF-8 JSON Schema; NULL or "": any JSON object */
    size_t json_schema_len;
    const char *const *choices; /* TW_OUTPUT_CHOICE: 1 to 64 non-empty UTF-8 texts */
    size_t n_choices;
} tw_format_opts;

/* Embeddings: the prompt is read and its final-normed hidden states (what
 * the logits are made from) pooled into one vector, and nothing is
 * generated. LAST takes the last prompt token's (decoder embedding models
 * such as Qwen3-Embedding are trained for it; their tokenizer's EOS, added
 * with add_special_tokens, ends the prompt), MEAN the average of every
 * token's (the prompt is then read whole, past the caches), MODEL the one
 * the model's files name (tw_model_info.pooling; when they name none, LAST
 * for a decoder and MEAN for an encoder; FAILED_PRECONDITION when they name
 * one this engine does not compute), CLS the first token's (an encoder's
 * [CLS]; refused for a decoder, whose first state sees that token alone).
 * An encoder reads the whole prompt in one pass, past the caches, and
 * serves embeddings only. normalize scales the vector to unit length, as
 * OpenAI's embeddings are. */
typedef enum tw_pooling {
    TW_POOLING_NONE = 0, /* not an embedding request: an answer is generated */
    TW_POOLING_LAST = 1,
    TW_POOLING_MEAN = 2,
    TW_POOLING_MODEL = 3,
    TW_POOLING_CLS = 4,
} tw_pooling;

typedef struct tw_embed_opts {
    tw_pooling pooling;
    bool normalize;
} tw_embed_opts;

/* A generation request (GenerateRequest); start from tw_gen_request_init(),
 * which sets every default, then fill what the caller asked for. Everything
 * is borrowed during tw_engine_submit only. */
typedef struct tw_gen_request {
    const char *model; /* NULL or "": the default model */

    tw_prompt_kind prompt_kind;
    const uint32_t *prompt_ids; /* TW_PROMPT_TOKENS */
    size_t n_prompt_ids;
    const char *prompt_text;    /* TW_PROMPT_TEXT: UTF-8 */
    size_t prompt_text_len;
    tw_chat_input chat;         /* TW_PROMPT_CHAT */
    bool add_special_tokens;    /* text prompts: add BOS when the model uses one (default true) */

    tw_sampling_params sampling;
    tw_stop_params stop;
    tw_thinking_opts thinking;
    tw_cache_opts cache;
    tw_spec_opts speculative;
    tw_logprob_opts logprobs;
    tw_format_opts format;
    tw_embed_opts embed; /* pooling set: an embedding (n 1, a text answer format) */

    uint32_t n;                /* choices (default 1); choice i uses seed + i */
    uint64_t deadline_unix_ms; /* 0: none; CLOCK_REALTIME milliseconds */
} tw_gen_request;

void tw_gen_request_init(tw_gen_request *r);

/* Token counts and timings (Usage). */
typedef struct tw_usage {
    uint32_t prompt_tokens;        /* per choice prompt, counted once */
    uint32_t completion_tokens;    /* generated, reasoning and forced tokens included */
    uint32_t reasoning_tokens;     /* of completion_tokens */
    uint32_t cached_prompt_tokens;
    uint64_t time_to_first_token_us; /* from submit to the first generated token */
    uint64_t prefill_us;
    uint64_t decode_us;
    uint32_t drafted_tokens;
    uint32_t accepted_tokens;
} tw_usage;

/* A token's log-probability with its alternatives. Token text is given as
 * bytes of the vocabulary entry (may be part of a UTF-8 sequence). */
typedef struct tw_token_logprob {
    uint32_t token_id;
    float logprob;
    const char *text; /* may be NULL when the model has no tokenizer */
    size_t text_len;
    /* a reasoning token (or think tag) that separate_reasoning keeps out of
     * the answer's text */
    bool reasoning;
    uint32_t n_top;
    tw_top_logprob top[TW_MAX_TOP_LOGPROBS];
} tw_token_logprob;

/* One piece of output for one choice (StreamChunk). Every pointer is valid
 * only during the callback; copy what must outlive it. */
typedef struct tw_gen_chunk {
    uint64_t req_id;
    uint32_t index;                /* choice 0..n-1 */
    const uint32_t *token_ids;     /* produced since the previous chunk of this choice
                                      (reasoning and forced tokens included, stop tokens not) */
    size_t n_token_ids;
    const tw_token_logprob *logprobs; /* parallel to token_ids when requested, else NULL */
    /* prompt_logprobs: on the first chunk of each choice, one per prompt
     * token; the first token has no log-probability (NaN, no alternatives) */
    const tw_token_logprob *prompt_logprobs;
    size_t n_prompt_logprobs;
    const char *text_delta;        /* answer text, whole UTF-8 only; never retracted */
    size_t text_len;
    const char *reasoning_delta;   /* reasoning text (separate_reasoning only) */
    size_t reasoning_len;

    tw_finish_reason finish_reason; /* set on the last chunk of this choice */
    const char *matched_stop;       /* the stop string, when one matched */
    bool thinking_forced_close;     /* on the last chunk: the controller closed the block */
    tw_force_close forced_by;       /* budget or loop */
    tw_transition_kind transition;  /* what was injected when forced_by is LOOP */

    /* an embedding request's vector (model info hidden floats), on its
     * last chunk */
    const float *embedding;
    size_t n_embedding;

    bool final;                    /* the very last chunk of the request */
    const tw_usage *usage;         /* on the final chunk: summed over the choices */
    tw_status error;               /* on the final chunk: TW_OK, or why it failed */
    const char *error_msg;         /* "" when error is TW_OK */
} tw_gen_chunk;

/* Called on the engine's scheduler thread for every chunk. It must return
 * quickly and must not block (copy the data, hand it to another thread, or
 * publish it on a non-blocking socket): every running request waits while it
 * runs. It may call tw_engine_cancel and tw_engine_stats, but not
 * tw_engine_submit with a blocking wait, tw_engine_unload_model or
 * tw_engine_destroy. */
typedef void (*tw_chunk_fn)(void *user, const tw_gen_chunk *chunk);

typedef struct tw_gen_callbacks {
    tw_chunk_fn on_chunk;
} tw_gen_callbacks;

/* Validates and deep-copies req, resolves the model, tokenizes the prompt
 * (text and chat prompts, on the calling thread) and queues the request.
 * On success *req_id (engine-wide unique, never 0) identifies it and the
 * callback contract above applies. Errors: INVALID_ARGUMENT (bad parameters,
 * empty or too long prompt, text prompt for a model without tokenizer),
 * NOT_FOUND (no such model / no default model), RESOURCE_EXHAUSTED (queue
 * full, or the request needs more sequence memory than the whole memory
 * budget), FAILED_PRECONDITION (engine
 * shutting down). A request that fits the budget but not the memory left
 * now waits in the queue. Never blocks on the scheduler. */
tw_status tw_engine_submit(tw_engine *e, const tw_gen_request *req, const tw_gen_callbacks *cb,
                           void *user, uint64_t *req_id, tw_err *err);

/* Asks the request to end with TW_FINISH_CANCELLED. Returns true when the
 * request was queued or running (its final chunk follows, from the scheduler
 * thread, possibly before this returns), false when it is unknown or already
 * finished. Never blocks on the scheduler. */
bool tw_engine_cancel(tw_engine *e, uint64_t req_id);

/* ----------------------------------------------------------------- helpers */

/* Text to token ids with the model's tokenizer. add_special adds BOS when the
 * model uses one; parse_special recognises special-token text. *ids (free())
 * holds *n ids. FAILED_PRECONDITION when the model has no tokenizer. */
tw_status tw_engine_tokenize(tw_engine *e, const char *model, const char *text, size_t len,
                             bool add_special, bool parse_special, uint32_t **ids, size_t *n,
                             tw_err *err);

/* The bytes of one vocabulary entry as the detokenizer would output them,
 * copied into buf (cap bytes; *len is the full length even when cut). */
tw_status tw_engine_token_piece(tw_engine *e, const char *model, uint32_t id, char *buf,
                                size_t cap, size_t *len, tw_err *err);

/* Token ids to text; invalid UTF-8 from partial sequences becomes U+FFFD.
 * *text (free()) is NUL-terminated, *len excludes the NUL. Ids outside the
 * vocabulary: INVALID_ARGUMENT. */
tw_status tw_engine_detokenize(tw_engine *e, const char *model, const uint32_t *ids, size_t n,
                               bool skip_special, char **text, size_t *len, tw_err *err);

/* Renders chat with the model's template as the engine would for a chat
 * prompt. *text (free()) is NUL-terminated. FAILED_PRECONDITION when the
 * model has no template; INVALID_ARGUMENT when the template refuses the
 * conversation (its message is passed on). */
tw_status tw_engine_apply_chat_template(tw_engine *e, const char *model,
                                        const tw_chat_input *chat, tw_think_mode thinking,
                                        char **text, size_t *len, tw_err *err);

/* ------------------------------------------------------------------- stats */

/* Engine counters since start (StatsReply), for one model or all. */
typedef struct tw_engine_stats {
    uint64_t requests_total;
    uint64_t requests_failed;
    uint32_t requests_running;
    uint32_t requests_queued;
    uint64_t prompt_tokens_total;
    uint64_t generated_tokens_total;
    uint64_t cached_tokens_total;
    /* ... of them read from the prefix cache's own pages, mapped into the
     * sequence instead of copied (tw/prefix_cache.h) */
    uint64_t cached_tokens_shared;
    uint64_t prefix_cache_hits, prefix_cache_lookups;
    uint64_t state_store_hits, state_store_lookups;
    uint64_t spec_drafted, spec_accepted;
    float spec_speedup;
    /* Mean time per verification round spent saving and restoring sequence
     * state (draft snapshots and rewinds), microseconds; 0: no round yet. */
    float spec_snapshot_us_per_verify;
    uint64_t thinking_budget_closes;
    uint64_t thinking_loop_closes;
    uint64_t thinking_transitions[TW_TRANSITION_COUNT]; /* by tw_transition_kind */
    float decode_tokens_per_s;  /* over the last minute */
    float prefill_tokens_per_s;
    uint64_t kv_bytes;      /* sequence memory: mem_reserved_bytes + mem_pooled_bytes */
    uint64_t state_bytes;
    uint64_t uptime_s;
    uint32_t models_ready;
    uint64_t prefix_cache_bytes;  /* memory held by prefix caches */
    uint64_t state_store_bytes;   /* persistent store size on disk (engine-wide) */
    uint64_t state_store_entries;
    /* Admission by memory (tw_engine_opts.mem_budget_bytes): the budget,
     * what running requests reserve, and idle sequences kept for reuse
     * (dropped first when a request needs the room). kv_bytes above is
     * their sum. */
    uint64_t mem_budget_bytes;
    uint64_t mem_reserved_bytes;
    uint64_t mem_pooled_bytes;
} tw_engine_stats;

/* Fills *out for model (NULL or "": all models summed). NOT_FOUND for an
 * unknown name. */
tw_status tw_engine_stats_get(tw_engine *e, const char *model, tw_engine_stats *out,
                              tw_err *err);

#endif
