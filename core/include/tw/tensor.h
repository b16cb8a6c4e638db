/* Weight tensor element types, in the numbering GGUF uses (ggml_type), so a
 * type read from a GGUF file needs no translation. Block layouts are GGUF's:
 * a quantized row is a sequence of fixed-size blocks, each covering
 * tw_type_block_elems() consecutive elements. */
#ifndef TW_TENSOR_H
#define TW_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tw/status.h"

typedef enum tw_type {
    TW_TYPE_F32 = 0,
    TW_TYPE_F16 = 1,
    TW_TYPE_Q4_0 = 2,
    /* Q5_0 / Q5_1 are what llama.cpp's K-quant mixes fall back to for
     * tensors whose width is not a multiple of 256 (Qwen2-0.5B's 896). */
    TW_TYPE_Q5_0 = 6,
    TW_TYPE_Q5_1 = 7,
    TW_TYPE_Q8_0 = 8,
    TW_TYPE_Q4_K = 12,
    TW_TYPE_Q5_K = 13,
    TW_TYPE_Q6_K = 14,
    TW_TYPE_BF16 = 30,
    /* Not GGUF types, so no file holds them: Q4_0 / Q5_0 / Q5_1 / Q8_0 /
     * Q4_K / Q5_K / Q6_K rows packed eight to a group for the integer kernels
     * (tw_pack_rows in tw/kernels.h). tw_type_supported() is false for
     * them; sizes are those of the plain type. */
    TW_TYPE_Q4_0_R8 = 1002,
    TW_TYPE_Q5_0_R8 = 1006,
    TW_TYPE_Q5_1_R8 = 1007,
    TW_TYPE_Q8_0_R8 = 1008,
    TW_TYPE_Q4_K_R8 = 1012,
    TW_TYPE_Q5_K_R8 = 1013,
    TW_TYPE_Q6_K_R8 = 1014,
} tw_type;

/* True for the types tokenwire can load from a file and compute with. */
bool tw_type_supported(uint32_t type);

/* Elements per block (1 for F32/F16/BF16, 32 for Q4_0/Q5_0/Q5_1/Q8_0, 256 for
 * K types); 0 for an unsupported type. */
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

/* IEEE half <-> f32. tw_f16_to_f32 is exact; tw_f32_to_f16 rounds to
 * nearest even (overflow gives infinity, NaN stays NaN), the rounding ggml
 * and the F16C instructions use. */
static inline float tw_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (mant << 13);
    } else {
        /* zero or subnormal: mant * 2^-24 is exact in f32 */
        float f = (float)mant * 0x1p-24f;
        memcpy(&bits, &f, sizeof bits);
        bits |= sign;
    }
    float out;
    memcpy(&out, &bits, sizeof out);
    return out;
}

static inline uint16_t tw_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: keep it quiet and non-zero */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) /* >= 65520 rounds to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* normal half */
        uint32_t h = ((((ax >> 23) - 112u) << 10) | ((ax >> 13) & 0x3ffu));
        uint32_t rest = ax & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
            h++; /* a carry into the exponent is still correct */
        return (uint16_t)(sign | h);
    }
    if (ax <= 0x33000000u) /* <= 2^-25 rounds to zero */
        return sign;
    uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - (ax >> 23);
    uint32_t h = mant >> shift;
    uint32_t rest = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

/* bfloat16 <-> f32. tw_bf16_to_f32 is exact; tw_f32_to_bf16 rounds to
 * nearest even and keeps NaN quiet, bit-identical to ggml. */
static inline float tw_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float out;
    memcpy(&out, &bits, sizeof out);
    return out;
}

static inline uint16_t tw_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 64u);
    return (uint16_t)((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}

#endif
