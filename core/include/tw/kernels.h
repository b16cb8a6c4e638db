/* Compute kernels over weight rows in GGUF block layouts: conversion between
 * f32 and every tw_type, matrix-vector products for decode and matrix-matrix
 * products for prefill.
 *
 * Dispatch: each kernel exists as portable scalar C and, on x86-64, as
 * AVX2/FMA and AVX-512 variants compiled with per-function target attributes.
 * The best variant the CPU supports is chosen at run time (no -march needed);
 * tests and benchmarks can force a lower one with tw_kernels_force_isa.
 *
 * Precision: F32/F16/BF16 weights are converted to f32 in registers and
 * multiplied with f32 activations. For quantized weights (Q8_0, Q4_0, Q5_0,
 * Q5_1, Q4_K, Q5_K, Q6_K) the activation vector is first quantized to 8-bit blocks and the
 * block dot products are integer; the result differs from an f32
 * dequantize-then-dot by about the activation quantization error (~0.5%
 * relative of sum |w*x| at worst, far less typically). Every ISA variant of a
 * kernel computes the same integers, so variants differ only by float
 * summation order; for packed types (TW_TYPE_Q8_0_R8, TW_TYPE_Q4_0_R8,
 * TW_TYPE_Q5_0_R8, TW_TYPE_Q5_1_R8, TW_TYPE_Q4_K_R8, TW_TYPE_Q5_K_R8,
 * TW_TYPE_Q6_K_R8) not even by that:
 * every ISA gives the same bits. Results
 * never depend on the thread count (with a NULL pool, rows wider than 8192
 * columns are summed in column chunks, which can change the last bits
 * relative to a pool; packed rows keep theirs).
 *
 * Memory: kernels never allocate per call once warmed up. Scratch (quantized
 * activations, dequantized weight tiles for prefill) lives in the tw_pool and
 * grows on first use to the largest shape seen; call tw_kernels_reserve at
 * setup to do that allocation up front. With a NULL pool, scratch comes from
 * the stack and matmul runs as n matvecs (correct, but without BLAS).
 *
 * Thread-safety: all functions are safe to call concurrently on distinct
 * pools (or NULL pools) and distinct outputs; one pool serves one caller at a
 * time (tw/pool.h). tw_kernels_force_isa is a process-wide setting for tests.
 */
#ifndef TW_KERNELS_H
#define TW_KERNELS_H

#include <stdbool.h>
#include <stddef.h>

#include "tw/pool.h"
#include "tw/status.h"
#include "tw/tensor.h"

/* Converts n elements of a row of `type` (n a multiple of the block size)
 * to f32. The conversion is exact: every variant produces the same bits. */
void tw_dequant_row(tw_type type, const void *src, float *dst, size_t n);

/* Converts n f32 values (n a multiple of the block size) to `type` with the
 * round-to-nearest reference quantizers, producing the same bytes as ggml's
 * quantize_row_*_ref so files are interchangeable with llama.cpp. Writes
 * tw_type_row_bytes(type, n) bytes. Not a hot-path function. */
void tw_quant_row(tw_type type, const float *src, void *dst, size_t n);

/* Decode matvec: y[r] = dot(row r of W, x) for r < rows. Row r of W starts
 * at w + r * row_bytes; cols is a multiple of the block size of type. x has
 * cols floats, y has rows floats; y must not overlap w or x. Rows are split
 * across the pool. Blocks until done. */
void tw_matvec(tw_pool *pool, tw_type type, const void *w, size_t row_bytes, size_t rows,
               size_t cols, const float *x, float *y);

/* Prefill matmul: Y[i][r] = dot(row r of W, X[i]) for i < n, r < rows. X is
 * n x cols row-major, Y is n x rows row-major. Same layout rules as
 * tw_matvec. Up to 16 rows of X, and at any n for packed types (which have
 * no other path) and the types where the dispatched ISA measured it faster
 * (the K types; with AVX-512 VNNI also Q8_0 and Q4_0), it runs the integer
 * kernels of tw_matvec with each weight
 * row reused across the batch, and row i of Y is then bit-identical to
 * tw_matvec of X[i] (so batching decode steps never changes a sequence's
 * output). Otherwise, from 17 rows on, it dequantizes tiles of W to f32 and
 * multiplies with OpenBLAS sgemm inside pool tasks (f32 products, no
 * activation quantization). */
