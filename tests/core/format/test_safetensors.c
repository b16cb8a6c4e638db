#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/safetensors.h"

/* A file from a JSON header and data bytes. */
static size_t make_file(uint8_t *out, const char *header, const void *data, size_t data_len)
{
    uint64_t hl = strlen(header);
    memcpy(out, &hl, 8);
    memcpy(out + 8, header, hl);
    if (data_len)
        memcpy(out + 8 + hl, data, data_len);
    return 8 + hl + data_len;
}

static tw_status open_copy(const uint8_t *d, size_t n, tw_err *err)
{
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, d, n);
    tw_st_file *f = NULL;
    tw_status st = tw_st_open_memory(copy, n, &f, err);
    if (st == TW_OK) {
        for (size_t i = 0; i < tw_st_count(f); i++) {
            const tw_st_tensor *t = tw_st_tensor_at(f, i);
            volatile uint8_t sink = 0;
            for (uint64_t k = 0; k < t->nbytes; k++)
                sink ^= ((const uint8_t *)t->data)[k];
            (void)sink;
        }
        tw_st_close(f);
    } else {
        assert_null(f);
        assert_true(err->msg[0] != '\0');
    }
    free(copy);
    return st;
}

static const char *good_header =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
    "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[16,24]},"
    "\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[24,32]}}";

static void good_data(uint8_t *data)
{
    float a[4] = {1, -2, 3.5f, 0};
    uint16_t b[4] = {0x3f80, 0xc000, 0x0000, 0x4049}; /* 1, -2, 0, 3.140625 */
    int64_t s = -5;
    memcpy(data, a, 16);
    memcpy(data + 16, b, 8);
    memcpy(data + 24, &s, 8);
}

static void test_small_file(void **state)
{
    (void)state;
    uint8_t file[1024], data[32];
    good_data(data);
    size_t n = make_file(file, good_header, data, sizeof data);
    tw_err err;
    tw_st_file *f;
    assert_int_equal(tw_st_open_memory(file, n, &f, &err), TW_OK);
    assert_int_equal(tw_st_count(f), 3);
    assert_string_equal(tw_st_metadata(f, "format"), "pt");
    assert_null(tw_st_metadata(f, "nope"));
    const tw_st_tensor *a = tw_st_find(f, "a"), *b = tw_st_find(f, "b"), *s = tw_st_find(f, "s");
    assert_non_null(a);
    assert_ptr_equal(tw_st_tensor_at(f, 0), a); /* offset order */
    assert_int_equal(a->n_dims, 2);
    assert_int_equal(a->shape[0], 2);
    assert_int_equal(a->n_elems, 4);
    assert_int_equal(b->dtype, TW_ST_BF16);
    assert_int_equal(s->n_dims, 0);
    assert_int_equal(s->n_elems, 1);
    float out[4];
    assert_int_equal(tw_st_to_f32(b, out, 4, &err), TW_OK);
    assert_true(out[0] == 1.0f && out[1] == -2.0f && out[2] == 0.0f && out[3] == 3.140625f);
    assert_int_equal(tw_st_to_f32(a, out, 4, &err), TW_OK);
    assert_true(out[2] == 3.5f);
    assert_int_equal(tw_st_to_f32(s, out, 1, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_st_to_f32(a, out, 3, &err), TW_INVALID_ARGUMENT);
    assert_null(tw_st_find(f, "zz"));
    tw_st_close(f);
}

static void test_truncations_refused(void **state)
{
    (void)state;
    uint8_t file[1024], data[32];
    good_data(data);
    size_t n = make_file(file, good_header, data, sizeof data);
    for (size_t cut = 0; cut < n; cut++) {
        tw_err err = {{0}};
        if (open_copy(file, cut, &err) == TW_OK)
            fail_msg("truncation at %zu of %zu accepted", cut, n);
    }
}

static void expect(const char *header, size_t data_len, tw_status want, const char *needle)
{
    uint8_t file[2048], data[64] = {0};
    size_t n = make_file(file, header, data, data_len);
    tw_err err = {{0}};
    tw_status st = open_copy(file, n, &err);
    if (st != want || (needle && !strstr(err.msg, needle)))
        fail_msg("%s: want %s with '%s', got %s: %s", header, tw_status_name(want),
                 needle ? needle : "", tw_status_name(st), err.msg);
}

static void test_bad_headers(void **state)
{
    (void)state;
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, TW_OK, NULL);
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} garbage", 8,
           TW_INVALID_ARGUMENT, "JSON");
    expect("[1,2,3]", 0, TW_INVALID_ARGUMENT, "object");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8,
           TW_INVALID_ARGUMENT, "JSON");
    expect("{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
           TW_INVALID_ARGUMENT, "dtype");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
           TW_INVALID_ARGUMENT, "need 12");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, TW_DATA_LOSS,
           "past the end");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8,
           TW_INVALID_ARGUMENT, "data_offsets");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
           TW_INVALID_ARGUMENT, "shape");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8,
           TW_INVALID_ARGUMENT, "shape");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
           "\"data_offsets\":[0,8]}}",
           8, TW_INVALID_ARGUMENT, "overflow");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 8,
           TW_INVALID_ARGUMENT, "dimensions");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
           16, TW_INVALID_ARGUMENT, "overlap");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
           16, TW_INVALID_ARGUMENT, "JSON");
    expect("{\"__metadata__\":{\"k\":1}}", 0, TW_INVALID_ARGUMENT, "__metadata__");
    expect("{\"a\":[1]}", 0, TW_INVALID_ARGUMENT, "not an object");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,18446744073709551615]}}",
           8, TW_INVALID_ARGUMENT, NULL);

    /* header length larger than the file */
    uint8_t file[16] = {0};
    uint64_t hl = UINT64_MAX;
    memcpy(file, &hl, 8);
    tw_err err;
    assert_int_equal(open_copy(file, sizeof file, &err), TW_DATA_LOSS);
}

