#!/usr/bin/env bash
# scripts/package.sh [BUILD_DIR] - the Debian packages (cmake/packaging.cmake:
# libperfsdk0, libperfsdk-dev, perf-collector, perf-tools) from a release
# build of what they hold only: PERF_BUILD_TESTS=OFF and PERF_BUILD_BENCH=OFF
# (cpack builds every target of its build first; the tests and benchmarks
# are two thirds of them). The .deb files land in BUILD_DIR (default
# build-deb); the packages install under /usr whatever the prefix.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-deb}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPERF_BUILD_TESTS=OFF -DPERF_BUILD_BENCH=OFF
cmake --build "$build" -j "$(nproc)"
(cd "$build" && cpack -G DEB)
ls "$build"/*.deb
