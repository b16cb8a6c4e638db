#!/usr/bin/env python3
"""Sums up several rounds of the suite's model rows (tools/bench.sh
--rounds N): per type and metric of the llama.cpp reference, tokenwire's
range over the rounds, llama.cpp's on this machine where it ran, the range
of each round's own ratio, and how many rounds reached the reference row.
On a shared machine a single round says little; the spread of several,
each pair measured in the same minutes, is what can be compared.

Usage: rounds.py ROUND.jsonl... (one file per round; Markdown on stdout).
A line that is not a row, or a row of a compared metric without a
positive finite value, stops it with the file and line, before anything
is written."""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import LLAMA_CPP, fmt, table  # noqa: E402


METRICS = {m for ref in LLAMA_CPP.values() for m in ref}


class BadRow(Exception):
    pass


def load(path):
    """The round's model and llama.cpp values by (suite, metric, label)."""
    got = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                raise BadRow(f"{path}:{n}: not a JSON row")
            if not isinstance(r, dict) or not all(
                    isinstance(r.get(k), str) for k in ("suite", "name", "model")):
                raise BadRow(f"{path}:{n}: a row needs string suite, name and model")
            if r["suite"] not in ("model", "llamacpp") or r["name"] not in METRICS:
                continue
            v = r.get("value")
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v <= 0:
                raise BadRow(f"{path}:{n}: {r['suite']} {r['name']}: value {v!r} is not a "
                             "positive number")
            got[(r["suite"], r["name"], r["model"])] = float(v)
    return got


def span(values, unit=""):
    if not values:
        return "–"
    lo, hi = min(values), max(values)
    if fmt(lo) == fmt(hi):
        return fmt(lo, unit)
    return f"{fmt(lo)}–{fmt(hi, unit)}"


def ratio_span(values):
    if not values:
        return "–"
    lo, hi = min(values), max(values)
    return f"{lo:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}–{hi:.2f}x"


def summary(rounds):
    body = []
    for t, ref in LLAMA_CPP.items():
        label = f"qwen2-0.5b-{t}"
        for metric, want in ref.items():
            ours, theirs, ratios = [], [], []
            for got in rounds:
                tw = got.get(("model", metric, label))
                lc = got.get(("llamacpp", metric, label))
                if tw is not None:
                    ours.append(tw)
                if lc is not None:
                    theirs.append(lc)
                if tw is not None and lc is not None:
                    ratios.append(tw / lc)
            met = sum(v >= want for v in ours)
            body.append([t, metric, span(ours), span(theirs), ratio_span(ratios), f"{want:.1f}",
                         f"{met} of {len(ours)}" if ours else "–"])
    return table(["type", "metric", "tokenwire tok/s", "llama.cpp here tok/s",
                  "ratio per round", "reference tok/s", "rounds at or above it"],
                 ["---", "---", "---:", "---:", "---:", "---:", "---:"], body)


def main(argv):
    if len(argv) < 2:
        print("usage: rounds.py ROUND.jsonl...", file=sys.stderr)
        return 2
    try:
        rounds = [load(p) for p in argv[1:]]
    except (BadRow, OSError) as e:
        print(f"rounds.py: {e}", file=sys.stderr)
        return 1
    md = [f"## {len(rounds)} rounds against llama.cpp (qwen2-0.5b shape, gpt-2 vocabulary)", "",
          "Each round runs tokenwire and then, where it ran, llama.cpp on every model file; "
          "the ratio is each round's own pair.", ""]
    md += summary(rounds)
    sys.stdout.buffer.write(("\n".join(md) + "\n").encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
