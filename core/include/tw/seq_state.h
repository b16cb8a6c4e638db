/* A sequence's state outside the sequence: whole-state export/import as a
 * byte blob (what the persistent state store keeps), and the finer
 * row-level access the in-memory prefix cache needs.
 *
 * A sequence's state at length n is (a) the K/V rows [0, n) of every
 * attention layer and (b) for a model with Gated DeltaNet layers, the
 * recurrent state and conv window of every such layer. (b) only describes
 * the sequence at its current length, so a recurrent model can be exported
 * at n == tw_seq_len() only.
 *
 * Threading: as for tw_seq in tw/model.h; none of these may run while a
 * forward pass uses the sequence. Nothing here allocates.
 */
#ifndef TW_SEQ_STATE_H
#define TW_SEQ_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/model.h"
#include "tw/status.h"

typedef enum tw_seq_state_format {
    /* K/V rows as stored (f32): import then continue gives bit-identical
     * logits to never having left. */
    TW_SEQ_STATE_F32 = 0,
    /* K/V rows as blocks of 32 int8 values with one f32 scale (about 3.6x
     * smaller); lossy, so continuing may differ slightly. Recurrent state is
     * always kept in f32. */
    TW_SEQ_STATE_Q8 = 1,
    /* K/V rows as IEEE half: exact for a sequence that stores half-precision
     * K/V (tw_model_opts.kv_type), half the bytes of f32; rounds f32 K/V.
     * Recurrent state is always kept in f32. */
    TW_SEQ_STATE_F16 = 2,
} tw_seq_state_format;

/* Bytes tw_seq_state_export() writes for n tokens of a sequence of `model`
 * in `fmt`. INVALID_ARGUMENT for an unknown format, RESOURCE_EXHAUSTED when
 * the size overflows. */
tw_status tw_seq_state_size(const tw_model *model, size_t n, tw_seq_state_format fmt,
                            size_t *bytes, tw_err *err);

/* Serialises seq's state at n tokens into buf (cap bytes; needs
 * tw_seq_state_size()). n > length is OUT_OF_RANGE; on a recurrent model n
 * must equal the length (FAILED_PRECONDITION otherwise). The blob carries a
 * header with its geometry, so an import into another model's sequence is
 * refused. *written (may be NULL) gets the byte count. */
tw_status tw_seq_state_export(const tw_seq *seq, size_t n, tw_seq_state_format fmt, void *buf,
                              size_t cap, size_t *written, tw_err *err);

/* Replaces seq's whole state with the one in blob (len bytes, untrusted):
 * afterwards tw_seq_len(seq) is the blob's token count. Every field is
 * checked against the sequence's model and capacity before anything is
 * touched: a blob of another geometry or a damaged one is DATA_LOSS /
 * INVALID_ARGUMENT and seq is unchanged; a token count above the capacity
 * is OUT_OF_RANGE. *n_tokens (may be NULL) gets the restored length. */
tw_status tw_seq_state_import(tw_seq *seq, const void *blob, size_t len, size_t *n_tokens,
                              tw_err *err);

/* The token count recorded in a blob, read from its header only (untrusted
 * input: DATA_LOSS when the header is short or has a bad magic). */
tw_status tw_seq_state_peek(const void *blob, size_t len, size_t *n_tokens, tw_err *err);

/* ---- row-level access (the prefix cache) --------------------------------- */

/* Floats of K/V one token position holds across every attention layer
 * (0 on a model without attention layers). */
size_t tw_seq_kv_floats_per_token(const tw_model *model);

/* Bytes of K/V one token position takes in a sequence: the floats above at
 * the model's K/V type (tw_model_opts.kv_type). */
size_t tw_seq_kv_bytes_per_token(const tw_model *model);

/* Floats of the recurrent state (DeltaNet state + conv window of every
 * DeltaNet layer); 0 on a pure-attention model. */
size_t tw_seq_recurrent_floats(const tw_model *model);

