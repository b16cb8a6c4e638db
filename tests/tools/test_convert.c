/* tw-convert on every golden checkpoint: every GGUF tensor maps back to an
 * HF tensor whose values it reproduces after undoing the documented
 * transforms, every HF tensor is used, and the config rebuilt from the GGUF
 * metadata agrees with config.json. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/gguf.h"
#include "tw/gguf_arch.h"
#include "tw/kernels.h"
#include "tw/model.h"
#include "tw/pool.h"
#include "tw/safetensors.h"

static const char *convert_bin;

static int run_convert(const char *in, const char *out, const char *type)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' --type %s 2>/dev/null", convert_bin, in, out, type);
    return system(cmd);
}

static bool number_equal(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b)) {
        double x = json_number_value(a), y = json_number_value(b);
        return fabs(x - y) <= 1e-6 * fmax(1.0, fabs(y));
    }
    return json_equal(a, b);
}

static void check_config(const char *model, const json_t *want, const json_t *got)
{
    static const char *const keys[] = {
        "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "head_dim", "intermediate_size", "vocab_size", "tie_word_embeddings", "rms_norm_eps",
        "max_position_embeddings", "sliding_window", "partial_rotary_factor",
        "linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim",
        "linear_num_key_heads", "linear_num_value_heads", "num_experts", "num_experts_per_tok",
        "moe_intermediate_size", "shared_expert_intermediate_size", "full_attention_interval",
        "model_type", "architectures", "query_pre_attn_scalar",
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const json_t *w = json_object_get(want, keys[i]);
        if (!w || json_is_null(w))
            continue;
        const json_t *g = json_object_get(got, keys[i]);
        if (!g || !number_equal(g, w))
            fail_msg("%s: config key %s differs", model, keys[i]);
    }
    /* layer types: the golden Qwen2/Qwen3 configs list them, all full */
    const json_t *lt = json_object_get(want, "layer_types");
    if (lt && !json_equal(lt, json_object_get(got, "layer_types")))
        fail_msg("%s: layer_types differ", model);
    /* RoPE: same per-layer-type parameters, except llama3 scaling, which
     * travels as the rope_freqs tensor */
    const json_t *wr = json_object_get(want, "rope_parameters");
    const json_t *gr = json_object_get(got, "rope_parameters");
    const char *wt = json_string_value(json_object_get(wr, "rope_type"));
    if (wt && strcmp(wt, "llama3") == 0) {
        assert_string_equal(json_string_value(json_object_get(got, "tw_rope_freqs")),
                            "rope_freqs.weight");
        assert_true(json_is_true(json_object_get(got, "tw_rope_interleaved")));
        assert_true(number_equal(json_object_get(gr, "rope_theta"),
                                 json_object_get(wr, "rope_theta")));
        return;
    }
    const json_t *sub_w[2] = {wr, NULL}, *sub_g[2] = {gr, NULL};
    if (json_object_get(wr, "full_attention")) {
        sub_w[0] = json_object_get(wr, "full_attention");
        sub_g[0] = json_object_get(gr, "full_attention");
        sub_w[1] = json_object_get(wr, "sliding_attention");
        sub_g[1] = json_object_get(gr, "sliding_attention");
    }
    for (int k = 0; k < 2 && sub_w[k]; k++) {
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)sub_w[k], key, v)
        {
            if (!number_equal(json_object_get(sub_g[k], key), v))
                fail_msg("%s: rope_parameters.%s differs", model, key);
        }
    }
}

/* Dequantizes a whole GGUF tensor to f32. */
static float *dequant(const tw_gguf_tensor *t)
{
    float *f = malloc(t->n_elems * sizeof *f);
    size_t row = t->dims[0], rows = t->n_elems / row;
    size_t rb = tw_type_row_bytes((tw_type)t->type, row);
    for (size_t r = 0; r < rows; r++)
        tw_dequant_row((tw_type)t->type, (const uint8_t *)t->data + r * rb, f + r * row, row);
    return f;
}

