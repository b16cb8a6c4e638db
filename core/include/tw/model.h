/* A loaded language model, the sequences it runs, and the forward pass.
 *
 * One representation serves every family (Llama 3.x, Mistral, Qwen2/2.5,
 * Qwen3, Qwen3.5 dense and MoE, Gemma 3): a stack of layers, each a mixer
 * (attention or Gated DeltaNet) followed by a dense or MoE feed-forward
 * block. A model loads from a Hugging Face checkpoint directory
 * (config.json + *.safetensors) or from a single .gguf file; weights keep
 * their stored type and are computed on through the kernels in tw/kernels.h.
 *
 * Threading: a tw_model is immutable after loading except for its scratch
 * buffers, so tw_model_forward() and tw_model_decode_batch() must not run
 * concurrently on the same model (the scheduler serialises them). Functions
 * that take only a tw_seq or a tw_snapshot_pool touch nothing else, so
 * different sequences may be managed from different threads as long as no
 * forward pass is using them at the same moment. The parallelism inside one
 * forward pass comes from the tw_pool passed in.
 *
 * Memory: everything a forward pass needs is allocated when the model,
 * a sequence or a snapshot pool is created; the per-token path allocates
 * nothing.
 */
#ifndef TW_MODEL_H
#define TW_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/status.h"
#include "tw/tensor.h"

typedef struct tw_pool tw_pool; /* thread pool, tw/pool.h */

typedef struct tw_model tw_model;
typedef struct tw_seq tw_seq;
typedef struct tw_snapshot_pool tw_snapshot_pool;

/* Load-time choices. Zero-initialise and set what you need; every zero field
 * takes the default in brackets. */
/* Where a GGUF model's weights live (HF checkpoints always use their file
 * mappings). */
typedef enum tw_weight_pages {
    /* Huge pages when the kernel's transparent-huge-page mode is "always" or
     * "madvise" and the file takes at most half of the available memory,
     * else the file mapping. */
    TW_WEIGHTS_AUTO = 0,
    /* The file mapping: shared with the page cache, no copy, 4 KiB pages. */
    TW_WEIGHTS_MAP,
    /* A private copy marked for transparent huge pages: decode streams every
     * weight once per token, and 2 MiB pages spare it a TLB miss every
     * 4 KiB (decode of a 0.4 GB model measured 10% faster). */
    TW_WEIGHTS_HUGE,
} tw_weight_pages;

/* How sequences store attention K/V. */
typedef enum tw_kv_type {
    /* The projections' f32 values as computed. */
    TW_KV_F32 = 0,
    /* IEEE half, rounded to nearest even: half the memory per token, and
     * half the bytes a long context's attention reads per step. */
    TW_KV_F16,
} tw_kv_type;

/* The placement rule, exposed for tests: with TW_WEIGHTS_HUGE a copy that
 * does not fit in mem_available is RESOURCE_EXHAUSTED; with
 * TW_WEIGHTS_AUTO weights go to huge pages when thp is true and the file
 * takes at most half of mem_available; TW_WEIGHTS_MAP never copies.
 * mem_available 0 means unknown (no limit). */
tw_status tw_weights_placement(tw_weight_pages mode, bool thp, uint64_t file_bytes,
                               uint64_t mem_available, bool *huge, tw_err *err);

typedef struct tw_model_opts {
    /* Longest sequence any tw_seq of this model may hold
     * [min(max_position_embeddings, 8192)]. */
    size_t max_context;
    /* Most sequences one tw_model_decode_batch() call may carry [16]. */
    size_t max_batch;
    /* Most tokens one prefill step processes at once; longer inputs to
     * tw_model_forward() are split into steps of this size [256]. */
    size_t max_chunk;
    /* Where the weights live [TW_WEIGHTS_AUTO]. */
    tw_weight_pages weight_pages;
    /* How sequences store K/V [TW_KV_F32]. */
    tw_kv_type kv_type;
    /* Matrices stored as f32, f16 or bf16 (a Hugging Face checkpoint's) are
     * quantized to this type as the model loads: Q8_0, Q4_0, Q4_K or Q6_K,
     * the matrices and bits tw-convert would write; a matrix whose rows are
     * not whole blocks of it stays as stored. [TW_TYPE_F32: as stored] */
    tw_type quantize;
} tw_model_opts;

