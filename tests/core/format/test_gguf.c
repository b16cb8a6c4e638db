#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/gguf.h"

/* Writes one file holding every metadata type, nested arrays and tensors of
 * several types, then reads everything back. */
static char *write_sample(const char *dir)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/sample.gguf", dir);
    tw_err err;
    tw_gguf_writer *w;
    assert_int_equal(tw_gguf_writer_new(&w, &err), TW_OK);
    assert_int_equal(tw_gguf_writer_set_u8(w, "t.u8", 200, &err), TW_OK);
    assert_int_equal(tw_gguf_writer_set_i8(w, "t.i8", -100, &err), TW_OK);
    assert_int_equal(tw_gguf_writer_set_u16(w, "t.u16", 65000, &err), TW_OK);
    assert_int_equal(tw_gguf_writer_set_i16(w, "t.i16", -32000, &err), TW_OK);
    assert_int_equal(tw_gguf_writer_set_u32(w, "t.u32", 4000000000u, &err), TW_OK);
    assert_int_equal(tw_gguf_writer_set_i32(w, "t.i32", -7, &err), TW_OK);
    assert_int_equal(tw_gguf_writer_set_u64(w, "t.u64", 1ull << 60, &err), TW_OK);
    assert_int_equal(tw_gguf_writer_set_i64(w, "t.i64", -(1ll << 50), &err), TW_OK);
    assert_int_equal(tw_gguf_writer_set_f32(w, "t.f32", 1.5f, &err), TW_OK);
    assert_int_equal(tw_gguf_writer_set_f64(w, "t.f64", 0.1, &err), TW_OK);
    assert_int_equal(tw_gguf_writer_set_bool(w, "t.bool", true, &err), TW_OK);
    assert_int_equal(tw_gguf_writer_set_str(w, "t.str", "héllo", &err), TW_OK);
    assert_int_equal(tw_gguf_writer_set_strn(w, "t.nul", "a\0b", 3, &err), TW_OK);
    /* replacing a key keeps one entry */
    assert_int_equal(tw_gguf_writer_set_i32(w, "t.replaced", 1, &err), TW_OK);
    assert_int_equal(tw_gguf_writer_set_str(w, "t.replaced", "two", &err), TW_OK);

    const float fs[3] = {0.25f, -2.0f, 1e30f};
    assert_int_equal(tw_gguf_writer_set_arr_data(w, "t.arr_f32", TW_GGUF_F32, fs, 3, &err), TW_OK);
    const int32_t is[4] = {-1, 0, 1, INT32_MAX};
    assert_int_equal(tw_gguf_writer_set_arr_data(w, "t.arr_i32", TW_GGUF_I32, is, 4, &err), TW_OK);
    const bool bs[3] = {true, false, true};
    assert_int_equal(tw_gguf_writer_set_arr_data(w, "t.arr_bool", TW_GGUF_BOOL, bs, 3, &err),
                     TW_OK);
    const char *strs[3] = {"a", "", "ccc"};
    assert_int_equal(tw_gguf_writer_set_arr_strs(w, "t.arr_str", strs, 3, &err), TW_OK);
    assert_int_equal(tw_gguf_writer_set_arr_data(w, "t.arr_empty", TW_GGUF_U64, NULL, 0, &err),
                     TW_OK);

    /* [[1,2],[["x"],[]]]: an array of arrays whose elements differ in type */
    tw_gguf_warr *outer, *a, *b, *b0, *b1;
    assert_int_equal(tw_gguf_warr_new(TW_GGUF_ARRAY, &outer, &err), TW_OK);
    assert_int_equal(tw_gguf_warr_new(TW_GGUF_U16, &a, &err), TW_OK);
    uint16_t one = 1, two = 2;
    assert_int_equal(tw_gguf_warr_push_num(a, &one, &err), TW_OK);
    assert_int_equal(tw_gguf_warr_push_num(a, &two, &err), TW_OK);
    assert_int_equal(tw_gguf_warr_new(TW_GGUF_ARRAY, &b, &err), TW_OK);
    assert_int_equal(tw_gguf_warr_new(TW_GGUF_STRING, &b0, &err), TW_OK);
    assert_int_equal(tw_gguf_warr_push_str(b0, "x", 1, &err), TW_OK);
    assert_int_equal(tw_gguf_warr_new(TW_GGUF_F64, &b1, &err), TW_OK);
    assert_int_equal(tw_gguf_warr_push_arr(b, b0, &err), TW_OK);
    assert_int_equal(tw_gguf_warr_push_arr(b, b1, &err), TW_OK);
    assert_int_equal(tw_gguf_warr_push_arr(outer, a, &err), TW_OK);
    assert_int_equal(tw_gguf_warr_push_arr(outer, b, &err), TW_OK);
    /* a type mismatch is refused */
    assert_int_equal(tw_gguf_warr_push_str(outer, "no", 2, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_gguf_writer_set_arr(w, "t.nested", outer, &err), TW_OK);

    float f32data[2 * 3] = {1, 2, 3, 4, 5, 6};
    uint64_t d23[2] = {3, 2};
    assert_int_equal(
        tw_gguf_writer_add_tensor(w, "a.weight", TW_TYPE_F32, 2, d23, f32data, sizeof f32data, &err),
        TW_OK);
    uint8_t q8[34 * 2];
    for (size_t i = 0; i < sizeof q8; i++)
        q8[i] = (uint8_t)i;
    uint64_t d64[1] = {64};
    assert_int_equal(tw_gguf_writer_add_tensor(w, "b.q8", TW_TYPE_Q8_0, 1, d64, q8, sizeof q8, &err),
                     TW_OK);
    /* wrong byte count, duplicate name and a row that is not whole blocks */
    assert_int_equal(tw_gguf_writer_add_tensor(w, "c", TW_TYPE_F32, 1, d64, q8, 3, &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(tw_gguf_writer_add_tensor(w, "a.weight", TW_TYPE_F32, 2, d23, f32data,
                                               sizeof f32data, &err),
                     TW_ALREADY_EXISTS);
    assert_int_equal(tw_gguf_writer_add_tensor(w, "d", TW_TYPE_Q8_0, 2, d23, q8, 34, &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(tw_gguf_writer_write(w, path, &err), TW_OK);
    tw_gguf_writer_free(w);
    return path;
}

static const float f32data_expected[6] = {1, 2, 3, 4, 5, 6};

static void test_round_trip_every_type(void **state)
{
    (void)state;
    char *dir = tw_test_mkdtemp();
    const char *path = write_sample(dir);
    tw_err err;
    tw_gguf *g;
    assert_int_equal(tw_gguf_open(path, &g, &err), TW_OK);
    assert_int_equal(tw_gguf_version(g), 3);
    assert_int_equal(tw_gguf_alignment(g), 32);
    assert_int_equal(tw_gguf_data_offset(g) % 32, 0);

    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
    bool b;
    const char *s;
    size_t len;
    assert_int_equal(tw_gguf_get_u32(g, "t.u8", &u32, &err), TW_OK);
    assert_int_equal(u32, 200);
    assert_int_equal(tw_gguf_get_i32(g, "t.i8", &i32, &err), TW_OK);
    assert_int_equal(i32, -100);
    assert_int_equal(tw_gguf_get_u32(g, "t.u16", &u32, &err), TW_OK);
    assert_int_equal(u32, 65000);
    assert_int_equal(tw_gguf_get_i32(g, "t.i16", &i32, &err), TW_OK);
    assert_int_equal(i32, -32000);
    assert_int_equal(tw_gguf_get_u32(g, "t.u32", &u32, &err), TW_OK);
    assert_int_equal(u32, 4000000000u);
    /* 4e9 does not fit an i32: refused, and the output is left alone */
    i32 = 42;
    assert_int_equal(tw_gguf_get_i32(g, "t.u32", &i32, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(i32, 42);
    assert_non_null(strstr(err.msg, "t.u32"));
    /* a negative value is not a u64 */
    assert_int_equal(tw_gguf_get_u64(g, "t.i32", &u64, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_gguf_get_i64(g, "t.i32", &i64, &err), TW_OK);
    assert_int_equal(i64, -7);
    assert_int_equal(tw_gguf_get_u64(g, "t.u64", &u64, &err), TW_OK);
    assert_int_equal(u64, 1ull << 60);
    assert_int_equal(tw_gguf_get_i64(g, "t.i64", &i64, &err), TW_OK);
    assert_int_equal(i64, -(1ll << 50));
    assert_int_equal(tw_gguf_get_f32(g, "t.f32", &f32, &err), TW_OK);
    assert_true(f32 == 1.5f);
    assert_int_equal(tw_gguf_get_f64(g, "t.f64", &f64, &err), TW_OK);
    assert_true(f64 == 0.1);
    /* integers read as floats; floats do not read as integers */
    assert_int_equal(tw_gguf_get_f64(g, "t.i32", &f64, &err), TW_OK);
    assert_true(f64 == -7.0);
    assert_int_equal(tw_gguf_get_u32(g, "t.f32", &u32, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_gguf_get_bool(g, "t.bool", &b, &err), TW_OK);
    assert_true(b);
    assert_int_equal(tw_gguf_get_bool(g, "t.u8", &b, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_gguf_get_str(g, "t.str", &s, &len, &err), TW_OK);
    assert_string_equal(s, "héllo");
    assert_int_equal(len, strlen("héllo"));
    assert_int_equal(tw_gguf_get_str(g, "t.nul", &s, &len, &err), TW_OK);
    assert_int_equal(len, 3);
    assert_memory_equal(s, "a\0b", 3);
    assert_int_equal(tw_gguf_get_str(g, "t.replaced", &s, NULL, &err), TW_OK);
    assert_string_equal(s, "two");
    assert_int_equal(tw_gguf_get_u32(g, "missing.key", &u32, &err), TW_NOT_FOUND);
    assert_non_null(strstr(err.msg, "missing.key"));
    assert_int_equal(tw_gguf_key_count(g), 20);
    assert_string_equal(tw_gguf_key_name(g, 0), "t.u8");
    assert_null(tw_gguf_key_name(g, 20));

    const tw_gguf_value *v;
    assert_int_equal(tw_gguf_get_arr(g, "t.arr_f32", &v, &err), TW_OK);
    assert_int_equal(tw_gguf_array_type(v), TW_GGUF_F32);
    assert_int_equal(tw_gguf_array_len(v), 3);
    assert_true(tw_gguf_array_f32(v, 1, &f32) && f32 == -2.0f);
    assert_true(tw_gguf_array_f32(v, 2, &f32) && f32 == 1e30f);
    assert_false(tw_gguf_array_f32(v, 3, &f32));
    assert_false(tw_gguf_array_i64(v, 0, &i64));
    assert_int_equal(tw_gguf_get_arr(g, "t.arr_i32", &v, &err), TW_OK);
    assert_true(tw_gguf_array_i64(v, 0, &i64) && i64 == -1);
    assert_false(tw_gguf_array_u64(v, 0, &u64));
    assert_true(tw_gguf_array_u64(v, 3, &u64) && u64 == INT32_MAX);
    assert_non_null(tw_gguf_array_data(v));
    assert_int_equal(tw_gguf_get_arr(g, "t.arr_bool", &v, &err), TW_OK);
    assert_int_equal(tw_gguf_array_type(v), TW_GGUF_BOOL);
    assert_true(tw_gguf_array_u64(v, 0, &u64) == false); /* bools are not integers */
    assert_int_equal(((const uint8_t *)tw_gguf_array_data(v))[2], 1);
    assert_int_equal(tw_gguf_get_arr(g, "t.arr_str", &v, &err), TW_OK);
    assert_string_equal(tw_gguf_array_str(v, 0, &len), "a");
    assert_string_equal(tw_gguf_array_str(v, 1, &len), "");
    assert_int_equal(len, 0);
    assert_string_equal(tw_gguf_array_str(v, 2, NULL), "ccc");
    assert_null(tw_gguf_array_str(v, 3, NULL));
    assert_int_equal(tw_gguf_get_arr(g, "t.arr_empty", &v, &err), TW_OK);
    assert_int_equal(tw_gguf_array_len(v), 0);
    assert_int_equal(tw_gguf_get_arr(g, "t.str", &v, &err), TW_INVALID_ARGUMENT);

    assert_int_equal(tw_gguf_get_arr(g, "t.nested", &v, &err), TW_OK);
    assert_int_equal(tw_gguf_array_type(v), TW_GGUF_ARRAY);
    assert_int_equal(tw_gguf_array_len(v), 2);
    const tw_gguf_value *e0 = tw_gguf_array_elem(v, 0), *e1 = tw_gguf_array_elem(v, 1);
    assert_null(tw_gguf_array_elem(v, 2));
    assert_int_equal(tw_gguf_array_type(e0), TW_GGUF_U16);
    assert_true(tw_gguf_array_u64(e0, 1, &u64) && u64 == 2);
    assert_int_equal(tw_gguf_array_type(e1), TW_GGUF_ARRAY);
    assert_string_equal(tw_gguf_array_str(tw_gguf_array_elem(e1, 0), 0, NULL), "x");
    assert_int_equal(tw_gguf_array_type(tw_gguf_array_elem(e1, 1)), TW_GGUF_F64);
    assert_int_equal(tw_gguf_array_len(tw_gguf_array_elem(e1, 1)), 0);

    assert_int_equal(tw_gguf_tensor_count(g), 2);
    const tw_gguf_tensor *t = tw_gguf_find_tensor(g, "a.weight");
    assert_non_null(t);
    assert_int_equal(t->type, TW_TYPE_F32);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->dims[0], 3);
    assert_int_equal(t->dims[1], 2);
    assert_int_equal(t->dims[2], 1);
    assert_int_equal(t->n_elems, 6);
    assert_int_equal(t->nbytes, 24);
    assert_int_equal(t->offset % 32, 0);
    assert_memory_equal(t->data, f32data_expected, 24);
    assert_int_equal(tw_gguf_get_tensor(g, "b.q8", &t, &err), TW_OK);
    assert_int_equal(t->nbytes, 68);
    assert_int_equal(((const uint8_t *)t->data)[67], 67);
    assert_int_equal(t->offset % 32, 0);
    assert_int_equal(tw_gguf_get_tensor(g, "nope", &t, &err), TW_NOT_FOUND);
    assert_non_null(strstr(err.msg, "nope"));
    assert_ptr_equal(tw_gguf_tensor_at(g, 1), tw_gguf_find_tensor(g, "b.q8"));
    tw_gguf_close(g);

    /* the same bytes through the memory entry point */
    size_t flen;
    char *bytes = tw_test_read_file(path, &flen);
    assert_non_null(bytes);
    assert_int_equal(tw_gguf_open_memory(bytes, flen, &g, &err), TW_OK);
    assert_int_equal(tw_gguf_tensor_count(g), 2);
    tw_gguf_close(g);
    free(bytes);
    tw_test_rmtree(dir);
    free(dir);
}

static void test_writer_refuses_bad_input(void **state)
{
    (void)state;
    tw_err err;
    tw_gguf_writer *w;
    assert_int_equal(tw_gguf_writer_new(&w, &err), TW_OK);
    assert_int_equal(tw_gguf_writer_set_u32(w, "", 1, &err), TW_INVALID_ARGUMENT);
    char longname[80];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    float x[32] = {0};
    uint64_t d[1] = {32};
    assert_int_equal(tw_gguf_writer_add_tensor(w, longname, TW_TYPE_F32, 1, d, x, sizeof x, &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(tw_gguf_writer_add_tensor(w, "t", 99, 1, d, x, sizeof x, &err),
                     TW_INVALID_ARGUMENT);
    /* the target directory does not exist: the error names the path */
    assert_int_equal(tw_gguf_writer_write(w, "/nonexistent-dir/x.gguf", &err), TW_NOT_FOUND);
    assert_non_null(strstr(err.msg, "/nonexistent-dir/x.gguf"));
    tw_gguf_writer_free(w);
}

static tw_status fail_fill(void *ctx, void *dst, size_t n, tw_err *err)
{
    (void)ctx;
    (void)dst;
    (void)n;
    return tw_errorf(err, TW_DATA_LOSS, "source went away");
}

static tw_status ramp_fill(void *ctx, void *dst, size_t n, tw_err *err)
{
    (void)err;
    float *f = dst;
    for (size_t i = 0; i < n / 4; i++)
        f[i] = (float)i * *(const float *)ctx;
    return TW_OK;
}

static void test_fill_callbacks_and_atomic_write(void **state)
{
    (void)state;
    char *dir = tw_test_mkdtemp();
    char path[4096];
    snprintf(path, sizeof path, "%s/cb.gguf", dir);
    tw_err err;
    tw_gguf_writer *w;
    float scale = 0.5f;
    uint64_t d[2] = {8, 4};
    assert_int_equal(tw_gguf_writer_new(&w, &err), TW_OK);
    assert_int_equal(tw_gguf_writer_add_tensor_fn(w, "ramp", TW_TYPE_F32, 2, d, ramp_fill, &scale,
                                                  &err),
                     TW_OK);
    assert_int_equal(tw_gguf_writer_write(w, path, &err), TW_OK);
    assert_int_equal(tw_gguf_writer_add_tensor_fn(w, "bad", TW_TYPE_F32, 2, d, fail_fill, NULL,
                                                  &err),
                     TW_OK);
    /* a failing producer leaves the earlier file untouched and no temp file */
    assert_int_equal(tw_gguf_writer_write(w, path, &err), TW_DATA_LOSS);
    assert_non_null(strstr(err.msg, "source went away"));
    tw_gguf_writer_free(w);

    tw_gguf *g;
    assert_int_equal(tw_gguf_open(path, &g, &err), TW_OK);
    const tw_gguf_tensor *t = tw_gguf_find_tensor(g, "ramp");
    assert_non_null(t);
    assert_int_equal(t->n_elems, 32);
    assert_true(((const float *)t->data)[31] == 15.5f);
    assert_null(tw_gguf_find_tensor(g, "bad"));
    tw_gguf_close(g);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    assert_int_equal(fscanf(p, "%d", &n), 1);
    pclose(p);
    assert_int_equal(n, 0);
    tw_test_rmtree(dir);
    free(dir);
}

static void test_vocab_files_open(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    static const struct {
        const char *name;
        uint64_t n_tokens;
        const char *model;
    } vocabs[] = {
        {"gpt-2", 50257, "gpt2"},          {"llama-spm", 32000, "llama"},
        {"phi-3", 32064, "llama"},         {"deepseek-llm", 102400, "gpt2"},
        {"mpt", 50432, "gpt2"},
    };
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
        char rel[256], path[4096];
        snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", vocabs[i].name);
        tw_test_shared_path(path, sizeof path, rel);
        tw_err err;
        tw_gguf *g;
        assert_int_equal(tw_gguf_open(path, &g, &err), TW_OK);
        const tw_gguf_value *tokens, *types;
        assert_int_equal(tw_gguf_get_arr(g, "tokenizer.ggml.tokens", &tokens, &err), TW_OK);
        assert_int_equal(tw_gguf_array_type(tokens), TW_GGUF_STRING);
        assert_int_equal(tw_gguf_array_len(tokens), vocabs[i].n_tokens);
        assert_int_equal(tw_gguf_get_arr(g, "tokenizer.ggml.token_type", &types, &err), TW_OK);
        assert_int_equal(tw_gguf_array_len(types), vocabs[i].n_tokens);
        const char *model;
        assert_int_equal(tw_gguf_get_str(g, "tokenizer.ggml.model", &model, NULL, &err), TW_OK);
        assert_string_equal(model, vocabs[i].model);
        assert_int_equal(tw_gguf_tensor_count(g), 0);
        tw_gguf_close(g);
    }
    /* spot values: the gpt-2 vocabulary starts with "!" and BOS is 50256 */
    char path[4096];
    tw_test_shared_path(path, sizeof path, "vocab/ggml-vocab-gpt-2.gguf");
    tw_gguf *g;
    tw_err err;
    assert_int_equal(tw_gguf_open(path, &g, &err), TW_OK);
    const tw_gguf_value *tokens = tw_gguf_get(g, "tokenizer.ggml.tokens");
    assert_string_equal(tw_gguf_array_str(tokens, 0, NULL), "!");
    uint32_t bos;
    assert_int_equal(tw_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &bos, &err), TW_OK);
    assert_int_equal(bos, 50256);
    tw_gguf_close(g);
}

/* Reading the file into huge-page memory gives the same metadata and the
 * same tensor bytes as the mapping, at a 2 MiB-aligned address. */
static void test_open_huge_pages(void **state)
{
    (void)state;
    char *dir = tw_test_mkdtemp();
    const char *path = write_sample(dir);
    tw_err err;
    tw_gguf *g = NULL, *h = NULL;
    assert_int_equal(tw_gguf_open(path, &g, &err), TW_OK);
    assert_int_equal(tw_gguf_open_ex(path, TW_GGUF_HUGE_PAGES, &h, &err), TW_OK);
    int64_t n = tw_gguf_tensor_count(g);
    assert_true(n > 0);
    assert_int_equal(tw_gguf_tensor_count(h), n);
    for (int64_t i = 0; i < n; i++) {
        const tw_gguf_tensor *a = tw_gguf_tensor_at(g, i), *b = tw_gguf_tensor_at(h, i);
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->nbytes, b->nbytes);
        assert_ptr_not_equal(a->data, b->data);
        assert_memory_equal(a->data, b->data, a->nbytes);
    }
    /* the file starts on a huge-page boundary */
    const tw_gguf_tensor *first = tw_gguf_tensor_at(h, 0);
    assert_non_null(first->data);
    assert_int_equal(((uintptr_t)first->data - first->offset) % (2u << 20), 0);
    uint32_t u32 = 0;
    assert_int_equal(tw_gguf_get_u32(h, "t.u32", &u32, &err), TW_OK);
    assert_int_equal(u32, 4000000000u);
    tw_gguf_close(g);
    tw_gguf_close(h);

    /* the same errors as a mapping, and no unknown flags */
    assert_int_equal(tw_gguf_open_ex("/nonexistent/model.gguf", TW_GGUF_HUGE_PAGES, &h, &err),
                     TW_NOT_FOUND);
    assert_null(h);
    assert_int_equal(tw_gguf_open_ex("/", TW_GGUF_HUGE_PAGES, &h, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_gguf_open_ex(path, 1u << 7, &h, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "flags"));
    tw_test_rmtree(dir);
    free(dir);
}

/* Overwrites byte `at` of the file at path with its complement. */
static void flip_byte(const char *path, long at)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, at, SEEK_SET), 0);
    int c = fgetc(f);
    assert_true(c != EOF);
    assert_int_equal(fseek(f, at, SEEK_SET), 0);
    assert_int_equal(fputc(~c & 0xff, f), ~c & 0xff);
    assert_int_equal(fclose(f), 0);
}

/* A view of the file behind a huge-page copy holds the copy's bytes, and
 * outlives the gguf; it is refused for a mapped file, for ranges outside
 * the copy, and once the file no longer holds what the copy read. */
static void test_file_view(void **state)
{
    (void)state;
    char *dir = tw_test_mkdtemp();
    const char *path = write_sample(dir);
    tw_err err;
    tw_gguf *g = NULL, *h = NULL;
    tw_file_view v = {0};
    assert_int_equal(tw_gguf_open(path, &g, &err), TW_OK);
    const tw_gguf_tensor *mt = tw_gguf_tensor_at(g, 0);
    assert_int_equal(tw_gguf_file_view(g, mt->data, mt->nbytes, &v, &err), TW_FAILED_PRECONDITION);
    assert_null(v.data);
    tw_gguf_close(g);

    assert_int_equal(tw_gguf_open_ex(path, TW_GGUF_HUGE_PAGES, &h, &err), TW_OK);
    const int64_t n = tw_gguf_tensor_count(h);
    const tw_gguf_tensor *last = tw_gguf_tensor_at(h, n - 1);
    const uint8_t *base = (const uint8_t *)last->data - last->offset;
    const uint64_t size = tw_gguf_file_size(h);
    /* every tensor, then the whole file from its first byte */
    for (int64_t i = 0; i < n; i++) {
        const tw_gguf_tensor *t = tw_gguf_tensor_at(h, i);
        assert_int_equal(tw_gguf_file_view(h, t->data, t->nbytes, &v, &err), TW_OK);
        assert_ptr_not_equal(v.data, t->data);
        assert_memory_equal(v.data, t->data, t->nbytes);
        tw_file_view_release(&v);
        assert_null(v.data);
    }
    assert_int_equal(tw_gguf_file_view(h, base, size, &v, &err), TW_OK);
    /* outside the copy, empty, or running past its end */
    tw_file_view w;
    assert_int_equal(tw_gguf_file_view(h, base - 1, 1, &w, &err), TW_OUT_OF_RANGE);
    assert_int_equal(tw_gguf_file_view(h, base + size + 1, 1, &w, &err), TW_OUT_OF_RANGE);
    assert_int_equal(tw_gguf_file_view(h, base + 8, size - 7, &w, &err), TW_OUT_OF_RANGE);
    assert_int_equal(tw_gguf_file_view(h, base, 0, &w, &err), TW_OUT_OF_RANGE);
    assert_int_equal(tw_gguf_file_view(h, NULL, 1, &w, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_gguf_file_view(h, base, 1, NULL, &err), TW_INVALID_ARGUMENT);
    assert_null(w.data);

    /* a byte of the last tensor changed on disk: its view is refused, one
     * of the first tensor still agrees */
    flip_byte(path, (long)(last->offset + last->nbytes - 1));
    assert_int_equal(tw_gguf_file_view(h, last->data, last->nbytes, &w, &err), TW_DATA_LOSS);
    assert_non_null(strstr(err.msg, "differ"));
    const tw_gguf_tensor *first = tw_gguf_tensor_at(h, 0);
    assert_int_equal(tw_gguf_file_view(h, first->data, first->nbytes, &w, &err), TW_OK);
    tw_file_view_release(&w);
    /* the file grown: refused whatever the range */
    FILE *f = fopen(path, "ab");
    assert_non_null(f);
    assert_int_equal(fputc(0, f), 0);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(tw_gguf_file_view(h, first->data, first->nbytes, &w, &err), TW_DATA_LOSS);
    tw_gguf_close(h);

    /* the view taken before the change still reads (the page cache now
     * holds the new byte there) after the gguf is gone */
    assert_int_equal(((const uint8_t *)v.data)[0], 'G');
    tw_file_view_release(&v);
    tw_file_view_release(&v);
    tw_file_view_release(NULL);
    tw_test_rmtree(dir);
    free(dir);
}

static void test_missing_file(void **state)
{
    (void)state;
    tw_err err;
    tw_gguf *g = (tw_gguf *)1;
    assert_int_equal(tw_gguf_open("/nonexistent/model.gguf", &g, &err), TW_NOT_FOUND);
    assert_null(g);
    assert_non_null(strstr(err.msg, "/nonexistent/model.gguf"));
    assert_int_equal(tw_gguf_open("/", &g, &err), TW_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_type),
        cmocka_unit_test(test_writer_refuses_bad_input),
        cmocka_unit_test(test_fill_callbacks_and_atomic_write),
        cmocka_unit_test(test_vocab_files_open),
        cmocka_unit_test(test_open_huge_pages),
        cmocka_unit_test(test_file_view),
        cmocka_unit_test(test_missing_file),
    };
    return cmocka_run_group_tests_name("core/format/gguf", tests, NULL, NULL);
}