static void test_fuzzed(void **state)
{
    (void)state;
    uint8_t base[1024], data[32];
    good_data(data);
    size_t n = make_file(base, good_header, data, sizeof data);
    tw_test_rng rng = {42};
    for (int iter = 0; iter < 2000; iter++) {
        uint8_t f[1024];
        memcpy(f, base, n);
        int flips = 1 + (int)(tw_test_rand_u64(&rng) % 3);
        for (int k = 0; k < flips; k++)
            f[tw_test_rand_u64(&rng) % (n - 32)] = (uint8_t)tw_test_rand_u64(&rng);
        tw_err err;
        open_copy(f, n, &err);
    }
}

static void test_golden_checkpoints(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    static const struct {
        const char *name;
        size_t n_tensors;
    } models[] = {{"llama", 39},  {"qwen2", 50},   {"qwen3", 46},
                  {"gemma3_text", 54}, {"qwen3_5", 56}, {"qwen3_5_moe", 72}};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char rel[256], dir[4096];
        snprintf(rel, sizeof rel, "golden/%s", models[i].name);
        tw_test_shared_path(dir, sizeof dir, rel);
        tw_err err;
        tw_st_set *s;
        assert_int_equal(tw_st_set_open_dir(dir, &s, &err), TW_OK);
        assert_int_equal(tw_st_set_count(s), models[i].n_tensors);
        const tw_st_tensor *e = tw_st_set_find(s, "model.embed_tokens.weight");
        assert_non_null(e);
        assert_int_equal(e->dtype, TW_ST_BF16);
        assert_int_equal(e->n_dims, 2);
        assert_int_equal(e->shape[0], 1024);
        assert_int_equal(e->shape[1], 128);
        tw_st_set_close(s);

        char path[4096];
        snprintf(rel, sizeof rel, "golden/%s/golden.safetensors", models[i].name);
        tw_test_shared_path(path, sizeof path, rel);
        tw_st_file *g;
        assert_int_equal(tw_st_open(path, &g, &err), TW_OK);
        const tw_st_tensor *ids = tw_st_find(g, "input_ids");
        const tw_st_tensor *logits = tw_st_find(g, "prompt_logits");
        assert_non_null(ids);
        assert_int_equal(ids->dtype, TW_ST_I32);
        assert_int_equal(ids->shape[0], 24);
        assert_int_equal(logits->dtype, TW_ST_F32);
        assert_int_equal(logits->shape[0], 24);
        assert_int_equal(logits->shape[1], 1024);
        assert_int_equal(tw_st_find(g, "long_logits")->shape[0], 160);
        tw_st_close(g);
    }
    char dir[4096];
    tw_test_shared_path(dir, sizeof dir, "golden/qwen3_5_moe");
    tw_st_set *s;
    tw_err err;
    assert_int_equal(tw_st_set_open_dir(dir, &s, &err), TW_OK);
    const tw_st_tensor *gu = tw_st_set_find(s, "model.layers.0.mlp.experts.gate_up_proj");
    assert_non_null(gu);
    assert_int_equal(gu->n_dims, 3);
    assert_int_equal(gu->shape[0], 8);
    tw_st_set_close(s);
}

