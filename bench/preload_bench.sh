#!/usr/bin/env bash
# bench/preload_bench.sh [BUILD_DIR] [ROUNDS] [REQUESTS] [SERVERS] [CONNECTIONS]
# - what perf-run costs an unmodified server, as the server's CPU time per
# request: Debian's redis-server (redis-benchmark -t get,set: REQUESTS of
# each), memcached -t 4 (bench/memcached_load: REQUESTS set/get) and nginx
# with 2 workers (wrk -t1, for REQUESTS / 30,000 seconds), each started
# plainly and under perf-run (file sink, default threshold), alternated
# ROUNDS times (default 5; which side goes first alternates too). SERVERS:
# a comma list of redis, memcached, nginx (default all three). CONNECTIONS
# (default 1): the load clients' connections. With one, every request is
# one wakeup of the server, one wait of its loop: the most the preload
# library can cost a request, and a figure that does not depend on how
# many requests a wakeup happens to batch on a loaded machine.
#
# A round reads the utime + stime of the server's processes (all their
# threads: the SDK's own are in the perf-run side's; nginx's workers) from
# /proc/PID/stat before and after its load, a warm-up excluded, and
# divides by the requests the load client counted. The verdict is on the
# median of the rounds' CPU-per-request ratios (perf-run / plain, <= 1.02:
# PASS, else MISS): CPU time is what the server pays, and it swings far
# less than requests per second with what the machine's other tenants do.
# Requests per second are printed too, with the spread of their ratios.
# Then the cost per wait itself: bench/wait_loop's poll() rounds that
# return at once, plainly and under perf-run, alternated, nanoseconds per
# round. Not a test: it exits 0 whatever the figures (bench/README.md,
# "preload_bench").
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
requests=${3:-200000}
servers=${4:-redis,memcached,nginx}
conns=${5:-1}
perf_run=$build/tools/perf-run
wait_loop=$build/bench/wait_loop
mc_load=$build/bench/memcached_load
need=("$perf_run" "$wait_loop")
[[ $servers == *redis* ]] && need+=(/usr/bin/redis-server /usr/bin/redis-benchmark /usr/bin/redis-cli)
[[ $servers == *memcached* ]] && need+=(/usr/bin/memcached "$mc_load")
[[ $servers == *nginx* ]] && need+=(/usr/sbin/nginx /usr/bin/wrk)
for p in "${need[@]}"; do
  [ -x "$p" ] || {
    echo "preload_bench: $p is missing (build it, or apt-get install redis-server redis-tools memcached nginx-light wrk)" >&2
    exit 2
  }
done
dir=$(mktemp -d /tmp/preload-bench.XXXXXX)
server=
cleanup() {
  if [ -n "$server" ]; then
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
hz=$(getconf CLK_TCK)
wrk_seconds=$(((requests + 29999) / 30000))
mc_user=() # memcached refuses to run as root without -u
if [ "$(id -u)" -eq 0 ]; then mc_user=(-u root); fi

mkdir -p "$dir/nginx"
cat >"$dir/nginx/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 2;
$(if [ "$(id -u)" -eq 0 ]; then echo "user root;"; fi)
pid nginx.pid;
error_log error.log;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path tmp; proxy_temp_path tmp; fastcgi_temp_path tmp;
  uwsgi_temp_path tmp; scgi_temp_path tmp;
  server {
    listen 127.0.0.1:$port;
    location / { return 200 "ok\n"; }
  }
}
EOF

# The server answers on the port (10 s at most).
wait_port() {
  for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    kill -0 "$server" 2>/dev/null || break
    sleep 0.05
  done
  echo "preload_bench: nothing answers on port $port" >&2
  cat "$dir/server.out" >&2
  exit 1
}

# utime + stime of the server and its children (nginx's workers), in ticks.
cpu_ticks() {
  local pids
  pids="$server $(pgrep -P "$server" | tr '\n' ' ')"
  # shellcheck disable=SC2086 # one argument per pid
  for p in $pids; do sed 's/.*) //' "/proc/$p/stat"; done | awk '{t += $12 + $13} END {print t}'
}

start_server() { # NAME PREFIX...
  local name=$1
  shift
  case $name in
    redis) "$@" /usr/bin/redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --dir "$dir" >"$dir/server.out" 2>&1 & ;;
    memcached) "$@" /usr/bin/memcached -t 4 -l 127.0.0.1 -p "$port" -U 0 "${mc_user[@]}" \
      >"$dir/server.out" 2>&1 & ;;
    nginx) "$@" /usr/sbin/nginx -p "$dir/nginx/" -c "$dir/nginx/nginx.conf" \
      -e "$dir/nginx/error.log" >"$dir/server.out" 2>&1 & ;;
  esac
  server=$!
  wait_port
}

