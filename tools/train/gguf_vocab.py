"""Reads the BPE vocabulary of a GGUF file (tokens, merges, token types), so
that a model can be trained against the exact tokenizer of a shipped one.
Standard library only; reads the metadata and stops before the tensors.

    python3 gguf_vocab.py MODEL.gguf     prints the counts
"""
import struct
import sys

# GGUF value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}
MAX_STRING = 1 << 20
MAX_ITEMS = 1 << 24


class GGUFError(ValueError):
    pass


class Reader:
    def __init__(self, f):
        self.f = f

    def take(self, n):
        b = self.f.read(n)
        if len(b) != n:
            raise GGUFError("file ends inside the metadata")
        return b

    def scalar(self, t):
        fmt = SCALAR[t]
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self):
        n = self.scalar(U64)
        if n > MAX_STRING:
            raise GGUFError(f"a string of {n} bytes")
        return self.take(n).decode("utf-8")

    def value(self, t):
        if t == STRING:
            return self.string()
        if t == ARRAY:
            et, n = self.scalar(U32), self.scalar(U64)
            if n > MAX_ITEMS or et == ARRAY:
                raise GGUFError(f"an array of {n} items of type {et}")
            return [self.value(et) for _ in range(n)]
        if t not in SCALAR:
            raise GGUFError(f"unknown value type {t}")
        return self.scalar(t)


def read_metadata(path):
    """Every metadata key of a GGUF file, as a dict."""
    with open(path, "rb") as f:
        r = Reader(f)
        if r.take(4) != b"GGUF":
            raise GGUFError(f"{path} is not a GGUF file")
        version = r.scalar(U32)
        if version not in (2, 3):
            raise GGUFError(f"GGUF version {version}")
        r.scalar(U64)  # tensors
        n_kv = r.scalar(U64)
        if n_kv > 1 << 16:
            raise GGUFError(f"{n_kv} metadata keys")
        meta = {}
        for _ in range(n_kv):
            key = r.string()
            meta[key] = r.value(r.scalar(U32))
        return meta


def read_vocab(path):
    """(tokens, merges as pairs, token types) of a GGUF's gpt2-style BPE."""
    meta = read_metadata(path)
    if meta.get("tokenizer.ggml.model") != "gpt2":
        raise GGUFError(f"{path}: tokenizer {meta.get('tokenizer.ggml.model')!r} is not BPE")
    tokens = meta["tokenizer.ggml.tokens"]
    types = meta.get("tokenizer.ggml.token_type", [1] * len(tokens))
    merges = []
    for m in meta.get("tokenizer.ggml.merges", []):
        a, sep, b = m.partition(" ")
        if not sep:
            raise GGUFError(f"merge {m!r} has no space")
        merges.append((a, b))
    return tokens, merges, types


if __name__ == "__main__":
    toks, merges, types = read_vocab(sys.argv[1])
    control = [t for t, k in zip(toks, types) if k == 3]
    print(f"{len(toks)} tokens ({len(control)} control: {control}), {len(merges)} merges")
