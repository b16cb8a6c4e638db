#!/usr/bin/env bash
# The benchmark suite in one command: builds release, makes the real-shape
# models (random weights, gpt-2 vocabulary) when missing, runs every
# benchmark and writes JSON, Markdown and PNG charts to results/<date>-<host>/.
#
#   tools/bench.sh [--quick] [--threads N] [--isa ISA] [--llamacpp] [--rounds N]
#
# --isa avx2 (or scalar, avx2vnni, avx512; default auto) runs tokenwire's
# kernels of that instruction set and OpenBLAS's of its level, as a machine
# without the wider ones would; with --llamacpp, llama-bench is then built
# for the same level (AVX2, FMA and F16C, with AVX-VNNI for avx2vnni; for
# scalar the x86-64 baseline) in a build folder of its own.
#
# --llamacpp also runs llama.cpp on every model file, right after tokenwire
# on it, so both meet the same phase of a shared machine. The npm package
# node-llama-cpp is installed into the build folder on first use (needs node
# and npm); it carries llama.cpp's source, from which llama-bench is built
# with this CPU's flags (git, cmake and g++, installed with apt-get when
# missing; several minutes, once). Without those tools the package's
# prebuilt llama.cpp runs instead, driven by bench/llamacpp/llamacpp.mjs.
#
# --rounds N (1-20, default 1) runs the model benchmarks (and llama.cpp with
# --llamacpp) N times over, type after type, and adds to results.md each
# row's range over the rounds, the range of each round's ratio and how many
# rounds reached the reference (bench/suite/rounds.py); the engine-API rows
# and the rest of the suite run once, in the first round.
#
# Environment: TW_BENCH_CACHE (model cache, default
# ${XDG_CACHE_HOME:-~/.cache}/tokenwire/bench-models), TW_BENCH_TYPES
# (default "F16 Q8_0 Q4_K_M Q4_0").
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
QUICK=""
THREADS=""
LLAMACPP=""
ROUNDS=1
ISA=auto
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) QUICK=--quick ;;
    --threads) THREADS="$2"; shift ;;
    --isa)
        ISA="${2:-}"
        shift
        case "$ISA" in
        auto | scalar | avx2 | avx2vnni | avx512) ;;
        *) echo "bench.sh: --isa takes auto, scalar, avx2, avx2vnni or avx512" >&2; exit 2 ;;
        esac
        ;;
    --llamacpp) LLAMACPP=1 ;;
    --rounds)
        ROUNDS="${2:-}"
        shift
        case "$ROUNDS" in '' | *[!0-9]*) ROUNDS=0 ;; esac
        if [ "$ROUNDS" -lt 1 ] || [ "$ROUNDS" -gt 20 ]; then
            echo "bench.sh: --rounds takes a whole number from 1 to 20" >&2
            exit 2
        fi
        ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

say() { printf '[bench.sh] %s\n' "$*" >&2; }

# ---- build -----------------------------------------------------------------
B=build-release
if [ ! -f "$B/build.ninja" ]; then
    say "configuring $B (release)"
    meson setup "$B" --buildtype=release -Dtests=disabled >/dev/null
fi
say "building $B"
ninja -C "$B" -j2 >/dev/null

