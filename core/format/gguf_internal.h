/* GGUF reader internals shared by the parser (gguf_read.c) and the
 * accessors (gguf_query.c). */
#ifndef TW_FORMAT_GGUF_INTERNAL_H
#define TW_FORMAT_GGUF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "format/arena.h"
#include "format/mapfile.h"
#include "tw/gguf.h"

typedef struct strref {
    const char *s;
    uint64_t len;
} strref;

struct tw_gguf_value {
    uint32_t type;
    uint32_t elem_type; /* arrays only */
    uint64_t n;         /* array length, or string byte length */
    union {
        uint64_t u;
        int64_t i;
        double f;
    } num;
    const char *str;           /* TW_GGUF_STRING */
    const uint8_t *raw;        /* numeric arrays: elements in the file */
    strref *strs;              /* string arrays */
    struct tw_gguf_value *sub; /* arrays of arrays */
};

typedef struct kv {
    const char *name;
    tw_gguf_value v;
} kv;

struct tw_gguf {
    twf_map map;
    twf_arena arena;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_off;
    int64_t n_kv;
    kv *kvs;
    int64_t n_tensors;
    tw_gguf_tensor *tensors;
    int64_t *by_name; /* tensor indices sorted by name */
};

/* Bytes of one scalar of GGUF type t (0 for strings, arrays and unknown
 * types). */
size_t twf_gguf_scalar_size(uint32_t t);

/* Decodes one little-endian scalar of type t at p into v->num. */
void twf_gguf_decode_scalar(uint32_t t, const uint8_t *p, tw_gguf_value *v);

#endif
