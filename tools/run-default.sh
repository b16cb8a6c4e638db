#!/bin/sh
# Starts tokenwired on the default model (or on the model given with --model).
set -eu
cd "$(dirname "$0")/.."

if [ ! -x build/server/engine/tokenwired ]; then
    echo "run: build/server/engine/tokenwired is not built yet" >&2
    exit 1
fi
if [ $# -gt 0 ]; then
    exec build/server/engine/tokenwired "$@"
fi
if [ -f models/default.gguf ]; then
    set -- --model models/default.gguf --model-name default
    if [ -f models/draft.gguf ]; then
        set -- "$@" --draft models/draft.gguf
    fi
    exec build/server/engine/tokenwired "$@"
fi
echo "run: no default model ships with this checkout yet; pass one:" >&2
echo "     tools/setup.sh run --model PATH/TO/model.gguf   (or a Hugging Face directory)" >&2
exit 1
