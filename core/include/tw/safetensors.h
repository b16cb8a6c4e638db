/* Hugging Face safetensors files, read-only, and sharded checkpoints
 * (model.safetensors.index.json + shards) opened as one set.
 *
 * A file is an 8-byte little-endian header length, a JSON header mapping
 * tensor names to {dtype, shape, data_offsets} (plus an optional
 * "__metadata__" object of string values), then the data. tw_st_open() maps
 * the file and validates the whole header: offsets inside the data section,
 * no two tensors overlapping, size == product(shape) * dtype size.
 *
 * Shape order is Hugging Face's (row-major, shape[0] is the slowest
 * dimension): a Linear weight is [out_features, in_features].
 *
 * Thread-safety: immutable after open; concurrent readers are fine. Pointers
 * stay valid until the file or set is closed.
 */
#ifndef TW_SAFETENSORS_H
#define TW_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/status.h"

#define TW_ST_MAX_DIMS 8

typedef enum tw_st_dtype {
    TW_ST_BOOL = 0,
    TW_ST_U8,
    TW_ST_I8,
    TW_ST_U16,
    TW_ST_I16,
    TW_ST_F16,
    TW_ST_BF16,
    TW_ST_U32,
    TW_ST_I32,
    TW_ST_F32,
    TW_ST_U64,
    TW_ST_I64,
    TW_ST_F64,
    TW_ST_F8_E4M3,
    TW_ST_F8_E5M2,
} tw_st_dtype;

/* "BF16", "I32", ... as written in the header. */
const char *tw_st_dtype_name(tw_st_dtype dtype);
/* Bytes per element. */
size_t tw_st_dtype_size(tw_st_dtype dtype);

typedef struct tw_st_tensor {
    const char *name;
    tw_st_dtype dtype;
    uint32_t n_dims;                 /* 0 for a scalar */
    uint64_t shape[TW_ST_MAX_DIMS];  /* unused entries are 1 */
    uint64_t n_elems;
    uint64_t nbytes;
    const void *data;                /* inside the mapping; may be unaligned */
} tw_st_tensor;

typedef struct tw_st_file tw_st_file;

/* Maps and validates one .safetensors file. Errors: file-system codes
 * (TW_NOT_FOUND, ...), TW_DATA_LOSS for truncation or out-of-range offsets,
 * TW_INVALID_ARGUMENT for a garbled header. */
tw_status tw_st_open(const char *path, tw_st_file **out, tw_err *err);
/* Same on a borrowed buffer that must outlive the returned file. */
tw_status tw_st_open_memory(const void *buf, size_t len, tw_st_file **out, tw_err *err);
void tw_st_close(tw_st_file *f);

size_t tw_st_count(const tw_st_file *f);
/* Tensor i in the order of their data offsets; NULL when out of range. */
const tw_st_tensor *tw_st_tensor_at(const tw_st_file *f, size_t i);
const tw_st_tensor *tw_st_find(const tw_st_file *f, const char *name);
/* A string value of "__metadata__", or NULL. */
const char *tw_st_metadata(const tw_st_file *f, const char *key);

/* Converts n elements of a F32/F16/BF16/F64 tensor (n == t->n_elems) into
 * float. Other dtypes are TW_INVALID_ARGUMENT. Thread-safe. */
tw_status tw_st_to_f32(const tw_st_tensor *t, float *dst, size_t n, tw_err *err);

/* ---- checkpoints (one file or an index with shards) ------------------- */

typedef struct tw_st_set tw_st_set;

/* Opens the weights of a Hugging Face checkpoint directory: the shards listed
 * in model.safetensors.index.json when it exists (every weight_map entry must
 * be found in the shard it names, shard names must be plain file names in
 * dir), else model.safetensors. Tensor names must be unique across shards. */
tw_status tw_st_set_open_dir(const char *dir, tw_st_set **out, tw_err *err);
void tw_st_set_close(tw_st_set *s);

size_t tw_st_set_count(const tw_st_set *s);
/* Tensors across all shards, shard by shard; NULL when out of range. */
const tw_st_tensor *tw_st_set_tensor_at(const tw_st_set *s, size_t i);
const tw_st_tensor *tw_st_set_find(const tw_st_set *s, const char *name);

#endif