#define TW_MODEL_MAX_EOS 8

/* How a model's files say its embeddings pool the final hidden states: a
 * GGUF's <arch>.pooling_type (llama.cpp's values, in order, after UNSAID),
 * or the "tw_pooling" key of a config.json. */
typedef enum tw_model_pooling {
    TW_MODEL_POOLING_UNSAID = 0, /* the files name none */
    TW_MODEL_POOLING_NONE = 1,   /* a vector per token, not pooled */
    TW_MODEL_POOLING_MEAN = 2,
    TW_MODEL_POOLING_CLS = 3, /* the first token's state */
    TW_MODEL_POOLING_LAST = 4,
    TW_MODEL_POOLING_RANK = 5, /* a reranker's score */
} tw_model_pooling;

/* "unsaid", "none", "mean", "cls", "last" or "rank". */
const char *tw_model_pooling_name(tw_model_pooling p);

/* What a loaded model is. Strings live as long as the model. */
typedef struct tw_model_info {
    const char *architecture; /* HF class, e.g. "Qwen3ForCausalLM" */
    const char *model_type;   /* HF model_type, e.g. "qwen3" */
    uint32_t vocab_size;
    uint32_t hidden;
    uint32_t n_layers;
    size_t max_context; /* the effective limit after tw_model_opts */
    int64_t bos_id;     /* -1 when the config names none */
    size_t n_eos;       /* config may list several end tokens */
    int64_t eos_ids[TW_MODEL_MAX_EOS];
    uint64_t n_params;
    tw_type weight_type; /* the type holding most parameters */
    bool huge_pages;     /* the weights were read into huge-page memory */
    /* An embedding table of its own (untied) is read a row at a time from
     * the file's page cache instead of the huge-page copy, so only the rows
     * read take memory. */
    bool embed_from_file;
    bool recurrent;      /* has DeltaNet layers: see tw_seq_truncate() */
    tw_kv_type kv_type;  /* how its sequences store K/V */
    tw_model_pooling pooling; /* how its embeddings pool, as its files say */
    /* An encoder (BERT and its kin): it reads a whole input at once, each
     * token seeing every other, and gives hidden states to pool into an
     * embedding (tw_model_encode); it predicts no token, so the sequence
     * calls below refuse it. */
    bool encoder;
} tw_model_info;

/* Loads a model from `path`: a directory holding config.json and
 * model.safetensors (or a sharded model.safetensors.index.json), or a .gguf
 * file. opts may be NULL for defaults. On success *out owns the model (free
 * with tw_model_free); weight files stay memory-mapped for its lifetime.
 * Blocking (reads the files). Fails with INVALID_ARGUMENT / NOT_FOUND /
 * DATA_LOSS / UNIMPLEMENTED (unknown family) and a message. */
tw_status tw_model_load(const char *path, const tw_model_opts *opts, tw_model **out,
                        tw_err *err);

/* Frees a model. Every tw_seq and tw_snapshot_pool of it must be freed
 * first. NULL is a no-op. */
void tw_model_free(tw_model *model);

/* The model's description; valid while the model lives. */
const tw_model_info *tw_model_get_info(const tw_model *model);

/* Writes the model's fingerprint, 64 lowercase hex digits and a NUL, into
 * out: SHA-256 over the architecture metadata, per tensor its name, type,
 * shape and a sample of its bytes, and the K/V type when it is not f32
 * (state computed through half-precision K/V is not what an f32 cache
 * would hold), so cached state is never reused with another model. Computed on first call and remembered; the first call
 * reads weight pages and is not safe to race with another first call. */
tw_status tw_model_fingerprint(tw_model *model, char out[65], tw_err *err);

/* ---- sequences ---------------------------------------------------------- */

/* Creates an empty sequence that can hold up to max_tokens tokens (0 means
 * the model's max_context; larger than max_context is INVALID_ARGUMENT).
 * Preallocates its whole state: K/V for every attention layer and, for
 * DeltaNet layers, the recurrent state and the conv1d window. The sequence
 * refers to the model, which must outlive it. */
tw_status tw_seq_create(tw_model *model, size_t max_tokens, tw_seq **out, tw_err *err);

/* Frees a sequence; NULL is a no-op. */
void tw_seq_free(tw_seq *seq);

/* Tokens the sequence holds (its next position). */
size_t tw_seq_len(const tw_seq *seq);

