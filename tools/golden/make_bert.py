"""Builds the encoder-model reference data: two WordPiece tokenizers (an
uncased and a cased one, trained on this repository's own documents) with
what Hugging Face tokenizers gives for a set of hostile texts, and a small
random-weight BERT checkpoint laid out as a sentence-transformers model,
with what transformers computes for it.

  OUT/tokenizers/wordpiece-uncased/{tokenizer.json,tests.inp,tests.out}
  OUT/tokenizers/wordpiece-cased/{...}
  OUT/golden/bert_cls/{config.json,model.safetensors,tokenizer.json,
      modules.json,1_Pooling/config.json,golden.safetensors,golden.json}

tests.inp holds the texts separated by lines of __ggml_vocab_test__ (as in
the shared reference set); tests.out one line of ids per text, without the
special tokens the post-processor adds.

golden.safetensors holds, for text i of golden.json, ids_i (with [CLS] and
[SEP]), hidden_i (last_hidden_state), cls_i and mean_i (the pooled vectors
before normalization). Computed in float32 on the CPU with eager attention.

Usage: python3 make_bert.py OUT   (needs torch, transformers, tokenizers,
safetensors). The weights are seeded; the tokenizer trainer orders tokens of
equal count by hash, so a new run may number a few vocabulary entries
differently, with outputs to match: regenerate everything together.
"""
import glob
import json
import os
import sys

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from tokenizers import trainers
from transformers import BertConfig, BertModel

SEP = "__ggml_vocab_test__"

TEXTS = [
    "", " ", "  ", "\t", "\n", " \n\t ", "Hello world", " Hello world", "Hello World!",
    "HELLO, world! How are you?", "don't stop-believing...", "a.b,c;d:e!f?g",
    "Café naïve résumé Ünïcödé", "e\u0301 and \u00e9 are the same after NFD",
    "\u4e2d\u6587\u6d4b\u8bd5 mixed\u4e2dtext", "\u3053\u3093\u306b\u3061\u306f \ud55c\uad6d\uc5b4",
    "emoji \U0001f999 and \U0001f600!", "ctrl\x00chars\x07here\x1b[0m", "zero\u200bwidth\ufeffjoin",
    "repl\ufffdchar", "nbsp\u00a0space\u2003em\u3000ideo", "3.14159 + 2,718 = 5.86",
    "x" * 99, "y" * 100, "z" * 101, "tokenization tokenizer tokenized tokens",
    "##hash ## prefix", "[CLS] looks special [SEP] [MASK]", "[cls] lower [unk]",
    "\u0130stanbul \u00df STRASSE \u1e9e", "\u03a3\u03af\u03c3\u03c5\u03c6\u03bf\u03c2 \u0391\u0398\u0397\u039d\u0391",
    "\u00bfQu\u00e9? \u00a1S\u00ed! \u2014 \u201cquoted\u201d \u2026", "tab\tsep\rcr\r\nlf",
    "under_score back\\slash `tick` ~tilde ^caret |pipe {brace} <angle>",
    "The engine reads GGUF files and Hugging Face checkpoints.",
    "unknownwordzzzqqq and supercalifragilisticexpialidocious",
]

GOLDEN_TEXTS = [
    "Hello world",
    "The engine reads GGUF files and Hugging Face checkpoints.",
    "Caf\u00e9 na\u00efve! \u4e2d\u6587 tokens, [MASK] and unknownwordzzz.",
    "a",
    "speculative decoding stays exact on hybrid models",  # repeated up to the limit
]
MAX_POS = 128


def corpus(root):
    lines = []
    for pat in ("README.md", "*/README.md", "docs/*.md", "core/*/*.c"):
        for path in sorted(glob.glob(os.path.join(root, pat))):
            with open(path, encoding="utf-8", errors="replace") as f:
                lines.extend(f.read().splitlines())
    lines += ["Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber stra\u00dfe",
              "\u4e2d\u6587\u6d4b\u8bd5 \u4e2d\u56fd \u6587\u5b57",
              "\u03a3\u03af\u03c3\u03c5\u03c6\u03bf\u03c2"] * 20
    return lines


def make_tokenizer(lines, lowercase, vocab_size):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
        continuing_subword_prefix="##")
    tok.train_from_iterator(lines, trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok


def write_tokenizer(tok, out):
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tests.inp"), "w", encoding="utf-8", newline="") as f:
        f.write(("\n" + SEP + "\n").join(TEXTS))
    with open(os.path.join(out, "tests.out"), "w", encoding="utf-8") as f:
        for t in TEXTS:
            ids = tok.encode(t, add_special_tokens=False).ids
            f.write(" " + " ".join(str(i) for i in ids) + "\n")


def make_model(tok, out):
    os.makedirs(os.path.join(out, "1_Pooling"), exist_ok=True)
    torch.manual_seed(7)
    cfg = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=96, num_hidden_layers=3,
                     num_attention_heads=4, intermediate_size=160, hidden_act="gelu",
                     max_position_embeddings=MAX_POS, type_vocab_size=2, layer_norm_eps=1e-12,
                     initializer_range=0.1, pad_token_id=0)
    cfg._attn_implementation = "eager"
    model = BertModel(cfg).eval()
    with torch.no_grad():
        # non-trivial LayerNorm parameters, so a missed bias or gain shows
        for name, p in model.named_parameters():
            if "LayerNorm" in name:
                p.copy_(torch.randn_like(p) * 0.2 + (1.0 if name.endswith("weight") else 0.0))
            elif name.endswith("bias"):
                p.copy_(torch.randn_like(p) * 0.05)
    model.save_pretrained(out, safe_serialization=True)
    tok.save(os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "modules.json"), "w") as f:
        json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                   {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}],
                  f, indent=2)
    with open(os.path.join(out, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": 96, "pooling_mode_cls_token": True,
                   "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False,
                   "pooling_mode_mean_sqrt_len_tokens": False}, f, indent=2)
    tensors, meta = {}, {"texts": GOLDEN_TEXTS, "hidden": 96}
    # the last text fills the position table to within a few tokens
    unit, reps = GOLDEN_TEXTS[-1], 1
    while len(tok.encode(" ".join([unit] * (reps + 1))).ids) <= MAX_POS:
        reps += 1
    GOLDEN_TEXTS[-1] = " ".join([unit] * reps)
    with torch.no_grad():
        for i, text in enumerate(GOLDEN_TEXTS):
            ids = tok.encode(text).ids
            x = torch.tensor([ids])
            h = model(input_ids=x, attention_mask=torch.ones_like(x),
                      token_type_ids=torch.zeros_like(x)).last_hidden_state[0]
            tensors[f"ids_{i}"] = x[0].to(torch.int64)
            tensors[f"hidden_{i}"] = h.contiguous()
            tensors[f"cls_{i}"] = h[0].clone()
            tensors[f"mean_{i}"] = h.mean(dim=0).contiguous()
            meta.setdefault("lengths", []).append(len(ids))
    save_file(tensors, os.path.join(out, "golden.safetensors"))
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(meta, f, indent=2, ensure_ascii=False)


def main():
    out = sys.argv[1]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    lines = corpus(root)
    uncased = make_tokenizer(lines, True, 1200)
    cased = make_tokenizer(lines, False, 1400)
    write_tokenizer(uncased, os.path.join(out, "tokenizers", "wordpiece-uncased"))
    write_tokenizer(cased, os.path.join(out, "tokenizers", "wordpiece-cased"))
    make_model(uncased, os.path.join(out, "golden", "bert_cls"))


if __name__ == "__main__":
    main()
