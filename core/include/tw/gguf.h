/* GGUF model files: a read-only reader (versions 2 and 3, little-endian)
 * and a writer (version 3).
 *
 * Reader. tw_gguf_open() maps the file read-only and validates all of it up
 * front: every count, length, offset and size is checked against the file
 * length before use, so after a successful open every accessor below is a
 * plain lookup that cannot fail on hostile bytes. Key names, tensor names and
 * string values are copied into NUL-terminated storage owned by the tw_gguf
 * (GGUF strings are length-prefixed, not terminated); numeric array elements
 * and tensor data are read straight from the mapping.
 *
 * Thread-safety: a tw_gguf is immutable after open; any number of threads may
 * read from it concurrently. Pointers it hands out stay valid until
 * tw_gguf_close().
 *
 * Dimension order is GGUF's (ggml's): dims[0] is the fastest-varying
 * dimension, i.e. the row length. A Hugging Face weight of shape
 * [out, in] appears in GGUF as dims {in, out}.
 */
#ifndef TW_GGUF_H
#define TW_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/status.h"
#include "tw/tensor.h"

#define TW_GGUF_MAX_DIMS 4
/* Alignment of tensor data when the file has no general.alignment key. */
#define TW_GGUF_DEFAULT_ALIGNMENT 32
/* Arrays may nest (array of arrays) at most this deep. */
#define TW_GGUF_MAX_DEPTH 8

/* Metadata value types, numbered as in the GGUF specification. */
typedef enum tw_gguf_vtype {
    TW_GGUF_U8 = 0,
    TW_GGUF_I8 = 1,
    TW_GGUF_U16 = 2,
    TW_GGUF_I16 = 3,
    TW_GGUF_U32 = 4,
    TW_GGUF_I32 = 5,
    TW_GGUF_F32 = 6,
    TW_GGUF_BOOL = 7,
    TW_GGUF_STRING = 8,
    TW_GGUF_ARRAY = 9,
    TW_GGUF_U64 = 10,
    TW_GGUF_I64 = 11,
    TW_GGUF_F64 = 12,
} tw_gguf_vtype;

/* "u32", "string", "array", ...; "?" for an unknown value. */
const char *tw_gguf_vtype_name(uint32_t type);

typedef struct tw_gguf tw_gguf;

/* One metadata value: a scalar, a string, or an array (whose elements may
 * themselves be arrays). Owned by the tw_gguf it came from. */
typedef struct tw_gguf_value tw_gguf_value;

/* A tensor as described by the file. */
typedef struct tw_gguf_tensor {
    const char *name;
    uint32_t type;      /* ggml type number; compare with tw_type values */
    uint32_t n_dims;    /* 1..TW_GGUF_MAX_DIMS */
    uint64_t dims[TW_GGUF_MAX_DIMS]; /* dims[0] = row length; unused dims are 1 */
    uint64_t n_elems;   /* product of dims */
    uint64_t offset;    /* absolute file offset of the data */
    uint64_t nbytes;    /* size of the data in bytes */
    /* Start of the data inside the mapping, or NULL when tokenwire cannot
     * compute with this type (!tw_type_supported(type)). Not necessarily
     * aligned beyond the file's alignment. */
    const void *data;
} tw_gguf_tensor;

/* ---- opening ---------------------------------------------------------- */

/* Maps and validates the GGUF file at path. On success *out owns the
 * mapping; release it with tw_gguf_close(). Errors: TW_NOT_FOUND /
 * TW_PERMISSION_DENIED / TW_UNAVAILABLE for file-system problems,
 * TW_INVALID_ARGUMENT for a file that is not GGUF or uses an unsupported
 * version, TW_DATA_LOSS for a truncated or inconsistent file. Blocks on file
 * I/O only for mapping (pages are faulted in later on access). */
tw_status tw_gguf_open(const char *path, tw_gguf **out, tw_err *err);

/* Flags of tw_gguf_open_ex(). */
enum {
    /* Read the file into private memory backed by transparent huge pages
     * (where the kernel offers them) instead of mapping the page cache:
     * a copy at open, faster streaming of the tensors afterwards. */
    TW_GGUF_HUGE_PAGES = 1u << 0,
};

/* tw_gguf_open() with flags (TW_GGUF_*); the same contract, except that with
 * TW_GGUF_HUGE_PAGES the whole file is read before it returns. */
tw_status tw_gguf_open_ex(const char *path, unsigned flags, tw_gguf **out, tw_err *err);

