#!/usr/bin/env bash
# scripts/test_aarch64.sh - the aarch64 stage: cross-builds the SDK and the
# tests of tests/cross for Linux aarch64 (cmake/toolchain-aarch64.cmake,
# Debian's gcc-aarch64-linux-gnu and the arm64 multiarch packages), runs
# them under qemu-aarch64 with ctest, then has the x86_64 build's
# cross_batch_check decode and name a batch the aarch64 SDK wrote.
# scripts/test.sh calls it after the native builds; alone:
#   scripts/test_aarch64.sh            (installs what is missing, as root)
# It needs the native build dir `build` for cross_batch_check (built here
# if missing). What the stage proves and does not: tests/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
perf_install_deps
perf_install_aarch64_deps

jobs=$(nproc)
start=$(date +%s)

echo "== aarch64 cross build (tests/cross, under qemu-aarch64)"
cmake -S . -B build-aarch64 -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake -DPERF_CROSS_TESTS_ONLY=ON
cmake --build build-aarch64 -j "$jobs"

# Skipped under qemu-user, each for a documented reason (tests/README.md,
# "The aarch64 stage"): the cases re-execute the test program
# (/proc/self/exe) in a child process, which qemu-user cannot do without
# binfmt_misc registration (a machine-wide setting a CI container lacks).
skip='^(sdk_fatal_hang|spool_two_processes|spool_kill9)$'
(cd build-aarch64 && ctest --output-on-failure -j "$jobs" -E "$skip")

echo "== a batch written on aarch64, named by the x86_64 collector's symbolizer"
if [ ! -x build/tests/collector/cross_batch_check ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
  cmake --build build --target cross_batch_check -j "$jobs"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# qemu-user cannot send the guest signals 63 and 64 (see tests/monitors/
# test_sdk.c): the sampler gets SIGRTMIN + 6 here. Captures wait up to 5 s
# for the emulated thread.
PERF_SDK_SAMPLE_SIGNAL=40 PERF_SDK_SAMPLE_TIMEOUT_MS=5000 QEMU_LD_PREFIX=/ \
  qemu-aarch64 build-aarch64/tests/cross/cross_batch_app "$work/report.txt"
build/tests/collector/cross_batch_check aarch64 "$work/report.txt.batches" \
  build-aarch64/tests/cross/cross_batch_app "$work/symbols"

echo "== aarch64 stage: $(($(date +%s) - start)) s"
