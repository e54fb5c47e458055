#!/usr/bin/env bash
# scripts/demo.sh - the main job: install what is missing, build, and run the
# two samples:
#  - backtrace_demo parks threads in recognisable call chains and prints
#    every thread's stack as the SDK captures it;
#  - demo_app runs an event loop with the SDK switched on (a ~1 s hang on the
#    loop thread, a ~3 s CPU burn on a worker) and writes its events to a
#    report file, printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
perf_install_deps

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target backtrace_demo demo_app perf-dump >/dev/null

heading() { printf '\n==== %s ====\n\n' "$*"; }

heading "backtrace_demo: every thread's stack"
./build/samples/backtrace_demo

# demo_app writes everything (the report, the SDK's state) in a scratch
# directory that is removed on exit.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
demo_app="$PWD/build/samples/demo_app"

heading "demo_app: hang + CPU burst, file sink"
(
  cd "$tmp"
  PERF_SDK_SINK=file \
  PERF_SDK_SINK_PATH="$tmp/perf-report.txt" \
  PERF_SDK_DATA_DIR="$tmp/data" \
    "$demo_app"
)

heading "demo_app: $tmp/perf-report.txt"
if [ ! -s "$tmp/perf-report.txt" ]; then
  echo "demo_app wrote no report" >&2
  exit 1
fi
cat "$tmp/perf-report.txt"

heading "perf-dump: the same events as batch records ($tmp/perf-report.txt.batches)"
./build/tools/perf-dump --max-stacks 1 "$tmp/perf-report.txt"