/* Like tw_gguf_open() on bytes already in memory. The buffer is borrowed: it
 * must stay valid and unchanged until tw_gguf_close(). */
tw_status tw_gguf_open_memory(const void *buf, size_t len, tw_gguf **out, tw_err *err);

/* Releases everything; NULL is allowed. */
void tw_gguf_close(tw_gguf *g);

uint32_t tw_gguf_version(const tw_gguf *g);
/* The tensor data alignment in effect (general.alignment or the default). */
uint32_t tw_gguf_alignment(const tw_gguf *g);
/* File offset where the tensor data section starts. */
uint64_t tw_gguf_data_offset(const tw_gguf *g);
/* Size of the file (or memory buffer) in bytes. */
uint64_t tw_gguf_file_size(const tw_gguf *g);

/* Bytes of a file opened with TW_GGUF_HUGE_PAGES, mapped from the file's
 * page cache rather than read from the private copy (tw_gguf_file_view). */
typedef struct tw_file_view {
    const void *data;
    void *map; /* internal: what the release unmaps */
    size_t map_len;
} tw_file_view;

/* Maps the file bytes behind [p, p + len) of g's private copy (a range of
 * tensor data, say) read-only from the page cache, after checking that the
 * file still has the size and, over the range, every byte the copy read.
 * None of it stays resident in this process: pages are read in on access,
 * and the kernel may drop them again under memory pressure, so a table read
 * a row at a time costs memory only for the rows read. The view stays
 * valid after tw_gguf_close(g) until tw_file_view_release().
 * TW_FAILED_PRECONDITION for a gguf that is not a huge-page copy,
 * TW_OUT_OF_RANGE for a range outside the copy, TW_DATA_LOSS when the file
 * changed since it was read. A file truncated afterwards faults on access,
 * as any file mapping does. */
tw_status tw_gguf_file_view(const tw_gguf *g, const void *p, size_t len, tw_file_view *out,
                            tw_err *err);
/* Unmaps a view; a zeroed or released view and NULL are no-ops. */
void tw_file_view_release(tw_file_view *v);

/* ---- metadata keys ---------------------------------------------------- */

int64_t tw_gguf_key_count(const tw_gguf *g);
/* Index of the key named name, or -1 when the file lacks it. */
int64_t tw_gguf_find_key(const tw_gguf *g, const char *name);
/* Name of key i (0 <= i < tw_gguf_key_count()); NULL when out of range. */
const char *tw_gguf_key_name(const tw_gguf *g, int64_t i);
/* Value of key i; NULL when out of range. */
const tw_gguf_value *tw_gguf_key_value(const tw_gguf *g, int64_t i);
/* Value of the key named name; NULL when absent. */
const tw_gguf_value *tw_gguf_get(const tw_gguf *g, const char *name);

/* Typed getters by key name. They accept any stored numeric type whose
 * value fits the requested one exactly (an i32 of 7 reads as u64 7; a u32
 * of 3000000000 does not read as i32; integers read as floats; f32/f64 do
 * not read as integers). Return TW_NOT_FOUND when the key is absent (the
 * message names it) and TW_INVALID_ARGUMENT on a type or range mismatch.
 * *out is written only on success, so a default set beforehand survives. */
tw_status tw_gguf_get_u32(const tw_gguf *g, const char *key, uint32_t *out, tw_err *err);
tw_status tw_gguf_get_i32(const tw_gguf *g, const char *key, int32_t *out, tw_err *err);
tw_status tw_gguf_get_u64(const tw_gguf *g, const char *key, uint64_t *out, tw_err *err);
tw_status tw_gguf_get_i64(const tw_gguf *g, const char *key, int64_t *out, tw_err *err);
tw_status tw_gguf_get_f32(const tw_gguf *g, const char *key, float *out, tw_err *err);
tw_status tw_gguf_get_f64(const tw_gguf *g, const char *key, double *out, tw_err *err);
tw_status tw_gguf_get_bool(const tw_gguf *g, const char *key, bool *out, tw_err *err);
/* *out points to a NUL-terminated copy owned by g; *len (may be NULL)
 * receives the byte length, which differs from strlen() only when the value
 * contains NUL bytes. */
tw_status tw_gguf_get_str(const tw_gguf *g, const char *key, const char **out, size_t *len,
                          tw_err *err);
/* An array-valued key; TW_INVALID_ARGUMENT when the key is not an array. */
tw_status tw_gguf_get_arr(const tw_gguf *g, const char *key, const tw_gguf_value **out,
                          tw_err *err);