static void check_model(const char *model, const char *type, double tol)
{
    char rel[256], dir[4096];
    snprintf(rel, sizeof rel, "golden/%s", model);
    tw_test_shared_path(dir, sizeof dir, rel);
    char *tmp = tw_test_mkdtemp();
    char out[4096];
    snprintf(out, sizeof out, "%s/%s.gguf", tmp, model);
    if (run_convert(dir, out, type) != 0)
        fail_msg("tw-convert failed on %s", model);

    tw_err err;
    tw_gguf *g;
    assert_int_equal(tw_gguf_open(out, &g, &err), TW_OK);
    json_t *cfg;
    assert_int_equal(tw_gguf_to_hf_config(g, &cfg, &err), TW_OK);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_t *want = json_load_file(path, 0, NULL);
    assert_non_null(want);
    check_config(model, want, cfg);

    tw_arch_params p;
    assert_int_equal(tw_arch_params_from_hf(cfg, &p, &err), TW_OK);
    tw_st_set *set;
    assert_int_equal(tw_st_set_open_dir(dir, &set, &err), TW_OK);
    size_t n_hf = tw_st_set_count(set);
    bool *used = calloc(n_hf, sizeof *used);
    for (int64_t i = 0; i < tw_gguf_tensor_count(g); i++) {
        const tw_gguf_tensor *t = tw_gguf_tensor_at(g, i);
        tw_gguf_name_map m;
        if (tw_gguf_name_to_hf(&p, t->name, &m, &err) != TW_OK)
            fail_msg("%s: %s", model, err.msg);
        if (m.hf_name[0] == '\0')
            continue; /* rope_freqs */
        const tw_st_tensor *h = tw_st_set_find(set, m.hf_name);
        if (!h)
            fail_msg("%s: %s maps to missing %s", model, t->name, m.hf_name);
        for (size_t k = 0; k < n_hf; k++)
            if (tw_st_set_tensor_at(set, k) == h)
                used[k] = true;
        float *hf = malloc(h->n_elems * sizeof *hf);
        assert_int_equal(tw_st_to_f32(h, hf, h->n_elems, &err), TW_OK);
        uint64_t n = h->n_elems, off = 0, stride = 0, chunk = n;
        if (m.xform & (TW_XF_GATE_HALF | TW_XF_UP_HALF)) {
            chunk = h->shape[1] / 2 * h->shape[2];
            stride = 2 * chunk;
            off = (m.xform & TW_XF_UP_HALF) ? chunk : 0;
            n /= 2;
        }
        assert_int_equal(t->n_elems, n);
        float *file = dequant(t);
        uint64_t rows = t->n_dims > 1 ? t->n_elems / t->dims[0] : t->n_elems;
        uint64_t cols = t->n_dims > 1 ? t->dims[0] : 1;
        if (m.xform & (TW_XF_GATE_HALF | TW_XF_UP_HALF)) {
            rows = t->n_elems / t->dims[0];
            cols = t->dims[0];
        }
        assert_int_equal(tw_gguf_xform_to_hf(&m, file, rows, cols, &err), TW_OK);
        for (uint64_t e = 0; e < n; e++) {
            uint64_t src = stride ? (e / chunk) * stride + off + e % chunk : e;
            double x = file[e], y = hf[src];
            if (fabs(x - y) > tol * fmax(1.0, fabs(y)))
                fail_msg("%s: %s[%llu] = %g, HF %s = %g", model, t->name, (unsigned long long)e,
                         x, m.hf_name, y);
        }
        free(file);
        free(hf);
    }
    const json_t *tie = json_object_get(want, "tie_word_embeddings");
    for (size_t k = 0; k < n_hf; k++) {
        const char *name = tw_st_set_tensor_at(set, k)->name;
        if (!used[k] && !(json_is_true(tie) && strcmp(name, "lm_head.weight") == 0))
            fail_msg("%s: HF tensor %s is not in the GGUF file", model, name);
    }
    free(used);
    tw_st_set_close(set);
    json_decref(want);
    json_decref(cfg);
    tw_gguf_close(g);
    tw_test_rmtree(tmp);
    free(tmp);
}

static void test_qwen2_bf16(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    check_model("qwen2", "BF16", 0.0);
}

static void test_all_families_f32(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    static const char *const models[] = {"llama", "qwen3", "gemma3_text", "qwen3_5",
                                         "qwen3_5_moe"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        check_model(models[i], "F32", 1e-5);
}

static void test_quantized_q8_0(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    check_model("qwen3_5_moe", "Q8_0", 0.02);
}

static void test_bad_inputs(void **state)
{
    (void)state;
    char *tmp = tw_test_mkdtemp();
    char out[4096];
    snprintf(out, sizeof out, "%s/x.gguf", tmp);
    /* a directory without config.json, a garbled config and a bad type */
    assert_int_not_equal(run_convert(tmp, out, "BF16"), 0);
    char cfg[4096];
    snprintf(cfg, sizeof cfg, "%s/config.json", tmp);
    assert_true(tw_test_write_file(cfg, "{\"architectures\":", 17));
    assert_int_not_equal(run_convert(tmp, out, "BF16"), 0);
    assert_true(tw_test_write_file(cfg, "{\"architectures\":[\"GPT2LMHeadModel\"]}", 37));
    assert_int_not_equal(run_convert(tmp, out, "BF16"), 0);
    assert_int_not_equal(run_convert(tmp, out, "Q2_K"), 0);
    FILE *f = fopen(out, "rb");
    assert_null(f);
    tw_test_rmtree(tmp);
    free(tmp);
}

/* general.name: --name when given, else the checkpoint directory's name. */
static void test_name_option(void **state)
{
    (void)state;
    char in[4096], out[4096], cmd[8192];
    snprintf(in, sizeof in, "%s/qwen2_mqa/", TW_REPO_GOLDEN);
    char *tmp = tw_test_mkdtemp();
    snprintf(out, sizeof out, "%s/x.gguf", tmp);
    static const char *const names[][2] = {{"", "qwen2_mqa"},
                                           {"--name 'coder 24m'", "coder 24m"}};
    for (size_t i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' --type F32 %s 2>/dev/null", convert_bin, in,
                 out, names[i][0]);
        assert_int_equal(system(cmd), 0);
        tw_gguf *g = NULL;
        tw_err err;
        assert_int_equal(tw_gguf_open(out, &g, &err), TW_OK);
        const char *name = NULL;
        size_t len = 0;
        assert_int_equal(tw_gguf_get_str(g, "general.name", &name, &len, &err), TW_OK);
        assert_int_equal(len, strlen(names[i][1]));
        assert_memory_equal(name, names[i][1], len);
        tw_gguf_close(g);
    }
    tw_test_rmtree(tmp);
    free(tmp);
}