stop_server() {
  case $1 in
    redis) redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true ;;
    *) kill -TERM "$server" ;;
  esac
  wait "$server" 2>/dev/null || true
  server=
}

# The load; prints "<requests> <seconds>".
load() {
  local t0 t1 out
  case $1 in
    redis)
      t0=$(date +%s.%N)
      redis-benchmark -p "$port" -q -n "$requests" -t get,set -c "$conns" >/dev/null 2>&1
      t1=$(date +%s.%N)
      echo "$((2 * requests)) $(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')"
      ;;
    memcached)
      out=$("$mc_load" "$port" "$conns" "$requests")
      echo "$out" | awk '{print $2, $4}'
      ;;
    nginx)
      out=$(wrk -t1 -c"$conns" -d"${wrk_seconds}s" "http://127.0.0.1:$port/")
      echo "$out" | awk '/requests in/ {n = $1} /^Requests\/sec/ {r = $2} END {print n, n / r}'
      ;;
  esac
}

warm_up() {
  case $1 in
    redis) redis-benchmark -p "$port" -q -n 2000 -t ping -c 4 >/dev/null 2>&1 ;;
    memcached) "$mc_load" "$port" 4 2000 >/dev/null ;;
    nginx) wrk -t1 -c4 -d1s "http://127.0.0.1:$port/" >/dev/null ;;
  esac
}

# run NAME SIDE [PREFIX...]: one server, one load; prints
# "NAME SIDE <requests> <seconds> <cpu ticks>".
run() {
  local name=$1 side=$2
  shift 2
  start_server "$name" "$@"
  warm_up "$name"
  local before after
  before=$(cpu_ticks)
  local result
  result=$(load "$name")
  after=$(cpu_ticks)
  stop_server "$name"
  echo "$name $side $result $((after - before))"
}

echo "preload_bench: $rounds rounds; redis-server $(redis-server --version 2>/dev/null | awk '{sub("v=", "", $3); print $3}'), memcached $(memcached -V 2>/dev/null | awk '{print $2}'), $(nginx -v 2>&1 | sed 's/.*: //'); $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "per round: redis-benchmark -n $requests -t get,set -c $conns; memcached_load $port $conns $requests; wrk -t1 -c$conns -d${wrk_seconds}s (nginx, 2 workers)"
results=$dir/results
for r in $(seq "$rounds"); do
  for name in ${servers//,/ }; do
    if [ $((r % 2)) -eq 1 ]; then
      run "$name" plain env | tee -a "$results"
      run "$name" perf-run "$perf_run" --sink file --sink-path "$dir/report.txt" -- | tee -a "$results"
    else
      run "$name" perf-run "$perf_run" --sink file --sink-path "$dir/report.txt" -- | tee -a "$results"
      run "$name" plain env | tee -a "$results"
    fi
  done
done
awk -v hz="$hz" -v order="$servers" '
function sort(a, n,   i, j, t) {
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
}
function median(a, n) { sort(a, n); return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
{ us = $5 * 1e6 / hz / $3; rps = $3 / $4 }
$2 == "plain" { pc[$1, ++np[$1]] = us; pr[$1, np[$1]] = rps }
$2 == "perf-run" { qc[$1, ++nq[$1]] = us; qr[$1, nq[$1]] = rps }
END {
  k = split(order, names, ",")
  for (x = 1; x <= k; x++) {
    s = names[x]
    n = np[s] < nq[s] ? np[s] : nq[s]
    for (i = 1; i <= n; i++) {
      a[i] = pc[s, i]; b[i] = qc[s, i]; c[i] = qc[s, i] / pc[s, i]
      d[i] = pr[s, i]; e[i] = qr[s, i]; f[i] = qr[s, i] / pr[s, i]
    }
    mc = median(c, n); cmin = c[1]; cmax = c[n]
    mf = median(f, n); fmin = f[1]; fmax = f[n]
    printf "%s: CPU per request plain %.2f us, perf-run %.2f us (medians); ratio median %.3f (rounds %.3f-%.3f): cost %.1f%% %s (<= 2%%)\n",
      s, median(a, n), median(b, n), mc, cmin, cmax, 100 * (mc - 1), mc <= 1.02 ? "PASS" : "MISS"
    printf "%s: requests/s plain %.0f, perf-run %.0f (medians); ratio median %.3f (rounds %.3f-%.3f)\n",
      s, median(d, n), median(e, n), mf, fmin, fmax
  }
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
