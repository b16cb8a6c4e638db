"""Trains tokenwire's default model pair from text present on every machine.

* a byte-level BPE tokenizer (~8k tokens) with ChatML special tokens and
  <think> / </think>, trained with the `tokenizers` library;
* a corpus made from the Python sources of the machine running this (the
  standard library, then installed packages, up to --corpus-mb):
  chat examples (a function's docstring first line as the request, the function
  as the answer, half of them with a short reasoning block) and raw source;
  files whose path hashes into 1/40 of the space are held out for validation;
* a Qwen3.5-style hybrid target (Gated DeltaNet layers, full attention every
  4th layer; transformers' Qwen3_5ForCausalLM) and a small draft of the same
  family sharing the tokenizer, each trained for a wall-clock budget;
* Hugging Face checkpoints (sharded safetensors) with a ChatML template, and a
  report (parameters, steps, validation loss, greedy answers to five prompts).

A draft can also be trained alone against a shipped target: --only draft
--tokenizer-from TARGET.gguf takes the target's exact vocabulary, and
--distill ANSWERS.jsonl (from distill.py) mixes the target's own answers into
every batch, so that the draft learns what the target writes.

Usage (GPU machine): python3 train.py OUT_DIR [--target-minutes M] [--draft-minutes M]
                                            [--resume OUT_DIR_OF_EARLIER_RUN]
                                            [--only target|draft]
                                            [--tokenizer-from MODEL.gguf
                                             [--tokenizer-cases CASES.json]]
                                            [--distill ANSWERS.jsonl[.gz] [--distill-share F]]
"""
import argparse
import gzip
import json
import math
import os
import sys
import time

import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, trainers
from transformers import AutoConfig, AutoModelForCausalLM

import gguf_vocab
from corpus import NO_THINK, build_corpus, chat_prompt

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
THINK = ["<think>", "</think>"]
# Qwen2's pre-tokenizer split: contractions, letters, single digits, punctuation runs, newlines.
SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
         r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' %}"
    "{%- set content = message['content'] %}"
    "{%- if '</think>' in content %}{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}"
    "{{- '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}")

PROMPTS = [
    "Write a Python function that returns the factorial of n.",
    "Write a Python function that reverses a string.",
    "Implement a function `is_prime`: Return True if n is a prime number.",
    "Python: Return the sum of the squares of a list of numbers.",
    "Write a Python function that reads a file and returns its lines.",
]


def train_tokenizer(texts, vocab_size):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2,
                                  special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in THINK])
    return tok


def tokenizer_from_gguf(path):
    """The byte-level BPE of a GGUF made by this script: its learned tokens
    and control tokens are the BPE model's vocabulary, <think> and </think>
    follow as added tokens, as train_tokenizer makes them."""
    tokens, merges, types = gguf_vocab.read_vocab(path)
    n_bpe = len(tokens) - len(THINK)
    if tokens[n_bpe:] != THINK or tokens[:len(SPECIALS)] != SPECIALS:
        sys.exit(f"train: {path} does not end in {THINK} or start with {SPECIALS}")
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens[:n_bpe])},
                               merges=merges))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIALS)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in THINK])
    for i, t in enumerate(tokens):
        if tok.token_to_id(t) != i:
            sys.exit(f"train: token {i} {t!r} of {path} has id {tok.token_to_id(t)} here")
    return tok


def check_tokenizer(tok, cases_path):
    """Exits unless every case encodes to its listed ids."""
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    for c in cases:
        got = tok.encode(c["text"], add_special_tokens=False).ids
        if got != c["ids"]:
            sys.exit(f"train: the tokenizer encodes {c['text'][:60]!r} as {got[:16]}..., "
                     f"{cases_path} says {c['ids'][:16]}...")
    print(f"tokenizer: all {len(cases)} cases of {cases_path} encode as listed", flush=True)


def save_tokenizer(tok, dest):
    tok.save(os.path.join(dest, "tokenizer.json"))
    cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "add_bos_token": False,
        "model_max_length": 4096,
        "chat_template": CHAT_TEMPLATE,
    }
    with open(os.path.join(dest, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=1)


def encode_stream(tok, texts):
    ids = []
    for enc in tok.encode_batch(texts, add_special_tokens=False):
        ids.extend(enc.ids)
    return torch.tensor(ids, dtype=torch.int32)


def model_config(kind, vocab, tok):
    eos = tok.token_to_id("<|im_end|>")
    pad = tok.token_to_id("<|endoftext|>")
    common = dict(vocab_size=vocab, max_position_embeddings=4096, rms_norm_eps=1e-6,
                  tie_word_embeddings=True, bos_token_id=None, eos_token_id=eos,
                  pad_token_id=pad, initializer_range=0.02,
                  rope_parameters={"rope_type": "default", "rope_theta": 1000000.0,
                                   "partial_rotary_factor": 0.25})
    if kind == "target":
        shape = dict(hidden_size=448, intermediate_size=1216, num_hidden_layers=8,
                     num_attention_heads=8, num_key_value_heads=2, head_dim=64,
                     linear_num_key_heads=4, linear_num_value_heads=8,
                     linear_key_head_dim=64, linear_value_head_dim=64,
                     linear_conv_kernel_dim=4)
    else:
        shape = dict(hidden_size=192, intermediate_size=512, num_hidden_layers=4,
                     num_attention_heads=4, num_key_value_heads=1, head_dim=48,
                     linear_num_key_heads=2, linear_num_value_heads=4,
                     linear_key_head_dim=48, linear_value_head_dim=48,
                     linear_conv_kernel_dim=4)
    n = shape["num_hidden_layers"]
    shape["layer_types"] = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention"
                            for i in range(n)]
    common.update(shape)
    return AutoConfig.for_model("qwen3_5_text", **common)


