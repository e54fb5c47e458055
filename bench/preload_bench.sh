#!/usr/bin/env bash
# bench/preload_bench.sh [BUILD_DIR] [ROUNDS] [REQUESTS] - what perf-run
# costs an unmodified server: Debian's redis-server under redis-benchmark
# (-q -t get,set), started plainly and under perf-run (file sink, default
# threshold), alternated ROUNDS times each (default 5) so that the load of
# the machine falls on both alike. Prints each run's GET and SET requests
# per second, then the median of each side and their ratio. Then the cost
# per wait itself: bench/wait_loop's poll() rounds that return at once,
# plainly and under perf-run, alternated, nanoseconds per round. Not a
# test: it never fails on timings (bench/README.md, "preload_bench").
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
requests=${3:-200000}
perf_run=$build/tools/perf-run
wait_loop=$build/bench/wait_loop
for p in "$perf_run" "$wait_loop" /usr/bin/redis-server /usr/bin/redis-benchmark /usr/bin/redis-cli; do
  [ -x "$p" ] || { echo "preload_bench: $p is missing (build, or apt-get install redis-server redis-tools)" >&2; exit 2; }
done
dir=$(mktemp -d /tmp/preload-bench.XXXXXX)
server=
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# run <label> [perf-run options --]: one server, one redis-benchmark; prints
# "<label> <get/s> <set/s>".
run() {
  local label=$1
  shift
  "$@" /usr/bin/redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$dir" >"$dir/server.out" 2>&1 &
  server=$!
  for _ in $(seq 200); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.05
  done
  local out
  out=$(redis-benchmark -p "$port" -q -n "$requests" -t get,set -c 50 2>/dev/null | tr '\r' '\n')
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$server" 2>/dev/null || true
  server=
  local set get
  set=$(printf '%s\n' "$out" | awk '/^SET: [0-9]/ {print $2}' | tail -1)
  get=$(printf '%s\n' "$out" | awk '/^GET: [0-9]/ {print $2}' | tail -1)
  echo "$label $get $set"
}

echo "redis-server $(redis-server --version | awk '{print $3}') redis-benchmark -q -n $requests -t get,set -c 50, $rounds rounds, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
results=$dir/results
for r in $(seq "$rounds"); do
  run plain env | tee -a "$results"
  run perf-run "$perf_run" --sink file --sink-path "$dir/report.txt" -- | tee -a "$results"
done
awk '
function median(a, n,   i, j, t) {
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
$1 == "plain" { pg[++np] = $2; ps[np] = $3 }
$1 == "perf-run" { qg[++nq] = $2; qs[nq] = $3 }
END {
  mpg = median(pg, np); mps = median(ps, np); mqg = median(qg, nq); mqs = median(qs, nq)
  printf "median GET/s plain %.0f perf-run %.0f ratio %.3f (cost %.1f%%)\n", mpg, mqg, mqg / mpg, 100 * (1 - mqg / mpg)
  printf "median SET/s plain %.0f perf-run %.0f ratio %.3f (cost %.1f%%)\n", mps, mqs, mqs / mps, 100 * (1 - mqs / mps)
}' "$results"

echo "wait_loop: poll() returning at once, 2000000 rounds, ns per round (plain, perf-run)"
for r in $(seq "$rounds"); do
  echo "plain $("$wait_loop" 2000000)"
  echo "perf-run $("$perf_run" --sink file --sink-path "$dir/wait-report.txt" -- "$wait_loop" 2000000)"
done | tee "$dir/waits"
awk '
function median(a, n,   i, j, t) {
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
$1 == "plain" { p[++np] = $2 }
$1 == "perf-run" { q[++nq] = $2 }
END { mp = median(p, np); mq = median(q, nq)
  printf "median ns per wait: plain %.1f perf-run %.1f: %.1f ns added per wait\n", mp, mq, mq - mp }' "$dir/waits"
