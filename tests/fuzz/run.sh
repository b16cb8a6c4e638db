#!/bin/sh
# Runs fuzz harnesses one after another, niced, each for SECONDS (default
# 180), on the corpora under BUILD/corpus (made by make_corpus.py).
# Crashes land in BUILD/fuzz-art/<name>/, logs in BUILD/fuzz-art/<name>.log.
# usage: tests/fuzz/run.sh BUILD [SECONDS] [NAME...]
set -u
build=$1
secs=${2:-180}
shift
[ $# -gt 0 ] && shift
names=${*:-"wire gguf safetensors model_config tokenize tokenizer_hf chat_template chat_render bridge_request bridge_reply toolcall twd_config seq_state json_grammar"}
for n in $names; do
    mkdir -p "$build/fuzz-art/$n" "$build/corpus/$n"
    nice -n 19 "$build/tests/fuzz/fuzz_$n" -max_total_time="$secs" -rss_limit_mb=2048 \
        -timeout=10 -print_final_stats=1 -artifact_prefix="$build/fuzz-art/$n/" \
        "$build/corpus/$n" >"$build/fuzz-art/$n.log" 2>&1
    echo "$n: rc=$? $(grep -E 'stat::number_of_executed_units' "$build/fuzz-art/$n.log")"
done
