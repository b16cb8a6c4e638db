/* Value-level access to a sequence's K/V in either storage type, for the
 * paths that move K/V in and out of a sequence as f32 (the attention
 * step's writes, state blobs). Attention reads the stored rows in place
 * (tw_dot_rows_multi_h16 and friends) and the prefix cache copies them as
 * they are (tw_seq_kv_read). A step writes head_dim values per K/V head and
 * token, so the reference half conversion is cheap enough here. */
#include <string.h>

#include "tw/kernels.h"

#include "model/model_internal.h"

void tw_seq_kv_load(const tw_seq *s, uint32_t attn_index, int which, uint32_t head, size_t v,
                    size_t n, float *dst)
{
    const unsigned char *run = tw_seq_kv(s, attn_index, which, head);
    if (s->model->info.kv_type == TW_KV_F16)
        tw_dequant_row(TW_TYPE_F16, run + v * sizeof(uint16_t), dst, n);
    else
        memcpy(dst, run + v * sizeof(float), n * sizeof(float));
}

void tw_seq_kv_store(tw_seq *s, uint32_t attn_index, int which, uint32_t head, size_t v, size_t n,
                     const float *src)
{
    unsigned char *run = tw_seq_kv(s, attn_index, which, head);
    if (s->model->info.kv_type == TW_KV_F16)
        tw_quant_row(TW_TYPE_F16, src, run + v * sizeof(uint16_t), n);
    else
        memcpy(run + v * sizeof(float), src, n * sizeof(float));
}
