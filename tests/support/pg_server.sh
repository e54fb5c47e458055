#!/bin/sh
# pg_server.sh start|resume|stop DIR - the tests' own PostgreSQL (Debian's
# postgresql-15 binaries, never a server configured by hand): start runs
# initdb into DIR/data and the server, listening on a unix socket in DIR
# only (listen_addresses ''), as the unprivileged user nobody when run as
# root; resume runs the server again on DIR/data as it was left (after a
# crash: PostgreSQL recovers from its WAL); stop shuts it down (immediate:
# the data is thrown away) and removes DIR. The collector tests reach it as
# postgresql:///DB?host=DIR&user=perf (collector_rig.c, PERF_TEST_PG_DIR).
set -eu
cmd=$1
dir=$2
bin=${PERF_PG_BIN:-}
if [ -z "$bin" ]; then
  for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && bin=$d; done
fi
[ -n "$bin" ] && [ -x "$bin/initdb" ] || { echo "pg_server.sh: no initdb (install postgresql-15)" >&2; exit 1; }
as() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi
}
# fsync on: the durability the tests check is the real one.
run() {
  as "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses='' -c unix_socket_directories='$dir' -c max_connections=200 \
-c shared_buffers=32MB" start >/dev/null ||
    { cat "$dir/server.log" >&2; exit 1; }
}
case $cmd in
start)
  [ -f "$dir/data/postmaster.pid" ] && as "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown nobody "$dir"
  as "$bin/initdb" -D "$dir/data" -U perf --auth=trust --locale=C -E UTF8 >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
  run
  echo "PostgreSQL up in $dir"
  ;;
resume)
  run
  echo "PostgreSQL up again in $dir"
  ;;
stop)
  if [ -f "$dir/data/postmaster.pid" ]; then
    as "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null || true
  fi
  rm -rf "$dir"
  ;;
*)
  echo "usage: pg_server.sh start|resume|stop DIR" >&2
  exit 2
  ;;
esac
