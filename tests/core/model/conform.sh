#!/bin/sh
# Runs tw-conform on one golden checkpoint directory, directly or after
# converting it to GGUF with tw-convert, the sequences' K/V stored as f32
# unless --kv-type says otherwise.
#   conform.sh [--kv-type f32|f16] TW_CONFORM GOLDEN_DIR
#   conform.sh [--kv-type f32|f16] TW_CONFORM GOLDEN_DIR TW_CONVERT TYPE [MIN_TOP1_PERCENT]
set -u
kv=f32
if [ "$1" = "--kv-type" ]; then
    kv=$2
    shift 2
fi
conform=$1
golden=$2
if [ ! -f "$golden/golden.safetensors" ]; then
    echo "SKIPPED (no ../shared reference data)"
    exit 0
fi
if [ $# -lt 4 ]; then
    exec "$conform" "$golden" "$golden/golden.safetensors" --kv-type "$kv"
fi
convert=$3
type=$4
out="${TW_BUILD_DIR:-.}/conform-$(basename "$golden")-$type-$$.gguf"
"$convert" "$golden" "$out" --type "$type" || { rm -f "$out"; exit 1; }
if [ $# -ge 5 ]; then
    "$conform" "$out" "$golden/golden.safetensors" --kv-type "$kv" --min-top1 "$5"
else
    "$conform" "$out" "$golden/golden.safetensors" --kv-type "$kv"
fi
rc=$?
rm -f "$out"
exit $rc
