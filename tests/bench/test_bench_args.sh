#!/bin/sh
# The bench programs' command lines: every bad value, missing value and
# unknown option stops the program at once with exit 2 and a line that
# names the option and what it takes, before any measuring starts.
set -u
ENGINE=$1 KV=$2 STREAM=$3 RPC=$4 SPEC=$5 CACHE=$6 KERNELS=$7 PORTS=$8 PREFIX=$9
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
failed=0

# expect PATTERN PROGRAM ARGS...: exit 2, and PATTERN (fixed text) on stderr
expect() {
    want=$1
    shift
    timeout 20 "$@" >"$D/out" 2>"$D/err"
    rc=$?
    if [ "$rc" -ne 2 ] || ! grep -qF -- "$want" "$D/err"; then
        echo "FAIL: $(basename "$1") ${*#"$1"}: exit $rc, wanted 2 and: $want"
        sed 's/^/  stderr: /' "$D/err"
        failed=1
    fi
}

expect "tw-bench-engine: --chunk wants a whole number from 1 to 4096, not '0'" \
    "$ENGINE" --model m.gguf --chunk 0
expect "tw-bench-engine: --threads wants a whole number from 1 to 4096, not 'two'" \
    "$ENGINE" --threads two --model m.gguf
expect "tw-bench-engine: --bandwidth wants a number above 0" "$ENGINE" --model m --bandwidth -3
expect "tw-bench-engine: --bandwidth wants a number above 0" "$ENGINE" --model m --bandwidth 9x
expect "tw-bench-engine: --kv-type must be f16 or f32, not 'q8'" "$ENGINE" --model m --kv-type q8
expect "tw-bench-engine: --model needs a value" "$ENGINE" --quick --model
expect "tw-bench-engine: --model is required" "$ENGINE" --quick
expect "tw-bench-engine: unknown option '--fast'" "$ENGINE" --model m --fast
expect "decode-prefetch must be auto, on or off" "$ENGINE" --model m --decode-prefetch maybe
expect "f16-prefill must be auto, tiles, panels or blas" "$ENGINE" --model m --f16-prefill gpu
expect "tw-bench-kv: --tokens wants a whole number from 16 to 65536, not '4'" \
    "$KV" --model m --tokens 4
expect "tw-bench-kv: --prefills wants a whole number from 1 to 64, not '65'" \
    "$KV" --model m --prefills 65
expect "tw-bench-kv: --prompt wants a whole number from 1 to 1048576, not '-1'" \
    "$KV" --model m --prompt -1
expect "tw-bench-stream: --rounds wants a whole number from 3 to 1000, not '2'" "$STREAM" --rounds 2
expect "tw-bench-stream: unknown tensor type 'Q9_0'" "$STREAM" --type Q9_0
expect "tw-bench-stream: --layers needs a value" "$STREAM" --layers
expect "tw-bench-rpc: --threads wants a whole number from 1 to 1024, not '0'" "$RPC" --threads 0
expect "tw-bench-rpc: unknown option 'extra'" "$RPC" --quick extra
expect "tw-bench-rpc: --isa needs a value" "$RPC" --quick --isa
expect "tw-bench-prefix: --seqs wants a whole number from 1 to 64, not '65'" \
    "$PREFIX" --model m --seqs 65
expect "tw-bench-prefix: --prefix wants a whole number from 64 to 1048576, not '12k'" \
    "$PREFIX" --model m --prefix 12k
expect "tw-bench-prefix: --model is required" "$PREFIX" --seqs 2
expect "tw-bench-prefix: unknown option '--copy'" "$PREFIX" --model m --copy
expect "tw-bench-spec: --k wants a whole number from 0 to 12, not '13'" "$SPEC" --k 13
expect "tw-bench-spec: --reps wants a whole number from 1 to 32, not '1e3'" "$SPEC" --reps 1e3
expect "tw-bench-spec: --draft needs a value" "$SPEC" --draft
expect "tw-bench-cache: --prefix wants a whole number from 0 to 1048576, not '12k'" \
    "$CACHE" m.gguf --prefix 12k
expect "tw-bench-cache: --answer wants a whole number from 1 to 256, not '257'" \
    "$CACHE" m.gguf --answer 257
expect "tw-bench-cache: the model file is required" "$CACHE" --turns 2
expect "tw-bench-cache: --prefix-cache-pages takes share or copy, not 'map'" \
    "$CACHE" m.gguf --prefix-cache-pages map
expect "tw-bench-kernels: -t takes 1 to 256 threads, not 'abc'" "$KERNELS" -t abc
expect "tw-bench-kernels: -V takes two ISAs this CPU runs, e.g. avx2,avx2vnni, not 'avx2'" "$KERNELS" -V avx2
expect "unknown kernel ISA 'sse'" "$KERNELS" -V avx2,sse
expect "usage: tw-bench-ports" "$PORTS" --now

# a well-formed --isa that this machine lacks or that does not exist is
# refused by the kernels' own check, named
expect "unknown kernel ISA 'sse9'" "$KV" --model m --isa sse9
exit $failed