/* The max_tokens it was created with. */
size_t tw_seq_capacity(const tw_seq *seq);

/* Empties the sequence (length 0, recurrent state zeroed). O(state size of
 * the recurrent layers); KV memory is simply reused. */
void tw_seq_reset(tw_seq *seq);

/* Shortens the sequence to n tokens. Attention state is cut by length, but a
 * recurrent state cannot be rewound, so on a model with DeltaNet layers
 * (info.recurrent) this fails with FAILED_PRECONDITION unless n equals the
 * current length or 0; rewind those with tw_seq_restore() instead.
 * n greater than the length is OUT_OF_RANGE. */
tw_status tw_seq_truncate(tw_seq *seq, size_t n, tw_err *err);

/* A preallocated set of n_slots snapshot slots for sequences of `model`.
 * A slot holds a sequence's length and its recurrent state (DeltaNet state
 * and conv window), never KV: the KV entries below the snapshot length stay
 * in the sequence and are restored by length. Free with
 * tw_snapshot_pool_free before the model. */
tw_status tw_snapshot_pool_create(tw_model *model, size_t n_slots, tw_snapshot_pool **out,
                                  tw_err *err);

void tw_snapshot_pool_free(tw_snapshot_pool *pool);

/* Records seq's current state into `slot` (overwriting it). Cost is the
 * recurrent state size, independent of sequence length. */
tw_status tw_seq_snapshot(const tw_seq *seq, tw_snapshot_pool *pool, size_t slot,
                          tw_err *err);

/* Returns seq to the state recorded in `slot`. Only the sequence that took
 * the snapshot can be restored from it, and only while its KV entries below
 * the snapshot length are untouched (they are, unless the sequence was cut
 * below that length and refilled since); otherwise FAILED_PRECONDITION and
 * the sequence is unchanged. Cost: the recurrent state size plus a scan of
 * one stamp per position. */
tw_status tw_seq_restore(tw_seq *seq, const tw_snapshot_pool *pool, size_t slot,
                         tw_err *err);

/* ---- forward pass ------------------------------------------------------- */

typedef enum tw_logits_mode {
    TW_LOGITS_NONE = 0, /* only advance the state */
    TW_LOGITS_LAST = 1, /* logits of the last token: vocab_size floats */
    TW_LOGITS_ALL = 2,  /* logits of every token: n x vocab_size floats */
    /* the final-normed hidden state the logits are made from (embeddings) */
    TW_HIDDEN_LAST = 3, /* of the last token: hidden floats */
    TW_HIDDEN_ALL = 4,  /* of every token: n x hidden floats */
} tw_logits_mode;

/* Appends n tokens to seq and runs them through the model (a prefill when
 * n > 1, processed in steps of at most max_chunk tokens with matrix-matrix
 * kernels). A step holds whole groups of TW_PREFILL_GROUP positions or the
 * part of one group, so with max_chunk >= TW_PREFILL_GROUP a prompt read in
 * calls that end on group boundaries gives every logit the bits of one call
 * (what a restored cache prefix relies on).
 * Writes logits as `mode` says (logits may be NULL only with
 * TW_LOGITS_NONE). pool may be NULL to compute on the calling thread, row by
 * row: slower, and a prompt's logits may then differ in the last bits from a
 * pool's (which are the same at every pool size).
 * Checks everything before touching the sequence: a token id >= vocab_size
 * is INVALID_ARGUMENT, len + n > capacity is OUT_OF_RANGE, and in both cases
 * seq is unchanged. Blocking; not concurrent with another forward pass or
 * decode step on the same model. */
tw_status tw_model_forward(tw_model *model, tw_pool *pool, tw_seq *seq, const uint32_t *tokens,
                           size_t n, float *logits, tw_logits_mode mode, tw_err *err);

/* An encoder's final hidden states for the n tokens of one input
 * (n x hidden floats into `hidden`, row i for token i), every token
 * attending to every other; token type 0 throughout. n is 1 to
 * info.max_context. Keeps no state between calls. Blocking; not concurrent
 * with another pass on the same model. FAILED_PRECONDITION for a model
 * that is not an encoder. */
tw_status tw_model_encode(tw_model *model, tw_pool *pool, const uint32_t *tokens, size_t n,
                          float *hidden, tw_err *err);