void tw_matmul(tw_pool *pool, tw_type type, const void *w, size_t row_bytes, size_t rows,
               size_t cols, const float *x, size_t n, float *y);

/* Whether tw_matmul gives row i of Y tw_matvec's bits at every n for this
 * type under the dispatched ISA and prefill path (its own kernels at every
 * batch size), so that how rows are batched can never show in the output. */
bool tw_matmul_exact(tw_type type);

/* One matrix of a tw_matmul_multi call: rows x cols weights of `type`,
 * rows row_bytes apart, and its output Y (n x rows). */
typedef struct tw_matmul_part {
    tw_type type;
    const void *w;
    size_t row_bytes;
    size_t rows;
    float *y;
} tw_matmul_part;

#define TW_MATMUL_MAX_PARTS 8

/* Y_k = X W_k^T for every part k, all sharing the input X (n x cols): the
 * same result as one tw_matmul per part, bit for bit, but where the parts
 * take the same activation quantization and run on the integer kernels
 * (any n up to 16, or types whose batches do), X is quantized once and all
 * parts run in a single pool run, which saves the per-run wake-up and
 * hand-off costs that dominate decode of small models (q/k/v, gate/up).
 * Blocking; same thread-safety as tw_matmul. Outputs must not overlap X. */
void tw_matmul_multi(tw_pool *pool, const tw_matmul_part *parts, size_t n_parts, size_t cols,
                     const float *x, size_t n);

/* Names the matrices the single-activation tw_matmul_multi (pair false)
 * or tw_matmul_pair (pair true) after the next pool run of `pool` will
 * read, so that from that run on each pool thread, whenever it waits, fetches
 * the first bytes of the rows it will read of them into its caches (fetch
 * ahead, tw_kernels_set_fetch_ahead). A decode step calls it before each
 * matrix with the one that follows. Only a hint: nothing is read, and a
 * wrong or stale one costs only the fetches. Same thread-safety as
 * tw_matmul. */
void tw_matmul_fetch_next(tw_pool *pool, const tw_matmul_part *parts, size_t n_parts, size_t cols,
                          bool pair);

/* Called by tw_matmul_pair with output rows [r0, r1) of both parts final
 * for every activation row; r0 is a multiple of 16, r1 one too or the
 * parts' row count. */
typedef void (*tw_rows_done_fn)(void *ctx, size_t r0, size_t r1);

/* tw_matmul_multi of two parts with as many rows each (a gated FFN's gate
 * and up), where each pool task computes the same rows of both and then
 * calls done on them, on whichever thread ran it: an elementwise pass over
 * the two outputs runs split across the pool with no run of its own.
 * Returns false, having computed nothing, where the parts cannot share
 * one run on the integer kernels (then the caller goes through
 * tw_matmul_multi). Blocking; same thread-safety as tw_matmul. */
bool tw_matmul_pair(tw_pool *pool, const tw_matmul_part *parts, size_t cols, const float *x,
                    size_t n, tw_rows_done_fn done, void *ctx);

/* Weights packed for the integer kernels. tw_pack_type(type) is the type a
 * matrix of `type` becomes when packed (TW_TYPE_<type>_R8 for Q8_0, Q4_0,
 * Q5_0, Q5_1, Q4_K, Q5_K and Q6_K: eight rows side by side, each output's
 * block dots summed as exact integers and scaled with one fused
 * multiply-add per block, Q5_1's offset term with a second one; for Q4_K
 * and Q5_K the scaled sub-block dots and the mins' term are two exact sums
 * scaled with three roundings per 256 columns, for
 * Q6_K its scaled sub-block dots less the offset's term one exact sum and
 * one multiply-add), or `type` itself when it has no packed
 * form. tw_pack_rows writes `rows` rows of `cols` values of
 * `type` (rows tw_type_row_bytes(type, cols) apart in src) into dst, which
 * holds as many bytes and must not overlap src; false, with nothing written,
 * when the type has no packed form or cols does not fit it. A packed matrix
 * goes to tw_matvec / tw_matmul / tw_matmul_multi whole, under the packed
 * type with the same row_bytes; its rows are not separately addressable
 * (tw_dequant_row does not read them). */