/* ---- values ----------------------------------------------------------- */

tw_gguf_vtype tw_gguf_value_type(const tw_gguf_value *v);

/* Scalar conversions with the same rules as the typed getters above. */
bool tw_gguf_value_u64(const tw_gguf_value *v, uint64_t *out);
bool tw_gguf_value_i64(const tw_gguf_value *v, int64_t *out);
bool tw_gguf_value_f64(const tw_gguf_value *v, double *out);
bool tw_gguf_value_bool(const tw_gguf_value *v, bool *out);
/* NUL-terminated string owned by the tw_gguf, or NULL when v is not a string. */
const char *tw_gguf_value_str(const tw_gguf_value *v, size_t *len);

/* Arrays. tw_gguf_array_type() is the element type; tw_gguf_array_len() is 0
 * for a value that is not an array. Element accessors return false / NULL
 * when v is not an array of a compatible type or i is out of range. */
tw_gguf_vtype tw_gguf_array_type(const tw_gguf_value *v);
uint64_t tw_gguf_array_len(const tw_gguf_value *v);
bool tw_gguf_array_u64(const tw_gguf_value *v, uint64_t i, uint64_t *out);
bool tw_gguf_array_i64(const tw_gguf_value *v, uint64_t i, int64_t *out);
bool tw_gguf_array_f64(const tw_gguf_value *v, uint64_t i, double *out);
/* f32 arrays (and other numeric arrays) as float; the common case for token
 * scores. */
bool tw_gguf_array_f32(const tw_gguf_value *v, uint64_t i, float *out);
const char *tw_gguf_array_str(const tw_gguf_value *v, uint64_t i, size_t *len);
/* Element i of an array of arrays. */
const tw_gguf_value *tw_gguf_array_elem(const tw_gguf_value *v, uint64_t i);
/* Raw little-endian element bytes of a numeric (or bool) array, straight
 * from the file and possibly unaligned; NULL for string and nested arrays. */
const void *tw_gguf_array_data(const tw_gguf_value *v);

/* ---- tensors ---------------------------------------------------------- */

int64_t tw_gguf_tensor_count(const tw_gguf *g);
/* Tensor i in file order; NULL when out of range. */
const tw_gguf_tensor *tw_gguf_tensor_at(const tw_gguf *g, int64_t i);
/* Tensor by name; NULL when absent. */
const tw_gguf_tensor *tw_gguf_find_tensor(const tw_gguf *g, const char *name);
/* Like tw_gguf_find_tensor() but a missing tensor or one whose type cannot be
 * computed with is an error naming it (TW_NOT_FOUND / TW_UNIMPLEMENTED). */
tw_status tw_gguf_get_tensor(const tw_gguf *g, const char *name,
                             const tw_gguf_tensor **out, tw_err *err);

/* Bytes of n elements of ggml type t, for every type ggml defines (not only
 * the ones tokenwire computes with). Returns false for an unknown type, an n
 * that is not a multiple of the block size, or overflow. */
bool tw_gguf_type_nbytes(uint32_t type, uint64_t n, uint64_t *out);
/* Name of any ggml type ("Q4_K", "IQ2_XS", ...); "?" when unknown. */
const char *tw_gguf_type_name(uint32_t type);

/* ---- writer ----------------------------------------------------------- */

/* Builds a GGUF v3 file in memory (metadata and tensor descriptions) and
 * writes it with tw_gguf_writer_write(). Keys and tensors keep the order in
 * which they were first added; setting a key again replaces its value. Not
 * thread-safe; one writer per thread. */
typedef struct tw_gguf_writer tw_gguf_writer;

/* An array value under construction (elements of one type; for
 * TW_GGUF_ARRAY elements, each is itself a tw_gguf_warr). */
typedef struct tw_gguf_warr tw_gguf_warr;

tw_status tw_gguf_writer_new(tw_gguf_writer **out, tw_err *err);
void tw_gguf_writer_free(tw_gguf_writer *w);