/* Most inputs, and (below an encoder's own max_context) most tokens, that
 * one tw_model_encode_batch call takes. */
#define TW_ENCODE_MAX_INPUTS 64
#define TW_ENCODE_BATCH_ROWS 512

/* tw_model_encode of k inputs in one pass over the weights: input i is
 * n[i] tokens at tokens[i] (1 to info.max_context), its states go to
 * hidden[i]. Each input attends to itself alone; its states agree with
 * tw_model_encode's to rounding (the products over more rows may take
 * other kernels). k is 1 to TW_ENCODE_MAX_INPUTS and the n[i] sum to at
 * most tw_model_encode_rows(). */
tw_status tw_model_encode_batch(tw_model *model, tw_pool *pool, size_t k,
                                const uint32_t *const *tokens, const size_t *n,
                                float *const *hidden, tw_err *err);

/* The most tokens one tw_model_encode_batch call takes (0: not an encoder). */
size_t tw_model_encode_rows(const tw_model *model);

/* One decode step for n_seqs distinct sequences at once: appends tokens[i]
 * to seqs[i] and writes its next-token logits to row i of `logits`
 * (n_seqs x vocab_size floats). The weights are read once for the whole
 * batch. n_seqs must be 1..max_batch. Same validation and atomicity as
 * tw_model_forward(): on error no sequence changes. */
tw_status tw_model_decode_batch(tw_model *model, tw_pool *pool, tw_seq *const *seqs,
                                const uint32_t *tokens, size_t n_seqs, float *logits,
                                tw_err *err);

/* Speculative verification: appends n tokens to seq like tw_model_forward
 * with TW_LOGITS_ALL (n x vocab_size floats into logits), but computes every
 * token exactly as n successive single-sequence tw_model_decode_batch steps
 * would, so the logits are bit-identical to plain decoding, and records into
 * slots 0..n-1 of `trail` what it takes to return to the state after each
 * token. Afterwards the sequence holds all n tokens; tw_seq_restore(seq,
 * trail, i) cuts it back to the first i + 1 of them, which is how rejected
 * draft tokens are undone on recurrent (DeltaNet) models as well as on
 * attention-only ones. The recurrent layers step in place as decoding does;
 * the trail keeps the state before the pass (one copy of the recurrent
 * state) and each token's recurrent inputs (a few KiB per layer), and a
 * rewind to token i copies that state back and replays tokens 0..i through
 * the recurrence, exactly. The slots stay valid until the next pass that
 * uses the trail or a tw_seq_snapshot into one of slots 0..i; after either,
 * restoring them is FAILED_PRECONDITION. n must be 1..min(max_batch,
 * max_chunk) and at most
 * the pool's slot count; errors leave seq unchanged (same validation as
 * tw_model_forward). Blocking; not concurrent with another forward pass on
 * the model. */
tw_status tw_model_verify(tw_model *model, tw_pool *pool, tw_seq *seq, const uint32_t *tokens,
                          size_t n, float *logits, tw_snapshot_pool *trail, tw_err *err);

/* tw_model_verify for several sequences in one pass, so speculating
 * sequences share the weight reads of a decode step: sequence i takes
 * n_rows[i] consecutive tokens from `tokens` (which holds the sum of
 * n_rows) and gets as many logits rows, in order. With trails[i] set its
 * rows are verified as tw_model_verify does (states into slots
 * 0..n_rows[i]-1, the sequence holding all the rows afterwards); with
 * trails[i] NULL it takes exactly one row, a plain decode step. With at most
 * TW_MATMUL_EXACT_ROWS rows in all, every row's logits are bit-identical to
 * those of the single-sequence calls. The rows
 * together must be at most min(max_batch, max_chunk); sequences, and their
 * trails, must be distinct. Validation as tw_model_verify; errors change nothing. Blocking;
 * not concurrent with another forward pass on the model. */
tw_status tw_model_verify_batch(tw_model *model, tw_pool *pool, size_t n_seqs,
                                tw_seq *const *seqs, const uint32_t *tokens, const size_t *n_rows,
                                tw_snapshot_pool *const *trails, float *logits, tw_err *err);

/* The largest n tw_model_verify accepts for this model (before the snapshot
 * pool's own limit): min(max_batch, max_chunk). */
size_t tw_model_max_verify(const tw_model *model);

#endif
