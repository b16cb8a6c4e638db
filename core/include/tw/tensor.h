/* Weight tensor element types, in the numbering GGUF uses (ggml_type), so a
 * type read from a GGUF file needs no translation. Block layouts are GGUF's:
 * a quantized row is a sequence of fixed-size blocks, each covering
 * tw_type_block_elems() consecutive elements. */
#ifndef TW_TENSOR_H
#define TW_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/status.h"

typedef enum tw_type {
    TW_TYPE_F32 = 0,
    TW_TYPE_F16 = 1,
    TW_TYPE_Q4_0 = 2,
    TW_TYPE_Q8_0 = 8,
    TW_TYPE_Q4_K = 12,
    TW_TYPE_Q5_K = 13,
    TW_TYPE_Q6_K = 14,
    TW_TYPE_BF16 = 30,
} tw_type;

/* True for the types tokenwire can load and compute with. */
bool tw_type_supported(uint32_t type);

/* Elements per block (1 for F32/F16/BF16, 32 for Q4_0/Q8_0, 256 for K types). */
size_t tw_type_block_elems(tw_type type);

/* Bytes per block. */
size_t tw_type_block_bytes(tw_type type);

/* Bytes of a row of n elements; 0 when n is not a multiple of the block size
 * or the result would overflow. */
size_t tw_type_row_bytes(tw_type type, uint64_t n);

/* "F32", "Q8_0", ... ; "?" for an unknown value. */
const char *tw_type_name(uint32_t type);

/* Parses a name as printed by tw_type_name (case-insensitive). */
tw_status tw_type_from_name(const char *name, tw_type *out, tw_err *err);

#endif