# Installs Debian packages quietly where apt-get can (as root or through
# sudo without a password); says so when it cannot, and goes on.
apt_install() { # what-for packages...
    local why=$1
    shift
    command -v apt-get >/dev/null 2>&1 || return 1
    local sudo=""
    [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && sudo="sudo -n"
    say "installing $* $why"
    $sudo apt-get install -y -qq "$@" >/dev/null 2>&1 || { say "could not install $*"; return 1; }
}

# ---- gnuplot for the charts --------------------------------------------------
if ! command -v gnuplot >/dev/null 2>&1; then
    apt_install "for the charts" gnuplot-nox || say "results without charts"
fi

# ---- models ------------------------------------------------------------------
CACHE=${TW_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tokenwire/bench-models}
TYPES=${TW_BENCH_TYPES:-"F16 Q8_0 Q4_K_M Q4_0"}
mkdir -p "$CACHE"
VOCAB=""
for v in ../shared/vocab/ggml-vocab-gpt-2.gguf models/tokenwire-coder-24m-q8_0.gguf; do
    [ -f "$v" ] && { VOCAB=$v; break; }
done
[ -n "$VOCAB" ] || { echo "bench.sh: no vocabulary GGUF found" >&2; exit 1; }
for t in $TYPES; do
    f="$CACHE/qwen2-0.5b-$t.gguf"
    if [ ! -f "$f" ]; then
        say "generating $f"
        "$B/tools/mkmodel/tw-mkmodel" qwen2-0.5b "$f" --type "$t" --vocab "$VOCAB" --quiet
    fi
done

# ---- llama.cpp on the same machine (--llamacpp) --------------------------------
NLC_VERSION=3.22.1
LDIR="$ROOT/$B/llamacpp"
LBENCH=""
if [ -n "$LLAMACPP" ]; then
    command -v npm >/dev/null 2>&1 || { echo "bench.sh: --llamacpp needs node and npm" >&2; exit 1; }
    if [ ! -d "$LDIR/node_modules/node-llama-cpp" ]; then
        say "installing node-llama-cpp $NLC_VERSION (llama.cpp source and prebuilt) into $LDIR"
        mkdir -p "$LDIR"
        (cd "$LDIR" && npm install --no-audit --no-fund --ignore-scripts \
            "node-llama-cpp@$NLC_VERSION" >/dev/null)
    fi
    cp bench/llamacpp/llamacpp.mjs "$LDIR/"
    LSRC="$LDIR/llama.cpp"
    # the build for the ISA tokenwire runs: this CPU's flags, or a level's
    LBUILD="$LSRC/build"
    LFLAGS=(-DGGML_NATIVE=ON)
    LWHAT="this CPU's flags"
    case "$ISA" in
    avx2)
        LBUILD="$LSRC/build-avx2"
        LFLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
            -DGGML_BMI2=ON -DGGML_AVX512=OFF)
        LWHAT="AVX2, FMA and F16C"
        ;;
    avx2vnni)
        LBUILD="$LSRC/build-avx2vnni"
        LFLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
            -DGGML_BMI2=ON -DGGML_AVX_VNNI=ON -DGGML_AVX512=OFF)
        LWHAT="AVX2, FMA, F16C and AVX-VNNI"
        ;;
    scalar)
        LBUILD="$LSRC/build-baseline"
        LFLAGS=(-DGGML_NATIVE=OFF)
        LWHAT="the x86-64 baseline"
        ;;
    esac
    if [ ! -x "$LBUILD/bin/llama-bench" ]; then
        for tool in git cmake g++; do
            if ! command -v "$tool" >/dev/null 2>&1; then
                apt_install "to build llama-bench" git cmake g++ || true
                break
            fi
        done
        if command -v git >/dev/null 2>&1 && command -v cmake >/dev/null 2>&1 &&
            command -v g++ >/dev/null 2>&1; then
            say "building llama-bench from the llama.cpp source node-llama-cpp carries" \
                "($LWHAT; several minutes, once)"
            if [ ! -f "$LSRC/CMakeLists.txt" ]; then
                rm -rf "$LSRC"
                git clone -q "$LDIR/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$LSRC" \
                    2>/dev/null || true
            fi
            if [ -f "$LSRC/CMakeLists.txt" ] &&
                cmake -S "$LSRC" -B "$LBUILD" -DCMAKE_BUILD_TYPE=Release "${LFLAGS[@]}" \
                    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
                    -DLLAMA_BUILD_SERVER=OFF >"$LDIR/build.log" 2>&1 &&
                cmake --build "$LBUILD" --target llama-bench -j "$(nproc)" \
                    >>"$LDIR/build.log" 2>&1; then
                say "llama-bench built"
            else
                say "llama-bench did not build (see $LDIR/build.log): the prebuilt llama.cpp instead"
            fi
        else
            say "no git, cmake or g++: the prebuilt llama.cpp instead of llama-bench"
        fi
    fi
    if [ -x "$LBUILD/bin/llama-bench" ]; then LBENCH="$LBUILD/bin/llama-bench"; fi
fi

# ---- run -----------------------------------------------------------------------
OUT="results/$(date +%Y-%m-%d-%H%M)-$(hostname -s)"
mkdir -p "$OUT"
ROWS="$OUT/rows.jsonl"
: >"$ROWS"
TARGS=()
[ -n "$THREADS" ] && TARGS=(--threads "$THREADS")
# the programs that run kernels also take the ISA
KARGS=("${TARGS[@]}")
[ "$ISA" != auto ] && KARGS+=(--isa "$ISA")
BW=""
LREPS=3
[ -n "$QUICK" ] && LREPS=2
for round in $(seq 1 "$ROUNDS"); do
    RROWS="$OUT/round-$round.jsonl"
    : >"$RROWS"
    [ "$ROUNDS" -gt 1 ] && say "round $round of $ROUNDS"
    for t in $TYPES; do
        f="$CACHE/qwen2-0.5b-$t.gguf"
        ENGINE=(--no-engine)
        # the engine-API rows (TTFT, batching) need one type in quick mode
        if [ "$round" -eq 1 ] && { [ "$t" = Q8_0 ] || { [ -z "$QUICK" ] && [ "$t" = Q4_0 ]; }; }; then
            ENGINE=()
        fi
        EXTRA=()
        [ -n "$BW" ] && EXTRA=(--bandwidth "$BW")
        say "engine benchmarks: qwen2-0.5b $t"
        "$B/bench/suite/tw-bench-engine" --model "$f" --label "qwen2-0.5b-$t" $QUICK \
            "${KARGS[@]}" "${ENGINE[@]}" "${EXTRA[@]}" >>"$RROWS"
        if [ -n "$LLAMACPP" ]; then
            say "llama.cpp on the same file: qwen2-0.5b $t"
            if [ -n "$LBENCH" ]; then
                # pp128, pp512 and tg128, as the reference rows were measured
                "$LBENCH" -m "$f" -t "${THREADS:-$(nproc)}" -p 128,512 -n 128 -r "$LREPS" \
                    -o jsonl 2>"$OUT/llama-bench-$t-$round.log" |
                    python3 bench/llamacpp/llamabench_rows.py --label "qwen2-0.5b-$t" \
                        --engine "llama-bench built here from node-llama-cpp $NLC_VERSION's source" \
                        >>"$RROWS" || say "llama-bench on $f failed (see $OUT/llama-bench-$t-$round.log)"
            else
                node "$LDIR/llamacpp.mjs" --model "$f" --label "qwen2-0.5b-$t" \
                    --threads "${THREADS:-$(nproc)}" --engine "node-llama-cpp $NLC_VERSION" \
                    >>"$RROWS" || say "llama.cpp run on $f failed"
            fi
        fi
        if [ -z "$BW" ]; then
            # a failed probe (0) leaves the next model to probe again
            BW=$(grep '"suite":"machine","name":"read_bandwidth"' "$RROWS" | head -1 |
                sed 's/.*"value":\([0-9.e+]*\).*/\1/' | awk '$1 > 0 {printf "%.3f", $1 / 1e9}')
        fi
    done
