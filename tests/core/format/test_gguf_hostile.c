/* Damaged and hostile GGUF files must be refused with a status and a
 * message: never a crash, an out-of-bounds read (ASan), a hang or a leak. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/gguf.h"
#include "tw/gguf_arch.h"

/* A hand-built file, so the offsets of every field are known. */
typedef struct buf {
    uint8_t d[4096];
    size_t n;
} buf;

static size_t put(buf *b, const void *p, size_t n)
{
    size_t at = b->n;
    memcpy(b->d + b->n, p, n);
    b->n += n;
    return at;
}
static size_t put_u32(buf *b, uint32_t v) { return put(b, &v, 4); }
static size_t put_u64(buf *b, uint64_t v) { return put(b, &v, 8); }
static size_t put_str(buf *b, const char *s)
{
    size_t at = put_u64(b, strlen(s));
    put(b, s, strlen(s));
    return at;
}

typedef struct layout {
    size_t n_tensors, n_kv, key0_len, arr_len, align_val, t0_ndims, t0_dim0, t0_type, t0_off,
        t1_off, t1_name, data_start, data_end;
} layout;

static void build(buf *b, layout *L)
{
    memset(b, 0, sizeof *b);
    put_u32(b, 0x46554747u);
    put_u32(b, 3);
    L->n_tensors = put_u64(b, 2);
    L->n_kv = put_u64(b, 3);
    L->key0_len = put_str(b, "general.architecture");
    put_u32(b, TW_GGUF_STRING);
    put_str(b, "llama");
    put_str(b, "t.arr");
    put_u32(b, TW_GGUF_ARRAY);
    put_u32(b, TW_GGUF_STRING);
    L->arr_len = put_u64(b, 2);
    put_str(b, "ab");
    put_str(b, "c");
    put_str(b, "general.alignment");
    put_u32(b, TW_GGUF_U32);
    L->align_val = put_u32(b, 32);
    /* tensor 0: f32 {8, 2}, 64 bytes at 0; tensor 1: f32 {16}, 64 bytes at 64 */
    put_str(b, "w0");
    L->t0_ndims = put_u32(b, 2);
    L->t0_dim0 = put_u64(b, 8);
    put_u64(b, 2);
    L->t0_type = put_u32(b, TW_TYPE_F32);
    L->t0_off = put_u64(b, 0);
    L->t1_name = put_str(b, "w1");
    put_u32(b, 1);
    put_u64(b, 16);
    put_u32(b, TW_TYPE_F32);
    L->t1_off = put_u64(b, 64);
    while (b->n % 32)
        b->d[b->n++] = 0;
    L->data_start = b->n;
    for (int i = 0; i < 32; i++) {
        float f = (float)i;
        put(b, &f, 4);
    }
    L->data_end = b->n;
}

/* Opens a private copy of exactly n bytes so ASan sees any over-read. */
static tw_status open_copy(const uint8_t *d, size_t n, tw_err *err)
{
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, d, n);
    tw_gguf *g = NULL;
    tw_status st = tw_gguf_open_memory(copy, n, &g, err);
    if (st == TW_OK) {
        /* walk everything a loader would touch */
        for (int64_t i = 0; i < tw_gguf_key_count(g); i++) {
            const tw_gguf_value *v = tw_gguf_key_value(g, i);
            for (uint64_t j = 0; j < tw_gguf_array_len(v); j++)
                tw_gguf_array_str(v, j, NULL);
        }
        for (int64_t i = 0; i < tw_gguf_tensor_count(g); i++) {
            const tw_gguf_tensor *t = tw_gguf_tensor_at(g, i);
            volatile uint8_t sink = 0;
            for (uint64_t k = 0; t->data && k < t->nbytes; k++)
                sink ^= ((const uint8_t *)t->data)[k];
            (void)sink;
        }
        tw_gguf_close(g);
    } else {
        assert_null(g);
        assert_true(err->msg[0] != '\0');
    }
    free(copy);
    return st;
}

static void test_valid_file_opens(void **state)
{
    (void)state;
    buf b;
    layout L;
    build(&b, &L);
    tw_err err;
    assert_int_equal(open_copy(b.d, b.n, &err), TW_OK);
}

static void test_every_truncation_is_refused(void **state)
{
    (void)state;
    buf b;
    layout L;
    build(&b, &L);
    for (size_t cut = 0; cut < b.n; cut++) {
        tw_err err = {{0}};
        tw_status st = open_copy(b.d, cut, &err);
        if (st == TW_OK)
            fail_msg("truncation at %zu of %zu was accepted", cut, b.n);
    }
}

