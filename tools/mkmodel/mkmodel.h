/* Internal interface of tw-mkmodel: named model shapes and the tensors
 * each one has. */
#ifndef TW_TOOLS_MKMODEL_H
#define TW_TOOLS_MKMODEL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/status.h"

/* How a tensor's values are drawn (in the file's convention, so no HF
 * transform needs undoing). */
typedef enum mk_init {
    MK_INIT_NORMAL = 0, /* N(0, 0.02): projections, embeddings, biases */
    MK_INIT_ONES,       /* RMSNorm multipliers */
    MK_INIT_DECAY,      /* DeltaNet ssm_a = -exp(A_log): uniform in [-16, -1] */
    MK_INIT_DT_BIAS,    /* DeltaNet dt bias: uniform in [-1, 1] * 0.5 */
    MK_INIT_CONV,       /* DeltaNet conv1d taps: N(0, 0.25) */
} mk_init;

/* One tensor of the Hugging Face checkpoint the shape stands for. */
typedef struct mk_hf_tensor {
    char name[160];
    uint32_t n_dims;
    uint64_t shape[3]; /* HF (row-major) order */
    mk_init init;
} mk_hf_tensor;

/* Names and one-line descriptions of the shapes, for --list. */
void mk_shapes_print(void *file);

/* Builds the HF config.json object of a named shape with the given
 * vocabulary size. tiny shrinks every dimension (same family, same layer
 * pattern) for tests; layers > 0 overrides the layer count. The caller owns
 * *out. NOT_FOUND for an unknown shape. */
tw_status mk_shape_config(const char *shape, uint64_t vocab, bool tiny, uint32_t layers,
                          json_t **out, tw_err *err);

/* Lists the HF tensors of the model config describes, in checkpoint order,
 * into a malloc'd array (*out, *n; free()). */
tw_status mk_hf_tensors(const json_t *config, mk_hf_tensor **out, size_t *n, tw_err *err);

#endif
