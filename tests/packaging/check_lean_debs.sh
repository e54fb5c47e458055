#!/usr/bin/env bash
# check_lean_debs.sh SOURCE_DIR LIBDIR VERSION - scripts/package.sh's build
# (PERF_BUILD_TESTS=OFF, PERF_BUILD_BENCH=OFF) in a scratch directory: no
# test or benchmark is configured or built, and its packages pass every
# check of check_debs.sh (files, control fields, lintian, the collector
# started from its unit, the consumer built against libperfsdk-dev).
set -euo pipefail
src=$1 libdir=$2 version=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/perf-lean-debs.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
build=$work/build
"$src/scripts/package.sh" "$build" >"$work/package.log" 2>&1 ||
  fail "scripts/package.sh failed: $(tail -n 30 "$work/package.log")"
if [ -e "$build/tests" ] || [ -e "$build/bench" ]; then
  fail "the packaging build configured tests or benchmarks: $(ls "$build")"
fi
[ -z "$(cd "$build" && ctest -N | grep 'Test *#')" ] || fail "the packaging build has ctest tests"
targets=$(grep -c '^build .*: C_EXECUTABLE_LINKER' "$build/build.ninja" || true)
echo "packaging build: $targets executables linked, no tests, no benchmarks"
"$(dirname "$0")/check_debs.sh" "$build" "$src" "$libdir" "$version"