tw_type tw_pack_type(tw_type type);
bool tw_pack_rows(tw_type type, const void *src, size_t rows, size_t cols, void *dst);

/* Row r of a matrix tw_pack_rows packed (`packed` its packed type, rows
 * and cols as it was packed with) back in the bytes it had before packing:
 * tw_type_row_bytes(plain type, cols) bytes into dst. false, with nothing
 * written, when `packed` is not a packed type, cols does not fit it or r is
 * not below rows. Thread-safe; allocates nothing. */
bool tw_unpack_row(tw_type packed, const void *w, size_t rows, size_t cols, size_t r, void *dst);

/* The same row as cols floats, bit for bit what tw_dequant_row gives on
 * the row before packing; the same false cases. Thread-safe; allocates
 * nothing. */
bool tw_dequant_packed_row(tw_type packed, const void *w, size_t rows, size_t cols, size_t r,
                           float *dst);

/* Allocates the pool scratch needed for tw_matvec/tw_matmul calls with up to
 * max_cols columns and up to max_n activation rows, so those calls later
 * allocate nothing. Optional: without it, scratch grows on first use. */
tw_status tw_kernels_reserve(tw_pool *pool, size_t max_cols, size_t max_n, tw_err *err);

/* f32 dot product of n elements (any n), using the dispatched ISA. */
float tw_dot_f32(const float *a, const float *b, size_t n);

/* Attention scores: out[i] = dot(q, K + i * d) for i < n (rows of K d
 * floats apart). A key's score is the same whatever n is and wherever the
 * key sits in K. Pure function; thread-safe; allocates nothing. */
void tw_dot_rows_f32(const float *q, const float *K, size_t n, size_t d, float *out);

/* Weighted sum of value rows: acc[j] += sum_{i<n} p[i] * V[i * d + j],
 * rows added in order of i. Pure function of its inputs (acc read and
 * written); thread-safe; allocates nothing. */
void tw_axpy_rows_f32(const float *p, const float *V, size_t n, size_t d, float *acc);

/* tw_dot_rows_f32 for nq queries (query k at q + k * q_stride, its scores
 * at out + k * out_stride) against the same n keys, each key read once for
 * all of them. Every score has exactly tw_dot_rows_f32's bits. */
void tw_dot_rows_multi_f32(const float *q, size_t q_stride, size_t nq, const float *K, size_t n,
                           size_t d, float *out, size_t out_stride);

/* tw_axpy_rows_f32 for nq weight vectors (p + k * p_stride) into nq
 * accumulators (acc + k * acc_stride) over the same n value rows, each row
 * read once for all of them. Every output has exactly tw_axpy_rows_f32's
 * bits. */
void tw_axpy_rows_multi_f32(const float *p, size_t p_stride, size_t nq, const float *V, size_t n,
                            size_t d, float *acc, size_t acc_stride);

/* tw_dot_rows_multi_f32 and tw_axpy_rows_multi_f32 over keys / values
 * stored as IEEE half (a half-precision K/V cache): every result has
 * exactly the bits the f32 kernels give on the rows converted to f32
 * (tw_dequant_row), without a converted copy. */
void tw_dot_rows_multi_h16(const float *q, size_t q_stride, size_t nq, const uint16_t *K, size_t n,
                           size_t d, float *out, size_t out_stride);
void tw_axpy_rows_multi_h16(const float *p, size_t p_stride, size_t nq, const uint16_t *V,
                            size_t n, size_t d, float *acc, size_t acc_stride);

