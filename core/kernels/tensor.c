#include "tw/tensor.h"

#include <strings.h>

#include "kernels/blocks.h"

typedef struct type_info {
    tw_type type;
    const char *name;
    size_t block_elems;
    size_t block_bytes;
    bool in_files; /* a GGUF type, not one made at load */
} type_info;

static const type_info types[] = {
    {TW_TYPE_F32, "F32", 1, 4, true},
    {TW_TYPE_F16, "F16", 1, 2, true},
    {TW_TYPE_BF16, "BF16", 1, 2, true},
    {TW_TYPE_Q8_0, "Q8_0", TW_QK8_0, sizeof(tw_block_q8_0), true},
    {TW_TYPE_Q4_0, "Q4_0", TW_QK4_0, sizeof(tw_block_q4_0), true},
    {TW_TYPE_Q5_0, "Q5_0", 32, sizeof(tw_block_q5_0), true},
    {TW_TYPE_Q5_1, "Q5_1", 32, sizeof(tw_block_q5_1), true},
    {TW_TYPE_Q4_K, "Q4_K", TW_QK_K, sizeof(tw_block_q4_k), true},
    {TW_TYPE_Q5_K, "Q5_K", TW_QK_K, sizeof(tw_block_q5_k), true},
    {TW_TYPE_Q6_K, "Q6_K", TW_QK_K, sizeof(tw_block_q6_k), true},
    {TW_TYPE_Q4_0_R8, "Q4_0_R8", TW_QK4_0, sizeof(tw_block_q4_0), false},
    {TW_TYPE_Q5_0_R8, "Q5_0_R8", 32, sizeof(tw_block_q5_0), false},
    {TW_TYPE_Q5_1_R8, "Q5_1_R8", 32, sizeof(tw_block_q5_1), false},
    {TW_TYPE_Q8_0_R8, "Q8_0_R8", TW_QK8_0, sizeof(tw_block_q8_0), false},
    {TW_TYPE_Q4_K_R8, "Q4_K_R8", TW_QK_K, sizeof(tw_block_q4_k), false},
    {TW_TYPE_Q5_K_R8, "Q5_K_R8", TW_QK_K, sizeof(tw_block_q5_k), false},
    {TW_TYPE_Q6_K_R8, "Q6_K_R8", TW_QK_K, sizeof(tw_block_q6_k), false},
};

static const type_info *find(uint32_t type)
{
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if ((uint32_t)types[i].type == type)
            return &types[i];
    return NULL;
}

bool tw_type_supported(uint32_t type)
{
    const type_info *t = find(type);
    return t && t->in_files;
}

size_t tw_type_block_elems(tw_type type)
{
    const type_info *t = find((uint32_t)type);
    return t ? t->block_elems : 0;
}

size_t tw_type_block_bytes(tw_type type)
{
    const type_info *t = find((uint32_t)type);
    return t ? t->block_bytes : 0;
}

size_t tw_type_row_bytes(tw_type type, uint64_t n)
{
    const type_info *t = find((uint32_t)type);
    if (!t || n % t->block_elems != 0)
        return 0;
    uint64_t blocks = n / t->block_elems;
    if (blocks > SIZE_MAX / t->block_bytes)
        return 0;
    return (size_t)blocks * t->block_bytes;
}

const char *tw_type_name(uint32_t type)
{
    const type_info *t = find(type);
    return t ? t->name : "?";
}

tw_status tw_type_from_name(const char *name, tw_type *out, tw_err *err)
{
    if (!name || !out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "type name: NULL argument");
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (types[i].in_files && strcasecmp(types[i].name, name) == 0) {
            *out = types[i].type;
            return TW_OK;
        }
    }
    return tw_errorf(err, TW_INVALID_ARGUMENT,
                     "unknown tensor type '%.64s' (expected F32, F16, BF16, Q8_0, Q4_0, Q5_0, "
                     "Q5_1, Q4_K, Q5_K or Q6_K)",
                     name);
}