static void expect(buf *b, tw_status want, const char *needle)
{
    tw_err err = {{0}};
    tw_status st = open_copy(b->d, b->n, &err);
    if (st != want || (needle && !strstr(err.msg, needle)))
        fail_msg("want %s containing '%s', got %s: %s", tw_status_name(want),
                 needle ? needle : "", tw_status_name(st), err.msg);
}

static void patch_u64(buf *b, size_t at, uint64_t v) { memcpy(b->d + at, &v, 8); }
static void patch_u32(buf *b, size_t at, uint32_t v) { memcpy(b->d + at, &v, 4); }

static void test_targeted_corruptions(void **state)
{
    (void)state;
    buf b;
    layout L;

    build(&b, &L);
    memcpy(b.d, "GGUG", 4);
    expect(&b, TW_INVALID_ARGUMENT, "not a GGUF file");
    build(&b, &L);
    patch_u32(&b, 4, 1);
    expect(&b, TW_INVALID_ARGUMENT, "version 1");
    build(&b, &L);
    patch_u32(&b, 4, 7);
    expect(&b, TW_INVALID_ARGUMENT, "unsupported version 7");
    build(&b, &L);
    patch_u32(&b, 4, 0x03000000u);
    expect(&b, TW_INVALID_ARGUMENT, "big-endian");

    build(&b, &L);
    patch_u64(&b, L.n_tensors, UINT64_MAX);
    expect(&b, TW_DATA_LOSS, "tensor count");
    build(&b, &L);
    patch_u64(&b, L.n_kv, 1ull << 40);
    expect(&b, TW_DATA_LOSS, "key count");
    build(&b, &L);
    patch_u64(&b, L.key0_len, UINT64_MAX - 3);
    expect(&b, TW_DATA_LOSS, "key name");
    build(&b, &L);
    patch_u64(&b, L.arr_len, 1ull << 62);
    expect(&b, TW_DATA_LOSS, "t.arr");
    build(&b, &L);
    patch_u32(&b, L.align_val, 24);
    expect(&b, TW_INVALID_ARGUMENT, "power of two");

    build(&b, &L);
    patch_u32(&b, L.t0_ndims, 5);
    expect(&b, TW_INVALID_ARGUMENT, "dimensions");
    build(&b, &L);
    patch_u64(&b, L.t0_dim0, 1ull << 62);
    expect(&b, TW_INVALID_ARGUMENT, "overflow");
    build(&b, &L);
    patch_u64(&b, L.t0_dim0, 1ull << 40);
    expect(&b, TW_DATA_LOSS, "runs past end of file");
    build(&b, &L);
    patch_u32(&b, L.t0_type, 4); /* a removed ggml type */
    expect(&b, TW_INVALID_ARGUMENT, "unknown type 4");
    build(&b, &L);
    patch_u32(&b, L.t0_type, TW_TYPE_Q8_0); /* 8 elements are not a Q8_0 block */
    expect(&b, TW_INVALID_ARGUMENT, "blocks");
    build(&b, &L);
    patch_u64(&b, L.t0_off, UINT64_MAX - 31);
    expect(&b, TW_DATA_LOSS, "tensor 'w0' data");
    build(&b, &L);
    patch_u64(&b, L.t0_off, 8);
    expect(&b, TW_INVALID_ARGUMENT, "alignment");
    build(&b, &L);
    patch_u64(&b, L.t1_off, 32); /* overlaps w0 [0, 64) */
    expect(&b, TW_DATA_LOSS, "overlap");
    build(&b, &L);
    b.d[L.t1_name + 8 + 1] = '0'; /* both tensors named "w0" */
    expect(&b, TW_INVALID_ARGUMENT, "duplicate tensor");
    build(&b, &L);
    b.d[L.t1_name + 8] = 0xff; /* not UTF-8 */
    expect(&b, TW_INVALID_ARGUMENT, "UTF-8");
    build(&b, &L);
    b.d[L.key0_len + 8] = 0; /* NUL inside a key name */
    expect(&b, TW_INVALID_ARGUMENT, "key 0");
}

/* An array nested deeper than the reader allows, and a key of unknown type. */
static void test_nesting_and_types(void **state)
{
    (void)state;
    buf b;
    memset(&b, 0, sizeof b);
    put_u32(&b, 0x46554747u);
    put_u32(&b, 3);
    put_u64(&b, 0);
    put_u64(&b, 1);
    put_str(&b, "deep");
    put_u32(&b, TW_GGUF_ARRAY);
    for (int i = 0; i < 20; i++) {
        put_u32(&b, TW_GGUF_ARRAY);
        put_u64(&b, 1);
    }
    put_u32(&b, TW_GGUF_U8);
    put_u64(&b, 0);
    expect(&b, TW_INVALID_ARGUMENT, "nested deeper");

    memset(&b, 0, sizeof b);
    put_u32(&b, 0x46554747u);
    put_u32(&b, 2);
    put_u64(&b, 0);
    put_u64(&b, 1);
    put_str(&b, "odd");
    put_u32(&b, 13);
    put_u64(&b, 0);
    expect(&b, TW_INVALID_ARGUMENT, "unknown value type 13");
}