/* A prefill chunk's causal attention: n consecutive query rows of one
 * sequence at positions p0 .. p0 + n - 1, each over keys 0 .. its own
 * position (no window, no soft cap). Query head h of row r starts at
 * q + r * q_stride + h * head_stride (its gate, when gate_off is not 0, at
 * gate_off after that); K[g] / V[g] are kv head g's rows (head_dim values
 * each, f32 or IEEE half); the output of head h of row r goes to
 * out + r * out_stride + h * head_dim, times sigmoid(gate) when gated. */
typedef struct tw_causal_attn {
    const float *q;
    size_t q_stride, head_stride, gate_off;
    size_t n_heads, n_kv_heads, head_dim;
    size_t n, p0;
    const void *const *K, *const *V;
    bool kv_f16;
    float scale;
    float *out;
    size_t out_stride;
} tw_causal_attn;

/* Rows of a prefill that go through the kernels together: tw_attention_causal
 * takes its query rows in groups of this many from the first, and a
 * prefill step holds whole groups or a part of one (tw_model_forward), so
 * that a prompt cut into calls at multiples of it gives the bits it gives
 * read whole. */
#define TW_PREFILL_GROUP 64

/* Computes tw_causal_attn with matrix products (sgemm) over blocks of keys
 * and an online softmax, every (K/V head, its query heads or a share of
 * them, group of TW_PREFILL_GROUP rows) a task of the pool. A row's result
 * depends on the rows of its group only, not on how many other groups the
 * call holds. The results agree with the per-row kernels to rounding, not
 * bit for bit, so decode and speculative verification do not use it. false
 * (nothing written) without a pool or when its scratch cannot be had. */
bool tw_attention_causal(tw_pool *pool, const tw_causal_attn *a);

/* Softmax numerators: x[i] = exp(x[i] - mx) for i < n, returning their sum.
 * SIMD ISAs use a polynomial exp within 2 ulp of expf. The result depends
 * only on x, n and mx. Thread-safe; allocates nothing. */
float tw_exp_shift_f32(float *x, size_t n, float mx);

/* Softmax scores: x[i] *= scale for i < n, returning the largest product
 * (-INFINITY for n 0; NaN products are never the result). Each product is
 * the one scalar multiply, so every ISA gives the same bits. Thread-safe;
 * allocates nothing. */
float tw_scale_max_f32(float *x, size_t n, float scale);

/* Greedy choice over logits: every NaN among x[0..n) becomes -INFINITY,
 * then the index of the first of the largest values is returned (0 when
 * all are -INFINITY or n is 0). The same index on every ISA. Thread-safe;
 * allocates nothing. */
size_t tw_argmax_f32(float *x, size_t n);

/* Gated-MLP activation: g[i] = silu(g[i]) * u[i] = g / (1 + exp(-g)) * u,
 * elementwise (each output depends on g[i] and u[i] alone). Thread-safe;
 * allocates nothing. */
void tw_silu_mul_f32(float *g, const float *u, size_t n);

/* SiLU in place: x[i] = x[i] / (1 + exp(-x[i])), elementwise. Thread-safe;
 * allocates nothing. */
void tw_silu_f32(float *x, size_t n);

/* One step of the gated delta rule for one head with state [dk][dv]:
 *     S = decay * src;  mem = S^T k;  mem = beta (v - mem);
 *     S += k mem^T;     out = S^T q
 * S and src may be the same array (an in-place step) or disjoint; mem is
 * dv floats of caller scratch. The result depends only on the inputs, so
 * decode and speculative verification, which both step through here, see
 * the same numbers. Thread-safe; allocates nothing. */
void tw_delta_rule_f32(float *S, const float *src, const float *q, const float *k,
                       const float *v, float decay, float beta, size_t dk, size_t dv,
                       float *mem, float *out);

/* Batches of up to this many activation rows run on kernels whose every
 * output is bit-identical to a single-row matvec of that row; larger ones
 * may take sgemm (f32 on dequantized weights) where it is faster. */
#define TW_MATMUL_EXACT_ROWS 16

/* The ISA the kernels dispatch to now: "avx512", "avx2vnni" (the AVX2
 * kernels with AVX-VNNI's multiply-adds in the Q4_0 / Q8_0 batch kernels),
 * "avx2" or "scalar". */
