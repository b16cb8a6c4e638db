/* HF config parsing: families, rope variants, layer kinds, hostile values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "test_support.h"

#include "model/config.h"
#include "model/model_internal.h"

static tw_mconfig cfg;

static tw_status parse(const char *text, tw_err *err)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    assert_non_null(j);
    tw_status st = tw_mconfig_parse(j, &cfg, err);
    json_decref(j);
    return st;
}

#define BASE "\"vocab_size\": 100, \"hidden_size\": 64, \"num_hidden_layers\": 4, " \
             "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 128"

static void test_llama3_rope_and_legacy_keys(void **state)
{
    (void)state;
    tw_err err = {{0}};
    assert_int_equal(parse("{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", "
                           BASE ", \"rope_theta\": 500000.0, \"rope_scaling\": {\"rope_type\": "
                           "\"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, "
                           "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": "
                           "8192}, \"eos_token_id\": [7, 9], \"bos_token_id\": 1}",
                           &err),
                     TW_OK);
    assert_int_equal(cfg.rope[0].kind, TW_ROPE_LLAMA3);
    assert_true(cfg.rope[0].theta == 500000.0);
    assert_int_equal(cfg.head_dim, 16);
    assert_int_equal(cfg.n_eos, 2);
    assert_int_equal(cfg.eos[1], 9);
    assert_int_equal(cfg.bos, 1);
    assert_true(fabsf(cfg.attn_scale - 0.25f) < 1e-7f);

    /* llama3 keeps high frequencies and divides the lowest by the factor */
    tw_rope_table t = {0};
    assert_int_equal(tw_rope_build(&t, &cfg.rope[0], 16, 4, false, NULL, &err), TW_OK);
    double f0 = 1.0, f7 = 1.0 / pow(500000.0, 14.0 / 16.0) / 8.0;
    assert_true(fabs(atan2(t.sin[1 * 8 + 0], t.cos[1 * 8 + 0]) - f0) < 1e-6);
    assert_true(fabs(atan2(t.sin[3 * 8 + 7], t.cos[3 * 8 + 7]) - 3 * f7) < 1e-9);
    tw_rope_free(&t);
}

static void test_gemma_per_layer_rope(void **state)
{
    (void)state;
    tw_err err = {{0}};
    assert_int_equal(parse("{\"model_type\": \"gemma3_text\", " BASE ", \"sliding_window\": 8, "
                           "\"query_pre_attn_scalar\": 256, \"rope_parameters\": {"
                           "\"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": "
                           "10000.0}, \"full_attention\": {\"rope_type\": \"linear\", \"factor\": "
                           "8.0, \"rope_theta\": 1000000.0}}, \"layer_types\": ["
                           "\"sliding_attention\", \"full_attention\", \"sliding_attention\", "
                           "\"full_attention\"]}",
                           &err),
                     TW_OK);
    assert_true(cfg.family->norm_plus_one && cfg.family->sandwich_norms);
    assert_true(cfg.sliding[0] && !cfg.sliding[1]);
    assert_int_equal(cfg.rope[0].kind, TW_ROPE_LINEAR);
    assert_true(cfg.rope[1].theta == 10000.0);
    assert_true(fabsf(cfg.attn_scale - 1.0f / 16.0f) < 1e-7f);

    /* legacy Gemma 3: pattern + local base */
    assert_int_equal(parse("{\"model_type\": \"gemma3_text\", " BASE ", \"sliding_window\": 8, "
                           "\"sliding_window_pattern\": 2, \"rope_local_base_freq\": 10000.0, "
                           "\"rope_theta\": 1000000.0}",
                           &err),
                     TW_OK);
    assert_true(cfg.sliding[0] && !cfg.sliding[1] && cfg.sliding[2] && !cfg.sliding[3]);
    assert_true(cfg.rope[1].theta == 10000.0 && cfg.rope[0].theta == 1000000.0);
}

static void test_hybrid_layers(void **state)
{
    (void)state;
    tw_err err = {{0}};
    assert_int_equal(parse("{\"model_type\": \"qwen3_5_text\", " BASE ", "
                           "\"full_attention_interval\": 2, \"partial_rotary_factor\": 0.25, "
                           "\"linear_num_key_heads\": 2, \"linear_num_value_heads\": 4, "
                           "\"linear_key_head_dim\": 16, \"linear_value_head_dim\": 16}",
                           &err),
                     TW_OK);
    assert_int_equal(cfg.mixer[0], TW_MIXER_DELTANET);
    assert_int_equal(cfg.mixer[1], TW_MIXER_ATTENTION);
    assert_true(cfg.rope[0].partial == 0.25);
    assert_int_equal(cfg.dn_conv, 4);
    /* value heads must be a multiple of key heads */
    assert_int_equal(parse("{\"model_type\": \"qwen3_5_text\", " BASE ", "
                           "\"linear_num_key_heads\": 3, \"linear_num_value_heads\": 4, "
                           "\"linear_key_head_dim\": 16, \"linear_value_head_dim\": 16}",
                           &err),
                     TW_INVALID_ARGUMENT);
}

static void test_hostile_configs(void **state)
{
    (void)state;
    tw_err err = {{0}};
    assert_int_equal(parse("[]", &err), TW_INVALID_ARGUMENT);
    assert_int_equal(parse("{\"model_type\": \"gpt2\", " BASE "}", &err), TW_UNIMPLEMENTED);
    assert_non_null(strstr(err.msg, "gpt2"));
    assert_int_equal(parse("{\"model_type\": \"llama\", \"vocab_size\": 100}", &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(parse("{\"model_type\": \"llama\", " BASE ", \"hidden_size\": -1}", &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(parse("{\"model_type\": \"llama\", \"vocab_size\": 100, \"hidden_size\": 64, "
                           "\"num_hidden_layers\": 99999, \"num_attention_heads\": 4, "
                           "\"intermediate_size\": 8}",
                           &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(parse("{\"model_type\": \"llama\", " BASE ", \"num_key_value_heads\": 3}",
                           &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(parse("{\"model_type\": \"llama\", " BASE ", \"rope_scaling\": "
                           "{\"rope_type\": \"yarn\", \"factor\": 4.0}}",
                           &err),
                     TW_UNIMPLEMENTED);
    assert_int_equal(parse("{\"model_type\": \"llama\", " BASE ", \"rope_theta\": \"big\"}", &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(parse("{\"model_type\": \"llama\", " BASE ", \"layer_types\": "
                           "[\"full_attention\"]}",
                           &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(parse("{\"model_type\": \"llama\", " BASE ", \"layer_types\": "
                           "[\"linear_attention\", \"full_attention\", \"full_attention\", "
                           "\"full_attention\"]}",
                           &err),
                     TW_UNIMPLEMENTED);
    assert_int_equal(parse("{\"model_type\": \"qwen3_5_moe_text\", " BASE ", "
                           "\"linear_num_key_heads\": 2, \"linear_num_value_heads\": 4, "
                           "\"linear_key_head_dim\": 16, \"linear_value_head_dim\": 16, "
                           "\"num_experts\": 4, \"num_experts_per_tok\": 5, "
                           "\"moe_intermediate_size\": 32}",
                           &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(parse("{\"model_type\": \"llama\", " BASE ", \"eos_token_id\": [1, -4]}",
                           &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(parse("{\"model_type\": \"llama\", " BASE ", \"head_dim\": 7}", &err),
                     TW_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama3_rope_and_legacy_keys),
        cmocka_unit_test(test_gemma_per_layer_rope),
        cmocka_unit_test(test_hybrid_layers),
        cmocka_unit_test(test_hostile_configs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