static void write_st(const char *dir, const char *name, const char *header, size_t data_len)
{
    uint8_t file[1024], data[64] = {0};
    size_t n = make_file(file, header, data, data_len);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_true(tw_test_write_file(path, file, n));
}

static void write_index(const char *dir, const char *json)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    assert_true(tw_test_write_file(path, json, strlen(json)));
}

static void test_sharded_set(void **state)
{
    (void)state;
    char *dir = tw_test_mkdtemp();
    tw_err err;
    tw_st_set *s;
    assert_int_equal(tw_st_set_open_dir(dir, &s, &err), TW_NOT_FOUND);
    assert_non_null(strstr(err.msg, "model.safetensors"));

    write_st(dir, "model-00001-of-00002.safetensors",
             "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
    write_st(dir, "model-00002-of-00002.safetensors",
             "{\"y\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]},"
             "\"z\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[8,11]}}",
             11);
    write_index(dir, "{\"metadata\":{},\"weight_map\":{"
                     "\"x\":\"model-00001-of-00002.safetensors\","
                     "\"y\":\"model-00002-of-00002.safetensors\","
                     "\"z\":\"model-00002-of-00002.safetensors\"}}");
    assert_int_equal(tw_st_set_open_dir(dir, &s, &err), TW_OK);
    assert_int_equal(tw_st_set_count(s), 3);
    assert_int_equal(tw_st_set_find(s, "y")->dtype, TW_ST_F16);
    assert_int_equal(tw_st_set_find(s, "z")->n_elems, 3);
    assert_non_null(tw_st_set_find(s, "x"));
    assert_null(tw_st_set_find(s, "w"));
    tw_st_set_close(s);

    /* an index entry pointing at the wrong shard */
    write_index(dir, "{\"weight_map\":{\"x\":\"model-00002-of-00002.safetensors\"}}");
    assert_int_equal(tw_st_set_open_dir(dir, &s, &err), TW_DATA_LOSS);
    assert_non_null(strstr(err.msg, "'x'"));
    /* shard names may not leave the directory */
    write_index(dir, "{\"weight_map\":{\"x\":\"../model-00001-of-00002.safetensors\"}}");
    assert_int_equal(tw_st_set_open_dir(dir, &s, &err), TW_INVALID_ARGUMENT);
    /* a missing shard */
    write_index(dir, "{\"weight_map\":{\"x\":\"model-00003.safetensors\"}}");
    assert_int_equal(tw_st_set_open_dir(dir, &s, &err), TW_NOT_FOUND);
    /* the same tensor in two shards */
    write_st(dir, "dup.safetensors", "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
             8);
    write_index(dir, "{\"weight_map\":{\"x\":\"model-00001-of-00002.safetensors\","
                     "\"x2\":\"dup.safetensors\"}}");
    assert_int_equal(tw_st_set_open_dir(dir, &s, &err), TW_INVALID_ARGUMENT);
    /* garbage index */
    write_index(dir, "{\"weight_map\":");
    assert_int_equal(tw_st_set_open_dir(dir, &s, &err), TW_INVALID_ARGUMENT);
    tw_test_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_file),       cmocka_unit_test(test_truncations_refused),
        cmocka_unit_test(test_bad_headers),      cmocka_unit_test(test_fuzzed),
        cmocka_unit_test(test_golden_checkpoints), cmocka_unit_test(test_sharded_set),
    };
    return cmocka_run_group_tests_name("core/format/safetensors", tests, NULL, NULL);
}