const char *tw_kernels_isa(void);

/* True when this CPU (and build) can run the named ISA. */
bool tw_kernels_isa_available(const char *isa);

/* Decode prefetch: whether the packed kernels, given fewer than six
 * activations (a decode step, a short verification), fetch the next group of
 * rows ahead in software while they work on the current one; matrices under
 * 256 KiB, likely still cached, never do. From six on they always do.
 * Whether it pays depends on the machine: on a 2-core EPYC (Zen 4) it cost
 * up to 27% of decode speed, on a newer 2-core EPYC it gave up to 31%
 * (tw_kernels_tune_decode_prefetch measures it). Results are the same
 * bits either way. Process-wide, off until set; safe to change while kernels
 * run (a call reads it once). */
void tw_kernels_set_decode_prefetch(bool on);
bool tw_kernels_decode_prefetch(void);

/* Decode prefetch of the AVX2 Q4_K / Q5_K kernels: with decode prefetch on,
 * whether they fetch ahead for fewer than six activations too (on, until
 * set) or leave the stream to the hardware. Their sub-block loop is the most
 * arithmetic per byte of any packed kernel, and on a 2-core Zen 5 EPYC with
 * the AVX2 kernels forced a llama-1b-shaped Q4_K_M file decoded 1.06-1.11x
 * faster without their fetches, while Q6_K's own gained 1.28x from them;
 * tw_kernels_tune_decode_prefetch measures it. Same bits either way;
 * process-wide, safe to change while kernels run. */
void tw_kernels_set_decode_prefetch_k(bool on);
bool tw_kernels_decode_prefetch_k(void);

/* How batches past 16 activations (prompts) over F16 and BF16 weights run.
 * TILES: the ISA's own batch tiles where it has them for prompts (AVX-512:
 * each output then has decode's bits; the default), else as BLAS. PANELS:
 * the ISA's half-precision panels (AVX2, AVX-512: each output one
 * multiply-add chain in column order, the same bits on both ISAs), else as
 * BLAS. BLAS: dequantized tiles through OpenBLAS's sgemm. PANELS and BLAS
 * differ from decode's outputs in the last bits. Which is fastest depends
 * on the core and on the kernel set OpenBLAS runs, so
 * tw_kernels_tune_f16_prefill measures it. Process-wide; safe to change
 * between products. */
typedef enum tw_f16_prefill {
    TW_F16_PREFILL_TILES = 0,
    TW_F16_PREFILL_PANELS,
    TW_F16_PREFILL_BLAS,
} tw_f16_prefill;
void tw_kernels_set_f16_prefill(tw_f16_prefill path);
tw_f16_prefill tw_kernels_f16_prefill(void);
/* "tiles", "panels" or "blas". */
const char *tw_kernels_f16_prefill_name(tw_f16_prefill path);
/* Whether the dispatched ISA has its own kernels for that path (BLAS:
 * always). */
bool tw_kernels_f16_prefill_has(tw_f16_prefill path);

/* Decode split: whether a single activation's rows are shared out so that
 * a pool thread done with its own run of a matrix takes rows from the back
 * of a slower thread's (on, the default), or each thread reads exactly its
 * own run (off). Results are the same bits either way. Process-wide; safe
 * to change between pool runs. For measuring what the split gains. */
void tw_kernels_set_decode_split(bool on);
bool tw_kernels_decode_split(void);

/* Fetch ahead: how many bytes of the matrices named by
 * tw_matmul_fetch_next each pool thread fetches into its caches while it
 * waits between the runs of a decode step (for the slowest thread, or for
 * the caller's work between runs): the first rows it will read of them.
 * 0 turns it off; at most TW_FETCH_AHEAD_MAX (larger values are taken as
 * that). Meant to stay within the L2 beside what a thread reads after
 * (tw_hw_choose takes half the L2); TW_FETCH_AHEAD_DEFAULT until set.
 * Results are the same bits whatever it is. Process-wide; safe to change
 * between pool runs. */
