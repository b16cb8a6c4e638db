#!/bin/sh
# Runs tw-conform on one golden checkpoint directory, directly or after
# converting it to GGUF with tw-convert.
#   conform.sh TW_CONFORM GOLDEN_DIR
#   conform.sh TW_CONFORM GOLDEN_DIR TW_CONVERT TYPE [MIN_TOP1_PERCENT]
set -u
conform=$1
golden=$2
if [ ! -f "$golden/golden.safetensors" ]; then
    echo "SKIPPED (no ../shared reference data)"
    exit 0
fi
if [ $# -lt 4 ]; then
    exec "$conform" "$golden" "$golden/golden.safetensors"
fi
convert=$3
type=$4
out="${TW_BUILD_DIR:-.}/conform-$(basename "$golden")-$type-$$.gguf"
"$convert" "$golden" "$out" --type "$type" || { rm -f "$out"; exit 1; }
if [ $# -ge 5 ]; then
    "$conform" "$out" "$golden/golden.safetensors" --min-top1 "$5"
else
    "$conform" "$out" "$golden/golden.safetensors"
fi
rc=$?
rm -f "$out"
exit $rc
