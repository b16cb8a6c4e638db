#!/bin/sh
# Installs what tokenwire needs on Debian 12 (only the packages that are
# missing), then configures and builds. Modes:
#   tools/setup.sh          install + release build in build/
#   tools/setup.sh test     install + ASan/UBSan build in build-test/ + every test
#   tools/setup.sh run      install + release build, then start tokenwired
set -eu

cd "$(dirname "$0")/.."
mode="${1:-build}"

packages="meson ninja-build pkg-config gcc protobuf-c-compiler libprotobuf-c-dev
libnng-dev libmbedtls-dev libopenblas-dev libzstd-dev libssl-dev libcmocka-dev
libjansson-dev libpcre2-dev libinih-dev libcurl4-openssl-dev libutf8proc-dev"

missing=""
for p in $packages; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
if [ -n "$missing" ]; then
    echo "setup: installing$missing"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo="sudo"
        else
            echo "setup: need root (or sudo) to install:$missing" >&2
            exit 1
        fi
    fi
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
    # shellcheck disable=SC2086
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
fi

jobs="$(nproc 2>/dev/null || echo 2)"

case "$mode" in
build|run)
    if [ ! -d build ]; then
        meson setup build --buildtype=release
    fi
    ninja -C build -j "$jobs"
    if [ "$mode" = run ]; then
        shift || true
        exec ./tools/run-default.sh "$@"
    fi
    ;;
test)
    if [ ! -d build-test ]; then
        meson setup build-test -Dsanitize=address,undefined
    fi
    ninja -C build-test -j "$jobs"
    status=0
    meson test -C build-test --num-processes "$jobs" --print-errorlogs --timeout-multiplier 3 || status=$?
    # cmocka's own summary line of every test program, so a reader sees what ran.
    echo "---- cmocka summary ----"
    awk '/^test: /{name=$0; sub(/^test: +/, "", name)}
         /^\[  (PASSED|FAILED|SKIPPED) *\]/{print name ": " $0}
         /^SKIPPED \(/{print name ": " $0}' build-test/meson-logs/testlog.txt || true
    exit "$status"
    ;;
*)
    echo "usage: tools/setup.sh [build|test|run]" >&2
    exit 2
    ;;
esac