def batches(data, seq, bsz, gen):
    n = (len(data) - 1) // seq
    while True:
        idx = torch.randint(0, n, (bsz,), generator=gen)
        rows = torch.stack([data[i * seq:(i + 1) * seq + 1] for i in idx.tolist()])
        yield rows.long()


def eval_rows(data, seq, device, max_batches):
    """The first max_batches * 16 windows of seq + 1 tokens, 16 at a time."""
    n = min((len(data) - 1) // seq, max_batches * 16)
    for start in range(0, n, 16):
        yield torch.stack([data[i * seq:(i + 1) * seq + 1]
                           for i in range(start, min(start + 16, n))]).long().to(device)


@torch.no_grad()
def val_loss(model, val, seq, device, max_batches=40):
    model.eval()
    total, count = 0.0, 0
    for rows in eval_rows(val, seq, device, max_batches):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
            out = model(rows[:, :-1], labels=rows[:, 1:].contiguous(), use_cache=False)
        # labels are already shifted: the model shifts again, so compute directly
        logits = out.logits.float()
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                                 rows[:, 1:].reshape(-1))
        total += loss.item() * rows.size(0)
        count += rows.size(0)
    model.train()
    return total / max(count, 1)


@torch.no_grad()
def agreement(model, data, seq, device, max_batches=40):
    """How often the model's most likely next token is the one in data: on the
    target's own answers, about how often a draft's greedy proposal is kept."""
    model.eval()
    hit, count = 0, 0
    for rows in eval_rows(data, seq, device, max_batches):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
            logits = model(rows[:, :-1], use_cache=False).logits
        hit += (logits.argmax(-1) == rows[:, 1:]).sum().item()
        count += rows[:, 1:].numel()
    model.train()
    return hit / max(count, 1)


