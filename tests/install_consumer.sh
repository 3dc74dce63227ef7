#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, builds examples/consumer against it with find_package(strata),
# runs it, and runs the installed strata-smi.
# Usage: install_consumer.sh BUILD_DIR SOURCE_DIR [CXX_FLAGS [LINKER_FLAGS]]   (the flags of the build under test)
set -euo pipefail
build=$1
source=$2
cxx_flags=${3:-}
linker_flags=${4:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "install_consumer: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 ||
  fail "cmake --install failed:"$'\n'"$(cat "$work/install.log")"
[ -f "$work/prefix/include/strata/strata.h" ] || fail "include/strata/strata.h was not installed"
# Only the installed prefix may be found: the build tree's package files are not on CMake's search path.
# Their output is kept and shown only when they fail: ninja prints a compiler's errors on stdout.
cmake -S "$source/examples/consumer" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  -DCMAKE_CXX_FLAGS="$cxx_flags" -DCMAKE_EXE_LINKER_FLAGS="$linker_flags" >"$work/configure.log" 2>&1 ||
  fail "configuring examples/consumer failed:"$'\n'"$(cat "$work/configure.log")"
cmake --build "$work/build" >"$work/build.log" 2>&1 ||
  fail "building examples/consumer failed:"$'\n'"$(cat "$work/build.log")"

output=$("$work/build/consumer") || fail "consumer exited non-zero; it printed:"$'\n'"$output"
echo "$output"
grep -q "^device cpu: ." <<<"$output" || fail "no cpu device line"
grep -Eq "^device cuda:0: .|^cuda unavailable: ." <<<"$output" || fail "neither a GPU nor the reason for none"
grep -q "^allocated 1048576 bytes on cpu" <<<"$output" || fail "no allocation line"
grep -q "^sum of squares: 55$" <<<"$output" || fail "wrong sum of squares"
# Captured first: grep -q stops reading early, and under pipefail the SIGPIPE that ldd then gets fails the pipe.
libs=$(ldd "$work/build/consumer")
grep -q "$work/prefix/lib/libstrata.so" <<<"$libs" ||
  fail "consumer does not use the installed libstrata"

smi=$("$work/prefix/bin/strata-smi") || fail "the installed strata-smi exited non-zero"
grep -q "^cpu " <<<"$smi" || fail "the installed strata-smi lists no cpu:"$'\n'"$smi"
