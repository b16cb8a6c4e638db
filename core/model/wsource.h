/* Where weights come from: a Hugging Face checkpoint directory (config.json
 * + safetensors) or a GGUF file. Both are presented the same way: an
 * HF-shaped config object and tensors looked up by their HF names, with HF
 * shapes (shape[0] slowest), so the loader knows one naming scheme. */
#ifndef TW_MODEL_WSOURCE_H
#define TW_MODEL_WSOURCE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "tw/gguf.h"
#include "tw/status.h"
#include "tw/tensor.h"

/* How stored values differ from the HF parameter of the same name. */
typedef enum tw_wt_transform {
    TW_WT_AS_IS = 0,
    TW_WT_PLUS_ONE = 1, /* stored 1 + w (llama.cpp's Gemma/Qwen3.5 norms) */
    TW_WT_NEG_EXP = 2,  /* stored -exp(w) (llama.cpp's DeltaNet A_log) */
} tw_wt_transform;

#define TW_WT_MAX_DIMS 4

typedef struct tw_wtensor {
    const char *name; /* the name in the file */
    const void *data;
    tw_type type;
    uint32_t n_dims;
    uint64_t shape[TW_WT_MAX_DIMS]; /* HF order; unused entries are 1 */
    uint64_t n_elems;
    uint64_t nbytes;
    tw_wt_transform transform;
} tw_wtensor;

typedef struct tw_wsource tw_wsource;

/* Opens `path`: a directory is a HF checkpoint, a regular file a GGUF
 * (read into huge pages when huge_pages is set, see TW_GGUF_HUGE_PAGES).
 * The source owns its mappings until tw_wsource_close(). */
tw_status tw_wsource_open(const char *path, bool huge_pages, tw_wsource **out, tw_err *err);
void tw_wsource_close(tw_wsource *s);

/* The HF-shaped config (borrowed). */
const json_t *tw_wsource_config(const tw_wsource *s);

/* True for a GGUF source. */
bool tw_wsource_is_gguf(const tw_wsource *s);

/* The file bytes behind [p, p + len) of a GGUF read into a private copy,
 * mapped from the page cache (tw_gguf_file_view); TW_FAILED_PRECONDITION
 * for any other source. */
tw_status tw_wsource_file_view(const tw_wsource *s, const void *p, size_t len, tw_file_view *out,
                               tw_err *err);

/* Looks a tensor up by HF name: TW_OK, TW_NOT_FOUND (no message written),
 * or UNIMPLEMENTED / INVALID_ARGUMENT for a tensor that exists but cannot
 * be computed with. */
tw_status tw_wsource_find(const tw_wsource *s, const char *hf_name, tw_wtensor *out,
                          tw_err *err);

/* Looks a tensor up by its name in the file (for GGUF-only tensors such as
 * rope_freqs.weight). Same results as tw_wsource_find(). */
tw_status tw_wsource_find_raw(const tw_wsource *s, const char *file_name, tw_wtensor *out,
                              tw_err *err);

/* Every tensor of the source in a fixed order, for fingerprints and counts.
 * Returns false past the end. */
size_t tw_wsource_count(const tw_wsource *s);
bool tw_wsource_at(const tw_wsource *s, size_t i, tw_wtensor *out);

#endif
