"""The training text of tokenwire's default models, made from the Python
sources of the machine it runs on (no third-party modules needed here, so
that machines without torch can build requests from it too).

* chat examples: a public function's docstring first line as the request,
  the function as the answer, half of them after a short reasoning block;
* the raw source of every file;
* files whose path hashes into 1/40 of the space are held out for
  validation.
"""
import ast
import hashlib
import multiprocessing
import os
import random
import sysconfig
import textwrap

SYSTEM = "You are a helpful Python coding assistant."

REQUESTS = [
    "Write a Python function that {d}",
    "Implement a function `{n}`: {d}",
    "Can you write `{n}` in Python? It should {dl}",
    "Python: {d}",
    "I need a helper function. {d}",
]
REASONS = [
    "The user wants a function that {dl} I will define `{n}` with the parameters {a} "
    "and return the result.",
    "This asks for `{n}`. It takes {a}. I will write it step by step and keep it short.",
    "Plan: write `{n}({a})` so that it {dl}",
]


def python_files(cap_bytes):
    """The machine's Python sources: the standard library first, then installed
    packages, in a fixed pseudo-random order, up to cap_bytes."""
    paths = sysconfig.get_paths()
    roots = [paths["stdlib"]] + sorted({paths["purelib"], paths["platlib"]})
    seen, files = set(), []
    for root in roots:
        group = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames
                                 if d not in ("site-packages", "dist-packages", "__pycache__"))
            for f in sorted(filenames):
                full = os.path.join(dirpath, f)
                if f.endswith(".py") and full not in seen:
                    seen.add(full)
                    group.append(full)
        group.sort(key=lambda p: hashlib.sha256(p.encode()).digest())
        files.extend(group)
    total = 0
    for path in files:
        try:
            size = os.path.getsize(path)
        except OSError:
            continue
        if size > 300_000:
            continue
        total += size
        if total > cap_bytes:
            return
        yield path


def held_out(path):
    return int(hashlib.sha256(path.encode()).hexdigest(), 16) % 40 == 0


NO_THINK = "<think>\n\n</think>\n\n"


def chat_prompt(user):
    """A conversation up to the assistant's first token."""
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
            f"<|im_start|>assistant\n")


def chat(user, answer, reasoning):
    think = f"<think>\n{reasoning}\n</think>\n\n" if reasoning else NO_THINK
    return f"{chat_prompt(user)}{think}{answer}<|im_end|>\n"


def functions_from(src):
    """The public functions of a source file worth a request: their name,
    the first line of their docstring, their arguments and their source."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        doc = ast.get_docstring(node)
        if not doc or not doc.strip() or node.name.startswith("_"):
            continue
        first = doc.strip().splitlines()[0].strip()
        if len(first) < 12 or len(first) > 160:
            continue
        seg = ast.get_source_segment(src, node)
        if not seg or seg.count("\n") > 60:
            continue
        seg = textwrap.dedent(" " * node.col_offset + seg)
        args = ", ".join(a.arg for a in node.args.args if a.arg != "self") or "no arguments"
        d = first if first.endswith(".") else first + "."
        yield dict(d=d, dl=d[0].lower() + d[1:], n=node.name, a=args), seg


def all_functions(src):
    return list(functions_from(src))


def examples(functions, rng):
    out = []
    for fill, seg in functions:
        user = rng.choice(REQUESTS).format(**fill)
        reasoning = rng.choice(REASONS).format(**fill) if rng.random() < 0.5 else ""
        out.append(chat(user, f"```python\n{seg}\n```", reasoning))
    return out


def build_corpus(seed, cap_bytes):
    """(train, validation) documents. The files are parsed on every core;
    the random choices are then made in file order, so the corpus does not
    depend on the number of cores."""
    rng = random.Random(seed)
    paths, srcs = [], []
    for path in python_files(cap_bytes):
        try:
            with open(path, encoding="utf-8") as f:
                srcs.append(f.read())
        except (UnicodeDecodeError, OSError):
            continue
        paths.append(path)
    with multiprocessing.Pool() as pool:
        found = pool.map(all_functions, srcs, chunksize=8)
    train, val = [], []
    for path, src, functions in zip(paths, srcs, found):
        docs = examples(functions, rng) + [src + "<|endoftext|>"]
        (val if held_out(path) else train).extend(docs)
    rng.shuffle(train)
    return train, val


def requests(seed, cap_bytes):
    """Chat requests made as the corpus makes them, from the training files
    only (held-out files stay unseen): (path, request, whether the answer
    reasons first)."""
    rng = random.Random(seed)
    for path in python_files(cap_bytes):
        if held_out(path):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                src = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        for fill, _ in functions_from(src):
            yield path, rng.choice(REQUESTS).format(**fill), rng.random() < 0.5
