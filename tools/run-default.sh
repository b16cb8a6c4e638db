#!/bin/sh
# Serves the default model: tokenwired with the shipped 24M-parameter Python
# coder (and its 3M draft for speculative decoding, where this tokenwired
# supports --draft) on tcp://127.0.0.1:7470 (token streams on :7471), and
# tokenwire-bridge in front of it on http://127.0.0.1:8080 for OpenAI
# clients. Ctrl-C stops both.
#
#   tools/run-default.sh                     the default model pair
#   tools/run-default.sh --model PATH ...    tokenwired gets these arguments instead
#
# TOKENWIRE_BUILD names the build directory (default: build).
set -eu
cd "$(dirname "$0")/.."

build="${TOKENWIRE_BUILD:-build}"
engine="$build/server/engine/tokenwired"
bridge="$build/server/bridge/tokenwire-bridge"
cli="$build/client/cli/tokenwire"
http=http://127.0.0.1:8080
target=models/tokenwire-coder-24m-q8_0.gguf
draft=models/tokenwire-coder-draft-3m-q8_0.gguf
name=tokenwire-coder-24m

for prog in "$engine" "$bridge"; do
    if [ ! -x "$prog" ]; then
        echo "run: $prog is not built yet (tools/setup.sh builds it)" >&2
        exit 1
    fi
done

with_draft=""
if [ $# -eq 0 ]; then
    if [ ! -f "$target" ]; then
        echo "run: $target is missing; pass a model: tools/setup.sh run --model PATH" >&2
        exit 1
    fi
    set -- --model "$target" --model-name "$name"
    # The draft model is only passed to a tokenwired that knows the option.
    if [ -f "$draft" ] && "$engine" --help 2>&1 | grep -q -e '  --draft '; then
        set -- "$@" --draft "$draft"
        with_draft=" (draft: $draft)"
    fi
else
    name=""
fi

"$engine" "$@" &
engine_pid=$!
"$bridge" --listen "$http" --quiet &
bridge_pid=$!

stopped=0
stop() {
    [ "$stopped" -eq 1 ] && return
    stopped=1
    kill -TERM "$bridge_pid" "$engine_pid" 2>/dev/null || true
    wait "$bridge_pid" 2>/dev/null || true
    wait "$engine_pid" 2>/dev/null || true
}
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
trap stop EXIT

# Ready once the bridge reports the engine up (loading takes a moment).
if command -v curl >/dev/null 2>&1; then
    i=0
    while [ "$i" -lt 300 ] && ! curl -sf "$http/health" >/dev/null 2>&1; do
        kill -0 "$engine_pid" 2>/dev/null || { echo "run: tokenwired exited" >&2; exit 1; }
        sleep 0.2
        i=$((i + 1))
    done
else
    sleep 2
fi

model_field=""
[ -n "$name" ] && model_field="\"model\":\"$name\","
cat <<EOF

tokenwire is serving ${name:-your model}$with_draft
  engine (binary protocol): tcp://127.0.0.1:7470, streams on tcp://127.0.0.1:7471
  OpenAI API:               $http/v1

Try it:
  curl $http/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{$model_field"messages":[{"role":"user","content":"Write a Python function that reverses a string."}],"max_tokens":200}'
  $cli chat "Write a Python function that reverses a string."

Ctrl-C stops both.
EOF

# Runs until Ctrl-C or until one of the two exits.
while kill -0 "$engine_pid" 2>/dev/null && kill -0 "$bridge_pid" 2>/dev/null; do
    sleep 1
done
echo "run: a process exited; stopping" >&2
exit 1
