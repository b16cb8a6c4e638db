"""Builds small random-weight Hugging Face checkpoints of every supported family,
in shapes other than the reference set (other head counts, head dims, layer mixes,
soft-capping, tied and untied embeddings), and records what transformers computes
for them, in the same layout as the reference golden files:

  config.json, model.safetensors (bf16 weights), golden.safetensors
  (input_ids, prompt_logits, greedy_ids, full_ids, full_logits, long_ids,
  long_logits) and golden.json.

Weights are rounded to bf16 first and the reference is computed in float32 from
exactly those values on the CPU with eager attention, so an engine computing in
f32 from the bf16 file must agree to ~1e-4.

Usage: python3 make_golden.py OUT_DIR   (needs torch, transformers >= 5.17, safetensors)
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM

VOCAB = 512
PROMPT, GREEDY, LONG = 24, 32, 160

COMMON = dict(vocab_size=VOCAB, max_position_embeddings=4096, rms_norm_eps=1e-6,
              initializer_range=0.08, bos_token_id=None, eos_token_id=None,
              pad_token_id=None)

VARIANTS = {
    "llama_gqa3": ("llama", dict(
        hidden_size=96, intermediate_size=160, num_hidden_layers=3,
        num_attention_heads=6, num_key_value_heads=2, head_dim=16,
        tie_word_embeddings=True, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 32})),
    "mistral_wide_heads": ("mistral", dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        tie_word_embeddings=False, sliding_window=None,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
    "qwen2_mqa": ("qwen2", dict(
        hidden_size=80, intermediate_size=200, num_hidden_layers=2,
        num_attention_heads=5, num_key_value_heads=1, head_dim=16,
        tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
    "qwen3_deep": ("qwen3", dict(
        hidden_size=64, intermediate_size=96, num_hidden_layers=5,
        num_attention_heads=8, num_key_value_heads=4, head_dim=32,
        tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
    "gemma3_softcap": ("gemma3_text", dict(
        hidden_size=96, intermediate_size=192, num_hidden_layers=5,
        num_attention_heads=3, num_key_value_heads=1, head_dim=48,
        query_pre_attn_scalar=32, sliding_window=8,
        layer_types=["sliding_attention", "sliding_attention", "full_attention",
                     "sliding_attention", "full_attention"],
        final_logit_softcapping=15.0, attn_logit_softcapping=20.0,
        tie_word_embeddings=True, pad_token_id=0,
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "linear", "factor": 4.0,
                                            "rope_theta": 100000.0}})),
    "qwen3_5_mix": ("qwen3_5_text", dict(
        hidden_size=96, intermediate_size=160, num_hidden_layers=5,
        layer_types=["linear_attention", "full_attention", "linear_attention",
                     "linear_attention", "full_attention"],
        num_attention_heads=3, num_key_value_heads=1, head_dim=32,
        linear_num_key_heads=1, linear_num_value_heads=3, linear_key_head_dim=16,
        linear_value_head_dim=24, linear_conv_kernel_dim=3,
        tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0,
                         "partial_rotary_factor": 0.5})),
    "qwen3_5_moe_mix": ("qwen3_5_moe_text", dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=3,
        layer_types=["linear_attention", "linear_attention", "full_attention"],
        num_attention_heads=2, num_key_value_heads=1, head_dim=32,
        linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=16,
        linear_value_head_dim=16, linear_conv_kernel_dim=4,
        num_experts=6, num_experts_per_tok=3, moe_intermediate_size=32,
        shared_expert_intermediate_size=48, norm_topk_prob=True,
        tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                         "partial_rotary_factor": 0.25})),
}


def randomize(model, gen):
    # Norm weights get values away from 0 and 1 so that a missing "(1 + w)" or
    # a wrong epsilon shows in the logits instead of hiding behind ones.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("A_log"):
                p.copy_(torch.empty_like(p).uniform_(0.0, 2.7, generator=gen))
            elif p.dim() == 1:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.08 * torch.randn(p.shape, generator=gen))
            p.copy_(p.to(torch.bfloat16).to(torch.float32))


def build(name, model_type, kwargs, out_dir, seed):
    gen = torch.Generator().manual_seed(seed)
    args = dict(COMMON)
    args.update(kwargs)
    config = AutoConfig.for_model(model_type, **args)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager",
                                             dtype=torch.float32)
    model.eval()
    randomize(model, gen)
    dest = os.path.join(out_dir, name)
    os.makedirs(dest, exist_ok=True)

    state = {k: v.detach().to(torch.bfloat16).contiguous()
             for k, v in model.state_dict().items()}
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    save_file(state, os.path.join(dest, "model.safetensors"))
    cfg = config.to_dict()
    cfg["torch_dtype"] = "bfloat16"
    with open(os.path.join(dest, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)

    ids = torch.randint(0, VOCAB, (1, PROMPT), generator=gen)
    long_ids = torch.randint(0, VOCAB, (1, LONG), generator=gen)
    with torch.no_grad():
        prompt_logits = model(ids).logits[0]
        out = model.generate(ids, max_new_tokens=GREEDY, min_new_tokens=GREEDY,
                             do_sample=False, use_cache=True, eos_token_id=None,
                             pad_token_id=0)
        greedy = out[0, PROMPT:]
        full_logits = model(out).logits[0]
        long_logits = model(long_ids).logits[0]
    tensors = {
        "input_ids": ids[0].to(torch.int32).contiguous(),
        "prompt_logits": prompt_logits.contiguous(),
        "greedy_ids": greedy.to(torch.int32).contiguous(),
        "full_ids": out[0].to(torch.int32).contiguous(),
        "full_logits": full_logits.contiguous(),
        "long_ids": long_ids[0].to(torch.int32).contiguous(),
        "long_logits": long_logits.contiguous(),
    }
    save_file(tensors, os.path.join(dest, "golden.safetensors"))
    meta = {
        "class": type(model).__name__,
        "model_type": model_type,
        "input_ids": ids[0].tolist(),
        "greedy_ids": greedy.tolist(),
        "note": "weights stored bf16; reference computed in float32 from the same bf16 "
                "values, eager attention, CPU; made by tools/golden/make_golden.py",
    }
    with open(os.path.join(dest, "golden.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"{name}: {type(model).__name__} ok, greedy[:8]={greedy[:8].tolist()}", flush=True)


def main():
    out_dir = sys.argv[1]
    torch.set_num_threads(8)
    failed = 0
    for i, (name, (model_type, kwargs)) in enumerate(VARIANTS.items()):
        try:
            build(name, model_type, kwargs, out_dir, seed=1000 + i)
        except Exception as e:  # report every variant, then fail
            print(f"{name}: FAILED {type(e).__name__}: {e}", flush=True)
            failed += 1
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
