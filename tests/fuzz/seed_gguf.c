/* Writes seed GGUF files for fuzz_gguf into the folder named by argv[1]:
 * small models of each supported architecture with a tiny tokenizer and a
 * few tensors, so that the fuzzer starts from files every reader accepts. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tw/gguf.h"

#define CK(x)                                                                              \
    do {                                                                                   \
        if ((x) != TW_OK) {                                                                \
            fprintf(stderr, "seed_gguf: %s\n", err.msg);                                   \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

static int write_one(const char *dir, const char *arch, const char *tok_model, int variant)
{
    tw_err err = {0};
    tw_gguf_writer *w = NULL;
    CK(tw_gguf_writer_new(&w, &err));
    char k[128];
    CK(tw_gguf_writer_set_str(w, "general.architecture", arch, &err));
#define AK(s) (snprintf(k, sizeof k, "%s." s, arch), k)
    CK(tw_gguf_writer_set_u32(w, AK("block_count"), 2, &err));
    CK(tw_gguf_writer_set_u32(w, AK("embedding_length"), 8, &err));
    CK(tw_gguf_writer_set_u32(w, AK("feed_forward_length"), 16, &err));
    CK(tw_gguf_writer_set_u32(w, AK("context_length"), 64, &err));
    CK(tw_gguf_writer_set_u32(w, AK("attention.head_count"), 2, &err));
    CK(tw_gguf_writer_set_u32(w, AK("attention.head_count_kv"), 1, &err));
    CK(tw_gguf_writer_set_f32(w, AK("attention.layer_norm_rms_epsilon"), 1e-6f, &err));
    CK(tw_gguf_writer_set_f32(w, AK("rope.freq_base"), 10000.0f, &err));
    if (variant) {
        CK(tw_gguf_writer_set_u32(w, AK("attention.key_length"), 4, &err));
        CK(tw_gguf_writer_set_u32(w, AK("attention.sliding_window"), 16, &err));
        CK(tw_gguf_writer_set_str(w, AK("rope.scaling.type"), "linear", &err));
        CK(tw_gguf_writer_set_f32(w, AK("rope.scaling.factor"), 2.0f, &err));
        CK(tw_gguf_writer_set_u32(w, AK("ssm.conv_kernel"), 4, &err));
        CK(tw_gguf_writer_set_u32(w, AK("ssm.state_size"), 4, &err));
        CK(tw_gguf_writer_set_u32(w, AK("ssm.group_count"), 1, &err));
        CK(tw_gguf_writer_set_u32(w, AK("ssm.inner_size"), 8, &err));
        CK(tw_gguf_writer_set_u32(w, AK("ssm.time_step_rank"), 2, &err));
        int32_t sections[4] = {1, 1, 0, 0};
        CK(tw_gguf_writer_set_arr_data(w, AK("rope.dimension_sections"), TW_GGUF_I32,
                                       sections, 4, &err));
    }
    CK(tw_gguf_writer_set_str(w, "tokenizer.ggml.model", tok_model, &err));
    int spm = !strcmp(tok_model, "llama");
    static const char g_a[] = {(char)0xc4, (char)0xa0, 'a', 0};
    static const char u_a[] = {(char)0xe2, (char)0x96, (char)0x81, 'a', 0};
    const char *const bpe_tokens[] = {"<s>", "</s>", "a", "b", "ab", "\xc4\xa0",
                                      g_a, "<|im_start|>"};
    const char *const spm_tokens[] = {"<unk>", "<s>", "</s>", "<0x0A>", "\xe2\x96\x81",
                                      "a", u_a, "b"};
    /* BERT's WordPiece in llama.cpp's phantom-space form */
    const int bert = !strcmp(tok_model, "bert");
    const char *const wp_tokens[] = {"[PAD]", "[UNK]", "[CLS]",        "[SEP]",
                                     u_a,     "b",     "\xe2\x96\x81", "[MASK]"};
    CK(tw_gguf_writer_set_arr_strs(w, "tokenizer.ggml.tokens",
                                   spm    ? spm_tokens
                                   : bert ? wp_tokens
                                          : bpe_tokens,
                                   8, &err));
    int32_t types[8] = {3, 3, 1, 1, 1, 1, 1, 4};
    if (bert) {
        types[2] = types[3] = types[7] = 3;
        CK(tw_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 1, &err));
        CK(tw_gguf_writer_set_u32(w, "tokenizer.ggml.cls_token_id", 2, &err));
        CK(tw_gguf_writer_set_u32(w, "tokenizer.ggml.seperator_token_id", 3, &err));
        CK(tw_gguf_writer_set_bool(w, "tokenizer.ggml.normalizer.lowercase", variant == 0, &err));
    } else if (spm) {
        types[0] = 2;
        types[3] = 6;
        types[7] = 1;
        float scores[8] = {0, 0, 0, 0, -1, -2, -0.5f, -3};
        CK(tw_gguf_writer_set_arr_data(w, "tokenizer.ggml.scores", TW_GGUF_F32, scores, 8,
                                       &err));
        CK(tw_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0, &err));
        CK(tw_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", true, &err));
    } else {
        static const char *const merges[] = {"a b", "\xc4\xa0 a"};
        CK(tw_gguf_writer_set_arr_strs(w, "tokenizer.ggml.merges", merges, 2, &err));
        CK(tw_gguf_writer_set_str(w, "tokenizer.ggml.pre", variant ? "qwen2" : "gpt2", &err));
    }
    CK(tw_gguf_writer_set_arr_data(w, "tokenizer.ggml.token_type", TW_GGUF_I32, types, 8,
                                   &err));
    CK(tw_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", spm ? 1 : 0, &err));
    CK(tw_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", spm ? 2 : 1, &err));
    CK(tw_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true, &err));
    CK(tw_gguf_writer_set_str(w, "tokenizer.chat_template",
                              "{% for m in messages %}{{ m.content }}{% endfor %}", &err));
    float data[64];
    for (int i = 0; i < 64; i++)
        data[i] = (float)i * 0.25f;
    uint64_t emb[2] = {8, 8};
    CK(tw_gguf_writer_add_tensor(w, "token_embd.weight", 0, 2, emb, data, sizeof data, &err));
    uint64_t norm[1] = {8};
    CK(tw_gguf_writer_add_tensor(w, "output_norm.weight", 0, 1, norm, data, 32, &err));
    uint16_t half[8] = {0x3c00, 0x4000, 0, 0x8000, 0x7c00, 0x3555, 1, 0xfbff};
    CK(tw_gguf_writer_add_tensor(w, "blk.0.attn_norm.weight", 1, 1, norm, half, sizeof half,
                                 &err));
    char path[4096];
    snprintf(path, sizeof path, "%s/%s_%s_%d.gguf", dir, arch, tok_model, variant);
    CK(tw_gguf_writer_write(w, path, &err));
    tw_gguf_writer_free(w);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    static const char *const archs[] = {"llama", "qwen2", "qwen3", "gemma3", "qwen35",
                                        "qwen35moe"};
    int bad = 0;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        bad |= write_one(argv[1], archs[i], "gpt2", 0);
        bad |= write_one(argv[1], archs[i], "llama", 1);
    }
    bad |= write_one(argv[1], "bert", "bert", 0);
    bad |= write_one(argv[1], "bert", "bert", 1);
    return bad;
}