#define TW_FETCH_AHEAD_DEFAULT ((size_t)256 << 10)
#define TW_FETCH_AHEAD_MAX     ((size_t)64 << 20)
void tw_kernels_set_fetch_ahead(size_t bytes);
size_t tw_kernels_fetch_ahead(void);

/* What tw_kernels_tune_decode_prefetch measured. */
typedef struct tw_prefetch_tune {
    size_t bytes;         /* the matrix swept */
    unsigned pairs;       /* sweeps timed without and with, in alternation */
    double us_off, us_on; /* median sweep time without and with */
    double gain;          /* median over the pairs of (time without / time with) */
    bool on;              /* the setting chosen and applied */
    /* The same for the AVX2 Q4_K kernel's fetches (tw_kernels_set_decode_
     * prefetch_k), measured only when decode prefetch came out on and the
     * AVX2 kernels are the ones dispatched (k_pairs 0 otherwise). */
    unsigned k_pairs;
    double k_gain;
    bool k_on;
} tw_prefetch_tune;

/* Chooses decode prefetch for this machine by measuring it: single-activation
 * products over a packed Q4_0 matrix of about `bytes` (give more than the
 * L3 so it streams from memory, as decode does; 4 MiB..1 GiB), on `pool`,
 * timed in pairs without and with, alternating which goes first, for about
 * `seconds` (0.01..10) and at least seven pairs. Turns it on when the median pair ran at least 3%
 * faster with it, else off, and reports the numbers in *out. When it comes
 * out on with the AVX2 kernels, a packed Q4_K matrix of the same size is
 * timed the same way with and without that kernel's fetches, which stay on
 * unless the median pair ran at least 3% faster without them. With no packed
 * kernels for the dispatched ISA (scalar) nothing is timed and it stays off.
 * Allocates and frees the matrix; drives the pool, so nothing else may use
 * it meanwhile. INVALID_ARGUMENT for a NULL pool or out, or sizes out of
 * range; RESOURCE_EXHAUSTED when the matrix cannot be allocated. */
tw_status tw_kernels_tune_decode_prefetch(tw_pool *pool, size_t bytes, double seconds,
                                          tw_prefetch_tune *out, tw_err *err);

/* What tw_kernels_tune_f16_prefill measured. */
typedef struct tw_f16_prefill_tune {
    unsigned rounds; /* rounds timed, each path the ISA has once a round; 0: none */
    /* median product time on each path; 0 for a path the ISA lacks */
    double us_tiles, us_panels, us_blas;
    /* median over the rounds of (the default path's time / the chosen
     * one's): what the choice gains over TILES (BLAS where the ISA has no
     * tiles); 1 when nothing was timed */
    double gain;
    tw_f16_prefill path; /* the path chosen and applied */
} tw_f16_prefill_tune;

/* Chooses F16 prefill (tw_kernels_set_f16_prefill) by measuring it: a
 * 128-activation product over a 1024 x 1024 F16 matrix on `pool`, timed on
 * each path the dispatched ISA has, in rounds that rotate which goes first,
 * for about `seconds` (0.01..10). Takes the path with the least median
 * time, but keeps the tiles (decode's bits) unless another is at least 5%
 * faster. With only BLAS to run (scalar) nothing is timed. Drives the pool,
 * so nothing else may use it meanwhile. INVALID_ARGUMENT for a NULL pool or
 * out or seconds out of range (the tiles are then set); RESOURCE_EXHAUSTED
 * when the matrix cannot be allocated. */
tw_status tw_kernels_tune_f16_prefill(tw_pool *pool, double seconds, tw_f16_prefill_tune *out,
                                      tw_err *err);

/* Forces dispatch to "scalar", "avx2", "avx2vnni" or "avx512"; NULL or "auto" restores
 * the best available. Fails with FAILED_PRECONDITION when the CPU lacks the
 * ISA and INVALID_ARGUMENT for an unknown name. Process-wide; meant for tests
 * and benchmarks, not to be called while kernels run on other threads. */
tw_status tw_kernels_force_isa(const char *isa, tw_err *err);

#endif
