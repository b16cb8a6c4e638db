/* Opens hostile bytes as a .safetensors file and reads every tensor the
 * reader accepts, converting the float ones as the converter does. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tw/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    tw_st_file *f = NULL;
    tw_err err = {0};
    if (tw_st_open_memory(buf, size, &f, &err) != TW_OK) {
        free(buf);
        return 0;
    }
    size_t n = tw_st_count(f);
    for (size_t i = 0; i < n; i++) {
        const tw_st_tensor *t = tw_st_tensor_at(f, i);
        if (!t)
            continue;
        sink += tw_st_find(f, t->name) != NULL;
        sink += strlen(tw_st_dtype_name(t->dtype));
        if (t->nbytes) {
            const uint8_t *p = t->data;
            sink += p[0] + p[t->nbytes - 1];
        }
        if (t->n_elems <= 4096) {
            float *dst = malloc((t->n_elems ? t->n_elems : 1) * sizeof *dst);
            if (dst) {
                (void)tw_st_to_f32(t, dst, t->n_elems, &err);
                free(dst);
            }
        }
    }
    sink += tw_st_tensor_at(f, n) != NULL;
    sink += tw_st_metadata(f, "format") != NULL;
    tw_st_close(f);
    free(buf);
    return 0;
}
