#!/bin/sh
# A checkpoint quantized at load against the GGUF tw-convert writes from it.
#   quantize_load.sh TEST TW_CONVERT HF_DIR TYPE
set -u
test=$1
convert=$2
dir=$3
type=$4
out="${TW_BUILD_DIR:-.}/quantize-load-$(basename "$dir")-$type-$$.gguf"
"$convert" "$dir" "$out" --type "$type" || { rm -f "$out"; exit 1; }
"$test" "$dir" "$out" "$type"
rc=$?
rm -f "$out"
exit $rc
