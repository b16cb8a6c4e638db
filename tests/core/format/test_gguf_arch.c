/* HF <-> GGUF names and transforms against values worked out by hand from
 * llama.cpp's converter. */
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

static tw_arch_params params(const char *json)
{
    json_t *c = json_loads(json, 0, NULL);
    assert_non_null(c);
    tw_arch_params p;
    tw_err err;
    assert_int_equal(tw_arch_params_from_hf(c, &p, &err), TW_OK);
    json_decref(c);
    return p;
}

static void test_llama_rope_permute(void **state)
{
    (void)state;
    tw_arch_params p = params("{\"architectures\":[\"MistralForCausalLM\"],\"hidden_size\":8,"
                              "\"num_hidden_layers\":2,\"num_attention_heads\":2,"
                              "\"num_key_value_heads\":1}");
    assert_int_equal(p.arch, TW_ARCH_LLAMA);
    tw_gguf_name_map m[2];
    size_t n;
    tw_err err;
    assert_int_equal(tw_gguf_name_from_hf(&p, "model.layers.1.self_attn.k_proj.weight", m, &n, &err),
                     TW_OK);
    assert_int_equal(n, 1);
    assert_string_equal(m[0].gguf_name, "blk.1.attn_k.weight");
    assert_true(m[0].xform & TW_XF_ROPE_PERMUTE);
    assert_int_equal(m[0].rope_heads, 1);
    /* one head of 4 rows: llama.cpp's permute gives rows 0, 2, 1, 3 */
    float v[4] = {0, 1, 2, 3};
    assert_int_equal(tw_gguf_xform_from_hf(&m[0], v, 4, 1, &err), TW_OK);
    assert_true(v[0] == 0 && v[1] == 2 && v[2] == 1 && v[3] == 3);
    assert_int_equal(tw_gguf_xform_to_hf(&m[0], v, 4, 1, &err), TW_OK);
    assert_true(v[0] == 0 && v[1] == 1 && v[2] == 2 && v[3] == 3);
    /* rows that are not whole heads are refused */
    assert_int_equal(tw_gguf_xform_from_hf(&m[0], v, 3, 1, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_gguf_name_from_hf(&p, "model.layers.2.mlp.up_proj.weight", m, &n, &err),
                     TW_NOT_FOUND);
    assert_int_equal(tw_gguf_name_from_hf(&p, "model.layers.01.mlp.up_proj.weight", m, &n, &err),
                     TW_NOT_FOUND);
    tw_gguf_name_map back;
    assert_int_equal(tw_gguf_name_to_hf(&p, "output_norm.weight", &back, &err), TW_OK);
    assert_string_equal(back.hf_name, "model.norm.weight");
    assert_int_equal(back.xform, 0);
    assert_int_equal(tw_gguf_name_to_hf(&p, "blk.0.ssm_a", &back, &err), TW_NOT_FOUND);
}

static void test_qwen35_value_heads(void **state)
{
    (void)state;
    tw_arch_params p = params("{\"architectures\":[\"Qwen3_5MoeForCausalLM\"],\"hidden_size\":8,"
                              "\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                              "\"linear_num_key_heads\":2,\"linear_num_value_heads\":4,"
                              "\"linear_key_head_dim\":1,\"linear_value_head_dim\":1,"
                              "\"num_experts\":2}");
    tw_gguf_name_map m[2];
    size_t n;
    tw_err err;
    assert_int_equal(tw_gguf_name_from_hf(&p, "model.layers.0.linear_attn.A_log", m, &n, &err),
                     TW_OK);
    assert_string_equal(m[0].gguf_name, "blk.0.ssm_a");
    /* grouped [k0v0, k0v1, k1v0, k1v1] -> tiled [k0v0, k1v0, k0v1, k1v1], then -exp */
    float a[4] = {0, 1, 2, 3};
    assert_int_equal(tw_gguf_xform_from_hf(&m[0], a, 4, 1, &err), TW_OK);
    assert_true(fabsf(a[0] + 1.0f) < 1e-6f && fabsf(a[1] + expf(2)) < 1e-4f &&
                fabsf(a[2] + expf(1)) < 1e-5f);
    assert_int_equal(tw_gguf_xform_to_hf(&m[0], a, 4, 1, &err), TW_OK);
    for (int i = 0; i < 4; i++)
        assert_true(fabsf(a[i] - (float)i) < 1e-5f);
    /* in_proj_qkv: q and k rows (2 * nk * dk = 4) stay, value rows reorder */
    assert_int_equal(
        tw_gguf_name_from_hf(&p, "model.layers.0.linear_attn.in_proj_qkv.weight", m, &n, &err),
        TW_OK);
    assert_string_equal(m[0].gguf_name, "blk.0.attn_qkv.weight");
    float q[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    assert_int_equal(tw_gguf_xform_from_hf(&m[0], q, 8, 1, &err), TW_OK);
    const float want[8] = {0, 1, 2, 3, 4, 6, 5, 7};
    assert_memory_equal(q, want, sizeof want);
    /* out_proj columns */
    assert_int_equal(
        tw_gguf_name_from_hf(&p, "model.layers.0.linear_attn.out_proj.weight", m, &n, &err),
        TW_OK);
    assert_true(m[0].xform & TW_XF_VHEAD_COLS);
    float o[8] = {0, 1, 2, 3, 10, 11, 12, 13};
    assert_int_equal(tw_gguf_xform_from_hf(&m[0], o, 2, 4, &err), TW_OK);
    const float want_o[8] = {0, 2, 1, 3, 10, 12, 11, 13};
    assert_memory_equal(o, want_o, sizeof want_o);
    /* fused experts split in two, norms carry +1 */
    assert_int_equal(
        tw_gguf_name_from_hf(&p, "model.layers.0.mlp.experts.gate_up_proj", m, &n, &err), TW_OK);
    assert_int_equal(n, 2);
    assert_string_equal(m[0].gguf_name, "blk.0.ffn_gate_exps.weight");
    assert_string_equal(m[1].gguf_name, "blk.0.ffn_up_exps.weight");
    assert_int_equal(tw_gguf_name_from_hf(&p, "model.language_model.layers.0.input_layernorm.weight",
                                          m, &n, &err),
                     TW_OK);
    assert_string_equal(m[0].gguf_name, "blk.0.attn_norm.weight");
    assert_int_equal(m[0].xform, TW_XF_PLUS_ONE);
    assert_int_equal(tw_gguf_name_from_hf(&p, "model.layers.0.linear_attn.norm.weight", m, &n,
                                          &err),
                     TW_OK);
    assert_int_equal(m[0].xform, 0);
}

/* BERT's names both ways: its blocks under encoder.layer, a task head's
 * "bert." dropped, TensorFlow's gamma/beta read as weight/bias, and the
 * pooler, which an encoder's GGUF leaves out, mapped to nothing. */
static void test_bert_names(void **state)
{
    (void)state;
    tw_arch_params p = params("{\"architectures\":[\"BertForMaskedLM\"],\"model_type\":"
                              "\"bert\",\"hidden_size\":8,\"num_hidden_layers\":2,"
                              "\"num_attention_heads\":2}");
    assert_int_equal(p.arch, TW_ARCH_BERT);
    assert_string_equal(tw_arch_gguf_name(p.arch), "bert");
    static const char *const pairs[][2] = {
        {"embeddings.word_embeddings.weight", "token_embd.weight"},
        {"bert.embeddings.position_embeddings.weight", "position_embd.weight"},
        {"embeddings.token_type_embeddings.weight", "token_types.weight"},
        {"embeddings.LayerNorm.gamma", "token_embd_norm.weight"},
        {"encoder.layer.1.attention.self.query.bias", "blk.1.attn_q.bias"},
        {"bert.encoder.layer.0.attention.output.LayerNorm.weight", "blk.0.attn_output_norm.weight"},
        {"encoder.layer.1.intermediate.dense.weight", "blk.1.ffn_up.weight"},
        {"encoder.layer.0.output.dense.weight", "blk.0.ffn_down.weight"},
        {"encoder.layer.1.output.LayerNorm.beta", "blk.1.layer_output_norm.bias"},
    };
    tw_gguf_name_map m[2], back;
    size_t n;
    tw_err err;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        if (tw_gguf_name_from_hf(&p, pairs[i][0], m, &n, &err) != TW_OK)
            fail_msg("%s: %s", pairs[i][0], err.msg);
        assert_int_equal(n, 1);
        assert_string_equal(m[0].gguf_name, pairs[i][1]);
        assert_int_equal(m[0].xform, 0);
        /* back to the name the encoder's loader asks for */
        assert_int_equal(tw_gguf_name_to_hf(&p, pairs[i][1], &back, &err), TW_OK);
        if (strncmp(pairs[i][0], "bert.", 5) != 0 && !strstr(pairs[i][0], "gamma") &&
            !strstr(pairs[i][0], "beta"))
            assert_string_equal(back.hf_name, pairs[i][0]);
    }
    assert_int_equal(tw_gguf_name_to_hf(&p, "blk.1.attn_output_norm.bias", &back, &err), TW_OK);
    assert_string_equal(back.hf_name, "encoder.layer.1.attention.output.LayerNorm.bias");
    assert_int_equal(tw_gguf_name_to_hf(&p, "token_embd_norm.weight", &back, &err), TW_OK);
    assert_string_equal(back.hf_name, "embeddings.LayerNorm.weight");
    assert_int_equal(tw_gguf_name_from_hf(&p, "pooler.dense.weight", m, &n, &err), TW_NOT_FOUND);
    assert_int_equal(tw_gguf_name_from_hf(&p, "encoder.layer.2.output.dense.weight", m, &n, &err),
                     TW_NOT_FOUND);
    /* a decoder's names mean nothing to it */
    assert_int_equal(tw_gguf_name_from_hf(&p, "model.embed_tokens.weight", m, &n, &err),
                     TW_NOT_FOUND);
}

static void test_unknown_family(void **state)
{
    (void)state;
    json_t *c = json_loads("{\"architectures\":[\"GPT2LMHeadModel\"]}", 0, NULL);
    tw_arch_params p;
    tw_err err;
    assert_int_equal(tw_arch_params_from_hf(c, &p, &err), TW_UNIMPLEMENTED);
    assert_non_null(strstr(err.msg, "GPT2LMHeadModel"));
    json_decref(c);
    assert_int_equal(tw_arch_from_gguf_name("qwen35moe"), TW_ARCH_QWEN35MOE);
    assert_string_equal(tw_arch_gguf_name(TW_ARCH_GEMMA3), "gemma3");
}

/* A one-layer qwen2 config. */
static json_t *small_config(void)
{
    json_t *c = json_pack("{s:[s],s:i,s:i,s:i,s:i,s:i}", "architectures", "Qwen2ForCausalLM",
                          "hidden_size", 8, "num_hidden_layers", 1, "num_attention_heads", 2,
                          "num_key_value_heads", 1, "vocab_size", 16);
    assert_non_null(c);
    return c;
}

/* w written to dir/m.gguf (and freed), opened again. */
static tw_gguf *write_and_open(tw_gguf_writer *w, const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    tw_err err;
    assert_int_equal(tw_gguf_writer_write(w, path, &err), TW_OK);
    tw_gguf_writer_free(w);
    tw_gguf *g;
    assert_int_equal(tw_gguf_open(path, &g, &err), TW_OK);
    return g;
}

/* A config with tw_pooling set to `pooling` (a JSON value) through a GGUF
 * file in dir, or with `raw` (when not 0xFFFFFFFF) written as the file's
 * pooling_type instead: the config read back, NULL when writing or reading
 * refused it (the file's value in *file_value). */
static json_t *pooling_round_trip(const char *dir, json_t *pooling, uint32_t raw,
                                  uint32_t *file_value)
{
    json_t *c = small_config();
    if (pooling)
        json_object_set_new(c, "tw_pooling", pooling);
    tw_err err;
    tw_gguf_writer *w;
    assert_int_equal(tw_gguf_writer_new(&w, &err), TW_OK);
    tw_status st = tw_gguf_hparams_from_hf(c, w, &err);
    json_decref(c);
    if (st != TW_OK) {
        assert_int_equal(st, TW_INVALID_ARGUMENT);
        assert_non_null(strstr(err.msg, "tw_pooling"));
        tw_gguf_writer_free(w);
        return NULL;
    }
    if (raw != 0xFFFFFFFFu)
        assert_int_equal(tw_gguf_writer_set_u32(w, "qwen2.pooling_type", raw, &err), TW_OK);
    tw_gguf *g = write_and_open(w, dir);
    *file_value = 0xFFFFFFFFu;
    tw_gguf_get_u32(g, "qwen2.pooling_type", file_value, NULL);
    json_t *back = NULL;
    st = tw_gguf_to_hf_config(g, &back, &err);
    tw_gguf_close(g);
    if (st != TW_OK) {
        assert_int_equal(st, TW_INVALID_ARGUMENT);
        assert_non_null(strstr(err.msg, "pooling_type"));
        return NULL;
    }
    return back;
}

/* tw_pooling becomes <arch>.pooling_type by llama.cpp's numbers and comes
 * back by name; a name outside them is refused on writing, a number
 * outside them on reading, and a file that names none gives no key. */
static void test_pooling_type(void **state)
{
    (void)state;
    char *dir = tw_test_mkdtemp();
    assert_non_null(dir);
    static const char *const names[] = {"none", "mean", "cls", "last", "rank"};
    uint32_t v;
    for (uint32_t i = 0; i < 5; i++) {
        json_t *back = pooling_round_trip(dir, json_string(names[i]), 0xFFFFFFFFu, &v);
        assert_non_null(back);
        assert_int_equal(v, i);
        assert_string_equal(json_string_value(json_object_get(back, "tw_pooling")), names[i]);
        json_decref(back);
    }
    assert_null(pooling_round_trip(dir, json_string("max"), 0xFFFFFFFFu, &v));
    assert_null(pooling_round_trip(dir, json_integer(1), 0xFFFFFFFFu, &v));
    assert_null(pooling_round_trip(dir, NULL, 5, &v));
    assert_int_equal(v, 5);
    json_t *back = pooling_round_trip(dir, NULL, 0xFFFFFFFFu, &v);
    assert_non_null(back);
    assert_int_equal(v, 0xFFFFFFFFu);
    assert_null(json_object_get(back, "tw_pooling"));
    json_decref(back);
    tw_test_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_rope_permute), cmocka_unit_test(test_qwen35_value_heads),
        cmocka_unit_test(test_bert_names),         cmocka_unit_test(test_unknown_family),
        cmocka_unit_test(test_pooling_type),
    };
    return cmocka_run_group_tests_name("core/format/gguf_arch", tests, NULL, NULL);
}
