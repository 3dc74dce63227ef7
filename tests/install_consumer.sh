#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, builds examples/consumer against it with find_package(strata),
# and runs it. Usage: install_consumer.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$source/examples/consumer" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
output=$("$work/build/consumer")
echo "$output"
grep -q "sum of squares: 55" <<<"$output"