done
# the first round's rows are the suite's; later rounds feed only the summary
cat "$OUT/round-1.jsonl" >>"$ROWS"

say "decode kernels against a plain read of the same matrices"
SROUNDS=15
[ -n "$QUICK" ] && SROUNDS=7
for st in F16 Q8_0 Q4_0 Q5_0 Q4_K Q6_K; do
    "$B/bench/suite/tw-bench-stream" --type "$st" --rounds "$SROUNDS" "${KARGS[@]}" >>"$ROWS" ||
        say "stream benchmark of $st failed"
done

if [ -f "$CACHE/qwen2-0.5b-Q8_0.gguf" ]; then
    say "K/V types: f32 against f16 after a long prompt"
    KVP=3584
    [ -n "$QUICK" ] && KVP=1024
    "$B/bench/suite/tw-bench-kv" --model "$CACHE/qwen2-0.5b-Q8_0.gguf" --prompt "$KVP" --prefills 3 \
        "${KARGS[@]}" >>"$ROWS"
fi

say "tokenizer benchmark"
CORPUS="$OUT/corpus.txt"
: >"$CORPUS"
TARGET=$((4 * 1024 * 1024))
[ -n "$QUICK" ] && TARGET=$((1024 * 1024))
while [ "$(stat -c %s "$CORPUS")" -lt "$TARGET" ]; do
    cat ../shared/vocab/*.inp 2>/dev/null | grep -v '^__ggml_vocab_test__$' >>"$CORPUS" || true
    find . -name '*.md' -not -path './results/*' -not -path './build*' -exec cat {} + >>"$CORPUS"
done
"$B/bench/suite/tw-bench-tokenizer" "$VOCAB" "$CORPUS" gpt-2 >>"$ROWS"
rm -f "$CORPUS"

say "embeddings from an encoder (bge-small shape, random weights)"
EREPS=5
[ -n "$QUICK" ] && EREPS=3
"$B/bench/encoder/tw-bench-encode" --shape bge-small --reps "$EREPS" "${TARGS[@]}" >>"$ROWS" ||
    say "encoder benchmark failed"

say "RPC benchmarks through tokenwired"
MODEL="$CACHE/qwen2-0.5b-Q8_0.gguf"
[ -f "$MODEL" ] || MODEL="$CACHE/qwen2-0.5b-$(echo $TYPES | awk '{print $1}').gguf"
PORT=$((17000 + RANDOM % 2000))
RPC="tcp://127.0.0.1:$PORT"
PUB="tcp://127.0.0.1:$((PORT + 1))"
"$B/server/engine/tokenwired" --model "$MODEL" --model-name bench --listen "$RPC" \
    --publish "$PUB" "${KARGS[@]}" 2>"$OUT/tokenwired.log" &
TWD=$!
trap 'kill $TWD 2>/dev/null || true' EXIT
"$B/bench/suite/tw-bench-rpc" --rpc "$RPC" --pub "$PUB" --model "$MODEL" --label qwen2-0.5b-Q8_0 \
    $QUICK "${KARGS[@]}" >>"$ROWS" || say "RPC benchmark failed (see $OUT/tokenwired.log)"
kill "$TWD" 2>/dev/null || true
wait "$TWD" 2>/dev/null || true
trap - EXIT

say "report"
python3 bench/suite/report.py "$ROWS" "$OUT"
if [ "$ROUNDS" -gt 1 ]; then
    ROUNDFILES=()
    for round in $(seq 1 "$ROUNDS"); do ROUNDFILES+=("$OUT/round-$round.jsonl"); done
    if python3 bench/suite/rounds.py "${ROUNDFILES[@]}" >"$OUT/rounds.md"; then
        { echo; cat "$OUT/rounds.md"; } >>"$OUT/results.md"
        cat "$OUT/rounds.md"
    else
        say "no summary of the rounds"
    fi
fi
say "results in $ROOT/$OUT (results.md, results.json, *.png)"
cat "$OUT/results.md" | sed -n '1,/^## All results/p'
