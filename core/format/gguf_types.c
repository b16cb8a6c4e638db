/* Block sizes of every ggml tensor type, so a GGUF file can be laid out and
 * bounds-checked even when it holds types tokenwire does not compute with.
 * Values are the block layouts of ggml's type traits. */
#include "tw/gguf.h"

typedef struct type_info {
    const char *name;
    uint32_t block_elems; /* 0: type number unused */
    uint32_t block_bytes;
} type_info;

static const type_info types[] = {
    [0] = {"F32", 1, 4},
    [1] = {"F16", 1, 2},
    [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},
    [6] = {"Q5_0", 32, 22},
    [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},
    [9] = {"Q8_1", 32, 36},
    [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110},
    [12] = {"Q4_K", 256, 144},
    [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},
    [15] = {"Q8_K", 256, 292},
    [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74},
    [18] = {"IQ3_XXS", 256, 98},
    [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},
    [21] = {"IQ3_S", 256, 110},
    [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136},
    [24] = {"I8", 1, 1},
    [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},
    [27] = {"I64", 1, 8},
    [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56},
    [30] = {"BF16", 1, 2},
    [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66},
    [39] = {"MXFP4", 32, 17},
};

static const type_info *lookup(uint32_t type)
{
    if (type >= sizeof types / sizeof types[0] || types[type].block_elems == 0)
        return NULL;
    return &types[type];
}

bool tw_gguf_type_nbytes(uint32_t type, uint64_t n, uint64_t *out)
{
    const type_info *t = lookup(type);
    if (!t || n % t->block_elems != 0)
        return false;
    uint64_t bytes;
    if (__builtin_mul_overflow(n / t->block_elems, (uint64_t)t->block_bytes, &bytes))
        return false;
    *out = bytes;
    return true;
}

const char *tw_gguf_type_name(uint32_t type)
{
    const type_info *t = lookup(type);
    return t ? t->name : "?";
}

const char *tw_gguf_vtype_name(uint32_t type)
{
    static const char *const names[] = {"u8",  "i8",     "u16",   "i16", "u32",
                                        "i32", "f32",    "bool",  "string",
                                        "array", "u64",  "i64",   "f64"};
    if (type < sizeof names / sizeof names[0])
        return names[type];
    return "?";
}
