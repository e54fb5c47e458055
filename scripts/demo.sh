#!/usr/bin/env bash
# scripts/demo.sh - the main job: install what is missing, build, and run the
# sampler demo, which parks threads in recognisable call chains and prints
# every thread's stack as the SDK captures it.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
perf_install_deps

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target backtrace_demo >/dev/null
./build/samples/backtrace_demo