def train_model(kind, config, train, val, minutes, device, out_dir, resume, seed,
                distill=None):
    """distill: (train stream, validation stream, share of each batch's rows)
    of the target's answers, or None."""
    torch.manual_seed(seed)
    dest = os.path.join(out_dir, kind)
    if resume and os.path.isdir(os.path.join(resume, kind)):
        model = AutoModelForCausalLM.from_pretrained(os.path.join(resume, kind),
                                                     dtype=torch.float32)
        state = json.load(open(os.path.join(resume, kind, "train_state.json")))
    else:
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        state = {"steps": 0, "tokens": 0, "seconds": 0.0}
    model.to(device).train()
    params = sum(p.numel() for p in model.parameters())
    seq, bsz = 512, 32
    lr_max = 2e-3 if kind == "draft" else 1.2e-3
    opt = torch.optim.AdamW(model.parameters(), lr=lr_max, betas=(0.9, 0.95),
                            weight_decay=0.1)
    gen = torch.Generator().manual_seed(seed)
    n_distill = round(bsz * distill[2]) if distill else 0
    it = batches(train, seq, bsz - n_distill, gen)
    it_distill = batches(distill[0], seq, n_distill, gen) if n_distill else None
    budget = minutes * 60.0
    start = time.time()
    step0 = state["steps"]
    est_steps = None
    log = []
    while True:
        elapsed = time.time() - start
        if elapsed >= budget:
            break
        step = state["steps"] - step0
        if step == 20:
            est_steps = int(budget / (elapsed / 20))
        total = est_steps or 10_000
        warm = 50
        frac = min(step / max(total, 1), 1.0)
        lr = lr_max * min(1.0, (step + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        rows = next(it)
        if it_distill:
            rows = torch.cat([rows, next(it_distill)])
        rows = rows.to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
            logits = model(rows[:, :-1], use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.size(-1)),
                                                 rows[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        state["steps"] += 1
        state["tokens"] += rows.numel()
        if state["steps"] % 100 == 0:
            print(f"{kind} step {state['steps']} loss {loss.item():.3f} lr {lr:.2e} "
                  f"{elapsed:.0f}s", flush=True)
            log.append([state["steps"], round(loss.item(), 4)])
    state["seconds"] += time.time() - start
    vl = val_loss(model, val, seq, device)
    state["val_loss"] = vl
    if distill:
        state["distill_share"] = distill[2]
        state["distill_agreement"] = agreement(model, distill[1], seq, device)
        print(f"{kind}: top-1 agreement with the held-out answers "
              f"{state['distill_agreement']:.3f}", flush=True)
    state["params"] = params
    state["loss_log"] = state.get("loss_log", []) + log
    print(f"{kind}: {params/1e6:.1f}M params, {state['steps']} steps, "
          f"{state['tokens']/1e6:.1f}M tokens, val loss {vl:.3f}", flush=True)
    model.to("cpu").to(torch.bfloat16)
    model.save_pretrained(dest, max_shard_size="14MB")
    with open(os.path.join(dest, "train_state.json"), "w") as f:
        json.dump(state, f, indent=1)
    return model.to(torch.float32), state


@torch.no_grad()
def greedy_answers(model, tok, n_new=96):
    model.eval()
    out = []
    for p in PROMPTS:
        text = chat_prompt(p) + NO_THINK
        ids = torch.tensor([tok.encode(text, add_special_tokens=False).ids])
        gen = model.generate(ids, max_new_tokens=n_new, do_sample=False,
                             eos_token_id=tok.token_to_id("<|im_end|>"),
                             pad_token_id=tok.token_to_id("<|endoftext|>"))
        new = gen[0, ids.size(1):].tolist()
        out.append({"prompt": p, "prompt_ids": ids[0].tolist(), "greedy_ids": new,
                    "text": tok.decode(new, skip_special_tokens=False)})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--target-minutes", type=float, default=6.0)
    ap.add_argument("--draft-minutes", type=float, default=1.5)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--resume", default="")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--corpus-mb", type=float, default=160.0)
    ap.add_argument("--only", choices=("target", "draft"), default="")
    ap.add_argument("--tokenizer-from", default="")
    ap.add_argument("--tokenizer-cases", default="")
    ap.add_argument("--distill", default="")
    ap.add_argument("--distill-share", type=float, default=0.25)
    args = ap.parse_args()
    if not 0.0 < args.distill_share < 1.0:
        sys.exit("train: --distill-share must be between 0 and 1")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    train_texts, val_texts = build_corpus(args.seed, int(args.corpus_mb * 1e6))
    print(f"corpus: {len(train_texts)} train docs, {len(val_texts)} validation docs, "
          f"{sum(map(len, train_texts))/1e6:.1f} MB", flush=True)
    if args.tokenizer_from:
        tok = tokenizer_from_gguf(args.tokenizer_from)
    elif args.resume and os.path.exists(os.path.join(args.resume, "tokenizer.json")):
        tok = Tokenizer.from_file(os.path.join(args.resume, "tokenizer.json"))
    else:
        # A 40 MB sample is plenty for an 8k vocabulary and keeps this step short.
        sample, size = [], 0
        for t in train_texts:
            if size > 40_000_000:
                break
            sample.append(t)
            size += len(t)
        tok = train_tokenizer(sample, args.vocab)
    if args.tokenizer_cases:
        check_tokenizer(tok, args.tokenizer_cases)
    train = encode_stream(tok, train_texts)
    val = encode_stream(tok, val_texts)
    vocab = tok.get_vocab_size()
    print(f"tokenizer: {vocab} tokens; {len(train)/1e6:.1f}M train tokens, "
          f"{len(val)/1e6:.2f}M validation tokens ({time.time()-t0:.0f}s)", flush=True)
    report = {"vocab_size": vocab, "train_tokens": len(train), "val_tokens": len(val),
              "python": sys.version.split()[0], "torch": torch.__version__}
    distill = None
    if args.distill:
        opener = gzip.open if args.distill.endswith(".gz") else open
        with opener(args.distill, "rt", encoding="utf-8") as f:
            answers = [json.loads(line)["text"] for line in f if line.strip()]
        # every 50th answer is held out to measure agreement on
        d_train = encode_stream(tok, [a for i, a in enumerate(answers) if i % 50])
        d_val = encode_stream(tok, answers[::50])
        distill = (d_train, d_val, args.distill_share)
        report["distill_tokens"] = len(d_train)
        print(f"distill: {len(answers)} answers, {len(d_train)/1e6:.2f}M train tokens, "
              f"{len(d_val)/1e6:.3f}M held out; {args.distill_share:.0%} of every batch",
              flush=True)
    kinds = (("target", args.target_minutes), ("draft", args.draft_minutes))
    for kind, minutes in kinds:
        if args.only and kind != args.only:
            continue
        cfg = model_config(kind, vocab, tok)
        model, state = train_model(kind, cfg, train, val, minutes, device, args.out,
                                   args.resume, args.seed, distill)
        save_tokenizer(tok, os.path.join(args.out, kind))
        keys = ("params", "steps", "tokens", "seconds", "val_loss", "distill_share",
                "distill_agreement")
        report[kind] = {k: state[k] for k in keys if k in state}
        report[kind]["answers"] = greedy_answers(model.to(torch.float32), tok)
        for a in report[kind]["answers"][:2]:
            print(f"--- {kind}: {a['prompt']}\n{a['text']}", flush=True)
    save_tokenizer(tok, args.out)
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(f"done in {time.time()-t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