/* The pooling a checkpoint names, by a sentence-transformers module or a
 * tw_pooling key, becomes the GGUF's pooling_type (llama.cpp's numbers). */
static void test_pooling_type(void **state)
{
    (void)state;
    if (!tw_test_shared_dir()) {
        tw_test_print_skip();
        skip();
    }
    char *tmp = tw_test_mkdtemp();
    assert_non_null(tmp);
    assert_int_equal(
        tw_test_golden_checkpoint(tmp, "st", NULL, "{\"pooling_mode_mean_tokens\": true}"), 0);
    assert_int_equal(tw_test_golden_checkpoint(tmp, "key", "last", NULL), 0);
    static const char *const names[] = {"st", "key"};
    static const uint32_t want[] = {1, 3};
    for (size_t i = 0; i < 2; i++) {
        char in[4096], out[4096];
        snprintf(in, sizeof in, "%s/%s", tmp, names[i]);
        snprintf(out, sizeof out, "%s/%s.gguf", tmp, names[i]);
        assert_int_equal(run_convert(in, out, "F32"), 0);
        tw_gguf *g = NULL;
        tw_err err;
        assert_int_equal(tw_gguf_open(out, &g, &err), TW_OK);
        uint32_t v = 99;
        assert_int_equal(tw_gguf_get_u32(g, "qwen2.pooling_type", &v, &err), TW_OK);
        assert_int_equal(v, want[i]);
        tw_gguf_close(g);
    }
    tw_test_rmtree(tmp);
    free(tmp);
}

/* An untied embedding table (qwen2_mqa's) is read from the file's page
 * cache when the weights are a huge-page copy, and the logits stay those of
 * a load that maps the file, for prompts holding the first and last token
 * ids and rows of every group of eight. */
static void test_untied_embedding_from_file(void **state)
{
    (void)state;
    char in[4096], out[4096];
    snprintf(in, sizeof in, "%s/qwen2_mqa/", TW_REPO_GOLDEN);
    char *tmp = tw_test_mkdtemp();
    snprintf(out, sizeof out, "%s/x.gguf", tmp);
    assert_int_equal(run_convert(in, out, "Q8_0"), 0);
    const tw_weight_pages modes[2] = {TW_WEIGHTS_MAP, TW_WEIGHTS_HUGE};
    tw_err err = {{0}};
    tw_pool *pool;
    assert_int_equal(tw_pool_create(2, &pool, &err), TW_OK);
    float *logits[2] = {NULL, NULL};
    size_t V = 0, n = 0;
    uint32_t ids[40];
    for (int k = 0; k < 2; k++) {
        tw_model_opts o = {.weight_pages = modes[k]};
        tw_model *m;
        if (tw_model_load(out, &o, &m, &err) != TW_OK)
            fail_msg("%s", err.msg);
        const tw_model_info *info = tw_model_get_info(m);
        assert_int_equal(info->huge_pages, k == 1);
        assert_int_equal(info->embed_from_file, k == 1);
        V = info->vocab_size;
        n = 0;
        ids[n++] = 0;
        for (uint32_t t = 1; n < 38; t += (uint32_t)(V / 37))
            ids[n++] = t < V ? t : (uint32_t)V - 2;
        ids[n++] = (uint32_t)V - 1;
        logits[k] = malloc(n * V * sizeof(float));
        assert_non_null(logits[k]);
        tw_seq *seq;
        assert_int_equal(tw_seq_create(m, 0, &seq, &err), TW_OK);
        assert_int_equal(tw_model_forward(m, pool, seq, ids, n, logits[k], TW_LOGITS_ALL, &err),
                         TW_OK);
        tw_seq_free(seq);
        tw_model_free(m);
    }
    assert_memory_equal(logits[0], logits[1], n * V * sizeof(float));
    free(logits[0]);
    free(logits[1]);
    tw_pool_destroy(pool);
    tw_test_rmtree(tmp);
    free(tmp);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_convert PATH-TO-tw-convert\n");
        return 1;
    }
    convert_bin = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen2_bf16),     cmocka_unit_test(test_all_families_f32),
        cmocka_unit_test(test_quantized_q8_0), cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_name_option),    cmocka_unit_test(test_untied_embedding_from_file),
        cmocka_unit_test(test_pooling_type),
    };
    return cmocka_run_group_tests_name("tools/convert", tests, NULL, NULL);
}