/* Scalar and string keys. Keys are non-empty, at most 65535 bytes. */
tw_status tw_gguf_writer_set_u8(tw_gguf_writer *w, const char *key, uint8_t v, tw_err *err);
tw_status tw_gguf_writer_set_i8(tw_gguf_writer *w, const char *key, int8_t v, tw_err *err);
tw_status tw_gguf_writer_set_u16(tw_gguf_writer *w, const char *key, uint16_t v, tw_err *err);
tw_status tw_gguf_writer_set_i16(tw_gguf_writer *w, const char *key, int16_t v, tw_err *err);
tw_status tw_gguf_writer_set_u32(tw_gguf_writer *w, const char *key, uint32_t v, tw_err *err);
tw_status tw_gguf_writer_set_i32(tw_gguf_writer *w, const char *key, int32_t v, tw_err *err);
tw_status tw_gguf_writer_set_u64(tw_gguf_writer *w, const char *key, uint64_t v, tw_err *err);
tw_status tw_gguf_writer_set_i64(tw_gguf_writer *w, const char *key, int64_t v, tw_err *err);
tw_status tw_gguf_writer_set_f32(tw_gguf_writer *w, const char *key, float v, tw_err *err);
tw_status tw_gguf_writer_set_f64(tw_gguf_writer *w, const char *key, double v, tw_err *err);
tw_status tw_gguf_writer_set_bool(tw_gguf_writer *w, const char *key, bool v, tw_err *err);
tw_status tw_gguf_writer_set_str(tw_gguf_writer *w, const char *key, const char *v, tw_err *err);
/* A string with explicit length (may contain NUL bytes). */
tw_status tw_gguf_writer_set_strn(tw_gguf_writer *w, const char *key, const char *v, size_t len,
                                  tw_err *err);

/* Numeric/bool array from n packed little-endian elements of elem_type
 * (copied). */
tw_status tw_gguf_writer_set_arr_data(tw_gguf_writer *w, const char *key, tw_gguf_vtype elem_type,
                                      const void *data, size_t n, tw_err *err);
/* String array (copied); strs[i] are NUL-terminated. */
tw_status tw_gguf_writer_set_arr_strs(tw_gguf_writer *w, const char *key,
                                      const char *const *strs, size_t n, tw_err *err);
/* Any array, including nested ones. Takes ownership of arr, also on failure. */
tw_status tw_gguf_writer_set_arr(tw_gguf_writer *w, const char *key, tw_gguf_warr *arr,
                                 tw_err *err);
/* Removes a key if present. */
void tw_gguf_writer_remove(tw_gguf_writer *w, const char *key);

tw_status tw_gguf_warr_new(tw_gguf_vtype elem_type, tw_gguf_warr **out, tw_err *err);
void tw_gguf_warr_free(tw_gguf_warr *a);
/* Appends one element; value points to one element of the array's numeric
 * type in host representation (uint32_t for U32, bool for BOOL, ...). */
tw_status tw_gguf_warr_push_num(tw_gguf_warr *a, const void *value, tw_err *err);
tw_status tw_gguf_warr_push_str(tw_gguf_warr *a, const char *s, size_t len, tw_err *err);
/* Appends a nested array; takes ownership of inner, also on failure. */
tw_status tw_gguf_warr_push_arr(tw_gguf_warr *a, tw_gguf_warr *inner, tw_err *err);

/* Produces the bytes of one tensor at write time, so a converter need not
 * hold every converted tensor in memory. Fills exactly nbytes at dst. */
typedef tw_status (*tw_gguf_fill_fn)(void *ctx, void *dst, size_t nbytes, tw_err *err);

/* Adds a tensor whose nbytes bytes of data are copied now. dims are in GGUF
 * order (dims[0] = row length); nbytes must equal the size implied by type
 * and dims. Names are unique, non-empty and shorter than 64 bytes (the
 * limit llama.cpp enforces). */
tw_status tw_gguf_writer_add_tensor(tw_gguf_writer *w, const char *name, uint32_t type,
                                    uint32_t n_dims, const uint64_t *dims, const void *data,
                                    size_t nbytes, tw_err *err);
/* Adds a tensor whose data fill(ctx, ...) produces during
 * tw_gguf_writer_write(). ctx is borrowed and must outlive the write. */
tw_status tw_gguf_writer_add_tensor_fn(tw_gguf_writer *w, const char *name, uint32_t type,
                                       uint32_t n_dims, const uint64_t *dims,
                                       tw_gguf_fill_fn fill, void *ctx, tw_err *err);

/* Writes a GGUF v3 file with 32-byte alignment, or the alignment the caller
 * set as a u32 power of two in general.alignment (the key is written only
 * when set). Writes to a temporary file next to path,
 * fsyncs it and renames it over path, so readers never see a partial file;
 * on failure path is untouched and the temporary file is removed. Blocks on
 * file I/O. */
tw_status tw_gguf_writer_write(tw_gguf_writer *w, const char *path, tw_err *err);

#endif