/* Copies the K/V of positions [pos, pos + n) into dst as the sequence
 * stores them (f32 or half, see tw_model_opts.kv_type), laid out
 * [attention layer][K, V][kv head][n][head_dim]
 * (n * tw_seq_kv_bytes_per_token() bytes). pos + n beyond the length is
 * OUT_OF_RANGE. */
tw_status tw_seq_kv_read(const tw_seq *seq, size_t pos, size_t n, void *dst, tw_err *err);

/* Writes K/V rows in tw_seq_kv_read()'s layout and type to positions [pos, pos + n),
 * anywhere below the capacity (pos + n beyond it is OUT_OF_RANGE). The
 * length is not changed here (see tw_seq_set_len()); snapshots that relied
 * on the overwritten rows can no longer be restored. */
tw_status tw_seq_kv_write(tw_seq *seq, size_t pos, size_t n, const void *src, tw_err *err);

/* ---- K/V rows in a file, shared by mapping (the prefix cache) ----------- */

/* K/V runs of a sequence: attention layers x (K, V) x kv heads; a
 * position's row in each is tw_seq_kv_bytes_per_token() / runs bytes. 0 on a
 * model without attention layers. */
size_t tw_seq_kv_runs(const tw_model *model);

/* The file layout of the calls below: rows [pos, pos + n) of run r (in
 * tw_seq_kv_read()'s order) at byte base + r * run_span of the file. */

/* Writes the sequence's rows [pos, pos + n) (below its length) to fd. */
tw_status tw_seq_kv_store_file(const tw_seq *seq, size_t pos, size_t n, int fd, uint64_t base,
                               uint64_t run_span, tw_err *err);

/* Copies rows [pos, pos + n) from fd into the sequence, as
 * tw_seq_kv_write() does from memory. */
tw_status tw_seq_kv_load_file(tw_seq *seq, size_t pos, size_t n, int fd, uint64_t base,
                              uint64_t run_span, tw_err *err);

/* Whether rows [pos, pos + n) of every run fall on whole pages of the
 * sequence's K/V, as tw_seq_kv_map_file() needs. */
bool tw_seq_kv_mappable(const tw_seq *seq, size_t pos, size_t n);

/* Maps rows [pos, pos + n) of fd into the sequence in place of copying
 * them (copy-on-write: the sequence reads the file's pages, and a page it
 * writes becomes its own). base and run_span must be multiples of the page
 * size; FAILED_PRECONDITION when the rows do not fall on whole pages
 * (tw_seq_kv_mappable), RESOURCE_EXHAUSTED when the process maps too many
 * already: copy them then. ABORTED when a mapping failed half way and no
 * memory could be put in its place: the sequence must be reset. The file's pages must stay as they
 * are until the sequence gives back the lease it is handed (tw_seq_kv_hold). */
tw_status tw_seq_kv_map_file(tw_seq *seq, size_t pos, size_t n, int fd, uint64_t base,
                             uint64_t run_span, tw_err *err);

/* What a sequence holds while rows mapped from a file are in its K/V:
 * release() is called once, when none is read any more (tw_seq_reset,
 * tw_seq_state_import, tw_seq_free), from the thread that made that call. */
typedef struct tw_kv_lease tw_kv_lease;
struct tw_kv_lease {
    void (*release)(tw_kv_lease *lease);
    tw_kv_lease *next; /* the sequence's own */
};

/* Hands seq a lease to give back (see above); a sequence may hold several. */
void tw_seq_kv_hold(tw_seq *seq, tw_kv_lease *lease);

/* Copies the recurrent state (tw_seq_recurrent_floats() floats) into dst. */
tw_status tw_seq_recurrent_read(const tw_seq *seq, float *dst, tw_err *err);

/* Sets the length to n after K/V rows [0, n) have been written with
 * tw_seq_kv_write(); on a recurrent model `recurrent` must hold the state
 * at exactly n tokens and is copied in (ignored otherwise, may be NULL).
 * n beyond the capacity is OUT_OF_RANGE. */
tw_status tw_seq_set_len(tw_seq *seq, size_t n, const float *recurrent, tw_err *err);

#endif
