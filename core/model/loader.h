/* The helpers that read a model's tensors by their Hugging Face names into
 * the forms the forward passes use, shared by the decoder's loader (load.c)
 * and the encoder's (encoder_load.c). Internal to core/model/. */
#ifndef TW_MODEL_LOADER_H
#define TW_MODEL_LOADER_H

#include <stdbool.h>
#include <stddef.h>

#include "model/model_internal.h"
#include "model/wsource.h"

#define TW_LOAD_NAME_MAX 256

typedef struct tw_loader {
    tw_model *m;
    const char *prefix; /* "model." or a multimodal checkpoint's text prefix */
    char name[TW_LOAD_NAME_MAX];
    tw_err *err;
} tw_loader;

/* calloc whose block is freed with the model. */
void *tw_model_calloc(tw_model *m, size_t n, size_t size);

/* prefix + suffix, or prefix + "layers.<layer>." + suffix; in ld->name. */
const char *tw_load_name(tw_loader *ld, int layer, const char *suffix);

/* The tensor called name; a missing one is an error unless optional (then
 * *found says). */
tw_status tw_load_find(tw_loader *ld, const char *name, bool optional, tw_wtensor *t, bool *found);

/* A view of `count` stacked [rows x cols] matrices (count 1: a plain
 * Linear weight), checked against the tensor's shape and bytes. */
tw_status tw_load_view(tw_loader *ld, const tw_wtensor *t, size_t count, size_t rows, size_t cols,
                       tw_mat *out);
tw_status tw_load_mat(tw_loader *ld, const char *name, size_t rows, size_t cols, tw_mat *out);

/* An f32 copy of a small tensor of n elements, with the stored transform
 * undone and `plus_one` folded in; *out is NULL when optional and absent. */
tw_status tw_load_vec(tw_loader *ld, const char *name, size_t n, bool plus_one, bool optional,
                      float **out);

/* Whether t is a type matrices can be quantized to at load. */
bool tw_quantize_load_type(tw_type t);

/* Quantizes every matrix stored as f32, f16 or bf16 whose rows are whole
 * blocks of `to` (but the MoE routers, as tw-convert leaves them), in
 * copies the model owns (quantize_load.c). */
tw_status tw_model_quantize_at_load(tw_model *m, tw_type to, tw_err *err);

/* Frees the quantized copies no matrix reads any more (those the packing
 * replaced), or with `all` every one of them (the model is going). */
void tw_model_quantized_release(tw_model *m, bool all);

/* Builds an encoder model (cfg.family->encoder) from ld's source: its
 * weights and its scratch for max_context rows (encoder_load.c). */
tw_status tw_encoder_build(tw_loader *ld, size_t max_context);

#endif