/* Huge values written over every header position, then random byte flips:
 * whatever happens must be a clean status. */
static void test_fuzzed_headers(void **state)
{
    (void)state;
    buf b;
    layout L;
    static const uint64_t hostile[] = {UINT64_MAX, 1ull << 63, 1ull << 32, 0xffffffffull, 0};
    build(&b, &L);
    size_t header_end = L.data_start;
    for (size_t at = 0; at + 8 <= header_end; at++) {
        for (size_t h = 0; h < sizeof hostile / sizeof hostile[0]; h++) {
            build(&b, &L);
            patch_u64(&b, at, hostile[h]);
            tw_err err;
            open_copy(b.d, b.n, &err);
            build(&b, &L);
            patch_u32(&b, at, (uint32_t)hostile[h]);
            open_copy(b.d, b.n, &err);
        }
    }
    tw_test_rng rng = {0x5eed};
    for (int iter = 0; iter < 3000; iter++) {
        build(&b, &L);
        int flips = 1 + (int)(tw_test_rand_u64(&rng) % 4);
        for (int k = 0; k < flips; k++)
            b.d[tw_test_rand_u64(&rng) % header_end] ^=
                (uint8_t)(1u << (tw_test_rand_u64(&rng) % 8));
        tw_err err;
        open_copy(b.d, b.n, &err);
    }
}

/* Inputs the fuzzer (tests/fuzz/fuzz_gguf) found, kept as bytes. */

/* llama.block_count = 0xffffffff in a 182-byte file: deriving the HF config
 * looped over four billion layers, allocating a JSON string for each. */
static const uint8_t huge_block_count[] = {
    0x47, 0x47, 0x55, 0x46, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x67, 0x65, 0x6e, 0x65,
    0x72, 0x61, 0x6c, 0x2e, 0x61, 0x72, 0x63, 0x68, 0x69, 0x74, 0x65, 0x63,
    0x74, 0x75, 0x72, 0x65, 0x08, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x6c, 0x6c, 0x61, 0x6d, 0x61, 0x16, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x6c, 0x6c, 0x61, 0x6d, 0x61, 0x2e, 0x65,
    0x6d, 0x62, 0x65, 0x64, 0x64, 0x69, 0x6e, 0x67, 0x5f, 0x6c, 0x65, 0x6e,
    0x67, 0x74, 0x68, 0x04, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x11,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x6c, 0x6c, 0x61, 0x6d, 0x61,
    0x2e, 0x62, 0x6c, 0x6f, 0x63, 0x6b, 0x5f, 0x63, 0x6f, 0x75, 0x6e, 0x74,
    0x04, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x1a, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x6c, 0x6c, 0x61, 0x6d, 0x61, 0x2e, 0x61, 0x74,
    0x74, 0x65, 0x6e, 0x74, 0x69, 0x6f, 0x6e, 0x2e, 0x68, 0x65, 0x61, 0x64,
    0x5f, 0x63, 0x6f, 0x75, 0x6e, 0x74, 0x04, 0x00, 0x00, 0x00, 0x01, 0x00,
    0x00, 0x00,
};

static void test_fuzz_huge_block_count(void **state)
{
    (void)state;
    tw_gguf *g = NULL;
    tw_err err;
    assert_int_equal(tw_gguf_open_memory(huge_block_count, sizeof huge_block_count, &g, &err),
                     TW_OK);
    json_t *cfg = NULL;
    assert_int_equal(tw_gguf_to_hf_config(g, &cfg, &err), TW_INVALID_ARGUMENT);
    assert_null(cfg);
    assert_non_null(strstr(err.msg, "block_count"));
    tw_gguf_close(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_file_opens),
        cmocka_unit_test(test_every_truncation_is_refused),
        cmocka_unit_test(test_targeted_corruptions),
        cmocka_unit_test(test_nesting_and_types),
        cmocka_unit_test(test_fuzzed_headers),
        cmocka_unit_test(test_fuzz_huge_block_count),
    };
    return cmocka_run_group_tests_name("core/format/gguf_hostile", tests, NULL, NULL);
}
