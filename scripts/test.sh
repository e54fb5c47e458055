#!/usr/bin/env bash
# scripts/test.sh - from a fresh Debian 12 machine: install what is missing,
# build, and run the whole ctest suite twice: an optimized build and an
# AddressSanitizer + UndefinedBehaviorSanitizer build; then the libFuzzer
# targets (clang, tests/fuzz): their corpus and a bounded fuzz run; then the
# aarch64 stage (scripts/test_aarch64.sh: a cross build under qemu-aarch64;
# skip it with --no-aarch64, run it alone with --aarch64-only).
set -euo pipefail
cd "$(dirname "$0")/.."
aarch64=1
case "${1:-}" in
  --aarch64-only) exec scripts/test_aarch64.sh ;;
  --no-aarch64) aarch64=0 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--aarch64-only | --no-aarch64]" >&2; exit 2 ;;
esac
source scripts/deps.sh
perf_install_deps

jobs=$(nproc)

# The dashboard's browser test (ctest dashboard_browser) needs playwright-core:
# installed from the lock file, kept when the locked version is there already
# (no network needed then); npm missing or failing stops here.
echo "== playwright-core for the dashboard's browser test (tests/collector/http/dashboard)"
(cd tests/collector/http/dashboard &&
  { node -e 'const v = require("./package-lock.json").packages["node_modules/playwright-core"].version;
      process.exit(require("./node_modules/playwright-core/package.json").version === v ? 0 : 1)' \
      2>/dev/null || npm ci --no-audit --no-fund --prefer-offline; })

echo "== release build (RelWithDebInfo, -Werror)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j "$jobs"
(cd build && ctest --output-on-failure -j "$jobs")

echo "== ASan + UBSan build"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPERF_SANITIZE=ON -DPERF_BUILD_BENCH=OFF
cmake --build build-asan -j "$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j "$jobs")

echo "== libFuzzer build (clang, ASan + UBSan, tests/fuzz only)"
CC=clang cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPERF_FUZZ=ON -DPERF_BUILD_BENCH=OFF
cmake --build build-fuzz -j "$jobs"
(cd build-fuzz && ctest --output-on-failure)

if [ "$aarch64" = 1 ]; then
  scripts/test_aarch64.sh
fi
