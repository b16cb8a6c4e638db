#!/bin/sh
# The shipped BERT checkpoint through tw-convert: the GGUF's encoder against
# what transformers computed, within TOLERANCE (the type may round weights).
#   encoder_gguf.sh TEST_ENCODER GOLDEN_DIR TW_CONVERT TYPE TOLERANCE
set -u
test_encoder=$1
golden=$2
convert=$3
type=$4
tolerance=$5
out="${TW_BUILD_DIR:-.}/encoder-$type-$$.gguf"
"$convert" "$golden" "$out" --type "$type" || { rm -f "$out"; exit 1; }
"$test_encoder" "$golden" "$out" "$tolerance"
rc=$?
rm -f "$out"
exit $rc
