#!/usr/bin/env bash
# scripts/demo.sh [--serve | --screenshot PNG] - the main job: install what
# is missing, build,
# and show the SDK end to end:
#  1. backtrace_demo parks threads in recognisable call chains and prints
#     every thread's stack as the SDK captures it;
#  2. demo_app (an event loop with a ~1 s hang on the loop thread and a ~3 s
#     CPU burn on a worker) in file-sink mode: the readable local report;
#  3. the same demo_app uploading to perf-collector, started here on
#     127.0.0.1 with a temporary SQLite database: once its batches are
#     stored, the top slow stacks as the collector aggregates them and the
#     dashboard URL. The collector is then stopped, unless --serve is given:
#     it then keeps running (Ctrl-C stops it) for a person to open the
#     dashboard. PERF_DEMO_PORT picks the port (default: the first free one
#     from 4318). --screenshot PNG writes the dashboard of that collector,
#     as Chromium shows it 1400 px wide, to PNG (scripts/screenshot.mjs;
#     the README's picture is made so), then stops.
# Each step keeps its output in a log file, $PERF_DEMO_LOG_DIR/<step>.log
# (default build/demo-logs): a step that fails prints the last lines of its
# log and what to do (the package to install, the first compiler error, the
# port to change), then the script exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

serve=0
screenshot=
case "${1:-}" in
"") ;;
--serve) serve=1 ;;
--screenshot)
  [ -n "${2:-}" ] || { echo "usage: $0 --screenshot PNG" >&2; exit 2; }
  screenshot=$(realpath -m "$2")
  ;;
*)
  echo "usage: $0 [--serve | --screenshot PNG]" >&2
  exit 2
  ;;
esac

source scripts/deps.sh
perf_install_deps

log_dir=${PERF_DEMO_LOG_DIR:-build/demo-logs}
mkdir -p "$log_dir"
log_dir=$(cd "$log_dir" && pwd)

# step NAME HINT CMD... - CMD with its output in NAME.log only (show=1:
# on the terminal too); when it fails: the log's last lines, then HINT (or,
# for "@FUNCTION", what FUNCTION LOG prints), and exit 1.
show=0
step() {
  local name=$1 hint=$2 log="$log_dir/$1.log" rc=0
  shift 2
  if [ "$show" = 1 ]; then
    "$@" 2>&1 | tee "$log" || rc=$?
  else
    "$@" >"$log" 2>&1 || rc=$?
  fi
  [ "$rc" = 0 ] && return 0
  step_failed "$name" "$rc" "$log" "$hint"
}
step_failed() { # NAME STATUS LOG HINT
  [[ $4 == @* ]] && set -- "$1" "$2" "$3" "$(${4#@} "$3")"
  {
    echo
    echo "demo.sh: step '$1' failed (exit $2). The last lines of $3:"
    tail -n 15 "$3" | sed 's/^/  | /'
    echo "what to do: $4"
  } >&2
  exit 1
}

