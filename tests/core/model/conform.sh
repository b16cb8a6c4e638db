#!/bin/sh
# Runs tw-conform on one golden family, from the HF checkpoint directly or
# after converting it to GGUF with tw-convert.
#   conform.sh TW_CONFORM FAMILY            (HF directory)
#   conform.sh TW_CONFORM FAMILY TW_CONVERT TYPE   (GGUF of TYPE)
set -u
conform=$1
family=$2
golden="${TW_SHARED_DIR:-../shared}/golden/$family"
if [ ! -f "$golden/golden.safetensors" ]; then
    echo "SKIPPED (no ../shared reference data)"
    exit 0
fi
if [ $# -lt 4 ]; then
    exec "$conform" "$golden" "$golden/golden.safetensors"
fi
convert=$3
type=$4
out="${TW_BUILD_DIR:-.}/conform-$family-$type.gguf"
"$convert" "$golden" "$out" --type "$type" || exit 1
"$conform" "$out" "$golden/golden.safetensors"
rc=$?
rm -f "$out"
exit $rc
