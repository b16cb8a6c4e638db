#!/usr/bin/env python3
"""llama-bench's JSON lines (-o jsonl) on stdin as the rows tw-bench-engine
prints (suite "llamacpp"): pp128 as prefill_128, pp512 as prefill_512 and
tg128 as decode_128, each llama-bench's mean over its repetitions, so
report.py sets them beside tokenwire's rows for the same file.

    llama-bench -m F.gguf -p 128,512 -n 128 -o jsonl | llamabench_rows.py --label NAME
"""
import argparse
import json
import math
import sys

NAMES = {(128, 0): "prefill_128", (512, 0): "prefill_512", (0, 128): "decode_128"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", required=True, help="the model label tokenwire's rows carry")
    ap.add_argument("--engine", default="llama.cpp llama-bench",
                    help="what to call this llama.cpp in the rows")
    args = ap.parse_args()
    out = []
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            sys.exit(f"llamabench_rows.py: not a JSON line from llama-bench ({e}): {line[:80]}")
        if not isinstance(r, dict):
            sys.exit("llamabench_rows.py: a llama-bench line is not a JSON object")
        try:
            key = (int(r["n_prompt"]), int(r["n_gen"]))
            mean = float(r["avg_ts"])
            samples = [float(s) for s in r.get("samples_ts", [])]
        except KeyError as e:
            sys.exit(f"llamabench_rows.py: a llama-bench line without the field {e}")
        except (TypeError, ValueError) as e:
            sys.exit(f"llamabench_rows.py: a llama-bench line with a field out of shape ({e})")
        if not math.isfinite(mean) or mean <= 0:
            sys.exit(f"llamabench_rows.py: llama-bench gave {mean} tok/s")
        name = NAMES.get(key)
        if name is None:
            continue
        extra = {
            "threads": r.get("n_threads"),
            "reps": len(samples) or None,
            "summary": "the mean of",
            "samples_tok_s": samples,
            "stddev_tok_s": r.get("stddev_ts"),
            "engine": f"{args.engine} (build {r.get('build_number', '?')}, "
                      f"commit {r.get('build_commit', '?')})",
            "system_info": f"{r.get('cpu_info', '')}; {r.get('backends', '')}",
        }
        out.append({"suite": "llamacpp", "name": name, "model": args.label, "value": mean,
                    "unit": "tok/s", "extra": extra})
    if not out:
        sys.exit("llamabench_rows.py: llama-bench gave no pp128, pp512 or tg128 line")
    # only once every line has passed, so a bad line leaves no rows behind
    for row in out:
        print(json.dumps(row))
        print(f"[llamacpp] {args.label}: {row['name'].replace('_', ' ')}: {row['value']:.1f} tok/s",
              file=sys.stderr)


if __name__ == "__main__":
    main()