# What to install when CMake's pkg_check_modules found no module (pkg-config
# or pkgconf's wording), else where to look.
configure_hint() { # LOG
  local modules module pkgs=() unknown=()
  modules=$(sed -nE "s/.*No package '([^']+)' found.*/\1/p; s/.*Package '([^']+)', required by .*not found.*/\1/p" \
    "$1" | sort -u)
  for module in $modules; do
    if [ -n "${PERF_PKGCONFIG_DEBIAN[$module]:-}" ]; then
      pkgs+=("${PERF_PKGCONFIG_DEBIAN[$module]}")
    else
      unknown+=("$module")
    fi
  done
  if [ ${#pkgs[@]} -gt 0 ]; then
    echo "install ${pkgs[*]} (sudo apt-get install ${pkgs[*]}), then run scripts/demo.sh again"
  elif [ ${#unknown[@]} -gt 0 ]; then
    echo "pkg-config found no ${unknown[*]}: install the -dev package that has ${unknown[0]}.pc (apt-file search ${unknown[0]}.pc), then run scripts/demo.sh again"
  else
    echo "CMake's first error is in $1 (grep -n 'CMake Error' $1); scripts/deps.sh lists every package the build needs"
  fi
}
build_hint() { # LOG
  local first
  first=$(grep -m1 'error:' "$1" || grep -m1 'FAILED:' "$1" || true)
  echo "the build's first error: ${first:-none found, read $1}; after installing a package, reconfigure: rm -rf build && scripts/demo.sh"
}

step configure @configure_hint cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
step build @build_hint \
  cmake --build build -j "$(nproc)" --target backtrace_demo demo_app perf-dump perf-collector

heading() { printf '\n==== %s ====\n\n' "$*"; }

# Everything the demo writes (reports, SDK state, the collector's database)
# goes to a scratch directory removed on exit, with the collector stopped.
tmp="$(mktemp -d)"
collector_pid=
cleanup() {
  if [ -n "$collector_pid" ] && kill -0 "$collector_pid" 2>/dev/null; then
    kill -TERM "$collector_pid" 2>/dev/null || true
    wait "$collector_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
demo_app="$PWD/build/samples/demo_app"

heading "backtrace_demo: every thread's stack"
show=1
step backtrace_demo "the SDK could not capture the threads' stacks: the log says why" \
  ./build/samples/backtrace_demo

heading "demo_app: hang + CPU burst, file sink"
step demo_app_file "demo_app failed in file-sink mode: the log has the SDK's messages" \
  env -C "$tmp" PERF_SDK_SINK=file PERF_SDK_SINK_PATH="$tmp/perf-report.txt" \
  PERF_SDK_DATA_DIR="$tmp/file-data" "$demo_app"

heading "demo_app: $tmp/perf-report.txt"
if [ ! -s "$tmp/perf-report.txt" ]; then
  echo "demo_app wrote no report" >&2
  exit 1
fi
cat "$tmp/perf-report.txt"

heading "perf-dump: the same events as batch records ($tmp/perf-report.txt.batches)"
step perf_dump "perf-dump could not read the batches: the log names the file and the reason" \
  ./build/tools/perf-dump --max-stacks 1 "$tmp/perf-report.txt"
show=0

# ---- the collector -----------------------------------------------------------

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port="${PERF_DEMO_PORT:-}"
if [ -z "$port" ]; then
  for p in $(seq 4318 4417); do
    if ! listening "$p"; then
      port=$p
      break
    fi
  done
  [ -n "$port" ] || { echo "no free port in 4318..4417 (set PERF_DEMO_PORT)" >&2; exit 1; }
fi
url="http://127.0.0.1:$port"

heading "perf-collector on $url (database $tmp/collector.db)"
collector_log="$log_dir/perf-collector.log"
./build/collector/perf-collector --listen "127.0.0.1:$port" --db "$tmp/collector.db" \
  2> >(tee "$collector_log" | sed -u 's/^/  [collector] /' >&2) &
collector_pid=$!
collector_hint="perf-collector did not answer $url/healthz; if the port is taken, pick another: PERF_DEMO_PORT=4400 scripts/demo.sh"
for _ in $(seq 200); do
  curl -sf "$url/healthz" >/dev/null 2>&1 && break
  if ! kill -0 "$collector_pid" 2>/dev/null; then
    rc=0
    wait "$collector_pid" || rc=$?
    collector_pid=
    step_failed perf-collector "$rc" "$collector_log" "$collector_hint"
  fi
  sleep 0.1
done
curl -sf "$url/healthz" >/dev/null || step_failed perf-collector 1 "$collector_log" "$collector_hint"

heading "demo_app: hang + CPU burst, uploading to the collector"
show=1
step demo_app_http "demo_app failed in http-sink mode: the log has the SDK's messages" \
  env -C "$tmp" PERF_SDK_SINK=http PERF_SDK_ENDPOINT="$url" PERF_SDK_API_KEY=demo-key \
  PERF_SDK_DATA_DIR="$tmp/http-data" "$demo_app"
show=0

# The SDK's shutdown sends what it has; wait until the collector stored the
# hang and the CPU event.
api() { curl -sf -H "Authorization: Bearer demo-key" "$url/api/v1/$1"; }
stored() { api "events?kind=$1&app=demo_app" | jq '.events | length'; }
for _ in $(seq 300); do
  [ "$(stored hang)" -ge 1 ] && [ "$(stored cpu)" -ge 1 ] && break
  sleep 0.1
done
if [ "$(stored hang)" -lt 1 ] || [ "$(stored cpu)" -lt 1 ]; then
  step_failed store 1 "$collector_log" \
    "the collector did not store the demo's hang and CPU events: its log above says why"
fi

# One stack per entry: its headline (the innermost frame of the app's own
# code, "in <innermost> <- " before it when that is deeper), its samples and
# own time (a hang group's hang time, a CPU stack's CPU time), the events it
# was in and their durations, then its frames innermost first, the app's own
# marked "*".
print_top() {
  api "top-stacks?kind=$1&app=demo_app&limit=3" | jq -r '
    .stacks | to_entries[] | .value as $s |
    "#\(.key + 1)  " +
    (if ($s.headline.in_app_index // 0) > 0 then "in \($s.headline.innermost.function) <- " else "" end) +
    "\($s.headline.function)\n" +
    "    \($s.samples) samples, " +
    (if $s.cpu_us != null then
      "\($s.cpu_us / 1000 | round) ms CPU; sampled in \($s.events) CPU event(s) lasting " +
      "\($s.event_total_ms | round) ms in all (mean \($s.event_mean_ms | round) ms, "
    else
      "\($s.hang_ms | round) ms hang time; \($s.events) hang(s) (mean \($s.event_mean_ms | round) ms, "
    end) +
    "p95 \($s.event_p95_ms | round) ms), versions \($s.versions | join(","))\n" +
    ([$s.frames, $s.in_app] | transpose | map((if .[1] then "    * " else "      " end) + .[0])
      | join("\n"))'
}

heading "collector: top hang stacks (where the loop thread was stuck)"
print_top hang
heading "collector: top CPU stacks"
print_top cpu

heading "dashboard"
echo "  $url/dashboard/"
echo "  (API: $url/api/v1/top-stacks?kind=hang, metrics: $url/metrics)"

if [ -n "$screenshot" ]; then
  heading "dashboard screenshot: $screenshot"
  [ -d tests/collector/http/dashboard/node_modules/playwright-core ] ||
    step npm_ci "npm could not install playwright-core: the log says why" \
      npm ci --prefix tests/collector/http/dashboard
  mkdir -p "$(dirname "$screenshot")"
  step screenshot "Chromium could not show the dashboard: the log says why" \
    node scripts/screenshot.mjs "$url" demo-key "$screenshot"
fi

if [ "$serve" = 1 ]; then
  echo
  echo "perf-collector keeps running (--serve); Ctrl-C stops it."
  wait "$collector_pid"
else
  kill -TERM "$collector_pid"
  wait "$collector_pid" || { echo "perf-collector exited with $?" >&2; exit 1; }
  collector_pid=
  echo
  echo "perf-collector stopped (run '$0 --serve' to keep it running)."
fi
