"""Collects a target model's own answers, for training a draft model that
predicts the target rather than the corpus (sequence-level distillation:
the draft's proposals are kept when they match what the target writes).

It makes chat requests the way the training corpus does (corpus.py, from the
training files only: held-out files stay unseen), sends them to a running
tokenwire-bridge (or any OpenAI-compatible server) with greedy decoding, and
writes one JSON object per line: {"text": the conversation as the model saw
and wrote it}. Standard library only.

    python3 distill.py OUT.jsonl [--url http://127.0.0.1:8080/v1] [--model NAME]
                       [--count N] [--max-tokens 192] [--parallel 16]
                       [--exclude FILE]   (requests listed there, one per line, are skipped)
"""
import argparse
import concurrent.futures
import json
import sys
import time
import urllib.error
import urllib.request

import corpus


def ask(url, model, user, think, max_tokens, timeout):
    body = {
        "model": model,
        "messages": [{"role": "system", "content": corpus.SYSTEM},
                     {"role": "user", "content": user}],
        "temperature": 0,
        "max_tokens": max_tokens,
        "chat_template_kwargs": {"enable_thinking": think},
    }
    req = urllib.request.Request(url + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        reply = json.load(resp)
    choice = reply["choices"][0]
    msg = choice["message"]
    # the text as the model read and wrote it: the server returns the
    # reasoning and the answer apart, each with its own newlines
    text = corpus.chat_prompt(user)
    if think:
        text += "<think>" + (msg.get("reasoning_content") or "") + "</think>"
    else:
        text += corpus.NO_THINK
    text += msg.get("content") or ""
    if choice.get("finish_reason") == "stop":
        text += "<|im_end|>\n"  # an end only where the target wrote one
    return text, reply.get("usage", {}).get("completion_tokens", 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--url", default="http://127.0.0.1:8080/v1")
    ap.add_argument("--model", default="tokenwire-coder-24m")
    ap.add_argument("--count", type=int, default=4000)
    ap.add_argument("--max-tokens", type=int, default=192)
    ap.add_argument("--parallel", type=int, default=16)
    ap.add_argument("--seed", type=int, default=4321)
    ap.add_argument("--corpus-mb", type=float, default=160.0)
    ap.add_argument("--exclude", default="")
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args()
    if args.count < 1 or args.parallel < 1 or args.max_tokens < 1:
        sys.exit("distill: --count, --parallel and --max-tokens must be positive")
    skip = set()
    if args.exclude:
        with open(args.exclude, encoding="utf-8") as f:
            skip = {line.strip() for line in f if line.strip()}
    todo, seen = [], set()
    for _, user, think in corpus.requests(args.seed, int(args.corpus_mb * 1e6)):
        if user in skip or user in seen:
            continue
        seen.add(user)
        todo.append((user, think))
        if len(todo) == args.count:
            break
    print(f"distill: {len(todo)} requests", flush=True)
    t0, tokens, failed = time.time(), 0, 0
    with open(args.out, "w", encoding="utf-8") as out, \
            concurrent.futures.ThreadPoolExecutor(args.parallel) as pool:
        futures = [pool.submit(ask, args.url, args.model, u, t, args.max_tokens, args.timeout)
                   for u, t in todo]
        for i, fut in enumerate(futures, 1):
            try:
                text, n = fut.result()
            except (urllib.error.URLError, OSError, KeyError, IndexError, TypeError,
                    ValueError) as e:
                failed += 1
                print(f"distill: request {i} failed: {e}", file=sys.stderr, flush=True)
                continue
            tokens += n
            out.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
            if i % 200 == 0:
                dt = time.time() - t0
                print(f"distill: {i}/{len(todo)} answers, {tokens} tokens, "
                      f"{tokens / dt:.0f} tokens/s", flush=True)
    print(f"distill: {len(todo) - failed} answers, {tokens} tokens in {time.time() - t0:.0f} s, "
          f"{failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
