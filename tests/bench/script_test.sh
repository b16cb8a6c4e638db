# Sourced by the tests of bench/'s Python helpers: skips without python3
# (exit 77), gives a scratch folder $D removed on exit, and fail(), which
# prints the scratch files before failing the test.
command -v python3 >/dev/null 2>&1 || { echo "SKIPPED (no python3)"; exit 77; }
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() {
    echo "FAIL: $*"
    for f in "$D"/*; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done
    exit 1
}
